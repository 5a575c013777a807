/* xdp_get_user.c - shmkv-xdp-get: loads xdp_get.bpf.o against a cache
 * exported to BPF and attaches it to an interface, or asks it one key
 * through BPF_PROG_TEST_RUN (no interface needed).
 *
 *   shmkv-xdp-get [--obj FILE] [--pin PATH] attach CACHE IFACE
 *   shmkv-xdp-get [--obj FILE] [--pin PATH] query CACHE KEY
 *
 * PATH defaults to /sys/fs/bpf/shmkv/CACHE, FILE to xdp_get.bpf.o beside this
 * program. `attach` serves until SIGINT or SIGTERM, then detaches. `query`
 * prints what the program answers a UDP "GET KEY" datagram: HIT and the value
 * (bytes as text, escaped), or MISS. Needs root (CAP_BPF, CAP_NET_ADMIN).
 * Exit status: 0 hit / attached, 1 miss, 2 error.
 *
 * The same in bpftool (the recipe in README.md here):
 *   bpftool prog load xdp_get.bpf.o /sys/fs/bpf/xdp_get type xdp \
 *       map name table pinned /sys/fs/bpf/shmkv/CACHE
 *   bpftool net attach xdp pinned /sys/fs/bpf/xdp_get dev IFACE */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>

#include <shmkv_bpf.h>

#include "xdp_packet.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int die(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "shmkv-xdp-get: ");
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
	return 2;
}

static const char *hint(int err)
{
	return err == EPERM || err == EACCES ? " (BPF needs root, or CAP_BPF and CAP_NET_ADMIN)"
					     : "";
}

/* The inner table's value size: the program reads SHMKV_BPF_VALUE_MAX bytes,
 * and the verifier refuses it when the export's values are shorter. */
static int check_sizes(int outer, const char *pin)
{
	uint32_t zero = 0, id = 0;
	if (bpf_map_lookup_elem(outer, &zero, &id) || !id)
		return die("%s: nothing exported yet%s", pin, "");
	int fd = bpf_map_get_fd_by_id(id);
	struct bpf_map_info info;
	uint32_t len = sizeof info;
	memset(&info, 0, sizeof info);
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
		return die("%s: cannot read the table: %s", pin, strerror(errno));
	close(fd);
	if (info.value_size < sizeof(struct shmkv_bpf_value)) {
		char a[96], b[96];
		snprintf(a, sizeof a, "%s exports values of at most %u bytes", pin,
			 info.value_size - SHMKV_BPF_VALUE_HDR);
		snprintf(b, sizeof b, "%u: export with --max-value %u, or rebuild with "
			 "-DSHMKV_BPF_VALUE_MAX=%u", SHMKV_BPF_VALUE_MAX, SHMKV_BPF_VALUE_MAX,
			 info.value_size - SHMKV_BPF_VALUE_HDR);
		return die("%s; this program was built for %s", a, b);
	}
	return 0;
}

int main(int argc, char **argv)
{
	char obj_default[PATH_MAX], pin[PATH_MAX] = "";
	const char *obj = NULL;
	int i = 1;
	for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (!strcmp(argv[i], "--obj"))
			obj = argv[i + 1];
		else if (!strcmp(argv[i], "--pin"))
			snprintf(pin, sizeof pin, "%s", argv[i + 1]);
		else
			return die("unknown option %s%s", argv[i], "");
	}
	if (argc - i != 3 || (strcmp(argv[i], "attach") && strcmp(argv[i], "query"))) {
		fprintf(stderr, "usage: shmkv-xdp-get [--obj FILE] [--pin PATH] attach CACHE IFACE\n"
				"       shmkv-xdp-get [--obj FILE] [--pin PATH] query CACHE KEY\n");
		return 2;
	}
	const char *verb = argv[i], *cache = argv[i + 1], *arg = argv[i + 2];
	if (!obj) {
		ssize_t n = readlink("/proc/self/exe", obj_default, sizeof obj_default - 32);
		if (n < 0)
			return die("/proc/self/exe: %s%s", strerror(errno), "");
		obj_default[n] = 0;
		snprintf(obj_default + strlen(dirname(obj_default)), 32, "/xdp_get.bpf.o");
		obj = obj_default;
	}
	if (!pin[0])
		snprintf(pin, sizeof pin, "/sys/fs/bpf/shmkv/%s", cache);

	int outer = bpf_obj_get(pin);
	if (outer < 0) {
		int e = errno;
		char why[200];
		snprintf(why, sizeof why, "%s%s", strerror(e), hint(e));
		return die(e == ENOENT ? "%s: %s (is the cache exported? shmctl bpf export CACHE)"
				       : "%s: %s", pin, why);
	}
	int rc = check_sizes(outer, pin);
	if (rc)
		return rc;
	libbpf_set_print(NULL); /* our own messages; the verifier's log is on failure below */
	struct bpf_object *o = bpf_object__open_file(obj, NULL);
	if (!o)
		return die("%s: %s", obj, strerror(errno));
	struct bpf_map *m = bpf_object__find_map_by_name(o, "table");
	if (!m || bpf_map__reuse_fd(m, outer))
		return die("%s: no map \"table\" to point at %s", obj, pin);
	struct bpf_program *p = bpf_object__find_program_by_name(o, "shmkv_xdp_get");
	if (!p)
		return die("%s: no program shmkv_xdp_get%s", obj, "");
	static char log[1 << 16];
	bpf_program__set_log_buf(p, log, sizeof log);
	if (bpf_object__load(o)) {
		int e = errno;
		fprintf(stderr, "%s", log);
		char why[200];
		snprintf(why, sizeof why, "%s%s", strerror(e), hint(e));
		return die("loading %s: %s", obj, why);
	}
	int prog = bpf_program__fd(p);

	if (!strcmp(verb, "query")) {
		unsigned char pkt[XDP_PACKET_MAX], out[XDP_PACKET_MAX];
		size_t klen = strlen(arg);
		size_t n = xdp_packet_get(pkt, sizeof pkt, arg, klen);
		if (!n)
			return die("key too long for one packet%s%s", "", "");
		LIBBPF_OPTS(bpf_test_run_opts, t, .data_in = pkt, .data_out = out,
			    .data_size_in = (uint32_t)n, .data_size_out = sizeof out, .repeat = 1);
		if (bpf_prog_test_run_opts(prog, &t))
			return die("BPF_PROG_TEST_RUN: %s%s", strerror(errno), hint(errno));
		const unsigned char *val;
		size_t vlen;
		int hit = xdp_packet_reply(out, t.data_size_out, t.retval, &val, &vlen);
		bpf_object__close(o);
		close(outer);
		if (hit < 0)
			return die("the program gave no reply (XDP action %s)%s",
				   t.retval == XDP_PASS ? "PASS" : "other", "");
		if (!hit) {
			printf("MISS\n");
			return 1;
		}
		printf("HIT ");
		for (size_t k = 0; k < vlen; k++)
			printf(val[k] >= 32 && val[k] < 127 && val[k] != '\\' ? "%c" : "\\x%02x",
			       val[k]);
		printf("\n");
		return 0;
	}

	unsigned ifindex = if_nametoindex(arg);
	if (!ifindex)
		return die("interface %s: %s", arg, strerror(errno));
	if (bpf_xdp_attach((int)ifindex, prog, 0, NULL))
		return die("attaching XDP to %s: %s", arg, strerror(errno));
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	fprintf(stderr, "shmkv-xdp-get: serving %s on %s (UDP port %d); ^C detaches\n", cache, arg,
		XDP_PACKET_PORT);
	while (!stop)
		pause();
	bpf_xdp_detach((int)ifindex, 0, NULL);
	bpf_object__close(o);
	close(outer);
	return 0;
}
