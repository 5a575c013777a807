package shmkv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestDamageSweepMatchesC: 640 damaged images (one flipped bit each, in
// the header, the index or the entries and values of eight vectors; half
// of them forged, every checksum recomputed) get the same verdict from
// this reader's deep open as from the C reader's full check (`shmctl image
// verify`), image by image.
func TestDamageSweepMatchesC(t *testing.T) {
	shmctl := program(t, "SHMKV_SHMCTL", "shmctl/shmctl")
	files := map[string]string{}
	for _, v := range loadManifest(t).Vectors {
		if v.Format == formatVersion {
			files[v.Name] = v.File
		}
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(24, 3))
	bases := []string{"base", "types", "displaced", "shared", "long_keys", "expiry", "empty", "count_17"}
	cases, accepted := 0, 0
	for n := 0; n < 640; n++ {
		base := bases[n%len(bases)]
		if files[base] == "" {
			t.Fatalf("no vector %q", base)
		}
		b, err := os.ReadFile(filepath.Join(vectorsDir, files[base]))
		if err != nil {
			t.Fatal(err)
		}
		var pos int
		switch secs := sectionsOf(b); n % 3 {
		case 0:
			pos = rng.IntN(headerStruct)
		default:
			s := secs[(n/3)%3]
			if s.size == 0 {
				s = secs[0]
			}
			pos = int(s.off) + rng.IntN(int(s.size))
		}
		b[pos] ^= 1 << rng.IntN(8)
		forged := n%2 == 1
		if forged {
			fixSums(b)
		}
		path := filepath.Join(dir, fmt.Sprintf("%03d-%s-%d.img", n, filepath.Base(base), pos))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		img, goErr := OpenFile(path, Deep)
		if goErr == nil {
			img.Close()
			accepted++
		}
		out, cErr := exec.Command(shmctl, "image", "verify", path).CombinedOutput()
		var exit *exec.ExitError
		if cErr != nil && !errors.As(cErr, &exit) {
			t.Fatal(cErr)
		}
		if (goErr == nil) != (cErr == nil) {
			t.Errorf("%s (forged %v): Go says %v; C says %v: %s", filepath.Base(path), forged, goErr, cErr, out)
		}
		cases++
	}
	t.Logf("%d damaged images, %d accepted by both readers, the rest refused by both", cases, accepted)
	if accepted == 0 || accepted == cases {
		t.Fatalf("%d of %d accepted: the sweep tells nothing", accepted, cases)
	}
}

// sectionsOf reads the three section descriptors as they are.
func sectionsOf(b []byte) [3]section {
	var s [3]section
	for i := range s {
		d := b[192+32*i:]
		s[i] = section{le.Uint64(d[8:]), le.Uint64(d[16:])}
	}
	return s
}
