/* reqline.c - the control socket's bytes as requests (reqline.h). */
#include "reqline.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "diag.h"

#define X(n, a, lo, hi, wh, fn, job, h) {#n, a, lo, hi, wh, h},
const struct req_verb req_verbs[] = {REQ_VERBS(X)};
#undef X
const size_t req_nverbs = sizeof req_verbs / sizeof req_verbs[0];

int reqline_next(const char *in, size_t len, int eof, size_t *line_len, size_t *used)
{
	if (!len)
		return 0;
	const char *nl = memchr(in, '\n', len);
	size_t n = nl ? (size_t)(nl - in) : len;
	if (n > REQ_LINE_MAX)
		return -E2BIG;
	if (!nl && !eof)
		return 0;
	*used = nl ? n + 1 : n;
	*line_len = n && in[n - 1] == '\r' ? n - 1 : n;
	return 1;
}

void req_verb_list(char *out, size_t len, int who, const char *last_sep)
{
	size_t n = 0, count = 0, k = 0;
	for (size_t i = 0; i < req_nverbs; i++)
		count += who < 0 || (int)req_verbs[i].who == who;
	if (len)
		out[0] = 0;
	for (size_t i = 0; i < req_nverbs && n < len; i++) {
		if (who >= 0 && (int)req_verbs[i].who != who)
			continue;
		const char *sep = k == 0 ? "" : k + 1 == count ? last_sep : ", ";
		n += (size_t)snprintf(out + n, len - n, "%s%s", sep, req_verbs[i].name);
		k++;
	}
}

int req_parse(char *line, size_t len, int priv, unsigned euid, long peer_uid, struct req *r,
	      char *msg, size_t msg_len)
{
	memset(r, 0, sizeof *r);
	/* the words are C strings from here on: a NUL would cut one short, and
	 * the request run would not be the one sent (drop<TAB>c<NUL>x, three
	 * bytes of name, dropped cache c) */
	const char *nul = memchr(line, 0, len);
	if (nul)
		return diag_fail(-EINVAL, msg, msg_len, "a request holds a NUL byte (at byte %zu)",
				 (size_t)(nul - line));
	for (char *p = line;;) {
		if (r->n == REQ_MAX_WORDS)
			return diag_fail(-EINVAL, msg, msg_len, "too many words");
		r->w[r->n++] = p;
		char *t = strchr(p, '\t');
		if (!t)
			break;
		*t = 0;
		p = t + 1;
	}
	for (size_t i = 0; i < req_nverbs && !r->verb; i++)
		if (!strcmp(r->w[0], req_verbs[i].name))
			r->verb = &req_verbs[i];
	const struct req_verb *v = r->verb;
	if (!v) {
		char all[300];
		req_verb_list(all, sizeof all, -1, ", ");
		return diag_fail(-EINVAL, msg, msg_len, "unknown verb \"%.64s\" (%s)", r->w[0], all);
	}
	if (r->n - 1 < v->min || r->n - 1 > v->max)
		return diag_fail(-EINVAL, msg, msg_len, "usage: %s%s%s (words separated by TAB)",
				 v->name, v->args[0] ? " " : "", v->args);
	/* the socket may be group-accessible (0660) for status; what changes a
	 * cache, or reads a file as the loader, is for root and our own uid */
	if (v->who == REQ_PRIV && !priv) {
		char any[300];
		req_verb_list(any, sizeof any, REQ_ANY, " and ");
		return diag_fail(-EPERM, msg, msg_len, "%s is for root and the loader's user (uid "
				 "%u); uid %ld may only %s", v->name, euid, peer_uid, any);
	}
	return 0;
}

/* The '\n's of p[0..n). */
static uint64_t memcnt_nl(const char *p, size_t n)
{
	uint64_t k = 0;
	for (const char *e = p + n; (p = memchr(p, '\n', (size_t)(e - p))); p++)
		k++;
	return k;
}

int req_stream_scan(struct req_stream *s, const char *in, size_t len, size_t max,
		    uint64_t *bad_line)
{
	for (;;) {
		const char *nl = memchr(in + s->scanned, '\n', len - s->scanned);
		size_t upto = nl ? (size_t)(nl - in) : len;
		if (upto - s->line_at > max) {
			*bad_line = memcnt_nl(in, s->line_at) + 1;
			return -E2BIG;
		}
		if (!nl) {
			s->scanned = len;
			return 0;
		}
		s->line_at = s->scanned = upto + 1;
	}
}

size_t req_stream_batch(const struct req_stream *s, size_t len, int eof)
{
	return eof ? len : s->line_at;
}

uint64_t req_stream_lines(const char *b, size_t n)
{
	return memcnt_nl(b, n) + (b[n - 1] != '\n');
}

void req_stream_consumed(struct req_stream *s, size_t n)
{
	s->line_at -= n < s->line_at ? n : s->line_at;
	s->scanned -= n < s->scanned ? n : s->scanned;
}
