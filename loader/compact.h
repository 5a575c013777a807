/* compact.h - compaction of a changed cache (compact.c): its base and
 * overlays merged into a new base on a thread of its own, then caught up
 * and published by the worker (loader/README.md, "Compaction"). Worker
 * thread unless said otherwise. */
#ifndef LOADER_COMPACT_H
#define LOADER_COMPACT_H

#include <stddef.h>
#include <stdint.h>

#include "loader.h"

/* op_compact()'s result when the reply comes later (the compaction runs,
 * or waits for the one running): the worker posts none now. */
#define COMPACT_LATER 1

/* Starts compacting cache j->name: a snapshot of its generation (the
 * files held open), merged off the worker (shmkv_build_compact, the
 * builder's default memory limit) into a new base; op_compact_done() then
 * publishes it with the changes made meanwhile. At most one compaction
 * runs per loader: a request for another cache waits for it to end (then
 * runs), one for the same cache is answered with it (up to 16 at once).
 * j->client 0: automatic, queued by a publish past the cache's bound
 * (nothing to do is then no reply). Returns COMPACT_LATER (j->client is
 * answered when it is published or cancelled), or 0 or an error with
 * *reply (nothing to compact, refused). */
int op_compact(struct loader *L, const struct job *j, char **reply);
/* JOB_COMPACT_DONE: the merge is over (j->compaction): discarded if
 * cancelled, else the catch-up (catchup.h: the changes published since the
 * snapshot, a delta of the new base) built, and the new base loaded and
 * published with it as its lower overlay, as one generation (durable: the
 * new base kept and the log naming it first). The waiting requests are
 * answered and the compaction requests that waited queued again. 0, or an
 * error (-ECANCELED: cancelled). */
int op_compact_done(struct loader *L, struct job *j);
/* A rollback, load, reload or drop of cache name went through: the
 * compaction of name that runs (if any) is cancelled, its requests
 * answered with an error naming why, its result discarded when its merge
 * ends (the merge itself cannot be stopped midway: it runs to its end on
 * its thread, then its files go). */
void compact_cancel(struct loader *L, const char *name, const char *why);
/* 1 while a compaction of cache name runs (not cancelled). */
int compact_running(const struct loader *L, const char *name);
/* The compactions of a cache that wait to start: requests and automatic
 * ones in the worker's queue (behind its other jobs), or waiting for the
 * compaction of another cache to end (L->compact_wait). */
struct compact_waiting {
	uint64_t since;     /* unix time the oldest was first queued; 0: none waits */
	int by_request;     /* the oldest: an operator's request (1) or the bound (0) */
	unsigned requests;  /* operators' requests waiting */
	int bound;          /* an automatic one (the bound) waits */
	/* the oldest waits for the compaction of this cache to end; "": it is
	 * in the worker's queue */
	char behind[SHMKV_CACHE_NAME_MAX + 1];
};
/* Fills *w for cache name. Any thread; takes L->qlock (L->lock may be
 * held: status.c:status_take()). A compaction the worker has just taken
 * from its queue is in neither *w nor compact_since for the moment it
 * takes to open its files. */
void compact_waiting(struct loader *L, const char *name, struct compact_waiting *w);
/* 1 once c's overlays passed the cache's bound (compact_entries keys
 * changed, or compact_ratio of the base's bytes): the worker then queues a compaction
 * (worker.c, after the publish's reply). */
int compact_due(const struct cache *c);
/* Frees the compaction a JOB_COMPACT_DONE job carries (the loader stops
 * with it queued; worker.c). Any thread once the worker is gone. */
void compact_job_free(struct job *j);
/* The worker's last act when the loader stops: the requests that waited
 * are dropped (server.c answers them "stopping"); a merge still running
 * is abandoned: its thread frees what it holds once it ends, or the
 * process exits first (temporaries then go at the next start). */
void compact_stopped(struct loader *L);

#endif /* LOADER_COMPACT_H */
