/* vstream.c - streaming image verification (see vstream.h). */
#include "vstream.h"

#include "diag.h"

#include <string.h>

int vstream_begin(struct vstream *v, const void *head, uint64_t src_size, char *why,
		  size_t why_len)
{
	memset(v, 0, sizeof *v);
	memcpy(v->head, head, sizeof v->head);
	const shmkv_image_header *h = (const shmkv_image_header *)(const void *)v->head;
	v->hdr = h;
	/* the same header checks as every reader, before the rest arrives */
	int err = shmkv_header_check(v->head, src_size, why, why_len);
	if (err)
		return err;
	v->size = h->file_size;
	v->st = XXH3_createState();
	if (!v->st)
		return diag_fail(-ENOMEM, why, why_len, "out of memory");
	XXH3_64bits_reset(v->st);
	v->pos = h->sections[0].offset;
	vwalk_begin(&v->walk, h);
	return 0;
}

int vstream_feed(struct vstream *v, const uint8_t *base, uint64_t prefix, char *why,
		 size_t why_len)
{
	if (!v->head_seen && prefix >= SHMKV_HEADER_SIZE) {
		if (memcmp(base, v->head, SHMKV_HEADER_SIZE) != 0)
			return diag_fail(SHMKV_ECORRUPT, why, why_len,
					   "image header changed while the file was read (rewritten "
					   "in place?)");
		v->head_seen = 1;
	}
	const shmkv_image_header *h = v->hdr;
	while (v->next < h->section_count) {
		const shmkv_section_desc *s = &h->sections[v->next];
		uint64_t end = s->offset + s->size;
		if (v->pos < s->offset)
			v->pos = s->offset;
		uint64_t upto = prefix < end ? prefix : end;
		if (upto > v->pos) {
			XXH3_64bits_update(v->st, base + v->pos, (size_t)(upto - v->pos));
			v->pos = upto;
		}
		if (v->pos < end)
			break;
		uint64_t c = XXH3_64bits_digest(v->st);
		if (c != s->checksum)
			return diag_fail(SHMKV_ECHECKSUM, why, why_len,
					   "section %s [%llu, +%llu) checksum mismatch: stored %016llx, "
					   "computed %016llx", shmkv_section_name(s->kind),
					   (unsigned long long)s->offset, (unsigned long long)s->size,
					   (unsigned long long)s->checksum, (unsigned long long)c);
		XXH3_64bits_reset(v->st);
		v->next++;
	}
	/* after the hashing, while these bytes are still in the cache; a problem
	 * is kept in v->walk for vstream_end() */
	if (v->head_seen)
		vwalk_feed(&v->walk, base, prefix);
	return 0;
}

int vstream_end(struct vstream *v, const uint8_t *base, char *why, size_t why_len)
{
	int err = vstream_feed(v, base, v->size, why, why_len);
	if (err)
		return err;
	if (!v->head_seen || v->next != v->hdr->section_count)
		return diag_fail(SHMKV_ETRUNCATED, why, why_len, "image not completely read");
	err = shmkv_image_check(base, v->size, SHMKV_OPEN_NOVERIFY, why, why_len);
	if (err)
		return err;
	return vwalk_end(&v->walk, base, why, why_len);
}

void vstream_free(struct vstream *v)
{
	if (v->st)
		XXH3_freeState(v->st);
	v->st = NULL;
	vwalk_free(&v->walk);
}
