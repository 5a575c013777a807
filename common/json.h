/* json.h - the one JSON writer of shmkv's programs (the loader's control
 * socket replies, every shmctl -j output).
 *
 * A writer writes either to a FILE (json_init_file: shmctl's stdout, any
 * size, streamed) or to a growing malloc'd buffer (json_init: the loader's
 * one-line replies). It keeps a nesting stack and puts separators in by
 * itself. Every value function takes the member name first: a name inside an
 * object, NULL inside an array or for a top-level value.
 * Compact mode writes `{"a": 1, "b": [1, 2]}` (one line: JSONL-friendly);
 * pretty mode indents by four spaces. A top-level value ends with '\n'.
 *
 * Strings are escaped fully: '"', '\\', every control character (as \n, \t,
 * ... or \u00XX), DEL, U+2028 and U+2029 (line breaks to JavaScript). Bytes
 * that are not valid UTF-8 become U+FFFD: output is always valid UTF-8
 * JSON. Callers that must not lose bytes check shmkv_utf8_valid() (lib) first and write
 * base64 instead (json_base64).
 *
 * Not thread-safe per writer; writers share nothing. */
#ifndef SHMKV_COMMON_JSON_H
#define SHMKV_COMMON_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32 /* deeper containers still nest, without separators */

struct json {
	FILE *f;                             /* stream, or NULL: the buffer below */
	char *buf;                           /* buffer: NUL-terminated text so far */
	size_t len, cap;
	bool oom;                            /* buffer: out of memory (json_finish fails) */
	bool pretty;
	bool after_name;                     /* a member name was written, value due */
	int depth;                           /* open containers */
	bool first[JSON_MAX_DEPTH];          /* no member written yet at this depth */
};

/* Buffer writer that starts the top-level object ("{"); json_finish() ends
 * it and hands over the line. */
void json_init(struct json *j);
/* "}\n"; returns the malloc'd line (the caller frees it), or NULL when out
 * of memory (the buffer is freed then). */
char *json_finish(struct json *j);
/* Frees the buffer of a writer that will not be finished. */
void json_free(struct json *j);

/* Stream writer on f; nothing written yet. */
void json_init_file(struct json *j, FILE *f, bool pretty);

/* key: the member name inside an object, NULL in an array or at top level. */
void json_obj_begin(struct json *j, const char *key);
void json_obj_end(struct json *j);
void json_arr_begin(struct json *j, const char *key);
void json_arr_end(struct json *j);
/* A member name alone; the next value call (with key NULL) is its value. */
void json_name(struct json *j, const char *key);

void json_str(struct json *j, const char *key, const char *v); /* v NULL: null */
void json_str_n(struct json *j, const char *key, const void *v, size_t n);
void json_base64(struct json *j, const char *key, const void *p, size_t n);
void json_u64(struct json *j, const char *key, uint64_t v);
void json_i64(struct json *j, const char *key, int64_t v);
/* v with a fixed number of decimals; non-finite values are written as null. */
void json_f64(struct json *j, const char *key, double v, int decimals);
/* A statistic (ratio, seconds) with up to 6 significant digits; non-finite
 * values are written as null. */
void json_stat(struct json *j, const char *key, double v);
void json_bool(struct json *j, const char *key, bool v);
void json_null(struct json *j, const char *key);
/* Writes text as is (a number the caller formatted). */
void json_raw(struct json *j, const char *key, const char *text);

/* What kind of failure a loader reply is: its "reason" field, which clients
 * test instead of the message text (lib/PROTOCOL.md, "Errors"). The one
 * owner of these names for the loader and shmctl. */
enum json_reason {
	JSON_R_FAILED,        /* "failed": the operation failed; "code" says why */
	JSON_R_NO_CACHE,      /* "no_cache": the named cache does not exist */
	JSON_R_BAD_REQUEST,   /* "bad_request": unknown verb, wrong words, bad name */
	JSON_R_NOT_PERMITTED, /* "not_permitted": a verb this peer's uid may not use */
	JSON_R_BUSY,          /* "busy": over a connection limit; try again later */
	JSON_R_STOPPING,      /* "stopping": the loader stops; the request was not run */
	JSON_R_N_
};
const char *json_reason_name(enum json_reason r);
/* The reason a reply names; JSON_R_FAILED for an unknown or missing one. */
enum json_reason json_reason_parse(const char *name);

/* The loader's failed reply {"ok": false, "error": msg, "reason": "failed"}\n,
 * malloc'd (NULL: out of memory). */
char *json_error(const char *msg);
/* {"ok": false, "error": msg, "code": NAME, "reason": R}\n with NAME the
 * symbolic name of err (none when err is 0) and R the reason's name. */
char *json_error_reason(const char *msg, int err, enum json_reason r);
/* {"ok": false, "error": "no cache \"NAME\"", "code": "ENOENT", "reason":
 * "no_cache"}\n; json_reply_no_cache() puts it in *reply and returns -ENOENT. */
char *json_no_cache(const char *name);
int json_reply_no_cache(char **reply, const char *name);
/* json_error_reason(msg, err, JSON_R_FAILED): NAME is "ENOENT" for -ENOENT,
 * "SHMKV_ECHECKSUM" for a shmkv code. */
char *json_error_code(const char *msg, int err);
/* The loader's verbs: *reply = json_error_code() of the formatted message
 * (at most 699 bytes); returns err. */
int json_reply_error(char **reply, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Standard base64 (RFC 4648, '+' '/', '=' padding). */
void base64_write(FILE *f, const void *p, size_t n);
/* Decodes text (padding optional, no whitespace). Returns the decoded length,
 * or -1 if text is not base64. out needs (strlen(text) / 4 + 1) * 3 bytes. */
long base64_decode(const char *text, unsigned char *out);

#endif /* SHMKV_COMMON_JSON_H */
