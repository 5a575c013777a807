package shmkv

import "runtime"

// batchGroup is how many keys GetBatch has in flight at once: enough
// independent cache misses to fill the core's line fill buffers (10–12 on
// recent x86) and keep its page walkers busy.
const batchGroup = 16

// GetBatch on a v2 image (getBatch2) runs as a pipeline over blocks of
// pipeBlock keys: a key's home bucket is requested two blocks before its
// lookup, its bucket b+1 (where announced) one block before; pipeRing holds
// their hashes (a power of two, a multiple of pipeBlock, at least three
// blocks).
const (
	pipeBlock = 8
	pipeRing  = 32
)

// GetBatch looks up keys[i] into vals[i] and errs[i] (both at least as long
// as keys), zero-copy like Get. It overlaps the memory reads of a group of
// keys: it hashes the group first (no memory touched but the keys), then
// touches every home bucket in one tight loop, so that their cache and TLB
// misses are in flight together instead of one after another (Go has no
// prefetch instruction: a load whose value is kept alive does the same);
// format v1 then touches each key's first candidate entry the same way;
// then each key is looked up as Get would, its lines in cache by then. Same
// results as Get, key by key.
func (v *View) GetBatch(keys []string, vals []Value, errs []error) {
	if v.released.Load() {
		for i := range keys {
			vals[i], errs[i] = Value{}, ErrClosed
		}
		return
	}
	vals, errs = vals[:len(keys)], errs[:len(keys)]
	im := v.im
	if im.version == 2 {
		im.getBatch2(keys, vals, errs)
		return
	}
	var hs, homes [batchGroup]uint64
	for lo := 0; lo < len(keys); lo += batchGroup {
		group := keys[lo:min(lo+batchGroup, len(keys))]
		im.hashGroup(group, &hs, &homes)
		var sink uint64
		for i := range group { // one load per bucket, nothing between them
			sink += im.bucketWords(homes[i])[0]
		}
		for i := range group { // each first tag match's entry header
			h := hs[i]
			bk, tag := im.bucketWords(homes[i]), tagOf(h)
			for _, w := range bk {
				if w>>48 == tag {
					if off := (w & slotOffset) << 3; off >= im.entOff && off+8 <= im.entEnd {
						sink += uint64(im.b[off])
					}
					break
				}
			}
		}
		runtime.KeepAlive(sink) // the touching loads must happen
		for i, k := range group {
			if len(k) > maxKeyLen {
				vals[lo+i], errs[lo+i] = Value{}, errKeyLen
				continue
			}
			key := strBytes(k)
			off, err := im.findHashed(key, hs[i])
			var val Value
			if err == nil {
				val, _, err = im.decodeValue(off)
			}
			vals[lo+i], errs[lo+i] = val, err
		}
	}
}

// hashGroup hashes a group of keys and finds their home buckets (a key too
// long gets bucket 0: it is refused when its turn comes).
func (im *image) hashGroup(group []string, hs, homes *[batchGroup]uint64) {
	for i, k := range group {
		h := uint64(0)
		if n := len(k); n > 8 && n <= 16 && im.hashBits >= 64 {
			h = xxh3Len9To16(strBytes(k), im.seed) // im.hash, its short-key case inline
		} else if n <= maxKeyLen {
			h = im.hash(strBytes(k))
		}
		hs[i], homes[i] = h, im.home(h)
	}
}
