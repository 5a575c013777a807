/* adopt.c - restart: adopt the control segments and segments of an earlier
 * loader with the same root, repair a publish a crash left open, and remove
 * orphaned segments and temporary files.
 *
 * Trust: ROOT must be a directory no other user can write, nor any directory
 * above it (else startup is refused: main.c, trustdir.h), so its names cannot
 * be swapped under us; every control segment
 * and segment file is checked (owner, mode, type) before it is used, and
 * files of other users are left alone (logged), whatever their name. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diag.h"
#include "loader.h"
#include "log.h"
#include "mounts.h"
#include "overlay.h"
#include "probes.h"
#include "state.h"

/* A segment file of this root found on disk. */
struct found {
	char path[SHMKV_CTL_PATH_MAX];
	char cache[SHMKV_CACHE_NAME_MAX + 1];
	uint64_t load_id;
	int loading;
};

struct scan {
	struct found *f;
	size_t n, cap;
	char dirs[24][PATH_MAX];
	size_t ndirs;
};

static void add_dir(struct scan *sc, const char *dir)
{
	for (size_t i = 0; i < sc->ndirs; i++)
		if (!strcmp(sc->dirs[i], dir))
			return;
	size_t len = strlen(dir);
	if (sc->ndirs < sizeof sc->dirs / sizeof sc->dirs[0] && len < PATH_MAX)
		memcpy(sc->dirs[sc->ndirs++], dir, len + 1); /* paths longer than PATH_MAX cannot exist */
}

/* Segment files of this root in dir (a segment directory, or a mount or
 * shm_dir where earlier versions put them), and segment directories in it.
 * Files of other users are logged and skipped: they neither count as load
 * ids, nor get adopted, nor get removed. */
static void scan_dir(struct loader *L, struct scan *sc, const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		struct found f;
		memset(&f, 0, sizeof f);
		if (seg_dir_trusted(dir, e->d_name)) {
			char sub[PATH_MAX];
			if ((size_t)snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name) < sizeof sub)
				add_dir(sc, sub);
			continue;
		}
		if (seg_parse(e->d_name, L->prefix, f.cache, sizeof f.cache, &f.load_id, &f.loading))
			continue;
		if ((size_t)snprintf(f.path, sizeof f.path, "%s/%s", dir, e->d_name) >= sizeof f.path)
			continue;
		struct stat st;
		char why[400], q[512];
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		if (seg_trust_stat(&st, f.path, 0, 0, why, sizeof why)) {
			log_warn("ignored file=%s: %s", f.path, log_quote(q, sizeof q, why));
			continue;
		}
		if (sc->n == sc->cap) {
			size_t cap = sc->cap ? sc->cap * 2 : 64;
			struct found *t = realloc(sc->f, cap * sizeof *t);
			if (!t)
				break;
			sc->f = t;
			sc->cap = cap;
		}
		sc->f[sc->n++] = f;
	}
	closedir(d);
}

static void dir_of(const char *path, char *out, size_t len)
{
	snprintf(out, len, "%s", path);
	char *s = strrchr(out, '/');
	if (s && s != out)
		*s = 0;
}

/* Whether the segment file at path is a delta image: an overlay of a
 * changed cache, never a base. */
static int is_overlay(const char *path)
{
	shmkv *db = NULL;
	char why[256];
	int delta = shmkv_open_file_diag(path, SHMKV_OPEN_NOVERIFY, &db, why, sizeof why) == 0 &&
		    shmkv_is_delta(db);
	shmkv_close(db);
	return delta;
}

/* The newest committed segment of a cache that checks out (repair): an
 * image, not an overlay (readers refuse a delta as the base; a change's
 * overlay is newer than its base). */
static int newest_valid(const struct scan *sc, const char *cache, struct seg_info *out)
{
	int found = 0;
	uint64_t best = 0;
	for (size_t i = 0; i < sc->n; i++) {
		const struct found *f = &sc->f[i];
		if (f->loading || strcmp(f->cache, cache) || (found && f->load_id <= best))
			continue;
		struct seg_info in;
		char why[256];
		if (seg_inspect(f->path, &in, why, sizeof why) == 0 && !is_overlay(f->path)) {
			*out = in;
			best = f->load_id;
			found = 1;
		}
	}
	return found;
}

/* ROOT/NAME.ctl is ours: ROOT is trusted (adopt_all), so an lstat cannot be
 * raced, and ctl_open() then never opens a FIFO or another user's file. */
static int ctl_trusted(struct loader *L, const char *name, char *why, size_t why_len)
{
	char path[PATH_MAX];
	struct stat st;
	if ((size_t)snprintf(path, sizeof path, "%s/%s.ctl", L->root, name) >= sizeof path)
		return diag_fail(-ENAMETOOLONG, why, why_len, "%s: path too long", L->root);
	if (fstatat(L->root_fd, strrchr(path, '/') + 1, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return diag_fail(-errno, why, why_len, "%s: %s", path, strerror(errno));
	return seg_trust_stat(&st, path, 0, 0, why, why_len);
}

/* ROOT/NAME.state, when it is a regular file of ours that only we can write
 * (O_NOFOLLOW|O_NONBLOCK: a symlink or FIFO there neither redirects nor
 * blocks the start); else it is ignored, with a warning, as if absent. */
static void adopt_state(struct loader *L, struct cache *c)
{
	char path[PATH_MAX], why[PATH_MAX + 128], q[PATH_MAX + 256];
	int fd = -1, err = 0;
	struct stat st;
	if ((size_t)snprintf(path, sizeof path, "%s/%s.state", L->root, c->name) >= sizeof path)
		err = diag_fail(-ENAMETOOLONG, why, sizeof why, "%s: path too long", L->root);
	else if ((fd = openat(L->root_fd, strrchr(path, '/') + 1,
			      O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0) {
		if (errno == ENOENT)
			return;
		err = diag_fail(-errno, why, sizeof why, "%s: %s", path, strerror(errno));
	} else if (fstat(fd, &st) != 0)
		err = diag_fail(-errno, why, sizeof why, "%s: %s", path, strerror(errno));
	else
		err = seg_trust_stat(&st, path, 0, 0, why, sizeof why);
	if (err) {
		log_warn("state ignored cache=%s error=%s", c->name, log_quote(q, sizeof q, why));
		if (fd >= 0)
			close(fd);
		return;
	}
	state_read(fd, c);
}
/* Whether the scan found path as a complete segment file of cache. */
static int found_for(const struct scan *sc, const char *cache, const char *path)
{
	for (size_t i = 0; i < sc->n; i++)
		if (!sc->f[i].loading && !strcmp(sc->f[i].cache, cache) &&
		    !strcmp(sc->f[i].path, path))
			return 1;
	return 0;
}

/* The rollback's replicas (numa=replicate) that the state file names: each
 * must be one of this cache's complete segment files in a trusted segment
 * directory (so a later drop unlinks nothing else), trusted itself, of the
 * rollback's size, and neither published nor named twice; one that is not
 * is left out (and swept as an orphan), so the rollback is republished with
 * the copies it still has. */
static void adopt_rb_more(const struct scan *sc, struct cache *c, const struct seg_info *hint,
			  unsigned n)
{
	char why[400], q[512];
	for (unsigned k = 0; k < n && k < SHMKV_CTL_MAX_SEGMENTS - 1; k++) {
		struct seg_info ri;
		int err = found_for(sc, c->name, hint[k].path)
				  ? 0
				  : diag_fail(-ENOENT, why, sizeof why,
					      "%s: not a segment file of this cache", hint[k].path);
		if (!err)
			err = seg_inspect(hint[k].path, &ri, why, sizeof why);
		if (!err && ri.size != c->rb.size)
			err = diag_fail(SHMKV_ECORRUPT, why, sizeof why,
					  "%s: %llu bytes, the rollback is %llu", hint[k].path,
					  (unsigned long long)ri.size,
					  (unsigned long long)c->rb.size);
		for (unsigned j = 0; !err && j <= c->ncur_more; j++) {
			const char *p = j ? c->cur_more[j - 1].path : c->cur.path;
			if ((j || c->have_cur) && !strcmp(p, ri.path))
				err = diag_fail(-EEXIST, why, sizeof why, "%s: published", p);
		}
		for (unsigned j = 0; !err && j <= c->nrb_more; j++) {
			const char *p = j ? c->rb_more[j - 1].path : c->rb.path;
			if (!strcmp(p, ri.path))
				err = diag_fail(-EEXIST, why, sizeof why, "%s: named twice", p);
		}
		if (err) {
			log_warn("cache=%s: rollback replica %u not adopted: %s", c->name, k + 1,
				 log_quote(q, sizeof q, why));
			continue;
		}
		ri.generation = c->rb.generation;
		ri.node = hint[k].node;
		c->rb_more[c->nrb_more++] = ri;
	}
}

/* The published segment seg and its replicas (count in all) as the control
 * segment names them, generation gen: returns 1 if seg is usable, c->cur and
 * c->cur_more then holding it and its usable replicas; sets *lost if a
 * replica is not. */
static int adopt_published(struct cache *c, const char *name, const shmkv_ctl_segment *seg,
			   uint32_t count, uint64_t gen, int *lost, char *why, size_t why_len)
{
	struct seg_info in;
	int err = seg_inspect(seg->path, &in, why, why_len);
	if (!err && in.size != seg->size)
		err = diag_fail(SHMKV_ECORRUPT, why, why_len,
				  "%s: image is %llu bytes, the control segment says %llu",
				  seg->path, (unsigned long long)in.size,
				  (unsigned long long)seg->size);
	if (err) {
		log_err("cache=%s: published segment unusable: %s", name, why);
		return 0;
	}
	c->cur = in;
	c->cur.generation = gen;
	/* as published: verified by the load that published it */
	c->cur.node = seg->node >= 0 && seg->node < 64 ? seg->node : -1;
	c->have_cur = 1;
	/* its replicas (numa=replicate); one that is gone or bad is left
	 * out by the repair */
	for (uint32_t k = 1; k < count && k < SHMKV_CTL_MAX_SEGMENTS; k++) {
		shmkv_ctl_segment rs;
		memcpy(&rs, (const void *)&c->ctl.map->segments[k], sizeof rs);
		rs.path[SHMKV_CTL_PATH_MAX - 1] = 0;
		if (rs.flags & SHMKV_SEG_OVERLAY) { /* protocol 2: an overlay (overlay.c) */
			int top = (rs.flags & SHMKV_SEG_TOP) != 0;
			if (top ? c->have_top : c->have_ov)
				continue; /* this loader publishes one copy of each */
			struct seg_info oi;
			int oerr = seg_inspect(rs.path, &oi, why, why_len);
			if (!oerr && oi.size != rs.size)
				oerr = diag_fail(SHMKV_ECORRUPT, why, why_len,
						 "%s: image is %llu bytes, the control segment says "
						 "%llu", rs.path, (unsigned long long)oi.size,
						 (unsigned long long)rs.size);
			if (oerr) {
				/* served without it: its changes are lost, said loudly */
				log_err("cache=%s: published %s overlay unusable, the changes %s "
					"are lost: %s", name, top ? "top" : "lower",
					top ? "it holds" : "since the base", why);
				*lost = 1;
				c->top_lost |= top; /* the durable log gives them back */
				continue;
			}
			oi.generation = gen;
			if (top) {
				c->top = oi;
				c->have_top = 1;
			} else {
				c->ov = oi;
				c->have_ov = 1;
			}
			continue;
		}
		struct seg_info ri;
		int rerr = seg_inspect(rs.path, &ri, why, why_len);
		if (!rerr && ri.size != seg->size)
			rerr = diag_fail(SHMKV_ECORRUPT, why, why_len,
					 "%s: image is %llu bytes, the published segment is %llu",
					 rs.path, (unsigned long long)ri.size,
					 (unsigned long long)seg->size);
		if (rerr) {
			log_err("cache=%s: replica %u unusable: %s", name, k, why);
			*lost = 1;
			continue;
		}
		ri.generation = gen;
		ri.node = rs.node >= 0 && rs.node < 64 ? rs.node : -1;
		c->cur_more[c->ncur_more++] = ri;
	}
	if (c->have_top && !c->have_ov) {
		/* a top read alone would not be the cache (its lower is lost, or
		 * a generation of another writer): the base serves alone */
		log_err("cache=%s: a top overlay published without a usable lower one, the "
			"changes since the base are lost", name);
		c->have_top = 0;
		*lost = 1;
	}
	return 1;
}

/* The generation the state file names (its base and overlays), as c->cur,
 * c->ov and c->top, where each is a complete segment file of this cache
 * that checks out, the base an image and the overlays delta images: 1,
 * else 0 (nothing set). For a control segment that names no usable
 * generation: a drop, or the replacement of the file (a cache's first
 * change), killed after it retired the file (no segment then); the state
 * file was saved after the last publish the loader finished. */
static int adopt_saved(const struct scan *sc, struct cache *c, const char *name)
{
	const char *p[3] = {c->base_saved, c->ov_saved, c->top_saved};
	struct seg_info s[3];
	char why[400];
	if (!p[0][0] || (p[2][0] && !p[1][0]))
		return 0;
	for (int i = 0; i < 3; i++)
		if (p[i][0] && (!found_for(sc, name, p[i]) || seg_inspect(p[i], &s[i], why, sizeof why) ||
				is_overlay(p[i]) != (i > 0)))
			return 0;
	c->cur = s[0];
	c->have_cur = 1;
	c->ncur_more = 0; /* its replicas are not in the file */
	if ((c->have_ov = p[1][0] != 0))
		c->ov = s[1];
	if ((c->have_top = p[2][0] != 0))
		c->top = s[2];
	return 1;
}

/* A publish a crash left open (odd), a published file that is gone or bad
 * (gen but not valid) or a lost replica: publishes generation gen + 1 with
 * the best there is (the segment itself, the generation the state file
 * names (saved: adopt_saved() set it), the newest complete one, the
 * rollback segment, or none). */
static void adopt_repair(struct scan *sc, struct cache *c, const char *name, uint64_t gen,
			 int odd, int valid, int saved, int lost, char *why, size_t why_len)
{
	struct seg_info in;
	const char *how;
	if (saved) {
		how = "republished the generation the state file names";
	} else if (!valid && newest_valid(sc, name, &in)) {
		c->cur = in;
		c->have_cur = 1;
		c->ncur_more = 0;
		if (c->have_rb && !strcmp(c->rb.path, in.path))
			c->have_rb = 0;
		how = "republished the newest complete segment";
	} else if (!valid && c->have_rb) {
		c->cur = c->rb;
		c->have_cur = 1;
		c->have_rb = 0;
		memcpy(c->cur_more, c->rb_more, sizeof c->cur_more);
		c->ncur_more = c->nrb_more;
		c->nrb_more = 0;
		how = "published the rollback segment";
	} else {
		how = valid ? (lost ? "republished without the replicas that are gone"
				    : "republished its segment")
			    : "no usable segment: published none";
	}
	uint64_t ng = gen + 1;
	if (c->have_cur) {
		shmkv_ctl_segment cs[SHMKV_CTL_MAX_SEGMENTS];
		uint32_t ncs = 0;
		if (!valid && !saved)
			c->have_ov = 0;
		c->have_top = c->have_top && c->have_ov;
		/* as published before: the overlays fitted then */
		if (cache_gen_entries(&c->cur, c->cur_more, c->ncur_more,
				      c->have_ov ? &c->ov : NULL, c->have_top ? &c->top : NULL, cs,
				      &ncs, why, why_len)) {
			log_err("cache=%s: %s; republished without its changes", name, why);
			c->have_ov = c->have_top = 0;
			ncs = cache_ctl_entries(&c->cur, c->cur_more, c->ncur_more, cs);
		}
		c->ov.generation = c->top.generation = ng;
		if (ctl_publish(&c->ctl, ng, cs, ncs, why, why_len))
			log_err("cache=%s: repair not published: %s", name, why);
		c->cur.generation = ng;
		for (unsigned k = 0; k < c->ncur_more; k++)
			c->cur_more[k].generation = ng;
		PROBE(publish, name, ng, c->cur.size, c->cur.path);
	} else {
		if (ctl_publish(&c->ctl, ng, NULL, 0, why, why_len))
			log_err("cache=%s: repair not published: %s", name, why);
		PROBE(publish, name, ng, (uint64_t)0, "");
	}
	log_warn("repaired cache=%s gen=%llu: control segment was %s; %s", name,
		 (unsigned long long)ng, odd ? "mid-publish (seq odd)"
				     : !valid ? "naming a bad file" : "naming a bad replica",
		 how);
}

/* A generation published after the state file was saved (a kill before
 * the loader saved it again: the change, load, rollback or compaction went
 * through, the file did not): the one the file describes is its rollback.
 * A rollback published so (the file's rollback is served) swaps the two
 * generations' figures too. A fold published so (the file names the lower
 * it was about to publish, now served over the same base without a top)
 * changed no content and keeps the file's rollback. Else the hints stand. */
static void published_after_state(struct cache *c, uint64_t gen, struct seg_info *rb_hint,
				  struct seg_info *rbov_hint, struct seg_info *rbtop_hint,
				  unsigned *nrb_more_hint)
{
	const char *ov = c->have_ov ? c->ov.path : "", *top = c->have_top ? c->top.path : "";
	if (!c->base_saved[0] || (!strcmp(c->base_saved, c->cur.path) &&
				  !strcmp(c->ov_saved, ov) && !strcmp(c->top_saved, top)))
		return;
	if (c->fold_saved[0] && !strcmp(c->base_saved, c->cur.path) &&
	    !strcmp(c->fold_saved, ov) && !c->have_top) {
		log_warn("cache=%s: gen=%llu, a fold, was published after the state file was "
			 "saved: its rollback stays", c->name, (unsigned long long)gen);
		return;
	}
	int rollback = rb_hint->path[0] && !strcmp(rb_hint->path, c->cur.path) &&
		       !strcmp(rbov_hint->path, ov) && !strcmp(rbtop_hint->path, top);
	/* the same base with other overlays, no rollback: a change, whose
	 * record the durable log got before its publish (overlay.c) */
	if (!rollback && !strcmp(c->base_saved, c->cur.path))
		c->wal_held = 1;
	struct load_stats st = c->stats;
	uint64_t chain_last = c->chain_last, chain_seq = c->chain_seq;
	uint64_t origin_sum = c->origin_sum, origin_size = c->origin_size;
	if (rollback) {
		c->stats = c->rb_stats;
		c->chain_last = c->rb_chain_last;
		c->chain_seq = c->rb_chain_seq;
		c->origin_sum = c->rb_origin_sum;
		c->origin_size = c->rb_origin_size;
	}
	c->rb_stats = st;
	c->rb_chain_last = chain_last;
	c->rb_chain_seq = chain_seq;
	c->rb_origin_sum = origin_sum;
	c->rb_origin_size = origin_size;
	if (!rollback && strcmp(c->base_saved, c->cur.path) &&
	    strcmp(c->compact_saved, c->cur.path) && (c->origin_sum || c->chain_last)) {
		/* another base, not the compaction's the file named: a load's,
		 * whose deltas apply to it alone (load.c), not the file's */
		log_warn("cache=%s: gen=%llu, a loaded base, was published after the state file "
			 "was saved: deltas apply to it alone (the file's origin and chain are "
			 "its rollback's)", c->name, (unsigned long long)gen);
		c->origin_sum = c->origin_size = 0;
		c->chain_last = c->chain_seq = 0;
	}
	memset(rb_hint, 0, sizeof *rb_hint);
	snprintf(rb_hint->path, sizeof rb_hint->path, "%s", c->base_saved);
	rb_hint->generation = gen - 1;
	rb_hint->node = -1; /* not known: not pinned */
	*nrb_more_hint = 0;  /* its replicas are not in the file */
	snprintf(rbov_hint->path, sizeof rbov_hint->path, "%s", c->ov_saved);
	snprintf(rbtop_hint->path, sizeof rbtop_hint->path, "%s", c->top_saved);
	log_warn("cache=%s: gen=%llu was published after the state file was saved: its "
		 "rollback is the generation the file describes (%s%s%s%s%s)", c->name,
		 (unsigned long long)gen, c->base_saved, c->ov_saved[0] ? " with " : "",
		 c->ov_saved, c->top_saved[0] ? " and " : "", c->top_saved);
}

static void adopt_one(struct loader *L, struct scan *sc, const char *name)
{
	char why[400], q[512], mem[32];
	struct cache *c;
	if (cache_add(L, name, &c)) {
		log_err("out of memory");
		return;
	}
	int err = ctl_trusted(L, name, why, sizeof why);
	if (!err)
		err = ctl_open(L->root_fd, L->root, name, &c->ctl, why, sizeof why);
	if (!err)
		cache_note_protocol(L, c);
	if (err) {
		c->broken = 1;
		cache_set_error(L, c, "%s", why);
		log_err("cannot adopt cache=%s error=%s", name, log_quote(q, sizeof q, why));
		return;
	}
	adopt_state(L, c);
	struct seg_info rb_hint = c->rb, rb_more_hint[SHMKV_CTL_MAX_SEGMENTS - 1];
	unsigned nrb_more_hint = c->nrb_more;
	memcpy(rb_more_hint, c->rb_more, sizeof rb_more_hint);
	memset(&c->rb, 0, sizeof c->rb);
	c->nrb_more = 0;
	for (size_t i = 0; i < sc->n; i++)
		if (!strcmp(sc->f[i].cache, name) && sc->f[i].load_id >= c->next_load)
			c->next_load = sc->f[i].load_id + 1;

	/* the published state; no reader writes it and no loader runs (root lock) */
	shmkv_ctl_segment seg;
	memcpy(&seg, (const void *)&c->ctl.map->segments[0], sizeof seg);
	seg.path[SHMKV_CTL_PATH_MAX - 1] = 0;
	uint64_t gen = ctl_generation(&c->ctl);
	uint32_t count = c->ctl.map->segment_count;
	int odd = ctl_seq_odd(&c->ctl), valid = 0, lost = 0;
	if (gen && count >= 1)
		valid = adopt_published(c, name, &seg, count, gen, &lost, why, sizeof why);
	struct seg_info in, rbov_hint = c->rbov, rbtop_hint = c->rbtop;
	memset(&c->rbov, 0, sizeof c->rbov);
	memset(&c->rbtop, 0, sizeof c->rbtop);
	if (valid)
		published_after_state(c, gen, &rb_hint, &rbov_hint, &rbtop_hint, &nrb_more_hint);
	if (lost) /* not the generation published: the log gives back what it lost */
		c->wal_held = 0;
	/* the control segment names no segment (retired by a drop or by a
	 * replacement the loader died in): the state file's generation, as it
	 * was; a file naming one that is gone or bad is repaired as before */
	int saved = gen && !count && !odd && adopt_saved(sc, c, name);
	c->base_saved[0] = c->ov_saved[0] = c->top_saved[0] = c->fold_saved[0] = 0;
	c->compact_saved[0] = 0;
	if (rb_hint.path[0] && (valid || saved) && !strcmp(rb_hint.path, c->cur.path)) {
		/* a change was the last publish: the rollback is the same base */
		c->rb = c->cur;
		c->rb.generation = rb_hint.generation;
		memcpy(c->rb_more, c->cur_more, sizeof c->rb_more);
		c->nrb_more = c->ncur_more;
		c->have_rb = 1;
	} else if (rb_hint.path[0] && (!(valid || saved) || strcmp(rb_hint.path, c->cur.path)) &&
	    seg_inspect(rb_hint.path, &in, why, sizeof why) == 0) {
		c->rb = in;
		c->rb.generation = rb_hint.generation;
		c->rb.node = rb_hint.node; /* as verified when it was loaded */
		c->have_rb = 1;
		adopt_rb_more(sc, c, rb_more_hint, nrb_more_hint);
	}
	/* its overlays: the lower, and a top over it only */
	const struct seg_info *want[2] = {&rbov_hint, &rbtop_hint};
	for (int i = 0; i < 2 && c->have_rb && want[i]->path[0]; i++) {
		if (!found_for(sc, name, want[i]->path) ||
		    seg_inspect(want[i]->path, &in, why, sizeof why) != 0) {
			/* the rollback without it is not that generation: none rather
			 * than one that loses its changes */
			log_warn("cache=%s: the rollback's %s overlay %s is gone: no rollback", name,
				 i ? "top" : "lower", want[i]->path);
			c->have_rb = c->have_rbov = c->have_rbtop = 0;
			c->nrb_more = 0;
			break;
		}
		*(i ? &c->rbtop : &c->rbov) = in;
		*(i ? &c->have_rbtop : &c->have_rbov) = 1;
	}
	/* no overlay served: no chain continues, unless a compaction made the
	 * base (it keeps the chain of the image it started from) */
	if (!c->have_ov && !c->origin_sum)
		c->chain_last = c->chain_seq = c->changes = 0;
	if (odd || (gen && !valid) || lost)
		adopt_repair(sc, c, name, gen, odd, valid, saved, lost, why, sizeof why);
	/* the keys changed, as the publishes that made them counted */
	if (c->have_cur && c->have_ov)
		c->ov_keys = overlay_keys(&c->ov, c->have_top ? &c->top : NULL);
	if (c->have_rb && c->have_rbov)
		c->rb_ov_keys = overlay_keys(&c->rbov, c->have_rbtop ? &c->rbtop : NULL);
	if (c->have_cur)
		log_info("adopted cache=%s gen=%llu bytes=%llu entries=%llu memory=%s file=%s%s%s",
			 name, (unsigned long long)c->cur.generation,
			 (unsigned long long)c->cur.size, (unsigned long long)c->cur.entries,
			 mem_kind_name(c->cur.flags, c->cur.page_size, mem, sizeof mem), c->cur.path,
			 c->have_rb ? " rollback=" : "", c->have_rb ? c->rb.path : "");
	else
		log_info("adopted cache=%s gen=%llu: nothing published", name,
			 (unsigned long long)ctl_generation(&c->ctl));
	PROBE(adopt, name, ctl_generation(&c->ctl), c->have_cur, c->have_cur ? c->cur.size : 0);
	cache_save_state(L, c);
}

static int kept(struct loader *L, const struct found *f)
{
	for (size_t i = 0; i < L->ncaches; i++) {
		const struct cache *c = L->caches[i];
		if (strcmp(c->name, f->cache))
			continue;
		if (c->broken)
			return 1; /* not ours to judge: its control segment is unreadable */
		/* a copy of the base, a replica (numa=replicate) or an overlay
		 * of a generation kept, current or rollback */
		if (cache_names(c, f->path))
			return 1;
	}
	return 0;
}

int adopt_all(struct loader *L, char *why_out, size_t why_out_len)
{
	/* ROOT and the spool were opened by their whole chain (main.c, trustdir.h) */
	(void)why_out;
	(void)why_out_len;
	seg_set_dir_group(L->conf->gid);
	struct scan sc;
	memset(&sc, 0, sizeof sc);
	struct hmount m[16];
	size_t nm = 0;
	add_dir(&sc, L->conf->shm_dir);
	if (mounts_hugetlb(m, 16, &nm, "") == 0)
		for (size_t i = 0; i < nm; i++)
			add_dir(&sc, m[i].dir);
	/* directories named by the control segments, which may differ from today's config */
	int rfd = openat(L->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = rfd >= 0 ? fdopendir(rfd) : NULL;
	if (!d && rfd >= 0)
		close(rfd);
	struct dirent *e;
	char names[1024][SHMKV_CACHE_NAME_MAX + 1];
	size_t nn = 0;
	while (d && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		char path[PATH_MAX];
		if ((size_t)snprintf(path, sizeof path, "%s/%s", L->root, e->d_name) >= sizeof path)
			continue;
		if (e->d_name[0] == '.' && n > 4 && !strcmp(e->d_name + n - 4, ".tmp")) {
			if (unlinkat(L->root_fd, e->d_name, 0) == 0)
				log_info("removed leftover file=%s", path);
			continue;
		}
		if (n <= 4 || strcmp(e->d_name + n - 4, ".ctl") || n - 4 > SHMKV_CACHE_NAME_MAX)
			continue;
		char name[SHMKV_CACHE_NAME_MAX + 1];
		memcpy(name, e->d_name, n - 4);
		name[n - 4] = 0;
		if (shmkv_name_check(name) != 0)
			continue;
		if (nn == sizeof names / sizeof names[0]) {
			log_err("more than %zu caches under %s: %s not adopted", nn, L->root, name);
			continue;
		}
		memcpy(names[nn++], name, sizeof name);
		struct ctl tmp;
		char why[256];
		if (ctl_trusted(L, name, why, sizeof why) == 0 &&
		    ctl_open(L->root_fd, L->root, name, &tmp, why, sizeof why) == 0) {
			char dir[PATH_MAX];
			char p[SHMKV_CTL_PATH_MAX];
			/* every copy's directory: replicas may sit in other mounts */
			for (unsigned k = 0; k < SHMKV_CTL_MAX_SEGMENTS; k++) {
				memcpy(p, (const void *)tmp.map->segments[k].path, sizeof p);
				p[sizeof p - 1] = 0;
				if (p[0] == '/') {
					dir_of(p, dir, sizeof dir);
					add_dir(&sc, dir);
				}
			}
			ctl_close(&tmp);
		}
	}
	if (d)
		closedir(d);
	for (size_t i = 0; i < sc.ndirs; i++)
		scan_dir(L, &sc, sc.dirs[i]);
	for (size_t i = 0; i < nn; i++)
		adopt_one(L, &sc, names[i]);
	/* segment files of caches that have no ctl: only their load ids matter */
	for (size_t i = 0; i < sc.n; i++) {
		const struct found *f = &sc.f[i];
		if (kept(L, f))
			continue;
		if (unlink(f->path) == 0)
			log_info("removed orphan cache=%s file=%s (%s)", f->cache, f->path,
				 f->loading ? "load interrupted" : "not published, not the rollback");
		else if (errno != ENOENT)
			log_warn("cannot remove orphan file=%s: %s", f->path, strerror(errno));
	}
	free(sc.f);
	return 0;
}
