package shmkv

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
)

// A base read through two deltas of it, a lower and a top (FORMAT.md
// §19.6; PROTOCOL.md, "Protocol 2"), against a model on every read path
// (Get, GetBytes, GetBatch, every copying getter, Expires, Entries and
// Records with their order, Len, Verify): keys in every combination of the
// three levels, of every record kind (upserts inline and OUT, tombstones
// inline and OUT, expiring or not, a type changed per level), offline
// (Image.WithDeltas) and attached to hand-made protocol 2 control segments
// (each rule of the protocol broken once, the copy of each overlay picked
// per node, refresh across the levels), and a randomized model of the
// three levels.

const lvNow = 1_800_000_000

func lvStr(key, v string, expires uint32, out bool) rec2 {
	return rec2{key: key, typ: TypeString, value: []byte(v), expires: expires, out: out}
}

func lvI64(key string, x int64, expires uint32) rec2 {
	return rec2{key: key, typ: TypeInt64, value: le.AppendUint64(nil, uint64(x)), expires: expires}
}

func lvTomb(key string, out bool) rec2 { return rec2{key: key, tomb: true, out: out} }

// levels: the records of a base, of a lower delta of it and of a top one.
type levels struct{ base, lower, top []rec2 }

// handLevels: keys named for the case they are (tests/overlay_test's).
func handLevels() levels {
	var l levels
	const past, later = lvNow - 10, lvNow + 1000
	long := func(k string) string { return strings.Repeat("L", 200) + k } // too long for a bucket: OUT
	for i := range 60 {                                                   // filler: many buckets, displaced keys
		l.base = append(l.base, lvStr(fmt.Sprint("fill", i), fmt.Sprint("base-fill", i), 0, i%9 == 0))
	}
	for i := range 12 {
		l.lower = append(l.lower, lvStr(fmt.Sprint("lfill", i), fmt.Sprint("lower-fill", i), 0, false))
	}
	for i := range 5 {
		l.top = append(l.top, lvStr(fmt.Sprint("tfill", i), fmt.Sprint("top-fill", i), 0, false))
	}
	b := func(r rec2) { l.base = append(l.base, r) }
	lo := func(r rec2) { l.lower = append(l.lower, r) }
	tp := func(r rec2) { l.top = append(l.top, r) }
	b(lvStr("base-only", "b", 0, false))
	b(lvStr("lower-up", "b", 0, false))
	lo(lvStr("lower-up", "l", 0, false))
	b(lvStr("lower-tomb", "b", 0, false))
	lo(lvTomb("lower-tomb", false))
	b(lvStr("top-up-over-lower-tomb", "b", 0, false))
	lo(lvTomb("top-up-over-lower-tomb", false))
	tp(lvStr("top-up-over-lower-tomb", "t", 0, false))
	b(lvStr("top-tomb-over-lower-up", "b", 0, false))
	lo(lvStr("top-tomb-over-lower-up", "l", 0, false))
	tp(lvTomb("top-tomb-over-lower-up", false))
	b(lvStr("top-up-over-both", "b", 0, false))
	lo(lvStr("top-up-over-both", "l", 0, false))
	tp(lvStr("top-up-over-both", "t", 0, true))
	tp(lvStr("top-only", "t", 0, false))
	lo(lvStr("lower-only", "l", 0, false))
	b(lvStr("top-tomb-over-base", "b", 0, false))
	tp(lvTomb("top-tomb-over-base", false))
	tp(lvTomb("top-tomb-of-nothing", false))
	lo(lvTomb("lower-tomb-of-nothing", false))
	// OUT records and OUT tombstones at each level
	b(lvStr(long("a"), "b", 0, true))
	lo(lvTomb(long("a"), true))
	tp(lvStr(long("a"), "t", 0, true))
	b(lvStr(long("b"), "b", 0, true))
	lo(lvStr(long("b"), "l", 0, true))
	tp(lvTomb(long("b"), true))
	// a type changed per level: the getters see the deciding record's type
	b(lvStr("typed", "b", 0, false))
	lo(lvI64("typed", -2, 0))
	tp(lvStr("typed", "t", 0, false))
	b(lvI64("typed2", 1, 0))
	tp(lvI64("typed2", 3, 0))
	// expiry, deciding at each level
	b(lvStr("exp-base-past", "b", past, false))
	b(lvStr("exp-base-later", "b", later, false))
	b(lvStr("exp-lower-past", "b", 0, false))
	lo(lvStr("exp-lower-past", "l", past, false)) // hides the base's live record
	b(lvStr("exp-lower-later", "b", 0, false))
	lo(lvStr("exp-lower-later", "l", later, true))
	b(lvStr("lower-revives-base", "b", past, false))
	lo(lvStr("lower-revives-base", "l", 0, false))
	lo(lvStr("exp-top-past", "l", 0, false))
	tp(lvStr("exp-top-past", "t", past, false)) // hides the lower's live upsert
	lo(lvStr("top-revives-lower", "l", past, false))
	tp(lvStr("top-revives-lower", "t", later, false))
	b(lvStr("top-later-over-base", "b", past, false))
	tp(lvStr("top-later-over-base", "t", later, true))
	return l
}

// model: the merge of the base, then the lower (if lower), then the top
// (if top) (FORMAT.md §19.5); expired upserts stay, hiding what is below.
func (l levels) model(lower, top bool) map[string]rec2 {
	m := map[string]rec2{}
	for _, r := range l.base {
		m[r.key] = r
	}
	for _, d := range [][]rec2{l.lower, l.top}[:btoi(lower)+btoi(lower && top)] {
		for _, r := range d {
			if r.tomb {
				delete(m, r.key)
			} else {
				m[r.key] = r
			}
		}
	}
	return m
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// keys: every key of the levels, and keys no level holds.
func (l levels) keys() []string {
	var ks []string
	for _, d := range [][]rec2{l.base, l.lower, l.top} {
		for _, r := range d {
			ks = append(ks, r.key)
		}
	}
	return append(ks, "absent", "", "fill", "top-onl")
}

// fold: the lower a loader publishes when it folds top into lower: one
// delta of the merged changes (a top's tombstone stays a tombstone).
func fold(lower, top []rec2) []rec2 {
	m := map[string]rec2{}
	for _, r := range append(append([]rec2{}, lower...), top...) {
		m[r.key] = r
	}
	return slices.Collect(maps.Values(m))
}

// lvImages: the levels encoded: the base (o), and each delta of it.
type lvImages struct{ base, lower, top []byte }

func (l levels) encode(o enc2Opts) lvImages {
	base := encodeV2(l.base, o)
	delta := func(recs []rec2, name string) []byte {
		do := deltaOf(base)
		do.buckets, do.name = uint64(len(recs)/2+4), name
		return encodeV2(recs, do)
	}
	return lvImages{base, delta(l.lower, "lower"), delta(l.top, "top")}
}

// source is what an Image and a Cache offer: the copying getters, Pin,
// SetClock.
type lvSource interface {
	copyingGetters
	Pin() (*View, error)
	SetClock(int64)
}

// alone: the images of a view read alone (nil: a level the view lacks),
// the orders of its iterations come from.
type lvAlone struct{ base, lower, top *View }

func aloneViews(t *testing.T, im lvImages, lower, top bool) lvAlone {
	a := lvAlone{base: pin(t, openImage(t, im.base, Deep))}
	if lower {
		a.lower = pin(t, openImage(t, im.lower, Deep))
	}
	if top {
		a.top = pin(t, openImage(t, im.top, Deep))
	}
	return a
}

// wantOrder: what FORMAT.md §19.6's iteration yields, from the images
// read alone: the top's upserts, the lower's whose key the top does not
// hold, the base's whose key neither holds; live only: the expired left out.
func wantOrder(t *testing.T, a lvAlone, all bool, now int64) []Entry {
	t.Helper()
	var out []Entry
	held := map[string]bool{}
	for _, v := range []*View{a.top, a.lower, a.base} {
		if v == nil {
			continue
		}
		for e, err := range v.Records() {
			if err != nil {
				t.Fatal(err)
			}
			k := string(e.Key)
			if held[k] {
				continue
			}
			held[k] = true
			if e.Value.Type() == TypeTombstone || !all && isExpired(e.Expires, now) {
				continue
			}
			out = append(out, e)
		}
	}
	return out
}

// checkLevels: src (pinned at clock now) answers every key of l as the
// model m says on every read path; its iterations yield wantOrder's
// entries in that order; Len is the model's record count; Verify passes.
func checkLevels(t *testing.T, src lvSource, l levels, m map[string]rec2, a lvAlone, now int64) {
	t.Helper()
	src.SetClock(now)
	v, err := src.Pin()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	keys := l.keys()
	vals, errs := make([]Value, len(keys)), make([]error, len(keys))
	v.GetBatch(keys, vals, errs)
	for i, k := range keys {
		r, ok := m[k]
		got, err := v.Get(k)
		gotb, errb := v.GetBytes([]byte(k))
		for _, g := range []struct {
			how string
			v   Value
			err error
		}{{"Get", got, err}, {"GetBytes", gotb, errb}, {"GetBatch", vals[i], errs[i]}} {
			if !ok || !live(r, now) {
				if !errors.Is(g.err, ErrNotFound) {
					t.Fatalf("now %d, %s(%.24q): %s %q %v; want ErrNotFound", now, g.how, k, g.v.Type(), g.v.Raw(), g.err)
				}
			} else if g.err != nil || g.v.Type() != r.typ || !bytes.Equal(g.v.Raw(), r.value) {
				t.Fatalf("now %d, %s(%.24q): %s %q %v; want %s %q", now, g.how, k, g.v.Type(), g.v.Raw(), g.err, r.typ, r.value)
			}
		}
		if !ok || !live(r, now) {
			checkGetters(t, src, k, "SHMKV_ENOTFOUND", 0)
		} else {
			checkGetters(t, src, k, "OK", r.typ)
		}
		e, err := v.Expires(k)
		if !ok && !errors.Is(err, ErrNotFound) || ok && (err != nil || e != r.expires) {
			t.Fatalf("now %d, Expires(%.24q): %d %v; want %d (held %v)", now, k, e, err, r.expires, ok)
		}
	}
	for _, it := range []struct {
		name string
		seq  func(func(Entry, error) bool)
		all  bool
	}{{"Entries", v.Entries(), false}, {"Records", v.Records(), true}} {
		want := wantOrder(t, a, it.all, now)
		i := 0
		for e, err := range it.seq {
			if err != nil {
				t.Fatalf("%s: %v", it.name, err)
			}
			if i >= len(want) {
				t.Fatalf("now %d, %s yields more than %d: %.24q", now, it.name, len(want), e.Key)
			}
			w := want[i]
			if !bytes.Equal(e.Key, w.Key) || e.Expires != w.Expires || e.Value.Type() != w.Value.Type() || !bytes.Equal(e.Value.Raw(), w.Value.Raw()) {
				t.Fatalf("now %d, %s %d: %.24q %s expires %d; want %.24q %s expires %d", now, it.name, i, e.Key, e.Value.Type(), e.Expires, w.Key, w.Value.Type(), w.Expires)
			}
			r := m[string(e.Key)]
			if e.Value.Type() != r.typ || !bytes.Equal(e.Value.Raw(), r.value) || e.Expires != r.expires {
				t.Fatalf("now %d, %s: %.24q is not the model's record", now, it.name, e.Key)
			}
			i++
		}
		n := 0
		for _, r := range m {
			if it.all || live(r, now) {
				n++
			}
		}
		if i != len(want) || i != n {
			t.Fatalf("now %d, %s yields %d, want %d (the model: %d)", now, it.name, i, len(want), n)
		}
	}
	if v.Len() != len(m) {
		t.Fatalf("Len %d, the model holds %d records", v.Len(), len(m))
	}
	if err := v.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

// TestLevelsOffline: a base read through a lower and a top delta
// (Image.WithDeltas) at clocks before, at and after the expiries, with
// hash_bits 64 and 6 (long probes, colliding tags); the lower alone; the
// base alone.
func TestLevelsOffline(t *testing.T) {
	l := handLevels()
	for _, bits := range []uint32{0, 6} {
		t.Run(fmt.Sprint("hash_bits ", bits), func(t *testing.T) {
			im := l.encode(enc2Opts{buckets: 64, hashBits: bits, name: "base"})
			base, lower, top := openImage(t, im.base, Deep), openImage(t, im.lower, Deep), openImage(t, im.top, Deep)
			both, err := base.WithDeltas(lower, top)
			if err != nil {
				t.Fatal(err)
			}
			defer both.Close()
			if both.IsDelta() || both.Checksum() != base.Checksum() || both.Name() != base.Name() {
				t.Fatalf("through: IsDelta %v, Checksum %#x, Name %q", both.IsDelta(), both.Checksum(), both.Name())
			}
			a := aloneViews(t, im, true, true)
			for _, now := range []int64{lvNow, lvNow - 100, lvNow - 10, lvNow + 999, lvNow + 1000, lvNow + 2000} {
				checkLevels(t, both, l, l.model(true, true), a, now)
			}
			one, err := base.WithDeltas(lower, nil) // top nil: the lower alone, as WithDelta
			if err != nil {
				t.Fatal(err)
			}
			defer one.Close()
			checkLevels(t, one, l, l.model(true, false), aloneViews(t, im, true, false), lvNow)
			checkLevels(t, base, l, l.model(false, false), aloneViews(t, im, false, false), lvNow)
		})
	}
}

// TestLevelsExpiryClock: the clock through two deltas is read at most
// once per get and batch, once per live iteration where any level has the
// EXPIRY flag (the top alone included), never where none has it.
func TestLevelsExpiryClock(t *testing.T) {
	l := levels{
		base:  []rec2{lvStr("a", "b", 0, false), lvStr("b", "b", 0, false)},
		lower: []rec2{lvStr("b", "l", 0, false), lvStr("c", "l", 0, false)},
		top:   []rec2{lvStr("a", "t", lvNow, false), lvStr("c", "t", 0, false)},
	}
	im := l.encode(enc2Opts{buckets: 2})
	both, err := openImage(t, im.base, 0).WithDeltas(openImage(t, im.lower, 0), openImage(t, im.top, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer both.Close()
	for _, now := range []int64{lvNow - 1, lvNow} {
		reads := withClock(t, now)
		v := pin(t, both)
		for _, k := range []string{"a", "b", "c", "d"} {
			*reads = 0
			_, _ = v.Get(k)
			if *reads > 1 {
				t.Fatalf("Get(%s): %d clock reads", k, *reads)
			}
		}
		*reads = 0
		v.GetBatch([]string{"a", "b", "c", "d"}, make([]Value, 4), make([]error, 4))
		var got []string
		for e, err := range v.Entries() {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(e.Key))
		}
		if *reads != 2 {
			t.Fatalf("a batch and an iteration: %d clock reads", *reads)
		}
		slices.Sort(got)
		want := []string{"a", "b", "c"}
		if now >= lvNow { // the top's expired upsert hides the base's "a"
			want = []string{"b", "c"}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("now %d: Entries %q, want %q (only the top has the EXPIRY flag)", now, got, want)
		}
	}
	// no level with EXPIRY: no clock read
	l.top[0].expires = 0
	im = l.encode(enc2Opts{buckets: 2})
	plain, err := openImage(t, im.base, 0).WithDeltas(openImage(t, im.lower, 0), openImage(t, im.top, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	reads := withClock(t, lvNow)
	v := pin(t, plain)
	for _, k := range []string{"a", "b", "c", "d"} {
		_, _ = v.Get(k)
		_, _ = v.Expires(k)
	}
	v.GetBatch([]string{"a", "b"}, make([]Value, 2), make([]error, 2))
	for range v.Entries() {
	}
	if *reads != 0 {
		t.Fatalf("%d clock reads without the EXPIRY flag", *reads)
	}
}

// TestWithDeltasRefuses: each delta must apply to the base itself
// (§19.4), the message naming the level; a top without a lower is not a
// form; nothing is left pinned by a refusal.
func TestWithDeltasRefuses(t *testing.T) {
	l := handLevels()
	im := l.encode(enc2Opts{buckets: 64})
	o := l
	o.base = append(slices.Clone(l.base), lvStr("other", "o", 0, false))
	other := o.encode(enc2Opts{buckets: 64})
	base, lower, top := openImage(t, im.base, 0), openImage(t, im.lower, 0), openImage(t, im.top, 0)
	obase, otop := openImage(t, other.base, 0), openImage(t, other.top, 0)
	chained := deltaOf(im.base)
	chained.buckets, chained.delta.id.Prev, chained.delta.id.Seq = 8, 0x1234, 2
	ctop := openImage(t, encodeV2(l.top, chained), 0)
	through, err := base.WithDeltas(lower, top)
	if err != nil {
		t.Fatal(err)
	}
	defer through.Close()
	for _, c := range []struct {
		name             string
		base, lower, top *Image
		class            string
		says             string
	}{
		{"a top without a lower", base, nil, top, "EINVAL", "without a lower delta"},
		{"a top of another base", base, lower, otop, "SHMKV_EBASE", "top delta: the delta (seq 1"},
		{"a lower of another base", base, otop, top, "SHMKV_EBASE", "lower delta: the delta (seq 1"},
		{"a top that is no delta", base, lower, obase, "SHMKV_EBASE", "top delta: the image given as the delta"},
		{"a top that is a base through deltas", base, lower, through, "SHMKV_EBASE", "top delta: the image given as the delta"},
		{"a top of a chain", base, lower, ctop, "SHMKV_EBASE", "top delta: the delta (seq 2"},
		{"a delta as the base", top, lower, top, "SHMKV_EBASE", "lower delta: the image (checksum"},
		{"a base through deltas already", through, lower, top, "SHMKV_EBASE", "already"},
	} {
		got, err := c.base.WithDeltas(c.lower, c.top)
		if got != nil || Class(err) != c.class || !strings.Contains(fmt.Sprint(err), c.says) {
			t.Errorf("%s: %v, %v (%s); want %s saying %q", c.name, got, err, Class(err), c.class, c.says)
		}
	}
	if _, err := base.WithDeltas(nil, top); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("a top without a lower: %v, not fs.ErrInvalid", err)
	}
	for _, img := range []*Image{base, lower, top, otop, obase} { // the owner's and through's, where through holds it
		want := int64(1)
		if img == base || img == lower || img == top {
			want = 2
		}
		if r := img.cur.Load().refs.Load(); r != want {
			t.Errorf("%s: %d references after the refusals, want %d", img.Name(), r, want)
		}
	}
	closed := openImage(t, im.top, 0)
	closed.Close()
	if _, err := base.WithDeltas(lower, closed); !errors.Is(err, ErrClosed) {
		t.Errorf("a closed top: %v", err)
	}
	if r := lower.cur.Load().refs.Load(); r != 2 {
		t.Errorf("the lower after a closed top: %d references", r)
	}
}

// TestLevelsOutliveImages: the Image WithDeltas returns holds the three
// mappings: the images closed, it reads on; its last view released, all
// three are released.
func TestLevelsOutliveImages(t *testing.T) {
	l := handLevels()
	im := l.encode(enc2Opts{buckets: 64})
	base, lower, top := openImage(t, im.base, 0), openImage(t, im.lower, 0), openImage(t, im.top, 0)
	ms := []*mapping{base.cur.Load(), lower.cur.Load(), top.cur.Load()}
	both, err := base.WithDeltas(lower, top)
	if err != nil {
		t.Fatal(err)
	}
	base.Close()
	lower.Close()
	top.Close()
	v, err := both.Pin()
	if err != nil {
		t.Fatal(err)
	}
	both.Close()
	for k, want := range map[string]string{"top-only": "t", "lower-only": "l", "base-only": "b"} {
		if got, err := v.Get(k); err != nil || string(got.Raw()) != want {
			t.Fatalf("%s after Close: %q %v", k, got.Raw(), err)
		}
	}
	v.Release()
	for i, m := range ms {
		if r := m.refs.Load(); r != 0 {
			t.Fatalf("level %d: %d references after the last view", i, r)
		}
	}
}

// viewHolds: a view pinned at clock lvNow still answers its generation's
// model m (Get, the order of Records), whatever refreshes and unlinks came
// since.
func viewHolds(t *testing.T, what string, v *View, m map[string]rec2, a lvAlone) {
	t.Helper()
	for k, r := range m {
		got, err := v.Get(k)
		if live(r, lvNow) && (err != nil || !bytes.Equal(got.Raw(), r.value)) || !live(r, lvNow) && !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s (generation %d), %.24q: %q %v; want %q", what, v.Generation(), k, got.Raw(), err, r.value)
		}
	}
	n := 0
	want := wantOrder(t, a, true, lvNow)
	for e, err := range v.Records() {
		if err != nil || n >= len(want) || !bytes.Equal(e.Key, want[n].Key) {
			t.Fatalf("%s (generation %d), record %d: %.24q %v", what, v.Generation(), n, e.Key, err)
		}
		n++
	}
	if n != len(want) {
		t.Fatalf("%s (generation %d): %d records, want %d", what, v.Generation(), n, len(want))
	}
}

// levelsOracle: key's answer through deltas (the first read first) over
// base b by the general lookups alone (getSlow).
func levelsOracle(b *image, key string, deltas ...*image) (Value, error) {
	if len(key) > maxKeyLen {
		return Value{}, errKeyLen
	}
	k := []byte(key)
	h := b.hash(k)
	now := int64(0)
	for _, d := range deltas {
		if d != nil && d.mayHold(h) {
			if v, err := d.getSlow(k, h, &now); err != ErrNotFound {
				return v, err
			}
		}
	}
	return b.getSlow(k, h, &now)
}

// randomLevels: keys k0..kN, each in any subset of the three levels, of
// any record kind (tombstones in the deltas; strings inline or OUT, i64s;
// expired, expiring later or not).
func randomLevels(rng *rand.Rand) levels {
	var l levels
	rec := func(k, tag string, delta bool) rec2 {
		if delta && rng.IntN(4) == 0 {
			return lvTomb(k, rng.IntN(3) == 0)
		}
		x := uint32(0)
		switch rng.IntN(6) {
		case 0:
			x = lvNow - 1 - rng.Uint32N(100)
		case 1:
			x = lvNow + 1 + rng.Uint32N(100)
		}
		if rng.IntN(5) == 0 {
			return lvI64(k, rng.Int64(), x)
		}
		return lvStr(k, tag+strings.Repeat("x", rng.IntN(40)), x, rng.IntN(4) == 0)
	}
	for i := range 20 + rng.IntN(200) {
		k := fmt.Sprint("k", i)
		in := rng.IntN(8) // bit 0 base, 1 lower, 2 top
		if in&1 != 0 {
			l.base = append(l.base, rec(k, "b", false))
		}
		if in&2 != 0 {
			l.lower = append(l.lower, rec(k, "l", true))
		}
		if in&4 != 0 {
			l.top = append(l.top, rec(k, "t", true))
		}
	}
	return l
}

// TestLevelsRandomized: random levels over a shared key space, every read
// path against the model, offline (WithDeltas) and attached (a protocol 2
// generation of the three, the entries in a random order), at clocks
// around the expiries; every get and batch as the general lookups answer.
func TestLevelsRandomized(t *testing.T) {
	rng := rand.New(rand.NewPCG(0x70b, 2))
	c := newCtlVersion(t, 2, 0, 0, nil)
	for round := range 40 {
		l := randomLevels(rng)
		im := l.encode(enc2Opts{buckets: uint64(len(l.base)/2 + 8), seed: rng.Uint64(), name: "base"})
		both, err := openImage(t, im.base, 0).WithDeltas(openImage(t, im.lower, 0), openImage(t, im.top, 0))
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		a := aloneViews(t, im, true, true)
		m := l.model(true, true)
		for _, now := range []int64{lvNow, lvNow - 50, lvNow + 50} {
			checkLevels(t, both, l, m, a, now)
		}
		withClock(t, lvNow)
		both.SetClock(0) // the system clock (withClock's), as the general lookups read it
		v := pin(t, both)
		keys := append(l.keys(), strings.Repeat("x", maxKeyLen+1)) // a key too long, among keys the filters let through
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		vals, errs := make([]Value, len(keys)), make([]error, len(keys))
		v.GetBatch(keys, vals, errs)
		for i, k := range keys {
			w, werr := levelsOracle(v.im, k, v.top, v.dm)
			got, err := v.Get(k)
			if Class(err) != Class(werr) || Class(errs[i]) != Class(werr) || !bytes.Equal(got.Raw(), w.Raw()) || !bytes.Equal(vals[i].Raw(), w.Raw()) {
				t.Fatalf("round %d, %q: Get %q %v, GetBatch %q %v; the general lookups %q %v", round, k, got.Raw(), err, vals[i].Raw(), errs[i], w.Raw(), werr)
			}
		}
		both.Close()

		segs := []ctlSegment{
			c.file(fmt.Sprint("base.", round), im.base, -1, 0),
			c.file(fmt.Sprint("lower.", round), im.lower, -1, ctlSegOverlay),
			c.file(fmt.Sprint("top.", round), im.top, -1, ctlSegOverlay|ctlSegTop),
		}
		rng.Shuffle(len(segs), func(i, j int) { segs[i], segs[j] = segs[j], segs[i] })
		c.publish(uint64(2*round+2), uint64(round+1), segs)
		cache, err := AttachWith("c", AttachOptions{Root: c.dir, Verify: round%2 == 0})
		if err != nil {
			t.Fatalf("round %d: attach: %v", round, err)
		}
		checkLevels(t, cache, l, m, a, lvNow)
		cache.Close()
		if t.Failed() {
			t.Fatalf("round %d", round)
		}
	}
}

// TestLevelsDamagedTop: through a lower and a damaged top (bytes of its
// INDEX, FILTER or ENTRIES changed, checksums recomputed), Get and
// GetBatch answer as the general lookups do, value and error, and no read
// panics.
func TestLevelsDamagedTop(t *testing.T) {
	withClock(t, lvNow)
	l := handLevels()
	im := l.encode(enc2Opts{buckets: 64})
	base, lower := openImage(t, im.base, 0), openImage(t, im.lower, 0)
	keys := l.keys()
	tsec := openV2(t, im.top, 0).im.sec
	rng := rand.New(rand.NewPCG(9, 10))
	for i := range 600 {
		b := bytes.Clone(im.top)
		s := tsec[[]int{0, 0, 1, 3}[i%4]]
		for j := 0; j <= i%3; j++ {
			b[s.off+rng.Uint64N(s.size)] = byte(rng.Uint32())
		}
		fixSums(b)
		top, err := OpenBytes(b, NoVerify)
		if err != nil {
			continue
		}
		both, err := base.WithDeltas(lower, top)
		if err != nil {
			t.Fatalf("WithDeltas: %v", err)
		}
		v, _ := both.Pin()
		vals, errs := make([]Value, len(keys)), make([]error, len(keys))
		v.GetBatch(keys, vals, errs)
		for i, k := range keys {
			w, werr := levelsOracle(v.im, k, v.top, v.dm)
			got, err := v.Get(k)
			if fmt.Sprint(err) != fmt.Sprint(werr) || fmt.Sprint(errs[i]) != fmt.Sprint(werr) || !bytes.Equal(got.Raw(), w.Raw()) || !bytes.Equal(vals[i].Raw(), w.Raw()) {
				t.Fatalf("%q: Get %q %v, GetBatch %q %v; the general lookups %q %v", k, got.Raw(), err, vals[i].Raw(), errs[i], w.Raw(), werr)
			}
			_, _ = v.Expires(k)
		}
		for range v.Records() {
		}
		_ = v.Len()
		_ = v.Verify()
		v.Release()
		both.Close()
		top.Close()
	}
}

// The attached tests: a protocol 2 cache "c" whose control segment the
// test writes (ctl_test.go's fixture).

const lvLower, lvTop = ctlSegOverlay, ctlSegOverlay | ctlSegTop

// TestProtocol2LevelsAttached: a generation of a base, a lower and a top
// copy is read through both, whatever the order of its entries, with
// Verify or not.
func TestProtocol2LevelsAttached(t *testing.T) {
	l := handLevels()
	im := l.encode(enc2Opts{buckets: 64, name: "base"})
	a := aloneViews(t, im, true, true)
	c := newCtlVersion(t, 2, 0, 0, nil)
	b := c.file("base.img", im.base, -1, 0)
	lo := c.file("lower.delta", im.lower, -1, lvLower)
	tp := c.file("top.delta", im.top, -1, lvTop)
	for i, segs := range [][]ctlSegment{{tp, b, lo}, {b, lo, tp}, {lo, tp, b}} {
		for _, verify := range []bool{false, true} {
			c.publish(uint64(2*i+2), uint64(i+1), segs)
			cache, err := AttachWith("c", AttachOptions{Root: c.dir, Verify: verify})
			if err != nil {
				t.Fatal(err)
			}
			for _, now := range []int64{lvNow, lvNow + 2000} {
				checkLevels(t, cache, l, l.model(true, true), a, now)
			}
			if v := pin(t, cache); v.top == nil || v.dm == nil {
				t.Fatal("the view does not hold both overlays")
			}
			cache.Close()
		}
	}
}

// TestProtocol2LevelsRefused: each rule of "Protocol 2" about the levels
// broken once: the generation is refused with its class and message.
func TestProtocol2LevelsRefused(t *testing.T) {
	l := handLevels()
	im := l.encode(enc2Opts{buckets: 64, name: "base"})
	o := l
	o.base = append(slices.Clone(l.base), lvStr("other", "o", 0, false))
	other := o.encode(enc2Opts{buckets: 64, name: "base"})
	damaged := bytes.Clone(im.top) // a byte of the top's INDEX flipped: only its checksum sees it
	damaged[le.Uint64(damaged[hdrSections+secOffset:])+200] ^= 0x40
	c := newCtlVersion(t, 2, 0, 0, nil)
	files := map[string]ctlSegment{
		"base": c.file("base", im.base, -1, 0), "lower": c.file("lower", im.lower, -1, 0),
		"top": c.file("top", im.top, -1, 0), "otop": c.file("otop", other.top, -1, 0),
		"olower": c.file("olower", other.lower, -1, 0), "obase": c.file("obase", other.base, -1, 0),
		"damaged":  c.file("damaged", damaged, -1, 0),
		"top.gone": {node: -1, size: uint64(len(im.top)), mapSize: uint64(len(im.top)), path: c.dir + "/top.gone"},
	}
	type seg struct {
		name  string
		flags uint32
	}
	for i, tc := range []struct {
		what    string
		version uint32
		segs    []seg
		verify  bool
		class   string
		says    string
	}{
		{"TOP without OVERLAY", 2, []seg{{"base", 0}, {"lower", lvLower}, {"top", ctlSegTop}}, false, "SHMKV_EPROTO", "segment 2 (" + files["top"].path + ") has the TOP flag without OVERLAY"},
		{"TOP alone as the base", 2, []seg{{"base", ctlSegTop}}, false, "SHMKV_EPROTO", "has the TOP flag without OVERLAY"},
		{"TOP under protocol 1", 1, []seg{{"base", 0}, {"top", ctlSegTop}}, false, "SHMKV_EPROTO", "has flags 0x4; protocol 1 defines 1 (hugetlb)"},
		{"the overlays under protocol 1", 1, []seg{{"base", 0}, {"lower", lvLower}, {"top", lvTop}}, false, "SHMKV_EPROTO", "has flags 0x2; protocol 1 defines 1 (hugetlb)"},
		{"a top without a lower", 2, []seg{{"base", 0}, {"top", lvTop}}, false, "SHMKV_EPROTO", "1 top overlay copies and no lower overlay copy"},
		{"overlays without a base", 2, []seg{{"lower", lvLower}, {"top", lvTop}}, false, "SHMKV_EPROTO", "2 overlay copies and no base copy"},
		{"a top without a base", 2, []seg{{"top", lvTop}}, false, "SHMKV_EPROTO", "1 overlay copies and no base copy"},
		{"a top of another base", 2, []seg{{"base", 0}, {"lower", lvLower}, {"otop", lvTop}}, false, "SHMKV_EBASE", "top overlay " + files["otop"].path + ": the delta (seq 1"},
		{"a lower of another base", 2, []seg{{"base", 0}, {"olower", lvLower}, {"top", lvTop}}, false, "SHMKV_EBASE", "overlay " + files["olower"].path + ": the delta (seq 1"},
		{"a top that is no delta", 2, []seg{{"base", 0}, {"lower", lvLower}, {"obase", lvTop}}, false, "SHMKV_EPROTO", "a plain image where the control segment names a top overlay copy"},
		{"a damaged top, verified", 2, []seg{{"base", 0}, {"lower", lvLower}, {"damaged", lvTop}}, true, "SHMKV_ECHECKSUM", files["damaged"].path},
		{"a missing top", 2, []seg{{"base", 0}, {"lower", lvLower}, {"top.gone", lvTop}}, false, "ENOENT", "top.gone"},
		{"an unknown flag", 2, []seg{{"base", 0}, {"lower", lvLower | 8}}, false, "SHMKV_EPROTO", "has flags 0xa; protocol 2 defines 1 (hugetlb), 2 (overlay) and 4 (top, with overlay)"},
	} {
		le.PutUint32(c.mem[8:], tc.version)
		le.PutUint64(c.mem[16:], ctlLayoutHashOf(tc.version))
		var segs []ctlSegment
		for _, s := range tc.segs {
			f := files[s.name]
			f.flags = s.flags
			segs = append(segs, f)
		}
		c.publish(uint64(2*i+2), uint64(i+1), segs)
		cache, err := AttachWith("c", AttachOptions{Root: c.dir, Verify: tc.verify})
		if err == nil {
			cache.Close()
			t.Errorf("%s: attached", tc.what)
			continue
		}
		if Class(err) != tc.class || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v (%s); want %s saying %q", tc.what, err, Class(err), tc.class, tc.says)
		}
	}
	// the damaged top attaches unverified: its checksums are what Verify adds
	le.PutUint32(c.mem[8:], 2)
	le.PutUint64(c.mem[16:], ctlLayoutHash2)
	b, lo, d := files["base"], files["lower"], files["damaged"]
	lo.flags, d.flags = lvLower, lvTop
	c.publish(100, 100, []ctlSegment{b, lo, d})
	cache, err := attachCtl(c, nil)
	if err != nil {
		t.Fatalf("a damaged top, unverified: %v", err)
	}
	defer cache.Close()
	if err := pin(t, cache).Verify(); !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "the top delta: ") {
		t.Errorf("Verify of a generation with a damaged top: %v", err)
	}
}

// TestProtocol2LevelsPicks: each overlay's copy is the one on the base
// copy's node, else its first; a base copy that will not map: the first
// base copy, and the overlays' copies of its node.
func TestProtocol2LevelsPicks(t *testing.T) {
	l := handLevels()
	im := l.encode(enc2Opts{buckets: 64, name: "base"})
	delta := func(recs []rec2, which string) []byte { // copies told apart by one key (real copies are equal)
		do := deltaOf(im.base)
		do.buckets = uint64(len(recs)/2 + 4)
		return encodeV2(append(slices.Clone(recs), lvStr("copy", which, 0, false)), do)
	}
	c := newCtlVersion(t, 2, 0, 0, nil)
	b0, b1 := c.file("b0", im.base, 0, 0), c.file("b1", im.base, 1, 0)
	l0, l1 := c.file("l0", delta(l.lower, "l0"), 0, lvLower), c.file("l1", delta(l.lower, "l1"), 1, lvLower)
	t0, t1 := c.file("t0", delta(l.top, "t0"), 0, lvTop), c.file("t1", delta(l.top, "t1"), 1, lvTop)
	// lcopy: the lower's "copy" key, under the top's
	lcopy := func(cache *Cache) string {
		v := pin(t, cache)
		_, _, err := v.dm.locate([]byte("copy"), v.im.hash([]byte("copy")))
		if err != nil {
			return "none"
		}
		val, err := levelsOracle(v.im, "copy", v.dm)
		if err != nil {
			return err.Error()
		}
		return string(val.Raw())
	}
	for i, tc := range []struct {
		segs               []ctlSegment
		node, baseNode     int
		lowerCopy, topCopy string
	}{
		{[]ctlSegment{t1, b0, l0, b1, t0, l1}, 0, 0, "l0", "t0"},
		{[]ctlSegment{t1, b0, l0, b1, t0, l1}, 1, 1, "l1", "t1"},
		{[]ctlSegment{b0, l0, t1}, 0, 0, "l0", "t1"}, // no top copy on node 0: the first
		{[]ctlSegment{b0, b1, l1, t0, t1, l0}, 0, 0, "l0", "t0"},
		{[]ctlSegment{b1, l0, t0, b0, l1, t1}, 63, 1, "l1", "t1"}, // no base copy on node 63: bases[0], its node's overlays
		{[]ctlSegment{b1, l0, t0}, 1, 1, "l0", "t0"},              // neither overlay on node 1: the first of each
	} {
		c.publish(uint64(2*i+2), uint64(i+1), tc.segs)
		n := tc.node
		cache, err := attachCtl(c, &n)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		top, _ := cache.Text("copy")
		if lc := lcopy(cache); cache.Node() != tc.baseNode || top != tc.topCopy || lc != tc.lowerCopy {
			t.Errorf("case %d, node %d: base of node %d, lower %q, top %q; want %d, %q, %q", i, n, cache.Node(), lc, top, tc.baseNode, tc.lowerCopy, tc.topCopy)
		}
		for k, want := range map[string]string{"top-only": "t", "lower-only": "l", "base-only": "b"} {
			if s, err := cache.Text(k); s != want || err != nil {
				t.Errorf("case %d: %s = %q %v", i, k, s, err)
			}
		}
		cache.Close()
	}
	// node 1's base copy is gone: bases[0] (node 0) and node 0's overlays
	if err := os.Remove(b1.path); err != nil {
		t.Fatal(err)
	}
	c.publish(100, 100, []ctlSegment{b0, b1, l1, t1, l0, t0})
	one := 1
	cache, err := attachCtl(c, &one)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	if top, _ := cache.Text("copy"); cache.Node() != 0 || top != "t0" || lcopy(cache) != "l0" {
		t.Errorf("node 1's base copy missing: base of node %d, lower %q, top %q; want 0, l0, t0", cache.Node(), lcopy(cache), top)
	}
}

// TestProtocol2LevelsRefresh: refresh across the levels: none -> a lower
// -> (a top of another base: refused, remembered, the generation kept) ->
// a lower and a top -> the same base and lower, a new top (only the top
// changed) -> a fold (the lower holds both, no top) -> (a top without a
// lower: refused) -> none; each move answers as its model, the files of
// the generations before unlinked, while views pinned earlier keep their
// generation whole.
func TestProtocol2LevelsRefresh(t *testing.T) {
	l := handLevels()
	im := l.encode(enc2Opts{buckets: 64, name: "base"})
	l2 := l // the next top: one more key, one key removed, one changed
	l2.top = append(slices.Clone(l.top), lvStr("top2-only", "t2", 0, false), lvTomb("base-only", false))
	for i, r := range l2.top {
		if r.key == "top-only" {
			l2.top[i] = lvStr("top-only", "t2", 0, true)
		}
	}
	im2 := l2.encode(enc2Opts{buckets: 64, name: "base"})
	folded := levels{base: l.base, lower: fold(l2.lower, l2.top)}
	imf := folded.encode(enc2Opts{buckets: 64, name: "base"})
	o := l
	o.base = append(slices.Clone(l.base), lvStr("other", "o", 0, false))
	other := o.encode(enc2Opts{buckets: 64, name: "base"})
	if !bytes.Equal(im.base, im2.base) || !bytes.Equal(im.lower, im2.lower) || !bytes.Equal(im.base, imf.base) {
		t.Fatal("the base and the lower differ between the generations")
	}

	c := newCtlVersion(t, 2, 0, 0, nil)
	b := c.file("base", im.base, -1, 0)
	c.publish(2, 1, []ctlSegment{b})
	cache, err := attachCtl(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	refresh := func(want bool, gen uint64) {
		t.Helper()
		if ok, err := cache.Refresh(); ok != want || err != nil || cache.Generation() != gen {
			t.Fatalf("refresh: %v %v at generation %d; want %v, generation %d", ok, err, cache.Generation(), want, gen)
		}
	}
	refused := func(kind error, gen uint64) {
		t.Helper()
		for try := range 2 { // remembered until the next publish
			if ok, err := cache.Refresh(); ok || !errors.Is(err, kind) || cache.Generation() != gen {
				t.Fatalf("refresh (try %d): %v %v at generation %d; want %v, generation %d kept", try, ok, err, cache.Generation(), kind, gen)
			}
		}
	}
	type pinned struct {
		v     *View
		m     map[string]rec2
		a     lvAlone
		files []string
	}
	var views []pinned
	hold := func(m map[string]rec2, a lvAlone, files ...ctlSegment) {
		cache.SetClock(lvNow)
		v, err := cache.Pin()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(v.Release)
		p := pinned{v: v, m: m, a: a}
		for _, f := range files {
			p.files = append(p.files, f.path)
		}
		views = append(views, p)
	}
	// still: every view pinned before answers its generation's model, its
	// files unlinked or not.
	still := func(when string) {
		t.Helper()
		for i, p := range views {
			viewHolds(t, fmt.Sprintf("%s: view %d", when, i), p.v, p.m, p.a)
		}
	}
	unlink := func(segs ...ctlSegment) { // what the loader does after a publish
		for _, s := range segs {
			if err := os.Remove(s.path); err != nil {
				t.Fatal(err)
			}
		}
	}

	checkLevels(t, cache, l, l.model(false, false), aloneViews(t, im, false, false), lvNow)
	hold(l.model(false, false), aloneViews(t, im, false, false))

	lo2 := c.file("lower.2", im.lower, -1, lvLower)
	c.publish(4, 2, []ctlSegment{b, lo2})
	refresh(true, 2)
	checkLevels(t, cache, l, l.model(true, false), aloneViews(t, im, true, false), lvNow)
	hold(l.model(true, false), aloneViews(t, im, true, false))
	still("after the lower appeared")

	bad := c.file("top.bad", other.top, -1, lvTop)
	c.publish(6, 3, []ctlSegment{b, lo2, bad})
	refused(ErrBase, 2)
	checkLevels(t, cache, l, l.model(true, false), aloneViews(t, im, true, false), lvNow)

	lo4, tp4 := c.file("lower.4", im.lower, -1, lvLower), c.file("top.4", im.top, -1, lvTop)
	c.publish(8, 4, []ctlSegment{tp4, b, lo4})
	unlink(lo2, bad)
	still("with the lower's file unlinked")
	refresh(true, 4)
	refresh(false, 4)
	checkLevels(t, cache, l, l.model(true, true), aloneViews(t, im, true, true), lvNow)
	hold(l.model(true, true), aloneViews(t, im, true, true))

	// only the top changed: the same base and lower files
	tp5 := c.file("top.5", im2.top, -1, lvTop)
	c.publish(10, 5, []ctlSegment{b, lo4, tp5})
	unlink(tp4)
	refresh(true, 5)
	checkLevels(t, cache, l2, l2.model(true, true), aloneViews(t, im2, true, true), lvNow)
	hold(l2.model(true, true), aloneViews(t, im2, true, true))
	still("after the top changed")

	// a fold: the lower holds the lower's and the top's changes, no top
	lo6 := c.file("lower.6", imf.lower, -1, lvLower)
	c.publish(12, 6, []ctlSegment{lo6, b})
	unlink(lo4, tp5)
	refresh(true, 6)
	if !maps.EqualFunc(folded.model(true, false), l2.model(true, true), func(x, y rec2) bool {
		return x.typ == y.typ && bytes.Equal(x.value, y.value) && x.expires == y.expires
	}) {
		t.Fatal("the fold's model differs from the lower and the top's")
	}
	checkLevels(t, cache, folded, folded.model(true, false), aloneViews(t, imf, true, false), lvNow)
	for _, k := range l2.keys() { // the same answers as before the fold
		w := l2.model(true, true)[k]
		got, err := cache.Text(k)
		if w.typ == TypeString && live(w, lvNow) && (err != nil || got != string(w.value)) {
			t.Fatalf("after the fold, %.24q: %q %v; want %q", k, got, err, w.value)
		}
	}
	hold(folded.model(true, false), aloneViews(t, imf, true, false))
	still("after the fold")

	// a top without a lower: refused, the fold kept
	tp7 := c.file("top.7", im.top, -1, lvTop)
	c.publish(14, 7, []ctlSegment{b, tp7})
	refused(ErrProto, 6)

	c.publish(16, 8, []ctlSegment{b})
	refresh(true, 8)
	checkLevels(t, cache, l, l.model(false, false), aloneViews(t, im, false, false), lvNow)
	if v := pin(t, cache); v.dm != nil || v.top != nil {
		t.Fatal("the base alone still reads overlays")
	}
	still("at the end")
	for i, p := range views {
		if p.v.Generation() != []uint64{1, 2, 4, 5, 6}[i] {
			t.Fatalf("view %d: generation %d", i, p.v.Generation())
		}
	}
}
