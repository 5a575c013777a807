/* ioread.c - io_uring reads straight into the segment, checksums overlapped. */
#include "ioread.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <liburing.h>

#include "diag.h"
#include "log.h"
#include "probes.h"

struct req {
	uint64_t off; /* chunk start */
	uint32_t len; /* chunk bytes */
	uint32_t got; /* bytes read so far (short reads are continued) */
};

/* The hasher thread: feeds the vstream as the contiguous prefix grows, so
 * the thread that issues the reads (and, on hugetlbfs, takes the page faults
 * that zero each huge page) never stops to hash. */
struct hasher {
	pthread_t tid;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t prefix;  /* under mu: bytes of the segment read */
	int closing;      /* under mu: no more prefix comes; 2: stop without hashing */
	atomic_int err;   /* the vstream error, once; then the hasher exits */
	struct vstream *v;
	const uint8_t *base;
	char why[512];
};

static void *hasher_main(void *arg)
{
	struct hasher *h = arg;
	uint64_t done = 0;
	for (;;) {
		pthread_mutex_lock(&h->mu);
		while (h->prefix == done && !h->closing)
			pthread_cond_wait(&h->cv, &h->mu);
		/* the mutex orders the reads' completions (seen by reap() or read_sync() before
		 * hasher_offer()) before our reads of those bytes */
		uint64_t prefix = h->prefix;
		int closing = h->closing;
		pthread_mutex_unlock(&h->mu);
		if (closing == 2 || (prefix == done && closing))
			break;
		int err = vstream_feed(h->v, h->base, prefix, h->why, sizeof h->why);
		if (err) {
			/* relaxed: the value is all; why[] is read after pthread_join() */
			atomic_store_explicit(&h->err, err, memory_order_relaxed);
			break;
		}
		done = prefix;
	}
	return NULL;
}

static void hasher_offer(struct hasher *h, uint64_t prefix, int closing)
{
	pthread_mutex_lock(&h->mu);
	if (prefix > h->prefix)
		h->prefix = prefix;
	if (closing > h->closing)
		h->closing = closing;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mu);
}

static int hasher_start(struct hasher *h, struct vstream *v, const uint8_t *base)
{
	memset(h, 0, sizeof *h);
	h->v = v;
	h->base = base;
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	int err = pthread_create(&h->tid, NULL, hasher_main, h);
	if (err) {
		pthread_cond_destroy(&h->cv);
		pthread_mutex_destroy(&h->mu);
	}
	return -err;
}

/* Lets the hasher finish what was offered (abort: stop where it is), joins
 * it; returns its error (reason in h->why) or 0. */
static int hasher_stop(struct hasher *h, int abort)
{
	hasher_offer(h, 0, abort ? 2 : 1);
	pthread_join(h->tid, NULL);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	/* relaxed: pthread_join() ordered the hasher's stores before this */
	return atomic_load_explicit(&h->err, memory_order_relaxed);
}

/* One ioread() call. */
struct io {
	struct io_uring ring;
	int fd;                /* the descriptor reads are issued on */
	int buffered_fd;       /* reopened without O_DIRECT, or -1 */
	int *direct;
	const char *path;
	uint8_t *dst;
	uint64_t size, bs, nchunks;
	struct req *reqs;      /* one per slot (queue_depth) */
	unsigned *free_slots;  /* stack of idle slots */
	unsigned nfree, inflight;
	uint8_t *done;         /* per chunk: read completely */
	int err;               /* first error; then only drain */
	char *why;
	size_t why_len;
};

static int prep(struct io *io, unsigned slot)
{
	const struct req *r = &io->reqs[slot];
	struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
	if (!sqe) {
		int n = io_uring_submit(&io->ring);
		if (n < 0)
			return n;
		sqe = io_uring_get_sqe(&io->ring);
		if (!sqe)
			return -EBUSY;
	}
	io_uring_prep_read(sqe, io->fd, io->dst + r->off + r->got, r->len - r->got,
			   r->off + r->got);
	io_uring_sqe_set_data64(sqe, slot);
	io->inflight++;
	return 0;
}

static void fail(struct io *io, unsigned slot, int err)
{
	io->err = err;
	io->free_slots[io->nfree++] = slot;
}

int ioread_reopen_buffered(int fd)
{
	char p[64];
	snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
	int b = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (b < 0)
		return -errno;
	struct stat a, n;
	if (fstat(fd, &a) != 0 || fstat(b, &n) != 0 || a.st_dev != n.st_dev || a.st_ino != n.st_ino ||
	    !S_ISREG(n.st_mode)) {
		close(b);
		return -ESTALE;
	}
	/* blocking again: with O_NONBLOCK, io_uring returns EAGAIN for data
	 * not in the page cache instead of waiting for it */
	int fl = fcntl(b, F_GETFL);
	if (fl < 0 || fcntl(b, F_SETFL, fl & ~O_NONBLOCK) != 0) {
		int err = -errno;
		close(b);
		return err;
	}
	return b;
}

/* The filesystem took the O_DIRECT open but refuses direct reads: reopen. */
static int go_buffered(struct io *io)
{
	if (io->buffered_fd < 0) {
		io->buffered_fd = ioread_reopen_buffered(io->fd);
		if (io->buffered_fd < 0)
			return diag_fail(io->buffered_fd, io->why, io->why_len, "%s: reopen: %s",
					   io->path, strerror(-io->buffered_fd));
		log_warn("direct I/O refused file=%s: reading buffered", io->path);
	}
	*io->direct = 0;
	io->fd = io->buffered_fd;
	return 0;
}

/* A completion: continue a short read, retry, or mark the chunk done. */
static void complete(struct io *io, unsigned slot, int res)
{
	struct req *r = &io->reqs[slot];
	io->inflight--;
	if (io->err) {
		io->free_slots[io->nfree++] = slot; /* draining */
		return;
	}
	if (res == -EINVAL && *io->direct) {
		int e = go_buffered(io);
		if (e) {
			fail(io, slot, e);
			return;
		}
		res = -EAGAIN;
	}
	if (res > 0) {
		r->got += (uint32_t)res;
	} else if (res == 0) {
		diag_fail(SHMKV_ETRUNCATED, io->why, io->why_len,
			    "%s ended at %llu while reading %llu bytes (file shrank?)", io->path,
			    (unsigned long long)(r->off + r->got), (unsigned long long)io->size);
		fail(io, slot, SHMKV_ETRUNCATED);
		return;
	} else if (res != -EAGAIN && res != -EINTR) {
		diag_fail(res, io->why, io->why_len, "read %s at offset %llu: %s", io->path,
			    (unsigned long long)(r->off + r->got), strerror(-res));
		fail(io, slot, res);
		return;
	}
	if (r->got < r->len) {
		int e = prep(io, slot);
		if (e) {
			diag_fail(e, io->why, io->why_len, "io_uring submit: %s", strerror(-e));
			fail(io, slot, e);
		}
		return;
	}
	io->done[r->off / io->bs] = 1;
	io->free_slots[io->nfree++] = slot;
}

/* Fills idle slots with the next chunks. */
static void refill(struct io *io, uint64_t *next)
{
	while (!io->err && io->nfree && *next < io->nchunks) {
		unsigned slot = io->free_slots[--io->nfree];
		struct req *r = &io->reqs[slot];
		r->off = *next * io->bs;
		r->len = (uint32_t)(io->size - r->off < io->bs ? io->size - r->off : io->bs);
		r->got = 0;
		int e = prep(io, slot);
		if (e) {
			diag_fail(e, io->why, io->why_len, "io_uring submit: %s", strerror(-e));
			fail(io, slot, e);
			return;
		}
		(*next)++;
	}
}

/* The pread engine: one block at a time on this thread, each offered to the
 * hasher as soon as it is in, so reading and hashing still overlap. */
static int read_sync(struct io *io, const struct ioread_opts *o, struct hasher *h)
{
	uint64_t off = 0;
	while (off < io->size) {
		/* relaxed: as in read_uring() */
		if (atomic_load_explicit(o->cancel, memory_order_relaxed))
			return diag_fail(-ECANCELED, io->why, io->why_len, "the loader is stopping");
		/* relaxed: see hasher_main() */
		if (atomic_load_explicit(&h->err, memory_order_relaxed))
			return 0; /* the hasher's error is taken by the caller */
		uint64_t end = io->size - off < io->bs ? io->size : off + io->bs;
		while (off < end) {
			ssize_t n = pread(io->fd, io->dst + off, (size_t)(end - off), (off_t)off);
			if (n < 0 && errno == EINVAL && *io->direct) {
				int e = go_buffered(io);
				if (e)
					return e;
				continue;
			}
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (n < 0)
				return diag_fail(-errno, io->why, io->why_len,
						   "read %s at offset %llu: %s", io->path,
						   (unsigned long long)off, strerror(errno));
			if (n == 0)
				return diag_fail(SHMKV_ETRUNCATED, io->why, io->why_len,
						   "%s ended at %llu while reading %llu bytes "
						   "(file shrank?)", io->path, (unsigned long long)off,
						   (unsigned long long)io->size);
			off += (uint64_t)n;
		}
		/* relaxed: a figure for status.c:status_take(), as in reap() */
		if (o->progress)
			atomic_store_explicit(o->progress, off, memory_order_relaxed);
		PROBE(read_progress, off, io->size);
		hasher_offer(h, off, 0);
	}
	return 0;
}

/* Sets up io's ring; where io_uring is unavailable and the engine is auto,
 * clears *uring instead (then the file is read with pread). */
static int ring_init(struct io *io, const struct ioread_opts *o, int *uring)
{
	unsigned qd = o->queue_depth;
	int err = io_uring_queue_init(qd, &io->ring, 0);
	/* ENOSYS: no io_uring in this kernel (or emulator); EPERM: turned off
	 * (kernel.io_uring_disabled, a seccomp profile) */
	if ((err == -ENOSYS || err == -EPERM) && o->engine == IO_AUTO) {
		log_warn("io_uring unavailable (%s): reading %s with pread", strerror(-err),
			 io->path);
		*uring = 0;
		return 0;
	}
	if (err)
		return diag_fail(err, io->why, io->why_len, "io_uring_queue_init(%u): %s", qd,
				   strerror(-err));
	return 0;
}

/* The pread engine (read_sync()) with its hasher. */
static int ioread_pread(struct io *io, const struct ioread_opts *o, struct vstream *v)
{
	struct hasher h;
	int err = hasher_start(&h, v, io->dst);
	if (err)
		return diag_fail(err, io->why, io->why_len, "hasher thread: %s", strerror(-err));
	err = read_sync(io, o, &h);
	int herr = hasher_stop(&h, err != 0);
	if (herr && !err) {
		err = herr;
		snprintf(io->why, io->why_len, "%s", h.why);
	}
	if (io->buffered_fd >= 0)
		close(io->buffered_fd);
	return err;
}

/* Takes the completions in io's ring; when the prefix of chunks that are all
 * in (*prefix_chunk) grows, offers it to the hasher. */
static void reap(struct io *io, const struct ioread_opts *o, struct hasher *h,
		 uint64_t *prefix_chunk)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;
	io_uring_for_each_cqe(&io->ring, head, cqe) {
		seen++;
		complete(io, (unsigned)io_uring_cqe_get_data64(cqe), cqe->res);
	}
	io_uring_cq_advance(&io->ring, seen);
	uint64_t before = *prefix_chunk;
	while (*prefix_chunk < io->nchunks && io->done[*prefix_chunk])
		(*prefix_chunk)++;
	if (!io->err && *prefix_chunk != before) {
		uint64_t prefix = *prefix_chunk * io->bs < io->size ? *prefix_chunk * io->bs
								    : io->size;
		/* relaxed: a figure for status.c:status_take(), which reads it relaxed;
		 * nothing else is published through it */
		if (o->progress)
			atomic_store_explicit(o->progress, prefix, memory_order_relaxed);
		PROBE(read_progress, prefix, io->size);
		/* hashed by the hasher while the reads queued above are in flight */
		hasher_offer(h, prefix, 0);
	}
}

/* The io_uring engine: keeps the ring full until every chunk is in or an
 * error (io->err) stopped it and what was in flight is drained. Returns 1 if
 * the error is the hasher's. */
static int read_uring(struct io *io, const struct ioread_opts *o, struct hasher *h)
{
	uint64_t next = 0, prefix_chunk = 0;
	int hash_failed = 0;
	for (;;) {
		/* relaxed: a stop request only, no data comes with it (the store is
		 * in worker.c:worker_stop()) */
		if (!io->err && atomic_load_explicit(o->cancel, memory_order_relaxed))
			io->err = diag_fail(-ECANCELED, io->why, io->why_len,
					      "the loader is stopping");
		refill(io, &next);
		if (!io->inflight)
			break;
		int n = io_uring_submit_and_wait(&io->ring, 1);
		if (n < 0 && n != -EINTR && n != -EAGAIN && n != -EBUSY) {
			/* nothing more can be submitted; still drain what is in flight */
			if (!io->err)
				io->err = diag_fail(n, io->why, io->why_len, "io_uring_enter: %s",
						      strerror(-n));
			struct io_uring_cqe *cqe;
			while (io->inflight && io_uring_wait_cqe(&io->ring, &cqe) == 0) {
				io_uring_cqe_seen(&io->ring, cqe);
				io->inflight--;
			}
			break;
		}
		reap(io, o, h, &prefix_chunk);
		/* relaxed: see hasher_main() */
		int e = atomic_load_explicit(&h->err, memory_order_relaxed);
		if (e && !io->err) {
			io->err = e; /* stop reading and drain; why is copied by the caller */
			hash_failed = 1;
		}
	}
	return hash_failed;
}

int ioread(int fd, int *direct, const char *path, uint8_t *dst, uint64_t size,
	   const struct ioread_opts *o, struct vstream *v, char *why, size_t why_len)
{
	struct io io;
	memset(&io, 0, sizeof io);
	io.fd = fd;
	io.buffered_fd = -1;
	io.direct = direct;
	io.path = path;
	io.dst = dst;
	io.size = size;
	io.bs = o->block_size;
	io.nchunks = (size + io.bs - 1) / io.bs;
	io.why = why;
	io.why_len = why_len;
	unsigned qd = o->queue_depth;
	int err = 0, uring = o->engine != IO_PREAD;
	if (uring)
		err = ring_init(&io, o, &uring);
	if (err)
		return err;
	if (!uring)
		return ioread_pread(&io, o, v);
	io.reqs = calloc(qd, sizeof *io.reqs);
	io.free_slots = calloc(qd, sizeof *io.free_slots);
	io.done = calloc(io.nchunks ? io.nchunks : 1, 1);
	if (!io.reqs || !io.free_slots || !io.done) {
		io.err = diag_fail(-ENOMEM, why, why_len, "out of memory");
		goto out;
	}
	for (unsigned i = 0; i < qd; i++)
		io.free_slots[io.nfree++] = qd - 1 - i;
	struct hasher h;
	err = hasher_start(&h, v, dst);
	if (err) {
		io.err = diag_fail(err, why, why_len, "hasher thread: %s", strerror(-err));
		goto out;
	}
	int hash_failed = read_uring(&io, o, &h);
	/* after an error of ours, stop the hasher where it is; else it finishes */
	int herr = hasher_stop(&h, io.err && !hash_failed);
	if (herr && (!io.err || hash_failed)) {
		io.err = herr;
		snprintf(why, why_len, "%s", h.why);
	}
out:
	if (io.buffered_fd >= 0)
		close(io.buffered_fd);
	free(io.reqs);
	free(io.free_slots);
	free(io.done);
	io_uring_queue_exit(&io.ring);
	return io.err;
}
