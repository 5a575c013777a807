/* fuzz_wal.c - the bytes as a durable log, DURABLE/NAME.wal, after a crash
 * or written by hand, read by the loader's own reader (loader/walfmt.h:
 * walfmt_parse, what wal_read runs on the file's bytes before it cuts a torn
 * tail off) in a heap block of the input's size. Checked against the layout
 * of loader/README.md ("What is kept") and walfmt.c's head comment, read on
 * their own here: a damaged head is refused with a reason; otherwise the
 * records are the whole records from the head on, each inside the file,
 * their checksums right, and the log ends at the first bytes that are no
 * record (with a reason) or at the file's end; each record's seq above the
 * one before (the writer's order, which the replay relies on). Then what
 * was read is written again by the loader's writer (walfmt_head,
 * walfmt_rec_head, walfmt_rec_tail, as wal.c writes a file) and must read
 * back whole, the same records, the same bytes (a reserved word or padding
 * that is not zero is no log of that writer's). All of it on the bytes as they are, then with every checksum
 * recomputed (fix_checksums: what anyone who can write the file can do).
 * Seeds: logs of that writer (fuzz_corpus.c). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "walfmt.h"

#include "fuzz_util.h"

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* The reference: the head sound, and where the whole records end. */
static int ref_head(const uint8_t *p, size_t size)
{
	return size >= 80 && !memcmp(p, "SHMKVWAL", 8) && rd32(p + 8) == 2 && rd32(p + 12) == 80 &&
	       rd64(p + 64) == 0 && rd64(p + 72) == XXH3_64bits(p, 72);
}

/* The record at p + at, size bytes in all: its length in the file (header,
 * data, padding, checksum), or 0 when no whole sound record is there. */
static size_t ref_rec(const uint8_t *p, size_t size, size_t at)
{
	if (size - at < 32 || rd32(p + at) != 0x43455257u)
		return 0;
	uint32_t flags = rd32(p + at + 4);
	uint64_t seq = rd64(p + at + 8), len = rd64(p + at + 16);
	if (len > size - at - 32)
		return 0;
	uint64_t total = 24 + (len + 7) / 8 * 8 + 8;
	if (total > size - at || (flags & ~1u))
		return 0;
	for (uint64_t i = 24 + len; i < total - 8; i++)
		if (p[at + i])
			return 0; /* padding not zero */
	uint64_t sum = XXH3_64bits_withSeed(p + at + 24, (size_t)len, seq ^ len ^ (uint64_t)flags << 56);
	return rd64(p + at + total - 8) == sum ? (size_t)total : 0;
}

/* The records written again with the writer: a log of the same head. */
static uint8_t *rewrite(const struct wal_head *h, const struct wal_rec *recs, size_t n,
			size_t *size)
{
	size_t total = WAL_HEAD;
	for (size_t i = 0; i < n; i++)
		total += WAL_REC_HEAD + (size_t)(recs[i].len + 7) / 8 * 8 + 8;
	uint8_t *b = malloc(total), *o = b;
	FUZZ_CHECK(b, "malloc");
	walfmt_head(h, o);
	o += WAL_HEAD;
	for (size_t i = 0; i < n; i++) {
		unsigned char tail[WAL_REC_TAIL];
		walfmt_rec_head(o, recs[i].seq, recs[i].flags, recs[i].len);
		o += WAL_REC_HEAD;
		memcpy(o, recs[i].data, (size_t)recs[i].len);
		o += recs[i].len;
		size_t tl = walfmt_rec_tail(tail, recs[i].seq, recs[i].flags, recs[i].data,
					    recs[i].len);
		memcpy(o, tail, tl);
		o += tl;
	}
	FUZZ_CHECK((size_t)(o - b) == total, "the writer wrote %zu bytes, %zu expected",
		   (size_t)(o - b), total);
	*size = total;
	return b;
}

/* The checks on one log's bytes. */
static void check_log(const uint8_t *data, size_t size)
{
	uint8_t *p = fuzz_copy(data, size);
	struct wal_head h;
	struct wal_rec *recs = NULL;
	size_t n = 0, end = 0;
	const char *torn = NULL;
	char why[300] = "";
	int err = walfmt_parse(p, size, &h, &recs, &n, &end, &torn, why, sizeof why);
	int sound = ref_head(data, size);
	if (err) {
		FUZZ_CHECK(why[0], "error %d without a reason", err);
		FUZZ_CHECK(err == SHMKV_ECORRUPT && !sound, "refused (%d) a log whose head is sound: "
			   "%s", err, why);
		FUZZ_CHECK(!recs && !n, "records of a refused log");
		free(p);
		return;
	}
	FUZZ_CHECK(sound, "a damaged head taken");
	FUZZ_CHECK(h.base_sum == rd64(data + 16) && h.base_size == rd64(data + 24) &&
			   h.origin_sum == rd64(data + 32) && h.origin_size == rd64(data + 40) &&
			   h.chain_last == rd64(data + 48) && h.chain_seq == rd64(data + 56),
		   "the head is not the file's");
	/* every whole record from the head on, each inside the file */
	size_t at = WAL_HEAD, k = 0;
	for (size_t len; at < size && (len = ref_rec(data, size, at)) &&
			 (!k || rd64(data + at + 8) > recs[k - 1].seq);
	     at += len, k++) {
		FUZZ_CHECK(k < n, "record %zu at byte %zu left out", k, at);
		const struct wal_rec *r = &recs[k];
		FUZZ_CHECK((const uint8_t *)r->data == p + at + 24 && r->len == rd64(data + at + 16) &&
				   r->seq == rd64(data + at + 8) && r->flags == rd32(data + at + 4),
			   "record %zu is not the file's bytes at %zu", k, at);
	}
	FUZZ_CHECK(k == n, "%zu records read, %zu in the file", n, k);
	/* in the order the writer wrote them: recover_one (loader/overlay.c)
	 * skips the records an overlay holds by their seq */
	for (size_t i = 1; i < n; i++)
		FUZZ_CHECK(recs[i].seq > recs[i - 1].seq, "record %zu (seq %llu) after seq %llu", i,
			   (unsigned long long)recs[i].seq, (unsigned long long)recs[i - 1].seq);
	FUZZ_CHECK(end == at && end <= size, "the log ends at %zu, its whole records at %zu", end,
		   at);
	FUZZ_CHECK(!torn == (end == size), "a tail of %zu bytes %s a reason", size - end,
		   torn ? "with" : "without");
	FUZZ_CHECK(!torn || torn[0], "an empty reason");

	/* written again by the writer: read back whole, the same */
	size_t wsize;
	uint8_t *w = rewrite(&h, recs, n, &wsize);
	uint8_t *wp = fuzz_copy(w, wsize);
	struct wal_head h2;
	struct wal_rec *recs2 = NULL;
	size_t n2 = 0, end2 = 0;
	const char *torn2 = NULL;
	err = walfmt_parse(wp, wsize, &h2, &recs2, &n2, &end2, &torn2, why, sizeof why);
	FUZZ_CHECK(!err && !torn2 && end2 == wsize && n2 == n && !memcmp(&h, &h2, sizeof h),
		   "the writer's log does not read back whole (%d, %s)", err, torn2 ? torn2 : why);
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(recs2[i].seq == recs[i].seq && recs2[i].len == recs[i].len &&
				   recs2[i].flags == recs[i].flags &&
				   !memcmp(recs2[i].data, recs[i].data, (size_t)recs[i].len),
			   "record %zu differs when written again", i);
	/* the same bytes as the file's whole part */
	FUZZ_CHECK(wsize == end && !memcmp(w, data, WAL_HEAD), "written again: %zu bytes of %zu, "
		   "or another head", wsize, end);
	for (size_t i = 0, o = WAL_HEAD; i < n; i++) {
		size_t rl = WAL_REC_HEAD + (size_t)(recs[i].len + 7) / 8 * 8 + 8;
		FUZZ_CHECK(!memcmp(w + o, data + o, rl), "record %zu written again differs", i);
		o += rl;
	}
	free(recs2);
	free(wp);
	free(w);
	free(recs);
	free(p);
}

/* What anyone who can write DURABLE can do: the head's checksum and every
 * record's recomputed where the layout finds one (magic, length within the
 * file), so that what lies past the checksums is reached. In the target,
 * not a custom mutator, so an input replays as is. */
static void fix_checksums(uint8_t *p, size_t size)
{
	if (size < 80)
		return;
	uint64_t v = XXH3_64bits(p, 72);
	memcpy(p + 72, &v, 8);
	for (size_t at = 80; size - at >= 32 && rd32(p + at) == 0x43455257u;) {
		uint32_t flags = rd32(p + at + 4);
		uint64_t seq = rd64(p + at + 8), len = rd64(p + at + 16);
		if (len > size - at - 32 || 24 + (len + 7) / 8 * 8 + 8 > size - at)
			return;
		size_t total = (size_t)(24 + (len + 7) / 8 * 8 + 8);
		v = XXH3_64bits_withSeed(p + at + 24, (size_t)len, seq ^ len ^ (uint64_t)flags << 56);
		memcpy(p + at + total - 8, &v, 8);
		at += total;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_log(data, size);
	uint8_t *f = fuzz_copy(data, size);
	fix_checksums(f, size);
	check_log(f, size);
	free(f);
	return 0;
}
