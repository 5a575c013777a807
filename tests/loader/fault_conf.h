/* fault_conf.h - the fault a test asks for, read from its control file; one
 * owner for fault_shim.c (pread, preloaded) and faultfs.c (a FUSE file, so
 * io_uring reads fail in the kernel as a real device's would).
 *
 * $SHMKV_FAULT_CONF (or the path given) names the control file; one line
 * "MODE ARG PATH" (faultfs ignores PATH: it serves one file):
 *   eio N    a read reaching byte N fails with EIO
 *   efault N a read reaching byte N fails with EFAULT (as a fault in the
 *            destination would: loader/place.c:place_read_fault())
 *   eof N    the file seems to end at byte N (reads there return 0)
 *   short N  every read returns at most N bytes
 *   slow N   every read first sleeps N microseconds
 *   slowrename N  (fault_shim.c only) a rename() onto PATH first sleeps
 *            N microseconds; a renameat() or renameat2() too (onto PATH's
 *            last component when it names no directory: the builder's
 *            output put in place, a control segment renamed into place)
 *   holdrename N  (fault_shim.c only) such a rename waits while the control
 *            file says "holdrename" onto the same PATH with the same N (at
 *            most N microseconds), with the file CONF.held there meanwhile
 *            (holding N)
 *   accepterr N   (fault_shim.c only) every accept()/accept4() fails with
 *            errno N (EMFILE 24, ENFILE 23: out of descriptors, and giving
 *            one up does not help, as when the whole system is out); PATH
 *            is not used ("-")
 *   acceptflap N  (fault_shim.c only) every other accept()/accept4() fails
 *            with errno N, the next succeeds: descriptors freed between the
 *            loader's two tries (the one that fails and the reserve's)
 *   nullerr N     (fault_shim.c only) open() of /dev/null (the loader's
 *            reserve descriptor) fails with errno N
 *   renameerr N   (fault_shim.c only) a rename onto PATH (matched as
 *            slowrename's) fails with errno N, renaming nothing
 *   truncerr N    (fault_shim.c only) ftruncate() of the file at PATH (by
 *            device and inode) fails with errno N
 *   syncerr N     (fault_shim.c only) fdatasync() of the file at PATH fails
 *            with errno N (what it wrote stays written)
 * renameerr, truncerr and syncerr are found on any line (fault_find()), so both can
 * be asked at once; every other mode on the first line only.
 * The file is read again on every read, so a test changes the fault while
 * the loader runs; no file, no fault. */
#ifndef SHMKV_TEST_FAULT_CONF_H
#define SHMKV_TEST_FAULT_CONF_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct fault {
	char mode[16];
	long long arg;
	char path[4096];
};

/* 1 and *f filled when conf holds a fault, else 0. */
static inline int fault_read_conf(const char *conf, struct fault *f)
{
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

/* 1 and *f filled when a line of conf asks for mode, else 0. */
static inline int fault_find(const char *conf, const char *mode, struct fault *f)
{
	if (!conf)
		return 0;
	int fd = open(conf, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	char buf[8400];
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	for (char *line = buf, *next; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (sscanf(line, "%15s %lld %4095s", f->mode, &f->arg, f->path) == 3 &&
		    !strcmp(f->mode, mode))
			return 1;
	}
	return 0;
}

/* What a read of n bytes at off does under f: -EIO or -EFAULT, or how many bytes it
 * may return (n or fewer; 0 past a faked end of file). "slow" sleeps here. */
static inline long long fault_read_len(const struct fault *f, long long off, size_t n)
{
	if (!strcmp(f->mode, "eio") && off + (long long)n > f->arg)
		return -EIO;
	if (!strcmp(f->mode, "efault") && off + (long long)n > f->arg)
		return -EFAULT;
	if (!strcmp(f->mode, "eof")) {
		if (off >= f->arg)
			return 0;
		if (off + (long long)n > f->arg)
			n = (size_t)(f->arg - off);
	}
	if (!strcmp(f->mode, "short") && n > (size_t)f->arg)
		n = (size_t)f->arg;
	if (!strcmp(f->mode, "slow"))
		usleep((useconds_t)f->arg);
	return (long long)n;
}

#endif /* SHMKV_TEST_FAULT_CONF_H */
