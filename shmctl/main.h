/* main.h - what every shmctl command file shares: output mode, errors, exit
 * codes, the command-table dispatcher and verb option parsing. */
#ifndef SHMCTL_MAIN_H
#define SHMCTL_MAIN_H

#include <getopt.h>
#include <stdbool.h>

#include "json.h"

/* Exit codes (documented in the help text and README.md). */
#define EXIT_OK 0
#define EXIT_NEGATIVE 1 /* key or cache not found, image failed verification */
#define EXIT_USAGE 2    /* usage or I/O error (anything else that went wrong) */

#define BIN_NAME "shmctl"

extern bool json_output;   /* -j: JSON on stdout */
extern bool pretty_output; /* -p: indented JSON (implies -j) */
extern struct json json_out; /* the stdout writer, set up by main() */
extern const char *root_option; /* -r/--root DIR, or NULL */

/* The shmkv root directory (control segments, the loader's socket):
 * --root, else $SHMKV_ROOT, else SHMKV_DEFAULT_ROOT (/run/shmkv). */
const char *shmctl_root(void);

/* Objects: one X(name, summary) line each; name's commands live in
 * do_<name>(argc, argv), where argv[0] is the object word as typed and the
 * verb follows (do_<name> calls cmd_select(its table, argc - 1, argv + 1)). */
#define SHMCTL_OBJECTS(X)                                                                          \
	X(image, "build, read, inspect and check image files")                                      \
	X(cache, "caches in shared memory: load, status, get, readers (shmkv-loader)")              \
	X(hugepages, "huge pages the images need (plan), and reserving them (reserve)")             \
	X(doctor, "what shmkv needs from this host, each finding with its fix")                     \
	X(bpf, "caches exported to BPF programs: export, status, unexport (shmkv-loader)")

#define X(name, summary) int do_##name(int argc, char **argv);
SHMCTL_OBJECTS(X)
#undef X

/* A command table: the word typed selects the entry of that name, else the
 * one entry whose name starts with it; a prefix of two or more names is an
 * error that lists them (so does an unknown word). */
struct cmd {
	const char *name;
	int (*func)(int argc, char **argv); /* argv[0] is the word as typed */
};

/* Runs the command argv[0] names (exact name, else unique prefix); help when
 * argv[0] is -h/--help, and help with EXIT_USAGE when argc is 0 (the object
 * or verb is missing); EXIT_USAGE for an unknown or ambiguous word.
 * help_cmd is the object ("image"), or "" for the object table itself. */
int cmd_select(const struct cmd *cmds, int argc, char **argv, int (*help)(int, char **),
	       const char *help_cmd);

/* Errors: "shmctl: error: ..." on stderr, or {"error": "..."} on stdout in
 * JSON mode. p_usage() also points at "shmctl HELP_CMD help" (help_cmd is an
 * object name, or "" for the top-level help). Both return EXIT_USAGE. */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
int p_err(const char *fmt, ...);
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
int p_usage(const char *help_cmd, const char *fmt, ...);

/* Prints help text: as is, or as {"help": text} in JSON mode. */
void print_help(const char *text);

/* Verb options: every verb takes -j/--json, -p/--pretty and -h/--help too.
 * Use VERB_LONGOPTS inside a verb's option array, VERB_SHORTOPTS in its
 * optstring, and pass each getopt result to verb_common_opt(). */
#define VERB_SHORTOPTS ":jph"
#define VERB_LONGOPTS                                                                              \
	{"json", no_argument, NULL, 'j'}, {"pretty", no_argument, NULL, 'p'},                        \
	{"help", no_argument, NULL, 'h'}
/* Starts getopt over a verb's argv (resets getopt's state). */
void verb_getopt_reset(void);
/* Handles what a verb's getopt returned that is not the verb's own option:
 * -j/-p (returns -1: parsing goes on), -h (prints help, returns EXIT_OK),
 * a missing argument or an unknown option (returns EXIT_USAGE). */
int verb_common_opt(int c, char **argv, int (*help)(int, char **), const char *help_cmd);

/* Number parsing for option values: whole string, no overflow. */
bool parse_u64(const char *s, unsigned long long *out);
bool parse_i64(const char *s, long long *out);
bool parse_double(const char *s, double *out);

#endif /* SHMCTL_MAIN_H */
