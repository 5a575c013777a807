// builder/rebuild.cc - what the builds from images share (rebuild.h).
#include <cerrno>
#include <cstring>
#include <sys/mman.h>
#include <sys/stat.h>

#include "rebuild.h"

namespace shmkv_build {

void drop_pages(const void *map, size_t len)
{
	madvise((void *)map, len, MADV_DONTNEED);
}

int open_verified(const char *path, shmkv **db, ErrMsg &m)
{
	char why[512] = "";
	int err = shmkv_open_file_diag(path, SHMKV_OPEN_NOVERIFY, db, why, sizeof why);
	if (!err && (err = shmkv_verify(*db, why, sizeof why)) != 0) {
		shmkv_close(*db);
		*db = nullptr;
	}
	if (!err) {
		const shmkv_image_header *h = shmkv_header(*db);
		drop_pages(h, (size_t)h->file_size); // verified: all read once
		return 0;
	}
	size_t n = strlen(path);
	if (!strncmp(why, path, n) && why[n] == ':')
		return m.set(err, "%s", why);
	return m.set(err, "%s: %s", path, why);
}

int add_image(shmkv_builder *b, const char *path, const shmkv *db, bool forget, ErrMsg &m,
	      const std::function<int(const void *, size_t, uint64_t)> &check)
{
	const shmkv_image_header *h = shmkv_header(db);
	uint64_t count = 0;
	shmkv_iter it;
	const void *key;
	size_t key_len;
	shmkv_value v;
	int err;
	shmkv_builder_set_source(b, path, 0);
	shmkv_iter_init_all(db, &it); // expired records too: the image holds them
	while ((err = shmkv_iter_next(&it, &key, &key_len, &v)) == 0) {
		count++;
		if (check && (err = check(key, key_len, count)) != 0)
			return err;
		shmkv_builder_set_source(b, path, count);
		if (v.type == kTombType) // a delta's tombstone (lib/FORMAT.md §19.2)
			err = shmkv_builder_remove(b, key, key_len);
		else if ((err = shmkv_builder_set_expires(b, shmkv_iter_expires(&it))) == 0)
			err = shmkv_builder_add(b, key, key_len, v.type, v.data, v.size);
		if (err)
			return m.set(err, "%s", shmkv_builder_error(b));
		if (forget && count % 65536 == 0)
			drop_pages(h, (size_t)h->file_size);
	}
	drop_pages(h, (size_t)h->file_size);
	if (err != SHMKV_EEND)
		return m.set(err, "%s: entry %llu: %s; 'shmctl image verify' says more", path,
			     (unsigned long long)(count + 1), shmkv_strerror(err));
	return shmkv_builder_set_expires(b, 0);
}

int rebuild_builder(const shmkv_image_header *h, bool keep_buckets, const shmkv_join_options &jo,
		    const char *out, shmkv_builder **bp, ErrMsg &m)
{
	shmkv_build_options o;
	shmkv_build_options_init(&o);
	o.seed = h->hash_seed;
	o.hash_bits = h->hash_bits;
	o.created = h->created_unix;
	memcpy(o.name, h->name, sizeof o.name);
	o.name[sizeof o.name - 1] = 0;
	o.dedup = (h->flags & SHMKV_HFLAG_DEDUP) != 0;
	o.fixed = SHMKV_OPT_SEED | SHMKV_OPT_CREATED | SHMKV_OPT_NAME | SHMKV_OPT_DEDUP |
		  SHMKV_OPT_HASH_BITS;
	if (keep_buckets) {
		o.buckets = h->bucket_count;
		o.fixed |= SHMKV_OPT_BUCKETS;
	}
	o.progress = jo.progress;
	o.progress_ctx = jo.progress_ctx;
	int err = shmkv_builder_new(&o, bp);
	if (err)
		return m.set(err, "cannot start the builder: %s", shmkv_strerror(err));
	shmkv_builder *b = *bp;
	if ((err = shmkv_builder_set_threads(b, jo.threads)) != 0 ||
	    (err = shmkv_builder_set_memory_limit(b, jo.memory_limit, jo.tmpdir)) != 0 ||
	    (err = shmkv_builder_check_output(b, out)) != 0) {
		const char *e = shmkv_builder_error(b);
		return *e ? m.set(err, "%s", e) : m.set(err, "%s: %s", out, shmkv_strerror(err));
	}
	return 0;
}

int rebuild_input(shmkv_builder *b, const char *path, ErrMsg &m)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return m.set(-errno, "%s: %s", path, strerror(errno));
	int err = note_input(b, path, st);
	return err ? m.set(err, "%s", shmkv_builder_error(b)) : 0;
}

shmkv_join_options rebuild_options(const shmkv_join_options *opt)
{
	shmkv_join_options jo;
	if (opt)
		jo = *opt;
	else
		shmkv_join_options_init(&jo);
	return jo;
}

int rebuild_finish(shmkv_builder *b, const char *out, shmkv_build_stats *stats, ErrMsg &m)
{
	shmkv_build_stats st;
	memset(&st, 0, sizeof st);
	int rc = shmkv_builder_finish(b, out, &st);
	if (rc) {
		const char *e = shmkv_builder_error(b);
		return *e ? m.set(rc, "%s", e) : m.set(rc, "%s: %s", out, shmkv_strerror(rc));
	}
	if (stats)
		*stats = st;
	return 0;
}

} // namespace shmkv_build
