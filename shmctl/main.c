/* main.c - shmctl: global options, the object table, errors, dispatch.
 *
 *   shmctl [OPTIONS] OBJECT { COMMAND | help }
 *
 * Objects are listed once, in SHMCTL_OBJECTS (main.h); each one's commands
 * and help live in its own file (image: image.c).
 */
#include "main.h"
#include "progress.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shmkv.h>

#ifndef SHMCTL_VERSION
#define SHMCTL_STR_(x) #x
#define SHMCTL_STR(x) SHMCTL_STR_(x)
#define SHMCTL_VERSION                                                                             \
	SHMCTL_STR(SHMKV_VERSION_MAJOR) "." SHMCTL_STR(SHMKV_VERSION_MINOR) "." SHMCTL_STR(          \
		SHMKV_VERSION_PATCH)
#endif

bool json_output;
bool pretty_output;
struct json json_out;
const char *root_option;

const char *shmctl_root(void)
{
	const char *env = getenv("SHMKV_ROOT");
	if (root_option)
		return root_option;
	return env && *env ? env : SHMKV_DEFAULT_ROOT;
}

static bool is_prefix(const char *pfx, const char *str)
{
	size_t n = strlen(pfx);
	return n > 0 && strncmp(str, pfx, n) == 0;
}

int cmd_select(const struct cmd *cmds, int argc, char **argv, int (*help)(int, char **),
	       const char *help_cmd)
{
	if (argc < 1) { /* no object or verb: help, but a script should notice */
		help(argc, argv);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[0], "-h") || !strcmp(argv[0], "--help"))
		return help(argc, argv);
	const char *what = *help_cmd ? "command" : "object";
	const struct cmd *found = NULL;
	char candidates[512] = "";
	size_t n = 0, len = 0;
	for (const struct cmd *c = cmds; c->name; c++)
		if (!strcmp(argv[0], c->name))
			return c->func(argc, argv); /* an exact name always wins */
	for (const struct cmd *c = cmds; c->name; c++) {
		if (!is_prefix(argv[0], c->name))
			continue;
		found = c;
		n++;
		if (len < sizeof candidates)
			len += (size_t)snprintf(candidates + len, sizeof candidates - len, "%s%s",
						n > 1 ? ", " : "", c->name);
	}
	if (n == 1)
		return found->func(argc, argv);
	/* a prefix that means two things means neither (bpftool takes the first
	 * match in its table; a destructive verb must never be a guess) */
	if (n > 1)
		return p_usage(help_cmd, "ambiguous %s '%s': could be %s", what, argv[0], candidates);
	return p_usage(help_cmd, "unknown %s '%s'", what, argv[0]);
}

int p_err(const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (json_output) {
		struct json w;
		fflush(stdout);
		json_init_file(&w, stdout, pretty_output);
		json_obj_begin(&w, NULL);
		json_str(&w, "error", buf);
		json_obj_end(&w);
		fflush(stdout);
	} else {
		fflush(stdout);
		fprintf(stderr, "%s: error: %s\n", BIN_NAME, buf);
	}
	return EXIT_USAGE;
}

int p_usage(const char *help_cmd, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	return p_err("%s; try '%s %s%shelp'", buf, BIN_NAME, help_cmd, *help_cmd ? " " : "");
}

void print_help(const char *text)
{
	if (json_output) {
		json_obj_begin(&json_out, NULL);
		json_str(&json_out, "help", text);
		json_obj_end(&json_out);
	} else {
		fputs(text, stdout);
	}
}

void verb_getopt_reset(void)
{
	optind = 0; /* glibc: 0 re-initialises getopt completely */
	opterr = 0;
}

int verb_common_opt(int c, char **argv, int (*help)(int, char **), const char *help_cmd)
{
	switch (c) {
	case 'j':
		json_output = true;
		json_init_file(&json_out, stdout, pretty_output);
		return -1;
	case 'p':
		json_output = pretty_output = true;
		json_init_file(&json_out, stdout, pretty_output);
		return -1;
	case 'h':
		return help(0, argv);
	case ':':
		if (optopt && optopt < 256 && argv[optind - 1][1] != '-')
			return p_usage(help_cmd, "%s: option -%c needs an argument", argv[0], optopt);
		return p_usage(help_cmd, "%s: option %s needs an argument", argv[0], argv[optind - 1]);
	default:
		if (optopt && optopt < 256)
			return p_usage(help_cmd, "%s: unknown option -%c", argv[0], optopt);
		return p_usage(help_cmd, "%s: unknown option %s", argv[0], argv[optind - 1]);
	}
}

bool parse_u64(const char *s, unsigned long long *out)
{
	char *end;
	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		return false;
	errno = 0;
	*out = strtoull(s, &end, 0);
	return !errno && !*end;
}

bool parse_i64(const char *s, long long *out)
{
	char *end;
	if (!*s || *s == ' ')
		return false;
	errno = 0;
	*out = strtoll(s, &end, 10);
	return !errno && !*end;
}

bool parse_double(const char *s, double *out)
{
	char *end;
	if (!*s || *s == ' ')
		return false;
	errno = 0;
	*out = strtod(s, &end);
	return !errno && !*end && isfinite(*out);
}

static int do_help(int argc, char **argv);

static int do_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	if (json_output) {
		json_obj_begin(&json_out, NULL);
		json_str(&json_out, "version", SHMCTL_VERSION);
		json_u64(&json_out, "format_version", SHMKV_FORMAT_VERSION);
		json_str(&json_out, "vector", shmkv_vector_name());
		json_obj_end(&json_out);
	} else {
		printf("%s %s (image format %u, probe %s)\n", BIN_NAME, SHMCTL_VERSION,
		       SHMKV_FORMAT_VERSION, shmkv_vector_name());
	}
	return EXIT_OK;
}

#define X(name, summary) {#name, do_##name},
static const struct cmd objects[] = {
	SHMCTL_OBJECTS(X)
	{"help", do_help},
	{"version", do_version},
	{NULL, NULL},
};
#undef X

static int do_help(int argc, char **argv)
{
	/* "shmctl help OBJECT" is "shmctl OBJECT help" */
	if (argc > 1 && strcmp(argv[1], "help") != 0 && strcmp(argv[1], "version") != 0) {
		char help_word[] = "help";
		char *sub[] = {argv[1], help_word, NULL};
		return cmd_select(objects, 2, sub, do_help, "");
	}
	char text[4096];
	size_t n = 0;
	n += (size_t)snprintf(text + n, sizeof text - n,
			      "Usage: %s [OPTIONS] OBJECT { COMMAND | help }\n"
			      "       %s help\n"
			      "       %s version\n"
			      "\n"
			      "       OBJECT := {",
			      BIN_NAME, BIN_NAME, BIN_NAME);
#define X(name, summary) n += (size_t)snprintf(text + n, sizeof text - n, " %s |", #name);
	SHMCTL_OBJECTS(X)
#undef X
	n--; /* drop the last '|' */
	n += (size_t)snprintf(text + n, sizeof text - n,
			      "}\n"
			      "       OPTIONS := { {-j|--json} [{-p|--pretty}] | {-r|--root} DIR |\n"
			      "                    --progress | {-h|--help} | {-V|--version} }\n"
			      "\n");
#define X(name, summary) n += (size_t)snprintf(text + n, sizeof text - n, "       %-9s %s\n", #name, summary);
	SHMCTL_OBJECTS(X)
#undef X
	snprintf(text + n, sizeof text - n,
		 "\n"
		 "Objects and commands may be abbreviated to a unique prefix: '%s im in FILE'.\n"
		 "'%s OBJECT help' shows an object's commands.\n"
		 "-j prints JSON (errors too, as {\"error\": \"...\"} on stdout); -p indents it.\n"
		 "-r DIR: the shmkv root of the caches (default $SHMKV_ROOT, else %s).\n"
		 "--progress: progress of image build, cache load and hugepages reserve on\n"
		 "stderr also when it is not a terminal (a line per phase, at most one a\n"
		 "second).\n"
		 "\n"
		 "Exit status: 0 ok; 1 key or cache not found, image failed verification;\n"
		 "             2 usage or I/O error.\n",
		 BIN_NAME, BIN_NAME, SHMKV_DEFAULT_ROOT);
	print_help(text);
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"json", no_argument, NULL, 'j'},
		{"pretty", no_argument, NULL, 'p'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{"root", required_argument, NULL, 'r'},
		{"progress", no_argument, NULL, 'P'},
		{NULL, 0, NULL, 0},
	};
	bool version = false, help = false;
	int c;

	opterr = 0;
	/* '+': stop at OBJECT; what follows belongs to the object and verb */
	while ((c = getopt_long(argc, argv, "+:jphVr:", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json_output = true; break;
		case 'p': json_output = pretty_output = true; break;
		case 'h': help = true; break;
		case 'V': version = true; break;
		case 'r': root_option = optarg; break;
		case 'P': progress_forced = true; break;
		case ':':
			return p_usage("", "option %s needs an argument", argv[optind - 1]);
		default:
			if (optopt && optopt < 256)
				return p_usage("", "unknown option -%c", optopt) ;
			return p_usage("", "unknown option %s", argv[optind - 1]);
		}
	}
	json_init_file(&json_out, stdout, pretty_output);
	argc -= optind;
	argv += optind;

	int rc;
	if (version)
		rc = do_version(0, NULL);
	else if (help)
		rc = do_help(0, NULL);
	else
		rc = cmd_select(objects, argc, argv, do_help, "");
	if (fflush(stdout) != 0 || ferror(stdout)) {
		json_output = false; /* stdout is broken: say so on stderr */
		p_err("writing standard output: %s", strerror(errno));
		return EXIT_USAGE;
	}
	return rc;
}
