/* bpf.c - the `bpf` object: caches exported to BPF programs by shmkv-loader
 * (loader/bpf.c; the map layout is lib/shmkv_bpf.h). Every verb asks the
 * loader over ROOT/control.sock. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shmkv_bpf.h>

#include "cache.h"
#include "main.h"
#include "plain.h"

#define QUERY_TIMEOUT_MS 30000

static int bpf_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	print_help(
		"Usage: " BIN_NAME " [OPTIONS] bpf { COMMAND | help }\n"
		"       " BIN_NAME " bpf export [--prefix P] [--max-value N] NAME\n"
		"       " BIN_NAME " bpf status [NAME]\n"
		"       " BIN_NAME " bpf unexport NAME\n"
		"       " BIN_NAME " bpf help\n"
		"\n"
		"       COMMAND := { export | status | unexport }\n"
		"       OPTIONS := { {-j|--json} [{-p|--pretty}] | {-r|--root} DIR | {-h|--help} }\n"
		"\n"
		"export    publish NAME to BPF programs, pinned at /sys/fs/bpf/shmkv/NAME (the\n"
		"          loader's bpf_dir), now and after every new generation, until\n"
		"          unexport; only keys under --prefix P (default: all), values of at\n"
		"          most --max-value N bytes (default 256, at most 4096); keys of at\n"
		"          most 60 bytes. Entries that do not fit are counted in status.\n"
		"status    what is exported: generation, entries, skipped entries by reason,\n"
		"          export time, kernel memory, last error (every exported cache, or NAME)\n"
		"unexport  unpin NAME's table (programs that hold it keep its last generation)\n"
		"\n"
		"A BPF program reads the table with lib/shmkv_bpf.h (examples/bpf/).\n"
		"export and unexport are for root and the loader's user; creating BPF maps\n"
		"needs root (CAP_BPF) in the loader.\n"
		"Exit status: 0 ok; 1 no such cache; 2 usage error, loader not running, a\n"
		"             failed export, or any other error.\n");
	return 0;
}

static int bpf_args(int argc, char **argv, int min, int max, const char *usage,
		    const char **prefix, const char **max_value)
{
	static const struct option opts[] = {
		VERB_LONGOPTS,
		{"root", required_argument, NULL, 'r'},
		{"prefix", required_argument, NULL, 'P'},
		{"max-value", required_argument, NULL, 'M'},
		{NULL, 0, NULL, 0},
	};
	int c, rc;
	verb_getopt_reset();
	while ((c = getopt_long(argc, argv, "+" VERB_SHORTOPTS "r:", opts, NULL)) != -1) {
		if (c == 'r') {
			root_option = optarg;
		} else if ((c == 'P' || c == 'M') && !prefix) {
			return p_usage("bpf", "%s: no option --%s", argv[0],
				       c == 'P' ? "prefix" : "max-value");
		} else if (c == 'P') {
			if (strpbrk(optarg, "\t\r\n"))
				return p_usage("bpf", "--prefix: a TAB, CR or LF cannot be sent to "
					       "the loader");
			*prefix = optarg;
		} else if (c == 'M') {
			unsigned long long n;
			if (!parse_u64(optarg, &n) || n > SHMKV_BPF_VALUE_LIMIT)
				return p_usage("bpf", "--max-value \"%s\": expected 0..%d bytes",
					       optarg, SHMKV_BPF_VALUE_LIMIT);
			*max_value = optarg;
		} else if ((rc = verb_common_opt(c, argv, bpf_help, "bpf")) >= 0) {
			return rc;
		}
	}
	if (argc - optind < min || argc - optind > max)
		return p_usage("bpf", "%s: expected %s", argv[0], usage);
	if (argc - optind == 1 && (rc = cache_check_name(argv[optind])))
		return rc;
	return -1;
}

static int call_print(const char *const *words, size_t n, int timeout_ms)
{
	jv *reply;
	int rc = loader_call(words, n, timeout_ms, &reply, NULL, NULL);
	if (rc >= 0)
		return rc;
	print_reply(reply);
	jv_free(reply);
	return EXIT_OK;
}

static int do_bpf_export(int argc, char **argv)
{
	const char *prefix = "", *max_value = "";
	int rc = bpf_args(argc, argv, 1, 1, "NAME", &prefix, &max_value);
	if (rc >= 0)
		return rc;
	const char *words[] = {"bpf_export", argv[optind], prefix, max_value};
	return call_print(words, 4, -1); /* as long as the export takes */
}

static int do_bpf_unexport(int argc, char **argv)
{
	int rc = bpf_args(argc, argv, 1, 1, "NAME", NULL, NULL);
	if (rc >= 0)
		return rc;
	const char *words[] = {"bpf_unexport", argv[optind]};
	return call_print(words, 2, -1);
}

static int do_bpf_status(int argc, char **argv)
{
	static const char *const cols[] = {"cache", "exported", "generation", "current", "entries",
					   "prefix", "max_value", "export_ms", "memlock", "error",
					   NULL};
	int rc = bpf_args(argc, argv, 0, 1, "[NAME]", NULL, NULL);
	if (rc >= 0)
		return rc;
	const char *words[] = {"bpf_status", argc > optind ? argv[optind] : NULL};
	jv *reply;
	rc = loader_call(words, argc > optind ? 2 : 1, QUERY_TIMEOUT_MS, &reply, NULL, NULL);
	if (rc >= 0)
		return rc;
	const jv *caches = jv_get(reply, "caches");
	if (json_output || jv_type(caches) != JV_ARR) {
		print_reply(reply);
	} else if (argc > optind && jv_size(caches) == 1) {
		plain_object(stdout, jv_item(caches, 0), NULL);
	} else if (jv_size(caches) == 0) {
		const char *dir = "?";
		jv_get_str(reply, "bpf_dir", &dir);
		printf("no cache is exported to BPF (bpf_dir %s)\n", dir);
	} else {
		plain_table(stdout, caches, cols, "");
	}
	jv_free(reply);
	return EXIT_OK;
}

int do_bpf(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{"export", do_bpf_export},
		{"status", do_bpf_status},
		{"unexport", do_bpf_unexport},
		{"help", bpf_help},
		{NULL, NULL},
	};
	return cmd_select(cmds, argc - 1, argv + 1, bpf_help, "bpf");
}
