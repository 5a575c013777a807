package shmkv

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A Go program follows a real loader's changes to a cache (loader/README.md,
// "Writes"; lib/PROTOCOL.md, "Protocol 2"): shmctl cache set, remove and
// apply, each seen by a Cache attached throughout after its refresh, through
// every getter; a delta applied never seen half; rollback; a full load
// replacing base and overlay.

// cacheModel is what the cache "feat" should answer: key -> string value
// ("" absent), with each key's expiry (0: none).
type cacheModel struct {
	val map[string]string
	exp map[string]uint32
}

// newModel: the string keys of served image m (k_I = "M:I"); the other
// keys (gen, vec_I) are checked by their own getters.
func newModel(m int) *cacheModel {
	c := &cacheModel{val: map[string]string{}, exp: map[string]uint32{}}
	for i := 0; i < servedKeys; i++ {
		c.val[fmt.Sprintf("k_%d", i)] = fmt.Sprintf("%d:%d", m, i)
	}
	return c
}

func (c *cacheModel) clone() *cacheModel {
	return &cacheModel{val: maps.Clone(c.val), exp: maps.Clone(c.exp)}
}

func (c *cacheModel) set(k, v string, exp uint32) { c.val[k], c.exp[k] = v, exp }
func (c *cacheModel) remove(k string)             { c.val[k], c.exp[k] = "", 0 }

// live: the keys a get finds at clock now, with their values.
func (c *cacheModel) live(now int64) map[string]string {
	m := map[string]string{}
	for k, v := range c.val {
		if v != "" && (c.exp[k] == 0 || now < int64(c.exp[k])) {
			m[k] = v
		}
	}
	return m
}

// check holds cache to the model at the system clock: each string key
// through Text, then a view of its generation as holds does.
func (c *cacheModel) check(t *testing.T, what string, cache *Cache) {
	t.Helper()
	v, err := cache.Pin()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	live := c.live(time.Now().Unix())
	for _, k := range slices.Sorted(maps.Keys(c.val)) {
		want, ok := live[k]
		if got, err := cache.Text(k); ok && (got != want || err != nil) || !ok && !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: Text(%q): %q %v, want %q (\"\": absent)", what, k, got, err, want)
		}
	}
	c.holds(t, what, v)
}

// holds: v answers as the model at the system clock: each string key
// through Get and GetBatch (expired and removed keys absent), Expires, and
// Entries yielding exactly the live keys (string keys with their values;
// the base's other keys, gen and vec_I, counted).
func (c *cacheModel) holds(t *testing.T, what string, v *View) {
	t.Helper()
	live := c.live(time.Now().Unix())
	keys := slices.Sorted(maps.Keys(c.val))
	vals, errs := make([]Value, len(keys)), make([]error, len(keys))
	v.GetBatch(keys, vals, errs)
	bad := 0
	for i, k := range keys {
		want, ok := live[k]
		val, err := v.Get(k)
		text, _ := val.TextBytes()
		btext, _ := vals[i].TextBytes()
		switch {
		case !ok && (!errors.Is(err, ErrNotFound) || !errors.Is(errs[i], ErrNotFound)):
			t.Errorf("%s: %q: Get %v, GetBatch %v; want absent", what, k, err, errs[i])
			bad++
		case ok && (err != nil || string(text) != want || errs[i] != nil || string(btext) != want):
			t.Errorf("%s: %q: Get %q %v, GetBatch %q %v; want %q", what, k, text, err, btext, errs[i], want)
			bad++
		}
		if c.val[k] != "" {
			if e, err := v.Expires(k); e != c.exp[k] || err != nil {
				t.Errorf("%s: Expires(%q): %d %v, want %d", what, k, e, err, c.exp[k])
				bad++
			}
		}
		if bad > 10 {
			t.Fatalf("%s: more than 10 keys wrong", what)
		}
	}
	seen, others := map[string]string{}, 0
	for e, err := range v.Entries() {
		if err != nil {
			t.Fatalf("%s: Entries: %v", what, err)
		}
		if _, ok := c.val[string(e.Key)]; ok {
			s, _ := e.Value.TextBytes()
			seen[string(e.Key)] = string(s)
		} else {
			others++
		}
	}
	if !maps.Equal(seen, live) {
		t.Errorf("%s: Entries yields %d string keys, want the %d live ones", what, len(seen), len(live))
	}
	if others < 1+servedKeys { // gen and every vec_I; a test may add a few
		t.Errorf("%s: Entries yields %d other keys, want gen and %d vec_I at least", what, others, servedKeys)
	}
}

// shmctlRun runs shmctl -r ROOT args, failing the test on an error.
func (s *served) shmctl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(program(t, "SHMKV_SHMCTL", "shmctl/shmctl"), append([]string{"-r", s.root}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("shmctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// protocolOf: the protocol version of the cache's control segment.
func (s *served) protocolOf(t *testing.T) uint32 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.root, "feat.ctl"))
	if err != nil || len(b) < ctlSize {
		t.Fatalf("feat.ctl: %d bytes, %v", len(b), err)
	}
	return le.Uint32(b[8:])
}

// segmentCount: the segment_count of the cache's control segment (its
// copies: a base, a lower and a top overlay; the loader publishes one copy
// of each without NUMA replicas).
func (s *served) segmentCount(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.root, "feat.ctl"))
	if err != nil || len(b) < ctlSize {
		t.Fatalf("feat.ctl: %d bytes, %v", len(b), err)
	}
	return int(le.Uint32(b[40:]))
}

// refreshed: the refresh after a publish moves the cache to a newer
// generation (the loader answers once it published: no waiting).
func refreshed(t *testing.T, what string, c *Cache) {
	t.Helper()
	before := c.Generation()
	if ok, err := c.Refresh(); !ok || err != nil || c.Generation() <= before {
		t.Fatalf("%s: refresh %v %v, generation %d (was %d)", what, ok, err, c.Generation(), before)
	}
}

func TestLoaderWrites(t *testing.T) {
	s := serve(t)
	s.shmctl(t, "cache", "load", "feat", s.images[0])
	early := s.attach(t)
	defer early.Close()
	if p := s.protocolOf(t); p != 1 {
		t.Fatalf("a cache without changes: protocol %d, want 1", p)
	}
	model := newModel(1)
	model.check(t, "loaded", early)

	// The first change makes the control segment protocol 2 (a new file):
	// the handle attached before says ErrStale and keeps serving its own.
	s.shmctl(t, "cache", "set", "feat", "k_1", "changed")
	if ok, err := early.Refresh(); ok || !errors.Is(err, ErrStale) {
		t.Fatalf("refresh of a protocol 1 handle after the first change: %v %v", ok, err)
	}
	model.check(t, "the stale handle", early)
	if p := s.protocolOf(t); p != 2 {
		t.Fatalf("after the first change: protocol %d, want 2", p)
	}
	c := s.attach(t) // attached from here to the end
	defer c.Close()
	base := level(c.cur.Load(), 0) // kept by every refresh until the full load (keep.go)
	model.set("k_1", "changed", 0)
	model.check(t, "set k_1", c)
	first, err := c.Pin() // one generation, pinned through every change below
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release()
	firstModel := model.clone()

	s.shmctl(t, "cache", "remove", "feat", "k_2")
	model.check(t, "before the refresh", c) // until refresh: the generation it has
	refreshed(t, "remove k_2", c)
	model.remove("k_2")
	model.check(t, "remove k_2", c)
	if _, err := c.Text("k_2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a removed key: %v", err)
	}

	// typed sets
	s.shmctl(t, "cache", "set", "feat", "count", "42", "--type", "i64")
	refreshed(t, "set count", c)
	s.shmctl(t, "cache", "set", "feat", "vec_3", "[7, 8]", "--type", "f32list")
	refreshed(t, "set vec_3", c)
	if n, err := c.Int64("count"); n != 42 || err != nil {
		t.Fatalf("count: %d %v", n, err)
	}
	if l, err := c.Float32s("vec_3"); !slices.Equal(l, []float32{7, 8}) || err != nil {
		t.Fatalf("vec_3: %v %v", l, err)
	}
	if l, err := c.Float32s("vec_4"); !slices.Equal(l, []float32{1, 4}) || err != nil {
		t.Fatalf("vec_4, the base's: %v %v", l, err)
	}
	if n, err := c.Int64("gen"); n != 1 || err != nil {
		t.Fatalf("gen, the base's: %d %v", n, err)
	}

	// expiry on both sides: an upsert long expired hides the base's live
	// record; one expiring far ahead is found until a pinned clock passes it
	s.shmctl(t, "cache", "set", "feat", "k_4", "gone by now", "--expires", "1000")
	refreshed(t, "set an expired k_4", c)
	model.set("k_4", "gone by now", 1000)
	const far = 4_000_000_000
	s.shmctl(t, "cache", "set", "feat", "k_6", "later", "--expires", fmt.Sprint(far))
	refreshed(t, "set k_6 expiring later", c)
	model.set("k_6", "later", far)
	model.check(t, "expiry", c)
	c.SetClock(far)
	if _, err := c.Text("k_6"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("k_6 at its expiry: %v", err)
	}
	if got, err := c.Text("k_7"); got != "1:7" || err != nil {
		t.Fatalf("k_7 at the pinned clock: %q %v", got, err)
	}
	c.SetClock(0)
	beforeApply := model.clone()

	// a delta of 50 upserts and a removal, applied while another handle
	// refreshes and checks that no generation it maps has some of them only
	var b strings.Builder
	for i := 100; i < 150; i++ {
		fmt.Fprintf(&b, "{\"key\": \"k_%d\", \"value\": \"d:%d\"}\n", i, i)
		model.set(fmt.Sprintf("k_%d", i), fmt.Sprintf("d:%d", i), 0)
	}
	b.WriteString("{\"key\": \"k_5\", \"remove\": true}\n")
	model.remove("k_5")
	src, delta := filepath.Join(s.dir, "d.jsonl"), filepath.Join(s.dir, "d.delta")
	if err := os.WriteFile(src, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s.shmctl(t, "image", "build", "--delta-of", s.images[0], "-o", delta, src)
	watcher := s.attach(t)
	defer watcher.Close()
	var mixed, seenNew atomic.Int64
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := watcher.Refresh(); err != nil && !errors.Is(err, ErrAgain) {
				done <- err
				return
			}
			v, err := watcher.Pin()
			if err != nil {
				done <- err
				return
			}
			news := 0
			for i := 100; i < 150; i++ {
				if val, err := v.Get(fmt.Sprintf("k_%d", i)); err == nil && string(val.Raw()) == fmt.Sprintf("d:%d", i) {
					news++
				}
			}
			_, gone := v.Get("k_5")
			v.Release()
			if news != 0 && news != 50 || news == 50 && !errors.Is(gone, ErrNotFound) || news == 0 && gone != nil {
				mixed.Add(1)
			}
			if news == 50 {
				seenNew.Add(1)
			}
		}
	}()
	s.shmctl(t, "cache", "apply", "feat", delta)
	waitFor(t, "the watching handle to see the delta", 60*time.Second, func() bool { return seenNew.Load() > 0 || len(done) > 0 })
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("the watching handle: %v", err)
	}
	if mixed.Load() != 0 {
		t.Fatalf("%d generations seen with part of the delta", mixed.Load())
	}
	watcher.Close()
	refreshed(t, "apply", c)
	model.check(t, "apply", c) // the earlier changes merged with the delta's
	if level(c.cur.Load(), 0) != base {
		t.Fatal("a refresh to a change mapped the base anew")
	}
	if n, err := c.Int64("count"); n != 42 || err != nil {
		t.Fatalf("count after the apply: %d %v", n, err)
	}

	firstModel.holds(t, "a view pinned before every change", first)

	// the generation's segments mapped (base, lower, and the top where the
	// loader published one), nothing else once the other handles are gone
	early.Close()
	first.Release()
	if n, want := segmentsMapped(t, s.shm), s.segmentCount(t); n != want || want < 2 {
		t.Fatalf("one handle on a generation with overlays: %d segments mapped, the generation has %d (base, lower, top)", n, want)
	}

	// rollback: the previous answers
	s.shmctl(t, "cache", "rollback", "feat")
	refreshed(t, "rollback", c)
	beforeApply.check(t, "rollback", c)

	// a full load replaces base and overlay; the file stays protocol 2
	s.shmctl(t, "cache", "load", "feat", s.images[1])
	refreshed(t, "load", c)
	if p := s.protocolOf(t); p != 2 {
		t.Fatalf("after a full load: protocol %d, want 2", p)
	}
	newModel(2).check(t, "load", c)
	if level(c.cur.Load(), 0) == base {
		t.Fatal("a full load's base is the old one's mapping")
	}
	if _, err := c.Int64("count"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("count, a change to the base before, after the load: %v", err)
	}
	if n := segmentsMapped(t, s.shm); n != 1 {
		t.Fatalf("after the load: %d segments mapped, want 1 (the base alone)", n)
	}
	s.shmctl(t, "cache", "set", "feat", "k_9", "on the new base")
	refreshed(t, "a change on the new base", c)
	m2 := newModel(2)
	m2.set("k_9", "on the new base", 0)
	m2.check(t, "a change on the new base", c)
}
