/* shmkv/attach.h - attach to a loader-managed cache by name; lock-free refresh.
 * Part of the header-only reader; include <shmkv.h>, not this file.
 * Protocol: lib/PROTOCOL.md. Writer side: loader/ctl.c. */
#ifndef SHMKV_ATTACH_H
#define SHMKV_ATTACH_H

#include <stdio.h>
#include <stdlib.h>

#include "atomic.h"
#include "handle.h"
#include "protocol.h"

#define SHMKV_ATTACH_VERIFY 8u /* verify every image checksum at attach and refresh */

/* Spins on an odd seq before giving up: the loader holds seq odd for a few
 * stores; staying odd this long means it died mid-publish (its restart
 * repairs the segment). */
#define SHMKV__SEQ_SPINS (1u << 24)

/* Copies the whole control segment out: consistent, or retried (the Linux
 * vDSO seqcount pattern). Returns 0, or -EAGAIN if seq stays odd. */
static inline int shmkv_ctl_read(const shmkv_ctl *ctl, shmkv_ctl *out)
{
	for (uint32_t spins = 0; spins < SHMKV__SEQ_SPINS; spins++) {
		/* pairs with the final shmkv__store_release(&ctl->seq) in loader/ctl.c:ctl_publish() */
		uint64_t s1 = shmkv__load_acquire(&ctl->seq);
		if (!(s1 & 1)) {
			memcpy(out, (const void *)ctl, sizeof *out);
			/* pairs with the shmkv__fence_release() after seq turns odd in ctl_publish() */
			shmkv__fence_acquire();
			if (shmkv__load_relaxed(&ctl->seq) == s1) {
				for (uint32_t i = 0; i < SHMKV_CTL_MAX_SEGMENTS; i++)
					out->segments[i].path[SHMKV_CTL_PATH_MAX - 1] = 0;
				return 0;
			}
		}
		shmkv__cpu_relax();
	}
	return -EAGAIN;
}

/* The current generation, its segment count and first segment, consistently. */
static inline int shmkv__ctl_snapshot(const shmkv_ctl *ctl, uint64_t *gen, uint32_t *count,
				      shmkv_ctl_segment *seg)
{
	shmkv_ctl copy;
	int err = shmkv_ctl_read(ctl, &copy);
	if (err)
		return err;
	*gen = copy.generation;
	*count = copy.segment_count;
	*seg = copy.segments[0];
	return 0;
}

/* Maps a segment read-only and checks its image header (and checksums when asked). */
static inline int shmkv__map_segment(const shmkv_ctl_segment *seg, unsigned flags, void **map,
				     char *why, size_t why_len)
{
	int fd = open(seg->path, O_RDONLY | SHMKV__O_CLOEXEC);
	if (fd < 0) {
		int err = -errno;
		return shmkv__fail(err, why, why_len, "%s: %s", seg->path, shmkv_strerror(err));
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < seg->size || seg->map_size < seg->size) {
		close(fd);
		return shmkv__fail(SHMKV_ETRUNCATED, why, why_len,
				   "%s: segment smaller than the %llu-byte image", seg->path,
				   (unsigned long long)seg->size);
	}
	void *m = mmap(NULL, (size_t)seg->map_size, PROT_READ, MAP_SHARED, fd, 0);
	int err = m == MAP_FAILED ? -errno : 0;
	close(fd);
	if (err)
		return shmkv__fail(err, why, why_len, "%s: mmap: %s", seg->path, shmkv_strerror(err));
	err = shmkv_image_check(m, seg->size, (flags & SHMKV_ATTACH_VERIFY) ? 0 : SHMKV_OPEN_NOVERIFY,
				why, why_len);
	if (err) {
		munmap(m, (size_t)seg->map_size);
		return err;
	}
	*map = m;
	return 0;
}

/* Maps the current generation, retrying when it moves underneath (the loader
 * unlinks a segment only after publishing its successor). */
static inline int shmkv__attach_current(const shmkv_ctl *ctl, unsigned flags, uint64_t *gen,
					shmkv_ctl_segment *seg, void **map, char *why,
					size_t why_len)
{
	int err = -EAGAIN;
	for (int tries = 0; tries < 100; tries++) {
		uint32_t count = 0;
		err = shmkv__ctl_snapshot(ctl, gen, &count, seg);
		if (err)
			return shmkv__fail(err, why, why_len,
					   "control segment stays mid-update (loader died while "
					   "publishing?); try again");
		/* generation 0, or a generation without segments (the loader found
		 * its images gone at restart): nothing to map */
		if (*gen == 0)
			return shmkv__fail(-EAGAIN, why, why_len, "no generation published yet");
		if (count == 0 || !seg->path[0])
			return shmkv__fail(-EAGAIN, why, why_len,
					   "nothing published (generation %llu has no segment)",
					   (unsigned long long)*gen);
		err = shmkv__map_segment(seg, flags, map, why, why_len);
		if (err != -ENOENT)
			return err;
		if (shmkv__load_acquire(&ctl->generation) == *gen)
			return err; /* gone without a successor: not a race */
	}
	return err;
}

static inline int shmkv__valid_name(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > SHMKV_CACHE_NAME_MAX || name[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return 0;
	}
	return 1;
}

/* Attaches read-only to cache name under root (NULL: $SHMKV_ROOT, else
 * SHMKV_DEFAULT_ROOT). Returns 0; -ENOENT (no such cache); SHMKV_EPROTO
 * (not a control segment, or another protocol version or layout); -EAGAIN
 * (nothing published yet, or the segment stays mid-update); -EINVAL (bad
 * name or flags); other -errno; image errors as shmkv_open_file(). */
static inline int shmkv_attach_diag(const char *root, const char *name, unsigned flags,
				    shmkv **out, char *why, size_t why_len)
{
	int saved_errno = errno, err = 0, fd = -1;
	void *ctl_map = MAP_FAILED, *map = NULL;
	shmkv_ctl_segment seg;
	uint64_t gen = 0;
	char path[512];
	shmkv *db = NULL;
	const shmkv_ctl *ctl;
	struct stat st;
	*out = NULL;
	if (why && why_len)
		why[0] = 0;
	if (!root)
		root = getenv("SHMKV_ROOT");
	if (!root || !*root)
		root = SHMKV_DEFAULT_ROOT;
	if (flags & ~(SHMKV_ATTACH_VERIFY | SHMKV_OPEN_DEEP)) {
		err = shmkv__fail(-EINVAL, why, why_len, "unknown attach flags %x", flags);
		goto done;
	}
	if (!shmkv__valid_name(name)) {
		err = shmkv__fail(-EINVAL, why, why_len,
				  "invalid cache name \"%s\" (1-63 of A-Z a-z 0-9 _ - ., not "
				  "starting with .)", name);
		goto done;
	}
	if ((size_t)snprintf(path, sizeof path, "%s/%s.ctl", root, name) >= sizeof path) {
		err = shmkv__fail(-ENAMETOOLONG, why, why_len, "root path too long");
		goto done;
	}
	fd = open(path, O_RDONLY | SHMKV__O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		if (err == -ENOENT)
			shmkv__fail(err, why, why_len,
				    "no cache \"%s\" under %s (no %s.ctl; is shmkv-loader running with "
				    "this root? set SHMKV_ROOT)", name, root, name);
		else
			shmkv__fail(err, why, why_len, "%s: %s", path, shmkv_strerror(err));
		goto done;
	}
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < SHMKV_CTL_SIZE) {
		err = shmkv__fail(SHMKV_EPROTO, why, why_len, "%s: not a shmkv control segment (size)",
				  path);
		goto done;
	}
	ctl_map = mmap(NULL, SHMKV_CTL_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	if (ctl_map == MAP_FAILED) {
		err = -errno;
		shmkv__fail(err, why, why_len, "%s: mmap: %s", path, shmkv_strerror(err));
		goto done;
	}
	ctl = (const shmkv_ctl *)ctl_map;
	if (memcmp(ctl->magic, SHMKV_CTL_MAGIC, 8) != 0) {
		err = shmkv__fail(SHMKV_EPROTO, why, why_len, "%s: not a shmkv control segment (magic)",
				  path);
		goto done;
	}
	if (ctl->protocol_version != SHMKV_PROTOCOL_VERSION || ctl->layout_hash != SHMKV_CTL_LAYOUT_HASH) {
		err = shmkv__fail(SHMKV_EPROTO, why, why_len,
				  "%s: protocol version %u layout %016llx, this reader speaks version %u "
				  "layout %016llx", path, ctl->protocol_version,
				  (unsigned long long)ctl->layout_hash, SHMKV_PROTOCOL_VERSION,
				  (unsigned long long)SHMKV_CTL_LAYOUT_HASH);
		goto done;
	}
	err = shmkv__attach_current(ctl, flags, &gen, &seg, &map, why, why_len);
	if (err) {
		if (why && why_len) {
			char tmp[256];
			snprintf(tmp, sizeof tmp, "%s", why);
			shmkv__fail(err, why, why_len, "cache \"%s\": %s", name, tmp);
		}
		goto done;
	}
	db = (shmkv *)calloc(1, sizeof *db);
	if (!db) {
		munmap(map, (size_t)seg.map_size);
		err = shmkv__fail(-ENOMEM, why, why_len, "out of memory");
		goto done;
	}
	shmkv__bind(db, map, seg.size);
	db->map = map;
	db->map_len = (size_t)seg.map_size;
	db->ctl = ctl;
	db->generation = gen;
	db->flags = flags;
	if (flags & SHMKV_OPEN_DEEP) {
		err = shmkv_verify(db, why, why_len);
		if (err) {
			shmkv_close(db);
			db = NULL;
			ctl_map = MAP_FAILED; /* shmkv_close unmapped it */
			goto done;
		}
	}
	*out = db;
	ctl_map = MAP_FAILED;
done:
	if (fd >= 0)
		close(fd);
	if (ctl_map != MAP_FAILED)
		munmap(ctl_map, SHMKV_CTL_SIZE);
	errno = saved_errno;
	return err;
}

/* shmkv_attach_diag() with the root from $SHMKV_ROOT (or the default). */
static inline int shmkv_attach(const char *name, unsigned flags, shmkv **out)
{
	return shmkv_attach_diag(NULL, name, flags, out, NULL, 0);
}

/* Moves an attached handle to the current generation: one atomic load when
 * nothing changed; otherwise maps the new image, then unmaps the old one.
 * Returns 0 (unchanged, or a file handle), 1 (moved), or an error, in which
 * case the handle keeps serving its old generation. Values obtained before a
 * refresh that returned 1 are invalid afterwards. Not thread-safe on one
 * handle: refresh from the thread that owns it. */
static inline int shmkv_refresh(shmkv *db)
{
	if (!db->ctl)
		return 0;
	/* pairs with shmkv__store_release(&ctl->generation) in loader/ctl.c:ctl_publish() */
	if (shmkv__load_acquire(&db->ctl->generation) == db->generation)
		return 0;
	int saved_errno = errno;
	shmkv_ctl_segment seg;
	uint64_t gen = 0;
	void *map = NULL;
	int err = shmkv__attach_current(db->ctl, db->flags, &gen, &seg, &map, NULL, 0);
	if (!err) {
		munmap(db->map, db->map_len);
		shmkv__bind(db, map, seg.size);
		db->map = map;
		db->map_len = (size_t)seg.map_size;
		db->generation = gen;
		err = 1;
	}
	errno = saved_errno;
	return err;
}

/* Generation this handle serves (0 for file handles). */
static inline uint64_t shmkv_generation(const shmkv *db)
{
	return db->generation;
}

#endif /* SHMKV_ATTACH_H */
