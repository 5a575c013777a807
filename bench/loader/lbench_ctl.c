/* lbench_ctl.c - one request to shmkv-loader's control socket.
 *
 * Usage: lbench_ctl ROOT WORD...
 *
 * Sends the words TAB-separated as one request line to ROOT/control.sock and
 * prints the JSON reply with "client_wall_ns" (request sent to reply read,
 * CLOCK_MONOTONIC) added as its last member. Exit 0 when the reply says
 * "ok": true, 1 otherwise, 2 when the socket could not be used.
 */
#include "lbench_util.h"

int main(int argc, char **argv)
{
	if (argc < 3)
		lb_die("usage: %s ROOT WORD...", argv[0]);
	size_t n = 0;
	for (int i = 2; i < argc; i++)
		n += strlen(argv[i]) + 1;
	char *line = malloc(n + 1);
	if (!line)
		lb_die("out of memory");
	line[0] = 0;
	for (int i = 2; i < argc; i++) {
		if (i > 2)
			strcat(line, "\t");
		strcat(line, argv[i]);
	}
	uint64_t t0 = lb_now_ns(CLOCK_MONOTONIC);
	char *reply = lb_request(argv[1], line);
	uint64_t t1 = lb_now_ns(CLOCK_MONOTONIC);
	if (!reply) {
		fprintf(stderr, "%s/control.sock: %s\n", argv[1], strerror(errno));
		return 2;
	}
	size_t len = strlen(reply);
	while (len && reply[len - 1] != '}')
		len--;
	if (len)
		printf("%.*s, \"client_wall_ns\": %llu}\n", (int)(len - 1), reply,
		       (unsigned long long)(t1 - t0));
	else
		printf("%s\n", reply);
	int ok = lb_json_ok(reply);
	free(reply);
	free(line);
	return ok ? 0 : 1;
}
