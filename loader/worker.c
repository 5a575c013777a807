/* worker.c - the worker thread: runs jobs one at a time, posts replies. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "worker.h"

#include "bpf.h"
#include "diag.h"
#include "json.h"
#include "load.h"
#include "log.h"
#include "ops.h"
#include "compact.h"
#include "overlay.h"


int job_source_current(const struct job *j)
{
	struct stat st;
	if (lstat(j->path, &st) != 0)
		return 0;
	return st.st_dev == j->src_dev && st.st_ino == j->src_ino;
}


/* An automatic compaction of cache name once its changes passed its bound
 * (compact.h), at most one queued at a time. */
static void compact_queue(struct loader *L, const char *name)
{
	struct cache *c = cache_find(L, name);
	if (!c || c->compact_queued || compact_running(L, name) || !compact_due(c))
		return;
	struct job *j = job_new(JOB_COMPACT, name);
	if (!j) {
		log_warn("compaction of cache=%s not queued: out of memory", name);
		return;
	}
	c->compact_queued = 1;
	log_info("compaction queued cache=%s changes=%llu overlay_bytes=%llu base_bytes=%llu",
		 name, (unsigned long long)c->ov_keys,
		 (unsigned long long)(c->ov.size + (c->have_top ? c->top.size : 0)),
		 (unsigned long long)c->cur.size);
	worker_push(L, j);
}

/* A fold of cache name's top into its lower once the top passed its bound
 * (overlay.h), at most one queued at a time; none where a compaction is
 * due (it takes the top too). */
static void fold_queue(struct loader *L, const char *name)
{
	struct cache *c = cache_find(L, name);
	if (!c || c->fold_queued || c->compact_queued || !overlay_fold_due(c))
		return;
	struct job *j = job_new(JOB_FOLD, name);
	if (!j) {
		log_warn("fold of cache=%s not queued: out of memory", name);
		return;
	}
	c->fold_queued = 1;
	worker_push(L, j);
}

static void run(struct loader *L, struct job *j)
{
	char *reply = NULL, why[512] = "";
	int err = 0, later = 0;
	if (j->from_spool && !job_source_current(j))
		return; /* queued twice (a rescan) and handled, or replaced: its own job loads it */
	switch (j->kind) {
	case JOB_LOAD:
		err = op_load(L, j->name, j->path, j->from_spool, j->numa, &reply, why, sizeof why);
		break;
	case JOB_RELOAD:
		err = op_reload(L, j->name, &reply);
		break;
	case JOB_ROLLBACK:
		err = op_rollback(L, j->name, &reply);
		break;
	case JOB_DROP:
		bpf_before_drop(L, j->name); /* unpinned first: drop may forget the cache */
		err = op_drop(L, j->name, &reply);
		break;
	case JOB_CONFIG:
		op_config(L, j->conf);
		j->conf = NULL;
		break;
	case JOB_START:
		op_start(L);
		break;
	case JOB_BPF_EXPORT:
		err = op_bpf_export(L, j->name, j->path, j->arg, &reply);
		break;
	case JOB_BPF_UNEXPORT:
		err = op_bpf_unexport(L, j->name, &reply);
		break;
	case JOB_APPLY:
		err = op_apply(L, j->name, j->path, j->from_spool, &reply, why, sizeof why);
		break;
	case JOB_CHANGE:
		err = op_change(L, j, &reply, why, sizeof why);
		break;
	case JOB_COMPACT:
		err = op_compact(L, j, &reply);
		if (err == COMPACT_LATER) /* answered when it is published or cancelled */
			err = 0, later = 1;
		break;
	case JOB_COMPACT_DONE:
		err = op_compact_done(L, j);
		break;
	case JOB_FOLD:
		err = op_fold(L, j->name);
		break;
	}
	/* a new base or a step back: a compaction of the cache merging the
	 * generation before is cancelled (compact.h) */
	static const char *const cancels[] = {[JOB_LOAD] = "a load", [JOB_RELOAD] = "a reload",
					      [JOB_ROLLBACK] = "a rollback", [JOB_DROP] = "a drop"};
	if (!err && (size_t)j->kind < sizeof cancels / sizeof cancels[0] && cancels[j->kind])
		compact_cancel(L, j->name, cancels[j->kind]);
	if (j->finish)
		j->finish(L, j, err, why);
	/* a lower overlay kept mapped goes with its file (a job may change
	 * other caches than its own: a start, a config) */
	for (size_t i = 0; i < L->ncaches; i++)
		overlay_unmap_stale(L->caches[i]);
	/* durable mode: the log follows a new base or a step back before the
	 * reply says it happened (at start op_start() replays the logs) */
	if (!err && (j->kind == JOB_LOAD || j->kind == JOB_RELOAD || j->kind == JOB_ROLLBACK ||
		     j->kind == JOB_COMPACT_DONE || j->kind == JOB_DROP))
		overlay_log_reset(L, j->name);
	if (!later)
		worker_post(L, j->client, reply, err != 0);
	if (!err && (j->kind == JOB_CHANGE || j->kind == JOB_APPLY)) {
		compact_queue(L, j->name);
		fold_queue(L, j->name);
	}
	/* BPF after the reply and the publish: readers have the new generation
	 * first, BPF programs right after (loader/README.md, "BPF export") */
	if (!err && (j->kind == JOB_LOAD || j->kind == JOB_RELOAD || j->kind == JOB_ROLLBACK ||
		     j->kind == JOB_COMPACT_DONE || j->kind == JOB_CHANGE || j->kind == JOB_APPLY))
		bpf_after_publish(L, j->name);
	else if (j->kind == JOB_START || j->kind == JOB_CONFIG)
		bpf_sync_all(L);
	/* relaxed: a hint for metrics.c:metrics_tick(), which reads the figures
	 * under L->lock; the eventfd write wakes the main thread */
	atomic_store_explicit(&L->metrics_dirty, 1, memory_order_relaxed);
	uint64_t one = 1;
	ssize_t w = write(L->done_fd, &one, sizeof one);
	(void)w;
}

static void *worker_main(void *arg)
{
	struct loader *L = arg;
	for (;;) {
		pthread_mutex_lock(&L->qlock);
		int expire = 0;
		while (!L->jobs && !L->qstop) {
			/* the cache table is ours: read without L->lock */
			uint64_t due = op_expire_due(L);
			if (!due) {
				pthread_cond_wait(&L->qcond, &L->qlock);
				continue;
			}
			struct timespec ts; /* qcond is CLOCK_MONOTONIC (main.c) */
			clock_gettime(CLOCK_MONOTONIC, &ts);
			if ((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u >= due) {
				expire = 1;
				break;
			}
			ts.tv_sec = (time_t)(due / 1000u);
			ts.tv_nsec = (long)(due % 1000u) * 1000000L;
			pthread_cond_timedwait(&L->qcond, &L->qlock, &ts);
		}
		if (L->qstop) {
			pthread_mutex_unlock(&L->qlock);
			compact_stopped(L);
			break;
		}
		if (expire) {
			pthread_mutex_unlock(&L->qlock);
			op_expire(L);
			continue;
		}
		struct job *j = L->jobs;
		L->jobs = j->next;
		if (!L->jobs)
			L->jobs_tail = &L->jobs;
		pthread_mutex_unlock(&L->qlock);
		run(L, j);
		conf_free(j->conf);
		compact_job_free(j);
		free(j->change);
		free(j);
	}
	return NULL;
}

int worker_start(struct loader *L, char *why, size_t why_len)
{
	L->jobs_tail = &L->jobs;
	L->dones_tail = &L->dones;
	L->done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (L->done_fd < 0)
		return diag_fail(-errno, why, why_len, "eventfd: %s", strerror(errno));
	int err = pthread_create(&L->worker, NULL, worker_main, L);
	if (err)
		return diag_fail(-err, why, why_len, "pthread_create: %s", strerror(err));
	return 0;
}




void worker_stop(struct loader *L)
{
	/* relaxed: a stop request read by ioread.c:read_uring() and read_sync(), and ops.c:load_missing();
	 * no data travels with it, and the join below orders everything else */
	atomic_store_explicit(&L->cancel, 1, memory_order_relaxed);
	pthread_mutex_lock(&L->qlock);
	L->qstop = 1;
	pthread_cond_signal(&L->qcond);
	pthread_mutex_unlock(&L->qlock);
	pthread_join(L->worker, NULL);
	while (L->jobs) {
		struct job *j = L->jobs;
		L->jobs = j->next;
		conf_free(j->conf);
		compact_job_free(j);
		free(j->change);
		free(j);
	}
	L->jobs_tail = &L->jobs;
}
