/* metrics.c - counters and their Prometheus text. See metrics.h. */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "caches.h"

static const uint64_t bounds_us[HTTP_LAT_BUCKETS] = {
	25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 50000, 250000, 1000000,
};

void http_hist_add(struct http_hist *h, uint64_t us)
{
	for (size_t i = 0; i < HTTP_LAT_BUCKETS; i++)
		if (us <= bounds_us[i]) {
			h->le[i]++;
			break;
		}
	h->count++;
	h->sum_s += (double)us / 1e6;
}

static void hist(FILE *f, const char *name, const char *label, const struct http_hist *h)
{
	uint64_t cum = 0;
	const char *sep = *label ? "," : "";
	for (size_t i = 0; i < HTTP_LAT_BUCKETS; i++) {
		cum += h->le[i];
		fprintf(f, "%s_bucket{%s%sle=\"%g\"} %" PRIu64 "\n", name, label, sep,
			(double)bounds_us[i] / 1e6, cum);
	}
	fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, label, sep, h->count);
	const char *o = *label ? "{" : "", *c = *label ? "}" : "";
	fprintf(f, "%s_sum%s%s%s %.6f\n%s_count%s%s%s %" PRIu64 "\n", name, o, label, c, h->sum_s, name, o,
		label, c, h->count);
}

int http_metrics_text(const struct http_metrics *m, const struct http_caches *t, char **out,
		      size_t *len)
{
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);
	if (!f)
		return -ENOMEM;
	fprintf(f, "# HELP shmkv_http_connections Open client connections.\n"
		   "# TYPE shmkv_http_connections gauge\nshmkv_http_connections %" PRIu64 "\n",
		m->conn_open);
	fprintf(f, "# HELP shmkv_http_connections_total Connections accepted.\n"
		   "# TYPE shmkv_http_connections_total counter\nshmkv_http_connections_total %" PRIu64 "\n",
		m->conn_total);
	fprintf(f, "# HELP shmkv_http_connections_refused_total Connections refused over max_connections (503).\n"
		   "# TYPE shmkv_http_connections_refused_total counter\n"
		   "shmkv_http_connections_refused_total %" PRIu64 "\n",
		m->conn_refused);
	fprintf(f, "# HELP shmkv_http_responses_total Responses by status class.\n"
		   "# TYPE shmkv_http_responses_total counter\n");
	for (int c = 1; c <= 5; c++)
		fprintf(f, "shmkv_http_responses_total{code=\"%dxx\"} %" PRIu64 "\n", c, m->status[c]);
	fprintf(f, "# HELP shmkv_http_errors_total Responses with a 4xx or 5xx status.\n"
		   "# TYPE shmkv_http_errors_total counter\nshmkv_http_errors_total %" PRIu64 "\n",
		m->errors);
	fprintf(f, "# HELP shmkv_http_request_duration_seconds From the request's first byte to its answer.\n"
		   "# TYPE shmkv_http_request_duration_seconds histogram\n");
	hist(f, "shmkv_http_request_duration_seconds", "", &m->latency);

	static const struct {
		const char *name, *help, *type;
	} series[] = {
		{"shmkv_http_cache_hits_total", "Keys found.", "counter"},
		{"shmkv_http_cache_misses_total", "Keys absent (or expired).", "counter"},
		{"shmkv_http_cache_bytes_served_total", "Value bytes sent.", "counter"},
		{"shmkv_http_cache_requests_total", "Requests naming the cache.", "counter"},
		{"shmkv_http_cache_generation", "Generation served (0: not attached now).", "gauge"},
	};
	for (size_t s = 0; s < sizeof series / sizeof series[0]; s++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", series[s].name, series[s].help, series[s].name,
			series[s].type);
		for (size_t i = 0; i < t->n; i++) {
			const struct http_cache *c = &t->v[i];
			uint64_t v = s == 0 ? c->m.hits
				   : s == 1 ? c->m.misses
				   : s == 2 ? c->m.bytes
				   : s == 3 ? c->m.requests
					    : (c->db ? shmkv_generation(c->db) : 0);
			fprintf(f, "%s{cache=\"%s\"} %" PRIu64 "\n", series[s].name, c->name, v);
		}
	}
	fprintf(f, "# HELP shmkv_http_cache_request_duration_seconds Requests naming the cache.\n"
		   "# TYPE shmkv_http_cache_request_duration_seconds histogram\n");
	for (size_t i = 0; i < t->n; i++) {
		char label[96];
		snprintf(label, sizeof label, "cache=\"%s\"", t->v[i].name);
		hist(f, "shmkv_http_cache_request_duration_seconds", label, &t->v[i].m.latency);
	}
	if (fclose(f)) {
		free(text);
		return -ENOMEM;
	}
	*out = text;
	*len = n;
	return 0;
}
