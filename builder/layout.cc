// builder/layout.cc - duplicates, value sharing and the placement of entries
// and values, the steps of layout_v2.cc's layout that a spilling build does
// its own way. Entries are in hash order (lib/FORMAT.md §14), so every phase
// is a sort or a scan that splits by hash range across threads; the output
// does not depend on the thread count.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "layout.h"
#include "parallel.h"

namespace shmkv_build {

namespace {

inline int cmp_bytes(const uint8_t *a, size_t la, const uint8_t *b, size_t lb)
{
	if (la != lb)
		return la < lb ? -1 : 1;
	return la ? memcmp(a, b, la) : 0;
}

} // namespace

// Hashes every key, sorts records by (hash, key, input position), drops
// duplicates per the policy or fails naming the earliest one. L.order and
// L.hash are the kept records in entry order.
int sort_and_dedup_keys(shmkv_builder *b, unsigned T, Layout &L, Items &sorted, Items &tmp)
{
	const auto &R = b->recs;
	const auto &o = b->opt;
	size_t n = R.size();
	bool part = b->part_n != 0;
	uint64_t lo = 0, hi = 0;
	if (part)
		shmkv_build_part_range(b->part_k, b->part_n, o.buckets, &lo, &hi);
	std::vector<size_t> bad(T, SIZE_MAX); // first record outside the part, per thread
	partition_sort(
		T, n, sorted, tmp,
		[&](size_t i, Item &it) {
			it.h = shmkv_key_hash(o.seed, o.hash_bits, R[i].key, R[i].key_len);
			if (part) {
				uint64_t bk = shmkv_home_bucket(it.h, o.buckets);
				if (bk < lo || bk >= hi) {
					unsigned t = 0; // i's chunk: the first one whose end passes i
					while (chunk_begin(n, T, t + 1) <= i)
						t++;
					if (bad[t] == SIZE_MAX)
						bad[t] = i;
					return false;
				}
			}
			return true;
		},
		[&](const Item &a, const Item &c) {
			if (a.h != c.h)
				return a.h < c.h;
			int d = cmp_bytes(R[a.i].key, R[a.i].key_len, R[c.i].key, R[c.i].key_len);
			return d != 0 ? d < 0 : a.i < c.i;
		});
	if (part) {
		size_t first_bad = *std::min_element(bad.begin(), bad.end());
		L.filtered = n - sorted.size();
		if (first_bad != SIZE_MAX && !b->part_filter)
			return part_error(b, b->where(R[first_bad], first_bad), R[first_bad].key,
					  R[first_bad].key_len);
	}
	size_t s_n = sorted.size();
	DupScan d;
	uint32_t first = 0, second = UINT32_MAX;
	L.order.reserve(s_n);
	L.hash.reserve(s_n);
	hugepage_hint(L.order.data(), s_n * sizeof(uint32_t));
	hugepage_hint(L.hash.data(), s_n * sizeof(uint64_t));
	scan_duplicates(
		s_n, o.on_duplicate, d,
		[&](size_t x, size_t y) {
			const Record &rx = R[sorted[x].i], &ry = R[sorted[y].i];
			return sorted[x].h == sorted[y].h &&
			       cmp_bytes(rx.key, rx.key_len, ry.key, ry.key_len) == 0;
		},
		[&](size_t x) { return (uint64_t)sorted[x].i; },
		[&](size_t k) {
			const Record &r = R[sorted[k].i];
			if (!b->kept(r.type, r.key, r.key_len))
				return; // a merge's tombstone: its key leaves (lib/FORMAT.md §19.5)
			L.order.push_back(sorted[k].i);
			L.hash.push_back(sorted[k].h);
		},
		[&](size_t f, size_t sc) {
			first = sorted[f].i;
			second = sorted[sc].i;
		});
	uint64_t dup_keys = d.keys, dup_recs = d.recs;
	if (dup_keys && o.on_duplicate == SHMKV_DUP_ERROR)
		return dup_error(b, b->where(R[second], second),
				 show_key(R[second].key, R[second].key_len),
				 b->where(R[first], first), dup_keys);
	L.duplicates = dup_recs;
	return 0;
}

// Finds values worth sharing: the entries shrink by more than the one shared
// copy costs. Returns per entry its group (or kInline); groups are numbered in
// order of their first entry.
std::vector<uint32_t> share_values(shmkv_builder *b, unsigned T, Layout &L, Items &sorted, Items &tmp)
{
	const auto &R = b->recs;
	size_t m = L.order.size();
	std::vector<uint32_t> grp(m, kInline);
	if (!b->opt.dedup || m == 0)
		return grp;
	// the type seeds the hash and is compared, so equal bytes of two types stay apart
	partition_sort(
		T, m, sorted, tmp,
		[&](size_t k, Item &it) {
			prefetch_ahead(R, L.order, k, m, false);
			const Record &r = R[L.order[k]];
			it.h = XXH3_64bits_withSeed(r.val, r.val_len, r.type);
			return true;
		},
		[&](const Item &a, const Item &c) {
			if (a.h != c.h)
				return a.h < c.h;
			const Record &ra = R[L.order[a.i]], &rc = R[L.order[c.i]];
			if (ra.type != rc.type)
				return ra.type < rc.type;
			int d = cmp_bytes(ra.val, ra.val_len, rc.val, rc.val_len);
			return d != 0 ? d < 0 : a.i < c.i;
		});
	struct Group {
		uint32_t rep; // first entry: ties sort by entry position
		size_t s, e;  // its members in sorted
	};
	std::vector<Group> groups;
	for (size_t s = 0; s < m;) {
		size_t e = s + 1;
		if (e == m || sorted[e].h != sorted[s].h) { // the common case: a value of its own
			s = e;
			continue;
		}
		const Record &rs = R[L.order[sorted[s].i]];
		if (rs.type == kTombType) { // tombstones have no value to share (§19.1)
			while (e < m && sorted[e].h == sorted[s].h && R[L.order[sorted[e].i]].type == kTombType)
				e++;
			s = e;
			continue;
		}
		while (e < m && sorted[e].h == sorted[s].h) {
			const Record &re = R[L.order[sorted[e].i]];
			if (re.type != rs.type || cmp_bytes(re.val, re.val_len, rs.val, rs.val_len) != 0)
				break;
			e++;
		}
		uint64_t refs = e - s, copy = align_up(stored_len(rs.type, rs.val_len), 8);
		int64_t gain = 0;
		for (size_t k = s; k < e && refs > 1; k++) {
			const Record &r = R[L.order[sorted[k].i]];
			gain += share_gain(r.key_len, r.type, r.val_len);
		}
		if (worth_sharing(refs, gain, rs.type, rs.val_len)) {
			groups.push_back({sorted[s].i, s, e});
			L.dedup_refs += refs;
			L.dedup_saved += (uint64_t)gain - copy;
		}
		s = e;
	}
	// VALUES follows entry order: groups by their first entry
	std::sort(groups.begin(), groups.end(),
		  [](const Group &a, const Group &c) { return a.rep < c.rep; });
	L.shared_reps.resize(groups.size());
	for (uint32_t g = 0; g < groups.size(); g++) {
		L.shared_reps[g] = groups[g].rep;
		for (size_t x = groups[g].s; x < groups[g].e; x++)
			grp[sorted[x].i] = g;
	}
	L.dedup_values = groups.size();
	return grp;
}

int dup_error(shmkv_builder *b, const std::string &second, const std::string &key,
	      const std::string &first, uint64_t dup_keys)
{
	std::string more = dup_keys > 1 ? "; " + std::to_string(dup_keys) + " keys are duplicated in all"
					: "";
	return b->fail(SHMKV_EDUPKEY, "%s: duplicate key %s (first at %s)%s", second.c_str(),
		       key.c_str(), first.c_str(), more.c_str());
}

int set_file_size(shmkv_builder *b, Layout &L)
{
	uint64_t end = L.values_end;
	if (b->delta) {
		L.filter_off = align_up(L.values_end, 64);
		end = L.filter_off + 8 * L.filter_words;
	}
	L.file_size = align_up(end, SHMKV_FILE_ALIGN);
	if (L.file_size > SHMKV_MAX_IMAGE_SIZE)
		return b->fail(SHMKV_ELIMIT, "image of %llu bytes exceeds the format limit of %llu",
			       (unsigned long long)L.file_size, (unsigned long long)SHMKV_MAX_IMAGE_SIZE);
	return 0;
}

int place_entries(shmkv_builder *b, unsigned T, Layout &L, std::vector<uint32_t> &grp,
		  uint64_t index_bytes)
{
	const auto &R = b->recs;
	size_t m = L.order.size();
	// Entries in hash order; one that fits a cache line never straddles one,
	// so a hit reads its bucket line and one entry line. Sizes in parallel
	// (records are read in a random order), positions in one cheap scan.
	b->progress("placing", 0, m);
	std::vector<uint32_t> size(m);
	std::vector<uint64_t> logical(T, 0);
	run_threads(T, [&](unsigned t) {
		uint64_t sum = 0;
		for (size_t k = chunk_begin(m, T, t), e = chunk_begin(m, T, t + 1); k < e; k++) {
			if (k + 16 < e)
				__builtin_prefetch(&R[L.order[k + 16]]);
			const Record &r = R[L.order[k]];
			size[k] = (uint32_t)entry_size(r, grp[k] != kInline);
			sum += r.val_len;
		}
		logical[t] = sum;
	});
	L.value_bytes_logical = std::accumulate(logical.begin(), logical.end(), uint64_t(0));
	L.entries_off = SHMKV_HEADER_SIZE + index_bytes;
	uint64_t pos = L.entries_off;
	L.entry_off.resize(m);
	for (size_t k = 0; k < m; k++)
		L.entry_off[k] = place_entry(pos, size[k]);
	size = std::vector<uint32_t>();
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
	if (int err = set_file_size(b, L))
		return err;
	L.group = std::move(grp);
	L.group_off = std::move(goff);

	return 0;
}

} // namespace shmkv_build
