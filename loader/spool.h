/* spool.h - the spool directory (spool.c). Main thread. */
#ifndef LOADER_SPOOL_H
#define LOADER_SPOOL_H

#include <stddef.h>

#include "loader.h"

int spool_open(struct loader *L, char *why, size_t why_len);
void spool_scan(struct loader *L);
void spool_event(struct loader *L);
/* While the spool directory is gone: how long the event loop may sleep
 * (ms; -1 while it is watched), and the retry spool_tick() makes after each
 * wake (the parent's watch misses a spool recreated with mkdir -p). */
int spool_wait_ms(const struct loader *L);
void spool_tick(struct loader *L);

#endif /* LOADER_SPOOL_H */
