/* status.h - JSON of list and status (status.c). Main thread; takes L->lock
 * (status_take: the caller holds it). */
#ifndef LOADER_STATUS_H
#define LOADER_STATUS_H

#include <stdbool.h>

#include "compact.h"
#include "loader.h"

/* A copy of a cache taken under L->lock, so that /proc is scanned without it. */
struct cache_snap {
	struct cache c;
	uint64_t done, total; /* load progress; total 0: no load runs */
	struct expiry_figs exp; /* expiry of the current generation at the time taken
				   (c.exp.times is not copied: NULL here) */
	struct compact_waiting wait; /* its compactions waiting to start */
};
/* Copies what status and metrics show; L->lock held (L->qlock taken). */
void status_take(struct loader *L, const struct cache *c, struct cache_snap *s);

char *status_list(struct loader *L);
/* The status reply of cache name in *reply (malloc'd; "no cache" included).
 * Returns 0, -ENOMEM, or -EAGAIN: the reader counts are not fresh; a scan
 * was requested, call again once readers_collect() says it ended, then with
 * any_path (readers.h). */
int status_cache(struct loader *L, const char *name, bool any_path, char **reply);

#endif /* LOADER_STATUS_H */
