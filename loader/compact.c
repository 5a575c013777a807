/* compact.c - compaction (compact.h): a changed cache's base and overlays
 * merged by the builder (shmkv_build_compact: the image a full build of the
 * merged records gives, memory-bounded) into a temporary file, which is
 * then loaded and published as any full load is (verified, the cache's
 * memory policy; the generation before, base plus overlay, becomes the
 * rollback). Readers never wait: they read the old generation until the
 * new one is published. Changes sent meanwhile wait in the worker's queue. */
#include "compact.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <shmkv_build.h>

#include "diag.h"
#include "json.h"
#include "load.h"
#include "log.h"
#include "overlay.h"
#include "wal.h"

#define COMPACT_RATIO_FLOOR (UINT64_C(1) << 20) /* overlay bytes */

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int compact_due(const struct cache *c)
{
	if (!c->have_cur || !c->have_ov)
		return 0;
	/* the keys changed (a key both overlays hold once), their bytes */
	uint64_t bytes = c->ov.size + (c->have_top ? c->top.size : 0);
	if (c->conf.compact_entries && c->ov_keys >= c->conf.compact_entries)
		return 1;
	/* the ratio from COMPACT_RATIO_FLOOR on: a small cache's overlay soon
	 * outweighs its base, yet costs next to nothing to rebuild */
	return c->conf.compact_ratio > 0 && bytes >= COMPACT_RATIO_FLOOR &&
	       (double)bytes >= c->conf.compact_ratio * (double)c->cur.size;
}

static char *reply_compacted(const struct cache *c, uint64_t records, uint64_t ms)
{
	struct json j;
	json_init(&j);
	json_bool(&j, "ok", 1);
	json_str(&j, "cache", c->name);
	json_bool(&j, "compacted", records != 0);
	json_u64(&j, "generation", c->cur.generation);
	json_u64(&j, "records", records);
	json_u64(&j, "entries", c->cur.entries);
	json_u64(&j, "bytes", c->cur.size);
	json_u64(&j, "ms", ms);
	return json_finish(&j);
}

int op_compact(struct loader *L, const char *name, int automatic, char **reply, char *why,
	       size_t why_len)
{
	struct cache *c = cache_find(L, name);
	if (c && automatic)
		c->compact_queued = 0;
	if (automatic && (!c || !compact_due(c)))
		return 0; /* replaced or rolled back meanwhile: nothing due any more */
	int err = overlay_changeable(L, name, &c, reply);
	if (err)
		return err;
	if (!c->have_ov) {
		*reply = reply_compacted(c, 0, 0);
		return 0;
	}
	uint64_t t0 = mono_ms(), records = c->ov_keys;
	/* what deltas apply to after it: the image the base came from */
	uint64_t origin_sum = c->origin_sum, origin_size = c->origin_size;
	if (!origin_sum) {
		shmkv *base = NULL;
		char w[300];
		err = shmkv_open_file_diag(c->cur.path, SHMKV_OPEN_NOVERIFY, &base, w, sizeof w);
		if (err)
			return overlay_refused(L, c, "compact", err, w, reply);
		origin_sum = shmkv_checksum(base);
		origin_size = base->size;
		shmkv_close(base);
	}
	uint64_t chain_last = c->chain_last, chain_seq = c->chain_seq, changes = c->changes;
	/* durable mode: the new base is kept beside the log, which names it
	 * before the publish (a reboot finds it there) */
	char out[PATH_MAX + 80], kept[PATH_MAX + 80], e[700];
	int keep = L->durable_fd >= 0;
	if (keep) {
		snprintf(out, sizeof out, "%s/.%s.base.tmp", L->durable, name);
	} else {
		overlay_tmp_path(L, c, "compact.tmp", out, sizeof out);
	}
	/* a top is merged into the lower first (the fold's merge, into a
	 * temporary): the builder takes a chain, and the two overlays
	 * are each a delta of the base */
	char merged[PATH_MAX];
	overlay_tmp_path(L, c, "compact.top.tmp", merged, sizeof merged);
	const char *deltas[1] = {c->have_top ? merged : c->ov.path};
	if (c->have_top && (err = overlay_merge_top(c, merged, e, sizeof e)) != 0) {
		unlink(merged);
		return overlay_refused(L, c, "compact", err, e, reply);
	}
	shmkv_join_options jo;
	shmkv_join_options_init(&jo);
	shmkv_build_stats st;
	/* the base was verified at its load: the builder trusts it; the new
	 * base is fsynced only where it is kept (durable) */
	err = shmkv_build_compact(out, c->cur.path, deltas, 1, keep ? 0 : SHMKV_COMPACT_NOSYNC, &jo,
				  &st, e, sizeof e);
	unlink(merged);
	if (err) {
		unlink(out);
		return overlay_refused(L, c, "compact", err, e, reply);
	}
	if (!err && keep) {
		/* durable: the kept base and a log naming it before the publish, so
		 * that a kill at any point leaves a log whose base is found (the
		 * one served, or this one, loaded at start: the same answers) */
		struct wal_head h = {0, 0, origin_sum, origin_size, chain_last, chain_seq};
		shmkv *nb = NULL;
		if (!(err = shmkv_open_file_diag(out, SHMKV_OPEN_NOVERIFY, &nb, e, sizeof e))) {
			h.base_sum = shmkv_checksum(nb);
			h.base_size = nb->size;
		}
		shmkv_close(nb);
		overlay_kept_base(L, name, h.base_sum, kept, sizeof kept);
		if (!err && (rename(out, kept) != 0 || fsync(L->durable_fd) != 0))
			err = diag_fail(-errno, e, sizeof e, "%s: %s", kept, strerror(errno));
		if (!err)
			err = wal_reset(L, name, &h, NULL, 0, e, sizeof e);
		if (err) {
			unlink(out);
			overlay_log_reset(L, name); /* the log of what is served again */
			return overlay_refused(L, c, "compact", err, e, reply);
		}
	}
	/* the origin in the state file before the publish: a kill right after
	 * it (before the load saves the state) leaves it there for adopt.c;
	 * it is as true of the generation served now (its base is the origin,
	 * or was compacted from it) */
	pthread_mutex_lock(&L->lock);
	c->origin_sum = origin_sum;
	c->origin_size = origin_size;
	pthread_mutex_unlock(&L->lock);
	cache_save_state(L, c);
	char *lreply = NULL;
	c->lineage.keep = 1;
	c->lineage.origin_sum = origin_sum;
	c->lineage.origin_size = origin_size;
	c->lineage.chain_last = chain_last;
	c->lineage.chain_seq = chain_seq;
	err = op_load(L, name, keep ? kept : out, 1, "", &lreply, e, sizeof e);
	c->lineage.keep = 0;
	unlink(out);
	if (err) { /* op_load said why (logged, the cache's last error) */
		if (keep)
			overlay_log_reset(L, name); /* the log of what is served again */
		*reply = lreply;
		return err;
	}
	free(lreply);
	uint64_t ms = mono_ms() - t0;
	pthread_mutex_lock(&L->lock);
	c->compactions++;
	c->compact_unix = (uint64_t)time(NULL);
	c->compact_ms = ms;
	pthread_mutex_unlock(&L->lock);
	cache_save_state(L, c);
	log_info("compacted cache=%s gen=%llu by=%s records=%llu publishes=%llu entries=%llu "
		 "bytes=%llu ms=%llu", name, (unsigned long long)c->cur.generation,
		 automatic ? "bound" : "request", (unsigned long long)records,
		 (unsigned long long)changes, (unsigned long long)c->cur.entries,
		 (unsigned long long)c->cur.size, (unsigned long long)ms);
	(void)why, (void)why_len;
	*reply = reply_compacted(c, records, ms);
	return 0;
}
