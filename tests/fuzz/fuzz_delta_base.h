/* fuzz_delta_base.h - the images fuzz_delta and fuzz_delta_fixsum read a
 * fuzzed delta against, built the same way by the targets and by the corpus
 * generator (fuzz_corpus.c), so that the seed deltas name them exactly
 * (FORMAT.md §19.1: base_checksum, base_size). Two bases: "a" with the
 * default 64-bit hash (the hot get's path) and "c" with 4 hash bits (every
 * key collides with others: the checked get's path); for each a lower
 * delta, the fixed one a fuzzed delta is read over as a top (§19.6). */
#ifndef SHMKV_FUZZ_DELTA_BASE_H
#define SHMKV_FUZZ_DELTA_BASE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "shmkv_build.h"

enum { FUZZ_DELTA_BASES = 2 };
#define FUZZ_DELTA_BITS(which) ((which) ? 4u : 64u)
/* a time after every live expiry of the seeds, before the far ones (2100):
 * the targets pin the readers' clock to it, so an answer never depends on
 * when it runs */
#define FUZZ_DELTA_NOW INT64_C(2000000000)
#define FUZZ_DELTA_FAR INT64_C(4102444800)

/* A key longer than a bucket holds: its records are OUT (FORMAT.md §6.2),
 * a tombstone of it an OUT tombstone (§19.2). */
static inline int fuzz_delta_long_key(char *k, size_t cap, int i)
{
	return snprintf(k, cap, "a-key-longer-than-a-bucket-holds-%0120d:%d", 0, i);
}

static inline shmkv_builder *fuzz_delta_builder(int which)
{
	shmkv_build_options o;
	shmkv_builder *b;
	if (shmkv_build_options_init(&o) != 0)
		return NULL;
	o.created = 1;
	o.hash_bits = FUZZ_DELTA_BITS(which);
	o.fixed |= SHMKV_OPT_CREATED | SHMKV_OPT_HASH_BITS;
	snprintf(o.name, sizeof o.name, "fuzz-delta-%c", which ? 'c' : 'a');
	o.fixed |= SHMKV_OPT_NAME;
	return shmkv_builder_new(&o, &b) == 0 ? b : NULL;
}

/* One record of every type under keys TYPE:i; the value varies with v (a
 * base's records: v 0; an upsert's: another v). */
static inline int fuzz_delta_add_types(shmkv_builder *b, int i, int v)
{
	static const char *const names[9] = {"bytes", "str",  "i64",  "bool", "f64",
					     "f32l",  "f64l", "i64l", "strl"};
	const float f32[] = {0.25f, -1.5f, (float)v};
	const double f64[] = {1e300, -0.0, v + 0.5};
	const int64_t i64[] = {INT64_MIN, v, INT64_MAX};
	const char *strs[] = {"a", "", v ? "changed" : "hello"};
	const size_t lens[] = {1, 0, strlen(strs[2])};
	int r = 0;
	for (int t = 0; t < 9; t++) {
		char k[64];
		size_t kl = (size_t)snprintf(k, sizeof k, "%s:%d", names[t], i);
		switch (t) {
		case 0: r |= shmkv_builder_add_bytes(b, k, kl, "\0\1\2zz", 5 - (v & 1)); break;
		case 1:
			r |= shmkv_builder_add_str(b, k, kl, v ? "other value" : "shared value",
						   v ? 11 : 12);
			break;
		case 2: r |= shmkv_builder_add_i64(b, k, kl, -i - v); break;
		case 3: r |= shmkv_builder_add_bool(b, k, kl, (i + v) & 1); break;
		case 4: r |= shmkv_builder_add_f64(b, k, kl, i * 0.5 + v); break;
		case 5: r |= shmkv_builder_add_f32list(b, k, kl, f32, 3); break;
		case 6: r |= shmkv_builder_add_f64list(b, k, kl, f64, 3); break;
		case 7: r |= shmkv_builder_add_i64list(b, k, kl, i64, 3); break;
		default: r |= shmkv_builder_add_strlist(b, k, kl, strs, lens, 3); break;
		}
	}
	return r;
}

/* Records k:i and long keys with an expiry: none, expired (1) or far. */
static inline int fuzz_delta_add_expiring(shmkv_builder *b, int from, int to, int v)
{
	int r = 0;
	for (int i = from; i < to; i++) {
		char k[200], val[300];
		int kl = i % 4 == 0 ? fuzz_delta_long_key(k, sizeof k, i)
				    : snprintf(k, sizeof k, "k:%d", i);
		memset(val, 'a' + v % 26, sizeof val);
		r |= shmkv_builder_set_expires(b, i % 3 == 0 ? 0 : i % 3 == 1 ? 1 : FUZZ_DELTA_FAR);
		r |= shmkv_builder_add_str(b, k, (size_t)kl, val, i % 2 ? 3 : sizeof val);
	}
	r |= shmkv_builder_set_expires(b, 0);
	return r;
}

/* b written to path unless r (the adds' errors) says otherwise; b freed.
 * 0, or the builder's error (said on stderr). */
static inline int fuzz_delta_finish(shmkv_builder *b, int r, const char *path)
{
	if (!r)
		r = shmkv_builder_finish(b, path, NULL);
	if (r)
		fprintf(stderr, "fuzz_delta: %s: %s\n", path, shmkv_builder_error(b));
	shmkv_builder_free(b);
	return r;
}

/* The base `which` at path. 0, or the builder's error. */
static inline int fuzz_delta_build_base(const char *path, int which)
{
	shmkv_builder *b = fuzz_delta_builder(which);
	if (!b)
		return -1;
	int r = 0;
	for (int i = 0; i < (which ? 3 : 5); i++)
		r |= fuzz_delta_add_types(b, i, 0);
	r |= fuzz_delta_add_expiring(b, 0, which ? 6 : 12, 0);
	return fuzz_delta_finish(b, r, path);
}

/* The lower delta of base `which` (at base_path), at path: an upsert of a
 * key the base holds and of one it does not, tombstones inline and OUT,
 * an expired upsert hiding the base's record, one that expires far. */
static inline int fuzz_delta_build_lower(const char *path, const char *base_path, int which)
{
	shmkv_builder *b = fuzz_delta_builder(which);
	if (!b)
		return -1;
	char k[200];
	int r = shmkv_builder_set_delta(b, base_path, NULL);
	r |= shmkv_builder_add_str(b, "str:1", 5, "lower value", 11);
	r |= shmkv_builder_add_i64(b, "new:L", 5, 7);
	r |= shmkv_builder_remove(b, "i64:2", 5);
	r |= shmkv_builder_remove(b, k, (size_t)fuzz_delta_long_key(k, sizeof k, 0));
	r |= shmkv_builder_set_expires(b, 1);
	r |= shmkv_builder_add_i64(b, "k:5", 3, 5);
	r |= shmkv_builder_set_expires(b, FUZZ_DELTA_FAR);
	r |= shmkv_builder_add_bool(b, "bool:1", 6, 1);
	return fuzz_delta_finish(b, r, path);
}

#endif /* SHMKV_FUZZ_DELTA_BASE_H */
