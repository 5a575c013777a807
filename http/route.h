/* route.h - what a request's path and its If-None-Match say, read from
 * their bytes (untrusted: any bytes h2o passes on). No h2o here, so that
 * tests/fuzz (fuzz_http_req) calls these on arbitrary bytes. */
#ifndef SHMKV_HTTP_ROUTE_H
#define SHMKV_HTTP_ROUTE_H

#include <stddef.h>

#include <shmkv.h>

enum route_shape {
	ROUTE_EXACT,     /* none of the shapes below: a fixed path, or no route */
	ROUTE_CACHE_KEY, /* /v1/caches/NAME/keys/KEY (KEY not empty) */
	ROUTE_CACHE_GET, /* /v1/caches/NAME/get */
};

/* The shape of path p[0..n) (no query): ROUTE_CACHE_KEY or ROUTE_CACHE_GET
 * with name (NAME's raw bytes, 1..SHMKV_CACHE_NAME_MAX, none a NUL,
 * NUL-terminated; not checked as a name here: the handlers do) and, for a key, *key and *key_len (the raw,
 * percent-encoded text inside p); else ROUTE_EXACT. */
enum route_shape route_shape(const char *p, size_t n, char name[SHMKV_CACHE_NAME_MAX + 1],
			     const char **key, size_t *key_len);

/* Does one If-None-Match value v[0..len) (a list of entity tags, or *)
 * name tag? Weak tags compare weakly (RFC 9110 §13.1.2). */
int route_etag_listed(const char *v, size_t len, const char *tag);

#endif
