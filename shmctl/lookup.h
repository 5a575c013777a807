/* lookup.h - the `get` verb shared by `image get` (a file) and `cache get`
 * (a loader-managed cache): key argument, shmkv_get_diag, printing. */
#ifndef SHMCTL_LOOKUP_H
#define SHMCTL_LOOKUP_H

#include <stdbool.h>
#include <stddef.h>

#include <shmkv.h>

#include "json.h"

/* Where a get reads from. */
struct get_source {
	const char *object;         /* "image": usage messages point at its help */
	const char *usage;          /* "FILE KEY" */
	int (*help)(int argc, char **argv);
	/* Opens the source named by arg: 0, or reports why and returns the exit code. */
	int (*open)(const char *arg, shmkv **db);
	/* Put before arg in error messages ("cache "), or NULL. */
	const char *what_prefix;
	const char *corrupt_hint;   /* appended to a damaged-entry error, or NULL */
	bool takes_root;            /* accepts -r/--root DIR (sets root_option) */
};

/* The verb: [-j] [-p] [--key-base64] [-r DIR] SOURCE KEY. Prints KEY's value (value.h:
 * plain, or {"key": K, "type": T, "value": V} with -j). Returns 0, 1 when
 * the key is absent, 2 on usage and other errors. */
int get_verb(int argc, char **argv, const struct get_source *src);

/* Unix seconds as RFC 3339 UTC ("2030-01-31T12:00:00Z") into buf. */
void expiry_text(char *buf, size_t n, uint32_t t);

/* Writes the key member: "key" when UTF-8, else "key_base64". */
void json_key_member(struct json *w, const void *key, size_t len);

#endif /* SHMCTL_LOOKUP_H */
