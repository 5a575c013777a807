/* copies.c - NUMA plan, replicas and placement checks of one load (copies.h). */
#include "copies.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "log.h"

static int is_short(int err)
{
	return err == -ENOMEM || err == -ENOSPC;
}

int copies_plan(const struct place_req *pr, const char *cache, const char *numa,
		const struct npolicy *conf, uint64_t size, struct copies *cp, char *why,
		size_t why_len)
{
	memset(cp, 0, sizeof *cp);
	cp->pol = *conf;
	if (numa && numa[0]) {
		int err = npolicy_parse(numa, &cp->pol, why, why_len);
		if (err)
			return err;
	}
	struct ntopo *t = malloc(sizeof *t);
	if (!t)
		return diag_fail(-ENOMEM, why, why_len, "out of memory");
	int err = ntopo_read(NULL, t, why, why_len);
	if (err && cp->pol.kind == NPOL_NONE) {
		err = 0; /* nothing to bind: no topology needed */
		t->n = 1;
	}
	if (!err) {
		struct nplan_req r = {.size = size, .my_node = nbind_my_node()};
		place_first_choice(pr, size, &r.hugetlb, &r.page_size);
		err = nplan_make(&cp->pol, t, &r, &cp->plan, why, why_len);
		cp->query = cp->pol.kind != NPOL_NONE || t->n > 1;
	}
	free(t);
	if (!err && cp->plan.degraded) {
		char q[512], pn[NPOLICY_NAME_MAX];
		log_warn("degraded cache=%s numa=%s reason=%s", cache,
			 npolicy_name(&cp->pol, pn, sizeof pn),
			 log_quote(q, sizeof q, cp->plan.note));
	}
	return err;
}

int copies_degrade(struct copies *cp, const char *cache, const char *why)
{
	if (cp->plan.n < 2)
		return 0;
	char reason[300], q[512], pn[NPOLICY_NAME_MAX];
	snprintf(reason, sizeof reason, "a copy could not be placed: %s", why);
	nplan_degrade(&cp->plan, reason);
	log_warn("degraded cache=%s numa=%s reason=%s", cache,
		 npolicy_name(&cp->pol, pn, sizeof pn), log_quote(q, sizeof q, cp->plan.note));
	return 1;
}

void copies_discard(struct copies *cp)
{
	for (unsigned i = 0; i < cp->nmore; i++)
		seg_discard(&cp->more[i]);
	cp->nmore = 0;
}

int copies_make(struct copies *cp, const struct place_req *pr, struct seg *s, uint64_t size,
		uint64_t *next_load, char *why, size_t why_len)
{
	char note[160];
	for (unsigned i = 1; i < cp->plan.n; i++) {
		struct place_req r = *pr;
		r.bind = &cp->plan.seg[i];
		r.fill_by_read = 0; /* memcpy fills it */
		r.load_id = *next_load;
		struct seg *m = &cp->more[cp->nmore];
		int err = place_segment(&r, size, m, note, sizeof note, why, why_len);
		if (!err) {
			*next_load = m->info.load_id + 1;
			/* from the verified first copy: the same bytes, no second read */
			memcpy(m->map, s->map, (size_t)size);
			cp->nmore++;
			continue;
		}
		copies_discard(cp);
		if (!is_short(err) || !copies_degrade(cp, pr->name, why))
			return err;
		/* one interleaved copy instead of s, bound to one node */
		struct seg inter;
		r.bind = &cp->plan.seg[0];
		r.load_id = *next_load;
		err = place_segment(&r, size, &inter, note, sizeof note, why, why_len);
		if (err)
			return err;
		*next_load = inter.info.load_id + 1;
		memcpy(inter.map, s->map, (size_t)size);
		seg_discard(s);
		*s = inter;
		return 0;
	}
	return 0;
}

static void verify_one(const struct nplan_seg *ps, const char *cache, struct seg *s,
		       struct copy_stat *st, char *note, size_t note_len)
{
	char why[400], q[512];
	memset(st, 0, sizeof *st);
	st->node = -1;
	s->info.node = -1;
	int err = nplace_query(s->map, (size_t)s->info.map_size, s->info.page_size, st->pages,
			       &st->absent);
	if (err) {
		snprintf(why, sizeof why, "move_pages: %s", strerror(-err));
	} else {
		err = nplace_check(ps, st->pages, st->absent, why, sizeof why);
		if (!err) {
			st->node = ps->node;
			s->info.node = ps->node;
			return;
		}
	}
	if (ps->mode == NBIND_NONE)
		return; /* nothing was promised */
	st->wrong = 1;
	log_warn("misplaced cache=%s file=%s reason=%s: published as not pinned", cache,
		 s->info.path, log_quote(q, sizeof q, why));
	size_t l = strlen(note);
	snprintf(note + l, note_len - l, "%splacement wrong (%s): published as not pinned",
		 l ? "; " : "", why);
}

void copies_verify(struct copies *cp, const char *cache, struct seg *s, struct load_stats *ls)
{
	npolicy_name(&cp->pol, ls->numa, sizeof ls->numa);
	snprintf(ls->numa_note, sizeof ls->numa_note, "%s", cp->plan.note);
	ls->ncopies = 0;
	if (!cp->query)
		return;
	verify_one(&cp->plan.seg[0], cache, s, &ls->copy[0], ls->numa_note, sizeof ls->numa_note);
	for (unsigned i = 0; i < cp->nmore; i++)
		verify_one(&cp->plan.seg[i + 1], cache, &cp->more[i], &ls->copy[i + 1],
			   ls->numa_note, sizeof ls->numa_note);
	ls->ncopies = 1 + cp->nmore;
}
