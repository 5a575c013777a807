/* shmkv/lookup.h - the lookup of FORMAT.md §6.4 and the expiry of §17: the
 * checked lookup (shmkv__locate: every error named) and the hot get
 * (shmkv__get_hot), both built from bucket.h's scans; the hot get leaves
 * damage and the unusual to the checked path, with the same outcome. The
 * clock is read at most once a call, only for an image with EXPIRY.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_LOOKUP_H
#define SHMKV_LOOKUP_H

#include <time.h>

#include "bucket.h"

/* Reader policy (FORMAT.md §6.5): lines of bucket b+1 a single get requests
 * with b's two, so that a key displaced by one bucket does not wait for a
 * second round trip: 0, 1 or 2. Measured, 2: displaced/home 1.07-1.16 at
 * the median (0: 1.35-2.00, 1: 1.36-1.40), the throughput loop unchanged. */
#ifndef SHMKV_PREFETCH_NEXT
#define SHMKV_PREFETCH_NEXT 2
#endif
#if SHMKV_PREFETCH_NEXT < 0 || SHMKV_PREFETCH_NEXT > 2
#error "SHMKV_PREFETCH_NEXT must be 0, 1 or 2"
#endif

/* The lookup's later buckets: n after home bucket b, at most max_probe. */
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

/* The checked lookup: the home bucket, then, when its D and filter announce
 * displaced keys of this tag, up to min(D, max_probe) more. 0 with *bkp
 * (the bucket), *r, *e; SHMKV_ENOTFOUND; SHMKV_ECORRUPT (why). Expiry is
 * the caller's. */
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

/* "now": the pinned clock (shmkv_set_clock), else CLOCK_REALTIME seconds
 * (timespec_get: a vDSO read). */
static SHMKV__COLD int64_t shmkv__now(const shmkv *db)
{
	if (db->clock_pin)
		return db->clock_pin;
	struct timespec ts;
	if (timespec_get(&ts, TIME_UTC) != TIME_UTC)
		return INT64_MAX; /* no clock: treat every expiring entry as expired */
	return (int64_t)ts.tv_sec;
}

/* The expiry rule (FORMAT.md §17): expires (0: never) has passed at *now,
 * which is read once, when first needed, only for an image with EXPIRY. */
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

/* shmkv__expires_passed with now NULL for a single get's own clock. */
static inline int shmkv__expired_hot(const shmkv *db, uint32_t expires, int64_t *now)
{
	int64_t own = 0;
	return shmkv__expires_passed(db, expires, now ? now : &own);
}

/* The checked lookup of a key of any length: the key length rule, the hash
 * (any hash_bits), shmkv__locate. */
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

/* Whether delta d may hold the key of hash h: its filter (FORMAT.md §19.3). */
static SHMKV__HOT int shmkv__kf_maybe(const shmkv *d, uint64_t h)
{
	uint64_t w;
	const uint64_t m = shmkv__kf_mask(h);
	memcpy(&w, d->kf + 8 * shmkv__kf_word(h, d->kf_words), 8);
	return (w & m) == m;
}

/* A tombstone found in delta d (FORMAT.md §19.2): the key is absent
 * (SHMKV_ENOTFOUND, saying gone), unless an OUT tombstone's entry is not one
 * (type 0, value_len 0): SHMKV_ECORRUPT. One rule for a delta read alone and
 * a base read through it. */
static inline int shmkv__tomb_answer(const shmkv *d, const uint8_t *bk, const shmkv__rec *r,
				     const uint8_t *e, const char *where, const char *gone,
				     char *why, size_t why_len)
{
	const shmkv_entry_header *eh = (const shmkv_entry_header *)(const void *)e;
	if (e && (eh->type != SHMKV_TYPE_TOMBSTONE || eh->value_len))
		return shmkv__fail(SHMKV_ECORRUPT, why, why_len,
				   "%stombstone at %llu: its entry has type %u, value_len %u "
				   "(want 0, 0)",
				   where, (unsigned long long)(bk + r->pos - d->base), eh->type,
				   eh->value_len);
	return shmkv__fail(SHMKV_ENOTFOUND, why, why_len, "%s", gone);
}

/* Delta d's answer for key (hash h) read through by db (FORMAT.md §19):
 * SHMKV__NEXT when d does not hold it (the next level answers); a tombstone
 * or an expired upsert SHMKV_ENOTFOUND (never a lower level's record); else
 * the upsert's value as the checked get gives it. *now: db's clock, read
 * once. */
static inline int shmkv__delta_get(const shmkv *db, const shmkv *d, const void *key,
				   size_t key_len, uint64_t h, unsigned want, shmkv_value *v,
					int64_t *now, char *why, size_t why_len)
{
	const uint8_t *bk = NULL, *e = NULL;
	shmkv__rec r;
	memset(&r, 0, sizeof r);
	const char *where = d == db->top ? "top delta: " : "delta: ";
	int err = shmkv__locate(d, key, key_len, h, &bk, &r, &e, why, why_len);
	if (err == SHMKV_ENOTFOUND)
		return SHMKV__NEXT;
	if (err)
		return shmkv__prefix(err, why, why_len, "%s", where);
	if (r.kind & SHMKV_REC_TOMB)
		return shmkv__tomb_answer(d, bk, &r, e, where,
					  d == db->top ? "key removed by the top delta"
						       : "key removed by the delta",
					  why, why_len);
	if (d->expiry && r.expires) {
		if (!*now)
			*now = shmkv__now(db);
		if (*now >= (int64_t)r.expires)
			return shmkv__fail(SHMKV_ENOTFOUND, why, why_len,
					   "key expired at %u (unix seconds, the %supsert), now is "
					   "%lld", r.expires, d == db->top ? "top delta's " : "delta's ",
					   (long long)*now);
	}
	shmkv_value got;
	err = shmkv__rec_value(d, bk, &r, e, 0, &got, why, why_len);
	if (err)
		return shmkv__prefix(err, why, why_len, "%s", where);
	err = shmkv__type_want(&got, want, why, why_len);
	if (!err)
		*v = got;
	return err;
}

/* Delta d's answer when its filter lets the key through, else
 * SHMKV__NEXT. */
static inline int shmkv__through_one(const shmkv *db, const shmkv *d, const void *key,
				     size_t key_len, uint64_t h, unsigned want, shmkv_value *v,
				     int64_t *now, char *why, size_t why_len)
{
	if (!shmkv__kf_maybe(d, h))
		return SHMKV__NEXT;
	return shmkv__delta_get(db, d, key, key_len, h, want, v, now, why, why_len);
}

/* The deltas' answer (db->over set): the top delta's if it holds the key,
 * else the lower one's (FORMAT.md §19.6), else SHMKV__NEXT: the base
 * answers. A key neither holds costs their two filter words. */
static inline int shmkv__through(const shmkv *db, const void *key, size_t key_len, uint64_t h,
				 unsigned want, shmkv_value *v, int64_t *now, char *why,
				 size_t why_len)
{
	if (db->top) {
		const int rc = shmkv__through_one(db, db->top, key, key_len, h, want, v, now, why,
						  why_len);
		if (rc != SHMKV__NEXT)
			return rc;
	}
	return shmkv__through_one(db, db->over, key, key_len, h, want, v, now, why, why_len);
}

/* The checked get of a call whose clock is *now (read once, when first
 * needed: a batch's keys share it). */
static SHMKV__COLD int shmkv__get_cold_at(const shmkv *db, const void *key, size_t key_len,
					   unsigned want, shmkv_value *v, int64_t *now, char *why,
					   size_t why_len)
{
	const uint8_t *bk = NULL, *e = NULL;
	shmkv__rec r;
	memset(&r, 0, sizeof r); /* set by the locate on success; GCC cannot tell */
	if (db->over && key_len <= SHMKV_MAX_KEY_LEN) {
		int rc = shmkv__through(db, key, key_len,
					shmkv__hash(db->seed, db->hash_bits, key, key_len), want, v,
					now, why, why_len);
		if (rc != SHMKV__NEXT)
			return rc;
	}
	int err = shmkv__locate_key(db, key, key_len, &bk, &r, &e, why, why_len);
	if (err)
		return err;
	if (r.kind & SHMKV_REC_TOMB) /* a delta read alone */
		return shmkv__tomb_answer(db, bk, &r, e, "", "key removed (a tombstone)", why,
					  why_len);
	if (shmkv__rec_expired(db, &r, now))
		return shmkv__fail(SHMKV_ENOTFOUND, why, why_len,
				   "key expired at %u (unix seconds), now is %lld", r.expires,
				   (long long)*now);
	shmkv_value got;
	err = shmkv__rec_value(db, bk, &r, e, 0, &got, why, why_len);
	if (!err)
		err = shmkv__type_want(&got, want, why, why_len);
	if (err)
		return err;
	*v = got;
	return 0;
}

/* The checked get (shmkv_get_diag, and every case the hot path leaves). */
static SHMKV__COLD int shmkv__get_cold(const shmkv *db, const void *key, size_t key_len,
					unsigned want, shmkv_value *v, char *why, size_t why_len)
{
	int64_t now = 0;
	return shmkv__get_cold_at(db, key, key_len, want, v, &now, why, why_len);
}

/* shmkv__get_cold in five arguments, so the hot path's jump is a tail call. */
static SHMKV__COLD int shmkv__get_checked(const shmkv *db, const void *key, size_t key_len,
					   unsigned want, shmkv_value *v)
{
	return shmkv__get_cold(db, key, key_len, want, v, NULL, 0);
}

/* The end of a hot get whose key's record, at rec (its bounds checked by
 * the scan), expires or holds text that is not ASCII: the clock (*now: the
 * batch's; NULL: its own), then the value's whole shape check. Out of the
 * scan's loop, by a tail call: ASCII text without expiry pays nothing. */
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

/* The end of a hot get whose bucket b's scan returned rc (not SHMKV__NEXT):
 * 0, the OUT entry e by shmkv__hit, shmkv__get_finish, or the checked get;
 * all but the first by tail calls. */
static inline __attribute__((always_inline)) int
shmkv__get_end(const shmkv *db, const void *key, size_t key_len, uint64_t b, int rc,
		const uint8_t *e, unsigned want, shmkv_value *v, int64_t *now)
{
	if (SHMKV__LIKELY(!rc))
		return 0;
	if (rc == SHMKV__OUTHIT)
		return shmkv__hit(db, e, key_len, want, v);
	if (rc >= SHMKV__FINISH) /* b: the bucket the record is in */
		return shmkv__get_finish(db, shmkv__bucket(db, b) + (rc - SHMKV__FINISH), key,
					 key_len, want, v, now);
	return shmkv__get_checked(db, key, key_len, want, v);
}

/* A hot get whose home bucket b announces d > 0 displaced keys of its tag:
 * the walk over up to min(d, max_probe) later buckets. */
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

/* A hot get from home bucket b at bk, its directory's matches m compared:
 * the scan, then, if announced, the walk. The single get, and a batch that
 * compared the directory a pass before. */
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

/* The hot get of key with hash h (hash_bits 64) from home bucket b, as a
 * value of type want (0: any); its outcomes are shmkv__get_cold's. */
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

/* What a hot get from home bucket b at bk reads after bk's first line:
 * its second line and SHMKV_PREFETCH_NEXT lines of the next bucket,
 * requested together. */
static SHMKV__HOT void shmkv__get_request(const shmkv *db, uint64_t b, const uint8_t *bk)
{
	__builtin_prefetch(bk + 64); /* the pair's second line, with the first */
#if SHMKV_PREFETCH_NEXT /* the reader policy above */
	const uint8_t *nx =
		b + 1 == db->bucket_count ? shmkv__bucket(db, 0) : bk + SHMKV_BUCKET_BYTES;
	__builtin_prefetch(nx);
#if SHMKV_PREFETCH_NEXT == 2
	__builtin_prefetch(nx + 64);
#endif
#else
	(void)db;
	(void)b;
#endif
}

/* Whether a delta db is read through (db->over, and db->top when set) may
 * hold the key of hash h: one mask for both filter words (FORMAT.md §19.3;
 * the deltas share the base's hash, §19.4). */
static SHMKV__HOT int shmkv__over_maybe(const shmkv *db, uint64_t h)
{
	return shmkv__kf_maybe(db->over, h) || (db->top && shmkv__kf_maybe(db->top, h));
}

/* A hot get read through deltas (shmkv_delta_set, shmkv_delta_set2, an
 * attached protocol 2 cache) of a key a delta's filter lets through (few
 * keys): the deltas first, then, for a key neither holds, the base from
 * bucket b, whose lines shmkv__get_h requested before it read the filters
 * (a request decides nothing: a delta that holds the key still answers
 * first, FORMAT.md §19.6). Out of line: what every other get runs stays
 * one copy of shmkv__get_fast. */
static __attribute__((noinline)) int shmkv__get_over(const shmkv *db, const void *key,
						      size_t key_len, uint64_t h, uint64_t b,
						      unsigned want, shmkv_value *v)
{
	int64_t now = 0;
	const int rc = shmkv__through(db, key, key_len, h, want, v, &now, NULL, 0);
	if (rc != SHMKV__NEXT)
		return rc;
	return shmkv__get_fast(db, key, key_len, h, b, want, v, NULL);
}

/* The hot get of key with hash h: the home bucket's lines requested
 * (shmkv__get_request), then the get. Read through deltas, a key their
 * filters rule out (most keys) costs only the filter test here, made
 * while the base's lines are on their way; the rest go to shmkv__get_over. */
static SHMKV__HOT int shmkv__get_h(const shmkv *db, const void *key, size_t key_len, uint64_t h,
				    unsigned want, shmkv_value *v)
{
	const uint64_t b = shmkv__home(h, db->bucket_count);
	shmkv__get_request(db, b, shmkv__bucket(db, b));
	if (SHMKV__UNLIKELY(db->over != NULL) && SHMKV__UNLIKELY(shmkv__over_maybe(db, h)))
		return shmkv__get_over(db, key, key_len, h, b, want, v);
	return shmkv__get_fast(db, key, key_len, h, b, want, v, NULL);
}

/* The hot get of a key over 16 bytes (xxhash's long-input code). */
static __attribute__((noinline)) int shmkv__get_long(const shmkv *db, const void *key,
						      size_t key_len, unsigned want,
						      shmkv_value *v)
{
	return shmkv__get_h(db, key, key_len, shmkv__hash64(db->seed, key, key_len), want, v);
}

/* The hot get: one out-of-line call from each getter (a small call site in
 * every caller). Keys of up to 16 bytes are hashed here without a call;
 * every other call on its way is a tail call. */
static __attribute__((noinline, hot)) int shmkv__get_hot(const shmkv *db, const void *key,
						      size_t key_len, unsigned want,
						      shmkv_value *v)
{
	if (SHMKV__UNLIKELY(key_len > 16))
		return shmkv__get_long(db, key, key_len, want, v);
	return shmkv__get_h(db, key, key_len, shmkv__hash64(db->seed, key, key_len), want, v);
}

/* The record of key, expired or not (tools, verify): *out its image offset,
 * *expires (0: none). */
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
