/* ctlsock.c - the control socket client. See ctlsock.h. */
#include "ctlsock.h"

#include "ctlconnect.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CTL_REPLY_MAX (16u << 20) /* a list of many caches stays far below */

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int ctl_request(const char *root, const char *const *words, size_t n, int timeout_ms, jv **reply,
		char *why, size_t why_len)
{
	return ctl_request_tick(root, words, n, timeout_ms, reply, why, why_len, 0, NULL, NULL);
}

/* The request line of words[0..n) (tab-separated, newline-ended) into
 * *req (malloc'd), its length into *len; words must not hold the
 * separators. */
static int request_line(const char *const *words, size_t n, char **req, size_t *len, char *why,
			size_t why_len)
{
	size_t size = 1;
	for (size_t i = 0; i < n; i++) {
		if (strpbrk(words[i], "\t\n")) {
			snprintf(why, why_len,
				 "'%s' contains a tab or newline, which the control protocol cannot "
				 "carry", words[i]);
			return CTL_EFAIL;
		}
		size += strlen(words[i]) + 1;
	}
	char *r = malloc(size);
	if (!r) {
		snprintf(why, why_len, "out of memory");
		return CTL_EFAIL;
	}
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(words[i]);
		memcpy(r + o, words[i], l);
		o += l;
		r[o++] = i + 1 < n ? '\t' : '\n';
	}
	*req = r;
	*len = o;
	return 0;
}

/* One line of reply from fd (socket sock) into *buf (malloc'd, the caller
 * frees it even on failure), its length without the newline into *have;
 * tick(ctx) every tick_ms while none comes, until timeout_ms (< 0: none). */
static int reply_line(int fd, const char *sock, int timeout_ms, int tick_ms,
		      void (*tick)(void *ctx), void *ctx, char **buf, size_t *have, char *why,
		      size_t why_len)
{
	size_t cap = 0;
	long long deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : 0;
	for (;;) {
		if (*have + 4096 > cap) {
			if (cap >= CTL_REPLY_MAX) {
				snprintf(why, why_len, "%s: reply longer than %u bytes", sock,
					 CTL_REPLY_MAX);
				return CTL_EFAIL;
			}
			cap = cap ? cap * 2 : 8192;
			char *b = realloc(*buf, cap);
			if (!b) {
				snprintf(why, why_len, "out of memory");
				return CTL_EFAIL;
			}
			*buf = b;
		}
		int wait = -1;
		if (timeout_ms >= 0) {
			long long left = deadline - now_ms();
			if (left <= 0) {
				snprintf(why, why_len,
					 "%s: no reply within %d s (is shmkv-loader stuck?)", sock,
					 timeout_ms / 1000);
				return CTL_EFAIL;
			}
			wait = (int)left;
		}
		if (tick && (wait < 0 || wait > tick_ms))
			wait = tick_ms;
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int pr = poll(&pfd, 1, wait);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0) {
			snprintf(why, why_len, "%s: poll: %s", sock, strerror(errno));
			return CTL_EFAIL;
		}
		if (pr == 0) {
			if (tick)
				tick(ctx);
			continue; /* the deadline check above reports a timeout */
		}
		ssize_t r = recv(fd, *buf + *have, cap - *have - 1, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(why, why_len, "%s: reading the reply: %s", sock, strerror(errno));
			return CTL_EFAIL;
		}
		if (r == 0) {
			snprintf(why, why_len, "%s: the loader closed the connection without %s", sock,
				 *have ? "ending its reply" : "a reply");
			return CTL_EFAIL;
		}
		char *nl = memchr(*buf + *have, '\n', (size_t)r);
		*have += (size_t)r;
		if (nl) {
			*have = (size_t)(nl - *buf);
			return 0;
		}
	}
}

int ctl_reply_parse(const char *sock, const char *buf, size_t have, jv **reply, char *why,
		       size_t why_len)
{
	char perr[256];
	if (!(*reply = jv_parse(buf, have, perr, sizeof perr))) {
		snprintf(why, why_len, "%s: the reply is not JSON (%s): protocol mismatch", sock, perr);
		return CTL_EFAIL;
	}
	if (jv_type(*reply) != JV_OBJ || jv_type(jv_get(*reply, "ok")) != JV_BOOL) {
		jv_free(*reply);
		*reply = NULL;
		snprintf(why, why_len, "%s: the reply is not an object with \"ok\": protocol mismatch",
			 sock);
		return CTL_EFAIL;
	}
	return 0;
}

int ctl_dial(const char *root, char *why, size_t why_len)
{
	int fd = ctl_connect(root, 0);
	if (fd >= 0)
		return fd;
	snprintf(why, why_len, "cannot connect to %s/%s: %s%s", root, CTL_SOCK_NAME, strerror(-fd),
		 fd == -EACCES || fd == -EPERM
			 ? " (not allowed: run as root or as a member of the loader's group)"
			 : CTL_CONNECT_HINT);
	return fd == -ENOENT || fd == -ECONNREFUSED || fd == -ENOTDIR ? CTL_ECONNECT : CTL_EFAIL;
}

int ctl_request_tick(const char *root, const char *const *words, size_t n, int timeout_ms,
		     jv **reply, char *why, size_t why_len, int tick_ms, void (*tick)(void *ctx),
		     void *ctx)
{
	char sock[4200];
	snprintf(sock, sizeof sock, "%s/%s", root, CTL_SOCK_NAME);
	*reply = NULL;

	char *req;
	size_t len;
	int rc = request_line(words, n, &req, &len, why, why_len);
	if (rc)
		return rc;
	int fd = ctl_dial(root, why, why_len);
	if (fd < 0) {
		free(req);
		return fd;
	}
	int err = send_all(fd, req, len);
	free(req);
	if (err) {
		close(fd);
		snprintf(why, why_len, "%s: sending the request: %s", sock, strerror(-err));
		return CTL_EFAIL;
	}

	/* one line back */
	char *buf = NULL;
	size_t have = 0;
	rc = reply_line(fd, sock, timeout_ms, tick_ms, tick, ctx, &buf, &have, why, why_len);
	if (!rc)
		rc = ctl_reply_parse(sock, buf, have, reply, why, why_len);
	free(buf);
	close(fd);
	return rc;
}
