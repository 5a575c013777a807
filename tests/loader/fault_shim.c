/* fault_shim.c - an LD_PRELOAD library for fault_test: makes pread()/pread64()
 * of one file fail, end early, return short counts or go slowly, a rename()
 * onto one name go slowly, accept()/accept4() fail (EMFILE) and open() of
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

int rename(const char *from, const char *to)
{
	static rename_fn real;
	if (!real)
		real = (rename_fn)dlsym(RTLD_NEXT, "rename");
	struct fault f;
	if (fault_read_conf(getenv("SHMKV_FAULT_CONF"), &f) && !strcmp(f.mode, "slowrename") && !strcmp(to, f.path))
		usleep((useconds_t)f.arg);
	return real(from, to);
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
