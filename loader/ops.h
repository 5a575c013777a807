/* ops.h - the worker's other operations (ops.c): reload, rollback, drop,
 * config apply, startup loads. Worker thread; each reply is malloc'd JSON. */
#ifndef LOADER_OPS_H
#define LOADER_OPS_H

#include "config.h"
#include "loader.h"

int op_reload(struct loader *L, const char *name, char **reply);
int op_rollback(struct loader *L, const char *name, char **reply);
int op_drop(struct loader *L, const char *name, char **reply);
void op_config(struct loader *L, struct loader_conf *conf); /* takes conf */
void op_start(struct loader *L);
/* Caches that never served, are not configured and whose loads failed are
 * forgotten failed_expire after the first failure: op_expire_due() is when
 * the next one is due (CLOCK_MONOTONIC ms; 0: none), op_expire() forgets
 * those due (logged). Worker thread. */
uint64_t op_expire_due(const struct loader *L);
void op_expire(struct loader *L);

#endif /* LOADER_OPS_H */
