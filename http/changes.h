/* changes.h - PUT and DELETE of a key (http/README.md "Writes"): the
 * change is sent to the loader's control socket as `change NAME JSONL`
 * (loader/README.md "Writes"), the verb of `shmctl cache set` / `cache
 * remove`, without blocking the event loop; the answer goes out once the
 * loader has published it, so a reader after the reply sees it. */
#ifndef SHMKV_HTTP_CHANGES_H
#define SHMKV_HTTP_CHANGES_H

#include "app.h"

#define CHANGE_LINE_MAX 8192 /* the loader's limit on one `change` line */

/* key[0..key_len) of cache name: set to the request's body (PUT) or
 * removed (DELETE, remove != 0). Sends the answer itself, now or later. */
void changes_send(struct http_app *app, h2o_req_t *req, const char *name, const char *key,
		  size_t key_len, int remove);

#endif
