/* shmkv/probe.h - the key hash, home bucket and tag (FORMAT.md §5), and a
 * bucket's directory compare (§6) in scalar, SSE2, AVX2 and NEON variants.
 * Part of the header-only reader; include <shmkv.h>, not this file.
 * Every variant returns exactly what the scalar reference returns
 * (tests/probe_variants checks it on random buckets). */
#ifndef SHMKV_PROBE_H
#define SHMKV_PROBE_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "format.h"

/* Vector tiers. SHMKV_VECTOR picks the one get uses; -DSHMKV_VECTOR=N overrides. */
#define SHMKV_VECTOR_SCALAR 0
#define SHMKV_VECTOR_SSE2 1
#define SHMKV_VECTOR_AVX2 2
#define SHMKV_VECTOR_NEON 3

/* What this target can compile, always 0 or 1. */
#if defined(__SSE2__)
#define SHMKV_HAVE_SSE2 1
#else
#define SHMKV_HAVE_SSE2 0
#endif
#if defined(__AVX2__)
#define SHMKV_HAVE_AVX2 1
#else
#define SHMKV_HAVE_AVX2 0
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#define SHMKV_HAVE_NEON 1
#else
#define SHMKV_HAVE_NEON 0
#endif

#ifndef SHMKV_VECTOR
#if SHMKV_HAVE_AVX2
#define SHMKV_VECTOR SHMKV_VECTOR_AVX2
#elif SHMKV_HAVE_SSE2
#define SHMKV_VECTOR SHMKV_VECTOR_SSE2
#elif SHMKV_HAVE_NEON
#define SHMKV_VECTOR SHMKV_VECTOR_NEON
#else
#define SHMKV_VECTOR SHMKV_VECTOR_SCALAR
#endif
#endif

#if SHMKV_VECTOR == SHMKV_VECTOR_SSE2 && !SHMKV_HAVE_SSE2
#error "SHMKV_VECTOR=1 (SSE2) needs a target with SSE2"
#elif SHMKV_VECTOR == SHMKV_VECTOR_AVX2 && !SHMKV_HAVE_AVX2
#error "SHMKV_VECTOR=2 (AVX2) needs -mavx2"
#elif SHMKV_VECTOR == SHMKV_VECTOR_NEON && !SHMKV_HAVE_NEON
#error "SHMKV_VECTOR=3 (NEON) needs an AArch64 target"
#elif SHMKV_VECTOR < 0 || SHMKV_VECTOR > 3
#error "SHMKV_VECTOR must be 0 (scalar), 1 (sse2), 2 (avx2) or 3 (neon)"
#endif

#if SHMKV_HAVE_SSE2 || SHMKV_HAVE_AVX2
#include <immintrin.h>
#endif
#if SHMKV_HAVE_NEON
#include <arm_neon.h>
#endif

#if defined(__GNUC__)
#define SHMKV__LIKELY(x) __builtin_expect(!!(x), 1)
#define SHMKV__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SHMKV__CTZ(x) ((unsigned)__builtin_ctz(x))
/* The lookup hot path: inlined even where a caller has many call sites. */
#define SHMKV__HOT inline __attribute__((always_inline))
#define SHMKV__COLD __attribute__((noinline, cold))
#else
#error "shmkv needs GCC or Clang builtins"
#endif

__extension__ typedef unsigned __int128 shmkv__u128;

/* 64-bit key hash of a production image (hash_bits 64). */
static SHMKV__HOT uint64_t shmkv__hash64(uint64_t seed, const void *key, size_t len)
{
#if XXH_VERSION_NUMBER >= 800 && XXH_VERSION_NUMBER < 900
	/* Keys of up to 16 bytes go straight to xxhash's own short-input code
	 * (what XXH3_64bits_withSeed runs for them): GCC does not inline the
	 * public entry point, which carries the long-input code too, and the
	 * call is a tenth of a get. Same function, same value: tests/header_test
	 * compares the two for lengths 0..300. */
	if (SHMKV__LIKELY(len <= 16))
		return XXH3_len_0to16_64b((const xxh_u8 *)key, len, XXH3_kSecret, seed);
#endif
	return XXH3_64bits_withSeed(key, len, seed);
}

/* The key hash with hash_bits (FORMAT.md §5; < 64 only in test images,
 * which the hot get leaves to its checked path). */
static SHMKV__HOT uint64_t shmkv__hash(uint64_t seed, unsigned hash_bits, const void *key,
				       size_t len)
{
	uint64_t h = shmkv__hash64(seed, key, len);
	if (SHMKV__UNLIKELY(hash_bits < 64))
		h = (h & ((UINT64_C(1) << hash_bits) - 1)) * UINT64_C(0x9E3779B97F4A7C15);
	return h;
}

/* Home bucket: high bits of h scaled to [0, buckets) (no power-of-two size needed). */
static inline uint64_t shmkv__home(uint64_t h, uint64_t buckets)
{
	return (uint64_t)(((shmkv__u128)h * buckets) >> 64);
}

/* Tag: the low 16 bits of h, 1 when they are 0 (FORMAT.md §5). */
static inline uint64_t shmkv__tag(uint64_t h)
{
	uint64_t t = h & 0xffffu;
	return t + (t == 0);
}

/* Record i's directory entry dir[i] = (tag << 7 | off) & 0xffff, i < 16. */
static inline unsigned shmkv__dir(const uint8_t *bk, unsigned i)
{
	uint16_t d;
	memcpy(&d, bk + SHMKV_BUCKET_HEAD + 2 * i, 2); /* little-endian hosts only */
	return d;
}

/* Record i's offset in its bucket (dir[i] & 0x7f: the low byte's low 7 bits). */
static inline unsigned shmkv__dir_off(const uint8_t *bk, unsigned i)
{
	return bk[SHMKV_BUCKET_HEAD + 2 * i] & SHMKV_DIR_OFF_MASK;
}

/* A tag's directory bits: its low 9 bits at bits 7..15. */
static inline unsigned shmkv__dir_tag(uint64_t tag)
{
	return (unsigned)(tag << SHMKV_DIR_TAG_SHIFT) & SHMKV_DIR_TAG_MASK;
}

/* Bit of a bucket's 48-bit displaced-key filter that a tag sets. */
static inline unsigned shmkv__filter_index(uint64_t tag)
{
	return (unsigned)((tag * SHMKV_FILTER_BITS) >> 16);
}

/* A delta's key filter (FORMAT.md §19.3): the word of h among words, and
 * the three bits of h's bits 16..33 a key sets in it. */
static inline uint64_t shmkv__kf_word(uint64_t h, uint64_t words)
{
	return shmkv__home(h, words);
}

static inline uint64_t shmkv__kf_mask(uint64_t h)
{
	return UINT64_C(1) << ((h >> 16) & 63) | UINT64_C(1) << ((h >> 22) & 63) |
	       UINT64_C(1) << ((h >> 28) & 63);
}

/* How many buckets after home bucket bk a key with this tag may have been
 * displaced to (FORMAT.md §6): 0, D, or max_probe for D = 255. */
static SHMKV__HOT uint64_t shmkv__displaced(const uint8_t *bk, uint64_t tag, uint32_t max_probe)
{
	const unsigned d = bk[1];
	if (SHMKV__LIKELY(d == 0))
		return 0;
	const unsigned fi = shmkv__filter_index(tag);
	if (!((bk[2 + (fi >> 3)] >> (fi & 7)) & 1))
		return 0;
	return d == SHMKV_DISPLACEMENT_MAX ? max_probe : d;
}

/* ---- the directory compare: bit i set when (dir[i] & 0xff80) ==
 * shmkv__dir_tag(tag), i < n; a candidate only (9 tag bits: 1/512 of
 * other keys match too), the key compare decides. n <= 16 (the caller
 * checks). The vector variants load 16 bytes at +8 and at +24 (dir[0..7]
 * and dir[8..15]), inside the bucket whatever n is, AND each lane with
 * 0xff80, and mask the bits at and past n: they return exactly what the
 * scalar reference returns (tests/probe_variants_test). */
static inline unsigned shmkv__match_scalar(const uint8_t *bk, unsigned n, uint64_t tag)
{
	const unsigned want = shmkv__dir_tag(tag);
	unsigned m = 0;
	for (unsigned i = 0; i < n; i++)
		m |= (unsigned)((shmkv__dir(bk, i) & SHMKV_DIR_TAG_MASK) == want) << i;
	return m;
}

static inline unsigned shmkv__match_mask(unsigned m, unsigned n)
{
	return m & ((1u << n) - 1);
}

#if SHMKV_HAVE_SSE2
/* Two 8-lane u16 AND-and-compares; a signed saturating pack carries each
 * lane's verdict (0 or -1) to one byte, and movemask gathers the 16 bits. */
static inline unsigned shmkv__match_sse2(const uint8_t *bk, unsigned n, uint64_t tag)
{
	const __m128i want = _mm_set1_epi16((short)shmkv__dir_tag(tag));
	const __m128i mask = _mm_set1_epi16((short)SHMKV_DIR_TAG_MASK);
	__m128i d0 = _mm_loadu_si128((const __m128i *)(const void *)(bk + 8));
	__m128i d1 = _mm_loadu_si128((const __m128i *)(const void *)(bk + 24));
	__m128i c0 = _mm_cmpeq_epi16(_mm_and_si128(d0, mask), want);
	__m128i c1 = _mm_cmpeq_epi16(_mm_and_si128(d1, mask), want);
	return shmkv__match_mask((unsigned)_mm_movemask_epi8(_mm_packs_epi16(c0, c1)), n);
}
#endif

#if SHMKV_HAVE_AVX2
/* One 16-lane AND-and-compare of the 32 bytes at +8, packed to bytes as in
 * SSE2. */
static inline unsigned shmkv__match_avx2(const uint8_t *bk, unsigned n, uint64_t tag)
{
	const __m256i want = _mm256_set1_epi16((short)shmkv__dir_tag(tag));
	const __m256i mask = _mm256_set1_epi16((short)SHMKV_DIR_TAG_MASK);
	__m256i d = _mm256_loadu_si256((const __m256i *)(const void *)(bk + 8));
	__m256i c = _mm256_cmpeq_epi16(_mm256_and_si256(d, mask), want);
	__m128i w = _mm_packs_epi16(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
	return shmkv__match_mask((unsigned)_mm_movemask_epi8(w), n);
}
#endif

#if SHMKV_HAVE_NEON
/* Two 8-lane AND-and-compares narrowed to bytes, one bit per byte by a
 * weighted horizontal add (NEON has no movemask). */
static inline unsigned shmkv__match_neon(const uint8_t *bk, unsigned n, uint64_t tag)
{
	static const uint8_t w[8] = {1, 2, 4, 8, 16, 32, 64, 128};
	const uint16x8_t t = vdupq_n_u16((uint16_t)shmkv__dir_tag(tag));
	const uint16x8_t mk = vdupq_n_u16((uint16_t)SHMKV_DIR_TAG_MASK);
	const uint8x8_t wt = vld1_u8(w);
	uint16x8_t d0 = vandq_u16(vld1q_u16((const uint16_t *)(const void *)(bk + 8)), mk);
	uint16x8_t d1 = vandq_u16(vld1q_u16((const uint16_t *)(const void *)(bk + 24)), mk);
	uint8x8_t e0 = vmovn_u16(vceqq_u16(d0, t));
	uint8x8_t e1 = vmovn_u16(vceqq_u16(d1, t));
	unsigned m = (unsigned)vaddv_u8(vand_u8(e0, wt)) | (unsigned)vaddv_u8(vand_u8(e1, wt)) << 8;
	return shmkv__match_mask(m, n);
}
#endif

static SHMKV__HOT unsigned shmkv__match(const uint8_t *bk, unsigned n, uint64_t tag)
{
#if SHMKV_VECTOR == SHMKV_VECTOR_AVX2
	return shmkv__match_avx2(bk, n, tag);
#elif SHMKV_VECTOR == SHMKV_VECTOR_SSE2
	return shmkv__match_sse2(bk, n, tag);
#elif SHMKV_VECTOR == SHMKV_VECTOR_NEON
	return shmkv__match_neon(bk, n, tag);
#else
	return shmkv__match_scalar(bk, n, tag);
#endif
}

static inline const char *shmkv_vector_name(void)
{
	static const char *const names[] = {"scalar", "sse2", "avx2", "neon"};
	return names[SHMKV_VECTOR];
}

#endif /* SHMKV_PROBE_H */
