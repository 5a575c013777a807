/* conf.h - shmkv-http's settings: defaults, the config file ([http] section,
 * read with libinih like the loader's, loader/README.md "Config file") and
 * the command line, which overrides the file. */
#ifndef SHMKV_HTTP_CONF_H
#define SHMKV_HTTP_CONF_H

#include <stddef.h>
#include <stdint.h>

#define HTTP_CONF_MAX_CACHES 64 /* names in `caches` (what /readyz waits for), in a token's lists */
#define HTTP_CONF_MAX_TOKENS 64 /* [token NAME] sections */
#define HTTP_MAX_HEAD 8192      /* bytes of a request's head (431 past it) */
#define HTTP_TOKEN_MIN 16       /* bytes of a secret, at least */

/* Cache names, or "*" for every cache. */
struct http_token_list {
	char v[HTTP_CONF_MAX_CACHES][64];
	size_t n;
};

/* A [token NAME] section (auth.h). */
struct http_token {
	char name[64];
	char secret[256];            /* the bearer token: secret, or secret_file's first line */
	struct http_token_list read;  /* caches it may read */
	struct http_token_list write; /* caches it may read and PUT/DELETE in */
};

struct http_conf {
	char listen_host[64];      /* numeric IPv4 or IPv6 address; default 127.0.0.1 */
	unsigned port;             /* default 8420; 0: any free port (see port_file) */
	char root[256];            /* control segments (default $SHMKV_ROOT, else /run/shmkv) */
	char port_file[256];
	char tls_cert[256];        /* PEM certificate chain; with tls_key: TLS only ("" none) */
	char tls_key[256];         /* PEM private key */       /* written with the bound port once listening ("" none) */
	uint64_t max_url;          /* bytes of the request target (414 past it) */
	uint64_t max_body;         /* bytes of a request body (413 past it) */
	uint64_t max_batch_keys;   /* keys in one POST .../get (413 past it) */
	uint64_t max_connections;  /* open connections (503 and close past it) */
	uint64_t request_timeout_ms; /* a request must arrive whole within this (h2o: 408/close) */
	uint64_t write_timeout_ms;   /* a PUT/DELETE waits this long for the loader (504 past it) */
	uint64_t max_caches;       /* caches attached at once (503 past it) */
	char caches[HTTP_CONF_MAX_CACHES][64]; /* /readyz: 200 once each is attached */
	size_t n_caches;
	struct http_token tokens[HTTP_CONF_MAX_TOKENS];
	size_t n_tokens;
};

void http_conf_defaults(struct http_conf *c);
/* Reads PATH's [http] section into c. 0, or -EINVAL/-errno with why naming
 * the file, line and key. */
int http_conf_load(const char *path, struct http_conf *c, char *why, size_t why_len);
/* One setting by its config-file name (the flags use the same names):
 * 0 or -EINVAL with why. */
int http_conf_set(struct http_conf *c, const char *key, const char *value, char *why, size_t why_len);

#endif
