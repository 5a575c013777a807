/* topo.h - a host's NUMA topology as sysfs shows it: nodes, their CPUs,
 * distances, free memory and free huge pages per node and page size.
 * Read from an injectable root ("/sys" on a host; a fake tree in tests), so
 * the policy logic (policy.h) is tested against 2-, 4- and 8-node machines
 * without one. */
#ifndef NUMA_TOPO_H
#define NUMA_TOPO_H

#include <stddef.h>
#include <stdint.h>

#define NTOPO_MAX_NODES 64  /* node ids 0..63: a node mask is one uint64_t */
#define NTOPO_MAX_CPUS 1024
#define NTOPO_MAX_HP 4      /* huge page sizes per node */

struct ntopo_hp {
	uint64_t page_size;     /* bytes */
	long long nr, free;     /* nr_hugepages, free_hugepages of this node */
};

struct ntopo_node {
	int id;
	uint64_t cpus[NTOPO_MAX_CPUS / 64]; /* bit per CPU */
	uint64_t mem_total, mem_free;      /* bytes, from nodeN/meminfo */
	int meminfo;                       /* 1: nodeN/meminfo was read */
	unsigned nhp;
	struct ntopo_hp hp[NTOPO_MAX_HP];
	int dist[NTOPO_MAX_NODES];         /* SLIT distance to node id j; 0: unknown */
};

struct ntopo {
	unsigned n;                        /* online nodes */
	uint64_t online;                   /* mask of their ids */
	struct ntopo_node node[NTOPO_MAX_NODES]; /* the first n, by increasing id */
};

/* Reads SYSROOT/devices/system/node (sysroot NULL: "/sys"). A kernel
 * without NUMA (no node directory) is one node 0 holding every CPU of
 * SYSROOT/devices/system/cpu/online. Returns 0, or -errno / -ERANGE (a
 * node id over 63) with why. */
int ntopo_read(const char *sysroot, struct ntopo *t, char *why, size_t why_len);
/* The node with this id, or NULL. */
const struct ntopo_node *ntopo_node(const struct ntopo *t, int id);
/* The node holding cpu, or -1. */
int ntopo_cpu_node(const struct ntopo *t, unsigned cpu);
/* Free huge pages of page_size on node, or -1 when the node has no pool of that size. */
long long ntopo_hp_free(const struct ntopo_node *n, uint64_t page_size);

/* "0-3,5": parses a list into mask (bits < max). Returns 0 or -EINVAL /
 * -ERANGE. */
int ntopo_parse_list(const char *s, uint64_t *mask, unsigned max);
/* Formats a mask of ids below 64 as a list ("0-3,5"). */
const char *ntopo_list_name(uint64_t mask, char *buf, size_t len);

#endif /* NUMA_TOPO_H */
