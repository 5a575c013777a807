/* compact.c - compaction (compact.h): a changed cache's base and overlays
 * merged by the builder (shmkv_build_compact: the image a full build of
 * the merged records gives, memory-bounded) on a thread of its own, while
 * the worker goes on serving every job (changes to this cache too: they go
 * into its overlays as before). Then the worker catches up (catchup.c: the
 * changes published since the snapshot, as a delta of the new base), loads
 * the new base (verified, the cache's memory policy) and publishes both as
 * one generation; the generation before becomes the rollback. Readers
 * never wait: they read the old generation until the new one is published.
 *
 * Ownership: struct compaction is the worker's (L->compaction) but for
 * the fields the thread uses (the snapshot's files, out, merged, keep: set
 * before the thread starts, never written after; err and why: written by
 * the thread before it queues its done job, read by the worker after it
 * took that job from the queue, the two ordered by L->qlock). */
#include "compact.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <shmkv_build.h>

#include "catchup.h"
#include "diag.h"
#include "json.h"
#include "load.h"
#include "log.h"
#include "overlay.h"
#include "wal.h"
#include "queue.h"

#define COMPACT_RATIO_FLOOR (UINT64_C(1) << 20) /* overlay bytes */
#define COMPACT_WAITERS 16                      /* requests answered by one compaction */

struct compaction {
	struct loader *L;
	char name[SHMKV_CACHE_NAME_MAX + 1];
	int automatic;
	uint64_t waiters[COMPACT_WAITERS]; /* clients answered when it is over */
	unsigned nwait;
	uint64_t t0, records, changes_at;  /* c->ov_keys and c->changes at the snapshot */
	uint64_t gen;                      /* the generation merged (the snapshot's) */
	uint64_t origin_sum, origin_size;  /* what deltas apply to */
	/* the snapshot: its files held open (a fold or a publish may unlink
	 * them meanwhile), merged by the thread through /proc/self/fd; its
	 * overlays mapped for the catch-up */
	int base_fd, lower_fd, top_fd;     /* top_fd -1: no top */
	shmkv *snap_lower, *snap_top;
	int keep;                          /* durable: the new base is kept beside the log */
	char out[PATH_MAX + 80], merged[PATH_MAX];
	struct job *done;                  /* JOB_COMPACT_DONE, queued by the thread */
	int err;                           /* the thread's result, why its reason */
	char why[700];
	/* set by the worker, read by the thread: what is left of the merge is
	 * skipped. Relaxed: a hint, nothing travels with it (the result goes
	 * back through the queue) */
	atomic_int cancel;
	int cancelled;                     /* the worker's: its reply went, its result goes */
};

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int compact_due(const struct cache *c)
{
	if (!c->have_cur || !c->have_ov)
		return 0;
	/* the keys changed (a key both overlays hold once), their bytes */
	uint64_t bytes = c->ov.size + (c->have_top ? c->top.size : 0);
	if (c->conf.compact_entries && c->ov_keys >= c->conf.compact_entries)
		return 1;
	/* the ratio from COMPACT_RATIO_FLOOR on: a small cache's overlay soon
	 * outweighs its base, yet costs next to nothing to rebuild */
	return c->conf.compact_ratio > 0 && bytes >= COMPACT_RATIO_FLOOR &&
	       (double)bytes >= c->conf.compact_ratio * (double)c->cur.size;
}

int compact_running(const struct loader *L, const char *name)
{
	const struct compaction *k = L->compaction;
	return k && !k->cancelled && !strcmp(k->name, name);
}

static void waiting_add(struct compact_waiting *w, const struct job *j, int waits)
{
	if (j->kind != JOB_COMPACT)
		return;
	int first = !w->requests && !w->bound;
	w->requests += j->client != 0;
	w->bound |= !j->client;
	if (!first && j->queued_unix >= w->since)
		return;
	w->since = j->queued_unix; /* worker_push() set it */
	w->by_request = j->client != 0;
	/* a cache name (wait_turn()) */
	snprintf(w->behind, sizeof w->behind, "%.*s", (int)sizeof w->behind - 1,
		 waits ? j->path : "");
}

void compact_waiting(struct loader *L, const char *name, struct compact_waiting *w)
{
	memset(w, 0, sizeof *w);
	pthread_mutex_lock(&L->qlock);
	for (const struct job *j = L->jobs; j; j = j->next)
		if (!strcmp(j->name, name))
			waiting_add(w, j, 0);
	for (const struct job *j = L->compact_wait; j; j = j->next)
		if (!strcmp(j->name, name))
			waiting_add(w, j, 1);
	pthread_mutex_unlock(&L->qlock);
}

static char *reply_compacted(const struct cache *c, uint64_t records, uint64_t catchup,
			     uint64_t merged, uint64_t ms)
{
	struct json j;
	json_init(&j);
	json_bool(&j, "ok", 1);
	json_str(&j, "cache", c->name);
	json_bool(&j, "compacted", records != 0);
	json_u64(&j, "generation", c->cur.generation);
	json_u64(&j, "records", records);
	json_u64(&j, "catch_up", catchup); /* changes published while it ran */
	if (merged)
		json_u64(&j, "merged_generation", merged); /* the snapshot */
	json_u64(&j, "entries", c->cur.entries);
	json_u64(&j, "bytes", c->cur.size);
	json_u64(&j, "ms", ms);
	return json_finish(&j);
}

static void compact_free(struct compaction *k)
{
	if (!k)
		return;
	if (k->base_fd >= 0)
		close(k->base_fd);
	if (k->lower_fd >= 0)
		close(k->lower_fd);
	if (k->top_fd >= 0)
		close(k->top_fd);
	shmkv_close(k->snap_lower);
	shmkv_close(k->snap_top);
	free(k->done);
	free(k);
}

void compact_job_free(struct job *j)
{
	if (!j->compaction)
		return;
	j->compaction->done = NULL; /* j itself: its owner frees it */
	compact_free(j->compaction);
	j->compaction = NULL;
}

/* ---- the thread: the merge, O(base) ---- */

static void fd_path(int fd, char *out, size_t len)
{
	snprintf(out, len, "/proc/self/fd/%d", fd);
}

static int cancelled(struct compaction *k)
{
	/* relaxed: see struct compaction */
	return atomic_load_explicit(&k->cancel, memory_order_relaxed);
}

/* The snapshot merged into k->out: a top first merged into the lower (the
 * fold's merge; the builder takes a chain, and both overlays are deltas of
 * the base), then base and overlay. */
static int merge(struct compaction *k)
{
	char base[40], lower[40], top[40];
	fd_path(k->base_fd, base, sizeof base);
	fd_path(k->lower_fd, lower, sizeof lower);
	const char *deltas[1] = {lower};
	int err = 0;
	if (k->top_fd >= 0) {
		fd_path(k->top_fd, top, sizeof top);
		err = overlay_merge_files(base, top, lower, k->merged, k->why, sizeof k->why);
		deltas[0] = k->merged;
	}
	if (!err && cancelled(k))
		err = diag_fail(-ECANCELED, k->why, sizeof k->why, "cancelled");
	if (!err) {
		shmkv_join_options jo;
		shmkv_join_options_init(&jo);
		shmkv_build_stats st;
		/* the base was verified at its load: the builder trusts it; the
		 * new base is fsynced only where it is kept (durable) */
		err = shmkv_build_compact(k->out, base, deltas, 1,
					  k->keep ? 0 : SHMKV_COMPACT_NOSYNC, &jo, &st, k->why,
					  sizeof k->why);
	}
	unlink(k->merged);
	if (err || cancelled(k))
		unlink(k->out);
	return err;
}

static void *compact_thread(void *arg)
{
	struct compaction *k = arg;
	k->err = merge(k);
	if (worker_push_live(k->L, k->done) == 0)
		return NULL; /* the worker's now: k is read after it takes the job */
	/* the loader stops: nobody takes the result */
	unlink(k->out);
	compact_free(k);
	return NULL;
}

/* ---- the worker: start, cancel, catch up and publish ---- */

/* The files of c's generation held open, its overlays mapped. */
static int snapshot(struct compaction *k, const struct cache *c, char *why, size_t why_len)
{
	const char *paths[3] = {c->cur.path, c->ov.path, c->have_top ? c->top.path : NULL};
	int *fds[3] = {&k->base_fd, &k->lower_fd, &k->top_fd};
	for (int i = 0; i < 3; i++) {
		if (!paths[i])
			continue;
		*fds[i] = open(paths[i], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (*fds[i] < 0)
			return diag_fail(-errno, why, why_len, "%s: %s", paths[i], strerror(errno));
	}
	char w[300];
	/* verified at their load: only their records are read */
	int err = shmkv_open_file_diag(c->ov.path, SHMKV_OPEN_NOVERIFY, &k->snap_lower, w,
				       sizeof w);
	if (!err && c->have_top)
		err = shmkv_open_file_diag(c->top.path, SHMKV_OPEN_NOVERIFY, &k->snap_top, w,
					   sizeof w);
	if (err)
		return diag_fail(err, why, why_len, "an overlay: %s", w);
	return 0;
}

/* What deltas apply to after the compaction: the image the base came from. */
static int origin(const struct cache *c, struct compaction *k, char *why, size_t why_len)
{
	k->origin_sum = c->origin_sum;
	k->origin_size = c->origin_size;
	if (k->origin_sum)
		return 0;
	shmkv *base = NULL;
	char w[300];
	int err = shmkv_open_file_diag(c->cur.path, SHMKV_OPEN_NOVERIFY, &base, w, sizeof w);
	if (err)
		return diag_fail(err, why, why_len, "%s", w);
	k->origin_sum = shmkv_checksum(base);
	k->origin_size = base->size;
	shmkv_close(base);
	return 0;
}

static void note_running(struct loader *L, struct cache *c, uint64_t since, int by_request)
{
	pthread_mutex_lock(&L->lock); /* read by status.c and metrics.c */
	c->compact_since = since;
	c->compact_by_request = by_request;
	pthread_mutex_unlock(&L->lock);
}

static int start(struct loader *L, struct cache *c, const struct job *j, char **reply)
{
	char e[700];
	struct compaction *k = calloc(1, sizeof *k);
	if (!k)
		return json_reply_error(reply, -ENOMEM, "compact %s: out of memory", c->name);
	k->L = L;
	snprintf(k->name, sizeof k->name, "%s", c->name);
	k->automatic = !j->client;
	k->base_fd = k->lower_fd = k->top_fd = -1;
	k->t0 = mono_ms();
	k->records = c->ov_keys;
	k->changes_at = c->changes;
	k->gen = c->cur.generation;
	k->keep = L->durable_fd >= 0;
	if (k->keep)
		snprintf(k->out, sizeof k->out, "%s/.%s.base.tmp", L->durable, c->name);
	else
		overlay_tmp_path(L, c, "compact.tmp", k->out, sizeof k->out);
	overlay_tmp_path(L, c, "compact.top.tmp", k->merged, sizeof k->merged);
	int err = snapshot(k, c, e, sizeof e);
	if (!err)
		err = origin(c, k, e, sizeof e);
	if (!err && !(k->done = job_new(JOB_COMPACT_DONE, c->name)))
		err = diag_fail(-ENOMEM, e, sizeof e, "out of memory");
	pthread_attr_t a;
	pthread_t t;
	if (!err) {
		k->done->compaction = k;
		if (j->client)
			k->waiters[k->nwait++] = j->client;
		/* detached: nobody joins it; its end is its done job (or, the
		 * loader stopping, it frees what it holds itself) */
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		L->compaction = k; /* before the thread may hand it back */
		int perr = pthread_create(&t, &a, compact_thread, k);
		pthread_attr_destroy(&a);
		if (perr) {
			L->compaction = NULL;
			err = diag_fail(-perr, e, sizeof e, "pthread_create: %s", strerror(perr));
		}
	}
	if (err) {
		compact_free(k);
		return overlay_refused(L, c, "compact", err, e, reply);
	}
	note_running(L, c, (uint64_t)time(NULL), !k->automatic);
	log_info("compaction started cache=%s gen=%llu by=%s records=%llu base_bytes=%llu",
		 c->name, (unsigned long long)k->gen, j->client ? "request" : "bound",
		 (unsigned long long)c->ov_keys, (unsigned long long)c->cur.size);
	return COMPACT_LATER;
}

/* A request that waits for the compaction running now (of another cache,
 * or a cancelled one still ending its merge): queued again once it ends. */
static int wait_turn(struct loader *L, const struct job *j, char **reply)
{
	struct job *w = job_new(JOB_COMPACT, j->name);
	if (!w)
		return json_reply_error(reply, -ENOMEM, "compact %s: out of memory", j->name);
	w->client = j->client;
	w->queued_unix = j->queued_unix;
	snprintf(w->path, sizeof w->path, "%s", L->compaction->name); /* for status.c */
	pthread_mutex_lock(&L->qlock); /* compact_waiting() reads the list */
	struct job **p = &L->compact_wait;
	while (*p)
		p = &(*p)->next;
	*p = w;
	pthread_mutex_unlock(&L->qlock);
	struct cache *c = cache_find(L, j->name);
	if (c && !j->client)
		c->compact_queued = 1; /* not queued again meanwhile */
	return COMPACT_LATER;
}

int op_compact(struct loader *L, const struct job *j, char **reply)
{
	const char *name = j->name;
	int automatic = !j->client;
	struct cache *c = cache_find(L, name);
	if (c && automatic)
		c->compact_queued = 0;
	struct compaction *k = L->compaction;
	if (compact_running(L, name)) {
		if (automatic)
			return 0; /* it runs already */
		if (k->nwait == COMPACT_WAITERS)
			return json_reply_error(reply, -EBUSY,
						"compact %s: %u requests wait for the compaction "
						"running now already", name, COMPACT_WAITERS);
		k->waiters[k->nwait++] = j->client; /* answered with it */
		return COMPACT_LATER;
	}
	if (k)
		return wait_turn(L, j, reply);
	if (automatic && (!c || !compact_due(c)))
		return 0; /* replaced or rolled back meanwhile: nothing due any more */
	int err = overlay_changeable(L, name, &c, reply);
	if (err)
		return err;
	if (!c->have_ov) {
		*reply = reply_compacted(c, 0, 0, 0, 0);
		return 0;
	}
	return start(L, c, j, reply);
}

static void answer(struct loader *L, struct compaction *k, const char *line, int failed)
{
	for (unsigned i = 0; i < k->nwait; i++) {
		char *copy = line ? strdup(line) : NULL;
		worker_post(L, k->waiters[i], copy, failed);
	}
	k->nwait = 0;
}

void compact_cancel(struct loader *L, const char *name, const char *why)
{
	struct compaction *k = L->compaction;
	if (!compact_running(L, name))
		return;
	k->cancelled = 1;
	/* relaxed: see struct compaction */
	atomic_store_explicit(&k->cancel, 1, memory_order_relaxed);
	struct cache *c = cache_find(L, name);
	if (c)
		note_running(L, c, 0, 0);
	char msg[400];
	snprintf(msg, sizeof msg, "compaction of cache %s cancelled: %s; nothing of it was "
		 "published", name, why);
	char *line = json_error_code(msg, -ECANCELED);
	answer(L, k, line, 1);
	free(line);
	log_info("compaction cancelled cache=%s: %s (its merge is discarded)", name, why);
}

/* The compaction requests that waited for this one queued again (each
 * keeps when it was first queued). */
static void requeue(struct loader *L)
{
	worker_push_all(L, &L->compact_wait);
}

/* The catch-up of c's changes since the snapshot, as a delta of the new
 * base at cu, verified; *n its records (0: nothing changed, no file). */
static int catch_up(struct cache *c, struct compaction *k, const char *cu, uint64_t *n,
		    char *why, size_t why_len)
{
	*n = 0;
	if (c->changes == k->changes_at)
		return 0; /* no publish since (a fold changes no answer) */
	shmkv *lower = NULL, *top = NULL;
	char w[300];
	int err = shmkv_open_file_diag(c->ov.path, SHMKV_OPEN_NOVERIFY, &lower, w, sizeof w);
	if (!err && c->have_top)
		err = shmkv_open_file_diag(c->top.path, SHMKV_OPEN_NOVERIFY, &top, w, sizeof w);
	if (err)
		diag_fail(err, why, why_len, "an overlay: %s", w);
	else
		err = catchup_build(k->out, k->snap_lower, k->snap_top, lower, top, cu, n, why,
				    why_len);
	shmkv_close(lower);
	shmkv_close(top);
	if (!err && *n)
		err = overlay_verify(k->out, cu, why, why_len);
	return err;
}

/* Durable: the new base kept as DURABLE/NAME.SUM.base.shmkv and the log
 * rewritten to name it, its one record the catch-up (cu; n 0: none),
 * before the publish: a kill at any point leaves a log whose base is found
 * (the one served, or this one, loaded at start with the catch-up: the
 * same answers). *img: the kept base. */
static int keep_base(struct loader *L, struct cache *c, struct compaction *k, const char *cu,
		     uint64_t n, char *img, size_t img_len, char *why, size_t why_len)
{
	shmkv *nb = NULL, *d = NULL;
	char w[300];
	struct wal_head h = {0, 0, k->origin_sum, k->origin_size, c->chain_last, c->chain_seq};
	int err = shmkv_open_file_diag(k->out, SHMKV_OPEN_NOVERIFY, &nb, w, sizeof w);
	if (!err) {
		h.base_sum = shmkv_checksum(nb);
		h.base_size = nb->size;
	}
	shmkv_close(nb);
	if (err)
		return diag_fail(err, why, why_len, "the new base: %s", w);
	overlay_kept_base(L, c->name, h.base_sum, img, img_len);
	if (rename(k->out, img) != 0 || fsync(L->durable_fd) != 0)
		return diag_fail(-errno, why, why_len, "%s: %s", img, strerror(errno));
	struct wal_rec rec = {c->wal_seq + 1, NULL, 0, 0};
	if (n && (err = shmkv_open_file_diag(cu, SHMKV_OPEN_NOVERIFY, &d, w, sizeof w)))
		return diag_fail(err, why, why_len, "the catch-up: %s", w);
	if (d) {
		rec.data = shmkv_header(d);
		rec.len = d->size;
	}
	err = wal_reset(L, c->name, &h, &rec, n ? 1 : 0, why, why_len);
	shmkv_close(d);
	if (!err && n)
		c->wal_seq = rec.seq;
	return err;
}

/* The new base (img) and the catch-up (cu, n records) loaded and published
 * as one generation. */
static int publish(struct loader *L, struct cache *c, struct compaction *k, const char *img,
		   const char *cu, uint64_t n, char **reply, char *why, size_t why_len)
{
	struct seg_info low, more[SHMKV_CTL_MAX_SEGMENTS - 1];
	unsigned nmore = 0;
	int err = n ? load_segments(L, c, cu, &low, more, &nmore, why, why_len) : 0;
	for (unsigned i = 0; !err && i < nmore; i++)
		unlink(more[i].path); /* one copy of an overlay serves every node */
	if (err)
		return overlay_refused(L, c, "compact", err, why, reply);
	/* what deltas apply to stays: the origin the snapshot had, the chain
	 * where it is now (deltas applied meanwhile are in the catch-up) */
	err = op_load_compacted(L, c, img, n ? &low : NULL, k->origin_sum, k->origin_size,
				c->chain_last, c->chain_seq, reply, why, why_len);
	if (err && n)
		unlink(low.path);
	return err; /* op_load said why (logged, the cache's last error) */
}

/* The merge done: caught up and published. */
static int finish(struct loader *L, struct cache *c, struct compaction *k, char **reply)
{
	char e[700], cu[PATH_MAX], img[PATH_MAX + 80];
	uint64_t n = 0;
	overlay_tmp_path(L, c, "catchup.tmp", cu, sizeof cu);
	snprintf(img, sizeof img, "%s", k->out);
	int err = catch_up(c, k, cu, &n, e, sizeof e);
	if (!err && k->keep && (err = keep_base(L, c, k, cu, n, img, sizeof img, e, sizeof e)))
		overlay_log_reset(L, c->name); /* the log of what is served again */
	if (err) {
		unlink(cu);
		unlink(k->out);
		return overlay_refused(L, c, "compact", err, e, reply);
	}
	char *lreply = NULL;
	err = publish(L, c, k, img, cu, n, &lreply, e, sizeof e);
	unlink(cu);
	if (!k->keep)
		unlink(img);
	if (err) {
		if (k->keep)
			overlay_log_reset(L, c->name); /* the log of what is served again */
		*reply = lreply;
		return err;
	}
	free(lreply);
	uint64_t ms = mono_ms() - k->t0;
	pthread_mutex_lock(&L->lock); /* read by status.c and metrics.c: with the count, */
	c->compactions++;	      /* no longer running (never neither, never both) */
	c->compact_unix = (uint64_t)time(NULL);
	c->compact_ms = ms;
	c->compact_records = k->records;
	c->compact_catch_up = n;
	c->compact_since = 0;
	pthread_mutex_unlock(&L->lock);
	cache_save_state(L, c);
	log_info("compacted cache=%s gen=%llu merged_gen=%llu by=%s records=%llu catch_up=%llu "
		 "entries=%llu bytes=%llu ms=%llu", c->name, (unsigned long long)c->cur.generation,
		 (unsigned long long)k->gen, k->automatic ? "bound" : "request",
		 (unsigned long long)k->records, (unsigned long long)n, (unsigned long long)c->cur.entries,
		 (unsigned long long)c->cur.size, (unsigned long long)ms);
	*reply = reply_compacted(c, k->records, n, k->gen, ms);
	return 0;
}

int op_compact_done(struct loader *L, struct job *j)
{
	struct compaction *k = j->compaction;
	j->compaction = NULL;
	k->done = NULL; /* j, freed by the worker */
	L->compaction = NULL;
	struct cache *c = cache_find(L, k->name);
	char *reply = NULL;
	int err = -ECANCELED;
	if (!c)
		k->cancelled = 1; /* dropped (which cancels it): cannot happen */
	if (!k->cancelled) {
		/* it runs until published (finish()) or refused: the catch-up
		 * and the load of the new base take the worker a while too */
		if (k->err) {
			unlink(k->out);
			err = overlay_refused(L, c, "compact", k->err, k->why, &reply);
		} else {
			err = finish(L, c, k, &reply);
		}
		if (err)
			note_running(L, c, 0, 0);
		answer(L, k, reply, err != 0);
	} else {
		log_info("compaction of cache=%s discarded: its merge ended after it was cancelled",
			 k->name);
	}
	free(reply);
	compact_free(k);
	requeue(L);
	return err;
}

void compact_stopped(struct loader *L)
{
	/* answered by server_close() ("the loader is stopping"), as every
	 * request the worker did not finish */
	pthread_mutex_lock(&L->qlock); /* compact_waiting() reads the list */
	struct job *w = L->compact_wait;
	L->compact_wait = NULL;
	pthread_mutex_unlock(&L->qlock);
	while (w) {
		struct job *nx = w->next;
		free(w);
		w = nx;
	}
	/* L->compaction is not read: its thread, seeing the stop, frees it */
	if (L->compaction)
		log_info("stopping: a compaction's merge is abandoned (its temporaries go with "
			 "it, or at the next start)");
}
