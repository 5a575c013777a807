/* changerec.c - a change's JSONL record. See changerec.h. */
#include "changerec.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shmkv.h>

#include "json.h"
#include "keyenc.h"
#include "loaderreply.h"

/* Printable ASCII, as every type name and time is: a header value of other
 * bytes is refused here, not passed on cut at a NUL or with U+FFFD in
 * place of its bytes (the JSON writer's way with what is not UTF-8). */
static int ascii(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return 0;
	return 1;
}

/* The value of a PUT into w: the body as the type of x-shmkv-type (default
 * string) says; NULL, or why it is refused. */
static const char *put_value(struct json *w, const struct changerec_put *p)
{
	const char *body = p->body ? p->body : "";
	size_t len = p->body ? p->len : 0;
	char type[16] = "string";
	if (p->type) {
		if (p->type_len >= sizeof type || !ascii(p->type, p->type_len))
			return "x-shmkv-type: not a type (string, bytes, i64, bool, f64, f32list, f64list, "
			       "i64list, strlist)";
		snprintf(type, sizeof type, "%.*s", (int)p->type_len, p->type);
	}
	if (!strcmp(type, "string")) {
		if (!shmkv_utf8_valid((const uint8_t *)body, len))
			return "a string value must be UTF-8 (send other bytes with x-shmkv-type: bytes)";
		json_str_n(w, "value", body, len);
	} else if (!strcmp(type, "bytes")) {
		json_base64(w, "value", body, len);
	} else {
		/* the other types: the body is the JSON value (42, true, [1.5, "inf"]),
		 * checked and written on one line */
		char *text = loaderreply_compact(body, len);
		if (!text)
			return "the body of a non-text type is its JSON value (42, true, [1, 2])";
		json_raw(w, "value", text);
		free(text);
	}
	json_str(w, "type", type); /* an unknown type: the loader says so */
	if (p->expires) {
		char t[64], *end;
		if (p->expires_len >= sizeof t || !ascii(p->expires, p->expires_len))
			return "x-shmkv-expires: a Unix time or an RFC 3339 time";
		snprintf(t, sizeof t, "%.*s", (int)p->expires_len, p->expires);
		/* a Unix time is digits alone: strtoll would also take " 12", "+12" */
		errno = 0;
		long long n = strtoll(t, &end, 10);
		if (t[0] >= '0' && t[0] <= '9' && !*end && !errno)
			json_i64(w, "expires", n);
		else
			json_str(w, "expires", t); /* RFC 3339: the builder checks it */
	}
	return NULL;
}

char *changerec_make(const char *key, size_t key_len, const struct changerec_put *put,
		     const char **why)
{
	struct json w;
	json_init(&w);
	keyenc_json(&w, key, key_len);
	*why = NULL;
	if (!put)
		json_bool(&w, "remove", true);
	else
		*why = put_value(&w, put);
	char *text = json_finish(&w);
	if (*why || !text) {
		free(text);
		return NULL;
	}
	text[strcspn(text, "\n")] = 0;
	return text;
}
