/* nbench_get.c - random gets from one copy of a loader-managed cache, by a
 * thread pinned to one CPU: the local-versus-remote figure of bench/numa.
 *
 * Usage: nbench_get ROOT NAME CPU SECONDS [NODE]
 *
 * Pins itself to CPU, attaches (with NODE: shmkv_attach_node, the copy of
 * that node; without: the copy of the node it runs on), then looks up
 * random keys key_<i> (i < __n, an lbench_mkimage image) for SECONDS.
 * Prints one line: cpu, the node it runs on, the node of the copy it
 * read, gets, ns per get. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <shmkv.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc != 5 && argc != 6) {
		fprintf(stderr, "usage: nbench_get ROOT NAME CPU SECONDS [NODE]\n");
		return 2;
	}
	int cpu = atoi(argv[3]);
	double secs = atof(argv[4]);
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0) {
		perror("sched_setaffinity");
		return 1;
	}
	shmkv *db = NULL;
	char why[512];
	int node = argc == 6 ? atoi(argv[5]) : SHMKV_ATTACH_NODE_CURRENT;
	int err = shmkv_attach_node(argv[1], argv[2], node, 0, &db, why, sizeof why);
	if (err) {
		fprintf(stderr, "nbench_get: %s\n", why);
		return 1;
	}
	int64_t n = 0;
	if (shmkv_get_i64(db, "__n", 3, &n) != 0 || n <= 0) {
		fprintf(stderr, "nbench_get: no __n key (an lbench_mkimage image?)\n");
		return 1;
	}
	uint64_t x = 0x9e3779b97f4a7c15u ^ (uint64_t)cpu, gets = 0, sum = 0;
	double t0 = now_s(), t = t0;
	while (t - t0 < secs) {
		for (int k = 0; k < 4096; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
			char key[32];
			int kl = snprintf(key, sizeof key, "key_%llu",
					  (unsigned long long)(x % (uint64_t)n));
			shmkv_value v;
			if (shmkv_get(db, key, (size_t)kl, &v) == 0)
				sum += ((const unsigned char *)v.data)[0]; /* touch the value */
		}
		gets += 4096;
		t = now_s();
	}
	unsigned c = 0, nd = 0;
	getcpu(&c, &nd);
	printf("cpu %d node %u copy_node %d gets %llu ns_per_get %.1f (%llu)\n", cpu, nd,
	       shmkv_node(db), (unsigned long long)gets, (t - t0) * 1e9 / (double)gets,
	       (unsigned long long)(sum & 1));
	shmkv_close(db);
	return 0;
}
