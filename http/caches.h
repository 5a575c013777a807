/* caches.h - the caches shmkv-http reads: attached by name on first use
 * (shmkv_attach_diag, like any reader: lib/PROTOCOL.md), refreshed once at
 * the start of each request and never within one, so that every answer
 * comes from one generation; a dropped cache (SHMKV_ESTALE) is attached
 * again, and forgotten when it is gone. Single-threaded: the event loop's. */
#ifndef SHMKV_HTTP_CACHES_H
#define SHMKV_HTTP_CACHES_H

#include <stddef.h>
#include <stdint.h>

#include <shmkv.h>

#include "metrics.h"

struct http_cache {
	char name[SHMKV_CACHE_NAME_MAX + 1];
	shmkv *db;                  /* NULL: not attached now (dropped, or failed) */
	struct http_cache_metrics m; /* kept across re-attaches */
	/* the x-shmkv-generation and etag values of (tags_gen, tags_sum), the
	 * image's generation and checksum (api.c) */
	int tags_made;
	uint64_t tags_gen, tags_sum;
	char gen_text[24], etag[48];
};

struct http_caches {
	char root[256];
	struct http_cache *v;
	size_t n, cap, max;
};

void http_caches_init(struct http_caches *t, const char *root, size_t max);
void http_caches_free(struct http_caches *t);

/* The cache NAME at its current generation, for one request: attached if it
 * was not, refreshed if it was. 0 with *out set; -EINVAL (not a cache name),
 * -ENOENT (no such cache, or dropped), -EAGAIN (nothing published yet),
 * -ENOSPC (max caches attached), other attach errors (why says). */
int http_caches_get(struct http_caches *t, const char *name, struct http_cache **out, char *why,
		    size_t why_len);
/* A cache by name if this server holds an entry for it (attached or not). */
struct http_cache *http_caches_find(struct http_caches *t, const char *name);

#endif
