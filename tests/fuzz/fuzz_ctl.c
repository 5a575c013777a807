/* fuzz_ctl: the control segment reader on arbitrary bytes. The input
 * (zero-padded or cut to SHMKV_CTL_SIZE) is
 *   1. read in memory: shmkv_ctl_read, shmkv_ctl_generation,
 *      shmkv_ctl_mid_update (seq is made even first: an odd seq only spins
 *      until -EAGAIN, which would make every other run take a quarter second);
 *   2. written as ROOT/f.ctl and attached to (shmkv_ctl_open through
 *      shmkv_attach_diag, then read every way and refreshed): the path the
 *      reader takes on a control segment another process wrote. Segment paths
 *      that start with '@' are rewritten to the target's temporary directory,
 *      which holds seg.shmkv (an image, fuzz_seg_image.h) and junk (not an
 *      image); other paths are left out of the attach step, so that the
 *      fuzzer never opens files of the machine it runs on. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_seg_image.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char root[64];

static void cleanup(void)
{
	const char *names[] = {"f.ctl", "seg.shmkv", "junk"};
	char p[128];
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		snprintf(p, sizeof p, "%s/%s", root, names[i]);
		unlink(p);
	}
	rmdir(root);
}

static void init_root(void)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(root, sizeof root, "%s/shmkv-fuzz-XXXXXX", base);
	if (!mkdtemp(root))
		abort();
	atexit(cleanup);
	char p[128];
	snprintf(p, sizeof p, "%s/seg.shmkv", root);
	if (fuzz_build_seg_image(p) != 0)
		abort();
	snprintf(p, sizeof p, "%s/junk", root);
	FILE *f = fopen(p, "w");
	if (!f)
		abort();
	for (int i = 0; i < 300; i++)
		fputs("not an image at all\n", f);
	fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!root[0])
		init_root();
	uint8_t *full = (uint8_t *)calloc(1, SHMKV_CTL_SIZE);
	if (!full)
		abort();
	memcpy(full, data, size < SHMKV_CTL_SIZE ? size : SHMKV_CTL_SIZE);
	shmkv_ctl *ctl = (shmkv_ctl *)(void *)full;
	(void)shmkv_ctl_mid_update(ctl);
	ctl->seq &= ~(uint64_t)1;

	/* 1. in memory */
	shmkv_ctl copy;
	int err = shmkv_ctl_read(ctl, &copy);
	FUZZ_CHECK(err == 0 || err == SHMKV_EPROTO, "ctl_read: %d", err);
	FUZZ_CHECK(shmkv_ctl_generation(ctl) == ctl->generation, "generation");
	FUZZ_CHECK(!shmkv_ctl_mid_update(ctl), "seq is even");
	for (uint32_t i = 0; i < SHMKV_CTL_MAX_SEGMENTS; i++)
		FUZZ_CHECK(memchr(copy.segments[i].path, 0, SHMKV_CTL_PATH_MAX),
			   "path %u not terminated", i);

	/* 2. as a file, attached to */
	int ours = 1;
	for (uint32_t i = 0; i < SHMKV_CTL_MAX_SEGMENTS; i++) {
		char *p = ctl->segments[i].path;
		p[SHMKV_CTL_PATH_MAX - 1] = 0;
		if (!p[0])
			continue;
		if (p[0] != '@') {
			ours = 0;
			continue;
		}
		char tail[SHMKV_CTL_PATH_MAX];
		snprintf(tail, sizeof tail, "%s", p + 1);
		snprintf(p, SHMKV_CTL_PATH_MAX, "%s%.*s", root, (int)(SHMKV_CTL_PATH_MAX - 64), tail);
	}
	if (ours) {
		char path[128];
		snprintf(path, sizeof path, "%s/f.ctl", root);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || write(fd, full, SHMKV_CTL_SIZE) != (ssize_t)SHMKV_CTL_SIZE ||
		    close(fd) != 0)
			abort();
		static const unsigned flags[] = {0, SHMKV_ATTACH_VERIFY | SHMKV_OPEN_DEEP};
		for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
			shmkv *db = NULL;
			char why[512] = "";
			err = shmkv_attach_diag(root, "f", flags[i], &db, why, sizeof why);
			if (err) {
				FUZZ_CHECK(why[0] && !db, "attach error %d without a reason", err);
				continue;
			}
			fuzz_read_all(db, NULL, 0);
			err = shmkv_refresh(db);
			FUZZ_CHECK(err == 0, "refresh of an unchanged segment: %d", err);
			shmkv_close(db);
		}
	}
	free(full);
	return 0;
}
