// builder/layout_v2.cc - the image's layout in memory (lib/FORMAT.md §6, §14):
// keys in hash order (so in home order), small entries inline in 128-byte
// buckets, the others in ENTRIES (the cache-line rule of §14) with
// values shared among them only. Placement is one serial scan over compact
// shapes that records each bucket's set; once every set is final, the
// buckets are rendered in parallel (each thread its own buckets), so the
// bytes do not depend on the thread count. spill_build.cc streams the same
// placement.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "delta.h"
#include "layout.h"
#include "v2.h"

namespace shmkv_build {

// bucket_count from the record bytes (worst padding, directory included):
// the load factor is the share of a bucket's 120 bytes after its head they fill.
int choose_buckets_v2(shmkv_builder *b, uint64_t bytes, uint64_t *out)
{
	const auto &o = b->opt;
	constexpr uint64_t room = kV2BucketBytes - kV2Head;
	uint64_t bc;
	if (o.buckets) {
		bc = o.buckets;
	} else {
		double lf = o.load_factor > 0 ? o.load_factor : SHMKV_DEFAULT_LOAD_FACTOR;
		double want = std::ceil((double)bytes / (room * lf));
		bc = want < 1 ? 1 : (uint64_t)want;
	}
	if (bc > SHMKV_MAX_IMAGE_SIZE / kV2BucketBytes)
		return b->fail(SHMKV_ELIMIT, "index of %llu buckets exceeds the image size limit",
			       (unsigned long long)bc);
	*out = bc;
	return 0;
}

int v2_no_room(shmkv_builder *b, const Layout &L, uint64_t bytes)
{
	return b->fail(SHMKV_ELIMIT, "%llu records of %llu bytes do not fit %llu buckets of %llu "
		       "record bytes: give %s", (unsigned long long)L.entries,
		       (unsigned long long)bytes, (unsigned long long)L.bucket_count,
		       (unsigned long long)(kV2BucketBytes - kV2Head),
		       b->opt.buckets ? "more buckets" : "a lower load factor");
}

int v2_more_buckets(shmkv_builder *b, Layout &L, uint64_t bytes)
{
	if (b->opt.buckets)
		return v2_no_room(b, L, bytes);
	uint64_t bc = L.bucket_count + L.bucket_count / 8 + 1;
	if (bc > SHMKV_MAX_IMAGE_SIZE / kV2BucketBytes)
		return v2_no_room(b, L, bytes);
	L.bucket_count = bc;
	return 0;
}

namespace {

// While placing, a bucket of L.index holds, besides its count (+0), D (+1)
// and filter (+2): its records' ordinals (u32 at +8, in placement order),
// the end of their layout (+72) and whether one has an 8-aligned value
// (+73); rendering replaces them with the records.
constexpr unsigned kIds = kV2Head, kEnd = kIds + 4 * kV2MaxRecords, kAligned = kEnd + 1;
static_assert(kAligned < kV2BucketBytes, "placement scratch fits a bucket");

inline uint32_t id_at(const uint8_t *bk, unsigned i)
{
	uint32_t k;
	memcpy(&k, bk + kIds + 4 * i, 4);
	return k;
}

// The end of bucket bk's layout with record k appended, or 0 when it has
// no room (count 16, or past +128). Padding depends on where each record
// starts, and the directory grows by 2 bytes a record: with 8-aligned
// values anywhere the whole layout is computed again.
unsigned end_with(const uint8_t *bk, const std::vector<V2Shape> &shape, uint32_t k)
{
	unsigned n = bk[0];
	if (n >= kV2MaxRecords)
		return 0;
	const V2Shape &s = shape[k];
	unsigned end;
	if (!bk[kAligned] && s.align == 1) // nothing moves: s goes after the last, 2 bytes on
		end = s.end((n ? bk[kEnd] : kV2Head) + kV2DirBytes);
	else
		end = v2_bucket_end(n + 1, [&](unsigned i) -> const V2Shape & {
			return i < n ? shape[id_at(bk, i)] : s;
		});
	return end <= kV2BucketBytes ? end : 0;
}

void add(uint8_t *bk, const V2Shape &s, uint32_t k, unsigned end)
{
	memcpy(bk + kIds + 4 * bk[0], &k, 4);
	bk[0]++;
	bk[kEnd] = (uint8_t)end;
	bk[kAligned] |= s.align != 1;
}

// Placement (serial, over shapes; lib/FORMAT.md §14): first come, first
// served linear probing in home order. Buckets are visited in order; at
// bucket c the keys carried over from earlier buckets go first (oldest home
// first, then in the order they were carried), then c's own home keys,
// smallest record first (ties in hash order). Each key goes into c if it
// fits (count < 16, within +128), else it is carried to c + 1; a key that
// does not fit does not stop a later smaller one. Keys carried past the
// last bucket continue at bucket 0, 1, ... into the room left. Each
// displaced key marks its home (D, filter). L.index (zeroed) gets the
// counts, D bytes, filters and each bucket's record ordinals (the scratch
// above). Returns false when some key would go all the way round.
bool place_records(Layout &L, const std::vector<V2Shape> &shape)
{
	const uint64_t B = L.bucket_count;
	size_t m = shape.size();
	L.index.assign(B * kV2BucketBytes / 8, 0);
	L.max_probe = 0;
	uint8_t *ix = (uint8_t *)L.index.data();
	std::vector<uint32_t> carry, next, grpk;
	// Visits bucket c (c >= B: bucket c - B, wrapped) with the carry, then
	// keys grpk; those that do not fit become the carry. False when the
	// oldest carried key has been round every bucket.
	auto visit = [&](uint64_t c) {
		uint8_t *bk = ix + (c < B ? c : c - B) * kV2BucketBytes;
		next.clear();
		for (const std::vector<uint32_t> *q : {&carry, &grpk})
			for (uint32_t k : *q)
				if (unsigned end = end_with(bk, shape, k)) {
					add(bk, shape[k], k, end);
					if (q == &carry) {
						uint64_t home = shmkv_home_bucket(L.hash[k], B), d = c - home;
						if (d > L.max_probe)
							L.max_probe = (uint32_t)d;
						v2_home_mark(ix + home * kV2BucketBytes,
							     shmkv_key_tag(L.hash[k]), d);
					}
				} else {
					next.push_back(k);
				}
		carry.swap(next);
		return carry.empty() || c + 1 - shmkv_home_bucket(L.hash[carry[0]], B) < B;
	};
	uint64_t c = 0; // the next bucket to visit
	for (size_t s = 0; s < m;) {
		uint64_t home = shmkv_home_bucket(L.hash[s], B);
		size_t e = s + 1;
		while (e < m && shmkv_home_bucket(L.hash[e], B) == home)
			e++;
		grpk.clear();
		for (; c < home && !carry.empty(); c++) // buckets without home keys
			visit(c); // (c < home: no key has been round)
		c = home;
		for (size_t k = s; k < e; k++)
			grpk.push_back((uint32_t)k);
		if (e - s > 1) // smallest first; ties in hash order
			std::stable_sort(grpk.begin(), grpk.end(), [&](uint32_t x, uint32_t y) {
				return shape[x].worst < shape[y].worst;
			});
		if (!visit(c++))
			return false;
		grpk.clear();
		s = e;
	}
	for (; !carry.empty(); c++) // the last buckets, then round to bucket 0
		if (!visit(c))
			return false;
	return true;
}

} // namespace

int compute_layout(shmkv_builder *b, Layout &L)
{
	const auto &R = b->recs;
	size_t n = R.size();
	unsigned T = b->threads ? b->threads : default_threads();
	if (n > UINT32_MAX - 1)
		return b->fail(SHMKV_ELIMIT, "%zu records exceed the builder's limit of %u", n,
			       UINT32_MAX - 1);
	b->progress("sorting keys", 0, n);
	Items sorted, tmp;
	int err = 0;
	if (b->presorted.on) { // merged in key order already (compact.cc)
		L.order = std::move(b->presorted.order);
		L.hash = std::move(b->presorted.hash);
		L.duplicates = b->presorted.duplicates;
	} else if ((err = sort_and_dedup_keys(b, T, L, sorted, tmp)) != 0) {
		return err;
	}
	size_t m = L.order.size();
	L.entries = m;
	if (b->delta) { // the key filter (lib/FORMAT.md §19.3), from every kept key's hash
		L.filter_words = filter_words(m);
		L.filter.assign(L.filter_words, 0);
		for (uint64_t h : L.hash)
			L.filter[filter_word(h, L.filter_words)] |= filter_mask(h);
	}

	// Shapes in parallel (records are read in a random order).
	std::vector<V2Shape> shape(m);
	std::vector<uint64_t> bytes_t(T, 0), logical_t(T, 0), outs_t(T, 0), tombs_t(T, 0);
	std::vector<uint8_t> any_exp(T, 0);
	run_threads(T, [&](unsigned t) {
		uint64_t bytes = 0, logical = 0, outs = 0, tombs = 0;
		bool exp = false;
		for (size_t k = chunk_begin(m, T, t), e = chunk_begin(m, T, t + 1); k < e; k++) {
			if (k + 16 < e)
				__builtin_prefetch(&R[L.order[k + 16]]);
			const Record &r = R[L.order[k]];
			shape[k] = v2_shape(r);
			bytes += shape[k].room();
			if (shape[k].out)
				outs++;
			else
				logical += r.val_len; // OUT records' values: place_entries counts them
			exp |= r.expires != 0;
			tombs += r.type == kTombType;
		}
		tombs_t[t] = tombs;
		bytes_t[t] = bytes;
		logical_t[t] = logical;
		outs_t[t] = outs;
		any_exp[t] = exp;
	});
	uint64_t bytes = std::accumulate(bytes_t.begin(), bytes_t.end(), uint64_t(0));
	uint64_t logical_inline = std::accumulate(logical_t.begin(), logical_t.end(), uint64_t(0));
	L.expiry = std::find(any_exp.begin(), any_exp.end(), 1) != any_exp.end();
	L.tombstones = std::accumulate(tombs_t.begin(), tombs_t.end(), uint64_t(0));
	if ((err = choose_buckets_v2(b, bytes, &L.bucket_count)))
		return err;
	// Records that do not fit (sizes that pack badly, a load factor near 1)
	// get 1/8 more buckets, again until they fit; a fixed count fails.
	b->progress("indexing", 0, m);
	while (!place_records(L, shape))
		if ((err = v2_more_buckets(b, L, bytes)))
			return err;

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

	// The buckets' bytes, in parallel: each thread renders its own buckets.
	uint8_t *ix = (uint8_t *)L.index.data();
	std::vector<uint64_t> rbytes(T, 0);
	const uint64_t B = L.bucket_count;
	run_threads(T, [&](unsigned t) {
		V2Item it[kV2MaxRecords];
		uint64_t used = 0;
		for (uint64_t c = chunk_begin(B, T, t), e = chunk_begin(B, T, t + 1); c < e; c++) {
			uint8_t *bk = ix + c * kV2BucketBytes;
			unsigned n = bk[0];
			if (c + 1 < e) {
				const uint8_t *nb = bk + kV2BucketBytes;
				for (unsigned i = 0; i < nb[0]; i++)
					__builtin_prefetch(&R[all[id_at(nb, i)]]);
			}
			for (unsigned i = 0; i < n; i++) {
				uint32_t k = id_at(bk, i);
				const Record &r = R[all[k]];
				it[i] = V2Item{r.key, r.val, r.val_len, r.expires, r.key_len,
					       (uint16_t)shmkv_key_tag(L.hash[k]), r.type, shape[k],
					       shape[k].out ? L.entry_off[outpos[k]] : 0};
			}
			memset(bk + kV2Head, 0, kV2BucketBytes - kV2Head);
			if (n) {
				used += v2_render_bucket(bk, n, [&](unsigned i) -> const V2Item & {
						return it[i];
					}) - kV2Head;
			}
		}
		rbytes[t] = used;
	});
	L.record_bytes = std::accumulate(rbytes.begin(), rbytes.end(), uint64_t(0));
	return 0;
}

} // namespace shmkv_build
