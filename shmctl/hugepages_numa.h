/* hugepages_numa.h - huge pages per NUMA node for `hugepages plan --numa`
 * and `hugepages reserve --numa` (hugepages_numa.c). */
#ifndef SHMCTL_HUGEPAGES_NUMA_H
#define SHMCTL_HUGEPAGES_NUMA_H

#include <stddef.h>
#include <stdint.h>

#include "topo.h"

/* Pages of page_size each node needs for images of sizes[0..n) loaded with
 * policy (the loader's own plan, numa/policy.h, as if every node had the
 * pages: a plan says what to reserve, not what fits now), copies each.
 * Reads the topology (SHMKV_HOST_ROOT/sys) into t. 0, or EXIT_USAGE after
 * an error (printed). */
int numa_need(const char *policy, uint64_t page_size, const uint64_t *sizes, size_t n,
	      uint64_t copies, struct ntopo *t, uint64_t need[NTOPO_MAX_NODES]);
/* The node's pool of page_size: nr and free pages (0, 0 without one). */
void numa_pool(const struct ntopo *t, int node, uint64_t page_size, uint64_t *nr,
	       uint64_t *free_);

#endif /* SHMCTL_HUGEPAGES_NUMA_H */
