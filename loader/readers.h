/* readers.h - which processes map a cache's segments (readers.c): one scan of
 * /proc/PID/maps for every cache at once, on a thread of its own, bounded in
 * time, its result shared by every request while it is fresh.
 *
 * A mapping counts when its device and inode are those of a segment the
 * loader published (stat of the segment files, remembered per cache), never
 * by its name: a file of another user named like a segment is not a reader. */
#ifndef LOADER_READERS_H
#define LOADER_READERS_H

#include <stdbool.h>
#include <stdint.h>

#include "loader.h"

/* A result serves requests for max(READERS_TTL_MS, READERS_TTL_FACTOR x the
 * scan's duration): a slow /proc (processes with many mappings) makes scans
 * rarer, so the scanner stays under about a fifth of one core. */
#define READERS_TTL_MS 1000
#define READERS_TTL_FACTOR 4
/* A scan stops after this long; its counts are then partial (a lower bound). */
#define READERS_SCAN_MAX_MS 2000
/* Segments remembered per cache for stale counts (current ones excluded). */
#define READERS_HISTORY 64

struct readers_count {
	unsigned cur, stale; /* processes other than the loader */
	bool partial;        /* the scan hit READERS_SCAN_MAX_MS */
	uint64_t age_ms;     /* since the scan began */
};

/* Main thread. Starts the scanner thread; its eventfd (readers_fd) becomes
 * readable when a scan is over. Returns 0 or -errno (why filled). */
int readers_start(struct loader *L, char *why, size_t why_len);
int readers_fd(void);
/* Stops and joins the scanner (a running scan ends at its next process). */
void readers_stop(void);

/* Main thread, L->lock NOT held. The counts of cache name, whose current
 * segment file is cur_path ("": none published), from the newest result if it
 * is fresh and was taken while cur_path was current (any_path: also one taken
 * before). Returns 1 (*out filled), or 0: none fresh; a scan is requested
 * (takes L->lock for the snapshot) and readers_fd signals its end. */
int readers_lookup(struct loader *L, const char *name, const char *cur_path, bool any_path,
		   struct readers_count *out);
/* Main thread: whether a fresh result exists for every cache (metrics); when
 * not, a scan is requested as above. */
bool readers_fresh(struct loader *L);
/* Main thread: readers_fd was readable. Returns 1 when a scan ended. */
int readers_collect(void);

#endif /* LOADER_READERS_H */
