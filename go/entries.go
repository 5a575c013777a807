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

// nextEntry: the first entry at or after pos (skipping zero words); ok
// false at ENTRIES' end.
func (im *image) nextEntry(pos uint64) (entry, bool, error) {
	for ; pos+8 <= im.entEnd; pos += 8 {
		if le.Uint64(im.b[pos:]) != 0 {
			e, err := im.decodeEntry(pos)
			return e, err == nil, err
		}
	}
	return entry{}, false, nil
}
