package shmkv

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// mapping is one mapped image (a file, or one generation of a cache) with a
// reference count: its owner (the Image, or the Cache while this is its
// current generation) holds one reference, each pinned View one more. It is
// unmapped when the count reaches zero, so no View can outlive its memory.
// A base read through a delta (Image.WithDelta), or through a lower and
// a top delta (Image.WithDeltas), and every generation of a cache, is a
// mapping of no memory of its own: it holds a reference to the base's
// mapping and to each delta's (held), dropped when its own count reaches
// zero; a refresh that keeps a level takes one more (keep.go).
type mapping struct {
	mem  []byte // the whole mmap(2) region; nil for an in-memory image
	im   *image
	dm   *image // the (lower) delta im is read through (FORMAT.md §19); nil: none
	top  *image // the top delta read before dm (FORMAT.md §19.6); nil: none (never without dm)
	held []*mapping
	id   *segID // a level of a cache's generation: what it was mapped from (keep.go); nil otherwise
	gen  uint64
	node int
	refs atomic.Int64

	lenOnce sync.Once // View.Len through deltas: counted once
	n       int
}

func newMapping(mem []byte, im *image, gen uint64, node int) *mapping {
	m := &mapping{mem: mem, im: im, gen: gen, node: node}
	m.refs.Store(1) // the owner's
	return m
}

// acquire takes a reference unless the count already reached zero (the
// mapping is gone or going: the caller reloads the current one).
func (m *mapping) acquire() bool {
	for {
		r := m.refs.Load()
		if r <= 0 {
			return false
		}
		if m.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

func (m *mapping) release() {
	if m.refs.Add(-1) != 0 {
		return
	}
	if m.mem != nil {
		unmapFile(m.mem)
	}
	for _, h := range m.held {
		h.release()
	}
}

// source is what Image and Cache share: the current mapping, swapped by
// a Cache's refresh, pinned by views and by the copying getters.
type source struct {
	cur      atomic.Pointer[mapping]
	clockPin atomic.Int64 // SetClock's "now"; 0: the system clock
}

// SetClock pins the "now" of expiry checks (Unix seconds, FORMAT.md
// §17) for this Image or Cache: its copying getters, and the Views
// pinned after the call (a View keeps the clock it was pinned with); 0
// unpins it, the system clock again. For tests and replays, as the C
// reader's shmkv_set_clock. An image without the EXPIRY flag has no
// expiring entry, pinned clock or not.
func (s *source) SetClock(now int64) { s.clockPin.Store(now) }

func (s *source) pin() (*mapping, error) {
	for {
		m := s.cur.Load()
		if m == nil {
			return nil, ErrClosed
		}
		if m.acquire() {
			return m, nil
		}
		// Lost a race with a refresh that swapped cur and dropped the
		// owner's reference: the new mapping is in cur now.
	}
}

// swap makes m current and drops the owner's reference on the previous one
// (unmapped once no view holds it). nil closes.
func (s *source) swap(m *mapping) {
	if old := s.cur.Swap(m); old != nil {
		old.release()
	}
}

// Pin returns a View of the current image (for a Cache: its current
// generation). Values from the View are zero-copy and stay valid, and
// unchanged, until View.Release, whatever refreshes and closes happen
// meanwhile; the View must be released (or its mapping is never unmapped).
func (s *source) Pin() (*View, error) {
	m, err := s.pin()
	if err != nil {
		return nil, err
	}
	return &View{m: m, im: m.im, dm: m.dm, top: m.top, clock: s.clockPin.Load()}, nil
}

// read pins the current mapping, reads key's value with get (one of
// Value's getters) and unpins: the copying getters, whose results own
// their memory (get's scalar or string, or a copy of its slice: clone).
func read[T any](s *source, key string, get func(Value) (T, error), clone func(T) T) (T, error) {
	var zero T
	m, err := s.pin()
	if err != nil {
		return zero, err
	}
	defer m.release()
	v, err := m.im.get(strBytes(key), &View{dm: m.dm, top: m.top, clock: s.clockPin.Load()}) // on the stack
	if err != nil {
		return zero, err
	}
	out, err := get(v)
	if err != nil {
		return zero, err
	}
	return clone(out), nil
}

func same[T any](x T) T { return x }

// copied is a copy of a zero-copy slice, never nil.
func copied[E any](l []E) []E { return append([]E{}, l...) }

// Bytes is a copy of key's bytes value.
func (s *source) Bytes(key string) ([]byte, error) { return read(s, key, Value.Bytes, copied) }

// Text is key's string value, copied into a Go string (the getter is not
// named String: that name is fmt.Stringer's).
func (s *source) Text(key string) (string, error) { return read(s, key, Value.Text, same) }

// Int64 is key's i64 value.
func (s *source) Int64(key string) (int64, error) { return read(s, key, Value.Int64, same) }

// Float64 is key's f64 value.
func (s *source) Float64(key string) (float64, error) { return read(s, key, Value.Float64, same) }

// Bool is key's bool value.
func (s *source) Bool(key string) (bool, error) { return read(s, key, Value.Bool, same) }

// Float32s is a copy of key's f32list.
func (s *source) Float32s(key string) ([]float32, error) {
	return read(s, key, Value.Float32s, copied)
}

// Float64s is a copy of key's f64list.
func (s *source) Float64s(key string) ([]float64, error) {
	return read(s, key, Value.Float64s, copied)
}

// Int64s is a copy of key's i64list.
func (s *source) Int64s(key string) ([]int64, error) { return read(s, key, Value.Int64s, copied) }

// Strings is key's strlist copied into Go strings (ErrCorrupt if a string
// is damaged or not strict UTF-8).
func (s *source) Strings(key string) ([]string, error) { return read(s, key, Value.Strings, same) }

// View is a pinned image: one generation of a Cache, or an Image, that
// stays mapped until Release. Its methods may be called from any number of
// goroutines until then; after Release they return ErrClosed, and slices
// obtained from it must no longer be used (they may point into unmapped
// memory: that is the one rule of zero-copy reading, as in bbolt's
// transactions).
type View struct {
	m        *mapping
	im       *image
	dm       *image // the (lower) delta im is read through; nil: none
	top      *image // the top delta, read before dm (FORMAT.md §19.6); nil: none
	clock    int64  // the source's pinned clock when pinned; 0: the system clock
	released atomic.Bool
}

// Release unpins the view; later calls do nothing.
func (v *View) Release() {
	if v.released.CompareAndSwap(false, true) {
		v.m.release()
	}
}

// Generation is the cache generation this view reads (0 for an image file).
func (v *View) Generation() uint64 { return v.m.gen }

// Node is the NUMA node whose copy of the image this view reads; -1 where
// the copy is not pinned to a node (and for an image file).
func (v *View) Node() int { return v.m.node }

// Len is the image's entry_count: every record, expired ones included
// (Entries yields the live ones); of a delta read alone, its upserts and
// its tombstones. Through a delta (or a lower and a top), the number of
// records Records yields, counted at the first call (a lookup in the
// levels below for each record of each delta) and kept; -1 if damage in
// any image stops the count (Records says where).
func (v *View) Len() int {
	if v.dm == nil {
		return int(v.im.entryCount)
	}
	return v.m.throughLen()
}

// Get is key's value, zero-copy: ErrNotFound (also for an entry whose
// expiry the clock has reached: FORMAT.md §17; the clock is read once
// per call, and only for images with the header's EXPIRY flag), ErrKeyLen,
// ErrCorrupt where the lookup meets damage (FORMAT.md §12.1, §6.4; a
// string value that is not strict UTF-8 included), ErrClosed after
// Release. No allocation. Of a delta read alone, a tombstone's key is
// absent (ErrNotFound); through a delta (Image.WithDelta), the delta's
// upsert or tombstone of the key answers, else the base.
func (v *View) Get(key string) (Value, error) {
	return v.im.get(strBytes(key), v) // inlined here: one call to the lookup
}

// GetBytes is Get with the key as bytes.
func (v *View) GetBytes(key []byte) (Value, error) {
	return v.im.get(key, v)
}

// Expires is when key's entry expires, in Unix seconds (FORMAT.md §17),
// expired or not; 0 when it never does. ErrNotFound for a key the image
// does not hold (a delta's tombstone included). Through a delta, the
// delta's upsert of the key answers, or its tombstone, else the base;
// through a lower and a top, the top's record, else the lower's, else the
// base's (FORMAT.md §19.6).
func (v *View) Expires(key string) (uint32, error) {
	if v.released.Load() {
		return 0, ErrClosed
	}
	if v.dm != nil {
		return v.im.expiresThrough(v.top, v.dm, strBytes(key))
	}
	return v.im.expiresOf(strBytes(key))
}

// Verify runs the full structural check of FORMAT.md §13 (checksums
// included; a delta's, §19.4's too) on the view's image: nil, or the first
// problem found. Through a delta, the base's, then the delta's; through
// a lower and a top, the base's, the lower's, then the top's.
func (v *View) Verify() error {
	if v.released.Load() {
		return ErrClosed
	}
	if err := v.im.verifyAll(); err != nil || v.dm == nil {
		return err
	}
	lower := "the delta"
	if v.top != nil {
		lower = "the lower delta"
	}
	if err := v.dm.verifyAll(); err != nil {
		return fmt.Errorf("%s: %w", lower, err)
	}
	if v.top != nil {
		if err := v.top.verifyAll(); err != nil {
			return fmt.Errorf("the top delta: %w", err)
		}
	}
	return nil
}

// strBytes is s's bytes without a copy (keys are only read).
func strBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
