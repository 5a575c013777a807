/* vwalk.c - the structural check, fed as the image is read (see vwalk.h). */
#include "vwalk.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"

/* gap gi of ngap: the header's, between sections (a delta has four, lib/
 * FORMAT.md §19), or after the last */
static const char *gap_name(unsigned gi, unsigned ngap)
{
	return gi == 0 ? "header" : gi + 1 == ngap ? "trailing" : "inter-section";
}

void vwalk_begin(struct vwalk *w, const shmkv_image_header *h)
{
	memset(w, 0, sizeof *w);
	w->h = h;
	w->size = h->file_size;
	/* FORMAT.md §13 step 2: header bytes [512, 4096), the gaps before and
	 * between the sections, and after the last one (as verify.h) */
	uint64_t prev = SHMKV_HEADER_SIZE;
	w->gap[0][0] = SHMKV_HEADER_USED;
	w->gap[0][1] = SHMKV_HEADER_SIZE;
	uint32_t i = 0;
	for (; i < h->section_count && i < SHMKV_MAX_SECTIONS; i++) {
		w->gap[1 + i][0] = prev;
		w->gap[1 + i][1] = h->sections[i].offset;
		prev = h->sections[i].offset + h->sections[i].size;
	}
	w->gap[1 + i][0] = prev;
	w->gap[1 + i][1] = h->file_size;
	w->ngap = 2 + i;
}

static int fail(struct vwalk *w, int err)
{
	w->err = err;
	return err;
}

int vwalk_feed(struct vwalk *w, const uint8_t *base, uint64_t prefix)
{
	if (w->err)
		return w->err;
	if (prefix > w->size)
		prefix = w->size;
	if (!w->bound) {
		/* the caller compared the segment's header block with h: only
		 * the header is checked again here (no checksums, nothing else read) */
		int berr = shmkv_bind_mem(&w->db, base, w->size, SHMKV_OPEN_NOVERIFY, w->why,
					  sizeof w->why);
		if (berr)
			return fail(w, berr);
		w->bound = 1;
	}
	const shmkv *db = &w->db;
	int err;
	/* padding, as it arrives */
	while (w->gi < w->ngap) {
		uint64_t from = w->gap[w->gi][0], to = w->gap[w->gi][1];
		if (w->gpos > from)
			from = w->gpos;
		uint64_t upto = to < prefix ? to : prefix;
		if (upto > from) {
			err = shmkv_zero_check(db, from, upto, gap_name(w->gi, w->ngap), w->why,
						sizeof w->why);
			if (err)
				return fail(w, err);
		}
		if (upto < to) {
			w->gpos = upto > from ? upto : from;
			break;
		}
		w->gi++;
		w->gpos = 0;
	}
	return 0;
}

int vwalk_end(struct vwalk *w, const uint8_t *base, char *why, size_t why_len)
{
	int err = vwalk_feed(w, base, w->size);
	/* lib's one owner of the index, record and entry rules (FORMAT.md
	 * §13), on the whole image in memory, as `shmctl image verify` does */
	if (!err)
		err = shmkv_verify(&w->db, w->why, sizeof w->why);
	return err ? diag_fail(err, why, why_len, "%s", w->why) : 0;
}

void vwalk_free(struct vwalk *w)
{
	(void)w;
}
