/* segment.h - segment files: one per loaded image, in a hugetlbfs mount or a
 * tmpfs directory.
 *
 * Names: DIR/shmkv-RRRRRRRR-CACHE-LOADID where RRRRRRRR is the first 8 hex
 * digits of XXH3-64 (seed 0) of the canonical root path (so loaders with
 * different roots never touch each other's files), CACHE the cache name and
 * LOADID the decimal load id (per cache, grows with every load). While it is
 * being loaded the file is DIR/shmkv-RRRRRRRR-CACHE-LOADID.loading. */
#ifndef LOADER_SEGMENT_H
#define LOADER_SEGMENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <shmkv.h>

#define SEG_LOADING_SUFFIX ".loading"

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
};

/* A segment being loaded: mapped read-write, named *.loading. */
struct seg {
	struct seg_info info; /* info.path: the final name */
	char tmp[SHMKV_CTL_PATH_MAX + 16];
	int fd;
	uint8_t *map;
};

/* "shmkv-RRRRRRRR-" for a canonical root path. */
void seg_prefix(const char *root, char *out, size_t len);
/* Parses a file name (no directory). Returns 0 if it is prefix+CACHE-LOADID
 * (or with SEG_LOADING_SUFFIX, then *loading = 1), else -EINVAL. */
int seg_parse(const char *file, const char *prefix, char *cache, size_t cache_len,
	      uint64_t *load_id, int *loading);

/* Creates and backs DIR/PREFIX+CACHE-LOADID.loading for size bytes:
 * hugetlbfs: size rounded up to page_size and mapped MAP_SHARED, which
 * reserves the huge pages; tmpfs: posix_fallocate'd. Either way a load
 * never SIGBUSes halfway. Returns 0; -ENOMEM or -ENOSPC when
 * the memory is short; -ENAMETOOLONG; other -errno. */
int seg_create(struct seg *s, const char *dir, int hugetlb, uint64_t page_size,
	       const char *prefix, const char *cache, uint64_t load_id, uint64_t size, mode_t mode,
	       gid_t gid, char *why, size_t why_len);
/* Unmaps and renames the file to its final name. */
int seg_commit(struct seg *s, char *why, size_t why_len);
/* Unmaps, closes and unlinks a segment that is not going to be published. */
void seg_discard(struct seg *s);

/* Checks a segment file: maps it read-only and checks its image header
 * (not the section checksums). Fills info (not generation). */
int seg_inspect(const char *path, struct seg_info *info, char *why, size_t why_len);

/* The control-segment entry that publishes this segment (not NUMA-pinned). */
shmkv_ctl_segment seg_ctl_entry(const struct seg_info *in);

#endif /* LOADER_SEGMENT_H */
