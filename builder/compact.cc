// builder/compact.cc - merges of images in their key order, for the loader:
// shmkv_builder_add_images() (its overlays: the new changes over a top, a
// top over the lower) and shmkv_build_compact(), its compaction, a base and
// its chain of deltas merged into the image shmkv_build_apply() writes,
// byte for byte, at a fraction of its cost:
//
// - the base is trusted (its loader verified it at its load): it gets the
//   open's checks (header, every checksum), not the full structural check;
//   the deltas, small, are verified whole;
// - records are referenced where they lie in the mapped images (no copy,
//   no second check of each value);
// - no sort of all records: the base's records, read bucket by bucket, are
//   in key order but for the few displaced a bucket or two (lib/FORMAT.md
//   §6.3, §14), which an insertion sort puts back; the changes (sorted,
//   the last word on each key kept) are merged into that stream.
//
// The layout and the write are the build's (compute_layout, write_image),
// on the same kept records in the same key order: the same bytes. When the
// memory limit is too small for the records in memory, the merge is the
// build of apply (the spilling build), the base still trusted.
#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <memory>

#include "apply.h"
#include "layout.h"
#include "spill.h"

namespace {

using namespace shmkv_build;

// A record of an image in key order: its hash, and where its record is.
struct Keyed {
	uint64_t h;
	const uint8_t *key;
	uint32_t key_len;
	uint32_t i; // base: index into the builder's records; change: its ordinal
};

bool key_less(const Keyed &a, const Keyed &c)
{
	if (a.h != c.h)
		return a.h < c.h;
	return cmp_bytes(a.key, a.key_len, c.key, c.key_len) < 0;
}

// Sorts v by key_less, nearly sorted as it is: an insertion sort, each
// element moved back past the few it belongs before. A base whose records
// lie farther from their homes than the builder puts them (a budget of
// moves spent) is sorted whole instead.
void sort_nearly_sorted(std::vector<Keyed> &v)
{
	uint64_t budget = 64 * (uint64_t)v.size() + 4096;
	for (size_t k = 1; k < v.size(); k++) {
		if (!key_less(v[k], v[k - 1]))
			continue;
		Keyed x = v[k];
		size_t j = k;
		for (; j > 0 && key_less(x, v[j - 1]) && budget; j--, budget--)
			v[j] = v[j - 1];
		v[j] = x;
		if (!budget) {
			std::sort(v.begin(), v.end(), key_less);
			return;
		}
	}
}

// One record of an image (the all-records iteration: expired records too,
// a delta's tombstones) as a builder record pointing into the mapping.
Record record_of(const void *key, size_t key_len, const shmkv_value &v, uint32_t expires)
{
	Record r;
	memset(&r, 0, sizeof r);
	r.key = (const uint8_t *)key;
	r.key_len = (uint16_t)key_len;
	r.val = (const uint8_t *)v.data;
	r.val_len = (uint32_t)v.size;
	r.type = (uint8_t)v.type;
	r.src = kNoSource;
	r.expires = expires;
	return r;
}

int iter_error(const char *path, uint64_t count, int err, ErrMsg &m)
{
	return m.set(err, "%s: entry %" PRIu64 ": %s; 'shmctl image verify' says more", path,
		     count + 1, shmkv_strerror(err));
}

// The records of db (all of them) appended to R, and their keys, hashed
// with seed and bits, to keys in db's order (i: the index into R). A
// tombstone is taken where tombs, else it stops the read. Returns 0, 1 (a
// tombstone) or the iteration's error; count: the records read before.
int read_keyed(const shmkv *db, uint64_t seed, unsigned bits, bool tombs, Records &R,
	       std::vector<Keyed> &keys, uint64_t &count)
{
	shmkv_iter it;
	const void *key;
	size_t key_len;
	shmkv_value v;
	int err;
	count = 0;
	shmkv_iter_init_all(db, &it);
	while ((err = shmkv_iter_next(&it, &key, &key_len, &v)) == 0) {
		if (v.type == kTombType && !tombs)
			return 1;
		keys.push_back(Keyed{shmkv_key_hash(seed, bits, key, key_len), (const uint8_t *)key,
				     (uint32_t)key_len, (uint32_t)R.size()});
		R.push_back(record_of(key, key_len, v, shmkv_iter_expires(&it)));
		count++;
	}
	return err == SHMKV_EEND ? 0 : err;
}

// The changes of deltas[0..n) (c.dbs[1..n]): per key the last delta's
// record, in key order, into ch (records) and keys (their keys, i their
// index in ch); dups: records dropped (a key of several deltas).
int read_changes(const char *const *deltas, size_t n, const Chain &c, const ImageId &bid,
		 Records &ch, std::vector<Keyed> &keys, uint64_t &dups, ErrMsg &m)
{
	for (size_t k = 0; k < n; k++) {
		uint64_t count;
		if (int err = read_keyed(c.dbs[k + 1], bid.seed, bid.hash_bits, true, ch, keys, count))
			return iter_error(deltas[k], count, err, m);
	}
	// key order, then chain order (ordinals ascend along the chain)
	std::sort(keys.begin(), keys.end(), [](const Keyed &a, const Keyed &c) {
		return key_less(a, c) || (!key_less(c, a) && a.i < c.i);
	});
	size_t w = 0;
	for (size_t s = 0; s < keys.size();) {
		size_t e = s + 1;
		while (e < keys.size() && !key_less(keys[s], keys[e]))
			e++;
		dups += e - s - 1;
		keys[w++] = keys[e - 1]; // the chain's last word
		s = e;
	}
	keys.resize(w);
	return 0;
}

// The merge in memory: the base's records into b->recs, the changes'
// upserts after them, and b->presorted the kept ones in key order.
int merge_in_memory(shmkv_builder *b, const char *base, const char *const *deltas, size_t n,
		    const Chain &c, ErrMsg &m)
{
	const ImageId &bid = c.base;
	Records ch;
	std::vector<Keyed> changes;
	uint64_t dups = 0;
	if (int err = read_changes(deltas, n, c, bid, ch, changes, dups, m))
		return err;

	const shmkv *db = c.dbs[0];
	uint64_t nb = shmkv_header(db)->entry_count;
	Records &R = b->recs;
	R.reserve(nb + changes.size());
	std::vector<Keyed> bk;
	bk.reserve(nb);
	b->progress("reading", 0, nb);
	uint64_t count; // a plain image holds no tombstone (its open checked)
	if (int err = read_keyed(db, bid.seed, bid.hash_bits, false, R, bk, count))
		return iter_error(base, count, err > 0 ? SHMKV_ECORRUPT : err, m);
	b->progress("sorting keys", 0, nb);
	sort_nearly_sorted(bk);

	auto &P = b->presorted;
	P.on = true;
	P.order.reserve(bk.size() + changes.size());
	P.hash.reserve(bk.size() + changes.size());
	P.duplicates = dups;
	auto take = [&](const Keyed &k) {
		P.order.push_back(k.i);
		P.hash.push_back(k.h);
	};
	auto change = [&](const Keyed &k) { // an upsert stays, a tombstone leaves
		if (ch[k.i].type == kTombType)
			return;
		Keyed u = k;
		u.i = (uint32_t)R.size();
		R.push_back(ch[k.i]);
		take(u);
	};
	size_t i = 0, j = 0;
	while (i < bk.size() || j < changes.size()) {
		if (j == changes.size() || (i < bk.size() && key_less(bk[i], changes[j]))) {
			take(bk[i++]);
		} else if (i == bk.size() || key_less(changes[j], bk[i])) {
			change(changes[j++]);
		} else { // the change replaces or removes the base's record
			P.duplicates++;
			change(changes[j++]);
			i++;
		}
	}
	return 0;
}

// The records of db (all of them) appended to R, and their keys in key
// order into keys (i: the index into R). image: db's place (1..n) in
// messages.
int image_keyed(shmkv_builder *b, const shmkv *db, size_t image, size_t n, Records &R,
		std::vector<Keyed> &keys)
{
	keys.clear();
	keys.reserve(shmkv_header(db)->entry_count);
	uint64_t count;
	int err = read_keyed(db, b->opt.seed, b->opt.hash_bits, b->removes, R, keys, count);
	if (err > 0)
		return b->fail(SHMKV_EINPUT, "image %zu of %zu: entry %" PRIu64 ": a tombstone: "
			       "only a delta build takes removals", image, n, count + 1);
	if (err)
		return b->fail(err, "image %zu of %zu: entry %" PRIu64 ": %s", image, n, count + 1,
			       shmkv_strerror(err));
	sort_nearly_sorted(keys);
	for (size_t k = 1; k < keys.size(); k++)
		if (!key_less(keys[k - 1], keys[k]))
			return b->fail(SHMKV_ECORRUPT, "image %zu of %zu: key %s twice", image, n,
				       show_key(keys[k].key, keys[k].key_len).c_str());
	return 0;
}

// shmkv_builder_add_images: each image's keys merged into the kept ones so
// far (an earlier image's record of a key wins), then b->presorted.
int add_images(shmkv_builder *b, const shmkv *const *dbs, size_t n)
{
	Records &R = b->recs;
	uint64_t total = 0;
	for (size_t k = 0; k < n; k++)
		total += shmkv_header(dbs[k])->entry_count;
	if (total > UINT32_MAX - 1)
		return b->fail(SHMKV_ELIMIT, "%" PRIu64 " records exceed the builder's limit of %u",
			       total, UINT32_MAX - 1);
	R.reserve(total);
	std::vector<Keyed> kept, img, merged;
	uint64_t dups = 0;
	for (size_t k = 0; k < n; k++) {
		if (int err = image_keyed(b, dbs[k], k + 1, n, R, k ? img : kept))
			return err;
		if (!k)
			continue;
		merged.clear();
		merged.reserve(kept.size() + img.size());
		size_t i = 0, j = 0;
		while (i < kept.size() || j < img.size()) {
			if (j == img.size() || (i < kept.size() && key_less(kept[i], img[j]))) {
				merged.push_back(kept[i++]);
			} else if (i == kept.size() || key_less(img[j], kept[i])) {
				merged.push_back(img[j++]);
			} else { // the earlier image's record stays
				merged.push_back(kept[i++]);
				j++;
				dups++;
			}
		}
		kept.swap(merged);
	}
	auto &P = b->presorted;
	P.order.reserve(kept.size());
	P.hash.reserve(kept.size());
	for (const Keyed &x : kept) {
		const Record &r = R[x.i];
		if (!b->kept(r.type, r.key, r.key_len))
			continue;
		P.order.push_back(x.i);
		P.hash.push_back(x.h);
	}
	P.duplicates = dups;
	P.on = true;
	return 0;
}

} // namespace

extern "C" int shmkv_builder_add_images(shmkv_builder *b, const shmkv *const *dbs, size_t n)
{
	if (b->finished)
		return b->fail(-EINVAL, "builder already finished");
	if (b->nrecs() || b->seq0 || b->presorted.on || b->spill)
		return b->fail(-EINVAL, "images are merged into a builder with no records yet, "
					"as its one input");
	if (b->part_n)
		return b->fail(-EINVAL, "a part build (%" PRIu64 "/%" PRIu64 ") takes records, not "
			       "images merged", b->part_k, b->part_n);
	if (!dbs || !n)
		return b->fail(-EINVAL, "no image to merge");
	for (size_t k = 0; k < n; k++) {
		ImageId id;
		image_id_of(dbs[k], &id);
		if (id.seed != b->opt.seed || id.hash_bits != b->opt.hash_bits)
			return b->fail(-EINVAL, "image %zu of %zu has the seed %s and %u hash bits, the "
				       "build %s and %u: its keys' order is another", k + 1, n,
				       hex64(id.seed).c_str(), id.hash_bits, hex64(b->opt.seed).c_str(),
				       b->opt.hash_bits);
	}
	try {
		int err = add_images(b, dbs, n);
		if (err) { // nothing of it stays
			b->recs.clear();
			b->presorted.order.clear();
			b->presorted.hash.clear();
		}
		return err;
	} catch (const std::bad_alloc &) {
		b->recs.clear();
		return b->fail(-ENOMEM, "out of memory merging %zu images", n);
	}
}

extern "C" int shmkv_build_compact(const char *out, const char *base, const char *const *deltas,
				   size_t n, unsigned flags, const shmkv_join_options *opt,
				   shmkv_build_stats *stats, char *err, size_t err_len)
{
	ErrMsg m{err, err_len};
	m.set(0, "%s", "");
	shmkv_join_options jo = rebuild_options(opt);
	if (!out || !*out)
		return m.set(-EINVAL, "compact: no output given");
	if (!base || !*base)
		return m.set(-EINVAL, "compact: no base image given");
	if (n == 0 || !deltas)
		return m.set(-EINVAL, "compact: no delta given");
	if (flags & ~SHMKV_COMPACT_NOSYNC)
		return m.set(-EINVAL, "compact: unknown flags 0x%x", flags & ~SHMKV_COMPACT_NOSYNC);
	Chain c;
	int rc = open_chain(base, deltas, n, true, c, m);
	if (rc)
		return rc;

	// In memory: the records (the builder's per-record cost) and the
	// images' bytes they point into, which the layout and the write read.
	uint64_t records = 0, bytes = 0;
	for (const shmkv *db : c.dbs) {
		records += shmkv_header(db)->entry_count;
		bytes += shmkv_header(db)->file_size;
	}
	unsigned T = jo.threads ? jo.threads : default_threads();
	uint64_t need = records * kInMemPerRecord + bytes + (uint64_t)T * (8 << 20);
	bool no_sync = flags & SHMKV_COMPACT_NOSYNC;
	if (records > UINT32_MAX - 1 || (jo.memory_limit && need > jo.memory_limit))
		return merge_by_build(out, base, deltas, n, false, jo, c, stats, m, no_sync);

	shmkv_builder *b = nullptr;
	std::unique_ptr<shmkv_builder, void (*)(shmkv_builder *)> own(nullptr, shmkv_builder_free);
	rc = rebuild_builder(shmkv_header(c.dbs[0]), false, jo, out, &b, m);
	own.reset(b);
	if (rc)
		return rc;
	b->no_sync = no_sync;
	rc = rebuild_input(b, base, m);
	for (size_t k = 0; k < n && !rc; k++) // no input is the output
		rc = rebuild_input(b, deltas[k], m);
	if (!rc) {
		try {
			rc = merge_in_memory(b, base, deltas, n, c, m);
		} catch (const std::bad_alloc &) {
			rc = m.set(-ENOMEM, "%s: out of memory merging its changes", base);
		}
	}
	if (!rc && (rc = rebuild_finish(b, out, stats, m)) == 0 && stats)
		stats->records = records; // every record read, as apply's
	return rc;
}
