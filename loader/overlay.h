/* overlay.h - changes to a loaded cache (overlay.c): a generation becomes
 * its base plus a lower and a top overlay, delta images (lib/FORMAT.md §19)
 * holding every change since the base was loaded, published under
 * protocol 2 (lib/PROTOCOL.md). A change is merged into the top alone; past
 * a bound the top is folded into the lower off the changes' path. Worker
 * thread; each reply is malloc'd JSON. */
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

/* 1 once c's top passed the cache's bound, max(fold_entries, fold_ratio x
 * the lower's records), or the top was turned off (fold_entries 0): the
 * worker then queues a fold (worker.c, after the publish's reply). */
int overlay_fold_due(const struct cache *c);
/* Folds cache name's top into its lower: the merge of the two, built,
 * verified and loaded as a change is, published with the base and no top.
 * The content stays; so do the rollback generation (the one before the
 * last change) and the durable log. Queued only (no reply); nothing due any
 * more, or a compaction queued (it takes the top too), is 0; a failure is
 * logged and leaves the top serving. */
int op_fold(struct loader *L, const char *name);
/* The merge of c's top and lower (the top's word on a key wins), one delta
 * of the base at out: a fold's, and compact.c's before it merges with the
 * base. 0 or an error with why. */
int overlay_merge_top(const struct cache *c, const char *out, char *why, size_t why_len);
/* The same merge by files: the top and lower overlays at top and lower,
 * deltas of the image at base (paths; /proc/self/fd/N for files held open
 * that a fold may unlink meanwhile). Touches no cache: compact.c's thread
 * runs it. 0 or an error with why. */
int overlay_merge_files(const char *base, const char *top, const char *lower, const char *out,
			char *why, size_t why_len);
/* A builder (libshmkv-build) of a delta of the image at base_path (its
 * header names it; the image is not read), one thread; dup: what a key
 * given twice does (enum shmkv_on_duplicate). 0 or an error with why. */
struct shmkv_builder;
/* The overlay at path, every check (structure too), and that it applies to
 * the image at base_path (lib/FORMAT.md §19.4): 0 or an error with why. */
int overlay_verify(const char *base_path, const char *path, char *why, size_t why_len);
/* The same with flags of shmkv_open_file (SHMKV_OPEN_NOVERIFY: only the
 * header's checks and that it applies, for an overlay the load verifies). */
int overlay_applies(const char *base_path, const char *path, unsigned flags, char *why,
		    size_t why_len);
int overlay_delta_builder(const char *base_path, int dup, struct shmkv_builder **out, char *why,
			  size_t why_len);
/* Adds one overlay record to b: a tombstone (v->type SHMKV_TYPE_TOMBSTONE)
 * or an upsert with its expiry (0: none). 0 or the builder's error. */
int overlay_builder_put(struct shmkv_builder *b, const void *k, size_t kl,
			const struct shmkv_value *v, uint32_t expires);
/* The keys changed since the base in a generation with these overlays
 * (NULL: none): the lower's records and the top's that the lower does not
 * hold (adopt.c: what c->ov_keys is for an adopted generation). */
uint64_t overlay_keys(const struct seg_info *lower, const struct seg_info *top);

/* Unmaps c's lower overlay kept mapped across publishes (c->lower_db) once
 * it is not the lower of the generation served any more: the worker after
 * every job, so that a file gone (a fold, a load, a drop) is not kept. */
void overlay_unmap_stale(struct cache *c);

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
 * name the base and hold the overlays served, if any, as one record each
 * (the lower, then the top). A fold leaves the log as it is. */
void overlay_log_reset(struct loader *L, const char *name);
/* At start, after adoption and the configured loads: every log in
 * DURABLE replayed onto its base (loader/README.md, "What is kept"). */
void overlay_recover(struct loader *L);
/* DURABLE/NAME.SUM.base.shmkv: a compacted base of checksum SUM kept for
 * the log (compact.c); len at least PATH_MAX + 80. */
void overlay_kept_base(const struct loader *L, const char *name, uint64_t sum, char *out,
		       size_t len);

#endif /* LOADER_OVERLAY_H */
