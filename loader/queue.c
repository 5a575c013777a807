/* queue.c - the worker's job queue and its replies (queue.h): pushed from
 * any thread, taken by the worker; replies posted by the worker (and what
 * runs for it), taken by the main thread. Guarded by L->qlock. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "queue.h"

#include "json.h"

struct job *job_new(enum job_kind kind, const char *name)
{
	struct job *j = calloc(1, sizeof *j);
	if (!j)
		return NULL;
	j->kind = kind;
	if (name)
		snprintf(j->name, sizeof j->name, "%s", name);
	return j;
}

/* j at the queue's end; L->qlock held */
static void append(struct loader *L, struct job *j)
{
	if (!j->queued_unix)
		j->queued_unix = (uint64_t)time(NULL);
	*L->jobs_tail = j;
	L->jobs_tail = &j->next;
	pthread_cond_signal(&L->qcond);
}

void worker_push(struct loader *L, struct job *j)
{
	pthread_mutex_lock(&L->qlock);
	append(L, j);
	pthread_mutex_unlock(&L->qlock);
}

void worker_push_all(struct loader *L, struct job **list)
{
	pthread_mutex_lock(&L->qlock);
	struct job *j = *list;
	*list = NULL;
	while (j) {
		struct job *nx = j->next;
		j->next = NULL;
		append(L, j);
		j = nx;
	}
	pthread_mutex_unlock(&L->qlock);
}

int worker_push_live(struct loader *L, struct job *j)
{
	pthread_mutex_lock(&L->qlock);
	int stopped = L->qstop;
	if (!stopped)
		append(L, j);
	pthread_mutex_unlock(&L->qlock);
	return stopped ? -ECANCELED : 0;
}

void worker_post(struct loader *L, uint64_t client, char *line, int failed)
{
	if (!client) {
		free(line);
		return;
	}
	struct done *d = calloc(1, sizeof *d);
	if (!d) {
		free(line);
		return;
	}
	d->client = client;
	d->line = line ? line : json_error("out of memory");
	d->failed = failed || !line;
	pthread_mutex_lock(&L->qlock);
	*L->dones_tail = d;
	L->dones_tail = &d->next;
	pthread_mutex_unlock(&L->qlock);
	uint64_t one = 1;
	ssize_t w = write(L->done_fd, &one, sizeof one);
	(void)w;
}

struct done *worker_take_done(struct loader *L)
{
	uint64_t n;
	ssize_t r = read(L->done_fd, &n, sizeof n);
	(void)r;
	pthread_mutex_lock(&L->qlock);
	struct done *d = L->dones;
	L->dones = NULL;
	L->dones_tail = &L->dones;
	pthread_mutex_unlock(&L->qlock);
	return d;
}
