/* fuzz_util.h - shared by the libFuzzer targets of tests/fuzz (README.md).
 * Each target defines LLVMFuzzerTestOneInput (and LLVMFuzzerInitialize when
 * it needs set-up); built with -fsanitize=fuzzer they are libFuzzer
 * programs, built without they link replay_main.c and replay files (the
 * seed corpus, regress/) in the ordinary suite. */
#ifndef SHMKV_FUZZ_UTIL_H
#define SHMKV_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shmkv.h>

/* An invariant the code under test broke: a crash for libFuzzer, a failed
 * test for the replay. */
#define FUZZ_CHECK(cond, ...)                                                                     \
	do {                                                                                      \
		if (!(cond)) {                                                                    \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);  \
			fprintf(stderr, __VA_ARGS__);                                             \
			fputc('\n', stderr);                                                      \
			abort();                                                                  \
		}                                                                                 \
	} while (0)

/* A copy of data in its own heap block of exactly size bytes, 64-aligned as
 * a mapping is: ASan reports any read past its end. */
static inline uint8_t *fuzz_copy(const uint8_t *data, size_t size)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, size ? size : 1) != 0)
		abort();
	if (size)
		memcpy(p, data, size);
	return (uint8_t *)p;
}

/* Recomputes what an attacker who can write the file recomputes: zeroes the
 * bytes no section covers (header tail, gaps, file tail), sets file_size to
 * the buffer's length, then the section checksums and the header checksum.
 * Does nothing when the section table does not describe the buffer (the
 * reader then refuses the image anyway). size is a multiple of
 * SHMKV_FILE_ALIGN or the image is refused, so callers cut the input first. */
static inline void fuzz_fix_checksums(uint8_t *b, size_t size)
{
	if (size < SHMKV_HEADER_SIZE)
		return;
	shmkv_image_header *h = (shmkv_image_header *)(void *)b;
	h->file_size = size;
	uint32_t n = h->section_count <= SHMKV_MAX_SECTIONS ? h->section_count : 0;
	uint64_t from = SHMKV_HEADER_USED;
	for (uint32_t i = 0; i <= n; i++) {
		uint64_t to = i < n ? h->sections[i].offset : size;
		if (i < n && (h->sections[i].offset > size ||
			      h->sections[i].size > size - h->sections[i].offset || to < from))
			break; /* not a table that fits: leave the rest as is */
		if (to > from)
			memset(b + from, 0, (size_t)(to - from));
		if (i < n) {
			const shmkv_section_desc *s = &h->sections[i];
			h->sections[i].checksum = XXH3_64bits(b + s->offset, (size_t)s->size);
			from = s->offset + s->size;
		}
	}
	h->header_checksum = XXH3_64bits(b, offsetof(shmkv_image_header, header_checksum));
}

/* What shmkv_open_file does, on memory: check, then bind a handle
 * (tests/image_util.h's Guarded::open does the same). */
static inline int fuzz_open(const uint8_t *b, size_t size, unsigned flags, shmkv *db)
{
	char why[512];
	memset(db, 0, sizeof *db);
	int err = shmkv_bind_mem(db, b, size, flags, why, sizeof why);
	if (err)
		FUZZ_CHECK(why[0], "error %d without a reason", err);
	return err;
}

static inline void fuzz_touch_value(const shmkv_value *v, unsigned *sink)
{
	/* read every byte a caller may read: ASan flags any outside the image */
	const uint8_t *p = (const uint8_t *)v->data;
	for (size_t i = 0; i < v->size; i++)
		*sink += p[i];
	if (v->type == SHMKV_TYPE_STRLIST) {
		shmkv_strlist l;
		if (shmkv_value_strlist(v, &l) == 0)
			for (size_t i = 0; i < shmkv_strlist_count(&l); i++) {
				size_t len = 0;
				const char *s = shmkv_strlist_at(&l, i, &len);
				if (s)
					for (size_t k = 0; k <= len; k++) /* and the NUL */
						*sink += (uint8_t)s[k];
			}
	}
}

/* Every way a reader reads an open image: iterate every record (collecting
 * keys) and the live entries, get every key found, batch-get them with
 * absent ones, get keys taken from the raw bytes, run the structural check.
 * When shmkv_verify accepts the image, the iteration of every record returns
 * entry_count records, and every key of one without an expiry is found by
 * get with the same value (one with an expiry may have expired: absent; a
 * delta's tombstone, which a delta read alone lists, is absent);
 * the live iteration returns no more, and each of its keys is found (or
 * expired since it started). */
static inline void fuzz_read_all(const shmkv *db, const uint8_t *raw, size_t raw_size)
{
	enum { MAXK = 256 };
	shmkv_key keys[2 * MAXK + 8];
	shmkv_value iv[MAXK];
	uint32_t iexp[MAXK];
	size_t nk = 0;
	unsigned sink = 0;
	char why[512];
	int verified = shmkv_verify(db, why, sizeof why) == 0;

	shmkv_iter it;
	shmkv_iter_init_all(db, &it);
	const void *k;
	size_t kl;
	shmkv_value v;
	int err;
	uint64_t count = 0;
	while ((err = shmkv_iter_next(&it, &k, &kl, &v)) == 0) {
		fuzz_touch_value(&v, &sink);
		for (size_t i = 0; i < kl; i++)
			sink += ((const uint8_t *)k)[i];
		if (nk < MAXK) {
			keys[nk].data = k;
			keys[nk].len = kl;
			iv[nk] = v;
			iexp[nk] = shmkv_iter_expires(&it);
			nk++;
		}
		FUZZ_CHECK(++count <= db->entry_count + 1, "iteration past entry_count");
	}
	FUZZ_CHECK(err == SHMKV_EEND || err == SHMKV_ECORRUPT, "iter_next: %d", err);
	if (verified)
		FUZZ_CHECK(err == SHMKV_EEND && count == db->entry_count,
			   "verified image: iteration gave %d after %llu of %llu", err,
			   (unsigned long long)count, (unsigned long long)db->entry_count);
	/* the live entries: no more than every record, each found by get */
	uint64_t live = 0;
	shmkv_iter_init(db, &it);
	while ((err = shmkv_iter_next(&it, &k, &kl, &v)) == 0) {
		fuzz_touch_value(&v, &sink);
		FUZZ_CHECK(++live <= db->entry_count + 1, "live iteration past entry_count");
		shmkv_value g;
		int ge = shmkv_get(db, k, kl, &g);
		if (verified)
			FUZZ_CHECK(ge == 0 ? g.data == v.data
					   : ge == SHMKV_ENOTFOUND && shmkv_iter_expires(&it) != 0,
				   "verified image: live key not found alike (%d)", ge);
	}
	FUZZ_CHECK(err == SHMKV_EEND || err == SHMKV_ECORRUPT, "live iter_next: %d", err);
	if (verified)
		FUZZ_CHECK(err == SHMKV_EEND && live <= count, "verified image: %llu live of %llu",
			   (unsigned long long)live, (unsigned long long)count);

	for (size_t i = 0; i < nk; i++) {
		err = shmkv_get(db, keys[i].data, keys[i].len, &v);
		FUZZ_CHECK(err == 0 || err == SHMKV_ENOTFOUND || err == SHMKV_ECORRUPT,
			   "get: %d", err);
		if (err == 0)
			fuzz_touch_value(&v, &sink);
		if (verified && iv[i].type == SHMKV_TYPE_TOMBSTONE) /* a delta read alone */
			FUZZ_CHECK(err == SHMKV_ENOTFOUND,
				   "verified delta: tombstone %zu's key found (%d)", i, err);
		else if (verified && !(iexp[i] && err == SHMKV_ENOTFOUND))
			FUZZ_CHECK(err == 0 && v.type == iv[i].type && v.size == iv[i].size &&
					   v.data == iv[i].data,
				   "verified image: iterated key %zu not found alike (%d)", i, err);
	}
	/* absent keys and keys cut from the input: other probe paths */
	size_t nb = nk;
	static const char *absent[] = {"", "a", "user:1:name", "0123456789abcdef0123456789"};
	for (size_t i = 0; i < sizeof absent / sizeof *absent; i++) {
		keys[nb].data = absent[i];
		keys[nb].len = strlen(absent[i]);
		nb++;
	}
	for (size_t off = 0; off + 16 <= raw_size && nb < 2 * MAXK + 8; off += raw_size / 4 + 1) {
		keys[nb].data = raw + off;
		keys[nb].len = 1 + raw[off] % 16;
		nb++;
	}
	for (size_t i = nk; i < nb; i++) {
		err = shmkv_get(db, keys[i].data, keys[i].len, &v);
		FUZZ_CHECK(err == 0 || err == SHMKV_ENOTFOUND || err == SHMKV_ECORRUPT,
			   "get: %d", err);
		if (err == 0)
			fuzz_touch_value(&v, &sink);
	}
	shmkv_value bv[2 * MAXK + 8];
	int berr[2 * MAXK + 8];
	size_t found = shmkv_get_batch(db, keys, nb, bv, berr);
	size_t f2 = 0;
	for (size_t i = 0; i < nb; i++) {
		FUZZ_CHECK(berr[i] == 0 || berr[i] == SHMKV_ENOTFOUND || berr[i] == SHMKV_ECORRUPT,
			   "batch: %d", berr[i]);
		if (berr[i] == 0) {
			f2++;
			fuzz_touch_value(&bv[i], &sink);
		}
		/* batch and single gets agree */
		err = shmkv_get(db, keys[i].data, keys[i].len, &v);
		FUZZ_CHECK(err == berr[i] && (err || (v.data == bv[i].data && v.size == bv[i].size)),
			   "batch gave %d, get %d for key %zu", berr[i], err, i);
	}
	FUZZ_CHECK(found == f2, "batch returned %zu, %zu found", found, f2);
	/* typed getters take their own paths */
	if (nk) {
		int64_t i64;
		double f64;
		const char *s;
		size_t n;
		const float *f32;
		(void)shmkv_get_i64(db, keys[0].data, keys[0].len, &i64);
		(void)shmkv_get_f64(db, keys[0].data, keys[0].len, &f64);
		if (shmkv_get_str(db, keys[0].data, keys[0].len, &s, &n) == 0)
			sink += (uint8_t)s[n]; /* the NUL */
		/* the last element's bits: converting an arbitrary float to
		 * unsigned is itself undefined (the fuzzer found that) */
		if (shmkv_get_f32list(db, keys[0].data, keys[0].len, &f32, &n) == 0 && n) {
			uint32_t bits;
			memcpy(&bits, &f32[n - 1], sizeof bits);
			sink += bits;
		}
	}
	volatile unsigned keep = sink;
	(void)keep;
}

#endif /* SHMKV_FUZZ_UTIL_H */
