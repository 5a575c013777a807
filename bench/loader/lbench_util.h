/* lbench_util.h - small helpers shared by the loader benchmarks (header-only).
 *
 *   lb_now_ns(clock)          a clock in nanoseconds
 *   lb_die(fmt, ...)          message on stderr, exit 1
 *   lb_parse_size("2G")       K/M/G/T suffixes (binary)
 *   lb_request(root, line)    one request over ROOT/control.sock, the reply line
 *   lb_json_u64/_f64/_str     a top-level (or first) member of a flat JSON reply
 *   lb_key(buf, i)            "key_<i>" into a 32-byte buffer, its length
 *   lb_cmp_u64, lb_quantile   sorting helpers
 *
 * Nothing here links loader code: the benchmarks talk to shmkv-loader like any
 * client (loader/README.md, "Control socket protocol").
 */
#ifndef LBENCH_UTIL_H
#define LBENCH_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t lb_now_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((format(printf, 1, 2), noreturn)) static inline void lb_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* "123", "4K", "2G": bytes (binary suffixes); dies on garbage. */
static inline uint64_t lb_parse_size(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s)
		lb_die("bad size \"%s\"", s);
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	case 't': case 'T': v <<= 40; end++; break;
	default: break;
	}
	if (*end)
		lb_die("bad size \"%s\"", s);
	return v;
}

/* Sends one request line (words already TAB-joined, without the newline) to
 * ROOT/control.sock and returns the reply line (malloc'ed, newline stripped),
 * or NULL with errno set. Waits as long as the loader takes. */
static inline char *lb_request(const char *root, const char *line)
{
	struct sockaddr_un a;
	memset(&a, 0, sizeof a);
	a.sun_family = AF_UNIX;
	if ((size_t)snprintf(a.sun_path, sizeof a.sun_path, "%s/control.sock", root) >=
	    sizeof a.sun_path) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		return NULL;
	}
	size_t n = strlen(line);
	char *out = (char *)malloc(n + 2);
	if (!out) {
		close(fd);
		return NULL;
	}
	memcpy(out, line, n);
	out[n] = '\n';
	for (size_t off = 0; off < n + 1;) {
		ssize_t w = write(fd, out + off, n + 1 - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = errno;
			free(out);
			close(fd);
			errno = e;
			return NULL;
		}
		off += (size_t)w;
	}
	free(out);
	size_t cap = 4096, len = 0;
	char *buf = (char *)malloc(cap);
	while (buf) {
		if (len + 1 >= cap) {
			char *nb = (char *)realloc(buf, cap *= 2);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
		}
		ssize_t r = read(fd, buf + len, cap - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
		if (memchr(buf, '\n', len))
			break;
	}
	close(fd);
	if (!buf)
		return NULL;
	buf[len] = 0;
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = 0;
	if (!len) {
		free(buf);
		errno = ECONNRESET;
		return NULL;
	}
	return buf;
}

/* The text right after the first "key": in a JSON reply, or NULL. Enough for
 * the loader's flat replies (keys are unique where we look them up). */
static inline const char *lb__json_at(const char *json, const char *key)
{
	char pat[96];
	snprintf(pat, sizeof pat, "\"%s\":", key);
	const char *p = strstr(json, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	while (*p == ' ')
		p++;
	return p;
}

static inline uint64_t lb_json_u64(const char *json, const char *key)
{
	const char *p = lb__json_at(json, key);
	return p ? strtoull(p, NULL, 10) : 0;
}

static inline double lb_json_f64(const char *json, const char *key)
{
	const char *p = lb__json_at(json, key);
	return p ? strtod(p, NULL) : 0;
}

/* Copies a string member (escapes left as they are) into out; "" if absent. */
static inline void lb_json_str(const char *json, const char *key, char *out, size_t len)
{
	const char *p = lb__json_at(json, key);
	size_t i = 0;
	if (p && *p == '"') {
		for (p++; *p && *p != '"' && i + 1 < len; p++) {
			if (*p == '\\' && p[1])
				p++;
			out[i++] = *p;
		}
	}
	out[i] = 0;
}

static inline int lb_json_ok(const char *json)
{
	const char *p = lb__json_at(json, "ok");
	return p && !strncmp(p, "true", 4);
}

/* Writes "key_<i>" (the benchmark images' keys) into buf; returns its length
 * (at most 24: snprintf's return value would leave the bound unknown to the
 * compiler, which then warns about the key reads in the inlined XXH3). */
static inline size_t lb_key(char buf[32], uint64_t i)
{
	char d[20];
	size_t n = 0;
	do {
		d[n++] = (char)('0' + i % 10);
		i /= 10;
	} while (i && n < sizeof d);
	memcpy(buf, "key_", 4);
	for (size_t j = 0; j < n; j++)
		buf[4 + j] = d[n - 1 - j];
	buf[4 + n] = 0;
	return 4 + n;
}

static inline int lb_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Sorts v and returns the value at quantile q in [0, 1] (nearest rank). */
static inline uint64_t lb_quantile(uint64_t *v, size_t n, double q)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof *v, lb_cmp_u64);
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

#endif /* LBENCH_UTIL_H */
