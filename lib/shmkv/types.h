/* shmkv/types.h - the value types (FORMAT.md §8): one row per type, and the
 * one check of a value's bytes that every path applies.
 * Part of the header-only reader; include <shmkv.h>, not this file.
 *
 * Everything that depends on a value's type reads it from the row: the
 * entry layout (alignment, the NUL stored after text), the shape check of
 * the lookup, of iteration and of verify, the builder's sizing and checks,
 * and shmctl's type names. Adding a type is a new format version (FORMAT.md
 * §15): a row here, a getter in get.h, the docs and lib/format.json. */
#ifndef SHMKV_TYPES_H
#define SHMKV_TYPES_H

#include <stdint.h>
#include <string.h>

#include "errors.h"
#include "format.h"
#include "probe.h"
#include "utf8.h"

/* A value, pointing straight into the image (valid until shmkv_close). */
typedef struct shmkv_value {
	uint32_t type;    /* enum shmkv_type */
	uint32_t shared;  /* 1 when the value is deduplicated (stored once, shared) */
	const void *data; /* bytes/string: NUL-terminated; numbers and lists: 8-aligned */
	size_t size;      /* bytes, without the NUL of bytes/string */
	size_t count;     /* elements: list length, string length, 1 for scalars */
} shmkv_value;

/* A string list, iterated without allocation (shmkv_strlist_at checks each
 * string, so a damaged list never yields bytes outside it). */
typedef struct shmkv_strlist {
	const uint32_t *ends; /* ends[i+1] is one past string i's NUL, from data */
	const char *data;
	size_t count;
	size_t size; /* bytes at data */
} shmkv_strlist;

/* How a type's bytes are checked and counted. */
enum shmkv_shape {
	SHMKV_SHAPE_TEXT = 1,   /* any length and a NUL after it; count: the length */
	SHMKV_SHAPE_FIXED = 2,  /* exactly 1 << elem_shift bytes, byte 0 at most max_byte; count 1 */
	SHMKV_SHAPE_ARRAY = 3,  /* a multiple of 1 << elem_shift bytes; count: the elements */
	SHMKV_SHAPE_STRLIST = 4 /* u32 count, u32 ends[count + 1], NUL-terminated strings */
};

/* One value type. */
typedef struct shmkv_type_desc {
	const char *name;   /* "string", ...: what shmctl and the builder's input call it */
	uint8_t align;      /* alignment of an inline value in its entry: 1 or 8 */
	uint8_t nul;        /* bytes stored after the value: 1 (a NUL, not in value_len) or 0 */
	uint8_t shape;      /* enum shmkv_shape */
	uint8_t elem_shift; /* FIXED: log2 of the length; ARRAY: log2 of the element size */
	uint8_t max_byte;   /* FIXED: the largest first byte (bool: 1; else 255) */
	uint8_t utf8;       /* 1: its text (a string, each string of a list) is strict UTF-8 */
} shmkv_type_desc;

/* The table, indexed by type number; row 0 is no type (every field 0, name
 * "invalid"). */
static const shmkv_type_desc shmkv__types[SHMKV_TYPE_MAX + 1] = {
	{"invalid", 0, 0, 0, 0, 0, 0},
	/* SHMKV_TYPE_BYTES */ {"bytes", 1, 1, SHMKV_SHAPE_TEXT, 0, 0, 0},
	/* SHMKV_TYPE_STRING */ {"string", 1, 1, SHMKV_SHAPE_TEXT, 0, 0, 1},
	/* SHMKV_TYPE_I64 */ {"i64", 8, 0, SHMKV_SHAPE_FIXED, 3, 255, 0},
	/* SHMKV_TYPE_BOOL */ {"bool", 1, 0, SHMKV_SHAPE_FIXED, 0, 1, 0},
	/* SHMKV_TYPE_F64 */ {"f64", 8, 0, SHMKV_SHAPE_FIXED, 3, 255, 0},
	/* SHMKV_TYPE_F32LIST */ {"f32list", 8, 0, SHMKV_SHAPE_ARRAY, 2, 0, 0},
	/* SHMKV_TYPE_F64LIST */ {"f64list", 8, 0, SHMKV_SHAPE_ARRAY, 3, 0, 0},
	/* SHMKV_TYPE_I64LIST */ {"i64list", 8, 0, SHMKV_SHAPE_ARRAY, 3, 0, 0},
	/* SHMKV_TYPE_STRLIST */ {"strlist", 8, 0, SHMKV_SHAPE_STRLIST, 2, 0, 1},
};

/* The row of a type, or NULL for a number that is no type. */
static inline const shmkv_type_desc *shmkv_type_desc_of(unsigned type)
{
	return type >= 1 && type <= SHMKV_TYPE_MAX ? &shmkv__types[type] : NULL;
}

/* Name of a value type ("string", "f32list", ...), or "invalid". */
static inline const char *shmkv_type_name(unsigned type)
{
	return shmkv__types[type <= SHMKV_TYPE_MAX ? type : 0].name;
}

/* The type a name stands for (shmkv_type_name's inverse), or 0. */
static inline unsigned shmkv_type_by_name(const char *name)
{
	for (unsigned t = 1; t <= SHMKV_TYPE_MAX; t++)
		if (!strcmp(name, shmkv__types[t].name))
			return t;
	return 0;
}

/* 1 when an inline value of this type starts 8-aligned in its entry. */
static inline int shmkv__align8_type(unsigned type)
{
	return shmkv__types[type <= SHMKV_TYPE_MAX ? type : 0].align == 8;
}

/* Bytes a value of value_len bytes takes where it is stored: with the NUL
 * of text types. */
static inline uint64_t shmkv__stored_len(unsigned type, uint64_t value_len)
{
	return value_len + shmkv__types[type <= SHMKV_TYPE_MAX ? type : 0].nul;
}

/* 1 when p[0..n) is ASCII: a word at a time, no read past p + n. 8 to 16
 * bytes (most short text) are two words that may overlap, without a loop:
 * every get of a string runs this on bytes still on their way from memory,
 * and the loop's instructions waiting with them cost independent gets on
 * AMD EPYC about a fifth of their time (bench/RESULTS.md, "The single get
 * on AMD EPYC"). */
static inline int shmkv__ascii(const uint8_t *p, uint64_t n)
{
	const uint64_t hi = UINT64_C(0x8080808080808080);
	uint64_t w = 0;
	if (n - 8 <= 8) { /* 8..16 (n below 8 wraps past 8) */
		uint64_t a, b;
		memcpy(&a, p, 8);
		memcpy(&b, p + n - 8, 8);
		w = a | b;
	} else if (n > 16) {
		for (uint64_t i = 0; i + 8 < n; i += 8) {
			memcpy(&w, p + i, 8);
			if (w & hi)
				return 0;
		}
		memcpy(&w, p + n - 8, 8);
	} else if (n >= 4) {
		uint32_t a, b;
		memcpy(&a, p, 4);
		memcpy(&b, p + n - 4, 4);
		w = a | b;
	} else {
		for (uint64_t i = 0; i < n; i++)
			w |= p[i];
	}
	return !(w & hi);
}

/* 1 when p[0..n) is strict UTF-8 (shmkv__ascii first: most text is). */
static inline int shmkv__utf8_ok(const uint8_t *p, uint64_t n)
{
	return SHMKV__LIKELY(shmkv__ascii(p, n)) || shmkv_utf8_valid(p, (size_t)n);
}

/* shmkv__value_shape's mode bits */
#define SHMKV__SHAPE_DEEP 1u  /* a string list's strings too (iteration, verify, the builder) */
#define SHMKV__SHAPE_ASCII 2u /* the hot get: text must be ASCII, else its checked path decides */

/* The shape check (FORMAT.md §8), the one every path applies: p holds len
 * bytes of a value of type (known to be 1..SHMKV_TYPE_MAX), and for text the
 * NUL after them. A string is strict UTF-8 (every get checks it, as it
 * checks the NUL; SHMKV__SHAPE_ASCII: the hot get's word-at-a-time check
 * alone, which leaves other text to its checked path, so that the hot path
 * makes no call). SHMKV__SHAPE_DEEP: a string list's ends, NULs and UTF-8
 * too; without it only its count is checked against its length (the
 * lookup: O(1), shmkv_strlist_at checks each string as it is read). Returns
 * 0 with *count (elements: the length of text, 1 for fixed values, the list
 * length) or SHMKV_ECORRUPT with the reason in why (when why is not NULL:
 * on the hot path the messages compile away). */
static inline __attribute__((always_inline)) int
shmkv__value_shape(unsigned type, const uint8_t *p, uint64_t len, unsigned mode, size_t *count,
		   char *why, size_t why_len)
{
#define SHMKV__BADS(...)                                                                           \
	return why ? shmkv__fail(SHMKV_ECORRUPT, why, why_len, __VA_ARGS__) : SHMKV_ECORRUPT
	const shmkv_type_desc *t = &shmkv__types[type];
	const unsigned long long n64 = (unsigned long long)len; /* messages only */
	switch (__builtin_expect(t->shape, SHMKV_SHAPE_TEXT)) { /* strings first */
	case SHMKV_SHAPE_TEXT:
		if (p[len] != 0)
			SHMKV__BADS("%s value is not NUL-terminated", t->name);
		if (t->utf8 && !(mode & SHMKV__SHAPE_ASCII ? shmkv__ascii(p, len)
							   : shmkv__utf8_ok(p, len)))
			SHMKV__BADS("%s value is not valid UTF-8", t->name);
		*count = (size_t)len;
		return 0;
	case SHMKV_SHAPE_FIXED:
		if (len != (UINT64_C(1) << t->elem_shift) || p[0] > t->max_byte)
			SHMKV__BADS("%s value has length %llu or first byte %u", t->name, n64,
				    len ? p[0] : 0u);
		*count = 1;
		return 0;
	case SHMKV_SHAPE_ARRAY:
		if (len & ((UINT64_C(1) << t->elem_shift) - 1))
			SHMKV__BADS("%s length %llu is not a multiple of %u", t->name, n64,
				    1u << t->elem_shift);
		*count = (size_t)(len >> t->elem_shift);
		return 0;
	default: { /* SHMKV_SHAPE_STRLIST */
		uint32_t n;
		if (len < 8)
			SHMKV__BADS("strlist length %llu below 8", n64);
		memcpy(&n, p, 4);
		if ((uint64_t)n > (len - 8) / 4)
			SHMKV__BADS("strlist count %u does not fit its %llu bytes", n, n64);
		*count = n;
		if (!(mode & SHMKV__SHAPE_DEEP))
			return 0;
		uint64_t data_len = len - 4 * ((uint64_t)n + 2);
		const uint8_t *data = p + 4 * ((uint64_t)n + 2);
		uint32_t prev, e;
		memcpy(&prev, p + 4, 4);
		if (prev != 0)
			SHMKV__BADS("strlist first offset %u is not 0", prev);
		for (uint32_t i = 0; i < n; i++) {
			memcpy(&e, p + 8 + 4 * (uint64_t)i, 4);
			if (e <= prev || e > data_len || data[e - 1] != 0)
				SHMKV__BADS("strlist string %u has bad end %u", i, e);
			if (!shmkv__utf8_ok(data + prev, e - prev - 1))
				SHMKV__BADS("strlist string %u is not valid UTF-8", i);
			prev = e;
		}
		if (prev != data_len)
			SHMKV__BADS("strlist data is %llu bytes, strings end at %u",
				    (unsigned long long)data_len, prev);
		return 0;
	}
	}
#undef SHMKV__BADS
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

static inline size_t shmkv_strlist_count(const shmkv_strlist *l)
{
	return l->count;
}

/* String i (NUL-terminated) and its length without the NUL. NULL when
 * i >= count (*len untouched), or when string i is damaged (*len 0): its
 * ends do not increase, run past the list, its last byte is not NUL, or it
 * is not UTF-8 (an image shmkv_verify refuses). Never a pointer or a length
 * outside the list. */
static inline const char *shmkv_strlist_at(const shmkv_strlist *l, size_t i, size_t *len)
{
	if (i >= l->count)
		return NULL;
	uint32_t s, e;
	memcpy(&s, l->ends + i, 4);
	memcpy(&e, l->ends + i + 1, 4);
	if (s >= e || e > l->size || l->data[e - 1] != 0 ||
	    !shmkv__utf8_ok((const uint8_t *)l->data + s, e - s - 1)) {
		if (len)
			*len = 0;
		return NULL;
	}
	if (len)
		*len = e - s - 1;
	return l->data + s;
}

#endif /* SHMKV_TYPES_H */
