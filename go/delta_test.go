package shmkv

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

// Delta images (FORMAT.md §19) of the test encoder (encode_test.go): a
// delta read alone, a base read through one (upserts replace, tombstones
// hide, other keys come from the base, filter false positives, expiry on
// both sides), ErrBase for a delta of another image.

// deltaRecs: changes to v2Records' keys (an upsert of the same type, of
// another, inline over OUT and OUT over inline, shared; an expired upsert
// over a live key, a live one over an expired key), new keys, tombstones
// inline and OUT of present and absent keys, and 60 upserts of key_N.
func deltaRecs() []rec2 {
	r := []rec2{
		{key: "s", typ: TypeString, value: []byte("HELLO")},
		{key: "i", typ: TypeString, value: []byte("now a string")},
		{key: "out/s", typ: TypeString, value: []byte("a new OUT string"), out: true},
		{key: "big", typ: TypeI64List, value: le.AppendUint64(nil, 42)},
		{key: "b0", typ: TypeBool, value: []byte{1}, out: true},
		{key: "sh1", typ: TypeString, value: []byte("a shared value of the delta, long enough"), shared: true},
		{key: "new/sh", typ: TypeString, value: []byte("a shared value of the delta, long enough"), shared: true},
		{key: "new/inline", typ: TypeBool, value: []byte{1}},
		{key: "new/out", typ: TypeF64List, value: f64le(1, 2), out: true},
		{key: "new/l", typ: TypeStrList, value: strlist("x", "yz")},
		{key: strings.Repeat("N", 700), typ: TypeString, value: []byte("a new 700-byte key")},
		{key: "key_5", typ: TypeString, value: []byte("expires in the delta"), expires: 1000},
		{key: "key_6", typ: TypeString, value: []byte("expires in the delta, OUT"), expires: 1000, out: true},
		{key: "exp/one", typ: TypeInt64, value: le.AppendUint64(nil, 2)},
		{key: "exp/inline", typ: TypeString, value: []byte("later"), expires: 2_000_000_100},
		{key: "v", tomb: true},
		{key: "", tomb: true},
		{key: "fl", tomb: true, out: true},
		{key: strings.Repeat("K", 1000), tomb: true},
		{key: "never/there", tomb: true},
		{key: "never/there/out", tomb: true, out: true},
		{key: "exp/out", tomb: true},
	}
	for i := 100; i < 160; i++ {
		r = append(r, rec2{key: fmt.Sprintf("key_%d", i), typ: TypeString, value: []byte(fmt.Sprintf("delta_%d", i))})
	}
	return r
}

// deltaPair: an encoded base of v2Records (o) and a delta of deltaRecs for
// it (dbuckets buckets; words FILTER words, 0: the convention).
func deltaPair(o enc2Opts, dbuckets, words uint64) (base, delta []byte) {
	base = encodeV2(v2Records(), o)
	do := deltaOf(base)
	do.buckets, do.delta.words, do.name = dbuckets, words, "delta"
	return base, encodeV2(deltaRecs(), do)
}

func openImage(t *testing.T, b []byte, flags OpenFlags) *Image {
	t.Helper()
	img, err := OpenBytes(b, flags)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { img.Close() })
	return img
}

func pin(t *testing.T, img interface{ Pin() (*View, error) }) *View {
	t.Helper()
	v, err := img.Pin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Release)
	return v
}

// merged: the records of base read through delta (§19.5's merge; expired
// upserts stay, hiding the base's record).
func merged(base, delta []rec2) map[string]rec2 {
	m := map[string]rec2{}
	for _, r := range base {
		m[r.key] = r
	}
	for _, r := range delta {
		if r.tomb {
			delete(m, r.key)
		} else {
			m[r.key] = r
		}
	}
	return m
}

func live(r rec2, now int64) bool { return r.expires == 0 || now < int64(r.expires) }

// checkThrough: every key of base, delta and a few absent ones answers
// through img (base read through delta) as the merge says at clock now:
// Get, GetBatch, Expires, the copying getters; Records and Entries yield
// the delta's upserts in its index order, then the base's records the
// delta does not hold in the base's (the orders of Records of bv and dv,
// the base and the delta read alone); Len and Verify.
func checkThrough(t *testing.T, img *Image, bv, dv *View, base, delta []rec2, now int64) {
	t.Helper()
	withClock(t, now)
	v := pin(t, img)
	m := merged(base, delta)
	inDelta := map[string]rec2{}
	var keys []string
	for _, r := range append(append([]rec2{}, base...), delta...) {
		keys = append(keys, r.key)
	}
	for _, r := range delta {
		inDelta[r.key] = r
	}
	keys = append(keys, "no such key", "key_999", "never/there", "s ")
	vals, errs := make([]Value, len(keys)), make([]error, len(keys))
	v.GetBatch(keys, vals, errs)
	for i, k := range keys {
		got, err := v.Get(k)
		r, ok := m[k]
		if !ok || !live(r, now) {
			if !errors.Is(err, ErrNotFound) || !errors.Is(errs[i], ErrNotFound) {
				t.Fatalf("now %d, %.20q: %v, batch %v; want ErrNotFound", now, k, err, errs[i])
			}
			checkGetters(t, img, k, "SHMKV_ENOTFOUND", 0)
		} else {
			if err != nil || errs[i] != nil {
				t.Fatalf("now %d, %.20q: %v, batch %v", now, k, err, errs[i])
			}
			for _, g := range []Value{got, vals[i]} {
				if g.Type() != r.typ || !bytes.Equal(g.Raw(), r.value) || g.Shared() != r.shared {
					t.Fatalf("now %d, %.20q: %s %q shared=%v, want %s %q", now, k, g.Type(), g.Raw(), g.Shared(), r.typ, r.value)
				}
			}
			checkGetters(t, img, k, "OK", r.typ)
		}
		e, err := v.Expires(k)
		if !ok {
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("Expires(%.20q): %d, %v; want ErrNotFound", k, e, err)
			}
		} else if err != nil || e != r.expires {
			t.Fatalf("Expires(%.20q): %d, %v; want %d", k, e, err, r.expires)
		}
	}
	// the orders: the delta's upserts, then the base's records it lacks
	var wantAll, wantLive []Entry
	for _, src := range []*View{dv, bv} {
		for e, err := range src.Records() {
			if err != nil {
				t.Fatal(err)
			}
			if _, held := inDelta[string(e.Key)]; e.Value.Type() == TypeTombstone || src == bv && held {
				continue
			}
			wantAll = append(wantAll, e)
			if live(rec2{expires: e.Expires}, now) {
				wantLive = append(wantLive, e)
			}
		}
	}
	for _, it := range []struct {
		name string
		seq  func(func(Entry, error) bool)
		want []Entry
	}{{"Records", v.Records(), wantAll}, {"Entries", v.Entries(), wantLive}} {
		i := 0
		for e, err := range it.seq {
			if err != nil {
				t.Fatalf("%s: %v", it.name, err)
			}
			if i >= len(it.want) {
				t.Fatalf("%s yields more than %d", it.name, len(it.want))
			}
			w := it.want[i]
			if !bytes.Equal(e.Key, w.Key) || e.Expires != w.Expires || e.Value.Type() != w.Value.Type() || !bytes.Equal(e.Value.Raw(), w.Value.Raw()) {
				t.Fatalf("%s %d: %.20q expires %d, want %.20q expires %d", it.name, i, e.Key, e.Expires, w.Key, w.Expires)
			}
			i++
		}
		if i != len(it.want) {
			t.Fatalf("%s yields %d, want %d", it.name, i, len(it.want))
		}
	}
	if len(wantAll) != len(m) || v.Len() != len(m) {
		t.Fatalf("Records %d, Len %d, the merge %d records", len(wantAll), v.Len(), len(m))
	}
	if err := v.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestFilterBits: mayHold is §19.3's test exactly: word mulhi(h, words)
// (computed here in 128 bits), bits (h >> 16) & 63, (h >> 22) & 63 and
// (h >> 28) & 63 all set; one of them clear, every other bit of the filter
// set, says no.
func TestFilterBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for k := 0; k < 5000; k++ {
		h, words := rng.Uint64(), 1+rng.Uint64N(512)
		var p big.Int
		w := p.Rsh(p.Mul(new(big.Int).SetUint64(h), new(big.Int).SetUint64(words)), 64).Uint64()
		set := []uint64{h >> 16 & 63, h >> 22 & 63, h >> 28 & 63}
		f := make([]byte, 8*words) // the key's bits alone
		for _, b := range set {
			f[8*w+b/8] |= 1 << (b % 8)
		}
		im := &image{}
		im.setFilter(f)
		if !im.mayHold(h) {
			t.Fatalf("h %#x, %d words: its bits in word %d set, mayHold says no", h, words, w)
		}
		for _, b := range set {
			g := bytes.Repeat([]byte{0xff}, int(8*words))
			g[8*w+b/8] &^= 1 << (b % 8)
			im.setFilter(g)
			if im.mayHold(h) {
				t.Fatalf("h %#x, %d words: bit %d of word %d clear, mayHold says yes", h, words, b, w)
			}
		}
	}
}

// TestDeltaAlone: a delta opens (deep), says what it is; read alone, its
// upserts are found, a tombstone's key is absent (Get, GetBatch, Expires,
// the getters), Entries yields the live upserts, Records every record with
// its tombstones as TypeTombstone.
func TestDeltaAlone(t *testing.T) {
	base, delta := deltaPair(enc2Opts{buckets: 97}, 23, 0)
	img := openImage(t, delta, Deep)
	v := pin(t, img)
	id, ok := img.DeltaID()
	want := DeltaID{BaseChecksum: le.Uint64(base[hdrChecksum:]), BaseSize: uint64(len(base)), Seq: 1}
	if !img.IsDelta() || !ok || id != want || img.Checksum() != le.Uint64(delta[hdrChecksum:]) || img.Name() != "delta" {
		t.Fatalf("IsDelta %v, DeltaID %+v %v (want %+v), Checksum %#x", img.IsDelta(), id, ok, want, img.Checksum())
	}
	b := openImage(t, base, 0)
	if _, ok := b.DeltaID(); ok || b.IsDelta() || b.Checksum() != want.BaseChecksum {
		t.Fatalf("the base: IsDelta %v, DeltaID %v, Checksum %#x", b.IsDelta(), ok, b.Checksum())
	}
	recs := deltaRecs()
	var upserts []rec2
	for _, r := range recs {
		if !r.tomb {
			upserts = append(upserts, r)
			continue
		}
		vals, errs := []Value{{}}, []error{nil}
		v.GetBatch([]string{r.key}, vals, errs)
		_, err := v.Get(r.key)
		_, xerr := v.Expires(r.key)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "tombstone") || !errors.Is(errs[0], ErrNotFound) || !errors.Is(xerr, ErrNotFound) {
			t.Fatalf("tombstone %.20q: %v, batch %v, Expires %v", r.key, err, errs[0], xerr)
		}
		checkGetters(t, img, r.key, "SHMKV_ENOTFOUND", 0)
	}
	for _, now := range []int64{999, 1000, deltaNow} {
		withClock(t, now)
		checkAll(t, v, recs, now) // gets, Expires; Records (tombstones too) and Entries as sets
	}
	n, tombs := 0, 0
	for e, err := range v.Records() {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if e.Value.Type() == TypeTombstone {
			tombs++
			if e.Expires != 0 || len(e.Value.Raw()) != 0 || e.Value.Count() != 0 || e.Value.Type().String() != "tombstone" {
				t.Fatalf("tombstone %q: %+v", e.Key, e)
			}
			if _, err := e.Value.Bytes(); !errors.Is(err, ErrType) {
				t.Fatalf("a tombstone's Bytes: %v", err)
			}
		}
	}
	for e, err := range v.Entries() {
		if err != nil || e.Value.Type() == TypeTombstone {
			t.Fatalf("Entries yields %q %v", e.Key, err)
		}
	}
	if n != len(recs) || tombs != len(recs)-len(upserts) || v.Len() != len(recs) {
		t.Fatalf("Records: %d records, %d tombstones; Len %d; the delta has %d, %d", n, tombs, v.Len(), len(recs), len(recs)-len(upserts))
	}
}

const deltaNow = 1_999_999_999 // base's exp/one and the delta's key_5, key_6 expired; the rest not

// TestThrough: a base read through a delta answers as the merge says,
// at clocks before and after each expiry of either side, for bases of
// three fills (displaced keys, hash_bits 5: long probes) and deltas of
// the conventional filter and of a one-word filter (almost every key a
// false "maybe": the delta's lookup misses, the base answers).
func TestThrough(t *testing.T) {
	for _, c := range []struct {
		name  string
		o     enc2Opts
		words uint64
	}{
		{"roomy", enc2Opts{buckets: 97}, 0},
		{"full", enc2Opts{buckets: 61, seed: 7}, 0},
		{"hb5", enc2Opts{buckets: 300, hashBits: 5}, 0},
		{"one filter word", enc2Opts{buckets: 61, seed: 7}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			base, delta := deltaPair(c.o, 23, c.words)
			bimg, dimg := openImage(t, base, Deep), openImage(t, delta, Deep)
			through, err := bimg.WithDelta(dimg)
			if err != nil {
				t.Fatal(err)
			}
			defer through.Close()
			if through.IsDelta() || through.Checksum() != bimg.Checksum() || through.Name() != bimg.Name() {
				t.Fatalf("through: IsDelta %v, Checksum %#x, Name %q", through.IsDelta(), through.Checksum(), through.Name())
			}
			bv, dv := pin(t, bimg), pin(t, dimg)
			fp, lacks := 0, 0 // base keys the delta lacks, and those its filter lets through
			inDelta := map[string]bool{}
			for _, r := range deltaRecs() {
				inDelta[r.key] = true
			}
			for _, r := range v2Records() {
				if !inDelta[r.key] {
					lacks++
					if dv.im.mayHold(dv.im.hash([]byte(r.key))) {
						fp++
					}
				}
			}
			t.Logf("%d of %d base keys the delta lacks pass its %d-word filter", fp, lacks, dv.im.filterWords)
			if c.words == 1 && fp < 50 {
				t.Fatalf("a one-word filter let %d keys through: the false positives are not exercised", fp)
			}
			for _, now := range []int64{999, 1000, deltaNow, 2_000_000_050, 2_000_000_100, 3_000_000_000} {
				checkThrough(t, through, bv, dv, v2Records(), deltaRecs(), now)
			}
		})
	}
}

// TestThroughExpiry: an upsert that has expired hides the base's live
// record (the base is not asked); a live upsert over an expired record
// is found; the clock is read once per get, batch and iteration, and
// never when neither image has the EXPIRY flag.
func TestThroughExpiry(t *testing.T) {
	base := encodeV2([]rec2{
		{key: "a", typ: TypeString, value: []byte("base a")},
		{key: "b", typ: TypeString, value: []byte("base b"), expires: 500},
		{key: "c", typ: TypeString, value: []byte("base c")},
	}, enc2Opts{buckets: 3})
	do := deltaOf(base)
	do.buckets = 2
	delta := encodeV2([]rec2{
		{key: "a", typ: TypeString, value: []byte("delta a"), expires: 1000},
		{key: "b", typ: TypeString, value: []byte("delta b")},
	}, do)
	through, err := openImage(t, base, Deep).WithDelta(openImage(t, delta, Deep))
	if err != nil {
		t.Fatal(err)
	}
	defer through.Close()
	for _, c := range []struct {
		now     int64
		a, b, c string // "": absent
	}{{400, "delta a", "delta b", "base c"}, {999, "delta a", "delta b", "base c"}, {1000, "", "delta b", "base c"}, {5000, "", "delta b", "base c"}} {
		reads := withClock(t, c.now)
		v := pin(t, through)
		for k, want := range map[string]string{"a": c.a, "b": c.b, "c": c.c} {
			*reads = 0
			got, err := v.Get(k)
			if want == "" && !errors.Is(err, ErrNotFound) || want != "" && (err != nil || string(got.Raw()) != want) {
				t.Fatalf("now %d, %s: %q %v, want %q", c.now, k, got.Raw(), err, want)
			}
			if *reads > 1 {
				t.Fatalf("now %d, %s: %d clock reads", c.now, k, *reads)
			}
		}
		*reads = 0
		vals, errs := make([]Value, 3), make([]error, 3)
		v.GetBatch([]string{"a", "b", "c"}, vals, errs)
		n := 0
		for range v.Entries() {
			n++
		}
		if *reads != 2 {
			t.Fatalf("now %d: a batch and an iteration read the clock %d times", c.now, *reads)
		}
	}
	// neither with EXPIRY: no clock read, through gets, batches, iterations
	plainBase := encodeV2([]rec2{{key: "a", typ: TypeBool, value: []byte{0}}, {key: "z", typ: TypeBool, value: []byte{1}}}, enc2Opts{buckets: 2})
	do = deltaOf(plainBase)
	do.buckets = 1
	plainDelta := encodeV2([]rec2{{key: "a", typ: TypeBool, value: []byte{1}}, {key: "z", tomb: true}}, do)
	th, err := openImage(t, plainBase, Deep).WithDelta(openImage(t, plainDelta, Deep))
	if err != nil {
		t.Fatal(err)
	}
	defer th.Close()
	reads := withClock(t, 1)
	v := pin(t, th)
	if got, err := v.Get("a"); err != nil || got.Raw()[0] != 1 {
		t.Fatalf("a: %v %v", got.Raw(), err)
	}
	if _, err := v.Get("z"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("z: %v", err)
	}
	v.GetBatch([]string{"a", "z"}, make([]Value, 2), make([]error, 2))
	for range v.Entries() {
	}
	if *reads != 0 {
		t.Fatalf("%d clock reads without the EXPIRY flag", *reads)
	}
}

// TestWithDeltaErrBase: §19.4's table, each row broken once: ErrBase
// (SHMKV_EBASE), naming both checksums; nothing is pinned after a refusal.
func TestWithDeltaErrBase(t *testing.T) {
	base, delta := deltaPair(enc2Opts{buckets: 61, seed: 7}, 23, 0)
	other := encodeV2(v2Records()[:50], enc2Opts{buckets: 61, seed: 7})
	bimg, dimg, oimg := openImage(t, base, 0), openImage(t, delta, 0), openImage(t, other, 0)
	sum := func(b []byte) string { return fmt.Sprintf("%#016x", le.Uint64(b[hdrChecksum:])) }
	forged := func(mod func(b []byte)) *Image {
		b := bytes.Clone(delta)
		mod(b)
		fixSums(b)
		return openImage(t, b, Deep)
	}
	reseeded := deltaOf(base)
	reseeded.buckets, reseeded.seed = 23, 8
	rebits := deltaOf(base)
	rebits.buckets, rebits.hashBits = 23, 63
	through, err := bimg.WithDelta(dimg)
	if err != nil {
		t.Fatal(err)
	}
	defer through.Close()
	for _, c := range []struct {
		name        string
		base, delta *Image
		msg         []string // what the message names
	}{
		{"a delta of another image", oimg, dimg, []string{sum(other), sum(base), sum(delta)}},
		{"base_size", bimg, forged(func(b []byte) { le.PutUint64(b[hdrReserved+8*resBaseSize:], uint64(len(base))+4096) }), []string{sum(base), fmt.Sprint(len(base) + 4096)}},
		{"base_checksum", bimg, forged(func(b []byte) { b[hdrReserved+8*resBaseChecksum] ^= 1 }), []string{sum(base)}},
		{"prev not 0", bimg, forged(func(b []byte) { le.PutUint64(b[hdrReserved+8*resPrev:], 0x1234); b[hdrReserved+8*resSeq] = 2 }), []string{sum(base), "0x0000000000001234", "seq 2", "shmctl image apply"}},
		{"hash_seed", bimg, openImage(t, encodeV2(deltaRecs(), reseeded), Deep), []string{sum(base), "hash_seed 0x8"}},
		{"hash_bits", bimg, openImage(t, encodeV2(deltaRecs(), rebits), Deep), []string{sum(base), "hash_bits 63"}},
		{"the base a delta", dimg, dimg, []string{sum(delta), "not a base"}},
		{"the delta a plain image", bimg, bimg, []string{sum(base), "not a delta"}},
		{"the delta a base through a delta", bimg, through, []string{sum(base), "not a delta"}},
		{"the base read through a delta already", through, dimg, []string{sum(base), "already"}},
	} {
		got, err := c.base.WithDelta(c.delta)
		if got != nil || !errors.Is(err, ErrBase) || Class(err) != "SHMKV_EBASE" {
			t.Errorf("%s: %v, %v; want ErrBase", c.name, got, err)
			continue
		}
		for _, s := range c.msg {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not name %s", c.name, err, s)
			}
		}
	}
	for _, img := range []*Image{bimg, dimg} { // the refusals released their pins: the owner's alone is left
		if r := img.cur.Load().refs.Load(); r != 2 { // the owner's and through's
			t.Errorf("%s: %d references", img.Name(), r)
		}
	}
	closed := openImage(t, base, 0)
	closed.Close()
	if _, err := closed.WithDelta(dimg); !errors.Is(err, ErrClosed) {
		t.Errorf("a closed base: %v", err)
	}
	if _, err := bimg.WithDelta(closed); !errors.Is(err, ErrClosed) {
		t.Errorf("a closed delta: %v", err)
	}
}

// TestThroughOutlivesImages: the Image WithDelta returns keeps both
// mappings: the base and the delta closed, it reads on; closed, its views
// read on; the last view released, both mappings are released.
func TestThroughOutlivesImages(t *testing.T) {
	base, delta := deltaPair(enc2Opts{buckets: 97}, 23, 0)
	bimg, dimg := openImage(t, base, 0), openImage(t, delta, 0)
	bm, dm := bimg.cur.Load(), dimg.cur.Load()
	through, err := bimg.WithDelta(dimg)
	if err != nil {
		t.Fatal(err)
	}
	bimg.Close()
	dimg.Close()
	if s, err := through.Text("s"); err != nil || s != "HELLO" {
		t.Fatalf("s: %q %v", s, err)
	}
	v, err := through.Pin()
	if err != nil {
		t.Fatal(err)
	}
	through.Close()
	if _, err := through.Text("s"); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if got, err := v.Get("key_1"); err != nil || string(got.Raw()) != "val_1" || bm.refs.Load() != 1 || dm.refs.Load() != 1 {
		t.Fatalf("the view after Close: %q %v; base refs %d, delta refs %d", got.Raw(), err, bm.refs.Load(), dm.refs.Load())
	}
	v.Release()
	if bm.refs.Load() != 0 || dm.refs.Load() != 0 {
		t.Fatalf("released: base refs %d, delta refs %d", bm.refs.Load(), dm.refs.Load())
	}
}

// Gets through a delta allocate nothing: a base hit, a delta hit (inline,
// OUT), a tombstone, an expired upsert, a miss, a filter false positive,
// batches.
func TestThroughAllocatesNothing(t *testing.T) {
	base, delta := deltaPair(enc2Opts{buckets: 61, seed: 7}, 23, 1)
	through, err := openImage(t, base, 0).WithDelta(openImage(t, delta, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer through.Close()
	v := pin(t, through)
	withClock(t, deltaNow)
	keys := []string{"key_1", "s", "new/out", "v", "fl", "key_5", "missing", "dl", "sh1"}
	vals, errs := make([]Value, len(keys)), make([]error, len(keys))
	n := testing.AllocsPerRun(200, func() {
		for _, k := range keys {
			_, _ = v.Get(k)
		}
		v.GetBatch(keys, vals, errs)
	})
	if n != 0 {
		t.Fatalf("%v allocations per run", n)
	}
}

// throughOracle: key's answer through delta d over base b by the general
// lookups alone (getSlow): the delta's, where its filter lets the key
// through and it holds it, else the base's.
func throughOracle(b, d *image, key string) (Value, error) { return levelsOracle(b, key, d) }

// TestThroughFastAgrees: through a delta, Get and GetBatch answer as the
// general lookups do (throughOracle), value and error, for every key, on
// the intact delta and on 1,500 damaged copies of it (bytes of its INDEX,
// FILTER or ENTRIES changed, checksums recomputed), read alone and
// through; no damage makes a reader panic.
func TestThroughFastAgrees(t *testing.T) {
	withClock(t, deltaNow)
	base, intact := deltaPair(enc2Opts{buckets: 61, seed: 7}, 23, 0)
	bimg := openImage(t, base, 0)
	var keys []string
	for _, r := range append(v2Records(), deltaRecs()...) {
		keys = append(keys, r.key, r.key+"x")
	}
	dsec := openV2(t, intact, 0).im.sec
	rng := rand.New(rand.NewPCG(7, 8))
	check := func(b []byte) {
		dimg, err := OpenBytes(b, NoVerify)
		if err != nil {
			return
		}
		defer dimg.Close()
		through, err := bimg.WithDelta(dimg)
		if err != nil {
			t.Fatalf("WithDelta: %v", err)
		}
		defer through.Close()
		dv, _ := dimg.Pin()
		defer dv.Release()
		tv, _ := through.Pin()
		defer tv.Release()
		vals, errs := make([]Value, len(keys)), make([]error, len(keys))
		dvals, derrs := make([]Value, len(keys)), make([]error, len(keys))
		tv.GetBatch(keys, vals, errs)
		dv.GetBatch(keys, dvals, derrs)
		for i, k := range keys {
			want, werr := throughOracle(tv.im, tv.dm, k)
			got, gerr := tv.Get(k)
			now := int64(0)
			dwant, dwerr := dv.im.getSlow([]byte(k), dv.im.hash([]byte(k)), &now)
			dgot, dgerr := dv.Get(k)
			for _, g := range []struct {
				what   string
				v, w   Value
				e, wer error
			}{{"through", got, want, gerr, werr}, {"through batch", vals[i], want, errs[i], werr},
				{"alone", dgot, dwant, dgerr, dwerr}, {"alone batch", dvals[i], dwant, derrs[i], dwerr}} {
				if fmt.Sprint(g.e) != fmt.Sprint(g.wer) || g.v.typ != g.w.typ || string(g.v.Raw()) != string(g.w.Raw()) {
					t.Fatalf("%s, %.20q: %v %q (%v), the general lookups %v %q (%v)", g.what, k, g.v.typ, g.v.Raw(), g.e, g.w.typ, g.w.Raw(), g.wer)
				}
			}
		}
		exercise(t, dimg)
		exercise(t, through)
	}
	check(intact)
	for i := 0; i < 1500; i++ {
		b := bytes.Clone(intact)
		s := dsec[[]int{0, 0, 1, 3}[i%4]]
		for j := 0; j <= i%3; j++ {
			at := s.off + rng.Uint64N(s.size)
			if j == 0 && s == dsec[0] { // a bucket's head or directory, half the time
				at = at&^(bucketBytes-1) + rng.Uint64N(dirEnd(maxRecords))
			}
			b[at] = byte(rng.Uint32())
		}
		fixSums(b)
		check(b)
	}
}

// fixHeader recomputes the header checksum alone (the open-time rules:
// header changes only, the sections' checksums as they are).
func fixHeader(b []byte) { le.PutUint64(b[hdrChecksum:], xxh3.Hash(b[:hdrChecksum])) }

// TestDeltaOpenRules: §19.4's checks at open, in §12's order, each broken
// once: the class, and the message naming the field.
func TestDeltaOpenRules(t *testing.T) {
	base, delta := deltaPair(enc2Opts{buckets: 61, seed: 7}, 23, 0)
	dsec := openV2(t, delta, 0).im.sec
	desc := func(b []byte, i int) []byte { return b[hdrSections+secSize*i:][:secSize] }
	res := func(b []byte, i int, v uint64) { le.PutUint64(b[hdrReserved+8*i:], v) }
	cases := []struct {
		name  string
		plain bool // a change of the base, not of the delta
		mod   func(b []byte)
		sums  bool // leave the checksums as they are
		want  error
		msg   string
	}{
		{name: "unknown layout hash", mod: func(b []byte) { b[hdrLayoutHash] ^= 1 }, want: ErrLayout, msg: "0x011183097a055ca3 (a delta)"},
		{name: "version 3 before the layout hash", mod: func(b []byte) { b[hdrLayoutHash] ^= 1; b[hdrFormatVersion] = 3 }, want: ErrVersion},
		{name: "layout hash before the header checksum", mod: func(b []byte) { b[hdrLayoutHash] ^= 1 }, sums: true, want: ErrLayout},
		{name: "header checksum", mod: func(b []byte) { b[hdrName] ^= 1 }, sums: true, want: ErrChecksum},
		{name: "DELTA clear", mod: func(b []byte) { b[hdrFlags] &^= hdrFlagDelta }, want: ErrCorrupt, msg: "DELTA (0x4) clear"},
		{name: "DELTA set in an image", plain: true, mod: func(b []byte) { b[hdrFlags] |= hdrFlagDelta }, want: ErrCorrupt, msg: "DELTA (0x4) set"},
		{name: "the delta layout hash on an image", plain: true, mod: func(b []byte) { le.PutUint64(b[hdrLayoutHash:], deltaLayoutHash) }, want: ErrCorrupt, msg: "DELTA (0x4) clear"},
		{name: "unknown flag 8", mod: func(b []byte) { b[hdrFlags] |= 8 }, want: ErrCorrupt, msg: "unknown flags 0x8"},
		{name: "section_count 3", mod: func(b []byte) { b[hdrSectionCount] = 3 }, want: ErrCorrupt, msg: "section_count 3, not 4"},
		{name: "section_count 4 in an image", plain: true, mod: func(b []byte) { b[hdrSectionCount] = 4 }, want: ErrCorrupt, msg: "section_count 4, not 3"},
		{name: "reserved[4]", mod: func(b []byte) { res(b, 4, 1) }, want: ErrCorrupt, msg: "reserved[4..6]"},
		{name: "reserved[6]", mod: func(b []byte) { res(b, 6, 1) }, want: ErrCorrupt, msg: "reserved[4..6]"},
		{name: "reserved[6] in an image", plain: true, mod: func(b []byte) { res(b, 6, 1) }, want: ErrCorrupt, msg: "reserved[4..6]"},
		{name: "base_checksum in an image", plain: true, mod: func(b []byte) { res(b, 0, 1) }, want: ErrCorrupt, msg: "reserved[0..3]"},
		{name: "seq in an image", plain: true, mod: func(b []byte) { res(b, 3, 1) }, want: ErrCorrupt, msg: "reserved[0..3]"},
		{name: "base_size 0", mod: func(b []byte) { res(b, resBaseSize, 0) }, want: ErrCorrupt, msg: "base_size 0"},
		{name: "base_size 4097", mod: func(b []byte) { res(b, resBaseSize, 4097) }, want: ErrCorrupt, msg: "base_size 4097"},
		{name: "seq 0", mod: func(b []byte) { res(b, resSeq, 0) }, want: ErrCorrupt, msg: "seq 0"},
		{name: "FILTER kind 5", mod: func(b []byte) { desc(b, 3)[secKind] = 5 }, want: ErrCorrupt, msg: "section 3: kind 5, not 4"},
		{name: "FILTER flags", mod: func(b []byte) { desc(b, 3)[secFlags] = 1 }, want: ErrCorrupt, msg: "section 3: flags"},
		{name: "FILTER size 0", mod: func(b []byte) { le.PutUint64(desc(b, 3)[secSizeOff:], 0) }, want: ErrCorrupt, msg: "not a non-zero multiple of 8"},
		{name: "FILTER size 12", mod: func(b []byte) { le.PutUint64(desc(b, 3)[secSizeOff:], 12) }, want: ErrCorrupt, msg: "not a non-zero multiple of 8"},
		{name: "FILTER offset not 64-aligned", mod: func(b []byte) { le.PutUint64(desc(b, 3)[secOffset:], dsec[3].off+8) }, want: ErrCorrupt, msg: "not a multiple of 64"},
		{name: "FILTER inside VALUES", mod: func(b []byte) { le.PutUint64(desc(b, 3)[secOffset:], dsec[2].off) }, want: ErrCorrupt, msg: "is before"},
		{name: "FILTER past the end", mod: func(b []byte) { le.PutUint64(desc(b, 3)[secSizeOff:], uint64(len(b))) }, want: ErrCorrupt, msg: "ends past file_size"},
		{name: "descriptor 4 used", mod: func(b []byte) { desc(b, 4)[secKind] = 5 }, want: ErrCorrupt, msg: "descriptor 4 is unused but not zero"},
		{name: "descriptor 3 in an image", plain: true, mod: func(b []byte) { desc(b, 3)[secKind] = 4 }, want: ErrCorrupt, msg: "descriptor 3 is unused but not zero"},
		{name: "a byte after FILTER", mod: func(b []byte) { b[len(b)-1] = 1 }, want: ErrCorrupt, msg: "outside every section"},
		{name: "FILTER's checksum", mod: func(b []byte) { b[dsec[3].off] ^= 0x80 }, sums: true, want: ErrChecksum, msg: "section FILTER"},
	}
	if dsec[3].end() == uint64(len(delta)) {
		t.Fatal("FILTER ends the delta: no byte after it")
	}
	for _, c := range cases {
		b := bytes.Clone(delta)
		if c.plain {
			b = bytes.Clone(base)
		}
		c.mod(b)
		if !c.sums {
			fixHeader(b)
		}
		_, err := OpenBytes(b, 0)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v; want %v naming %q", c.name, err, c.want, c.msg)
		}
		if c.want == ErrChecksum && c.msg != "" || c.msg == "outside every section" { // checks 11 and 12 only
			if img, err := OpenBytes(b, NoVerify); err != nil {
				t.Errorf("%s, NoVerify: %v", c.name, err)
			} else {
				img.Close()
			}
		}
	}
}

// TestDeltaVerifyRules: each rule verify adds for a delta (§19.4) broken
// once: deep open and Verify refuse it (ErrCorrupt); a plain open reads
// it, alone and through, without a panic, a lookup that decodes the
// damage saying ErrCorrupt.
func TestDeltaVerifyRules(t *testing.T) {
	recs := deltaRecs()
	base := encodeV2(v2Records(), enc2Opts{buckets: 61, seed: 7})
	do := deltaOf(base)
	do.buckets = 23
	good := encodeV2(recs, do)
	im, err := checkImage(good, true)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(b []byte, key string) ([]byte, uint64) { // key's bucket, its record's offset
		bb, i := bucketOfKey(t, good, key)
		c := b[im.sec[0].off+bb*bucketBytes:][:bucketBytes]
		return c, offOf(c, i)
	}
	ent := func(b []byte, key string) []byte { // key's OUT record's entry
		c, p := rec(b, key)
		return b[recEntry((*[bucketBytes]byte)(c), p):]
	}
	tombs := uint64(0)
	for _, r := range recs {
		if r.tomb {
			tombs++
		}
	}
	ghost := append(le.AppendUint16([]byte{tombEntryType, 0}, 5), 0, 0, 0, 0)
	ghost = pad8(append(ghost, "ghost"...))
	extra := do
	extra.extraEntries = ghost
	plainRecs := append(v2Records()[:30], rec2{key: "gone", tomb: true}, rec2{key: "gone/out", tomb: true, out: true})
	cases := []struct {
		name string
		img  []byte // nil: good, changed by mod
		mod  func(b []byte)
		get  string // a key whose lookup decodes the damage: ErrCorrupt
	}{
		{name: "inline tombstone with value_len 1", mod: func(b []byte) { c, p := rec(b, "v"); c[p+2] = 1 }, get: "v"},
		{name: "tombstone kind 0x50 (EXPIRES)", mod: func(b []byte) { c, p := rec(b, "v"); c[p] = 0x50 }, get: "v"},
		{name: "tombstone kind 0x11 (a type)", mod: func(b []byte) { c, p := rec(b, "v"); c[p] = 0x11 }, get: "v"},
		{name: "tombstone kind 0x30 (bit 5)", mod: func(b []byte) { c, p := rec(b, "v"); c[p] = 0x30 }, get: "v"},
		{name: "OUT tombstone kind 0xd0 (EXPIRES)", mod: func(b []byte) { c, p := rec(b, "fl"); c[p] = 0xd0 }, get: "fl"},
		{name: "OUT tombstone kind 0x91 (a type)", mod: func(b []byte) { c, p := rec(b, "fl"); c[p] = 0x91 }, get: "fl"},
		{name: "OUT tombstone's entry of type 1", mod: func(b []byte) { ent(b, "fl")[entType] = 1 }, get: "fl"},
		{name: "OUT tombstone's entry with value_len 1", mod: func(b []byte) { ent(b, "fl")[entValueLen] = 1 }, get: "fl"},
		{name: "OUT tombstone's entry with flags 1", mod: func(b []byte) { ent(b, "fl")[entFlags] = 1 }},
		{name: "OUT tombstone's entry padding", mod: func(b []byte) { ent(b, "fl")[entrySize+2] = 1 }},
		{name: "OUT tombstone's entry with key_len 0", mod: func(b []byte) { le.PutUint16(ent(b, "fl")[entKeyLen:], 0) }},
		{name: "OUT upsert's entry of type 0", mod: func(b []byte) { ent(b, "new/out")[entType] = 0 }, get: "new/out"},
		{name: "OUT upsert marked a tombstone", mod: func(b []byte) { c, p := rec(b, "new/out"); c[p] = outTombKind }, get: "new/out"},
		{name: "OUT tombstone marked an upsert", mod: func(b []byte) { c, p := rec(b, "fl"); c[p] = recOut }, get: "fl"},
		{name: "a key's filter bits clear", mod: func(b []byte) {
			h := im.hash([]byte("new/inline"))
			w, _ := bits.Mul64(h, im.filterWords)
			at := im.sec[3].off + 8*w
			le.PutUint64(b[at:], le.Uint64(b[at:])&^(1<<(h>>filterShift1&63)))
		}},
		{name: "entry_count without the tombstones", mod: func(b []byte) { le.PutUint64(b[hdrEntryCount:], uint64(len(recs))-tombs) }},
		{name: "a type 0 entry no tombstone names", img: encodeV2(recs, extra)},
		{name: "tombstones in an image", img: encodeV2(plainRecs, enc2Opts{buckets: 13}), get: "gone/out"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.img
			if b == nil {
				b = bytes.Clone(good)
				c.mod(b)
			}
			fixSums(b)
			_, err := OpenBytes(b, Deep)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("deep open: %v; want ErrCorrupt", err)
			}
			t.Log(err)
			img, err := OpenBytes(b, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer img.Close()
			v := pin(t, img)
			if err := v.Verify(); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Verify: %v", err)
			}
			withClock(t, deltaNow)
			if c.get != "" {
				if _, err := v.Get(c.get); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("get %q: %v; want ErrCorrupt", c.get, err)
				}
			}
			exercise(t, img)
			if !img.IsDelta() {
				return
			}
			through, err := openImage(t, base, 0).WithDelta(img)
			if err != nil {
				t.Fatal(err)
			}
			defer through.Close()
			exercise(t, through)
			if err := pin(t, through).Verify(); !errors.Is(err, ErrCorrupt) || !strings.HasPrefix(err.Error(), "the delta: ") {
				t.Fatalf("Verify through: %v", err)
			}
		})
	}
	// a filter with surplus bits (all set) is valid: verify passes, and
	// reads through it answer as the merge says (the delta's lookup misses
	// keys it lacks)
	b := bytes.Clone(good)
	for at := im.sec[3].off; at < im.sec[3].end(); at++ {
		b[at] = 0xff
	}
	fixSums(b)
	dimg, bimg := openImage(t, b, Deep), openImage(t, base, Deep)
	through, err := bimg.WithDelta(dimg)
	if err != nil {
		t.Fatal(err)
	}
	defer through.Close()
	checkThrough(t, through, pin(t, bimg), pin(t, dimg), v2Records(), recs, deltaNow)
}

// TestDeltaExampleFiles: testdata/delta/ holds the images
// ExampleImage_WithDelta reads, as the test encoder writes them: the
// records of example/users.jsonl, and a delta of them (user:1:visits
// upserted, user:2:name added, user:1:tags removed); both pass the deep
// open. SHMKV_UPDATE_TESTDATA=1 writes them afresh.
func TestDeltaExampleFiles(t *testing.T) {
	f32 := func(xs ...float32) []byte {
		var b []byte
		for _, x := range xs {
			b = le.AppendUint32(b, math.Float32bits(x))
		}
		return b
	}
	base := encodeV2([]rec2{
		{key: "user:1:name", typ: TypeString, value: []byte("Ada Lovelace")},
		{key: "user:1:visits", typ: TypeInt64, value: le.AppendUint64(nil, 42)},
		{key: "user:1:embedding", typ: TypeF32List, value: f32(0.25, -1, 3.5)},
		{key: "user:1:tags", typ: TypeStrList, value: strlist("math", "engines")},
		{key: "session:1", typ: TypeString, value: []byte("expired long ago"), expires: 1_000_000_000},
	}, enc2Opts{buckets: 2, name: "users"})
	do := deltaOf(base)
	do.buckets, do.name = 1, "users"
	delta := encodeV2([]rec2{
		{key: "user:1:visits", typ: TypeInt64, value: le.AppendUint64(nil, 43)},
		{key: "user:2:name", typ: TypeString, value: []byte("Grace Hopper")},
		{key: "user:1:tags", tomb: true},
	}, do)
	for name, b := range map[string][]byte{"users.shmkv": base, "users.delta": delta} {
		path := filepath.Join("testdata", "delta", name)
		if os.Getenv("SHMKV_UPDATE_TESTDATA") == "1" {
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, b) {
			t.Fatalf("%s is not what the encoder writes (SHMKV_UPDATE_TESTDATA=1 writes it)", path)
		}
		if img, err := OpenFile(path, Deep); err != nil {
			t.Fatal(err)
		} else {
			img.Close()
		}
	}
}
