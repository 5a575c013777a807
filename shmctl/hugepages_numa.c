/* hugepages_numa.c - see hugepages_numa.h. The plan is numa/'s, the one the
 * loader makes at load time: one owner for what a policy puts where. */
#include "hugepages_numa.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "main.h"
#include "policy.h"

int numa_need(const char *policy, uint64_t page_size, const uint64_t *sizes, size_t n,
	      uint64_t copies, struct ntopo *t, uint64_t need[NTOPO_MAX_NODES])
{
	char why[512], sys[4096];
	struct npolicy pol;
	if (npolicy_parse(policy, &pol, why, sizeof why))
		return p_usage("hugepages", "--numa %s: %s", policy, why);
	if (pol.kind == NPOL_NONE)
		return p_usage("hugepages", "--numa none: nothing is bound to a node; plan without "
				  "--numa");
	host_path(sys, sizeof sys, host_root_env(), "/sys");
	if (ntopo_read(sys, t, why, sizeof why))
		return p_err("NUMA topology: %s", why);
	/* as if every node had the pages and the memory: no degrade */
	struct ntopo *all = malloc(sizeof *all);
	if (!all)
		return p_err("out of memory");
	*all = *t;
	for (unsigned i = 0; i < all->n; i++) {
		struct ntopo_node *nd = &all->node[i];
		nd->mem_free = UINT64_MAX / 2;
		for (unsigned h = 0; h < nd->nhp; h++)
			nd->hp[h].free = nd->hp[h].nr = 1LL << 50;
		if (nd->nhp == 0 && nd->nhp < NTOPO_MAX_HP) {
			nd->hp[0].page_size = page_size;
			nd->hp[0].free = nd->hp[0].nr = 1LL << 50;
			nd->nhp = 1;
		}
	}
	memset(need, 0, sizeof(uint64_t) * NTOPO_MAX_NODES);
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		uint64_t pages = (sizes[i] + page_size - 1) / page_size;
		struct nplan pl;
		const struct nplan_req r = {.size = sizes[i], .page_size = page_size, .hugetlb = 1,
					    .my_node = all->node[0].id};
		if (nplan_make(&pol, all, &r, &pl, why, sizeof why)) {
			rc = p_usage("hugepages", "--numa %s: %s", policy, why);
			break;
		}
		for (unsigned s = 0; s < pl.n; s++) {
			const struct nplan_seg *sg = &pl.seg[s];
			uint64_t mask = sg->mode == NBIND_NONE ? all->online : sg->nodes;
			if (sg->mode != NBIND_INTERLEAVE && sg->node >= 0)
				mask = UINT64_C(1) << sg->node;
			unsigned k = (unsigned)__builtin_popcountll(mask);
			/* interleave: round-robin, the first nodes one page more */
			for (int nd = 0, j = 0; nd < NTOPO_MAX_NODES && k; nd++)
				if (mask >> nd & 1)
					need[nd] += (pages / k + ((unsigned)j++ < pages % k)) * copies;
		}
	}
	free(all);
	return rc;
}

void numa_pool(const struct ntopo *t, int node, uint64_t page_size, uint64_t *nr,
	       uint64_t *free_)
{
	*nr = *free_ = 0;
	const struct ntopo_node *nd = ntopo_node(t, node);
	for (unsigned h = 0; nd && h < nd->nhp; h++) {
		if (nd->hp[h].page_size == page_size) {
			*nr = nd->hp[h].nr > 0 ? (uint64_t)nd->hp[h].nr : 0;
			*free_ = nd->hp[h].free > 0 ? (uint64_t)nd->hp[h].free : 0;
		}
	}
}
