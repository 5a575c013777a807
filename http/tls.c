/* tls.c - see tls.h. */
#include "tls.h"

#include <errno.h>
#include <stdio.h>

#include <openssl/err.h>

#define H2O_USE_LIBUV 0
#include <h2o.h>

static int fail(SSL_CTX *ctx, char *why, size_t why_len, const char *what, const char *path)
{
	char reason[256];
	ERR_error_string_n(ERR_get_error(), reason, sizeof reason);
	snprintf(why, why_len, "%s %s: %s", what, path, reason);
	ERR_clear_error();
	SSL_CTX_free(ctx);
	return -EINVAL;
}

int http_tls_ctx(const struct http_conf *c, SSL_CTX **out, char *why, size_t why_len)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx)
		return fail(NULL, why, why_len, "tls", "context");
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
	if (SSL_CTX_use_certificate_chain_file(ctx, c->tls_cert) != 1)
		return fail(ctx, why, why_len, "tls_cert", c->tls_cert);
	if (SSL_CTX_use_PrivateKey_file(ctx, c->tls_key, SSL_FILETYPE_PEM) != 1)
		return fail(ctx, why, why_len, "tls_key", c->tls_key);
	if (SSL_CTX_check_private_key(ctx) != 1)
		return fail(ctx, why, why_len, "tls_key does not match tls_cert:", c->tls_key);
	h2o_ssl_register_alpn_protocols(ctx, h2o_http2_alpn_protocols);
	*out = ctx;
	return 0;
}
