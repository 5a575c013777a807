/* bpf_export.h - one cache's BPF export state (struct cache's `bpf`; the
 * code is bpf.c). A header of its own so that loader.h needs nothing of
 * bpf.c's layer. */
#ifndef LOADER_BPF_EXPORT_H
#define LOADER_BPF_EXPORT_H

#include <limits.h>
#include <stdint.h>

#define BPF_DEFAULT_DIR "/sys/fs/bpf/shmkv"
#define BPF_PREFIX_MAX 128

/* One cache's export: what is asked, and what the last export did. */
struct bpf_export {
	/* asked: over the socket (ctl != 0), else the config's bpf= */
	int ctl;                       /* 1 bpf_export, -1 bpf_unexport, 0 follow the config;
					* kept in ROOT/NAME.bpf across restarts (bpf.c) */
	int ctl_read;                  /* ROOT/NAME.bpf was read (once per cache) */
	char ctl_prefix[BPF_PREFIX_MAX + 1];
	uint32_t ctl_max_value;
	/* the pinned table (worker only) */
	int fd;                        /* the outer map; meaningful when have_fd */
	int have_fd;
	/* the last export; written by the worker under L->lock */
	int pinned;                    /* pin[] holds the outer map */
	char pin[PATH_MAX];
	char prefix[BPF_PREFIX_MAX + 1];
	uint32_t max_value, value_size;
	uint64_t generation;           /* exported; 0: none yet */
	uint64_t exported, not_under_prefix, key_too_long, value_too_big, expiring;
	uint64_t ms, memlock, exported_ns;
	int batch;                     /* 1: batch updates, 0: one update per entry */
	char error[512];               /* the last export's failure; "" after a success */
};

#endif /* LOADER_BPF_EXPORT_H */
