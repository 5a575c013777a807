/* shmkv/delta.h - delta images (FORMAT.md §19): what a delta names, and
 * reading an image through one.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_DELTA_H
#define SHMKV_DELTA_H

#include "lookup.h"

/* A delta's identity (FORMAT.md §19.1): the base it applies to, and its
 * place in its chain. */
typedef struct shmkv_delta_id {
	uint64_t base_checksum; /* the base's header_checksum */
	uint64_t base_size;     /* the base's file_size */
	uint64_t prev;          /* header_checksum of the delta it follows; 0: the first */
	uint64_t seq;           /* its place in its chain, >= 1 */
} shmkv_delta_id;

/* 1 for a delta image, 0 for an image. */
static inline int shmkv_is_delta(const shmkv *db)
{
	return db->delta != 0;
}

/* The image's header_checksum: what a delta names it by, as base or prev. */
static inline uint64_t shmkv_checksum(const shmkv *db)
{
	return shmkv__hdr(db)->header_checksum;
}

/* A delta's identity: 0, or SHMKV_EBASE for an image that is no delta. */
static inline int shmkv_delta_id_of(const shmkv *db, shmkv_delta_id *out)
{
	if (!db->delta)
		return SHMKV_EBASE;
	const uint64_t *r = shmkv__hdr(db)->reserved;
	out->base_checksum = r[SHMKV_DELTA_BASE_CHECKSUM];
	out->base_size = r[SHMKV_DELTA_BASE_SIZE];
	out->prev = r[SHMKV_DELTA_PREV];
	out->seq = r[SHMKV_DELTA_SEQ];
	return 0;
}

/* Whether delta applies to db (FORMAT.md §19.4's table): 0, or
 * SHMKV_EBASE with why naming the check that failed. */
static inline int shmkv__delta_applies(const shmkv *db, const shmkv *delta, char *why,
				       size_t why_len)
{
#define SHMKV__BADB(...) shmkv__fail(SHMKV_EBASE, why, why_len, __VA_ARGS__)
	shmkv_delta_id id;
	if (db->delta)
		return SHMKV__BADB("a delta cannot be read through another delta; merge them "
				   "with 'shmctl image apply BASE DELTA... --delta -o MERGED'");
	if (shmkv_delta_id_of(delta, &id))
		return SHMKV__BADB("an image (not a delta) given as the delta");
	if (id.base_checksum != shmkv_checksum(db) || id.base_size != db->size)
		return SHMKV__BADB("delta applies to the image with checksum %016llx (%llu bytes), "
				   "not this one, %016llx (%llu bytes)",
				   (unsigned long long)id.base_checksum,
				   (unsigned long long)id.base_size,
				   (unsigned long long)shmkv_checksum(db), (unsigned long long)db->size);
	if (id.prev)
		return SHMKV__BADB("delta %llu of its chain follows delta %016llx: merge the "
				   "chain from its first with 'shmctl image apply BASE DELTA... "
				   "--delta -o MERGED' and read through that",
				   (unsigned long long)id.seq, (unsigned long long)id.prev);
	if (delta->seed != db->seed || delta->hash_bits != db->hash_bits)
		return SHMKV__BADB("delta hashes with seed %016llx and %u bits, the image with "
				   "%016llx and %u", (unsigned long long)delta->seed,
				   delta->hash_bits, (unsigned long long)db->seed, db->hash_bits);
	return 0;
#undef SHMKV__BADB
}

/* Reads db through two deltas of it, as a protocol 2 cache with a top
 * overlay is read (lib/PROTOCOL.md, "Protocol 2"; FORMAT.md §19.6): a key
 * top holds (an upsert or a tombstone) is top's answer, else a key lower
 * holds is lower's, else db's; from now on for every get, typed get, batch,
 * diagnosing get, shmkv_get_expires, iteration and shmkv_count on db. Each
 * must apply to db itself (FORMAT.md §19.4; top is not a delta of lower).
 * top NULL: lower alone (shmkv_delta_set); both NULL: db alone again.
 * lower and top stay open, and db's, while set. 0; SHMKV_EBASE (why says
 * which delta and which check); -EINVAL: top without lower (one delta is
 * always the lower one), or an attached handle (a loader's cache serves its
 * changes itself). db is unchanged on error. Not safe against gets on db at
 * the same time. */
static inline int shmkv_delta_set2(shmkv *db, const shmkv *lower, const shmkv *top, char *why,
				   size_t why_len)
{
	if (why && why_len)
		why[0] = 0;
	if (db->ctl)
		return shmkv__fail(-EINVAL, why, why_len,
				   "an attached cache serves its changes itself");
	if (top && !lower)
		return shmkv__fail(-EINVAL, why, why_len,
				   "a top delta without a lower one: read one delta as the lower");
	int err = lower ? shmkv__delta_applies(db, lower, why, why_len) : 0;
	if (err)
		return top ? shmkv__prefix(err, why, why_len, "lower delta: ") : err;
	err = top ? shmkv__delta_applies(db, top, why, why_len) : 0;
	if (err)
		return shmkv__prefix(err, why, why_len, "top delta: ");
	db->over = lower;
	db->top = top;
	return 0;
}

/* Reads db through delta (FORMAT.md §19): from now on every get, typed
 * get, batch, diagnosing get, shmkv_get_expires, iteration and shmkv_count
 * on db answer as db with delta's changes. delta stays open, and db's,
 * while set; NULL reads db alone again. shmkv_delta_set2(db, delta, NULL,
 * why, why_len): 0; SHMKV_EBASE when delta does not apply to db (§19.4: why
 * names both checksums); -EINVAL for an attached handle; db is unchanged on
 * error. Not safe against gets on db at the same time. */
static inline int shmkv_delta_set(shmkv *db, const shmkv *delta, char *why, size_t why_len)
{
	return shmkv_delta_set2(db, delta, NULL, why, why_len);
}

#endif /* SHMKV_DELTA_H */
