/* json.c - the JSON writer, UTF-8 validation, base64 (see json.h). */
#include "json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <shmkv.h>

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* ---- output: a FILE or the growing buffer ---- */

static void put(struct json *j, const void *s, size_t n)
{
	if (j->f) {
		fwrite(s, 1, n, j->f);
		return;
	}
	if (j->oom)
		return;
	if (j->len + n + 1 > j->cap) {
		size_t cap = j->cap ? j->cap : 256;
		while (j->len + n + 1 > cap)
			cap *= 2;
		char *b = realloc(j->buf, cap);
		if (!b) {
			j->oom = true;
			return;
		}
		j->buf = b;
		j->cap = cap;
	}
	memcpy(j->buf + j->len, s, n);
	j->len += n;
	j->buf[j->len] = 0;
}

static void puts_(struct json *j, const char *s)
{
	put(j, s, strlen(s));
}

static void putc_(struct json *j, char c)
{
	put(j, &c, 1);
}

/* ---- structure ---- */

static void indent(struct json *j)
{
	putc_(j, '\n');
	for (int i = 0; i < j->depth; i++)
		puts_(j, "    ");
}

static void write_escaped(struct json *j, const unsigned char *p, size_t n);

/* Separator (and member name) before a value. */
static void before(struct json *j, const char *key)
{
	if (j->after_name) {
		j->after_name = false;
		return;
	}
	if (j->depth > 0 && j->depth <= JSON_MAX_DEPTH) {
		bool *first = &j->first[j->depth - 1];
		if (!*first)
			putc_(j, ',');
		if (j->pretty)
			indent(j);
		else if (!*first)
			putc_(j, ' ');
		*first = false;
	}
	if (key) {
		write_escaped(j, (const unsigned char *)key, strlen(key));
		puts_(j, ": ");
	}
}

/* After a complete value: a top-level one ends its line. */
static void after(struct json *j)
{
	if (j->depth == 0)
		putc_(j, '\n');
}

void json_name(struct json *j, const char *key)
{
	before(j, key);
	j->after_name = true;
}

static void open_container(struct json *j, const char *key, char c)
{
	before(j, key);
	putc_(j, c);
	if (j->depth < JSON_MAX_DEPTH)
		j->first[j->depth] = true;
	j->depth++;
}

static void close_container(struct json *j, char c)
{
	if (j->depth <= 0)
		return;
	bool empty = j->depth <= JSON_MAX_DEPTH ? j->first[j->depth - 1] : false;
	j->depth--;
	if (j->pretty && !empty)
		indent(j);
	putc_(j, c);
	after(j);
}

void json_obj_begin(struct json *j, const char *key) { open_container(j, key, '{'); }
void json_obj_end(struct json *j) { close_container(j, '}'); }
void json_arr_begin(struct json *j, const char *key) { open_container(j, key, '['); }
void json_arr_end(struct json *j) { close_container(j, ']'); }

void json_init_file(struct json *j, FILE *f, bool pretty)
{
	memset(j, 0, sizeof *j);
	j->f = f;
	j->pretty = pretty;
}

void json_init(struct json *j)
{
	memset(j, 0, sizeof *j);
	json_obj_begin(j, NULL);
}

char *json_finish(struct json *j)
{
	json_obj_end(j);
	if (j->oom) {
		json_free(j);
		return NULL;
	}
	char *b = j->buf;
	j->buf = NULL;
	return b;
}

void json_free(struct json *j)
{
	free(j->buf);
	j->buf = NULL;
	j->len = j->cap = 0;
}

/* ---- strings ---- */

static void write_escaped(struct json *j, const unsigned char *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	putc_(j, '"');
	for (size_t i = 0; i < n;) {
		unsigned c = p[i];
		size_t l = shmkv_utf8_seq_len(p + i, n - i);
		if (l == 0) {
			puts_(j, "\\ufffd"); /* not UTF-8: replacement character */
			i++;
			continue;
		}
		if (l == 3 && c == 0xE2 && p[i + 1] == 0x80 && (p[i + 2] == 0xA8 || p[i + 2] == 0xA9)) {
			puts_(j, p[i + 2] == 0xA8 ? "\\u2028" : "\\u2029");
		} else if (l > 1) {
			put(j, p + i, l);
		} else if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			put(j, e, 2);
		} else if (c == '\n') {
			puts_(j, "\\n");
		} else if (c == '\t') {
			puts_(j, "\\t");
		} else if (c == '\r') {
			puts_(j, "\\r");
		} else if (c == '\b') {
			puts_(j, "\\b");
		} else if (c == '\f') {
			puts_(j, "\\f");
		} else if (c < 0x20 || c == 0x7F) {
			char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
			put(j, e, 6);
		} else {
			putc_(j, (char)c);
		}
		i += l;
	}
	putc_(j, '"');
}

void json_str_n(struct json *j, const char *key, const void *v, size_t n)
{
	before(j, key);
	write_escaped(j, v, n);
	after(j);
}

void json_str(struct json *j, const char *key, const char *v)
{
	if (!v)
		json_null(j, key);
	else
		json_str_n(j, key, v, strlen(v));
}

/* ---- other values ---- */

void json_raw(struct json *j, const char *key, const char *text)
{
	before(j, key);
	puts_(j, text);
	after(j);
}

void json_u64(struct json *j, const char *key, uint64_t v)
{
	char b[24];
	snprintf(b, sizeof b, "%" PRIu64, v);
	json_raw(j, key, b);
}

void json_i64(struct json *j, const char *key, int64_t v)
{
	char b[24];
	snprintf(b, sizeof b, "%" PRId64, v);
	json_raw(j, key, b);
}

void json_f64(struct json *j, const char *key, double v, int decimals)
{
	char b[352]; /* %.0f of DBL_MAX is 309 digits */
	if (!isfinite(v))
		json_null(j, key);
	else if ((size_t)snprintf(b, sizeof b, "%.*f", decimals < 0 ? 0 : decimals > 17 ? 17 : decimals,
				  v) < sizeof b)
		json_raw(j, key, b);
	else
		json_stat(j, key, v);
}

void json_stat(struct json *j, const char *key, double v)
{
	char b[32];
	if (!isfinite(v)) {
		json_null(j, key);
		return;
	}
	snprintf(b, sizeof b, "%.6g", v);
	json_raw(j, key, b);
}

void json_bool(struct json *j, const char *key, bool v)
{
	json_raw(j, key, v ? "true" : "false");
}

void json_null(struct json *j, const char *key)
{
	json_raw(j, key, "null");
}

static void b64_put(struct json *j, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)b[i] << 16;
		if (i + 1 < n)
			v |= (unsigned)b[i + 1] << 8;
		if (i + 2 < n)
			v |= b[i + 2];
		char q[4] = {b64[v >> 18 & 63], b64[v >> 12 & 63], i + 1 < n ? b64[v >> 6 & 63] : '=',
			     i + 2 < n ? b64[v & 63] : '='};
		put(j, q, 4);
	}
}

void json_base64(struct json *j, const char *key, const void *p, size_t n)
{
	before(j, key);
	putc_(j, '"');
	b64_put(j, p, n);
	putc_(j, '"');
	after(j);
}

/* ---- the loader's error replies ---- */

static const char *const reason_names[JSON_R_N_] = {
	"failed", "no_cache", "bad_request", "not_permitted", "busy", "stopping",
};

const char *json_reason_name(enum json_reason r)
{
	return (unsigned)r < JSON_R_N_ ? reason_names[r] : reason_names[JSON_R_FAILED];
}

enum json_reason json_reason_parse(const char *name)
{
	for (int r = 0; name && r < JSON_R_N_; r++)
		if (!strcmp(name, reason_names[r]))
			return (enum json_reason)r;
	return JSON_R_FAILED;
}

char *json_error_reason(const char *msg, int err, enum json_reason r)
{
	struct json j;
	json_init(&j);
	json_bool(&j, "ok", false);
	json_str(&j, "error", msg);
	if (err)
		json_str(&j, "code", shmkv_errname(err));
	json_str(&j, "reason", json_reason_name(r));
	return json_finish(&j);
}

char *json_error_code(const char *msg, int err)
{
	return json_error_reason(msg, err, JSON_R_FAILED);
}

char *json_no_cache(const char *name)
{
	char msg[SHMKV_CACHE_NAME_MAX * 4 + 32];
	snprintf(msg, sizeof msg, "no cache \"%.*s\"", SHMKV_CACHE_NAME_MAX * 2, name);
	return json_error_reason(msg, -ENOENT, JSON_R_NO_CACHE);
}

int json_reply_no_cache(char **reply, const char *name)
{
	*reply = json_no_cache(name);
	return -ENOENT;
}

char *json_error(const char *msg)
{
	return json_error_code(msg, 0);
}

int json_reply_error(char **reply, int err, const char *fmt, ...)
{
	char msg[700];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	*reply = json_error_code(msg, err);
	return err;
}

/* ---- base64 ---- */

void base64_write(FILE *f, const void *p, size_t n)
{
	struct json j;
	json_init_file(&j, f, false);
	b64_put(&j, p, n);
}

long base64_decode(const char *text, unsigned char *out)
{
	size_t len = strlen(text), n = len;
	while (n && text[n - 1] == '=')
		n--;
	if (n % 4 == 1 || (n < len && (len - n > 2 || len % 4 != 0)))
		return -1;
	long o = 0;
	unsigned acc = 0, bits = 0;
	for (size_t i = 0; i < n; i++) {
		const char *c = text[i] ? strchr(b64, text[i]) : NULL;
		if (!c)
			return -1;
		acc = acc << 6 | (unsigned)(c - b64);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	if (acc != 0) /* non-canonical trailing bits */
		return -1;
	return o;
}
