package shmkv

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// The shared control-segment vectors (tests/vectors/README.md,
// "Control-segment vectors"): each case's files copied into a private
// directory with the modes its manifest names, the @DIR@ paths of its
// control segment substituted, then AttachWith (with and without Verify):
// the verdict, and for an accepted case its generation and listed lookups.

type ctlManifest struct {
	Format          string    `json:"format"`
	ManifestVersion int       `json:"manifest_version"`
	DirToken        string    `json:"dir_token"`
	Cases           []ctlCase `json:"cases"`
}

type ctlCase struct {
	Name    string `json:"name"`
	About   string `json:"about"`
	Ctl     string `json:"ctl"`
	CtlMode string `json:"ctl_mode"`
	Files   []struct {
		Name string `json:"name"`
		From string `json:"from"`
		Mode string `json:"mode"`
	} `json:"files"`
	Attach     string `json:"attach"`
	Generation uint64 `json:"generation"`
	Gets       []struct {
		KeyHex string `json:"key_hex"`
		Result string `json:"result"`
		Type   string `json:"type"`
		Value  string `json:"value"`
	} `json:"gets"`
}

// ctlClasses: the manifest's error classes, as this package reports them.
var ctlClasses = map[string]error{
	"SHMKV_EPROTO": ErrProto, "SHMKV_ESTALE": ErrStale, "SHMKV_EBASE": ErrBase,
	"SHMKV_ETRUNCATED": ErrTruncated, "SHMKV_EMAGIC": ErrMagic, "SHMKV_ENOTFOUND": ErrNotFound,
	"EAGAIN": ErrAgain, "EPERM": unix.EPERM, "ENOENT": os.ErrNotExist,
}

// ctlClassOf names the one class err belongs to ("OK" for nil); else says
// which classes (none, or several) it matches.
func ctlClassOf(err error) string {
	if err == nil {
		return "OK"
	}
	var hit []string
	for name, e := range ctlClasses {
		if errors.Is(err, e) {
			hit = append(hit, name)
		}
	}
	if len(hit) == 1 {
		return hit[0]
	}
	sort.Strings(hit)
	return fmt.Sprintf("%q (classes %v)", err, hit)
}

// substituteCtl applies the substitution rule: a path field that starts
// with token takes dir in its place, NUL-padded to 224 bytes.
func substituteCtl(ctl []byte, token, dir string) error {
	for i := 0; i < 8 && len(ctl) >= 128+256*(i+1); i++ {
		f := ctl[128+256*i+32 : 128+256*i+32+224]
		if !bytes.HasPrefix(f, []byte(token)) {
			continue
		}
		rest := f[len(token):]
		if k := bytes.IndexByte(rest, 0); k >= 0 {
			rest = rest[:k]
		}
		p := dir + string(rest)
		if len(p) >= len(f) {
			return fmt.Errorf("path %s does not fit 224 bytes with its NUL", p)
		}
		clear(f)
		copy(f, p)
	}
	return nil
}

func writeMode(t *testing.T, path string, b []byte, mode string) {
	t.Helper()
	m, err := strconv.ParseUint(mode, 8, 32)
	if err != nil {
		t.Fatalf("mode %q: %v", mode, err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, os.FileMode(m)); err != nil {
		t.Fatal(err)
	}
}

func TestCtlVectors(t *testing.T) {
	dir := filepath.Join(vectorsDir, "ctl")
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m ctlManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.Format != "shmkv-ctl-vectors" || m.ManifestVersion != 1 || m.DirToken == "" || len(m.Cases) == 0 {
		t.Fatalf("manifest: format %q version %d token %q, %d cases", m.Format, m.ManifestVersion, m.DirToken, len(m.Cases))
	}
	for _, c := range m.Cases {
		t.Run(c.Name, func(t *testing.T) {
			root := t.TempDir() // mode 0700
			for _, f := range c.Files {
				b, err := os.ReadFile(filepath.Join(vectorsDir, f.From))
				if err != nil {
					t.Fatal(err)
				}
				writeMode(t, filepath.Join(root, f.Name), b, f.Mode)
			}
			ctl, err := os.ReadFile(filepath.Join(dir, c.Ctl))
			if err != nil {
				t.Fatal(err)
			}
			if err := substituteCtl(ctl, m.DirToken, root); err != nil {
				t.Fatal(err)
			}
			writeMode(t, filepath.Join(root, c.Name+".ctl"), ctl, c.CtlMode)
			for _, verify := range []bool{false, true} {
				cache, err := AttachWith(c.Name, AttachOptions{Root: root, Verify: verify})
				if got := ctlClassOf(err); got != c.Attach {
					t.Errorf("verify %v: attach: %s, want %s (%s)", verify, got, c.Attach, c.About)
				}
				if err != nil {
					continue
				}
				if g := cache.Generation(); g != c.Generation {
					t.Errorf("verify %v: generation %d, want %d", verify, g, c.Generation)
				}
				for _, g := range c.Gets {
					key, err := hex.DecodeString(g.KeyHex)
					if err != nil {
						t.Fatal(err)
					}
					var got string
					switch g.Type {
					case "i64":
						var x int64
						x, err = cache.Int64(string(key))
						got = strconv.FormatInt(x, 10)
					default:
						got, err = cache.Text(string(key))
					}
					if cl := ctlClassOf(err); cl != g.Result {
						t.Errorf("verify %v: get %q: %s, want %s", verify, key, cl, g.Result)
					} else if err == nil && got != g.Value {
						t.Errorf("verify %v: get %q: %q, want %q", verify, key, got, g.Value)
					}
				}
				if err := cache.Close(); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
