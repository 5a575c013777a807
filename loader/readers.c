/* readers.c - count the processes that map a cache's segments
 * (/proc/PID/maps, through common/procmaps.h). */
#include <string.h>

#include "loader.h"
#include "procmaps.h"

struct count {
	const char *prefix_name; /* "shmkv-RRRRRRRR-CACHE-" */
	const char *cur_path;
	pid_t self;
	bool on_cur, on_old;     /* the process being scanned */
	unsigned cur, stale;
};

static int one_mapping(const struct procmaps_seg *s, void *arg)
{
	struct count *c = arg;
	if (s->loading)
		return 0; /* only the loader maps a segment it is loading */
	if (c->cur_path && !s->deleted && !strcmp(s->path, c->cur_path))
		c->on_cur = true;
	else
		c->on_old = true;
	return 0;
}

static int one_pid(long pid, void *arg)
{
	struct count *c = arg;
	if (pid == (long)c->self)
		return 0;
	c->on_cur = c->on_old = false;
	procmaps_scan_pid(pid, c->prefix_name, one_mapping, c); /* gone or not ours: skipped */
	c->cur += c->on_cur;
	c->stale += c->on_old && !c->on_cur;
	return 0;
}

void readers_count(const char *prefix_name, const char *cur_path, pid_t self, unsigned *cur,
		   unsigned *stale)
{
	struct count c = {.prefix_name = prefix_name, .cur_path = cur_path, .self = self};
	procmaps_for_each_pid(one_pid, &c);
	*cur = c.cur;
	*stale = c.stale;
}
