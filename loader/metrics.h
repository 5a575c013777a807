/* metrics.h - Prometheus text exposition of the loader's caches (metrics.c):
 * the one owner of the metric names, for the metrics file the loader keeps
 * current (metrics_file) and for the `metrics` control verb behind
 * `shmctl cache stats --prometheus`. Main thread; takes L->lock. */
#ifndef LOADER_METRICS_H
#define LOADER_METRICS_H

#include "loader.h"

/* The whole exposition in *out, malloc'd (the caller frees it). Returns 0,
 * -ENOMEM, or -EAGAIN: the reader counts are not fresh; a scan was requested
 * and readers_collect() says when to call again (readers.h). */
int metrics_text(struct loader *L, char **out);
/* {"ok": true, "text": THE EXPOSITION}\n for the `metrics` verb in *reply;
 * returns as metrics_text(). */
int metrics_reply(struct loader *L, char **reply);
/* At stop (worker joined): the file says shmkv_up 0, the caches' figures are
 * gone with the loader (the segments stay and readers keep serving). */
void metrics_stop(struct loader *L);
/* Milliseconds until the metrics file is due (-1: no file configured, or it
 * waits for a reader scan, whose end wakes the loop). */
int metrics_wait_ms(struct loader *L);
/* Rewrites the metrics file when it is due or a job ended (L->metrics_dirty);
 * force: now. A failure is logged once per new reason and kept in
 * L->metrics_error; the loader goes on. */
void metrics_tick(struct loader *L, int force);

#endif /* LOADER_METRICS_H */
