/* trustdir.c - a directory trusted by its whole chain (trustdir.h). */
#include "trustdir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diag.h"

#define TDIR_MAX_LINKS 40 /* as the kernel's path walk (ELOOP) */

static const char *shown(const char *canon)
{
	return canon[0] ? canon : "/";
}

/* Whether the directory st (at canon) may be trusted: passing through it to
 * child, or (child NULL) as the directory asked for, by flags. */
static int check_dir(const struct stat *st, const char *canon, const struct stat *child,
		     unsigned flags, char *why, size_t why_len)
{
	uid_t me = geteuid();
	if (st->st_uid != 0 && st->st_uid != me)
		return diag_fail(-EPERM, why, why_len,
				   "%s: owned by uid %u, not by root or the loader's uid %u: not "
				   "trusted", shown(canon), (unsigned)st->st_uid, (unsigned)me);
	mode_t mode = st->st_mode & 07777;
	if (!(mode & (S_IWGRP | S_IWOTH)))
		return 0;
	int sticky = (mode & S_ISVTX) != 0;
	if (child) {
		/* /tmp, /dev/shm: others may add names but not take ours */
		if (sticky && child->st_uid == me)
			return 0;
		if (sticky)
			return diag_fail(-EPERM, why, why_len,
					   "%s: mode %04o is writable by others and the next "
					   "component is owned by uid %u, not by the loader's uid %u: "
					   "not trusted", shown(canon), (unsigned)mode,
					   (unsigned)child->st_uid, (unsigned)me);
		return diag_fail(-EPERM, why, why_len,
				   "%s: mode %04o is writable by group or others: not trusted",
				   shown(canon), (unsigned)mode);
	}
	if ((flags & TDIR_STICKY_LAST) && sticky)
		return 0;
	if ((flags & TDIR_GROUP_LAST) && !(mode & S_IWOTH))
		return 0;
	return diag_fail(-EPERM, why, why_len,
			   "%s: mode %04o is writable by group or others: not trusted", shown(canon),
			   (unsigned)mode);
}

/* Appends /name to canon[PATH_MAX]. */
static int canon_push(char *canon, const char *name)
{
	size_t l = strlen(canon), n = strlen(name);
	if (l + 1 + n >= PATH_MAX)
		return -ENAMETOOLONG;
	canon[l] = '/';
	memcpy(canon + l + 1, name, n + 1);
	return 0;
}

static int open_root(struct stat *st)
{
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, st) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A walk in progress: the directory reached (cur, its stat, its canonical
 * path) and what is left to walk (rest from pos). */
struct walk {
	char rest[2 * PATH_MAX + 2], canon[PATH_MAX];
	size_t pos;
	int cur, links;
	struct stat cst;
	unsigned flags;
	const char *path;
};

/* "..": the real parent of a directory reached by trusted steps, a prefix of
 * canon, checked on the way down. */
static int walk_up(struct walk *w, char *why, size_t why_len)
{
	char *s = strrchr(w->canon, '/');
	if (s)
		*s = 0;
	int up = openat(w->cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
	close(w->cur);
	w->cur = up;
	if (w->cur < 0 || fstat(w->cur, &w->cst) != 0)
		return diag_fail(-errno, why, why_len, "%s/..: %s", shown(w->canon),
				   strerror(errno));
	return 0;
}

/* A symbolic link in cur: followed only where cur is trusted (so root or we
 * made it); its target goes in front of what is left. */
static int walk_link(struct walk *w, const char *name, const struct stat *lst, char *why,
		     size_t why_len)
{
	int err = check_dir(&w->cst, w->canon, lst, w->flags, why, why_len);
	if (err)
		return err;
	char target[PATH_MAX], next[sizeof w->rest];
	ssize_t n = readlinkat(w->cur, name, target, sizeof target - 1);
	if (n <= 0 || ++w->links > TDIR_MAX_LINKS)
		return diag_fail(n < 0 ? -errno : -ELOOP, why, why_len, "%s/%s: %s", w->canon,
				   name, n < 0 ? strerror(errno) : "too many symbolic links");
	target[n] = 0;
	if ((size_t)snprintf(next, sizeof next, "%s/%s", target, w->rest + w->pos) >= sizeof next)
		return diag_fail(-ENAMETOOLONG, why, why_len, "%s: path too long", w->path);
	memcpy(w->rest, next, sizeof w->rest);
	w->pos = 0;
	if (target[0] == '/') {
		close(w->cur);
		w->canon[0] = 0;
		if ((w->cur = open_root(&w->cst)) < 0)
			return diag_fail(-errno, why, why_len, "/: %s", strerror(errno));
	}
	return 0;
}

/* A directory in cur: opened O_NOFOLLOW, then cur is checked towards it. */
static int walk_into(struct walk *w, const char *name, char *why, size_t why_len)
{
	int nfd = openat(w->cur, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat nst;
	if (nfd < 0 || fstat(nfd, &nst) != 0) {
		int err = -errno;
		if (nfd >= 0)
			close(nfd);
		return diag_fail(err, why, why_len, "%s/%s: %s", w->canon, name,
				   err == -ENOTDIR || err == -ELOOP ? "not a directory"
								    : strerror(-err));
	}
	int err = check_dir(&w->cst, w->canon, &nst, w->flags, why, why_len);
	if (!err && canon_push(w->canon, name))
		err = diag_fail(-ENAMETOOLONG, why, why_len, "%s: path too long", w->path);
	close(w->cur);
	w->cur = nfd;
	w->cst = nst;
	return err;
}

/* The next component of rest into name (NAME_MAX + 1): 1, or 0 at the end. */
static int next_name(struct walk *w, char *name, int *err, char *why, size_t why_len)
{
	while (w->rest[w->pos] == '/')
		w->pos++;
	if (!w->rest[w->pos])
		return 0;
	size_t end = w->pos;
	while (w->rest[end] && w->rest[end] != '/')
		end++;
	if (end - w->pos > NAME_MAX) {
		*err = diag_fail(-ENAMETOOLONG, why, why_len, "%s: a name too long", w->path);
		return 0;
	}
	memcpy(name, w->rest + w->pos, end - w->pos);
	name[end - w->pos] = 0;
	w->pos = end;
	return 1;
}

/* One component: ".", "..", a link, or a directory (made if missing and
 * TDIR_CREATE: ours, whatever the parent, which is checked towards it). */
static int walk_step(struct walk *w, const char *name, char *why, size_t why_len)
{
	if (!strcmp(name, "."))
		return 0;
	if (!strcmp(name, ".."))
		return walk_up(w, why, why_len);
	struct stat lst;
	if (fstatat(w->cur, name, &lst, AT_SYMLINK_NOFOLLOW) != 0) {
		int err = -errno;
		if (err == -ENOENT && (w->flags & TDIR_CREATE))
			err = (mkdirat(w->cur, name, 0755) == 0 || errno == EEXIST) &&
					      fstatat(w->cur, name, &lst, AT_SYMLINK_NOFOLLOW) == 0
				      ? 0
				      : -errno;
		if (err)
			return diag_fail(err, why, why_len, "%s/%s: %s", w->canon, name,
					   strerror(-err));
	}
	if (S_ISLNK(lst.st_mode))
		return walk_link(w, name, &lst, why, why_len);
	return walk_into(w, name, why, why_len);
}

int tdir_open(const char *path, unsigned flags, char *canon_out, size_t canon_len, char *why,
	      size_t why_len)
{
	struct walk *w = calloc(1, sizeof *w);
	char name[NAME_MAX + 1];
	int err = 0;
	if (!w)
		return diag_fail(-ENOMEM, why, why_len, "out of memory");
	w->flags = flags;
	w->path = path;
	if (path[0] != '/')
		err = diag_fail(-EINVAL, why, why_len, "%s: not an absolute path", path);
	else if (strlen(path) >= PATH_MAX)
		err = diag_fail(-ENAMETOOLONG, why, why_len, "%s: path too long", path);
	else if ((w->cur = open_root(&w->cst)) < 0)
		err = diag_fail(-errno, why, why_len, "/: %s", strerror(errno));
	if (err) {
		free(w);
		return err;
	}
	snprintf(w->rest, sizeof w->rest, "%s", path);
	while (!err && next_name(w, name, &err, why, why_len))
		err = walk_step(w, name, why, why_len);
	if (!err)
		err = check_dir(&w->cst, w->canon, NULL, flags, why, why_len);
	if (!err && canon_out &&
	    (size_t)snprintf(canon_out, canon_len, "%s", shown(w->canon)) >= canon_len)
		err = diag_fail(-ENAMETOOLONG, why, why_len, "%s: path too long", shown(w->canon));
	if (!err) {
		err = openat(w->cur, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (err < 0)
			err = diag_fail(-errno, why, why_len, "%s: %s", shown(w->canon),
					  strerror(errno));
	}
	if (w->cur >= 0)
		close(w->cur);
	free(w);
	return err;
}
