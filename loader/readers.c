/* readers.c - count the processes that map a cache's segments (/proc/PID/maps). */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader.h"

/* Is the mapped file (path as /proc shows it) a segment of this cache?
 * prefix_name is "shmkv-RRRRRRRR-CACHE-"; the rest must be the load id. */
static int is_segment(const char *file, const char *prefix_name)
{
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	size_t pl = strlen(prefix_name);
	if (strncmp(base, prefix_name, pl))
		return 0;
	const char *p = base + pl;
	if (!isdigit((unsigned char)*p))
		return 0;
	while (isdigit((unsigned char)*p))
		p++;
	return !*p || !strcmp(p, " (deleted)");
}

void readers_count(const char *prefix_name, const char *cur_path, pid_t self, unsigned *cur,
		   unsigned *stale)
{
	*cur = *stale = 0;
	DIR *d = opendir("/proc");
	if (!d)
		return;
	struct dirent *e;
	char line[4096 + 256];
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]) || atoi(e->d_name) == self)
			continue;
		char path[300];
		snprintf(path, sizeof path, "/proc/%s/maps", e->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		int on_cur = 0, on_old = 0;
		while (fgets(line, sizeof line, f)) {
			line[strcspn(line, "\n")] = 0;
			/* address perms offset dev inode pathname */
			char *p = line;
			for (int field = 0; field < 5 && p; field++) {
				p = strchr(p, ' ');
				while (p && *p == ' ')
					p++;
			}
			if (!p || *p != '/' || !is_segment(p, prefix_name))
				continue;
			if (cur_path && !strcmp(p, cur_path))
				on_cur = 1;
			else
				on_old = 1;
		}
		fclose(f);
		*cur += (unsigned)on_cur;
		*stale += (unsigned)(on_old && !on_cur);
	}
	closedir(d);
}
