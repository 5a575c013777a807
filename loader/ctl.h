/* ctl.h - the loader's control segments ROOT/NAME.ctl (lib/shmkv/protocol.h):
 * creating, mapping and publishing. The seqcount itself, writer and reader
 * side, is lib/shmkv/ctl.h's (shmkv_ctl_publish, shmkv_ctl_read).
 *
 * The file is the loader's, but ROOT is root's or ours and an operator may
 * still truncate, remove or replace NAME.ctl by mistake: before each publish
 * the loader fstat's its descriptor (size, link count) and checks the name
 * still names it, so it never touches a truncated mapping (SIGBUS). A file
 * that went wrong is retired where its mapping is still whole (readers of it
 * get SHMKV_ESTALE at their next refresh) and a new one is made in its place
 * (logged); readers attach to the new one. */
#ifndef LOADER_CTL_H
#define LOADER_CTL_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include <shmkv.h>

struct ctl {
	shmkv_ctl *map; /* PROT_READ|PROT_WRITE, MAP_SHARED; NULL = none */
	int fd;         /* the file mapped, for fstat before each publish; -1 = none */
	int root_fd;    /* ROOT (borrowed: the loader's, trustdir.h) */
	uint64_t gen;   /* the generation published last (the only writer's count) */
	mode_t mode;    /* of the file, kept when it is made anew */
	gid_t gid;
	uint32_t version; /* protocol of the file (lib/PROTOCOL.md): 1, or 2 for a cache
			     with changes; 0: 1 */
	char name[SHMKV_CACHE_NAME_MAX + 1];
	char path[PATH_MAX];
};

/* Creates ROOT/NAME.ctl once (shmkv_ctl_init: this uid as its owner):
 * writes a temporary file in root_fd, then renames it into place without
 * replacing anything (readers map the file forever). The new segment has
 * generation 0. Returns 0, -EEXIST, -errno. */
int ctl_create(int root_fd, const char *root, const char *name, mode_t mode, gid_t gid,
	       struct ctl *out, char *why, size_t why_len);
/* Maps an existing ROOT/NAME.ctl read-write (restart). Returns 0, -errno, or
 * SHMKV_EPROTO (not a control segment of this protocol version and layout). */
int ctl_open(int root_fd, const char *root, const char *name, struct ctl *out, char *why,
	     size_t why_len);
/* Publishes generation with segs[0..n) (n may be 0: nothing to map), this
 * pid and the time, with shmkv_ctl_publish(), after checking the file (see
 * above; a new one is made if it went wrong). A section left open by a crash
 * (seq odd) is closed by this publish. Returns 0; -EINVAL (n over
 * SHMKV_CTL_MAX_SEGMENTS, generation 0: nothing written); -errno when the
 * file went wrong and no new one could be made (why says what; nothing
 * published, c->map NULL). */
int ctl_publish(struct ctl *c, uint64_t generation, const shmkv_ctl_segment *segs, uint32_t n,
		char *why, size_t why_len);
/* ctl_publish() under protocol version (1 or 2): a file of another
 * version is replaced by a new one already holding this publish, the old
 * one retired just before the rename (its readers get SHMKV_ESTALE at
 * their next refresh; readers that speak only 1 then get SHMKV_EPROTO at
 * attach). Returns as ctl_publish(); on error the old file is unchanged
 * (or retired, when the rename itself failed) and c maps it. */
int ctl_publish_version(struct ctl *c, uint32_t version, uint64_t generation,
			const shmkv_ctl_segment *segs, uint32_t n, char *why, size_t why_len);
/* The protocol version of the file (or of the next one made). */
uint32_t ctl_version(const struct ctl *c);
/* The published state, as the only writer sees it. */
uint64_t ctl_generation(const struct ctl *c);
int ctl_seq_odd(const struct ctl *c);
/* Applies mode and group to the file. */
int ctl_chmod(struct ctl *c, mode_t mode, gid_t gid);
/* Unmaps (the file stays). */
void ctl_close(struct ctl *c);
/* Retires the file (SHMKV_CTL_RETIRED: readers of it get SHMKV_ESTALE at
 * their next refresh), unlinks it and unmaps it (drop). */
int ctl_remove(struct ctl *c);

#endif /* LOADER_CTL_H */
