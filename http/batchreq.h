/* batchreq.h - the body of POST /v1/caches/NAME/get: {"keys": [KEY, ...]},
 * each KEY a JSON string (UTF-8; \u0000 allowed) or {"base64": "..."} for a
 * key of any bytes. Parsed with jansson, kept apart from common/json.h (the
 * two libraries' names clash). */
#ifndef SHMKV_HTTP_BATCHREQ_H
#define SHMKV_HTTP_BATCHREQ_H

#include <stddef.h>

#include <shmkv.h>

struct batchreq {
	shmkv_key *keys; /* point into doc and decoded */
	size_t n;
	void *doc;       /* the parsed document (json_t) */
	unsigned char *decoded;
};

/* 0; -EINVAL (why: not JSON, not the shape, bad base64; 400), -E2BIG (more
 * than max_keys; 413), -ENOMEM. out is freed on error. */
int batchreq_parse(const char *body, size_t len, size_t max_keys, struct batchreq *out, char *why,
		   size_t why_len);
void batchreq_free(struct batchreq *r);

#endif
