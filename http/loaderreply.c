/* loaderreply.c - see loaderreply.h. */
#include "loaderreply.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

char *loaderreply_compact(const char *body, size_t len)
{
	json_error_t je;
	json_t *v = json_loadb(body, len, JSON_DECODE_ANY, &je);
	char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_ENSURE_ASCII) : NULL;
	json_decref(v);
	return text;
}

static void copy(char *dst, size_t n, json_t *j, const char *key)
{
	const char *s = json_string_value(json_object_get(j, key));
	snprintf(dst, n, "%s", s ? s : "");
}

int loaderreply_parse(const char *line, size_t len, struct loader_reply *r)
{
	memset(r, 0, sizeof *r);
	json_error_t je;
	json_t *j = json_loadb(line, len, 0, &je);
	if (!j || !json_is_object(j)) {
		snprintf(r->error, sizeof r->error, "%s", j ? "not an object" : je.text);
		json_decref(j);
		return -1;
	}
	r->ok = json_is_true(json_object_get(j, "ok"));
	r->generation = (int64_t)json_integer_value(json_object_get(j, "generation"));
	copy(r->error, sizeof r->error, j, "error");
	copy(r->reason, sizeof r->reason, j, "reason");
	copy(r->code, sizeof r->code, j, "code");
	json_decref(j);
	return 0;
}
