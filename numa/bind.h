/* bind.h - binding memory to nodes before its first touch, and checking
 * where it went (libnuma's numaif.h: set_mempolicy, mbind, move_pages). */
#ifndef NUMA_BIND_H
#define NUMA_BIND_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"
#include "topo.h"

/* Sets the calling thread's memory policy (NBIND_NONE: the default). Memory
 * the thread allocates next (tmpfs fallocate, huge page reservation and
 * faults) follows it. Returns 0 or -errno. */
int nbind_thread(enum nbind_mode mode, uint64_t nodes);
/* Binds [addr, addr+len) (page-aligned, a mapping) with mbind: faults of
 * any thread, io_uring's included, follow it. Returns 0 or -errno. */
int nbind_range(void *addr, size_t len, enum nbind_mode mode, uint64_t nodes);
/* Faults every page of a writable mapping in now (MADV_POPULATE_WRITE), so
 * that memory short on the bound nodes is -ENOMEM here rather than SIGBUS
 * during the load. Returns 0 or -errno. */
int nbind_populate(void *addr, size_t len);

/* Where the pages of [addr, addr+len) are (move_pages query, one entry per
 * page of page_size): per_node[id] pages on node id, *absent pages not
 * mapped. Returns 0 or -errno. */
int nplace_query(const void *addr, size_t len, uint64_t page_size,
		 uint64_t per_node[NTOPO_MAX_NODES], uint64_t *absent);
/* Whether counts match the plan's copy: bind — every page on its nodes;
 * interleave — every page on the nodes, each node holding some when there
 * are at least as many pages as nodes; none — anything. Returns 0, or
 * -EXDEV with why naming where the pages are. */
int nplace_check(const struct nplan_seg *s, const uint64_t per_node[NTOPO_MAX_NODES],
		 uint64_t absent, char *why, size_t why_len);
/* "0:512,1:3" (nodes holding pages). */
const char *nplace_name(const uint64_t per_node[NTOPO_MAX_NODES], char *buf, size_t len);

/* The node the calling thread runs on now (getcpu), or -1. */
int nbind_my_node(void);

#endif /* NUMA_BIND_H */
