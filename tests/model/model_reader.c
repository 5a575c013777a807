/* model_reader.c - the C reader of the writes model test (README.md here):
 * attached to a cache served by shmkv-loader for its whole run, it answers
 * the driver's commands on stdin, one reply line each on stdout:
 *
 *   keys HEX...    the key pool (hex of each key's bytes)     -> ok N
 *   check GEN MS   refresh until the generation is at least GEN (attach
 *                  again after SHMKV_ESTALE, retry -EAGAIN), for MS ms at
 *                  most; then every pool key by shmkv_get, shmkv_get_expires
 *                  and one shmkv_get_batch, all of that one generation
 *                  -> ok G CRC PRESENT
 *   iter           the live entries of the same generation (shmkv_iter),
 *                  sorted by key                              -> ok G CRC COUNT
 *   dump           the answers of the last check, key by key  -> ok G TOKEN...
 *   dumpiter       the entries of iter                        -> ok G TOKEN...
 *   quit
 *
 * A failure answers "error WHY". The encodings hashed (CRC-32, zlib's) and
 * dumped are the driver's (writes_model.py: check_digest, iter_digest). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <shmkv.h>

static uint32_t crc_table[256];

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

/* zlib's crc32(crc, p, n): chained over calls */
static uint32_t crc32_of(uint32_t crc, const void *p, size_t n)
{
	const unsigned char *b = p;
	crc = ~crc;
	while (n--)
		crc = crc_table[(crc ^ *b++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static uint32_t crc_str(uint32_t crc, const char *s)
{
	return crc32_of(crc, s, strlen(s));
}

/* "LEN:" then the bytes */
static uint32_t crc_field(uint32_t crc, const void *p, size_t n)
{
	char head[32];
	snprintf(head, sizeof head, "%zu:", n);
	return crc32_of(crc_str(crc, head), p, n);
}

static void put_hex(const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
}

static int unhex(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static const char *root, *name;
static shmkv *db;
static shmkv_key *keys;
static size_t nkeys;

/* the answers of the last check, and the entries of the last iter */
struct answer {
	int present;
	const char *data;
	size_t size;
	uint32_t expires;
};
static struct answer *answers;
struct entry {
	const unsigned char *key;
	size_t key_len;
	const char *data;
	size_t size;
	uint32_t expires;
};
static struct entry *entries;
static size_t nentries;

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void reply_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void reply_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("error ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
}

/* keys HEX...: the pool, kept for the whole run */
static void cmd_keys(char *args)
{
	size_t cap = 16;
	keys = calloc(cap, sizeof *keys);
	for (char *tok = strtok(args, " "); tok; tok = strtok(NULL, " ")) {
		size_t n = strlen(tok);
		unsigned char *k = malloc(n / 2 + 1);
		for (size_t i = 0; i + 1 < n; i += 2)
			k[i / 2] = (unsigned char)(unhex(tok[i]) << 4 | unhex(tok[i + 1]));
		if (nkeys == cap)
			keys = realloc(keys, (cap *= 2) * sizeof *keys);
		keys[nkeys].data = k;
		keys[nkeys++].len = n / 2;
	}
	answers = calloc(nkeys ? nkeys : 1, sizeof *answers);
	printf("ok %zu\n", nkeys);
}

/* Refreshes (attaching again after SHMKV_ESTALE) until the generation is
 * at least gen or ms passed. 0, or the last error with why set. */
static int follow(uint64_t gen, long ms, char *why, size_t why_len)
{
	int64_t end = now_ms() + ms;
	int last = 0;
	for (;;) {
		if (!db) {
			last = shmkv_attach_diag(root, name, 0, &db, why, why_len);
			if (last)
				db = NULL;
		} else {
			last = shmkv_refresh(db);
			if (last == SHMKV_ESTALE) { /* the protocol 1 file retired: attach again */
				shmkv_close(db);
				db = NULL;
				continue;
			}
			if (last < 0)
				snprintf(why, why_len, "refresh: %s", shmkv_strerror(last));
		}
		if (db && shmkv_generation(db) >= gen)
			return 0;
		if (now_ms() > end) {
			if (!last)
				snprintf(why, why_len, "still at generation %" PRIu64,
					 db ? shmkv_generation(db) : 0);
			return last ? last : -ETIMEDOUT;
		}
		sleep_ms(1);
	}
}

static void cmd_check(const char *args)
{
	uint64_t gen;
	long ms;
	char why[600] = "";
	if (sscanf(args, "%" SCNu64 " %ld", &gen, &ms) != 2) {
		reply_error("check GEN MS: bad arguments");
		return;
	}
	if (follow(gen, ms, why, sizeof why)) {
		reply_error("no generation %" PRIu64 " within %ld ms: %s", gen, ms, why);
		return;
	}
	shmkv_value *bv = calloc(nkeys ? nkeys : 1, sizeof *bv);
	int *berr = calloc(nkeys ? nkeys : 1, sizeof *berr);
	shmkv_get_batch(db, keys, nkeys, bv, berr);
	uint32_t crc = 0;
	size_t present = 0;
	for (size_t i = 0; i < nkeys; i++) {
		shmkv_value v;
		int err = shmkv_get(db, keys[i].data, keys[i].len, &v);
		struct answer *a = &answers[i];
		memset(a, 0, sizeof *a);
		if (err && err != SHMKV_ENOTFOUND) {
			reply_error("key %zu: get: %s", i, shmkv_strerror(err));
			goto out;
		}
		if (err != berr[i] || (!err && (bv[i].size != v.size || memcmp(bv[i].data, v.data, v.size)))) {
			reply_error("key %zu: the batch answers %s, get %s", i, shmkv_errname(berr[i]),
				    shmkv_errname(err));
			goto out;
		}
		if (err) {
			crc = crc_str(crc, "-\n");
			continue;
		}
		if (v.type != SHMKV_TYPE_STRING) {
			reply_error("key %zu: type %u, not a string", i, v.type);
			goto out;
		}
		uint32_t exp = 0;
		if ((err = shmkv_get_expires(db, keys[i].data, keys[i].len, &exp))) {
			reply_error("key %zu: expires: %s", i, shmkv_strerror(err));
			goto out;
		}
		*a = (struct answer){1, v.data, v.size, exp};
		char tail[32];
		snprintf(tail, sizeof tail, ",%" PRIu32 "\n", exp);
		crc = crc_str(crc_field(crc, v.data, v.size), tail);
		present++;
	}
	printf("ok %" PRIu64 " %08" PRIx32 " %zu\n", shmkv_generation(db), crc, present);
out:
	free(bv);
	free(berr);
}

static int entry_cmp(const void *x, const void *y)
{
	const struct entry *a = x, *b = y;
	size_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
	int c = memcmp(a->key, b->key, n);
	return c ? c : (a->key_len > b->key_len) - (a->key_len < b->key_len);
}

static void cmd_iter(void)
{
	if (!db) {
		reply_error("iter before check");
		return;
	}
	size_t cap = 1024;
	nentries = 0;
	free(entries);
	entries = malloc(cap * sizeof *entries);
	shmkv_iter it;
	shmkv_iter_init(db, &it);
	const void *k;
	size_t kl;
	shmkv_value v;
	int err;
	while (!(err = shmkv_iter_next(&it, &k, &kl, &v))) {
		if (v.type != SHMKV_TYPE_STRING) {
			reply_error("iteration: type %u, not a string", v.type);
			return;
		}
		if (nentries == cap)
			entries = realloc(entries, (cap *= 2) * sizeof *entries);
		entries[nentries++] = (struct entry){k, kl, v.data, v.size, shmkv_iter_expires(&it)};
	}
	if (err != SHMKV_EEND) {
		reply_error("iteration: %s", shmkv_strerror(err));
		return;
	}
	qsort(entries, nentries, sizeof *entries, entry_cmp);
	uint32_t crc = 0;
	for (size_t i = 0; i < nentries; i++) {
		if (i && !entry_cmp(&entries[i - 1], &entries[i])) {
			reply_error("iteration yields a key twice");
			return;
		}
		char tail[32];
		snprintf(tail, sizeof tail, ",%" PRIu32 "\n", entries[i].expires);
		crc = crc_field(crc, entries[i].key, entries[i].key_len);
		crc = crc_str(crc_field(crc, entries[i].data, entries[i].size), tail);
	}
	printf("ok %" PRIu64 " %08" PRIx32 " %zu\n", shmkv_generation(db), crc, nentries);
}

static void cmd_dump(void)
{
	printf("ok %" PRIu64, db ? shmkv_generation(db) : 0);
	for (size_t i = 0; i < nkeys; i++) {
		if (!answers[i].present) {
			printf(" -");
			continue;
		}
		printf(" ");
		put_hex(answers[i].data, answers[i].size);
		printf(",%" PRIu32, answers[i].expires);
	}
	printf("\n");
}

static void cmd_dumpiter(void)
{
	printf("ok %" PRIu64, db ? shmkv_generation(db) : 0);
	for (size_t i = 0; i < nentries; i++) {
		printf(" ");
		put_hex(entries[i].key, entries[i].key_len);
		printf(",");
		put_hex(entries[i].data, entries[i].size);
		printf(",%" PRIu32, entries[i].expires);
	}
	printf("\n");
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: model_reader ROOT CACHE (commands on stdin: README.md)\n");
		return 2;
	}
	root = argv[1];
	name = argv[2];
	crc_init();
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, stdin)) > 0) {
		if (line[n - 1] == '\n')
			line[--n] = 0;
		if (!strncmp(line, "keys ", 5) || !strcmp(line, "keys"))
			cmd_keys(line + 4);
		else if (!strncmp(line, "check ", 6))
			cmd_check(line + 6);
		else if (!strcmp(line, "iter"))
			cmd_iter();
		else if (!strcmp(line, "dump"))
			cmd_dump();
		else if (!strcmp(line, "dumpiter"))
			cmd_dumpiter();
		else if (!strcmp(line, "quit"))
			break;
		else
			reply_error("unknown command \"%.40s\"", line);
		fflush(stdout);
	}
	free(line);
	if (db)
		shmkv_close(db);
	return 0;
}
