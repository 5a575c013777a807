/* expiry.c - the expiry times of a generation and its figures (expiry.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "expiry.h"

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Sorts a[0, n) ascending: two passes of 16 bits (LSD radix), through a
 * buffer of n. Returns 0 or -ENOMEM (a unsorted). */
static int sort_times(uint32_t *a, uint64_t n)
{
	if (n < 2)
		return 0;
	uint32_t *tmp = malloc(n * sizeof *tmp);
	uint32_t *cnt = malloc(65536 * sizeof *cnt);
	if (!tmp || !cnt) {
		free(tmp);
		free(cnt);
		return -ENOMEM;
	}
	uint32_t *src = a, *dst = tmp;
	for (unsigned shift = 0; shift < 32; shift += 16) {
		memset(cnt, 0, 65536 * sizeof *cnt);
		for (uint64_t i = 0; i < n; i++)
			cnt[(src[i] >> shift) & 0xffff]++;
		uint32_t sum = 0; /* n <= max_times < 2^32 */
		for (unsigned d = 0; d < 65536; d++) {
			uint32_t c = cnt[d];
			cnt[d] = sum;
			sum += c;
		}
		for (uint64_t i = 0; i < n; i++)
			dst[cnt[(src[i] >> shift) & 0xffff]++] = src[i];
		uint32_t *t = src;
		src = dst;
		dst = t;
	}
	/* two passes: the result is back in a */
	free(tmp);
	free(cnt);
	return 0;
}

static int scan_fail(struct expiry *out, int err, char *why, size_t why_len, const char *what)
{
	free(out->times);
	out->times = NULL;
	out->state = EXPIRY_FAILED;
	out->expiring = 0;
	out->first = out->last = 0;
	snprintf(out->note, sizeof out->note, "%s", what);
	if (why_len)
		snprintf(why, why_len, "%s", what);
	return err;
}

int expiry_scan(const shmkv *db, uint64_t max_times, struct expiry *out, char *why,
		size_t why_len)
{
	memset(out, 0, sizeof *out);
	uint64_t t0 = mono_ms();
	const shmkv_image_header *h = shmkv_header(db);
	/* lib's verify holds the flag to the records (verify.h): no flag, no expiry */
	if (h->format_version < 2 || !(h->flags & SHMKV_HFLAG_EXPIRY)) {
		out->state = EXPIRY_NONE;
		return 0;
	}
	uint64_t cap = 0, n = 0, seen = 0;
	uint32_t *times = NULL;
	shmkv_iter it;
	const void *k;
	size_t klen;
	shmkv_value v;
	int err;
	shmkv_iter_init_all(db, &it);
	while ((err = shmkv_iter_next(&it, &k, &klen, &v)) == 0) {
		uint32_t e = shmkv_iter_expires(&it);
		seen++;
		if (!e)
			continue;
		out->expiring++;
		if (!out->first || e < out->first)
			out->first = e;
		if (e > out->last)
			out->last = e;
		if (out->expiring > max_times) {
			free(times); /* over the bound: count only */
			times = NULL;
			cap = 0;
			continue;
		}
		if (n == cap) {
			uint64_t nc = cap ? cap * 2 : 4096;
			if (nc > max_times)
				nc = max_times;
			uint32_t *nt = realloc(times, nc * sizeof *nt);
			if (!nt) {
				out->times = times;
				return scan_fail(out, -ENOMEM, why, why_len,
						 "out of memory for the expiry times");
			}
			times = nt;
			cap = nc;
		}
		times[n++] = e;
	}
	if (err != SHMKV_EEND) {
		char w[160];
		snprintf(w, sizeof w, "iteration stopped after %llu entries: %s",
			 (unsigned long long)seen, shmkv_strerror(err));
		out->times = times;
		return scan_fail(out, err, why, why_len, w);
	}
	if (out->expiring > max_times) {
		out->state = EXPIRY_COUNTED;
		snprintf(out->note, sizeof out->note,
			 "%llu entries expire, over the %llu times the loader keeps (expiry_times): "
			 "expired and next are known only before the first and after the last",
			 (unsigned long long)out->expiring, (unsigned long long)max_times);
	} else {
		if (n < cap) { /* give back what doubling took */
			uint32_t *nt = realloc(times, (n ? n : 1) * sizeof *nt);
			if (nt)
				times = nt;
		}
		out->times = times;
		if (sort_times(times, n))
			return scan_fail(out, -ENOMEM, why, why_len,
					 "out of memory sorting the expiry times");
		out->state = EXPIRY_TRACKED;
	}
	out->scan_ms = mono_ms() - t0;
	return 0;
}

int expiry_scan_file(const char *path, uint64_t max_times, struct expiry *out, char *why,
		     size_t why_len)
{
	shmkv *db;
	char w[300];
	int err = shmkv_open_file_diag(path, SHMKV_OPEN_NOVERIFY, &db, w, sizeof w);
	if (err) {
		memset(out, 0, sizeof *out);
		return scan_fail(out, err, why, why_len, w);
	}
	err = expiry_scan(db, max_times, out, why, why_len);
	shmkv_close(db);
	return err;
}

/* Entries of a[0, n) with a time <= t. */
static uint64_t count_upto(const uint32_t *a, uint64_t n, int64_t t)
{
	uint64_t lo = 0, hi = n;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if ((int64_t)a[mid] <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void expiry_figures(const struct expiry *e, int64_t now, struct expiry_figs *f)
{
	memset(f, 0, sizeof *f);
	f->state = e->state;
	f->now = now;
	f->expiring = e->expiring;
	f->last = e->last;
	f->scan_ms = e->scan_ms;
	snprintf(f->note, sizeof f->note, "%s", e->note);
	switch (e->state) {
	case EXPIRY_NONE:
		f->expired_known = f->next_known = 1;
		break;
	case EXPIRY_TRACKED: {
		/* expired: now >= expires (FORMAT.md §17), as a reader decides */
		uint64_t i = count_upto(e->times, e->expiring, now);
		f->expired_known = f->next_known = 1;
		f->expired = i;
		f->next = i < e->expiring ? e->times[i] : 0;
		f->memory_bytes = e->expiring * sizeof *e->times;
		break;
	}
	case EXPIRY_COUNTED:
		if (now < (int64_t)e->first) {
			f->expired_known = f->next_known = 1;
			f->next = e->first;
		} else if (now >= (int64_t)e->last) {
			f->expired_known = f->next_known = 1;
			f->expired = e->expiring;
		}
		break;
	case EXPIRY_PENDING:
	case EXPIRY_FAILED:
		break;
	}
}

void expiry_free(struct expiry *e)
{
	free(e->times);
	memset(e, 0, sizeof *e);
}

const char *expiry_state_name(enum expiry_state s)
{
	switch (s) {
	case EXPIRY_PENDING:
		return "pending";
	case EXPIRY_NONE:
		return "none";
	case EXPIRY_TRACKED:
		return "tracked";
	case EXPIRY_COUNTED:
		return "counted";
	case EXPIRY_FAILED:
		return "failed";
	}
	return "?";
}
