/* hugepages.c - the `hugepages` object: how many huge pages of which size
 * images need (plan), and setting the kernel's pools to that (reserve), with
 * the hugetlbfs mount and the sysctl.d line that make it last.
 *
 * The host's state is read from /sys/kernel/mm/hugepages, /proc/meminfo and
 * /proc/mounts; $SHMKV_HOST_ROOT, when set, is a directory that stands for
 * "/" in those paths and in /etc/sysctl.d (a container that has the host's
 * /sys, /proc and /etc under /host; the tests' fake host). */
#include "hugepages.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <shmkv.h>

#include "cache.h"
#include "host.h"
#include "hugepages_numa.h"
#include "main.h"
#include "progress.h"

#define MAX_SIZES 8
#define SYSCTL_FILE "60-shmkv-hugepages.conf"

struct pool {
	uint64_t page_size; /* bytes */
	uint64_t total, free, resv, surplus;
	char mount[1024]; /* a hugetlbfs mount with this page size, or "" */
};

/* The hugetlbfs mounts (common/host.h reads them as the loader does): the
 * first with each pool's page size becomes the pool's mount. */
static void find_mounts(struct pool *pools, size_t n)
{
	struct host_mount *m = malloc(64 * sizeof *m);
	size_t nm = 0;
	if (!m || host_mounts(host_root_env(), "hugetlbfs", m, 64, &nm))
		nm = 0;
	for (size_t k = 0; k < nm; k++)
		for (size_t i = 0; i < n; i++)
			if (pools[i].page_size == m[k].page_size && !pools[i].mount[0])
				snprintf(pools[i].mount, sizeof pools[i].mount, "%s", m[k].dir);
	free(m);
}

/* The kernel's huge page pools, smallest page size first. Returns how many,
 * or -1 after an error (printed). */
static int read_pools(struct pool *pools)
{
	char dir[4096], why[512];
	struct host_pool hp[MAX_SIZES];
	size_t n;
	host_path(dir, sizeof dir, host_root_env(), "/sys/kernel/mm/hugepages");
	int err = host_pools(dir, hp, MAX_SIZES, &n, why, sizeof why);
	if (err == -ENOENT) {
		p_err("%s (no huge page support in this kernel?)", why);
		return -1;
	}
	if (err) {
		p_err("%s", why);
		return -1;
	}
	if (n == 0) {
		p_err("%s: no hugepages-*kB pool (no huge page support in this kernel?)", dir);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		pools[i] = (struct pool){.page_size = hp[i].page_size, .total = hp[i].nr,
					 .free = hp[i].free, .resv = hp[i].resv,
					 .surplus = hp[i].surplus};
	find_mounts(pools, n);
	return (int)n;
}

/* The image size from a checked header: never blocks, never follows the
 * file beyond its first 4096 bytes. 0, or EXIT_USAGE after an error. */
static int image_size(const char *path, uint64_t *out)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return p_err("%s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return p_err("%s: fstat: %s", path, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return p_err("%s: not a regular file (%s)", path, shmkv_file_kind(st.st_mode));
	}
	unsigned char hdr[SHMKV_HEADER_SIZE];
	ssize_t n = pread(fd, hdr, sizeof hdr, 0);
	int e = errno;
	close(fd);
	if (n < 0)
		return p_err("%s: read: %s", path, strerror(e));
	if ((size_t)n < sizeof hdr)
		return p_err("%s: %zd bytes: too short for a shmkv image header (%d bytes)", path,
			     n, SHMKV_HEADER_SIZE);
	char why[512];
	int err = shmkv_header_check(hdr, (uint64_t)st.st_size, why, sizeof why);
	if (err)
		return p_err("%s: %s", path, why);
	*out = ((const shmkv_image_header *)(const void *)hdr)->file_size;
	return 0;
}

int hugepages_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	print_help(
		"Usage: " BIN_NAME " [OPTIONS] hugepages { COMMAND | help }\n"
		"       " BIN_NAME " hugepages plan [--copies N] [--numa POLICY] IMAGE...\n"
		"       " BIN_NAME " hugepages reserve [--page-size SIZE] [--copies N] [--persist]\n"
		"                                [--no-mount] { PAGES | IMAGE... }\n"
		"       " BIN_NAME " hugepages reserve --numa POLICY [--page-size SIZE] [--copies N]\n"
		"                                [--no-mount] IMAGE...\n"
		"       " BIN_NAME " hugepages help\n"
		"\n"
		"       COMMAND := { plan | reserve }\n"
		"       OPTIONS := { {-j|--json} [{-p|--pretty}] | {-h|--help} }\n"
		"\n"
		"plan     pages of each size the images need (each rounded up to whole\n"
		"         pages, times --copies: 2 by default, the published generation\n"
		"         and the one loading next to it; 3 keeps the rollback copy too),\n"
		"         against the kernel's pools, and the command that reserves them\n"
		"reserve  set the pool of SIZE (default: the kernel's default huge page\n"
		"         size) to PAGES, or to what the images need; checks what the\n"
		"         kernel gave; mounts hugetlbfs for that size if no mount has it\n"
		"         (/dev/hugepages, or /dev/hugepages-SIZE; --no-mount: not);\n"
		"         --persist: vm.nr_hugepages in /etc/sysctl.d/" SYSCTL_FILE "\n"
		"         (default page size only; other sizes need the kernel command\n"
		"         line, which is printed)\n"
		"--numa POLICY  (node=N, interleave[=NODES], replicate[=NODES], local=CPUS,\n"
		"         as numa= in shmkv.conf): plan says the pages each NUMA node needs\n"
		"         (the loader's own placement plan) against each node's pool, and\n"
		"         reserve sets each node's pool to that\n"
		"\n"
		"Exit status: 0 ok (plan: the pools hold what the images need);\n"
		"             1 plan: pages are short; reserve: the kernel gave fewer pages;\n"
		"             2 usage or I/O error, not a shmkv image, not root.\n");
	return 0;
}

struct plan_opts {
	const char *numa;   /* --numa POLICY: per node; NULL: the whole pool */
	uint64_t copies;
	uint64_t page_size; /* reserve: 0 = the default size */
	bool persist, no_mount;
};

static int parse_opts(int argc, char **argv, bool reserve, struct plan_opts *o)
{
	static const struct option opts[] = {
		{"copies", required_argument, NULL, 'c'},
		{"page-size", required_argument, NULL, 's'},
		{"persist", no_argument, NULL, 'P'},
		{"no-mount", no_argument, NULL, 'M'},
		{"numa", required_argument, NULL, 'N'},
		VERB_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	memset(o, 0, sizeof *o);
	o->copies = 2;
	int c, rc;
	unsigned long long v;
	verb_getopt_reset();
	while ((c = getopt_long(argc, argv, "+" VERB_SHORTOPTS, opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			if (!parse_u64(optarg, &v) || v < 1 || v > 16)
				return p_usage("hugepages", "--copies %s: expected 1..16", optarg);
			o->copies = v;
			continue;
		case 's':
			if (!reserve)
				return p_usage("hugepages", "--page-size: only for reserve");
			if (host_parse_size(optarg, &o->page_size) || !o->page_size)
				return p_usage("hugepages", "--page-size %s: expected a size such as "
					       "2M or 1G", optarg);
			continue;
		case 'N':
			o->numa = optarg;
			continue;
		case 'P':
		case 'M':
			if (!reserve)
				return p_usage("hugepages", "%s: only for reserve",
					       c == 'P' ? "--persist" : "--no-mount");
			*(c == 'P' ? &o->persist : &o->no_mount) = true;
			continue;
		default:
			if ((rc = verb_common_opt(c, argv, hugepages_help, "hugepages")) >= 0)
				return rc;
		}
	}
	if (optind >= argc)
		return p_usage("hugepages", "%s: expected %s", argv[0],
			       reserve ? "PAGES or IMAGE..." : "IMAGE...");
	return -1;
}

/* The pages each pool needs for the images argv[first..argc); sizes (NULL:
 * not wanted): each image's size. */
static int images_need(int argc, char **argv, int first, const struct pool *pools, int np,
		       uint64_t copies, uint64_t *need, uint64_t *bytes, uint64_t *sizes)
{
	for (int i = 0; i < np; i++)
		need[i] = 0;
	*bytes = 0;
	for (int a = first; a < argc; a++) {
		uint64_t size;
		int rc = image_size(argv[a], &size);
		if (rc)
			return rc;
		if (sizes)
			sizes[a - first] = size;
		*bytes += size;
		for (int i = 0; i < np; i++)
			need[i] += (size + pools[i].page_size - 1) / pools[i].page_size * copies;
	}
	return 0;
}

static uint64_t short_of(const struct pool *p, uint64_t need)
{
	return need > p->free ? need - p->free : 0;
}

static int plan_print(const struct plan_opts *po, const struct pool *pools, int np,
		      const uint64_t *need, uint64_t bytes, int nimages, uint64_t dflt, bool enough,
		      const struct ntopo *t, const uint64_t *nneed, char **images);

int do_hugepages_plan(int argc, char **argv)
{
	struct plan_opts o;
	int rc = parse_opts(argc, argv, false, &o);
	if (rc >= 0)
		return rc;
	struct pool pools[MAX_SIZES];
	int np = read_pools(pools);
	if (np < 0)
		return EXIT_USAGE;
	uint64_t need[MAX_SIZES], bytes, sizes[argc - optind];
	if ((rc = images_need(argc, argv, optind, pools, np, o.copies, need, &bytes, sizes)))
		return rc;
	uint64_t dflt = host_default_hugepage_size(host_root_env());
	/* enough: some size has the pages free already */
	bool enough = false;
	for (int i = 0; i < np; i++)
		enough |= short_of(&pools[i], need[i]) == 0;
	/* --numa: the default size, per node; enough only when every node is */
	uint64_t nneed[NTOPO_MAX_NODES];
	struct ntopo *t = NULL;
	if (o.numa) {
		if (!(t = malloc(sizeof *t)))
			return p_err("out of memory");
		if ((rc = numa_need(o.numa, dflt, sizes, (size_t)(argc - optind), o.copies, t,
				    nneed))) {
			free(t);
			return rc;
		}
		enough = true;
		for (unsigned i = 0; i < t->n; i++) {
			uint64_t nr, fr;
			numa_pool(t, t->node[i].id, dflt, &nr, &fr);
			enough &= nneed[t->node[i].id] <= fr;
		}
	}
	rc = plan_print(&o, pools, np, need, bytes, argc - optind, dflt, enough, t, nneed,
			argv + optind);
	free(t);
	return rc;
}

/* Prints the plan (-j: one object). Returns EXIT_OK when enough, else EXIT_NEGATIVE. */
static int plan_print(const struct plan_opts *po, const struct pool *pools, int np,
		      const uint64_t *need, uint64_t bytes, int nimages, uint64_t dflt, bool enough,
		      const struct ntopo *t, const uint64_t *nneed, char **images)
{
	const struct plan_opts o = *po;
	char sz[32], h[64];
	if (json_output) {
		json_obj_begin(&json_out, NULL);
		json_u64(&json_out, "images", (uint64_t)nimages);
		json_u64(&json_out, "image_bytes", bytes);
		json_u64(&json_out, "copies", o.copies);
		json_bool(&json_out, "enough", enough);
		json_arr_begin(&json_out, "pools");
		for (int i = 0; i < np; i++) {
			host_size_name(pools[i].page_size, sz, sizeof sz);
			json_obj_begin(&json_out, NULL);
			json_str(&json_out, "page_size", sz);
			json_u64(&json_out, "page_bytes", pools[i].page_size);
			json_bool(&json_out, "default", pools[i].page_size == dflt);
			json_u64(&json_out, "pages_needed", need[i]);
			json_u64(&json_out, "total", pools[i].total);
			json_u64(&json_out, "free", pools[i].free);
			json_u64(&json_out, "reserved", pools[i].resv);
			json_u64(&json_out, "surplus", pools[i].surplus);
			json_u64(&json_out, "short", short_of(&pools[i], need[i]));
			json_str(&json_out, "mount", pools[i].mount[0] ? pools[i].mount : NULL);
			json_obj_end(&json_out);
		}
		json_arr_end(&json_out);
		if (t) {
			host_size_name(dflt, sz, sizeof sz);
			json_str(&json_out, "numa", o.numa);
			json_str(&json_out, "node_page_size", sz);
			json_arr_begin(&json_out, "nodes");
			for (unsigned i = 0; i < t->n; i++) {
				uint64_t nr, fr;
				int id = t->node[i].id;
				numa_pool(t, id, dflt, &nr, &fr);
				json_obj_begin(&json_out, NULL);
				json_u64(&json_out, "node", (uint64_t)id);
				json_u64(&json_out, "pages_needed", nneed[id]);
				json_u64(&json_out, "total", nr);
				json_u64(&json_out, "free", fr);
				json_u64(&json_out, "short", nneed[id] > fr ? nneed[id] - fr : 0);
				json_obj_end(&json_out);
			}
			json_arr_end(&json_out);
		}
		json_obj_end(&json_out);
		return enough ? EXIT_OK : EXIT_NEGATIVE;
	}
	printf("%d image%s, %s, %" PRIu64 " cop%s each\n", nimages, nimages == 1 ? "" : "s", fmt_bytes(bytes, h, sizeof h), o.copies,
	       o.copies == 1 ? "y" : "ies");
	printf("%-6s %12s %10s %10s %10s  %s\n", "size", "pages needed", "total", "free", "short",
	       "mount");
	for (int i = 0; i < np; i++) {
		host_size_name(pools[i].page_size, sz, sizeof sz);
		printf("%-6s %12" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64 "  %s%s\n", sz,
		       need[i], pools[i].total, pools[i].free, short_of(&pools[i], need[i]),
		       pools[i].mount[0] ? pools[i].mount : "(no hugetlbfs mount)",
		       pools[i].page_size == dflt ? "  [default size]" : "");
	}
	if (t) {
		host_size_name(dflt, sz, sizeof sz);
		printf("per node, %s pages, numa=%s:\n%-6s %12s %10s %10s %10s\n", sz, o.numa, "node",
		       "pages needed", "total", "free", "short");
		for (unsigned i = 0; i < t->n; i++) {
			uint64_t nr, fr;
			int id = t->node[i].id;
			numa_pool(t, id, dflt, &nr, &fr);
			printf("%-6d %12" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64 "\n", id,
			       nneed[id], nr, fr, nneed[id] > fr ? nneed[id] - fr : 0);
		}
		if (enough) {
			printf("enough: every node's free %s pages hold its part\n", sz);
			return EXIT_OK;
		}
		printf("short: reserve with\n  %s hugepages reserve --numa %s --copies %" PRIu64, BIN_NAME,
		       o.numa, o.copies);
		for (int i = 0; i < nimages; i++)
			printf(" %s", images[i]);
		printf("\n");
		return EXIT_NEGATIVE;
	}
	if (enough) {
		printf("enough: the free pages of a pool above hold the images\n");
		return EXIT_OK;
	}
	for (int i = 0; i < np; i++) {
		if (pools[i].page_size != dflt)
			continue;
		host_size_name(pools[i].page_size, sz, sizeof sz);
		printf("short: reserve with\n  %s hugepages reserve --page-size %s --persist %" PRIu64
		       "\n", BIN_NAME, sz, pools[i].total + short_of(&pools[i], need[i]));
	}
	return EXIT_NEGATIVE;
}

/* Sets vm.nr_hugepages = pages in the sysctl.d snippet: the first
 * vm.nr_hugepages line (set or commented) becomes the setting, other lines
 * stay; written to a temporary file and renamed over the old one. */
static int persist(uint64_t pages, char *path, size_t path_len)
{
	char dir[4096];
	host_path(dir, sizeof dir, host_root_env(), "/etc/sysctl.d");
	snprintf(path, path_len, "%s/%s", dir, SYSCTL_FILE);
	char tmp[4200];
	snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, SYSCTL_FILE);
	FILE *in = fopen(path, "re");
	if (!in && errno != ENOENT)
		return p_err("%s: %s", path, strerror(errno));
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno;
		if (in)
			fclose(in);
		return p_err("%s: %s", tmp, strerror(e));
	}
	FILE *out = fdopen(fd, "w");
	bool done = false;
	char line[1024];
	if (!in)
		fprintf(out, "# huge pages for shmkv-loader, set by shmctl hugepages reserve "
			     "--persist; see shmctl(8)\n");
	while (in && fgets(line, sizeof line, in)) {
		const char *p = line + strspn(line, " \t;#");
		if (!strncmp(p, "vm.nr_hugepages", 15) && strchr(" \t=", p[15])) {
			if (!done)
				fprintf(out, "vm.nr_hugepages = %" PRIu64 "\n", pages);
			done = true;
			continue;
		}
		fputs(line, out);
	}
	if (!done)
		fprintf(out, "vm.nr_hugepages = %" PRIu64 "\n", pages);
	if (in)
		fclose(in);
	if (fflush(out) != 0 || fsync(fd) != 0 || fclose(out) != 0) {
		int e = errno;
		unlink(tmp);
		return p_err("%s: %s", tmp, strerror(e));
	}
	if (rename(tmp, path) != 0) {
		int e = errno;
		unlink(tmp);
		return p_err("rename %s to %s: %s", tmp, path, strerror(e));
	}
	return 0;
}

/* One write of the pool size; *got: what the kernel then has. */
static int write_pool_once(const char *path, uint64_t pages, uint64_t *got)
{
	char v[32];
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return p_err("%s: %s%s", path, strerror(errno),
			     errno == EACCES || errno == EROFS ? " (run as root, on the host)" : "");
	int n = snprintf(v, sizeof v, "%" PRIu64 "\n", pages);
	if (write(fd, v, (size_t)n) != n) {
		int e = errno;
		close(fd);
		return p_err("%s: write %" PRIu64 ": %s", path, pages, strerror(e));
	}
	close(fd);
	int err = host_read_u64(path, got);
	if (err)
		return p_err("%s: %s", path, strerror(-err));
	return 0;
}

/* Sets the pool to pages. Growing takes the kernel seconds to minutes for
 * hundreds of GB (it zeroes and often compacts memory), so it grows in up to
 * RESERVE_STEPS writes with a progress bar between them, and stops at the
 * first step the kernel cannot fill (more writes would only grind). */
#define RESERVE_STEPS 50u
/* The growth so far of every pool a reserve sets, for one progress bar. */
struct grow {
	struct progress bar;
	uint64_t done, total; /* pages added by the pools already set; pages to add */
};

/* Sets the pool file path (now from pages) to pages, growing in steps. */
static int grow_pool(const char *path, uint64_t from, uint64_t pages, uint64_t *got,
		     struct grow *g)
{
	if (pages <= from)
		return write_pool_once(path, pages, got);
	uint64_t step = (pages - from + RESERVE_STEPS - 1) / RESERVE_STEPS, at = from;
	int rc = 0;
	progress_update(&g->bar, "reserve", g->done, g->total);
	while (at < pages) {
		uint64_t want = pages - at > step ? at + step : pages;
		if ((rc = write_pool_once(path, want, got)))
			break;
		progress_update(&g->bar, "reserve", g->done + (*got > from ? *got - from : 0),
				g->total);
		if (*got < want)
			break;
		at = want;
	}
	g->done += pages - from; /* what was asked: a short pool is reported by the caller */
	return rc;
}

static int write_pool(const struct pool *p, uint64_t pages, uint64_t *got)
{
	char path[4600], dir[4096];
	host_path(dir, sizeof dir, host_root_env(), "/sys/kernel/mm/hugepages");
	snprintf(path, sizeof path, "%s/hugepages-%" PRIu64 "kB/nr_hugepages", dir,
		 p->page_size >> 10);
	struct grow g = {.total = pages > p->total ? pages - p->total : 0};
	progress_init(&g.bar);
	int rc = grow_pool(path, p->total, pages, got, &g);
	progress_clear(&g.bar);
	return rc;
}

/* --numa: sets each node's pool of page_size to what it needs (nodes without
 * a need stay as they are). got[node]: what the kernel then has. */
static int write_node_pools(const struct ntopo *t, uint64_t page_size,
			    const uint64_t need[NTOPO_MAX_NODES], uint64_t got[NTOPO_MAX_NODES])
{
	struct grow g = {.total = 0};
	for (unsigned i = 0; i < t->n; i++) {
		uint64_t nr, fr;
		numa_pool(t, t->node[i].id, page_size, &nr, &fr);
		got[t->node[i].id] = nr;
		g.total += need[t->node[i].id] > nr ? need[t->node[i].id] - nr : 0;
	}
	progress_init(&g.bar);
	int rc = 0;
	for (unsigned i = 0; i < t->n && !rc; i++) {
		int id = t->node[i].id;
		if (!need[id])
			continue;
		char path[4600], dir[4096];
		host_path(dir, sizeof dir, host_root_env(), "/sys/devices/system/node");
		snprintf(path, sizeof path, "%s/node%d/hugepages/hugepages-%" PRIu64 "kB/nr_hugepages",
			 dir, id, page_size >> 10);
		rc = grow_pool(path, got[id], need[id], &got[id], &g);
	}
	progress_clear(&g.bar);
	return rc;
}

static int mount_pool(struct pool *p, uint64_t dflt)
{
	char sz[32], mnt[1024], opts[64];
	host_size_name(p->page_size, sz, sizeof sz);
	if (p->page_size == dflt)
		snprintf(mnt, sizeof mnt, "%s/dev/hugepages", host_root_env());
	else
		snprintf(mnt, sizeof mnt, "%s/dev/hugepages-%s", host_root_env(), sz);
	snprintf(opts, sizeof opts, "pagesize=%s,mode=0755", sz);
	if (mkdir(mnt, 0755) != 0 && errno != EEXIST)
		return p_err("mkdir %s: %s", mnt, strerror(errno));
	if (mount("hugetlbfs", mnt, "hugetlbfs", MS_NOSUID | MS_NODEV, opts) != 0)
		return p_err("mount -t hugetlbfs -o %s hugetlbfs %s: %s", opts, mnt,
			     strerror(errno));
	snprintf(p->mount, sizeof p->mount, "%s", mnt);
	return 0;
}

/* reserve --numa POLICY IMAGE...: each node's pool of p's size set to its
 * part of the images (the plan of hugepages plan --numa). */
static int reserve_nodes(const struct plan_opts *o, struct pool *p, int nimages, char **images,
			 uint64_t dflt)
{
	char sz[32];
	host_size_name(p->page_size, sz, sizeof sz);
	if (o->persist)
		return p_usage("hugepages", "--persist with --numa: sysctl has no per-node pool; "
				  "run this command at boot (a oneshot unit before "
				  "shmkv-loader.service)");
	uint64_t sizes[nimages], need[NTOPO_MAX_NODES], got[NTOPO_MAX_NODES], before[NTOPO_MAX_NODES];
	for (int i = 0; i < nimages; i++) {
		unsigned long long v;
		if (parse_u64(images[i], &v) && access(images[i], F_OK) != 0)
			return p_usage("hugepages", "reserve --numa: IMAGE..., not PAGES (%s)", images[i]);
		int rc = image_size(images[i], &sizes[i]);
		if (rc)
			return rc;
	}
	struct ntopo *t = malloc(sizeof *t);
	if (!t)
		return p_err("out of memory");
	int rc = numa_need(o->numa, p->page_size, sizes, (size_t)nimages, o->copies, t, need);
	if (!rc) {
		for (unsigned i = 0; i < t->n; i++) {
			uint64_t fr;
			numa_pool(t, t->node[i].id, p->page_size, &before[t->node[i].id], &fr);
		}
		rc = write_node_pools(t, p->page_size, need, got);
	}
	int mounted = 0;
	if (!rc && !p->mount[0] && !o->no_mount) {
		if (!(rc = mount_pool(p, dflt)))
			mounted = 1;
	}
	if (rc) {
		free(t);
		return rc;
	}
	bool ok = true;
	for (unsigned i = 0; i < t->n; i++)
		ok &= got[t->node[i].id] >= need[t->node[i].id];
	if (json_output) {
		json_obj_begin(&json_out, NULL);
		json_str(&json_out, "page_size", sz);
		json_str(&json_out, "numa", o->numa);
		json_arr_begin(&json_out, "nodes");
		for (unsigned i = 0; i < t->n; i++) {
			int id = t->node[i].id;
			json_obj_begin(&json_out, NULL);
			json_u64(&json_out, "node", (uint64_t)id);
			json_u64(&json_out, "requested", need[id]);
			json_u64(&json_out, "before", before[id]);
			json_u64(&json_out, "total", need[id] ? got[id] : before[id]);
			json_bool(&json_out, "ok", got[id] >= need[id]);
			json_obj_end(&json_out);
		}
		json_arr_end(&json_out);
		json_bool(&json_out, "ok", ok);
		json_str(&json_out, "mount", p->mount[0] ? p->mount : NULL);
		json_bool(&json_out, "mounted", mounted);
		json_obj_end(&json_out);
	} else {
		for (unsigned i = 0; i < t->n; i++) {
			int id = t->node[i].id;
			if (need[id])
				printf("node %d: %s pool %" PRIu64 " pages (was %" PRIu64 ", asked %" PRIu64
				       ")\n", id, sz, got[id], before[id], need[id]);
		}
		if (mounted)
			printf("mounted hugetlbfs (pagesize=%s) on %s\n", sz, p->mount);
	}
	if (!ok) {
		fflush(stdout);
		for (unsigned i = 0; i < t->n; i++) {
			int id = t->node[i].id;
			if (got[id] < need[id])
				fprintf(stderr, "%s: node %d: the kernel gave %" PRIu64 " of %" PRIu64
						" %s pages (the node's memory is short or fragmented)\n",
					BIN_NAME, id, got[id], need[id], sz);
		}
	}
	free(t);
	return ok ? EXIT_OK : EXIT_NEGATIVE;
}

int do_hugepages_reserve(int argc, char **argv)
{
	struct plan_opts o;
	int rc = parse_opts(argc, argv, true, &o);
	if (rc >= 0)
		return rc;
	struct pool pools[MAX_SIZES];
	int np = read_pools(pools);
	if (np < 0)
		return EXIT_USAGE;
	uint64_t dflt = host_default_hugepage_size(host_root_env());
	uint64_t ps = o.page_size ? o.page_size : dflt;
	struct pool *p = NULL;
	for (int i = 0; i < np; i++)
		if (pools[i].page_size == ps)
			p = &pools[i];
	char sz[32], have[256] = "";
	if (!p) {
		for (int i = 0; i < np; i++) {
			host_size_name(pools[i].page_size, sz, sizeof sz);
			snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", i ? ", " : "",
				 sz);
		}
		host_size_name(ps, sz, sizeof sz);
		return p_err("no %s huge page pool in this kernel (it has %s)", sz, have);
	}
	host_size_name(ps, sz, sizeof sz);
	uint64_t pages, need[MAX_SIZES], bytes = 0, sizes[argc - optind];
	unsigned long long v;
	if (o.numa)
		return reserve_nodes(&o, p, argc - optind, argv + optind, dflt);
	if (argc - optind == 1 && parse_u64(argv[optind], &v)) {
		pages = v;
	} else {
		if ((rc = images_need(argc, argv, optind, pools, np, o.copies, need, &bytes, sizes)))
			return rc;
		pages = need[p - pools];
	}
	uint64_t before = p->total, got = 0;
	if ((rc = write_pool(p, pages, &got)))
		return rc;
	p->total = got;
	int mounted = 0;
	if (!p->mount[0] && !o.no_mount) {
		if ((rc = mount_pool(p, dflt)))
			return rc;
		mounted = 1;
	}
	char sysctl_path[4400] = "";
	bool persisted = false;
	if (o.persist && ps == dflt) {
		if ((rc = persist(pages, sysctl_path, sizeof sysctl_path)))
			return rc;
		persisted = true;
	}
	bool ok = got >= pages;
	if (json_output) {
		json_obj_begin(&json_out, NULL);
		json_str(&json_out, "page_size", sz);
		json_u64(&json_out, "requested", pages);
		json_u64(&json_out, "before", before);
		json_u64(&json_out, "total", got);
		json_bool(&json_out, "ok", ok);
		json_str(&json_out, "mount", p->mount[0] ? p->mount : NULL);
		json_bool(&json_out, "mounted", mounted);
		json_str(&json_out, "persisted", persisted ? sysctl_path : NULL);
		json_obj_end(&json_out);
	} else {
		printf("%s pool: %" PRIu64 " pages (was %" PRIu64 ", asked %" PRIu64 ")\n", sz, got,
		       before, pages);
		if (mounted)
			printf("mounted hugetlbfs (pagesize=%s) on %s\n", sz, p->mount);
		else if (!p->mount[0])
			printf("no hugetlbfs mount for %s pages: the loader cannot use them\n", sz);
		if (persisted)
			printf("persisted: vm.nr_hugepages = %" PRIu64 " in %s\n", pages, sysctl_path);
	}
	if (o.persist && ps != dflt)
		fprintf(stderr, "%s: %s pages cannot be set by sysctl: add \"hugepagesz=%s "
				"hugepages=%" PRIu64 "\" to the kernel command line\n",
			BIN_NAME, sz, sz, pages);
	if (!ok) {
		fflush(stdout);
		fprintf(stderr, "%s: the kernel gave %" PRIu64 " of %" PRIu64 " %s pages (memory "
				"short or fragmented): free memory (sync; echo 3 > "
				"/proc/sys/vm/drop_caches; echo 1 > /proc/sys/vm/compact_memory) and "
				"retry, or reserve at boot (kernel command line hugepagesz=%s "
				"hugepages=%" PRIu64 ")\n",
			BIN_NAME, got, pages, sz, sz, pages);
		return EXIT_NEGATIVE;
	}
	return EXIT_OK;
}

static const struct cmd cmds[] = {
	{"plan", do_hugepages_plan},
	{"reserve", do_hugepages_reserve},
	{"help", hugepages_help},
	{NULL, NULL},
};

int do_hugepages(int argc, char **argv)
{
	return cmd_select(cmds, argc - 1, argv + 1, hugepages_help, "hugepages");
}
