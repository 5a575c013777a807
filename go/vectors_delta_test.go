package shmkv

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestVectorsDeltaManifest: runVectors on a manifest of version 3 that this
// test writes, as tests/vectors' generator will (delta vectors with
// tombstones among their entries, a delta field read through, and a delta
// of another image refused with SHMKV_EBASE), over images of the test
// encoder: the manifest 3 path of TestVectors on images other than the
// shared vectors' (tests/vectors).
func TestVectorsDeltaManifest(t *testing.T) {
	dir := t.TempDir()
	baseRecs := []rec2{
		{key: "a", typ: TypeString, value: []byte("base a")},
		{key: "b", typ: TypeInt64, value: le.AppendUint64(nil, 7)},
		{key: "c", typ: TypeBool, value: []byte{1}},
		{key: "d", typ: TypeBytes, value: []byte{0, 1, 2}, out: true},
		{key: "gone", typ: TypeString, value: []byte("removed by the delta")},
		{key: "old", typ: TypeString, value: []byte("long expired"), expires: 1000},
	}
	deltaRecs := []rec2{
		{key: "a", typ: TypeInt64, value: le.AppendUint64(nil, 1)},
		{key: "new", typ: TypeString, value: []byte("added"), out: true},
		{key: "c", typ: TypeString, value: []byte("expired upsert"), expires: 2000},
		{key: "old", typ: TypeString, value: []byte("renewed"), expires: 4_000_000_000},
		{key: "gone", tomb: true},
		{key: "gone/out", tomb: true, out: true},
	}
	base := encodeV2(baseRecs, enc2Opts{buckets: 3, seed: 5, name: "base"})
	do := deltaOf(base)
	do.buckets = 2
	delta := encodeV2(deltaRecs, do)
	other := deltaOf(encodeV2(baseRecs[:2], enc2Opts{buckets: 3, seed: 5}))
	other.buckets = 2
	for name, b := range map[string][]byte{"base.img": base, "delta.img": delta, "other.img": encodeV2(deltaRecs, other)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	byKey := func(recs []rec2) map[string]rec2 {
		m := map[string]rec2{}
		for _, r := range recs {
			m[r.key] = r
		}
		return m
	}
	bm, dm := byKey(baseRecs), byKey(deltaRecs)
	order := func(img []byte) []string { // the image's records, in its order
		var keys []string
		for e, err := range openV2(t, img, 0).Records() {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, string(e.Key))
		}
		return keys
	}
	var baseEntries, deltaEntries, through []vEntry // through: the delta's upserts, then the base's records it lacks
	for _, k := range order(delta) {
		deltaEntries = append(deltaEntries, manifestEntry(t, dm[k]))
		if !dm[k].tomb {
			through = append(through, manifestEntry(t, dm[k]))
		}
	}
	for _, k := range order(base) {
		baseEntries = append(baseEntries, manifestEntry(t, bm[k]))
		if _, held := dm[k]; !held {
			through = append(through, manifestEntry(t, bm[k]))
		}
	}
	hx := func(s string) string { return hex.EncodeToString([]byte(s)) }
	m := manifest{Format: "shmkv-conformance-vectors", ManifestVersion: 3, ImageFormatVersion: 2, Vectors: []vector{
		{Name: "base", Format: 2, File: "base.img", Open: "OK", Verify: "OK", Entries: baseEntries},
		{Name: "delta", Format: 2, File: "delta.img", Open: "OK", Verify: "OK", Entries: deltaEntries,
			Gets: []vGet{{KeyHex: hx("gone"), Result: "SHMKV_ENOTFOUND"}, {KeyHex: hx("a"), Result: "OK", Value: json.RawMessage(`"1"`)}},
			Delta: &vDelta{Base: "base.img", Stack: "OK", Entries: through,
				Gets: []vGet{
					{KeyHex: hx("a"), Result: "OK", Value: json.RawMessage(`"1"`)},
					{KeyHex: hx("b"), Result: "OK", Value: json.RawMessage(`"7"`)},
					{KeyHex: hx("c"), Result: "SHMKV_ENOTFOUND"},
					{KeyHex: hx("gone"), Result: "SHMKV_ENOTFOUND"},
					{KeyHex: hx("old"), Result: "OK", Value: json.RawMessage(`"renewed"`)},
					{KeyHex: hx("nowhere"), Result: "SHMKV_ENOTFOUND"},
				},
				Batches: []vBatch{{KeysHex: []string{hx("a"), hx("gone"), hx("d"), hx("c"), hx("new")}, Results: []string{"OK", "SHMKV_ENOTFOUND", "OK", "SHMKV_ENOTFOUND", "OK"}}},
			}},
		{Name: "delta_of_another_image", Format: 2, File: "other.img", Open: "OK", Verify: "OK", Entries: deltaEntries,
			Delta: &vDelta{Base: "base.img", Stack: "SHMKV_EBASE"}},
	}}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := parseManifest(raw)
	if err != nil {
		t.Fatal(err)
	}
	if n := runVectors(t, dir, parsed); n != 2 {
		t.Fatalf("%d vectors read through, want 2", n)
	}
}

// manifestEntry: r as the manifest lists it (tests/vectors/README.md):
// a tombstone by its key and type alone.
func manifestEntry(t *testing.T, r rec2) vEntry {
	e := vEntry{KeyHex: hex.EncodeToString([]byte(r.key)), Type: r.typ.String(), Shared: r.shared, RawHex: hex.EncodeToString(r.value),
		Expires: r.expires, Expired: r.expires != 0 && clock() >= int64(r.expires)}
	if r.tomb {
		return vEntry{KeyHex: e.KeyHex, Type: "tombstone"}
	}
	var v any
	switch r.typ {
	case TypeString:
		v, e.Count = string(r.value), len(r.value)
	case TypeBytes:
		v, e.Count = e.RawHex, len(r.value)
	case TypeInt64:
		v, e.Count = strconv.FormatInt(int64(le.Uint64(r.value)), 10), 1
	case TypeBool:
		v, e.Count = r.value[0] == 1, 1
	default:
		t.Fatalf("%s: a type this test does not encode", r.typ)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	e.Value = b
	return e
}
