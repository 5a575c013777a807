// builder/stream_v2.h - the format 2 index of a spilling build, placed while
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

// Pass 1 of a bucket is complete once the entries have passed its home
// group; the displaced keys (pass 2, in entry order) are placed one by one
// as soon as the buckets they may go to are complete, each from home + 1
// on, as in memory. A bucket is rendered and written once its record set
// is final: no displaced key left can reach it and its own displaced keys
// are placed (its D and filter final). Keys displaced past the last bucket
// wrap to bucket 0 at the end: such a bucket is read back from the file,
// its records decoded, and written again with the new one.
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
	int close_group();
	int place_pending(uint64_t limit);
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
	std::deque<PRec> pend_;     // displaced keys not placed yet, in entry order
	uint64_t scan_ = 0;         // where the first of them looks next (its buckets
				    // before that have no room for it and are final)
	std::vector<uint8_t> out_;  // rendered buckets to write
};

} // namespace shmkv_build
