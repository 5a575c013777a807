/* ctl.h - the loader's control segments ROOT/NAME.ctl (lib/shmkv/protocol.h):
 * creating, mapping and publishing. The seqcount itself, writer and reader
 * side, is lib/shmkv/ctl.h's (shmkv_ctl_publish, shmkv_ctl_read). */
#ifndef LOADER_CTL_H
#define LOADER_CTL_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include <shmkv.h>

struct ctl {
	shmkv_ctl *map; /* PROT_READ|PROT_WRITE, MAP_SHARED; NULL = none */
	char path[PATH_MAX];
};

/* Creates ROOT/NAME.ctl once: writes a temporary file in root, then renames
 * it into place without replacing anything (readers map the file forever).
 * The new segment has generation 0. Returns 0, -EEXIST, -errno. */
int ctl_create(const char *root, const char *name, mode_t mode, gid_t gid, struct ctl *out,
	       char *why, size_t why_len);
/* Maps an existing ROOT/NAME.ctl read-write (restart). Returns 0, -errno, or
 * SHMKV_EPROTO (not a control segment of this protocol version and layout). */
int ctl_open(const char *root, const char *name, struct ctl *out, char *why, size_t why_len);
/* Publishes generation with segs[0..n) (n may be 0: nothing to map), this
 * pid and the time, with shmkv_ctl_publish(). A section left open by a crash
 * (seq odd) is closed by this publish. Returns 0 or -EINVAL (n over
 * SHMKV_CTL_MAX_SEGMENTS, generation 0: nothing written). */
int ctl_publish(struct ctl *c, uint64_t generation, const shmkv_ctl_segment *segs, uint32_t n);
/* The published state, as the only writer sees it. */
uint64_t ctl_generation(const struct ctl *c);
int ctl_seq_odd(const struct ctl *c);
/* Applies mode and group to the file. */
int ctl_chmod(const struct ctl *c, mode_t mode, gid_t gid);
/* Unmaps (the file stays). */
void ctl_close(struct ctl *c);
/* Unlinks the file and unmaps it (drop); readers keep their mapping. */
int ctl_remove(struct ctl *c);

#endif /* LOADER_CTL_H */
