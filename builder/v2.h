// builder/v2.h - the index as the builder writes it (lib/FORMAT.md §6):
// 128-byte buckets whose head is count, D and filter, then the records' u16
// directory entries, then the records, small entries inline, the others OUT
// records naming their entry in ENTRIES. What both builds share
// (layout_v2.cc in memory, spill_build.cc streaming): a record's shape, the
// room rule, a bucket's bytes. (The name is history: format 2 is the one
// format.)
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "internal.h"

namespace shmkv_build {

// The numbers are lib/shmkv/format.h's; the rules (a record's bytes, its
// directory entry, the filter bit) are lib/shmkv/tools.h's functions.
constexpr uint64_t kV2BucketBytes = SHMKV_BUCKET_BYTES; // the aligned pair of lines a hit requests
constexpr unsigned kV2Head = SHMKV_BUCKET_HEAD;          // count, D, 48-bit filter
constexpr unsigned kV2MaxRecords = SHMKV_MAX_RECORDS;    // count's bound
constexpr unsigned kV2DirBytes = SHMKV_DIR_BYTES;        // a record's u16 dir: 9 tag bits, 7 off bits
// An entry is inline when its record, with the worst value padding, takes
// at most this many bytes (builder/README.md, "The index": why 48): a
// builder's choice, not a rule of the format.
constexpr unsigned kV2InlineMax = 48;

// A record's shape, position-free: its kind and lengths, from which
// shmkv_record_span() gives its end wherever it starts.
struct V2Shape {
	uint8_t kind;    // SHMKV_REC_* bits and the type (an OUT record has none)
	uint8_t key_len; // inline: the head's lengths (at most 255); OUT: 0
	uint8_t val_len;
	uint8_t worst;   // bytes with the worst padding (what placement sorts by)
	uint8_t align;   // 1, or 8 when its bytes depend on where it starts (an
			 // inline value that is 8-aligned)
	bool out;
	uint16_t pad;
	// Its end when it starts at bucket offset pos (a record whose bytes do
	// not depend on where it starts takes worst bytes anywhere).
	unsigned end(unsigned pos) const
	{
		if (align == 1)
			return pos + worst;
		unsigned key_pos, val_pos;
		return shmkv_record_span(pos, kind, key_len, val_len, &key_pos, &val_pos);
	}
	// What the record and its directory entry take of a bucket's room
	// (worst padding): what the bucket count is sized by.
	unsigned room() const { return worst + kV2DirBytes; }
};
static_assert(sizeof(V2Shape) == 8, "V2Shape: 8 bytes a record");

// The most bytes a record of kind and lengths takes (shmkv_record_span):
// its end less its start over the 8 starts a bucket offset can have modulo
// the largest alignment (one when align is 1: its bytes do not depend on
// where it starts).
inline unsigned v2_worst(unsigned kind, unsigned key_len, unsigned val_len, unsigned align)
{
	unsigned w = 0, key_pos, val_pos;
	for (unsigned pos = kV2Head; pos < kV2Head + (align == 1 ? 1u : 8u); pos++)
		w = std::max(w, shmkv_record_span(pos, kind, key_len, val_len, &key_pos, &val_pos) -
					pos);
	return w;
}

// An OUT record's shape (its entry is in ENTRIES).
inline V2Shape v2_shape_out(bool expires)
{
	const unsigned kind = SHMKV_REC_OUT | (expires ? SHMKV_REC_EXPIRES : 0);
	return V2Shape{(uint8_t)kind, 0, 0, (uint8_t)v2_worst(kind, 0, 0, 1), 1, true, 0};
}

// A tombstone's record (lib/FORMAT.md §19.2), by the inline rule of any
// record: kind TOMB, key_len, value_len 0 and the key, 3 + key_len bytes,
// when that is at most kV2InlineMax; else OUT | TOMB, its entry in ENTRIES.
inline V2Shape v2_shape_tomb(unsigned key_len)
{
	if (key_len <= SHMKV_REC_MAX_LEN && SHMKV_REC_INLINE_HEAD + key_len <= kV2InlineMax)
		return V2Shape{(uint8_t)SHMKV_REC_TOMB, (uint8_t)key_len, 0,
			       (uint8_t)(SHMKV_REC_INLINE_HEAD + key_len), 1, false, 0};
	return V2Shape{(uint8_t)(SHMKV_REC_OUT | SHMKV_REC_TOMB), 0, 0, (uint8_t)SHMKV_REC_OUT_HEAD,
		       1, true, 0};
}

// The record of an entry: inline when its lengths fit the head and its
// worst size is at most kV2InlineMax, else OUT.
inline V2Shape v2_shape(unsigned key_len, unsigned type, uint64_t val_len, uint32_t expires)
{
	if (type == kTombType)
		return v2_shape_tomb(key_len);
	if (key_len > SHMKV_REC_MAX_LEN || val_len > SHMKV_REC_MAX_LEN)
		return v2_shape_out(expires != 0);
	const unsigned kind = type | (expires ? SHMKV_REC_EXPIRES : 0);
	const unsigned align = shmkv_type_align8(type) ? 8 : 1;
	const unsigned w = v2_worst(kind, key_len, (unsigned)val_len, align);
	if (w > kV2InlineMax)
		return v2_shape_out(expires != 0);
	return V2Shape{(uint8_t)kind, (uint8_t)key_len, (uint8_t)val_len, (uint8_t)w,
		       (uint8_t)align, false, 0};
}
inline V2Shape v2_shape(const Record &r)
{
	return v2_shape(r.key_len, r.type, r.val_len, r.expires);
}

// The end of a bucket's records laid out in order from 8 + 2n: shape(i) is
// record i's shape. Records are packed, each at the previous one's end.
template <typename ShapeOf>
unsigned v2_bucket_end(unsigned n, ShapeOf shape)
{
	unsigned pos = shmkv_dir_end(n);
	for (unsigned i = 0; i < n; i++)
		pos = shape(i).end(pos);
	return pos;
}

// Where a record of shape s starting at pos puts its key and value, and its
// end (shmkv_record_span; an inline tombstone's, which has no type to
// align a value by, here: the head, the key, nothing after it).
inline unsigned v2_span(unsigned pos, const V2Shape &s, unsigned *key_pos, unsigned *val_pos)
{
	if (s.kind == SHMKV_REC_TOMB) {
		*key_pos = pos + SHMKV_REC_INLINE_HEAD;
		*val_pos = *key_pos + s.key_len;
		return *val_pos;
	}
	return shmkv_record_span(pos, s.kind, s.key_len, s.val_len, key_pos, val_pos);
}

// One record as a bucket's rendering needs it.
struct V2Item {
	const uint8_t *key, *val; // inline only
	uint32_t val_len, expires;
	uint16_t key_len, tag; // tag: the key's §5 tag (its low 9 bits are what a bucket keeps)
	uint8_t type;
	V2Shape s;
	uint64_t entry_off; // OUT only: the entry's image offset
};

// Writes records items[0..n) of bucket bkt (its bytes from +8 on zero; count,
// D and filter are the caller's): the directory entries (shmkv_dir_entry),
// the records packed from shmkv_dir_end(n) in order, each where
// shmkv_record_span() puts its parts. The caller has checked that they fit.
// Returns where the records end (v2_bucket_end of their shapes).
template <typename ItemOf>
unsigned v2_render_bucket(uint8_t *bkt, unsigned n, ItemOf item)
{
	bkt[0] = (uint8_t)n;
	unsigned pos = shmkv_dir_end(n);
	for (unsigned i = 0; i < n; i++) {
		const V2Item &r = item(i);
		const V2Shape &s = r.s;
		const uint16_t dir = (uint16_t)shmkv_dir_entry(r.tag, pos);
		memcpy(bkt + shmkv_dir_end(i), &dir, 2); // LE hosts only (lib/shmkv/format.h)
		unsigned key_pos, val_pos;
		const unsigned end = v2_span(pos, s, &key_pos, &val_pos);
		uint8_t *p = bkt + pos;
		p[0] = s.kind;
		if (s.out) {
			uint64_t o = r.entry_off >> 3;
			memcpy(p + 1, &o, 5); // 40-bit LE
			if (r.expires)
				memcpy(p + SHMKV_REC_OUT_HEAD, &r.expires, 4);
		} else {
			p[1] = s.key_len;
			p[2] = s.val_len;
			if (r.expires)
				memcpy(p + SHMKV_REC_INLINE_HEAD, &r.expires, 4);
			// the item's lengths (as the shape's): GCC 12 expands a memcpy of
			// a u8 length inline, which made rendering 3 times slower
			if (r.key_len)
				memcpy(bkt + key_pos, r.key, r.key_len);
			if (r.val_len)
				memcpy(bkt + val_pos, r.val, r.val_len); // a NUL terminator is the zero after it
		}
		pos = end;
	}
	return pos;
}

// A home bucket's mark for a key of it displaced d buckets away: the
// filter bit of its tag (bit i is bit i % 8 of byte 2 + i / 8), D raised to
// d (SHMKV_DISPLACEMENT_MAX: "up to max_probe").
inline void v2_home_mark(uint8_t *hb, uint64_t tag, uint64_t d)
{
	unsigned fi = shmkv_filter_index(tag);
	hb[2 + (fi >> 3)] |= (uint8_t)(1u << (fi & 7));
	uint8_t want = d < SHMKV_DISPLACEMENT_MAX ? (uint8_t)d : (uint8_t)SHMKV_DISPLACEMENT_MAX;
	if (want > hb[1])
		hb[1] = want;
}

} // namespace shmkv_build
