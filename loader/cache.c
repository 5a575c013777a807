/* cache.c - the cache table and small helpers about caches: error, state
 * file, dropping the rollback candidate, names of memory kinds. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diag.h"
#include "loader.h"
#include "log.h"
#include "memkind.h"
#include "mounts.h"
#include "probes.h"
#include "state.h"

struct cache *cache_find(struct loader *L, const char *name)
{
	for (size_t i = 0; i < L->ncaches; i++)
		if (!strcmp(L->caches[i]->name, name))
			return L->caches[i];
	return NULL;
}

int cache_add(struct loader *L, const char *name, struct cache **out)
{
	struct cache *c = calloc(1, sizeof *c);
	if (!c)
		return -ENOMEM;
	snprintf(c->name, sizeof c->name, "%s", name);
	const struct cache_def *d = conf_find(L->conf, name);
	if (d) {
		c->configured = 1;
		c->conf = d->c;
	} else {
		conf_cache_defaults(L->conf, &c->conf);
	}
	c->next_load = 1;
	pthread_mutex_lock(&L->lock);
	if (L->ncaches == L->caps) {
		size_t caps = L->caps ? L->caps * 2 : 16;
		struct cache **t = realloc(L->caches, caps * sizeof *t);
		if (!t) {
			pthread_mutex_unlock(&L->lock);
			free(c);
			return -ENOMEM;
		}
		L->caches = t;
		L->caps = caps;
	}
	L->caches[L->ncaches++] = c;
	pthread_mutex_unlock(&L->lock);
	*out = c;
	return 0;
}

void cache_remove(struct loader *L, struct cache *c)
{
	pthread_mutex_lock(&L->lock);
	for (size_t i = 0; i < L->ncaches; i++) {
		if (L->caches[i] == c) {
			L->caches[i] = L->caches[--L->ncaches];
			break;
		}
	}
	pthread_mutex_unlock(&L->lock);
	cache_free(c);
}

void cache_free(struct cache *c)
{
	ctl_close(&c->ctl);
	expiry_free(&c->exp);
	shmkv_close(c->lower_db);
	free(c);
}

void cache_set_error(struct loader *L, struct cache *c, const char *fmt, ...)
{
	char msg[sizeof c->last_error];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&L->lock);
	memcpy(c->last_error, msg, sizeof msg);
	pthread_mutex_unlock(&L->lock);
}

int cache_save_state(struct loader *L, struct cache *c)
{
	char why[300];
	int err = state_write(L->root_fd, L->root, c, why, sizeof why);
	if (err)
		log_warn("state cache=%s: %s", c->name, why);
	return err;
}

int cache_save_before_publish(struct loader *L, struct cache *c, const char *what, char *why,
			      size_t why_len)
{
	char e[300];
	int err = state_write(L->root_fd, L->root, c, e, sizeof e);
	if (err)
		diag_fail(err, why, why_len,
			  "not published: the state file cannot record %s first "
			  "(a restart would not know of it): %s",
			  what, e);
	return err;
}

uint32_t cache_protocol(const struct cache *c)
{
	return c->ctl.map ? (c->ctl.version ? c->ctl.version : 1) : 0;
}

void cache_note_protocol(struct loader *L, struct cache *c)
{
	pthread_mutex_lock(&L->lock); /* status.c reads c->protocol under it */
	c->protocol = cache_protocol(c);
	pthread_mutex_unlock(&L->lock);
}

int cache_rb_shares_base(const struct cache *c)
{
	return c->have_rb && c->have_cur && !strcmp(c->rb.path, c->cur.path);
}

int cache_drop_rollback(struct loader *L, struct cache *c, const char *reason)
{
	if (!c->have_rb)
		return 0;
	struct seg_info rb = c->rb, more[SHMKV_CTL_MAX_SEGMENTS - 1], rbov = c->rbov,
			rbtop = c->rbtop;
	unsigned nmore = c->nrb_more;
	int had_rbov = c->have_rbov, had_rbtop = c->have_rbtop, shared = cache_rb_shares_base(c);
	memcpy(more, c->rb_more, sizeof more);
	pthread_mutex_lock(&L->lock);
	c->have_rb = 0;
	c->nrb_more = 0;
	c->have_rbov = c->have_rbtop = 0;
	pthread_mutex_unlock(&L->lock);
	if (had_rbov) /* the current generation's lower too, after a change */
		cache_release(c, &rbov);
	if (had_rbtop)
		cache_release(c, &rbtop);
	int err = 0;
	if (!shared) { /* the base of the current generation too: kept */
		cache_unlink_more(c, more, nmore);
		err = unlink(rb.path) != 0 && errno != ENOENT ? -errno : 0;
	}
	if (!err)
		PROBE(unlink, c->name, rb.generation, rb.path);
	log_info("dropped rollback cache=%s gen=%llu bytes=%llu file=%s reason=\"%s\"", c->name,
		 (unsigned long long)rb.generation, (unsigned long long)rb.size, rb.path, reason);
	cache_save_state(L, c);
	return err;
}

const char *mem_kind_name(uint32_t flags, uint64_t page_size, char *buf, size_t len)
{
	return memkind_name(flags, page_size, buf, len); /* shared with shmctl: common/memkind.h */
}

const char *mem_policy_name(enum mem_policy p)
{
	switch (p) {
	case MEM_HUGETLB: return "hugetlb";
	case MEM_SHM: return "shm";
	default: return "auto";
	}
}

static const char *const fail_names[LOAD_FAIL_N_] = {
	[LOAD_FAIL_SOURCE] = "source",     [LOAD_FAIL_IO] = "io",
	[LOAD_FAIL_CHANGED] = "changed",   [LOAD_FAIL_INVALID] = "invalid_image",
	[LOAD_FAIL_CHECKSUM] = "checksum", [LOAD_FAIL_TOO_LARGE] = "too_large",
	[LOAD_FAIL_NO_ROOM] = "no_room",   [LOAD_FAIL_NO_MEMORY] = "out_of_memory",
	[LOAD_FAIL_OTHER] = "other",
};

const char *load_fail_name(enum load_fail r)
{
	return (unsigned)r < LOAD_FAIL_N_ ? fail_names[r] : "other";
}

enum load_fail load_fail_reason(int err)
{
	switch (err) {
	case SHMKV_ECHECKSUM:
		return LOAD_FAIL_CHECKSUM;
	case SHMKV_EMAGIC: case SHMKV_EVERSION: case SHMKV_ELAYOUT: case SHMKV_ETRUNCATED:
	case SHMKV_ECORRUPT: case SHMKV_EKEYLEN:
		return LOAD_FAIL_INVALID;
	case -ESTALE: /* load.c:source_unchanged() */
		return LOAD_FAIL_CHANGED;
	case -EFBIG:
		return LOAD_FAIL_TOO_LARGE;
	case -ENOSPC:
	case -ENODEV: /* place.c: no hugetlbfs mount for a hugetlb-only cache */
		return LOAD_FAIL_NO_ROOM;
	case -ENOMEM:
		return LOAD_FAIL_NO_MEMORY;
	case -EIO: case -ENODATA: case -EREMOTEIO:
		return LOAD_FAIL_IO;
	case -ENOENT: case -EACCES: case -EPERM: case -ELOOP: case -ENOTDIR: case -EISDIR:
	case -ENAMETOOLONG: case -ENXIO: case -EINVAL:
		return LOAD_FAIL_SOURCE;
	default:
		return LOAD_FAIL_OTHER;
	}
}

uint32_t cache_ctl_entries(const struct seg_info *first, const struct seg_info *more,
			   unsigned nmore, shmkv_ctl_segment *out)
{
	uint32_t n = 0;
	out[n++] = seg_ctl_entry(first);
	for (unsigned i = 0; i < nmore && n < SHMKV_CTL_MAX_SEGMENTS; i++)
		out[n++] = seg_ctl_entry(&more[i]);
	return n;
}

void cache_unlink_more(const struct cache *c, const struct seg_info *more, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		/* readers still mapping it keep it; the kernel frees it after them */
		if (unlink(more[i].path) != 0 && errno != ENOENT) {
			log_warn("unlink file=%s: %s", more[i].path, strerror(errno));
			continue;
		}
		PROBE(unlink, c->name, more[i].generation, more[i].path);
		log_info("freed cache=%s gen=%llu replica node=%d file=%s", c->name,
			 (unsigned long long)more[i].generation, more[i].node, more[i].path);
	}
}

int cache_names(const struct cache *c, const char *path)
{
	if (c->have_cur) {
		if (!strcmp(c->cur.path, path) || (c->have_ov && !strcmp(c->ov.path, path)) ||
		    (c->have_top && !strcmp(c->top.path, path)))
			return 1;
		for (unsigned i = 0; i < c->ncur_more; i++)
			if (!strcmp(c->cur_more[i].path, path))
				return 1;
	}
	if (c->have_rb) {
		if (!strcmp(c->rb.path, path) || (c->have_rbov && !strcmp(c->rbov.path, path)) ||
		    (c->have_rbtop && !strcmp(c->rbtop.path, path)))
			return 1;
		for (unsigned i = 0; i < c->nrb_more; i++)
			if (!strcmp(c->rb_more[i].path, path))
				return 1;
	}
	return 0;
}

void cache_release(const struct cache *c, const struct seg_info *s)
{
	if (!s->path[0] || cache_names(c, s->path))
		return;
	/* readers still mapping it keep it; the kernel frees it after them */
	if (unlink(s->path) != 0 && errno != ENOENT)
		log_warn("unlink file=%s: %s", s->path, strerror(errno));
	else
		PROBE(unlink, c->name, s->generation, s->path);
}

int cache_gen_entries(const struct seg_info *first, const struct seg_info *more, unsigned nmore,
		      const struct seg_info *lower, const struct seg_info *top,
		      shmkv_ctl_segment *out, uint32_t *n, char *why, size_t why_len)
{
	uint32_t k = cache_ctl_entries(first, more, nmore, out);
	uint32_t need = k + (lower != NULL) + (top != NULL);
	if (need > SHMKV_CTL_MAX_SEGMENTS)
		return diag_fail(-ENOSPC, why, why_len,
				 "%u base copies leave no room for %s in the control segment (at "
				 "most %u entries)", k, top ? "two overlays" : "an overlay",
				 SHMKV_CTL_MAX_SEGMENTS);
	if (lower) {
		out[k] = seg_ctl_entry(lower);
		out[k++].flags |= SHMKV_SEG_OVERLAY;
	}
	if (top) {
		out[k] = seg_ctl_entry(top);
		out[k++].flags |= SHMKV_SEG_OVERLAY | SHMKV_SEG_TOP;
	}
	*n = k;
	return 0;
}
