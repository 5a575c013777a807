/* loaderreply.h - the jansson side of changes.c (common/json.h and
 * jansson.h cannot share a file): a PUT body's JSON value on one line, and
 * the loader's reply line read. */
#ifndef SHMKV_HTTP_LOADERREPLY_H
#define SHMKV_HTTP_LOADERREPLY_H

#include <stddef.h>
#include <stdint.h>

/* body[0..len) as one compact JSON value (malloc'd), NULL when it is not
 * exactly one JSON value. */
char *loaderreply_compact(const char *body, size_t len);

struct loader_reply {
	int ok;
	int64_t generation;
	char error[700], reason[32], code[48];
};

/* Reads a reply line {"ok": ..., "generation" | "error", "reason", "code"};
 * 0, or -1 when it is not a JSON object (error says why). */
int loaderreply_parse(const char *line, size_t len, struct loader_reply *r);

#endif
