/* json_parse.h - a small JSON reader: text to a tree, and the tree back out
 * through the writer (json.h). For the loader's replies (cache.c).
 *
 * Strict RFC 8259: objects, arrays, strings with every escape (\uXXXX with
 * surrogate pairs to UTF-8; a lone surrogate becomes U+FFFD), numbers, true,
 * false, null; whitespace around tokens; nothing else after the value.
 * Numbers keep their text, so 64-bit integers pass through exactly.
 * Strings are NUL-terminated and carry their length (\u0000 may occur).
 * Nesting deeper than JSON_MAX_DEPTH is refused (the writer's limit). */
#ifndef SHMCTL_JSON_PARSE_H
#define SHMCTL_JSON_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"

enum jv_type { JV_NULL, JV_BOOL, JV_NUM, JV_STR, JV_ARR, JV_OBJ };

typedef struct jv {
	enum jv_type type;
	bool b;          /* JV_BOOL */
	char *s;         /* JV_STR: the decoded string; JV_NUM: the number's text */
	size_t len;      /* JV_STR, JV_NUM: bytes in s */
	size_t n;        /* JV_ARR, JV_OBJ: items or members */
	struct jv *kids; /* JV_ARR, JV_OBJ: n values */
	char **keys;     /* JV_OBJ: n member names (decoded, NUL-terminated) */
} jv;

/* Parses text[0..len). Returns 0 and fills *out (free with jv_free), or -1
 * with a message ("... at byte N") in why. */
int jv_parse(const char *text, size_t len, jv *out, char *why, size_t why_len);
void jv_free(jv *v);

/* Member name of an object, NULL when v is no object or has no such member
 * (the first one wins when a name repeats). */
const jv *jv_get(const jv *v, const char *name);
/* Typed lookups of a member: false when absent or of another type. */
bool jv_get_str(const jv *v, const char *name, const char **out);
bool jv_get_u64(const jv *v, const char *name, uint64_t *out);
bool jv_get_double(const jv *v, const char *name, double *out);
bool jv_get_bool(const jv *v, const char *name, bool *out);
/* A number as an unsigned integer (no fraction, no exponent, fits). */
bool jv_u64(const jv *v, uint64_t *out);

/* Writes v through w (numbers as their original text). */
void jv_write(struct json *w, const jv *v);

#endif /* SHMCTL_JSON_PARSE_H */
