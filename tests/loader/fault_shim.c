/* fault_shim.c - an LD_PRELOAD library for fault_test: makes pread()/pread64()
 * of one file fail, end early, return short counts or go slowly, a rename()
 * renameat() or renameat2() onto one name go slowly (or wait, or fail),
 * ftruncate() or fdatasync() of one file fail, accept()/accept4() fail (EMFILE) and open() of
 * /dev/null fail (the loader's reserve descriptor), as told by the control file the test
 * rewrites while the loader runs (fault_conf.h: the modes).
 * Reads of other files (by device and inode), or with no control file, pass
 * through untouched. Only the pread engine (`--io pread`) goes through here:
 * io_uring reads bypass libc (faultfs.c injects those). */
#undef _FILE_OFFSET_BITS /* pread and pread64 both defined here, each as itself */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "fault_conf.h"

typedef ssize_t (*pread_fn)(int, void *, size_t, off64_t);
typedef int (*rename_fn)(const char *, const char *);
typedef int (*renameat_fn)(int, const char *, int, const char *);
typedef int (*renameat2_fn)(int, const char *, int, const char *, unsigned int);

static int is_target(int fd, const struct fault *f)
{
	struct stat a, b;
	return fstat(fd, &a) == 0 && stat(f->path, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

static ssize_t faulty(pread_fn real, int fd, void *buf, size_t n, off64_t off)
{
	struct fault f;
	if (!fault_read_conf(getenv("SHMKV_FAULT_CONF"), &f) || !is_target(fd, &f))
		return real(fd, buf, n, off);
	long long m = fault_read_len(&f, (long long)off, n);
	if (m < 0) {
		errno = (int)-m;
		return -1;
	}
	return m == 0 ? 0 : real(fd, buf, (size_t)m, off);
}

ssize_t pread64(int fd, void *buf, size_t n, off64_t off)
{
	static pread_fn real;
	if (!real)
		real = (pread_fn)dlsym(RTLD_NEXT, "pread64");
	return faulty(real, fd, buf, n, off);
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	static pread_fn real;
	if (!real)
		real = (pread_fn)dlsym(RTLD_NEXT, "pread64");
	return faulty(real, fd, buf, n, off);
}

/* Whether a rename onto to is the one of f (relative: to is a name in a
 * directory given by descriptor, matched against f's last component). */
static int rename_target(const char *to, int relative, const struct fault *f)
{
	const char *base = strrchr(f->path, '/');
	return !strcmp(to, relative && base ? base + 1 : f->path);
}

/* "slowrename N": sleeps N microseconds. "holdrename N": waits while the
 * control file still says so, with the same N (at most N microseconds),
 * having written N into CONF.held for the test to see it waits (the test
 * lets it go on and holds the next such rename by writing another N). */
static void slow_rename(const char *to, int relative)
{
	const char *conf = getenv("SHMKV_FAULT_CONF");
	struct fault f;
	if (!fault_read_conf(conf, &f) || !rename_target(to, relative, &f))
		return;
	if (!strcmp(f.mode, "slowrename")) {
		usleep((useconds_t)f.arg);
	} else if (!strcmp(f.mode, "holdrename")) {
		char held[4200];
		snprintf(held, sizeof held, "%s.held", conf);
		int fd = open(held, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd >= 0) {
			char n[32];
			int len = snprintf(n, sizeof n, "%lld\n", f.arg);
			ssize_t w = write(fd, n, (size_t)len);
			(void)w;
			close(fd);
		}
		for (long long waited = 0; waited < f.arg; waited += 10000) {
			struct fault g;
			if (!fault_read_conf(conf, &g) || strcmp(g.mode, "holdrename") ||
			    strcmp(g.path, f.path) || g.arg != f.arg)
				break;
			usleep(10000);
		}
		unlink(held);
	}
}

/* "renameerr N": the errno a rename onto the name fails with; else 0. */
static int rename_err(const char *to, int relative)
{
	struct fault f;
	return fault_find(getenv("SHMKV_FAULT_CONF"), "renameerr", &f) &&
			       rename_target(to, relative, &f)
		       ? (int)f.arg
		       : 0;
}

int rename(const char *from, const char *to)
{
	static rename_fn real;
	if (!real)
		real = (rename_fn)dlsym(RTLD_NEXT, "rename");
	slow_rename(to, 0);
	int e = rename_err(to, 0);
	if (e) {
		errno = e;
		return -1;
	}
	return real(from, to);
}

/* renameat() as rename(): libshmkv-build renames its output into place by
 * the directory's descriptor, to a name without the directory: matched
 * against PATH's last component (the loader's temporaries have names of
 * their own, `.NAME.compact.tmp`). */
int renameat(int fromfd, const char *from, int tofd, const char *to)
{
	static renameat_fn real;
	if (!real)
		real = (renameat_fn)dlsym(RTLD_NEXT, "renameat");
	slow_rename(to, to[0] != '/');
	int e = rename_err(to, to[0] != '/');
	if (e) {
		errno = e;
		return -1;
	}
	return real(fromfd, from, tofd, to);
}

/* renameat2() as renameat(): the loader renames a control segment into
 * place with it (loader/ctl.c), a committed segment too. */
int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned int flags)
{
	static renameat2_fn real;
	if (!real)
		real = (renameat2_fn)dlsym(RTLD_NEXT, "renameat2");
	slow_rename(to, to[0] != '/');
	int e = rename_err(to, to[0] != '/');
	if (e) {
		errno = e;
		return -1;
	}
	return real(fromfd, from, tofd, to, flags);
}

/* "truncerr N": ftruncate() of the file fails with errno N (the durable
 * log cut back: loader/wal.c). */
typedef int (*ftruncate_fn)(int, off64_t);

static int truncate_via(ftruncate_fn *real, const char *sym, int fd, off64_t len)
{
	if (!*real)
		*real = (ftruncate_fn)dlsym(RTLD_NEXT, sym);
	struct fault f;
	if (fault_find(getenv("SHMKV_FAULT_CONF"), "truncerr", &f) && is_target(fd, &f)) {
		errno = (int)f.arg;
		return -1;
	}
	return (*real)(fd, len);
}

int ftruncate64(int fd, off64_t len)
{
	static ftruncate_fn real;
	return truncate_via(&real, "ftruncate64", fd, len);
}

int ftruncate(int fd, off_t len)
{
	static ftruncate_fn real;
	return truncate_via(&real, "ftruncate64", fd, len);
}

/* "syncerr N": fdatasync() of the file fails with errno N, what was
 * written staying written (the durable log's append: loader/wal.c). */
typedef int (*fdatasync_fn)(int);

int fdatasync(int fd)
{
	static fdatasync_fn real;
	if (!real)
		real = (fdatasync_fn)dlsym(RTLD_NEXT, "fdatasync");
	struct fault f;
	if (fault_find(getenv("SHMKV_FAULT_CONF"), "syncerr", &f) && is_target(fd, &f)) {
		errno = (int)f.arg;
		return -1;
	}
	return real(fd);
}

/* "accepterr N": the errno every accept fails with; "acceptflap N": every
 * other one (the loader accepts on one thread); else 0. */
static int accept_fault(void)
{
	static unsigned long calls;
	struct fault f;
	if (!fault_read_conf(getenv("SHMKV_FAULT_CONF"), &f))
		return 0;
	if (!strcmp(f.mode, "accepterr"))
		return (int)f.arg;
	if (!strcmp(f.mode, "acceptflap") && calls++ % 2 == 0)
		return (int)f.arg;
	return 0;
}

typedef int (*accept4_fn)(int, struct sockaddr *, socklen_t *, int);

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	static accept4_fn real;
	if (!real)
		real = (accept4_fn)dlsym(RTLD_NEXT, "accept4");
	int e = accept_fault();
	if (e) {
		errno = e;
		return -1;
	}
	return real(fd, addr, len, flags);
}

int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	return accept4(fd, addr, len, 0);
}

/* "nullerr N": open() of /dev/null (the loader's reserve descriptor,
 * loader/server.c) fails with errno N. Other paths pass straight through,
 * the control file's own open here included. */
typedef int (*open_fn)(const char *, int, ...);

static int open_via(open_fn *real, const char *sym, const char *path, int flags, mode_t mode)
{
	if (!*real)
		*real = (open_fn)dlsym(RTLD_NEXT, sym);
	struct fault f;
	if (!strcmp(path, "/dev/null") && fault_read_conf(getenv("SHMKV_FAULT_CONF"), &f) &&
	    !strcmp(f.mode, "nullerr")) {
		errno = (int)f.arg;
		return -1;
	}
	return (*real)(path, flags, mode);
}

int open(const char *path, int flags, ...)
{
	static open_fn real;
	mode_t mode = 0;
	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return open_via(&real, "open", path, flags, mode);
}

/* on LP64 glibc open64 is open: one body, two names */
int open64(const char *path, int flags, ...) __attribute__((alias("open")));
