/* client.c - packaging/test/deb_test.sh's reader: attaches to a cache of the
 * installed loader and prints one string value. Built with
 * `cc $(pkg-config --cflags shmkv) client.c` alone (header-only reader).
 * usage: client ROOT CACHE KEY   exit 0 printed, 1 attach or get failed */
#include <shmkv.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: client ROOT CACHE KEY\n");
		return 2;
	}
	shmkv *db;
	char why[512];
	int err = shmkv_attach_diag(argv[1], argv[2], SHMKV_ATTACH_VERIFY, &db, why, sizeof why);
	if (err) {
		fprintf(stderr, "client: attach %s: %s (%s)\n", argv[2], why, shmkv_errname(err));
		return 1;
	}
	const char *s;
	size_t len;
	err = shmkv_get_str(db, argv[3], strlen(argv[3]), &s, &len);
	if (err) {
		fprintf(stderr, "client: get %s: %s\n", argv[3], shmkv_strerror(err));
		shmkv_close(db);
		return 1;
	}
	printf("gen=%llu %.*s\n", (unsigned long long)shmkv_generation(db), (int)len, s);
	shmkv_close(db);
	return 0;
}
