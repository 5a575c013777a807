/* shmkv/tools.h - the image format as functions, for programs that build or
 * inspect images (the builder, shmctl image inspect/dump, a second builder).
 * Each is the one definition of a rule lib/FORMAT.md states; the reader uses
 * the same code (these wrap its internal helpers), so a builder that calls
 * them writes images every reader finds its keys in.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_TOOLS_H
#define SHMKV_TOOLS_H

#include "get.h"
#include "handle.h"
#include "probe.h"
#include "verify.h"

/* Key hash (FORMAT.md §5): XXH3-64 of the key with the image's
 * hash_seed; hash_bits is the header's (64 in production; fewer only in test
 * images, where the hash is reduced to 2^hash_bits values and spread by a
 * multiply). */
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

/* The 16-bit slot tag of a hash: its low 16 bits, 1 when they are 0 (an
 * empty slot is all zero and never matches). */
static inline uint64_t shmkv_key_tag(uint64_t hash)
{
	return shmkv__tag(hash);
}

/* Slot fields (a slot is tag << 48 | meta << 40 | entry_offset >> 3; 0 is
 * empty): the tag, the meta byte, and the image offset of the entry. */
static inline uint64_t shmkv_slot_tag(uint64_t slot)
{
	return slot >> SHMKV_SLOT_TAG_SHIFT;
}
static inline unsigned shmkv_slot_meta(uint64_t slot)
{
	return shmkv__slot_meta(slot);
}
static inline uint64_t shmkv_slot_entry_offset(uint64_t slot)
{
	return (slot & SHMKV_SLOT_OFF_MASK) << 3;
}

/* Bit of a full bucket's 56-bit displaced-key filter that a tag sets
 * (0..SHMKV_FILTER_BITS-1); the filter's bits are the meta bytes of slots
 * 0..6, bit i in slot i / 8's meta bit i % 8. */
static inline unsigned shmkv_filter_index(uint64_t tag)
{
	return shmkv__filter_index(tag);
}

/* 1 when values of this type start 8-aligned in their entry (numbers and
 * lists), 0 for bytes, string and bool. Shared-value references are always
 * 8-aligned, whatever the type. */
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
 * value_len, and 1 for the NUL after bytes and string values (the row's
 * nul, shmkv/types.h). */
static inline uint64_t shmkv_value_stored_len(unsigned type, uint64_t value_len)
{
	return shmkv__stored_len(type, value_len);
}

/* Bytes of an entry (FORMAT.md §7), from its start to where the next may
 * start: the 8-byte header, the key, the value at shmkv_entry_value_pos()
 * (stored_len bytes inline, or the 8-byte reference when shared), padded
 * to a multiple of 8. The reader's decode finds the next entry there. */
static inline uint64_t shmkv_entry_size(unsigned type, int shared, size_t key_len,
					uint64_t value_len)
{
	return shmkv__entry_size(type, shared ? SHMKV_EFLAG_SHARED : 0, key_len, value_len);
}

/* Checks the bytes of a value of a type (FORMAT.md §8): lengths,
 * terminating NULs, bool bytes, the string-list shape. p must have len
 * readable bytes, and one more for bytes and string values (the NUL).
 * Returns 0, or SHMKV_ECORRUPT with why[why_len] (if given) saying what is
 * wrong (an unknown type is SHMKV_ECORRUPT too). */
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

/* One entry, decoded with every bound checked (shmkv_entry_at). key and
 * value.data point into the image. */
typedef shmkv__entry shmkv_entry;
/* fields: const uint8_t *key; size_t key_len; shmkv_value value;
 *         uint64_t value_off (image offset of the value);
 *         uint64_t end (image offset just past the entry, 8-aligned) */

/* Decodes the entry at image offset off (a slot's shmkv_slot_entry_offset(),
 * or an iterator position) checking everything against its section: the
 * offset, type, flags, key and value bounds, a shared value's reference,
 * and the value bytes (shmkv_value_check). Safe on any image, however
 * damaged. Returns 0 with *out filled, or SHMKV_ECORRUPT with why[why_len]
 * (if given) naming the offset and the fault. */
static inline int shmkv_entry_at(const shmkv *db, uint64_t off, shmkv_entry *out, char *why,
				 size_t why_len)
{
	return shmkv__entry_decode(db, off, out, why, why_len);
}

/* How many buckets after its home a key with this tag may have been
 * displaced to, as the home bucket's displaced-key filter says (FORMAT.md
 * §6): 0 when the lookup may stop at the home bucket, else up to max_probe
 * (the header's). bucket points at the home bucket's 8 slots. */
static inline uint64_t shmkv_bucket_displacement(const uint64_t *bucket, uint64_t tag,
						 uint32_t max_probe)
{
	return shmkv__displaced(bucket, tag, max_probe);
}

/* The image offset of key's entry, found exactly as shmkv_get finds it
 * (the checked lookup); in format 2 the offset of the key's record in its
 * bucket in INDEX (an OUT record's too, not its entry in ENTRIES), whether
 * expired or not. Returns 0 with *off set; SHMKV_ENOTFOUND;
 * SHMKV_EKEYLEN; SHMKV_ECORRUPT (damage on the key's path). For verifiers
 * that check every key is found where the reader will look. */
static inline int shmkv_find_entry(const shmkv *db, const void *key, size_t key_len, uint64_t *off)
{
	const uint8_t *e = NULL;
	int err = shmkv__lookup(db, key, key_len, &e, NULL, 0);
	if (err)
		return err;
	*off = (uint64_t)(e - db->base);
	return 0;
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

/* 1 when a value's text is strict UTF-8 (string values, and every string of
 * a string list; no overlongs, surrogates or code points past U+10FFFF), 0
 * when not; 1 for other types. The check shmkv_verify applies. */
static inline int shmkv_value_utf8_valid(const shmkv_value *v)
{
	return shmkv__text_valid(v);
}

/* Binds *db to an image already in memory (base[0, size), e.g. a segment
 * the caller mapped or is reading): checks it as shmkv_image_check(base,
 * size, flags) does, then fills *db so that lookups, iteration and
 * shmkv_verify work on it. The caller keeps owning the memory: never pass
 * such a handle to shmkv_close (there is nothing to free) and keep base
 * mapped while db is used. Returns 0, or the errors of shmkv_image_check
 * (db untouched). */
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
