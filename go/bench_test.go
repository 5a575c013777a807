package shmkv

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
