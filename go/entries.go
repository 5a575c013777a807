package shmkv

import "unicode/utf8"

// The entry walk of FORMAT.md §7 and §13: iteration and verify decode every
// entry in image order, skipping zero words, with every rule (a lookup
// checks fewer, §12.1).

// decodeEntry decodes the entry at off with §13's rules; utf adds the
// UTF-8 rule of string and strlist text (verify).
func (im *image) decodeEntry(off uint64, utf bool) (entry, error) {
	if off%8 != 0 || off < im.entOff || off+8 > im.entEnd {
		return entry{}, errf(ErrCorrupt, "entry at offset %d: not an 8-aligned header inside ENTRIES [%d, %d)", off, im.entOff, im.entEnd)
	}
	klen := uint64(le.Uint16(im.b[off+2:]))
	if klen > im.entEnd-off-8 {
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
		if why := checkStrList(v.data, utf); why != "" {
			return entry{}, errf(ErrCorrupt, "entry at offset %d: strlist: %s", off, why)
		}
	} else if utf && v.typ == TypeString && !utf8.Valid(v.data) {
		return entry{}, errf(ErrCorrupt, "entry at offset %d: string value is not valid UTF-8", off)
	}
	return entry{off: off, key: im.b[off+8 : off+8+klen : off+8+klen], val: v, end: end}, nil
}

// nextEntry: the first entry at or after pos (skipping zero words); ok
// false at ENTRIES' end.
func (im *image) nextEntry(pos uint64, utf bool) (entry, bool, error) {
	for ; pos+8 <= im.entEnd; pos += 8 {
		if le.Uint64(im.b[pos:]) != 0 {
			e, err := im.decodeEntry(pos, utf)
			return e, err == nil, err
		}
	}
	return entry{}, false, nil
}

// Iter walks the entries of a View's image in image order (FORMAT.md §7;
// format v2: the records of every bucket in index order, §17):
//
//	it := view.Iter()
//	for it.Next() {
//		use(it.Key(), it.Value())
//	}
//	if err := it.Err(); err != nil { ... }
//
// Keys and values are zero-copy, valid while the View is pinned.
type Iter struct {
	im      *image
	pos     uint64 // v1: the next entry's offset
	bkt     uint64 // v2: the bucket after the one being read,
	rec     uint64 // the next record of it,
	left    uint64 // and the records left in it
	seen    uint64
	cur     entry
	expires uint32
	err     error
}

// Next moves to the next entry; false at the end or on an error.
func (it *Iter) Next() bool {
	if it.err != nil || it.im == nil || it.seen == it.im.entryCount {
		return false
	}
	if it.im.version == 2 {
		return it.next2()
	}
	e, ok, err := it.im.nextEntry(it.pos, false)
	switch {
	case err != nil:
		it.err = err
		return false
	case !ok:
		it.err = errf(ErrCorrupt, "ENTRIES holds %d entries, entry_count is %d", it.seen, it.im.entryCount)
		return false
	}
	it.cur, it.pos = e, e.end
	it.seen++
	return true
}

// Key is the current entry's key, zero-copy.
func (it *Iter) Key() []byte { return it.cur.key }

// Value is the current entry's value, zero-copy.
func (it *Iter) Value() Value { return it.cur.val }

// Expires is when the current entry expires, in Unix seconds (FORMAT.md
// §17.6); 0 when it never does (always 0 in a format v1 image). Iteration
// returns expired entries too: Get does not find them once the clock reads
// this or later.
func (it *Iter) Expires() uint32 { return it.expires }

// Err is the error that stopped the walk, nil at a clean end.
func (it *Iter) Err() error { return it.err }
