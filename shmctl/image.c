/* image.c - the `image` object: its command table and help. */
#include "image.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <shmkv_build.h>

#include "main.h"

int image_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	print_help(
		"Usage: " BIN_NAME " [OPTIONS] image { COMMAND | help }\n"
		"       " BIN_NAME " image build -o { OUT | - } [BUILD_OPTS] INPUT...\n"
		"       " BIN_NAME " image join -o { OUT | - } [REBUILD_OPTS] FRAGMENT...\n"
		"       " BIN_NAME " image upgrade -o { NEW | - } [REBUILD_OPTS] OLD\n"
		"       " BIN_NAME " image diff -o { DELTA | - } [REBUILD_OPTS] OLD NEW\n"
		"       " BIN_NAME " image apply -o { NEW | - } [--as-delta] [REBUILD_OPTS]\n"
		"                    BASE DELTA...\n"
		"       " BIN_NAME " image get [--key-base64] FILE KEY\n"
		"       " BIN_NAME " image inspect FILE\n"
		"       " BIN_NAME " image verify FILE\n"
		"       " BIN_NAME " image dump FILE\n"
		"       " BIN_NAME " image help\n"
		"\n"
		"       COMMAND := { build | join | upgrade | diff | apply | get | inspect |\n"
		"                    verify | dump }\n"
		"       BUILD_OPTS := { --format FORMAT | --type TYPE |\n"
		"                       --tsv-expires | --on-duplicate DUP |\n"
		"                       --name NAME | --seed SEED | --created UNIX_TIME |\n"
		"                       --buckets N | --load-factor F | --no-dedup |\n"
		"                       --lossy-f32 | --threads N | --part K/N |\n"
		"                       --filter-part | --memory-limit SIZE | --tmpdir DIR |\n"
		"                       --delta-of BASE | --after PREV_DELTA |\n"
		"                       --tsv-removes |\n"
		"                       --hash-bits BITS }   (--hash-bits: tests only)\n"
		"       INPUT := { PATH | - }\n"
		"       REBUILD_OPTS := { --threads N | --memory-limit SIZE | --tmpdir DIR }\n"
		"       FORMAT := { jsonl | tsv }   (default: tsv for *.tsv, else jsonl)\n"
		"       TYPE := { bytes | string | i64 | bool | f64 | f32list | f64list |\n"
		"                 i64list | strlist }   (TSV value type; default string)\n"
		"       DUP := { error | first | last }   (default error)\n"
		"       OPTIONS := { {-j|--json} [{-p|--pretty}] | {-h|--help} }\n"
		"\n"
		"build    write an image from JSONL or TSV records ('-' is stdin; -o -:\n"
		"         the image to stdout); --lossy-f32: round f32list values that f32\n"
		"         cannot hold exactly (else an error)\n"
		"         --part K/N --buckets B: fragment K of N (keys whose bucket is in\n"
		"         part K; others are an error, or skipped with --filter-part)\n"
		"         --memory-limit SIZE (256M, 2G; default half the available\n"
		"         memory; none): spill to --tmpdir DIR (default $TMPDIR, else the\n"
		"         output's directory) instead of going over it; same image\n"
		"         expiry: JSONL \"expires\" (RFC 3339 or Unix seconds), TSV with\n"
		"         --tsv-expires a third column (empty: none)\n"
		"         --delta-of BASE: a delta image of BASE (changes to it): the\n"
		"         records are upserts, JSONL {\"key\": K, \"remove\": true} removes K\n"
		"         (a tombstone), as does a TSV line of a key alone with --tsv-removes;\n"
		"         --after PREV_DELTA: the next delta of the chain PREV_DELTA ends\n"
		"join     fragments 1..N of --part builds, in order, into the image one\n"
		"         build of all their records gives, byte for byte\n"
		"upgrade  a format 1 image (retired) into the format 2 image a build of\n"
		"         its records gives, byte for byte (its name, seed and created\n"
		"         time kept; buckets chosen afresh); OLD is checked whole first\n"
		"diff     the delta that turns OLD into NEW (same seed): upserts of what\n"
		"         NEW holds differently, tombstones of what it does not hold\n"
		"apply    BASE and its chain of deltas (in order) into the image a build\n"
		"         of the merged records gives, byte for byte; --as-delta: into one\n"
		"         delta of BASE instead. Every input is checked whole first\n"
		"get      print KEY's value; --key-base64: KEY is base64 (binary keys)\n"
		"inspect  header, sections, value types, probe lengths, dedup savings;\n"
		"         of a delta: its base, place in its chain and tombstones\n"
		"verify   check every checksum, record, entry and byte of padding\n"
		"dump     the records as JSONL, after a shmkv_meta line: 'image build'\n"
		"         of the dump gives the same image, byte for byte\n"
		"\n"
		"Options of a command come before its arguments ('--' ends them);\n"
		"build also takes them after its inputs.\n"
		"Exit status: 0 ok; 1 key not found (get), image invalid (verify);\n"
		"             2 usage or I/O error.\n");
	return 0;
}

static const struct cmd cmds[] = {
	{"build", do_image_build},
	{"join", do_image_join},
	{"upgrade", do_image_upgrade},
	{"diff", do_image_diff},
	{"apply", do_image_apply},
	{"get", do_image_get},
	{"inspect", do_image_inspect},
	{"verify", do_image_verify},
	{"dump", do_image_dump},
	{"help", image_help},
	{NULL, NULL},
};

int do_image(int argc, char **argv)
{
	return cmd_select(cmds, argc - 1, argv + 1, image_help, "image");
}

int image_simple_args(int argc, char **argv, int nargs, const char *usage)
{
	static const struct option opts[] = {VERB_LONGOPTS, {NULL, 0, NULL, 0}};
	int c, rc;
	verb_getopt_reset();
	while ((c = getopt_long(argc, argv, "+" VERB_SHORTOPTS, opts, NULL)) != -1)
		if ((rc = verb_common_opt(c, argv, image_help, "image")) >= 0)
			return rc;
	if (argc - optind != nargs)
		return p_usage("image", "%s: expected %s", argv[0], usage);
	return -1;
}

void image_why(char *out, size_t len, const char *path, const char *why)
{
	size_t n = strlen(path);
	if (!strncmp(why, path, n) && why[n] == ':')
		snprintf(out, len, "%s", why);
	else
		snprintf(out, len, "%s: %s", path, why);
}

/* Padding outside the sections (three, or a delta's four: lib/FORMAT.md
 * §19) is zero (§2), so the reader reads all of it; alignment needs less than 8 KiB of it (64 between
 * sections, 4096 at the end), and another builder's gaps may add some, but a
 * header that declares far more than its sections hold (a 1 TiB file_size
 * over a few KiB of data, the rest a hole) would have the reader read a TiB
 * of zeros. Refused before it is mapped: work stays proportional to the
 * image's contents. Only the header is read; it is checked whole later. */
#define PADDING_MAX (UINT64_C(1) << 20)
int image_padding_check(const char *path, char *why, size_t len)
{
	shmkv_image_header h;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0; /* the open that follows says why */
	struct stat st;
	ssize_t got = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, &h, sizeof h, 0) : -1;
	close(fd);
	/* a size other than file_size is the reader's to report (truncated...) */
	if (got != (ssize_t)sizeof h || memcmp(h.magic, SHMKV_MAGIC, 8) != 0 ||
	    (h.section_count != 3 && h.section_count != 4) || h.file_size != (uint64_t)st.st_size)
		return 0;
	uint64_t pad = 0, from = SHMKV_HEADER_SIZE;
	for (uint32_t i = 0; i <= h.section_count; i++) {
		uint64_t to = i < h.section_count ? h.sections[i].offset : h.file_size;
		if (to < from) /* overlapping or out of order: the header check says so */
			return 0;
		pad += to - from;
		if (i < h.section_count)
			from = h.sections[i].offset + h.sections[i].size;
	}
	if (pad <= PADDING_MAX)
		return 0;
	snprintf(why, len,
		 "%" PRIu64 " bytes of padding outside the sections (file_size %" PRIu64
		 ", sections end at %" PRIu64 "): more than %" PRIu64 " bytes of zeros, not "
		 "an image (a header that declares more than the file holds); refused "
		 "unread", pad, h.file_size, from, PADDING_MAX);
	return SHMKV_ECORRUPT;
}

int image_each(const shmkv *db, image_entry_fn *fn, void *ctx, uint64_t *n)
{
	shmkv_iter it;
	const void *key = NULL; /* set by every shmkv_iter_next that returns 0 */
	size_t key_len = 0;
	shmkv_value v;
	int err;
	*n = 0;
	shmkv_iter_init_all(db, &it);
	while ((err = shmkv_iter_next(&it, &key, &key_len, &v)) == 0) {
		int rc = fn(ctx, key, key_len, &v, shmkv_iter_expires(&it));
		if (rc)
			return rc;
		(*n)++;
	}
	return err == SHMKV_EEND ? 0 : err;
}

int image_file_verb(int argc, char **argv, int (*fn)(const char *path, shmkv *db))
{
	int rc = image_simple_args(argc, argv, 1, "FILE");
	if (rc >= 0)
		return rc;
	const char *path = argv[optind];
	shmkv *db;
	if ((rc = image_open(path, 0, &db)))
		return rc;
	rc = fn(path, db);
	shmkv_close(db);
	return rc;
}

int image_open(const char *path, unsigned flags, shmkv **db)
{
	char why[512], msg[1024];
	int err = image_padding_check(path, why, sizeof why);
	if (err) {
		image_why(msg, sizeof msg, path, why);
		return p_err("%s", msg);
	}
	err = shmkv_open_file_diag(path, flags, db, why, sizeof why);
	if (!err)
		return EXIT_OK;
	image_why(msg, sizeof msg, path, why);
	return p_err("%s", msg);
}
