/* shmkv_build.h - build shmkv images. C API (usable from C and C++);
 * implemented in C++17 in libshmkv-build.
 *
 * Contents
 *   shmkv_build_options_init(&o)                 defaults (see below)
 *   shmkv_builder_new(&o, &b) / shmkv_builder_free(b)
 *   shmkv_builder_add(b, key, key_len, type, value, value_len)   raw encoded value
 *   shmkv_builder_add_i64 / _f64 / _bool / _str / _bytes
 *   shmkv_builder_add_f32list / _f64list / _i64list / _strlist
 *   shmkv_builder_add_file(b, path, format, tsv_type)   JSONL or TSV ("-" = stdin)
 *   shmkv_builder_add_text(b, data, len, format, tsv_type, source, line)   the same, from memory
 *   shmkv_builder_set_source(b, file, line)      location named in later messages
 *   shmkv_builder_check_output(b, path)          refuse a non-regular output or an input
 *   shmkv_builder_finish(b, path, &stats)        lay out, write atomically ("-" = stdout)
 *   shmkv_build_join(out, fragments, n, &jo, &stats, err, len)   parts 1..n -> one image
 *   shmkv_build_upgrade(out, in, &jo, &stats, err, len)   a format 1 image -> format 2
 *   shmkv_builder_set_delta(b, base, after)      build a delta of base (lib/FORMAT.md §19)
 *   shmkv_builder_set_delta_of(b, db, label)     the same, of an image held open
 *   shmkv_builder_remove(b, key, key_len)        a delta's tombstone
 *   shmkv_builder_add_images(b, dbs, n)          open images' records merged, the first's
 *                                                of a key winning (the loader's overlays)
 *   shmkv_build_diff(out, old, new, &jo, &stats, err, len)   the delta from old to new
 *   shmkv_build_apply(out, base, deltas, n, as_delta, &jo, &stats, err, len)
 *                                                a chain merged: the new image, or one delta
 *   shmkv_build_compact(out, base, deltas, n, flags, &jo, &stats, err, len)
 *                                                apply's image, base trusted (the loader)
 *   shmkv_build_cleanup()                        signal handlers: remove temporaries
 *   shmkv_builder_error(b)                       what went wrong, where and why
 *
 * Every function returns 0 or a negative code (-errno or SHMKV_E*, see
 * <shmkv.h> and shmkv_strerror()); after an error shmkv_builder_error() holds
 * a message like "in.jsonl:7: duplicate key \"a\" (first at in.jsonl:3)".
 * finish() writes a temporary file in the output's directory, fsyncs it and
 * renames it over the output: on any error nothing is left under the output
 * name and an existing file there is untouched. It never replaces anything
 * but a regular file that is not one of its inputs.
 *
 * Output is deterministic: the same records in the same order with the same
 * options give byte-identical images. Images are format 2 (lib/FORMAT.md),
 * the one format readers read, plain or delta (§19); shmkv_build_upgrade() converts a format 1
 * image (lib/FORMAT.md §15).
 */
#ifndef SHMKV_BUILD_H
#define SHMKV_BUILD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct shmkv_builder shmkv_builder;

enum shmkv_on_duplicate {
	SHMKV_DUP_ERROR = 0, /* a duplicate key is an error naming both places */
	SHMKV_DUP_FIRST = 1, /* keep the first record of a key */
	SHMKV_DUP_LAST = 2   /* keep the last record of a key */
};

enum shmkv_input_format { SHMKV_INPUT_JSONL = 1, SHMKV_INPUT_TSV = 2 };

/* Options a JSONL meta line may set unless the caller fixed them. */
#define SHMKV_OPT_SEED 1u
#define SHMKV_OPT_CREATED 2u
#define SHMKV_OPT_NAME 4u
#define SHMKV_OPT_BUCKETS 8u
#define SHMKV_OPT_DEDUP 16u
#define SHMKV_OPT_HASH_BITS 32u

#define SHMKV_DEFAULT_SEED UINT64_C(0x53484d4b56763121) /* "SHMKVv1!" */
/* The share of each bucket's 120 record bytes the records fill (worst
 * padding and directory counted): builder/README.md, "The index": why 0.72. */
#define SHMKV_DEFAULT_LOAD_FACTOR 0.72
/* The latest expiry an image can hold: 2106-02-07T06:28:15Z (u32 seconds). */
#define SHMKV_BUILD_EXPIRES_MAX INT64_C(0xFFFFFFFF)

typedef void (*shmkv_progress_fn)(void *ctx, const char *phase, uint64_t done, uint64_t total);

typedef struct shmkv_build_options {
	uint64_t seed;           /* XXH3 seed; SHMKV_DEFAULT_SEED */
	int64_t created;         /* unix time; SOURCE_DATE_EPOCH if set, else now */
	char name[64];           /* image name, at most 63 bytes, NUL-terminated; "" */
	int dedup;               /* share identical values: 1 */
	int on_duplicate;        /* enum shmkv_on_duplicate: SHMKV_DUP_ERROR */
	double load_factor;      /* target index fill, (0, 1]: the share of each bucket's
				    120 record bytes the records fill; 0 (the default):
				    SHMKV_DEFAULT_LOAD_FACTOR */
	uint64_t buckets;        /* exact bucket count, 0 = from load_factor (a meta line
				    may set it unless SHMKV_OPT_BUCKETS is fixed; fix that bit
				    to make load_factor win) */
	unsigned hash_bits;      /* 64; fewer forces collisions (tests only) */
	unsigned fixed;          /* SHMKV_OPT_* the caller set; a meta line leaves them */
	shmkv_progress_fn progress; /* NULL, or called now and then while working */
	void *progress_ctx;
	int lossy_f32;           /* 0: a number that an f32 cannot hold exactly, given for an
				    f32list (JSONL "type" or TSV type), is an input error;
				    1: it is rounded to the nearest f32 */
	int tsv_expires;         /* 1: TSV lines are key<TAB>value<TAB>expires (RFC 3339 or
				    Unix seconds; an empty field: none); 0: key<TAB>value */
	int tsv_removes;         /* 1 (a delta build only): a TSV line with a key and no TAB
				    removes that key (a tombstone); 0: such a line is an error */
} shmkv_build_options;

/* Fills defaults. Returns 0, or SHMKV_EINPUT if SOURCE_DATE_EPOCH is malformed. */
int shmkv_build_options_init(shmkv_build_options *o);

/* Returns 0, -EINVAL for invalid options (load_factor outside [0, 1],
 * hash_bits outside 1..64, an unknown on_duplicate, a name without NUL),
 * or -ENOMEM. There is no builder yet to hold a message: callers that take
 * options from users check them first. */
int shmkv_builder_new(const shmkv_build_options *o, shmkv_builder **out);
void shmkv_builder_free(shmkv_builder *b);

/* The last error's message ("" if none); valid until the next call on b. */
const char *shmkv_builder_error(const shmkv_builder *b);

/* The expiry time (Unix seconds, 1..SHMKV_BUILD_EXPIRES_MAX) of the records
 * added next, 0 for none (the default): a reader treats such an entry as
 * absent from that second on (lib/FORMAT.md, "Expiry"). Returns 0, or
 * SHMKV_EINPUT (with a message) for a time out of range. */
int shmkv_builder_set_expires(shmkv_builder *b, int64_t unix_seconds);

/* Names the place (file and line) of the records added next, for messages. */
void shmkv_builder_set_source(shmkv_builder *b, const char *file, uint64_t line);

/* Adds a record; the value is in its encoded form (lib/FORMAT.md): bytes and
 * string as is, i64/f64 as 8 bytes, bool as 1 byte (0/1), lists as arrays,
 * strlist as u32 count, u32 ends[count+1], NUL-terminated strings.
 * Returns 0, SHMKV_ELIMIT (key or value too long; under a memory limit, a
 * key and value together over 1/128 of it, at least 64 KiB), SHMKV_EINPUT (bad
 * type or encoding), -ENOMEM, -EINVAL (after finish). Duplicates are found at
 * finish. */
int shmkv_builder_add(shmkv_builder *b, const void *key, size_t key_len, unsigned type,
		      const void *value, size_t value_len);
int shmkv_builder_add_i64(shmkv_builder *b, const void *key, size_t key_len, int64_t v);
int shmkv_builder_add_f64(shmkv_builder *b, const void *key, size_t key_len, double v);
int shmkv_builder_add_bool(shmkv_builder *b, const void *key, size_t key_len, int v);
int shmkv_builder_add_str(shmkv_builder *b, const void *key, size_t key_len, const char *s,
			  size_t len);
int shmkv_builder_add_bytes(shmkv_builder *b, const void *key, size_t key_len, const void *p,
			    size_t len);
int shmkv_builder_add_f32list(shmkv_builder *b, const void *key, size_t key_len, const float *v,
			      size_t n);
int shmkv_builder_add_f64list(shmkv_builder *b, const void *key, size_t key_len,
			      const double *v, size_t n);
int shmkv_builder_add_i64list(shmkv_builder *b, const void *key, size_t key_len,
			      const int64_t *v, size_t n);
int shmkv_builder_add_strlist(shmkv_builder *b, const void *key, size_t key_len,
			      const char *const *strs, const size_t *lens, size_t n);

/* Deltas (lib/FORMAT.md §19). Makes b build a delta image of the plain
 * image base: its upserts are the records added, its tombstones the keys
 * removed (shmkv_builder_remove, a JSONL line {"key": K, "remove": true}, a
 * TSV line of a key alone with tsv_removes). The delta names base by its
 * header checksum and size and has its seed and hash bits (a seed or
 * hash_bits option fixed to another value is an error); its name is base's
 * unless the name option is fixed (or a meta line gives one). after, if not
 * NULL or "", is the delta of the same base this one follows in its chain:
 * the new delta names it (prev = its header checksum) and takes the next
 * seq; else prev is 0 and seq 1. Both are opened with the reader's checks
 * (every checksum). Call it before adding records; not with a part build.
 * Returns 0, SHMKV_EBASE (base is a delta, after is not a delta or is one
 * of another base), SHMKV_EINPUT (another seed or hash_bits fixed), the
 * codes of shmkv_open_file() for an image that does not open, -EINVAL
 * (records already added, a part build), -errno; with a message. */
int shmkv_builder_set_delta(shmkv_builder *b, const char *base, const char *after);

/* As shmkv_builder_set_delta(base, NULL), for a caller that holds the base
 * open already (the loader's published segment, verified when it was
 * loaded): its identity is taken from the handle, which is neither opened
 * nor checked again, so a publish does not read the whole base. label names
 * the base in messages. The handle need not stay open after the call.
 * Returns as shmkv_builder_set_delta(). */
struct shmkv;
int shmkv_builder_set_delta_of(shmkv_builder *b, const struct shmkv *base, const char *label);

/* Adds every record of the open images dbs[0..n) (all of them: upserts,
 * expired records, a delta's tombstones), of a key only the first image's
 * that holds it: the image finish() then writes is the one that adding
 * each image's records in turn, dbs[0]'s first, under SHMKV_DUP_FIRST
 * gives, byte for byte, at a fraction of its cost. The records are taken
 * where they lie, in their images' key order (bucket order but for
 * displaced keys): not copied, not sorted again, their values not checked
 * again (the caller's images were checked: opened with the reader's
 * checks, or segments of its own verified at their load; a record damaged
 * on the way is the iteration's error). The images must stay open until
 * finish() and have the builder's seed and hash bits (a delta build's:
 * its base's, so call shmkv_builder_set_delta*() first). The builder's
 * one input: on a builder with no records, once, and nothing added after;
 * such a build never spills (the memory limit does not apply). Returns 0,
 * -EINVAL (records added before or after, n 0, another seed or hash bits,
 * a part build), SHMKV_EINPUT (a tombstone outside a delta build),
 * SHMKV_ECORRUPT (a key twice in one image), an iteration's SHMKV_E*
 * code, -ENOMEM; with a message naming the image (1..n) and entry. */
int shmkv_builder_add_images(shmkv_builder *b, const struct shmkv *const *dbs, size_t n);

/* Adds a tombstone: key is removed by this delta (lib/FORMAT.md §19.2). A
 * key removed and also added (or removed twice) is a duplicate key, as
 * any. Returns 0, SHMKV_EINPUT (not a delta build), SHMKV_ELIMIT (key too
 * long), -ENOMEM, -EINVAL (after finish). */
int shmkv_builder_remove(shmkv_builder *b, const void *key, size_t key_len);

/* Reads records from a JSONL or TSV file ("-" = standard input). tsv_type is
 * the value type of TSV input (enum shmkv_type), ignored for JSONL. Types are
 * inferred without loss (integers -> i64/i64list, other numbers -> f64/f64list;
 * f32list only when asked; builder/README.md "Types"). A UTF-8 byte-order mark
 * at the start is skipped. Errors name file, line, key and reason. A line may
 * take 1/128 of the memory limit (of shmkv_build_default_memory_limit() when
 * there is none), at least 64 KiB: a longer one is SHMKV_ELIMIT as soon as
 * that much of it is read (builder/README.md, "Memory"). Returns 0,
 * SHMKV_EINPUT, SHMKV_ELIMIT, -EEXIST (the file is a checked output), -errno. */
int shmkv_builder_add_file(shmkv_builder *b, const char *path, int format, unsigned tsv_type);

/* Reads records from memory (data, len bytes) as shmkv_builder_add_file()
 * reads a file, except that no line is a meta line: messages name source
 * and the line, data's first line being line first_line (>= 1). The text
 * is parsed at once (it need not outlive the call) on the calling thread:
 * for batches of changes (the loader's stream), not for large inputs.
 * Returns as shmkv_builder_add_file(). */
int shmkv_builder_add_text(shmkv_builder *b, const char *data, size_t len, int format,
			   unsigned tsv_type, const char *source, uint64_t first_line);

/* Partitioned builds (lib/FORMAT.md §14): part k of n (1-based) holds the
 * buckets [lo, hi) = [floor(buckets * (k-1) / n), floor(buckets * k / n)),
 * and a bucket b belongs to part ceil((b + 1) * n / buckets). A key's bucket
 * is shmkv_home_bucket(shmkv_key_hash(seed, hash_bits, key, len), buckets)
 * (lib/shmkv/tools.h). Both need 1 <= k <= n and buckets >= 1. */
void shmkv_build_part_range(uint64_t k, uint64_t n, uint64_t buckets, uint64_t *lo, uint64_t *hi);
uint64_t shmkv_build_part_of(uint64_t bucket, uint64_t n, uint64_t buckets);

/* Threads for parsing large inputs and for the layout: 0 (the default) uses
 * every online CPU (at most 64). The image does not depend on it.
 * Returns 0, or -EINVAL above 1024. */
int shmkv_builder_set_threads(shmkv_builder *b, unsigned threads);

/* Makes this a part build: fragment k (1-based) of n, holding the keys whose
 * home bucket is in [floor(buckets * (k-1) / n), floor(buckets * k / n))
 * (lib/FORMAT.md §14, "Partitioned builds"); the buckets option must be
 * fixed (SHMKV_OPT_BUCKETS). Call it before adding records: a record of
 * another part is then refused when added (SHMKV_EINPUT naming it and its
 * part), or skipped and never stored if filter is non-zero (records added
 * before are checked the same way by finish()). n = 0 (with k = 0) makes it a
 * whole build again. Returns 0, or -EINVAL unless 1 <= k <= n and the bucket
 * count is fixed. */
int shmkv_builder_set_part(shmkv_builder *b, uint64_t k, uint64_t n, int filter);

/* Bounds the build's memory (builder/README.md, "Memory"): when the records
 * would take more than bytes to build in memory, they are spilled to
 * unnamed temporary files in tmpdir and the image is built from there, a
 * partition at a time; the process's peak memory then stays within bytes
 * plus a fixed allowance (32 MiB: code, stacks, buffers). The image is the
 * same byte for byte whatever the limit. bytes = 0 (the default): no limit,
 * everything in memory. tmpdir NULL or "": $TMPDIR, else the directory of
 * the output given to shmkv_builder_check_output(), else /tmp. Call it before
 * adding records. Returns 0, or -EINVAL for a limit under 1 MiB. */
int shmkv_builder_set_memory_limit(shmkv_builder *b, uint64_t bytes, const char *tmpdir);

/* A default limit for shmkv_builder_set_memory_limit(): half of the memory
 * available (MemAvailable, or what the cgroup's memory.max leaves if less),
 * at least 64 MiB. */
uint64_t shmkv_build_default_memory_limit(void);

typedef struct shmkv_build_stats {
	uint64_t records;           /* records added */
	uint64_t entries;           /* entries written (records less dropped duplicates) */
	uint64_t duplicates;        /* records dropped by SHMKV_DUP_FIRST/LAST */
	uint64_t image_bytes;
	uint64_t index_bytes, entries_bytes, values_bytes;
	uint64_t bucket_count;
	uint32_t max_probe;
	double load_factor;         /* record bytes (directory included) / the buckets'
				       record bytes (120 each) */
	uint64_t value_bytes_logical;
	uint64_t dedup_values, dedup_refs, dedup_saved_bytes;
	double seconds;             /* finish() time */
	uint64_t tombstones;        /* a delta's removals written (counted in entries) */
} shmkv_build_stats;

/* Checks that finish() may write path: it does not exist, or it is a regular
 * file that is none of the input files (same device and inode: another path
 * or a hard link is the same file). A symbolic link, FIFO, socket, device or
 * directory is refused, never followed or replaced (lstat). "-" is standard
 * output, refused when it is a terminal. Optional: finish() runs the same
 * check; calling it before add_file() fails early, and add_file() then
 * refuses to read this output as an input. Returns 0, -EEXIST (exists and is
 * not a regular file, or is an input), -EISDIR, -EINVAL (a terminal), -errno. */
int shmkv_builder_check_output(shmkv_builder *b, const char *path);

/* Lays the image out and writes it to path. stats may be NULL. First the
 * checks of shmkv_builder_check_output() (again just before the rename).
 * A file is written atomically: an unnamed temporary (O_TMPFILE) in path's
 * directory, fsynced, linked as ".<name>.<16 hex digits>.tmp" and renamed
 * over path. A process killed before the rename leaves nothing under path
 * (SIGKILL in the instant between link and rename: at most that temporary
 * name). Where the filesystem has no O_TMPFILE the temporary is named from
 * the start; shmkv_build_cleanup() removes it. "-" writes the image to
 * standard output as a stream (not atomic: a failed build leaves a truncated
 * image there, which readers refuse; it costs a second pass for checksums;
 * a build that spills writes it to an unnamed temporary in its spill
 * directory first, then copies it).
 * Returns 0, SHMKV_EDUPKEY, SHMKV_ELIMIT, -errno. The builder is spent after. */
int shmkv_builder_finish(shmkv_builder *b, const char *path, shmkv_build_stats *stats);

/* Options of shmkv_build_join() and shmkv_build_upgrade();
 * shmkv_join_options_init() fills the defaults. */
typedef struct shmkv_join_options {
	unsigned threads;        /* as shmkv_builder_set_threads(): 0 = every CPU */
	uint64_t memory_limit;   /* as shmkv_builder_set_memory_limit(): 0 = none;
				    default shmkv_build_default_memory_limit() */
	const char *tmpdir;      /* spill directory, as set_memory_limit(): NULL */
	shmkv_progress_fn progress; /* NULL, or called now and then while working */
	void *progress_ctx;
} shmkv_join_options;

void shmkv_join_options_init(shmkv_join_options *o);

/* Joins fragments[0..n-1], built as parts 1..n of one image
 * (shmkv_builder_set_part() with the same buckets, seed, created time, name
 * and dedup; lib/FORMAT.md §14), given in part order, into out: the image
 * one build of all their records gives, byte for byte. Fragments are
 * untrusted: each is verified whole first, must agree with the first on
 * those header fields, and may hold only keys of its own part (a fragment
 * out of order or a missing one is refused). Under a memory limit the
 * fragments' pages are dropped as they are read. out is written as by
 * shmkv_builder_finish() ("-" = stdout): on any error nothing is left
 * under out. opt NULL = the defaults; stats may be NULL. On error err (if
 * err_len > 0) holds a message naming the file, entry and reason, e.g.
 * "b.shmkv: its bucket count differs from a.shmkv's: ...".
 * Returns 0, -EINVAL (no fragment, no output, a bad option), SHMKV_EINPUT
 * (a fragment of other options or another part), SHMKV_ECORRUPT and the
 * other codes of shmkv_open_file() and shmkv_verify() for a bad fragment,
 * -ENOENT for a missing one, SHMKV_EDUPKEY, -ENOMEM, -errno. */
int shmkv_build_join(const char *out, const char *const *fragments, size_t n,
		     const shmkv_join_options *opt, shmkv_build_stats *stats, char *err,
		     size_t err_len);

/* Converts the format 1 image in (retired: lib/FORMAT.md §15) into out:
 * the format 2 image a fresh build of its records gives, byte for byte.
 * Its records (key, type, value) and its header's seed, hash_bits, name,
 * created time and DEDUP flag are carried over; the bucket count is chosen
 * afresh from the records (the default load factor). in is untrusted: its
 * header (magic, version 1, layout hash, header checksum, sizes, section
 * table), every section checksum and every entry of ENTRIES (each inside
 * its section, its value's shape) are checked, and entry_count and
 * dedup_refs must agree with what ENTRIES holds; a format 2 input is
 * refused ("already format 2"). The options, "-" for stdout, and that
 * nothing is left under out on any error, are shmkv_build_join()'s. On
 * error err (if err_len > 0) names the file, the offset and the rule, e.g.
 * "old.shmkv: entry at 8192: key of 300 bytes runs past the entries
 * section [8192, 8448)". Returns 0, -EINVAL (no input or output, a bad
 * option), SHMKV_EMAGIC, SHMKV_EVERSION (not format 1: format 2 or
 * another), SHMKV_ELAYOUT, SHMKV_ECHECKSUM, SHMKV_ETRUNCATED,
 * SHMKV_ECORRUPT (a damaged image), SHMKV_EDUPKEY (a key twice), -ENOENT,
 * -ENOMEM, -errno. */
int shmkv_build_upgrade(const char *out, const char *in, const shmkv_join_options *opt,
			shmkv_build_stats *stats, char *err, size_t err_len);

/* The delta (lib/FORMAT.md §19) that turns the plain image old_path into
 * new_path, written to out: an upsert for each key new holds that old does
 * not hold with the same type, value and expiry, a tombstone for each key
 * old holds and new does not (expired records count as held: an image's
 * records are what it holds). The delta names old as its base (prev 0, seq
 * 1) and has new's name, created time and dedup flag. Both images are
 * verified whole first and must have the same seed and hash_bits (else
 * SHMKV_EINPUT saying to rebuild new with old's --seed). Options, "-" and
 * what is left on error as shmkv_build_join(). Returns 0, SHMKV_EINPUT
 * (seeds or hash bits differ, new is a delta), SHMKV_EBASE (old is a
 * delta), the codes of shmkv_open_file() and shmkv_verify(), -EINVAL,
 * -ENOMEM, -errno; err names the file and the reason. */
int shmkv_build_diff(const char *out, const char *old_path, const char *new_path,
		     const shmkv_join_options *opt, shmkv_build_stats *stats, char *err,
		     size_t err_len);

/* Applies deltas[0..n-1], a chain of deltas of the plain image base given in
 * chain order (lib/FORMAT.md §19.5), and writes out: with as_delta 0, the
 * image a fresh build of the merged records gives, byte for byte (base's
 * seed, hash_bits, name, DEDUP flag and created time; the bucket count
 * chosen afresh); with as_delta 1, one delta of base (prev 0, the last
 * delta's seq, name, created time and dedup flag) holding the chain's last
 * word on each key: its upserts, and its tombstones of keys base holds.
 * Every input is verified whole first; the chain must hold together: each
 * a delta of base (its checksum and size, seed and hash_bits), the first
 * with prev 0, each next naming the one before it. Options, "-" and what is
 * left on error as shmkv_build_join(). Returns 0, SHMKV_EBASE (a broken
 * chain, a delta of another image, base a delta or a delta plain: err names
 * both checksums and the seq), the codes of shmkv_open_file() and
 * shmkv_verify(), -EINVAL (no base, delta or output), -ENOMEM, -errno. */
int shmkv_build_apply(const char *out, const char *base, const char *const *deltas, size_t n,
		      int as_delta, const shmkv_join_options *opt, shmkv_build_stats *stats,
		      char *err, size_t err_len);

/* shmkv_build_apply(out, base, deltas, n, 0, ...) for a base its caller
 * verified itself (the loader's compaction: the base it serves was verified
 * at its load): the same bytes, at a fraction of the cost. The base gets
 * the open's checks only (header, every checksum; a record found damaged
 * while reading is still an error naming it), the deltas are verified
 * whole, and the chain checked as apply does. The records are merged in
 * key order where they lie in the mapped images, not copied and sorted; a
 * memory limit too small for that merges as apply does (spilling). flags:
 * 0, or SHMKV_COMPACT_NOSYNC: out is a temporary the caller reads at once
 * and removes, so it is not fsynced (a crash loses it; the write's page
 * cache flush costs about as much as the merge). Returns what
 * shmkv_build_apply() returns, or -EINVAL for an unknown flag. */
#define SHMKV_COMPACT_NOSYNC 1u
int shmkv_build_compact(const char *out, const char *base, const char *const *deltas, size_t n,
			unsigned flags, const shmkv_join_options *opt, shmkv_build_stats *stats,
			char *err, size_t err_len);

/* Removes the named temporary files of the builds now writing in this
 * process (at most 8 at once). Async-signal-safe: call it from a SIGINT or
 * SIGTERM handler before the process dies, as shmctl does. */
void shmkv_build_cleanup(void);

#ifdef __cplusplus
}
#endif

#endif /* SHMKV_BUILD_H */
