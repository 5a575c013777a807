/* load.h - one load: an image file into a cache (load.c). Worker thread. */
#ifndef LOADER_LOAD_H
#define LOADER_LOAD_H

#include <stddef.h>

#include "loader.h"

/* Loads the image at path (absolute) into cache name, created if new.
 * nofollow: the name is ours (a spool entry): a symbolic link is refused.
 * Only a regular file is read; nothing blocks on the path (load.c:
 * open_source()). Returns 0 or a negative error; *reply gets the JSON reply
 * (malloc'd) and why (why_len bytes) the reason of a failure ("" on
 * success). numa: a NUMA policy for this load (numa/policy.h; NULL or "":
 * the cache's numa=). */
int op_load(struct loader *L, const char *name, const char *path, int nofollow,
	    const char *numa, char **reply, char *why, size_t why_len);

#endif /* LOADER_LOAD_H */
