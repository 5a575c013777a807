/* metrics.h - shmkv-http's counters and the Prometheus text of GET /metrics
 * (http/README.md "Metrics" lists every series). Single-threaded. */
#ifndef SHMKV_HTTP_METRICS_H
#define SHMKV_HTTP_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* Latency buckets' upper bounds in microseconds (le="..." in seconds). */
#define HTTP_LAT_BUCKETS 12

struct http_hist {
	uint64_t le[HTTP_LAT_BUCKETS]; /* requests at or under bound i (not cumulative) */
	uint64_t count;                /* all, +Inf included */
	double sum_s;
};

struct http_cache_metrics {
	uint64_t hits, misses, bytes; /* keys found, keys absent, value bytes sent */
	uint64_t requests;            /* requests naming this cache */
	struct http_hist latency;
};

struct http_metrics {
	uint64_t conn_open, conn_total, conn_refused; /* now; accepted; over max_connections */
	uint64_t requests;
	uint64_t status[6];           /* by class: 1xx..5xx (index 1..5), 0: other */
	uint64_t errors;              /* answers with a 4xx or 5xx status */
	struct http_hist latency;     /* every request */
};

void http_hist_add(struct http_hist *h, uint64_t us);

struct http_caches;
/* The Prometheus text (version 0.0.4) of m and every cache of t, malloc'd
 * into *out (NUL-terminated); 0 or -ENOMEM. */
int http_metrics_text(const struct http_metrics *m, const struct http_caches *t, char **out,
		      size_t *len);

#endif
