/* fuzz_delta_body.c - the body of fuzz_delta and fuzz_delta_fixsum
 * (fuzz_delta.h), compiled once for both: arbitrary
 * bytes as a delta image (FORMAT.md §19) of a fixed base
 * (fuzz_delta_base.h), read through by the C reader and merged by the
 * builder (README.md here says what each checks).
 *
 * Each input runs twice: as it is (its identity as it comes, so the
 * refusals of §19.4 run), then, if it is a delta and that changes it, with
 * base_checksum and base_size patched to name the base whose hash_seed and
 * hash_bits it has (base "a" if none) and the header checksum recomputed,
 * so that a mutated delta passes the identity check and reaches the
 * lookups (an input whose header checksum is the only thing wrong runs
 * twice too). A delta that applies is read as the one delta of its base
 * (shmkv_delta_set), as the top over the fixed lower and as the lower under
 * it (shmkv_delta_set2); every get is compared with what the levels answer
 * alone (the one whose filter lets the key through and which holds it,
 * top first, else the base). A delta that passes shmkv_verify is applied
 * by the builder (shmkv_build_apply, as `shmctl image apply`; and
 * shmkv_build_compact, the loader's): the output must open with
 * SHMKV_OPEN_DEEP and hold exactly the records the view through the delta
 * holds; and merged over the lower as the loader merges overlays
 * (shmkv_builder_add_images): the view of it as the top over the lower. */
#include <stdbool.h>
#include <sys/stat.h>

#include "fuzz_build_input.h"
#include "fuzz_delta.h"
#include "fuzz_delta_base.h"

enum { FD_MAXK = 320, FD_VIEWS = 3, FD_MAXREC = 1 << 15 };

typedef struct fd_level {
	uint8_t *mem;  /* the image, read from its file */
	size_t size;
	shmkv db;      /* read alone: the oracle's answers */
	char path[128];
} fd_level;

static struct {
	int ready;
	fd_level base[FUZZ_DELTA_BASES], lower[FUZZ_DELTA_BASES];
	shmkv view[FUZZ_DELTA_BASES][FD_VIEWS]; /* the base, read through deltas */
	char in[128], out[128], out2[128], out3[128];
} fd;

/* One record of an all-records iteration, for comparing two of them. */
typedef struct fd_rec {
	const uint8_t *key;
	size_t key_len;
	const void *data;
	size_t size;
	uint32_t type, expires;
} fd_rec;

static void fd_cleanup(void)
{
	for (int w = 0; w < FUZZ_DELTA_BASES; w++) {
		unlink(fd.base[w].path);
		unlink(fd.lower[w].path);
	}
	unlink(fd.out2);
	unlink(fd.out3);
	fuzz_build_cleanup(); /* in, out.shmkv and the directory */
}

static void fd_load(fd_level *l)
{
	FILE *f = fopen(l->path, "rb");
	struct stat st;
	if (!f || fstat(fileno(f), &st) != 0)
		abort();
	l->size = (size_t)st.st_size;
	void *p = NULL;
	if (posix_memalign(&p, 128, l->size) != 0 || fread(p, 1, l->size, f) != l->size)
		abort();
	l->mem = (uint8_t *)p;
	fclose(f);
	char why[512];
	if (shmkv_bind_mem(&l->db, l->mem, l->size, SHMKV_OPEN_DEEP, why, sizeof why) != 0) {
		fprintf(stderr, "fuzz_delta: %s: %s\n", l->path, why);
		abort();
	}
	shmkv_set_clock(&l->db, FUZZ_DELTA_NOW);
}

static void fd_init(void)
{
	fuzz_build_init();
	atexit(fd_cleanup);
	snprintf(fd.in, sizeof fd.in, "%s/in", fuzz_dir);
	snprintf(fd.out, sizeof fd.out, "%s/out.shmkv", fuzz_dir);
	snprintf(fd.out2, sizeof fd.out2, "%s/out2.shmkv", fuzz_dir);
	snprintf(fd.out3, sizeof fd.out3, "%s/out3.shmkv", fuzz_dir);
	for (int w = 0; w < FUZZ_DELTA_BASES; w++) {
		fd_level *b = &fd.base[w], *l = &fd.lower[w];
		snprintf(b->path, sizeof b->path, "%s/base-%d.shmkv", fuzz_dir, w);
		snprintf(l->path, sizeof l->path, "%s/lower-%d.shmkv", fuzz_dir, w);
		if (fuzz_delta_build_base(b->path, w) != 0 ||
		    fuzz_delta_build_lower(l->path, b->path, w) != 0)
			abort();
		fd_load(b);
		fd_load(l);
		for (int i = 0; i < FD_VIEWS; i++) {
			fd.view[w][i] = b->db;
			shmkv_set_clock(&fd.view[w][i], FUZZ_DELTA_NOW);
		}
	}
	fd.ready = 1;
}

/* Whether delta d's filter lets a key of hash h through (FORMAT.md §19.3),
 * read from its header's fourth section: not the reader's own. */
static int fd_filter_maybe(const shmkv *d, uint64_t h)
{
	const shmkv_image_header *hd = shmkv_header(d);
	const shmkv_section_desc *s = &hd->sections[3];
	uint64_t words = s->size / 8, w;
	memcpy(&w, (const uint8_t *)hd + s->offset + 8 * shmkv_delta_filter_word(h, words), 8);
	uint64_t m = shmkv_delta_filter_mask(h);
	return (w & m) == m;
}

/* What the view answers for key, from its levels read alone: the first of
 * top, lower whose filter lets it through and which holds a record of it
 * (a damaged path: its error), else the base. *lvl: the deciding level's
 * handle. */
static int fd_oracle(const shmkv *top, const shmkv *lower, const shmkv *base, const void *key,
		     size_t key_len, shmkv_value *v, uint32_t *expires, const shmkv **lvl)
{
	const uint64_t h = shmkv_key_hash(base->seed, base->hash_bits, key, key_len);
	const shmkv *levels[3] = {top, lower, base};
	for (int i = 0; i < 3; i++) {
		const shmkv *l = levels[i];
		uint64_t off;
		if (!l || (i < 2 && !fd_filter_maybe(l, h)))
			continue;
		int err = shmkv_find_record(l, key, key_len, &off, expires);
		if (err == SHMKV_ENOTFOUND && i < 2)
			continue;
		*lvl = l;
		if (err)
			return err;
		if (((const uint8_t *)shmkv_header(l))[off] & SHMKV_REC_TOMB)
			*expires = 0;
		return shmkv_get(l, key, key_len, v);
	}
	return SHMKV_ENOTFOUND; /* not reached: the base answers */
}

/* The typed getter of type t: its error and the data it points at (NULL
 * for a scalar or a string list, which it copies or wraps). */
static int fd_typed(const shmkv *db, const void *k, size_t kl, uint32_t t, const void **p,
		    unsigned *sink)
{
	int64_t i64 = 0;
	double f64 = 0;
	bool b = 0;
	size_t n = 0;
	shmkv_strlist sl;
	const char *s = NULL;
	const float *f32l = NULL;
	const double *f64l = NULL;
	const int64_t *i64l = NULL;
	int err;
	*p = NULL;
	switch (t) {
	case SHMKV_TYPE_BYTES: return shmkv_get_bytes(db, k, kl, p, &n);
	case SHMKV_TYPE_STRING: err = shmkv_get_str(db, k, kl, &s, &n); *p = s; return err;
	case SHMKV_TYPE_I64: err = shmkv_get_i64(db, k, kl, &i64); break;
	case SHMKV_TYPE_BOOL: err = shmkv_get_bool(db, k, kl, &b); break;
	case SHMKV_TYPE_F64: err = shmkv_get_f64(db, k, kl, &f64); break;
	case SHMKV_TYPE_F32LIST: err = shmkv_get_f32list(db, k, kl, &f32l, &n); *p = f32l; return err;
	case SHMKV_TYPE_F64LIST: err = shmkv_get_f64list(db, k, kl, &f64l, &n); *p = f64l; return err;
	case SHMKV_TYPE_I64LIST: err = shmkv_get_i64list(db, k, kl, &i64l, &n); *p = i64l; return err;
	default: err = shmkv_get_strlist(db, k, kl, &sl); n = err ? 0 : shmkv_strlist_count(&sl); break;
	}
	*sink += (unsigned)i64 + b + (f64 == f64) + (unsigned)n;
	return err;
}

static int fd_rec_cmp(const void *a, const void *b)
{
	const fd_rec *x = (const fd_rec *)a, *y = (const fd_rec *)b;
	size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
	int c = n ? memcmp(x->key, y->key, n) : 0;
	return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* The all-records iteration of db, sorted by key: its count, -1 when it
 * fails, -2 when it holds more than cap records. */
static long fd_all_records(const shmkv *db, fd_rec *r, size_t cap)
{
	shmkv_iter it;
	const void *k;
	size_t kl, n = 0;
	shmkv_value v;
	int err;
	shmkv_iter_init_all(db, &it);
	while ((err = shmkv_iter_next(&it, &k, &kl, &v)) == 0) {
		if (n == cap)
			return -2;
		r[n++] = (fd_rec){(const uint8_t *)k, kl, v.data, v.size, v.type,
				  shmkv_iter_expires(&it)};
	}
	if (err != SHMKV_EEND)
		return -1;
	qsort(r, n, sizeof *r, fd_rec_cmp);
	return (long)n;
}

/* The records of x and y are the same keys with the same types, values
 * and expiries. */
static void fd_same_records(const shmkv *x, const shmkv *y, const char *what)
{
	static fd_rec a[FD_MAXREC], b[FD_MAXREC];
	long n = fd_all_records(x, a, FD_MAXREC), m = fd_all_records(y, b, FD_MAXREC);
	if (n == -2 || m == -2)
		return; /* more than a 64 KiB input holds: not compared */
	FUZZ_CHECK(n >= 0 && m >= 0, "%s: iterations failed (%ld, %ld)", what, n, m);
	FUZZ_CHECK(n == m, "%s: %ld records, the view %ld", what, m, n);
	for (long i = 0; i < n; i++)
		FUZZ_CHECK(fd_rec_cmp(&a[i], &b[i]) == 0 && a[i].type == b[i].type &&
				   a[i].size == b[i].size && a[i].expires == b[i].expires &&
				   (!a[i].size || !memcmp(a[i].data, b[i].data, a[i].size)),
			   "%s: record %ld (key of %zu bytes) differs from the view's", what, i,
			   a[i].key_len);
}

/* Every read of view (the base read through lower, and top when set),
 * against the levels read alone. verified: the fuzzed delta passed
 * shmkv_verify (the base and the lower always do). */
static void fd_read_view(const shmkv *view, const shmkv *top, const shmkv *lower,
			 const shmkv *base, int verified, const uint8_t *raw,
			 size_t raw_size)
{
	static shmkv_key keys[4 * FD_MAXK + 16];
	static shmkv_value bv[4 * FD_MAXK + 16];
	static int berr[4 * FD_MAXK + 16];
	size_t nk = 0;
	unsigned sink = 0;
	char why[512];
	shmkv_iter it;
	const void *k;
	size_t kl;
	shmkv_value v;
	int err;

	/* the keys: the deltas' records (tombstones too), the base's when
	 * read through one delta (two add no path for a key neither holds),
	 * absent keys, keys cut from the input */
	const shmkv *levels[3] = {top, lower, base};
	for (int i = 0; i < 3; i++) {
		if (!levels[i] || (i == 2 && top))
			continue;
		shmkv_iter_init_all(levels[i], &it);
		for (size_t n = 0; n < FD_MAXK && shmkv_iter_next(&it, &k, &kl, &v) == 0; n++) {
			keys[nk].data = k;
			keys[nk++].len = kl;
		}
	}
	static const char *absent[] = {"", "a", "str:9", "new:L", "0123456789abcdef0123"};
	for (size_t i = 0; i < sizeof absent / sizeof *absent; i++) {
		keys[nk].data = absent[i];
		keys[nk++].len = strlen(absent[i]);
	}
	for (size_t off = 0; off + 16 <= raw_size && nk < 4 * FD_MAXK + 16; off += raw_size / 8 + 1) {
		keys[nk].data = raw + off;
		keys[nk++].len = 1 + raw[off] % 24;
	}

	/* each get as the levels answer; its reason; its typed forms; its
	 * expiry; a tombstone of the deciding delta: absent */
	for (size_t i = 0; i < nk; i++) {
		shmkv_value o;
		uint32_t oexp = 0, exp = 0;
		const shmkv *lvl = NULL;
		int oerr = fd_oracle(top, lower, base, keys[i].data, keys[i].len, &o, &oexp, &lvl);
		err = shmkv_get(view, keys[i].data, keys[i].len, &v);
		FUZZ_CHECK(err == 0 || err == SHMKV_ENOTFOUND || err == SHMKV_ECORRUPT, "get: %d",
			   err);
		FUZZ_CHECK(err == oerr && (err || (v.data == o.data && v.type == o.type &&
						   v.size == o.size)),
			   "key %zu: through the deltas %d, its levels alone %d", i, err, oerr);
		if (!err)
			fuzz_touch_value(&v, &sink);
		shmkv_value d;
		int derr = shmkv_get_diag(view, keys[i].data, keys[i].len, &d, why, sizeof why);
		FUZZ_CHECK(derr == err && (err ? why[0] != 0 : d.data == v.data),
			   "key %zu: get %d, get_diag %d (%s)", i, err, derr, why);
		uint64_t off;
		if (lvl && lvl != base && shmkv_find_record(lvl, keys[i].data, keys[i].len, &off,
							    NULL) == 0 &&
		    (((const uint8_t *)shmkv_header(lvl))[off] & SHMKV_REC_TOMB))
			FUZZ_CHECK(err == SHMKV_ENOTFOUND || err == SHMKV_ECORRUPT,
				   "key %zu: a tombstone's key found (%d)", i, err);
		int eerr = shmkv_get_expires(view, keys[i].data, keys[i].len, &exp);
		if (oerr == 0 || oerr == SHMKV_ECORRUPT)
			FUZZ_CHECK(eerr == oerr ? (eerr || exp == oexp) : oerr == SHMKV_ECORRUPT,
				   "key %zu: expiry %d (%u), the levels' %d (%u)", i, eerr, exp, oerr,
				   oexp);
		const void *p;
		if (!err) {
			int terr = fd_typed(view, keys[i].data, keys[i].len, v.type, &p, &sink);
			FUZZ_CHECK(terr == 0 && (!p || p == v.data), "key %zu: typed get of its "
				   "type %u: %d", i, v.type, terr);
			uint32_t other = 1 + (v.type + (uint32_t)i) % 9;
			terr = fd_typed(view, keys[i].data, keys[i].len, other, &p, &sink);
			FUZZ_CHECK(other == v.type ? terr == 0 : terr == SHMKV_ETYPE,
				   "key %zu: typed get of type %u for a %u: %d", i, other, v.type,
				   terr);
		} else {
			/* damage may show after the type (the record's kind holds it) */
			int terr = fd_typed(view, keys[i].data, keys[i].len, 1 + (uint32_t)i % 9, &p,
					    &sink);
			FUZZ_CHECK(terr == err || (err == SHMKV_ECORRUPT && terr == SHMKV_ETYPE),
				   "key %zu: get %d, typed get %d", i, err, terr);
		}
	}

	/* a batch answers each key as its get */
	size_t found = shmkv_get_batch(view, keys, nk, bv, berr), f2 = 0;
	for (size_t i = 0; i < nk; i++) {
		err = shmkv_get(view, keys[i].data, keys[i].len, &v);
		FUZZ_CHECK(err == berr[i] && (err || (v.data == bv[i].data && v.size == bv[i].size)),
			   "batch gave %d, get %d for key %zu", berr[i], err, i);
		f2 += berr[i] == 0;
	}
	FUZZ_CHECK(found == f2, "batch returned %zu, %zu found", found, f2);

	/* the iterations: what the live one returns get finds (when the delta
	 * is whole: a forged one may hold a record its filter or its index
	 * hides), the count is its length; the all-records one gives each
	 * key's expiry and a key once */
	uint64_t live = 0, bound = 1;
	for (int i = 0; i < 3; i++)
		bound += levels[i] ? levels[i]->entry_count : 0;
	shmkv_iter_init(view, &it);
	while ((err = shmkv_iter_next(&it, &k, &kl, &v)) == 0) {
		fuzz_touch_value(&v, &sink);
		FUZZ_CHECK(++live <= bound, "live iteration past every level's records");
		shmkv_value g;
		int ge = shmkv_get(view, k, kl, &g);
		if (verified)
			FUZZ_CHECK(ge == 0 && g.data == v.data,
				   "whole delta: a live entry not found alike (%d)", ge);
	}
	FUZZ_CHECK(err == SHMKV_EEND || err == SHMKV_ECORRUPT, "live iter_next: %d", err);
	if (verified)
		FUZZ_CHECK(err == SHMKV_EEND, "whole delta: live iteration %d", err);
	uint64_t count = 0;
	int cerr = shmkv_count(view, &count);
	FUZZ_CHECK(cerr == (err == SHMKV_EEND ? 0 : err) && (cerr || count == live),
		   "count %d (%llu), live iteration %d (%llu)", cerr, (unsigned long long)count,
		   err, (unsigned long long)live);
	static fd_rec all[FD_MAXREC];
	long n = fd_all_records(view, all, FD_MAXREC);
	if (verified && n != -2)
		FUZZ_CHECK(n >= (long)live, "whole delta: all-records iteration %ld, %llu live", n,
			   (unsigned long long)live);
	uint64_t found_all = 0;
	for (long i = 0; i < n; i++) {
		uint32_t exp = 0;
		err = shmkv_get_expires(view, all[i].key, all[i].key_len, &exp);
		if (verified) {
			FUZZ_CHECK(err == 0 && exp == all[i].expires,
				   "whole delta: record %ld's expiry %d (%u, iterated %u)", i, err,
				   exp, all[i].expires);
			FUZZ_CHECK(!i || fd_rec_cmp(&all[i - 1], &all[i]) != 0,
				   "whole delta: a key twice in the view");
			found_all += shmkv_get(view, all[i].key, all[i].key_len, &v) == 0;
		}
	}
	/* the live iteration is exactly what get finds: each record found
	 * is the view's, and none is left out */
	if (verified && n >= 0) {
		FUZZ_CHECK(found_all == live, "whole delta: %llu live entries, get finds %llu "
			   "records", (unsigned long long)live, (unsigned long long)found_all);
		for (size_t i = 0; i < nk; i++) {
			fd_rec key = {(const uint8_t *)keys[i].data, keys[i].len, NULL, 0, 0, 0};
			if (shmkv_get_expires(view, keys[i].data, keys[i].len, NULL) == 0)
				FUZZ_CHECK(bsearch(&key, all, (size_t)n, sizeof *all, fd_rec_cmp),
					   "whole delta: key %zu has a record, which the all-records "
					   "iteration leaves out", i);
		}
	}
	volatile unsigned keep = sink;
	(void)keep;
}

/* The delta the builder wrote to fd.out3 opens with SHMKV_OPEN_DEEP, and
 * base w read through it holds the records of view. */
static void fd_same_through(int w, const shmkv *view, const char *what)
{
	shmkv *m;
	char why[512];
	int err = shmkv_open_file_diag(fd.out3, SHMKV_OPEN_DEEP, &m, why, sizeof why);
	FUZZ_CHECK(err == 0, "%s: the delta written is refused: %s", what, why);
	shmkv through = fd.base[w].db;
	err = shmkv_delta_set(&through, m, why, sizeof why);
	FUZZ_CHECK(err == 0, "%s: the delta written does not apply: %s", what, why);
	fd_same_records(view, &through, what);
	shmkv_close(m);
}

/* The builder's merge of the base and the fuzzed delta (at fd.in), one
 * that passes the reader's shmkv_verify (the builder verifies its inputs
 * with it and refuses the others): an error (the delta does not apply)
 * with a message and no output; an output that opens with
 * SHMKV_OPEN_DEEP and holds the view's records (FORMAT.md §19.5). apply's
 * image and compact's are the same bytes (shmkv_build.h); one delta of the
 * base (as_delta) read through is the same view. */
static void fd_merge(int w, const shmkv *view, int applies)
{
	const char *deltas[1] = {fd.in};
	shmkv_join_options jo;
	shmkv_join_options_init(&jo);
	jo.threads = 1;
	jo.memory_limit = 0;
	char why[1024] = "";
	unlink(fd.out);
	int err = shmkv_build_apply(fd.out, fd.base[w].path, deltas, 1, 0, &jo, NULL, why,
				    sizeof why);
	if (err || !applies) {
		FUZZ_CHECK(err, "apply of a delta the reader does not read through: no error");
		FUZZ_CHECK(why[0], "apply: error %d without a message", err);
		FUZZ_CHECK(access(fd.out, F_OK) != 0, "a refused apply left %s", fd.out);
		FUZZ_CHECK(!applies, "apply refused a whole delta that applies: %s", why);
		return;
	}
	shmkv *o;
	err = shmkv_open_file_diag(fd.out, SHMKV_OPEN_DEEP, &o, why, sizeof why);
	FUZZ_CHECK(err == 0, "applied image refused: %s", why);
	fd_same_records(view, o, "apply");
	shmkv_close(o);

	unlink(fd.out2);
	err = shmkv_build_compact(fd.out2, fd.base[w].path, deltas, 1, SHMKV_COMPACT_NOSYNC, &jo,
				  NULL, why, sizeof why);
	FUZZ_CHECK(err == 0, "compact refused what apply merged: %s", why);
	FILE *f1 = fopen(fd.out, "rb"), *f2 = fopen(fd.out2, "rb");
	FUZZ_CHECK(f1 && f2, "outputs gone");
	int c1, c2;
	do {
		c1 = getc(f1);
		c2 = getc(f2);
	} while (c1 == c2 && c1 != EOF);
	FUZZ_CHECK(c1 == c2, "apply and compact wrote different images");
	fclose(f1);
	fclose(f2);

	unlink(fd.out3);
	err = shmkv_build_apply(fd.out3, fd.base[w].path, deltas, 1, 1, &jo, NULL, why,
				sizeof why);
	FUZZ_CHECK(err == 0, "apply --delta refused what apply merged: %s", why);
	fd_same_through(w, view, "apply --delta");
}

/* The loader's merge of two overlays (loader/overlay.c: build_merged): a
 * delta of the base holding the fuzzed delta d's records, then the lower's
 * whose key d does not hold (shmkv_builder_add_images, the first image's
 * record of a key winning). Read through, it must be the view of d as the
 * top over the lower (FORMAT.md §19.6). */
static void fd_overlay(int w, const shmkv *d, const shmkv *view)
{
	shmkv_build_options o;
	shmkv_builder *b;
	if (shmkv_build_options_init(&o) != 0)
		abort();
	o.on_duplicate = SHMKV_DUP_FIRST;
	if (shmkv_builder_new(&o, &b) != 0)
		abort();
	shmkv_builder_set_threads(b, 1); /* as the loader: small, its own thread */
	const shmkv *dbs[2] = {d, &fd.lower[w].db};
	int err = shmkv_builder_set_delta_of(b, &fd.base[w].db, "base");
	FUZZ_CHECK(err == 0, "set_delta_of: %s", shmkv_builder_error(b));
	err = shmkv_builder_add_images(b, dbs, 2);
	if (!err)
		err = shmkv_builder_finish(b, fd.out3, NULL);
	/* the reader verified d: the builder takes it whole */
	FUZZ_CHECK(err == 0, "merging overlays: %d (%s)", err, shmkv_builder_error(b));
	shmkv_builder_free(b);
	fd_same_through(w, view, "overlay merge");
}

/* One run over the bytes b[0, size) as they are now. */
static void fd_run(uint8_t *b, size_t size, unsigned flags)
{
	shmkv d;
	char why[512];
	if (fuzz_open(b, size, flags, &d) != 0)
		return;
	shmkv_set_clock(&d, FUZZ_DELTA_NOW);
	int w = 0;
	for (int i = 0; i < FUZZ_DELTA_BASES; i++)
		if (d.seed == fd.base[i].db.seed && d.hash_bits == fd.base[i].db.hash_bits)
			w = i;
	shmkv *view = fd.view[w];
	const shmkv *base = &fd.base[w].db, *lower = &fd.lower[w].db;
	shmkv_delta_id id;
	int err = shmkv_delta_set(&view[0], &d, why, sizeof why);
	FUZZ_CHECK(err == 0 || (err == SHMKV_EBASE && why[0]), "delta_set: %d (%s)", err, why);
	/* §19.4's table, read here from the header fields */
	int applies = shmkv_delta_id_of(&d, &id) == 0 && id.base_checksum == shmkv_checksum(base) &&
		      id.base_size == base->size && id.prev == 0 && d.seed == base->seed &&
		      d.hash_bits == base->hash_bits;
	FUZZ_CHECK((err == 0) == applies, "delta_set %d, the identity says %s", err,
		   applies ? "it applies" : "it does not");
	if (!applies) {
		/* and as the lower or the top of two */
		err = shmkv_delta_set2(&view[1], lower, &d, why, sizeof why);
		FUZZ_CHECK(err == SHMKV_EBASE && why[0], "delta_set2 (top): %d", err);
		err = shmkv_delta_set2(&view[1], &d, lower, why, sizeof why);
		FUZZ_CHECK(err == SHMKV_EBASE && why[0], "delta_set2 (lower): %d", err);
	}
	err = shmkv_delta_set2(&view[1], NULL, &d, why, sizeof why);
	FUZZ_CHECK(err == -EINVAL && why[0], "a top without a lower: %d", err);
	if (shmkv_is_delta(&d)) {
		/* a delta is never read through another */
		shmkv dd = d;
		err = shmkv_delta_set(&dd, lower, why, sizeof why);
		FUZZ_CHECK(err == SHMKV_EBASE && why[0], "a delta through a delta: %d", err);
	}
	int whole = shmkv_is_delta(&d) && shmkv_verify(&d, why, sizeof why) == 0;
	int verified = applies && whole;
	if (applies) {
		fd_read_view(&view[0], NULL, &d, base, verified, b, size);
		err = shmkv_delta_set2(&view[1], lower, &d, why, sizeof why);
		FUZZ_CHECK(err == 0, "delta_set2 (top): %d (%s)", err, why);
		fd_read_view(&view[1], &d, lower, base, verified, b, size);
		err = shmkv_delta_set2(&view[2], &d, lower, why, sizeof why);
		FUZZ_CHECK(err == 0, "delta_set2 (lower): %d (%s)", err, why);
		fd_read_view(&view[2], lower, &d, base, verified, b, size);
	}
	if (whole) { /* the builder refuses others as the reader's verify does */
		int fdw = open(fd.in, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fdw < 0 || write(fdw, b, size) != (ssize_t)size || close(fdw) != 0)
			abort();
		fd_merge(w, &view[0], applies);
		if (applies) {
			shmkv_delta_set2(&view[1], lower, &d, NULL, 0);
			fd_overlay(w, &d, &view[1]);
		}
	}
	for (int i = 0; i < FD_VIEWS; i++)
		shmkv_delta_set2(&view[i], NULL, NULL, NULL, 0);
}

/* The input as it is, then with its identity patched (above). flags: the
 * open's (fuzz_delta: SHMKV_OPEN_NOVERIFY, the section checksums as they
 * come); fixsum: cut to a multiple of 4096 and made checksum-valid first
 * (fuzz_util.h). The second run also repairs a header checksum the input
 * broke: fuzz_delta's mutations of the header reach the reads too. */
void fuzz_delta_one(const uint8_t *data, size_t size, unsigned flags, int fixsum)
{
	if (!fd.ready)
		fd_init();
	if (fixsum)
		size -= size % SHMKV_FILE_ALIGN;
	if (size < SHMKV_HEADER_SIZE)
		return;
	uint8_t *b = fuzz_copy(data, size);
	if (fixsum)
		fuzz_fix_checksums(b, size);
	fd_run(b, size, flags);
	shmkv_image_header *h = (shmkv_image_header *)(void *)b;
	if (h->flags & SHMKV_HFLAG_DELTA) {
		int w = 0;
		for (int i = 0; i < FUZZ_DELTA_BASES; i++)
			if (h->hash_seed == fd.base[i].db.seed &&
			    h->hash_bits == fd.base[i].db.hash_bits)
				w = i;
		uint64_t *r = h->reserved, sum = h->header_checksum;
		r[SHMKV_DELTA_BASE_CHECKSUM] = shmkv_checksum(&fd.base[w].db);
		r[SHMKV_DELTA_BASE_SIZE] = fd.base[w].db.size;
		h->header_checksum = XXH3_64bits(b, offsetof(shmkv_image_header, header_checksum));
		if (h->header_checksum != sum)
			fd_run(b, size, flags);
	}
	free(b);
}
