/* jv.h - parsed JSON (the loader's replies) for shmctl: jansson parses;
 * these accessors are all shmctl reads with, and jv_write() writes a value
 * back out through the one writer (common/json.h).
 *
 * Only jv.c includes <jansson.h>: jansson's json_null() and
 * json_error_code() have the writer's names. A jv is jansson's json_t.
 *
 * Integers are 64-bit signed (jansson's json_int_t): a reply with a larger
 * one is refused as not JSON we can read, never rounded. */
#ifndef SHMCTL_JV_H
#define SHMCTL_JV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json; /* common/json.h: not included here, see above */

typedef struct json_t jv;

/* Deepest nesting jv_parse accepts: what the writer separates correctly
 * (jv_write.c checks it against JSON_MAX_DEPTH). */
#define JV_MAX_DEPTH 32

enum jv_type { JV_NULL, JV_BOOL, JV_NUM, JV_STR, JV_ARR, JV_OBJ };

/* Parses text[0..len) (one value, nothing after it but whitespace; \u0000
 * allowed in strings; at most JV_MAX_DEPTH levels of nesting). Returns the
 * value (free with jv_free), or NULL with "MESSAGE at byte N" in why. */
jv *jv_parse(const char *text, size_t len, char *why, size_t why_len);
void jv_free(jv *v); /* NULL is ignored */

enum jv_type jv_type(const jv *v); /* JV_NULL for a NULL v */
/* Items of an array or members of an object; 0 for anything else. */
size_t jv_size(const jv *v);
/* Item i of an array, NULL past the end or when v is no array. */
const jv *jv_item(const jv *v, size_t i);
/* Object members in their order: for (const void *it = jv_first(obj); it;
 * it = jv_next(obj, it)) use jv_key(it) and jv_value(it). */
const void *jv_first(const jv *obj);
const void *jv_next(const jv *obj, const void *it);
const char *jv_key(const void *it);
const jv *jv_value(const void *it);

/* Member name of an object, NULL when v is no object or has no such member. */
const jv *jv_get(const jv *v, const char *name);
/* A string's bytes (NUL-terminated; *len, if given, counts a \u0000 inside
 * too), or NULL when v is no string. */
const char *jv_str(const jv *v, size_t *len);
/* A number as an unsigned integer (an integer >= 0). */
bool jv_u64(const jv *v, uint64_t *out);
/* A number as JSON text into buf: integers exactly, other numbers in the
 * shortest form that reads back as the same double. Returns buf. */
const char *jv_num_text(const jv *v, char *buf, size_t len);
bool jv_is_true(const jv *v);

/* Typed lookups of a member: false when absent or of another type. */
bool jv_get_str(const jv *v, const char *name, const char **out);
bool jv_get_u64(const jv *v, const char *name, uint64_t *out);
bool jv_get_bool(const jv *v, const char *name, bool *out);

/* Writes v through w as the next value (jv_write.c). */
void jv_write(struct json *w, const jv *v);

#endif /* SHMCTL_JV_H */
