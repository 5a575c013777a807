package shmkv

import "math/bits"

// The full structural check of FORMAT.md §13 (the C reader's
// shmkv_verify, SHMKV_OPEN_DEEP): it names the first problem it finds. A
// delta's adds §19.4's: tombstones as §19.2 says, every key's filter bits
// set, entry_count counting tombstones, entries of type 0 exactly the OUT
// tombstones'.

// verifyAll is verify with the section checksums (§13's 1: the rest of
// §12 holds for an image that opened).
func (im *image) verifyAll() error {
	if err := im.checkSums(); err != nil {
		return err
	}
	return im.verify()
}

func (im *image) verify() error {
	if err := im.checkPadding(); err != nil { // §13's 2 (1 is checkImage with sums)
		return err
	}
	return im.verifyIndex()
}

// verifyIndex checks every bucket's head, directory, records and uncovered
// bytes; the counts and the longest probe against the header; ENTRIES
// holds exactly the OUT records' entries.
func (im *image) verifyIndex() error {
	var n, outs, shared, expiring, maxD uint64
	for b := uint64(0); b < im.bucketCount; b++ {
		bk := im.bucket(b)
		d, cnt := uint64(bk[1]), uint64(bk[0])
		switch {
		case d > im.maxProbe: // 255 ("up to max_probe") needs max_probe >= 255 too
			return errf(ErrCorrupt, "index bucket %d: displacement byte %d is over max_probe %d", b, d, im.maxProbe)
		case d == 0 && !allZero(bk[2:bucketHead]):
			return errf(ErrCorrupt, "index bucket %d: filter bits without displaced keys", b)
		case cnt > maxRecords:
			return errf(ErrCorrupt, "index bucket %d: count %d, at most %d", b, cnt, maxRecords)
		}
		pos := dirEnd(cnt) // the record area
		for i := uint64(0); i < cnt; i++ {
			off := recOff(bk, i)
			if off < pos {
				return errf(ErrCorrupt, "index bucket %d record %d at +%d: before +%d (the directory's end or the previous record's)", b, i, off, pos)
			}
			r, ok := decodeRec(bk, off, im.delta) // first: off may be past +128
			if !ok {
				return errf(ErrCorrupt, "index bucket %d record %d at +%d: malformed or past the bucket's end", b, i, off)
			}
			if !allZero(bk[pos:off]) {
				return errf(ErrCorrupt, "index bucket %d: a non-zero byte in [+%d, +%d), which no record covers", b, pos, off)
			}
			disp, sh, err := im.verifyRecord(bk, b, i, &r, recDir(bk, i)>>dirTagShift)
			if err != nil {
				return err
			}
			maxD = max(maxD, disp)
			shared += sh
			if r.out() {
				outs++
			}
			if r.expires != 0 {
				expiring++
			}
			pos = r.end
			n++
		}
		if !allZero(bk[pos:]) {
			return errf(ErrCorrupt, "index bucket %d: a non-zero byte after its records (from +%d)", b, pos)
		}
	}
	switch {
	case n != im.entryCount:
		return errf(ErrCorrupt, "the index holds %d records, entry_count is %d", n, im.entryCount)
	case maxD != im.maxProbe:
		return errf(ErrCorrupt, "the largest displacement is %d, max_probe is %d", maxD, im.maxProbe)
	case (expiring == 0) == im.expiry:
		return errf(ErrCorrupt, "%d records expire, but the header's EXPIRY flag is %v", expiring, im.expiry)
	case shared != im.dedupRefs:
		return errf(ErrCorrupt, "%d entries are shared, dedup_refs is %d", shared, im.dedupRefs)
	}
	ents := uint64(0) // ENTRIES: each entry is its key's OUT record's
	for pos := im.entOff; ; {
		e, ok, err := im.nextEntry(pos)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if err := im.entryPadding(e); err != nil {
			return err
		}
		rb, rpos, err := im.locate(e.key, im.hash(e.key))
		if err != nil || im.bucket(rb)[rpos]&recOut == 0 || recEntry(im.bucket(rb), rpos) != e.off {
			return errf(ErrCorrupt, "entry at offset %d: no OUT record of its key points at it", e.off)
		}
		if tomb := im.bucket(rb)[rpos]&recTomb != 0; tomb != (e.val.typ == TypeTombstone) {
			return errf(ErrCorrupt, "entry at offset %d: of type %d, its key's OUT record a tombstone: %v", e.off, e.val.typ, tomb)
		}
		ents++
		pos = e.end
	}
	if ents != outs {
		return errf(ErrCorrupt, "ENTRIES holds %d entries, the index %d OUT records", ents, outs)
	}
	return nil
}

// verifyRecord checks record i of bucket b (its directory tag bits,
// dir[i] >> 7: dt): expiry, value (strlists in full), inline padding, tag
// and home against its key's hash, its displacement announced at home,
// and a lookup of its key finding it here. It returns the displacement and
// whether it is a shared OUT entry.
func (im *image) verifyRecord(bk *[bucketBytes]byte, b, i uint64, r *rec, dt uint64) (uint64, uint64, error) {
	bad := func(format string, args ...any) (uint64, uint64, error) {
		return 0, 0, errf(ErrCorrupt, "index bucket %d record %d: "+format, append([]any{b, i}, args...)...)
	}
	if r.kind&recExpires != 0 && r.expires == 0 {
		return bad("expiry 0")
	}
	key, e, err := im.recKey(bk, r)
	if err != nil {
		return bad("%s", detail(err))
	}
	sh := uint64(0)
	switch {
	case r.tomb(): // its kind, its inline value_len 0 (recAt), its entry (recKey): §19.2
	case r.out():
		if e.val.shared {
			sh = 1
		}
	default:
		if !allZero(bk[r.keyPos+r.keyLen : r.valPos]) {
			return bad("padding before its value is not zero")
		}
		v, err := im.recValue(b, r.pos)
		if err != nil {
			return bad("%s", detail(err))
		}
		if v.typ == TypeStrList {
			if why := checkStrList(v.data); why != "" {
				return bad("strlist: %s", why)
			}
		}
	}
	h := im.hash(key)
	if im.delta && !im.mayHold(h) {
		w, _ := bits.Mul64(h, im.filterWords)
		return bad("its key's bits in FILTER word %d are not all set", w)
	}
	tag := tagOf(h)
	if dt != dirTag(tag)>>dirTagShift {
		return bad("directory tag bits %03x, key hashes to tag %04x (low 9 bits %03x)", dt, tag, tag&0x1ff)
	}
	home := im.home(h)
	disp := (b + im.bucketCount - home) % im.bucketCount
	if disp > im.maxProbe {
		return bad("displacement %d is over max_probe %d", disp, im.maxProbe)
	}
	if disp > 0 && im.probes(im.bucket(home), tag) < disp {
		return bad("displaced by %d from bucket %d, which does not announce it", disp, home)
	}
	fb, fpos, err := im.locate(key, h)
	if err != nil || fb != b || fpos != r.pos {
		return bad("looking its key up does not find it here (%v)", err)
	}
	return disp, sh, nil
}

// entryPadding: the bytes between the key and the value position, and after
// the stored value (or the reference) up to the entry's end, are zero.
func (im *image) entryPadding(e entry) error {
	keyEnd := e.off + entrySize + uint64(len(e.key))
	vpos := entryValPos(e.off, uint64(len(e.key)), e.val.typ, e.val.shared)
	valEnd := vpos + 8
	if !e.val.shared {
		valEnd = vpos + uint64(len(e.val.data)) + e.val.typ.nul()
	}
	if !allZero(im.b[keyEnd:vpos]) || !allZero(im.b[valEnd:e.end]) {
		return errf(ErrCorrupt, "entry at offset %d: padding inside the entry is not zero", e.off)
	}
	return nil
}
