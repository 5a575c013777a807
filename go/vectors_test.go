package shmkv

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The shared conformance vectors (tests/vectors/README.md), manifest
// version 2 or 3: every verdict, every entry (live and expired), every
// listed lookup and batch of manifest.json; format 1 images refused with
// ErrVersion and the message naming their converter. Manifest 3 adds
// delta vectors (FORMAT.md §19): a delta's own entries list its
// tombstones (type "tombstone"), and its optional "delta" field says what
// reading another vector's image (base) through it gives: ErrBase, or
// every record (entries), lookups and batches.

const vectorsDir = "../tests/vectors"

type manifest struct {
	Format             string   `json:"format"`
	ManifestVersion    int      `json:"manifest_version"`
	ImageFormatVersion int      `json:"image_format_version"`
	Vectors            []vector `json:"vectors"`
}

type vector struct {
	Name    string   `json:"name"`
	Format  int      `json:"format"`
	File    string   `json:"file"`
	About   string   `json:"about"`
	Open    string   `json:"open"`
	Verify  string   `json:"verify"`
	Entries []vEntry `json:"entries"`
	Gets    []vGet   `json:"gets"`
	Batches []vBatch `json:"batches"`
	Delta   *vDelta  `json:"delta"` // manifest 3: a delta vector's base read through it
}

type vBatch struct {
	KeysHex []string `json:"keys_hex"`
	Results []string `json:"results"`
}

// vDelta: reading the vector Base (a file beside the manifest) through
// this vector's delta: "OK" or "SHMKV_EBASE" (Stack), and when OK every
// record in the all-records iteration's order (the delta's upserts in its
// image order, then the base's records the delta does not hold), listed
// lookups and batches, in the shapes of a vector's own.
type vDelta struct {
	Base    string   `json:"base"`
	Stack   string   `json:"stack"`
	Entries []vEntry `json:"entries"`
	Gets    []vGet   `json:"gets"`
	Batches []vBatch `json:"batches"`
}

type vEntry struct {
	KeyHex  string          `json:"key_hex"`
	Type    string          `json:"type"`
	Shared  bool            `json:"shared"`
	Count   int             `json:"count"`
	RawHex  string          `json:"raw_hex"`
	Value   json.RawMessage `json:"value"`
	Expires uint32          `json:"expires"` // 0: none
	Expired bool            `json:"expired"`
}

type vGet struct {
	KeyHex string          `json:"key_hex"`
	Result string          `json:"result"`
	Value  json.RawMessage `json:"value"` // the value the get returns, if listed
}

// parseManifest refuses a manifest whose format, manifest_version or image
// format version this test does not know: a new manifest version may ask
// for checks this test does not make.
func parseManifest(raw []byte) (manifest, error) {
	var m manifest
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return m, err
	}
	if m.Format != "shmkv-conformance-vectors" || m.ManifestVersion != 2 && m.ManifestVersion != 3 || m.ImageFormatVersion != formatVersion {
		return m, fmt.Errorf("unknown manifest: format %q, manifest_version %d, image_format_version %d (this test reads shmkv-conformance-vectors 2 and 3 of format 2)",
			m.Format, m.ManifestVersion, m.ImageFormatVersion)
	}
	return m, nil
}

func loadManifest(t testing.TB) manifest {
	raw, err := os.ReadFile(filepath.Join(vectorsDir, "manifest.json"))
	if err != nil {
		t.Fatalf("the shared vectors: %v", err)
	}
	m, err := parseManifest(raw)
	if err != nil {
		t.Fatal(err)
	}
	var n [3]int
	for _, v := range m.Vectors {
		if v.Format == 1 || v.Format == 2 {
			n[v.Format]++
		}
	}
	if n[2] < 30 || n[1] < 1 || n[1]+n[2] != len(m.Vectors) {
		t.Fatalf("%d vectors: %d of format 2, %d of format 1, the rest of no format", len(m.Vectors), n[2], n[1])
	}
	return m
}

func TestManifestVersion(t *testing.T) {
	for _, c := range []struct {
		raw string
		ok  bool
	}{
		{`{"format": "shmkv-conformance-vectors", "manifest_version": 2, "image_format_version": 2, "vectors": []}`, true},
		{`{"format": "shmkv-conformance-vectors", "manifest_version": 1, "image_format_version": 1, "vectors": []}`, false},
		{`{"format": "shmkv-conformance-vectors", "manifest_version": 3, "image_format_version": 2, "vectors": []}`, true},
		{`{"format": "shmkv-conformance-vectors", "manifest_version": 4, "image_format_version": 2, "vectors": []}`, false},
		{`{"format": "shmkv-conformance-vectors", "manifest_version": 2, "image_format_version": 3, "vectors": []}`, false},
		{`{"format": "something else", "manifest_version": 2, "image_format_version": 2, "vectors": []}`, false},
		{`{"manifest_version": 2, "vectors": []}`, false},
	} {
		if _, err := parseManifest([]byte(c.raw)); (err == nil) != c.ok {
			t.Errorf("%s: %v", c.raw, err)
		}
	}
}

func unhex(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVectors(t *testing.T) {
	m := loadManifest(t)
	deltas := runVectors(t, vectorsDir, m)
	t.Logf("manifest version %d: %d vectors, %d read through as deltas", m.ManifestVersion, len(m.Vectors), deltas)
}

// runVectors checks every vector of m, whose files are in dir; it returns
// how many delta vectors read a base through themselves.
func runVectors(t *testing.T, dir string, m manifest) int {
	deltas := 0
	for _, vec := range m.Vectors {
		t.Run(fmt.Sprintf("v%d/%s", vec.Format, vec.Name), func(t *testing.T) {
			path := filepath.Join(dir, vec.File)
			img, err := OpenFile(path, 0)
			if got := Class(err); got != vec.Open {
				t.Fatalf("open: %s (%v), the manifest says %s", got, err, vec.Open)
			}
			if vec.Format == 1 { // retired: refused, naming the converter
				if vec.Open != "SHMKV_EVERSION" || !strings.HasSuffix(err.Error(), msgRetired) {
					t.Fatalf("format 1: %v (the manifest says %s); want ErrVersion ending %q", err, vec.Open, msgRetired)
				}
				if _, err := OpenFile(path, Deep|NoVerify); !errors.Is(err, ErrVersion) {
					t.Fatalf("format 1, deep open: %v", err)
				}
				return
			}
			if err != nil {
				return
			}
			defer img.Close()
			deep, err := OpenFile(path, Deep)
			if got := Class(err); got != vec.Verify {
				t.Errorf("deep open: %s (%v), the manifest says %s", got, err, vec.Verify)
			}
			if err == nil {
				deep.Close()
			}
			v, err := img.Pin()
			if err != nil {
				t.Fatal(err)
			}
			defer v.Release()
			if vec.Verify == "OK" {
				checkEntries(t, img, v, vec.Entries)
			}
			for _, g := range vec.Gets {
				checkGet(t, img, v, g)
			}
			for _, bt := range vec.Batches {
				checkBatch(t, v, bt.KeysHex, bt.Results)
			}
			if vec.Delta != nil {
				deltas++
				checkThroughVector(t, dir, img, vec.Delta)
			}
		})
	}
	return deltas
}

// checkThroughVector: the base vector's image read through delta (the
// vector's image; a plain image there is refused with ErrBase):
// WithDelta's class, and when it succeeds every record, live and expired,
// when listed (a damaged delta's are not), every listed lookup and batch,
// as for an image.
func checkThroughVector(t *testing.T, dir string, delta *Image, d *vDelta) {
	if !delta.IsDelta() && d.Stack != "SHMKV_EBASE" {
		t.Fatalf("a plain image as the delta: the manifest says %s", d.Stack)
	}
	base, err := OpenFile(filepath.Join(dir, d.Base), 0)
	if err != nil {
		t.Fatalf("the base %s: %v", d.Base, err)
	}
	defer base.Close()
	through, err := base.WithDelta(delta)
	if got := Class(err); got != d.Stack {
		t.Fatalf("%s through the delta: %s (%v), the manifest says %s", d.Base, got, err, d.Stack)
	}
	if err != nil {
		return
	}
	defer through.Close()
	v, err := through.Pin()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if d.Entries != nil {
		checkEntries(t, through, v, d.Entries)
	}
	for _, g := range d.Gets {
		checkGet(t, through, v, g)
	}
	for _, bt := range d.Batches {
		checkBatch(t, v, bt.KeysHex, bt.Results)
	}
}

// checkEntries: Records yields exactly the manifest's entries, in order,
// with their expiry; Entries exactly those not expired (nor tombstones),
// in order; each live one looks up to the same value through every
// getter; an expired one, and a delta's tombstone, is absent to Get,
// GetBatch and the copying getters (a tombstone to Expires too).
func checkEntries(t *testing.T, img *Image, v *View, want []vEntry) {
	var live []vEntry
	for _, w := range want {
		if w.Expired != (w.Expires != 0 && clock() >= int64(w.Expires)) {
			t.Fatalf("%s: expires %d, expired %v: the manifest's flag and the clock disagree", w.KeyHex, w.Expires, w.Expired)
		}
		if !w.Expired && w.Type != "tombstone" {
			live = append(live, w)
		}
	}
	iterated := func(what string, seq func(func(Entry, error) bool), want []vEntry) {
		i := 0
		for e, err := range seq {
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if i >= len(want) {
				t.Fatalf("%s yields more than the %d entries", what, len(want))
			}
			w := want[i]
			if k := hex.EncodeToString(e.Key); k != w.KeyHex || e.Expires != w.Expires {
				t.Fatalf("%s, entry %d: key %s expires %d, want %s expires %d", what, i, k, e.Expires, w.KeyHex, w.Expires)
			}
			checkValue(t, w, e.Value)
			i++
		}
		if i != len(want) {
			t.Fatalf("%s yields %d entries, the manifest %d", what, i, len(want))
		}
	}
	iterated("Records", v.Records(), want)
	iterated("Entries", v.Entries(), live)
	for _, w := range want {
		key := unhex(t, w.KeyHex)
		tomb := w.Type == "tombstone"
		if e, err := v.Expires(string(key)); tomb && !errors.Is(err, ErrNotFound) || !tomb && (err != nil || e != w.Expires) {
			t.Fatalf("%s: View.Expires %d (%v), want %d (a tombstone: ErrNotFound)", w.KeyHex, e, err, w.Expires)
		}
		keys := []string{string(key), "no such key \x01"}
		vals, errs := make([]Value, 2), make([]error, 2)
		v.GetBatch(keys, vals, errs)
		got, err := v.GetBytes(key)
		if w.Expired || tomb {
			if !errors.Is(err, ErrNotFound) || !errors.Is(errs[0], ErrNotFound) {
				t.Fatalf("get %s, expired at %d: %v, batch %v", w.KeyHex, w.Expires, err, errs[0])
			}
			checkGetters(t, img, string(key), "SHMKV_ENOTFOUND", 0)
			continue
		}
		if err != nil || errs[0] != nil || !errors.Is(errs[1], ErrNotFound) {
			t.Fatalf("get %s: %v; batch %v, %v", w.KeyHex, err, errs[0], errs[1])
		}
		checkValue(t, w, got)
		checkValue(t, w, vals[0])
		checkGetters(t, img, string(key), "OK", got.Type())
	}
}

// checkGet: a listed lookup's result through Get, a batch of one and
// every copying getter, and its value where the manifest lists it.
func checkGet(t *testing.T, img *Image, v *View, g vGet) {
	key := unhex(t, g.KeyHex)
	got, err := v.GetBytes(key)
	if c := Class(err); c != g.Result {
		t.Errorf("get %s: %s (%v), the manifest says %s", g.KeyHex, c, err, g.Result)
		return
	}
	vals, errs := make([]Value, 1), make([]error, 1)
	v.GetBatch([]string{string(key)}, vals, errs)
	if c := Class(errs[0]); c != g.Result || !bytes.Equal(vals[0].Raw(), got.Raw()) {
		t.Errorf("batch of one, %s: %s (%v), the manifest says %s", g.KeyHex, c, errs[0], g.Result)
	}
	checkGetters(t, img, string(key), g.Result, got.Type())
	if g.Value != nil && g.Result == "OK" {
		if s := checkTyped(t, got, g.Value); s != "" {
			t.Errorf("get %s: %s", g.KeyHex, s)
		}
	}
}

// checkBatch: one GetBatch of the keys answers each as listed, and as its
// single get does (class and value).
func checkBatch(t *testing.T, v *View, keysHex, results []string) {
	if len(keysHex) != len(results) {
		t.Fatalf("a batch of %d keys with %d results", len(keysHex), len(results))
	}
	keys := make([]string, len(keysHex))
	for i, k := range keysHex {
		keys[i] = string(unhex(t, k))
	}
	vals, errs := make([]Value, len(keys)), make([]error, len(keys))
	v.GetBatch(keys, vals, errs)
	for i, k := range keys {
		one, err := v.Get(k)
		if c := Class(errs[i]); c != results[i] || c != Class(err) || !bytes.Equal(one.Raw(), vals[i].Raw()) || one.Type() != vals[i].Type() {
			t.Errorf("batch key %d (%s): %s (%v), its get %s; the manifest says %s", i, keysHex[i], c, errs[i], Class(err), results[i])
		}
	}
}

// copyingGetters: what an Image and a Cache share, for checkGetters.
type copyingGetters interface {
	Bytes(string) ([]byte, error)
	Text(string) (string, error)
	Int64(string) (int64, error)
	Float64(string) (float64, error)
	Bool(string) (bool, error)
	Float32s(string) ([]float32, error)
	Float64s(string) ([]float64, error)
	Int64s(string) ([]int64, error)
	Strings(string) ([]string, error)
}

// checkGetters: every copying getter of the image answers key with the
// get's class (result); where the get succeeds, the getter of the value's
// type succeeds and the others say ErrType.
func checkGetters(t *testing.T, img copyingGetters, key string, result string, typ Type) {
	getters := map[Type]func() error{
		TypeBytes:   func() error { _, err := img.Bytes(key); return err },
		TypeString:  func() error { _, err := img.Text(key); return err },
		TypeInt64:   func() error { _, err := img.Int64(key); return err },
		TypeBool:    func() error { _, err := img.Bool(key); return err },
		TypeFloat64: func() error { _, err := img.Float64(key); return err },
		TypeF32List: func() error { _, err := img.Float32s(key); return err },
		TypeF64List: func() error { _, err := img.Float64s(key); return err },
		TypeI64List: func() error { _, err := img.Int64s(key); return err },
		TypeStrList: func() error { _, err := img.Strings(key); return err },
	}
	for ty, get := range getters {
		err := get()
		want := result
		if result == "OK" && ty != typ {
			want = "SHMKV_ETYPE"
		}
		if result == "OK" && ty == typ && ty == TypeStrList && errors.Is(err, ErrCorrupt) {
			continue // the get checks a strlist's count; Strings copies every string, checking each
		}
		if Class(err) != want {
			t.Errorf("%x: the %s getter says %v; want %s", key, ty, err, want)
		}
	}
}

func checkValue(t *testing.T, w vEntry, v Value) {
	t.Helper()
	if v.Type().String() != w.Type || v.Shared() != w.Shared || v.Count() != w.Count {
		t.Fatalf("%s: %s shared=%v count=%d, want %s shared=%v count=%d",
			w.KeyHex, v.Type(), v.Shared(), v.Count(), w.Type, w.Shared, w.Count)
	}
	if r := hex.EncodeToString(v.Raw()); r != w.RawHex {
		t.Fatalf("%s: raw %s, want %s", w.KeyHex, r, w.RawHex)
	}
	if s := checkTyped(t, v, w.Value); s != "" {
		t.Fatalf("%s (%s): %s", w.KeyHex, w.Type, s)
	}
}

// checkTyped compares v, read through its type's getter, with the
// manifest's value (FORMAT.md's JSON encoding: bytes as hex, i64 as a
// decimal string, floats as numbers); "" when they agree.
func checkTyped(t *testing.T, v Value, raw json.RawMessage) string {
	var got, want any
	var err error
	dec := func(x any) {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(x); err != nil {
			t.Fatal(err)
		}
	}
	switch v.Type() {
	case TypeBytes:
		var s string
		dec(&s)
		b, e := v.Bytes()
		got, want, err = hex.EncodeToString(b), s, e
	case TypeString:
		var s string
		dec(&s)
		got, err = v.Text()
		want = s
	case TypeInt64:
		var s string
		dec(&s)
		n, e := v.Int64()
		got, want, err = strconv.FormatInt(n, 10), s, e
	case TypeBool:
		var b bool
		dec(&b)
		got, err = v.Bool()
		want = b
	case TypeFloat64:
		var n json.Number
		dec(&n)
		f, e := v.Float64()
		got, want, err = math.Float64bits(f), floatBits(t, string(n), 64), e
	case TypeF32List, TypeF64List:
		var ns []json.Number
		dec(&ns)
		var g, wb []uint64
		bits := 64
		if v.Type() == TypeF32List {
			bits = 32
			l, e := v.Float32s()
			for _, f := range l {
				g = append(g, uint64(math.Float32bits(f)))
			}
			err = e
		} else {
			l, e := v.Float64s()
			for _, f := range l {
				g = append(g, math.Float64bits(f))
			}
			err = e
		}
		for _, n := range ns {
			wb = append(wb, floatBits(t, string(n), bits))
		}
		got, want = fmtJSON(g), fmtJSON(wb)
	case TypeI64List:
		var ss []string
		dec(&ss)
		l, e := v.Int64s()
		var g []string
		for _, n := range l {
			g = append(g, strconv.FormatInt(n, 10))
		}
		got, want, err = fmtJSON(g), fmtJSON(ss), e
	case TypeStrList:
		var ss []string
		dec(&ss)
		l, e := v.Strings()
		got, want, err = fmtJSON(l), fmtJSON(ss), e
	}
	if err != nil || got != want {
		return fmt.Sprintf("%v (%v), want %v", got, err, want)
	}
	return ""
}

func floatBits(t *testing.T, s string, bits int) uint64 {
	f, err := strconv.ParseFloat(s, bits)
	if err != nil {
		t.Fatal(err)
	}
	if bits == 32 {
		return uint64(math.Float32bits(float32(f)))
	}
	return math.Float64bits(f)
}

func fmtJSON(x any) string {
	b, _ := json.Marshal(x)
	if string(b) == "null" {
		return "[]"
	}
	return string(b)
}
