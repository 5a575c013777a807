/* cache_stats.c - `cache stats`: every cache's figures from the loader
 * (list, then status of each) as one JSON object (-j), aligned lines, or
 * Prometheus text exposition (--prometheus): the loader's `metrics` verb,
 * the same text as the metrics file it keeps (loader/metrics.c owns the
 * metric names); only shmkv_up 0 is ours, when the loader does not answer. */
#include "cache.h"

#include <stdio.h>
#include <string.h>

#include "ctlsock.h"
#include "jv.h"
#include "main.h"

#define STATS_TIMEOUT_MS 30000

static uint64_t u64_of(const jv *o, const char *name)
{
	uint64_t v = 0;
	jv_get_u64(o, name, &v);
	return v;
}

/* The loader's list of caches into *list; else an error (and shmkv_up 0
 * with --prometheus): returns EXIT_OK or the exit code. */
static int stats_list(bool prom, jv **list)
{
	char why[4600];
	const char *lw[] = {"list"};
	int err = ctl_request(shmctl_root(), lw, 1, STATS_TIMEOUT_MS, list, why, sizeof why);
	bool ok = false;
	if (!err)
		jv_get_bool(*list, "ok", &ok);
	if (!err && ok)
		return EXIT_OK;
	if (prom) {
		printf("# HELP shmkv_up 1 when shmkv-loader answers on its control socket\n"
		       "# TYPE shmkv_up gauge\nshmkv_up 0\n");
		fflush(stdout);
	}
	const char *msg = why;
	if (!err)
		jv_get_str(*list, "error", &msg);
	int rc = p_err("%s%s", err ? "" : "shmkv-loader: ", msg);
	jv_free(*list);
	*list = NULL;
	return rc;
}

/* --prometheus: the loader's metrics text as it is. */
static int stats_prometheus(void)
{
	char why[4600];
	const char *mw[] = {"metrics"};
	jv *m = NULL;
	const char *text = NULL;
	int err = ctl_request(shmctl_root(), mw, 1, STATS_TIMEOUT_MS, &m, why, sizeof why);
	if (err || !jv_get_str(m, "text", &text)) {
		const char *msg = why;
		if (!err && !jv_get_str(m, "error", &msg))
			msg = "no metrics in the reply (an older loader?)";
		int rc = p_err("%s%s", err ? "" : "shmkv-loader: ", msg);
		jv_free(m);
		return rc;
	}
	fputs(text, stdout);
	jv_free(m);
	return EXIT_OK;
}

/* The status of each of the n caches names[] into st[]: returns EXIT_OK, or
 * the exit code of the first that fails (none of st[] then held). */
static int stats_fetch(const char *const *names, size_t n, jv **st)
{
	char why[4600];
	for (size_t i = 0; i < n; i++) {
		const char *sw[] = {"status", names[i]};
		st[i] = NULL;
		int err = ctl_request(shmctl_root(), sw, 2, STATS_TIMEOUT_MS, &st[i], why,
				      sizeof why);
		bool ok = false;
		if (!err)
			jv_get_bool(st[i], "ok", &ok);
		if (err || !ok) {
			const char *msg = why;
			if (!err)
				jv_get_str(st[i], "error", &msg);
			int rc = p_err("%s%s", err ? "" : "shmkv-loader: ", msg);
			bool missing = !err && reply_no_cache(st[i]);
			for (size_t k = 0; k <= i; k++)
				jv_free(st[k]);
			return missing ? EXIT_NEGATIVE : rc;
		}
	}
	return EXIT_OK;
}

/* The n statuses st[] of caches names[]: one JSON object (-j) or a table. */
static void stats_print(const char *const *names, size_t n, jv *const *st)
{
	if (json_output) {
		json_obj_begin(&json_out, NULL);
		json_arr_begin(&json_out, "caches");
		for (size_t i = 0; i < n; i++)
			jv_write(&json_out, st[i]);
		json_arr_end(&json_out);
		json_obj_end(&json_out);
		return;
	}
	printf("%-20s %10s %12s %12s %10s %8s %8s  %s\n", "cache", "generation", "image",
	       "memory", "entries", "load_ms", "readers", "last error");
	for (size_t i = 0; i < n; i++) {
		char h1[32], h2[32];
		const char *last = "-";
		jv_get_str(st[i], "last_error", &last);
		printf("%-20s %10llu %12s %12s %10llu %8llu %8llu  %s\n", names[i],
		       (unsigned long long)u64_of(st[i], "generation"),
		       fmt_bytes(u64_of(st[i], "image_size"), h1, sizeof h1),
		       fmt_bytes(u64_of(st[i], "map_size"), h2, sizeof h2),
		       (unsigned long long)u64_of(st[i], "entries"),
		       (unsigned long long)u64_of(st[i], "load_ms"),
		       (unsigned long long)u64_of(st[i], "readers"), last);
	}
}

int do_cache_stats(int argc, char **argv)
{
	static const struct option opts[] = {
		VERB_LONGOPTS,
		{"root", required_argument, NULL, 'r'},
		{"prometheus", no_argument, NULL, 'P'},
		{NULL, 0, NULL, 0},
	};
	int c, rc;
	bool prom = false;
	verb_getopt_reset();
	while ((c = getopt_long(argc, argv, "+" VERB_SHORTOPTS "r:", opts, NULL)) != -1) {
		if (c == 'r')
			root_option = optarg;
		else if (c == 'P')
			prom = true;
		else if ((rc = verb_common_opt(c, argv, cache_help, "cache")) >= 0)
			return rc;
	}
	if (prom && json_output)
		return p_usage("cache", "stats: --prometheus and -j exclude each other");
	if (prom && optind < argc)
		return p_usage("cache", "stats --prometheus: every cache, no NAME (filter by "
				  "the cache label)");
	for (int i = optind; i < argc; i++)
		if ((rc = cache_check_name(argv[i])))
			return rc;
	jv *list = NULL;
	if ((rc = stats_list(prom, &list)) != EXIT_OK)
		return rc;
	if (prom) {
		jv_free(list);
		return stats_prometheus();
	}
	/* the caches asked for, else all; each one's status */
	const jv *caches = jv_get(list, "caches");
	size_t n = 0;
	const char *names[4096];
	if (optind < argc) {
		for (int i = optind; i < argc && n < 4096; i++)
			names[n++] = argv[i];
	} else {
		for (size_t i = 0; i < jv_size(caches) && n < 4096; i++)
			if (jv_get_str(jv_item(caches, i), "name", &names[n]))
				n++;
	}
	jv *st[4096];
	if ((rc = stats_fetch(names, n, st)) != EXIT_OK) {
		jv_free(list);
		return rc;
	}
	stats_print(names, n, st);
	for (size_t i = 0; i < n; i++)
		jv_free(st[i]);
	jv_free(list);
	return EXIT_OK;
}
