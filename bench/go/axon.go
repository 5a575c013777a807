//go:build axon

// The axon system: AxonCache's Go binding (cgo), built with -tags axon
// against the checkout that ./axoncache links to (build.sh).

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	axoncache "github.com/AppLovin/AxonCache"
)

const haveAxon = true

// axonSystem opens AxonCache's cache of key_N -> val_N in dir, first
// writing it there with its writer as its own Go benchmark does
// (cmd/benchmark.go: cache type 5, 2 key slots a key, renamed with a
// timestamp file), then reading it with memory preloaded.
func axonSystem(n int, dir string) (system, error) {
	const task = "bench_cache"
	if _, err := os.Stat(filepath.Join(dir, task+".cache.timestamp.latest")); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return system{}, err
		}
		w, err := axoncache.NewCacheWriter(&axoncache.CacheWriterOptions{
			TaskName:              task,
			DestinationFolder:     dir,
			NumberOfKeySlots:      uint64(2 * n),
			GenerateTimestampFile: true,
			RenameCacheFile:       true,
			CacheType:             5,
		})
		if err != nil {
			return system{}, err
		}
		for i := 0; i < n; i++ {
			if err := w.InsertKey([]byte(fmt.Sprintf("key_%d", i)), []byte(fmt.Sprintf("val_%d", i)), 0); err != nil {
				return system{}, err
			}
		}
		if err, _ := w.FinishCacheCreation(); err != nil {
			return system{}, err
		}
		w.Delete()
		fmt.Fprintf(os.Stderr, "wrote AxonCache's cache of %d keys in %s\n", n, dir)
	}
	r, err := axoncache.NewCacheReader(&axoncache.CacheReaderOptions{
		TaskName:               task,
		DestinationFolder:      dir,
		IsPreloadMemoryEnabled: true,
		UpdatePeriod:           time.Hour,
	})
	if err != nil {
		return system{}, err
	}
	if v, err := r.GetKey("key_0"); err != nil || v != "val_0" {
		return system{}, fmt.Errorf("AxonCache: key_0 -> %q, %v", v, err)
	}
	return system{"axon", func(keys []string, hit bool, count int) (time.Duration, error) {
		s := 0
		t0 := threadCPU()
		for i := 0; i < count; i++ {
			v, err := r.GetKey(keys[i&(streamKeys-1)])
			if (err == nil) != hit {
				return 0, fmt.Errorf("key %s: %v", keys[i&(streamKeys-1)], err)
			}
			s += len(v)
		}
		d := threadCPU() - t0
		sink += s
		return d, nil
	}}, nil
}
