/* replay_main.c - runs every file of the directories (or files) given
 * through a fuzz target's LLVMFuzzerTestOneInput: the target built without
 * libFuzzer, as an ordinary test of the suite (tests/fuzz/meson.build). A
 * broken invariant aborts (FUZZ_CHECK); under ASan/UBSan (./run test-san) a
 * memory error fails the test too. Exits 1 if no file was found. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(1);
	}
	size_t cap = 1 << 16, n = 0;
	uint8_t *buf = (uint8_t *)malloc(cap);
	size_t got;
	while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap)
			buf = (uint8_t *)realloc(buf, cap *= 2);
	}
	fclose(f);
	if (!buf)
		exit(1);
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 1;
}

int main(int argc, char **argv)
{
	int files = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			files += replay_file(argv[i]);
			continue;
		}
		struct dirent **ents;
		int n = scandir(argv[i], &ents, NULL, alphasort);
		if (n < 0) {
			perror(argv[i]);
			return 1;
		}
		for (int k = 0; k < n; k++) {
			char p[4096];
			snprintf(p, sizeof p, "%s/%s", argv[i], ents[k]->d_name);
			if (ents[k]->d_name[0] != '.' && stat(p, &st) == 0 && S_ISREG(st.st_mode))
				files += replay_file(p);
			free(ents[k]);
		}
		free(ents);
	}
	printf("replayed %d files\n", files);
	return files ? 0 : 1;
}
