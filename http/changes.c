/* changes.c - PUT/DELETE through the loader's control socket. See changes.h.
 * One connection per change: the loader answers each request line with one
 * JSON line once the change is published or refused. */
#include "changes.h"

#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "changerec.h"
#include "ctlconnect.h"
#include "loaderreply.h"
#include "reply.h"

#define REPLY_MAX 65536 /* a change's reply is one short line */

struct change_op {
	struct http_app *app;
	h2o_req_t *req; /* NULL once the client is gone (its pool disposed) */
	struct change_op **slot; /* in req's pool: clears req on dispose */
	h2o_socket_t *sock;
	h2o_timeout_entry_t timer;
	char name[SHMKV_CACHE_NAME_MAX + 1];
	char *line; /* the request line, sent */
	size_t line_len;
};

static void on_req_gone(void *p)
{
	struct change_op *op = *(struct change_op **)p;
	if (op)
		op->req = NULL;
}

/* Ends op: the answer (when its request is still there) and the cleanup. */
static void finish(struct change_op *op, int status, const char *code, const char *msg,
		   const char *ok_body)
{
	if (op->req) {
		*op->slot = NULL;
		if (ok_body)
			reply_send(op->app, NULL, op->req, status, "application/json", ok_body, strlen(ok_body));
		else
			reply_error(op->app, NULL, op->req, status, code, "%s", msg);
	}
	if (h2o_timeout_is_linked(&op->timer))
		h2o_timeout_unlink(&op->timer);
	if (op->sock)
		h2o_socket_close(op->sock);
	free(op->line);
	free(op);
}

static void on_timeout(h2o_timeout_entry_t *e)
{
	struct change_op *op = H2O_STRUCT_FROM_MEMBER(struct change_op, timer, e);
	char msg[300];
	snprintf(msg, sizeof msg, "cache \"%s\": the loader did not answer within write_timeout; the change "
		 "may still be published", op->name);
	finish(op, 504, "loader_timeout", msg, NULL);
}

/* The loader's reply line: {"ok": true, "generation": N, ...} or
 * {"ok": false, "error", "code", "reason"} (common/json.h). */
static void answer(struct change_op *op, const char *line, size_t len)
{
	struct loader_reply r;
	char msg[800];
	if (loaderreply_parse(line, len, &r)) {
		snprintf(msg, sizeof msg, "the loader's reply is not a JSON object: %s", r.error);
		finish(op, 502, "bad_loader_reply", msg, NULL);
		return;
	}
	if (r.ok) {
		char body[200];
		snprintf(body, sizeof body, "{\"cache\": \"%s\", \"generation\": %" PRId64 "}\n", op->name,
			 r.generation);
		finish(op, 200, NULL, NULL, body);
		return;
	}
	snprintf(msg, sizeof msg, "the loader refused the change: %s", r.error[0] ? r.error : "(no message)");
	const char *reason = r.reason[0] ? r.reason : "failed", *code = r.code;
	if (!strcmp(reason, "no_cache"))
		finish(op, 404, "no_cache", msg, NULL);
	else if (!strcmp(reason, "not_permitted"))
		finish(op, 503, "not_permitted", msg, NULL); /* the server's user may not write: config */
	else if (!strcmp(reason, "busy") || !strcmp(reason, "stopping"))
		finish(op, 503, reason, msg, NULL);
	else if (!strcmp(reason, "bad_request") || !strcmp(code, "EINVAL") || !strcmp(code, "E2BIG") ||
		 !strcmp(code, "SHMKV_EKEYLEN") || !strcmp(code, "SHMKV_EINPUT"))
		finish(op, 400, "change_refused", msg, NULL);
	else
		finish(op, 500, code[0] ? code : "change_failed", msg, NULL);
}

static void on_read(h2o_socket_t *sock, const char *err)
{
	struct change_op *op = sock->data;
	if (err) {
		finish(op, 502, "no_loader_reply", "the loader closed the control socket without a reply", NULL);
		return;
	}
	h2o_buffer_t *in = sock->input;
	const char *nl = memchr(in->bytes, '\n', in->size);
	if (nl)
		answer(op, in->bytes, (size_t)(nl - in->bytes));
	else if (in->size > REPLY_MAX)
		finish(op, 502, "bad_loader_reply", "the loader's reply is longer than 64 KiB", NULL);
}

static void on_written(h2o_socket_t *sock, const char *err)
{
	struct change_op *op = sock->data;
	if (err)
		finish(op, 503, "no_loader", "cannot send to the loader's control socket", NULL);
}

/* The JSONL record of the change (changerec.h) from req; NULL with the
 * error answer sent. */
static char *record(struct http_app *app, h2o_req_t *req, const char *key, size_t key_len, int remove)
{
	struct changerec_put put = {req->entity.base, req->entity.base ? req->entity.len : 0, NULL, 0,
				    NULL, 0};
	ssize_t th = h2o_find_header_by_str(&req->headers, H2O_STRLIT("x-shmkv-type"), -1);
	if (th >= 0)
		put.type = req->headers.entries[th].value.base, put.type_len = req->headers.entries[th].value.len;
	ssize_t eh = h2o_find_header_by_str(&req->headers, H2O_STRLIT("x-shmkv-expires"), -1);
	if (eh >= 0)
		put.expires = req->headers.entries[eh].value.base,
		put.expires_len = req->headers.entries[eh].value.len;
	const char *why;
	char *text = changerec_make(key, key_len, remove ? NULL : &put, &why);
	if (!text && why)
		reply_error(app, NULL, req, 400, "bad_value", "%s", why);
	else if (!text)
		reply_error(app, NULL, req, 500, "ENOMEM", "out of memory");
	return text;
}

void changes_send(struct http_app *app, h2o_req_t *req, const char *name, const char *key,
		  size_t key_len, int remove)
{
	char *rec = record(app, req, key, key_len, remove);
	if (!rec)
		return;
	size_t rl = strlen(rec);
	if (rl > CHANGE_LINE_MAX) {
		free(rec);
		reply_error(app, NULL, req, 413, "change_too_large",
			    "the change is %zu bytes as a JSONL record: at most %d (larger values go in a "
			    "delta applied with shmctl cache apply)",
			    rl, CHANGE_LINE_MAX);
		return;
	}
	struct change_op *op = calloc(1, sizeof *op);
	size_t ll = 8 + strlen(name) + 1 + rl + 1;
	char *line = malloc(ll + 1);
	if (!op || !line) {
		free(op), free(line), free(rec);
		reply_error(app, NULL, req, 500, "ENOMEM", "out of memory");
		return;
	}
	op->line_len = (size_t)snprintf(line, ll + 1, "change\t%s\t%s\n", name, rec);
	free(rec);
	op->line = line;
	op->app = app;
	snprintf(op->name, sizeof op->name, "%s", name);
	int fd = ctl_connect(app->conf.root, SOCK_NONBLOCK);
	if (fd < 0) {
		free(op->line), free(op);
		reply_error(app, NULL, req, 503, "no_loader",
			    "cannot connect to %s/control.sock: %s (is shmkv-loader running with this root, and "
			    "may this server's user reach its socket?)",
			    app->conf.root, strerror(-fd));
		return;
	}
	op->req = req;
	op->slot = h2o_mem_alloc_shared(&req->pool, sizeof *op->slot, on_req_gone);
	*op->slot = op;
	op->sock = h2o_evloop_socket_create(app->ctx.loop, fd, 0); /* DONT_READ would only notify */
	op->sock->data = op;
	op->timer.cb = on_timeout;
	h2o_timeout_link(app->ctx.loop, &app->write_timeout, &op->timer);
	h2o_iovec_t b = h2o_iovec_init(op->line, op->line_len);
	h2o_socket_write(op->sock, &b, 1, on_written);
	h2o_socket_read_start(op->sock, on_read);
}
