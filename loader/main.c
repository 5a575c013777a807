/* main.c - shmkv-loader: options, startup, the event loop, shutdown. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "diag.h"
#include "loader.h"
#include "log.h"
#include "metrics.h"
#include "server.h"
#include "spool.h"
#include "trustdir.h"
#include "worker.h"

#define TMPFS_MAGIC_ 0x01021994

/* the server's entries carry pointers instead (server_watch) */
enum { TAG_SIG = 1, TAG_SPOOL, TAG_DONE };

/* Command-line settings; they override the config file, also on SIGHUP. */
struct cli {
	const char *config, *root, *spool, *shm_dir, *hugetlb_dir, *memory, *queue_depth,
		*block_size, *io, *failed_expire;
	int foreground;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: shmkv-loader [--config FILE] [--root DIR] [--spool DIR] [--shm-dir DIR]\n"
		"                    [--hugetlb-dir DIR] [--memory auto|hugetlb|shm]\n"
		"                    [--queue-depth N] [--block-size SIZE]\n"
		"                    [--io auto|io_uring|pread] [--failed-expire DURATION]\n"
		"                    [--foreground]\n"
		"       shmkv-loader --help | --version\n"
		"Loads shmkv images into shared memory and publishes them to readers.\n"
		"Options given here override the config file. Without --foreground the loader\n"
		"detaches once it is ready (under systemd use --foreground, Type=notify).\n"
		"Defaults: root %s, shm-dir %s, queue depth %u, block size 4M, memory auto,\n"
		"io auto (io_uring, or pread where the kernel refuses io_uring), failed-expire 1h\n"
		"(a new cache whose loads all failed is forgotten then; 0: kept until drop).\n"
		"Control: ROOT/control.sock, see loader/README.md.\n",
		SHMKV_DEFAULT_ROOT, CONF_DEFAULT_SHM_DIR, CONF_DEFAULT_QUEUE_DEPTH);
}

static int abs_path(const char *in, char *out, size_t len, const char *what, char *why,
		    size_t why_len)
{
	char cwd[PATH_MAX];
	if (in[0] == '/') {
		if (strlen(in) >= len)
			return diag_fail(-ENAMETOOLONG, why, why_len, "%s too long", what);
		snprintf(out, len, "%s", in);
		return 0;
	}
	if (!getcwd(cwd, sizeof cwd) || (size_t)snprintf(out, len, "%s/%s", cwd, in) >= len)
		return diag_fail(-ENAMETOOLONG, why, why_len, "%s: cannot make it absolute", what);
	return 0;
}

/* Segment paths are compared with what /proc/PID/maps shows: canonical.
 * shm_dir and a hugetlbfs mount are usually sticky and writable by all: the
 * loader uses only its own directory inside (segment.c), and every
 * directory above must be trusted (trustdir.h); checked again at each load. */
static int canon_dir(char *dir, size_t len, const char *what, int create, char *why,
		     size_t why_len)
{
	char real[PATH_MAX], w[400];
	int fd = tdir_open(dir, TDIR_STICKY_LAST | (create ? TDIR_CREATE : 0), real, sizeof real,
			   w, sizeof w);
	if (fd < 0)
		return diag_fail(fd, why, why_len, "%s %s: %s", what, dir, w);
	close(fd);
	if (strlen(real) >= len)
		return diag_fail(-ENAMETOOLONG, why, why_len, "%s %s: too long", what, real);
	snprintf(dir, len, "%s", real);
	return 0;
}

/* Defaults, then the config file, then the command line. */
static int build_conf(const struct cli *o, struct loader_conf **out, char *why, size_t why_len)
{
	struct loader_conf *c = calloc(1, sizeof *c);
	int err = 0;
	if (!c)
		return diag_fail(-ENOMEM, why, why_len, "out of memory");
	conf_defaults(c);
	if (o->config)
		err = conf_load(o->config, c, why, why_len);
	if (!err && o->root)
		err = abs_path(o->root, c->root, sizeof c->root, "--root", why, why_len);
	if (!err && o->spool)
		err = abs_path(o->spool, c->spool, sizeof c->spool, "--spool", why, why_len);
	if (!err && o->shm_dir)
		err = abs_path(o->shm_dir, c->shm_dir, sizeof c->shm_dir, "--shm-dir", why, why_len);
	if (!err && o->hugetlb_dir)
		err = abs_path(o->hugetlb_dir, c->hugetlb_dir, sizeof c->hugetlb_dir,
			       "--hugetlb-dir", why, why_len);
	if (!err && o->memory && conf_parse_policy(o->memory, &c->memory))
		err = diag_fail(-EINVAL, why, why_len, "--memory %s: expected auto, hugetlb or shm",
				  o->memory);
	if (!err && o->queue_depth && conf_parse_queue_depth(o->queue_depth, &c->queue_depth))
		err = diag_fail(-EINVAL, why, why_len, "--queue-depth %s: expected "
				  CONF_QUEUE_DEPTH_RANGE, o->queue_depth);
	if (!err && o->io && conf_parse_io(o->io, &c->io))
		err = diag_fail(-EINVAL, why, why_len, "--io %s: expected auto, io_uring or pread",
				  o->io);
	if (!err && o->block_size && conf_parse_block_size(o->block_size, &c->block_size))
		err = diag_fail(-EINVAL, why, why_len, "--block-size %s: expected "
				  CONF_BLOCK_SIZE_RANGE, o->block_size);
	if (!err && o->failed_expire && conf_parse_duration(o->failed_expire, &c->failed_expire_s))
		err = diag_fail(-EINVAL, why, why_len, "--failed-expire %s: expected a duration "
				  "like 90s, 15m, 1h or 0", o->failed_expire);
	if (!err) {
		conf_apply_defaults(c);
		err = conf_check(c, why, why_len);
	}
	if (!err)
		err = canon_dir(c->shm_dir, sizeof c->shm_dir, "shm_dir", 1, why, why_len);
	if (!err && c->hugetlb_dir[0])
		err = canon_dir(c->hugetlb_dir, sizeof c->hugetlb_dir, "hugetlb_dir", 0, why,
				why_len);
	if (err) {
		conf_free(c);
		return err;
	}
	*out = c;
	return 0;
}

/* ROOT and the spool: created if missing, trusted by their whole chain
 * (trustdir.h; a symbolic link only where root or we could have made it);
 * their canonical path to out. Returns a directory descriptor or -errno. */
static int prepare_dir(const char *in, char *out, const char *what, unsigned flags,
		       const char *hint, char *why, size_t why_len)
{
	char w[400];
	int fd = tdir_open(in, TDIR_CREATE | flags, out, PATH_MAX, w, sizeof w);
	if (fd < 0)
		return diag_fail(fd, why, why_len, "%s %s: %s%s", what, in, w,
				   fd == -EPERM ? hint : "");
	return fd;
}

/* Is pid gone or on its way out (PF_EXITING in /proc/PID/stat flags)? */
static int exiting(pid_t pid)
{
	char path[64], line[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = pid > 0 ? fopen(path, "re") : NULL;
	if (!f)
		return pid > 0;
	int got = fgets(line, sizeof line, f) != NULL;
	fclose(f);
	const char *p = got ? strrchr(line, ')') : NULL; /* comm may hold spaces */
	char state;
	unsigned long flags;
	/* ") S ppid pgrp session tty_nr tpgid flags" */
	if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", &state, &flags) != 2)
		return 0;
	return state == 'Z' || state == 'X' || (flags & 0x4); /* PF_EXITING */
}

/* One loader per root: ROOT/loader.lock, flock'd for the process lifetime. */
static int lock_root(struct loader *L, char *why, size_t why_len)
{
	char path[PATH_MAX + 16], buf[32] = "";
	snprintf(path, sizeof path, "%s/loader.lock", L->root);
	L->lock_fd = openat(L->root_fd, "loader.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
			    0644);
	if (L->lock_fd < 0)
		return diag_fail(-errno, why, why_len, "%s: %s", path, strerror(errno));
	/* a loader killed a moment ago holds the lock until its exit is over
	 * (in-flight reads, a big mapping to tear down): wait for that, not for
	 * a live one */
	for (int tries = 0; flock(L->lock_fd, LOCK_EX | LOCK_NB) != 0; tries++) {
		int err = -errno;
		ssize_t n = pread(L->lock_fd, buf, sizeof buf - 1, 0);
		buf[n > 0 ? n : 0] = 0;
		buf[strcspn(buf, "\n")] = 0;
		if (err != -EWOULDBLOCK)
			return diag_fail(err, why, why_len, "flock %s: %s", path, strerror(-err));
		if (!exiting((pid_t)atoi(buf)) || tries == 500)
			return diag_fail(-EBUSY, why, why_len,
					   "another shmkv-loader (pid %s) serves root %s", buf, L->root);
		usleep(20000);
	}
	int n = snprintf(buf, sizeof buf, "%d\n", (int)getpid());
	if (ftruncate(L->lock_fd, 0) != 0 || pwrite(L->lock_fd, buf, (size_t)n, 0) != n)
		log_warn("%s: cannot write the pid", path);
	return 0;
}

/* Detaches; the parent exits once the child reports ready (0) or fails. */
static int daemonize(int *ready_fd)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		char b = 1;
		close(p[1]);
		ssize_t n = read(p[0], &b, 1);
		_exit(n == 1 && b == 0 ? 0 : 1);
	}
	close(p[0]);
	setsid();
	int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (nul >= 0) {
		dup2(nul, STDIN_FILENO);
		close(nul);
	}
	*ready_fd = p[1];
	return 0;
}

static int add_fd(struct loader *L, int fd, uint64_t tag)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag};
	return epoll_ctl(L->ep_fd, EPOLL_CTL_ADD, fd, &ev);
}

static int startup(struct loader *L, struct loader_conf *conf, char *why, size_t why_len)
{
	int err;
	L->pid = getpid();
	struct stat rst;
	int fresh = lstat(conf->root, &rst) != 0 && errno == ENOENT;
	L->root_fd = prepare_dir(conf->root, L->root, "root", 0,
				 " (root must be owned by the loader's user or root and writable by "
				 "no one else, and so must every directory above it)", why, why_len);
	if (L->root_fd < 0)
		return L->root_fd;
	/* a root made here gets what systemd's RuntimeDirectoryMode=0750 gives:
	 * the loader's group may enter it (the socket, the control segments),
	 * other users may not (a loader started by hand as root, too) */
	seg_set_dir_group(conf->gid);
	if (fresh && (fchown(L->root_fd, (uid_t)-1, seg_dir_group()) != 0 ||
		      fchmod(L->root_fd, 0750) != 0))
		log_warn("root %s: set group and mode 0750: %s", L->root, strerror(errno));
	int sfd = prepare_dir(conf->spool, L->spool, "spool", TDIR_GROUP_LAST,
			      " (whoever can write the spool publishes: a spool every user can write "
			      "lets every local user publish; make it 0755, or 0775 with a group of "
			      "producers, owned by root or the loader's user, under directories "
			      "only they can write)", why, why_len);
	if (sfd < 0)
		return sfd;
	close(sfd); /* watched by inotify; checked again whenever it comes back */
	if (conf->durable_dir[0]) {
		L->durable_fd = prepare_dir(conf->durable_dir, L->durable, "durable_dir", 0,
					    " (the log of changes replayed at start must be the "
					    "loader's: owned by it or root, writable by no one else, "
					    "and so every directory above it)", why, why_len);
		if (L->durable_fd < 0)
			return L->durable_fd;
	}
	snprintf(conf->root, sizeof conf->root, "%s", L->root);
	snprintf(conf->spool, sizeof conf->spool, "%s", L->spool);
	if ((err = lock_root(L, why, why_len)))
		return err;
	seg_prefix(L->root, L->prefix, sizeof L->prefix);
	struct statfs sf;
	if (statfs(conf->shm_dir, &sf) != 0)
		return diag_fail(-errno, why, why_len, "shm_dir %s: %s", conf->shm_dir,
				   strerror(errno));
	if ((unsigned long)sf.f_type != TMPFS_MAGIC_)
		log_warn("shm_dir %s is not a tmpfs: segments there live on disk", conf->shm_dir);
	L->conf = conf;
	log_info("starting root=%s spool=%s shm_dir=%s prefix=%s queue_depth=%u block_size=%llu "
		 "io=%s config=%s", L->root, L->spool, conf->shm_dir, L->prefix, conf->queue_depth,
		 (unsigned long long)conf->block_size, conf_io_name(conf->io),
		 L->config_path[0] ? L->config_path : "none");
	if ((err = adopt_all(L, why, why_len)))
		return err;

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	/* blocked before the worker starts, so that it inherits the mask */
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	L->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (L->sig_fd < 0)
		return diag_fail(-errno, why, why_len, "signalfd: %s", strerror(errno));
	if ((err = spool_open(L, why, why_len)) || (err = server_open(L, why, why_len)) ||
	    (err = worker_start(L, why, why_len)))
		return err;
	L->ep_fd = epoll_create1(EPOLL_CLOEXEC);
	if (L->ep_fd < 0 || add_fd(L, L->sig_fd, TAG_SIG) || add_fd(L, L->spool_fd, TAG_SPOOL) ||
	    server_watch(L) || add_fd(L, L->done_fd, TAG_DONE))
		return diag_fail(-errno, why, why_len, "epoll: %s", strerror(errno));
	worker_push(L, job_new(JOB_START, NULL));
	spool_scan(L);
	return 0;
}

static void reload_config(struct loader *L, const struct cli *o)
{
	char why[600];
	struct loader_conf *c;
	if (!o->config) {
		log_info("SIGHUP: no config file to reload");
		return;
	}
	if (build_conf(o, &c, why, sizeof why)) {
		log_err("config not reloaded, the old one stays: %s", why);
		notify_status("config reload failed: %s", why);
		return;
	}
	struct job *j = job_new(JOB_CONFIG, NULL);
	if (!j) {
		conf_free(c);
		return;
	}
	j->conf = c;
	worker_push(L, j);
}

/* Returns 1 when the loader should stop. */
static int on_signal(struct loader *L, const struct cli *o)
{
	struct signalfd_siginfo si;
	int stop = 0;
	while (read(L->sig_fd, &si, sizeof si) == sizeof si) {
		if (si.ssi_signo == SIGHUP)
			reload_config(L, o);
		else {
			log_info("signal %s: stopping", si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
			stop = 1;
		}
	}
	return stop;
}

static void loop(struct loader *L, const struct cli *o)
{
	for (;;) {
		struct epoll_event ev[32];
		/* a timeout while the spool directory is gone (spool.c), and for
		 * the metrics file's periodic write (metrics.c) */
		int t = spool_wait_ms(L), tm = metrics_wait_ms(L);
		if (tm >= 0 && (t < 0 || tm < t))
			t = tm;
		int n = epoll_wait(L->ep_fd, ev, 32, t);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_err("epoll_wait: %s", strerror(errno));
			return;
		}
		int stop = 0;
		for (int i = 0; i < n; i++) {
			switch (ev[i].data.u64) {
			case TAG_SIG:
				stop |= on_signal(L, o);
				break;
			case TAG_SPOOL:
				spool_event(L);
				break;
			case TAG_DONE:
				for (struct done *d = worker_take_done(L), *nx; d; d = nx) {
					nx = d->next;
					server_deliver(L, d);
					free(d);
				}
				break;
			default:
				server_event(L, ev[i].data.ptr, ev[i].events);
				break;
			}
		}
		server_reap();
		spool_tick(L);
		metrics_tick(L, 0);
		if (stop)
			return;
	}
}

static void shutdown_(struct loader *L)
{
	notify_raw("STOPPING=1");
	worker_stop(L);
	for (struct done *d = worker_take_done(L), *nx; d; d = nx) {
		nx = d->next;
		server_deliver(L, d);
		free(d);
	}
	server_close(L);
	metrics_stop(L);
	for (size_t i = 0; i < L->ncaches; i++)
		cache_free(L->caches[i]); /* the files stay: readers keep serving */
	free(L->caches);
	conf_free(L->conf);
	log_info("stopped: control segments and segments stay for readers and the next loader");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"root", required_argument, NULL, 'r'},
		{"spool", required_argument, NULL, 's'},
		{"shm-dir", required_argument, NULL, 'm'},
		{"hugetlb-dir", required_argument, NULL, 'H'},
		{"memory", required_argument, NULL, 'M'},
		{"queue-depth", required_argument, NULL, 'q'},
		{"block-size", required_argument, NULL, 'b'},
		{"io", required_argument, NULL, 'I'},
		{"failed-expire", required_argument, NULL, 'E'},
		{"foreground", no_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct cli o;
	memset(&o, 0, sizeof o);
	int ch;
	while ((ch = getopt_long(argc, argv, "c:r:s:fhV", opts, NULL)) != -1) {
		switch (ch) {
		case 'c': o.config = optarg; break;
		case 'r': o.root = optarg; break;
		case 's': o.spool = optarg; break;
		case 'm': o.shm_dir = optarg; break;
		case 'H': o.hugetlb_dir = optarg; break;
		case 'M': o.memory = optarg; break;
		case 'q': o.queue_depth = optarg; break;
		case 'b': o.block_size = optarg; break;
		case 'I': o.io = optarg; break;
		case 'E': o.failed_expire = optarg; break;
		case 'f': o.foreground = 1; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("shmkv-loader %s\n", LOADER_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	log_init();
	static struct loader L;
	char why[700];
	struct loader_conf *conf;
	L.lock_fd = L.sig_fd = L.spool_fd = L.listen_fd = L.ep_fd = L.done_fd = L.root_fd = -1;
	L.durable_fd = -1;
	pthread_mutex_init(&L.lock, NULL);
	pthread_mutex_init(&L.qlock, NULL);
	pthread_condattr_t ca; /* the worker's timed waits (failed_expire) are monotonic */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&L.qcond, &ca);
	pthread_condattr_destroy(&ca);
	char cfg[PATH_MAX];
	if (o.config) {
		if (!realpath(o.config, cfg)) {
			log_err("config file %s: %s", o.config, strerror(errno));
			return 1;
		}
		o.config = cfg;
		snprintf(L.config_path, sizeof L.config_path, "%s", cfg);
	}
	if (build_conf(&o, &conf, why, sizeof why)) {
		log_err("%s", why);
		return 1;
	}
	int ready_fd = -1;
	if (!o.foreground && daemonize(&ready_fd) != 0) {
		log_err("fork: %s", strerror(errno));
		return 1;
	}
	if (startup(&L, conf, why, sizeof why)) {
		log_err("%s", why);
		if (L.conf != conf) /* refused before startup took it (a directory's check) */
			conf_free(conf);
		return 1;
	}
	log_info("ready pid=%d socket=%s/control.sock", (int)L.pid, L.root);
	notify_raw("READY=1");
	pthread_mutex_lock(&L.lock); /* the worker runs already and may add caches */
	size_t ncaches = L.ncaches;
	pthread_mutex_unlock(&L.lock);
	notify_status("ready, %zu caches", ncaches);
	if (ready_fd >= 0) {
		char ok = 0;
		ssize_t w = write(ready_fd, &ok, 1);
		(void)w;
		close(ready_fd);
		if (chdir("/") != 0)
			log_warn("chdir /: %s", strerror(errno));
	}
	loop(&L, &o);
	shutdown_(&L);
	return 0;
}
