/* wal.h - the durable log of a cache's changes, DURABLE/NAME.wal (wal.c;
 * its layout and rules: loader/README.md, "What is kept"). A head names the
 * base the records apply to; each record is one publish's changes (a delta
 * image's bytes), checksummed, fdatasync'd before the publish is
 * acknowledged. Worker thread; every path goes through L->durable_fd. */
#ifndef LOADER_WAL_H
#define LOADER_WAL_H

#include <stddef.h>
#include <stdint.h>

#include "loader.h"
#include "walfmt.h"

/* Appends record seq (data, len), creating the log with head h when there
 * is none, and fdatasyncs it. *undo: the log's size before, for wal_undo().
 * 0, or -errno with why; then the record's bytes are cut off again, or,
 * where that fails too, *undo is WAL_UNCUT: the log may still hold them. */
#define WAL_UNCUT UINT64_MAX
int wal_append(struct loader *L, const char *name, const struct wal_head *h, uint64_t seq,
	       uint32_t flags, const void *data, uint64_t len, uint64_t *undo, char *why,
	       size_t why_len);
/* Cuts the log back to size (a record whose publish failed after all).
 * 0, or -errno (logged): the record may still be there. */
int wal_undo(struct loader *L, const char *name, uint64_t size);
/* Replaces the log by head h and the records recs[0..n) (their seq, data,
 * len; flags 0): written aside, fsync'd, renamed over the log, the
 * directory fsync'd. 0 or -errno. */
int wal_reset(struct loader *L, const char *name, const struct wal_head *h,
	      const struct wal_rec *recs, size_t n, char *why, size_t why_len);
/* Renames the log aside as NAME.wal.SUFFIX (kept for an operator), or,
 * where a log set aside before has that name, NAME.wal.SUFFIX.N (the
 * lowest N free): never over another file. kept: the name it got ("" if
 * not renamed, logged). suffix NULL: removes it. 0 or -errno. */
int wal_retire(struct loader *L, const char *name, const char *suffix, char *kept,
	       size_t kept_len);
/* Reads the log: its head and records, pointing into *buf (malloc'd, the
 * whole file; free it). A torn or damaged record ends the log: it and what
 * follows are cut off the file, logged. 0; -ENOENT without a log; another
 * -errno or SHMKV_ECORRUPT (a damaged head) with why. */
int wal_read(struct loader *L, const char *name, struct wal_head *h, char **buf,
	     struct wal_rec **recs, size_t *n, char *why, size_t why_len);
/* 1 when cache name has a log in DURABLE, else 0. */
int wal_exists(struct loader *L, const char *name);
/* Names of the caches with a log in DURABLE: *names (malloc'd array of
 * malloc'd names), *n. 0 or -errno. Called at start: the temporaries a
 * loader that died left there (`.*.tmp`) are removed, logged. */
int wal_list(struct loader *L, char ***names, size_t *n);

#endif /* LOADER_WAL_H */
