/* procmaps.c - see procmaps.h. */
#include "procmaps.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "segname.h"

bool procmaps_parse_line(char *line, uint64_t *start, char **path, bool *deleted)
{
	unsigned long long lo, hi, off, inode;
	char perms[8], dev[16];
	int used = 0;
	if (!isxdigit((unsigned char)line[0]) ||
	    sscanf(line, "%llx-%llx %7s %llx %15s %llu %n", &lo, &hi, perms, &off, dev, &inode,
		   &used) < 6 || used == 0)
		return false;
	char *p = line + used;
	size_t n = strlen(p);
	while (n && (p[n - 1] == '\n' || p[n - 1] == ' '))
		p[--n] = 0;
	*deleted = false;
	static const char del[] = " (deleted)";
	if (n > sizeof del - 1 && !strcmp(p + n - (sizeof del - 1), del)) {
		p[n - (sizeof del - 1)] = 0;
		*deleted = true;
	}
	*start = lo;
	*path = p;
	return true;
}

static const char *hex(const char *p, unsigned long long *v)
{
	unsigned long long x = 0;
	const char *s = p;
	for (;; p++) {
		int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
		if (d < 0 || p - s >= 16)
			break;
		x = x * 16 + (unsigned)d;
	}
	*v = x;
	return p > s ? p : NULL;
}

bool procmaps_line_id(const char *line, uint64_t *dev, uint64_t *ino)
{
	/* "lo-hi perms off MAJ:MIN inode path": the dev is the 4th field */
	const char *p = line;
	for (int f = 0; f < 3; f++) {
		p = strchr(p, ' ');
		if (!p)
			return false;
		p++;
	}
	unsigned long long maj, min, i = 0;
	if (!(p = hex(p, &maj)) || *p != ':' || !(p = hex(p + 1, &min)) || *p != ' ' ||
	    p[1] < '0' || p[1] > '9')
		return false;
	for (p++; *p >= '0' && *p <= '9'; p++)
		i = i * 10 + (unsigned)(*p - '0');
	*dev = (uint64_t)makedev((unsigned)maj, (unsigned)min);
	*ino = i;
	return true;
}

int procmaps_for_each_pid(int (*fn)(long pid, void *arg), void *arg)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -errno;
	struct dirent *e;
	int rc = 0;
	while (!rc && (e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		rc = fn(pid, arg);
	}
	closedir(d);
	return rc;
}

int procmaps_scan_pid(long pid, const char *cache_prefix,
		      int (*fn)(const struct procmaps_seg *seg, void *arg), void *arg)
{
	char fn_[64];
	snprintf(fn_, sizeof fn_, "/proc/%ld/maps", pid);
	FILE *f = fopen(fn_, "re");
	if (!f)
		return -errno;
	char *line = NULL;
	size_t cap = 0;
	int rc = 0;
	bool any_line = false;
	while (!rc && getline(&line, &cap, f) > 0) {
		struct procmaps_seg s;
		char *path;
		any_line = true;
		if (!procmaps_parse_line(line, &s.start, &path, &s.deleted) || path[0] != '/')
			continue;
		if (!segname_match(strrchr(path, '/') + 1, cache_prefix, &s.loading) ||
		    !procmaps_line_id(line, &s.dev, &s.ino))
			continue;
		s.path = path;
		rc = fn(&s, arg);
	}
	/* maps of another user's process opens but reads as EACCES */
	if (!rc && !any_line && ferror(f))
		rc = errno ? -errno : -EIO;
	free(line);
	fclose(f);
	return rc;
}
