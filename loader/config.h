/* config.h - the loader's configuration: an INI file (libinih) and/or the
 * command line. Every error names the file, the line and the reason. */
#ifndef LOADER_CONFIG_H
#define LOADER_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <shmkv.h>

#include "policy.h" /* numa/ */

/* How images are read (io=). */
enum io_engine {
	IO_AUTO = 0,     /* io_uring; pread where io_uring is unavailable (logged) */
	IO_URING = 1,    /* io_uring only: a load fails where it is unavailable */
	IO_PREAD = 2     /* pread, one block at a time (the hashing still overlaps) */
};

enum mem_policy {
	MEM_AUTO = 0,    /* hugetlbfs, else tmpfs (logged, visible in status) */
	MEM_HUGETLB = 1, /* hugetlbfs only: a load that does not fit is refused */
	MEM_SHM = 2      /* tmpfs only */
};

struct cache_conf {
	char source[PATH_MAX]; /* "" = none: loaded only through the spool or `load` */
	enum mem_policy memory;
	int memory_set;        /* memory= given; otherwise the [loader] default */
	mode_t mode;           /* of the ctl and segment files */
	gid_t gid;             /* (gid_t)-1: leave the group alone */
	char group[64];        /* "" = none */
	uint64_t max_size;     /* image bytes; 0 = no limit */
	int bpf;               /* bpf = yes: exported to BPF (loader/bpf.c) */
	char bpf_prefix[129];  /* bpf_prefix: only keys under it ("" = all) */
	uint32_t bpf_max_value; /* bpf_max_value: larger values stay out (0 = default 256) */
	struct npolicy numa;   /* numa= (numa/policy.h); none by default */
	/* changes are compacted into a new base (compact.c) once the overlay
	 * holds compact_entries records or compact_ratio of the base's bytes
	 * (and 1 MiB at least) (0: that bound is off) */
	uint64_t compact_entries;
	double compact_ratio;
	/* a change goes into the top overlay, folded into the lower one
	 * (overlay.c) once the top holds max(fold_entries, fold_ratio x the
	 * lower's records) records; fold_entries 0: no top, every change
	 * rebuilds the lower */
	uint64_t fold_entries;
	double fold_ratio;
	int line;              /* line of the [cache NAME] header, 0 for defaults */
};

struct cache_def {
	char name[SHMKV_CACHE_NAME_MAX + 1];
	struct cache_conf c;
};

struct loader_conf {
	char root[PATH_MAX];
	char spool[PATH_MAX];
	char durable_dir[PATH_MAX]; /* changes logged here (wal.c); "" = not durable */
	char shm_dir[PATH_MAX];
	char hugetlb_dir[PATH_MAX]; /* "" = every hugetlbfs mount in /proc/mounts */
	unsigned queue_depth;
	uint64_t block_size;
	enum io_engine io;
	enum mem_policy memory;     /* policy of caches not in the config */
	char group[64];             /* control socket group: "" = 0600 socket */
	gid_t gid;
	uint64_t failed_expire_s;   /* a new cache whose loads all failed is forgotten
				     * after this many seconds; 0 = kept until drop */
	char metrics_file[PATH_MAX]; /* Prometheus text kept current here; "" = none */
	uint64_t metrics_interval_s; /* and rewritten this often (readers change) */
	uint64_t stream_interval_ms; /* a stream's changes publish at most this often */
	char bpf_dir[PATH_MAX];     /* where exports are pinned ("" = /sys/fs/bpf/shmkv) */
	uint64_t expiry_times;      /* most expiry times kept per cache (4 bytes each,
				     * expiry.h); 0: count only */
	struct cache_def *caches;
	size_t ncaches;
};

#define CONF_DEFAULT_SHM_DIR "/dev/shm"
#define CONF_DEFAULT_QUEUE_DEPTH 16u
#define CONF_DEFAULT_BLOCK_SIZE (UINT64_C(4) << 20)
#define CONF_DEFAULT_MODE 0644
#define CONF_DEFAULT_FAILED_EXPIRE_S 3600u
#define CONF_DEFAULT_METRICS_INTERVAL_S 15u
#define CONF_DEFAULT_STREAM_INTERVAL_MS 100u
#define CONF_DEFAULT_COMPACT_ENTRIES UINT64_C(1000000)
#define CONF_DEFAULT_COMPACT_RATIO 0.25
#define CONF_DEFAULT_FOLD_ENTRIES UINT64_C(2048)
#define CONF_DEFAULT_FOLD_RATIO 0.125
#define CONF_STREAM_INTERVAL_RANGE "1ms..60s"
#define CONF_DEFAULT_EXPIRY_TIMES (UINT64_C(1) << 24) /* 64 MiB */
#define CONF_EXPIRY_TIMES_MAX (UINT64_C(1) << 28)     /* 1 GiB */
/* The one range check of each number the file and the command line take. */
#define CONF_QUEUE_DEPTH_RANGE "1..4096"
#define CONF_BLOCK_SIZE_RANGE "a multiple of 4096 in 4K..1G"

/* Fills defaults (no caches). */
void conf_defaults(struct loader_conf *c);
/* A cache's settings when the config does not name it. */
void conf_cache_defaults(const struct loader_conf *lc, struct cache_conf *cc);
/* Parses path into c (which holds defaults). Returns 0, or -EINVAL / -errno
 * with "FILE:LINE: reason" (or "FILE: reason") in why. */
int conf_load(const char *path, struct loader_conf *c, char *why, size_t why_len);
/* Gives caches without memory= the loader's default (after the command line). */
void conf_apply_defaults(struct loader_conf *c);
/* Checks cross-field rules after the command line was applied. */
int conf_check(const struct loader_conf *c, char *why, size_t why_len);
const struct cache_def *conf_find(const struct loader_conf *c, const char *name);
void conf_free(struct loader_conf *c);

/* "4M", "10G", "4096": binary suffixes K M G T. Returns 0 or -EINVAL. */
int conf_parse_size(const char *s, uint64_t *out);
int conf_parse_policy(const char *s, enum mem_policy *out);
int conf_parse_io(const char *s, enum io_engine *out);
/* queue_depth: 1..4096; block_size: a size, multiple of 4096, 4K..1G.
 * Return 0 or -EINVAL (out untouched). */
int conf_parse_queue_depth(const char *s, unsigned *out);
int conf_parse_block_size(const char *s, uint64_t *out);
/* "90", "90s", "15m", "2h", "1d": seconds. Returns 0 or -EINVAL. */
int conf_parse_duration(const char *s, uint64_t *secs);
const char *conf_io_name(enum io_engine io);

#endif /* LOADER_CONFIG_H */
