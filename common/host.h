/* host.h - facts about the host that the loader, shmctl (hugepages, doctor)
 * and numa/ all read: mounts from /proc/mounts (with their \ooo escapes
 * decoded), the default huge page size, huge page pools per page size (the
 * whole host's or one node's), and the size notation of pagesize= options.
 * One owner, so that doctor and the loader never disagree about a mount.
 *
 * Every reader takes the root that stands for "/" ("" on a host; shmctl
 * passes $SHMKV_HOST_ROOT, tests a fake tree): nothing here reads the
 * environment or keeps state. */
#ifndef SHMKV_COMMON_HOST_H
#define SHMKV_COMMON_HOST_H

#include <stddef.h>
#include <stdint.h>

#define HOST_MAX_POOLS 8 /* page sizes per pool directory */

struct host_mount {
	char dir[1024];      /* decoded: "\040" is a space again */
	char type[64];
	char opts[1024];
	uint64_t page_size;  /* hugetlbfs: its pagesize=, else the default size; else 0 */
};

struct host_pool {
	uint64_t page_size;                /* bytes */
	uint64_t nr, free, resv, surplus;  /* resv, surplus: 0 where the kernel has none (per node) */
};

/* $SHMKV_HOST_ROOT when set and not empty, else "": for shmctl's callers
 * (a container with the host's trees under /host; the tests' fake host). */
const char *host_root_env(void);
/* root + path into buf[len]. Returns 0, or -ENAMETOOLONG (buf holds a
 * truncated path, never read). */
int host_path(char *buf, size_t len, const char *root, const char *path);

/* The first number in a file (sysfs, procfs) into *out. Returns 0, -errno,
 * or -EINVAL (no number). */
int host_read_u64(const char *path, uint64_t *out);

/* Decodes /proc/mounts' escapes (\040 space, \011 tab, \012 newline, \134
 * backslash: any \ooo) in place. */
void host_unescape(char *s);
/* "2M", "1G", "2048K", "2048kB", "4MiB", "1T", "2097152": a size in bytes
 * (binary units) into *out: the one parser of sizes (pagesize= options,
 * shmctl --page-size, the loader's config). Returns 0, or -EINVAL (empty,
 * not a number, another suffix) / -ERANGE (past 2^64). 0 parses: callers
 * that need a page size refuse it. */
int host_parse_size(const char *s, uint64_t *out);
/* "250ms", "30s", "5m", "2h", "1d", "10" (no suffix: seconds): a duration
 * into milliseconds, the one parser of durations (the loader's config,
 * shmkv-http's). Returns 0, or -EINVAL (empty, not a number, another
 * suffix, past 2^64 ms). */
int host_parse_duration_ms(const char *s, uint64_t *ms);
/* A page size's short name: "4K", "2M", "1G" (the pagesize= spelling). */
const char *host_size_name(uint64_t bytes, char *buf, size_t len);
/* The value of option name= in a comma-separated list into buf (0), or
 * -ENOENT. */
int host_mount_opt(const char *opts, const char *name, char *buf, size_t len);

/* Hugepagesize of ROOT/proc/meminfo in bytes (what vm.nr_hugepages and a
 * hugetlbfs mount without pagesize= use), or 0 when there is none. */
uint64_t host_default_hugepage_size(const char *root);
/* The mounts of type (NULL or "": every type) in ROOT/proc/mounts, in its
 * order, into out[0..*n) (at most max; a directory listed twice once, the
 * first). Returns 0, or -errno when the file cannot be read. */
int host_mounts(const char *root, const char *type, struct host_mount *out, size_t max,
		size_t *n);

/* The pools of a hugepages directory (ROOT/sys/kernel/mm/hugepages, or
 * SYSFS/devices/system/node/nodeN/hugepages): one per hugepages-NkB entry,
 * smallest page size first, at most max. nr_hugepages and free_hugepages
 * must be readable; resv_ and surplus_ read 0 where absent. Returns 0, or
 * -errno (-ENOENT: no such directory) with why naming the file. */
int host_pools(const char *dir, struct host_pool *out, size_t max, size_t *n, char *why,
	       size_t why_len);
/* Free huge pages of page_size that are not reserved (free - resv) in the
 * host's pool under root, or -1 when there is no such pool. */
long long host_pool_available(const char *root, uint64_t page_size);

#endif /* SHMKV_COMMON_HOST_H */
