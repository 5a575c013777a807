/* ioread.h - read a file into memory with io_uring, verifying as it goes. */
#ifndef LOADER_IOREAD_H
#define LOADER_IOREAD_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "vstream.h"

struct ioread_opts {
	unsigned queue_depth;           /* reads in flight */
	uint64_t block_size;            /* bytes per read; a multiple of 4096 */
	enum io_engine engine;          /* io_uring, pread, or auto (see config.h) */
	atomic_int *cancel;             /* set by another thread: stop (-ECANCELED) */
	atomic_uint_fast64_t *progress; /* bytes of the contiguous prefix read, or NULL */
};

/* Reads [0, size) of fd (opened on path) straight into dst (no bounce
 * buffer) with io_uring, or pread (o->engine), feeding v as the contiguous
 * prefix grows; everything in flight is
 * drained before it returns, on error too. *direct says fd has O_DIRECT; if
 * the filesystem refuses a direct read (EINVAL) the file is reopened
 * buffered, *direct is cleared and the warning logged. Returns 0, -errno,
 * SHMKV_ETRUNCATED (the file ended early) or the vstream error, with why. */
int ioread(int fd, int *direct, const char *path, uint8_t *dst, uint64_t size,
	   const struct ioread_opts *o, struct vstream *v, char *why, size_t why_len);

/* A second descriptor of fd's file without O_DIRECT, opened through
 * /proc/self/fd (the same inode, whatever its name points to now; never a
 * FIFO swapped in, so never a blocking open). Returns the fd or -errno. */
int ioread_reopen_buffered(int fd);

#endif /* LOADER_IOREAD_H */
