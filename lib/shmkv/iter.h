/* shmkv/iter.h - iteration over an image's records (FORMAT.md §18): the
 * live entries, or every record with its expiry.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_ITER_H
#define SHMKV_ITER_H

#include "lookup.h"

/* An iteration: every bucket's records in directory order, buckets in
 * order. Reads record pos of bucket `bucket - 1`, `left` still to read. */
typedef struct shmkv_iter {
	const shmkv *db;
	uint64_t pos, seen, bucket; /* seen: records passed (returned or skipped) */
	uint32_t left;
	uint32_t expires; /* the last entry returned: its expiry (unix seconds), 0: none */
	int64_t now;      /* live: the clock at init (0: not read, no record expires) */
	int all;          /* every record, expired ones too */
} shmkv_iter;

/* Starts an iteration over the live entries: those a get finds now (the
 * clock read once, here, only for an image with EXPIRY; a pinned one is
 * honoured). */
static inline void shmkv_iter_init(const shmkv *db, shmkv_iter *it)
{
	memset(it, 0, sizeof *it);
	it->db = db;
	if (db->expiry)
		it->now = shmkv__now(db);
}

/* Starts an iteration over every record, expired ones too (dump, tools). */
static inline void shmkv_iter_init_all(const shmkv *db, shmkv_iter *it)
{
	memset(it, 0, sizeof *it);
	it->db = db;
	it->all = 1;
}

/* When the entry last returned expires (unix seconds; 0: never). */
static inline uint32_t shmkv_iter_expires(const shmkv_iter *it)
{
	return it->expires;
}

/* Next entry: 0, SHMKV_EEND, or SHMKV_ECORRUPT (the next record is damaged:
 * every later call returns it too). Each record is decoded with verify's
 * rules (its value deep); a live iteration skips an expired record before
 * it reads its value, as a get does. */
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
		const int skip = !it->all && shmkv__expires_passed(db, r.expires, &it->now);
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
