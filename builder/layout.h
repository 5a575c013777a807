// builder/layout.h - where every byte of the image goes (computed before writing).
#pragma once

#include <cstring>

#include <chrono>
#include <functional>

#include "internal.h"
#include "parallel.h"

namespace shmkv_build {

class Writer;

constexpr uint32_t kInline = UINT32_MAX;

struct Layout {
	std::vector<uint32_t> order;       // kept records, in image order
	std::vector<uint64_t> hash;        // their key hashes (ascending)
	std::vector<uint64_t> entry_off;   // per kept record (parallel to order)
	std::vector<uint32_t> group;       // per kept record: its shared value, or kInline
	std::vector<uint64_t> group_off;   // per shared value: its offset in VALUES
	std::vector<uint32_t> shared_reps; // records whose values form VALUES, in order
	std::vector<uint64_t> index;       // the buckets' bytes (bucket_count * 128), in memory
	uint64_t bucket_count = 0;
	bool expiry = false;               // some record expires (header flag)
	uint64_t record_bytes = 0;         // bucket bytes past the heads used (directory, records)
	uint32_t max_probe = 0;
	uint64_t duplicates = 0;
	uint64_t filtered = 0;             // records of other parts skipped (--filter-part)
	uint64_t entries_off = 0, entries_end = 0;
	uint64_t values_off = 0, values_end = 0;
	// A delta's FILTER section (lib/FORMAT.md §19.3): words (0: not a delta),
	// its offset, and in memory its words (the spilling build streams them).
	uint64_t filter_words = 0, filter_off = 0;
	std::vector<uint64_t> filter;
	uint64_t tombstones = 0;           // tombstone records written (a delta)
	uint64_t file_size = 0;
	uint64_t entries = 0;              // entry count (order.size() in memory)
	uint64_t value_bytes_logical = 0;
	uint64_t dedup_values = 0, dedup_refs = 0, dedup_saved = 0;
};

// Bytes of an entry: header, key, then inline value or shared reference (the
// reader's rule, shmkv_entry_size).
inline uint64_t entry_size(unsigned key_len, unsigned type, uint64_t val_len, bool shared)
{
	return shmkv_entry_size(type, shared, key_len, val_len);
}
inline uint64_t entry_size(const Record &r, bool shared)
{
	return entry_size(r.key_len, r.type, r.val_len, shared);
}

// What an entry shrinks by when its value is shared (negative for values of
// at most 8 stored bytes: a reference is never smaller than them).
inline int64_t share_gain(unsigned key_len, unsigned type, uint64_t val_len)
{
	return (int64_t)entry_size(key_len, type, val_len, false) -
	       (int64_t)entry_size(key_len, type, val_len, true);
}
// Values that no group can be worth sharing: gain <= 0 whatever the key.
inline bool never_shared(unsigned type, uint64_t val_len)
{
	return stored_len(type, val_len) <= 8;
}
// The sharing rule (lib/FORMAT.md §14): r >= 2 entries whose gains sum to
// more than the one copy costs.
inline bool worth_sharing(uint64_t refs, int64_t gain, unsigned type, uint64_t val_len)
{
	return refs >= 2 && gain > (int64_t)align_up(stored_len(type, val_len), 8);
}

// The cache-line rule: the offset of an entry of sz bytes placed at pos, and
// pos moved past it.
inline uint64_t place_entry(uint64_t &pos, uint64_t sz)
{
	if (sz <= 64 && (pos & 63) + sz > 64)
		pos = align_up(pos, 64);
	uint64_t at = pos;
	pos += sz;
	return at;
}

// Renders one entry into e (entry_size bytes, zeroed by the caller).
inline void render_entry(uint8_t *e, unsigned type, const uint8_t *key, unsigned key_len,
			 const uint8_t *val, uint32_t val_len, bool shared, uint64_t ref)
{
	shmkv_entry_header eh = {(uint8_t)type, (uint8_t)(shared ? SHMKV_EFLAG_SHARED : 0),
				 (uint16_t)key_len, val_len};
	memcpy(e, &eh, sizeof eh);
	if (key_len)
		memcpy(e + sizeof eh, key, key_len);
	uint64_t vpos = shmkv_entry_value_pos(&eh);
	if (shared)
		memcpy(e + vpos, &ref, 8);
	else if (val_len)
		memcpy(e + vpos, val, val_len); // a NUL terminator is the zero after it
}

// Duplicates among records sorted by (key, input position): calls
// same(a, b) for neighbours, keep(i) for the kept one of each key, and
// remembers the pair (first, second) whose second record came earliest, for
// the error message. Indices are positions in the sorted sequence.
struct DupScan {
	uint64_t keys = 0, recs = 0;
	uint64_t first_seq = 0, second_seq = UINT64_MAX; // input positions
	// A key of count records whose two earliest are first and second (input
	// positions): true if this pair is now the one to report.
	bool group(uint64_t count, uint64_t first, uint64_t second)
	{
		if (count < 2)
			return false;
		keys++;
		recs += count - 1;
		if (second >= second_seq)
			return false;
		first_seq = first;
		second_seq = second;
		return true;
	}
};
template <typename Same, typename Seq, typename Keep, typename Found>
void scan_duplicates(size_t n, int policy, DupScan &d, Same same, Seq seq, Keep keep, Found found)
{
	for (size_t s = 0; s < n;) {
		size_t e = s + 1;
		while (e < n && same(s, e))
			e++;
		if (e - s > 1 && d.group(e - s, seq(s), seq(s + 1)))
			found(s, s + 1);
		keep(e - s > 1 && policy == SHMKV_DUP_LAST ? e - 1 : s);
		s = e;
	}
}

// Loops over entries (hash order) read records (input order) at random:
// entry k fetches the record of entry k + 16 and the bytes of entry k + 8
// (from its key, or from its value where only the value is read).
inline void prefetch_ahead(const Records &R, const std::vector<uint32_t> &order, size_t k,
			   size_t m, bool key)
{
	if (k + 16 < m)
		__builtin_prefetch(&R[order[k + 16]]);
	if (k + 8 < m) {
		const Record &p = R[order[k + 8]];
		__builtin_prefetch(key ? p.key : p.val);
		__builtin_prefetch(p.val + p.val_len - 1);
	}
}

// The duplicate-key error: where the second record is, its key, where the first is.
int dup_error(shmkv_builder *b, const std::string &second, const std::string &key,
	      const std::string &first, uint64_t dup_keys);

// Resolves duplicates, places the records in the index (inline or OUT),
// shares the OUT records' values, places entries and values, renders the
// buckets (layout_v2.cc). Returns 0 or an error set on b.
int compute_layout(shmkv_builder *b, Layout &L);
// bucket_count from the options and the records' bytes (worst padding and
// directory: V2Shape::room()), for both builds (layout_v2.cc).
int choose_buckets_v2(shmkv_builder *b, uint64_t bytes, uint64_t *out);
// When some record finds no room: 1/8 more buckets (L.bucket_count), or,
// with a fixed count or at the size limit, the error saying so.
int v2_more_buckets(shmkv_builder *b, Layout &L, uint64_t bytes);

// The steps both builds share (layout.cc). sort_and_dedup_keys: L.order and
// L.hash are the kept records in hash order. share_values: per entry of
// L.order its shared value or kInline (L.shared_reps, dedup counts).
// place_entries: the entries of L.order from SHMKV_HEADER_SIZE + index_bytes
// on (cache-line rule), VALUES after them, the file size.
int sort_and_dedup_keys(shmkv_builder *b, unsigned T, Layout &L, Items &sorted, Items &tmp);
std::vector<uint32_t> share_values(shmkv_builder *b, unsigned T, Layout &L, Items &sorted,
				   Items &tmp);
int place_entries(shmkv_builder *b, unsigned T, Layout &L, std::vector<uint32_t> &grp,
		  uint64_t index_bytes);

// L.file_size from where VALUES ends, or a delta's FILTER after it (at the
// next multiple of 64), padded to SHMKV_FILE_ALIGN; or the error of an image
// over the format's size limit.
int set_file_size(shmkv_builder *b, Layout &L);

// The header of a laid-out image (checksums of the sections already in h).
void fill_header(const shmkv_builder *b, const Layout &L, shmkv_image_header &h);

// Where an image is being written (an unnamed or hidden temporary in the
// output's directory), and what to undo on failure.
struct Target {
	shmkv_builder *b = nullptr;
	std::string path, dir, tmp; // tmp: the temporary's name in dir, once it has one
	std::string shown;          // the temporary, for messages
	int dfd = -1, fd = -1, slot = -1;
	~Target();
};
// Opens the temporary (read-write) for path.
int open_target(shmkv_builder *b, const char *path, Target &t);
// fsync, name, check the output again, rename over it, fsync the directory.
int commit_target(shmkv_builder *b, Target &t);

// The image after its index, the one way both builds write it: the ENTRIES
// section (entries() writes the entries from L.entries_off on) padded to its
// end, VALUES at L.values_off (values() writes the shared values), the file
// padded to its size, the sections' checksums into h, the writer flushed.
// A delta's FILTER (filter() writes its words) follows VALUES.
int write_sections(Writer &w, const Layout &L, shmkv_image_header &h,
		   const std::function<int()> &entries, const std::function<int()> &values,
		   const std::function<int()> &filter);
// Fills the header (h holds the sections) and writes it at offset 0 of fd.
int write_header(shmkv_builder *b, const Layout &L, int fd, const char *shown,
		 shmkv_image_header &h);

// Writes the laid-out image to path atomically.
int write_image(shmkv_builder *b, const Layout &L, const char *path);

// A finished build's statistics (st may be null); t0: when finishing began.
// For both the in-memory build and the spilling one (spill_build.cc).
void fill_stats(const Layout &L, uint64_t records, std::chrono::steady_clock::time_point t0,
		shmkv_build_stats *st);

} // namespace shmkv_build
