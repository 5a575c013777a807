/* worker.h - the worker thread (worker.c); its job queue and replies are
 * queue.h's (guarded by L->qlock; push and take from the main thread). */
#ifndef LOADER_WORKER_H
#define LOADER_WORKER_H

#include <stddef.h>

#include "loader.h"
#include "queue.h"

int worker_start(struct loader *L, char *why, size_t why_len);
void worker_stop(struct loader *L);
/* 1 while j->path is still the file its spool event named (src_dev/src_ino):
 * not handled yet, and not replaced by a newer file of the same name. */
int job_source_current(const struct job *j);

#endif /* LOADER_WORKER_H */
