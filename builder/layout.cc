// builder/layout.cc - duplicates, value sharing, placement and the index.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "layout.h"

namespace shmkv_build {

namespace {

// Sorts positions so that equal byte strings are adjacent, ties in position order.
template <typename Bytes>
void sort_by_bytes(std::vector<uint32_t> &pos, const std::vector<uint64_t> &hash, Bytes bytes)
{
	std::sort(pos.begin(), pos.end(), [&](uint32_t a, uint32_t b) {
		if (hash[a] != hash[b])
			return hash[a] < hash[b];
		auto [pa, la] = bytes(a);
		auto [pb, lb] = bytes(b);
		if (la != lb)
			return la < lb;
		int c = la ? memcmp(pa, pb, la) : 0;
		return c != 0 ? c < 0 : a < b;
	});
}

// Drops duplicate keys per the policy, or fails naming the earliest duplicate.
int resolve_duplicates(shmkv_builder *b, const std::vector<uint64_t> &h, Layout &L)
{
	const auto &R = b->recs;
	size_t n = R.size();
	std::vector<uint32_t> idx(n);
	std::iota(idx.begin(), idx.end(), 0u);
	auto key = [&](uint32_t i) { return std::pair<const uint8_t *, size_t>(R[i].key, R[i].key_len); };
	sort_by_bytes(idx, h, key);
	std::vector<uint8_t> drop(n, 0);
	uint64_t dup_keys = 0, dup_recs = 0;
	uint32_t first = 0, second = UINT32_MAX;
	for (size_t s = 0; s < n;) {
		size_t e = s + 1;
		while (e < n && h[idx[e]] == h[idx[s]] && R[idx[e]].key_len == R[idx[s]].key_len &&
		       memcmp(R[idx[e]].key, R[idx[s]].key, R[idx[s]].key_len) == 0)
			e++;
		if (e - s > 1) {
			dup_keys++;
			dup_recs += e - s - 1;
			if (idx[s + 1] < second) {
				first = idx[s];
				second = idx[s + 1];
			}
			if (b->opt.on_duplicate == SHMKV_DUP_FIRST)
				for (size_t k = s + 1; k < e; k++)
					drop[idx[k]] = 1;
			else
				for (size_t k = s; k + 1 < e; k++)
					drop[idx[k]] = 1;
		}
		s = e;
	}
	if (dup_keys && b->opt.on_duplicate == SHMKV_DUP_ERROR) {
		std::string more = dup_keys > 1 ? "; " + std::to_string(dup_keys) +
							  " keys are duplicated in all"
						: "";
		return b->fail(SHMKV_EDUPKEY, "%s: duplicate key %s (first at %s)%s",
			       b->where(R[second], second).c_str(),
			       show_key(R[second].key, R[second].key_len).c_str(),
			       b->where(R[first], first).c_str(), more.c_str());
	}
	L.duplicates = dup_recs;
	L.order.reserve(n - dup_recs);
	for (uint32_t i = 0; i < n; i++)
		if (!drop[i])
			L.order.push_back(i);
	return 0;
}

constexpr uint32_t kInline = UINT32_MAX;

// Finds values worth sharing: (refs - 1) * stored size > 8 * refs.
// Returns per kept record its group (or kInline); groups are numbered in
// order of their first record.
std::vector<uint32_t> share_values(shmkv_builder *b, Layout &L)
{
	const auto &R = b->recs;
	size_t m = L.order.size();
	std::vector<uint32_t> grp(m, kInline);
	if (!b->opt.dedup)
		return grp;
	std::vector<uint64_t> vh(m);
	for (size_t k = 0; k < m; k++) {
		const Record &r = R[L.order[k]];
		vh[k] = XXH3_64bits_withSeed(r.val, r.val_len, r.type);
	}
	std::vector<uint32_t> pos(m);
	std::iota(pos.begin(), pos.end(), 0u);
	auto val = [&](uint32_t k) {
		const Record &r = R[L.order[k]];
		return std::pair<const uint8_t *, size_t>(r.val, r.val_len);
	};
	// type is part of the hash seed; compare it too so equal bytes of two types stay apart
	std::sort(pos.begin(), pos.end(), [&](uint32_t a, uint32_t c) {
		if (vh[a] != vh[c])
			return vh[a] < vh[c];
		const Record &ra = R[L.order[a]], &rc = R[L.order[c]];
		if (ra.type != rc.type)
			return ra.type < rc.type;
		auto [pa, la] = val(a);
		auto [pc, lc] = val(c);
		if (la != lc)
			return la < lc;
		int d = la ? memcmp(pa, pc, la) : 0;
		return d != 0 ? d < 0 : a < c;
	});
	std::vector<uint32_t> reps; // first record of each shared group
	std::vector<uint32_t> tmp_grp(m, kInline);
	for (size_t s = 0; s < m;) {
		size_t e = s + 1;
		const Record &rs = R[L.order[pos[s]]];
		while (e < m) {
			const Record &re = R[L.order[pos[e]]];
			if (vh[pos[e]] != vh[pos[s]] || re.type != rs.type || re.val_len != rs.val_len ||
			    (rs.val_len && memcmp(re.val, rs.val, rs.val_len) != 0))
				break;
			e++;
		}
		// Share when the entries shrink by more than the one shared copy costs.
		uint64_t refs = e - s, copy = align_up(stored_len(rs.type, rs.val_len), 8), shrink = 0;
		for (size_t k = s; k < e && refs > 1; k++) {
			const Record &r = R[L.order[pos[k]]];
			shrink += entry_size(r, false) - entry_size(r, true);
		}
		if (refs > 1 && shrink > copy) {
			for (size_t k = s; k < e; k++)
				tmp_grp[pos[k]] = (uint32_t)reps.size();
			reps.push_back(pos[s]); // smallest position: ties sort by position
			L.dedup_refs += refs;
			L.dedup_saved += shrink - copy;
		}
		s = e;
	}
	// renumber groups by first record so VALUES follows input order
	std::vector<uint32_t> by_first(reps.size());
	std::iota(by_first.begin(), by_first.end(), 0u);
	std::sort(by_first.begin(), by_first.end(),
		  [&](uint32_t a, uint32_t c) { return reps[a] < reps[c]; });
	std::vector<uint32_t> rank(reps.size());
	for (uint32_t i = 0; i < by_first.size(); i++)
		rank[by_first[i]] = i;
	for (size_t k = 0; k < m; k++)
		if (tmp_grp[k] != kInline)
			grp[k] = rank[tmp_grp[k]];
	L.shared_reps.resize(reps.size());
	for (uint32_t g = 0; g < reps.size(); g++)
		L.shared_reps[rank[g]] = reps[g];
	L.dedup_values = reps.size();
	return grp;
}

} // namespace

int compute_layout(shmkv_builder *b, Layout &L)
{
	const auto &R = b->recs;
	const auto &o = b->opt;
	size_t n = R.size();
	if (n > UINT32_MAX - 1)
		return b->fail(SHMKV_ELIMIT, "%zu records exceed the builder's limit of %u", n,
			       UINT32_MAX - 1);
	std::vector<uint64_t> h(n);
	for (size_t i = 0; i < n; i++) {
		h[i] = shmkv_key_hash(o.seed, o.hash_bits, R[i].key, R[i].key_len);
		if ((i & 0xfffff) == 0)
			b->progress("hashing", i, n);
	}
	b->progress("duplicates", 0, n);
	int err = resolve_duplicates(b, h, L);
	if (err)
		return err;
	size_t m = L.order.size();
	b->progress("sharing", 0, m);
	std::vector<uint32_t> grp = share_values(b, L);

	if (o.buckets) {
		if (o.buckets > UINT64_MAX / 64 / SHMKV_BUCKET_SLOTS || o.buckets * SHMKV_BUCKET_SLOTS < m)
			return b->fail(SHMKV_ELIMIT, "%llu buckets hold at most %llu keys, the image has %zu",
				       (unsigned long long)o.buckets,
				       (unsigned long long)(o.buckets * SHMKV_BUCKET_SLOTS), m);
		L.bucket_count = o.buckets;
	} else {
		double want = std::ceil((double)m / (SHMKV_BUCKET_SLOTS * o.load_factor));
		L.bucket_count = want < 1 ? 1 : (uint64_t)want;
	}
	if (L.bucket_count > SHMKV_MAX_IMAGE_SIZE / SHMKV_BUCKET_BYTES)
		return b->fail(SHMKV_ELIMIT, "index of %llu buckets exceeds the image size limit",
			       (unsigned long long)L.bucket_count);

	// Entries in input order; one that fits a cache line never straddles one,
	// so a hit reads its bucket line and one entry line.
	L.entries_off = SHMKV_HEADER_SIZE + L.bucket_count * SHMKV_BUCKET_BYTES;
	uint64_t pos = L.entries_off;
	L.entry_off.resize(m);
	for (size_t k = 0; k < m; k++) {
		const Record &r = R[L.order[k]];
		uint64_t sz = entry_size(r, grp[k] != kInline);
		if (sz <= 64 && (pos & 63) + sz > 64)
			pos = align_up(pos, 64);
		L.entry_off[k] = pos;
		pos += sz;
		L.value_bytes_logical += r.val_len;
	}
	L.entries_end = pos;
	L.values_off = align_up(L.entries_end, 64);
	std::vector<uint64_t> goff(L.shared_reps.size());
	pos = L.values_off;
	for (size_t g = 0; g < L.shared_reps.size(); g++) {
		const Record &r = R[L.order[L.shared_reps[g]]];
		pos = align_up(pos, 8);
		goff[g] = pos;
		pos += stored_len(r.type, r.val_len);
	}
	L.values_end = pos;
	L.file_size = align_up(L.values_end, SHMKV_FILE_ALIGN);
	if (L.file_size > SHMKV_MAX_IMAGE_SIZE)
		return b->fail(SHMKV_ELIMIT, "image of %llu bytes exceeds the format limit of %llu",
			       (unsigned long long)L.file_size, (unsigned long long)SHMKV_MAX_IMAGE_SIZE);
	L.shared_off.assign(m, 0);
	for (size_t k = 0; k < m; k++)
		if (grp[k] != kInline)
			L.shared_off[k] = goff[grp[k]];

	// Index, in two passes so that as many keys as possible live in their home
	// bucket: first every key whose home has room, then the rest, each in the
	// first later bucket with room. A home bucket records its displaced keys
	// in its meta bytes (format.h), so a miss reads one bucket.
	b->progress("indexing", 0, m);
	L.index.assign(L.bucket_count * SHMKV_BUCKET_SLOTS, 0);
	std::vector<uint8_t> fill(L.bucket_count, 0);
	std::vector<uint32_t> displaced;
	auto put = [&](uint64_t bk, size_t k, uint64_t tag) {
		L.index[bk * SHMKV_BUCKET_SLOTS + fill[bk]++] |=
			tag << SHMKV_SLOT_TAG_SHIFT | L.entry_off[k] >> 3;
	};
	for (size_t k = 0; k < m; k++) {
		uint64_t hv = h[L.order[k]];
		uint64_t bk = shmkv_home_bucket(hv, L.bucket_count);
		if (fill[bk] < SHMKV_BUCKET_SLOTS)
			put(bk, k, shmkv_key_tag(hv));
		else
			displaced.push_back((uint32_t)k);
	}
	for (uint32_t k : displaced) {
		uint64_t hv = h[L.order[k]], tag = shmkv_key_tag(hv);
		uint64_t home = shmkv_home_bucket(hv, L.bucket_count), bk = home;
		uint32_t d = 0;
		while (fill[bk] == SHMKV_BUCKET_SLOTS) {
			bk = bk + 1 == L.bucket_count ? 0 : bk + 1;
			d++;
		}
		put(bk, k, tag);
		if (d > L.max_probe)
			L.max_probe = d;
		uint64_t *hb = &L.index[home * SHMKV_BUCKET_SLOTS];
		unsigned fi = shmkv_filter_index(tag);
		hb[fi >> 3] |= UINT64_C(1) << (SHMKV_SLOT_META_SHIFT + (fi & 7));
		uint64_t cur = shmkv_slot_meta(hb[SHMKV_BUCKET_SLOTS - 1]);
		uint64_t want = d < SHMKV_DISPLACEMENT_MAX ? d : SHMKV_DISPLACEMENT_MAX;
		if (want > cur)
			hb[SHMKV_BUCKET_SLOTS - 1] = (hb[SHMKV_BUCKET_SLOTS - 1] &
						      ~(UINT64_C(0xff) << SHMKV_SLOT_META_SHIFT)) |
						     want << SHMKV_SLOT_META_SHIFT;
	}
	return 0;
}

} // namespace shmkv_build
