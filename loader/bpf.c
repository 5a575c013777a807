/* bpf.c - export a cache to BPF programs: a pinned array-of-maps whose one
 * slot holds the current generation's hash map (lib/shmkv_bpf.h has the
 * layout and why). Runs on the worker, after the user-space publish. */
#include "bpf.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <shmkv.h>
#include <shmkv_bpf.h>

#include "json.h"
#include "loader.h"
#include "log.h"

#if SHMKV_HAVE_LIBBPF
#include <bpf/bpf.h>
#include <linux/bpf.h>
#endif

#define BPFFS_MAGIC_ 0xcafe4a11u
#define BATCH_ 4096u

static inline uint64_t now_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *bpf_dir(const struct loader *L)
{
	return L->conf->bpf_dir[0] ? L->conf->bpf_dir : BPF_DEFAULT_DIR;
}

/* ROOT/NAME.bpf: what `shmctl bpf export`/`unexport` asked, so that a
 * restarted loader goes on exporting (or not). Written by rename; read only
 * when it is a regular file of our uid that no one else can write (as the
 * state file, loader/README.md "Files"). */
static int ctl_path(const struct loader *L, const struct cache *c, char *p, size_t len,
		    const char *pre, const char *suf)
{
	return (size_t)snprintf(p, len, "%s/%s%s.bpf%s", L->root, pre, c->name, suf) < len ? 0 : -1;
}

static void ctl_save(struct loader *L, const struct cache *c)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	if (ctl_path(L, c, path, sizeof path, "", "") || ctl_path(L, c, tmp, sizeof tmp, ".", ".tmp"))
		return;
	if (!c->bpf.ctl) {
		unlink(path);
		return;
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		log_warn("bpf cache=%s: %s: %s; a restart forgets this export request", c->name, tmp,
			 strerror(errno));
		return;
	}
	fprintf(f, "# shmkv-loader: the BPF export asked with shmctl; written by the loader\n"
		   "export=%d\nmax_value=%u\nprefix=%s\n", c->bpf.ctl > 0, c->bpf.ctl_max_value,
		c->bpf.ctl_prefix);
	int bad = ferror(f);
	if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
		log_warn("bpf cache=%s: writing %s failed; a restart forgets this export request",
			 c->name, path);
		unlink(tmp);
	}
}

static void ctl_load(struct loader *L, struct cache *c)
{
	struct bpf_export *b = &c->bpf;
	char path[PATH_MAX], line[BPF_PREFIX_MAX + 64];
	/* under the lock: status.c:status_take() copies c->bpf under it from
	 * the main thread while this worker reads the file (TSan saw it) */
	pthread_mutex_lock(&L->lock);
	b->ctl_read = 1;
	pthread_mutex_unlock(&L->lock);
	if (ctl_path(L, c, path, sizeof path, "", ""))
		return;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return;
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022)) {
		log_warn("bpf cache=%s: %s ignored: not a regular file of uid %u writable by no one "
			 "else", c->name, path, (unsigned)geteuid());
		close(fd);
		return;
	}
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return;
	}
	int on = -1, bad = 0;
	unsigned long mv = SHMKV_BPF_DEFAULT_VALUE_MAX;
	char prefix[BPF_PREFIX_MAX + 1] = "";
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "export=", 7))
			on = line[7] == '1';
		else if (!strncmp(line, "max_value=", 10))
			mv = strtoul(line + 10, NULL, 10);
		else if (!strncmp(line, "prefix=", 7) && strlen(line + 7) <= BPF_PREFIX_MAX)
			memcpy(prefix, line + 7, strlen(line + 7) + 1);
		else if (!strncmp(line, "prefix=", 7))
			bad = 1; /* too long: not what the loader writes */
	}
	fclose(f);
	if (bad || on < 0 || mv > SHMKV_BPF_VALUE_LIMIT) {
		log_warn("bpf cache=%s: %s ignored: not as the loader writes it", c->name, path);
		return;
	}
	pthread_mutex_lock(&L->lock);
	b->ctl = on ? 1 : -1;
	b->ctl_max_value = (uint32_t)mv;
	snprintf(b->ctl_prefix, sizeof b->ctl_prefix, "%s", prefix);
	pthread_mutex_unlock(&L->lock);
	log_info("bpf cache=%s: %s as asked before the restart (%s)", c->name,
		 on ? "exported" : "not exported", path);
}

/* What the cache should have: 1 and its prefix and max_value, or 0. */
static int wanted(const struct cache *c, const char **prefix, uint32_t *max_value)
{
	const struct bpf_export *b = &c->bpf;
	if (b->ctl) {
		*prefix = b->ctl_prefix;
		*max_value = b->ctl_max_value;
		return b->ctl > 0;
	}
	*prefix = c->conf.bpf_prefix;
	*max_value = c->conf.bpf_max_value ? c->conf.bpf_max_value : SHMKV_BPF_DEFAULT_VALUE_MAX;
	return c->conf.bpf;
}

static void set_error(struct loader *L, struct cache *c, const char *why)
{
	pthread_mutex_lock(&L->lock);
	snprintf(c->bpf.error, sizeof c->bpf.error, "%s", why);
	pthread_mutex_unlock(&L->lock);
}

#if SHMKV_HAVE_LIBBPF

static int fail(char *why, size_t len, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *why, size_t len, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return err;
}

static const char *perm_hint(int err)
{
	return err == -EPERM || err == -EACCES
		       ? " (creating and pinning BPF maps needs root, or CAP_BPF and "
			 "CAP_SYS_ADMIN)"
		       : "";
}

/* The pin directory: on a bpffs (mounting one at /sys/fs/bpf when that is
 * where it belongs), ours and writable by no one else (README "Trust"). */
static int ensure_dir(const char *dir, char *why, size_t len)
{
	char parent[PATH_MAX];
	snprintf(parent, sizeof parent, "%s", dir);
	char *slash = strrchr(parent, '/');
	if (!slash || slash == parent)
		return fail(why, len, -EINVAL, "bpf_dir %s: must be a directory below a bpffs mount",
			    dir);
	*slash = 0;
	struct statfs fs;
	if (statfs(parent, &fs) != 0)
		return fail(why, len, -errno, "bpffs: %s: %s", parent, strerror(errno));
	if ((uint32_t)fs.f_type != BPFFS_MAGIC_) {
		if (strcmp(parent, "/sys/fs/bpf"))
			return fail(why, len, -ENOTDIR, "bpf_dir %s: %s is not a bpffs mount", dir,
				    parent);
		if (mount("bpf", parent, "bpf", 0, "mode=0700") != 0) {
			int err = -errno;
			return fail(why, len, err, "bpffs is not mounted at /sys/fs/bpf and mounting "
				    "it failed: %s (as root: mount -t bpf bpf /sys/fs/bpf)",
				    strerror(-err));
		}
		log_info("bpf: mounted bpffs at /sys/fs/bpf");
	}
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return fail(why, len, -errno, "mkdir %s: %s%s", dir, strerror(errno),
			    perm_hint(-errno));
	struct stat st;
	if (lstat(dir, &st) != 0)
		return fail(why, len, -errno, "%s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		return fail(why, len, -EPERM, "BPF pin directory %s refused: not a directory of "
			    "uid %u writable by no one else (uid %u, mode %04o)", dir,
			    (unsigned)geteuid(), (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	return 0;
}

/* The value size of the generation in an outer map's slot, 0 if none. */
static uint32_t slot_value_size(int outer)
{
	uint32_t zero = 0, id = 0;
	if (bpf_map_lookup_elem(outer, &zero, &id) != 0 || !id)
		return 0;
	int fd = bpf_map_get_fd_by_id(id);
	if (fd < 0)
		return 0;
	struct bpf_map_info info;
	uint32_t ilen = sizeof info;
	memset(&info, 0, sizeof info);
	uint32_t vs = 0;
	if (bpf_obj_get_info_by_fd(fd, &info, &ilen) == 0 &&
	    info.key_size == sizeof(struct shmkv_bpf_key))
		vs = info.value_size;
	close(fd);
	return vs;
}

/* A pinned table left by an earlier export (this loader, or the one before
 * a restart) that takes inner maps of value_size: its fd, else -1. */
static int adopt_pin(const char *pin, uint32_t value_size)
{
	struct stat st;
	if (lstat(pin, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022))
		return -1;
	int fd = bpf_obj_get(pin);
	if (fd < 0)
		return -1;
	struct bpf_map_info info;
	uint32_t ilen = sizeof info;
	memset(&info, 0, sizeof info);
	if (bpf_obj_get_info_by_fd(fd, &info, &ilen) == 0 &&
	    info.type == BPF_MAP_TYPE_ARRAY_OF_MAPS && info.key_size == 4 &&
	    info.value_size == 4 && info.max_entries == 1 && slot_value_size(fd) == value_size)
		return fd;
	close(fd);
	return -1;
}

static int new_hash(const char *name, uint32_t value_size, uint32_t n)
{
	char mname[16]; /* BPF_OBJ_NAME_LEN; [A-Za-z0-9_.] */
	snprintf(mname, sizeof mname, "shmkv_%.9s", name);
	for (char *p = mname; *p; p++)
		if (*p == '-')
			*p = '_';
	return bpf_map_create(BPF_MAP_TYPE_HASH, mname, sizeof(struct shmkv_bpf_key), value_size,
			      n ? n : 1, NULL);
}

/* A new outer map for inner maps of value_size, pinned at pin (replacing
 * whatever table was there: a rename, so the name is never missing). */
static int new_outer(const char *name, const char *pin, uint32_t value_size, char *why,
		     size_t len)
{
	int tmpl = new_hash(name, value_size, 1);
	if (tmpl < 0)
		return fail(why, len, tmpl, "creating a BPF hash map: %s%s", strerror(-tmpl),
			    perm_hint(tmpl));
	LIBBPF_OPTS(bpf_map_create_opts, o, .inner_map_fd = (uint32_t)tmpl);
	int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY_OF_MAPS, "shmkv_table", 4, 4, 1, &o);
	close(tmpl);
	if (fd < 0)
		return fail(why, len, fd, "creating a BPF array of maps: %s%s", strerror(-fd),
			    perm_hint(fd));
	char tmp[PATH_MAX];
	char *slash = strrchr(pin, '/');
	if ((size_t)snprintf(tmp, sizeof tmp, "%.*s/~%s", (int)(slash - pin), pin, slash + 1) >=
	    sizeof tmp) {
		close(fd);
		return fail(why, len, -ENAMETOOLONG, "%s: name too long", pin);
	}
	unlink(tmp); /* a leftover of an export that died between pin and rename */
	int err = bpf_obj_pin(fd, tmp);
	if (err) {
		close(fd);
		return fail(why, len, err, "pinning %s: %s%s", tmp, strerror(-err), perm_hint(err));
	}
	if (rename(tmp, pin) != 0) {
		err = -errno;
		unlink(tmp);
		close(fd);
		return fail(why, len, err, "rename %s to %s: %s", tmp, pin, strerror(-err));
	}
	return fd;
}

static uint64_t fd_memlock(int fd)
{
	char p[64], line[128];
	snprintf(p, sizeof p, "/proc/self/fdinfo/%d", fd);
	FILE *f = fopen(p, "re");
	uint64_t v = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "memlock: %" SCNu64, &v) == 1)
			break;
	fclose(f);
	return v;
}

/* Reasons an entry stays out of the table. */
enum { FIT_OK, FIT_PREFIX, FIT_KEY, FIT_VALUE, FIT_EXPIRES, FIT_N };

static int fits(const void *key, size_t klen, const shmkv_value *v, const char *prefix,
		size_t plen, uint32_t max_value, uint32_t expires)
{
	if (klen < plen || memcmp(key, prefix, plen))
		return FIT_PREFIX;
	/* a BPF map cannot drop a key at its expiry (FORMAT.md
	 * §17): exported, it would be served after it; readers do expire it */
	if (expires)
		return FIT_EXPIRES;
	if (klen > SHMKV_BPF_KEY_MAX)
		return FIT_KEY;
	if (v->size > max_value)
		return FIT_VALUE;
	return FIT_OK;
}

struct fill {
	int fd, batch;
	uint32_t n, value_size;
	unsigned char *keys, *vals;
};

static int flush(struct fill *f, char *why, size_t len)
{
	uint32_t count = f->n;
	if (!count)
		return 0;
	if (f->batch) {
		LIBBPF_OPTS(bpf_map_batch_opts, o); /* elem_flags: only BPF_F_LOCK is taken */
		int err = bpf_map_update_batch(f->fd, f->keys, f->vals, &count, &o);
		if (!err) {
			f->n = 0;
			return 0;
		}
		if (count || (err != -EINVAL && err != -ENOTSUP && err != -524 /* ENOTSUPP */))
			return fail(why, len, err, "BPF batch update: %s", strerror(-err));
		/* kernels before 5.6 have no batch updates for hash maps */
		log_warn("bpf: batch map updates unavailable (%s; Linux 5.6 has them): one update "
			 "per entry", strerror(-err));
		f->batch = 0;
	}
	for (uint32_t i = 0; i < f->n; i++) {
		int err = bpf_map_update_elem(f->fd, f->keys + (size_t)i * sizeof(struct shmkv_bpf_key),
					      f->vals + (size_t)i * f->value_size, BPF_NOEXIST);
		if (err)
			return fail(why, len, err, "BPF map update: %s", strerror(-err));
	}
	f->n = 0;
	return 0;
}

/* Pass 1: counts the entries of db (at path) by how they fit (cnt[FIT_*]),
 * so that the map holds exactly those that do. */
static int count_fits(shmkv *db, const char *path, const char *prefix, size_t plen,
		      uint32_t max_value, uint64_t cnt[FIT_N], char *why, size_t len)
{
	shmkv_iter it;
	const void *k;
	size_t klen;
	shmkv_value v;
	int err;
	shmkv_iter_init_all(db, &it);
	while ((err = shmkv_iter_next(&it, &k, &klen, &v)) == 0)
		cnt[fits(k, klen, &v, prefix, plen, max_value, shmkv_iter_expires(&it))]++;
	if (err != SHMKV_EEND)
		return fail(why, len, err, "%s: %s", path, shmkv_strerror(err));
	if (cnt[FIT_OK] > UINT32_MAX - 1)
		return fail(why, len, -E2BIG, "%" PRIu64 " entries: a BPF map holds at most 2^32-2",
			    cnt[FIT_OK]);
	return 0;
}

/* Pass 2: fills the table f->fd with the entries of db (at path) that fit,
 * in batches of BATCH_. */
static int fill_table(shmkv *db, const char *path, struct fill *f, const char *prefix,
		      size_t plen, uint32_t max_value, char *why, size_t len)
{
	f->keys = calloc(BATCH_, sizeof(struct shmkv_bpf_key));
	f->vals = calloc(BATCH_, f->value_size);
	int err = f->keys && f->vals ? 0 : fail(why, len, -ENOMEM, "out of memory");
	shmkv_iter it;
	const void *k;
	size_t klen;
	shmkv_value v;
	shmkv_iter_init_all(db, &it);
	while (!err && (err = shmkv_iter_next(&it, &k, &klen, &v)) == 0) {
		if (fits(k, klen, &v, prefix, plen, max_value, shmkv_iter_expires(&it)) != FIT_OK)
			continue;
		struct shmkv_bpf_key *bk = (void *)(f->keys + (size_t)f->n * sizeof *bk);
		unsigned char *bv = f->vals + (size_t)f->n * f->value_size;
		memset(bk, 0, sizeof *bk);
		bk->len = (uint32_t)klen;
		memcpy(bk->data, k, klen);
		memset(bv, 0, f->value_size);
		uint32_t vl = (uint32_t)v.size, vt = v.type;
		memcpy(bv, &vl, 4);
		memcpy(bv + 4, &vt, 4);
		memcpy(bv + SHMKV_BPF_VALUE_HDR, v.data, v.size);
		if (++f->n == BATCH_)
			err = flush(f, why, len);
	}
	if (err == SHMKV_EEND)
		err = flush(f, why, len);
	else if (err < 0 && err > -4096 && !why[0])
		fail(why, len, err, "%s: %s", path, shmkv_strerror(err));
	free(f->keys);
	free(f->vals);
	f->keys = f->vals = NULL;
	return err;
}

/* Swaps table fd into the slot of the outer map *outer, pinning a new outer
 * map at pin first if *outer < 0 (then *outer is it, or the error). */
static int swap_in(struct cache *c, const char *pin, uint32_t value_size, uint32_t max_value,
		   int *outer, int fd, char *why, size_t len)
{
	if (*outer < 0) {
		*outer = new_outer(c->name, pin, value_size, why, len);
		if (*outer < 0)
			return *outer;
		if (c->bpf.have_fd && c->bpf.value_size != value_size)
			log_warn("bpf cache=%s: max_value changed (%u -> %u bytes): a new table is "
				 "pinned at %s; programs that hold the old one keep its last "
				 "generation until they open the pin again", c->name,
				 c->bpf.max_value, max_value, pin);
	}
	/* the swap: one update of the slot; a program that looked the slot up
	 * keeps the inner map it got (RCU) for the rest of its run */
	uint32_t zero = 0, ifd = (uint32_t)fd;
	int err = bpf_map_update_elem(*outer, &zero, &ifd, BPF_ANY);
	if (err)
		fail(why, len, err, "swapping the new table in: %s", strerror(-err));
	return err;
}

/* Exports the current generation of c; on failure the table in the pin
 * (the previous generation) is left as it is. */
static int export_cache(struct loader *L, struct cache *c, const char *prefix,
			uint32_t max_value, char *why, size_t len)
{
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	if (!c->have_cur)
		return fail(why, len, -ENOENT, "cache %s has nothing published", c->name);
	if (strchr(c->name, '.'))
		return fail(why, len, -EINVAL, "cache %s: bpffs refuses names with a '.' (the "
			    "kernel reserves them)", c->name);
	const char *dir = bpf_dir(L);
	int err = ensure_dir(dir, why, len);
	if (err)
		return err;
	char pin[PATH_MAX];
	if ((size_t)snprintf(pin, sizeof pin, "%s/%s", dir, c->name) >= sizeof pin)
		return fail(why, len, -ENAMETOOLONG, "%s/%s: name too long", dir, c->name);
	uint32_t value_size = SHMKV_BPF_VALUE_SIZE(max_value);
	size_t plen = strlen(prefix);

	shmkv *db, *ov = NULL, *top = NULL;
	char w[300];
	unsigned oflags = SHMKV_OPEN_NOVERIFY; /* verified by the load that published it */
	err = shmkv_open_file_diag(c->cur.path, oflags, &db, w, sizeof w);
	if (err)
		return fail(why, len, err, "%s", w);
	/* a generation with changes: the base read through its overlays */
	if (c->have_ov &&
	    ((err = shmkv_open_file_diag(c->ov.path, oflags, &ov, w, sizeof w)) ||
	     (c->have_top && (err = shmkv_open_file_diag(c->top.path, oflags, &top, w, sizeof w))) ||
	     (err = shmkv_delta_set2(db, ov, top, w, sizeof w)))) {
		shmkv_close(top);
		shmkv_close(ov);
		shmkv_close(db);
		return fail(why, len, err, "overlay: %s", w);
	}
	uint64_t cnt[FIT_N] = {0};
	err = count_fits(db, c->cur.path, prefix, plen, max_value, cnt, why, len);
	if (err) {
		shmkv_close(db);
		shmkv_close(ov);
		shmkv_close(top);
		return err;
	}
	int outer = c->bpf.have_fd && c->bpf.value_size == value_size && !strcmp(c->bpf.pin, pin)
			    ? c->bpf.fd
			    : -1;
	int adopted = -1;
	if (outer < 0)
		outer = adopted = adopt_pin(pin, value_size);

	struct fill f = {.batch = 1, .value_size = value_size};
	f.fd = new_hash(c->name, value_size, (uint32_t)cnt[FIT_OK]);
	if (f.fd < 0) {
		shmkv_close(db);
		shmkv_close(ov);
		shmkv_close(top);
		if (adopted >= 0)
			close(adopted);
		return fail(why, len, f.fd, "creating a BPF hash map of %" PRIu64 " entries of %u "
			    "bytes: %s%s", cnt[FIT_OK], value_size, strerror(-f.fd),
			    perm_hint(f.fd));
	}
	err = fill_table(db, c->cur.path, &f, prefix, plen, max_value, why, len);
	shmkv_close(db);
	shmkv_close(ov);
	shmkv_close(top);
	uint64_t memlock = fd_memlock(f.fd);
	if (!err)
		err = swap_in(c, pin, value_size, max_value, &outer, f.fd, why, len);
	close(f.fd); /* the slot holds it now; the old inner map is freed by the kernel */
	if (err) {
		if (outer >= 0 && outer != c->bpf.fd)
			close(outer);
		return err;
	}
	if (c->bpf.have_fd && c->bpf.fd != outer)
		close(c->bpf.fd);
	uint64_t ms = (now_ns(CLOCK_MONOTONIC) - t0) / 1000000u;
	pthread_mutex_lock(&L->lock);
	struct bpf_export *b = &c->bpf;
	b->fd = outer;
	b->have_fd = 1;
	b->pinned = 1;
	snprintf(b->pin, sizeof b->pin, "%s", pin);
	snprintf(b->prefix, sizeof b->prefix, "%s", prefix);
	b->max_value = max_value;
	b->value_size = value_size;
	b->generation = c->cur.generation;
	b->exported = cnt[FIT_OK];
	b->not_under_prefix = cnt[FIT_PREFIX];
	b->key_too_long = cnt[FIT_KEY];
	b->value_too_big = cnt[FIT_VALUE];
	b->expiring = cnt[FIT_EXPIRES];
	b->ms = ms;
	b->memlock = memlock;
	b->exported_ns = now_ns(CLOCK_REALTIME);
	b->batch = f.batch;
	b->error[0] = 0;
	pthread_mutex_unlock(&L->lock);
	log_info("bpf exported cache=%s gen=%llu entries=%llu not_under_prefix=%llu "
		 "key_too_long=%llu value_too_big=%llu expiring=%llu ms=%llu memlock=%llu pin=%s",
		 c->name,
		 (unsigned long long)b->generation, (unsigned long long)b->exported,
		 (unsigned long long)b->not_under_prefix, (unsigned long long)b->key_too_long,
		 (unsigned long long)b->value_too_big, (unsigned long long)b->expiring,
		 (unsigned long long)ms,
		 (unsigned long long)memlock, pin);
	return 0;
}

static void unexport(struct loader *L, struct cache *c, const char *reason)
{
	struct bpf_export *b = &c->bpf;
	if (b->pinned && unlink(b->pin) != 0 && errno != ENOENT)
		log_warn("bpf cache=%s: unlink %s: %s", c->name, b->pin, strerror(errno));
	if (b->pinned)
		log_info("bpf unexported cache=%s pin=%s (%s)", c->name, b->pin, reason);
	if (b->have_fd)
		close(b->fd);
	pthread_mutex_lock(&L->lock);
	b->have_fd = b->pinned = 0;
	b->generation = 0;
	b->error[0] = 0;
	pthread_mutex_unlock(&L->lock);
}

#else /* !SHMKV_HAVE_LIBBPF */

static int export_cache(struct loader *L, struct cache *c, const char *prefix,
			uint32_t max_value, char *why, size_t len)
{
	(void)L, (void)c, (void)prefix, (void)max_value;
	snprintf(why, len, "this shmkv-loader was built without libbpf (Debian: libbpf-dev): "
		 "no BPF export");
	return -ENOTSUP;
}

static void unexport(struct loader *L, struct cache *c, const char *reason)
{
	(void)L, (void)c, (void)reason;
}

#endif

/* Exports c if it is wanted, logs and records a failure. */
static int sync_one(struct loader *L, struct cache *c, char *why, size_t len)
{
	if (!c->bpf.ctl_read)
		ctl_load(L, c);
	const char *prefix;
	uint32_t max_value;
	why[0] = 0;
	if (!wanted(c, &prefix, &max_value)) {
		if (c->bpf.pinned)
			unexport(L, c, "not exported any more");
		return 0;
	}
	if (!c->have_cur) {
		set_error(L, c, "nothing published yet: exported once a generation is");
		return 0;
	}
	int err = export_cache(L, c, prefix, max_value, why, len);
	if (err) {
		char q[700];
		set_error(L, c, why);
		log_err("bpf export failed cache=%s gen=%llu error=%s%s", c->name,
			(unsigned long long)c->cur.generation, log_quote(q, sizeof q, why),
			c->bpf.pinned ? " (BPF programs keep the previous generation)" : "");
	}
	return err;
}

void bpf_after_publish(struct loader *L, const char *name)
{
	struct cache *c = cache_find(L, name);
	char why[512];
	if (c)
		sync_one(L, c, why, sizeof why);
}

void bpf_before_drop(struct loader *L, const char *name)
{
	struct cache *c = cache_find(L, name);
	if (!c)
		return;
	if (c->bpf.pinned)
		unexport(L, c, "cache dropped");
	pthread_mutex_lock(&L->lock);
	c->bpf.ctl = 0; /* a configured cache follows its config again */
	c->bpf.ctl_read = 1;
	pthread_mutex_unlock(&L->lock);
	ctl_save(L, c);
}

void bpf_sync_all(struct loader *L)
{
	char why[512];
	for (size_t i = 0; i < L->ncaches; i++) {
		struct cache *c = L->caches[i];
		const char *p;
		uint32_t m;
		if (!c->bpf.ctl_read)
			ctl_load(L, c);
		int w = wanted(c, &p, &m);
		if (w && c->have_cur &&
		    (c->bpf.generation != c->cur.generation || strcmp(p, c->bpf.prefix) ||
		     m != c->bpf.max_value))
			sync_one(L, c, why, sizeof why);
		else if (!w && c->bpf.pinned)
			unexport(L, c, "not in the config any more");
	}
}

static void fields(struct json *j, const struct cache *c, int want, const char *prefix,
		   uint32_t max_value);

int op_bpf_export(struct loader *L, const char *name, const char *prefix, const char *max_value,
		  char **reply)
{
	struct cache *c = cache_find(L, name);
	if (!c)
		return json_reply_no_cache(reply, name);
	if (strlen(prefix) > BPF_PREFIX_MAX)
		return json_reply_error(reply, -EINVAL, "prefix longer than %d bytes", BPF_PREFIX_MAX);
	uint32_t mv = SHMKV_BPF_DEFAULT_VALUE_MAX;
	if (max_value[0]) {
		char *end;
		errno = 0;
		unsigned long long x = strtoull(max_value, &end, 10);
		if (*end || errno || max_value[0] == '-' || x > SHMKV_BPF_VALUE_LIMIT)
			return json_reply_error(reply, -EINVAL, "max_value \"%.32s\": expected 0..%d bytes",
					 max_value, SHMKV_BPF_VALUE_LIMIT);
		mv = (uint32_t)x;
	}
	if (!c->have_cur)
		return json_reply_error(reply, -ENOENT, "cache %s has nothing published: load it first",
				 name);
	/* asked from now on: a failure below is retried at the next generation */
	pthread_mutex_lock(&L->lock);
	c->bpf.ctl = 1;
	snprintf(c->bpf.ctl_prefix, sizeof c->bpf.ctl_prefix, "%s", prefix);
	c->bpf.ctl_max_value = mv;
	c->bpf.ctl_read = 1;
	pthread_mutex_unlock(&L->lock);
	ctl_save(L, c);
	char why[512];
	int err = export_cache(L, c, prefix, mv, why, sizeof why);
	if (err) {
		char q[700];
		set_error(L, c, why);
		log_err("bpf export failed cache=%s gen=%llu error=%s", name,
			(unsigned long long)c->cur.generation, log_quote(q, sizeof q, why));
		return json_reply_error(reply, err, "bpf export %s: %s%s", name, why,
				 c->bpf.pinned ? " (BPF programs keep the previous generation)" : "");
	}
	struct json j;
	json_init(&j);
	json_bool(&j, "ok", 1);
	fields(&j, c, 1, prefix, mv);
	*reply = json_finish(&j);
	return 0;
}

int op_bpf_unexport(struct loader *L, const char *name, char **reply)
{
	struct cache *c = cache_find(L, name);
	if (!c)
		return json_reply_no_cache(reply, name);
	int was = c->bpf.pinned;
	char pin[PATH_MAX];
	snprintf(pin, sizeof pin, "%s", c->bpf.pin);
	unexport(L, c, "bpf_unexport");
	pthread_mutex_lock(&L->lock);
	c->bpf.ctl = -1;
	c->bpf.ctl_read = 1;
	pthread_mutex_unlock(&L->lock);
	ctl_save(L, c);
	struct json j;
	json_init(&j);
	json_bool(&j, "ok", 1);
	json_str(&j, "cache", name);
	json_bool(&j, "was_exported", was);
	json_str(&j, "unpinned", was ? pin : NULL);
	*reply = json_finish(&j);
	return 0;
}

/* The export's figures; c is the worker's cache or a copy taken under the lock. */
static void fields(struct json *j, const struct cache *c, int want, const char *prefix,
		   uint32_t max_value)
{
	const struct bpf_export *b = &c->bpf;
	json_str(j, "cache", c->name);
	json_bool(j, "exported", want);
	json_str(j, "requested_by", b->ctl ? "shmctl" : c->conf.bpf ? "config" : NULL);
	json_str(j, "prefix", want ? prefix : NULL);
	json_u64(j, "max_value", want ? max_value : 0);
	json_str(j, "pin", b->pinned ? b->pin : NULL);
	json_u64(j, "generation", b->pinned ? b->generation : 0);
	json_u64(j, "cache_generation", c->have_cur ? c->cur.generation : 0);
	json_bool(j, "current", b->pinned && c->have_cur && b->generation == c->cur.generation);
	json_u64(j, "key_size", sizeof(struct shmkv_bpf_key));
	json_u64(j, "value_size", b->pinned ? b->value_size : 0);
	json_u64(j, "entries", b->exported);
	json_obj_begin(j, "skipped");
	json_u64(j, "not_under_prefix", b->not_under_prefix);
	json_u64(j, "key_too_long", b->key_too_long);
	json_u64(j, "value_too_big", b->value_too_big);
	json_u64(j, "expiring", b->expiring);
	json_obj_end(j);
	json_u64(j, "export_ms", b->ms);
	json_u64(j, "memlock", b->memlock);
	json_bool(j, "batch", b->batch);
	json_str(j, "error", b->error[0] ? b->error : NULL);
}

void bpf_status_fields(struct json *j, const struct loader *L, const struct cache *c)
{
	(void)L;
	const char *prefix;
	uint32_t mv;
	int w = wanted(c, &prefix, &mv);
	json_obj_begin(j, "bpf");
	fields(j, c, w, prefix, mv);
	json_obj_end(j);
}

static void copy_for_status(const struct cache *c, struct cache *s)
{
	memcpy(s->name, c->name, sizeof c->name);
	s->conf = c->conf;
	s->have_cur = c->have_cur;
	s->cur = c->cur;
	s->bpf = c->bpf;
}

char *bpf_status(struct loader *L, const char *name)
{
	struct cache *s = calloc(1, sizeof *s);
	if (!s)
		return json_error("out of memory");
	struct json j;
	json_init(&j);
	json_bool(&j, "ok", 1);
	json_str(&j, "bpf_dir", bpf_dir(L));
	json_bool(&j, "libbpf", SHMKV_HAVE_LIBBPF);
	json_arr_begin(&j, "caches");
	pthread_mutex_lock(&L->lock);
	int found = 0;
	for (size_t i = 0; i < L->ncaches; i++) {
		const struct cache *c = L->caches[i];
		if (name && strcmp(name, c->name))
			continue;
		found = 1;
		copy_for_status(c, s);
		const char *prefix;
		uint32_t mv;
		int w = wanted(s, &prefix, &mv);
		if (!name && !w && !s->bpf.pinned && !s->bpf.error[0])
			continue;
		json_obj_begin(&j, NULL);
		fields(&j, s, w, prefix, mv);
		json_obj_end(&j);
	}
	pthread_mutex_unlock(&L->lock);
	json_arr_end(&j);
	free(s);
	if (name && !found) {
		json_free(&j);
		return json_no_cache(name);
	}
	return json_finish(&j);
}
