/* ab_main.c - lib_ab: two lib/ trees' readers in one process, on one image.
 *
 *   lib_ab IMAGE KEYS ROUNDS [single|batch] [FORMAT]
 *
 * 1,048,576 keys FORMAT % random N < KEYS (default key_%lu; nokey_%lu for
 * misses), looked up ROUNDS times by each side (old: the tree build.sh was
 * given, new: this one), the order alternating per round, each timed by
 * the thread's CPU time after a warm-up pass. Both sides must find the same
 * keys and read the same bytes. Prints each side's median ns a key and the
 * median, min and max of the rounds' new ÷ old. */
#include "../probe_util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	const void *data;
	size_t len;
} ab_key; /* shmkv_key's layout, which both trees share */

void *open_old(const char *, char *, size_t), *open_new(const char *, char *, size_t);
void close_old(void *), close_new(void *);
size_t run_old(void *, const void *, size_t, int, unsigned long *);
size_t run_new(void *, const void *, size_t, int, unsigned long *);

enum { AB_KEYS = 1 << 20, AB_MAX_ROUNDS = 101 };

static int usage(void)
{
	fprintf(stderr, "usage: lib_ab IMAGE KEYS ROUNDS [single|batch] [FORMAT]\n"
			"  ROUNDS 1..%d; FORMAT holds one %%lu (default key_%%lu)\n",
		AB_MAX_ROUNDS);
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 4 || argc > 6)
		return usage();
	char *end;
	const unsigned long n = strtoul(argv[2], &end, 10);
	if (*end || !n)
		return usage();
	const long rounds = strtol(argv[3], &end, 10);
	if (*end || rounds < 1 || rounds > AB_MAX_ROUNDS)
		return usage();
	int batch = 0;
	if (argc > 4 && !strcmp(argv[4], "batch"))
		batch = 1;
	else if (argc > 4 && strcmp(argv[4], "single"))
		return usage();
	const char *fmt = argc > 5 ? argv[5] : "key_%lu";
	const char *pct = strchr(fmt, '%');
	if (!pct || strcmp(pct, "%lu") != 0 || strchr(fmt, '%') != strrchr(fmt, '%'))
		return usage(); /* one %lu, at the end */
	char why[256] = "";
	void *db[2];
	if (!(db[0] = open_old(argv[1], why, sizeof why)) ||
	    !(db[1] = open_new(argv[1], why, sizeof why))) {
		fprintf(stderr, "lib_ab: %s\n", why); /* why names the file */
		return 1;
	}
	ab_key *ks = malloc(AB_KEYS * sizeof *ks);
	char *kb = malloc((size_t)AB_KEYS * 64);
	if (!ks || !kb) {
		fprintf(stderr, "lib_ab: out of memory\n");
		return 1;
	}
	uint64_t x = 0x9e3779b97f4a7c15u; /* xorshift: the same keys every run */
	for (size_t i = 0; i < AB_KEYS; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		int l = snprintf(kb + i * 64, 64, fmt, (unsigned long)(x % n));
		if (l < 0 || l >= 64) {
			fprintf(stderr, "lib_ab: FORMAT makes keys of 64 bytes or more\n");
			return 2;
		}
		ks[i] = (ab_key){kb + i * 64, (size_t)l};
	}
	double t[2][AB_MAX_ROUNDS], ratio[AB_MAX_ROUNDS];
	size_t hits[2] = {0, 0};
	unsigned long sum[2] = {0, 0};
	for (long r = 0; r < rounds; r++) {
		for (int k = 0; k < 2; k++) {
			const int side = (k + (int)(r & 1)) & 1; /* old first in even rounds */
			size_t (*run)(void *, const void *, size_t, int, unsigned long *) =
				side ? run_new : run_old;
			run(db[side], ks, AB_KEYS, batch, &sum[side]); /* warm-up */
			const double t0 = probe_cpu_ns();
			hits[side] = run(db[side], ks, AB_KEYS, batch, &sum[side]);
			t[side][r] = (probe_cpu_ns() - t0) / AB_KEYS;
		}
		ratio[r] = t[1][r] / t[0][r];
	}
	if (hits[0] != hits[1] || sum[0] != sum[1]) {
		fprintf(stderr, "lib_ab: the sides disagree: %zu hits (sum %lu) against %zu (%lu)\n",
			hits[0], sum[0], hits[1], sum[1]);
		return 1;
	}
	const double mo = probe_median(t[0], (int)rounds), mn = probe_median(t[1], (int)rounds);
	const double mr = probe_median(ratio, (int)rounds); /* sorted now */
	printf("%s %s %lu keys, %s: old %.1f ns, new %.1f ns a key (medians of %ld); new / old "
	       "median %.3f (%.3f-%.3f); %zu of %d hit\n",
	       argv[1], batch ? "batch" : "single", n, fmt, mo, mn, rounds, mr, ratio[0],
	       ratio[rounds - 1], hits[1], AB_KEYS);
	close_old(db[0]);
	close_new(db[1]);
	free(ks);
	free(kb);
	return 0;
}
