package shmkv

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Fuzz targets: the reader never panics, whatever the bytes.
// `go test -run '^$' -fuzz FuzzImage -fuzztime 60s` runs one; CI runs each
// for a bounded time (run: test_go), and plain `go test` replays the seeds
// and testdata/fuzz/.

// addImageSeeds: every format 2 image of the shared vectors of at most
// 64 KiB (the format 1 ones, kept only as refusal cases, are left out), an
// image of the test encoder with every record kind, two deltas of it
// (FORMAT.md §19: every record kind, tombstones inline and OUT; a filter
// of one word and of the conventional size), and two stubs.
func addImageSeeds(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(vectorsDir, "*.img"))
	sub, _ := filepath.Glob(filepath.Join(vectorsDir, "*", "*.img"))
	n := 0
	for _, p := range append(paths, sub...) {
		b, err := os.ReadFile(p)
		if err == nil && len(b) <= 64<<10 && len(b) >= 12 && le.Uint32(b[hdrFormatVersion:]) == formatVersion {
			f.Add(b)
			n++
		}
	}
	if n < 30 {
		f.Fatalf("only %d format 2 images among the vectors in %s", n, vectorsDir)
	}
	f.Add(encodeV2(v2Records(), enc2Opts{buckets: 61, seed: 7}))
	for _, words := range []uint64{0, 1} {
		_, d := deltaPair(fuzzBaseOpts, 23, words)
		f.Add(d)
	}
	f.Add([]byte("SHMKVIMG"))
	f.Add([]byte{})
}

// fuzzBaseOpts: the base the seed deltas apply to (deltaPair's of
// v2Records), which exercise reads a delta through.
var fuzzBaseOpts = enc2Opts{buckets: 61, seed: 7}

var fuzzBase = sync.OnceValue(func() *Image {
	img, err := OpenBytes(encodeV2(v2Records(), fuzzBaseOpts), 0)
	if err != nil {
		panic(err)
	}
	return img
})

// fuzzLower: a delta of the fuzz base (deltaPair's), the lower a fuzzed
// delta is read over as a top (FORMAT.md §19.6).
var fuzzLower = sync.OnceValue(func() *Image {
	_, d := deltaPair(fuzzBaseOpts, 23, 0)
	img, err := OpenBytes(d, 0)
	if err != nil {
		panic(err)
	}
	return img
})

// exercise reads everything an image offers, the way a user would; a
// delta, alone, the fuzz base through it (when it applies: ErrBase
// otherwise) and through fuzzLower with it as the top, every get through
// them answering as the general lookups of the deltas, then the base, do
// (levelsOracle).
func exercise(t *testing.T, img *Image) {
	if img.IsDelta() {
		through, err := fuzzBase().WithDelta(img)
		switch {
		case err == nil:
			exercise(t, through)
			through.Close()
		case !errors.Is(err, ErrBase):
			t.Fatalf("WithDelta: %v", err)
		}
		through, err = fuzzBase().WithDeltas(fuzzLower(), img)
		switch {
		case err == nil:
			exercise(t, through)
			through.Close()
		case !errors.Is(err, ErrBase):
			t.Fatalf("WithDeltas: %v", err)
		}
	}
	v, err := img.Pin()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	var keys []string
	var iterErr error
	for e, err := range v.Records() {
		if err != nil {
			iterErr = err
			break
		}
		k := string(e.Key)
		keys = append(keys, k)
		_ = e.Value.Count()
		_, _ = e.Value.Strings()
		_, _ = img.Bytes(k)
		_, _ = img.Text(k)
		_, _ = img.Int64(k)
		_, _ = img.Float64(k)
		_, _ = img.Bool(k)
		_, _ = img.Strings(k)
	}
	live := 0
	for _, err := range v.Entries() {
		if err != nil {
			break
		}
		live++
	}
	if live > len(keys) && iterErr == nil {
		t.Fatalf("%d live entries, %d records", live, len(keys))
	}
	keys = append(keys, "", "k", "missing key", "k0", "gen")
	vals, errs := make([]Value, len(keys)), make([]error, len(keys))
	v.GetBatch(keys, vals, errs)
	for i, k := range keys {
		one, err := v.Get(k)
		if Class(err) != Class(errs[i]) || string(one.Raw()) != string(vals[i].Raw()) {
			t.Fatalf("batch and get disagree on %q: %v, %v", k, errs[i], err)
		}
		if v.dm != nil {
			if w, werr := levelsOracle(v.im, k, v.top, v.dm); Class(err) != Class(werr) || string(one.Raw()) != string(w.Raw()) || one.Type() != w.Type() {
				t.Fatalf("through the deltas, %q: %v (%v); the general lookups %v (%v)", k, one.Raw(), err, w.Raw(), werr)
			}
		}
		_, _ = v.Expires(k)
	}
	_ = v.Len()
	if v.Verify() == nil && iterErr != nil {
		t.Fatalf("verify accepts, iteration fails: %v", iterErr)
	}
}

func FuzzImage(f *testing.F) {
	addImageSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, flags := range []OpenFlags{0, NoVerify, Deep} {
			buf := append(make([]byte, 0, len(b)+8), b...) // 8-aligned, as a mapping is
			img, err := OpenBytes(buf, flags)
			if err != nil {
				if Class(err) == "UNKNOWN" {
					t.Fatalf("an error of no class: %v", err)
				}
				continue
			}
			exercise(t, img)
			img.Close()
		}
	})
}

// FuzzImageFixSum: the same after recomputing every checksum and zeroing
// what lies outside the sections (what anyone who can write the spool can
// do), so that the structural checks, not the checksums, are fuzzed.
func FuzzImageFixSum(f *testing.F) {
	addImageSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		buf := append(make([]byte, 0, len(b)+8), b...)
		fixSums(buf)
		for _, flags := range []OpenFlags{NoVerify, Deep} {
			if img, err := OpenBytes(buf, flags); err == nil {
				exercise(t, img)
				img.Close()
			}
		}
	})
}

// FuzzCtl: a control segment's bytes: the header checks, the snapshot's
// decoding, the roles of protocol 2 and the NUMA choice never panic.
func FuzzCtl(f *testing.F) {
	seed := make([]byte, ctlSize)
	copy(seed, ctlMagic)
	le.PutUint32(seed[8:], 1)
	le.PutUint32(seed[12:], ctlSize)
	le.PutUint64(seed[16:], ctlLayoutHash)
	le.PutUint64(seed[32:], 3)
	le.PutUint32(seed[40:], 2)
	copy(seed[128+32:], "/dev/shm/x")
	le.PutUint32(seed[384:], 1)
	f.Add(seed)
	v2 := append([]byte{}, seed...) // protocol 2: a base copy and an overlay copy
	le.PutUint32(v2[8:], 2)
	le.PutUint64(v2[16:], ctlLayoutHash2)
	le.PutUint32(v2[384+4:], ctlSegOverlay)
	f.Add(v2)
	v3 := append([]byte{}, v2...) // and a top overlay copy
	le.PutUint32(v3[40:], 3)
	copy(v3[128+2*256+32:], "/dev/shm/t")
	le.PutUint32(v3[128+2*256+4:], ctlSegOverlay|ctlSegTop)
	f.Add(v3)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		mem := make([]byte, ctlSize)
		copy(mem, b)
		version, err := checkCtlHeader(mem, "fuzz.ctl")
		if err == nil && version != 1 && version != 2 {
			t.Fatalf("protocol version %d accepted", version)
		}
		var w [ctlWords]uint64
		for i := range w {
			w[i] = le.Uint64(mem[8*i:])
		}
		s, err := decodeSnap(&w, 0)
		if err != nil {
			return
		}
		bases, lowers, tops, err := s.roles(le.Uint32(mem[8:]))
		if err != nil || len(bases) == 0 {
			return
		}
		if len(tops) > 0 && len(lowers) == 0 {
			t.Fatalf("%d top copies accepted without a lower copy", len(tops))
		}
		i := pickSegment(bases, int(mem[0]%4))
		if i < 0 || i >= len(bases) {
			t.Fatalf("picked segment %d of %d", i, len(bases))
		}
		for _, l := range []struct {
			copies []ctlSegment
			flags  uint32
		}{{lowers, ctlSegOverlay}, {tops, ctlSegOverlay | ctlSegTop}} {
			if ov := pickOverlay(l.copies, bases[i].node); (ov == nil) != (len(l.copies) == 0) || ov != nil && ov.flags&(ctlSegOverlay|ctlSegTop) != l.flags {
				t.Fatalf("overlay %v picked of %d", ov, len(l.copies))
			}
		}
	})
}
