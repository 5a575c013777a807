/* lbench_attach.c - attach time and per-reader memory of a loader-managed cache.
 *
 * Usage:
 *   lbench_attach time --root ROOT --cache NAME [--cycles N]
 *   lbench_attach mem  --root ROOT --cache NAME --readers K [--gets all|N]
 *   lbench_attach reader --root ROOT --cache NAME [--gets all|N] [--no-attach]
 *   lbench_attach refresh --root ROOT --cache NAME [--calls N] [--reps R]
 *
 * time: N cycles (default 10000) of shmkv_attach_diag(); one get of a random
 * key_<i> (the first get after attach: it faults in the pages it reads);
 * a second get of another random key; shmkv_close(). Prints min / median /
 * p99 / max of each step in microseconds (CLOCK_MONOTONIC).
 *
 * mem: starts K reader processes (this program, exec'ed, so nothing is
 * shared with the parent but the cache) and one baseline process (the same
 * program, not attached). A reader attaches, does its gets (all: key_0 ..
 * key_<n-1> in order, which touches every page of the image; N: N random
 * keys), reports ready and waits for its stdin to close. Then, per process,
 * /proc/PID/smaps_rollup (Rss, Pss, Private_Dirty, ...), /proc/PID/status
 * (VmPTE, HugetlbPages) and the segment's own mapping in /proc/PID/smaps
 * (Rss, Pss, Private_*, *_Hugetlb) are read, and /proc/meminfo (Shmem, huge
 * pages in use) before the readers start and once all are ready: the data
 * is counted once when those do not grow with K. The summary's overhead_kb
 * is (Private_Dirty outside the segment + VmPTE) of a reader, averaged,
 * less the same of the baseline process. Prints one "key=value" line per
 * process (kB) and a summary line.
 *
 * reader: the child side of mem.
 *
 * refresh: what shmkv_refresh() costs a reader when nothing changed (one
 * fstat of the control segment per call, where it was one atomic load).
 * Attaches once, then R rounds (default 5) of: N calls (default 1M)
 * of shmkv_refresh(), each of which must return 0; N gets of random keys on
 * the same handle (the scale: a refresh as a multiple of a get). Prints ns
 * per call of each round, by the wall clock and by the thread's CPU time
 * (a loaded machine inflates the first), the median and best round, and the
 * load average.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "lbench_util.h"
#include "shmkv.h"

static const char *root, *cache, *gets_arg = "all";

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int get_key(const shmkv *db, uint64_t i)
{
	char k[32];
	size_t kl = lb_key(k, i);
	const void *v;
	size_t len;
	return shmkv_get_bytes(db, k, kl, &v, &len);
}

static shmkv *attach_or_die(void)
{
	shmkv *db;
	char why[512];
	int err = shmkv_attach_diag(root, cache, 0, &db, why, sizeof why);
	if (err)
		lb_die("attach %s under %s: %s", cache, root, why);
	return db;
}

static void print_us(const char *name, uint64_t *v, size_t n)
{
	printf("%s min_us=%.2f median_us=%.2f p99_us=%.2f max_us=%.2f\n", name,
	       (double)lb_quantile(v, n, 0) / 1e3, (double)lb_quantile(v, n, 0.5) / 1e3,
	       (double)lb_quantile(v, n, 0.99) / 1e3, (double)lb_quantile(v, n, 1) / 1e3);
}

static int do_time(unsigned cycles)
{
	shmkv *db = attach_or_die();
	int64_t n = 0;
	if (shmkv_get_i64(db, "__n", 3, &n) || n <= 0)
		lb_die("no __n in the image");
	printf("cache=%s generation=%llu keys=%lld image_bytes=%llu map_bytes=%llu\n", cache,
	       (unsigned long long)shmkv_generation(db), (long long)n,
	       (unsigned long long)db->size, (unsigned long long)db->map_len);
	shmkv_close(db);
	uint64_t *v = calloc((size_t)cycles * 5, sizeof(uint64_t));
	if (!v)
		lb_die("out of memory");
	uint64_t *att = v, *g1 = v + cycles, *g2 = g1 + cycles, *cl = g2 + cycles, *cyc = cl + cycles;
	uint64_t rng = 0x2545f4914f6cdd1dull;
	for (unsigned i = 0; i < cycles; i++) {
		uint64_t k1 = xorshift(&rng) % (uint64_t)n, k2 = xorshift(&rng) % (uint64_t)n;
		uint64_t t0 = lb_now_ns(CLOCK_MONOTONIC);
		char why[512];
		int err = shmkv_attach_diag(root, cache, 0, &db, why, sizeof why);
		uint64_t t1 = lb_now_ns(CLOCK_MONOTONIC);
		if (err)
			lb_die("attach: %s", why);
		if (get_key(db, k1))
			lb_die("key_%llu not found", (unsigned long long)k1);
		uint64_t t2 = lb_now_ns(CLOCK_MONOTONIC);
		if (get_key(db, k2))
			lb_die("key_%llu not found", (unsigned long long)k2);
		uint64_t t3 = lb_now_ns(CLOCK_MONOTONIC);
		shmkv_close(db);
		uint64_t t4 = lb_now_ns(CLOCK_MONOTONIC);
		att[i] = t1 - t0;
		g1[i] = t2 - t1;
		g2[i] = t3 - t2;
		cl[i] = t4 - t3;
		cyc[i] = t4 - t0;
	}
	printf("cycles=%u\n", cycles);
	print_us("attach", att, cycles);
	print_us("first_get", g1, cycles);
	print_us("second_get", g2, cycles);
	print_us("close", cl, cycles);
	print_us("cycle", cyc, cycles);
	free(v);
	return 0;
}

static double per_call_ns(uint64_t t0, uint64_t t1, unsigned calls)
{
	return (double)(t1 - t0) / (double)calls;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int do_refresh(unsigned calls, unsigned reps)
{
	shmkv *db = attach_or_die();
	int64_t n = 0;
	if (shmkv_get_i64(db, "__n", 3, &n) || n <= 0)
		lb_die("no __n in the image");
	/* wall clock and the thread's CPU time: on a loaded machine the wall
	 * figure counts the time other processes ran; the CPU figure does not */
	double *ref = calloc(reps, sizeof(double)), *get = calloc(reps, sizeof(double));
	double *ref_cpu = calloc(reps, sizeof(double)), *get_cpu = calloc(reps, sizeof(double));
	if (!ref || !get || !ref_cpu || !get_cpu)
		lb_die("out of memory");
	uint64_t rng = 0x2545f4914f6cdd1dull;
	for (unsigned r = 0; r < reps; r++) { /* interleaved: refresh, then gets, per round */
		uint64_t c0 = lb_now_ns(CLOCK_THREAD_CPUTIME_ID);
		uint64_t t0 = lb_now_ns(CLOCK_MONOTONIC);
		for (unsigned i = 0; i < calls; i++) {
			int err = shmkv_refresh(db);
			if (err != 0)
				lb_die("shmkv_refresh returned %d (%s): the cache changed during the run",
				       err, err < 0 ? shmkv_strerror(err) : "a new generation");
		}
		uint64_t t1 = lb_now_ns(CLOCK_MONOTONIC);
		uint64_t c1 = lb_now_ns(CLOCK_THREAD_CPUTIME_ID);
		for (unsigned i = 0; i < calls; i++)
			if (get_key(db, xorshift(&rng) % (uint64_t)n))
				lb_die("a key_<i> below __n was not found");
		uint64_t t2 = lb_now_ns(CLOCK_MONOTONIC);
		uint64_t c2 = lb_now_ns(CLOCK_THREAD_CPUTIME_ID);
		ref[r] = per_call_ns(t0, t1, calls);
		get[r] = per_call_ns(t1, t2, calls);
		ref_cpu[r] = per_call_ns(c0, c1, calls);
		get_cpu[r] = per_call_ns(c1, c2, calls);
		printf("round=%u refresh_ns=%.1f get_ns=%.1f refresh_cpu_ns=%.1f get_cpu_ns=%.1f\n",
		       r + 1, ref[r], get[r], ref_cpu[r], get_cpu[r]);
	}
	double load[3] = {0, 0, 0};
	if (getloadavg(load, 3) < 0)
		load[0] = load[1] = load[2] = -1;
	qsort(ref, reps, sizeof(double), cmp_double);
	qsort(get, reps, sizeof(double), cmp_double);
	qsort(ref_cpu, reps, sizeof(double), cmp_double);
	qsort(get_cpu, reps, sizeof(double), cmp_double);
	printf("summary cache=%s calls=%u reps=%u refresh_median_ns=%.1f refresh_best_ns=%.1f "
	       "get_median_ns=%.1f get_best_ns=%.1f refresh_cpu_median_ns=%.1f "
	       "get_cpu_median_ns=%.1f refresh_per_get_cpu=%.2f loadavg=%.2f,%.2f,%.2f\n",
	       cache, calls, reps, ref[reps / 2], ref[0], get[reps / 2], get[0],
	       ref_cpu[reps / 2], get_cpu[reps / 2], ref_cpu[reps / 2] / get_cpu[reps / 2],
	       load[0], load[1], load[2]);
	free(ref);
	free(get);
	free(ref_cpu);
	free(get_cpu);
	shmkv_close(db);
	return 0;
}

static int do_reader(int attach)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	shmkv *db = NULL;
	uint64_t done = 0;
	if (attach) {
		db = attach_or_die();
		int64_t n = 0;
		if (shmkv_get_i64(db, "__n", 3, &n) || n <= 0)
			lb_die("no __n in the image");
		if (!strcmp(gets_arg, "all")) {
			for (uint64_t i = 0; i < (uint64_t)n; i++, done++)
				if (get_key(db, i))
					lb_die("key_%llu not found", (unsigned long long)i);
		} else {
			uint64_t m = lb_parse_size(gets_arg), rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
			for (; done < m; done++)
				if (get_key(db, xorshift(&rng) % (uint64_t)n))
					lb_die("key not found");
		}
	}
	printf("ready %llu\n", (unsigned long long)done);
	fflush(stdout);
	char c;
	while (read(0, &c, 1) > 0)
		;
	shmkv_close(db);
	return 0;
}

struct proc {
	pid_t pid;
	int in, out; /* our end of its stdin, its stdout */
};

static void spawn(struct proc *p, int attach)
{
	int a[2], b[2];
	if (pipe2(a, O_CLOEXEC) || pipe2(b, O_CLOEXEC))
		lb_die("pipe: %s", strerror(errno));
	fflush(stdout);
	p->pid = fork();
	if (p->pid < 0)
		lb_die("fork: %s", strerror(errno));
	if (p->pid == 0) {
		dup2(a[0], 0);
		dup2(b[1], 1);
		char *argv[] = {"lbench_attach", "reader", "--root", (char *)root, "--cache",
				(char *)cache, "--gets", (char *)gets_arg,
				attach ? NULL : "--no-attach", NULL};
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(a[0]);
	close(b[1]);
	p->in = a[1];
	p->out = b[0];
}

static void wait_ready(struct proc *p)
{
	char buf[64];
	ssize_t n = read(p->out, buf, sizeof buf - 1);
	if (n <= 0 || strncmp(buf, "ready", 5))
		lb_die("reader %d did not get ready", (int)p->pid);
}

/* Sum of "key: N kB" lines; in smaps, only those of the mapping of path. */
static void proc_read(pid_t pid, const char *file, const char *path, const char **keys,
		      uint64_t *vals, int nkeys)
{
	char fn[64], line[4352];
	if (pid)
		snprintf(fn, sizeof fn, "/proc/%d/%s", (int)pid, file);
	else
		snprintf(fn, sizeof fn, "/proc/%s", file);
	FILE *f = fopen(fn, "r");
	if (!f)
		lb_die("%s: %s", fn, strerror(errno));
	int in = path == NULL;
	memset(vals, 0, sizeof *vals * (size_t)nkeys);
	while (fgets(line, sizeof line, f)) {
		size_t l = strlen(line);
		if (path && l && strchr("0123456789abcdef", line[0]) && strchr(line, '-') &&
		    strchr(line, ' ') && strchr(line, '-') < strchr(line, ' ')) {
			/* a mapping header: "start-end perms offset dev inode   path" */
			while (l && line[l - 1] == '\n')
				line[--l] = 0;
			size_t pl = strlen(path);
			in = l >= pl && !strcmp(line + l - pl, path);
			continue;
		}
		if (!in)
			continue;
		for (int i = 0; i < nkeys; i++) {
			size_t kl = strlen(keys[i]);
			if (!strncmp(line, keys[i], kl) && line[kl] == ':')
				vals[i] += strtoull(line + kl + 1, NULL, 10);
		}
	}
	fclose(f);
}

enum { R_RSS, R_PSS, R_PSS_SHMEM, R_SH_CLEAN, R_PRIV_CLEAN, R_PRIV_DIRTY, R_SH_HUGE, R_PRIV_HUGE, NR };
static const char *rollup_keys[NR] = {"Rss", "Pss", "Pss_Shmem", "Shared_Clean", "Private_Clean",
				      "Private_Dirty", "Shared_Hugetlb", "Private_Hugetlb"};
enum { S_PTE, S_HUGE, S_RSS, NS };
static const char *status_keys[NS] = {"VmPTE", "HugetlbPages", "VmRSS"};
enum { M_SIZE, M_RSS, M_PSS, M_PRIV_CLEAN, M_PRIV_DIRTY, M_SH_HUGE, M_PRIV_HUGE, NM };
static const char *map_keys[NM] = {"Size", "Rss", "Pss", "Private_Clean", "Private_Dirty",
				   "Shared_Hugetlb", "Private_Hugetlb"};

struct mem {
	uint64_t r[NR], s[NS], m[NM];
};

static void measure(pid_t pid, const char *seg, struct mem *m)
{
	proc_read(pid, "smaps_rollup", NULL, rollup_keys, m->r, NR);
	proc_read(pid, "status", NULL, status_keys, m->s, NS);
	proc_read(pid, "smaps", seg, map_keys, m->m, NM);
}

static void print_mem(const char *what, int k, pid_t pid, const struct mem *m)
{
	printf("proc K=%d %s pid=%d rss_kb=%llu pss_kb=%llu pss_shmem_kb=%llu private_clean_kb=%llu "
	       "private_dirty_kb=%llu shared_hugetlb_kb=%llu private_hugetlb_kb=%llu vmpte_kb=%llu "
	       "hugetlbpages_kb=%llu seg_size_kb=%llu seg_rss_kb=%llu seg_pss_kb=%llu "
	       "seg_private_kb=%llu seg_hugetlb_kb=%llu\n", k, what, (int)pid,
	       (unsigned long long)m->r[R_RSS], (unsigned long long)m->r[R_PSS],
	       (unsigned long long)m->r[R_PSS_SHMEM], (unsigned long long)m->r[R_PRIV_CLEAN],
	       (unsigned long long)m->r[R_PRIV_DIRTY], (unsigned long long)m->r[R_SH_HUGE],
	       (unsigned long long)m->r[R_PRIV_HUGE], (unsigned long long)m->s[S_PTE],
	       (unsigned long long)m->s[S_HUGE], (unsigned long long)m->m[M_SIZE],
	       (unsigned long long)m->m[M_RSS], (unsigned long long)m->m[M_PSS],
	       (unsigned long long)(m->m[M_PRIV_CLEAN] + m->m[M_PRIV_DIRTY]),
	       (unsigned long long)(m->m[M_SH_HUGE] + m->m[M_PRIV_HUGE]));
}

/* System-wide memory in kB from /proc/meminfo: Shmem, and huge pages in use. */
static void meminfo(uint64_t *shmem_kb, uint64_t *huge_used_kb)
{
	static const char *keys[] = {"Shmem", "HugePages_Total", "HugePages_Free", "Hugepagesize"};
	uint64_t v[4];
	proc_read(0, "meminfo", NULL, keys, v, 4);
	*shmem_kb = v[0];
	*huge_used_kb = (v[1] - v[2]) * v[3];
}

static int do_mem(int k)
{
	/* the current segment's path, from the control segment */
	char p[4096];
	snprintf(p, sizeof p, "%s/%s.ctl", root, cache);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		lb_die("%s: %s", p, strerror(errno));
	const shmkv_ctl *ctl = mmap(NULL, SHMKV_CTL_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (ctl == MAP_FAILED)
		lb_die("mmap %s: %s", p, strerror(errno));
	shmkv_ctl copy;
	if (shmkv_ctl_read(ctl, &copy) || !copy.generation || !copy.segment_count)
		lb_die("%s: nothing published", p);
	shmkv_ctl_segment seg = copy.segments[0];
	munmap((void *)(uintptr_t)ctl, SHMKV_CTL_SIZE);

	struct proc base, *r = calloc((size_t)k, sizeof *r);
	struct mem bm, *m = calloc((size_t)k, sizeof *m);
	if (!r || !m)
		lb_die("out of memory");
	spawn(&base, 0);
	wait_ready(&base);
	uint64_t shmem0, huge0, shmem1, huge1;
	meminfo(&shmem0, &huge0);
	uint64_t t0 = lb_now_ns(CLOCK_MONOTONIC);
	for (int i = 0; i < k; i++)
		spawn(&r[i], 1);
	for (int i = 0; i < k; i++)
		wait_ready(&r[i]);
	double ready_s = (double)(lb_now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
	meminfo(&shmem1, &huge1);
	measure(base.pid, seg.path, &bm);
	for (int i = 0; i < k; i++)
		measure(r[i].pid, seg.path, &m[i]);
	print_mem("baseline", k, base.pid, &bm);
	double a_pss = 0, a_rss = 0, a_pd = 0, a_pte = 0, a_seg_rss = 0, a_seg_pss = 0, a_huge = 0,
	       a_pc = 0, sum_seg_pss = 0, sum_pss = 0, a_own = 0;
	for (int i = 0; i < k; i++) {
		print_mem("reader", k, r[i].pid, &m[i]);
		a_pss += (double)m[i].r[R_PSS] / k;
		sum_pss += (double)m[i].r[R_PSS];
		a_rss += (double)m[i].r[R_RSS] / k;
		a_pd += (double)m[i].r[R_PRIV_DIRTY] / k;
		a_pc += (double)m[i].r[R_PRIV_CLEAN] / k;
		a_pte += (double)m[i].s[S_PTE] / k;
		a_seg_rss += (double)m[i].m[M_RSS] / k;
		a_seg_pss += (double)m[i].m[M_PSS] / k;
		sum_seg_pss += (double)m[i].m[M_PSS];
		a_huge += (double)(m[i].m[M_SH_HUGE] + m[i].m[M_PRIV_HUGE]) / k;
		/* private memory that is not the segment: heap, stack, libc data, ... */
		a_own += (double)(m[i].r[R_PRIV_DIRTY] - m[i].m[M_PRIV_DIRTY]) / k;
	}
	/* overhead: what a reader has beyond the shared segment and beyond a
	 * process of the same program that did not attach */
	printf("summary K=%d memory=%s image_kb=%llu map_kb=%llu gets=%s ready_s=%.1f "
	       "rss_kb=%.0f pss_kb=%.0f pss_sum_kb=%.0f seg_rss_kb=%.0f seg_pss_kb=%.0f "
	       "seg_pss_sum_kb=%.0f seg_hugetlb_kb=%.0f private_dirty_kb=%.1f "
	       "own_private_dirty_kb=%.1f private_clean_kb=%.1f vmpte_kb=%.1f "
	       "base_private_dirty_kb=%llu base_vmpte_kb=%llu overhead_kb=%.1f "
	       "shmem_delta_kb=%lld hugetlb_delta_kb=%lld\n", k,
	       (seg.flags & SHMKV_SEG_HUGETLB) ? "hugetlb" : "shm",
	       (unsigned long long)(seg.size >> 10), (unsigned long long)(seg.map_size >> 10),
	       gets_arg, ready_s, a_rss, a_pss, sum_pss, a_seg_rss, a_seg_pss, sum_seg_pss, a_huge,
	       a_pd, a_own, a_pc, a_pte, (unsigned long long)bm.r[R_PRIV_DIRTY],
	       (unsigned long long)bm.s[S_PTE],
	       a_own + a_pte - (double)bm.r[R_PRIV_DIRTY] - (double)bm.s[S_PTE],
	       (long long)shmem1 - (long long)shmem0, (long long)huge1 - (long long)huge0);
	close(base.in);
	for (int i = 0; i < k; i++)
		close(r[i].in);
	int bad = 0, st;
	waitpid(base.pid, &st, 0);
	bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	for (int i = 0; i < k; i++) {
		waitpid(r[i].pid, &st, 0);
		bad |= !WIFEXITED(st) || WEXITSTATUS(st);
	}
	free(r);
	free(m);
	return bad;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		lb_die("usage: %s time|mem|reader|refresh --root ROOT --cache NAME [...]", argv[0]);
	const char *mode = argv[1];
	unsigned cycles = 10000, calls = 1000000, reps = 5;
	int k = 1, attach = 1;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--root") && i + 1 < argc)
			root = argv[++i];
		else if (!strcmp(argv[i], "--cache") && i + 1 < argc)
			cache = argv[++i];
		else if (!strcmp(argv[i], "--cycles") && i + 1 < argc)
			cycles = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--readers") && i + 1 < argc)
			k = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--gets") && i + 1 < argc)
			gets_arg = argv[++i];
		else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
			calls = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--no-attach"))
			attach = 0;
		else
			lb_die("unknown option %s", argv[i]);
	}
	if (!root || !cache)
		lb_die("--root and --cache are required");
	if (!strcmp(mode, "time"))
		return cycles ? do_time(cycles) : 1;
	if (!strcmp(mode, "mem"))
		return k >= 1 && k <= 256 ? do_mem(k) : 1;
	if (!strcmp(mode, "reader"))
		return do_reader(attach);
	if (!strcmp(mode, "refresh")) {
		if (!calls || !reps || reps > 1000)
			lb_die("--calls must be positive, --reps in 1..1000");
		return do_refresh(calls, reps);
	}
	lb_die("unknown mode %s", mode);
}
