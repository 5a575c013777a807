/* place.c - the memory policy ladder: hugetlb, shm, auto. */
#include "place.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "diag.h"
#include "log.h"
#include "memkind.h"
#include "mounts.h"

static int is_short(int err)
{
	return err == -ENOMEM || err == -ENOSPC;
}

/* seg_create() with the memory bound to r->bind's nodes before anything
 * touches it: the thread's policy covers tmpfs' fallocate and the huge page
 * reservation (which counts only the bound nodes' free huge pages, so a node
 * short of them is ENOMEM here), and mbind covers the mapping's later faults,
 * io_uring's workers' included. Huge pages are faulted in now only for a copy
 * that user space fills (r->fill_by_read 0): a page that a node cannot give
 * after all is then ENOMEM, not SIGBUS in memcpy. A read faults them in
 * itself, in parallel, and gets EFAULT instead (load.c); populating first
 * cleared every page on one thread and cost 21-34% of a load
 * (bench/numa/RESULTS.md). */
static int create(const struct place_req *r, const char *dir, int hugetlb, uint64_t ps,
		  uint64_t size, struct seg *s, char *why, size_t why_len)
{
	const struct nplan_seg *b = r->bind;
	if (!b || b->mode == NBIND_NONE)
		return seg_create(s, dir, hugetlb, ps, r->prefix, r->name, r->load_id, size, r->mode,
				  r->gid, why, why_len);
	char nodes[96];
	ntopo_list_name(b->nodes, nodes, sizeof nodes);
	int err = nbind_thread(b->mode, b->nodes);
	if (err)
		return diag_fail(err, why, why_len, "set_mempolicy (nodes %s): %s", nodes,
				 strerror(-err));
	err = seg_create(s, dir, hugetlb, ps, r->prefix, r->name, r->load_id, size, r->mode, r->gid,
			 why, why_len);
	if (!err) {
		err = nbind_range(s->map, (size_t)s->info.map_size, b->mode, b->nodes);
		if (err)
			diag_fail(err, why, why_len, "mbind %s (nodes %s): %s", s->tmp, nodes,
				  strerror(-err));
		if (!err && hugetlb && !r->fill_by_read) {
			err = nbind_populate(s->map, (size_t)s->info.map_size);
			if (err == -EFAULT) /* SIGBUS at fault: no free huge page there */
				err = -ENOMEM;
			if (err)
				diag_fail(err, why, why_len, "huge pages on node %s: %s", nodes,
					  strerror(-err));
		}
		if (err)
			seg_discard(s);
	}
	int e2 = nbind_thread(NBIND_NONE, 0);
	if (e2 && !err) {
		seg_discard(s);
		err = diag_fail(e2, why, why_len, "set_mempolicy (default): %s", strerror(-e2));
	}
	return err;
}

int place_read_fault(const struct place_req *r, struct seg *s, char *why, size_t why_len)
{
	const struct nplan_seg *b = r->bind;
	if (!r->fill_by_read || !b || b->mode == NBIND_NONE)
		return -EFAULT;
	/* pages the read faulted in are skipped; EFAULT: one cannot be had */
	if (nbind_populate(s->map, (size_t)s->info.map_size) != -EFAULT)
		return -EFAULT;
	char nodes[96], was[400];
	snprintf(was, sizeof was, "%s", why);
	ntopo_list_name(b->nodes, nodes, sizeof nodes);
	return diag_fail(-ENOMEM, why, why_len,
			 "huge pages on node %s: none free for a page of the image (taken since "
			 "the reservation); %s", nodes, was);
}

static int try_hugetlb(const struct place_req *r, uint64_t size, struct seg *s, char *why,
		       size_t why_len)
{
	const struct loader_conf *lc = r->conf;
	struct hmount m[16];
	size_t n = 0;
	int err = mounts_hugetlb(m, 16, &n, lc->hugetlb_dir);
	if (err)
		return diag_fail(err, why, why_len, "/proc/mounts: %s", strerror(-err));
	if (!n)
		return diag_fail(-ENODEV, why, why_len,
				   lc->hugetlb_dir[0] ? "hugetlb_dir %s is not a hugetlbfs mount"
						      : "no hugetlbfs mount in /proc/mounts%s",
				   lc->hugetlb_dir);
	uint64_t smallest = m[n - 1].page_size;
	char detail[256] = "";
	for (size_t i = 0; i < n; i++) {
		uint64_t ps = m[i].page_size, need = (size + ps - 1) / ps;
		if (ps != smallest && need * ps - size > size / 8)
			continue; /* would waste more than 1/8 of the image */
		err = create(r, m[i].dir, 1, ps, size, s, why, why_len);
		if (!err)
			return 0;
		if (!is_short(err))
			return err;
		char psn[16];
		long long fr = mounts_free_hugepages(ps);
		size_t dl = strlen(detail);
		char on[112] = "";
		if (r->bind && r->bind->mode != NBIND_NONE) {
			char nl[96];
			snprintf(on, sizeof on, " bound to node %s",
				 ntopo_list_name(r->bind->nodes, nl, sizeof nl));
		}
		snprintf(detail + dl, sizeof detail - dl,
			 "%s%llu x %s pages on %.100s%s (%lld free on all nodes)", dl ? ", or " : "",
			 (unsigned long long)need, memkind_page_size(ps, psn, sizeof psn), m[i].dir,
			 on, fr);
	}
	return diag_fail(-ENOMEM, why, why_len, "not enough huge pages: the image needs %s",
			   detail);
}

static int try_shm(const struct place_req *r, uint64_t size, struct seg *s, char *why,
		   size_t why_len)
{
	const char *dir = r->conf->shm_dir;
	int err = create(r, dir, 0, (uint64_t)sysconf(_SC_PAGESIZE), size, s, why, why_len);
	if (is_short(err)) {
		struct statvfs sv;
		unsigned long long fr = statvfs(dir, &sv) == 0
						? (unsigned long long)sv.f_bavail * sv.f_frsize
						: 0;
		/* ENOSPC: the tmpfs is full (its size=); ENOMEM: the tmpfs has
		 * room but memory does not (the loader's memory cgroup limit, or
		 * the host): different fixes, so say which */
		if (err == -ENOMEM)
			return diag_fail(-ENOMEM, why, why_len, "out of memory taking %llu bytes in %s "
					   "(the tmpfs has %llu free): the loader's memory cgroup "
					   "limit (memory.max) or the host's memory is short",
					   (unsigned long long)size, dir, fr);
		return diag_fail(-ENOSPC, why, why_len, "no room in %s: the image needs %llu bytes, "
				   "%llu free", dir, (unsigned long long)size, fr);
	}
	return err;
}

/* Short of memory: asks the caller for room; 1: retry. */
static int room(const struct place_req *r, int err, int hugetlb, uint64_t size,
		const char *reason)
{
	return is_short(err) && r->make_room && r->make_room(r->arg, hugetlb, size, reason);
}

int place_segment(const struct place_req *r, uint64_t size, struct seg *s, char *note,
		  size_t note_len, char *why, size_t why_len)
{
	int err;
	note[0] = 0;
	switch (r->memory) {
	case MEM_HUGETLB:
		err = try_hugetlb(r, size, s, why, why_len);
		if (room(r, err, 1, size, "no room for a new load"))
			err = try_hugetlb(r, size, s, why, why_len);
		return err;
	case MEM_SHM:
		err = try_shm(r, size, s, why, why_len);
		if (room(r, err, 0, size, "no room for a new load"))
			err = try_shm(r, size, s, why, why_len);
		return err;
	case MEM_AUTO:
		break;
	}
	char hwhy[400];
	err = try_hugetlb(r, size, s, hwhy, sizeof hwhy);
	if (room(r, err, 1, size, "no huge pages for a new load"))
		err = try_hugetlb(r, size, s, hwhy, sizeof hwhy);
	if (!err)
		return 0;
	snprintf(note, note_len, "fell back to shm: %s", hwhy);
	char q[512];
	if (err == -ENODEV) /* no hugetlbfs at all: the normal case of many hosts */
		log_info("fallback cache=%s memory=shm reason=%s", r->name,
			 log_quote(q, sizeof q, hwhy));
	else
		log_warn("fallback cache=%s memory=shm reason=%s", r->name,
			 log_quote(q, sizeof q, hwhy));
	err = try_shm(r, size, s, why, why_len);
	if (room(r, err, 0, size, "no room for a new load"))
		err = try_shm(r, size, s, why, why_len);
	if (err) {
		char swhy[400];
		snprintf(swhy, sizeof swhy, "%s", why);
		diag_fail(err, why, why_len, "%s; and %s", hwhy, swhy);
	}
	return err;
}

void place_first_choice(const struct place_req *r, uint64_t size, int *hugetlb,
			uint64_t *page_size)
{
	*hugetlb = 0;
	*page_size = (uint64_t)sysconf(_SC_PAGESIZE);
	if (r->memory == MEM_SHM)
		return;
	struct hmount m[16];
	size_t n = 0;
	if (mounts_hugetlb(m, 16, &n, r->conf->hugetlb_dir) || !n)
		return;
	/* try_hugetlb()'s order: the largest page size wasting at most 1/8 */
	for (size_t i = 0; i < n; i++) {
		uint64_t ps = m[i].page_size, need = (size + ps - 1) / ps;
		if (ps == m[n - 1].page_size || need * ps - size <= size / 8) {
			*hugetlb = 1;
			*page_size = ps;
			return;
		}
	}
}
