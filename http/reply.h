/* reply.h - every answer of shmkv-http goes out here: status, headers, a
 * copy of the body (values point into an image that a later request's
 * refresh may unmap), and the counters (metrics.h). Errors carry a JSON
 * body everywhere: {"error": MESSAGE, "code": CODE, "status": N}. */
#ifndef SHMKV_HTTP_REPLY_H
#define SHMKV_HTTP_REPLY_H

#include "app.h"

/* c: the cache the request named, or NULL. */
void reply_send(struct http_app *app, struct http_cache *c, h2o_req_t *req, int status,
		const char *content_type, const void *body, size_t len);
void reply_error(struct http_app *app, struct http_cache *c, h2o_req_t *req, int status,
		 const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void reply_header(h2o_req_t *req, const char *name, const char *value);
/* The reason phrase of a status. */
const char *reply_reason(int status);

#endif
