/* load.h - one load: an image file into a cache (load.c). Worker thread. */
#ifndef LOADER_LOAD_H
#define LOADER_LOAD_H

#include <stddef.h>

#include "loader.h"

/* Loads the image at path (absolute) into cache name, created if new.
 * nofollow: the name is ours (a spool entry): a symbolic link is refused.
 * Only a regular file is read; nothing blocks on the path (load.c:
 * open_source()). Returns 0 or a negative error; *reply gets the JSON reply
 * (malloc'd) and why (why_len bytes) the reason of a failure ("" on
 * success). numa: a NUMA policy for this load (numa/policy.h; NULL or "":
 * the cache's numa=). */
int op_load(struct loader *L, const char *name, const char *path, int nofollow,
	    const char *numa, char **reply, char *why, size_t why_len);

/* op_load() into cache name that serves nothing yet, up to the publish:
 * the cache holds the new generation as current (state file saved, log
 * line written) but its control segment does not name it yet. The caller
 * publishes it with changes over it (overlay.c, a durable log replayed at
 * start: readers never see the base without them) or alone with
 * load_publish_staged(). */
int op_load_staged(struct loader *L, const char *name, const char *path, int nofollow,
		   char **reply, char *why, size_t why_len);

/* op_load() of a compaction's new base at path for cache c (compact.c,
 * and a compaction finished at the start: overlay.c), published with lower
 * (NULL: none), a delta of it loaded by load_segments() (the catch-up), as
 * one generation: readers never see the base without it. What deltas apply
 * to after it: the origin (origin_sum, origin_size: the image the base was
 * compacted from), set before the publish, so that the state file saved
 * before it carries it (publish_new: a kill right after the publish leaves
 * it there for adopt.c), and the chain (chain_last, chain_seq); on failure
 * the origin c had. lower is the cache's once published; on failure the
 * caller unlinks it. */
int op_load_compacted(struct loader *L, struct cache *c, const char *path,
		      const struct seg_info *lower, uint64_t origin_sum, uint64_t origin_size,
		      uint64_t chain_last, uint64_t chain_seq, char **reply, char *why,
		      size_t why_len);

/* Publishes the staged generation of c (op_load_staged()) as it is. */
int load_publish_staged(struct loader *L, struct cache *c, char *why, size_t why_len);

/* Reads the image at path (a file of the loader's own) into new segments
 * of cache c, verified as op_load() verifies, placed by the cache's memory
 * and NUMA policies, committed under their final names, and published
 * nowhere: *first and more[0..*nmore) (room for SHMKV_CTL_MAX_SEGMENTS - 1)
 * are the caller's to publish or unlink. 0 or an error with why. */
int load_segments(struct loader *L, struct cache *c, const char *path, struct seg_info *first,
		  struct seg_info *more, unsigned *nmore, char *why, size_t why_len);

#endif /* LOADER_LOAD_H */
