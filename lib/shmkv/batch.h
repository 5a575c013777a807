/* shmkv/batch.h - batched multi-get with group prefetching.
 * Part of the header-only reader; include <shmkv.h>, not this file.
 *
 * Keys are processed in groups of SHMKV_BATCH_GROUP: hash all and prefetch
 * their buckets, then match tags and prefetch candidate entries, then compare
 * keys. The memory latency of one group's lines overlaps instead of adding up.
 * Anything off the common path (a second candidate, a possibly displaced
 * key) goes through the single-key lookup, so results are exactly those of
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

/* Looks up n keys. For each i, err[i] is what shmkv_get() would return and
 * values[i] is filled when err[i] == 0. Returns the number of keys found. */
static inline size_t shmkv_get_batch(const shmkv *db, const shmkv_key *keys, size_t n,
				     shmkv_value *values, int *err)
{
	size_t found = 0;
	for (size_t base = 0; base < n; base += SHMKV_BATCH_GROUP) {
		size_t m = n - base < SHMKV_BATCH_GROUP ? n - base : SHMKV_BATCH_GROUP;
		const uint64_t *bk[SHMKV_BATCH_GROUP];
		uint64_t tag[SHMKV_BATCH_GROUP];
		const uint8_t *cand[SHMKV_BATCH_GROUP];
		unsigned mask[SHMKV_BATCH_GROUP];
		for (size_t i = 0; i < m; i++) {
			const shmkv_key *k = &keys[base + i];
			if (SHMKV__UNLIKELY(k->len > SHMKV_MAX_KEY_LEN)) {
				bk[i] = NULL;
				continue;
			}
			uint64_t h = shmkv__hash(db->seed, db->hash_bits, k->data, k->len);
			tag[i] = shmkv__tag(h);
			bk[i] = db->buckets + shmkv__home(h, db->bucket_count) * SHMKV_BUCKET_SLOTS;
			__builtin_prefetch(bk[i]);
		}
		for (size_t i = 0; i < m; i++) {
			cand[i] = NULL;
			mask[i] = 0;
			if (!bk[i])
				continue;
			mask[i] = shmkv__match(bk[i], tag[i]);
			if (mask[i]) {
				unsigned j = SHMKV__CTZ(mask[i]);
				cand[i] = db->base + ((bk[i][j] & SHMKV_SLOT_OFF_MASK) << 3);
				__builtin_prefetch(cand[i]);
			}
		}
		for (size_t i = 0; i < m; i++) {
			const shmkv_key *k = &keys[base + i];
			int e;
			if (!bk[i]) {
				e = SHMKV_EKEYLEN;
			} else if (cand[i] && ((const shmkv_entry_header *)(const void *)cand[i])->key_len ==
						      k->len &&
				   shmkv__key_eq(cand[i] + sizeof(shmkv_entry_header),
						 (const uint8_t *)k->data, k->len)) {
				shmkv__entry_value(db, cand[i], &values[base + i]);
				e = 0;
			} else if (!(mask[i] & (mask[i] - 1)) &&
				   !shmkv__displaced(bk[i], tag[i], db->max_probe)) {
				e = SHMKV_ENOTFOUND; /* no other candidate, none displaced */
			} else {
				e = shmkv_get(db, k->data, k->len, &values[base + i]);
			}
			err[base + i] = e;
			found += e == 0;
		}
	}
	return found;
}

#endif /* SHMKV_BATCH_H */
