/* overlay.c - changes to a loaded cache: set, remove, apply a delta
 * (overlay.h). Each publish merges the new changes into the current
 * overlay's records with the builder (libshmkv-build), verifies the new
 * overlay fully and against the base, loads it into new segments like any
 * image (the base is never copied) and publishes base + overlay as one
 * generation under protocol 2 (lib/PROTOCOL.md). */
#include "overlay.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
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
#include "probes.h"
#include "wal.h"

/* ---- building the merged overlay ---- */

int overlay_builder_put(shmkv_builder *b, const void *k, size_t kl, const shmkv_value *v,
			uint32_t expires)
{
	if (v->type == SHMKV_TYPE_TOMBSTONE)
		return shmkv_builder_remove(b, k, kl);
	int err = shmkv_builder_set_expires(b, expires);
	return err ? err : shmkv_builder_add(b, k, kl, v->type, v->data, v->size);
}

/* Adds every record of the delta d (upserts with their expiry, tombstones)
 * to b. */
static int feed(shmkv_builder *b, const shmkv *d, const char *what, char *why, size_t why_len)
{
	shmkv_iter it;
	const void *k;
	size_t kl;
	shmkv_value v;
	int err;
	shmkv_iter_init_all(d, &it);
	while ((err = shmkv_iter_next(&it, &k, &kl, &v)) == 0)
		if ((err = overlay_builder_put(b, k, kl, &v, shmkv_iter_expires(&it))) != 0)
			return diag_fail(err, why, why_len, "%s: %s", what, shmkv_builder_error(b));
	if (err != SHMKV_EEND)
		return diag_fail(err, why, why_len, "%s: %s", what, shmkv_strerror(err));
	return 0;
}

/* ROOT/.NAME.WHAT: the loader's temporary files (a cache name never starts
 * with '.', so these are no cache's). */
void overlay_tmp_path(const struct loader *L, const struct cache *c, const char *what, char *out,
		     size_t len)
{
	int n = snprintf(out, len, "%s/.%s.%s", L->root, c->name, what);
	if (n < 0 || (size_t)n >= len)
		out[0] = 0; /* cannot happen: ROOT is checked at startup to leave room */
}

int overlay_delta_builder(const char *base_path, int dup, shmkv_builder **out, char *why,
			  size_t why_len)
{
	shmkv_build_options o;
	shmkv_builder *b = NULL;
	*out = NULL;
	int bad = shmkv_build_options_init(&o);
	o.on_duplicate = dup;
	if (bad || shmkv_builder_new(&o, &b))
		return diag_fail(-ENOMEM, why, why_len, "builder: out of memory");
	shmkv_builder_set_threads(b, 1); /* small: the worker's own thread */
	/* the base segment was verified when it was loaded and only we write
	 * it: its identity is read from its header, never the whole base */
	shmkv *base = NULL;
	char w[300];
	int err = shmkv_open_file_diag(base_path, SHMKV_OPEN_NOVERIFY, &base, w, sizeof w);
	if (err)
		diag_fail(err, why, why_len, "base: %s", w);
	else if ((err = shmkv_builder_set_delta_of(b, base, base_path)))
		diag_fail(err, why, why_len, "base %s: %s", base_path, shmkv_builder_error(b));
	shmkv_close(base);
	if (err)
		shmkv_builder_free(b);
	else
		*out = b;
	return err;
}

/* A builder of a delta of the cache's base. */
static int delta_builder(const struct cache *c, int dup, shmkv_builder **out, char *why,
			 size_t why_len)
{
	return overlay_delta_builder(c->cur.path, dup, out, why, why_len);
}

/* Whether delta d holds key (an upsert or a tombstone): 1, 0, or an error
 * (damage on the key's path). */
static int holds(const shmkv *d, const void *k, size_t kl)
{
	uint64_t off;
	int err = shmkv_find_record(d, k, kl, &off, NULL);
	return err == SHMKV_ENOTFOUND ? 0 : err ? err : 1;
}

/* *added: the keys of d that neither old nor also (NULL: none) holds. */
static int count_new(const shmkv *d, const shmkv *old, const shmkv *also, uint64_t *added,
		     char *why, size_t why_len)
{
	shmkv_iter it;
	const void *k;
	size_t kl;
	shmkv_value v;
	int err;
	*added = 0;
	shmkv_iter_init_all(d, &it);
	while ((err = shmkv_iter_next(&it, &k, &kl, &v)) == 0) {
		int in = old ? holds(old, k, kl) : 0;
		if (in == 0 && also)
			in = holds(also, k, kl);
		if (in < 0)
			return diag_fail(in, why, why_len, "an overlay: %s", shmkv_strerror(in));
		*added += !in;
	}
	if (err != SHMKV_EEND)
		return diag_fail(err, why, why_len, "the new changes: %s", shmkv_strerror(err));
	return 0;
}

/* A new overlay at out: the records of d (the newer changes), then those
 * of old (NULL: none) whose key d does not hold. The one merge of two
 * levels: a change into the top or the lower, a fold (the top into the
 * lower), the overlays before a compaction. The builder merges both
 * images where they lie, in their key order, d's record of a key winning
 * (shmkv_builder_add_images): no copy of a record, no sort of them all
 * (a fold's lower: every record), the same bytes as adding them. */
static int build_merged(const char *base_path, const shmkv *d, const shmkv *old,
			const char *old_name, const char *out, char *why, size_t why_len)
{
	shmkv_builder *b;
	int err = overlay_delta_builder(base_path, SHMKV_DUP_FIRST, &b, why, why_len);
	if (err)
		return err;
	const shmkv *dbs[2] = {d, old};
	err = shmkv_builder_add_images(b, dbs, old ? 2 : 1);
	if (err && old)
		diag_fail(err, why, why_len, "merging the new changes (image 1) and %s (image 2): %s",
			  old_name, shmkv_builder_error(b));
	else if (err)
		diag_fail(err, why, why_len, "the new changes: %s", shmkv_builder_error(b));
	if (!err) {
		shmkv_build_stats st;
		err = shmkv_builder_finish(b, out, &st);
		if (err)
			diag_fail(err, why, why_len, "building the overlay: %s",
				  shmkv_builder_error(b));
	}
	shmkv_builder_free(b);
	return err;
}

/* The overlay at path opened (flags: shmkv_open_file's), or an error
 * naming it as what. */
static int open_overlay(const struct seg_info *s, unsigned flags, const char *what, shmkv **out,
			char *why, size_t why_len)
{
	char w[300];
	int err = shmkv_open_file_diag(s->path, flags, out, w, sizeof w);
	if (err)
		diag_fail(err, why, why_len, "%s overlay: %s", what, w);
	return err;
}

int overlay_merge_files(const char *base, const char *top_path, const char *lower_path,
			const char *out, char *why, size_t why_len)
{
	shmkv *top = NULL, *lower = NULL;
	struct seg_info t = {0}, l = {0};
	snprintf(t.path, sizeof t.path, "%s", top_path);
	snprintf(l.path, sizeof l.path, "%s", lower_path);
	/* segments of ours, verified at their load: read without their
	 * checksums, as the base is (each record read is checked, and what is
	 * built from them is verified at its load) */
	int err = open_overlay(&t, SHMKV_OPEN_NOVERIFY, "top", &top, why, why_len);
	if (!err)
		err = open_overlay(&l, SHMKV_OPEN_NOVERIFY, "lower", &lower, why, why_len);
	if (!err)
		err = build_merged(base, top, lower, lower_path, out, why, why_len);
	shmkv_close(top);
	shmkv_close(lower);
	return err;
}

int overlay_merge_top(const struct cache *c, const char *out, char *why, size_t why_len)
{
	return overlay_merge_files(c->cur.path, c->top.path, c->ov.path, out, why, why_len);
}

uint64_t overlay_keys(const struct seg_info *lower, const struct seg_info *top)
{
	shmkv *l = NULL, *t = NULL;
	uint64_t added = 0;
	char w[300];
	if (!top)
		return lower ? lower->entries : 0;
	/* opened without their checksums: only their keys are looked up, and
	 * every lookup stays within the image */
	if (shmkv_open_file_diag(lower->path, SHMKV_OPEN_NOVERIFY, &l, w, sizeof w) ||
	    shmkv_open_file_diag(top->path, SHMKV_OPEN_NOVERIFY, &t, w, sizeof w) ||
	    count_new(t, l, NULL, &added, w, sizeof w))
		added = top->entries; /* an estimate: status figures only */
	shmkv_close(l);
	shmkv_close(t);
	return lower->entries + added;
}

/* The overlay at path, every check (structure too), and that it applies
 * to the current base (lib/FORMAT.md §19.4). */
int overlay_verify(const char *base_path, const char *path, char *why, size_t why_len)
{
	return overlay_applies(base_path, path, SHMKV_OPEN_DEEP, why, why_len);
}

int overlay_applies(const char *base_path, const char *path, unsigned flags, char *why,
		    size_t why_len)
{
	shmkv *ov = NULL, *base = NULL;
	char w[400];
	int err = shmkv_open_file_diag(path, flags, &ov, w, sizeof w);
	if (!err && !shmkv_is_delta(ov))
		err = diag_fail(SHMKV_EBASE, w, sizeof w, "not a delta image");
	if (!err)
		err = shmkv_open_file_diag(base_path, SHMKV_OPEN_NOVERIFY, &base, w, sizeof w);
	if (!err)
		err = shmkv_delta_set(base, ov, w, sizeof w);
	if (err)
		diag_fail(err, why, why_len, "the new overlay failed verification: %s", w);
	shmkv_close(base);
	shmkv_close(ov);
	return err;
}

/* A new overlay we built, before load_segments() reads it: only that it is
 * a delta of the current base (its header). Every other check of `shmctl
 * image verify` (checksums, the structural walk) is the load's, as the
 * bytes are read into the segment (vstream.h): one pass over the overlay,
 * not two, and nothing unverified is published. */
static int verify_overlay(const struct cache *c, const char *path, char *why, size_t why_len)
{
	return overlay_applies(c->cur.path, path, SHMKV_OPEN_NOVERIFY, why, why_len);
}

void overlay_unmap_stale(struct cache *c)
{
	if (c->lower_db && (!c->have_cur || !c->have_ov || strcmp(c->lower_db_path, c->ov.path))) {
		shmkv_close(c->lower_db);
		c->lower_db = NULL;
	}
}

/* The cache's lower overlay, mapped at its first publish into the top and
 * kept (c->lower_db) until it is no longer the lower: looked up without its
 * checksums, as a segment of ours verified at its load. */
static int lower_mapped(struct cache *c, shmkv **out, char *why, size_t why_len)
{
	overlay_unmap_stale(c);
	if (!c->lower_db) {
		int err = open_overlay(&c->ov, SHMKV_OPEN_NOVERIFY, "lower", &c->lower_db, why,
				       why_len);
		if (err)
			return err;
		snprintf(c->lower_db_path, sizeof c->lower_db_path, "%s", c->ov.path);
	}
	*out = c->lower_db;
	return 0;
}

static void unlink_infos(const struct seg_info *first, const struct seg_info *more, unsigned n)
{
	unlink(first->path);
	for (unsigned i = 0; i < n; i++)
		unlink(more[i].path);
}

/* Which overlay a publish of changes rebuilds: the top, unless the cache
 * has no lower yet (one overlay is always the lower one: lib/PROTOCOL.md),
 * the top is off (fold_entries 0) or the control segment has no room for
 * a top beside the base copies and the lower (numa=replicate over 7
 * nodes). A top there stays the top until it is folded: a change put into
 * the lower under it would be hidden by its older record of the key. */
static int into_top(const struct cache *c)
{
	return c->have_top || (c->have_ov && c->conf.fold_entries &&
			       c->ncur_more + 3 <= SHMKV_CTL_MAX_SEGMENTS);
}

int overlay_fold_due(const struct cache *c)
{
	if (!c->have_cur || !c->have_top)
		return 0;
	if (!c->conf.fold_entries)
		return 1; /* the top was turned off: folded at once */
	double bound = c->conf.fold_ratio * (double)c->ov.entries;
	return c->top.entries >= c->conf.fold_entries && (double)c->top.entries >= bound;
}

/* Publishes the cache's base copies with the overlays: the new one (first,
 * as the top when top, else as the lower) and the other level as it is.
 * One copy of an overlay serves every node (readers take the copy of their
 * base copy's node, else the first: lib/PROTOCOL.md): an overlay is small.
 * Replicas of it (more[], from numa=replicate) are unlinked. keys: the
 * keys changed since the base, after it (c->ov_keys). The generation
 * before becomes the rollback; its files that no kept generation names
 * any more are unlinked. */
static int publish_overlay(struct loader *L, struct cache *c, int top, const struct seg_info *first,
			   struct seg_info *more, unsigned nmore, uint64_t keys, char *why,
			   size_t why_len)
{
	for (unsigned i = 0; i < nmore; i++)
		unlink(more[i].path);
	shmkv_ctl_segment cs[SHMKV_CTL_MAX_SEGMENTS];
	uint32_t n;
	int err = cache_gen_entries(&c->cur, c->cur_more, c->ncur_more, top ? &c->ov : first,
				    top ? first : NULL, cs, &n, why, why_len);
	uint64_t gen = ctl_generation(&c->ctl) + 1;
	if (!err)
		err = ctl_publish_version(&c->ctl, SHMKV_PROTOCOL_VERSION_2, gen, cs, n, why,
					  why_len);
	if (err) {
		unlink(first->path);
		return err;
	}
	PROBE(publish, c->name, gen, first->size, first->path);
	/* the generation before becomes the rollback: same base, its overlays */
	struct seg_info old_rb = c->rb, old_rbov = c->rbov, old_rbtop = c->rbtop,
			old_rb_more[SHMKV_CTL_MAX_SEGMENTS - 1];
	unsigned old_nrb_more = c->nrb_more;
	int had_rb = c->have_rb, had_rbov = c->have_rbov, had_rbtop = c->have_rbtop,
	    rb_shared = cache_rb_shares_base(c);
	memcpy(old_rb_more, c->rb_more, sizeof old_rb_more);
	pthread_mutex_lock(&L->lock);
	c->protocol = cache_protocol(c);
	c->rb = c->cur;
	c->rb_stats = c->stats;
	memcpy(c->rb_more, c->cur_more, sizeof c->rb_more);
	c->nrb_more = c->ncur_more;
	c->have_rb = 1;
	c->rbov = c->ov;
	c->have_rbov = c->have_ov;
	c->rbtop = c->top;
	c->have_rbtop = c->have_top;
	c->rb_ov_keys = c->ov_keys;
	c->rb_chain_last = c->chain_last;
	c->rb_chain_seq = c->chain_seq;
	c->rb_origin_sum = c->origin_sum;
	c->rb_origin_size = c->origin_size;
	if (top) {
		c->top = *first;
		c->have_top = 1;
	} else {
		c->ov = *first;
		c->have_ov = 1;
	}
	c->ov.generation = c->top.generation = gen;
	c->ov_keys = keys;
	c->cur.generation = gen;
	for (unsigned i = 0; i < c->ncur_more; i++)
		c->cur_more[i].generation = gen;
	c->changes++;
	c->last_error[0] = 0;
	pthread_mutex_unlock(&L->lock);
	/* saved before the old rollback's overlays go: killed in between, a
	 * restart finds the state naming the generation before this one
	 * (adopt.c) */
	cache_save_state(L, c);
	if (had_rbov)
		cache_release(c, &old_rbov);
	if (had_rbtop)
		cache_release(c, &old_rbtop);
	if (had_rb && !rb_shared) { /* an older base: no generation kept uses it */
		cache_unlink_more(c, old_rb_more, old_nrb_more);
		unlink(old_rb.path);
	}
	return 0;
}

static void overlay_reply_fields(struct json *j, const struct cache *c)
{
	int ov = c->have_cur && c->have_ov, top = ov && c->have_top;
	json_u64(j, "changes", ov ? c->ov_keys : 0);
	json_u64(j, "overlay_bytes", (ov ? c->ov.size : 0) + (top ? c->top.size : 0));
	json_str(j, "overlay", ov ? c->ov.path : NULL);
	json_u64(j, "lower_records", ov ? c->ov.entries : 0);
	json_u64(j, "top_records", top ? c->top.entries : 0);
	json_str(j, "top", top ? c->top.path : NULL);
}

static char *reply_changed(const struct cache *c, uint64_t records)
{
	struct json j;
	json_init(&j);
	json_bool(&j, "ok", 1);
	json_str(&j, "cache", c->name);
	json_u64(&j, "generation", c->cur.generation);
	json_u64(&j, "records", records);
	overlay_reply_fields(&j, c);
	return json_finish(&j);
}

/* The head of the cache's durable log: its base, and what deltas apply to. */
static int log_head(const struct cache *c, struct wal_head *h, char *why, size_t why_len)
{
	shmkv *base = NULL;
	char w[300];
	int err = shmkv_open_file_diag(c->cur.path, SHMKV_OPEN_NOVERIFY, &base, w, sizeof w);
	if (err)
		return diag_fail(err, why, why_len, "base: %s", w);
	*h = (struct wal_head){shmkv_checksum(base), base->size, c->origin_sum, c->origin_size,
			       c->chain_last, c->chain_seq};
	shmkv_close(base);
	return 0;
}

/* How publish_changes() publishes: PUB_REPLAY, a replay of the durable log
 * at the start; PUB_ALONE, d holds every change since the base (the whole
 * log replayed), published as the lower with no top, the overlays served
 * not merged in. */
enum { PUB_REPLAY = 1, PUB_ALONE = 2 };

/* The changes of d published as the cache's next generation. flags: of
 * its record in the durable log (WAL_APPLIED: a delta applied as it came).
 * how: PUB_*, or 0. */
static int publish_changes(struct loader *L, struct cache *c, const shmkv *d, uint32_t flags,
			   unsigned how, char *why, size_t why_len)
{
	int alone = (how & PUB_ALONE) != 0;
	/* the level the changes go into, its records fed to the new overlay;
	 * the lower's under a top only looked up (its keys count the changes:
	 * c->ov_keys). Both are segments of ours, verified when they were
	 * loaded, as the base is: read without their checksums, which would
	 * cost a pass over the whole top at every publish (each record read is
	 * still checked, and the new overlay is verified at its load) */
	int top = !alone && into_top(c);
	const struct seg_info *old = alone ? NULL
				   : top ? (c->have_top ? &c->top : NULL)
					 : (c->have_ov ? &c->ov : NULL);
	shmkv *olddb = NULL, *lower = NULL;
	uint64_t added = 0;
	char out[PATH_MAX];
	overlay_tmp_path(L, c, "overlay.tmp", out, sizeof out);
	int err = old ? open_overlay(old, SHMKV_OPEN_NOVERIFY, top ? "current top" : "current",
				     &olddb, why, why_len)
		      : 0;
	if (!err && top)
		err = lower_mapped(c, &lower, why, why_len);
	if (!err && top)
		err = count_new(d, olddb, lower, &added, why, why_len);
	if (!err)
		err = build_merged(c->cur.path, d, olddb, old ? old->path : "", out, why, why_len);
	shmkv_close(olddb);
	if (!err)
		err = verify_overlay(c, out, why, why_len);
	struct seg_info first, more[SHMKV_CTL_MAX_SEGMENTS - 1];
	unsigned nmore = 0;
	if (!err)
		err = load_segments(L, c, out, &first, more, &nmore, why, why_len);
	unlink(out);
	/* durable: logged and synced before it is published (and acknowledged) */
	uint64_t undo = 0, seq = c->wal_seq + 1;
	int logged = 0;
	if (!err && L->durable_fd >= 0) {
		struct wal_head h;
		err = log_head(c, &h, why, why_len);
		if (!err)
			err = wal_append(L, c->name, &h, seq, flags, shmkv_header(d), d->size,
					 &undo, why, why_len);
		if (err)
			unlink_infos(&first, more, nmore);
		if (err && undo == WAL_UNCUT) {
			/* its bytes may be there, torn or whole: as after a
			 * wal_undo() that failed (below) */
			c->wal_seq = seq;
			if (!(how & PUB_REPLAY))
				overlay_log_reset(L, c->name);
		}
		logged = !err;
	}
	/* a lower rebuilt holds every changed key once */
	uint64_t keys = top ? c->ov_keys + added : first.entries;
	/* the state file publish_overlay() saves right after the publish
	 * says the record is in it: a restart replays it no more (a replay
	 * is one more publish, and `rollback` would step back that one) */
	uint64_t was_seq = c->wal_seq;
	if (logged)
		c->wal_seq = seq;
	if (!err)
		err = publish_overlay(L, c, top, &first, more, nmore, keys, why, why_len);
	if (err && logged) {
		if (wal_undo(L, c->name, undo) == 0)
			c->wal_seq = was_seq;
		else if (!(how & PUB_REPLAY))
			/* the record, never served, may still be there: its seq
			 * stays taken (the next record numbered as it would end
			 * the log at a replay, the changes after it acknowledged
			 * and lost), and the log is written anew from what is
			 * served, without it. A replay's log is set aside whole
			 * (recover_one) */
			overlay_log_reset(L, c->name);
	}
	return err;
}

/* Removes DURABLE/NAME.*.base.shmkv but those of checksum keep1, keep2. */
static void forget_kept(struct loader *L, const char *name, uint64_t keep1, uint64_t keep2)
{
	int fd = openat(L->durable_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	size_t nl = strlen(name);
	for (struct dirent *e; (e = readdir(d));) {
		const char *p = e->d_name;
		char *end;
		if (strncmp(p, name, nl) || p[nl] != '.')
			continue;
		unsigned long long sum = strtoull(p + nl + 1, &end, 16);
		if (end != p + nl + 17 || strcmp(end, ".base.shmkv"))
			continue;
		if (sum != keep1 && sum != keep2)
			unlinkat(fd, p, 0);
	}
	closedir(d);
}

void overlay_log_reset(struct loader *L, const char *name)
{
	struct cache *c = cache_find(L, name);
	if (L->durable_fd < 0)
		return;
	char why[600];
	/* dropped (a cache without a [cache] section is forgotten by its drop:
	 * its log and kept bases go all the same, else a restart would bring
	 * the cache back from them) */
	if (!c || !c->have_cur) {
		wal_retire(L, name, NULL, NULL, 0);
		forget_kept(L, name, 0, 0);
		return;
	}
	/* the overlays served, as records in their order: the lower, then
	 * the top (replayed in order, the top's word on a key wins) */
	struct wal_head h;
	shmkv *ov[2] = {NULL, NULL};
	struct wal_rec recs[2];
	size_t n = 0;
	const struct seg_info *lv[2] = {c->have_ov ? &c->ov : NULL,
					c->have_ov && c->have_top ? &c->top : NULL};
	int err = log_head(c, &h, why, sizeof why);
	for (int i = 0; i < 2 && !err && lv[i]; i++) {
		err = open_overlay(lv[i], SHMKV_OPEN_NOVERIFY, i ? "top" : "lower", &ov[i], why,
				   sizeof why);
		if (!err)
			recs[n++] = (struct wal_rec){c->wal_seq + 1 + (uint64_t)i,
						     shmkv_header(ov[i]), ov[i]->size, 0};
	}
	if (!err)
		err = wal_reset(L, name, &h, recs, n, why, sizeof why);
	shmkv_close(ov[0]);
	shmkv_close(ov[1]);
	if (err) {
		/* the log names the generation before: a reboot would bring back
		 * that one's changes over a base it may not find (then not at all) */
		log_err("durable log of cache=%s not rewritten for gen=%llu: %s", name,
			(unsigned long long)c->cur.generation, why);
		return;
	}
	if (n)
		c->wal_seq += n;
	c->wal_behind = 0;
	cache_save_state(L, c);
	/* compacted bases kept for the log: gone once neither the log's base
	 * nor the rollback's */
	uint64_t rb_sum = 0;
	shmkv *rb = NULL;
	char w[300];
	if (c->have_rb &&
	    shmkv_open_file_diag(c->rb.path, SHMKV_OPEN_NOVERIFY, &rb, w, sizeof w) == 0)
		rb_sum = shmkv_checksum(rb);
	shmkv_close(rb);
	forget_kept(L, name, h.base_sum, rb_sum);
}

/* The cache to change: loaded, adoptable. */
int overlay_changeable(struct loader *L, const char *name, struct cache **out, char **reply)
{
	struct cache *c = cache_find(L, name);
	*out = c;
	if (!c)
		return json_reply_no_cache(reply, name);
	if (c->broken || !c->have_cur || !c->ctl.map)
		return json_reply_error(reply, -ENOENT, "cache %s has no loaded image to change%s%s",
					name, c->last_error[0] ? ": " : "", c->last_error);
	return 0;
}

int overlay_refused(struct loader *L, struct cache *c, const char *what, int err,
		   const char *why, char **reply)
{
	char q[700];
	cache_set_error(L, c, "%s: %s", what, why);
	log_err("refused cache=%s %s error=%s", c->name, what, log_quote(q, sizeof q, why));
	return json_reply_error(reply, err, "%s %s: %s (the current generation keeps serving)",
				what, c->name, why);
}

static void changed(struct loader *L, struct cache *c, const char *what, uint64_t records)
{
	cache_save_state(L, c);
	int top = c->have_top;
	log_info("changed cache=%s gen=%llu by=%s records=%llu changes=%llu level=%s "
		 "overlay_records=%llu overlay_bytes=%llu file=%s", c->name,
		 (unsigned long long)c->cur.generation, what, (unsigned long long)records,
		 (unsigned long long)c->ov_keys, top ? "top" : "lower",
		 (unsigned long long)(top ? c->top.entries : c->ov.entries),
		 (unsigned long long)(top ? c->top.size : c->ov.size),
		 top ? c->top.path : c->ov.path);
	notify_status("cache %s: generation %llu (%s)", c->name,
		      (unsigned long long)c->cur.generation, what);
}

/* The delta of j's records in *out (a temporary file at img); 0 or an
 * error naming the line. */
static int build_changes(struct cache *c, const struct job *j, const char *img, shmkv **out,
			 char *why, size_t why_len)
{
	shmkv_builder *b;
	int err = delta_builder(c, j->stream ? SHMKV_DUP_LAST : SHMKV_DUP_ERROR, &b, why,
				why_len);
	if (err)
		return err;
	err = shmkv_builder_add_text(b, j->change, j->change_len, SHMKV_INPUT_JSONL, 0,
				     j->stream ? "stream" : "change",
				     j->stream ? j->first_line : 1);
	if (!err) {
		shmkv_build_stats st;
		err = shmkv_builder_finish(b, img, &st);
	}
	if (err)
		diag_fail(err, why, why_len, "%s", shmkv_builder_error(b));
	shmkv_builder_free(b);
	if (!err) {
		char w[300];
		err = shmkv_open_file_diag(img, 0, out, w, sizeof w);
		if (err)
			diag_fail(err, why, why_len, "%s", w);
	}
	if (!err && !j->stream && (*out)->entry_count != 1)
		err = diag_fail(-EINVAL, why, why_len, "a change is one JSONL record, not %llu",
				(unsigned long long)(*out)->entry_count);
	return err;
}

static char *reply_stream(const struct cache *c, const struct job *j, uint64_t records)
{
	struct json jj;
	json_init(&jj);
	json_bool(&jj, "ok", 1);
	json_str(&jj, "cache", c->name);
	json_u64(&jj, "generation", c->cur.generation);
	json_u64(&jj, "lines", j->lines);
	json_u64(&jj, "first_line", j->first_line);
	json_u64(&jj, "last_line", j->first_line + j->lines - 1);
	json_u64(&jj, "records", records);
	overlay_reply_fields(&jj, c);
	return json_finish(&jj);
}

int op_change(struct loader *L, const struct job *j, char **reply, char *why, size_t why_len)
{
	struct cache *c;
	int err = overlay_changeable(L, j->name, &c, reply);
	if (err)
		return err;
	char img[PATH_MAX];
	overlay_tmp_path(L, c, "change.tmp", img, sizeof img);
	shmkv *d = NULL;
	err = build_changes(c, j, img, &d, why, why_len);
	uint64_t records = d ? d->entry_count : 0;
	/* a batch of blank lines changes nothing: acknowledged, not published */
	if (!err && records)
		err = publish_changes(L, c, d, 0, 0, why, why_len);
	shmkv_close(d);
	unlink(img);
	const char *what = j->stream ? "stream" : "change";
	if (err) {
		if (!j->stream)
			return overlay_refused(L, c, what, err, why, reply);
		char w[700];
		snprintf(w, sizeof w, "%s; lines %llu-%llu were not published (lines before them "
			 "were), and the stream ends", why, (unsigned long long)j->first_line,
			 (unsigned long long)(j->first_line + j->lines - 1));
		return overlay_refused(L, c, what, err, w, reply);
	}
	if (records)
		changed(L, c, what, records);
	*reply = j->stream ? reply_stream(c, j, records) : reply_changed(c, 1);
	return 0;
}

int op_apply(struct loader *L, const char *name, const char *path, int nofollow, char **reply,
	     char *why, size_t why_len)
{
	struct cache *c;
	int err = overlay_changeable(L, name, &c, reply);
	if (err)
		return err;
	shmkv *d = NULL;
	char w[400];
	shmkv_delta_id id = {0};
	if (path[0] != '/')
		err = diag_fail(-EINVAL, why, why_len, "delta path must be absolute: \"%s\"", path);
	if (!err && nofollow) { /* a spool file: never through a link */
		int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			err = diag_fail(-errno, why, why_len, "%s: %s", path, strerror(errno));
		else
			close(fd);
	}
	/* untrusted: every check, the structure too */
	if (!err && (err = shmkv_open_file_diag(path, SHMKV_OPEN_DEEP, &d, w, sizeof w)))
		diag_fail(err, why, why_len, "%s", w);
	if (!err && shmkv_delta_id_of(d, &id))
		err = diag_fail(SHMKV_EBASE, why, why_len, "%s: an image, not a delta (load it "
				"with 'shmctl cache load')", path);
	shmkv *base = NULL;
	if (!err && (err = shmkv_open_file_diag(c->cur.path, SHMKV_OPEN_NOVERIFY, &base, w,
						sizeof w)))
		diag_fail(err, why, why_len, "base: %s", w);
	/* a delta of the cache's base, or, after a compaction, of the image the
	 * compacted base was made from (the same answers: loader/README.md,
	 * "Compaction") */
	int of_origin = c->origin_sum && id.base_checksum == c->origin_sum &&
			id.base_size == c->origin_size;
	if (!err && !of_origin &&
	    (id.base_checksum != shmkv_checksum(base) || id.base_size != base->size))
		err = diag_fail(SHMKV_EBASE, why, why_len,
				"%s applies to the image with checksum %016llx (%llu bytes), not "
				"the cache's base, %016llx (%llu bytes)%s", path,
				(unsigned long long)id.base_checksum,
				(unsigned long long)id.base_size,
				(unsigned long long)shmkv_checksum(base),
				(unsigned long long)base->size,
				c->origin_sum ? ", nor the image it was compacted from" : "");
	if (!err && (d->seed != base->seed || d->hash_bits != base->hash_bits))
		err = diag_fail(SHMKV_EBASE, why, why_len, "%s hashes with another seed or hash "
				"bits than the cache's base", path);
	if (!err && id.prev && (id.prev != c->chain_last || id.seq != c->chain_seq + 1))
		err = diag_fail(SHMKV_EBASE, why, why_len,
				"%s is delta %llu of a chain, following %016llx; the last delta "
				"applied to %s is %s%016llx (seq %llu): apply the chain in order",
				path, (unsigned long long)id.seq, (unsigned long long)id.prev, name,
				c->chain_last ? "" : "none, ", (unsigned long long)c->chain_last,
				(unsigned long long)c->chain_seq);
	shmkv_close(base);
	if (!err)
		err = publish_changes(L, c, d, WAL_APPLIED, 0, why, why_len);
	uint64_t records = d ? d->entry_count : 0;
	if (!err) {
		pthread_mutex_lock(&L->lock);
		c->chain_last = shmkv_checksum(d);
		c->chain_seq = id.seq;
		pthread_mutex_unlock(&L->lock);
	}
	shmkv_close(d);
	char what[PATH_MAX + 8];
	snprintf(what, sizeof what, "apply %s", path);
	if (err)
		return overlay_refused(L, c, what, err, why, reply);
	changed(L, c, what, records);
	*reply = reply_changed(c, records);
	return 0;
}

/* ---- folding the top into the lower (overlay.h) ---- */

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int op_fold(struct loader *L, const char *name)
{
	struct cache *c = cache_find(L, name);
	if (!c)
		return 0;
	c->fold_queued = 0;
	/* rolled back, loaded or compacted meanwhile: nothing due any more; a
	 * compaction queued meanwhile (a stream's batches went first) takes
	 * the top too */
	if (!overlay_fold_due(c) || c->compact_queued || c->broken || !c->ctl.map)
		return 0;
	uint64_t t0 = mono_ms(), top_records = c->top.entries, lower_records = c->ov.entries;
	char out[PATH_MAX], why[600];
	overlay_tmp_path(L, c, "fold.tmp", out, sizeof out);
	int err = overlay_merge_top(c, out, why, sizeof why);
	if (!err)
		err = verify_overlay(c, out, why, sizeof why);
	struct seg_info first, more[SHMKV_CTL_MAX_SEGMENTS - 1];
	unsigned nmore = 0;
	if (!err)
		err = load_segments(L, c, out, &first, more, &nmore, why, sizeof why);
	unlink(out);
	for (unsigned i = 0; !err && i < nmore; i++) /* one copy of an overlay */
		unlink(more[i].path);
	shmkv_ctl_segment cs[SHMKV_CTL_MAX_SEGMENTS];
	uint32_t n = 0;
	uint64_t gen = ctl_generation(&c->ctl) + 1;
	if (!err && (err = cache_gen_entries(&c->cur, c->cur_more, c->ncur_more, &first, NULL, cs,
					     &n, why, sizeof why)))
		unlink(first.path);
	if (!err) {
		/* the state names the new lower before it is published: a restart
		 * that finds it published knows a fold, not a change, came after
		 * the file (the rollback stays: adopt.c) */
		snprintf(c->fold_saved, sizeof c->fold_saved, "%s", first.path);
		err = cache_save_before_publish(L, c, "the folded lower", why, sizeof why);
		if (!err)
			err = ctl_publish_version(&c->ctl, SHMKV_PROTOCOL_VERSION_2, gen, cs, n,
						  why, sizeof why);
		c->fold_saved[0] = 0;
		if (err)
			unlink(first.path);
	}
	if (err) {
		/* nothing lost: the top keeps serving, folded by a later change */
		char q[700];
		cache_set_error(L, c, "fold: %s", why);
		log_err("fold of cache=%s failed (the top keeps serving) error=%s", c->name,
			log_quote(q, sizeof q, why));
		cache_save_state(L, c);
		return err;
	}
	PROBE(publish, c->name, gen, first.size, first.path);
	/* the same content: the rollback stays the generation before the last
	 * change (loader/README.md, "Writes"), the counts of changes too */
	struct seg_info old_ov = c->ov, old_top = c->top;
	uint64_t ms = mono_ms() - t0, old_gen = c->cur.generation;
	pthread_mutex_lock(&L->lock);
	/* a BPF export of the generation folded holds this one's content:
	 * current still, not exported again (bpf.c) */
	if (c->bpf.pinned && c->bpf.generation == old_gen)
		c->bpf.generation = gen;
	c->ov = first;
	c->ov.generation = gen;
	c->have_top = 0;
	c->ov_keys = first.entries;
	c->cur.generation = gen;
	for (unsigned i = 0; i < c->ncur_more; i++)
		c->cur_more[i].generation = gen;
	c->folds++;
	c->fold_unix = (uint64_t)time(NULL);
	c->fold_ms = ms;
	c->last_error[0] = 0;
	pthread_mutex_unlock(&L->lock);
	cache_save_state(L, c);
	cache_release(c, &old_ov);
	cache_release(c, &old_top);
	log_info("folded cache=%s gen=%llu top_records=%llu lower_records=%llu records=%llu "
		 "bytes=%llu ms=%llu file=%s", c->name, (unsigned long long)gen,
		 (unsigned long long)top_records, (unsigned long long)lower_records,
		 (unsigned long long)first.entries, (unsigned long long)first.size,
		 (unsigned long long)ms, first.path);
	return 0;
}

/* ---- durable mode: the logs replayed at start (wal.h) ---- */

void overlay_kept_base(const struct loader *L, const char *name, uint64_t sum, char *out,
		       size_t len)
{
	if ((size_t)snprintf(out, len, "%s/%s.%016llx.base.shmkv", L->durable, name,
			     (unsigned long long)sum) >= len)
		out[0] = 0; /* cannot happen: len leaves room for a name */
}

/* Whether the image at path is the base a durable log's head names. */
static int is_log_base(const char *path, const struct wal_head *h)
{
	shmkv *img = NULL;
	char why[300];
	int same = shmkv_open_file_diag(path, SHMKV_OPEN_NOVERIFY, &img, why, sizeof why) == 0 &&
		   shmkv_checksum(img) == h->base_sum && img->size == h->base_size;
	shmkv_close(img);
	return same;
}

/* The cache serving the base of a durable log's head h, or NULL. Served
 * already (adopted at a restart): that one. Else (a reboot) the base is
 * loaded: the compacted base kept beside the log, or the configured source,
 * whichever is that image, and *staged (op_load_staged()) when the cache
 * served nothing, so that readers never see it without the log's changes.
 * *fresh: loaded here, the whole log to replay. */
static struct cache *log_base(struct loader *L, const char *name, const struct wal_head *h,
			      int *fresh, int *staged, char *defer, size_t defer_len)
{
	struct cache *c = cache_find(L, name);
	struct wal_head now = {0};
	char why[600];
	*fresh = *staged = 0;
	defer[0] = 0;
	if (c && c->have_cur && log_head(c, &now, why, sizeof why) == 0 &&
	    now.base_sum == h->base_sum && now.base_size == h->base_size)
		return c;
	char kept[PATH_MAX + 80], src[PATH_MAX] = "";
	overlay_kept_base(L, name, h->base_sum, kept, sizeof kept);
	const struct cache_def *d = conf_find(L->conf, name);
	if (d && d->c.source[0])
		snprintf(src, sizeof src, "%s", d->c.source);
	const char *paths[2] = {kept, src};
	int serving = c && c->have_cur;
	for (int i = 0; i < 2; i++) {
		if (!paths[i][0] || !is_log_base(paths[i], h))
			continue;
		if (serving) {
			/* another base served (a compaction killed between its log
			 * and its publish): loaded with the log's records over it, as
			 * one publish (recover_one()), never alone */
			snprintf(defer, defer_len, "%s", paths[i]);
			*fresh = 1;
			return c;
		}
		char *reply = NULL;
		int nofollow = i == 0; /* the kept base is the loader's own file */
		int err = op_load_staged(L, name, paths[i], nofollow, &reply, why, sizeof why);
		free(reply);
		if (!err) {
			*fresh = 1;
			*staged = 1;
			return cache_find(L, name);
		}
		log_err("durable log of cache=%s: its base %s did not load: %s", name, paths[i],
			why);
	}
	log_err("durable log of cache=%s: its base %016llx (%llu bytes) is neither served nor "
		"kept as %s%s%s: its changes are not replayed", name,
		(unsigned long long)h->base_sum, (unsigned long long)h->base_size, kept,
		src[0] ? " nor the configured source " : "", src);
	return NULL;
}

/* A base loaded for a log (log_base()) published as it is, the log's
 * changes not replayed. */
static void publish_base_alone(struct loader *L, struct cache *c)
{
	char why[400];
	if (load_publish_staged(L, c, why, sizeof why))
		log_err("cache=%s: its base not published: %s", c->name, why);
}

/* Records recs[0..n) merged in order (the last word on a key wins) into one
 * delta of c's base at img; chain (last, seq) moved on by the deltas
 * applied among them. */
static int merge_records(struct loader *L, struct cache *c, const char *base,
			 const struct wal_rec *recs, size_t n, const char *img, uint64_t chain[2],
			 char *why, size_t why_len)
{
	shmkv_builder *b;
	int err = overlay_delta_builder(base, SHMKV_DUP_LAST, &b, why, why_len);
	char one[PATH_MAX];
	overlay_tmp_path(L, c, "replay.tmp", one, sizeof one);
	for (size_t i = 0; !err && i < n; i++) {
		shmkv *d = NULL;
		char w[400], what[64];
		int fd = open(one, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 || write(fd, recs[i].data, recs[i].len) != (ssize_t)recs[i].len)
			err = diag_fail(-errno ? -errno : -EIO, why, why_len, "%s: %s", one,
					strerror(errno));
		if (fd >= 0)
			close(fd);
		if (!err && (err = shmkv_open_file_diag(one, SHMKV_OPEN_DEEP, &d, w, sizeof w)))
			diag_fail(err, why, why_len, "record %llu: %s",
				  (unsigned long long)recs[i].seq, w);
		snprintf(what, sizeof what, "record %llu", (unsigned long long)recs[i].seq);
		if (!err)
			err = feed(b, d, what, why, why_len);
		shmkv_delta_id id;
		if (!err && (recs[i].flags & WAL_APPLIED) && shmkv_delta_id_of(d, &id) == 0) {
			chain[0] = shmkv_checksum(d); /* as op_apply() moves it */
			chain[1] = id.seq;
		}
		shmkv_close(d);
	}
	unlink(one);
	if (!err) {
		shmkv_build_stats st;
		err = shmkv_builder_finish(b, img, &st);
		if (err)
			diag_fail(err, why, why_len, "%s", shmkv_builder_error(b));
	}
	shmkv_builder_free(b);
	return err;
}

/* What deltas apply to after a replay: the log's origin, and the chain
 * where its records left it. */
static void take_lineage(struct loader *L, struct cache *c, const struct wal_head *h,
			 const uint64_t chain[2])
{
	pthread_mutex_lock(&L->lock);
	if (h->origin_sum) {
		c->origin_sum = h->origin_sum;
		c->origin_size = h->origin_size;
	}
	c->chain_last = chain[0];
	c->chain_seq = chain[1];
	pthread_mutex_unlock(&L->lock);
}

/* The log's base at base (not the one served) loaded and published with
 * the replayed records at img (NULL: none) over it, as one generation: a
 * compaction's publish finished, what deltas apply to the log head's
 * origin and the chain where its records left it, as compact.c publishes
 * (the state file the load saves before its publish carries them, for a
 * restart that finds it published). */
static int publish_with_base(struct loader *L, struct cache *c, const char *base,
			     const char *img, const struct wal_head *h, const uint64_t chain[2],
			     char *why, size_t why_len)
{
	struct seg_info low, more[SHMKV_CTL_MAX_SEGMENTS - 1];
	unsigned nmore = 0;
	int err = img ? overlay_verify(base, img, why, why_len) : 0;
	if (!err && img)
		err = load_segments(L, c, img, &low, more, &nmore, why, why_len);
	for (unsigned i = 0; !err && i < nmore; i++)
		unlink(more[i].path); /* one copy of an overlay serves every node */
	char *reply = NULL;
	if (!err && (err = op_load_compacted(L, c, base, img ? &low : NULL, h->origin_sum,
					     h->origin_size, chain[0], chain[1], &reply, why,
					     why_len)) && img)
		unlink(low.path);
	free(reply);
	return err;
}

/* The log set aside as NAME.wal.SUFFIX (or .SUFFIX.N: an older one there
 * is kept, wal.h): its name in kept, for the log line. */
static const char *set_aside(struct loader *L, const char *name, const char *suffix, char *kept,
			     size_t len)
{
	if (wal_retire(L, name, suffix, kept, len))
		snprintf(kept, len, "%s.wal (not renamed, logged)", name);
	return kept;
}

static void recover_one(struct loader *L, const char *name)
{
	struct wal_head h;
	struct wal_rec *recs = NULL;
	char *buf = NULL, why[700], kept[SHMKV_CACHE_NAME_MAX + 64];
	size_t n = 0;
	int err = wal_read(L, name, &h, &buf, &recs, &n, why, sizeof why);
	if (err) {
		if (err != -ENOENT) {
			set_aside(L, name, "bad", kept, sizeof kept);
			log_err("durable log of cache=%s unreadable, kept as %s: %s", name, kept,
				why);
		}
		free(buf);
		return;
	}
	struct cache *c = cache_find(L, name);
	if (c && c->have_cur && c->wal_behind) {
		/* a load or rollback was published (or about to be) and the
		 * loader died before the log followed it: the log names the
		 * generation before, whose records replayed over the one
		 * served (or its base loaded again) would step back from what
		 * readers were served. The generation served holds every change
		 * acknowledged: the log is written anew from it */
		free(recs);
		free(buf);
		overlay_log_reset(L, name);
		log_warn("durable log of cache=%s: written anew from gen=%llu, nothing replayed "
			 "(a load or rollback was published before the log followed it)", name,
			 (unsigned long long)c->cur.generation);
		return;
	}
	int fresh, staged;
	char defer[PATH_MAX];
	c = log_base(L, name, &h, &fresh, &staged, defer, sizeof defer);
	if (!c) {
		log_err("durable log of cache=%s: not replayed, kept as %s", name,
			set_aside(L, name, "stale", kept, sizeof kept));
		free(recs);
		free(buf);
		return;
	}
	/* the top overlay was gone at the adoption (adopt.c): the lower served
	 * holds the records up to one that nothing names (a fold leaves the
	 * log as it is), so every record is replayed over the base, and, as
	 * they hold every change since it, published as the lower alone (as
	 * a top they would repeat the whole lower under them) */
	int alone = c->top_lost && !fresh;
	c->top_lost = 0;
	/* an overlay served (adopted) holds the records up to wal_seq; without
	 * one (a reboot: the base loaded again) every record is replayed, from
	 * the chain position the log started at */
	uint64_t after = c->have_ov && !fresh && !alone ? c->wal_seq : 0;
	/* a change published after the state file was saved (adopt.c): its
	 * record, the log's last, and every one before it are served */
	if (c->wal_held && !fresh && !alone)
		after = UINT64_MAX;
	c->wal_held = 0;
	uint64_t chain[2] = {c->chain_last, c->chain_seq};
	if (fresh) {
		chain[0] = h.chain_last;
		chain[1] = h.chain_seq;
	}
	size_t first = 0;
	while (first < n && recs[first].seq <= after)
		first++;
	if (first < n) {
		char img[PATH_MAX];
		overlay_tmp_path(L, c, "change.tmp", img, sizeof img);
		shmkv *d = NULL;
		char w[300];
		err = merge_records(L, c, defer[0] ? defer : c->cur.path, recs + first, n - first,
				    img, chain, why, sizeof why);
		if (!err && (err = shmkv_open_file_diag(img, 0, &d, w, sizeof w)))
			diag_fail(err, why, sizeof why, "%s", w);
		if (!err && defer[0]) {
			err = publish_with_base(L, c, defer, img, &h, chain, why, sizeof why);
		} else if (!err) {
			/* what deltas apply to first: the publish appends its record
			 * to the log, whose head must keep naming them (wal_append
			 * starts a log anew for another head: killed before the log
			 * is written anew below, a reboot would have lost them), its
			 * seq after the log's last */
			uint64_t was[4] = {c->origin_sum, c->origin_size, c->chain_last, c->chain_seq};
			take_lineage(L, c, &h, chain);
			if (c->wal_seq < recs[n - 1].seq)
				c->wal_seq = recs[n - 1].seq;
			err = publish_changes(L, c, d, 0, PUB_REPLAY | (alone ? PUB_ALONE : 0), why,
					      sizeof why);
			if (err) { /* its records are not served */
				pthread_mutex_lock(&L->lock);
				c->origin_sum = was[0];
				c->origin_size = was[1];
				c->chain_last = was[2];
				c->chain_seq = was[3];
				pthread_mutex_unlock(&L->lock);
			}
		}
		uint64_t records = d ? d->entry_count : 0;
		shmkv_close(d);
		unlink(img);
		if (err) {
			log_err("durable log of cache=%s: replaying records %llu-%llu failed, the "
				"log is kept as %s: %s", name,
				(unsigned long long)recs[first].seq,
				(unsigned long long)recs[n - 1].seq,
				set_aside(L, name, "bad", kept, sizeof kept), why);
			if (staged)
				publish_base_alone(L, c);
			cache_set_error(L, c, "durable log not replayed: %s", why);
			free(recs);
			free(buf);
			return;
		}
		take_lineage(L, c, &h, chain);
		changed(L, c, "replay", records);
		snprintf(why, sizeof why, "replayed records %llu-%llu (%llu changes) as gen=%llu",
			 (unsigned long long)recs[first].seq, (unsigned long long)recs[n - 1].seq,
			 (unsigned long long)records, (unsigned long long)c->cur.generation);
	} else {
		if (defer[0] && (err = publish_with_base(L, c, defer, NULL, &h, chain, why,
							  sizeof why))) {
			log_err("durable log of cache=%s: its base %s did not load: %s", name, defer,
				why);
			free(recs);
			free(buf);
			return;
		}
		if (fresh) /* the log's head alone */
			take_lineage(L, c, &h, chain);
		if (staged)
			publish_base_alone(L, c);
		snprintf(why, sizeof why, "nothing to replay (gen=%llu serves its %zu records)",
			 (unsigned long long)c->cur.generation, n);
	}
	free(recs);
	free(buf);
	overlay_log_reset(L, name); /* one record: the overlay served */
	/* last: the line says recovery is over (the tests wait for it) */
	log_info("durable log of cache=%s: %s", name, why);
}

void overlay_recover(struct loader *L)
{
	char **names;
	size_t n;
	if (L->durable_fd < 0)
		return;
	int err = wal_list(L, &names, &n);
	if (err)
		log_err("durable_dir %s: %s", L->durable, strerror(-err));
	for (size_t i = 0; i < n; i++) {
		recover_one(L, names[i]);
		free(names[i]);
	}
	free(names);
	/* a generation served that no log holds (adopted by a loader durable
	 * for the first time, or its log set aside above): its log written
	 * from it, else the next change would start a log of its own record
	 * alone, and a reboot would give the base with only the changes
	 * after this start */
	for (size_t i = 0; i < L->ncaches; i++) {
		struct cache *c = L->caches[i];
		c->top_lost = 0; /* a log not replayed: its changes are lost, logged */
		if (!c->have_cur || !c->ctl.map || c->broken || wal_exists(L, c->name))
			continue;
		overlay_log_reset(L, c->name);
		log_info("durable log of cache=%s: written from gen=%llu (the cache had none)",
			 c->name, (unsigned long long)c->cur.generation);
	}
}
