/* shmkv/attach.h - attach to a loader-managed cache by name; lock-free refresh.
 * Part of the header-only reader; include <shmkv.h>, not this file.
 * Protocol: lib/PROTOCOL.md. The control segment (open, read, publish): ctl.h. */
#ifndef SHMKV_ATTACH_H
#define SHMKV_ATTACH_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "atomic.h"
#include "ctl.h"
#include "delta.h"
#include "open.h"
#include "protocol.h"

#define SHMKV_ATTACH_VERIFY 8u /* verify every image checksum at attach and refresh */

/* -EACCES on a segment: readers get in through the group of the loader's
 * segment directory (0750), so name that group; a bare "Permission denied"
 * leaves an operator guessing. */
static inline int shmkv__access_hint(const char *path, char *why, size_t why_len)
{
	char dir[SHMKV_CTL_PATH_MAX];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	struct stat st;
	if (slash && slash != dir)
		*slash = 0;
	if (!slash || stat(dir, &st) != 0)
		return shmkv__fail(-EACCES, why, why_len, "%s: %s", path, shmkv_strerror(-EACCES));
	return shmkv__fail(-EACCES, why, why_len,
			   "%s: %s: readers need the group of %s (gid %u, mode %04o); add this "
			   "user to that group (packages: shmkv)",
			   path, shmkv_strerror(-EACCES), dir, (unsigned)st.st_gid,
			   (unsigned)(st.st_mode & 07777));
}

/* Opens a segment file read-only for mapping: only a regular file of owner
 * (the control segment file's uid) that no one else can write (-EPERM):
 * else whoever can write a directory above the segment directory could put
 * a file of their own there. Returns the descriptor or an error; id (if
 * not NULL): the file's device and inode. */
static inline int shmkv__open_segment(const shmkv_ctl_segment *seg, uint64_t owner,
				      uint64_t id[2], char *why, size_t why_len)
{
	SHMKV_TRACE(segment_open);
	/* O_NONBLOCK: a FIFO under a segment's name must not block the reader */
	int fd = open(seg->path, O_RDONLY | SHMKV__O_CLOEXEC | SHMKV__O_NONBLOCK);
	if (fd < 0) {
		int err = -errno;
		if (err == -EACCES)
			return shmkv__access_hint(seg->path, why, why_len);
		return shmkv__fail(err, why, why_len, "%s: %s", seg->path, shmkv_strerror(err));
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return shmkv__fail(SHMKV_EPROTO, why, why_len, "%s: not a regular file", seg->path);
	}
	if ((uint64_t)st.st_uid != owner || (st.st_mode & 022)) {
		close(fd);
		return shmkv__fail(-EPERM, why, why_len,
				   "%s: owned by uid %u mode %04o; segments must be owned by the control "
				   "segment's owner (uid %llu) and writable by no one else: not mapped",
				   seg->path,
				   (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
				   (unsigned long long)owner);
	}
	if ((uint64_t)st.st_size < seg->size || seg->map_size < seg->size) {
		close(fd);
		return shmkv__fail(SHMKV_ETRUNCATED, why, why_len,
				   "%s: segment smaller than the %llu-byte image", seg->path,
				   (unsigned long long)seg->size);
	}
	if (id) {
		id[0] = (uint64_t)st.st_dev;
		id[1] = (uint64_t)st.st_ino;
	}
	return fd;
}

/* Checks the image mapped at m for seg: a plain image (a base copy) or,
 * when delta, a delta image (a copy of an overlay); checksums with
 * SHMKV_ATTACH_VERIFY. */
static inline int shmkv__check_segment(const void *m, const shmkv_ctl_segment *seg, int delta,
				       unsigned flags, char *why, size_t why_len)
{
	int err = shmkv_image_check(m, seg->size,
				    (flags & SHMKV_ATTACH_VERIFY) ? 0 : SHMKV_OPEN_NOVERIFY, why,
				    why_len);
	if (err)
		return err;
	int is_delta = ((const shmkv_image_header *)m)->layout_hash == SHMKV_DELTA_LAYOUT_HASH;
	if (is_delta != delta)
		return shmkv__fail(SHMKV_EPROTO, why, why_len,
				   "%s: %s where the control segment names %s", seg->path,
				   is_delta ? "a delta image" : "a plain image",
				   delta ? "an overlay (a delta image)" : "a base image");
	return 0;
}

/* Maps a base segment read-only and checks its image (checksums when asked). */
static inline int shmkv__map_segment(const shmkv_ctl_segment *seg, uint64_t owner, unsigned flags,
				     void **map, char *why, size_t why_len)
{
	int fd = shmkv__open_segment(seg, owner, NULL, why, why_len);
	if (fd < 0)
		return fd;
	void *m = mmap(NULL, (size_t)seg->map_size, PROT_READ, MAP_SHARED, fd, 0);
	int err = m == MAP_FAILED ? -errno : 0;
	close(fd);
	if (err)
		return shmkv__fail(err, why, why_len, "%s: mmap: %s", seg->path, shmkv_strerror(err));
	err = shmkv__check_segment(m, seg, 0, flags, why, why_len);
	if (err) {
		munmap(m, (size_t)seg->map_size);
		return err;
	}
	*map = m;
	return 0;
}

/* A page size fit to align a mapping at: a power of two, 4 KiB..1 GiB. */
static inline int shmkv__page_ok(uint64_t ps)
{
	return ps >= 4096 && ps <= (UINT64_C(1) << 30) && !(ps & (ps - 1));
}

/* One image of a generation in a handle's range: which file (its control
 * segment entry, its device and inode) and where (off, len: the mapping's
 * bytes from the range's start; len 0: no such image; part: an overlay's
 * part of the range, range.h). */
typedef struct shmkv__level {
	shmkv_ctl_segment seg;
	uint64_t id[2];
	size_t off, len;
	unsigned part;
} shmkv__level;

/* What attach and refresh map: one generation. */
typedef struct shmkv__gen_map {
	uint64_t gen;
	shmkv__level lv[3];    /* the base copy, the lower overlay's, the top's */
	void *map;             /* the base, and after it its overlays */
	size_t map_len;
	size_t room_off;       /* protocol 2: where the room for overlays starts (the
				  base's end), else 0 */
	unsigned overlays;     /* 0; 1: the lower overlay; 2: the lower and the top */
	unsigned fresh;        /* bit i: lv[i] mapped by this call (else kept) */
	shmkv__range *range;   /* map's: a new one, or the handle's (its base kept) */
	uint64_t parts;        /* the parts of range the overlays lie in */
	shmkv over[2];         /* the overlays' handles, bound: the lower, the top */
} shmkv__gen_map;

/* The page size and mapping size of s make a mapping, else SHMKV_EPROTO. */
static inline int shmkv__seg_shape(const shmkv_ctl_segment *s, char *why, size_t why_len)
{
	if (!shmkv__page_ok(s->page_size) || s->map_size % s->page_size)
		return shmkv__fail(SHMKV_EPROTO, why, why_len,
				   "control segment: %s: page size %llu, map size %llu are "
				   "not a mapping's", s->path, (unsigned long long)s->page_size,
				   (unsigned long long)s->map_size);
	return 0;
}

/* Address space a protocol 2 handle reserves behind its base for the
 * overlays of later generations (PROT_NONE, MAP_NORESERVE: no memory): the
 * base's size, at least 4 times what the overlays take now and 4 MiB; 0 on
 * overflow. */
static inline uint64_t shmkv__overlay_room(uint64_t base, uint64_t overlays)
{
	uint64_t r = base > (UINT64_C(4) << 20) ? base : UINT64_C(4) << 20;
	if (overlays > UINT64_MAX / 4)
		return 0;
	return overlays * 4 > r ? overlays * 4 : r;
}

/* Checks the images of g that this call mapped (bit i of g->fresh): each
 * image (the overlays deltas, checksums when asked) and that each overlay
 * applies to the base (shmkv_delta_set2's checks, FORMAT.md §19.4): a
 * mismatch refuses the generation as any bad segment does. A kept image
 * was checked against the same base when it was mapped. Binds g->over. */
static inline int shmkv__check_levels(shmkv__gen_map *g, unsigned flags, char *why,
				      size_t why_len)
{
	uint8_t *start = (uint8_t *)g->map;
	const unsigned n = 1 + g->overlays;
	int err = 0;
	for (unsigned i = 0; i < n && !err; i++)
		if (g->fresh & (1u << i))
			err = shmkv__check_segment(start + g->lv[i].off, &g->lv[i].seg, i > 0, flags,
						   why, why_len);
	shmkv b;
	memset(&b, 0, sizeof b);
	if (!err)
		shmkv__bind(&b, start, g->lv[0].seg.size);
	for (unsigned i = 1; i < n && !err; i++) {
		memset(&g->over[i - 1], 0, sizeof g->over[i - 1]);
		shmkv__bind(&g->over[i - 1], start + g->lv[i].off, g->lv[i].seg.size);
		if (!(g->fresh & (1u << i)))
			continue;
		err = shmkv__delta_applies(&b, &g->over[i - 1], why, why_len);
		if (err)
			shmkv__prefix(err, why, why_len, "%s %s: ", i == 1 ? "overlay" : "top overlay",
				      g->lv[i].seg.path);
	}
	return err;
}

/* Maps a base copy and its overlays' copies (protocol 2: the lower one,
 * and the top one when there are two: g->lv) as ONE range of the address
 * space: [base][PROT_NONE gap to the lower's page size][lower][gap][top],
 * then, with room, PROT_NONE room for the overlays of later generations
 * (shmkv__map_kept), so that the handle's one mapping (db->map,
 * db->map_len: its range, range.h), which the range's last holder unmaps,
 * holds them all; the gaps are ours, so the one munmap never touches
 * another mapping. Checks every image (shmkv__check_levels). */
static inline int shmkv__map_levels(shmkv__gen_map *g, int room, uint64_t owner, unsigned flags,
				    char *why, size_t why_len)
{
	const unsigned n = 1 + g->overlays;
	uint64_t off[3], align = 0, total = 0;
	int fd[3] = {-1, -1, -1};
	for (unsigned i = 0; i < n; i++) {
		const shmkv_ctl_segment *s = &g->lv[i].seg;
		int bad = shmkv__seg_shape(s, why, why_len);
		if (bad)
			return bad;
		if (s->page_size > align)
			align = s->page_size;
		off[i] = (total + s->page_size - 1) & ~(s->page_size - 1);
		if (off[i] < total || off[i] + s->map_size < off[i])
			return shmkv__fail(SHMKV_EPROTO, why, why_len,
					   "control segment: sizes overflow");
		total = off[i] + s->map_size;
	}
	uint64_t len = total, base_end = g->lv[0].seg.map_size;
	if (room) {
		uint64_t r = shmkv__overlay_room(base_end, total - base_end);
		if (!r || r > UINT64_MAX - base_end - align)
			return shmkv__fail(SHMKV_EPROTO, why, why_len,
					   "control segment: sizes overflow");
		uint64_t want = (base_end + r + align - 1) & ~(align - 1);
		if (want > len)
			len = want;
	}
	if (len > SIZE_MAX - align)
		return shmkv__fail(SHMKV_EPROTO, why, why_len, "control segment: sizes overflow");
	int err = 0;
	uint8_t *start = NULL;
	for (unsigned i = 0; i < n && !err; i++) {
		fd[i] = shmkv__open_segment(&g->lv[i].seg, owner, g->lv[i].id, why, why_len);
		if (fd[i] < 0)
			err = fd[i];
	}
	if (err)
		goto out;
	{
		void *r = mmap(NULL, (size_t)(len + align), PROT_NONE,
			       MAP_PRIVATE | SHMKV__MAP_ANONYMOUS | SHMKV__MAP_NORESERVE, -1, 0);
		if (r == MAP_FAILED) {
			err = -errno;
			shmkv__fail(err, why, why_len, "mmap %llu bytes: %s",
				    (unsigned long long)(len + align), shmkv_strerror(err));
			goto out;
		}
		uintptr_t a = ((uintptr_t)r + (uintptr_t)align - 1) & ~(uintptr_t)(align - 1);
		start = (uint8_t *)a;
		size_t head = (size_t)(a - (uintptr_t)r), tail = (size_t)(align - head);
		if (head)
			munmap(r, head);
		if (tail)
			munmap(start + len, tail);
	}
	for (unsigned i = 0; i < n && !err; i++) {
		g->lv[i].off = (size_t)off[i];
		g->lv[i].len = (size_t)g->lv[i].seg.map_size;
		if (mmap(start + off[i], g->lv[i].len, PROT_READ, MAP_SHARED | MAP_FIXED, fd[i],
			 0) == MAP_FAILED) {
			err = -errno;
			shmkv__fail(err, why, why_len, "%s: mmap: %s", g->lv[i].seg.path,
				    shmkv_strerror(err));
		}
	}
	g->map = start;
	g->fresh = (1u << n) - 1;
	if (!err)
		err = shmkv__check_levels(g, flags, why, why_len);
out:
	for (unsigned i = 0; i < n; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	if (err && start)
		munmap(start, (size_t)len);
	if (!err) {
		g->map_len = (size_t)len;
		g->room_off = room ? (size_t)base_end : 0;
	}
	return err;
}

/* Whether the image the handle maps as cur (its range starts at start) is
 * the one entry s names, its file open as fd (device and inode id): the
 * same entry (path, sizes, page size, node), the same file (the mapping
 * keeps cur's inode alive, so no other file has its number meanwhile) and
 * the same header (which holds every section's checksum). */
static inline int shmkv__same_image(const shmkv__level *cur, const uint8_t *start,
				    const shmkv_ctl_segment *s, int fd, const uint64_t id[2])
{
	if (!cur->len || strcmp(cur->seg.path, s->path) != 0 || cur->seg.size != s->size ||
	    cur->seg.map_size != s->map_size || cur->seg.page_size != s->page_size ||
	    cur->seg.node != s->node || cur->id[0] != id[0] || cur->id[1] != id[1])
		return 0;
	shmkv_image_header h;
	/* a fresh descriptor: offset 0 */
	return read(fd, &h, sizeof h) == (ssize_t)sizeof h &&
	       memcmp(&h, start + cur->off, sizeof h) == 0;
}

/* The first offset in [from, end) of the range at start where len bytes
 * aligned to ps overlap none of the nb busy [off, end) parts; SIZE_MAX:
 * none. */
static inline size_t shmkv__place(uintptr_t start, size_t from, size_t end, uint64_t ps,
				  uint64_t len, size_t busy[][2], unsigned nb)
{
	size_t o = from;
	for (;;) {
		uintptr_t a = start + o;
		if (a > UINTPTR_MAX - ps)
			return SIZE_MAX;
		o = (size_t)(((a + ps - 1) & ~(uintptr_t)(ps - 1)) - start);
		if (o > end || len > end - o)
			return SIZE_MAX;
		unsigned i = 0;
		while (i < nb && !(o < busy[i][1] && busy[i][0] < o + len))
			i++;
		if (i == nb)
			return o;
		o = busy[i][1];
	}
}

/* Defined after the handle: the parts of a protocol 2 handle's range. */
typedef struct shmkv__attached shmkv__attached;
static inline int shmkv__map_kept(shmkv__attached *a, uint64_t owner, unsigned flags,
				  shmkv__gen_map *g, char *why, size_t why_len);

/* Replica choice (lib/PROTOCOL.md, "Replicas"): the node from getcpu(2),
 * the distances from sysfs (no libnuma). SHMKV_ATTACH_NODE_CURRENT: the
 * calling thread's node, at attach and at each refresh that moves. */
#define SHMKV_ATTACH_NODE_CURRENT (-1)

/* The calling thread's NUMA node, or -1 (unknown, or a strict ISO C build
 * without _DEFAULT_SOURCE/_GNU_SOURCE, which declare syscall()). */
static inline int shmkv__current_node(void)
{
#if defined(SYS_getcpu) && (defined(_DEFAULT_SOURCE) || defined(_GNU_SOURCE))
	unsigned cpu = 0, node = 0;
	if (syscall(SYS_getcpu, &cpu, &node, NULL) == 0 && node < 64u)
		return (int)node;
#endif
	return -1;
}

/* SLIT distance from node `from` to each online node (INT_MAX: unknown):
 * nodeF/distance lists one number per node of .../node/online, in order. */
static inline void shmkv__node_distances(int from, int dist[64])
{
	for (int i = 0; i < 64; i++)
		dist[i] = INT_MAX;
	char path[96], line[1024];
	int ids[64], n = 0;
	FILE *f = fopen("/sys/devices/system/node/online", "r");
	if (!f)
		return;
	char *ok = fgets(line, sizeof line, f);
	fclose(f);
	for (char *p = ok ? line : NULL; p && *p && n < 64;) {
		char *end;
		long a = strtol(p, &end, 10), b = a;
		if (end == p)
			break;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		for (long i = a; i <= b && i >= 0 && i < 64 && n < 64; i++)
			ids[n++] = (int)i;
		p = *end == ',' ? end + 1 : NULL;
	}
	snprintf(path, sizeof path, "/sys/devices/system/node/node%d/distance", from);
	f = fopen(path, "r");
	if (!f)
		return;
	ok = fgets(line, sizeof line, f);
	fclose(f);
	char *p = ok ? line : NULL;
	for (int i = 0; p && i < n; i++) {
		char *end;
		long d = strtol(p, &end, 10);
		if (end == p)
			break;
		dist[ids[i]] = (int)d;
		p = end;
	}
}

/* The segment to map for node want (-1: unknown): the one pinned to want,
 * else the nearest by distance, else 0. */
static inline uint32_t shmkv__pick_segment(const shmkv_ctl *copy, int want)
{
	/* at most SHMKV_CTL_MAX_SEGMENTS (shmkv_ctl_read), said again for the
	 * compiler, which otherwise sees an uninitialized entry past them */
	const uint32_t n = copy->segment_count < SHMKV_CTL_MAX_SEGMENTS ? copy->segment_count
									: SHMKV_CTL_MAX_SEGMENTS;
	if (n <= 1 || want < 0)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		if (copy->segments[i].node == want)
			return i;
	int dist[64], best_d = INT_MAX;
	uint32_t best = 0;
	shmkv__node_distances(want, dist);
	for (uint32_t i = 0; i < n; i++) {
		int node = copy->segments[i].node;
		if (node >= 0 && node < 64 && dist[node] < best_d) {
			best_d = dist[node];
			best = i;
		}
	}
	return best;
}

/* A protocol 2 generation's entries by role (lib/PROTOCOL.md, "Protocol
 * 2"): base copies (in a shmkv_ctl, for shmkv__pick_segment), the lower
 * overlay's copies and the top overlay's, each in control segment order. */
typedef struct shmkv__roles {
	shmkv_ctl bases;
	shmkv_ctl_segment lower[SHMKV_CTL_MAX_SEGMENTS], top[SHMKV_CTL_MAX_SEGMENTS];
	uint32_t nlower, ntop;
} shmkv__roles;

/* Splits a snapshot of protocol version into its roles: protocol 1 has
 * base copies only; any flag the version does not define, TOP without
 * OVERLAY, overlay copies without a base copy, or top copies without a
 * lower copy, is SHMKV_EPROTO. */
static inline int shmkv__split_roles(const shmkv_ctl *copy, uint32_t version, shmkv__roles *ro,
				     char *why, size_t why_len)
{
	uint32_t known = version == SHMKV_PROTOCOL_VERSION_2 ? SHMKV_SEG_KNOWN_V2
							    : SHMKV_SEG_KNOWN_V1;
	ro->bases = *copy;
	ro->bases.segment_count = 0;
	ro->nlower = ro->ntop = 0;
	for (uint32_t i = 0; i < copy->segment_count; i++) {
		const shmkv_ctl_segment *s = &copy->segments[i];
		if (s->flags & ~known)
			return shmkv__fail(SHMKV_EPROTO, why, why_len,
					   "control segment (protocol %u): segment %u has unknown "
					   "flags %x", version, i, s->flags);
		if ((s->flags & SHMKV_SEG_TOP) && !(s->flags & SHMKV_SEG_OVERLAY))
			return shmkv__fail(SHMKV_EPROTO, why, why_len,
					   "control segment: segment %u has the TOP flag without "
					   "OVERLAY", i);
		if (s->flags & SHMKV_SEG_TOP)
			ro->top[ro->ntop++] = *s;
		else if (s->flags & SHMKV_SEG_OVERLAY)
			ro->lower[ro->nlower++] = *s;
		else
			ro->bases.segments[ro->bases.segment_count++] = *s;
	}
	if (ro->nlower + ro->ntop && !ro->bases.segment_count)
		return shmkv__fail(SHMKV_EPROTO, why, why_len,
				   "control segment: generation %llu has an overlay but no base",
				   (unsigned long long)copy->generation);
	if (ro->ntop && !ro->nlower)
		return shmkv__fail(SHMKV_EPROTO, why, why_len,
				   "control segment: generation %llu has a top overlay but no lower "
				   "one", (unsigned long long)copy->generation);
	return 0;
}

/* The copy of an overlay for the base copy mapped: the one on its node,
 * else the first (lib/PROTOCOL.md, "Protocol 2"); NULL: none. */
static inline const shmkv_ctl_segment *shmkv__pick_overlay(const shmkv_ctl_segment *ovs,
							   uint32_t nov, int32_t node)
{
	for (uint32_t i = 0; i < nov; i++)
		if (ovs[i].node == node)
			return &ovs[i];
	return nov ? &ovs[0] : NULL;
}

/* A new range (range.h) for generation g, mapped anew: held by the handle
 * that will serve it, each overlay in a part of its own. -ENOMEM: g
 * unmapped. */
static inline int shmkv__gen_range(shmkv__gen_map *g, char *why, size_t why_len)
{
	g->range = shmkv__range_new(g->map, g->map_len);
	if (!g->range) {
		munmap(g->map, g->map_len);
		return shmkv__fail(-ENOMEM, why, why_len, "out of memory");
	}
	for (unsigned i = 1; i <= g->overlays; i++) {
		g->lv[i].part = i - 1;
		shmkv__part_claim(g->range, i - 1, g->lv[i].off, g->lv[i].len);
		g->parts |= UINT64_C(1) << (i - 1);
	}
	return 0;
}

/* Maps base copy pick and its overlays' copies (if any). Protocol 2 (v2):
 * with room for later overlays; keep (refresh; NULL at attach): the handle,
 * whose base is kept if the generation's base copy is the same image. */
static inline int shmkv__map_gen(const shmkv__roles *ro, uint32_t pick, int v2,
				 shmkv__attached *keep, uint64_t owner, unsigned flags,
				 shmkv__gen_map *g, char *why, size_t why_len)
{
	memset(g->lv, 0, sizeof g->lv);
	g->lv[0].seg = ro->bases.segments[pick];
	const shmkv_ctl_segment *lower = shmkv__pick_overlay(ro->lower, ro->nlower,
							     g->lv[0].seg.node),
				*top = shmkv__pick_overlay(ro->top, ro->ntop, g->lv[0].seg.node);
	g->overlays = top ? 2 : lower ? 1 : 0;
	if (lower)
		g->lv[1].seg = *lower;
	if (top)
		g->lv[2].seg = *top;
	g->room_off = 0;
	g->fresh = 1;
	g->range = NULL;
	g->parts = 0;
	int err;
	if (keep) {
		err = shmkv__map_kept(keep, owner, flags, g, why, why_len);
		if (err != 1)
			return err;
	}
	if (!g->overlays && !v2) {
		g->map_len = (size_t)g->lv[0].seg.map_size;
		g->lv[0].len = g->map_len;
		err = shmkv__seg_shape(&g->lv[0].seg, why, why_len);
		if (!err)
			err = shmkv__map_segment(&g->lv[0].seg, owner, flags, &g->map, why,
						 why_len);
	} else {
		err = shmkv__map_levels(g, v2, owner, flags, why, why_len);
	}
	return err ? err : shmkv__gen_range(g, why, why_len);
}

/* Maps the current generation, retrying when it moves underneath (the
 * loader unlinks a segment only after publishing its successor). passes
 * bounds each seqcount read; node: the replica wanted (one that does not
 * map falls back to the first base copy); owner: the only uid a segment may
 * have. */
static inline int shmkv__attach_current(const shmkv_ctl *ctl, uint64_t owner, unsigned flags,
					uint32_t passes, int node, shmkv__attached *keep,
					shmkv__gen_map *g, char *why, size_t why_len)
{
	if (node == SHMKV_ATTACH_NODE_CURRENT)
		node = shmkv__current_node();
	int err = -EAGAIN;
	shmkv_ctl copy;
	shmkv__roles ro;
	/* written once before the file got its name, checked by shmkv_ctl_open */
	uint32_t version = ctl->protocol_version;
	for (int tries = 0; tries < 100; tries++) {
		err = shmkv__ctl_read_n(ctl, &copy, passes);
		if (err == -EAGAIN)
			return shmkv__fail(err, why, why_len,
					   "control segment stays mid-update (loader died while "
					   "publishing?); try again");
		if (err)
			return shmkv__fail(err, why, why_len, "control segment holds %u segments, "
					   "at most %u are possible", copy.segment_count,
					   SHMKV_CTL_MAX_SEGMENTS);
		g->gen = copy.generation;
		if (copy.flags & SHMKV_CTL_RETIRED)
			return shmkv__fail(SHMKV_ESTALE, why, why_len,
					   "the loader dropped this cache or replaced its control "
					   "segment (generation %llu): attach again",
					   (unsigned long long)g->gen);
		/* generation 0, or a generation without segments (the loader found
		 * its images gone at restart): nothing to map */
		if (g->gen == 0)
			return shmkv__fail(-EAGAIN, why, why_len, "no generation published yet");
		err = shmkv__split_roles(&copy, version, &ro, why, why_len);
		if (err)
			return err;
		uint32_t pick = shmkv__pick_segment(&ro.bases, node);
		if (ro.bases.segment_count == 0 || !ro.bases.segments[pick].path[0])
			return shmkv__fail(-EAGAIN, why, why_len,
					   "nothing published (generation %llu has no segment)",
					   (unsigned long long)g->gen);
		const int v2 = version == SHMKV_PROTOCOL_VERSION_2;
		err = shmkv__map_gen(&ro, pick, v2, keep, owner, flags, g, why, why_len);
		if (err && pick != 0) /* that replica is unusable: the first copy */
			err = shmkv__map_gen(&ro, 0, v2, keep, owner, flags, g, why, why_len);
		if (err != -ENOENT)
			return err;
		if (shmkv_ctl_generation(ctl) == g->gen)
			return err; /* gone without a successor: not a race */
	}
	return err;
}

/* An attached handle: the handle first (shmkv_close frees it as one
 * block), then what shmkv_refresh remembers. File handles are plain shmkv. */
struct shmkv__attached {
	shmkv db;
	uint64_t failed_seq; /* seq whose generation failed to map; odd (never a
				published seq) when none */
	int failed_err;      /* what that attempt returned */
	int want_node;       /* replica wanted: a node, or SHMKV_ATTACH_NODE_CURRENT */
	int node;            /* node of the replica mapped now; -1: not pinned */
	char name[SHMKV_CACHE_NAME_MAX + 1]; /* the cache's name, for the probes (trace.h) */
	shmkv over[2]; /* protocol 2: the overlays mapped after the base, the lower and the
			  top (db.over and db.top point here while there are; their
			  memory is part of db.range) */
	shmkv__level lv[3]; /* the images of the generation mapped last (db.range's,
			       also once handed to shmkv_detach): the base, the lower,
			       the top */
	size_t room_off;    /* protocol 2: where the room for overlays starts in
			       db.range, else 0 (no image kept at refresh) */
	int no_reuse;       /* room of db.range could not be given back: map the next
			       generation anew */
};

/* Maps generation g keeping what a (a protocol 2 handle) maps of it, in
 * its range (range.h), whether or not it handed its generation to
 * shmkv_detach: its base when g's base copy is the same image
 * (shmkv__same_image), and each overlay that is; maps the others into free
 * room behind the base (MAP_FIXED over the reservation, clear of every
 * overlay the range holds: the handle's and its detached generations', so
 * that a refused generation leaves them all whole), each in a free part,
 * and checks them. 0: g is mapped in a's range, its new overlays' parts
 * claimed for a; 1: it cannot be (another base, no room, no part free): map
 * it anew; else an error, nothing kept. */
static inline int shmkv__map_kept(shmkv__attached *a, uint64_t owner, unsigned flags,
				  shmkv__gen_map *g, char *why, size_t why_len)
{
	shmkv__range *r = a->db.range;
	if (!r || !a->room_off || a->no_reuse)
		return 1;
	uint8_t *start = r->start;
	const unsigned n = 1 + g->overlays;
	int fd[3] = {-1, -1, -1}, err = 0;
	unsigned mapped = 0, i, next = 0;
	size_t busy[SHMKV__RANGE_PARTS + 2][2];
	unsigned nb = 0;
	for (i = 0; i < SHMKV__RANGE_PARTS; i++)
		if (!shmkv__part_free(r, i)) {
			busy[nb][0] = r->part[i].off;
			busy[nb++][1] = r->part[i].off + r->part[i].len;
		}
	g->fresh = 0;
	for (i = 0; i < n && !err; i++) {
		shmkv__level *l = &g->lv[i];
		fd[i] = shmkv__open_segment(&l->seg, owner, l->id, why, why_len);
		if (fd[i] < 0) {
			err = fd[i];
			break;
		}
		if (shmkv__same_image(&a->lv[i], start, &l->seg, fd[i], l->id)) {
			l->off = a->lv[i].off;
			l->len = a->lv[i].len;
			l->part = a->lv[i].part;
			continue;
		}
		if (i == 0) {
			err = 1; /* another base */
			break;
		}
		err = shmkv__seg_shape(&l->seg, why, why_len);
		if (err)
			break;
		/* free now, free until claimed: only this handle claims parts */
		while (next < SHMKV__RANGE_PARTS && !shmkv__part_free(r, next))
			next++;
		l->off = next < SHMKV__RANGE_PARTS
				 ? shmkv__place((uintptr_t)start, a->room_off, r->len,
						l->seg.page_size, l->seg.map_size, busy, nb)
				 : SIZE_MAX;
		if (l->off == SIZE_MAX) {
			err = 1; /* no room: the whole generation anew, with more */
			break;
		}
		l->part = next++;
		l->len = (size_t)l->seg.map_size;
		busy[nb][0] = l->off;
		busy[nb++][1] = l->off + l->len;
		g->fresh |= 1u << i;
	}
	for (i = 0; i < n && !err; i++)
		if (g->fresh & (1u << i)) {
			mapped |= 1u << i; /* on failure too: MAP_FIXED may have unmapped */
			if (mmap(start + g->lv[i].off, g->lv[i].len, PROT_READ,
				 MAP_SHARED | MAP_FIXED, fd[i], 0) == MAP_FAILED) {
				err = -errno;
				shmkv__fail(err, why, why_len, "%s: mmap: %s", g->lv[i].seg.path,
					    shmkv_strerror(err));
			}
		}
	g->map = start;
	g->map_len = r->len;
	g->room_off = a->room_off;
	if (!err)
		err = shmkv__check_levels(g, flags, why, why_len);
	for (i = 0; i < n; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	for (i = 1; i < n && err; i++)
		if ((mapped & (1u << i)) && shmkv__unmap_level(start + g->lv[i].off, g->lv[i].len))
			a->no_reuse = 1; /* stays mapped until the range is unmapped */
	if (err)
		return err;
	g->range = r;
	for (i = 1; i < n; i++) {
		if (g->fresh & (1u << i))
			shmkv__part_claim(r, g->lv[i].part, g->lv[i].off, g->lv[i].len);
		g->parts |= UINT64_C(1) << g->lv[i].part;
	}
	return 0;
}

/* Makes db (attached: allocated as a shmkv__attached) serve generation g,
 * mapped by shmkv__attach_current: the base, read through its overlays. */
static inline void shmkv__install(shmkv *db, shmkv__gen_map *g)
{
	shmkv__attached *a = (shmkv__attached *)db;
	shmkv__bind(db, g->map, g->lv[0].seg.size); /* db->over = db->top = NULL */
	db->map = g->map;
	db->map_len = g->map_len;
	db->range = g->range;
	db->range_parts = g->parts;
	db->generation = g->gen;
	a->node = g->lv[0].seg.node;
	a->room_off = g->room_off;
	for (unsigned i = 0; i < 3; i++)
		a->lv[i] = g->lv[i]; /* len 0 past the overlays */
	/* checked against the base by shmkv__map_levels */
	for (unsigned i = 0; i < g->overlays; i++)
		a->over[i] = g->over[i];
	if (g->overlays)
		db->over = &a->over[0];
	if (g->overlays > 1)
		db->top = &a->over[1];
}

/* Whether the control segment behind ctl_fd can still be read, checked
 * before its mapping is touched: not removed or replaced (link count 0),
 * not truncated (SIGBUS) and writable by neither group nor others. *owner:
 * its uid, which every segment must have (lib/PROTOCOL.md, "Trust": st_uid
 * is set only by root or at creation, so it names the loader). 0,
 * SHMKV_ESTALE, or SHMKV_EPROTO (the mode). */
static inline int shmkv__ctl_sound(int ctl_fd, uint64_t *owner, char *why, size_t why_len)
{
	struct stat st;
	if (fstat(ctl_fd, &st) != 0)
		return shmkv__fail(SHMKV_ESTALE, why, why_len, "control segment: fstat: %s",
				   shmkv_strerror(-errno));
	if (st.st_nlink == 0)
		return shmkv__fail(SHMKV_ESTALE, why, why_len,
				   "control segment removed or replaced (cache dropped?): attach "
				   "again");
	if ((uint64_t)st.st_size < SHMKV_CTL_SIZE)
		return shmkv__fail(SHMKV_ESTALE, why, why_len,
				   "control segment truncated to %llu bytes: attach again",
				   (unsigned long long)st.st_size);
	if (st.st_mode & 022)
		return shmkv__fail(SHMKV_EPROTO, why, why_len,
				   "control segment: mode %04o is writable by group or others: "
				   "not trusted", (unsigned)(st.st_mode & 07777));
	*owner = (uint64_t)st.st_uid;
	return 0;
}

/* Seqcount passes a refresh allows itself: enough for a live loader's next
 * section to end, far from a stall. */
#define SHMKV__REFRESH_PASSES 64u

/* shmkv_attach_diag() reading the copy of node (numa=replicate), else the
 * nearest, else the first (shmkv.h; lib/README.md). */
static inline int shmkv_attach_node(const char *root, const char *name, int node,
				    unsigned flags, shmkv **out, char *why, size_t why_len);

/* Attaches read-only to cache name under root (NULL: $SHMKV_ROOT, else
 * SHMKV_DEFAULT_ROOT), to the copy of the calling thread's node. */
static inline int shmkv_attach_diag(const char *root, const char *name, unsigned flags,
				    shmkv **out, char *why, size_t why_len)
{
	return shmkv_attach_node(root, name, SHMKV_ATTACH_NODE_CURRENT, flags, out, why, why_len);
}

static inline int shmkv_attach_node(const char *root, const char *name, int node,
				    unsigned flags, shmkv **out, char *why, size_t why_len)
{
	int saved_errno = errno, err = 0, ctl_fd = -1;
	shmkv_ctl *ctl = NULL;
	shmkv__gen_map g;
	uint64_t owner = 0;
	shmkv *db = NULL;
	g.gen = 0;
	*out = NULL;
	if (why && why_len)
		why[0] = 0;
	if (flags & ~(SHMKV_ATTACH_VERIFY | SHMKV_OPEN_DEEP)) {
		err = shmkv__fail(-EINVAL, why, why_len, "unknown attach flags %x", flags);
		goto done;
	}
	if (node < SHMKV_ATTACH_NODE_CURRENT || node > 63) {
		err = shmkv__fail(-EINVAL, why, why_len, "node %d: expected 0..63 or "
				  "SHMKV_ATTACH_NODE_CURRENT", node);
		goto done;
	}
	err = shmkv_ctl_open_fd(root, name, 0, &ctl, &ctl_fd, why, why_len);
	if (!err)
		err = shmkv__ctl_sound(ctl_fd, &owner, why, why_len);
	if (err)
		goto done;
	err = shmkv__attach_current(ctl, owner, flags, SHMKV__SEQ_SPINS, node, NULL, &g, why,
				    why_len);
	if (err) {
		shmkv__prefix(err, why, why_len, "cache \"%s\": ", name);
		goto done;
	}
	{
		shmkv__attached *a = (shmkv__attached *)calloc(1, sizeof *a);
		if (a) {
			a->failed_seq = 1;
			a->want_node = node;
			a->db.ctl_fd = ctl_fd;
			ctl_fd = -1; /* the handle's now: shmkv_close closes it */
			snprintf(a->name, sizeof a->name, "%s", name); /* checked by shmkv_ctl_open */
			db = &a->db;
		}
	}
	if (!db) {
		shmkv__range_drop(g.range, g.parts); /* its one holder: unmapped */
		err = shmkv__fail(-ENOMEM, why, why_len, "out of memory");
		goto done;
	}
	shmkv__install(db, &g);
	db->ctl = ctl;
	db->flags = flags;
	if (flags & SHMKV_OPEN_DEEP) {
		/* the base alone, then each overlay alone (each image's own walk) */
		const shmkv *over = db->over, *top = db->top;
		db->over = db->top = NULL;
		err = shmkv_verify(db, why, why_len);
		for (unsigned i = 0; i < g.overlays && !err; i++) {
			err = shmkv_verify(&((shmkv__attached *)db)->over[i], why, why_len);
			if (err)
				shmkv__prefix(err, why, why_len, "%s: ",
					      i ? "top overlay" : "overlay");
		}
		db->over = over;
		db->top = top;
		if (err) {
			shmkv_close(db);
			db = NULL;
			ctl = NULL; /* shmkv_close unmapped it */
			goto done;
		}
	}
	*out = db;
	ctl = NULL;
done:
	SHMKV__USDT(attach, 4, db, name, g.gen, err);
	shmkv_ctl_close(ctl);
	if (ctl_fd >= 0)
		close(ctl_fd);
	errno = saved_errno;
	return err;
}

/* shmkv_attach_diag() with the root from $SHMKV_ROOT (or the default). */
static inline int shmkv_attach(const char *name, unsigned flags, shmkv **out)
{
	return shmkv_attach_diag(NULL, name, flags, out, NULL, 0);
}

/* Moves an attached handle to the current generation (shmkv.h): one fstat
 * and one atomic load when nothing changed; else maps the new image, then
 * unmaps the old one. On error the handle keeps its old generation;
 * SHMKV_ESTALE: it will never move again (lib/README.md, "Stale handles");
 * -EAGAIN mid-publish, at once. A generation that failed is not tried again
 * until the loader publishes again (its error comes from memory), so a hot
 * loop never pays open+fstat per call. No other thread may use the handle
 * meanwhile. */
static inline int shmkv_refresh(shmkv *db)
{
	shmkv__usdt_gate(db); /* SHMKV_USDT builds: is a get probe traced now? */
	if (!db->ctl)
		return 0;
	shmkv__attached *a = (shmkv__attached *)db; /* attached: allocated as one */
	/* before the mapping is read: a truncated file would SIGBUS it */
	uint64_t owner = 0;
	int stale = shmkv__ctl_sound(db->ctl_fd, &owner, NULL, 0);
	if (stale) {
		SHMKV__USDT(refresh, 5, db, a->name, db->generation, db->generation, stale);
		return stale;
	}
	/* acquire; pairs with the release store of generation in
	 * lib/shmkv/ctl.h:shmkv_ctl_publish() */
	if (shmkv_ctl_generation(db->ctl) == db->generation)
		return 0;
	uint64_t seq = shmkv__ctl_seq(db->ctl);
	if (seq & 1) {
		SHMKV__USDT(refresh, 5, db, a->name, db->generation, db->generation, -EAGAIN);
		return -EAGAIN; /* mid-publish, or the loader died in one: don't wait */
	}
	if (seq == a->failed_seq) {
		SHMKV__USDT(refresh, 5, db, a->name, db->generation, db->generation, a->failed_err);
		return a->failed_err; /* nothing published since that failure */
	}
	uint64_t old_gen = db->generation; /* for the refresh probe */
	(void)old_gen;
	int saved_errno = errno;
	shmkv__gen_map g;
	int err = shmkv__attach_current(db->ctl, owner, db->flags, SHMKV__REFRESH_PASSES,
					a->want_node, a, &g, NULL, 0);
	if (!err) {
		shmkv__range *old = db->range;
		uint64_t old_parts = db->range_parts;
		shmkv__install(db, &g);
		if (g.range == old) {
			/* the same range: the overlays not kept give their room back,
			 * unless a detached generation still reads them */
			shmkv__parts_drop(old, old_parts & ~g.parts);
		} else {
			/* unmapped unless a detached generation still holds it */
			shmkv__range_drop(old, old_parts);
			a->no_reuse = 0;
		}
		a->failed_seq = 1;
		err = 1;
	} else {
		a->failed_seq = seq;
		a->failed_err = err;
	}
	SHMKV__USDT(refresh, 5, db, a->name, old_gen, db->generation, err);
	errno = saved_errno;
	return err;
}

/* For bindings whose values outlive a refresh (python/src/cache.c): hands
 * the generation db maps to a new plain handle *out, which serves it until
 * shmkv_close(*out) (from any thread, also while db refreshes). db goes on
 * following the cache but serves nothing until its next shmkv_refresh that
 * returns 1 (until then only refresh, shmkv_generation, shmkv_detach and
 * close); both share the range (range.h), so that refresh keeps the base
 * and the overlays that stay. -EINVAL: not attached, or nothing mapped;
 * -ENOMEM: db unchanged. */
static inline int shmkv_detach(shmkv *db, shmkv **out)
{
	*out = NULL;
	if (!db->ctl || !db->map)
		return -EINVAL;
	/* one block (shmkv_close frees it): the handle, then its overlays' */
	shmkv *g = (shmkv *)calloc(3, sizeof *g);
	if (!g)
		return -ENOMEM;
	shmkv__bind(g, db->map, db->size);
	g->map = db->map;
	g->map_len = db->map_len;
	g->range = db->range;
	g->range_parts = db->range_parts;
	shmkv__range_hold(g->range, g->range_parts);
	g->generation = db->generation;
	g->flags = db->flags;
	if (db->over) {
		g[1] = *db->over;
		g->over = &g[1];
	}
	if (db->top) {
		g[2] = *db->top;
		g->top = &g[2];
	}
	db->map = NULL; /* served by g now; db keeps its share for shmkv_refresh */
	db->map_len = 0;
	db->over = db->top = NULL;
	*out = g;
	return 0;
}

/* NUMA node of the copy read (-1: not pinned, or a file handle). */
static inline int shmkv_node(const shmkv *db)
{
	if (!db->ctl)
		return -1;
	return ((const shmkv__attached *)db)->node; /* attached: allocated as one */
}

/* Generation this handle serves (0: a file handle). */
static inline uint64_t shmkv_generation(const shmkv *db)
{
	return db->generation;
}

#endif /* SHMKV_ATTACH_H */
