/* json.h - a small streaming JSON writer, UTF-8 checks and base64.
 *
 * The writer keeps a nesting stack and puts separators in by itself: call
 * json_name() before each member of an object, then one value function.
 * Compact mode writes `{"a": 1, "b": [1, 2]}` (one line: JSONL-friendly);
 * pretty mode indents by four spaces. A top-level value ends with '\n'.
 *
 * Strings are escaped fully: '"', '\\', every control character (as \n, \t,
 * ... or \u00XX), DEL, U+2028 and U+2029. Bytes that are not valid UTF-8 are
 * written as U+FFFD by json_str_n(); callers that must not lose bytes check
 * utf8_valid() first and use base64 instead.
 */
#ifndef SHMCTL_JSON_H
#define SHMCTL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

typedef struct json_writer {
	FILE *f;
	bool pretty;
	int depth;                      /* open containers */
	bool first[JSON_MAX_DEPTH];     /* no member written yet at this depth */
	bool in_object[JSON_MAX_DEPTH]; /* container is an object (else array) */
	bool after_name;                /* a member name was written, value due */
} json_writer;

void json_init(json_writer *w, FILE *f, bool pretty);

void json_obj_begin(json_writer *w);
void json_obj_end(json_writer *w);
void json_arr_begin(json_writer *w);
void json_arr_end(json_writer *w);
void json_name(json_writer *w, const char *name);

void json_str(json_writer *w, const char *s);
void json_str_n(json_writer *w, const void *s, size_t n);
void json_base64(json_writer *w, const void *p, size_t n);
void json_u64(json_writer *w, uint64_t v);
void json_i64(json_writer *w, int64_t v);
void json_bool(json_writer *w, bool v);
void json_null(json_writer *w);
/* A finite double with up to 6 significant digits, for statistics
 * (ratios, seconds); non-finite values are written as null. */
void json_stat(json_writer *w, double v);
/* Writes text as is (a number the caller formatted). */
void json_raw(json_writer *w, const char *text);

/* name + value shorthands */
void json_kv_str(json_writer *w, const char *name, const char *s);
void json_kv_u64(json_writer *w, const char *name, uint64_t v);
void json_kv_i64(json_writer *w, const char *name, int64_t v);
void json_kv_bool(json_writer *w, const char *name, bool v);
void json_kv_stat(json_writer *w, const char *name, double v);

/* Length of the valid UTF-8 sequence at p (1..4), or 0 if the bytes there are
 * not one (overlong forms, surrogates and code points over U+10FFFF are not). */
size_t utf8_seq_len(const unsigned char *p, size_t n);
bool utf8_valid(const void *p, size_t n);

/* Standard base64 (RFC 4648, '+' '/', '=' padding). */
void base64_write(FILE *f, const void *p, size_t n);
/* Decodes text (padding optional, no whitespace). Returns the decoded length,
 * or -1 if text is not base64. out needs (strlen(text) / 4 + 1) * 3 bytes. */
long base64_decode(const char *text, unsigned char *out);

#endif /* SHMCTL_JSON_H */
