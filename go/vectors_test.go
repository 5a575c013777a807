package shmkv

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The shared conformance vectors (tests/vectors/README.md): every verdict,
// every entry and every listed lookup of manifest.json.

const vectorsDir = "../tests/vectors"

type manifest struct {
	Format          string   `json:"format"`
	ManifestVersion int      `json:"manifest_version"`
	Vectors         []vector `json:"vectors"`
	VectorsV2       []vector `json:"vectors_v2"` // format 2 (layout B)
}

type vector struct {
	Name    string   `json:"name"`
	File    string   `json:"file"`
	Open    string   `json:"open"`
	Verify  string   `json:"verify"`
	Entries []vEntry `json:"entries"`
	Gets    []struct {
		KeyHex string `json:"key_hex"`
		Result string `json:"result"`
	} `json:"gets"`
}

type vEntry struct {
	KeyHex  string          `json:"key_hex"`
	Type    string          `json:"type"`
	Shared  bool            `json:"shared"`
	Count   int             `json:"count"`
	RawHex  string          `json:"raw_hex"`
	Value   json.RawMessage `json:"value"`
	Expires uint32          `json:"expires"` // format 2; 0: none
}

func loadManifest(t testing.TB) manifest {
	raw, err := os.ReadFile(filepath.Join(vectorsDir, "manifest.json"))
	if err != nil {
		t.Fatalf("the shared vectors: %v", err)
	}
	var m manifest
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Format != "shmkv-conformance-vectors" || m.ManifestVersion != 1 {
		t.Fatalf("unknown manifest %q version %d", m.Format, m.ManifestVersion)
	}
	if len(m.Vectors) < 30 || len(m.VectorsV2) < 30 {
		t.Fatalf("only %d format 1 and %d format 2 vectors", len(m.Vectors), len(m.VectorsV2))
	}
	return m
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
	for _, vec := range append(m.Vectors, m.VectorsV2...) {
		t.Run(vec.Name, func(t *testing.T) {
			path := filepath.Join(vectorsDir, vec.File)
			img, err := OpenFile(path, 0)
			if got := Class(err); got != vec.Open {
				t.Fatalf("open: %s (%v), the manifest says %s", got, err, vec.Open)
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
				checkEntries(t, v, vec.Entries)
			}
			for _, g := range vec.Gets {
				_, err := v.GetBytes(unhex(t, g.KeyHex))
				if got := Class(err); got != g.Result {
					t.Errorf("get %s: %s (%v), the manifest says %s", g.KeyHex, got, err, g.Result)
				}
			}
		})
	}
}

// checkEntries: iteration yields exactly the manifest's entries, in order
// (format 2: with their expiry), and each looks up to the same value through
// every getter; an entry whose expiry the clock has reached is absent to
// Get and GetBatch.
func checkEntries(t *testing.T, v *View, want []vEntry) {
	it := v.Iter()
	i := 0
	for ; it.Next(); i++ {
		if i >= len(want) {
			t.Fatalf("iteration yields more than the %d entries", len(want))
		}
		w := want[i]
		if k := hex.EncodeToString(it.Key()); k != w.KeyHex {
			t.Fatalf("entry %d: key %s, want %s", i, k, w.KeyHex)
		}
		checkValue(t, w, it.Value())
		if it.Expires() != w.Expires {
			t.Fatalf("entry %d: expires %d, want %d", i, it.Expires(), w.Expires)
		}
		if e, err := v.Expires(string(it.Key())); err != nil || e != w.Expires {
			t.Fatalf("entry %d: View.Expires %d (%v), want %d", i, e, err, w.Expires)
		}
		if w.Expires != 0 && clock() >= int64(w.Expires) {
			if _, err := v.GetBytes(it.Key()); !errors.Is(err, ErrNotFound) {
				t.Fatalf("get %s, expired at %d: %v", w.KeyHex, w.Expires, err)
			}
			continue
		}
		got, err := v.GetBytes(it.Key())
		if err != nil {
			t.Fatalf("get %s: %v", w.KeyHex, err)
		}
		checkValue(t, w, got)
		keys := []string{string(it.Key()), "no such key \x01"}
		vals, errs := make([]Value, 2), make([]error, 2)
		v.GetBatch(keys, vals, errs)
		if errs[0] != nil || !errors.Is(errs[1], ErrNotFound) {
			t.Fatalf("batch of %s: %v, %v", w.KeyHex, errs[0], errs[1])
		}
		checkValue(t, w, vals[0])
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if i != len(want) {
		t.Fatalf("iteration yields %d entries, the manifest %d", i, len(want))
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
	var got, want any
	var err error
	dec := func(x any) {
		d := json.NewDecoder(bytes.NewReader(w.Value))
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
		if v.Type() == TypeF32List {
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
			bits := 64
			if v.Type() == TypeF32List {
				bits = 32
			}
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
		t.Fatalf("%s (%s): %v (%v), want %v", w.KeyHex, w.Type, got, err, want)
	}
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
