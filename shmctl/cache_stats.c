/* cache_stats.c - `cache stats`: every cache's figures from the loader
 * (list, then status of each) as one JSON object (-j), aligned lines, or
 * Prometheus text exposition (--prometheus) for node_exporter's textfile
 * collector (packaging/systemd/shmkv-metrics.*). */
#include "cache.h"

#include <stdio.h>
#include <string.h>

#include "ctlsock.h"
#include "jv.h"
#include "main.h"

#define STATS_TIMEOUT_MS 30000

struct metric {
	const char *name, *type, *help;
	const char *field; /* a status field (u64), or NULL for the ones computed below */
};

/* One line per metric family, in this order. Label cache="NAME" (names are
 * [A-Za-z0-9_.-]: nothing to escape). */
static const struct metric metrics[] = {
	{"shmkv_cache_generation", "gauge", "generation being served (0: none)", "generation"},
	{"shmkv_cache_published", "gauge", "1 when a generation is published", NULL},
	{"shmkv_cache_image_bytes", "gauge", "size of the served image", "image_size"},
	{"shmkv_cache_memory_bytes", "gauge",
	 "shared memory of the served segment (image rounded up to its page size), by kind",
	 "map_size"},
	{"shmkv_cache_entries", "gauge", "keys in the served image", "entries"},
	{"shmkv_cache_load_duration_seconds", "gauge", "duration of the load that is served", NULL},
	{"shmkv_cache_load_alloc_seconds", "gauge", "memory allocation part of that load", NULL},
	{"shmkv_cache_readers", "gauge",
	 "processes mapping the cache, by generation (current or stale)", NULL},
	{"shmkv_cache_loading", "gauge", "1 while a load runs", NULL},
	{"shmkv_cache_last_load_failed", "gauge",
	 "1 when the last load failed (the previous generation, if any, still serves)", NULL},
	{"shmkv_cache_failed", "gauge", "1 when every load failed and nothing is published", NULL},
	{"shmkv_cache_rollback_available", "gauge", "1 when a rollback generation is kept", NULL},
};
#define NMETRICS (sizeof metrics / sizeof metrics[0])

static uint64_t u64_of(const jv *o, const char *name)
{
	uint64_t v = 0;
	jv_get_u64(o, name, &v);
	return v;
}

static int bool_of(const jv *o, const char *name)
{
	bool v = false;
	jv_get_bool(o, name, &v);
	return v;
}

/* Prints metric m of one cache (status reply st) in exposition format. */
static void prom_value(const struct metric *m, const char *name, const jv *st)
{
	const char *s;
	if (m->field && strcmp(m->field, "map_size") != 0) {
		printf("%s{cache=\"%s\"} %llu\n", m->name, name, (unsigned long long)u64_of(st, m->field));
	} else if (!strcmp(m->name, "shmkv_cache_memory_bytes")) {
		if (jv_get_str(st, "memory", &s))
			printf("%s{cache=\"%s\",kind=\"%s\"} %llu\n", m->name, name, s,
			       (unsigned long long)u64_of(st, "map_size"));
	} else if (!strcmp(m->name, "shmkv_cache_published")) {
		printf("%s{cache=\"%s\"} %d\n", m->name, name, bool_of(st, "published"));
	} else if (!strcmp(m->name, "shmkv_cache_load_duration_seconds")) {
		if (jv_get(st, "load_ms"))
			printf("%s{cache=\"%s\"} %.3f\n", m->name, name, u64_of(st, "load_ms") / 1e3);
	} else if (!strcmp(m->name, "shmkv_cache_load_alloc_seconds")) {
		if (jv_get(st, "alloc_ms"))
			printf("%s{cache=\"%s\"} %.3f\n", m->name, name, u64_of(st, "alloc_ms") / 1e3);
	} else if (!strcmp(m->name, "shmkv_cache_readers")) {
		printf("%s{cache=\"%s\",generation=\"current\"} %llu\n", m->name, name,
		       (unsigned long long)u64_of(st, "readers"));
		printf("%s{cache=\"%s\",generation=\"stale\"} %llu\n", m->name, name,
		       (unsigned long long)u64_of(st, "readers_stale"));
	} else if (!strcmp(m->name, "shmkv_cache_loading")) {
		printf("%s{cache=\"%s\"} %d\n", m->name, name, bool_of(st, "loading"));
	} else if (!strcmp(m->name, "shmkv_cache_last_load_failed")) {
		printf("%s{cache=\"%s\"} %d\n", m->name, name, jv_get_str(st, "last_error", &s));
	} else if (!strcmp(m->name, "shmkv_cache_failed")) {
		printf("%s{cache=\"%s\"} %d\n", m->name, name, bool_of(st, "failed"));
	} else if (!strcmp(m->name, "shmkv_cache_rollback_available")) {
		const jv *rb = jv_get(st, "rollback");
		printf("%s{cache=\"%s\"} %d\n", m->name, name, rb && jv_type(rb) == JV_OBJ);
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
	for (int i = optind; i < argc; i++)
		if ((rc = cache_check_name(argv[i])))
			return rc;
	char why[4600];
	jv *list = NULL;
	const char *lw[] = {"list"};
	int err = ctl_request(shmctl_root(), lw, 1, STATS_TIMEOUT_MS, &list, why, sizeof why);
	bool ok = false;
	if (!err)
		jv_get_bool(list, "ok", &ok);
	if (err || !ok) {
		if (prom) {
			printf("# HELP shmkv_up 1 when shmkv-loader answers on its control socket\n"
			       "# TYPE shmkv_up gauge\nshmkv_up 0\n");
			fflush(stdout);
		}
		const char *msg = why;
		if (!err)
			jv_get_str(list, "error", &msg);
		rc = p_err("%s%s", err ? "" : "shmkv-loader: ", msg);
		jv_free(list);
		return rc;
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
	for (size_t i = 0; i < n; i++) {
		const char *sw[] = {"status", names[i]};
		st[i] = NULL;
		err = ctl_request(shmctl_root(), sw, 2, STATS_TIMEOUT_MS, &st[i], why, sizeof why);
		ok = false;
		if (!err)
			jv_get_bool(st[i], "ok", &ok);
		if (err || !ok) {
			const char *msg = why;
			if (!err)
				jv_get_str(st[i], "error", &msg);
			rc = p_err("%s%s", err ? "" : "shmkv-loader: ", msg);
			bool missing = !err && !strncmp(msg, "no cache \"", 10);
			for (size_t k = 0; k <= i; k++)
				jv_free(st[k]);
			jv_free(list);
			return missing ? EXIT_NEGATIVE : rc;
		}
	}
	if (prom) {
		printf("# HELP shmkv_up 1 when shmkv-loader answers on its control socket\n"
		       "# TYPE shmkv_up gauge\nshmkv_up 1\n");
		printf("# HELP shmkv_caches caches the loader knows\n# TYPE shmkv_caches gauge\n"
		       "shmkv_caches %zu\n", jv_size(caches));
		for (size_t m = 0; m < NMETRICS; m++) {
			printf("# HELP %s %s\n# TYPE %s %s\n", metrics[m].name, metrics[m].help,
			       metrics[m].name, metrics[m].type);
			for (size_t i = 0; i < n; i++)
				prom_value(&metrics[m], names[i], st[i]);
		}
	} else if (json_output) {
		json_obj_begin(&json_out, NULL);
		json_arr_begin(&json_out, "caches");
		for (size_t i = 0; i < n; i++)
			jv_write(&json_out, st[i]);
		json_arr_end(&json_out);
		json_obj_end(&json_out);
	} else {
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
	for (size_t i = 0; i < n; i++)
		jv_free(st[i]);
	jv_free(list);
	return EXIT_OK;
}
