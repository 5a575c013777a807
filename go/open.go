package shmkv

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// OpenFlags choose how much of an image OpenFile and OpenBytes check, and
// how OpenFile maps it.
type OpenFlags int

const (
	// NoVerify skips FORMAT.md §12's checks 11 and 12 (zero bytes outside
	// the sections, section checksums): opening is then O(1). Lookups stay
	// inside the image either way (§12.1).
	NoVerify OpenFlags = 1 << iota
	// Deep adds the full structural check of §13 (the C reader's
	// SHMKV_OPEN_DEEP): an image that passes never makes a lookup fail with
	// ErrCorrupt.
	Deep
	// Populate prefaults the whole mapping at open, after the huge page
	// advice every open gives (MADV_HUGEPAGE, then MADV_POPULATE_READ; the
	// C reader's SHMKV_OPEN_POPULATE).
	Populate
	// HugePages backs the image with huge pages at open where the kernel
	// can (MADV_COLLAPSE, Linux 6.1+: files on tmpfs such as /dev/shm, and
	// read-only files where the kernel has CONFIG_READ_ONLY_THP_FOR_FS); it
	// copies the file's pages once, for every user of the file. Elsewhere the
	// image stays on 4 KiB pages. Fewer TLB misses: faster hits on big images.
	HugePages
)

// Image is an image file, mapped read-only, or a base read through a
// delta (WithDelta) or two (WithDeltas). Its copying getters (Bytes, Text, Int64, ... promoted
// from its source) and Pin may be used from any number of goroutines;
// Close unmaps once no View holds the mapping.
type Image struct {
	source
	name     string
	checksum uint64
	delta    bool // a delta (FORMAT.md §19), read alone
	dl       DeltaID
}

func newImage(mem []byte, im *image) *Image {
	img := &Image{name: im.name, checksum: im.checksum, delta: im.delta, dl: im.dl}
	img.cur.Store(newMapping(mem, im, 0, -1))
	return img
}

// OpenFile maps the image file at path and checks it (FORMAT.md §12, all
// checks unless NoVerify; §13 too with Deep). A delta image (§19) opens
// alike, with §19.4's checks: read alone, its upserts are found and a
// tombstone's key is absent; Image.WithDelta reads a base through it.
func OpenFile(path string, flags OpenFlags) (*Image, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shmkv: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("shmkv: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("shmkv: %s: not a regular file (%s): %w", path, st.Mode().Type(), os.ErrInvalid)
	}
	if st.Size() < headerBlock { // checks 1 and 2 on the bytes there are
		head := make([]byte, min(st.Size(), 8))
		if _, err := io.ReadFull(f, head); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) { // it shrank meanwhile
				err = errf(ErrTruncated, "reading its first %d bytes: %v", len(head), err)
			}
			return nil, fmt.Errorf("shmkv: %s: %w", path, err)
		}
		if _, err := checkImage(head, false); !errors.Is(err, ErrTruncated) {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return nil, fmt.Errorf("%s: %w", path, errf(ErrTruncated, "%d bytes, shorter than the 4096-byte header block", st.Size()))
	}
	fd := int(f.Fd())
	mem, err := mapFile(fd, uint64(st.Size()), false) // populated after the advice
	if err != nil {
		return nil, fmt.Errorf("shmkv: mmap %s: %w", path, err)
	}
	advise(mem)
	if flags&HugePages != 0 {
		collapse(mem)
	}
	if flags&Populate != 0 {
		mem = populate(fd, mem)
	}
	im, err := checkOpen(mem, flags)
	if err != nil {
		unmapFile(mem)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return newImage(mem, im), nil
}

// OpenBytes reads an image held in memory (b must stay unchanged while the
// Image or a View of it is in use; its list getters need b 8-aligned). It
// applies the same checks as OpenFile.
func OpenBytes(b []byte, flags OpenFlags) (*Image, error) {
	im, err := checkOpen(b, flags)
	if err != nil {
		return nil, err
	}
	return newImage(nil, im), nil
}

func checkOpen(b []byte, flags OpenFlags) (*image, error) {
	im, err := checkImage(b, flags&NoVerify == 0)
	if err == nil && flags&Deep != 0 {
		err = im.verify()
	}
	return im, err
}

// Name is the image's name (its header's name field).
func (i *Image) Name() string { return i.name }

// Close drops the Image's reference: the file is unmapped now, or when the
// last View is released. Getters and Pin return ErrClosed afterwards.
func (i *Image) Close() error {
	i.swap(nil)
	return nil
}
