/* reply.c - sending answers and counting them. See reply.h. */
#include "reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "json.h"

const char *reply_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 304: return "Not Modified";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 406: return "Not Acceptable";
	case 408: return "Request Timeout";
	case 413: return "Payload Too Large";
	case 414: return "URI Too Long";
	case 415: return "Unsupported Media Type";
	case 431: return "Request Header Fields Too Large";
	case 502: return "Bad Gateway";
	case 504: return "Gateway Timeout";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	default: return "Unknown";
	}
}

void reply_header(h2o_req_t *req, const char *name, const char *value)
{
	size_t vl = strlen(value);
	char *v = h2o_mem_alloc_pool(&req->pool, vl + 1);
	memcpy(v, value, vl + 1);
	h2o_add_header_by_str(&req->pool, &req->res.headers, name, strlen(name), 1, NULL, v, vl);
}

static uint64_t since_us(const struct timeval *t0)
{
	struct timeval now;
	gettimeofday(&now, NULL);
	int64_t us = (int64_t)(now.tv_sec - t0->tv_sec) * 1000000 + (now.tv_usec - t0->tv_usec);
	return us > 0 ? (uint64_t)us : 0;
}

void reply_send(struct http_app *app, struct http_cache *c, h2o_req_t *req, int status,
		const char *content_type, const void *body, size_t len)
{
	struct http_metrics *m = &app->metrics;
	m->requests++;
	m->status[status >= 100 && status < 600 ? status / 100 : 0]++;
	if (status >= 400)
		m->errors++;
	uint64_t us = since_us(&req->timestamps.request_begin_at);
	http_hist_add(&m->latency, us);
	if (c) {
		c->m.requests++;
		http_hist_add(&c->m.latency, us);
	}
	req->res.status = status;
	req->res.reason = reply_reason(status);
	if (content_type)
		h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, content_type,
			       strlen(content_type));
	if (status == 304) {
		h2o_send_inline(req, NULL, 0);
		return;
	}
	req->res.content_length = len;
	h2o_send_inline(req, body, len); /* copies the body into the request's pool */
}

void reply_error(struct http_app *app, struct http_cache *c, h2o_req_t *req, int status,
		 const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	struct json w;
	json_init(&w);
	json_str(&w, "error", msg);
	json_str(&w, "code", code);
	json_u64(&w, "status", (uint64_t)status);
	char *text = json_finish(&w);
	if (!text) {
		static const char oom[] = "{\"error\": \"out of memory\", \"code\": \"ENOMEM\", \"status\": 500}\n";
		reply_send(app, c, req, 500, "application/json", oom, sizeof oom - 1);
		return;
	}
	reply_send(app, c, req, status, "application/json", text, strlen(text));
	free(text);
}
