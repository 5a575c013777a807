/* shmkv/get.h - lookups, typed getters, string lists and iteration.
 * Part of the header-only reader; include <shmkv.h>, not this file.
 * Lookups make no system call and no allocation. */
#ifndef SHMKV_GET_H
#define SHMKV_GET_H

#include <stdbool.h>
#include <string.h>

#include "handle.h"
#include "types.h"

/* A value, pointing straight into the image (valid until shmkv_close). */
typedef struct shmkv_value {
	uint32_t type;    /* enum shmkv_type */
	uint32_t shared;  /* 1 when the value is deduplicated (stored once, shared) */
	const void *data; /* bytes/string: NUL-terminated; numbers and lists: 8-aligned */
	size_t size;      /* bytes, without the NUL of bytes/string */
	size_t count;     /* elements: list length, string length, 1 for scalars */
} shmkv_value;

/* A string list, iterated without allocation (shmkv_strlist_at checks each
 * string against size, so a damaged list never yields bytes outside it). */
typedef struct shmkv_strlist {
	const uint32_t *ends; /* ends[i+1] is one past string i's NUL, from data */
	const char *data;
	size_t count;
	size_t size; /* bytes at data */
} shmkv_strlist;

static inline uint64_t shmkv__align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) & ~(a - 1);
}

/* Offset within an entry where its value (or shared-value reference)
 * starts: after the header and the key, 8-aligned for a shared reference
 * and for the types whose row says so (FORMAT.md §7). */
static inline uint64_t shmkv__value_pos_of(unsigned type, unsigned flags, size_t key_len)
{
	uint64_t p = sizeof(shmkv_entry_header) + key_len;
	return (flags & SHMKV_EFLAG_SHARED) || shmkv__align8_type(type) ? shmkv__align_up(p, 8) : p;
}

static inline uint64_t shmkv__value_pos(const shmkv_entry_header *eh)
{
	return shmkv__value_pos_of(eh->type, eh->flags, eh->key_len);
}

/* Bytes from an entry's start to the next entry's: header, key, the value
 * (or its 8-byte shared reference) where shmkv__value_pos_of puts it, then
 * up to 8-byte alignment. */
static inline uint64_t shmkv__entry_size(unsigned type, unsigned flags, size_t key_len,
					 uint64_t value_len)
{
	uint64_t p = shmkv__value_pos_of(type, flags, key_len);
	p += flags & SHMKV_EFLAG_SHARED ? 8 : shmkv__stored_len(type, value_len);
	return shmkv__align_up(p, 8);
}

/* ---- lookups ---------------------------------------------------------------
 *
 * Every offset a lookup follows is checked against its section (FORMAT.md
 * §12.1), so that no image, however forged and even opened without
 * checksums, makes a get read outside the image:
 *   - a slot's entry offset: the 8-byte entry header lies inside ENTRIES;
 *   - the key bytes, when key_len equals the key's: inside ENTRIES;
 *   - the value: inline, inside ENTRIES; shared, the 8-byte reference inside
 *     ENTRIES and the value 8-aligned inside VALUES; stored_len bytes either way;
 *   - what the getters read of the value: the NUL of bytes/string; length 8
 *     for i64/f64, 1 (byte 0 or 1) for bool; list lengths a multiple of the
 *     element size; a strlist's count fits its length (its strings are
 *     checked by shmkv_strlist_at, one at a time);
 *   - probing: the home bucket is < bucket_count by construction, later
 *     buckets wrap, and at most max_probe of them are read (a larger
 *     displacement byte is capped).
 * A failed check is SHMKV_ECORRUPT. The hot path (shmkv__get_as) pays a few
 * compares against limits shmkv__bind computes at open; anything unusual goes
 * to one cold, checked lookup (shmkv__get_cold), which decides every error and
 * names it for shmkv_get_diag. Both accept exactly the same entries: the hot
 * path's checks are the cold path's functions, inlined with constants. */

/* "entry at OFF: " before the reason already in why (cold: messages only;
 * returns nothing, so that callers return their own constant and the
 * compiler sees every error path return non-zero). */
static SHMKV__COLD void shmkv__entry_why(uint64_t off, char *why, size_t why_len)
{
	shmkv__prefix(0, why, why_len, "entry at %llu: ", (unsigned long long)off);
}

/* The value bound rule (FORMAT.md §12.1), its one statement: where the value
 * of the entry at e (header inside ENTRIES) lies, key_len bytes of key
 * after its header: inline, its stored bytes inside ENTRIES; shared, the
 * 8-byte reference inside ENTRIES and the value 8-aligned inside VALUES.
 * Returns 0 with *data, or SHMKV_ECORRUPT (why, when not NULL). */
static inline __attribute__((always_inline)) int
shmkv__value_place(const shmkv *db, const uint8_t *e, size_t key_len, unsigned type,
		   unsigned flags, const uint8_t **data, char *why, size_t why_len)
{
#define SHMKV__BADP(...)                                                                           \
	return why ? shmkv__fail(SHMKV_ECORRUPT, why, why_len, __VA_ARGS__) : SHMKV_ECORRUPT
	const uint32_t len = ((const shmkv_entry_header *)(const void *)e)->value_len;
	const uint64_t stored = shmkv__stored_len(type, len);
	const uintptr_t p = (uintptr_t)e + shmkv__value_pos_of(type, flags, key_len);
	const uintptr_t end = (uintptr_t)db->ent_end;
	if (flags & SHMKV_EFLAG_SHARED) {
		uint64_t voff;
		if (p + 8 > end)
			SHMKV__BADP("shared-value reference runs past the section (entries end at %llu)",
				    (unsigned long long)db->entries_end);
		memcpy(&voff, (const void *)p, 8);
		if (voff % 8 || voff < db->values_off || voff > db->values_end ||
		    stored > db->values_end - voff)
			SHMKV__BADP("shared value [%llu, +%llu) outside the values section [%llu, %llu)",
				    (unsigned long long)voff, (unsigned long long)stored,
				    (unsigned long long)db->values_off, (unsigned long long)db->values_end);
		*data = db->base + voff;
	} else {
		if (p + stored > end)
			SHMKV__BADP("%s value of %u bytes after a key of %zu runs past the section "
				    "(entries end at %llu)", shmkv_type_name(type), len, key_len,
				    (unsigned long long)db->entries_end);
		*data = (const uint8_t *)p;
	}
	return 0;
#undef SHMKV__BADP
}

/* The value of the entry at e (header inside ENTRIES, key_len bytes of key
 * after it), every rule of its shape checked, into *v: its type and flags
 * known, the value's bounds (shmkv__value_place), its bytes
 * (shmkv__value_shape; deep: a string list's every string). type and flags
 * are the entry's (the hot path passes them as constants once it has
 * compared them). Returns 0 or SHMKV_ECORRUPT with the reason in why (NULL
 * on the hot path, where the messages compile away); *v is written only on
 * success. The lookup, iteration and verify all read values through here. */
static inline __attribute__((always_inline)) int
shmkv__value_read(const shmkv *db, const uint8_t *e, size_t key_len, unsigned type,
		  unsigned flags, int deep, shmkv_value *v, char *why, size_t why_len)
{
	const uint32_t len = ((const shmkv_entry_header *)(const void *)e)->value_len;
	const uint8_t *data = NULL; /* set when err is 0: GCC 12 cannot always see it */
	size_t count = 0;
#define SHMKV__BADR()                                                                              \
	do {                                                                                       \
		if (why)                                                                           \
			shmkv__entry_why((uint64_t)(e - db->base), why, why_len);                   \
		return SHMKV_ECORRUPT;                                                             \
	} while (0)
	if (type < 1 || type > SHMKV_TYPE_MAX) {
		if (why)
			shmkv__fail(SHMKV_ECORRUPT, why, why_len, "unknown type %u", type);
		SHMKV__BADR();
	}
	if (flags & ~SHMKV_EFLAG_KNOWN) {
		if (why)
			shmkv__fail(SHMKV_ECORRUPT, why, why_len, "unknown flags %x", flags);
		SHMKV__BADR();
	}
	if (shmkv__value_place(db, e, key_len, type, flags, &data, why, why_len))
		SHMKV__BADR();
	if (shmkv__value_shape(type, data, len, deep, &count, why, why_len))
		SHMKV__BADR();
#undef SHMKV__BADR
	v->type = type;
	v->shared = flags & SHMKV_EFLAG_SHARED;
	v->data = data;
	v->size = len;
	v->count = count;
	return 0;
}

/* The value of a lookup's hit (shmkv__value_read without a string list's
 * strings: a get is O(1)). */
static SHMKV__HOT int shmkv__value_ok(const shmkv *db, const uint8_t *e, size_t key_len,
				      unsigned type, unsigned flags, shmkv_value *v, char *why,
				      size_t why_len)
{
	return shmkv__value_read(db, e, key_len, type, flags, 0, v, why, why_len);
}

/* The typed getters' rule: a value of another type than want (0: any) is
 * SHMKV_ETYPE, never converted (v1's and v2's checked gets). */
static inline int shmkv__type_want(const shmkv_value *got, unsigned want, char *why,
				   size_t why_len)
{
	if (want && got->type != want)
		return shmkv__fail(SHMKV_ETYPE, why, why_len, "value is %s, not %s",
				   shmkv_type_name(got->type), shmkv_type_name(want));
	return 0;
}

/* The hit at e (header and key checked) as a value of type want (0: any):
 * 0, SHMKV_ETYPE, or SHMKV_ECORRUPT. *v is written only on success. */
static inline int shmkv__hit_checked(const shmkv *db, const uint8_t *e, size_t key_len,
				     unsigned want, shmkv_value *v, char *why, size_t why_len)
{
	const shmkv_entry_header *eh = (const shmkv_entry_header *)(const void *)e;
	shmkv_value got;
	int err = shmkv__value_ok(db, e, key_len, eh->type, eh->flags, &got, why, why_len);
	if (!err)
		err = shmkv__type_want(&got, want, why, why_len);
	if (err)
		return err;
	*v = got;
	return 0;
}

static SHMKV__COLD int shmkv__hit_cold(const shmkv *db, const uint8_t *e, size_t key_len,
				       unsigned want, shmkv_value *v)
{
	return shmkv__hit_checked(db, e, key_len, want, v, NULL, 0);
}

/* shmkv__hit_checked on the hot path: an entry of the wanted type, inline
 * or shared, is decoded here; anything else (another type, damage) is
 * decided by the cold copy. */
static SHMKV__HOT int shmkv__hit(const shmkv *db, const uint8_t *e, size_t key_len, unsigned want,
				 shmkv_value *v)
{
	if (want) {
		uint16_t tf; /* type | flags << 8 */
		memcpy(&tf, e, 2);
		if (SHMKV__LIKELY(tf == want)) {
			if (SHMKV__LIKELY(!shmkv__value_ok(db, e, key_len, want, 0, v, NULL, 0)))
				return 0;
		} else if (tf == (want | SHMKV_EFLAG_SHARED << 8)) {
			if (SHMKV__LIKELY(!shmkv__value_ok(db, e, key_len, want, SHMKV_EFLAG_SHARED, v,
							   NULL, 0)))
				return 0;
		}
	} else {
		const shmkv_entry_header *eh = (const shmkv_entry_header *)(const void *)e;
		if (SHMKV__LIKELY(!shmkv__value_ok(db, e, key_len, eh->type, eh->flags, v, NULL, 0)))
			return 0;
	}
	return shmkv__hit_cold(db, e, key_len, want, v);
}

/* Key equality. Short keys use two overlapping loads from each side: glibc's
 * memcmp reads 32 bytes, which for an entry late in a cache line touches the
 * next line too. */
static inline int shmkv__key_eq(const uint8_t *a, const uint8_t *b, size_t n)
{
	if (n >= 8 && n <= 16) {
		uint64_t a0, b0, a1, b1;
		memcpy(&a0, a, 8);
		memcpy(&b0, b, 8);
		memcpy(&a1, a + n - 8, 8);
		memcpy(&b1, b + n - 8, 8);
		return ((a0 ^ b0) | (a1 ^ b1)) == 0;
	}
	if (n >= 4 && n < 8) {
		uint32_t a0, b0, a1, b1;
		memcpy(&a0, a, 4);
		memcpy(&b0, b, 4);
		memcpy(&a1, a + n - 4, 4);
		memcpy(&b1, b + n - 4, 4);
		return ((a0 ^ b0) | (a1 ^ b1)) == 0;
	}
	if (n < 4) {
		for (size_t i = 0; i < n; i++)
			if (a[i] != b[i])
				return 0;
		return 1;
	}
	return memcmp(a, b, n) == 0;
}

/* ---- the slot/entry bound rule ---------------------------------------------
 *
 * A slot's entry at unit u (8-byte units from the start of ENTRIES) holds
 * its 8-byte header and key_len bytes of key inside ENTRIES iff
 * 8u + 8 + key_len <= ENTRIES size, that is u <= shmkv__key_lim(db,
 * key_len), provided shmkv__key_fits(db, key_len). Every bucket scan (the
 * hot one, the displaced keys', batch's and the checked one) applies it
 * through shmkv__slot_entry; the hot paths only for keys shorter than
 * db->bound_key_len, which shmkv__bind derives so that they fit. */

/* Whether a key of key_len bytes fits after an entry header in ENTRIES at
 * all (ENTRIES holds a header, and key_len <= its size - 8). */
static inline int shmkv__key_fits(const shmkv *db, size_t key_len)
{
	return db->ent_units != 0 && key_len <= db->ent_room;
}

/* The largest unit at which a header and key_len key bytes fit inside
 * ENTRIES. Needs shmkv__key_fits(db, key_len). */
static inline uint64_t shmkv__key_lim(const shmkv *db, size_t key_len)
{
	return (db->ent_room - key_len) >> 3;
}

/* 1 with *e the entry a slot points at when its unit is at most lim (a
 * shmkv__key_lim), else 0 (*e untouched).
 * The unit is taken modulo 2^40 (the width of the offset field), so one
 * compare against a limit below 2^40 - ent_unit0 refuses offsets before
 * ENTRIES as well as after it. A flag, not a NULL pointer, so that callers
 * branch on the compare itself. */
static SHMKV__HOT int shmkv__slot_entry(const shmkv *db, uint64_t slot, uint64_t lim,
					const uint8_t **e)
{
	const uint64_t u = (slot - db->ent_unit0) & SHMKV_SLOT_OFF_MASK;
	if (SHMKV__UNLIKELY(u > lim))
		return 0;
	*e = db->ent + (u << 3); /* after the compare: computed earlier, it cost a register */
	return 1;
}

/* Whether the entry at e (header and key_len bytes after it inside ENTRIES)
 * holds key. */
static SHMKV__HOT int shmkv__entry_key_is(const uint8_t *e, const void *key, size_t key_len)
{
	return ((const shmkv_entry_header *)(const void *)e)->key_len == key_len &&
	       SHMKV__LIKELY(shmkv__key_eq(e + sizeof(shmkv_entry_header), (const uint8_t *)key,
					   key_len));
}

#define SHMKV__DEFER ((const uint8_t *)(uintptr_t)1) /* leave it to the checked path */

/* The hot paths' step for one tag match: the entry of key, NULL (another
 * key), or SHMKV__DEFER when the slot fails the bound rule for lim (damage,
 * or a key too long to fit where the slot points: the checked path
 * decides). One compare bounds both the entry header and the key bytes. */
static SHMKV__HOT const uint8_t *shmkv__slot_try(const shmkv *db, uint64_t slot, uint64_t lim,
						 const void *key, size_t key_len)
{
	const uint8_t *e;
	if (SHMKV__UNLIKELY(!shmkv__slot_entry(db, slot, lim, &e)))
		return SHMKV__DEFER;
	return shmkv__entry_key_is(e, key, key_len) ? e : NULL;
}

#define SHMKV__NEXT 1 /* shmkv__bucket_scan: not in this bucket */

/* The checked scan of bucket b's tag matches, in slot order, for key: 0 with
 * *out (the entry; its header and key lie inside ENTRIES), SHMKV__NEXT, or
 * SHMKV_ECORRUPT (the bound rule failed: which part, in why). */
static inline int shmkv__bucket_scan(const shmkv *db, uint64_t b, uint64_t tag, const void *key,
				     size_t key_len, const uint8_t **out, char *why, size_t why_len)
{
	const uint64_t *bk = db->buckets + b * SHMKV_BUCKET_SLOTS;
	unsigned m = shmkv__match(bk, tag);
	while (m) {
		unsigned j = SHMKV__CTZ(m);
		m &= m - 1;
		const uint8_t *e;
		if (!shmkv__key_fits(db, 0) || !shmkv__slot_entry(db, bk[j], shmkv__key_lim(db, 0), &e))
			return shmkv__fail(SHMKV_ECORRUPT, why, why_len,
					   "index bucket %llu slot %u: entry offset %llu outside the "
					   "entries section [%llu, %llu)", (unsigned long long)b, j,
					   (unsigned long long)((bk[j] & SHMKV_SLOT_OFF_MASK) << 3),
					   (unsigned long long)db->entries_off,
					   (unsigned long long)db->entries_end);
		if (((const shmkv_entry_header *)(const void *)e)->key_len != key_len)
			continue;
		const uint8_t *ek;
		if (!shmkv__key_fits(db, key_len) ||
		    !shmkv__slot_entry(db, bk[j], shmkv__key_lim(db, key_len), &ek))
			return shmkv__fail(SHMKV_ECORRUPT, why, why_len,
					   "index bucket %llu slot %u: entry at %llu: key of %zu bytes runs "
					   "past the entries section end %llu", (unsigned long long)b, j,
					   (unsigned long long)(e - db->base), key_len,
					   (unsigned long long)db->entries_end);
		if (shmkv__entry_key_is(e, key, key_len)) {
			*out = e;
			return 0;
		}
	}
	return SHMKV__NEXT;
}

/* The entry of key (hash h), every offset checked: its home bucket, then,
 * if the home bucket announces displaced keys with this tag, up to
 * min(D, max_probe) later buckets (FORMAT.md §6). Returns 0 with *out,
 * SHMKV_ENOTFOUND or SHMKV_ECORRUPT (why). */
static inline int shmkv__locate(const shmkv *db, const void *key, size_t key_len, uint64_t h,
				const uint8_t **out, char *why, size_t why_len)
{
	uint64_t tag = shmkv__tag(h), b = shmkv__home(h, db->bucket_count);
	int r = shmkv__bucket_scan(db, b, tag, key, key_len, out, why, why_len);
	if (r != SHMKV__NEXT)
		return r;
	uint64_t n = shmkv__displaced(db->buckets + b * SHMKV_BUCKET_SLOTS, tag, db->max_probe);
	if (n > db->max_probe) /* a displacement byte above max_probe is damage: capped */
		n = db->max_probe;
	for (; n; n--) {
		if (++b == db->bucket_count)
			b = 0;
		r = shmkv__bucket_scan(db, b, tag, key, key_len, out, why, why_len);
		if (r != SHMKV__NEXT)
			return r;
	}
	return shmkv__fail(SHMKV_ENOTFOUND, why, why_len, "key not found");
}

/* Format v2 (v2.h, included at the end of this file). */
static int shmkv__get2(const shmkv *db, const void *key, size_t key_len, unsigned want,
		       shmkv_value *v);
static int shmkv__get2_cold(const shmkv *db, const void *key, size_t key_len, unsigned want,
			    shmkv_value *v, char *why, size_t why_len);
static inline int shmkv__find2(const shmkv *db, const void *key, size_t key_len, uint64_t *out,
			       uint32_t *expires, char *why, size_t why_len);

/* The checked lookup, the one every caller that is not the hot path uses
 * (shmkv_get_diag, shmkv__find, shmkv_find_entry, the hot path's own
 * fallback): the key's length, its hash (any hash_bits), shmkv__locate
 * (v2: shmkv__find2, expired or not). Returns 0 with *out (the entry; v2:
 * the record), SHMKV_EKEYLEN, SHMKV_ENOTFOUND or
 * SHMKV_ECORRUPT, the reason in why. */
static inline int shmkv__lookup(const shmkv *db, const void *key, size_t key_len,
				const uint8_t **out, char *why, size_t why_len)
{
	if (key_len > SHMKV_MAX_KEY_LEN)
		return shmkv__fail(SHMKV_EKEYLEN, why, why_len,
				   "key of %zu bytes is longer than the %u-byte limit", key_len,
				   SHMKV_MAX_KEY_LEN);
	if (db->version == SHMKV_FORMAT_V2) { /* the key's record in INDEX */
		uint64_t off = 0;
		int err = shmkv__find2(db, key, key_len, &off, NULL, why, why_len);
		if (!err)
			*out = db->base + off;
		return err;
	}
	uint64_t h = shmkv__hash(db->seed, db->hash_bits, key, key_len);
	return shmkv__locate(db, key, key_len, h, out, why, why_len);
}

/* The entry of key, or NULL (absent, too long, or damage on its path): the
 * checked lookup, for walkers that compare entries (verify). */
static inline const uint8_t *shmkv__find(const shmkv *db, const void *key, size_t key_len)
{
	const uint8_t *e = NULL;
	return shmkv__lookup(db, key, key_len, &e, NULL, 0) ? NULL : e;
}

/* shmkv__get_cold mode bits, above the wanted type */
#define SHMKV__REHASH 0x200u     /* hash here (key_len checked, hash_bits < 64 honoured) */

/* The checked lookup and value: everything the hot path does not finish.
 * h is the key's hash unless mode has SHMKV__REHASH. */
static SHMKV__COLD int shmkv__get_cold(const shmkv *db, const void *key, size_t key_len,
				       uint64_t h, unsigned mode, shmkv_value *v, char *why,
				       size_t why_len)
{
	if (db->version == SHMKV_FORMAT_V2) /* rehashes: the v2 hot path passes no hash */
		return shmkv__get2_cold(db, key, key_len, mode & 0xffu, v, why, why_len);
	const uint8_t *e = NULL;
	int err = mode & SHMKV__REHASH ? shmkv__lookup(db, key, key_len, &e, why, why_len)
				       : shmkv__locate(db, key, key_len, h, &e, why, why_len);
	if (err)
		return err;
	return shmkv__hit_checked(db, e, key_len, mode & 0xffu, v, why, why_len);
}

/* The hot path's scan of one bucket's tag matches m: as shmkv__slot_try,
 * for the first match that is not another key. */
static SHMKV__HOT const uint8_t *shmkv__scan_fast(const shmkv *db, const uint64_t *bk, unsigned m,
						  uint64_t lim, const void *key, size_t key_len)
{
	while (m) {
		unsigned j = SHMKV__CTZ(m);
		m &= m - 1;
		const uint8_t *e = shmkv__slot_try(db, bk[j], lim, key, key_len);
		if (e)
			return e;
	}
	return NULL;
}

/* The later buckets of home bucket b, for a key its filter says may have
 * been displaced: d of them, at most max_probe. Out of line: about 8% of
 * hits and few misses come here, and keeping the loop out of every caller
 * keeps the hot path short. Returns as shmkv__scan_fast. Flattened (every
 * call in it inlined): left to GCC, whether shmkv__key_eq was inlined here
 * depended on how many other callers the translation unit had (a
 * SHMKV_USDT build has one more), and the call cost displaced hits about
 * 0.5 instructions per get (bench/RESULTS.md, "USDT probes: untraced cost"). */
static SHMKV__COLD SHMKV__FLATTEN const uint8_t *shmkv__probe_on(const shmkv *db, uint64_t b, uint64_t d,
						  uint64_t tag, const void *key, size_t key_len)
{
	if (d > db->max_probe) /* a displacement byte above max_probe is damage: capped */
		d = db->max_probe;
	uint64_t lim = shmkv__key_lim(db, key_len);
	for (; d; d--) {
		if (++b == db->bucket_count)
			b = 0;
		const uint64_t *bk = db->buckets + b * SHMKV_BUCKET_SLOTS;
		const uint8_t *e = shmkv__scan_fast(db, bk, shmkv__match(bk, tag), lim, key, key_len);
		if (e)
			return e;
	}
	return NULL;
}

#if SHMKV_USDT
static SHMKV__COLD int shmkv__get_traced(const shmkv *db, const void *key, size_t key_len,
					 unsigned want, shmkv_value *v);
#define SHMKV__GET_SLOW shmkv__get_traced
#else
#define SHMKV__GET_SLOW(db, key, key_len, want, v)                                                 \
	shmkv__get_cold(db, key, key_len, 0, (want) | SHMKV__REHASH, v, NULL, 0)
#endif

/* A lookup as a value of type want (0: any). The hot path: hash, home
 * bucket, its tag matches with entry header and key bounded by one compare,
 * the value checked by shmkv__hit; displaced keys out of line; every other
 * case (long key, test hash, damage; in SHMKV_USDT builds, a handle whose
 * get probes are traced) goes to the checked path. */
static SHMKV__HOT int shmkv__get_as(const shmkv *db, const void *key, size_t key_len,
				    unsigned want, shmkv_value *v)
{
	if (SHMKV__UNLIKELY(key_len >= db->slow_key_len)) {
		if (key_len < db->v2_key_len) /* a v2 image (slow_key_len 0): v2.h */
			return shmkv__get2(db, key, key_len, want, v);
		return SHMKV__GET_SLOW(db, key, key_len, want, v);
	}
	uint64_t h = shmkv__hash64(db->seed, key, key_len);
	uint64_t tag = shmkv__tag(h);
	uint64_t b = shmkv__home(h, db->bucket_count);
	const uint64_t *bk = db->buckets + b * SHMKV_BUCKET_SLOTS;
	unsigned m = shmkv__match(bk, tag);
	const uint8_t *e;
	if (SHMKV__LIKELY(m != 0)) {
		uint64_t lim = shmkv__key_lim(db, key_len);
		do { /* shmkv__scan_fast, with its outcomes as jumps */
			unsigned j = SHMKV__CTZ(m);
			m &= m - 1;
			if (SHMKV__UNLIKELY(!shmkv__slot_entry(db, bk[j], lim, &e)))
				goto checked;
			if (shmkv__entry_key_is(e, key, key_len))
				goto found;
		} while (m);
	}
	{
		uint64_t d = shmkv__displaced(bk, tag, db->max_probe);
		if (SHMKV__LIKELY(d == 0))
			return SHMKV_ENOTFOUND;
		e = shmkv__probe_on(db, b, d, tag, key, key_len);
		if (!e)
			return SHMKV_ENOTFOUND;
		if (SHMKV__UNLIKELY(e == SHMKV__DEFER))
			goto checked;
	}
found:
	return shmkv__hit(db, e, key_len, want, v);
checked:
	return shmkv__get_cold(db, key, key_len, h, want, v, NULL, 0);
}

#if SHMKV_USDT
/* A get of a handle whose gate saw a get probe traced (trace.h), or of a key
 * for the checked path: the lookup as untraced (shmkv__get_as on a copy of
 * the handle with its untraced limit), timed, then the probe. The copy keeps
 * this path from adding a second inlined fast path to the translation unit,
 * which changed how GCC compiled the first. */
static SHMKV__COLD int shmkv__get_traced(const shmkv *db, const void *key, size_t key_len,
					 unsigned want, shmkv_value *v)
{
	if (!db->usdt_gets)
		return shmkv__get_cold(db, key, key_len, 0, want | SHMKV__REHASH, v, NULL, 0);
	shmkv untraced = *db;
	untraced.slow_key_len = db->bound_key_len;
	untraced.v2_key_len = db->v2_bound_key_len;
	untraced.usdt_gets = 0;
	uint64_t t0 = shmkv__usdt_ns();
	int err = shmkv__get_as(&untraced, key, key_len, want, v);
	uint64_t ns = shmkv__usdt_ns() - t0;
	if (err == 0) {
		SHMKV__USDT(get_hit, 4, db, key, key_len, ns);
		return err;
	}
	/* expired: the key is in a v2 image that says some record expires,
	 * yet the get found nothing (a second, checked lookup: only while
	 * traced) */
	uint64_t off = 0;
	uint32_t exp = 0;
	int expired = err == SHMKV_ENOTFOUND && db->version == SHMKV_FORMAT_V2 && db->expiry &&
		      !shmkv__find2(db, key, key_len, &off, &exp, NULL, 0) && exp;
	SHMKV__USDT(get_miss, 6, db, key, key_len, err, ns, expired);
	return err;
}
#endif

/* Looks key up. Returns 0 with *out filled, SHMKV_ENOTFOUND, SHMKV_EKEYLEN,
 * or SHMKV_ECORRUPT (a damaged index slot, entry or value on the key's
 * path). *out is untouched on error. */
static SHMKV__HOT int shmkv_get(const shmkv *db, const void *key, size_t key_len, shmkv_value *out)
{
	return shmkv__get_as(db, key, key_len, 0, out);
}

/* shmkv_get with the reason for an error in why: what, and for
 * SHMKV_ECORRUPT where in the image. The same results as shmkv_get, by the
 * checked path alone (slower): for tools. */
static inline int shmkv_get_diag(const shmkv *db, const void *key, size_t key_len,
				 shmkv_value *out, char *why, size_t why_len)
{
	if (why && why_len)
		why[0] = 0;
	return shmkv__get_cold(db, key, key_len, 0, SHMKV__REHASH, out, why, why_len);
}

/* Typed getters: 0, SHMKV_ENOTFOUND, SHMKV_EKEYLEN, SHMKV_ECORRUPT, or
 * SHMKV_ETYPE when the stored type differs (nothing is converted). Outputs
 * are untouched on error. What they return has its type's shape (i64/f64: 8
 * bytes; bool: one byte, 0 or 1; lists: whole elements). */
static SHMKV__HOT int shmkv_get_i64(const shmkv *db, const void *key, size_t key_len, int64_t *out)
{
	shmkv_value v;
	int err = shmkv__get_as(db, key, key_len, SHMKV_TYPE_I64, &v);
	if (!err)
		memcpy(out, v.data, 8);
	return err;
}

static SHMKV__HOT int shmkv_get_f64(const shmkv *db, const void *key, size_t key_len, double *out)
{
	shmkv_value v;
	int err = shmkv__get_as(db, key, key_len, SHMKV_TYPE_F64, &v);
	if (!err)
		memcpy(out, v.data, 8);
	return err;
}

static SHMKV__HOT int shmkv_get_bool(const shmkv *db, const void *key, size_t key_len, bool *out)
{
	shmkv_value v;
	int err = shmkv__get_as(db, key, key_len, SHMKV_TYPE_BOOL, &v);
	if (!err)
		*out = *(const uint8_t *)v.data != 0;
	return err;
}

/* *s is NUL-terminated; *len excludes the NUL (the string may hold NULs). */
static SHMKV__HOT int shmkv_get_str(const shmkv *db, const void *key, size_t key_len,
				const char **s, size_t *len)
{
	shmkv_value v;
	int err = shmkv__get_as(db, key, key_len, SHMKV_TYPE_STRING, &v);
	if (!err) {
		*s = (const char *)v.data;
		if (len)
			*len = v.size;
	}
	return err;
}

static SHMKV__HOT int shmkv_get_bytes(const shmkv *db, const void *key, size_t key_len,
				  const void **p, size_t *len)
{
	shmkv_value v;
	int err = shmkv__get_as(db, key, key_len, SHMKV_TYPE_BYTES, &v);
	if (!err) {
		*p = v.data;
		*len = v.size;
	}
	return err;
}

static SHMKV__HOT int shmkv_get_f32list(const shmkv *db, const void *key, size_t key_len,
				    const float **p, size_t *count)
{
	shmkv_value v;
	int err = shmkv__get_as(db, key, key_len, SHMKV_TYPE_F32LIST, &v);
	if (!err) {
		*p = (const float *)v.data;
		*count = v.count;
	}
	return err;
}

static SHMKV__HOT int shmkv_get_f64list(const shmkv *db, const void *key, size_t key_len,
				    const double **p, size_t *count)
{
	shmkv_value v;
	int err = shmkv__get_as(db, key, key_len, SHMKV_TYPE_F64LIST, &v);
	if (!err) {
		*p = (const double *)v.data;
		*count = v.count;
	}
	return err;
}

static SHMKV__HOT int shmkv_get_i64list(const shmkv *db, const void *key, size_t key_len,
				    const int64_t **p, size_t *count)
{
	shmkv_value v;
	int err = shmkv__get_as(db, key, key_len, SHMKV_TYPE_I64LIST, &v);
	if (!err) {
		*p = (const int64_t *)v.data;
		*count = v.count;
	}
	return err;
}

/* Views a STRLIST value as a list: 0; SHMKV_ETYPE (not a strlist) or
 * SHMKV_ECORRUPT (shorter than 8 bytes, or a count its length cannot hold),
 * with *out an empty list so that no caller reads garbage. O(1): each string
 * is checked by shmkv_strlist_at. */
static inline int shmkv_value_strlist(const shmkv_value *v, shmkv_strlist *out)
{
	out->count = 0;
	out->size = 0;
	out->ends = NULL;
	out->data = NULL;
	if (v->type != SHMKV_TYPE_STRLIST)
		return SHMKV_ETYPE;
	const uint8_t *p = (const uint8_t *)v->data;
	uint32_t n;
	if (v->size < 8)
		return SHMKV_ECORRUPT;
	memcpy(&n, p, 4);
	if (n > (v->size - 8) / 4)
		return SHMKV_ECORRUPT;
	out->count = n;
	out->ends = (const uint32_t *)(const void *)(p + 4);
	out->data = (const char *)(p + 4 * ((uint64_t)n + 2));
	out->size = v->size - 4 * ((uint64_t)n + 2);
	return 0;
}

/* shmkv_get of a strlist: the typed getters' codes; *out is untouched on
 * error. */
static SHMKV__HOT int shmkv_get_strlist(const shmkv *db, const void *key, size_t key_len,
				    shmkv_strlist *out)
{
	shmkv_value v;
	int err = shmkv__get_as(db, key, key_len, SHMKV_TYPE_STRLIST, &v);
	if (!err)
		err = shmkv_value_strlist(&v, out); /* 0: the get checked the count */
	return err;
}

static inline size_t shmkv_strlist_count(const shmkv_strlist *l)
{
	return l->count;
}

/* String i (NUL-terminated) and its length without the NUL. NULL when
 * i >= count (*len untouched), or when string i is damaged (*len 0): its
 * ends do not increase, run past the list, or its last byte is not NUL (an
 * image shmkv_verify refuses). Never a pointer or a length outside the list. */
static inline const char *shmkv_strlist_at(const shmkv_strlist *l, size_t i, size_t *len)
{
	if (i >= l->count)
		return NULL;
	uint32_t s, e;
	memcpy(&s, l->ends + i, 4);
	memcpy(&e, l->ends + i + 1, 4);
	if (s >= e || e > l->size || l->data[e - 1] != 0) {
		if (len)
			*len = 0;
		return NULL;
	}
	if (len)
		*len = e - s - 1;
	return l->data + s;
}

/* A decoded entry, as the checked walker sees it. */
typedef struct shmkv__entry {
	const uint8_t *key;
	size_t key_len;
	shmkv_value value;
	uint64_t value_off; /* image offset of the value */
	uint64_t end;       /* image offset just past the entry (8-aligned) */
} shmkv__entry;

/* Checks the value bytes of a type (lengths, NULs, bools, string-list
 * shape): shmkv__value_shape, deep, with an unknown type refused. */
static inline int shmkv__value_check(unsigned type, const uint8_t *p, uint64_t len, char *why,
				     size_t why_len)
{
	size_t count;
	if (!shmkv_type_desc_of(type))
		return shmkv__fail(SHMKV_ECORRUPT, why, why_len, "unknown value type %u", type);
	return shmkv__value_shape(type, p, len, 1, &count, why, why_len);
}

/* Decodes the entry at image offset off with every bound checked: the
 * offset (the header inside ENTRIES), the key inside ENTRIES, then the
 * value as a lookup reads it (shmkv__value_read, deep), and the entry's
 * padding inside ENTRIES. */
static inline int shmkv__entry_decode(const shmkv *db, uint64_t off, shmkv__entry *out, char *why,
				      size_t why_len)
{
#define SHMKV__BADE(...) shmkv__fail(SHMKV_ECORRUPT, why, why_len, __VA_ARGS__)
	if (off % 8 || off < db->entries_off || off > db->entries_end - sizeof(shmkv_entry_header))
		return SHMKV__BADE("entry offset %llu outside the entries section",
				   (unsigned long long)off);
	const uint8_t *e = db->base + off;
	const shmkv_entry_header *eh = (const shmkv_entry_header *)(const void *)e;
	const uint8_t *ek;
	if (!shmkv__key_fits(db, eh->key_len) ||
	    !shmkv__slot_entry(db, off >> 3, shmkv__key_lim(db, eh->key_len), &ek))
		return SHMKV__BADE("entry at %llu: key of %u bytes runs past the section",
				   (unsigned long long)off, eh->key_len);
	int err = shmkv__value_read(db, e, eh->key_len, eh->type, eh->flags, 1, &out->value, why,
				    why_len);
	if (err)
		return err;
	out->key = e + sizeof(shmkv_entry_header);
	out->key_len = eh->key_len;
	out->value_off = (uint64_t)((const uint8_t *)out->value.data - db->base);
	out->end = off + shmkv__entry_size(eh->type, eh->flags, eh->key_len, eh->value_len);
	if (out->end > db->entries_end)
		return SHMKV__BADE("entry at %llu: padding runs past the section",
				   (unsigned long long)off);
	return 0;
#undef SHMKV__BADE
}

/* Iteration over all entries, in image order. */
typedef struct shmkv_iter {
	const shmkv *db;
	uint64_t pos;     /* v1: next image offset to look at; v2: next record's index
			     (directory order) in bucket `bucket - 1` */
	uint64_t seen;    /* entries returned so far */
	uint64_t bucket;  /* v2: the next bucket to enter */
	uint32_t left;    /* v2: records still to read in the current bucket */
	uint32_t expires; /* the last entry returned: its expiry (unix seconds), 0: none */
} shmkv_iter;

static inline void shmkv_iter_init(const shmkv *db, shmkv_iter *it)
{
	it->db = db;
	it->pos = db->version == SHMKV_FORMAT_V2 ? 0 : db->entries_off;
	it->seen = 0;
	it->bucket = 0;
	it->left = 0;
	it->expires = 0;
}

static inline int shmkv__iter2_next(shmkv_iter *it, const void **key, size_t *key_len,
				    shmkv_value *value);

/* When the entry the last shmkv_iter_next returned expires (unix seconds;
 * FORMAT.md §17.6), 0 when it does not. Iteration returns expired entries
 * too: a get would not find them once the clock reads this or later. */
static inline uint32_t shmkv_iter_expires(const shmkv_iter *it)
{
	return it->expires;
}

/* Next entry: 0 with key and value set, SHMKV_EEND when done, SHMKV_ECORRUPT
 * if the entries section is damaged. */
static inline int shmkv_iter_next(shmkv_iter *it, const void **key, size_t *key_len,
				  shmkv_value *value)
{
	const shmkv *db = it->db;
	if (it->seen == db->entry_count)
		return SHMKV_EEND;
	if (db->version == SHMKV_FORMAT_V2)
		return shmkv__iter2_next(it, key, key_len, value);
	uint64_t w;
	/* zero words are padding that keeps small entries inside one cache line */
	while (it->pos + 8 <= db->entries_end && (memcpy(&w, db->base + it->pos, 8), w == 0))
		it->pos += 8;
	shmkv__entry e;
	memset(&e, 0, sizeof e); /* GCC 12 -O2 cannot see decode fills it on success */
	int err = shmkv__entry_decode(db, it->pos, &e, NULL, 0);
	if (err)
		return err;
	*key = e.key;
	*key_len = e.key_len;
	*value = e.value;
	it->pos = e.end;
	it->seen++;
	return 0;
}

#include "v2.h"

#endif /* SHMKV_GET_H */
