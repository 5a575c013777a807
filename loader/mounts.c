/* mounts.c - find hugetlbfs mounts (/proc/mounts) and their page sizes. */
#include "mounts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>

#include "config.h"

#define HUGETLBFS_MAGIC_ 0x958458f6

/* /proc/mounts escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *o = s;
	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*o++ = *s++;
		}
	}
	*o = 0;
}

static uint64_t opt_pagesize(const char *opts)
{
	const char *p = strstr(opts, "pagesize=");
	if (!p || (p != opts && p[-1] != ','))
		return 0;
	char v[32];
	size_t i = 0;
	p += 9;
	while (*p && *p != ',' && i + 1 < sizeof v)
		v[i++] = *p++;
	v[i] = 0;
	uint64_t n;
	return conf_parse_size(v, &n) ? 0 : n;
}

static int by_size_desc(const void *a, const void *b)
{
	const struct hmount *x = a, *y = b;
	return x->page_size < y->page_size ? 1 : x->page_size > y->page_size ? -1 : 0;
}

int mounts_hugetlb(struct hmount *out, size_t max, size_t *n, const char *only_dir)
{
	FILE *f = fopen("/proc/mounts", "re");
	*n = 0;
	if (!f)
		return -errno;
	char line[4096];
	while (fgets(line, sizeof line, f) && *n < max) {
		char dev[512], dir[PATH_MAX], type[64], opts[1024];
		if (sscanf(line, "%511s %4095s %63s %1023s", dev, dir, type, opts) != 4)
			continue;
		if (strcmp(type, "hugetlbfs"))
			continue;
		unescape(dir);
		if (only_dir && *only_dir && strcmp(dir, only_dir))
			continue;
		struct statfs sf;
		if (statfs(dir, &sf) != 0 || (unsigned long)sf.f_type != HUGETLBFS_MAGIC_)
			continue; /* overmounted, or gone */
		uint64_t ps = opt_pagesize(opts);
		if (!ps)
			ps = (uint64_t)sf.f_bsize;
		int dup = 0;
		for (size_t i = 0; i < *n; i++)
			dup |= !strcmp(out[i].dir, dir);
		if (dup || !ps)
			continue;
		snprintf(out[*n].dir, sizeof out[*n].dir, "%s", dir);
		out[*n].page_size = ps;
		(*n)++;
	}
	fclose(f);
	qsort(out, *n, sizeof *out, by_size_desc);
	return 0;
}

static long long read_ll(const char *path)
{
	FILE *f = fopen(path, "re");
	long long v = -1;
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

long long mounts_free_hugepages(uint64_t page_size)
{
	char path[128];
	snprintf(path, sizeof path, "/sys/kernel/mm/hugepages/hugepages-%llukB/free_hugepages",
		 (unsigned long long)(page_size >> 10));
	long long fr = read_ll(path);
	snprintf(path, sizeof path, "/sys/kernel/mm/hugepages/hugepages-%llukB/resv_hugepages",
		 (unsigned long long)(page_size >> 10));
	long long rs = read_ll(path);
	if (fr < 0 || rs < 0)
		return -1;
	return fr > rs ? fr - rs : 0;
}
