/* vwalk.h - the full structural check of `shmctl image verify`
 * (lib/shmkv/verify.h: shmkv_verify, FORMAT.md §13 steps 2-4), run as the
 * image is read, so that it overlaps the reads as the section hashing does.
 *
 * shmkv_verify walks the index first, then the entries, each time reading
 * the whole image out of order: after a 2 GiB read that costs more than the
 * read itself. This walk takes the same checks in file order, on the bytes
 * just read: padding as it arrives; each index bucket's own rules; each entry
 * decoded, its padding and text checked and its key looked up (which must
 * find this very entry, through a slot whose tag, distance and announcement
 * are right). The slots are then one-to-one with the entries by counting
 * (full slots == entries walked == entry_count), which is what shmkv_verify's
 * per-slot decode establishes. A lookup whose candidates lie beyond what is
 * read, and everything after the first shared value (VALUES comes last), wait
 * for the end of the read. The verdict is shmkv_verify's; the wording of the
 * reason may differ (tests/loader/reject_test.cc: Reject.AgreesWithVerify).
 *
 * Format v2 (FORMAT.md §17, 128-byte buckets of records): only the padding
 * is checked as it arrives; vwalk_end then runs lib's shmkv_verify on the
 * whole image (the one owner of the v2 rules), one more pass over it in
 * memory (tests/loader/v2_test.cc).
 *
 * Bytes not yet read are never looked at; every offset is bounds-checked
 * before it is followed. */
#ifndef LOADER_VWALK_H
#define LOADER_VWALK_H

#include <stddef.h>
#include <stdint.h>

#include <shmkv.h>

#define VWALK_BATCH 32 /* lookups whose index buckets are prefetched together */

struct vwalk_pending {
	uint64_t pos, hv; /* entry offset, key hash */
	shmkv_entry e;
};

struct vwalk {
	shmkv db;                 /* lookup fields bound over the segment (first feed) */
	int bound;
	const shmkv_image_header *h; /* the header as checked (vstream's copy) */
	uint64_t size;            /* image bytes */
	uint64_t gap[5][2];       /* padding ranges outside the sections, in file order */
	unsigned ngap, gi;        /* ranges, next range */
	uint64_t gpos;            /* next padding byte to check in gap[gi] */
	uint64_t bucket;          /* next index bucket */
	uint64_t filled;          /* full slots */
	uint64_t pos;             /* next ENTRIES offset */
	uint64_t n, shared;       /* entries walked, of which with a shared value */
	uint32_t max_d;           /* largest displacement of a found slot */
	struct vwalk_pending pend[VWALK_BATCH]; /* checked, lookup not done yet */
	unsigned npend;
	uint64_t *deferred;       /* entries whose lookup waits for the whole image */
	size_t ndeferred, capdeferred;
	int err;                  /* first problem (0: none); the walk stops there */
	char why[400];
};

/* Sets up the walk of an image whose header h (checked by
 * shmkv_header_check) stays valid while the walk lives. */
void vwalk_begin(struct vwalk *w, const shmkv_image_header *h);
/* base[0, prefix) is read (prefix == the image size: all of it). Checks what
 * became checkable. A problem is kept (vwalk_end reports it) and stops the
 * walk; returns it (0 or SHMKV_ECORRUPT / -ENOMEM). */
int vwalk_feed(struct vwalk *w, const uint8_t *base, uint64_t prefix);
/* All read and fed: the deferred lookups, then the counts. Returns 0 or the
 * first problem with why. */
int vwalk_end(struct vwalk *w, const uint8_t *base, char *why, size_t why_len);
void vwalk_free(struct vwalk *w);

#endif /* LOADER_VWALK_H */
