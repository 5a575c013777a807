/* wb_util.h - helpers shared by the write-path benchmarks (header-only),
 * beside bench/loader/lbench_util.h (clock, control-socket request, JSON
 * fields, key_<i>, quantiles), which they include:
 *
 *   wb_attach(root, name, &db)     attach, waiting (bounded) while nothing is published
 *   wb_refresh(root, name, &db)    shmkv_refresh, attaching again after SHMKV_ESTALE
 *   wb_cpu_ticks(pid)              utime + stime of a process, clock ticks
 *   wb_machine_ticks(&busy)        all CPUs' ticks, and the busy ones among them
 *   wb_dquantile(v, n, q)          quantile of doubles, interpolated (sorts v)
 *   wb_sleep_ns(ns)
 *   wb_ctl_published(root, name, &gen, &ns)  generation and published_ns of a cache
 *   wb_loader_pid(root)            the loader's pid (`ping`)
 *
 * Like the loader benchmarks, nothing here links loader code.
 */
#ifndef WB_UTIL_H
#define WB_UTIL_H

#include <fcntl.h>
#include <sys/mman.h>

#include "lbench_util.h"
#include "shmkv.h"

static inline void wb_sleep_ns(uint64_t ns)
{
	struct timespec t = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
	while (nanosleep(&t, &t) != 0 && errno == EINTR)
		;
}

/* Attaches to cache name under root, retrying for up to 30 s while it is
 * not published (-EAGAIN) or its control segment is being replaced. */
static inline int wb_attach(const char *root, const char *name, shmkv **out, char *why,
			    size_t why_len)
{
	uint64_t end = lb_now_ns(CLOCK_MONOTONIC) + 30000000000u;
	for (;;) {
		int err = shmkv_attach_diag(root, name, 0, out, why, why_len);
		if (!err || (err != -EAGAIN && err != SHMKV_ESTALE && err != -ENOENT) ||
		    lb_now_ns(CLOCK_MONOTONIC) > end)
			return err;
		wb_sleep_ns(1000000);
	}
}

/* shmkv_refresh(); a control segment replaced (the first change of a cache
 * makes it protocol 2: lib/PROTOCOL.md, "Protocol 2") is attached again.
 * 1: the handle moved to a new generation; 0: nothing new; < 0: an error
 * (-EAGAIN mid-publish is 0: the next call sees it). */
static inline int wb_refresh(const char *root, const char *name, shmkv **db)
{
	int err = shmkv_refresh(*db);
	if (err == -EAGAIN)
		return 0;
	if (err != SHMKV_ESTALE)
		return err;
	char why[512];
	shmkv *fresh = NULL;
	err = wb_attach(root, name, &fresh, why, sizeof why);
	if (err) {
		fprintf(stderr, "attach %s again: %s\n", name, why);
		return err;
	}
	shmkv_close(*db);
	*db = fresh;
	return 1;
}

/* utime + stime of pid (0: this process) in clock ticks; 0 when unreadable. */
static inline uint64_t wb_cpu_ticks(pid_t pid)
{
	char p[64], buf[1024];
	if (pid)
		snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
	else
		snprintf(p, sizeof p, "/proc/self/stat");
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	const char *s = strrchr(buf, ')'); /* the name may hold spaces */
	if (!s)
		return 0;
	/* after ")": state(3) ppid pgrp session tty tpgid flags minflt cminflt
	 * majflt cmajflt utime(14) stime(15) */
	unsigned long long ut = 0, st = 0;
	if (sscanf(s + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return ut + st;
}

/* Ticks of all CPUs since boot (/proc/stat "cpu"); *busy: those not idle
 * or waiting for I/O. */
static inline uint64_t wb_machine_ticks(uint64_t *busy)
{
	unsigned long long v[10] = {0};
	FILE *f = fopen("/proc/stat", "re");
	*busy = 0;
	if (!f)
		return 0;
	int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
		       &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
	fclose(f);
	if (n < 4)
		return 0;
	uint64_t total = 0;
	for (int i = 0; i < 8; i++) /* guest time (8, 9) is already in user */
		total += v[i];
	*busy = total - v[3] - v[4];
	return total;
}

static inline int wb_cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Sorts v and returns its quantile q in [0, 1], interpolated between the
 * two nearest ranks (q 0.5: the median; 0 when empty). */
static inline double wb_dquantile(double *v, size_t n, double q)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof *v, wb_cmp_d);
	double x = q * (double)(n - 1);
	size_t i = (size_t)x;
	if (i + 1 >= n)
		return v[n - 1];
	return v[i] + (x - (double)i) * (v[i + 1] - v[i]);
}

/* The generation and published_ns (CLOCK_REALTIME) of ROOT/NAME.ctl, read
 * through a fresh mapping (the file is replaced when a cache turns protocol
 * 2); 0 or -1. */
static inline int wb_ctl_published(const char *root, const char *name, uint64_t *gen,
				   int64_t *published_ns)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s.ctl", root, name);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	void *m = mmap(NULL, SHMKV_CTL_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -1;
	shmkv_ctl copy;
	int err = shmkv_ctl_read((const shmkv_ctl *)m, &copy);
	munmap(m, SHMKV_CTL_SIZE);
	if (err)
		return -1;
	*gen = copy.generation;
	*published_ns = copy.published_ns;
	return 0;
}

/* The pid of the loader serving root (its `ping` reply); dies when none answers. */
static inline pid_t wb_loader_pid(const char *root)
{
	char *pong = lb_request(root, "ping");
	if (!pong || !lb_json_ok(pong))
		lb_die("%s/control.sock: ping: %s", root, pong ? pong : strerror(errno));
	pid_t pid = (pid_t)lb_json_u64(pong, "pid");
	free(pong);
	return pid;
}

#endif /* WB_UTIL_H */
