// builder/parallel.h - the builder's threads: run_threads() and a partitioned
// sort of (hash, index) items. Workers never allocate (allocation failures stay
// in the calling thread, where they become -ENOMEM).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

#include "internal.h"

namespace shmkv_build {

// Threads a build uses when the caller did not say: the online CPUs, at most 64.
unsigned default_threads();

// Calls fn(t) for t in [0, T), on T threads (the caller's among them). A
// thread that cannot be started runs its share in the caller.
template <typename F>
void run_threads(unsigned T, F fn)
{
	std::vector<std::thread> th;
	std::vector<unsigned> inline_t;
	if (T > 1) {
		try {
			th.reserve(T - 1);
		} catch (...) {
		}
	}
	for (unsigned t = 1; t < T; t++) {
		try {
			th.emplace_back(fn, t);
		} catch (...) {
			inline_t.push_back(t); // reserved above: no allocation
		}
	}
	fn(0u);
	for (unsigned t : inline_t)
		fn(t);
	for (auto &x : th)
		x.join();
}

// Chunk t of [0, n) split into T near-equal contiguous chunks.
inline size_t chunk_begin(size_t n, unsigned T, unsigned t)
{
	return (size_t)((unsigned __int128)n * t / T);
}

struct Item {
	uint64_t h;
	uint32_t i;
	uint32_t pad;
};

using Items = std::vector<Item, NoInit<Item>>;

// Sorts the items gen(i, &item) emits (out and tmp are reused buffers) for i in [0, n) (gen returns false to
// emit none) into out, ascending by less(). Items are scattered by the top
// kBits of h, in order of i within each partition, and each partition is then
// sorted on its own: less must order by h first.
template <typename Gen, typename Less>
void partition_sort(unsigned T, size_t n, Items &out, Items &tmp, Gen gen,
		    Less less)
{
	constexpr unsigned kBits = 12, kParts = 1u << kBits;
	tmp.reserve(n);
	hugepage_hint(tmp.data(), n * sizeof(Item));
	tmp.resize(n);
	std::vector<size_t> count((size_t)T * kParts, 0), emitted(T, 0);
	run_threads(T, [&](unsigned t) {
		size_t b = chunk_begin(n, T, t), e = chunk_begin(n, T, t + 1), w = b;
		size_t *c = &count[(size_t)t * kParts];
		for (size_t i = b; i < e; i++) {
			Item &it = tmp[w];
			if (gen(i, it)) {
				it.i = (uint32_t)i;
				it.pad = 0;
				c[it.h >> (64 - kBits)]++;
				w++;
			}
		}
		emitted[t] = w - b;
	});
	// offsets: partition-major, thread-minor, so each partition keeps index order
	size_t total = 0;
	std::vector<size_t> part_begin(kParts + 1);
	for (unsigned p = 0; p < kParts; p++) {
		part_begin[p] = total;
		for (unsigned t = 0; t < T; t++) {
			size_t c = count[(size_t)t * kParts + p];
			count[(size_t)t * kParts + p] = total;
			total += c;
		}
	}
	part_begin[kParts] = total;
	out.reserve(total);
	hugepage_hint(out.data(), total * sizeof(Item));
	out.resize(total);
	run_threads(T, [&](unsigned t) {
		size_t b = chunk_begin(n, T, t);
		size_t *c = &count[(size_t)t * kParts];
		for (size_t x = b; x < b + emitted[t]; x++)
			out[c[tmp[x].h >> (64 - kBits)]++] = tmp[x];
	});
	// relaxed: the counter only hands out partitions; join() publishes the sorts
	std::atomic<unsigned> next{0};
	run_threads(T, [&](unsigned) {
		for (unsigned p; (p = next.fetch_add(1, std::memory_order_relaxed)) < kParts;)
			std::sort(out.begin() + (ptrdiff_t)part_begin[p],
				  out.begin() + (ptrdiff_t)part_begin[p + 1], less);
	});
}

} // namespace shmkv_build
