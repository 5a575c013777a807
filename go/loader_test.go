package shmkv

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A Go program attached to a cache served by a real shmkv-loader follows
// its swaps: 1,000 generations published under goroutines
// that hold views, every value checked against the generation of its view.

// program is the path in $env, else the meson build's one (../build), else
// a skip with the reason (a failure with SHMKV_REQUIRE_ALL=1, as in CI).
func program(t testing.TB, env, built string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	if p, err := filepath.Abs(filepath.Join("..", "build", built)); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	why := fmt.Sprintf("no %s: set $%s or build the repository in ../build (meson setup build && ninja -C build)", built, env)
	if os.Getenv("SHMKV_REQUIRE_ALL") == "1" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// slow scales deadlines on a loaded machine ($SHMKV_TEST_SLOW, tests/README.md).
func slow() time.Duration {
	if n, err := strconv.Atoi(os.Getenv("SHMKV_TEST_SLOW")); err == nil && n > 0 {
		return time.Duration(n)
	}
	return 1
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d * slow())
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", d*slow(), what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

type served struct {
	root, spool, shm, dir string
	images                [2]string // marker 1 and 2
}

const servedKeys = 300

// serve starts a loader on fresh directories and builds the two images
// whose generations alternate: key k_I holds "M:I", vec_I the f32list
// [M, I], gen the i64 M, for the image's marker M.
func serve(t *testing.T) *served {
	shmctl := program(t, "SHMKV_SHMCTL", "shmctl/shmctl")
	loader := program(t, "SHMKV_LOADER", "loader/shmkv-loader")
	dir := t.TempDir()
	s := &served{root: filepath.Join(dir, "root"), spool: filepath.Join(dir, "spool"), dir: dir}
	for _, d := range []string{s.root, s.spool} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shm, err := os.MkdirTemp("/dev/shm", "shmkv-go-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	s.shm = shm
	t.Cleanup(func() { os.RemoveAll(shm) })
	if err := os.Chmod(shm, 0o755); err != nil {
		t.Fatal(err)
	}
	for m := 1; m <= 2; m++ {
		var b strings.Builder
		fmt.Fprintf(&b, "{\"key\": \"gen\", \"value\": %d}\n", m)
		for i := 0; i < servedKeys; i++ {
			fmt.Fprintf(&b, "{\"key\": \"k_%d\", \"value\": \"%d:%d\"}\n", i, m, i)
			fmt.Fprintf(&b, "{\"key\": \"vec_%d\", \"type\": \"f32list\", \"value\": [%d, %d]}\n", i, m, i)
		}
		src := filepath.Join(dir, fmt.Sprintf("g%d.jsonl", m))
		s.images[m-1] = filepath.Join(dir, fmt.Sprintf("g%d.shmkv", m))
		if err := os.WriteFile(src, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(shmctl, "image", "build", "-o", s.images[m-1], "--name", "feat", src).CombinedOutput(); err != nil {
			t.Fatalf("shmctl image build: %v\n%s", err, out)
		}
	}
	log, err := os.Create(filepath.Join(dir, "loader.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(loader, "--root", s.root, "--spool", s.spool, "--shm-dir", shm, "--memory", "shm", "--foreground")
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("loader log:\n%s", b)
		}
	})
	waitFor(t, "the loader's control socket", 60*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(s.root, "control.sock"))
		return err == nil
	})
	return s
}

// publish renames a copy of image m (1 or 2) into the spool (only a
// rename is picked up).
func (s *served) publish(t *testing.T, m int) {
	b, err := os.ReadFile(s.images[m-1])
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(s.dir, "next.shmkv")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.spool, "feat.shmkv")); err != nil {
		t.Fatal(err)
	}
}

func (s *served) attach(t *testing.T) *Cache {
	var c *Cache
	waitFor(t, "the first generation", 60*time.Second, func() bool {
		var err error
		c, err = Attach("feat", s.root)
		if err != nil && !errors.Is(err, ErrAgain) && !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("attach: %v", err)
		}
		return err == nil
	})
	return c
}

// segmentsMapped: this process's mappings of files in the shm directory.
func segmentsMapped(t *testing.T, shm string) int {
	return mapsWhere(t, func(file string) bool { return strings.HasPrefix(file, shm+"/") })
}

// mapsWhere: how many of this process's mappings (/proc/self/maps) are of
// a file whose name (" (deleted)" after one unlinked since) is, as
// file(name) says.
func mapsWhere(t *testing.T, file func(string) bool) int {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if i := strings.IndexByte(sc.Text(), '/'); i >= 0 && file(sc.Text()[i:]) {
			n++
		}
	}
	return n
}

// checkView reads random keys through v, holds the zero-copy slices while
// other goroutines refresh, and checks them again: all from v's generation.
func checkView(v *View, rng *rand.Rand) (checked int, wrong string) {
	gv, err := v.Get("gen")
	if err != nil {
		return 0, "gen: " + err.Error()
	}
	m, _ := gv.Int64()
	type held struct {
		i    int
		text []byte
		vec  []float32
	}
	var hs []held
	for n := 0; n < 20; n++ {
		i := rng.IntN(servedKeys)
		tv, err1 := v.Get("k_" + strconv.Itoa(i))
		vv, err2 := v.Get("vec_" + strconv.Itoa(i))
		if err1 != nil || err2 != nil {
			return checked, fmt.Sprintf("key %d: %v, %v", i, err1, err2)
		}
		text, _ := tv.TextBytes()
		vec, _ := vv.Float32s()
		hs = append(hs, held{i, text, vec})
	}
	time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond) // refreshes happen meanwhile
	for _, h := range hs {
		if string(h.text) != fmt.Sprintf("%d:%d", m, h.i) || len(h.vec) != 2 || h.vec[0] != float32(m) || h.vec[1] != float32(h.i) {
			return checked, fmt.Sprintf("generation %d (marker %d): key %d reads %q %v", v.Generation(), m, h.i, h.text, h.vec)
		}
		checked++
	}
	return checked, ""
}

func TestLoaderSwapsUnderViews(t *testing.T) {
	s := serve(t)
	s.publish(t, 1)
	c := s.attach(t)
	first := c.Generation()
	var stop atomic.Bool
	var checked atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for !stop.Load() {
				if _, err := c.Refresh(); err != nil && !errors.Is(err, ErrAgain) {
					errs <- "refresh: " + err.Error()
					return
				}
				if g == 3 { // the copying getters: each call one generation
					s, err := c.Text("k_7")
					if err != nil || (s != "1:7" && s != "2:7") {
						errs <- fmt.Sprintf("String: %q %v", s, err)
						return
					}
					checked.Add(1)
					continue
				}
				v, err := c.Pin()
				if err != nil {
					errs <- "pin: " + err.Error()
					return
				}
				n, wrong := checkView(v, rng)
				v.Release()
				if wrong != "" {
					errs <- wrong
					return
				}
				checked.Add(int64(n))
			}
		}(g)
	}
	const swaps = 1000
	for n := 1; n <= swaps; n++ {
		before := c.Generation()
		s.publish(t, 1+n%2)
		waitFor(t, fmt.Sprintf("swap %d", n), 60*time.Second, func() bool {
			if _, err := c.Refresh(); err != nil && !errors.Is(err, ErrAgain) {
				t.Fatalf("refresh: %v", err)
			}
			return c.Generation() > before || len(errs) > 0
		})
		if len(errs) > 0 {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if got := c.Generation() - first; got < swaps {
		t.Fatalf("followed %d generations, want %d", got, swaps)
	}
	t.Logf("%d swaps followed, %d values checked, 0 wrong", c.Generation()-first, checked.Load())
	v, _ := c.Pin()
	c.Close()
	if segmentsMapped(t, s.shm) != 1 {
		t.Fatalf("with one view left, %d segments mapped, want 1", segmentsMapped(t, s.shm))
	}
	if _, err := v.Get("k_1"); err != nil {
		t.Fatalf("a view of a closed cache: %v", err)
	}
	v.Release()
	if n := segmentsMapped(t, s.shm); n != 0 {
		t.Fatalf("after the last view, %d segments still mapped", n)
	}
}

// A dropped cache: Refresh says ErrStale (attach again) and keeps serving
// the generation it has; a pinned view keeps reading.
func TestLoaderDropIsStale(t *testing.T) {
	s := serve(t)
	s.publish(t, 2)
	c := s.attach(t)
	defer c.Close()
	v, err := c.Pin()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	shmctl := program(t, "SHMKV_SHMCTL", "shmctl/shmctl")
	if out, err := exec.Command(shmctl, "-r", s.root, "cache", "drop", "feat").CombinedOutput(); err != nil {
		t.Fatalf("shmctl cache drop: %v\n%s", err, out)
	}
	var err2 error
	waitFor(t, "ErrStale from Refresh", 60*time.Second, func() bool {
		_, err2 = c.Refresh()
		return err2 != nil
	})
	if !errors.Is(err2, ErrStale) || Class(err2) != "SHMKV_ESTALE" {
		t.Fatalf("refresh after a drop: %v", err2)
	}
	if got, err := c.Text("k_3"); err != nil || got != "2:3" {
		t.Fatalf("the old generation after the drop: %q %v", got, err)
	}
	if val, err := v.Get("k_4"); err != nil || string(val.Raw()) != "2:4" {
		t.Fatalf("a view after the drop: %v", err)
	}
	if _, err := Attach("feat", s.root); err == nil {
		t.Fatal("attach to a dropped cache succeeded")
	}
}
