/* bpf.h - export of caches to BPF programs (bpf.c; lib/shmkv_bpf.h is the
 * map layout). The worker runs every export; status reads the figures under
 * L->lock. */
#ifndef LOADER_BPF_H
#define LOADER_BPF_H

#include "bpf_export.h"

struct loader;
struct cache;
struct json;

/* worker: after a publish (load, reload, rollback): exports the new
 * generation when the cache is exported. Readers already have it. */
void bpf_after_publish(struct loader *L, const char *name);
/* worker: the cache is about to be dropped: unpins its table, forgets the
 * export asked with shmctl (ROOT/NAME.bpf) */
void bpf_before_drop(struct loader *L, const char *name);
/* worker: after start and config changes: every cache to its wanted state */
void bpf_sync_all(struct loader *L);
/* worker: the socket verbs; *reply is the JSON line */
int op_bpf_export(struct loader *L, const char *name, const char *prefix, const char *max_value,
		  char **reply);
int op_bpf_unexport(struct loader *L, const char *name, char **reply);
/* main thread: `bpf_status [NAME]` */
char *bpf_status(struct loader *L, const char *name);
/* status.c: the "bpf" object of a cache's status (a copy taken under the lock) */
void bpf_status_fields(struct json *j, const struct loader *L, const struct cache *c);

#endif /* LOADER_BPF_H */
