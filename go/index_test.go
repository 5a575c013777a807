package shmkv

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// Format 2 (layout B) against images of the test encoder (encode_test.go):
// every type inline and OUT, shared values, long keys, displaced keys,
// expiry, and every verify rule of FORMAT.md §13 broken once.

func f64le(xs ...float64) []byte {
	var b []byte
	for _, x := range xs {
		b = le.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func strlist(ss ...string) []byte {
	b := le.AppendUint32(nil, uint32(len(ss)))
	end := uint32(0)
	b = le.AppendUint32(b, 0)
	var data []byte
	for _, s := range ss {
		data = append(append(data, s...), 0)
		end += uint32(len(s) + 1)
		b = le.AppendUint32(b, end)
	}
	return append(b, data...)
}

// v2Records: every type, empty values, inline and OUT, shared, long keys,
// expiring records.
func v2Records() []rec2 {
	r := []rec2{
		{key: "s", typ: TypeString, value: []byte("hello")},
		{key: "", typ: TypeString, value: []byte("the empty key")},
		{key: "bytes/empty", typ: TypeBytes, value: nil},
		{key: "v", typ: TypeBytes, value: []byte{0, 1, 0xfe}},
		{key: "i", typ: TypeInt64, value: le.AppendUint64(nil, uint64(1<<63))},
		{key: "f", typ: TypeFloat64, value: f64le(0.5)},
		{key: "b0", typ: TypeBool, value: []byte{0}},
		{key: "b1", typ: TypeBool, value: []byte{1}},
		{key: "fl", typ: TypeF32List, value: []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40}},
		{key: "fl/empty", typ: TypeF32List},
		{key: "dl", typ: TypeF64List, value: f64le(1, -2, 3)},
		{key: "il", typ: TypeI64List, value: le.AppendUint64(le.AppendUint64(nil, 7), 8)},
		{key: "l", typ: TypeStrList, value: strlist("a", "bc", "")},
		{key: "l/empty", typ: TypeStrList, value: strlist()},
		{key: "out/s", typ: TypeString, value: []byte("an OUT string"), out: true},
		{key: "out/il", typ: TypeI64List, value: le.AppendUint64(nil, 9), out: true},
		{key: "big", typ: TypeBytes, value: bytes.Repeat([]byte("x"), 300)},
		{key: strings.Repeat("k", 255), typ: TypeString, value: []byte("255-byte key")},
		{key: strings.Repeat("K", 1000), typ: TypeString, value: []byte("1000-byte key")},
		{key: "sh1", typ: TypeString, value: []byte("a value long enough to be shared by two keys"), shared: true},
		{key: "sh2", typ: TypeString, value: []byte("a value long enough to be shared by two keys"), shared: true},
		{key: "exp/inline", typ: TypeString, value: []byte("expires"), expires: 2_000_000_000},
		{key: "exp/out", typ: TypeI64List, value: le.AppendUint64(nil, 1), expires: 2_000_000_000, out: true},
		{key: "exp/one", typ: TypeInt64, value: le.AppendUint64(nil, 1), expires: 1},
	}
	for i := 0; i < 200; i++ {
		r = append(r, rec2{key: fmt.Sprintf("key_%d", i), typ: TypeString, value: []byte(fmt.Sprintf("val_%d", i))})
	}
	return r
}

func openV2(t *testing.T, b []byte, flags OpenFlags) *View {
	t.Helper()
	img, err := OpenBytes(b, flags)
	if err != nil {
		t.Fatal(err)
	}
	v, err := img.Pin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Release(); img.Close() })
	return v
}

// withClock pins the expiry clock to now for the test, counting its reads.
func withClock(t *testing.T, now int64) *int {
	reads := new(int)
	old := clock
	clock = func() int64 { *reads++; return now }
	t.Cleanup(func() { clock = old })
	return reads
}

// checkAll: every record is found with its value (Get, GetBatch), iteration
// yields each once with its expiry, and misses miss. A delta's tombstones
// (recs of tomb): their keys are absent, Records yields each as a
// TypeTombstone, Entries none.
func checkAll(t *testing.T, v *View, recs []rec2, now int64) {
	t.Helper()
	want := map[string]rec2{}
	keys := []string{}
	for _, r := range recs {
		want[r.key] = r
		keys = append(keys, r.key)
	}
	keys = append(keys, "no such key", "key_200", "s ")
	vals, errs := make([]Value, len(keys)), make([]error, len(keys))
	v.GetBatch(keys, vals, errs)
	for i, k := range keys {
		got, err := v.Get(k)
		r, ok := want[k]
		gone := ok && (r.tomb || r.expires != 0 && now >= int64(r.expires))
		if !ok || gone {
			if !errors.Is(err, ErrNotFound) || !errors.Is(errs[i], ErrNotFound) {
				t.Fatalf("%.20q: %v, batch %v; want ErrNotFound", k, err, errs[i])
			}
			continue
		}
		if err != nil || errs[i] != nil {
			t.Fatalf("%.20q: %v, batch %v", k, err, errs[i])
		}
		for _, g := range []Value{got, vals[i]} {
			if g.Type() != r.typ || !bytes.Equal(g.Raw(), r.value) || g.Shared() != r.shared {
				t.Fatalf("%.20q: %s %x shared=%v, want %s %x", k, g.Type(), g.Raw(), g.Shared(), r.typ, r.value)
			}
		}
		if e, err := v.Expires(k); err != nil || e != r.expires {
			t.Fatalf("%.20q: Expires %d (%v), want %d", k, e, err, r.expires)
		}
	}
	for _, all := range []bool{true, false} { // Records, then Entries
		seq, live := v.Records(), 0
		if !all {
			seq = v.Entries()
		}
		seen := map[string]bool{}
		for e, err := range seq {
			if err != nil {
				t.Fatalf("iteration (all %v): %v", all, err)
			}
			k := string(e.Key)
			r, ok := want[k]
			if !ok || seen[k] || e.Expires != r.expires || !bytes.Equal(e.Value.Raw(), r.value) || e.Value.Type() != r.typ {
				t.Fatalf("iteration (all %v): %.20q (expires %d) unexpected or repeated", all, k, e.Expires)
			}
			if !all && (r.tomb || r.expires != 0 && now >= int64(r.expires)) {
				t.Fatalf("Entries yields %.20q, expired at %d (now %d), or a tombstone", k, r.expires, now)
			}
			seen[k] = true
		}
		for _, r := range recs {
			if !r.tomb && (r.expires == 0 || now < int64(r.expires)) {
				live++
			}
		}
		if all && len(seen) != len(recs) || !all && len(seen) != live {
			t.Fatalf("iteration (all %v): %d of %d records (%d live)", all, len(seen), len(recs), live)
		}
	}
}

func TestRead(t *testing.T) {
	recs := v2Records()
	for _, o := range []enc2Opts{
		{buckets: 97, name: "roomy"},
		{buckets: 61, seed: 7, name: "full"},     // most buckets full: displaced keys
		{buckets: 300, hashBits: 5, name: "hb5"}, // 32 hashes for 224 keys: long probes
	} {
		t.Run(o.name, func(t *testing.T) {
			b := encodeV2(recs, o)
			v := openV2(t, b, Deep)
			im := v.im
			if !im.expiry || im.maxProbe == 0 {
				t.Fatalf("expiry %v max_probe %d: the image tests too little", im.expiry, im.maxProbe)
			}
			t.Logf("%d buckets, max_probe %d, %d bytes", im.bucketCount, im.maxProbe, len(b))
			withClock(t, 1_999_999_999)
			checkAll(t, v, recs, 1_999_999_999)
			if err := v.Verify(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Expiry (FORMAT.md §17): found at E-1, absent at E and after; the clock
// is read once per call and never for an image without the EXPIRY flag.
func TestExpiry(t *testing.T) {
	recs := []rec2{
		{key: "a", typ: TypeString, value: []byte("x"), expires: 1000},
		{key: "b", typ: TypeString, value: []byte("y"), expires: 1000, out: true},
		{key: "c", typ: TypeString, value: []byte("z")},
	}
	v := openV2(t, encodeV2(recs, enc2Opts{buckets: 3}), Deep)
	for _, now := range []int64{999, 1000, 1001} {
		reads := withClock(t, now)
		checkAll(t, v, recs, now)
		*reads = 0
		_, err := v.Get("a")
		if *reads != 1 || (now < 1000) != (err == nil) {
			t.Fatalf("now %d: get a: %v after %d clock reads", now, err, *reads)
		}
		if now >= 1000 && !strings.Contains(err.Error(), "expired") {
			t.Errorf("the miss does not say expired: %v", err)
		}
		*reads = 0
		keys := []string{"a", "b", "c", "a", "b"}
		vals, errs := make([]Value, 5), make([]error, 5)
		v.GetBatch(keys, vals, errs)
		if *reads != 1 {
			t.Fatalf("a batch read the clock %d times", *reads)
		}
		*reads = 0
		if _, err := v.Get("c"); err != nil || *reads != 0 {
			t.Fatalf("get c (no expiry): %v, %d clock reads", err, *reads)
		}
	}
	// No EXPIRY flag: the clock is never read, and no record expires (the
	// image is forged: verify refuses it, a plain open does not look).
	b := encodeV2(recs, enc2Opts{buckets: 3})
	le.PutUint64(b[24:], le.Uint64(b[24:])&^hdrFlagExpiry)
	fixSums(b)
	if _, err := OpenBytes(b, Deep); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("EXPIRY clear with expiring records: deep open says %v", err)
	}
	v = openV2(t, b, 0)
	reads := withClock(t, 5000)
	for _, k := range []string{"a", "b", "c"} {
		if _, err := v.Get(k); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	if *reads != 0 {
		t.Fatalf("the clock was read %d times for an image without EXPIRY", *reads)
	}
}

// The header rules (§3, §12, §15): version before layout hash (a format 1
// image is ErrVersion naming its converter, never ErrLayout), layout hash,
// bucket_slots, flags, INDEX.
func TestHeader(t *testing.T) {
	good := encodeV2(v2Records(), enc2Opts{buckets: 97})
	const v1LayoutHash, previewLayoutHash = 0x52171befdcf1d7ee, 0xfba82e8976eb9578
	cases := []struct {
		name string
		mod  func(b []byte)
		want error
		msg  string // the message's end, where it matters
	}{
		{"format 1", func(b []byte) { le.PutUint32(b[8:], 1) }, ErrVersion, msgRetired},
		{"format 1 with its layout hash", func(b []byte) { le.PutUint32(b[8:], 1); le.PutUint64(b[16:], v1LayoutHash) }, ErrVersion, msgRetired},
		{"version 3", func(b []byte) { le.PutUint32(b[8:], 3) }, ErrVersion, "image format version 3, this reader reads version 2"},
		{"version 0", func(b []byte) { le.PutUint32(b[8:], 0) }, ErrVersion, "image format version 0, this reader reads version 2"},
		{"preview layout hash", func(b []byte) { le.PutUint64(b[16:], previewLayoutHash) }, ErrLayout, ""},
		{"format 1's layout hash", func(b []byte) { le.PutUint64(b[16:], v1LayoutHash) }, ErrLayout, ""},
		{"bucket_slots 8", func(b []byte) { le.PutUint32(b[56:], 8) }, ErrCorrupt, ""},
		{"unknown flag", func(b []byte) { b[24] |= 4 }, ErrCorrupt, ""},
		{"entry_count over 16 per bucket", func(b []byte) { le.PutUint64(b[40:], 16*97+1) }, ErrCorrupt, ""},
		{"INDEX size", func(b []byte) { le.PutUint64(b[192+16:], 96*128) }, ErrCorrupt, ""},
	}
	for _, c := range cases {
		b := bytes.Clone(good)
		c.mod(b)
		fixSums(b)
		if _, err := OpenBytes(b, 0); !errors.Is(err, c.want) || !strings.HasSuffix(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %v ending %q", c.name, err, c.want, c.msg)
		}
	}
	if _, err := OpenBytes(good, Deep); err != nil {
		t.Fatal(err)
	}
}

// Every rule of a bucket (FORMAT.md §6, §13) broken once: verify refuses it, and
// lookups and iteration meet it without a panic (ErrCorrupt, or a miss
// where the damage is where a lookup does not look).
func TestVerifyRules(t *testing.T) {
	recs := v2Records()
	o := enc2Opts{buckets: 61, seed: 7}
	good := encodeV2(recs, o)
	im, err := checkImage(good, true)
	if err != nil {
		t.Fatal(err)
	}
	bk := func(b []byte, key string) ([]byte, uint64) { // the bucket of key, record i
		bb, i := bucketOfKey(t, good, key)
		return b[im.sec[0].off+bb*bucketBytes:][:bucketBytes], i
	}
	var displaced string
	for _, r := range recs {
		h := im.hash([]byte(r.key))
		if b, _ := bucketOfKey(t, good, r.key); b != im.home(h) {
			displaced = r.key
			break
		}
	}
	if displaced == "" {
		t.Fatal("no displaced key")
	}
	cases := []struct {
		name string
		mod  func(b []byte)
	}{
		{"count 17", func(b []byte) { c, _ := bk(b, "s"); c[0] = 17 }},
		{"count one more", func(b []byte) { c, _ := bk(b, "s"); c[0]++ }},
		{"off before the directory's end", func(b []byte) {
			c, i := bk(b, "s")
			setOff(c, i, byte(dirEnd(uint64(c[0]))-1))
		}},
		{"records overlap", func(b []byte) {
			c, _ := bk(b, "s")
			if c[0] < 2 {
				panic("one record")
			}
			setOff(c, 1, byte(offOf(c, 0)+1))
		}},
		{"offsets descend", func(b []byte) {
			c, _ := bk(b, "s")
			if c[0] < 2 {
				panic("one record")
			}
			o0, o1 := offOf(c, 0), offOf(c, 1)
			setOff(c, 0, byte(o1))
			setOff(c, 1, byte(o0))
		}},
		{"a byte after the records", func(b []byte) { c, _ := bk(b, "s"); c[127] = 1 }},
		{"kind bit 4", func(b []byte) { c, i := bk(b, "s"); c[offOf(c, i)] |= 0x10 }},
		{"kind bit 5", func(b []byte) { c, i := bk(b, "s"); c[offOf(c, i)] |= 0x20 }},
		{"type 0 inline", func(b []byte) { c, i := bk(b, "s"); c[offOf(c, i)] &^= 0x0f }},
		{"type 10", func(b []byte) { c, i := bk(b, "s"); c[offOf(c, i)] = 10 }},
		{"OUT with type bits", func(b []byte) { c, i := bk(b, "out/s"); c[offOf(c, i)] |= 2 }},
		{"OUT unit outside ENTRIES", func(b []byte) { c, i := bk(b, "out/s"); c[offOf(c, i)+5] = 0x7f }},
		{"inline padding", func(b []byte) { c, i := bk(b, "i"); p := offOf(c, i); c[p+3+1] = 1 }},
		{"tag bit 0 (dir bit 7)", func(b []byte) { c, i := bk(b, "s"); c[bucketHead+2*i] ^= 0x80 }},
		{"tag bit 8 (dir bit 15)", func(b []byte) { c, i := bk(b, "s"); c[bucketHead+2*i+1] ^= 0x80 }},
		{"D over max_probe", func(b []byte) { c, _ := bk(b, "s"); c[1] = 255 }},
		{"filter without D", func(b []byte) {
			for c := im.sec[0].off; c < im.sec[0].end(); c += bucketBytes {
				if b[c+1] == 0 {
					b[c+2] = 1
					return
				}
			}
			panic("no bucket without D")
		}},
		{"displaced key not announced", func(b []byte) {
			h := im.hash([]byte(displaced))
			c := b[im.sec[0].off+im.home(h)*bucketBytes:]
			fi := (tagOf(h) * filterBits) >> 16
			c[2+fi>>3] &^= 1 << (fi & 7)
		}},
		{"expiry 0", func(b []byte) {
			c, i := bk(b, "exp/inline")
			p := offOf(c, i)
			clear(c[p+3 : p+7])
		}},
		{"string not UTF-8", func(b []byte) { c, i := bk(b, "s"); p := offOf(c, i); c[p+3+1] = 0xff }},
		{"bool 2", func(b []byte) { c, i := bk(b, "b1"); p := offOf(c, i); c[p+3+2] = 2 }},
		{"no NUL", func(b []byte) { c, i := bk(b, "v"); p := offOf(c, i); c[p+3+1+3] = 9 }},
		{"value past the bucket", func(b []byte) { c, i := bk(b, "s"); p := offOf(c, i); c[p+2] = 250 }},
		{"entry_count", func(b []byte) { le.PutUint64(b[40:], le.Uint64(b[40:])-1) }},
		{"max_probe", func(b []byte) { le.PutUint32(b[72:], le.Uint32(b[72:])+1) }},
		{"dedup_refs", func(b []byte) { le.PutUint64(b[112:], 1) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := bytes.Clone(good)
			c.mod(b)
			fixSums(b)
			if _, err := OpenBytes(b, Deep); err == nil {
				t.Fatal("deep open accepts it")
			} else {
				t.Log(err)
			}
			img, err := OpenBytes(b, 0)
			if err != nil {
				return // a header rule
			}
			defer img.Close()
			withClock(t, 0)
			exercise(t, img)
			for _, r := range recs {
				if _, err := img.Bytes(r.key); err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrType) {
					t.Fatalf("%.20q: %v", r.key, err)
				}
			}
		})
	}
}

// offOf is record i's offset in bucket c (dir[i] & 0x7f); setOff changes
// it, keeping dir[i]'s tag bits.
func offOf(c []byte, i uint64) uint64 { return uint64(c[bucketHead+2*i] & dirOffMask) }

func setOff(c []byte, i uint64, off byte) {
	c[bucketHead+2*i] = c[bucketHead+2*i]&^dirOffMask | off&dirOffMask
}

// A bucket's word-at-a-time directory compare equals the lane-by-lane
// definition, (dir & 0xff80) == (tag << 7) & 0xff80, on every lane: the
// offset bits and the tag's bits above its low 9 are ignored, no lane's
// verdict leaks into its neighbour's (zero lanes next to non-zero ones,
// 0x0000 and 0xff80 lanes, random words); a tag that repeats in a bucket is
// compared record by record.
func TestDirMatches(t *testing.T) {
	ref := func(w, want uint64) uint64 {
		m := uint64(0)
		for j := 0; j < 4; j++ {
			if (w>>(16*j))&dirTagMask == want {
				m |= 1 << (16*j + 15)
			}
		}
		return m
	}
	check := func(w, tag uint64) {
		t.Helper()
		want := dirTag(tag)
		if got, exp := dirMatches(w, want*lanes16), ref(w, want); got != exp {
			t.Fatalf("word %#016x tag %#04x: %#016x, lane by lane %#016x", w, tag, got, exp)
		}
	}
	// tag 5 at lanes 1 and 3 (offsets 0x11, 0x7f, 0x20, 0x00), tag 5 | 0x200
	// (the same low 9 bits) at lane 0, tag 6 at lane 2
	w := uint64(5<<7)<<48 | uint64(6<<7|0x20)<<32 | uint64(5<<7|0x7f)<<16 | uint64((5|0x200)<<7&0xffff|0x11)
	if m := dirMatches(w, dirTag(5)*lanes16); m != 1<<15|1<<31|1<<63 {
		t.Fatalf("tag 5: %#x", m)
	}
	if m := dirMatches(w, dirTag(0xfe05)*lanes16); m != 1<<15|1<<31|1<<63 { // low 9 bits 0x005
		t.Fatalf("tag 0xfe05: %#x", m)
	}
	if m := dirMatches(w, dirTag(6)*lanes16); m != 1<<47 {
		t.Fatalf("tag 6: %#x", m)
	}
	if m := dirMatches(w, dirTag(7)*lanes16); m != 0 {
		t.Fatalf("tag 7: %#x", m)
	}
	for _, lanes := range [][4]uint64{{0, 0xff80, 0, 0xff80}, {0xffff, 0, 0x7f, 0x80}, {0x80, 0x7f, 0xff, 0x100}, {0xff80, 0xffff, 0x7f80, 0x8000}} {
		w := lanes[0] | lanes[1]<<16 | lanes[2]<<32 | lanes[3]<<48
		for _, tag := range []uint64{0, 1, 0x1ff, 0x200, 0xff, 0x100, 0xffff, 0xfe00} {
			check(w, tag)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for k := 0; k < 200000; k++ {
		w := rng.Uint64()
		tag := rng.Uint64() & 0xffff
		if k%2 == 0 { // make some lanes match
			for j := 0; j < 4; j++ {
				if rng.IntN(2) == 0 {
					w = w&^(dirTagMask<<(16*j)) | dirTag(tag)<<(16*j)
				}
			}
		}
		check(w, tag)
	}
	// one bucket with 16 records of the same tag (hash_bits 1: two hashes)
	var recs []rec2
	for i := 0; i < 30; i++ {
		recs = append(recs, rec2{key: fmt.Sprint(i), typ: TypeBool, value: []byte{byte(i % 2)}})
	}
	v := openV2(t, encodeV2(recs, enc2Opts{buckets: 4, hashBits: 1}), Deep)
	checkAll(t, v, recs, 0)
}

// Two keys in one bucket whose tags differ but share their low 9 bits (the
// bits the directory keeps) are both candidates of either's lookup; the key
// compare tells them apart, and a missing key with the same low 9 bits and
// the same home misses. The pair inline, and one of it OUT; other keys
// fill the buckets.
func TestDirTagLow9Bits(t *testing.T) {
	keys := low9Keys()
	im := &image{hashBits: 64, bucketCount: low9Buckets}
	h0, h1 := im.hash([]byte(keys[0])), im.hash([]byte(keys[1]))
	t.Logf("%q tag %#04x, %q tag %#04x, %q (absent), bucket %d", keys[0], tagOf(h0), keys[1], tagOf(h1), keys[2], im.home(h0))
	for _, out := range []bool{false, true} {
		recs := low9Recs(keys, out)
		img := encodeV2(recs, enc2Opts{buckets: low9Buckets})
		v := openV2(t, img, Deep) // verify's tag rule holds for both
		checkAll(t, v, recs, 0)
		if _, err := v.Get(keys[2]); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%q: %v, want ErrNotFound", keys[2], err)
		}
		b0, i0 := bucketOfKey(t, img, keys[0])
		b1, i1 := bucketOfKey(t, img, keys[1])
		if b0 != b1 { // the smallest records: placed at home first
			t.Fatalf("out=%v: %q in bucket %d, %q in %d", out, keys[0], b0, keys[1], b1)
		}
		bk := v.im.bucket(b0) // the directory holds both as candidates of either
		if d0, d1 := recDir(bk, i0), recDir(bk, i1); d0&dirTagMask != d1&dirTagMask || d0 == d1 {
			t.Fatalf("dir %#04x and %#04x", d0, d1)
		}
		if m := candidates(bk, tagOf(h0)); m != 1<<i0|1<<i1 {
			t.Fatalf("out=%v: candidates %#x, want records %d and %d", out, m, i0, i1)
		}
	}
}

const low9Buckets = 16

// low9Keys: two keys of one home bucket (of low9Buckets, seed 0) whose tags
// differ in their high bits only, then a third of the same home and low 9
// bits.
func low9Keys() []string {
	type hk struct{ home, low9 uint64 }
	im := &image{hashBits: 64, bucketCount: low9Buckets}
	seen := map[hk][]string{}
	var keys []string
	for i := 0; len(keys) < 3; i++ {
		k := fmt.Sprintf("k%d", i)
		h := im.hash([]byte(k))
		c := hk{im.home(h), tagOf(h) & 0x1ff}
		for _, o := range seen[c] {
			if len(keys) == 0 && tagOf(im.hash([]byte(o))) != tagOf(h) {
				keys = []string{o, k}
			} else if len(keys) == 2 && (o == keys[0] || o == keys[1]) {
				keys = append(keys, k)
			}
		}
		seen[c] = append(seen[c], k)
	}
	return keys
}

// low9Recs: the pair of low9Keys (values "zero" and "one"; the first OUT if
// out) and 40 other keys.
func low9Recs(keys []string, out bool) []rec2 {
	recs := []rec2{
		{key: keys[0], typ: TypeString, value: []byte("zero"), out: out},
		{key: keys[1], typ: TypeString, value: []byte("one")},
	}
	for i := 0; i < 40; i++ {
		recs = append(recs, rec2{key: fmt.Sprintf("filler_%d", i), typ: TypeInt64, value: le.AppendUint64(nil, uint64(i))})
	}
	return recs
}

// candidates: bit i set where record i of bk is a candidate for tag, by
// dirMatches one directory entry at a time.
func candidates(bk *[bucketBytes]byte, tag uint64) uint64 {
	m := uint64(0)
	for i := uint64(0); i < uint64(bk[0]); i++ {
		if dirMatches(recDir(bk, i), dirTag(tag)*lanes16)&(1<<15) != 0 {
			m |= 1 << i
		}
	}
	return m
}

// Format 2 gets allocate nothing either: hits inline and OUT, misses,
// expired keys, batches.
func TestGetAllocatesNothingAnyRecord(t *testing.T) {
	v := openV2(t, encodeV2(v2Records(), enc2Opts{buckets: 61, seed: 7}), 0)
	withClock(t, 1_999_999_999)
	keys := []string{"s", "missing", "out/s", "exp/one", "dl", "sh1"}
	vals, errs := make([]Value, len(keys)), make([]error, len(keys))
	n := testing.AllocsPerRun(200, func() {
		for _, k := range keys {
			_, _ = v.Get(k)
		}
		if _, err := v.Get("exp/one"); !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		v.GetBatch(keys, vals, errs)
	})
	if n != 0 {
		t.Fatalf("%v allocations per run", n)
	}
}

// TestTagOf: a key's tag is its hash's low 16 bits, 0 read as 1 (FORMAT.md
// §5), computed without a branch.
func TestTagOf(t *testing.T) {
	for _, c := range []struct{ h, tag uint64 }{
		{0, 1}, {0x10000, 1}, {0xffff_ffff_ffff_0000, 1}, {1, 1}, {2, 2},
		{0x1234_5678_9abc_def0, 0xdef0}, {0xffff, 0xffff}, {^uint64(0), 0xffff},
	} {
		if got := tagOf(c.h); got != c.tag {
			t.Errorf("tagOf(%#x) = %#x, want %#x", c.h, got, c.tag)
		}
	}
}
