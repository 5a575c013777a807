// delta_test: delta images (lib/FORMAT.md §19) on images composed by
// tests/image_util.h from the text alone: a delta opens and verifies, read
// alone (a tombstone is absent; the every-record iteration lists it) and
// read through by its base (upserts win, tombstones hide, the rest is the
// base's; expiry of both; every getter, the batch, the diagnosing get,
// shmkv_get_expires and both iterations against a model, on the hot and the
// checked path); shmkv_delta_set's refusals (§19.4's table); each header,
// lookup and verify rule of §19 broken once; a randomized model test.
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "image_util.h"

using testimg::Answer;
using testimg::Rec;

namespace {

// A handle bound to a composed image in memory.
struct Mem {
	std::string img;
	shmkv db{};
	int err = 0;
	char why[512] = "";
	explicit Mem(std::string bytes) : img(std::move(bytes))
	{
		err = shmkv_bind_mem(&db, img.data(), img.size(), 0, why, sizeof why);
	}
	std::string verify()
	{
		char w[512] = "";
		int e = shmkv_verify(&db, w, sizeof w);
		return e ? std::string(shmkv_errname(e)) + ": " + w : "";
	}
};

testimg::Options delta_of(const Mem &base, uint64_t buckets = 8)
{
	testimg::Options o;
	o.bucket_count = buckets;
	o.delta = true;
	o.base_checksum = shmkv_checksum(&base.db);
	o.base_size = base.db.size;
	o.seed = base.db.seed;
	o.hash_bits = base.db.hash_bits;
	return o;
}

Rec tomb(const std::string &key, bool out = false)
{
	Rec r;
	r.key = key;
	r.tomb = true;
	r.out = out;
	return r;
}

Rec str(const std::string &key, const std::string &v, uint32_t expires = 0, bool out = false)
{
	Rec r;
	r.key = key;
	r.value = v;
	r.expires = expires;
	r.out = out;
	return r;
}

Answer get(const shmkv *db, const std::string &k)
{
	shmkv_value v;
	Answer a;
	a.err = shmkv_get(db, k.data(), k.size(), &v);
	if (!a.err) {
		a.type = v.type;
		a.bytes.assign((const char *)v.data, v.size);
	}
	return a;
}

Answer get_diag(const shmkv *db, const std::string &k, std::string *why = nullptr)
{
	shmkv_value v;
	char w[300] = "";
	Answer a;
	a.err = shmkv_get_diag(db, k.data(), k.size(), &v, w, sizeof w);
	if (!a.err) {
		a.type = v.type;
		a.bytes.assign((const char *)v.data, v.size);
	}
	if (why)
		*why = w;
	return a;
}

// Every record an iteration yields: key -> (type, bytes, expires).
using Listing = std::vector<std::tuple<std::string, unsigned, std::string, uint32_t>>;

Listing iterate(const shmkv *db, bool all, int *end_err)
{
	shmkv_iter it;
	if (all)
		shmkv_iter_init_all(db, &it);
	else
		shmkv_iter_init(db, &it);
	Listing out;
	const void *k;
	size_t kl;
	shmkv_value v;
	int e;
	while ((e = shmkv_iter_next(&it, &k, &kl, &v)) == 0)
		out.emplace_back(std::string((const char *)k, kl), v.type,
				 std::string((const char *)v.data, v.size), shmkv_iter_expires(&it));
	*end_err = e;
	return out;
}

const uint32_t kNow = 1'800'000'000;

// The base: 40 string keys, a few OUT and expiring; hash_bits as given.
std::vector<Rec> base_recs()
{
	std::vector<Rec> r;
	for (int i = 0; i < 40; i++) {
		Rec x = str("key" + std::to_string(i), "base" + std::to_string(i));
		x.out = i % 7 == 0;
		if (i % 11 == 5)
			x.expires = i == 5 ? kNow - 10 : kNow + 1000; // key5 expired
		r.push_back(x);
	}
	return r;
}

std::string long_key(int i)
{
	return std::string(200, 'L') + std::to_string(i); // too long for a bucket: OUT
}

} // namespace

TEST(Delta, OpensAloneAndVerifies)
{
	Mem base(testimg::compose(base_recs(), testimg::Options{.bucket_count = 8}).bytes);
	ASSERT_EQ(base.err, 0) << base.why;
	ASSERT_EQ(shmkv_is_delta(&base.db), 0);
	shmkv_delta_id id;
	EXPECT_EQ(shmkv_delta_id_of(&base.db, &id), SHMKV_EBASE);

	std::vector<Rec> d = {str("key1", "new1"), tomb("key2"), str("fresh", "f"),
			      tomb(long_key(1), true), str("key3", "out3", 0, true)};
	Mem delta(testimg::compose(d, delta_of(base)).bytes);
	ASSERT_EQ(delta.err, 0) << delta.why;
	EXPECT_EQ(delta.verify(), "");
	EXPECT_EQ(shmkv_is_delta(&delta.db), 1);
	ASSERT_EQ(shmkv_delta_id_of(&delta.db, &id), 0);
	EXPECT_EQ(id.base_checksum, shmkv_checksum(&base.db));
	EXPECT_EQ(id.base_size, base.db.size);
	EXPECT_EQ(id.prev, 0u);
	EXPECT_EQ(id.seq, 1u);

	// alone: upserts found, tombstones absent
	EXPECT_EQ(get(&delta.db, "key1"), (Answer{0, SHMKV_TYPE_STRING, "new1"}));
	EXPECT_EQ(get(&delta.db, "key3"), (Answer{0, SHMKV_TYPE_STRING, "out3"}));
	EXPECT_EQ(get(&delta.db, "key2").err, SHMKV_ENOTFOUND);
	EXPECT_EQ(get(&delta.db, long_key(1)).err, SHMKV_ENOTFOUND);
	std::string why;
	EXPECT_EQ(get_diag(&delta.db, "key2", &why).err, SHMKV_ENOTFOUND);
	EXPECT_NE(why.find("tombstone"), std::string::npos) << why;
	uint32_t x = 7;
	EXPECT_EQ(shmkv_get_expires(&delta.db, "key2", 4, &x), SHMKV_ENOTFOUND);
	EXPECT_EQ(x, 7u);

	// iteration: the live one the upserts, the every-record one tombstones too
	int e;
	Listing live = iterate(&delta.db, false, &e);
	EXPECT_EQ(e, SHMKV_EEND);
	EXPECT_EQ(live.size(), 3u);
	for (auto &t : live)
		EXPECT_NE(std::get<1>(t), (unsigned)SHMKV_TYPE_TOMBSTONE);
	Listing all = iterate(&delta.db, true, &e);
	EXPECT_EQ(e, SHMKV_EEND);
	ASSERT_EQ(all.size(), 5u);
	int tombs = 0;
	for (auto &t : all)
		if (std::get<1>(t) == SHMKV_TYPE_TOMBSTONE) {
			tombs++;
			EXPECT_TRUE(std::get<0>(t) == "key2" || std::get<0>(t) == long_key(1));
			EXPECT_EQ(std::get<2>(t), "");
		}
	EXPECT_EQ(tombs, 2);
}

// The model: base records, then the delta's upserts and tombstones.
using Model = testimg::RecModel;

// Every key of keys through db (pinned at now) on every path against model.
void expect_through(shmkv *db, const Model &model, const std::vector<std::string> &keys,
		    uint32_t now)
{
	shmkv_set_clock(db, now);
	std::vector<shmkv_key> bk;
	for (const std::string &k : keys)
		bk.push_back({k.data(), k.size()});
	std::vector<shmkv_value> bv(keys.size());
	std::vector<int> be(keys.size());
	size_t found = shmkv_get_batch(db, bk.data(), bk.size(), bv.data(), be.data());
	size_t want_found = 0;
	for (size_t i = 0; i < keys.size(); i++) {
		const std::string &k = keys[i];
		const Answer w = model.want(k, now);
		want_found += w.err == 0;
		EXPECT_EQ(get(db, k), w) << k;
		EXPECT_EQ(get_diag(db, k), w) << k;
		Answer b{be[i], 0, ""};
		if (!be[i]) {
			b.type = bv[i].type;
			b.bytes.assign((const char *)bv[i].data, bv[i].size);
		}
		EXPECT_EQ(b, w) << "batch " << k;
		const char *s = nullptr;
		size_t len = 0;
		int te = shmkv_get_str(db, k.data(), k.size(), &s, &len);
		if (w.err)
			EXPECT_EQ(te, w.err) << k;
		else if (w.type == SHMKV_TYPE_STRING)
			EXPECT_EQ(std::string(s, len), w.bytes) << k;
		else
			EXPECT_EQ(te, SHMKV_ETYPE) << k;
		uint32_t x = 0;
		auto it = model.m.find(k);
		int xe = shmkv_get_expires(db, k.data(), k.size(), &x);
		if (it == model.m.end())
			EXPECT_EQ(xe, SHMKV_ENOTFOUND) << k;
		else {
			EXPECT_EQ(xe, 0) << k;
			EXPECT_EQ(x, it->second.expires) << k;
		}
	}
	EXPECT_EQ(found, want_found);
	// iterations: the live view and every record of the view, as sets
	for (int all = 0; all < 2; all++) {
		int e;
		Listing got = iterate(db, all, &e);
		EXPECT_EQ(e, SHMKV_EEND);
		std::map<std::string, std::pair<std::string, uint32_t>> g, w;
		for (auto &t : got)
			EXPECT_TRUE(g.emplace(std::get<0>(t), std::make_pair(std::get<2>(t), std::get<3>(t)))
					    .second)
				<< "twice: " << std::get<0>(t);
		for (auto &[k, r] : model.m)
			if (all || !r.expires || now < r.expires)
				w.emplace(k, std::make_pair(r.value, r.expires));
		EXPECT_EQ(g, w) << (all ? "every record" : "live");
	}
}

TEST(Delta, ReadThrough)
{
	for (uint32_t bits : {64u, 6u}) { // 6: the checked path (a test hash)
		SCOPED_TRACE("hash_bits " + std::to_string(bits));
		std::vector<Rec> b = base_recs();
		b.push_back(str(long_key(1), "long1"));
		b.back().out = true;
		testimg::Options bo;
		bo.bucket_count = 16;
		bo.hash_bits = bits;
		Mem base(testimg::compose(b, bo).bytes);
		ASSERT_EQ(base.err, 0) << base.why;
		std::vector<Rec> d = {
			str("key1", "new1"),			  // replaces
			tomb("key2"),				  // removes
			str("fresh", "f"),			  // adds
			tomb(long_key(1), true),		  // an OUT tombstone
			str("key3", "out3", 0, true),		  // an OUT upsert
			str("key4", "gone", kNow - 1),		  // an expired upsert hides the base's
			str("key6", "later", kNow + 5),		  // expires later
			tomb("never-there"),			  // removes nothing
			str("key5", "back"),			  // the base's expired key, live again
		};
		Rec num;
		num.key = "key8";
		num.type = SHMKV_TYPE_I64;
		num.value = testimg::i64(-8); // a type change
		d.push_back(num);
		Mem delta(testimg::compose(d, delta_of(base, 4)).bytes);
		ASSERT_EQ(delta.err, 0) << delta.why;
		ASSERT_EQ(delta.verify(), "");
		char why[300];
		ASSERT_EQ(shmkv_delta_set(&base.db, &delta.db, why, sizeof why), 0) << why;
		Model model(b);
		model.apply(d);
		std::vector<std::string> keys;
		for (auto &r : b)
			keys.push_back(r.key);
		for (auto &r : d)
			keys.push_back(r.key);
		keys.push_back("absent");
		keys.push_back("");
		for (uint32_t now : {kNow - 100, kNow, kNow + 5, kNow + 2000})
			expect_through(&base.db, model, keys, now);
		std::string w;
		shmkv_set_clock(&base.db, kNow);
		EXPECT_EQ(get_diag(&base.db, "key2", &w).err, SHMKV_ENOTFOUND);
		EXPECT_NE(w.find("removed by the delta"), std::string::npos) << w;
		EXPECT_EQ(get_diag(&base.db, "key4", &w).err, SHMKV_ENOTFOUND);
		EXPECT_NE(w.find("expired"), std::string::npos) << w;
		// cleared: the base alone again
		ASSERT_EQ(shmkv_delta_set(&base.db, nullptr, why, sizeof why), 0);
		Model alone(b);
		expect_through(&base.db, alone, keys, kNow);
	}
}

TEST(Delta, FilterLetsAbsentKeysThrough)
{
	Mem base(testimg::compose(base_recs(), testimg::Options{.bucket_count = 8}).bytes);
	ASSERT_EQ(base.err, 0);
	std::vector<Rec> d = {str("key1", "new1")};
	testimg::Image di = testimg::compose(d, delta_of(base));
	// every filter bit set: every key is a "maybe", the delta's lookup decides
	const shmkv_image_header *h = (const shmkv_image_header *)(const void *)di.bytes.data();
	memset(&di.bytes[h->sections[3].offset], 0xff, h->sections[3].size);
	testimg::reseal(di.bytes);
	Mem delta(di.bytes);
	ASSERT_EQ(delta.err, 0) << delta.why;
	EXPECT_EQ(delta.verify(), ""); // surplus bits are allowed
	ASSERT_EQ(shmkv_delta_set(&base.db, &delta.db, nullptr, 0), 0);
	Model model(base_recs());
	model.apply(d);
	std::vector<std::string> keys;
	for (auto &r : base_recs())
		keys.push_back(r.key);
	expect_through(&base.db, model, keys, kNow);
}

TEST(Delta, SetRefusesWhatDoesNotApply)
{
	Mem base(testimg::compose(base_recs(), testimg::Options{.bucket_count = 8}).bytes);
	Mem other(testimg::compose({str("x", "y")}, testimg::Options{.bucket_count = 8}).bytes);
	ASSERT_EQ(base.err, 0);
	ASSERT_EQ(other.err, 0);
	std::vector<Rec> d = {str("key1", "new1")};
	auto refused = [&](testimg::Options o, const char *what) {
		Mem delta(testimg::compose(d, o).bytes);
		ASSERT_EQ(delta.err, 0) << what << ": " << delta.why;
		char why[300] = "";
		EXPECT_EQ(shmkv_delta_set(&base.db, &delta.db, why, sizeof why), SHMKV_EBASE) << what;
		EXPECT_NE(std::string(why).find(what), std::string::npos) << why;
		EXPECT_EQ(base.db.over, nullptr); // unchanged on error
	};
	testimg::Options o = delta_of(base);
	o.base_checksum ^= 1;
	refused(o, "not this one");
	o = delta_of(base);
	o.base_size += 4096;
	refused(o, "not this one");
	o = delta_of(base);
	o.prev = 0x1234;
	o.seq = 2;
	refused(o, "merge the chain");
	o = delta_of(base);
	o.seed ^= 1;
	refused(o, "seed");
	o = delta_of(other); // a delta of another image
	refused(o, "not this one");

	char why[300];
	EXPECT_EQ(shmkv_delta_set(&base.db, &other.db, why, sizeof why), SHMKV_EBASE);
	EXPECT_NE(std::string(why).find("not a delta"), std::string::npos) << why;
	Mem delta(testimg::compose(d, delta_of(base)).bytes);
	EXPECT_EQ(shmkv_delta_set(&delta.db, &delta.db, why, sizeof why), SHMKV_EBASE);
	EXPECT_NE(std::string(why).find("cannot be read through another"), std::string::npos)
		<< why;
	EXPECT_EQ(shmkv_delta_set(&base.db, &delta.db, why, sizeof why), 0) << why;
	EXPECT_STREQ(shmkv_strerror(SHMKV_EBASE), "delta does not apply to this image");
	EXPECT_STREQ(shmkv_errname(SHMKV_EBASE), "SHMKV_EBASE");
}

namespace {

// The delta of d over base with its header changed by edit, resealed.
std::string forged(const std::vector<Rec> &d, const testimg::Options &o,
		   void (*edit)(shmkv_image_header *))
{
	std::string img = testimg::compose(d, o).bytes;
	shmkv_image_header h;
	memcpy(&h, img.data(), sizeof h);
	edit(&h);
	memcpy(&img[0], &h, sizeof h);
	testimg::reseal(img);
	return img;
}

} // namespace

TEST(Delta, HeaderRules)
{
	Mem base(testimg::compose(base_recs(), testimg::Options{.bucket_count = 8}).bytes);
	const testimg::Options o = delta_of(base);
	const std::vector<Rec> d = {str("key1", "new1"), tomb("key2")};
	struct Case {
		const char *what;
		void (*edit)(shmkv_image_header *);
		int err;
		const char *msg;
	} cases[] = {
		{"DELTA flag clear", [](shmkv_image_header *h) { h->flags &= ~SHMKV_HFLAG_DELTA; },
		 SHMKV_ECORRUPT, "without the DELTA header flag"},
		{"three sections",
		 [](shmkv_image_header *h) {
			 h->section_count = 3;
			 memset(&h->sections[3], 0, sizeof h->sections[3]);
		 },
		 SHMKV_ECORRUPT, "a delta has 4"},
		{"empty filter", [](shmkv_image_header *h) { h->sections[3].size = 0; },
		 SHMKV_ECORRUPT, "filter section of 0 bytes"},
		{"filter of 12 bytes", [](shmkv_image_header *h) { h->sections[3].size = 12; },
		 SHMKV_ECORRUPT, "filter section of 12 bytes"},
		{"filter kind", [](shmkv_image_header *h) { h->sections[3].kind = 5; },
		 SHMKV_ECORRUPT, "has kind 5"},
		{"seq 0", [](shmkv_image_header *h) { h->reserved[SHMKV_DELTA_SEQ] = 0; },
		 SHMKV_ECORRUPT, "seq) is 0"},
		{"base size", [](shmkv_image_header *h) { h->reserved[SHMKV_DELTA_BASE_SIZE] = 5000; },
		 SHMKV_ECORRUPT, "not an image size"},
		{"reserved[4]", [](shmkv_image_header *h) { h->reserved[4] = 1; }, SHMKV_ECORRUPT,
		 "reserved header fields"},
		{"plain hash", [](shmkv_image_header *h) { h->layout_hash = SHMKV_LAYOUT_HASH; },
		 SHMKV_ECORRUPT, "unknown header flags"},
		{"unknown hash", [](shmkv_image_header *h) { h->layout_hash ^= 1; }, SHMKV_ELAYOUT,
		 "(a delta)"},
	};
	for (const Case &c : cases) {
		Mem m(forged(d, o, c.edit));
		EXPECT_EQ(m.err, c.err) << c.what << ": " << m.why;
		EXPECT_NE(std::string(m.why).find(c.msg), std::string::npos) << c.what << ": " << m.why;
	}
	// a plain image naming a base, or with the DELTA flag
	auto plain = [](void (*edit)(shmkv_image_header *)) {
		return forged({str("a", "b")}, testimg::Options{}, edit);
	};
	Mem p1(plain([](shmkv_image_header *h) { h->reserved[0] = 1; }));
	EXPECT_EQ(p1.err, SHMKV_ECORRUPT) << p1.why;
	Mem p2(plain([](shmkv_image_header *h) { h->flags |= SHMKV_HFLAG_DELTA; }));
	EXPECT_EQ(p2.err, SHMKV_ECORRUPT) << p2.why;
}

TEST(Delta, RecordRules)
{
	Mem base(testimg::compose(base_recs(), testimg::Options{.bucket_count = 8}).bytes);
	const testimg::Options o = delta_of(base, 1); // one bucket: records at known places
	// a tombstone in a plain image: damage to the lookup, iteration and verify
	{
		testimg::Image im = testimg::compose({str("k", "v")}, testimg::Options{.bucket_count = 1});
		im.bytes[im.rec_off[0]] = (char)SHMKV_REC_TOMB;
		im.bytes[im.rec_off[0] + 2] = 0; // value_len 0, as a tombstone's
		testimg::reseal(im.bytes);
		Mem m(im.bytes);
		ASSERT_EQ(m.err, 0) << m.why;
		EXPECT_EQ(get(&m.db, "k").err, SHMKV_ECORRUPT);
		EXPECT_EQ(get_diag(&m.db, "k").err, SHMKV_ECORRUPT);
		EXPECT_NE(m.verify().find("malformed"), std::string::npos) << m.verify();
	}
	struct Case {
		const char *what;
		std::vector<Rec> recs;
		void (*edit)(testimg::Image &);
		const char *verify; // verify's message, in part
	} cases[] = {
		{"tombstone with a value length",
		 {tomb("gone")},
		 [](testimg::Image &im) { im.bytes[im.rec_off[0] + 2] = 1; },
		 "malformed"},
		{"tombstone with EXPIRES",
		 {tomb("gone")},
		 [](testimg::Image &im) { im.bytes[im.rec_off[0]] = (char)(SHMKV_REC_TOMB | SHMKV_REC_EXPIRES); },
		 "malformed"},
		{"tombstone with type bits",
		 {tomb("gone")},
		 [](testimg::Image &im) { im.bytes[im.rec_off[0]] = (char)(SHMKV_REC_TOMB | 2); },
		 "malformed"},
		{"OUT tombstone's entry with a type",
		 {tomb(long_key(1), true)},
		 [](testimg::Image &im) { im.bytes[im.entries_off] = SHMKV_TYPE_BYTES; },
		 ""}, // the entry then fails its own shape
		{"OUT upsert's entry is a tombstone's",
		 {str(long_key(2), "", 0, true)},
		 [](testimg::Image &im) { im.bytes[im.entries_off] = SHMKV_TYPE_TOMBSTONE; },
		 "is a tombstone's"},
		{"OUT tombstone's entry with a value length",
		 {tomb(long_key(3), true)},
		 [](testimg::Image &im) { im.bytes[im.entries_off + 4] = 1; },
		 "tombstone's entry"},
		{"a key missing from the filter",
		 {str("key1", "new")},
		 [](testimg::Image &im) {
			 const shmkv_image_header *h = (const shmkv_image_header *)(const void *)im.bytes.data();
			 memset(&im.bytes[h->sections[3].offset], 0, h->sections[3].size);
		 },
		 "filter"},
	};
	for (const Case &c : cases) {
		testimg::Image im = testimg::compose(c.recs, o);
		{
			Mem good(im.bytes);
			ASSERT_EQ(good.err, 0) << c.what;
			ASSERT_EQ(good.verify(), "") << c.what;
		}
		c.edit(im);
		testimg::reseal(im.bytes);
		Mem m(im.bytes);
		ASSERT_EQ(m.err, 0) << c.what << ": " << m.why;
		const std::string v = m.verify();
		EXPECT_NE(v, "") << c.what;
		EXPECT_NE(v.find(c.verify), std::string::npos) << c.what << ": " << v;
		// read through, the damaged key is damage (or, filtered out, the
		// base's): never a crash, never another key's answer
		ASSERT_EQ(shmkv_delta_set(&base.db, &m.db, nullptr, 0), 0) << c.what;
		const std::string &k = c.recs[0].key;
		const Answer hot = get(&base.db, k), cold = get_diag(&base.db, k);
		EXPECT_EQ(hot, cold) << c.what;
		if (std::string(c.what) != "a key missing from the filter")
			EXPECT_EQ(hot.err, SHMKV_ECORRUPT) << c.what << ": " << hot;
		else
			EXPECT_EQ(hot, (Answer{0, SHMKV_TYPE_STRING, "base1"})) << "the base answers";
		EXPECT_EQ(get(&base.db, "key9"), (Answer{0, SHMKV_TYPE_STRING, "base9"})) << c.what;
		shmkv_delta_set(&base.db, nullptr, nullptr, 0);
	}
}

TEST(Delta, RandomizedAgainstModel)
{
	std::mt19937_64 rng(20261205);
	for (int round = 0; round < 60; round++) {
		SCOPED_TRACE("round " + std::to_string(round));
		std::uniform_int_distribution<int> nkeys(0, 120), pick(0, 199), coin(0, 9);
		const uint32_t bits = round % 5 == 0 ? 7 : 64;
		auto make = [&](int i, const char *tag) {
			Rec r;
			r.key = (i % 13 == 0 ? long_key(i) : "k" + std::to_string(i));
			r.value = std::string(tag) + std::to_string(rng() % 1000);
			if (coin(rng) == 0) {
				r.type = SHMKV_TYPE_I64;
				r.value = testimg::i64((int64_t)rng());
			}
			if (coin(rng) == 1)
				r.expires = kNow - 50 + (uint32_t)(rng() % 100);
			r.out = r.key.size() > 100 || coin(rng) == 2;
			return r;
		};
		std::vector<Rec> b;
		std::map<int, bool> used;
		for (int n = nkeys(rng), j = 0; j < n; j++) {
			int i = pick(rng);
			if (used.emplace(i, true).second)
				b.push_back(make(i, "b"));
		}
		testimg::Options bo;
		bo.bucket_count = b.size() / 6 + 4;
		bo.hash_bits = bits;
		Mem base(testimg::compose(b, bo).bytes);
		ASSERT_EQ(base.err, 0) << base.why;
		std::vector<Rec> d;
		std::map<int, bool> dused;
		for (int n = nkeys(rng) / 2, j = 0; j < n; j++) {
			int i = pick(rng);
			if (!dused.emplace(i, true).second)
				continue;
			if (coin(rng) < 4) {
				Rec t = tomb(i % 13 == 0 ? long_key(i) : "k" + std::to_string(i));
				t.out = t.key.size() > 100;
				d.push_back(t);
			} else
				d.push_back(make(i, "d"));
		}
		testimg::Options o = delta_of(base, d.size() / 6 + 2);
		o.kf_words = 1 + rng() % 4; // few words: many false "maybe"s
		Mem delta(testimg::compose(d, o).bytes);
		ASSERT_EQ(delta.err, 0) << delta.why;
		ASSERT_EQ(delta.verify(), "");
		ASSERT_EQ(shmkv_delta_set(&base.db, &delta.db, nullptr, 0), 0);
		Model model(b);
		model.apply(d);
		std::vector<std::string> keys;
		for (int i = 0; i < 200; i++)
			keys.push_back(i % 13 == 0 ? long_key(i) : "k" + std::to_string(i));
		expect_through(&base.db, model, keys, kNow);
	}
}
