/* cache_write.c - shmctl cache set / remove / apply: changes to a loaded
 * cache (loader/README.md, "Writes"). Each is one request to the loader,
 * answered once the change is published; apply NAME - is a stream
 * (cache_stream.c). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "json.h"
#include "main.h"

/* Types whose VALUE is text; the others take VALUE as JSON (42, true, [1,2]). */
static int text_type(const char *t)
{
	return !t || !strcmp(t, "string") || !strcmp(t, "bytes");
}

/* Sends change NAME LINE and prints the reply (generation, records). */
static int send_change(const char *name, const char *line)
{
	const char *words[] = {"change", name, line};
	jv *reply;
	int rc = loader_call(words, 3, -1, &reply, NULL, NULL);
	if (rc >= 0)
		return rc;
	print_reply(reply);
	jv_free(reply);
	return EXIT_OK;
}

/* The options after NAME KEY [VALUE]: --type T, --expires T. */
static int write_opts(int argc, char **argv, const char **type, const char **expires,
		      char **args, int *nargs)
{
	*nargs = 0;
	for (int i = 0; i < argc && *nargs < 63; i++) {
		const char **dst = !strcmp(argv[i], "--type")      ? type
				   : !strcmp(argv[i], "--expires") ? expires
								    : NULL;
		if (dst) {
			if (i + 1 >= argc)
				return p_usage("cache", "%s needs a value", argv[i]);
			*dst = argv[++i];
		} else if (!strncmp(argv[i], "--type=", 7)) {
			*type = argv[i] + 7;
		} else if (!strncmp(argv[i], "--expires=", 10)) {
			*expires = argv[i] + 10;
		} else {
			args[(*nargs)++] = argv[i];
		}
	}
	args[*nargs] = NULL;
	return -1;
}

int do_cache_set(int argc, char **argv)
{
	const char *type = NULL, *expires = NULL;
	char *args[64];
	int nargs, rc = write_opts(argc, argv, &type, &expires, args, &nargs);
	if (rc >= 0)
		return rc;
	rc = cache_args(nargs, args, 3, "NAME KEY VALUE [--type T] [--expires T]");
	if (rc >= 0)
		return rc;
	const char *name = args[optind], *key = args[optind + 1], *value = args[optind + 2];
	if ((rc = cache_check_name(name)))
		return rc;
	if (!text_type(type) && strpbrk(value, "\t\n\r"))
		return p_usage("cache", "set: a %s VALUE is JSON text on one line, without tabs",
			       type);
	struct json j;
	json_init(&j);
	json_str(&j, "key", key);
	if (text_type(type))
		json_str(&j, "value", value);
	else
		json_raw(&j, "value", value);
	if (type)
		json_str(&j, "type", type);
	if (expires) {
		char *end;
		errno = 0;
		long long t = strtoll(expires, &end, 10);
		if (*expires && !*end && !errno)
			json_i64(&j, "expires", t);
		else
			json_str(&j, "expires", expires); /* RFC 3339: the builder checks it */
	}
	char *line = json_finish(&j);
	if (!line)
		return p_err("out of memory");
	line[strcspn(line, "\n")] = 0;
	rc = send_change(name, line);
	free(line);
	return rc;
}

int do_cache_remove(int argc, char **argv)
{
	int rc = cache_args(argc, argv, 2, "NAME KEY");
	if (rc >= 0)
		return rc;
	const char *name = argv[optind], *key = argv[optind + 1];
	if ((rc = cache_check_name(name)))
		return rc;
	struct json j;
	json_init(&j);
	json_str(&j, "key", key);
	json_bool(&j, "remove", true);
	char *line = json_finish(&j);
	if (!line)
		return p_err("out of memory");
	line[strcspn(line, "\n")] = 0;
	rc = send_change(name, line);
	free(line);
	return rc;
}

int do_cache_apply(int argc, char **argv)
{
	int rc = cache_args(argc, argv, 2, "NAME DELTA_FILE|-");
	if (rc >= 0)
		return rc;
	const char *name = argv[optind], *file = argv[optind + 1];
	if ((rc = cache_check_name(name)))
		return rc;
	if (!strcmp(file, "-"))
		return cache_stream(name);
	/* absolute for the loader, whose working directory is not ours */
	char abs[PATH_MAX], cwd[PATH_MAX];
	struct stat st;
	if (stat(file, &st) != 0)
		return p_err("%s: %s", file, strerror(errno));
	if (file[0] != '/' && !getcwd(cwd, sizeof cwd))
		return p_err("current directory: %s", strerror(errno));
	if ((size_t)snprintf(abs, sizeof abs, "%s%s%s", file[0] == '/' ? "" : cwd,
			     file[0] == '/' ? "" : "/", file) >= sizeof abs)
		return p_err("%s: path too long", file);
	const char *words[] = {"apply", name, abs};
	jv *reply;
	rc = loader_call(words, 3, -1, &reply, NULL, NULL);
	if (rc >= 0)
		return rc;
	print_reply(reply);
	jv_free(reply);
	return EXIT_OK;
}
