/* worker.h - the worker thread and its job queue (worker.c). The queue and
 * the replies are guarded by L->qlock; push and take from the main thread. */
#ifndef LOADER_WORKER_H
#define LOADER_WORKER_H

#include <stddef.h>

#include "loader.h"

int worker_start(struct loader *L, char *why, size_t why_len);
void worker_push(struct loader *L, struct job *j);
struct done *worker_take_done(struct loader *L);
void worker_stop(struct loader *L);
struct job *job_new(enum job_kind kind, const char *name);
/* 1 while j->path is still the file its spool event named (src_dev/src_ino):
 * not handled yet, and not replaced by a newer file of the same name. */
int job_source_current(const struct job *j);

#endif /* LOADER_WORKER_H */
