package shmkv

import "iter"

// Iteration (lib/FORMAT.md §17, §18): the records of every bucket in index
// order, each decoded and its value checked as iteration checks (a
// strlist's strings too), as the C reader's shmkv_iter_next.

// Entry is one entry as iteration yields it. Key and Value are zero-copy,
// valid while the View they came from is pinned.
type Entry struct {
	Key   []byte
	Value Value
	// Expires is when the entry expires, in Unix seconds (FORMAT.md
	// §17); 0 when it never does (and for a tombstone).
	Expires uint32
}

// Entries yields the live entries of the view's image in index order, as
// a get sees them: an entry whose expiry the clock has reached is skipped.
// The clock is read once, when the iteration starts, and only for an image
// whose header has the EXPIRY flag (a clock pinned with SetClock before
// the view was pinned is honoured). Damage ends the iteration: the error
// (ErrCorrupt) is yielded once, with a zero Entry, and nothing after it.
//
// Of a delta read alone, Entries yields its live upserts (not its
// tombstones). Through a delta ([Image.WithDelta], FORMAT.md §19): the
// delta's live upserts in its index order, then the base's live entries
// whose key the delta does not hold (as an upsert, expired or not, or a
// tombstone), in the base's index order. Through a lower and a top
// ([Image.WithDeltas], §19.6): the top's live upserts, then the lower's
// whose key the top does not hold, then the base's whose key neither holds.
//
//	for e, err := range view.Entries() {
//		if err != nil {
//			return err
//		}
//		use(e.Key, e.Value)
//	}
func (v *View) Entries() iter.Seq2[Entry, error] { return v.iterate(false) }

// Records yields every record of the view's image in index order, expired
// ones included, each with its expiry: for dumps, inspection and tools.
// Errors as Entries. Of a delta read alone, Records yields its tombstones
// too, in their place: an Entry whose Value is of [TypeTombstone] (no
// bytes; its getters say ErrType) and Expires 0. Through a delta: the
// delta's upserts, expired ones included, then the base's records whose
// key the delta does not hold; no tombstone (a key it removes is absent).
// Through a lower and a top, the same walk as Entries with every upsert
// and record (FORMAT.md §19.6).
func (v *View) Records() iter.Seq2[Entry, error] { return v.iterate(true) }

func (v *View) iterate(all bool) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		im, dm, top := v.im, v.dm, v.top
		now := int64(0) // isExpired(e, 0) is false: no record expires
		if !all && (im.expiry || dm != nil && dm.expiry || top != nil && top.expiry) && !v.released.Load() {
			if now = v.clock; now == 0 {
				now = clock() // once, at the start
			}
		}
		// The levels, the first read first: through deltas, each level's
		// records whose key no level above it holds (FORMAT.md §19.6).
		passes := []*image{im}
		switch {
		case top != nil:
			passes = []*image{top, dm, im}
		case dm != nil:
			passes = []*image{dm, im}
		}
		for p, src := range passes {
			c := cursor{im: src}
			for {
				if v.released.Load() {
					yield(Entry{}, ErrClosed)
					return
				}
				e, ok, err := c.next()
				if err == nil && ok && p > 0 { // hidden where a level above holds its key
					held := false
					for _, above := range passes[:p] {
						if held, err = above.holds(e.Key); held || err != nil {
							break
						}
					}
					if held && err == nil {
						continue
					}
				}
				if err != nil {
					yield(Entry{}, err)
					return
				}
				if !ok {
					break
				}
				if e.Value.typ == TypeTombstone && (!all || dm != nil) || !all && isExpired(e.Expires, now) {
					continue
				}
				if !yield(e, nil) {
					return
				}
			}
		}
	}
}

// cursor is an iteration's place: the bucket after the one being read,
// the next record of it, the records left in it, and how many it has
// yielded (it stops at entry_count).
type cursor struct {
	im             *image
	bkt, rec, left uint64
	seen           uint64
}

// next is the next record, ok false at the end.
func (c *cursor) next() (Entry, bool, error) {
	im := c.im
	if c.seen == im.entryCount {
		return Entry{}, false, nil
	}
	for c.left == 0 {
		if c.bkt >= im.bucketCount {
			return Entry{}, false, errf(ErrCorrupt, "the index holds %d records, entry_count is %d", c.seen, im.entryCount)
		}
		c.left = uint64(im.bucket(c.bkt)[0])
		c.rec = 0
		c.bkt++
	}
	b := c.bkt - 1
	bk := im.bucket(b)
	n := uint64(bk[0])
	if n > maxRecords {
		return Entry{}, false, errf(ErrCorrupt, "index bucket %d: count %d, at most %d", b, n, maxRecords)
	}
	off := recOff(bk, c.rec)
	r, ok := decodeRec(bk, off, im.delta)
	if !ok || off < dirEnd(n) {
		return Entry{}, false, errf(ErrCorrupt, "index bucket %d record %d at +%d: malformed or out of place", b, c.rec, off)
	}
	key, e, err := im.recKey(bk, &r)
	var v Value
	if err == nil {
		switch {
		case r.tomb(): // a delta's tombstone (its OUT entry, if any, decoded by recKey)
			v = Value{typ: TypeTombstone}
		case r.out():
			v = e.val
		default:
			v, err = im.recValue(b, r.pos)
			if err == nil && v.typ == TypeStrList {
				if why := checkStrList(v.data); why != "" {
					err = errf(ErrCorrupt, "index bucket %d record %d: strlist: %s", b, c.rec, why)
				}
			}
		}
	}
	if err != nil {
		return Entry{}, false, err
	}
	c.rec++
	c.left--
	c.seen++
	return Entry{Key: key, Value: v, Expires: r.expires}, true, nil
}
