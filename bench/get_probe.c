/* get_probe: gets of any image file, for counting what one get costs under
 * cachegrind (bench/README.md, "Instructions per get of any image"). The
 * workloads of lookup_bench hold `key_N` -> `val_N` and f32 lists; this one
 * reads the image it is given (OUT values, expiring entries, a production
 * image), so that a change to the reader can be counted on the records it
 * is about.
 *
 *   get_probe IMAGE KEYS REPS [single|batch] [FORMAT]
 *
 * 4,096 keys, FORMAT (default "key_%lu") of (i * 7919) % KEYS, are looked
 * up REPS times by shmkv_get (single) or shmkv_get_batch, 64 keys a call
 * (batch); each hit's last value byte is read. Instructions per get = the
 * difference between two runs (REPS 12 and 2) / (10 * 4096): the open (which
 * checks every section) and the setup cancel out. Prints the hits and
 * misses of the last pass. */
#include <shmkv.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PROBE_KEYS = 4096, PROBE_BATCH = 64 };

static int usage(void)
{
	fprintf(stderr, "usage: get_probe IMAGE KEYS REPS [single|batch] [FORMAT]\n"
			"  FORMAT: a printf format of one unsigned long (default key_%%lu)\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 4 || argc > 6)
		return usage();
	char *end;
	unsigned long n = strtoul(argv[2], &end, 10);
	if (*end || !n)
		return usage();
	long reps = strtol(argv[3], &end, 10);
	if (*end || reps < 0)
		return usage();
	int batch = 0;
	if (argc > 4) {
		if (!strcmp(argv[4], "batch"))
			batch = 1;
		else if (strcmp(argv[4], "single"))
			return usage();
	}
	const char *fmt = argc > 5 ? argv[5] : "key_%lu";
	const char *pct = strchr(fmt, '%');
	if (!pct || strcmp(pct, "%lu") != 0 || strchr(fmt, '%') != strrchr(fmt, '%')) {
		fprintf(stderr, "get_probe: FORMAT must end in one %%lu: %s\n", fmt);
		return 2;
	}
	shmkv *db = NULL;
	char why[256] = "";
	int err = shmkv_open_file_diag(argv[1], 0, &db, why, sizeof why);
	if (err) {
		/* why names the file and the reason when the reader gave one */
		if (why[0])
			fprintf(stderr, "get_probe: %s\n", why);
		else
			fprintf(stderr, "get_probe: %s: %s\n", argv[1], shmkv_strerror(err));
		return 1;
	}
	static char kb[PROBE_KEYS][64];
	static shmkv_key ks[PROBE_KEYS];
	static shmkv_value vs[PROBE_KEYS];
	static int errs[PROBE_KEYS];
	for (unsigned long i = 0; i < PROBE_KEYS; i++) {
		int l = snprintf(kb[i], sizeof kb[i], fmt, (i * 7919) % n);
		if (l < 0 || (size_t)l >= sizeof kb[i]) {
			fprintf(stderr, "get_probe: key %lu longer than %zu bytes\n", i,
				sizeof kb[i] - 1);
			return 2;
		}
		ks[i].data = kb[i];
		ks[i].len = (size_t)l;
	}
	unsigned long sum = 0, hits = 0, misses = 0;
	for (long r = 0; r < reps; r++) {
		hits = misses = 0;
		for (int i = 0; batch && i < PROBE_KEYS; i += PROBE_BATCH)
			shmkv_get_batch(db, ks + i, PROBE_BATCH, vs + i, errs + i);
		for (int i = 0; i < PROBE_KEYS; i++) {
			if (!batch)
				errs[i] = shmkv_get(db, ks[i].data, ks[i].len, &vs[i]);
			if (errs[i]) {
				misses++;
				continue;
			}
			hits++;
			if (vs[i].size)
				sum += ((const unsigned char *)vs[i].data)[vs[i].size - 1];
		}
	}
	printf("hits %lu misses %lu (last pass; checksum %lu)\n", hits, misses, sum);
	shmkv_close(db);
	return 0;
}
