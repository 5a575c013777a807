// roundtrip_test: records go through the builder (builder/shmkv_build.h) and
// come back through the reader (lib/shmkv.h) unchanged.
//
//   AllTypes          every value type, with edge values (empty strings and
//                     lists, NaN payloads, -0.0, INT64_MIN, embedded NULs)
//   RawEncoded*       shmkv_builder_add with encoded values, and bad encodings
//   Keys*             binary keys with NUL bytes, empty key, Unicode, the
//                     maximum key length and one past it
//   BigValues         multi-MB values of several types
//   Empty/One         0 and 1 entries
//   Collisions        options.hash_bits = 1..4: every key in a few long probe
//                     chains, some wrapping around the end of the table
//   Absent            lookups of keys that are not there, near misses
//   TypeMismatch      every typed getter on every other type: SHMKV_ETYPE,
//                     outputs untouched
//   StrlistIteration  shmkv_strlist_count/at
//   BatchMatchesGet   shmkv_get_batch agrees with shmkv_get key by key
//   IterationExactlyOnce, Determinism, SourceDateEpoch, Dedup*, HeaderFields
//   RoundtripBig.TenMillion  10M entries (SHMKV_TEST_BIG_N overrides the count;
//                     meson sets 1M in sanitizer builds; 1M under an emulator)
#include <sys/mman.h>

#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "test_util.h"

using namespace shmkv_test;

namespace {

uint64_t f64_bits(double d)
{
	uint64_t u = 0;
	memcpy(&u, &d, 8);
	return u;
}

double bits_f64(uint64_t u)
{
	double d = 0;
	memcpy(&d, &u, 8);
	return d;
}

float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

// Encodes a string list the way the image stores it (shmkv_build.h).
std::string encode_strlist(const std::vector<std::string> &l)
{
	std::string out;
	auto put32 = [&](uint32_t x) { out.append(reinterpret_cast<const char *>(&x), 4); };
	put32((uint32_t)l.size());
	uint32_t end = 0;
	put32(0);
	for (const std::string &s : l) {
		end += (uint32_t)s.size() + 1;
		put32(end);
	}
	for (const std::string &s : l) {
		out += s;
		out += '\0';
	}
	return out;
}

int add_strlist(shmkv_builder *b, const std::string &k, const std::vector<std::string> &l)
{
	std::vector<const char *> p;
	std::vector<size_t> n;
	for (const std::string &s : l) {
		p.push_back(s.data());
		n.push_back(s.size());
	}
	return shmkv_builder_add_strlist(b, k.data(), k.size(), l.empty() ? nullptr : p.data(),
					 l.empty() ? nullptr : n.data(), l.size());
}

std::vector<std::string> get_strlist(const shmkv *db, const std::string &k)
{
	shmkv_strlist l{};
	std::vector<std::string> out;
	int err = shmkv_get_strlist(db, k.data(), k.size(), &l);
	EXPECT_EQ(err, 0) << k << ": " << shmkv_strerror(err);
	if (err)
		return out;
	for (size_t i = 0; i < shmkv_strlist_count(&l); i++) {
		size_t len = 0;
		const char *s = shmkv_strlist_at(&l, i, &len);
		EXPECT_NE(s, nullptr);
		if (!s)
			break;
		EXPECT_EQ(s[len], '\0');
		out.emplace_back(s, len);
	}
	return out;
}

std::string get_str(const shmkv *db, const std::string &k)
{
	const char *s = nullptr;
	size_t n = 0;
	int err = shmkv_get_str(db, k.data(), k.size(), &s, &n);
	EXPECT_EQ(err, 0) << k << ": " << shmkv_strerror(err);
	if (err)
		return "<error>";
	EXPECT_EQ(s[n], '\0') << k;
	return std::string(s, n);
}

std::string get_bytes(const shmkv *db, const std::string &k)
{
	const void *p = nullptr;
	size_t n = 0;
	int err = shmkv_get_bytes(db, k.data(), k.size(), &p, &n);
	EXPECT_EQ(err, 0) << k << ": " << shmkv_strerror(err);
	if (err)
		return "<error>";
	EXPECT_EQ(static_cast<const char *>(p)[n], '\0') << k << ": bytes are NUL-terminated";
	return std::string(static_cast<const char *>(p), n);
}

template <typename T>
std::vector<T> list_from(const T *p, size_t n)
{
	return std::vector<T>(p, p + n);
}

// Bitwise equality, so NaN payloads and -0.0 count.
template <typename T>
bool same_bits(const std::vector<T> &a, const std::vector<T> &b)
{
	return a.size() == b.size() && (a.empty() || memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Under an emulator (the AArch64 builds under qemu) 1M: the same image
// layout, lookups, exactly-once iteration and verify on the emulated
// architecture's reader, in a tenth of the 90 s that 10M takes there; the
// 10M scale itself is the same bytes and code on every architecture and runs
// in every native build.
int64_t big_n()
{
	const char *e = getenv("SHMKV_TEST_BIG_N");
	if (e && *e)
		return strtoll(e, nullptr, 10);
	return emulator().empty() ? 10000000 : 1000000;
}

class Roundtrip : public ::testing::Test {
protected:
	TempDir dir;
	std::string img = dir.file("t.shmkv");
};

TEST_F(Roundtrip, AllTypes)
{
	const double nan_payload = bits_f64(UINT64_C(0x7ff8000000000abc));
	const double neg_nan = bits_f64(UINT64_C(0xfff0000000000001)); // signalling, negative
	const std::vector<float> f32 = {0.0f, -0.0f, 1.5f, -3.25e-38f, 3.4028235e38f,
					std::numeric_limits<float>::infinity(),
					-std::numeric_limits<float>::infinity(),
					bits_f32(0x7fc00123), bits_f32(0x00000001) /* denormal */};
	const std::vector<double> f64 = {0.0, -0.0, 1e308, -2.5e-310, nan_payload, neg_nan,
					 std::numeric_limits<double>::infinity()};
	const std::vector<int64_t> i64 = {0, -1, 1, INT64_MIN, INT64_MAX, 42};
	const std::vector<std::string> sl = {"", "a", "", "héllo wörld", std::string("nul\0in", 6), ""};
	std::string all_bytes;
	for (int c = 0; c < 256; c++)
		all_bytes += (char)c;

	Builder b;
	ASSERT_TRUE(b.ok());
	ASSERT_EQ(b.i64("i64.zero", 0), 0);
	ASSERT_EQ(b.i64("i64.min", INT64_MIN), 0);
	ASSERT_EQ(b.i64("i64.max", INT64_MAX), 0);
	ASSERT_EQ(b.i64("i64.neg", -123456789), 0);
	for (double d : {0.0, -0.0, 1.0 / 3, nan_payload, neg_nan, 5e-324,
			 -std::numeric_limits<double>::infinity()}) {
		char k[64];
		snprintf(k, sizeof k, "f64.%016" PRIx64, f64_bits(d));
		ASSERT_EQ(shmkv_builder_add_f64(b, k, strlen(k), d), 0) << b.error();
	}
	ASSERT_EQ(shmkv_builder_add_bool(b, "bool.t", 6, 1), 0);
	ASSERT_EQ(shmkv_builder_add_bool(b, "bool.f", 6, 0), 0);
	ASSERT_EQ(b.str("str.empty", ""), 0);
	ASSERT_EQ(b.str("str.hello", "hello"), 0);
	ASSERT_EQ(b.str("str.unicode", "Grüße, 世界 🌍 \u200b"), 0);
	ASSERT_EQ(b.str("str.nul", std::string("a\0b\0", 4)), 0);
	ASSERT_EQ(shmkv_builder_add_bytes(b, "bytes.empty", 11, nullptr, 0), 0) << b.error();
	ASSERT_EQ(shmkv_builder_add_bytes(b, "bytes.all", 9, all_bytes.data(), all_bytes.size()), 0);
	ASSERT_EQ(shmkv_builder_add_f32list(b, "f32.empty", 9, nullptr, 0), 0) << b.error();
	ASSERT_EQ(shmkv_builder_add_f32list(b, "f32.list", 8, f32.data(), f32.size()), 0);
	ASSERT_EQ(shmkv_builder_add_f64list(b, "f64.empty", 9, nullptr, 0), 0) << b.error();
	ASSERT_EQ(shmkv_builder_add_f64list(b, "f64.list", 8, f64.data(), f64.size()), 0);
	ASSERT_EQ(shmkv_builder_add_i64list(b, "i64.empty", 9, nullptr, 0), 0) << b.error();
	ASSERT_EQ(shmkv_builder_add_i64list(b, "i64.list", 8, i64.data(), i64.size()), 0);
	ASSERT_EQ(add_strlist(b, "sl.empty", {}), 0) << b.error();
	ASSERT_EQ(add_strlist(b, "sl.one_empty", {""}), 0) << b.error();
	ASSERT_EQ(add_strlist(b, "sl.list", sl), 0) << b.error();
	shmkv_build_stats st;
	ASSERT_EQ(b.finish(img, &st), 0) << b.error();
	EXPECT_EQ(st.records, 28u);
	EXPECT_EQ(st.entries, 28u);
	EXPECT_EQ(st.duplicates, 0u);

	Db db = open_db(img, SHMKV_OPEN_DEEP);
	ASSERT_TRUE(db);
	EXPECT_EQ(db.hdr()->entry_count, 28u);
	EXPECT_EQ(verify_msg(db), "");

	int64_t i = 7;
	ASSERT_EQ(shmkv_get_i64(db, "i64.zero", 8, &i), 0);
	EXPECT_EQ(i, 0);
	ASSERT_EQ(shmkv_get_i64(db, "i64.min", 7, &i), 0);
	EXPECT_EQ(i, INT64_MIN);
	ASSERT_EQ(shmkv_get_i64(db, "i64.max", 7, &i), 0);
	EXPECT_EQ(i, INT64_MAX);
	ASSERT_EQ(shmkv_get_i64(db, "i64.neg", 7, &i), 0);
	EXPECT_EQ(i, -123456789);
	for (double d : {0.0, -0.0, 1.0 / 3, nan_payload, neg_nan, 5e-324,
			 -std::numeric_limits<double>::infinity()}) {
		char k[64];
		snprintf(k, sizeof k, "f64.%016" PRIx64, f64_bits(d));
		double got = 1234;
		ASSERT_EQ(shmkv_get_f64(db, k, strlen(k), &got), 0) << k;
		EXPECT_EQ(f64_bits(got), f64_bits(d)) << k;
	}
	bool bv = false;
	ASSERT_EQ(shmkv_get_bool(db, "bool.t", 6, &bv), 0);
	EXPECT_TRUE(bv);
	ASSERT_EQ(shmkv_get_bool(db, "bool.f", 6, &bv), 0);
	EXPECT_FALSE(bv);
	EXPECT_EQ(get_str(db, "str.empty"), "");
	EXPECT_EQ(get_str(db, "str.hello"), "hello");
	EXPECT_EQ(get_str(db, "str.unicode"), "Grüße, 世界 🌍 \u200b");
	EXPECT_EQ(get_str(db, "str.nul"), std::string("a\0b\0", 4));
	EXPECT_EQ(get_bytes(db, "bytes.empty"), "");
	EXPECT_EQ(get_bytes(db, "bytes.all"), all_bytes);

	const float *fp = nullptr;
	const double *dp = nullptr;
	const int64_t *ip = nullptr;
	size_t n = 99;
	ASSERT_EQ(shmkv_get_f32list(db, "f32.empty", 9, &fp, &n), 0);
	EXPECT_EQ(n, 0u);
	ASSERT_EQ(shmkv_get_f32list(db, "f32.list", 8, &fp, &n), 0);
	EXPECT_TRUE(same_bits(list_from(fp, n), f32));
	EXPECT_EQ((uintptr_t)fp % 8, 0u) << "lists are 8-aligned";
	n = 99;
	ASSERT_EQ(shmkv_get_f64list(db, "f64.empty", 9, &dp, &n), 0);
	EXPECT_EQ(n, 0u);
	ASSERT_EQ(shmkv_get_f64list(db, "f64.list", 8, &dp, &n), 0);
	EXPECT_TRUE(same_bits(list_from(dp, n), f64));
	EXPECT_EQ((uintptr_t)dp % 8, 0u);
	n = 99;
	ASSERT_EQ(shmkv_get_i64list(db, "i64.empty", 9, &ip, &n), 0);
	EXPECT_EQ(n, 0u);
	ASSERT_EQ(shmkv_get_i64list(db, "i64.list", 8, &ip, &n), 0);
	EXPECT_EQ(list_from(ip, n), i64);
	EXPECT_EQ((uintptr_t)ip % 8, 0u);
	EXPECT_EQ(get_strlist(db, "sl.empty"), std::vector<std::string>{});
	EXPECT_EQ(get_strlist(db, "sl.one_empty"), std::vector<std::string>{""});
	EXPECT_EQ(get_strlist(db, "sl.list"), sl);

	// the generic getter agrees: type, size, count, alignment
	struct Want {
		const char *key;
		unsigned type;
		size_t size, count;
	};
	const Want wants[] = {
		{"i64.min", SHMKV_TYPE_I64, 8, 1},
		{"bool.t", SHMKV_TYPE_BOOL, 1, 1},
		{"str.hello", SHMKV_TYPE_STRING, 5, 5},
		{"str.empty", SHMKV_TYPE_STRING, 0, 0},
		{"bytes.all", SHMKV_TYPE_BYTES, 256, 256},
		{"f32.list", SHMKV_TYPE_F32LIST, 4 * f32.size(), f32.size()},
		{"f64.list", SHMKV_TYPE_F64LIST, 8 * f64.size(), f64.size()},
		{"i64.list", SHMKV_TYPE_I64LIST, 8 * i64.size(), i64.size()},
		{"i64.empty", SHMKV_TYPE_I64LIST, 0, 0},
		{"sl.empty", SHMKV_TYPE_STRLIST, 8, 0},
		{"sl.list", SHMKV_TYPE_STRLIST, encode_strlist(sl).size(), sl.size()},
	};
	for (const Want &w : wants) {
		shmkv_value v;
		ASSERT_EQ(shmkv_get(db, w.key, strlen(w.key), &v), 0) << w.key;
		EXPECT_EQ(v.type, w.type) << w.key;
		EXPECT_EQ(v.size, w.size) << w.key;
		EXPECT_EQ(v.count, w.count) << w.key;
		if (shmkv_type_align8(v.type)) {
			EXPECT_EQ((uintptr_t)v.data % 8, 0u) << w.key;
		}
	}
	shmkv_value v{};
	ASSERT_EQ(shmkv_get(db, "sl.list", 7, &v), 0);
	EXPECT_EQ(sv(v.data, v.size), encode_strlist(sl)) << "strlist encoding";
}

TEST_F(Roundtrip, RawEncodedValues)
{
	const std::vector<std::string> sl = {"x", "", "yz"};
	const std::string enc = encode_strlist(sl);
	int64_t i = -5;
	double d = 2.5;
	uint8_t t = 1;
	float fl[3] = {1, 2, 3};
	Builder b;
	ASSERT_TRUE(b.ok());
	ASSERT_EQ(shmkv_builder_add(b, "sl", 2, SHMKV_TYPE_STRLIST, enc.data(), enc.size()), 0)
		<< b.error();
	ASSERT_EQ(shmkv_builder_add(b, "i", 1, SHMKV_TYPE_I64, &i, 8), 0) << b.error();
	ASSERT_EQ(shmkv_builder_add(b, "d", 1, SHMKV_TYPE_F64, &d, 8), 0) << b.error();
	ASSERT_EQ(shmkv_builder_add(b, "t", 1, SHMKV_TYPE_BOOL, &t, 1), 0) << b.error();
	ASSERT_EQ(shmkv_builder_add(b, "f", 1, SHMKV_TYPE_F32LIST, fl, sizeof fl), 0) << b.error();
	ASSERT_EQ(shmkv_builder_add(b, "s", 1, SHMKV_TYPE_STRING, "abc", 3), 0) << b.error();
	ASSERT_EQ(shmkv_builder_add(b, "y", 1, SHMKV_TYPE_BYTES, "\0\1", 2), 0) << b.error();
	ASSERT_EQ(b.finish(img), 0) << b.error();
	Db db = open_db(img, SHMKV_OPEN_DEEP);
	ASSERT_TRUE(db);
	EXPECT_EQ(get_strlist(db, "sl"), sl);
	int64_t gi = 0;
	double gd = 0;
	bool gb = false;
	ASSERT_EQ(shmkv_get_i64(db, "i", 1, &gi), 0);
	EXPECT_EQ(gi, -5);
	ASSERT_EQ(shmkv_get_f64(db, "d", 1, &gd), 0);
	EXPECT_EQ(gd, 2.5);
	ASSERT_EQ(shmkv_get_bool(db, "t", 1, &gb), 0);
	EXPECT_TRUE(gb);
	const float *fp = nullptr;
	size_t n = 0;
	ASSERT_EQ(shmkv_get_f32list(db, "f", 1, &fp, &n), 0);
	EXPECT_EQ(list_from(fp, n), std::vector<float>({1, 2, 3}));
	EXPECT_EQ(get_str(db, "s"), "abc");
	EXPECT_EQ(get_bytes(db, "y"), std::string("\0\1", 2));
}

TEST_F(Roundtrip, RawEncodedRejectsBadEncodings)
{
	Builder b;
	ASSERT_TRUE(b.ok());
	int64_t i = 1;
	uint8_t two = 2;
	char junk[16] = {};
	EXPECT_EQ(shmkv_builder_add(b, "k", 1, 0, "x", 1), SHMKV_EINPUT) << "type 0";
	EXPECT_EQ(shmkv_builder_add(b, "k", 1, SHMKV_TYPE_MAX + 1, "x", 1), SHMKV_EINPUT);
	EXPECT_EQ(shmkv_builder_add(b, "k", 1, SHMKV_TYPE_I64, &i, 7), SHMKV_EINPUT);
	EXPECT_EQ(shmkv_builder_add(b, "k", 1, SHMKV_TYPE_F64, &i, 9), SHMKV_EINPUT);
	EXPECT_EQ(shmkv_builder_add(b, "k", 1, SHMKV_TYPE_BOOL, &two, 1), SHMKV_EINPUT);
	EXPECT_EQ(shmkv_builder_add(b, "k", 1, SHMKV_TYPE_BOOL, junk, 2), SHMKV_EINPUT);
	EXPECT_EQ(shmkv_builder_add(b, "k", 1, SHMKV_TYPE_F32LIST, junk, 6), SHMKV_EINPUT);
	EXPECT_EQ(shmkv_builder_add(b, "k", 1, SHMKV_TYPE_F64LIST, junk, 12), SHMKV_EINPUT);
	EXPECT_EQ(shmkv_builder_add(b, "k", 1, SHMKV_TYPE_I64LIST, junk, 4), SHMKV_EINPUT);
	EXPECT_EQ(shmkv_builder_add(b, "k", 1, SHMKV_TYPE_STRLIST, junk, 4), SHMKV_EINPUT)
		<< "strlist shorter than count + ends[0]";
	std::string bad = encode_strlist({"ab", "c"});
	bad[bad.size() - 1] = 'x'; // last string not NUL-terminated
	EXPECT_EQ(shmkv_builder_add(b, "k", 1, SHMKV_TYPE_STRLIST, bad.data(), bad.size()),
		  SHMKV_EINPUT);
	bad = encode_strlist({"ab", "c"});
	bad[0] = 5; // count larger than the ends array
	EXPECT_EQ(shmkv_builder_add(b, "k", 1, SHMKV_TYPE_STRLIST, bad.data(), bad.size()),
		  SHMKV_EINPUT);
	bad = encode_strlist({"ab", "c"});
	bad += "zz"; // bytes after the last string
	EXPECT_EQ(shmkv_builder_add(b, "k", 1, SHMKV_TYPE_STRLIST, bad.data(), bad.size()),
		  SHMKV_EINPUT);
	EXPECT_NE(b.error(), "") << "a rejected record leaves a message";
	// rejected records are not added
	ASSERT_EQ(b.i64("k", 3), 0);
	ASSERT_EQ(b.finish(img), 0) << b.error();
	Db db = open_db(img);
	ASSERT_TRUE(db);
	EXPECT_EQ(db.hdr()->entry_count, 1u);
}

TEST_F(Roundtrip, KeysBinaryEmptyUnicode)
{
	const std::vector<std::string> keys = {
		std::string(),                 std::string("\0", 1),        std::string("\0\0", 2),
		std::string("a\0b", 3),        std::string("a\0c", 3),      std::string("a", 1),
		std::string("ab", 2),          "ключ",                      "キー🔑",
		std::string("\xff\xfe\x80", 3), std::string("\n\t\r\\\"", 5), std::string(200, '\0'),
	};
	Builder b;
	ASSERT_TRUE(b.ok());
	for (size_t i = 0; i < keys.size(); i++) {
		ASSERT_EQ(b.i64(keys[i], (int64_t)i), 0) << i << ": " << b.error();
	}
	ASSERT_EQ(b.finish(img), 0) << b.error();
	Db db = open_db(img, SHMKV_OPEN_DEEP);
	ASSERT_TRUE(db);
	for (size_t i = 0; i < keys.size(); i++) {
		int64_t v = -1;
		ASSERT_EQ(shmkv_get_i64(db, keys[i].data(), keys[i].size(), &v), 0) << "key " << i;
		EXPECT_EQ(v, (int64_t)i);
	}
	std::string k199(199, '\0'), k201(201, '\0');
	shmkv_value val;
	EXPECT_EQ(shmkv_get(db, k199.data(), k199.size(), &val), SHMKV_ENOTFOUND);
	EXPECT_EQ(shmkv_get(db, k201.data(), k201.size(), &val), SHMKV_ENOTFOUND);
	EXPECT_EQ(shmkv_get(db, "a\0d", 3, &val), SHMKV_ENOTFOUND);
}

TEST_F(Roundtrip, MaxKeyLength)
{
	std::string kmax(SHMKV_MAX_KEY_LEN, 'k');
	kmax[0] = '\0';
	kmax[SHMKV_MAX_KEY_LEN - 1] = 'Z';
	std::string kover(SHMKV_MAX_KEY_LEN + 1, 'k');
	Builder b;
	ASSERT_TRUE(b.ok());
	EXPECT_EQ(b.str(kover, "over"), SHMKV_ELIMIT);
	EXPECT_NE(b.error(), "");
	EXPECT_EQ(shmkv_builder_add_i64(b, kover.data(), kover.size(), 1), SHMKV_ELIMIT);
	ASSERT_EQ(b.str(kmax, "max"), 0) << b.error();
	std::string kmax2 = kmax;
	kmax2[1] = 'j';
	ASSERT_EQ(b.str(kmax2, "max2"), 0) << b.error();
	ASSERT_EQ(b.str("short", "s"), 0);
	ASSERT_EQ(b.finish(img), 0) << b.error();
	Db db = open_db(img, SHMKV_OPEN_DEEP);
	ASSERT_TRUE(db);
	EXPECT_EQ(db.hdr()->entry_count, 3u);
	EXPECT_EQ(get_str(db, kmax), "max");
	EXPECT_EQ(get_str(db, kmax2), "max2");
	shmkv_value v;
	EXPECT_EQ(shmkv_get(db, kover.data(), kover.size(), &v), SHMKV_EKEYLEN);
	EXPECT_EQ(shmkv_get(db, kover.data(), SIZE_MAX, &v), SHMKV_EKEYLEN);
	int64_t i = 5;
	EXPECT_EQ(shmkv_get_i64(db, kover.data(), kover.size(), &i), SHMKV_EKEYLEN);
	EXPECT_EQ(i, 5);
	// iteration hands back the long key whole
	shmkv_iter it;
	shmkv_iter_init(db, &it);
	const void *k = nullptr;
	size_t kl = 0;
	std::set<std::string> seen;
	while (shmkv_iter_next(&it, &k, &kl, &v) == 0)
		seen.insert(sv(k, kl));
	EXPECT_EQ(seen, (std::set<std::string>{kmax, kmax2, "short"}));
}

// A value one byte over SHMKV_MAX_VALUE_LEN is refused before it is read: the
// bytes are an inaccessible mapping, so a builder that reads them crashes
// (in a child process, reported as a failure). Under an emulator the child
// is forked only ("fast"): "threadsafe" re-executes the test binary, which the
// kernel cannot run for another architecture.
TEST(RoundtripDeath, ValueOverLimitRefusedUnread)
{
	GTEST_FLAG_SET(death_test_style, emulator().empty() ? "threadsafe" : "fast");
	EXPECT_EXIT(
		{
			size_t len = (size_t)SHMKV_MAX_VALUE_LEN + 1;
			void *p = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
				       -1, 0);
			if (p == MAP_FAILED)
				_exit(3);
			shmkv_build_options o;
			shmkv_build_options_init(&o);
			shmkv_builder *b = nullptr;
			if (shmkv_builder_new(&o, &b))
				_exit(4);
			int e1 = shmkv_builder_add_bytes(b, "k", 1, p, len);
			int e2 = shmkv_builder_add_str(b, "k", 1, (const char *)p, len);
			int e3 = shmkv_builder_add(b, "k", 1, SHMKV_TYPE_BYTES, p, len);
			shmkv_builder_free(b);
			_exit(e1 == SHMKV_ELIMIT && e2 == SHMKV_ELIMIT && e3 == SHMKV_ELIMIT ? 0 : 1);
		},
		::testing::ExitedWithCode(0), "");
}

TEST_F(Roundtrip, BigValues)
{
	std::mt19937_64 rng(42);
	std::string bytes(8 << 20, '\0');
	for (auto &c : bytes)
		c = (char)rng();
	std::string text;
	while (text.size() < (3u << 20))
		text += "ünïcödé text line " + std::to_string(text.size()) + "\n";
	std::vector<float> floats(1 << 20);
	for (size_t i = 0; i < floats.size(); i++)
		floats[i] = (float)i * 0.5f;
	std::vector<std::string> strs;
	for (int i = 0; i < 100000; i++)
		strs.push_back("s" + std::to_string(i));
	Builder b;
	ASSERT_TRUE(b.ok());
	ASSERT_EQ(shmkv_builder_add_bytes(b, "bytes", 5, bytes.data(), bytes.size()), 0) << b.error();
	ASSERT_EQ(b.str("text", text), 0) << b.error();
	ASSERT_EQ(shmkv_builder_add_f32list(b, "floats", 6, floats.data(), floats.size()), 0);
	ASSERT_EQ(add_strlist(b, "strs", strs), 0) << b.error();
	ASSERT_EQ(b.str("small", "x"), 0);
	ASSERT_EQ(b.finish(img), 0) << b.error();
	Db db = open_db(img, SHMKV_OPEN_DEEP);
	ASSERT_TRUE(db);
	EXPECT_TRUE(get_bytes(db, "bytes") == bytes);
	EXPECT_TRUE(get_str(db, "text") == text);
	const float *fp = nullptr;
	size_t n = 0;
	ASSERT_EQ(shmkv_get_f32list(db, "floats", 6, &fp, &n), 0);
	EXPECT_TRUE(same_bits(list_from(fp, n), floats));
	EXPECT_TRUE(get_strlist(db, "strs") == strs);
	EXPECT_EQ(get_str(db, "small"), "x");
}

TEST_F(Roundtrip, EmptyImage)
{
	Builder b;
	ASSERT_TRUE(b.ok());
	shmkv_build_stats st;
	ASSERT_EQ(b.finish(img, &st), 0) << b.error();
	EXPECT_EQ(st.entries, 0u);
	Db db = open_db(img, SHMKV_OPEN_DEEP);
	ASSERT_TRUE(db);
	EXPECT_EQ(db.hdr()->entry_count, 0u);
	EXPECT_GE(db.hdr()->bucket_count, 1u);
	EXPECT_EQ(verify_msg(db), "");
	shmkv_value v;
	EXPECT_EQ(shmkv_get(db, "", 0, &v), SHMKV_ENOTFOUND);
	EXPECT_EQ(shmkv_get(db, "x", 1, &v), SHMKV_ENOTFOUND);
	shmkv_iter it;
	shmkv_iter_init(db, &it);
	const void *k = nullptr;
	size_t kl = 0;
	EXPECT_EQ(shmkv_iter_next(&it, &k, &kl, &v), SHMKV_EEND);
	EXPECT_EQ(shmkv_iter_next(&it, &k, &kl, &v), SHMKV_EEND);
}

TEST_F(Roundtrip, OneEntry)
{
	Builder b;
	ASSERT_TRUE(b.ok());
	ASSERT_EQ(b.str("only", "one"), 0);
	ASSERT_EQ(b.finish(img), 0) << b.error();
	Db db = open_db(img, SHMKV_OPEN_DEEP);
	ASSERT_TRUE(db);
	EXPECT_EQ(db.hdr()->entry_count, 1u);
	EXPECT_EQ(get_str(db, "only"), "one");
	shmkv_value v{};
	EXPECT_EQ(shmkv_get(db, "onl", 3, &v), SHMKV_ENOTFOUND);
	shmkv_iter it;
	shmkv_iter_init(db, &it);
	const void *k = nullptr;
	size_t kl = 0;
	ASSERT_EQ(shmkv_iter_next(&it, &k, &kl, &v), 0);
	EXPECT_EQ(sv(k, kl), "only");
	EXPECT_EQ(sv(v.data, v.size), "one");
	EXPECT_EQ(shmkv_iter_next(&it, &k, &kl, &v), SHMKV_EEND);
}

// The bucket of every record, by its key (FORMAT.md §6: records in their
// buckets' directories, inline keys in the bucket, OUT keys in their entry).
std::map<std::string, uint64_t> bucket_of_keys(const shmkv *db)
{
	std::map<std::string, uint64_t> m;
	const shmkv_image_header *h = shmkv_header(db);
	const uint8_t *index = (const uint8_t *)h + h->sections[0].offset;
	for (uint64_t b = 0; b < h->bucket_count; b++) {
		const uint8_t *bk = index + b * SHMKV_BUCKET_BYTES;
		for (unsigned j = 0; j < bk[0]; j++) {
			shmkv_record r{};
			EXPECT_EQ(shmkv_record_at(bk, j, &r), 0) << "bucket " << b << " record " << j;
			if (r.kind & SHMKV_REC_OUT) {
				shmkv_entry e{};
				EXPECT_EQ(shmkv_entry_at(db, r.unit << 3, &e, nullptr, 0), 0);
				m[sv(e.key, e.key_len)] = b;
			} else {
				m[sv(bk + r.key_pos, r.key_len)] = b;
			}
		}
	}
	return m;
}

// hash_bits 1..4 keeps 2..16 distinct hashes: thousands of keys share a few
// home buckets and tags, so lookups walk long chains and compare many keys.
// In the "wrap" variant every key hashes to the highest of those homes, so
// its chain must run past the last bucket and continue at bucket 0.
TEST_F(Roundtrip, Collisions)
{
	const int n = 3000;
	for (unsigned bits = 1; bits <= 4; bits++) {
		for (int wrap = 0; wrap < 2; wrap++) {
			SCOPED_TRACE("hash_bits " + std::to_string(bits) + (wrap ? ", wrap" : ""));
			shmkv_build_options o = test_options();
			o.hash_bits = bits;
			uint64_t top = 0; // the largest reduced hash: its home is the last one
			for (uint64_t x = 0; x < (UINT64_C(1) << bits); x++)
				top = std::max(top, x * UINT64_C(0x9E3779B97F4A7C15));
			std::vector<std::string> keys;
			for (int i = 0; (int)keys.size() < n; i++) {
				std::string k = "c" + std::to_string(i);
				if (!wrap || shmkv_key_hash(o.seed, bits, k.data(), k.size()) == top)
					keys.push_back(k);
			}
			Builder b(o);
			ASSERT_TRUE(b.ok());
			for (int i = 0; i < n; i++)
				ASSERT_EQ(b.i64(keys[(size_t)i], i), 0);
			shmkv_build_stats st;
			ASSERT_EQ(b.finish(img, &st), 0) << b.error();
			Db db = open_db(img, SHMKV_OPEN_DEEP);
			ASSERT_TRUE(db);
			const shmkv_image_header *h = db.hdr();
			EXPECT_EQ(h->hash_bits, bits);
			EXPECT_EQ(h->entry_count, (uint64_t)n);
			EXPECT_EQ(st.max_probe, h->max_probe);
			// one chain holds at least n / 2^bits keys (all n when wrapping),
			// at most 16 a bucket
			uint32_t longest = (uint32_t)(wrap ? n : n >> bits);
			EXPECT_GE(h->max_probe, longest / SHMKV_MAX_RECORDS - 1);
			for (int i = 0; i < n; i++) {
				const std::string &k = keys[(size_t)i];
				int64_t v = -1;
				ASSERT_EQ(shmkv_get_i64(db, k.data(), k.size(), &v), 0) << k;
				ASSERT_EQ(v, i);
			}
			for (int i = 0; i < 500; i++) {
				std::string k = "absent" + std::to_string(i);
				shmkv_value v;
				ASSERT_EQ(shmkv_get(db, k.data(), k.size(), &v), SHMKV_ENOTFOUND) << k;
			}
			// wrap-around: some key sits in a bucket before its home
			auto where = bucket_of_keys(db);
			uint64_t wrapped = 0;
			shmkv_iter it;
			shmkv_iter_init(db, &it);
			const void *k = nullptr;
			size_t kl = 0;
			shmkv_value v;
			ASSERT_EQ(where.size(), (size_t)n);
			while (shmkv_iter_next(&it, &k, &kl, &v) == 0) {
				uint64_t hv = shmkv_key_hash(h->hash_seed, bits, k, kl);
				uint64_t home = shmkv_home_bucket(hv, h->bucket_count);
				auto w = where.find(sv(k, kl));
				ASSERT_NE(w, where.end()) << sv(k, kl) << " not in the index";
				wrapped += w->second < home;
			}
			if (wrap) {
				EXPECT_GT(wrapped, 0u) << "no probe chain wrapped around";
			}
			printf("hash_bits %u%s: %" PRIu64 " buckets, max_probe %u, %" PRIu64
			       " keys wrapped\n", bits, wrap ? " (one home)" : "", h->bucket_count,
			       h->max_probe, wrapped);
		}
	}
}

TEST_F(Roundtrip, Absent)
{
	Builder b;
	ASSERT_TRUE(b.ok());
	for (int i = 0; i < 1000; i++) {
		ASSERT_EQ(b.i64("key_" + std::to_string(i), i), 0);
	}
	ASSERT_EQ(b.finish(img), 0) << b.error();
	Db db = open_db(img);
	ASSERT_TRUE(db);
	std::vector<std::string> absent = {"", "key_", "key_1000", "key_-1", "key_01", "Key_1",
					   "key_1 ", std::string("key_1\0", 6), "key_9999",
					   std::string(SHMKV_MAX_KEY_LEN, 'k')};
	for (int i = 0; i < 10000; i++)
		absent.push_back("nokey_" + std::to_string(i));
	for (const std::string &k : absent) {
		shmkv_value v;
		v.type = 77;
		ASSERT_EQ(shmkv_get(db, k.data(), k.size(), &v), SHMKV_ENOTFOUND) << k;
		EXPECT_EQ(v.type, 77u) << "value untouched on a miss";
		int64_t i = 9;
		ASSERT_EQ(shmkv_get_i64(db, k.data(), k.size(), &i), SHMKV_ENOTFOUND);
		EXPECT_EQ(i, 9);
	}
}

TEST_F(Roundtrip, TypeMismatch)
{
	const float f[2] = {1, 2};
	const double d[2] = {1, 2};
	const int64_t l[2] = {1, 2};
	Builder b;
	ASSERT_TRUE(b.ok());
	ASSERT_EQ(shmkv_builder_add_bytes(b, "bytes", 5, "b", 1), 0);
	ASSERT_EQ(b.str("string", "s"), 0);
	ASSERT_EQ(b.i64("i64", 1), 0);
	ASSERT_EQ(shmkv_builder_add_bool(b, "bool", 4, 1), 0);
	ASSERT_EQ(shmkv_builder_add_f64(b, "f64", 3, 1.0), 0);
	ASSERT_EQ(shmkv_builder_add_f32list(b, "f32list", 7, f, 2), 0);
	ASSERT_EQ(shmkv_builder_add_f64list(b, "f64list", 7, d, 2), 0);
	ASSERT_EQ(shmkv_builder_add_i64list(b, "i64list", 7, l, 2), 0);
	ASSERT_EQ(add_strlist(b, "strlist", {"a", "b"}), 0);
	ASSERT_EQ(b.finish(img), 0) << b.error();
	Db db = open_db(img);
	ASSERT_TRUE(db);

	for (unsigned type = 1; type <= SHMKV_TYPE_MAX; type++) {
		std::string key = shmkv_type_name(type);
		SCOPED_TRACE("stored " + key);
		const char *k = key.c_str();
		size_t kl = key.size();
		auto expect = [&](unsigned getter, int err) {
			EXPECT_EQ(err, getter == type ? 0 : SHMKV_ETYPE)
				<< "getter " << shmkv_type_name(getter);
		};
		const void *sentinel = &db;
		int64_t i = 0x5a5a;
		expect(SHMKV_TYPE_I64, shmkv_get_i64(db, k, kl, &i));
		if (type != SHMKV_TYPE_I64) {
			EXPECT_EQ(i, 0x5a5a);
		}
		double dd = 0.25;
		expect(SHMKV_TYPE_F64, shmkv_get_f64(db, k, kl, &dd));
		if (type != SHMKV_TYPE_F64) {
			EXPECT_EQ(dd, 0.25);
		}
		bool bb = false;
		expect(SHMKV_TYPE_BOOL, shmkv_get_bool(db, k, kl, &bb));
		if (type != SHMKV_TYPE_BOOL) {
			EXPECT_FALSE(bb);
		}
		const char *s = static_cast<const char *>(sentinel);
		size_t n = 12345;
		expect(SHMKV_TYPE_STRING, shmkv_get_str(db, k, kl, &s, &n));
		if (type != SHMKV_TYPE_STRING) {
			EXPECT_EQ(s, sentinel);
			EXPECT_EQ(n, 12345u);
		}
		const void *p = sentinel;
		n = 12345;
		expect(SHMKV_TYPE_BYTES, shmkv_get_bytes(db, k, kl, &p, &n));
		if (type != SHMKV_TYPE_BYTES) {
			EXPECT_EQ(p, sentinel);
			EXPECT_EQ(n, 12345u);
		}
		const float *fp = static_cast<const float *>(sentinel);
		n = 12345;
		expect(SHMKV_TYPE_F32LIST, shmkv_get_f32list(db, k, kl, &fp, &n));
		if (type != SHMKV_TYPE_F32LIST) {
			EXPECT_EQ((const void *)fp, sentinel);
			EXPECT_EQ(n, 12345u);
		}
		const double *dp = static_cast<const double *>(sentinel);
		n = 12345;
		expect(SHMKV_TYPE_F64LIST, shmkv_get_f64list(db, k, kl, &dp, &n));
		if (type != SHMKV_TYPE_F64LIST) {
			EXPECT_EQ((const void *)dp, sentinel);
			EXPECT_EQ(n, 12345u);
		}
		const int64_t *ip = static_cast<const int64_t *>(sentinel);
		n = 12345;
		expect(SHMKV_TYPE_I64LIST, shmkv_get_i64list(db, k, kl, &ip, &n));
		if (type != SHMKV_TYPE_I64LIST) {
			EXPECT_EQ((const void *)ip, sentinel);
			EXPECT_EQ(n, 12345u);
		}
		shmkv_strlist sl{};
		sl.count = 777;
		sl.data = static_cast<const char *>(sentinel);
		sl.ends = nullptr;
		expect(SHMKV_TYPE_STRLIST, shmkv_get_strlist(db, k, kl, &sl));
		if (type != SHMKV_TYPE_STRLIST) {
			EXPECT_EQ(sl.count, 777u);
			EXPECT_EQ((const void *)sl.data, sentinel);
			EXPECT_EQ(sl.ends, nullptr);
		}
		shmkv_value v;
		ASSERT_EQ(shmkv_get(db, k, kl, &v), 0);
		EXPECT_EQ(v.type, type);
		// shmkv_value_strlist is no getter: on SHMKV_ETYPE it leaves an empty list
		sl.count = 777;
		EXPECT_EQ(shmkv_value_strlist(&v, &sl), type == SHMKV_TYPE_STRLIST ? 0 : SHMKV_ETYPE);
		if (type != SHMKV_TYPE_STRLIST) {
			EXPECT_EQ(sl.count, 0u);
			EXPECT_EQ(shmkv_strlist_at(&sl, 0, nullptr), nullptr);
		}
	}
}

TEST_F(Roundtrip, StrlistIteration)
{
	std::vector<std::string> l;
	for (int i = 0; i < 1000; i++)
		l.push_back(std::string((size_t)(i % 7), (char)('a' + i % 26)) + std::to_string(i));
	l.push_back("");
	Builder b;
	ASSERT_TRUE(b.ok());
	ASSERT_EQ(add_strlist(b, "l", l), 0);
	ASSERT_EQ(b.finish(img), 0) << b.error();
	Db db = open_db(img);
	ASSERT_TRUE(db);
	shmkv_strlist sl{};
	ASSERT_EQ(shmkv_get_strlist(db, "l", 1, &sl), 0);
	ASSERT_EQ(shmkv_strlist_count(&sl), l.size());
	for (size_t i = 0; i < l.size(); i++) {
		size_t len = 99;
		const char *s = shmkv_strlist_at(&sl, i, &len);
		ASSERT_NE(s, nullptr);
		EXPECT_EQ(std::string(s, len), l[i]);
		EXPECT_EQ(strlen(s), len) << "NUL-terminated";
		EXPECT_EQ(shmkv_strlist_at(&sl, i, nullptr), s) << "len may be NULL";
	}
	size_t len = 99;
	EXPECT_EQ(shmkv_strlist_at(&sl, l.size(), &len), nullptr);
	EXPECT_EQ(shmkv_strlist_at(&sl, SIZE_MAX, &len), nullptr);
	EXPECT_EQ(len, 99u);
}

struct Rec {
	unsigned type;
	std::string value; // encoded
};

// Builds a mixed image of n records; returns what went in.
std::map<std::string, Rec> build_mixed(const std::string &path, int n, shmkv_build_options o)
{
	std::map<std::string, Rec> want;
	std::mt19937_64 rng(99);
	Builder b(o);
	EXPECT_TRUE(b.ok());
	for (int i = 0; i < n; i++) {
		std::string k = "m" + std::to_string(i) + std::string((size_t)(rng() % 40), 'x');
		Rec r;
		switch (i % 5) {
		case 0: {
			r.type = SHMKV_TYPE_STRING;
			r.value = "value " + std::to_string(rng() % 50); // many duplicates
			EXPECT_EQ(b.str(k, r.value), 0);
			break;
		}
		case 1: {
			int64_t v = (int64_t)rng();
			r.type = SHMKV_TYPE_I64;
			r.value.assign(reinterpret_cast<const char *>(&v), 8);
			EXPECT_EQ(b.i64(k, v), 0);
			break;
		}
		case 2: {
			std::vector<float> f((size_t)(rng() % 100), (float)(rng() % 3));
			r.type = SHMKV_TYPE_F32LIST;
			r.value.assign(reinterpret_cast<const char *>(f.data()), f.size() * 4);
			EXPECT_EQ(shmkv_builder_add_f32list(b, k.data(), k.size(), f.data(), f.size()), 0);
			break;
		}
		case 3: {
			std::vector<std::string> l((size_t)(rng() % 5), "s" + std::to_string(rng() % 4));
			r.type = SHMKV_TYPE_STRLIST;
			r.value = encode_strlist(l);
			EXPECT_EQ(add_strlist(b, k, l), 0);
			break;
		}
		default: {
			std::string bytes((size_t)(rng() % 300), (char)rng());
			r.type = SHMKV_TYPE_BYTES;
			r.value = bytes;
			EXPECT_EQ(shmkv_builder_add_bytes(b, k.data(), k.size(), bytes.data(), bytes.size()),
				  0);
			break;
		}
		}
		want[k] = r;
	}
	EXPECT_EQ(b.finish(path), 0) << b.error();
	return want;
}

TEST_F(Roundtrip, IterationExactlyOnce)
{
	const auto want = build_mixed(img, 20000, test_options());
	Db db = open_db(img, SHMKV_OPEN_DEEP);
	ASSERT_TRUE(db);
	ASSERT_EQ(db.hdr()->entry_count, want.size());
	std::set<std::string> seen;
	shmkv_iter it;
	shmkv_iter_init(db, &it);
	const void *k = nullptr;
	size_t kl = 0;
	shmkv_value v;
	int err;
	while ((err = shmkv_iter_next(&it, &k, &kl, &v)) == 0) {
		std::string key = sv(k, kl);
		ASSERT_TRUE(seen.insert(key).second) << "key returned twice: " << key;
		auto w = want.find(key);
		ASSERT_NE(w, want.end()) << "unknown key " << key;
		EXPECT_EQ(v.type, w->second.type) << key;
		EXPECT_TRUE(sv(v.data, v.size) == w->second.value) << key;
		// the iterator's value is the lookup's value
		shmkv_value g;
		ASSERT_EQ(shmkv_get(db, k, kl, &g), 0);
		EXPECT_EQ(g.data, v.data);
	}
	EXPECT_EQ(err, SHMKV_EEND);
	EXPECT_EQ(seen.size(), want.size());
	EXPECT_EQ(shmkv_iter_next(&it, &k, &kl, &v), SHMKV_EEND);
}

TEST_F(Roundtrip, Determinism)
{
	std::string img2 = dir.file("t2.shmkv");
	build_mixed(img, 5000, test_options());
	build_mixed(img2, 5000, test_options());
	std::string a = read_file(img), b = read_file(img2);
	ASSERT_GT(a.size(), 0u);
	EXPECT_TRUE(a == b) << "two builds of the same records differ";
	EXPECT_EQ(a.size() % SHMKV_FILE_ALIGN, 0u);
	// the seed is honoured (and changes the image)
	shmkv_build_options o = test_options();
	o.seed = 12345;
	build_mixed(img2, 5000, o);
	Db db = open_db(img2, SHMKV_OPEN_DEEP);
	ASSERT_TRUE(db);
	EXPECT_EQ(db.hdr()->hash_seed, 12345u);
	EXPECT_FALSE(read_file(img2) == a);
}

TEST_F(Roundtrip, SourceDateEpoch)
{
	const char *saved = getenv("SOURCE_DATE_EPOCH");
	std::string saved_s = saved ? saved : "";
	shmkv_build_options o;
	setenv("SOURCE_DATE_EPOCH", "1234567890", 1);
	ASSERT_EQ(shmkv_build_options_init(&o), 0);
	EXPECT_EQ(o.created, 1234567890);
	{
		Builder b(o);
		ASSERT_TRUE(b.ok());
		ASSERT_EQ(b.str("a", "b"), 0);
		ASSERT_EQ(b.finish(img), 0) << b.error();
		Db db = open_db(img);
		ASSERT_TRUE(db);
		EXPECT_EQ(db.hdr()->created_unix, 1234567890);
	}
	setenv("SOURCE_DATE_EPOCH", "12abc", 1);
	EXPECT_EQ(shmkv_build_options_init(&o), SHMKV_EINPUT);
	unsetenv("SOURCE_DATE_EPOCH");
	ASSERT_EQ(shmkv_build_options_init(&o), 0);
	EXPECT_LE(std::llabs(o.created - (int64_t)time(nullptr)), 5);
	if (saved)
		setenv("SOURCE_DATE_EPOCH", saved_s.c_str(), 1);
}

TEST_F(Roundtrip, DefaultsAndHeaderFields)
{
	shmkv_build_options o;
	unsetenv("SOURCE_DATE_EPOCH");
	ASSERT_EQ(shmkv_build_options_init(&o), 0);
	EXPECT_EQ(o.seed, SHMKV_DEFAULT_SEED);
	EXPECT_EQ(o.dedup, 1);
	EXPECT_EQ(o.on_duplicate, SHMKV_DUP_ERROR);
	EXPECT_EQ(o.load_factor, 0.0); // the format's default
	EXPECT_EQ(o.buckets, 0u);
	EXPECT_EQ(o.hash_bits, 64u);
	EXPECT_STREQ(o.name, "");
	o.created = 42;
	snprintf(o.name, sizeof o.name, "%s", "features-v7");
	Builder b(o);
	ASSERT_TRUE(b.ok());
	for (int i = 0; i < 1000; i++) {
		ASSERT_EQ(b.i64("k" + std::to_string(i), i), 0);
	}
	shmkv_build_stats st;
	ASSERT_EQ(b.finish(img, &st), 0) << b.error();
	Db db = open_db(img, SHMKV_OPEN_DEEP);
	ASSERT_TRUE(db);
	const shmkv_image_header *h = db.hdr();
	EXPECT_EQ(memcmp(h->magic, SHMKV_MAGIC, 8), 0);
	EXPECT_EQ(h->format_version, SHMKV_FORMAT_VERSION);
	EXPECT_EQ(h->header_size, SHMKV_HEADER_SIZE);
	EXPECT_EQ(h->layout_hash, SHMKV_LAYOUT_HASH);
	EXPECT_EQ(h->bucket_slots, SHMKV_BUCKET_BYTES);
	EXPECT_EQ(h->hash_bits, 64u);
	EXPECT_EQ(h->hash_seed, SHMKV_DEFAULT_SEED);
	EXPECT_EQ(h->created_unix, 42);
	EXPECT_STREQ(h->name, "features-v7");
	EXPECT_EQ(h->builder_version, (uint32_t)(SHMKV_VERSION_MAJOR << 16 | SHMKV_VERSION_MINOR << 8 |
						 SHMKV_VERSION_PATCH));
	EXPECT_EQ(h->file_size, read_file(img).size());
	EXPECT_EQ(h->section_count, 3u);
	// the default load factor: record bytes / bucket bytes
	EXPECT_LE(st.load_factor, SHMKV_DEFAULT_LOAD_FACTOR + 1e-9);
	EXPECT_GT(st.load_factor, 0.0);
	EXPECT_EQ(st.entries, h->entry_count);
	EXPECT_EQ(st.bucket_count, h->bucket_count);
	EXPECT_EQ(st.max_probe, h->max_probe);
	EXPECT_EQ(st.image_bytes, h->file_size);
	EXPECT_EQ(st.index_bytes, h->sections[0].size);
	EXPECT_EQ(st.entries_bytes, h->sections[1].size);
	EXPECT_EQ(st.values_bytes, h->sections[2].size);
	for (unsigned i = 0; i < 3; i++) {
		EXPECT_EQ(h->sections[i].kind, i + 1);
	}
}

TEST_F(Roundtrip, DedupOnByDefault)
{
	const std::string shared(1000, 's');
	std::string img_off = dir.file("nodedup.shmkv");
	for (int dedup = 1; dedup >= 0; dedup--) {
		SCOPED_TRACE(dedup ? "dedup on" : "dedup off");
		shmkv_build_options o = test_options();
		if (!dedup)
			o.dedup = 0;
		Builder b(o);
		ASSERT_TRUE(b.ok());
		for (int i = 0; i < 500; i++) {
			ASSERT_EQ(b.str("same" + std::to_string(i), shared), 0);
			ASSERT_EQ(b.str("diff" + std::to_string(i), shared + std::to_string(i)), 0);
		}
		shmkv_build_stats st;
		ASSERT_EQ(b.finish(dedup ? img : img_off, &st), 0) << b.error();
		Db db = open_db(dedup ? img : img_off, SHMKV_OPEN_DEEP);
		ASSERT_TRUE(db);
		const shmkv_image_header *h = db.hdr();
		shmkv_value v1, v2, d1;
		ASSERT_EQ(shmkv_get(db, "same1", 5, &v1), 0);
		ASSERT_EQ(shmkv_get(db, "same2", 5, &v2), 0);
		ASSERT_EQ(shmkv_get(db, "diff1", 5, &d1), 0);
		EXPECT_EQ(sv(v1.data, v1.size), shared);
		EXPECT_EQ(sv(v2.data, v2.size), shared);
		EXPECT_EQ(d1.shared, 0u);
		EXPECT_EQ(st.value_bytes_logical, h->value_bytes_logical);
		EXPECT_GE(h->value_bytes_logical, 1000u * 1000u);
		if (dedup) {
			EXPECT_TRUE(h->flags & SHMKV_HFLAG_DEDUP);
			EXPECT_EQ(v1.shared, 1u);
			EXPECT_EQ(v1.data, v2.data) << "one copy of the shared value";
			EXPECT_EQ(h->dedup_values, 1u);
			EXPECT_EQ(h->dedup_refs, 500u);
			EXPECT_GE(h->dedup_saved_bytes, 499u * 1000u - 500u * 16u);
			EXPECT_GT(h->sections[2].size, 0u);
			EXPECT_EQ(st.dedup_values, h->dedup_values);
			EXPECT_EQ(st.dedup_refs, h->dedup_refs);
			EXPECT_EQ(st.dedup_saved_bytes, h->dedup_saved_bytes);
			EXPECT_LT(h->file_size, 1000u * 1000u) << "500 copies were not stored";
		} else {
			EXPECT_FALSE(h->flags & SHMKV_HFLAG_DEDUP);
			EXPECT_EQ(v1.shared, 0u);
			EXPECT_NE(v1.data, v2.data);
			EXPECT_EQ(h->dedup_values, 0u);
			EXPECT_EQ(h->dedup_refs, 0u);
			EXPECT_EQ(h->dedup_saved_bytes, 0u);
			EXPECT_GT(h->file_size, 1000u * 1000u);
		}
	}
	Db on = open_db(img), off = open_db(img_off);
	ASSERT_TRUE(on && off);
	EXPECT_EQ(on.hdr()->value_bytes_logical, off.hdr()->value_bytes_logical);
	// saved bytes are what the sections shrank by (give or take alignment)
	uint64_t sec_on = on.hdr()->sections[1].size + on.hdr()->sections[2].size;
	uint64_t sec_off = off.hdr()->sections[1].size + off.hdr()->sections[2].size;
	printf("entries+values: %" PRIu64 " bytes shared, %" PRIu64 " not; saved_bytes %" PRIu64 "\n",
	       sec_on, sec_off, on.hdr()->dedup_saved_bytes);
	// (within the 8-byte reference and alignment each sharing entry still stores)
	EXPECT_NEAR((double)(sec_off - sec_on), (double)on.hdr()->dedup_saved_bytes,
		    16.0 * (double)on.hdr()->dedup_refs);
}

// shmkv_get_batch returns exactly what shmkv_get returns, key by key: hits,
// misses, over-long keys, and (hash_bits 2) keys far from home and tags
// shared by many keys; batch sizes around the group size.
TEST_F(Roundtrip, BatchMatchesGet)
{
	for (unsigned bits : {64u, 2u}) {
		SCOPED_TRACE("hash_bits " + std::to_string(bits));
		shmkv_build_options o = test_options();
		o.hash_bits = bits;
		Builder b(o);
		ASSERT_TRUE(b.ok());
		const int n = 2000;
		for (int i = 0; i < n; i++)
			ASSERT_EQ(b.str("b" + std::to_string(i), "v" + std::to_string(i % 300)), 0);
		ASSERT_EQ(b.finish(img), 0) << b.error();
		Db db = open_db(img, SHMKV_OPEN_DEEP);
		ASSERT_TRUE(db);
		std::mt19937_64 rng(bits);
		std::vector<std::string> qs;
		for (int i = 0; i < 3000; i++) {
			switch (rng() % 4) {
			case 0: qs.push_back("miss" + std::to_string(i)); break;
			default: qs.push_back("b" + std::to_string(rng() % n)); break;
			}
		}
		qs[5] = std::string(SHMKV_MAX_KEY_LEN + 1, 'x');
		qs[6] = "";
		std::vector<shmkv_key> keys;
		for (const std::string &q : qs)
			keys.push_back(shmkv_key{q.data(), q.size()});
		for (size_t len : {(size_t)0, (size_t)1, (size_t)15, (size_t)16, (size_t)17,
				   (size_t)SHMKV_BATCH_GROUP * 3 + 5, keys.size()}) {
			SCOPED_TRACE("batch of " + std::to_string(len));
			std::vector<shmkv_value> vals(len + 1);
			std::vector<int> errs(len + 1, 12345);
			size_t found = shmkv_get_batch(db, keys.data(), len, vals.data(), errs.data());
			EXPECT_EQ(errs[len], 12345) << "wrote past n";
			size_t want_found = 0;
			for (size_t i = 0; i < len; i++) {
				shmkv_value v;
				int e = shmkv_get(db, keys[i].data, keys[i].len, &v);
				ASSERT_EQ(errs[i], e) << "key " << i;
				if (e == 0) {
					want_found++;
					EXPECT_EQ(vals[i].data, v.data) << "key " << i;
					EXPECT_EQ(vals[i].type, v.type);
					EXPECT_EQ(vals[i].size, v.size);
					EXPECT_EQ(vals[i].count, v.count);
					EXPECT_EQ(vals[i].shared, v.shared);
				}
			}
			EXPECT_EQ(found, want_found);
		}
	}
}

// 10M entries key_%d -> val_%d (SHMKV_TEST_BIG_N overrides): a sample of
// lookups, a full iteration that sees every index exactly once, verify.
TEST(RoundtripBig, TenMillion)
{
	const int64_t n = big_n();
	TempDir dir;
	std::string img = dir.file("big.shmkv");
	{
		Builder b;
		ASSERT_TRUE(b.ok());
		char k[32], v[32];
		for (int64_t i = 0; i < n; i++) {
			int kl = snprintf(k, sizeof k, "key_%" PRId64, i);
			int vl = snprintf(v, sizeof v, "val_%" PRId64, i);
			int err = shmkv_builder_add_str(b, k, (size_t)kl, v, (size_t)vl);
			ASSERT_EQ(err, 0) << k << ": " << b.error();
		}
		shmkv_build_stats st;
		ASSERT_EQ(b.finish(img, &st), 0) << b.error();
		EXPECT_EQ(st.entries, (uint64_t)n);
		printf("%" PRId64 " entries: %.1f MB image, %" PRIu64 " buckets, max_probe %u, "
		       "finish %.2f s\n", n, st.image_bytes / 1e6, st.bucket_count, st.max_probe,
		       st.seconds);
	}
	Db db = open_db(img);
	ASSERT_TRUE(db);
	ASSERT_EQ(db.hdr()->entry_count, (uint64_t)n);
	std::mt19937_64 rng(7);
	char k[32], v[32];
	for (int s = 0; s < 100000; s++) {
		int64_t i = (int64_t)(rng() % (uint64_t)n);
		int kl = snprintf(k, sizeof k, "key_%" PRId64, i);
		int vl = snprintf(v, sizeof v, "val_%" PRId64, i);
		const char *got = nullptr;
		size_t gl = 0;
		ASSERT_EQ(shmkv_get_str(db, k, (size_t)kl, &got, &gl), 0) << k;
		ASSERT_EQ(std::string(got, gl), std::string(v, (size_t)vl));
		kl = snprintf(k, sizeof k, "key_%" PRId64, i + n);
		shmkv_value val;
		ASSERT_EQ(shmkv_get(db, k, (size_t)kl, &val), SHMKV_ENOTFOUND) << k;
	}
	std::vector<uint8_t> seen((size_t)n);
	shmkv_iter it;
	shmkv_iter_init(db, &it);
	const void *key = nullptr;
	size_t klen = 0;
	shmkv_value val;
	int64_t count = 0;
	int err;
	while ((err = shmkv_iter_next(&it, &key, &klen, &val)) == 0) {
		const char *kp = static_cast<const char *>(key);
		const char *vp = static_cast<const char *>(val.data);
		ASSERT_TRUE(klen > 4 && memcmp(kp, "key_", 4) == 0);
		ASSERT_TRUE(val.size == klen && memcmp(vp, "val_", 4) == 0 &&
			    memcmp(kp + 4, vp + 4, klen - 4) == 0)
			<< sv(kp, klen) << " -> " << sv(vp, val.size);
		int64_t idx = 0;
		for (size_t j = 4; j < klen; j++)
			idx = idx * 10 + (kp[j] - '0');
		ASSERT_TRUE(idx >= 0 && idx < n) << sv(kp, klen);
		ASSERT_EQ(seen[(size_t)idx], 0) << "key returned twice: " << sv(kp, klen);
		seen[(size_t)idx] = 1;
		count++;
	}
	EXPECT_EQ(err, SHMKV_EEND);
	EXPECT_EQ(count, n);
	EXPECT_EQ(verify_msg(db), "");
}

// Kilobytes of the mapping that holds addr mapped by huge pages (PMDs), from
// /proc/self/smaps; -1 when no mapping of this process holds addr.
long pmd_kb(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	if (!f)
		return -1;
	char line[512];
	bool in = false, seen = false;
	long kb = 0;
	uintptr_t a = (uintptr_t)addr;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		long v;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			in = a >= lo && a < hi;
			seen = seen || in;
		} else if (in && (sscanf(line, "ShmemPmdMapped: %ld kB", &v) == 1 ||
				  sscanf(line, "FilePmdMapped: %ld kB", &v) == 1)) {
			kb += v;
		}
	}
	fclose(f);
	return seen ? kb : -1;
}

// Whether this kernel collapses a 2 MiB-aligned mapping of a tmpfs file into
// a huge page on MADV_COLLAPSE (Linux 6.1+; not seen under qemu-user, which
// writes /proc/self/smaps itself, with no huge page counts).
std::string collapse_unsupported(const std::string &dir)
{
	std::string path = dir + "/shmkv-collapse-probe";
	const size_t huge = (size_t)2 << 20;
	std::string why;
	int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return path + ": " + strerror(errno);
	unlink(path.c_str());
	if (ftruncate(fd, (off_t)huge) != 0) {
		close(fd);
		return "ftruncate: " + std::string(strerror(errno));
	}
	uint8_t *r = (uint8_t *)mmap(nullptr, 2 * huge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *a = (uint8_t *)(((uintptr_t)r + huge - 1) & ~(uintptr_t)(huge - 1));
	void *m = mmap(a, huge, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		munmap(r, 2 * huge);
		return "mmap: " + std::string(strerror(errno));
	}
	memset(m, 1, huge);
	if (!emulator().empty())
		why = emulator() + " fakes /proc/self/smaps, with no huge page counts";
	else if (madvise(m, huge, 25 /* MADV_COLLAPSE */) != 0)
		why = "MADV_COLLAPSE: " + std::string(strerror(errno));
	else if (pmd_kb(m) <= 0)
		why = "MADV_COLLAPSE succeeded but /proc/self/smaps shows no huge page mapping";
	munmap(r, 2 * huge);
	return why;
}

// An image of key_i -> val_i for i in [0, n) at img.
static void build_kv(const std::string &img, int n)
{
	Builder b;
	ASSERT_TRUE(b.ok());
	for (int i = 0; i < n; i++)
		ASSERT_EQ(b.str("key_" + std::to_string(i), "val_" + std::to_string(i)), 0);
	ASSERT_EQ(b.finish(img), 0) << b.error();
}

// SHMKV_OPEN_HUGEPAGES: an image on tmpfs is mapped at a 2 MiB-aligned
// address and collapsed into huge pages; lookups see the same data.
TEST(Open, HugePages)
{
	const std::string dir = "/dev/shm";
	if (access(dir.c_str(), W_OK) != 0)
		GTEST_SKIP() << dir << " is not writable here";
	std::string img = dir + "/shmkv-open-huge-" + std::to_string(getpid()) + ".shmkv";
	const int n = 200000; // about 8 MiB: several huge pages
	ASSERT_NO_FATAL_FAILURE(build_kv(img, n));
	shmkv *raw = nullptr;
	EXPECT_EQ(shmkv_open_file(img.c_str(), SHMKV_OPEN_HUGEPAGES << 1, &raw), -EINVAL);
	Db db = open_db(img, SHMKV_OPEN_POPULATE | SHMKV_OPEN_HUGEPAGES);
	unlink(img.c_str()); // the mapping keeps the file
	ASSERT_TRUE(db);
	const uint8_t *base = (const uint8_t *)shmkv_header(db);
	EXPECT_EQ((uintptr_t)base % ((uintptr_t)2 << 20), 0u) << "image not mapped 2 MiB-aligned";
	for (int i = 0; i < n; i += 997)
		EXPECT_EQ(get_str(db, "key_" + std::to_string(i)), "val_" + std::to_string(i));
	EXPECT_EQ(verify_msg(db), "");
	std::string why = collapse_unsupported(dir);
	if (!why.empty())
		GTEST_SKIP() << "huge pages not checked: " << why;
	EXPECT_GE(pmd_kb(base), 2048) << "no part of the image is mapped by huge pages";
}

// Drops path's pages from the page cache, written back first (the kernel
// keeps those a mapping still holds: none here).
static void evict(const std::string &path)
{
	int fd = open(path.c_str(), O_RDONLY);
	ASSERT_GE(fd, 0) << path << ": " << strerror(errno);
	EXPECT_EQ(fsync(fd), 0);
	EXPECT_EQ(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
}

// SHMKV_OPEN_POPULATE prefaults a cold image after the MADV_HUGEPAGE advice,
// not before it (MAP_POPULATE at mmap did): where the kernel reads a file
// opened without it into 2 MiB folios (ext4 and other filesystems with
// large folios, transparent huge pages not "never"), it does so with it
// too, and the mapping has 2 MiB entries. Skipped where the open without it
// gets none.
TEST(Open, PopulateAfterHugePageAdvice)
{
	if (!emulator().empty())
		GTEST_SKIP() << "smaps under " << emulator() << " is the emulator's";
	TempDir dir;
	std::string img = dir.file("cold.shmkv");
	const int n = 200000; // about 8 MiB: several huge pages
	ASSERT_NO_FATAL_FAILURE(build_kv(img, n));
	long kb[2] = {-1, -1}; // without, with SHMKV_OPEN_POPULATE
	for (int pop = 0; pop < 2; pop++) {
		evict(img);
		Db db = open_db(img, pop ? SHMKV_OPEN_POPULATE : 0);
		ASSERT_TRUE(db);
		const void *base = shmkv_header(db);
		kb[pop] = pmd_kb(base);
		for (int i = 0; i < n; i += 997)
			EXPECT_EQ(get_str(db, "key_" + std::to_string(i)), "val_" + std::to_string(i));
	}
	if (kb[0] <= 0)
		GTEST_SKIP() << dir.path() << ": a cold image opened here gets no 2 MiB mapping ("
			     << kb[0] << " kB; transparent huge pages off, or no large folios)";
	EXPECT_GE(kb[1], kb[0] / 2) << "with SHMKV_OPEN_POPULATE " << kb[1] << " kB of the image on 2 MiB entries, without it " << kb[0];
}

} // namespace
