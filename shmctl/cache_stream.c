/* cache_stream.c - shmctl cache apply NAME -: JSONL changes from standard
 * input for as long as it runs, published by the loader in batches; one
 * acknowledgement line per published batch on standard output
 * (loader/README.md, "Streams"); with -j each is the loader's JSON object,
 * one per line. A consumer commits its offset once the
 * acknowledgement of a line came: at least once, and replaying is harmless. */
#include <errno.h>
#include <stdint.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cache.h"
#include "ctlsock.h"
#include "json.h"
#include "main.h"

#define OUT_CAP (1u << 20)   /* stdin read ahead of the socket */
#define IN_MAX (16u << 20)   /* one reply line, at most */

struct stream {
	const char *sock;
	int fd;
	char *out;            /* read from stdin, not yet sent */
	size_t out_len;
	char *in;             /* replies, up to a line */
	size_t in_len, in_cap;
	unsigned long long lines;  /* lines read from stdin (a partial last one counts at EOF) */
	unsigned long long acked;  /* the last line acknowledged */
	int stdin_eof, shut, peer_gone, last_partial;
};

static unsigned long long ull(const jv *o, const char *k)
{
	uint64_t v = 0;
	jv_get_u64(o, k, &v);
	return (unsigned long long)v;
}

/* One reply line: an acknowledgement (printed), or the error that ends the
 * stream (reported; its exit code returned). -1: go on. */
static int reply(struct stream *s, const char *line, size_t len)
{
	char why[600];
	jv *r = NULL;
	if (ctl_reply_parse(s->sock, line, len, &r, why, sizeof why))
		return p_err("%s", why);
	bool ok = false;
	jv_get_bool(r, "ok", &ok);
	if (!ok) {
		int rc = reply_error(r);
		jv_free(r);
		return rc;
	}
	s->acked = ull(r, "last_line");
	if (json_output) /* JSON lines, as the loader sent them */
		printf("%.*s\n", (int)len, line);
	else
		printf("generation %llu: lines %llu-%llu (%llu lines, %llu records)\n",
		       ull(r, "generation"), ull(r, "first_line"), ull(r, "last_line"),
		       ull(r, "lines"), ull(r, "records"));
	fflush(stdout); /* each acknowledgement as it comes: a consumer waits on it */
	jv_free(r);
	return -1;
}

/* Reads what the loader sent; each whole line goes to reply(). */
static int take_replies(struct stream *s)
{
	if (s->in_cap - s->in_len < 4096) {
		if (s->in_cap >= IN_MAX)
			return p_err("%s: reply longer than %u bytes", s->sock, IN_MAX);
		size_t cap = s->in_cap ? s->in_cap * 2 : 8192;
		char *b = realloc(s->in, cap);
		if (!b)
			return p_err("out of memory");
		s->in = b;
		s->in_cap = cap;
	}
	ssize_t r = recv(s->fd, s->in + s->in_len, s->in_cap - s->in_len, 0);
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return -1;
	if (r <= 0) {
		s->peer_gone = 1;
		return -1;
	}
	s->in_len += (size_t)r;
	char *nl;
	while ((nl = memchr(s->in, '\n', s->in_len))) {
		size_t n = (size_t)(nl - s->in);
		int rc = reply(s, s->in, n);
		memmove(s->in, nl + 1, s->in_len - n - 1);
		s->in_len -= n + 1;
		if (rc >= 0)
			return rc;
	}
	return -1;
}

static void read_stdin(struct stream *s)
{
	ssize_t r = read(0, s->out + s->out_len, OUT_CAP - s->out_len);
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (r <= 0) { /* a read error ends the input like EOF: what was read is sent */
		if (r < 0)
			p_err("standard input: %s; ending the stream", strerror(errno));
		s->stdin_eof = 1;
		return;
	}
	for (const char *p = s->out + s->out_len, *e = p + r; (p = memchr(p, '\n', (size_t)(e - p)));
	     p++)
		s->lines++;
	s->out_len += (size_t)r;
	s->last_partial = s->out[s->out_len - 1] != '\n';
}

static int pump(struct stream *s)
{
	for (;;) {
		if (s->stdin_eof && !s->out_len && !s->shut) {
			s->lines += s->last_partial; /* the loader counts it too */
			shutdown(s->fd, SHUT_WR);
			s->shut = 1;
		}
		if (s->peer_gone)
			break;
		struct pollfd p[2] = {{.fd = s->fd, .events = POLLIN}, {.fd = -1}};
		if (s->out_len && !s->shut)
			p[0].events |= POLLOUT;
		if (!s->stdin_eof && s->out_len < OUT_CAP) {
			p[1].fd = 0;
			p[1].events = POLLIN;
		}
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return p_err("poll: %s", strerror(errno));
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			int rc = take_replies(s);
			if (rc >= 0)
				return rc;
		}
		if ((p[0].revents & POLLOUT) && s->out_len) {
			ssize_t w = send(s->fd, s->out, s->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w < 0 && errno != EINTR && errno != EAGAIN) {
				/* the loader ended the stream: its reply says why */
				s->out_len = 0;
				s->stdin_eof = s->shut = 1;
			} else if (w > 0) {
				memmove(s->out, s->out + w, s->out_len - (size_t)w);
				s->out_len -= (size_t)w;
			}
		}
		if (p[1].revents & (POLLIN | POLLHUP | POLLERR))
			read_stdin(s);
	}
	if (s->acked < s->lines || !s->stdin_eof)
		return p_err("%s: the loader closed the stream after acknowledging line %llu of %llu%s",
			     s->sock, s->acked, s->lines, s->stdin_eof ? "" : " (more were coming)");
	return EXIT_OK;
}

int cache_stream(const char *name)
{
	char why[4600], sock[4200];
	snprintf(sock, sizeof sock, "%s/control.sock", shmctl_root());
	int fd = ctl_dial(shmctl_root(), why, sizeof why);
	if (fd < 0)
		return p_err("%s", why);
	struct stream s = {.sock = sock, .fd = fd, .out = malloc(OUT_CAP)};
	int rc = EXIT_USAGE;
	char req[128];
	int n = snprintf(req, sizeof req, "stream\t%s\n", name);
	if (!s.out) {
		rc = p_err("out of memory");
	} else if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
		rc = p_err("%s: sending the request: %s", sock, strerror(errno));
	} else {
		/* the first line says the stream is open; acknowledgements follow */
		while (!s.peer_gone && !memchr(s.in ? s.in : "", '\n', s.in_len)) {
			if (s.in_cap - s.in_len < 4096 || !s.in) {
				size_t cap = s.in_cap ? s.in_cap * 2 : 8192;
				char *b = realloc(s.in, cap);
				if (!b)
					break;
				s.in = b;
				s.in_cap = cap;
			}
			ssize_t r = recv(fd, s.in + s.in_len, s.in_cap - s.in_len, 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				s.peer_gone = 1;
			else
				s.in_len += (size_t)r;
		}
		char *nl = s.in ? memchr(s.in, '\n', s.in_len) : NULL;
		jv *r = NULL;
		bool ok = false;
		if (!nl)
			rc = p_err("%s: the loader closed the connection without a reply", sock);
		else if (ctl_reply_parse(sock, s.in, (size_t)(nl - s.in), &r, why, sizeof why))
			rc = p_err("%s", why);
		else if (jv_get_bool(r, "ok", &ok), !ok)
			rc = reply_error(r);
		else {
			size_t used = (size_t)(nl - s.in) + 1;
			memmove(s.in, s.in + used, s.in_len - used);
			s.in_len -= used;
			rc = pump(&s);
		}
		jv_free(r);
	}
	close(fd);
	free(s.out);
	free(s.in);
	return rc;
}
