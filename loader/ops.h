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

#endif /* LOADER_OPS_H */
