// hostile_test: forged images never make a reader read outside the image
// (lib/FORMAT.md §12.1: every offset a lookup follows is checked). Real
// images from the builder are damaged where a get, a batch get, a string list
// or an iterator follows an offset or a length, their checksums are
// RECOMPUTED (header included) so that they pass the default open, and then
// every key is read every way there is. Each image lies in memory between
// PROT_NONE guards (image_util.h's Guarded: one page before, 8 GiB after:
// further than a u16 key and a u32 value length reach), so any overread
// faults and fails the test.
//
//   OutUnits        each OUT record's 40-bit entry unit pointed at every
//                   other place: the header, the index, the last entry unit,
//                   VALUES, past the image, the largest unit: SHMKV_ECORRUPT
//                   for its key, other keys unchanged
//   DirOffsets      each directory entry's record offset pointed into the
//                   head, the directory, the middle of another record, the
//                   bucket's last bytes
//   InlineRecords   each inline record's kind, key_len and value_len forged
//   EntryHeaders    every OUT entry's key_len, value_len, type and flags forged
//   SharedRefs      every shared-value reference pointed elsewhere
//   Strlists        strlist counts, ends and NULs forged (inline and OUT):
//                   shmkv_strlist_at never hands out bytes outside the value
//   Buckets         counts, displacement bytes, filters, tags, max_probe
//   SectionTable    sections moved or shrunk (bytes outside them zeroed, so
//                   that the default open still passes)
//   Random          3,000 images with 1-4 random byte writes where the
//                   reader looks, checksums recomputed
//   NoVerifyRandom  the same without recomputing, opened with
//                   SHMKV_OPEN_NOVERIFY (as shmkv_attach maps)
//   NotAnImage      a 423-byte text file is "not a shmkv image" (SHMKV_EMAGIC),
//                   a short prefix of an image is truncated
//
// "Read every way": shmkv_get and shmkv_get_diag (same result), all nine typed
// getters (consistent with shmkv_get), shmkv_get_batch (same as shmkv_get),
// shmkv_strlist_at on every string, a full iteration of the live entries and
// of every record, shmkv_verify. A value handed out must lie in its own
// section (an inline record's: INDEX, an OUT entry's: ENTRIES, shared:
// VALUES) and have its type's shape; an error must be a clean code.
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "crash_case.h"
#include "image_util.h"
#include "test_util.h"

using namespace shmkv_test;

namespace {

// ---- images ----------------------------------------------------------------

shmkv_image_header header_of(const std::string &img)
{
	shmkv_image_header h;
	memcpy(&h, img.data(), sizeof h);
	return h;
}

template <class T> T get_at(const std::string &img, uint64_t off)
{
	T x;
	memcpy(&x, img.data() + off, sizeof x);
	return x;
}
template <class T> void put_at(std::string &img, uint64_t off, T x)
{
	memcpy(&img[off], &x, sizeof x);
}

using testimg::Guarded;

// What a get of each key returned on the intact image.
struct Ref {
	int err;
	unsigned type;
	uint64_t off; // data - base
	size_t size, count;
};

// One record of the index, and what it leads to.
struct Entry {
	uint64_t rec;        // image offset of the record (in INDEX)
	uint64_t dir;        // image offset of its directory entry
	uint64_t bucket;     // the bucket holding it
	bool out;            // an OUT record: its entry in ENTRIES
	uint64_t off;        // OUT: the entry's offset; inline: the record's
	unsigned type;
	bool shared;
	uint64_t value_off;  // image offset of the value (inline: in INDEX; shared: VALUES)
	uint64_t ref_pos;    // shared: image offset of the u64 reference
	uint32_t value_len;
	size_t key;          // index into keys
};

struct Image {
	std::string name;
	std::string bytes;
	shmkv_image_header h;
	std::vector<std::string> keys; // present keys, then absent ones
	size_t present = 0;
	std::vector<Ref> ref;
	std::vector<uint64_t> home; // per key: its home bucket
	std::vector<Entry> entries;
	size_t outs = 0, shared = 0;
};

void add_records(Builder &b, std::vector<std::string> &keys)
{
	const float f[3] = {1, 2, 3};
	const double d[4] = {4, 5, 6, 7};
	const int64_t l[2] = {6, 7};
	const std::string long_str(150, 'L'); // a list holding it does not fit a bucket
	const char *strs[5] = {"x", "", "yz", long_str.c_str(), "\xc3\xa9"};
	const size_t lens[5] = {1, 0, 2, long_str.size(), 2};
	const std::string shared(300, 'S'); // dedup: VALUES is not empty
	for (int i = 0; i < 300; i++) {
		std::string k;
		switch (i % 4) { // every key_eq path: <4, 4..7, 8..16, >16 bytes
		case 0: k = std::string(1 + i % 3, (char)('A' + i % 26)) + (char)i; break;
		case 1: k = "k" + std::to_string(i); break;
		case 2: k = "key:" + std::to_string(i) + ":x"; break;
		default: k = "a-much-longer-key-number-" + std::to_string(i); break;
		}
		keys.push_back(k);
		const char *kp = k.data();
		size_t kl = k.size();
		int err = 0;
		switch (i % 12) {
		case 0: err = b.i64(k, i); break;
		case 1: err = b.str(k, "v" + std::to_string(i)); break;
		case 2: err = b.str(k, shared); break; // OUT, shared
		case 3: err = shmkv_builder_add_bool(b, kp, kl, i & 1); break;
		case 4: err = shmkv_builder_add_f64(b, kp, kl, i / 3.0); break;
		case 5: err = shmkv_builder_add_f32list(b, kp, kl, f, 3); break;
		case 6: err = shmkv_builder_add_f64list(b, kp, kl, d, 4); break;
		case 7: err = shmkv_builder_add_i64list(b, kp, kl, l, 2); break;
		case 8: err = shmkv_builder_add_strlist(b, kp, kl, strs, lens, 5); break; // OUT, shared
		case 9: err = shmkv_builder_add_strlist(b, kp, kl, strs, lens, (size_t)(i % 4)); break;
		case 10: err = b.str(k, std::string(130 + i % 50, (char)('a' + i % 26))); break; // OUT
		default: err = shmkv_builder_add_bytes(b, kp, kl, "\0\1\2", 3); break;
		}
		EXPECT_EQ(err, 0) << b.error();
	}
}

// Builds an image: "plain" (default options), "dense" (a full index: many
// displaced keys) or "bits" (hash_bits 6: colliding tags, the checked path).
Image make_image(const std::string &kind, const TempDir &dir)
{
	Image im;
	im.name = kind;
	shmkv_build_options o = test_options();
	if (kind == "dense") {
		o.load_factor = 1.0; // records fill the buckets
	} else if (kind == "bits") {
		o.hash_bits = 6;
		o.fixed |= SHMKV_OPT_HASH_BITS;
	}
	Builder b(o);
	EXPECT_TRUE(b.ok());
	add_records(b, im.keys);
	std::string path = dir.file(kind + ".shmkv");
	EXPECT_EQ(b.finish(path), 0) << b.error();
	im.bytes = read_file(path);
	im.h = header_of(im.bytes);
	im.present = im.keys.size();
	for (size_t i = 0; i < im.present; i += 7)
		im.keys.push_back(im.keys[i] + "?"); // absent
	im.keys.push_back(std::string(70000, 'L')); // too long

	Guarded g(im.bytes);
	shmkv db;
	char why[256];
	EXPECT_EQ(g.open(0, &db, why, sizeof why), 0) << why;
	EXPECT_EQ(shmkv_verify(&db, why, sizeof why), 0) << why;
	for (const std::string &k : im.keys) {
		shmkv_value v{};
		int err = shmkv_get(&db, k.data(), k.size(), &v);
		im.ref.push_back({err, v.type, err ? 0 : (uint64_t)((const uint8_t *)v.data - db.base),
				  v.size, v.count});
		im.home.push_back(shmkv_home_bucket(
			shmkv_key_hash(im.h.hash_seed, im.h.hash_bits, k.data(), k.size()),
			im.h.bucket_count));
	}
	// the records, bucket by bucket (FORMAT.md §6)
	const uint64_t idx = im.h.sections[0].offset;
	for (uint64_t bn = 0; bn < im.h.bucket_count; bn++) {
		const uint8_t *bk = db.base + idx + bn * SHMKV_BUCKET_BYTES;
		for (unsigned i = 0; i < bk[0]; i++) {
			shmkv_record r{};
			EXPECT_EQ(shmkv_record_at(bk, i, &r), 0) << "bucket " << bn << " record " << i;
			Entry e{};
			e.rec = idx + bn * SHMKV_BUCKET_BYTES + r.pos;
			e.dir = idx + bn * SHMKV_BUCKET_BYTES + SHMKV_BUCKET_HEAD + SHMKV_DIR_BYTES * i;
			e.bucket = bn;
			e.out = r.kind & SHMKV_REC_OUT;
			std::string key;
			if (e.out) {
				shmkv_entry ent{};
				e.off = r.unit << 3;
				EXPECT_EQ(shmkv_entry_at(&db, e.off, &ent, why, sizeof why), 0) << why;
				key.assign((const char *)ent.key, ent.key_len);
				e.type = ent.value.type;
				e.shared = ent.value.shared;
				e.value_off = ent.value_off;
				e.value_len = (uint32_t)ent.value.size;
				shmkv_entry_header eh;
				memcpy(&eh, db.base + e.off, 8);
				e.ref_pos = e.off + shmkv_entry_value_pos(&eh);
				im.outs++;
				im.shared += e.shared;
			} else {
				e.off = e.rec;
				key.assign((const char *)bk + r.key_pos, r.key_len);
				e.type = r.kind & SHMKV_REC_TYPE_MASK;
				e.value_off = idx + bn * SHMKV_BUCKET_BYTES + r.val_pos;
				e.value_len = r.value_len;
			}
			e.key = (size_t)(std::find(im.keys.begin(), im.keys.end(), key) - im.keys.begin());
			EXPECT_LT(e.key, im.present) << "a record of a key the image was not built with";
			im.entries.push_back(e);
		}
	}
	EXPECT_EQ(im.entries.size(), im.present);
	EXPECT_GT(im.outs, 0u) << kind << ": the test wants OUT records";
	EXPECT_GT(im.shared, 0u) << kind << ": the test wants shared values";
	EXPECT_LT(im.outs, im.present) << kind << ": the test wants inline records";
	return im;
}

// Every stride-th entry: 300 entries cycle through the 11 kinds of value, so
// a stride prime to 11 still meets each kind (and keeps the sanitizer run short).
// SHMKV_HOSTILE_SPARSE=k (k >= 1; 1 when unset): each family forges every
// k-th of the entries it would (sample) and Random/NoVerifyRandom a k-th of
// their images; every kind of forgery still runs. ./run test-memcheck sets
// it: under valgrind (about 40x) the full set was 200 s of CI on one core.
size_t sparse()
{
	static const size_t k = [] {
		const char *v = getenv("SHMKV_HOSTILE_SPARSE");
		long n = v ? strtol(v, nullptr, 10) : 1;
		return n >= 1 ? (size_t)n : (size_t)1;
	}();
	return k;
}

std::vector<Entry> sample(const std::vector<Entry> &all, size_t stride)
{
	std::vector<Entry> out;
	stride *= sparse();
	for (size_t i = 0; i < all.size(); i += stride)
		out.push_back(all[i]);
	return out;
}

// ---- reading everything ----------------------------------------------------

struct Tally {
	long ok = 0, notfound = 0, corrupt = 0, type = 0, keylen = 0;
	void add(int e)
	{
		(e == 0 ? ok : e == SHMKV_ENOTFOUND ? notfound : e == SHMKV_ECORRUPT ? corrupt
		 : e == SHMKV_ETYPE ? type : keylen)++;
	}
};

class Reader {
public:
	Reader(const shmkv *db, const Image &im) : db_(db), im_(im) {}

	bool in(uint64_t lo, uint64_t hi, const void *p, uint64_t n) const
	{
		const uint8_t *q = (const uint8_t *)p;
		if (q < db_->base)
			return false;
		uint64_t o = (uint64_t)(q - db_->base);
		return o >= lo && o <= hi && n <= hi - o;
	}
	// inside one bucket of the index: an inline record's key or value
	bool in_index(const void *p, uint64_t n) const
	{
		const uint64_t idx = im_.h.sections[0].offset;
		if (!in(idx, idx + im_.h.sections[0].size, p, n))
			return false;
		const uint64_t o = (uint64_t)((const uint8_t *)p - db_->base) - idx;
		return o % SHMKV_BUCKET_BYTES + n <= SHMKV_BUCKET_BYTES;
	}
	// whether key i's lookup may pass bucket b: its home bucket and the
	// max_probe after it
	bool passes(size_t i, uint64_t b) const
	{
		const uint64_t bc = im_.h.bucket_count;
		return i < im_.home.size() && (b + bc - im_.home[i]) % bc <= im_.h.max_probe;
	}

	// A value handed out: inside its own section, with its type's shape.
	void check_value(const shmkv_value &v, const char *via)
	{
		SCOPED_TRACE(via);
		ASSERT_TRUE(v.type >= 1 && v.type <= SHMKV_TYPE_MAX) << v.type;
		bool nul = v.type == SHMKV_TYPE_BYTES || v.type == SHMKV_TYPE_STRING;
		uint64_t n = v.size + nul;
		if (v.shared)
			ASSERT_TRUE(in(db_->values_off, db_->values_end, v.data, n))
				<< "shared value outside VALUES";
		else
			ASSERT_TRUE(in_index(v.data, n) || in(db_->entries_off, db_->entries_end, v.data, n))
				<< "value outside INDEX and ENTRIES";
		const uint8_t *d = (const uint8_t *)v.data;
		switch (v.type) {
		case SHMKV_TYPE_BYTES:
		case SHMKV_TYPE_STRING:
			EXPECT_EQ(d[v.size], 0);
			EXPECT_EQ(v.count, v.size);
			break;
		case SHMKV_TYPE_I64:
		case SHMKV_TYPE_F64: EXPECT_EQ(v.size, 8u); break;
		case SHMKV_TYPE_BOOL:
			EXPECT_EQ(v.size, 1u);
			EXPECT_LE(d[0], 1);
			break;
		case SHMKV_TYPE_F32LIST: EXPECT_EQ(v.count * 4, v.size); break;
		case SHMKV_TYPE_F64LIST:
		case SHMKV_TYPE_I64LIST: EXPECT_EQ(v.count * 8, v.size); break;
		default: {
			shmkv_strlist l;
			ASSERT_EQ(shmkv_value_strlist(&v, &l), 0);
			EXPECT_EQ(l.count, v.count);
			check_strlist(l, v);
			break;
		}
		}
	}

	void check_strlist(const shmkv_strlist &l, const shmkv_value &v)
	{
		for (size_t i = 0; i < l.count; i++) {
			size_t len = 12345;
			const char *s = shmkv_strlist_at(&l, i, &len);
			strings_++;
			if (!s) {
				EXPECT_EQ(len, 0u);
				bad_strings_++;
				continue;
			}
			const char *lo = (const char *)v.data, *hi = lo + v.size;
			ASSERT_TRUE(s >= lo && len < (size_t)(hi - s)) << "string " << i
									<< " outside its list";
			EXPECT_EQ(s[len], 0);
		}
		EXPECT_EQ(shmkv_strlist_at(&l, l.count, nullptr), nullptr);
	}

	// Every getter for key k; returns shmkv_get's code.
	int read_key(const std::string &k, shmkv_value *out)
	{
		const void *kp = k.data();
		size_t kl = k.size();
		shmkv_value v;
		memset(&v, 0x5a, sizeof v);
		int e = shmkv_get(db_, kp, kl, &v);
		EXPECT_TRUE(e == 0 || e == SHMKV_ENOTFOUND || e == SHMKV_ECORRUPT ||
			    e == SHMKV_EKEYLEN)
			<< shmkv_strerror(e);
		tally.add(e);
		char why[256];
		shmkv_value d;
		int ed = shmkv_get_diag(db_, kp, kl, &d, why, sizeof why);
		EXPECT_EQ(ed, e) << "shmkv_get_diag disagrees: " << why;
		if (e) {
			EXPECT_NE(why[0], 0) << "no reason given";
		} else {
			check_value(v, "shmkv_get");
			EXPECT_EQ(d.data, v.data);
			EXPECT_EQ(d.type, v.type);
			EXPECT_EQ(d.size, v.size);
			EXPECT_EQ(d.count, v.count);
			*out = v;
		}
		// typed getters agree with shmkv_get
		auto want = [&](unsigned t) { return e ? e : v.type == t ? 0 : SHMKV_ETYPE; };
		{
			int64_t x = 0;
			int r = shmkv_get_i64(db_, kp, kl, &x);
			EXPECT_EQ(r, want(SHMKV_TYPE_I64));
			if (!r) {
				EXPECT_EQ(memcmp(&x, v.data, 8), 0);
			}
		}
		{
			double x = 0;
			int r = shmkv_get_f64(db_, kp, kl, &x);
			EXPECT_EQ(r, want(SHMKV_TYPE_F64));
			if (!r) {
				EXPECT_EQ(memcmp(&x, v.data, 8), 0);
			}
		}
		{
			bool x = false;
			int r = shmkv_get_bool(db_, kp, kl, &x);
			EXPECT_EQ(r, want(SHMKV_TYPE_BOOL));
			if (!r) {
				EXPECT_EQ(x, *(const uint8_t *)v.data != 0);
			}
		}
		{
			const char *s = nullptr;
			size_t n = 0;
			int r = shmkv_get_str(db_, kp, kl, &s, &n);
			EXPECT_EQ(r, want(SHMKV_TYPE_STRING));
			if (!r) {
				EXPECT_EQ((const void *)s, v.data);
				EXPECT_EQ(n, v.size);
				EXPECT_EQ(s[n], 0);
			}
		}
		{
			const void *p = nullptr;
			size_t n = 0;
			int r = shmkv_get_bytes(db_, kp, kl, &p, &n);
			EXPECT_EQ(r, want(SHMKV_TYPE_BYTES));
			if (!r) {
				EXPECT_EQ(p, v.data);
				EXPECT_EQ(n, v.size);
			}
		}
		{
			const float *p = nullptr;
			size_t n = 0;
			int r = shmkv_get_f32list(db_, kp, kl, &p, &n);
			EXPECT_EQ(r, want(SHMKV_TYPE_F32LIST));
			if (!r) {
				EXPECT_EQ((const void *)p, v.data);
				EXPECT_EQ(n * 4, v.size);
			}
		}
		{
			const double *p = nullptr;
			size_t n = 0;
			int r = shmkv_get_f64list(db_, kp, kl, &p, &n);
			EXPECT_EQ(r, want(SHMKV_TYPE_F64LIST));
			if (!r) {
				EXPECT_EQ((const void *)p, v.data);
				EXPECT_EQ(n * 8, v.size);
			}
		}
		{
			const int64_t *p = nullptr;
			size_t n = 0;
			int r = shmkv_get_i64list(db_, kp, kl, &p, &n);
			EXPECT_EQ(r, want(SHMKV_TYPE_I64LIST));
			if (!r) {
				EXPECT_EQ((const void *)p, v.data);
				EXPECT_EQ(n * 8, v.size);
			}
		}
		{
			shmkv_strlist l;
			memset(&l, 0, sizeof l);
			int r = shmkv_get_strlist(db_, kp, kl, &l);
			EXPECT_EQ(r, want(SHMKV_TYPE_STRLIST));
			if (!r) {
				EXPECT_EQ(l.count, v.count);
				check_strlist(l, v);
			}
		}
		return e;
	}

	// Reads every key, then all of them in one batch, then iterates and
	// verifies. affected: the key the damage was aimed at (SIZE_MAX: none
	// known), in bucket damaged; other keys must read as on the intact image
	// (a key whose lookup passes that bucket may meet the damage there: it
	// may then read SHMKV_ECORRUPT). Returns the codes.
	std::vector<int> read_all(size_t affected = SIZE_MAX, bool others_exact = false,
				  uint64_t damaged = UINT64_MAX)
	{
		std::vector<int> codes;
		std::vector<shmkv_value> vals(im_.keys.size());
		for (size_t i = 0; i < im_.keys.size(); i++) {
			CASE("%s / key %zu", base_case_.c_str(), i);
			codes.push_back(read_key(im_.keys[i], &vals[i]));
			if (others_exact && i != affected &&
			    !(passes(i, damaged) && codes[i] == SHMKV_ECORRUPT)) {
				const Ref &r = im_.ref[i];
				EXPECT_EQ(codes[i], r.err) << "key " << i << " changed";
				if (!codes[i] && !r.err) {
					EXPECT_EQ((uint64_t)((const uint8_t *)vals[i].data - db_->base), r.off);
					EXPECT_EQ(vals[i].type, r.type);
					EXPECT_EQ(vals[i].size, r.size);
				}
			}
		}
		CASE("%s / batch", base_case_.c_str());
		std::vector<shmkv_key> ks;
		for (const std::string &k : im_.keys)
			ks.push_back({k.data(), k.size()});
		std::vector<shmkv_value> bv(ks.size());
		std::vector<int> be(ks.size(), 12345);
		size_t found = shmkv_get_batch(db_, ks.data(), ks.size(), bv.data(), be.data());
		size_t want_found = 0;
		for (size_t i = 0; i < ks.size(); i++) {
			EXPECT_EQ(be[i], codes[i]) << "batch disagrees with shmkv_get on key " << i;
			if (!be[i] && !codes[i]) {
				EXPECT_EQ(bv[i].data, vals[i].data);
				EXPECT_EQ(bv[i].type, vals[i].type);
				EXPECT_EQ(bv[i].size, vals[i].size);
				EXPECT_EQ(bv[i].count, vals[i].count);
			}
			want_found += codes[i] == 0;
		}
		EXPECT_EQ(found, want_found);

		CASE("%s / iteration", base_case_.c_str());
		shmkv_iter it;
		const void *k = nullptr;
		size_t kl = 0;
		shmkv_value v;
		int err = 0;
		for (bool all : {false, true}) {
			if (all)
				shmkv_iter_init_all(db_, &it);
			else
				shmkv_iter_init(db_, &it);
			uint64_t n = 0;
			while ((err = shmkv_iter_next(&it, &k, &kl, &v)) == 0) {
				if (++n > db_->entry_count) {
					ADD_FAILURE() << "iteration does not end";
					break;
				}
				EXPECT_TRUE(in_index(k, kl) || in(db_->entries_off, db_->entries_end, k, kl))
					<< "key outside INDEX and ENTRIES";
				check_value(v, all ? "shmkv_iter_next (all)" : "shmkv_iter_next");
			}
			EXPECT_TRUE(err == SHMKV_EEND || err == SHMKV_ECORRUPT) << shmkv_strerror(err);
		}
		iter_corrupt += err == SHMKV_ECORRUPT;

		CASE("%s / verify", base_case_.c_str());
		char why[256];
		int ve = shmkv_verify(db_, why, sizeof why);
		EXPECT_TRUE(ve == 0 || ve == SHMKV_ECORRUPT || ve == SHMKV_ECHECKSUM)
			<< shmkv_strerror(ve);
		if (ve == 0) { // an image verify accepts is served without error
			for (size_t i = 0; i < codes.size(); i++)
				EXPECT_NE(codes[i], SHMKV_ECORRUPT) << "verify accepted, key " << i;
			EXPECT_EQ(err, SHMKV_EEND);
			shmkv_iter_init(db_, &it);
			while (shmkv_iter_next(&it, &k, &kl, &v) == 0) {
				shmkv_value got;
				EXPECT_EQ(shmkv_get(db_, k, kl, &got), 0) << "an iterated key is not found";
			}
		}
		verified += ve == 0;
		return codes;
	}

	void set_case(const std::string &c) { base_case_ = c; }

	Tally tally;
	long strings_ = 0, bad_strings_ = 0, iter_corrupt = 0, verified = 0;

private:
	const shmkv *db_;
	const Image &im_;
	std::string base_case_;
};

// ---- the suite -------------------------------------------------------------

// Opens a forged image as the default open does (it must pass), reads
// everything, and returns the codes of shmkv_get per key.
std::vector<int> run(const Image &im, const std::string &img, const std::string &what,
			    size_t affected, bool others_exact, Tally *total = nullptr,
			    unsigned flags = 0, bool must_open = true, uint64_t damaged = UINT64_MAX)
{
	CASE("%s: %s", im.name.c_str(), what.c_str());
	SCOPED_TRACE(crash_case::g_case);
	Guarded g(img);
	shmkv db;
	char why[512] = "";
	int err = g.open(flags, &db, why, sizeof why);
	if (err) {
		EXPECT_FALSE(must_open) << "the default open refused it: " << why;
		EXPECT_NE(why[0], 0);
		return {};
	}
	Reader r(&db, im);
	r.set_case(std::string(crash_case::g_case));
	std::vector<int> codes = r.read_all(affected, others_exact, damaged);
	if (total) {
		total->ok += r.tally.ok;
		total->notfound += r.tally.notfound;
		total->corrupt += r.tally.corrupt;
		total->type += r.tally.type;
		total->keylen += r.tally.keylen;
	}
	CASE("(none)");
	return codes;
}


class Hostile : public ::testing::Test {
protected:
	static TempDir *dir;
	static std::vector<Image> *images;
	static void SetUpTestSuite()
	{
		dir = new TempDir;
		images = new std::vector<Image>;
		for (const char *kind : {"plain", "dense", "bits"})
			images->push_back(make_image(kind, *dir));
	}
	static void TearDownTestSuite()
	{
		delete images;
		delete dir;
	}
	void SetUp() override
	{
		ASSERT_EQ(images->size(), 3u);
		for (const Image &im : *images) {
			ASSERT_FALSE(im.bytes.empty());
			ASSERT_EQ(im.entries.size(), im.present) << im.name;
		}
	}

};
TempDir *Hostile::dir = nullptr;
std::vector<Image> *Hostile::images = nullptr;

TEST_F(Hostile, IntactImagesReadBack)
{
	for (const Image &im : *images) {
		std::vector<int> codes = run(im, im.bytes, "intact", SIZE_MAX, true);
		for (size_t i = 0; i < im.present; i++)
			EXPECT_EQ(codes[i], 0) << im.name << " key " << i;
		for (size_t i = im.present; i + 1 < codes.size(); i++)
			EXPECT_EQ(codes[i], SHMKV_ENOTFOUND) << im.name << " key " << i;
		EXPECT_EQ(codes.back(), SHMKV_EKEYLEN);
		printf("%s: %zu bytes, %" PRIu64 " buckets, max_probe %u\n", im.name.c_str(),
		       im.bytes.size(), im.h.bucket_count, im.h.max_probe);
	}
}

// Each OUT record's 40-bit entry unit (FORMAT.md §6) pointed elsewhere.
TEST_F(Hostile, OutUnits)
{
	long corrupt = 0, total = 0;
	for (const Image &im : *images) {
		const shmkv_image_header &h = im.h;
		const uint64_t ent = h.sections[1].offset, ent_end = ent + h.sections[1].size;
		const uint64_t val = h.sections[2].offset;
		struct Target {
			const char *name;
			uint64_t off;
		} targets[] = {
			{"image start", 0},
			{"header tail", 1024},
			{"index", h.sections[0].offset},
			{"unit below ENTRIES", ent - 8},
			{"last unit of ENTRIES (key runs past)", ent_end - 8},
			{"ENTRIES end", ent_end},
			{"VALUES", val},
			{"image end", h.file_size},
			{"past the image", h.file_size + 4096 * 16},
			{"largest 40-bit unit", SHMKV_UNIT_MASK << 3},
		};
		for (const Entry &e : sample(im.entries, 3)) {
			if (!e.out)
				continue;
			for (const Target &t : targets) {
				std::string img = im.bytes;
				const uint64_t unit = t.off >> 3;
				memcpy(&img[e.rec + 1], &unit, 5);
				testimg::reseal(img);
				// the default open takes it (only verify would refuse it)
				std::vector<int> codes =
					run(im, img, "unit of entry " + std::to_string(e.off) + " -> " + t.name,
					    e.key, true, nullptr, 0, true, e.bucket);
				if (codes.empty())
					continue;
				total++;
				int c = codes[e.key];
				// its key: corrupt; at the last unit the header fits, and a
				// key_len there that is not the key's is just another entry
				bool last = t.off == ent_end - 8;
				EXPECT_TRUE(c == SHMKV_ECORRUPT || (last && c == SHMKV_ENOTFOUND))
					<< im.name << " " << t.name << ": " << shmkv_strerror(c);
				corrupt += c == SHMKV_ECORRUPT;
			}
		}
	}
	printf("OUT units: %ld of %ld forged units give SHMKV_ECORRUPT for their key\n", corrupt,
	       total);
	EXPECT_GT(total, 0);
	EXPECT_GT(corrupt, total * 8 / 10);
}

// Each directory entry's record offset (its low 7 bits, FORMAT.md §6)
// pointed at the head, into the directory, into another record, at the
// bucket's last bytes: the record read there is damage (or another key's,
// which the key compare refuses), never a read past the bucket.
TEST_F(Hostile, DirOffsets)
{
	long n = 0, corrupt = 0;
	for (const Image &im : *images) {
		for (const Entry &e : sample(im.entries, 4)) {
			const uint64_t base = im.h.sections[0].offset + e.bucket * SHMKV_BUCKET_BYTES;
			const unsigned at = (unsigned)(e.rec - base);
			for (unsigned off : {0u, 1u, 7u, 8u, at + 1, at + 2, 100u, 121u, 124u, 125u, 127u}) {
				if (off >= SHMKV_BUCKET_BYTES || off == at)
					continue;
				std::string img = im.bytes;
				img[e.dir] = (char)(((unsigned char)img[e.dir] & 0x80u) | off);
				testimg::reseal(img);
				std::vector<int> codes =
					run(im, img, "dir of record " + std::to_string(e.rec) + " -> +" +
							     std::to_string(off), e.key, true, nullptr, 0, true,
					    e.bucket);
				if (codes.empty())
					continue;
				n++;
				const int c = codes[e.key];
				EXPECT_TRUE(c == SHMKV_ECORRUPT || c == SHMKV_ENOTFOUND)
					<< im.name << " +" << off << ": " << shmkv_strerror(c);
				corrupt += c == SHMKV_ECORRUPT;
			}
		}
	}
	printf("directory offsets: %ld forged, %ld read as corrupt\n", n, corrupt);
	EXPECT_GT(n, 0);
	EXPECT_GT(corrupt, 0);
}

// Each inline record's kind, key_len and value_len (FORMAT.md §6) forged.
TEST_F(Hostile, InlineRecords)
{
	struct Edit {
		const char *name;
		unsigned at;      // byte of the record
		int value;        // < 0: xor with -value
		bool corrupt;     // the key must then read SHMKV_ECORRUPT
	};
	const Edit edits[] = {
		{"kind bit 4", 0, -0x10, true},
		{"kind bit 5", 0, -0x20, true},
		{"kind OUT", 0, -0x80, false},
		{"kind EXPIRES", 0, -0x40, false},
		{"type 0", 0, 0, true},
		{"type 10", 0, 10, true},
		{"type 15", 0, 15, true},
		{"key_len 255", 1, 255, false},
		{"key_len 0", 1, 0, false},
		{"key_len +1", 1, -1, false},
		{"value_len 255", 2, 255, true},
		{"value_len 0", 2, 0, false},
		{"value_len bit 0", 2, -1, false},
		{"value_len bit 6", 2, -0x40, false},
	};
	Tally total;
	long n = 0;
	for (const Image &im : *images) {
		for (const Entry &e : sample(im.entries, 5)) {
			if (e.out)
				continue;
			for (const Edit &ed : edits) {
				std::string img = im.bytes;
				char &c = img[e.rec + ed.at];
				c = (char)(ed.value < 0 ? (unsigned char)c ^ (unsigned)-ed.value : (unsigned)ed.value);
				testimg::reseal(img);
				std::vector<int> codes = run(im, img,
							     "record at " + std::to_string(e.rec) + ": " + ed.name,
							     e.key, true, &total, 0, true, e.bucket);
				n++;
				if (ed.corrupt && !codes.empty()) {
					EXPECT_EQ(codes[e.key], SHMKV_ECORRUPT) << im.name << " " << ed.name;
				}
			}
			// every type in turn: a value read as what it is not
			for (unsigned t = 1; t <= SHMKV_TYPE_MAX; t++) {
				std::string img = im.bytes;
				img[e.rec] = (char)(((unsigned char)img[e.rec] & ~SHMKV_REC_TYPE_MASK) | t);
				testimg::reseal(img);
				run(im, img, "record at " + std::to_string(e.rec) + ": type " + std::to_string(t),
				    e.key, true, &total, 0, true, e.bucket);
				n++;
			}
		}
	}
	printf("inline records: %ld forged; %ld ok, %ld not found, %ld corrupt\n", n, total.ok,
	       total.notfound, total.corrupt);
	EXPECT_GT(total.corrupt, 0);
}

TEST_F(Hostile, EntryHeaders)
{
	struct Edit {
		const char *name;
		void (*apply)(shmkv_entry_header &e);
		bool corrupt; // the entry's key must then read SHMKV_ECORRUPT
	};
	const Edit edits[] = {
		{"value_len max", [](shmkv_entry_header &e) { e.value_len = 0xffffffffu; }, true},
		{"value_len 2^31", [](shmkv_entry_header &e) { e.value_len = 0x80000000u; }, true},
		{"value_len +4096", [](shmkv_entry_header &e) { e.value_len += 4096; }, false},
		{"value_len +1", [](shmkv_entry_header &e) { e.value_len += 1; }, false},
		{"value_len 0", [](shmkv_entry_header &e) { e.value_len = 0; }, false},
		{"value_len -1", [](shmkv_entry_header &e) { e.value_len -= 1; }, false},
		{"key_len 65535", [](shmkv_entry_header &e) { e.key_len = 0xffff; }, false},
		{"key_len +8", [](shmkv_entry_header &e) { e.key_len = (uint16_t)(e.key_len + 8); },
		 false},
		{"type 0", [](shmkv_entry_header &e) { e.type = 0; }, true},
		{"type 10", [](shmkv_entry_header &e) { e.type = 10; }, true},
		{"type 255", [](shmkv_entry_header &e) { e.type = 255; }, true},
		{"flags unknown", [](shmkv_entry_header &e) { e.flags |= 0x80; }, true},
		{"flags shared toggled", [](shmkv_entry_header &e) { e.flags ^= SHMKV_EFLAG_SHARED; },
		 false},
	};
	Tally total;
	for (const Image &im : *images) {
		for (const Entry &e : sample(im.entries, 2)) {
			if (!e.out)
				continue;
			for (const Edit &ed : edits) {
				std::string img = im.bytes;
				shmkv_entry_header eh = get_at<shmkv_entry_header>(img, e.off);
				ed.apply(eh);
				put_at(img, e.off, eh);
				testimg::reseal(img);
				std::vector<int> codes = run(im, img,
							     "entry at " + std::to_string(e.off) + ": " + ed.name,
							     e.key, true, &total, 0, true, e.bucket);
				if (ed.corrupt && !codes.empty()) {
					EXPECT_EQ(codes[e.key], SHMKV_ECORRUPT) << im.name << " " << ed.name;
				}
			}
			// every type in turn: a value read as what it is not
			for (unsigned t = 1; t <= SHMKV_TYPE_MAX; t++) {
				std::string img = im.bytes;
				img[e.off] = (char)t;
				testimg::reseal(img);
				run(im, img, "entry at " + std::to_string(e.off) + ": type " + std::to_string(t),
				    e.key, true, &total, 0, true, e.bucket);
			}
		}
	}
	printf("entry headers: %ld ok, %ld not found, %ld corrupt\n", total.ok, total.notfound,
	       total.corrupt);
	EXPECT_GT(total.corrupt, 0);
}

TEST_F(Hostile, SharedRefs)
{
	long n = 0;
	for (const Image &im : *images) {
		const shmkv_image_header &h = im.h;
		const uint64_t val = h.sections[2].offset, val_end = val + h.sections[2].size;
		for (const Entry &e : sample(im.entries, 3)) {
			if (!e.shared)
				continue;
			for (uint64_t to : {uint64_t(0), h.sections[1].offset, val - 8, val + 1, val_end,
					    val_end - 8, h.file_size, UINT64_MAX - 7, UINT64_C(1) << 63}) {
				std::string img = im.bytes;
				put_at<uint64_t>(img, e.ref_pos, to);
				testimg::reseal(img);
				std::vector<int> codes = run(
					im, img, "shared ref at " + std::to_string(e.ref_pos) + " -> " +
							 std::to_string(to), e.key, true, nullptr, 0, true, e.bucket);
				ASSERT_FALSE(codes.empty());
				if (to != val_end - 8 || e.value_len + 1 > 8) {
					EXPECT_EQ(codes[e.key], SHMKV_ECORRUPT) << "ref -> " << to;
				}
				n++;
			}
		}
	}
	printf("shared refs: %ld forged\n", n);
	EXPECT_GT(n, 0);
}

TEST_F(Hostile, Strlists)
{
	long lists = 0, bad_reads = 0;
	for (const Image &im : *images) {
		for (const Entry &e : sample(im.entries, 2)) {
			if (e.type != SHMKV_TYPE_STRLIST)
				continue;
			const uint32_t count = get_at<uint32_t>(im.bytes, e.value_off);
			std::vector<std::pair<std::string, std::pair<uint64_t, uint32_t>>> edits = {
				{"count max", {e.value_off, 0xffffffffu}},
				{"count +1", {e.value_off, count + 1}},
				{"count -1", {e.value_off, count - 1}},
				{"count huge fits u32", {e.value_off, 0x3fffffffu}},
			};
			for (uint32_t i = 0; i <= count; i++) {
				uint64_t pos = e.value_off + 4 + 4 * (uint64_t)i;
				uint32_t end = get_at<uint32_t>(im.bytes, pos);
				edits.push_back({"end " + std::to_string(i) + " max", {pos, 0xffffffffu}});
				edits.push_back({"end " + std::to_string(i) + " +1", {pos, end + 1}});
				edits.push_back({"end " + std::to_string(i) + " 0", {pos, 0}});
				edits.push_back({"end " + std::to_string(i) + " len", {pos, e.value_len}});
			}
			for (const auto &ed : edits) {
				std::string img = im.bytes;
				put_at<uint32_t>(img, ed.second.first, ed.second.second);
				testimg::reseal(img);
				run(im, img, "strlist at " + std::to_string(e.value_off) + ": " + ed.first,
				    e.key, !e.shared, nullptr, 0, true, e.bucket);
				lists++;
			}
			if (count > 0) { // the NUL of the last string
				std::string img = im.bytes;
				img[e.value_off + e.value_len - 1] = 'Z';
				testimg::reseal(img);
				run(im, img, "strlist at " + std::to_string(e.value_off) + ": last NUL",
				    e.key, !e.shared, nullptr, 0, true, e.bucket);
				lists++;
			}
		}
	}
	// the count's own check: shmkv_value_strlist on values it cannot hold
	const uint8_t tiny[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
	shmkv_value v{SHMKV_TYPE_STRLIST, 0, tiny, 8, 0};
	shmkv_strlist l;
	EXPECT_EQ(shmkv_value_strlist(&v, &l), SHMKV_ECORRUPT);
	EXPECT_EQ(l.count, 0u);
	v.size = 4;
	EXPECT_EQ(shmkv_value_strlist(&v, &l), SHMKV_ECORRUPT);
	// a list whose end runs past its data: the string is refused, not handed out
	const uint32_t forged[5] = {2, 0, 2, 100, 0};
	v = {SHMKV_TYPE_STRLIST, 0, forged, sizeof forged, 2};
	ASSERT_EQ(shmkv_value_strlist(&v, &l), 0);
	size_t len = 7;
	EXPECT_EQ(shmkv_strlist_at(&l, 1, &len), nullptr);
	EXPECT_EQ(len, 0u);
	bad_reads++;
	printf("strlists: %ld forged lists read\n", lists);
	EXPECT_GT(lists, 0);
	EXPECT_GT(bad_reads, 0);
}

// Every bucket's head forged (FORMAT.md §6): its count, D, the filter, the
// directory's tags; max_probe in the header.
TEST_F(Hostile, Buckets)
{
	long n = 0;
	for (const Image &im : *images) {
		const uint64_t idx = im.h.sections[0].offset;
		for (uint64_t b = 0; b < im.h.bucket_count; b += sparse()) {
			const uint64_t at = idx + SHMKV_BUCKET_BYTES * b;
			const unsigned count = (unsigned char)im.bytes[at];
			for (int edit = 0; edit < 9; edit++) {
				std::string img = im.bytes;
				const char *name = "";
				switch (edit) {
				case 0: // displacement byte 255: up to max_probe
					name = "D 255";
					img[at + 1] = (char)0xff;
					break;
				case 1: // displacement byte 254, beyond max_probe
					name = "D 254";
					img[at + 1] = (char)0xfe;
					break;
				case 2: // every filter bit, D 255
					name = "filter all, D 255";
					for (unsigned j = 1; j < SHMKV_BUCKET_HEAD; j++)
						img[at + j] = (char)0xff;
					break;
				case 3: // the directory's tags all the first one's
					name = "tags equal";
					for (unsigned j = 1; j < count; j++) {
						char &lo = img[at + 8 + 2 * j], &hi = img[at + 9 + 2 * j];
						lo = (char)(((unsigned char)lo & 0x7f) | ((unsigned char)img[at + 8] & 0x80));
						hi = img[at + 9];
					}
					break;
				case 4: // a directory entry all ones: tag bits set, off 127
					name = "dir entry all ones";
					img[at + 8 + 2 * (b % 16)] = (char)0xff;
					img[at + 9 + 2 * (b % 16)] = (char)0xff;
					break;
				case 5:
					name = "count 16";
					img[at] = 16;
					break;
				case 6:
					name = "count 17";
					img[at] = 17;
					break;
				case 7:
					name = "count 255";
					img[at] = (char)255;
					break;
				default: // one record fewer: the last drops out of the directory
					name = "count - 1";
					img[at] = (char)(count ? count - 1 : 0);
					break;
				}
				testimg::reseal(img);
				run(im, img, "bucket " + std::to_string(b) + ": " + name, SIZE_MAX, false);
				n++;
			}
		}
		for (uint32_t mp : {0u, 1u, (uint32_t)im.h.bucket_count - 1}) {
			std::string img = im.bytes;
			shmkv_image_header h = im.h;
			h.max_probe = mp;
			memcpy(&img[0], &h, sizeof h);
			testimg::reseal(img);
			run(im, img, "max_probe " + std::to_string(mp), SIZE_MAX, false);
			n++;
		}
	}
	printf("buckets: %ld forged\n", n);
	EXPECT_GT(n, 0);
}

TEST_F(Hostile, SectionTable)
{
	long n = 0;
	for (const Image &im : *images) {
		const shmkv_image_header h0 = im.h;
		auto zero = [](std::string &img, uint64_t from, uint64_t to) {
			for (uint64_t i = from; i < to; i++)
				img[i] = 0;
		};
		for (int edit = 0; edit < 6; edit++) {
			std::string img = im.bytes;
			shmkv_image_header h = h0;
			shmkv_section_desc &E = h.sections[1], &V = h.sections[2];
			std::string name;
			switch (edit) {
			case 0: // ENTRIES starts 64 bytes later: its first entries fall outside
				name = "ENTRIES offset +64";
				zero(img, E.offset, E.offset + 64);
				E.offset += 64;
				E.size -= 64;
				break;
			case 1: // ENTRIES ends 256 bytes early
				name = "ENTRIES size -256";
				E.size -= 256;
				zero(img, E.offset + E.size, E.offset + E.size + 256);
				break;
			case 2: // ENTRIES cut to 8 bytes an OUT record
				name = "ENTRIES size to 8 * OUT records";
				zero(img, E.offset + 8 * im.outs, E.offset + E.size);
				E.size = 8 * im.outs;
				break;
			case 3: // VALUES empty
				name = "VALUES size 0";
				zero(img, V.offset, V.offset + V.size);
				V.size = 0;
				break;
			case 4: // VALUES starts later
				name = "VALUES offset +64";
				zero(img, V.offset, V.offset + 64);
				V.offset += 64;
				V.size = V.size > 64 ? V.size - 64 : 0;
				break;
			default: // VALUES grows to the image end (zero bytes): still inside
				name = "VALUES to the image end";
				V.size = h.file_size - V.offset;
				break;
			}
			memcpy(&img[0], &h, sizeof h);
			testimg::reseal(img);
			std::vector<int> codes = run(im, img, name, SIZE_MAX, false);
			ASSERT_FALSE(codes.empty()) << name;
			long bad = 0;
			for (int c : codes)
				bad += c == SHMKV_ECORRUPT;
			if (edit < 5)
				EXPECT_GT(bad, 0) << im.name << ": " << name;
			else
				EXPECT_EQ(bad, 0) << im.name << ": " << name;
			n++;
		}
	}
	printf("section table: %ld forged\n", n);
}

// Random byte writes where the reader looks: bucket heads and records,
// records and entry headers, directory entries, shared references, values,
// header fields. mode 0: checksums recomputed,
// default open; mode 1: not recomputed, SHMKV_OPEN_NOVERIFY.
void random_images(const std::vector<Image> &images, int count, int mode)
{
	std::mt19937_64 rng(mode ? 0x5eed2 : 0x5eed1);
	Tally total;
	long opened = 0, refused = 0;
	auto t0 = std::chrono::steady_clock::now();
	count = (int)((size_t)count / sparse());
	for (int n = 0; n < count; n++) {
		const Image &im = images[(size_t)n % images.size()];
		const shmkv_image_header &h = im.h;
		std::string img = im.bytes;
		std::string what;
		int writes = 1 + (int)(rng() % 4);
		for (int w = 0; w < writes; w++) {
			const Entry &e = im.entries[rng() % im.entries.size()];
			uint64_t pos;
			switch (rng() % (mode ? 5 : 6)) {
			case 0: pos = h.sections[0].offset + rng() % h.sections[0].size; break;
			case 1: pos = e.off + rng() % 8; break;
			case 2: pos = e.shared ? e.ref_pos + rng() % 8 : e.off + rng() % 8; break;
			case 3: pos = e.value_off + rng() % (e.value_len + 1); break;
			case 4: pos = e.dir + rng() % 2; break;
			default: pos = 32 + rng() % (448 - 32); break; // sizes, counts, sections
			}
			if (pos >= img.size())
				continue;
			uint8_t x;
			switch (rng() % 4) {
			case 0: x = 0; break;
			case 1: x = 0xff; break;
			case 2: x = (uint8_t)(img[pos] ^ (1u << (rng() % 8))); break;
			default: x = (uint8_t)rng(); break;
			}
			img[pos] = (char)x;
			what += " " + std::to_string(pos) + "=" + std::to_string(x);
		}
		if (mode == 0)
			testimg::reseal(img);
		std::vector<int> codes =
			run(im, img, std::string(mode ? "noverify " : "random ") + std::to_string(n) + ":" +
					     what, SIZE_MAX, false, &total, mode ? SHMKV_OPEN_NOVERIFY : 0, false);
		(codes.empty() ? refused : opened)++;
		if (::testing::Test::HasFatalFailure())
			return;
	}
	double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	printf("%s: %d images in %.1f s: %ld opened, %ld refused at open; gets: %ld ok, %ld not "
	       "found, %ld corrupt\n", mode ? "noverify" : "random", count, s, opened, refused,
	       total.ok, total.notfound, total.corrupt);
	EXPECT_GT(opened, count / 2);
	EXPECT_GT(total.corrupt, 0);
}

TEST_F(Hostile, Random)
{
	random_images(*images, 3000, 0);
}

TEST_F(Hostile, NoVerifyRandom)
{
	random_images(*images, 1500, 1);
}

// A text file is "not a shmkv image", whatever its size; only what starts
// like an image is "truncated" (the magic is checked first: FORMAT.md §12).
TEST(NotAnImage, MagicBeforeSize)
{
	TempDir dir;
	std::string text;
	while (text.size() < 423)
		text += "user:1\t{\"name\": \"Ada\", \"langs\": [\"en\", \"fr\"]}\n";
	text.resize(423);
	std::string p = dir.file("notes.txt");
	ASSERT_TRUE(write_file(p, text));
	shmkv *db = nullptr;
	char why[512] = "";
	int err = shmkv_open_file_diag(p.c_str(), 0, &db, why, sizeof why);
	EXPECT_EQ(err, SHMKV_EMAGIC) << shmkv_strerror(err) << ": " << why;
	EXPECT_TRUE(contains_ci(why, "not a shmkv image")) << why;
	EXPECT_TRUE(contains_ci(why, "notes.txt")) << why;
	EXPECT_EQ(db, nullptr);
	EXPECT_EQ(shmkv_header_check(text.data(), text.size(), why, sizeof why), SHMKV_EMAGIC) << why;
	for (size_t n : {1, 7, 8, 9, 4095}) { // any length below the header
		std::string q = dir.file("t" + std::to_string(n));
		ASSERT_TRUE(write_file(q, std::string(n, 'j')));
		EXPECT_EQ(shmkv_open_file(q.c_str(), 0, &db), SHMKV_EMAGIC) << n;
	}
	// what starts like an image, or is empty, is truncated
	Builder b;
	ASSERT_TRUE(b.ok());
	ASSERT_EQ(b.str("k", "v"), 0);
	std::string img = dir.file("img.shmkv");
	ASSERT_EQ(b.finish(img), 0) << b.error();
	std::string bytes = read_file(img);
	for (size_t n : {0, 5, 8, 423, 4095}) {
		std::string q = dir.file("cut" + std::to_string(n));
		ASSERT_TRUE(write_file(q, bytes.substr(0, n)));
		err = shmkv_open_file_diag(q.c_str(), 0, &db, why, sizeof why);
		EXPECT_EQ(err, SHMKV_ETRUNCATED) << n << ": " << why;
		EXPECT_EQ(shmkv_header_check(bytes.data(), n, why, sizeof why), SHMKV_ETRUNCATED) << n;
	}
}

} // namespace
