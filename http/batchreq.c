/* batchreq.c - parsing a batch request. See batchreq.h. */
#include "batchreq.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* Standard base64 (RFC 4648; common/json.h's decoder, declared here because
 * that header's names clash with jansson's). */
long base64_decode(const char *text, unsigned char *out);

void batchreq_free(struct batchreq *r)
{
	free(r->keys);
	free(r->decoded);
	json_decref(r->doc);
	memset(r, 0, sizeof *r);
}

int batchreq_parse(const char *body, size_t len, size_t max_keys, struct batchreq *r, char *why,
		   size_t why_len)
{
	memset(r, 0, sizeof *r);
	json_error_t jerr;
	json_t *doc = json_loadb(body, len, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &jerr);
	r->doc = doc;
	json_t *keys = doc ? json_object_get(doc, "keys") : NULL;
	if (!doc) {
		snprintf(why, why_len, "body: not JSON (line %d, column %d: %s)", jerr.line, jerr.column,
			 jerr.text);
		return -EINVAL;
	}
	if (!json_is_array(keys)) {
		snprintf(why, why_len, "body: expected {\"keys\": [KEY, ...]}");
		batchreq_free(r);
		return -EINVAL;
	}
	size_t n = json_array_size(keys);
	if (n > max_keys) {
		snprintf(why, why_len, "%zu keys: at most %zu a request (max_batch_keys)", n, max_keys);
		batchreq_free(r);
		return -E2BIG;
	}
	r->keys = calloc(n ? n : 1, sizeof *r->keys);
	r->decoded = malloc(len + 1); /* base64 shrinks: every key fits */
	if (!r->keys || !r->decoded) {
		batchreq_free(r);
		return -ENOMEM;
	}
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(keys, i);
		/* that member alone: another one is a client's mistake to say */
		json_t *b = json_is_object(e) && json_object_size(e) == 1
				    ? json_object_get(e, "base64")
				    : NULL;
		if (json_is_string(e)) {
			r->keys[i].data = json_string_value(e);
			r->keys[i].len = json_string_length(e);
			continue;
		}
		long dl = -1;
		if (json_is_string(b) && json_string_length(b) == strlen(json_string_value(b)))
			dl = base64_decode(json_string_value(b), r->decoded + used);
		if (dl < 0) {
			snprintf(why, why_len, "keys[%zu]: expected a string or {\"base64\": \"...\"} "
				 "(that member alone)%s", i,
				 json_is_string(b) ? " (the base64 is not base64)" : "");
			batchreq_free(r);
			return -EINVAL;
		}
		r->keys[i].data = r->decoded + used;
		r->keys[i].len = (size_t)dl;
		used += (size_t)dl;
	}
	r->n = n;
	return 0;
}
