/* typed_get.c - read typed values from a shmkv image with the header-only reader.
 * Usage: typed_get IMAGE    (the demo's sample image; see README.md) */
#include <stdio.h>

#include "shmkv.h"

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s IMAGE\n", argv[0]);
		return 2;
	}
	shmkv *db;
	char why[256];
	int err = shmkv_open_file_diag(argv[1], 0, &db, why, sizeof why);
	if (err) {
		fprintf(stderr, "typed_get: %s\n", why);
		return 2;
	}
	const char *name;
	int64_t age;
	bool active;
	double score;
	const float *emb;
	size_t n;
	shmkv_strlist tags;
	if (shmkv_get_str(db, "user:1:name", 11, &name, NULL) == 0)
		printf("user:1:name      string  %s\n", name);
	if (shmkv_get_i64(db, "user:1:age", 10, &age) == 0)
		printf("user:1:age       i64     %lld\n", (long long)age);
	if (shmkv_get_bool(db, "user:1:active", 13, &active) == 0)
		printf("user:1:active    bool    %s\n", active ? "true" : "false");
	if (shmkv_get_f64(db, "user:1:score", 12, &score) == 0)
		printf("user:1:score     f64     %g\n", score);
	if (shmkv_get_f32list(db, "user:1:embedding", 16, &emb, &n) == 0) {
		/* emb points straight into the mapped image: no copy */
		printf("user:1:embedding f32list [");
		for (size_t i = 0; i < n; i++)
			printf(i ? ", %g" : "%g", emb[i]);
		printf("]\n");
	}
	if (shmkv_get_strlist(db, "user:1:tags", 11, &tags) == 0) {
		printf("user:1:tags      strlist [");
		for (size_t i = 0; i < shmkv_strlist_count(&tags); i++)
			printf(i ? ", %s" : "%s", shmkv_strlist_at(&tags, i, NULL));
		printf("]\n");
	}
	/* a type mismatch is an error, never a conversion */
	err = shmkv_get_i64(db, "user:1:name", 11, &age);
	printf("get_i64(\"user:1:name\") -> %s\n", shmkv_strerror(err));
	err = shmkv_get_str(db, "user:404:name", 13, &name, NULL);
	printf("get_str(\"user:404:name\") -> %s\n", shmkv_strerror(err));
	shmkv_close(db);
	return 0;
}
