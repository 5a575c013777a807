/* policy.c - parse a NUMA policy and plan its copies (policy.h). */
#include "policy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"

static int popcount64(uint64_t m)
{
	return __builtin_popcountll(m);
}

static int lowest(uint64_t m)
{
	return m ? __builtin_ctzll(m) : -1;
}

int npolicy_parse(const char *s, struct npolicy *p, char *why, size_t why_len)
{
	memset(p, 0, sizeof *p);
	const char *eq = strchr(s, '=');
	size_t kl = eq ? (size_t)(eq - s) : strlen(s);
	const char *arg = eq ? eq + 1 : NULL;
	if (arg && !*arg)
		return diag_fail(-EINVAL, why, why_len, "numa \"%s\": empty list after '='", s);
	if (kl == 4 && !strncmp(s, "none", 4) && !arg) {
		p->kind = NPOL_NONE;
		return 0;
	}
	if (kl == 5 && !strncmp(s, "local", 5)) {
		p->kind = NPOL_LOCAL;
		if (!arg)
			return 0;
		int err = ntopo_parse_list(arg, p->cpus, NTOPO_MAX_CPUS);
		if (err)
			return diag_fail(-EINVAL, why, why_len,
					 "numa \"%s\": \"%s\" is not a CPU list like 0-3,8 (CPUs "
					 "0..%d)", s, arg, NTOPO_MAX_CPUS - 1);
		return 0;
	}
	if (kl == 4 && !strncmp(s, "node", 4) && arg) {
		char *end;
		long n = strtol(arg, &end, 10);
		if (*end || end == arg || n < 0 || n >= NTOPO_MAX_NODES)
			return diag_fail(-EINVAL, why, why_len,
					 "numa \"%s\": node must be a number 0..%d", s,
					 NTOPO_MAX_NODES - 1);
		p->kind = NPOL_NODE;
		p->node = (int)n;
		return 0;
	}
	int inter = kl == 10 && !strncmp(s, "interleave", 10);
	int repl = kl == 9 && !strncmp(s, "replicate", 9);
	if (inter || repl) {
		p->kind = inter ? NPOL_INTERLEAVE : NPOL_REPLICATE;
		if (arg && ntopo_parse_list(arg, &p->nodes, NTOPO_MAX_NODES))
			return diag_fail(-EINVAL, why, why_len,
					 "numa \"%s\": \"%s\" is not a node list like 0-1,3 (nodes "
					 "0..%d)", s, arg, NTOPO_MAX_NODES - 1);
		return 0;
	}
	return diag_fail(-EINVAL, why, why_len, "numa \"%s\": expected " NPOLICY_GRAMMAR, s);
}

static const char *cpu_list(const uint64_t *cpus, char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = 0;
	for (unsigned i = 0; i < NTOPO_MAX_CPUS && o < len; i++) {
		if (!(cpus[i / 64] >> (i % 64) & 1))
			continue;
		unsigned j = i;
		while (j + 1 < NTOPO_MAX_CPUS && (cpus[(j + 1) / 64] >> ((j + 1) % 64) & 1))
			j++;
		int w = j > i ? snprintf(buf + o, len - o, "%s%u-%u", o ? "," : "", i, j)
			      : snprintf(buf + o, len - o, "%s%u", o ? "," : "", i);
		if (w < 0)
			break;
		o += (size_t)w;
		i = j;
	}
	return buf;
}

static int any_cpu(const uint64_t *cpus)
{
	for (unsigned i = 0; i < NTOPO_MAX_CPUS / 64; i++)
		if (cpus[i])
			return 1;
	return 0;
}

const char *npolicy_name(const struct npolicy *p, char *buf, size_t len)
{
	char l[NPOLICY_NAME_MAX];
	switch (p->kind) {
	case NPOL_NONE:
		snprintf(buf, len, "none");
		break;
	case NPOL_LOCAL:
		if (any_cpu(p->cpus))
			snprintf(buf, len, "local=%s", cpu_list(p->cpus, l, sizeof l));
		else
			snprintf(buf, len, "local");
		break;
	case NPOL_NODE:
		snprintf(buf, len, "node=%d", p->node);
		break;
	case NPOL_INTERLEAVE:
	case NPOL_REPLICATE: {
		const char *k = p->kind == NPOL_INTERLEAVE ? "interleave" : "replicate";
		if (p->nodes)
			snprintf(buf, len, "%s=%s", k, ntopo_list_name(p->nodes, l, sizeof l));
		else
			snprintf(buf, len, "%s", k);
		break;
	}
	}
	return buf;
}

/* Nodes of the topology that have memory (a CPU-only node holds no copy). */
static uint64_t mem_nodes(const struct ntopo *t)
{
	uint64_t m = 0;
	for (unsigned i = 0; i < t->n; i++)
		if (t->node[i].mem_total || !t->node[i].meminfo) /* unknown: assume it has */
			m |= UINT64_C(1) << t->node[i].id;
	return m;
}

/* The nodes a list names: each must be online. */
static int check_nodes(const struct ntopo *t, uint64_t want, const char *what, char *why,
		       size_t why_len)
{
	uint64_t bad = want & ~t->online;
	if (bad) {
		char b[NPOLICY_NAME_MAX], o[NPOLICY_NAME_MAX];
		return diag_fail(-ENODEV, why, why_len, "numa=%s: node %s not online on this host "
				 "(online: node%s %s)", what, ntopo_list_name(bad, b, sizeof b),
				 t->n > 1 ? "s" : "", ntopo_list_name(t->online, o, sizeof o));
	}
	return 0;
}

/* Can node hold one copy? 0 yes; else -ENOMEM with what it lacks in why. */
static int node_fits(const struct ntopo_node *n, const struct nplan_req *r, char *why,
		     size_t why_len)
{
	uint64_t ps = r->page_size ? r->page_size : 4096;
	uint64_t need = (r->size + ps - 1) / ps;
	if (r->hugetlb) {
		long long fr = ntopo_hp_free(n, ps);
		if (fr < 0 || (uint64_t)fr < need)
			return diag_fail(-ENOMEM, why, why_len,
					 "node %d has %lld free %llukB huge pages, a copy needs %llu",
					 n->id, fr < 0 ? 0 : fr, (unsigned long long)(ps >> 10),
					 (unsigned long long)need);
		return 0;
	}
	if (n->meminfo && n->mem_free < need * ps)
		return diag_fail(-ENOMEM, why, why_len,
				 "node %d has %llu MiB free, a copy needs %llu MiB", n->id,
				 (unsigned long long)(n->mem_free >> 20),
				 (unsigned long long)((need * ps + (1u << 20) - 1) >> 20));
	return 0;
}

static void one(struct nplan *pl, enum nbind_mode mode, uint64_t nodes)
{
	pl->n = 1;
	pl->seg[0].mode = mode;
	pl->seg[0].nodes = nodes;
	pl->seg[0].node = mode != NBIND_NONE && popcount64(nodes) == 1 ? lowest(nodes) : -1;
}

void nplan_degrade(struct nplan *pl, const char *reason)
{
	uint64_t nodes = 0;
	for (unsigned i = 0; i < pl->n; i++)
		nodes |= pl->seg[i].nodes;
	one(pl, NBIND_INTERLEAVE, nodes);
	pl->degraded = 1;
	char l[NPOLICY_NAME_MAX];
	snprintf(pl->note, sizeof pl->note, "replicate degraded to interleave=%s: %s",
		 ntopo_list_name(nodes, l, sizeof l), reason);
}

int nplan_make(const struct npolicy *p, const struct ntopo *t, const struct nplan_req *r,
	       struct nplan *out, char *why, size_t why_len)
{
	memset(out, 0, sizeof *out);
	uint64_t nodes = 0;
	int err;
	switch (p->kind) {
	case NPOL_NONE:
		one(out, NBIND_NONE, 0);
		return 0;
	case NPOL_LOCAL:
		if (!any_cpu(p->cpus)) {
			if (r->my_node < 0 || !ntopo_node(t, r->my_node))
				return diag_fail(-ENODEV, why, why_len,
						 "numa local: the loader's node (%d) is not online",
						 r->my_node);
			nodes = UINT64_C(1) << r->my_node;
		} else {
			for (unsigned c = 0; c < NTOPO_MAX_CPUS; c++) {
				if (!(p->cpus[c / 64] >> (c % 64) & 1))
					continue;
				int n = ntopo_cpu_node(t, c);
				if (n < 0)
					return diag_fail(-ENODEV, why, why_len,
							 "numa local: CPU %u is on no online node", c);
				nodes |= UINT64_C(1) << n;
			}
		}
		nodes &= mem_nodes(t) ? mem_nodes(t) : nodes;
		if (!nodes)
			return diag_fail(-ENODEV, why, why_len,
					 "numa local: those CPUs' nodes have no memory");
		one(out, NBIND_BIND, nodes);
		return 0;
	case NPOL_NODE:
		nodes = UINT64_C(1) << p->node;
		err = check_nodes(t, nodes, "node", why, why_len);
		if (err)
			return err;
		if (!(mem_nodes(t) & nodes))
			return diag_fail(-ENODEV, why, why_len, "numa node=%d: node %d has no memory",
					 p->node, p->node);
		one(out, NBIND_BIND, nodes);
		return 0;
	case NPOL_INTERLEAVE:
	case NPOL_REPLICATE:
		break;
	}
	const char *what = p->kind == NPOL_INTERLEAVE ? "interleave" : "replicate";
	nodes = p->nodes ? p->nodes : mem_nodes(t);
	err = check_nodes(t, nodes, what, why, why_len);
	if (err)
		return err;
	if (p->nodes && (nodes & ~mem_nodes(t))) {
		char b[NPOLICY_NAME_MAX];
		return diag_fail(-ENODEV, why, why_len, "numa %s: node %s has no memory", what,
				 ntopo_list_name(nodes & ~mem_nodes(t), b, sizeof b));
	}
	if (p->kind == NPOL_INTERLEAVE) {
		one(out, NBIND_INTERLEAVE, nodes);
		return 0;
	}
	/* replicate: one bound copy per node, if every node can hold one */
	out->n = 0;
	for (int id = 0; id < NTOPO_MAX_NODES; id++) {
		if (!(nodes >> id & 1))
			continue;
		if (out->n < NPLAN_MAX) {
			struct nplan_seg *s = &out->seg[out->n];
			s->node = id;
			s->mode = NBIND_BIND;
			s->nodes = UINT64_C(1) << id;
		}
		out->n++;
	}
	if (out->n > NPLAN_MAX) {
		char reason[96];
		snprintf(reason, sizeof reason, "%u nodes, a generation lists at most %u copies",
			 out->n, NPLAN_MAX);
		out->n = 1;
		out->seg[0].nodes = nodes;
		nplan_degrade(out, reason);
		return 0;
	}
	for (unsigned i = 0; i < out->n; i++) {
		char lack[200];
		if (node_fits(ntopo_node(t, out->seg[i].node), r, lack, sizeof lack)) {
			nplan_degrade(out, lack);
			return 0;
		}
	}
	return 0;
}
