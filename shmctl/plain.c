/* plain.c - parsed JSON as aligned text. See plain.h. */
#include "plain.h"

#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "json.h"

/* Columns a string takes: UTF-8 code points. */
static size_t width(const char *s)
{
	size_t w = 0;
	for (; *s; s++)
		w += ((unsigned char)*s & 0xC0) != 0x80;
	return w;
}

static void pad(FILE *f, const char *s, size_t w)
{
	fputs(s, f);
	for (size_t n = width(s); n < w; n++)
		fputc(' ', f);
}

/* A string with control characters escaped, so a line stays a line. */
static void put_text(FILE *f, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\n')
			fputs("\\n", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c < 0x20 || c == 0x7F)
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
}

/* A value as one line of text (malloc'd): strings raw, null "-", others as
 * compact JSON. */
static char *plain_value(const jv *v)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (!f)
		return NULL;
	char num[40];
	size_t len;
	const char *s;
	switch (jv_type(v)) {
	case JV_NULL: fputs("-", f); break;
	case JV_BOOL: fputs(jv_is_true(v) ? "true" : "false", f); break;
	case JV_NUM: fputs(jv_num_text(v, num, sizeof num), f); break;
	case JV_STR:
		s = jv_str(v, &len);
		put_text(f, s, len);
		break;
	case JV_ARR:
	case JV_OBJ: {
		struct json w;
		json_init_file(&w, f, false);
		jv_write(&w, v);
		break;
	}
	}
	fclose(f);
	if (buf && n && buf[n - 1] == '\n')
		buf[n - 1] = 0; /* the writer ends a top-level value with a newline */
	return buf;
}

static bool is_bytes_name(const char *name)
{
	const char *u = strrchr(name, '_');
	const char *last = u ? u + 1 : name;
	return !strcmp(last, "bytes") || !strcmp(last, "size");
}

static bool scalar(const jv *v)
{
	return jv_type(v) != JV_ARR && jv_type(v) != JV_OBJ;
}

static bool array_of_scalars(const jv *v)
{
	if (jv_type(v) != JV_ARR)
		return false;
	for (size_t i = 0; i < jv_size(v); i++)
		if (!scalar(jv_item(v, i)))
			return false;
	return true;
}

/* Collected lines and tables of plain_object(). */
struct line {
	char *name, *text;
};
struct table {
	char *name;
	const jv *arr;
};
struct lines {
	struct line *l;
	size_t n, cap;
	struct table *t;
	size_t nt, capt;
};

static void add_line(struct lines *ls, const char *name, char *text)
{
	if (ls->n == ls->cap) {
		size_t c = ls->cap ? ls->cap * 2 : 16;
		struct line *l = realloc(ls->l, c * sizeof *l);
		if (!l) {
			free(text);
			return;
		}
		ls->l = l;
		ls->cap = c;
	}
	ls->l[ls->n].name = strdup(name);
	ls->l[ls->n].text = text;
	ls->n++;
}

static void add_table(struct lines *ls, const char *name, const jv *arr)
{
	if (ls->nt == ls->capt) {
		size_t c = ls->capt ? ls->capt * 2 : 4;
		struct table *t = realloc(ls->t, c * sizeof *t);
		if (!t)
			return;
		ls->t = t;
		ls->capt = c;
	}
	ls->t[ls->nt].name = strdup(name);
	ls->t[ls->nt].arr = arr;
	ls->nt++;
}

static char *join_scalars(const jv *arr)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (!f)
		return NULL;
	if (jv_size(arr) == 0)
		fputs("-", f);
	for (size_t i = 0; i < jv_size(arr); i++) {
		char *t = plain_value(jv_item(arr, i));
		fprintf(f, "%s%s", i ? ", " : "", t ? t : "?");
		free(t);
	}
	fclose(f);
	return buf;
}

static void collect(struct lines *ls, const jv *obj, const char *prefix, const char *const *skip)
{
	for (const void *it = jv_first(obj); it; it = jv_next(obj, it)) {
		const char *key = jv_key(it);
		const jv *v = jv_value(it);
		bool skipped = false;
		for (const char *const *s = skip; !*prefix && s && *s; s++)
			skipped |= !strcmp(*s, key);
		if (skipped)
			continue;
		char name[256];
		snprintf(name, sizeof name, "%s%s%s", prefix, *prefix ? "." : "", key);
		if (jv_type(v) == JV_OBJ && jv_size(v)) {
			collect(ls, v, name, NULL);
		} else if (jv_type(v) == JV_ARR && !array_of_scalars(v)) {
			add_table(ls, name, v);
		} else if (jv_type(v) == JV_ARR) {
			add_line(ls, name, join_scalars(v));
		} else {
			char *t = plain_value(v);
			uint64_t bytes;
			if (t && is_bytes_name(key) && jv_u64(v, &bytes) && bytes >= 1024) {
				char h[32], *t2 = NULL;
				if (asprintf(&t2, "%s (%s)", t, fmt_bytes(bytes, h, sizeof h)) >= 0) {
					free(t);
					t = t2;
				}
			}
			add_line(ls, name, t);
		}
	}
}

void plain_object(FILE *f, const jv *obj, const char *const *skip)
{
	struct lines ls = {0};
	collect(&ls, obj, "", skip);
	size_t w = 0;
	for (size_t i = 0; i < ls.n; i++)
		if (ls.l[i].name && width(ls.l[i].name) > w)
			w = width(ls.l[i].name);
	for (size_t i = 0; i < ls.n; i++) {
		pad(f, ls.l[i].name ? ls.l[i].name : "?", w + 2);
		fprintf(f, "%s\n", ls.l[i].text ? ls.l[i].text : "?");
		free(ls.l[i].name);
		free(ls.l[i].text);
	}
	for (size_t i = 0; i < ls.nt; i++) {
		fprintf(f, "%s%s:%s\n", ls.n || i ? "\n" : "", ls.t[i].name ? ls.t[i].name : "?",
			jv_size(ls.t[i].arr) ? "" : " none");
		if (jv_size(ls.t[i].arr))
			plain_table(f, ls.t[i].arr, NULL, "  ");
		free(ls.t[i].name);
	}
	free(ls.l);
	free(ls.t);
}

void plain_table(FILE *f, const jv *arr, const char *const *cols, const char *indent)
{
	/* the columns: given, or every member name in first-seen order */
	const char **names = NULL;
	size_t nc = 0;
	if (cols) {
		while (cols[nc])
			nc++;
		names = malloc((nc ? nc : 1) * sizeof *names);
		if (!names)
			return;
		memcpy(names, cols, nc * sizeof *names);
	} else {
		size_t cap = 0;
		for (size_t r = 0; r < jv_size(arr); r++) {
			const jv *row = jv_item(arr, r);
			for (const void *it = jv_first(row); it; it = jv_next(row, it)) {
				bool seen = false;
				for (size_t c = 0; c < nc && !seen; c++)
					seen = !strcmp(names[c], jv_key(it));
				if (seen)
					continue;
				if (nc == cap) {
					cap = cap ? cap * 2 : 8;
					const char **nn = realloc(names, cap * sizeof *nn);
					if (!nn) {
						free(names);
						return;
					}
					names = nn;
				}
				names[nc++] = jv_key(it);
			}
		}
		if (nc == 0) { /* no objects: one value a line */
			for (size_t r = 0; r < jv_size(arr); r++) {
				char *t = plain_value(jv_item(arr, r));
				fprintf(f, "%s%s\n", indent, t ? t : "?");
				free(t);
			}
			free(names);
			return;
		}
	}

	/* the cells, the header first */
	size_t rows = jv_size(arr) + 1;
	char **cell = calloc(rows * nc, sizeof *cell);
	size_t *w = calloc(nc, sizeof *w);
	if (!cell || !w) {
		free(cell);
		free(w);
		free(names);
		return;
	}
	for (size_t c = 0; c < nc; c++) {
		char *h = strdup(names[c]);
		for (char *p = h; p && *p; p++)
			*p = (char)(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);
		cell[c] = h;
	}
	for (size_t r = 1; r < rows; r++)
		for (size_t c = 0; c < nc; c++) {
			const jv *v = jv_get(jv_item(arr, r - 1), names[c]);
			char h[32];
			uint64_t bytes;
			if (v && is_bytes_name(names[c]) && jv_u64(v, &bytes))
				cell[r * nc + c] = strdup(fmt_bytes(bytes, h, sizeof h));
			else
				cell[r * nc + c] = v ? plain_value(v) : strdup("-");
		}
	for (size_t i = 0; i < rows * nc; i++) {
		size_t c = i % nc, l = cell[i] ? width(cell[i]) : 1;
		if (l > w[c])
			w[c] = l;
	}
	for (size_t r = 0; r < rows; r++) {
		fputs(indent, f);
		for (size_t c = 0; c < nc; c++) {
			const char *t = cell[r * nc + c] ? cell[r * nc + c] : "?";
			if (c + 1 < nc)
				pad(f, t, w[c] + 2);
			else
				fputs(t, f);
		}
		fputc('\n', f);
	}
	for (size_t i = 0; i < rows * nc; i++)
		free(cell[i]);
	free(cell);
	free(w);
	free(names);
}
