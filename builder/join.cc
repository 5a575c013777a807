// join.cc - shmkv_build_join(): fragments built as parts 1..n of one image
// (shmkv_builder_set_part, lib/FORMAT.md §14) become that image, byte for
// byte what one build of all their records gives. The one owner of join:
// `shmctl image join` and the Python package's shmkv.join call it.
//
// Fragments are untrusted: each is verified whole (every checksum and
// offset) before any entry is read, must agree with the first on the header
// fields the image depends on, and may hold only keys of its own part.
#include <cinttypes>
#include <cstring>
#include <memory>

#include "rebuild.h"

namespace {

using Msg = shmkv_build::ErrMsg;

// The fragments' mappings, closed whatever happens.
struct Fragments {
	std::vector<shmkv *> dbs;
	~Fragments()
	{
		for (shmkv *db : dbs)
			if (db)
				shmkv_close(db);
	}
};

// Header fields that must be equal in all fragments: the join's options.
int same_header(const char *p0, const shmkv_image_header *h0, const char *p,
		const shmkv_image_header *h, Msg &m)
{
	const char *field = nullptr;
	if (h->bucket_count != h0->bucket_count)
		field = "bucket count";
	else if (h->hash_seed != h0->hash_seed)
		field = "hash seed";
	else if (h->hash_bits != h0->hash_bits)
		field = "hash bits";
	else if ((h->flags & SHMKV_HFLAG_DEDUP) != (h0->flags & SHMKV_HFLAG_DEDUP))
		field = "dedup flag";
	else if (h->created_unix != h0->created_unix)
		field = "created time";
	else if (strncmp(h->name, h0->name, sizeof h->name) != 0)
		field = "name";
	if (!field)
		return 0;
	return m.set(SHMKV_EINPUT, "%s: its %s differs from %s's: fragments of one image are "
		     "built with the same buckets, seed, created time, name and dedup", p, field, p0);
}

// Adds fragment j (1-based) of n to b, checking that every key is of part j;
// forget: drop its pages every 65536 entries.
int add_fragment(shmkv_builder *b, const char *path, uint64_t j, uint64_t n, shmkv *db,
		 bool forget, Msg &m)
{
	const shmkv_image_header *h = shmkv_header(db);
	uint64_t lo, hi;
	shmkv_build_part_range(j, n, h->bucket_count, &lo, &hi);
	return shmkv_build::add_image(b, path, db, forget, m, [&](const void *key, size_t key_len,
								 uint64_t count) {
		uint64_t bk = shmkv_home_bucket(shmkv_key_hash(h->hash_seed, h->hash_bits, key, key_len),
						h->bucket_count);
		if (bk >= lo && bk < hi)
			return 0;
		return m.set(SHMKV_EINPUT, "%s: entry %" PRIu64 ", key %s, is in bucket %" PRIu64
			     " of part %" PRIu64 "/%" PRIu64 ", but the fragment is given as "
			     "part %" PRIu64 "/%" PRIu64 ": give the fragments in part order, "
			     "each once", path, count,
			     shmkv_build::show_key((const uint8_t *)key, key_len).c_str(), bk,
			     shmkv_build_part_of(bk, n, h->bucket_count), n, j, n);
	});
}

} // namespace

extern "C" void shmkv_join_options_init(shmkv_join_options *o)
{
	memset(o, 0, sizeof *o);
	o->memory_limit = shmkv_build_default_memory_limit();
}

extern "C" int shmkv_build_join(const char *out, const char *const *fragments, size_t n,
				const shmkv_join_options *opt, shmkv_build_stats *stats, char *err,
				size_t err_len)
{
	Msg m{err, err_len};
	m.set(0, "%s", "");
	shmkv_join_options jo = shmkv_build::rebuild_options(opt);
	if (!out || !*out)
		return m.set(-EINVAL, "join: no output given");
	if (n == 0 || !fragments)
		return m.set(-EINVAL, "join: no fragment given");
	Fragments f;
	try {
		f.dbs.assign(n, nullptr);
	} catch (const std::bad_alloc &) {
		return m.set(-ENOMEM, "join: out of memory");
	}
	int rc = 0;
	for (size_t j = 0; j < n && !rc; j++) {
		rc = shmkv_build::open_verified(fragments[j], &f.dbs[j], m);
		if (!rc && shmkv_is_delta(f.dbs[j]))
			rc = m.set(SHMKV_EINPUT, "%s is a delta image: join takes the fragments of "
				   "a part build (a delta is merged into its base with shmctl image "
				   "apply)", fragments[j]);
		if (!rc && j > 0)
			rc = same_header(fragments[0], shmkv_header(f.dbs[0]), fragments[j],
					 shmkv_header(f.dbs[j]), m);
	}
	if (rc)
		return rc;
	shmkv_builder *b = nullptr;
	std::unique_ptr<shmkv_builder, void (*)(shmkv_builder *)> own(nullptr, shmkv_builder_free);
	// the first fragment's header options, its bucket count too, fixed
	rc = shmkv_build::rebuild_builder(shmkv_header(f.dbs[0]), true, jo, out, &b, m);
	own.reset(b);
	for (size_t j = 0; j < n && !rc; j++) // a fragment is never the output
		rc = shmkv_build::rebuild_input(b, fragments[j], m);
	for (size_t j = 0; j < n && !rc; j++)
		rc = add_fragment(b, fragments[j], j + 1, n, f.dbs[j], jo.memory_limit != 0, m);
	return rc ? rc : shmkv_build::rebuild_finish(b, out, stats, m);
}
