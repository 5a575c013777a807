/* loader.h - the daemon's shared state: the loader, its caches and its jobs.
 *
 * Threads: the main thread (main.c) owns the event loop: signals, the spool
 * watch, the control socket. One worker thread (worker.c) runs every job that
 * changes a cache (load, reload, rollback, drop, config apply) one at a time.
 * A compaction's merge runs on a thread of its own (compact.c), which
 * touches no cache: it reads files the worker opened for it and hands its
 * result back as a job (JOB_COMPACT_DONE).
 * The worker is the only writer of struct cache and of the cache table; it
 * writes them under L->lock, and the main thread reads them under L->lock
 * (status, list). The worker reads its own state without the lock. */
#ifndef LOADER_LOADER_H
#define LOADER_LOADER_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include <shmkv.h>

#include "bpf_export.h"
#include "config.h"
#include "ctl.h"
#include "expiry.h"
#include "segment.h"

#define LOADER_VERSION "0.1.0"

/* Figures of the last successful load, for status. */
struct load_stats {
	char source[PATH_MAX]; /* file the current image was read from */
	uint64_t ms;           /* open to verified, milliseconds */
	uint64_t alloc_ms;     /* of which taking the memory (tmpfs: fallocate) */
	double gbps;           /* bytes / 1e9 / seconds */
	int direct;            /* 1: O_DIRECT, 0: buffered */
	char note[160];        /* why memory differs from the policy ("" if it does not) */
	/* NUMA (numa/): the policy this image was loaded with, why its plan
	 * changed (replicate degraded, placement wrong; "" if not), and per copy
	 * (copy 0 = cur, then cur_more[]) where its pages were after the load */
	char numa[NPOLICY_NAME_MAX];
	char numa_note[400];
	unsigned ncopies;          /* copies with figures below; 0: not queried */
	struct copy_stat {
		int32_t node;          /* pinned node as published, -1: not pinned */
		int wrong;             /* pages off the plan's nodes: published unpinned */
		uint64_t absent;       /* pages move_pages found in no node */
		uint64_t pages[NTOPO_MAX_NODES]; /* pages per node id */
	} copy[SHMKV_CTL_MAX_SEGMENTS];
};

/* Why a load failed, for the failure counters (cache.c:load_fail_reason()
 * classifies the error code, load_fail_name() names it for status and metrics). */
enum load_fail {
	LOAD_FAIL_SOURCE,   /* the file: missing, not regular, not readable, bad path */
	LOAD_FAIL_IO,       /* a read failed or came up short */
	LOAD_FAIL_CHANGED,  /* the file changed while it was read */
	LOAD_FAIL_INVALID,  /* not a valid image: magic, version, layout, structure */
	LOAD_FAIL_CHECKSUM, /* a checksum does not match */
	LOAD_FAIL_TOO_LARGE, /* over the cache's max_size */
	LOAD_FAIL_NO_ROOM,  /* no shared memory or huge pages left (ENOSPC) */
	LOAD_FAIL_NO_MEMORY, /* the kernel or a memory cgroup refused memory (ENOMEM) */
	LOAD_FAIL_OTHER,
	LOAD_FAIL_N_
};

struct cache {
	char name[SHMKV_CACHE_NAME_MAX + 1];
	int configured;            /* has a [cache NAME] section */
	struct cache_conf conf;    /* from the config, or the loader's defaults */
	struct ctl ctl;            /* ctl.map == NULL: nothing published (no ctl file) */
	int broken;                /* ctl file exists but cannot be adopted (see last_error) */
	/* the control segment's protocol version (1, 2; 0: no control segment):
	 * the worker sets it under L->lock whenever ctl changes, for status.c,
	 * which must not read ctl while the worker replaces it */
	uint32_t protocol;
	int have_cur, have_rb;
	struct seg_info cur;       /* published */
	struct seg_info rb;        /* rollback candidate, linked, not published */
	/* numa=replicate: the other copies of cur and of rb, one per node; they
	 * are published, kept and freed with it */
	unsigned ncur_more, nrb_more;
	struct seg_info cur_more[SHMKV_CTL_MAX_SEGMENTS - 1];
	struct seg_info rb_more[SHMKV_CTL_MAX_SEGMENTS - 1];
	uint64_t next_load;        /* load id of the next segment file */
	/* changes (lib/PROTOCOL.md, protocol 2): the overlays read through
	 * cur, delta images of cur holding every change since cur was loaded:
	 * ov the lower one, top the top one (the latest changes; only with a
	 * lower); and the rollback generation's (its base is rb, which is cur
	 * itself after a change: then rb.path == cur.path and the base files
	 * are kept; its lower may be cur's too). A file goes once no kept
	 * generation names it (cache_release()). */
	int have_ov, have_rbov, have_top, have_rbtop;
	struct seg_info ov, rbov, top, rbtop;
	/* keys changed since the base: the records of lower and top, a key
	 * both hold counted once (what one merged overlay would hold) */
	uint64_t ov_keys, rb_ov_keys;
	/* overlay.c: ov mapped once and kept while it is the lower (NULL:
	 * not mapped): a publish into the top looks its keys up in it, and
	 * a mapping made again at each would fault its pages in again;
	 * lower_db_path names the file it maps (overlay_unmap_stale()) */
	shmkv *lower_db;
	char lower_db_path[SHMKV_CTL_PATH_MAX];
	uint64_t changes;          /* publishes of changes since the base was loaded */
	uint64_t folds;            /* tops folded into the lower since the loader started */
	uint64_t fold_unix;        /* when the last fold published (0: none) */
	uint64_t fold_ms;          /* how long it took */
	int fold_queued;           /* a fold waits in the queue */
	uint64_t chain_last, chain_seq; /* the last delta applied that continues a chain
				     * (its header_checksum and seq); 0: none */
	uint64_t rb_chain_last, rb_chain_seq;
	/* the state file only (state.c, adopt.c): the generation served when
	 * it was saved, its base's first copy and its overlays ("" none); ""
	 * base: the file did not say */
	char base_saved[SHMKV_CTL_PATH_MAX], ov_saved[SHMKV_CTL_PATH_MAX];
	char top_saved[SHMKV_CTL_PATH_MAX];
	/* the lower a fold was about to publish when the file was saved ("":
	 * none): found published, the fold went through and kept the rollback */
	char fold_saved[SHMKV_CTL_PATH_MAX];
	/* the base a compaction was about to publish when the file was saved
	 * ("": none): found published, it keeps the file's origin and chain;
	 * another base found published (a load's) starts none (adopt.c) */
	char compact_saved[SHMKV_CTL_PATH_MAX];
	/* the base deltas apply to (op_apply): the image loaded last by a full
	 * load, which compactions keep (a compacted base is that image plus the
	 * changes, so a delta of it applies the same); 0: cur itself. The
	 * rollback generation's, swapped with it by rollback. */
	uint64_t origin_sum, origin_size, rb_origin_sum, rb_origin_size;
	/* set by a compaction for the load that publishes its base (load.c),
	 * so that the state file saved with that publish keeps them */
	struct {
		int keep;
		uint64_t origin_sum, origin_size, chain_last, chain_seq;
	} lineage;
	uint64_t compactions;      /* since the loader started */
	uint64_t compact_unix;     /* when the last one published (0: none) */
	uint64_t compact_ms;       /* how long it took, from its start to its publish */
	uint64_t compact_records;  /* the keys it merged (the snapshot's changes) */
	uint64_t compact_catch_up; /* the changes published while it merged */
	int compact_queued;        /* an automatic compaction waits in the queue */
	uint64_t compact_since;    /* unix time a compaction of it started (compact.c),
				    * until it published or failed; 0: none runs */
	int compact_by_request;    /* that one: 1 an operator's request, 0 the bound.
				    * These seven under L->lock, for status.c */
	uint64_t wal_seq;          /* the last record of DURABLE/NAME.wal published (wal.c) */
	/* durable: a load or rollback is being published and the log, which
	 * it rewrites after its publish (overlay_log_reset()), may name the
	 * generation before; saved in the state file before that publish and
	 * cleared once the log is written anew: a restart finding it set
	 * writes the log from the generation served, never replays it over
	 * that (overlay.c: recover_one) */
	int wal_behind;
	/* adopt.c: the generation served was published by a change after the
	 * state file was saved: it holds every record of the log, the last
	 * that change's (overlay.c: recover_one replays none). Not saved */
	int wal_held;
	/* adopt.c: the top overlay published was gone (its lower served):
	 * the log's records are replayed over the base, all of them, as the
	 * lower alone (overlay.c: recover_one). Not saved */
	int top_lost;
	struct load_stats stats;    /* of the current image */
	struct load_stats rb_stats; /* of the rollback candidate */
	char last_error[512];      /* "" = the last operation succeeded */
	uint64_t failed_ms;        /* a new cache whose loads all failed (never served,
				    * not configured): CLOCK_MONOTONIC ms of the first
				    * failure; it is forgotten failed_expire later. 0: not */
	/* since the loader started (or the cache was added), under L->lock */
	uint64_t loads_ok;                      /* generations loaded and published */
	uint64_t load_failures[LOAD_FAIL_N_];   /* loads rejected, by reason */
	struct bpf_export bpf;     /* BPF export (bpf.c) */
	/* when the current generation's entries expire (expiry.h): read by the
	 * load before it publishes, by rollback and startup after; the worker
	 * replaces it under L->lock, status_take() reads it under the lock. The
	 * rollback candidate keeps none (a rollback reads its image again). */
	struct expiry exp;
	/* written by the worker without the lock while a load runs */
	atomic_uint_fast64_t load_done, load_total; /* load_total 0: no load running */
};

struct loader;

/* JOB_COMPACT_DONE: queued by compact.c's thread once its merge is over;
 * the worker catches up and publishes (or discards a cancelled one) */
enum job_kind { JOB_LOAD, JOB_RELOAD, JOB_ROLLBACK, JOB_DROP, JOB_CONFIG, JOB_START,
	       JOB_BPF_EXPORT, JOB_BPF_UNEXPORT, JOB_APPLY, JOB_CHANGE, JOB_COMPACT, JOB_FOLD,
	       JOB_COMPACT_DONE };

struct compaction;

struct job {
	enum job_kind kind;
	char name[SHMKV_CACHE_NAME_MAX + 1];
	char path[PATH_MAX];         /* JOB_LOAD: the image file; JOB_BPF_EXPORT: the prefix;
				      * JOB_APPLY: the delta file; JOB_COMPACT waiting in
				      * L->compact_wait: the cache whose compaction it waits for */
	char *change;                /* JOB_CHANGE: one JSONL record, or a stream's batch of
				      * lines (malloc'd, the job's) */
	size_t change_len;
	uint64_t lines, first_line;  /* a stream's batch: its lines, the first's number */
	int stream;                  /* JOB_CHANGE from a stream (any number of records) */
	char arg[24];                /* JOB_BPF_EXPORT: max_value ("" = default) */
	char numa[NPOLICY_NAME_MAX]; /* JOB_LOAD: NUMA policy of this load; "": the cache's */
	int from_spool;              /* JOB_LOAD: path is a spool file (skipped if gone) */
	/* JOB_LOAD from the spool: identity of the file the event named. The job
	 * loads, removes or renames only that file: a newer one renamed over the
	 * same name has its own event and job, and is never touched by this one. */
	dev_t src_dev;
	ino_t src_ino;
	/* called by the worker once the job is over (err: its result, why: the
	 * reason of a failure), before the reply is posted; NULL = none. Lets the
	 * queuing layer (spool.c) finish its part without the worker calling up. */
	void (*finish)(struct loader *L, const struct job *j, int err, const char *why);
	uint64_t client;             /* control connection waiting for the reply, 0 = none */
	uint64_t queued_unix;        /* when it was first queued (worker_push; kept when a
				      * compaction's request is queued again: compact.c) */
	struct loader_conf *conf;    /* JOB_CONFIG: the new config (the job owns it) */
	struct compaction *compaction; /* JOB_COMPACT_DONE: the one it ends (the job owns it) */
	struct job *next;
};

/* A reply the worker hands back to the main thread. */
struct done {
	uint64_t client;
	char *line; /* JSON object and '\n', malloc'd */
	int failed; /* the job failed (line is its error) */
	struct done *next;
};

struct loader {
	/* fixed at startup */
	char config_path[PATH_MAX]; /* "" = no config file */
	char root[PATH_MAX];        /* canonical */
	char spool[PATH_MAX];       /* canonical */
	char durable[PATH_MAX];     /* durable_dir, canonical; "" = changes not logged */
	int durable_fd;             /* it, opened by its whole chain (trustdir.h); -1 */
	char prefix[32];            /* segment file prefix "shmkv-xxxxxxxx-" */
	pid_t pid;

	/* worker-owned; read by main under lock */
	struct loader_conf *conf;
	pthread_mutex_t lock;
	struct cache **caches;
	size_t ncaches, caps;

	/* job queue: guarded by qlock, which may be taken with L->lock held
	 * (status.c:status_take()), never the other way round */
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct job *jobs, **jobs_tail;
	struct done *dones, **dones_tail;
	int qstop;                  /* the worker exits when it sees this */
	int done_fd;                /* eventfd: the worker posted replies, or
				     * finished a job (metrics_dirty) */
	atomic_int metrics_dirty;   /* a job ended: the metrics file is rewritten */
	pthread_t worker;
	atomic_int cancel;          /* abort the running load: the loader stops */
	/* the worker's: the compaction running off it (compact.c; NULL: none;
	 * at most one per loader); and the compaction requests that wait for
	 * it to end (queued again then): written by the worker, under qlock
	 * since status.c reads it with the queue (compact_queued_take()) */
	struct compaction *compaction;
	struct job *compact_wait;

	/* main thread */
	int lock_fd, sig_fd, spool_fd, listen_fd, ep_fd;
	int root_fd; /* ROOT, opened by its whole chain (trustdir.h) at startup */
	/* main thread: the spool watch (spool.c), shown by status.c */
	int spool_wd;               /* inotify watch of the spool; -1 while it is gone */
	int spool_parent_wd;        /* of its parent while the spool is gone, else -1 */
	char spool_error[PATH_MAX + 600]; /* "" = watched; else what happened to it */
	/* main thread: the metrics file (metrics.c) */
	uint64_t metrics_due_ms;    /* CLOCK_MONOTONIC ms of the next periodic write */
	char metrics_error[PATH_MAX + 200]; /* "" = written; else the last failure */
};

/* cache.c: the cache table (lock held by the caller as documented) */
struct cache *cache_find(struct loader *L, const char *name);      /* any thread, lock held by main */
int cache_add(struct loader *L, const char *name, struct cache **out); /* worker; takes the lock */
void cache_remove(struct loader *L, struct cache *c);               /* worker; takes the lock */
void cache_free(struct cache *c); /* its memory and mappings (the files stay); out of the table */
void cache_set_error(struct loader *L, struct cache *c, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* cache.c: the label of a failure reason ("source", "checksum", ...), and
 * the reason of a load that returned err (-errno or SHMKV_E*) */
const char *load_fail_name(enum load_fail r);
enum load_fail load_fail_reason(int err);
const char *mem_kind_name(uint32_t flags, uint64_t page_size, char *buf, size_t len);
const char *mem_policy_name(enum mem_policy p);
/* worker: writes ROOT/NAME.state; a failure is logged and returned (-errno) */
int cache_save_state(struct loader *L, struct cache *c);
/* worker: writes ROOT/NAME.state before a publish that a restart must know
 * of (what marks the state: a new base's wal.behind, a compaction's or a
 * fold's path); on failure why says so and the caller does not publish:
 * published unrecorded, a kill before the next save would bring the
 * generation before back at the restart. 0 or -errno. */
int cache_save_before_publish(struct loader *L, struct cache *c, const char *what, char *why,
			      size_t why_len);
/* the rollback generation's base is the current one's (a change was the last publish) */
int cache_rb_shares_base(const struct cache *c);
/* worker: c->ctl's protocol version, 0 without a control segment (for c->protocol) */
uint32_t cache_protocol(const struct cache *c);
/* worker: sets c->protocol from c->ctl under L->lock */
void cache_note_protocol(struct loader *L, struct cache *c);
/* worker: unlinks the rollback candidate (logged with reason), saves the state */
int cache_drop_rollback(struct loader *L, struct cache *c, const char *reason);

/* cache.c: the control-segment entries of a copy and its replicas (out has
 * room for SHMKV_CTL_MAX_SEGMENTS); returns their count */
uint32_t cache_ctl_entries(const struct seg_info *first, const struct seg_info *more,
			   unsigned nmore, shmkv_ctl_segment *out);
/* cache.c: unlinks replicas (logged "freed ... replica") */
void cache_unlink_more(const struct cache *c, const struct seg_info *more, unsigned n);
/* cache.c: whether a generation the cache keeps (current or rollback)
 * names the file at path: its base, a replica or an overlay */
int cache_names(const struct cache *c, const char *path);
/* cache.c: unlinks overlay s of a generation no longer kept, unless a
 * kept one names it too */
void cache_release(const struct cache *c, const struct seg_info *s);
/* cache.c: the control-segment entries of a generation: its base copies
 * (first, more[0..nmore)), then its lower and top overlays (NULL: none;
 * one copy each, lib/PROTOCOL.md) into out (room for
 * SHMKV_CTL_MAX_SEGMENTS), their count in *n; -ENOSPC with why where they
 * do not fit */
int cache_gen_entries(const struct seg_info *first, const struct seg_info *more, unsigned nmore,
		      const struct seg_info *lower, const struct seg_info *top,
		      shmkv_ctl_segment *out, uint32_t *n, char *why, size_t why_len);

/* adopt.c: restart; refuses (error in why) a root others can write */
int adopt_all(struct loader *L, char *why, size_t why_len);

#endif /* LOADER_LOADER_H */
