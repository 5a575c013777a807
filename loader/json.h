/* json.h - a small JSON writer for the control socket's one-line replies. */
#ifndef LOADER_JSON_H
#define LOADER_JSON_H

#include <stddef.h>
#include <stdint.h>

struct json {
	char *buf;
	size_t len, cap;
	int oom;
	unsigned depth;
	unsigned char first[16]; /* per nesting level: no member written yet */
};

void json_init(struct json *j);   /* starts the top-level object: "{" */
char *json_finish(struct json *j); /* "}\n"; returns the malloc'd line (NULL: out of memory) */
void json_free(struct json *j);

void json_str(struct json *j, const char *key, const char *v); /* v NULL: null */
void json_u64(struct json *j, const char *key, uint64_t v);
void json_i64(struct json *j, const char *key, int64_t v);
void json_f64(struct json *j, const char *key, double v, int decimals);
void json_bool(struct json *j, const char *key, int v);
void json_null(struct json *j, const char *key);
/* key NULL inside an array */
void json_obj_begin(struct json *j, const char *key);
void json_obj_end(struct json *j);
void json_arr_begin(struct json *j, const char *key);
void json_arr_end(struct json *j);

/* {"ok": false, "error": msg}\n, malloc'd (NULL: out of memory) */
char *json_error(const char *msg);
/* {"ok": false, "error": msg, "code": NAME}\n with NAME the errno name of
 * -err ("ENOENT") or the shmkv code ("SHMKV_ECHECKSUM"). */
char *json_error_code(const char *msg, int err);

#endif /* LOADER_JSON_H */
