/* attach_watch.c - attach to a loader-managed cache and follow generation swaps.
 * Usage: attach_watch ROOT NAME KEY SECONDS
 * Prints KEY's value and the generation, then refreshes (an fstat and one
 * atomic load when nothing changed) until the generation moves or SECONDS pass. Exit 0 when it
 * saw a swap, 1 when none came, 2 on errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shmkv.h"

static void show(shmkv *db, const char *key)
{
	const char *s;
	size_t len;
	int err = shmkv_get_str(db, key, strlen(key), &s, &len);
	printf("client: generation %llu: %s = %s\n", (unsigned long long)shmkv_generation(db), key,
	       err ? shmkv_strerror(err) : s);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: %s ROOT NAME KEY SECONDS\n", argv[0]);
		return 2;
	}
	shmkv *db;
	char why[256];
	int err = shmkv_attach_diag(argv[1], argv[2], 0, &db, why, sizeof why);
	if (err) {
		fprintf(stderr, "client: attach: %s\n", why);
		return 2;
	}
	show(db, argv[3]);
	struct timespec nap = {0, 10 * 1000 * 1000};
	for (long i = 0; i < atol(argv[4]) * 100; i++) {
		err = shmkv_refresh(db);
		if (err < 0) {
			fprintf(stderr, "client: refresh: %s\n", shmkv_strerror(err));
			break;
		}
		if (err == 1) {
			show(db, argv[3]);
			shmkv_close(db);
			return 0;
		}
		nanosleep(&nap, NULL);
	}
	shmkv_close(db);
	return 1;
}
