package shmkv

// The full structural check of FORMAT.md §13 (the C reader's shmkv_verify,
// SHMKV_OPEN_DEEP): it names the first problem it finds.

func (im *image) verify() error {
	if err := im.checkPadding(); err != nil { // 2 (1 is checkImage with sums)
		return err
	}
	if im.version == 2 {
		return im.verifyIndex2() // §17.7
	}
	if err := im.verifyIndex(); err != nil { // 3
		return err
	}
	return im.verifyEntries() // 4
}

func (im *image) verifyIndex() error {
	full, maxDisp := uint64(0), uint64(0)
	for b := uint64(0); b < im.bucketCount; b++ {
		d := im.slot(b, 7) >> 40 & 0xFF
		if d != 0 && d > im.maxProbe {
			return errf(ErrCorrupt, "bucket %d: displacement byte %d is over max_probe %d", b, d, im.maxProbe)
		}
		empty := false
		for j := 0; j < 8; j++ {
			w := im.slot(b, j)
			if w == 0 {
				empty = true
				continue
			}
			if empty {
				return errf(ErrCorrupt, "bucket %d slot %d: a full slot after an empty one", b, j)
			}
			if d == 0 && w>>40&0xFF != 0 {
				return errf(ErrCorrupt, "bucket %d slot %d: meta byte %#x in a bucket without displaced keys", b, j, w>>40&0xFF)
			}
			e, err := im.decodeEntry((w&slotOffset)<<3, true)
			if err != nil {
				return errf(ErrCorrupt, "bucket %d slot %d: %v", b, j, err)
			}
			h := im.hash(e.key)
			if tag := tagOf(h); w>>48 != tag {
				return errf(ErrCorrupt, "bucket %d slot %d: tag %#04x, its key's tag is %#04x", b, j, w>>48, tag)
			}
			home := im.home(h)
			disp := (b + im.bucketCount - home) % im.bucketCount
			if disp > im.maxProbe {
				return errf(ErrCorrupt, "bucket %d slot %d: displacement %d is over max_probe %d", b, j, disp, im.maxProbe)
			}
			if disp > 0 {
				hd := im.slot(home, 7) >> 40 & 0xFF
				fi := (w >> 48 * 56) >> 16
				bit := im.slot(home, int(fi>>3)) >> (40 + fi&7) & 1
				limit := hd
				if hd == 255 {
					limit = im.maxProbe
				}
				if hd == 0 || bit == 0 || disp > limit {
					return errf(ErrCorrupt, "bucket %d slot %d: displaced by %d from bucket %d, which does not announce it", b, j, disp, home)
				}
			}
			maxDisp = max(maxDisp, disp)
			full++
		}
	}
	if full != im.entryCount {
		return errf(ErrCorrupt, "the index has %d full slots, entry_count is %d", full, im.entryCount)
	}
	if maxDisp != im.maxProbe {
		return errf(ErrCorrupt, "the largest displacement is %d, max_probe is %d", maxDisp, im.maxProbe)
	}
	return nil
}

func (im *image) verifyEntries() error {
	count, shared := uint64(0), uint64(0)
	for pos := im.entOff; ; {
		e, ok, err := im.nextEntry(pos, true)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if off, err := im.find(e.key); err != nil || off != e.off {
			return errf(ErrCorrupt, "entry at offset %d: looking its key up does not find it (%v)", e.off, err)
		}
		if err := im.entryPadding(e); err != nil {
			return err
		}
		count++
		if e.val.shared {
			shared++
		}
		pos = e.end
	}
	if count != im.entryCount {
		return errf(ErrCorrupt, "ENTRIES holds %d entries, entry_count is %d", count, im.entryCount)
	}
	if shared != im.dedupRefs {
		return errf(ErrCorrupt, "%d entries are shared, dedup_refs is %d", shared, im.dedupRefs)
	}
	return nil
}

// entryPadding: the bytes between the key and the value position, and after
// the stored value (or the reference) up to the entry's end, are zero.
func (im *image) entryPadding(e entry) error {
	keyEnd := e.off + 8 + uint64(len(e.key))
	vpos := keyEnd
	if e.val.shared || e.val.typ.aligned8() {
		vpos = align8(vpos)
	}
	valEnd := vpos + 8
	if !e.val.shared {
		valEnd = vpos + uint64(len(e.val.data)) + e.val.typ.nul()
	}
	if !allZero(im.b[keyEnd:vpos]) || !allZero(im.b[valEnd:e.end]) {
		return errf(ErrCorrupt, "entry at offset %d: padding inside the entry is not zero", e.off)
	}
	return nil
}
