/* cache_readers.c - `cache readers NAME`: which processes map which
 * generation of a cache, from /proc/PID/maps (common/procmaps.h) and
 * /proc/PID/smaps. Needs no loader: segment files are named as
 * common/segname.h says, and the current ones are listed in ROOT/NAME.ctl. When
 * the loader answers, its status names the rollback segment's generation.
 * A mapping counts when it is a published copy (device and inode) or lies
 * in their directory on their device, never by its name alone. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "ctlsock.h"
#include "main.h"
#include "procmaps.h"
#include "segname.h"

enum map_state { MAP_CURRENT, MAP_ROLLBACK, MAP_OLD, MAP_DELETED, MAP_LOADING };

/* JSON "state"; plain shows "old (deleted)" for MAP_DELETED */
static const char *const state_names[] = {"current", "rollback", "old", "old", "loading"};

/* One segment file mapped by one process (its mappings summed). */
struct rmap {
	char path[PATH_MAX];
	enum map_state state;
	unsigned mappings;
	uint64_t start[8];   /* the first mappings' addresses, to find them in smaps */
	uint64_t rss, pss, hugetlb; /* bytes */
};

struct rproc {
	long pid;
	char comm[64];
	bool loader;
	struct rmap *maps;
	size_t n;
};

struct scan {
	char prefix[SHMKV_CACHE_NAME_MAX + 32]; /* "shmkv-RRRRRRRR-NAME-" */
	const shmkv_ctl *ctl;                    /* NULL: no control segment */
	/* identities of the published copies (stat), and the directory and
	 * device segments live in: a mapping elsewhere that only has a
	 * segment's name is not counted (ndirs 0: no ctl, names only) */
	uint64_t cur_dev[SHMKV_CTL_MAX_SEGMENTS], cur_ino[SHMKV_CTL_MAX_SEGMENTS];
	unsigned ncur;
	char dirs[SHMKV_CTL_MAX_SEGMENTS][SHMKV_CTL_PATH_MAX];
	uint64_t dir_dev[SHMKV_CTL_MAX_SEGMENTS];
	unsigned ndirs;
	char rb_path[SHMKV_CTL_PATH_MAX];        /* the loader's rollback segment, or "" */
	uint64_t rb_gen;
	struct rproc *procs;
	size_t n, cap;
	unsigned unreadable;                     /* processes whose maps we may not read */
	int first_denied_errno;
};

/* The published copies' identities and the directories they live in. */
static void identify(struct scan *sc)
{
	for (uint32_t i = 0; sc->ctl && sc->ctl->generation && i < sc->ctl->segment_count &&
			     i < SHMKV_CTL_MAX_SEGMENTS; i++) {
		const char *path = sc->ctl->segments[i].path;
		struct stat st;
		if (stat(path, &st) == 0) {
			sc->cur_dev[sc->ncur] = (uint64_t)st.st_dev;
			sc->cur_ino[sc->ncur++] = (uint64_t)st.st_ino;
		}
		const char *slash = strrchr(path, '/');
		if (!slash || sc->ndirs == SHMKV_CTL_MAX_SEGMENTS)
			continue;
		char *d = sc->dirs[sc->ndirs];
		snprintf(d, SHMKV_CTL_PATH_MAX, "%.*s", (int)(slash - path), path);
		if (stat(d, &st) == 0)
			sc->dir_dev[sc->ndirs++] = (uint64_t)st.st_dev;
	}
}

/* Is m a segment of this cache: its identity, or its directory and device? */
static bool ours(const struct scan *sc, const struct procmaps_seg *m)
{
	if (!sc->ndirs)
		return true; /* no control segment to tell: the name decides */
	for (unsigned i = 0; i < sc->ncur; i++)
		if (m->dev == sc->cur_dev[i] && m->ino == sc->cur_ino[i])
			return true;
	const char *slash = strrchr(m->path, '/');
	for (unsigned i = 0; slash && i < sc->ndirs; i++)
		if (m->dev == sc->dir_dev[i] && strlen(sc->dirs[i]) == (size_t)(slash - m->path) &&
		    !strncmp(m->path, sc->dirs[i], (size_t)(slash - m->path)))
			return true;
	return false;
}

static enum map_state classify(const struct scan *sc, const struct procmaps_seg *m)
{
	if (m->loading)
		return MAP_LOADING;
	for (unsigned i = 0; i < sc->ncur; i++)
		if (m->dev == sc->cur_dev[i] && m->ino == sc->cur_ino[i])
			return MAP_CURRENT;
	if (m->deleted)
		return MAP_DELETED;
	if (sc->rb_path[0] && !strcmp(m->path, sc->rb_path))
		return MAP_ROLLBACK;
	return MAP_OLD;
}

/* Adds one mapping line to the process's list. */
static int add_map(struct rproc *p, const char *path, enum map_state st, uint64_t start)
{
	for (size_t i = 0; i < p->n; i++) {
		struct rmap *m = &p->maps[i];
		if (m->state == st && !strcmp(m->path, path)) {
			if (m->mappings < sizeof m->start / sizeof *m->start)
				m->start[m->mappings] = start;
			m->mappings++;
			return 0;
		}
	}
	struct rmap *maps = realloc(p->maps, (p->n + 1) * sizeof *maps);
	if (!maps)
		return -ENOMEM;
	p->maps = maps;
	struct rmap *m = &maps[p->n++];
	memset(m, 0, sizeof *m);
	snprintf(m->path, sizeof m->path, "%s", path);
	m->state = st;
	m->start[0] = start;
	m->mappings = 1;
	return 0;
}

/* The mapping with this start address, if we track it. */
static struct rmap *find_map(struct rproc *p, uint64_t start)
{
	for (size_t i = 0; i < p->n; i++) {
		struct rmap *m = &p->maps[i];
		size_t k = m->mappings < 8 ? m->mappings : 8;
		for (size_t j = 0; j < k; j++)
			if (m->start[j] == start)
				return m;
	}
	return NULL;
}

/* smaps: Rss, Pss and hugetlb usage of the mappings found in maps. */
static void read_smaps(struct rproc *p)
{
	char fn[64];
	snprintf(fn, sizeof fn, "/proc/%ld/smaps", p->pid);
	FILE *f = fopen(fn, "re");
	if (!f)
		return;
	char *line = NULL;
	size_t cap = 0;
	struct rmap *cur = NULL;
	while (getline(&line, &cap, f) > 0) {
		uint64_t start;
		char *path;
		bool deleted;
		if (procmaps_parse_line(line, &start, &path, &deleted)) {
			cur = find_map(p, start);
			continue;
		}
		if (!cur)
			continue;
		unsigned long long kb;
		if (sscanf(line, "Rss: %llu kB", &kb) == 1)
			cur->rss += kb * 1024;
		else if (sscanf(line, "Pss: %llu kB", &kb) == 1)
			cur->pss += kb * 1024;
		else if (sscanf(line, "Shared_Hugetlb: %llu kB", &kb) == 1 ||
			 sscanf(line, "Private_Hugetlb: %llu kB", &kb) == 1)
			cur->hugetlb += kb * 1024;
	}
	free(line);
	fclose(f);
}

static void read_comm(struct rproc *p)
{
	char fn[64];
	snprintf(fn, sizeof fn, "/proc/%ld/comm", p->pid);
	FILE *f = fopen(fn, "re");
	p->comm[0] = 0;
	if (f) {
		if (fgets(p->comm, sizeof p->comm, f))
			p->comm[strcspn(p->comm, "\n")] = 0;
		fclose(f);
	}
	if (!p->comm[0])
		snprintf(p->comm, sizeof p->comm, "?");
}

struct pid_scan {
	struct scan *sc;
	struct rproc pr;
};

static int one_mapping(const struct procmaps_seg *m, void *arg)
{
	struct pid_scan *ps = arg;
	if (!ours(ps->sc, m))
		return 0; /* a file that only has a segment's name */
	return add_map(&ps->pr, m->path, classify(ps->sc, m), m->start);
}

/* One process: its matching mappings, then their sizes. */
static int scan_pid(long pid, void *arg)
{
	struct scan *sc = arg;
	struct pid_scan ps = {.sc = sc, .pr = {.pid = pid}};
	int err = procmaps_scan_pid(pid, sc->prefix, one_mapping, &ps);
	if (err == -EACCES || err == -EPERM) {
		if (!sc->unreadable++)
			sc->first_denied_errno = -err;
		err = 0; /* not ours to read: counted */
	} else if (err && err != -ENOMEM) {
		err = 0; /* gone */
	}
	if (err || ps.pr.n == 0) {
		free(ps.pr.maps);
		return err;
	}
	struct rproc pr = ps.pr;
	read_comm(&pr);
	read_smaps(&pr);
	pr.loader = (sc->ctl && sc->ctl->loader_pid == (uint64_t)pid) ||
		    !strcmp(pr.comm, "shmkv-loader");
	if (sc->n == sc->cap) {
		size_t c = sc->cap ? sc->cap * 2 : 16;
		struct rproc *procs = realloc(sc->procs, c * sizeof *procs);
		if (!procs) {
			free(pr.maps);
			return -ENOMEM;
		}
		sc->procs = procs;
		sc->cap = c;
	}
	sc->procs[sc->n++] = pr;
	return 0;
}

/* Which old segment is the loader's rollback candidate, and of which
 * generation: asked of the loader when it answers (optional). */
static void rollback_info(const char *root, const char *name, struct scan *sc)
{
	const char *words[] = {"status", name}, *path;
	char why[512];
	jv *st;
	if (ctl_request(root, words, 2, 2000, &st, why, sizeof why))
		return;
	const jv *rb = jv_get(st, "rollback");
	uint64_t gen;
	if (jv_get_str(rb, "segment", &path) && jv_get_u64(rb, "generation", &gen)) {
		snprintf(sc->rb_path, sizeof sc->rb_path, "%s", path);
		sc->rb_gen = gen;
	}
	jv_free(st);
}

static int by_pid(const void *a, const void *b)
{
	const struct rproc *x = a, *y = b;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

static void print_json(const char *name, const struct scan *sc, const char *note)
{
	struct json *w = &json_out;
	json_obj_begin(w, NULL);
	json_str(w, "cache", name);
	json_name(w, "generation");
	if (sc->ctl)
		json_u64(w, NULL, sc->ctl->generation);
	else
		json_null(w, NULL);
	json_name(w, "current_segments");
	json_arr_begin(w, NULL);
	if (sc->ctl && sc->ctl->generation)
		for (uint32_t i = 0; i < sc->ctl->segment_count; i++)
			json_str(w, NULL, sc->ctl->segments[i].path);
	json_arr_end(w);
	json_name(w, "readers");
	json_arr_begin(w, NULL);
	for (size_t i = 0; i < sc->n; i++) {
		const struct rproc *p = &sc->procs[i];
		json_obj_begin(w, NULL);
		json_i64(w, "pid", p->pid);
		json_str(w, "command", p->comm);
		json_bool(w, "loader", p->loader);
		json_name(w, "segments");
		json_arr_begin(w, NULL);
		for (size_t j = 0; j < p->n; j++) {
			const struct rmap *m = &p->maps[j];
			json_obj_begin(w, NULL);
			json_str(w, "path", m->path);
			json_str(w, "state", state_names[m->state]);
			json_name(w, "generation");
			if (m->state == MAP_CURRENT)
				json_u64(w, NULL, sc->ctl->generation);
			else if (m->state == MAP_ROLLBACK)
				json_u64(w, NULL, sc->rb_gen);
			else
				json_null(w, NULL);
			json_bool(w, "current", m->state == MAP_CURRENT);
			json_bool(w, "deleted", m->state == MAP_DELETED);
			json_u64(w, "mappings", m->mappings);
			json_u64(w, "rss", m->rss);
			json_u64(w, "pss", m->pss);
			json_u64(w, "hugetlb", m->hugetlb);
			json_obj_end(w);
		}
		json_arr_end(w);
		json_obj_end(w);
	}
	json_arr_end(w);
	json_u64(w, "unreadable_processes", sc->unreadable);
	if (note)
		json_str(w, "note", note);
	json_obj_end(w);
}

static void print_plain(const char *name, const struct scan *sc, const char *note)
{
	char b1[32], b2[32], b3[32];
	if (sc->ctl && sc->ctl->generation) {
		printf("cache %s: generation %" PRIu64 "\n", name, sc->ctl->generation);
		for (uint32_t i = 0; i < sc->ctl->segment_count; i++)
			printf("  current segment %s\n", sc->ctl->segments[i].path);
	} else if (sc->ctl) {
		printf("cache %s: nothing published yet\n", name);
	}
	if (note)
		printf("%s\n", note);
	if (sc->n == 0) {
		printf("no process maps a segment of cache %s\n", name);
	} else {
		size_t wpath = 7;
		for (size_t i = 0; i < sc->n; i++)
			for (size_t j = 0; j < sc->procs[i].n; j++) {
				size_t l = strlen(sc->procs[i].maps[j].path);
				if (l > wpath)
					wpath = l;
			}
		printf("%-8s %-16s %-14s %4s %10s %10s %10s  %s\n", "PID", "COMMAND", "GENERATION",
		       "MAPS", "RSS", "PSS", "HUGETLB", "SEGMENT");
		unsigned cur = 0, old = 0;
		for (size_t i = 0; i < sc->n; i++) {
			const struct rproc *p = &sc->procs[i];
			bool any_cur = false, any_old = false;
			for (size_t j = 0; j < p->n; j++) {
				const struct rmap *m = &p->maps[j];
				char comm[80], gen[48];
				snprintf(comm, sizeof comm, "%s%s", p->comm, p->loader ? " (loader)" : "");
				if (m->state == MAP_CURRENT)
					snprintf(gen, sizeof gen, "%" PRIu64 " (current)", sc->ctl->generation);
				else if (m->state == MAP_ROLLBACK)
					snprintf(gen, sizeof gen, "%" PRIu64 " (rollback)", sc->rb_gen);
				else
					snprintf(gen, sizeof gen, "%s", m->state == MAP_DELETED ? "old (deleted)"
								 : state_names[m->state]);
				printf("%-8ld %-16s %-14s %4u %10s %10s %10s  %s\n", p->pid, comm, gen,
				       m->mappings, fmt_bytes(m->rss, b1, sizeof b1),
				       fmt_bytes(m->pss, b2, sizeof b2),
				       fmt_bytes(m->hugetlb, b3, sizeof b3), m->path);
				if (m->state == MAP_CURRENT)
					any_cur = true;
				else if (m->state != MAP_LOADING)
					any_old = true;
			}
			if (!p->loader) {
				cur += any_cur;
				old += any_old;
			}
		}
		printf("readers (the loader not counted): %u on the current generation, %u on an "
		       "old one\n", cur, old);
	}
	if (sc->unreadable)
		printf("%u process%s could not be inspected (%s)%s\n", sc->unreadable,
		       sc->unreadable == 1 ? "" : "es", strerror(sc->first_denied_errno),
		       geteuid() ? ": run as root to see them all" : "");
}

int do_cache_readers(int argc, char **argv)
{
	int rc = cache_args(argc, argv, 1, "NAME");
	if (rc >= 0)
		return rc;
	const char *name = argv[optind];
	if ((rc = cache_check_name(name)))
		return rc;
	const char *root = shmctl_root();
	char canon[PATH_MAX], why[512];
	if (!realpath(root, canon)) {
		int e = errno;
		p_err("no cache \"%s\": root %s: %s (set --root or SHMKV_ROOT)", name, root,
		      strerror(e));
		return e == ENOENT ? EXIT_NEGATIVE : EXIT_USAGE;
	}

	struct scan sc = {0};
	segname_cache_prefix(canon, name, sc.prefix, sizeof sc.prefix);

	shmkv_ctl ctl;
	const char *note = NULL;
	int err = ctl_read(canon, name, &ctl, why, sizeof why);
	if (!err)
		sc.ctl = &ctl;
	else if (err == -ENOENT)
		note = "no control segment (never published, or dropped): no generation is current";
	else
		return p_err("%s", why);
	rollback_info(canon, name, &sc);
	identify(&sc);

	err = procmaps_for_each_pid(scan_pid, &sc);
	if (err) {
		for (size_t i = 0; i < sc.n; i++)
			free(sc.procs[i].maps);
		free(sc.procs);
		return p_err("scanning /proc: %s", strerror(-err));
	}
	if (sc.n)
		qsort(sc.procs, sc.n, sizeof *sc.procs, by_pid);
	if (!sc.ctl && sc.n == 0) {
		rc = EXIT_NEGATIVE;
		p_err("no cache \"%s\" under %s (no %s.ctl) and no process maps a segment of it",
		      name, canon, name);
	} else {
		if (json_output)
			print_json(name, &sc, note);
		else
			print_plain(name, &sc, note);
		rc = EXIT_OK;
	}
	for (size_t i = 0; i < sc.n; i++)
		free(sc.procs[i].maps);
	free(sc.procs);
	return rc;
}
