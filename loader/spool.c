/* spool.c - the spool directory: NAME.shmkv renamed into it is loaded into
 * cache NAME, NAME.delta applied to it (overlay.c). Watched with inotify
 * IN_MOVED_TO only, so a file still being written (created in place) is
 * never picked up. The directory itself is
 * watched too (IN_DELETE_SELF, IN_MOVE_SELF, IN_IGNORED): when it goes, the
 * error is logged and shown (status.c), its parent is watched and the path
 * retried every second, and once a directory is back at that path it is
 * watched and scanned again. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "spool.h"

#include "diag.h"
#include "log.h"
#include "trustdir.h"
#include "worker.h"

#define SPOOL_SUFFIX ".shmkv"
#define SPOOL_DELTA_SUFFIX ".delta" /* a delta image to apply (overlay.c) */

/* NAME.shmkv -> NAME (*kind JOB_LOAD), NAME.delta -> NAME (JOB_APPLY);
 * -EINVAL for any other file name */
static int spool_cache_name(const char *file, char name[SHMKV_CACHE_NAME_MAX + 1],
			    enum job_kind *kind)
{
	size_t n = strlen(file), sl = strlen(SPOOL_SUFFIX);
	*kind = JOB_LOAD;
	if (n > strlen(SPOOL_DELTA_SUFFIX) &&
	    !strcmp(file + n - strlen(SPOOL_DELTA_SUFFIX), SPOOL_DELTA_SUFFIX)) {
		sl = strlen(SPOOL_DELTA_SUFFIX);
		*kind = JOB_APPLY;
	}
	if (n <= sl || strcmp(file + n - sl, *kind == JOB_APPLY ? SPOOL_DELTA_SUFFIX : SPOOL_SUFFIX) ||
	    n - sl > SHMKV_CACHE_NAME_MAX)
		return -EINVAL;
	memcpy(name, file, n - sl);
	name[n - sl] = 0;
	return (shmkv_name_check(name) == 0) ? 0 : -EINVAL;
}

#define SPOOL_EVENTS (IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

static int watch(struct loader *L, char *why, size_t why_len)
{
	int wd = inotify_add_watch(L->spool_fd, L->spool, SPOOL_EVENTS);
	if (wd < 0)
		return diag_fail(-errno, why, why_len, "inotify_add_watch %s: %s", L->spool,
				   strerror(errno));
	L->spool_wd = wd;
	return 0;
}

#define DISPOSING ".disposing"

/* ".NAME.shmkv.HEX.disposing" (take_ours()'s name) -> "NAME.shmkv" in file,
 * 0; -EINVAL for any other name. */
static int disposing_name(const char *hidden, char file[NAME_MAX + 1])
{
	size_t n = strlen(hidden), dl = strlen(DISPOSING);
	char name[SHMKV_CACHE_NAME_MAX + 1];
	if (hidden[0] != '.' || n <= dl + 1 || n > NAME_MAX || strcmp(hidden + n - dl, DISPOSING))
		return -EINVAL;
	memcpy(file, hidden + 1, n - dl - 1);
	file[n - dl - 1] = 0;
	char *dot = strrchr(file, '.');
	if (!dot || !dot[1] || strspn(dot + 1, "0123456789abcdef") != strlen(dot + 1))
		return -EINVAL;
	*dot = 0;
	enum job_kind kind;
	return spool_cache_name(file, name, &kind);
}

/* A loader stopped between take_ours() and the unlink or rename after it
 * (killed, or the unlink failed) leaves ".NAME.shmkv.HEX.disposing": the file
 * a load took (loaded or refused), or a newer one on its way back to its
 * name. Before the worker starts (dispose() runs on it) each such file goes
 * back to NAME.shmkv, to be loaded again (what was published is published
 * again, the same data) or refused again; where a file has that name
 * already, the hidden one is older than it and is removed. Nothing a
 * producer renamed in is lost this way; other hidden names (a producer's
 * temporaries) are not touched. */
static void recover(struct loader *L)
{
	DIR *d = opendir(L->spool);
	if (!d)
		return; /* spool_scan() says why */
	int dfd = dirfd(d);
	struct dirent *e;
	char file[NAME_MAX + 1];
	while ((e = readdir(d))) {
		if (disposing_name(e->d_name, file))
			continue;
		if (renameat2(dfd, e->d_name, dfd, file, RENAME_NOREPLACE) == 0) {
			log_warn("spool: file=%s/%s, left by a loader stopped while it disposed of "
				 "it, is back as %s, to be loaded", L->spool, e->d_name, file);
		} else if (errno == EEXIST) {
			if (unlinkat(dfd, e->d_name, 0) == 0)
				log_warn("spool: removed file=%s/%s, left by a loader stopped while it "
					 "disposed of it: %s is newer", L->spool, e->d_name, file);
			else
				log_warn("spool: unlink file=%s/%s: %s", L->spool, e->d_name,
					 strerror(errno));
		} else {
			log_warn("spool: rename file=%s/%s to %s: %s", L->spool, e->d_name, file,
				 strerror(errno));
		}
	}
	closedir(d);
}

int spool_open(struct loader *L, char *why, size_t why_len)
{
	L->spool_wd = L->spool_parent_wd = -1;
	L->spool_error[0] = 0;
	L->spool_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (L->spool_fd < 0)
		return diag_fail(-errno, why, why_len, "inotify_init1: %s", strerror(errno));
	int err = watch(L, why, why_len);
	if (!err)
		recover(L);
	return err;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

static void watch_parent(struct loader *L)
{
	char parent[PATH_MAX];
	snprintf(parent, sizeof parent, "%s", L->spool);
	char *s = strrchr(parent, '/');
	if (s)
		s[s == parent] = 0; /* "/spool" -> "/" */
	L->spool_parent_wd = inotify_add_watch(L->spool_fd, parent,
					       IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
}

/* Watches the spool again if a directory is back at its path and passes
 * the start-up check again (trustdir.h: its whole chain; not writable by
 * every user): 1 if so. One that is not trusted is refused, logged once per
 * reason (not at each retry), and waited for as if absent. */
static int back(struct loader *L)
{
	char why[300], w[400], msg[sizeof L->spool_error];
	struct stat st;
	if (lstat(L->spool, &st) != 0)
		return 0;
	int fd = tdir_open(L->spool, TDIR_GROUP_LAST, NULL, 0, w, sizeof w);
	if (fd < 0) {
		snprintf(msg, sizeof msg,
			 "spool directory %s is back but not trusted: %s; nothing is loaded from it",
			 L->spool, w);
		if (strcmp(msg, L->spool_error)) { /* logged once per reason, not per retry */
			memcpy(L->spool_error, msg, sizeof msg);
			log_err("spool: directory %s is back but refused: %s (it must be owned by "
				"root or the loader's user, not writable by every user, under "
				"directories only they can write); still waiting for a trusted one",
				L->spool, w);
			notify_status("spool %s refused: not trusted", L->spool);
		}
		return 0;
	}
	close(fd);
	/* checked, then watched by path: every directory above it is trusted,
	 * so no one else can swap the name in between */
	if (watch(L, why, sizeof why))
		return 0;
	if (L->spool_parent_wd >= 0)
		inotify_rm_watch(L->spool_fd, L->spool_parent_wd);
	L->spool_parent_wd = -1;
	L->spool_error[0] = 0;
	log_info("spool: directory %s is back: watching it again", L->spool);
	notify_status("spool %s is back", L->spool);
	spool_scan(L); /* what was renamed in before the watch */
	return 1;
}

/* The spool directory is gone (what: "was deleted", ...). */
static void lost(struct loader *L, const char *what)
{
	if (L->spool_wd >= 0)
		inotify_rm_watch(L->spool_fd, L->spool_wd); /* moved: it watches elsewhere now */
	L->spool_wd = -1;
	snprintf(L->spool_error, sizeof L->spool_error,
		 "spool directory %s %s: nothing is loaded from the spool until a directory is "
		 "back at that path (watched)", L->spool, what);
	log_err("spool: directory %s %s; no loads from the spool until a directory is back "
		"there", L->spool, what);
	notify_status("spool %s %s", L->spool, what);
	watch_parent(L);
	back(L); /* it may be back already */
}

int spool_wait_ms(const struct loader *L)
{
	return L->spool_wd >= 0 ? -1 : 1000;
}

void spool_tick(struct loader *L)
{
	if (L->spool_wd >= 0)
		return;
	if (L->spool_parent_wd < 0)
		watch_parent(L);
	back(L);
}

/* Takes the file at j->path out of the spool's names, to the hidden name
 * tmp, when it is the one j loaded. A check of the name then an unlink (or
 * rename) of it would race with a producer renaming a newer image over the
 * name in between (a drop right after the publish) and remove that one
 * unloaded; a rename takes exactly one file, whose identity is checked
 * after. A newer file taken so is put back (its own event loads it; the
 * event the put-back makes queues it twice, and the twin finds it handled).
 * Returns 1 with ours at tmp, 0 when there is nothing of ours to dispose of. */
static int take_ours(const struct job *j, char *tmp, size_t tmp_len)
{
	const char *path = j->path, *slash = strrchr(path, '/');
	/* a name of our own: RENAME_NOREPLACE, and another name when a producer
	 * has one already (they write the spool; nothing of theirs is replaced) */
	static unsigned long seq;
	int r = -1;
	for (int i = 0; i < 16 && r != 0; i++) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		snprintf(tmp, tmp_len, "%.*s/.%s.%lx%lx" DISPOSING, (int)(slash - path), path,
			 slash + 1, ++seq, (unsigned long)ts.tv_nsec);
		r = renameat2(AT_FDCWD, path, AT_FDCWD, tmp, RENAME_NOREPLACE);
		if (r != 0 && errno != EEXIST)
			break;
	}
	if (r != 0) {
		if (errno != ENOENT)
			log_warn("spool: rename file=%s: %s", path, strerror(errno));
		return 0;
	}
	struct stat st;
	if (lstat(tmp, &st) == 0 && st.st_dev == j->src_dev && st.st_ino == j->src_ino)
		return 1;
	log_info("spool: file=%s was replaced while it loaded; the new one stays for its own "
		 "load", path);
	/* RENAME_NOREPLACE: a still newer one came meanwhile and replaces this one,
	 * as its rename over the name would have */
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) != 0 && unlink(tmp) != 0)
		log_warn("spool: unlink file=%s: %s", tmp, strerror(errno));
	return 0;
}

static void dispose(const struct job *j, int ok, const char *error)
{
	const char *path = j->path;
	char tmp[PATH_MAX + 64];
	if (!take_ours(j, tmp, sizeof tmp))
		return;
	if (ok) {
		if (unlink(tmp) != 0)
			log_warn("spool: unlink file=%s: %s", tmp, strerror(errno));
		return;
	}
	char rej[PATH_MAX + 16];
	snprintf(rej, sizeof rej, "%s.rejected", path);
	if (rename(tmp, rej) != 0) {
		log_warn("spool: rename file=%s to %s: %s", tmp, rej, strerror(errno));
		return;
	}
	log_info("spool: moved file=%s to %s (%s)", path, rej, error ? error : "rejected");
}

/* job.finish of a spool load: a loaded file is removed, a refused one renamed
 * NAME.shmkv.rejected; a load abandoned because the loader stops leaves the
 * file for the next loader. */
static void finish(struct loader *L, const struct job *j, int err, const char *why)
{
	(void)L;
	if (err != -ECANCELED)
		dispose(j, err == 0, why);
}

static void queue(struct loader *L, const char *file)
{
	char name[SHMKV_CACHE_NAME_MAX + 1];
	enum job_kind kind;
	if (file[0] == '.')
		return; /* hidden: a producer's temporary, or ours (dispose) */
	if (spool_cache_name(file, name, &kind)) {
		size_t n = strlen(file);
		if (n < 9 || strcmp(file + n - 9, ".rejected"))
			log_warn("spool: ignoring file=%s/%s (expected NAME.shmkv or NAME.delta with a valid "
				 "cache name)", L->spool, file);
		return;
	}
	struct job *j = job_new(kind, name);
	if (!j) {
		log_err("spool: out of memory");
		return;
	}
	if ((size_t)snprintf(j->path, sizeof j->path, "%s/%s", L->spool, file) >= sizeof j->path) {
		free(j);
		return;
	}
	struct stat st;
	if (lstat(j->path, &st) != 0) {
		free(j); /* gone already: an earlier job (a rescan's twin) handled it */
		return;
	}
	j->src_dev = st.st_dev;
	j->src_ino = st.st_ino;
	j->from_spool = 1;
	j->finish = finish;
	log_info("spooled cache=%s file=%s", name, j->path);
	worker_push(L, j);
}

void spool_scan(struct loader *L)
{
	DIR *d = opendir(L->spool);
	if (!d) {
		log_warn("spool: cannot scan %s: %s", L->spool, strerror(errno));
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			queue(L, e->d_name);
	closedir(d);
}

void spool_event(struct loader *L)
{
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	for (;;) {
		ssize_t n = read(L->spool_fd, buf, sizeof buf);
		if (n <= 0)
			return;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)(void *)p;
			if (ev->mask & IN_Q_OVERFLOW) {
				log_warn("spool: inotify queue overflowed: rescanning %s", L->spool);
				if (L->spool_wd >= 0)
					spool_scan(L);
				else
					spool_tick(L);
			} else if (ev->wd >= 0 && ev->wd == L->spool_wd) {
				if (ev->mask & IN_DELETE_SELF)
					lost(L, "was deleted");
				else if (ev->mask & IN_MOVE_SELF)
					lost(L, "was moved away");
				else if (ev->mask & (IN_IGNORED | IN_UNMOUNT))
					lost(L, "is no longer watched (its filesystem unmounted?)");
				else if ((ev->mask & IN_MOVED_TO) && ev->len)
					queue(L, ev->name); /* a directory too: refused by the load */
			} else if (ev->wd >= 0 && ev->wd == L->spool_parent_wd && ev->len &&
				   !strcmp(ev->name, base_name(L->spool))) {
				back(L);
			}
			p += sizeof *ev + ev->len;
		}
	}
}
