/* server.h - the listening socket and the h2o event loop of shmkv-http. */
#ifndef SHMKV_HTTP_SERVER_H
#define SHMKV_HTTP_SERVER_H

#include <signal.h>

#include "app.h"

/* Binds conf's address (writes the port to port_file when set) and sets h2o
 * up: 0, or -errno with why. */
int http_server_start(struct http_app *app, h2o_loop_t **loop, char *why, size_t why_len);
/* Runs the loop until *stop is set. */
void http_server_run(struct http_app *app, h2o_loop_t *loop, volatile sig_atomic_t *stop);

#endif
