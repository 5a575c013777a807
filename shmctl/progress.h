/* progress.h - a progress bar on stderr: the builder's progress callback, and
 * `cache load` (cache.c, from the loader's status). Drawn when stderr is a
 * terminal, at most ten times a second (and on every phase change); with
 * --progress (progress_forced) and no terminal, one line per phase change and
 * at most one a second (for logs); silent otherwise. */
#ifndef SHMCTL_PROGRESS_H
#define SHMCTL_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* --progress: report progress even when stderr is not a terminal */
extern bool progress_forced;

struct progress {
	bool enabled;          /* stderr is a terminal, or --progress */
	bool lines;            /* not a terminal: whole lines, no redraw */
	bool done_shown;       /* lines: this phase's 100% line is out */
	bool drawn;            /* a bar is on screen: clear before other output */
	struct timespec last;  /* last redraw */
	struct timespec start; /* this phase's start, and its done then: the rate */
	uint64_t done0;
	char phase[32];
};

void progress_init(struct progress *p);
/* A shmkv_progress_fn: ctx is the struct progress. total 0 = unknown. After a
 * second in a phase that is not done, the rate (units a second: bytes for the
 * builder's "reading", entries for its other phases) and the time left. */
void progress_update(void *ctx, const char *phase, uint64_t done, uint64_t total);
/* Erases the bar (call before printing anything else). */
void progress_clear(struct progress *p);

#endif /* SHMCTL_PROGRESS_H */
