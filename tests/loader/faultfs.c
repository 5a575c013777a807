/* faultfs.c - a FUSE filesystem for fault_test that serves one file, IMAGE,
 * a read-only view of BACKING, whose reads fail, end early or come back
 * short as the control file CONF says (fault_conf.h: eio, eof, short,
 * slow). The faults happen in the kernel's read path, so they reach the
 * loader's io_uring reads as a failing device's would; fault_shim.c cannot
 * (io_uring does not call libc's pread).
 *
 *   faultfs CONF BACKING MOUNTPOINT   (root; runs in the foreground until
 *                                      MOUNTPOINT is unmounted or SIGTERM)
 *
 * Every open is direct_io: no page cache between the loader and the faults,
 * so a short reply reaches the reader as a short read, and a fault set after
 * an earlier read still applies. */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fault_conf.h"

static const char *conf_path;
static int backing_fd = -1;

static int ffs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof *st);
	if (!strcmp(path, "/")) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	if (strcmp(path, "/image"))
		return -ENOENT;
	struct stat b;
	if (fstat(backing_fd, &b) != 0)
		return -errno;
	st->st_mode = S_IFREG | 0644;
	st->st_nlink = 1;
	st->st_size = b.st_size;
	st->st_mtim = b.st_mtim; /* the loader's changed-while-read check reads these */
	st->st_ctim = b.st_ctim;
	st->st_blksize = 4096;
	st->st_blocks = (b.st_size + 511) / 512;
	return 0;
}

static int ffs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		       struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	(void)off, (void)fi, (void)flags;
	if (strcmp(path, "/"))
		return -ENOENT;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, "image", NULL, 0, 0);
	return 0;
}

static int ffs_open(const char *path, struct fuse_file_info *fi)
{
	if (strcmp(path, "/image"))
		return -ENOENT;
	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		return -EROFS;
	fi->direct_io = 1;
	return 0;
}

static int ffs_read(const char *path, char *buf, size_t n, off_t off, struct fuse_file_info *fi)
{
	(void)path, (void)fi;
	struct fault f;
	if (fault_read_conf(conf_path, &f)) {
		long long m = fault_read_len(&f, (long long)off, n);
		if (m <= 0)
			return (int)m; /* -EIO, or 0: the faked end of the file */
		n = (size_t)m;
	}
	size_t got = 0;
	while (got < n) { /* FUSE takes a short reply as the end of the file */
		ssize_t r = pread(backing_fd, buf + got, n - got, off + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (int)got;
}

static const struct fuse_operations ops = {
	.getattr = ffs_getattr,
	.readdir = ffs_readdir,
	.open = ffs_open,
	.read = ffs_read,
};

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s CONF BACKING MOUNTPOINT\n", argv[0]);
		return 2;
	}
	conf_path = argv[1];
	backing_fd = open(argv[2], O_RDONLY | O_CLOEXEC);
	if (backing_fd < 0) {
		fprintf(stderr, "faultfs: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	/* -f: foreground (the test owns this process); -s: one thread, so
	 * faults apply in the order the kernel sends the reads */
	char *fargv[] = {argv[0], "-f", "-s", "-o", "fsname=shmkv-faultfs,ro", argv[3], NULL};
	return fuse_main(6, fargv, &ops, NULL);
}
