// reader_test: the reader on images composed by tests/image_util.h from
// lib/FORMAT.md alone: open, every getter, batch, iteration (the live
// entries, and every record with shmkv_iter_init_all), verify, expiry at its
// boundaries with a pinned clock, the header checks (a format 1 image
// refused with the upgrade command named), strings that are not UTF-8,
// damaged buckets and records (each invariant violated gives its error,
// never a crash; one damaged key in a batch leaves the others' answers),
// the hot path against the checked one under damage, and a reader of the
// format 1 era refusing format 2 with SHMKV_EVERSION.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"
#include "image_util.h"

using namespace shmkv_test;
using testimg::Rec;

#ifndef SHMKV_SOURCE_ROOT
#define SHMKV_SOURCE_ROOT ""
#endif

namespace {

// A handle bound to a composed image in memory.
struct Mem {
	std::string img;
	shmkv db{};
	int err = 0;
	char why[512] = "";
	explicit Mem(std::string bytes, unsigned flags = 0) : img(std::move(bytes))
	{
		err = shmkv_bind_mem(&db, img.data(), img.size(), flags, why, sizeof why);
	}
	std::string verify()
	{
		char w[512] = "";
		int e = shmkv_verify(&db, w, sizeof w);
		return e ? std::string(shmkv_strerror(e)) + ": " + w : "";
	}
};

// Every key of recs on m by the hot get, the typed string get and the batch
// against the checked path (shmkv_get_diag): the same code, and for a hit the
// same value (the batch's and the typed get's pointers too; with exact, the
// bytes of the record's value). Counts the hits and the ENOTFOUND answers.
void expect_paths_agree(Mem &m, const std::vector<Rec> &recs, bool exact, int *hits, int *lost)
{
	std::vector<shmkv_key> keys;
	for (const Rec &r : recs)
		keys.push_back({r.key.data(), r.key.size()});
	std::vector<shmkv_value> bv(keys.size());
	std::vector<int> be(keys.size(), 7);
	shmkv_get_batch(&m.db, keys.data(), keys.size(), bv.data(), be.data());
	for (size_t i = 0; i < recs.size(); i++) {
		const Rec &r = recs[i];
		SCOPED_TRACE("key " + r.key.substr(0, 20));
		shmkv_value v1, v2;
		char why[256] = "";
		int e1 = shmkv_get(&m.db, r.key.data(), r.key.size(), &v1);
		int e2 = shmkv_get_diag(&m.db, r.key.data(), r.key.size(), &v2, why, sizeof why);
		ASSERT_EQ(e1, e2) << why;
		ASSERT_EQ(be[i], e1);
		const char *s = nullptr;
		size_t n = 0;
		int e3 = shmkv_get_str(&m.db, r.key.data(), r.key.size(), &s, &n);
		ASSERT_EQ(e3, e1 ? e1 : v1.type == SHMKV_TYPE_STRING ? 0 : SHMKV_ETYPE);
		if (e1) {
			*lost += e1 == SHMKV_ENOTFOUND;
			continue;
		}
		++*hits;
		ASSERT_EQ(v1.type, v2.type);
		ASSERT_EQ(v1.data, v2.data);
		ASSERT_EQ(v1.size, v2.size);
		ASSERT_EQ(v1.count, v2.count);
		ASSERT_EQ(bv[i].data, v1.data);
		ASSERT_EQ(bv[i].type, v1.type);
		if (exact) {
			ASSERT_EQ(std::string((const char *)v1.data, v1.size), r.value);
		}
		if (!e3) {
			ASSERT_EQ((const void *)s, v1.data);
		}
	}
}

// A mix: every type inline, OUT records (a long key, a big value), and keys
// enough for 4 buckets that some are displaced.
std::vector<Rec> mixed()
{
	std::vector<Rec> r;
	r.push_back({"s", SHMKV_TYPE_STRING, "hello", 0, false});
	r.push_back({"b", SHMKV_TYPE_BYTES, std::string("a\0b", 3), 0, false});
	r.push_back({"i", SHMKV_TYPE_I64, testimg::i64(-42), 0, false});
	r.push_back({"t", SHMKV_TYPE_BOOL, std::string(1, '\1'), 0, false});
	r.push_back({"f", SHMKV_TYPE_F64, testimg::f64(2.5), 0, false});
	float fl[3] = {1, 2, 3};
	r.push_back({"fl", SHMKV_TYPE_F32LIST, std::string((const char *)fl, 12), 0, false});
	double dl[2] = {1.5, -1};
	r.push_back({"dl", SHMKV_TYPE_F64LIST, std::string((const char *)dl, 16), 0, false});
	int64_t il[2] = {7, 8};
	r.push_back({"il", SHMKV_TYPE_I64LIST, std::string((const char *)il, 16), 0, false});
	r.push_back({"sl", SHMKV_TYPE_STRLIST, testimg::strlist({"x", "yz"}), 0, false});
	r.push_back({std::string(300, 'k'), SHMKV_TYPE_STRING, "long key", 0, true});
	r.push_back({"big", SHMKV_TYPE_BYTES, std::string(1000, 'v'), 0, true});
	r.push_back({"outi", SHMKV_TYPE_I64, testimg::i64(99), 0, true});
	for (int i = 0; i < 30; i++)
		r.push_back({"key_" + std::to_string(i), SHMKV_TYPE_STRING, "val_" + std::to_string(i),
			     0, false});
	return r;
}

TEST(Reader, OpensGetsEveryTypeAndVerifies)
{
	testimg::Options o;
	o.bucket_count = 7; // 42 records, about 80% full: some displaced
	auto im = testimg::compose(mixed(), o);
	Mem m(im.bytes);
	ASSERT_EQ(m.err, 0) << m.why;
	EXPECT_EQ(m.verify(), "");
	EXPECT_GT(shmkv_header(&m.db)->max_probe, 0u) << "the test wants displaced keys";

	const char *s = nullptr;
	size_t n = 0;
	ASSERT_EQ(shmkv_get_str(&m.db, "s", 1, &s, &n), 0);
	EXPECT_EQ(std::string(s, n), "hello");
	EXPECT_EQ(s[n], 0);
	const void *p = nullptr;
	ASSERT_EQ(shmkv_get_bytes(&m.db, "b", 1, &p, &n), 0);
	EXPECT_EQ(sv(p, n), std::string("a\0b", 3));
	int64_t x = 0;
	ASSERT_EQ(shmkv_get_i64(&m.db, "i", 1, &x), 0);
	EXPECT_EQ(x, -42);
	bool t = false;
	ASSERT_EQ(shmkv_get_bool(&m.db, "t", 1, &t), 0);
	EXPECT_TRUE(t);
	double d = 0;
	ASSERT_EQ(shmkv_get_f64(&m.db, "f", 1, &d), 0);
	EXPECT_EQ(d, 2.5);
	const float *fl = nullptr;
	ASSERT_EQ(shmkv_get_f32list(&m.db, "fl", 2, &fl, &n), 0);
	ASSERT_EQ(n, 3u);
	EXPECT_EQ(fl[2], 3.0f);
	EXPECT_EQ((uintptr_t)fl % 8, 0u) << "inline lists are 8-aligned (FORMAT.md §6)";
	const double *dl = nullptr;
	ASSERT_EQ(shmkv_get_f64list(&m.db, "dl", 2, &dl, &n), 0);
	EXPECT_EQ(n, 2u);
	EXPECT_EQ((uintptr_t)dl % 8, 0u);
	const int64_t *il = nullptr;
	ASSERT_EQ(shmkv_get_i64list(&m.db, "il", 2, &il, &n), 0);
	EXPECT_EQ(il[1], 8);
	EXPECT_EQ((uintptr_t)il % 8, 0u);
	shmkv_strlist sl{};
	ASSERT_EQ(shmkv_get_strlist(&m.db, "sl", 2, &sl), 0);
	ASSERT_EQ(shmkv_strlist_count(&sl), 2u);
	EXPECT_STREQ(shmkv_strlist_at(&sl, 1, &n), "yz");
	std::string lk(300, 'k');
	ASSERT_EQ(shmkv_get_str(&m.db, lk.data(), lk.size(), &s, &n), 0);
	EXPECT_EQ(std::string(s, n), "long key");
	ASSERT_EQ(shmkv_get_bytes(&m.db, "big", 3, &p, &n), 0);
	EXPECT_EQ(n, 1000u);
	ASSERT_EQ(shmkv_get_i64(&m.db, "outi", 4, &x), 0);
	EXPECT_EQ(x, 99);
	for (int i = 0; i < 30; i++) {
		std::string k = "key_" + std::to_string(i);
		ASSERT_EQ(shmkv_get_str(&m.db, k.data(), k.size(), &s, &n), 0) << k;
		EXPECT_EQ(std::string(s, n), "val_" + std::to_string(i));
	}
	// misses, wrong types, the diagnostic path
	EXPECT_EQ(shmkv_get_str(&m.db, "nope", 4, &s, &n), SHMKV_ENOTFOUND);
	EXPECT_EQ(shmkv_get_i64(&m.db, "s", 1, &x), SHMKV_ETYPE);
	EXPECT_EQ(shmkv_get_str(&m.db, "outi", 4, &s, &n), SHMKV_ETYPE);
	shmkv_value v;
	char why[256];
	EXPECT_EQ(shmkv_get_diag(&m.db, "nope", 4, &v, why, sizeof why), SHMKV_ENOTFOUND);
	EXPECT_STREQ(why, "key not found");
	ASSERT_EQ(shmkv_get_diag(&m.db, "key_7", 5, &v, why, sizeof why), 0);
	EXPECT_EQ(sv(v.data, v.size), "val_7");
	std::string huge(70000, 'h');
	EXPECT_EQ(shmkv_get(&m.db, huge.data(), huge.size(), &v), SHMKV_EKEYLEN);
	uint64_t off = 0;
	uint32_t exp = 7;
	ASSERT_EQ(shmkv_find_record(&m.db, "s", 1, &off, &exp), 0);
	EXPECT_EQ(off, im.rec_off[0]);
	EXPECT_EQ(exp, 0u);
	EXPECT_EQ(shmkv_find_record(&m.db, "nope", 4, &off, &exp), SHMKV_ENOTFOUND);
}

TEST(Reader, BatchAndIterationAgreeWithGet)
{
	testimg::Options o;
	o.bucket_count = 7;
	auto recs = mixed();
	Mem m(testimg::compose(recs, o).bytes);
	ASSERT_EQ(m.err, 0) << m.why;
	std::vector<std::string> keys;
	for (const Rec &r : recs)
		keys.push_back(r.key);
	keys.push_back("absent");
	keys.push_back(std::string(70000, 'z'));
	std::vector<shmkv_key> ks;
	for (const std::string &k : keys)
		ks.push_back({k.data(), k.size()});
	std::vector<shmkv_value> vals(ks.size());
	std::vector<int> errs(ks.size());
	EXPECT_EQ(shmkv_get_batch(&m.db, ks.data(), ks.size(), vals.data(), errs.data()),
		  recs.size());
	for (size_t i = 0; i < ks.size(); i++) {
		shmkv_value v;
		int e = shmkv_get(&m.db, ks[i].data, ks[i].len, &v);
		ASSERT_EQ(errs[i], e) << i;
		if (!e) {
			EXPECT_EQ(vals[i].data, v.data);
			EXPECT_EQ(vals[i].size, v.size);
			EXPECT_EQ(vals[i].type, v.type);
		}
	}
	std::map<std::string, std::string> seen;
	shmkv_iter it;
	shmkv_iter_init(&m.db, &it);
	const void *k;
	size_t kl;
	shmkv_value v;
	int e;
	while ((e = shmkv_iter_next(&it, &k, &kl, &v)) == 0) {
		EXPECT_EQ(shmkv_iter_expires(&it), 0u);
		seen[sv(k, kl)] = sv(v.data, v.size);
	}
	EXPECT_EQ(e, SHMKV_EEND);
	ASSERT_EQ(seen.size(), recs.size());
	for (const Rec &r : recs)
		EXPECT_EQ(seen[r.key], r.value) << r.key;
}

// now-1 / now / now+1 around an expiry E, inline and OUT, get, typed get,
// batch and the diagnostic path; one record without expiry unaffected.
TEST(Reader, ExpiryBoundaries)
{
	const uint32_t E = 1900000000;
	std::vector<Rec> recs = {{"in", SHMKV_TYPE_STRING, "v", E, false},
				 {"out", SHMKV_TYPE_STRING, std::string(200, 'o'), E, true},
				 {"keep", SHMKV_TYPE_I64, testimg::i64(1), 0, false}};
	Mem m(testimg::compose(recs).bytes);
	ASSERT_EQ(m.err, 0) << m.why;
	EXPECT_EQ(m.verify(), "");
	EXPECT_TRUE(shmkv_header(&m.db)->flags & SHMKV_HFLAG_EXPIRY);
	for (int64_t now : {(int64_t)E - 1, (int64_t)E, (int64_t)E + 1}) {
		shmkv_set_clock(&m.db, now);
		const int want = now < E ? 0 : SHMKV_ENOTFOUND;
		for (const char *k : {"in", "out"}) {
			shmkv_value v;
			const char *s = nullptr;
			size_t n = 0;
			EXPECT_EQ(shmkv_get(&m.db, k, strlen(k), &v), want) << k << " at " << now;
			EXPECT_EQ(shmkv_get_str(&m.db, k, strlen(k), &s, &n), want) << k;
			char why[256] = "";
			EXPECT_EQ(shmkv_get_diag(&m.db, k, strlen(k), &v, why, sizeof why), want);
			if (want) {
				EXPECT_NE(std::string(why).find("expired"), std::string::npos) << why;
			}
			shmkv_key key{k, strlen(k)};
			int err = 7;
			EXPECT_EQ(shmkv_get_batch(&m.db, &key, 1, &v, &err), want ? 0u : 1u);
			EXPECT_EQ(err, want);
			uint32_t exp = 0;
			EXPECT_EQ(shmkv_get_expires(&m.db, k, strlen(k), &exp), 0) << "expired or not";
			EXPECT_EQ(exp, E);
		}
		int64_t x;
		EXPECT_EQ(shmkv_get_i64(&m.db, "keep", 4, &x), 0);
	}
	// the real clock: 2030 is after now... until it is not; E is 2030-03-17
	shmkv_set_clock(&m.db, 0);
	shmkv_value v;
	EXPECT_EQ(shmkv_get(&m.db, "in", 2, &v), time(nullptr) < (time_t)E ? 0 : SHMKV_ENOTFOUND);
}

// Every key an iteration yields, with its expiry, in order; *end the code
// that ended it.
std::vector<std::pair<std::string, uint32_t>> iterate(const shmkv *db, bool all, int *end = nullptr)
{
	std::vector<std::pair<std::string, uint32_t>> out;
	shmkv_iter it;
	if (all)
		shmkv_iter_init_all(db, &it);
	else
		shmkv_iter_init(db, &it);
	const void *k;
	size_t kl;
	shmkv_value v;
	int e;
	for (int n = 0; (e = shmkv_iter_next(&it, &k, &kl, &v)) == 0 && n < 100000; n++)
		out.push_back({sv(k, kl), shmkv_iter_expires(&it)});
	if (end)
		*end = e;
	return out;
}

// Iteration yields the live entries (FORMAT.md §18): an expired record is
// absent from shmkv_iter_init's iteration as from a get, the clock read
// once when it starts (a pinned clock honoured); shmkv_iter_init_all yields
// every record, expired ones too, each with its expiry. Inline and OUT
// records, before, at and after the expiry.
TEST(Reader, IterationYieldsLiveEntriesAndAllRecordsOnRequest)
{
	const uint32_t E = 1900000000;
	std::vector<Rec> recs = {{"in", SHMKV_TYPE_STRING, "v", E, false},
				 {"out", SHMKV_TYPE_STRING, std::string(200, 'o'), E, true},
				 {"later", SHMKV_TYPE_I64, testimg::i64(3), E + 100, false},
				 {"keep", SHMKV_TYPE_I64, testimg::i64(1), 0, false},
				 {"keep_out", SHMKV_TYPE_BYTES, std::string(300, 'k'), 0, true}};
	Mem m(testimg::compose(recs).bytes);
	ASSERT_EQ(m.err, 0) << m.why;
	ASSERT_EQ(m.verify(), "");
	using Got = std::map<std::string, uint32_t>;
	auto as_map = [](const std::vector<std::pair<std::string, uint32_t>> &v) {
		return Got(v.begin(), v.end());
	};
	const Got every = {{"in", E}, {"out", E}, {"later", E + 100}, {"keep", 0}, {"keep_out", 0}};
	struct Case {
		int64_t now;
		Got live;
	} cases[] = {
		{(int64_t)E - 1, every},
		{(int64_t)E, {{"later", E + 100}, {"keep", 0}, {"keep_out", 0}}},
		{(int64_t)E + 1, {{"later", E + 100}, {"keep", 0}, {"keep_out", 0}}},
		{(int64_t)E + 100, {{"keep", 0}, {"keep_out", 0}}},
	};
	for (const Case &c : cases) {
		SCOPED_TRACE("now " + std::to_string(c.now));
		shmkv_set_clock(&m.db, c.now);
		int end = 0;
		auto live = iterate(&m.db, false, &end);
		EXPECT_EQ(end, SHMKV_EEND);
		EXPECT_EQ(as_map(live), c.live);
		EXPECT_EQ(live.size(), c.live.size()) << "a key twice";
		// what iteration yields is what a get finds
		for (const auto &kv : every) {
			shmkv_value v;
			EXPECT_EQ(shmkv_get(&m.db, kv.first.data(), kv.first.size(), &v),
				  c.live.count(kv.first) ? 0 : SHMKV_ENOTFOUND) << kv.first;
		}
		auto all = iterate(&m.db, true, &end);
		EXPECT_EQ(end, SHMKV_EEND);
		EXPECT_EQ(as_map(all), every);
		EXPECT_EQ(all.size(), recs.size());
	}
	// the clock is read when the iteration starts, not at each record
	shmkv_set_clock(&m.db, (int64_t)E - 1);
	shmkv_iter it;
	shmkv_iter_init(&m.db, &it);
	shmkv_set_clock(&m.db, (int64_t)E + 200);
	const void *k;
	size_t kl;
	shmkv_value v;
	size_t n = 0;
	while (shmkv_iter_next(&it, &k, &kl, &v) == 0)
		n++;
	EXPECT_EQ(n, recs.size()) << "the clock of shmkv_iter_init's moment";
	// the real clock: E (2030) is still ahead
	shmkv_set_clock(&m.db, 0);
	if (time(nullptr) < (time_t)E) {
		EXPECT_EQ(iterate(&m.db, false).size(), recs.size());
	}
	// an image without expiries: every record, whatever the pinned clock
	Mem plain(testimg::compose({{"a", SHMKV_TYPE_STRING, "1", 0, false},
				    {"b", SHMKV_TYPE_STRING, std::string(300, 'b'), 0, true}}).bytes);
	ASSERT_EQ(plain.err, 0) << plain.why;
	shmkv_set_clock(&plain.db, INT64_MAX);
	EXPECT_EQ(iterate(&plain.db, false).size(), 2u);
	EXPECT_EQ(iterate(&plain.db, true).size(), 2u);
}

// Without the header's EXPIRY flag, a record's expiry is never applied (the
// clock is not read) and verify refuses the image.
TEST(Reader, ExpiryFlagClearIgnoresRecordsAndVerifyRefuses)
{
	testimg::Options o;
	o.expiry_flag_auto = false;
	Mem m(testimg::compose({{"in", SHMKV_TYPE_STRING, "v", 5, false}}, o).bytes);
	ASSERT_EQ(m.err, 0) << m.why;
	shmkv_set_clock(&m.db, 100);
	shmkv_value v;
	EXPECT_EQ(shmkv_get(&m.db, "in", 2, &v), 0);
	EXPECT_EQ(iterate(&m.db, false).size(), 1u) << "iteration does not apply it either";
	EXPECT_NE(m.verify().find("expiry flag is clear"), std::string::npos) << m.verify();
	o.flags = SHMKV_HFLAG_EXPIRY; // set, but nothing expires
	Mem m2(testimg::compose({{"in", SHMKV_TYPE_STRING, "v", 0, false}}, o).bytes);
	ASSERT_EQ(m2.err, 0) << m2.why;
	EXPECT_NE(m2.verify().find("expiry flag is set"), std::string::npos) << m2.verify();
}

// The header checks of FORMAT.md §12 on a composed image, each field forged
// and the checksums recomputed: the version first (format 1 retired, with
// the command that converts it; any other version named), then the layout
// hash, then the geometry.
TEST(Reader, HeaderChecks)
{
	auto im = testimg::compose({{"a", SHMKV_TYPE_STRING, "b", 0, false}});
	auto forge = [&](auto f) {
		std::string b = im.bytes;
		f(*reinterpret_cast<shmkv_image_header *>(&b[0]));
		testimg::reseal(b);
		Mem m(b);
		return std::make_pair(m.err, std::string(m.why));
	};
	auto r = forge([](shmkv_image_header &) {});
	EXPECT_EQ(r.first, 0) << r.second;
	r = forge([](shmkv_image_header &h) { h.bucket_slots = 8; });
	EXPECT_EQ(r.first, SHMKV_ECORRUPT);
	EXPECT_NE(r.second.find("bucket_slots 8, expected 128"), std::string::npos) << r.second;
	r = forge([](shmkv_image_header &h) { h.flags = 4; });
	EXPECT_EQ(r.first, SHMKV_ECORRUPT);
	// format 1's layout hash on a format 2 header: a layout error
	r = forge([](shmkv_image_header &h) { h.layout_hash = UINT64_C(0x52171befdcf1d7ee); });
	EXPECT_EQ(r.first, SHMKV_ELAYOUT);
	EXPECT_NE(r.second.find("layout hash 52171befdcf1d7ee, this reader expects 5a240d8d9e73bf24"),
		  std::string::npos) << r.second;
	// an image of the preview layout (tags inside the records)
	r = forge([](shmkv_image_header &h) { h.layout_hash = UINT64_C(0xfba82e8976eb9578); });
	EXPECT_EQ(r.first, SHMKV_ELAYOUT);
	EXPECT_NE(r.second.find("layout hash fba82e8976eb9578"), std::string::npos) << r.second;
	// format 1 (with its own hash, or format 2's): retired, the upgrade
	// command named; the version check comes before the layout hash's
	for (uint64_t lh : {UINT64_C(0x52171befdcf1d7ee), (uint64_t)SHMKV_LAYOUT_HASH}) {
		r = forge([&](shmkv_image_header &h) {
			h.format_version = 1;
			h.layout_hash = lh;
		});
		EXPECT_EQ(r.first, SHMKV_EVERSION);
		EXPECT_EQ(r.second, "image format version 1 is retired: convert it with "
				    "'shmctl image upgrade OLD -o NEW'");
	}
	for (uint32_t v : {0u, 3u, 0xffffffffu}) {
		r = forge([&](shmkv_image_header &h) { h.format_version = v; });
		EXPECT_EQ(r.first, SHMKV_EVERSION);
		EXPECT_EQ(r.second, "image format version " + std::to_string(v) +
					    ", this reader reads version 2");
	}
	r = forge([](shmkv_image_header &h) {
		h.entry_count = h.bucket_count * SHMKV_MAX_RECORDS + 1;
	});
	EXPECT_EQ(r.first, SHMKV_ECORRUPT);
	r = forge([](shmkv_image_header &h) { h.sections[0].size -= 64; });
	EXPECT_EQ(r.first, SHMKV_ECORRUPT);
	r = forge([](shmkv_image_header &h) { h.section_count = 2; });
	EXPECT_EQ(r.first, SHMKV_ECORRUPT);
	EXPECT_NE(r.second.find("section_count 2, an image has 3"), std::string::npos) << r.second;
	r = forge([](shmkv_image_header &h) { h.max_probe = (uint32_t)h.bucket_count; });
	EXPECT_EQ(r.first, SHMKV_ECORRUPT);
	// an index at a 64- but not 128-aligned offset
	r = forge([](shmkv_image_header &h) {
		h.sections[0].offset += 64;
		h.sections[1].offset += 64;
	});
	EXPECT_EQ(r.first, SHMKV_ECORRUPT);
	// and through a file: the message names it, the handle is not set
	TempDir tmp;
	std::string b = im.bytes;
	auto *h = reinterpret_cast<shmkv_image_header *>(&b[0]);
	h->format_version = 1;
	testimg::reseal(b);
	ASSERT_TRUE(write_file(tmp.file("old.shmkv"), b));
	shmkv *db = reinterpret_cast<shmkv *>(&b); // any non-NULL: must stay untouched
	char why[512] = "";
	EXPECT_EQ(shmkv_open_file_diag(tmp.file("old.shmkv").c_str(), 0, &db, why, sizeof why),
		  SHMKV_EVERSION);
	EXPECT_NE(std::string(why).find(tmp.file("old.shmkv")), std::string::npos) << why;
	EXPECT_NE(std::string(why).find("image format version 1 is retired: convert it with "
					"'shmctl image upgrade OLD -o NEW'"),
		  std::string::npos) << why;
}

// The good neighbours of a damaged record: every type, inline and OUT.
std::vector<Rec> neighbours()
{
	return {{"g_str", SHMKV_TYPE_STRING, "Gr\xc3\xbc\xc3\x9f" "e \xf0\x9f\x8c\x8d", 0, false},
		{"g_nul", SHMKV_TYPE_STRING, std::string("a\0b", 3), 0, false}, // U+0000 is UTF-8
		{"g_max", SHMKV_TYPE_STRING, "\xf4\x8f\xbf\xbf\xef\xbf\xbf", 0, false},
		{"g_i64", SHMKV_TYPE_I64, testimg::i64(7), 0, false},
		{"g_out", SHMKV_TYPE_STRING, std::string(300, 'o'), 0, true},
		{"g_list", SHMKV_TYPE_STRLIST, testimg::strlist({"x", "\xc3\xa9"}), 0, false}};
}

// Every neighbour's get, typed get and place in the batch as on the intact
// image, and shmkv_verify refusing the image with why.
void expect_neighbours_intact(Mem &m, const char *verify_says)
{
	for (const Rec &r : neighbours()) {
		SCOPED_TRACE(r.key);
		shmkv_value v;
		ASSERT_EQ(shmkv_get(&m.db, r.key.data(), r.key.size(), &v), 0);
		EXPECT_EQ(sv(v.data, v.size), r.value);
		EXPECT_EQ(v.type, r.type);
	}
	const std::string vm = m.verify();
	EXPECT_NE(vm.find(verify_says), std::string::npos) << vm;
}

// A string value that is not strict UTF-8 is a damaged value (FORMAT.md §8),
// like a string without its NUL: SHMKV_ECORRUPT from shmkv_get, the typed
// string getter, shmkv_get_diag (saying so), the batch (that key only) and
// iteration (live and all records); never the bytes. Inline and OUT
// records; each kind of invalid sequence at every position a word-at-a-time
// check treats differently. The same bytes as a bytes value are fine.
TEST(Reader, StringNotUtf8IsCorrupt)
{
	const std::string bad[] = {
		"\xff",             // never in UTF-8
		"\x80",             // a lone continuation byte
		"\xc0\x80",         // overlong U+0000
		"\xc1\xbf",         // overlong U+007F
		"\xe0\x80\xaf",     // overlong '/'
		"\xf0\x82\x82\xac", // overlong U+20AC
		"\xed\xa0\x80",     // a surrogate (U+D800)
		"\xed\xbf\xbf",     // a surrogate (U+DFFF)
		"\xf4\x90\x80\x80", // U+110000, above U+10FFFF
		"\xf8\x88\x80\x80\x80", // a 5-byte form
		"\xe2\x82",         // truncated
		"\xc3",             // truncated at the end
	};
	int images = 0;
	for (const std::string &b : bad)
		for (size_t pre : {0, 1, 3, 4, 7, 8, 9, 15, 16, 31})
			for (size_t post : {0, 1, 5}) {
				const std::string val = std::string(pre, 'a') + b + std::string(post, 'z');
				for (bool out : {false, true}) {
					SCOPED_TRACE(std::string(out ? "OUT" : "inline") + " value of " +
						     std::to_string(val.size()) + " bytes, invalid at " +
						     std::to_string(pre));
					std::vector<Rec> recs = neighbours();
					recs.push_back({"bad", SHMKV_TYPE_STRING, val, 0, out});
					recs.push_back({"raw", SHMKV_TYPE_BYTES, val, 0, out});
					Mem m(testimg::compose(recs).bytes);
					ASSERT_EQ(m.err, 0) << m.why;
					images++;
					shmkv_value v{};
					v.type = 99;
					EXPECT_EQ(shmkv_get(&m.db, "bad", 3, &v), SHMKV_ECORRUPT);
					EXPECT_EQ(v.type, 99u) << "the output is untouched on error";
					const char *s = nullptr;
					size_t n = 0;
					EXPECT_EQ(shmkv_get_str(&m.db, "bad", 3, &s, &n), SHMKV_ECORRUPT);
					EXPECT_EQ(s, nullptr);
					char why[256] = "";
					EXPECT_EQ(shmkv_get_diag(&m.db, "bad", 3, &v, why, sizeof why),
						  SHMKV_ECORRUPT);
					EXPECT_NE(std::string(why).find("not valid UTF-8"), std::string::npos)
						<< why;
					const void *p = nullptr;
					ASSERT_EQ(shmkv_get_bytes(&m.db, "raw", 3, &p, &n), 0);
					EXPECT_EQ(sv(p, n), val);
					// the batch: that key corrupt, the others their answers
					std::vector<std::string> ks = {"g_str", "bad", "raw", "absent", "g_out"};
					std::vector<shmkv_key> keys;
					for (const std::string &k : ks)
						keys.push_back({k.data(), k.size()});
					shmkv_value bv[5];
					int be[5];
					EXPECT_EQ(shmkv_get_batch(&m.db, keys.data(), 5, bv, be), 3u);
					EXPECT_EQ(be[0], 0);
					EXPECT_EQ(be[1], SHMKV_ECORRUPT);
					EXPECT_EQ(be[2], 0);
					EXPECT_EQ(be[3], SHMKV_ENOTFOUND);
					EXPECT_EQ(be[4], 0);
					EXPECT_EQ(sv(bv[2].data, bv[2].size), val);
					EXPECT_EQ(sv(bv[4].data, bv[4].size), std::string(300, 'o'));
					// iteration reaches the record and says so; records
					// before it come out whole
					for (bool all : {false, true}) {
						int end = 0;
						auto got = iterate(&m.db, all, &end);
						EXPECT_EQ(end, SHMKV_ECORRUPT) << (all ? "all records" : "live");
						EXPECT_LT(got.size(), recs.size());
						for (const auto &kv : got)
							EXPECT_NE(kv.first, "bad");
					}
					expect_neighbours_intact(m, "not valid UTF-8");
					if (HasFatalFailure())
						return;
				}
			}
	EXPECT_EQ(images, 12 * 10 * 3 * 2);
}

// A string of a string list that is not UTF-8: the list's get is O(1) and
// succeeds, shmkv_strlist_at refuses that string (NULL, length 0) and hands
// out the others; iteration and verify, which check every string, say
// SHMKV_ECORRUPT.
TEST(Reader, StrlistStringNotUtf8)
{
	for (bool out : {false, true}) {
		SCOPED_TRACE(out ? "OUT" : "inline");
		std::vector<Rec> recs = neighbours();
		recs.push_back({"list", SHMKV_TYPE_STRLIST,
				testimg::strlist({"fine", "bad\xed\xa0\x80", "also fine"}), 0, out});
		Mem m(testimg::compose(recs).bytes);
		ASSERT_EQ(m.err, 0) << m.why;
		shmkv_strlist l{};
		ASSERT_EQ(shmkv_get_strlist(&m.db, "list", 4, &l), 0);
		ASSERT_EQ(shmkv_strlist_count(&l), 3u);
		size_t n = 99;
		EXPECT_STREQ(shmkv_strlist_at(&l, 0, &n), "fine");
		EXPECT_EQ(n, 4u);
		EXPECT_EQ(shmkv_strlist_at(&l, 1, &n), nullptr);
		EXPECT_EQ(n, 0u);
		EXPECT_STREQ(shmkv_strlist_at(&l, 2, &n), "also fine");
		for (bool all : {false, true}) {
			int end = 0;
			iterate(&m.db, all, &end);
			EXPECT_EQ(end, SHMKV_ECORRUPT);
		}
		expect_neighbours_intact(m, "strlist string 1 is not valid UTF-8");
	}
}

// A batch answers every key as its single get would: one key whose record
// is damaged (its string's NUL gone, its OUT entry's type forged, its
// record's kind forged) is SHMKV_ECORRUPT in errs, and every other key,
// before and after it in the request, in the same group of 16 or another,
// gets its value; the count returned is of the others found.
TEST(Reader, BatchWithOneDamagedKey)
{
	std::vector<Rec> recs = neighbours();
	for (int i = 0; i < 40; i++)
		recs.push_back({"key_" + std::to_string(i), SHMKV_TYPE_STRING, "val_" + std::to_string(i),
				0, i % 7 == 3});
	recs.push_back({"victim", SHMKV_TYPE_STRING, "hello", 0, false});
	recs.push_back({"victim_out", SHMKV_TYPE_STRING, std::string(100, 'v'), 0, true});
	testimg::Options o;
	o.bucket_count = 8;
	auto im = testimg::compose(recs, o);
	const size_t vi = recs.size() - 2, vo = recs.size() - 1;
	const uint64_t r_in = im.rec_off[vi], r_out = im.rec_off[vo];
	uint64_t unit = 0;
	memcpy(&unit, &im.bytes[r_out + 1], 5);
	const uint64_t e_out = unit << 3; // the OUT record's entry
	struct Case {
		const char *what;
		std::function<void(std::string &)> f;
		size_t victim;
	} cases[] = {
		{"inline string without its NUL", [&](std::string &b) { b[r_in + 3 + 6 + 5] = 'x'; }, vi},
		{"inline record of an unknown kind", [&](std::string &b) { b[r_in] |= 0x20; }, vi},
		{"inline string not UTF-8", [&](std::string &b) { b[r_in + 3 + 6] = (char)0xff; }, vi},
		{"OUT entry of type 12", [&](std::string &b) { b[e_out] = 12; }, vo},
		{"OUT entry's value past ENTRIES",
		 [&](std::string &b) {
			 uint32_t big = 0x7fffffff;
			 memcpy(&b[e_out + 4], &big, 4);
		 },
		 vo},
	};
	{
		Mem clean(im.bytes);
		ASSERT_EQ(clean.err, 0) << clean.why;
		ASSERT_EQ(clean.verify(), "");
		shmkv_value v;
		ASSERT_EQ(shmkv_get(&clean.db, "victim", 6, &v), 0);
		ASSERT_EQ(sv(v.data, v.size), "hello") << "the test's offsets";
	}
	for (const Case &c : cases) {
		SCOPED_TRACE(c.what);
		std::string b = im.bytes;
		c.f(b);
		testimg::reseal(b);
		Mem m(b);
		ASSERT_EQ(m.err, 0) << m.why;
		shmkv_value v;
		ASSERT_EQ(shmkv_get(&m.db, recs[c.victim].key.data(), recs[c.victim].key.size(), &v),
			  SHMKV_ECORRUPT);
		// every key once, the victim at each position of the request,
		// absent keys between
		for (size_t at : {(size_t)0, (size_t)7, (size_t)15, (size_t)16, recs.size() - 1}) {
			std::vector<const Rec *> order;
			for (size_t i = 0; i < recs.size(); i++)
				if (i != c.victim)
					order.push_back(&recs[i]);
			order.insert(order.begin() + (long)std::min(at, order.size()), &recs[c.victim]);
			std::vector<shmkv_key> keys;
			const std::string absent = "absent";
			for (size_t i = 0; i < order.size(); i++) {
				keys.push_back({order[i]->key.data(), order[i]->key.size()});
				if (i % 5 == 4)
					keys.push_back({absent.data(), absent.size()});
			}
			std::vector<shmkv_value> bv(keys.size());
			std::vector<int> be(keys.size(), 7);
			const size_t found = shmkv_get_batch(&m.db, keys.data(), keys.size(), bv.data(),
							     be.data());
			EXPECT_EQ(found, recs.size() - 1) << "victim at " << at;
			for (size_t i = 0; i < keys.size(); i++) {
				const std::string k = sv(keys[i].data, keys[i].len);
				SCOPED_TRACE("key " + k + ", victim at " + std::to_string(at));
				if (k == absent) {
					EXPECT_EQ(be[i], SHMKV_ENOTFOUND);
				} else if (k == recs[c.victim].key) {
					EXPECT_EQ(be[i], SHMKV_ECORRUPT);
				} else {
					const Rec *r = nullptr;
					for (const Rec &x : recs)
						if (x.key == k)
							r = &x;
					ASSERT_NE(r, nullptr);
					ASSERT_EQ(be[i], 0);
					EXPECT_EQ(sv(bv[i].data, bv[i].size), r->value);
					EXPECT_EQ(bv[i].type, r->type);
				}
			}
		}
	}
}

// Damage to one bucket or record, checksums recomputed: the lookup of a key
// on the damaged path says SHMKV_ECORRUPT (or misses), verify names the
// invariant, nothing crashes.
struct Damage {
	const char *what;
	std::function<void(std::string &, const testimg::Image &)> f;
	const char *verify_says;
	bool lookup_corrupt; // the get of key 0 ("s" at +8 of its bucket) says ECORRUPT
};

TEST(Reader, EachInvariantViolatedGivesItsError)
{
	std::vector<Rec> recs = {{"s", SHMKV_TYPE_STRING, "hello", 0, false},
				 {"o", SHMKV_TYPE_STRING, std::string(100, 'x'), 0, true}};
	for (int i = 0; i < 40; i++) // displaced keys
		recs.push_back({"key_" + std::to_string(i), SHMKV_TYPE_STRING, "val", 0, false});
	testimg::Options o;
	o.bucket_count = 7;
	auto im = testimg::compose(recs, o);
	ASSERT_EQ(Mem(im.bytes).verify(), "");
	const uint64_t r0 = im.rec_off[0], b0 = r0 - (r0 - im.index_off) % 128, r1 = im.rec_off[1];
	// a displaced key and its home
	size_t dk = 0;
	for (size_t i = 0; i < recs.size(); i++)
		if (im.bucket[i] != im.home[i])
			dk = i;
	ASSERT_NE(dk, 0u);
	const uint64_t home = im.index_off + im.home[dk] * 128;
	const uint64_t t0 = im.dir_off[0]; // "s"'s directory entry (tag bits 7..15, off 0..6)
	std::vector<Damage> cases = {
		{"kind bit 4", [&](std::string &b, auto &) { b[r0] |= 0x10; }, "malformed", true},
		{"kind bit 5", [&](std::string &b, auto &) { b[r0] |= 0x20; }, "malformed", true},
		{"type 0 inline", [&](std::string &b, auto &) { b[r0] &= ~0x0f; }, "malformed", true},
		{"type 12", [&](std::string &b, auto &) { b[r0] = 12; }, "malformed", true},
		{"OUT with type bits", [&](std::string &b, auto &) { b[r1] |= 2; }, "malformed", false},
		{"value past the bucket", [&](std::string &b, auto &) { b[r0 + 2] = (char)250; },
		 "malformed", true},
		{"count past the records", [&](std::string &b, auto &) { b[b0] = 16; }, "", false},
		{"count 17", [&](std::string &b, auto &) { b[b0] = 17; }, "at most 16", true},
		{"count 255", [&](std::string &b, auto &) { b[b0] = (char)255; }, "at most 16", true},
		{"OUT entry out of bounds",
		 [&](std::string &b, auto &) { b[r1 + 1] = b[r1 + 2] = b[r1 + 3] = b[r1 + 4] = (char)0xff; },
		 "outside the entries section", false},
		{"OUT entry before ENTRIES", [&](std::string &b, auto &) { memset(&b[r1 + 1], 0, 5); b[r1 + 1] = 1; },
		 "outside the entries section", false},
		{"string without NUL", [&](std::string &b, auto &) { b[r0 + 3 + 1 + 5] = 'x'; },
		 "not NUL-terminated", true},
		{"tag mismatch", [&](std::string &b, auto &) { b[t0 + 1] ^= 1; }, "key hashes to", false},
		{"tag bit 0 flipped", [&](std::string &b, auto &) { b[t0] ^= (char)0x80; }, "key hashes to",
		 false},
		{"tag bits 0",
		 [&](std::string &b, auto &) {
			 b[t0] &= 0x7f;
			 b[t0 + 1] = 0;
		 },
		 "key hashes to", false},
		{"offset inside the directory",
		 [&](std::string &b, auto &) { b[t0] = (char)((b[t0] & 0x80) | 9); },
		 "inside the directory", true},
		{"D above max_probe", [&](std::string &b, auto &) { b[home + 1] = (char)200; },
		 "exceeds max_probe", false},
		{"filter without D",
		 [&](std::string &b, auto &) {
			 for (uint64_t x = 0; x < 7; x++)
				 if (!b[im.index_off + x * 128 + 1])
					 b[im.index_off + x * 128 + 3] = 1;
		 },
		 "filter bits without displaced keys", false},
		{"displaced key not announced", [&](std::string &b, auto &) { memset(&b[home + 2], 0, 6); },
		 "does not announce", false},
		{"non-zero tail", [&](std::string &b, auto &) { b[b0 + 127] = 1; }, "after bucket", false},
		{"expiry 0 with EXPIRES",
		 [&](std::string &b, auto &) {
			 // re-encode record "s" cannot grow in place: flag the OUT record
			 // instead (its 4 extra bytes are the zero after it, if free)
			 b[r1] |= SHMKV_REC_EXPIRES;
			 auto *h = reinterpret_cast<shmkv_image_header *>(&b[0]);
			 h->flags |= SHMKV_HFLAG_EXPIRY;
		 },
		 "", false},
	};
	for (const Damage &c : cases) {
		SCOPED_TRACE(c.what);
		std::string b = im.bytes;
		c.f(b, im);
		testimg::reseal(b);
		Mem m(b);
		ASSERT_EQ(m.err, 0) << m.why;
		std::string vm = m.verify();
		EXPECT_NE(vm, "");
		if (*c.verify_says) {
			EXPECT_NE(vm.find(c.verify_says), std::string::npos) << vm;
		}
		shmkv_value v;
		int e = shmkv_get(&m.db, "s", 1, &v);
		if (c.lookup_corrupt) {
			EXPECT_EQ(e, SHMKV_ECORRUPT);
		}
		char why[256] = "";
		EXPECT_EQ(shmkv_get_diag(&m.db, "s", 1, &v, why, sizeof why), e) << why;
		// every key: the same verdict on every path, no crash
		for (const Rec &r : recs) {
			int e1 = shmkv_get(&m.db, r.key.data(), r.key.size(), &v);
			int e2 = shmkv_get_diag(&m.db, r.key.data(), r.key.size(), &v, why, sizeof why);
			EXPECT_EQ(e1, e2) << r.key << ": " << why;
			shmkv_key k{r.key.data(), r.key.size()};
			int e3 = 7;
			shmkv_get_batch(&m.db, &k, 1, &v, &e3);
			EXPECT_EQ(e1, e3) << r.key;
		}
		shmkv_iter it;
		shmkv_iter_init(&m.db, &it);
		const void *k;
		size_t kl;
		for (int n = 0; n < 1000 && shmkv_iter_next(&it, &k, &kl, &v) == 0; n++) {
		}
	}
}

// The bucket directory's rules (FORMAT.md §6), each broken in a bucket
// of four records whose bytes the test knows: verify names the rule, the
// lookup of the record concerned says ECORRUPT where it reads the damage
// (or, where the damage is only what verify checks, still finds it), every
// path agrees, nothing reads past the bucket (test-san).
TEST(Reader, DirectoryRulesViolated)
{
	// placement order s, t, u, i: count 4, dir at +8..+15 (record j's off in
	// the low 7 bits of byte +8+2j), records from +16: s [16,26), t [26,32),
	// u [32,38), i [38,56)
	std::vector<Rec> recs = {{"s", SHMKV_TYPE_STRING, "hello", 0, false},
				 {"t", SHMKV_TYPE_STRING, "x", 0, false},
				 {"u", SHMKV_TYPE_STRING, "y", 0, false},
				 {"i", SHMKV_TYPE_I64, testimg::i64(5), 0, false}};
	testimg::Options o;
	o.bucket_count = 1;
	auto im = testimg::compose(recs, o);
	const uint64_t bk = im.index_off;
	ASSERT_EQ(Mem(im.bytes).verify(), "");
	ASSERT_EQ(im.bytes[bk], 4);
	for (unsigned j = 0; j < 4; j++)
		ASSERT_EQ(im.slot[j], j);
	ASSERT_EQ(im.rec_off[0], bk + 16);
	ASSERT_EQ(im.rec_off[1], bk + 26);
	ASSERT_EQ(im.rec_off[2], bk + 32);
	ASSERT_EQ(im.rec_off[3], bk + 38);
	for (unsigned j = 0; j < 4; j++)
		ASSERT_EQ(im.dir_off[j], bk + 8 + 2 * j);
	// "i": kind, key_len, value_len, 'i' at +41, padding +42..+47, value +48..+55
	// record j's offset: the low 7 bits of dir[j]'s low byte, its tag bits kept
	auto set_off = [&](std::string &b, unsigned j, unsigned v) {
		char &c = b[bk + 8 + 2 * j];
		c = (char)(((unsigned char)c & 0x80u) | v);
	};
	// "i" moved 8 bytes up (its value stays 8-aligned): a zero gap [38, 46)
	auto shift_i = [&](std::string &b) {
		std::string i = b.substr(bk + 38, 18);
		memset(&b[bk + 38], 0, 18);
		memcpy(&b[bk + 46], i.data(), 18);
		set_off(b, 3, 46);
	};
	struct Case {
		const char *what;
		std::function<void(std::string &)> f;
		const char *verify_says; // "" : verify accepts
		const char *key;         // the key whose lookup is checked
		int get;                 // what its get returns
	};
	std::vector<Case> cases = {
		{"count 17", [&](std::string &b) { b[bk] = 17; }, "17 records, at most 16", "s",
		 SHMKV_ECORRUPT},
		{"off[0] inside the directory", [&](std::string &b) { set_off(b, 0, 15); },
		 "starts inside the directory", "s", SHMKV_ECORRUPT},
		{"off[0] at the head", [&](std::string &b) { set_off(b, 0, 2); },
		 "starts inside the directory", "s", SHMKV_ECORRUPT},
		{"off[0] 0", [&](std::string &b) { set_off(b, 0, 0); }, "starts inside the directory",
		 "s", SHMKV_ECORRUPT},
		{"off[1] overlapping record 0", [&](std::string &b) { set_off(b, 1, 21); },
		 "overlaps the record before", "s", 0},
		{"offs not ascending (directory entries swapped)",
		 [&](std::string &b) {
			 std::swap(b[bk + 8 + 2], b[bk + 8 + 4]);
			 std::swap(b[bk + 8 + 3], b[bk + 8 + 5]);
		 },
		 "offsets not in ascending order", "t", 0},
		{"record past +128",
		 [&](std::string &b) {
			 // "i" moved to +121: its value, 8-aligned, would start at +128
			 memset(&b[bk + 38], 0, 18);
			 b[bk + 121] = SHMKV_TYPE_I64;
			 b[bk + 122] = 1;
			 b[bk + 123] = 8;
			 b[bk + 124] = 'i';
			 set_off(b, 3, 121);
		 },
		 "past the bucket's end", "i", SHMKV_ECORRUPT},
		{"off 127: the head past the bucket",
		 [&](std::string &b) {
			 memset(&b[bk + 38], 0, 18);
			 set_off(b, 3, 127);
		 },
		 "past the bucket's end", "i", SHMKV_ECORRUPT},
		{"non-zero gap byte after the records", [&](std::string &b) { b[bk + 100] = 1; },
		 "after bucket", "s", 0},
		{"non-zero byte between records",
		 [&](std::string &b) {
			 shift_i(b);
			 b[bk + 40] = 7;
		 },
		 "non-zero byte in bucket 0's record area before record 3", "i", 0},
		{"non-zero padding", [&](std::string &b) { b[bk + 42] = 1; }, "record padding", "i", 0},
		{"tag mismatch (dir bit 14)", [&](std::string &b) { b[bk + 9] ^= 0x40; }, "key hashes to",
		 "s", SHMKV_ENOTFOUND},
		{"tag mismatch (dir bit 7, tag bit 0)", [&](std::string &b) { b[bk + 8] ^= (char)0x80; },
		 "key hashes to", "s", SHMKV_ENOTFOUND},
		{"tag bits 0",
		 [&](std::string &b) {
			 b[bk + 8] &= 0x7f;
			 b[bk + 9] = 0;
		 },
		 "key hashes to", "s", SHMKV_ENOTFOUND},
	};
	for (const Case &c : cases) {
		SCOPED_TRACE(c.what);
		std::string b = im.bytes;
		c.f(b);
		testimg::reseal(b);
		Mem m(b);
		ASSERT_EQ(m.err, 0) << m.why;
		std::string vm = m.verify();
		EXPECT_NE(vm, "");
		if (*c.verify_says) {
			EXPECT_NE(vm.find(c.verify_says), std::string::npos) << vm;
		}
		shmkv_value v;
		EXPECT_EQ(shmkv_get(&m.db, c.key, 1, &v), c.get);
		char why[256] = "";
		for (const Rec &r : recs) {
			int e1 = shmkv_get(&m.db, r.key.data(), r.key.size(), &v);
			int e2 = shmkv_get_diag(&m.db, r.key.data(), r.key.size(), &v, why, sizeof why);
			EXPECT_EQ(e1, e2) << r.key << ": " << why;
			shmkv_key k{r.key.data(), r.key.size()};
			int e3 = 7;
			shmkv_get_batch(&m.db, &k, 1, &v, &e3);
			EXPECT_EQ(e1, e3) << r.key;
		}
		shmkv_iter it;
		shmkv_iter_init(&m.db, &it);
		const void *k;
		size_t kl;
		for (int n = 0; n < 100 && shmkv_iter_next(&it, &k, &kl, &v) == 0; n++) {
		}
	}
	// a zero gap between records is allowed (the builder packs, a reader
	// does not rely on it)
	std::string b = im.bytes;
	shift_i(b);
	testimg::reseal(b);
	Mem m(b);
	ASSERT_EQ(m.err, 0) << m.why;
	EXPECT_EQ(m.verify(), "");
	const char *sp = nullptr;
	size_t n = 0;
	int64_t x = 0;
	ASSERT_EQ(shmkv_get_i64(&m.db, "i", 1, &x), 0);
	EXPECT_EQ(x, 5);
	ASSERT_EQ(shmkv_get_str(&m.db, "u", 1, &sp, &n), 0);
	EXPECT_EQ(std::string(sp, n), "y");
}

// The directory holds only a tag's low 9 bits: keys whose tags differ but
// share them are candidates for each other's lookup, and the key compare
// decides. A bucket with two such keys (one inline, one OUT, the same key
// length so that only the bytes differ) serves each its own value on every
// path, and a third such key that the image does not hold misses.
TEST(Reader, NineBitTagCollisionIsNotAMatch)
{
	const testimg::Options o0;
	std::map<unsigned, std::vector<std::pair<std::string, uint64_t>>> by_low9;
	std::vector<std::string> keys; // three keys, tags distinct, low 9 bits equal
	for (int i = 0; keys.empty() && i < 200000; i++) {
		char k[16];
		snprintf(k, sizeof k, "c%06d", i);
		uint64_t tag = shmkv_key_tag(shmkv_key_hash(o0.seed, o0.hash_bits, k, strlen(k)));
		auto &v = by_low9[(unsigned)(tag & 0x1ff)];
		bool fresh = true;
		for (const auto &p : v)
			fresh &= p.second != tag;
		if (fresh)
			v.push_back({k, tag});
		if (v.size() == 3)
			for (const auto &p : v)
				keys.push_back(p.first);
	}
	ASSERT_EQ(keys.size(), 3u);
	std::vector<Rec> recs = {{keys[0], SHMKV_TYPE_STRING, "inline", 0, false},
				 {keys[1], SHMKV_TYPE_STRING, "out of line", 0, true}};
	testimg::Options o;
	o.bucket_count = 1;
	auto im = testimg::compose(recs, o);
	Mem m(im.bytes);
	ASSERT_EQ(m.err, 0) << m.why;
	ASSERT_EQ(m.verify(), "");
	// one bucket, both records in it: each directory entry is a candidate
	// for every one of the three keys (probe_variants_test checks the
	// compare itself)
	ASSERT_EQ(m.img[im.index_off], 2);
	ASSERT_EQ(im.bucket[0], 0u);
	ASSERT_EQ(im.bucket[1], 0u);
	const char *want[3] = {"inline", "out of line", nullptr};
	for (int i = 0; i < 3; i++) {
		SCOPED_TRACE(keys[i]);
		const std::string &k = keys[i];
		shmkv_value v;
		char why[256] = "";
		int e1 = shmkv_get(&m.db, k.data(), k.size(), &v);
		std::string got1 = e1 ? "" : std::string((const char *)v.data, v.size);
		int e2 = shmkv_get_diag(&m.db, k.data(), k.size(), &v, why, sizeof why);
		std::string got2 = e2 ? "" : std::string((const char *)v.data, v.size);
		shmkv_key bk1{k.data(), k.size()};
		int e3 = 7;
		shmkv_get_batch(&m.db, &bk1, 1, &v, &e3);
		std::string got3 = e3 ? "" : std::string((const char *)v.data, v.size);
		if (want[i]) {
			EXPECT_EQ(e1, 0);
			EXPECT_EQ(got1, want[i]);
		} else {
			EXPECT_EQ(e1, SHMKV_ENOTFOUND);
		}
		EXPECT_EQ(e2, e1) << why;
		EXPECT_EQ(got2, got1);
		EXPECT_EQ(e3, e1);
		EXPECT_EQ(got3, got1);
	}
}

// Random damage to the index with checksums recomputed: every path agrees
// and nothing crashes (run under ASan by test-san: no read past a bucket).
TEST(Reader, RandomIndexDamageSweep)
{
	std::vector<Rec> recs = mixed();
	testimg::Options o;
	o.bucket_count = 7;
	auto im = testimg::compose(recs, o);
	std::mt19937_64 rng(22);
	int corrupt_seen = 0;
	for (int round = 0; round < 3000; round++) {
		std::string b = im.bytes;
		int flips = 1 + (int)(rng() % 3);
		for (int f = 0; f < flips; f++) {
			uint64_t at = im.index_off + rng() % (o.bucket_count * 128);
			b[at] ^= (char)(1u << (rng() % 8));
		}
		testimg::reseal(b);
		Mem m(b);
		ASSERT_EQ(m.err, 0) << m.why;
		m.verify();
		for (const Rec &r : recs) {
			shmkv_value v;
			char why[256];
			int e1 = shmkv_get(&m.db, r.key.data(), r.key.size(), &v);
			int e2 = shmkv_get_diag(&m.db, r.key.data(), r.key.size(), &v, why, sizeof why);
			ASSERT_EQ(e1, e2) << "round " << round << " key " << r.key.substr(0, 20) << ": " << why;
			corrupt_seen += e1 == SHMKV_ECORRUPT;
		}
		shmkv_iter it;
		shmkv_iter_init(&m.db, &it);
		const void *k;
		size_t kl;
		shmkv_value v;
		for (int n = 0; n < 1000 && shmkv_iter_next(&it, &k, &kl, &v) == 0; n++) {
		}
	}
	EXPECT_GT(corrupt_seen, 0);
}

// Round round's copy of im for the damage tests: every fifth round intact,
// else 1..3 bit flips, in the buckets (bucket_count of them), or with
// entries_too a third there and the rest in ENTRIES; checksums fixed, so
// that only the structure is wrong. *flips: how many.
std::string damaged(const testimg::Image &im, uint64_t bucket_count, std::mt19937_64 &rng, int round,
		    bool entries_too, int *flips)
{
	std::string b = im.bytes;
	*flips = round % 5 == 0 ? 0 : 1 + (int)(rng() % 3);
	for (int f = 0; f < *flips; f++) {
		uint64_t at = !entries_too || rng() % 3 == 0
				      ? im.index_off + rng() % (bucket_count * 128)
				      : im.entries_off + rng() % im.entries_size;
		b[at] ^= (char)(1u << (rng() % 8));
	}
	testimg::reseal(b);
	return b;
}

// 1,500 rounds of damaged() copies of im (rng seeded with seed), the clock
// pinned at 1 and at after in turn, each by expect_paths_agree (an intact
// round's values exact) and then by per(m): the loop of the damage tests.
// Returns at the first fatal failure (the caller checks HasFatalFailure).
template <class Per>
void damage_rounds(const testimg::Image &im, uint64_t bucket_count, uint64_t seed, bool entries_too,
		   int64_t after, const std::vector<Rec> &recs, int *hits, Per per)
{
	std::mt19937_64 rng(seed);
	for (int round = 0; round < 1500; round++) {
		int flips;
		Mem m(damaged(im, bucket_count, rng, round, entries_too, &flips));
		ASSERT_EQ(m.err, 0) << m.why;
		shmkv_set_clock(&m.db, round % 2 ? after : 1);
		SCOPED_TRACE("round " + std::to_string(round));
		int lost = 0;
		expect_paths_agree(m, recs, flips == 0, hits, &lost);
		if (::testing::Test::HasFatalFailure())
			return;
		per(m);
		if (::testing::Test::HasFatalFailure())
			return;
	}
}

// The hot path (lib/shmkv/lookup.h: the single get, the typed getters, the
// batch) against the checked one (shmkv_get_diag) on damaged buckets of an
// image with inline keys of 1..40 bytes (the hot key compare's word loop),
// displaced keys, OUT records and expiring records, at a pinned clock on
// either side of their expiry: the same code and the same value, every
// time, and no read outside the image (ASan in test-san).
TEST(Reader, HotPathAgreesWithCheckedUnderDamage)
{
	std::vector<Rec> recs = mixed();
	for (int i = 0; i < 24; i++)
		recs.push_back({std::string(1 + i * 39 / 23, 'a' + i % 26) + std::to_string(i),
				SHMKV_TYPE_STRING, "v" + std::to_string(i),
				i % 4 == 1 ? 1900000000u + (uint32_t)i : 0u, i % 11 == 5});
	testimg::Options o;
	o.bucket_count = 14;
	auto im = testimg::compose(recs, o);
	{
		Mem clean(im.bytes);
		ASSERT_EQ(clean.err, 0) << clean.why;
		ASSERT_EQ(clean.verify(), "");
	}
	int announcing = 0; // home buckets with displaced keys: the later-bucket walk runs
	for (uint64_t i = 0; i < o.bucket_count; i++)
		announcing += im.bytes[im.index_off + 128 * i + 1] != 0;
	ASSERT_GT(announcing, 0);
	int corrupt_seen = 0, expired_seen = 0, hits = 0;
	damage_rounds(im, o.bucket_count, 2211, false, 1900000000 + 12, recs, &hits, [&](Mem &m) {
		for (const Rec &r : recs) {
			shmkv_value v;
			char why[256];
			int e = shmkv_get_diag(&m.db, r.key.data(), r.key.size(), &v, why, sizeof why);
			corrupt_seen += e == SHMKV_ECORRUPT;
			expired_seen += e == SHMKV_ENOTFOUND && std::string(why).find("expired") != std::string::npos;
		}
	});
	if (HasFatalFailure())
		return;
	EXPECT_GT(corrupt_seen, 0);
	EXPECT_GT(expired_seen, 0);
	EXPECT_GT(hits, 0);
}

// OUT records on the hot path (lib/shmkv/lookup.h: the record, the unit/entry
// step, the entry's hit rules for its value) against the checked path,
// the image damaged in its buckets and in ENTRIES (entry headers: type,
// flags, key and value lengths; keys; values): an OUT record of every type,
// keys of 1..40 bytes, some expiring (the clock pinned either side), an
// entry last in ENTRIES. The untyped get, the batch, and each typed getter
// (a wanted type) give the checked path's code and value.
TEST(Reader, OutRecordsHotPathAgreesUnderEntryDamage)
{
	std::vector<Rec> recs;
	const unsigned types[] = {SHMKV_TYPE_STRING,  SHMKV_TYPE_BYTES,   SHMKV_TYPE_I64,
				  SHMKV_TYPE_F64,     SHMKV_TYPE_BOOL,    SHMKV_TYPE_F32LIST,
				  SHMKV_TYPE_F64LIST, SHMKV_TYPE_I64LIST, SHMKV_TYPE_STRLIST};
	for (int i = 0; i < 45; i++) {
		const unsigned t = types[i % 9];
		std::string v;
		switch (t) {
		case SHMKV_TYPE_STRING: v = std::string(60 + i, 's'); break;
		case SHMKV_TYPE_BYTES: v = std::string(70 + i, '\x01'); break;
		case SHMKV_TYPE_I64: v = testimg::i64(i * 1000003); break;
		case SHMKV_TYPE_F64: v = testimg::f64(i + 0.25); break;
		case SHMKV_TYPE_BOOL: v = std::string(1, '\1'); break;
		case SHMKV_TYPE_STRLIST: v = testimg::strlist({"a" + std::to_string(i), "bc"}); break;
		default: { // a numeric list of 4..19 elements of 4 or 8 bytes
			size_t es = t == SHMKV_TYPE_F32LIST ? 4 : 8;
			v = std::string((4 + i % 16) * es, '\0');
			for (size_t j = 0; j < v.size(); j++)
				v[j] = (char)(j * 7 + i);
		}
		}
		recs.push_back({std::string(1 + i * 39 / 44, 'a' + i % 26) + std::to_string(i), t, v,
				i % 5 == 2 ? 1900000000u + (uint32_t)i : 0u, true});
	}
	testimg::Options o;
	o.bucket_count = 6;
	auto im = testimg::compose(recs, o);
	{
		Mem clean(im.bytes);
		ASSERT_EQ(clean.err, 0) << clean.why;
		ASSERT_EQ(clean.verify(), "");
	}
	int corrupt_seen = 0, hits = 0, typed_hits = 0;
	damage_rounds(im, o.bucket_count, 2212, true, 1900000000 + 20, recs, &hits, [&](Mem &m) {
		for (const Rec &r : recs) {
			SCOPED_TRACE("key " + r.key);
			shmkv_value v;
			char why[256];
			const int e = shmkv_get_diag(&m.db, r.key.data(), r.key.size(), &v, why, sizeof why);
			corrupt_seen += e == SHMKV_ECORRUPT;
			// each typed getter: the checked code, ETYPE for another type
			int64_t i64 = 0;
			double f64 = 0;
			bool bl = false;
			const void *p = nullptr;
			size_t n = 0;
			const float *fl = nullptr;
			const double *dl = nullptr;
			const int64_t *il = nullptr;
			const struct {
				unsigned type;
				int got;
				const void *data;
			} typed[] = {
				{SHMKV_TYPE_I64, shmkv_get_i64(&m.db, r.key.data(), r.key.size(), &i64), nullptr},
				{SHMKV_TYPE_F64, shmkv_get_f64(&m.db, r.key.data(), r.key.size(), &f64), nullptr},
				{SHMKV_TYPE_BOOL, shmkv_get_bool(&m.db, r.key.data(), r.key.size(), &bl), nullptr},
				{SHMKV_TYPE_BYTES, shmkv_get_bytes(&m.db, r.key.data(), r.key.size(), &p, &n), p},
				{SHMKV_TYPE_F32LIST,
				 shmkv_get_f32list(&m.db, r.key.data(), r.key.size(), &fl, &n), fl},
				{SHMKV_TYPE_F64LIST,
				 shmkv_get_f64list(&m.db, r.key.data(), r.key.size(), &dl, &n), dl},
				{SHMKV_TYPE_I64LIST,
				 shmkv_get_i64list(&m.db, r.key.data(), r.key.size(), &il, &n), il},
			};
			for (const auto &t : typed) {
				SCOPED_TRACE("type " + std::to_string(t.type));
				ASSERT_EQ(t.got, e ? e : v.type == t.type ? 0 : SHMKV_ETYPE) << why;
				if (!t.got && t.data) {
					ASSERT_EQ(t.data, v.data);
				}
				typed_hits += t.got == 0;
			}
			if (!e && v.type == SHMKV_TYPE_I64) {
				ASSERT_EQ(memcmp(&i64, v.data, 8), 0);
			}
		}
	});
	if (HasFatalFailure())
		return;
	EXPECT_GT(corrupt_seen, 0);
	EXPECT_GT(hits, 0);
	EXPECT_GT(typed_hits, 0);
}

// A get counts bucket b+1's records only where the lookup of FORMAT.md
// §6 scans b+1 (the single get requests b+1's lines with b's, and a
// reader that looks at b and b+1 in one pass, as one tried, must still
// decide as the lookup does): b's D nonzero, the tag's filter
// bit set, max_probe at least 1. Each home bucket's announcements forged
// (D 0, 1, 2, 255; the filter cleared, then all set), its successor's count
// forged past 16 (with D as built and with D 0), and max_probe 0 and 1 in
// the header; the last bucket's successor is bucket 0. Every key, by the
// hot get, the typed get and the batch, agrees with the checked path
// (shmkv_get_diag): code and value.
TEST(Reader, NextBucketCountsOnlyWhereAnnounced)
{
	std::vector<Rec> recs;
	for (int i = 0; i < 40; i++)
		recs.push_back({"key_" + std::to_string(i), SHMKV_TYPE_STRING,
				"val_" + std::to_string(i), 0, false});
	recs.push_back({"outk", SHMKV_TYPE_STRING, "out of line", 0, true});
	testimg::Options o;
	o.bucket_count = 8;
	const uint64_t bc = o.bucket_count;
	testimg::Image im;
	int at1 = 0, far = 0, wrapped = 0;
	// the first seed whose placement has all three kinds of displaced key
	for (o.seed = 1; o.seed < 200 && !(at1 && far && wrapped); o.seed++) {
		im = testimg::compose(recs, o);
		at1 = far = wrapped = 0;
		for (size_t i = 0; i < recs.size(); i++) {
			const uint64_t d = (im.bucket[i] + bc - im.home[i]) % bc;
			at1 += d == 1;
			far += d >= 2;
			wrapped += d && im.bucket[i] < im.home[i];
		}
	}
	ASSERT_GT(at1, 0) << "keys displaced by one";
	ASSERT_GT(far, 0) << "keys displaced further";
	ASSERT_GT(wrapped, 0) << "a key displaced past the last bucket to bucket 0";
	int hits = 0, lost = 0, images = 0;
	auto agree = [&](const std::string &img, const std::string &what) {
		SCOPED_TRACE(what);
		images++;
		std::string b = img;
		testimg::reseal(b);
		Mem m(b);
		ASSERT_EQ(m.err, 0) << m.why;
		expect_paths_agree(m, recs, true, &hits, &lost);
	};
	agree(im.bytes, "as built");
	ASSERT_EQ(lost, 0);
	for (uint64_t hb = 0; hb < bc; hb++) {
		const uint64_t at = im.index_off + 128 * hb, nx = im.index_off + 128 * ((hb + 1) % bc);
		const std::string tr = "home bucket " + std::to_string(hb);
		for (int d : {0, 1, 2, 255}) {
			std::string b = im.bytes;
			b[at + 1] = (char)d;
			agree(b, tr + ": D " + std::to_string(d));
		}
		for (int f : {0x00, 0xff}) {
			std::string b = im.bytes;
			for (int j = 2; j < 8; j++)
				b[at + j] = (char)f;
			agree(b, tr + ": filter bytes " + std::to_string(f));
		}
		for (int d : {-1, 0}) {
			std::string b = im.bytes;
			b[nx] = 17; /* the successor's count past 16 */
			if (d >= 0)
				b[at + 1] = (char)d;
			agree(b, tr + ": successor's count 17, D " + (d < 0 ? "as built" : "0"));
		}
	}
	for (uint32_t mp : {0u, 1u}) {
		std::string b = im.bytes;
		reinterpret_cast<shmkv_image_header *>(&b[0])->max_probe = mp;
		agree(b, "max_probe " + std::to_string(mp));
	}
	EXPECT_GT(hits, 0);
	EXPECT_GT(lost, 0) << "some forged announcement hides a displaced key";
	EXPECT_EQ(images, 1 + 8 * 8 + 2);
}

// The composed seeds of the image fuzz targets (tests/fuzz/regress/image and
// image_fixsum) are this layout's: composed here, compared with the files;
// SHMKV_WRITE_SEEDS=1 writes them (after a layout change).
std::vector<std::pair<std::string, std::string>> fuzz_seeds()
{
	testimg::Options o;
	o.bucket_count = 7;
	std::vector<std::pair<std::string, std::string>> seeds;
	seeds.push_back({"seed-mixed", testimg::compose(mixed(), o).bytes});
	std::vector<Rec> r;
	for (int i = 0; i < 36; i++)
		r.push_back({"key_" + std::to_string(i), SHMKV_TYPE_STRING, "val_" + std::to_string(i),
			     i % 3 ? 0u : 1900000000u + (uint32_t)i, i % 10 == 0});
	seeds.push_back({"seed-displaced-expiry", testimg::compose(r, o).bytes});
	return seeds;
}

TEST(Reader, FuzzSeedsAreThisLayout)
{
	const std::string src = SHMKV_SOURCE_ROOT;
	if (src.empty())
		GTEST_SKIP() << "no source root";
	const bool write = getenv("SHMKV_WRITE_SEEDS") && *getenv("SHMKV_WRITE_SEEDS") == '1';
	for (const auto &seed : fuzz_seeds()) {
		Mem m(seed.second, SHMKV_OPEN_DEEP);
		ASSERT_EQ(m.err, 0) << seed.first << ": " << m.why;
		EXPECT_EQ(m.verify(), "") << seed.first;
		EXPECT_GT(shmkv_header(&m.db)->max_probe, 0u) << seed.first << ": displaced keys";
		for (const char *dir : {"image", "image_fixsum"}) {
			const std::string path = src + "/tests/fuzz/regress/" + dir + "/" + seed.first;
			if (write) {
				ASSERT_TRUE(write_file(path, seed.second)) << path;
			}
			EXPECT_TRUE(read_file(path) == seed.second)
				<< path << " is not this layout's seed: SHMKV_WRITE_SEEDS=1 "
				<< "tests/reader_test --gtest_filter='*FuzzSeeds*' rewrites it";
		}
	}
}

// A reader of the format 1 era (commit 4dc25bf, before format 2), built from
// a git worktree of this repository, refuses a format 2 image with
// SHMKV_EVERSION and a message naming version 2 (FORMAT.md §15: a new format
// version is refused by the readers before it, never misread).
TEST(Reader, FormatOneEraReaderRefusesFormat2)
{
	const std::string src = SHMKV_SOURCE_ROOT;
	if (src.empty() || system(("git -C '" + src + "' rev-parse --git-dir >/dev/null 2>&1").c_str()))
		GTEST_SKIP() << "the source tree is not a git checkout (package build?)";
	if (system(("git -C '" + src + "' cat-file -e '4dc25bf^{commit}' 2>/dev/null").c_str()))
		GTEST_SKIP() << "commit 4dc25bf is not in this clone (shallow?)";
	const char *cc = getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
	TempDir tmp;
	const std::string wt = tmp.file("old");
	std::string cmd = "git -C '" + src + "' worktree add --detach '" + wt +
			  "' 4dc25bf >/dev/null 2>&1";
	ASSERT_EQ(system(cmd.c_str()), 0) << cmd;
	struct Prune {
		std::string src, wt;
		~Prune() { (void)!system(("git -C '" + src + "' worktree remove --force '" + wt + "' >/dev/null 2>&1").c_str()); }
	} prune{src, wt};
	const std::string prog = tmp.file("old_reader.c");
	ASSERT_TRUE(write_file(prog, "#include <shmkv.h>\n#include <stdio.h>\n"
				     "int main(int c, char **v) { shmkv *db; char why[512] = \"\";\n"
				     "  (void)c; int e = shmkv_open_file_diag(v[1], 0, &db, why, sizeof why);\n"
				     "  printf(\"%d %s\\n\", e, why); return e == SHMKV_EVERSION ? 0 : 1; }\n"));
	cmd = std::string(cc) + " -std=c11 -O1 -I'" + wt + "/lib' -o '" + tmp.file("old_reader") +
	      "' '" + prog + "' 2>'" + tmp.file("cc.err") + "'";
	ASSERT_EQ(system(cmd.c_str()), 0) << cmd << "\n" << read_file(tmp.file("cc.err"));
	ASSERT_TRUE(write_file(tmp.file("f2.img"),
			       testimg::compose({{"a", SHMKV_TYPE_STRING, "b", 0, false}}).bytes));
	cmd = "'" + tmp.file("old_reader") + "' '" + tmp.file("f2.img") + "' >'" + tmp.file("out") + "'";
	int rc = system(cmd.c_str());
	std::string out = read_file(tmp.file("out"));
	EXPECT_EQ(rc, 0) << out;
	EXPECT_NE(out.find(std::to_string(SHMKV_EVERSION)), std::string::npos) << out;
	EXPECT_NE(out.find("image format version 2, this reader reads version 1"), std::string::npos)
		<< out;
	// and this reader opens the same image
	Db db = open_db(tmp.file("f2.img"), SHMKV_OPEN_DEEP);
	EXPECT_TRUE(db);
}

} // namespace
