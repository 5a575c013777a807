// builder/stream_v2.h - the index of a spilling build, placed while
// the entries stream by in order (hash order) with only a window of buckets
// in memory; the bytes are those of the in-memory placement (layout_v2.cc).
#pragma once

#include <deque>
#include <vector>

#include "v2.h"

namespace shmkv_build {

// Returned by finish() when some record finds no bucket with room: the
// caller retries with more buckets, as the in-memory build does.
constexpr int kV2NoRoom = 1;

// Placement is layout_v2.cc's (lib/FORMAT.md §14): buckets are visited
// in order as the entries pass their homes, each with the keys carried
// over from earlier buckets first, then its home group. A bucket is
// rendered and written once its record set is final (visited) and so are
// its D and filter (no key of its home is carried any more). Keys carried
// past the last bucket wrap to bucket 0 at the end: such a bucket is read
// back from the file, its records decoded, and written again with the new
// ones.
class StreamIndexV2 {
public:
	// The index: buckets at index_off of fd (zero there already).
	StreamIndexV2(shmkv_builder *b, int fd, uint64_t buckets, uint64_t index_off)
		: b_(b), fd_(fd), B_(buckets), off_(index_off) {}
	// The next entry in order: its key hash and record (key and value are
	// copied; OUT: entry_off set).
	int add(uint64_t h, const V2Item &it);
	// Places the rest and writes the window: 0, kV2NoRoom, or an error set on b.
	int finish();
	uint32_t max_probe = 0;
	uint64_t record_bytes = 0; // bucket bytes past the heads used

private:
	struct PRec { // a record waiting in the window
		uint64_t home, entry_off;
		uint32_t val_len, expires;
		uint16_t key_len, tag;
		uint8_t type;
		V2Shape s;
		uint8_t kv[kV2InlineMax]; // inline: key, then value (without its NUL)
		V2Item item() const;
	};
	struct Bucket {
		uint8_t head[kV2Head] = {}; // count (set on rendering), D, filter
		uint8_t end = kV2Head;      // where its records' layout ends
		bool aligned = false;       // some record has an 8-aligned value
		std::vector<PRec> recs;     // in placement order
	};
	uint64_t hi() const { return lo_ + win_.size(); }
	Bucket &at(uint64_t c) { return win_[c - lo_]; }
	void extend(uint64_t c);
	static unsigned end_with(const Bucket &bk, const PRec &r);
	static void push(Bucket &bk, const PRec &r, unsigned end);
	void note(const PRec &r, uint64_t d);
	void visit(Bucket &bk, uint64_t c);
	void close_group();
	void advance(uint64_t upto);
	int place_wrapped();
	int write_front(uint64_t upto);
	void render(const Bucket &bk, uint8_t *out);
	int pio(uint8_t *p, uint64_t c, bool write);
	int decode(const uint8_t *p, uint64_t c, Bucket &bk);

	shmkv_builder *b_;
	int fd_;
	uint64_t B_, off_;
	uint64_t lo_ = 0;           // first bucket of the window
	std::deque<Bucket> win_;
	std::vector<PRec> grp_;     // the current home group, in entry order
	uint64_t grp_home_ = 0;
	std::vector<PRec> carry_, next_; // keys carried to bucket c_, oldest home first
	uint64_t c_ = 0;            // the next bucket to visit
	std::vector<uint8_t> out_;  // rendered buckets to write
};

} // namespace shmkv_build
