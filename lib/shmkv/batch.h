/* shmkv/batch.h - batched multi-get with group prefetching.
 * Part of the header-only reader; include <shmkv.h>, not this file.
 *
 * Keys are processed in groups of SHMKV_BATCH_GROUP, in passes, so that the
 * memory latency of one group's lines overlaps instead of adding up. Each
 * key is resolved by the single get's own steps (lookup.h), so results are
 * exactly those of shmkv_get(). */
#ifndef SHMKV_BATCH_H
#define SHMKV_BATCH_H

#include "lookup.h"

#ifndef SHMKV_BATCH_GROUP
#define SHMKV_BATCH_GROUP 16
#endif

typedef struct shmkv_key {
	const void *data;
	size_t len;
} shmkv_key;

/* What a batch's second pass leaves its third to do for a key: nothing
 * (settled: absent), the home bucket's scan (directory compared), the walk
 * to the buckets after it, the whole hot get (damage: it says so), or the
 * checked get (a key the first pass did not hash). */
enum { SHMKV__B_DONE, SHMKV__B_HOME, SHMKV__B_WALK, SHMKV__B_AGAIN, SHMKV__B_COLD };

/* Looks up n keys in db's own image (a delta set on db is the caller's:
 * shmkv__batch_over): err[i] is what shmkv_get() would return, values[i]
 * set when 0; returns the keys found. hashes: each key's hash when the
 * caller has it (shmkv__batch_over), else NULL. One key's damage costs that key alone
 * (FORMAT.md §18). Per group, hash and request both lines of
 * every home bucket; then compare each home bucket's tag directory, which
 * settles a key with no candidate there and no displaced keys of its tag
 * announced (absent), and request what the others need next: the entry of
 * an OUT record that matches, or, no tag matching and displaced keys
 * announced, the next bucket's lines; then resolve the others as the
 * single get does, from the compared directory (shmkv__get_home) or the
 * walk (shmkv__get_walk), their lines now on their way. *now: the call's
 * clock, read once when first needed (the batch through deltas passes its
 * own, so that its every group and level shares one reading). */
static inline size_t shmkv__batch_base(const shmkv *db, const shmkv_key *keys, size_t n,
				       const uint64_t *hashes, shmkv_value *values, int *err,
				       int64_t *now)
{
	size_t found = 0;
	for (size_t base = 0; base < n; base += SHMKV_BATCH_GROUP) {
		size_t m = n - base < SHMKV_BATCH_GROUP ? n - base : SHMKV_BATCH_GROUP;
		const uint8_t *bk[SHMKV_BATCH_GROUP];
		uint64_t hash[SHMKV_BATCH_GROUP], home[SHMKV_BATCH_GROUP], dis[SHMKV_BATCH_GROUP];
		unsigned mask[SHMKV_BATCH_GROUP];
		unsigned char nrec[SHMKV_BATCH_GROUP], state[SHMKV_BATCH_GROUP];
		for (size_t i = 0; i < m; i++) {
			const shmkv_key *k = &keys[base + i];
			bk[i] = NULL;
			if (SHMKV__UNLIKELY(k->len >= db->bound_key_len))
				continue; /* too long, or a test hash: the checked path */
			hash[i] = hashes ? hashes[base + i] : shmkv__hash64(db->seed, k->data, k->len);
			home[i] = shmkv__home(hash[i], db->bucket_count);
			bk[i] = shmkv__bucket(db, home[i]);
			__builtin_prefetch(bk[i]);
			__builtin_prefetch(bk[i] + 64);
		}
		for (size_t i = 0; i < m; i++) {
			state[i] = SHMKV__B_COLD;
			if (!bk[i])
				continue;
			state[i] = SHMKV__B_AGAIN;
			const unsigned nr = bk[i][0];
			if (SHMKV__UNLIKELY(nr > SHMKV_MAX_RECORDS))
				continue; /* damage: the lookup says so */
			const uint64_t tag = shmkv__tag(hash[i]);
			unsigned mt = mask[i] = shmkv__match(bk[i], nr, tag);
			nrec[i] = (unsigned char)nr; /* read once: the mask is of these records */
			state[i] = SHMKV__B_HOME;
			if (!mt) {
				/* no candidate at home: absent, unless displaced keys
				 * of its tag are announced; then the next bucket,
				 * where nearly all of them are */
				if (!(dis[i] = shmkv__displaced(bk[i], tag, db->max_probe))) {
					state[i] = SHMKV__B_DONE;
					err[base + i] = SHMKV_ENOTFOUND;
					continue;
				}
				const uint8_t *nx = bk[i] + SHMKV_BUCKET_BYTES;
				if (nx == shmkv__bucket(db, db->bucket_count))
					nx = shmkv__bucket(db, 0);
				__builtin_prefetch(nx);
				__builtin_prefetch(nx + 64);
				state[i] = SHMKV__B_WALK;
			}
			for (; mt; mt &= mt - 1) {
				shmkv__rec r;
				const uint8_t *c;
				const unsigned pos = shmkv__dir_off(bk[i], SHMKV__CTZ(mt));
				if (!(bk[i][pos] & SHMKV_REC_OUT)) /* inline: in the lines requested */
					continue;
				if (shmkv__rec_decode(bk[i], nr, pos, 0, &r) && shmkv__key_fits(db, 0) &&
				    shmkv__unit_entry(db, r.unit, shmkv__key_lim(db, 0), &c)) {
					__builtin_prefetch(c);
					break;
				}
			}
		}
		for (size_t i = 0; i < m; i++) {
			const shmkv_key *k = &keys[base + i];
			shmkv_value *v = &values[base + i];
			int e;
			switch (state[i]) {
			case SHMKV__B_DONE:
				continue;
			case SHMKV__B_HOME: /* the directory compared above */
				e = shmkv__get_home(db, k->data, k->len, shmkv__tag(hash[i]), home[i],
						     bk[i], nrec[i], mask[i], 0, v, now);
				break;
			case SHMKV__B_WALK:
				e = shmkv__get_walk(db, k->data, k->len, shmkv__tag(hash[i]), home[i],
						     dis[i], 0, v, now);
				break;
			case SHMKV__B_AGAIN:
				e = shmkv__get_fast(db, k->data, k->len, hash[i], home[i], 0, v, now);
				break;
			default:
				e = shmkv__get_cold_at(db, k->data, k->len, 0, v, now, NULL, 0);
			}
			err[base + i] = e;
			found += e == 0;
		}
	}
	return found;
}

/* Hashes keys[i] for i < m that the hot path takes (the others: the
 * checked get) into hash[i] and requests their filter words (FORMAT.md
 * §19.3: the top delta's and the lower one's). */
static inline void shmkv__batch_filters(const shmkv *db, const shmkv_key *keys, size_t m,
					uint64_t *hash)
{
	const shmkv *d = db->over, *t = db->top;
	for (size_t i = 0; i < m; i++) {
		if (SHMKV__UNLIKELY(keys[i].len >= db->bound_key_len))
			continue;
		hash[i] = shmkv__hash64(db->seed, keys[i].data, keys[i].len);
		if (t)
			__builtin_prefetch(t->kf + 8 * shmkv__kf_word(hash[i], t->kf_words));
		__builtin_prefetch(d->kf + 8 * shmkv__kf_word(hash[i], d->kf_words));
	}
}

/* Requests a bucket pair: the home bucket of hash h in image img. */
static inline void shmkv__batch_request(const shmkv *img, uint64_t h)
{
	const uint8_t *bk = shmkv__bucket(img, shmkv__home(h, img->bucket_count));
	__builtin_prefetch(bk);
	__builtin_prefetch(bk + 64);
}

/* A batch read through deltas (FORMAT.md §19, §19.6), per group: its keys
 * were hashed and their filter words (the top delta's and the lower one's:
 * small sections) requested a group before (shmkv__batch_filters); test
 * them, requesting the base bucket of each key neither filter lets through
 * (most keys) and, for the others, the bucket of the delta that first
 * may hold the key (the deltas share the base's hash, §19.4); hash the
 * next group and request its filter words;
 * ask the deltas for this group's keys their filters let through (the top
 * first: an upsert or a tombstone answers), requesting the base bucket of
 * each they do not hold; the rest go, with their hashes, to the base's
 * passes above as one batch, their lines on their way. A key a delta
 * decides costs no base line. A key's answer is the single get's
 * (shmkv__through, then the base's get). */
static inline size_t shmkv__batch_over(const shmkv *db, const shmkv_key *keys, size_t n,
				       shmkv_value *values, int *err)
{
	size_t found = 0;
	int64_t now = 0;
	const shmkv *d = db->over, *t = db->top;
	uint64_t hashes[2][SHMKV_BATCH_GROUP]; /* this group's and the next one's */
	shmkv__batch_filters(db, keys, n < SHMKV_BATCH_GROUP ? n : SHMKV_BATCH_GROUP, hashes[0]);
	for (size_t base = 0, g = 0; base < n; base += SHMKV_BATCH_GROUP, g ^= 1) {
		const size_t m = n - base < SHMKV_BATCH_GROUP ? n - base : SHMKV_BATCH_GROUP;
		const uint64_t *hash = hashes[g];
		uint64_t rest_hash[SHMKV_BATCH_GROUP];
		shmkv_key rest[SHMKV_BATCH_GROUP];
		shmkv_value rv[SHMKV_BATCH_GROUP];
		int re[SHMKV_BATCH_GROUP];
		unsigned char at[SHMKV_BATCH_GROUP], ask[SHMKV_BATCH_GROUP];
		size_t nr = 0, na = 0;
		for (size_t i = 0; i < m; i++) {
			const shmkv_key *k = &keys[base + i];
			if (SHMKV__UNLIKELY(k->len >= db->bound_key_len)) {
				ask[na++] = (unsigned char)i; /* the checked get */
				continue;
			}
			const int tm = t && shmkv__kf_maybe(t, hash[i]), lm = shmkv__kf_maybe(d, hash[i]);
			if (SHMKV__LIKELY(!(tm | lm))) {
				shmkv__batch_request(db, hash[i]);
				at[nr] = (unsigned char)i;
				rest_hash[nr] = hash[i];
				rest[nr++] = *k;
				continue;
			}
			/* the top's bucket where its filter lets the key through
			 * (it mostly holds it then: the lower's would go unused),
			 * else the lower's */
			shmkv__batch_request(tm ? t : d, hash[i]);
			ask[na++] = (unsigned char)i;
		}
		if (n - base > SHMKV_BATCH_GROUP) { /* the next group's filter words */
			const size_t next = n - base - SHMKV_BATCH_GROUP;
			shmkv__batch_filters(db, keys + base + SHMKV_BATCH_GROUP,
					     next < SHMKV_BATCH_GROUP ? next : SHMKV_BATCH_GROUP,
					     hashes[g ^ 1]);
		}
		for (size_t j = 0; j < na; j++) {
			const size_t i = ask[j];
			const shmkv_key *k = &keys[base + i];
			int e;
			if (SHMKV__UNLIKELY(k->len >= db->bound_key_len)) {
				e = shmkv__get_cold_at(db, k->data, k->len, 0, &values[base + i], &now,
						       NULL, 0);
			} else {
				e = shmkv__through(db, k->data, k->len, hash[i], 0, &values[base + i],
						   &now, NULL, 0);
				if (e == SHMKV__NEXT) {
					shmkv__batch_request(db, hash[i]);
					at[nr] = (unsigned char)i;
					rest_hash[nr] = hash[i];
					rest[nr++] = *k;
					continue;
				}
			}
			err[base + i] = e;
			found += e == 0;
		}
		/* the keys no delta holds: the base alone answers */
		found += shmkv__batch_base(db, rest, nr, rest_hash, rv, re, &now);
		for (size_t j = 0; j < nr; j++) {
			err[base + at[j]] = re[j];
			if (!re[j])
				values[base + at[j]] = rv[j];
		}
	}
	return found;
}

static inline size_t shmkv_get_batch(const shmkv *db, const shmkv_key *keys, size_t n,
				     shmkv_value *values, int *err)
{
	if (SHMKV__UNLIKELY(db->over != NULL))
		return shmkv__batch_over(db, keys, n, values, err);
	int64_t now = 0; /* the clock, read at most once a batch (FORMAT.md §17) */
	return shmkv__batch_base(db, keys, n, NULL, values, err, &now);
}

#endif /* SHMKV_BATCH_H */
