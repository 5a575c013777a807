package shmkv

import (
	"bytes"
	"math/bits"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// Format v1's index and lookup (lib/FORMAT.md §5, §6, §12.1): buckets of 8
// slot words, tags, the displaced-key record. Everything else an image holds
// (header, sections, entries, values) is read by the version-independent
// files; v2's index is one more file beside this one.

const (
	maxKeyLen  = 65535
	slotOffset = 1<<40 - 1
	hashMul    = 0x9E3779B97F4A7C15
)

// hash is §5's key hash, with hash_bits applied.
func (im *image) hash(key []byte) uint64 {
	var h uint64
	if n := len(key); n > 8 && n <= 16 {
		h = xxh3Len9To16(key, im.seed)
	} else {
		h = xxh3.HashSeed(key, im.seed)
	}
	if im.hashBits < 64 {
		h = (h & (1<<im.hashBits - 1)) * hashMul
	}
	return h
}

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

func tagOf(h uint64) uint64 {
	t := h & 0xFFFF
	return t + (t-1)>>63 // 0 becomes 1, without a branch
}

func (im *image) home(h uint64) uint64 {
	hi, _ := bits.Mul64(h, im.bucketCount)
	return hi
}

func (im *image) slot(b uint64, j int) uint64 {
	return le.Uint64(im.index[b*64+uint64(j)*8:])
}

// slotEntry: the slot's entry, if the key could be it. A tag-matched slot
// whose entry header lies outside ENTRIES is ErrCorrupt; an entry of
// another key_len is no match; one of the key's length whose key bytes run
// past ENTRIES is ErrCorrupt (§12.1's first rows).
func (im *image) slotEntry(w uint64, key []byte, b uint64, j int) (uint64, bool, error) {
	off := (w & slotOffset) << 3
	if off < im.entOff || off+8 > im.entEnd {
		return 0, false, errf(ErrCorrupt, "bucket %d slot %d: entry offset %d is outside ENTRIES [%d, %d)", b, j, off, im.entOff, im.entEnd)
	}
	klen := uint64(le.Uint16(im.b[off+2:]))
	if klen != uint64(len(key)) {
		return 0, false, nil
	}
	if klen > im.entEnd-off-8 {
		return 0, false, errf(ErrCorrupt, "bucket %d slot %d: the %d-byte key of the entry at %d runs past ENTRIES' end %d", b, j, klen, off, im.entEnd)
	}
	return off, bytes.Equal(im.b[off+8:off+8+klen], key), nil
}

// findIn looks for key among bucket b's slots with this tag.
func (im *image) findIn(b, tag uint64, key []byte) (uint64, bool, error) {
	bk := im.bucketWords(b)
	for j := 0; j < 8; j++ {
		w := bk[j]
		if w>>48 != tag {
			continue
		}
		off, ok, err := im.slotEntry(w, key, b, j)
		if ok || err != nil {
			return off, ok, err
		}
	}
	return 0, false, nil
}

// bucketWords is bucket b's 8 slot words in place: one bounds check, not
// eight. The index is 64-aligned in the image (§4) and the image is
// mapped page-aligned (or, from Open, 8-aligned in the heap), and the host
// is little-endian (the format's byte order), so the words read as is.
func (im *image) bucketWords(b uint64) *[8]uint64 {
	return (*[8]uint64)(unsafe.Pointer(unsafe.SliceData(im.index[b*64 : b*64+64])))
}

// find is §6's lookup: the offset of key's entry, ErrNotFound, or
// ErrCorrupt where a followed offset is out of bounds.
func (im *image) find(key []byte) (uint64, error) {
	if len(key) > maxKeyLen {
		return 0, errKeyLen
	}
	return im.findHashed(key, im.hash(key))
}

// findHashed is find with the key's hash already computed (GetBatch).
func (im *image) findHashed(key []byte, h uint64) (uint64, error) {
	tag, b := tagOf(h), im.home(h)
	if off, ok, err := im.findIn(b, tag, key); ok || err != nil {
		return off, err
	}
	return im.findDisplaced(b, tag, key)
}

func (im *image) findDisplaced(b, tag uint64, key []byte) (uint64, error) {
	meta := func(j int) uint64 { return im.slot(b, j) >> 40 & 0xFF }
	d := meta(7)
	if d == 0 {
		return 0, ErrNotFound
	}
	fi := (tag * 56) >> 16
	if meta(int(fi>>3))>>(fi&7)&1 == 0 {
		return 0, ErrNotFound
	}
	n := d
	if d == 255 || d > im.maxProbe { // 255: up to max_probe; a larger D is capped
		n = im.maxProbe
	}
	for ; n > 0; n-- {
		if b++; b == im.bucketCount {
			b = 0
		}
		if off, ok, err := im.findIn(b, tag, key); ok || err != nil {
			return off, err
		}
	}
	return 0, ErrNotFound
}

var errKeyLen = errf(ErrKeyLen, "keys are at most 65535 bytes")

// get: the value of key (§12.1; v2: §17.5, index_v2.go).
func (im *image) get(key []byte) (Value, error) {
	if im.version == 2 {
		if len(key) > maxKeyLen {
			return Value{}, errKeyLen
		}
		h := im.hash(key)
		b, bk := im.homeBucket(h)
		prefetchNext(bk)
		now := int64(0)
		return im.get2Fast(key, h, b, bk, &now)
	}
	off, err := im.find(key)
	if err != nil {
		return Value{}, err
	}
	v, _, err := im.decodeValue(off)
	return v, err
}
