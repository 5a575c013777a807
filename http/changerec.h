/* changerec.h - the JSONL record of a PUT or DELETE (http/README.md
 * "Writes"), as shmctl cache set / remove writes it (builder/README.md's
 * JSONL), made from the request's bytes: the key, the body, x-shmkv-type and
 * x-shmkv-expires. No h2o here, so that tests/fuzz (fuzz_http_req) calls it
 * on arbitrary bytes; changes.c sends the record. */
#ifndef SHMKV_HTTP_CHANGEREC_H
#define SHMKV_HTTP_CHANGEREC_H

#include <stddef.h>

/* A PUT's value as the request holds it. */
struct changerec_put {
	const char *body;     /* the value's bytes (len 0: may be NULL) */
	size_t len;
	const char *type;     /* x-shmkv-type's value; NULL: none sent (string) */
	size_t type_len;
	const char *expires;  /* x-shmkv-expires' value; NULL: none sent */
	size_t expires_len;
};

/* The record of key[0..key_len) set to put (NULL: removed), one line
 * without its '\n', malloc'd; NULL with *why the message of a 400 (a value
 * or header refused), or NULL with *why NULL when out of memory. */
char *changerec_make(const char *key, size_t key_len, const struct changerec_put *put,
		     const char **why);

#endif
