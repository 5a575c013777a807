/* status.h - JSON of list and status (status.c). Main thread; takes L->lock. */
#ifndef LOADER_STATUS_H
#define LOADER_STATUS_H

#include "loader.h"

char *status_list(struct loader *L);
char *status_cache(struct loader *L, const char *name);

#endif /* LOADER_STATUS_H */
