/* shmkv/handle.h - the reader handle, the header and section checks
 * (FORMAT.md §11-12), and binding a handle to a checked image.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_HANDLE_H
#define SHMKV_HANDLE_H

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>

#include "errors.h"
#include "format.h"
#include "probe.h"
#include "protocol.h"
#include "trace.h"

/* Strict -std=c11 hides these Linux flags; their values are the kernel ABI on
 * the two architectures shmkv supports (x86-64, AArch64). */
#ifdef O_CLOEXEC
#define SHMKV__O_CLOEXEC O_CLOEXEC
#else
#define SHMKV__O_CLOEXEC 02000000
#endif
#ifdef MAP_POPULATE
#define SHMKV__MAP_POPULATE MAP_POPULATE
#else
#define SHMKV__MAP_POPULATE 0x8000
#endif

/* open flags (8 is SHMKV_ATTACH_VERIFY) */
#define SHMKV_OPEN_NOVERIFY 1u /* skip section checksums (header checksum is always checked) */
#define SHMKV_OPEN_POPULATE 2u /* prefault the whole mapping at open (after the advice) */
#define SHMKV_OPEN_DEEP 4u     /* also run the full structural walk (shmkv_verify) */
/* Huge pages now (MADV_COLLAPSE, Linux 6.1+): tmpfs files whatever
 * shmem_enabled says, others where CONFIG_READ_ONLY_THP_FOR_FS; copies the
 * pages once (about 3 GB/s); small pages where the kernel refuses. Needs
 * _DEFAULT_SOURCE or _GNU_SOURCE; ignored without. */
#define SHMKV_OPEN_HUGEPAGES 16u
#define SHMKV_OPEN_KNOWN_                                                                          \
	(SHMKV_OPEN_NOVERIFY | SHMKV_OPEN_POPULATE | SHMKV_OPEN_DEEP | SHMKV_OPEN_HUGEPAGES)

/* The address range of an attached handle's generation, shared with the
 * generations shmkv_detach hands out (range.h). */
typedef struct shmkv__range shmkv__range;

/* The handle (opaque). The lookup fields come first; shmkv__bind derives the
 * bounds a lookup checks once, so that a get pays a compare per offset. */
typedef struct shmkv {
	const uint8_t *buckets;   /* INDEX section */
	uint64_t bucket_count;
	uint64_t seed;
	size_t fast_key_len;      /* keys shorter than this take the hot get (lookup.h):
				     65536; 0 for test hashes (hash_bits < 64) and while
				     get probes are traced (trace.h) */
	const uint8_t *ent;       /* ENTRIES section start, ent_end its end */
	const uint8_t *ent_end;
	uint64_t ent_unit0;       /* ENTRIES offset / 8 (OUT records count 8-byte units) */
	uint64_t ent_units;       /* ENTRIES size / 8 */
	uint64_t ent_room;        /* ENTRIES size - 8: room for a key after an entry header */
	const struct shmkv *over; /* shmkv_delta_set: the delta read before the image (the
				     lower one when top is set), else NULL */
	const struct shmkv *top;  /* shmkv_delta_set2: the delta read before over, else NULL
				     (never set without over) */
	uint32_t max_probe;
	uint32_t expiry;          /* header flag EXPIRY (the clock is read only if set) */
	int64_t clock_pin;        /* shmkv_set_clock: the "now" of expiry, 0: CLOCK_REALTIME
				     (kept across refresh: bind leaves it) */
	const uint8_t *base;      /* image start */
	uint64_t size;            /* image bytes */
	uint32_t hash_bits;
	uint64_t entry_count;
	uint64_t entries_off, entries_end; /* ENTRIES section [off, end) */
	uint64_t values_off, values_end;   /* VALUES section [off, end) */
	void *map;                /* image mapping, munmap() on close */
	size_t map_len;
	shmkv__range *range;      /* attached and detached handles: the range map lies in,
				     given back on close (range.h), else NULL */
	uint64_t range_parts;     /* the parts of range whose overlays this handle reads */
	const shmkv_ctl *ctl;     /* attached handles: the control segment, else NULL */
	int ctl_fd;               /* attached handles: its descriptor (refresh fstats it) */
	uint64_t generation;      /* attached and detached handles: generation served, else 0 */
	unsigned flags;           /* attach flags, reused by refresh */
	size_t bound_key_len;     /* fast_key_len as shmkv__bind derived it from the image */
	unsigned usdt_gets;       /* 1 while a get probe was traced at the last gate (trace.h) */
	unsigned delta;           /* a delta image (FORMAT.md §19): tombstones are records */
	const uint8_t *kf;        /* a delta's FILTER section (u64 words), else NULL */
	uint64_t kf_words;
} shmkv;

/* SHMKV_USDT builds (trace.h): while a get probe is traced, this handle's
 * gets take the path that fires it. At bind and refresh. */
static inline void shmkv__usdt_gate(shmkv *db)
{
#if SHMKV_USDT
	db->usdt_gets = SHMKV__USDT_ON(get_hit) || SHMKV__USDT_ON(get_miss);
	db->fast_key_len = db->usdt_gets ? 0 : db->bound_key_len;
#else
	(void)db;
#endif
}

static inline const shmkv_image_header *shmkv__hdr(const shmkv *db)
{
	return (const shmkv_image_header *)(const void *)db->base;
}

static inline const char *shmkv__section_name(uint32_t kind)
{
	switch (kind) {
	case SHMKV_SECTION_INDEX: return "index";
	case SHMKV_SECTION_ENTRIES: return "entries";
	case SHMKV_SECTION_VALUES: return "values";
	case SHMKV_SECTION_FILTER: return "filter";
	default: return "unknown";
	}
}

static inline int shmkv__all_zero(const uint8_t *p, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* The magic, first of all checks (FORMAT.md §12): on the first min(size, 8)
 * bytes, so a short file that starts like an image is truncated instead. */
static inline int shmkv__magic_check(const void *prefix, uint64_t size, char *why, size_t why_len)
{
	if (memcmp(prefix, SHMKV_MAGIC, size < 8 ? (size_t)size : 8) != 0)
		return shmkv__fail(SHMKV_EMAGIC, why, why_len,
				   "bad magic at offset 0: not a shmkv image");
	return 0;
}

/* FORMAT.md §12's checks of size bytes at base (11-12 unless
 * SHMKV_OPEN_NOVERIFY). */
static inline int shmkv_header_check(const void *header, uint64_t size, char *why, size_t why_len);

static inline int shmkv_image_check(const void *base, uint64_t size, unsigned flags, char *why,
				    size_t why_len)
{
	const uint8_t *b = (const uint8_t *)base;
	const shmkv_image_header *h = (const shmkv_image_header *)base;
	int err = shmkv_header_check(base, size, why, why_len);
	if (err)
		return err;
	if (!(flags & SHMKV_OPEN_NOVERIFY)) {
		/* bytes no checksum covers (header tail, gaps, file tail) must be zero */
		uint64_t from = SHMKV_HEADER_USED;
		for (uint32_t i = 0; i <= h->section_count; i++) {
			uint64_t to = i < h->section_count ? h->sections[i].offset : h->file_size;
			for (uint64_t k = from; k < to; k++)
				if (b[k])
					return shmkv__fail(SHMKV_ECORRUPT, why, why_len,
							   "non-zero byte at offset %llu outside every "
							   "section", (unsigned long long)k);
			if (i < h->section_count)
				from = h->sections[i].offset + h->sections[i].size;
		}
		for (uint32_t i = 0; i < h->section_count; i++) {
			const shmkv_section_desc *s = &h->sections[i];
			uint64_t c = XXH3_64bits(b + s->offset, (size_t)s->size);
			if (c != s->checksum)
				return shmkv__fail(SHMKV_ECHECKSUM, why, why_len,
						   "section %s [%llu, +%llu) checksum mismatch: stored %016llx, "
						   "computed %016llx",
						   shmkv__section_name(s->kind), (unsigned long long)s->offset,
						   (unsigned long long)s->size, (unsigned long long)s->checksum,
						   (unsigned long long)c);
		}
	}
	return 0;
}

/* FORMAT.md §12's checks 1-10, on the first 512 bytes of an image of size
 * bytes: what a loader checks before the rest has arrived. */
static inline int shmkv_header_check(const void *header, uint64_t size, char *why, size_t why_len)
{
	const uint8_t *b = (const uint8_t *)header;
	const shmkv_image_header *h = (const shmkv_image_header *)header;
	int err = shmkv__magic_check(header, size, why, why_len);
	if (err)
		return err;
	if (size < SHMKV_HEADER_SIZE)
		return shmkv__fail(SHMKV_ETRUNCATED, why, why_len,
				   "image is %llu bytes, shorter than the %u-byte header",
				   (unsigned long long)size, SHMKV_HEADER_SIZE);
	if (h->format_version == 1)
		return shmkv__fail(SHMKV_EVERSION, why, why_len,
				   "image format version 1 is retired: convert it with '%s'",
				   SHMKV_RETIRED_V1_UPGRADE);
	if (h->format_version != SHMKV_FORMAT_VERSION)
		return shmkv__fail(SHMKV_EVERSION, why, why_len,
				   "image format version %u, this reader reads version %u",
				   h->format_version, SHMKV_FORMAT_VERSION);
	if (h->layout_hash != SHMKV_LAYOUT_HASH && h->layout_hash != SHMKV_DELTA_LAYOUT_HASH)
		return shmkv__fail(SHMKV_ELAYOUT, why, why_len,
				   "layout hash %016llx, this reader expects %016llx (an image) "
				   "or %016llx (a delta)",
				   (unsigned long long)h->layout_hash,
				   (unsigned long long)SHMKV_LAYOUT_HASH,
				   (unsigned long long)SHMKV_DELTA_LAYOUT_HASH);
	const int delta = h->layout_hash == SHMKV_DELTA_LAYOUT_HASH;
	const uint32_t nsec = delta ? SHMKV_DELTA_SECTIONS : 3;
	uint64_t hc = XXH3_64bits(b, offsetof(shmkv_image_header, header_checksum));
	if (hc != h->header_checksum)
		return shmkv__fail(SHMKV_ECHECKSUM, why, why_len,
				   "header checksum mismatch: stored %016llx, computed %016llx",
				   (unsigned long long)h->header_checksum, (unsigned long long)hc);
	if (h->file_size > size)
		return shmkv__fail(SHMKV_ETRUNCATED, why, why_len,
				   "image is %llu bytes, its header says %llu",
				   (unsigned long long)size, (unsigned long long)h->file_size);
	if (h->file_size < size)
		return shmkv__fail(SHMKV_ECORRUPT, why, why_len,
				   "%llu unexpected bytes after the image end at %llu",
				   (unsigned long long)(size - h->file_size),
				   (unsigned long long)h->file_size);
#define SHMKV__BAD(...) shmkv__fail(SHMKV_ECORRUPT, why, why_len, __VA_ARGS__)
	if (h->header_size != SHMKV_HEADER_SIZE)
		return SHMKV__BAD("header_size %u, expected %u", h->header_size, SHMKV_HEADER_SIZE);
	if (h->file_size % SHMKV_FILE_ALIGN)
		return SHMKV__BAD("image size %llu is not a multiple of %u",
				  (unsigned long long)h->file_size, SHMKV_FILE_ALIGN);
	if (h->file_size > SHMKV_MAX_IMAGE_SIZE)
		return SHMKV__BAD("image size %llu exceeds the format limit",
				  (unsigned long long)h->file_size);
	if (h->flags & ~(SHMKV_HFLAG_KNOWN | (delta ? SHMKV_HFLAG_DELTA : 0)))
		return SHMKV__BAD("unknown header flags %llx", (unsigned long long)h->flags);
	if (delta && !(h->flags & SHMKV_HFLAG_DELTA))
		return SHMKV__BAD("a delta's layout hash without the DELTA header flag");
	if (h->bucket_slots != SHMKV_BUCKET_BYTES)
		return SHMKV__BAD("bucket_slots %u, expected %u", h->bucket_slots, SHMKV_BUCKET_BYTES);
	if (h->hash_bits < 1 || h->hash_bits > 64)
		return SHMKV__BAD("hash_bits %u out of range 1..64", h->hash_bits);
	if (h->bucket_count < 1 || h->bucket_count > h->file_size / SHMKV_BUCKET_BYTES)
		return SHMKV__BAD("bucket_count %llu does not fit the image",
				  (unsigned long long)h->bucket_count);
	if (h->entry_count > h->bucket_count * SHMKV_MAX_RECORDS)
		return SHMKV__BAD("entry_count %llu exceeds the %llu index records",
				  (unsigned long long)h->entry_count,
				  (unsigned long long)(h->bucket_count * SHMKV_MAX_RECORDS));
	if (h->max_probe >= h->bucket_count)
		return SHMKV__BAD("max_probe %u not below bucket_count %llu", h->max_probe,
				  (unsigned long long)h->bucket_count);
	if (h->name[sizeof h->name - 1] != 0)
		return SHMKV__BAD("name is not NUL-terminated");
	const unsigned used = delta ? SHMKV_DELTA_WORDS : 0; /* reserved[] words a delta uses */
	if (h->reserved0 || !shmkv__all_zero((const uint8_t *)(h->reserved + used),
					     sizeof h->reserved - used * sizeof h->reserved[0]))
		return SHMKV__BAD("reserved header fields are not zero");
	if (delta && (!h->reserved[SHMKV_DELTA_BASE_SIZE] ||
		      h->reserved[SHMKV_DELTA_BASE_SIZE] % SHMKV_FILE_ALIGN ||
		      h->reserved[SHMKV_DELTA_BASE_SIZE] > SHMKV_MAX_IMAGE_SIZE))
		return SHMKV__BAD("delta names a base of %llu bytes, not an image size",
				  (unsigned long long)h->reserved[SHMKV_DELTA_BASE_SIZE]);
	if (delta && !h->reserved[SHMKV_DELTA_SEQ])
		return SHMKV__BAD("delta's place in its chain (seq) is 0");
	if (h->section_count != nsec)
		return SHMKV__BAD("section_count %u, %s has %u", h->section_count,
				  delta ? "a delta" : "an image", nsec);
	uint64_t prev_end = SHMKV_HEADER_SIZE;
	for (uint32_t i = 0; i < SHMKV_MAX_SECTIONS; i++) {
		const shmkv_section_desc *s = &h->sections[i];
		if (i >= h->section_count) {
			if (!shmkv__all_zero((const uint8_t *)s, sizeof *s))
				return SHMKV__BAD("unused section slot %u is not zero", i);
			continue;
		}
		const char *nm = shmkv__section_name(i + 1);
		if (s->kind != i + 1)
			return SHMKV__BAD("section %u has kind %u, expected %u (%s)", i, s->kind, i + 1, nm);
		if (s->flags)
			return SHMKV__BAD("section %s has unknown flags %x", nm, s->flags);
		if (i == 3 && (!s->size || s->size % 8))
			return SHMKV__BAD("filter section of %llu bytes: not a non-zero multiple of 8",
					  (unsigned long long)s->size);
		if (s->offset % 64 || s->offset < prev_end)
			return SHMKV__BAD("section %s offset %llu is misaligned or overlaps", nm,
					  (unsigned long long)s->offset);
		if (s->size > h->file_size || s->offset > h->file_size - s->size)
			return SHMKV__BAD("section %s [%llu, +%llu) runs past the image end %llu", nm,
					  (unsigned long long)s->offset, (unsigned long long)s->size,
					  (unsigned long long)h->file_size);
		prev_end = s->offset + s->size;
	}
	if (h->sections[0].size != h->bucket_count * SHMKV_BUCKET_BYTES)
		return SHMKV__BAD("index section is %llu bytes, %llu buckets need %llu",
				  (unsigned long long)h->sections[0].size,
				  (unsigned long long)h->bucket_count,
				  (unsigned long long)(h->bucket_count * SHMKV_BUCKET_BYTES));
	if (h->sections[0].offset % SHMKV_BUCKET_BYTES)
		return SHMKV__BAD("index section offset %llu is not a multiple of %u",
				  (unsigned long long)h->sections[0].offset, SHMKV_BUCKET_BYTES);
#undef SHMKV__BAD
	return 0;
}

/* Fills a handle from an image that passed shmkv_header_check. */
static inline void shmkv__bind(shmkv *db, const void *base, uint64_t size)
{
	const shmkv_image_header *h = (const shmkv_image_header *)base;
	db->base = (const uint8_t *)base;
	db->size = size;
	db->buckets = db->base + h->sections[0].offset;
	db->bucket_count = h->bucket_count;
	db->seed = h->hash_seed;
	db->hash_bits = h->hash_bits;
	db->max_probe = h->max_probe;
	db->entry_count = h->entry_count;
	db->entries_off = h->sections[1].offset;
	db->entries_end = h->sections[1].offset + h->sections[1].size;
	db->ent = db->base + db->entries_off;
	db->ent_end = db->base + db->entries_end;
	db->ent_unit0 = db->entries_off >> 3; /* sections are 64-aligned */
	db->ent_units = h->sections[1].size >> 3;
	db->ent_room = h->sections[1].size >= 8 ? h->sections[1].size - 8 : 0;
	db->values_off = h->sections[2].offset;
	db->values_end = h->sections[2].offset + h->sections[2].size;
	db->delta = h->layout_hash == SHMKV_DELTA_LAYOUT_HASH;
	db->kf = db->delta ? db->base + h->sections[3].offset : NULL;
	db->kf_words = db->delta ? h->sections[3].size / 8 : 0;
	db->over = db->top = NULL;
	db->expiry = (h->flags & SHMKV_HFLAG_EXPIRY) != 0;
	/* test hashes (hash_bits < 64) take the checked path, which applies them */
	db->fast_key_len = h->hash_bits == 64 ? (size_t)SHMKV_MAX_KEY_LEN + 1 : 0;
	db->bound_key_len = db->fast_key_len;
	shmkv__usdt_gate(db);
}

/* What a file is, from its st_mode, for messages ("a FIFO", "a directory"). */
static inline const char *shmkv_file_kind(unsigned mode)
{
	/* the st_mode type bits as Linux defines them: spelled out, because
	 * strict C11 headers hide S_ISSOCK and S_ISLNK */
	switch (mode & 0170000u) {
	case 0100000u: return "a regular file";
	case 0120000u: return "a symbolic link";
	case 0010000u: return "a FIFO";
	case 0040000u: return "a directory";
	case 0020000u: return "a character device";
	case 0060000u: return "a block device";
	case 0140000u: return "a socket";
	default: return "not a regular file";
	}
}

#endif /* SHMKV_HANDLE_H */
