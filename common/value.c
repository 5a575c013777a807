/* value.c - JSON and plain printing of values. See value.h. */
#include "value.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A float must read back as a float: make sure a '.' or an exponent shows. */
static void ensure_float(char *buf)
{
	if (!strpbrk(buf, ".eE"))
		strcat(buf, ".0");
}

static bool fmt_nonfinite(char *buf, double v, uint64_t bits, uint64_t quiet_nan, int hex_digits)
{
	if (isnan(v)) {
		if (bits == quiet_nan)
			strcpy(buf, "nan");
		else
			snprintf(buf, NUM_BUF, "nan:0x%0*" PRIx64, hex_digits, bits);
		return true;
	}
	strcpy(buf, v > 0 ? "inf" : "-inf");
	return true;
}

bool fmt_f64_json(char *buf, double v)
{
	if (!isfinite(v)) {
		uint64_t bits;
		memcpy(&bits, &v, 8);
		return fmt_nonfinite(buf, v, bits, UINT64_C(0x7ff8000000000000), 16);
	}
	snprintf(buf, NUM_BUF, "%.17g", v);
	ensure_float(buf);
	return false;
}

bool fmt_f32_json(char *buf, float v)
{
	if (!isfinite(v)) {
		uint32_t bits;
		memcpy(&bits, &v, 4);
		return fmt_nonfinite(buf, v, bits, UINT32_C(0x7fc00000), 8);
	}
	snprintf(buf, NUM_BUF, "%.9g", (double)v);
	ensure_float(buf);
	return false;
}

/* Shortest text that reads back to the same value (plain output). */
static void fmt_f64_short(char *buf, double v)
{
	if (fmt_f64_json(buf, v))
		return;
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, NUM_BUF, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	ensure_float(buf);
}

static void fmt_f32_short(char *buf, float v)
{
	if (fmt_f32_json(buf, v))
		return;
	for (int prec = 1; prec <= 9; prec++) {
		snprintf(buf, NUM_BUF, "%.*g", prec, (double)v);
		if (strtof(buf, NULL) == v)
			break;
	}
	ensure_float(buf);
}

static double f64_at(const shmkv_value *v, size_t i)
{
	double d;
	memcpy(&d, (const char *)v->data + 8 * i, 8);
	return d;
}

static float f32_at(const shmkv_value *v, size_t i)
{
	float f;
	memcpy(&f, (const char *)v->data + 4 * i, 4);
	return f;
}

static int64_t i64_at(const shmkv_value *v, size_t i)
{
	int64_t x;
	memcpy(&x, (const char *)v->data + 8 * i, 8);
	return x;
}

long value_strlist_bad(const shmkv_value *v)
{
	shmkv_strlist l;
	if (v->type != SHMKV_TYPE_STRLIST)
		return -1;
	if (shmkv_value_strlist(v, &l) != 0)
		return 0;
	for (size_t i = 0; i < l.count; i++)
		if (!shmkv_strlist_at(&l, i, NULL))
			return (long)i;
	return -1;
}

static void value_f64(struct json *w, double d)
{
	char buf[NUM_BUF];
	if (fmt_f64_json(buf, d))
		json_str(w, NULL, buf);
	else
		json_raw(w, NULL, buf);
}

static void value_f32(struct json *w, float f)
{
	char buf[NUM_BUF];
	if (fmt_f32_json(buf, f))
		json_str(w, NULL, buf);
	else
		json_raw(w, NULL, buf);
}

void value_json(struct json *w, const shmkv_value *v)
{
	switch (v->type) {
	case SHMKV_TYPE_BYTES: json_base64(w, NULL, v->data, v->size); return;
	case SHMKV_TYPE_STRING: json_str_n(w, NULL, v->data, v->size); return;
	case SHMKV_TYPE_I64: json_i64(w, NULL, i64_at(v, 0)); return;
	case SHMKV_TYPE_BOOL: json_bool(w, NULL, *(const uint8_t *)v->data != 0); return;
	case SHMKV_TYPE_F64: value_f64(w, f64_at(v, 0)); return;
	default: break;
	}
	json_arr_begin(w, NULL);
	switch (v->type) {
	case SHMKV_TYPE_F32LIST:
		for (size_t i = 0; i < v->count; i++)
			value_f32(w, f32_at(v, i));
		break;
	case SHMKV_TYPE_F64LIST:
		for (size_t i = 0; i < v->count; i++)
			value_f64(w, f64_at(v, i));
		break;
	case SHMKV_TYPE_I64LIST:
		for (size_t i = 0; i < v->count; i++)
			json_i64(w, NULL, i64_at(v, i));
		break;
	case SHMKV_TYPE_STRLIST: {
		shmkv_strlist l;
		if (shmkv_value_strlist(v, &l) != 0)
			break;
		for (size_t i = 0; i < l.count; i++) {
			size_t n;
			const char *s = shmkv_strlist_at(&l, i, &n);
			json_str_n(w, NULL, s, n);
		}
		break;
	}
	default: break; /* the reader rejects unknown types */
	}
	json_arr_end(w);
}

void value_plain(FILE *f, const shmkv_value *v)
{
	char buf[NUM_BUF];
	switch (v->type) {
	case SHMKV_TYPE_BYTES: base64_write(f, v->data, v->size); break;
	case SHMKV_TYPE_STRING: fwrite(v->data, 1, v->size, f); break;
	case SHMKV_TYPE_I64: fprintf(f, "%" PRId64, i64_at(v, 0)); break;
	case SHMKV_TYPE_BOOL: fputs(*(const uint8_t *)v->data ? "true" : "false", f); break;
	case SHMKV_TYPE_F64:
		fmt_f64_short(buf, f64_at(v, 0));
		fputs(buf, f);
		break;
	case SHMKV_TYPE_F32LIST:
	case SHMKV_TYPE_F64LIST:
	case SHMKV_TYPE_I64LIST:
		fputc('[', f);
		for (size_t i = 0; i < v->count; i++) {
			if (i)
				fputs(", ", f);
			if (v->type == SHMKV_TYPE_I64LIST) {
				fprintf(f, "%" PRId64, i64_at(v, i));
				continue;
			}
			if (v->type == SHMKV_TYPE_F32LIST)
				fmt_f32_short(buf, f32_at(v, i));
			else
				fmt_f64_short(buf, f64_at(v, i));
			fputs(buf, f);
		}
		fputc(']', f);
		break;
	case SHMKV_TYPE_STRLIST: {
		struct json w; /* the strings quoted and escaped, on one line */
		json_init_file(&w, f, false);
		w.depth = 1; /* as if nested: no newline after the array */
		w.first[0] = true;
		value_json(&w, v);
		break;
	}
	default: break;
	}
	fputc('\n', f);
}
