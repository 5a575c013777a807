/* shmkv/iter.h - iteration over an image's records (FORMAT.md §18): the
 * live entries, or every record with its expiry.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_ITER_H
#define SHMKV_ITER_H

#include "lookup.h"

/* An iteration: every bucket's records in directory order, buckets in
 * order; through a delta (shmkv_delta_set), the delta's records first, then
 * the base's that the delta does not hold (FORMAT.md §19). Reads record pos
 * of bucket `bucket - 1` of img, `left` still to read. */
typedef struct shmkv_iter {
	const shmkv *db;
	const shmkv *img; /* the image walked now: db, or first db's delta */
	uint64_t pos, seen, bucket; /* seen: records of img passed (returned or skipped) */
	uint32_t left;
	uint32_t expires; /* the last entry returned: its expiry (unix seconds), 0: none */
	int64_t now;      /* live: the clock at init (0: not read, no record expires) */
	int all;          /* every record, expired ones too */
} shmkv_iter;

static inline void shmkv__iter_start(const shmkv *db, shmkv_iter *it, int all)
{
	memset(it, 0, sizeof *it);
	it->db = db;
	it->img = db->over ? db->over : db;
	it->all = all;
	if (!all && (db->expiry || (db->over && db->over->expiry)))
		it->now = shmkv__now(db);
}

/* Starts an iteration over the live entries: those a get finds now (the
 * clock read once, here, only for an image with EXPIRY; a pinned one is
 * honoured). A delta read alone: its live upserts. */
static inline void shmkv_iter_init(const shmkv *db, shmkv_iter *it)
{
	shmkv__iter_start(db, it, 0);
}

/* Starts an iteration over every record, expired ones too (dump, tools);
 * a delta read alone: its tombstones too, as values of type
 * SHMKV_TYPE_TOMBSTONE (no bytes). */
static inline void shmkv_iter_init_all(const shmkv *db, shmkv_iter *it)
{
	shmkv__iter_start(db, it, 1);
}

/* When the entry last returned expires (unix seconds; 0: never). */
static inline uint32_t shmkv_iter_expires(const shmkv_iter *it)
{
	return it->expires;
}

/* Whether the delta db reads through holds key (an upsert or a tombstone):
 * the base's record is then not the view's. */
static inline int shmkv__over_holds(const shmkv *db, const uint8_t *key, size_t key_len)
{
	uint64_t off;
	return shmkv__kf_maybe(db->over, shmkv__hash(db->seed, db->hash_bits, key, key_len)) &&
	       !shmkv__find(db->over, key, key_len, &off, NULL, NULL, 0);
}

/* Next entry: 0, SHMKV_EEND, or SHMKV_ECORRUPT (the next record is damaged:
 * every later call returns it too). Each record is decoded with verify's
 * rules (its value deep); a live iteration skips an expired record before
 * it reads its value, as a get does. */
static inline int shmkv_iter_next(shmkv_iter *it, const void **key, size_t *key_len,
				  shmkv_value *value)
{
	for (;;) {
		const shmkv *db = it->img;
		if (it->seen == db->entry_count) {
			if (db == it->db)
				return SHMKV_EEND;
			it->img = it->db; /* the delta's records done: the base's */
			it->pos = it->seen = it->bucket = it->left = 0;
			continue;
		}
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
		if (!shmkv__rec_decode(bk, bk[0], shmkv__dir_off(bk, (unsigned)it->pos), db->delta,
				       &r))
			return SHMKV_ECORRUPT;
		const uint8_t *k, *e = NULL;
		size_t kl;
		shmkv_value v;
		memset(&v, 0, sizeof v);
		if (r.kind & SHMKV_REC_OUT) {
			shmkv__entry ent;
			memset(&ent, 0, sizeof ent); /* GCC 12 -O2 cannot see decode fills it */
			int err = shmkv__entry_decode(db, r.unit << 3, &ent, NULL, 0);
			if (err)
				return err;
			if (!(r.kind & SHMKV_REC_TOMB) != (ent.value.type != SHMKV_TYPE_TOMBSTONE))
				return SHMKV_ECORRUPT; /* a tombstone's entry, or a value's */
			e = db->base + (r.unit << 3);
			k = ent.key;
			kl = ent.key_len;
		} else {
			k = bk + r.key_pos;
			kl = r.key_len;
		}
		const int tomb = (r.kind & SHMKV_REC_TOMB) != 0;
		/* skipped: tombstones but in a delta's every-record walk, the base's
		 * records the delta holds, expired ones in a live walk */
		int skip = tomb ? !it->all || db != it->db
				: db == it->db && it->db->over && shmkv__over_holds(it->db, k, kl);
		skip = skip || (!tomb && !it->all && shmkv__expires_passed(db, r.expires, &it->now));
		if (tomb)
			v.data = k + kl;
		else if (!skip) {
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
