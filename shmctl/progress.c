/* progress.c - see progress.h. */
#include "progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define BAR_WIDTH 30
#define REDRAW_NS 100000000LL /* 0.1 s */

void progress_init(struct progress *p)
{
	memset(p, 0, sizeof *p);
	p->enabled = isatty(STDERR_FILENO) == 1;
}

void progress_update(void *ctx, const char *phase, uint64_t done, uint64_t total)
{
	struct progress *p = ctx;
	if (!p->enabled)
		return;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	bool new_phase = strncmp(phase, p->phase, sizeof p->phase - 1) != 0;
	long long since = (long long)(now.tv_sec - p->last.tv_sec) * 1000000000LL +
			  (now.tv_nsec - p->last.tv_nsec);
	if (!new_phase && since < REDRAW_NS && !(total && done >= total))
		return;
	p->last = now;
	snprintf(p->phase, sizeof p->phase, "%s", phase);

	if (total) {
		if (done > total)
			done = total;
		unsigned fill = (unsigned)((double)done / (double)total * BAR_WIDTH);
		char bar[BAR_WIDTH + 1];
		memset(bar, '#', fill);
		memset(bar + fill, '.', BAR_WIDTH - fill);
		bar[BAR_WIDTH] = 0;
		fprintf(stderr, "\r\033[K%-10s [%s] %3u%%  %" PRIu64 "/%" PRIu64, p->phase, bar,
			(unsigned)((double)done / (double)total * 100.0), done, total);
	} else {
		fprintf(stderr, "\r\033[K%-10s %" PRIu64, p->phase, done);
	}
	fflush(stderr);
	p->drawn = true;
}

void progress_clear(struct progress *p)
{
	if (p->drawn) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		p->drawn = false;
	}
}
