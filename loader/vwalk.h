/* vwalk.h - the full structural check of `shmctl image verify`
 * (lib/shmkv/verify.h: shmkv_verify, FORMAT.md §13), fed as the image is
 * read: the padding outside the sections is checked as it arrives;
 * vwalk_end then runs lib's shmkv_verify on the whole image (the one owner
 * of the index, record and entry rules), one more pass over it in memory
 * (tests/loader/serve_test.cc, tests/loader/reject_test.cc: Reject.AgreesWithVerify).
 *
 * Bytes not yet read are never looked at. */
#ifndef LOADER_VWALK_H
#define LOADER_VWALK_H

#include <stddef.h>
#include <stdint.h>

#include <shmkv.h>

struct vwalk {
	shmkv db;                 /* bound over the segment (first feed) */
	int bound;
	const shmkv_image_header *h; /* the header as checked (vstream's copy) */
	uint64_t size;            /* image bytes */
	/* padding ranges outside the sections, in file order: the header's
	 * tail, before each section, after the last (a delta has 4 sections,
	 * FORMAT.md §19) */
	uint64_t gap[SHMKV_MAX_SECTIONS + 2][2];
	unsigned ngap, gi;        /* ranges, next range */
	uint64_t gpos;            /* next padding byte to check in gap[gi] */
	int err;                  /* first problem (0: none); the walk stops there */
	char why[400];
};

/* Sets up the walk of an image whose header h (checked by
 * shmkv_header_check) stays valid while the walk lives. */
void vwalk_begin(struct vwalk *w, const shmkv_image_header *h);
/* base[0, prefix) is read (prefix == the image size: all of it). Checks what
 * became checkable. A problem is kept (vwalk_end reports it) and stops the
 * walk; returns it (0 or SHMKV_ECORRUPT). */
int vwalk_feed(struct vwalk *w, const uint8_t *base, uint64_t prefix);
/* All read and fed: shmkv_verify over the whole image. Returns 0 or the
 * first problem with why. */
int vwalk_end(struct vwalk *w, const uint8_t *base, char *why, size_t why_len);
void vwalk_free(struct vwalk *w);

#endif /* LOADER_VWALK_H */
