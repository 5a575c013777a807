/* ctl.c - the control segment writer; the reader is lib/shmkv/attach.h. */
#include "ctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <shmkv/atomic.h>

static int ctl_path(const char *root, const char *name, char *out, size_t len)
{
	if ((size_t)snprintf(out, len, "%s/%s.ctl", root, name) >= len)
		return -ENAMETOOLONG;
	return 0;
}

int ctl_create(const char *root, const char *name, mode_t mode, gid_t gid, struct ctl *out,
	       char *why, size_t why_len)
{
	char tmp[PATH_MAX];
	int err = ctl_path(root, name, out->path, sizeof out->path);
	if (err || (size_t)snprintf(tmp, sizeof tmp, "%s/.%s.ctl.tmp", root, name) >= sizeof tmp)
		return shmkv__fail(-ENAMETOOLONG, why, why_len, "%s: path too long", root);
	unlink(tmp); /* a leftover of a crash: only this loader writes here (root lock) */
	int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		return shmkv__fail(err, why, why_len, "%s: %s", tmp, strerror(-err));
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
		shmkv__fail(err, why, why_len, "%s: %s", tmp, strerror(-err));
		goto fail;
	}
	map = mmap(NULL, SHMKV_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		err = -errno;
		shmkv__fail(err, why, why_len, "%s: mmap: %s", tmp, strerror(-err));
		goto fail;
	}
	/* never replaces: a reader may have the existing file mapped */
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, out->path, RENAME_NOREPLACE) != 0) {
		err = -errno;
		shmkv__fail(err, why, why_len, "rename %s to %s: %s", tmp, out->path, strerror(-err));
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
		return shmkv__fail(err, why, why_len, "%s: path too long", root);
	int fd = open(out->path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		return shmkv__fail(err, why, why_len, "%s: %s", out->path, strerror(-err));
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)SHMKV_CTL_SIZE) {
		close(fd);
		return shmkv__fail(SHMKV_EPROTO, why, why_len,
				   "%s: not a shmkv control segment (size)", out->path);
	}
	void *map = mmap(NULL, SHMKV_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	err = map == MAP_FAILED ? -errno : 0;
	close(fd);
	if (err)
		return shmkv__fail(err, why, why_len, "%s: mmap: %s", out->path, strerror(-err));
	const shmkv_ctl *c = map;
	if (memcmp(c->magic, SHMKV_CTL_MAGIC, 8) != 0 ||
	    c->protocol_version != SHMKV_PROTOCOL_VERSION || c->ctl_size != SHMKV_CTL_SIZE ||
	    c->layout_hash != SHMKV_CTL_LAYOUT_HASH) {
		munmap(map, SHMKV_CTL_SIZE);
		return shmkv__fail(SHMKV_EPROTO, why, why_len,
				   "%s: not a control segment of protocol version %u layout %016llx",
				   out->path, SHMKV_PROTOCOL_VERSION,
				   (unsigned long long)SHMKV_CTL_LAYOUT_HASH);
	}
	out->map = map;
	return 0;
}

void ctl_publish(struct ctl *c, uint64_t generation, const shmkv_ctl_segment *segs, uint32_t n)
{
	shmkv_ctl *ctl = c->map;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	/* The loader is the only writer: a relaxed load sees its own last store.
	 * An odd seq is a section a crashed loader left open: s is its start. */
	uint64_t s = shmkv__load_relaxed(&ctl->seq) & ~UINT64_C(1);
	shmkv__store_relaxed(&ctl->seq, s + 1);
	/* pairs with shmkv__fence_acquire() in lib/shmkv/attach.h:shmkv__ctl_snapshot():
	 * a reader that sees any store below also sees seq odd on its re-read */
	shmkv__fence_release();
	ctl->segment_count = n;
	for (uint32_t i = 0; i < SHMKV_CTL_MAX_SEGMENTS; i++) {
		if (i < n)
			ctl->segments[i] = segs[i];
		else
			memset(&ctl->segments[i], 0, sizeof ctl->segments[i]);
	}
	ctl->loader_pid = (uint64_t)getpid();
	ctl->published_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	/* pairs with shmkv__load_acquire(&ctl->generation) in lib/shmkv/attach.h:
	 * shmkv_refresh(): a reader that sees the new generation sees the fields
	 * above too (it copies them in the seqcount loop all the same). Release,
	 * not relaxed: a relaxed store would leave that acquire unpaired. */
	shmkv__store_release(&ctl->generation, generation);
	/* pairs with shmkv__load_acquire(&ctl->seq) in lib/shmkv/attach.h:
	 * shmkv__ctl_snapshot(): the section's stores are visible before seq turns
	 * even again */
	shmkv__store_release(&ctl->seq, s + 2);
}

uint64_t ctl_generation(const struct ctl *c)
{
	/* only writer: no ordering needed to read its own store */
	return c->map ? shmkv__load_relaxed(&c->map->generation) : 0;
}

int ctl_seq_odd(const struct ctl *c)
{
	/* only writer (or a loader adopting a dead one's segment): relaxed */
	return (int)(shmkv__load_relaxed(&c->map->seq) & 1);
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
