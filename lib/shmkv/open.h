/* shmkv/open.h - opening an image file (mapped read-only, checked as
 * FORMAT.md §12 says, optionally verified whole) and closing a handle.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_OPEN_H
#define SHMKV_OPEN_H

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "range.h"
#include "verify.h"

#define SHMKV__HUGE_ALIGN ((size_t)2 << 20)

/* mmap(NULL, len, PROT_READ, MAP_SHARED | extra, fd, 0) at a 2 MiB-aligned
 * address when len is that or more (only an aligned range maps huge pages):
 * reserves len + 2 MiB, maps its aligned part, returns the slack.
 * MAP_FAILED with *err on failure. */
static inline void *shmkv__map_aligned(int fd, size_t len, int extra, int *err)
{
	void *m;
#if defined(MAP_ANONYMOUS) && defined(MAP_NORESERVE)
	if (len >= SHMKV__HUGE_ALIGN && len <= SIZE_MAX - SHMKV__HUGE_ALIGN) {
		uint8_t *r = (uint8_t *)mmap(NULL, len + SHMKV__HUGE_ALIGN, PROT_NONE,
					     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (r != (uint8_t *)MAP_FAILED) {
			uint8_t *a = (uint8_t *)(((uintptr_t)r + SHMKV__HUGE_ALIGN - 1) &
						 ~(uintptr_t)(SHMKV__HUGE_ALIGN - 1));
			m = mmap(a, len, PROT_READ, MAP_SHARED | MAP_FIXED | extra, fd, 0);
			if (m == MAP_FAILED) {
				*err = -errno;
				munmap(r, len + SHMKV__HUGE_ALIGN);
				return MAP_FAILED;
			}
			if (a > r)
				munmap(r, (size_t)(a - r));
			if (r + len + SHMKV__HUGE_ALIGN > a + len)
				munmap(a + len, (size_t)(r + SHMKV__HUGE_ALIGN - a));
			return m;
		}
	}
#endif
	m = mmap(NULL, len, PROT_READ, MAP_SHARED | extra, fd, 0);
	if (m == MAP_FAILED)
		*err = -errno;
	return m;
}

#if defined(MADV_HUGEPAGE)
/* Prefaults a mapping after the MADV_HUGEPAGE advice (MAP_POPULATE at mmap
 * would read a cold image in small folios, where a fault under the advice
 * reads 2 MiB folios on ext4 and others): MADV_POPULATE_READ (Linux 5.14),
 * else a second mapping with MAP_POPULATE. Failures are ignored, as
 * MAP_POPULATE's are. Returns the mapping to use. */
static inline void *shmkv__populate(void *map, int fd, size_t len)
{
	int err;
	if (madvise(map, len, 22 /* MADV_POPULATE_READ, Linux 5.14 */) == 0 || errno != EINVAL)
		return map;
	void *m = shmkv__map_aligned(fd, len, SHMKV__MAP_POPULATE, &err);
	if (m == MAP_FAILED)
		return map; /* keep the unpopulated mapping */
	munmap(map, len);
	madvise(m, len, MADV_HUGEPAGE);
	return m;
}
#endif

/* Opens and maps an image file read-only, checked (FORMAT.md §12); on
 * failure *out is NULL and why says what and where. */
static inline int shmkv_open_file_diag(const char *path, unsigned flags, shmkv **out, char *why,
				       size_t why_len)
{
	int saved_errno = errno, err = 0, fd;
	struct stat st;
	void *map = MAP_FAILED;
	shmkv *db = NULL;
	*out = NULL;
	if (why && why_len)
		why[0] = 0;
	if (flags & ~SHMKV_OPEN_KNOWN_) {
		err = shmkv__fail(-EINVAL, why, why_len, "unknown open flags %x", flags);
		goto done;
	}
	/* O_NONBLOCK: opening a FIFO must not wait for a writer; fstat decides */
	fd = open(path, O_RDONLY | O_NONBLOCK | SHMKV__O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		shmkv__fail(err, why, why_len, "%s: %s", path, shmkv_strerror(err));
		goto done;
	}
	if (fstat(fd, &st) != 0) {
		err = -errno;
		close(fd);
		shmkv__fail(err, why, why_len, "%s: %s", path, shmkv_strerror(err));
		goto done;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		err = shmkv__fail(-EINVAL, why, why_len, "%s: not a regular file (%s)", path,
				  shmkv_file_kind(st.st_mode));
		goto done;
	}
	if ((uint64_t)st.st_size < SHMKV_HEADER_SIZE) {
		/* too short to map as an image: magic first, as shmkv_header_check */
		char head[8];
		ssize_t got = read(fd, head, sizeof head); /* a fresh descriptor: offset 0 */
		close(fd);
		if (got < 0) {
			err = -errno;
			shmkv__fail(err, why, why_len, "%s: %s", path, shmkv_strerror(err));
			goto done;
		}
		err = shmkv__magic_check(head, (uint64_t)got, NULL, 0);
		if (err)
			shmkv__fail(err, why, why_len, "%s: bad magic at offset 0: not a shmkv image",
				    path);
		else
			err = shmkv__fail(SHMKV_ETRUNCATED, why, why_len,
					  "%s: %llu bytes, shorter than the %u-byte header", path,
					  (unsigned long long)st.st_size, SHMKV_HEADER_SIZE);
		goto done;
	}
#if defined(MADV_HUGEPAGE)
	map = shmkv__map_aligned(fd, (size_t)st.st_size, 0, &err); /* populated after the advice */
#else
	map = shmkv__map_aligned(fd, (size_t)st.st_size,
				 (flags & SHMKV_OPEN_POPULATE) ? SHMKV__MAP_POPULATE : 0, &err);
#endif
	if (map == MAP_FAILED) {
		close(fd);
		shmkv__fail(err, why, why_len, "%s: mmap: %s", path, shmkv_strerror(err));
		goto done;
	}
#if defined(MADV_HUGEPAGE)
	/* Fewer TLB misses where the kernel backs file pages with huge pages
	 * (tmpfs, large folios of ext4 and others, or
	 * CONFIG_READ_ONLY_THP_FOR_FS); advice only, errors ignored. Given
	 * before the first fault, so that a cold image is read in huge folios. */
	madvise(map, (size_t)st.st_size, MADV_HUGEPAGE);
	if (flags & SHMKV_OPEN_HUGEPAGES)
		madvise(map, (size_t)st.st_size, 25 /* MADV_COLLAPSE, Linux 6.1 */);
	if (flags & SHMKV_OPEN_POPULATE)
		map = shmkv__populate(map, fd, (size_t)st.st_size);
#endif
	close(fd); /* the mapping keeps the file */
	err = shmkv_image_check(map, (uint64_t)st.st_size, flags, why, why_len);
	if (err) {
		/* name the file, like the other errors */
		shmkv__prefix(err, why, why_len, "%s: ", path);
		goto done;
	}
	db = (shmkv *)calloc(1, sizeof *db);
	if (!db) {
		err = shmkv__fail(-ENOMEM, why, why_len, "out of memory");
		goto done;
	}
	shmkv__bind(db, map, (uint64_t)st.st_size);
	db->map = map;
	db->map_len = (size_t)st.st_size;
	if (flags & SHMKV_OPEN_DEEP) {
		err = shmkv_verify(db, why, why_len);
		if (err)
			goto done;
	}
	*out = db;
	map = MAP_FAILED;
	db = NULL;
done:
	if (err && why && why_len && !why[0])
		shmkv__fail(err, why, why_len, "%s: %s", path, shmkv_strerror(err));
	if (map != MAP_FAILED)
		munmap(map, (size_t)st.st_size);
	free(db);
	errno = saved_errno; /* the library never reports through errno */
	return err;
}

/* shmkv_open_file_diag() without the reason. */
static inline int shmkv_open_file(const char *path, unsigned flags, shmkv **out)
{
	return shmkv_open_file_diag(path, flags, out, NULL, 0);
}

/* Unmaps and frees (NULL is fine); values from db are invalid after. An
 * attached or detached handle gives its share of a range back (range.h):
 * what other handles still read stays mapped. */
static inline void shmkv_close(shmkv *db)
{
	if (!db)
		return;
	int saved_errno = errno;
	SHMKV__USDT(close, 2, db, db->generation);
	if (db->range)
		shmkv__range_drop(db->range, db->range_parts);
	else if (db->map)
		munmap(db->map, db->map_len);
	if (db->ctl) {
		munmap((void *)(uintptr_t)db->ctl, SHMKV_CTL_SIZE);
		close(db->ctl_fd);
	}
	free(db);
	errno = saved_errno;
}

/* The image header (FORMAT.md §3). */
static inline const shmkv_image_header *shmkv_header(const shmkv *db)
{
	return shmkv__hdr(db);
}

#endif /* SHMKV_OPEN_H */
