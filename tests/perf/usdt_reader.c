/* usdt_reader.c - a reader built with the reader's USDT probes (SHMKV_USDT),
 * the workload the perf/ scripts' tests trace (tests/perf/README.md).
 *
 *   usdt_reader get FILE HITS MISSES [EXPIRED]
 *       opens the image FILE (keys key0..key99 present), makes HITS gets of
 *       present keys (key0, key1, ...), MISSES of absent ones and EXPIRED
 *       (default 0) of keys gone0..gone99, which FILE holds with an expiry
 *       that has passed; exit 1 if any result is not the
 *       expected one
 *   usdt_reader follow ROOT NAME GEN
 *       attaches to cache NAME under ROOT, then refreshes (and gets key0)
 *       every millisecond until it serves generation GEN; exit 1 after 60 s
 *       (times $SHMKV_TEST_SLOW, as every deadline here)
 *   usdt_reader hold ROOT NAME STOPFILE
 *       attaches, prints its generation, and never refreshes until STOPFILE
 *       exists: a reader stuck on an old generation
 * Progress and errors go to stderr; "ready GEN" goes to stdout once attached. */
#define _POSIX_C_SOURCE 200809L
#define SHMKV_USDT 1
#define SHMKV_USDT_SEMAPHORES 1 /* this program's one translation unit */
#include <shmkv.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void nap_ms(long ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&t, NULL);
}

/* The monotonic clock in ms past which a wait of secs (times
 * $SHMKV_TEST_SLOW, an integer factor: ./run test-loaded) gives up. */
static long long deadline_ms(long long secs)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	const char *s = getenv("SHMKV_TEST_SLOW");
	long long f = s && atoll(s) > 1 ? atoll(s) : 1;
	return t.tv_sec * 1000LL + t.tv_nsec / 1000000 + secs * 1000 * f;
}

static int before(long long deadline)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000LL + t.tv_nsec / 1000000 < deadline;
}

static int attach_wait(const char *root, const char *name, shmkv **db)
{
	char why[256];
	for (long long end = deadline_ms(60); before(end);) {
		int err = shmkv_attach_diag(root, name, 0, db, why, sizeof why);
		if (!err)
			return 0;
		if (err != -ENOENT && err != -EAGAIN) {
			fprintf(stderr, "usdt_reader: attach %s: %s\n", name, why);
			return err;
		}
		nap_ms(10);
	}
	fprintf(stderr, "usdt_reader: attach %s: nothing published within the deadline\n", name);
	return -ETIMEDOUT;
}

static int run_get(const char *file, long hits, long misses, long expired)
{
	shmkv *db;
	char why[256], key[32];
	int err = shmkv_open_file_diag(file, 0, &db, why, sizeof why);
	if (err) {
		fprintf(stderr, "usdt_reader: %s\n", why);
		return 1;
	}
	int bad = 0;
	shmkv_value v;
	for (long i = 0; i < hits; i++) {
		int n = snprintf(key, sizeof key, "key%ld", i % 100);
		bad |= shmkv_get(db, key, (size_t)n, &v) != 0;
	}
	for (long i = 0; i < misses; i++) {
		int n = snprintf(key, sizeof key, "absent%ld", i);
		bad |= shmkv_get(db, key, (size_t)n, &v) != SHMKV_ENOTFOUND;
	}
	for (long i = 0; i < expired; i++) {
		int n = snprintf(key, sizeof key, "gone%ld", i % 100);
		uint32_t when = 0; /* held, with an expiry (fires no probe) */
		bad |= shmkv_get_expires(db, key, (size_t)n, &when) != 0 || !when;
		bad |= shmkv_get(db, key, (size_t)n, &v) != SHMKV_ENOTFOUND;
	}
	shmkv_close(db);
	if (bad)
		fprintf(stderr, "usdt_reader: a get returned an unexpected result\n");
	return bad;
}

static int run_follow(const char *root, const char *name, uint64_t gen)
{
	shmkv *db;
	if (attach_wait(root, name, &db))
		return 1;
	printf("ready %llu\n", (unsigned long long)shmkv_generation(db));
	fflush(stdout);
	shmkv_value v;
	for (long long end = deadline_ms(60); before(end) && shmkv_generation(db) < gen;) {
		nap_ms(1);
		shmkv_refresh(db);
		shmkv_get(db, "key0", 4, &v);
	}
	uint64_t got = shmkv_generation(db);
	shmkv_close(db);
	if (got < gen) {
		fprintf(stderr, "usdt_reader: still at generation %llu at the deadline\n",
			(unsigned long long)got);
		return 1;
	}
	return 0;
}

static int run_hold(const char *root, const char *name, const char *stop)
{
	shmkv *db;
	if (attach_wait(root, name, &db))
		return 1;
	printf("ready %llu\n", (unsigned long long)shmkv_generation(db));
	fflush(stdout);
	for (long long end = deadline_ms(60); before(end) && access(stop, F_OK) != 0;)
		nap_ms(1);
	shmkv_close(db);
	return 0;
}

int main(int argc, char **argv)
{
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "get"))
		return run_get(argv[2], atol(argv[3]), atol(argv[4]), argc == 6 ? atol(argv[5]) : 0);
	if (argc == 5 && !strcmp(argv[1], "follow"))
		return run_follow(argv[2], argv[3], strtoull(argv[4], NULL, 10));
	if (argc == 5 && !strcmp(argv[1], "hold"))
		return run_hold(argv[2], argv[3], argv[4]);
	fprintf(stderr, "usage: usdt_reader get FILE HITS MISSES [EXPIRED]\n"
			"       usdt_reader follow ROOT NAME GEN\n"
			"       usdt_reader hold ROOT NAME STOPFILE\n");
	return 2;
}
