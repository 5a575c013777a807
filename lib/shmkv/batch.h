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

/* Filter words (8 bytes each) of 32 KiB: what a core's L1 holds */
#define SHMKV__KF_CACHED_WORDS 4096

#ifndef SHMKV_BATCH_GROUP
#define SHMKV_BATCH_GROUP 16
#endif

typedef struct shmkv_key {
	const void *data;
	size_t len;
} shmkv_key;

/* What a batch's first two passes leave its third to do for a key: nothing
 * (settled: absent), the home bucket's scan (directory compared), the walk
 * to the buckets after it, the whole hot get (damage: it says so), the
 * checked get (a key the first pass did not hash), or, read through
 * deltas, the deltas first (a key a delta's filter lets through). */
enum { SHMKV__B_DONE, SHMKV__B_HOME, SHMKV__B_WALK, SHMKV__B_AGAIN, SHMKV__B_COLD,
       SHMKV__B_OVER };

/* Looks up n keys: err[i] is what shmkv_get() would return, values[i] set
 * when 0; returns the keys found. over: db is read through its deltas
 * (db->over set; a constant at each call, so that the batch without deltas
 * keeps its code). One key's damage costs that key alone
 * (FORMAT.md §18). Per group, hash and request both lines of
 * every home bucket; through deltas, hash and request each key's filter
 * word, then test the filters and request the home bucket's lines, but for
 * a key a delta's filter lets through (few keys) the bucket of the first
 * delta that may hold it instead (the top's, else the lower's: FORMAT.md
 * §19.6; the deltas share the base's hash, §19.4), so that a key a delta
 * decides costs no base line; then compare each home bucket's tag
 * directory, which settles a key with no candidate there and no displaced keys of its tag
 * announced (absent), and request what the others need next: the entry of
 * an OUT record that matches, or, no tag matching and displaced keys
 * announced, the next bucket's lines; then resolve the others as the
 * single get does, from the compared directory (shmkv__get_home) or the
 * walk (shmkv__get_walk), their lines now on their way, and a key a
 * filter let through as the single get does (shmkv__through, then, if no
 * delta holds it, the base's hot get). The clock is read once a call, when
 * first needed (FORMAT.md §17). */
static inline __attribute__((always_inline)) size_t
shmkv__batch_run(const shmkv *db, const shmkv_key *keys, size_t n, shmkv_value *values, int *err,
		 int over)
{
	size_t found = 0;
	int64_t now_ = 0, *now = &now_;
	/* a top's filter of more words than L1 holds is requested with the
	 * lower's; a smaller one (a few recent changes) stays in the cache */
	const uint8_t *tkf = over && db->top && db->top->kf_words > SHMKV__KF_CACHED_WORDS
				     ? db->top->kf
				     : NULL;
	const uint64_t tkf_words = tkf ? db->top->kf_words : 0;
	for (size_t base = 0; base < n; base += SHMKV_BATCH_GROUP) {
		size_t m = n - base < SHMKV_BATCH_GROUP ? n - base : SHMKV_BATCH_GROUP;
		const uint8_t *bk[SHMKV_BATCH_GROUP];
		uint64_t hash[SHMKV_BATCH_GROUP], home[SHMKV_BATCH_GROUP], dis[SHMKV_BATCH_GROUP];
		unsigned mask[SHMKV_BATCH_GROUP];
		unsigned char nrec[SHMKV_BATCH_GROUP], state[SHMKV_BATCH_GROUP];
		for (size_t i = 0; i < m; i++) {
			const shmkv_key *k = &keys[base + i];
			bk[i] = NULL;
			state[i] = SHMKV__B_COLD;
			if (SHMKV__UNLIKELY(k->len >= db->bound_key_len))
				continue; /* too long, or a test hash: the checked path */
			hash[i] = shmkv__hash64(db->seed, k->data, k->len);
			if (over) {
				/* the lower's filter word requested, tested in
				 * the next pass: a load here would hold up the
				 * requests of the keys after it */
				__builtin_prefetch(db->over->kf +
						   8 * shmkv__kf_word(hash[i], db->over->kf_words));
				if (tkf)
					__builtin_prefetch(tkf + 8 * shmkv__kf_word(hash[i], tkf_words));
				state[i] = SHMKV__B_OVER;
				continue;
			}
			home[i] = shmkv__home(hash[i], db->bucket_count);
			bk[i] = shmkv__bucket(db, home[i]);
			__builtin_prefetch(bk[i]);
			__builtin_prefetch(bk[i] + 64);
		}
		for (size_t i = 0; over && i < m; i++) {
			if (state[i] != SHMKV__B_OVER)
				continue;
			if (SHMKV__LIKELY(!shmkv__over_maybe(db, hash[i]))) {
				home[i] = shmkv__home(hash[i], db->bucket_count);
				bk[i] = shmkv__bucket(db, home[i]);
				__builtin_prefetch(bk[i]);
				__builtin_prefetch(bk[i] + 64);
				continue;
			}
			const shmkv *d =
				db->top && shmkv__kf_maybe(db->top, hash[i]) ? db->top : db->over;
			const uint8_t *dk = shmkv__bucket(d, shmkv__home(hash[i], d->bucket_count));
			__builtin_prefetch(dk);
			__builtin_prefetch(dk + 64);
		}
		for (size_t i = 0; i < m; i++) {
			if (!bk[i])
				continue; /* the checked get, or the deltas first */
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
			case SHMKV__B_OVER:
				e = shmkv__through(db, k->data, k->len, hash[i], 0, v, now, NULL, 0);
				if (e == SHMKV__NEXT) /* a filter's false "maybe" */
					e = shmkv__get_fast(db, k->data, k->len, hash[i],
							    shmkv__home(hash[i], db->bucket_count), 0,
							    v, now);
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

static inline size_t shmkv_get_batch(const shmkv *db, const shmkv_key *keys, size_t n,
				     shmkv_value *values, int *err)
{
	if (SHMKV__UNLIKELY(db->over != NULL))
		return shmkv__batch_run(db, keys, n, values, err, 1);
	return shmkv__batch_run(db, keys, n, values, err, 0);
}

#endif /* SHMKV_BATCH_H */
