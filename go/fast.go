package shmkv

import "math/bits"

// getFast is the get of key with hash h (FORMAT.md §6.4's lookup): the
// home bucket, then the buckets its D and filter announce for the key's
// tag (probes). One function, no call on the way to a hit or a miss of a
// short key: each bucket is read through a *[128]byte, so that the offsets
// it takes from a bucket are bounded by the array (a 7-bit record offset, a
// checked end) and the checks left are those on lengths read from the
// image. The record rules are index.go's (dirCandidates, recOff,
// Type.known, inlineSpan, keyEq, outKey) and value.go's (textOK, shape),
// inlined.
//
// It answers only what it is sure of: a well-formed inline record of the
// key without expiry whose value has its type's shape, or an OUT record
// without expiry whose entry holds the key and a well-formed value (a hit),
// or no candidate record of the key anywhere the lookup must look (a miss).
// Anything else — an expiring record among the candidates, a malformed one,
// an entry outside ENTRIES, a value of the wrong shape, a count over 16 —
// goes to the general lookup (getSlow), which gives every error, so the
// answers are the general lookup's (TestFastAgrees). An image without the
// EXPIRY flag has no expiring record: its gets never read the clock. *now
// is the caller's clock slot (0 until read: once per call, GetBatch's
// included).
//
// b and bk: the key's home bucket and im.bucket(b) (homeBucket; getBatch
// keeps them from the key's request).
func (im *image) getFast(key []byte, h, b uint64, bk *[bucketBytes]byte, now *int64) (Value, error) {
	tag := tagOf(h)
	want := dirTag(tag) * lanes16
	klen := uint64(len(key))
	var d uint64 // buckets left to probe after this one, once home is read
	for home := true; ; home = false {
		n := uint64(bk[0])
		if n > maxRecords {
			break
		}
		de := dirEnd(n)
		for w := uint64(0); 4*w < n; w++ {
			for m := dirCandidates(bk, w, n, want); m != 0; m &= m - 1 {
				pos := recOff(bk, 4*w+uint64(bits.TrailingZeros64(m)>>4))
				kind := bk[pos]
				t := Type(kind) // known over the whole kind byte: inline, no expiry
				if !t.known() || pos < de || pos > bucketBytes-recInlineHead {
					if kind != recOut || pos < de || pos > bucketBytes-recOutHead {
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
				vp, end := inlineSpan(bk, pos, pos+recInlineHead, t)
				if end > bucketBytes {
					goto slow
				}
				if uint64(bk[pos+1]) != klen || !keyEq(bk, pos+recInlineHead, key) {
					continue
				}
				vlen := uint64(bk[pos+2])
				v := Value{data: bk[vp : vp+vlen : vp+vlen], typ: t}
				if t.nul() != 0 { // the NUL: vp+vlen < end
					if !textOK(t, v.data, bk[(vp+vlen)&(bucketBytes-1)], bucketASCII(bk, vp, vlen)) {
						goto slow
					}
				} else if v.shape(bk[vp:end], 0) != nil {
					goto slow
				}
				return v, nil
			}
		}
		if home {
			d = im.probes(bk, tag)
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
	return im.getSlow(key, h, now)
}

// bucketASCII: the vlen bytes of a text value at bk[vp:] are ASCII, read
// as at most two words (its NUL follows it in the bucket: vp+vlen < 128,
// and vp >= 8, past the bucket's head): what spares a short string
// utf8.Valid's call. False is no answer (a value longer than 16 bytes, or
// a byte of 0x80 or more: utf8.Valid decides).
func bucketASCII(bk *[bucketBytes]byte, vp, vlen uint64) bool {
	const high = 0x8080808080808080
	if vlen < 8 { // the word that ends at the NUL, the bytes before the value shifted out
		return le.Uint64(bk[vp+vlen-7:])>>(8*(7-vlen))&high == 0
	}
	return vlen <= 16 && (le.Uint64(bk[vp:])|le.Uint64(bk[vp+vlen-8:]))&high == 0
}
