/* json_parse.c - JSON text to a tree and back. See json_parse.h. */
#include "json_parse.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct parser {
	const char *p, *end, *start;
	char *why;
	size_t why_len;
	bool failed;
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int fail(struct parser *ps, const char *fmt, ...)
{
	if (ps->failed)
		return -1;
	ps->failed = true;
	if (ps->why && ps->why_len) {
		char msg[256];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof msg, fmt, ap);
		va_end(ap);
		snprintf(ps->why, ps->why_len, "%s at byte %zu", msg, (size_t)(ps->p - ps->start));
	}
	return -1;
}

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end &&
	       (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

/* A growing byte buffer for strings. */
struct buf {
	char *d;
	size_t n, cap;
};

static int buf_put(struct buf *b, const void *p, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 32;
		while (cap < b->n + n + 1)
			cap *= 2;
		char *d = realloc(b->d, cap);
		if (!d)
			return -1;
		b->d = d;
		b->cap = cap;
	}
	memcpy(b->d + b->n, p, n);
	b->n += n;
	b->d[b->n] = 0;
	return 0;
}

static int put_utf8(struct buf *b, unsigned cp)
{
	unsigned char u[4];
	size_t n;
	if (cp < 0x80) {
		u[0] = (unsigned char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (unsigned char)(0xC0 | cp >> 6);
		u[1] = (unsigned char)(0x80 | (cp & 0x3F));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (unsigned char)(0xE0 | cp >> 12);
		u[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
		u[2] = (unsigned char)(0x80 | (cp & 0x3F));
		n = 3;
	} else {
		u[0] = (unsigned char)(0xF0 | cp >> 18);
		u[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
		u[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
		u[3] = (unsigned char)(0x80 | (cp & 0x3F));
		n = 4;
	}
	return buf_put(b, u, n);
}

/* Four hex digits after "\u"; -1 if they are not. */
static long hex4(struct parser *ps)
{
	if (ps->end - ps->p < 4)
		return -1;
	long v = 0;
	for (int i = 0; i < 4; i++) {
		char c = ps->p[i];
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;
		if (d < 0)
			return -1;
		v = v << 4 | d;
	}
	ps->p += 4;
	return v;
}

/* A string token at ps->p (the opening quote); its decoded bytes go to *out. */
static int parse_string(struct parser *ps, char **out, size_t *out_len)
{
	struct buf b = {0};
	ps->p++; /* '"' */
	if (buf_put(&b, "", 0))
		return fail(ps, "out of memory");
	for (;;) {
		const char *run = ps->p;
		while (ps->p < ps->end && *ps->p != '"' && *ps->p != '\\' &&
		       (unsigned char)*ps->p >= 0x20)
			ps->p++;
		if (ps->p > run && buf_put(&b, run, (size_t)(ps->p - run)))
			goto oom;
		if (ps->p == ps->end) {
			fail(ps, "unterminated string");
			goto err;
		}
		char c = *ps->p;
		if (c == '"') {
			ps->p++;
			break;
		}
		if (c != '\\') {
			fail(ps, "control character in a string");
			goto err;
		}
		ps->p++;
		if (ps->p == ps->end) {
			fail(ps, "unterminated string");
			goto err;
		}
		char e = *ps->p++;
		const char *simple = NULL;
		switch (e) {
		case '"': simple = "\""; break;
		case '\\': simple = "\\"; break;
		case '/': simple = "/"; break;
		case 'b': simple = "\b"; break;
		case 'f': simple = "\f"; break;
		case 'n': simple = "\n"; break;
		case 'r': simple = "\r"; break;
		case 't': simple = "\t"; break;
		case 'u': break;
		default:
			ps->p--;
			fail(ps, "bad escape '\\%c'", e);
			goto err;
		}
		if (simple) {
			if (buf_put(&b, simple, 1))
				goto oom;
			continue;
		}
		long cp = hex4(ps);
		if (cp < 0) {
			fail(ps, "bad \\u escape");
			goto err;
		}
		if (cp >= 0xD800 && cp <= 0xDBFF) {
			/* a high surrogate: a low one must follow, else U+FFFD */
			const char *save = ps->p;
			long lo = -1;
			if (ps->end - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u') {
				ps->p += 2;
				lo = hex4(ps);
			}
			if (lo >= 0xDC00 && lo <= 0xDFFF) {
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			} else {
				ps->p = save;
				cp = 0xFFFD;
			}
		} else if (cp >= 0xDC00 && cp <= 0xDFFF) {
			cp = 0xFFFD;
		}
		if (put_utf8(&b, (unsigned)cp))
			goto oom;
	}
	*out = b.d;
	*out_len = b.n;
	return 0;
oom:
	fail(ps, "out of memory");
err:
	free(b.d);
	return -1;
}

static int parse_number(struct parser *ps, jv *v)
{
	const char *s = ps->p, *e = ps->end, *p = s;
	if (p < e && *p == '-')
		p++;
	if (p < e && *p == '0') {
		p++;
	} else if (p < e && *p >= '1' && *p <= '9') {
		while (p < e && *p >= '0' && *p <= '9')
			p++;
	} else {
		return fail(ps, "bad number");
	}
	if (p < e && *p == '.') {
		p++;
		if (p == e || *p < '0' || *p > '9') {
			ps->p = p;
			return fail(ps, "bad number (digit expected after '.')");
		}
		while (p < e && *p >= '0' && *p <= '9')
			p++;
	}
	if (p < e && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < e && (*p == '+' || *p == '-'))
			p++;
		if (p == e || *p < '0' || *p > '9') {
			ps->p = p;
			return fail(ps, "bad number (digit expected in the exponent)");
		}
		while (p < e && *p >= '0' && *p <= '9')
			p++;
	}
	v->s = strndup(s, (size_t)(p - s));
	if (!v->s)
		return fail(ps, "out of memory");
	v->len = (size_t)(p - s);
	v->type = JV_NUM;
	ps->p = p;
	return 0;
}

static bool literal(struct parser *ps, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
		return false;
	ps->p += n;
	return true;
}

static int parse_value(struct parser *ps, jv *v, int depth);

/* Appends a zeroed slot to a container; its index is v->n - 1. */
static jv *grow(struct parser *ps, jv *v, size_t *cap)
{
	if (v->n == *cap) {
		size_t c = *cap ? *cap * 2 : 8;
		jv *k = realloc(v->kids, c * sizeof *k);
		if (!k)
			return fail(ps, "out of memory"), NULL;
		v->kids = k;
		if (v->type == JV_OBJ) {
			char **keys = realloc(v->keys, c * sizeof *keys);
			if (!keys)
				return fail(ps, "out of memory"), NULL;
			v->keys = keys;
		}
		*cap = c;
	}
	jv *kid = &v->kids[v->n];
	memset(kid, 0, sizeof *kid);
	if (v->type == JV_OBJ)
		v->keys[v->n] = NULL;
	v->n++;
	return kid;
}

static int parse_container(struct parser *ps, jv *v, int depth)
{
	bool obj = *ps->p == '{';
	char close = obj ? '}' : ']';
	size_t cap = 0;
	v->type = obj ? JV_OBJ : JV_ARR;
	if (depth >= JSON_MAX_DEPTH)
		return fail(ps, "nested more than %d deep", JSON_MAX_DEPTH);
	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		return 0;
	}
	for (;;) {
		jv *kid = grow(ps, v, &cap);
		if (!kid)
			return -1;
		if (obj) {
			size_t klen;
			if (ps->p == ps->end || *ps->p != '"')
				return fail(ps, "member name expected");
			if (parse_string(ps, &v->keys[v->n - 1], &klen))
				return -1;
			skip_ws(ps);
			if (ps->p == ps->end || *ps->p != ':')
				return fail(ps, "':' expected");
			ps->p++;
			skip_ws(ps);
		}
		if (parse_value(ps, kid, depth + 1))
			return -1;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			skip_ws(ps);
			continue;
		}
		if (ps->p < ps->end && *ps->p == close) {
			ps->p++;
			return 0;
		}
		return fail(ps, "',' or '%c' expected", close);
	}
}

static int parse_value(struct parser *ps, jv *v, int depth)
{
	if (ps->p == ps->end)
		return fail(ps, "value expected, text ends");
	switch (*ps->p) {
	case '{':
	case '[':
		return parse_container(ps, v, depth);
	case '"':
		v->type = JV_STR;
		return parse_string(ps, &v->s, &v->len);
	case 't':
	case 'f':
	case 'n':
		if (literal(ps, "true")) {
			v->type = JV_BOOL;
			v->b = true;
		} else if (literal(ps, "false")) {
			v->type = JV_BOOL;
		} else if (literal(ps, "null")) {
			v->type = JV_NULL;
		} else {
			return fail(ps, "unknown word");
		}
		return 0;
	default:
		return parse_number(ps, v);
	}
}

int jv_parse(const char *text, size_t len, jv *out, char *why, size_t why_len)
{
	struct parser ps = {text, text + len, text, why, why_len, false};
	memset(out, 0, sizeof *out);
	if (why && why_len)
		why[0] = 0;
	skip_ws(&ps);
	if (parse_value(&ps, out, 0) == 0) {
		skip_ws(&ps);
		if (ps.p == ps.end)
			return 0;
		fail(&ps, "text after the value");
	}
	jv_free(out);
	return -1;
}

void jv_free(jv *v)
{
	for (size_t i = 0; i < v->n; i++) {
		jv_free(&v->kids[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->kids);
	free(v->keys);
	free(v->s);
	memset(v, 0, sizeof *v);
}

const jv *jv_get(const jv *v, const char *name)
{
	if (!v || v->type != JV_OBJ)
		return NULL;
	for (size_t i = 0; i < v->n; i++)
		if (v->keys[i] && !strcmp(v->keys[i], name))
			return &v->kids[i];
	return NULL;
}

bool jv_get_str(const jv *v, const char *name, const char **out)
{
	const jv *m = jv_get(v, name);
	if (!m || m->type != JV_STR)
		return false;
	*out = m->s;
	return true;
}

bool jv_u64(const jv *v, uint64_t *out)
{
	if (!v || v->type != JV_NUM || v->s[0] == '-' || strpbrk(v->s, ".eE"))
		return false;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v->s, &end, 10);
	if (errno || *end)
		return false;
	*out = x;
	return true;
}

bool jv_get_u64(const jv *v, const char *name, uint64_t *out)
{
	return jv_u64(jv_get(v, name), out);
}

bool jv_get_double(const jv *v, const char *name, double *out)
{
	const jv *m = jv_get(v, name);
	if (!m || m->type != JV_NUM)
		return false;
	*out = strtod(m->s, NULL);
	return true;
}

bool jv_get_bool(const jv *v, const char *name, bool *out)
{
	const jv *m = jv_get(v, name);
	if (!m || m->type != JV_BOOL)
		return false;
	*out = m->b;
	return true;
}

void jv_write(struct json *w, const jv *v)
{
	switch (v->type) {
	case JV_NULL: json_null(w, NULL); break;
	case JV_BOOL: json_bool(w, NULL, v->b); break;
	case JV_NUM: json_raw(w, NULL, v->s); break;
	case JV_STR: json_str_n(w, NULL, v->s, v->len); break;
	case JV_ARR:
		json_arr_begin(w, NULL);
		for (size_t i = 0; i < v->n; i++)
			jv_write(w, &v->kids[i]);
		json_arr_end(w);
		break;
	case JV_OBJ:
		json_obj_begin(w, NULL);
		for (size_t i = 0; i < v->n; i++) {
			json_name(w, v->keys[i]);
			jv_write(w, &v->kids[i]);
		}
		json_obj_end(w);
		break;
	}
}
