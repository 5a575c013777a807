// builder/v2.h - the format 2 index as the builder writes it (lib/FORMAT.md
// §17, layout B): 128-byte buckets whose head is count, D and filter, then
// the records' u16 directory entries (dir = (tag << 7 | off) & 0xffff: the
// tag's low 9 bits and the record's offset), then the records, small
// entries inline, the others OUT records naming a v1-format entry in
// ENTRIES. What both builds share (layout_v2.cc in memory, spill_build.cc
// streaming): a record's shape, the room rule, a bucket's bytes.
#pragma once

#include <cstdint>
#include <cstring>

#include "internal.h"

namespace shmkv_build {

// The numbers are lib/shmkv/format.h's (SHMKV_V2_*, SHMKV_REC_*).
constexpr uint64_t kV2BucketBytes = SHMKV_V2_BUCKET_BYTES; // the aligned pair of lines a hit requests
constexpr unsigned kV2Head = SHMKV_V2_BUCKET_HEAD;          // count, D, 48-bit filter
constexpr unsigned kV2MaxRecords = SHMKV_V2_MAX_RECORDS;    // count's bound
constexpr unsigned kV2DirBytes = SHMKV_V2_DIR_BYTES;        // a record's u16 dir: 9 tag bits, 7 off bits
constexpr unsigned kV2InlineHead = SHMKV_REC_INLINE_HEAD;   // kind, key_len, value_len
constexpr unsigned kV2OutHead = SHMKV_REC_OUT_HEAD;         // kind, 40-bit entry offset / 8
constexpr unsigned kV2ExpiresSize = SHMKV_REC_EXPIRES_SIZE;
constexpr unsigned kV2MaxLen = SHMKV_REC_MAX_LEN;           // inline key_len and value_len are u8
constexpr unsigned kV2FilterBits = SHMKV_V2_FILTER_BITS;
constexpr uint8_t kV2KindExpires = SHMKV_REC_EXPIRES, kV2KindOut = SHMKV_REC_OUT;
// An entry is inline when its record, with the worst value padding, takes
// at most this many bytes (builder/README.md, "Format 2": why 48).
constexpr unsigned kV2InlineMax = 48;

inline unsigned v2_filter_index(uint64_t tag)
{
	return (unsigned)((tag * kV2FilterBits) >> 16);
}

// A record's shape, position-free: its end at bucket offset pos is
// align_up(pos + head, align) + tail (an OUT record: pos + head).
struct V2Shape {
	uint16_t head;  // record header (and the key, inline)
	uint16_t tail;  // stored value bytes (inline), else 0
	uint8_t align;  // 1, or 8 for an inline value that is 8-aligned
	uint8_t worst;  // bytes with the worst padding (what placement sorts by)
	bool out;
	uint8_t pad;
	unsigned end(unsigned pos) const
	{
		return (unsigned)align_up(pos + head, align) + tail;
	}
	// What the record and its directory entry take of a bucket's room
	// (worst padding): what the bucket count is sized by.
	unsigned room() const { return worst + kV2DirBytes; }
};
static_assert(sizeof(V2Shape) == 8, "V2Shape: 8 bytes a record");

inline V2Shape v2_shape(unsigned key_len, unsigned type, uint64_t val_len, uint32_t expires)
{
	V2Shape s{};
	unsigned exp = expires ? kV2ExpiresSize : 0;
	uint64_t stored = stored_len((uint8_t)type, val_len);
	unsigned align = shmkv_type_align8(type) ? 8 : 1;
	if (key_len <= kV2MaxLen && val_len <= kV2MaxLen &&
	    kV2InlineHead + exp + key_len + (align - 1) + stored <= kV2InlineMax) {
		s.head = (uint16_t)(kV2InlineHead + exp + key_len);
		s.tail = (uint16_t)stored;
		s.align = (uint8_t)align;
		s.worst = (uint8_t)(s.head + align - 1 + s.tail);
		s.out = false;
	} else {
		s.head = (uint16_t)(kV2OutHead + exp);
		s.align = 1;
		s.worst = (uint8_t)s.head;
		s.out = true;
	}
	return s;
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
	unsigned pos = kV2Head + kV2DirBytes * n;
	for (unsigned i = 0; i < n; i++)
		pos = shape(i).end(pos);
	return pos;
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
// D and filter are the caller's): the directory entries (tag << 7 | off),
// the records packed from 8 + 2n in order. The caller has checked that they
// fit.
template <typename ItemOf>
void v2_render_bucket(uint8_t *bkt, unsigned n, ItemOf item)
{
	bkt[0] = (uint8_t)n;
	unsigned pos = kV2Head + kV2DirBytes * n;
	for (unsigned i = 0; i < n; i++) {
		const V2Item &r = item(i);
		const uint16_t dir = (uint16_t)(((unsigned)r.tag << SHMKV_V2_DIR_TAG_SHIFT | pos) & 0xffff);
		memcpy(bkt + kV2Head + kV2DirBytes * i, &dir, 2); // LE hosts only (lib/shmkv/format.h)
		uint8_t *p = bkt + pos;
		p[0] = (uint8_t)((r.expires ? kV2KindExpires : 0) | (r.s.out ? kV2KindOut : r.type));
		if (r.s.out) {
			uint64_t o = r.entry_off >> 3;
			memcpy(p + 1, &o, 5); // 40-bit LE
			if (r.expires)
				memcpy(p + kV2OutHead, &r.expires, 4);
		} else {
			p[1] = (uint8_t)r.key_len;
			p[2] = (uint8_t)r.val_len;
			unsigned at = pos + kV2InlineHead;
			if (r.expires) {
				memcpy(bkt + at, &r.expires, 4);
				at += kV2ExpiresSize;
			}
			if (r.key_len)
				memcpy(bkt + at, r.key, r.key_len);
			at = (unsigned)align_up(at + r.key_len, r.s.align);
			if (r.val_len)
				memcpy(bkt + at, r.val, r.val_len); // a NUL terminator is the zero after it
		}
		pos = r.s.end(pos);
	}
}

// A home bucket's mark for a key of it displaced d buckets away: the
// filter bit of its tag, D raised to d (255: "up to max_probe").
inline void v2_home_mark(uint8_t *hb, uint64_t tag, uint64_t d)
{
	unsigned fi = v2_filter_index(tag);
	hb[2 + (fi >> 3)] |= (uint8_t)(1u << (fi & 7));
	uint8_t want = d < 255 ? (uint8_t)d : 255;
	if (want > hb[1])
		hb[1] = want;
}

} // namespace shmkv_build
