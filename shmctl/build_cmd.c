/* build_cmd.c - image build: options to shmkv_build_options, inputs to
 * shmkv_builder_add_file(), then shmkv_builder_finish() and a summary. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <shmkv_build.h>

#include "image.h"
#include "main.h"
#include "progress.h"

enum {
	OPT_FORMAT = 256,
	OPT_TYPE,
	OPT_ON_DUP,
	OPT_NAME,
	OPT_SEED,
	OPT_CREATED,
	OPT_BUCKETS,
	OPT_LOAD_FACTOR,
	OPT_NO_DEDUP,
	OPT_HASH_BITS,
	OPT_LOSSY_F32,
	OPT_THREADS,
	OPT_PART,
	OPT_FILTER_PART,
	OPT_MEMORY_LIMIT,
	OPT_TMPDIR,
};

struct build_args {
	const char *out;
	int format;          /* 0: from each input's extension */
	unsigned tsv_type;   /* 0: not given (string) */
	shmkv_build_options o;
	bool load_factor_given;
	unsigned threads;          /* 0: every CPU */
	unsigned long long part_k, part_n; /* --part K/N, or 0 */
	bool filter_part;
	unsigned long long memory_limit; /* --memory-limit, 0: the default */
	bool no_memory_limit;            /* --memory-limit 0 / none */
	const char *tmpdir;              /* --tmpdir, NULL: the library's choice */
};

/* SIZE: bytes, or with a K, M, G or T suffix (powers of 1024; "MiB" and
 * "MB" mean the same). */
bool parse_size(const char *s, unsigned long long *out)
{
	char *end;
	if (!*s || *s == '-')
		return false;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return false;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; break;
	case 'm': case 'M': shift = 20; break;
	case 'g': case 'G': shift = 30; break;
	case 't': case 'T': shift = 40; break;
	case 0: break;
	default: return false;
	}
	if (shift) {
		end++;
		if (!strcmp(end, "iB") || !strcmp(end, "B"))
			end += strlen(end);
	}
	if (*end || (shift && v > (ULLONG_MAX >> shift)))
		return false;
	*out = v << shift;
	return true;
}

static int input_format(const struct build_args *a, const char *path)
{
	if (a->format)
		return a->format;
	size_t n = strlen(path);
	return n >= 4 && !strcmp(path + n - 4, ".tsv") ? SHMKV_INPUT_TSV : SHMKV_INPUT_JSONL;
}

#define BAD(...) p_usage("image", "build: " __VA_ARGS__)

/* Parses the command line into a; returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, struct build_args *a)
{
	static const struct option opts[] = {
		VERB_LONGOPTS,
		{"output", required_argument, NULL, 'o'},
		{"format", required_argument, NULL, OPT_FORMAT},
		{"type", required_argument, NULL, OPT_TYPE},
		{"on-duplicate", required_argument, NULL, OPT_ON_DUP},
		{"name", required_argument, NULL, OPT_NAME},
		{"seed", required_argument, NULL, OPT_SEED},
		{"created", required_argument, NULL, OPT_CREATED},
		{"buckets", required_argument, NULL, OPT_BUCKETS},
		{"load-factor", required_argument, NULL, OPT_LOAD_FACTOR},
		{"no-dedup", no_argument, NULL, OPT_NO_DEDUP},
		{"lossy-f32", no_argument, NULL, OPT_LOSSY_F32},
		{"hash-bits", required_argument, NULL, OPT_HASH_BITS}, /* tests only */
		{"threads", required_argument, NULL, OPT_THREADS},
		{"part", required_argument, NULL, OPT_PART},
		{"filter-part", no_argument, NULL, OPT_FILTER_PART},
		{"memory-limit", required_argument, NULL, OPT_MEMORY_LIMIT},
		{"tmpdir", required_argument, NULL, OPT_TMPDIR},
		{NULL, 0, NULL, 0},
	};
	shmkv_build_options *o = &a->o;
	unsigned long long u;
	long long i;
	int c, rc;

	memset(a, 0, sizeof *a);
	int err = shmkv_build_options_init(o);
	if (err)
		return p_err("SOURCE_DATE_EPOCH is not a valid unix time: %s", shmkv_strerror(err));

	verb_getopt_reset(); /* permuting: options may follow the inputs */
	while ((c = getopt_long(argc, argv, VERB_SHORTOPTS "o:", opts, NULL)) != -1) {
		switch (c) {
		case 'o': a->out = optarg; break;
		case OPT_FORMAT:
			if (!strcmp(optarg, "jsonl"))
				a->format = SHMKV_INPUT_JSONL;
			else if (!strcmp(optarg, "tsv"))
				a->format = SHMKV_INPUT_TSV;
			else
				return BAD("--format %s: expected jsonl or tsv", optarg);
			break;
		case OPT_TYPE:
			if (!(a->tsv_type = shmkv_type_by_name(optarg)))
				return BAD("--type %s: not a value type", optarg);
			break;
		case OPT_ON_DUP:
			if (!strcmp(optarg, "error"))
				o->on_duplicate = SHMKV_DUP_ERROR;
			else if (!strcmp(optarg, "first"))
				o->on_duplicate = SHMKV_DUP_FIRST;
			else if (!strcmp(optarg, "last"))
				o->on_duplicate = SHMKV_DUP_LAST;
			else
				return BAD("--on-duplicate %s: expected error, first or last", optarg);
			break;
		case OPT_NAME:
			if (strlen(optarg) > SHMKV_NAME_MAX)
				return BAD("--name is %zu bytes, at most %u", strlen(optarg),
					   SHMKV_NAME_MAX);
			snprintf(o->name, sizeof o->name, "%s", optarg);
			o->fixed |= SHMKV_OPT_NAME;
			break;
		case OPT_SEED:
			if (!parse_u64(optarg, &u))
				return BAD("--seed %s: expected an unsigned 64-bit number", optarg);
			o->seed = u;
			o->fixed |= SHMKV_OPT_SEED;
			break;
		case OPT_CREATED:
			if (!parse_i64(optarg, &i))
				return BAD("--created %s: expected seconds since 1970", optarg);
			o->created = i;
			o->fixed |= SHMKV_OPT_CREATED;
			break;
		case OPT_BUCKETS:
			if (!parse_u64(optarg, &u) || u == 0)
				return BAD("--buckets %s: expected a count of at least 1", optarg);
			o->buckets = u;
			o->fixed |= SHMKV_OPT_BUCKETS;
			break;
		case OPT_LOAD_FACTOR:
			if (!parse_double(optarg, &o->load_factor) || !(o->load_factor > 0) ||
			    o->load_factor > 1)
				return BAD("--load-factor %s: expected a number in (0, 1]", optarg);
			a->load_factor_given = true;
			break;
		case OPT_LOSSY_F32:
			o->lossy_f32 = 1;
			break;
		case OPT_NO_DEDUP:
			o->dedup = 0;
			o->fixed |= SHMKV_OPT_DEDUP;
			break;
		case OPT_HASH_BITS:
			if (!parse_u64(optarg, &u) || u < 1 || u > 64)
				return BAD("--hash-bits %s: expected 1..64", optarg);
			o->hash_bits = (unsigned)u;
			o->fixed |= SHMKV_OPT_HASH_BITS;
			break;
		case OPT_THREADS:
			if (!parse_u64(optarg, &u) || u > 1024)
				return BAD("--threads %s: expected 0 (every CPU) to 1024", optarg);
			a->threads = (unsigned)u;
			break;
		case OPT_PART: {
			char *slash = strchr(optarg, '/');
			unsigned long long k = 0, n = 0;
			if (slash) {
				*slash = 0;
				bool ok = parse_u64(optarg, &k) && parse_u64(slash + 1, &n);
				*slash = '/';
				if (!ok)
					k = n = 0;
			}
			if (!n || k < 1 || k > n)
				return BAD("--part %s: expected K/N with 1 <= K <= N", optarg);
			a->part_k = k;
			a->part_n = n;
			break;
		}
		case OPT_FILTER_PART:
			a->filter_part = true;
			break;
		case OPT_MEMORY_LIMIT:
			if (!memory_limit_arg("build", optarg, &a->memory_limit))
				return EXIT_USAGE;
			a->no_memory_limit = a->memory_limit == 0;
			break;
		case OPT_TMPDIR:
			if (!*optarg)
				return BAD("--tmpdir: expected a directory");
			a->tmpdir = optarg;
			break;
		default:
			if ((rc = verb_common_opt(c, argv, image_help, "image")) >= 0)
				return rc;
		}
	}
	if (!a->out)
		return BAD("-o OUT is required");
	if (a->part_n && !(o->fixed & SHMKV_OPT_BUCKETS))
		return BAD("--part needs --buckets B, the same for every part and for the join");
	if (a->filter_part && !a->part_n)
		return BAD("--filter-part is for --part K/N builds");
	if (!strcmp(a->out, "-") && json_output)
		return BAD("-j and -o - both write to standard output; give -o FILE");
	if (optind == argc)
		return BAD("no INPUT given ('-' reads standard input)");
	if (a->load_factor_given) {
		if (a->part_n)
			return BAD("--part needs --buckets, not --load-factor");
		if (o->fixed & SHMKV_OPT_BUCKETS)
			return BAD("--buckets and --load-factor exclude each other");
		/* the bucket count follows the load factor, not a meta line */
		o->buckets = 0;
		o->fixed |= SHMKV_OPT_BUCKETS;
	}
	for (int k = optind; k < argc; k++)
		if (a->tsv_type && input_format(a, argv[k]) == SHMKV_INPUT_JSONL)
			return BAD("--type is for TSV input; %s is JSONL, whose records name their "
				   "types", argv[k]);
	if (!a->tsv_type)
		a->tsv_type = SHMKV_TYPE_STRING;
	return -1;
}

bool memory_limit_arg(const char *verb, const char *arg, unsigned long long *out)
{
	if (!strcmp(arg, "none") || !strcmp(arg, "0")) {
		*out = 0;
		return true;
	}
	if (parse_size(arg, out) && *out >= (1ULL << 20))
		return true;
	p_usage("image", "%s: --memory-limit %s: expected a size of at least 1M (e.g. 256M, 2G), "
		"or none", verb, arg);
	return false;
}

double now_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* With -o - the image is on stdout: the summary goes to stderr. */
void print_summary(const char *out, const shmkv_build_stats *s, double seconds)
{
	double per_key = s->entries ? (double)s->image_bytes / (double)s->entries : 0.0;
	FILE *f = stdout;
	if (!strcmp(out, "-")) {
		out = "standard output";
		f = stderr;
	}
	if (json_output) {
		struct json *w = &json_out;
		json_obj_begin(w, NULL);
		json_str(w, "output", out);
		json_u64(w, "records", s->records);
		json_u64(w, "entries", s->entries);
		json_u64(w, "duplicates", s->duplicates);
		json_u64(w, "image_bytes", s->image_bytes);
		json_u64(w, "index_bytes", s->index_bytes);
		json_u64(w, "entries_bytes", s->entries_bytes);
		json_u64(w, "values_bytes", s->values_bytes);
		json_name(w, "bytes_per_key");
		if (s->entries)
			json_stat(w, NULL, per_key);
		else
			json_null(w, NULL);
		json_u64(w, "buckets", s->bucket_count);
		json_stat(w, "load_factor", s->load_factor);
		json_u64(w, "max_probe", s->max_probe);
		json_name(w, "dedup");
		json_obj_begin(w, NULL);
		json_u64(w, "value_bytes_logical", s->value_bytes_logical);
		json_u64(w, "shared_values", s->dedup_values);
		json_u64(w, "shared_refs", s->dedup_refs);
		json_u64(w, "saved_bytes", s->dedup_saved_bytes);
		json_obj_end(w);
		json_stat(w, "seconds", seconds);
		json_obj_end(w);
		return;
	}
	fprintf(f, "wrote %s: %" PRIu64 " entries, %" PRIu64 " bytes", out, s->entries, s->image_bytes);
	if (s->entries)
		fprintf(f, " (%.1f bytes/key)", per_key);
	fprintf(f, "\n");
	fprintf(f, "  records      %" PRIu64 " read, %" PRIu64 " duplicates dropped\n", s->records,
	       s->duplicates);
	fprintf(f, "  index        %" PRIu64 " buckets, load factor %.3f, max probe %u\n",
	       s->bucket_count, s->load_factor, s->max_probe);
	fprintf(f, "  sections     index %" PRIu64 ", entries %" PRIu64 ", values %" PRIu64 " bytes\n",
	       s->index_bytes, s->entries_bytes, s->values_bytes);
	fprintf(f, "  dedup        %" PRIu64 " bytes saved (%" PRIu64 " shared values, %" PRIu64
	       " entries sharing them, %" PRIu64 " logical value bytes)\n",
	       s->dedup_saved_bytes, s->dedup_values, s->dedup_refs, s->value_bytes_logical);
	fprintf(f, "  time         %.3f s\n", seconds);
}

/* The builder's message for err, or a generic one if it left none. */
int build_error(const shmkv_builder *b, const char *what, int err)
{
	const char *msg = b ? shmkv_builder_error(b) : "";
	if (msg && *msg)
		return p_err("%s", msg);
	return p_err("%s: %s", what, shmkv_strerror(err));
}

/* SIGINT, SIGTERM, SIGHUP while building: remove the builder's named
 * temporary files (most filesystems have none: O_TMPFILE), then die of the
 * signal as before. */
static void on_signal(int sig)
{
	shmkv_build_cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

void catch_signals(void)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		struct sigaction sa, old;
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
			continue; /* ignored (nohup): stay so */
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_signal;
		sigemptyset(&sa.sa_mask);
		sigaction(sigs[i], &sa, NULL);
	}
}

int do_image_build(int argc, char **argv)
{
	struct build_args a;
	int rc = parse_args(argc, argv, &a);
	if (rc >= 0)
		return rc;

	double t0 = now_seconds();
	struct progress prog;
	progress_init(&prog);
	a.o.progress = progress_update;
	a.o.progress_ctx = &prog;

	shmkv_builder *b = NULL;
	int err = shmkv_builder_new(&a.o, &b);
	if (err)
		return p_err("cannot start the builder: %s", shmkv_strerror(err));
	/* before reading any input: a refused output fails at once, and an input
	 * that is the output is refused when it is added */
	err = shmkv_builder_set_threads(b, a.threads);
	if (!err)
		err = shmkv_builder_set_memory_limit(
			b, a.no_memory_limit ? 0 : a.memory_limit ? a.memory_limit : shmkv_build_default_memory_limit(),
			a.tmpdir);
	if (!err && a.part_n)
		err = shmkv_builder_set_part(b, a.part_k, a.part_n, a.filter_part);
	if (!err)
		err = shmkv_builder_check_output(b, a.out);
	if (err) {
		rc = build_error(b, a.out, err);
		shmkv_builder_free(b);
		return rc;
	}
	catch_signals();

	for (int k = optind; k < argc; k++) {
		err = shmkv_builder_add_file(b, argv[k], input_format(&a, argv[k]), a.tsv_type);
		if (err) {
			progress_clear(&prog);
			rc = build_error(b, argv[k], err);
			shmkv_builder_free(b);
			return rc;
		}
	}
	shmkv_build_stats stats;
	memset(&stats, 0, sizeof stats);
	err = shmkv_builder_finish(b, a.out, &stats);
	progress_clear(&prog);
	if (err)
		rc = build_error(b, a.out, err);
	else
		print_summary(a.out, &stats, now_seconds() - t0);
	shmkv_builder_free(b);
	return err ? rc : EXIT_OK;
}
