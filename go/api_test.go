package shmkv

import (
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

func openBase(t *testing.T) *Image {
	t.Helper()
	img, err := OpenFile(filepath.Join(vectorsDir, "base.img"), 0)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// The copying getters of an Image, their errors, and errors.Is on each.
func TestTypedGetters(t *testing.T) {
	img := openBase(t)
	defer img.Close()
	check := func(what string, got, want any, err error) {
		t.Helper()
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v (%v), want %v", what, got, err, want)
		}
	}
	s, err := img.Text("s")
	check("Text", s, "hello", err)
	b, err := img.Bytes("v")
	check("Bytes", b, []byte("raw"), err)
	i, err := img.Int64("i")
	check("Int64", i, int64(-5), err)
	f, err := img.Float64("f")
	check("Float64", f, 0.5, err)
	ok, err := img.Bool("b")
	check("Bool", ok, true, err)
	fl, err := img.Float32s("fl")
	check("Float32s", fl, []float32{1, 2, 3}, err)
	il, err := img.Int64s("il")
	check("Int64s", il, []int64{7, 8}, err)
	l, err := img.Strings("l")
	check("Strings", l, []string{"a", "bc"}, err)
	sh, err := img.Text("sh2")
	check("shared Text", sh, "a value long enough to be shared by two keys", err)

	if _, err := img.Int64("s"); !errors.Is(err, ErrType) || !strings.Contains(err.Error(), "is a string, not a i64") {
		t.Errorf("Int64 of a string: %v", err)
	}
	if _, err := img.Float64s("fl"); !errors.Is(err, ErrType) {
		t.Errorf("Float64s of an f32list: %v", err)
	}
	if _, err := img.Text("missing"); !errors.Is(err, ErrNotFound) || Class(err) != "SHMKV_ENOTFOUND" {
		t.Errorf("missing key: %v", err)
	}
	if _, err := img.Text(strings.Repeat("k", 65536)); !errors.Is(err, ErrKeyLen) {
		t.Errorf("65536-byte key: %v", err)
	}
	if img.Name() == "" {
		t.Error("no name")
	}
}

// A View outlives Close: its mapping stays until Release; a released view
// and a closed image say ErrClosed.
func TestViewPinsMapping(t *testing.T) {
	img := openBase(t)
	v, err := img.Pin()
	if err != nil {
		t.Fatal(err)
	}
	val, err := v.Get("fl")
	if err != nil {
		t.Fatal(err)
	}
	fl, _ := val.Float32s()
	m := v.m
	img.Close()
	if _, err := img.Int64("i"); !errors.Is(err, ErrClosed) {
		t.Errorf("getter after Close: %v", err)
	}
	if _, err := img.Pin(); !errors.Is(err, ErrClosed) {
		t.Errorf("Pin after Close: %v", err)
	}
	if m.refs.Load() != 1 || !reflect.DeepEqual(fl, []float32{1, 2, 3}) {
		t.Fatalf("the view's mapping: %d references, %v", m.refs.Load(), fl)
	}
	if s, err := v.Get("s"); err != nil || string(s.Raw()) != "hello" {
		t.Fatalf("get through a view of a closed image: %v", err)
	}
	v.Release()
	v.Release() // idempotent
	if m.refs.Load() != 0 {
		t.Fatalf("after Release: %d references", m.refs.Load())
	}
	if _, err := v.Get("s"); !errors.Is(err, ErrClosed) {
		t.Errorf("get after Release: %v", err)
	}
	for _, seq := range []func() iter.Seq2[Entry, error]{v.Entries, v.Records} {
		n := 0
		for _, err := range seq() {
			if n++; !errors.Is(err, ErrClosed) {
				t.Errorf("iteration after Release: %v", err)
			}
		}
		if n != 1 {
			t.Errorf("iteration after Release yields %d times, not once", n)
		}
	}
}

// The swap contract without a loader: goroutines pin and read while
// another swaps between two images; every value matches its view's image
// and every mapping is released exactly when its last holder lets go.
func TestSwapUnderViews(t *testing.T) {
	var imgs [2]*image
	for i, name := range []string{"base.img", "types.img"} {
		b, err := os.ReadFile(filepath.Join(vectorsDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if imgs[i], err = checkImage(b, true); err != nil {
			t.Fatal(err)
		}
	}
	var s source
	s.cur.Store(newMapping(nil, imgs[0], 1, -1))
	var all []*mapping
	var allMu sync.Mutex
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wrong := make(chan string, 16)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				v, err := s.Pin()
				if err != nil {
					wrong <- err.Error()
					return
				}
				_, errBase := v.Get("il")   // only in base.img
				_, errTypes := v.Get("i64") // only in types.img
				if (v.im == imgs[0]) != (errBase == nil) || (v.im == imgs[1]) != (errTypes == nil) {
					wrong <- "a view mixed two images"
				}
				v.Release()
			}
		}()
	}
	for i := 2; i <= 1000; i++ {
		m := newMapping(nil, imgs[i%2], uint64(i), -1)
		allMu.Lock()
		all = append(all, m)
		allMu.Unlock()
		s.swap(m)
	}
	close(stop)
	wg.Wait()
	s.swap(nil)
	close(wrong)
	for w := range wrong {
		t.Fatal(w)
	}
	for _, m := range all {
		if r := m.refs.Load(); r != 0 {
			t.Fatalf("generation %d: %d references left", m.gen, r)
		}
	}
}

// Bad files: each refused with its class and a message naming the cause.
func TestOpenFileErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		path  string
		class string
		msg   string
	}{
		{write("text", []byte(strings.Repeat("hello world\n", 40))), "SHMKV_EMAGIC", "bad magic"},
		{write("empty", nil), "SHMKV_ETRUNCATED", "shorter than the 4096-byte header block"},
		{write("short", []byte("SHMKVIMG\x01")), "SHMKV_ETRUNCATED", "9 bytes"},
	} {
		_, err := OpenFile(c.path, 0)
		if Class(err) != c.class || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %s (%s)", c.path, err, c.class, c.msg)
		}
	}
	if _, err := OpenFile(dir, 0); !errors.Is(err, os.ErrInvalid) {
		t.Errorf("a directory: %v", err)
	}
	if _, err := OpenFile(filepath.Join(dir, "nope"), 0); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
	img := openBase(t)
	v, _ := img.Pin()
	if err := v.Verify(); err != nil {
		t.Errorf("Verify of base: %v", err)
	}
	v.Release()
	img.Close()
}

// Get, GetBatch and the zero-copy getters allocate nothing, for hits and
// misses.
func TestGetAllocatesNothing(t *testing.T) {
	img := openBase(t)
	defer img.Close()
	v, _ := img.Pin()
	defer v.Release()
	keys := []string{"s", "missing", "fl", "sh1"}
	vals, errs := make([]Value, len(keys)), make([]error, len(keys))
	n := testing.AllocsPerRun(200, func() {
		a, _ := v.Get("s")
		_, err := v.Get("missing")
		fl, _ := v.Get("fl")
		_, _ = fl.Float32s()
		_, _ = a.TextBytes()
		v.GetBatch(keys, vals, errs)
		if err != ErrNotFound {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per run", n)
	}
}

// filePmdKB: how many kB of the mappings of the file named name this
// process maps with 2 MiB entries (/proc/self/smaps, FilePmdMapped).
func filePmdKB(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	kb, in := 0, false
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			in = strings.HasSuffix(l, "/"+name)
		} else if in && strings.HasPrefix(l, "FilePmdMapped:") {
			var v int
			if _, err := fmt.Sscanf(l, "FilePmdMapped: %d kB", &v); err == nil {
				kb += v
			}
		}
	}
	return kb
}

// TestPopulateAfterHugePageAdvice: OpenFile advises MADV_HUGEPAGE before
// the first fault and prefaults (Populate) after the advice, so that a cold
// image on a filesystem with large folios is mapped with 2 MiB entries,
// with Populate and without it (the C reader's
// Open.PopulateAfterHugePageAdvice). Skipped where a bare mapping given the
// advice and read page by page gets none.
func TestPopulateAfterHugePageAdvice(t *testing.T) {
	var recs []rec2
	for i := 0; i < 200000; i++ { // about 8 MiB
		recs = append(recs, rec2{key: fmt.Sprintf("key_%d", i), typ: TypeString, value: []byte(fmt.Sprintf("val_%d", i))})
	}
	path := filepath.Join(t.TempDir(), "cold.shmkv")
	if err := os.WriteFile(path, encodeV2(recs, enc2Opts{buckets: 60000, seed: 9}), 0o644); err != nil {
		t.Fatal(err)
	}
	evict := func() {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			t.Fatal(err)
		}
	}
	// the probe: can a cold file here be read into 2 MiB folios at all?
	evict()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	mem, err := mapFile(int(f.Fd()), uint64(st.Size()), false)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	sum := byte(0)
	for i := 0; i < len(mem); i += 4096 {
		sum += mem[i]
	}
	probe := filePmdKB(t, "cold.shmkv")
	unmapFile(mem)
	if probe == 0 {
		t.Skipf("%s: a cold file read under MADV_HUGEPAGE gets no 2 MiB mapping here (transparent huge pages off, or no large folios; sum %d)", path, sum)
	}
	var kb [2]int // without, with Populate
	for i, flags := range []OpenFlags{NoVerify, NoVerify | Populate} {
		evict()
		img, err := OpenFile(path, flags)
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < len(recs); j += 997 {
			if v, err := img.Text(recs[j].key); err != nil || v != string(recs[j].value) {
				t.Fatalf("%s: %q, %v", recs[j].key, v, err)
			}
		}
		kb[i] = filePmdKB(t, "cold.shmkv")
		img.Close()
	}
	if kb[0] < probe/2 || kb[1] < probe/2 {
		t.Fatalf("kB of the image on 2 MiB entries: %d without Populate, %d with it; a bare mapping given the advice: %d", kb[0], kb[1], probe)
	}
	t.Logf("%d kB on 2 MiB entries without Populate, %d with it, %d for the probe", kb[0], kb[1], probe)
}
