/* policy.h - a cache's NUMA policy (numa= in the config, shmctl cache load
 * --numa) and the plan it makes on a given topology: how many copies of an
 * image, each bound to which nodes, and how. Pure logic over struct ntopo:
 * no system call, so it is tested against fake topologies. */
#ifndef NUMA_POLICY_H
#define NUMA_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "topo.h"

enum npol_kind {
	NPOL_NONE = 0,   /* no binding: the kernel's default (first touch) */
	NPOL_LOCAL,      /* the loader's node, or the nodes of a named CPU set */
	NPOL_NODE,       /* node=N */
	NPOL_INTERLEAVE, /* interleave[=nodes]: one copy, pages spread round-robin */
	NPOL_REPLICATE   /* replicate[=nodes]: one copy per node */
};

struct npolicy {
	enum npol_kind kind;
	int node;                         /* NPOL_NODE */
	uint64_t nodes;                   /* interleave=/replicate= list; 0: every node */
	uint64_t cpus[NTOPO_MAX_CPUS / 64]; /* local=CPUS; all zero: the loader's CPU */
};

#define NPOLICY_GRAMMAR "none, local[=CPUS], node=N, interleave[=NODES] or replicate[=NODES]"
#define NPOLICY_NAME_MAX 96

/* Parses "none", "local", "local=0-3", "node=1", "interleave",
 * "interleave=0,2", "replicate", "replicate=0-1". Returns 0 or -EINVAL with
 * why (what was expected). */
int npolicy_parse(const char *s, struct npolicy *p, char *why, size_t why_len);
/* The canonical text of p (parses back to p). */
const char *npolicy_name(const struct npolicy *p, char *buf, size_t len);

/* How one copy's memory is bound. */
enum nbind_mode { NBIND_NONE = 0, NBIND_BIND, NBIND_INTERLEAVE };

#define NPLAN_MAX 8 /* SHMKV_CTL_MAX_SEGMENTS: copies a generation can list */

struct nplan_seg {
	int node;            /* the node this copy lives on; -1: several or unbound */
	enum nbind_mode mode;
	uint64_t nodes;      /* mask for mode */
};

struct nplan {
	unsigned n;          /* copies, 1..NPLAN_MAX */
	struct nplan_seg seg[NPLAN_MAX];
	int degraded;        /* replicate became interleave: note says why */
	char note[320];
};

/* What a plan is made for: an image of size bytes in pages of page_size
 * (huge pages when hugetlb, whose per-node free counts then decide; else
 * each node's free memory). my_node: the node the loader runs on (for
 * `local` without CPUs). */
struct nplan_req {
	uint64_t size;
	uint64_t page_size;
	int hugetlb;
	int my_node;
};

/* Makes the plan. replicate degrades to interleave over the same nodes
 * (degraded = 1, note says which node lacks what) when a node cannot hold a
 * copy or there are more than NPLAN_MAX nodes; it is one bound copy on a
 * single node. Returns 0, or -EINVAL / -ENODEV with why: a node or CPU the
 * topology does not have, a node without memory. */
int nplan_make(const struct npolicy *p, const struct ntopo *t, const struct nplan_req *r,
	       struct nplan *out, char *why, size_t why_len);

/* Makes the plan of interleave over the nodes of a replicate plan that
 * failed at run time (a node's memory went short between plan and
 * allocation), with note. */
void nplan_degrade(struct nplan *pl, const char *reason);

#endif /* NUMA_POLICY_H */
