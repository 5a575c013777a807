/* vstream.h - verify an image while it is read: header first, then each
 * section's XXH3-64 and the structural walk (vwalk.h) fed from the
 * contiguous prefix read so far. Together: what `shmctl image verify`
 * (shmkv_verify) checks, so the loader publishes nothing verify rejects. */
#ifndef LOADER_VSTREAM_H
#define LOADER_VSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include <shmkv.h>

#include "vwalk.h"

struct vstream {
	uint8_t head[SHMKV_HEADER_SIZE]; /* the header block as read before the load */
	const shmkv_image_header *hdr;   /* = head */
	uint64_t size;                   /* image bytes */
	uint32_t next;                   /* next section to complete */
	uint64_t pos;                    /* bytes of section next fed up to this offset */
	int head_seen;                   /* the header block in the segment was compared */
	XXH3_state_t *st;
	struct vwalk walk;               /* padding, index, entries (vwalk.h) */
};

/* Checks the header block read from a file of src_size bytes: magic,
 * version, layout hash, header checksum, file_size == src_size, and the
 * section table geometry the streaming checks rely on. Returns 0 or SHMKV_E*
 * (or -ENOMEM) with the reason in why. */
int vstream_begin(struct vstream *v, const void *head, uint64_t src_size, char *why,
		  size_t why_len);
/* base[0, prefix) is read: hashes what is new, compares the digest of each
 * section that is complete, walks the structure as far as it can. Returns 0
 * or SHMKV_ECHECKSUM/SHMKV_ECORRUPT (a changed header block). A structural
 * problem does not stop the hashing: it is kept for vstream_end, so that a
 * damaged section is reported by its checksum first, as verify does. */
int vstream_feed(struct vstream *v, const uint8_t *base, uint64_t prefix, char *why,
		 size_t why_len);
/* All read: every section compared, shmkv_image_check(NOVERIFY) of the
 * header structure, then the rest of the walk and its counts. */
int vstream_end(struct vstream *v, const uint8_t *base, char *why, size_t why_len);
void vstream_free(struct vstream *v);

#endif /* LOADER_VSTREAM_H */
