/* delta_get: what a get costs when the image is read through a delta
 * (lib/FORMAT.md §19), and through a lower and a top delta (§19.6, a
 * protocol 2 cache with a top overlay), against the same image read alone,
 * in one process, interleaved (bench/README.md, "Gets through a delta").
 *
 *   delta_get N ROUNDS [single|batch|lone] [DIR]
 *
 * Builds (or reuses) DIR/delta_get-N.base.shmkv: key_I -> val_I for I < N;
 * DIR/delta_get-N.delta.shmkv, the lower delta, changing 1% of the keys:
 * key_I -> new_I for I % 100 == 0 (upserts of base keys), a tombstone for
 * I % 1000 == 1 (0.1%), and key_{N+J} -> new_{N+J} for J < N / 1000 (new
 * keys); and DIR/delta_get-N.top.shmkv, the top delta (recent changes, 0.03%
 * of the keys): key_I -> top_I for I % 10000 == 0 (over the lower's upsert)
 * and == 7 (over the base), a tombstone for I % 10000 == 3. DIR defaults
 * to $TMPDIR, else /tmp. The base is opened three times: read alone,
 * through the lower delta (shmkv_delta_set) and through both
 * (shmkv_delta_set2).
 *
 * Each round times, in an order that alternates between rounds, 1,000,000
 * gets (shmkv_get, or shmkv_get_batch 64 keys a call; lone: shmkv_get, each
 * get's key chosen by the answer before it, so that the gets do not
 * overlap: a get's latency) of each class on each handle: base hits (keys neither delta changes), changed keys (the
 * lower's upserts the top leaves), top keys (the top's upserts) and misses
 * (key_I for I >= 2N); every answer is checked. It prints ns a get per
 * round and the medians of the ratios:
 *   lower / alone and top / alone, for base hits and misses (goal <= 1.1),
 *   changed-key hits through the lower, and top-key hits through both,
 *   / base hits alone (goal <= 1.0). */
#include <shmkv.h>
#include <shmkv_build.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

enum { GETS = 1000000, BATCH = 64, MAX_ROUNDS = 99, KEY_MAX = 32, TOP_EVERY = 10000 };

enum { C_BASE, C_CHANGED, C_TOP, C_MISS, CLASSES };
static const char *const class_name[CLASSES] = {"base hits", "changed keys", "top keys",
						"misses"};

/* the handles: the image alone, through the lower delta, through both */
enum { S_ALONE, S_LOWER, S_TOP, SIDES };
static const char *const side_name[SIDES] = {"alone", "lower", "top"};

struct keys {
	char (*text)[KEY_MAX];
	shmkv_key *views;
	uint64_t found[SIDES], first[SIDES]; /* what each side must answer */
};

static int usage(void)
{
	fprintf(stderr, "usage: delta_get N ROUNDS [single|batch|lone] [DIR]\n");
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

/* 0, read at run time: a lone get's key index adds (answer & zero), which the
 * compiler cannot fold, so each get waits for the one before */
static volatile uint64_t zero;

/* A miss's answer is a constant on the path the branch predictor takes, so
 * no data dependency makes the next get wait for it: a fence does (x86:
 * lfence, each get's loads complete before the next get starts; other
 * CPUs: the dependency through a hit's first byte alone). */
static inline void lone_fence(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ volatile("lfence" ::: "memory");
#endif
}

enum { M_SINGLE, M_BATCH, M_LONE };
static const char *const mode_name[] = {"single", "batch 64", "lone"};

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

/* The first byte of key_I's value on side (0: absent), from the rules
 * above: the top's change, else the lower's, else the base's. */
static unsigned char expect(uint64_t i, uint64_t n, int side)
{
	if (i >= 2 * n)
		return 0;
	if (side == S_TOP && i < n && i % TOP_EVERY == 3)
		return 0;
	if (side == S_TOP && i < n && (i % TOP_EVERY == 0 || i % TOP_EVERY == 7))
		return 't';
	if (side != S_ALONE && i >= n)
		return i < n + n / 1000 ? 'n' : 0;
	if (side != S_ALONE && i % 1000 == 1)
		return 0;
	if (side != S_ALONE && i % 100 == 0)
		return 'n';
	return i < n ? 'v' : 0;
}

static int build_top(const char *path, const char *base, uint64_t n)
{
	shmkv_build_options o;
	shmkv_build_options_init(&o);
	shmkv_builder *b;
	int err = shmkv_builder_new(&o, &b);
	if (err)
		return fail(path, err, NULL);
	err = shmkv_builder_set_delta(b, base, NULL);
	char k[KEY_MAX], v[KEY_MAX];
	for (uint64_t i = 0; i < n && !err; i++) {
		uint64_t r = i % TOP_EVERY;
		if (r != 0 && r != 3 && r != 7)
			continue;
		int kl = snprintf(k, sizeof k, "key_%llu", (unsigned long long)i);
		snprintf(v, sizeof v, "top_%llu", (unsigned long long)i);
		if (r == 3)
			err = shmkv_builder_remove(b, k, (size_t)kl);
		else
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

/* Whether the lower or the top delta changes key_I (I < n). */
static int changed(uint64_t i)
{
	uint64_t t = i % TOP_EVERY;
	return i % 100 == 0 || i % 1000 == 1 || t == 3 || t == 7;
}

/* GETS keys of one class in a shuffled order, with what each side answers. */
static int make_keys(struct keys *ks, int cls, uint64_t n, uint64_t seed)
{
	ks->text = malloc(sizeof *ks->text * GETS);
	ks->views = malloc(sizeof *ks->views * GETS);
	if (!ks->text || !ks->views)
		return -ENOMEM;
	memset(ks->found, 0, sizeof ks->found);
	memset(ks->first, 0, sizeof ks->first);
	for (size_t j = 0; j < GETS; j++) {
		uint64_t r = rng(&seed), i;
		if (cls == C_MISS) {
			i = 2 * n + r % n;
		} else if (cls == C_CHANGED) {
			i = (r % ((n + 99) / 100)) * 100; /* the lower's, not the top's */
			if (i % TOP_EVERY == 0)
				i = i + 100 < n ? i + 100 : 100;
		} else if (cls == C_TOP) {
			i = (r % (n / TOP_EVERY)) * TOP_EVERY + ((r >> 40) & 1 ? 7 : 0);
		} else {
			i = r % n;
			while (changed(i))
				i = (i + 1) % n;
		}
		int kl = snprintf(ks->text[j], KEY_MAX, "key_%llu", (unsigned long long)i);
		ks->views[j].data = ks->text[j];
		ks->views[j].len = (size_t)kl;
		for (int s = 0; s < SIDES; s++) {
			unsigned char c = expect(i, n, s);
			ks->found[s] += c != 0;
			ks->first[s] += c;
		}
	}
	return 0;
}

/* The thread's CPU time: what other work on a shared machine takes is not
 * counted (its effect on the caches still is). */
static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* ns a get; *found and *first (sum of each value's first byte) let the
 * caller check the answers and keep the reads from being optimised away. */
static double pass(const shmkv *db, const struct keys *ks, int mode, uint64_t *found,
		   uint64_t *first)
{
	uint64_t f = 0, s = 0;
	double t0 = now_ns();
	if (mode == M_LONE) {
		const uint64_t z = zero;
		uint64_t d = 0;
		for (size_t j = 0; j < GETS; j++) {
			shmkv_value v;
			const shmkv_key *k = &ks->views[j + (d & z)];
			int rc = shmkv_get(db, k->data, k->len, &v);
			if (rc == 0) {
				f++;
				d = *(const unsigned char *)v.data;
				s += d;
			} else {
				d = (uint64_t)(unsigned)rc;
			}
			lone_fence();
		}
	} else if (mode == M_BATCH) {
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
	if (*end || n < TOP_EVERY)
		return usage();
	long rounds = strtol(argv[2], &end, 10);
	if (*end || rounds < 1 || rounds > MAX_ROUNDS)
		return usage();
	int mode = M_SINGLE;
	if (argc > 3 && !strcmp(argv[3], "batch"))
		mode = M_BATCH;
	else if (argc > 3 && !strcmp(argv[3], "lone"))
		mode = M_LONE;
	else if (argc > 3 && strcmp(argv[3], "single"))
		return usage();
	const char *dir = argc > 4 ? argv[4] : getenv("TMPDIR");
	if (!dir || !dir[0])
		dir = "/tmp";

	char base_path[4096], delta_path[4096], top_path[4096];
	snprintf(base_path, sizeof base_path, "%s/delta_get-%llu.base.shmkv", dir, n);
	snprintf(delta_path, sizeof delta_path, "%s/delta_get-%llu.delta.shmkv", dir, n);
	snprintf(top_path, sizeof top_path, "%s/delta_get-%llu.top.shmkv", dir, n);
	struct stat st;
	if (stat(base_path, &st) != 0 && build_base(base_path, n))
		return 1;
	if (stat(delta_path, &st) != 0 && build_delta(delta_path, base_path, n))
		return 1;
	if (stat(top_path, &st) != 0 && build_top(top_path, base_path, n))
		return 1;

	shmkv *side[SIDES], *delta, *top;
	if (open_image(base_path, &side[S_ALONE]) || open_image(base_path, &side[S_LOWER]) ||
	    open_image(base_path, &side[S_TOP]) || open_image(delta_path, &delta) ||
	    open_image(top_path, &top))
		return 1;
	char why[256] = "";
	int err = shmkv_delta_set(side[S_LOWER], delta, why, sizeof why);
	if (err)
		return fail(delta_path, err, why);
	err = shmkv_delta_set2(side[S_TOP], delta, top, why, sizeof why);
	if (err)
		return fail(top_path, err, why);

	static struct keys ks[CLASSES];
	for (int c = 0; c < CLASSES; c++)
		if (make_keys(&ks[c], c, n, 0x5eed + (uint64_t)c))
			return fail("keys", -ENOMEM, NULL);

	/* [class][side][round] */
	static double ns[CLASSES][SIDES][MAX_ROUNDS];
	printf("# delta_get N=%llu, %s, %d gets a pass; ns a get (alone: the image; lower: "
	       "through the lower delta; top: through the lower and the top)\n", n,
	       mode_name[mode], GETS);
	printf("round");
	for (int c = 0; c < CLASSES; c++)
		for (int sd = 0; sd < SIDES; sd++)
			printf("\t%s %s", class_name[c], side_name[sd]);
	printf("\n");
	for (long r = 0; r < rounds; r++) {
		for (int k = 0; k < SIDES * CLASSES; k++) {
			/* alternate the order of the passes between rounds */
			int idx = r % 2 ? SIDES * CLASSES - 1 - k : k;
			int c = idx / SIDES, sd = idx % SIDES;
			uint64_t found, first;
			ns[c][sd][r] = pass(side[sd], &ks[c], mode, &found, &first);
			if (found != ks[c].found[sd] || first != ks[c].first[sd]) {
				fprintf(stderr, "delta_get: %s %s: %llu found (want %llu), wrong values\n",
					class_name[c], side_name[sd], (unsigned long long)found,
					(unsigned long long)ks[c].found[sd]);
				return 1;
			}
		}
		printf("%ld", r + 1);
		for (int c = 0; c < CLASSES; c++)
			for (int sd = 0; sd < SIDES; sd++)
				printf("\t%.1f", ns[c][sd][r]);
		printf("\n");
	}
	double ratio[8][MAX_ROUNDS];
	for (long r = 0; r < rounds; r++) {
		ratio[0][r] = ns[C_BASE][S_LOWER][r] / ns[C_BASE][S_ALONE][r];
		ratio[1][r] = ns[C_BASE][S_TOP][r] / ns[C_BASE][S_ALONE][r];
		ratio[2][r] = ns[C_MISS][S_LOWER][r] / ns[C_MISS][S_ALONE][r];
		ratio[3][r] = ns[C_MISS][S_TOP][r] / ns[C_MISS][S_ALONE][r];
		ratio[4][r] = ns[C_CHANGED][S_LOWER][r] / ns[C_BASE][S_ALONE][r];
		ratio[5][r] = ns[C_TOP][S_TOP][r] / ns[C_BASE][S_ALONE][r];
		ratio[6][r] = ns[C_CHANGED][S_TOP][r] / ns[C_BASE][S_ALONE][r];
	}
	printf("median lower / alone: base hits %.3f, misses %.3f (goal <= 1.1)\n",
	       median(ratio[0], (int)rounds), median(ratio[2], (int)rounds));
	printf("median top / alone: base hits %.3f, misses %.3f (goal <= 1.1)\n",
	       median(ratio[1], (int)rounds), median(ratio[3], (int)rounds));
	printf("median hits / base hits alone: changed keys through the lower %.3f, through "
	       "both %.3f; top keys through both %.3f (goal <= 1.0)\n",
	       median(ratio[4], (int)rounds), median(ratio[6], (int)rounds),
	       median(ratio[5], (int)rounds));
	shmkv_delta_set(side[S_LOWER], NULL, NULL, 0);
	shmkv_delta_set(side[S_TOP], NULL, NULL, 0);
	shmkv_close(top);
	shmkv_close(delta);
	for (int sd = 0; sd < SIDES; sd++)
		shmkv_close(side[sd]);
	for (int c = 0; c < CLASSES; c++) {
		free(ks[c].text);
		free(ks[c].views);
	}
	return 0;
}
