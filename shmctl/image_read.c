/* image_read.c - image get, verify and dump. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "main.h"
#include "value.h"

/* A key as messages show it: JSON-quoted if UTF-8, else base64:"...". */
static char *key_text(const void *key, size_t len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (!f)
		return NULL;
	json_writer w;
	json_init(&w, f, false);
	w.depth = 1; /* no newline after the value */
	w.first[0] = true;
	if (utf8_valid(key, len)) {
		json_str_n(&w, key, len);
	} else {
		fputs("base64:", f);
		json_base64(&w, key, len);
	}
	fclose(f);
	return buf;
}

/* Writes the key member: "key" when UTF-8, else "key_base64". */
static void json_key_member(json_writer *w, const void *key, size_t len)
{
	if (utf8_valid(key, len)) {
		json_name(w, "key");
		json_str_n(w, key, len);
	} else {
		json_name(w, "key_base64");
		json_base64(w, key, len);
	}
}

/* shmkv_get() trusts the entries it probes (checksums only guard against
 * accidents), so a crafted or buggy image could crash it. An admin tool must
 * not: walk the same probe sequence with every candidate entry decoded with
 * bounds checks first. Returns 0 (shmkv_get is then safe), SHMKV_ENOTFOUND
 * or SHMKV_ECORRUPT with why. */
static int checked_probe(const shmkv *db, const void *key, size_t key_len, char *why, size_t len)
{
	const shmkv_image_header *h = shmkv_header(db);
	/* the header sits at the image start: no need to look into the handle */
	const uint64_t *slots =
		(const uint64_t *)(const void *)((const uint8_t *)h + h->sections[0].offset);
	uint64_t hv = shmkv__hash(h->hash_seed, h->hash_bits, key, key_len);
	uint64_t tag = shmkv__tag(hv), b = shmkv__home(hv, h->bucket_count);
	for (uint32_t probe = 0;; probe++) {
		const uint64_t *bk = slots + b * SHMKV_BUCKET_SLOTS;
		for (unsigned j = 0; j < SHMKV_BUCKET_SLOTS; j++) {
			if (bk[j] >> SHMKV_SLOT_TAG_SHIFT != tag)
				continue;
			shmkv__entry e;
			char sub[256];
			int err = shmkv__entry_decode(db, (bk[j] & SHMKV_SLOT_OFF_MASK) << 3, &e, sub,
						      sizeof sub);
			if (err)
				return shmkv__fail(err, why, len, "index bucket %" PRIu64 " slot %u: %s",
						   b, j, sub);
			if (e.key_len == key_len && !memcmp(e.key, key, key_len))
				return 0;
		}
		if (bk[SHMKV_BUCKET_SLOTS - 1] == 0 || probe == h->max_probe)
			return SHMKV_ENOTFOUND;
		if (++b == h->bucket_count)
			b = 0;
	}
}

int do_image_get(int argc, char **argv)
{
	static const struct option opts[] = {
		VERB_LONGOPTS,
		{"key-base64", no_argument, NULL, 'k'},
		{NULL, 0, NULL, 0},
	};
	bool key_b64 = false;
	int c, rc;
	verb_getopt_reset();
	while ((c = getopt_long(argc, argv, "+" VERB_SHORTOPTS, opts, NULL)) != -1) {
		if (c == 'k')
			key_b64 = true;
		else if ((rc = verb_common_opt(c, argv, image_help, "image")) >= 0)
			return rc;
	}
	if (argc - optind != 2)
		return p_usage("image", "get: expected FILE KEY");
	const char *path = argv[optind], *key_arg = argv[optind + 1];

	unsigned char *decoded = NULL;
	const void *key = key_arg;
	size_t key_len = strlen(key_arg);
	if (key_b64) {
		decoded = malloc(key_len / 4 * 3 + 3);
		long n = decoded ? base64_decode(key_arg, decoded) : -1;
		if (n < 0) {
			free(decoded);
			return p_usage("image", "get: KEY is not valid base64");
		}
		key = decoded;
		key_len = (size_t)n;
	}
	if (key_len > SHMKV_MAX_KEY_LEN) {
		free(decoded);
		return p_err("key is %zu bytes, keys are at most %u", key_len, SHMKV_MAX_KEY_LEN);
	}

	shmkv *db;
	if ((rc = image_open(path, 0, &db))) {
		free(decoded);
		return rc;
	}
	shmkv_value v;
	char why[512];
	int err = checked_probe(db, key, key_len, why, sizeof why);
	if (!err)
		err = shmkv_get(db, key, key_len, &v);
	if (err == SHMKV_ENOTFOUND) {
		rc = EXIT_NEGATIVE;
		p_err("key not found");
	} else if (err == SHMKV_ECORRUPT) {
		rc = p_err("%s: %s; 'shmctl image verify' says more", path, why);
	} else if (err) {
		rc = p_err("%s: %s", path, shmkv_strerror(err));
	} else if (!json_output) {
		value_plain(stdout, &v);
		rc = EXIT_OK;
	} else if (v.type == SHMKV_TYPE_STRLIST && !value_utf8_ok(&v)) {
		rc = p_err("the value is a strlist with a string that is not valid UTF-8; "
			   "get it without -j");
	} else {
		json_writer *w = &json_out;
		json_obj_begin(w);
		json_key_member(w, key, key_len);
		json_kv_str(w, "type", shmkv_type_name(v.type));
		if (v.type == SHMKV_TYPE_STRING && !value_utf8_ok(&v)) {
			json_name(w, "value_base64");
			json_base64(w, v.data, v.size);
		} else {
			json_name(w, "value");
			value_json(w, &v);
		}
		json_obj_end(w);
		rc = EXIT_OK;
	}
	shmkv_close(db);
	free(decoded);
	return rc;
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
	int err = shmkv_open_file_diag(path, SHMKV_OPEN_NOVERIFY, &db, why, sizeof why);
	if (err && err > -4096) { /* -errno: could not read it at all */
		image_why(msg, sizeof msg, path, why);
		return p_err("%s", msg);
	}
	if (!err) {
		err = shmkv_verify(db, why, sizeof why);
		if (!err) {
			uint64_t n = shmkv_header(db)->entry_count;
			shmkv_close(db);
			if (json_output) {
				json_obj_begin(&json_out);
				json_kv_str(&json_out, "file", path);
				json_kv_bool(&json_out, "ok", true);
				json_kv_u64(&json_out, "entries", n);
				json_obj_end(&json_out);
			} else {
				printf("ok: %" PRIu64 " entries verified\n", n);
			}
			return EXIT_OK;
		}
		shmkv_close(db);
	}
	image_why(msg, sizeof msg, path, why);
	if (json_output) {
		json_obj_begin(&json_out);
		json_kv_str(&json_out, "file", path);
		json_kv_bool(&json_out, "ok", false);
		json_kv_str(&json_out, "error", msg);
		json_obj_end(&json_out);
	} else {
		fflush(stdout);
		fprintf(stderr, "%s: verification failed: %s\n", BIN_NAME, msg);
	}
	return EXIT_NEGATIVE;
}

static void dump_meta(json_writer *w, const shmkv_image_header *h)
{
	json_obj_begin(w);
	json_name(w, "shmkv_meta");
	json_obj_begin(w);
	json_kv_str(w, "name", h->name);
	json_kv_u64(w, "seed", h->hash_seed);
	json_kv_i64(w, "created", h->created_unix);
	json_kv_u64(w, "buckets", h->bucket_count);
	json_kv_u64(w, "hash_bits", h->hash_bits);
	json_kv_bool(w, "dedup", (h->flags & SHMKV_HFLAG_DEDUP) != 0);
	json_obj_end(w);
	json_obj_end(w);
}

int do_image_dump(int argc, char **argv)
{
	int rc = image_simple_args(argc, argv, 1, "FILE");
	if (rc >= 0)
		return rc;
	const char *path = argv[optind];
	shmkv *db;
	if ((rc = image_open(path, 0, &db)))
		return rc;
	const shmkv_image_header *h = shmkv_header(db);
	if (!utf8_valid(h->name, strlen(h->name))) {
		shmkv_close(db);
		return p_err("%s: the image name is not valid UTF-8: JSONL cannot carry it", path);
	}

	json_writer w; /* JSONL: one compact record a line, whatever -p says */
	json_init(&w, stdout, false);
	dump_meta(&w, h);

	shmkv_iter it;
	const void *key;
	size_t key_len;
	shmkv_value v;
	uint64_t n = 0;
	int err;
	shmkv_iter_init(db, &it);
	while ((err = shmkv_iter_next(&it, &key, &key_len, &v)) == 0) {
		if (!value_utf8_ok(&v)) {
			char *k = key_text(key, key_len);
			rc = p_err("key %s: %s value is not valid UTF-8", k ? k : "?",
				   shmkv_type_name(v.type));
			free(k);
			break;
		}
		json_obj_begin(&w);
		json_key_member(&w, key, key_len);
		json_kv_str(&w, "type", shmkv_type_name(v.type));
		json_name(&w, "value");
		value_json(&w, &v);
		json_obj_end(&w);
		n++;
	}
	if (err && err != SHMKV_EEND)
		rc = p_err("%s: entry %" PRIu64 ": %s; 'shmctl image verify' says more", path, n,
			   shmkv_strerror(err));
	shmkv_close(db);
	return rc;
}
