/* shmkv/bucket.h - a bucket's records (FORMAT.md §6.1-6.2): the record
 * rules in small pieces that the checked decode (shmkv__rec_decode and the
 * scan shmkv__bucket_scan: the checked lookup, iteration, verify) and the
 * hot scan (shmkv__bucket_fast_m) are both built from, so that both accept
 * exactly the same records. An OUT record's entry: entry.h's rules.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_BUCKET_H
#define SHMKV_BUCKET_H

#include "entry.h"
#include "probe.h"

#define SHMKV__NEXT 1 /* a bucket scan: not in this bucket */

/* A decoded record; offsets within its bucket. */
typedef struct shmkv__rec {
	unsigned pos, end;   /* the record's bytes [pos, end) */
	unsigned kind;       /* SHMKV_REC_* bits and the type */
	unsigned key_len;    /* inline records */
	unsigned key_pos;    /* inline: the key's offset */
	unsigned val_pos;    /* inline: the value's offset (aligned for its type) */
	unsigned value_len;  /* inline */
	uint32_t expires;    /* 0: none */
	uint64_t unit;       /* OUT: the entry's image offset / 8 */
} shmkv__rec;

/* Where a bucket's directory of n records ends: no record starts before. */
static inline unsigned shmkv__dir_end(unsigned n)
{
	return SHMKV_BUCKET_HEAD + SHMKV_DIR_BYTES * n;
}

/* Whether a record may start at pos of a bucket of n records: after the
 * directory, its 3-byte head inside the bucket. */
static inline int shmkv__rec_at_ok(unsigned n, unsigned pos)
{
	return pos >= shmkv__dir_end(n) && pos + SHMKV_REC_INLINE_HEAD <= SHMKV_BUCKET_BYTES;
}

/* Whether an inline record's kind is sound: no reserved bits, a type. */
static inline int shmkv__rec_inline_kind_ok(unsigned kind)
{
	const unsigned t = kind & SHMKV_REC_TYPE_MASK;
	return !(kind & ~SHMKV_REC_KNOWN) && t >= 1 && t <= SHMKV_TYPE_MAX;
}

/* An inline record of kind at pos with key_len and value_len (<= 255): its
 * key at *key_pos, its value at *val_pos (aligned in the bucket for its
 * type); returns its end (past a NUL), at most 525 past pos, which the
 * caller checks against the bucket's end. */
static inline unsigned shmkv__rec_span(unsigned pos, unsigned kind, unsigned key_len,
				       unsigned value_len, unsigned *key_pos, unsigned *val_pos)
{
	const unsigned t = kind & SHMKV_REC_TYPE_MASK;
	const unsigned a = shmkv__types[t].align;
	const unsigned kp = pos + SHMKV_REC_INLINE_HEAD + (kind & SHMKV_REC_EXPIRES ? SHMKV_REC_EXPIRES_SIZE : 0);
	const unsigned vp = (kp + key_len + a - 1) & ~(a - 1);
	*key_pos = kp;
	*val_pos = vp;
	return vp + value_len + shmkv__types[t].nul;
}

/* shmkv__rec_span with the lengths the head at bk + pos holds. */
static inline unsigned shmkv__rec_inline_span(const uint8_t *bk, unsigned pos, unsigned kind,
					      unsigned *key_pos, unsigned *val_pos)
{
	return shmkv__rec_span(pos, kind, bk[pos + 1], bk[pos + 2], key_pos, val_pos);
}

/* A tombstone of a delta (FORMAT.md §19.2) at pos, kind 0x10 (inline) or
 * 0x90 (OUT): 1 with *r, or 0 when malformed. */
static SHMKV__COLD int shmkv__tomb_decode(const uint8_t *bk, unsigned pos, unsigned kind,
					  shmkv__rec *r)
{
	r->pos = pos;
	r->kind = kind;
	r->expires = 0;
	r->value_len = 0;
	if (kind == (SHMKV_REC_OUT | SHMKV_REC_TOMB)) {
		uint64_t u = 0;
		if (pos + SHMKV_REC_OUT_HEAD > SHMKV_BUCKET_BYTES)
			return 0;
		memcpy(&u, bk + pos + 1, 5); /* little-endian hosts only (format.h) */
		r->unit = u;
		r->key_len = r->key_pos = r->val_pos = 0;
		r->end = pos + SHMKV_REC_OUT_HEAD;
		return 1;
	}
	if (kind != SHMKV_REC_TOMB || bk[pos + 2] != 0)
		return 0;
	r->unit = 0;
	r->key_len = bk[pos + 1];
	r->key_pos = pos + SHMKV_REC_INLINE_HEAD;
	r->val_pos = r->end = r->key_pos + r->key_len;
	return r->end <= SHMKV_BUCKET_BYTES;
}

/* The record at pos of a bucket of n records: 1 with *r, or 0 when it is
 * malformed (inside the directory, reserved kind bits, no type, an OUT
 * record with type bits, bytes past +128; a tombstone unless tomb, a delta's
 * bucket). Reads nothing past the bucket. Overlap and gaps are verify's. */
static SHMKV__HOT int shmkv__rec_decode(const uint8_t *bk, unsigned n, unsigned pos,
					unsigned tomb, shmkv__rec *r)
{
	if (SHMKV__UNLIKELY(!shmkv__rec_at_ok(n, pos)))
		return 0;
	const unsigned kind = bk[pos];
	const unsigned x = kind & SHMKV_REC_EXPIRES ? SHMKV_REC_EXPIRES_SIZE : 0;
	unsigned end;
	if (SHMKV__UNLIKELY(kind & SHMKV_REC_TOMB))
		return tomb && shmkv__tomb_decode(bk, pos, kind, r);
	r->pos = pos;
	r->kind = kind;
	if (kind & SHMKV_REC_OUT) {
		end = pos + SHMKV_REC_OUT_HEAD + x;
		if (SHMKV__UNLIKELY((kind & ~(SHMKV_REC_OUT | SHMKV_REC_EXPIRES)) ||
				    end > SHMKV_BUCKET_BYTES))
			return 0;
		uint64_t u = 0;
		memcpy(&u, bk + pos + 1, 5); /* little-endian hosts only (format.h) */
		r->unit = u;
		r->key_len = r->key_pos = r->val_pos = r->value_len = 0;
	} else {
		if (SHMKV__UNLIKELY(!shmkv__rec_inline_kind_ok(kind)))
			return 0;
		r->key_len = bk[pos + 1];
		r->value_len = bk[pos + 2];
		end = shmkv__rec_inline_span(bk, pos, kind, &r->key_pos, &r->val_pos);
		r->unit = 0;
		if (SHMKV__UNLIKELY(end > SHMKV_BUCKET_BYTES))
			return 0;
	}
	r->end = end;
	r->expires = 0;
	if (x) /* after the head: +3 inline, +6 OUT */
		memcpy(&r->expires, bk + pos + (kind & SHMKV_REC_OUT ? SHMKV_REC_OUT_HEAD
								      : SHMKV_REC_INLINE_HEAD), 4);
	return 1;
}

/* Bucket b's bytes. */
static SHMKV__HOT const uint8_t *shmkv__bucket(const shmkv *db, uint64_t b)
{
	return (const uint8_t *)db->buckets + b * SHMKV_BUCKET_BYTES;
}

/* The checked scan of bucket b for key (tag): the records whose directory
 * tag bits match, each decoded with its bounds, the key compared inline or
 * in the OUT record's entry (entry.h's bound rule). 0 with *r (and *e, the
 * entry; NULL inline), SHMKV__NEXT, or SHMKV_ECORRUPT (why). */
static SHMKV__HOT int shmkv__bucket_scan(const shmkv *db, uint64_t b, uint64_t tag,
					  const void *key, size_t key_len, shmkv__rec *r,
					  const uint8_t **e, char *why, size_t why_len)
{
#define SHMKV__BAD2(...)                                                                           \
	return why ? shmkv__fail(SHMKV_ECORRUPT, why, why_len, __VA_ARGS__) : SHMKV_ECORRUPT
	const uint8_t *bk = shmkv__bucket(db, b);
	const unsigned n = bk[0];
	if (SHMKV__UNLIKELY(n > SHMKV_MAX_RECORDS))
		SHMKV__BAD2("index bucket %llu: %u records, at most %u fit", (unsigned long long)b,
			    n, SHMKV_MAX_RECORDS);
	for (unsigned m = shmkv__match(bk, n, tag); m; m &= m - 1) {
		const unsigned i = SHMKV__CTZ(m);
		const unsigned pos = shmkv__dir_off(bk, i);
		if (SHMKV__UNLIKELY(!shmkv__rec_decode(bk, n, pos, db->delta, r)))
			SHMKV__BAD2("index bucket %llu record %u at +%u: malformed (kind %02x), "
				    "inside the directory or past the bucket's end",
				    (unsigned long long)b, i, pos,
				    pos < SHMKV_BUCKET_BYTES ? bk[pos] : 0u);
		if (!(r->kind & SHMKV_REC_OUT)) {
			if (r->key_len == key_len &&
			    shmkv__key_eq(bk + r->key_pos, (const uint8_t *)key, key_len)) {
				*e = NULL;
				return 0;
			}
			continue;
		}
		const uint8_t *c;
		if (SHMKV__UNLIKELY(!shmkv__key_fits(db, 0) ||
				    !shmkv__unit_entry(db, r->unit, shmkv__key_lim(db, 0), &c)))
			SHMKV__BAD2("index bucket %llu record %u: entry offset %llu outside the "
				    "entries section [%llu, %llu)", (unsigned long long)b, i,
				    (unsigned long long)(r->unit << 3),
				    (unsigned long long)db->entries_off,
				    (unsigned long long)db->entries_end);
		if (((const shmkv_entry_header *)(const void *)c)->key_len != key_len)
			continue;
		if (SHMKV__UNLIKELY(!shmkv__key_fits(db, key_len) ||
				    !shmkv__unit_entry(db, r->unit, shmkv__key_lim(db, key_len), &c)))
			SHMKV__BAD2("index bucket %llu record %u: entry at %llu: key of %zu bytes "
				    "runs past the entries section end %llu", (unsigned long long)b,
				    i, (unsigned long long)(r->unit << 3), key_len,
				    (unsigned long long)db->entries_end);
		if (shmkv__entry_key_is(c, key, key_len)) {
			*e = c;
			return 0;
		}
	}
	return SHMKV__NEXT;
#undef SHMKV__BAD2
}

/* The value of an inline record of type t, len bytes at p, checked by
 * shmkv__value_shape in mode: 0 with *v, or SHMKV_ECORRUPT (why). */
static inline __attribute__((always_inline)) int
shmkv__rec_inline_value(unsigned t, const uint8_t *p, unsigned len, unsigned mode, shmkv_value *v,
			char *why, size_t why_len)
{
	size_t count = 0;
	if (shmkv__value_shape(t, p, len, mode, &count, why, why_len))
		return SHMKV_ECORRUPT;
	v->type = t;
	v->shared = 0;
	v->data = p;
	v->size = len;
	v->count = count;
	return 0;
}

/* The value of a found record (bucket bk; e, the entry of an OUT record). */
static inline __attribute__((always_inline)) int
shmkv__rec_value(const shmkv *db, const uint8_t *bk, const shmkv__rec *r, const uint8_t *e,
		 unsigned mode, shmkv_value *v, char *why, size_t why_len)
{
	if (r->kind & SHMKV_REC_OUT) {
		const shmkv_entry_header *eh = (const shmkv_entry_header *)(const void *)e;
		return shmkv__value_read(db, e, eh->key_len, eh->type, eh->flags, mode, v, why,
					 why_len);
	}
	if (shmkv__rec_inline_value(r->kind & SHMKV_REC_TYPE_MASK, bk + r->val_pos, r->value_len,
				    mode, v, why, why_len)) {
		shmkv__prefix(0, why, why_len, "index record at %llu: ",
			      (unsigned long long)(bk + r->pos - db->base));
		return SHMKV_ECORRUPT;
	}
	return 0;
}

/* Key equality without a call, for the hot scan: shmkv__key_eq up to 16
 * bytes, 8-byte words (the last overlapping) past that; n <= 255. */
static inline int shmkv__key_eq2(const uint8_t *a, const uint8_t *b, size_t n)
{
	if (SHMKV__LIKELY(n <= 16))
		return shmkv__key_eq(a, b, n);
	uint64_t d = 0, x, y;
	for (size_t i = 0; i + 8 < n; i += 8) {
		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		d |= x ^ y;
	}
	memcpy(&x, a + n - 8, 8);
	memcpy(&y, b + n - 8, 8);
	return (d | (x ^ y)) == 0;
}

#define SHMKV__CHECKED 2 /* shmkv__bucket_fast: the checked path decides */
#define SHMKV__OUTHIT 3  /* shmkv__bucket_fast: an OUT record's entry holds the key */
#define SHMKV__FINISH 256 /* shmkv__bucket_fast, + the key's record's offset: it expires,
			     or its text is not ASCII: shmkv__get_finish, out of the loop */

/* The hot scan's step for an OUT record at pos whose tag matched: the
 * record's rules, then shmkv__unit_try. SHMKV__OUTHIT (*e), SHMKV__FINISH +
 * pos (it expires), SHMKV__NEXT or SHMKV__CHECKED (damage). */
static inline __attribute__((always_inline)) int
shmkv__out_fast(const shmkv *db, const uint8_t *bk, unsigned pos, unsigned kind, const void *key,
		size_t key_len, const uint8_t **e)
{
	const unsigned x = kind & SHMKV_REC_EXPIRES ? SHMKV_REC_EXPIRES_SIZE : 0;
	if (SHMKV__UNLIKELY((kind & ~(SHMKV_REC_OUT | SHMKV_REC_EXPIRES)) ||
			    pos + SHMKV_REC_OUT_HEAD + x > SHMKV_BUCKET_BYTES ||
			    !shmkv__key_fits(db, key_len)))
		return SHMKV__CHECKED;
	uint64_t u = 0;
	memcpy(&u, bk + pos + 1, 5); /* little-endian hosts only (format.h) */
	const uint8_t *c = shmkv__unit_try(db, u, shmkv__key_lim(db, key_len), key, key_len);
	if (SHMKV__UNLIKELY(c == SHMKV__DEFER))
		return SHMKV__CHECKED;
	if (!c)
		return SHMKV__NEXT;
	if (SHMKV__UNLIKELY(x && db->expiry))
		return (int)(SHMKV__FINISH + pos);
	*e = c;
	return SHMKV__OUTHIT;
}

/* The hot scan of bucket bk (n <= 16) for key as a value of type want: the
 * records of m (the directory's matches), an inline one checked in place by
 * the record rules (no struct, no second decode), an OUT one by
 * shmkv__out_fast. 0 (*v), SHMKV__OUTHIT (*e: the entry, for shmkv__hit),
 * SHMKV__FINISH + the record's offset (it expires, or its text is not
 * ASCII: a code, not a pointer, so the loop writes nothing more),
 * SHMKV__NEXT, or SHMKV__CHECKED (damage, another type). A batch compares
 * the directory a pass before it scans. */
static inline __attribute__((always_inline)) int
shmkv__bucket_fast_m(const shmkv *db, const uint8_t *bk, unsigned n, unsigned m, const void *key,
		      size_t key_len, unsigned want, shmkv_value *v, const uint8_t **e)
{
	for (; m; m &= m - 1) {
		const unsigned pos = shmkv__dir_off(bk, SHMKV__CTZ(m));
		if (SHMKV__UNLIKELY(!shmkv__rec_at_ok(n, pos)))
			return SHMKV__CHECKED;
		const unsigned kind = bk[pos];
		int expiring = 0;
		/* kind 1..SHMKV_TYPE_MAX: an inline record of a type, no flag (what
		 * shmkv__rec_inline_kind_ok accepts without EXPIRES): one compare */
		if (SHMKV__UNLIKELY(kind - 1u >= SHMKV_TYPE_MAX)) {
			if (kind & SHMKV_REC_OUT) {
				const int rc = shmkv__out_fast(db, bk, pos, kind, key, key_len, e);
				if (rc == SHMKV__NEXT)
					continue;
				return rc;
			}
			if (!shmkv__rec_inline_kind_ok(kind))
				return SHMKV__CHECKED;
			expiring = (kind & SHMKV_REC_EXPIRES) && db->expiry;
		}
		unsigned kp, vp;
		if (SHMKV__UNLIKELY(shmkv__rec_inline_span(bk, pos, kind, &kp, &vp) >
				    SHMKV_BUCKET_BYTES))
			return SHMKV__CHECKED;
		if (bk[pos + 1] != key_len || !shmkv__key_eq2(bk + kp, (const uint8_t *)key, key_len))
			continue;
		if (SHMKV__UNLIKELY(expiring)) /* the clock: out of the loop */
			return (int)(SHMKV__FINISH + pos);
		const unsigned t = kind & SHMKV_REC_TYPE_MASK;
		if (SHMKV__UNLIKELY(want && t != want))
			return SHMKV__CHECKED;
		if (SHMKV__LIKELY(!shmkv__rec_inline_value(t, bk + vp, bk[pos + 2], SHMKV__SHAPE_ASCII,
							   v, NULL, 0)))
			return 0;
		return (int)(SHMKV__FINISH + pos); /* text not ASCII, or damage */
	}
	return SHMKV__NEXT;
}

/* shmkv__bucket_fast_m with the directory compared here. */
static SHMKV__HOT int shmkv__bucket_fast(const shmkv *db, const uint8_t *bk, uint64_t tag,
					  const void *key, size_t key_len, unsigned want,
					  shmkv_value *v, const uint8_t **e)
{
	const unsigned n = bk[0];
	if (SHMKV__UNLIKELY(n > SHMKV_MAX_RECORDS))
		return SHMKV__CHECKED;
	return shmkv__bucket_fast_m(db, bk, n, shmkv__match(bk, n, tag), key, key_len, want, v,
				     e);
}

#endif /* SHMKV_BUCKET_H */
