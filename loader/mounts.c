/* mounts.c - the hugetlbfs mounts the loader can place segments in: the
 * host's mounts and page sizes as common/host.h reads them (the same as
 * shmctl doctor's), kept only where statfs still finds a hugetlbfs. */
#include "mounts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>

#include "host.h"

#define HUGETLBFS_MAGIC_ 0x958458f6

static int by_size_desc(const void *a, const void *b)
{
	const struct hmount *x = a, *y = b;
	return x->page_size < y->page_size ? 1 : x->page_size > y->page_size ? -1 : 0;
}

int mounts_hugetlb(struct hmount *out, size_t max, size_t *n, const char *only_dir)
{
	*n = 0;
	struct host_mount *m = malloc(64 * sizeof *m);
	if (!m)
		return -ENOMEM;
	size_t nm;
	int err = host_mounts("", "hugetlbfs", m, 64, &nm);
	for (size_t i = 0; !err && i < nm && *n < max; i++) {
		if (only_dir && *only_dir && strcmp(m[i].dir, only_dir))
			continue;
		struct statfs sf;
		if (statfs(m[i].dir, &sf) != 0 || (unsigned long)sf.f_type != HUGETLBFS_MAGIC_)
			continue; /* overmounted, or gone */
		uint64_t ps = m[i].page_size ? m[i].page_size : (uint64_t)sf.f_bsize;
		if (!ps)
			continue;
		snprintf(out[*n].dir, sizeof out[*n].dir, "%s", m[i].dir);
		out[*n].page_size = ps;
		(*n)++;
	}
	free(m);
	if (err)
		return err;
	qsort(out, *n, sizeof *out, by_size_desc);
	return 0;
}

long long mounts_free_hugepages(uint64_t page_size)
{
	return host_pool_available("", page_size);
}
