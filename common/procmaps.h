/* procmaps.h - which processes map a cache's segment files, from
 * /proc/PID/maps (the loader's reader count in `status`, shmctl's
 * `cache readers`). Segment names: segname.h. */
#ifndef SHMKV_COMMON_PROCMAPS_H
#define SHMKV_COMMON_PROCMAPS_H

#include <stdbool.h>
#include <stdint.h>

/* One mapping of a segment file. */
struct procmaps_seg {
	const char *path; /* absolute; " (deleted)" stripped */
	uint64_t start;   /* address of the mapping */
	uint64_t dev, ino; /* the file's st_dev and st_ino: what identifies it */
	bool deleted;     /* the file is unlinked (only mappings keep it) */
	bool loading;     /* a *.loading file (the loader's load in progress) */
};

/* Parses a header line of maps or smaps ("lo-hi perms off dev inode path"):
 * the start address and the path (" (deleted)" stripped, in place; "" for
 * an anonymous mapping). Returns false for other lines (smaps fields). */
bool procmaps_parse_line(char *line, uint64_t *start, char **path, bool *deleted);

/* The device (st_dev: makedev of the "MAJ:MIN" hex field) and inode of a
 * maps line, without copying or parsing the rest; false for other lines.
 * The loader matches mappings by these, never by name (loader/readers.c). */
bool procmaps_line_id(const char *line, uint64_t *dev, uint64_t *ino);

/* Calls fn(pid, arg) for every process in /proc, in directory order, until
 * fn returns non-zero (returned). Returns 0, or -errno when /proc cannot be
 * read. */
int procmaps_for_each_pid(int (*fn)(long pid, void *arg), void *arg);

/* Calls fn(seg, arg) for each mapping in /proc/PID/maps of a file whose
 * name is cache_prefix + LOADID[.loading] (segname_match), until fn returns
 * non-zero (returned). Returns 0; -ENOENT (the process is gone); -EACCES or
 * -EPERM (another user's process, without the privilege to read it);
 * another -errno. */
int procmaps_scan_pid(long pid, const char *cache_prefix,
		      int (*fn)(const struct procmaps_seg *seg, void *arg), void *arg);

#endif /* SHMKV_COMMON_PROCMAPS_H */
