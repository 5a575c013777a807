/* lbench_copy.c - the memcpy baseline of the load benchmark.
 *
 * Usage: lbench_copy --src FILE --dir DIR [--reps N] [--chunk SIZE] [--no-pretouch]
 *        lbench_copy --touch-only SIZE --dir DIR
 *
 * Copies FILE from a page-cache-warm read-only mapping into a fresh segment
 * in DIR, created the way shmkv-loader creates its segments
 * (loader/segment.c): a new file ftruncate'd to the size rounded up to the
 * page size, posix_fallocate'd when DIR is tmpfs, mapped MAP_SHARED
 * read-write. DIR is a hugetlbfs mount (page size from statfs) or a tmpfs
 * directory. Per repetition (segment created, used, unmapped and unlinked):
 *
 *   alloc_s      create + ftruncate (+ fallocate on tmpfs) + mmap
 *   copy_s       memcpy of the whole file into the fresh mapping (page faults,
 *                and on hugetlbfs the zeroing of each huge page, included)
 *   total_s      alloc_s + copy_s: what the memcpy "load" costs
 *   hot_s        a second memcpy into the same, now mapped, segment
 *   copyhash_s   alloc + memcpy and XXH3 of each chunk (as a loader reading
 *                from the page cache would do), in a second fresh segment
 *   touch_s      alloc + one write per 4 KiB page, nothing copied (the cost
 *                of faulting in and zeroing the memory), in a third one
 *
 * Before the repetitions: the file is read once (warming the page cache;
 * reported as warm_read_s), mapped and populated (map_s), and hashed with
 * XXH3 in one pass over the mapping (xxh3_s). Prints "key=value" lines: one
 * per repetition and a "median" line. All times CLOCK_MONOTONIC.
 *
 * Pre-touch (untimed, before each timed step unless --no-pretouch): a
 * segment of the same size is created, written once per 4 KiB and removed.
 * On a VM that hands free memory back to its host (virtio-balloon free page
 * reporting), memory that sat free for a few seconds costs a host fault per
 * page at its next use; the pre-touch makes the timed step reuse memory that
 * is backed, as it would be on bare metal. --touch-only SIZE does only that
 * (run.sh calls it right before each timed loader load).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "lbench_util.h"
#include "shmkv.h" /* xxhash.h, inlined */

#define HUGETLBFS_MAGIC_ 0x958458f6
#define TMPFS_MAGIC_ 0x01021994

struct seg {
	char path[4096];
	int fd;
	uint8_t *map;
	uint64_t map_size;
};

static int hugetlb;
static uint64_t page_size;

static double secs(uint64_t a, uint64_t b)
{
	return (double)(b - a) / 1e9;
}

static void seg_new(struct seg *s, const char *dir, uint64_t size, int n)
{
	snprintf(s->path, sizeof s->path, "%s/lbench-copy-%d-%d", dir, (int)getpid(), n);
	s->map_size = (size + page_size - 1) / page_size * page_size;
	s->fd = open(s->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (s->fd < 0)
		lb_die("%s: %s", s->path, strerror(errno));
	if (ftruncate(s->fd, (off_t)s->map_size) != 0)
		lb_die("%s: ftruncate: %s", s->path, strerror(errno));
	if (!hugetlb) {
		int e = posix_fallocate(s->fd, 0, (off_t)s->map_size);
		if (e)
			lb_die("%s: fallocate: %s", s->path, strerror(e));
	}
	s->map = mmap(NULL, s->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (s->map == MAP_FAILED)
		lb_die("%s: mmap %llu: %s", s->path, (unsigned long long)s->map_size,
		       strerror(errno));
}

static void seg_free(struct seg *s)
{
	munmap(s->map, s->map_size);
	close(s->fd);
	unlink(s->path);
}

/* A segment of size bytes in dir, written once per 4 KiB, then removed. */
static void pretouch(const char *dir, uint64_t size)
{
	struct seg s;
	seg_new(&s, dir, size, 9);
	for (uint64_t off = 0; off < s.map_size; off += 4096)
		s.map[off] = 1;
	seg_free(&s);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	const char *src = NULL, *dir = NULL;
	int reps = 3, pre = 1;
	uint64_t chunk = 4u << 20, touch_only = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--src") && i + 1 < argc)
			src = argv[++i];
		else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--chunk") && i + 1 < argc)
			chunk = lb_parse_size(argv[++i]);
		else if (!strcmp(argv[i], "--no-pretouch"))
			pre = 0;
		else if (!strcmp(argv[i], "--touch-only") && i + 1 < argc)
			touch_only = lb_parse_size(argv[++i]);
		else
			lb_die("usage: %s --src FILE --dir DIR [--reps N] [--chunk SIZE] "
			       "[--no-pretouch] | --touch-only SIZE --dir DIR", argv[0]);
	}
	if (!dir || (!touch_only && (!src || reps < 1 || reps > 100 || !chunk)))
		lb_die("usage: %s --src FILE --dir DIR [--reps N (1..100)] [--chunk SIZE] "
		       "[--no-pretouch] | --touch-only SIZE --dir DIR", argv[0]);
	struct statfs sf;
	if (statfs(dir, &sf) != 0)
		lb_die("%s: %s", dir, strerror(errno));
	hugetlb = (unsigned long)sf.f_type == HUGETLBFS_MAGIC_;
	if (!hugetlb && (unsigned long)sf.f_type != TMPFS_MAGIC_)
		lb_die("%s is neither hugetlbfs nor tmpfs", dir);
	page_size = hugetlb ? (uint64_t)sf.f_bsize : 4096;
	if (touch_only) {
		pretouch(dir, touch_only);
		return 0;
	}

	int fd = open(src, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0)
		lb_die("%s: %s", src, strerror(errno));
	uint64_t size = (uint64_t)st.st_size;

	/* warm the page cache: read the whole file once */
	uint8_t *buf = malloc(chunk);
	if (!buf)
		lb_die("out of memory");
	uint64_t t0 = lb_now_ns(CLOCK_MONOTONIC);
	for (uint64_t off = 0; off < size;) {
		ssize_t r = pread(fd, buf, chunk, (off_t)off);
		if (r <= 0)
			lb_die("read %s: %s", src, r ? strerror(errno) : "short file");
		off += (uint64_t)r;
	}
	uint64_t t1 = lb_now_ns(CLOCK_MONOTONIC);
	free(buf);
	const uint8_t *in = mmap(NULL, size, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (in == MAP_FAILED)
		lb_die("mmap %s: %s", src, strerror(errno));
	uint64_t t2 = lb_now_ns(CLOCK_MONOTONIC);
	volatile uint64_t sink = XXH3_64bits(in, size);
	uint64_t t3 = lb_now_ns(CLOCK_MONOTONIC);
	(void)sink;
	printf("file=%s bytes=%llu kind=%s page_size=%llu pretouch=%d warm_read_s=%.3f map_s=%.3f "
	       "xxh3_s=%.3f\n", src, (unsigned long long)size, hugetlb ? "hugetlb" : "shm",
	       (unsigned long long)page_size, pre, secs(t0, t1), secs(t1, t2), secs(t2, t3));

	double *alloc = calloc((size_t)reps, sizeof(double) * 6);
	if (!alloc)
		lb_die("out of memory");
	double *copy = alloc + reps, *total = copy + reps, *hot = total + reps,
	       *copyhash = hot + reps, *touch = copyhash + reps;
	for (int r = 0; r < reps; r++) {
		struct seg s;
		if (pre)
			pretouch(dir, size);
		uint64_t a = lb_now_ns(CLOCK_MONOTONIC);
		seg_new(&s, dir, size, 0);
		uint64_t b = lb_now_ns(CLOCK_MONOTONIC);
		memcpy(s.map, in, size);
		uint64_t c = lb_now_ns(CLOCK_MONOTONIC);
		memcpy(s.map, in, size);
		uint64_t d = lb_now_ns(CLOCK_MONOTONIC);
		if (memcmp(s.map + size / 2, in + size / 2, 4096))
			lb_die("copy differs");
		seg_free(&s);
		alloc[r] = secs(a, b);
		copy[r] = secs(b, c);
		total[r] = secs(a, c);
		hot[r] = secs(c, d);

		XXH3_state_t *h = XXH3_createState();
		if (pre)
			pretouch(dir, size);
		a = lb_now_ns(CLOCK_MONOTONIC);
		seg_new(&s, dir, size, 1);
		XXH3_64bits_reset(h);
		for (uint64_t off = 0; off < size; off += chunk) {
			size_t n = (size_t)(size - off < chunk ? size - off : chunk);
			memcpy(s.map + off, in + off, n);
			XXH3_64bits_update(h, s.map + off, n);
		}
		sink = XXH3_64bits_digest(h);
		b = lb_now_ns(CLOCK_MONOTONIC);
		XXH3_freeState(h);
		seg_free(&s);
		copyhash[r] = secs(a, b);

		if (pre)
			pretouch(dir, size);
		a = lb_now_ns(CLOCK_MONOTONIC);
		seg_new(&s, dir, size, 2);
		for (uint64_t off = 0; off < s.map_size; off += 4096)
			s.map[off] = 1;
		b = lb_now_ns(CLOCK_MONOTONIC);
		seg_free(&s);
		touch[r] = secs(a, b);
		printf("rep=%d alloc_s=%.3f copy_s=%.3f total_s=%.3f hot_s=%.3f copyhash_s=%.3f "
		       "touch_s=%.3f\n", r, alloc[r], copy[r], total[r], hot[r], copyhash[r], touch[r]);
		fflush(stdout);
	}
	printf("median alloc_s=%.3f copy_s=%.3f total_s=%.3f hot_s=%.3f copyhash_s=%.3f "
	       "touch_s=%.3f\n", median(alloc, reps), median(copy, reps), median(total, reps),
	       median(hot, reps), median(copyhash, reps), median(touch, reps));
	free(alloc);
	munmap((void *)(uintptr_t)in, size);
	close(fd);
	return 0;
}
