/* shmkv/tools.h - the image format's rules as functions, for programs that
 * build or inspect images (the builder, shmctl image inspect, the loader's
 * streaming check, a second builder). Each is the one definition of a rule
 * lib/FORMAT.md states; the reader uses the same code (these wrap its
 * internal helpers), so a builder that calls them writes images every
 * reader finds its keys in.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_TOOLS_H
#define SHMKV_TOOLS_H

#include "verify.h"

/* ---- keys (FORMAT.md §5) ---- */

/* Key hash: XXH3-64 of the key with the image's hash_seed; hash_bits is
 * the header's (64 in production; fewer only in test images, where the
 * hash is reduced to 2^hash_bits values and spread by a multiply). */
static inline uint64_t shmkv_key_hash(uint64_t seed, unsigned hash_bits, const void *key,
				      size_t key_len)
{
	return shmkv__hash(seed, hash_bits, key, key_len);
}

/* Home bucket of a hash among bucket_count buckets: the high bits of
 * hash * bucket_count (any bucket count, no power of two needed). */
static inline uint64_t shmkv_home_bucket(uint64_t hash, uint64_t bucket_count)
{
	return shmkv__home(hash, bucket_count);
}

/* The 16-bit tag of a hash: its low 16 bits, 1 when they are 0. */
static inline uint64_t shmkv_key_tag(uint64_t hash)
{
	return shmkv__tag(hash);
}

/* ---- buckets and records (FORMAT.md §6) ---- */

/* Bit of a bucket's 48-bit displaced-key filter that a tag sets: bit i is
 * bit i % 8 of filter byte i / 8 (bucket bytes 2..7). */
static inline unsigned shmkv_filter_index(uint64_t tag)
{
	return shmkv__filter_index(tag);
}

/* A record's directory entry: the tag's low 9 bits and the record's offset
 * in its bucket, (tag << 7 | off) & 0xffff (off < 128). */
static inline unsigned shmkv_dir_entry(uint64_t tag, unsigned off)
{
	return (shmkv__dir_tag(tag) | (off & SHMKV_DIR_OFF_MASK)) & 0xffffu;
}

/* Where the directory of a bucket of n records ends: its record area
 * starts there (8 + 2n). */
static inline unsigned shmkv_dir_end(unsigned n)
{
	return shmkv__dir_end(n);
}

/* The bytes of a record of kind (a type, or SHMKV_REC_OUT, with
 * SHMKV_REC_EXPIRES or not) at bucket offset pos: returns its end (past the
 * NUL of text); for an inline record *key_pos (after the head and the
 * expiry) and *val_pos (the key's end aligned in the bucket for its type),
 * key_len and value_len <= 255. An OUT record's are 0. The record fits its
 * bucket when the end is at most 128. */
static inline unsigned shmkv_record_span(unsigned pos, unsigned kind, unsigned key_len,
					 unsigned value_len, unsigned *key_pos, unsigned *val_pos)
{
	if (kind & SHMKV_REC_OUT) {
		*key_pos = *val_pos = 0;
		return pos + SHMKV_REC_OUT_HEAD + (kind & SHMKV_REC_EXPIRES ? SHMKV_REC_EXPIRES_SIZE : 0);
	}
	return shmkv__rec_span(pos, kind, key_len, value_len, key_pos, val_pos);
}

/* One record as a bucket holds it (shmkv_record_at). Offsets are within
 * the bucket. */
typedef struct shmkv__rec shmkv_record;
/* fields: unsigned pos, end (its bytes [pos, end)), kind (SHMKV_REC_* bits
 * and the type), key_len, key_pos, val_pos, value_len (inline records);
 * uint32_t expires (0: none); uint64_t unit (OUT: the entry's offset / 8) */

/* Record i of the bucket at bk (128 bytes) decoded with its bounds
 * (FORMAT.md §6): 0 with *r, or SHMKV_ECORRUPT when i is not below the
 * bucket's count, the count is above 16, or the record is malformed. Reads
 * nothing outside the bucket. */
static inline int shmkv_record_at(const uint8_t *bk, unsigned i, shmkv_record *r)
{
	if (bk[0] > SHMKV_MAX_RECORDS || i >= bk[0] ||
	    !shmkv__rec_decode(bk, bk[0], shmkv__dir_off(bk, i), r))
		return SHMKV_ECORRUPT;
	return 0;
}

/* The 9 tag bits record i's directory entry holds (dir >> 7). */
static inline unsigned shmkv_record_tag_bits(const uint8_t *bk, unsigned i)
{
	return shmkv__dir(bk, i) >> SHMKV_DIR_TAG_SHIFT;
}

/* How many buckets after its home a key with this tag may have been
 * displaced to, as the home bucket's D and filter say: 0 when a lookup
 * stops at the home bucket, else D, or max_probe for D = 255. */
static inline uint64_t shmkv_bucket_displacement(const uint8_t *bucket, uint64_t tag,
						 uint32_t max_probe)
{
	return shmkv__displaced(bucket, tag, max_probe);
}

/* ---- entries and values (FORMAT.md §7-9) ---- */

/* 1 when values of this type start 8-aligned (numbers and lists), 0 for
 * bytes, string and bool. Shared-value references are always 8-aligned. */
static inline int shmkv_type_align8(unsigned type)
{
	return shmkv__align8_type(type);
}

/* Offset, from the start of an entry, where its inline value (or its 8-byte
 * shared-value reference, SHMKV_EFLAG_SHARED) starts: after the 8-byte entry
 * header and the key, rounded up to 8 when shmkv_type_align8() or shared. */
static inline uint64_t shmkv_entry_value_pos(const shmkv_entry_header *eh)
{
	return shmkv__value_pos(eh);
}

/* Bytes a value of value_len bytes of this type takes where it is stored:
 * value_len, and 1 for the NUL after bytes and string values. */
static inline uint64_t shmkv_value_stored_len(unsigned type, uint64_t value_len)
{
	return shmkv__stored_len(type, value_len);
}

/* Bytes of an entry, from its start to where the next may start: the
 * 8-byte header, the key, the value at shmkv_entry_value_pos() (stored_len
 * bytes inline, or the 8-byte reference when shared), padded to 8. */
static inline uint64_t shmkv_entry_size(unsigned type, int shared, size_t key_len,
					uint64_t value_len)
{
	return shmkv__entry_size(type, shared ? SHMKV_EFLAG_SHARED : 0, key_len, value_len);
}

/* Checks the bytes of a value of a type (FORMAT.md §8): lengths, the NUL
 * after text, bool bytes, UTF-8 of text, the string-list shape. p must have
 * len readable bytes, and one more for bytes and string values (the NUL).
 * Returns 0, or SHMKV_ECORRUPT with why (an unknown type is one too). */
static inline int shmkv_value_check(unsigned type, const void *p, uint64_t len, char *why,
				    size_t why_len)
{
	return shmkv__value_check(type, (const uint8_t *)p, len, why, why_len);
}

/* Name of a section kind: "index", "entries", "values", or "unknown". */
static inline const char *shmkv_section_name(uint32_t kind)
{
	return shmkv__section_name(kind);
}

/* One entry of ENTRIES, decoded with every bound checked (shmkv_entry_at).
 * key and value.data point into the image. */
typedef shmkv__entry shmkv_entry;
/* fields: const uint8_t *key; size_t key_len; shmkv_value value;
 *         uint64_t value_off (image offset of the value);
 *         uint64_t end (image offset just past the entry, 8-aligned) */

/* Decodes the entry at image offset off (an OUT record's unit * 8, or a
 * walk of ENTRIES) checking everything against its section: the offset,
 * type, flags, key and value bounds, a shared value's reference, and the
 * value bytes (shmkv_value_check). Safe on any image, however damaged.
 * Returns 0 with *out, or SHMKV_ECORRUPT with why naming offset and fault. */
static inline int shmkv_entry_at(const shmkv *db, uint64_t off, shmkv_entry *out, char *why,
				 size_t why_len)
{
	return shmkv__entry_decode(db, off, out, why, why_len);
}

/* ---- whole images ---- */

/* The image offset of key's record (in INDEX; an OUT record's too, not its
 * entry), found exactly as a get finds it (the checked lookup), and its
 * expiry (0: none; expires may be NULL), whether expired or not. Returns 0;
 * SHMKV_ENOTFOUND; SHMKV_EKEYLEN; SHMKV_ECORRUPT (damage on the key's
 * path). For verifiers that check each key is found where readers look. */
static inline int shmkv_find_record(const shmkv *db, const void *key, size_t key_len,
				    uint64_t *off, uint32_t *expires)
{
	return shmkv__find(db, key, key_len, off, expires, NULL, 0);
}

/* Checks that image bytes [from, to) are zero (padding, FORMAT.md §13).
 * Returns 0, or SHMKV_ECORRUPT with why naming the first non-zero byte's
 * offset and what (e.g. "entry"). The range must lie inside the image. */
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

/* Binds *db to an image already in memory (base[0, size), e.g. a segment
 * the caller mapped or is reading): checks it as shmkv_image_check(base,
 * size, flags) does, then fills *db so that lookups, iteration and
 * shmkv_verify work on it. The caller keeps owning the memory: never pass
 * such a handle to shmkv_close and keep base mapped while db is used.
 * Returns 0, or the errors of shmkv_image_check (db untouched). */
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
