/* conf.c - settings of shmkv-http. See conf.h. */
#include "conf.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>
#include <shmkv.h>

#include "host.h"

void http_conf_defaults(struct http_conf *c)
{
	memset(c, 0, sizeof *c);
	snprintf(c->listen_host, sizeof c->listen_host, "127.0.0.1");
	c->port = 8420;
	snprintf(c->root, sizeof c->root, "%s", shmkv_ctl_root(NULL));
	c->max_url = 8192;
	c->max_body = 1 << 20;
	c->max_batch_keys = 1000;
	c->max_connections = 1024;
	c->request_timeout_ms = 10000;
	c->write_timeout_ms = 30000;
	c->max_caches = 256;
}

static int set_listen(struct http_conf *c, const char *v)
{
	/* HOST:PORT, [V6]:PORT or HOST alone; HOST numeric (no resolver at start) */
	char host[64];
	const char *port = NULL;
	if (*v == '[') {
		const char *e = strchr(v, ']');
		if (!e || (size_t)(e - v - 1) >= sizeof host)
			return -EINVAL;
		snprintf(host, sizeof host, "%.*s", (int)(e - v - 1), v + 1);
		if (e[1] == ':')
			port = e + 2;
		else if (e[1])
			return -EINVAL;
	} else {
		const char *e = strrchr(v, ':');
		if (e && strchr(v, ':') != e)
			return -EINVAL; /* a bare IPv6 address: write [ADDR]:PORT */
		size_t n = e ? (size_t)(e - v) : strlen(v);
		if (n >= sizeof host)
			return -EINVAL;
		snprintf(host, sizeof host, "%.*s", (int)n, v);
		port = e ? e + 1 : NULL;
	}
	unsigned char buf[16];
	if (inet_pton(AF_INET, host, buf) != 1 && inet_pton(AF_INET6, host, buf) != 1)
		return -EINVAL;
	if (port) {
		char *end;
		errno = 0;
		unsigned long p = strtoul(port, &end, 10);
		if (!isdigit((unsigned char)*port) || *end || errno || p > 65535)
			return -EINVAL;
		c->port = (unsigned)p;
	}
	snprintf(c->listen_host, sizeof c->listen_host, "%s", host);
	return 0;
}

/* Comma- or space-separated cache names into v (n of at most max); "*"
 * (every cache) where star allows it. */
static int parse_names(const char *list, char (*v)[64], size_t *n, int star)
{
	*n = 0;
	const char *p = list;
	while (*p) {
		while (*p == ' ' || *p == ',')
			p++;
		size_t l = strcspn(p, " ,");
		if (!l)
			break;
		if (*n == HTTP_CONF_MAX_CACHES || l >= 64)
			return -EINVAL;
		snprintf(v[*n], 64, "%.*s", (int)l, p);
		if (!(star && !strcmp(v[*n], "*")) && shmkv_name_check(v[*n]))
			return -EINVAL;
		(*n)++;
		p += l;
	}
	return 0;
}

static int set_caches(struct http_conf *c, const char *v)
{
	return parse_names(v, c->caches, &c->n_caches, 0);
}

/* Numbers with K/M/G (common/host.h owns the syntax), within [lo, hi]. */
static int set_u64(uint64_t *dst, const char *v, uint64_t lo, uint64_t hi)
{
	uint64_t n;
	if (host_parse_size(v, &n) || n < lo || n > hi)
		return -EINVAL;
	*dst = n;
	return 0;
}

struct key_row {
	const char *name;
	const char *syntax;
};

static const struct key_row keys[] = {
	{"listen", "ADDR[:PORT] or [V6ADDR]:PORT, numeric"},
	{"root", "an absolute directory"},
	{"port_file", "an absolute path"},
	{"tls_cert", "an absolute path"},
	{"tls_key", "an absolute path"},
	{"max_url", "1K..1M"},
	{"max_body", "1K..1G"},
	{"max_batch_keys", "1..1000000"},
	{"max_connections", "1..1000000"},
	{"request_timeout", "a duration, 100ms..1h"},
	{"write_timeout", "a duration, 100ms..1h"},
	{"max_caches", "1..65536"},
	{"caches", "cache names, comma-separated"},
};

int http_conf_set(struct http_conf *c, const char *k, const char *v, char *why, size_t why_len)
{
	int err = -EINVAL;
	uint64_t ms;
	const char *syntax = NULL;
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (!strcmp(keys[i].name, k))
			syntax = keys[i].syntax;
	if (!syntax) {
		snprintf(why, why_len,
			 "unknown key \"%s\" (listen, root, port_file, tls_cert, tls_key, max_url, max_body, "
			 "max_batch_keys, max_connections, request_timeout, write_timeout, max_caches, caches)",
			 k);
		return -EINVAL;
	}
	if (!strcmp(k, "listen"))
		err = set_listen(c, v);
	else if (!strcmp(k, "root") || !strcmp(k, "port_file") || !strcmp(k, "tls_cert") ||
		 !strcmp(k, "tls_key")) {
		char *dst = !strcmp(k, "root")	     ? c->root
			    : !strcmp(k, "port_file") ? c->port_file
			    : !strcmp(k, "tls_cert")  ? c->tls_cert
						      : c->tls_key;
		if (v[0] == '/' && strlen(v) < sizeof c->root) {
			snprintf(dst, sizeof c->root, "%s", v);
			err = 0;
		}
	} else if (!strcmp(k, "max_url"))
		err = set_u64(&c->max_url, v, 1024, 1 << 20);
	else if (!strcmp(k, "max_body"))
		err = set_u64(&c->max_body, v, 1024, 1 << 30);
	else if (!strcmp(k, "max_batch_keys"))
		err = set_u64(&c->max_batch_keys, v, 1, 1000000);
	else if (!strcmp(k, "max_connections"))
		err = set_u64(&c->max_connections, v, 1, 1000000);
	else if (!strcmp(k, "max_caches"))
		err = set_u64(&c->max_caches, v, 1, 65536);
	else if (!strcmp(k, "request_timeout") || !strcmp(k, "write_timeout")) {
		if (!host_parse_duration_ms(v, &ms) && ms >= 100 && ms <= 3600000) {
			*(!strcmp(k, "request_timeout") ? &c->request_timeout_ms : &c->write_timeout_ms) = ms;
			err = 0;
		}
	} else if (!strcmp(k, "caches"))
		err = set_caches(c, v);
	if (err)
		snprintf(why, why_len, "%s = \"%s\": expected %s", k, v, syntax);
	return err;
}

/* A secret: printable ASCII without spaces (RFC 6750's b64token and more),
 * HTTP_TOKEN_MIN..255 bytes. */
static int secret_ok(const char *v)
{
	size_t n = strlen(v);
	for (size_t i = 0; i < n; i++)
		if (v[i] <= ' ' || v[i] > '~')
			return 0;
	return n >= HTTP_TOKEN_MIN && n < 256;
}

static int secret_file(struct http_token *t, const char *path, char *why, size_t why_len)
{
	FILE *f = fopen(path, "re");
	char line[300] = "";
	if (!f) {
		int e = -errno;
		snprintf(why, why_len, "secret_file = \"%s\": %s", path, strerror(-e));
		return e;
	}
	if (!fgets(line, sizeof line, f))
		line[0] = 0;
	fclose(f);
	line[strcspn(line, "\r\n")] = 0;
	if (!secret_ok(line)) {
		snprintf(why, why_len,
			 "secret_file = \"%s\": its first line must be the token, %d..255 printable "
			 "ASCII bytes without spaces",
			 path, HTTP_TOKEN_MIN);
		return -EINVAL;
	}
	snprintf(t->secret, sizeof t->secret, "%s", line);
	return 0;
}

/* A key of a [token NAME] section. */
static int token_set(struct http_token *t, const char *k, const char *v, char *why, size_t why_len)
{
	int err = -EINVAL;
	const char *syntax = NULL;
	if (!strcmp(k, "secret")) {
		syntax = "the token, 16..255 printable ASCII bytes without spaces";
		if (secret_ok(v)) {
			snprintf(t->secret, sizeof t->secret, "%s", v);
			err = 0;
		}
	} else if (!strcmp(k, "secret_file")) {
		if (v[0] != '/') {
			snprintf(why, why_len, "secret_file = \"%s\": expected an absolute path", v);
			return -EINVAL;
		}
		return secret_file(t, v, why, why_len);
	} else if (!strcmp(k, "read") || !strcmp(k, "write")) {
		syntax = "cache names, comma-separated, or *";
		struct http_token_list *l = !strcmp(k, "read") ? &t->read : &t->write;
		err = parse_names(v, l->v, &l->n, 1);
	} else {
		snprintf(why, why_len, "unknown key \"%s\" in [token %s] (secret, secret_file, read, write)", k,
			 t->name);
		return -EINVAL;
	}
	if (err)
		snprintf(why, why_len, "%s = \"%s\": expected %s", k, v, syntax);
	return err;
}

/* The [token NAME] section of that name, made on its first line. */
static struct http_token *token_of(struct http_conf *c, const char *section, char *why, size_t why_len)
{
	const char *name = section + 6;
	for (size_t i = 0; i < c->n_tokens; i++)
		if (!strcmp(c->tokens[i].name, name))
			return &c->tokens[i];
	if (!*name || strlen(name) >= sizeof c->tokens[0].name || strpbrk(name, " \t")) {
		snprintf(why, why_len, "[%s]: a token's name is 1..63 bytes without spaces", section);
		return NULL;
	}
	if (c->n_tokens == HTTP_CONF_MAX_TOKENS) {
		snprintf(why, why_len, "[%s]: more than %d [token] sections", section, HTTP_CONF_MAX_TOKENS);
		return NULL;
	}
	struct http_token *t = &c->tokens[c->n_tokens++];
	memset(t, 0, sizeof *t);
	snprintf(t->name, sizeof t->name, "%s", name);
	return t;
}

struct parse {
	struct http_conf *c;
	const char *path;
	char *why;
	size_t why_len;
	int err;
};

static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct parse *p = user;
	if (p->err)
		return 0;
	char why[300];
	if (!strncmp(section, "token ", 6)) {
		struct http_token *t = token_of(p->c, section, why, sizeof why);
		p->err = t ? token_set(t, name, value, why, sizeof why) : -EINVAL;
	} else if (strcmp(section, "http")) {
		snprintf(why, sizeof why, "unknown section [%s] ([http], [token NAME])", section);
		p->err = -EINVAL;
	} else {
		p->err = http_conf_set(p->c, name, value, why, sizeof why);
	}
	if (p->err)
		snprintf(p->why, p->why_len, "%s: %s", p->path, why);
	return p->err ? 0 : 1;
}

int http_conf_load(const char *path, struct http_conf *c, char *why, size_t why_len)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		int e = -errno;
		snprintf(why, why_len, "%s: %s", path, strerror(-e));
		return e;
	}
	struct parse p = {c, path, why, why_len, 0};
	int line = ini_parse_file(f, handler, &p);
	fclose(f);
	if (p.err) {
		/* name the line: handler() stops at the first bad one */
		char tmp[400];
		snprintf(tmp, sizeof tmp, "%s", why);
		const char *rest = tmp + strlen(path) + 2;
		snprintf(why, why_len, "%s:%d: %s", path, line, rest);
		return p.err;
	}
	if (line) {
		snprintf(why, why_len, "%s:%d: not a line of an ini file (or longer than 199 bytes)", path, line);
		return -EINVAL;
	}
	for (size_t i = 0; i < c->n_tokens; i++) {
		const struct http_token *t = &c->tokens[i];
		const char *miss = !t->secret[0] ? "no secret or secret_file"
				   : !t->read.n && !t->write.n ? "no read or write list"
							       : NULL;
		for (size_t j = 0; !miss && j < i; j++)
			if (!strcmp(t->secret, c->tokens[j].secret))
				miss = "the same secret as another token";
		if (miss) {
			snprintf(why, why_len, "%s: [token %s]: %s", path, t->name, miss);
			return -EINVAL;
		}
	}
	return 0;
}
