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
	OPT_TSV_EXPIRES,
	OPT_DELTA_OF,
	OPT_AFTER,
	OPT_TSV_REMOVES,
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
	const char *delta_of, *after;    /* --delta-of BASE, --after PREV (NULL: none) */
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

/* The option handlers below return GO_ON (handled, go on), NOT_MINE (c is
 * none of theirs) or an exit code. */
#define GO_ON (-1)
#define NOT_MINE (-2)

/* The index of arg in words (NULL-terminated), or -1. */
static int word_index(const char *arg, const char *const *words)
{
	for (int k = 0; words[k]; k++)
		if (!strcmp(arg, words[k]))
			return k;
	return -1;
}

/* Where the records come from and where the image goes: -o, --format, --type. */
static int input_opt(int c, struct build_args *a)
{
	switch (c) {
	case 'o': a->out = optarg; return GO_ON;
	case OPT_FORMAT: { /* the input's: images are format 2, the one format */
		static const char *const formats[] = {"jsonl", "tsv", NULL};
		int k = word_index(optarg, formats);
		if (k < 0 && !strcmp(optarg, "1"))
			return BAD("--format 1: format 1 is retired (images are format 2); convert "
				   "a format 1 image with '" BIN_NAME " image upgrade OLD -o NEW'");
		if (k < 0)
			return BAD("--format %s: expected jsonl or tsv (the input's format; images "
				   "are format 2)", optarg);
		a->format = k == 0 ? SHMKV_INPUT_JSONL : SHMKV_INPUT_TSV;
		return GO_ON;
	}
	case OPT_TSV_EXPIRES:
		a->o.tsv_expires = 1;
		return GO_ON;
	case OPT_TSV_REMOVES:
		a->o.tsv_removes = 1;
		return GO_ON;
	case OPT_TYPE:
		if (!(a->tsv_type = shmkv_type_by_name(optarg)))
			return BAD("--type %s: not a value type", optarg);
		return GO_ON;
	}
	return NOT_MINE;
}

/* The unsigned options that fix a field of the header (SHMKV_OPT_*, which a
 * meta line then leaves): what each takes, and where it goes. */
static int fixed_number_opt(int c, shmkv_build_options *o)
{
	static const struct {
		int opt;
		unsigned bit;
		const char *name, *want;
		unsigned long long min, max;
	} nums[] = {
		{OPT_SEED, SHMKV_OPT_SEED, "--seed", "an unsigned 64-bit number", 0, ULLONG_MAX},
		{OPT_BUCKETS, SHMKV_OPT_BUCKETS, "--buckets", "a count of at least 1", 1, ULLONG_MAX},
		{OPT_HASH_BITS, SHMKV_OPT_HASH_BITS, "--hash-bits", "1..64", 1, 64},
	};
	for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) {
		unsigned long long u;
		if (nums[k].opt != c)
			continue;
		if (!parse_u64(optarg, &u) || u < nums[k].min || u > nums[k].max)
			return BAD("%s %s: expected %s", nums[k].name, optarg, nums[k].want);
		if (c == OPT_SEED)
			o->seed = u;
		else if (c == OPT_BUCKETS)
			o->buckets = u;
		else
			o->hash_bits = (unsigned)u;
		o->fixed |= nums[k].bit;
		return GO_ON;
	}
	return NOT_MINE;
}

/* What the image holds: its header's fields and how records become entries
 * (shmkv_build_options). */
static int image_opt(int c, struct build_args *a)
{
	shmkv_build_options *o = &a->o;
	long long i;
	switch (c) {
	case OPT_ON_DUP: { /* in the order of enum shmkv_on_duplicate */
		static const char *const dups[] = {"error", "first", "last", NULL};
		if ((o->on_duplicate = word_index(optarg, dups)) < 0)
			return BAD("--on-duplicate %s: expected error, first or last", optarg);
		return GO_ON;
	}
	case OPT_NAME:
		if (strlen(optarg) > SHMKV_NAME_MAX)
			return BAD("--name is %zu bytes, at most %u", strlen(optarg), SHMKV_NAME_MAX);
		snprintf(o->name, sizeof o->name, "%s", optarg);
		o->fixed |= SHMKV_OPT_NAME;
		return GO_ON;
	case OPT_CREATED:
		if (!parse_i64(optarg, &i))
			return BAD("--created %s: expected seconds since 1970", optarg);
		o->created = i;
		o->fixed |= SHMKV_OPT_CREATED;
		return GO_ON;
	case OPT_LOAD_FACTOR:
		if (!parse_double(optarg, &o->load_factor) || !(o->load_factor > 0) ||
		    o->load_factor > 1)
			return BAD("--load-factor %s: expected a number in (0, 1]", optarg);
		a->load_factor_given = true;
		return GO_ON;
	case OPT_LOSSY_F32: o->lossy_f32 = 1; return GO_ON;
	case OPT_NO_DEDUP:
		o->dedup = 0;
		o->fixed |= SHMKV_OPT_DEDUP;
		return GO_ON;
	}
	return NOT_MINE;
}

/* K/N with 1 <= K <= N. */
static bool parse_part(char *arg, unsigned long long *k, unsigned long long *n)
{
	char *slash = strchr(arg, '/');
	if (!slash)
		return false;
	*slash = 0;
	bool ok = parse_u64(arg, k) && parse_u64(slash + 1, n);
	*slash = '/';
	return ok && *n && *k >= 1 && *k <= *n;
}

/* How the build runs, not what it makes: threads, parts, memory, spill files. */
static int run_opt(int c, struct build_args *a)
{
	unsigned long long u;
	switch (c) {
	case OPT_THREADS:
		if (!parse_u64(optarg, &u) || u > 1024)
			return BAD("--threads %s: expected 0 (every CPU) to 1024", optarg);
		a->threads = (unsigned)u;
		return GO_ON;
	case OPT_PART:
		if (!parse_part(optarg, &a->part_k, &a->part_n))
			return BAD("--part %s: expected K/N with 1 <= K <= N", optarg);
		return GO_ON;
	case OPT_FILTER_PART: a->filter_part = true; return GO_ON;
	case OPT_MEMORY_LIMIT:
		if (!memory_limit_arg("build", optarg, &a->memory_limit))
			return EXIT_USAGE;
		a->no_memory_limit = a->memory_limit == 0;
		return GO_ON;
	case OPT_TMPDIR:
		if (!*optarg)
			return BAD("--tmpdir: expected a directory");
		a->tmpdir = optarg;
		return GO_ON;
	}
	return NOT_MINE;
}

/* A delta (lib/FORMAT.md §19): its base and the delta it follows. */
static int delta_opt(int c, struct build_args *a)
{
	switch (c) {
	case OPT_DELTA_OF:
		if (!*optarg)
			return BAD("--delta-of: expected the base image");
		a->delta_of = optarg;
		return GO_ON;
	case OPT_AFTER:
		if (!*optarg)
			return BAD("--after: expected the delta this one follows");
		a->after = optarg;
		return GO_ON;
	}
	return NOT_MINE;
}

/* The options taken together, and the inputs; GO_ON or the exit code. */
static int check_args(int argc, char **argv, struct build_args *a)
{
	shmkv_build_options *o = &a->o;
	if (!a->out)
		return BAD("-o OUT is required");
	if (a->part_n && !(o->fixed & SHMKV_OPT_BUCKETS))
		return BAD("--part needs --buckets B, the same for every part and for the join");
	if (a->filter_part && !a->part_n)
		return BAD("--filter-part is for --part K/N builds");
	if (!strcmp(a->out, "-") && json_output)
		return BAD("-j and -o - both write to standard output; give -o FILE");
	if (a->after && !a->delta_of)
		return BAD("--after names the delta this one follows: give --delta-of BASE too");
	if (o->tsv_removes && !a->delta_of)
		return BAD("--tsv-removes is for delta builds (--delta-of BASE): a plain image "
			   "has nothing to remove");
	if (a->delta_of && a->part_n)
		return BAD("--delta-of and --part exclude each other: a delta is built whole");
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
	return GO_ON;
}

/* Parses the command line into a; returns GO_ON (-1) to go on, else the exit code. */
static int parse_args(int argc, char **argv, struct build_args *a)
{
	static const struct option opts[] = {
		VERB_LONGOPTS,
		IMAGE_WRITE_LONGOPTS,
		{"format", required_argument, NULL, OPT_FORMAT},
		{"type", required_argument, NULL, OPT_TYPE},
		{"tsv-expires", no_argument, NULL, OPT_TSV_EXPIRES},
		{"on-duplicate", required_argument, NULL, OPT_ON_DUP},
		{"name", required_argument, NULL, OPT_NAME},
		{"seed", required_argument, NULL, OPT_SEED},
		{"created", required_argument, NULL, OPT_CREATED},
		{"buckets", required_argument, NULL, OPT_BUCKETS},
		{"load-factor", required_argument, NULL, OPT_LOAD_FACTOR},
		{"no-dedup", no_argument, NULL, OPT_NO_DEDUP},
		{"lossy-f32", no_argument, NULL, OPT_LOSSY_F32},
		{"hash-bits", required_argument, NULL, OPT_HASH_BITS}, /* tests only */
		{"part", required_argument, NULL, OPT_PART},
		{"filter-part", no_argument, NULL, OPT_FILTER_PART},
		{"delta-of", required_argument, NULL, OPT_DELTA_OF},
		{"after", required_argument, NULL, OPT_AFTER},
		{"tsv-removes", no_argument, NULL, OPT_TSV_REMOVES},
		{NULL, 0, NULL, 0},
	};
	memset(a, 0, sizeof *a);
	int err = shmkv_build_options_init(&a->o);
	if (err)
		return p_err("SOURCE_DATE_EPOCH is not a valid unix time: %s", shmkv_strerror(err));

	verb_getopt_reset(); /* permuting: options may follow the inputs */
	int c;
	while ((c = getopt_long(argc, argv, VERB_SHORTOPTS "o:", opts, NULL)) != -1) {
		int rc = input_opt(c, a);
		if (rc == NOT_MINE)
			rc = fixed_number_opt(c, &a->o);
		if (rc == NOT_MINE)
			rc = image_opt(c, a);
		if (rc == NOT_MINE)
			rc = run_opt(c, a);
		if (rc == NOT_MINE)
			rc = delta_opt(c, a);
		if (rc == NOT_MINE) /* -j, -p, -h, or what getopt refused */
			rc = verb_common_opt(c, argv, image_help, "image");
		if (rc != GO_ON)
			return rc;
	}
	return check_args(argc, argv, a);
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
		json_u64(w, "tombstones", s->tombstones);
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
		json_dedup(w, s->value_bytes_logical, s->dedup_values, s->dedup_refs,
			   s->dedup_saved_bytes);
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
	if (s->tombstones) /* a delta's removals, among its entries */
		fprintf(f, "  tombstones   %" PRIu64 " keys removed\n", s->tombstones);
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
	/* after the output's check: the base and the delta it follows are
	 * inputs, never replaced by the output */
	if (!err && a.delta_of)
		err = shmkv_builder_set_delta(b, a.delta_of, a.after);
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
