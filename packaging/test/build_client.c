/* build_client.c - packaging/test/deb_test.sh's producer: builds an image
 * with the installed builder library, linked by
 * `cc $(pkg-config --cflags --libs shmkv-build)` alone.
 * usage: build_client OUT KEY VALUE   exit 0 written, 1 failed */
#include <shmkv.h>
#include <shmkv_build.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: build_client OUT KEY VALUE\n");
		return 2;
	}
	shmkv_build_options o;
	shmkv_build_options_init(&o);
	shmkv_builder *b;
	int err = shmkv_builder_new(&o, &b);
	if (err) {
		fprintf(stderr, "build_client: new: %s\n", shmkv_strerror(err));
		return 1;
	}
	err = shmkv_builder_add_str(b, argv[2], strlen(argv[2]), argv[3], strlen(argv[3]));
	if (!err)
		err = shmkv_builder_add_i64(b, "answer", 6, 42);
	if (!err)
		err = shmkv_builder_finish(b, argv[1], NULL);
	if (err) {
		fprintf(stderr, "build_client: %s\n", shmkv_builder_error(b));
		shmkv_builder_free(b);
		return 1;
	}
	shmkv_builder_free(b);
	return 0;
}
