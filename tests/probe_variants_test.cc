// probe_variants_test: checkasm for the bucket tag match (lib/shmkv/probe.h).
// Every variant this build can compile (scalar, sse2, avx2, neon, and the
// dispatching shmkv__match) must return exactly what shmkv__match_scalar
// returns, on random buckets and on the edge cases: all empty, all full, all
// the same tag, tags 1 and 0xffff, offsets whose low bits look like tags.
// The AVX2 variant is always compiled on x86-64 (probe_avx2.cc, -mavx2) and
// run when the CPU has it. Also the v2 hot path's key compare without a call
// (shmkv__key_eq2) against memcmp. DISABLED_Bench times them:
//   probe_variants_test --gtest_also_run_disabled_tests --gtest_filter='*Bench*'
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <shmkv.h>

#ifndef PROBE_TEST_AVX2
#define PROBE_TEST_AVX2 0
#endif

#if PROBE_TEST_AVX2
unsigned probe_test_match_avx2(const uint64_t *bucket, uint64_t tag);
unsigned probe_test_match2_avx2(const uint8_t *bk, unsigned n, uint64_t tag);
#endif

namespace {

using match_fn = unsigned (*)(const uint64_t *, uint64_t);

struct Variant {
	const char *name;
	match_fn fn;
};

unsigned match_dispatch(const uint64_t *b, uint64_t t)
{
	return shmkv__match(b, t);
}

std::vector<Variant> variants()
{
	std::vector<Variant> v;
#if SHMKV_HAVE_SSE2
	v.push_back({"sse2", shmkv__match_sse2});
#endif
#if SHMKV_HAVE_AVX2
	v.push_back({"avx2", shmkv__match_avx2});
#elif PROBE_TEST_AVX2
	if (__builtin_cpu_supports("avx2"))
		v.push_back({"avx2", probe_test_match_avx2});
#endif
#if SHMKV_HAVE_NEON
	v.push_back({"neon", shmkv__match_neon});
#endif
	v.push_back({"dispatch", match_dispatch});
	return v;
}

struct alignas(64) Bucket {
	uint64_t s[SHMKV_BUCKET_SLOTS];
};

uint64_t slot(uint64_t tag, uint64_t off)
{
	return (tag << SHMKV_SLOT_TAG_SHIFT) | (off & SHMKV_SLOT_OFF_MASK);
}

std::string describe(const Bucket &b, uint64_t tag)
{
	char buf[64];
	std::string s = "tag " + std::to_string(tag) + ", bucket {";
	for (unsigned j = 0; j < SHMKV_BUCKET_SLOTS; j++) {
		snprintf(buf, sizeof buf, "%s0x%016" PRIx64, j ? ", " : "", b.s[j]);
		s += buf;
	}
	return s + "}";
}

// Compares every variant with the scalar reference; returns false on the first mismatch.
bool check(const Bucket &b, uint64_t tag)
{
	unsigned want = shmkv__match_scalar(b.s, tag);
	for (const Variant &v : variants()) {
		unsigned got = v.fn(b.s, tag);
		if (got != want) {
			ADD_FAILURE() << v.name << " returned 0x" << std::hex << got << ", scalar 0x"
				      << want << std::dec << " for " << describe(b, tag);
			return false;
		}
	}
	return true;
}

TEST(ProbeVariants, ListCompiled)
{
	std::string names = "scalar";
	for (const Variant &v : variants())
		names += std::string(" ") + v.name;
	printf("variants tested: %s; lookups use %s\n", names.c_str(), shmkv_vector_name());
	static const char *const tiers[] = {"scalar", "sse2", "avx2", "neon"};
	EXPECT_STREQ(shmkv_vector_name(), tiers[SHMKV_VECTOR]);
#if defined(__x86_64__)
	EXPECT_TRUE(SHMKV_HAVE_SSE2); // part of the x86-64 baseline
#endif
}

TEST(ProbeVariants, ScalarReference)
{
	Bucket b{};
	EXPECT_EQ(shmkv__match_scalar(b.s, 1), 0u);
	b.s[0] = slot(7, 123);
	b.s[5] = slot(7, 1);
	b.s[6] = slot(8, 7);
	EXPECT_EQ(shmkv__match_scalar(b.s, 7), (1u << 0) | (1u << 5));
	EXPECT_EQ(shmkv__match_scalar(b.s, 8), 1u << 6);
}

TEST(ProbeVariants, AllEmpty)
{
	Bucket b{};
	for (uint64_t tag : {UINT64_C(1), UINT64_C(2), UINT64_C(0x8000), UINT64_C(0xfffe),
			     UINT64_C(0xffff)})
		ASSERT_TRUE(check(b, tag));
	for (uint64_t tag = 1; tag <= 0xffff; tag++) {
		ASSERT_EQ(shmkv__match_scalar(b.s, tag), 0u);
	}
}

TEST(ProbeVariants, AllFullSameTag)
{
	for (uint64_t tag : {UINT64_C(1), UINT64_C(0x00ff), UINT64_C(0x0100), UINT64_C(0x7fff),
			     UINT64_C(0x8000), UINT64_C(0xffff)}) {
		Bucket b;
		for (unsigned j = 0; j < SHMKV_BUCKET_SLOTS; j++)
			b.s[j] = slot(tag, j + 1);
		ASSERT_EQ(shmkv__match_scalar(b.s, tag), 0xffu);
		ASSERT_TRUE(check(b, tag));
		for (uint64_t other : {tag ^ 1, tag ^ 0x100, tag ^ 0x8000, (tag % 0xffff) + 1}) {
			if (other) {
				ASSERT_TRUE(check(b, other));
			}
		}
		// largest offsets: every low bit set
		for (unsigned j = 0; j < SHMKV_BUCKET_SLOTS; j++)
			b.s[j] = slot(tag, SHMKV_SLOT_OFF_MASK);
		ASSERT_TRUE(check(b, tag));
		ASSERT_TRUE(check(b, tag == 1 ? 0xffff : 1));
	}
}

TEST(ProbeVariants, EachSingleSlot)
{
	for (uint64_t tag : {UINT64_C(1), UINT64_C(0xffff), UINT64_C(0x1234)})
		for (unsigned j = 0; j < SHMKV_BUCKET_SLOTS; j++) {
			Bucket b{};
			b.s[j] = slot(tag, 0x42);
			ASSERT_EQ(shmkv__match_scalar(b.s, tag), 1u << j);
			ASSERT_TRUE(check(b, tag));
			// every other slot full with another tag
			for (unsigned k = 0; k < SHMKV_BUCKET_SLOTS; k++)
				if (k != j)
					b.s[k] = slot(tag ^ 0x0101, 0x42);
			ASSERT_TRUE(check(b, tag));
		}
}

// Slots whose offset bits (or a neighbouring lane) carry the query tag's bit
// pattern, and tags differing in a single bit: catches variants that compare
// the wrong lane or too few bits.
TEST(ProbeVariants, LookalikeBits)
{
	for (uint64_t tag : {UINT64_C(1), UINT64_C(0xffff), UINT64_C(0x8001), UINT64_C(0x00ff)}) {
		Bucket b;
		for (unsigned j = 0; j < SHMKV_BUCKET_SLOTS; j++)
			b.s[j] = slot(0, tag) | (tag << 32) | (tag << 16); // tag 0, lookalike low bits
		ASSERT_TRUE(check(b, tag));
		for (unsigned bit = 0; bit < 16; bit++) {
			for (unsigned j = 0; j < SHMKV_BUCKET_SLOTS; j++)
				b.s[j] = slot(j % 2 ? tag : tag ^ (UINT64_C(1) << bit),
					      (tag << 32) | tag);
			ASSERT_TRUE(check(b, tag));
		}
	}
}

TEST(ProbeVariants, InOrderFilledBuckets)
{
	std::mt19937_64 rng(1);
	for (unsigned filled = 0; filled <= SHMKV_BUCKET_SLOTS; filled++)
		for (int rep = 0; rep < 200; rep++) {
			uint64_t tag = rng() % 0xffff + 1;
			Bucket b{};
			for (unsigned j = 0; j < filled; j++)
				b.s[j] = slot(rng() % 4 ? rng() % 0xffff + 1 : tag, rng() >> 16);
			ASSERT_TRUE(check(b, tag));
		}
}

TEST(ProbeVariants, RandomBuckets)
{
	std::mt19937_64 rng(0x5eed);
	for (int it = 0; it < 200000; it++) {
		uint64_t r = rng();
		uint64_t tag;
		switch (r % 8) {
		case 0: tag = 1; break;
		case 1: tag = 0xffff; break;
		default: tag = (r >> 8) % 0xffff + 1; break;
		}
		Bucket b;
		for (unsigned j = 0; j < SHMKV_BUCKET_SLOTS; j++) {
			uint64_t x = rng();
			uint64_t off = rng() & SHMKV_SLOT_OFF_MASK;
			switch (x % 7) {
			case 0: b.s[j] = 0; break;
			case 1: b.s[j] = slot(tag, off); break;
			case 2: b.s[j] = slot(tag ^ (UINT64_C(1) << ((x >> 8) % 16)), off); break;
			case 3: b.s[j] = slot((x >> 8) & 0xffff, off); break; // includes tag 0
			case 4: b.s[j] = slot((x >> 8) & 0xffff, tag | tag << 16 | tag << 32); break;
			case 5: b.s[j] = x; break;                              // any bits at all
			default: b.s[j] = slot(tag, 0); break;
			}
		}
		ASSERT_TRUE(check(b, tag)) << "iteration " << it;
	}
}

// The displaced-key filter (format.h): slot 7's meta byte is the largest
// displacement of keys homed here (255: up to max_probe), the meta bytes of
// slots 0..6 a 56-bit filter of their tags. Checked against a direct model.
TEST(ProbeFilter, Displaced)
{
	std::mt19937_64 rng(11);
	Bucket b{};
	for (uint64_t t = 1; t <= 0xffff; t++)
		ASSERT_EQ(shmkv__displaced(b.s, t, 1000), 0u) << "no displacement recorded";
	for (int rep = 0; rep < 50; rep++) {
		for (unsigned j = 0; j < SHMKV_BUCKET_SLOTS; j++)
			b.s[j] = slot(rng() % 0xffff + 1, rng()); // full bucket, meta bytes 0
		uint64_t filter = 0;
		for (int k = 0; k < 1 + rep % 9; k++)
			filter |= UINT64_C(1) << shmkv__filter_index(rng() % 0xffff + 1);
		unsigned disp = rep % 5 == 0 ? SHMKV_DISPLACEMENT_MAX : 1 + (unsigned)(rng() % 254);
		for (unsigned j = 0; j < SHMKV_BUCKET_SLOTS - 1; j++)
			b.s[j] |= ((filter >> (8 * j)) & 0xff) << SHMKV_SLOT_META_SHIFT;
		b.s[SHMKV_BUCKET_SLOTS - 1] |= (uint64_t)disp << SHMKV_SLOT_META_SHIFT;
		const uint32_t max_probe = 300;
		for (uint64_t t = 1; t <= 0xffff; t++) {
			bool maybe = (filter >> shmkv__filter_index(t)) & 1;
			uint64_t want = !maybe ? 0 : disp == SHMKV_DISPLACEMENT_MAX ? max_probe : disp;
			ASSERT_EQ(shmkv__displaced(b.s, t, max_probe), want) << "tag " << t;
		}
		// the meta bytes do not disturb the tag match
		for (unsigned j = 0; j < SHMKV_BUCKET_SLOTS; j++)
			ASSERT_TRUE(check(b, b.s[j] >> SHMKV_SLOT_TAG_SHIFT));
	}
}

// Not a test: run with --gtest_also_run_disabled_tests --gtest_filter='*Bench*'.
TEST(ProbeVariants, DISABLED_Bench)
{
	std::mt19937_64 rng(3);
	std::vector<Bucket> bs(4096);
	std::vector<uint64_t> tags(bs.size());
	for (size_t i = 0; i < bs.size(); i++) {
		tags[i] = rng() % 0xffff + 1;
		for (unsigned j = 0; j < SHMKV_BUCKET_SLOTS; j++)
			bs[i].s[j] = rng() % 8 ? slot(rng() % 0xffff + 1, rng()) : slot(tags[i], 8);
	}
	std::vector<Variant> vs = variants();
	vs.insert(vs.begin(), Variant{"scalar", shmkv__match_scalar});
	for (const Variant &v : vs) {
		unsigned sink = 0;
		const int rounds = 2000;
		auto t0 = std::chrono::steady_clock::now();
		for (int r = 0; r < rounds; r++)
			for (size_t i = 0; i < bs.size(); i++)
				sink += v.fn(bs[i].s, tags[i]);
		double ns = std::chrono::duration<double, std::nano>(
				    std::chrono::steady_clock::now() - t0).count() /
			    (rounds * (double)bs.size());
		printf("%-8s %6.2f ns/match (sink %u)\n", v.name, ns, sink);
	}
}

// ---- format v2's directory compare (lib/shmkv/v2.h, shmkv__match2) ----
// u16 dir = (tag << 7 | off) & 0xffff at +8 of a 128-byte bucket, n of them
// (0..16), compared on bits 7..15; every variant returns what
// shmkv__match2_scalar returns, whatever the bytes past n hold.
using match2_fn = unsigned (*)(const uint8_t *, unsigned, uint64_t);

unsigned match2_dispatch(const uint8_t *b, unsigned n, uint64_t t)
{
	return shmkv__match2(b, n, t);
}

std::vector<std::pair<const char *, match2_fn>> variants2()
{
	std::vector<std::pair<const char *, match2_fn>> v;
#if SHMKV_HAVE_SSE2
	v.push_back({"sse2", shmkv__match2_sse2});
#endif
#if SHMKV_HAVE_AVX2
	v.push_back({"avx2", shmkv__match2_avx2});
#elif PROBE_TEST_AVX2
	if (__builtin_cpu_supports("avx2"))
		v.push_back({"avx2", probe_test_match2_avx2});
#endif
#if SHMKV_HAVE_NEON
	v.push_back({"neon", shmkv__match2_neon});
#endif
	v.push_back({"dispatch", match2_dispatch});
	return v;
}

bool check2(const uint8_t *bk, uint64_t tag)
{
	for (unsigned n = 0; n <= SHMKV_V2_MAX_RECORDS; n++) {
		unsigned want = shmkv__match2_scalar(bk, n, tag);
		for (const auto &v : variants2()) {
			unsigned got = v.second(bk, n, tag);
			if (got != want) {
				ADD_FAILURE() << v.first << " returned 0x" << std::hex << got
					      << ", scalar 0x" << want << " for tag " << tag
					      << std::dec << ", n " << n;
				return false;
			}
		}
	}
	return true;
}

uint16_t dir_entry(uint64_t tag, unsigned off)
{
	return (uint16_t)((tag << 7 | off) & 0xffff);
}

TEST(ProbeVariants, V2ScalarReference)
{
	alignas(128) uint8_t bk[128] = {};
	const uint16_t d0 = dir_entry(7, 40), d5 = dir_entry(7 | 0x3e00, 127), d15 = dir_entry(8, 7);
	const uint16_t d9 = dir_entry(6, 0x7f); // off bits all set, tag bits 6: no match for 7
	memcpy(bk + 8, &d0, 2);
	memcpy(bk + 8 + 2 * 5, &d5, 2);
	memcpy(bk + 8 + 2 * 9, &d9, 2);
	memcpy(bk + 8 + 2 * 15, &d15, 2);
	// only the tag's low 9 bits are stored: 7 | 0x3e00 is a candidate for 7
	EXPECT_EQ(shmkv__match2_scalar(bk, 16, 7), (1u << 0) | (1u << 5));
	EXPECT_EQ(shmkv__match2_scalar(bk, 16, 0xfe07), (1u << 0) | (1u << 5));
	EXPECT_EQ(shmkv__match2_scalar(bk, 5, 7), 1u);
	EXPECT_EQ(shmkv__match2_scalar(bk, 16, 8), 1u << 15);
	EXPECT_EQ(shmkv__match2_scalar(bk, 15, 8), 0u);
	EXPECT_EQ(shmkv__match2_scalar(bk, 16, 6), 1u << 9);
	EXPECT_EQ(shmkv__match2_scalar(bk, 16, 6 ^ 0x100), 0u); // tag bit 8: dir bit 15
	EXPECT_TRUE(check2(bk, 7));
	EXPECT_TRUE(check2(bk, 6));
}

TEST(ProbeVariants, V2TagDirectory)
{
	std::mt19937_64 rng(2);
	alignas(128) uint8_t bk[128];
	for (uint64_t tag : {UINT64_C(1), UINT64_C(0x00ff), UINT64_C(0x0100), UINT64_C(0x7fff),
			     UINT64_C(0x8000), UINT64_C(0xffff)}) {
		// every entry the query's (offsets varied), then each single one,
		// then lookalikes: one bit of the query flipped (bits 0..8 miss,
		// 9..15 are not stored and still match)
		for (unsigned j = 0; j < 16; j++) {
			const uint16_t d = dir_entry(tag, (unsigned)(rng() & 0x7f));
			memcpy(bk + 8 + 2 * j, &d, 2);
		}
		ASSERT_TRUE(check2(bk, tag));
		EXPECT_EQ(shmkv__match2_scalar(bk, 16, tag), 0xffffu);
		for (unsigned bit = 0; bit < 16; bit++) {
			const uint64_t t = tag ^ (UINT64_C(1) << bit) ? tag ^ (UINT64_C(1) << bit) : 1;
			ASSERT_TRUE(check2(bk, t));
			if (t != 1) {
				EXPECT_EQ(shmkv__match2_scalar(bk, 16, t), bit < 9 ? 0u : 0xffffu);
			}
		}
		for (unsigned j = 0; j < 16; j++) {
			memset(bk, 0, sizeof bk);
			const uint16_t d = dir_entry(tag, j * 7 + 8);
			memcpy(bk + 8 + 2 * j, &d, 2);
			ASSERT_TRUE(check2(bk, tag));
			// a tag whose low 9 bits are 0 (0x8000) is a candidate at every zero entry
			EXPECT_EQ(shmkv__match2_scalar(bk, 16, tag), tag & 0x1ff ? 1u << j : 0xffffu);
		}
	}
	for (int rep = 0; rep < 20000; rep++) {
		for (auto &x : bk)
			x = (uint8_t)rng();
		uint64_t tag = rng() % 0xffff + 1;
		for (unsigned j = 0; j < 16; j++)
			if (rng() % 4 == 0) {
				const uint16_t d = dir_entry(tag, (unsigned)(rng() & 0x7f));
				memcpy(bk + 8 + 2 * j, &d, 2);
			}
		ASSERT_TRUE(check2(bk, tag));
	}
}

} // namespace

// shmkv__key_eq2 (the hot v2 path's key compare, no call) against memcmp for
// every inline key length, equal and with one byte changed at each position.
TEST(ProbeVariants, V2HotKeyCompareMatchesMemcmp)
{
	std::mt19937_64 rng(5);
	uint8_t a[256], b[256];
	for (size_t n = 0; n <= 255; n++) {
		for (size_t i = 0; i < n; i++)
			a[i] = b[i] = (uint8_t)rng();
		ASSERT_TRUE(shmkv__key_eq2(a, b, n)) << n;
		for (size_t at = 0; at < n; at++) {
			b[at] ^= (uint8_t)(1u << (rng() % 8));
			ASSERT_FALSE(shmkv__key_eq2(a, b, n)) << n << " at " << at;
			ASSERT_EQ(memcmp(a, b, n) == 0, shmkv__key_eq2(a, b, n));
			b[at] = a[at];
		}
	}
}
