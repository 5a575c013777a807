package shmkv

import (
	"math/bits"
	"runtime"
	"time"
)

// The index and the lookup (lib/FORMAT.md §6): 128-byte buckets
// whose head holds a 2-byte directory entry per record (9 tag bits and the
// record's offset), small entries inline, OUT records naming an entry in
// ENTRIES, and a per-record expiry. Each rule of the bucket and the record
// is one function here, which the general lookup, the hot path (fast.go),
// iteration and verify all call.

// bucket is bucket b in place. home and the probe keep b below
// bucket_count, and INDEX is bucket_count * 128 bytes (checkSections), so
// the one bounds check here never fails.
func (im *image) bucket(b uint64) *[bucketBytes]byte {
	return (*[bucketBytes]byte)(im.index[b*bucketBytes : b*bucketBytes+bucketBytes])
}

// homeBucket: the home bucket of hash h and its bytes.
func (im *image) homeBucket(h uint64) (uint64, *[bucketBytes]byte) {
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

// tomb: a tombstone of a delta (recAt accepts one only in a delta).
func (r *rec) tomb() bool { return r.kind&recTomb != 0 }

// expirySize is how many bytes of expiry follow the head of a record of
// this kind: 4 with kind bit 6, else 0.
func expirySize(kind byte) uint64 { return uint64(kind&recExpires) >> 4 }

// inlineSpan: where the value of an inline record at pos of type t, whose
// key starts at keyPos, starts (key_len bytes on, aligned for its type) and
// where the record ends (value_len bytes on, and its NUL where the type has
// one). The one owner of the inline record's layout: recAt and getFast.
func inlineSpan(bk *[bucketBytes]byte, pos, keyPos uint64, t Type) (valPos, end uint64) {
	valPos = keyPos + uint64(bk[pos+1])
	if t.aligned8() {
		valPos = align8(valPos)
	}
	return valPos, valPos + uint64(bk[pos+2]) + t.nul()
}

// recAt decodes the head of the record at bucket offset pos: its kind; for
// an inline record where its key and value start; its end. ok is false when
// the record is malformed (kind bits 4 or 5, a type that is none, an OUT
// record with type bits, bytes past +128). In a delta (tomb), kind bit 4 is
// a tombstone's, of kind 0x10 (inline: the key, value_len 0, its value
// position its end) or 0x90 (OUT) exactly (FORMAT.md §19.2, §19.4). Reads
// nothing past +128.
func recAt(bk *[bucketBytes]byte, pos uint64, tomb bool) (kind byte, keyPos, valPos, end uint64, ok bool) {
	if pos+recInlineHead > bucketBytes {
		return 0, 0, 0, 0, false
	}
	kind = bk[pos]
	if kind&recTomb != 0 {
		switch {
		case tomb && kind == inlineTombKind:
			keyPos = pos + recInlineHead
			end = keyPos + uint64(bk[pos+1])
			return kind, keyPos, end, end, bk[pos+2] == 0 && end <= bucketBytes
		case tomb && kind == outTombKind:
			end = pos + recOutHead
			return kind, 0, 0, end, end <= bucketBytes
		}
		return 0, 0, 0, 0, false
	}
	x := expirySize(kind)
	if kind&recOut != 0 {
		end = pos + recOutHead + x
		return kind, 0, 0, end, kind&^(recOut|recExpires) == 0 && end <= bucketBytes
	}
	t := Type(kind & recTypeMask)
	if kind&^recKnown != 0 || !t.known() {
		return 0, 0, 0, 0, false
	}
	keyPos = pos + recInlineHead + x
	valPos, end = inlineSpan(bk, pos, keyPos, t)
	return kind, keyPos, valPos, end, end <= bucketBytes
}

// recExpiry is the expiry of a well-formed record at pos (0: none).
func recExpiry(bk *[bucketBytes]byte, pos uint64, kind byte) uint32 {
	switch {
	case kind&recExpires == 0:
		return 0
	case kind&recOut != 0:
		return le.Uint32(bk[pos+recOutHead:])
	}
	return le.Uint32(bk[pos+recInlineHead:])
}

// recEntry is an OUT record's entry offset (its 40-bit unit * 8).
func recEntry(bk *[bucketBytes]byte, pos uint64) uint64 {
	return (uint64(le.Uint32(bk[pos+1:])) | uint64(bk[pos+5])<<32) << 3
}

// decodeRec is recAt with everything spelled out (iteration, verify).
func decodeRec(bk *[bucketBytes]byte, pos uint64, tomb bool) (rec, bool) {
	kind, keyPos, valPos, end, ok := recAt(bk, pos, tomb)
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
func dirEnd(n uint64) uint64 { return bucketHead + dirBytes*n }

// recOff is record i's offset in its bucket, dir[i] & 0x7f (the low byte's
// low 7 bits), i < 16 (the mask keeps the index inside the bucket without a
// bounds check).
func recOff(bk *[bucketBytes]byte, i uint64) uint64 {
	return uint64(bk[(bucketHead+dirBytes*i)&(bucketBytes-1)] & dirOffMask)
}

// recDir is record i's directory entry dir[i], i < 16.
func recDir(bk *[bucketBytes]byte, i uint64) uint64 {
	return uint64(le.Uint16(bk[bucketHead+dirBytes*i:]))
}

// dirTag is the directory bits a key of this tag has: the tag's low 9 bits
// at bits 7..15, the offset bits 0. Record i is a candidate for the key
// when recDir & dirTagMask equals it.
func dirTag(tag uint64) uint64 { return tag << dirTagShift & dirTagMask }

// filterHas: bucket bk's filter has the bit of this tag, so keys of its tag
// may be displaced from it (§6.3; D says how far).
func filterHas(bk *[bucketBytes]byte, tag uint64) bool {
	fi := (tag * filterBits) >> 16 // < 48
	return bk[2+(fi>>3)&7]>>(fi&7)&1 != 0
}

// probes: how many buckets after home bucket bk a key of this tag may lie
// in (§6.3, §6.4): none unless bk's D is set and its filter has the tag's bit;
// D = 255, or a D past max_probe, means max_probe.
func (im *image) probes(bk *[bucketBytes]byte, tag uint64) uint64 {
	d := uint64(bk[1])
	if d == 0 || !filterHas(bk, tag) {
		return 0
	}
	if d == maxDispByte || d > im.maxProbe {
		return im.maxProbe
	}
	return d
}

const (
	lanes16 = 0x0001000100010001
	highs16 = 0x8000800080008000
	lows16  = 0x7fff7fff7fff7fff
)

// laneMask[k] keeps the first k lanes of a directory word's matches.
var laneMask = [5]uint64{0, 0xffff, 0xffff_ffff, 0xffff_ffff_ffff, ^uint64(0)}

// dirMatches: bit 16*j+15 set where directory lane j of word w (four u16
// entries) is a candidate for want, dirTag(tag) in every lane (dirTag(tag)
// * lanes16): (lane & 0xff80) == dirTag(tag). Exact, lane by lane: a lane's
// low 15 bits plus 0x7fff set its bit 15 exactly when they are not all
// zero, its own bit 15 is ORed in, and the sum never passes bit 15 (at most
// 0xfffe), so no lane carries into or borrows from its neighbour
// (TestDirMatches).
func dirMatches(w, want uint64) uint64 {
	x := w&(dirTagMask*lanes16) ^ want
	return ^((x&lows16 + lows16) | x) & highs16
}

// dirCandidates: the candidates for want among directory word w (records
// 4w to 4w+3) of bucket bk, which holds n > 4w records: dirMatches with the
// lanes past count cleared.
func dirCandidates(bk *[bucketBytes]byte, w, n, want uint64) uint64 {
	return dirMatches(le.Uint64(bk[bucketHead+8*(w&3):]), want) & laneMask[min(n-4*w, 4)]
}

// homeSettles: bucket bk, the home of a key with this tag (want: its
// dirTag in every lane), settles that the key is absent: it announces no
// displaced key of the tag and none of its records is a candidate, with at
// most four to look at (one directory word). False is no answer.
func homeSettles(bk *[bucketBytes]byte, want uint64, announces bool) bool {
	n := uint64(bk[0])
	return !announces && n <= 4 && dirCandidates(bk, 0, n, want) == 0
}

// scan looks for key among bucket b's records with this tag: the
// directory's candidates (9 bits: a candidate only), each decoded with
// bounds and its key compared, inline or in its OUT entry. It returns the
// record's offset in the bucket, 0 for none (a record starts at +8 or
// later).
func (im *image) scan(b, tag uint64, key []byte) (uint64, error) {
	bk := im.bucket(b)
	n := uint64(bk[0])
	if n > maxRecords {
		return 0, errf(ErrCorrupt, "index bucket %d: count %d, at most %d", b, n, maxRecords)
	}
	want := dirTag(tag) * lanes16
	for w := uint64(0); 4*w < n; w++ {
		for m := dirCandidates(bk, w, n, want); m != 0; m &= m - 1 {
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
func (im *image) recMatch(bk *[bucketBytes]byte, b, n, i uint64, key []byte) (uint64, error) {
	pos := recOff(bk, i)
	kind, keyPos, _, _, ok := recAt(bk, pos, im.delta)
	if !ok || pos < dirEnd(n) {
		return 0, errf(ErrCorrupt, "index bucket %d record %d at +%d: malformed or out of place", b, i, pos)
	}
	if kind&recOut == 0 {
		if uint64(bk[pos+1]) == uint64(len(key)) && keyEq(bk, keyPos, key) {
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
		return 0, errf(ErrCorrupt, "index bucket %d record %d: the %d-byte key of the entry at %d runs past ENTRIES' end %d", b, i, le.Uint16(im.b[e+entKeyLen:]), e, im.entEnd)
	}
	return 0, nil
}

// keyEq: the len(key) bytes at bk[kp:] are key's (kp+len(key) <= 128, the
// record's bounds checked): two 8-byte words for a key of 8 to 16 bytes,
// else a compare of the bytes.
func keyEq(bk *[bucketBytes]byte, kp uint64, key []byte) bool {
	n := uint64(len(key))
	if n >= 8 && n <= 16 && kp <= bucketBytes-n {
		a := le.Uint64(key) ^ le.Uint64(bk[kp:])
		z := le.Uint64(key[n-8:]) ^ le.Uint64(bk[kp+n-8:])
		return a|z == 0
	}
	return string(bk[kp:kp+n]) == string(key)
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
// rule: recMatch, and getFast's OUT hits).
func (im *image) outKey(e uint64, key []byte) int {
	if e < im.entOff || e+entrySize > im.entEnd {
		return outOutside
	}
	klen := uint64(le.Uint16(im.b[e+entKeyLen:]))
	switch {
	case klen != uint64(len(key)):
		return outOther
	case klen > im.entEnd-e-entrySize:
		return outKeyPast
	case string(im.b[e+entrySize:e+entrySize+klen]) == string(key):
		return outMatch
	}
	return outOther
}

// locate is the lookup: the home bucket, then the buckets its D and filter
// announce for the key's tag (probes). It returns the bucket and the
// record's offset in it. Expiry is the caller's.
func (im *image) locate(key []byte, h uint64) (uint64, uint64, error) {
	tag, b := tagOf(h), im.home(h)
	bk := im.bucket(b)
	touch := bk[64] // the pair's second line, requested with the first
	pos, err := im.scan(b, tag, key)
	runtime.KeepAlive(touch)
	if pos != 0 || err != nil {
		return b, pos, err
	}
	for d := im.probes(bk, tag); d > 0; d-- {
		if b++; b == im.bucketCount {
			b = 0
		}
		if pos, err := im.scan(b, tag, key); pos != 0 || err != nil {
			return b, pos, err
		}
	}
	return 0, 0, ErrNotFound
}

// onGetSlow, when set (by tests only), is called on every general get.
var onGetSlow func()

// clock is "now" for expiry, in Unix seconds (tests replace it).
var clock = func() int64 { return time.Now().Unix() }

var errExpired = errf(ErrNotFound, "key expired (its record's expiry is at or before now)")

// isExpired: a record with expiry e (0: none) is absent at now (§17:
// expired when now >= expires).
func isExpired(e uint32, now int64) bool { return e != 0 && now >= int64(e) }

// expired is isExpired with the clock read on demand: *now is read once
// per call, and only for a record that has an expiry (so only in an image
// whose header says EXPIRY); 0 until read (a pinned clock: set before).
func (im *image) expired(e uint32, now *int64) bool {
	if e == 0 {
		return false
	}
	if *now == 0 {
		*now = clock()
	}
	return isExpired(e, *now)
}

// recValue is the value of the well-formed record at pos of bucket b:
// inline, its bytes in the bucket with §8's shape (strlists by their count,
// as a lookup checks); OUT, its entry's.
func (im *image) recValue(b, pos uint64) (Value, error) {
	bk := im.bucket(b)
	kind, _, valPos, end, _ := recAt(bk, pos, im.delta)
	if kind&recOut != 0 {
		v, _, err := im.decodeValue(recEntry(bk, pos))
		return v, err
	}
	n := uint64(bk[pos+2])
	v := Value{data: bk[valPos : valPos+n : valPos+n], typ: Type(kind & recTypeMask)}
	if err := v.shape(bk[valPos:end], im.sec[kindIndex-1].off+b*bucketBytes+pos); err != nil {
		return Value{}, err
	}
	return v, nil
}

// getSlow is the general get: every record kind, expiry, every error.
func (im *image) getSlow(key []byte, h uint64, now *int64) (Value, error) {
	if onGetSlow != nil {
		onGetSlow()
	}
	b, pos, err := im.locate(key, h)
	if err != nil {
		return Value{}, err
	}
	if bk := im.bucket(b); bk[pos]&recTomb != 0 { // a delta's: the key removed
		return Value{}, im.tombstone(bk, b, pos)
	}
	if im.expiry {
		bk := im.bucket(b)
		if im.expired(recExpiry(bk, pos, bk[pos]), now) {
			return Value{}, errExpired
		}
	}
	return im.recValue(b, pos)
}

// get is the single get of key (FORMAT.md §6.4): its home bucket, the
// home's second line and the next bucket requested (prefetchNext: §6.5's
// reader policy, lib's SHMKV_PREFETCH_NEXT 2), then getFast. The clock
// is read only for an expiring record, at most once; v.clock, a pinned
// clock (SetClock), is read instead where it is not 0. v is the View the
// get is made through (ErrClosed once released; the copying getters pass
// one of their own, only its clock and delta set), checked here so that
// View.Get inlines into its caller. Through a delta (v.dm, FORMAT.md §19;
// a lower and a top, v.top, §19.6) the key is hashed once (the deltas have
// the base's seed and bits) and the base's lines are requested before the
// deltas' filters are read, so that the filter reads overlap them (as
// lib's shmkv__get_h): a key no filter lets through (most keys) then costs
// only the filter test; the others go to getOver.
func (im *image) get(key []byte, v *View) (Value, error) {
	if v.released.Load() {
		return Value{}, ErrClosed
	}
	if len(key) > maxKeyLen {
		return Value{}, errKeyLen
	}
	var h uint64
	if im.shortHash(len(key)) {
		h = xxh3Len9To16(key, im.seed) // hash's common case, inlined
	} else {
		h = im.hash(key)
	}
	now := v.clock
	b, bk := im.homeBucket(h)
	if v.dm == nil {
		prefetchNext(bk)
		return im.getFast(key, h, b, bk, &now)
	}
	prefetchHome(bk) // a request decides nothing: a delta that holds the key still answers first
	if (v.top != nil && v.top.mayHold(h)) || v.dm.mayHold(h) {
		return im.getOver(key, h, b, bk, v, now)
	}
	return im.getFast(key, h, b, bk, &now)
}

// getOver is get's answer for a key a delta's filter lets through: the
// top's lookup first (FORMAT.md §19.6), then the lower's, whose answer
// other than "no record" (bare ErrNotFound: an upsert's value, errExpired,
// errTombstone, damage) is the get's; else the base answers from bucket b
// (bk), whose lines get requested.
//
//go:noinline
func (im *image) getOver(key []byte, h, b uint64, bk *[bucketBytes]byte, v *View, now int64) (Value, error) {
	if t := v.top; t != nil && t.mayHold(h) { // through a top: it answers before the lower (FORMAT.md §19.6)
		tb, tbk := t.homeBucket(h)
		if val, err := t.getFast(key, h, tb, tbk, &now); err != ErrNotFound {
			return val, err
		}
	}
	if d := v.dm; d.mayHold(h) { // through a delta: it answers first (FORMAT.md §19)
		db, dbk := d.homeBucket(h)
		if val, err := d.getFast(key, h, db, dbk, &now); err != ErrNotFound {
			return val, err // its upsert, expired or not, or its tombstone: never the base's record
		}
	}
	return im.getFast(key, h, b, bk, &now)
}

// expiresOf: when key's record expires (0: never), expired or not; a
// delta's tombstone: the key is absent.
func (im *image) expiresOf(key []byte) (uint32, error) {
	if len(key) > maxKeyLen {
		return 0, errKeyLen
	}
	return im.expiresAt(key, im.hash(key))
}

func (im *image) expiresAt(key []byte, h uint64) (uint32, error) {
	b, pos, err := im.locate(key, h)
	if err != nil {
		return 0, err
	}
	bk := im.bucket(b)
	if bk[pos]&recTomb != 0 {
		return 0, im.tombstone(bk, b, pos)
	}
	return recExpiry(bk, pos, bk[pos]), nil
}

// recKey is record r's key: inline in bucket bk, or its entry's (decoded
// with every rule of §7 and §13; §19.2 for an OUT tombstone's).
func (im *image) recKey(bk *[bucketBytes]byte, r *rec) ([]byte, entry, error) {
	if !r.out() {
		return bk[r.keyPos : r.keyPos+r.keyLen : r.keyPos+r.keyLen], entry{}, nil
	}
	if r.tomb() {
		e, err := im.decodeTombEntry(r.entry)
		return e.key, e, err
	}
	e, err := im.decodeEntry(r.entry)
	return e.key, e, err
}
