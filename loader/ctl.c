/* ctl.c - the loader's control segments: create, map, check, publish (lib/shmkv/ctl.h). */
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
#include "log.h"

static int64_t now_real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Fills the names of out; ROOT/NAME.ctl: the one naming rule is lib's. */
static int ctl_names(int root_fd, const char *root, const char *name, struct ctl *out)
{
	memset(out, 0, sizeof *out);
	out->fd = -1;
	out->root_fd = root_fd;
	snprintf(out->name, sizeof out->name, "%s", name);
	return shmkv_ctl_path(root, name, out->path, sizeof out->path);
}

/* A new control segment at NAME.ctl in c->root_fd, of protocol c->version
 * (0: 1), with nothing published, or with generation gen and segs[0..n)
 * published before it gets its name (gen != 0): replace 0 never replaces a
 * file there (readers may map it), replace 1 takes the place of one that
 * went wrong (ctl_check) or of another protocol version (ctl_set_version);
 * old: that one's mapping, retired (SHMKV_CTL_RETIRED) just before the
 * rename, or NULL. */
static int make_pub(struct ctl *c, int replace, uint64_t gen, const shmkv_ctl_segment *segs,
		    uint32_t n, shmkv_ctl *old, char *why, size_t why_len)
{
	char tmp[SHMKV_CACHE_NAME_MAX + 16], fin[SHMKV_CACHE_NAME_MAX + 8];
	snprintf(tmp, sizeof tmp, ".%s.ctl.tmp", c->name);
	snprintf(fin, sizeof fin, "%s.ctl", c->name);
	int err;
	/* a leftover of a crash: only this loader writes here (root lock) */
	unlinkat(c->root_fd, tmp, 0);
	int fd = openat(c->root_fd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		return diag_fail(err, why, why_len, "%s/%s: %s", c->path, tmp, strerror(-err));
	}
	shmkv_ctl init;
	/* lib's one layout: magic, version, size, hash, owner */
	shmkv_ctl_init(&init);
	if (c->version == SHMKV_PROTOCOL_VERSION_2) { /* a cache with changes */
		init.protocol_version = SHMKV_PROTOCOL_VERSION_2;
		init.layout_hash = SHMKV_CTL_LAYOUT_HASH_V2;
	}
	void *map = MAP_FAILED;
	errno = 0;
	if (ftruncate(fd, SHMKV_CTL_SIZE) != 0 || pwrite(fd, &init, sizeof init, 0) != sizeof init ||
	    fchmod(fd, c->mode) != 0 || (c->gid != (gid_t)-1 && fchown(fd, (uid_t)-1, c->gid) != 0)) {
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
	if (gen && (err = shmkv_ctl_publish(map, gen, segs, n, (uint64_t)getpid(),
					    now_real_ns())) != 0) {
		diag_fail(err, why, why_len, "%s: publish: %s", tmp, strerror(-err));
		goto fail;
	}
	if (old)
		shmkv_ctl_retire(old, gen, (uint64_t)getpid(), now_real_ns());
	if (renameat2(c->root_fd, tmp, c->root_fd, fin, replace ? 0 : RENAME_NOREPLACE) != 0) {
		err = -errno;
		diag_fail(err, why, why_len, "rename %s to %s: %s", tmp, c->path, strerror(-err));
		goto fail;
	}
	c->map = map;
	c->fd = fd;
	if (gen)
		c->gen = gen;
	return 0;
fail:
	if (map != MAP_FAILED)
		munmap(map, SHMKV_CTL_SIZE);
	close(fd);
	unlinkat(c->root_fd, tmp, 0);
	return err;
}

static int ctl_check(struct ctl *c, char *why, size_t why_len);

static int make(struct ctl *c, int replace, char *why, size_t why_len)
{
	return make_pub(c, replace, 0, NULL, 0, NULL, why, why_len);
}

int ctl_create(int root_fd, const char *root, const char *name, mode_t mode, gid_t gid,
	       struct ctl *out, char *why, size_t why_len)
{
	uint64_t gen = out->gen; /* a file made again after one went wrong: on from there */
	uint32_t version = out->version;
	if (ctl_names(root_fd, root, name, out))
		return diag_fail(-ENAMETOOLONG, why, why_len, "%s: path too long", root);
	out->mode = mode;
	out->gid = gid;
	out->gen = gen;
	out->version = version;
	return make(out, 0, why, why_len);
}

int ctl_open(int root_fd, const char *root, const char *name, struct ctl *out, char *why,
	     size_t why_len)
{
	if (ctl_names(root_fd, root, name, out))
		return diag_fail(-ENAMETOOLONG, why, why_len, "%s: path too long", root);
	/* lib's one opener: O_NOFOLLOW|O_NONBLOCK, a regular file of ours that
	 * no one else may write, then size, magic, version, layout and owner */
	int err = shmkv_ctl_open_fd(root, name, SHMKV_CTL_RDWR, &out->map, &out->fd, why, why_len);
	struct stat st;
	if (!err && fstat(out->fd, &st) == 0) {
		out->mode = st.st_mode & 07777;
		out->gid = st.st_gid;
	}
	if (!err) {
		out->gen = shmkv_ctl_generation(out->map);
		out->version = out->map->protocol_version;
	}
	return err;
}

uint32_t ctl_version(const struct ctl *c)
{
	return c->map ? c->map->protocol_version : c->version ? c->version : SHMKV_PROTOCOL_VERSION;
}

int ctl_publish_version(struct ctl *c, uint32_t version, uint64_t generation,
			const shmkv_ctl_segment *segs, uint32_t n, char *why, size_t why_len)
{
	if (!c->map || c->map->protocol_version == version) {
		c->version = version;
		return ctl_publish(c, generation, segs, n, why, why_len);
	}
	if (n > SHMKV_CTL_MAX_SEGMENTS || generation == 0)
		return diag_fail(-EINVAL, why, why_len, "publish: %s", strerror(EINVAL));
	/* a file that went wrong is made anew anyway: do that first */
	int err = ctl_check(c, why, why_len);
	if (err)
		return err;
	if (c->map->protocol_version == version) {
		c->version = version;
		return ctl_publish(c, generation, segs, n, why, why_len);
	}
	uint32_t was = c->map->protocol_version;
	shmkv_ctl *old = c->map;
	int old_fd = c->fd;
	c->version = version;
	c->map = NULL;
	err = make_pub(c, 1, generation, segs, n, old, why, why_len);
	if (err) {
		c->version = was; /* the old file serves on, untouched unless retired */
		c->map = old;
		c->fd = old_fd;
		return err;
	}
	munmap(old, SHMKV_CTL_SIZE);
	close(old_fd);
	log_info("cache=%s: control segment %s is protocol %u now (was %u); readers of the old "
		 "one get SHMKV_ESTALE at their next refresh", c->name, c->path, version, was);
	return 0;
}

/* What went wrong with c's file, or NULL: truncated (its mapping would
 * SIGBUS), removed, or replaced under its name. */
static const char *ctl_fault(const struct ctl *c, struct stat *st)
{
	struct stat ns;
	char fin[SHMKV_CACHE_NAME_MAX + 8];
	snprintf(fin, sizeof fin, "%s.ctl", c->name);
	if (fstat(c->fd, st) != 0)
		return "unreadable (fstat failed)";
	if ((uint64_t)st->st_size < SHMKV_CTL_SIZE)
		return "truncated";
	if (st->st_nlink == 0)
		return "removed or replaced";
	if (fstatat(c->root_fd, fin, &ns, AT_SYMLINK_NOFOLLOW) != 0 || ns.st_dev != st->st_dev ||
	    ns.st_ino != st->st_ino)
		return "replaced";
	return NULL;
}

/* Checks c's file before a publish; one that went wrong is retired (when its
 * mapping is still whole) and made anew. 0 or -errno (c->map NULL). */
static int ctl_check(struct ctl *c, char *why, size_t why_len)
{
	struct stat st;
	const char *what = ctl_fault(c, &st);
	if (!what)
		return 0;
	int whole = (uint64_t)st.st_size >= SHMKV_CTL_SIZE;
	log_err("cache=%s: control segment %s was %s (%lld bytes, %u links): making a new one; "
		"readers of the old one get SHMKV_ESTALE at their next refresh", c->name, c->path,
		what, (long long)st.st_size, (unsigned)st.st_nlink);
	if (whole)
		shmkv_ctl_retire(c->map, c->gen + 1, (uint64_t)getpid(), now_real_ns());
	munmap(c->map, SHMKV_CTL_SIZE);
	close(c->fd);
	c->map = NULL;
	c->fd = -1;
	int err = make(c, 1, why, why_len);
	if (err) {
		char t[300];
		snprintf(t, sizeof t, "%s", why);
		log_err("cache=%s: no new control segment: %s", c->name, t);
		diag_fail(err, why, why_len, "control segment %s was %s and no new one could be "
			    "made: %s", c->path, what, t);
	}
	return err;
}

int ctl_publish(struct ctl *c, uint64_t generation, const shmkv_ctl_segment *segs, uint32_t n,
		char *why, size_t why_len)
{
	if (!c->map)
		return diag_fail(-EBADF, why, why_len, "no control segment");
	int err = ctl_check(c, why, why_len);
	if (err)
		return err;
	/* the seqcount write section, and the atomics that pair with the
	 * readers', live in lib/shmkv/ctl.h beside the reader's side */
	err = shmkv_ctl_publish(c->map, generation, segs, n, (uint64_t)getpid(), now_real_ns());
	if (err)
		return diag_fail(err, why, why_len, "publish: %s", strerror(-err));
	c->gen = generation;
	return 0;
}

uint64_t ctl_generation(const struct ctl *c)
{
	return c->gen;
}

int ctl_seq_odd(const struct ctl *c)
{
	return shmkv_ctl_mid_update(c->map);
}

int ctl_chmod(struct ctl *c, mode_t mode, gid_t gid)
{
	c->mode = mode;
	c->gid = gid;
	if (c->fd < 0)
		return -EBADF;
	if (fchmod(c->fd, mode) != 0)
		return -errno;
	if (gid != (gid_t)-1 && fchown(c->fd, (uid_t)-1, gid) != 0)
		return -errno;
	return 0;
}

void ctl_close(struct ctl *c)
{
	/* fd is valid exactly while map is (a struct ctl of a new cache is
	 * zeroed: its fd 0 is not ours) */
	if (c->map) {
		munmap(c->map, SHMKV_CTL_SIZE);
		close(c->fd);
	}
	c->map = NULL;
	c->fd = -1;
}

int ctl_remove(struct ctl *c)
{
	struct stat st;
	char fin[SHMKV_CACHE_NAME_MAX + 8];
	snprintf(fin, sizeof fin, "%s.ctl", c->name);
	const char *what = c->map ? ctl_fault(c, &st) : "gone";
	/* readers learn it at their next refresh, whatever unlinks the name */
	if (!what || !strcmp(what, "removed or replaced") || !strcmp(what, "replaced"))
		shmkv_ctl_retire(c->map, c->gen + 1, (uint64_t)getpid(), now_real_ns());
	int err = 0;
	/* only our own file: a replacement under the name is someone's mistake to keep */
	if (!what || !strcmp(what, "truncated"))
		err = unlinkat(c->root_fd, fin, 0) != 0 ? -errno : 0;
	ctl_close(c);
	return err;
}
