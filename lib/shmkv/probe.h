/* shmkv/probe.h - key hash, home bucket, tag, and the bucket tag match.
 *
 * Part of the header-only reader; include <shmkv.h>, not this file.
 * A bucket is 8 u64 slots in one 64-byte cache line; each full slot holds a
 * 16-bit tag in its top bits. shmkv__match_*() returns a mask with bit j set
 * when slot j's tag equals the key's. Every variant returns exactly what the
 * scalar reference returns (tests/probe_variants checks it on random tables).
 */
#ifndef SHMKV_PROBE_H
#define SHMKV_PROBE_H

#include <stdint.h>
#include <stddef.h>

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
/* every call inside inlined (shmkv__probe_on) */
#define SHMKV__FLATTEN __attribute__((flatten))
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

/* The key hash of an image with hash_bits (FORMAT.md §5). hash_bits < 64
 * exists only for tests: it keeps 2^bits distinct hashes, spread over
 * buckets and tags, to force collisions. (The lookup hot path calls
 * shmkv__hash64 and leaves such images to its checked path.) */
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

/* Tag: low 16 bits of h, never 0 so an empty slot (all zero) never matches. */
static inline uint64_t shmkv__tag(uint64_t h)
{
	uint64_t t = h & 0xffffu;
	return t + (t == 0);
}

/* A slot's meta byte (see format.h). */
static inline unsigned shmkv__slot_meta(uint64_t slot)
{
	return (unsigned)(slot >> SHMKV_SLOT_META_SHIFT) & 0xffu;
}

/* Index of a tag in a bucket's 56-bit displaced-key filter. */
static inline unsigned shmkv__filter_index(uint64_t tag)
{
	return (unsigned)((tag * SHMKV_FILTER_BITS) >> 16);
}

/* May a key with this tag, homed in this bucket, live in a later bucket?
 * Returns the number of later buckets to search (0: no). */
static inline uint64_t shmkv__displaced(const uint64_t *bucket, uint64_t tag, uint32_t max_probe)
{
	unsigned d = shmkv__slot_meta(bucket[SHMKV_BUCKET_SLOTS - 1]);
	if (SHMKV__LIKELY(d == 0))
		return 0;
	unsigned fi = shmkv__filter_index(tag);
	if (!((bucket[fi >> 3] >> (SHMKV_SLOT_META_SHIFT + (fi & 7))) & 1))
		return 0;
	return d == SHMKV_DISPLACEMENT_MAX ? max_probe : d;
}

static inline unsigned shmkv__match_scalar(const uint64_t *bucket, uint64_t tag)
{
	unsigned m = 0;
	for (unsigned j = 0; j < SHMKV_BUCKET_SLOTS; j++)
		m |= (unsigned)((bucket[j] >> SHMKV_SLOT_TAG_SHIFT) == tag) << j;
	return m;
}

#if SHMKV_HAVE_SSE2
/* Gather the high u32 of every slot (tag16 | meta8 | offset bits) into two
 * registers, compare 16-bit lanes against the tag in the high half, then let
 * two signed saturating packs carry each high half's verdict (its sign) down
 * to one byte per slot: 12 instructions for 8 slots. */
static inline unsigned shmkv__match_sse2(const uint64_t *bucket, uint64_t tag)
{
	const __m128i *b = (const __m128i *)bucket;
	const __m128i want = _mm_set1_epi32((int)(uint32_t)(tag << 16));
	__m128i hi01 = _mm_castps_si128(_mm_shuffle_ps(_mm_castsi128_ps(_mm_load_si128(b + 0)),
						       _mm_castsi128_ps(_mm_load_si128(b + 1)),
						       _MM_SHUFFLE(3, 1, 3, 1)));
	__m128i hi23 = _mm_castps_si128(_mm_shuffle_ps(_mm_castsi128_ps(_mm_load_si128(b + 2)),
						       _mm_castsi128_ps(_mm_load_si128(b + 3)),
						       _MM_SHUFFLE(3, 1, 3, 1)));
	/* high 16 bits of a lane: 0xffff on a match; low 16 bits: don't care */
	__m128i c01 = _mm_cmpeq_epi16(hi01, want);
	__m128i c23 = _mm_cmpeq_epi16(hi23, want);
	__m128i w = _mm_packs_epi32(c01, c23); /* sign survives saturation */
	return (unsigned)_mm_movemask_epi8(_mm_packs_epi16(w, w)) & 0xffu;
}
#endif

#if SHMKV_HAVE_AVX2
static inline unsigned shmkv__match_avx2(const uint64_t *bucket, uint64_t tag)
{
	const __m256i *b = (const __m256i *)bucket;
	const __m256i keep = _mm256_set1_epi64x((long long)UINT64_C(0xffff000000000000));
	const __m256i want = _mm256_set1_epi64x((long long)(tag << SHMKV_SLOT_TAG_SHIFT));
	__m256i c0 = _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_load_si256(b), keep), want);
	__m256i c1 = _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_load_si256(b + 1), keep), want);
	return (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(c0)) |
	       (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(c1)) << 4;
}
#endif

#if SHMKV_HAVE_NEON
/* Compare the shifted tags, narrow 8 verdicts to 8 bytes, then gather one
 * bit per byte with a multiply (NEON has no movemask). */
static inline unsigned shmkv__match_neon(const uint64_t *bucket, uint64_t tag)
{
	const uint64x2_t t = vdupq_n_u64(tag);
	uint64x2_t e0 = vceqq_u64(vshrq_n_u64(vld1q_u64(bucket + 0), 48), t);
	uint64x2_t e1 = vceqq_u64(vshrq_n_u64(vld1q_u64(bucket + 2), 48), t);
	uint64x2_t e2 = vceqq_u64(vshrq_n_u64(vld1q_u64(bucket + 4), 48), t);
	uint64x2_t e3 = vceqq_u64(vshrq_n_u64(vld1q_u64(bucket + 6), 48), t);
	uint32x4_t n01 = vcombine_u32(vmovn_u64(e0), vmovn_u64(e1));
	uint32x4_t n23 = vcombine_u32(vmovn_u64(e2), vmovn_u64(e3));
	uint8x8_t n = vmovn_u16(vcombine_u16(vmovn_u32(n01), vmovn_u32(n23)));
	uint64_t bytes = vget_lane_u64(vreinterpret_u64_u8(n), 0) & UINT64_C(0x0101010101010101);
	return (unsigned)((bytes * UINT64_C(0x0102040810204080)) >> 56);
}
#endif

static inline unsigned shmkv__match(const uint64_t *bucket, uint64_t tag)
{
#if SHMKV_VECTOR == SHMKV_VECTOR_AVX2
	return shmkv__match_avx2(bucket, tag);
#elif SHMKV_VECTOR == SHMKV_VECTOR_SSE2
	return shmkv__match_sse2(bucket, tag);
#elif SHMKV_VECTOR == SHMKV_VECTOR_NEON
	return shmkv__match_neon(bucket, tag);
#else
	return shmkv__match_scalar(bucket, tag);
#endif
}

static inline const char *shmkv_vector_name(void)
{
	static const char *const names[] = {"scalar", "sse2", "avx2", "neon"};
	return names[SHMKV_VECTOR];
}

#endif /* SHMKV_PROBE_H */
