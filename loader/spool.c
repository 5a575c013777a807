/* spool.c - the spool directory: NAME.shmkv renamed into it is loaded into
 * cache NAME. Watched with inotify IN_MOVED_TO only, so a file still being
 * written (created in place) is never picked up. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "spool.h"

#include "log.h"
#include "worker.h"

#define SPOOL_SUFFIX ".shmkv"

/* NAME.shmkv -> NAME; -EINVAL for any other file name */
static int spool_cache_name(const char *file, char name[SHMKV_CACHE_NAME_MAX + 1])
{
	size_t n = strlen(file), sl = strlen(SPOOL_SUFFIX);
	if (n <= sl || strcmp(file + n - sl, SPOOL_SUFFIX) || n - sl > SHMKV_CACHE_NAME_MAX)
		return -EINVAL;
	memcpy(name, file, n - sl);
	name[n - sl] = 0;
	return shmkv__valid_name(name) ? 0 : -EINVAL;
}

int spool_open(struct loader *L, char *why, size_t why_len)
{
	L->spool_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (L->spool_fd < 0)
		return shmkv__fail(-errno, why, why_len, "inotify_init1: %s", strerror(errno));
	if (inotify_add_watch(L->spool_fd, L->spool, IN_MOVED_TO | IN_ONLYDIR) < 0)
		return shmkv__fail(-errno, why, why_len, "inotify_add_watch %s: %s", L->spool,
				   strerror(errno));
	return 0;
}

static void dispose(const char *path, int ok, const char *error)
{
	if (ok) {
		if (unlink(path) != 0 && errno != ENOENT)
			log_warn("spool: unlink file=%s: %s", path, strerror(errno));
		return;
	}
	char rej[PATH_MAX + 16];
	snprintf(rej, sizeof rej, "%s.rejected", path);
	if (rename(path, rej) != 0) {
		if (errno != ENOENT)
			log_warn("spool: rename file=%s: %s", path, strerror(errno));
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
		dispose(j->path, err == 0, why);
}

static void queue(struct loader *L, const char *file)
{
	char name[SHMKV_CACHE_NAME_MAX + 1];
	if (spool_cache_name(file, name)) {
		size_t n = strlen(file);
		if (n < 9 || strcmp(file + n - 9, ".rejected"))
			log_warn("spool: ignoring file=%s/%s (expected NAME.shmkv with a valid "
				 "cache name)", L->spool, file);
		return;
	}
	struct job *j = job_new(JOB_LOAD, name);
	if (!j) {
		log_err("spool: out of memory");
		return;
	}
	if ((size_t)snprintf(j->path, sizeof j->path, "%s/%s", L->spool, file) >= sizeof j->path) {
		free(j);
		return;
	}
	j->from_spool = 1;
	j->finish = finish;
	log_info("spooled cache=%s file=%s", name, j->path);
	worker_push(L, j);
}

void spool_scan(struct loader *L)
{
	DIR *d = opendir(L->spool);
	if (!d)
		return;
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
				spool_scan(L);
			} else if ((ev->mask & IN_MOVED_TO) && ev->len && !(ev->mask & IN_ISDIR)) {
				queue(L, ev->name);
			}
			p += sizeof *ev + ev->len;
		}
	}
}
