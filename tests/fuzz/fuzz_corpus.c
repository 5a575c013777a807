/* fuzz_corpus.c - writes the seed corpus of the fuzz targets, at build time:
 *   fuzz_corpus OUTDIR [STAMP]
 * makes OUTDIR/image (real images from the builder: every type, shared
 * values, OUT records, expiring records, forced hash collisions, an empty
 * image, deltas read alone; also the seeds of image_fixsum), OUTDIR/jsonl, OUTDIR/tsv (input
 * texts), OUTDIR/ctl (control segments that point at fuzz_ctl's own
 * image, "@/seg.shmkv"), OUTDIR/http_req (shmkv-http's request forms),
 * OUTDIR/delta (deltas of fuzz_delta's bases, fuzz_delta_base.h;
 * OUTDIR/delta_fixsum names the same directory), OUTDIR/loader_req (the
 * loader's socket requests and a stream) and OUTDIR/wal (durable logs
 * written by the loader's writer, loader/walfmt.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <shmkv.h>

#include "fuzz_delta_base.h"
#include "fuzz_seg_image.h"
#include "walfmt.h"

static const char *out;

static void die(const char *what)
{
	fprintf(stderr, "fuzz_corpus: %s\n", what);
	exit(1);
}

static void put(const char *dir, const char *name, const void *p, size_t n)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s/%s", out, dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
		die(path);
}

static shmkv_builder *builder(unsigned hash_bits)
{
	shmkv_build_options o;
	shmkv_builder *b;
	if (shmkv_build_options_init(&o) != 0)
		die("options");
	o.created = 1;
	o.fixed |= SHMKV_OPT_CREATED;
	if (hash_bits)
		o.hash_bits = hash_bits;
	if (shmkv_builder_new(&o, &b) != 0)
		die("builder");
	return b;
}

static void finish(shmkv_builder *b, const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/image/%s.shmkv", out, name);
	if (shmkv_builder_finish(b, path, NULL) != 0)
		die(shmkv_builder_error(b));
	shmkv_builder_free(b);
}

static void add_all_types(shmkv_builder *b, int i)
{
	char k[64];
	const float f32[] = {0.25f, -1.5f, 3.0f};
	const double f64[] = {1e300, -0.0, 2.5};
	const int64_t i64[] = {INT64_MIN, 0, INT64_MAX};
	const char *strs[] = {"a", "", "hello"};
	const size_t lens[] = {1, 0, 5};
	int r = 0;
	snprintf(k, sizeof k, "bytes:%d", i);
	r |= shmkv_builder_add_bytes(b, k, strlen(k), "\0\1\2zz", 5);
	snprintf(k, sizeof k, "str:%d", i);
	r |= shmkv_builder_add_str(b, k, strlen(k), "shared value", 12); /* deduplicated */
	snprintf(k, sizeof k, "i64:%d", i);
	r |= shmkv_builder_add_i64(b, k, strlen(k), -i);
	snprintf(k, sizeof k, "bool:%d", i);
	r |= shmkv_builder_add_bool(b, k, strlen(k), i & 1);
	snprintf(k, sizeof k, "f64:%d", i);
	r |= shmkv_builder_add_f64(b, k, strlen(k), i * 0.5);
	snprintf(k, sizeof k, "f32l:%d", i);
	r |= shmkv_builder_add_f32list(b, k, strlen(k), f32, 3);
	snprintf(k, sizeof k, "f64l:%d", i);
	r |= shmkv_builder_add_f64list(b, k, strlen(k), f64, 3);
	snprintf(k, sizeof k, "i64l:%d", i);
	r |= shmkv_builder_add_i64list(b, k, strlen(k), i64, 3);
	snprintf(k, sizeof k, "strl:%d", i);
	r |= shmkv_builder_add_strlist(b, k, strlen(k), strs, lens, 3);
	if (r)
		die(shmkv_builder_error(b));
}

/* http_req: shmkv-http's request forms of http/README.md, each behind the
 * byte that picks its reader in fuzz_http_req.c (route 0, key 1, batch 2,
 * change 3, auth 4, If-None-Match 5, loader reply 6) */
static void http_req_seeds(void)
{
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/http_req", out);
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		die(dir);
	static const struct {
		const char *name;
		const char *bytes;
		size_t len; /* 0: strlen */
	} seeds[] = {
		{"route-key", "\x00/v1/caches/users/keys/user:1:name", 0},
		{"route-get", "\x00/v1/caches/users/get", 0},
		{"route-list", "\x00/v1/caches", 0},
		{"route-nokey", "\x00/v1/caches/users/keys/", 0},
		{"key-plain", "\x01user:1:name", 0},
		{"key-binary", "\x01%FF%00", 0},
		{"key-slash", "\x01" "a%2Fb%3Fc%23d%25e%20f", 0},
		{"key-utf8", "\x01%C3%A9t%C3%A9", 0},
		{"key-bad", "\x01" "ab%4", 0},
		{"batch", "\x02\x0f{\"keys\": [\"user:1:name\", {\"base64\": \"/wA=\"}, \"\\u0000x\"]}", 0},
		{"batch-empty", "\x02\x00{\"keys\": []}", 0},
		{"batch-over", "\x02\x01{\"keys\": [\"a\", \"b\", \"c\"]}", 0},
		{"batch-notjson", "\x02\x0f{\"keys\": [", 0},
		{"change-string", "\x03\x00\x00\x00\x0buser:1:nameAda Lovelace", 0},
		{"change-i64", "\x03\x02\x03\x00\x01" "i64k42", 0},
		{"change-f32list", "\x03\x06\x07\x0a\x01" "f32list1767225600k[1.5, \"inf\"]", 0},
		{"change-bytes", "\x03\x06\x05\x14\x02" "bytes2030-01-01T00:00:00Zk\xff\x00\x01", 34},
		{"change-remove", "\x03\x01\x00\x00\x02\xff\x00", 7},
		{"auth-reader", "\x04" "Bearer reader-secret-0123456789", 0},
		{"auth-writer", "\x04" "bearer  writer-secret-0123456789abcdef ", 0},
		{"auth-basic", "\x04" "Basic dXNlcjpwYXNz", 0},
		{"etag", "\x05\x00W/\"7-00000000deadbeef\", \"1-0000000000000000\"", 0},
		{"etag-star", "\x05\x01*", 0},
		{"reply-ok", "\x06{\"ok\": true, \"generation\": 7}", 0},
		{"reply-refused", "\x06{\"ok\": false, \"error\": \"bad value\", \"code\": \"EINVAL\", "
				  "\"reason\": \"bad_request\"}", 0},
	};
	for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) {
		/* the leading byte may be \x00: strlen from the second */
		size_t n = seeds[i].len ? seeds[i].len : 1 + strlen(seeds[i].bytes + 1);
		put("http_req", seeds[i].name, seeds[i].bytes, n);
	}
}

/* A delta of base `which` (at base) to OUTDIR/DIR/NAME.shmkv, after the
 * delta at `after` when not NULL; the records added by add(b, which). */
static void delta_seed(const char *dir, const char *name, int which, const char *base,
		       const char *after, int (*add)(shmkv_builder *, int))
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s/%s-%c.shmkv", out, dir, name, which ? 'c' : 'a');
	shmkv_builder *b = fuzz_delta_builder(which);
	if (!b || shmkv_builder_set_delta(b, base, after) != 0 || add(b, which) != 0 ||
	    shmkv_builder_finish(b, path, NULL) != 0)
		die(b ? shmkv_builder_error(b) : "builder");
	shmkv_builder_free(b);
}

static int remove_str(shmkv_builder *b, const char *k)
{
	return shmkv_builder_remove(b, k, strlen(k));
}

/* every type, over keys the base holds (types changed too) and new ones */
static int add_upserts(shmkv_builder *b, int which)
{
	(void)which;
	return fuzz_delta_add_types(b, 1, 1) | fuzz_delta_add_types(b, 9, 2) |
	       shmkv_builder_add_i64(b, "str:2", 5, 42);
}

/* inline and OUT tombstones: of keys the base holds, the lower's keys, an
 * absent key, the empty key */
static int add_tombstones(shmkv_builder *b, int which)
{
	(void)which;
	char k[200];
	int r = remove_str(b, "bytes:0") | remove_str(b, "str:0") | remove_str(b, "gone:1") |
		remove_str(b, "new:L") | remove_str(b, "str:1") | remove_str(b, "");
	r |= shmkv_builder_remove(b, k, (size_t)fuzz_delta_long_key(k, sizeof k, 0));
	r |= shmkv_builder_remove(b, k, (size_t)fuzz_delta_long_key(k, sizeof k, 4));
	r |= shmkv_builder_remove(b, k, (size_t)fuzz_delta_long_key(k, sizeof k, 99));
	return r;
}

/* expired upserts hiding the base's records, far ones, OUT ones */
static int add_expiring(shmkv_builder *b, int which)
{
	(void)which;
	int r = shmkv_builder_set_expires(b, 1) | fuzz_delta_add_types(b, 2, 3);
	r |= shmkv_builder_set_expires(b, FUZZ_DELTA_FAR) | fuzz_delta_add_types(b, 8, 4);
	return r | fuzz_delta_add_expiring(b, 0, 9, 5);
}

static int add_mixed(shmkv_builder *b, int which)
{
	(void)which;
	char k[200];
	int r = fuzz_delta_add_types(b, 0, 6) | remove_str(b, "k:1") | remove_str(b, "i64:1");
	r |= shmkv_builder_remove(b, k, (size_t)fuzz_delta_long_key(k, sizeof k, 8));
	r |= shmkv_builder_set_expires(b, 1) | shmkv_builder_add_bool(b, "bool:2", 6, 1);
	r |= shmkv_builder_set_expires(b, FUZZ_DELTA_FAR) | fuzz_delta_add_expiring(b, 20, 26, 7);
	return r | shmkv_builder_set_expires(b, 0) | shmkv_builder_add_str(b, "new:L", 5, "t", 1);
}

static int add_none(shmkv_builder *b, int which)
{
	(void)b;
	(void)which;
	return 0;
}

static int add_one(shmkv_builder *b, int which)
{
	(void)which;
	return shmkv_builder_add_i64(b, "k:2", 3, 2);
}

/* The seed deltas of each base of fuzz_delta (fuzz_delta_base.h): upserts
 * of every type, tombstones inline and OUT, expiry, a mix, one from diff,
 * an empty one, a delta later in a chain (refused: prev), the lower, and
 * the base itself (refused: an image, not a delta). */
static void deltas(void)
{
	char fix[4096];
	snprintf(fix, sizeof fix, "%s/delta_fixsum", out);
	if (symlink("delta", fix) != 0 && errno != EEXIST)
		die(fix);
	for (int w = 0; w < FUZZ_DELTA_BASES; w++) {
		char base[4096], next[4096], p[4096];
		snprintf(base, sizeof base, "%s/delta/base-%c.shmkv", out, w ? 'c' : 'a');
		snprintf(next, sizeof next, "%s/.next-%c.shmkv", out, w ? 'c' : 'a');
		if (fuzz_delta_build_base(base, w) != 0)
			die("delta base");
		snprintf(p, sizeof p, "%s/delta/lower-%c.shmkv", out, w ? 'c' : 'a');
		if (fuzz_delta_build_lower(p, base, w) != 0)
			die("lower delta");
		delta_seed("delta", "upserts", w, base, NULL, add_upserts);
		delta_seed("delta", "tombstones", w, base, NULL, add_tombstones);
		delta_seed("delta", "expiring", w, base, NULL, add_expiring);
		delta_seed("delta", "mixed", w, base, NULL, add_mixed);
		delta_seed("delta", "empty", w, base, NULL, add_none);
		/* a delta read alone, by fuzz_image */
		delta_seed("image", "delta-mixed", w, base, NULL, add_mixed);
		snprintf(p, sizeof p, "%s/delta/mixed-%c.shmkv", out, w ? 'c' : 'a');
		delta_seed("delta", "chain-2", w, base, p, add_one);
		/* diff: the base against an image with records changed,
		 * dropped and added */
		shmkv_builder *b = fuzz_delta_builder(w);
		if (!b || fuzz_delta_add_types(b, 0, 0) | fuzz_delta_add_types(b, 1, 5) |
				  fuzz_delta_add_expiring(b, 2, 9, 0) |
				  shmkv_builder_add_str(b, "new:d", 5, "d", 1) ||
		    shmkv_builder_finish(b, next, NULL) != 0)
			die(b ? shmkv_builder_error(b) : "builder");
		shmkv_builder_free(b);
		shmkv_join_options jo;
		shmkv_join_options_init(&jo);
		char why[1024];
		snprintf(p, sizeof p, "%s/delta/diff-%c.shmkv", out, w ? 'c' : 'a');
		if (shmkv_build_diff(p, base, next, &jo, NULL, why, sizeof why) != 0)
			die(why);
		unlink(next);
	}
}

/* loader_req: requests of loader/README.md's protocol and a stream; bytes
 * 0-2 as fuzz_loader_req.c reads them (mode, peer, eof; piece sizes; a
 * stream's longest line - 1) */
static void loader_req_seeds(void)
{
	static const struct {
		const char *name, *bytes;
	} seeds[] = {
		{"read-verbs", "\x06\x00\x00ping\nhelp\nlist\nstatus\tusers\nmetrics\nbpf_status\n"
			       "bpf_status\tusers\n"},
		{"write-verbs", "\x06\x07\x00load\tusers\t/data/users.shmkv\tnode=0\r\nreload\tusers\n"
				"rollback\tusers\ndrop\tusers\napply\tusers\t/spool/users.delta\n"
				"compact\tusers\nbpf_export\tusers\tuser:\t256\nbpf_unexport\tusers\n"
				"stream\tusers"},
		{"change", "\x06\x01\x00change\tusers\t{\"key\": \"k\", \"value\": \"v\"}\n"},
		{"not-permitted", "\x04\x03\x00load\tusers\t/etc/shadow\nstatus\tusers\n"},
		{"refused", "\x06\x00\x00nope\tx\nstatus\nstatus\ta\tb\tc\td\n\r\n\n"},
		{"stream", "\x07\x02\x3f{\"key\": \"a\", \"value\": 1}\n\n{\"key\": \"b\", "
			   "\"remove\": true}\n{\"key\": \"c\", \"value\": 2}"},
		{"stream-open", "\x03\x05\x1f{\"key\": \"a\", \"value\": 1}\n{\"key\": \"b\", "
				"\"value\": [1.5, 2.5], \"type\": \"f32list\"}\n{\"ke"},
	};
	for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) /* bytes 0-2 may be \0 */
		put("loader_req", seeds[i].name, seeds[i].bytes, 3 + strlen(seeds[i].bytes + 3));
	/* lines at the limit (8192 bytes, a '\r' counted) and one past it */
	static char big[3 + 8200 + 16];
	for (int over = 0; over < 2; over++) {
		size_t n = 0;
		memcpy(big, "\x06\x03\x00", 3);
		n = 3;
		memcpy(big + n, "load\tusers\t/", 13);
		n += 13;
		memset(big + n, 'p', 8192 - 13 - 1 + (size_t)over);
		n += 8192 - 13 - 1 + (size_t)over;
		memcpy(big + n, "\r\nping\n", 8);
		n += 8;
		put("loader_req", over ? "line-too-long" : "line-max", big, n);
	}
}

/* wal: logs as wal.c writes them (the head, then each record's head, data
 * and tail), their records an image's bytes; and one cut in its last
 * record (a write the loader did not finish) */
static void wal_seeds(void)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/image/all-types.shmkv", out);
	FILE *f = fopen(path, "rb");
	static unsigned char img[1 << 16];
	size_t il = f ? fread(img, 1, sizeof img, f) : 0;
	if (!f || fclose(f) != 0 || !il)
		die(path);
	static unsigned char log[4 * (1 << 16)];
	struct wal_head h = {0x1234, 1 << 20, 0x5678, 1 << 20, 0, 0};
	const uint64_t lens[] = {il, 5, 13, 0, 4096 < il ? 4096 : il};
	for (int k = 0; k < 4; k++) {
		size_t n = WAL_HEAD;
		h.chain_seq = (uint64_t)k;
		walfmt_head(&h, log);
		for (int i = 0; i < k + (k == 3); i++) {
			unsigned char tail[WAL_REC_TAIL];
			uint32_t flags = i == 1 ? WAL_APPLIED : 0;
			walfmt_rec_head(log + n, 7 + (uint64_t)i, flags, lens[i]);
			n += WAL_REC_HEAD;
			memcpy(log + n, img, (size_t)lens[i]);
			n += (size_t)lens[i];
			size_t tl = walfmt_rec_tail(tail, 7 + (uint64_t)i, flags, img, lens[i]);
			memcpy(log + n, tail, tl);
			n += tl;
		}
		char name[32];
		snprintf(name, sizeof name, "log-%d.wal", k);
		put("wal", name, log, n);
		if (k == 3)
			put("wal", "log-torn.wal", log, n - 11);
	}
}

int main(int argc, char **argv)
{
	if (argc != 2 && argc != 3)
		die("usage: fuzz_corpus OUTDIR [STAMP]");
	out = argv[1];
	const char *dirs[] = {"", "image", "jsonl", "tsv", "ctl", "delta", "loader_req", "wal"};
	for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
		char p[4096];
		snprintf(p, sizeof p, "%s/%s", out, dirs[i]);
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			die(p);
	}

	shmkv_builder *b = builder(0);
	add_all_types(b, 0);
	finish(b, "all-types");
	b = builder(0);
	for (int i = 0; i < 12; i++)
		add_all_types(b, i);
	finish(b, "all-types-12");
	b = builder(3); /* 8 hash values: long probes, equal tags */
	for (int i = 0; i < 6; i++)
		add_all_types(b, i);
	finish(b, "collisions");
	b = builder(0);
	finish(b, "empty");
	/* OUT records (a key or a value no bucket holds) and expiring records,
	 * expired (1) and not yet (2100), inline and OUT */
	b = builder(0);
	for (int i = 0; i < 24; i++) {
		char k[400], v[300];
		int kl = snprintf(k, sizeof k, "%s:%d", i % 4 == 0 ? "a-key-longer-than-a-bucket-holds-"
				  "................................................................"
				  "................................................................"
				  "................................................................" : "k", i);
		memset(v, 'v', sizeof v);
		if (shmkv_builder_set_expires(b, i % 3 == 0 ? 0 : i % 3 == 1 ? 1 : INT64_C(4102444800)) ||
		    shmkv_builder_add_str(b, k, (size_t)kl, v, i % 2 ? 3 : sizeof v))
			die(shmkv_builder_error(b));
	}
	finish(b, "out-and-expiry");

	static const char *jsonl[] = {
		"{\"key\": \"user:1:name\", \"value\": \"Ada Lovelace\"}\n"
		"{\"key\": \"user:1:age\", \"value\": 36}\n"
		"{\"key\": \"user:1:active\", \"value\": true}\n"
		"{\"key\": \"user:1:score\", \"value\": 97.5}\n"
		"{\"key\": \"user:1:embedding\", \"value\": [0.25, -1.5, 3.0, 0.125]}\n"
		"{\"key\": \"user:1:ids\", \"value\": [1, 16777217, -3]}\n"
		"{\"key\": \"user:1:tags\", \"value\": [\"a\", \"b\"]}\n",
		"{\"key\": \"k\", \"value\": [1.5, 2.5], \"type\": \"f32list\"}\n"
		"{\"key\": \"b\", \"value\": \"AAEC\", \"type\": \"bytes\"}\n"
		"{\"key\": \"s\", \"value\": \"\\u00e9\\n\\t\", \"type\": \"string\"}\n",
		"{\"meta\": {\"name\": \"n\", \"seed\": 7}}\n{\"key\": \"a\", \"value\": 1}\n",
		"{\"key\": \"a\", \"value\": 1}\n{\"key\": \"a\", \"value\": 2}\n",
		"\n\n{\"key\": \"x\", \"value\": null}\n",
	};
	for (size_t i = 0; i < sizeof jsonl / sizeof *jsonl; i++) {
		char name[32];
		snprintf(name, sizeof name, "seed-%zu.jsonl", i);
		put("jsonl", name, jsonl[i], strlen(jsonl[i]));
	}
	/* tsv: the first byte picks the type (1 + byte % 9), fuzz_tsv.c */
	static const char *tsv[] = {
		"\x01" "k1\tbytes\nk2\t\\x00\\x01\n",
		"\x02" "a\thello\nb\tworld\n",
		"\x03" "a\t1\nb\t-9223372036854775808\n",
		"\x04" "a\ttrue\nb\tfalse\n",
		"\x05" "a\t1.5\nb\t-0.0\n",
		"\x06" "a\t0.25,1.5\n",
		"\x07" "a\t1e300,2\n",
		"\x08" "a\t1,2,3\n",
		"\x09" "a\tx,y,z\n",
	};
	for (size_t i = 0; i < sizeof tsv / sizeof *tsv; i++) {
		char name[32];
		snprintf(name, sizeof name, "seed-%zu.tsv", i);
		put("tsv", name, tsv[i], strlen(tsv[i]));
	}

	/* ctl: the image fuzz_ctl builds for itself, same bytes, same size */
	char seg[4096];
	snprintf(seg, sizeof seg, "%s/ctl/.seg.shmkv", out);
	if (fuzz_build_seg_image(seg) != 0)
		die("segment image");
	struct stat st;
	if (stat(seg, &st) != 0)
		die(seg);
	unlink(seg);
	static const char *paths[] = {"@/seg.shmkv", "@/junk", "@/missing", ""};
	for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
		shmkv_ctl c;
		shmkv_ctl_init(&c);
		c.seq = 2;
		c.generation = i == 3 ? 0 : 1 + i;
		c.segment_count = i == 3 ? 0 : 1;
		c.loader_pid = 1;
		c.segments[0].node = -1;
		c.segments[0].size = (uint64_t)st.st_size;
		c.segments[0].map_size = ((uint64_t)st.st_size + 4095) / 4096 * 4096;
		c.segments[0].page_size = 4096;
		snprintf(c.segments[0].path, sizeof c.segments[0].path, "%s", paths[i]);
		char name[32];
		snprintf(name, sizeof name, "seed-%zu.ctl", i);
		put("ctl", name, &c, sizeof c);
	}
	http_req_seeds();
	deltas();
	loader_req_seeds();
	wal_seeds();
	if (argc == 3) { /* for meson: the file its custom_target names */
		FILE *f = fopen(argv[2], "w");
		if (!f || fclose(f) != 0)
			die(argv[2]);
	}
	return 0;
}
