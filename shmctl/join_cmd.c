/* join_cmd.c - image join: fragments built with `image build --part K/N
 * --buckets B` (given in part order 1..N) become one image, byte-identical to a
 * single build of all their records (lib/FORMAT.md §14, "Partitioned builds").
 * Here only the options, which image upgrade (upgrade_cmd.c) shares: the
 * join, its checks and messages are shmkv_build_join()'s (builder/join.cc). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shmkv.h>
#include <shmkv/tools.h>
#include <shmkv_build.h>

#include "image.h"
#include "main.h"
#include "progress.h"

enum { OPT_THREADS = 256, OPT_MEMORY_LIMIT, OPT_TMPDIR, OPT_AS_DELTA };

#define BAD(...) p_usage("image", __VA_ARGS__)

int image_rebuild(int argc, char **argv, const struct rebuild_verb *v)
{
	static const struct option opts[] = {
		VERB_LONGOPTS,
		IMAGE_WRITE_LONGOPTS,
		{"as-delta", no_argument, NULL, OPT_AS_DELTA},
		{NULL, 0, NULL, 0},
	};
	const char *out = NULL, *tmpdir = NULL, *verb = v->verb;
	unsigned long long threads = 0, limit = 0;
	bool limit_given = false;
	unsigned flags = 0;
	int c, rc;
	verb_getopt_reset();
	while ((c = getopt_long(argc, argv, VERB_SHORTOPTS "o:", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case OPT_AS_DELTA:
			if (!v->as_delta)
				return BAD("%s: unknown option --as-delta (it is apply's)", verb);
			flags |= REBUILD_AS_DELTA;
			break;
		case OPT_THREADS:
			if (!parse_u64(optarg, &threads) || threads > 1024)
				return BAD("%s: --threads %s: expected 0 (every CPU) to 1024", verb,
					   optarg);
			break;
		case OPT_MEMORY_LIMIT:
			if (!memory_limit_arg(verb, optarg, &limit))
				return EXIT_USAGE;
			limit_given = true;
			break;
		case OPT_TMPDIR:
			if (!*optarg)
				return BAD("%s: --tmpdir: expected a directory", verb);
			tmpdir = optarg;
			break;
		default:
			if ((rc = verb_common_opt(c, argv, image_help, "image")) >= 0)
				return rc;
		}
	}
	if (!out)
		return BAD("%s: -o OUT is required", verb);
	if (!strcmp(out, "-") && json_output)
		return BAD("%s: -j and -o - both write to standard output; give -o FILE", verb);
	size_t n = (size_t)(argc - optind);
	if (n < v->min_in || n > v->max_in)
		return BAD("%s: expected %s, got %zu", verb, v->inputs, n);
	shmkv_join_options jo;
	shmkv_join_options_init(&jo);
	jo.threads = (unsigned)threads;
	if (limit_given)
		jo.memory_limit = limit;
	jo.tmpdir = tmpdir;
	struct progress prog;
	progress_init(&prog);
	jo.progress = progress_update;
	jo.progress_ctx = &prog;
	shmkv_build_stats stats;
	memset(&stats, 0, sizeof stats);
	char why[2048];
	double t0 = now_seconds();
	catch_signals();
	int err = v->fn(out, (const char *const *)argv + optind, n, flags, &jo, &stats, why,
			sizeof why);
	progress_clear(&prog);
	if (err)
		return p_err("%s", why);
	print_summary(out, &stats, now_seconds() - t0);
	return EXIT_OK;
}

/* the join itself, its checks and messages: shmkv_build_join()
 * (builder/join.cc), shared with the Python package's shmkv.join */
static int join_all(const char *out, const char *const *in, size_t n, unsigned flags,
		    const shmkv_join_options *jo, shmkv_build_stats *st, char *why, size_t len)
{
	(void)flags;
	return shmkv_build_join(out, in, n, jo, st, why, len);
}

int do_image_join(int argc, char **argv)
{
	static const struct rebuild_verb v = {"join", "at least one FRAGMENT", 1, SIZE_MAX, false,
					      join_all};
	return image_rebuild(argc, argv, &v);
}
