/* fuzz_upgrade: shmkv_build_upgrade() (builder/upgrade_v1.cc), the one
 * reader of format 1 left, on arbitrary bytes as a format 1 image. An input
 * whose size is a multiple of SHMKV_FILE_ALIGN is made checksum-valid first
 * (fuzz_util.h: fuzz_fix_checksums; the header struct and the section table
 * are the same in both formats), so that the walk of ENTRIES is reached;
 * others go as they are (the header's paths: truncation, checksums). Either
 * an error with a message and no output, or an output that opens with
 * SHMKV_OPEN_DEEP holding the entries the stats count. Bounded: the input
 * is at most -max_len bytes, and the upgrade's work and memory follow the
 * entries it holds. */
#include <unistd.h>

#include "fuzz_build_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!fuzz_dir[0]) {
		fuzz_build_init();
		atexit(fuzz_build_cleanup);
	}
	char in[128], out[128];
	snprintf(in, sizeof in, "%s/in", fuzz_dir);
	snprintf(out, sizeof out, "%s/out.shmkv", fuzz_dir);
	uint8_t *b = fuzz_copy(data, size);
	if (size && size % SHMKV_FILE_ALIGN == 0)
		fuzz_fix_checksums(b, size);
	int fd = open(in, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || (size && write(fd, b, size) != (ssize_t)size) || close(fd) != 0)
		abort();
	free(b);
	unlink(out);
	shmkv_join_options jo;
	shmkv_join_options_init(&jo);
	jo.threads = 1;
	jo.memory_limit = 0;
	shmkv_build_stats st;
	char why[1024] = "";
	int err = shmkv_build_upgrade(out, in, &jo, &st, why, sizeof why);
	if (err) {
		FUZZ_CHECK(why[0], "error %d without a message", err);
		FUZZ_CHECK(access(out, F_OK) != 0, "a refused upgrade left %s", out);
		return 0;
	}
	shmkv *db;
	err = shmkv_open_file_diag(out, SHMKV_OPEN_DEEP, &db, why, sizeof why);
	FUZZ_CHECK(err == 0, "upgraded image refused: %s", why);
	FUZZ_CHECK(shmkv_header(db)->entry_count == st.entries, "%llu entries, stats say %llu",
		   (unsigned long long)shmkv_header(db)->entry_count,
		   (unsigned long long)st.entries);
	shmkv_close(db);
	return 0;
}
