/* overlay.h - changes to a loaded cache (overlay.c): a generation becomes
 * its base plus an overlay, one delta image (lib/FORMAT.md §19) holding
 * every change since the base was loaded, published under protocol 2
 * (lib/PROTOCOL.md). Worker thread; each reply is malloc'd JSON. */
#ifndef LOADER_OVERLAY_H
#define LOADER_OVERLAY_H

#include <stddef.h>

#include "loader.h"

/* Applies the delta image at path (absolute) to cache name: a delta of
 * the current base (prev 0), or the next of the chain last applied (prev
 * = its checksum, seq one more). nofollow: a spool file (never a link).
 * 0 or an error; *reply, and why on failure. */
int op_apply(struct loader *L, const char *name, const char *path, int nofollow, char **reply,
	     char *why, size_t why_len);
/* Applies changes, JSONL records as `shmctl image build` reads them
 * (builder/README.md): an upsert {"key": K, "value": V, "type": T,
 * "expires": E} or a removal {"key": K, "remove": true}. j->stream 0: one
 * record (`change`); 1: a stream's batch, j->lines lines from line
 * j->first_line, any number of records, the last of a key winning. */
int op_change(struct loader *L, const struct job *j, char **reply, char *why, size_t why_len);

/* For compact.c: the cache name if it has a loaded image to change (else
 * 0 with *reply an error); a failure logged, kept as the cache's last
 * error and replied with the reason; ROOT/.NAME.WHAT, a temporary. */
int overlay_changeable(struct loader *L, const char *name, struct cache **out, char **reply);
int overlay_refused(struct loader *L, struct cache *c, const char *what, int err, const char *why,
		    char **reply);
void overlay_tmp_path(const struct loader *L, const struct cache *c, const char *what, char *out,
		      size_t len);

/* Durable mode (wal.h): after a publish that changed the base or stepped
 * back (load, rollback, compaction, drop), the cache's log is rewritten to
 * name the base and hold the overlay served, if any, as one record. */
void overlay_log_reset(struct loader *L, const char *name);
/* At start, after adoption and the configured loads: every log in
 * DURABLE replayed onto its base (loader/README.md, "What is kept"). */
void overlay_recover(struct loader *L);
/* DURABLE/NAME.SUM.base.shmkv: a compacted base of checksum SUM kept for
 * the log (compact.c); len at least PATH_MAX + 80. */
void overlay_kept_base(const struct loader *L, const char *name, uint64_t sum, char *out,
		       size_t len);

#endif /* LOADER_OVERLAY_H */
