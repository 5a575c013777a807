/* join_cmd.c - image join: fragments built with `image build --part K/N
 * --buckets B` (given in part order 1..N) become one image, byte-identical to a
 * single build of all their records (lib/FORMAT.md §14, "Partitioned builds").
 * Every fragment is verified, must agree with the first on the header fields
 * the image depends on, and may only hold keys of its own part. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <shmkv.h>
#include <shmkv/tools.h>
#include <shmkv_build.h>

#include "image.h"
#include "main.h"
#include "progress.h"

enum { OPT_THREADS = 256, OPT_MEMORY_LIMIT, OPT_TMPDIR };

#define BAD(...) p_usage("image", "join: " __VA_ARGS__)

/* Header fields that must be equal in all fragments: the join's options. */
static int same_header(const char *p0, const shmkv_image_header *h0, const char *p,
		       const shmkv_image_header *h)
{
	const char *field = NULL;
	if (h->bucket_count != h0->bucket_count)
		field = "bucket count";
	else if (h->hash_seed != h0->hash_seed)
		field = "hash seed";
	else if (h->hash_bits != h0->hash_bits)
		field = "hash bits";
	else if ((h->flags & SHMKV_HFLAG_DEDUP) != (h0->flags & SHMKV_HFLAG_DEDUP))
		field = "dedup flag";
	else if (h->created_unix != h0->created_unix)
		field = "created time";
	else if (strncmp(h->name, h0->name, sizeof h->name) != 0)
		field = "name";
	if (!field)
		return 0;
	return p_err("%s: its %s differs from %s's: fragments of one image are built with the "
		     "same --buckets, --seed, --created, --name and dedup", p, field, p0);
}

/* A fragment's pages read so far leave this process's memory (they stay in
 * the page cache, and are read again if needed): under a memory limit the
 * mapped fragments must not count, whatever their size. */
static void drop_pages(const shmkv_image_header *h)
{
	madvise((void *)h, (size_t)h->file_size, MADV_DONTNEED);
}

/* Adds fragment j (1-based) of n to b, checking that every key is of part j;
 * forget: drop its pages every 65536 entries. */
static int add_fragment(shmkv_builder *b, const char *path, unsigned long long j,
			unsigned long long n, shmkv *db, bool forget)
{
	const shmkv_image_header *h = shmkv_header(db);
	uint64_t lo, hi;
	shmkv_build_part_range(j, n, h->bucket_count, &lo, &hi);
	shmkv_iter it;
	const void *key;
	size_t key_len;
	shmkv_value v;
	uint64_t count = 0;
	int err;
	shmkv_builder_set_source(b, path, 0);
	shmkv_iter_init(db, &it);
	while ((err = shmkv_iter_next(&it, &key, &key_len, &v)) == 0) {
		uint64_t hv = shmkv_key_hash(h->hash_seed, h->hash_bits, key, key_len);
		uint64_t bk = shmkv_home_bucket(hv, h->bucket_count);
		count++;
		if (bk < lo || bk >= hi) {
			char *k = key_text(key, key_len);
			int rc = p_err("%s: entry %" PRIu64 ", key %s, is in bucket %" PRIu64
				       " of part %" PRIu64 "/%llu, but the fragment is given as part "
				       "%llu/%llu: give the fragments in part order, each once",
				       path, count, k ? k : "?", bk,
				       shmkv_build_part_of(bk, n, h->bucket_count), n, j, n);
			free(k);
			return rc;
		}
		shmkv_builder_set_source(b, path, count);
		err = shmkv_builder_add(b, key, key_len, v.type, v.data, v.size);
		if (err)
			return build_error(b, path, err);
		if (forget && count % 65536 == 0)
			drop_pages(h);
	}
	drop_pages(h);
	if (err != SHMKV_EEND)
		return p_err("%s: entry %" PRIu64 ": %s; 'shmctl image verify' says more", path,
			     count + 1, shmkv_strerror(err));
	return 0;
}

int do_image_join(int argc, char **argv)
{
	static const struct option opts[] = {
		VERB_LONGOPTS,
		IMAGE_WRITE_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	const char *out = NULL, *tmpdir = NULL;
	unsigned long long threads = 0, limit = 0;
	bool limit_given = false;
	int c, rc;
	verb_getopt_reset();
	while ((c = getopt_long(argc, argv, VERB_SHORTOPTS "o:", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case OPT_THREADS:
			if (!parse_u64(optarg, &threads) || threads > 1024)
				return BAD("--threads %s: expected 0 (every CPU) to 1024", optarg);
			break;
		case OPT_MEMORY_LIMIT:
			if (!memory_limit_arg("join", optarg, &limit))
				return EXIT_USAGE;
			limit_given = true;
			break;
		case OPT_TMPDIR:
			if (!*optarg)
				return BAD("--tmpdir: expected a directory");
			tmpdir = optarg;
			break;
		default:
			if ((rc = verb_common_opt(c, argv, image_help, "image")) >= 0)
				return rc;
		}
	}
	if (!out)
		return BAD("-o OUT is required");
	if (!strcmp(out, "-") && json_output)
		return BAD("-j and -o - both write to standard output; give -o FILE");
	if (optind == argc)
		return BAD("no FRAGMENT given");
	unsigned long long n = (unsigned long long)(argc - optind);

	double t0 = now_seconds();
	shmkv **dbs = calloc(n, sizeof *dbs);
	if (!dbs)
		return p_err("out of memory");
	rc = EXIT_OK;
	for (unsigned long long j = 0; j < n && rc == EXIT_OK; j++) {
		/* fragments are untrusted: every checksum and offset, before any is read */
		char why[512], msg[1024];
		int err = shmkv_open_file_diag(argv[optind + j], SHMKV_OPEN_NOVERIFY, &dbs[j], why,
					       sizeof why);
		if (!err && (err = shmkv_verify(dbs[j], why, sizeof why)) != 0) {
			shmkv_close(dbs[j]);
			dbs[j] = NULL;
		}
		if (err) {
			image_why(msg, sizeof msg, argv[optind + j], why);
			rc = p_err("%s", msg);
		} else {
			drop_pages(shmkv_header(dbs[j])); /* verified: all read once */
			if (j > 0)
				rc = same_header(argv[optind], shmkv_header(dbs[0]), argv[optind + j],
						 shmkv_header(dbs[j]));
		}
	}
	shmkv_builder *b = NULL;
	struct progress prog;
	progress_init(&prog);
	if (rc == EXIT_OK) {
		const shmkv_image_header *h = shmkv_header(dbs[0]);
		shmkv_build_options o;
		shmkv_build_options_init(&o);
		o.seed = h->hash_seed;
		o.hash_bits = h->hash_bits;
		o.created = h->created_unix;
		memcpy(o.name, h->name, sizeof o.name);
		o.name[sizeof o.name - 1] = 0;
		o.dedup = (h->flags & SHMKV_HFLAG_DEDUP) != 0;
		o.buckets = h->bucket_count;
		o.fixed = SHMKV_OPT_SEED | SHMKV_OPT_CREATED | SHMKV_OPT_NAME | SHMKV_OPT_BUCKETS |
			  SHMKV_OPT_DEDUP | SHMKV_OPT_HASH_BITS;
		o.progress = progress_update;
		o.progress_ctx = &prog;
		int err = shmkv_builder_new(&o, &b);
		if (err)
			rc = p_err("cannot start the builder: %s", shmkv_strerror(err));
		if (!err && (err = shmkv_builder_set_threads(b, (unsigned)threads)) != 0)
			rc = build_error(b, out, err);
		if (!limit_given)
			limit = shmkv_build_default_memory_limit();
		if (!err && (err = shmkv_builder_set_memory_limit(b, limit, tmpdir)) != 0)
			rc = build_error(b, out, err);
		if (!err && (err = shmkv_builder_check_output(b, out)) != 0)
			rc = build_error(b, out, err);
		if (!err)
			catch_signals();
	}
	for (unsigned long long j = 0; j < n && rc == EXIT_OK; j++)
		rc = add_fragment(b, argv[optind + j], j + 1, n, dbs[j], limit != 0);
	shmkv_build_stats stats;
	if (rc == EXIT_OK) {
		memset(&stats, 0, sizeof stats);
		int err = shmkv_builder_finish(b, out, &stats);
		progress_clear(&prog);
		if (err)
			rc = build_error(b, out, err);
		else
			print_summary(out, &stats, now_seconds() - t0);
	}
	progress_clear(&prog);
	shmkv_builder_free(b);
	for (unsigned long long j = 0; j < n; j++)
		if (dbs[j])
			shmkv_close(dbs[j]);
	free(dbs);
	return rc;
}
