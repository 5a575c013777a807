/* copies.h - the NUMA side of one load (copies.c): the plan of a cache's
 * numa= policy on this host, the replicas of numa=replicate (copies of the
 * verified first one, each bound to its node), replicate's degrade to
 * interleave, and the placement check of every copy after the load. */
#ifndef LOADER_COPIES_H
#define LOADER_COPIES_H

#include <stddef.h>
#include <stdint.h>

#include "bind.h"   /* numa/ */
#include "loader.h"
#include "place.h"
#include "segment.h"

struct copies {
	struct npolicy pol;
	struct nplan plan;
	int query;       /* check placement after the load (a policy, or a NUMA host) */
	unsigned nmore;  /* replicas made, more[0..nmore) */
	struct seg more[SHMKV_CTL_MAX_SEGMENTS - 1];
};

/* The plan for an image of size bytes: numa (a policy's text from `load`,
 * "" or NULL: the cache's numa=) on the topology of this host. Replicate
 * degraded: logged as a warning, the reason in cp->plan.note. Returns 0, or
 * -EINVAL (bad policy text) / -ENODEV (a node this host lacks) with why. */
int copies_plan(const struct place_req *pr, const char *cache, const char *numa,
		const struct npolicy *conf, uint64_t size, struct copies *cp, char *why,
		size_t why_len);
/* A copy could not be placed (memory short, why): replicate degrades to
 * interleave over the same nodes, logged. Returns 1 if it did (place again
 * with cp->plan.seg[0]), 0 if the plan was not a replicate. */
int copies_degrade(struct copies *cp, const char *cache, const char *why);
/* After the first copy s was read and verified: makes the replicas of the
 * plan, each placed (bound to its node) and filled from s. A replica that
 * cannot be placed for want of memory degrades the plan: s is replaced by
 * one interleaved copy (s's old segment discarded). Returns 0, or the error
 * of a placement with why (the replicas made are discarded; s stays). */
int copies_make(struct copies *cp, const struct place_req *pr, struct seg *s, uint64_t size,
		uint64_t *next_load, char *why, size_t why_len);
/* Where each copy's pages are (move_pages), against the plan: sets each
 * info.node (the plan's node, or -1 when the placement is wrong: logged,
 * noted, published unpinned) and ls's NUMA figures. */
void copies_verify(struct copies *cp, const char *cache, struct seg *s, struct load_stats *ls);
/* Discards the replicas made. */
void copies_discard(struct copies *cp);

#endif /* LOADER_COPIES_H */
