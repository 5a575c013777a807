/* spool.h - the spool directory (spool.c). Main thread. */
#ifndef LOADER_SPOOL_H
#define LOADER_SPOOL_H

#include <stddef.h>

#include "loader.h"

int spool_open(struct loader *L, char *why, size_t why_len);
void spool_scan(struct loader *L);
void spool_event(struct loader *L);

#endif /* LOADER_SPOOL_H */
