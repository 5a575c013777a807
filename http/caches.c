/* caches.c - attached caches of shmkv-http. See caches.h. */
#include "caches.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void http_caches_init(struct http_caches *t, const char *root, size_t max)
{
	memset(t, 0, sizeof *t);
	snprintf(t->root, sizeof t->root, "%s", root);
	t->max = max;
}

void http_caches_free(struct http_caches *t)
{
	for (size_t i = 0; i < t->n; i++)
		shmkv_close(t->v[i].db);
	free(t->v);
	memset(t, 0, sizeof *t);
}

struct http_cache *http_caches_find(struct http_caches *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->v[i].name, name))
			return &t->v[i];
	return NULL;
}

static int attach(struct http_caches *t, struct http_cache *c, char *why, size_t why_len)
{
	shmkv *db = NULL;
	int err = shmkv_attach_diag(t->root, c->name, 0, &db, why, why_len);
	if (err)
		return err;
	c->db = db;
	return 0;
}

int http_caches_get(struct http_caches *t, const char *name, struct http_cache **out, char *why,
		    size_t why_len)
{
	why[0] = 0;
	if (shmkv_name_check(name)) {
		snprintf(why, why_len, "\"%s\" is not a cache name", name);
		return -EINVAL;
	}
	struct http_cache *c = http_caches_find(t, name);
	if (c && c->db) {
		int r = shmkv_refresh(c->db);
		if (r >= 0) {
			*out = c;
			return 0;
		}
		if (r != SHMKV_ESTALE) {
			/* the handle still serves its old generation (shmkv.h): answer
			 * from it rather than fail while the loader is mid-publish */
			*out = c;
			return 0;
		}
		shmkv_close(c->db); /* dropped or replaced: attach again below */
		c->db = NULL;
	}
	if (!c) {
		if (t->n == t->max) {
			/* reuse an entry whose cache is gone, else refuse */
			for (size_t i = 0; i < t->n && !c; i++)
				if (!t->v[i].db)
					c = &t->v[i];
			if (!c) {
				snprintf(why, why_len, "%zu caches attached already (max_caches)", t->max);
				return -ENOSPC;
			}
		} else {
			if (t->n == t->cap) {
				/* entries move: callers hold a pointer only for one request */
				size_t cap = t->cap ? t->cap * 2 : 8;
				struct http_cache *v = realloc(t->v, cap * sizeof *v);
				if (!v)
					return -ENOMEM;
				t->v = v;
				t->cap = cap;
			}
			c = &t->v[t->n++];
		}
		memset(c, 0, sizeof *c);
		snprintf(c->name, sizeof c->name, "%s", name);
	}
	int err = attach(t, c, why, why_len);
	if (err) {
		if (c == &t->v[t->n - 1] && c->m.hits == 0 && c->m.misses == 0)
			t->n--; /* never served: keep no entry for a name that is not a cache */
		return err;
	}
	*out = c;
	return 0;
}
