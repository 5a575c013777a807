/* shmkv/tools.h - the image format's rules as functions, for programs that
 * build or inspect images (the builder, shmctl image inspect, a second
 * builder). Each wraps the reader's own internal rule, so a builder that
 * calls them writes images every reader finds its keys in. lib/README.md
 * documents each; FORMAT.md §5-9 states the rules.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_TOOLS_H
#define SHMKV_TOOLS_H

#include "verify.h"

/* Key hash (FORMAT.md §5): XXH3-64 with the seed; hash_bits < 64 only in
 * test images. */
static inline uint64_t shmkv_key_hash(uint64_t seed, unsigned hash_bits, const void *key,
				      size_t key_len)
{
	return shmkv__hash(seed, hash_bits, key, key_len);
}

/* Home bucket: the high bits of hash * bucket_count. */
static inline uint64_t shmkv_home_bucket(uint64_t hash, uint64_t bucket_count)
{
	return shmkv__home(hash, bucket_count);
}

/* The 16-bit tag: the hash's low 16 bits, 1 when they are 0. */
static inline uint64_t shmkv_key_tag(uint64_t hash)
{
	return shmkv__tag(hash);
}

/* The tag's bit in a bucket's 48-bit displaced-key filter (bit i: bit i % 8
 * of bucket byte 2 + i / 8). */
static inline unsigned shmkv_filter_index(uint64_t tag)
{
	return shmkv__filter_index(tag);
}

/* A delta's key filter (FORMAT.md §19.3): the word of a key's hash among
 * words, and the three bits it sets there. */
static inline uint64_t shmkv_delta_filter_word(uint64_t hash, uint64_t words)
{
	return shmkv__kf_word(hash, words);
}

static inline uint64_t shmkv_delta_filter_mask(uint64_t hash)
{
	return shmkv__kf_mask(hash);
}

/* A record's directory entry, (tag << 7 | off) & 0xffff (off < 128). */
static inline unsigned shmkv_dir_entry(uint64_t tag, unsigned off)
{
	return (shmkv__dir_tag(tag) | (off & SHMKV_DIR_OFF_MASK)) & 0xffffu;
}

/* Where the record area of a bucket of n records starts: 8 + 2n. */
static inline unsigned shmkv_dir_end(unsigned n)
{
	return shmkv__dir_end(n);
}

/* The end of a record of kind (a type, or SHMKV_REC_OUT, | SHMKV_REC_EXPIRES)
 * at bucket offset pos, past the NUL of text; an inline record's key and
 * value positions (0 for OUT). It fits its bucket when the end is <= 128. */
static inline unsigned shmkv_record_span(unsigned pos, unsigned kind, unsigned key_len,
					 unsigned value_len, unsigned *key_pos, unsigned *val_pos)
{
	if (kind & SHMKV_REC_OUT) {
		*key_pos = *val_pos = 0;
		return pos + SHMKV_REC_OUT_HEAD + (kind & SHMKV_REC_EXPIRES ? SHMKV_REC_EXPIRES_SIZE : 0);
	}
	return shmkv__rec_span(pos, kind, key_len, value_len, key_pos, val_pos);
}

/* A record as a bucket holds it: pos, end, kind, key_len, key_pos, val_pos,
 * value_len (inline), expires (0: none), unit (OUT: the entry's offset / 8). */
typedef struct shmkv__rec shmkv_record;

/* Record i of the 128-byte bucket at bk, decoded with its bounds: 0, or
 * SHMKV_ECORRUPT (i past the count, a count over 16, a malformed record).
 * A tombstone (kind SHMKV_REC_TOMB) decodes: only a delta may hold one. */
static inline int shmkv_record_at(const uint8_t *bk, unsigned i, shmkv_record *r)
{
	if (bk[0] > SHMKV_MAX_RECORDS || i >= bk[0] ||
	    !shmkv__rec_decode(bk, bk[0], shmkv__dir_off(bk, i), 1, r))
		return SHMKV_ECORRUPT;
	return 0;
}

/* The 9 tag bits record i's directory entry holds (dir >> 7). */
static inline unsigned shmkv_record_tag_bits(const uint8_t *bk, unsigned i)
{
	return shmkv__dir(bk, i) >> SHMKV_DIR_TAG_SHIFT;
}

/* Buckets after its home a key of this tag may lie in: 0, D, or max_probe
 * for D = 255. */
static inline uint64_t shmkv_bucket_displacement(const uint8_t *bucket, uint64_t tag,
						 uint32_t max_probe)
{
	return shmkv__displaced(bucket, tag, max_probe);
}

/* 1 when a type's value is 8-aligned (numbers, lists). */
static inline int shmkv_type_align8(unsigned type)
{
	return shmkv__align8_type(type);
}

/* Where an entry's value (or shared reference) starts, from the entry. */
static inline uint64_t shmkv_entry_value_pos(const shmkv_entry_header *eh)
{
	return shmkv__value_pos(eh);
}

/* Bytes a value takes where stored: value_len, + 1 for the NUL of text. */
static inline uint64_t shmkv_value_stored_len(unsigned type, uint64_t value_len)
{
	return shmkv__stored_len(type, value_len);
}

/* Bytes of an entry up to where the next may start (padded to 8). */
static inline uint64_t shmkv_entry_size(unsigned type, int shared, size_t key_len,
					uint64_t value_len)
{
	return shmkv__entry_size(type, shared ? SHMKV_EFLAG_SHARED : 0, key_len, value_len);
}

/* A value's bytes against its type's shape (FORMAT.md §8, deep): p holds
 * len bytes, and the NUL of text after them. 0, or SHMKV_ECORRUPT (why). */
static inline int shmkv_value_check(unsigned type, const void *p, uint64_t len, char *why,
				    size_t why_len)
{
	return shmkv__value_check(type, (const uint8_t *)p, len, why, why_len);
}

/* "index", "entries", "values", or "unknown". */
static inline const char *shmkv_section_name(uint32_t kind)
{
	return shmkv__section_name(kind);
}

/* An entry of ENTRIES, decoded: key, key_len, value, value_off (the value's
 * image offset), end (just past the entry, 8-aligned). */
typedef shmkv__entry shmkv_entry;

/* The entry at image offset off, every bound and its value checked (safe on
 * any image): 0, or SHMKV_ECORRUPT naming offset and fault. */
static inline int shmkv_entry_at(const shmkv *db, uint64_t off, shmkv_entry *out, char *why,
				 size_t why_len)
{
	return shmkv__entry_decode(db, off, out, why, why_len);
}

/* The image offset of key's record (in INDEX), found as a get finds it,
 * expired or not, and its expiry (expires may be NULL). */
static inline int shmkv_find_record(const shmkv *db, const void *key, size_t key_len,
				    uint64_t *off, uint32_t *expires)
{
	return shmkv__find(db, key, key_len, off, expires, NULL, 0);
}

/* Image bytes [from, to) are zero (padding): 0, or SHMKV_ECORRUPT naming the
 * first non-zero byte (or a range outside the image). */
static inline int shmkv_zero_check(const shmkv *db, uint64_t from, uint64_t to, const char *what,
				   char *why, size_t why_len)
{
	if (from > to || to > db->size)
		return shmkv__fail(SHMKV_ECORRUPT, why, why_len,
				   "%s padding [%llu, %llu) outside the %llu-byte image", what,
				   (unsigned long long)from, (unsigned long long)to,
				   (unsigned long long)db->size);
	return shmkv__zero_range(db, from, to, what, why, why_len);
}

/* A handle over an image in memory the caller owns (base[0, size), mapped
 * 128-aligned), checked as shmkv_image_check does; never shmkv_close it. */
static inline int shmkv_bind_mem(shmkv *db, const void *base, uint64_t size, unsigned flags,
				 char *why, size_t why_len)
{
	int err = shmkv_image_check(base, size, flags, why, why_len);
	if (err)
		return err;
	memset(db, 0, sizeof *db);
	shmkv__bind(db, base, size);
	return 0;
}

#endif /* SHMKV_TOOLS_H */
