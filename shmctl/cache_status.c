/* cache_status.c - `cache status NAME`: the loader's status reply as the
 * dozen lines an operator reads first (state, generation, size, memory and
 * placement, readers, last load, last error, changes, compaction,
 * rollback), leaving out what does not apply (BPF when not exported, NUMA
 * when unplaced, progress when idle, compaction before the first); `--all` prints every field, and -j the reply as it came. */
#include <getopt.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "lookup.h"
#include "main.h"

#define QUERY_TIMEOUT_MS 30000 /* the loader answers status at once */

static const char *str_or(const jv *o, const char *name, const char *dflt)
{
	const char *s;
	return jv_get_str(o, name, &s) ? s : dflt;
}

static uint64_t u64_or0(const jv *o, const char *name)
{
	uint64_t v = 0;
	jv_get_u64(o, name, &v);
	return v;
}

static bool bool_of(const jv *o, const char *name)
{
	bool b = false;
	jv_get_bool(o, name, &b);
	return b;
}

static void line(const char *label, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(const char *label, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("%-12s", label);
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
}

static void state_line(const jv *r)
{
	const jv *pr = jv_get(r, "progress");
	uint64_t done = u64_or0(pr, "bytes_done"), total = u64_or0(pr, "bytes_total");
	bool published = bool_of(r, "published");
	uint64_t gen = u64_or0(r, "generation");
	char b[32], serving[64] = "";
	if (published)
		snprintf(serving, sizeof serving, "serving generation %" PRIu64, gen);
	if (total)
		line("state", "loading %" PRIu64 "%% of %s%s%s%s", done * 100 / total,
		     fmt_bytes(total, b, sizeof b), published ? " (" : "", serving,
		     published ? ")" : "");
	else if (bool_of(r, "failed"))
		line("state", "failed: nothing published");
	else if (published)
		line("state", "%s", serving);
	else
		line("state", "nothing published yet");
	uint64_t exp;
	if (jv_get_u64(r, "expires_in", &exp))
		line("", "the loader forgets it in %" PRIu64 " s", exp);
}

static void memory_lines(const jv *r)
{
	char b[32], m[32];
	line("size", "%s (%" PRIu64 " bytes), %" PRIu64 " entries",
	     fmt_bytes(u64_or0(r, "image_size"), b, sizeof b), u64_or0(r, "image_size"),
	     u64_or0(r, "entries"));
	line("memory", "%s, %s mapped (policy %s)", str_or(r, "memory", "-"),
	     fmt_bytes(u64_or0(r, "map_size"), m, sizeof m), str_or(r, "policy", "-"));
	const char *note = str_or(r, "memory_note", NULL);
	if (note)
		line("", "%s", note);
	const jv *numa = jv_get(r, "numa"), *copies = jv_get(numa, "copies");
	const char *pol = str_or(numa, "policy", "none");
	size_t nc = jv_size(copies);
	if (!numa || (!strcmp(pol, "none") && nc <= 1 && !str_or(numa, "note", NULL)))
		return;
	char nodes[256] = "";
	size_t o = 0;
	bool wrong = false;
	for (size_t i = 0; i < nc && o < sizeof nodes; i++) {
		const jv *c = jv_item(copies, i);
		uint64_t node;
		int w = jv_get_u64(c, "node", &node)
				? snprintf(nodes + o, sizeof nodes - o, "%snode %" PRIu64, i ? ", " : "", node)
				: snprintf(nodes + o, sizeof nodes - o, "%sunpinned", i ? ", " : "");
		o += w > 0 ? (size_t)w : 0;
		bool ok = true;
		if (jv_get_bool(c, "placement_ok", &ok) && !ok)
			wrong = true;
	}
	line("placement", "numa %s: %zu cop%s (%s)%s", pol, nc, nc == 1 ? "y" : "ies", nodes,
	     wrong ? ", placement wrong" : "");
	if ((note = str_or(numa, "note", NULL)))
		line("", "%s", note);
}

/* A duration for people: "42 s", "17 min", "5 h", "12 d" (rounded down). */
static void fmt_secs(uint64_t s, char *buf, size_t n)
{
	if (s < 120)
		snprintf(buf, n, "%" PRIu64 " s", s);
	else if (s < 7200)
		snprintf(buf, n, "%" PRIu64 " min", s / 60);
	else if (s < 172800)
		snprintf(buf, n, "%" PRIu64 " h", s / 3600);
	else
		snprintf(buf, n, "%" PRIu64 " d", s / 86400);
}

/* "expiry": one line, only for a cache whose entries expire (format 2) or
 * whose expiry the loader could not read: how many carry a time, how many
 * of them readers no longer see, and the next to go. */
static void expiry_line(const jv *r)
{
	const jv *e = jv_get(r, "expiry");
	if (!strcmp(str_or(e, "state", "none"), "failed")) {
		line("expiry", "unknown: %s", str_or(e, "note", "-"));
		return;
	}
	uint64_t n = 0, x = 0, next = 0, in = 0;
	if (!jv_get_u64(e, "entries", &n) || !n)
		return;
	char gone[64] = "expired: unknown", when[96];
	bool known = jv_get_u64(e, "expired", &x);
	if (known)
		snprintf(gone, sizeof gone, "%" PRIu64 " expired (absent to readers)", x);
	if (jv_get_u64(e, "next", &next) && jv_get_u64(e, "next_in", &in) && next <= UINT32_MAX) {
		char t[40], d[32];
		expiry_text(t, sizeof t, (uint32_t)next);
		fmt_secs(in, d, sizeof d);
		snprintf(when, sizeof when, "next %s (in %s)", t, d);
	} else {
		snprintf(when, sizeof when, "%s", known && x == n ? "none left" : "next: unknown");
	}
	line("expiry", "%" PRIu64 " entr%s with a time, %s, %s", n, n == 1 ? "y" : "ies", gone,
	     when);
}

static void load_lines(const jv *r)
{
	if (bool_of(r, "published")) {
		char rate[32] = "";
		const jv *g = jv_get(r, "gbps");
		if (g)
			jv_num_text(g, rate, sizeof rate);
		line("last load", "%s in %" PRIu64 " ms (%s GB/s%s)", str_or(r, "source", "(unknown)"),
		     u64_or0(r, "load_ms"), rate[0] ? rate : "-",
		     bool_of(r, "direct_io") ? ", direct I/O" : "");
	}
	/* failures: the total, and each reason that happened */
	const jv *f = jv_get(r, "failures");
	uint64_t total = 0;
	char why[512] = "";
	size_t o = 0;
	for (const void *it = jv_first(f); it; it = jv_next(f, it)) {
		uint64_t n = 0;
		if (!jv_u64(jv_value(it), &n) || !n)
			continue;
		total += n;
		int w = snprintf(why + o, sizeof why - o, "%s%s %" PRIu64, o ? ", " : "", jv_key(it),
				 n);
		if (w > 0 && (size_t)w < sizeof why - o)
			o += (size_t)w;
	}
	line("loads", "%" PRIu64 " ok, %" PRIu64 " failed%s%s%s", u64_or0(r, "loads"), total,
	     total ? " (" : "", why, total ? ")" : "");
	line("last error", "%s", str_or(r, "last_error", "-"));
	const char *se = str_or(r, "spool_error", NULL);
	if (se)
		line("spool", "%s", se);
}

/* "compaction": what waits to start (the oldest: for how long, what asked,
 * behind what), what runs, and the last since the loader started; nothing
 * while none of the three is. */
static void compaction_line(const jv *r, uint64_t now)
{
	const jv *k = jv_get(r, "compaction");
	char q[200] = "", run[80] = "", last[160] = "", d[32], more[32] = "";
	uint64_t t, n = u64_or0(k, "count");
	if (bool_of(k, "queued") && jv_get_u64(k, "queued_since_unix", &t)) {
		const char *by = str_or(k, "queued_by", "?");
		const char *cache = str_or(k, "queued_behind_cache", NULL);
		uint64_t req = u64_or0(k, "queued_requests");
		/* requests besides the oldest */
		if (req > 1 || (req && strcmp(by, "request")))
			snprintf(more, sizeof more, ", %" PRIu64 " request%s", req, req == 1 ? "" : "s");
		fmt_secs(now > t ? now - t : 0, d, sizeof d);
		snprintf(q, sizeof q, "queued for %s (%s%s, behind %s%s)", d,
			 strcmp(by, "request") ? "the bound" : "requested", more,
			 cache ? "the compaction of " : "the loader's jobs", cache ? cache : "");
	}
	if (bool_of(k, "running") && jv_get_u64(k, "running_since_unix", &t)) {
		fmt_secs(now > t ? now - t : 0, d, sizeof d);
		snprintf(run, sizeof run, "running for %s (%s)", d,
			 strcmp(str_or(k, "running_by", "?"), "request") ? "the bound" : "requested");
	}
	if (n && jv_get_u64(k, "last_unix", &t)) {
		fmt_secs(now > t ? now - t : 0, d, sizeof d);
		snprintf(last, sizeof last, "%" PRIu64 " since start, the last %s ago in %" PRIu64
			 " ms (%" PRIu64 " keys merged, %" PRIu64 " caught up)", n, d,
			 u64_or0(k, "last_ms"), u64_or0(k, "last_records"),
			 u64_or0(k, "last_catch_up"));
	}
	if (q[0] || run[0] || last[0])
		line("compaction", "%s%s%s%s%s", q, q[0] && (run[0] || last[0]) ? "; " : "", run,
		     run[0] && last[0] ? "; " : "", last);
}

static void summary(const jv *r)
{
	char b[32];
	line("cache", "%s", str_or(r, "name", "?"));
	state_line(r);
	if (bool_of(r, "published")) {
		memory_lines(r);
		expiry_line(r);
	}
	uint64_t stale = u64_or0(r, "readers_stale");
	if (stale)
		line("readers", "%" PRIu64 " (%" PRIu64 " on an old generation)",
		     u64_or0(r, "readers"), stale);
	else
		line("readers", "%" PRIu64, u64_or0(r, "readers"));
	load_lines(r);
	/* changes since the base (loader/README.md, "Writes") */
	const jv *ov = jv_get(r, "overlay");
	if (jv_type(ov) == JV_OBJ) {
		line("changes", "%" PRIu64 " records in the overlay (%s), %" PRIu64
		     " publishes since the base, protocol %" PRIu64, u64_or0(ov, "records"),
		     fmt_bytes(u64_or0(ov, "bytes"), b, sizeof b), u64_or0(ov, "publishes"),
		     u64_or0(r, "protocol"));
		/* its two levels: the lower, and the top with the latest changes */
		const jv *lo = jv_get(ov, "lower"), *tp = jv_get(ov, "top"), *fo = jv_get(r, "fold");
		char b2[32], last[48] = "";
		if (jv_type(jv_get(fo, "last_ms")) == JV_NUM)
			snprintf(last, sizeof last, ", the last took %" PRIu64 " ms",
				 u64_or0(fo, "last_ms"));
		line("overlays", "lower %" PRIu64 " records (%s), top %" PRIu64 " records (%s); %" PRIu64
		     " folds since start%s", u64_or0(lo, "records"),
		     fmt_bytes(u64_or0(lo, "bytes"), b, sizeof b), u64_or0(tp, "records"),
		     fmt_bytes(u64_or0(tp, "bytes"), b2, sizeof b2), u64_or0(fo, "count"), last);
	} else {
		line("changes", "none (the base alone, protocol %" PRIu64 ")", u64_or0(r, "protocol"));
	}
	compaction_line(r, (uint64_t)time(NULL));
	const jv *rb = jv_get(r, "rollback");
	if (jv_type(rb) == JV_OBJ)
		line("rollback", "generation %" PRIu64 " (%s) from %s", u64_or0(rb, "generation"),
		     fmt_bytes(u64_or0(rb, "image_size"), b, sizeof b),
		     str_or(rb, "source", "(unknown)"));
	else
		line("rollback", "none");
	const jv *bpf = jv_get(r, "bpf");
	if (bool_of(bpf, "exported"))
		line("bpf", "exported%s%s", str_or(bpf, "error", NULL) ? ": " : "",
		     str_or(bpf, "error", ""));
	printf("(every field: " BIN_NAME " cache status --all %s)\n", str_or(r, "name", "NAME"));
}

int do_cache_status(int argc, char **argv)
{
	static const struct option opts[] = {
		VERB_LONGOPTS,
		{"root", required_argument, NULL, 'r'},
		{"all", no_argument, NULL, 'a'},
		{NULL, 0, NULL, 0},
	};
	int c, rc;
	bool all = false;
	verb_getopt_reset();
	/* options may follow NAME too: `cache status NAME --all` */
	while ((c = getopt_long(argc, argv, VERB_SHORTOPTS "r:a", opts, NULL)) != -1) {
		if (c == 'r')
			root_option = optarg;
		else if (c == 'a')
			all = true;
		else if ((rc = verb_common_opt(c, argv, cache_help, "cache")) >= 0)
			return rc;
	}
	if (argc - optind != 1)
		return p_usage("cache", "%s: expected [--all] NAME", argv[0]);
	const char *name = argv[optind];
	if ((rc = cache_check_name(name)))
		return rc;
	const char *words[] = {"status", name};
	jv *reply;
	if ((rc = loader_call(words, 2, QUERY_TIMEOUT_MS, &reply, NULL, NULL)) >= 0)
		return rc;
	if (json_output || all)
		print_reply(reply); /* -j is always complete */
	else
		summary(reply);
	jv_free(reply);
	return EXIT_OK;
}
