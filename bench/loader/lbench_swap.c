/* lbench_swap.c - swap latency: from the rename of a new image into the spool
 * until every reader serves the new generation.
 *
 * Usage: lbench_swap --root ROOT --spool SPOOL --cache NAME --image A --image B
 *                    [--swaps N] [--readers K] [--sleep-us U] [--gets G]
 *                    [--pretouch DIR]
 *
 * Needs a shmkv-loader serving ROOT with spool SPOOL (the images must be on
 * the spool's filesystem). The first drop (image A) is a warm-up and is not
 * timed; then N swaps alternate B, A, B, ... Each swap hard-links the image
 * to SPOOL/.lbench-NAME.tmp and renames that to SPOOL/NAME.shmkv (the loader
 * removes it after the load; the image itself stays).
 *
 * K reader processes (forked; each its own handle) loop: shmkv_refresh(), G
 * random gets of key_<i> (i < __n), then sleep U microseconds (0: never
 * sleep, a busy reader). A reader stamps CLOCK_REALTIME right after the
 * refresh that moved it to a new generation.
 *
 * Per swap, all on CLOCK_REALTIME (the control segment's published_ns is
 * CLOCK_REALTIME too):
 *   total_ms    rename -> the last reader on the new generation
 *   publish_ms  rename -> published_ns (inotify pick-up, load, publish)
 *   load_ms     the loader's own load time (`status`: load_ms; ms resolution)
 *   pickup_ms   publish_ms - load_ms (inotify, queueing, commit, publish)
 *   first_ms / last_ms   published_ns -> first / last reader on it
 *   refresh_us  the slowest reader's shmkv_refresh() call that moved it
 * Prints "key=value" lines per swap and min/median/max lines.
 *
 * --pretouch DIR: before each drop (untimed), run lbench_copy --touch-only
 * (from this program's directory) for the image's size in DIR, the loader's
 * segment directory: see lbench_copy.c on VMs that hand free memory back.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "lbench_util.h"
#include "shmkv.h"

#define MAX_READERS 64
#define MAX_GENS 256 /* generations kept per reader (ring) */

struct shared {
	_Atomic uint64_t cur_gen[MAX_READERS];
	uint64_t seen_ns[MAX_READERS][MAX_GENS];    /* REALTIME when on gen g */
	uint64_t refresh_ns[MAX_READERS][MAX_GENS]; /* that refresh call's duration */
	_Atomic uint64_t gets[MAX_READERS];
	_Atomic uint64_t bad[MAX_READERS];
	_Atomic int ready;
	_Atomic int stop;
};

static const char *root, *cache;
static struct shared *sh;

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int reader(int id, unsigned sleep_us, unsigned gets)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	shmkv *db;
	char why[512];
	int err = shmkv_attach_diag(root, cache, 0, &db, why, sizeof why);
	if (err) {
		fprintf(stderr, "reader %d: attach: %s\n", id, why);
		return 1;
	}
	uint64_t g = shmkv_generation(db), rng = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
	sh->seen_ns[id][g % MAX_GENS] = lb_now_ns(CLOCK_REALTIME);
	/* release: seen_ns before cur_gen; pairs with the acquire in wait_readers() */
	atomic_store_explicit(&sh->cur_gen[id], g, memory_order_release);
	atomic_fetch_add(&sh->ready, 1);
	int64_t n = 0;
	shmkv_get_i64(db, "__n", 3, &n);
	struct timespec nap = {0, (long)sleep_us * 1000};
	char key[32];
	uint64_t done = 0, bad = 0;
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		uint64_t a = lb_now_ns(CLOCK_MONOTONIC);
		err = shmkv_refresh(db);
		if (err == 1) {
			uint64_t now = lb_now_ns(CLOCK_REALTIME);
			g = shmkv_generation(db);
			sh->seen_ns[id][g % MAX_GENS] = now;
			sh->refresh_ns[id][g % MAX_GENS] = lb_now_ns(CLOCK_MONOTONIC) - a;
			atomic_store_explicit(&sh->cur_gen[id], g, memory_order_release); /* as above */
			if (shmkv_get_i64(db, "__n", 3, &n) || n <= 0)
				bad++;
		} else if (err < 0) {
			bad++;
		}
		for (unsigned i = 0; i < gets && n > 0; i++) {
			size_t kl = lb_key(key, xorshift(&rng) % (uint64_t)n);
			const void *v;
			size_t len;
			if (shmkv_get_bytes(db, key, kl, &v, &len))
				bad++;
		}
		done += gets;
		if ((done & 0xffff) < gets) {
			atomic_store_explicit(&sh->gets[id], done, memory_order_relaxed);
			atomic_store_explicit(&sh->bad[id], bad, memory_order_relaxed);
		}
		if (sleep_us)
			nanosleep(&nap, NULL);
	}
	atomic_store_explicit(&sh->gets[id], done, memory_order_relaxed);
	atomic_store_explicit(&sh->bad[id], bad, memory_order_relaxed);
	shmkv_close(db);
	return 0;
}

/* A consistent copy of generation and published_ns (lib's seqcount copy). */
static int ctl_read(const shmkv_ctl *c, uint64_t *gen, int64_t *pub)
{
	shmkv_ctl copy;
	if (shmkv_ctl_read(c, &copy))
		return -1;
	*gen = copy.generation;
	*pub = copy.published_ns;
	return 0;
}

static const shmkv_ctl *ctl_map(void)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s.ctl", root, cache);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	void *m = mmap(NULL, SHMKV_CTL_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	return m == MAP_FAILED ? NULL : (const shmkv_ctl *)m;
}

static void sleep_us(unsigned us)
{
	struct timespec t = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
	nanosleep(&t, NULL);
}

static void drop(const char *spool, const char *image)
{
	char tmp[4096], dst[4096];
	snprintf(tmp, sizeof tmp, "%s/.lbench-%s.tmp", spool, cache);
	snprintf(dst, sizeof dst, "%s/%s.shmkv", spool, cache);
	unlink(tmp);
	if (link(image, tmp) != 0)
		lb_die("link %s -> %s: %s", image, tmp, strerror(errno));
	if (rename(tmp, dst) != 0)
		lb_die("rename %s -> %s: %s", tmp, dst, strerror(errno));
}

/* Waits (bounded) until the generation passes g0; returns the new one. */
static uint64_t wait_publish(const shmkv_ctl **c, uint64_t g0, int64_t *pub, unsigned timeout_s)
{
	uint64_t end = lb_now_ns(CLOCK_MONOTONIC) + (uint64_t)timeout_s * 1000000000u, g = 0;
	for (;;) {
		if (!*c)
			*c = ctl_map();
		if (*c && ctl_read(*c, &g, pub) == 0 && g > g0)
			return g;
		if (lb_now_ns(CLOCK_MONOTONIC) > end) {
			char line[600], *r;
			snprintf(line, sizeof line, "status\t%s", cache);
			r = lb_request(root, line);
			lb_die("no new generation after %u s (loader says: %s)", timeout_s,
			       r ? r : strerror(errno));
		}
		sleep_us(20);
	}
}

static int wait_readers(int k, uint64_t g, unsigned timeout_ms)
{
	uint64_t end = lb_now_ns(CLOCK_MONOTONIC) + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		int all = 1;
		for (int i = 0; i < k; i++) /* pairs with the release in reader() */
			all &= atomic_load_explicit(&sh->cur_gen[i], memory_order_acquire) >= g;
		if (all)
			return 0;
		if (lb_now_ns(CLOCK_MONOTONIC) > end)
			return -1;
		sleep_us(20);
	}
}

static void pretouch(const char *dir, const char *image)
{
	char self[4096], cmd[12288];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	struct stat st;
	if (n <= 0 || stat(image, &st) != 0)
		lb_die("pretouch: %s", strerror(errno));
	self[n] = 0;
	char *slash = strrchr(self, '/');
	*slash = 0;
	snprintf(cmd, sizeof cmd, "'%s/lbench_copy' --touch-only %llu --dir '%s'", self,
		 (unsigned long long)st.st_size, dir);
	if (system(cmd) != 0)
		lb_die("pretouch failed: %s", cmd);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *spool = NULL, *img[2] = {NULL, NULL}, *pre = NULL;
	int swaps = 5, k = 4;
	unsigned sleep = 0, gets = 16;
	int nimg = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--root") && i + 1 < argc)
			root = argv[++i];
		else if (!strcmp(argv[i], "--spool") && i + 1 < argc)
			spool = argv[++i];
		else if (!strcmp(argv[i], "--cache") && i + 1 < argc)
			cache = argv[++i];
		else if (!strcmp(argv[i], "--image") && i + 1 < argc && nimg < 2)
			img[nimg++] = argv[++i];
		else if (!strcmp(argv[i], "--swaps") && i + 1 < argc)
			swaps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--readers") && i + 1 < argc)
			k = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--sleep-us") && i + 1 < argc)
			sleep = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--gets") && i + 1 < argc)
			gets = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--pretouch") && i + 1 < argc)
			pre = argv[++i];
		else
			lb_die("usage: %s --root ROOT --spool SPOOL --cache NAME --image A --image B "
			       "[--swaps N] [--readers K] [--sleep-us U] [--gets G] [--pretouch DIR]",
			       argv[0]);
	}
	if (!root || !spool || !cache || nimg != 2 || swaps < 1 || swaps > MAX_GENS / 2 ||
	    k < 1 || k > MAX_READERS)
		lb_die("missing or bad options (--swaps 1..%d, --readers 1..%d)", MAX_GENS / 2,
		       MAX_READERS);
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		lb_die("mmap: %s", strerror(errno));

	/* warm-up: image A, untimed */
	const shmkv_ctl *c = ctl_map();
	uint64_t g0 = 0;
	int64_t pub = 0;
	if (c && ctl_read(c, &g0, &pub))
		lb_die("control segment stays mid-update");
	drop(spool, img[0]);
	g0 = wait_publish(&c, g0, &pub, 300);

	pid_t pids[MAX_READERS];
	fflush(stdout);
	for (int i = 0; i < k; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			lb_die("fork: %s", strerror(errno));
		if (pids[i] == 0)
			_exit(reader(i, sleep, gets));
	}
	uint64_t end = lb_now_ns(CLOCK_MONOTONIC) + 10000000000u;
	while (atomic_load(&sh->ready) < k) {
		if (lb_now_ns(CLOCK_MONOTONIC) > end)
			lb_die("readers did not attach within 10 s");
		sleep_us(1000);
	}
	if (wait_readers(k, g0, 10000))
		lb_die("readers not on generation %llu", (unsigned long long)g0);
	sleep_us(200000);

	double *v = calloc((size_t)swaps * 8, sizeof(double));
	if (!v)
		lb_die("out of memory");
	double *total = v, *publish = v + swaps, *load = publish + swaps, *pickup = load + swaps,
	       *first = pickup + swaps, *last = first + swaps, *refresh = last + swaps,
	       *alloc = refresh + swaps;
	printf("readers=%d sleep_us=%u gets_per_loop=%u\n", k, sleep, gets);
	for (int s = 0; s < swaps; s++) {
		const char *image = img[(s + 1) % 2];
		if (pre)
			pretouch(pre, image);
		uint64_t t_rename = lb_now_ns(CLOCK_REALTIME);
		drop(spool, image);
		uint64_t g = wait_publish(&c, g0, &pub, 300);
		if (g != g0 + 1)
			lb_die("generation jumped from %llu to %llu", (unsigned long long)g0,
			       (unsigned long long)g);
		if (wait_readers(k, g, 10000))
			lb_die("readers not on generation %llu after 10 s", (unsigned long long)g);
		uint64_t lo = UINT64_MAX, hi = 0, rmax = 0;
		for (int i = 0; i < k; i++) {
			uint64_t t = sh->seen_ns[i][g % MAX_GENS];
			lo = t < lo ? t : lo;
			hi = t > hi ? t : hi;
			uint64_t r = sh->refresh_ns[i][g % MAX_GENS];
			rmax = r > rmax ? r : rmax;
		}
		char line[600];
		snprintf(line, sizeof line, "status\t%s", cache);
		char *st = lb_request(root, line);
		if (!st)
			lb_die("status: %s", strerror(errno));
		char mem[64];
		lb_json_str(st, "memory", mem, sizeof mem);
		total[s] = (double)(hi - t_rename) / 1e6;
		publish[s] = (double)((uint64_t)pub - t_rename) / 1e6;
		load[s] = (double)lb_json_u64(st, "load_ms");
		alloc[s] = (double)lb_json_u64(st, "alloc_ms");
		pickup[s] = publish[s] - load[s];
		first[s] = ((double)lo - (double)pub) / 1e6;
		last[s] = ((double)hi - (double)pub) / 1e6;
		refresh[s] = (double)rmax / 1e3;
		printf("swap=%d gen=%llu image=%s bytes=%llu memory=%s total_ms=%.2f publish_ms=%.2f "
		       "load_ms=%.0f alloc_ms=%.0f gbps=%.2f pickup_ms=%.2f first_ms=%.3f last_ms=%.3f "
		       "refresh_us=%.0f\n", s + 1, (unsigned long long)g, image,
		       (unsigned long long)lb_json_u64(st, "image_size"), mem, total[s], publish[s],
		       load[s], alloc[s], lb_json_f64(st, "gbps"), pickup[s], first[s], last[s],
		       refresh[s]);
		fflush(stdout);
		free(st);
		g0 = g;
		sleep_us(300000); /* let the freed segment go before the next load */
	}
	atomic_store(&sh->stop, 1);
	int failed = 0;
	for (int i = 0; i < k; i++) {
		int ws;
		waitpid(pids[i], &ws, 0);
		failed |= !WIFEXITED(ws) || WEXITSTATUS(ws);
	}
	uint64_t gsum = 0, bsum = 0;
	for (int i = 0; i < k; i++) {
		gsum += atomic_load(&sh->gets[i]);
		bsum += atomic_load(&sh->bad[i]);
	}
	const char *names[] = {"total_ms", "publish_ms", "load_ms", "alloc_ms", "pickup_ms",
			       "first_ms", "last_ms", "refresh_us"};
	double *cols[] = {total, publish, load, alloc, pickup, first, last, refresh};
	const char *stat[] = {"min", "median", "max"};
	for (int q = 0; q < 3; q++) {
		printf("%s", stat[q]);
		for (int j = 0; j < 8; j++) {
			double tmp[MAX_GENS];
			memcpy(tmp, cols[j], sizeof(double) * (size_t)swaps);
			qsort(tmp, (size_t)swaps, sizeof(double), cmp_d);
			double x = q == 0 ? tmp[0]
				   : q == 2 ? tmp[swaps - 1]
				   : swaps % 2 ? tmp[swaps / 2]
					       : (tmp[swaps / 2 - 1] + tmp[swaps / 2]) / 2;
			printf(" %s=%.3f", names[j], x);
		}
		printf("\n");
	}
	printf("reader_gets=%llu reader_errors=%llu\n", (unsigned long long)gsum,
	       (unsigned long long)bsum);
	free(v);
	return failed || bsum ? 1 : 0;
}
