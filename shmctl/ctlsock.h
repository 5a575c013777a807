/* ctlsock.h - a client of shmkv-loader's control socket, ROOT/control.sock
 * (loader/README.md): one request line of TAB-separated words, one JSON
 * object line back, {"ok": true, ...} or {"ok": false, "error": "..."}. */
#ifndef SHMCTL_CTLSOCK_H
#define SHMCTL_CTLSOCK_H

#include <stddef.h>

#include "jv.h"

/* The end of a CTL_ECONNECT message, for callers that say it their way. */
#define CTL_CONNECT_HINT " (is shmkv-loader running with this root?)"

/* ctl_request() results besides 0 */
#define CTL_ECONNECT -1 /* no loader listening: the socket is absent or refuses */
#define CTL_EFAIL -2    /* anything else: the message says what */

/* Sends words[0..n) and reads the reply into *reply (an object; free with
 * jv_free; NULL on failure). timeout_ms < 0 waits as long as the loader takes (a load).
 * Returns 0, or CTL_ECONNECT / CTL_EFAIL with a complete message in why
 * ("cannot connect to ROOT/control.sock: ... (is shmkv-loader running with
 * this root?)"). A reply {"ok": false} is returned as 0: the caller reads it. */
int ctl_request(const char *root, const char *const *words, size_t n, int timeout_ms, jv **reply,
		char *why, size_t why_len);
/* The same, calling tick(ctx) about every tick_ms while the reply is due
 * (a progress display: tick may make requests of its own). */
int ctl_request_tick(const char *root, const char *const *words, size_t n, int timeout_ms,
		     jv **reply, char *why, size_t why_len, int tick_ms, void (*tick)(void *ctx),
		     void *ctx);

/* A connection to ROOT/control.sock for a caller that speaks the protocol
 * itself (a stream): the socket, or CTL_ECONNECT / CTL_EFAIL with why. */
int ctl_dial(const char *root, char *why, size_t why_len);
/* A reply line buf[0..have) of socket sock as a JSON object with "ok" into
 * *reply: 0, or CTL_EFAIL with why (not JSON: a protocol mismatch). */
int ctl_reply_parse(const char *sock, const char *buf, size_t have, jv **reply, char *why,
		    size_t why_len);

#endif /* SHMCTL_CTLSOCK_H */
