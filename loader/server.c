/* server.c - the control socket ROOT/control.sock (protocol: README.md).
 * Main thread only. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "server.h"

#include "bpf.h"
#include "diag.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "status.h"
#include "worker.h"

#define LINE_MAX_ 8192       /* longest request line */
#define MAX_WORDS 4
#define OUT_MAX_ (1u << 20) /* replies held for a peer that does not read them:
			     * beyond this, its requests wait (no EPOLLIN) */

struct client {
	uint64_t id;
	int fd;
	char *in;
	size_t in_len, in_cap;
	char *out;
	size_t out_len, out_cap;
	int pending; /* a job's reply is awaited: later lines wait */
	int eof;     /* the peer closed its side */
	int bad;     /* close once the output is flushed */
	int gone;    /* hung up while a job runs: out of the epoll set */
	int dead;    /* closed; freed by server_reap() after the event batch */
	uid_t uid;   /* the peer's (SO_PEERCRED at accept); (uid_t)-1 unknown */
	struct client *next;
};

static struct client *clients, *graveyard;
static uint64_t next_id = 1;

#define SOCK_NAME "control.sock"

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
	if (listen(L->listen_fd, 64) != 0)
		err = diag_fail(-errno, why, why_len, "listen: %s", strerror(errno));
out:
	close(dirfd);
	return err;
}

static void update(struct loader *L, struct client *c)
{
	struct epoll_event ev = {.events = 0, .data.ptr = c};
	if (!c->pending && !c->eof && !c->bad && c->out_len < OUT_MAX_)
		ev.events |= EPOLLIN;
	if (c->out_len)
		ev.events |= EPOLLOUT;
	epoll_ctl(L->ep_fd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void drop_client(struct client *c)
{
	for (struct client **p = &clients; *p; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			break;
		}
	}
	close(c->fd); /* also leaves the epoll set */
	c->fd = -1;
	c->dead = 1;
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
		free(c);
	}
}

void server_accept(struct loader *L)
{
	for (;;) {
		int fd = accept4(L->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct client *c = calloc(1, sizeof *c);
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->id = next_id++;
		struct ucred cr;
		socklen_t cl = sizeof cr;
		c->uid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 ? cr.uid : (uid_t)-1;
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
		if (epoll_ctl(L->ep_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
			close(fd);
			free(c);
			continue;
		}
		c->next = clients;
		clients = c;
	}
}

static void emit(struct client *c, char *line)
{
	if (!line)
		line = json_error("out of memory");
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

static char *usage(const char *u)
{
	char msg[128];
	snprintf(msg, sizeof msg, "usage: %s (words separated by TAB)", u);
	return json_error_code(msg, -EINVAL);
}

/* Handles one request line; async verbs hand a job to the worker. */
static void request(struct loader *L, struct client *c, char *line)
{
	char *w[MAX_WORDS + 1] = {0};
	int n = 0;
	for (char *p = line;;) {
		if (n == MAX_WORDS + 1) {
			emit(c, json_error_code("too many words", -EINVAL));
			return;
		}
		w[n++] = p;
		char *t = strchr(p, '\t');
		if (!t)
			break;
		*t = 0;
		p = t + 1;
	}
	const char *v = w[0];
	if (!strcmp(v, "ping")) {
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
		return;
	}
	if (!strcmp(v, "list")) {
		emit(c, n == 1 ? status_list(L) : usage("list"));
		return;
	}
	if (!strcmp(v, "status")) {
		emit(c, n == 2 ? status_cache(L, w[1]) : usage("status NAME"));
		return;
	}
	if (!strcmp(v, "metrics")) {
		emit(c, n == 1 ? metrics_reply(L) : usage("metrics"));
		return;
	}
	if (!strcmp(v, "bpf_status")) {
		emit(c, n <= 2 ? bpf_status(L, n == 2 ? w[1] : NULL) : usage("bpf_status [NAME]"));
		return;
	}
	enum job_kind kind;
	int want;
	const char *u;
	if (!strcmp(v, "load"))
		kind = JOB_LOAD, want = n == 4 ? 4 : 3, u = "load NAME PATH [NUMA]";
	else if (!strcmp(v, "reload"))
		kind = JOB_RELOAD, want = 2, u = "reload NAME";
	else if (!strcmp(v, "rollback"))
		kind = JOB_ROLLBACK, want = 2, u = "rollback NAME";
	else if (!strcmp(v, "drop"))
		kind = JOB_DROP, want = 2, u = "drop NAME";
	else if (!strcmp(v, "bpf_export"))
		kind = JOB_BPF_EXPORT, want = 4, u = "bpf_export NAME PREFIX MAX_VALUE";
	else if (!strcmp(v, "bpf_unexport"))
		kind = JOB_BPF_UNEXPORT, want = 2, u = "bpf_unexport NAME";
	else {
		char msg[200];
		snprintf(msg, sizeof msg, "unknown verb \"%.64s\" (list, status, metrics, load, "
			 "reload, rollback, drop, ping, bpf_export, bpf_unexport, bpf_status)", v);
		emit(c, json_error_code(msg, -EINVAL));
		return;
	}
	if (n != want) {
		emit(c, usage(u));
		return;
	}
	/* the socket may be group-accessible (0660) for status; what changes a
	 * cache, or reads a file as the loader, is for root and our own uid */
	if (c->uid != 0 && c->uid != geteuid()) {
		char msg[200];
		snprintf(msg, sizeof msg, "%.16s is for root and the loader's user (uid %u); uid %d "
			 "may only ping, list, status, metrics and bpf_status", v, (unsigned)geteuid(),
			 c->uid == (uid_t)-1 ? -1 : (int)c->uid);
		emit(c, json_error_code(msg, -EPERM));
		return;
	}
	if (!(shmkv_name_check(w[1]) == 0)) {
		char msg[200];
		snprintf(msg, sizeof msg, "invalid cache name \"%.64s\" (" SHMKV_CACHE_NAME_RULE ")",
			 w[1]);
		emit(c, json_error_code(msg, -EINVAL));
		return;
	}
	struct job *j = job_new(kind, w[1]);
	if (!j) {
		emit(c, json_error("out of memory"));
		return;
	}
	if (kind == JOB_LOAD &&
	    (size_t)snprintf(j->path, sizeof j->path, "%s", w[2]) >= sizeof j->path) {
		free(j);
		emit(c, json_error_code("path too long", -ENAMETOOLONG));
		return;
	}
	if (kind == JOB_BPF_EXPORT &&
	    ((size_t)snprintf(j->path, sizeof j->path, "%s", w[2]) >= sizeof j->path ||
	     (size_t)snprintf(j->arg, sizeof j->arg, "%s", w[3]) >= sizeof j->arg)) {
		free(j);
		emit(c, json_error_code("bpf_export: prefix or max_value too long", -EINVAL));
		return;
	}
	/* the NUMA policy of this load (checked by the worker: load.c) */
	if (kind == JOB_LOAD && n == 4 &&
	    (size_t)snprintf(j->numa, sizeof j->numa, "%s", w[3]) >= sizeof j->numa) {
		free(j);
		emit(c, json_error_code("numa policy too long", -EINVAL));
		return;
	}
	j->client = c->id;
	c->pending = 1;
	worker_push(L, j);
}

/* Runs the complete lines in the input buffer, until one waits for a job. */
static void process(struct loader *L, struct client *c)
{
	while (!c->pending && !c->bad && c->in_len && c->out_len < OUT_MAX_) {
		char *nl = memchr(c->in, '\n', c->in_len);
		if (!nl && !c->eof)
			break;
		size_t len = nl ? (size_t)(nl - c->in) : c->in_len;
		char line[LINE_MAX_ + 1];
		if (len > LINE_MAX_) {
			emit(c, json_error_code("request line too long", -E2BIG));
			c->bad = 1;
			break;
		}
		memcpy(line, c->in, len);
		line[len] = 0;
		if (len && line[len - 1] == '\r')
			line[len - 1] = 0;
		size_t used = nl ? len + 1 : len;
		memmove(c->in, c->in + used, c->in_len - used);
		c->in_len -= used;
		if (line[0])
			request(L, c, line);
	}
	if (!c->pending && c->out_len < OUT_MAX_ && c->in_len > LINE_MAX_ &&
	    !memchr(c->in, '\n', c->in_len)) {
		emit(c, json_error_code("request line too long", -E2BIG));
		c->bad = 1;
	}
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

/* After any change: write what can be written, close when finished. */
static void settle(struct loader *L, struct client *c)
{
	if (flush(c) != 0) {
		drop_client(c);
		return;
	}
	/* requests held back while the peer was not reading its replies */
	if (c->in_len && !c->pending && !c->bad && c->out_len < OUT_MAX_) {
		process(L, c);
		if (flush(c) != 0) {
			drop_client(c);
			return;
		}
	}
	if (!c->out_len && !c->pending && (c->bad || (c->eof && !c->in_len))) {
		drop_client(c);
		return;
	}
	update(L, c);
}

void server_client_event(struct loader *L, void *ptr, uint32_t events)
{
	struct client *c = ptr;
	if (c->dead)
		return;
	if ((events & (EPOLLHUP | EPOLLERR)) && c->pending) {
		/* level-triggered HUP would spin until the reply: wait without it */
		epoll_ctl(L->ep_fd, EPOLL_CTL_DEL, c->fd, NULL);
		c->gone = 1;
		return;
	}
	if (events & EPOLLIN) {
		for (;;) {
			if (c->in_cap - c->in_len < 4096) {
				size_t cap = c->in_cap ? c->in_cap * 2 : 8192;
				char *b = realloc(c->in, cap);
				if (!b) {
					drop_client(c);
					return;
				}
				c->in = b;
				c->in_cap = cap;
			}
			ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
			if (n > 0) {
				c->in_len += (size_t)n;
				if (c->in_len > 4 * LINE_MAX_)
					break; /* process some first */
				continue;
			}
			if (n == 0)
				c->eof = 1;
			else if (errno != EAGAIN && errno != EINTR) {
				drop_client(c);
				return;
			}
			break;
		}
		process(L, c);
	} else if (events & (EPOLLHUP | EPOLLERR)) {
		c->eof = 1;
	}
	settle(L, c);
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
		drop_client(c);
		return;
	}
	emit(c, d->line);
	c->pending = 0;
	process(L, c);
	settle(L, c);
}

void server_close(struct loader *L)
{
	while (clients) {
		struct client *c = clients;
		if (c->pending)
			emit(c, json_error_code("the loader is stopping", -ECANCELED));
		c->pending = 0;
		flush(c);
		drop_client(c);
	}
	server_reap();
	if (L->listen_fd >= 0) {
		int dirfd = open(L->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dirfd >= 0) {
			unlinkat(dirfd, SOCK_NAME, 0);
			close(dirfd);
		}
		close(L->listen_fd);
		L->listen_fd = -1;
	}
}
