/* auth.h - bearer tokens (http/README.md "Access model"): each `[token
 * NAME]` section of the config names a secret and the caches it may read
 * and write. A cache that some token names is protected: reading it needs
 * a token that may read it; writing any cache needs a token that may write
 * it (writes are off for a cache no token may write). */
#ifndef SHMKV_HTTP_AUTH_H
#define SHMKV_HTTP_AUTH_H

#include <stddef.h>

#include "conf.h"

#define AUTH_READ 1
#define AUTH_WRITE 2

enum auth_result {
	AUTH_OK,        /* allowed */
	AUTH_MISSING,   /* 401: the cache is protected and no token was sent */
	AUTH_INVALID,   /* 401: a token was sent that no [token] section holds, or not "Bearer" */
	AUTH_FORBIDDEN, /* 403: the token may not do this to this cache */
	AUTH_DISABLED,  /* writes: no token may write this cache (405) */
};

/* The token of an Authorization header value (NULL/0: none sent): the index
 * of its [token] section, -1 when none was sent, -2 when it is not one of
 * ours (compared in constant time against every secret). */
int auth_token(const struct http_conf *c, const char *hdr, size_t len);
/* May token tok (auth_token's result) do what (AUTH_READ or AUTH_WRITE) to
 * cache name? */
enum auth_result auth_check(const struct http_conf *c, int tok, const char *name, int what);

#endif
