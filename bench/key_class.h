/* key_class.h - where a key of an image lives: in its home bucket or
 * displaced to a later one: the one rule of the latency phase (latency.cc)
 * and class_probe.c. */
#ifndef SHMKV_BENCH_KEY_CLASS_H
#define SHMKV_BENCH_KEY_CLASS_H

#include <shmkv.h>

/* 1 when key's entry lies in its home bucket, 0 when it was displaced, -1
 * when db does not hold key. shmkv_find_record gives the key's record in
 * INDEX, which lies in one bucket's 128 bytes (FORMAT.md §6.1, §6.3). */
static inline int bench_key_at_home(const shmkv *db, const void *key, size_t key_len)
{
	const shmkv_image_header *h = shmkv_header(db);
	uint64_t off = 0;
	if (shmkv_find_record(db, key, key_len, &off, NULL) != 0)
		return -1;
	const uint64_t b = shmkv_home_bucket(shmkv_key_hash(h->hash_seed, h->hash_bits, key,
							    key_len),
					     h->bucket_count);
	return (off - h->sections[0].offset) / SHMKV_BUCKET_BYTES == b;
}

#endif
