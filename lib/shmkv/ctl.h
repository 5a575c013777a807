/* shmkv/ctl.h - the control segment ROOT/NAME.ctl: cache names, opening,
 * the consistent read (readers) and the publish (the loader). Both sides of
 * the seqcount live here, so each atomic and the one it pairs with are in one
 * file. Protocol: lib/PROTOCOL.md; layout: protocol.h.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_CTL_H
#define SHMKV_CTL_H

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic.h"
#include "errors.h"
#include "handle.h"
#include "protocol.h"

/* Strict -std=c11 hides these; values are the kernel ABI of x86-64 and
 * AArch64 (O_NOFOLLOW differs between them). */
#ifdef O_NOFOLLOW
#define SHMKV__O_NOFOLLOW O_NOFOLLOW
#elif defined(__aarch64__)
#define SHMKV__O_NOFOLLOW 0100000
#else
#define SHMKV__O_NOFOLLOW 0400000
#endif
#ifdef O_NONBLOCK
#define SHMKV__O_NONBLOCK O_NONBLOCK
#else
#define SHMKV__O_NONBLOCK 04000
#endif

/* SHMKV_TRACE(event): a test hook (tests/refresh_test.cc) counting the slow
 * path's work: ctl_retry (a seqcount retry), segment_open (attach or
 * refresh opening a segment). Nothing by default. */
#ifndef SHMKV_TRACE
#define SHMKV_TRACE(event) ((void)0)
#endif

/* ------------------------------------------------------------------------ */
/* Cache names */

/* The rule, for messages. */
#define SHMKV_CACHE_NAME_RULE "1-63 bytes of A-Z a-z 0-9 _ - ., not starting with ."

/* Checks a cache name (SHMKV_CACHE_NAME_RULE): names become file names, so
 * the rule lives here only. A leading '.' is the loader's temporary files'. */
static inline int shmkv_name_check(const char *name)
{
	if (!name)
		return -EINVAL;
	size_t n = strlen(name);
	if (n == 0 || n > SHMKV_CACHE_NAME_MAX || name[0] == '.')
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return -EINVAL;
	}
	return 0;
}

/* root when not empty, else $SHMKV_ROOT when not empty, else /run/shmkv. */
static inline const char *shmkv_ctl_root(const char *root)
{
	if (root && *root)
		return root;
	root = getenv("SHMKV_ROOT");
	return root && *root ? root : SHMKV_DEFAULT_ROOT;
}

/* ROOT/NAME.ctl into buf[len] (root as shmkv_ctl_root() resolves it). */
static inline int shmkv_ctl_path(const char *root, const char *name, char *buf, size_t len)
{
	if (shmkv_name_check(name))
		return -EINVAL;
	root = shmkv_ctl_root(root);
	size_t r = strlen(root), n = strlen(name);
	if (r + 1 + n + 4 + 1 > len)
		return -ENAMETOOLONG;
	memcpy(buf, root, r);
	buf[r] = '/';
	memcpy(buf + r + 1, name, n);
	memcpy(buf + r + 1 + n, ".ctl", 5);
	return 0;
}

/* A fresh control segment, nothing published (the loader writes it to a new
 * file before anyone can map it). */
static inline void shmkv_ctl_init(shmkv_ctl *ctl)
{
	memset(ctl, 0, sizeof *ctl);
	memcpy(ctl->magic, SHMKV_CTL_MAGIC, 8);
	ctl->protocol_version = SHMKV_PROTOCOL_VERSION;
	ctl->ctl_size = SHMKV_CTL_SIZE;
	ctl->layout_hash = SHMKV_CTL_LAYOUT_HASH;
}

/* The layout hash of a protocol version this library speaks, else 0
 * (internal: shmkv_ctl_open checks it; the loader makes files with it). */
static inline uint64_t shmkv__ctl_layout_hash_of(uint32_t version)
{
	return version == SHMKV_PROTOCOL_VERSION     ? SHMKV_CTL_LAYOUT_HASH
	       : version == SHMKV_PROTOCOL_VERSION_2 ? SHMKV_CTL_LAYOUT_HASH_V2
						     : 0;
}

/* ------------------------------------------------------------------------ */
/* Opening */

/* shmkv_ctl_open() flags */
#define SHMKV_CTL_RDWR 1u /* the loader: map read-write, to publish (shmkv_ctl_publish) */
#define SHMKV_CTL_KNOWN_ (SHMKV_CTL_RDWR)

/* Maps ROOT/NAME.ctl and checks it is a control segment this library speaks:
 * a regular file (O_NOFOLLOW|O_NONBLOCK, then fstat: never a symlink, never
 * blocks on a FIFO) of SHMKV_CTL_SIZE bytes or more, not writable by group
 * or others, with this magic, size, and protocol version 1 or 2 with its
 * layout hash.
 * Read-only unless SHMKV_CTL_RDWR (the loader adopting its own segment: the
 * file must be ours alone). *out is valid until shmkv_ctl_close(*out). */
static inline int shmkv_ctl_open_fd(const char *root, const char *name, unsigned flags,
				     shmkv_ctl **out, int *fd_out, char *why, size_t why_len);

static inline int shmkv_ctl_open(const char *root, const char *name, unsigned flags,
				 shmkv_ctl **out, char *why, size_t why_len)
{
	return shmkv_ctl_open_fd(root, name, flags, out, NULL, why, why_len);
}

/* shmkv_ctl_open() leaving the file open in *fd_out (when not NULL): readers
 * fstat it at each refresh, before the mapping is touched. */
static inline int shmkv_ctl_open_fd(const char *root, const char *name, unsigned flags,
				     shmkv_ctl **out, int *fd_out, char *why, size_t why_len)
{
	char path[4096 + 80];
	void *map = MAP_FAILED;
	struct stat st;
	int fd, err, rw = (flags & SHMKV_CTL_RDWR) != 0;
	*out = NULL;
	if (flags & ~SHMKV_CTL_KNOWN_)
		return shmkv__fail(-EINVAL, why, why_len, "unknown control segment flags %x", flags);
	root = shmkv_ctl_root(root);
	err = shmkv_ctl_path(root, name, path, sizeof path);
	if (err == -EINVAL)
		return shmkv__fail(err, why, why_len, "invalid cache name \"%s\" (%s)",
				   name ? name : "(null)", SHMKV_CACHE_NAME_RULE);
	if (err)
		return shmkv__fail(err, why, why_len, "%s: root path too long", root);
	fd = open(path, (rw ? O_RDWR : O_RDONLY) | SHMKV__O_CLOEXEC | SHMKV__O_NOFOLLOW |
				SHMKV__O_NONBLOCK);
	if (fd < 0) {
		err = -errno;
		if (err == -ENOENT)
			return shmkv__fail(err, why, why_len,
					   "no cache \"%s\" under %s (no %s.ctl; is shmkv-loader "
					   "running with this root? set SHMKV_ROOT)", name, root, name);
		if (err == -ELOOP)
			return shmkv__fail(err, why, why_len, "%s: is a symbolic link, not a control "
					   "segment", path);
		return shmkv__fail(err, why, why_len, "%s: %s", path, shmkv_strerror(err));
	}
	if (fstat(fd, &st) != 0) {
		err = -errno;
		shmkv__fail(err, why, why_len, "%s: fstat: %s", path, shmkv_strerror(err));
		goto done;
	}
	if (!S_ISREG(st.st_mode)) {
		err = shmkv__fail(SHMKV_EPROTO, why, why_len,
				  "%s: not a shmkv control segment (not a regular file)", path);
		goto done;
	}
	if ((uint64_t)st.st_size < SHMKV_CTL_SIZE) {
		err = shmkv__fail(SHMKV_EPROTO, why, why_len,
				  "%s: not a shmkv control segment (size %llu, below %u bytes)", path,
				  (unsigned long long)st.st_size, SHMKV_CTL_SIZE);
		goto done;
	}
	if (st.st_mode & 022) {
		err = shmkv__fail(SHMKV_EPROTO, why, why_len,
				  "%s: mode %04o is writable by group or others: not a control "
				  "segment to trust", path, (unsigned)(st.st_mode & 07777));
		goto done;
	}
	if (rw && st.st_uid != geteuid()) {
		err = shmkv__fail(SHMKV_EPROTO, why, why_len,
				  "%s: owned by uid %u mode %04o; refusing to adopt a control segment "
				  "that is not ours alone to write", path, (unsigned)st.st_uid,
				  (unsigned)(st.st_mode & 07777));
		goto done;
	}
	map = mmap(NULL, SHMKV_CTL_SIZE, rw ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		err = -errno;
		shmkv__fail(err, why, why_len, "%s: mmap: %s", path, shmkv_strerror(err));
		goto done;
	}
	{
		/* written once before the file got its name (loader/ctl.c:ctl_create
		 * renames it into place), never after: plain reads */
		const shmkv_ctl *c = (const shmkv_ctl *)map;
		if (memcmp(c->magic, SHMKV_CTL_MAGIC, 8) != 0) {
			err = shmkv__fail(SHMKV_EPROTO, why, why_len,
					  "%s: not a shmkv control segment (magic)", path);
		} else if (!shmkv__ctl_layout_hash_of(c->protocol_version) ||
			   c->ctl_size != SHMKV_CTL_SIZE ||
			   c->layout_hash != shmkv__ctl_layout_hash_of(c->protocol_version)) {
			err = shmkv__fail(SHMKV_EPROTO, why, why_len,
					  "%s: protocol version %u size %u layout %016llx, this "
					  "library speaks versions %u (layout %016llx) and %u (layout "
					  "%016llx), size %u", path,
					  c->protocol_version, c->ctl_size,
					  (unsigned long long)c->layout_hash, SHMKV_PROTOCOL_VERSION,
					  (unsigned long long)SHMKV_CTL_LAYOUT_HASH,
					  SHMKV_PROTOCOL_VERSION_2,
					  (unsigned long long)SHMKV_CTL_LAYOUT_HASH_V2, SHMKV_CTL_SIZE);
		}
	}
	if (!err)
		*out = (shmkv_ctl *)map;
	else
		munmap(map, SHMKV_CTL_SIZE);
done:
	if (!err && fd_out)
		*fd_out = fd;
	else
		close(fd);
	return err;
}

/* Unmaps a control segment; NULL is ignored. */
static inline void shmkv_ctl_close(const shmkv_ctl *ctl)
{
	if (ctl)
		munmap((void *)(uintptr_t)ctl, SHMKV_CTL_SIZE);
}

/* ------------------------------------------------------------------------ */
/* The seqcount (the Linux vDSO pattern): the loader writes inside a section
 * that makes seq odd; readers copy everything out and keep the copy only if
 * seq was even and unchanged around it. Both sides move 64-bit words with
 * atomics, so a reader racing the writer is a retry, never a C11 data race
 * (tests/ctl_race_test runs it under ThreadSanitizer). The words are stored
 * with release and loaded with acquire rather than relaxed between two
 * fences: the same guarantee (Boehm, "Can seqlocks get along with
 * programming language memory models?"), the same instructions on x86-64,
 * and ThreadSanitizer models it, where it ignores standalone fences (GCC
 * refuses to compile them under -fsanitize=thread). */

#define SHMKV__CTL_WORDS (sizeof(shmkv_ctl) / 8)
#define SHMKV__CTL_WORD(field) (offsetof(shmkv_ctl, field) / 8)

/* Passes before shmkv_ctl_read() gives up: the loader holds seq odd for a
 * few hundred stores; much longer means it died mid-publish (its restart
 * repairs the segment). The first SHMKV__SEQ_PAUSES pause, the rest yield. */
#define SHMKV__SEQ_SPINS (1u << 16)
#define SHMKV__SEQ_PAUSES 256u

/* The current generation (0: none yet): one acquire load. */
static inline uint64_t shmkv_ctl_generation(const shmkv_ctl *ctl)
{
	/* pairs with shmkv__store_release(&ctl->generation) in
	 * lib/shmkv/ctl.h:shmkv_ctl_publish(): a reader that sees the new
	 * generation sees the section's stores too (it still copies them out
	 * with shmkv_ctl_read) */
	return shmkv__load_acquire(&ctl->generation);
}

/* 1 while a publish is under way or was left open by a loader that died. */
static inline int shmkv_ctl_mid_update(const shmkv_ctl *ctl)
{
	/* pairs with shmkv__store_release(&ctl->seq, s + 2) in
	 * lib/shmkv/ctl.h:shmkv_ctl_publish() */
	return (int)(shmkv__load_acquire(&ctl->seq) & 1);
}

/* shmkv_ctl_read() giving up after max_passes passes of its loop. */
static inline int shmkv__ctl_read_n(const shmkv_ctl *ctl, shmkv_ctl *out, uint32_t max_passes)
{
	const uint64_t *w = (const uint64_t *)(const void *)ctl;
	unsigned char *o = (unsigned char *)out;
	for (uint32_t pass = 0; pass < max_passes; pass++) {
		if (pass) {
			SHMKV_TRACE(ctl_retry);
			/* spin briefly, then let a descheduled writer run: on a
			 * busy host it may have been preempted inside its section */
			if (pass < SHMKV__SEQ_PAUSES)
				shmkv__cpu_relax();
			else
				sched_yield();
		}
		/* pairs with the final shmkv__store_release(&ctl->seq, s + 2) in
		 * lib/shmkv/ctl.h:shmkv_ctl_publish() */
		uint64_t s1 = shmkv__load_acquire(&ctl->seq);
		if (s1 & 1)
			continue;
		for (size_t i = 0; i < SHMKV__CTL_WORDS; i++) {
			/* acquire; pairs with the store_release of each word in
			 * lib/shmkv/ctl.h:shmkv_ctl_publish(): a word that comes
			 * from a section brings that section's odd seq with it,
			 * so the re-read below sees it (or a later seq) */
			uint64_t v = shmkv__load_acquire(w + i);
			memcpy(o + 8 * i, &v, 8);
		}
		/* relaxed: ordered after the loads above by their acquire */
		if (shmkv__load_relaxed(&ctl->seq) != s1)
			continue;
		for (uint32_t i = 0; i < SHMKV_CTL_MAX_SEGMENTS; i++)
			out->segments[i].path[SHMKV_CTL_PATH_MAX - 1] = 0;
		return out->segment_count > SHMKV_CTL_MAX_SEGMENTS ? SHMKV_EPROTO : 0;
	}
	return -EAGAIN;
}

/* Copies the control segment into *out, all fields from one publish; paths
 * NUL-terminated. -EAGAIN: seq stayed odd; SHMKV_EPROTO: impossible
 * contents. No system call. */
static inline int shmkv_ctl_read(const shmkv_ctl *ctl, shmkv_ctl *out)
{
	return shmkv__ctl_read_n(ctl, out, SHMKV__SEQ_SPINS);
}

/* The seqcount (shmkv_refresh remembers failures by it). */
static inline uint64_t shmkv__ctl_seq(const shmkv_ctl *ctl)
{
	/* pairs with shmkv__store_release(&ctl->seq, s + 2) in
	 * lib/shmkv/ctl.h:shmkv_ctl_publish() */
	return shmkv__load_acquire(&ctl->seq);
}

/* For the loader, the only writer: publishes generation with segs[0..n) in
 * one seqcount write section (closing one a crashed loader left open);
 * readers see the previous publish or this one, whole. */
static inline int shmkv__ctl_publish_flags(shmkv_ctl *ctl, uint64_t generation,
					   const shmkv_ctl_segment *segs, uint32_t n,
					   uint32_t flags, uint64_t loader_pid,
					   int64_t published_ns);
static inline int shmkv_ctl_publish(shmkv_ctl *ctl, uint64_t generation,
				    const shmkv_ctl_segment *segs, uint32_t n, uint64_t loader_pid,
				    int64_t published_ns)
{
	return shmkv__ctl_publish_flags(ctl, generation, segs, n, 0, loader_pid, published_ns);
}

/* For the loader: publishes no segment with SHMKV_CTL_RETIRED (before a drop
 * or a replacement of the file): readers' next refresh says they are stale. */
static inline int shmkv_ctl_retire(shmkv_ctl *ctl, uint64_t generation, uint64_t loader_pid,
				   int64_t published_ns)
{
	return shmkv__ctl_publish_flags(ctl, generation, NULL, 0, SHMKV_CTL_RETIRED, loader_pid,
					published_ns);
}

/* The write section of both: shmkv_ctl_publish() with flags (SHMKV_CTL_*). */
static inline int shmkv__ctl_publish_flags(shmkv_ctl *ctl, uint64_t generation,
					   const shmkv_ctl_segment *segs, uint32_t n,
					   uint32_t flags, uint64_t loader_pid,
					   int64_t published_ns)
{
	if (n > SHMKV_CTL_MAX_SEGMENTS || generation == 0)
		return -EINVAL;
	/* the new fields, built privately, then stored word by word */
	shmkv_ctl next;
	memset(&next, 0, sizeof next);
	next.segment_count = n;
	next.flags = flags;
	next.loader_pid = loader_pid;
	next.published_ns = published_ns;
	for (uint32_t i = 0; i < n; i++)
		next.segments[i] = segs[i];
	const unsigned char *src = (const unsigned char *)&next;
	uint64_t *w = (uint64_t *)(void *)ctl;

	/* Only writer: a relaxed load sees its own last store. An odd seq is a
	 * section a crashed loader left open: s is its start. */
	uint64_t s = shmkv__load_relaxed(&ctl->seq) & ~UINT64_C(1);
	/* odd: relaxed, published by the release of every word store below
	 * (pairs with the relaxed seq re-read in shmkv__ctl_read_n()) */
	shmkv__store_relaxed(&ctl->seq, s + 1);
	for (size_t i = SHMKV__CTL_WORD(segment_count); i < SHMKV__CTL_WORDS; i++) {
		uint64_t v;
		memcpy(&v, src + 8 * i, 8);
		/* release; pairs with the load_acquire of each word in
		 * lib/shmkv/ctl.h:shmkv__ctl_read_n(): a reader whose copy holds
		 * this store also sees seq odd (the store above) on its re-read */
		shmkv__store_release(w + i, v);
	}
	/* pairs with shmkv__load_acquire(&ctl->generation) in
	 * lib/shmkv/ctl.h:shmkv_ctl_generation() (shmkv_refresh's first check,
	 * lib/shmkv/attach.h): a reader that sees the new generation sees the
	 * stores above */
	shmkv__store_release(&ctl->generation, generation);
	/* pairs with shmkv__load_acquire(&ctl->seq) in lib/shmkv/ctl.h:
	 * shmkv__ctl_read_n(), shmkv_ctl_mid_update() and shmkv__ctl_seq(): the
	 * section's stores are visible before seq turns even again */
	shmkv__store_release(&ctl->seq, s + 2);
	return 0;
}

#endif /* SHMKV_CTL_H */
