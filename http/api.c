/* api.c - the endpoints of shmkv-http (http/README.md "Endpoints"): a table
 * of routes, each a method, a path shape and a handler. Every answer that
 * reads a cache comes from one generation: http_caches_get() refreshes once
 * before the handler reads, and nothing refreshes until the answer is sent
 * (the loop is single-threaded). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "auth.h"
#include "batchreq.h"
#include "changes.h"
#include "ctlnames.h"
#include "json.h"
#include "keyenc.h"
#include "reply.h"
#include "route.h"
#include "value.h"

/* The path's parts: /v1/caches/NAME/REST... (raw, still percent-encoded). */
struct route_args {
	char name[SHMKV_CACHE_NAME_MAX + 1];
	const char *key; /* raw key text (GET .../keys/KEY) */
	size_t key_len;
	int tok; /* the request's token: auth_token() */
};

/* May the request do what to cache name? Else its 401/403/405 is sent. */
static int allowed(struct http_app *app, h2o_req_t *req, const struct route_args *a, const char *name,
		   int what)
{
	switch (auth_check(&app->conf, a->tok, name, what)) {
	case AUTH_OK:
		return 1;
	case AUTH_MISSING:
		reply_header(req, "www-authenticate", "Bearer realm=\"shmkv\"");
		reply_error(app, NULL, req, 401, "unauthorized", "cache \"%s\" needs a bearer token (Authorization: Bearer TOKEN)", name);
		return 0;
	case AUTH_INVALID:
		reply_header(req, "www-authenticate", "Bearer realm=\"shmkv\", error=\"invalid_token\"");
		reply_error(app, NULL, req, 401, "invalid_token", "the Authorization header holds no token of this server's config (Bearer TOKEN)");
		return 0;
	case AUTH_FORBIDDEN:
		reply_header(req, "www-authenticate", "Bearer realm=\"shmkv\", error=\"insufficient_scope\"");
		reply_error(app, NULL, req, 403, "forbidden", "token \"%s\" may not %s cache \"%s\"",
			    app->conf.tokens[a->tok].name, what == AUTH_WRITE ? "write" : "read", name);
		return 0;
	case AUTH_DISABLED:
		reply_header(req, "allow", "GET");
		reply_error(app, NULL, req, 405, "writes_disabled",
			    "cache \"%s\": writes are off (no [token] of the config may write it)", name);
		return 0;
	}
	return 0;
}

static int method_is(h2o_req_t *req, const char *m)
{
	return h2o_memis(req->method.base, req->method.len, m, strlen(m));
}

static int wants_json(h2o_req_t *req)
{
	ssize_t i = h2o_find_header(&req->headers, H2O_TOKEN_ACCEPT, -1);
	if (i < 0)
		return 0;
	h2o_iovec_t v = req->headers.entries[i].value;
	return h2o_strstr(v.base, v.len, H2O_STRLIT("application/json")) != SIZE_MAX;
}

static const char *raw_type(unsigned type)
{
	switch (type) {
	case SHMKV_TYPE_BYTES: return "application/octet-stream";
	case SHMKV_TYPE_STRING: return "text/plain; charset=utf-8";
	case SHMKV_TYPE_I64: return "application/x-shmkv-i64";
	case SHMKV_TYPE_BOOL: return "application/x-shmkv-bool";
	case SHMKV_TYPE_F64: return "application/x-shmkv-f64";
	case SHMKV_TYPE_F32LIST: return "application/x-shmkv-f32list";
	case SHMKV_TYPE_F64LIST: return "application/x-shmkv-f64list";
	case SHMKV_TYPE_I64LIST: return "application/x-shmkv-i64list";
	case SHMKV_TYPE_STRLIST: return "application/x-shmkv-strlist";
	default: return "application/octet-stream";
	}
}

/* The cache of a request, or an error answer sent (NULL). */
static struct http_cache *cache_of(struct http_app *app, h2o_req_t *req, const char *name)
{
	struct http_cache *c = NULL;
	char why[300];
	int err = http_caches_get(&app->caches, name, &c, why, sizeof why);
	if (!err)
		return c;
	if (err == -ENOENT || err == SHMKV_ESTALE)
		reply_error(app, NULL, req, 404, "no_cache", "no cache \"%s\"", name);
	else if (err == -EINVAL)
		reply_error(app, NULL, req, 400, "bad_request", "%s", why);
	else if (err == -EAGAIN)
		reply_error(app, NULL, req, 503, "not_published", "cache \"%s\": nothing published yet", name);
	else if (err == -ENOSPC)
		reply_error(app, NULL, req, 503, "busy", "%s", why);
	else
		reply_error(app, NULL, req, 500, shmkv_errname(err), "cache \"%s\": %s", name,
			    why[0] ? why : shmkv_strerror(err));
	return NULL;
}

/* c's generation header and entity tag, made once per generation (and
 * image: a cache dropped and loaded again may count from 1 again): two
 * snprintf calls were a fifth of a GET's instructions. */
static void tags_of(struct http_cache *c)
{
	uint64_t gen = shmkv_generation(c->db), sum = shmkv_checksum(c->db);
	if (c->tags_made && gen == c->tags_gen && sum == c->tags_sum)
		return;
	snprintf(c->gen_text, sizeof c->gen_text, "%" PRIu64, gen);
	snprintf(c->etag, sizeof c->etag, "\"%" PRIu64 "-%016" PRIx64 "\"", gen, sum);
	c->tags_gen = gen, c->tags_sum = sum, c->tags_made = 1;
}

/* If-None-Match holds tag (or *), in any of its values. */
static int not_modified(h2o_req_t *req, const char *tag)
{
	for (ssize_t i = -1; (i = h2o_find_header(&req->headers, H2O_TOKEN_IF_NONE_MATCH, i)) >= 0;) {
		h2o_iovec_t v = req->headers.entries[i].value;
		if (route_etag_listed(v.base, v.len, tag))
			return 1;
	}
	return 0;
}

static void get_error(struct http_app *app, struct http_cache *c, h2o_req_t *req, int err,
		      const char *key, size_t len)
{
	if (err == SHMKV_ENOTFOUND) {
		c->m.misses++;
		reply_error(app, c, req, 404, "SHMKV_ENOTFOUND", "no key %.*s%s in cache \"%s\"",
			    (int)(len > 200 ? 200 : len), shmkv_utf8_valid((const uint8_t *)key, len) ? key : "(binary)",
			    len > 200 ? "..." : "", c->name);
	} else if (err == SHMKV_EKEYLEN) {
		reply_error(app, c, req, 400, "SHMKV_EKEYLEN", "key of %zu bytes: over 65535", len);
	} else {
		reply_error(app, c, req, 500, shmkv_errname(err), "cache \"%s\": %s", c->name,
			    shmkv_strerror(err));
	}
}

/* The path's key, decoded into req's pool; its length, or -1 with the 400 sent. */
static long path_key(struct http_app *app, h2o_req_t *req, struct route_args *a, char **key)
{
	*key = h2o_mem_alloc_pool(&req->pool, a->key_len + 1);
	size_t bad = 0;
	long kl = keyenc_decode(a->key, a->key_len, *key, &bad);
	if (kl < 0)
		reply_error(app, NULL, req, 400, "bad_key",
			    "key: byte %zu of the path's key is a bad percent-encoding or a byte a URL "
			    "cannot carry raw (encode it as %%XX)",
			    bad);
	return kl;
}

/* PUT and DELETE .../keys/KEY: a change through the loader (changes.h),
 * for a token allowed to write the cache. */
static void change_key(struct http_app *app, h2o_req_t *req, struct route_args *a, int remove)
{
	char *key;
	if (!allowed(app, req, a, a->name, AUTH_WRITE))
		return;
	long kl = path_key(app, req, a, &key);
	if (kl < 0)
		return;
	if (kl > 65535) {
		reply_error(app, NULL, req, 400, "SHMKV_EKEYLEN", "key of %ld bytes: over 65535", kl);
		return;
	}
	changes_send(app, req, a->name, key, (size_t)kl, remove);
}

static void put_key(struct http_app *app, h2o_req_t *req, struct route_args *a)
{
	change_key(app, req, a, 0);
}

static void delete_key(struct http_app *app, h2o_req_t *req, struct route_args *a)
{
	change_key(app, req, a, 1);
}

static void get_key(struct http_app *app, h2o_req_t *req, struct route_args *a)
{
	char *key;
	if (!allowed(app, req, a, a->name, AUTH_READ))
		return;
	long kl = path_key(app, req, a, &key);
	if (kl < 0)
		return;
	struct http_cache *c = cache_of(app, req, a->name);
	if (!c)
		return;
	tags_of(c);
	const char *tag = c->etag, *gen = c->gen_text;
	shmkv_value v;
	int err = shmkv_get(c->db, key, (size_t)kl, &v);
	if (!err && value_strlist_bad(&v) >= 0)
		err = SHMKV_ECORRUPT; /* a string of the list is damaged (shmkv_strlist_at) */
	reply_header(req, "x-shmkv-generation", gen);
	if (err) {
		get_error(app, c, req, err, key, (size_t)kl);
		return;
	}
	c->m.hits++;
	reply_header(req, "etag", tag);
	reply_header(req, "x-shmkv-type", shmkv_type_name(v.type));
	if (not_modified(req, tag)) {
		reply_send(app, c, req, 304, NULL, NULL, 0);
		return;
	}
	if (!wants_json(req)) {
		c->m.bytes += v.size;
		reply_send(app, c, req, 200, raw_type(v.type), v.data, v.size);
		return;
	}
	struct json w;
	json_init(&w);
	json_str(&w, "cache", c->name);
	keyenc_json(&w, key, (size_t)kl);
	json_u64(&w, "generation", shmkv_generation(c->db));
	json_str(&w, "type", shmkv_type_name(v.type));
	json_name(&w, "value");
	value_json(&w, &v);
	char *text = json_finish(&w);
	if (!text) {
		reply_error(app, c, req, 500, "ENOMEM", "out of memory");
		return;
	}
	c->m.bytes += v.size;
	reply_send(app, c, req, 200, "application/json", text, strlen(text));
	free(text);
}

/* POST /v1/caches/NAME/get: {"keys": [KEY, ...]}, each KEY a string or
 * {"base64": "..."}; answers {"cache", "generation", "results": [...]} in
 * the request's order, each {"type", "value"} or {"error", "code"}. */
static void post_batch(struct http_app *app, h2o_req_t *req, struct route_args *a)
{
	struct batchreq br;
	char why[300];
	struct http_cache *c = NULL;
	shmkv_value *v = NULL;
	int *errs = NULL;
	if (!allowed(app, req, a, a->name, AUTH_READ))
		return;
	int err = batchreq_parse(req->entity.base, req->entity.len, app->conf.max_batch_keys, &br,
				 why, sizeof why);
	if (err) {
		if (err == -E2BIG)
			reply_error(app, NULL, req, 413, "too_many_keys", "%s", why);
		else if (err == -EINVAL)
			reply_error(app, NULL, req, 400, "bad_request", "%s", why);
		else
			reply_error(app, NULL, req, 500, "ENOMEM", "out of memory");
		return;
	}
	size_t n = br.n;
	v = calloc(n ? n : 1, sizeof *v);
	errs = calloc(n ? n : 1, sizeof *errs);
	if (!v || !errs) {
		reply_error(app, NULL, req, 500, "ENOMEM", "out of memory");
		goto out;
	}
	if (!(c = cache_of(app, req, a->name)))
		goto out;
	shmkv_get_batch(c->db, br.keys, n, v, errs);
	struct json w;
	json_init(&w);
	json_str(&w, "cache", c->name);
	json_u64(&w, "generation", shmkv_generation(c->db));
	json_arr_begin(&w, "results");
	for (size_t i = 0; i < n; i++) {
		if (!errs[i] && value_strlist_bad(&v[i]) >= 0)
			errs[i] = SHMKV_ECORRUPT;
		json_obj_begin(&w, NULL);
		if (errs[i]) {
			if (errs[i] == SHMKV_ENOTFOUND)
				c->m.misses++;
			json_str(&w, "error", shmkv_strerror(errs[i]));
			json_str(&w, "code", shmkv_errname(errs[i]));
		} else {
			c->m.hits++;
			c->m.bytes += v[i].size;
			json_str(&w, "type", shmkv_type_name(v[i].type));
			json_name(&w, "value");
			value_json(&w, &v[i]);
		}
		json_obj_end(&w);
	}
	json_arr_end(&w);
	char *text = json_finish(&w);
	if (!text)
		reply_error(app, c, req, 500, "ENOMEM", "out of memory");
	else
		reply_send(app, c, req, 200, "application/json", text, strlen(text));
	free(text);
out:
	free(v);
	free(errs);
	batchreq_free(&br);
}

/* GET /v1/caches: every control segment under the root (names that pass
 * shmkv_name_check), with its generation and size as the control segment
 * says, and whether this server holds it attached. */
static void list_caches(struct http_app *app, h2o_req_t *req, struct route_args *a)
{
	if (a->tok == -2) {
		allowed(app, req, a, "", AUTH_READ); /* 401 invalid_token */
		return;
	}
	char **names = NULL;
	size_t nn = 0;
	int err = ctlnames_list(app->caches.root, &names, &nn);
	if (err) {
		reply_error(app, NULL, req, err == -ENOMEM ? 500 : 503, err == -ENOMEM ? "ENOMEM" : "no_root",
			    "%s: %s", app->caches.root, strerror(-err));
		return;
	}
	struct json w;
	json_init(&w);
	json_arr_begin(&w, "caches");
	for (size_t i = 0; i < nn; i++) {
		const char *name = names[i];
		if (auth_check(&app->conf, a->tok, name, AUTH_READ) != AUTH_OK)
			continue; /* protected, and not this token's */
		shmkv_ctl *ctl = NULL;
		shmkv_ctl copy;
		if (shmkv_ctl_open(app->caches.root, name, 0, &ctl, NULL, 0))
			continue; /* gone meanwhile, or not ours to read */
		int rd = shmkv_ctl_read(ctl, &copy);
		shmkv_ctl_close(ctl);
		if (rd || (copy.flags & SHMKV_CTL_RETIRED))
			continue;
		json_obj_begin(&w, NULL);
		json_str(&w, "name", name);
		json_u64(&w, "generation", copy.generation);
		uint64_t size = 0;
		for (uint32_t s = 0; s < copy.segment_count && s < SHMKV_CTL_MAX_SEGMENTS; s++)
			if (!(copy.segments[s].flags & SHMKV_SEG_OVERLAY)) {
				size = copy.segments[s].size;
				break;
			}
		json_u64(&w, "size", size);
		struct http_cache *c = http_caches_find(&app->caches, name);
		json_bool(&w, "attached", c && c->db);
		json_obj_end(&w);
	}
	ctlnames_free(names, nn);
	json_arr_end(&w);
	char *text = json_finish(&w);
	if (!text)
		reply_error(app, NULL, req, 500, "ENOMEM", "out of memory");
	else
		reply_send(app, NULL, req, 200, "application/json", text, strlen(text));
	free(text);
}

static void metrics(struct http_app *app, h2o_req_t *req, struct route_args *a)
{
	(void)a;
	char *text;
	size_t len;
	if (http_metrics_text(&app->metrics, &app->caches, &text, &len)) {
		reply_error(app, NULL, req, 500, "ENOMEM", "out of memory");
		return;
	}
	reply_send(app, NULL, req, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
	free(text);
}

static void healthz(struct http_app *app, h2o_req_t *req, struct route_args *a)
{
	(void)a;
	static const char ok[] = "{\"status\": \"ok\"}\n";
	reply_send(app, NULL, req, 200, "application/json", ok, sizeof ok - 1);
}

/* Ready: listening, and every cache of `caches` attached (tried now). */
static void readyz(struct http_app *app, h2o_req_t *req, struct route_args *a)
{
	(void)a;
	for (size_t i = 0; i < app->conf.n_caches; i++) {
		struct http_cache *c;
		char why[300];
		if (http_caches_get(&app->caches, app->conf.caches[i], &c, why, sizeof why)) {
			reply_error(app, NULL, req, 503, "not_ready", "cache \"%s\" not attached: %s",
				    app->conf.caches[i], why[0] ? why : "not published");
			return;
		}
	}
	static const char ok[] = "{\"status\": \"ready\"}\n";
	reply_send(app, NULL, req, 200, "application/json", ok, sizeof ok - 1);
}

struct route {
	const char *method;
	enum route_shape shape;
	const char *path; /* ROUTE_EXACT: the path */
	void (*fn)(struct http_app *, h2o_req_t *, struct route_args *);
};

static const struct route routes[] = {
	{"GET", ROUTE_EXACT, "/v1/caches", list_caches},
	{"GET", ROUTE_CACHE_KEY, NULL, get_key},
	{"PUT", ROUTE_CACHE_KEY, NULL, put_key},
	{"DELETE", ROUTE_CACHE_KEY, NULL, delete_key},
	{"POST", ROUTE_CACHE_GET, NULL, post_batch},
	{"GET", ROUTE_EXACT, "/metrics", metrics},
	{"GET", ROUTE_EXACT, "/healthz", healthz},
	{"GET", ROUTE_EXACT, "/readyz", readyz},
};

int http_api_on_req(struct http_app *app, h2o_req_t *req)
{
	size_t n = req->query_at != SIZE_MAX ? req->query_at : req->path.len;
	const char *p = req->path.base;
	if (req->path.len > app->conf.max_url) {
		reply_error(app, NULL, req, 414, "uri_too_long", "request target of %zu bytes: at most %" PRIu64 " (max_url)",
			    req->path.len, app->conf.max_url);
		return 0;
	}
	/* h2o caps a head that arrives in pieces, not one read whole: the cap
	 * for every head (431) */
	size_t head = req->path.len + req->method.len;
	for (size_t i = 0; i < req->headers.size; i++)
		head += req->headers.entries[i].name->len + req->headers.entries[i].value.len + 4;
	if (head > HTTP_MAX_HEAD) {
		reply_header(req, "connection", "close");
		reply_error(app, NULL, req, 431, "head_too_large",
			    "request head of %zu bytes: at most %d", head, HTTP_MAX_HEAD);
		return 0;
	}
	struct route_args a = {0};
	ssize_t ah = h2o_find_header(&req->headers, H2O_TOKEN_AUTHORIZATION, -1);
	a.tok = auth_token(&app->conf, ah < 0 ? NULL : req->headers.entries[ah].value.base,
			   ah < 0 ? 0 : req->headers.entries[ah].value.len);
	enum route_shape s = route_shape(p, n, a.name, &a.key, &a.key_len);
	const char *allow = NULL;
	char allow_buf[64] = "";
	for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
		const struct route *r = &routes[i];
		int match = r->shape == ROUTE_EXACT ? h2o_memis(p, n, r->path, strlen(r->path))
						    : r->shape == s;
		if (!match)
			continue;
		if (!method_is(req, r->method)) {
			size_t l = strlen(allow_buf);
			snprintf(allow_buf + l, sizeof allow_buf - l, "%s%s", l ? ", " : "", r->method);
			allow = allow_buf;
			continue;
		}
		r->fn(app, req, &a);
		return 0;
	}
	if (allow) {
		reply_header(req, "allow", allow);
		reply_error(app, NULL, req, 405, "method_not_allowed", "%.*s: only %s here",
			    (int)(req->method.len > 16 ? 16 : req->method.len), req->method.base, allow);
		return 0;
	}
	reply_error(app, NULL, req, 404, "no_route", "no endpoint here (/v1/caches, /v1/caches/NAME/keys/KEY, "
				     "POST /v1/caches/NAME/get, /metrics, /healthz, /readyz)");
	return 0;
}
