/* shmkv/v2.h - format v2's index (FORMAT.md §17, layout B): 128-byte
 * buckets whose head holds a 2-byte directory entry per record, 9 tag bits
 * and the record's offset (one SIMD compare finds a key's record), small
 * entries inline, OUT records of entries in
 * ENTRIES, expiry. Part of the header-only reader; include <shmkv.h>, not
 * this file.
 *
 * One owner per rule: shmkv__match2 (and its _scalar/_sse2/_avx2/_neon
 * variants) the directory compare; the record rule with its bounds in
 * pieces (shmkv__rec_at_ok, shmkv__rec_inline_kind_ok,
 * shmkv__rec_inline_span, shmkv__rec_inline_value, shmkv__expires_passed)
 * that shmkv__rec_decode (the generic decode: the checked path, iteration,
 * verify) and the hot scan shmkv__bucket2_fast (the single get and the
 * batch) both apply; shmkv__bucket2_scan the generic scan of one bucket,
 * shmkv__locate2 the generic lookup; shmkv__rec_value the value of a
 * record. The hot path reads inline, OUT and expiring records itself (the
 * clock out of its loop: shmkv__get2_timed) and leaves damage to the checked
 * path, with the same outcome. An OUT record's entry is a v1 entry, read by
 * get.h's rules. */
#ifndef SHMKV_V2_H
#define SHMKV_V2_H

#include <time.h>

#include "get.h"

/* Reader policy (not format, FORMAT.md §17.5): how many lines of bucket
 * b+1 a single get requests at its start, with bucket b's two, so that a
 * key displaced by one bucket (nearly every displaced key) does not wait
 * for a second round trip: 0, 1 or 2. bench/RESULTS.md ("Format v2 layout
 * B") measured 2 against 0 and 1: displaced/home at the median 1.07-1.16
 * (0: 1.35-2.00, 1: 1.36-1.40), the throughput loop within the noise.
 * Batches request the next bucket themselves, only where it may serve. */
#ifndef SHMKV_V2_PREFETCH_NEXT
#define SHMKV_V2_PREFETCH_NEXT 2
#endif
#if SHMKV_V2_PREFETCH_NEXT < 0 || SHMKV_V2_PREFETCH_NEXT > 2
#error "SHMKV_V2_PREFETCH_NEXT must be 0, 1 or 2"
#endif

/* A record decoded by shmkv__rec_decode. Offsets are within its bucket. */
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

/* Where a bucket's directory of n records ends (n u16 entries): no record
 * starts before it. */
static inline unsigned shmkv__dir_end2(unsigned n)
{
	return SHMKV_V2_BUCKET_HEAD + SHMKV_V2_DIR_BYTES * n;
}

/* Record i's directory entry dir[i] = (tag << 7 | off) & 0xffff, i < 16. */
static inline unsigned shmkv__rec_dir2(const uint8_t *bk, unsigned i)
{
	uint16_t d;
	memcpy(&d, bk + SHMKV_V2_BUCKET_HEAD + 2 * i, 2); /* little-endian hosts only */
	return d;
}

/* Record i's offset in its bucket (dir[i] & 0x7f: the low byte's low 7 bits). */
static inline unsigned shmkv__rec_off2(const uint8_t *bk, unsigned i)
{
	return bk[SHMKV_V2_BUCKET_HEAD + 2 * i] & SHMKV_V2_DIR_OFF_MASK;
}

/* The directory bits a key of this tag has: the tag's low 9 bits at bits
 * 7..15, the offset bits 0. A record is a candidate for the key when
 * (dir[i] & 0xff80) equals this. */
static inline unsigned shmkv__dir_tag2(uint64_t tag)
{
	return (unsigned)(tag << SHMKV_V2_DIR_TAG_SHIFT) & SHMKV_V2_DIR_TAG_MASK;
}

/* The record rules (FORMAT.md §17.4), in pieces that shmkv__rec_decode
 * (every generic reader: the checked scan, iteration, verify) and the hot
 * inline hit (shmkv__get2_fast) both apply, so that both accept exactly the
 * same records. */

/* Whether a record may start at bucket offset pos of a bucket of n records:
 * after the directory, its 3-byte head inside the bucket (so that the head
 * bytes are read from the bucket). */
static inline int shmkv__rec_at_ok(unsigned n, unsigned pos)
{
	return pos >= shmkv__dir_end2(n) && pos + SHMKV_REC_INLINE_HEAD <= SHMKV_V2_BUCKET_BYTES;
}

/* Whether an inline record's kind (OUT clear) is well formed: no reserved
 * bits, and its type bits name a type. */
static inline int shmkv__rec_inline_kind_ok(unsigned kind)
{
	const unsigned t = kind & SHMKV_REC_TYPE_MASK;
	return !(kind & ~SHMKV_REC_KNOWN) && t >= 1 && t <= SHMKV_TYPE_MAX;
}

/* The bytes of the inline record at pos (head inside the bucket, kind
 * accepted by shmkv__rec_inline_kind_ok): its key at *key_pos after the head
 * and the expiry, its value at *val_pos (the key's end aligned in the
 * bucket for its type). Returns the record's end (past the NUL of text),
 * which the caller checks against the bucket's end: up to 3 + 4 + 255 + 7 +
 * 255 + 1 past pos, so a u8 length cannot wrap it. */
static inline unsigned shmkv__rec_inline_span(const uint8_t *bk, unsigned pos, unsigned kind,
					      unsigned *key_pos, unsigned *val_pos)
{
	const unsigned t = kind & SHMKV_REC_TYPE_MASK;
	const unsigned a = shmkv__types[t].align;
	const unsigned kp = pos + SHMKV_REC_INLINE_HEAD + (kind & SHMKV_REC_EXPIRES ? SHMKV_REC_EXPIRES_SIZE : 0);
	const unsigned vp = (kp + bk[pos + 1] + a - 1) & ~(a - 1);
	*key_pos = kp;
	*val_pos = vp;
	return vp + bk[pos + 2] + shmkv__types[t].nul;
}

/* The record at bucket offset pos of a bucket of n records (FORMAT.md
 * §17.4): 1 with *r, or 0 when it is malformed: it starts inside the
 * directory, has reserved kind bits, a type that is none, an OUT record
 * with type bits, or bytes (head, expiry, key, value) past the bucket's
 * end. Reads nothing at or past bk + 128. Whether records overlap or leave
 * nonzero gaps is verify's (a lookup does not rely on it). */
static SHMKV__HOT int shmkv__rec_decode(const uint8_t *bk, unsigned n, unsigned pos,
					shmkv__rec *r)
{
	if (SHMKV__UNLIKELY(!shmkv__rec_at_ok(n, pos)))
		return 0;
	const unsigned kind = bk[pos];
	const unsigned x = kind & SHMKV_REC_EXPIRES ? SHMKV_REC_EXPIRES_SIZE : 0;
	unsigned end;
	r->pos = pos;
	r->kind = kind;
	if (kind & SHMKV_REC_OUT) {
		end = pos + SHMKV_REC_OUT_HEAD + x;
		if (SHMKV__UNLIKELY((kind & ~(SHMKV_REC_OUT | SHMKV_REC_EXPIRES)) ||
				    end > SHMKV_V2_BUCKET_BYTES))
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
		if (SHMKV__UNLIKELY(end > SHMKV_V2_BUCKET_BYTES))
			return 0;
	}
	r->end = end;
	r->expires = 0;
	if (x) /* after the head: +3 inline, +6 OUT */
		memcpy(&r->expires, bk + pos + (kind & SHMKV_REC_OUT ? SHMKV_REC_OUT_HEAD
								      : SHMKV_REC_INLINE_HEAD), 4);
	return 1;
}

/* ---- the directory compare: bit i set when (dir[i] & 0xff80) ==
 * shmkv__dir_tag2(tag), i < n; a candidate only (9 tag bits: 1/512 of
 * other keys match too), the key compare decides. n <= 16 (the caller
 * checks). The vector variants load 16 bytes at +8 and at +24 (dir[0..7]
 * and dir[8..15]), inside the bucket whatever n is, AND each lane with
 * 0xff80, and mask the bits at and past n: they return exactly what the
 * scalar reference returns (tests/probe_variants_test). */
static inline unsigned shmkv__match2_scalar(const uint8_t *bk, unsigned n, uint64_t tag)
{
	const unsigned want = shmkv__dir_tag2(tag);
	unsigned m = 0;
	for (unsigned i = 0; i < n; i++)
		m |= (unsigned)((shmkv__rec_dir2(bk, i) & SHMKV_V2_DIR_TAG_MASK) == want) << i;
	return m;
}

static inline unsigned shmkv__match2_mask(unsigned m, unsigned n)
{
	return m & ((1u << n) - 1);
}

#if SHMKV_HAVE_SSE2
/* Two 8-lane u16 AND-and-compares; a signed saturating pack carries each
 * lane's verdict (0 or -1) to one byte, and movemask gathers the 16 bits. */
static inline unsigned shmkv__match2_sse2(const uint8_t *bk, unsigned n, uint64_t tag)
{
	const __m128i want = _mm_set1_epi16((short)shmkv__dir_tag2(tag));
	const __m128i mask = _mm_set1_epi16((short)SHMKV_V2_DIR_TAG_MASK);
	__m128i d0 = _mm_loadu_si128((const __m128i *)(const void *)(bk + 8));
	__m128i d1 = _mm_loadu_si128((const __m128i *)(const void *)(bk + 24));
	__m128i c0 = _mm_cmpeq_epi16(_mm_and_si128(d0, mask), want);
	__m128i c1 = _mm_cmpeq_epi16(_mm_and_si128(d1, mask), want);
	return shmkv__match2_mask((unsigned)_mm_movemask_epi8(_mm_packs_epi16(c0, c1)), n);
}
#endif

#if SHMKV_HAVE_AVX2
/* One 16-lane AND-and-compare of the 32 bytes at +8, packed to bytes as in
 * SSE2. */
static inline unsigned shmkv__match2_avx2(const uint8_t *bk, unsigned n, uint64_t tag)
{
	const __m256i want = _mm256_set1_epi16((short)shmkv__dir_tag2(tag));
	const __m256i mask = _mm256_set1_epi16((short)SHMKV_V2_DIR_TAG_MASK);
	__m256i d = _mm256_loadu_si256((const __m256i *)(const void *)(bk + 8));
	__m256i c = _mm256_cmpeq_epi16(_mm256_and_si256(d, mask), want);
	__m128i w = _mm_packs_epi16(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
	return shmkv__match2_mask((unsigned)_mm_movemask_epi8(w), n);
}
#endif

#if SHMKV_HAVE_NEON
/* Two 8-lane AND-and-compares narrowed to bytes, one bit per byte by a
 * weighted horizontal add (NEON has no movemask). */
static inline unsigned shmkv__match2_neon(const uint8_t *bk, unsigned n, uint64_t tag)
{
	static const uint8_t w[8] = {1, 2, 4, 8, 16, 32, 64, 128};
	const uint16x8_t t = vdupq_n_u16((uint16_t)shmkv__dir_tag2(tag));
	const uint16x8_t mk = vdupq_n_u16((uint16_t)SHMKV_V2_DIR_TAG_MASK);
	const uint8x8_t wt = vld1_u8(w);
	uint16x8_t d0 = vandq_u16(vld1q_u16((const uint16_t *)(const void *)(bk + 8)), mk);
	uint16x8_t d1 = vandq_u16(vld1q_u16((const uint16_t *)(const void *)(bk + 24)), mk);
	uint8x8_t e0 = vmovn_u16(vceqq_u16(d0, t));
	uint8x8_t e1 = vmovn_u16(vceqq_u16(d1, t));
	unsigned m = (unsigned)vaddv_u8(vand_u8(e0, wt)) | (unsigned)vaddv_u8(vand_u8(e1, wt)) << 8;
	return shmkv__match2_mask(m, n);
}
#endif

static SHMKV__HOT unsigned shmkv__match2(const uint8_t *bk, unsigned n, uint64_t tag)
{
#if SHMKV_VECTOR == SHMKV_VECTOR_AVX2
	return shmkv__match2_avx2(bk, n, tag);
#elif SHMKV_VECTOR == SHMKV_VECTOR_SSE2
	return shmkv__match2_sse2(bk, n, tag);
#elif SHMKV_VECTOR == SHMKV_VECTOR_NEON
	return shmkv__match2_neon(bk, n, tag);
#else
	return shmkv__match2_scalar(bk, n, tag);
#endif
}

/* Bucket b's bytes. */
static SHMKV__HOT const uint8_t *shmkv__bucket2(const shmkv *db, uint64_t b)
{
	return (const uint8_t *)db->buckets + b * SHMKV_V2_BUCKET_BYTES;
}

/* Index of a tag in a v2 bucket's 48-bit displaced-key filter. */
static inline unsigned shmkv__filter_index2(uint64_t tag)
{
	return (unsigned)((tag * SHMKV_V2_FILTER_BITS) >> 16);
}

/* How many buckets after home bucket bk a key with this tag may have been
 * displaced to (FORMAT.md §17.3): 0, D, or max_probe for D = 255. */
static SHMKV__HOT uint64_t shmkv__displaced2(const uint8_t *bk, uint64_t tag, uint32_t max_probe)
{
	const unsigned d = bk[1];
	if (SHMKV__LIKELY(d == 0))
		return 0;
	const unsigned fi = shmkv__filter_index2(tag);
	if (!((bk[2 + (fi >> 3)] >> (fi & 7)) & 1))
		return 0;
	return d == SHMKV_DISPLACEMENT_MAX ? max_probe : d;
}

/* The scan of bucket b for key (tag): the records whose directory tag
 * bits match, in directory order, each decoded with its bounds (a malformed
 * one, or a count above 16, is damage); a match compares the key, inline or
 * in the OUT record's entry (header and key bounded inside ENTRIES by
 * get.h's slot/entry rule). Returns 0 with *r (and *e, the entry, for OUT;
 * NULL inline), SHMKV__NEXT, or SHMKV_ECORRUPT (why, when not NULL: on the
 * hot path the messages compile away). */
static SHMKV__HOT int shmkv__bucket2_scan(const shmkv *db, uint64_t b, uint64_t tag,
					  const void *key, size_t key_len, shmkv__rec *r,
					  const uint8_t **e, char *why, size_t why_len)
{
#define SHMKV__BAD2(...)                                                                           \
	return why ? shmkv__fail(SHMKV_ECORRUPT, why, why_len, __VA_ARGS__) : SHMKV_ECORRUPT
	const uint8_t *bk = shmkv__bucket2(db, b);
	const unsigned n = bk[0];
	if (SHMKV__UNLIKELY(n > SHMKV_V2_MAX_RECORDS))
		SHMKV__BAD2("index bucket %llu: %u records, at most %u fit", (unsigned long long)b,
			    n, SHMKV_V2_MAX_RECORDS);
	for (unsigned m = shmkv__match2(bk, n, tag); m; m &= m - 1) {
		const unsigned i = SHMKV__CTZ(m);
		const unsigned pos = shmkv__rec_off2(bk, i);
		if (SHMKV__UNLIKELY(!shmkv__rec_decode(bk, n, pos, r)))
			SHMKV__BAD2("index bucket %llu record %u at +%u: malformed (kind %02x), "
				    "inside the directory or past the bucket's end",
				    (unsigned long long)b, i, pos,
				    pos < SHMKV_V2_BUCKET_BYTES ? bk[pos] : 0u);
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
				    !shmkv__slot_entry(db, r->unit, shmkv__key_lim(db, 0), &c)))
			SHMKV__BAD2("index bucket %llu record %u: entry offset %llu outside the "
				    "entries section [%llu, %llu)", (unsigned long long)b, i,
				    (unsigned long long)(r->unit << 3),
				    (unsigned long long)db->entries_off,
				    (unsigned long long)db->entries_end);
		if (((const shmkv_entry_header *)(const void *)c)->key_len != key_len)
			continue;
		if (SHMKV__UNLIKELY(!shmkv__key_fits(db, key_len) ||
				    !shmkv__slot_entry(db, r->unit, shmkv__key_lim(db, key_len), &c)))
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

/* The v2 lookup's later buckets: the n buckets after home bucket b (n from
 * shmkv__displaced2, capped at max_probe), wrapping. As shmkv__locate2. */
static SHMKV__HOT int shmkv__locate2_on(const shmkv *db, const void *key, size_t key_len,
					uint64_t tag, uint64_t b, uint64_t n, const uint8_t **bkp,
					shmkv__rec *r, const uint8_t **e, char *why, size_t why_len)
{
	if (n > db->max_probe) /* a displacement byte above max_probe is damage: capped */
		n = db->max_probe;
	for (; n; n--) {
		if (++b == db->bucket_count)
			b = 0;
		int rc = shmkv__bucket2_scan(db, b, tag, key, key_len, r, e, why, why_len);
		if (rc != SHMKV__NEXT) {
			*bkp = shmkv__bucket2(db, b);
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
static SHMKV__HOT int shmkv__locate2(const shmkv *db, const void *key, size_t key_len, uint64_t h,
				     const uint8_t **bkp, shmkv__rec *r, const uint8_t **e,
				     char *why, size_t why_len)
{
	uint64_t tag = shmkv__tag(h), b = shmkv__home(h, db->bucket_count);
	const uint8_t *bk = shmkv__bucket2(db, b);
	__builtin_prefetch(bk + 64); /* the pair's second line, with the first */
	int rc = shmkv__bucket2_scan(db, b, tag, key, key_len, r, e, why, why_len);
	if (SHMKV__LIKELY(rc != SHMKV__NEXT)) {
		*bkp = bk;
		return rc;
	}
	return shmkv__locate2_on(db, key, key_len, tag, b, shmkv__displaced2(bk, tag, db->max_probe),
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

/* The value of an inline record of type t (kind accepted by
 * shmkv__rec_inline_kind_ok), len bytes at p inside its bucket
 * (shmkv__rec_inline_span), checked by shmkv__value_shape (deep: a strlist's
 * strings too): 0 with *v, or SHMKV_ECORRUPT (why). */
static inline __attribute__((always_inline)) int
shmkv__rec_inline_value(unsigned t, const uint8_t *p, unsigned len, int deep, shmkv_value *v,
			char *why, size_t why_len)
{
	size_t count = 0;
	if (shmkv__value_shape(t, p, len, deep, &count, why, why_len))
		return SHMKV_ECORRUPT;
	v->type = t;
	v->shared = 0;
	v->data = p;
	v->size = len;
	v->count = count;
	return 0;
}

/* The value of a found record (bucket bk, entry e for OUT): inline, its
 * bytes in the bucket checked by shmkv__value_shape (deep: a strlist's
 * strings too); OUT, the entry's by get.h's rules. 0 with *v, or
 * SHMKV_ECORRUPT (why). */
static inline __attribute__((always_inline)) int
shmkv__rec_value(const shmkv *db, const uint8_t *bk, const shmkv__rec *r, const uint8_t *e,
		 int deep, shmkv_value *v, char *why, size_t why_len)
{
	if (r->kind & SHMKV_REC_OUT) {
		const shmkv_entry_header *eh = (const shmkv_entry_header *)(const void *)e;
		return shmkv__value_read(db, e, eh->key_len, eh->type, eh->flags, deep, v, why,
					 why_len);
	}
	if (shmkv__rec_inline_value(r->kind & SHMKV_REC_TYPE_MASK, bk + r->val_pos, r->value_len,
				    deep, v, why, why_len)) {
		shmkv__prefix(0, why, why_len, "index record at %llu: ",
			      (unsigned long long)(bk + r->pos - db->base));
		return SHMKV_ECORRUPT;
	}
	return 0;
}

/* The checked lookup of a key of any length (the cold get and find2): the
 * key length rule, the hash, shmkv__locate2 with messages. */
static inline int shmkv__locate2_key(const shmkv *db, const void *key, size_t key_len,
				     const uint8_t **bk, shmkv__rec *r, const uint8_t **e,
				     char *why, size_t why_len)
{
	if (key_len > SHMKV_MAX_KEY_LEN)
		return shmkv__fail(SHMKV_EKEYLEN, why, why_len,
				   "key of %zu bytes is longer than the %u-byte limit", key_len,
				   SHMKV_MAX_KEY_LEN);
	uint64_t h = shmkv__hash(db->seed, db->hash_bits, key, key_len);
	memset(r, 0, sizeof *r); /* GCC 12 cannot see locate fills it on success */
	return shmkv__locate2(db, key, key_len, h, bk, r, e, why, why_len);
}

/* The checked v2 get (shmkv_get_diag, and every case the hot path leaves):
 * the lookup with messages, expiry ("expired"), the value, the type. */
static SHMKV__COLD int shmkv__get2_cold(const shmkv *db, const void *key, size_t key_len,
					unsigned want, shmkv_value *v, char *why, size_t why_len)
{
	const uint8_t *bk = NULL, *e = NULL;
	shmkv__rec r;
	int err = shmkv__locate2_key(db, key, key_len, &bk, &r, &e, why, why_len);
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

/* shmkv__get2_cold without messages, in five arguments (so that the hot
 * path's jump to it is a tail call). */
static SHMKV__COLD int shmkv__get2_checked(const shmkv *db, const void *key, size_t key_len,
					   unsigned want, shmkv_value *v)
{
	return shmkv__get2_cold(db, key, key_len, want, v, NULL, 0);
}

/* Key equality without a call: shmkv__key_eq up to 16 bytes, 8-byte words
 * (the last one overlapping) past that; n <= 255 (an inline key). The hot
 * v2 path's, so that it makes no call but tail calls. */
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

#define SHMKV__CHECKED 2 /* shmkv__bucket2_fast: the checked path decides */
#define SHMKV__OUTHIT 3  /* shmkv__bucket2_fast: an OUT record's entry holds the key */
#define SHMKV__TIMED 256 /* shmkv__bucket2_fast, + the record's offset: it expires */

/* The hot scan's step for an OUT record of kind at pos whose tag matched:
 * shmkv__rec_decode's rules for the record, then the hot paths' slot/entry
 * step (shmkv__slot_try, one compare for header and key, as v1's hot get).
 * SHMKV__OUTHIT (*e: key's entry), SHMKV__TIMED + pos (key's, expiring in
 * an image with expiry: shmkv__get2_timed), SHMKV__NEXT
 * (another key's) or SHMKV__CHECKED (damage, or a key that would not fit
 * where the record points: the checked path decides, as for v1). */
static inline __attribute__((always_inline)) int
shmkv__out_fast(const shmkv *db, const uint8_t *bk, unsigned pos, unsigned kind, const void *key,
		size_t key_len, const uint8_t **e)
{
	const unsigned x = kind & SHMKV_REC_EXPIRES ? SHMKV_REC_EXPIRES_SIZE : 0;
	if (SHMKV__UNLIKELY((kind & ~(SHMKV_REC_OUT | SHMKV_REC_EXPIRES)) ||
			    pos + SHMKV_REC_OUT_HEAD + x > SHMKV_V2_BUCKET_BYTES ||
			    !shmkv__key_fits(db, key_len)))
		return SHMKV__CHECKED;
	uint64_t u = 0;
	memcpy(&u, bk + pos + 1, 5); /* little-endian hosts only (format.h) */
	const uint8_t *c = shmkv__slot_try(db, u, shmkv__key_lim(db, key_len), key, key_len);
	if (SHMKV__UNLIKELY(c == SHMKV__DEFER))
		return SHMKV__CHECKED;
	if (!c)
		return SHMKV__NEXT;
	if (SHMKV__UNLIKELY(x && db->expiry))
		return (int)(SHMKV__TIMED + pos);
	*e = c;
	return SHMKV__OUTHIT;
}

/* The hot scan of bucket bk (n <= 16 records) for key as a value of type
 * want: the records of m, its directory's matches of the key's tag
 * (shmkv__match2), each an inline record checked in place by the record
 * rules (shmkv__rec_at_ok, shmkv__rec_inline_kind_ok, shmkv__rec_inline_span,
 * shmkv__rec_inline_value: no record struct, no second decode), an OUT
 * record by shmkv__out_fast. Returns 0 (*v set), SHMKV__OUTHIT (*e: the
 * key's entry, whose value shmkv__hit reads), SHMKV__TIMED + the offset of
 * the key's record, which expires, in an image with expiry (a code, not a
 * pointer, so that the loop writes nothing more: shmkv__get2_timed reads
 * the clock, out of this loop), SHMKV__NEXT (not here) or SHMKV__CHECKED
 * (damage, a value of another type: shmkv__get2_cold). A batch compares
 * the directory a pass before it scans; shmkv__bucket2_fast does both. */
static inline __attribute__((always_inline)) int
shmkv__bucket2_fast_m(const shmkv *db, const uint8_t *bk, unsigned n, unsigned m, const void *key,
		      size_t key_len, unsigned want, shmkv_value *v, const uint8_t **e)
{
	for (; m; m &= m - 1) {
		const unsigned pos = shmkv__rec_off2(bk, SHMKV__CTZ(m));
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
				    SHMKV_V2_BUCKET_BYTES))
			return SHMKV__CHECKED;
		if (bk[pos + 1] != key_len || !shmkv__key_eq2(bk + kp, (const uint8_t *)key, key_len))
			continue;
		if (SHMKV__UNLIKELY(expiring)) /* the clock: out of the loop */
			return (int)(SHMKV__TIMED + pos);
		const unsigned t = kind & SHMKV_REC_TYPE_MASK;
		if (SHMKV__LIKELY(!want || t == want) &&
		    SHMKV__LIKELY(!shmkv__rec_inline_value(t, bk + vp, bk[pos + 2], 0, v, NULL, 0)))
			return 0;
		return SHMKV__CHECKED;
	}
	return SHMKV__NEXT;
}

/* shmkv__bucket2_fast_m of bucket bk for key (tag): a record count above
 * 16 is damage (SHMKV__CHECKED). */
static SHMKV__HOT int shmkv__bucket2_fast(const shmkv *db, const uint8_t *bk, uint64_t tag,
					  const void *key, size_t key_len, unsigned want,
					  shmkv_value *v, const uint8_t **e)
{
	const unsigned n = bk[0];
	if (SHMKV__UNLIKELY(n > SHMKV_V2_MAX_RECORDS))
		return SHMKV__CHECKED;
	return shmkv__bucket2_fast_m(db, bk, n, shmkv__match2(bk, n, tag), key, key_len, want, v,
				     e);
}

/* The end of a hot get whose key's record, at rec in a bucket that the hot
 * scan checked (shmkv__bucket2_fast: its bounds, and an OUT record's entry
 * holding key), expires in an image with expiry: the clock (*now, the
 * batch's, read once per batch; NULL: this get's own), then the value as
 * the hot scan reads it. Out of the scan's loop, so that a call inside it
 * does not cost every get registers, and an image without expiry nothing. */
static __attribute__((noinline)) int shmkv__get2_timed(const shmkv *db, const uint8_t *rec,
						       const void *key, size_t key_len,
						       unsigned want, shmkv_value *v, int64_t *now)
{
	const size_t off = (size_t)(rec - shmkv__bucket2(db, 0));
	const uint8_t *bk = rec - off % SHMKV_V2_BUCKET_BYTES;
	const unsigned pos = (unsigned)(off % SHMKV_V2_BUCKET_BYTES), kind = bk[pos];
	uint32_t t;
	memcpy(&t, rec + (kind & SHMKV_REC_OUT ? SHMKV_REC_OUT_HEAD : SHMKV_REC_INLINE_HEAD), 4);
	if (shmkv__expired_hot(db, t, now))
		return SHMKV_ENOTFOUND;
	if (kind & SHMKV_REC_OUT) {
		uint64_t u = 0;
		const uint8_t *c;
		memcpy(&u, rec + 1, 5); /* little-endian hosts only (format.h) */
		if (SHMKV__LIKELY(shmkv__slot_entry(db, u, shmkv__key_lim(db, key_len), &c)))
			return shmkv__hit(db, c, key_len, want, v);
	} else {
		unsigned kp, vp;
		const unsigned ty = kind & SHMKV_REC_TYPE_MASK;
		(void)shmkv__rec_inline_span(bk, pos, kind, &kp, &vp);
		if (SHMKV__LIKELY(!want || ty == want) &&
		    SHMKV__LIKELY(!shmkv__rec_inline_value(ty, bk + vp, bk[pos + 2], 0, v, NULL, 0)))
			return 0;
	}
	return shmkv__get2_checked(db, key, key_len, want, v);
}

/* The end of a hot get whose bucket b's scan (shmkv__bucket2_fast) returned
 * rc, not SHMKV__NEXT: 0 (*v set), an OUT record's entry e read by
 * shmkv__hit (v1's hit rules), a record that expires by shmkv__get2_timed
 * (the clock: now, the batch's, or NULL: its own), damage and a value of
 * another type by shmkv__get2_checked; all but the first, tail calls. */
static inline __attribute__((always_inline)) int
shmkv__get2_end(const shmkv *db, const void *key, size_t key_len, uint64_t b, int rc,
		const uint8_t *e, unsigned want, shmkv_value *v, int64_t *now)
{
	if (SHMKV__LIKELY(!rc))
		return 0;
	if (rc == SHMKV__OUTHIT) /* the entry's value by the v1 hit rules */
		return shmkv__hit(db, e, key_len, want, v);
	if (rc >= SHMKV__TIMED) /* b: the bucket the record is in */
		return shmkv__get2_timed(db, shmkv__bucket2(db, b) + (rc - SHMKV__TIMED), key,
					 key_len, want, v, now);
	return shmkv__get2_checked(db, key, key_len, want, v);
}

/* A hot get whose home bucket b did not hold key (tag) and announces d > 0
 * displaced keys of its tag (shmkv__displaced2): the walk of
 * shmkv__locate2_on over up to min(d, max_probe) later buckets, each by
 * shmkv__bucket2_fast, then shmkv__get2_end. */
static inline __attribute__((always_inline)) int
shmkv__get2_walk(const shmkv *db, const void *key, size_t key_len, uint64_t tag, uint64_t b,
		 uint64_t d, unsigned want, shmkv_value *v, int64_t *now)
{
	const uint8_t *e = NULL;
	int rc = SHMKV__NEXT;
	if (d > db->max_probe) /* a displacement byte above max_probe is damage: capped */
		d = db->max_probe;
	for (; d; d--) {
		if (++b == db->bucket_count)
			b = 0;
		rc = shmkv__bucket2_fast(db, shmkv__bucket2(db, b), tag, key, key_len, want, v, &e);
		if (rc != SHMKV__NEXT)
			break;
	}
	if (rc == SHMKV__NEXT)
		return SHMKV_ENOTFOUND;
	return shmkv__get2_end(db, key, key_len, b, rc, e, want, v, now);
}

/* A hot get from its home bucket b at bk, whose n <= 16 records' directory
 * matches of key's tag are m: the scan (shmkv__bucket2_fast_m); if key is
 * not there and the bucket's D and filter announce displaced keys with
 * this tag, the walk over up to min(D, max_probe) later buckets
 * (shmkv__get2_walk); the outcome by shmkv__get2_end. The single get and
 * a batch that compared the directory a pass before. */
static inline __attribute__((always_inline)) int
shmkv__get2_home(const shmkv *db, const void *key, size_t key_len, uint64_t tag, uint64_t b,
		 const uint8_t *bk, unsigned n, unsigned m, unsigned want, shmkv_value *v,
		 int64_t *now)
{
	const uint8_t *e = NULL;
	const int rc = shmkv__bucket2_fast_m(db, bk, n, m, key, key_len, want, v, &e);
	if (rc == SHMKV__NEXT) {
		const uint64_t d = shmkv__displaced2(bk, tag, db->max_probe);
		if (SHMKV__LIKELY(!d))
			return SHMKV_ENOTFOUND;
		return shmkv__get2_walk(db, key, key_len, tag, b, d, want, v, now);
	}
	return shmkv__get2_end(db, key, key_len, b, rc, e, want, v, now);
}

/* The hot v2 get (the single get and the batch) of key with hash h
 * (hash_bits 64) as a value of type want (0: any), b its home bucket: the
 * lookup of FORMAT.md §17.5 by shmkv__get2_home. Its outcomes are the
 * checked get's (shmkv__get2_cold). */
static SHMKV__HOT int shmkv__get2_fast(const shmkv *db, const void *key, size_t key_len,
				       uint64_t h, uint64_t b, unsigned want, shmkv_value *v,
				       int64_t *now)
{
	const uint8_t *bk = shmkv__bucket2(db, b);
	const uint64_t tag = shmkv__tag(h);
	const unsigned n = bk[0];
	if (SHMKV__UNLIKELY(n > SHMKV_V2_MAX_RECORDS)) /* damage: the checked get says so */
		return shmkv__get2_checked(db, key, key_len, want, v);
	return shmkv__get2_home(db, key, key_len, tag, b, bk, n, shmkv__match2(bk, n, tag), want,
				v, now);
}

/* The v2 hot get of key with hash h: it requests the home bucket's second
 * line and SHMKV_V2_PREFETCH_NEXT lines of its successor, then
 * shmkv__get2_fast. */
static SHMKV__HOT int shmkv__get2_at(const shmkv *db, const void *key, size_t key_len, uint64_t h,
				     unsigned want, shmkv_value *v)
{
	const uint64_t b = shmkv__home(h, db->bucket_count);
	const uint8_t *bk = shmkv__bucket2(db, b);
	__builtin_prefetch(bk + 64); /* the pair's second line, with the first */
#if SHMKV_V2_PREFETCH_NEXT /* the reader policy above */
	const uint8_t *nx =
		b + 1 == db->bucket_count ? shmkv__bucket2(db, 0) : bk + SHMKV_V2_BUCKET_BYTES;
	__builtin_prefetch(nx);
#if SHMKV_V2_PREFETCH_NEXT == 2
	__builtin_prefetch(nx + 64);
#endif
#endif
	return shmkv__get2_fast(db, key, key_len, h, b, want, v, NULL);
}

/* The v2 hot get of a key longer than 16 bytes, whose hash may call
 * xxhash's long-input code. */
static __attribute__((noinline)) int shmkv__get2_long(const shmkv *db, const void *key,
						      size_t key_len, unsigned want,
						      shmkv_value *v)
{
	return shmkv__get2_at(db, key, key_len, shmkv__hash64(db->seed, key, key_len), want, v);
}

/* The v2 hot get: one out-of-line call from shmkv__get_as, so that v1's
 * code there is untouched (tests/perf counts its instructions). Keys of up
 * to 16 bytes are hashed here without a call, so that, every other call on
 * its way being a tail call, the hot get needs no stack frame; longer keys
 * go to shmkv__get2_long. */
static __attribute__((noinline, hot)) int shmkv__get2(const shmkv *db, const void *key,
						      size_t key_len, unsigned want,
						      shmkv_value *v)
{
	if (SHMKV__UNLIKELY(key_len > 16))
		return shmkv__get2_long(db, key, key_len, want, v);
	return shmkv__get2_at(db, key, key_len, shmkv__hash64(db->seed, key, key_len), want, v);
}

/* Pins the clock that db's expiry checks read to now (unix seconds), for
 * tests and for replaying a past moment; 0 goes back to CLOCK_REALTIME.
 * Not thread-safe against gets on the same handle. */
static inline void shmkv_set_clock(shmkv *db, int64_t now)
{
	db->clock_pin = now;
}

/* The record of key (v2), expired or not, for tools and verify: 0 with
 * *out its image offset (in INDEX) and *expires (0: none); the checked
 * lookup's codes. */
static inline int shmkv__find2(const shmkv *db, const void *key, size_t key_len, uint64_t *out,
			       uint32_t *expires, char *why, size_t why_len)
{
	const uint8_t *bk = NULL, *e = NULL;
	shmkv__rec r;
	int err = shmkv__locate2_key(db, key, key_len, &bk, &r, &e, why, why_len);
	if (err)
		return err;
	*out = (uint64_t)(bk + r.pos - db->base);
	if (expires)
		*expires = r.expires;
	return 0;
}

/* When key's entry expires (unix seconds, FORMAT.md §17.6; 0: never, and
 * always 0 in a v1 image): 0 with *expires for a key the image holds,
 * expired or not; SHMKV_ENOTFOUND, SHMKV_EKEYLEN or SHMKV_ECORRUPT
 * (*expires untouched). For tools that show expiry (shmctl image get). */
static inline int shmkv_get_expires(const shmkv *db, const void *key, size_t key_len,
				    uint32_t *expires)
{
	if (db->version != SHMKV_FORMAT_V2) {
		const uint8_t *e = NULL;
		int err = shmkv__lookup(db, key, key_len, &e, NULL, 0);
		if (!err)
			*expires = 0;
		return err;
	}
	uint64_t off = 0;
	return shmkv__find2(db, key, key_len, &off, expires, NULL, 0);
}

/* Iteration over a v2 image: the records of every bucket in directory
 * order, buckets in index order, expired ones included (shmkv_iter_expires
 * says when each expires), each decoded and its value checked deep. The
 * iterator reads record it->pos of bucket it->bucket - 1, it->left records
 * still to read there. */
static inline int shmkv__iter2_next(shmkv_iter *it, const void **key, size_t *key_len,
				    shmkv_value *value)
{
	const shmkv *db = it->db;
	while (!it->left) {
		if (it->bucket >= db->bucket_count)
			return SHMKV_ECORRUPT; /* fewer records than entry_count */
		it->left = shmkv__bucket2(db, it->bucket)[0];
		if (it->left > SHMKV_V2_MAX_RECORDS)
			return SHMKV_ECORRUPT;
		it->pos = 0;
		it->bucket++;
	}
	const uint8_t *bk = shmkv__bucket2(db, it->bucket - 1);
	const unsigned n = bk[0];
	shmkv__rec r;
	if (!shmkv__rec_decode(bk, n, shmkv__rec_off2(bk, (unsigned)it->pos), &r))
		return SHMKV_ECORRUPT;
	const uint8_t *k, *e = NULL;
	size_t kl;
	if (r.kind & SHMKV_REC_OUT) {
		shmkv__entry ent;
		memset(&ent, 0, sizeof ent); /* GCC 12 -O2 cannot see decode fills it on success */
		int err = shmkv__entry_decode(db, r.unit << 3, &ent, NULL, 0);
		if (err)
			return err;
		e = db->base + (r.unit << 3);
		k = ent.key;
		kl = ent.key_len;
	} else {
		k = bk + r.key_pos;
		kl = r.key_len;
	}
	shmkv_value v;
	int err = shmkv__rec_value(db, bk, &r, e, 1, &v, NULL, 0);
	if (err)
		return err;
	*key = k;
	*key_len = kl;
	*value = v;
	it->expires = r.expires;
	it->pos++;
	it->left--;
	it->seen++;
	return 0;
}

#endif /* SHMKV_V2_H */
