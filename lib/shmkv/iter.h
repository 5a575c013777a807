/* shmkv/iter.h - iteration over an image's records (FORMAT.md §18): the
 * live entries, or every record with its expiry.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_ITER_H
#define SHMKV_ITER_H

#include "lookup.h"

/* An iteration: the records of every bucket in directory order, buckets in
 * index order. Reads record `pos` of bucket `bucket - 1`, `left` records
 * still to read there. */
typedef struct shmkv_iter {
	const shmkv *db;
	uint64_t pos;     /* the next record's index (directory order) in bucket `bucket - 1` */
	uint64_t seen;    /* records passed so far (returned or skipped as expired) */
	uint64_t bucket;  /* the next bucket to enter */
	uint32_t left;    /* records still to read in the current bucket */
	uint32_t expires; /* the last entry returned: its expiry (unix seconds), 0: none */
	int64_t now;      /* live iteration of an image with expiry: the clock at init;
			     0: every record is returned */
} shmkv_iter;

/* Starts an iteration over the live entries: those a get finds at the
 * moment of this call (the clock is read once, here, and only for an image
 * whose header says EXPIRY; a pinned clock, shmkv_set_clock, is honoured).
 * An expired entry is absent from iteration as it is from a get. */
static inline void shmkv_iter_init(const shmkv *db, shmkv_iter *it)
{
	memset(it, 0, sizeof *it);
	it->db = db;
	if (db->expiry)
		it->now = shmkv__now(db);
}

/* Starts an iteration over every record, expired ones too (for dump,
 * inspection and tools): shmkv_iter_expires says when each expires. */
static inline void shmkv_iter_init_all(const shmkv *db, shmkv_iter *it)
{
	memset(it, 0, sizeof *it);
	it->db = db;
}

/* When the entry the last shmkv_iter_next returned expires (unix seconds;
 * FORMAT.md §17), 0 when it does not. */
static inline uint32_t shmkv_iter_expires(const shmkv_iter *it)
{
	return it->expires;
}

/* Next entry: 0 with key and value set, SHMKV_EEND when done, or
 * SHMKV_ECORRUPT when the next record is damaged (every later call returns
 * it too). Each record is decoded with every rule of verify's decode (its
 * value deep: a string list's strings too); a live iteration skips a
 * record that has expired before it decodes its value, as a get does. */
static inline int shmkv_iter_next(shmkv_iter *it, const void **key, size_t *key_len,
				  shmkv_value *value)
{
	const shmkv *db = it->db;
	for (;;) {
		if (it->seen == db->entry_count)
			return SHMKV_EEND;
		while (!it->left) {
			if (it->bucket >= db->bucket_count)
				return SHMKV_ECORRUPT; /* fewer records than entry_count */
			it->left = shmkv__bucket(db, it->bucket)[0];
			if (it->left > SHMKV_MAX_RECORDS)
				return SHMKV_ECORRUPT;
			it->pos = 0;
			it->bucket++;
		}
		const uint8_t *bk = shmkv__bucket(db, it->bucket - 1);
		shmkv__rec r;
		if (!shmkv__rec_decode(bk, bk[0], shmkv__dir_off(bk, (unsigned)it->pos), &r))
			return SHMKV_ECORRUPT;
		const uint8_t *k, *e = NULL;
		size_t kl;
		if (r.kind & SHMKV_REC_OUT) {
			shmkv__entry ent;
			memset(&ent, 0, sizeof ent); /* GCC 12 -O2 cannot see decode fills it */
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
		const int skip = it->now && r.expires && it->now >= (int64_t)r.expires;
		shmkv_value v;
		if (!skip) {
			int err = shmkv__rec_value(db, bk, &r, e, SHMKV__SHAPE_DEEP, &v, NULL, 0);
			if (err)
				return err;
		}
		it->pos++;
		it->left--;
		it->seen++;
		if (skip)
			continue;
		*key = k;
		*key_len = kl;
		*value = v;
		it->expires = r.expires;
		return 0;
	}
}

#endif /* SHMKV_ITER_H */
