package shmkv

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"unsafe"
)

// A refresh keeps what the new generation shares with the current one
// (lib/PROTOCOL.md, "Protocol 2"; keep.go), as tests/overlay_test.cc's
// RefreshKeepsBase checks the C reader's, on hand-made control segments
// (ctl_test.go's fixture).

// mapsOf: how many of this process's mappings are of the file path (one
// unlinked since included).
func mapsOf(t *testing.T, path string) int {
	t.Helper()
	return mapsWhere(t, func(f string) bool { return f == path || f == path+" (deleted)" })
}

// TestProtocol2RefreshKeepsBase: across generations of the same base
// (random new tops over a kept lower, folds into a new lower, no overlay)
// the base's mapping is the one attach made (the same mapping, the same
// address, one mapping of its file), the lower's too while it is the same
// file; the overlays of earlier generations are unmapped once no view pins
// them, those of pinned views stay until released, and each pinned view
// answers its generation's model. A damaged top, or one of another base, is
// refused and the cache keeps its generation whole (nothing of the refused
// one left mapped); a new base file (the same bytes) maps the whole
// generation anew and unmaps the old base.
func TestProtocol2RefreshKeepsBase(t *testing.T) {
	rng := rand.New(rand.NewPCG(0x6b5e, 4))
	l := handLevels()
	opts := enc2Opts{buckets: 64, name: "base"}
	im := l.encode(opts)
	o := l
	o.base = append(slices.Clone(l.base), lvStr("other", "o", 0, false))
	other := o.encode(opts)

	c := newCtlVersion(t, 2, 0, 0, nil)
	b := c.file("base", im.base, -1, 0)
	c.publish(2, 1, []ctlSegment{b})
	cache, err := AttachWith("c", AttachOptions{Root: c.dir, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	base := level(cache.cur.Load(), 0)
	at := unsafe.SliceData(base.mem)
	if n := mapsOf(t, b.path); n != 1 {
		t.Fatalf("attached: %d mappings of the base", n)
	}

	x := levels{base: l.base} // the levels published now
	var lower, top ctlSegment // path "": none
	seq := uint64(2)
	publish := func(gen uint64, segs ...ctlSegment) {
		t.Helper()
		for _, s := range []ctlSegment{lower, top} {
			if s.path != "" {
				segs = append(segs, s)
			}
		}
		seq += 2
		c.publish(seq, gen, segs)
	}
	refresh := func(gen uint64) {
		t.Helper()
		if ok, err := cache.Refresh(); !ok || err != nil || cache.Generation() != gen {
			t.Fatalf("refresh: %v %v at generation %d; want generation %d", ok, err, cache.Generation(), gen)
		}
	}
	// check: the cache reads x as its model, with the base kept.
	check := func(what string) {
		t.Helper()
		if level(cache.cur.Load(), 0) != base || unsafe.SliceData(base.mem) != at {
			t.Fatalf("%s: the base was mapped anew", what)
		}
		for _, s := range []ctlSegment{b, lower, top} {
			if n := mapsOf(t, s.path); s.path != "" && n != 1 {
				t.Fatalf("%s: %d mappings of %s, want 1", what, n, s.path)
			}
		}
		e := x.encode(opts)
		checkLevels(t, cache, x, x.model(lower.path != "", top.path != ""), aloneViews(t, e, lower.path != "", top.path != ""), lvNow)
	}
	// random upserts and tombstones of the base's keys and new ones
	changes := func(tag string, n int) []rec2 {
		var d []rec2
		seen := map[string]bool{}
		for i := range n {
			k := fmt.Sprint("new", rng.IntN(500))
			if rng.IntN(2) == 0 {
				k = l.base[rng.IntN(len(l.base))].key
			}
			if seen[k] {
				continue
			}
			seen[k] = true
			out := len(k) > 100 || rng.IntN(5) == 0 // long keys: OUT
			if rng.IntN(4) == 0 {
				d = append(d, lvTomb(k, out))
			} else {
				d = append(d, lvStr(k, fmt.Sprint(tag, i), 0, out))
			}
		}
		return d
	}
	type held struct {
		v     *View
		m     map[string]rec2
		a     lvAlone
		files []string
	}
	var views []held
	pinnedFile := func(path string) bool {
		for _, h := range views {
			if slices.Contains(h.files, path) {
				return true
			}
		}
		return false
	}

	for g := uint64(2); g < 38; g++ {
		what := fmt.Sprint("generation ", g)
		was := level(cache.cur.Load(), 1)
		lowerKept := lower.path != "" && g%7 != 0 && g%13 != 0
		var gone []ctlSegment // the files the generation before named alone
		if !lowerKept {       // a fold: a new lower, no top (or no overlay at all)
			for _, s := range []ctlSegment{top, lower} {
				if s.path != "" {
					gone = append(gone, s)
				}
			}
			lower, top, x.lower, x.top = ctlSegment{}, ctlSegment{}, nil, nil
			if g%13 != 0 {
				x.lower = changes(fmt.Sprint("l", g), 1+rng.IntN(80))
				lower = c.file(fmt.Sprint("lower.", g), x.encode(opts).lower, -1, lvLower)
			}
		} else { // a change: a new top over the same lower
			if top.path != "" {
				gone = append(gone, top)
			}
			x.top = changes(fmt.Sprint("t", g), 1+rng.IntN(200))
			top = c.file(fmt.Sprint("top.", g), x.encode(opts).top, -1, lvTop)
		}
		publish(g, b)
		for _, s := range gone { // what the loader does after a publish
			if err := os.Remove(s.path); err != nil {
				t.Fatal(err)
			}
		}
		refresh(g)
		if lowerKept && level(cache.cur.Load(), 1) != was {
			t.Fatalf("%s: the same lower was mapped anew", what)
		}
		check(what)
		for _, s := range gone {
			if n, want := mapsOf(t, s.path), btoi(pinnedFile(s.path)); n != want {
				t.Fatalf("%s: %d mappings of %s, want %d (pinned by a view: %v)", what, n, s.path, want, want == 1)
			}
		}
		if g%5 == 0 { // a view pinned here, held to the end
			cache.SetClock(lvNow)
			h := held{v: pin(t, cache), m: x.model(lower.path != "", top.path != ""),
				a: aloneViews(t, x.encode(opts), lower.path != "", top.path != "")}
			for _, s := range []ctlSegment{lower, top} {
				if s.path != "" {
					h.files = append(h.files, s.path)
				}
			}
			views = append(views, h)
		}
		for i, h := range views {
			viewHolds(t, fmt.Sprintf("%s: view %d", what, i), h.v, h.m, h.a)
		}
	}
	if lower.path == "" {
		t.Fatal("the last generation has no lower: the refused tops below need one")
	}

	// a damaged top (a byte of its INDEX: only its checksums see it) and a
	// top of another base: refused (remembered), the generation kept whole
	// and nothing of the refused one left mapped
	damaged := bytes.Clone(x.encode(opts).top)
	damaged[le.Uint64(damaged[hdrSections+secOffset:])+200] ^= 0x40
	gen := cache.Generation()
	for i, bad := range []struct {
		file  ctlSegment
		class error
	}{{c.file("top.damaged", damaged, -1, lvTop), ErrChecksum}, {c.file("top.other", other.top, -1, lvTop), ErrBase}} {
		kept := top
		top = bad.file
		publish(gen+1+uint64(i), b)
		top = kept
		for try := range 2 {
			if ok, err := cache.Refresh(); ok || !errors.Is(err, bad.class) || cache.Generation() != gen {
				t.Fatalf("%s (try %d): refresh %v %v at generation %d; want %v, generation %d kept", bad.file.path, try, ok, err, cache.Generation(), bad.class, gen)
			}
		}
		if n := mapsOf(t, bad.file.path); n != 0 {
			t.Fatalf("%s: refused, and mapped %d times", bad.file.path, n)
		}
		check("after a refused generation")
	}

	// the views pinned: their overlays stay mapped until released
	for _, h := range views {
		h.v.Release()
	}
	for _, h := range views {
		for _, f := range h.files {
			if n := mapsOf(t, f); n != 0 && f != lower.path && f != top.path {
				t.Fatalf("%s: mapped %d times after the views that pinned it were released", f, n)
			}
		}
	}

	// another base file (the same bytes): every level mapped anew, the old
	// base unmapped
	was := level(cache.cur.Load(), 1)
	b2 := c.file("base.2", im.base, -1, 0)
	gen += 3
	publish(gen, b2)
	refresh(gen)
	cur := cache.cur.Load()
	if level(cur, 0) == base || level(cur, 1) == was {
		t.Fatal("a new base file: a level kept")
	}
	if n := mapsOf(t, b.path); n != 0 {
		t.Fatalf("the old base: mapped %d times after a new base", n)
	}
	base, at, b = level(cur, 0), unsafe.SliceData(level(cur, 0).mem), b2
	check("a new base")
	// its next top keeps it
	x.top = changes("last", 30)
	top = c.file("top.last", x.encode(opts).top, -1, lvTop)
	publish(gen+1, b)
	refresh(gen + 1)
	check("a top over the new base")
	cache.Close()
	for _, s := range []ctlSegment{b, lower, top} {
		if n := mapsOf(t, s.path); n != 0 {
			t.Fatalf("closed: %s mapped %d times", s.path, n)
		}
	}
}
