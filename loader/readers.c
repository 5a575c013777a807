/* readers.c - count the processes that map a cache's segments, off the main
 * loop (readers.h). The main thread hands a snapshot of the caches' segment
 * paths to the scanner thread; the scanner stats them (device, inode), walks
 * /proc/PID/maps once for all caches within READERS_SCAN_MAX_MS, and posts the
 * counts; the main thread serves them while they are fresh. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "readers.h"

#include "diag.h"
#include "procmaps.h"

struct ident {
	uint64_t dev, ino;
	uint32_t cache; /* index in the scan's caches */
	uint32_t cur;   /* 1: a copy of the current generation */
};

/* One cache as the main thread saw it, and its counts. */
struct rc {
	char name[SHMKV_CACHE_NAME_MAX + 1];
	char cur_path[SHMKV_CTL_PATH_MAX]; /* "" none published */
	char paths[2 * SHMKV_CTL_MAX_SEGMENTS][SHMKV_CTL_PATH_MAX];
	unsigned ncur, npaths;             /* paths[0..ncur) current, then rollback */
	unsigned cur, stale;
	long seen_pid;                     /* the process being tallied */
	bool on_cur, on_old;
};

struct result {
	struct rc *c;
	size_t n;
	uint64_t start_ms, dur_ms;
	bool partial;
};

/* Segments published earlier, per cache name: the scanner thread's own. */
struct hist {
	char name[SHMKV_CACHE_NAME_MAX + 1];
	uint64_t dev[READERS_HISTORY], ino[READERS_HISTORY];
	unsigned n, next;
};

struct scanner {
	pthread_t thread;
	int started, efd;
	pid_t self;
	pthread_mutex_t mu; /* guards the fields below */
	pthread_cond_t cond;
	struct result *want;   /* a snapshot to scan; NULL: none */
	struct result *latest; /* the newest result; main thread reads under mu */
	int busy;              /* want handed over or being scanned */
	int stop;
	/* scanner thread only */
	struct hist *hist;
	size_t nhist;
	uint64_t last_end_ms, last_dur_ms;
};
static struct scanner S = {.efd = -1, .mu = PTHREAD_MUTEX_INITIALIZER};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void result_free(struct result *r)
{
	if (r) {
		free(r->c);
		free(r);
	}
}

static uint64_t ttl_ms(const struct result *r)
{
	uint64_t t = r->dur_ms * READERS_TTL_FACTOR;
	return t > READERS_TTL_MS ? t : READERS_TTL_MS;
}

/* ---- the scanner thread ---- */

static struct hist *hist_of(const char *name)
{
	for (size_t i = 0; i < S.nhist; i++)
		if (!strcmp(S.hist[i].name, name))
			return &S.hist[i];
	struct hist *h = realloc(S.hist, (S.nhist + 1) * sizeof *h);
	if (!h)
		return NULL;
	S.hist = h;
	h = &S.hist[S.nhist++];
	memset(h, 0, sizeof *h);
	snprintf(h->name, sizeof h->name, "%s", name);
	return h;
}

static void hist_add(struct hist *h, uint64_t dev, uint64_t ino)
{
	for (unsigned i = 0; i < h->n; i++)
		if (h->dev[i] == dev && h->ino[i] == ino)
			return;
	h->dev[h->next] = dev;
	h->ino[h->next] = ino;
	h->next = (h->next + 1) % READERS_HISTORY;
	if (h->n < READERS_HISTORY)
		h->n++;
}

static int ident_cmp(const void *a, const void *b)
{
	const struct ident *x = a, *y = b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return (int)y->cur - (int)x->cur; /* a current copy first */
}

/* The identities to look for: the current and rollback files (stat now) and
 * every segment of the cache seen before. Sorted for bsearch. */
static struct ident *identities(struct result *r, size_t *count)
{
	size_t cap = r->n * (2 * SHMKV_CTL_MAX_SEGMENTS + READERS_HISTORY) + 1, n = 0;
	struct ident *id = malloc(cap * sizeof *id);
	if (!id)
		return NULL;
	for (size_t i = 0; i < r->n; i++) {
		struct rc *c = &r->c[i];
		struct hist *h = hist_of(c->name);
		for (unsigned k = 0; k < c->npaths; k++) {
			struct stat st;
			if (stat(c->paths[k], &st) != 0)
				continue;
			id[n++] = (struct ident){(uint64_t)st.st_dev, (uint64_t)st.st_ino,
						 (uint32_t)i, k < c->ncur};
			if (h)
				hist_add(h, (uint64_t)st.st_dev, (uint64_t)st.st_ino);
		}
		for (unsigned k = 0; h && k < h->n; k++)
			id[n++] = (struct ident){h->dev[k], h->ino[k], (uint32_t)i, 0};
	}
	qsort(id, n, sizeof *id, ident_cmp);
	*count = n;
	return id;
}

static const struct ident *find(const struct ident *id, size_t n, uint64_t dev, uint64_t ino)
{
	size_t lo = 0, hi = n;
	while (lo < hi) { /* the first entry not below (dev, ino) */
		size_t mid = lo + (hi - lo) / 2;
		if (id[mid].dev < dev || (id[mid].dev == dev && id[mid].ino < ino))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && id[lo].dev == dev && id[lo].ino == ino ? &id[lo] : NULL;
}

/* One process: every line of its maps whose (dev, inode) is a segment. Returns
 * false when the deadline passed. */
static bool scan_pid(long pid, struct result *r, const struct ident *id, size_t nid,
		     uint64_t deadline, char *buf, size_t cap, uint32_t *touched)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/maps", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true; /* gone, or another user's (needs root) */
	size_t have = 0, ntouched = 0;
	unsigned lines = 0;
	bool in_time = true;
	for (;;) {
		ssize_t got = read(fd, buf + have, cap - have);
		if (got <= 0)
			break;
		have += (size_t)got;
		char *p = buf, *end = buf + have, *nl;
		while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
			*nl = 0;
			uint64_t dev, ino;
			const struct ident *hit;
			if (procmaps_line_id(p, &dev, &ino) && ino &&
			    (hit = find(id, nid, dev, ino))) {
				struct rc *c = &r->c[hit->cache];
				if (c->seen_pid != pid) {
					c->seen_pid = pid;
					c->on_cur = c->on_old = false;
					touched[ntouched++] = hit->cache;
				}
				if (hit->cur)
					c->on_cur = true;
				else
					c->on_old = true;
			}
			p = nl + 1;
			if (++lines % 1024 == 0 && now_ms() > deadline) {
				in_time = false;
				break;
			}
		}
		if (!in_time)
			break;
		have = (size_t)(end - p);
		if (have == cap)
			have = 0; /* a line longer than the buffer: no mapping of ours */
		memmove(buf, p, have);
	}
	close(fd);
	for (size_t i = 0; i < ntouched; i++) {
		struct rc *c = &r->c[touched[i]];
		c->cur += c->on_cur;
		c->stale += c->on_old && !c->on_cur;
	}
	return in_time;
}

static void scan(struct result *r)
{
	r->start_ms = now_ms();
	uint64_t deadline = r->start_ms + READERS_SCAN_MAX_MS;
	size_t nid = 0, cap = 1u << 16;
	struct ident *id = identities(r, &nid);
	char *buf = malloc(cap);
	uint32_t *touched = malloc((r->n + 1) * sizeof *touched);
	DIR *d = id && buf && touched ? opendir("/proc") : NULL;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char *endp;
		long pid = strtol(e->d_name, &endp, 10);
		if (*endp || pid <= 0 || pid == (long)S.self)
			continue;
		pthread_mutex_lock(&S.mu);
		int stop = S.stop;
		pthread_mutex_unlock(&S.mu);
		if (stop || now_ms() > deadline ||
		    !scan_pid(pid, r, id, nid, deadline, buf, cap, touched)) {
			r->partial = true;
			break;
		}
	}
	if (!d)
		r->partial = true; /* no /proc, or out of memory: counts unknown */
	else
		closedir(d);
	free(touched);
	free(buf);
	free(id);
	r->dur_ms = now_ms() - r->start_ms;
}

static void *scanner(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&S.mu);
	for (;;) {
		while (!S.stop && !S.want)
			pthread_cond_wait(&S.cond, &S.mu);
		if (S.stop)
			break;
		/* scans back to back (new generations under a status flood) keep
		 * the same duty cycle as the TTL */
		uint64_t gap = S.last_dur_ms * READERS_TTL_FACTOR;
		if (gap > READERS_SCAN_MAX_MS * READERS_TTL_FACTOR)
			gap = READERS_SCAN_MAX_MS * READERS_TTL_FACTOR;
		if (S.last_end_ms && now_ms() < S.last_end_ms + gap) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			uint64_t ns = (uint64_t)ts.tv_nsec + (S.last_end_ms + gap - now_ms()) * 1000000u;
			ts.tv_sec += (time_t)(ns / 1000000000u);
			ts.tv_nsec = (long)(ns % 1000000000u);
			pthread_cond_timedwait(&S.cond, &S.mu, &ts); /* readers_stop wakes it */
			continue;
		}
		struct result *r = S.want;
		S.want = NULL;
		pthread_mutex_unlock(&S.mu);
		scan(r);
		S.last_end_ms = now_ms();
		S.last_dur_ms = r->dur_ms;
		pthread_mutex_lock(&S.mu);
		result_free(S.latest);
		S.latest = r;
		S.busy = 0;
		pthread_mutex_unlock(&S.mu);
		uint64_t one = 1;
		ssize_t w = write(S.efd, &one, sizeof one); /* wakes the main loop */
		(void)w;
		pthread_mutex_lock(&S.mu);
	}
	pthread_mutex_unlock(&S.mu);
	return NULL;
}

/* ---- the main thread ---- */

int readers_start(struct loader *L, char *why, size_t why_len)
{
	S.self = L->pid;
	pthread_condattr_t ca; /* the gap between scans is waited on the monotonic clock */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&S.cond, &ca);
	pthread_condattr_destroy(&ca);
	S.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (S.efd < 0)
		return diag_fail(-errno, why, why_len, "eventfd: %s", strerror(errno));
	int err = pthread_create(&S.thread, NULL, scanner, NULL);
	if (err) {
		close(S.efd);
		S.efd = -1;
		return diag_fail(-err, why, why_len, "reader scanner thread: %s", strerror(err));
	}
	S.started = 1;
	return 0;
}

int readers_fd(void)
{
	return S.efd;
}

void readers_stop(void)
{
	if (!S.started)
		return;
	pthread_mutex_lock(&S.mu);
	S.stop = 1;
	pthread_cond_signal(&S.cond);
	pthread_mutex_unlock(&S.mu);
	pthread_join(S.thread, NULL);
	S.started = 0;
	result_free(S.want);
	result_free(S.latest);
	S.want = S.latest = NULL;
	free(S.hist);
	S.hist = NULL;
	S.nhist = 0;
	close(S.efd);
	S.efd = -1;
}

static void take_paths(struct rc *o, const struct cache *c)
{
	snprintf(o->name, sizeof o->name, "%s", c->name);
	o->cur_path[0] = 0;
	o->ncur = o->npaths = 0;
	if (c->have_cur) {
		snprintf(o->cur_path, sizeof o->cur_path, "%s", c->cur.path);
		memcpy(o->paths[o->npaths++], c->cur.path, sizeof c->cur.path);
		for (unsigned i = 0; i < c->ncur_more && i < SHMKV_CTL_MAX_SEGMENTS - 1; i++)
			memcpy(o->paths[o->npaths++], c->cur_more[i].path, sizeof c->cur.path);
	}
	o->ncur = o->npaths;
	if (c->have_rb) {
		memcpy(o->paths[o->npaths++], c->rb.path, sizeof c->rb.path);
		for (unsigned i = 0; i < c->nrb_more && i < SHMKV_CTL_MAX_SEGMENTS - 1; i++)
			memcpy(o->paths[o->npaths++], c->rb_more[i].path, sizeof c->rb.path);
	}
	o->seen_pid = -1;
}

/* Hands a snapshot of every cache to the scanner unless one is on its way. */
static void request(struct loader *L)
{
	pthread_mutex_lock(&S.mu);
	int busy = S.busy || !S.started;
	if (!busy)
		S.busy = 1;
	pthread_mutex_unlock(&S.mu);
	if (busy)
		return;
	struct result *r = calloc(1, sizeof *r);
	pthread_mutex_lock(&L->lock);
	size_t n = L->ncaches;
	if (r && n && !(r->c = calloc(n, sizeof *r->c))) {
		free(r);
		r = NULL;
	}
	for (size_t i = 0; r && i < n; i++)
		take_paths(&r->c[i], L->caches[i]);
	if (r)
		r->n = n;
	pthread_mutex_unlock(&L->lock);
	pthread_mutex_lock(&S.mu);
	if (r) {
		S.want = r;
		pthread_cond_signal(&S.cond);
	} else {
		S.busy = 0; /* out of memory: the next request tries again */
	}
	pthread_mutex_unlock(&S.mu);
}

int readers_lookup(struct loader *L, const char *name, const char *cur_path, bool any_path,
		   struct readers_count *out)
{
	int found = 0;
	uint64_t now = now_ms();
	pthread_mutex_lock(&S.mu);
	const struct result *r = S.latest;
	if (r && now - r->start_ms < ttl_ms(r)) {
		const struct rc *c = NULL;
		for (size_t i = 0; i < r->n && !c; i++)
			if (!strcmp(r->c[i].name, name))
				c = &r->c[i];
		if (c && (any_path || !strcmp(c->cur_path, cur_path))) {
			*out = (struct readers_count){c->cur, c->stale, r->partial, now - r->start_ms};
			found = 1;
		} else if (!c && any_path) {
			/* a cache newer than the scan: nobody could map it then */
			*out = (struct readers_count){0, 0, r->partial, now - r->start_ms};
			found = 1;
		}
	}
	pthread_mutex_unlock(&S.mu);
	if (!found)
		request(L);
	return found;
}

bool readers_fresh(struct loader *L)
{
	pthread_mutex_lock(&S.mu);
	bool fresh = S.latest && now_ms() - S.latest->start_ms < ttl_ms(S.latest);
	pthread_mutex_unlock(&S.mu);
	if (!fresh)
		request(L);
	return fresh;
}

int readers_collect(void)
{
	uint64_t n;
	return read(S.efd, &n, sizeof n) == sizeof n;
}
