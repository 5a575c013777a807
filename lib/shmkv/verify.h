/* shmkv/verify.h - the full structural check (FORMAT.md §13) behind
 * `shmctl image verify`, SHMKV_OPEN_DEEP and the loader. Unlike the lookup
 * path, it checks everything, names the first problem and never crashes on
 * a damaged image.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_VERIFY_H
#define SHMKV_VERIFY_H

#include "lookup.h"

/* Checks that the bytes [from, to) of the image are zero (padding). */
static inline int shmkv__zero_range(const shmkv *db, uint64_t from, uint64_t to, const char *what,
				    char *why, size_t why_len)
{
	for (uint64_t i = from; i < to; i++)
		if (db->base[i])
			return shmkv__fail(SHMKV_ECORRUPT, why, why_len,
					   "non-zero byte at offset %llu in %s padding",
					   (unsigned long long)i, what);
	return 0;
}

/* The header's unused tail, the gaps between sections and the file's tail
 * are zero. */
static inline int shmkv__verify_padding(const shmkv *db, char *why, size_t why_len)
{
	const shmkv_image_header *h = shmkv__hdr(db);
	int err = shmkv__zero_range(db, SHMKV_HEADER_USED, SHMKV_HEADER_SIZE, "header", why, why_len);
	uint64_t prev = SHMKV_HEADER_SIZE;
	for (uint32_t i = 0; !err && i < h->section_count; i++) {
		err = shmkv__zero_range(db, prev, h->sections[i].offset, "inter-section", why, why_len);
		prev = h->sections[i].offset + h->sections[i].size;
	}
	if (!err)
		err = shmkv__zero_range(db, prev, h->file_size, "trailing", why, why_len);
	return err;
}

/* ENTRIES in image order (FORMAT.md §7: zero words skipped), each entry
 * decoded, its padding zero, and its key's OUT record pointing at it. *n:
 * the entries walked. */
static inline int shmkv__verify_entries(const shmkv *db, uint64_t *n, char *why, size_t why_len)
{
	uint64_t pos = db->entries_off;
	*n = 0;
	while (pos < db->entries_end) {
		uint64_t w, rec = 0, u = 0;
		memcpy(&w, db->base + pos, 8);
		if (w == 0) {
			pos += 8;
			continue;
		}
		shmkv__entry e;
		memset(&e, 0, sizeof e); /* GCC -O3 cannot see decode fills it on success */
		int err = shmkv__entry_decode(db, pos, &e, why, why_len);
		if (err)
			return err;
		const shmkv_entry_header *eh = (const shmkv_entry_header *)(const void *)(db->base + pos);
		uint64_t vpos = pos + shmkv__value_pos(eh);
		uint64_t vend = e.value.shared ? vpos + 8
					       : e.value_off + shmkv__stored_len(eh->type, e.value.size);
		err = shmkv__zero_range(db, pos + sizeof *eh + eh->key_len, vpos, "entry", why, why_len);
		if (!err)
			err = shmkv__zero_range(db, vend, e.end, "entry", why, why_len);
		if (err)
			return err;
		if (!shmkv__find(db, e.key, e.key_len, &rec, NULL, NULL, 0) &&
		    (db->base[rec] & SHMKV_REC_OUT))
			memcpy(&u, db->base + rec + 1, 5);
		if (!u || (u << 3) != pos)
			return shmkv__fail(SHMKV_ECORRUPT, why, why_len,
					   "entry at %llu: no OUT record of its key points at it",
					   (unsigned long long)pos);
		(*n)++;
		pos = e.end;
	}
	return 0;
}

/* One record of bucket b (record i, decoded into r): its value (deep,
 * UTF-8), its zero padding, its expiry, its directory tag and home against
 * its key's hash, its displacement announced at home, and a lookup of its
 * key finding it here.
 * Sets *dist; counts OUT entries and their shared values. */
static inline int shmkv__verify_record(const shmkv *db, uint64_t b, unsigned i,
					const shmkv__rec *r, uint64_t *dist, uint64_t *shared,
					char *why, size_t why_len)
{
#define SHMKV__BADV(...) shmkv__fail(SHMKV_ECORRUPT, why, why_len, __VA_ARGS__)
	const shmkv_image_header *h = shmkv__hdr(db);
	const uint8_t *bk = shmkv__bucket(db, b);
	const uint64_t at = (uint64_t)(bk + r->pos - db->base);
	const uint8_t *key, *e = NULL;
	size_t key_len;
	char sub[200];
	if ((r->kind & SHMKV_REC_EXPIRES) && r->expires == 0)
		return SHMKV__BADV("index bucket %llu record %u: expiry 0", (unsigned long long)b, i);
	if (r->kind & SHMKV_REC_OUT) {
		shmkv__entry ent;
		memset(&ent, 0, sizeof ent); /* GCC 12 -O3 cannot see decode fills it on success */
		int err = shmkv__entry_decode(db, r->unit << 3, &ent, sub, sizeof sub);
		if (err)
			return shmkv__fail(err, why, why_len, "index bucket %llu record %u: %s",
					   (unsigned long long)b, i, sub);
		if (!(r->kind & SHMKV_REC_TOMB) != (ent.value.type != SHMKV_TYPE_TOMBSTONE))
			return SHMKV__BADV("index bucket %llu record %u: %s record, its entry at "
					   "%llu %s", (unsigned long long)b, i,
					   r->kind & SHMKV_REC_TOMB ? "a tombstone" : "an upsert",
					   (unsigned long long)(r->unit << 3),
					   r->kind & SHMKV_REC_TOMB ? "holds a value"
								   : "is a tombstone's");
		e = db->base + (r->unit << 3);
		key = ent.key;
		key_len = ent.key_len;
		*shared += ent.value.shared;
	} else {
		key = bk + r->key_pos;
		key_len = r->key_len;
		for (unsigned k = r->key_pos + r->key_len; k < r->val_pos; k++)
			if (bk[k])
				return SHMKV__BADV("non-zero byte at offset %llu in record padding",
						   (unsigned long long)(bk + k - db->base));
	}
	shmkv_value v;
	int err = r->kind & SHMKV_REC_TOMB ? 0 /* no value (FORMAT.md §19.2) */
		  : shmkv__rec_value(db, bk, r, e, SHMKV__SHAPE_DEEP, &v, sub, sizeof sub);
	if (err)
		return shmkv__fail(err, why, why_len, "index bucket %llu record %u: %s",
				   (unsigned long long)b, i, sub);
	const unsigned t = shmkv__dir(bk, i) >> SHMKV_DIR_TAG_SHIFT;
	uint64_t hv = shmkv__hash(db->seed, db->hash_bits, key, key_len);
	if (db->delta && !shmkv__kf_maybe(db, hv))
		return SHMKV__BADV("index bucket %llu record %u: its key's bits are not set in "
				   "the delta's filter (word %llu)", (unsigned long long)b, i,
				   (unsigned long long)shmkv__kf_word(hv, db->kf_words));
	uint64_t tag = shmkv__tag(hv);
	if (t != shmkv__dir_tag(tag) >> SHMKV_DIR_TAG_SHIFT)
		return SHMKV__BADV("index bucket %llu record %u: directory tag bits %03x, key "
				   "hashes to tag %04llx (low 9 bits %03llx)",
				   (unsigned long long)b, i, t, (unsigned long long)tag,
				   (unsigned long long)(tag & 0x1ff));
	uint64_t home = shmkv__home(hv, db->bucket_count);
	uint64_t d = b >= home ? b - home : b + db->bucket_count - home;
	if (d > h->max_probe)
		return SHMKV__BADV("index bucket %llu record %u: key is %llu buckets from home, "
				   "max_probe is %u", (unsigned long long)b, i,
				   (unsigned long long)d, h->max_probe);
	if (d && shmkv__displaced(shmkv__bucket(db, home), tag, h->max_probe) < d)
		return SHMKV__BADV("index bucket %llu record %u: key displaced %llu buckets, but "
				   "its home bucket %llu does not announce it",
				   (unsigned long long)b, i, (unsigned long long)d,
				   (unsigned long long)home);
	uint64_t found = 0;
	err = shmkv__find(db, key, key_len, &found, NULL, NULL, 0);
	if (err || found != at)
		return SHMKV__BADV("index record at %llu: lookup of its key does not find it%s",
				   (unsigned long long)at, !err ? " (duplicate key)" : "");
	*dist = d;
	return 0;
#undef SHMKV__BADV
}

/* The index: every bucket's head (count, D and filter), its directory
 * and records (FORMAT.md §6: ascending, not overlapping, zero gaps and
 * tail); the counts and the longest probe against the header; ENTRIES
 * holds exactly the OUT records' entries. */
static inline int shmkv__verify_index(const shmkv *db, char *why, size_t why_len)
{
#define SHMKV__BADV(...) shmkv__fail(SHMKV_ECORRUPT, why, why_len, __VA_ARGS__)
	const shmkv_image_header *h = shmkv__hdr(db);
	uint64_t n = 0, outs = 0, shared = 0, expiring = 0;
	uint32_t max_d = 0;
	for (uint64_t b = 0; b < db->bucket_count; b++) {
		const uint8_t *bk = shmkv__bucket(db, b);
		const unsigned disp = bk[1];
		if (disp > h->max_probe) /* 255 ("up to max_probe") needs max_probe >= 255 too */
			return SHMKV__BADV("index bucket %llu: displacement %u exceeds max_probe %u",
					   (unsigned long long)b, disp, h->max_probe);
		if (!disp && !shmkv__all_zero(bk + 2, SHMKV_FILTER_BITS / 8))
			return SHMKV__BADV("index bucket %llu: filter bits without displaced keys",
					   (unsigned long long)b);
		const unsigned nr = bk[0];
		if (nr > SHMKV_MAX_RECORDS)
			return SHMKV__BADV("index bucket %llu: %u records, at most %u fit",
					   (unsigned long long)b, nr, SHMKV_MAX_RECORDS);
		/* the record area [dir_end, 128): offs ascending from dir_end,
		 * no record overlapping the next, every byte between them 0 */
		unsigned pos = shmkv__dir_end(nr);
		for (unsigned i = 0; i < nr; i++) {
			const unsigned off = shmkv__dir_off(bk, i);
			if (i ? off <= shmkv__dir_off(bk, i - 1) : off < pos)
				return SHMKV__BADV("index bucket %llu record %u at +%u: %s",
						   (unsigned long long)b, i, off,
						   i ? "offsets not in ascending order"
						     : "starts inside the directory");
		}
		for (unsigned i = 0; i < nr; i++) {
			const unsigned off = shmkv__dir_off(bk, i);
			if (off < pos)
				return SHMKV__BADV("index bucket %llu record %u at +%u: overlaps "
						   "the record before (ends at +%u)",
						   (unsigned long long)b, i, off, pos);
			const unsigned gap = off < SHMKV_BUCKET_BYTES ? off : SHMKV_BUCKET_BYTES;
			if (!shmkv__all_zero(bk + pos, gap - pos))
				return SHMKV__BADV("non-zero byte in bucket %llu's record area "
						   "before record %u (+%u..+%u)",
						   (unsigned long long)b, i, pos, off);
			shmkv__rec r;
			if (!shmkv__rec_decode(bk, nr, off, db->delta, &r))
				return SHMKV__BADV("index bucket %llu record %u at +%u: malformed "
						   "(kind %02x) or past the bucket's end",
						   (unsigned long long)b, i, off,
						   off < SHMKV_BUCKET_BYTES ? bk[off] : 0u);
			uint64_t d = 0;
			int err = shmkv__verify_record(db, b, i, &r, &d, &shared, why, why_len);
			if (err)
				return err;
			if (d > max_d)
				max_d = (uint32_t)d;
			outs += (r.kind & SHMKV_REC_OUT) != 0;
			expiring += r.expires != 0;
			pos = r.end;
			n++;
		}
		for (unsigned k = pos; k < SHMKV_BUCKET_BYTES; k++)
			if (bk[k])
				return SHMKV__BADV("non-zero byte at offset %llu after bucket %llu's "
						   "records", (unsigned long long)(bk + k - db->base),
						   (unsigned long long)b);
	}
	if (n != h->entry_count)
		return SHMKV__BADV("index holds %llu records, header says %llu entries",
				   (unsigned long long)n, (unsigned long long)h->entry_count);
	if (max_d != h->max_probe)
		return SHMKV__BADV("longest probe is %u buckets, header says %u", max_d,
				   h->max_probe);
	if (!expiring != !(h->flags & SHMKV_HFLAG_EXPIRY))
		return SHMKV__BADV("%llu records expire, but the header's expiry flag is %s",
				   (unsigned long long)expiring,
				   h->flags & SHMKV_HFLAG_EXPIRY ? "set" : "clear");
	if (shared != h->dedup_refs)
		return SHMKV__BADV("%llu entries use shared values, header says %llu",
				   (unsigned long long)shared, (unsigned long long)h->dedup_refs);
	/* ENTRIES: each entry is its key's OUT record's, so
	 * with the counts equal, entries and OUT records are one-to-one */
	uint64_t ents = 0;
	int err = shmkv__verify_entries(db, &ents, why, why_len);
	if (err)
		return err;
	if (ents != outs)
		return SHMKV__BADV("entries section holds %llu entries, the index %llu OUT records",
				   (unsigned long long)ents, (unsigned long long)outs);
	return 0;
#undef SHMKV__BADV
}

/* Every checksum, every bucket and record, every entry and value, and all
 * padding. Returns 0, SHMKV_ECHECKSUM or SHMKV_ECORRUPT with what and where
 * in why. */
static inline int shmkv_verify(const shmkv *db, char *why, size_t why_len)
{
	int err = shmkv_image_check(db->base, db->size, 0, why, why_len);
	if (!err)
		err = shmkv__verify_padding(db, why, why_len);
	if (!err)
		err = shmkv__verify_index(db, why, why_len);
	return err;
}

#endif /* SHMKV_VERIFY_H */
