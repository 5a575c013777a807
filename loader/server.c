/* server.c - the control socket ROOT/control.sock (protocol: README.md).
 * Main thread only.
 *
 * Shared fairly (README.md, "Control socket limits"): connections are bounded
 * per uid and in all, with a share kept for root and the loader's uid; each
 * connection runs at most a budget of requests per turn of the loop, root's
 * first; a peer that does not read its replies is not read either; reader
 * counts come from readers.c's scan on its own thread, so no request waits
 * for /proc on this one. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include "server.h"

#include "bpf.h"
#include "diag.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "readers.h"
#include "reqline.h"
#include "status.h"
#include "worker.h"

#define OUT_MAX_ (128u << 10) /* replies held for a peer that does not read them:
			       * beyond this, its requests wait (no EPOLLIN) */
#define ACCEPT_BATCH 64       /* connections taken per turn of the loop */
#define PAUSE_MS 200          /* accept paused this long when out of descriptors */
#define STREAM_IN_MAX (16u << 20) /* a stream's lines buffered for its next batch */

/* Every epoll entry of this file points at a struct whose first member is
 * its kind (main.c hands them to server_event). */
enum item_kind { IT_CLIENT = 0x5e1, IT_LISTEN, IT_TIMER, IT_SCAN, IT_MORE, IT_STREAM };
struct item {
	enum item_kind kind;
};

struct client {
	struct item it; /* first: IT_CLIENT */
	uint64_t id;
	int fd;
	char *in;
	size_t in_len, in_cap;
	char *out;
	size_t out_len, out_cap;
	char *held;  /* a request waiting for a reader scan (pending too) */
	int pending; /* a job's reply (or a scan) is awaited: later lines wait */
	int eof;     /* the peer closed its side */
	int bad;     /* close once the output is flushed */
	int gone;    /* hung up while a job runs: out of the epoll set */
	int dead;    /* closed; freed by server_reap() after the event batch */
	int queued;  /* on the ready list: complete lines left after its budget */
	int priv;    /* root or the loader's uid */
	/* after `stream NAME`: every later line is a change of that cache,
	 * published in batches (stream_pump) */
	int stream;
	char stream_name[SHMKV_CACHE_NAME_MAX + 1];
	uint64_t stream_lines; /* lines handed to the worker so far */
	struct req_stream stream_in; /* in[]'s lines scanned so far */
	uint64_t stream_sent;  /* CLOCK_MONOTONIC ms of the last batch handed over */
	uid_t uid;   /* the peer's (SO_PEERCRED at accept); (uid_t)-1 unknown */
	struct client *next, *next_ready;
};

static struct client *clients, *graveyard, *ready;
static uint64_t next_id = 1;
static struct item it_listen = {IT_LISTEN}, it_timer = {IT_TIMER}, it_scan = {IT_SCAN},
		   it_more = {IT_MORE}, it_stream = {IT_STREAM};
static int timer_fd = -1, more_fd = -1, spare_fd = -1, stream_fd = -1, paused;
static uint64_t stream_due; /* when stream_fd fires (ms), 0: disarmed */

/* The limits, fixed by server_open() from RLIMIT_NOFILE (README.md). */
struct limits {
	unsigned per_uid, others, priv; /* connections */
	unsigned n_others, n_priv;      /* open now */
	unsigned rlimit, reserve;
};
/* Connections of a uid other than root's and ours. */
struct uid_count {
	uid_t uid;
	unsigned n;
};
static struct limits lim;
static struct uid_count *uids; /* at most lim.others + 1 uids */
static unsigned nuids;

#define SOCK_NAME "control.sock"

/* ---- descriptors and limits ---- */

static void plan_limits(void)
{
	struct rlimit rl;
	unsigned want = SERVER_CONN_OTHERS + SERVER_CONN_PRIV + SERVER_FD_RESERVE + 64;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	unsigned cur = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 1u << 20
			       ? (unsigned)rl.rlim_cur : 1u << 20;
	/* descriptors open now (the spool, signals, the lock, ...) plus what
	 * loads, scans and BPF exports take: never given to clients */
	unsigned base = (unsigned)dup(0) + 1;
	if (base > 0)
		close((int)base - 1);
	lim.rlimit = cur;
	lim.reserve = cur / 4 < SERVER_FD_RESERVE ? cur / 4 : SERVER_FD_RESERVE;
	unsigned room = cur > base + lim.reserve ? cur - base - lim.reserve : 0;
	lim.priv = room < SERVER_CONN_PRIV ? room / 2 : SERVER_CONN_PRIV;
	room -= lim.priv;
	lim.others = room < SERVER_CONN_OTHERS ? room : SERVER_CONN_OTHERS;
	lim.per_uid = lim.others < SERVER_CONN_PER_UID ? lim.others : SERVER_CONN_PER_UID;
	char us[32] = "";
	if (geteuid() != 0)
		snprintf(us, sizeof us, " and uid %u", (unsigned)geteuid());
	log_info("control socket limits: %u connections per uid, %u for all uids but root%s, "
		 "%u more for root%s; %u descriptors kept for loads (RLIMIT_NOFILE %u)",
		 lim.per_uid, lim.others, us, lim.priv, us, lim.reserve, cur);
}

int server_open(struct loader *L, char *why, size_t why_len)
{
	struct sockaddr_un a;
	memset(&a, 0, sizeof a);
	a.sun_family = AF_UNIX;
	int dirfd = open(L->root, O_PATH | O_DIRECTORY | O_CLOEXEC), err = 0;
	if (dirfd < 0)
		return diag_fail(-errno, why, why_len, "%s: %s", L->root, strerror(errno));
	/* a root too long for sun_path is reached through its descriptor */
	if ((size_t)snprintf(a.sun_path, sizeof a.sun_path, "%s/" SOCK_NAME, L->root) >=
	    sizeof a.sun_path)
		snprintf(a.sun_path, sizeof a.sun_path, "/proc/self/fd/%d/" SOCK_NAME, dirfd);
	L->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (L->listen_fd < 0) {
		err = diag_fail(-errno, why, why_len, "socket: %s", strerror(errno));
		goto out;
	}
	unlinkat(dirfd, SOCK_NAME, 0); /* a stale one: the root lock says no loader uses it */
	mode_t old = umask(0177);
	int r = bind(L->listen_fd, (struct sockaddr *)&a, sizeof a);
	umask(old);
	if (r != 0) {
		err = diag_fail(-errno, why, why_len, "bind %s/" SOCK_NAME ": %s", L->root,
				  strerror(errno));
		goto out;
	}
	if (L->conf->gid != (gid_t)-1 &&
	    (fchownat(dirfd, SOCK_NAME, (uid_t)-1, L->conf->gid, 0) != 0 ||
	     fchmodat(dirfd, SOCK_NAME, 0660, 0) != 0)) {
		err = diag_fail(-errno, why, why_len, "%s/" SOCK_NAME ": set group: %s", L->root,
				  strerror(errno));
		goto out;
	}
	if (listen(L->listen_fd, 128) != 0) {
		err = diag_fail(-errno, why, why_len, "listen: %s", strerror(errno));
		goto out;
	}
	/* the reserve descriptor: given up for one accept when out of them */
	spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	more_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	stream_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (spare_fd < 0 || timer_fd < 0 || more_fd < 0 || stream_fd < 0) {
		err = diag_fail(-errno, why, why_len, "control socket descriptors: %s",
				  strerror(errno));
		goto out;
	}
	plan_limits();
	uids = calloc(lim.others + 1, sizeof *uids);
	if (!uids) {
		err = diag_fail(-ENOMEM, why, why_len, "out of memory");
		goto out;
	}
	err = readers_start(L, why, why_len);
out:
	close(dirfd);
	return err;
}

static int watch(struct loader *L, int fd, struct item *it)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = it};
	return epoll_ctl(L->ep_fd, EPOLL_CTL_ADD, fd, &ev);
}

int server_watch(struct loader *L)
{
	if (watch(L, L->listen_fd, &it_listen) || watch(L, timer_fd, &it_timer) ||
	    watch(L, readers_fd(), &it_scan) || watch(L, more_fd, &it_more) ||
	    watch(L, stream_fd, &it_stream))
		return -errno;
	return 0;
}

static void listen_pause(struct loader *L, int on)
{
	if (paused == on)
		return;
	paused = on;
	struct epoll_event ev = {.events = on ? 0 : EPOLLIN, .data.ptr = &it_listen};
	epoll_ctl(L->ep_fd, EPOLL_CTL_MOD, L->listen_fd, &ev);
	struct itimerspec ts = {.it_value = {.tv_nsec = on ? PAUSE_MS * 1000000L : 0}};
	timerfd_settime(timer_fd, 0, &ts, NULL);
}

static struct uid_count *uid_slot(uid_t uid, int add)
{
	for (unsigned i = 0; i < nuids; i++)
		if (uids[i].uid == uid)
			return &uids[i];
	if (!add || nuids > lim.others)
		return NULL;
	uids[nuids] = (struct uid_count){uid, 0};
	return &uids[nuids++];
}

/* ---- clients ---- */

static void update(struct loader *L, struct client *c)
{
	struct epoll_event ev = {.events = 0, .data.ptr = c};
	/* input waits while complete lines do (the budget), so a flood stays in
	 * the peer's socket buffer, not in ours */
	if (c->stream ? !c->eof && !c->bad && c->out_len < OUT_MAX_ && c->in_len < STREAM_IN_MAX
		      : !c->pending && !c->eof && !c->bad && c->out_len < OUT_MAX_ &&
			!(c->in_len && memchr(c->in, '\n', c->in_len)))
		ev.events |= EPOLLIN;
	if (c->out_len)
		ev.events |= EPOLLOUT;
	epoll_ctl(L->ep_fd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void drop_client(struct loader *L, struct client *c)
{
	for (struct client **p = &clients; *p; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			break;
		}
	}
	for (struct client **p = &ready; *p; p = &(*p)->next_ready) {
		if (*p == c) {
			*p = c->next_ready;
			break;
		}
	}
	close(c->fd); /* also leaves the epoll set */
	c->fd = -1;
	c->dead = 1;
	if (c->priv) {
		lim.n_priv--;
	} else {
		lim.n_others--;
		struct uid_count *u = uid_slot(c->uid, 0);
		if (u && --u->n == 0)
			*u = uids[--nuids];
	}
	listen_pause(L, 0); /* a descriptor is free again */
	/* later events of this batch may still name it: freed by server_reap() */
	c->next = graveyard;
	graveyard = c;
}

void server_reap(void)
{
	while (graveyard) {
		struct client *c = graveyard;
		graveyard = c->next;
		free(c->in);
		free(c->out);
		free(c->held);
		free(c);
	}
}

/* Says why in one line (the socket buffer of a new connection takes it) and
 * closes. */
static void refuse(int fd, const char *msg)
{
	char *line = json_error_reason(msg, -EUSERS, JSON_R_BUSY);
	if (line) {
		ssize_t w = send(fd, line, strlen(line), MSG_DONTWAIT | MSG_NOSIGNAL);
		(void)w;
		free(line);
	}
	close(fd);
}

static int admit(struct client *c, char *msg, size_t len)
{
	if (c->priv) {
		if (lim.n_priv >= lim.priv) {
			snprintf(msg, len, "too many connections from root and uid %u (%u)",
				 (unsigned)geteuid(), lim.priv);
			return 0;
		}
		lim.n_priv++;
		return 1;
	}
	struct uid_count *u = uid_slot(c->uid, 1);
	if (!u || u->n >= lim.per_uid || lim.n_others >= lim.others) {
		snprintf(msg, len, "too many connections: uid %d has %u (at most %u per uid, %u "
			 "for all uids together)", c->uid == (uid_t)-1 ? -1 : (int)c->uid,
			 u ? u->n : 0, lim.per_uid, lim.others);
		if (u && !u->n)
			*u = uids[--nuids];
		return 0;
	}
	u->n++;
	lim.n_others++;
	return 1;
}

/* An accepted connection: admitted as a client, or refused with why. */
static void take(struct loader *L, int fd)
{
	struct client *c = calloc(1, sizeof *c);
	if (!c) {
		close(fd);
		return;
	}
	c->it.kind = IT_CLIENT;
	c->fd = fd;
	struct ucred cr;
	socklen_t cl = sizeof cr;
	c->uid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 ? cr.uid : (uid_t)-1;
	c->priv = c->uid == 0 || c->uid == geteuid();
	char msg[200];
	if (!admit(c, msg, sizeof msg)) {
		refuse(fd, msg);
		free(c);
		return;
	}
	c->id = next_id++;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
	c->next = clients;
	clients = c;
	if (epoll_ctl(L->ep_fd, EPOLL_CTL_ADD, fd, &ev) != 0)
		drop_client(L, c);
}

/* Out of descriptors: the reserve one lets us take the connection and say
 * so, which empties the backlog (a readable listener whose accept fails would
 * spin the loop); without it, or when giving it up did not help (ENFILE, the
 * whole system out; ENOMEM), accept pauses until a descriptor is freed or
 * PAUSE_MS passed. If the reserve can be taken back while the connection is
 * still open, the shortage is over (a descriptor was freed meanwhile) and the
 * connection is served, not refused. */
static void out_of_fds(struct loader *L, int err)
{
	log_warn("control socket: accept: %s (RLIMIT_NOFILE %u)", strerror(err), lim.rlimit);
	int stuck = 1;
	if (spare_fd >= 0) {
		close(spare_fd);
		int fd = accept4(L->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int e = errno;
		spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && spare_fd >= 0) {
			take(L, fd);
		} else if (fd >= 0) {
			refuse(fd, "the loader is out of file descriptors; try again later");
			spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		}
		/* taken, or the backlog is empty: nothing left to spin on */
		stuck = fd < 0 && e != EAGAIN && e != EWOULDBLOCK;
	}
	if (stuck || spare_fd < 0)
		listen_pause(L, 1);
}

static void accept_some(struct loader *L)
{
	/* a reserve lost in out_of_fds() (its re-open failed: another thread
	 * took the slot, or the shortage went on) is taken back before the next
	 * accept, once a descriptor is free, so the next shortage is answered */
	if (spare_fd < 0)
		spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		int fd = accept4(L->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			int e = errno;
			if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM)
				out_of_fds(L, e);
			if (e != ECONNABORTED && e != EINTR && e != EPROTO)
				return;
			continue;
		}
		take(L, fd);
	}
}

static void emit(struct client *c, char *line)
{
	if (!line)
		line = json_error_code("out of memory", -ENOMEM);
	if (!line)
		return;
	size_t n = strlen(line);
	if (c->out_len + n > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 1024;
		while (cap < c->out_len + n)
			cap *= 2;
		char *o = realloc(c->out, cap);
		if (!o) {
			free(line);
			c->bad = 1;
			return;
		}
		c->out = o;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, line, n);
	c->out_len += n;
	free(line);
}

static void bad_request(struct client *c, const char *msg, int err)
{
	emit(c, json_error_reason(msg, err, JSON_R_BAD_REQUEST));
}

/* ---- the verbs ---- */

enum { WAIT_JOB = 1, WAIT_SCAN };

/* How a verb of reqline.h's REQ_VERBS runs; its words are checked there. */
struct verb {
	/* emits the reply and returns 0, or returns WAIT_JOB (the worker
	 * replies) or WAIT_SCAN (run again once a reader scan ended, with
	 * retry set) */
	int (*fn)(struct loader *L, struct client *c, const struct verb *v, char **w, int retry);
	enum job_kind job; /* the worker's job, for v_job */
};

static int v_ping(struct loader *L, struct client *c, const struct verb *v, char **w, int retry)
{
	(void)v, (void)w, (void)retry;
	struct json j;
	json_init(&j);
	json_bool(&j, "ok", 1);
	json_u64(&j, "pid", (uint64_t)L->pid);
	json_str(&j, "version", LOADER_VERSION);
	json_str(&j, "root", L->root);
	json_str(&j, "spool", L->spool);
	/* health: null, or why the spool is not watched (spool.c) */
	json_str(&j, "spool_error", L->spool_error[0] ? L->spool_error : NULL);
	emit(c, json_finish(&j));
	return 0;
}

static int v_help(struct loader *L, struct client *c, const struct verb *v, char **w, int retry);

static int v_list(struct loader *L, struct client *c, const struct verb *v, char **w, int retry)
{
	(void)v, (void)w, (void)retry;
	emit(c, status_list(L));
	return 0;
}

static int v_status(struct loader *L, struct client *c, const struct verb *v, char **w, int retry)
{
	(void)v;
	char *reply;
	if (status_cache(L, w[1], retry, &reply) == -EAGAIN)
		return WAIT_SCAN;
	emit(c, reply);
	return 0;
}

static int v_metrics(struct loader *L, struct client *c, const struct verb *v, char **w,
		     int retry)
{
	(void)v, (void)w, (void)retry;
	char *reply;
	if (metrics_reply(L, &reply) == -EAGAIN)
		return WAIT_SCAN;
	emit(c, reply);
	return 0;
}

static int v_bpf_status(struct loader *L, struct client *c, const struct verb *v, char **w,
			int retry)
{
	(void)v, (void)retry;
	emit(c, bpf_status(L, w[1]));
	return 0;
}

static int v_job(struct loader *L, struct client *c, const struct verb *v, char **w, int retry)
{
	(void)retry;
	if (shmkv_name_check(w[1]) != 0) {
		char msg[200];
		snprintf(msg, sizeof msg, "invalid cache name \"%.64s\" (%s)", w[1],
			 SHMKV_CACHE_NAME_RULE);
		bad_request(c, msg, -EINVAL);
		return 0;
	}
	struct job *j = job_new(v->job, w[1]);
	if (!j) {
		emit(c, NULL);
		return 0;
	}
	const char *too_long = NULL;
	/* load: the image file and the NUMA policy of this load (checked by the
	 * worker: load.c); bpf_export: the prefix and max_value */
	if (w[2] && (size_t)snprintf(j->path, sizeof j->path, "%s", w[2]) >= sizeof j->path)
		too_long = v->job == JOB_BPF_EXPORT ? "bpf_export: prefix too long" : "path too long";
	if (w[3] && v->job == JOB_LOAD &&
	    (size_t)snprintf(j->numa, sizeof j->numa, "%s", w[3]) >= sizeof j->numa)
		too_long = "numa policy too long";
	if (w[3] && v->job == JOB_BPF_EXPORT &&
	    (size_t)snprintf(j->arg, sizeof j->arg, "%s", w[3]) >= sizeof j->arg)
		too_long = "bpf_export: max_value too long";
	if (too_long) {
		free(j);
		bad_request(c, too_long, v->job == JOB_LOAD && w[2] && strlen(w[2]) >= sizeof j->path
						 ? -ENAMETOOLONG : -EINVAL);
		return 0;
	}
	j->client = c->id;
	worker_push(L, j);
	return WAIT_JOB;
}

/* change NAME JSONL: the record travels with the job (a line may be longer
 * than a job's path). */
static int v_change(struct loader *L, struct client *c, const struct verb *v, char **w, int retry)
{
	(void)retry;
	if (shmkv_name_check(w[1]) != 0) {
		char msg[200];
		snprintf(msg, sizeof msg, "invalid cache name \"%.64s\" (%s)", w[1],
			 SHMKV_CACHE_NAME_RULE);
		bad_request(c, msg, -EINVAL);
		return 0;
	}
	struct job *j = job_new(v->job, w[1]);
	if (!j || !(j->change = strdup(w[2]))) {
		free(j);
		emit(c, NULL);
		return 0;
	}
	j->change_len = strlen(j->change);
	j->lines = j->first_line = 1;
	j->client = c->id;
	worker_push(L, j);
	return WAIT_JOB;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The worker swaps L->conf under L->lock (ops.c:op_config) and frees the old */
static uint64_t stream_interval(struct loader *L)
{
	pthread_mutex_lock(&L->lock);
	uint64_t ms = L->conf->stream_interval_ms;
	pthread_mutex_unlock(&L->lock);
	return ms;
}

/* stream NAME: the connection becomes a stream of changes (loader/README.md,
 * "Streams"); the reply says so, then one acknowledgement per batch. */
static int v_stream(struct loader *L, struct client *c, const struct verb *v, char **w,
		    int retry)
{
	(void)v, (void)retry;
	if (shmkv_name_check(w[1]) != 0) {
		char msg[200];
		snprintf(msg, sizeof msg, "invalid cache name \"%.64s\" (%s)", w[1],
			 SHMKV_CACHE_NAME_RULE);
		bad_request(c, msg, -EINVAL);
		return 0;
	}
	c->stream = 1;
	snprintf(c->stream_name, sizeof c->stream_name, "%s", w[1]);
	struct json j;
	json_init(&j);
	json_bool(&j, "ok", 1);
	json_str(&j, "cache", w[1]);
	json_bool(&j, "stream", 1);
	json_u64(&j, "interval_ms", stream_interval(L));
	json_u64(&j, "line_max", REQ_STREAM_LINE_MAX);
	emit(c, json_finish(&j));
	return 0;
}

static void settle(struct loader *L, struct client *c);


static void stream_arm(uint64_t due)
{
	if (stream_due && stream_due <= due)
		return;
	stream_due = due;
	uint64_t now = now_ms(), in = due > now ? due - now : 1;
	struct itimerspec ts = {.it_value = {.tv_sec = (time_t)(in / 1000u),
					     .tv_nsec = (long)(in % 1000u) * 1000000L}};
	timerfd_settime(stream_fd, 0, &ts, NULL);
}

/* A stream's buffered lines become the worker's next batch: when none is
 * being published, at most one batch per stream_interval (or at once at the
 * peer's EOF). Whole lines only; at EOF an unterminated last line counts. */
static void stream_pump(struct loader *L, struct client *c)
{
	if (c->pending || c->bad || !c->in_len)
		return;
	/* every line, the partial last one too, within the longest line: the
	 * bytes not scanned yet */
	uint64_t bad_line;
	if (req_stream_scan(&c->stream_in, c->in, c->in_len, REQ_STREAM_LINE_MAX, &bad_line)) {
		char msg[300];
		snprintf(msg, sizeof msg, "stream line %llu is longer than %u bytes: lines from it "
			 "on were not published (lines before them were), and the stream ends; "
			 "larger values go in a delta image applied with 'shmctl cache apply'",
			 (unsigned long long)(c->stream_lines + bad_line), REQ_STREAM_LINE_MAX);
		bad_request(c, msg, -E2BIG);
		c->bad = 1;
		return;
	}
	size_t len = req_stream_batch(&c->stream_in, c->in_len, c->eof);
	if (!len)
		return;
	uint64_t now = now_ms(), next = c->stream_sent + stream_interval(L);
	if (!c->eof && c->stream_sent && now < next) {
		stream_arm(next);
		return;
	}
	struct job *j = job_new(JOB_CHANGE, c->stream_name);
	if (!j || !(j->change = malloc(len + 1))) {
		free(j);
		emit(c, NULL);
		c->bad = 1;
		return;
	}
	memcpy(j->change, c->in, len);
	j->change[len] = 0;
	j->change_len = len;
	j->lines = req_stream_lines(c->in, len);
	j->first_line = c->stream_lines + 1;
	j->stream = 1;
	j->client = c->id;
	memmove(c->in, c->in + len, c->in_len - len);
	c->in_len -= len;
	req_stream_consumed(&c->stream_in, len);
	c->stream_lines += j->lines;
	c->stream_sent = now;
	c->pending = 1;
	worker_push(L, j);
}

/* stream_fd fired: every stream whose interval has passed. */
static void stream_tick(struct loader *L)
{
	uint64_t n;
	ssize_t r = read(stream_fd, &n, sizeof n);
	(void)r;
	stream_due = 0;
	for (struct client *c = clients, *nx; c; c = nx) {
		nx = c->next;
		if (c->stream && !c->dead) {
			stream_pump(L, c);
			settle(L, c);
		}
	}
}

/* How each verb of the one list (reqline.h: REQ_VERBS) runs, in its order. */
#define X(n, a, lo, hi, wh, fn, job, h) {fn, job},
static const struct verb verbs[] = {REQ_VERBS(X)};
#undef X

static int v_help(struct loader *L, struct client *c, const struct verb *v, char **w, int retry)
{
	(void)L, (void)v, (void)w, (void)retry;
	struct json j;
	json_init(&j);
	json_bool(&j, "ok", 1);
	json_arr_begin(&j, "verbs");
	for (size_t i = 0; i < req_nverbs; i++) {
		json_obj_begin(&j, NULL);
		json_str(&j, "verb", req_verbs[i].name);
		json_str(&j, "args", req_verbs[i].args);
		json_str(&j, "who", req_verbs[i].who == REQ_ANY ? "anyone who can connect"
								: "root and the loader's uid");
		json_str(&j, "help", req_verbs[i].help);
		json_obj_end(&j);
	}
	json_arr_end(&j);
	emit(c, json_finish(&j));
	return 0;
}

/* Handles one request line line[0..len) (line[len] is 0); returns 0 or
 * what the client now waits for. */
static int request(struct loader *L, struct client *c, char *line, size_t len, int retry)
{
	struct req r;
	char msg[400];
	int err = req_parse(line, len, c->priv, (unsigned)geteuid(),
			    c->uid == (uid_t)-1 ? -1 : (long)c->uid, &r, msg, sizeof msg);
	if (err) {
		emit(c, json_error_reason(msg, err, err == -EPERM ? JSON_R_NOT_PERMITTED
								  : JSON_R_BAD_REQUEST));
		return 0;
	}
	const struct verb *v = &verbs[r.verb - req_verbs];
	return v->fn(L, c, v, r.w, retry);
}

/* Runs up to budget complete lines, until one waits for the worker or a scan. */
static void process(struct loader *L, struct client *c, int budget)
{
	while (!c->pending && !c->bad && c->in_len && c->out_len < OUT_MAX_) {
		if (c->stream) {
			stream_pump(L, c);
			return;
		}
		size_t len, used;
		int got = reqline_next(c->in, c->in_len, c->eof, &len, &used);
		if (got == -E2BIG) {
			bad_request(c, "request line too long", -E2BIG);
			c->bad = 1;
			return;
		}
		if (!got)
			return;
		if (budget-- == 0)
			return; /* more next turn: server_event(IT_MORE) */
		char line[REQ_LINE_MAX + 1];
		memcpy(line, c->in, len);
		line[len] = 0;
		memmove(c->in, c->in + used, c->in_len - used);
		c->in_len -= used;
		if (!len)
			continue; /* a blank line; one that starts with a NUL is refused */
		/* kept whole: request() cuts its words in place */
		char copy[REQ_LINE_MAX + 1];
		memcpy(copy, line, len + 1);
		int wait = request(L, c, line, len, 0);
		if (wait == WAIT_SCAN && !(c->held = strdup(copy))) {
			emit(c, NULL);
			wait = 0;
		}
		c->pending = wait != 0;
	}
}

static int has_work(const struct client *c)
{
	return !c->stream && !c->pending && !c->bad && c->out_len < OUT_MAX_ && c->in_len &&
	       memchr(c->in, '\n', c->in_len);
}

static void enqueue(struct client *c)
{
	if (c->queued)
		return;
	c->queued = 1;
	c->next_ready = ready;
	ready = c;
	uint64_t one = 1;
	ssize_t w = write(more_fd, &one, sizeof one); /* the loop comes back at once */
	(void)w;
}

static int flush(struct client *c)
{
	while (c->out_len) {
		ssize_t n = write(c->fd, c->out, c->out_len);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		memmove(c->out, c->out + n, c->out_len - (size_t)n);
		c->out_len -= (size_t)n;
	}
	return 0;
}

static int budget(const struct client *c)
{
	return c->priv ? SERVER_BUDGET_PRIV : SERVER_BUDGET;
}

/* After any change: write what can be written, close when finished. */
static void settle(struct loader *L, struct client *c)
{
	if (flush(c) != 0) {
		drop_client(L, c);
		return;
	}
	if (!c->out_len && !c->pending && (c->bad || (c->eof && !c->in_len))) {
		drop_client(L, c);
		return;
	}
	/* an unterminated last line at EOF counts (process()) */
	if (has_work(c) || (c->eof && c->in_len && !c->pending && !c->bad && c->out_len < OUT_MAX_))
		enqueue(c);
	update(L, c);
}

static void client_event(struct loader *L, struct client *c, uint32_t events)
{
	if ((events & (EPOLLHUP | EPOLLERR)) && c->pending) {
		/* level-triggered HUP would spin until the reply: wait without it */
		epoll_ctl(L->ep_fd, EPOLL_CTL_DEL, c->fd, NULL);
		c->gone = 1;
		return;
	}
	if ((events & EPOLLIN) && (c->stream || !has_work(c))) {
		for (;;) {
			if (c->in_cap - c->in_len < 4096) {
				size_t cap = c->in_cap ? c->in_cap * 2 : 8192;
				char *b = realloc(c->in, cap);
				if (!b) {
					drop_client(L, c);
					return;
				}
				c->in = b;
				c->in_cap = cap;
			}
			ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
			if (n > 0) {
				c->in_len += (size_t)n;
				if (c->in_len > (c->stream ? STREAM_IN_MAX : 4 * REQ_LINE_MAX))
					break; /* process some first */
				continue;
			}
			if (n == 0)
				c->eof = 1;
			else if (errno != EAGAIN && errno != EINTR) {
				drop_client(L, c);
				return;
			}
			break;
		}
		if (!c->queued)
			process(L, c, budget(c));
	} else if (events & (EPOLLHUP | EPOLLERR)) {
		c->eof = 1;
	}
	settle(L, c);
}

/* One more budget for every client with lines left: root's and ours first. */
static void run_ready(struct loader *L)
{
	uint64_t n;
	ssize_t r = read(more_fd, &n, sizeof n);
	(void)r;
	struct client *list = ready;
	ready = NULL;
	for (int pass = 1; pass >= 0; pass--) {
		for (struct client *c = list; c; c = c->next_ready) {
			if (c->priv != pass || c->dead)
				continue;
			c->queued = 0;
			process(L, c, budget(c));
		}
	}
	for (struct client *c = list, *nx; c; c = nx) {
		nx = c->next_ready;
		if (!c->dead)
			settle(L, c);
	}
}

/* A reader scan ended: the requests that waited for it run again. */
static void scan_done(struct loader *L)
{
	if (!readers_collect())
		return;
	for (struct client *c = clients, *nx; c; c = nx) {
		nx = c->next;
		if (!c->held)
			continue;
		char line[REQ_LINE_MAX + 1];
		snprintf(line, sizeof line, "%s", c->held);
		c->pending = 0;
		if (request(L, c, line, strlen(line), 1)) {
			c->pending = 1; /* not fresh yet: the next scan */
			continue;
		}
		free(c->held);
		c->held = NULL;
		if (c->gone) {
			drop_client(L, c);
			continue;
		}
		process(L, c, budget(c));
		settle(L, c);
	}
}

void server_event(struct loader *L, void *ptr, uint32_t events)
{
	struct item *it = ptr;
	switch (it->kind) {
	case IT_LISTEN:
		accept_some(L);
		break;
	case IT_TIMER: {
		uint64_t n;
		ssize_t r = read(timer_fd, &n, sizeof n);
		(void)r;
		listen_pause(L, 0);
		break;
	}
	case IT_SCAN:
		scan_done(L);
		break;
	case IT_MORE:
		run_ready(L);
		break;
	case IT_STREAM:
		stream_tick(L);
		break;
	case IT_CLIENT:
		if (!((struct client *)it)->dead)
			client_event(L, (struct client *)it, events);
		break;
	}
}

void server_deliver(struct loader *L, struct done *d)
{
	struct client *c = clients;
	while (c && c->id != d->client)
		c = c->next;
	if (!c) {
		free(d->line); /* the client went away */
		return;
	}
	if (c->gone) {
		free(d->line);
		drop_client(L, c);
		return;
	}
	/* a stream's failed batch ends it: the lines after it are not taken */
	if (c->stream && d->failed)
		c->bad = 1;
	emit(c, d->line);
	c->pending = 0;
	process(L, c, budget(c));
	settle(L, c);
}

void server_close(struct loader *L)
{
	while (clients) {
		struct client *c = clients;
		if (c->pending)
			emit(c, json_error_reason("the loader is stopping", -ECANCELED,
						  JSON_R_STOPPING));
		c->pending = 0;
		flush(c);
		drop_client(L, c);
	}
	server_reap();
	readers_stop();
	if (L->listen_fd >= 0) {
		int dirfd = open(L->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dirfd >= 0) {
			unlinkat(dirfd, SOCK_NAME, 0);
			close(dirfd);
		}
		close(L->listen_fd);
		L->listen_fd = -1;
	}
	for (int *fd = (int[]){spare_fd, timer_fd, more_fd, stream_fd}, i = 0; i < 4; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	spare_fd = timer_fd = more_fd = stream_fd = -1;
	free(uids);
	uids = NULL;
}
