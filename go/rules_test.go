package shmkv

import (
	"errors"
	"iter"
	"math/rand/v2"
	"strings"
	"testing"
)

// The reader rules of FORMAT.md §18 that every reader follows
// alike: a string value that is not strict UTF-8 is corrupt at every get
// that returns it; a batch answers each key as its get would; iteration
// yields the live entries (the clock read once, at its start), and the
// all-records iteration every record with its expiry.

// badUTF8 are strings that are not strict UTF-8; goodUTF8 are.
var (
	badUTF8 = map[string]string{
		"byte 0xff":            "ok\xff",
		"overlong NUL":         "\xc0\x80",
		"overlong slash":       "\xe0\x80\xaf",
		"surrogate U+D800":     "\xed\xa0\x80",
		"past U+10FFFF":        "\xf4\x90\x80\x80",
		"truncated sequence":   "ab\xe2\x82",
		"lone continuation":    "\x80",
		"5-byte form":          "\xf8\x88\x80\x80\x80",
		"surrogate pair CESU8": "\xed\xa0\xbd\xed\xb8\x80",
	}
	goodUTF8 = []string{"", "plain", "nul \x00 inside", "é", "€", "\U0001F600", "\U0010FFFF", "\uFFFD"}
)

func TestStringUTF8IsCorrupt(t *testing.T) {
	var recs []rec2
	for name, s := range badUTF8 {
		recs = append(recs,
			rec2{key: "bad/inline/" + name, typ: TypeString, value: []byte(s)},
			rec2{key: "bad/out/" + name, typ: TypeString, value: []byte(s), out: true},
			rec2{key: "bad/strlist/" + name, typ: TypeStrList, value: strlist("fine", s)},
			rec2{key: "bytes/" + name, typ: TypeBytes, value: []byte(s)}, // bytes are bytes
		)
	}
	for i, s := range goodUTF8 {
		recs = append(recs, rec2{key: "good/" + string(rune('a'+i)), typ: TypeString, value: []byte(s)})
	}
	recs = append(recs, rec2{key: "bad/shared", typ: TypeString, value: []byte(strings.Repeat("x", 70) + "\xff"), shared: true},
		rec2{key: "bad/shared2", typ: TypeString, value: []byte(strings.Repeat("x", 70) + "\xff"), shared: true})
	b := encodeV2(recs, enc2Opts{buckets: 29})
	if _, err := OpenBytes(b, Deep); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("deep open of non-UTF-8 strings: %v", err)
	}
	img, err := OpenBytes(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	v := openV2(t, b, 0)

	var keys []string
	for _, r := range recs {
		keys = append(keys, r.key)
	}
	keys = append(keys, "absent", strings.Repeat("k", maxKeyLen+1))
	vals, errs := make([]Value, len(keys)), make([]error, len(keys))
	v.GetBatch(keys, vals, errs)
	for i, k := range keys {
		got, err := v.Get(k)
		want := "OK"
		switch {
		case strings.HasPrefix(k, "bad/") && !strings.HasPrefix(k, "bad/strlist/"):
			want = "SHMKV_ECORRUPT"
		case k == "absent":
			want = "SHMKV_ENOTFOUND"
		case len(k) > maxKeyLen:
			want = "SHMKV_EKEYLEN"
		}
		// the generic get, the batch (each key as its get), the typed getter
		if Class(err) != want || Class(errs[i]) != want || string(vals[i].Raw()) != string(got.Raw()) {
			t.Errorf("%.30q: get %v, batch %v; want %s", k, err, errs[i], want)
		}
		if strings.HasPrefix(k, "bad/") && !strings.HasPrefix(k, "bad/strlist/") {
			if s, err := img.Text(k); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%.30q: Text %q, %v", k, s, err)
			}
		}
		if strings.HasPrefix(k, "bad/strlist/") { // the get checks the count; each string as it is read
			l, err := got.StrList()
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			if s, err := l.At(0); err != nil || string(s) != "fine" {
				t.Errorf("%s: string 0: %q, %v", k, s, err)
			}
			if s, err := l.At(1); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: string 1: %q, %v", k, s, err)
			}
			if ss, err := img.Strings(k); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: Strings %q, %v", k, ss, err)
			}
		}
		if strings.HasPrefix(k, "good/") {
			if s, err := img.Text(k); err != nil || s != string(got.Raw()) {
				t.Errorf("%q: %q, %v", k, s, err)
			}
		}
	}
	// iteration meets a non-UTF-8 string (or strlist string) as damage
	for _, seq := range []func() iter.Seq2[Entry, error]{v.Entries, v.Records} {
		n, failed := 0, error(nil)
		for _, err := range seq() {
			if err != nil {
				failed = err
				break
			}
			n++
		}
		if !errors.Is(failed, ErrCorrupt) {
			t.Errorf("iteration over non-UTF-8 strings: %d entries, then %v", n, failed)
		}
	}
	// an image of the good ones only iterates to its end
	var good []rec2
	for _, r := range recs {
		if !strings.HasPrefix(r.key, "bad/") {
			good = append(good, r)
		}
	}
	gv := openV2(t, encodeV2(good, enc2Opts{buckets: 29}), Deep)
	checkAll(t, gv, good, 0)
}

// Iteration and expiry: Entries skips the records whose expiry the clock
// read at its start has reached (the clock is read once, then not again,
// whatever it says later); Records yields every record with its expiry and
// reads no clock; an image without the EXPIRY flag never reads it.
func TestIterationExpiry(t *testing.T) {
	recs := []rec2{
		{key: "past", typ: TypeString, value: []byte("p"), expires: 100},
		{key: "edge", typ: TypeString, value: []byte("e"), expires: 1000},
		{key: "soon", typ: TypeString, value: []byte("s"), expires: 1001},
		{key: "out/edge", typ: TypeString, value: []byte("o"), expires: 1000, out: true},
		{key: "never", typ: TypeInt64, value: le.AppendUint64(nil, 7)},
	}
	v := openV2(t, encodeV2(recs, enc2Opts{buckets: 3}), Deep)
	reads := 0
	old := clock
	t.Cleanup(func() { clock = old })
	clock = func() int64 { reads++; return 999 + int64(reads) } // 1000 at the first read, later more
	keysOf := func(seq iter.Seq2[Entry, error]) map[string]uint32 {
		got := map[string]uint32{}
		for e, err := range seq {
			if err != nil {
				t.Fatal(err)
			}
			got[string(e.Key)] = e.Expires
		}
		return got
	}
	live := keysOf(v.Entries())
	if reads != 1 {
		t.Fatalf("Entries read the clock %d times", reads)
	}
	if len(live) != 2 || live["soon"] != 1001 || live["never"] != 0 {
		t.Fatalf("Entries at 1000: %v; want soon and never", live)
	}
	all := keysOf(v.Records())
	if reads != 1 || len(all) != len(recs) || all["past"] != 100 || all["out/edge"] != 1000 {
		t.Fatalf("Records: %v after %d clock reads; want all %d with their expiry", all, reads, len(recs))
	}
	// an early break still read the clock once, at the start
	reads = 0
	for range v.Entries() {
		break
	}
	if reads != 1 {
		t.Fatalf("a broken-off Entries read the clock %d times", reads)
	}

	// without the EXPIRY flag (forged): no record expires, no clock is read
	b := encodeV2(recs, enc2Opts{buckets: 3})
	le.PutUint64(b[hdrFlags:], le.Uint64(b[hdrFlags:])&^hdrFlagExpiry)
	fixSums(b)
	reads = 0
	if got := keysOf(openV2(t, b, 0).Entries()); len(got) != len(recs) || reads != 0 {
		t.Fatalf("no EXPIRY flag: %d entries, %d clock reads", len(got), reads)
	}
}

// bucketASCII, getFast's word test, says ASCII exactly when every byte of
// the value is below 0x80 (values of up to 16 bytes; longer ones it leaves
// to utf8.Valid), wherever the value lies in the bucket and whatever the
// bytes around it are.
func TestBucketASCII(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	var bk [bucketBytes]byte
	for round := 0; round < 200; round++ {
		for i := range bk {
			bk[i] = byte(rng.Uint32())
		}
		for vp := uint64(bucketHead); vp < bucketBytes; vp++ {
			for vlen := uint64(0); vp+vlen < bucketBytes && vlen <= 20; vlen++ {
				b := bk
				ascii := rng.IntN(2) == 0
				for i := vp; i < vp+vlen; i++ {
					if ascii {
						b[i] &= 0x7f
					}
				}
				b[vp+vlen] = 0 // the NUL
				want := vlen <= 16
				for _, c := range b[vp : vp+vlen] {
					want = want && c < 0x80
				}
				if got := bucketASCII(&b, vp, vlen); got != want {
					t.Fatalf("value [%d, +%d) % x: bucketASCII %v, want %v", vp, vlen, b[vp:vp+vlen], got, want)
				}
			}
		}
	}
}

// SetClock pins the "now" of expiry for an Image's copying getters and the
// Views pinned after it (Get, GetBatch, Entries): the system clock is not
// read; a View keeps the clock it was pinned with; 0 unpins.
func TestSetClock(t *testing.T) {
	recs := []rec2{
		{key: "a", typ: TypeString, value: []byte("x"), expires: 1000},
		{key: "b", typ: TypeString, value: []byte("y"), expires: 1000, out: true},
		{key: "c", typ: TypeString, value: []byte("z")},
	}
	img, err := OpenBytes(encodeV2(recs, enc2Opts{buckets: 3}), Deep)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	reads := withClock(t, 500) // the system clock: nothing has expired
	live := func(v *View) (n int) {
		for _, err := range v.Entries() {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	before, _ := img.Pin()
	defer before.Release()
	for _, c := range []struct {
		pin  int64
		gone bool
	}{{999, false}, {1000, true}, {5000, true}} {
		img.SetClock(c.pin)
		*reads = 0
		v, _ := img.Pin()
		vals, errs := make([]Value, 3), make([]error, 3)
		v.GetBatch([]string{"a", "b", "c"}, vals, errs)
		for i, k := range []string{"a", "b"} {
			_, err := v.Get(k)
			_, cerr := img.Text(k)
			if errors.Is(err, ErrNotFound) != c.gone || errors.Is(errs[i], ErrNotFound) != c.gone || errors.Is(cerr, ErrNotFound) != c.gone {
				t.Errorf("clock pinned at %d: %s: get %v, batch %v, Text %v; gone %v", c.pin, k, err, errs[i], cerr, c.gone)
			}
		}
		if n, want := live(v), map[bool]int{false: 3, true: 1}[c.gone]; n != want {
			t.Errorf("clock pinned at %d: Entries yields %d, want %d", c.pin, n, want)
		}
		if *reads != 0 {
			t.Errorf("clock pinned at %d: the system clock was read %d times", c.pin, *reads)
		}
		v.Release()
	}
	if n := live(before); n != 3 { // pinned before SetClock: the system clock (500)
		t.Errorf("a view pinned before SetClock: %d live entries, want 3", n)
	}
	img.SetClock(0)
	*reads = 0
	if _, err := img.Text("a"); err != nil || *reads != 1 {
		t.Errorf("unpinned: %v after %d clock reads", err, *reads)
	}
}
