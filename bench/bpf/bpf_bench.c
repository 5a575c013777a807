/* bpf_bench.c - lookups of a cache exported to BPF, timed by
 * BPF_PROG_TEST_RUN, against the user-space reader on the same keys.
 *
 * Usage: bpf_bench OBJ PIN ROOT CACHE [REPEAT [ROUNDS]]
 *
 * OBJ is lookup.bpf.o, PIN the exported table, ROOT/CACHE the same cache for
 * shmkv_attach. 4096 keys are taken evenly over the image (of those the
 * export holds: key <= 60 bytes, value <= 256); misses are the same keys with
 * "~" appended. One test_run of REPEAT (1000000) runs of a program walks the
 * keys in order, one per run (lookup.bpf.c), and gives the kernel's mean ns
 * per run; the reader walks the same keys with shmkv_get, timed around the
 * loop. floor, lookup and the reader are interleaved, ROUNDS (7) times;
 * the table shows the medians. The run checks the hit counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <shmkv.h>
#include <shmkv_bpf.h>

#define NKEYS 4096 /* lookup.bpf.c */

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

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t hits(int ctr)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t v[1024] = {0}, sum = 0;
	uint32_t one = 1;
	if (ncpu > 1024 || bpf_map_lookup_elem(ctr, &one, v))
		return 0;
	for (int i = 0; i < ncpu; i++)
		sum += v[i];
	memset(v, 0, sizeof v);
	bpf_map_update_elem(ctr, &one, v, BPF_ANY);
	return sum;
}

static double run_prog(int fd, int repeat)
{
	unsigned char pkt[64] = {0};
	LIBBPF_OPTS(bpf_test_run_opts, t, .data_in = pkt, .data_size_in = sizeof pkt,
		    .repeat = repeat);
	if (bpf_prog_test_run_opts(fd, &t)) {
		perror("BPF_PROG_TEST_RUN");
		exit(2);
	}
	return t.duration;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: bpf_bench OBJ PIN ROOT CACHE [REPEAT [ROUNDS]]\n");
		return 2;
	}
	int repeat = argc > 5 ? atoi(argv[5]) : 1000000, rounds = argc > 6 ? atoi(argv[6]) : 7;
	shmkv *db;
	char why[300];
	int err = shmkv_attach_diag(argv[3], argv[4], 0, &db, why, sizeof why);
	if (err) {
		fprintf(stderr, "bpf_bench: %s\n", why);
		return 2;
	}
	uint64_t entries = shmkv_header(db)->entry_count, step = entries / NKEYS + 1;
	static struct shmkv_bpf_key hk[NKEYS], mk[NKEYS];
	size_t got = 0;
	shmkv_iter it;
	const void *k;
	size_t kl;
	shmkv_value v;
	shmkv_iter_init(db, &it);
	for (uint64_t i = 0; got < NKEYS && shmkv_iter_next(&it, &k, &kl, &v) == 0; i++)
		if (i % step == 0 && kl < SHMKV_BPF_KEY_MAX && v.size <= SHMKV_BPF_DEFAULT_VALUE_MAX) {
			hk[got].len = (uint32_t)kl;
			memcpy(hk[got].data, k, kl);
			mk[got] = hk[got];
			mk[got].data[kl] = '~';
			mk[got].len++;
			got++;
		}
	for (size_t i = got; i < NKEYS; i++) /* fewer keys than NKEYS: repeat them */
		hk[i] = hk[i % got], mk[i] = mk[i % got];

	int outer = bpf_obj_get(argv[2]);
	struct bpf_object *o = bpf_object__open_file(argv[1], NULL);
	if (outer < 0 || !o) {
		perror(outer < 0 ? argv[2] : argv[1]);
		return 2;
	}
	bpf_map__reuse_fd(bpf_object__find_map_by_name(o, "table"), outer);
	if (bpf_object__load(o)) {
		perror("bpf_object__load");
		return 2;
	}
	int ffloor = bpf_program__fd(bpf_object__find_program_by_name(o, "floor_only"));
	int flook = bpf_program__fd(bpf_object__find_program_by_name(o, "lookup"));
	int fkeys = bpf_map__fd(bpf_object__find_map_by_name(o, "keys"));
	int fctr = bpf_map__fd(bpf_object__find_map_by_name(o, "ctr"));

	double t[6][64];
	volatile size_t sink = 0;
	if (rounds > 64)
		rounds = 64;
	for (int r = 0; r < rounds; r++)
		for (int miss = 0; miss < 2; miss++) {
			struct shmkv_bpf_key *ks = miss ? mk : hk;
			for (uint32_t i = 0; i < NKEYS; i++)
				bpf_map_update_elem(fkeys, &i, &ks[i], BPF_ANY);
			t[miss * 3 + 0][r] = run_prog(ffloor, repeat);
			hits(fctr);
			t[miss * 3 + 1][r] = run_prog(flook, repeat);
			uint64_t h = hits(fctr);
			if (h != (miss ? 0 : (uint64_t)repeat)) {
				fprintf(stderr, "bpf_bench: %llu hits of %d %s lookups\n",
					(unsigned long long)h, repeat, miss ? "absent" : "present");
				return 2;
			}
			uint64_t t0 = now_ns();
			for (int j = 0; j < repeat; j++) {
				const struct shmkv_bpf_key *x = &ks[j % NKEYS];
				shmkv_value val;
				sink += shmkv_get(db, x->data, x->len, &val) == 0;
			}
			t[miss * 3 + 2][r] = (double)(now_ns() - t0) / repeat;
		}
	double m[6];
	for (int i = 0; i < 6; i++)
		m[i] = median(t[i], rounds);
	printf("| %zu keys of %llu walked in turn; %d rounds of %d runs; medians | hit (ns) | "
	       "miss (ns) |\n|---|---|---|\n", got, (unsigned long long)entries, rounds, repeat);
	printf("| BPF: next key, no lookup (floor) | %.1f | %.1f |\n", m[0], m[3]);
	printf("| BPF: next key + shmkv_bpf_lookup | %.1f | %.1f |\n", m[1], m[4]);
	printf("| BPF: the lookup alone (difference) | %.1f | %.1f |\n", m[1] - m[0], m[4] - m[3]);
	printf("| user space: shmkv_get, same keys | %.1f | %.1f |\n", m[2], m[5]);
	(void)sink;
	shmkv_close(db);
	return 0;
}
