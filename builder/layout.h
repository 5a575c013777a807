// builder/layout.h - where every byte of the image goes (computed before writing).
#pragma once

#include "internal.h"

namespace shmkv_build {

constexpr uint32_t kInline = UINT32_MAX;

struct Layout {
	std::vector<uint32_t> order;       // kept records, in image order
	std::vector<uint64_t> hash;        // their key hashes (ascending)
	std::vector<uint64_t> entry_off;   // per kept record (parallel to order)
	std::vector<uint32_t> group;       // per kept record: its shared value, or kInline
	std::vector<uint64_t> group_off;   // per shared value: its offset in VALUES
	std::vector<uint32_t> shared_reps; // records whose values form VALUES, in order
	std::vector<uint64_t> index;       // bucket_count * 8 slots
	uint64_t bucket_count = 0;
	uint32_t max_probe = 0;
	uint64_t duplicates = 0;
	uint64_t filtered = 0;             // records of other parts skipped (--filter-part)
	uint64_t entries_off = 0, entries_end = 0;
	uint64_t values_off = 0, values_end = 0;
	uint64_t file_size = 0;
	uint64_t value_bytes_logical = 0;
	uint64_t dedup_values = 0, dedup_refs = 0, dedup_saved = 0;
};

// Bytes of an entry: header, key, then inline value or shared reference.
inline uint64_t entry_size(const Record &r, bool shared)
{
	uint64_t p = sizeof(shmkv_entry_header) + r.key_len;
	if (shared)
		return align_up(p, 8) + 8;
	if (shmkv_type_align8(r.type))
		p = align_up(p, 8);
	return align_up(p + stored_len(r.type, r.val_len), 8);
}

// Resolves duplicates, shares values, places entries and values, fills the
// index. Returns 0 or an error set on b.
int compute_layout(shmkv_builder *b, Layout &L);

// Writes the laid-out image to path atomically.
int write_image(shmkv_builder *b, const Layout &L, const char *path);

} // namespace shmkv_build
