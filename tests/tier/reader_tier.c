/* reader_tier.c - the reader's checks for one forced SIMD tier, in plain C11
 * so it cross-compiles for AArch64 and runs under qemu-aarch64-static.
 *
 * Usage: reader_tier IMAGE N
 *   IMAGE holds key_<i> -> "val_<i>" (string) for i < N and nothing else (it may
 *   have been built with few hash bits to force collisions and displaced keys).
 * Checks: the tier in use; every compiled variant of the bucket directory
 * compare against the scalar reference on random buckets; the image's format
 * version; shmkv_verify; every key found with its value; N absent keys not
 * found; batched gets equal single gets; iteration (live and all records)
 * sees N.
 * Prints "N passed, M failed" and exits non-zero on any failure. */
#include <stdio.h>
#include <stdlib.h>

#include "shmkv.h"

static unsigned long passed, failed;

#define CHECK(cond, ...)                                          \
	do {                                                      \
		if (cond) {                                       \
			passed++;                                 \
		} else {                                          \
			failed++;                                 \
			if (failed < 20) {                        \
				fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
				fprintf(stderr, __VA_ARGS__);     \
				fputc('\n', stderr);              \
			}                                         \
		}                                                 \
	} while (0)

static uint64_t rng = 0x9E3779B97F4A7C15u;
static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* The directory compare (FORMAT.md §6): random 128-byte buckets whose u16 directory
 * entries (tag << 7 | off) share tags often, with every count 0..16 and the
 * bytes past the count random (a variant must ignore them). */
static void check_variants(void)
{
	_Alignas(128) uint8_t bk[SHMKV_BUCKET_BYTES];
	unsigned bad = 0;
	for (int round = 0; round < 20000; round++) {
		uint64_t common = next_rand() & 0xffff;
		for (unsigned j = 0; j < sizeof bk; j++)
			bk[j] = (uint8_t)next_rand();
		for (unsigned j = 0; j < SHMKV_MAX_RECORDS; j++) {
			uint64_t r = next_rand();
			uint64_t tag = (r & 3) ? common ^ ((r >> 8) & 0xfe00) : (r >> 16) & 0xffff;
			uint16_t d = (uint16_t)((tag << 7) | ((r >> 40) & 0x7f));
			bk[8 + 2 * j] = (uint8_t)d;
			bk[9 + 2 * j] = (uint8_t)(d >> 8);
		}
		uint64_t want = (next_rand() & 1) ? common : next_rand() & 0xffff;
		for (unsigned n = 0; n <= SHMKV_MAX_RECORDS; n++) {
			unsigned ref = shmkv__match_scalar(bk, n, want);
#if SHMKV_HAVE_SSE2
			bad += shmkv__match_sse2(bk, n, want) != ref;
#endif
#if SHMKV_HAVE_AVX2
			bad += shmkv__match_avx2(bk, n, want) != ref;
#endif
#if SHMKV_HAVE_NEON
			bad += shmkv__match_neon(bk, n, want) != ref;
#endif
			bad += shmkv__match(bk, n, want) != ref;
		}
	}
	CHECK(bad == 0, "%u directory variant results differ from the scalar reference", bad);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s IMAGE N\n", argv[0]);
		return 2;
	}
	long n = atol(argv[2]);
	const unsigned version = SHMKV_FORMAT_VERSION;
	printf("tier: %s\n", shmkv_vector_name());
	check_variants();

	shmkv *db;
	char why[256];
	int err = shmkv_open_file_diag(argv[1], 0, &db, why, sizeof why);
	if (err) {
		fprintf(stderr, "open: %s\n", why);
		return 1;
	}
	CHECK(shmkv_header(db)->format_version == version, "image is format %u, expected %u",
	      (unsigned)shmkv_header(db)->format_version, version);
	err = shmkv_verify(db, why, sizeof why);
	CHECK(err == 0, "verify: %s", why);

	char key[32], val[32];
	for (long i = 0; i < 2 * n; i++) {
		int kl = snprintf(key, sizeof key, "key_%ld", i);
		const char *s;
		size_t len;
		err = shmkv_get_str(db, key, (size_t)kl, &s, &len);
		if (i < n) {
			int vl = snprintf(val, sizeof val, "val_%ld", i);
			CHECK(err == 0 && len == (size_t)vl && memcmp(s, val, len) == 0 && s[len] == 0,
			      "%s: err %d", key, err);
		} else {
			CHECK(err == SHMKV_ENOTFOUND, "%s: absent key gave %d", key, err);
		}
	}

	/* batches of mixed hits and misses, of every size up to 3 groups */
	enum { MAXB = 3 * SHMKV_BATCH_GROUP + 1 };
	char kbuf[MAXB][32];
	shmkv_key keys[MAXB];
	shmkv_value got[MAXB], one;
	int errs[MAXB];
	unsigned mismatch = 0;
	for (int round = 0; round < 2000; round++) {
		size_t m = (size_t)(next_rand() % MAXB);
		for (size_t i = 0; i < m; i++) {
			long id = (long)(next_rand() % (uint64_t)(2 * n + 1));
			keys[i].len = (size_t)snprintf(kbuf[i], sizeof kbuf[i], "key_%ld", id);
			keys[i].data = kbuf[i];
		}
		size_t found = shmkv_get_batch(db, keys, m, got, errs), count = 0;
		for (size_t i = 0; i < m; i++) {
			int e1 = shmkv_get(db, keys[i].data, keys[i].len, &one);
			mismatch += e1 != errs[i] || (e1 == 0 && (one.data != got[i].data ||
								 one.size != got[i].size ||
								 one.type != got[i].type));
			count += errs[i] == 0;
		}
		mismatch += count != found;
	}
	CHECK(mismatch == 0, "%u batched results differ from single gets", mismatch);

	shmkv_iter it;
	const void *k;
	size_t kl;
	shmkv_value v;
	long seen = 0;
	shmkv_iter_init(db, &it);
	while ((err = shmkv_iter_next(&it, &k, &kl, &v)) == 0)
		seen++;
	CHECK(err == SHMKV_EEND && seen == n, "iteration saw %ld of %ld, ended with %d", seen, n, err);
	seen = 0;
	shmkv_iter_init_all(db, &it);
	while ((err = shmkv_iter_next(&it, &k, &kl, &v)) == 0)
		seen++;
	CHECK(err == SHMKV_EEND && seen == n, "iteration of all records saw %ld of %ld, ended with %d",
	      seen, n, err);
	shmkv_close(db);
	printf("%lu passed, %lu failed\n", passed, failed);
	return failed != 0;
}
