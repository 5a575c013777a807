/* delta_get: what a get costs when the image is read through a delta
 * (lib/FORMAT.md §19) against the same image read alone, in one process,
 * interleaved (bench/README.md, "Gets through a delta").
 *
 *   delta_get N ROUNDS [single|batch] [DIR]
 *
 * Builds (or reuses) DIR/delta_get-N.base.shmkv: key_I -> val_I for I < N,
 * and DIR/delta_get-N.delta.shmkv, a delta of it changing 1% of the keys:
 * key_I -> new_I for I % 100 == 0 (upserts of base keys), a tombstone for
 * I % 1000 == 1 (0.1%), and key_{N+J} -> new_{N+J} for J < N / 1000 (new
 * keys). DIR defaults to $TMPDIR, else /tmp. The base is opened twice: once
 * read alone, once through the delta (shmkv_delta_set).
 *
 * Each round times, in an order that alternates between rounds, 1,000,000
 * gets (shmkv_get, or shmkv_get_batch 64 keys a call) of each class on
 * each handle: base hits (unchanged keys), changed keys (the base's value on
 * the handle alone, the delta's through it) and misses (key_I for I >= 2N).
 * It prints ns a get per round and the medians of the ratios:
 *   through / alone for base hits and for misses (goal <= 1.1),
 *   changed-key hits through / base hits alone (goal <= 1.0). */
#include <shmkv.h>
#include <shmkv_build.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

enum { GETS = 1000000, BATCH = 64, MAX_ROUNDS = 99, KEY_MAX = 32 };

enum { C_BASE, C_CHANGED, C_MISS, CLASSES };
static const char *const class_name[CLASSES] = {"base hits", "changed keys", "misses"};

struct keys {
	char (*text)[KEY_MAX];
	shmkv_key *views;
};

static int usage(void)
{
	fprintf(stderr, "usage: delta_get N ROUNDS [single|batch] [DIR]\n");
	return 2;
}

static uint64_t rng(uint64_t *s)
{
	/* splitmix64: a fixed, reproducible key order */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int fail(const char *what, int err, const char *msg)
{
	fprintf(stderr, "delta_get: %s: %s\n", what, msg && msg[0] ? msg : shmkv_strerror(err));
	return 1;
}

static int build_base(const char *path, uint64_t n)
{
	shmkv_build_options o;
	shmkv_build_options_init(&o);
	shmkv_builder *b;
	int err = shmkv_builder_new(&o, &b);
	if (err)
		return fail(path, err, NULL);
	char k[KEY_MAX], v[KEY_MAX];
	for (uint64_t i = 0; i < n && !err; i++) {
		int kl = snprintf(k, sizeof k, "key_%llu", (unsigned long long)i);
		snprintf(v, sizeof v, "val_%llu", (unsigned long long)i);
		err = shmkv_builder_add_str(b, k, (size_t)kl, v, strlen(v));
	}
	if (!err)
		err = shmkv_builder_finish(b, path, NULL);
	int rc = err ? fail(path, err, shmkv_builder_error(b)) : 0;
	shmkv_builder_free(b);
	return rc;
}

static int build_delta(const char *path, const char *base, uint64_t n)
{
	shmkv_build_options o;
	shmkv_build_options_init(&o);
	shmkv_builder *b;
	int err = shmkv_builder_new(&o, &b);
	if (err)
		return fail(path, err, NULL);
	err = shmkv_builder_set_delta(b, base, NULL);
	char k[KEY_MAX], v[KEY_MAX];
	for (uint64_t i = 0; i < n + n / 1000 && !err; i++) {
		int kl = snprintf(k, sizeof k, "key_%llu", (unsigned long long)i);
		snprintf(v, sizeof v, "new_%llu", (unsigned long long)i);
		if (i >= n || i % 100 == 0)
			err = shmkv_builder_add_str(b, k, (size_t)kl, v, strlen(v));
		else if (i % 1000 == 1)
			err = shmkv_builder_remove(b, k, (size_t)kl);
	}
	if (!err)
		err = shmkv_builder_finish(b, path, NULL);
	int rc = err ? fail(path, err, shmkv_builder_error(b)) : 0;
	shmkv_builder_free(b);
	return rc;
}

/* GETS keys of one class in a shuffled order. */
static int make_keys(struct keys *ks, int cls, uint64_t n, uint64_t seed)
{
	ks->text = malloc(sizeof *ks->text * GETS);
	ks->views = malloc(sizeof *ks->views * GETS);
	if (!ks->text || !ks->views)
		return -ENOMEM;
	for (size_t j = 0; j < GETS; j++) {
		uint64_t r = rng(&seed), i;
		if (cls == C_MISS) {
			i = 2 * n + r % n;
		} else if (cls == C_CHANGED) {
			i = (r % ((n + 99) / 100)) * 100;
		} else {
			i = r % n;
			while (i % 100 == 0 || i % 1000 == 1)
				i = (i + 1) % n;
		}
		int kl = snprintf(ks->text[j], KEY_MAX, "key_%llu", (unsigned long long)i);
		ks->views[j].data = ks->text[j];
		ks->views[j].len = (size_t)kl;
	}
	return 0;
}

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* ns a get; *found and *first (sum of each value's first byte) let the
 * caller check the answers and keep the reads from being optimised away. */
static double pass(const shmkv *db, const struct keys *ks, int batch, uint64_t *found,
		   uint64_t *first)
{
	uint64_t f = 0, s = 0;
	double t0 = now_ns();
	if (batch) {
		shmkv_value v[BATCH];
		int err[BATCH];
		for (size_t b = 0; b < GETS; b += BATCH) {
			size_t m = GETS - b < BATCH ? GETS - b : BATCH;
			shmkv_get_batch(db, ks->views + b, m, v, err);
			for (size_t i = 0; i < m; i++)
				if (!err[i]) {
					f++;
					s += *(const unsigned char *)v[i].data;
				}
		}
	} else {
		for (size_t j = 0; j < GETS; j++) {
			shmkv_value v;
			if (shmkv_get(db, ks->views[j].data, ks->views[j].len, &v) == 0) {
				f++;
				s += *(const unsigned char *)v.data;
			}
		}
	}
	double t = (now_ns() - t0) / GETS;
	*found = f;
	*first = s;
	return t;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int open_image(const char *path, shmkv **db)
{
	char why[256] = "";
	int err = shmkv_open_file_diag(path, 0, db, why, sizeof why);
	return err ? fail(path, err, why) : 0;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 5)
		return usage();
	char *end;
	unsigned long long n = strtoull(argv[1], &end, 10);
	if (*end || n < 1000)
		return usage();
	long rounds = strtol(argv[2], &end, 10);
	if (*end || rounds < 1 || rounds > MAX_ROUNDS)
		return usage();
	int batch = 0;
	if (argc > 3 && !strcmp(argv[3], "batch"))
		batch = 1;
	else if (argc > 3 && strcmp(argv[3], "single"))
		return usage();
	const char *dir = argc > 4 ? argv[4] : getenv("TMPDIR");
	if (!dir || !dir[0])
		dir = "/tmp";

	char base_path[4096], delta_path[4096];
	snprintf(base_path, sizeof base_path, "%s/delta_get-%llu.base.shmkv", dir, n);
	snprintf(delta_path, sizeof delta_path, "%s/delta_get-%llu.delta.shmkv", dir, n);
	struct stat st;
	if (stat(base_path, &st) != 0 && build_base(base_path, n))
		return 1;
	if (stat(delta_path, &st) != 0 && build_delta(delta_path, base_path, n))
		return 1;

	shmkv *alone, *through, *delta;
	if (open_image(base_path, &alone) || open_image(base_path, &through) ||
	    open_image(delta_path, &delta))
		return 1;
	char why[256] = "";
	int err = shmkv_delta_set(through, delta, why, sizeof why);
	if (err)
		return fail(delta_path, err, why);

	struct keys ks[CLASSES];
	for (int c = 0; c < CLASSES; c++)
		if (make_keys(&ks[c], c, n, 0x5eed + (uint64_t)c))
			return fail("keys", -ENOMEM, NULL);

	/* [class][0 alone, 1 through][round] */
	static double ns[CLASSES][2][MAX_ROUNDS];
	printf("# delta_get N=%llu, %s, %d gets a pass; ns a get\n", n, batch ? "batch 64" : "single",
	       GETS);
	printf("round");
	for (int c = 0; c < CLASSES; c++)
		printf("\t%s alone\t%s through", class_name[c], class_name[c]);
	printf("\n");
	for (long r = 0; r < rounds; r++) {
		for (int k = 0; k < 2 * CLASSES; k++) {
			/* alternate the order of the six passes between rounds */
			int idx = r % 2 ? 2 * CLASSES - 1 - k : k;
			int c = idx / 2, side = idx % 2;
			uint64_t found, first;
			ns[c][side][r] = pass(side ? through : alone, &ks[c], batch, &found, &first);
			/* the answers: base hits and misses the same on both handles;
			 * changed keys give val_ alone and new_ through the delta */
			uint64_t want = c == C_MISS ? 0 : GETS;
			uint64_t want_first = c == C_MISS ? 0 : (uint64_t)(c == C_CHANGED && side ? 'n' : 'v') * GETS;
			if (found != want || first != want_first) {
				fprintf(stderr, "delta_get: %s %s: %llu found (want %llu), wrong values\n",
					class_name[c], side ? "through" : "alone",
					(unsigned long long)found, (unsigned long long)want);
				return 1;
			}
		}
		printf("%ld", r + 1);
		for (int c = 0; c < CLASSES; c++)
			printf("\t%.1f\t%.1f", ns[c][0][r], ns[c][1][r]);
		printf("\n");
	}
	double ratio[3][MAX_ROUNDS];
	for (long r = 0; r < rounds; r++) {
		ratio[0][r] = ns[C_BASE][1][r] / ns[C_BASE][0][r];
		ratio[1][r] = ns[C_MISS][1][r] / ns[C_MISS][0][r];
		ratio[2][r] = ns[C_CHANGED][1][r] / ns[C_BASE][0][r];
	}
	printf("median through / alone: base hits %.3f, misses %.3f (goal <= 1.1)\n",
	       median(ratio[0], (int)rounds), median(ratio[1], (int)rounds));
	printf("median changed-key hits through / base hits alone: %.3f (goal <= 1.0)\n",
	       median(ratio[2], (int)rounds));
	shmkv_delta_set(through, NULL, NULL, 0);
	shmkv_close(delta);
	shmkv_close(through);
	shmkv_close(alone);
	for (int c = 0; c < CLASSES; c++) {
		free(ks[c].text);
		free(ks[c].views);
	}
	return 0;
}
