package shmkv

import (
	"fmt"
	"io/fs"
	"math/bits"
	"unsafe"
)

// Delta images (lib/FORMAT.md §19): changes to one base image, upserts and
// tombstones, with a key filter; a base read through one. The header and
// section checks are header.go's, the tombstone record rule index.go's
// (recAt), its entry entries.go's, verify's additions verify.go's.

// DeltaID is what a delta's header says of its base and its chain
// (FORMAT.md §19.1, the C reader's shmkv_delta_id).
type DeltaID struct {
	BaseChecksum uint64 // the base's header_checksum ([Image.Checksum])
	BaseSize     uint64 // the base's file_size
	Prev         uint64 // the header_checksum of the delta this one follows; 0: it applies to the base
	Seq          uint64 // its place in its chain, 1 or more (informational)
}

// IsDelta says whether the image is a delta (FORMAT.md §19), read alone:
// its gets answer its upserts, a tombstone's key is absent. False for a
// base read through a delta.
func (i *Image) IsDelta() bool { return i.delta }

// DeltaID is what the delta's header says of its base and chain; ok is
// false for an image that is not a delta (and for a base read through one).
func (i *Image) DeltaID() (id DeltaID, ok bool) { return i.dl, i.delta }

// Checksum is the image's header_checksum: its identity as a delta's base
// (DeltaID.BaseChecksum) or as the predecessor of a delta in a chain
// (DeltaID.Prev). Through a delta, the base's.
func (i *Image) Checksum() uint64 { return i.checksum }

// WithDelta returns an Image that reads i through the delta d (FORMAT.md
// §19): a key d holds as an upsert has d's value and expiry (an upsert
// that has expired is absent: the base is not asked), a key d holds as a
// tombstone is absent, any other key is i's. Every getter, Pin's views
// (Get, GetBatch, Expires, Entries, Records, Len, Verify) answer so.
//
// d must apply to i (§19.4), or ErrBase says why, naming both checksums:
// i a plain image and d a delta; d's base_checksum and base_size i's
// header_checksum and file_size; d the first of its chain (prev 0: a chain
// is merged first, shmctl image apply); the same hash seed and hash bits.
// These are O(1) checks; d is checked as any image is when it is opened
// (Deep checks it whole).
//
// The returned Image holds its own references to both mappings: i and d
// may be closed before it, and it is closed on its own (its views, as any
// View, keep both mapped until released). Its name and Checksum are i's; its
// clock is its own (SetClock).
func (i *Image) WithDelta(d *Image) (*Image, error) {
	return i.withDeltas(d, nil)
}

// WithDeltas returns an Image that reads i through two deltas of it, a
// lower and a top (FORMAT.md §19.6: what a loader publishes as protocol
// 2's two overlays): a key top holds (an upsert, expired or not, or a
// tombstone) is top's answer, else a key lower holds is lower's, else i's.
// Every getter and Pin's views answer so; iteration yields top's upserts,
// then lower's whose key top does not hold, then i's whose key neither
// holds.
//
// Each delta must apply to i itself, as WithDelta's does (§19.4: top is a
// delta of i, not of lower), or ErrBase says which ("lower delta: ...",
// "top delta: ...") and why. top nil is WithDelta(lower); lower nil is
// refused (an error of class EINVAL: one delta is always read as the
// lower). As WithDelta, the returned Image holds its own references to
// the three mappings.
func (i *Image) WithDeltas(lower, top *Image) (*Image, error) {
	if lower == nil {
		return nil, fmt.Errorf("shmkv: WithDeltas without a lower delta: read one delta as the lower (WithDelta): %w", fs.ErrInvalid)
	}
	return i.withDeltas(lower, top)
}

func (i *Image) withDeltas(lower, top *Image) (*Image, error) {
	var ms []*mapping
	release := func() {
		for _, m := range ms {
			m.release()
		}
	}
	for _, img := range []*Image{i, lower, top} {
		if img == nil {
			break
		}
		m, err := img.pin()
		if err != nil {
			release()
			return nil, err
		}
		ms = append(ms, m)
	}
	for l, d := range ms[1:] {
		if err := applies(ms[0], d); err != nil {
			release()
			if top != nil {
				return nil, errf(ErrBase, "%s delta: %s", []string{"lower", "top"}[l], detail(err))
			}
			return nil, err
		}
	}
	m := through(0, -1, ms...)
	img := &Image{name: i.name, checksum: i.checksum}
	img.cur.Store(m)
	return img, nil
}

// through is the mapping of base levels[0] read through delta levels[1],
// and through top levels[2] over it, where given (gen and node its cache
// generation and NUMA node, or 0 and -1); each delta applies to the base
// (the caller checked: applies). It takes over a reference to each level
// (released with it) and holds them in that order (held: a refresh finds
// the levels it may keep there, keep.go). A cache's generation
// (PROTOCOL.md, "Protocol 2") is one: its base, read through its overlays
// where it has them.
func through(gen uint64, node int, levels ...*mapping) *mapping {
	m := newMapping(nil, levels[0].im, gen, node)
	m.held = levels
	if len(levels) > 1 {
		m.dm = levels[1].im
	}
	if len(levels) > 2 {
		m.top = levels[2].im
	}
	return m
}

// applies is FORMAT.md §19.4's table: base b can be read through delta d.
func applies(b, d *mapping) error {
	bi, di := b.im, d.im
	ids := func() string {
		return fmt.Sprintf("the delta (seq %d, checksum %#016x) is for the base of checksum %#016x (%d bytes); this image's checksum is %#016x (%d bytes)",
			di.dl.Seq, di.checksum, di.dl.BaseChecksum, di.dl.BaseSize, bi.checksum, bi.fileSize)
	}
	switch {
	case b.dm != nil:
		return errf(ErrBase, "the image (checksum %#016x) is read through a delta already; a chain of deltas is merged before it is read (shmctl image apply)", bi.checksum)
	case bi.delta:
		return errf(ErrBase, "the image (checksum %#016x) is a delta, not a base; the delta given has checksum %#016x", bi.checksum, di.checksum)
	case !di.delta || d.dm != nil:
		return errf(ErrBase, "the image given as the delta (checksum %#016x) is not a delta; the base has checksum %#016x", di.checksum, bi.checksum)
	case di.dl.BaseChecksum != bi.checksum || di.dl.BaseSize != bi.fileSize:
		return errf(ErrBase, "%s", ids())
	case di.dl.Prev != 0:
		return errf(ErrBase, "the delta (seq %d, checksum %#016x) follows the delta of checksum %#016x in its chain, on the base of checksum %#016x (this image's is %#016x): merge the chain first (shmctl image apply)",
			di.dl.Seq, di.checksum, di.dl.Prev, di.dl.BaseChecksum, bi.checksum)
	case di.seed != bi.seed || di.hashBits != bi.hashBits:
		return errf(ErrBase, "%s, but its hash_seed %#x and hash_bits %d are not the base's %#x and %d", ids(), di.seed, di.hashBits, bi.seed, bi.hashBits)
	}
	return nil
}

// setFilter binds FILTER's bytes f (a non-zero multiple of 8: check 9).
func (im *image) setFilter(f []byte) {
	im.filter, im.filterWords, im.filterAt = f, uint64(len(f))/8, unsafe.Pointer(unsafe.SliceData(f))
}

// mayHold: the delta's filter lets a key of hash h through (§19.3): its
// three bits in word mulhi(h, words) are set. False: the delta does not
// hold the key. Every get through a delta asks it, and a miss's time
// grows with its instructions (BenchmarkGetDelta: the loop of misses keeps
// as many lookups in flight as the core's window holds), so the word is
// read through a pointer: mulhi(h, words) < words, inside FILTER, and a
// uint64 has no pointers, so no alignment rule applies to it.
func (im *image) mayHold(h uint64) bool {
	w, _ := bits.Mul64(h, im.filterWords)
	m := uint64(1)<<(h>>filterShift0&63) | uint64(1)<<(h>>filterShift1&63) | uint64(1)<<(h>>filterShift2&63)
	return le.Uint64((*[8]byte)(unsafe.Add(im.filterAt, w*8))[:])&m == m
}

// holds: the delta has a record of key, an upsert (expired or not) or a
// tombstone; an error where the lookup meets damage.
func (im *image) holds(key []byte) (bool, error) {
	h := im.hash(key)
	if !im.mayHold(h) {
		return false, nil
	}
	switch _, _, err := im.locate(key, h); err {
	case nil:
		return true, nil
	case ErrNotFound:
		return false, nil
	default:
		return false, err
	}
}

var errTombstone = errf(ErrNotFound, "key removed (the delta holds its tombstone)")

// tombstone: the answer to a get that finds the tombstone at pos of bucket
// b (bk): the key is absent, if the tombstone is one (an OUT tombstone's
// entry, whose head and key the lookup checked, of type 0 and value_len 0:
// §19.4).
func (im *image) tombstone(bk *[bucketBytes]byte, b, pos uint64) error {
	if bk[pos]&recOut != 0 {
		e := recEntry(bk, pos)
		if t, n := im.b[e+entType], le.Uint32(im.b[e+entValueLen:]); t != tombEntryType || n != 0 {
			return errf(ErrCorrupt, "index bucket %d: the OUT tombstone at +%d names the entry at offset %d, of type %d and value_len %d, not 0 and 0", b, pos, e, t, n)
		}
	}
	return errTombstone
}

// expiresThrough is View.Expires through delta d (and top t over it, where
// not nil): the first of t and d that holds the key answers (its upsert's
// expiry, or its tombstone: absent), else the base.
func (im *image) expiresThrough(t, d *image, key []byte) (uint32, error) {
	if len(key) > maxKeyLen {
		return 0, errKeyLen
	}
	h := im.hash(key)
	for _, dl := range [2]*image{t, d} {
		if dl != nil && dl.mayHold(h) {
			if e, err := dl.expiresAt(key, h); err != ErrNotFound {
				return e, err
			}
		}
	}
	return im.expiresAt(key, h)
}

// throughLen is View.Len through the deltas: the base's entry_count; for
// each record of the lower delta, one more for an upsert of a key the
// base lacks, one less for a tombstone of a key it holds; then the same
// for each record of the top against the base read through the lower (the
// lower's record of the key, else the base's); -1 where damage stops the
// count.
func (m *mapping) throughLen() int {
	m.lenOnce.Do(func() {
		n := int(m.im.entryCount)
		// present: the key has an upsert in the first level of levels that
		// holds it (a tombstone's: absent), or in the base.
		present := func(key []byte, levels ...*image) (bool, error) {
			for _, l := range levels {
				b, pos, err := l.locate(key, l.hash(key))
				switch {
				case err == nil:
					return l.bucket(b)[pos]&recTomb == 0, nil
				case err != ErrNotFound:
					return false, err
				}
			}
			_, _, err := m.im.locate(key, m.im.hash(key))
			if err == ErrNotFound {
				return false, nil
			}
			return err == nil, err
		}
		for _, lv := range []struct {
			d     *image
			below []*image
		}{{m.dm, nil}, {m.top, []*image{m.dm}}} {
			if lv.d == nil {
				continue
			}
			c := cursor{im: lv.d}
			for {
				e, ok, err := c.next()
				if err != nil {
					m.n = -1
					return
				}
				if !ok {
					break
				}
				was, err := present(e.Key, lv.below...)
				switch {
				case err != nil:
					m.n = -1
					return
				case e.Value.typ == TypeTombstone && was:
					n--
				case e.Value.typ != TypeTombstone && !was:
					n++
				}
			}
		}
		m.n = n
	})
	return m.n
}
