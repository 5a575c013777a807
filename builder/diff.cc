// builder/diff.cc - shmkv_build_diff(): the delta (lib/FORMAT.md §19) that
// turns the plain image OLD into NEW: an upsert for every key NEW holds that
// OLD does not hold, or holds with another type, value or expiry, and a
// tombstone for every key OLD holds and NEW does not. Applied to OLD it gives
// NEW's records (shmkv_build_apply). The one owner of diff: `shmctl image
// diff` and the Python package's shmkv.diff call it.
//
// Each image's records are read once in order, each looked up in the other
// (O(1) each); neither is held in memory beyond the builder's own bound.
// Expired records count: an image's records are what it holds, expired or
// not (the lookups read at a clock pinned before any expiry).
#include <cinttypes>
#include <cstring>
#include <memory>

#include "delta.h"
#include "rebuild.h"

namespace {

using namespace shmkv_build;

struct Images {
	shmkv *old_db = nullptr, *new_db = nullptr;
	~Images()
	{
		if (old_db)
			shmkv_close(old_db);
		if (new_db)
			shmkv_close(new_db);
	}
};

// A clock before every expiry (1 is the earliest an image holds, §17): the
// lookups find expired records as the all-records iteration does.
constexpr int64_t kBeforeAnyExpiry = -1;

// Whether OLD holds key with NEW's type, value and expiry: 0 (yes), 1 (no:
// an upsert), or an error set on m.
int changed(const shmkv *old_db, const char *op, const void *key, size_t key_len,
	    const shmkv_value &v, uint32_t expires, ErrMsg &m)
{
	uint32_t was_expires = 0;
	shmkv_value was;
	int err = shmkv_get_expires(old_db, key, key_len, &was_expires);
	if (err == SHMKV_ENOTFOUND)
		return 1;
	if (!err)
		err = shmkv_get(old_db, key, key_len, &was);
	if (err)
		return m.set(err, "%s: key %s: %s; 'shmctl image verify' says more", op,
			     show_key((const uint8_t *)key, key_len).c_str(), shmkv_strerror(err));
	return was.type != v.type || was.size != v.size || was_expires != expires ||
	       (v.size && memcmp(was.data, v.data, v.size) != 0);
}

} // namespace

extern "C" int shmkv_build_diff(const char *out, const char *op, const char *np,
				const shmkv_join_options *opt, shmkv_build_stats *stats, char *err,
				size_t err_len)
{
	ErrMsg m{err, err_len};
	m.set(0, "%s", "");
	shmkv_join_options jo = rebuild_options(opt);
	if (!out || !*out)
		return m.set(-EINVAL, "diff: no output given");
	if (!op || !*op || !np || !*np)
		return m.set(-EINVAL, "diff: give the old and the new image");
	Images im;
	ImageId o, nw;
	int rc = open_verified(op, &im.old_db, m);
	if (!rc)
		rc = open_verified(np, &im.new_db, m);
	if (rc)
		return rc;
	image_id_of(im.old_db, &o);
	image_id_of(im.new_db, &nw);
	if (o.delta || nw.delta)
		return m.set(o.delta ? SHMKV_EBASE : SHMKV_EINPUT,
			     "%s is a delta image (%s of base %s): diff compares two plain images "
			     "(merge a delta into its base first: shmctl image apply)",
			     o.delta ? op : np, ("seq " + std::to_string((o.delta ? o : nw).did.seq)).c_str(),
			     hex64((o.delta ? o : nw).did.base_checksum).c_str());
	if (o.seed != nw.seed)
		return m.set(SHMKV_EINPUT, "%s has seed %s, %s has %s: a delta has its base's seed; "
			     "rebuild %s with --seed %s (%s's)", op, hex64(o.seed).c_str(), np,
			     hex64(nw.seed).c_str(), np, hex64(o.seed).c_str(), op);
	if (o.hash_bits != nw.hash_bits)
		return m.set(SHMKV_EINPUT, "%s has hash_bits %u, %s has %u: a delta has its base's "
			     "hash bits; rebuild %s with --hash-bits %u (%s's)", op, o.hash_bits, np,
			     nw.hash_bits, np, o.hash_bits, op);

	// The delta's own header: NEW's name, created time and dedup flag.
	shmkv_builder *b = nullptr;
	std::unique_ptr<shmkv_builder, void (*)(shmkv_builder *)> own(nullptr, shmkv_builder_free);
	rc = rebuild_builder(shmkv_header(im.new_db), false, jo, out, &b, m);
	own.reset(b);
	if (rc)
		return rc;
	if ((rc = start_delta(b, DeltaId{o.checksum, o.file_size, 0, 1}, o.seed, o.hash_bits, op, "")))
		return m.set(rc, "%s", shmkv_builder_error(b));
	if ((rc = rebuild_input(b, op, m)) || (rc = rebuild_input(b, np, m)))
		return rc;
	shmkv_set_clock(im.old_db, kBeforeAnyExpiry);
	bool forget = jo.memory_limit != 0;
	const shmkv_image_header *oh = shmkv_header(im.old_db), *nh = shmkv_header(im.new_db);
	auto drop = [&] {
		drop_pages(oh, (size_t)oh->file_size);
		drop_pages(nh, (size_t)nh->file_size);
	};

	// Upserts: NEW's records that OLD does not hold as they are.
	shmkv_iter it;
	const void *key;
	size_t key_len;
	shmkv_value v;
	uint64_t count = 0;
	shmkv_iter_init_all(im.new_db, &it);
	while ((rc = shmkv_iter_next(&it, &key, &key_len, &v)) == 0) {
		uint32_t expires = shmkv_iter_expires(&it);
		count++;
		int c = changed(im.old_db, op, key, key_len, v, expires, m);
		if (c < 0)
			return c;
		if (c) {
			shmkv_builder_set_source(b, np, count);
			if ((rc = shmkv_builder_set_expires(b, expires)) ||
			    (rc = shmkv_builder_add(b, key, key_len, v.type, v.data, v.size)))
				return m.set(rc, "%s", shmkv_builder_error(b));
		}
		if (forget && count % 65536 == 0)
			drop();
	}
	if (rc != SHMKV_EEND)
		return m.set(rc, "%s: entry %" PRIu64 ": %s; 'shmctl image verify' says more", np,
			     count + 1, shmkv_strerror(rc));
	// Tombstones: OLD's keys that NEW does not hold.
	count = 0;
	shmkv_iter_init_all(im.old_db, &it);
	while ((rc = shmkv_iter_next(&it, &key, &key_len, &v)) == 0) {
		uint32_t expires;
		count++;
		int e = shmkv_get_expires(im.new_db, key, key_len, &expires);
		if (e && e != SHMKV_ENOTFOUND)
			return m.set(e, "%s: key %s: %s; 'shmctl image verify' says more", np,
				     show_key((const uint8_t *)key, key_len).c_str(), shmkv_strerror(e));
		if (e) {
			shmkv_builder_set_source(b, op, count);
			if ((rc = shmkv_builder_remove(b, key, key_len)))
				return m.set(rc, "%s", shmkv_builder_error(b));
		}
		if (forget && count % 65536 == 0)
			drop();
	}
	drop();
	if (rc != SHMKV_EEND)
		return m.set(rc, "%s: entry %" PRIu64 ": %s; 'shmctl image verify' says more", op,
			     count + 1, shmkv_strerror(rc));
	return rebuild_finish(b, out, stats, m);
}
