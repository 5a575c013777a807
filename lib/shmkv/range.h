/* shmkv/range.h - the address range an attached handle maps a generation in
 * (attach.h; lib/PROTOCOL.md, "Protocol 2"), shared with the generations
 * shmkv_detach hands out: a count of the handles holding the range keeps it
 * mapped, and a count per overlay's part keeps that overlay mapped, so that
 * a refresh keeps the base while detached generations still read their
 * overlays. The attached handle alone maps and claims parts (its refresh,
 * one thread at a time); any thread may give a detached generation back.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_RANGE_H
#define SHMKV_RANGE_H

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "atomic.h"
#include "handle.h"

/* Strict -std=c11 hides these; the values are the kernel ABI of x86-64 and
 * AArch64. */
#ifdef MAP_ANONYMOUS
#define SHMKV__MAP_ANONYMOUS MAP_ANONYMOUS
#else
#define SHMKV__MAP_ANONYMOUS 0x20
#endif
#ifdef MAP_NORESERVE
#define SHMKV__MAP_NORESERVE MAP_NORESERVE
#else
#define SHMKV__MAP_NORESERVE 0x4000
#endif

/* Overlays' parts one range tracks (a handle's range_parts has a bit for
 * each): a refresh that finds none free maps its generation anew. */
#define SHMKV__RANGE_PARTS 64u

/* One overlay's part of a range: [off, off + len) from its start, written
 * by the attached handle before it claims the part. */
typedef struct shmkv__part {
	uint64_t refs;  /* the handles that read this overlay */
	uint64_t taken; /* 1 from the overlay's mapping until its part is PROT_NONE
			   again (or for good, if that failed) */
	size_t off, len;
} shmkv__part;

struct shmkv__range {
	uint64_t users; /* the handles holding the range: the attached handle while
			   it maps its generation here, each detached generation */
	uint8_t *start;
	size_t len;
	shmkv__part part[SHMKV__RANGE_PARTS];
};

/* Gives a range's part back to the reservation (PROT_NONE, no memory, the
 * file's pages released); -1 if it stays mapped. */
static inline int shmkv__unmap_level(uint8_t *p, size_t len)
{
	return mmap(p, len, PROT_NONE,
		    MAP_PRIVATE | MAP_FIXED | SHMKV__MAP_ANONYMOUS | SHMKV__MAP_NORESERVE, -1,
		    0) == MAP_FAILED ? -1 : 0;
}

/* A range of one user (the attached handle that mapped [start, start +
 * len)) and no part; NULL: out of memory. */
static inline shmkv__range *shmkv__range_new(void *start, size_t len)
{
	shmkv__range *r = (shmkv__range *)calloc(1, sizeof *r);
	if (r) {
		r->users = 1; /* no other thread sees r yet */
		r->start = (uint8_t *)start;
		r->len = len;
	}
	return r;
}

/* Whether part i's room is free to map into: PROT_NONE, no handle reads it. */
static inline int shmkv__part_free(const shmkv__range *r, unsigned i)
{
	/* acquire; pairs with the release store in shmkv__parts_drop: the part's
	 * room is PROT_NONE again before the attached handle maps into it */
	return shmkv__load_acquire(&r->part[i].taken) == 0;
}

/* Claims free part i for an overlay the attached handle mapped at [off, off
 * + len), read by that handle alone. */
static inline void shmkv__part_claim(shmkv__range *r, unsigned i, size_t off, size_t len)
{
	r->part[i].off = off;
	r->part[i].len = len;
	/* relaxed: only the attached handle claims parts and reads them free,
	 * and a handle that reads the part gets it from that one (by
	 * shmkv_detach), after this */
	shmkv__store_relaxed(&r->part[i].refs, 1);
	shmkv__store_relaxed(&r->part[i].taken, 1);
}

/* One more handle holds r and the parts of its range_parts: the detached
 * generation shmkv_detach makes. */
static inline void shmkv__range_hold(shmkv__range *r, uint64_t parts)
{
	/* relaxed: the caller holds each already, so none reaches 0 meanwhile */
	shmkv__fetch_add_relaxed(&r->users, 1);
	for (unsigned i = 0; i < SHMKV__RANGE_PARTS; i++)
		if (parts & (UINT64_C(1) << i))
			shmkv__fetch_add_relaxed(&r->part[i].refs, 1);
}

/* A handle that holds r reads the overlays of parts no longer: the last
 * reader of one gives its room back (PROT_NONE), then frees the part. */
static inline void shmkv__parts_drop(shmkv__range *r, uint64_t parts)
{
	for (unsigned i = 0; i < SHMKV__RANGE_PARTS; i++) {
		if (!(parts & (UINT64_C(1) << i)))
			continue;
		shmkv__part *p = &r->part[i];
		/* acq_rel; pairs with the other readers' drops: the last one's
		 * PROT_NONE comes after every reader is done */
		if (shmkv__fetch_sub_acq_rel(&p->refs, 1) != 1)
			continue;
		if (shmkv__unmap_level(r->start + p->off, p->len) == 0)
			/* release; pairs with the acquire load in
			 * shmkv__part_free */
			shmkv__store_release(&p->taken, 0);
		/* else it stays mapped, taken, until the range goes */
	}
}

/* A handle gives r back, with the parts it reads: the last one unmaps the
 * whole range and frees it. */
static inline void shmkv__range_drop(shmkv__range *r, uint64_t parts)
{
	shmkv__parts_drop(r, parts);
	/* acq_rel; pairs with the other holders' drops: the last one unmaps
	 * after every holder is done with the range */
	if (shmkv__fetch_sub_acq_rel(&r->users, 1) == 1) {
		munmap(r->start, r->len);
		free(r);
	}
}

#endif /* SHMKV_RANGE_H */
