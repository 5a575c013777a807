/* status.h - JSON of list and status (status.c). Main thread; takes L->lock
 * (status_take: the caller holds it). */
#ifndef LOADER_STATUS_H
#define LOADER_STATUS_H

#include "loader.h"

/* A copy of a cache taken under L->lock, so that /proc is scanned without it. */
struct cache_snap {
	struct cache c;
	uint64_t done, total; /* load progress; total 0: no load runs */
};
/* Copies what status and metrics show; L->lock held. */
void status_take(const struct cache *c, struct cache_snap *s);

char *status_list(struct loader *L);
char *status_cache(struct loader *L, const char *name);

#endif /* LOADER_STATUS_H */
