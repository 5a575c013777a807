/* topo.c - reads the NUMA topology from sysfs (topo.h). */
#include "topo.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "host.h"

static int read_small(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	size_t n = fread(buf, 1, len - 1, f);
	int err = ferror(f) ? -EIO : 0;
	fclose(f);
	buf[n] = 0;
	while (n && isspace((unsigned char)buf[n - 1]))
		buf[--n] = 0;
	return err;
}

int ntopo_parse_list(const char *s, uint64_t *mask, unsigned max)
{
	/* the kernel's list format: "", "3", "0-3,8-11" */
	while (*s && isspace((unsigned char)*s))
		s++;
	while (*s) {
		char *end;
		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		unsigned long a = strtoul(s, &end, 10), b = a;
		if (*end == '-') {
			if (!isdigit((unsigned char)end[1]))
				return -EINVAL;
			b = strtoul(end + 1, &end, 10);
		}
		if (b < a)
			return -EINVAL;
		if (b >= max)
			return -ERANGE;
		for (unsigned long i = a; i <= b; i++)
			mask[i / 64] |= UINT64_C(1) << (i % 64);
		if (*end == ',' && end[1])
			end++;
		else if (*end && !isspace((unsigned char)*end))
			return -EINVAL;
		s = end;
		while (*s && isspace((unsigned char)*s))
			s++;
	}
	return 0;
}

const char *ntopo_list_name(uint64_t mask, char *buf, size_t len)
{
	size_t o = 0;
	buf[0] = 0;
	for (int i = 0; i < 64 && o < len; i++) {
		if (!(mask >> i & 1))
			continue;
		int j = i;
		while (j + 1 < 64 && (mask >> (j + 1) & 1))
			j++;
		int w = j > i ? snprintf(buf + o, len - o, "%s%d-%d", o ? "," : "", i, j)
			      : snprintf(buf + o, len - o, "%s%d", o ? "," : "", i);
		if (w < 0)
			break;
		o += (size_t)w;
		i = j;
	}
	return buf;
}

static uint64_t meminfo_kb(const char *text, const char *key)
{
	const char *p = strstr(text, key);
	if (!p)
		return 0;
	p += strlen(key);
	while (*p == ' ' || *p == ':')
		p++;
	return strtoull(p, NULL, 10);
}

static int read_node(const char *base, struct ntopo_node *n, const int *ids, unsigned count,
		     char *why, size_t why_len)
{
	char path[4096], buf[8192];
	snprintf(path, sizeof path, "%s/node%d/cpulist", base, n->id);
	int err = read_small(path, buf, sizeof buf);
	if (!err)
		err = ntopo_parse_list(buf, n->cpus, NTOPO_MAX_CPUS);
	if (err)
		return diag_fail(err, why, why_len, "%s: %s", path,
				 err == -EINVAL ? "not a CPU list" : strerror(-err));
	/* distance: one number per online node, in the order of their ids */
	snprintf(path, sizeof path, "%s/node%d/distance", base, n->id);
	if (read_small(path, buf, sizeof buf) == 0) {
		char *p = buf, *end;
		for (unsigned j = 0; j < count; j++, p = end) {
			long d = strtol(p, &end, 10);
			if (end == p || d <= 0 || d > 255)
				return diag_fail(-EINVAL, why, why_len,
						 "%s: %u distances expected (one per online node)",
						 path, count);
			n->dist[ids[j]] = (int)d;
		}
		while (*p == ' ')
			p++;
		if (*p)
			return diag_fail(-EINVAL, why, why_len,
					 "%s: %u distances expected (one per online node)", path,
					 count);
	}
	snprintf(path, sizeof path, "%s/node%d/meminfo", base, n->id);
	if (read_small(path, buf, sizeof buf) == 0) {
		n->mem_total = meminfo_kb(buf, "MemTotal") * 1024;
		n->mem_free = meminfo_kb(buf, "MemFree") * 1024;
		n->meminfo = 1;
	}
	/* the node's pools, read as common/host.h reads the host's */
	snprintf(path, sizeof path, "%s/node%d/hugepages", base, n->id);
	struct host_pool p[HOST_MAX_POOLS];
	size_t np;
	if (host_pools(path, p, HOST_MAX_POOLS, &np, NULL, 0))
		return 0; /* no hugetlb in this kernel */
	for (size_t i = 0; i < np && n->nhp < NTOPO_MAX_HP; i++, n->nhp++) {
		n->hp[n->nhp].page_size = p[i].page_size;
		n->hp[n->nhp].nr = (long long)p[i].nr;
		n->hp[n->nhp].free = (long long)p[i].free;
	}
	return 0;
}

int ntopo_read(const char *sysroot, struct ntopo *t, char *why, size_t why_len)
{
	char base[2048], path[2200], buf[4096];
	memset(t, 0, sizeof *t);
	if ((size_t)snprintf(base, sizeof base, "%s/devices/system/node",
			     sysroot ? sysroot : "/sys") >= sizeof base)
		return diag_fail(-ENAMETOOLONG, why, why_len, "sysfs root too long: %s", sysroot);
	snprintf(path, sizeof path, "%s/online", base);
	int err = read_small(path, buf, sizeof buf);
	if (err == -ENOENT) {
		/* no NUMA in this kernel: one node 0 with every CPU */
		t->n = 1;
		t->online = 1;
		t->node[0].id = 0;
		t->node[0].dist[0] = 10;
		snprintf(path, sizeof path, "%.*s/cpu/online", (int)(strlen(base) - 5), base);
		if (read_small(path, buf, sizeof buf) == 0)
			ntopo_parse_list(buf, t->node[0].cpus, NTOPO_MAX_CPUS);
		return 0;
	}
	uint64_t online[1] = {0};
	if (!err)
		err = ntopo_parse_list(buf, online, NTOPO_MAX_NODES);
	if (err == -ERANGE)
		return diag_fail(err, why, why_len, "%s: \"%s\": node ids over %d are not supported",
				 path, buf, NTOPO_MAX_NODES - 1);
	if (err)
		return diag_fail(err, why, why_len, "%s: %s", path,
				 err == -EINVAL ? "not a node list" : strerror(-err));
	if (!online[0])
		return diag_fail(-EINVAL, why, why_len, "%s: no node online", path);
	int ids[NTOPO_MAX_NODES];
	for (int i = 0; i < NTOPO_MAX_NODES; i++)
		if (online[0] >> i & 1)
			ids[t->n++] = i;
	t->online = online[0];
	for (unsigned i = 0; i < t->n; i++) {
		t->node[i].id = ids[i];
		err = read_node(base, &t->node[i], ids, t->n, why, why_len);
		if (err)
			return err;
	}
	return 0;
}

const struct ntopo_node *ntopo_node(const struct ntopo *t, int id)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->node[i].id == id)
			return &t->node[i];
	return NULL;
}

int ntopo_cpu_node(const struct ntopo *t, unsigned cpu)
{
	if (cpu >= NTOPO_MAX_CPUS)
		return -1;
	for (unsigned i = 0; i < t->n; i++)
		if (t->node[i].cpus[cpu / 64] >> (cpu % 64) & 1)
			return t->node[i].id;
	return -1;
}

long long ntopo_hp_free(const struct ntopo_node *n, uint64_t page_size)
{
	for (unsigned i = 0; i < n->nhp; i++)
		if (n->hp[i].page_size == page_size)
			return n->hp[i].free;
	return -1;
}
