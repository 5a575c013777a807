/* shmkv/entry.h - the entries of ENTRIES (FORMAT.md §7, §9): the bound an
 * OUT record's unit must meet (§12.1), where a value lies, a value read and
 * checked, the hit, and the checked decode iteration and verify use. One
 * function per rule; every path calls it.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_ENTRY_H
#define SHMKV_ENTRY_H

#include <string.h>

#include "handle.h"
#include "types.h"

static inline uint64_t shmkv__align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) & ~(a - 1);
}

/* Where an entry's value (or shared reference) starts (FORMAT.md §7). */
static inline uint64_t shmkv__value_pos_of(unsigned type, unsigned flags, size_t key_len)
{
	uint64_t p = sizeof(shmkv_entry_header) + key_len;
	return (flags & SHMKV_EFLAG_SHARED) || shmkv__align8_type(type) ? shmkv__align_up(p, 8) : p;
}

static inline uint64_t shmkv__value_pos(const shmkv_entry_header *eh)
{
	return shmkv__value_pos_of(eh->type, eh->flags, eh->key_len);
}

/* Bytes from an entry's start to where the next may start. */
static inline uint64_t shmkv__entry_size(unsigned type, unsigned flags, size_t key_len,
					 uint64_t value_len)
{
	uint64_t p = shmkv__value_pos_of(type, flags, key_len);
	p += flags & SHMKV_EFLAG_SHARED ? 8 : shmkv__stored_len(type, value_len);
	return shmkv__align_up(p, 8);
}

/* "entry at OFF: " before the reason in why (returns nothing, so that
 * callers return their own constant and GCC sees each error path fail). */
static SHMKV__COLD void shmkv__entry_why(uint64_t off, char *why, size_t why_len)
{
	shmkv__prefix(0, why, why_len, "entry at %llu: ", (unsigned long long)off);
}

/* The value bound rule (FORMAT.md §12.1): where the value of the entry at e
 * lies, inside ENTRIES, or shared: the reference inside ENTRIES and the
 * value 8-aligned inside VALUES. 0 with *data, or SHMKV_ECORRUPT (why). */
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

/* The value of the entry at e (header and key inside ENTRIES) into *v: type
 * and flags known, bounds (shmkv__value_place), bytes (shmkv__value_shape in
 * mode). type and flags are the entry's (the hot path passes constants it
 * compared). 0, or SHMKV_ECORRUPT with why (NULL on the hot path: the
 * messages compile away); *v written only on success. */
static inline __attribute__((always_inline)) int
shmkv__value_read(const shmkv *db, const uint8_t *e, size_t key_len, unsigned type,
		  unsigned flags, unsigned mode, shmkv_value *v, char *why, size_t why_len)
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
	if (shmkv__value_shape(type, data, len, mode, &count, why, why_len))
		SHMKV__BADR();
#undef SHMKV__BADR
	v->type = type;
	v->shared = flags & SHMKV_EFLAG_SHARED;
	v->data = data;
	v->size = len;
	v->count = count;
	return 0;
}

/* The typed getters' rule: a value of another type than want (0: any) is
 * SHMKV_ETYPE, never converted. */
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
	int err = shmkv__value_read(db, e, key_len, eh->type, eh->flags, 0, &got, why, why_len);
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

/* shmkv__hit_checked on the hot path: an entry of the wanted type, its
 * value inline or shared, is decoded here; anything else (another type,
 * damage, text that is not ASCII) is decided by the cold copy. */
static SHMKV__HOT int shmkv__hit(const shmkv *db, const uint8_t *e, size_t key_len, unsigned want,
				 shmkv_value *v)
{
	if (want) {
		uint16_t tf; /* type | flags << 8 */
		memcpy(&tf, e, 2);
		if (SHMKV__LIKELY(tf == want)) {
			if (SHMKV__LIKELY(!shmkv__value_read(db, e, key_len, want, 0,
							     SHMKV__SHAPE_ASCII, v, NULL, 0)))
				return 0;
		} else if (tf == (want | SHMKV_EFLAG_SHARED << 8)) {
			if (SHMKV__LIKELY(!shmkv__value_read(db, e, key_len, want, SHMKV_EFLAG_SHARED,
							     SHMKV__SHAPE_ASCII, v, NULL, 0)))
				return 0;
		}
	} else {
		const shmkv_entry_header *eh = (const shmkv_entry_header *)(const void *)e;
		if (SHMKV__LIKELY(!shmkv__value_read(db, e, key_len, eh->type, eh->flags,
						     SHMKV__SHAPE_ASCII, v, NULL, 0)))
			return 0;
	}
	return shmkv__hit_cold(db, e, key_len, want, v);
}

/* Key equality; short keys by two overlapping loads a side (glibc's memcmp
 * reads 32 bytes, which late in a line touches the next). */
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

/* The unit/entry bound rule: an OUT record's entry at unit u (image offset /
 * 8) holds its header and key_len key bytes inside ENTRIES iff
 * shmkv__key_fits(db, key_len) and u - ent_unit0 <= shmkv__key_lim(db,
 * key_len). Every scan applies it through shmkv__unit_entry. */
static inline int shmkv__key_fits(const shmkv *db, size_t key_len)
{
	return db->ent_units != 0 && key_len <= db->ent_room;
}

/* The largest unit (from ENTRIES' first) where a header and key_len bytes fit. */
static inline uint64_t shmkv__key_lim(const shmkv *db, size_t key_len)
{
	return (db->ent_room - key_len) >> 3;
}

/* 1 with *e the entry at unit when it is at most lim past ENTRIES' first
 * unit, else 0. Modulo 2^40 (the field's width), one compare refuses units
 * before ENTRIES as well as after it; a flag, so callers branch on it. */
static SHMKV__HOT int shmkv__unit_entry(const shmkv *db, uint64_t unit, uint64_t lim,
					const uint8_t **e)
{
	const uint64_t u = (unit - db->ent_unit0) & SHMKV_UNIT_MASK;
	if (SHMKV__UNLIKELY(u > lim))
		return 0;
	*e = db->ent + (u << 3); /* after the compare: computed earlier, it cost a register */
	return 1;
}

/* Whether the entry at e (header and key inside ENTRIES) holds key. */
static SHMKV__HOT int shmkv__entry_key_is(const uint8_t *e, const void *key, size_t key_len)
{
	return ((const shmkv_entry_header *)(const void *)e)->key_len == key_len &&
	       SHMKV__LIKELY(shmkv__key_eq(e + sizeof(shmkv_entry_header), (const uint8_t *)key,
					   key_len));
}

#define SHMKV__DEFER ((const uint8_t *)(uintptr_t)1) /* leave it to the checked path */

/* The hot paths' step for an OUT record whose tag matched: the entry of
 * key, NULL (another key's), or SHMKV__DEFER (the bound rule fails: damage,
 * or a key that cannot fit there; the checked path decides). */
static SHMKV__HOT const uint8_t *shmkv__unit_try(const shmkv *db, uint64_t unit, uint64_t lim,
						 const void *key, size_t key_len)
{
	const uint8_t *e;
	if (SHMKV__UNLIKELY(!shmkv__unit_entry(db, unit, lim, &e)))
		return SHMKV__DEFER;
	return shmkv__entry_key_is(e, key, key_len) ? e : NULL;
}

/* A decoded entry, as the checked walker sees it. */
typedef struct shmkv__entry {
	const uint8_t *key;
	size_t key_len;
	shmkv_value value;
	uint64_t value_off; /* image offset of the value */
	uint64_t end;       /* image offset just past the entry (8-aligned) */
} shmkv__entry;

/* shmkv__value_shape, deep, with an unknown type refused. */
static inline int shmkv__value_check(unsigned type, const uint8_t *p, uint64_t len, char *why,
				     size_t why_len)
{
	size_t count;
	if (!shmkv_type_desc_of(type))
		return shmkv__fail(SHMKV_ECORRUPT, why, why_len, "unknown value type %u", type);
	return shmkv__value_shape(type, p, len, SHMKV__SHAPE_DEEP, &count, why, why_len);
}

/* The entry at image offset off, every bound checked: header and key inside
 * ENTRIES, the value (deep), the entry's end inside ENTRIES. */
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
	    !shmkv__unit_entry(db, off >> 3, shmkv__key_lim(db, eh->key_len), &ek))
		return SHMKV__BADE("entry at %llu: key of %u bytes runs past the section",
				   (unsigned long long)off, eh->key_len);
	out->key = e + sizeof(shmkv_entry_header);
	out->key_len = eh->key_len;
	if (eh->type == SHMKV_TYPE_TOMBSTONE && db->delta) { /* FORMAT.md §19.2 */
		if (eh->flags || eh->value_len || !eh->key_len)
			return SHMKV__BADE("entry at %llu: a tombstone's entry with flags %x, "
					   "value_len %u, key_len %u (want 0, 0, >= 1)",
					   (unsigned long long)off, eh->flags, eh->value_len,
					   eh->key_len);
		memset(&out->value, 0, sizeof out->value);
		out->value.data = out->key + eh->key_len;
		out->value_off = off + sizeof *eh + eh->key_len;
		out->end = off + shmkv__align_up(sizeof *eh + eh->key_len, 8);
		if (out->end > db->entries_end)
			return SHMKV__BADE("entry at %llu: padding runs past the section",
					   (unsigned long long)off);
		return 0;
	}
	int err = shmkv__value_read(db, e, eh->key_len, eh->type, eh->flags, SHMKV__SHAPE_DEEP,
				    &out->value, why, why_len);
	if (err)
		return err;
	out->value_off = (uint64_t)((const uint8_t *)out->value.data - db->base);
	out->end = off + shmkv__entry_size(eh->type, eh->flags, eh->key_len, eh->value_len);
	if (out->end > db->entries_end)
		return SHMKV__BADE("entry at %llu: padding runs past the section",
				   (unsigned long long)off);
	return 0;
#undef SHMKV__BADE
}

#endif /* SHMKV_ENTRY_H */
