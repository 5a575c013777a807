/* json.c - streaming JSON writer, UTF-8 validation, base64. See json.h. */
#include "json.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void json_init(json_writer *w, FILE *f, bool pretty)
{
	memset(w, 0, sizeof *w);
	w->f = f;
	w->pretty = pretty;
}

static void indent(json_writer *w)
{
	fputc('\n', w->f);
	for (int i = 0; i < w->depth; i++)
		fputs("    ", w->f);
}

/* Separator before a value or a member name. */
static void before(json_writer *w)
{
	if (w->after_name) {
		w->after_name = false;
		return;
	}
	if (w->depth == 0)
		return;
	bool *first = &w->first[w->depth - 1];
	if (!*first)
		fputc(',', w->f);
	if (w->pretty)
		indent(w);
	else if (!*first)
		fputc(' ', w->f);
	*first = false;
}

/* After a complete value: a top-level one ends its line. */
static void after(json_writer *w)
{
	if (w->depth == 0)
		fputc('\n', w->f);
}

static void open_container(json_writer *w, char c, bool object)
{
	before(w);
	fputc(c, w->f);
	if (w->depth < JSON_MAX_DEPTH) {
		w->first[w->depth] = true;
		w->in_object[w->depth] = object;
	}
	w->depth++;
}

static void close_container(json_writer *w, char c)
{
	bool empty = w->depth <= JSON_MAX_DEPTH ? w->first[w->depth - 1] : false;
	w->depth--;
	if (w->pretty && !empty)
		indent(w);
	fputc(c, w->f);
	after(w);
}

void json_obj_begin(json_writer *w) { open_container(w, '{', true); }
void json_obj_end(json_writer *w) { close_container(w, '}'); }
void json_arr_begin(json_writer *w) { open_container(w, '[', false); }
void json_arr_end(json_writer *w) { close_container(w, ']'); }

size_t utf8_seq_len(const unsigned char *p, size_t n)
{
	unsigned c = p[0];
	if (c < 0x80)
		return 1;
	size_t len;
	unsigned lo = 0x80, hi = 0xBF; /* range of the second byte */
	if (c >= 0xC2 && c <= 0xDF) {
		len = 2;
	} else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		if (c == 0xE0)
			lo = 0xA0; /* overlong */
		else if (c == 0xED)
			hi = 0x9F; /* surrogates */
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		if (c == 0xF0)
			lo = 0x90; /* overlong */
		else if (c == 0xF4)
			hi = 0x8F; /* over U+10FFFF */
	} else {
		return 0;
	}
	if (n < len || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (p[i] < 0x80 || p[i] > 0xBF)
			return 0;
	return len;
}

bool utf8_valid(const void *s, size_t n)
{
	const unsigned char *p = s;
	for (size_t i = 0; i < n;) {
		size_t l = utf8_seq_len(p + i, n - i);
		if (!l)
			return false;
		i += l;
	}
	return true;
}

static void write_escaped(FILE *f, const unsigned char *p, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n;) {
		unsigned c = p[i];
		size_t l = utf8_seq_len(p + i, n - i);
		if (l == 0) {
			fputs("\\ufffd", f); /* not UTF-8: replacement character */
			i++;
			continue;
		}
		if (l == 3 && c == 0xE2 && p[i + 1] == 0x80 && (p[i + 2] == 0xA8 || p[i + 2] == 0xA9)) {
			fprintf(f, "\\u%04x", 0x2000u + (p[i + 2] - 0x80u)); /* U+2028/9 */
		} else if (l > 1) {
			fwrite(p + i, 1, l, f);
		} else if (c == '"' || c == '\\') {
			fputc('\\', f);
			fputc((int)c, f);
		} else if (c == '\n') {
			fputs("\\n", f);
		} else if (c == '\t') {
			fputs("\\t", f);
		} else if (c == '\r') {
			fputs("\\r", f);
		} else if (c == '\b') {
			fputs("\\b", f);
		} else if (c == '\f') {
			fputs("\\f", f);
		} else if (c < 0x20 || c == 0x7F) {
			fprintf(f, "\\u%04x", c);
		} else {
			fputc((int)c, f);
		}
		i += l;
	}
	fputc('"', f);
}

void json_name(json_writer *w, const char *name)
{
	before(w);
	write_escaped(w->f, (const unsigned char *)name, strlen(name));
	fputs(": ", w->f);
	w->after_name = true;
}

void json_str_n(json_writer *w, const void *s, size_t n)
{
	before(w);
	write_escaped(w->f, s, n);
	after(w);
}

void json_str(json_writer *w, const char *s)
{
	json_str_n(w, s, strlen(s));
}

void base64_write(FILE *f, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)b[i] << 16;
		if (i + 1 < n)
			v |= (unsigned)b[i + 1] << 8;
		if (i + 2 < n)
			v |= b[i + 2];
		fputc(b64[v >> 18 & 63], f);
		fputc(b64[v >> 12 & 63], f);
		fputc(i + 1 < n ? b64[v >> 6 & 63] : '=', f);
		fputc(i + 2 < n ? b64[v & 63] : '=', f);
	}
}

void json_base64(json_writer *w, const void *p, size_t n)
{
	before(w);
	fputc('"', w->f);
	base64_write(w->f, p, n);
	fputc('"', w->f);
	after(w);
}

void json_u64(json_writer *w, uint64_t v)
{
	before(w);
	fprintf(w->f, "%" PRIu64, v);
	after(w);
}

void json_i64(json_writer *w, int64_t v)
{
	before(w);
	fprintf(w->f, "%" PRId64, v);
	after(w);
}

void json_bool(json_writer *w, bool v)
{
	before(w);
	fputs(v ? "true" : "false", w->f);
	after(w);
}

void json_null(json_writer *w)
{
	before(w);
	fputs("null", w->f);
	after(w);
}

void json_stat(json_writer *w, double v)
{
	if (!isfinite(v)) {
		json_null(w);
		return;
	}
	before(w);
	fprintf(w->f, "%.6g", v);
	after(w);
}

void json_raw(json_writer *w, const char *text)
{
	before(w);
	fputs(text, w->f);
	after(w);
}

void json_kv_str(json_writer *w, const char *name, const char *s)
{
	json_name(w, name);
	json_str(w, s);
}

void json_kv_u64(json_writer *w, const char *name, uint64_t v)
{
	json_name(w, name);
	json_u64(w, v);
}

void json_kv_i64(json_writer *w, const char *name, int64_t v)
{
	json_name(w, name);
	json_i64(w, v);
}

void json_kv_bool(json_writer *w, const char *name, bool v)
{
	json_name(w, name);
	json_bool(w, v);
}

void json_kv_stat(json_writer *w, const char *name, double v)
{
	json_name(w, name);
	json_stat(w, v);
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
