/* compact.h - compaction of a changed cache (compact.c): its base and
 * overlays merged into a new base off the readers' path. Worker thread. */
#ifndef LOADER_COMPACT_H
#define LOADER_COMPACT_H

#include <stddef.h>

#include "loader.h"

/* Compacts cache name: its base and overlays (the lower, then the top)
 * merged (shmkv_build_compact, the
 * builder's default memory limit) into a new base, loaded and published as
 * a full load is, with no overlay; deltas of the image the cache was loaded
 * from, and its chain, apply after it as before (loader/README.md,
 * "Compaction"). automatic: queued by a publish past the cache's bound
 * (nothing to do is then no reply). */
int op_compact(struct loader *L, const char *name, int automatic, char **reply, char *why,
	       size_t why_len);
/* 1 once c's overlays passed the cache's bound (compact_entries keys
 * changed, or compact_ratio of the base's bytes): the worker then queues a compaction
 * (worker.c, after the publish's reply). */
int compact_due(const struct cache *c);

#endif /* LOADER_COMPACT_H */
