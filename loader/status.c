/* status.c - the JSON of the list and status verbs (main thread). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "status.h"

#include "bpf.h"
#include "json.h"
#include "readers.h"

void status_take(struct loader *L, const struct cache *c, struct cache_snap *s)
{
	memcpy(s->c.name, c->name, sizeof c->name);
	s->c.configured = c->configured;
	s->c.conf = c->conf;
	s->c.broken = c->broken;
	s->c.have_cur = c->have_cur;
	s->c.have_rb = c->have_rb;
	s->c.cur = c->cur;
	s->c.rb = c->rb;
	/* numa=replicate: the other copies (status' numa.copies, metrics per node) */
	s->c.ncur_more = c->ncur_more;
	s->c.nrb_more = c->nrb_more;
	memcpy(s->c.cur_more, c->cur_more, sizeof c->cur_more);
	memcpy(s->c.rb_more, c->rb_more, sizeof c->rb_more);
	s->c.stats = c->stats;
	s->c.rb_stats = c->rb_stats;
	/* changes (overlay.c) and the protocol of the control segment */
	s->c.have_ov = c->have_ov;
	s->c.ov = c->ov;
	s->c.have_top = c->have_top;
	s->c.top = c->top;
	s->c.ov_keys = c->ov_keys;
	s->c.changes = c->changes;
	s->c.folds = c->folds;
	s->c.fold_unix = c->fold_unix;
	s->c.fold_ms = c->fold_ms;
	s->c.conf.fold_entries = c->conf.fold_entries;
	s->c.conf.fold_ratio = c->conf.fold_ratio;
	s->c.compactions = c->compactions;
	s->c.compact_unix = c->compact_unix;
	s->c.compact_ms = c->compact_ms;
	s->c.compact_since = c->compact_since;
	s->c.compact_by_request = c->compact_by_request;
	s->c.compact_records = c->compact_records;
	s->c.compact_catch_up = c->compact_catch_up;
	/* the compactions waiting in the queue (compact.h: compact_waiting(),
	 * and the moment a starting one is in neither) */
	compact_waiting(L, c->name, &s->wait);
	s->c.conf.compact_entries = c->conf.compact_entries;
	s->c.conf.compact_ratio = c->conf.compact_ratio;
	s->c.protocol = c->protocol;
	memcpy(s->c.last_error, c->last_error, sizeof c->last_error);
	s->c.failed_ms = c->failed_ms;
	s->c.loads_ok = c->loads_ok;
	memcpy(s->c.load_failures, c->load_failures, sizeof c->load_failures);
	s->c.bpf = c->bpf;
	/* relaxed: progress figures stored relaxed by ioread.c:reap() and read_sync(), and load.c:place_first() */
	s->total = atomic_load_explicit(&c->load_total, memory_order_relaxed);
	s->done = atomic_load_explicit(&c->load_done, memory_order_relaxed);
	/* the times are the worker's to free once the lock is let go: counted here */
	expiry_figures(&c->exp, (int64_t)time(NULL), &s->exp);
	s->c.exp.times = NULL;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void summary(struct json *j, const struct loader *L, const struct cache_snap *s)
{
	const struct cache *c = &s->c;
	char mem[32];
	json_str(j, "name", c->name);
	json_u64(j, "generation", c->have_cur ? c->cur.generation : 0);
	json_bool(j, "published", c->have_cur);
	json_u64(j, "image_size", c->have_cur ? c->cur.size : 0);
	json_str(j, "memory", c->have_cur ? mem_kind_name(c->cur.flags, c->cur.page_size, mem,
							   sizeof mem)
					  : NULL);
	json_bool(j, "loading", s->total != 0);
	/* changes: keys changed since the base, in the served overlays (0: the
	 * base alone) */
	json_u64(j, "changes", c->have_cur && c->have_ov ? c->ov_keys : 0);
	json_str(j, "last_error", c->last_error[0] ? c->last_error : NULL);
	/* failed: nothing published and the last load failed */
	json_bool(j, "failed", !c->have_cur && c->last_error[0]);
	/* a new cache that never served: forgotten this many seconds from now
	 * (worker.c, failed_expire); null: kept */
	uint64_t ttl = L->conf->failed_expire_s, now = now_ms();
	if (c->failed_ms && ttl) {
		uint64_t end = c->failed_ms + ttl * 1000u;
		json_u64(j, "expires_in", end > now ? (end - now + 999) / 1000u : 0);
	} else {
		json_null(j, "expires_in");
	}
}

/* "numa": the policy of the current image, why its plan changed, and per
 * copy its node (null: not pinned) and pages per node (move_pages after
 * the load; absent where the host has one node and the policy is none) */
static void numa_status(struct json *j, const struct cache *c)
{
	const struct load_stats *ls = &c->stats;
	json_obj_begin(j, "numa");
	json_str(j, "policy", ls->numa[0] ? ls->numa : "none");
	json_str(j, "note", ls->numa_note[0] ? ls->numa_note : NULL);
	json_arr_begin(j, "copies");
	for (unsigned i = 0; i <= c->ncur_more; i++) {
		const struct seg_info *in = i ? &c->cur_more[i - 1] : &c->cur;
		json_obj_begin(j, NULL);
		json_str(j, "segment", in->path);
		if (in->node >= 0)
			json_u64(j, "node", (uint64_t)in->node);
		else
			json_null(j, "node");
		if (i < ls->ncopies) {
			const struct copy_stat *cs = &ls->copy[i];
			json_bool(j, "placement_ok", !cs->wrong);
			json_obj_begin(j, "pages_per_node");
			for (int n = 0; n < NTOPO_MAX_NODES; n++) {
				char k[8];
				snprintf(k, sizeof k, "%d", n);
				if (cs->pages[n])
					json_u64(j, k, cs->pages[n]);
			}
			json_obj_end(j);
			json_u64(j, "pages_absent", cs->absent);
		}
		json_obj_end(j);
	}
	json_arr_end(j);
	json_obj_end(j);
}

/* "expiry": when the entries of the current generation expire (expiry.h).
 * expired and next are as of `now`; null where unknown (state pending or
 * failed, or counted between the first and the last expiry). */
static void expiry_status(struct json *j, const struct expiry_figs *f)
{
	int known = f->state != EXPIRY_PENDING && f->state != EXPIRY_FAILED;
	json_obj_begin(j, "expiry");
	json_str(j, "state", expiry_state_name(f->state));
	json_u64(j, "now", (uint64_t)f->now);
	if (known)
		json_u64(j, "entries", f->expiring);
	else
		json_null(j, "entries");
	if (f->expired_known)
		json_u64(j, "expired", f->expired);
	else
		json_null(j, "expired");
	if (f->next_known && f->next) {
		json_u64(j, "next", f->next);
		json_u64(j, "next_in", (uint64_t)((int64_t)f->next - f->now));
	} else {
		json_null(j, "next");
		json_null(j, "next_in");
	}
	if (known && f->last)
		json_u64(j, "last", f->last);
	else
		json_null(j, "last");
	json_u64(j, "memory_bytes", f->memory_bytes);
	json_u64(j, "scan_ms", f->scan_ms);
	json_str(j, "note", f->note[0] ? f->note : NULL);
	json_obj_end(j);
}

static const char *compact_by(int by_request)
{
	return by_request ? "request" : "bound";
}

/* "compaction" (compact.c): the bounds; waiting to start (the oldest: since
 * when, why, behind what), running (since when, why), the last one since
 * start (when, how long, the keys it merged and the changes caught up) */
static void compaction_status(struct json *j, const struct cache *c,
			      const struct compact_waiting *w)
{
	json_obj_begin(j, "compaction");
	json_u64(j, "entries_bound", c->conf.compact_entries);
	json_f64(j, "ratio_bound", c->conf.compact_ratio, 3);
	json_u64(j, "count", c->compactions);
	json_bool(j, "queued", w->since != 0);
	if (w->since) {
		json_u64(j, "queued_since_unix", w->since);
		json_str(j, "queued_by", compact_by(w->by_request));
		json_str(j, "queued_behind", w->behind[0] ? "compaction" : "jobs");
		json_str(j, "queued_behind_cache", w->behind[0] ? w->behind : NULL);
	} else {
		json_null(j, "queued_since_unix");
		json_null(j, "queued_by");
		json_null(j, "queued_behind");
		json_null(j, "queued_behind_cache");
	}
	json_u64(j, "queued_requests", w->requests);
	/* running: from its start to its publish (the merge off the worker,
	 * then the catch-up and the load on it) */
	json_bool(j, "running", c->compact_since != 0);
	if (c->compact_since) {
		json_u64(j, "running_since_unix", c->compact_since);
		json_str(j, "running_by", compact_by(c->compact_by_request));
	} else {
		json_null(j, "running_since_unix");
		json_null(j, "running_by");
	}
	if (c->compact_unix) {
		json_u64(j, "last_unix", c->compact_unix);
		json_u64(j, "last_ms", c->compact_ms);
		json_u64(j, "last_records", c->compact_records);
		json_u64(j, "last_catch_up", c->compact_catch_up);
	} else {
		json_null(j, "last_unix");
		json_null(j, "last_ms");
		json_null(j, "last_records");
		json_null(j, "last_catch_up");
	}
	json_obj_end(j);
}

static void spool_health(struct json *j, const struct loader *L)
{
	json_obj_begin(j, "spool");
	json_str(j, "dir", L->spool);
	json_bool(j, "watching", L->spool_wd >= 0);
	json_str(j, "error", L->spool_error[0] ? L->spool_error : NULL);
	json_obj_end(j);
}

char *status_list(struct loader *L)
{
	struct json j;
	json_init(&j);
	json_bool(&j, "ok", 1);
	json_arr_begin(&j, "caches");
	pthread_mutex_lock(&L->lock);
	for (size_t i = 0; i < L->ncaches; i++) {
		struct cache_snap *s = malloc(sizeof *s);
		if (!s)
			break;
		status_take(L, L->caches[i], s);
		json_obj_begin(&j, NULL);
		summary(&j, L, s);
		json_obj_end(&j);
		free(s);
	}
	json_arr_end(&j);
	spool_health(&j, L);
	json_obj_begin(&j, "metrics");
	json_str(&j, "file", L->conf->metrics_file[0] ? L->conf->metrics_file : NULL);
	json_str(&j, "error", L->metrics_error[0] ? L->metrics_error : NULL);
	json_obj_end(&j);
	pthread_mutex_unlock(&L->lock);
	return json_finish(&j);
}

int status_cache(struct loader *L, const char *name, bool any_path, char **reply)
{
	struct cache_snap *s = calloc(1, sizeof *s);
	*reply = NULL;
	if (!s)
		return -ENOMEM;
	pthread_mutex_lock(&L->lock);
	struct cache *c0 = cache_find(L, name);
	if (c0)
		status_take(L, c0, s);
	pthread_mutex_unlock(&L->lock);
	if (!c0) {
		free(s);
		*reply = json_no_cache(name);
		return *reply ? 0 : -ENOMEM;
	}
	const struct cache *c = &s->c;
	struct readers_count rd;
	/* the scan runs on its own thread: the request waits for it (server.c) */
	if (!readers_lookup(L, c->name, c->have_cur ? c->cur.path : "", any_path, &rd)) {
		free(s);
		return -EAGAIN;
	}

	struct json j;
	json_init(&j);
	json_bool(&j, "ok", 1);
	pthread_mutex_lock(&L->lock); /* L->conf */
	summary(&j, L, s);
	pthread_mutex_unlock(&L->lock);
	json_str(&j, "spool_error", L->spool_error[0] ? L->spool_error : NULL);
	json_bool(&j, "configured", c->configured);
	json_str(&j, "policy", mem_policy_name(c->conf.memory));
	json_u64(&j, "max_size", c->conf.max_size);
	json_str(&j, "configured_source", c->conf.source[0] ? c->conf.source : NULL);
	if (c->have_cur) {
		json_u64(&j, "map_size", c->cur.map_size);
		json_u64(&j, "page_size", c->cur.page_size);
		json_bool(&j, "hugepages", (c->cur.flags & SHMKV_SEG_HUGETLB) != 0);
		json_u64(&j, "entries", c->cur.entries);
		json_u64(&j, "format", c->cur.format);
		json_str(&j, "segment", c->cur.path);
		json_u64(&j, "load_id", c->cur.load_id);
		json_str(&j, "source", c->stats.source[0] ? c->stats.source : NULL);
		json_u64(&j, "load_ms", c->stats.ms);
		json_u64(&j, "alloc_ms", c->stats.alloc_ms);
		json_f64(&j, "gbps", c->stats.gbps, 2);
		json_bool(&j, "direct_io", c->stats.direct);
		json_str(&j, "memory_note", c->stats.note[0] ? c->stats.note : NULL);
		numa_status(&j, c);
		expiry_status(&j, &s->exp);
	}
	json_u64(&j, "protocol", c->protocol);
	if (c->have_cur && c->have_ov) { /* changes since the base (overlay.c) */
		int top = c->have_top;
		json_obj_begin(&j, "overlay");
		/* both levels: the keys changed (a key both hold once), bytes */
		json_u64(&j, "records", c->ov_keys);
		json_u64(&j, "bytes", c->ov.size + (top ? c->top.size : 0));
		json_u64(&j, "publishes", c->changes);
		json_str(&j, "segment", c->ov.path);
		json_obj_begin(&j, "lower");
		json_u64(&j, "records", c->ov.entries);
		json_u64(&j, "bytes", c->ov.size);
		json_str(&j, "segment", c->ov.path);
		json_obj_end(&j);
		if (top) {
			json_obj_begin(&j, "top");
			json_u64(&j, "records", c->top.entries);
			json_u64(&j, "bytes", c->top.size);
			json_str(&j, "segment", c->top.path);
			json_obj_end(&j);
		} else {
			json_null(&j, "top");
		}
		json_obj_end(&j);
	} else {
		json_null(&j, "overlay");
	}
	/* folds (overlay.c): the bound and the last one since start */
	json_obj_begin(&j, "fold");
	json_u64(&j, "entries_bound", c->conf.fold_entries);
	json_f64(&j, "ratio_bound", c->conf.fold_ratio, 3);
	json_u64(&j, "count", c->folds);
	if (c->fold_unix) {
		json_u64(&j, "last_unix", c->fold_unix);
		json_u64(&j, "last_ms", c->fold_ms);
	} else {
		json_null(&j, "last_unix");
		json_null(&j, "last_ms");
	}
	json_obj_end(&j);
	compaction_status(&j, c, &s->wait);
	if (c->have_rb) {
		json_obj_begin(&j, "rollback");
		json_u64(&j, "generation", c->rb.generation);
		json_u64(&j, "image_size", c->rb.size);
		json_str(&j, "segment", c->rb.path);
		json_str(&j, "source", c->rb_stats.source[0] ? c->rb_stats.source : NULL);
		json_obj_end(&j);
	} else {
		json_null(&j, "rollback");
	}
	bpf_status_fields(&j, L, c);
	json_u64(&j, "readers", rd.cur);
	json_u64(&j, "readers_stale", rd.stale);
	/* the shared scan's age, and whether it stopped at its time bound */
	json_u64(&j, "readers_age_ms", rd.age_ms);
	json_bool(&j, "readers_partial", rd.partial);
	/* counters since the loader started (metrics.c names the reasons) */
	json_u64(&j, "loads", c->loads_ok);
	json_obj_begin(&j, "failures");
	for (int r = 0; r < LOAD_FAIL_N_; r++)
		json_u64(&j, load_fail_name((enum load_fail)r), c->load_failures[r]);
	json_obj_end(&j);
	if (s->total) {
		json_obj_begin(&j, "progress");
		json_u64(&j, "bytes_done", s->done);
		json_u64(&j, "bytes_total", s->total);
		json_obj_end(&j);
	}
	free(s);
	*reply = json_finish(&j);
	return *reply ? 0 : -ENOMEM;
}
