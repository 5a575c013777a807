/* shmkv/get.h - the public lookups: shmkv_get, the typed getters, string
 * lists, the diagnosing get, expiry. Each goes down one step, to lookup.h.
 * Part of the header-only reader; include <shmkv.h>, not this file.
 * Lookups make no system call and no allocation (an image with expiry
 * reads the clock, a vDSO call, at most once a get). */
#ifndef SHMKV_GET_H
#define SHMKV_GET_H

#include <stdbool.h>
#include <string.h>

#include "lookup.h"

#if SHMKV_USDT
static SHMKV__COLD int shmkv__get_traced(const shmkv *db, const void *key, size_t key_len,
					 unsigned want, shmkv_value *v);
#define SHMKV__GET_SLOW shmkv__get_traced
#else
#define SHMKV__GET_SLOW shmkv__get_checked
#endif

/* A lookup as a value of type want (0: any): the hot get, else (a key over
 * 65535 bytes, a test hash, traced get probes) the checked path. */
static SHMKV__HOT int shmkv__get_as(const shmkv *db, const void *key, size_t key_len,
				    unsigned want, shmkv_value *v)
{
	if (SHMKV__LIKELY(key_len < db->fast_key_len))
		return shmkv__get_hot(db, key, key_len, want, v);
	return SHMKV__GET_SLOW(db, key, key_len, want, v);
}

#if SHMKV_USDT
/* A get while a get probe is traced (trace.h): the untraced lookup on a copy
 * of the handle, timed, then the probe. */
static SHMKV__COLD int shmkv__get_traced(const shmkv *db, const void *key, size_t key_len,
					 unsigned want, shmkv_value *v)
{
	if (!db->usdt_gets)
		return shmkv__get_checked(db, key, key_len, want, v);
	shmkv untraced = *db;
	untraced.fast_key_len = db->bound_key_len;
	untraced.usdt_gets = 0;
	uint64_t t0 = shmkv__usdt_ns();
	int err = shmkv__get_as(&untraced, key, key_len, want, v);
	uint64_t ns = shmkv__usdt_ns() - t0;
	if (err == 0) {
		SHMKV__USDT(get_hit, 4, db, key, key_len, ns);
		return err;
	}
	/* expired: the image says some record expires, yet the get found
	 * nothing (a second, checked lookup: only while traced) */
	uint64_t off = 0;
	uint32_t exp = 0;
	int expired = err == SHMKV_ENOTFOUND && db->expiry &&
		      !shmkv__find(db, key, key_len, &off, &exp, NULL, 0) && exp;
	SHMKV__USDT(get_miss, 6, db, key, key_len, err, ns, expired);
	return err;
}
#endif

/* Looks key up (shmkv.h: return values); *out is untouched on error. */
static SHMKV__HOT int shmkv_get(const shmkv *db, const void *key, size_t key_len, shmkv_value *out)
{
	return shmkv__get_as(db, key, key_len, 0, out);
}

/* shmkv_get by the checked path alone, with the reason in why (tools). */
static inline int shmkv_get_diag(const shmkv *db, const void *key, size_t key_len,
				 shmkv_value *out, char *why, size_t why_len)
{
	if (why && why_len)
		why[0] = 0;
	return shmkv__get_cold(db, key, key_len, 0, out, why, why_len);
}

/* Typed getters: as shmkv_get, and SHMKV_ETYPE for another type (nothing
 * is converted); outputs untouched on error. */
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

/* A string list (the get checks its count; shmkv_strlist_at each string). */
static SHMKV__HOT int shmkv_get_strlist(const shmkv *db, const void *key, size_t key_len,
				    shmkv_strlist *out)
{
	shmkv_value v;
	int err = shmkv__get_as(db, key, key_len, SHMKV_TYPE_STRLIST, &v);
	if (!err)
		err = shmkv_value_strlist(&v, out); /* 0: the get checked the count */
	return err;
}

/* Pins the "now" of db's expiry checks (unix seconds; 0: the real clock),
 * for tests and replays; not safe against gets on the same handle. */
static inline void shmkv_set_clock(shmkv *db, int64_t now)
{
	db->clock_pin = now;
}

/* When key's entry expires (unix seconds; 0: never), expired or not;
 * through deltas, the record that decides (FORMAT.md §19.6): the top
 * delta's, else the lower one's, else the base's (a tombstone:
 * SHMKV_ENOTFOUND). */
static inline int shmkv_get_expires(const shmkv *db, const void *key, size_t key_len,
				    uint32_t *expires)
{
	uint64_t off = 0;
	if (db->over && key_len <= SHMKV_MAX_KEY_LEN) {
		const uint64_t h = shmkv__hash(db->seed, db->hash_bits, key, key_len);
		const shmkv *levels[2] = {db->top, db->over};
		for (int i = 0; i < 2; i++) {
			const shmkv *d = levels[i];
			if (!d || !shmkv__kf_maybe(d, h))
				continue;
			uint32_t x = 0;
			int err = shmkv__find(d, key, key_len, &off, &x, NULL, 0);
			if (err == SHMKV_ENOTFOUND)
				continue;
			if (!err && (d->base[off] & SHMKV_REC_TOMB))
				err = SHMKV_ENOTFOUND;
			if (!err && expires)
				*expires = x;
			return err;
		}
	}
	uint32_t x = 0;
	int err = shmkv__find(db, key, key_len, &off, &x, NULL, 0);
	if (!err && (db->base[off] & SHMKV_REC_TOMB)) /* a delta read alone */
		return SHMKV_ENOTFOUND;
	if (!err && expires)
		*expires = x;
	return err;
}

#endif /* SHMKV_GET_H */
