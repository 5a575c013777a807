package shmkv

// The entries of ENTRIES (lib/FORMAT.md §7, §13): an OUT record's entry
// decoded with every rule (iteration, verify; a lookup checks fewer,
// §12.1), and the walk over ENTRIES that verify makes.

// entry is one decoded entry: its offset, key and value.
type entry struct {
	off uint64
	key []byte
	val Value
	end uint64 // the entry's 8-aligned end
}

// decodeEntry decodes the entry at off with §13's rules.
func (im *image) decodeEntry(off uint64) (entry, error) {
	if off%8 != 0 || off < im.entOff || off+entrySize > im.entEnd {
		return entry{}, errf(ErrCorrupt, "entry at offset %d: not an 8-aligned header inside ENTRIES [%d, %d)", off, im.entOff, im.entEnd)
	}
	klen := uint64(le.Uint16(im.b[off+entKeyLen:]))
	if klen > im.entEnd-off-entrySize {
		return entry{}, errf(ErrCorrupt, "entry at offset %d: its %d-byte key runs past ENTRIES' end %d", off, klen, im.entEnd)
	}
	v, end, err := im.decodeValue(off)
	if err != nil {
		return entry{}, err
	}
	if end > im.entEnd {
		return entry{}, errf(ErrCorrupt, "entry at offset %d: its end %d is past ENTRIES' end %d", off, end, im.entEnd)
	}
	if v.typ == TypeStrList {
		if why := checkStrList(v.data); why != "" {
			return entry{}, errf(ErrCorrupt, "entry at offset %d: strlist: %s", off, why)
		}
	}
	key := im.b[off+entrySize : off+entrySize+klen : off+entrySize+klen]
	return entry{off: off, key: key, val: v, end: end}, nil
}

// decodeTombEntry decodes the entry of an OUT tombstone at off (FORMAT.md
// §19.2): type 0, flags 0, a key of at least one byte inside ENTRIES,
// value_len 0, its end align_up(8 + key_len, 8) inside ENTRIES. Its value
// is a Value of TypeTombstone; the zero bytes to its end are verify's
// (entryPadding).
func (im *image) decodeTombEntry(off uint64) (entry, error) {
	if off%8 != 0 || off < im.entOff || off+entrySize > im.entEnd {
		return entry{}, errf(ErrCorrupt, "tombstone entry at offset %d: not an 8-aligned header inside ENTRIES [%d, %d)", off, im.entOff, im.entEnd)
	}
	b := im.b
	typ, flags := b[off+entType], b[off+entFlags]
	klen, vlen := uint64(le.Uint16(b[off+entKeyLen:])), le.Uint32(b[off+entValueLen:])
	switch {
	case typ != tombEntryType || flags != 0 || vlen != 0:
		return entry{}, errf(ErrCorrupt, "tombstone entry at offset %d: type %d, flags %#x, value_len %d; a tombstone's are 0, 0, 0", off, typ, flags, vlen)
	case klen == 0:
		return entry{}, errf(ErrCorrupt, "tombstone entry at offset %d: key_len 0 (the empty key's tombstone is inline)", off)
	case align8(entrySize+klen) > im.entEnd-off:
		return entry{}, errf(ErrCorrupt, "tombstone entry at offset %d: its %d-byte key runs past ENTRIES' end %d", off, klen, im.entEnd)
	}
	key := b[off+entrySize : off+entrySize+klen : off+entrySize+klen]
	return entry{off: off, key: key, val: Value{typ: TypeTombstone}, end: off + align8(entrySize+klen)}, nil
}

// nextEntry: the first entry at or after pos (skipping zero words); ok
// false at ENTRIES' end. In a delta an entry of type 0 is a tombstone's.
func (im *image) nextEntry(pos uint64) (entry, bool, error) {
	for ; pos+8 <= im.entEnd; pos += 8 {
		if le.Uint64(im.b[pos:]) != 0 {
			var e entry
			var err error
			if im.delta && im.b[pos+entType] == tombEntryType {
				e, err = im.decodeTombEntry(pos)
			} else {
				e, err = im.decodeEntry(pos)
			}
			return e, err == nil, err
		}
	}
	return entry{}, false, nil
}
