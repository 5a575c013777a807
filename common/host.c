/* host.c - see host.h. */
#include "host.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"

const char *host_root_env(void)
{
	const char *r = getenv("SHMKV_HOST_ROOT");
	return r && *r ? r : "";
}

int host_path(char *buf, size_t len, const char *root, const char *path)
{
	int w = snprintf(buf, len, "%s%s", root ? root : "", path);
	return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

void host_unescape(char *s)
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

int host_parse_size(const char *s, uint64_t *out)
{
	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	int shift = 0;
	switch (*end) {
	case 'K': case 'k': shift = 10; end++; break;
	case 'M': case 'm': shift = 20; end++; break;
	case 'G': case 'g': shift = 30; end++; break;
	case 'T': case 't': shift = 40; end++; break;
	default: break;
	}
	if (shift && (*end == 'i' || *end == 'I'))
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -EINVAL;
	if (v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

const char *host_size_name(uint64_t b, char *buf, size_t len)
{
	if (b >= (UINT64_C(1) << 30) && b % (UINT64_C(1) << 30) == 0)
		snprintf(buf, len, "%lluG", (unsigned long long)(b >> 30));
	else if (b >= (UINT64_C(1) << 20) && b % (UINT64_C(1) << 20) == 0)
		snprintf(buf, len, "%lluM", (unsigned long long)(b >> 20));
	else
		snprintf(buf, len, "%lluK", (unsigned long long)(b >> 10));
	return buf;
}

int host_mount_opt(const char *opts, const char *name, char *buf, size_t len)
{
	size_t nl = strlen(name);
	for (const char *p = opts; *p;) {
		size_t l = strcspn(p, ",");
		if (l > nl && !strncmp(p, name, nl) && p[nl] == '=') {
			snprintf(buf, len, "%.*s", (int)(l - nl - 1), p + nl + 1);
			return 0;
		}
		p += l;
		if (*p)
			p++;
	}
	return -ENOENT;
}

uint64_t host_default_hugepage_size(const char *root)
{
	char path[4096], line[256];
	if (host_path(path, sizeof path, root, "/proc/meminfo"))
		return 0;
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	unsigned long long kb = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "Hugepagesize: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb << 10;
}

int host_mounts(const char *root, const char *type, struct host_mount *out, size_t max,
		size_t *n)
{
	char path[4096], line[4096];
	*n = 0;
	int err = host_path(path, sizeof path, root, "/proc/mounts");
	if (err)
		return err;
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	uint64_t dflt = 0;
	int dflt_read = 0;
	while (*n < max && fgets(line, sizeof line, f)) {
		struct host_mount *m = &out[*n];
		char dev[512];
		if (sscanf(line, "%511s %1023s %63s %1023s", dev, m->dir, m->type, m->opts) != 4)
			continue;
		if (type && *type && strcmp(m->type, type))
			continue;
		host_unescape(m->dir);
		int dup = 0;
		for (size_t i = 0; i < *n; i++)
			dup |= !strcmp(out[i].dir, m->dir);
		if (dup)
			continue;
		m->page_size = 0;
		if (!strcmp(m->type, "hugetlbfs")) {
			char v[64];
			if (host_mount_opt(m->opts, "pagesize", v, sizeof v) == 0) {
				if (host_parse_size(v, &m->page_size))
					m->page_size = 0;
			} else {
				if (!dflt_read)
					dflt = host_default_hugepage_size(root), dflt_read = 1;
				m->page_size = dflt;
			}
		}
		(*n)++;
	}
	fclose(f);
	return 0;
}

int host_read_u64(const char *path, uint64_t *out)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	unsigned long long v;
	int ok = fscanf(f, "%llu", &v) == 1;
	fclose(f);
	if (!ok)
		return -EINVAL;
	*out = v;
	return 0;
}

static int by_page_size(const void *a, const void *b)
{
	const struct host_pool *x = a, *y = b;
	return x->page_size < y->page_size ? -1 : x->page_size > y->page_size;
}

int host_pools(const char *dir, struct host_pool *out, size_t max, size_t *n, char *why,
	       size_t why_len)
{
	*n = 0;
	DIR *d = opendir(dir);
	if (!d)
		return diag_fail(-errno, why, why_len, "%s: %s", dir, strerror(errno));
	struct dirent *e;
	int err = 0;
	while (!err && *n < max && (e = readdir(d))) {
		unsigned long long kb;
		char tail;
		if (sscanf(e->d_name, "hugepages-%llukB%c", &kb, &tail) != 1 || !kb)
			continue;
		struct host_pool *p = &out[*n];
		memset(p, 0, sizeof *p);
		p->page_size = (uint64_t)kb << 10;
		static const char *const files[] = {"nr_hugepages", "free_hugepages",
						    "resv_hugepages", "surplus_hugepages"};
		uint64_t *dst[] = {&p->nr, &p->free, &p->resv, &p->surplus};
		for (int i = 0; i < 4 && !err; i++) {
			char path[4400];
			snprintf(path, sizeof path, "%s/%s/%s", dir, e->d_name, files[i]);
			err = host_read_u64(path, dst[i]);
			if (err == -ENOENT && i >= 2)
				err = 0; /* per-node pools have no resv_hugepages */
			if (err)
				diag_fail(err, why, why_len, "%s: %s", path,
					  err == -EINVAL ? "not a number" : strerror(-err));
		}
		(*n)++;
	}
	closedir(d);
	if (err)
		return err;
	qsort(out, *n, sizeof *out, by_page_size);
	return 0;
}

long long host_pool_available(const char *root, uint64_t page_size)
{
	char dir[4096];
	struct host_pool p[HOST_MAX_POOLS];
	size_t n;
	if (host_path(dir, sizeof dir, root, "/sys/kernel/mm/hugepages") ||
	    host_pools(dir, p, HOST_MAX_POOLS, &n, NULL, 0))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (p[i].page_size == page_size)
			return p[i].free > p[i].resv ? (long long)(p[i].free - p[i].resv) : 0;
	return -1;
}

int host_parse_duration_ms(const char *s, uint64_t *ms)
{
	char *end;
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	uint64_t mul = 1000;
	if (!strcmp(end, "ms"))
		mul = 1, end += 2;
	else if (*end == 's')
		end++;
	else if (*end == 'm')
		mul = 60000, end++;
	else if (*end == 'h')
		mul = 3600000, end++;
	else if (*end == 'd')
		mul = 86400000, end++;
	if (errno || *end || v > UINT64_MAX / mul)
		return -EINVAL;
	*ms = v * mul;
	return 0;
}
