/* class_probe: single gets of an image by where their keys live
 * (bench/README.md, "Gets by key class"; bench/RESULTS.md, the 1M single get). lookup_bench's latency phase
 * files the lone gets of one mixed stream as home or displaced after the
 * fact; this one times three streams apart, so that what the
 * home-or-next branch costs when it goes either way can be told from what
 * a displaced key costs when it is predicted:
 *
 *   class_probe IMAGE KEYS [LOOKUPS [ROUNDS]]
 *
 * Keys `key_N`, N < KEYS, each classified once (key_class.h, the latency
 * phase's rule: home when the key's entry lies in its home bucket); then
 * LOOKUPS (2,000,000) uniform random keys of each stream, all, home only
 * and displaced only, made beforehand. Each round times every stream in a
 * throughput loop (independent gets) and in a lone loop (each get waits
 * for the one before: the next key's index takes the previous value's
 * first byte ANDed with a zero the compiler cannot see), a quarter as many
 * gets; a get reads the value's length and first byte. Prints each round's
 * ns a get (the thread's CPU time) and the median of ROUNDS (5). Compile it
 * with -DSHMKV_V2_PREFETCH_NEXT=0|1|2 to compare the reader policies. */
#include "key_class.h"
#include "probe_util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { KEY_MAX = 24, ROUNDS_MAX = 99 };

typedef struct {
	char k[KEY_MAX];
	unsigned n;
} probe_key;

static volatile unsigned long zero; /* 0, unknown to the compiler */

static int usage(void)
{
	fprintf(stderr, "usage: class_probe IMAGE KEYS [LOOKUPS [ROUNDS]]\n"
			"  an image holding key_N for every N < KEYS\n");
	return 2;
}

static unsigned long arg(const char *s, unsigned long max)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	return *end || !v || v > max ? 0 : v;
}

static uint64_t rng = 88172645463325252ull; /* xorshift64: fixed streams */
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double throughput(const shmkv *db, const probe_key *s, unsigned long n, unsigned long *sum)
{
	double a = probe_cpu_ns();
	for (unsigned long j = 0; j < n; j++) {
		shmkv_value v;
		if (!shmkv_get(db, s[j].k, s[j].n, &v)) /* an empty value has no first byte */
			*sum += v.size + (v.size ? ((const unsigned char *)v.data)[0] : 0u);
	}
	return (probe_cpu_ns() - a) / (double)n;
}

static double lone(const shmkv *db, const probe_key *s, unsigned long n, unsigned long *sum)
{
	const unsigned long z = zero;
	unsigned long d = 0;
	double a = probe_cpu_ns();
	for (unsigned long j = 0; j < n; j++) {
		shmkv_value v;
		const probe_key *q = &s[j + (d & z)];
		if (!shmkv_get(db, q->k, q->n, &v))
			d = v.size ? ((const unsigned char *)v.data)[0] : 0u;
		*sum += d;
	}
	return (probe_cpu_ns() - a) / (double)n;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 5)
		return usage();
	unsigned long nkeys = arg(argv[2], 1ul << 40);
	unsigned long lookups = argc > 3 ? arg(argv[3], 1ul << 32) : 2000000;
	unsigned long rounds = argc > 4 ? arg(argv[4], ROUNDS_MAX) : 5;
	if (!nkeys || !lookups || !rounds)
		return usage();
	shmkv *db = NULL;
	char why[256] = "";
	int err = shmkv_open_file_diag(argv[1], 0, &db, why, sizeof why);
	if (err) {
		if (why[0])
			fprintf(stderr, "class_probe: %s\n", why);
		else
			fprintf(stderr, "class_probe: %s: %s\n", argv[1], shmkv_strerror(err));
		return 1;
	}
	unsigned long *cls[2] = {malloc(nkeys * sizeof(unsigned long)),
				 malloc(nkeys * sizeof(unsigned long))};
	unsigned long ncls[2] = {0, 0};
	probe_key *streams[3] = {malloc(lookups * sizeof(probe_key)),
				 malloc(lookups * sizeof(probe_key)),
				 malloc(lookups * sizeof(probe_key))};
	if (!cls[0] || !cls[1] || !streams[0] || !streams[1] || !streams[2]) {
		fprintf(stderr, "class_probe: out of memory for %lu keys and %lu lookups\n", nkeys,
			lookups);
		return 1;
	}
	char k[KEY_MAX];
	for (unsigned long i = 0; i < nkeys; i++) {
		int n = snprintf(k, sizeof k, "key_%lu", i);
		int h = bench_key_at_home(db, k, (size_t)n);
		if (h < 0) {
			fprintf(stderr, "class_probe: %s holds no key %s (KEYS too large?)\n", argv[1], k);
			return 1;
		}
		cls[h][ncls[h]++] = i;
	}
	printf("%s: %lu keys, %lu home, %lu displaced (%.1f%%); %lu lookups a stream, %lu rounds\n",
	       argv[1], nkeys, ncls[1], ncls[0], 100.0 * (double)ncls[0] / (double)nkeys, lookups,
	       rounds);
	const char *names[3] = {"all", "home", "displaced"};
	for (int w = 0; w < 3; w++) {
		/* stream w: uniform over all keys, the home ones, or the displaced */
		const unsigned long *from = w == 1 ? cls[1] : cls[0];
		const unsigned long m = w == 0 ? nkeys : w == 1 ? ncls[1] : ncls[0];
		for (unsigned long j = 0; j < lookups; j++) {
			unsigned long i = m ? next_rand() % m : 0;
			if (w)
				i = m ? from[i] : 0;
			streams[w][j].n = (unsigned)snprintf(streams[w][j].k, KEY_MAX, "key_%lu", i);
		}
	}
	static double t[2][3][ROUNDS_MAX];
	unsigned long sum = 0;
	for (unsigned long r = 0; r < rounds; r++)
		for (int w = 0; w < 3; w++) {
			if ((w == 1 && !ncls[1]) || (w == 2 && !ncls[0]))
				continue; /* an empty class: nothing to time */
			t[0][w][r] = throughput(db, streams[w], lookups, &sum);
			t[1][w][r] = lone(db, streams[w], lookups / 4 ? lookups / 4 : 1, &sum);
		}
	for (int mode = 0; mode < 2; mode++)
		for (int w = 0; w < 3; w++) {
			if ((w == 1 && !ncls[1]) || (w == 2 && !ncls[0]))
				continue;
			printf("%-10s %-9s", mode ? "lone" : "throughput", names[w]);
			for (unsigned long r = 0; r < rounds; r++)
				printf(" %7.1f", t[mode][w][r]);
			printf("  median %.1f ns a get\n", probe_median(t[mode][w], (int)rounds));
		}
	printf("(checksum %lu)\n", sum);
	for (int i = 0; i < 3; i++)
		free(streams[i]);
	free(cls[0]);
	free(cls[1]);
	shmkv_close(db);
	return 0;
}
