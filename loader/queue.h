/* queue.h - the worker's job queue and its replies (queue.c), guarded by
 * L->qlock: jobs pushed from any thread and run by the worker (worker.c)
 * one at a time; replies posted by the worker, delivered by the main
 * thread. */
#ifndef LOADER_QUEUE_H
#define LOADER_QUEUE_H

#include <stdint.h>

#include "loader.h"

struct job *job_new(enum job_kind kind, const char *name);
void worker_push(struct loader *L, struct job *j);
/* worker_push() from a thread of its own (compact.c's), unless the loader
 * stops: then -ECANCELED and j stays the caller's (the worker never runs
 * it); 0 once queued (the worker's then). The two are decided under
 * L->qlock, so a job is either run or cleaned up by worker_stop(). */
int worker_push_live(struct loader *L, struct job *j);
/* The jobs of *list (linked by next) at the queue's end, taken from it at
 * once under L->qlock (a list the lock guards too: no moment in neither);
 * *list NULL. */
void worker_push_all(struct loader *L, struct job **list);
/* Posts reply line (malloc'd, taken; NULL: out of memory) to client (0:
 * none, line freed) for the main thread to deliver. Worker thread. */
void worker_post(struct loader *L, uint64_t client, char *line, int failed);
struct done *worker_take_done(struct loader *L);

#endif /* LOADER_QUEUE_H */
