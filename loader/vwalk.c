/* vwalk.c - shmkv_verify's structural checks in file order (see vwalk.h). */
#include "vwalk.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"

static const char *const gap_names[] = {"header", "inter-section", "inter-section",
					"inter-section", "trailing"};

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
	for (uint32_t i = 0; i < h->section_count && i < 3; i++) {
		w->gap[1 + i][0] = prev;
		w->gap[1 + i][1] = h->sections[i].offset;
		prev = h->sections[i].offset + h->sections[i].size;
	}
	w->gap[4][0] = prev;
	w->gap[4][1] = h->file_size;
	w->ngap = 5;
}

static int fail(struct vwalk *w, int err)
{
	w->err = err;
	return err;
}

/* The bucket's own rules (verify.h's index walk, the parts that need no
 * entry): displacement byte <= max_probe, no full slot after an empty one,
 * no meta byte in a bucket that announces no displaced key. */
static int check_bucket(struct vwalk *w, uint64_t b)
{
	const uint64_t *bk = w->db.buckets + b * SHMKV_BUCKET_SLOTS;
	unsigned disp = shmkv_slot_meta(bk[SHMKV_BUCKET_SLOTS - 1]);
	if (disp > w->h->max_probe)
		return diag_fail(SHMKV_ECORRUPT, w->why, sizeof w->why,
				   "index bucket %llu: displacement %u exceeds max_probe %u",
				   (unsigned long long)b, disp, w->h->max_probe);
	int empty_seen = 0;
	for (unsigned j = 0; j < SHMKV_BUCKET_SLOTS; j++) {
		uint64_t s = bk[j];
		if (!s) {
			empty_seen = 1;
			continue;
		}
		if (empty_seen)
			return diag_fail(SHMKV_ECORRUPT, w->why, sizeof w->why,
					   "index bucket %llu: slot %u is full after an empty slot",
					   (unsigned long long)b, j);
		if (!disp && shmkv_slot_meta(s))
			return diag_fail(SHMKV_ECORRUPT, w->why, sizeof w->why,
					   "index bucket %llu slot %u: meta byte %02x in a bucket "
					   "without displaced keys", (unsigned long long)b, j,
					   shmkv_slot_meta(s));
		w->filled++;
	}
	return 0;
}

/* Can the entry at off be decoded from what is read (prefix)? Its header
 * must be, and the farthest byte a decode may read: the value (inline; a
 * shared one lies in VALUES, read last) and the padding after it. */
static int readable(const struct vwalk *w, const uint8_t *base, uint64_t off, uint64_t prefix)
{
	if (prefix >= w->size)
		return 1;
	if (off % 8 || off < w->db.entries_off || off + sizeof(shmkv_entry_header) > w->db.entries_end)
		return 1; /* decoding refuses it without reading */
	if (off + sizeof(shmkv_entry_header) > prefix)
		return 0;
	const shmkv_entry_header *eh = (const shmkv_entry_header *)(const void *)(base + off);
	if (eh->flags & SHMKV_EFLAG_SHARED)
		return 0;
	uint64_t far = off + 24 + (uint64_t)eh->key_len + (uint64_t)eh->value_len;
	if (far > w->db.entries_end)
		far = w->db.entries_end;
	return far <= prefix;
}

/* Looks the key of entry e (at pos) up: every candidate the lookup will
 * compare (slots of its tag in the buckets it visits) must be a valid entry,
 * and the lookup must find pos. Returns 0, 1 (a candidate is not read yet:
 * try again at the end) or an error. */
static int lookup(struct vwalk *w, const uint8_t *base, uint64_t pos, const shmkv_entry *e,
		  uint64_t hv, uint64_t prefix)
{
	const shmkv *db = &w->db;
	uint64_t tag = shmkv_key_tag(hv), home = shmkv_home_bucket(hv, db->bucket_count);
	/* the buckets shmkv_get visits: home, then as many as its filter announces */
	uint64_t more = shmkv_bucket_displacement(db->buckets + home * SHMKV_BUCKET_SLOTS, tag,
					 db->max_probe);
	int64_t d = -1;
	unsigned others = 0; /* tag matches that are not pos */
	for (uint64_t k = 0; k <= more; k++) {
		uint64_t b = home + k;
		if (b >= db->bucket_count)
			b -= db->bucket_count;
		const uint64_t *bk = db->buckets + b * SHMKV_BUCKET_SLOTS;
		for (unsigned j = 0; j < SHMKV_BUCKET_SLOTS; j++) {
			if (!bk[j] || shmkv_slot_tag(bk[j]) != tag)
				continue;
			uint64_t off = shmkv_slot_entry_offset(bk[j]);
			if (off == pos) {
				if (d < 0)
					d = (int64_t)k;
				continue;
			}
			others++;
			if (prefix < w->size && (off > pos || !readable(w, base, off, prefix)))
				return 1;
			shmkv_entry c;
			char sub[200];
			int err = shmkv_entry_at(db, off, &c, sub, sizeof sub);
			if (err)
				return diag_fail(err, w->why, sizeof w->why,
						   "index bucket %llu slot %u: %s",
						   (unsigned long long)b, j, sub);
		}
	}
	/* the lookup compares the keys of exactly these tag matches, in this
	 * order: when pos's slot is the only one, it finds pos (the common case,
	 * spared a second hash and bucket read) */
	const uint8_t *found = base + pos;
	if (d < 0 || others) {
		uint64_t foff;
		found = shmkv_find_entry(db, e->key, e->key_len, &foff) == 0 ? db->base + foff : NULL;
	}
	if (found != base + pos || d < 0)
		return diag_fail(SHMKV_ECORRUPT, w->why, sizeof w->why,
				   "entry at %llu: lookup of its key does not find it%s",
				   (unsigned long long)pos, found ? " (duplicate key)" : "");
	if ((uint64_t)d > w->max_d)
		w->max_d = (uint32_t)d;
	return 0;
}

static int defer(struct vwalk *w, uint64_t pos)
{
	if (w->ndeferred == w->capdeferred) {
		size_t cap = w->capdeferred ? w->capdeferred * 2 : 64;
		uint64_t *t = realloc(w->deferred, cap * sizeof *t);
		if (!t)
			return diag_fail(-ENOMEM, w->why, sizeof w->why, "out of memory");
		w->deferred = t;
		w->capdeferred = cap;
	}
	w->deferred[w->ndeferred++] = pos;
	return 0;
}

/* One entry at pos (within what is read): decoded, its padding and text;
 * the lookup comes later (lookups()), its home bucket prefetched. */
static int check_entry(struct vwalk *w, const uint8_t *base, uint64_t pos, shmkv_entry *e)
{
	const shmkv *db = &w->db;
	int err = shmkv_entry_at(db, pos, e, w->why, sizeof w->why);
	if (err)
		return err;
	const shmkv_entry_header *eh = (const shmkv_entry_header *)(const void *)(base + pos);
	uint64_t key_end = pos + sizeof *eh + eh->key_len, vpos = pos + shmkv_entry_value_pos(eh);
	uint64_t vend = e->value.shared ? vpos + 8 : e->value_off + e->value.size +
		(eh->type == SHMKV_TYPE_BYTES || eh->type == SHMKV_TYPE_STRING);
	err = shmkv_zero_check(db, key_end, vpos, "entry", w->why, sizeof w->why);
	if (!err)
		err = shmkv_zero_check(db, vend, e->end, "entry", w->why, sizeof w->why);
	if (err)
		return err;
	if (!shmkv_value_utf8_valid(&e->value))
		return diag_fail(SHMKV_ECORRUPT, w->why, sizeof w->why,
				   "entry at %llu: %s value is not valid UTF-8",
				   (unsigned long long)pos, shmkv_type_name(e->value.type));
	return 0;
}

/* The lookups of the pending entries. Each costs a miss on a random index
 * bucket: their buckets were prefetched when the entries were checked, so
 * the misses overlap (as the reader's batch get does). */
static int lookups(struct vwalk *w, const uint8_t *base, uint64_t prefix)
{
	int err = 0;
	for (unsigned i = 0; !err && i < w->npend; i++) {
		err = lookup(w, base, w->pend[i].pos, &w->pend[i].e, w->pend[i].hv, prefix);
		if (err == 1)
			err = defer(w, w->pend[i].pos);
	}
	w->npend = 0;
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
		w->pos = w->db.entries_off;
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
			err = shmkv_zero_check(db, from, upto, gap_names[w->gi], w->why,
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
	/* v2 (128-byte buckets of records): its index and entries are checked
	 * by lib's verify at the end (vwalk_end), not here */
	if (db->version == SHMKV_FORMAT_V2)
		return 0;
	/* the index, bucket by bucket; the entries need all of it */
	uint64_t idx = w->h->sections[0].offset;
	while (w->bucket < db->bucket_count &&
	       idx + (w->bucket + 1) * SHMKV_BUCKET_BYTES <= prefix) {
		if ((err = check_bucket(w, w->bucket)))
			return fail(w, err);
		w->bucket++;
	}
	if (w->bucket < db->bucket_count)
		return 0;
	/* the entries, in order, skipping zero words (verify.h's entries walk) */
	while (w->pos < db->entries_end && w->pos + 8 <= prefix) {
		uint64_t word;
		memcpy(&word, base + w->pos, 8);
		if (!word) {
			w->pos += 8;
			continue;
		}
		if (!readable(w, base, w->pos, prefix))
			break;
		struct vwalk_pending *p = &w->pend[w->npend];
		if ((err = check_entry(w, base, w->pos, &p->e)))
			return fail(w, err);
		p->pos = w->pos;
		p->hv = shmkv_key_hash(db->seed, db->hash_bits, p->e.key, p->e.key_len);
		__builtin_prefetch(db->buckets +
				   shmkv_home_bucket(p->hv, db->bucket_count) * SHMKV_BUCKET_SLOTS);
		w->shared += p->e.value.shared;
		w->n++;
		w->pos = p->e.end;
		if (++w->npend == VWALK_BATCH && (err = lookups(w, base, prefix)))
			return fail(w, err);
	}
	if ((err = lookups(w, base, prefix)))
		return fail(w, err);
	return 0;
}

int vwalk_end(struct vwalk *w, const uint8_t *base, char *why, size_t why_len)
{
	int err = vwalk_feed(w, base, w->size);
	if (!err && w->db.version == SHMKV_FORMAT_V2) {
		/* lib's one owner of the v2 rules (FORMAT.md §17.7), on the
		 * whole image in memory: one more pass over it (the checksums
		 * again, padding, every record and entry), as `shmctl image
		 * verify` does */
		err = shmkv_verify(&w->db, w->why, sizeof w->why);
		return err ? diag_fail(err, why, why_len, "%s", w->why) : 0;
	}
	for (size_t i = 0; !err && i < w->ndeferred; i++) {
		shmkv_entry e;
		err = shmkv_entry_at(&w->db, w->deferred[i], &e, w->why, sizeof w->why);
		if (!err)
			err = lookup(w, base, w->deferred[i], &e,
				     shmkv_key_hash(w->db.seed, w->db.hash_bits, e.key, e.key_len),
				     w->size);
		if (err == 1) /* cannot be: everything is read */
			err = diag_fail(SHMKV_ECORRUPT, w->why, sizeof w->why,
					  "entry at %llu: lookup not done",
					  (unsigned long long)w->deferred[i]);
	}
	if (err)
		return diag_fail(err, why, why_len, "%s", w->why);
	const shmkv_image_header *h = w->h;
	if (w->bucket != w->db.bucket_count || w->pos < w->db.entries_end)
		return diag_fail(SHMKV_ETRUNCATED, why, why_len, "image not completely walked");
	if (w->filled != h->entry_count)
		return diag_fail(SHMKV_ECORRUPT, why, why_len,
				   "index holds %llu keys, header says %llu entries",
				   (unsigned long long)w->filled, (unsigned long long)h->entry_count);
	if (w->max_d != h->max_probe)
		return diag_fail(SHMKV_ECORRUPT, why, why_len,
				   "longest probe is %u buckets, header says %u", w->max_d,
				   h->max_probe);
	if (w->n != h->entry_count)
		return diag_fail(SHMKV_ECORRUPT, why, why_len,
				   "entries section holds %llu entries, header says %llu",
				   (unsigned long long)w->n, (unsigned long long)h->entry_count);
	if (w->shared != h->dedup_refs)
		return diag_fail(SHMKV_ECORRUPT, why, why_len,
				   "%llu entries use shared values, header says %llu",
				   (unsigned long long)w->shared, (unsigned long long)h->dedup_refs);
	return 0;
}

void vwalk_free(struct vwalk *w)
{
	free(w->deferred);
	w->deferred = NULL;
	w->ndeferred = w->capdeferred = 0;
}
