/* json.c - JSON writer (see json.h). */
#include "json.h"

#include <shmkv.h>

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(struct json *j, const char *s, size_t n)
{
	if (j->oom)
		return;
	if (j->len + n + 1 > j->cap) {
		size_t cap = j->cap ? j->cap : 256;
		while (j->len + n + 1 > cap)
			cap *= 2;
		char *b = realloc(j->buf, cap);
		if (!b) {
			j->oom = 1;
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

static void quoted(struct json *j, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	put(j, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char e[7];
		if (*p == '"' || *p == '\\') {
			e[0] = '\\';
			e[1] = (char)*p;
			put(j, e, 2);
		} else if (*p == '\n') {
			put(j, "\\n", 2);
		} else if (*p == '\t') {
			put(j, "\\t", 2);
		} else if (*p < 0x20 || *p == 0x7f) {
			memcpy(e, "\\u00", 4);
			e[4] = hex[*p >> 4];
			e[5] = hex[*p & 15];
			put(j, e, 6);
		} else {
			put(j, (const char *)p, 1);
		}
	}
	put(j, "\"", 1);
}

static void member(struct json *j, const char *key)
{
	if (!j->first[j->depth])
		put(j, ", ", 2);
	j->first[j->depth] = 0;
	if (key) {
		quoted(j, key);
		put(j, ": ", 2);
	}
}

void json_init(struct json *j)
{
	memset(j, 0, sizeof *j);
	puts_(j, "{");
	j->first[0] = 1;
}

char *json_finish(struct json *j)
{
	puts_(j, "}\n");
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
}

void json_str(struct json *j, const char *key, const char *v)
{
	member(j, key);
	if (v)
		quoted(j, v);
	else
		puts_(j, "null");
}

void json_u64(struct json *j, const char *key, uint64_t v)
{
	char b[32];
	member(j, key);
	snprintf(b, sizeof b, "%" PRIu64, v);
	puts_(j, b);
}

void json_i64(struct json *j, const char *key, int64_t v)
{
	char b[32];
	member(j, key);
	snprintf(b, sizeof b, "%" PRId64, v);
	puts_(j, b);
}

void json_f64(struct json *j, const char *key, double v, int decimals)
{
	char b[64];
	member(j, key);
	if (!isfinite(v))
		snprintf(b, sizeof b, "null");
	else
		snprintf(b, sizeof b, "%.*f", decimals, v);
	puts_(j, b);
}

void json_bool(struct json *j, const char *key, int v)
{
	member(j, key);
	puts_(j, v ? "true" : "false");
}

void json_null(struct json *j, const char *key)
{
	member(j, key);
	puts_(j, "null");
}

static void open_(struct json *j, const char *key, const char *c)
{
	member(j, key);
	puts_(j, c);
	if (j->depth + 1 < sizeof j->first)
		j->depth++;
	j->first[j->depth] = 1;
}

void json_obj_begin(struct json *j, const char *key)
{
	open_(j, key, "{");
}

void json_obj_end(struct json *j)
{
	puts_(j, "}");
	if (j->depth)
		j->depth--;
}

void json_arr_begin(struct json *j, const char *key)
{
	open_(j, key, "[");
}

void json_arr_end(struct json *j)
{
	puts_(j, "]");
	if (j->depth)
		j->depth--;
}

/* "ENOENT", "SHMKV_ECHECKSUM", ... */
static const char *code_name(int err)
{
	switch (err) {
	case SHMKV_EMAGIC: return "SHMKV_EMAGIC";
	case SHMKV_EVERSION: return "SHMKV_EVERSION";
	case SHMKV_ELAYOUT: return "SHMKV_ELAYOUT";
	case SHMKV_ETRUNCATED: return "SHMKV_ETRUNCATED";
	case SHMKV_ECHECKSUM: return "SHMKV_ECHECKSUM";
	case SHMKV_ECORRUPT: return "SHMKV_ECORRUPT";
	case SHMKV_EPROTO: return "SHMKV_EPROTO";
	default: break;
	}
	const char *n = err < 0 && err > -4096 ? strerrorname_np(-err) : NULL;
	return n ? n : "EIO";
}

char *json_error_code(const char *msg, int err)
{
	struct json j;
	json_init(&j);
	json_bool(&j, "ok", 0);
	json_str(&j, "error", msg);
	if (err)
		json_str(&j, "code", code_name(err));
	return json_finish(&j);
}

char *json_error(const char *msg)
{
	return json_error_code(msg, 0);
}
