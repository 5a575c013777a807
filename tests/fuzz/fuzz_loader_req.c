/* fuzz_loader_req.c - the loader's reading of what a control socket peer
 * sends (loader/README.md, "Control socket protocol" and "Streams"),
 * through its I/O-free seam (loader/reqline.h), as server.c calls it. Byte
 * 0: bit 0 picks the mode, bit 1 the peer is root or the loader's uid, bit 2
 * the peer closes its side after the last byte; byte 1 seeds the sizes of
 * the pieces the bytes arrive in (1 byte to 8 KiB; and in a stream when a
 * batch is taken);
 * byte 2, in a stream, its longest line - 1 (so that short inputs reach the
 * limit); the rest is what the peer sent:
 *   0 requests: the connection's buffer cut into lines (reqline_next), each
 *     line into its words and checked against the verbs (req_parse)
 *   1 a stream (after `stream NAME`): lines scanned as they arrive, batches
 *     taken and moved out of the buffer (req_stream_*)
 * Each piece is in a heap block of its exact size, so ASan sees any read
 * past it. The checks: the rules of the README read on their own. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reqline.h"

#include "fuzz_util.h"

/* loader/README.md: "A request line is at most 8192 bytes"; the verb and
 * at most three words after it (the longest usage, load and bpf_export) */
#define DOC_LINE_MAX 8192
#define DOC_MAX_WORDS 4

/* the next piece's size: 1..64, or 128..8192 by 128 (a peer that writes
 * a byte at a time, or one whose writes fill the socket's buffer) */
static size_t piece(uint32_t *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	size_t p = 1 + (*seed >> 16) % 64;
	return (*seed >> 12) & 1 ? p * 128 : p;
}

/* ---- 0: request lines, their words ---- */

/* line[0..len) against the rules: words are the bytes between TABs; a
 * request is refused, with a message, when it has more than DOC_MAX_WORDS
 * words, an unknown verb, a wrong number of words, or a verb for root and
 * the loader's uid from another peer, or a NUL byte. */
static void check_request(const char *line, size_t len, int priv)
{
	char *l = malloc(len + 1); /* the line as process() hands it on */
	FUZZ_CHECK(l, "malloc");
	memcpy(l, line, len);
	l[len] = 0;
	/* the words of the rule */
	const char *w[DOC_MAX_WORDS + 1];
	size_t wl[DOC_MAX_WORDS + 1];
	int k = 0;
	for (size_t at = 0; k <= DOC_MAX_WORDS;) {
		const char *t = memchr(line + at, '\t', len - at);
		size_t e = t ? (size_t)(t - line) : len;
		w[k] = line + at;
		wl[k++] = e - at;
		if (!t)
			break;
		at = e + 1;
	}
	const struct req_verb *verb = NULL;
	for (size_t i = 0; i < req_nverbs && !verb; i++)
		if (strlen(req_verbs[i].name) == wl[0] && !memcmp(req_verbs[i].name, w[0], wl[0]))
			verb = &req_verbs[i];
	/* a NUL byte anywhere: refused (a word would be cut short at it) */
	int want = memchr(line, 0, len) || k > DOC_MAX_WORDS || !verb || k - 1 < verb->min ||
			   k - 1 > verb->max
		? -EINVAL
		: verb->who == REQ_PRIV && !priv ? -EPERM : 0;

	struct req r;
	char msg[400];
	memset(msg, 0, sizeof msg);
	int err = req_parse(l, len, priv, 1000, priv ? 0 : 1234, &r, msg, sizeof msg);
	if (err) {
		FUZZ_CHECK(msg[0] && memchr(msg, 0, sizeof msg), "refused (%d) without a reason", err);
		FUZZ_CHECK(err == -EINVAL || err == -EPERM, "refused with %d: %s", err, msg);
	}
	FUZZ_CHECK(err == want, "req_parse %d, the rule says %d (%d words): %s", err, want, k, msg);
	if (err == -EPERM)
		FUZZ_CHECK(strstr(msg, verb->name), "a refusal that does not name the verb: %s", msg);
	if (!err) {
		FUZZ_CHECK(r.verb == verb && r.n == k && !r.w[k], "another verb or word count");
		for (int i = 0; i < k; i++) {
			/* each word all of its bytes: a handler reads it as a C
			 * string, so a NUL in it would cut it short */
			FUZZ_CHECK(r.w[i] >= l && r.w[i] + wl[i] <= l + len,
				   "word %d outside the line", i);
			FUZZ_CHECK(strlen(r.w[i]) == wl[i] && !memcmp(r.w[i], w[i], wl[i]),
				   "word %d is not the line's bytes between TABs (%zu of %zu bytes)",
				   i, strlen(r.w[i]), wl[i]);
		}
		/* the NAME the handlers check, in a block of its size */
		if (k > 1 && strncmp(verb->args, "NAME", 4) == 0) {
			char *name = (char *)fuzz_copy((const uint8_t *)r.w[1], wl[1] + 1);
			(void)shmkv_name_check(name);
			free(name);
		}
	}
	free(l);
}

static void fuzz_requests(const uint8_t *d, size_t n, int priv, int eof, uint32_t seed)
{
	size_t got = 0, at = 0; /* received; handed on (lines taken) */
	while (got < n) {
		size_t p = piece(&seed);
		got += p < n - got ? p : n - got;
		int end = eof && got == n;
		/* the bytes not handed on yet, in a block that ends where they do */
		size_t from = at;
		uint8_t *blk = fuzz_copy(d + from, got - from);
		for (;;) {
			size_t avail = got - at, len = 0, used = 0;
			if (!avail)
				break;
			int r = reqline_next((const char *)blk + (at - from), avail, end, &len, &used);
			/* the rule: a line runs to its '\n' (at eof, to the end);
			 * longer than DOC_LINE_MAX, the connection is refused */
			const uint8_t *nl = memchr(d + at, '\n', avail);
			size_t ll = nl ? (size_t)(nl - (d + at)) : avail;
			if (ll > DOC_LINE_MAX) {
				FUZZ_CHECK(r == -E2BIG, "a line of %zu bytes taken (%d)", ll, r);
				free(blk);
				return; /* the connection ends */
			}
			if (!nl && !end) {
				FUZZ_CHECK(r == 0, "a line without its end taken (%d)", r);
				break;
			}
			FUZZ_CHECK(r == 1, "a whole line of %zu bytes not taken (%d)", ll, r);
			FUZZ_CHECK(used == ll + (nl != NULL), "used %zu of a line of %zu", used, ll);
			size_t want = ll && d[at + ll - 1] == '\r' ? ll - 1 : ll;
			FUZZ_CHECK(len == want, "line of %zu bytes, %zu expected", len, want);
			if (len)
				check_request((const char *)d + at, len, priv);
			at += used;
		}
		free(blk);
	}
}

/* ---- 1: a stream's lines ---- */

static uint64_t count_nl(const uint8_t *p, size_t n)
{
	uint64_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += p[i] == '\n';
	return k;
}

static void fuzz_stream(const uint8_t *d, size_t n, int eof, uint32_t seed, size_t max)
{
	char *buf = NULL;
	size_t len = 0, got = 0, handed = 0; /* buffered; received; handed on */
	uint64_t lines = 0;                  /* the lines handed on */
	struct req_stream s = {0, 0};
	while (got < n) {
		size_t p = piece(&seed);
		p = p < n - got ? p : n - got;
		buf = realloc(buf, len + p);
		FUZZ_CHECK(buf, "realloc");
		memcpy(buf + len, d + got, p);
		len += p;
		got += p;
		int end = eof && got == n;
		char *in = (char *)fuzz_copy((const uint8_t *)buf, len);
		uint64_t bad = 0;
		int err = req_stream_scan(&s, in, len, max, &bad);
		/* the rule: every line, the unterminated last one too, is at
		 * most max bytes; the first longer one is refused by number */
		uint64_t first_long = 0, k = 0;
		for (size_t at = 0, e; at < len && !first_long; at = e + 1) {
			for (e = at; e < len && buf[e] != '\n'; e++)
				;
			k++;
			if (e - at > max)
				first_long = k;
		}
		if (err) {
			FUZZ_CHECK(err == -E2BIG && first_long && bad == first_long,
				   "refused line %llu (%d); the first too long is %llu",
				   (unsigned long long)bad, err, (unsigned long long)first_long);
			free(in);
			free(buf);
			return; /* the stream ends */
		}
		FUZZ_CHECK(!first_long, "line %llu longer than %zu bytes passed",
			   (unsigned long long)first_long, max);
		FUZZ_CHECK(s.line_at <= s.scanned && s.scanned == len, "scan state %zu %zu of %zu",
			   s.line_at, s.scanned, len);
		FUZZ_CHECK(!memchr(in + s.line_at, '\n', len - s.line_at) &&
				   (!s.line_at || in[s.line_at - 1] == '\n'),
			   "the whole lines end at %zu, not at the last '\\n'", s.line_at);
		/* a batch when the interval allows (every other piece, say) or at
		 * the end */
		seed = seed * 1103515245u + 12345u;
		size_t b = (seed >> 20) & 1 || end ? req_stream_batch(&s, len, end) : 0;
		if (b) {
			FUZZ_CHECK(b <= len && (end || in[b - 1] == '\n'), "a batch of %zu of %zu bytes "
				   "that is not whole lines", b, len);
			uint64_t bl = req_stream_lines(in, b);
			FUZZ_CHECK(bl == count_nl((const uint8_t *)in, b) + (in[b - 1] != '\n'),
				   "a batch of %llu lines", (unsigned long long)bl);
			FUZZ_CHECK(!memcmp(in, d + handed, b), "a batch of other bytes");
			lines += bl;
			handed += b;
			memmove(buf, buf + b, len - b);
			len -= b;
			req_stream_consumed(&s, b);
		}
		free(in);
	}
	/* every byte handed on once, in order, or still buffered */
	FUZZ_CHECK(handed + len == n && (!len || !memcmp(buf, d + handed, len)),
		   "bytes lost or repeated");
	if (eof)
		FUZZ_CHECK(!len && lines == count_nl(d, n) + (n && d[n - 1] != '\n'),
			   "at eof %zu bytes left, %llu lines handed on", len,
			   (unsigned long long)lines);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	FUZZ_CHECK(REQ_LINE_MAX == DOC_LINE_MAX && REQ_MAX_WORDS == DOC_MAX_WORDS &&
			   REQ_STREAM_LINE_MAX == 1u << 20,
		   "reqline.h's limits are not loader/README.md's");
	int mode = data[0] & 1, priv = !!(data[0] & 2), eof = !!(data[0] & 4);
	uint32_t seed = data[1];
	if (mode == 0)
		fuzz_requests(data + 3, size - 3, priv, eof, seed);
	else
		fuzz_stream(data + 3, size - 3, eof, seed, (size_t)data[2] + 1);
	return 0;
}
