/* image_inspect.c - image inspect: header, sections, value types, probe
 * lengths and dedup savings of an image. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "diag.h"
#include "image.h"
#include "lookup.h"
#include "main.h"

struct stats {
	uint64_t types[SHMKV_TYPE_MAX + 1]; /* entries per value type; [0]: a delta's
					       tombstones (SHMKV_TYPE_TOMBSTONE) */
	uint64_t *probe;                     /* probe[d]: keys d buckets from home */
	uint32_t probe_len;                  /* max_probe + 1 */
	uint64_t expiring, expired;          /* entries with an expiry; past it now */
	uint32_t first_exp, last_exp;        /* their earliest and latest expiry */
	int64_t now;
};

static int count_type(void *ctx, const void *key, size_t key_len, const shmkv_value *v,
		      uint32_t expires)
{
	struct stats *st = ctx;
	(void)key;
	(void)key_len;
	st->types[v->type <= SHMKV_TYPE_MAX ? v->type : 0]++;
	if (expires) {
		if (!st->expiring++ || expires < st->first_exp)
			st->first_exp = expires;
		if (expires > st->last_exp)
			st->last_exp = expires;
		st->expired += st->now >= (int64_t)expires;
	}
	return 0;
}

/* Counts entries per type by iterating. */
static int count_types(const shmkv *db, struct stats *st, char *why, size_t len)
{
	uint64_t n;
	int err = image_each(db, count_type, st, &n);
	if (err)
		return diag_fail(err, why, len, "entry %" PRIu64 ": %s", n, shmkv_strerror(err));
	return 0;
}

/* Walks the index (lib/shmkv/tools.h's rules): each bucket's records, each
 * record's key (inline, or its OUT record's entry), its home bucket, the
 * distance. */
static int probe_lengths(const shmkv *db, struct stats *st, char *why, size_t len)
{
	const shmkv_image_header *h = shmkv_header(db);
	/* the header sits at the image start: no need to look into the handle */
	const uint8_t *index = (const uint8_t *)h + h->sections[0].offset;
	st->probe_len = h->max_probe + 1;
	st->probe = calloc(st->probe_len, sizeof *st->probe);
	if (!st->probe)
		return diag_fail(-ENOMEM, why, len, "out of memory");
	for (uint64_t b = 0; b < h->bucket_count; b++) {
		const uint8_t *bk = index + b * SHMKV_BUCKET_BYTES;
		for (unsigned i = 0; i < bk[0]; i++) {
			shmkv_record r;
			const void *key;
			size_t key_len;
			if (shmkv_record_at(bk, i, &r) != 0)
				return diag_fail(SHMKV_ECORRUPT, why, len,
						 "index bucket %" PRIu64 " record %u: malformed", b, i);
			if (r.kind & SHMKV_REC_OUT) {
				shmkv_entry e = {0}; /* GCC -O3 cannot see shmkv_entry_at set it */
				char sub[256];
				int err = shmkv_entry_at(db, r.unit << 3, &e, sub, sizeof sub);
				if (err)
					return diag_fail(err, why, len,
							 "index bucket %" PRIu64 " record %u: %s", b,
							 i, sub);
				key = e.key;
				key_len = e.key_len;
			} else {
				key = bk + r.key_pos;
				key_len = r.key_len;
			}
			uint64_t hv = shmkv_key_hash(h->hash_seed, h->hash_bits, key, key_len);
			uint64_t home = shmkv_home_bucket(hv, h->bucket_count);
			uint64_t d = b >= home ? b - home : b + h->bucket_count - home;
			if (d >= st->probe_len)
				return diag_fail(SHMKV_ECORRUPT, why, len,
						 "index bucket %" PRIu64 " record %u: key is %" PRIu64
						 " buckets from home, max_probe is %u",
						 b, i, d, h->max_probe);
			st->probe[d]++;
		}
	}
	return 0;
}

static void version_text(char *buf, size_t n, uint32_t v)
{
	snprintf(buf, n, "%u.%u.%u", v >> 16, v >> 8 & 0xff, v & 0xff);
}

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0.0;
}

void json_dedup(struct json *w, uint64_t logical, uint64_t values, uint64_t refs,
		uint64_t saved)
{
	json_name(w, "dedup");
	json_obj_begin(w, NULL);
	json_u64(w, "value_bytes_logical", logical);
	json_u64(w, "shared_values", values);
	json_u64(w, "shared_refs", refs);
	json_u64(w, "saved_bytes", saved);
	json_obj_end(w);
}

/* A delta's identity (lib/FORMAT.md §19.1): "delta": {...}, or null for a
 * plain image. */
static void json_delta(struct json *w, const shmkv *db, const struct stats *st)
{
	shmkv_delta_id id;
	char buf[32];
	json_name(w, "delta");
	if (shmkv_delta_id_of(db, &id) != 0) {
		json_null(w, NULL);
		return;
	}
	json_obj_begin(w, NULL);
	snprintf(buf, sizeof buf, "0x%016" PRIx64, id.base_checksum);
	json_str(w, "base_checksum", buf);
	json_u64(w, "base_size", id.base_size);
	if (id.prev) {
		snprintf(buf, sizeof buf, "0x%016" PRIx64, id.prev);
		json_str(w, "prev", buf);
	} else {
		json_null(w, "prev");
	}
	json_u64(w, "seq", id.seq);
	json_u64(w, "upserts", shmkv_header(db)->entry_count - st->types[SHMKV_TYPE_TOMBSTONE]);
	json_u64(w, "tombstones", st->types[SHMKV_TYPE_TOMBSTONE]);
	json_obj_end(w);
}

static void print_json(const char *path, const shmkv *db, const struct stats *st)
{
	const shmkv_image_header *h = shmkv_header(db);
	struct json *w = &json_out;
	char buf[64];
	json_obj_begin(w, NULL);
	json_str(w, "file", path);
	json_str(w, "name", h->name);
	json_u64(w, "format_version", h->format_version);
	version_text(buf, sizeof buf, h->builder_version);
	json_str(w, "builder_version", buf);
	json_i64(w, "created", h->created_unix);
	json_u64(w, "seed", h->hash_seed);
	json_u64(w, "hash_bits", h->hash_bits);
	snprintf(buf, sizeof buf, "0x%016" PRIx64, shmkv_checksum(db));
	json_str(w, "checksum", buf);
	json_delta(w, db, st);
	json_name(w, "flags");
	json_arr_begin(w, NULL);
	if (h->flags & SHMKV_HFLAG_DEDUP)
		json_str(w, NULL, "dedup");
	if (h->flags & SHMKV_HFLAG_EXPIRY)
		json_str(w, NULL, "expiry");
	if (shmkv_is_delta(db))
		json_str(w, NULL, "delta");
	json_arr_end(w);
	json_u64(w, "entries", h->entry_count);
	json_u64(w, "buckets", h->bucket_count);
	json_u64(w, "bucket_bytes", h->bucket_slots);
	json_name(w, "expiry");
	json_obj_begin(w, NULL);
	json_u64(w, "entries", st->expiring);
	json_u64(w, "expired_now", st->expired);
	json_u64(w, "first", st->first_exp);
	json_u64(w, "last", st->last_exp);
	json_obj_end(w);
	json_u64(w, "max_probe", h->max_probe);
	json_u64(w, "file_size", h->file_size);
	json_name(w, "bytes_per_key");
	if (h->entry_count)
		json_stat(w, NULL, ratio(h->file_size, h->entry_count));
	else
		json_null(w, NULL);
	json_name(w, "sections");
	json_arr_begin(w, NULL);
	for (uint32_t i = 0; i < h->section_count; i++) {
		const shmkv_section_desc *s = &h->sections[i];
		json_obj_begin(w, NULL);
		json_str(w, "kind", shmkv_section_name(s->kind));
		json_u64(w, "offset", s->offset);
		json_u64(w, "size", s->size);
		snprintf(buf, sizeof buf, "%016" PRIx64, s->checksum);
		json_str(w, "checksum", buf);
		json_obj_end(w);
	}
	json_arr_end(w);
	json_name(w, "types");
	json_obj_begin(w, NULL);
	for (unsigned t = 1; t <= SHMKV_TYPE_MAX; t++)
		json_u64(w, shmkv_type_name(t), st->types[t]);
	json_obj_end(w);
	json_name(w, "probe_lengths"); /* [d]: keys d buckets from their home */
	json_arr_begin(w, NULL);
	for (uint32_t d = 0; d < st->probe_len; d++)
		json_u64(w, NULL, st->probe[d]);
	json_arr_end(w);
	json_dedup(w, h->value_bytes_logical, h->dedup_values, h->dedup_refs, h->dedup_saved_bytes);
	json_obj_end(w);
}

/* A delta's identity (lib/FORMAT.md §19.1): its base, its place in its
 * chain, what it holds. Nothing for a plain image. */
static void plain_delta(const shmkv *db, const struct stats *st)
{
	shmkv_delta_id id;
	if (shmkv_delta_id_of(db, &id) != 0)
		return;
	uint64_t tombs = st->types[SHMKV_TYPE_TOMBSTONE];
	printf("%-18sof base 0x%016" PRIx64 " (%" PRIu64 " bytes)\n", "delta", id.base_checksum,
	       id.base_size);
	if (id.prev)
		printf("%-18sseq %" PRIu64 ", after delta 0x%016" PRIx64 "\n", "chain", id.seq, id.prev);
	else
		printf("%-18sseq %" PRIu64 ", applies to the base directly\n", "chain", id.seq);
	printf("%-18s%" PRIu64 " upserts, %" PRIu64 " tombstones\n", "changes",
	       shmkv_header(db)->entry_count - tombs, tombs);
}

static void print_plain(const char *path, const shmkv *db, const struct stats *st)
{
	const shmkv_image_header *h = shmkv_header(db);
	char buf[64];
	time_t t = (time_t)h->created_unix;
	struct tm tm;
	printf("%-18s%s\n", "file", path);
	printf("%-18s%s\n", "name", h->name[0] ? h->name : "(none)");
	printf("%-18s%u\n", "format version", h->format_version);
	version_text(buf, sizeof buf, h->builder_version);
	printf("%-18s%s\n", "builder version", buf);
	if (gmtime_r(&t, &tm) && strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm))
		printf("%-18s%" PRId64 " (%s)\n", "created", h->created_unix, buf);
	else
		printf("%-18s%" PRId64 "\n", "created", h->created_unix);
	printf("%-18s0x%016" PRIx64 "\n", "seed", h->hash_seed);
	printf("%-18s%u\n", "hash bits", h->hash_bits);
	printf("%-18s0x%016" PRIx64 "\n", "checksum", shmkv_checksum(db));
	plain_delta(db, st);
	char flags[32] = "";
	if (h->flags & SHMKV_HFLAG_DEDUP)
		strcat(flags, " dedup");
	if (h->flags & SHMKV_HFLAG_EXPIRY)
		strcat(flags, " expiry");
	if (shmkv_is_delta(db))
		strcat(flags, " delta");
	printf("%-18s%s\n", "flags", flags[0] ? flags + 1 : "none");
	printf("%-18s%" PRIu64 "\n", "entries", h->entry_count);
	printf("%-18s%" PRIu64 "\n", "buckets", h->bucket_count);
	printf("%-18s%u\n", "bucket bytes", h->bucket_slots);
	printf("%-18s%" PRIu64 " (%" PRIu64 " expired now)\n", "expiring", st->expiring,
	       st->expired);
	if (st->expiring) {
		char t0[40], t1[40];
		expiry_text(t0, sizeof t0, st->first_exp);
		expiry_text(t1, sizeof t1, st->last_exp);
		printf("%-18s%s .. %s\n", "expiries", t0, t1);
	}
	printf("%-18s%u\n", "max probe", h->max_probe);
	printf("%-18s%" PRIu64 "\n", "file size", h->file_size);
	if (h->entry_count)
		printf("%-18s%.1f\n", "bytes per key", ratio(h->file_size, h->entry_count));
	else
		printf("%-18s-\n", "bytes per key");

	printf("\nsections\n  %-10s%14s%14s  %s\n", "kind", "offset", "size", "checksum");
	for (uint32_t i = 0; i < h->section_count; i++) {
		const shmkv_section_desc *s = &h->sections[i];
		printf("  %-10s%14" PRIu64 "%14" PRIu64 "  %016" PRIx64 "\n",
		       shmkv_section_name(s->kind), s->offset, s->size, s->checksum);
	}

	printf("\nvalue types\n");
	for (unsigned ty = 1; ty <= SHMKV_TYPE_MAX; ty++)
		if (st->types[ty])
			printf("  %-10s%14" PRIu64 "\n", shmkv_type_name(ty), st->types[ty]);
	if (st->types[SHMKV_TYPE_TOMBSTONE])
		printf("  %-10s%14" PRIu64 "\n", "tombstone", st->types[SHMKV_TYPE_TOMBSTONE]);
	if (!h->entry_count)
		printf("  (none)\n");

	printf("\nprobe lengths (buckets from home)\n");
	for (uint32_t d = 0; d < st->probe_len; d++)
		printf("  %-10u%14" PRIu64 "  %5.1f%%\n", d, st->probe[d],
		       100.0 * ratio(st->probe[d], h->entry_count));

	printf("\ndedup\n");
	printf("  %-22s%" PRIu64 "\n", "logical value bytes", h->value_bytes_logical);
	printf("  %-22s%" PRIu64 "\n", "shared values", h->dedup_values);
	printf("  %-22s%" PRIu64 "\n", "entries sharing", h->dedup_refs);
	printf("  %-22s%" PRIu64 " (%.1f%% of logical)\n", "bytes saved", h->dedup_saved_bytes,
	       100.0 * ratio(h->dedup_saved_bytes, h->value_bytes_logical));
}

static int inspect_file(const char *path, shmkv *db)
{
	int rc;
	struct stats st;
	char why[512];
	memset(&st, 0, sizeof st);
	st.now = (int64_t)time(NULL);
	if (count_types(db, &st, why, sizeof why) || probe_lengths(db, &st, why, sizeof why)) {
		rc = p_err("%s: %s; 'shmctl image verify' says more", path, why);
	} else {
		if (json_output)
			print_json(path, db, &st);
		else
			print_plain(path, db, &st);
		rc = EXIT_OK;
	}
	free(st.probe);
	return rc;
}

int do_image_inspect(int argc, char **argv)
{
	return image_file_verb(argc, argv, inspect_file);
}
