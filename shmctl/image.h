/* image.h - the `image` object's commands (image.c dispatches; the verbs
 * live in build_cmd.c, image_read.c, image_inspect.c). */
#ifndef SHMCTL_IMAGE_H
#define SHMCTL_IMAGE_H

#include <stdbool.h>
#include <stdint.h>

#include <shmkv.h>

struct shmkv_build_stats;

int image_help(int argc, char **argv);

int do_image_build(int argc, char **argv);
int do_image_join(int argc, char **argv);
int do_image_upgrade(int argc, char **argv);
int do_image_diff(int argc, char **argv);
int do_image_apply(int argc, char **argv);

/* Join, upgrade, diff and apply (join_cmd.c, upgrade_cmd.c, delta_cmd.c):
 * -o OUT, --threads, --memory-limit, --tmpdir (and --as-delta where the verb
 * takes it) into shmkv_join_options, then fn on the inputs (min_in to max_in
 * of them; inputs names them in messages), its progress, its error or the
 * build's summary. Returns the exit code. */
struct shmkv_join_options;
#define REBUILD_AS_DELTA 1u /* flags: --as-delta was given */
typedef int image_rebuild_fn(const char *out, const char *const *in, size_t n, unsigned flags,
			     const struct shmkv_join_options *jo, struct shmkv_build_stats *st,
			     char *why, size_t len);
struct rebuild_verb {
	const char *verb;   /* "join" */
	const char *inputs; /* "FRAGMENT": what the positionals are, for messages */
	size_t min_in, max_in;
	bool as_delta;      /* the verb takes --as-delta */
	image_rebuild_fn *fn;
};
int image_rebuild(int argc, char **argv, const struct rebuild_verb *v);

/* The long options build and join share: the output and how they run (each
 * verb's own enum names OPT_THREADS, OPT_MEMORY_LIMIT and OPT_TMPDIR). */
#define IMAGE_WRITE_LONGOPTS                                                                      \
	{"output", required_argument, NULL, 'o'}, {"threads", required_argument, NULL, OPT_THREADS}, \
	{"memory-limit", required_argument, NULL, OPT_MEMORY_LIMIT},                                \
	{"tmpdir", required_argument, NULL, OPT_TMPDIR}

/* build_cmd.c, shared with join_cmd.c */
struct shmkv_builder;
int build_error(const struct shmkv_builder *b, const char *what, int err);
void print_summary(const char *out, const struct shmkv_build_stats *s, double seconds);
void catch_signals(void);
double now_seconds(void);
/* SIZE: bytes, or K/M/G/T (powers of 1024, "MiB"/"MB" alike). */
bool parse_size(const char *s, unsigned long long *out);
/* --memory-limit SIZE|none: a limit for shmkv_builder_set_memory_limit()
 * (0: none), or false with a usage message printed. */
bool memory_limit_arg(const char *verb, const char *arg, unsigned long long *out);

/* The "dedup" member of build's and inspect's JSON (image_inspect.c). */
struct json;
void json_dedup(struct json *w, uint64_t logical, uint64_t values, uint64_t refs,
		uint64_t saved);

/* A key as messages show it: JSON-quoted if UTF-8, else base64:"..." (malloc'd;
 * NULL when out of memory). image_read.c. */
char *key_text(const void *key, size_t len);

int do_image_get(int argc, char **argv);
int do_image_inspect(int argc, char **argv);
int do_image_verify(int argc, char **argv);
int do_image_dump(int argc, char **argv);

/* Parses a verb's options when it has none of its own (only -j/-p/-h) and
 * checks that exactly nargs positional arguments follow. Returns -1 to go
 * on, with the positionals at argv[optind...], else the exit code. */
int image_simple_args(int argc, char **argv, int nargs, const char *usage);

/* Opens an image: 0, or reports "FILE: why" and returns EXIT_USAGE
 * (verify opens by itself: it maps image problems to EXIT_NEGATIVE). */
int image_open(const char *path, unsigned flags, shmkv **db);

/* Calls fn(ctx, key, key_len, value, expires) for each record in image order until
 * fn returns non-zero (an exit code, > 0). Returns fn's value, 0 at the end,
 * or the reader's error (< 0); *n: the entries fn took. */
/* expires: the entry's expiry (Unix seconds; 0: none). Every record is
 * given, expired ones too (shmkv_iter_init_all): dump and inspect show what
 * the image holds. */
typedef int image_entry_fn(void *ctx, const void *key, size_t key_len, const shmkv_value *v,
			   uint32_t expires);
int image_each(const shmkv *db, image_entry_fn *fn, void *ctx, uint64_t *n);

/* A verb whose one argument is an image (inspect, dump): its options, the
 * image opened, fn's exit code, the image closed. */
int image_file_verb(int argc, char **argv, int (*fn)(const char *path, shmkv *db));

/* SHMKV_ECORRUPT with why set when the header declares far more padding
 * outside its sections than alignment needs (more than 1 MiB: reading it
 * would take work out of proportion to the file's contents), else 0. */
int image_padding_check(const char *path, char *why, size_t len);

/* "why" with the path in front unless the reader already put it there. */
void image_why(char *out, size_t len, const char *path, const char *why);

#endif /* SHMCTL_IMAGE_H */
