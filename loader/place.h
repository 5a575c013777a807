/* place.h - where a new segment goes: the cache's memory policy. */
#ifndef LOADER_PLACE_H
#define LOADER_PLACE_H

#include "loader.h"

/* Creates a segment for an image of size bytes for cache c: hugetlbfs
 * (largest page size that wastes at most 1/8 of the image, else the
 * smallest) and/or tmpfs, as c's policy says. When memory is short the
 * rollback candidate is dropped and the allocation retried. note gets why
 * the memory is not the policy's first choice ("" if it is). Returns 0, or
 * -ENOMEM/-ENOSPC (short: the load is refused), other -errno, with why. */
int place_segment(struct loader *L, struct cache *c, uint64_t size, struct seg *s, char *note,
		  size_t note_len, char *why, size_t why_len);

#endif /* LOADER_PLACE_H */
