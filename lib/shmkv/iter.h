/* shmkv/iter.h - iteration over an image's records (FORMAT.md §18): the
 * live entries, or every record with its expiry.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_ITER_H
#define SHMKV_ITER_H

#include "lookup.h"

/* An iteration: every bucket's records in directory order, buckets in
 * order; through deltas (shmkv_delta_set, shmkv_delta_set2, an attached
 * protocol 2 cache), level by level: the top delta's records, then the
 * lower one's that the top does not hold, then the base's that neither
 * holds (FORMAT.md §19, §19.6). Reads record pos of bucket `bucket - 1` of
 * img, `left` still to read. */
typedef struct shmkv_iter {
	const shmkv *db;
	const shmkv *img; /* the image walked now: db's top delta, its lower one, or db */
	uint64_t pos, seen, bucket; /* seen: records of img passed (returned or skipped) */
	uint32_t left;
	uint32_t expires; /* the last entry returned: its expiry (unix seconds), 0: none */
	int64_t now;      /* live: the clock at init (0: not read, no record expires) */
	int all;          /* every record, expired ones too */
	int level;        /* img's level: 0 the top delta, 1 the lower one, 2 db */
} shmkv_iter;

/* The image of level (0 top, 1 lower, 2 the base) of an iteration of db;
 * NULL where db reads through no such delta. */
static inline const shmkv *shmkv__iter_level(const shmkv *db, int level)
{
	return level == 0 ? db->top : level == 1 ? db->over : db;
}

static inline void shmkv__iter_start(const shmkv *db, shmkv_iter *it, int all)
{
	memset(it, 0, sizeof *it);
	it->db = db;
	while (!shmkv__iter_level(db, it->level))
		it->level++;
	it->img = shmkv__iter_level(db, it->level);
	it->all = all;
	if (!all && (db->expiry || (db->over && db->over->expiry) || (db->top && db->top->expiry)))
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

/* Whether a delta above the iteration's level holds key (an upsert or a
 * tombstone): the record of this level is then not the view's. */
static inline int shmkv__held_above(const shmkv_iter *it, const uint8_t *key, size_t key_len)
{
	if (it->level == 0 || !it->db->over)
		return 0;
	const uint64_t h = shmkv__hash(it->db->seed, it->db->hash_bits, key, key_len);
	for (int l = 0; l < it->level; l++) {
		const shmkv *d = shmkv__iter_level(it->db, l);
		uint64_t off;
		if (d && shmkv__kf_maybe(d, h) && !shmkv__find(d, key, key_len, &off, NULL, NULL, 0))
			return 1;
	}
	return 0;
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
			if (it->level == 2)
				return SHMKV_EEND;
			/* this delta's records done: the next level's */
			do
				it->level++;
			while (!shmkv__iter_level(it->db, it->level));
			it->img = shmkv__iter_level(it->db, it->level);
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
		/* skipped: tombstones but in a delta's every-record walk, a level's
		 * records a delta above it holds, expired ones in a live walk */
		int skip = tomb ? !it->all || db != it->db : shmkv__held_above(it, k, kl);
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

/* The number of entries shmkv_iter_init's iteration yields now (FORMAT.md
 * §18, rule 4: a mapping's size, Python's len): the header's entry_count
 * for an image without EXPIRY read alone (O(1)); else counted by that
 * iteration (O(n) of every level: expiring records, a delta read alone,
 * whose entry_count counts its tombstones, or an image read through
 * deltas). 0 with *n; SHMKV_ECORRUPT (a damaged record; *n untouched). */
static inline int shmkv_count(const shmkv *db, uint64_t *n)
{
	if (!db->over && !db->delta && !db->expiry) {
		*n = db->entry_count;
		return 0;
	}
	shmkv_iter it;
	const void *k;
	size_t kl;
	shmkv_value v;
	uint64_t c = 0;
	int err;
	shmkv_iter_init(db, &it);
	while (!(err = shmkv_iter_next(&it, &k, &kl, &v)))
		c++;
	if (err != SHMKV_EEND)
		return err;
	*n = c;
	return 0;
}

#endif /* SHMKV_ITER_H */
