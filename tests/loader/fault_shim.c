/* fault_shim.c - an LD_PRELOAD library for fault_test: makes pread()/pread64()
 * of one file fail, end early, return short counts or go slowly, as told by a
 * control file the test rewrites while the loader runs.
 *
 * $SHMKV_FAULT_CONF names the control file; one line "MODE ARG PATH":
 *   eio N    a read reaching byte N fails with EIO
 *   eof N    the file seems to end at byte N (reads there return 0)
 *   short N  every read returns at most N bytes
 *   slow N   every read first sleeps N microseconds
 *   slowrename N  a rename() onto PATH first sleeps N microseconds (holds
 *                 the loader between a publish and its spool clean-up)
 * Reads of other files (by device and inode), or with no control file, pass
 * through untouched. Only the pread engine (`--io pread`) goes through here:
 * io_uring reads bypass libc. */
#undef _FILE_OFFSET_BITS /* pread and pread64 both defined here, each as itself */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

typedef ssize_t (*pread_fn)(int, void *, size_t, off64_t);
typedef int (*rename_fn)(const char *, const char *);

struct fault {
	char mode[16];
	long long arg;
	char path[4096];
};

static int read_conf(struct fault *f)
{
	const char *conf = getenv("SHMKV_FAULT_CONF");
	if (!conf)
		return 0;
	int fd = open(conf, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[4200];
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return sscanf(buf, "%15s %lld %4095s", f->mode, &f->arg, f->path) == 3;
}

static int is_target(int fd, const struct fault *f)
{
	struct stat a, b;
	return fstat(fd, &a) == 0 && stat(f->path, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

static ssize_t faulty(pread_fn real, int fd, void *buf, size_t n, off64_t off)
{
	struct fault f;
	if (!read_conf(&f) || !is_target(fd, &f))
		return real(fd, buf, n, off);
	if (!strcmp(f.mode, "eio") && off + (off64_t)n > (off64_t)f.arg) {
		errno = EIO;
		return -1;
	}
	if (!strcmp(f.mode, "eof")) {
		if (off >= (off64_t)f.arg)
			return 0;
		if (off + (off64_t)n > (off64_t)f.arg)
			n = (size_t)(f.arg - off);
	}
	if (!strcmp(f.mode, "short") && n > (size_t)f.arg)
		n = (size_t)f.arg;
	if (!strcmp(f.mode, "slow"))
		usleep((useconds_t)f.arg);
	return real(fd, buf, n, off);
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
	if (read_conf(&f) && !strcmp(f.mode, "slowrename") && !strcmp(to, f.path))
		usleep((useconds_t)f.arg);
	return real(from, to);
}
