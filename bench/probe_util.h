/* probe_util.h - what mem_probe.c and class_probe.c share: the thread's CPU time, and the
 * median of a run's rounds. */
#ifndef SHMKV_BENCH_PROBE_UTIL_H
#define SHMKV_BENCH_PROBE_UTIL_H

#include <stdlib.h>
#include <time.h>

/* the calling thread's CPU time in ns: on a shared machine the wall clock
 * counts other processes' time slices too */
static inline double probe_cpu_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static inline int probe_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* the median of v[0..n), n > 0; sorts v */
static inline double probe_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, probe_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
