/* segname.h - the names of the loader's segment files, which shmctl reads
 * back from /proc (`cache readers`) and the loader's reader count.
 *
 *   DIR/shmkv/shmkv-RRRRRRRR-CACHE-LOADID[.loading]
 *
 * DIR/shmkv (or DIR/shmkv.XXXXXX when that name is taken) is the loader's
 * own directory in a hugetlbfs mount or shm_dir (loader/segment.h);
 * RRRRRRRR: the first 8 hex digits of XXH3-64 (seed 0) of the canonical
 * (realpath) root, so loaders with different roots never touch each other's
 * files; CACHE the cache name; LOADID the decimal load id (per cache, grows
 * with every load); ".loading" while the loader writes it. The loader
 * creates them (loader/segment.c); this is the one place the rule lives. */
#ifndef SHMKV_COMMON_SEGNAME_H
#define SHMKV_COMMON_SEGNAME_H

#include <stdbool.h>
#include <stddef.h>

#define SEGNAME_LOADING_SUFFIX ".loading"
/* "shmkv-RRRRRRRR-" plus a cache name and '-' */
#define SEGNAME_ROOT_PREFIX_LEN 15

/* "shmkv-RRRRRRRR-" for a canonical root path, into out[len] (16 bytes do). */
void segname_root_prefix(const char *canon_root, char *out, size_t len);
/* "shmkv-RRRRRRRR-CACHE-": the prefix of every segment of one cache.
 * Returns false when out[len] is too short. */
bool segname_cache_prefix(const char *canon_root, const char *cache, char *out, size_t len);
/* Is base (a file name, no directory) cache_prefix + LOADID, or that plus
 * SEGNAME_LOADING_SUFFIX (then *loading is set)? */
bool segname_match(const char *base, const char *cache_prefix, bool *loading);

#endif /* SHMKV_COMMON_SEGNAME_H */
