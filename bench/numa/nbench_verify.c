/* nbench_verify.c - the parts of binding and verifying one copy, timed
 * apart (bench/numa/RESULTS.md): a file of MIB MiB in DIR (tmpfs, 4 KiB
 * pages, or a hugetlbfs mount with PAGE = 2097152) bound to node 0 as the
 * loader binds a copy (numa/bind.h), written, then every page looked up
 * with move_pages (nplace_query).
 *
 * Usage: nbench_verify MIB FILE PAGE     (FILE is created and unlinked) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bind.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: nbench_verify MIB FILE PAGE\n");
		return 2;
	}
	size_t len = (size_t)atoll(argv[1]) << 20, ps = (size_t)atoll(argv[3]);
	int fd = open(argv[2], O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || unlink(argv[2]) || ftruncate(fd, (off_t)len)) {
		perror(argv[2]);
		return 1;
	}
	double t0 = now();
	nbind_thread(NBIND_BIND, 1);
	if (ps == 4096 && posix_fallocate(fd, 0, (off_t)len))
		return 1;
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED || nbind_range(m, len, NBIND_BIND, 1) ||
	    (ps != 4096 && nbind_populate(m, len)))
		return 1;
	nbind_thread(NBIND_NONE, 0);
	double t1 = now();
	memset(m, 1, len);
	double t2 = now();
	uint64_t per[NTOPO_MAX_NODES], absent = 0;
	if (nplace_query(m, len, ps, per, &absent))
		return 1;
	double t3 = now();
	printf("%zu MiB ps %zu: bind+alloc %.1f ms, write %.1f ms, move_pages query %.1f ms "
	       "(node0 %llu absent %llu)\n", len >> 20, ps, (t1 - t0) * 1e3, (t2 - t1) * 1e3,
	       (t3 - t2) * 1e3, (unsigned long long)per[0], (unsigned long long)absent);
	return 0;
}
