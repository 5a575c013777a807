package shmkv

import "math/bits"

// The v2 hot path of a get: one function that reads each bucket through a
// *[128]byte, so that the offsets it takes from a bucket are bounded by the
// array (a 7-bit record offset, a checked end) and the checks left are
// those on lengths read from the image; no call on the way to a hit or a
// miss of a short key. It answers only what it is sure of: a well-formed
// inline record of the key whose value has its type's shape, or an OUT
// record whose entry holds the key and a well-formed value (a hit), or no
// candidate record of the key anywhere the lookup must look (a miss).
// Anything else — an expiring record among the candidates, a malformed
// one, an entry outside ENTRIES, a value of the wrong shape, a count over
// 16 — goes to the general lookup (locate2, recValue), which gives every
// error, so the answers are the general lookup's (TestFastV2Agrees).

// laneMask[k] keeps the first k lanes of a directory word's matches.
var laneMask = [5]uint64{0, 0xffff, 0xffff_ffff, 0xffff_ffff_ffff, ^uint64(0)}

// keyEq: the key_len bytes at bk[kp:] are key's (kp+len(key) <= 128, the
// record's bounds checked): two 8-byte words for a key of 8 to 16 bytes,
// else a compare of the bytes.
func keyEq(bk *[v2Bucket]byte, kp uint64, key []byte) bool {
	n := uint64(len(key))
	if n >= 8 && n <= 16 && kp <= v2Bucket-n {
		a := le.Uint64(key) ^ le.Uint64(bk[kp:])
		z := le.Uint64(key[n-8:]) ^ le.Uint64(bk[kp+n-8:])
		return a|z == 0
	}
	return string(bk[kp:kp+n]) == string(key)
}

// get2Fast is the v2 get of key with hash h (FORMAT.md §17.5's lookup):
// the home bucket, then the buckets its D and filter announce for the key's
// tag; the general lookup where the fast path is not sure. In an image with
// the EXPIRY flag only an expiring candidate record goes there (it is not
// inline-without-expiry): every other key is answered here without the
// clock, as lib's shmkv__get2_fast does; *now is the caller's clock slot
// (0 until read: once per call, GetBatch's included).
// b and bk: the key's home bucket and im.bucket(b) (homeBucket; getBatch2
// keeps them from the key's request). A single get requests the home's
// second line and both lines of the next bucket before it calls this
// (prefetchNext: §17.5's reader policy, lib's SHMKV_V2_PREFETCH_NEXT 2; a
// batch requests its buckets itself): a call in here would have this
// function save its arguments on every get.
func (im *image) get2Fast(key []byte, h, b uint64, bk *[v2Bucket]byte, now *int64) (Value, error) {
	tag := tagOf(h)
	want := dirTag(tag) * lanes16
	klen := uint64(len(key))
	var d uint64 // buckets left to probe after this one, once home is read
	for home := true; ; home = false {
		n := uint64(bk[0])
		if n > v2MaxRecords {
			break
		}
		de := dirEnd(n)
		for w := uint64(0); 4*w < n; w++ {
			x := le.Uint64(bk[v2Head+8*(w&3):])&(v2DirTagMask*lanes16) ^ want // dirMatches
			m := ^((x&lows16 + lows16) | x) & highs16
			m &= laneMask[min(n-4*w, 4)] // lanes past count
			for ; m != 0; m &= m - 1 {
				i := 4*w + uint64(bits.TrailingZeros64(m)>>4)
				pos := uint64(bk[(v2Head+v2DirBytes*i)&(v2Bucket-1)] & v2DirOffMask)
				kind := bk[pos]
				t := Type(kind) // kind <= 9: inline, no expiry, bits 4 and 5 clear
				if kind > byte(TypeStrList) || t < TypeBytes || pos < de || pos > v2Bucket-recInlineHead {
					if kind != recOut || pos < de || pos > v2Bucket-recOutHead {
						goto slow // expiring, malformed or out of place
					}
					e := recEntry(bk, pos) // OUT, no expiry: the key and value in its entry
					switch im.outKey(e, key) {
					case outOther:
						continue
					case outMatch:
						if v, _, err := im.decodeValue(e); err == nil {
							return v, nil
						}
					}
					goto slow // damage: the general lookup says which
				}
				kl, vlen := uint64(bk[pos+1]), uint64(bk[pos+2])
				kp := pos + recInlineHead
				vp := kp + kl
				if t.aligned8() {
					vp = align8(vp)
				}
				end := vp + vlen + t.nul()
				if end > v2Bucket {
					goto slow
				}
				if kl != klen || !keyEq(bk, kp, key) {
					continue
				}
				v := Value{data: bk[vp : vp+vlen : vp+vlen], typ: t}
				if t <= TypeString {
					if bk[(vp+vlen)&(v2Bucket-1)] != 0 { // the NUL after the value: vp+vlen < end
						goto slow
					}
				} else if v.shape(bk[vp:end], 0) != nil {
					goto slow
				}
				return v, nil
			}
		}
		if home { // does it announce displaced keys of this tag?
			d = uint64(bk[1])
			if d == 0 || !filterHas(bk, tag) {
				return Value{}, ErrNotFound
			}
			if d == 255 || d > im.maxProbe {
				d = im.maxProbe
			}
		}
		if d == 0 {
			return Value{}, ErrNotFound
		}
		d--
		if b++; b == im.bucketCount {
			b = 0
		}
		bk = im.bucket(b)
	}
slow:
	return im.get2Slow(key, h, now)
}
