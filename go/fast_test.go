package shmkv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestFastAgrees: the hot path (getFast) answers as the
// general lookup (getSlow) does, value and error, for every key of an
// image with inline and OUT records, every type, short and long keys and
// displaced keys, for keys it lacks, and on damaged copies of it (bytes of
// INDEX changed, checksums recomputed); and it serves the intact image's
// inline and OUT records itself, in an image with the EXPIRY flag too.
func TestFastAgrees(t *testing.T) {
	withClock(t, 1_500_000_000) // exp/one has expired, the other expiring records not yet
	keys := []string{"", "nope", "key_", "key_1000000", "0123456789abcdef", "0123456789abcdeX"}
	recs := v2Records()       // expiring records too: the image has the EXPIRY flag
	for i := 0; i < 40; i++ { // keys of 8 to 16 bytes, compared as two words
		recs = append(recs, rec2{key: fmt.Sprintf("0123456789a%d", i), typ: TypeString, value: []byte{byte(i)}})
	}
	for _, r := range recs {
		keys = append(keys, r.key, r.key+"x", "x"+r.key)
	}
	intact := encodeV2(recs, enc2Opts{buckets: 60, seed: 0x1234})
	var fast, slow int
	check := func(b []byte, intact bool) {
		img, err := OpenBytes(b, NoVerify)
		if err != nil {
			if intact {
				t.Fatal(err)
			}
			return
		}
		defer img.Close()
		v, err := img.Pin()
		if err != nil {
			t.Fatal(err)
		}
		defer v.Release()
		im := v.im
		for _, k := range keys {
			key := []byte(k)
			h := im.hash(key)
			now := int64(0)
			want, werr := im.getSlow(key, h, &now)
			got, gerr := v.Get(k)
			batch := []Value{{}}
			berr := []error{nil}
			v.GetBatch([]string{k}, batch, berr)
			for _, g := range []struct {
				v   Value
				err error
			}{{got, gerr}, {batch[0], berr[0]}} {
				if fmt.Sprint(g.err) != fmt.Sprint(werr) || g.v.typ != want.typ || string(g.v.Raw()) != string(want.Raw()) {
					t.Fatalf("key %q: fast path %v %q (%v), general lookup %v %q (%v)", k, g.v.typ, g.v.Raw(), g.err, want.typ, want.Raw(), werr)
				}
			}
			calls := 0
			onGetSlow = func() { calls++ }
			_, _ = v.Get(k)
			onGetSlow = nil
			if calls == 0 {
				fast++
			} else {
				slow++
			}
		}
	}
	check(intact, true)
	if v := openV2(t, intact, NoVerify); v.im.maxProbe == 0 || !v.im.expiry {
		t.Fatalf("the intact image: max_probe %d (no displaced key), EXPIRY flag %v", v.im.maxProbe, v.im.expiry)
	}
	// an image with the EXPIRY flag: only an expiring candidate record
	// (and OUT records, damage) takes the general lookup
	if fast < len(keys)/2 || slow == 0 {
		t.Fatalf("intact image: %d keys on the fast path, %d on the general one", fast, slow)
	}
	// OUT records without expiry (their own entry or a shared value in
	// VALUES) are hits of the hot path too
	outs := 0
	for _, r := range recs {
		if (!r.out && !r.shared) || r.expires != 0 {
			continue
		}
		w := openV2(t, intact, NoVerify)
		calls := 0
		onGetSlow = func() { calls++ }
		val, err := w.Get(r.key)
		onGetSlow = nil
		if err != nil || calls != 0 || val.typ != r.typ || string(val.Raw()) != string(r.value) {
			t.Fatalf("OUT record %q: %v %q (%v), %d general lookups", r.key, val.typ, val.Raw(), err, calls)
		}
		outs++
	}
	if outs < 3 {
		t.Fatalf("%d OUT records without expiry checked", outs)
	}
	withClock(t, 2_100_000_000) // every expiring record expired
	check(intact, true)
	// max_probe forged below the largest displacement: every lookup, fast
	// or general, stops there (FORMAT.md §6.4 caps D at max_probe), so a
	// key displaced further is absent on both paths alike
	v := openV2(t, intact, NoVerify)
	lost := 0
	for mp := uint64(0); mp < v.im.maxProbe; mp++ {
		b := append([]byte(nil), intact...)
		le.PutUint32(b[72:], uint32(mp))
		fixSums(b)
		check(b, false)
		img, err := OpenBytes(b, NoVerify)
		if err != nil {
			t.Fatalf("max_probe %d: %v", mp, err)
		}
		w, _ := img.Pin()
		for _, r := range recs {
			if _, err := w.Get(r.key); err == ErrNotFound {
				lost++
			}
		}
		w.Release()
		img.Close()
	}
	if lost == 0 {
		t.Fatal("no forged max_probe hid a displaced key: the cap is not exercised")
	}
	idx := v.im.sec[0]
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		b := append([]byte(nil), intact...)
		for j := 0; j <= i%3; j++ {
			at := idx.off + rng.Uint64N(idx.size)
			if j == 0 { // a bucket's head or directory, half the time
				at = at&^(bucketBytes-1) + rng.Uint64N(dirEnd(maxRecords))
			}
			b[at] = byte(rng.Uint32())
		}
		fixSums(b)
		check(b, false)
	}
	t.Logf("%d lookups on the fast path, %d on the general one", fast, slow)
}

// TestGetBatchPipeline: GetBatch answers as Get, key by key, for every
// batch length from 0 to past four rings (short first and last blocks, the
// ring wrapping) at several starts, over hits, displaced keys, misses, a
// key over 65535 bytes and repeats; with and without expiring records; and
// it writes nothing past len(keys) in vals and errs.
func TestGetBatchPipeline(t *testing.T) {
	withClock(t, 1_500_000_000)
	all := v2Records()
	var noExp []rec2
	for _, r := range all {
		if r.expires == 0 {
			noExp = append(noExp, r)
		}
	}
	for _, c := range []struct {
		name string
		recs []rec2
	}{{"no expiry", noExp}, {"expiry", all}} {
		v := openV2(t, encodeV2(c.recs, enc2Opts{buckets: 40, seed: 0x77}), NoVerify)
		if c.name == "no expiry" && (v.im.expiry || v.im.maxProbe == 0) {
			t.Fatalf("%s: expiry %v, max_probe %d: want displaced keys and no expiry", c.name, v.im.expiry, v.im.maxProbe)
		}
		keys := []string{strings.Repeat("x", maxKeyLen+1)}
		for i, r := range c.recs {
			keys = append(keys, r.key, fmt.Sprintf("absent_%d", i))
			if i%7 == 0 {
				keys = append(keys, r.key)
			}
		}
		rng := rand.New(rand.NewPCG(5, 6))
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		const spare = 3
		vals, errs := make([]Value, 4*pipeRing+9+spare), make([]error, 4*pipeRing+9+spare)
		fence, errFence := Value{data: []byte("fence"), typ: TypeBytes}, errors.New("not written")
		for _, start := range []int{0, 1, 7, 100} {
			for n := 0; n <= 4*pipeRing+9; n++ {
				batch := keys[start : start+n]
				for i := range vals {
					vals[i], errs[i] = fence, errFence
				}
				v.GetBatch(batch, vals, errs)
				for i, k := range batch {
					want, werr := v.Get(k)
					if fmt.Sprint(errs[i]) != fmt.Sprint(werr) || vals[i].typ != want.typ || string(vals[i].Raw()) != string(want.Raw()) || vals[i].shared != want.shared {
						t.Fatalf("%s, batch [%d, %d) key %d %.20q: %v %q (%v), Get %v %q (%v)", c.name, start, start+n, i, k, vals[i].typ, vals[i].Raw(), errs[i], want.typ, want.Raw(), werr)
					}
				}
				for i := n; i < n+spare; i++ {
					if errs[i] != errFence || string(vals[i].Raw()) != "fence" {
						t.Fatalf("%s, batch of %d: vals[%d], errs[%d] written", c.name, n, i, i)
					}
				}
			}
		}
	}
}
