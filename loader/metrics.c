/* metrics.c - Prometheus text exposition (format 0.0.4) of every cache, and
 * the metrics file the loader keeps current for node_exporter's textfile
 * collector: written to a temporary name in the same directory and renamed,
 * so the collector never reads half a file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"

#include "json.h"
#include "log.h"
#include "readers.h"
#include "status.h"

/* One family: its HELP and TYPE, then one sample per cache from fn. */
struct family {
	const char *name, *type, *help;
	void (*fn)(FILE *f, const char *name, const struct cache_snap *s, const unsigned rd[2]);
};

#define LBL "{cache=\"%s\"}"

static void f_generation(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	fprintf(f, "%s" LBL " %llu\n", m, s->c.name,
		(unsigned long long)(s->c.have_cur ? s->c.cur.generation : 0));
}

static void f_published(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	fprintf(f, "%s" LBL " %d\n", m, s->c.name, s->c.have_cur);
}

static void f_image(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	fprintf(f, "%s" LBL " %llu\n", m, s->c.name,
		(unsigned long long)(s->c.have_cur ? s->c.cur.size : 0));
}

static void f_memory(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	char kind[32];
	if (!s->c.have_cur)
		return;
	uint64_t bytes = s->c.cur.map_size; /* and every replica's (numa=replicate) */
	for (unsigned i = 0; i < s->c.ncur_more && i < SHMKV_CTL_MAX_SEGMENTS - 1; i++)
		bytes += s->c.cur_more[i].map_size;
	fprintf(f, "%s{cache=\"%s\",kind=\"%s\"} %llu\n", m, s->c.name,
		mem_kind_name(s->c.cur.flags, s->c.cur.page_size, kind, sizeof kind),
		(unsigned long long)bytes);
}

/* Where the pages of every copy are (move_pages after the load, load.c):
 * summed per node over the copies; nothing when the load did not ask. */
static void f_memory_node(FILE *f, const char *m, const struct cache_snap *s,
			  const unsigned rd[2])
{
	(void)rd;
	const struct load_stats *ls = &s->c.stats;
	if (!s->c.have_cur || !ls->ncopies)
		return;
	for (int n = 0; n < NTOPO_MAX_NODES; n++) {
		uint64_t pages = 0;
		for (unsigned i = 0; i < ls->ncopies && i < SHMKV_CTL_MAX_SEGMENTS; i++)
			pages += ls->copy[i].pages[n];
		if (pages)
			fprintf(f, "%s{cache=\"%s\",node=\"%d\"} %llu\n", m, s->c.name, n,
				(unsigned long long)(pages * s->c.cur.page_size));
	}
}

static void f_copies(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	if (s->c.have_cur)
		fprintf(f, "%s" LBL " %u\n", m, s->c.name, 1u + s->c.ncur_more);
}

static void f_rollback_memory(FILE *f, const char *m, const struct cache_snap *s,
			      const unsigned rd[2])
{
	(void)rd;
	uint64_t bytes = s->c.have_rb ? s->c.rb.map_size : 0;
	for (unsigned i = 0; s->c.have_rb && i < s->c.nrb_more && i < SHMKV_CTL_MAX_SEGMENTS - 1; i++)
		bytes += s->c.rb_more[i].map_size;
	fprintf(f, "%s" LBL " %llu\n", m, s->c.name, (unsigned long long)bytes);
}

static void f_entries(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	fprintf(f, "%s" LBL " %llu\n", m, s->c.name,
		(unsigned long long)(s->c.have_cur ? s->c.cur.entries : 0));
}

/* Changes (overlay.c): the keys changed since the base (a key both
 * overlays hold once) and the overlays' bytes, 0 without one; the top's */
static void f_ov_records(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	fprintf(f, "%s" LBL " %llu\n", m, s->c.name,
		(unsigned long long)(s->c.have_cur && s->c.have_ov ? s->c.ov_keys : 0));
}

static void f_ov_bytes(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	int ov = s->c.have_cur && s->c.have_ov, top = ov && s->c.have_top;
	fprintf(f, "%s" LBL " %llu\n", m, s->c.name,
		(unsigned long long)((ov ? s->c.ov.size : 0) + (top ? s->c.top.size : 0)));
}

static void f_top_records(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	int top = s->c.have_cur && s->c.have_ov && s->c.have_top;
	fprintf(f, "%s" LBL " %llu\n", m, s->c.name, (unsigned long long)(top ? s->c.top.entries : 0));
}

static void f_top_bytes(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	int top = s->c.have_cur && s->c.have_ov && s->c.have_top;
	fprintf(f, "%s" LBL " %llu\n", m, s->c.name, (unsigned long long)(top ? s->c.top.size : 0));
}

/* Folds of the top into the lower (overlay.c) since the loader started,
 * and the last one's duration (absent before the first) */
static void f_folds(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	fprintf(f, "%s" LBL " %llu\n", m, s->c.name, (unsigned long long)s->c.folds);
}

/* The duration of the last fold or compaction: absent before one (when 0) */
static void last_seconds(FILE *f, const char *m, const char *name, uint64_t when, uint64_t ms)
{
	if (when)
		fprintf(f, "%s" LBL " %.3f\n", m, name, (double)ms / 1000.0);
}

static void f_fold_seconds(FILE *f, const char *m, const struct cache_snap *s,
			   const unsigned rd[2])
{
	(void)rd;
	last_seconds(f, m, s->c.name, s->c.fold_unix, s->c.fold_ms);
}

/* Compactions (compact.c) since the loader started */
static void f_compactions(FILE *f, const char *m, const struct cache_snap *s,
			  const unsigned rd[2])
{
	(void)rd;
	fprintf(f, "%s" LBL " %llu\n", m, s->c.name, (unsigned long long)s->c.compactions);
}

/* A compaction running now (compact.c), and since when (absent: none) */
static void f_compacting(FILE *f, const char *m, const struct cache_snap *s,
			 const unsigned rd[2])
{
	(void)rd;
	fprintf(f, "%s" LBL " %d\n", m, s->c.name, s->c.compact_since != 0);
}

static void f_compact_since(FILE *f, const char *m, const struct cache_snap *s,
			    const unsigned rd[2])
{
	(void)rd;
	if (s->c.compact_since)
		fprintf(f, "%s" LBL " %llu\n", m, s->c.name,
			(unsigned long long)s->c.compact_since);
}

/* Compactions waiting to start (compact.h: compact_waiting()), by reason:
 * both labels always present, so that their sum is what waits */
static void f_compact_queued(FILE *f, const char *m, const struct cache_snap *s,
			     const unsigned rd[2])
{
	(void)rd;
	fprintf(f, "%s{cache=\"%s\",by=\"request\"} %u\n", m, s->c.name, s->wait.requests);
	fprintf(f, "%s{cache=\"%s\",by=\"bound\"} %d\n", m, s->c.name, s->wait.bound);
}

static void f_compact_queued_since(FILE *f, const char *m, const struct cache_snap *s,
				   const unsigned rd[2])
{
	(void)rd;
	if (s->wait.since)
		fprintf(f, "%s" LBL " %llu\n", m, s->c.name, (unsigned long long)s->wait.since);
}

static void f_compact_seconds(FILE *f, const char *m, const struct cache_snap *s,
			      const unsigned rd[2])
{
	(void)rd;
	last_seconds(f, m, s->c.name, s->c.compact_unix, s->c.compact_ms);
}

/* Expiry (expiry.h), at the time status_take() ran: absent while unknown */
static void f_expiring(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	if (s->c.have_cur && s->exp.state != EXPIRY_PENDING && s->exp.state != EXPIRY_FAILED)
		fprintf(f, "%s" LBL " %llu\n", m, s->c.name, (unsigned long long)s->exp.expiring);
}

static void f_expired(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	if (s->c.have_cur && s->exp.expired_known)
		fprintf(f, "%s" LBL " %llu\n", m, s->c.name, (unsigned long long)s->exp.expired);
}

static void f_next_expiry(FILE *f, const char *m, const struct cache_snap *s,
			  const unsigned rd[2])
{
	(void)rd;
	if (s->c.have_cur && s->exp.next_known && s->exp.next)
		fprintf(f, "%s" LBL " %llu\n", m, s->c.name, (unsigned long long)s->exp.next);
}

static void f_expiry_memory(FILE *f, const char *m, const struct cache_snap *s,
			    const unsigned rd[2])
{
	(void)rd;
	if (s->c.have_cur)
		fprintf(f, "%s" LBL " %llu\n", m, s->c.name,
			(unsigned long long)s->exp.memory_bytes);
}

static void f_load_seconds(FILE *f, const char *m, const struct cache_snap *s,
			   const unsigned rd[2])
{
	(void)rd;
	if (s->c.have_cur)
		fprintf(f, "%s" LBL " %.3f\n", m, s->c.name, (double)s->c.stats.ms / 1e3);
}

static void f_alloc_seconds(FILE *f, const char *m, const struct cache_snap *s,
			    const unsigned rd[2])
{
	(void)rd;
	if (s->c.have_cur)
		fprintf(f, "%s" LBL " %.3f\n", m, s->c.name, (double)s->c.stats.alloc_ms / 1e3);
}

static void f_load_bytes(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	if (s->c.have_cur)
		fprintf(f, "%s" LBL " %llu\n", m, s->c.name, (unsigned long long)s->c.cur.size);
}

static void f_readers(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	fprintf(f, "%s{cache=\"%s\",generation=\"current\"} %u\n", m, s->c.name, rd[0]);
	fprintf(f, "%s{cache=\"%s\",generation=\"stale\"} %u\n", m, s->c.name, rd[1]);
}

static void f_loading(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	fprintf(f, "%s" LBL " %d\n", m, s->c.name, s->total != 0);
}

static void f_progress(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	if (s->total)
		fprintf(f, "%s" LBL " %.4f\n", m, s->c.name,
			(double)(s->done < s->total ? s->done : s->total) / (double)s->total);
}

static void f_last_failed(FILE *f, const char *m, const struct cache_snap *s,
			  const unsigned rd[2])
{
	(void)rd;
	fprintf(f, "%s" LBL " %d\n", m, s->c.name, s->c.last_error[0] != 0);
}

static void f_failed(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	fprintf(f, "%s" LBL " %d\n", m, s->c.name, !s->c.have_cur && s->c.last_error[0]);
}

static void f_rollback(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	fprintf(f, "%s" LBL " %d\n", m, s->c.name, s->c.have_rb);
}

static void f_loads(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	fprintf(f, "%s" LBL " %llu\n", m, s->c.name, (unsigned long long)s->c.loads_ok);
}

/* every reason, zeros too: rate() and alerts need the series to exist */
static void f_failures(FILE *f, const char *m, const struct cache_snap *s, const unsigned rd[2])
{
	(void)rd;
	for (int r = 0; r < LOAD_FAIL_N_; r++)
		fprintf(f, "%s{cache=\"%s\",reason=\"%s\"} %llu\n", m, s->c.name,
			load_fail_name((enum load_fail)r),
			(unsigned long long)s->c.load_failures[r]);
}

/* Label cache="NAME": names are [A-Za-z0-9_.-] (shmkv_name_check), nothing to escape. */
static const struct family families[] = {
	{"shmkv_cache_generation", "gauge", "generation being served (0: none)", f_generation},
	{"shmkv_cache_published", "gauge", "1 when a generation is published", f_published},
	{"shmkv_cache_image_bytes", "gauge", "size of the served image", f_image},
	{"shmkv_cache_memory_bytes", "gauge",
	 "shared memory of the served generation (image rounded up to its page size, times "
	 "its copies), by kind",
	 f_memory},
	{"shmkv_cache_memory_node_bytes", "gauge",
	 "shared memory of the served generation on each NUMA node, all copies (where the "
	 "loader checked placement)", f_memory_node},
	{"shmkv_cache_copies", "gauge",
	 "copies of the served generation (numa=replicate: one per node)", f_copies},
	{"shmkv_cache_rollback_memory_bytes", "gauge",
	 "shared memory kept for the rollback generation", f_rollback_memory},
	{"shmkv_cache_entries", "gauge", "keys in the served image", f_entries},
	{"shmkv_cache_overlay_records", "gauge",
	 "keys upserted or removed since the base in the served overlays (a key both the lower "
	 "and the top hold counts once)", f_ov_records},
	{"shmkv_cache_overlay_bytes", "gauge", "bytes of the served overlay images, lower and top",
	 f_ov_bytes},
	{"shmkv_cache_overlay_top_records", "gauge",
	 "upserts and removals in the served top overlay (the latest changes, folded into the "
	 "lower past a bound)", f_top_records},
	{"shmkv_cache_overlay_top_bytes", "gauge", "bytes of the served top overlay image",
	 f_top_bytes},
	{"shmkv_cache_folds_total", "counter",
	 "folds of the top overlay into the lower since the loader started", f_folds},
	{"shmkv_cache_fold_duration_seconds", "gauge", "duration of the last fold", f_fold_seconds},
	{"shmkv_cache_compactions_total", "counter",
	 "compactions of changes into a new base since the loader started", f_compactions},
	{"shmkv_cache_compacting", "gauge",
	 "1 while a compaction of the cache runs (its merge off the worker, then its catch-up "
	 "and publish), else 0",
	 f_compacting},
	{"shmkv_cache_compaction_start_timestamp_seconds", "gauge",
	 "unix time the running compaction started (absent when none runs)", f_compact_since},
	{"shmkv_cache_compaction_queued", "gauge",
	 "compactions of the cache waiting to start (behind the worker's jobs or another "
	 "cache's compaction), by what asked: an operator's request or the bound",
	 f_compact_queued},
	{"shmkv_cache_compaction_queued_timestamp_seconds", "gauge",
	 "unix time the oldest waiting compaction was queued (absent when none waits)",
	 f_compact_queued_since},
	{"shmkv_cache_compaction_duration_seconds", "gauge",
	 "duration of the last compaction, from its start to its publish", f_compact_seconds},
	{"shmkv_cache_entries_expiring", "gauge",
	 "entries of the served image that carry an expiry time (format 2)", f_expiring},
	{"shmkv_cache_entries_expired", "gauge",
	 "of those, entries whose expiry has passed (readers treat them as absent)", f_expired},
	{"shmkv_cache_next_expiry_timestamp_seconds", "gauge",
	 "unix time at which the next entry of the served image expires", f_next_expiry},
	{"shmkv_cache_expiry_memory_bytes", "gauge",
	 "loader memory holding the expiry times of the served image (4 bytes per expiring "
	 "entry)", f_expiry_memory},
	{"shmkv_cache_load_duration_seconds", "gauge", "duration of the load that is served",
	 f_load_seconds},
	{"shmkv_cache_load_alloc_seconds", "gauge", "memory allocation part of that load",
	 f_alloc_seconds},
	{"shmkv_cache_load_bytes", "gauge", "bytes read by the load that is served", f_load_bytes},
	{"shmkv_cache_readers", "gauge",
	 "processes mapping the cache, by generation (current or stale)", f_readers},
	{"shmkv_cache_loading", "gauge", "1 while a load runs", f_loading},
	{"shmkv_cache_load_progress_ratio", "gauge", "share of the running load read so far",
	 f_progress},
	{"shmkv_cache_last_load_failed", "gauge",
	 "1 when the last load failed (the previous generation, if any, still serves)",
	 f_last_failed},
	{"shmkv_cache_failed", "gauge", "1 when every load failed and nothing is published",
	 f_failed},
	{"shmkv_cache_rollback_available", "gauge", "1 when a rollback generation is kept",
	 f_rollback},
	{"shmkv_cache_loads_total", "counter",
	 "generations loaded and published since the loader started", f_loads},
	{"shmkv_cache_load_failures_total", "counter",
	 "loads rejected since the loader started, by reason", f_failures},
};
#define NFAMILIES (sizeof families / sizeof families[0])

int metrics_text(struct loader *L, char **out)
{
	*out = NULL;
	/* reader counts come from the shared scan (readers.h): off this thread */
	if (!readers_fresh(L))
		return -EAGAIN;
	pthread_mutex_lock(&L->lock);
	size_t n = L->ncaches;
	struct cache_snap *s = n ? calloc(n, sizeof *s) : NULL;
	if (n && !s) {
		pthread_mutex_unlock(&L->lock);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		status_take(L, L->caches[i], &s[i]);
	pthread_mutex_unlock(&L->lock);
	unsigned (*rd)[2] = n ? calloc(n, sizeof *rd) : NULL;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if ((n && !rd) || !f) {
		if (f)
			fclose(f);
		free(text);
		free(rd);
		free(s);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		struct readers_count c = {0};
		/* any_path: fresh is enough (a scan may lag a publish by its TTL) */
		readers_lookup(L, s[i].c.name, s[i].c.have_cur ? s[i].c.cur.path : "", true, &c);
		rd[i][0] = c.cur;
		rd[i][1] = c.stale;
	}
	fprintf(f, "# HELP shmkv_up 1 when shmkv-loader answers on its control socket\n"
		   "# TYPE shmkv_up gauge\nshmkv_up 1\n"
		   "# HELP shmkv_loader_info the loader's version and pid\n"
		   "# TYPE shmkv_loader_info gauge\n"
		   "shmkv_loader_info{version=\"" LOADER_VERSION "\",pid=\"%ld\"} 1\n"
		   "# HELP shmkv_caches caches the loader knows\n# TYPE shmkv_caches gauge\n"
		   "shmkv_caches %zu\n", (long)L->pid, n);
	for (size_t m = 0; m < NFAMILIES; m++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", families[m].name, families[m].help,
			families[m].name, families[m].type);
		for (size_t i = 0; i < n; i++)
			families[m].fn(f, families[m].name, &s[i], rd[i]);
	}
	int bad = ferror(f);
	if (fclose(f) || bad) {
		free(text);
		text = NULL;
	}
	free(rd);
	free(s);
	*out = text;
	return text ? 0 : -ENOMEM;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The file is due but waits for a reader scan (its end wakes the loop). */
static int waiting_scan;

int metrics_wait_ms(struct loader *L)
{
	if (waiting_scan)
		return -1;
	pthread_mutex_lock(&L->lock); /* L->conf: replaced by the worker (config reload) */
	int on = L->conf->metrics_file[0] != 0;
	pthread_mutex_unlock(&L->lock);
	if (!on)
		return -1;
	uint64_t now = now_ms();
	return L->metrics_due_ms <= now ? 0
		: L->metrics_due_ms - now > 86400000u ? 86400000
		: (int)(L->metrics_due_ms - now);
}

/* Writes text to path by a rename from a temporary in its directory.
 * Returns 0 or -errno with the reason in why. */
static int write_file(const char *path, const char *text, char *why, size_t why_len)
{
	const char *slash = strrchr(path, '/');
	char tmp[PATH_MAX + 16];
	/* ".NAME.XXXXXX": node_exporter reads only *.prom, so never this one */
	if (snprintf(tmp, sizeof tmp, "%.*s/.%s.XXXXXX", (int)(slash - path), path, slash + 1) >=
	    (int)sizeof tmp) {
		snprintf(why, why_len, "%s: path too long", path);
		return -ENAMETOOLONG;
	}
	int fd = mkostemp(tmp, O_CLOEXEC); /* O_EXCL: never through a planted link */
	if (fd < 0) {
		int err = -errno;
		snprintf(why, why_len, "cannot create a file in the directory of %s: %s", path,
			 strerror(errno));
		return err;
	}
	size_t len = strlen(text), off = 0;
	int err = 0;
	if (fchmod(fd, 0644) != 0) /* for the collector's user; nothing secret in it */
		err = -errno;
	while (!err && off < len) {
		ssize_t w = write(fd, text + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			err = w < 0 ? -errno : -EIO;
		else
			off += (size_t)w;
	}
	if (close(fd) != 0 && !err)
		err = -errno;
	if (!err && rename(tmp, path) != 0)
		err = -errno;
	if (err) {
		snprintf(why, why_len, "write %s: %s", path, strerror(-err));
		unlink(tmp);
	}
	return err;
}

void metrics_tick(struct loader *L, int force)
{
	char path[PATH_MAX];
	pthread_mutex_lock(&L->lock); /* L->conf, as above */
	snprintf(path, sizeof path, "%s", L->conf->metrics_file);
	uint64_t every = L->conf->metrics_interval_s * 1000u;
	pthread_mutex_unlock(&L->lock);
	/* relaxed: a hint set by worker.c:run() after a job; the figures
	 * themselves are read under L->lock */
	int dirty = atomic_exchange_explicit(&L->metrics_dirty, 0, memory_order_relaxed);
	uint64_t now = now_ms();
	if (!path[0]) {
		waiting_scan = 0;
		return;
	}
	if (!force && !dirty && !waiting_scan && now < L->metrics_due_ms)
		return;
	char why[PATH_MAX + 200] = "";
	char *text;
	int err = metrics_text(L, &text);
	waiting_scan = err == -EAGAIN;
	if (waiting_scan)
		return; /* written once the scan is in (readers.h) */
	L->metrics_due_ms = now + every;
	if (!err)
		err = write_file(path, text, why, sizeof why);
	free(text);
	if (err && !why[0])
		snprintf(why, sizeof why, "metrics: out of memory");
	if (err && strcmp(why, L->metrics_error) != 0)
		log_err("metrics file not written (retried every %llu s): %s",
			(unsigned long long)(every / 1000u), why);
	else if (!err && L->metrics_error[0])
		log_info("metrics file %s written again", path);
	pthread_mutex_lock(&L->lock); /* read by status.c */
	snprintf(L->metrics_error, sizeof L->metrics_error, "%s", err ? why : "");
	pthread_mutex_unlock(&L->lock);
}

int metrics_reply(struct loader *L, char **reply)
{
	char *text;
	int err = metrics_text(L, &text);
	*reply = NULL;
	if (err)
		return err;
	struct json j;
	json_init(&j);
	json_bool(&j, "ok", 1);
	json_str(&j, "text", text);
	free(text);
	*reply = json_finish(&j);
	return *reply ? 0 : -ENOMEM;
}

void metrics_stop(struct loader *L)
{
	char path[PATH_MAX], why[PATH_MAX + 200];
	snprintf(path, sizeof path, "%s", L->conf->metrics_file); /* the worker has stopped */
	if (path[0] && write_file(path,
				  "# HELP shmkv_up 1 when shmkv-loader answers on its control socket\n"
				  "# TYPE shmkv_up gauge\nshmkv_up 0\n",
				  why, sizeof why))
		log_err("metrics file not written at stop: %s", why);
}
