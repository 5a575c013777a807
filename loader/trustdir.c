/* trustdir.c - a directory trusted by its whole chain (trustdir.h). */
#include "trustdir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
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

int tdir_open(const char *path, unsigned flags, char *canon_out, size_t canon_len, char *why,
	      size_t why_len)
{
	char rest[2 * PATH_MAX + 2], canon[PATH_MAX] = "", name[NAME_MAX + 1];
	struct stat cst;
	int err = 0, links = 0;
	if (path[0] != '/')
		return diag_fail(-EINVAL, why, why_len, "%s: not an absolute path", path);
	if (strlen(path) >= PATH_MAX)
		return diag_fail(-ENAMETOOLONG, why, why_len, "%s: path too long", path);
	snprintf(rest, sizeof rest, "%s", path);
	int cur = open_root(&cst);
	if (cur < 0)
		return diag_fail(-errno, why, why_len, "/: %s", strerror(errno));
	for (size_t pos = 0;;) {
		while (rest[pos] == '/')
			pos++;
		if (!rest[pos])
			break;
		size_t end = pos;
		while (rest[end] && rest[end] != '/')
			end++;
		if (end - pos > NAME_MAX) {
			err = diag_fail(-ENAMETOOLONG, why, why_len, "%s: a name too long", path);
			goto out;
		}
		memcpy(name, rest + pos, end - pos);
		name[end - pos] = 0;
		pos = end;
		if (!strcmp(name, "."))
			continue;
		if (!strcmp(name, "..")) {
			/* the real parent of a directory reached by trusted
			 * steps: a prefix of canon, checked on the way down */
			char *s = strrchr(canon, '/');
			if (s)
				*s = 0;
			int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
			close(cur);
			cur = up;
			if (cur < 0 || fstat(cur, &cst) != 0) {
				err = diag_fail(-errno, why, why_len, "%s/..: %s", shown(canon),
						  strerror(errno));
				goto out;
			}
			continue;
		}
		struct stat lst;
		if (fstatat(cur, name, &lst, AT_SYMLINK_NOFOLLOW) != 0) {
			err = -errno;
			if (err == -ENOENT && (flags & TDIR_CREATE)) {
				/* made by us: ours, whatever the parent (checked below) */
				if ((mkdirat(cur, name, 0755) == 0 || errno == EEXIST) &&
				    fstatat(cur, name, &lst, AT_SYMLINK_NOFOLLOW) == 0)
					err = 0;
				else
					err = -errno;
			}
			if (err) {
				diag_fail(err, why, why_len, "%s/%s: %s", canon, name, strerror(-err));
				goto out;
			}
		}
		if (S_ISLNK(lst.st_mode)) {
			/* a link in a trusted directory is root's or ours */
			if ((err = check_dir(&cst, canon, &lst, flags, why, why_len)))
				goto out;
			char target[PATH_MAX];
			ssize_t n = readlinkat(cur, name, target, sizeof target - 1);
			if (n <= 0 || ++links > TDIR_MAX_LINKS) {
				err = diag_fail(n < 0 ? -errno : -ELOOP, why, why_len,
						  "%s/%s: %s", canon, name,
						  n < 0 ? strerror(errno) : "too many symbolic links");
				goto out;
			}
			target[n] = 0;
			char next[sizeof rest];
			if ((size_t)snprintf(next, sizeof next, "%s/%s", target, rest + pos) >=
			    sizeof next) {
				err = diag_fail(-ENAMETOOLONG, why, why_len, "%s: path too long", path);
				goto out;
			}
			memcpy(rest, next, sizeof rest);
			pos = 0;
			if (target[0] == '/') {
				close(cur);
				canon[0] = 0;
				if ((cur = open_root(&cst)) < 0) {
					err = diag_fail(-errno, why, why_len, "/: %s", strerror(errno));
					goto out;
				}
			}
			continue;
		}
		int nfd = openat(cur, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		struct stat nst;
		if (nfd < 0 || fstat(nfd, &nst) != 0) {
			err = -errno;
			diag_fail(err, why, why_len, "%s/%s: %s", canon, name,
				    err == -ENOTDIR || err == -ELOOP ? "not a directory"
								     : strerror(-err));
			if (nfd >= 0)
				close(nfd);
			goto out;
		}
		err = check_dir(&cst, canon, &nst, flags, why, why_len);
		if (!err && canon_push(canon, name))
			err = diag_fail(-ENAMETOOLONG, why, why_len, "%s: path too long", path);
		close(cur);
		cur = nfd;
		cst = nst;
		if (err)
			goto out;
	}
	if ((err = check_dir(&cst, canon, NULL, flags, why, why_len)))
		goto out;
	if (canon_out && (size_t)snprintf(canon_out, canon_len, "%s", shown(canon)) >= canon_len) {
		err = diag_fail(-ENAMETOOLONG, why, why_len, "%s: path too long", shown(canon));
		goto out;
	}
	int fd = openat(cur, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		err = diag_fail(-errno, why, why_len, "%s: %s", shown(canon), strerror(errno));
	else
		err = fd;
out:
	if (cur >= 0)
		close(cur);
	return err;
}
