/* catchup.h - a compaction's catch-up (catchup.c): the changes published
 * while its new base was merged off the worker, as one delta of the new
 * base. Worker thread. */
#ifndef LOADER_CATCHUP_H
#define LOADER_CATCHUP_H

#include <stddef.h>
#include <stdint.h>

#include <shmkv.h>

/* Writes at out a delta of the image at new_base (FORMAT.md §19: it names
 * that base by checksum) holding every key whose record in the current
 * overlays (cur_top over cur_lower) differs from its record in the
 * snapshot's (snap_top over snap_lower, the overlays the new base was
 * merged from): an upsert (type, value, expiry) or a tombstone, the
 * current record. Tops may be NULL. *records: how many; with 0 no file is
 * written. Every key of the snapshot's overlays must be in the current
 * ones (overlays only grow until the base changes, which cancels the
 * compaction): one that is not is an error (SHMKV_EBASE). 0 or an error
 * with why. */
int catchup_build(const char *new_base, const shmkv *snap_lower, const shmkv *snap_top,
		  const shmkv *cur_lower, const shmkv *cur_top, const char *out,
		  uint64_t *records, char *why, size_t why_len);

#endif /* LOADER_CATCHUP_H */
