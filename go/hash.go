package shmkv

import (
	"math/bits"

	"github.com/zeebo/xxh3"
)

// The key hash and what the lookup derives from it (lib/FORMAT.md §5):
// the home bucket and the tag.

// hash is the key hash: XXH3-64 with the image's seed, folded to hash_bits
// bits (and spread by hashMul) when hash_bits is below 64.
func (im *image) hash(key []byte) uint64 {
	if im.shortHash(len(key)) {
		return xxh3Len9To16(key, im.seed)
	}
	h := xxh3.HashSeed(key, im.seed)
	if im.hashBits < 64 {
		h = (h & (1<<im.hashBits - 1)) * hashMul
	}
	return h
}

// shortHash: the hash of an n-byte key is xxh3Len9To16(key, seed): 9 to
// 16 bytes, and no fold (hash_bits 64). The hot paths (get, getBatch) test
// it and call xxh3Len9To16 themselves, inlined, for hash's call would
// cost them more than the hash of such a key (neither inlines into the
// other within the compiler's budget).
func (im *image) shortHash(n int) bool { return n > 8 && n <= 16 && im.hashBits >= 64 }

// xxh3Len9To16 is XXH3_64bits_withSeed of a key of 9 to 16 bytes (xxHash's
// XXH3_len_9to16_64b, written out so that it inlines; TestXXH3Len9To16
// holds it to the library bit for bit): the key's first and last 8 bytes
// keyed with bytes 24..55 of XXH3's default secret and the seed, a
// 128-bit multiply folded, XXH3's avalanche.
func xxh3Len9To16(key []byte, seed uint64) uint64 {
	const (
		secret24, secret32 = 0x1f67b3b7a4a44072, 0x78e5c0cc4ee679cb
		secret40, secret48 = 0x2172ffcc7dd05a82, 0x8e2443f7744608b8
	)
	n := len(key)
	lo := le.Uint64(key) ^ (secret24 ^ secret32 + seed)
	hi := le.Uint64(key[n-8:]) ^ (secret40 ^ secret48 - seed)
	mh, ml := bits.Mul64(lo, hi)
	h := uint64(n) + bits.ReverseBytes64(lo) + hi + (mh ^ ml)
	h ^= h >> 37
	h *= 0x165667919e3779f9
	return h ^ h>>32
}

// tagOf is the key's 16-bit tag: the hash's low 16 bits, 0 made 1.
func tagOf(h uint64) uint64 {
	t := h & 0xFFFF
	return t + (t-1)>>63 // 0 becomes 1, without a branch
}

// home is the key's home bucket: the high 64 bits of h * bucket_count.
func (im *image) home(h uint64) uint64 {
	hi, _ := bits.Mul64(h, im.bucketCount)
	return hi
}

var errKeyLen = errf(ErrKeyLen, "keys are at most 65535 bytes")
