// builder/v2.h - the format 2 index as the builder writes it (lib/FORMAT.md,
// format 2; V2SPEC until then): 128-byte buckets of packed records, small
// entries inline, the others OUT records naming a v1-format entry in ENTRIES.
// The numbers are lib/shmkv/format.h's (SHMKV_V2_*, SHMKV_REC_*).
#pragma once

#include <cstdint>
#include <cstring>

#include "internal.h"

namespace shmkv_build {

constexpr uint64_t kV2BucketBytes = SHMKV_V2_BUCKET_BYTES; // the aligned pair of lines a hit requests
constexpr unsigned kV2RecStart = SHMKV_V2_BUCKET_HEAD; // count, D, 48-bit filter, then records
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
};
static_assert(sizeof(V2Shape) == 8, "V2Shape: 8 bytes a record");

inline V2Shape v2_shape(const Record &r)
{
	V2Shape s{};
	unsigned exp = r.expires ? SHMKV_REC_EXPIRES_SIZE : 0;
	uint64_t stored = stored_len(r.type, r.val_len);
	unsigned align = shmkv_type_align8(r.type) ? 8 : 1;
	if (r.key_len <= SHMKV_REC_MAX_LEN && r.val_len <= SHMKV_REC_MAX_LEN &&
	    SHMKV_REC_INLINE_HEAD + exp + r.key_len + (align - 1) + stored <= kV2InlineMax) {
		s.head = (uint16_t)(SHMKV_REC_INLINE_HEAD + exp + r.key_len);
		s.tail = (uint16_t)stored;
		s.align = (uint8_t)align;
		s.worst = (uint8_t)(s.head + align - 1 + s.tail);
		s.out = false;
	} else {
		s.head = (uint16_t)(SHMKV_REC_OUT_HEAD + exp);
		s.align = 1;
		s.worst = (uint8_t)s.head;
		s.out = true;
	}
	return s;
}

// Writes the record of r at bucket byte pos of bkt (zeroed), its entry at
// entry_off when OUT.
inline void v2_render(uint8_t *bkt, unsigned pos, const Record &r, const V2Shape &s,
		      uint16_t tag, uint64_t entry_off)
{
	uint8_t *p = bkt + pos;
	memcpy(p, &tag, 2);
	uint8_t kind = (uint8_t)((r.expires ? kV2KindExpires : 0) | (s.out ? kV2KindOut : r.type));
	p[2] = kind;
	if (s.out) {
		uint64_t o = entry_off >> 3;
		memcpy(p + 3, &o, 5); // 40-bit LE
		if (r.expires)
			memcpy(p + 8, &r.expires, 4);
		return;
	}
	p[3] = (uint8_t)r.key_len;
	p[4] = (uint8_t)r.val_len;
	unsigned at = pos + 5;
	if (r.expires) {
		memcpy(p + 5, &r.expires, 4);
		at += 4;
	}
	if (r.key_len)
		memcpy(bkt + at, r.key, r.key_len);
	at = (unsigned)align_up(at + r.key_len, s.align);
	if (r.val_len)
		memcpy(bkt + at, r.val, r.val_len); // a NUL terminator is the zero after it
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
