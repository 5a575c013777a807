package shmkv

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestClass: every kind of error the package returns has a class: each
// sentinel its C name, and the errors of the operating system (a missing
// file, a directory, a FIFO, a path through a file, a permission, a
// symbolic link where none may be, a segment of another owner, a file that
// will not map) the name of their errno, with errors.Is working on the
// io/fs sentinels too. Only a foreign error is UNKNOWN.
func TestClass(t *testing.T) {
	for _, c := range classes {
		wrapped := fmt.Errorf("context: %w", errf(c.err, "detail"))
		if Class(c.err) != c.name || Class(wrapped) != c.name {
			t.Errorf("%v: %s, wrapped %s; want %s", c.err, Class(c.err), Class(wrapped), c.name)
		}
	}
	if Class(nil) != "OK" || Class(errors.New("not ours")) != "UNKNOWN" {
		t.Errorf("nil: %s; a foreign error: %s", Class(nil), Class(errors.New("not ours")))
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("not an image"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	type kind struct {
		what  string
		err   error
		class string
		is    error // and errors.Is(err, is), where not nil
	}
	kinds := []kind{}
	open := func(what, path, class string, is error) {
		_, err := OpenFile(path, 0)
		kinds = append(kinds, kind{what, err, class, is})
	}
	open("a missing file", filepath.Join(dir, "missing"), "ENOENT", fs.ErrNotExist)
	open("a directory", dir, "EINVAL", fs.ErrInvalid)
	open("a FIFO", fifo, "EINVAL", fs.ErrInvalid)
	open("a path through a file", filepath.Join(file, "x"), "ENOTDIR", nil)
	open("a file too long a name", filepath.Join(dir, strings.Repeat("n", 300)), "ENAMETOOLONG", nil)
	open("not an image", file, "SHMKV_EMAGIC", ErrMagic)
	if os.Geteuid() != 0 { // root reads a file of mode 0 all the same
		locked := filepath.Join(dir, "locked")
		if err := os.WriteFile(locked, nil, 0); err != nil {
			t.Fatal(err)
		}
		open("a file without read permission", locked, "EACCES", fs.ErrPermission)
	}
	// a regular file that will not map: sysfs attributes have no mmap
	if st, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err == nil && st.Mode().IsRegular() {
		_, err := OpenFile("/sys/kernel/mm/transparent_hugepage/enabled", 0)
		var errno syscall.Errno
		if !errors.As(err, &errno) {
			t.Errorf("a sysfs file: %v, not an errno", err)
		} else {
			kinds = append(kinds, kind{"a file that will not map", err, unix.ErrnoName(errno), nil})
		}
	}

	_, err := Attach("no/slash", dir)
	kinds = append(kinds, kind{"a bad cache name", err, "EINVAL", fs.ErrInvalid})
	_, err = Attach("absent", dir)
	kinds = append(kinds, kind{"a missing cache", err, "ENOENT", fs.ErrNotExist})
	c := newCtl(t, 2, 1, nil)
	if err := os.Symlink(c.path, filepath.Join(c.dir, "link.ctl")); err != nil {
		t.Fatal(err)
	}
	_, err = Attach("link", c.dir)
	kinds = append(kinds, kind{"a control segment behind a symbolic link", err, "ELOOP", nil})
	seg := c.segment("a", -1)
	if err := os.Chmod(seg.path, 0o666); err != nil {
		t.Fatal(err)
	}
	c.publish(2, 1, []ctlSegment{seg})
	_, err = attachCtl(c, nil)
	kinds = append(kinds, kind{"a segment others can write", err, "EPERM", fs.ErrPermission})
	if err := os.Chmod(c.path, 0o666); err != nil {
		t.Fatal(err)
	}
	_, err = attachCtl(c, nil)
	kinds = append(kinds, kind{"a control segment others can write", err, "SHMKV_EPROTO", ErrProto})

	img := openBase(t)
	v, _ := img.Pin()
	img.Close()
	_, err = img.Text("s")
	kinds = append(kinds, kind{"a closed image", err, "ECLOSED", ErrClosed})
	v.Release()
	_, err = v.Get("s")
	kinds = append(kinds, kind{"a released view", err, "ECLOSED", ErrClosed})

	for _, k := range kinds {
		if k.err == nil {
			t.Errorf("%s: no error", k.what)
			continue
		}
		t.Logf("%s: %s", k.what, Class(k.err))
		if got := Class(k.err); got != k.class || got == "UNKNOWN" {
			t.Errorf("%s: class %s (%v), want %s", k.what, got, k.err, k.class)
		}
		if k.is != nil && !errors.Is(k.err, k.is) {
			t.Errorf("%s: %v is not %v", k.what, k.err, k.is)
		}
	}
}
