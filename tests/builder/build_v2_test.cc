// build_v2_test: the builder's format 2 images (lib/FORMAT.md), read back
// by a decoder written here from the format text alone (not lib's reader),
// and the expiry input (JSONL, TSV, API).
//
//   BuildV2.ImageFollowsTheFormat     random records (every type, keys 0..300 bytes, values
//                                     to 600, shared values, expiring ones, displaced keys):
//                                     header fields and checksums, every key found by the
//                                     format's lookup with its type, value and expiry, the
//                                     inline/OUT rule, bucket invariants (layout B: 9 tag bits
//                                     and an offset a u16, records packed from 8 + 2n, zero gaps),
//                                     max_probe exact
//   BuildV2.ThreadCountsGiveOneImage  threads 1, 2, 3, 8 and shuffled input: the same bytes
//   BuildV2.ExpiryFlagOnlyWhenSomeExpires  no expiry: flag clear; one: set
//   BuildV2.DefaultFillBytesPerKey    200k key_N -> val_N: <= 42 bytes a key, all inline
//   BuildV2.DisplacedKeysNextToHome   150k key_N -> val_N at the default fill (§14's
//                                     first come, first served placement): >= 60% of the
//                                     displaced keys one bucket from home, >= 85% of all keys
//                                     within one, max_probe <= 14 (two-pass placement: 26%, 33)
//   BuildV2.SpillingBuildWraps        100k key_N at a fill of 0.97, keys displaced past the
//                                     last bucket into buckets already written: the spilling
//                                     build (1 MiB limit) gives the in-memory bytes
//   BuildV2.NoRoomIsAnError           a fixed bucket count too small: SHMKV_ELIMIT saying so
//   BuildV2.BadlyPackingSizesGetMoreBuckets  records of 42 bytes (two a bucket, 70%) at the
//                                     default fill and at 1.0: more buckets, not an error
//   BuildV2.ReaderAgrees              lib's reader: the image verifies, every key's value and
//                                     expiry (shmkv_get_expires), expired keys absent at a pinned clock
//   BuildV2.PartsJoinEqualsOneBuild   3 parts (filtered) joined: one build's bytes, expiry kept
//   BuildV2.ExpiryInputForms          JSONL RFC 3339 (Z, offsets, fraction), Unix seconds,
//                                     null; TSV column; API: the same stored seconds
//   BuildV2.ExpiryInputErrors         bad forms, before 1970, after 2106: errors naming
//                                     file:line and the text
//   BuildV2.MetaLineFormat            a meta line's "format": 2 taken, 1 refused naming
//                                     shmctl image upgrade, others refused
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <shmkv.h>
#include <shmkv/tools.h>
#include <shmkv_build.h>
#include <xxhash.h>

#include "../test_util.h"

using namespace shmkv_test;

namespace {

struct Rec {
	std::string key;
	unsigned type;
	std::string val; // encoded
	uint32_t expires;
};

struct Found {
	unsigned type = 0;
	std::string val;
	uint32_t expires = 0;
	bool out = false, shared = false;
	uint64_t bucket = 0;
};

uint64_t rd(const std::string &img, uint64_t off, unsigned n)
{
	uint64_t v = 0;
	memcpy(&v, img.data() + off, n);
	return v;
}

// The image as the format text says: fails the test on any deviation and
// returns every record (by key), each checked against the lookup.
class Decoder {
public:
	explicit Decoder(const std::string &img) : img_(img)
	{
		h_ = (const shmkv_image_header *)img.data();
	}
	const shmkv_image_header *h() const { return h_; }
	std::map<std::string, Found> all;
	std::vector<uint64_t> by_disp; // keys by displacement (check())
	uint64_t wrapped = 0;          // keys in a bucket before their home (check())

	void check()
	{
		ASSERT_GE(img_.size(), SHMKV_HEADER_SIZE);
		EXPECT_EQ(memcmp(h_->magic, SHMKV_MAGIC, 8), 0);
		EXPECT_EQ(h_->format_version, 2u);
		EXPECT_EQ(h_->layout_hash, SHMKV_LAYOUT_HASH);
		EXPECT_EQ(h_->bucket_slots, 128u);
		EXPECT_EQ(h_->file_size, img_.size());
		EXPECT_EQ(h_->header_checksum, XXH3_64bits(h_, offsetof(shmkv_image_header, header_checksum)));
		ASSERT_EQ(h_->section_count, 3u);
		for (unsigned s = 0; s < 3; s++) {
			const auto &d = h_->sections[s];
			EXPECT_EQ(d.kind, s + 1);
			ASSERT_LE(d.offset + d.size, img_.size());
			EXPECT_EQ(d.checksum, XXH3_64bits(img_.data() + d.offset, d.size)) << "section " << s;
		}
		B_ = h_->bucket_count;
		ix_ = h_->sections[0].offset;
		EXPECT_EQ(ix_ % 128, 0u);
		EXPECT_EQ(h_->sections[0].size, B_ * 128);
		uint32_t maxd = 0;
		uint64_t expiring = 0;
		for (uint64_t b = 0; b < B_; b++) {
			uint64_t base = ix_ + b * 128;
			unsigned count = (uint8_t)img_[base];
			ASSERT_LE(count, 16u) << "bucket " << b;
			std::vector<bool> covered(128, false);
			for (unsigned p = 0; p < 8 + 2 * count; p++)
				covered[p] = true;
			unsigned pos = 8 + 2 * count; // the builder packs records from here
			for (unsigned i = 0; i < count; i++) {
				std::string key;
				Found f;
				// dir = (tag << 7 | off) & 0xffff
				const unsigned dir = (unsigned)rd(img_, base + 8 + 2 * i, 2);
				unsigned off = dir & 0x7f;
				EXPECT_EQ(off, pos) << "bucket " << b << " record " << i << ": not packed";
				ASSERT_GE(off, pos) << "bucket " << b << " record " << i << ": overlaps";
				unsigned end = record(base, off, &key, &f);
				ASSERT_NE(end, 0u) << "bucket " << b << " record " << i;
				for (unsigned p = off; p < end; p++)
					covered[p] = true;
				pos = end;
				f.bucket = b;
				expiring += f.expires != 0;
				uint64_t hv = shmkv_key_hash(h_->hash_seed, h_->hash_bits, key.data(), key.size());
				const unsigned tag = (unsigned)shmkv_key_tag(hv);
				EXPECT_EQ(dir >> 7, tag & 0x1ff) << "bucket " << b << " record " << i;
				uint64_t home = shmkv_home_bucket(hv, B_);
				uint64_t d = (b + B_ - home) % B_;
				maxd = std::max<uint32_t>(maxd, (uint32_t)d);
				if (by_disp.size() <= d)
					by_disp.resize(d + 1);
				by_disp[d]++;
				wrapped += b < home;
				if (d) { // marked at home
					uint64_t hb = ix_ + home * 128;
					unsigned D = (uint8_t)img_[hb + 1], fi = (unsigned)((tag * 48u) >> 16);
					EXPECT_NE(D, 0u);
					EXPECT_TRUE((uint8_t)img_[hb + 2 + fi / 8] >> (fi % 8) & 1);
					EXPECT_TRUE(d <= D || D == 255);
				}
				EXPECT_TRUE(all.emplace(key, f).second) << "key twice";
			}
			for (unsigned p = 8; p < 128; p++) { // the record area's other bytes, padding too
				if (!covered[p]) {
					ASSERT_EQ(img_[base + p], 0) << "bucket " << b << " byte " << p;
				}
			}
			if (img_[base + 1] == 0) {
				for (unsigned p = 2; p < 8; p++)
					EXPECT_EQ(img_[base + p], 0);
			}
		}
		EXPECT_EQ(h_->max_probe, maxd);
		EXPECT_EQ(all.size(), h_->entry_count);
		EXPECT_EQ((h_->flags & 2) != 0, expiring != 0);
	}

	// The format's lookup of key: the record found, or none.
	bool lookup(const std::string &key, Found *out)
	{
		uint64_t hv = shmkv_key_hash(h_->hash_seed, h_->hash_bits, key.data(), key.size());
		uint16_t tag = (uint16_t)shmkv_key_tag(hv);
		uint64_t home = shmkv_home_bucket(hv, B_);
		if (scan(home, key, tag, out))
			return true;
		unsigned D = (uint8_t)img_[ix_ + home * 128 + 1], fi = (unsigned)((tag * 48u) >> 16);
		if (!D || !((uint8_t)img_[ix_ + home * 128 + 2 + fi / 8] >> (fi % 8) & 1))
			return false;
		uint64_t n = D < 255 ? D : h_->max_probe;
		for (uint64_t k = 1; k <= n; k++)
			if (scan((home + k) % B_, key, tag, out))
				return true;
		return false;
	}

private:
	const std::string &img_;
	const shmkv_image_header *h_;
	uint64_t B_ = 0, ix_ = 0;

	bool scan(uint64_t b, const std::string &key, uint16_t tag, Found *out)
	{
		uint64_t base = ix_ + b * 128;
		unsigned count = (uint8_t)img_[base];
		for (unsigned i = 0; i < count && i < 16; i++) {
			const unsigned dir = (unsigned)rd(img_, base + 8 + 2 * i, 2);
			if ((dir & 0xff80) != ((tag << 7) & 0xff80u)) // the tag's low 9 bits
				continue;
			std::string k;
			Found f;
			unsigned off = dir & 0x7f;
			if (off < 8 + 2 * count || !record(base, off, &k, &f))
				return false;
			if (k == key) {
				*out = f;
				return true;
			}
		}
		return false;
	}
	// Decodes the record at bucket byte pos; returns its end, 0 if bad.
	// Padding is checked zero by check().
	unsigned record(uint64_t base, unsigned pos, std::string *key, Found *f)
	{
		if (pos + 3 > 128)
			return 0;
		uint8_t kind = (uint8_t)img_[base + pos];
		EXPECT_EQ(kind & 0x30, 0);
		bool exp = kind & 0x40;
		if (kind & 0x80) {
			EXPECT_EQ(kind & 0x0f, 0);
			unsigned end = pos + 6 + (exp ? 4 : 0);
			if (end > 128)
				return 0;
			uint64_t off = rd(img_, base + pos + 1, 5) << 3;
			f->out = true;
			if (exp)
				f->expires = (uint32_t)rd(img_, base + pos + 6, 4);
			if (off < h_->sections[1].offset ||
			    off + 8 > h_->sections[1].offset + h_->sections[1].size)
				return 0;
			shmkv_entry_header eh;
			memcpy(&eh, img_.data() + off, 8);
			f->type = eh.type;
			*key = img_.substr(off + 8, eh.key_len);
			uint64_t vp = shmkv_entry_value_pos(&eh);
			if (eh.flags & SHMKV_EFLAG_SHARED) {
				f->shared = true;
				uint64_t ref = rd(img_, off + vp, 8);
				EXPECT_GE(ref, h_->sections[2].offset);
				f->val = img_.substr(ref, eh.value_len);
			} else {
				f->val = img_.substr(off + vp, eh.value_len);
			}
			return end;
		}
		f->type = kind & 0x0f;
		unsigned kl = (uint8_t)img_[base + pos + 1], vl = (uint8_t)img_[base + pos + 2];
		unsigned p = pos + 3;
		if (exp) {
			if (p + 4 > 128)
				return 0;
			f->expires = (uint32_t)rd(img_, base + p, 4);
			p += 4;
		}
		if (p + kl > 128)
			return 0;
		*key = img_.substr(base + p, kl);
		p += kl;
		unsigned a = shmkv_type_align8(f->type) ? 8 : 1;
		for (; p % a; p++)
			EXPECT_EQ(img_[base + p], 0) << "padding";
		unsigned stored = (unsigned)shmkv_value_stored_len(f->type, vl);
		if (p + stored > 128)
			return 0;
		f->val = img_.substr(base + p, vl);
		if (stored > vl) {
			EXPECT_EQ(img_[base + p + vl], 0) << "NUL";
		}
		return p + stored;
	}
};

std::string enc_i64(int64_t v)
{
	return std::string((const char *)&v, 8);
}

std::vector<Rec> random_records(size_t n, uint64_t seed, bool expiry)
{
	std::mt19937_64 g(seed);
	std::vector<Rec> out;
	std::vector<std::string> shared_vals = {std::string(100, 'S'), std::string(300, 'T')};
	for (size_t i = 0; i < n; i++) {
		Rec r;
		unsigned kl = g() % 10 == 0 ? (unsigned)(g() % 300) : (unsigned)(3 + g() % 20);
		r.key = "k" + std::to_string(i);
		while (r.key.size() < kl)
			r.key += (char)('a' + g() % 26);
		if (kl == 0 && i == 0)
			r.key.clear();
		switch (g() % 6) {
		case 0: r.type = SHMKV_TYPE_I64; r.val = enc_i64((int64_t)g()); break;
		case 1: r.type = SHMKV_TYPE_BOOL; r.val = std::string(1, (char)(g() & 1)); break;
		case 2: r.type = SHMKV_TYPE_F64LIST; r.val = std::string(8 * (g() % 80), '\x01'); break;
		case 3: r.type = SHMKV_TYPE_BYTES; r.val = shared_vals[g() % 2]; break;
		default: {
			r.type = SHMKV_TYPE_STRING;
			size_t vl = g() % 4 == 0 ? g() % 600 : g() % 30;
			r.val.assign(vl, 'v');
		}
		}
		r.expires = expiry && g() % 3 == 0 ? (uint32_t)(1 + g() % 0xFFFFFFFFu) : 0;
		out.push_back(r);
	}
	return out;
}

std::string build(const std::vector<Rec> &recs, const std::string &path, unsigned threads,
		  double lf = 0, uint64_t buckets = 0, int *rc = nullptr, std::string *msg = nullptr)
{
	shmkv_build_options o = test_options();
	o.load_factor = lf;
	o.buckets = buckets;
	Builder b(o);
	EXPECT_TRUE(b.ok());
	EXPECT_EQ(shmkv_builder_set_threads(b, threads), 0);
	for (const Rec &r : recs) {
		EXPECT_EQ(shmkv_builder_set_expires(b, r.expires), 0) << b.error();
		EXPECT_EQ(shmkv_builder_add(b, r.key.data(), r.key.size(), r.type, r.val.data(),
					    r.val.size()), 0) << b.error();
	}
	int err = b.finish(path);
	if (rc)
		*rc = err;
	if (msg)
		*msg = b.error();
	if (!rc) {
		EXPECT_EQ(err, 0) << b.error();
	}
	return err ? std::string() : read_file(path);
}

unsigned worst(const Rec &r)
{
	unsigned a = shmkv_type_align8(r.type) ? 7 : 0;
	return 3 + (r.expires ? 4 : 0) + (unsigned)r.key.size() + a +
	       (unsigned)shmkv_value_stored_len(r.type, r.val.size());
}

TEST(BuildV2, ImageFollowsTheFormat)
{
	TempDir d;
	auto recs = random_records(6000, 7, true);
	// crowd a few homes so that displacement and D happen at any load
	std::string img = build(recs, d.file("a.shmkv"), 2, 0.95);
	ASSERT_FALSE(img.empty());
	Decoder dec(img);
	dec.check();
	if (HasFatalFailure())
		return;
	EXPECT_GT(dec.h()->max_probe, 0u) << "no displaced key: the test checks too little";
	EXPECT_EQ(dec.h()->flags & 1, 1u);
	size_t outs = 0, shared = 0;
	for (const Rec &r : recs) {
		Found f;
		ASSERT_TRUE(dec.lookup(r.key, &f)) << r.key;
		EXPECT_EQ(f.type, r.type) << r.key;
		EXPECT_EQ(f.val, r.val) << r.key;
		EXPECT_EQ(f.expires, r.expires) << r.key;
		bool inl = r.key.size() <= 255 && r.val.size() <= 255 && worst(r) <= 48;
		EXPECT_EQ(f.out, !inl) << r.key << " worst " << worst(r);
		outs += f.out;
		shared += f.shared;
	}
	EXPECT_GT(outs, 100u);
	EXPECT_GT(shared, 100u); // the two long repeated byte values
	Found f;
	EXPECT_FALSE(dec.lookup("no such key", &f));
}

TEST(BuildV2, ReaderAgrees)
{
	TempDir d;
	auto recs = random_records(5000, 13, true);
	ASSERT_FALSE(build(recs, d.file("a.shmkv"), 2, 0.9).empty());
	Db db = open_db(d.file("a.shmkv"));
	ASSERT_TRUE(db.get());
	EXPECT_EQ(verify_msg(db.get()), "");
	shmkv_set_clock(db.get(), 1); // before every expiry
	for (const Rec &r : recs) {
		shmkv_value v;
		ASSERT_EQ(shmkv_get(db.get(), r.key.data(), r.key.size(), &v), 0) << r.key;
		EXPECT_EQ(v.type, r.type);
		EXPECT_EQ(sv(v.data, v.size), r.val);
		uint32_t e = 7;
		ASSERT_EQ(shmkv_get_expires(db.get(), r.key.data(), r.key.size(), &e), 0);
		EXPECT_EQ(e, r.expires) << r.key;
	}
	shmkv_set_clock(db.get(), INT64_C(0xFFFFFFFF)); // every expiry past
	for (const Rec &r : recs) {
		shmkv_value v;
		EXPECT_EQ(shmkv_get(db.get(), r.key.data(), r.key.size(), &v),
			  r.expires ? SHMKV_ENOTFOUND : 0) << r.key;
	}
}

TEST(BuildV2, PartsJoinEqualsOneBuild)
{
	TempDir d;
	auto recs = random_records(6000, 17, true);
	const uint64_t B = 1500;
	std::string one = build(recs, d.file("one.shmkv"), 2, 0, B);
	ASSERT_FALSE(one.empty());
	std::vector<std::string> parts;
	for (uint64_t k = 1; k <= 3; k++) {
		shmkv_build_options o = test_options();
			o.buckets = B;
		o.fixed |= SHMKV_OPT_BUCKETS;
		Builder b(o);
		ASSERT_EQ(shmkv_builder_set_part(b, k, 3, 1), 0);
		for (const Rec &r : recs) {
			ASSERT_EQ(shmkv_builder_set_expires(b, r.expires), 0);
			ASSERT_EQ(shmkv_builder_add(b, r.key.data(), r.key.size(), r.type, r.val.data(),
						    r.val.size()), 0) << b.error();
		}
		parts.push_back(d.file("p" + std::to_string(k) + ".shmkv"));
		ASSERT_EQ(b.finish(parts.back()), 0) << b.error();
	}
	std::vector<const char *> names;
	for (auto &p : parts)
		names.push_back(p.c_str());
	char err[512] = "";
	ASSERT_EQ(shmkv_build_join(d.file("j.shmkv").c_str(), names.data(), names.size(), nullptr,
				   nullptr, err, sizeof err), 0) << err;
	EXPECT_TRUE(read_file(d.file("j.shmkv")) == one) << "join differs from one build";
}

TEST(BuildV2, ThreadCountsGiveOneImage)
{
	TempDir d;
	auto recs = random_records(20000, 11, true);
	std::string one = build(recs, d.file("1.shmkv"), 1, 0.9);
	ASSERT_FALSE(one.empty());
	for (unsigned t : {2u, 3u, 8u})
		EXPECT_TRUE(build(recs, d.file("t.shmkv"), t, 0.9) == one) << t << " threads";
	std::shuffle(recs.begin(), recs.end(), std::mt19937_64(3));
	EXPECT_TRUE(build(recs, d.file("s.shmkv"), 4, 0.9) == one) << "shuffled input";
}

TEST(BuildV2, ExpiryFlagOnlyWhenSomeExpires)
{
	TempDir d;
	auto recs = random_records(500, 5, false);
	std::string img = build(recs, d.file("a.shmkv"), 2);
	ASSERT_FALSE(img.empty());
	EXPECT_EQ(((const shmkv_image_header *)img.data())->flags & 2, 0u);
	recs[250].expires = 2000000000;
	img = build(recs, d.file("b.shmkv"), 2);
	ASSERT_FALSE(img.empty());
	EXPECT_EQ(((const shmkv_image_header *)img.data())->flags & 2, 2u);
	Decoder dec(img);
	dec.check();
	Found f;
	ASSERT_TRUE(dec.lookup(recs[250].key, &f));
	EXPECT_EQ(f.expires, 2000000000u);
}

TEST(BuildV2, DefaultFillBytesPerKey)
{
	TempDir d;
	std::vector<Rec> recs;
	for (int i = 0; i < 200000; i++) {
		std::string v = "val_" + std::to_string(i);
		recs.push_back({"key_" + std::to_string(i), SHMKV_TYPE_STRING, v, 0});
	}
	shmkv_build_stats st;
	std::string img;
	{
		shmkv_build_options o = test_options();
			Builder b(o);
		for (const Rec &r : recs)
			ASSERT_EQ(b.str(r.key, r.val), 0);
		ASSERT_EQ(b.finish(d.file("k.shmkv"), &st), 0) << b.error();
		img = read_file(d.file("k.shmkv"));
	}
	double per_key = (double)st.image_bytes / (double)st.entries;
	EXPECT_LE(per_key, 42.0);
	EXPECT_GE(per_key, 30.0) << "fill far above the default: displacement runs grow long";
	EXPECT_EQ(st.entries_bytes, 0u) << "key_N -> val_N is all inline";
	EXPECT_LT(st.max_probe, 64u);
	Decoder dec(img);
	dec.check();
}

std::vector<Rec> key_n(int n)
{
	std::vector<Rec> recs;
	for (int i = 0; i < n; i++)
		recs.push_back({"key_" + std::to_string(i), SHMKV_TYPE_STRING, "val_" + std::to_string(i), 0});
	return recs;
}

// Readers request buckets b and b + 1 together: a key one bucket from home
// costs a home key's round trip, one further costs more (FORMAT.md §6).
TEST(BuildV2, DisplacedKeysNextToHome)
{
	TempDir d;
	std::string img = build(key_n(150000), d.file("k.shmkv"), 2);
	Decoder dec(img);
	dec.check();
	ASSERT_GE(dec.by_disp.size(), 2u);
	uint64_t n = dec.all.size(), displaced = n - dec.by_disp[0];
	double d1 = (double)dec.by_disp[1] / (double)displaced;
	double within1 = (double)(dec.by_disp[0] + dec.by_disp[1]) / (double)n;
	printf("150k key_N: %.1f%% displaced, %.1f%% of them by one bucket, %.1f%% of keys within "
	       "one, max_probe %u\n", 100.0 * (double)displaced / (double)n, 100 * d1, 100 * within1,
	       dec.h()->max_probe);
	EXPECT_GE(d1, 0.60) << "displaced keys one bucket from home";
	EXPECT_GE(within1, 0.85) << "keys within one bucket of home";
	EXPECT_LE(dec.h()->max_probe, 14u);
	EXPECT_GE(dec.h()->max_probe, 2u) << "no run of displaced keys: the test proves nothing";
}

void spill_progress(void *ctx, const char *phase, uint64_t, uint64_t)
{
	if (!strcmp(phase, "sorting")) // a spill run sorted (in memory: "sorting keys")
		*(bool *)ctx = true;
}

TEST(BuildV2, SpillingBuildWraps)
{
	TempDir d;
	auto recs = key_n(100000);
	std::string mem = build(recs, d.file("m.shmkv"), 2, 0.97);
	Decoder dec(mem);
	dec.check();
	EXPECT_GT(dec.wrapped, 0u) << "no key displaced past the last bucket";
	EXPECT_GT(dec.h()->bucket_count, 4096u) << "bucket 0 still in the stream's window";
	bool spilled = false;
	shmkv_build_options o = test_options();
	o.load_factor = 0.97;
	o.progress = spill_progress;
	o.progress_ctx = &spilled;
	Builder b(o);
	ASSERT_EQ(shmkv_builder_set_memory_limit(b, 1 << 20, d.path().c_str()), 0);
	for (const Rec &r : recs)
		ASSERT_EQ(b.str(r.key, r.val), 0);
	ASSERT_EQ(b.finish(d.file("s.shmkv")), 0) << b.error();
	EXPECT_TRUE(spilled) << "the build did not spill";
	EXPECT_TRUE(read_file(d.file("s.shmkv")) == mem) << "the spilling build differs";
}

TEST(BuildV2, NoRoomIsAnError)
{
	TempDir d;
	auto recs = random_records(200, 3, false);
	int rc = 0;
	std::string msg;
	build(recs, d.file("a.shmkv"), 1, 0, 4, &rc, &msg);
	EXPECT_EQ(rc, SHMKV_ELIMIT);
	EXPECT_NE(msg.find("do not fit 4 buckets"), std::string::npos) << msg;
	EXPECT_NE(msg.find("more buckets"), std::string::npos) << msg;
	EXPECT_FALSE(file_exists(d.file("a.shmkv")));
}

TEST(BuildV2, BadlyPackingSizesGetMoreBuckets)
{
	TempDir d;
	std::vector<Rec> recs;
	for (int i = 0; i < 3000; i++) { // 3 + 10 + 26 = 39 bytes (42 with the directory):
					 // two fill 84 of 120
		char k[16];
		snprintf(k, sizeof k, "key_%06d", i);
		recs.push_back({k, SHMKV_TYPE_STRING, std::string(25, 'v'), 0});
	}
	for (double lf : {0.0, 1.0}) {
		int rc = -1;
		std::string msg;
		std::string img = build(recs, d.file("a.shmkv"), 2, lf, 0, &rc, &msg);
		ASSERT_EQ(rc, 0) << lf << ": " << msg;
		Decoder dec(img);
		dec.check();
		EXPECT_EQ(dec.all.size(), recs.size());
		EXPECT_GE(dec.h()->bucket_count, 1500u);
	}
}

// The expiries an input gives, by key (format 2).
std::map<std::string, uint32_t> expiries(const std::string &path, int fmt, int tsv_col,
					 int64_t api = 0)
{
	shmkv_build_options o = test_options();
	o.tsv_expires = tsv_col;
	Builder b(o);
	if (api) {
		EXPECT_EQ(shmkv_builder_set_expires(b, api), 0) << b.error();
	}
	EXPECT_EQ(shmkv_builder_add_file(b, path.c_str(), fmt, SHMKV_TYPE_STRING), 0) << b.error();
	std::string out = path + ".shmkv";
	EXPECT_EQ(b.finish(out), 0) << b.error();
	std::string img = read_file(out);
	std::map<std::string, uint32_t> m;
	if (img.empty())
		return m;
	Decoder dec(img);
	dec.check();
	for (auto &kv : dec.all)
		m[kv.first] = kv.second.expires;
	return m;
}

TEST(BuildV2, ExpiryInputForms)
{
	TempDir d;
	// 2030-01-31T12:00:00Z = 1896091200
	ASSERT_TRUE(write_file(d.file("a.jsonl"),
			       "{\"key\":\"z\",\"value\":\"x\",\"expires\":\"2030-01-31T12:00:00Z\"}\n"
			       "{\"key\":\"plus\",\"value\":\"x\",\"expires\":\"2030-01-31T13:30:00+01:30\"}\n"
			       "{\"key\":\"minus\",\"value\":\"x\",\"expires\":\"2030-01-31t07:00:00-05:00\"}\n"
			       "{\"key\":\"frac\",\"value\":\"x\",\"expires\":\"2030-01-31T11:59:59.25Z\"}\n"
			       "{\"key\":\"fraczero\",\"value\":\"x\",\"expires\":\"2030-01-31T12:00:00.000Z\"}\n"
			       "{\"key\":\"leap\",\"value\":\"x\",\"expires\":\"2028-02-29T00:00:00Z\"}\n"
			       "{\"expires\":1896091200,\"key\":\"unix\",\"value\":\"x\"}\n"
			       "{\"key\":\"max\",\"value\":\"x\",\"expires\":\"2106-02-07T06:28:15Z\"}\n"
			       "{\"key\":\"one\",\"value\":\"x\",\"expires\":1}\n"
			       "{\"key\":\"null\",\"value\":\"x\",\"expires\":null}\n"
			       "{\"key\":\"none\",\"value\":\"x\"}\n"));
	auto m = expiries(d.file("a.jsonl"), SHMKV_INPUT_JSONL, 0);
	EXPECT_EQ(m["z"], 1896091200u);
	EXPECT_EQ(m["plus"], 1896091200u);
	EXPECT_EQ(m["minus"], 1896091200u);
	EXPECT_EQ(m["frac"], 1896091200u); // rounded up
	EXPECT_EQ(m["fraczero"], 1896091200u);
	EXPECT_EQ(m["leap"], 1835395200u);
	EXPECT_EQ(m["unix"], 1896091200u);
	EXPECT_EQ(m["max"], 0xFFFFFFFFu);
	EXPECT_EQ(m["one"], 1u);
	EXPECT_EQ(m["null"], 0u);
	EXPECT_EQ(m["none"], 0u);
	// the API's expiry is the default of lines without their own
	m = expiries(d.file("a.jsonl"), SHMKV_INPUT_JSONL, 0, 1234);
	EXPECT_EQ(m["none"], 1234u);
	EXPECT_EQ(m["z"], 1896091200u);
	EXPECT_EQ(m["null"], 0u) << "null: no expiry, whatever the default";

	ASSERT_TRUE(write_file(d.file("a.tsv"), "a\tx\t2030-01-31T12:00:00Z\nb\ty\t1896091200\n"
						"c\tz\t\nd\tw\t 7 \n"));
	m = expiries(d.file("a.tsv"), SHMKV_INPUT_TSV, 1);
	EXPECT_EQ(m["a"], 1896091200u);
	EXPECT_EQ(m["b"], 1896091200u);
	EXPECT_EQ(m["c"], 0u);
	EXPECT_EQ(m["d"], 7u);
	EXPECT_EQ(m.size(), 4u);
}

// The error of building one bad line 2 (line 1 is good).
std::string input_error(TempDir &d, const std::string &line2, int fmt = SHMKV_INPUT_JSONL,
			int *rc = nullptr)
{
	std::string path = d.file(fmt == SHMKV_INPUT_JSONL ? "bad.jsonl" : "bad.tsv");
	EXPECT_TRUE(write_file(path, (fmt == SHMKV_INPUT_JSONL ? "{\"key\":\"q\",\"value\":1}\n"
							       : "q\t1\t\n") + line2 + "\n"));
	shmkv_build_options o = test_options();
	o.tsv_expires = fmt == SHMKV_INPUT_TSV;
	Builder b(o);
	int err = shmkv_builder_add_file(b, path.c_str(), fmt, SHMKV_TYPE_STRING);
	if (rc)
		*rc = err;
	EXPECT_EQ(err, SHMKV_EINPUT);
	return b.error();
}

TEST(BuildV2, ExpiryInputErrors)
{
	TempDir d;
	struct Case {
		const char *expires, *says;
	} cases[] = {
		{"\"2030-01-31T12:00:00\"", "needs its UTC offset"},
		{"\"2030-01-31\"", "expected an RFC 3339 time"},
		{"\"2030-02-30T00:00:00Z\"", "no such date"},
		{"\"2029-02-29T00:00:00Z\"", "no such date"},
		{"\"2030-01-31T24:00:00Z\"", "no such date"},
		{"\"2030-01-31T12:00:00+25:00\"", "no such UTC offset"},
		{"\"2030-01-31T12:00:00Zjunk\"", "expected an RFC 3339"},
		{"\"2106-02-07T06:28:16Z\"", "after 2106-02-07T06:28:15Z"},
		{"4294967296", "after 2106-02-07T06:28:15Z"},
		{"99999999999999999999999", "after 2106"},
		{"0", "before 1970-01-01T00:00:01Z"},
		{"-5", "before 1970"},
		{"\"1969-12-31T23:59:59Z\"", "before 1970"},
		{"1.5", "must be an integer"},
		{"1e9", "must be an integer"},
		{"true", "expected an RFC 3339 time (a string), Unix seconds"},
		{"[1]", "expected an RFC 3339 time (a string)"},
	};
	for (const Case &c : cases) {
		std::string msg = input_error(d, std::string("{\"key\":\"a\",\"value\":\"x\",\"expires\":") +
							 c.expires + "}");
		EXPECT_NE(msg.find("bad.jsonl:2: expires "), std::string::npos) << c.expires << ": " << msg;
		EXPECT_NE(msg.find(c.says), std::string::npos) << c.expires << ": " << msg;
	}
	std::string msg = input_error(d, "{\"key\":\"a\",\"value\":\"x\",\"expires\":1,\"expires\":2}");
	EXPECT_NE(msg.find("bad.jsonl:2: field \"expires\" appears twice"), std::string::npos) << msg;
	msg = input_error(d, "a\tx\t2030-13-01T00:00:00Z", SHMKV_INPUT_TSV);
	EXPECT_NE(msg.find("bad.tsv:2: expires 2030-13-01T00:00:00Z: no such date"),
		  std::string::npos) << msg;
	msg = input_error(d, "a\tx", SHMKV_INPUT_TSV);
	EXPECT_NE(msg.find("bad.tsv:2: found 2 fields, expected 3"), std::string::npos) << msg;
	msg = input_error(d, "a\tx\t4294967296", SHMKV_INPUT_TSV);
	EXPECT_NE(msg.find("after 2106"), std::string::npos) << msg;

	// the API
	Builder b2(test_options());
	EXPECT_EQ(shmkv_builder_set_expires(b2, INT64_C(0x100000000)), SHMKV_EINPUT);
	EXPECT_EQ(shmkv_builder_set_expires(b2, -1), SHMKV_EINPUT);
	EXPECT_EQ(shmkv_builder_set_expires(b2, INT64_C(0xFFFFFFFF)), 0) << b2.error();
	EXPECT_EQ(shmkv_builder_set_expires(b2, 0), 0) << b2.error();
}

// A dump's meta line names the image's format: 2 is what every build
// writes; 1 (retired) is refused naming the command that converts such an
// image; any other is refused too.
TEST(BuildV2, MetaLineFormat)
{
	TempDir d;
	struct Case {
		const char *format;
		int err;
		const char *says;
	} cases[] = {
		{"2", 0, ""},
		{"1", SHMKV_EINPUT, "shmkv_meta format 1: format 1 is retired"},
		{"3", SHMKV_EINPUT, "shmkv_meta format 3: this builder writes format 2"},
		{"\"2\"", SHMKV_EINPUT, "shmkv_meta field \"format\""},
	};
	for (const Case &c : cases) {
		std::string path = d.file("meta.jsonl");
		ASSERT_TRUE(write_file(path, std::string("{\"shmkv_meta\": {\"format\": ") + c.format +
						     "}}\n{\"key\":\"a\",\"value\":1}\n"));
		Builder b(test_options());
		int err = shmkv_builder_add_file(b, path.c_str(), SHMKV_INPUT_JSONL, SHMKV_TYPE_STRING);
		EXPECT_EQ(err, c.err) << c.format << ": " << b.error();
		EXPECT_NE(b.error().find(c.says), std::string::npos) << c.format << ": " << b.error();
		if (!strcmp(c.format, "1")) {
			EXPECT_NE(b.error().find("'shmctl image upgrade OLD -o NEW'"), std::string::npos)
				<< b.error();
		}
		if (!err) {
			EXPECT_EQ(b.finish(d.file("meta.shmkv")), 0) << b.error();
		}
	}
}

} // namespace
