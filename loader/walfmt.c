/* walfmt.c - the durable log's bytes (walfmt.h). Layout, little-endian:
 * head (80 bytes): "SHMKVWAL", u32 version 2, u32 head size 80, u64
 * base_sum, base_size, origin_sum, origin_size, chain_last, chain_seq,
 * u64 0, u64 XXH3 of the 72 bytes before; then records: u32 magic "WREC",
 * u32 flags (WAL_APPLIED), u64 seq, u64 len, len bytes, zero padding to 8,
 * u64 XXH3 (seeded with seq ^ len ^ flags << 56) of the len bytes; each
 * record's seq above the one before. The reader takes only what this writer
 * writes: a reserved word or padding that is not zero is not its log. */
#include "walfmt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <shmkv.h>
#include <xxhash.h>

#include "diag.h"

#define WAL_MAGIC "SHMKVWAL"
#define WAL_VERSION 2u
#define REC_MAGIC 0x43455257u /* "WREC" */

static void put64(unsigned char *p, uint64_t v)
{
	memcpy(p, &v, 8); /* little-endian hosts only, as the images */
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

void walfmt_head(const struct wal_head *h, unsigned char out[WAL_HEAD])
{
	memset(out, 0, WAL_HEAD);
	memcpy(out, WAL_MAGIC, 8);
	uint32_t v = WAL_VERSION, hs = WAL_HEAD;
	memcpy(out + 8, &v, 4);
	memcpy(out + 12, &hs, 4);
	put64(out + 16, h->base_sum);
	put64(out + 24, h->base_size);
	put64(out + 32, h->origin_sum);
	put64(out + 40, h->origin_size);
	put64(out + 48, h->chain_last);
	put64(out + 56, h->chain_seq);
	put64(out + 72, XXH3_64bits(out, 72));
}

int walfmt_head_sound(const unsigned char p[WAL_HEAD])
{
	uint32_t v, hs;
	memcpy(&v, p + 8, 4);
	memcpy(&hs, p + 12, 4);
	return !memcmp(p, WAL_MAGIC, 8) && v == WAL_VERSION && hs == WAL_HEAD &&
	       get64(p + 64) == 0 && get64(p + 72) == XXH3_64bits(p, 72);
}

static uint64_t rec_sum(uint64_t seq, uint32_t flags, const void *data, uint64_t len)
{
	return XXH3_64bits_withSeed(data, (size_t)len, seq ^ len ^ (uint64_t)flags << 56);
}

void walfmt_rec_head(unsigned char out[WAL_REC_HEAD], uint64_t seq, uint32_t flags,
		     uint64_t len)
{
	uint32_t m = REC_MAGIC;
	memcpy(out, &m, 4);
	memcpy(out + 4, &flags, 4);
	put64(out + 8, seq);
	put64(out + 16, len);
}

size_t walfmt_rec_tail(unsigned char out[WAL_REC_TAIL], uint64_t seq, uint32_t flags,
		       const void *data, uint64_t len)
{
	size_t pad = (size_t)((8 - len % 8) % 8);
	memset(out, 0, WAL_REC_TAIL);
	put64(out + pad, rec_sum(seq, flags, data, len));
	return pad + 8;
}

int walfmt_parse(const void *buf, size_t size, struct wal_head *h, struct wal_rec **recs,
		 size_t *n, size_t *end, const char **torn, char *why, size_t why_len)
{
	const unsigned char *p = buf;
	*recs = NULL;
	*n = 0;
	*end = 0;
	*torn = NULL;
	if (size < WAL_HEAD || !walfmt_head_sound(p))
		return diag_fail(SHMKV_ECORRUPT, why, why_len, "not a durable log of this loader "
				 "(its head is damaged or of another version)");
	*h = (struct wal_head){get64(p + 16), get64(p + 24), get64(p + 32), get64(p + 40),
			       get64(p + 48), get64(p + 56)};
	size_t at = WAL_HEAD, cap = 0;
	while (at < size) {
		uint32_t m;
		if (size - at < WAL_REC_HEAD + 8) {
			*torn = "a record cut short";
			break;
		}
		uint32_t flags;
		memcpy(&m, p + at, 4);
		memcpy(&flags, p + at + 4, 4);
		uint64_t seq = get64(p + at + 8), len = get64(p + at + 16);
		uint64_t pad = (8 - len % 8) % 8;
		if (m != REC_MAGIC) {
			*torn = "no record there";
			break;
		}
		if (len > size - at - WAL_REC_HEAD - 8 || pad + 8 > size - at - WAL_REC_HEAD - len) {
			*torn = "a record cut short";
			break;
		}
		const void *data = p + at + WAL_REC_HEAD;
		if (get64(p + at + WAL_REC_HEAD + len + pad) != rec_sum(seq, flags, data, len) ||
		    (flags & ~WAL_APPLIED)) {
			*torn = "a record whose checksum does not match";
			break;
		}
		/* the padding is outside the checksum: bytes there that are not
		 * the writer's zeros are damage the checksum cannot see */
		static const unsigned char zero[8];
		if (memcmp(p + at + WAL_REC_HEAD + len, zero, (size_t)pad)) {
			*torn = "a record whose padding is not zero";
			break;
		}
		/* the writer numbers records in order (wal.h: wal_append), and the
		 * replay skips those an overlay holds by their seq (overlay.c:
		 * recover_one): one out of order would be replayed over a later one */
		if (*n && seq <= (*recs)[*n - 1].seq) {
			*torn = "a record out of order (its seq not above the one before)";
			break;
		}
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			struct wal_rec *r = realloc(*recs, cap * sizeof *r);
			if (!r) {
				free(*recs);
				*recs = NULL;
				*n = 0;
				return diag_fail(-ENOMEM, why, why_len, "out of memory");
			}
			*recs = r;
		}
		(*recs)[(*n)++] = (struct wal_rec){seq, data, len, flags};
		at += WAL_REC_HEAD + len + pad + 8;
	}
	*end = at;
	return 0;
}
