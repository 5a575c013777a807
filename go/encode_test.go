package shmkv

import (
	"math/bits"
	"sort"

	"github.com/zeebo/xxh3"
)

// A test-only encoder of format 2 images (layout B), written from the
// specification (FORMAT.md §6) and its builder conventions, so that
// the reader is tested before, and independently of, the C builder; and
// of delta images (§19): upserts and tombstones, inline and OUT, the
// filter, the header's words naming the base.

// rec2 is one record to encode: value holds value_len bytes (the encoder
// adds the NUL of bytes and string).
type rec2 struct {
	key     string
	typ     Type
	value   []byte
	expires uint32
	out     bool // OUT even when it would fit inline
	shared  bool // OUT, its value in VALUES (dedup)
	tomb    bool // a delta's tombstone (typ, value and expires unused)
}

type enc2Opts struct {
	buckets  uint64
	hashBits uint32 // 0: 64
	seed     uint64
	inline   uint64 // the inline bound (size with worst-case padding); 0: 64
	name     string
	delta    *deltaOpts // a delta image (FORMAT.md §19); nil: a plain image
	// extraEntries: bytes appended to ENTRIES that no record names (forged
	// images: an entry verify must refuse)
	extraEntries []byte
}

// deltaOpts: a delta's header words and its filter's size.
type deltaOpts struct {
	id    DeltaID
	words uint64 // FILTER's words; 0: the builder convention, max(1, ceil(records / 4))
}

// deltaOf: the options of a delta of base (an encoded image): its
// checksum, size, seed and hash bits; seq 1, prev 0.
func deltaOf(base []byte) enc2Opts {
	return enc2Opts{
		seed: le.Uint64(base[hdrHashSeed:]), hashBits: le.Uint32(base[hdrHashBits:]),
		delta: &deltaOpts{id: DeltaID{BaseChecksum: le.Uint64(base[hdrChecksum:]), BaseSize: uint64(len(base)), Seq: 1}},
	}
}

func encHash(key []byte, seed uint64, hashBits uint32) uint64 {
	h := xxh3.HashSeed(key, seed)
	if hashBits > 0 && hashBits < 64 {
		h = (h & (1<<hashBits - 1)) * hashMul
	}
	return h
}

type placed struct {
	rec2
	h, home uint64
	inl     bool
	size    uint64 // with worst-case padding (placement) — exact size comes at layout
}

func typeAlign(t Type) uint64 {
	if t.aligned8() {
		return 8
	}
	return 1
}

// recBytes is a record laid out at bucket offset q (inline: its padding
// depends on q).
func recBytes(p *placed, q uint64, unit uint64) []byte {
	var r []byte
	x := p.expires != 0
	if p.tomb { // §19.2: kind 0x10 exactly, key_len, value_len 0, the key; or kind 0x90 and the unit
		if !p.inl {
			return []byte{outTombKind, byte(unit), byte(unit >> 8), byte(unit >> 16), byte(unit >> 24), byte(unit >> 32)}
		}
		return append([]byte{inlineTombKind, byte(len(p.key)), 0}, p.key...)
	}
	if !p.inl {
		kind := byte(recOut)
		if x {
			kind |= recExpires
		}
		r = append(r, kind, byte(unit), byte(unit>>8), byte(unit>>16), byte(unit>>24), byte(unit>>32))
		if x {
			r = le.AppendUint32(r, p.expires)
		}
		return r
	}
	kind := byte(p.typ)
	if x {
		kind |= recExpires
	}
	r = append(r, kind, byte(len(p.key)), byte(len(p.value)))
	if x {
		r = le.AppendUint32(r, p.expires)
	}
	r = append(r, p.key...)
	a := typeAlign(p.typ)
	for (q+uint64(len(r)))%a != 0 {
		r = append(r, 0)
	}
	r = append(r, p.value...)
	if p.typ.nul() == 1 {
		r = append(r, 0)
	}
	return r
}

// fits: the records laid out from 8 + 2*count end at or before +128.
func fits(recs []*placed) bool {
	if len(recs) > maxRecords {
		return false
	}
	q := dirEnd(uint64(len(recs)))
	for _, p := range recs {
		q += uint64(len(recBytes(p, q, 0)))
	}
	return q <= bucketBytes
}

// encodeV2 builds a v2 image of recs (keys unique).
func encodeV2(recs []rec2, o enc2Opts) []byte {
	if o.inline == 0 {
		o.inline = 64
	}
	nb := o.buckets
	ps := make([]*placed, len(recs))
	for i, r := range recs {
		p := &placed{rec2: r}
		p.h = encHash([]byte(r.key), o.seed, o.hashBits)
		p.home, _ = bits.Mul64(p.h, nb)
		worst := uint64(recInlineHead+len(r.key)+len(r.value)) + typeAlign(r.typ) - 1 + r.typ.nul()
		if r.expires != 0 {
			worst += 4
		}
		if r.tomb {
			worst = uint64(recInlineHead + len(r.key))
		}
		p.inl = !r.out && !r.shared && len(r.key) <= 255 && len(r.value) <= 255 && worst <= o.inline
		p.size = worst
		if !p.inl {
			p.size = recOutHead
			if r.expires != 0 {
				p.size += 4
			}
		}
		ps[i] = p
	}
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].home != ps[j].home {
			return ps[i].home < ps[j].home
		}
		return ps[i].key < ps[j].key
	})
	bk := make([][]*placed, nb)
	d := make([]uint64, nb)
	filter := make([]uint64, nb)
	var rest []*placed
	for lo := 0; lo < len(ps); { // pass 1: home keys, smallest first
		hi := lo
		for hi < len(ps) && ps[hi].home == ps[lo].home {
			hi++
		}
		group := append([]*placed{}, ps[lo:hi]...)
		sort.SliceStable(group, func(i, j int) bool { return group[i].size < group[j].size })
		for _, p := range group {
			if fits(append(bk[p.home], p)) {
				bk[p.home] = append(bk[p.home], p)
			} else {
				rest = append(rest, p)
			}
		}
		lo = hi
	}
	sort.SliceStable(rest, func(i, j int) bool { return rest[i].home < rest[j].home })
	maxProbe := uint64(0)
	for _, p := range rest { // pass 2: the next bucket with room
		for dist := uint64(1); ; dist++ {
			if dist >= nb {
				panic("encodeV2: the records do not fit")
			}
			b := (p.home + dist) % nb
			if fits(append(bk[b], p)) {
				bk[b] = append(bk[b], p)
				d[p.home] = max(d[p.home], min(dist, 255))
				tag := tagOf(p.h)
				filter[p.home] |= 1 << ((tag * filterBits) >> 16)
				maxProbe = max(maxProbe, dist)
				break
			}
		}
	}

	// sections: INDEX at 4096, ENTRIES and VALUES after it, 64-aligned
	idxOff := uint64(headerBlock)
	entOff := align64(idxOff + nb*bucketBytes)
	var ents, vals []byte
	units := map[*placed]uint64{}
	shared := 0
	for b := range bk { // OUT entries in index order
		for _, p := range bk[b] {
			if p.inl {
				continue
			}
			units[p] = (entOff + uint64(len(ents))) / 8
			if p.tomb { // type 0, flags 0, key_len, value_len 0, the key, zeros to 8
				e := []byte{tombEntryType, 0, 0, 0, 0, 0, 0, 0}
				le.PutUint16(e[2:], uint16(len(p.key)))
				ents = append(ents, pad8(append(e, p.key...))...)
				continue
			}
			e := []byte{byte(p.typ), 0, 0, 0, 0, 0, 0, 0}
			le.PutUint16(e[2:], uint16(len(p.key)))
			le.PutUint32(e[4:], uint32(len(p.value)))
			e = append(e, p.key...)
			stored := append(append([]byte{}, p.value...), make([]byte, p.typ.nul())...)
			if p.shared {
				e[1] = entryShared
				shared++
				e = pad8(e)
				e = le.AppendUint64(e, uint64(len(vals))) // relative for now: fixed below
				vals = pad8(append(vals, stored...))
			} else {
				if p.typ.aligned8() {
					e = pad8(e)
				}
				e = append(e, stored...)
			}
			ents = append(ents, pad8(e)...)
		}
	}
	ents = append(ents, o.extraEntries...)
	valOff := align64(entOff + uint64(len(ents)))
	if shared > 0 { // the references: VALUES offsets
		for b := range bk {
			for _, p := range bk[b] {
				if p.shared {
					at := units[p]*8 - entOff + align8(8+uint64(len(p.key)))
					le.PutUint64(ents[at:], le.Uint64(ents[at:])+valOff)
				}
			}
		}
	}
	end := valOff + uint64(len(vals))
	var keyFilter []uint64 // a delta's FILTER (§19.3): every key's three bits
	filtOff := align64(end)
	if o.delta != nil {
		words := o.delta.words
		if words == 0 {
			words = max(1, (uint64(len(recs))+3)/4)
		}
		keyFilter = make([]uint64, words)
		for _, p := range ps {
			w, _ := bits.Mul64(p.h, words) // §19.3, spelled out (the reader's mayHold is tested against it)
			keyFilter[w] |= 1<<(p.h>>16&63) | 1<<(p.h>>22&63) | 1<<(p.h>>28&63)
		}
		end = filtOff + 8*words
	}
	size := (end + headerBlock - 1) / headerBlock * headerBlock
	img := make([]byte, size)
	expiry := false
	for b := range bk {
		out := img[idxOff+uint64(b)*bucketBytes:][:bucketBytes]
		n := uint64(len(bk[b]))
		out[0], out[1] = byte(n), byte(d[b])
		for k := 0; k < 6; k++ {
			out[2+k] = byte(filter[b] >> (8 * k))
		}
		q := dirEnd(n)
		for i, p := range bk[b] { // dir[i] = (tag << 7 | off) & 0xffff
			le.PutUint16(out[bucketHead+dirBytes*uint64(i):], uint16(tagOf(p.h)<<dirTagShift|q))
			q += uint64(copy(out[q:], recBytes(p, q, units[p])))
			expiry = expiry || p.expires != 0
		}
	}
	copy(img[entOff:], ents)
	copy(img[valOff:], vals)
	for i, w := range keyFilter {
		le.PutUint64(img[filtOff+8*uint64(i):], w)
	}

	copy(img, magic)
	le.PutUint32(img[8:], 2)
	le.PutUint32(img[12:], headerBlock)
	le.PutUint64(img[16:], layoutHash)
	flags, secs := uint64(0), []section{{idxOff, nb * bucketBytes}, {entOff, uint64(len(ents))}, {valOff, uint64(len(vals))}}
	if o.delta != nil {
		le.PutUint64(img[16:], deltaLayoutHash)
		flags |= hdrFlagDelta
		secs = append(secs, section{filtOff, 8 * uint64(len(keyFilter))})
		id := o.delta.id
		for i, w := range []uint64{id.BaseChecksum, id.BaseSize, id.Prev, id.Seq} {
			le.PutUint64(img[hdrReserved+8*i:], w)
		}
	}
	if shared > 0 {
		flags |= hdrFlagDedup
	}
	if expiry {
		flags |= hdrFlagExpiry
	}
	le.PutUint64(img[24:], flags)
	le.PutUint64(img[32:], size)
	le.PutUint64(img[40:], uint64(len(recs)))
	le.PutUint64(img[48:], nb)
	le.PutUint32(img[56:], bucketBytes)
	hb := o.hashBits
	if hb == 0 {
		hb = 64
	}
	le.PutUint32(img[60:], hb)
	le.PutUint64(img[64:], o.seed)
	le.PutUint32(img[72:], uint32(maxProbe))
	le.PutUint32(img[76:], uint32(len(secs)))
	le.PutUint64(img[112:], uint64(shared))
	copy(img[128:191], o.name)
	for i, s := range secs {
		dsc := img[192+32*i:]
		le.PutUint32(dsc, uint32(i+1))
		le.PutUint64(dsc[8:], s.off)
		le.PutUint64(dsc[16:], s.size)
	}
	fixSums(img)
	return img
}

func align64(x uint64) uint64 { return (x + 63) &^ 63 }

func pad8(b []byte) []byte {
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	return b
}

// bucketOfKey: the bucket and record index holding key in an encoded image
// (for the damage tests).
func bucketOfKey(t interface{ Fatalf(string, ...any) }, img []byte, key string) (uint64, uint64) {
	im, err := checkImage(img, true)
	if err != nil {
		t.Fatalf("%v", err)
	}
	b, pos, err := im.locate([]byte(key), im.hash([]byte(key)))
	if err != nil {
		t.Fatalf("%q: %v", key, err)
	}
	bk := im.bucket(b)
	n := uint64(bk[0])
	for i := uint64(0); i < n; i++ {
		if recOff(bk, i) == pos {
			return b, i
		}
	}
	t.Fatalf("%q: no directory entry", key)
	return 0, 0
}
