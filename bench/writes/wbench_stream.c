/* wbench_stream.c - what a paced stream of upserts costs readers, and
 * whether the loader keeps up with it.
 *
 * Usage: wbench_stream --root ROOT --cache NAME --keys N --base IMAGE
 *                      [--rate R] [--secs S] [--reps N] [--readers K]
 *                      [--every G] [--via shmctl|socket] [--shmctl PATH]
 *                      [--raw FILE] [--seed X] [--goal DROP_PCT]
 *
 * Needs a shmkv-loader serving ROOT and IMAGE (absolute; keys key_0 ..
 * key_<N-1>, string values). K reader processes (forked) each attach to NAME
 * and loop: shmkv_refresh() (a replaced control segment is attached again),
 * then G random gets of key_<r> (r < N; every one must be found); they count
 * their gets in shared memory.
 *
 * Each repetition: `load` IMAGE again (base and overlay replaced: every
 * repetition starts with no change pending), then three phases of S seconds:
 *   off     readers alone (the base, no overlay)
 *   on      readers while a stream of R upserts/s (key_<r>, r random below
 *           N, a new string value each), paced on a 1 ms clock, goes into
 *           `shmctl -r ROOT -j cache apply NAME -` (--via shmctl, the
 *           default; its acknowledgements read from its stdout) or straight
 *           into the control socket (`stream⇥NAME`, --via socket)
 *   after   readers alone again, the stream's overlay now served
 * so phases interleave off/on/after, off/on/after, ... The stream's input
 * ends with the on phase; its acknowledgements are read until the last line
 * is acknowledged (bounded: 600 s).
 *
 * Per phase: the readers' gets/s (all readers), and CPU in cores over the
 * phase (/proc: the loader, the readers, the stream client, this program,
 * the whole machine, and "others" = the machine minus those: other users).
 * Per on phase, of the stream (loader/README.md, "Streams"): lines written
 * (the client takes them as fast as it can; a slow loader holds them back)
 * and acknowledged within the phase, per second; acknowledgements (batches)
 * and lines per batch; lag = an acknowledgement's arrival minus the
 * scheduled send time of its last line, p50/p99/max over the batches and for
 * the last one; the overlay's records and bytes at the end; compactions
 * the stream set off (loader/README.md, "Compaction": past its bounds the
 * overlay is merged into a new base) and the last one's time, counted from
 * the on phase's start to the after phase's end, once a compaction running
 * then is published; folds likewise ("Writes": the top overlay merged into
 * the lower). --raw FILE: one line per acknowledgement (time, lines, lag,
 * overlay).
 * Prints "phase ..." lines and a "stream ..." line per repetition (after
 * its after phase), then a markdown table, the medians, and whether the
 * drop (1 - on/off) meets the goal (--goal, default 10 %).
 */
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "wb_util.h"

#define MAX_READERS 16

struct shared {
	_Atomic uint64_t gets[MAX_READERS];
	_Atomic uint64_t moves[MAX_READERS];      /* refreshes that moved the handle */
	_Atomic uint64_t refresh_ns[MAX_READERS]; /* time in those refreshes */
	_Atomic uint64_t errors[MAX_READERS];
	_Atomic int ready, stop;
};

static const char *root, *cache, *shmctl, *base;
static struct shared *sh;
static uint64_t keys;
static volatile uint64_t sink_out; /* the values read go here: the gets are not optimised away */

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int reader(int id, unsigned every)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	shmkv *db;
	char why[512], key[32];
	if (wb_attach(root, cache, &db, why, sizeof why)) {
		fprintf(stderr, "reader %d: attach %s: %s\n", id, cache, why);
		return 1;
	}
	atomic_fetch_add(&sh->ready, 1);
	uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1), done = 0, errs = 0, sink = 0;
	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		uint64_t a = lb_now_ns(CLOCK_MONOTONIC);
		int r = wb_refresh(root, cache, &db);
		if (r == 1) {
			atomic_fetch_add_explicit(&sh->moves[id], 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&sh->refresh_ns[id], lb_now_ns(CLOCK_MONOTONIC) - a,
						  memory_order_relaxed);
		} else if (r < 0) {
			errs++;
		}
		for (unsigned i = 0; i < every; i++) {
			size_t kl = lb_key(key, xorshift(&rng) % keys);
			const char *v;
			size_t len;
			if (shmkv_get_str(db, key, kl, &v, &len))
				errs++;
			else
				sink += (unsigned char)v[0]; /* the value is read */
		}
		done += every;
		atomic_store_explicit(&sh->gets[id], done, memory_order_relaxed);
		atomic_store_explicit(&sh->errors[id], errs, memory_order_relaxed);
	}
	shmkv_close(db);
	sink_out = sink;
	return 0;
}

/* What a phase is measured by: readers' gets, CPU ticks of each party. */
struct snap {
	uint64_t t, gets, loader, readers, client, self, busy, total;
};

static pid_t loader_pid, reader_pids[MAX_READERS], client_pid;
static int nreaders;

static void take(struct snap *s)
{
	s->t = lb_now_ns(CLOCK_MONOTONIC);
	s->gets = 0;
	s->readers = 0;
	for (int i = 0; i < nreaders; i++) {
		s->gets += atomic_load_explicit(&sh->gets[i], memory_order_relaxed);
		s->readers += wb_cpu_ticks(reader_pids[i]);
	}
	s->loader = wb_cpu_ticks(loader_pid);
	s->client = client_pid ? wb_cpu_ticks(client_pid) : 0;
	s->self = wb_cpu_ticks(0);
	s->total = wb_machine_ticks(&s->busy);
}

struct phase {
	double secs, gets_s, loader, readers, client, self, busy, others;
	double per_cpu; /* gets per second of the readers' CPU time */
};

static void between(const struct snap *a, const struct snap *b, struct phase *p)
{
	double hz = (double)sysconf(_SC_CLK_TCK);
	p->secs = (double)(b->t - a->t) / 1e9;
	p->gets_s = (double)(b->gets - a->gets) / p->secs;
	p->loader = (double)(b->loader - a->loader) / hz / p->secs;
	p->readers = (double)(b->readers - a->readers) / hz / p->secs;
	p->client = b->client >= a->client ? (double)(b->client - a->client) / hz / p->secs : 0;
	p->self = (double)(b->self - a->self) / hz / p->secs;
	p->busy = (double)(b->busy - a->busy) / hz / p->secs;
	p->others = p->busy - p->loader - p->readers - p->client - p->self;
	p->per_cpu = p->readers > 0 ? p->gets_s / p->readers : 0;
}

static void print_phase(int rep, const char *kind, const struct phase *p)
{
	printf("phase rep=%d kind=%s secs=%.1f gets_per_s=%.0f gets_per_reader_cpu_s=%.0f "
	       "loader_cores=%.2f readers_cores=%.2f client_cores=%.2f bench_cores=%.2f "
	       "machine_busy_cores=%.2f others_cores=%.2f\n", rep, kind, p->secs, p->gets_s,
	       p->per_cpu, p->loader, p->readers, p->client, p->self, p->busy, p->others);
	fflush(stdout);
}

/* ---- the stream ---- */

struct stream_res {
	uint64_t sent, acked_in, acks, last_acked, changes, overlay_bytes;
	double sent_s, acked_s, lag_p50, lag_p99, lag_max, last_lag, lines_p50, lines_max,
		drain_s, loader_cpu_s; /* the loader's CPU from the start to the last ack */
};

/* Starts the stream: *wfd takes lines, *rfd gives acknowledgement lines. */
static void stream_open(int via_socket, int *wfd, int *rfd)
{
	if (via_socket) {
		struct sockaddr_un a = {.sun_family = AF_UNIX};
		snprintf(a.sun_path, sizeof a.sun_path, "%s/control.sock", root);
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a))
			lb_die("%s: %s", a.sun_path, strerror(errno));
		char req[300];
		int n = snprintf(req, sizeof req, "stream\t%s\n", cache);
		if (write(fd, req, (size_t)n) != n)
			lb_die("stream request: %s", strerror(errno));
		/* the first reply line opens the stream (or refuses it) */
		char line[4096];
		size_t len = 0;
		while (len + 1 < sizeof line) {
			ssize_t r = read(fd, line + len, 1);
			if (r <= 0)
				lb_die("stream: the loader closed the connection");
			if (line[len] == '\n')
				break;
			len++;
		}
		line[len] = 0;
		if (!lb_json_ok(line))
			lb_die("stream refused: %s", line);
		*wfd = *rfd = fd;
		client_pid = 0;
		return;
	}
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		lb_die("pipe: %s", strerror(errno));
	fcntl(in[1], F_SETPIPE_SZ, 1 << 20);
	pid_t p = fork();
	if (p < 0)
		lb_die("fork: %s", strerror(errno));
	if (p == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execl(shmctl, shmctl, "-r", root, "-j", "cache", "apply", cache, "-", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	*wfd = in[1];
	*rfd = out[0];
	client_pid = p;
}

/* One acknowledgement line: its lag, size, and the overlay after it. */
static void ack(const char *line, uint64_t now, uint64_t t0, double ns_per_line, double *lags,
		double *lines, struct stream_res *r, FILE *raw, int rep)
{
	if (!lb_json_ok(line))
		lb_die("the stream failed: %s", line);
	uint64_t last = lb_json_u64(line, "last_line"), n = lb_json_u64(line, "lines");
	double sched = (double)t0 + (double)(last - 1) * ns_per_line;
	double lag = ((double)now - sched) / 1e6;
	lags[r->acks] = lag;
	lines[r->acks] = (double)n;
	r->acks++;
	r->last_acked = last;
	r->changes = lb_json_u64(line, "changes");
	r->overlay_bytes = lb_json_u64(line, "overlay_bytes");
	r->last_lag = lag;
	if (raw)
		fprintf(raw, "ack rep=%d t_s=%.3f generation=%llu lines=%llu last_line=%llu "
			"lag_ms=%.1f changes=%llu overlay_bytes=%llu\n", rep,
			(double)(now - t0) / 1e9, (unsigned long long)lb_json_u64(line, "generation"),
			(unsigned long long)n, (unsigned long long)last, lag,
			(unsigned long long)r->changes, (unsigned long long)r->overlay_bytes);
}

/* Reads what is there on rfd; each whole line is an acknowledgement. */
static int take_acks(int rfd, char *buf, size_t *len, size_t cap, uint64_t t0, double ns_per_line,
		     double *lags, double *lines, size_t max_acks, struct stream_res *r, FILE *raw,
		     int rep)
{
	ssize_t n = read(rfd, buf + *len, cap - 1 - *len);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0)
		return -1; /* closed */
	*len += (size_t)n;
	uint64_t now = lb_now_ns(CLOCK_MONOTONIC);
	char *nl;
	while ((nl = memchr(buf, '\n', *len))) {
		*nl = 0;
		if (r->acks >= max_acks)
			lb_die("more than %zu acknowledgements", max_acks);
		ack(buf, now, t0, ns_per_line, lags, lines, r, raw, rep);
		size_t used = (size_t)(nl - buf) + 1;
		memmove(buf, nl + 1, *len - used);
		*len -= used;
	}
	if (*len >= cap - 1)
		lb_die("an acknowledgement longer than %zu bytes", cap);
	return 0;
}

/* Streams rate lines/s for secs seconds; a and b frame the paced window
 * (taken at its start and end); *r the stream's figures. */
static void stream_phase(int via_socket, double rate, double secs, uint64_t *rng, int rep,
			 FILE *raw, struct snap *a, struct snap *b, struct stream_res *r)
{
	int wfd, rfd;
	memset(r, 0, sizeof *r);
	stream_open(via_socket, &wfd, &rfd);
	fcntl(wfd, F_SETFL, fcntl(wfd, F_GETFL) | O_NONBLOCK);
	if (rfd != wfd)
		fcntl(rfd, F_SETFL, fcntl(rfd, F_GETFL) | O_NONBLOCK);
	uint64_t total = (uint64_t)(rate * secs + 0.5);
	size_t max_acks = (size_t)total + 16, cap = 64u << 20, len = 0, off = 0, in_len = 0;
	double *lags = malloc(sizeof(double) * max_acks), *lines = malloc(sizeof(double) * max_acks);
	char *out = malloc(cap), in[65536];
	if (!lags || !lines || !out)
		lb_die("out of memory");
	double ns_per_line = 1e9 / rate;
	uint64_t made = 0, written_lines = 0, sent_at_end = 0;
	take(a);
	uint64_t t0 = a->t, t_end = t0 + (uint64_t)(secs * 1e9), written_bytes = 0;
	/* line boundaries of what is buffered: to count lines written */
	uint64_t *ends = malloc(sizeof(uint64_t) * (size_t)(total + 1));
	if (!ends)
		lb_die("out of memory");
	int closed = 0, pacing = 1;
	uint64_t deadline = t_end + 600000000000ull;
	while (r->last_acked < total) {
		uint64_t now = lb_now_ns(CLOCK_MONOTONIC);
		if (pacing) {
			uint64_t due = now >= t_end ? total
					: (uint64_t)((double)(now - t0) / ns_per_line) + 1;
			due = due < total ? due : total;
			while (made < due) {
				if (len > cap - 128) { /* 64 MiB held back: the loader is far behind */
					memmove(out, out + off, len - off);
					len -= off;
					off = 0;
					if (len > cap - 128)
						lb_die("64 MiB of the stream held back: the loader "
						       "does not read it");
				}
				char key[32];
				lb_key(key, xorshift(rng) % keys);
				len += (size_t)snprintf(out + len, cap - len,
							"{\"key\": \"%s\", \"value\": \"st-%d-%llu\"}\n",
							key, rep, (unsigned long long)made);
				ends[made++] = written_bytes + (len - off);
			}
			if (now >= t_end) {
				take(b); /* the paced window is over */
				sent_at_end = written_lines;
				r->acked_in = r->last_acked;
				pacing = 0;
			}
		}
		if (off < len) {
			ssize_t w = write(wfd, out + off, len - off);
			if (w > 0) {
				off += (size_t)w;
				written_bytes += (uint64_t)w;
				while (written_lines < made && ends[written_lines] <= written_bytes)
					written_lines++;
				if (off == len)
					off = len = 0;
			} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
				lb_die("writing the stream: %s", strerror(errno));
			}
		}
		if (!pacing && off == len && !closed) { /* all written: the input ends */
			if (via_socket)
				shutdown(wfd, SHUT_WR);
			else
				close(wfd);
			closed = 1;
		}
		struct pollfd p[2] = {{.fd = rfd, .events = POLLIN}, {.fd = -1}};
		if (off < len && !closed) {
			if (wfd == rfd)
				p[0].events |= POLLOUT;
			else
				p[1] = (struct pollfd){.fd = wfd, .events = POLLOUT};
		}
		int timeout = pacing ? 1 : 100;
		if (poll(p, 2, timeout) < 0 && errno != EINTR)
			lb_die("poll: %s", strerror(errno));
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
			if (take_acks(rfd, in, &in_len, sizeof in, t0, ns_per_line, lags, lines,
				      max_acks, r, raw, rep))
				break;
		if (lb_now_ns(CLOCK_MONOTONIC) > deadline)
			lb_die("the stream's last line was not acknowledged within 600 s of its "
			       "end (line %llu of %llu)", (unsigned long long)r->last_acked,
			       (unsigned long long)total);
	}
	uint64_t t_done = lb_now_ns(CLOCK_MONOTONIC);
	r->loader_cpu_s = (double)(wb_cpu_ticks(loader_pid) - a->loader) /
			  (double)sysconf(_SC_CLK_TCK);
	if (r->last_acked < total)
		lb_die("the stream ended after line %llu of %llu", (unsigned long long)r->last_acked,
		       (unsigned long long)total);
	if (via_socket)
		close(wfd);
	else {
		if (!closed)
			close(wfd);
		close(rfd);
		int ws;
		while (waitpid(client_pid, &ws, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(ws) || WEXITSTATUS(ws))
			lb_die("%s cache apply %s - failed", shmctl, cache);
		client_pid = 0;
	}
	r->sent = sent_at_end;
	r->sent_s = (double)sent_at_end / secs;
	r->acked_s = (double)r->acked_in / secs;
	r->drain_s = (double)(t_done - t_end) / 1e9;
	r->lag_max = wb_dquantile(lags, r->acks, 1.0);
	r->lag_p50 = wb_dquantile(lags, r->acks, 0.5);
	r->lag_p99 = wb_dquantile(lags, r->acks, 0.99);
	r->lines_max = wb_dquantile(lines, r->acks, 1.0);
	r->lines_p50 = wb_dquantile(lines, r->acks, 0.5);
	free(ends);
	free(out);
	free(lags);
	free(lines);
}

/* The cache's compactions or folds (what: `status`'s "compaction",
 * "fold") since the loader started and the last one's duration (0 from a
 * loader without them); returns whether a compaction runs now (its merge
 * off the worker: counted once it is published). */
static int counted(const char *what, uint64_t *count, uint64_t *last_ms)
{
	char req[300], key[32];
	snprintf(req, sizeof req, "status\t%s", cache);
	snprintf(key, sizeof key, "\"%s\":", what);
	char *r = lb_request(root, req);
	const char *c = r ? strstr(r, key) : NULL;
	*count = c ? lb_json_u64(c, "count") : 0;
	*last_ms = c ? lb_json_u64(c, "last_ms") : 0;
	const char *k = r ? strstr(r, "\"compaction\":") : NULL;
	int running = k && lb_json_u64(k, "running_since_unix") != 0; /* null when none */
	free(r);
	return running;
}

/* The compactions a stream set off, counted once the one running (if any)
 * has ended: at 10M keys the stream passes compact_entries late in its
 * phase and the merge takes seconds, so it ends after the phase, and the
 * next repetition's load would cancel one still running. Bounded: 600 s. */
static void counted_settled(uint64_t *count, uint64_t *last_ms)
{
	uint64_t end = lb_now_ns(CLOCK_MONOTONIC) + 600000000000u;
	while (counted("compaction", count, last_ms)) {
		if (lb_now_ns(CLOCK_MONOTONIC) > end)
			lb_die("a compaction of %s still runs after 600 s", cache);
		wb_sleep_ns(50000000); /* status has no wait: polled */
	}
}

static void reset_cache(void)
{
	char req[4200];
	snprintf(req, sizeof req, "load\t%s\t%s", cache, base);
	char *r = lb_request(root, req);
	if (!r || !lb_json_ok(r))
		lb_die("load %s %s: %s", cache, base, r ? r : strerror(errno));
	free(r);
}

static double median(double *v, int n)
{
	return wb_dquantile(v, (size_t)n, 0.5);
}

static void usage(const char *argv0)
{
	lb_die("usage: %s --root ROOT --cache NAME --keys N --base IMAGE [--rate R] [--secs S] "
	       "[--reps N] [--readers K] [--every G] [--via shmctl|socket] [--shmctl PATH] "
	       "[--raw FILE] [--seed X] [--goal DROP_PCT]", argv0);
}

int main(int argc, char **argv)
{
	double rate = 20000, secs = 60, goal_drop = 10;
	int reps = 2, via_socket = 0;
	unsigned every = 1000;
	uint64_t rng = 0x13198a2e03707344ull;
	const char *rawp = NULL;
	nreaders = 2;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--root") && i + 1 < argc)
			root = argv[++i];
		else if (!strcmp(argv[i], "--cache") && i + 1 < argc)
			cache = argv[++i];
		else if (!strcmp(argv[i], "--keys") && i + 1 < argc)
			keys = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--base") && i + 1 < argc)
			base = argv[++i];
		else if (!strcmp(argv[i], "--rate") && i + 1 < argc)
			rate = atof(argv[++i]);
		else if (!strcmp(argv[i], "--secs") && i + 1 < argc)
			secs = atof(argv[++i]);
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--readers") && i + 1 < argc)
			nreaders = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--every") && i + 1 < argc)
			every = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--via") && i + 1 < argc) {
			i++;
			if (!strcmp(argv[i], "socket"))
				via_socket = 1;
			else if (strcmp(argv[i], "shmctl"))
				usage(argv[0]);
		} else if (!strcmp(argv[i], "--shmctl") && i + 1 < argc)
			shmctl = argv[++i];
		else if (!strcmp(argv[i], "--raw") && i + 1 < argc)
			rawp = argv[++i];
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			rng = strtoull(argv[++i], NULL, 0) | 1;
		else if (!strcmp(argv[i], "--goal") && i + 1 < argc)
			goal_drop = atof(argv[++i]);
		else
			usage(argv[0]);
	}
	if (!root || !cache || !keys || !base || base[0] != '/' || rate < 1 || secs < 1 ||
	    reps < 1 || reps > 64 || nreaders < 1 || nreaders > MAX_READERS || every < 1 ||
	    (!via_socket && !shmctl))
		usage(argv[0]);
	FILE *raw = rawp ? fopen(rawp, "we") : NULL;
	if (rawp && !raw)
		lb_die("%s: %s", rawp, strerror(errno));
	loader_pid = wb_loader_pid(root);
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		lb_die("mmap: %s", strerror(errno));
	reset_cache();
	fflush(stdout);
	for (int i = 0; i < nreaders; i++) {
		reader_pids[i] = fork();
		if (reader_pids[i] < 0)
			lb_die("fork: %s", strerror(errno));
		if (reader_pids[i] == 0)
			_exit(reader(i, every));
	}
	uint64_t end = lb_now_ns(CLOCK_MONOTONIC) + 60000000000u;
	while (atomic_load(&sh->ready) < nreaders) {
		if (lb_now_ns(CLOCK_MONOTONIC) > end)
			lb_die("readers did not attach within 60 s");
		wb_sleep_ns(1000000);
	}
	printf("readers=%d gets_per_refresh=%u keys=%llu rate=%.0f secs=%.0f reps=%d via=%s "
	       "loader_pid=%d\n", nreaders, every, (unsigned long long)keys, rate, secs, reps,
	       via_socket ? "socket" : "shmctl", (int)loader_pid);
	struct phase off[64], on[64], after[64];
	struct stream_res sr[64];
	for (int rep = 0; rep < reps; rep++) {
		struct snap a, b;
		reset_cache();
		wb_sleep_ns(2000000000u); /* the readers move to it, the old segments go */
		take(&a);
		wb_sleep_ns((uint64_t)(secs * 1e9));
		take(&b);
		between(&a, &b, &off[rep]);
		print_phase(rep + 1, "off", &off[rep]);

		uint64_t m0 = 0, c0, c1, cms, f0, f1, fms;
		for (int i = 0; i < nreaders; i++)
			m0 += atomic_load(&sh->moves[i]);
		counted("compaction", &c0, &cms);
		counted("fold", &f0, &fms);
		stream_phase(via_socket, rate, secs, &rng, rep + 1, raw, &a, &b, &sr[rep]);
		between(&a, &b, &on[rep]);
		uint64_t m1 = 0;
		for (int i = 0; i < nreaders; i++)
			m1 += atomic_load(&sh->moves[i]);
		print_phase(rep + 1, "on", &on[rep]);

		wb_sleep_ns(1000000000u);
		take(&a);
		wb_sleep_ns((uint64_t)(secs * 1e9));
		take(&b);
		between(&a, &b, &after[rep]);
		print_phase(rep + 1, "after", &after[rep]);

		/* what the stream set off, from the on phase's start until the
		 * compaction it queued (if any) is published */
		counted_settled(&c1, &cms);
		counted("fold", &f1, &fms);
		const struct stream_res *r = &sr[rep];
		printf("stream rep=%d sent=%llu sent_per_s=%.0f acked_in_phase=%llu acked_per_s=%.0f "
		       "acks=%llu lines_per_ack_p50=%.0f lines_per_ack_max=%.0f lag_p50_ms=%.1f "
		       "lag_p99_ms=%.1f lag_max_ms=%.1f last_ack_lag_ms=%.1f drain_s=%.2f "
		       "loader_cpu_s=%.2f changes=%llu overlay_bytes=%llu reader_moves=%llu "
		       "compactions=%llu compaction_last_ms=%llu folds=%llu fold_last_ms=%llu\n", rep + 1,
		       (unsigned long long)r->sent, r->sent_s, (unsigned long long)r->acked_in,
		       r->acked_s, (unsigned long long)r->acks, r->lines_p50, r->lines_max,
		       r->lag_p50, r->lag_p99, r->lag_max, r->last_lag, r->drain_s, r->loader_cpu_s,
		       (unsigned long long)r->changes, (unsigned long long)r->overlay_bytes,
		       (unsigned long long)(m1 - m0), (unsigned long long)(c1 - c0),
		       (unsigned long long)(c1 > c0 ? cms : 0), (unsigned long long)(f1 - f0),
		       (unsigned long long)(f1 > f0 ? fms : 0));
		fflush(stdout);
	}
	atomic_store(&sh->stop, 1);
	int failed = 0;
	uint64_t errs = 0;
	for (int i = 0; i < nreaders; i++) {
		int ws;
		waitpid(reader_pids[i], &ws, 0);
		failed |= !WIFEXITED(ws) || WEXITSTATUS(ws);
		errs += atomic_load(&sh->errors[i]);
	}
	if (raw)
		fclose(raw);

	printf("\n| rep | gets/s off / on / after | on/off | per reader CPU-s off / on / after | "
	       "on/off | readers cores off / on / after | loader cores on | others cores off / on / "
	       "after | acked lines/s | batches | lag p50 / p99 / last ms | overlay at end |\n"
	       "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	double v_off[64], v_on[64], v_after[64], ratio[64], ratio_after[64], cpu_ratio[64], lp[64],
		last[64], acked[64], lcores[64], batch_ms[64];
	for (int i = 0; i < reps; i++) {
		const struct stream_res *r = &sr[i];
		v_off[i] = off[i].gets_s;
		v_on[i] = on[i].gets_s;
		v_after[i] = after[i].gets_s;
		ratio[i] = on[i].gets_s / off[i].gets_s;
		ratio_after[i] = on[i].gets_s / after[i].gets_s;
		cpu_ratio[i] = off[i].per_cpu > 0 ? on[i].per_cpu / off[i].per_cpu : 0;
		lp[i] = r->lag_p50;
		last[i] = r->last_lag;
		acked[i] = r->acked_s;
		lcores[i] = on[i].loader;
		/* the loader's CPU from the phase's start to the last acknowledgement */
		batch_ms[i] = r->acks ? r->loader_cpu_s * 1000 / (double)r->acks : 0;
		printf("| %d | %.3gM / %.3gM / %.3gM | %.3f | %.3gM / %.3gM / %.3gM | %.3f | "
		       "%.2f / %.2f / %.2f | %.2f | %.2f / %.2f / %.2f | %.0f | %llu | "
		       "%.0f / %.0f / %.0f | %llu records, %.1f MiB |\n", i + 1, off[i].gets_s / 1e6,
		       on[i].gets_s / 1e6, after[i].gets_s / 1e6, ratio[i], off[i].per_cpu / 1e6,
		       on[i].per_cpu / 1e6, after[i].per_cpu / 1e6, cpu_ratio[i], off[i].readers,
		       on[i].readers, after[i].readers, on[i].loader, off[i].others, on[i].others,
		       after[i].others, r->acked_s, (unsigned long long)r->acks, r->lag_p50,
		       r->lag_p99, r->last_lag, (unsigned long long)r->changes,
		       (double)r->overlay_bytes / 1048576.0);
	}
	double mr = median(ratio, reps), mra = median(ratio_after, reps),
	       mrc = median(cpu_ratio, reps), others = 0;
	for (int i = 0; i < reps; i++) {
		others = off[i].others > others ? off[i].others : others;
		others = on[i].others > others ? on[i].others : others;
	}
	printf("\nmedian: off %.3gM gets/s, on %.3gM, after %.3gM; on/off %.3f (drop %.1f%%), "
	       "on/after %.3f (drop %.1f%%); per reader CPU-second on/off %.3f (drop %.1f%%); "
	       "loader %.2f cores while streaming, %.0f ms of CPU a batch; acked %.0f lines/s "
	       "of %.0f; lag p50 %.0f ms, last ack %.0f ms after its line was due\n",
	       median(v_off, reps) / 1e6, median(v_on, reps) / 1e6, median(v_after, reps) / 1e6, mr,
	       (1 - mr) * 100, mra, (1 - mra) * 100, mrc, (1 - mrc) * 100, median(lcores, reps),
	       median(batch_ms, reps), median(acked, reps), rate, median(lp, reps),
	       median(last, reps));
	printf("goal: drop <= %.0f%%: gets/s %s (%.1f%%), gets per reader CPU-second %s (%.1f%%)\n",
	       goal_drop, (1 - mr) * 100 <= goal_drop ? "met" : "MISSED", (1 - mr) * 100,
	       (1 - mrc) * 100 <= goal_drop ? "met" : "MISSED", (1 - mrc) * 100);
	if (others > 0.25)
		printf("note: other processes took up to %.2f cores during off/on phases: gets/s "
		       "moved with them; the per CPU-second figure is the steadier one\n", others);
	printf("reader_errors=%llu\n", (unsigned long long)errs);
	return failed || errs ? 1 : 0;
}
