/* shmkv/get.h - lookups, typed getters, string lists and iteration.
 * Part of the header-only reader; include <shmkv.h>, not this file.
 * Lookups make no system call and no allocation. */
#ifndef SHMKV_GET_H
#define SHMKV_GET_H

#include <stdbool.h>
#include <string.h>

#include "handle.h"

/* A value, pointing straight into the image (valid until shmkv_close). */
typedef struct shmkv_value {
	uint32_t type;    /* enum shmkv_type */
	uint32_t shared;  /* 1 when the value is deduplicated (stored once, shared) */
	const void *data; /* bytes/string: NUL-terminated; numbers and lists: 8-aligned */
	size_t size;      /* bytes, without the NUL of bytes/string */
	size_t count;     /* elements: list length, string length, 1 for scalars */
} shmkv_value;

/* A string list, iterated without allocation. */
typedef struct shmkv_strlist {
	const uint32_t *ends; /* ends[i+1] is one past string i's NUL, from data */
	const char *data;
	size_t count;
} shmkv_strlist;

static inline int shmkv__align8_type(unsigned type)
{
	return !(type == SHMKV_TYPE_BYTES || type == SHMKV_TYPE_STRING || type == SHMKV_TYPE_BOOL);
}

static inline uint64_t shmkv__align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) & ~(a - 1);
}

/* Offset within an entry where its value (or shared-value reference) starts. */
static inline uint64_t shmkv__value_pos(const shmkv_entry_header *eh)
{
	uint64_t p = sizeof(shmkv_entry_header) + eh->key_len;
	return (eh->flags & SHMKV_EFLAG_SHARED) || shmkv__align8_type(eh->type)
		       ? shmkv__align_up(p, 8) : p;
}

static inline size_t shmkv__count(unsigned type, const uint8_t *data, uint64_t size)
{
	switch (type) {
	case SHMKV_TYPE_F32LIST: return (size_t)(size / 4);
	case SHMKV_TYPE_F64LIST:
	case SHMKV_TYPE_I64LIST: return (size_t)(size / 8);
	case SHMKV_TYPE_STRLIST: {
		uint32_t n;
		memcpy(&n, data, 4);
		return n;
	}
	case SHMKV_TYPE_BYTES:
	case SHMKV_TYPE_STRING: return (size_t)size;
	default: return 1;
	}
}

/* Decodes the value of an entry known to be valid (hot path: no checks). */
static SHMKV__HOT void shmkv__entry_value(const shmkv *db, const uint8_t *e, shmkv_value *v)
{
	const shmkv_entry_header *eh = (const shmkv_entry_header *)(const void *)e;
	const uint8_t *p = e + shmkv__value_pos(eh);
	if (eh->flags & SHMKV_EFLAG_SHARED) {
		uint64_t off;
		memcpy(&off, p, 8);
		p = db->base + off;
	}
	v->type = eh->type;
	v->shared = eh->flags & SHMKV_EFLAG_SHARED;
	v->data = p;
	v->size = eh->value_len;
	v->count = shmkv__count(eh->type, p, eh->value_len);
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

/* The entry among a bucket's tag matches whose key equals key, or NULL. */
static SHMKV__HOT const uint8_t *shmkv__bucket_find(const shmkv *db, const uint64_t *bk,
						    uint64_t tag, const void *key, size_t key_len)
{
	unsigned m = shmkv__match(bk, tag);
	while (m) {
		unsigned j = SHMKV__CTZ(m);
		m &= m - 1;
		const uint8_t *e = db->base + ((bk[j] & SHMKV_SLOT_OFF_MASK) << 3);
		const shmkv_entry_header *eh = (const shmkv_entry_header *)(const void *)e;
		if (eh->key_len == key_len &&
		    shmkv__key_eq(e + sizeof(shmkv_entry_header), (const uint8_t *)key, key_len))
			return e;
	}
	return NULL;
}

/* The later buckets of home bucket b, for a key its filter says may have
 * been displaced. Out of line: about 8% of hits and few misses come here, and
 * keeping the loop out of every caller keeps the hot path short. */
static SHMKV__COLD const uint8_t *shmkv__probe_on(const shmkv *db, uint64_t b, uint64_t d,
						  uint64_t tag, const void *key, size_t key_len)
{
	for (; d; d--) {
		if (++b == db->bucket_count)
			b = 0;
		const uint8_t *e = shmkv__bucket_find(db, db->buckets + b * SHMKV_BUCKET_SLOTS, tag,
						      key, key_len);
		if (e)
			return e;
	}
	return NULL;
}

/* The entry of key, or NULL: not found, or key_len > SHMKV_MAX_KEY_LEN
 * (shmkv__miss tells which). Reads the home bucket; later buckets only when
 * the home bucket's filter says a displaced key with this tag may exist
 * (format.h). */
static SHMKV__HOT const uint8_t *shmkv__find(const shmkv *db, const void *key, size_t key_len)
{
	if (SHMKV__UNLIKELY(key_len > SHMKV_MAX_KEY_LEN))
		return NULL;
	uint64_t h = shmkv__hash(db->seed, db->hash_bits, key, key_len);
	uint64_t tag = shmkv__tag(h);
	uint64_t b = shmkv__home(h, db->bucket_count);
	const uint64_t *bk = db->buckets + b * SHMKV_BUCKET_SLOTS;
	const uint8_t *e = shmkv__bucket_find(db, bk, tag, key, key_len);
	if (SHMKV__LIKELY(e != NULL))
		return e;
	uint64_t d = shmkv__displaced(bk, tag, db->max_probe);
	if (SHMKV__LIKELY(d == 0))
		return NULL;
	return shmkv__probe_on(db, b, d, tag, key, key_len);
}

/* Why shmkv__find returned NULL. */
static inline int shmkv__miss(size_t key_len)
{
	return key_len > SHMKV_MAX_KEY_LEN ? SHMKV_EKEYLEN : SHMKV_ENOTFOUND;
}

/* Looks key up. Returns 0 with *out filled, SHMKV_ENOTFOUND, or SHMKV_EKEYLEN. */
static SHMKV__HOT int shmkv_get(const shmkv *db, const void *key, size_t key_len, shmkv_value *out)
{
	const uint8_t *e = shmkv__find(db, key, key_len);
	if (SHMKV__UNLIKELY(e == NULL))
		return shmkv__miss(key_len);
	shmkv__entry_value(db, e, out);
	return 0;
}

/* Typed getters: 0, SHMKV_ENOTFOUND, SHMKV_EKEYLEN, or SHMKV_ETYPE when the
 * stored type differs (nothing is converted). Outputs are untouched on error. */
static SHMKV__HOT int shmkv__get_typed(const shmkv *db, const void *key, size_t key_len,
				   unsigned type, shmkv_value *v)
{
	int err = shmkv_get(db, key, key_len, v);
	if (err)
		return err;
	return v->type == type ? 0 : SHMKV_ETYPE;
}

static SHMKV__HOT int shmkv_get_i64(const shmkv *db, const void *key, size_t key_len, int64_t *out)
{
	shmkv_value v;
	int err = shmkv__get_typed(db, key, key_len, SHMKV_TYPE_I64, &v);
	if (!err)
		memcpy(out, v.data, 8);
	return err;
}

static SHMKV__HOT int shmkv_get_f64(const shmkv *db, const void *key, size_t key_len, double *out)
{
	shmkv_value v;
	int err = shmkv__get_typed(db, key, key_len, SHMKV_TYPE_F64, &v);
	if (!err)
		memcpy(out, v.data, 8);
	return err;
}

static SHMKV__HOT int shmkv_get_bool(const shmkv *db, const void *key, size_t key_len, bool *out)
{
	shmkv_value v;
	int err = shmkv__get_typed(db, key, key_len, SHMKV_TYPE_BOOL, &v);
	if (!err)
		*out = *(const uint8_t *)v.data != 0;
	return err;
}

/* *s is NUL-terminated; *len excludes the NUL (the string may hold NULs). */
static SHMKV__HOT int shmkv_get_str(const shmkv *db, const void *key, size_t key_len,
				const char **s, size_t *len)
{
	shmkv_value v;
	int err = shmkv__get_typed(db, key, key_len, SHMKV_TYPE_STRING, &v);
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
	int err = shmkv__get_typed(db, key, key_len, SHMKV_TYPE_BYTES, &v);
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
	int err = shmkv__get_typed(db, key, key_len, SHMKV_TYPE_F32LIST, &v);
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
	int err = shmkv__get_typed(db, key, key_len, SHMKV_TYPE_F64LIST, &v);
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
	int err = shmkv__get_typed(db, key, key_len, SHMKV_TYPE_I64LIST, &v);
	if (!err) {
		*p = (const int64_t *)v.data;
		*count = v.count;
	}
	return err;
}

/* Views a STRLIST value as a list. Returns 0, or SHMKV_ETYPE with *out empty. */
static inline int shmkv_value_strlist(const shmkv_value *v, shmkv_strlist *out)
{
	if (v->type != SHMKV_TYPE_STRLIST) {
		out->count = 0; /* an empty list, so no caller reads garbage */
		out->ends = NULL;
		out->data = NULL;
		return SHMKV_ETYPE;
	}
	const uint8_t *p = (const uint8_t *)v->data;
	out->count = v->count;
	out->ends = (const uint32_t *)(const void *)(p + 4);
	out->data = (const char *)(p + 4 + 4 * ((uint64_t)v->count + 1));
	return 0;
}

static SHMKV__HOT int shmkv_get_strlist(const shmkv *db, const void *key, size_t key_len,
				    shmkv_strlist *out)
{
	shmkv_value v;
	int err = shmkv__get_typed(db, key, key_len, SHMKV_TYPE_STRLIST, &v);
	if (!err)
		shmkv_value_strlist(&v, out);
	return err;
}

static inline size_t shmkv_strlist_count(const shmkv_strlist *l)
{
	return l->count;
}

/* String i (NUL-terminated) and its length; NULL when i >= count. */
static inline const char *shmkv_strlist_at(const shmkv_strlist *l, size_t i, size_t *len)
{
	if (i >= l->count)
		return NULL;
	if (len)
		*len = l->ends[i + 1] - l->ends[i] - 1;
	return l->data + l->ends[i];
}

/* Name of a value type ("string", "f32list", ...), or "invalid". */
static inline const char *shmkv_type_name(unsigned type)
{
	static const char *const names[] = {"invalid", "bytes",   "string",  "i64",    "bool",
					    "f64",     "f32list", "f64list", "i64list", "strlist"};
	return type <= SHMKV_TYPE_MAX ? names[type] : names[0];
}

/* A decoded entry, as the checked walker sees it. */
typedef struct shmkv__entry {
	const uint8_t *key;
	size_t key_len;
	shmkv_value value;
	uint64_t value_off; /* image offset of the value */
	uint64_t end;       /* image offset just past the entry (8-aligned) */
} shmkv__entry;

/* Checks the value bytes of a type (lengths, NULs, bools, string-list shape). */
static inline int shmkv__value_check(unsigned type, const uint8_t *p, uint64_t len, char *why,
				     size_t why_len)
{
#define SHMKV__BADV(...) shmkv__fail(SHMKV_ECORRUPT, why, why_len, __VA_ARGS__)
	switch (type) {
	case SHMKV_TYPE_BYTES:
	case SHMKV_TYPE_STRING:
		if (p[len] != 0)
			return SHMKV__BADV("%s value is not NUL-terminated", shmkv_type_name(type));
		return 0;
	case SHMKV_TYPE_BOOL:
		if (len != 1 || p[0] > 1)
			return SHMKV__BADV("bool value has length %llu or byte %u",
					   (unsigned long long)len, p[0]);
		return 0;
	case SHMKV_TYPE_I64:
	case SHMKV_TYPE_F64:
		if (len != 8)
			return SHMKV__BADV("%s value has length %llu", shmkv_type_name(type),
					   (unsigned long long)len);
		return 0;
	case SHMKV_TYPE_F32LIST:
		if (len % 4)
			return SHMKV__BADV("f32list length %llu is not a multiple of 4",
					   (unsigned long long)len);
		return 0;
	case SHMKV_TYPE_F64LIST:
	case SHMKV_TYPE_I64LIST:
		if (len % 8)
			return SHMKV__BADV("%s length %llu is not a multiple of 8",
					   shmkv_type_name(type), (unsigned long long)len);
		return 0;
	case SHMKV_TYPE_STRLIST: {
		uint32_t n;
		if (len < 8)
			return SHMKV__BADV("strlist length %llu below 8", (unsigned long long)len);
		memcpy(&n, p, 4);
		if ((uint64_t)n > (len - 8) / 4)
			return SHMKV__BADV("strlist count %u does not fit its %llu bytes", n,
					   (unsigned long long)len);
		uint64_t data_len = len - 4 * ((uint64_t)n + 2);
		const uint8_t *data = p + 4 * ((uint64_t)n + 2);
		uint32_t prev, e;
		memcpy(&prev, p + 4, 4);
		if (prev != 0)
			return SHMKV__BADV("strlist first offset %u is not 0", prev);
		for (uint32_t i = 0; i < n; i++) {
			memcpy(&e, p + 8 + 4 * (uint64_t)i, 4);
			if (e <= prev || e > data_len || data[e - 1] != 0)
				return SHMKV__BADV("strlist string %u has bad end %u", i, e);
			prev = e;
		}
		if (prev != data_len)
			return SHMKV__BADV("strlist data is %llu bytes, strings end at %u",
					   (unsigned long long)data_len, prev);
		return 0;
	}
	default: return SHMKV__BADV("unknown value type %u", type);
	}
#undef SHMKV__BADV
}

/* Decodes the entry at image offset off with every bound checked. */
static inline int shmkv__entry_decode(const shmkv *db, uint64_t off, shmkv__entry *out, char *why,
				      size_t why_len)
{
#define SHMKV__BADE(...) shmkv__fail(SHMKV_ECORRUPT, why, why_len, __VA_ARGS__)
	if (off % 8 || off < db->entries_off || off > db->entries_end - sizeof(shmkv_entry_header))
		return SHMKV__BADE("entry offset %llu outside the entries section",
				   (unsigned long long)off);
	const shmkv_entry_header *eh = (const shmkv_entry_header *)(const void *)(db->base + off);
	if (eh->type < 1 || eh->type > SHMKV_TYPE_MAX)
		return SHMKV__BADE("entry at %llu: unknown type %u", (unsigned long long)off, eh->type);
	if (eh->flags & ~SHMKV_EFLAG_KNOWN)
		return SHMKV__BADE("entry at %llu: unknown flags %x", (unsigned long long)off,
				   eh->flags);
	uint64_t vpos = off + shmkv__value_pos(eh);
	int nul = eh->type == SHMKV_TYPE_BYTES || eh->type == SHMKV_TYPE_STRING;
	uint64_t stored = (uint64_t)eh->value_len + (uint64_t)nul;
	uint64_t voff, end;
	if (eh->flags & SHMKV_EFLAG_SHARED) {
		if (vpos + 8 > db->entries_end)
			return SHMKV__BADE("entry at %llu: value reference runs past the section",
					   (unsigned long long)off);
		memcpy(&voff, db->base + vpos, 8);
		if (voff % 8 || voff < db->values_off || voff > db->values_end ||
		    stored > db->values_end - voff)
			return SHMKV__BADE("entry at %llu: shared value [%llu, +%llu) outside the values "
					   "section", (unsigned long long)off,
					   (unsigned long long)voff, (unsigned long long)stored);
		end = vpos + 8;
	} else {
		if (vpos > db->entries_end || stored > db->entries_end - vpos)
			return SHMKV__BADE("entry at %llu: key of %u and value of %u bytes run past the "
					   "section", (unsigned long long)off, eh->key_len,
					   eh->value_len);
		voff = vpos;
		end = vpos + stored;
	}
	int err = shmkv__value_check(eh->type, db->base + voff, eh->value_len, why, why_len);
	if (err) {
		if (why && why_len) {
			char tmp[160];
			snprintf(tmp, sizeof tmp, "%.*s", (int)sizeof tmp - 1, why); /* cut */
			shmkv__fail(err, why, why_len, "entry at %llu: %s", (unsigned long long)off, tmp);
		}
		return err;
	}
	out->key = db->base + off + sizeof(shmkv_entry_header);
	out->key_len = eh->key_len;
	out->value.type = eh->type;
	out->value.shared = eh->flags & SHMKV_EFLAG_SHARED;
	out->value.data = db->base + voff;
	out->value.size = eh->value_len;
	out->value.count = shmkv__count(eh->type, db->base + voff, eh->value_len);
	out->value_off = voff;
	out->end = shmkv__align_up(end, 8);
	if (out->end > db->entries_end)
		return SHMKV__BADE("entry at %llu: padding runs past the section",
				   (unsigned long long)off);
	return 0;
#undef SHMKV__BADE
}

/* Iteration over all entries, in image order. */
typedef struct shmkv_iter {
	const shmkv *db;
	uint64_t pos;  /* next image offset to look at */
	uint64_t seen; /* entries returned so far */
} shmkv_iter;

static inline void shmkv_iter_init(const shmkv *db, shmkv_iter *it)
{
	it->db = db;
	it->pos = db->entries_off;
	it->seen = 0;
}

/* Next entry: 0 with key and value set, SHMKV_EEND when done, SHMKV_ECORRUPT
 * if the entries section is damaged. */
static inline int shmkv_iter_next(shmkv_iter *it, const void **key, size_t *key_len,
				  shmkv_value *value)
{
	const shmkv *db = it->db;
	if (it->seen == db->entry_count)
		return SHMKV_EEND;
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

#endif /* SHMKV_GET_H */
