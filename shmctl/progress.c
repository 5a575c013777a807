/* progress.c - see progress.h. */
#include "progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define BAR_WIDTH 30
#define REDRAW_NS 100000000LL /* 0.1 s */
#define LINE_NS 1000000000LL  /* 1 s between lines when stderr is no terminal */

bool progress_forced;

void progress_init(struct progress *p)
{
	memset(p, 0, sizeof *p);
	bool tty = isatty(STDERR_FILENO) == 1;
	p->enabled = tty || progress_forced;
	p->lines = !tty;
}

/* ", 12.3M/s, ETA 0:42" once the phase has run a second and is not done. */
static void rate_text(const struct progress *p, const struct timespec *now, uint64_t done,
		      uint64_t total, char *out, size_t len)
{
	double secs = (double)(now->tv_sec - p->start.tv_sec) +
		      (double)(now->tv_nsec - p->start.tv_nsec) / 1e9;
	if (secs < 1.0 || done <= p->done0 || (total && done >= total))
		return;
	double rate = (double)(done - p->done0) / secs;
	const char *unit = "";
	double shown = rate;
	if (shown >= 1e9) {
		shown /= 1e9;
		unit = "G";
	} else if (shown >= 1e6) {
		shown /= 1e6;
		unit = "M";
	} else if (shown >= 1e3) {
		shown /= 1e3;
		unit = "k";
	}
	int n = snprintf(out, len, ", %.1f%s/s", shown, unit);
	if (total && n > 0 && (size_t)n < len) {
		unsigned long long left = (unsigned long long)((double)(total - done) / rate + 0.5);
		snprintf(out + n, len - (size_t)n, ", ETA %llu:%02llu", left / 60, left % 60);
	}
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
	if (!new_phase && since < (p->lines ? LINE_NS : REDRAW_NS) && !(total && done >= total))
		return;
	if (p->lines && !new_phase && total && done >= total && p->done_shown)
		return; /* the 100% line of this phase is out already */
	p->last = now;
	if (new_phase) {
		p->start = now;
		p->done0 = done;
	}
	snprintf(p->phase, sizeof p->phase, "%s", phase);
	char rate[64] = "";
	rate_text(p, &now, done, total, rate, sizeof rate);
	if (p->lines) {
		p->done_shown = total && done >= total;
		if (total)
			fprintf(stderr, "%s: %3u%% %" PRIu64 "/%" PRIu64 "%s\n", p->phase,
				(unsigned)((double)(done > total ? total : done) / (double)total * 100.0),
				done > total ? total : done, total, rate);
		else
			fprintf(stderr, "%s: %" PRIu64 "\n", p->phase, done);
		fflush(stderr);
		return;
	}

	if (total) {
		if (done > total)
			done = total;
		unsigned fill = (unsigned)((double)done / (double)total * BAR_WIDTH);
		char bar[BAR_WIDTH + 1];
		memset(bar, '#', fill);
		memset(bar + fill, '.', BAR_WIDTH - fill);
		bar[BAR_WIDTH] = 0;
		fprintf(stderr, "\r\033[K%-10s [%s] %3u%%  %" PRIu64 "/%" PRIu64 "%s", p->phase, bar,
			(unsigned)((double)done / (double)total * 100.0), done, total, rate);
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
