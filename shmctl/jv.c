/* jv.c - jansson behind jv.h (the only file that includes <jansson.h>). */
#include "jv.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static int depth_of(const json_t *v)
{
	int d = 0;
	if (json_is_array(v)) {
		size_t i;
		json_t *x;
		json_array_foreach(v, i, x) {
			int k = depth_of(x);
			d = k > d ? k : d;
		}
		return d + 1;
	}
	if (json_is_object(v)) {
		const char *k;
		json_t *x;
		json_object_foreach((json_t *)v, k, x) {
			int n = depth_of(x);
			d = n > d ? n : d;
		}
		return d + 1;
	}
	return 0;
}

jv *jv_parse(const char *text, size_t len, char *why, size_t why_len)
{
	json_error_t e;
	json_t *v = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
	if (!v) {
		snprintf(why, why_len, "%s at byte %d", e.text, e.position);
		return NULL;
	}
	if (depth_of(v) > JV_MAX_DEPTH) {
		json_decref(v);
		snprintf(why, why_len, "nested deeper than %d levels", JV_MAX_DEPTH);
		return NULL;
	}
	return v;
}

void jv_free(jv *v)
{
	json_decref(v);
}

enum jv_type jv_type(const jv *v)
{
	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_TRUE:
	case JSON_FALSE: return JV_BOOL;
	case JSON_INTEGER:
	case JSON_REAL: return JV_NUM;
	case JSON_STRING: return JV_STR;
	case JSON_ARRAY: return JV_ARR;
	case JSON_OBJECT: return JV_OBJ;
	default: return JV_NULL;
	}
}

size_t jv_size(const jv *v)
{
	if (json_is_array(v))
		return json_array_size(v);
	if (json_is_object(v))
		return json_object_size(v);
	return 0;
}

const jv *jv_item(const jv *v, size_t i)
{
	return json_array_get(v, i); /* NULL for no array, or past the end */
}

const void *jv_first(const jv *obj)
{
	return json_is_object(obj) ? json_object_iter((json_t *)obj) : NULL;
}

const void *jv_next(const jv *obj, const void *it)
{
	return json_object_iter_next((json_t *)obj, (void *)it);
}

const char *jv_key(const void *it)
{
	return json_object_iter_key((void *)it);
}

const jv *jv_value(const void *it)
{
	return json_object_iter_value((void *)it);
}

const jv *jv_get(const jv *v, const char *name)
{
	return json_is_object(v) ? json_object_get(v, name) : NULL;
}

const char *jv_str(const jv *v, size_t *len)
{
	if (!json_is_string(v))
		return NULL;
	if (len)
		*len = json_string_length(v);
	return json_string_value(v);
}

bool jv_u64(const jv *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (uint64_t)json_integer_value(v);
	return true;
}

const char *jv_num_text(const jv *v, char *buf, size_t len)
{
	if (json_is_integer(v)) {
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return buf;
	}
	double d = json_real_value(v); /* jansson never parses a non-finite real */
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, len, "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	if (!strpbrk(buf, ".e")) /* stays a real when read back: 2.0, not 2 */
		snprintf(buf + strlen(buf), len - strlen(buf), ".0");
	return buf;
}

bool jv_is_true(const jv *v)
{
	return json_is_true(v);
}

bool jv_get_str(const jv *v, const char *name, const char **out)
{
	const char *s = jv_str(jv_get(v, name), NULL);
	if (s)
		*out = s;
	return s != NULL;
}

bool jv_get_u64(const jv *v, const char *name, uint64_t *out)
{
	return jv_u64(jv_get(v, name), out);
}

bool jv_get_bool(const jv *v, const char *name, bool *out)
{
	const json_t *b = jv_get(v, name);
	if (!json_is_boolean(b))
		return false;
	*out = json_is_true(b);
	return true;
}
