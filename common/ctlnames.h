/* ctlnames.h - the caches under a root as its control segments name them
 * (ROOT/NAME.ctl, lib/PROTOCOL.md): the one listing of a root's directory,
 * for shmctl's cache list without a loader and shmkv-http's GET /v1/caches. */
#ifndef SHMKV_COMMON_CTLNAMES_H
#define SHMKV_COMMON_CTLNAMES_H

#include <stddef.h>

/* The names (sorted, each passing shmkv_name_check: the loader's temporary
 * files are left out) into *names (malloc'd; free with ctlnames_free), their
 * count into *n. 0, or -errno (opendir's; -ENOMEM). */
int ctlnames_list(const char *root, char ***names, size_t *n);
void ctlnames_free(char **names, size_t n);

#endif
