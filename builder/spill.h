// builder/spill.h - what the spilling build's two files share (spill.cc:
// reading and spilling the records; spill_build.cc: the phases after them):
// the partitioning constants and the Spill state (builder/README.md, "Memory").
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "internal.h"
#include "spillfile.h"

namespace shmkv_build {

constexpr unsigned kTopBits = 8;   // 256 partitions by the top bits of a hash
constexpr unsigned kSplitBits = 4; // a partition too large is split 16 ways
constexpr uint64_t kInMemPerRecord = 112; // records, sort items, layout, index
constexpr uint64_t kLeafPerRecord = 64;   // a loaded partition: pointers, tables

inline size_t top(uint64_t h)
{
	return (size_t)(h >> (64 - kTopBits));
}

inline int cmp_bytes(const uint8_t *a, size_t la, const uint8_t *b, size_t lb)
{
	if (la != lb)
		return la < lb ? -1 : 1;
	return la ? memcmp(a, b, la) : 0;
}

class Spill {
public:
	shmkv_builder *b;
	std::string dir;
	uint64_t limit;
	size_t cap; // buffered bytes of one spill file
	SpillFile keys;

	// Values seen once and more than once, by a hash bit: a value seen
	// once cannot be shared, and only the others go to the value
	// partitions (most values are distinct; a false positive only costs its
	// copy there). limit/16 bytes each.
	std::vector<uint64_t> once, twice;
	unsigned vbits = 0;

	Spill(shmkv_builder *bb) : b(bb), limit(bb->mem_limit)
	{
		cap = (size_t)std::min<uint64_t>(std::max<uint64_t>(limit / 16, 256 << 10), 64 << 20);
		if (b->opt.dedup) {
			vbits = 16;
			while (vbits < 40 && (uint64_t(1) << (vbits + 1)) / 8 <= limit / 16)
				vbits++;
			once.assign(size_t(1) << (vbits - 6), 0);
			twice.assign(size_t(1) << (vbits - 6), 0);
		}
	}
	static uint64_t value_hash(const uint8_t *val, uint32_t len, unsigned type)
	{
		return XXH3_64bits_withSeed(val, len, type);
	}
	void saw_value(uint64_t vh)
	{
		uint64_t i = vh >> (64 - vbits), m = uint64_t(1) << (i & 63);
		if (once[i >> 6] & m)
			twice[i >> 6] |= m;
		else
			once[i >> 6] |= m;
	}
	bool maybe_repeated(uint64_t vh) const
	{
		uint64_t i = vh >> (64 - vbits);
		return twice[i >> 6] >> (i & 63) & 1;
	}
	bool fits(uint64_t bytes, uint64_t count) const
	{
		return bytes + count * kLeafPerRecord <= limit / 4;
	}
	// Calls fn(buffer) for each leaf of partition p of f in hash order: a
	// partition over the leaf budget is split by the next bits of h, and
	// one whose records all have the same h (a key repeated, a value shared,
	// millions of times) goes to one(f, p), which streams it.
	template <typename F, typename G>
	int leaves(SpillFile &f, size_t p, unsigned used, F &fn, G &one)
	{
		if (fits(f.bytes(p), f.count(p))) {
			std::vector<uint8_t> buf;
			int err = f.load(p, buf);
			f.release(p);
			return err ? err : fn(buf);
		}
		if (f.one_hash(p) || used + kSplitBits > 64) {
			int err = one(f, p);
			f.release(p);
			return err;
		}
		SpillFile sub;
		int err = sub.open(b, dir, size_t(1) << kSplitBits, cap);
		if (!err) {
			SpillReader r(f, p);
			err = r.each([&](const SRec &x) {
				size_t q = (size_t)((x.h << used) >> (64 - kSplitBits));
				return sub.append(q, x, x.data(), x.body);
			});
		}
		f.release(p);
		if (!err)
			err = sub.flush();
		for (size_t q = 0; !err && q < sub.parts(); q++)
			err = leaves(sub, q, used + kSplitBits, fn, one);
		return err;
	}
};

// The records in memory go to their partitions, and memory is freed (spill.cc).
int flush_run(shmkv_builder *b);

} // namespace shmkv_build
