/* segment.h - segment files: one per loaded image, in a directory the loader
 * owns inside a hugetlbfs mount or the tmpfs directory (shm_dir).
 *
 * Names: DIR/shmkv/shmkv-RRRRRRRR-CACHE-LOADID where DIR is the mount or
 * shm_dir, RRRRRRRR the first 8 hex digits of XXH3-64 (seed 0) of the
 * canonical root path (so loaders with different roots never touch each
 * other's files), CACHE the cache name and LOADID the decimal load id (per
 * cache, grows with every load). While it is being loaded the file is
 * ...-LOADID.loading.
 *
 * Trust: DIR (/dev/shm, a hugetlbfs mount) is usually writable by every
 * local user, so nothing is created there but the directory DIR/shmkv
 * (mode 0750, the loader's uid, the [loader] group, else the group shmkv,
 * else the loader's gid). A DIR/shmkv that is not a real directory owned by
 * the loader's uid without group/other write is refused (logged) and a
 * private DIR/shmkv.XXXXXX (mkdtemp) is used instead, so that another user
 * can refuse us a name but never block a load. Files are created
 * O_CREAT|O_EXCL|O_NOFOLLOW; every file adopted is fstat'ed first (owner,
 * mode, type: seg_trust()). */
#ifndef LOADER_SEGMENT_H
#define LOADER_SEGMENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <shmkv.h>

#define SEG_LOADING_SUFFIX ".loading"
#define SEG_DIR_NAME "shmkv"   /* DIR/shmkv; the fallback is DIR/shmkv.XXXXXX */
#define SEG_NAME_TRIES 64      /* load ids tried when a name is taken */

/* A segment file the loader keeps (current or rollback). */
struct seg_info {
	char path[SHMKV_CTL_PATH_MAX]; /* absolute */
	uint64_t load_id;              /* from the file name */
	uint64_t size;                 /* image bytes */
	uint64_t map_size;             /* file size: size rounded up to page_size */
	uint64_t page_size;
	uint32_t flags;                /* SHMKV_SEG_* */
	uint64_t generation;           /* generation it was last published under */
	uint64_t entries;              /* from the image header */
	uint32_t format;               /* its format_version (1, 2) */
	int32_t node;                  /* NUMA node it is pinned to (verified), -1: not */
};

/* A segment being loaded: mapped read-write, named *.loading. */
struct seg {
	struct seg_info info; /* info.path: the final name */
	char tmp[SHMKV_CTL_PATH_MAX + 16];
	int fd;
	int dfd;      /* the segment directory, as seg_create() checked it */
	uint8_t *map;
};

/* The group given to a segment directory the loader creates: gid, or when
 * (gid_t)-1, the group shmkv if it exists, else the loader's gid. Called at
 * startup (adopt.c) with the [loader] group. */
void seg_set_dir_group(gid_t gid);
/* That group: the one seg_set_dir_group() gave, else shmkv, else ours. */
gid_t seg_dir_group(void);

/* Whether the open file fd (path for messages) can be trusted: a regular
 * file (dir: a directory) owned by the loader's uid (also uid 0 if
 * allow_root), writable by neither group nor others. Returns 0, or -EPERM
 * with the reason in why. */
int seg_trust(int fd, const char *path, int dir, int allow_root, char *why, size_t why_len);
/* The same from a struct stat already taken (lstat of a name in a directory
 * only the loader can write). */
int seg_trust_stat(const struct stat *st, const char *path, int dir, int allow_root, char *why,
		   size_t why_len);
/* Is NAME in base a segment directory of this loader: named SEG_DIR_NAME or
 * SEG_DIR_NAME.XXXXXX, and trusted? 1 or 0. */
int seg_dir_trusted(const char *base, const char *name);
/* Opens (creating it if missing) the segment directory of base, see above;
 * its path goes to out. Returns a directory descriptor, or -errno. */
int seg_dir_open(const char *base, char *out, size_t out_len, char *why, size_t why_len);

/* "shmkv-RRRRRRRR-" for a canonical root path. */
void seg_prefix(const char *root, char *out, size_t len);
/* Parses a file name (no directory). Returns 0 if it is prefix+CACHE-LOADID
 * (or with SEG_LOADING_SUFFIX, then *loading = 1), else -EINVAL. */
int seg_parse(const char *file, const char *prefix, char *cache, size_t cache_len,
	      uint64_t *load_id, int *loading);

/* Creates and backs DIR/shmkv/PREFIX+CACHE-LOADID.loading for size bytes
 * (dir is the mount or shm_dir; the segment directory is seg_dir_open()'s).
 * A name already taken (.loading or final) is never reused: the next load
 * id is tried, up to SEG_NAME_TRIES, logged; s->info.load_id is the id used.
 * hugetlbfs: size rounded up to page_size and mapped MAP_SHARED, which
 * reserves the huge pages; tmpfs: posix_fallocate'd. Either way a load
 * never SIGBUSes halfway. Returns 0; -ENOMEM or -ENOSPC when
 * the memory is short; -ENAMETOOLONG; other -errno. */
int seg_create(struct seg *s, const char *dir, int hugetlb, uint64_t page_size,
	       const char *prefix, const char *cache, uint64_t load_id, uint64_t size, mode_t mode,
	       gid_t gid, char *why, size_t why_len);
/* Unmaps and renames the file to its final name (never replacing one),
 * through the directory descriptor seg_create() opened and checked. */
int seg_commit(struct seg *s, char *why, size_t why_len);
/* Unmaps, closes and unlinks a segment that is not going to be published. */
void seg_discard(struct seg *s);

/* Checks a segment file: opens it O_NOFOLLOW|O_NONBLOCK, refuses it unless
 * seg_trust() (-EPERM), maps it read-only and checks its image header (not
 * the section checksums). Fills info (not generation). */
int seg_inspect(const char *path, struct seg_info *info, char *why, size_t why_len);

/* The control-segment entry that publishes this segment (node: info->node). */
shmkv_ctl_segment seg_ctl_entry(const struct seg_info *in);

#endif /* LOADER_SEGMENT_H */
