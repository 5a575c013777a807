// builder/apply.h - what apply (apply.cc) and the loader's compaction
// (compact.cc) share: a base and its chain of deltas opened and checked
// (lib/FORMAT.md §19.4, §19.5), and the merge as a build of all records.
#pragma once

#include <vector>

#include "delta.h"
#include "rebuild.h"

namespace shmkv_build {

// A base (dbs[0]) and its deltas (dbs[1..n]), closed whatever happens,
// with their identities.
struct Chain {
	std::vector<shmkv *> dbs;
	ImageId base;
	std::vector<ImageId> deltas;
	~Chain()
	{
		for (shmkv *db : dbs)
			if (db)
				shmkv_close(db);
	}
};

// Opens base and deltas[0..n) into c and checks that they form a chain
// (each a delta of base, the first with prev 0, each next naming the one
// before it). Every delta is verified whole (open_verified); so is the base
// unless trusted: then the open's checks only (header, every checksum), for
// a caller that verified it itself (the loader, at its load). 0, or an
// error set on m.
int open_chain(const char *base, const char *const *deltas, size_t n, bool trusted, Chain &c,
	       ErrMsg &m);

// The merge of an opened chain as one build of all its records (the
// spilling build when the memory limit asks): the image a full build of the
// merged records gives, or (as_delta) one delta of the base; no_sync: out
// is not fsynced (SHMKV_COMPACT_NOSYNC).
int merge_by_build(const char *out, const char *base, const char *const *deltas, size_t n,
		   bool as_delta, const shmkv_join_options &jo, Chain &c, shmkv_build_stats *stats,
		   ErrMsg &m, bool no_sync = false);

} // namespace shmkv_build
