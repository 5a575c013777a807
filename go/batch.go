package shmkv

import "runtime"

// GetBatch looks up keys[i] into vals[i] and errs[i] (both at least as long
// as keys), zero-copy like Get. It overlaps the memory reads of groups of
// keys: it hashes a group and touches every home bucket first, then each
// key's first candidate entry, so that their cache misses are in flight
// together instead of one after another; then each key is looked up as Get
// would (the lines are in cache by then). Same results as Get, key by key.
func (v *View) GetBatch(keys []string, vals []Value, errs []error) {
	if v.released.Load() {
		for i := range keys {
			vals[i], errs[i] = Value{}, ErrClosed
		}
		return
	}
	im := v.im
	if im.version == 2 {
		im.getBatch2(keys, vals, errs)
		return
	}
	const group = 16
	var hs [group]uint64
	for lo := 0; lo < len(keys); lo += group {
		n := min(group, len(keys)-lo)
		var sink uint64
		for i := 0; i < n; i++ {
			k := keys[lo+i]
			if len(k) > maxKeyLen {
				hs[i] = 0 // refused below
				continue
			}
			h := im.hash(strBytes(k))
			hs[i] = h
			sink += le.Uint64(im.index[im.home(h)*64:]) // independent loads: misses overlap
		}
		for i := 0; i < n; i++ { // the first tag match's entry header
			h := hs[i]
			base, tag := im.home(h)*64, tagOf(h)
			for j := uint64(0); j < 8; j++ {
				if w := le.Uint64(im.index[base+8*j:]); w>>48 == tag {
					if off := (w & slotOffset) << 3; off >= im.entOff && off+8 <= im.entEnd {
						sink += le.Uint64(im.b[off:])
					}
					break
				}
			}
		}
		runtime.KeepAlive(sink) // the touching loads must happen
		for i := 0; i < n; i++ {
			k := strBytes(keys[lo+i])
			if len(k) > maxKeyLen {
				vals[lo+i], errs[lo+i] = Value{}, errKeyLen
				continue
			}
			off, err := im.findHashed(k, hs[i])
			if err == nil {
				vals[lo+i], _, err = im.decodeValue(off)
			}
			if err != nil {
				vals[lo+i] = Value{}
			}
			errs[lo+i] = err
		}
	}
}
