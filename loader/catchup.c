/* catchup.c - a compaction's catch-up (catchup.h): the overlays when the
 * new base is published compared with those it was merged from, key by
 * key, the differences built into one delta of the new base. Costs
 * O(records of both overlays), what a fold costs, never O(base). */
#include "catchup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shmkv_build.h>

#include "diag.h"
#include "overlay.h"

/* One key's record as the overlays answer it (top over lower); key and
 * value point into the overlays' mappings. */
struct crec {
	const void *key;
	size_t klen;
	uint64_t h;
	int used;
	uint32_t type; /* SHMKV_TYPE_TOMBSTONE: removed */
	const void *data;
	size_t size;
	uint32_t expires;
};

struct recmap {
	struct crec *slot;
	size_t cap; /* a power of two, at least twice the records */
};

static int recmap_init(struct recmap *m, uint64_t records)
{
	m->cap = 16;
	while (m->cap < 2 * records + 2)
		m->cap *= 2;
	m->slot = calloc(m->cap, sizeof *m->slot);
	return m->slot ? 0 : -ENOMEM;
}

/* The slot of key: its record, or the free slot where it goes. */
static struct crec *recmap_slot(const struct recmap *m, const void *k, size_t n, uint64_t h)
{
	for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct crec *r = &m->slot[i];
		if (!r->used || (r->h == h && r->klen == n && !memcmp(r->key, k, n)))
			return r;
	}
}

/* Every record of overlay d whose key m does not hold yet, put in m: fed
 * the top first, the top's word on a key wins. */
static int collect(struct recmap *m, const shmkv *d, const char *what, char *why, size_t why_len)
{
	shmkv_iter it;
	const void *k;
	size_t kl;
	shmkv_value v;
	int err;
	shmkv_iter_init_all(d, &it);
	while ((err = shmkv_iter_next(&it, &k, &kl, &v)) == 0) {
		uint64_t h = XXH3_64bits(k, kl);
		struct crec *r = recmap_slot(m, k, kl, h);
		if (r->used)
			continue;
		*r = (struct crec){k, kl, h, 1, v.type, v.data, v.size, shmkv_iter_expires(&it)};
	}
	if (err != SHMKV_EEND)
		return diag_fail(err, why, why_len, "%s overlay: %s", what, shmkv_strerror(err));
	return 0;
}

/* The records of an overlay pair (top NULL: none) in a new map. */
static int answers(struct recmap *m, const shmkv *lower, const shmkv *top, const char *what,
		   char *why, size_t why_len)
{
	uint64_t n = lower->entry_count + (top ? top->entry_count : 0);
	if (recmap_init(m, n))
		return diag_fail(-ENOMEM, why, why_len, "out of memory");
	char w[64];
	snprintf(w, sizeof w, "%s top", what);
	int err = top ? collect(m, top, w, why, why_len) : 0;
	snprintf(w, sizeof w, "%s lower", what);
	return err ? err : collect(m, lower, w, why, why_len);
}

/* Whether two records answer alike: a tombstone, or type, bytes and expiry. */
static int same(const struct crec *a, const struct crec *b)
{
	if (a->type != b->type)
		return 0;
	if (a->type == SHMKV_TYPE_TOMBSTONE)
		return 1;
	return a->expires == b->expires && a->size == b->size &&
	       (!a->size || !memcmp(a->data, b->data, a->size));
}

static int emit(shmkv_builder *b, const struct crec *r, char *why, size_t why_len)
{
	shmkv_value v = {0};
	v.type = r->type;
	v.data = r->data;
	v.size = r->size;
	int err = overlay_builder_put(b, r->key, r->klen, &v, r->expires);
	if (err)
		diag_fail(err, why, why_len, "the catch-up: %s", shmkv_builder_error(b));
	return err;
}

/* The records of now that snap does not answer alike, into b; *n of them. */
static int differences(shmkv_builder *b, const struct recmap *now, const struct recmap *snap,
		       uint64_t *n, char *why, size_t why_len)
{
	for (size_t i = 0; i < now->cap; i++) {
		const struct crec *r = &now->slot[i];
		if (!r->used)
			continue;
		const struct crec *s = recmap_slot(snap, r->key, r->klen, r->h);
		if (s->used && same(r, s))
			continue;
		int err = emit(b, r, why, why_len);
		if (err)
			return err;
		++*n;
	}
	/* a key changed in the snapshot is changed now too (overlays only
	 * grow until the base changes): else the catch-up cannot say what it
	 * answers, and the compaction is refused rather than lose it */
	for (size_t i = 0; i < snap->cap; i++) {
		const struct crec *s = &snap->slot[i];
		if (s->used && !recmap_slot(now, s->key, s->klen, s->h)->used)
			return diag_fail(SHMKV_EBASE, why, why_len,
					 "a key the compaction merged is in no overlay served now "
					 "(the base changed meanwhile)");
	}
	return 0;
}

int catchup_build(const char *new_base, const shmkv *snap_lower, const shmkv *snap_top,
		  const shmkv *cur_lower, const shmkv *cur_top, const char *out,
		  uint64_t *records, char *why, size_t why_len)
{
	struct recmap now = {0}, snap = {0};
	shmkv_builder *b = NULL;
	*records = 0;
	int err = answers(&now, cur_lower, cur_top, "the current", why, why_len);
	if (!err)
		err = answers(&snap, snap_lower, snap_top, "the compacted", why, why_len);
	if (!err)
		err = overlay_delta_builder(new_base, SHMKV_DUP_ERROR, &b, why, why_len);
	if (!err)
		err = differences(b, &now, &snap, records, why, why_len);
	if (!err && *records) {
		shmkv_build_stats st;
		err = shmkv_builder_finish(b, out, &st);
		if (err)
			diag_fail(err, why, why_len, "building the catch-up: %s",
				  shmkv_builder_error(b));
	}
	shmkv_builder_free(b);
	free(now.slot);
	free(snap.slot);
	return err;
}
