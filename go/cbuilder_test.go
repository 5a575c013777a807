package shmkv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The C builder against this reader: `shmctl image build` of records of every type, inline and OUT, with and without
// an expiry; the image passes the deep open and every value reads back.
// And the other way: the test encoder's images pass the C reader's verify
// (`shmctl image verify`), so the encoder and the reader it tests are not
// one misreading of the specification shared by both.
func TestCBuilder(t *testing.T) {
	shmctl := program(t, "SHMKV_SHMCTL", "shmctl/shmctl")
	dir := t.TempDir()
	var in bytes.Buffer
	type want struct {
		typ     Type
		raw     []byte
		expires uint32
	}
	wants := map[string]want{}
	add := func(key, typ, value string, raw []byte, ty Type, expires uint32) {
		line := fmt.Sprintf(`{"key":%q,"type":%q,"value":%s`, key, typ, value)
		if expires != 0 {
			line += fmt.Sprintf(`,"expires":%d`, expires)
		}
		in.WriteString(line + "}\n")
		wants[key] = want{ty, raw, expires}
	}
	for i := 0; i < 3000; i++ {
		k := fmt.Sprintf("key_%d", i)
		switch i % 7 {
		case 0:
			add(k, "string", fmt.Sprintf("%q", "val_"+k), []byte("val_"+k), TypeString, 0)
		case 1:
			add(k, "i64", fmt.Sprint(-i), le.AppendUint64(nil, uint64(-int64(i))), TypeInt64, 0)
		case 2:
			add(k, "f64list", "[0.5, 2]", f64le(0.5, 2), TypeF64List, 0)
		case 3:
			add(k, "strlist", `["a","bc"]`, strlist("a", "bc"), TypeStrList, 0)
		case 4:
			add(k, "string", `"expiring"`, []byte("expiring"), TypeString, uint32(2_000_000_000+i))
		case 5: // long values and keys: OUT records
			v := strings.Repeat("v", 300+i%50)
			add(k+strings.Repeat("/", 260), "string", fmt.Sprintf("%q", v), []byte(v), TypeString, 0)
		case 6:
			add(k, "bool", "true", []byte{1}, TypeBool, uint32(1+i%2))
		}
	}
	src, img := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "v2.shmkv")
	if err := os.WriteFile(src, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(shmctl, "image", "build", "-o", img, "--name", "c", src).CombinedOutput(); err != nil {
		t.Fatalf("shmctl image build: %v\n%s", err, out)
	}
	f, err := OpenFile(img, Deep)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := f.Pin()
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if v.im.maxProbe == 0 || !v.im.expiry {
		t.Fatalf("max_probe %d expiry %v: the image tests too little", v.im.maxProbe, v.im.expiry)
	}
	withClock(t, 1_500_000_000)
	outs := 0
	for e, err := range v.Records() {
		if err != nil {
			t.Fatal(err)
		}
		k := string(e.Key)
		w, ok := wants[k]
		if !ok || e.Expires != w.expires || e.Value.Type() != w.typ || !bytes.Equal(e.Value.Raw(), w.raw) {
			t.Fatalf("iteration: %.30q: %s %x expires %d; want %+v", k, e.Value.Type(), e.Value.Raw(), e.Expires, w)
		}
		got, err := v.Get(k)
		if w.expires == 1 || w.expires == 2 {
			if err == nil {
				t.Fatalf("%q expired at %d, found", k, w.expires)
			}
			continue
		}
		if err != nil || !bytes.Equal(got.Raw(), w.raw) {
			t.Fatalf("get %.30q: %v", k, err)
		}
		delete(wants, k)
	}
	for k, w := range wants {
		if w.expires > 2 {
			t.Fatalf("%.30q not iterated", k)
		}
	}
	for b := uint64(0); b < v.im.bucketCount; b++ {
		bk := v.im.bucket(b)
		for i := uint64(0); i < uint64(bk[0]); i++ {
			if bk[recOff(bk, i)]&recOut != 0 {
				outs++
			}
		}
	}
	if outs == 0 {
		t.Fatal("no OUT record")
	}

	// the test encoder's images, verified by the C reader
	for _, o := range []enc2Opts{{buckets: 97}, {buckets: 61, seed: 7}, {buckets: 300, hashBits: 5}} {
		p := filepath.Join(dir, fmt.Sprintf("enc-%d.shmkv", o.buckets))
		if err := os.WriteFile(p, encodeV2(v2Records(), o), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(shmctl, "image", "verify", p).CombinedOutput(); err != nil {
			t.Errorf("shmctl image verify of the encoder's %d-bucket image: %v\n%s", o.buckets, err, out)
		}
	}
}

// The C reader agrees on TestDirTagLow9Bits' images: they pass its verify,
// each of the pair (tags equal in their low 9 bits) reads back its own
// value, and the absent third key of that home and low 9 bits misses.
func TestCDirTagLow9Bits(t *testing.T) {
	shmctl := program(t, "SHMKV_SHMCTL", "shmctl/shmctl")
	keys := low9Keys()
	for _, out := range []bool{false, true} {
		p := filepath.Join(t.TempDir(), "low9.shmkv")
		if err := os.WriteFile(p, encodeV2(low9Recs(keys, out), enc2Opts{buckets: low9Buckets}), 0o644); err != nil {
			t.Fatal(err)
		}
		if o, err := exec.Command(shmctl, "image", "verify", p).CombinedOutput(); err != nil {
			t.Fatalf("out=%v: shmctl image verify: %v\n%s", out, err, o)
		}
		for i, want := range []string{"zero", "one"} {
			o, err := exec.Command(shmctl, "image", "get", p, keys[i]).CombinedOutput()
			if err != nil || strings.TrimSpace(string(o)) != want {
				t.Fatalf("out=%v: shmctl image get %q: %v, %q; want %q", out, keys[i], err, o, want)
			}
		}
		if o, err := exec.Command(shmctl, "image", "get", p, keys[2]).CombinedOutput(); err == nil || !bytes.Contains(o, []byte("key not found")) {
			t.Fatalf("out=%v: shmctl image get %q (absent): %v, %q; want \"key not found\"", out, keys[2], err, o)
		}
	}
}
