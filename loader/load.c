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
 * current becomes the rollback candidate, the old candidate is unlinked. */
static int publish_new(struct loader *L, struct cache *c, const struct seg_info *in,
		       const struct seg_info *more, unsigned nmore, const struct load_stats *st,
		       char *why, size_t why_len)
{
	if (!c->ctl.map) {
		int err = ctl_create(L->root, c->name, c->conf.mode, c->conf.gid, &c->ctl, why,
				     why_len);
		if (err)
			return err;
	}
	uint64_t gen = ctl_generation(&c->ctl) + 1;
	/* every copy of the generation at once (numa=replicate) */
	shmkv_ctl_segment cs[SHMKV_CTL_MAX_SEGMENTS];
	uint32_t ncs = cache_ctl_entries(in, more, nmore, cs);
	ctl_publish(&c->ctl, gen, cs, ncs);
	PROBE(publish, c->name, gen, in->size, in->path);

	struct seg_info old_rb = c->rb, old_rb_more[SHMKV_CTL_MAX_SEGMENTS - 1];
	unsigned old_nrb_more = c->nrb_more;
	memcpy(old_rb_more, c->rb_more, sizeof old_rb_more);
	int had_rb = c->have_rb;
	pthread_mutex_lock(&L->lock);
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
	c->last_error[0] = 0;
	c->failed_ms = 0;
	pthread_mutex_unlock(&L->lock);
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

int op_load(struct loader *L, const char *name, const char *path, int nofollow,
	    const char *numa, char **reply, char *why_out, size_t why_out_len)
{
	char why[512] = "", note[160] = "", q[640];
	struct cache *c = cache_find(L, name);
	struct vstream v;
	struct seg s;
	struct copies *cp = calloc(1, sizeof *cp);
	int err, fd = -1, direct = 0, cached = 0, have_seg = 0;
	memset(&v, 0, sizeof v);
	if (!cp) {
		err = diag_fail(-ENOMEM, why, sizeof why, "out of memory");
		goto reject;
	}
	uint64_t t0 = now_ns();
	if (!(shmkv_name_check(name) == 0)) {
		err = diag_fail(-EINVAL, why, sizeof why,
				"invalid cache name \"%s\" (" SHMKV_CACHE_NAME_RULE ")", name);
		goto reject;
	}
	if (path[0] != '/' || strchr(path, '\n')) {
		err = diag_fail(-EINVAL, why, sizeof why,
				  "image path must be absolute and free of newlines: \"%s\"", path);
		goto reject;
	}
	if (!c) {
		err = cache_add(L, name, &c);
		if (err) {
			diag_fail(err, why, sizeof why, "out of memory");
			goto reject;
		}
	}
	if (c->broken) {
		err = diag_fail(SHMKV_EPROTO, why, sizeof why,
				  "cache %s has a control segment this loader cannot adopt (%s); "
				  "drop it first", name, c->last_error);
		goto reject;
	}
	struct stat st;
	fd = open_source(path, nofollow, &st, &direct, why, sizeof why);
	if (fd < 0) {
		err = fd;
		goto reject;
	}
	uint64_t size = (uint64_t)st.st_size;
	PROBE(load_start, name, path, size, c->next_load);
	if (direct && mostly_cached(fd, size)) {
		int b = ioread_reopen_buffered(fd);
		if (b >= 0) {
			close(fd);
			fd = b;
			direct = 0;
			cached = 1;
		}
	}
	err = read_head(&fd, &direct, path, size, &v, why, sizeof why);
	if (err)
		goto reject;
	if (c->conf.max_size && size > c->conf.max_size) {
		err = diag_fail(-EFBIG, why, sizeof why,
				  "image is %llu bytes, over the cache's max_size of %llu bytes",
				  (unsigned long long)size, (unsigned long long)c->conf.max_size);
		goto reject;
	}
	/* relaxed: figures for status.c:status_take(), which reads them relaxed */
	atomic_store_explicit(&c->load_done, 0, memory_order_relaxed);
	atomic_store_explicit(&c->load_total, size, memory_order_relaxed);
	struct room_arg ra = {L, c};
	struct place_req pr = {
		.conf = L->conf,
		.prefix = L->prefix,
		.name = c->name,
		.load_id = c->next_load,
		.memory = c->conf.memory,
		.mode = c->conf.mode,
		.gid = c->conf.gid,
		.make_room = make_room,
		.arg = &ra,
		.fill_by_read = 1, /* ioread() below; copies_make() memcpys */
	};
	/* NUMA: where each copy goes (numa/; replicate makes one per node) */
	err = copies_plan(&pr, c->name, numa, &c->conf.numa, size, cp, why, sizeof why);
	if (err)
		goto reject;
	pr.bind = &cp->plan.seg[0];
	err = place_segment(&pr, size, &s, note, sizeof note, why, sizeof why);
	if ((err == -ENOMEM || err == -ENOSPC) && copies_degrade(cp, c->name, why))
		err = place_segment(&pr, size, &s, note, sizeof note, why, sizeof why);
	if (err)
		goto reject;
	have_seg = 1;
	PROBE(place, name, (int)!!(s.info.flags & SHMKV_SEG_HUGETLB), s.info.page_size, size,
	      s.info.path);
	uint64_t t_alloc = now_ns();
	c->next_load = s.info.load_id + 1; /* seg_create() skips names taken */
	struct ioread_opts o = {
		.queue_depth = L->conf->queue_depth,
		.block_size = L->conf->block_size,
		.engine = L->conf->io,
		.cancel = &L->cancel,
		.progress = &c->load_done,
	};
	err = ioread(fd, &direct, path, s.map, size, &o, &v, why, sizeof why);
	if (err == -EFAULT && (s.info.flags & SHMKV_SEG_HUGETLB))
		err = place_read_fault(&pr, &s, why, sizeof why);
	if (!err)
		err = vstream_end(&v, s.map, why, sizeof why);
	if (!err)
		err = source_unchanged(fd, &st, path, why, sizeof why);
	PROBE(verify_done, name, err, size, now_ns() - t0);
	if (!err) {
		uint64_t next = c->next_load;
		err = copies_make(cp, &pr, &s, size, &next, why, sizeof why);
		c->next_load = next;
	}
	if (err)
		goto reject;
	uint64_t t_end = now_ns(), ms = (t_end - t0) / 1000000u;
	uint64_t alloc_ms = (t_alloc - t0) / 1000000u;
	double secs = (double)(t_end - t0) / 1e9;
	atomic_store_explicit(&c->load_total, 0, memory_order_relaxed); /* as above */
	s.info.entries = v.hdr->entry_count;
	struct load_stats ls;
	memset(&ls, 0, sizeof ls);
	copies_verify(cp, c->name, &s, &ls);
	err = seg_commit(&s, why, sizeof why);
	have_seg = 0;
	for (unsigned i = 0; i < cp->nmore; i++) {
		cp->more[i].info.entries = s.info.entries;
		if (!err)
			err = seg_commit(&cp->more[i], why, sizeof why);
		else
			seg_discard(&cp->more[i]);
	}
	if (err) {
		unlink(s.info.path);
		for (unsigned i = 0; i < cp->nmore; i++)
			unlink(cp->more[i].info.path); /* committed ones; the rest are gone */
		cp->nmore = 0;
		goto reject;
	}
	snprintf(ls.source, sizeof ls.source, "%s", path);
	ls.ms = ms;
	ls.alloc_ms = alloc_ms;
	ls.gbps = secs > 0 ? (double)size / 1e9 / secs : 0;
	ls.direct = direct;
	snprintf(ls.note, sizeof ls.note, "%s", note);
	struct seg_info more[SHMKV_CTL_MAX_SEGMENTS - 1];
	for (unsigned i = 0; i < cp->nmore; i++)
		more[i] = cp->more[i].info;
	err = publish_new(L, c, &s.info, more, cp->nmore, &ls, why, sizeof why);
	if (err) {
		unlink(s.info.path);
		for (unsigned i = 0; i < cp->nmore; i++)
			unlink(more[i].path);
		cp->nmore = 0;
		goto reject;
	}
	pthread_mutex_lock(&L->lock); /* read by status.c and metrics.c */
	c->loads_ok++;
	pthread_mutex_unlock(&L->lock);
	free(cp);
	close(fd);
	vstream_free(&v);
	if (cache_save_state(L, c))
		log_warn("cache=%s: state file not written; a restart loses the rollback", name);
	char mem[32];
	log_info("loaded cache=%s gen=%llu bytes=%llu entries=%llu ms=%llu alloc_ms=%llu GB/s=%.2f "
		 "memory=%s direct=%s file=%s", name, (unsigned long long)c->cur.generation,
		 (unsigned long long)size, (unsigned long long)c->cur.entries,
		 (unsigned long long)ms, (unsigned long long)alloc_ms, ls.gbps,
		 mem_kind_name(c->cur.flags, c->cur.page_size, mem, sizeof mem),
		 direct ? "yes" : cached ? "cached" : "no", path);
	notify_status("cache %s: generation %llu loaded, %.2f GB/s", name,
		      (unsigned long long)c->cur.generation, ls.gbps);
	*reply = reply_loaded(c, &ls);
	if (why_out_len)
		why_out[0] = 0;
	return 0;
reject:
	if (c) /* relaxed: as above */
		atomic_store_explicit(&c->load_total, 0, memory_order_relaxed);
	if (have_seg)
		seg_discard(&s);
	if (cp) {
		copies_discard(cp);
		free(cp);
	}
	if (fd >= 0)
		close(fd);
	vstream_free(&v);
	if (why_out_len)
		snprintf(why_out, why_out_len, "%s", why);
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
