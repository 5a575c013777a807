/* segment.c - create, back, name and inspect segment files; the segment
 * directory and the trust checks of what is adopted (segment.h). */
#include "segment.h"
#include "segname.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "diag.h"
#include "log.h"
#include "trustdir.h"

#define HUGETLBFS_MAGIC_ 0x958458f6

static gid_t dir_group = (gid_t)-1; /* set once at startup, before the worker runs */

void seg_set_dir_group(gid_t gid)
{
	dir_group = gid;
}

gid_t seg_dir_group(void)
{
	if (dir_group != (gid_t)-1)
		return dir_group;
	struct group g, *r = NULL;
	char buf[4096];
	if (getgrnam_r("shmkv", &g, buf, sizeof buf, &r) == 0 && r)
		return r->gr_gid;
	return getegid();
}

int seg_trust_stat(const struct stat *st, const char *path, int dir, int allow_root, char *why,
		   size_t why_len)
{
	uid_t me = geteuid();
	if (dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode))
		return diag_fail(-EPERM, why, why_len, "%s: not a %s (mode %06o): not trusted",
				   path, dir ? "directory" : "regular file", (unsigned)st->st_mode);
	if (st->st_uid != me && !(allow_root && st->st_uid == 0))
		return diag_fail(-EPERM, why, why_len,
				   "%s: owned by uid %u, not by the loader's uid %u: not trusted",
				   path, (unsigned)st->st_uid, (unsigned)me);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return diag_fail(-EPERM, why, why_len,
				   "%s: mode %04o is writable by group or others: not trusted", path,
				   (unsigned)(st->st_mode & 07777));
	return 0;
}

int seg_trust(int fd, const char *path, int dir, int allow_root, char *why, size_t why_len)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return diag_fail(-errno, why, why_len, "%s: fstat: %s", path, strerror(errno));
	return seg_trust_stat(&st, path, dir, allow_root, why, why_len);
}

/* SEG_DIR_NAME, or SEG_DIR_NAME "." and 6 characters (mkdtemp) */
static int is_dir_name(const char *n)
{
	size_t l = strlen(SEG_DIR_NAME);
	if (strncmp(n, SEG_DIR_NAME, l))
		return 0;
	return !n[l] || (n[l] == '.' && strlen(n + l + 1) == 6);
}

/* Opens base/name as a trusted segment directory: a descriptor or -errno. */
static int open_trusted_dir(int bfd, const char *base, const char *name, char *why,
			    size_t why_len)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", base, name);
	/* O_NOFOLLOW|O_DIRECTORY: a symlink or a FIFO fails here without blocking */
	int fd = openat(bfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return diag_fail(-errno, why, why_len, "%s: %s", path,
				   errno == ELOOP || errno == ENOTDIR ? "not a directory"
								      : strerror(errno));
	int err = seg_trust(fd, path, 1, 0, why, why_len);
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

int seg_dir_trusted(const char *base, const char *name)
{
	char why[256];
	if (!is_dir_name(name))
		return 0;
	int bfd = tdir_open(base, TDIR_STICKY_LAST, NULL, 0, why, sizeof why);
	if (bfd < 0)
		return 0;
	int fd = open_trusted_dir(bfd, base, name, why, sizeof why);
	close(bfd);
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

/* A directory just created (mode 0700 so far): its group, then 0750. */
static int finish_new_dir(int fd, const char *path, char *why, size_t why_len)
{
	if (fchown(fd, (uid_t)-1, seg_dir_group()) != 0 || fchmod(fd, 0750) != 0)
		return diag_fail(-errno, why, why_len, "%s: set group and mode: %s", path,
				   strerror(errno));
	return 0;
}

/* mkdtemp(3) in bfd: SEG_DIR_NAME ".XXXXXX", 0700; its name to name[]. */
static int private_dir(int bfd, char name[sizeof SEG_DIR_NAME + 8])
{
	static const char set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t x = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 32;
	for (int tries = 0; tries < 100; tries++) {
		char *p = name + snprintf(name, sizeof SEG_DIR_NAME + 8, SEG_DIR_NAME ".");
		for (int i = 0; i < 6; i++, x = x * 6364136223846793005ull + 1442695040888963407ull)
			*p++ = set[(x >> 33) % (sizeof set - 1)];
		*p = 0;
		if (mkdirat(bfd, name, 0700) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* The private directory last used per base (a hugetlbfs mount, shm_dir).
 * seg_dir_open runs on one thread at a time: at startup, then the worker. */
struct private_dir_seen {
	char base[PATH_MAX];
	char name[NAME_MAX + 1]; /* "" none yet */
};
static struct private_dir_seen private_dirs[8];

static struct private_dir_seen *private_dir_of(const char *base)
{
	for (size_t i = 0; i < sizeof private_dirs / sizeof private_dirs[0]; i++) {
		struct private_dir_seen *p = &private_dirs[i];
		if (!p->base[0] && strlen(base) < sizeof p->base)
			snprintf(p->base, sizeof p->base, "%s", base);
		if (!strcmp(p->base, base))
			return p;
	}
	return NULL; /* more bases than slots: read the directory as before */
}

int seg_dir_open(const char *base, char *out, size_t out_len, char *why, size_t why_len)
{
	char refused[400], w[400];
	/* the whole chain, again at every load: a directory above that changed
	 * hands since startup stops loads here (trustdir.h) */
	int bfd = tdir_open(base, TDIR_STICKY_LAST, NULL, 0, w, sizeof w);
	if (bfd < 0)
		return diag_fail(bfd, why, why_len, "segment directory base %s: %s", base, w);
	if ((size_t)snprintf(out, out_len, "%s/" SEG_DIR_NAME, base) >= out_len) {
		close(bfd);
		return diag_fail(-ENAMETOOLONG, why, why_len, "%s: path too long", base);
	}
	int created = mkdirat(bfd, SEG_DIR_NAME, 0700) == 0;
	int fd = open_trusted_dir(bfd, base, SEG_DIR_NAME, refused, sizeof refused);
	if (fd >= 0 && created && finish_new_dir(fd, out, why, why_len)) {
		close(fd);
		close(bfd);
		return -EPERM;
	}
	if (fd >= 0) {
		close(bfd);
		return fd;
	}
	/* someone else holds the name: a private directory of ours instead; an
	 * earlier one is reused so that a restart finds every segment. The one
	 * found last in this base is tried first: a load then costs the same
	 * whatever other names base holds (200k names made each load 200 ms) */
	struct private_dir_seen *pd = private_dir_of(base);
	if (pd && pd->name[0] && (fd = open_trusted_dir(bfd, base, pd->name, w, sizeof w)) >= 0)
		snprintf(out, out_len, "%s/%s", base, pd->name);
	DIR *d = fd < 0 ? fdopendir(dup(bfd)) : NULL;
	struct dirent *e;
	while (d && fd < 0 && (e = readdir(d))) {
		if (strcmp(e->d_name, SEG_DIR_NAME) && is_dir_name(e->d_name) &&
		    (fd = open_trusted_dir(bfd, base, e->d_name, w, sizeof w)) >= 0)
			snprintf(out, out_len, "%s/%s", base, e->d_name);
	}
	if (d)
		closedir(d);
	if (fd < 0) {
		char priv[sizeof SEG_DIR_NAME + 8];
		int err = private_dir(bfd, priv);
		if (err) {
			close(bfd);
			return diag_fail(err, why, why_len, "%s; and mkdir %s/" SEG_DIR_NAME
					   ".XXXXXX: %s", refused, base, strerror(-err));
		}
		snprintf(out, out_len, "%s/%s", base, priv);
		fd = open_trusted_dir(bfd, base, priv, why, why_len);
		if (fd >= 0 && finish_new_dir(fd, out, why, why_len)) {
			close(fd);
			fd = -EPERM;
		}
	}
	close(bfd);
	if (fd >= 0) {
		char q[512];
		log_err("segment directory refused: %s; using %s", log_quote(q, sizeof q, refused),
			out);
		if (pd)
			snprintf(pd->name, sizeof pd->name, "%s", strrchr(out, '/') + 1);
	}
	return fd;
}

void seg_prefix(const char *root, char *out, size_t len)
{
	segname_root_prefix(root, out, len); /* the naming rule lives in common/segname.h */
}

int seg_parse(const char *file, const char *prefix, char *cache, size_t cache_len,
	      uint64_t *load_id, int *loading)
{
	size_t pl = strlen(prefix), n = strlen(file);
	if (n <= pl || strncmp(file, prefix, pl))
		return -EINVAL;
	const char *rest = file + pl;
	n -= pl;
	*loading = 0;
	size_t sl = strlen(SEG_LOADING_SUFFIX);
	if (n > sl && !strcmp(rest + n - sl, SEG_LOADING_SUFFIX)) {
		*loading = 1;
		n -= sl;
	}
	size_t d = n;
	while (d > 0 && rest[d - 1] >= '0' && rest[d - 1] <= '9')
		d--;
	if (d == n || d < 2 || rest[d - 1] != '-' || n - d > 19)
		return -EINVAL;
	if (d - 1 >= cache_len)
		return -EINVAL;
	memcpy(cache, rest, d - 1);
	cache[d - 1] = 0;
	*load_id = strtoull(rest + d, NULL, 10);
	return 0;
}

int seg_create(struct seg *s, const char *dir, int hugetlb, uint64_t page_size,
	       const char *prefix, const char *cache, uint64_t load_id, uint64_t size, mode_t mode,
	       gid_t gid, char *why, size_t why_len)
{
	int err = 0;
	memset(s, 0, sizeof *s);
	s->fd = s->dfd = -1;
	struct seg_info *in = &s->info;
	char sdir[PATH_MAX];
	int dfd = seg_dir_open(dir, sdir, sizeof sdir, why, why_len);
	if (dfd < 0)
		return dfd;
	for (int tries = 0;; tries++) {
		if ((size_t)snprintf(in->path, sizeof in->path, "%s/%s%s-%llu", sdir, prefix, cache,
				     (unsigned long long)load_id) >= sizeof in->path) {
			close(dfd);
			return diag_fail(-ENAMETOOLONG, why, why_len,
					   "segment path in %s longer than the control segment's "
					   "%u bytes", sdir, SHMKV_CTL_PATH_MAX - 1);
		}
		snprintf(s->tmp, sizeof s->tmp, "%s%s", in->path, SEG_LOADING_SUFFIX);
		const char *name = strrchr(s->tmp, '/') + 1;
		struct stat st;
		char fin[SHMKV_CTL_PATH_MAX];
		snprintf(fin, sizeof fin, "%s", strrchr(in->path, '/') + 1);
		/* the final name must be free too: seg_commit() never replaces */
		if (fstatat(dfd, fin, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			err = -EEXIST;
		} else {
			s->fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				       0600);
			err = s->fd < 0 ? -errno : 0;
		}
		if (!err)
			break;
		if (err != -EEXIST || tries + 1 == SEG_NAME_TRIES) {
			close(dfd);
			return diag_fail(err, why, why_len, "%s: %s%s", s->tmp, strerror(-err),
					   err == -EEXIST ? " (and every load id before it)" : "");
		}
		log_warn("segment name taken file=%s: trying load id %llu", s->tmp,
			 (unsigned long long)load_id + 1);
		load_id++;
	}
	s->dfd = dfd; /* seg_commit() and seg_discard() work through it, never the path */
	in->load_id = load_id;
	in->node = -1; /* until placement is verified (load.c) */
	in->size = size;
	in->page_size = page_size;
	in->map_size = (size + page_size - 1) / page_size * page_size;
	in->flags = hugetlb ? SHMKV_SEG_HUGETLB : 0;
	/* readers need read access only: never group or other write */
	if (fchmod(s->fd, mode & 0644) != 0 ||
	    (gid != (gid_t)-1 && fchown(s->fd, (uid_t)-1, gid) != 0)) {
		err = -errno;
		diag_fail(err, why, why_len, "%s: set mode/group: %s", s->tmp, strerror(-err));
		goto fail;
	}
	if (ftruncate(s->fd, (off_t)in->map_size) != 0) {
		err = -errno;
		diag_fail(err, why, why_len, "%s: ftruncate %llu: %s", s->tmp,
			    (unsigned long long)in->map_size, strerror(-err));
		goto fail;
	}
	/* hugetlbfs: the MAP_SHARED mmap below reserves every huge page of the
	 * file (ENOMEM when short), so faults during the load cannot fail, and
	 * the pages are zeroed as the reads reach them rather than all up front.
	 * tmpfs: posix_fallocate takes the memory now (ENOSPC when short). */
	if (!hugetlb) {
		/* tmpfs' fallocate stops with EINTR whenever signal_pending(),
		 * which io_uring's task work (TIF_NOTIFY_SIGNAL) makes true for
		 * the worker too: what it allocated stays, so go on (bounded) */
		int tries = 0;
		do
			err = -posix_fallocate(s->fd, 0, (off_t)in->map_size);
		while (err == -EINTR && ++tries < 1000);
		if (err) {
			diag_fail(err, why, why_len, "%s: fallocate %llu: %s", s->tmp,
				    (unsigned long long)in->map_size, strerror(-err));
			goto fail;
		}
	}
	void *m = mmap(NULL, (size_t)in->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (m == MAP_FAILED) {
		err = -errno;
		diag_fail(err, why, why_len, "%s: mmap %llu: %s", s->tmp,
			    (unsigned long long)in->map_size, strerror(-err));
		goto fail;
	}
	s->map = m;
	return 0;
fail:
	close(s->fd);
	s->fd = -1;
	unlinkat(s->dfd, strrchr(s->tmp, '/') + 1, 0);
	close(s->dfd);
	s->dfd = -1;
	return err;
}

int seg_commit(struct seg *s, char *why, size_t why_len)
{
	int err = 0;
	munmap(s->map, (size_t)s->info.map_size);
	s->map = NULL;
	close(s->fd);
	s->fd = -1;
	/* never replaces: seg_create() chose a free name in a directory only we
	 * can write; RENAME_NOREPLACE also where a filesystem would not say so */
	const char *tmp = strrchr(s->tmp, '/') + 1, *fin = strrchr(s->info.path, '/') + 1;
	int r = renameat2(s->dfd, tmp, s->dfd, fin, RENAME_NOREPLACE);
	if (r != 0 && errno == EINVAL)
		r = linkat(s->dfd, tmp, s->dfd, fin, 0) == 0 ? unlinkat(s->dfd, tmp, 0) : -1;
	if (r != 0) {
		err = -errno;
		diag_fail(err, why, why_len, "rename %s: %s", s->tmp, strerror(-err));
		unlinkat(s->dfd, tmp, 0);
	}
	close(s->dfd);
	s->dfd = -1;
	return err;
}

void seg_discard(struct seg *s)
{
	if (s->map)
		munmap(s->map, (size_t)s->info.map_size);
	s->map = NULL;
	if (s->fd >= 0) {
		close(s->fd);
		unlinkat(s->dfd, strrchr(s->tmp, '/') + 1, 0);
	}
	s->fd = -1;
	if (s->dfd >= 0)
		close(s->dfd);
	s->dfd = -1;
}

int seg_inspect(const char *path_in, struct seg_info *in, char *why, size_t why_len)
{
	int err;
	char path[SHMKV_CTL_PATH_MAX]; /* path_in may be in->path */
	size_t plen = strlen(path_in);
	if (plen >= sizeof path)
		return diag_fail(-ENAMETOOLONG, why, why_len, "%s: path too long", path_in);
	memcpy(path, path_in, plen + 1);
	memset(in, 0, sizeof *in);
	in->node = -1;
	memcpy(in->path, path, plen + 1);
	/* O_NONBLOCK: a FIFO put here must not block the loader; then fstat */
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		return diag_fail(err, why, why_len, "%s: %s", path,
				   err == -ELOOP ? "a symbolic link: not trusted" : strerror(-err));
	}
	err = seg_trust(fd, path, 0, 0, why, why_len);
	if (err) {
		close(fd);
		return err;
	}
	struct stat st;
	struct statfs sf;
	if (fstat(fd, &st) != 0 || fstatfs(fd, &sf) != 0) {
		err = -errno;
		close(fd);
		return diag_fail(err, why, why_len, "%s: %s", path, strerror(-err));
	}
	in->flags = (unsigned long)sf.f_type == HUGETLBFS_MAGIC_ ? SHMKV_SEG_HUGETLB : 0;
	in->page_size = in->flags ? (uint64_t)sf.f_bsize : (uint64_t)sysconf(_SC_PAGESIZE);
	in->map_size = (uint64_t)st.st_size;
	if (!S_ISREG(st.st_mode) || in->map_size < SHMKV_HEADER_SIZE ||
	    in->map_size % in->page_size) {
		close(fd);
		return diag_fail(SHMKV_ETRUNCATED, why, why_len,
				   "%s: %llu bytes: not a whole image segment", path,
				   (unsigned long long)in->map_size);
	}
	void *m = mmap(NULL, (size_t)in->map_size, PROT_READ, MAP_SHARED, fd, 0);
	err = m == MAP_FAILED ? -errno : 0;
	close(fd);
	if (err)
		return diag_fail(err, why, why_len, "%s: mmap: %s", path, strerror(-err));
	const shmkv_image_header *h = m;
	uint64_t size = h->file_size;
	if (size < SHMKV_HEADER_SIZE || size > in->map_size) {
		munmap(m, (size_t)in->map_size);
		return diag_fail(SHMKV_ECORRUPT, why, why_len,
				   "%s: image header says %llu bytes, the file has %llu", path,
				   (unsigned long long)size, (unsigned long long)in->map_size);
	}
	char reason[256];
	err = shmkv_image_check(m, size, SHMKV_OPEN_NOVERIFY, reason, sizeof reason);
	if (!err) {
		in->size = size;
		in->entries = h->entry_count;
		in->format = h->format_version;
	}
	munmap(m, (size_t)in->map_size);
	if (err)
		return diag_fail(err, why, why_len, "%s: %s", path, reason);
	const char *base = strrchr(path, '/');
	const char *dash = strrchr(base ? base : path, '-');
	in->load_id = dash ? strtoull(dash + 1, NULL, 10) : 0;
	return 0;
}

shmkv_ctl_segment seg_ctl_entry(const struct seg_info *in)
{
	shmkv_ctl_segment cs;
	memset(&cs, 0, sizeof cs);
	cs.node = in->node;
	cs.flags = in->flags;
	cs.size = in->size;
	cs.map_size = in->map_size;
	cs.page_size = in->page_size;
	snprintf(cs.path, sizeof cs.path, "%s", in->path);
	return cs;
}
