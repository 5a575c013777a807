// probe_variants_test: checkasm for the bucket directory compare
// (lib/shmkv/probe.h; FORMAT.md §6). A bucket's u16 directory dir[i] =
// (tag << 7 | off) & 0xffff at +8 of its 128 bytes, n entries (0..16),
// compared on bits 7..15: every variant this build can compile (scalar,
// sse2, avx2, neon, and the dispatching shmkv__match) must return exactly
// what shmkv__match_scalar returns, whatever the bytes past n hold: all
// entries the query's, each single one, lookalike bits, random buckets.
// The AVX2 variant is always compiled on x86-64 (probe_avx2.cc, -mavx2) and
// run when the CPU has it. Also the displaced-key filter (D and the 48
// filter bits) against a direct model, and the hot path's key compare
// without a call (shmkv__key_eq2) against memcmp, and the text check every
// get of a string makes (shmkv__ascii) against a byte at a time. DISABLED_Bench times the
// variants:
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
unsigned probe_test_match_avx2(const uint8_t *bk, unsigned n, uint64_t tag);
#endif

namespace {

using match_fn = unsigned (*)(const uint8_t *, unsigned, uint64_t);

unsigned match_dispatch(const uint8_t *b, unsigned n, uint64_t t)
{
	return shmkv__match(b, n, t);
}

std::vector<std::pair<const char *, match_fn>> variants()
{
	std::vector<std::pair<const char *, match_fn>> v;
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

bool check(const uint8_t *bk, uint64_t tag)
{
	for (unsigned n = 0; n <= SHMKV_MAX_RECORDS; n++) {
		unsigned want = shmkv__match_scalar(bk, n, tag);
		for (const auto &v : variants()) {
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

TEST(ProbeVariants, ScalarReference)
{
	alignas(128) uint8_t bk[128] = {};
	const uint16_t d0 = dir_entry(7, 40), d5 = dir_entry(7 | 0x3e00, 127), d15 = dir_entry(8, 7);
	const uint16_t d9 = dir_entry(6, 0x7f); // off bits all set, tag bits 6: no match for 7
	memcpy(bk + 8, &d0, 2);
	memcpy(bk + 8 + 2 * 5, &d5, 2);
	memcpy(bk + 8 + 2 * 9, &d9, 2);
	memcpy(bk + 8 + 2 * 15, &d15, 2);
	// only the tag's low 9 bits are stored: 7 | 0x3e00 is a candidate for 7
	EXPECT_EQ(shmkv__match_scalar(bk, 16, 7), (1u << 0) | (1u << 5));
	EXPECT_EQ(shmkv__match_scalar(bk, 16, 0xfe07), (1u << 0) | (1u << 5));
	EXPECT_EQ(shmkv__match_scalar(bk, 5, 7), 1u);
	EXPECT_EQ(shmkv__match_scalar(bk, 16, 8), 1u << 15);
	EXPECT_EQ(shmkv__match_scalar(bk, 15, 8), 0u);
	EXPECT_EQ(shmkv__match_scalar(bk, 16, 6), 1u << 9);
	EXPECT_EQ(shmkv__match_scalar(bk, 16, 6 ^ 0x100), 0u); // tag bit 8: dir bit 15
	EXPECT_TRUE(check(bk, 7));
	EXPECT_TRUE(check(bk, 6));
}

TEST(ProbeVariants, TagDirectory)
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
		ASSERT_TRUE(check(bk, tag));
		EXPECT_EQ(shmkv__match_scalar(bk, 16, tag), 0xffffu);
		for (unsigned bit = 0; bit < 16; bit++) {
			const uint64_t t = tag ^ (UINT64_C(1) << bit) ? tag ^ (UINT64_C(1) << bit) : 1;
			ASSERT_TRUE(check(bk, t));
			if (t != 1) {
				EXPECT_EQ(shmkv__match_scalar(bk, 16, t), bit < 9 ? 0u : 0xffffu);
			}
		}
		for (unsigned j = 0; j < 16; j++) {
			memset(bk, 0, sizeof bk);
			const uint16_t d = dir_entry(tag, j * 7 + 8);
			memcpy(bk + 8 + 2 * j, &d, 2);
			ASSERT_TRUE(check(bk, tag));
			// a tag whose low 9 bits are 0 (0x8000) is a candidate at every zero entry
			EXPECT_EQ(shmkv__match_scalar(bk, 16, tag), tag & 0x1ff ? 1u << j : 0xffffu);
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
		ASSERT_TRUE(check(bk, tag));
	}
}

TEST(ProbeVariants, ListCompiled)
{
	std::string names = "scalar";
	for (const auto &v : variants())
		names += std::string(" ") + v.first;
	printf("variants tested: %s; lookups use %s\n", names.c_str(), shmkv_vector_name());
	static const char *const tiers[] = {"scalar", "sse2", "avx2", "neon"};
	EXPECT_STREQ(shmkv_vector_name(), tiers[SHMKV_VECTOR]);
#if defined(__x86_64__)
	EXPECT_TRUE(SHMKV_HAVE_SSE2); // part of the x86-64 baseline
#endif
}

// An empty bucket (every byte 0) matches nothing for a tag whose low 9
// bits are not 0; one whose low 9 bits are 0 is a candidate at every entry
// below n (the key compare decides: FORMAT.md §6).
TEST(ProbeVariants, EmptyBucket)
{
	alignas(128) uint8_t bk[128] = {};
	for (uint64_t tag = 1; tag <= 0xffff; tag++) {
		const unsigned want = tag & 0x1ff ? 0u : 0xffffu;
		ASSERT_EQ(shmkv__match_scalar(bk, 16, tag), want) << tag;
	}
	for (uint64_t tag : {UINT64_C(1), UINT64_C(0x200), UINT64_C(0x8000), UINT64_C(0xffff)})
		ASSERT_TRUE(check(bk, tag));
}

// Entries whose offset bits carry the query tag's pattern, neighbours that
// differ from it in one tag bit, and the bytes around the directory (head,
// records) set to the same pattern: catches a variant that compares the
// wrong lane, too few bits or the offset bits.
TEST(ProbeVariants, LookalikeBits)
{
	alignas(128) uint8_t bk[128];
	for (uint64_t tag : {UINT64_C(1), UINT64_C(0xffff), UINT64_C(0x8001), UINT64_C(0x00ff),
			     UINT64_C(0x01ff)}) {
		for (unsigned i = 0; i < 128; i++)
			bk[i] = (uint8_t)(i % 2 ? tag >> 1 : tag << 7);
		for (unsigned j = 0; j < 16; j++) {
			const uint16_t d = (uint16_t)(tag & 0x7f); // the tag in the offset bits
			memcpy(bk + 8 + 2 * j, &d, 2);
		}
		ASSERT_TRUE(check(bk, tag));
		for (unsigned bit = 0; bit < 9; bit++) {
			for (unsigned j = 0; j < 16; j++) {
				const uint16_t d = dir_entry(j % 2 ? tag : tag ^ (UINT64_C(1) << bit),
							     (unsigned)(tag & 0x7f));
				memcpy(bk + 8 + 2 * j, &d, 2);
			}
			ASSERT_TRUE(check(bk, tag));
			EXPECT_EQ(shmkv__match_scalar(bk, 16, tag), 0xaaaau) << bit;
		}
	}
}

// The displaced-key filter (FORMAT.md §6): byte +1 of a home bucket is D,
// the largest displacement of keys homed there (255: up to max_probe),
// bytes +2..+7 a 48-bit filter of their tags, bit i at bit i % 8 of byte
// 2 + i / 8. Checked against a direct model for every tag.
TEST(ProbeFilter, Displaced)
{
	std::mt19937_64 rng(11);
	alignas(128) uint8_t bk[128] = {};
	for (uint64_t t = 1; t <= 0xffff; t++)
		ASSERT_EQ(shmkv__displaced(bk, t, 1000), 0u) << "no displacement recorded";
	for (int rep = 0; rep < 50; rep++) {
		for (auto &x : bk)
			x = (uint8_t)rng(); // a full directory and records: the filter ignores them
		uint64_t filter = 0;
		for (int k = 0; k < 1 + rep % 9; k++)
			filter |= UINT64_C(1) << shmkv__filter_index(rng() % 0xffff + 1);
		const unsigned disp = rep % 5 == 0 ? SHMKV_DISPLACEMENT_MAX
			: rep % 7 == 0 ? 0 : 1 + (unsigned)(rng() % 254);
		bk[1] = (uint8_t)disp;
		for (unsigned j = 0; j < 6; j++)
			bk[2 + j] = (uint8_t)(filter >> (8 * j));
		const uint32_t max_probe = 300;
		for (uint64_t t = 1; t <= 0xffff; t++) {
			const bool maybe = (filter >> shmkv__filter_index(t)) & 1;
			const uint64_t want = !maybe || !disp ? 0
				: disp == SHMKV_DISPLACEMENT_MAX ? max_probe : disp;
			ASSERT_EQ(shmkv__displaced(bk, t, max_probe), want) << "tag " << t;
			ASSERT_EQ(shmkv_bucket_displacement(bk, t, max_probe), want) << "tag " << t;
		}
	}
}

// Not a test: run with --gtest_also_run_disabled_tests --gtest_filter='*Bench*'.
TEST(ProbeVariants, DISABLED_Bench)
{
	std::mt19937_64 rng(3);
	struct alignas(128) Bk {
		uint8_t b[128];
	};
	std::vector<Bk> bs(4096);
	std::vector<uint64_t> tags(bs.size());
	std::vector<unsigned> ns(bs.size());
	for (size_t i = 0; i < bs.size(); i++) {
		tags[i] = rng() % 0xffff + 1;
		ns[i] = (unsigned)(rng() % 17);
		for (auto &x : bs[i].b)
			x = (uint8_t)rng();
	}
	std::vector<std::pair<const char *, match_fn>> vs = variants();
	vs.insert(vs.begin(), {"scalar", shmkv__match_scalar});
	for (const auto &v : vs) {
		unsigned sink = 0;
		const int rounds = 2000;
		auto t0 = std::chrono::steady_clock::now();
		for (int r = 0; r < rounds; r++)
			for (size_t i = 0; i < bs.size(); i++)
				sink += v.second(bs[i].b, ns[i], tags[i]);
		double ns_per = std::chrono::duration<double, std::nano>(
					std::chrono::steady_clock::now() - t0).count() /
				(rounds * (double)bs.size());
		printf("%-8s %6.2f ns/match (sink %u)\n", v.first, ns_per, sink);
	}
}

} // namespace

// shmkv__key_eq2 (the hot path's key compare, no call) against memcmp for
// every inline key length, equal and with one byte changed at each position.
TEST(ProbeVariants, HotKeyCompareMatchesMemcmp)
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

// shmkv__ascii (every get of a string checks its bytes, FORMAT.md §8)
// against a byte at a time, for every length up to 80 (the no-loop forms
// of 4..7 and 8..16 bytes, the loop past 16): all ASCII, then one high
// bit at each position. Each value sits alone in a buffer of exactly its
// size (ASan: no read past it) and the test fills the bytes after it, in
// a second buffer, with high bits, so that a read past the end would
// also change the answer.
TEST(ProbeVariants, AsciiCheckMatchesBytes)
{
	std::mt19937_64 rng(11);
	for (size_t n = 0; n <= 80; n++) {
		std::vector<uint8_t> pad(n + 16, 0xff);
		uint8_t *a = new uint8_t[n ? n : 1];
		for (size_t i = 0; i < n; i++)
			pad[i] = a[i] = (uint8_t)(rng() & 0x7f);
		ASSERT_TRUE(shmkv__ascii(a, n)) << n;
		ASSERT_TRUE(shmkv__ascii(pad.data(), n)) << n << " with high bytes after it";
		for (size_t at = 0; at < n; at++) {
			for (uint8_t high : {0x80, 0xc3, 0xff}) {
				const uint8_t was = a[at];
				a[at] = pad[at] = high;
				ASSERT_FALSE(shmkv__ascii(a, n)) << n << " at " << at;
				ASSERT_FALSE(shmkv__ascii(pad.data(), n)) << n << " at " << at;
				a[at] = pad[at] = was;
			}
		}
		delete[] a;
	}
}
