/* trustdir.h - opening a directory the loader may trust, by its whole chain
 * (loader/README.md, "Trust"). Walks the path from "/" one component at a
 * time with openat(O_NOFOLLOW): every directory on the way must be owned by
 * root or the loader's uid and writable by no one else; a sticky directory
 * writable by others (/tmp, /dev/shm) is passed through only when the next
 * component is owned by the loader's uid. A symbolic link is followed only
 * where it lies in such a trusted directory (so only root or we made it),
 * and its target is walked by the same rules. The caller then works through
 * the descriptor (openat, renameat2), never the path again. */
#ifndef LOADER_TRUSTDIR_H
#define LOADER_TRUSTDIR_H

#include <stddef.h>

#define TDIR_CREATE 1u       /* create missing components, mode 0755 */
#define TDIR_STICKY_LAST 2u  /* the directory itself may be sticky and world-writable
				(shm_dir, a hugetlbfs mount): only a child the
				caller owns is used in it (seg_dir_open) */
#define TDIR_GROUP_LAST 4u   /* the directory itself may be group-writable (the
				spool: a group of producers), never world-writable */

/* Opens path (absolute) as a trusted directory. canon[canon_len], if given,
 * receives its canonical path (links resolved). Returns an O_RDONLY
 * directory descriptor, or -errno: -EPERM when a directory of the chain is
 * not trusted, with why naming the directory, its owner and mode. */
int tdir_open(const char *path, unsigned flags, char *canon, size_t canon_len, char *why,
	      size_t why_len);

#endif /* LOADER_TRUSTDIR_H */
