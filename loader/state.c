/* state.c - the per-cache state file (see state.h). */
#include "state.h"

#include "diag.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put_stats(FILE *f, const char *pfx, const struct load_stats *s)
{
	fprintf(f, "%s.source=%s\n%s.ms=%" PRIu64 "\n%s.alloc_ms=%" PRIu64 "\n%s.gbps=%.3f\n"
		"%s.direct=%d\n%s.note=%s\n", pfx, s->source, pfx, s->ms, pfx, s->alloc_ms, pfx,
		s->gbps, pfx, s->direct, pfx, s->note);
}

int state_write(int root_fd, const char *root, const struct cache *c, char *why,
		size_t why_len)
{
	char path[PATH_MAX], tmp[PATH_MAX], name[SHMKV_CACHE_NAME_MAX + 8],
		tname[SHMKV_CACHE_NAME_MAX + 16];
	snprintf(path, sizeof path, "%s/%s.state", root, c->name);
	snprintf(tmp, sizeof tmp, "%s/.%s.state.tmp", root, c->name);
	snprintf(name, sizeof name, "%s.state", c->name);
	snprintf(tname, sizeof tname, ".%s.state.tmp", c->name);
	/* through ROOT's descriptor (trustdir.h), never its path again */
	int fd = openat(root_fd, tname, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		int err = -errno;
		return diag_fail(err, why, why_len, "%s: %s", tmp, strerror(-err));
	}
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlinkat(root_fd, tname, 0);
		return diag_fail(-ENOMEM, why, why_len, "out of memory");
	}
	fprintf(f, "# shmkv-loader state of cache %s; written by the loader, do not edit\n",
		c->name);
	fprintf(f, "next_load=%" PRIu64 "\n", c->next_load);
	put_stats(f, "cur", &c->stats);
	/* changes (overlay.c): the overlays themselves are named by the
	 * control segment; the chain position and counts are kept here */
	fprintf(f, "changes=%" PRIu64 "\nchain.last=%" PRIu64 "\nchain.seq=%" PRIu64 "\n",
		c->changes, c->chain_last, c->chain_seq);
	fprintf(f, "origin.sum=%" PRIu64 "\norigin.size=%" PRIu64 "\nwal.seq=%" PRIu64 "\n",
		c->origin_sum, c->origin_size, c->wal_seq);
	/* a load or rollback about to publish (or published) before the
	 * durable log follows it: a restart writes the log anew (overlay.c) */
	if (c->wal_behind)
		fprintf(f, "wal.behind=1\n");
	/* a restart that finds another generation published knows it was
	 * published after this file, and that this one is its rollback
	 * (adopt.c) */
	if (c->have_cur)
		fprintf(f, "base.path=%s\nov.path=%s\ntop.path=%s\n", c->cur.path,
			c->have_ov ? c->ov.path : "", c->have_ov && c->have_top ? c->top.path : "");
	/* a fold about to publish this lower (overlay.c): found published,
	 * the generation above is this one folded, and its rollback stands */
	if (c->fold_saved[0])
		fprintf(f, "fold.path=%s\n", c->fold_saved);
	/* a compaction about to publish this base (load.c): found published,
	 * it keeps this file's origin and chain; any other base a load's */
	if (c->compact_saved[0])
		fprintf(f, "compact.path=%s\n", c->compact_saved);
	if (c->have_rb) {
		fprintf(f, "rb.path=%s\nrb.generation=%" PRIu64 "\nrb.node=%d\n", c->rb.path,
			c->rb.generation, (int)c->rb.node);
		/* its replicas (numa=replicate): adopted with it at a restart */
		for (unsigned k = 0; k < c->nrb_more && k < SHMKV_CTL_MAX_SEGMENTS - 1; k++)
			fprintf(f, "rb.more.%u.path=%s\nrb.more.%u.node=%d\n", k,
				c->rb_more[k].path, k, (int)c->rb_more[k].node);
		put_stats(f, "rb", &c->rb_stats);
		if (c->have_rbov)
			fprintf(f, "rbov.path=%s\n", c->rbov.path);
		if (c->have_rbov && c->have_rbtop)
			fprintf(f, "rbtop.path=%s\n", c->rbtop.path);
		fprintf(f, "rb.chain.last=%" PRIu64 "\nrb.chain.seq=%" PRIu64 "\n",
			c->rb_chain_last, c->rb_chain_seq);
		fprintf(f, "rb.origin.sum=%" PRIu64 "\nrb.origin.size=%" PRIu64 "\n",
			c->rb_origin_sum, c->rb_origin_size);
	}
	int bad = ferror(f);
	if (fclose(f) != 0 || bad) {
		unlinkat(root_fd, tname, 0);
		return diag_fail(-EIO, why, why_len, "%s: write error", tmp);
	}
	if (renameat(root_fd, tname, root_fd, name) != 0) {
		int err = -errno;
		unlinkat(root_fd, tname, 0);
		return diag_fail(err, why, why_len, "rename %s to %s: %s", tmp, path,
				   strerror(-err));
	}
	return 0;
}

static int get_stats(struct load_stats *s, const char *k, const char *v)
{
	if (!strcmp(k, "source"))
		snprintf(s->source, sizeof s->source, "%s", v);
	else if (!strcmp(k, "ms"))
		s->ms = strtoull(v, NULL, 10);
	else if (!strcmp(k, "alloc_ms"))
		s->alloc_ms = strtoull(v, NULL, 10);
	else if (!strcmp(k, "gbps"))
		s->gbps = strtod(v, NULL);
	else if (!strcmp(k, "direct"))
		s->direct = atoi(v);
	else if (!strcmp(k, "note"))
		snprintf(s->note, sizeof s->note, "%s", v);
	else
		return 0;
	return 1;
}

/* A node number as written, else -1 (not pinned). */
static int32_t node_of(const char *v)
{
	char *end;
	long n = strtol(v, &end, 10);
	return *v && !*end && n >= 0 && n < 64 ? (int32_t)n : -1;
}

/* "K.path" or "K.node" of rollback replica K; hints: adopt.c checks them. */
static void get_more(struct cache *c, const char *k, const char *v)
{
	char *dot;
	unsigned long i = strtoul(k, &dot, 10);
	if (dot == k || *dot != '.' || i >= SHMKV_CTL_MAX_SEGMENTS - 1)
		return;
	struct seg_info *m = &c->rb_more[i];
	if (!strcmp(dot + 1, "path")) {
		snprintf(m->path, sizeof m->path, "%s", v);
		if (c->nrb_more < i + 1) {
			for (unsigned j = c->nrb_more; j < i; j++)
				c->rb_more[j].node = -1;
			c->nrb_more = (unsigned)i + 1;
		}
	} else if (!strcmp(dot + 1, "node")) {
		m->node = node_of(v);
	}
}

int state_read(int fd, struct cache *c)
{
	char line[PATH_MAX + 64];
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		char *eq = strchr(line, '=');
		if (line[0] == '#' || !eq)
			continue;
		*eq = 0;
		const char *k = line, *v = eq + 1;
		if (!strcmp(k, "next_load"))
			c->next_load = strtoull(v, NULL, 10);
		else if (!strcmp(k, "changes"))
			c->changes = strtoull(v, NULL, 10);
		else if (!strcmp(k, "chain.last"))
			c->chain_last = strtoull(v, NULL, 10);
		else if (!strcmp(k, "chain.seq"))
			c->chain_seq = strtoull(v, NULL, 10);
		else if (!strcmp(k, "rb.chain.last"))
			c->rb_chain_last = strtoull(v, NULL, 10);
		else if (!strcmp(k, "rb.chain.seq"))
			c->rb_chain_seq = strtoull(v, NULL, 10);
		else if (!strcmp(k, "wal.seq"))
			c->wal_seq = strtoull(v, NULL, 10);
		else if (!strcmp(k, "wal.behind"))
			c->wal_behind = !strcmp(v, "1");
		else if (!strcmp(k, "origin.sum"))
			c->origin_sum = strtoull(v, NULL, 10);
		else if (!strcmp(k, "origin.size"))
			c->origin_size = strtoull(v, NULL, 10);
		else if (!strcmp(k, "rb.origin.sum"))
			c->rb_origin_sum = strtoull(v, NULL, 10);
		else if (!strcmp(k, "rb.origin.size"))
			c->rb_origin_size = strtoull(v, NULL, 10);
		else if (!strcmp(k, "base.path"))
			snprintf(c->base_saved, sizeof c->base_saved, "%s", v);
		else if (!strcmp(k, "ov.path"))
			snprintf(c->ov_saved, sizeof c->ov_saved, "%s", v);
		else if (!strcmp(k, "top.path"))
			snprintf(c->top_saved, sizeof c->top_saved, "%s", v);
		else if (!strcmp(k, "fold.path"))
			snprintf(c->fold_saved, sizeof c->fold_saved, "%s", v);
		else if (!strcmp(k, "compact.path"))
			snprintf(c->compact_saved, sizeof c->compact_saved, "%s", v);
		else if (!strcmp(k, "rbov.path")) /* a hint: adopt.c inspects it */
			snprintf(c->rbov.path, sizeof c->rbov.path, "%s", v);
		else if (!strcmp(k, "rbtop.path")) /* a hint too */
			snprintf(c->rbtop.path, sizeof c->rbtop.path, "%s", v);
		else if (!strcmp(k, "rb.path"))
			snprintf(c->rb.path, sizeof c->rb.path, "%s", v);
		else if (!strcmp(k, "rb.generation"))
			c->rb.generation = strtoull(v, NULL, 10);
		else if (!strcmp(k, "rb.node"))
			c->rb.node = node_of(v);
		else if (!strncmp(k, "rb.more.", 8))
			get_more(c, k + 8, v);
		else if (!strncmp(k, "cur.", 4))
			get_stats(&c->stats, k + 4, v);
		else if (!strncmp(k, "rb.", 3))
			get_stats(&c->rb_stats, k + 3, v);
	}
	fclose(f);
	return 0;
}

void state_remove(int root_fd, const char *name)
{
	char n[SHMKV_CACHE_NAME_MAX + 8];
	snprintf(n, sizeof n, "%s.state", name);
	unlinkat(root_fd, n, 0);
}
