/* cache.c - the `cache` object: its command table, help, and the verbs that
 * ask shmkv-loader over ROOT/control.sock (list, status, load, reload,
 * rollback, drop). `get` attaches like any reader (lib/shmkv/attach.h);
 * `readers` scans /proc (cache_readers.c); `list` falls back to the control
 * segments when no loader answers (cache_ctl.c). */
#include "cache.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctlsock.h"
#include "json.h"
#include "lookup.h"
#include "main.h"
#include "plain.h"
#include "progress.h"

/* list at once; status within a reader scan (loader/README.md, "Control
 * socket limits": at most about 10 s) */
#define QUERY_TIMEOUT_MS 30000
#define PROGRESS_TICK_MS 200

int cache_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	print_help(
		"Usage: " BIN_NAME " [OPTIONS] cache { COMMAND | help }\n"
		"       " BIN_NAME " cache list\n"
		"       " BIN_NAME " cache status [--all] NAME\n"
		"       " BIN_NAME " cache stats [--prometheus] [NAME...]\n"
		"       " BIN_NAME " cache get [--key-base64] NAME KEY\n"
		"       " BIN_NAME " cache load NAME FILE\n"
		"       " BIN_NAME " cache readers NAME\n"
		"       " BIN_NAME " cache reload NAME\n"
		"       " BIN_NAME " cache rollback NAME\n"
		"       " BIN_NAME " cache drop NAME\n"
		"       " BIN_NAME " cache set NAME KEY VALUE [--type T] [--expires T]\n"
		"       " BIN_NAME " cache remove NAME KEY\n"
		"       " BIN_NAME " cache apply NAME { DELTA_FILE | - }\n"
		"       " BIN_NAME " cache compact NAME\n"
		"       " BIN_NAME " cache help\n"
		"\n"
		"       COMMAND := { list | status | stats | get | load | readers | reload |\n"
		"                    rollback | drop | set | remove | apply | compact }\n"
		"       OPTIONS := { {-j|--json} [{-p|--pretty}] | {-r|--root} DIR | {-h|--help} }\n"
		"\n"
		"list      the caches: generation, image size, memory (from the loader; from\n"
		"          the control segments ROOT/*.ctl when no loader answers)\n"
		"status    one cache as the loader sees it, in a dozen lines: state,\n"
		"          generation, size, memory and placement, readers, last load, last\n"
		"          error, rollback; --all (or -j): every field the loader reports\n"
		"stats     every cache's (or NAME's) figures in one table, object (-j) or\n"
		"          Prometheus text (--prometheus: shmkv_up, generation, bytes, memory,\n"
		"          entries, load duration, readers, failures)\n"
		"get       KEY's value in the current generation (as 'image get'; attaches\n"
		"          like any reader, no loader needed); --key-base64: KEY is base64\n"
		"load      load FILE (an image) into NAME and publish it as a new generation;\n"
		"          --numa POLICY: this load's NUMA placement (none, local[=CPUS],\n"
		"          node=N, interleave[=NODES], replicate[=NODES]; default: numa= of\n"
		"          the cache in the loader's config)\n"
		"readers   the processes that map NAME's segments: generation, RSS, PSS\n"
		"          (from /proc; no loader needed; root sees every process)\n"
		"reload    load NAME again from its configured source\n"
		"rollback  publish the previous generation again (after a change: the\n"
		"          generation before it, same base)\n"
		"drop      remove NAME (readers keep what they have mapped)\n"
		"set       KEY = VALUE in NAME, published as a new generation (prints it);\n"
		"          --type T: a type of 'image build' JSONL (string by default;\n"
		"          other than string and bytes, VALUE is JSON: 42, true, [1,2]);\n"
		"          --expires T: Unix seconds or an RFC 3339 time\n"
		"remove    remove KEY from NAME, published as a new generation\n"
		"apply     apply DELTA_FILE (a delta of NAME's base, or the next delta of\n"
		"          the chain applied last), published as a new generation; with -,\n"
		"          a stream: JSONL changes from standard input, published in batches,\n"
		"          one acknowledgement line per batch (the lines it covers)\n"
		"compact   merge NAME's changes into a new base, published as a new\n"
		"          generation (the loader does it by itself past compact_entries\n"
		"          or compact_ratio)\n"
		"\n"
		"ROOT is -r DIR, else $SHMKV_ROOT, else " SHMKV_DEFAULT_ROOT ". The loader's socket is\n"
		"ROOT/control.sock. -j prints the loader's reply as it is.\n"
		"Exit status: 0 ok; 1 no such cache, key not found (get); 2 usage error,\n"
		"             loader not running, a failed operation, or any other error.\n");
	return 0;
}

int cache_args(int argc, char **argv, int nargs, const char *usage)
{
	static const struct option opts[] = {
		VERB_LONGOPTS,
		{"root", required_argument, NULL, 'r'},
		{NULL, 0, NULL, 0},
	};
	int c, rc;
	verb_getopt_reset();
	while ((c = getopt_long(argc, argv, "+" VERB_SHORTOPTS "r:", opts, NULL)) != -1) {
		if (c == 'r')
			root_option = optarg;
		else if ((rc = verb_common_opt(c, argv, cache_help, "cache")) >= 0)
			return rc;
	}
	if (argc - optind != nargs)
		return p_usage("cache", "%s: expected %s", argv[0], nargs ? usage : "no arguments");
	return -1;
}

int cache_check_name(const char *name)
{
	if (!shmkv_name_check(name))
		return 0;
	return p_usage("cache", "invalid cache name \"%s\" (" SHMKV_CACHE_NAME_RULE ")", name);
}

bool reply_no_cache(const jv *reply)
{
	const char *reason = NULL;
	jv_get_str(reply, "reason", &reason);
	return json_reason_parse(reason) == JSON_R_NO_CACHE;
}

/* A failed reply {"ok": false, "error": ...}: reports it; 1 when the cache
 * does not exist (its "reason", never its message), else 2. */
int reply_error(const jv *reply)
{
	const char *msg = "the loader gave no reason";
	jv_get_str(reply, "error", &msg);
	p_err("shmkv-loader: %s", msg);
	return reply_no_cache(reply) ? EXIT_NEGATIVE : EXIT_USAGE;
}

int loader_call(const char *const *words, size_t n, int timeout_ms, jv **reply,
		       void (*tick)(void *), void *ctx)
{
	char why[4600];
	int err = ctl_request_tick(shmctl_root(), words, n, timeout_ms, reply, why, sizeof why,
				   PROGRESS_TICK_MS, tick, ctx);
	if (err)
		return p_err("%s", why);
	bool ok = false;
	jv_get_bool(*reply, "ok", &ok);
	if (!ok) {
		int rc = reply_error(*reply);
		jv_free(*reply);
		return rc;
	}
	return -1;
}

void print_reply(const jv *reply)
{
	static const char *const skip[] = {"ok", NULL};
	if (json_output)
		jv_write(&json_out, reply);
	else
		plain_object(stdout, reply, skip);
}

int do_cache_list(int argc, char **argv)
{
	static const char *const cols[] = {"name", "generation", "image_size", "memory", "loading",
					   "failed", "expires_in", "last_error", NULL};
	static const char *const cols_ctl[] = {"name", "generation", "image_size", "memory",
					       "loader_pid", "error", NULL};
	int rc = cache_args(argc, argv, 0, "");
	if (rc >= 0)
		return rc;
	const char *root = shmctl_root(), *words[] = {"list"};
	char why[4600];
	jv *reply;
	int err = ctl_request(root, words, 1, QUERY_TIMEOUT_MS, &reply, why, sizeof why);
	bool from_ctl = err == CTL_ECONNECT;
	if (from_ctl) {
		char note[4700];
		size_t wl = strlen(why), hl = strlen(CTL_CONNECT_HINT);
		if (wl > hl && !strcmp(why + wl - hl, CTL_CONNECT_HINT))
			why[wl - hl] = 0;
		snprintf(note, sizeof note,
			 "shmkv-loader is not running with this root (%s): listing %s/*.ctl", why,
			 root);
		if (ctl_list(root, note, &reply, why, sizeof why))
			return p_err("%s; cannot list them: %s", note, why);
		if (!json_output)
			fprintf(stderr, "%s: note: %s\n", BIN_NAME, note);
	} else if (err) {
		return p_err("%s", why);
	} else {
		bool ok = false;
		jv_get_bool(reply, "ok", &ok);
		if (!ok) {
			rc = reply_error(reply);
			jv_free(reply);
			return rc;
		}
	}
	const jv *caches = jv_get(reply, "caches");
	if (json_output) {
		jv_write(&json_out, reply);
	} else if (jv_type(caches) != JV_ARR) {
		plain_object(stdout, reply, NULL);
	} else if (jv_size(caches) == 0) {
		printf("no caches under %s\n", root);
	} else {
		plain_table(stdout, caches, from_ctl ? cols_ctl : cols, "");
	}
	/* the spool not watched (deleted, renamed away): nothing dropped there
	 * loads until it is back, so say it under the table, not only in -j */
	const char *spool_dir = NULL, *spool_err = NULL;
	const jv *spool = jv_get(reply, "spool");
	if (!json_output && jv_get_str(spool, "error", &spool_err) && spool_err) {
		jv_get_str(spool, "dir", &spool_dir);
		printf("spool %s: not watched: %s\n", spool_dir ? spool_dir : "?", spool_err);
	}
	jv_free(reply);
	return EXIT_OK;
}

/* Load progress: the status verb's "progress" on a second connection,
 * drawn on stderr when it is a terminal. */
struct load_watch {
	const char *name;
	struct progress bar;
};

static void load_tick(void *ctx)
{
	struct load_watch *lw = ctx;
	const char *words[] = {"status", lw->name};
	char why[512];
	jv *st;
	if (ctl_request(shmctl_root(), words, 2, 1000, &st, why, sizeof why))
		return;
	uint64_t done, total;
	const jv *pr = jv_get(st, "progress");
	if (jv_get_u64(pr, "bytes_done", &done) && jv_get_u64(pr, "bytes_total", &total) && total)
		progress_update(&lw->bar, "loading", done, total);
	jv_free(st);
}

/* A long operation: no time limit, progress on a terminal. */
static int long_verb(const char *name, const char *const *words, size_t n)
{
	struct load_watch lw = {.name = name};
	progress_init(&lw.bar);
	bool watch = lw.bar.enabled && !json_output;
	jv *reply;
	int rc = loader_call(words, n, -1, &reply, watch ? load_tick : NULL, &lw);
	progress_clear(&lw.bar);
	if (rc >= 0)
		return rc;
	print_reply(reply);
	jv_free(reply);
	return EXIT_OK;
}

static int do_cache_load(int argc, char **argv)
{
	/* --numa POLICY is load's own option: taken out before the common ones */
	const char *numa = NULL;
	char *args[64];
	int nargs = 0;
	for (int i = 0; i < argc && nargs < 63; i++) {
		if (!strcmp(argv[i], "--numa") && i + 1 < argc) {
			numa = argv[++i];
		} else if (!strncmp(argv[i], "--numa=", 7)) {
			numa = argv[i] + 7;
		} else if (!strcmp(argv[i], "--numa")) {
			return p_usage("cache", "load: --numa needs a policy (none, local[=CPUS], "
				       "node=N, interleave[=NODES], replicate[=NODES])");
		} else {
			args[nargs++] = argv[i];
		}
	}
	args[nargs] = NULL;
	if (numa && (!numa[0] || strpbrk(numa, "\t\n")))
		return p_usage("cache", "load: --numa \"%s\" is not a policy", numa);
	argc = nargs;
	argv = args;
	int rc = cache_args(argc, argv, 2, "NAME FILE");
	if (rc >= 0)
		return rc;
	const char *name = argv[optind], *file = argv[optind + 1];
	if ((rc = cache_check_name(name)))
		return rc;
	/* absolute for the loader, whose working directory is not ours; symbolic
	 * links stay (a reload reads what the link names then) */
	char abs[PATH_MAX], cwd[PATH_MAX];
	struct stat st;
	if (stat(file, &st) != 0)
		return p_err("%s: %s", file, strerror(errno));
	if (file[0] != '/' && !getcwd(cwd, sizeof cwd))
		return p_err("current directory: %s", strerror(errno));
	if ((size_t)snprintf(abs, sizeof abs, "%s%s%s", file[0] == '/' ? "" : cwd,
			     file[0] == '/' ? "" : "/", file) >= sizeof abs)
		return p_err("%s: path too long", file);
	const char *words[] = {"load", name, abs, numa};
	return long_verb(name, words, numa ? 4 : 3);
}

static int one_name_long(int argc, char **argv, const char *verb)
{
	int rc = cache_args(argc, argv, 1, "NAME");
	if (rc >= 0)
		return rc;
	const char *name = argv[optind];
	if ((rc = cache_check_name(name)))
		return rc;
	const char *words[] = {verb, name};
	return long_verb(name, words, 2);
}

static int do_cache_reload(int argc, char **argv)
{
	return one_name_long(argc, argv, "reload");
}

static int do_cache_rollback(int argc, char **argv)
{
	return one_name_long(argc, argv, "rollback");
}

static int do_cache_drop(int argc, char **argv)
{
	return one_name_long(argc, argv, "drop");
}

static int do_cache_compact(int argc, char **argv)
{
	return one_name_long(argc, argv, "compact");
}

/* get: attach to the current generation like any reader */
static int attach(const char *name, shmkv **db)
{
	char why[512];
	int err = cache_check_name(name);
	if (err)
		return err;
	err = shmkv_attach_diag(shmctl_root(), name, 0, db, why, sizeof why);
	if (!err)
		return EXIT_OK;
	p_err("%s", why);
	return err == -ENOENT ? EXIT_NEGATIVE : EXIT_USAGE;
}

static int do_cache_get(int argc, char **argv)
{
	static const struct get_source src = {
		.object = "cache",
		.usage = "NAME KEY",
		.help = cache_help,
		.open = attach,
		.what_prefix = "cache ",
		.corrupt_hint = NULL,
		.takes_root = true,
	};
	return get_verb(argc, argv, &src);
}

/* Verbs take unique prefixes only (cmd_select): "re" is refused as
 * ambiguous (readers, reload), never taken as the first match. */
static const struct cmd cmds[] = {
	{"list", do_cache_list},
	{"status", do_cache_status},
	{"stats", do_cache_stats},
	{"get", do_cache_get},
	{"load", do_cache_load},
	{"readers", do_cache_readers},
	{"reload", do_cache_reload},
	{"rollback", do_cache_rollback},
	{"drop", do_cache_drop},
	{"set", do_cache_set},
	{"remove", do_cache_remove},
	{"apply", do_cache_apply},
	{"compact", do_cache_compact},
	{"help", cache_help},
	{NULL, NULL},
};

int do_cache(int argc, char **argv)
{
	return cmd_select(cmds, argc - 1, argv + 1, cache_help, "cache");
}
