/* app.h - the state of one shmkv-http process: its settings, its caches,
 * its counters. One event loop thread owns all of it. */
#ifndef SHMKV_HTTP_APP_H
#define SHMKV_HTTP_APP_H

#define H2O_USE_LIBUV 0
#include <h2o.h>

#include "caches.h"
#include "conf.h"
#include "metrics.h"

struct http_app {
	struct http_conf conf;
	struct http_caches caches;
	struct http_metrics metrics;
	h2o_globalconf_t h2o;
	h2o_context_t ctx;
	h2o_accept_ctx_t accept;
	h2o_socket_t *listener;
	h2o_timeout_t write_timeout; /* a PUT/DELETE's wait for the loader (changes.c) */
	int listening; /* /readyz: the socket is bound */
};

/* The handler h2o calls for every request (api.c). */
int http_api_on_req(struct http_app *app, h2o_req_t *req);

#endif
