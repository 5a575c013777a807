/* wal.c - the durable log of changes (wal.h): its file written and read;
 * its bytes are walfmt.c's. Records only ever append; everything else
 * rewrites the file. */
#include "wal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diag.h"
#include "log.h"

#define SUFFIX ".wal"

static void file_of(const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s" SUFFIX, name);
}

static int write_all(int fd, const void *p, size_t n)
{
	for (const char *c = p; n;) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int write_rec(int fd, uint64_t seq, uint32_t flags, const void *data, uint64_t len)
{
	unsigned char h[WAL_REC_HEAD], tail[WAL_REC_TAIL];
	walfmt_rec_head(h, seq, flags, len);
	size_t tl = walfmt_rec_tail(tail, seq, flags, data, len);
	int err = write_all(fd, h, sizeof h);
	if (!err)
		err = write_all(fd, data, (size_t)len);
	if (!err)
		err = write_all(fd, tail, tl);
	return err;
}

int wal_append(struct loader *L, const char *name, const struct wal_head *h, uint64_t seq,
	       uint32_t flags, const void *data, uint64_t len, uint64_t *undo, char *why,
	       size_t why_len)
{
	char f[SHMKV_CACHE_NAME_MAX + 8];
	file_of(name, f, sizeof f);
	int fd = openat(L->durable_fd, f, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return diag_fail(-errno, why, why_len, "%s/%s: %s", L->durable, f, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0) { /* nothing written: nothing to cut */
		int e = -errno;
		close(fd);
		return diag_fail(e, why, why_len, "durable log %s/%s: %s", L->durable, f,
				 strerror(-e));
	}
	int err = 0;
	unsigned char hb[WAL_HEAD], old[WAL_HEAD];
	walfmt_head(h, hb);
	/* a log of another base (a load it missed) holds nothing that applies */
	if (!err && st.st_size >= WAL_HEAD &&
	    (pread(fd, old, WAL_HEAD, 0) != WAL_HEAD || !walfmt_head_sound(old) ||
	     memcmp(old, hb, WAL_IDENT))) {
		log_warn("durable log %s/%s names another base (or its head is damaged): started "
			 "again", L->durable, f);
		st.st_size = 0;
	}
	if (!err && st.st_size < WAL_HEAD) { /* new (or a head never finished): the head first */
		err = ftruncate(fd, 0) ? -errno : 0;
		if (!err)
			err = write_all(fd, hb, sizeof hb);
		st.st_size = WAL_HEAD;
	}
	*undo = (uint64_t)st.st_size;
	if (!err && lseek(fd, st.st_size, SEEK_SET) < 0)
		err = -errno;
	if (!err)
		err = write_rec(fd, seq, flags, data, len);
	if (!err && fdatasync(fd) != 0)
		err = -errno;
	if (err && ftruncate(fd, st.st_size) == 0)
		fdatasync(fd); /* no half record left behind us */
	else if (err)
		*undo = WAL_UNCUT;
	close(fd);
	if (err)
		return diag_fail(err, why, why_len, "durable log %s/%s: %s", L->durable, f,
				 strerror(-err));
	return 0;
}

int wal_undo(struct loader *L, const char *name, uint64_t size)
{
	char f[SHMKV_CACHE_NAME_MAX + 8];
	file_of(name, f, sizeof f);
	int fd = openat(L->durable_fd, f, O_WRONLY | O_NOFOLLOW | O_CLOEXEC), err = 0;
	if (fd < 0 || ftruncate(fd, (off_t)size) != 0 || fdatasync(fd) != 0) {
		err = -errno;
		log_err("durable log %s/%s: cutting a record whose publish failed: %s", L->durable,
			f, strerror(errno));
	}
	if (fd >= 0)
		close(fd);
	return err;
}

int wal_reset(struct loader *L, const char *name, const struct wal_head *h,
	      const struct wal_rec *recs, size_t n, char *why, size_t why_len)
{
	char f[SHMKV_CACHE_NAME_MAX + 8], tmp[SHMKV_CACHE_NAME_MAX + 16];
	file_of(name, f, sizeof f);
	snprintf(tmp, sizeof tmp, ".%s.tmp", f);
	int fd = openat(L->durable_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
			0600);
	if (fd < 0)
		return diag_fail(-errno, why, why_len, "%s/%s: %s", L->durable, tmp,
				 strerror(errno));
	unsigned char hb[WAL_HEAD];
	walfmt_head(h, hb);
	int err = write_all(fd, hb, sizeof hb);
	for (size_t i = 0; !err && i < n; i++)
		err = write_rec(fd, recs[i].seq, 0, recs[i].data, recs[i].len);
	if (!err && fsync(fd) != 0)
		err = -errno;
	close(fd);
	if (!err && renameat(L->durable_fd, tmp, L->durable_fd, f) != 0)
		err = -errno;
	if (!err && fsync(L->durable_fd) != 0)
		err = -errno;
	if (err) {
		unlinkat(L->durable_fd, tmp, 0);
		return diag_fail(err, why, why_len, "durable log %s/%s: %s", L->durable, f,
				 strerror(-err));
	}
	return 0;
}

int wal_retire(struct loader *L, const char *name, const char *suffix, char *kept,
	       size_t kept_len)
{
	char f[SHMKV_CACHE_NAME_MAX + 8], to[SHMKV_CACHE_NAME_MAX + 48];
	file_of(name, f, sizeof f);
	if (kept_len)
		kept[0] = 0;
	if (!suffix)
		return unlinkat(L->durable_fd, f, 0) != 0 && errno != ENOENT ? -errno : 0;
	/* never over a log set aside before: an operator's evidence, kept
	 * until they remove it. NAME.wal.SUFFIX, else the lowest free
	 * NAME.wal.SUFFIX.N (RENAME_NOREPLACE, a link where a filesystem has
	 * no such rename: neither replaces a name) */
	int err = -EEXIST;
	for (unsigned i = 0; err == -EEXIST && i < 1000; i++) {
		if (i)
			snprintf(to, sizeof to, "%s.%s.%u", f, suffix, i);
		else
			snprintf(to, sizeof to, "%s.%s", f, suffix);
		int r = renameat2(L->durable_fd, f, L->durable_fd, to, RENAME_NOREPLACE);
		if (r != 0 && errno == EINVAL)
			r = linkat(L->durable_fd, f, L->durable_fd, to, 0) == 0
				    ? unlinkat(L->durable_fd, f, 0)
				    : -1;
		err = r ? -errno : 0;
	}
	if (err && err != -ENOENT)
		log_err("durable log %s/%s: renaming it to %s: %s (it stays: the next start "
			"reads it again)", L->durable, f, to, strerror(-err));
	if (!err)
		snprintf(kept, kept_len, "%s", to);
	return err;
}

/* The whole of the log file into *buf, *size. */
static int slurp(struct loader *L, const char *f, char **buf, size_t *size)
{
	int fd = openat(L->durable_fd, f, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	int err = fstat(fd, &st) ? -errno : !S_ISREG(st.st_mode) ? -EINVAL : 0;
	char *b = err ? NULL : malloc((size_t)st.st_size + 1);
	if (!err && !b)
		err = -ENOMEM;
	size_t got = 0;
	while (!err && got < (size_t)st.st_size) {
		ssize_t r = read(fd, b + got, (size_t)st.st_size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			err = r < 0 ? -errno : -EIO;
		else
			got += (size_t)r;
	}
	close(fd);
	if (err) {
		free(b);
		return err;
	}
	*buf = b;
	*size = got;
	return 0;
}

int wal_read(struct loader *L, const char *name, struct wal_head *h, char **buf,
	     struct wal_rec **recs, size_t *n, char *why, size_t why_len)
{
	char f[SHMKV_CACHE_NAME_MAX + 8];
	file_of(name, f, sizeof f);
	size_t size = 0;
	*buf = NULL;
	*recs = NULL;
	*n = 0;
	int err = slurp(L, f, buf, &size);
	if (err)
		return err == -ENOENT ? err
				      : diag_fail(err, why, why_len, "%s/%s: %s", L->durable, f,
						  strerror(-err));
	size_t at;
	const char *torn;
	err = walfmt_parse(*buf, size, h, recs, n, &at, &torn, why, why_len);
	if (err) {
		char w[300];
		snprintf(w, sizeof w, "%s", why);
		return diag_fail(err, why, why_len, "%s/%s: %s", L->durable, f, w);
	}
	if (torn) {
		log_warn("durable log %s/%s: %s at byte %zu: the %zu bytes from there on are "
			 "discarded (a write the loader did not finish; it was never acknowledged)",
			 L->durable, f, torn, at, size - at);
		int fd = openat(L->durable_fd, f, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || ftruncate(fd, (off_t)at) != 0 || fdatasync(fd) != 0)
			log_err("durable log %s/%s: cutting the torn tail: %s", L->durable, f,
				strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	return 0;
}

int wal_exists(struct loader *L, const char *name)
{
	char f[SHMKV_CACHE_NAME_MAX + 8];
	struct stat st;
	file_of(name, f, sizeof f);
	return fstatat(L->durable_fd, f, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

int wal_list(struct loader *L, char ***names, size_t *n)
{
	*names = NULL;
	*n = 0;
	int fd = openat(L->durable_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	size_t cap = 0;
	int err = 0;
	for (struct dirent *e; !err && (e = readdir(d));) {
		size_t l = strlen(e->d_name);
		if (e->d_name[0] == '.' && l > 4 && !strcmp(e->d_name + l - 4, ".tmp")) {
			/* a log or a kept base being written when a loader died */
			if (unlinkat(L->durable_fd, e->d_name, 0) == 0)
				log_info("removed leftover file=%s/%s", L->durable, e->d_name);
			continue;
		}
		if (l <= strlen(SUFFIX) || strcmp(e->d_name + l - strlen(SUFFIX), SUFFIX))
			continue;
		char nm[SHMKV_CACHE_NAME_MAX + 1];
		size_t nl = l - strlen(SUFFIX);
		if (nl > SHMKV_CACHE_NAME_MAX)
			continue;
		memcpy(nm, e->d_name, nl);
		nm[nl] = 0;
		if (shmkv_name_check(nm) != 0)
			continue; /* not a cache's: never ours */
		if (*n == cap) {
			cap = cap ? 2 * cap : 8;
			char **a = realloc(*names, cap * sizeof *a);
			if (!a) {
				err = -ENOMEM;
				break;
			}
			*names = a;
		}
		if (!((*names)[*n] = strdup(nm)))
			err = -ENOMEM;
		else
			(*n)++;
	}
	closedir(d);
	return err;
}
