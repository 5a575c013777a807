/* main.c - shmkv-http: caches over HTTP (http/README.md). An ordinary
 * reader: it attaches by name like any client and needs no privilege beyond
 * reading the caches' files. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "server.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: shmkv-http [--config FILE] [--listen ADDR[:PORT]] [--root DIR] [--port-file FILE]\n"
		"                  [--tls-cert FILE --tls-key FILE]\n"
		"                  [--max-url N] [--max-body N] [--max-batch-keys N]\n"
		"                  [--max-connections N] [--request-timeout DURATION]\n"
		"                  [--write-timeout DURATION] [--max-caches N] [--caches NAME,...]\n"
		"Serves the shmkv caches under DIR (default $SHMKV_ROOT, else /run/shmkv) over HTTP,\n"
		"on 127.0.0.1:8420 unless told otherwise. Flags override the config file's [http]\n"
		"keys of the same name (dashes for underscores). See shmkv-http(8).\n");
}

int main(int argc, char **argv)
{
	static struct http_app app;
	char why[600];
	http_conf_defaults(&app.conf);
	/* the config file first, whatever its place among the flags */
	for (int i = 1; i + 1 < argc; i++)
		if (!strcmp(argv[i], "--config") && http_conf_load(argv[i + 1], &app.conf, why, sizeof why)) {
			fprintf(stderr, "shmkv-http: %s\n", why);
			return 2;
		}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		}
		if (strncmp(a, "--", 2) || i + 1 == argc) {
			fprintf(stderr, "shmkv-http: %s: %s\n", a,
				strncmp(a, "--", 2) ? "not an option" : "needs a value");
			usage(stderr);
			return 2;
		}
		const char *v = argv[++i];
		if (!strcmp(a, "--config"))
			continue;
		char key[64];
		snprintf(key, sizeof key, "%s", a + 2);
		for (char *p = key; *p; p++)
			if (*p == '-')
				*p = '_';
		if (http_conf_set(&app.conf, key, v, why, sizeof why)) {
			fprintf(stderr, "shmkv-http: %s\n", why);
			return 2;
		}
	}
	http_caches_init(&app.caches, app.conf.root, app.conf.max_caches);
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	h2o_loop_t *loop = NULL;
	int err = http_server_start(&app, &loop, why, sizeof why);
	if (err) {
		fprintf(stderr, "shmkv-http: %s\n", why);
		return 1;
	}
	http_server_run(&app, loop, &stop);
	http_caches_free(&app.caches);
	fprintf(stderr, "shmkv-http: stopped\n");
	return 0;
}
