package shmkv

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Get against a Go map of the same data, key_N -> val_N at 1M
// and 10M keys, uniform random hits and misses (misses are key_N for N in
// [n, 2n)). The images are built once with shmctl into
// $SHMKV_GO_BENCH_DIR (default: the system's temporary directory) and kept
// (kvN.v2.shmkv); SHMKV_GO_BENCH_HUGEPAGES=1 opens them with HugePages (a
// directory on tmpfs).
//
//	go test -run '^$' -bench 'Get' -benchmem -count 1   # bench/RESULTS.md, "Go"

// benchImage builds (or finds) the image of n keys and opens it.
func benchImage(b *testing.B, n int) *Image {
	dir := os.Getenv("SHMKV_GO_BENCH_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "shmkv-go-bench")
	}
	path := filepath.Join(dir, fmt.Sprintf("kv%d.v2.shmkv", n))
	if _, err := os.Stat(path); err != nil {
		shmctl := program(b, "SHMKV_SHMCTL", "shmctl/shmctl")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		src := path + ".jsonl"
		f, err := os.Create(src)
		if err != nil {
			b.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		for i := 0; i < n; i++ {
			fmt.Fprintf(w, "{\"key\":\"key_%d\",\"value\":\"val_%d\"}\n", i, i)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		if out, err := exec.Command(shmctl, "image", "build", "-o", path, "--name", "bench", src).CombinedOutput(); err != nil {
			b.Fatalf("shmctl image build: %v\n%s", err, out)
		}
		os.Remove(src)
	}
	flags := NoVerify | Populate                      // steady state: page faults are not timed
	if os.Getenv("SHMKV_GO_BENCH_HUGEPAGES") == "1" { // the directory on tmpfs: 2 MiB pages
		flags |= HugePages
	}
	img, err := OpenFile(path, flags)
	if err != nil {
		b.Fatal(err)
	}
	return img
}

const benchKeys = 1 << 20 // lookups cycle through this many random keys

func randomKeys(n int, miss bool) []string {
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	keys := make([]string, benchKeys)
	for i := range keys {
		k := rng.IntN(n)
		if miss {
			k += n
		}
		keys[i] = fmt.Sprintf("key_%d", k)
	}
	return keys
}

var benchSizes = []struct {
	name string
	n    int
}{{"1M", 1_000_000}, {"10M", 10_000_000}}

var sink int

func BenchmarkGet(b *testing.B) {
	for _, sz := range benchSizes {
		hits, misses := randomKeys(sz.n, false), randomKeys(sz.n, true)
		b.Run(sz.name+"/shmkv", func(b *testing.B) {
			img := benchImage(b, sz.n)
			defer img.Close()
			v, err := img.Pin()
			if err != nil {
				b.Fatal(err)
			}
			defer v.Release()
			for _, c := range []struct {
				name string
				keys []string
				err  error
			}{{"hit", hits, nil}, {"miss", misses, ErrNotFound}} {
				b.Run(c.name, func(b *testing.B) {
					b.ReportAllocs()
					defer cpuClock(b)()
					s := 0
					for i := 0; i < b.N; i++ {
						val, err := v.Get(c.keys[i&(benchKeys-1)])
						if err != c.err {
							b.Fatal(err)
						}
						s += len(val.Raw())
					}
					sink = s
				})
			}
		})
		b.Run(sz.name+"/map", func(b *testing.B) {
			m := make(map[string]string, sz.n)
			for i := 0; i < sz.n; i++ {
				m[fmt.Sprintf("key_%d", i)] = fmt.Sprintf("val_%d", i)
			}
			for _, c := range []struct {
				name string
				keys []string
				ok   bool
			}{{"hit", hits, true}, {"miss", misses, false}} {
				b.Run(c.name, func(b *testing.B) {
					b.ReportAllocs()
					defer cpuClock(b)()
					s := 0
					for i := 0; i < b.N; i++ {
						val, ok := m[c.keys[i&(benchKeys-1)]]
						if ok != c.ok {
							b.Fatal("map")
						}
						s += len(val)
					}
					sink = s
				})
			}
		})
	}
}

// BenchmarkGetDelta: Get on the same base image (benchImage) read alone,
// read through a delta holding 1% of its keys (FORMAT.md §19; 90% of
// them upserts "dval_N", 10% tombstones; the test encoder's, with the
// builder's filter of 16 bits a key), and read through that delta as the
// lower and a top delta over it holding 0.03% of the keys (§19.6: what a
// protocol 2 cache with a top overlay reads; upserts "tval_N" of keys the
// lower holds or not, 10% tombstones): hits of keys neither delta holds
// ("base-hit", alone, through the one delta and through both), hits of
// the lower's upserts ("delta-hit", through), of the top's ("top-hit",
// through both), and misses ("miss", alone, through one, through both),
// each a sub-benchmark. "interleaved" measures the nine in turn, in an
// order that rotates each round, 2^16 gets each (the benchmark thread's
// CPU time; each measurement its own
// window of the key lists, so that none finds the lines of the one before
// it in cache), b.N rounds, and reports each one's median (ns/get) and
// the ratios of the medians: through/alone and both/alone for base hits
// and misses, both/through (what the top adds), delta and top hits/base
// hits alone. "interleaved-batch" does the same with GetBatch, 64 keys a
// call (ns a key):
//
//	go test -run '^$' -bench 'GetDelta/1M/interleaved$' -benchtime 21x
//	go test -run '^$' -bench 'GetDelta/10M/interleaved-batch' -benchtime 27x
func BenchmarkGetDelta(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			img := benchImage(b, sz.n)
			defer img.Close()
			delta, upserts := benchDelta(b, img, sz.n, sz.n/100, 8, "dval")
			defer delta.Close()
			top, topUpserts := benchDelta(b, img, sz.n, sz.n/3000, 10, "tval")
			defer top.Close()
			through, err := img.WithDelta(delta)
			if err != nil {
				b.Fatal(err)
			}
			defer through.Close()
			both, err := img.WithDeltas(delta, top)
			if err != nil {
				b.Fatal(err)
			}
			defer both.Close()
			alone, tv, bv := pinned(b, img), pinned(b, through), pinned(b, both)
			held := map[string]bool{}
			for _, d := range []*Image{delta, top} {
				for e, err := range pinned(b, d).Records() {
					if err != nil {
						b.Fatal(err)
					}
					held[string(e.Key)] = true
				}
			}
			var baseHits []string
			for _, k := range randomKeys(sz.n, false) {
				if !held[k] {
					baseHits = append(baseHits, k)
				}
			}
			for len(baseHits) < benchKeys {
				baseHits = append(baseHits, baseHits[:benchKeys-len(baseHits)]...)
			}
			rng := rand.New(rand.NewPCG(uint64(sz.n), 9))
			topHeld := map[string]bool{}
			for e, err := range pinned(b, top).Records() {
				if err != nil {
					b.Fatal(err)
				}
				topHeld[string(e.Key)] = true
			}
			// Each list's keys are copies made in its order, as
			// randomKeys' are: a key's bytes are read where the one before
			// it lies, not in a line of its own (picked at random from
			// the upserts' strings, a batch's hits of the changes paid a
			// cache miss a key before its lookup).
			deltaHits := make([]string, benchKeys)
			for i := range deltaHits {
				k := upserts[rng.IntN(len(upserts))]
				for topHeld[k] {
					k = upserts[rng.IntN(len(upserts))] // the lower's answer: a key the top lacks
				}
				deltaHits[i] = strings.Clone(k)
			}
			topHits := make([]string, benchKeys)
			for i := range topHits {
				topHits[i] = strings.Clone(topUpserts[rng.IntN(len(topUpserts))])
			}
			misses := randomKeys(sz.n, true)
			cases := []struct {
				name string
				v    *View
				keys []string
				err  error
			}{
				{"base-hit/alone", alone, baseHits, nil}, {"base-hit/through", tv, baseHits, nil},
				{"base-hit/both", bv, baseHits, nil},
				{"delta-hit/through", tv, deltaHits, nil}, {"delta-hit/both", bv, deltaHits, nil},
				{"top-hit/both", bv, topHits, nil},
				{"miss/alone", alone, misses, ErrNotFound}, {"miss/through", tv, misses, ErrNotFound},
				{"miss/both", bv, misses, ErrNotFound},
			}
			gets := func(b *testing.B, v *View, keys []string, want error, from, n int) int {
				s := 0
				for i := from; i < from+n; i++ {
					val, err := v.Get(keys[i&(benchKeys-1)])
					if err != want {
						b.Fatal(err)
					}
					s += len(val.Raw())
				}
				return s
			}
			for _, c := range cases {
				b.Run(c.name, func(b *testing.B) {
					b.ReportAllocs()
					defer cpuClock(b)()
					sink = gets(b, c.v, c.keys, c.err, 0, b.N)
				})
			}
			batches := func(b *testing.B, v *View, keys []string, want error, from, n int) int {
				const batch = 64
				var vals [batch]Value
				var errs [batch]error
				s := 0
				for i := from; i < from+n; i += batch {
					lo := i & (benchKeys - 1) &^ (batch - 1)
					v.GetBatch(keys[lo:lo+batch], vals[:], errs[:])
					for j := range errs {
						if errs[j] != want && !errors.Is(errs[j], want) {
							b.Fatal(errs[j])
						}
						s += len(vals[j].Raw())
					}
				}
				return s
			}
			for _, mode := range []struct {
				name string
				get  func(b *testing.B, v *View, keys []string, want error, from, n int) int
			}{{"interleaved", gets}, {"interleaved-batch", batches}} {
				b.Run(mode.name, func(b *testing.B) {
					const per = 1 << 16
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					ns := make([][]float64, len(cases))
					for r := 0; r < b.N; r++ {
						for k := range cases {
							i := (k + r) % len(cases) // the order rotates: no case always follows the same one
							c := cases[i]
							c0 := threadCPU()
							sink += mode.get(b, c.v, c.keys, c.err, (r*len(cases)+i)*per, per) // a window of its own: no case reads lines another just brought in
							ns[i] = append(ns[i], float64(threadCPU()-c0)/per)
						}
					}
					med := map[string]float64{}
					for i, c := range cases {
						med[c.name] = median(ns[i])
						b.ReportMetric(med[c.name], c.name+"-ns")
					}
					b.ReportMetric(med["base-hit/through"]/med["base-hit/alone"], "base-hit-through/alone")
					b.ReportMetric(med["base-hit/both"]/med["base-hit/alone"], "base-hit-both/alone")
					b.ReportMetric(med["base-hit/both"]/med["base-hit/through"], "base-hit-both/through")
					b.ReportMetric(med["miss/through"]/med["miss/alone"], "miss-through/alone")
					b.ReportMetric(med["miss/both"]/med["miss/alone"], "miss-both/alone")
					b.ReportMetric(med["miss/both"]/med["miss/through"], "miss-both/through")
					b.ReportMetric(med["delta-hit/through"]/med["base-hit/alone"], "delta-hit/base-hit-alone")
					b.ReportMetric(med["top-hit/both"]/med["base-hit/alone"], "top-hit/base-hit-alone")
				})
			}
		})
	}
}

func median(x []float64) float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// benchDelta encodes a delta of the n-key base img (benchDeltaBytes) into
// a temporary file, and opens it; it returns the upserted keys too.
func benchDelta(b *testing.B, img *Image, n, count int, seed uint64, prefix string) (*Image, []string) {
	delta, upserts := benchDeltaBytes(img, n, count, seed, prefix)
	path := filepath.Join(b.TempDir(), "delta.shmkv")
	if err := os.WriteFile(path, delta, 0o644); err != nil {
		b.Fatal(err)
	}
	d, err := OpenFile(path, Populate)
	if err != nil {
		b.Fatal(err)
	}
	return d, upserts
}

// benchDeltaBytes encodes a delta of the n-key base img (test encoder)
// holding count of its keys (chosen by a generator of seed), 90% upserts
// "prefix_N" and 10% tombstones; and the upserted keys.
func benchDeltaBytes(img *Image, n, count int, seed uint64, prefix string) ([]byte, []string) {
	m := img.cur.Load()
	rng := rand.New(rand.NewPCG(uint64(n), seed))
	seen := map[int]bool{}
	var recs []rec2
	var upserts []string
	for len(recs) < count {
		k := rng.IntN(n)
		if seen[k] {
			continue
		}
		seen[k] = true
		key := fmt.Sprintf("key_%d", k)
		if len(recs)%10 == 9 {
			recs = append(recs, rec2{key: key, tomb: true})
			continue
		}
		recs = append(recs, rec2{key: key, typ: TypeString, value: []byte(fmt.Sprintf("%s_%d", prefix, k))})
		upserts = append(upserts, key)
	}
	rooms := 0 // the builder's bucket count (FORMAT.md §14): the records' rooms at a load factor of 0.72
	for _, r := range recs {
		rooms += recInlineHead + len(r.key) + len(r.value) + int(r.typ.nul()) + dirBytes
	}
	o := enc2Opts{seed: m.im.seed, hashBits: m.im.hashBits, buckets: uint64(math.Ceil(float64(rooms) / (120.0 * 0.72))),
		delta: &deltaOpts{id: DeltaID{BaseChecksum: m.im.checksum, BaseSize: m.im.fileSize, Seq: 1}}}
	return encodeV2(recs, o), upserts
}

func pinned(b *testing.B, img *Image) *View {
	v, err := img.Pin()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(v.Release)
	return v
}

// BenchmarkRefreshTop: the CPU a reader of a cache of 1M and 10M keys
// (benchImage's) spends on a refresh to a top-only publish (PROTOCOL.md,
// "Protocol 2"), what a stream of sets costs it: rounds of a new top
// (1,000 keys) over the same base and lower (1,000 keys), published in a
// control segment written by hand (ctl_test.go's fixture, its files in
// the system's temporary directory: TMPDIR=/dev/shm puts them on tmpfs,
// as a loader's), then Refresh and refreshGets gets of random base keys
// through a pinned view, interleaved with rounds of the gets alone. It
// reports the medians of the thread's CPU in each kind of round
// (refresh-ms: refresh and gets, gets-ms: the gets alone) and their
// difference, the refresh's cost (cost-ms), the faults of what it maps
// anew included.
//
//	TMPDIR=/dev/shm go test -run '^$' -bench RefreshTop -benchtime 60x
func BenchmarkRefreshTop(b *testing.B) {
	const refreshGets = 20_000
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			img := benchImage(b, sz.n)
			defer img.Close()
			m := img.cur.Load()
			c := newCtlVersion(b, 2, 0, 0, nil)
			base := c.file("base", m.mem[:m.im.fileSize], -1, 0)
			lo, _ := benchDeltaBytes(img, sz.n, 1000, 1, "lower")
			lower := c.file("lower", lo, -1, ctlSegOverlay)
			var tops []ctlSegment
			for i := range 4 {
				tp, _ := benchDeltaBytes(img, sz.n, 1000, uint64(2+i), "top")
				tops = append(tops, c.file(fmt.Sprint("top.", i), tp, -1, ctlSegOverlay|ctlSegTop))
			}
			seq, gen := uint64(2), uint64(1)
			c.publish(seq, gen, []ctlSegment{base, lower, tops[0]})
			cache, err := AttachWith("c", AttachOptions{Root: c.dir})
			if err != nil {
				b.Fatal(err)
			}
			defer cache.Close()
			keys := randomKeys(sz.n, false)
			k := 0
			round := func(publish bool) float64 {
				if publish {
					seq, gen = seq+2, gen+1
					c.publish(seq, gen, []ctlSegment{base, lower, tops[gen%4]})
				}
				t0 := threadCPU()
				if publish {
					if ok, err := cache.Refresh(); !ok || err != nil {
						b.Fatalf("refresh to generation %d: %v %v", gen, ok, err)
					}
				}
				v, err := cache.Pin()
				if err != nil {
					b.Fatal(err)
				}
				for range refreshGets {
					if _, err := v.Get(keys[k&(benchKeys-1)]); err != nil && !errors.Is(err, ErrNotFound) {
						b.Fatal(err)
					}
					k++
				}
				v.Release()
				return float64(threadCPU()-t0) / 1e6
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for i := range 4 { // warm: every file read once
				round(i%2 == 0)
			}
			var refresh, gets []float64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%2 == 0 {
					refresh = append(refresh, round(true))
				} else {
					gets = append(gets, round(false))
				}
			}
			if len(gets) > 0 {
				b.ReportMetric(median(refresh), "refresh-ms")
				b.ReportMetric(median(gets), "gets-ms")
				b.ReportMetric(median(refresh)-median(gets), "cost-ms")
			}
		})
	}
}

// BenchmarkGetBatch: the per-key time of GetBatch, batches of 64 keys.
func BenchmarkGetBatch(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			img := benchImage(b, sz.n)
			defer img.Close()
			v, _ := img.Pin()
			defer v.Release()
			for _, c := range []struct {
				name string
				miss bool
			}{{"hit", false}, {"miss", true}} {
				keys := randomKeys(sz.n, c.miss)
				b.Run(c.name, func(b *testing.B) {
					const batch = 64
					vals, errs := make([]Value, batch), make([]error, batch)
					b.ReportAllocs()
					defer cpuClock(b)()
					s := 0
					for i := 0; i < b.N; i += batch { // b.N keys in all: ns/op is per key
						lo := i & (benchKeys - 1) &^ (batch - 1)
						v.GetBatch(keys[lo:lo+batch], vals, errs)
						s += len(vals[0].Raw())
					}
					sink = s
				})
			}
		})
	}
}

// cpuClock reports cpu-ns/op, the benchmark thread's CPU time per op, beside
// ns/op: on a shared, loaded machine the wall clock also counts the time
// slices of other processes. Call as defer cpuClock(b)() before the loop.
func cpuClock(b *testing.B) func() {
	runtime.LockOSThread()
	c0 := threadCPU()
	return func() {
		b.ReportMetric(float64(threadCPU()-c0)/float64(b.N), "cpu-ns/op")
		runtime.UnlockOSThread()
	}
}

func threadCPU() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return ts.Nano()
}
