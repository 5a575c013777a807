/* keyenc.h - keys in URLs: every byte but the unreserved ones
 * of RFC 3986 §2.3 may be percent-encoded, and '/', '?', '%', '#' and
 * bytes outside printable ASCII must be; a key that is not UTF-8 is written
 * byte by byte the same way (%FF...). Decoding is strict: a '%' not followed
 * by two hex digits is an error, never passed through. Answers name a key
 * in JSON (keyenc_json). */
#ifndef SHMKV_HTTP_KEYENC_H
#define SHMKV_HTTP_KEYENC_H

#include <stddef.h>

struct json;

/* Decodes in[0..n) into out (room for n bytes); the decoded length, or -1
 * at a bad escape (*bad: its offset) or a byte no URL may carry raw
 * (controls, space, DEL, non-ASCII). */
long keyenc_decode(const char *in, size_t n, char *out, size_t *bad);

/* A key in a JSON answer or change record (common/json.h's writer w):
 * "key" when it is UTF-8, else "key_base64" (no byte lost either way). */
void keyenc_json(struct json *w, const char *key, size_t len);

#endif
