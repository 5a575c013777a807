/* jv_write.c - a parsed value back out through the writer (see jv.h). */
#include "jv.h"

#include "json.h"

_Static_assert(JV_MAX_DEPTH <= JSON_MAX_DEPTH, "jv_parse accepts what the writer can nest");

void jv_write(struct json *w, const jv *v)
{
	char num[40];
	size_t len;
	const char *s;
	switch (jv_type(v)) {
	case JV_NULL: json_null(w, NULL); return;
	case JV_BOOL: json_bool(w, NULL, jv_is_true(v)); return;
	case JV_NUM: json_raw(w, NULL, jv_num_text(v, num, sizeof num)); return;
	case JV_STR:
		s = jv_str(v, &len);
		json_str_n(w, NULL, s, len);
		return;
	case JV_ARR:
		json_arr_begin(w, NULL);
		for (size_t i = 0; i < jv_size(v); i++)
			jv_write(w, jv_item(v, i));
		json_arr_end(w);
		return;
	case JV_OBJ:
		json_obj_begin(w, NULL);
		for (const void *it = jv_first(v); it; it = jv_next(v, it)) {
			json_name(w, jv_key(it));
			jv_write(w, jv_value(it));
		}
		json_obj_end(w);
		return;
	}
}
