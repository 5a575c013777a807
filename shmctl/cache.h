/* cache.h - the `cache` object: caches a shmkv-loader keeps in shared memory
 * under a root (cache.c dispatches and runs the control-socket verbs;
 * cache_ctl.c reads control segments; cache_readers.c scans /proc). */
#ifndef SHMCTL_CACHE_H
#define SHMCTL_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <shmkv.h>

#include "jv.h"

int cache_help(int argc, char **argv);

int do_cache_list(int argc, char **argv);
int do_cache_status(int argc, char **argv); /* cache_status.c */
int do_cache_readers(int argc, char **argv);

/* Parses a verb's options (-j, -p, -h, -r/--root DIR) and checks that
 * exactly nargs positional arguments follow. Returns -1 to go on, with the
 * positionals at argv[optind...], else the exit code. */
int cache_args(int argc, char **argv, int nargs, const char *usage);

/* Checks a cache name as the protocol does; reports and returns EXIT_USAGE. */
int cache_check_name(const char *name);

/* Asks the loader (words[0..n), timeout_ms < 0: as long as it takes; tick:
 * see ctl_request_tick). Returns -1 with a successful *reply (jv_free it),
 * else the exit code, the failure reported (1: no such cache, else 2). */
int loader_call(const char *const *words, size_t n, int timeout_ms, jv **reply,
		void (*tick)(void *), void *ctx);
/* Whether a failed reply says the cache does not exist: its "reason" is
 * "no_cache" (common/json.h names the reasons). */
bool reply_no_cache(const jv *reply);
/* Reports a failed reply's error; returns the exit code (1: no such cache,
 * else 2). */
int reply_error(const jv *reply);
/* A successful reply: the object as it came with -j, else "key  value" lines. */
void print_reply(const jv *reply);

/* cache stats (cache_stats.c) */
int do_cache_stats(int argc, char **argv);
/* cache_write.c: changes (loader/README.md, "Writes") */
int do_cache_set(int argc, char **argv);
int do_cache_remove(int argc, char **argv);
int do_cache_apply(int argc, char **argv);
/* cache apply NAME -: a stream of changes from standard input (cache_stream.c) */
int cache_stream(const char *name);

/* Reads ROOT/NAME.ctl read-only: a consistent copy of the control segment
 * (shmkv_ctl_open, shmkv_ctl_read). Returns 0; -ENOENT (no such cache);
 * SHMKV_EPROTO (not a control segment of this protocol version and layout);
 * -EAGAIN (stays mid-update); other -errno; why says what and where. */
int ctl_read(const char *root, const char *name, shmkv_ctl *out, char *why, size_t why_len);

/* `cache list` without a loader: every ROOT/NAME.ctl read with ctl_read(),
 * as {"loader_running": false, "note": note, "caches": [{"name",
 * "generation", "published", "image_size", "memory", "copies", "segment",
 * "loader_pid", "published_ns"} or {"name", "error"}]}. Returns 0, or -1
 * with why (the root cannot be read). */
int ctl_list(const char *root, const char *note, jv **out, char *why, size_t why_len);

/* "1.5 GiB", "4 KiB", "512 B" */
const char *fmt_bytes(uint64_t n, char *buf, size_t len);

#endif /* SHMCTL_CACHE_H */
