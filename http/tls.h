/* tls.h - TLS for the listening socket (http/README.md "TLS"): OpenSSL,
 * through h2o, HTTP/2 offered by ALPN beside HTTP/1.1. */
#ifndef SHMKV_HTTP_TLS_H
#define SHMKV_HTTP_TLS_H

#include <stddef.h>

#include <openssl/ssl.h>

#include "conf.h"

/* A server context from c's tls_cert and tls_key (TLS 1.2 and later):
 * 0 with *out, or -EINVAL with why naming the file and OpenSSL's reason. */
int http_tls_ctx(const struct http_conf *c, SSL_CTX **out, char *why, size_t why_len);

#endif
