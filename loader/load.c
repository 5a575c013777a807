/* load.c - load one image file into a cache: read, verify, publish, free. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "load.h"
#include "probes.h"

#include "diag.h"
#include "ioread.h"
#include "json.h"
#include "log.h"
#include "mounts.h"
#include "copies.h"
#include "place.h"
#include "vstream.h"

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Opens the source without ever blocking in open(): O_NONBLOCK (a FIFO with
 * no writer would wait forever, and with it every later load), O_NOFOLLOW
 * when the name is ours (the spool), then fstat: only a regular file is read.
 * Then O_NONBLOCK off, and O_DIRECT on where the filesystem takes it.
 * Returns the fd, with *st and *direct, or an error with why. */
static int open_source(const char *path, int nofollow, struct stat *st, int *direct, char *why,
		       size_t why_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY |
				    (nofollow ? O_NOFOLLOW : 0));
	if (fd < 0) {
		int err = -errno;
		if (err == -ELOOP && nofollow)
			return diag_fail(-ELOOP, why, why_len,
					   "%s: a symbolic link; the spool loads regular files "
					   "renamed into it, never links", path);
		if (err == -ENXIO) /* open() of a socket file */
			return diag_fail(-EINVAL, why, why_len,
					   "%s: a socket, not an image file: refused", path);
		return diag_fail(err, why, why_len, "%s: %s", path, strerror(-err));
	}
	if (fstat(fd, st) != 0) {
		int err = -errno;
		close(fd);
		return diag_fail(err, why, why_len, "fstat %s: %s", path, strerror(-err));
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return diag_fail(-EINVAL, why, why_len,
				   "%s is %s, not a regular file: refused without reading it (an "
				   "image is a regular file)", path, shmkv_file_kind(st->st_mode));
	}
	int fl = fcntl(fd, F_GETFL), err = 0;
	*direct = 1;
	if (fl < 0) {
		err = -errno;
	} else if (fcntl(fd, F_SETFL, (fl & ~O_NONBLOCK) | O_DIRECT) != 0) {
		if (errno != EINVAL) {
			err = -errno;
		} else {
			log_warn("direct I/O unsupported file=%s: reading buffered", path);
			*direct = 0;
			if (fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
				err = -errno;
		}
	}
	if (err) {
		close(fd);
		return diag_fail(err, why, why_len, "fcntl %s: %s", path, strerror(-err));
	}
	return fd;
}

/* Whether the page cache holds the file: at least 15/16 of the pages of up
 * to 16 windows of 16 MiB spread over it (all of a file of 256 MiB or less),
 * by mincore over a read-only mapping, so the check costs a few ms whatever
 * the size. Such a file is read buffered: copying from the page cache is
 * faster than the device, and nothing gets cached that was not already. */
static int mostly_cached(int fd, uint64_t size)
{
	enum { WINDOW = 16u << 20, WINDOWS = 16 };
	static unsigned char vec[WINDOW / 4096]; /* the worker thread's alone */
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), seen = 0, missing = 0;
	if (!size || page < 4096)
		return 0;
	void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return 0;
	uint64_t step = WINDOW;
	if (size > (uint64_t)WINDOW * WINDOWS)
		step = (size - WINDOW) / (WINDOWS - 1) / page * page;
	for (uint64_t off = 0; off < size && seen < (uint64_t)WINDOWS * WINDOW / page;
	     off += step) {
		size_t len = (size_t)(size - off < WINDOW ? size - off : WINDOW);
		if (mincore((uint8_t *)m + off, len, vec) != 0) {
			missing = seen + 1;
			break;
		}
		for (size_t i = 0; i < (len + page - 1) / page; i++, seen++)
			missing += !(vec[i] & 1);
	}
	munmap(m, (size_t)size);
	return missing <= seen / 16;
}

/* Reads the header block (aligned for O_DIRECT) and checks it against the
 * file size before any memory is taken for the image. */
static int read_head(int *fd, int *direct, const char *path, uint64_t size, struct vstream *v,
		     char *why, size_t why_len)
{
	void *head = NULL;
	if (posix_memalign(&head, SHMKV_HEADER_SIZE, SHMKV_HEADER_SIZE))
		return diag_fail(-ENOMEM, why, why_len, "out of memory");
	ssize_t n = pread(*fd, head, SHMKV_HEADER_SIZE, 0);
	if (n < 0 && errno == EINVAL && *direct) {
		log_warn("direct I/O refused file=%s: reading buffered", path);
		int b = ioread_reopen_buffered(*fd);
		if (b >= 0) {
			close(*fd);
			*fd = b;
			*direct = 0;
			n = pread(*fd, head, SHMKV_HEADER_SIZE, 0);
		}
	}
	/* a short read is not the end of the file: continue it (buffered, since an
	 * O_DIRECT read must stay aligned) */
	while (n > 0 && n < SHMKV_HEADER_SIZE && (uint64_t)n < size) {
		if (*direct) {
			int b = open(path, O_RDONLY | O_CLOEXEC);
			if (b < 0)
				break;
			close(*fd);
			*fd = b;
			*direct = 0;
		}
		ssize_t m = pread(*fd, (uint8_t *)head + n, SHMKV_HEADER_SIZE - (size_t)n, n);
		if (m <= 0)
			break;
		n += m;
	}
	int err;
	if (n < 0)
		err = diag_fail(-errno, why, why_len, "read %s: %s", path, strerror(errno));
	else if (n != SHMKV_HEADER_SIZE)
		err = diag_fail(SHMKV_ETRUNCATED, why, why_len,
				  "file is %llu bytes, shorter than the %u-byte header",
				  (unsigned long long)size, SHMKV_HEADER_SIZE);
	else
		err = vstream_begin(v, head, size, why, why_len);
	free(head);
	return err;
}

/* The bytes loaded are the file's only if it did not change while it was
 * read: same inode (a descriptor reopened buffered included), size and
 * mtime as at the open. A writer in place is caught here even where it
 * rewrote only what was read already (the checksums then still match). */
static int source_unchanged(int fd, const struct stat *was, const char *path, char *why,
			    size_t why_len)
{
	struct stat now;
	if (fstat(fd, &now) != 0)
		return diag_fail(-errno, why, why_len, "fstat %s: %s", path, strerror(errno));
	if (now.st_dev != was->st_dev || now.st_ino != was->st_ino || now.st_size != was->st_size ||
	    now.st_mtim.tv_sec != was->st_mtim.tv_sec || now.st_mtim.tv_nsec != was->st_mtim.tv_nsec)
		return diag_fail(-ESTALE, why, why_len,
				   "%s changed while it was read (size %lld -> %lld, mtime moved by "
				   "%lld ns): write images elsewhere and rename them in", path,
				   (long long)was->st_size, (long long)now.st_size,
				   (long long)(now.st_mtim.tv_sec - was->st_mtim.tv_sec) * 1000000000 +
					   (now.st_mtim.tv_nsec - was->st_mtim.tv_nsec));
	return 0;
}

static char *reply_loaded(const struct cache *c, const struct load_stats *ls)
{
	char mem[32];
	struct json j;
	json_init(&j);
	json_bool(&j, "ok", 1);
	json_str(&j, "cache", c->name);
	json_u64(&j, "generation", c->cur.generation);
	json_u64(&j, "bytes", c->cur.size);
	json_u64(&j, "entries", c->cur.entries);
	json_u64(&j, "format", c->cur.format);
	/* entries that carry an expiry (null: the pass failed, see status) */
	if (c->exp.state == EXPIRY_FAILED)
		json_null(&j, "expiring");
	else
		json_u64(&j, "expiring", c->exp.expiring);
	json_u64(&j, "ms", ls->ms);
	json_u64(&j, "alloc_ms", ls->alloc_ms);
	json_f64(&j, "gbps", ls->gbps, 2);
	json_bool(&j, "direct_io", ls->direct);
	json_str(&j, "memory", mem_kind_name(c->cur.flags, c->cur.page_size, mem, sizeof mem));
	json_str(&j, "segment", c->cur.path);
	if (ls->note[0])
		json_str(&j, "note", ls->note);
	return json_finish(&j);
}

/* Publishes a committed segment as the cache's new generation; the old
 * current becomes the rollback candidate, the old candidate is unlinked.
 * exp (the new generation's expiry times) moves into the cache once published. */
static int publish_new(struct loader *L, struct cache *c, const struct seg_info *in,
		       const struct seg_info *more, unsigned nmore, const struct seg_info *lower,
		       const struct load_stats *st, struct expiry *exp, int staged, char *why,
		       size_t why_len)
{
	if (!c->ctl.map) {
		int err = ctl_create(L->root_fd, L->root, c->name, c->conf.mode, c->conf.gid,
				     &c->ctl, why, why_len);
		if (err)
			return err;
	}
	uint64_t gen = ctl_generation(&c->ctl) + 1;
	if (!staged && c->lineage.keep) {
		/* a compaction's base: the state file names it before the
		 * publish, so that a restart finding it published keeps the
		 * origin and chain, and one finding another base (a load killed
		 * at its publish) drops them (adopt.c) */
		snprintf(c->compact_saved, sizeof c->compact_saved, "%s", in->path);
		int err = cache_save_before_publish(L, c, "the compacted base", why, why_len);
		if (err) {
			c->compact_saved[0] = 0;
			return err;
		}
	} else if (!staged && L->durable_fd >= 0) {
		/* a new base: the durable log names the one before until the
		 * worker writes it anew after this publish; killed in between,
		 * a restart must not replay it over this one (overlay.c) */
		c->wal_behind = 1;
		int err = cache_save_before_publish(L, c, "that the durable log is behind", why,
						    why_len);
		if (err) {
			c->wal_behind = 0;
			return err;
		}
	}
	if (!staged) {
		/* every copy of the generation at once (numa=replicate), and a
		 * compaction's catch-up over them (protocol 2) */
		shmkv_ctl_segment cs[SHMKV_CTL_MAX_SEGMENTS];
		uint32_t ncs = 0;
		int perr = 0;
		if (lower) {
			perr = cache_gen_entries(in, more, nmore, lower, NULL, cs, &ncs, why,
						 why_len);
			if (!perr)
				perr = ctl_publish_version(&c->ctl, SHMKV_PROTOCOL_VERSION_2, gen, cs,
							   ncs, why, why_len);
		} else {
			ncs = cache_ctl_entries(in, more, nmore, cs);
			perr = ctl_publish(&c->ctl, gen, cs, ncs, why, why_len);
		}
		if (perr) {
			c->compact_saved[0] = 0; /* not published: never found so */
			c->wal_behind = 0;       /* the log names what is served */
			return perr;
		}
		PROBE(publish, c->name, gen, in->size, in->path);
	}

	struct seg_info old_rb = c->rb, old_rb_more[SHMKV_CTL_MAX_SEGMENTS - 1];
	unsigned old_nrb_more = c->nrb_more;
	memcpy(old_rb_more, c->rb_more, sizeof old_rb_more);
	/* the rollback's base may be the current one's (a change was published
	 * last: it stays, as the new rollback's); its overlays go, but for a
	 * lower the current generation has too */
	int had_rb = c->have_rb && !cache_rb_shares_base(c), had_rbov = c->have_rbov,
	    had_rbtop = c->have_rbtop;
	struct seg_info old_rbov = c->rbov, old_rbtop = c->rbtop;
	pthread_mutex_lock(&L->lock);
	c->protocol = cache_protocol(c);
	c->rbov = c->ov;
	c->have_rbov = c->have_cur && c->have_ov;
	c->rbtop = c->top;
	c->have_rbtop = c->have_rbov && c->have_top;
	c->rb_ov_keys = c->ov_keys;
	c->have_ov = c->have_top = 0;
	c->ov_keys = 0;
	c->rb_chain_last = c->chain_last;
	c->rb_chain_seq = c->chain_seq;
	c->rb_origin_sum = c->origin_sum;
	c->rb_origin_size = c->origin_size;
	c->compact_saved[0] = 0; /* published: the next state file drops it */
	if (c->lineage.keep) { /* a compaction (compact.c): what deltas apply to stays */
		c->chain_last = c->lineage.chain_last;
		c->chain_seq = c->lineage.chain_seq;
		c->origin_sum = c->lineage.origin_sum;
		c->origin_size = c->lineage.origin_size;
	} else {
		c->chain_last = c->chain_seq = 0;
		c->origin_sum = c->origin_size = 0; /* deltas of this image apply */
	}
	c->changes = 0;
	if (lower) { /* a compaction's catch-up: one publish of changes */
		c->ov = *lower;
		c->ov.generation = gen;
		c->have_ov = 1;
		c->ov_keys = lower->entries;
		c->changes = 1;
	}
	if (c->have_cur) {
		c->rb = c->cur;
		c->rb_stats = c->stats;
		memcpy(c->rb_more, c->cur_more, sizeof c->rb_more);
		c->nrb_more = c->ncur_more;
	} else {
		c->nrb_more = 0;
	}
	c->have_rb = c->have_cur;
	c->cur = *in;
	c->cur.generation = gen;
	c->ncur_more = nmore;
	for (unsigned i = 0; i < nmore; i++) {
		c->cur_more[i] = more[i];
		c->cur_more[i].generation = gen;
	}
	c->have_cur = 1;
	c->stats = *st;
	/* the old generation's times go (a rollback reads its image again) */
	struct expiry old_exp = c->exp;
	c->exp = *exp;
	memset(exp, 0, sizeof *exp);
	c->last_error[0] = 0;
	c->failed_ms = 0;
	pthread_mutex_unlock(&L->lock);
	expiry_free(&old_exp);
	if (had_rbov)
		cache_release(c, &old_rbov);
	if (had_rbtop)
		cache_release(c, &old_rbtop);
	if (had_rb)
		cache_unlink_more(c, old_rb_more, old_nrb_more);
	if (had_rb) {
		/* readers still mapping it keep it; the kernel frees it after them */
		if (unlink(old_rb.path) != 0 && errno != ENOENT) {
			log_warn("unlink file=%s: %s", old_rb.path, strerror(errno));
		} else {
			PROBE(unlink, c->name, old_rb.generation, old_rb.path);
			log_info("freed cache=%s gen=%llu file=%s", c->name,
				 (unsigned long long)old_rb.generation, old_rb.path);
		}
	}
	return 0;
}

/* Would dropping the rollback candidate make room for size bytes? Only
 * then is it dropped: a load that cannot fit anyway keeps the rollback. */
static int rollback_helps(const struct loader *L, const struct cache *c, int hugetlb,
			  uint64_t size)
{
	if (!c->have_rb || !!(c->rb.flags & SHMKV_SEG_HUGETLB) != hugetlb)
		return 0;
	if (hugetlb) {
		uint64_t ps = c->rb.page_size;
		long long fr = mounts_free_hugepages(ps);
		if (fr < 0)
			return 1; /* unknown: try */
		return (uint64_t)fr + c->rb.map_size / ps >= (size + ps - 1) / ps;
	}
	struct statvfs sv;
	if (statvfs(L->conf->shm_dir, &sv) != 0)
		return 1;
	return (uint64_t)sv.f_bavail * sv.f_frsize + c->rb.map_size >= size;
}

struct room_arg {
	struct loader *L;
	struct cache *c;
};

/* place_req.make_room: place.c:place_segment() is short of memory. */
static int make_room(void *arg, int hugetlb, uint64_t size, const char *reason)
{
	struct room_arg *a = arg;
	if (!rollback_helps(a->L, a->c, hugetlb, size))
		return 0;
	cache_drop_rollback(a->L, a->c, reason);
	return 1;
}

/* One load in flight: what op_load's steps share. */
struct load {
	struct loader *L;
	struct cache *c;
	const char *name, *path;
	int fd, direct, cached, have_seg;
	struct stat st;   /* of the source at its open */
	uint64_t size, t0, t_alloc;
	struct vstream v;
	struct seg s;     /* the first copy */
	struct copies *cp;
	struct room_arg ra;
	struct place_req pr;
	struct load_stats ls;
	struct expiry exp; /* the image's expiry times (scan_expiry) */
	int overlay;       /* load_segments(): a delta image, published by overlay.c */
	int staged;        /* op_load_staged(): not published */
	const struct seg_info *lower; /* op_load_compacted(): published over it */
	char why[512], note[160];
};

/* The request itself: a valid cache name and an absolute path. */
static int check_request(struct load *ld)
{
	if (shmkv_name_check(ld->name) != 0)
		return diag_fail(-EINVAL, ld->why, sizeof ld->why, "invalid cache name \"%s\" (%s)",
				   ld->name, SHMKV_CACHE_NAME_RULE);
	if (ld->path[0] != '/' || strchr(ld->path, '\n'))
		return diag_fail(-EINVAL, ld->why, sizeof ld->why,
				   "image path must be absolute and free of newlines: \"%s\"",
				   ld->path);
	return 0;
}

/* The cache to load into, created if new; one whose control segment could
 * not be adopted is refused. */
static int take_cache(struct load *ld)
{
	if (!ld->c) {
		int err = cache_add(ld->L, ld->name, &ld->c);
		if (err)
			return diag_fail(err, ld->why, sizeof ld->why, "out of memory");
	}
	if (ld->c->broken)
		return diag_fail(SHMKV_EPROTO, ld->why, sizeof ld->why,
				   "cache %s has a control segment this loader cannot adopt (%s); "
				   "drop it first", ld->name, ld->c->last_error);
	return 0;
}

/* Opens the source (buffered when the page cache holds it), reads and checks
 * its header and the cache's max_size, before any memory is taken. */
static int open_checked(struct load *ld, int nofollow)
{
	ld->fd = open_source(ld->path, nofollow, &ld->st, &ld->direct, ld->why, sizeof ld->why);
	if (ld->fd < 0)
		return ld->fd;
	ld->size = (uint64_t)ld->st.st_size;
	PROBE(load_start, ld->name, ld->path, ld->size, ld->c->next_load);
	if (ld->direct && mostly_cached(ld->fd, ld->size)) {
		int b = ioread_reopen_buffered(ld->fd);
		if (b >= 0) {
			close(ld->fd);
			ld->fd = b;
			ld->direct = 0;
			ld->cached = 1;
		}
	}
	int err = read_head(&ld->fd, &ld->direct, ld->path, ld->size, &ld->v, ld->why,
			    sizeof ld->why);
	if (err)
		return err;
	const struct cache *c = ld->c;
	int delta = ld->v.hdr->layout_hash == SHMKV_DELTA_LAYOUT_HASH;
	if (delta != ld->overlay)
		return diag_fail(SHMKV_EBASE, ld->why, sizeof ld->why, delta
				 ? "a delta image (lib/FORMAT.md §19), not an image to serve alone: "
				   "apply it with 'shmctl cache apply NAME DELTA_FILE'"
				 : "an image where an overlay (a delta image) was expected");
	if (c->conf.max_size && ld->size > c->conf.max_size)
		return diag_fail(-EFBIG, ld->why, sizeof ld->why,
				   "image is %llu bytes, over the cache's max_size of %llu bytes",
				   (unsigned long long)ld->size, (unsigned long long)c->conf.max_size);
	return 0;
}

/* Plans the copies (NUMA) and places the first one by the memory policy. */
static int place_first(struct load *ld, const char *numa)
{
	struct cache *c = ld->c;
	/* relaxed: figures for status.c:status_take(), which reads them relaxed */
	atomic_store_explicit(&c->load_done, 0, memory_order_relaxed);
	atomic_store_explicit(&c->load_total, ld->size, memory_order_relaxed);
	ld->ra = (struct room_arg){ld->L, c};
	ld->pr = (struct place_req){
		.conf = ld->L->conf,
		.prefix = ld->L->prefix,
		.name = c->name,
		.load_id = c->next_load,
		.memory = c->conf.memory,
		.mode = c->conf.mode,
		.gid = c->conf.gid,
		.make_room = make_room,
		.arg = &ld->ra,
		.fill_by_read = 1, /* read_verified() reads; copies_make() memcpys */
	};
	/* NUMA: where each copy goes (numa/; replicate makes one per node) */
	int err = copies_plan(&ld->pr, c->name, numa, &c->conf.numa, ld->size, ld->cp, ld->why,
			      sizeof ld->why);
	if (err)
		return err;
	ld->pr.bind = &ld->cp->plan.seg[0];
	err = place_segment(&ld->pr, ld->size, &ld->s, ld->note, sizeof ld->note, ld->why,
			    sizeof ld->why);
	if ((err == -ENOMEM || err == -ENOSPC) && copies_degrade(ld->cp, c->name, ld->why))
		err = place_segment(&ld->pr, ld->size, &ld->s, ld->note, sizeof ld->note, ld->why,
				    sizeof ld->why);
	if (err)
		return err;
	ld->have_seg = 1;
	PROBE(place, ld->name, (int)!!(ld->s.info.flags & SHMKV_SEG_HUGETLB), ld->s.info.page_size,
	      ld->size, ld->s.info.path);
	ld->t_alloc = now_ns();
	c->next_load = ld->s.info.load_id + 1; /* seg_create() skips names taken */
	return 0;
}

/* Reads the source into the first copy, verifying as it goes; checks the
 * source did not change meanwhile; then makes the other copies from it. */
static int read_verified(struct load *ld)
{
	struct loader *L = ld->L;
	struct cache *c = ld->c;
	struct ioread_opts o = {
		.queue_depth = L->conf->queue_depth,
		.block_size = L->conf->block_size,
		.engine = L->conf->io,
		.cancel = &L->cancel,
		.progress = &c->load_done,
	};
	/* an overlay of changes: a delta image the loader has just written
	 * (the page cache holds it), read at every publish; a ring and its
	 * kernel workers set up each time cost more than the copy */
	if (ld->overlay)
		o.engine = IO_PREAD;
	char *why = ld->why;
	size_t wl = sizeof ld->why;
	int err = ioread(ld->fd, &ld->direct, ld->path, ld->s.map, ld->size, &o, &ld->v, why, wl);
	if (err == -EFAULT && (ld->s.info.flags & SHMKV_SEG_HUGETLB))
		err = place_read_fault(&ld->pr, &ld->s, why, wl);
	if (!err)
		err = vstream_end(&ld->v, ld->s.map, why, wl);
	if (!err)
		err = source_unchanged(ld->fd, &ld->st, ld->path, why, wl);
	PROBE(verify_done, ld->name, err, ld->size, now_ns() - ld->t0);
	if (!err) {
		uint64_t next = c->next_load;
		err = copies_make(ld->cp, &ld->pr, &ld->s, ld->size, &next, why, wl);
		c->next_load = next;
	}
	return err;
}

/* One pass over the verified image for its expiry times (expiry.h; none
 * for an image whose header says no entry expires), before it is
 * published, so that status counts expired entries from the first reply.
 * A pass that fails (it checks what verify checked) leaves the figures
 * unknown and is logged; it never refuses an image verify accepted. */
static void scan_expiry(struct load *ld)
{
	shmkv db;
	char w[sizeof ld->exp.note];
	int err = shmkv_bind_mem(&db, ld->s.map, ld->size, SHMKV_OPEN_NOVERIFY, w, sizeof w);
	if (!err)
		err = expiry_scan(&db, ld->L->conf->expiry_times, &ld->exp, w, sizeof w);
	else
		snprintf(ld->exp.note, sizeof ld->exp.note, "%s", w);
	if (err) {
		ld->exp.state = EXPIRY_FAILED;
		char q[400];
		log_warn("expiry unknown cache=%s file=%s error=%s", ld->name, ld->path,
			 log_quote(q, sizeof q, w));
	}
}

/* Unlinks the committed copies of a load that is not going to be published. */
static void unlink_committed(const struct seg_info *first, const struct seg_info *more,
			     unsigned nmore)
{
	unlink(first->path);
	for (unsigned i = 0; i < nmore; i++)
		unlink(more[i].path);
}

/* Renames every copy to its final name (all or none stay), and fills the
 * load's figures. */
static int commit_all(struct load *ld)
{
	struct copies *cp = ld->cp;
	uint64_t t_end = now_ns();
	double secs = (double)(t_end - ld->t0) / 1e9;
	atomic_store_explicit(&ld->c->load_total, 0, memory_order_relaxed); /* as in place_first */
	ld->s.info.entries = ld->v.hdr->entry_count;
	ld->s.info.format = ld->v.hdr->format_version;
	memset(&ld->ls, 0, sizeof ld->ls);
	copies_verify(cp, ld->c->name, &ld->s, &ld->ls);
	int err = seg_commit(&ld->s, ld->why, sizeof ld->why);
	ld->have_seg = 0;
	unsigned committed = 0;
	for (unsigned i = 0; i < cp->nmore; i++) {
		cp->more[i].info.entries = ld->s.info.entries;
		cp->more[i].info.format = ld->s.info.format;
		if (!err && !(err = seg_commit(&cp->more[i], ld->why, sizeof ld->why)))
			committed++;
		else if (err)
			seg_discard(&cp->more[i]);
	}
	if (err) {
		struct seg_info more[SHMKV_CTL_MAX_SEGMENTS - 1];
		for (unsigned i = 0; i < committed; i++)
			more[i] = cp->more[i].info;
		unlink_committed(&ld->s.info, more, committed);
		cp->nmore = 0;
		return err;
	}
	struct load_stats *ls = &ld->ls;
	snprintf(ls->source, sizeof ls->source, "%s", ld->path);
	ls->ms = (t_end - ld->t0) / 1000000u;
	ls->alloc_ms = (ld->t_alloc - ld->t0) / 1000000u;
	ls->gbps = secs > 0 ? (double)ld->size / 1e9 / secs : 0;
	ls->direct = ld->direct;
	snprintf(ls->note, sizeof ls->note, "%s", ld->note);
	return 0;
}

/* Publishes the committed copies; on failure they are unlinked. */
static int publish_all(struct load *ld)
{
	struct copies *cp = ld->cp;
	struct seg_info more[SHMKV_CTL_MAX_SEGMENTS - 1];
	for (unsigned i = 0; i < cp->nmore; i++)
		more[i] = cp->more[i].info;
	int err = publish_new(ld->L, ld->c, &ld->s.info, more, cp->nmore, ld->lower, &ld->ls,
			      &ld->exp, ld->staged, ld->why, sizeof ld->why);
	if (err) {
		unlink_committed(&ld->s.info, more, cp->nmore);
		cp->nmore = 0;
	}
	return err;
}

/* A load done: counted, state saved, logged, replied. */
static void loaded(struct load *ld, char **reply)
{
	struct loader *L = ld->L;
	struct cache *c = ld->c;
	pthread_mutex_lock(&L->lock); /* read by status.c and metrics.c */
	c->loads_ok++;
	pthread_mutex_unlock(&L->lock);
	if (cache_save_state(L, c))
		log_warn("cache=%s: state file not written; a restart loses the rollback", ld->name);
	char mem[32], ex[96] = "";
	if (c->exp.expiring) /* c->exp: the worker's own, read without the lock */
		snprintf(ex, sizeof ex, " expiring=%llu expiry_ms=%llu",
			 (unsigned long long)c->exp.expiring, (unsigned long long)c->exp.scan_ms);
	log_info("loaded cache=%s gen=%llu bytes=%llu entries=%llu format=%u ms=%llu alloc_ms=%llu "
		 "GB/s=%.2f memory=%s direct=%s%s file=%s", ld->name,
		 (unsigned long long)c->cur.generation, (unsigned long long)ld->size,
		 (unsigned long long)c->cur.entries, c->cur.format, (unsigned long long)ld->ls.ms,
		 (unsigned long long)ld->ls.alloc_ms, ld->ls.gbps,
		 mem_kind_name(c->cur.flags, c->cur.page_size, mem, sizeof mem),
		 ld->direct ? "yes" : ld->cached ? "cached" : "no", ex, ld->path);
	notify_status("cache %s: generation %llu loaded, %.2f GB/s", ld->name,
		      (unsigned long long)c->cur.generation, ld->ls.gbps);
	*reply = reply_loaded(c, &ld->ls);
}

/* A load refused (or abandoned because the loader stops): recorded on the
 * cache, logged, replied. Returns err. */
static int rejected(struct load *ld, int err, char **reply)
{
	struct loader *L = ld->L;
	struct cache *c = ld->c;
	const char *name = ld->name, *path = ld->path, *why = ld->why;
	char q[640];
	if (err == -ECANCELED) {
		/* the spool file stays for the next loader (spool.c:finish()) */
		log_info("aborted cache=%s file=%s: the loader is stopping", name, path);
		*reply = json_error_code("the loader is stopping", err);
		return err;
	}
	if (c) {
		cache_set_error(L, c, "load %s: %s", path, why);
		pthread_mutex_lock(&L->lock); /* read by status.c and metrics.c */
		c->load_failures[load_fail_reason(err)]++;
		if (!c->failed_ms && !c->configured && !c->have_cur && !c->ctl.map && !c->broken)
			c->failed_ms = now_ns() / 1000000u; /* a ghost: see ops.c:op_expire() */
		pthread_mutex_unlock(&L->lock);
	}
	PROBE(reject, name, path, err, why);
	log_err("rejected cache=%s file=%s error=%s", name, path, log_quote(q, sizeof q, why));
	notify_status("cache %s: load rejected: %s", name, why);
	char msg[700];
	snprintf(msg, sizeof msg, "load %s into %s: %s%s", path, name, why,
		 c && c->have_cur ? " (the current generation keeps serving)" : "");
	*reply = json_error_code(msg, err);
	return err;
}

/* Frees what a load holds; a placed segment not committed is discarded. */
static void load_free(struct load *ld)
{
	if (ld->c) /* relaxed: as in place_first */
		atomic_store_explicit(&ld->c->load_total, 0, memory_order_relaxed);
	if (ld->have_seg)
		seg_discard(&ld->s);
	if (ld->cp) {
		copies_discard(ld->cp);
		free(ld->cp);
	}
	if (ld->fd >= 0)
		close(ld->fd);
	vstream_free(&ld->v);
	expiry_free(&ld->exp); /* published: moved into the cache, nothing left */
}

static int load_run(struct loader *L, const char *name, const char *path, int nofollow,
		    const char *numa, int staged, const struct seg_info *lower, char **reply,
		    char *why_out, size_t why_out_len)
{
	struct load *ld = calloc(1, sizeof *ld);
	if (!ld) {
		*reply = json_error_code("out of memory", -ENOMEM);
		if (why_out_len)
			snprintf(why_out, why_out_len, "out of memory");
		return -ENOMEM;
	}
	ld->L = L;
	ld->name = name;
	ld->path = path;
	ld->fd = -1;
	ld->t0 = now_ns();
	ld->c = cache_find(L, name);
	ld->staged = staged;
	ld->lower = lower;
	ld->cp = calloc(1, sizeof *ld->cp);
	int err = ld->cp ? 0 : diag_fail(-ENOMEM, ld->why, sizeof ld->why, "out of memory");
	if (!err)
		err = check_request(ld);
	if (!err)
		err = take_cache(ld);
	if (!err && staged && ld->c->have_cur) /* its rollback would be a generation never served */
		err = diag_fail(-EBUSY, ld->why, sizeof ld->why, "cache %s already serves a generation",
				name);
	if (!err)
		err = open_checked(ld, nofollow);
	if (!err)
		err = place_first(ld, numa);
	if (!err)
		err = read_verified(ld);
	if (!err)
		scan_expiry(ld);
	if (!err)
		err = commit_all(ld);
	if (!err)
		err = publish_all(ld);
	if (!err)
		loaded(ld, reply);
	else
		rejected(ld, err, reply);
	if (why_out_len)
		snprintf(why_out, why_out_len, "%s", err ? ld->why : "");
	load_free(ld);
	free(ld);
	return err;
}

int op_load(struct loader *L, const char *name, const char *path, int nofollow,
	    const char *numa, char **reply, char *why, size_t why_len)
{
	return load_run(L, name, path, nofollow, numa, 0, NULL, reply, why, why_len);
}

int op_load_staged(struct loader *L, const char *name, const char *path, int nofollow,
		   char **reply, char *why, size_t why_len)
{
	return load_run(L, name, path, nofollow, NULL, 1, NULL, reply, why, why_len);
}

int op_load_compacted(struct loader *L, struct cache *c, const char *path,
		      const struct seg_info *lower, uint64_t origin_sum, uint64_t origin_size,
		      uint64_t chain_last, uint64_t chain_seq, char **reply, char *why,
		      size_t why_len)
{
	const uint64_t was[2] = {c->origin_sum, c->origin_size};
	pthread_mutex_lock(&L->lock);
	c->origin_sum = origin_sum;
	c->origin_size = origin_size;
	pthread_mutex_unlock(&L->lock);
	c->lineage.keep = 1;
	c->lineage.origin_sum = origin_sum;
	c->lineage.origin_size = origin_size;
	c->lineage.chain_last = chain_last;
	c->lineage.chain_seq = chain_seq;
	int err = load_run(L, c->name, path, 1, "", 0, lower, reply, why, why_len);
	c->lineage.keep = 0;
	if (err) { /* the generation served keeps its own */
		pthread_mutex_lock(&L->lock);
		c->origin_sum = was[0];
		c->origin_size = was[1];
		pthread_mutex_unlock(&L->lock);
	}
	return err;
}

int load_publish_staged(struct loader *L, struct cache *c, char *why, size_t why_len)
{
	shmkv_ctl_segment cs[SHMKV_CTL_MAX_SEGMENTS];
	uint32_t ncs = cache_ctl_entries(&c->cur, c->cur_more, c->ncur_more, cs);
	int err = ctl_publish(&c->ctl, c->cur.generation, cs, ncs, why, why_len);
	if (!err) {
		PROBE(publish, c->name, c->cur.generation, c->cur.size, c->cur.path);
		return 0;
	}
	/* never served: its segments go, the cache serves nothing */
	cache_unlink_more(c, c->cur_more, c->ncur_more);
	unlink(c->cur.path);
	pthread_mutex_lock(&L->lock);
	c->have_cur = 0;
	c->ncur_more = 0;
	pthread_mutex_unlock(&L->lock);
	cache_save_state(L, c);
	return err;
}

int load_segments(struct loader *L, struct cache *c, const char *path, struct seg_info *first,
		  struct seg_info *more, unsigned *nmore, char *why_out, size_t why_out_len)
{
	struct load *ld = calloc(1, sizeof *ld);
	if (!ld)
		return diag_fail(-ENOMEM, why_out, why_out_len, "out of memory");
	ld->L = L;
	ld->name = c->name;
	ld->path = path;
	ld->fd = -1;
	ld->t0 = now_ns();
	ld->c = c;
	ld->overlay = 1;
	ld->cp = calloc(1, sizeof *ld->cp);
	int err = ld->cp ? 0 : diag_fail(-ENOMEM, ld->why, sizeof ld->why, "out of memory");
	if (!err)
		err = open_checked(ld, 1);
	if (!err)
		err = place_first(ld, NULL);
	if (!err)
		err = read_verified(ld);
	if (!err)
		err = commit_all(ld);
	if (!err) {
		*first = ld->s.info;
		*nmore = ld->cp->nmore;
		for (unsigned i = 0; i < ld->cp->nmore; i++)
			more[i] = ld->cp->more[i].info;
		ld->cp->nmore = 0; /* committed: the caller's now */
	}
	snprintf(why_out, why_out_len, "%s", err ? ld->why : "");
	load_free(ld);
	free(ld);
	return err;
}
