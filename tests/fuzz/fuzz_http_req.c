/* fuzz_http_req.c - shmkv-http's own reading of a request's bytes, past
 * h2o's parser (http/README.md): the first byte picks the reader, the rest
 * is what a client sent. Each reader is called as the handlers call it
 * (http/api.c, http/changes.c), through its h2o-free seam:
 *   0 the path's shape and cache name (route_shape)
 *   1 a key of the path, percent-decoded (keyenc_decode), then written the
 *     way answers and change records name a key (keyenc_json)
 *   2 a batch body, POST .../get (batchreq_parse); byte 1: max_batch_keys - 1
 *   3 a PUT or DELETE's change record (changerec_make); bytes 1-4: flags,
 *     the lengths of x-shmkv-type, x-shmkv-expires and the key, then those,
 *     then the body
 *   4 an Authorization header (auth_token) and what its token may do
 *     (auth_check) under a fixed config of three tokens
 *   5 an If-None-Match value (route_etag_listed); byte 1 picks the tag
 *   6 a reply line of the loader's control socket (loaderreply_parse)
 * Every field is copied into a heap block of its exact size, so ASan sees
 * any read past it. The checks besides memory safety are in each part. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "auth.h"
#include "batchreq.h"
#include "changerec.h"
#include "keyenc.h"
#include "loaderreply.h"
#include "route.h"

#include "fuzz_util.h"

/* common/json.h's decoder (its header's names clash with jansson's, as in
 * http/batchreq.c). */
long base64_decode(const char *text, unsigned char *out);

/* data[0..n) as a NUL-terminated C string in a block of its own. */
static char *cstr(const uint8_t *data, size_t n)
{
	char *s = malloc(n + 1);
	FUZZ_CHECK(s, "malloc");
	memcpy(s, data, n);
	s[n] = 0;
	return s;
}

/* The bytes a record's member holds: a string's, or key_base64's decoded;
 * *len set. NULL when absent. free() the result. */
static unsigned char *member_bytes(json_t *o, const char *name, int base64, size_t *len)
{
	json_t *v = json_object_get(o, name);
	if (!json_is_string(v))
		return NULL;
	const char *s = json_string_value(v);
	size_t sl = json_string_length(v);
	unsigned char *b = malloc(sl + 4); /* base64 needs sl / 4 * 3 + 3 */
	FUZZ_CHECK(b, "malloc");
	if (!base64) {
		memcpy(b, s, sl);
		*len = sl;
		return b;
	}
	FUZZ_CHECK(strlen(s) == sl, "base64 text with a NUL");
	long dl = base64_decode(s, b);
	FUZZ_CHECK(dl >= 0, "%s: not base64: %s", name, s);
	*len = (size_t)dl;
	return b;
}

/* A change record (one line, a JSON object) parsed; its key checked equal
 * to key[0..kl): key when UTF-8, else key_base64, never both. */
static json_t *record_parsed(const char *rec, const char *key, size_t kl)
{
	FUZZ_CHECK(!strchr(rec, '\n') && !strchr(rec, '\r'), "a record of more than one line: %s", rec);
	json_error_t je;
	json_t *o = json_loads(rec, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &je);
	FUZZ_CHECK(json_is_object(o), "the record is not a JSON object (%s): %s", je.text, rec);
	size_t l1 = 0, l2 = 0;
	unsigned char *k = member_bytes(o, "key", 0, &l1);
	unsigned char *kb = member_bytes(o, "key_base64", 1, &l2);
	FUZZ_CHECK(!k != !kb, "key and key_base64: exactly one: %s", rec);
	size_t l = k ? l1 : l2;
	FUZZ_CHECK(l == kl && !memcmp(k ? k : kb, key, kl), "the key does not round-trip: %s", rec);
	FUZZ_CHECK(!k || shmkv_utf8_valid((const uint8_t *)key, kl), "a key not UTF-8 as key");
	free(k);
	free(kb);
	return o;
}

/* ---- 0: route_shape ---- */

static void fuzz_route(const uint8_t *d, size_t n)
{
	char *p = (char *)fuzz_copy(d, n);
	char name[SHMKV_CACHE_NAME_MAX + 1];
	const char *key = NULL;
	size_t kl = 0;
	enum route_shape s = route_shape(p, n, name, &key, &kl);
	static const char pre[] = "/v1/caches/";
	size_t pl = sizeof pre - 1, nl = s == ROUTE_EXACT ? 0 : strlen(name);
	if (s != ROUTE_EXACT) {
		/* the name is the bytes between the prefix and the next '/', all
		 * of them: a NUL among them would make a handler serve another
		 * cache than the path names */
		FUZZ_CHECK(nl >= 1 && nl <= SHMKV_CACHE_NAME_MAX, "name of %zu bytes", nl);
		FUZZ_CHECK(n > pl + nl && !memcmp(p, pre, pl) && !memcmp(p + pl, name, nl) &&
				   p[pl + nl] == '/' && !memchr(name, '/', nl),
			   "the name is not the path's NAME: \"%s\"", name);
	}
	if (s == ROUTE_CACHE_GET)
		FUZZ_CHECK(n == pl + nl + 4 && !memcmp(p + pl + nl, "/get", 4), "not .../get");
	if (s == ROUTE_CACHE_KEY)
		FUZZ_CHECK(key == p + pl + nl + 6 && kl >= 1 && key + kl == p + n &&
				   !memcmp(p + pl + nl, "/keys/", 6),
			   "the key is not the rest of the path after /keys/");
	if (s == ROUTE_EXACT && n > pl && !memcmp(d, pre, pl)) {
		/* a path of that shape with a name of 1..max bytes, none a NUL, is
		 * a route (read from d: gcc takes a pointer into p for one to
		 * fuzz_copy's local) */
		const char *nm = (const char *)d + pl, *sl = memchr(nm, '/', n - pl);
		size_t len = sl ? (size_t)(sl - nm) : 0, rest = sl ? n - pl - len - 1 : 0;
		int name_ok = sl && len >= 1 && len <= SHMKV_CACHE_NAME_MAX && !memchr(nm, 0, len);
		FUZZ_CHECK(!name_ok || !((rest == 3 && !memcmp(sl + 1, "get", 3)) ||
					 (rest > 5 && !memcmp(sl + 1, "keys/", 5))),
			   "a route refused");
	}
	free(p);
}

/* ---- 1: keyenc_decode, keyenc_json ---- */

static int hex(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
		: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void fuzz_key(const uint8_t *d, size_t n)
{
	char *in = (char *)fuzz_copy(d, n);
	char *out = (char *)fuzz_copy(d, n); /* n bytes of room, as the handler gives */
	size_t bad = SIZE_MAX;
	long kl = keyenc_decode(in, n, out, &bad);
	/* the rule of http/README.md "Keys in URLs", read on its own: %XX is
	 * the byte XX; a raw byte is printable ASCII but space and DEL */
	size_t o = 0, i = 0, want_bad = SIZE_MAX;
	char *ref = malloc(n + 1);
	FUZZ_CHECK(ref, "malloc");
	for (; i < n && want_bad == SIZE_MAX; i++) {
		unsigned char c = d[i];
		if (c == '%' && n - i >= 3 && hex(d[i + 1]) >= 0 && hex(d[i + 2]) >= 0) {
			ref[o++] = (char)(hex(d[i + 1]) * 16 + hex(d[i + 2]));
			i += 2;
		} else if (c != '%' && c > 0x20 && c < 0x7f) {
			ref[o++] = (char)c;
		} else {
			want_bad = i;
		}
	}
	if (want_bad != SIZE_MAX) {
		FUZZ_CHECK(kl == -1 && bad == want_bad, "a bad key at %zu: decoded %ld, bad %zu", want_bad,
			   kl, bad);
	} else {
		FUZZ_CHECK(kl >= 0 && (size_t)kl == o && !memcmp(out, ref, o),
			   "decoded %ld bytes, the rule says %zu", kl, o);
		const char *why;
		char *rec = changerec_make(out, (size_t)kl, NULL, &why);
		FUZZ_CHECK(rec, "no record for a remove");
		json_t *r = record_parsed(rec, out, (size_t)kl);
		FUZZ_CHECK(json_is_true(json_object_get(r, "remove")) && json_object_size(r) == 2,
			   "a remove record: %s", rec);
		json_decref(r);
		free(rec);
	}
	free(ref);
	free(in);
	free(out);
}

/* ---- 2: batchreq_parse ---- */

/* Is element e of keys a key batchreq takes: its bytes into *k, *kl. */
static int batch_key(json_t *e, unsigned char *buf, const char **k, size_t *kl)
{
	if (json_is_string(e)) {
		*k = json_string_value(e), *kl = json_string_length(e);
		return 1;
	}
	json_t *b = json_is_object(e) && json_object_size(e) == 1 ? json_object_get(e, "base64") : NULL;
	if (!json_is_string(b) || strlen(json_string_value(b)) != json_string_length(b))
		return 0;
	long dl = base64_decode(json_string_value(b), buf);
	*k = (const char *)buf, *kl = dl < 0 ? 0 : (size_t)dl;
	return dl >= 0;
}

static void fuzz_batch(const uint8_t *d, size_t n)
{
	if (n < 1)
		return;
	size_t max = (size_t)d[0] + 1;
	d++, n--;
	char *body = n ? (char *)fuzz_copy(d, n) : NULL; /* h2o: no body, no pointer */
	struct batchreq r;
	char why[300];
	memset(why, 0x55, sizeof why);
	int err = batchreq_parse(body, n, max, &r, why, sizeof why);
	FUZZ_CHECK(err == 0 || err == -EINVAL || err == -E2BIG, "batchreq_parse: %d", err);
	if (err)
		FUZZ_CHECK(memchr(why, 0, sizeof why) && why[0], "a refusal (%d) without a message", err);
	/* the same body read on its own */
	json_error_t je;
	json_t *doc = n ? json_loadb(body, n, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &je) : NULL;
	json_t *keys = json_object_get(doc, "keys");
	size_t nk = json_array_size(keys);
	unsigned char *buf = malloc(n + 1);
	FUZZ_CHECK(buf, "malloc");
	int all_keys = json_is_array(keys);
	for (size_t i = 0; all_keys && i < nk && i <= max; i++) {
		const char *k;
		size_t kl;
		all_keys = batch_key(json_array_get(keys, i), buf, &k, &kl);
	}
	if (err == -E2BIG)
		FUZZ_CHECK(json_is_array(keys) && nk > max, "413 for %zu keys, at most %zu", nk, max);
	if (err == -EINVAL)
		FUZZ_CHECK(!all_keys, "400 for a body of %zu good keys: %s", nk, why);
	if (err == 0) {
		FUZZ_CHECK(all_keys && r.n == nk && r.n <= max, "%zu keys of %zu, at most %zu", r.n, nk,
			   max);
		for (size_t i = 0; i < r.n; i++) {
			const char *k;
			size_t kl;
			json_t *e = json_array_get(keys, i);
			batch_key(e, buf, &k, &kl);
			FUZZ_CHECK(r.keys[i].len == kl && !memcmp(r.keys[i].data, k, kl),
				   "keys[%zu] differs from the body's", i);
			/* a key's bytes are the document's string or lie in the
			 * decoded buffer (len + 1 bytes) */
			const unsigned char *kd = r.keys[i].data;
			json_t *rk = json_array_get(json_object_get(r.doc, "keys"), i);
			FUZZ_CHECK(json_is_string(e) ? kd == (const unsigned char *)json_string_value(rk)
						     : kd >= r.decoded && kd + kl <= r.decoded + n + 1,
				   "keys[%zu] points outside its document and buffer", i);
			if (!json_is_string(e) && kl) {
				/* canonical base64 only: the key written again is the text */
				const char *t = json_string_value(json_object_get(e, "base64"));
				struct changerec_put put = {(const char *)kd, kl, "bytes", 5, NULL, 0};
				const char *w;
				char *rec = changerec_make("k", 1, &put, &w);
				FUZZ_CHECK(rec, "no record of bytes");
				json_t *o = record_parsed(rec, "k", 1);
				const char *again = json_string_value(json_object_get(o, "value"));
				size_t tl = strlen(t), al = strlen(again);
				while (tl && t[tl - 1] == '=')
					tl--;
				while (al && again[al - 1] == '=')
					al--;
				FUZZ_CHECK(tl == al && !memcmp(t, again, tl),
					   "keys[%zu]: base64 %s read, %s its bytes", i, t, again);
				json_decref(o);
				free(rec);
			}
		}
		batchreq_free(&r);
	}
	free(buf);
	json_decref(doc);
	free(body);
}

/* ---- 3: changerec_make ---- */

static void fuzz_change(const uint8_t *d, size_t n)
{
	if (n < 4)
		return;
	unsigned flags = d[0];
	size_t tl = d[1], el = d[2], kl = d[3];
	d += 4, n -= 4;
	tl = tl < n ? tl : n;
	char *type = (flags & 2) ? (char *)fuzz_copy(d, tl) : NULL;
	d += tl, n -= tl;
	el = el < n ? el : n;
	char *exp = (flags & 4) ? (char *)fuzz_copy(d, el) : NULL;
	d += el, n -= el;
	kl = kl < n ? kl : n;
	char *key = (char *)fuzz_copy(d, kl);
	d += kl, n -= kl;
	char *body = n ? (char *)fuzz_copy(d, n) : NULL;
	struct changerec_put put = {body, n, type, type ? tl : 0, exp, exp ? el : 0};
	const char *why = "unset";
	char *rec = changerec_make(key, kl, (flags & 1) ? NULL : &put, &why);
	if (!rec) {
		FUZZ_CHECK(why && why[0] && !(flags & 1), "a refusal without a message (remove: %u)",
			   flags & 1);
		goto out;
	}
	json_t *o = record_parsed(rec, key, kl);
	if (flags & 1) {
		FUZZ_CHECK(json_is_true(json_object_get(o, "remove")) && json_object_size(o) == 2,
			   "a remove: %s", rec);
		json_decref(o);
		goto out;
	}
	/* the type as sent, all its bytes (none dropped at a NUL) */
	const char *t = json_string_value(json_object_get(o, "type"));
	FUZZ_CHECK(t, "no type: %s", rec);
	if (type)
		FUZZ_CHECK(json_string_length(json_object_get(o, "type")) == tl && !memcmp(t, type, tl),
			   "type %s, sent %.*s", t, (int)tl, type);
	else
		FUZZ_CHECK(!strcmp(t, "string"), "no x-shmkv-type: %s", t);
	json_t *v = json_object_get(o, "value");
	if (!strcmp(t, "string")) {
		FUZZ_CHECK(json_is_string(v) && json_string_length(v) == n &&
				   !memcmp(json_string_value(v), body ? body : "", n),
			   "a string value changed: %s", rec);
	} else if (!strcmp(t, "bytes")) {
		size_t bl = 0;
		unsigned char *b = member_bytes(o, "value", 1, &bl);
		FUZZ_CHECK(b && bl == n && !memcmp(b, body ? body : "", n), "bytes changed: %s", rec);
		free(b);
	} else {
		json_error_t je;
		json_t *want = json_loadb(body ? body : "", n, JSON_DECODE_ANY, &je);
		FUZZ_CHECK(want && json_equal(want, v), "the JSON value changed: %s", rec);
		json_decref(want);
	}
	json_t *e = json_object_get(o, "expires");
	FUZZ_CHECK(!exp == !e, "expires sent %d, in the record %d", !!exp, !!e);
	if (exp && json_is_string(e))
		FUZZ_CHECK(json_string_length(e) == el && !memcmp(json_string_value(e), exp, el),
			   "x-shmkv-expires %.*s became %s", (int)el, exp, json_string_value(e));
	else if (exp) {
		/* a Unix time: the header is that integer in digits, nothing more */
		char t2[32];
		snprintf(t2, sizeof t2, "%" JSON_INTEGER_FORMAT, json_integer_value(e));
		size_t z = 0;
		while (z + 1 < el && exp[z] == '0')
			z++; /* leading zeros */
		FUZZ_CHECK(json_is_integer(e) && el && el <= 63 && el - z == strlen(t2) &&
				   !memcmp(exp + z, t2, el - z),
			   "expires %s from the header %.*s", t2, (int)el, exp);
	}
	json_decref(o);
out:
	free(rec);
	free(type);
	free(exp);
	free(key);
	free(body);
}

/* ---- 4: auth_token, auth_check ---- */

static struct http_conf conf;

static void add_token(const char *name, const char *secret, const char *const *read,
		      const char *const *write)
{
	struct http_token *t = &conf.tokens[conf.n_tokens++];
	snprintf(t->name, sizeof t->name, "%s", name);
	snprintf(t->secret, sizeof t->secret, "%s", secret);
	for (; read && *read; read++)
		snprintf(t->read.v[t->read.n++], sizeof t->read.v[0], "%s", *read);
	for (; write && *write; write++)
		snprintf(t->write.v[t->write.n++], sizeof t->write.v[0], "%s", *write);
}

static void conf_once(void)
{
	if (conf.n_tokens)
		return;
	/* one secret the prefix of another: only the exact one may match */
	add_token("reader", "reader-secret-0123456789", (const char *const[]){"users", NULL}, NULL);
	add_token("writer", "writer-secret-0123456789abcdef", NULL,
		  (const char *const[]){"users", "items", NULL});
	add_token("all", "reader-secret-0123456789x", (const char *const[]){"*", NULL}, NULL);
}

static int lists(const struct http_token_list *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i], "*") || !strcmp(l->v[i], name))
			return 1;
	return 0;
}

static void fuzz_auth(const uint8_t *d, size_t n)
{
	conf_once();
	char *h = (char *)fuzz_copy(d, n);
	int tok = auth_token(&conf, h, n);
	/* README "Access model": "Bearer " (any case), the token, spaces
	 * around it; the token one of the config's secrets, byte for byte */
	int want = -2;
	if (n >= 7 && !strncasecmp((const char *)d, "bearer ", 7)) {
		size_t s = 7, e = n;
		while (s < e && d[s] == ' ')
			s++;
		while (e > s && d[e - 1] == ' ')
			e--;
		for (size_t i = 0; i < conf.n_tokens && want == -2; i++)
			if (strlen(conf.tokens[i].secret) == e - s && !memcmp(conf.tokens[i].secret, d + s, e - s))
				want = (int)i;
	}
	FUZZ_CHECK(tok == want, "auth_token %d, the token is %d", tok, want);
	FUZZ_CHECK(auth_token(&conf, NULL, 0) == -1, "no header: not -1");
	char *name = cstr(d, n < 64 ? n : 64);
	const char *names[] = {name, "users", "items", "other"};
	for (int t = -2; t < (int)conf.n_tokens; t++)
		for (size_t k = 0; k < sizeof names / sizeof *names; k++)
			for (int what = AUTH_READ; what <= AUTH_WRITE; what++) {
				const char *nm = names[k];
				int prot = 0, writable = 0;
				for (size_t i = 0; i < conf.n_tokens; i++) {
					prot |= lists(&conf.tokens[i].read, nm) || lists(&conf.tokens[i].write, nm);
					writable |= lists(&conf.tokens[i].write, nm);
				}
				enum auth_result r = auth_check(&conf, t, nm, what), w;
				if (t == -2)
					w = AUTH_INVALID;
				else if (what == AUTH_WRITE && !writable)
					w = AUTH_DISABLED;
				else if (what == AUTH_READ && !prot)
					w = AUTH_OK;
				else if (t == -1)
					w = AUTH_MISSING;
				else if (what == AUTH_WRITE)
					w = lists(&conf.tokens[t].write, nm) ? AUTH_OK : AUTH_FORBIDDEN;
				else
					w = lists(&conf.tokens[t].read, nm) || lists(&conf.tokens[t].write, nm)
						    ? AUTH_OK : AUTH_FORBIDDEN;
				FUZZ_CHECK(r == w, "token %d, cache \"%s\", what %d: %d, README says %d", t, nm,
					   what, r, w);
			}
	free(name);
	free(h);
}

/* ---- 5: route_etag_listed ---- */

static void fuzz_etag(const uint8_t *d, size_t n)
{
	if (n < 1)
		return;
	static const char *const tags[] = {"\"7-00000000deadbeef\"", "\"1-0000000000000000\"", "\"\""};
	const char *tag = tags[d[0] % 3];
	d++, n--;
	char *v = (char *)fuzz_copy(d, n);
	int r = route_etag_listed(v, n, tag);
	size_t tl = strlen(tag);
	int has_tag = 0, has_star = memchr(d, '*', n) != NULL;
	for (size_t i = 0; i + tl <= n && !has_tag; i++)
		has_tag = !memcmp(d + i, tag, tl);
	FUZZ_CHECK(!r || has_tag || has_star, "matched without the tag or *");
	if ((n == tl && !memcmp(d, tag, tl)) || (n == 1 && d[0] == '*') ||
	    (n == tl + 2 && !memcmp(d, "W/", 2) && !memcmp(d + 2, tag, tl)))
		FUZZ_CHECK(r, "the tag itself not matched");
	free(v);
}

/* ---- 6: loaderreply_parse ---- */

static void fuzz_reply(const uint8_t *d, size_t n)
{
	char *line = (char *)fuzz_copy(d, n);
	struct loader_reply r;
	int rc = loaderreply_parse(line, n, &r);
	FUZZ_CHECK(rc == 0 || rc == -1, "loaderreply_parse: %d", rc);
	FUZZ_CHECK(memchr(r.error, 0, sizeof r.error) && memchr(r.reason, 0, sizeof r.reason) &&
			   memchr(r.code, 0, sizeof r.code),
		   "a field without its NUL");
	FUZZ_CHECK(rc == 0 || r.error[0], "a bad reply without a reason");
	FUZZ_CHECK(r.ok == 0 || r.ok == 1, "ok %d", r.ok);
	free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 7) {
	case 0: fuzz_route(data + 1, size - 1); break;
	case 1: fuzz_key(data + 1, size - 1); break;
	case 2: fuzz_batch(data + 1, size - 1); break;
	case 3: fuzz_change(data + 1, size - 1); break;
	case 4: fuzz_auth(data + 1, size - 1); break;
	case 5: fuzz_etag(data + 1, size - 1); break;
	case 6: fuzz_reply(data + 1, size - 1); break;
	}
	return 0;
}
