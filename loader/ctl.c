/* ctl.c - the loader's control segments: create, map, publish (lib/shmkv/ctl.h). */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "diag.h"

/* ROOT/NAME.ctl: the one naming rule is lib's (shmkv_ctl_path). */
static int ctl_path(const char *root, const char *name, char *out, size_t len)
{
	return shmkv_ctl_path(root, name, out, len);
}

int ctl_create(const char *root, const char *name, mode_t mode, gid_t gid, struct ctl *out,
	       char *why, size_t why_len)
{
	char tmp[PATH_MAX];
	int err = ctl_path(root, name, out->path, sizeof out->path);
	if (err || (size_t)snprintf(tmp, sizeof tmp, "%s/.%s.ctl.tmp", root, name) >= sizeof tmp)
		return diag_fail(-ENAMETOOLONG, why, why_len, "%s: path too long", root);
	unlink(tmp); /* a leftover of a crash: only this loader writes here (root lock) */
	int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		return diag_fail(err, why, why_len, "%s: %s", tmp, strerror(-err));
	}
	shmkv_ctl init;
	memset(&init, 0, sizeof init);
	memcpy(init.magic, SHMKV_CTL_MAGIC, 8);
	init.protocol_version = SHMKV_PROTOCOL_VERSION;
	init.ctl_size = SHMKV_CTL_SIZE;
	init.layout_hash = SHMKV_CTL_LAYOUT_HASH;
	void *map = MAP_FAILED;
	if (ftruncate(fd, SHMKV_CTL_SIZE) != 0 || pwrite(fd, &init, sizeof init, 0) != sizeof init ||
	    fchmod(fd, mode) != 0 || (gid != (gid_t)-1 && fchown(fd, (uid_t)-1, gid) != 0)) {
		err = errno ? -errno : -EIO;
		diag_fail(err, why, why_len, "%s: %s", tmp, strerror(-err));
		goto fail;
	}
	map = mmap(NULL, SHMKV_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		err = -errno;
		diag_fail(err, why, why_len, "%s: mmap: %s", tmp, strerror(-err));
		goto fail;
	}
	/* never replaces: a reader may have the existing file mapped */
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, out->path, RENAME_NOREPLACE) != 0) {
		err = -errno;
		diag_fail(err, why, why_len, "rename %s to %s: %s", tmp, out->path, strerror(-err));
		goto fail;
	}
	close(fd);
	out->map = map;
	return 0;
fail:
	if (map != MAP_FAILED)
		munmap(map, SHMKV_CTL_SIZE);
	close(fd);
	unlink(tmp);
	return err;
}

int ctl_open(const char *root, const char *name, struct ctl *out, char *why, size_t why_len)
{
	int err = ctl_path(root, name, out->path, sizeof out->path);
	if (err)
		return diag_fail(err, why, why_len, "%s: path too long", root);
	/* lib's one opener: O_NOFOLLOW|O_NONBLOCK, a regular file of ours that
	 * no one else may write, then size, magic, version and layout */
	return shmkv_ctl_open(root, name, SHMKV_CTL_RDWR, &out->map, why, why_len);
}

int ctl_publish(struct ctl *c, uint64_t generation, const shmkv_ctl_segment *segs, uint32_t n)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	/* the seqcount write section, and the atomics that pair with the
	 * readers', live in lib/shmkv/ctl.h beside the reader's side */
	return shmkv_ctl_publish(c->map, generation, segs, n, (uint64_t)getpid(),
				 (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
}

uint64_t ctl_generation(const struct ctl *c)
{
	return c->map ? shmkv_ctl_generation(c->map) : 0;
}

int ctl_seq_odd(const struct ctl *c)
{
	return shmkv_ctl_mid_update(c->map);
}

int ctl_chmod(const struct ctl *c, mode_t mode, gid_t gid)
{
	if (chmod(c->path, mode) != 0)
		return -errno;
	if (gid != (gid_t)-1 && chown(c->path, (uid_t)-1, gid) != 0)
		return -errno;
	return 0;
}

void ctl_close(struct ctl *c)
{
	if (c->map)
		munmap(c->map, SHMKV_CTL_SIZE);
	c->map = NULL;
}

int ctl_remove(struct ctl *c)
{
	int err = unlink(c->path) != 0 ? -errno : 0;
	ctl_close(c);
	return err;
}
