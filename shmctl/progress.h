/* progress.h - a progress bar on stderr: the builder's progress callback, and
 * `cache load` (cache.c, from the loader's status). Drawn only when stderr is
 * a terminal, at most ten times a second (and on every phase change); silent
 * otherwise. */
#ifndef SHMCTL_PROGRESS_H
#define SHMCTL_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct progress {
	bool enabled;          /* stderr is a terminal */
	bool drawn;            /* a bar is on screen: clear before other output */
	struct timespec last;  /* last redraw */
	char phase[32];
};

void progress_init(struct progress *p);
/* A shmkv_progress_fn: ctx is the struct progress. total 0 = unknown. */
void progress_update(void *ctx, const char *phase, uint64_t done, uint64_t total);
/* Erases the bar (call before printing anything else). */
void progress_clear(struct progress *p);

#endif /* SHMCTL_PROGRESS_H */
