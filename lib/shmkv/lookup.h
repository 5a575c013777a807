/* shmkv/lookup.h - the lookup of FORMAT.md §6 and the expiry of §8: the
 * checked lookup (shmkv__locate: every offset checked, every error named)
 * and the hot get (shmkv__get_hot: hash, both lines of the home bucket, the
 * directory compare, the bucket's matches; damage and the unusual go to
 * the checked path, with the same outcome). Both are built from bucket.h's
 * scans. Expiry: the clock is read at most once a call, and only for an
 * image whose header says EXPIRY.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_LOOKUP_H
#define SHMKV_LOOKUP_H

#include <time.h>

#include "bucket.h"

/* Reader policy (not format, FORMAT.md §17.5): how many lines of bucket
 * b+1 a single get requests at its start, with bucket b's two, so that a
 * key displaced by one bucket (nearly every displaced key) does not wait
 * for a second round trip: 0, 1 or 2. bench/RESULTS.md ("Format v2 layout
 * B") measured 2 against 0 and 1: displaced/home at the median 1.07-1.16
 * (0: 1.35-2.00, 1: 1.36-1.40), the throughput loop within the noise.
 * Batches request the next bucket themselves, only where it may serve. */
#ifndef SHMKV_PREFETCH_NEXT
#define SHMKV_PREFETCH_NEXT 2
#endif
#if SHMKV_PREFETCH_NEXT < 0 || SHMKV_PREFETCH_NEXT > 2
#error "SHMKV_PREFETCH_NEXT must be 0, 1 or 2"
#endif

/* The v2 lookup's later buckets: the n buckets after home bucket b (n from
 * shmkv__displaced, capped at max_probe), wrapping. As shmkv__locate. */
static SHMKV__HOT int shmkv__locate_on(const shmkv *db, const void *key, size_t key_len,
					uint64_t tag, uint64_t b, uint64_t n, const uint8_t **bkp,
					shmkv__rec *r, const uint8_t **e, char *why, size_t why_len)
{
	if (n > db->max_probe) /* a displacement byte above max_probe is damage: capped */
		n = db->max_probe;
	for (; n; n--) {
		if (++b == db->bucket_count)
			b = 0;
		int rc = shmkv__bucket_scan(db, b, tag, key, key_len, r, e, why, why_len);
		if (rc != SHMKV__NEXT) {
			*bkp = shmkv__bucket(db, b);
			return rc;
		}
	}
	return why ? shmkv__fail(SHMKV_ENOTFOUND, why, why_len, "key not found") : SHMKV_ENOTFOUND;
}

/* The v2 lookup (FORMAT.md §17.5), the one every path uses: the home
 * bucket (both its lines requested at once), then, when its D and filter
 * announce displaced keys with this tag, up to min(D, max_probe) later
 * buckets. 0 with *bkp (the bucket found in), *r, *e; SHMKV_ENOTFOUND;
 * SHMKV_ECORRUPT (why). Expiry is the caller's. */
static SHMKV__HOT int shmkv__locate(const shmkv *db, const void *key, size_t key_len, uint64_t h,
				     const uint8_t **bkp, shmkv__rec *r, const uint8_t **e,
				     char *why, size_t why_len)
{
	uint64_t tag = shmkv__tag(h), b = shmkv__home(h, db->bucket_count);
	const uint8_t *bk = shmkv__bucket(db, b);
	__builtin_prefetch(bk + 64); /* the pair's second line, with the first */
	int rc = shmkv__bucket_scan(db, b, tag, key, key_len, r, e, why, why_len);
	if (SHMKV__LIKELY(rc != SHMKV__NEXT)) {
		*bkp = bk;
		return rc;
	}
	return shmkv__locate_on(db, key, key_len, tag, b, shmkv__displaced(bk, tag, db->max_probe),
				 bkp, r, e, why, why_len);
}

/* "now" for expiry: the handle's pinned clock (shmkv_set_clock) or the
 * realtime clock in whole seconds (C11 timespec_get, glibc's
 * clock_gettime(CLOCK_REALTIME): a vDSO read, no system call). */
static SHMKV__COLD int64_t shmkv__now(const shmkv *db)
{
	if (db->clock_pin)
		return db->clock_pin;
	struct timespec ts;
	if (timespec_get(&ts, TIME_UTC) != TIME_UTC)
		return INT64_MAX; /* no clock: treat every expiring entry as expired */
	return (int64_t)ts.tv_sec;
}

/* Whether a record that expires at expires (0: never) is expired at *now
 * (FORMAT.md §17.6), and shmkv__rec_expired of a decoded record. The clock
 * is read only for a record that expires in an image whose header says
 * EXPIRY, and once per call: *now is 0 until read. */
static SHMKV__HOT int shmkv__expires_passed(const shmkv *db, uint32_t expires, int64_t *now)
{
	if (SHMKV__LIKELY(!db->expiry) || !expires)
		return 0;
	if (!*now)
		*now = shmkv__now(db);
	return *now >= (int64_t)expires;
}

static SHMKV__HOT int shmkv__rec_expired(const shmkv *db, const shmkv__rec *r, int64_t *now)
{
	return shmkv__expires_passed(db, r->expires, now);
}

/* shmkv__expires_passed where now may be NULL (a single get: it meets at
 * most one record of its key, so it reads the clock at most once without
 * keeping it). */
static inline int shmkv__expired_hot(const shmkv *db, uint32_t expires, int64_t *now)
{
	int64_t own = 0;
	return shmkv__expires_passed(db, expires, now ? now : &own);
}

/* The checked lookup of a key of any length (the cold get and find2): the
 * key length rule, the hash, shmkv__locate with messages. */
static inline int shmkv__locate_key(const shmkv *db, const void *key, size_t key_len,
				     const uint8_t **bk, shmkv__rec *r, const uint8_t **e,
				     char *why, size_t why_len)
{
	if (key_len > SHMKV_MAX_KEY_LEN)
		return shmkv__fail(SHMKV_EKEYLEN, why, why_len,
				   "key of %zu bytes is longer than the %u-byte limit", key_len,
				   SHMKV_MAX_KEY_LEN);
	uint64_t h = shmkv__hash(db->seed, db->hash_bits, key, key_len);
	memset(r, 0, sizeof *r); /* GCC 12 cannot see locate fills it on success */
	return shmkv__locate(db, key, key_len, h, bk, r, e, why, why_len);
}

/* The checked v2 get (shmkv_get_diag, and every case the hot path leaves):
 * the lookup with messages, expiry ("expired"), the value, the type. */
static SHMKV__COLD int shmkv__get_cold(const shmkv *db, const void *key, size_t key_len,
					unsigned want, shmkv_value *v, char *why, size_t why_len)
{
	const uint8_t *bk = NULL, *e = NULL;
	shmkv__rec r;
	int err = shmkv__locate_key(db, key, key_len, &bk, &r, &e, why, why_len);
	if (err)
		return err;
	int64_t now = 0;
	if (shmkv__rec_expired(db, &r, &now))
		return shmkv__fail(SHMKV_ENOTFOUND, why, why_len,
				   "key expired at %u (unix seconds), now is %lld", r.expires,
				   (long long)now);
	shmkv_value got;
	err = shmkv__rec_value(db, bk, &r, e, 0, &got, why, why_len);
	if (!err)
		err = shmkv__type_want(&got, want, why, why_len);
	if (err)
		return err;
	*v = got;
	return 0;
}

/* shmkv__get_cold without messages, in five arguments (so that the hot
 * path's jump to it is a tail call). */
static SHMKV__COLD int shmkv__get_checked(const shmkv *db, const void *key, size_t key_len,
					   unsigned want, shmkv_value *v)
{
	return shmkv__get_cold(db, key, key_len, want, v, NULL, 0);
}

/* The end of a hot get whose key's record, at rec in a bucket that the hot
 * scan checked (shmkv__bucket_fast: its bounds, and an OUT record's entry
 * holding key), expires in an image with expiry or holds text that is not
 * ASCII: the clock (*now, the batch's, read once per batch; NULL: this
 * get's own), then the value with its whole shape check (UTF-8). Out of the
 * scan's loop and reached by a tail call, so that the hot get needs no
 * stack frame, and an image without expiry or with ASCII text pays nothing. */
static __attribute__((noinline)) int shmkv__get_finish(const shmkv *db, const uint8_t *rec,
						       const void *key, size_t key_len,
						       unsigned want, shmkv_value *v, int64_t *now)
{
	const size_t off = (size_t)(rec - shmkv__bucket(db, 0));
	const uint8_t *bk = rec - off % SHMKV_BUCKET_BYTES;
	const unsigned pos = (unsigned)(off % SHMKV_BUCKET_BYTES), kind = bk[pos];
	if ((kind & SHMKV_REC_EXPIRES) && db->expiry) {
		uint32_t t;
		memcpy(&t, rec + (kind & SHMKV_REC_OUT ? SHMKV_REC_OUT_HEAD : SHMKV_REC_INLINE_HEAD),
		       4);
		if (shmkv__expired_hot(db, t, now))
			return SHMKV_ENOTFOUND;
	}
	if (kind & SHMKV_REC_OUT) {
		uint64_t u = 0;
		const uint8_t *c;
		memcpy(&u, rec + 1, 5); /* little-endian hosts only (format.h) */
		if (SHMKV__LIKELY(shmkv__unit_entry(db, u, shmkv__key_lim(db, key_len), &c)))
			return shmkv__hit(db, c, key_len, want, v);
	} else {
		unsigned kp, vp;
		const unsigned ty = kind & SHMKV_REC_TYPE_MASK;
		(void)shmkv__rec_inline_span(bk, pos, kind, &kp, &vp);
		if (SHMKV__LIKELY(!want || ty == want) &&
		    SHMKV__LIKELY(!shmkv__rec_inline_value(ty, bk + vp, bk[pos + 2], 0, v, NULL, 0)))
			return 0;
	}
	return shmkv__get_checked(db, key, key_len, want, v);
}

/* The end of a hot get whose bucket b's scan (shmkv__bucket_fast) returned
 * rc, not SHMKV__NEXT: 0 (*v set), an OUT record's entry e read by
 * shmkv__hit (entry.h), a record that expires or holds non-ASCII text by shmkv__get_finish
 * (the clock: now, the batch's, or NULL: its own), damage and a value of
 * another type by shmkv__get_checked; all but the first, tail calls. */
static inline __attribute__((always_inline)) int
shmkv__get_end(const shmkv *db, const void *key, size_t key_len, uint64_t b, int rc,
		const uint8_t *e, unsigned want, shmkv_value *v, int64_t *now)
{
	if (SHMKV__LIKELY(!rc))
		return 0;
	if (rc == SHMKV__OUTHIT) /* the entry's value by entry.h's hit rules */
		return shmkv__hit(db, e, key_len, want, v);
	if (rc >= SHMKV__FINISH) /* b: the bucket the record is in */
		return shmkv__get_finish(db, shmkv__bucket(db, b) + (rc - SHMKV__FINISH), key,
					 key_len, want, v, now);
	return shmkv__get_checked(db, key, key_len, want, v);
}

/* A hot get whose home bucket b did not hold key (tag) and announces d > 0
 * displaced keys of its tag (shmkv__displaced): the walk of
 * shmkv__locate_on over up to min(d, max_probe) later buckets, each by
 * shmkv__bucket_fast, then shmkv__get_end. */
static inline __attribute__((always_inline)) int
shmkv__get_walk(const shmkv *db, const void *key, size_t key_len, uint64_t tag, uint64_t b,
		 uint64_t d, unsigned want, shmkv_value *v, int64_t *now)
{
	const uint8_t *e = NULL;
	int rc = SHMKV__NEXT;
	if (d > db->max_probe) /* a displacement byte above max_probe is damage: capped */
		d = db->max_probe;
	for (; d; d--) {
		if (++b == db->bucket_count)
			b = 0;
		rc = shmkv__bucket_fast(db, shmkv__bucket(db, b), tag, key, key_len, want, v, &e);
		if (rc != SHMKV__NEXT)
			break;
	}
	if (rc == SHMKV__NEXT)
		return SHMKV_ENOTFOUND;
	return shmkv__get_end(db, key, key_len, b, rc, e, want, v, now);
}

/* A hot get from its home bucket b at bk, whose n <= 16 records' directory
 * matches of key's tag are m: the scan (shmkv__bucket_fast_m); if key is
 * not there and the bucket's D and filter announce displaced keys with
 * this tag, the walk over up to min(D, max_probe) later buckets
 * (shmkv__get_walk); the outcome by shmkv__get_end. The single get and
 * a batch that compared the directory a pass before. */
static inline __attribute__((always_inline)) int
shmkv__get_home(const shmkv *db, const void *key, size_t key_len, uint64_t tag, uint64_t b,
		 const uint8_t *bk, unsigned n, unsigned m, unsigned want, shmkv_value *v,
		 int64_t *now)
{
	const uint8_t *e = NULL;
	const int rc = shmkv__bucket_fast_m(db, bk, n, m, key, key_len, want, v, &e);
	if (rc == SHMKV__NEXT) {
		const uint64_t d = shmkv__displaced(bk, tag, db->max_probe);
		if (SHMKV__LIKELY(!d))
			return SHMKV_ENOTFOUND;
		return shmkv__get_walk(db, key, key_len, tag, b, d, want, v, now);
	}
	return shmkv__get_end(db, key, key_len, b, rc, e, want, v, now);
}

/* The hot v2 get (the single get and the batch) of key with hash h
 * (hash_bits 64) as a value of type want (0: any), b its home bucket: the
 * lookup of FORMAT.md §17.5 by shmkv__get_home. Its outcomes are the
 * checked get's (shmkv__get_cold). */
static SHMKV__HOT int shmkv__get_fast(const shmkv *db, const void *key, size_t key_len,
				       uint64_t h, uint64_t b, unsigned want, shmkv_value *v,
				       int64_t *now)
{
	const uint8_t *bk = shmkv__bucket(db, b);
	const uint64_t tag = shmkv__tag(h);
	const unsigned n = bk[0];
	if (SHMKV__UNLIKELY(n > SHMKV_MAX_RECORDS)) /* damage: the checked get says so */
		return shmkv__get_checked(db, key, key_len, want, v);
	return shmkv__get_home(db, key, key_len, tag, b, bk, n, shmkv__match(bk, n, tag), want,
				v, now);
}

/* The v2 hot get of key with hash h: it requests the home bucket's second
 * line and SHMKV_PREFETCH_NEXT lines of its successor, then
 * shmkv__get_fast. */
static SHMKV__HOT int shmkv__get_at(const shmkv *db, const void *key, size_t key_len, uint64_t h,
				     unsigned want, shmkv_value *v)
{
	const uint64_t b = shmkv__home(h, db->bucket_count);
	const uint8_t *bk = shmkv__bucket(db, b);
	__builtin_prefetch(bk + 64); /* the pair's second line, with the first */
#if SHMKV_PREFETCH_NEXT /* the reader policy above */
	const uint8_t *nx =
		b + 1 == db->bucket_count ? shmkv__bucket(db, 0) : bk + SHMKV_BUCKET_BYTES;
	__builtin_prefetch(nx);
#if SHMKV_PREFETCH_NEXT == 2
	__builtin_prefetch(nx + 64);
#endif
#endif
	return shmkv__get_fast(db, key, key_len, h, b, want, v, NULL);
}

/* The v2 hot get of a key longer than 16 bytes, whose hash may call
 * xxhash's long-input code. */
static __attribute__((noinline)) int shmkv__get_long(const shmkv *db, const void *key,
						      size_t key_len, unsigned want,
						      shmkv_value *v)
{
	return shmkv__get_at(db, key, key_len, shmkv__hash64(db->seed, key, key_len), want, v);
}

/* The v2 hot get: one out-of-line call from shmkv__get_as, so that v1's
 * code there is untouched (tests/perf counts its instructions). Keys of up
 * to 16 bytes are hashed here without a call, so that, every other call on
 * its way being a tail call, the hot get needs no stack frame; longer keys
 * go to shmkv__get_long. */
static __attribute__((noinline, hot)) int shmkv__get_hot(const shmkv *db, const void *key,
						      size_t key_len, unsigned want,
						      shmkv_value *v)
{
	if (SHMKV__UNLIKELY(key_len > 16))
		return shmkv__get_long(db, key, key_len, want, v);
	return shmkv__get_at(db, key, key_len, shmkv__hash64(db->seed, key, key_len), want, v);
}

/* The record of key (v2), expired or not, for tools and verify: 0 with
 * *out its image offset (in INDEX) and *expires (0: none); the checked
 * lookup's codes. */
static inline int shmkv__find(const shmkv *db, const void *key, size_t key_len, uint64_t *out,
			       uint32_t *expires, char *why, size_t why_len)
{
	const uint8_t *bk = NULL, *e = NULL;
	shmkv__rec r;
	int err = shmkv__locate_key(db, key, key_len, &bk, &r, &e, why, why_len);
	if (err)
		return err;
	*out = (uint64_t)(bk + r.pos - db->base);
	if (expires)
		*expires = r.expires;
	return 0;
}

#endif /* SHMKV_LOOKUP_H */
