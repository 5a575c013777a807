// builder/layout_v2.cc - the format 2 layout (lib/FORMAT.md §14, format 2):
// keys in hash order (so in home order), small entries inline in 128-byte
// buckets, the others in ENTRIES (v1 entries, the v1 cache-line rule) with
// values shared among them only. Placement is one serial scan over compact
// shapes; rendering the records is parallel (each writes its own bytes), so
// the bytes do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "layout.h"
#include "v2.h"

namespace shmkv_build {

namespace {

// bucket_count from the record bytes (worst padding): the load factor is the
// share of a bucket's 120 record bytes they fill.
int choose_buckets_v2(shmkv_builder *b, uint64_t bytes, uint64_t *out)
{
	const auto &o = b->opt;
	constexpr uint64_t room = kV2BucketBytes - kV2RecStart;
	uint64_t bc;
	if (o.buckets) {
		bc = o.buckets;
	} else {
		double lf = o.load_factor > 0 ? o.load_factor : SHMKV_DEFAULT_LOAD_FACTOR_V2;
		double want = std::ceil((double)bytes / (room * lf));
		bc = want < 1 ? 1 : (uint64_t)want;
	}
	if (bc > SHMKV_MAX_IMAGE_SIZE / kV2BucketBytes)
		return b->fail(SHMKV_ELIMIT, "index of %llu buckets exceeds the image size limit",
			       (unsigned long long)bc);
	*out = bc;
	return 0;
}

int no_room(shmkv_builder *b, const Layout &L, uint64_t bytes)
{
	return b->fail(SHMKV_ELIMIT, "%llu records of %llu bytes do not fit %llu buckets of %llu "
		       "record bytes: give %s", (unsigned long long)L.entries,
		       (unsigned long long)bytes, (unsigned long long)L.bucket_count,
		       (unsigned long long)(kV2BucketBytes - kV2RecStart),
		       b->opt.buckets ? "more buckets" : "a lower load factor");
}

// Placement (serial, over shapes): pass 1 fills each bucket with its home
// keys, smallest first, while they fit; pass 2 puts the rest, in home order,
// into the next bucket with room. at[k]: where record k goes (bucket * 128 +
// byte); ix: the index (zeroed), its counts, D bytes and filters set.
// Returns false when some record finds no room.
bool place_records(Layout &L, const std::vector<V2Shape> &shape, std::vector<uint64_t> &at)
{
	const uint64_t B = L.bucket_count;
	size_t m = shape.size();
	L.index.assign(B * kV2BucketBytes / 8, 0);
	L.max_probe = 0;
	L.record_bytes = 0;
	uint8_t *ix = (uint8_t *)L.index.data();
	std::vector<uint8_t> fill(B, kV2RecStart); // a bucket's next free byte
	std::vector<uint32_t> displaced, grpk;
	for (size_t s = 0; s < m;) {
		uint64_t home = shmkv_home_bucket(L.hash[s], B);
		size_t e = s + 1;
		while (e < m && shmkv_home_bucket(L.hash[e], B) == home)
			e++;
		grpk.clear();
		for (size_t k = s; k < e; k++)
			grpk.push_back((uint32_t)k);
		if (e - s > 1) // smallest first; ties in hash order
			std::stable_sort(grpk.begin(), grpk.end(), [&](uint32_t x, uint32_t y) {
				return shape[x].worst < shape[y].worst;
			});
		for (uint32_t k : grpk) {
			unsigned end = shape[k].end(fill[home]);
			if (end <= kV2BucketBytes) {
				L.record_bytes += end - fill[home];
				at[k] = home * kV2BucketBytes + fill[home];
				fill[home] = (uint8_t)end;
				ix[home * kV2BucketBytes]++;
			} else {
				at[k] = UINT64_MAX;
			}
		}
		for (size_t k = s; k < e; k++) // the rest, in hash order
			if (at[k] == UINT64_MAX)
				displaced.push_back((uint32_t)k);
		s = e;
	}
	for (uint32_t k : displaced) {
		uint64_t home = shmkv_home_bucket(L.hash[k], B), c = home, d = 0;
		unsigned end;
		do {
			c = c + 1 == B ? 0 : c + 1;
			if (++d >= B)
				return false;
		} while ((end = shape[k].end(fill[c])) > kV2BucketBytes);
		L.record_bytes += end - fill[c];
		at[k] = c * kV2BucketBytes + fill[c];
		fill[c] = (uint8_t)end;
		ix[c * kV2BucketBytes]++;
		if (d > L.max_probe)
			L.max_probe = (uint32_t)d;
		v2_home_mark(ix + home * kV2BucketBytes, shmkv_key_tag(L.hash[k]), d);
	}
	return true;
}

} // namespace

int compute_layout_v2(shmkv_builder *b, Layout &L)
{
	const auto &R = b->recs;
	size_t n = R.size();
	unsigned T = b->threads ? b->threads : default_threads();
	L.format = 2;
	L.bucket_bytes = kV2BucketBytes;
	if (n > UINT32_MAX - 1)
		return b->fail(SHMKV_ELIMIT, "%zu records exceed the builder's limit of %u", n,
			       UINT32_MAX - 1);
	b->progress("sorting keys", 0, n);
	Items sorted, tmp;
	int err = sort_and_dedup_keys(b, T, L, sorted, tmp);
	if (err)
		return err;
	size_t m = L.order.size();
	L.entries = m;

	// Shapes in parallel (records are read in a random order).
	std::vector<V2Shape> shape(m);
	std::vector<uint64_t> bytes_t(T, 0), logical_t(T, 0), outs_t(T, 0);
	std::vector<uint8_t> any_exp(T, 0);
	run_threads(T, [&](unsigned t) {
		uint64_t bytes = 0, logical = 0, outs = 0;
		bool exp = false;
		for (size_t k = chunk_begin(m, T, t), e = chunk_begin(m, T, t + 1); k < e; k++) {
			if (k + 16 < e)
				__builtin_prefetch(&R[L.order[k + 16]]);
			const Record &r = R[L.order[k]];
			shape[k] = v2_shape(r);
			bytes += shape[k].worst;
			if (shape[k].out)
				outs++;
			else
				logical += r.val_len; // OUT records' values: place_entries counts them
			exp |= r.expires != 0;
		}
		bytes_t[t] = bytes;
		logical_t[t] = logical;
		outs_t[t] = outs;
		any_exp[t] = exp;
	});
	uint64_t bytes = std::accumulate(bytes_t.begin(), bytes_t.end(), uint64_t(0));
	uint64_t logical_inline = std::accumulate(logical_t.begin(), logical_t.end(), uint64_t(0));
	L.expiry = std::find(any_exp.begin(), any_exp.end(), 1) != any_exp.end();
	if ((err = choose_buckets_v2(b, bytes, &L.bucket_count)))
		return err;
	// Records that do not fit (sizes that pack badly, a load factor near 1)
	// get 1/8 more buckets, again until they fit; a fixed count fails.
	b->progress("indexing", 0, m);
	std::vector<uint64_t> at(m);
	while (!place_records(L, shape, at)) {
		if (b->opt.buckets)
			return no_room(b, L, bytes);
		L.bucket_count += L.bucket_count / 8 + 1;
		if (L.bucket_count > SHMKV_MAX_IMAGE_SIZE / kV2BucketBytes)
			return no_room(b, L, bytes);
	}

	// ENTRIES: the OUT records' entries, in hash order, values shared among
	// them only (an inline value is in its bucket already).
	std::vector<uint32_t> all = std::move(L.order), outpos(m, UINT32_MAX);
	L.order.clear();
	L.order.reserve(std::accumulate(outs_t.begin(), outs_t.end(), uint64_t(0)));
	for (size_t k = 0; k < m; k++)
		if (shape[k].out) {
			outpos[k] = (uint32_t)L.order.size();
			L.order.push_back(all[k]);
		}
	b->progress("sharing", 0, L.order.size());
	std::vector<uint32_t> grp = share_values(b, T, L, sorted, tmp);
	sorted = Items();
	tmp = Items();
	if ((err = place_entries(b, T, L, grp, L.bucket_count * kV2BucketBytes)))
		return err;
	L.value_bytes_logical += logical_inline;

	// The records' bytes, in parallel: each writes only its own.
	uint8_t *ix = (uint8_t *)L.index.data();
	run_threads(T, [&](unsigned t) {
		for (size_t k = chunk_begin(m, T, t), e = chunk_begin(m, T, t + 1); k < e; k++) {
			prefetch_ahead(R, all, k, e, true);
			const Record &r = R[all[k]];
			uint64_t bk = at[k] / kV2BucketBytes;
			uint64_t eoff = shape[k].out ? L.entry_off[outpos[k]] : 0;
			v2_render(ix + bk * kV2BucketBytes, (unsigned)(at[k] % kV2BucketBytes), r,
				  shape[k], (uint16_t)shmkv_key_tag(L.hash[k]), eoff);
		}
	});
	return 0;
}

} // namespace shmkv_build
