/* place.h - where a new segment goes: a cache's memory policy (place.c).
 * Knows mounts and segment files, not caches: what a load needs placed comes
 * in struct place_req, and the caller frees memory when asked (make_room). */
#ifndef LOADER_PLACE_H
#define LOADER_PLACE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bind.h" /* numa/ */
#include "config.h"
#include "segment.h"

struct place_req {
	const struct loader_conf *conf; /* hugetlb_dir, shm_dir */
	const char *prefix;             /* segment file prefix "shmkv-xxxxxxxx-" */
	const char *name;               /* cache */
	uint64_t load_id;               /* names the file */
	enum mem_policy memory;
	mode_t mode;
	gid_t gid;                      /* (gid_t)-1: keep */
	/* NUMA: the nodes this copy's memory is bound to before its first touch
	 * (numa/bind.h); NULL or NBIND_NONE: the kernel's default */
	const struct nplan_seg *bind;
	/* Bound huge pages: 1 when the caller's read (io_uring, in parallel)
	 * faults every page in and turns a fault's EFAULT into "node short"
	 * (load.c); 0 faults them in here, one thread (a copy filled by
	 * memcpy would take SIGBUS on a node short of huge pages). */
	int fill_by_read;
	/* Memory is short (hugetlb: huge pages, else tmpfs) for size bytes: may
	 * free some (the loader drops the cache's rollback segment, logged with
	 * reason) and returns 1 if it did and the allocation is worth retrying,
	 * 0 if not. NULL: nothing to free. */
	int (*make_room)(void *arg, int hugetlb, uint64_t size, const char *reason);
	void *arg;
};

/* Creates a segment for an image of size bytes: hugetlbfs (largest page
 * size that wastes at most 1/8 of the image, else the smallest) and/or
 * tmpfs, as r->memory says; when memory is short, asks r->make_room once
 * and retries. note gets why the memory is not the policy's first choice
 * ("" if it is). Returns 0, or -ENOMEM/-ENOSPC (short: the load is
 * refused), other -errno, with why. */
int place_segment(const struct place_req *r, uint64_t size, struct seg *s, char *note,
		  size_t note_len, char *why, size_t why_len);

/* A read into huge pages bound with fill_by_read failed with EFAULT: the
 * bound node may have had no huge page for a fault (taken by another process
 * since the reservation), or the source itself said EFAULT. Faulting the
 * rest in tells which: node short rewrites why and returns -ENOMEM; else
 * returns -EFAULT with why (the read's message) as it was. */
int place_read_fault(const struct place_req *r, struct seg *s, char *why, size_t why_len);

/* The memory place_segment() tries first for size bytes: *hugetlb and the
 * page size (the tmpfs page size when no hugetlbfs mount serves), so that a
 * NUMA plan counts the pages a node must have free. */
void place_first_choice(const struct place_req *r, uint64_t size, int *hugetlb,
			uint64_t *page_size);

#endif /* LOADER_PLACE_H */
