package shmkv

import (
	"errors"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

// Protocol 2 control segments built by hand (lib/PROTOCOL.md, "Protocol
// 2: base and overlay"), without a loader: a generation read through its
// overlay by every getter, the choice of base and overlay copies, every
// rule that refuses a generation (ErrProto, ErrBase), and refresh across
// overlays and bases.

// base2Recs: the base of these tests (the expiry clock is pinned at 2000:
// an expiry of 1000 has passed).
func base2Recs() []rec2 {
	return []rec2{
		{key: "kept", typ: TypeString, value: []byte("y")},
		{key: "gone", typ: TypeString, value: []byte("x")},
		{key: "upd", typ: TypeString, value: []byte("old")},
		{key: "bexp", typ: TypeString, value: []byte("b"), expires: 1000},
		{key: "revive", typ: TypeString, value: []byte("r0"), expires: 1000},
		{key: "hidden", typ: TypeString, value: []byte("h")},
		{key: "n", typ: TypeInt64, value: le.AppendUint64(nil, 7)},
	}
}

// overlay2Recs: the changes of an overlay; key "ov" says which copy.
func overlay2Recs(which string) []rec2 {
	return []rec2{
		{key: "ov", typ: TypeString, value: []byte(which)},
		{key: "upd", typ: TypeString, value: []byte("new")},
		{key: "new", typ: TypeString, value: []byte("n")},
		{key: "gone", tomb: true},
		{key: "revive", typ: TypeString, value: []byte("r1")},                // a live upsert over an expired record
		{key: "hidden", typ: TypeString, value: []byte("hx"), expires: 1000}, // an expired upsert over a live one
		{key: "oexp", typ: TypeString, value: []byte("o"), expires: 1000},
		{key: "n", typ: TypeInt64, value: le.AppendUint64(nil, 8)},
	}
}

func base2() []byte { return encodeV2(base2Recs(), enc2Opts{buckets: 2, name: "base"}) }

// overlayOf: a delta of base (encoded) holding recs.
func overlayOf(base []byte, recs []rec2) []byte {
	o := deltaOf(base)
	o.buckets, o.name = 2, "overlay"
	return encodeV2(recs, o)
}

// want2: what each key answers through the overlay at clock 2000 ("":
// absent).
var want2 = map[string]string{
	"kept": "y", "gone": "", "upd": "new", "new": "n", "bexp": "", "revive": "r1",
	"hidden": "", "oexp": "", "absent": "",
}

// checkThrough2: c reads base2 through overlay2Recs(which): the copying
// getters, a view's Get, GetBatch, Expires, Entries, Records, Len and
// Verify.
func checkThrough2(t *testing.T, c *Cache, which string) {
	t.Helper()
	c.SetClock(2000)
	want := map[string]string{"ov": which}
	for k, v := range want2 {
		want[k] = v
	}
	v, err := c.Pin()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	keys := slices.Sorted(maps.Keys(want))
	vals, errs := make([]Value, len(keys)), make([]error, len(keys))
	v.GetBatch(keys, vals, errs)
	for i, k := range keys {
		got, err := c.Text(k)
		val, verr := v.Get(k)
		text, _ := val.TextBytes()
		btext, _ := vals[i].TextBytes()
		if want[k] == "" {
			if !errors.Is(err, ErrNotFound) || !errors.Is(verr, ErrNotFound) || !errors.Is(errs[i], ErrNotFound) {
				t.Errorf("%q: Text %q %v, Get %v, GetBatch %v; want absent", k, got, err, verr, errs[i])
			}
			continue
		}
		if err != nil || got != want[k] || verr != nil || string(text) != want[k] || errs[i] != nil || string(btext) != want[k] {
			t.Errorf("%q: Text %q %v, Get %q %v, GetBatch %q %v; want %q", k, got, err, text, verr, btext, errs[i], want[k])
		}
	}
	if n, err := c.Int64("n"); n != 8 || err != nil {
		t.Errorf("Int64(n): %d %v, want the overlay's 8", n, err)
	}
	for k, w := range map[string]uint32{"hidden": 1000, "oexp": 1000, "revive": 0, "kept": 0, "bexp": 1000} {
		if e, err := v.Expires(k); e != w || err != nil {
			t.Errorf("Expires(%q): %d %v, want %d", k, e, err, w)
		}
	}
	if _, err := v.Expires("gone"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Expires of a removed key: %v", err)
	}
	entries := func(seq func(func(Entry, error) bool)) []string {
		var ks []string
		for e, err := range seq {
			if err != nil {
				t.Fatal(err)
			}
			ks = append(ks, string(e.Key))
		}
		slices.Sort(ks)
		return ks
	}
	if got, w := entries(v.Entries()), []string{"kept", "n", "new", "ov", "revive", "upd"}; !slices.Equal(got, w) {
		t.Errorf("Entries: %q, want %q", got, w)
	}
	w := []string{"bexp", "hidden", "kept", "n", "new", "oexp", "ov", "revive", "upd"}
	if got := entries(v.Records()); !slices.Equal(got, w) {
		t.Errorf("Records: %q, want %q", got, w)
	}
	if v.Len() != len(w) {
		t.Errorf("Len %d, want %d", v.Len(), len(w))
	}
	if err := v.Verify(); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

// A generation of protocol 2 is read through its overlay wherever the
// overlay's entry stands among the segments, with Verify or not; with no
// overlay, the base alone.
func TestProtocol2ReadsThroughOverlay(t *testing.T) {
	c := newCtlVersion(t, 2, 0, 0, nil)
	b := base2()
	base := c.file("base.img", b, -1, 0)
	ov := c.file("ov.img", overlayOf(b, overlay2Recs("A")), -1, ctlSegOverlay)
	for _, segs := range [][]ctlSegment{{base, ov}, {ov, base}} {
		for _, verify := range []bool{false, true} {
			c.publish(2, 1, segs)
			cache, err := AttachWith("c", AttachOptions{Root: c.dir, Verify: verify})
			if err != nil {
				t.Fatal(err)
			}
			checkThrough2(t, cache, "A")
			cache.Close()
		}
	}
	c.publish(4, 2, []ctlSegment{base})
	cache, err := attachCtl(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	if s, err := cache.Text("gone"); s != "x" || err != nil {
		t.Fatalf("protocol 2 without an overlay: gone = %q %v, want the base's", s, err)
	}
	if _, err := cache.Text("ov"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("protocol 2 without an overlay: ov: %v", err)
	}
}

// The base copy as in protocol 1 ("Replicas"), the overlay copy of its
// node, else the first overlay copy; a base copy that will not map: the
// first base copy, and its overlay.
func TestProtocol2Picks(t *testing.T) {
	c := newCtlVersion(t, 2, 0, 0, nil)
	b := base2()
	b0, b1 := c.file("b0.img", b, 0, 0), c.file("b1.img", b, 1, ctlSegHugetlb)
	o0 := c.file("o0.img", overlayOf(b, overlay2Recs("o0")), 0, ctlSegOverlay)
	o1 := c.file("o1.img", overlayOf(b, overlay2Recs("o1")), 1, ctlSegOverlay|ctlSegHugetlb)
	oa := c.file("oa.img", overlayOf(b, overlay2Recs("oa")), -1, ctlSegOverlay)
	for i, tc := range []struct {
		segs     []ctlSegment
		node     int
		baseNode int
		overlay  string
	}{
		{[]ctlSegment{b0, b1, o0, o1}, 1, 1, "o1"},
		{[]ctlSegment{o1, o0, b1, b0}, 0, 0, "o0"},
		{[]ctlSegment{b0, b1, o1}, 0, 0, "o1"},      // no overlay of node 0: the first
		{[]ctlSegment{oa, b0, o1, b1}, 0, 0, "oa"},  // the first
		{[]ctlSegment{b1, o0, b0, o1}, 63, 1, "o1"}, // no copy of node 63: bases[0], its node's overlay
	} {
		c.publish(uint64(2*i+2), uint64(i+1), tc.segs)
		n := tc.node
		cache, err := attachCtl(c, &n)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if s, _ := cache.Text("ov"); s != tc.overlay || cache.Node() != tc.baseNode {
			t.Errorf("case %d, node %d: base of node %d, overlay %q; want node %d, %q", i, n, cache.Node(), s, tc.baseNode, tc.overlay)
		}
		cache.Close()
	}
	// node 1's base copy is gone: bases[0] (node 0) and node 0's overlay
	if err := os.Remove(b1.path); err != nil {
		t.Fatal(err)
	}
	c.publish(100, 100, []ctlSegment{b0, b1, o1, o0})
	one := 1
	cache, err := attachCtl(c, &one)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	if s, _ := cache.Text("ov"); s != "o0" || cache.Node() != 0 {
		t.Errorf("node 1's base missing: base of node %d, overlay %q; want 0, o0", cache.Node(), s)
	}
	checkThrough2(t, cache, "o0")
}

// Every rule of "Protocol 2" that refuses a control segment or a
// generation, at attach: each a clear ErrProto or ErrBase.
func TestProtocol2Refused(t *testing.T) {
	c := newCtlVersion(t, 2, 0, 0, nil)
	b := base2()
	other := encodeV2(append(base2Recs(), rec2{key: "more", typ: TypeString, value: []byte("m")}), enc2Opts{buckets: 2, name: "base"})
	base := c.file("base.img", b, -1, 0)
	ov := c.file("ov.img", overlayOf(b, overlay2Recs("A")), -1, ctlSegOverlay)
	deltaAsBase := ov
	deltaAsBase.flags = 0
	plainAsOverlay := c.file("plain.img", other, -1, ctlSegOverlay)
	foreign := c.file("foreign.img", overlayOf(other, overlay2Recs("F")), -1, ctlSegOverlay)
	unknown := base
	unknown.flags = 8
	for _, tc := range []struct {
		name    string
		version uint32
		hash    uint64 // 0: the version's
		segs    []ctlSegment
		kind    error
		says    string
	}{
		{"protocol 3", 3, ctlLayoutHash2, []ctlSegment{base}, ErrProto, "protocol version 3; this reader speaks versions 1 and 2"},
		{"protocol 2 with protocol 1's hash", 2, ctlLayoutHash, []ctlSegment{base}, ErrProto, "protocol 2 has 0x15a70b2227f150fa"},
		{"protocol 1 with protocol 2's hash", 1, ctlLayoutHash2, []ctlSegment{base}, ErrProto, "protocol 1 has 0x4b43ad88b167e31c"},
		{"OVERLAY under protocol 1", 1, 0, []ctlSegment{base, ov}, ErrProto, "segment 1 (" + ov.path + ") has flags 0x2; protocol 1 defines 1 (hugetlb)"},
		{"an unknown flag", 2, 0, []ctlSegment{ov, unknown}, ErrProto, "segment 1 (" + base.path + ") has flags 0x8; protocol 2 defines"},
		{"overlays without a base", 2, 0, []ctlSegment{ov, ov}, ErrProto, "2 overlay copies and no base copy"},
		{"a delta as the base", 2, 0, []ctlSegment{deltaAsBase}, ErrProto, "a delta image where the control segment names a base copy"},
		{"a delta as the base under protocol 1", 1, 0, []ctlSegment{deltaAsBase}, ErrProto, "a delta image where the control segment names a base copy"},
		{"a delta as the base, with an overlay", 2, 0, []ctlSegment{deltaAsBase, ov}, ErrProto, "a delta image where the control segment names a base copy"},
		{"a plain image as the overlay", 2, 0, []ctlSegment{base, plainAsOverlay}, ErrProto, "a plain image where the control segment names an overlay copy"},
		{"an overlay of another base", 2, 0, []ctlSegment{base, foreign}, ErrBase, "overlay " + foreign.path + ": the delta (seq 1"},
	} {
		le.PutUint32(c.mem[8:], tc.version)
		h := tc.hash
		if h == 0 {
			h = ctlLayoutHashOf(tc.version)
		}
		le.PutUint64(c.mem[16:], h)
		c.publish(2, 1, tc.segs)
		cache, err := attachCtl(c, nil)
		if err == nil {
			cache.Close()
			t.Errorf("%s: attached", tc.name)
			continue
		}
		if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v (%s); want %v saying %q", tc.name, err, Class(err), tc.kind, tc.says)
		}
	}
}

// Refresh across generations of protocol 2: an overlay, a new overlay of
// the same base, one that does not apply (refused and remembered: the
// cache keeps its generation until the next publish), a new base without
// an overlay; a view pinned before a refresh keeps its generation whole.
func TestProtocol2Refresh(t *testing.T) {
	c := newCtlVersion(t, 2, 0, 0, nil)
	b := base2()
	other := encodeV2(append(base2Recs(), rec2{key: "more", typ: TypeString, value: []byte("m")}), enc2Opts{buckets: 2, name: "base"})
	base := c.file("base.img", b, -1, 0)
	ovA := c.file("a.img", overlayOf(b, overlay2Recs("A")), -1, ctlSegOverlay)
	ovB := c.file("b.img", overlayOf(b, append(overlay2Recs("B"), rec2{key: "kept", tomb: true})), -1, ctlSegOverlay)
	newBase := c.file("other.img", other, -1, 0)
	foreign := c.file("foreign.img", overlayOf(other, overlay2Recs("F")), -1, ctlSegOverlay)
	c.publish(2, 1, []ctlSegment{base})
	cache, err := attachCtl(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	cache.SetClock(2000)
	text := func(k string) string {
		t.Helper()
		s, err := cache.Text(k)
		if errors.Is(err, ErrNotFound) {
			return "-"
		}
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		return s
	}
	refresh := func(want bool) {
		t.Helper()
		if ok, err := cache.Refresh(); ok != want || err != nil {
			t.Fatalf("refresh: %v %v, want %v", ok, err, want)
		}
	}
	if g := text("gone") + text("ov") + text("kept"); g != "x-y" {
		t.Fatalf("generation 1, base alone: %q", g)
	}
	c.publish(4, 2, []ctlSegment{base, ovA})
	refresh(true)
	checkThrough2(t, cache, "A")
	pinned, err := cache.Pin()
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Release()
	c.publish(6, 3, []ctlSegment{ovB, base})
	refresh(true)
	refresh(false)
	if g := text("ov") + text("kept") + text("gone"); g != "B--" || cache.Generation() != 3 {
		t.Fatalf("generation 3, overlay B: %q generation %d", g, cache.Generation())
	}
	if val, err := pinned.Get("kept"); err != nil || string(val.Raw()) != "y" || pinned.Generation() != 2 {
		t.Fatalf("a view of generation 2 after the refresh to 3: %v %v", val, err)
	}
	// an overlay of another base: refused as a bad segment, and remembered
	c.publish(8, 4, []ctlSegment{base, foreign})
	for i := 0; i < 2; i++ {
		if ok, err := cache.Refresh(); ok || !errors.Is(err, ErrBase) {
			t.Fatalf("refresh to an overlay of another base (try %d): %v %v", i, ok, err)
		}
	}
	if g := text("ov"); g != "B" || cache.Generation() != 3 {
		t.Fatalf("after a refused generation: ov %q generation %d, want B 3", g, cache.Generation())
	}
	// a new base (a full load): no overlay
	c.publish(10, 5, []ctlSegment{newBase})
	refresh(true)
	if g := text("ov") + text("kept") + text("gone") + text("more"); g != "-yxm" || cache.Generation() != 5 {
		t.Fatalf("generation 5, a new base: %q generation %d", g, cache.Generation())
	}
	// its overlay (the one refused above applies to it)
	c.publish(12, 6, []ctlSegment{newBase, foreign})
	refresh(true)
	if g := text("ov") + text("kept") + text("gone") + text("more"); g != "Fy-m" {
		t.Fatalf("generation 6, the new base's overlay: %q", g)
	}
	if val, err := pinned.Get("gone"); !errors.Is(err, ErrNotFound) || pinned.Generation() != 2 {
		t.Fatalf("the view of generation 2 at the end: gone %v %v", val, err)
	}
}

// The layout hashes are XXH3-64 (seed 0) of the descriptions in
// lib/shmkv/protocol.h (their one owner, quoted by lib/PROTOCOL.md).
func TestCtlLayoutHashes(t *testing.T) {
	b, err := os.ReadFile("../lib/shmkv/protocol.h")
	if err != nil {
		t.Fatal(err)
	}
	h := string(b)
	desc := func(name string) string {
		m := regexp.MustCompile(`(?s)#define ` + name + `\s+\\\n((?:\s*"[^"]*"\s*\\?\n)+)`).FindStringSubmatch(h)
		if m == nil {
			t.Fatalf("no %s in protocol.h", name)
		}
		var s strings.Builder
		for _, lit := range regexp.MustCompile(`"([^"]*)"`).FindAllStringSubmatch(m[1], -1) {
			s.WriteString(lit[1])
		}
		return s.String()
	}
	hash := func(name string) uint64 {
		m := regexp.MustCompile(`#define ` + name + ` UINT64_C\((0x[0-9a-f]+)\)`).FindStringSubmatch(h)
		if m == nil {
			t.Fatalf("no %s in protocol.h", name)
		}
		v, err := strconv.ParseUint(m[1], 0, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		version  uint32
		desc     string
		hashName string
	}{
		{1, "SHMKV_CTL_LAYOUT_DESC", "SHMKV_CTL_LAYOUT_HASH"},
		{2, "SHMKV_CTL_LAYOUT_DESC_V2", "SHMKV_CTL_LAYOUT_HASH_V2"},
	} {
		d := desc(tc.desc)
		got := ctlLayoutHashOf(tc.version)
		if xxh3.Hash([]byte(d)) != got || hash(tc.hashName) != got {
			t.Errorf("protocol %d: this reader's hash %#016x, XXH3 of %s (%d bytes) %#016x, %s %#016x",
				tc.version, got, tc.desc, len(d), xxh3.Hash([]byte(d)), tc.hashName, hash(tc.hashName))
		}
	}
	if ctlSegHugetlb != 1 || ctlSegOverlay != 2 || ctlSegTop != 4 || !strings.Contains(h, "#define SHMKV_SEG_OVERLAY 2u") || !strings.Contains(h, "#define SHMKV_SEG_HUGETLB 1u") || !strings.Contains(h, "#define SHMKV_SEG_TOP 4u") {
		t.Error("segment flags differ from protocol.h's")
	}
	if ctlLayoutHashOf(3) != 0 || ctlLayoutHashOf(0) != 0 {
		t.Error("a hash for a version this reader does not speak")
	}
}
