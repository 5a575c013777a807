/* mem_probe.c - what one random memory access costs on this machine, the
 * floor under every reader's lookup (bench/RESULTS.md, "The machine's memory
 * under the readers"):
 *
 *   chase: K independent pointer chains through one random cycle over the
 *          lines of an anonymous buffer, stepped in turn: K = 1 is the
 *          latency of a dependent access, larger K how many misses the core
 *          keeps in flight (ns per access falls until it stops falling);
 *   file:  dependent random line reads through a read-only shared mapping
 *          of FILE (as the readers map an image), with how much of it the
 *          kernel mapped with 2 MiB entries (smaps' FilePmdMapped and
 *          ShmemPmdMapped: large folios of ext4, tmpfs with huge=).
 *
 *   mem_probe [-m MIB] [-p 4k|thp] [-r ROUNDS] [-f FILE]
 *
 * -p thp asks for transparent huge pages (MADV_HUGEPAGE; sysfs
 * transparent_hugepage/enabled must be madvise or always), 4k refuses them.
 * Times are the thread's CPU time; each figure is the median of ROUNDS (5).
 */
#include "probe_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LINE 64
#define MAX_ROUNDS 99
#define STEPS 4000000u /* accesses a round, over all chains */

static uint64_t mix(uint64_t x) /* splitmix64's finaliser */
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ x >> 33;
}

/* K chains, each K steps apart on one cycle: independent misses */
static void chase(size_t bytes, int thp, int rounds)
{
	size_t lines = bytes / LINE;
	uint64_t *b = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint32_t *perm = malloc(lines * sizeof *perm);
	if (b == MAP_FAILED || !perm || lines < 64 || lines > UINT32_MAX) {
		fprintf(stderr, "mem_probe: %zu MiB: %s\n", bytes >> 20,
			b == MAP_FAILED || !perm ? strerror(errno) : "size out of range");
		exit(1);
	}
	if (madvise(b, bytes, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0)
		fprintf(stderr, "mem_probe: madvise: %s (pages as the kernel decides)\n", strerror(errno));
	for (size_t i = 0; i < lines; i++)
		perm[i] = (uint32_t)i;
	for (size_t i = lines - 1; i > 0; i--) { /* Fisher-Yates: one random cycle */
		size_t j = mix(i) % (i + 1);
		uint32_t t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (size_t i = 0; i < lines; i++) /* a line's first word: the next line's index */
		b[(size_t)perm[i] * (LINE / 8)] = (uint64_t)perm[(i + 1) % lines] * (LINE / 8);
	static const int ks[] = {1, 2, 4, 8, 12, 16, 24, 32};
	for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
		int k = ks[ki];
		uint64_t c[32], sum = 0;
		double ns[MAX_ROUNDS];
		for (int j = 0; j < k; j++) /* starts spread evenly along the cycle */
			c[j] = (uint64_t)perm[(size_t)j * (lines / (size_t)k)] * (LINE / 8);
		for (int r = 0; r < rounds; r++) {
			unsigned steps = STEPS / (unsigned)k;
			double t0 = probe_cpu_ns();
			for (unsigned s = 0; s < steps; s++)
				for (int j = 0; j < k; j++)
					c[j] = b[c[j]];
			ns[r] = (probe_cpu_ns() - t0) / ((double)steps * k);
		}
		for (int j = 0; j < k; j++)
			sum += c[j];
		printf("chase pages=%s mib=%zu chains=%d ns_per_access=%.1f%s\n", thp ? "thp" : "4k",
		       bytes >> 20, k, probe_median(ns, rounds), sum == 1 ? " " : "");
	}
	free(perm);
	munmap(b, bytes);
}

/* kB of the mapping at p that the kernel mapped with 2 MiB entries */
static long pmd_mapped_kb(const void *p)
{
	char want[32], line[256];
	snprintf(want, sizeof want, "%lx-", (unsigned long)(uintptr_t)p);
	FILE *f = fopen("/proc/self/smaps", "r");
	long kb = -1;
	int in = 0;
	while (f && fgets(line, sizeof line, f)) {
		if (strchr(line, '-') && strchr(line, ':') && strstr(line, " r"))
			in = strncmp(line, want, strlen(want)) == 0;
		long v;
		if (in && (sscanf(line, "FilePmdMapped: %ld", &v) == 1 ||
			   sscanf(line, "ShmemPmdMapped: %ld", &v) == 1))
			kb = (kb < 0 ? 0 : kb) + v;
	}
	if (f)
		fclose(f);
	return kb;
}

static void file(const char *path, int rounds)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		fprintf(stderr, "mem_probe: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	if (st.st_size < 64 * LINE) {
		fprintf(stderr, "mem_probe: %s: %lld bytes, fewer than 64 lines\n", path,
			(long long)st.st_size);
		exit(1);
	}
	size_t len = (size_t)st.st_size, lines = len / LINE;
	const uint8_t *p = mmap(NULL, len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		fprintf(stderr, "mem_probe: %s: mmap: %s\n", path, strerror(errno));
		exit(1);
	}
	double ns[MAX_ROUNDS];
	uint64_t x = 1;
	for (int r = 0; r < rounds; r++) {
		double t0 = probe_cpu_ns();
		for (unsigned s = 0; s < STEPS / 2; s++) { /* the next line depends on this one's bytes */
			uint64_t v;
			memcpy(&v, p + (x % lines) * LINE, sizeof v);
			x = mix(x + v + s);
		}
		ns[r] = (probe_cpu_ns() - t0) / (STEPS / 2);
	}
	printf("file %s bytes=%zu pmd_mapped_kb=%ld aligned_2m=%d ns_per_access=%.1f%s\n", path, len,
	       pmd_mapped_kb(p), ((uintptr_t)p & ((2u << 20) - 1)) == 0, probe_median(ns, rounds),
	       x == 1 ? " " : "");
	munmap((void *)(uintptr_t)p, len);
}

int main(int argc, char **argv)
{
	size_t mib = 420;
	int thp = 0, rounds = 5, o;
	const char *path = NULL;
	while ((o = getopt(argc, argv, "m:p:r:f:")) != -1) {
		switch (o) {
		case 'm':
			mib = strtoul(optarg, NULL, 10);
			break;
		case 'p':
			thp = strcmp(optarg, "thp") == 0;
			if (!thp && strcmp(optarg, "4k") != 0)
				goto usage;
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 'f':
			path = optarg;
			break;
		default:
			goto usage;
		}
	}
	if (optind != argc || rounds < 1 || rounds > MAX_ROUNDS || mib < 1)
		goto usage;
	if (path)
		file(path, rounds);
	else
		chase(mib << 20, thp, rounds);
	return 0;
usage:
	fprintf(stderr, "usage: mem_probe [-m MIB] [-p 4k|thp] [-r ROUNDS (1-%d)] [-f FILE]\n", MAX_ROUNDS);
	return 2;
}
