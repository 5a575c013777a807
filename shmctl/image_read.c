/* image_read.c - image get, verify and dump. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "lookup.h"
#include "main.h"
#include "value.h"

/* A key as messages show it: JSON-quoted if UTF-8, else base64:"...". */
char *key_text(const void *key, size_t len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (!f)
		return NULL;
	struct json w;
	json_init_file(&w, f, false);
	w.depth = 1; /* no newline after the value */
	w.first[0] = true;
	if (shmkv_utf8_valid(key, len)) {
		json_str_n(&w, NULL, key, len);
	} else {
		fputs("base64:", f);
		json_base64(&w, NULL, key, len);
	}
	fclose(f);
	return buf;
}

static int open_file(const char *path, shmkv **db)
{
	return image_open(path, 0, db);
}

int do_image_get(int argc, char **argv)
{
	static const struct get_source src = {
		.object = "image",
		.usage = "FILE KEY",
		.help = image_help,
		.open = open_file,
		.corrupt_hint = "; 'shmctl image verify' says more",
	};
	return get_verb(argc, argv, &src);
}

/* verify's JSON (nothing without -j): ok with n entries, or the error;
 * the exit code. */
static int verify_json(const char *path, uint64_t n, const char *error)
{
	if (json_output) {
		json_obj_begin(&json_out, NULL);
		json_str(&json_out, "file", path);
		json_bool(&json_out, "ok", !error);
		if (error)
			json_str(&json_out, "error", error);
		else
			json_u64(&json_out, "entries", n);
		json_obj_end(&json_out);
	}
	return error ? EXIT_NEGATIVE : EXIT_OK;
}

int do_image_verify(int argc, char **argv)
{
	int rc = image_simple_args(argc, argv, 1, "FILE");
	if (rc >= 0)
		return rc;
	const char *path = argv[optind];
	char why[512] = "", msg[1024];
	shmkv *db;
	/* NOVERIFY: the header is checked at open, all else by shmkv_verify */
	int err = image_padding_check(path, why, sizeof why);
	if (!err)
		err = shmkv_open_file_diag(path, SHMKV_OPEN_NOVERIFY, &db, why, sizeof why);
	if (err && err > -4096) { /* -errno: could not read it at all */
		image_why(msg, sizeof msg, path, why);
		return p_err("%s", msg);
	}
	if (!err) {
		err = shmkv_verify(db, why, sizeof why);
		if (!err) {
			uint64_t n = shmkv_header(db)->entry_count;
			shmkv_close(db);
			if (!json_output)
				printf("ok: %" PRIu64 " entries verified\n", n);
			return verify_json(path, n, NULL);
		}
		shmkv_close(db);
	}
	image_why(msg, sizeof msg, path, why);
	if (!json_output) {
		fflush(stdout);
		fprintf(stderr, "%s: verification failed: %s\n", BIN_NAME, msg);
	}
	return verify_json(path, 0, msg);
}

/* A checksum as the builder takes it back: "0x" and 16 hex digits (a JSON
 * number would not keep 64 bits in most readers). */
static void json_hex64(struct json *w, const char *name, uint64_t v)
{
	char buf[24];
	snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
	json_str(w, name, buf);
}

static void dump_meta(struct json *w, const shmkv *db)
{
	const shmkv_image_header *h = shmkv_header(db);
	shmkv_delta_id id;
	json_obj_begin(w, NULL);
	json_name(w, "shmkv_meta");
	json_obj_begin(w, NULL);
	if (shmkv_utf8_valid(h->name, strlen(h->name))) {
		json_str(w, "name", h->name);
	} else { /* JSON strings are Unicode: the bytes as base64, as for keys */
		json_name(w, "name_base64");
		json_base64(w, NULL, h->name, strlen(h->name));
	}
	json_u64(w, "format", h->format_version);
	json_u64(w, "seed", h->hash_seed);
	json_i64(w, "created", h->created_unix);
	json_u64(w, "buckets", h->bucket_count);
	json_u64(w, "hash_bits", h->hash_bits);
	json_bool(w, "dedup", (h->flags & SHMKV_HFLAG_DEDUP) != 0);
	if (shmkv_delta_id_of(db, &id) == 0) { /* a delta's place (lib/FORMAT.md §19.1) */
		json_name(w, "delta");
		json_obj_begin(w, NULL);
		json_hex64(w, "base_checksum", id.base_checksum);
		json_u64(w, "base_size", id.base_size);
		json_hex64(w, "prev", id.prev);
		json_u64(w, "seq", id.seq);
		json_obj_end(w);
	}
	json_obj_end(w);
	json_obj_end(w);
}

/* One entry as a JSONL record. */
static int dump_entry(void *ctx, const void *key, size_t key_len, const shmkv_value *v,
		      uint32_t expires)
{
	struct json *w = ctx; /* iteration checked the value whole: strings are UTF-8 */
	json_obj_begin(w, NULL);
	json_key_member(w, key, key_len);
	if (v->type == SHMKV_TYPE_TOMBSTONE) { /* a delta's removal, as the builder takes it */
		json_bool(w, "remove", true);
		json_obj_end(w);
		return 0;
	}
	json_str(w, "type", shmkv_type_name(v->type));
	json_name(w, "value");
	value_json(w, v);
	if (expires) /* Unix seconds: the builder takes them back as they are */
		json_u64(w, "expires", expires);
	json_obj_end(w);
	return 0;
}

static int dump_file(const char *path, shmkv *db)
{
	struct json w; /* JSONL: one compact record a line, whatever -p says */
	json_init_file(&w, stdout, false);
	dump_meta(&w, db);
	uint64_t n;
	int rc = image_each(db, dump_entry, &w, &n);
	if (rc < 0)
		rc = p_err("%s: entry %" PRIu64 ": %s; 'shmctl image verify' says more", path, n,
			   shmkv_strerror(rc));
	return rc;
}

int do_image_dump(int argc, char **argv)
{
	return image_file_verb(argc, argv, dump_file);
}
