/* bind.c - memory binding and placement checks over libnuma (bind.h). */
#include "bind.h"

#include <errno.h>
#include <numaif.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "diag.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

static int mpol(enum nbind_mode mode)
{
	return mode == NBIND_BIND ? MPOL_BIND : mode == NBIND_INTERLEAVE ? MPOL_INTERLEAVE
									: MPOL_DEFAULT;
}

int nbind_thread(enum nbind_mode mode, uint64_t nodes)
{
	unsigned long mask = (unsigned long)nodes;
	/* maxnode counts bits and the kernel reads maxnode-1 of them */
	long r = mode == NBIND_NONE ? set_mempolicy(MPOL_DEFAULT, NULL, 0)
				    : set_mempolicy(mpol(mode), &mask, NTOPO_MAX_NODES + 1);
	return r == 0 ? 0 : -errno;
}

int nbind_range(void *addr, size_t len, enum nbind_mode mode, uint64_t nodes)
{
	unsigned long mask = (unsigned long)nodes;
	long r = mode == NBIND_NONE ? mbind(addr, len, MPOL_DEFAULT, NULL, 0, 0)
				    : mbind(addr, len, mpol(mode), &mask, NTOPO_MAX_NODES + 1, 0);
	return r == 0 ? 0 : -errno;
}

int nbind_populate(void *addr, size_t len)
{
	return madvise(addr, len, MADV_POPULATE_WRITE) == 0 ? 0 : -errno;
}

int nplace_query(const void *addr, size_t len, uint64_t page_size,
		 uint64_t per_node[NTOPO_MAX_NODES], uint64_t *absent)
{
	enum { BATCH = 1024 };
	void *pages[BATCH];
	int status[BATCH];
	memset(per_node, 0, sizeof(uint64_t) * NTOPO_MAX_NODES);
	*absent = 0;
	size_t total = (len + page_size - 1) / page_size;
	for (size_t i = 0; i < total; i += BATCH) {
		size_t n = total - i < BATCH ? total - i : BATCH;
		for (size_t k = 0; k < n; k++)
			pages[k] = (void *)((uintptr_t)addr + (i + k) * page_size);
		/* nodes NULL: a query, nothing moves */
		if (move_pages(0, (unsigned long)n, pages, NULL, status, 0) != 0)
			return -errno;
		for (size_t k = 0; k < n; k++) {
			if (status[k] >= 0 && status[k] < NTOPO_MAX_NODES)
				per_node[status[k]]++;
			else
				(*absent)++;
		}
	}
	return 0;
}

const char *nplace_name(const uint64_t per_node[NTOPO_MAX_NODES], char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = 0;
	for (int i = 0; i < NTOPO_MAX_NODES && o < len; i++) {
		if (!per_node[i])
			continue;
		int w = snprintf(buf + o, len - o, "%s%d:%llu", o ? "," : "", i,
				 (unsigned long long)per_node[i]);
		if (w < 0)
			break;
		o += (size_t)w;
	}
	return buf;
}

int nplace_check(const struct nplan_seg *s, const uint64_t per_node[NTOPO_MAX_NODES],
		 uint64_t absent, char *why, size_t why_len)
{
	char where[256], want[96];
	if (s->mode == NBIND_NONE)
		return 0;
	uint64_t off = absent, total = absent, holding = 0;
	for (int i = 0; i < NTOPO_MAX_NODES; i++) {
		total += per_node[i];
		if (s->nodes >> i & 1) {
			holding += per_node[i] != 0;
		} else {
			off += per_node[i];
		}
	}
	ntopo_list_name(s->nodes, want, sizeof want);
	nplace_name(per_node, where, sizeof where);
	if (off)
		return diag_fail(-EXDEV, why, why_len,
				 "%llu of %llu pages are not on node%s %s (pages per node %s%s%llu "
				 "not resident)", (unsigned long long)off, (unsigned long long)total,
				 __builtin_popcountll(s->nodes) > 1 ? "s" : "", want, where,
				 where[0] ? ", " : "", (unsigned long long)absent);
	unsigned want_n = (unsigned)__builtin_popcountll(s->nodes);
	if (s->mode == NBIND_INTERLEAVE && total >= want_n && holding < want_n)
		return diag_fail(-EXDEV, why, why_len,
				 "interleave over nodes %s left some without pages (pages per "
				 "node %s)", want, where);
	return 0;
}

int nbind_my_node(void)
{
	unsigned cpu = 0, node = 0;
	if (getcpu(&cpu, &node) != 0)
		return -1;
	return (int)node;
}
