/* wbench_set.c - latency of one change to a loaded cache: from sending it
 * until every attached reader serves the new value.
 *
 * Usage: wbench_set --root ROOT --cache NAME [--cache NAME...] --keys N
 *                   [--sets S] [--readers K] [--poll-us U] [--shmctl PATH]
 *                   [--warmup W] [--seed X] [--goal P50_MS P99_MS]
 *
 * Needs a shmkv-loader serving ROOT with each NAME loaded from an image of
 * keys key_0 .. key_<N-1> with string values (bench/writes/run.sh). K reader
 * processes (forked) each attach to every cache and loop: shmkv_refresh()
 * each handle (a replaced control segment is attached again), then, when a
 * set is in flight, one get of its key on its cache; the reader stamps the
 * time at which that get first returns the new value, then sleeps U µs
 * (timer slack 1 µs). The latency of a set is to the last reader.
 *
 * Each set is one upsert of key_<r> (r random below N, an existing key)
 * with a value no set used before, sent by one of two clients:
 *   socket   a direct control-socket client: one connection, the request
 *            `change⇥NAME⇥{"key": ..., "value": ...}`, the reply read
 *            (loader/README.md, "Control socket protocol")
 *   shmctl   fork + exec of `shmctl -r ROOT cache set NAME KEY VALUE`, to
 *            its exit (adds the process start: given with --shmctl)
 * The sets are interleaved: every round makes one set per cache and client,
 * in an order reversed every other round; S rounds (W untimed first).
 *
 * Per set (CLOCK_REALTIME, as the control segment's published_ns):
 *   total_ms     send -> the last reader returns the new value
 *   first_ms     send -> the first reader does
 *   reply_ms     send -> the reply read (socket) / shmctl exited
 *   publish_ms   send -> published_ns of the new generation
 *   readers_ms   published_ns -> the last reader (refresh poll, map, get)
 *   refresh_us   the slowest reader's shmkv_refresh() that moved it there
 *   pending      overlay records after the set (the reply's "changes";
 *                socket client only)
 *   loader CPU   the loader's CPU time (/proc, clock ticks) over the sets,
 *                per set: against total_ms, whether the loader worked or
 *                waited for a CPU
 * Prints one "set ..." line per timed set, then a markdown table per cache
 * and client: p50, p99 and max of total_ms, medians of the others; and
 * whether total_ms meets the goal (--goal, default p50 5 ms, p99 50 ms).
 */
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "wb_util.h"

#define MAX_READERS 16
#define MAX_CACHES 4
#define RING 64

enum { CLIENT_SOCKET, CLIENT_SHMCTL };

struct shared {
	_Atomic uint64_t seq; /* the set in flight (0: none) */
	int cache;            /* its cache, key and value: written before seq */
	char key[32], val[48];
	size_t klen, vlen;
	_Atomic uint64_t done[MAX_READERS]; /* the last set each reader saw */
	uint64_t seen_ns[MAX_READERS][RING];
	uint64_t refresh_ns[MAX_READERS][RING];
	_Atomic uint64_t errors[MAX_READERS];
	_Atomic int ready, stop;
};

static const char *root, *shmctl;
static pid_t loader_pid;
static const char *caches[MAX_CACHES];
static int ncache;
static struct shared *sh;

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int reader(int id, unsigned poll_us)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_TIMERSLACK, 1000UL); /* wake on time: the poll is part of the figure */
	shmkv *db[MAX_CACHES];
	uint64_t moved_ns[MAX_CACHES] = {0};
	char why[512];
	for (int c = 0; c < ncache; c++)
		if (wb_attach(root, caches[c], &db[c], why, sizeof why)) {
			fprintf(stderr, "reader %d: attach %s: %s\n", id, caches[c], why);
			return 1;
		}
	atomic_fetch_add(&sh->ready, 1);
	uint64_t last = 0;
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		for (int c = 0; c < ncache; c++) {
			uint64_t a = lb_now_ns(CLOCK_MONOTONIC);
			int r = wb_refresh(root, caches[c], &db[c]);
			if (r == 1)
				moved_ns[c] = lb_now_ns(CLOCK_MONOTONIC) - a;
			else if (r < 0)
				atomic_fetch_add(&sh->errors[id], 1);
		}
		/* acquire: the cache, key and value written before seq */
		uint64_t s = atomic_load_explicit(&sh->seq, memory_order_acquire);
		if (s && s != last) {
			const char *v;
			size_t len;
			int err = shmkv_get_str(db[sh->cache], sh->key, sh->klen, &v, &len);
			if (!err && len == sh->vlen && !memcmp(v, sh->val, len)) {
				sh->seen_ns[id][s % RING] = lb_now_ns(CLOCK_REALTIME);
				sh->refresh_ns[id][s % RING] = moved_ns[sh->cache];
				last = s;
				/* release: seen_ns before done; pairs with wait_readers() */
				atomic_store_explicit(&sh->done[id], s, memory_order_release);
			} else if (err && err != SHMKV_ENOTFOUND) {
				atomic_fetch_add(&sh->errors[id], 1);
			}
		}
		if (poll_us)
			wb_sleep_ns((uint64_t)poll_us * 1000u);
	}
	for (int c = 0; c < ncache; c++)
		shmkv_close(db[c]);
	return 0;
}

static int wait_readers(int k, uint64_t s, unsigned timeout_s)
{
	uint64_t end = lb_now_ns(CLOCK_MONOTONIC) + (uint64_t)timeout_s * 1000000000u;
	for (;;) {
		int all = 1;
		for (int i = 0; i < k; i++) /* pairs with the release in reader() */
			all &= atomic_load_explicit(&sh->done[i], memory_order_acquire) == s;
		if (all)
			return 0;
		if (lb_now_ns(CLOCK_MONOTONIC) > end)
			return -1;
		wb_sleep_ns(10000);
	}
}

/* `shmctl -r ROOT cache set NAME KEY VALUE`, its output discarded; 0 when
 * it exited 0. */
static int run_shmctl(const char *name, const char *key, const char *val)
{
	pid_t p = fork();
	if (p < 0)
		lb_die("fork: %s", strerror(errno));
	if (p == 0) {
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (null >= 0)
			dup2(null, 1);
		execl(shmctl, shmctl, "-r", root, "cache", "set", name, key, val, (char *)NULL);
		_exit(127);
	}
	int ws;
	while (waitpid(p, &ws, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? 0 : -1;
}

struct sample {
	double total, first, reply, publish, readers, refresh;
	uint64_t pending, loader_ticks; /* the loader's CPU time over the set */
};

/* One set of a new value of a random key on cache c through client cl; its
 * figures in *out. */
static void one_set(int c, int cl, int k, uint64_t keys, uint64_t *rng, struct sample *out)
{
	static uint64_t seq;
	seq++;
	sh->cache = c;
	sh->klen = lb_key(sh->key, xorshift(rng) % keys);
	sh->vlen = (size_t)snprintf(sh->val, sizeof sh->val, "wb-%llu", (unsigned long long)seq);
	char req[256];
	snprintf(req, sizeof req, "change\t%s\t{\"key\": \"%s\", \"value\": \"%s\"}", caches[c],
		 sh->key, sh->val);
	/* release: cache, key and value before seq; pairs with the reader's acquire */
	atomic_store_explicit(&sh->seq, seq, memory_order_release);
	uint64_t cpu0 = wb_cpu_ticks(loader_pid), t0 = lb_now_ns(CLOCK_REALTIME);
	out->pending = 0;
	if (cl == CLIENT_SOCKET) {
		char *r = lb_request(root, req);
		if (!r)
			lb_die("%s/control.sock: %s", root, strerror(errno));
		if (!lb_json_ok(r))
			lb_die("change refused: %s", r);
		out->pending = lb_json_u64(r, "changes");
		free(r);
	} else if (run_shmctl(caches[c], sh->key, sh->val)) {
		lb_die("%s cache set %s %s %s failed", shmctl, caches[c], sh->key, sh->val);
	}
	uint64_t t_reply = lb_now_ns(CLOCK_REALTIME);
	if (wait_readers(k, seq, 30))
		lb_die("readers did not see set %llu (%s=%s on %s) within 30 s",
		       (unsigned long long)seq, sh->key, sh->val, caches[c]);
	out->loader_ticks = wb_cpu_ticks(loader_pid) - cpu0;
	uint64_t lo = UINT64_MAX, hi = 0, rmax = 0, gen;
	for (int i = 0; i < k; i++) {
		uint64_t t = sh->seen_ns[i][seq % RING], r = sh->refresh_ns[i][seq % RING];
		lo = t < lo ? t : lo;
		hi = t > hi ? t : hi;
		rmax = r > rmax ? r : rmax;
	}
	int64_t pub = 0;
	if (wb_ctl_published(root, caches[c], &gen, &pub))
		lb_die("%s/%s.ctl: cannot read it", root, caches[c]);
	out->total = (double)(hi - t0) / 1e6;
	out->first = (double)(lo - t0) / 1e6;
	out->reply = (double)(t_reply - t0) / 1e6;
	out->publish = ((double)pub - (double)t0) / 1e6;
	out->readers = ((double)hi - (double)pub) / 1e6;
	out->refresh = (double)rmax / 1e3;
}

static const char *client_name(int cl)
{
	return cl == CLIENT_SOCKET ? "socket" : "shmctl";
}

static void usage(const char *argv0)
{
	lb_die("usage: %s --root ROOT --cache NAME [--cache NAME...] --keys N [--sets S] "
	       "[--readers K] [--poll-us U] [--shmctl PATH] [--warmup W] [--seed X] [--goal P50_MS P99_MS]",
	       argv0);
}

int main(int argc, char **argv)
{
	uint64_t keys = 0, rng = 0x243f6a8885a308d3ull;
	int sets = 200, k = 2, warm = 5;
	unsigned poll_us = 50;
	double goal50 = 5, goal99 = 50;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--root") && i + 1 < argc)
			root = argv[++i];
		else if (!strcmp(argv[i], "--cache") && i + 1 < argc && ncache < MAX_CACHES)
			caches[ncache++] = argv[++i];
		else if (!strcmp(argv[i], "--keys") && i + 1 < argc)
			keys = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--sets") && i + 1 < argc)
			sets = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--readers") && i + 1 < argc)
			k = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--poll-us") && i + 1 < argc)
			poll_us = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--shmctl") && i + 1 < argc)
			shmctl = argv[++i];
		else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
			warm = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			rng = strtoull(argv[++i], NULL, 0) | 1;
		else if (!strcmp(argv[i], "--goal") && i + 2 < argc) {
			goal50 = atof(argv[++i]);
			goal99 = atof(argv[++i]);
		} else
			usage(argv[0]);
	}
	if (!root || !ncache || !keys || sets < 1 || warm < 0 || k < 1 || k > MAX_READERS)
		usage(argv[0]);
	loader_pid = wb_loader_pid(root);
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		lb_die("mmap: %s", strerror(errno));
	int nclient = shmctl ? 2 : 1, ncombo = ncache * nclient;
	struct sample *s = calloc((size_t)sets * (size_t)ncombo, sizeof *s);
	if (!s)
		lb_die("out of memory");

	pid_t pids[MAX_READERS];
	fflush(stdout);
	for (int i = 0; i < k; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			lb_die("fork: %s", strerror(errno));
		if (pids[i] == 0)
			_exit(reader(i, poll_us));
	}
	uint64_t end = lb_now_ns(CLOCK_MONOTONIC) + 60000000000u;
	while (atomic_load(&sh->ready) < k) {
		if (lb_now_ns(CLOCK_MONOTONIC) > end)
			lb_die("readers did not attach within 60 s");
		wb_sleep_ns(1000000);
	}
	printf("readers=%d poll_us=%u keys=%llu sets_per_cache_and_client=%d clients=%s%s\n", k,
	       poll_us, (unsigned long long)keys, sets, client_name(CLIENT_SOCKET),
	       shmctl ? ",shmctl" : "");
	struct sample tmp;
	for (int w = 0; w < warm; w++) /* untimed: the first change turns a cache protocol 2 */
		for (int x = 0; x < ncombo; x++)
			one_set(x / nclient, x % nclient, k, keys, &rng, &tmp);
	for (int r = 0; r < sets; r++) {
		for (int j = 0; j < ncombo; j++) {
			int x = r % 2 ? ncombo - 1 - j : j;
			int c = x / nclient, cl = x % nclient;
			struct sample *o = &s[(size_t)x * (size_t)sets + (size_t)r];
			one_set(c, cl, k, keys, &rng, o);
			printf("set round=%d cache=%s client=%s total_ms=%.3f first_ms=%.3f "
			       "reply_ms=%.3f publish_ms=%.3f readers_ms=%.3f refresh_us=%.0f "
			       "pending=%llu\n", r, caches[c], client_name(cl), o->total, o->first,
			       o->reply, o->publish, o->readers, o->refresh,
			       (unsigned long long)o->pending);
		}
	}
	atomic_store(&sh->stop, 1);
	int failed = 0;
	uint64_t errs = 0;
	for (int i = 0; i < k; i++) {
		int ws;
		waitpid(pids[i], &ws, 0);
		failed |= !WIFEXITED(ws) || WEXITSTATUS(ws);
		errs += atomic_load(&sh->errors[i]);
	}

	printf("\n| cache | client | pending | sets | p50 ms | p99 ms | max ms | reply p50 | "
	       "publish p50 | publish p99 | readers p50 | readers p99 | refresh µs p50 | "
	       "loader CPU ms/set |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	double *v = malloc(sizeof(double) * (size_t)sets);
	if (!v)
		lb_die("out of memory");
	for (int x = 0; x < ncombo; x++) {
		struct sample *o = &s[(size_t)x * (size_t)sets];
		double q[9];
		uint64_t plo = UINT64_MAX, phi = 0, ticks = 0;
		for (int r = 0; r < sets; r++) {
			ticks += o[r].loader_ticks;
			plo = o[r].pending < plo ? o[r].pending : plo;
			phi = o[r].pending > phi ? o[r].pending : phi;
		}
#define COL(field, quant, slot)                                                                    \
	do {                                                                                       \
		for (int r = 0; r < sets; r++)                                                     \
			v[r] = o[r].field;                                                         \
		q[slot] = wb_dquantile(v, (size_t)sets, quant);                                    \
	} while (0)
		COL(total, 0.5, 0);
		COL(total, 0.99, 1);
		COL(total, 1.0, 2);
		COL(reply, 0.5, 3);
		COL(publish, 0.5, 4);
		COL(publish, 0.99, 5);
		COL(readers, 0.5, 6);
		COL(readers, 0.99, 7);
		COL(refresh, 0.5, 8);
#undef COL
		char pend[64];
		if (x % nclient == CLIENT_SOCKET)
			snprintf(pend, sizeof pend, "%llu-%llu", (unsigned long long)plo,
				 (unsigned long long)phi);
		else
			snprintf(pend, sizeof pend, "(as socket)");
		double cpu_ms = (double)ticks * 1000.0 / (double)sysconf(_SC_CLK_TCK) / sets;
		printf("| %s | %s | %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.3f | %.3f | "
		       "%.0f | %.1f |\n", caches[x / nclient], client_name(x % nclient), pend, sets,
		       q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8], cpu_ms);
	}
	printf("\ngoal: p50 <= %.0f ms, p99 <= %.0f ms (total_ms)\n", goal50, goal99);
	for (int x = 0; x < ncombo; x++) {
		struct sample *o = &s[(size_t)x * (size_t)sets];
		for (int r = 0; r < sets; r++)
			v[r] = o[r].total;
		double p50 = wb_dquantile(v, (size_t)sets, 0.5), p99 = wb_dquantile(v, (size_t)sets, 0.99);
		printf("goal %s %s: p50 %.2f ms %s, p99 %.2f ms %s\n", caches[x / nclient],
		       client_name(x % nclient), p50, p50 <= goal50 ? "met" : "MISSED", p99,
		       p99 <= goal99 ? "met" : "MISSED");
	}
	printf("reader_errors=%llu\n", (unsigned long long)errs);
	free(v);
	free(s);
	return failed || errs ? 1 : 0;
}
