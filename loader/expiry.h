/* expiry.h - when the entries of a generation expire (lib/FORMAT.md
 * §17), for status and metrics. Readers are other processes and never
 * report a get, so the loader cannot count expired hits; it can say, at any
 * moment, how many entries of the served image carry an expiry, how many of
 * them have expired (a reader treats those as absent), and when the next
 * one does.
 *
 * One pass over the image (lib's shmkv_iter) collects the expiry times and
 * sorts them (4 bytes per expiring entry, up to a bound: [loader] expiry_times);
 * the figures at a given second are then two binary searches. An image
 * whose header has no EXPIRY flag is not read at all. */
#ifndef LOADER_EXPIRY_H
#define LOADER_EXPIRY_H

#include <stddef.h>
#include <stdint.h>

#include <shmkv.h>

enum expiry_state {
	EXPIRY_PENDING = 0, /* not read yet (adopted at restart, or just rolled back) */
	EXPIRY_NONE,        /* no entry expires: the header has no EXPIRY flag */
	EXPIRY_TRACKED,     /* times[] holds every expiring entry's time */
	EXPIRY_COUNTED,     /* more than the scan's max_times: count, first and last only */
	EXPIRY_FAILED,      /* the pass stopped (note says why): nothing known */
};

struct expiry {
	enum expiry_state state;
	uint64_t expiring;  /* entries that carry an expiry (TRACKED, COUNTED) */
	uint32_t first;     /* earliest and latest expiry, unix seconds (0: none) */
	uint32_t last;
	uint32_t *times;    /* TRACKED: `expiring` times, ascending; malloc'd, else NULL */
	uint64_t scan_ms;   /* how long the pass took */
	char note[200];     /* FAILED, COUNTED: why ("" otherwise) */
};

/* The figures at one second. */
struct expiry_figs {
	enum expiry_state state;
	int64_t now;        /* unix seconds the figures are for */
	uint64_t expiring;
	int expired_known;  /* 0: expired is unknown (PENDING, FAILED, COUNTED between
			       first and last) */
	uint64_t expired;   /* entries with expiry <= now: absent for readers */
	int next_known;     /* 0: unknown (as expired) */
	uint32_t next;      /* earliest expiry > now (0: none left) */
	uint32_t last;
	uint64_t memory_bytes; /* the loader's memory for times[] */
	uint64_t scan_ms;
	char note[200];
};

/* Reads db's expiry times into *out (which it initialises), at most
 * max_times of them (< 2^32; the loader's expiry_times): with more, only
 * their count, first and last (COUNTED). Returns 0, or the iteration's
 * error (SHMKV_ECORRUPT, -ENOMEM) with *out FAILED and the reason in why
 * and out->note. */
int expiry_scan(const shmkv *db, uint64_t max_times, struct expiry *out, char *why,
		size_t why_len);
/* The same for a segment file (its header is checked; no checksum). */
int expiry_scan_file(const char *path, uint64_t max_times, struct expiry *out, char *why,
		     size_t why_len);
/* The figures of e at unix second now (times[] is read: hold what guards it). */
void expiry_figures(const struct expiry *e, int64_t now, struct expiry_figs *f);
/* Frees times[] and makes e PENDING. */
void expiry_free(struct expiry *e);
const char *expiry_state_name(enum expiry_state s);

#endif /* LOADER_EXPIRY_H */
