package shmkv

import (
	"math/bits"
	"runtime"
	"time"
	"unicode/utf8"
)

// Format v2's index and lookup, layout B (FORMAT.md §17; its bucket, record
// and lookup replaced those of the v2 preview, with V2B.md's amendment 1):
// 128-byte buckets whose head holds a 2-byte directory entry per record (9
// tag bits and the record's offset), small entries inline, OUT records
// naming a v1 entry in ENTRIES, and a per-record expiry. Header, sections,
// entries and values are read by the version-independent files.

const (
	v2Bucket      = 128 // bucket bytes; the header's bucket_slots says 128
	v2Head        = 8   // count, D, filter; the directory starts here
	v2DirBytes    = 2   // a directory entry: u16 dir = (tag<<7 | off) & 0xffff
	v2DirTagShift = 7
	v2DirTagMask  = 0xff80 // dir's tag bits: the tag's low 9 bits
	v2DirOffMask  = 0x7f   // dir's offset bits: the record's offset in its bucket
	v2MaxRecords  = 16     // a bucket's count is at most 16
	v2FilterBits  = 48
	recTypeMask   = 0x0f // kind bits 0..3: the type of an inline record
	recExpires    = 0x40 // kind bit 6: a u32 expiry follows the record's head
	recOut        = 0x80 // kind bit 7: the entry lives in ENTRIES
	recInlineHead = 3    // kind, key_len, value_len
	recOutHead    = 6    // kind, 40-bit entry offset / 8
	hdrFlagExpiry = 2    // v2: some record carries an expiry

	layoutHashV2 = 0x5a240d8d9e73bf24
)

// bucket is v2 bucket b in place. home and the probe keep b below
// bucket_count, and INDEX is bucket_count * 128 bytes (checkSections), so
// the one bounds check here never fails.
func (im *image) bucket(b uint64) *[v2Bucket]byte {
	return (*[v2Bucket]byte)(im.index[b*v2Bucket : b*v2Bucket+v2Bucket])
}

// homeBucket: the home bucket of hash h (§17.2) and its bytes.
func (im *image) homeBucket(h uint64) (uint64, *[v2Bucket]byte) {
	b := im.home(h)
	return b, im.bucket(b)
}

// rec is one decoded record; offsets are within its bucket.
type rec struct {
	pos, end uint64 // the record's bytes [pos, end)
	kind     uint8
	keyPos   uint64 // inline: the key
	keyLen   uint64
	valPos   uint64 // inline: the value (aligned for its type)
	valLen   uint64
	entry    uint64 // OUT: the entry's image offset (unit * 8)
	expires  uint32 // 0: none
}

func (r *rec) out() bool { return r.kind&recOut != 0 }

// recAt decodes the head of the record at bucket offset pos (FORMAT.md
// §17, layout B's record): its kind; for an inline record where its key and
// value start; its end. ok is false when the record is malformed (kind bits
// 4 or 5, a type that is none, an OUT record with type bits, bytes past
// +128). Reads nothing past +128. The one owner of the record rule: the
// lookup, iteration and verify all decode through it.
func recAt(bk *[v2Bucket]byte, pos uint64) (kind byte, keyPos, valPos, end uint64, ok bool) {
	if pos+recInlineHead > v2Bucket {
		return 0, 0, 0, 0, false
	}
	kind = bk[pos]
	x := uint64(kind&recExpires) >> 4 // 4 bytes of expiry, or none
	if kind&recOut != 0 {
		end = pos + recOutHead + x
		return kind, 0, 0, end, kind&^(recOut|recExpires) == 0 && end <= v2Bucket
	}
	t := Type(kind & recTypeMask)
	if kind&0x30 != 0 || t < TypeBytes || t > TypeStrList {
		return 0, 0, 0, 0, false
	}
	keyPos = pos + recInlineHead + x
	valPos = keyPos + uint64(bk[pos+1])
	if t.aligned8() {
		valPos = align8(valPos)
	}
	end = valPos + uint64(bk[pos+2]) + t.nul()
	return kind, keyPos, valPos, end, end <= v2Bucket
}

// recExpiry is the expiry of a well-formed record at pos (0: none).
func recExpiry(bk *[v2Bucket]byte, pos uint64, kind byte) uint32 {
	switch {
	case kind&recExpires == 0:
		return 0
	case kind&recOut != 0:
		return le.Uint32(bk[pos+recOutHead:])
	}
	return le.Uint32(bk[pos+recInlineHead:])
}

// recEntry is an OUT record's entry offset (its 40-bit unit * 8).
func recEntry(bk *[v2Bucket]byte, pos uint64) uint64 {
	return (uint64(le.Uint32(bk[pos+1:])) | uint64(bk[pos+5])<<32) << 3
}

// decodeRec is recAt with everything spelled out (iteration, verify).
func decodeRec(bk *[v2Bucket]byte, pos uint64) (rec, bool) {
	kind, keyPos, valPos, end, ok := recAt(bk, pos)
	if !ok {
		return rec{}, false
	}
	r := rec{pos: pos, end: end, kind: kind, expires: recExpiry(bk, pos, kind)}
	if kind&recOut != 0 {
		r.entry = recEntry(bk, pos)
	} else {
		r.keyPos, r.keyLen = keyPos, uint64(bk[pos+1])
		r.valPos, r.valLen = valPos, uint64(bk[pos+2])
	}
	return r, true
}

// dirEnd is where the directory of a bucket of n records ends: no record
// starts before it.
func dirEnd(n uint64) uint64 { return v2Head + v2DirBytes*n }

// recOff is record i's offset in its bucket, dir[i] & 0x7f (the low byte's
// low 7 bits), i < 16.
func recOff(bk *[v2Bucket]byte, i uint64) uint64 {
	return uint64(bk[v2Head+v2DirBytes*i] & v2DirOffMask)
}

// recDir is record i's directory entry dir[i], i < 16.
func recDir(bk *[v2Bucket]byte, i uint64) uint64 {
	return uint64(le.Uint16(bk[v2Head+v2DirBytes*i:]))
}

// dirTag is the directory bits a key of this tag has: the tag's low 9 bits
// at bits 7..15, the offset bits 0. Record i is a candidate for the key
// when recDir & v2DirTagMask equals it.
func dirTag(tag uint64) uint64 { return tag << v2DirTagShift & v2DirTagMask }

// filterHas: bucket bk's filter has the bit of this tag, so keys of its tag
// may be displaced from it (§17.3; D says how far).
func filterHas(bk *[v2Bucket]byte, tag uint64) bool {
	fi := (tag * v2FilterBits) >> 16 // < 48
	return bk[2+(fi>>3)&7]>>(fi&7)&1 != 0
}

// homeSettles: bucket bk, the home of a key with this tag, settles that
// the key is absent: it announces no displaced key of the tag and none of
// its records is a candidate, with at most four to look at (one directory
// word). False is no answer.
func homeSettles(bk *[v2Bucket]byte, tag uint64, announces bool) bool {
	n := uint64(bk[0])
	return !announces && n <= 4 && dirMatches(le.Uint64(bk[v2Head:]), dirTag(tag))&laneMask[n] == 0
}

const (
	lanes16 = 0x0001000100010001
	highs16 = 0x8000800080008000
	lows16  = 0x7fff7fff7fff7fff
)

// dirMatches: bit 16*j+15 set where directory lane j of word w (four u16
// entries) is a candidate for want = dirTag(tag): (lane & 0xff80) == want.
// Exact, lane by lane: a lane's low 15 bits plus 0x7fff set its bit 15
// exactly when they are not all zero, its own bit 15 is ORed in, and the
// sum never passes bit 15 (at most 0xfffe), so no lane carries into or
// borrows from its neighbour (TestDirMatches).
func dirMatches(w, want uint64) uint64 {
	x := w&(v2DirTagMask*lanes16) ^ want*lanes16
	return ^((x&lows16 + lows16) | x) & highs16
}

// scan2 looks for key among bucket b's records with this tag (FORMAT.md
// §17, layout B's lookup): the directory's tag bits compared four entries
// at a time (9 bits: a candidate only), each candidate's record decoded
// with bounds and its key compared, inline or in its OUT entry. It returns
// the record's offset in the bucket, 0 for none (a record starts at +8 or
// later).
func (im *image) scan2(b, tag uint64, key []byte) (uint64, error) {
	bk := im.bucket(b)
	n := uint64(bk[0])
	if n > v2MaxRecords {
		return 0, errf(ErrCorrupt, "index bucket %d: count %d, at most %d", b, n, v2MaxRecords)
	}
	want := dirTag(tag)
	for w := uint64(0); w < (n+3)/4; w++ {
		m := dirMatches(le.Uint64(bk[v2Head+8*w:]), want)
		if left := n - 4*w; left < 4 {
			m &= 1<<(16*left) - 1 // lanes past count
		}
		for ; m != 0; m &= m - 1 {
			i := 4*w + uint64(bits.TrailingZeros64(m)>>4)
			if pos, err := im.recMatch(bk, b, n, i, key); pos != 0 || err != nil {
				return pos, err
			}
		}
	}
	return 0, nil
}

// recMatch decodes record i of bucket bk (b; count n): its offset if it is
// key's, else 0.
func (im *image) recMatch(bk *[v2Bucket]byte, b, n, i uint64, key []byte) (uint64, error) {
	pos := recOff(bk, i)
	kind, keyPos, _, _, ok := recAt(bk, pos)
	if !ok || pos < dirEnd(n) {
		return 0, errf(ErrCorrupt, "index bucket %d record %d at +%d: malformed or out of place", b, i, pos)
	}
	if kind&recOut == 0 {
		if uint64(bk[pos+1]) == uint64(len(key)) && string(bk[keyPos:keyPos+uint64(len(key))]) == string(key) {
			return pos, nil
		}
		return 0, nil
	}
	e := recEntry(bk, pos)
	switch im.outKey(e, key) {
	case outMatch:
		return pos, nil
	case outOutside:
		return 0, errf(ErrCorrupt, "index bucket %d record %d: entry offset %d is outside ENTRIES [%d, %d)", b, i, e, im.entOff, im.entEnd)
	case outKeyPast:
		return 0, errf(ErrCorrupt, "index bucket %d record %d: the %d-byte key of the entry at %d runs past ENTRIES' end %d", b, i, le.Uint16(im.b[e+2:]), e, im.entEnd)
	}
	return 0, nil
}

// What outKey finds at an OUT record's entry.
const (
	outOther   = iota // another key's entry
	outMatch          // the key's
	outOutside        // the entry's 8-byte head is not inside ENTRIES
	outKeyPast        // its key (of the key's length) runs past ENTRIES' end
)

// outKey: whether the entry at image offset e, which an OUT record names,
// holds key, with the bounds a lookup checks (the one owner of the OUT key
// rule: recMatch, and get2Fast's OUT hits).
func (im *image) outKey(e uint64, key []byte) int {
	if e < im.entOff || e+8 > im.entEnd {
		return outOutside
	}
	klen := uint64(le.Uint16(im.b[e+2:]))
	switch {
	case klen != uint64(len(key)):
		return outOther
	case klen > im.entEnd-e-8:
		return outKeyPast
	case string(im.b[e+8:e+8+klen]) == string(key):
		return outMatch
	}
	return outOther
}

// locate2 is the v2 lookup: the home bucket, then, when its D and filter
// announce displaced keys with this tag, up to min(D, max_probe) later
// buckets. It returns the bucket and the record's offset in it. Expiry is
// the caller's.
func (im *image) locate2(key []byte, h uint64) (uint64, uint64, error) {
	tag, b := tagOf(h), im.home(h)
	bk := im.bucket(b)
	touch := bk[64] // the pair's second line, requested with the first
	pos, err := im.scan2(b, tag, key)
	runtime.KeepAlive(touch)
	if pos != 0 || err != nil {
		return b, pos, err
	}
	d := uint64(bk[1])
	if d == 0 || !filterHas(bk, tag) {
		return 0, 0, ErrNotFound
	}
	if d == 255 || d > im.maxProbe { // 255: up to max_probe; a larger D is capped
		d = im.maxProbe
	}
	for ; d > 0; d-- {
		if b++; b == im.bucketCount {
			b = 0
		}
		if pos, err := im.scan2(b, tag, key); pos != 0 || err != nil {
			return b, pos, err
		}
	}
	return 0, 0, ErrNotFound
}

// onGet2Slow, when set (by tests only), is called on every general v2 get.
var onGet2Slow func()

// clock is "now" for expiry, in Unix seconds (tests replace it).
var clock = func() int64 { return time.Now().Unix() }

var errExpired = errf(ErrNotFound, "key expired (its record's expiry is at or before now)")

// expired: a record with expiry e (0: none) is absent at *now (read once
// per call, only for an image whose header says EXPIRY; 0 until read).
func (im *image) expired(e uint32, now *int64) bool {
	if e == 0 {
		return false
	}
	if *now == 0 {
		*now = clock()
	}
	return *now >= int64(e)
}

// recValue is the value of the well-formed record at pos of bucket b:
// inline, its bytes in the bucket with §8's shape (strlists by their count,
// as a lookup checks); OUT, its entry's.
func (im *image) recValue(b, pos uint64) (Value, error) {
	bk := im.bucket(b)
	kind, _, valPos, end, _ := recAt(bk, pos)
	if kind&recOut != 0 {
		v, _, err := im.decodeValue(recEntry(bk, pos))
		return v, err
	}
	n := uint64(bk[pos+2])
	v := Value{data: bk[valPos : valPos+n : valPos+n], typ: Type(kind & recTypeMask)}
	if err := v.shape(bk[valPos:end], im.sec[0].off+b*v2Bucket+pos); err != nil {
		return Value{}, err
	}
	return v, nil
}

// get2Slow is the general v2 get: every record kind, expiry, every error.
func (im *image) get2Slow(key []byte, h uint64, now *int64) (Value, error) {
	if onGet2Slow != nil {
		onGet2Slow()
	}
	b, pos, err := im.locate2(key, h)
	if err != nil {
		return Value{}, err
	}
	if im.expiry {
		bk := im.bucket(b)
		if im.expired(recExpiry(bk, pos, bk[pos]), now) {
			return Value{}, errExpired
		}
	}
	return im.recValue(b, pos)
}

// expiresOf: when key's record expires (0: never; always 0 in v1), expired
// or not.
func (im *image) expiresOf(key []byte) (uint32, error) {
	if len(key) > maxKeyLen {
		return 0, errKeyLen
	}
	if im.version != 2 {
		_, err := im.find(key)
		return 0, err
	}
	b, pos, err := im.locate2(key, im.hash(key))
	if err != nil {
		return 0, err
	}
	bk := im.bucket(b)
	return recExpiry(bk, pos, bk[pos]), nil
}

// recKey is record r's key: inline in bucket bk, or its entry's (decoded
// with every rule of §7 and §13, utf for verify).
func (im *image) recKey(bk *[v2Bucket]byte, r *rec, utf bool) ([]byte, entry, error) {
	if !r.out() {
		return bk[r.keyPos : r.keyPos+r.keyLen : r.keyPos+r.keyLen], entry{}, nil
	}
	e, err := im.decodeEntry(r.entry, utf)
	return e.key, e, err
}

// next2 is the v2 iteration step (the C reader's shmkv__iter2_next):
// the records of every bucket in index order, expired ones included, each
// decoded and its value checked as iteration checks (strlist strings too).
func (it *Iter) next2() bool {
	im := it.im
	for it.left == 0 {
		if it.bkt >= im.bucketCount {
			it.err = errf(ErrCorrupt, "the index holds %d records, entry_count is %d", it.seen, im.entryCount)
			return false
		}
		it.left = uint64(im.bucket(it.bkt)[0])
		it.rec = 0
		it.bkt++
	}
	b := it.bkt - 1
	bk := im.bucket(b)
	n := uint64(bk[0])
	if n > v2MaxRecords {
		it.err = errf(ErrCorrupt, "index bucket %d: count %d, at most %d", b, n, v2MaxRecords)
		return false
	}
	off := recOff(bk, it.rec)
	r, ok := decodeRec(bk, off)
	if !ok || off < dirEnd(n) {
		it.err = errf(ErrCorrupt, "index bucket %d record %d at +%d: malformed or out of place", b, it.rec, off)
		return false
	}
	key, e, err := im.recKey(bk, &r, false)
	var v Value
	if err == nil {
		if r.out() {
			v = e.val
		} else {
			v, err = im.recValue(b, r.pos)
			if err == nil && v.typ == TypeStrList {
				if why := checkStrList(v.data, false); why != "" {
					err = errf(ErrCorrupt, "index bucket %d record %d: strlist: %s", b, it.rec, why)
				}
			}
		}
	}
	if err != nil {
		it.err = err
		return false
	}
	it.cur = entry{key: key, val: v}
	it.expires = r.expires
	it.rec++
	it.left--
	it.seen++
	return true
}

// getBatch2 is GetBatch on a v2 image, a pipeline over blocks of
// pipeBlock keys. Pass p hashes the keys of block p and requests their home
// buckets; for block p-1, whose homes have arrived by then, it decides
// whether bucket b+1 is requested too (D and the filter announce displaced
// keys of its tag) and whether a key's home settles a miss by itself
// (homeSettles: then its lookup is a store of ErrNotFound, not get2Fast's
// walk, which cost a batched miss more than the memory the pipeline
// hides); block p-2 is looked up. So the lookups of one stretch of keys run
// while the lines of the next are on their way, where requesting a group
// and then waiting for it left the core idle for a memory round trip per
// group. The requests of a block are one call (prefetchHomes,
// prefetchNexts): Go saves no register across a call, and a call a key
// cost reloads of the loop's values. A key's hash, home and bucket are
// computed once and kept in rings for its later stages. The clock is read
// at most once for the whole call.
func (im *image) getBatch2(keys []string, vals []Value, errs []error) {
	var hs, homes [pipeRing]uint64
	var bks [pipeRing]*[v2Bucket]byte
	var ann, absent [pipeRing]bool // b+1 announced; settled by the home bucket alone
	const ring = pipeRing - 1      // a mask: pipeRing is a power of two
	now := int64(0)
	n := uint(len(keys))
	var sink byte
	for lo := uint(0); lo < n+2*pipeBlock; lo += pipeBlock {
		if lo < n { // hash block p, request its home buckets
			for j := lo; j < min(lo+pipeBlock, n); j++ {
				h := uint64(0)
				if k := keys[j]; len(k) > 8 && len(k) <= 16 && im.hashBits >= 64 {
					h = xxh3Len9To16(strBytes(k), im.seed) // im.hash, its short-key case inline
				} else if len(k) <= maxKeyLen {
					h = im.hash(strBytes(k))
				}
				b, bk := im.homeBucket(h)
				hs[j&ring], homes[j&ring], bks[j&ring] = h, b, bk
				if !havePrefetch {
					sink += bk[0] // a load where there is no hint: it holds the loop, still overlaps
				}
			}
			// Past n in a last short block: the ring's older buckets (or
			// nil): a hint, which never faults, of lines already asked for.
			prefetchHomes((*[pipeBlock]*[v2Bucket]byte)(bks[lo&ring:]))
		}
		if lo >= pipeBlock && lo-pipeBlock < n { // block p-1: b+1 where the home announces it
			for k := lo - pipeBlock; k < min(lo, n); k++ {
				bk, tag := bks[k&ring], tagOf(hs[k&ring])
				a := bk[1] != 0 && filterHas(bk, tag)
				ann[k&ring] = a
				absent[k&ring] = homeSettles(bk, tag, a) // a miss needs nothing more
			}
			c := (lo - pipeBlock) & ring
			prefetchNexts((*[pipeBlock]*[v2Bucket]byte)(bks[c:]), (*[pipeBlock]bool)(ann[c:]))
		}
		if lo < 2*pipeBlock {
			continue
		}
		for i := lo - 2*pipeBlock; i < min(lo-pipeBlock, n); i++ { // block p-2: look up, its lines in cache by now
			r := i & ring
			k := keys[i]
			switch {
			case len(k) > maxKeyLen:
				vals[i], errs[i] = Value{}, errKeyLen
			case absent[r]:
				vals[i], errs[i] = Value{}, ErrNotFound
			default:
				vals[i], errs[i] = im.get2Fast(strBytes(k), hs[r], homes[r], bks[r], &now)
			}
		}
	}
	runtime.KeepAlive(sink)
}

// verifyIndex2 is §17.7's check of a v2 index with layout B's bucket rules
// (the C reader's shmkv__verify_index2): every bucket's head, directory,
// records and uncovered bytes; the counts and the longest probe against the
// header; ENTRIES holds exactly the OUT records' entries.
func (im *image) verifyIndex2() error {
	var n, outs, shared, expiring, maxD uint64
	for b := uint64(0); b < im.bucketCount; b++ {
		bk := im.bucket(b)
		d, cnt := uint64(bk[1]), uint64(bk[0])
		switch {
		case d > im.maxProbe: // 255 ("up to max_probe") needs max_probe >= 255 too
			return errf(ErrCorrupt, "index bucket %d: displacement byte %d is over max_probe %d", b, d, im.maxProbe)
		case d == 0 && !allZero(bk[2:v2Head]):
			return errf(ErrCorrupt, "index bucket %d: filter bits without displaced keys", b)
		case cnt > v2MaxRecords:
			return errf(ErrCorrupt, "index bucket %d: count %d, at most %d", b, cnt, v2MaxRecords)
		}
		pos := dirEnd(cnt) // the record area
		for i := uint64(0); i < cnt; i++ {
			off := recOff(bk, i)
			if off < pos {
				return errf(ErrCorrupt, "index bucket %d record %d at +%d: before +%d (the directory's end or the previous record's)", b, i, off, pos)
			}
			r, ok := decodeRec(bk, off) // first: off may be past +128
			if !ok {
				return errf(ErrCorrupt, "index bucket %d record %d at +%d: malformed or past the bucket's end", b, i, off)
			}
			if !allZero(bk[pos:off]) {
				return errf(ErrCorrupt, "index bucket %d: a non-zero byte in [+%d, +%d), which no record covers", b, pos, off)
			}
			disp, sh, err := im.verifyRecord2(bk, b, i, &r, recDir(bk, i)>>v2DirTagShift)
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
		e, ok, err := im.nextEntry(pos, true)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if err := im.entryPadding(e); err != nil {
			return err
		}
		rb, rpos, err := im.locate2(e.key, im.hash(e.key))
		if err != nil || im.bucket(rb)[rpos]&recOut == 0 || recEntry(im.bucket(rb), rpos) != e.off {
			return errf(ErrCorrupt, "entry at offset %d: no OUT record of its key points at it", e.off)
		}
		ents++
		pos = e.end
	}
	if ents != outs {
		return errf(ErrCorrupt, "ENTRIES holds %d entries, the index %d OUT records", ents, outs)
	}
	return nil
}

// verifyRecord2 checks record i of bucket b (its directory tag bits,
// dir[i] >> 7: dt): expiry, value (UTF-8 and strlists in full), inline padding, tag and
// home against its key's hash, its displacement announced at home, and a
// lookup of its key finding it here. It returns the displacement and
// whether it is a shared OUT entry.
func (im *image) verifyRecord2(bk *[v2Bucket]byte, b, i uint64, r *rec, dt uint64) (uint64, uint64, error) {
	bad := func(format string, args ...any) (uint64, uint64, error) {
		return 0, 0, errf(ErrCorrupt, "index bucket %d record %d: "+format, append([]any{b, i}, args...)...)
	}
	if r.kind&recExpires != 0 && r.expires == 0 {
		return bad("expiry 0")
	}
	key, e, err := im.recKey(bk, r, true)
	if err != nil {
		return bad("%s", detail(err))
	}
	sh := uint64(0)
	if r.out() {
		if e.val.shared {
			sh = 1
		}
	} else {
		if !allZero(bk[r.keyPos+r.keyLen : r.valPos]) {
			return bad("padding before its value is not zero")
		}
		v, err := im.recValue(b, r.pos)
		if err != nil {
			return bad("%s", detail(err))
		}
		if v.typ == TypeStrList {
			if why := checkStrList(v.data, true); why != "" {
				return bad("strlist: %s", why)
			}
		} else if v.typ == TypeString && !utf8.Valid(v.data) {
			return bad("string value is not valid UTF-8")
		}
	}
	h := im.hash(key)
	tag := tagOf(h)
	if dt != dirTag(tag)>>v2DirTagShift {
		return bad("directory tag bits %03x, key hashes to tag %04x (low 9 bits %03x)", dt, tag, tag&0x1ff)
	}
	home := im.home(h)
	disp := (b + im.bucketCount - home) % im.bucketCount
	if disp > im.maxProbe {
		return bad("displacement %d is over max_probe %d", disp, im.maxProbe)
	}
	if disp > 0 && im.announced(home, tag) < disp {
		return bad("displaced by %d from bucket %d, which does not announce it", disp, home)
	}
	fb, fpos, err := im.locate2(key, h)
	if err != nil || fb != b || fpos != r.pos {
		return bad("looking its key up does not find it here (%v)", err)
	}
	return disp, sh, nil
}

// announced: how far from home bucket a key with this tag may be displaced
// (§17.3): 0, D, or max_probe for D = 255.
func (im *image) announced(home, tag uint64) uint64 {
	bk := im.bucket(home)
	d := uint64(bk[1])
	switch {
	case d == 0 || !filterHas(bk, tag):
		return 0
	case d == 255:
		return im.maxProbe
	}
	return d
}
