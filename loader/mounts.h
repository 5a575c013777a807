/* mounts.h - hugetlbfs mounts from /proc/mounts, with their page sizes. */
#ifndef LOADER_MOUNTS_H
#define LOADER_MOUNTS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

struct hmount {
	char dir[PATH_MAX];
	uint64_t page_size; /* the mount's pagesize= (else statfs f_bsize) */
};

/* Fills out[0..*n) with the hugetlbfs mounts, largest page size first
 * (only == only_dir when only_dir is not ""). Returns 0 or -errno. */
int mounts_hugetlb(struct hmount *out, size_t max, size_t *n, const char *only_dir);
/* Free huge pages of that size (free - reserved), or -1 if unknown. */
long long mounts_free_hugepages(uint64_t page_size);

#endif /* LOADER_MOUNTS_H */
