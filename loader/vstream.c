/* vstream.c - streaming image verification (see vstream.h). */
#include "vstream.h"

#include <string.h>

int vstream_begin(struct vstream *v, const void *head, uint64_t src_size, char *why,
		  size_t why_len)
{
	memset(v, 0, sizeof *v);
	memcpy(v->head, head, sizeof v->head);
	const shmkv_image_header *h = (const shmkv_image_header *)(const void *)v->head;
	v->hdr = h;
	if (memcmp(h->magic, SHMKV_MAGIC, 8) != 0)
		return shmkv__fail(SHMKV_EMAGIC, why, why_len, "bad magic at offset 0: not a shmkv image");
	if (h->format_version != SHMKV_FORMAT_VERSION)
		return shmkv__fail(SHMKV_EVERSION, why, why_len,
				   "image format version %u, this loader reads version %u",
				   h->format_version, SHMKV_FORMAT_VERSION);
	if (h->layout_hash != SHMKV_LAYOUT_HASH)
		return shmkv__fail(SHMKV_ELAYOUT, why, why_len,
				   "layout hash %016llx, this loader expects %016llx",
				   (unsigned long long)h->layout_hash,
				   (unsigned long long)SHMKV_LAYOUT_HASH);
	uint64_t hc = XXH3_64bits(v->head, offsetof(shmkv_image_header, header_checksum));
	if (hc != h->header_checksum)
		return shmkv__fail(SHMKV_ECHECKSUM, why, why_len,
				   "header checksum mismatch: stored %016llx, computed %016llx",
				   (unsigned long long)h->header_checksum, (unsigned long long)hc);
	if (h->file_size > src_size)
		return shmkv__fail(SHMKV_ETRUNCATED, why, why_len,
				   "file is %llu bytes, its image header says %llu (truncated)",
				   (unsigned long long)src_size, (unsigned long long)h->file_size);
	if (h->file_size < src_size)
		return shmkv__fail(SHMKV_ECORRUPT, why, why_len,
				   "%llu unexpected bytes after the image end at %llu",
				   (unsigned long long)(src_size - h->file_size),
				   (unsigned long long)h->file_size);
	if (h->header_size != SHMKV_HEADER_SIZE || h->file_size % SHMKV_FILE_ALIGN ||
	    h->file_size > SHMKV_MAX_IMAGE_SIZE)
		return shmkv__fail(SHMKV_ECORRUPT, why, why_len,
				   "header_size %u or image size %llu invalid", h->header_size,
				   (unsigned long long)h->file_size);
	if (h->section_count < 1 || h->section_count > SHMKV_MAX_SECTIONS)
		return shmkv__fail(SHMKV_ECORRUPT, why, why_len, "section_count %u out of range",
				   h->section_count);
	uint64_t prev_end = SHMKV_HEADER_SIZE;
	for (uint32_t i = 0; i < h->section_count; i++) {
		const shmkv_section_desc *s = &h->sections[i];
		if (s->offset < prev_end || s->size > h->file_size ||
		    s->offset > h->file_size - s->size)
			return shmkv__fail(SHMKV_ECORRUPT, why, why_len,
					   "section %s [%llu, +%llu) overlaps or runs past the image "
					   "end %llu", shmkv__section_name(s->kind),
					   (unsigned long long)s->offset, (unsigned long long)s->size,
					   (unsigned long long)h->file_size);
		prev_end = s->offset + s->size;
	}
	v->size = h->file_size;
	v->st = XXH3_createState();
	if (!v->st)
		return shmkv__fail(-ENOMEM, why, why_len, "out of memory");
	XXH3_64bits_reset(v->st);
	v->pos = h->sections[0].offset;
	return 0;
}

int vstream_feed(struct vstream *v, const uint8_t *base, uint64_t prefix, char *why,
		 size_t why_len)
{
	if (!v->head_seen && prefix >= SHMKV_HEADER_SIZE) {
		if (memcmp(base, v->head, SHMKV_HEADER_SIZE) != 0)
			return shmkv__fail(SHMKV_ECORRUPT, why, why_len,
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
			return shmkv__fail(SHMKV_ECHECKSUM, why, why_len,
					   "section %s [%llu, +%llu) checksum mismatch: stored %016llx, "
					   "computed %016llx", shmkv__section_name(s->kind),
					   (unsigned long long)s->offset, (unsigned long long)s->size,
					   (unsigned long long)s->checksum, (unsigned long long)c);
		XXH3_64bits_reset(v->st);
		v->next++;
	}
	return 0;
}

int vstream_end(struct vstream *v, const uint8_t *base, char *why, size_t why_len)
{
	int err = vstream_feed(v, base, v->size, why, why_len);
	if (err)
		return err;
	if (!v->head_seen || v->next != v->hdr->section_count)
		return shmkv__fail(SHMKV_ETRUNCATED, why, why_len, "image not completely read");
	return shmkv_image_check(base, v->size, SHMKV_OPEN_NOVERIFY, why, why_len);
}

void vstream_free(struct vstream *v)
{
	if (v->st)
		XXH3_freeState(v->st);
	v->st = NULL;
}
