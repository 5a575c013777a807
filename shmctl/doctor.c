/* doctor.c - `shmctl doctor`: checks what shmkv needs from a host, each
 * finding with the command that fixes it; the exit code says whether
 * anything stops the loader serving (a failure), never for what only makes
 * it slower or narrower (a warning). Read-only: it changes nothing.
 *
 * Host paths go through $SHMKV_HOST_ROOT like hugepages.c's (a container
 * with the host's trees under it); the loader is asked over its socket. */
#include "doctor.h"

#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/io_uring.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "ctlsock.h"
#include "host.h"
#include "jv.h"
#include "main.h"
#include "topo.h"

enum level { OK, INFO, WARN, FAIL };
static const char *const level_name[] = {"ok", "info", "warn", "fail"};

struct finding {
	enum level level;
	char check[32];
	char what[512];
	char fix[512]; /* "" when there is nothing to run */
};

#define MAX_FINDINGS 64
static struct finding findings[MAX_FINDINGS];
static size_t nfindings;

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static void add(enum level level, const char *check, const char *fix, const char *fmt, ...)
{
	if (nfindings == MAX_FINDINGS)
		return;
	struct finding *f = &findings[nfindings++];
	f->level = level;
	snprintf(f->check, sizeof f->check, "%s", check);
	snprintf(f->fix, sizeof f->fix, "%s", fix ? fix : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->what, sizeof f->what, fmt, ap);
	va_end(ap);
}

/* Mounts of one type (up to max), as common/host.h reads them: decoded
 * directories and page sizes, the loader's view. */
static size_t mounts_of(const char *type, struct host_mount *out, size_t max)
{
	size_t n;
	return host_mounts(host_root_env(), type, out, max, &n) ? 0 : n;
}

static void check_hugepages(void)
{
	char dir[4096], why[512];
	host_path(dir, sizeof dir, host_root_env(), "/sys/kernel/mm/hugepages");
	struct host_pool pools[HOST_MAX_POOLS];
	size_t np;
	if (host_pools(dir, pools, HOST_MAX_POOLS, &np, why, sizeof why)) {
		add(WARN, "hugepages", NULL, "%s: no huge pages here; the loader uses shm "
		    "(memory=auto) and refuses memory=hugetlb caches", why);
		return;
	}
	struct host_mount m[8];
	size_t nm = mounts_of("hugetlbfs", m, 8);
	uint64_t dflt = host_default_hugepage_size(host_root_env());
	uint64_t reserved_total = 0;
	for (size_t k = 0; k < np; k++) {
		const struct host_pool *p = &pools[k];
		if (p->nr == 0)
			continue;
		char sz[32];
		host_size_name(p->page_size, sz, sizeof sz);
		reserved_total += p->nr;
		const char *mnt = NULL;
		for (size_t i = 0; i < nm && !mnt; i++)
			if (m[i].page_size == p->page_size)
				mnt = m[i].dir;
		if (!mnt) {
			char fix[256], mdir[64];
			snprintf(mdir, sizeof mdir, p->page_size == dflt ? "/dev/hugepages"
									 : "/dev/hugepages-%s", sz);
			snprintf(fix, sizeof fix, "mkdir -p %s && mount -t hugetlbfs -o pagesize=%s "
				 "hugetlbfs %s", mdir, sz, mdir);
			add(WARN, "hugepages", fix, "%llu reserved %s pages (%llu free) but no "
			    "hugetlbfs mount has that page size: the loader cannot use them "
			    "(caches load into shm; memory=hugetlb caches fail)",
			    (unsigned long long)p->nr, sz, (unsigned long long)p->free);
		} else {
			add(OK, "hugepages", NULL, "%llu %s pages reserved, %llu free, mounted on %s",
			    (unsigned long long)p->nr, sz, (unsigned long long)p->free, mnt);
		}
	}
	if (!reserved_total)
		add(WARN, "hugepages", "shmctl hugepages plan IMAGE... && shmctl hugepages reserve "
		    "--persist IMAGE...", "no huge pages reserved: caches load into shm "
		    "(memory=auto; more TLB misses) and memory=hugetlb caches fail");
}

static void check_memlock(void)
{
	struct rlimit rl;
	struct utsname u;
	int major = 0, minor = 0;
	if (uname(&u) == 0)
		sscanf(u.release, "%d.%d", &major, &minor);
	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
		return;
	bool old = major < 5 || (major == 5 && minor < 12);
	char lim[32];
	if (rl.rlim_cur == RLIM_INFINITY)
		snprintf(lim, sizeof lim, "unlimited");
	else
		snprintf(lim, sizeof lim, "%llu KiB", (unsigned long long)rl.rlim_cur >> 10);
	if (old && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (64u << 20))
		add(WARN, "memlock", "LimitMEMLOCK=infinity in the unit (systemctl edit "
		    "shmkv-loader), or ulimit -l unlimited",
		    "memlock limit %s on kernel %s: io_uring before 5.12 charges its rings to it",
		    lim, u.release);
	else
		add(OK, "memlock", NULL, "memlock limit %s (kernel %s%s)", lim, u.release,
		    old ? "" : ": io_uring is charged to the memory cgroup, not memlock");
}

static void check_io_uring(void)
{
	uint64_t disabled = 0;
	char dpath[4096];
	host_path(dpath, sizeof dpath, host_root_env(), "/proc/sys/kernel/io_uring_disabled");
	if (host_read_u64(dpath, &disabled) == 0 && disabled) {
		add(disabled == 2 ? WARN : INFO, "io_uring",
		    "sysctl -w kernel.io_uring_disabled=0 (persist in /etc/sysctl.d)",
		    "kernel.io_uring_disabled = %llu: %s; the loader reads with pread (slower)",
		    (unsigned long long)disabled, disabled == 2 ? "io_uring is off for everyone"
					    : "only root and kernel.io_uring_group may use it");
	}
	struct io_uring_params p;
	memset(&p, 0, sizeof p);
	long fd = syscall(__NR_io_uring_setup, 1, &p);
	if (fd >= 0) {
		close((int)fd);
		add(OK, "io_uring", NULL, "io_uring_setup works (for this user: %u)",
		    (unsigned)geteuid());
		return;
	}
	int e = errno;
	long seccomp = 0;
	char line[256], path[4096];
	snprintf(path, sizeof path, "/proc/self/status");
	FILE *f = fopen(path, "re");
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "Seccomp: %ld", &seccomp) == 1)
			break;
	if (f)
		fclose(f);
	if (e == ENOSYS)
		add(WARN, "io_uring", NULL, "io_uring_setup: ENOSYS: the kernel has no io_uring; the "
		    "loader reads with pread");
	else if (e == EPERM && seccomp == 2)
		add(WARN, "io_uring", "allow io_uring_setup, io_uring_enter and io_uring_register "
		    "in the seccomp profile (containers: --security-opt seccomp=...)",
		    "io_uring_setup: EPERM under a seccomp filter; the loader reads with pread");
	else
		add(WARN, "io_uring", e == EPERM ? "sysctl -w kernel.io_uring_disabled=0" : NULL,
		    "io_uring_setup: %s; the loader reads with pread", strerror(e));
}

/* Several nodes: the caches' placement is their numa= (shmkv.conf(5)); a
 * node whose huge page pool has nothing free makes replicate degrade and
 * node= on it fail, so it is said with the command that reserves per node. */
static void check_numa(void)
{
	char sys[4096], why[512];
	host_path(sys, sizeof sys, host_root_env(), "/sys");
	struct ntopo *t = malloc(sizeof *t);
	if (!t)
		return;
	if (ntopo_read(sys, t, why, sizeof why)) {
		add(WARN, "numa", NULL, "NUMA topology unreadable: %s", why);
		free(t);
		return;
	}
	if (t->n < 2) {
		add(OK, "numa", NULL, "1 NUMA node");
		free(t);
		return;
	}
	char list[128];
	add(INFO, "numa", NULL, "%u NUMA nodes (%s): a cache's numa= decides where its copies "
	    "live (none: the loader's node; replicate: one per node; see shmkv.conf(5))", t->n,
	    ntopo_list_name(t->online, list, sizeof list));
	/* the default huge page size: where the pools are, per node */
	uint64_t ps = 0;
	for (unsigned i = 0; i < t->n && !ps; i++)
		if (t->node[i].nhp)
			ps = t->node[i].hp[0].page_size;
	long long total_free = 0;
	for (unsigned i = 0; i < t->n; i++) {
		long long fr = ps ? ntopo_hp_free(&t->node[i], ps) : -1;
		total_free += fr > 0 ? fr : 0;
	}
	for (unsigned i = 0; ps && total_free > 0 && i < t->n; i++) {
		long long fr = ntopo_hp_free(&t->node[i], ps);
		if (fr <= 0)
			add(WARN, "numa",
			    "shmctl hugepages reserve --numa replicate IMAGE... (pages on every node)",
			    "node %d has no free %llu kB huge pages while others have %lld: "
			    "numa=replicate degrades to interleave, and a cache with numa = node=%d falls back or fails",
			    t->node[i].id, (unsigned long long)(ps >> 10), total_free, t->node[i].id);
	}
	free(t);
}

static void check_fs(const char *type, const char *dir, const char *why)
{
	struct host_mount m[4];
	size_t n = mounts_of(type, m, 4);
	if (n) {
		add(OK, type, NULL, "%s mounted on %s", type, m[0].dir);
		return;
	}
	char fix[256];
	snprintf(fix, sizeof fix, "mount -t %s %s %s", type, type, dir);
	add(WARN, type, fix, "no %s mount: %s", type, why);
}

/* A directory readers or the loader depend on: exists, a directory, not
 * writable by group or others. open_level: how bad a directory every user
 * may write is (the loader refuses it: FAIL where it then cannot serve, WARN
 * where it works around it). */
static void check_dir(const char *check, const char *path, const char *purpose,
		      bool need_exists, enum level open_level)
{
	struct stat st;
	char fix[1200];
	if (lstat(path, &st) != 0) {
		if (need_exists) {
			snprintf(fix, sizeof fix, "install -d -m 0755 -o shmkv -g shmkv %s", path);
			add(FAIL, check, fix, "%s (%s): %s", path, purpose, strerror(errno));
		}
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		add(FAIL, check, NULL, "%s (%s): not a directory (%s)", path, purpose,
		    S_ISLNK(st.st_mode) ? "a symbolic link" : "another file type");
		return;
	}
	struct passwd *pw = getpwuid(st.st_uid);
	struct group *gr = getgrgid(st.st_gid);
	char owner[128];
	snprintf(owner, sizeof owner, "%s:%s", pw ? pw->pw_name : "?", gr ? gr->gr_name : "?");
	if (st.st_mode & S_IWOTH) {
		snprintf(fix, sizeof fix, "chmod o-w %s", path);
		add(open_level, check, fix, "%s (%s) is writable by every user (mode %04o %s): the "
		    "loader refuses it%s", path, purpose, (unsigned)(st.st_mode & 07777), owner,
		    open_level == FAIL ? "" : " and uses a private one beside it, which readers "
		    "mounting it do not see");
		return;
	}
	add(OK, check, NULL, "%s (%s): mode %04o %s", path, purpose, (unsigned)(st.st_mode & 07777),
	    owner);
}

/* The group shmkv: what readers of other users join. Without it the loader
 * serves all the same, under its own group, so it is a warning. */
static void check_group(void)
{
	struct group *g = getgrnam("shmkv");
	if (!g) {
		add(WARN, "group", "groupadd --system shmkv, then usermod -aG shmkv USER for "
		    "each reader's user, and restart the loader (the packages' sysusers.d "
		    "does the first)",
		    "no group shmkv: the loader gives its root and segment directories its "
		    "own group, so only processes of its user or group can attach");
		return;
	}
	size_t n = 0;
	while (g->gr_mem && g->gr_mem[n])
		n++;
	add(OK, "group", NULL, "group shmkv (gid %u), %zu supplementary member%s",
	    (unsigned)g->gr_gid, n, n == 1 ? "" : "s");
}

/* A segment directory the running loader (uid loader_uid, -1 unknown) does
 * not own: it refuses it and uses a private DIR/shmkv.XXXXXX, which readers
 * that mount DIR/shmkv alone (a container's subPath) do not see. */
static void check_segment_owner(const char *path, long loader_uid)
{
	struct stat st;
	if (loader_uid < 0 || lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid == (uid_t)loader_uid)
		return;
	char fix[2600];
	if (snprintf(fix, sizeof fix, "look at what is in %s, remove it (rm -r %s) and restart "
		     "the loader", path, path) >= (int)sizeof fix)
		fix[0] = 0;
	add(WARN, "segments", fix, "%s is owned by uid %u, not by the loader's uid %ld: the "
	    "loader uses a private %s.XXXXXX instead, which readers mounting %s do not see",
	    path, (unsigned)st.st_uid, loader_uid, path, path);
}

static void check_segment_dirs(long loader_uid)
{
	struct host_mount m[8];
	size_t n = mounts_of("hugetlbfs", m, 8);
	char p[1100];
	check_dir("segments", "/dev/shm/shmkv", "shm segment directory", false, WARN);
	check_segment_owner("/dev/shm/shmkv", loader_uid);
	for (size_t i = 0; i < n; i++) {
		if (snprintf(p, sizeof p, "%s/shmkv", m[i].dir) >= (int)sizeof p)
			continue;
		check_dir("segments", p, "hugetlbfs segment directory", false, WARN);
		check_segment_owner(p, loader_uid);
	}
}

/* The uid of process pid (the loader), -1 if it cannot be read. */
static long pid_uid(uint64_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%llu/status", (unsigned long long)pid);
	FILE *f = fopen(path, "re");
	long uid = -1;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "Uid: %*d %ld", &uid) == 1)
			break;
	if (f)
		fclose(f);
	return uid;
}

/* The loader: ping, then list for caches whose last load failed. Returns
 * the loader's (effective) uid, -1 when it does not answer. */
static long check_loader(const char *root)
{
	char why[1024], fix[1200];
	jv *reply = NULL;
	const char *ping[] = {"ping"};
	int err = ctl_request(root, ping, 1, 5000, &reply, why, sizeof why);
	if (err) {
		snprintf(fix, sizeof fix, "systemctl start shmkv-loader (journalctl -u "
			 "shmkv-loader says why it stopped); not installed: shmkv-loader --root "
			 "%.900s --spool DIR", root);
		add(FAIL, "loader", fix, "%s", why);
		return -1;
	}
	uint64_t pid = 0;
	const char *version = "?", *spool = "?", *spool_error = NULL;
	jv_get_u64(reply, "pid", &pid);
	jv_get_str(reply, "version", &version);
	jv_get_str(reply, "spool", &spool);
	jv_get_str(reply, "spool_error", &spool_error);
	add(OK, "loader", NULL, "shmkv-loader %s, pid %" PRIu64 ", root %s", version, pid, root);
	long uid = pid_uid(pid);
	if (spool_error) {
		snprintf(fix, sizeof fix, "install -d -m 0755 -o shmkv -g shmkv %s", spool);
		add(FAIL, "spool", fix, "%s", spool_error);
	} else {
		check_dir("spool", spool, "the loader's spool", true, FAIL);
	}
	jv_free(reply);
	const char *list[] = {"list"};
	if (ctl_request(root, list, 1, 5000, &reply, why, sizeof why))
		return uid;
	const jv *caches = jv_get(reply, "caches");
	for (size_t i = 0; i < jv_size(caches); i++) {
		const jv *c = jv_item(caches, i);
		const char *name = "?", *last = NULL;
		jv_get_str(c, "name", &name);
		jv_get_str(c, "last_error", &last);
		if (!last)
			continue;
		bool failed = false;
		jv_get_bool(c, "failed", &failed);
		snprintf(fix, sizeof fix, "shmctl cache status %s", name);
		add(failed ? FAIL : WARN, "cache", fix, "cache %s: last load failed%s: %s", name,
		    failed ? " and nothing is published" : " (an older generation serves)", last);
	}
	jv_free(reply);
	return uid;
}

int doctor_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	print_help(
		"Usage: " BIN_NAME " [OPTIONS] doctor [check]\n"
		"       " BIN_NAME " doctor help\n"
		"\n"
		"       OPTIONS := { {-j|--json} [{-p|--pretty}] | {-r|--root} DIR | {-h|--help} }\n"
		"\n"
		"check    (the default) what shmkv needs from this host, each finding with the\n"
		"         command that fixes it: huge page pools and their hugetlbfs mounts,\n"
		"         the memlock limit, io_uring (kernel.io_uring_disabled, seccomp), NUMA,\n"
		"         tracefs and bpffs, the group shmkv, the root, spool and segment\n"
		"         directories, the loader (ping) and caches whose last load failed.\n"
		"         io_uring and memlock are checked for the user running doctor: run it\n"
		"         as the loader's user (or in its container) to see what the loader sees.\n"
		"         Changes nothing.\n"
		"\n"
		"Exit status: 0 the loader can serve (warnings allowed); 1 a check failed:\n"
		"             something stops the loader serving (it does not answer, its\n"
		"             root or spool is refused, a cache has nothing published);\n"
		"             2 usage error.\n");
	return 0;
}

int do_doctor_check(int argc, char **argv)
{
	static const struct option opts[] = {
		{"root", required_argument, NULL, 'r'},
		VERB_LONGOPTS,
		{NULL, 0, NULL, 0},
	};
	int c, rc;
	verb_getopt_reset();
	while ((c = getopt_long(argc, argv, "+" VERB_SHORTOPTS "r:", opts, NULL)) != -1) {
		if (c == 'r') {
			root_option = optarg;
			continue;
		}
		if ((rc = verb_common_opt(c, argv, doctor_help, "doctor")) >= 0)
			return rc;
	}
	if (optind != argc)
		return p_usage("doctor", "%s: unexpected argument '%s'", argv[0], argv[optind]);
	const char *root = shmctl_root();
	nfindings = 0;
	check_hugepages();
	check_memlock();
	check_io_uring();
	check_numa();
	check_fs("tracefs", "/sys/kernel/tracing", "uprobes and USDT probes (perf/) need it");
	check_fs("bpf", "/sys/fs/bpf", "pinned BPF programs and maps need it");
	check_group();
	check_dir("root", root, "control segments and control.sock", false, FAIL);
	long loader_uid = check_loader(root);
	check_segment_dirs(loader_uid);
	size_t fails = 0, warns = 0;
	for (size_t i = 0; i < nfindings; i++) {
		fails += findings[i].level == FAIL;
		warns += findings[i].level == WARN;
	}
	if (json_output) {
		json_obj_begin(&json_out, NULL);
		json_bool(&json_out, "ok", fails == 0);
		json_u64(&json_out, "failures", fails);
		json_u64(&json_out, "warnings", warns);
		json_arr_begin(&json_out, "findings");
		for (size_t i = 0; i < nfindings; i++) {
			json_obj_begin(&json_out, NULL);
			json_str(&json_out, "check", findings[i].check);
			json_str(&json_out, "level", level_name[findings[i].level]);
			json_str(&json_out, "what", findings[i].what);
			json_str(&json_out, "fix", findings[i].fix[0] ? findings[i].fix : NULL);
			json_obj_end(&json_out);
		}
		json_arr_end(&json_out);
		json_obj_end(&json_out);
	} else {
		for (size_t i = 0; i < nfindings; i++) {
			printf("%-4s  %-10s %s\n", level_name[findings[i].level], findings[i].check,
			       findings[i].what);
			if (findings[i].fix[0])
				printf("      %-10s fix: %s\n", "", findings[i].fix);
		}
		printf("%zu failure%s, %zu warning%s\n", fails, fails == 1 ? "" : "s", warns,
		       warns == 1 ? "" : "s");
	}
	return fails ? EXIT_NEGATIVE : EXIT_OK;
}

static const struct cmd cmds[] = {
	{"check", do_doctor_check},
	{"help", doctor_help},
	{NULL, NULL},
};

int do_doctor(int argc, char **argv)
{
	/* "shmctl doctor" alone runs the checks */
	if (argc < 2 || argv[1][0] == '-') {
		char *args[64];
		int n = 0;
		args[n++] = (char *)"check";
		for (int i = 1; i < argc && n < 63; i++)
			args[n++] = argv[i];
		args[n] = NULL;
		return do_doctor_check(n, args);
	}
	return cmd_select(cmds, argc - 1, argv + 1, doctor_help, "doctor");
}
