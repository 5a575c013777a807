/* fuzz_build_input.h - the builder's JSONL and TSV readers on arbitrary
 * text (fuzz_jsonl.c, fuzz_tsv.c). The input goes to a file in a private
 * temporary directory (shmkv_builder_add_file reads files); what the reader
 * accepts is built (shmkv_builder_finish) and the image must open and pass
 * the full structural check: the builder never writes an image its reader
 * refuses. A refusal must come with a message. */
#ifndef SHMKV_FUZZ_BUILD_INPUT_H
#define SHMKV_FUZZ_BUILD_INPUT_H

#include <fcntl.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "shmkv_build.h"

static char fuzz_dir[64];

static inline void fuzz_build_init(void)
{
	if (fuzz_dir[0])
		return;
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(fuzz_dir, sizeof fuzz_dir, "%s/shmkv-fuzz-XXXXXX", base);
	if (!mkdtemp(fuzz_dir))
		abort();
	/* the directory is removed at exit; files in it are rewritten each run */
}

static inline void fuzz_build_cleanup(void)
{
	char p[128];
	snprintf(p, sizeof p, "%s/in", fuzz_dir);
	unlink(p);
	snprintf(p, sizeof p, "%s/out.shmkv", fuzz_dir);
	unlink(p);
	rmdir(fuzz_dir);
}

static inline void fuzz_build_one(const uint8_t *text, size_t size, int format, unsigned tsv_type)
{
	if (!fuzz_dir[0]) {
		fuzz_build_init();
		atexit(fuzz_build_cleanup);
	}
	char in[128], out[128];
	snprintf(in, sizeof in, "%s/in", fuzz_dir);
	snprintf(out, sizeof out, "%s/out.shmkv", fuzz_dir);
	int fd = open(in, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || (size && write(fd, text, size) != (ssize_t)size) || close(fd) != 0)
		abort();
	shmkv_build_options o;
	if (shmkv_build_options_init(&o) != 0)
		abort();
	o.created = 1;
	o.fixed |= SHMKV_OPT_CREATED;
	shmkv_builder *b;
	if (shmkv_builder_new(&o, &b) != 0)
		abort();
	int err = shmkv_builder_add_file(b, in, format, tsv_type);
	if (err) {
		FUZZ_CHECK(shmkv_builder_error(b)[0], "error %d without a message", err);
		shmkv_builder_free(b);
		return;
	}
	err = shmkv_builder_finish(b, out, NULL);
	if (err) {
		FUZZ_CHECK(err != -EIO && shmkv_builder_error(b)[0], "finish: %d (%s)", err,
			   shmkv_builder_error(b));
		shmkv_builder_free(b);
		return;
	}
	shmkv_builder_free(b);
	shmkv *db;
	char why[512] = "";
	err = shmkv_open_file_diag(out, SHMKV_OPEN_DEEP, &db, why, sizeof why);
	FUZZ_CHECK(err == 0, "built image refused: %s", why);
	shmkv_iter it;
	shmkv_iter_init(db, &it);
	const void *k;
	size_t kl;
	shmkv_value v;
	uint64_t n = 0;
	while ((err = shmkv_iter_next(&it, &k, &kl, &v)) == 0) {
		shmkv_value got;
		FUZZ_CHECK(shmkv_get(db, k, kl, &got) == 0, "built key not found");
		n++;
	}
	FUZZ_CHECK(err == SHMKV_EEND && n == shmkv_header(db)->entry_count, "iteration: %d", err);
	shmkv_close(db);
}

#endif /* SHMKV_FUZZ_BUILD_INPUT_H */
