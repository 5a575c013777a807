// Command compare times single lookups of key_N -> val_N in the pure-Go
// shmkv reader (go/), in AxonCache's Go binding (cgo) and in a Go
// map[string]string, in one process, for the Go goals of bench/RESULTS.md,
// "Goals" (README.md here; figures in bench/RESULTS.md, "Go"). Not built by
// default or by CI: it links AxonCache, whose checkout bench/go/axoncache
// points at.
//
// Every round times each system on the hit stream and on the miss stream
// (2^20 pre-made random keys, cycled), the systems in a rotating order, in
// thread CPU time per lookup (CLOCK_THREAD_CPUTIME_ID; the goroutine is
// locked to its thread, and a cgo call runs on it). It prints every round,
// then the medians of the rounds and the medians of each round's ratios.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	shmkv "github.com/shmkv/shmkv/go"
)

const streamKeys = 1 << 20 // each stream cycles through this many random keys

var (
	n        = flag.Int("n", 1_000_000, "keys: key_N -> val_N for N in [0, n)")
	img      = flag.String("img", "", "the shmkv image of those keys (shmctl image build)")
	attach   = flag.String("attach", "", "instead of -img: attach to this cache of the loader at -root")
	root     = flag.String("root", "", "the loader's root for -attach")
	jsonOut  = flag.String("json", "", "also write every round's figures here as JSON")
	axDir    = flag.String("axdir", "", "AxonCache's directory: its cache of those keys, written there first if absent")
	huge     = flag.Bool("hugepages", false, "open the shmkv image with HugePages (an image on tmpfs)")
	rounds   = flag.Int("rounds", 5, "rounds")
	lookups  = flag.Int("lookups", 2_000_000, "lookups a system, stream and round")
	systems  = flag.String("systems", "map,get,batch,axon", "systems to time, comma-separated: map, get (shmkv View.Get), batch (shmkv GetBatch of 64, per key), axon")
	profile  = flag.String("cpuprofile", "", "write a CPU profile of the timed loops here")
	seedFlag = flag.Uint64("seed", 7, "seed of the random keys")
	benchOut = flag.String("benchfmt", "", "also append each round's figures to this file in Go's benchmark format (for benchstat)")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

// a system times one stream: lookups of keys[i % 2^20], the CPU time of the
// whole loop; hit says whether every key must be found (checked).
type system struct {
	name string
	time func(keys []string, hit bool, count int) (time.Duration, error)
}

func run() error {
	if (*img == "") == (*attach == "") || (strings.Contains(*systems, "axon") && *axDir == "") {
		return errors.New("-img or -attach (one of them), and -axdir for axon, are required")
	}
	runtime.LockOSThread() // thread CPU time is this thread's
	hits, misses := randomKeys(*n, false), randomKeys(*n, true)
	var all []system
	for _, s := range strings.Split(*systems, ",") {
		var sys system
		var err error
		switch s {
		case "map":
			sys = mapSystem(*n)
		case "get", "batch":
			sys, err = shmkvSystem(s)
		case "axon":
			sys, err = axonSystem(*n, *axDir)
		default:
			err = fmt.Errorf("unknown system %q", s)
		}
		if err != nil {
			return err
		}
		all = append(all, sys)
	}
	// one untimed pass of each system and stream: caches and page tables warm
	for _, s := range all {
		for _, st := range []struct {
			keys []string
			hit  bool
		}{{hits, true}, {misses, false}} {
			if _, err := s.time(st.keys, st.hit, streamKeys); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var load [3]float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscan(string(b), &load[0], &load[1], &load[2])
	}
	fmt.Printf("# n=%d img=%s hugepages=%v rounds=%d lookups=%d go=%s load=%.2f\n",
		*n, *img, *huge, *rounds, *lookups, runtime.Version(), load[0])
	var bench *os.File // Go's benchmark format: a configuration block, then a line a round and figure
	if *benchOut != "" {
		f, err := os.OpenFile(*benchOut, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		bench = f
		fmt.Fprintf(bench, "goos: %s\ngoarch: %s\ncpu: %s\nhugepages: %v\nmeasure: ns/op is the thread CPU time of a lookup\n",
			runtime.GOOS, runtime.GOARCH, cpuName(), *huge)
	}
	// ns[stream][system][round]
	ns := [2][][]float64{make([][]float64, len(all)), make([][]float64, len(all))}
	for r := 0; r < *rounds; r++ {
		runtime.GC()
		for k := range all {
			i := (k + r) % len(all) // a rotating order
			for sti, st := range []struct {
				keys []string
				hit  bool
			}{{hits, true}, {misses, false}} {
				d, err := all[i].time(st.keys, st.hit, *lookups)
				if err != nil {
					return fmt.Errorf("%s: %w", all[i].name, err)
				}
				x := float64(d.Nanoseconds()) / float64(*lookups)
				ns[sti][i] = append(ns[sti][i], x)
			}
		}
		fmt.Printf("round %d:", r)
		for sti, stream := range []string{"hit", "miss"} {
			for i, s := range all {
				fmt.Printf(" %s/%s %.1f", s.name, stream, ns[sti][i][r])
				if bench != nil {
					fmt.Fprintf(bench, "BenchmarkLookup/n=%s/stream=%s/sys=%s %d %.2f ns/op\n",
						sizeName(*n), stream, s.name, *lookups, ns[sti][i][r])
				}
			}
		}
		fmt.Println()
	}
	if bench != nil {
		if err := bench.Close(); err != nil {
			return err
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscan(string(b), &load[0], &load[1], &load[2])
	}
	if *jsonOut != "" {
		if err := writeJSON(*jsonOut, all, ns, load[0]); err != nil {
			return err
		}
	}
	fmt.Printf("# medians of %d rounds, cpu-ns a lookup (min-max); load at the end %.2f\n", *rounds, load[0])
	for sti, stream := range []string{"hit", "miss"} {
		for i, s := range all {
			v := ns[sti][i]
			fmt.Printf("%-5s %-6s %8.1f (%.0f-%.0f)\n", stream, s.name, median(v), slices.Min(v), slices.Max(v))
		}
		for i, a := range all {
			for j, b := range all {
				if a.name == "get" && (b.name == "map" || b.name == "axon") || a.name == "batch" && b.name == "get" {
					fmt.Printf("%-5s %s/%s %.3f (median of the rounds' ratios)\n", stream, a.name, b.name, medianRatio(ns[sti][i], ns[sti][j]))
				}
			}
		}
	}
	return nil
}

// sizeName: 1000000 -> 1M, 10000000 -> 10M, else the number.
// writeJSON: every system and stream's rounds, ns of thread CPU time a
// lookup, for bench/peers
func writeJSON(path string, all []system, ns [2][][]float64, load float64) error {
	type row struct {
		System string    `json:"system"`
		Stream string    `json:"stream"`
		NS     []float64 `json:"ns"`
	}
	out := struct {
		Keys      int     `json:"keys"`
		HugePages bool    `json:"hugepages"`
		Attach    string  `json:"attach,omitempty"`
		Go        string  `json:"go"`
		LoadEnd   float64 `json:"load_end"`
		Rows      []row   `json:"rows"`
	}{Keys: *n, HugePages: *huge, Attach: *attach, Go: runtime.Version(), LoadEnd: load}
	for sti, stream := range []string{"hit", "miss"} {
		for i, s := range all {
			out.Rows = append(out.Rows, row{s.name, stream, ns[sti][i]})
		}
	}
	b, err := json.MarshalIndent(out, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func sizeName(n int) string {
	if n%1_000_000 == 0 {
		return fmt.Sprintf("%dM", n/1_000_000)
	}
	return fmt.Sprint(n)
}

// cpuName: /proc/cpuinfo's model name (benchstat prints it as the runs' cpu).
func cpuName() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func medianRatio(a, b []float64) float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = a[i] / b[i]
	}
	return median(r)
}

func randomKeys(n int, miss bool) []string {
	rng := rand.New(rand.NewPCG(uint64(n), *seedFlag))
	keys := make([]string, streamKeys)
	for i := range keys {
		k := rng.IntN(n)
		if miss {
			k += n // key_N for N in [n, 2n): absent
		}
		keys[i] = fmt.Sprintf("key_%d", k)
	}
	return keys
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}

var sink int

func mapSystem(n int) system {
	m := make(map[string]string, n)
	for i := 0; i < n; i++ {
		m[fmt.Sprintf("key_%d", i)] = fmt.Sprintf("val_%d", i)
	}
	return system{"map", func(keys []string, hit bool, count int) (time.Duration, error) {
		s := 0
		t0 := threadCPU()
		for i := 0; i < count; i++ {
			v, ok := m[keys[i&(streamKeys-1)]]
			if ok != hit {
				return 0, fmt.Errorf("key %s: found %v", keys[i&(streamKeys-1)], ok)
			}
			s += len(v)
		}
		d := threadCPU() - t0
		sink += s
		return d, nil
	}}
}

func shmkvSystem(which string) (system, error) {
	flags := shmkv.NoVerify | shmkv.Populate // steady state: page faults are not timed
	if *huge {
		flags |= shmkv.HugePages
	}
	var v *shmkv.View
	if *attach != "" { // the loader's cache (its huge pages)
		c, err := shmkv.Attach(*attach, *root)
		if err != nil {
			return system{}, err
		}
		v, err = c.Pin() // held for the process's life
		if err != nil {
			return system{}, err
		}
	} else {
		im, err := shmkv.OpenFile(*img, flags)
		if err != nil {
			return system{}, err
		}
		v, err = im.Pin() // held for the process's life
		if err != nil {
			return system{}, err
		}
	}
	if which == "batch" {
		const batch = 64
		vals, errs := make([]shmkv.Value, batch), make([]error, batch)
		return system{"batch", func(keys []string, hit bool, count int) (time.Duration, error) {
			s := 0
			t0 := threadCPU()
			for i := 0; i < count; i += batch { // count keys in all
				lo := i & (streamKeys - 1) &^ (batch - 1)
				v.GetBatch(keys[lo:lo+batch], vals, errs)
				if (errs[0] == nil) != hit {
					return 0, fmt.Errorf("key %s: %v", keys[lo], errs[0])
				}
				s += len(vals[0].Raw())
			}
			d := threadCPU() - t0
			sink += s
			return d, nil
		}}, nil
	}
	return system{"get", func(keys []string, hit bool, count int) (time.Duration, error) {
		s := 0
		t0 := threadCPU()
		for i := 0; i < count; i++ {
			val, err := v.Get(keys[i&(streamKeys-1)])
			if (err == nil) != hit {
				return 0, fmt.Errorf("key %s: %v", keys[i&(streamKeys-1)], err)
			}
			s += len(val.Raw())
		}
		d := threadCPU() - t0
		sink += s
		return d, nil
	}}, nil
}
