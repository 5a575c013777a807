/* shmkv/batch.h - batched multi-get with group prefetching.
 * Part of the header-only reader; include <shmkv.h>, not this file.
 *
 * Keys are processed in groups of SHMKV_BATCH_GROUP: hash all and prefetch
 * their buckets, then match tags and prefetch candidate entries, then compare
 * keys. The memory latency of one group's lines overlaps instead of adding up.
 * Anything off the common path (a second candidate, a possibly displaced
 * key, a long key, damage) goes through the checked single-key lookup, and
 * the common path makes shmkv_get()'s checks, so results are exactly those of
 * shmkv_get(). */
#ifndef SHMKV_BATCH_H
#define SHMKV_BATCH_H

#include "get.h"

#ifndef SHMKV_BATCH_GROUP
#define SHMKV_BATCH_GROUP 16
#endif

typedef struct shmkv_key {
	const void *data;
	size_t len;
} shmkv_key;

/* What a v2 batch's second pass leaves its third to do for a key: nothing
 * (settled: absent), the home bucket's scan (directory compared), the walk
 * to the buckets after it, the whole hot get (damage: it says so), or the
 * checked get (a key the first pass did not hash). */
enum { SHMKV__B2_DONE, SHMKV__B2_HOME, SHMKV__B2_WALK, SHMKV__B2_AGAIN, SHMKV__B2_COLD };

/* shmkv_get_batch of a v2 image: per group, hash and request both lines of
 * every home bucket; then compare each home bucket's tag directory, which
 * settles a key with no candidate there and no displaced keys of its tag
 * announced (absent), and request what the others need next: the entry of
 * an OUT record that matches, or, no tag matching and displaced keys
 * announced, the next bucket's lines; then resolve the others as the
 * single get does, from the compared directory (shmkv__get2_home) or the
 * walk (shmkv__get2_walk), their lines now on their way. The clock is read
 * once per batch at most. */
static inline size_t shmkv__get_batch2(const shmkv *db, const shmkv_key *keys, size_t n,
				       shmkv_value *values, int *err)
{
	size_t found = 0;
	int64_t now = 0;
	for (size_t base = 0; base < n; base += SHMKV_BATCH_GROUP) {
		size_t m = n - base < SHMKV_BATCH_GROUP ? n - base : SHMKV_BATCH_GROUP;
		const uint8_t *bk[SHMKV_BATCH_GROUP];
		uint64_t hash[SHMKV_BATCH_GROUP], home[SHMKV_BATCH_GROUP], dis[SHMKV_BATCH_GROUP];
		unsigned mask[SHMKV_BATCH_GROUP];
		unsigned char nrec[SHMKV_BATCH_GROUP], state[SHMKV_BATCH_GROUP];
		for (size_t i = 0; i < m; i++) {
			const shmkv_key *k = &keys[base + i];
			bk[i] = NULL;
			if (SHMKV__UNLIKELY(k->len >= db->v2_bound_key_len))
				continue; /* too long, or a test hash: the checked path */
			hash[i] = shmkv__hash64(db->seed, k->data, k->len);
			home[i] = shmkv__home(hash[i], db->bucket_count);
			bk[i] = shmkv__bucket2(db, home[i]);
			__builtin_prefetch(bk[i]);
			__builtin_prefetch(bk[i] + 64);
		}
		for (size_t i = 0; i < m; i++) {
			state[i] = SHMKV__B2_COLD;
			if (!bk[i])
				continue;
			state[i] = SHMKV__B2_AGAIN;
			const unsigned nr = bk[i][0];
			if (SHMKV__UNLIKELY(nr > SHMKV_V2_MAX_RECORDS))
				continue; /* damage: the lookup says so */
			const uint64_t tag = shmkv__tag(hash[i]);
			unsigned mt = mask[i] = shmkv__match2(bk[i], nr, tag);
			nrec[i] = (unsigned char)nr; /* read once: the mask is of these records */
			state[i] = SHMKV__B2_HOME;
			if (!mt) {
				/* no candidate at home: absent, unless displaced keys
				 * of its tag are announced; then the next bucket,
				 * where nearly all of them are */
				if (!(dis[i] = shmkv__displaced2(bk[i], tag, db->max_probe))) {
					state[i] = SHMKV__B2_DONE;
					err[base + i] = SHMKV_ENOTFOUND;
					continue;
				}
				const uint8_t *nx = bk[i] + SHMKV_V2_BUCKET_BYTES;
				if (nx == shmkv__bucket2(db, db->bucket_count))
					nx = shmkv__bucket2(db, 0);
				__builtin_prefetch(nx);
				__builtin_prefetch(nx + 64);
				state[i] = SHMKV__B2_WALK;
			}
			for (; mt; mt &= mt - 1) {
				shmkv__rec r;
				const uint8_t *c;
				const unsigned pos = shmkv__rec_off2(bk[i], SHMKV__CTZ(mt));
				if (!(bk[i][pos] & SHMKV_REC_OUT)) /* inline: in the lines requested */
					continue;
				if (shmkv__rec_decode(bk[i], nr, pos, &r) && shmkv__key_fits(db, 0) &&
				    shmkv__slot_entry(db, r.unit, shmkv__key_lim(db, 0), &c)) {
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
			case SHMKV__B2_DONE:
				continue;
			case SHMKV__B2_HOME: /* the directory compared above */
				e = shmkv__get2_home(db, k->data, k->len, shmkv__tag(hash[i]), home[i],
						     bk[i], nrec[i], mask[i], 0, v, &now);
				break;
			case SHMKV__B2_WALK:
				e = shmkv__get2_walk(db, k->data, k->len, shmkv__tag(hash[i]), home[i],
						     dis[i], 0, v, &now);
				break;
			case SHMKV__B2_AGAIN:
				e = shmkv__get2_fast(db, k->data, k->len, hash[i], home[i], 0, v, &now);
				break;
			default:
				e = shmkv__get2_cold(db, k->data, k->len, 0, v, NULL, 0);
			}
			err[base + i] = e;
			found += e == 0;
		}
	}
	return found;
}

/* Looks up n keys. For each i, err[i] is what shmkv_get() would return (0,
 * SHMKV_ENOTFOUND, SHMKV_EKEYLEN or SHMKV_ECORRUPT) and values[i] is filled
 * when err[i] == 0. Returns the number of keys found. The checks are
 * shmkv_get's: a damaged entry costs its key SHMKV_ECORRUPT, not the batch. */
static inline size_t shmkv_get_batch(const shmkv *db, const shmkv_key *keys, size_t n,
				     shmkv_value *values, int *err)
{
	if (db->version == SHMKV_FORMAT_V2)
		return shmkv__get_batch2(db, keys, n, values, err);
	size_t found = 0;
	for (size_t base = 0; base < n; base += SHMKV_BATCH_GROUP) {
		size_t m = n - base < SHMKV_BATCH_GROUP ? n - base : SHMKV_BATCH_GROUP;
		const uint64_t *bk[SHMKV_BATCH_GROUP];
		uint64_t hash[SHMKV_BATCH_GROUP];
		const uint8_t *cand[SHMKV_BATCH_GROUP];
		unsigned mask[SHMKV_BATCH_GROUP];
		for (size_t i = 0; i < m; i++) {
			const shmkv_key *k = &keys[base + i];
			if (SHMKV__UNLIKELY(k->len >= db->bound_key_len)) { /* no get probes here */
				bk[i] = NULL; /* too long, or a test hash: the checked path */
				hash[i] = 0;  /* unread; GCC -O2 cannot see that (n = 1 warned) */
				continue;
			}
			hash[i] = shmkv__hash64(db->seed, k->data, k->len);
			bk[i] = db->buckets + shmkv__home(hash[i], db->bucket_count) * SHMKV_BUCKET_SLOTS;
			__builtin_prefetch(bk[i]);
		}
		for (size_t i = 0; i < m; i++) {
			cand[i] = NULL;
			mask[i] = 0;
			if (!bk[i])
				continue;
			mask[i] = shmkv__match(bk[i], shmkv__tag(hash[i]));
			if (mask[i]) {
				/* header and key inside ENTRIES, else left to the checked path */
				const uint8_t *c;
				if (SHMKV__LIKELY(shmkv__slot_entry(db, bk[i][SHMKV__CTZ(mask[i])],
								    shmkv__key_lim(db, keys[base + i].len),
								    &c))) {
					cand[i] = c;
					__builtin_prefetch(c);
				}
			}
		}
		for (size_t i = 0; i < m; i++) {
			const shmkv_key *k = &keys[base + i];
			shmkv_value *v = &values[base + i];
			const uint8_t *c = cand[i];
			int e = SHMKV__NEXT;
			if (!bk[i]) {
				e = shmkv__get_cold(db, k->data, k->len, 0, SHMKV__REHASH, v, NULL, 0);
			} else if (c && shmkv__entry_key_is(c, k->data, k->len)) {
				e = shmkv__hit(db, c, k->len, 0, v);
			}
			if (e == SHMKV__NEXT) {
				if (!cand[i] == !mask[i] && !(mask[i] & (mask[i] - 1)) &&
				    !shmkv__displaced(bk[i], shmkv__tag(hash[i]), db->max_probe))
					e = SHMKV_ENOTFOUND; /* no other candidate, none displaced */
				else /* the single-key lookup (it checks its candidates again) */
					e = shmkv_get(db, k->data, k->len, v);
			}
			err[base + i] = e;
			found += e == 0;
		}
	}
	return found;
}

#endif /* SHMKV_BATCH_H */
