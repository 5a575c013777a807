// builder/rebuild.h - what the builds from images share (join.cc,
// upgrade_v1.cc): their error message, dropping pages read, and a builder
// of an image's header options.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <functional>

#include "internal.h"

namespace shmkv_build {

// The caller's error buffer (may be null or empty): set() formats into it
// and returns code.
struct ErrMsg {
	char *buf;
	size_t len;
	int set(int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)))
	{
		if (buf && len) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(buf, len, fmt, ap);
			va_end(ap);
		}
		return code;
	}
};

// An input image's pages read so far leave this process's memory (they
// stay in the page cache and are read again if needed): under a memory
// limit the mapped inputs must not count, whatever their size.
void drop_pages(const void *map, size_t len);

// Opens path with every check of the reader: the header and every checksum
// at open, then the full structural check (shmkv_verify, lib/FORMAT.md §13).
// Its pages are dropped once checked. 0 with *db (the caller closes it), or
// the reader's error set on m naming the file.
int open_verified(const char *path, shmkv **db, ErrMsg &m);

// Adds every record of db to b (the all-records iteration: expired records
// too, a delta's tombstones as removals), each named "path:N" (its ordinal);
// check(key, len, n), if given, may refuse one (0, or an error set on m).
// forget: drop db's pages every 65536 records (a memory limit).
int add_image(shmkv_builder *b, const char *path, const shmkv *db, bool forget, ErrMsg &m,
	      const std::function<int(const void *, size_t, uint64_t)> &check = nullptr);

// A builder for out with the image options of header h fixed (seed,
// hash_bits, created time, name, dedup; the bucket count too when
// keep_buckets) and jo's threads, memory limit and spill directory, out
// checked (shmkv_builder_check_output). 0 with *bp (the caller frees it,
// whatever is returned), or an error set on m.
int rebuild_builder(const shmkv_image_header *h, bool keep_buckets, const shmkv_join_options &jo,
		    const char *out, shmkv_builder **bp, ErrMsg &m);

// Notes path as an input of b (read, never replaced): an input that is the
// output (the same file) is refused. 0, or an error set on m.
int rebuild_input(shmkv_builder *b, const char *path, ErrMsg &m);

// Options of a join or an upgrade: opt, or the defaults.
shmkv_join_options rebuild_options(const shmkv_join_options *opt);

// Finishes a build from images: shmkv_builder_finish(b, out), its stats
// into stats (may be null), or its error on m.
int rebuild_finish(shmkv_builder *b, const char *out, shmkv_build_stats *stats, ErrMsg &m);

} // namespace shmkv_build
