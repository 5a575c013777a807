package shmkv

import (
	"bytes"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The control segment of lib/PROTOCOL.md: opening it, and the reader's side
// of its seqcount (the loader's side is shmkv_ctl_publish() in
// lib/shmkv/ctl.h, called by loader/ctl.c).
//
// Go's sync/atomic operations are sequentially consistent (the Go memory
// model, "Atomic values"), which is at least the acquire the protocol names
// for every reader load; on x86-64 and arm64 they compile to the same plain
// (x86) or ldar (arm64) loads as C's memory_order_acquire.

const (
	ctlSize        = 4096
	ctlWords       = (128 + ctlMaxSegments*256) / 8 // the 2176 bytes a snapshot copies
	ctlMaxSegments = 8
	ctlPathMax     = 224
	ctlRetired     = 1
	ctlLayoutHash  = 0x4b43ad88b167e31c // protocol 1: XXH3-64 of SHMKV_CTL_LAYOUT_DESC (lib/shmkv/protocol.h)
	ctlLayoutHash2 = 0x15a70b2227f150fa // protocol 2: of SHMKV_CTL_LAYOUT_DESC_V2
	ctlSegHugetlb  = 1                  // segments[].flags: a hugetlbfs file
	ctlSegOverlay  = 2                  // protocol 2: a copy of an overlay (the lower one, or with ctlSegTop the top one), else of the base
	ctlSegTop      = 4                  // protocol 2, with ctlSegOverlay only: a copy of the top overlay
	ctlSeqSpins    = 1 << 16            // attach: a seq odd this long is a dead loader's
	ctlRefreshPass = 64                 // refresh: bounded, never waits long

	ctlOffSeq = 24 / 8 // word indexes
	ctlOffGen = 32 / 8
)

var ctlMagic = []byte("SHMKVCTL")

// ctlSegment is one published copy of an image (PROTOCOL.md, segments[]):
// of the generation's base, or (protocol 2, ctlSegOverlay) of its lower
// overlay, or (ctlSegOverlay|ctlSegTop) of its top overlay.
type ctlSegment struct {
	node     int
	flags    uint32
	size     uint64
	mapSize  uint64
	pageSize uint64
	path     string
}

// ctlSnap is a consistent copy of the control segment's fields.
type ctlSnap struct {
	seq, gen uint64
	flags    uint32
	segs     []ctlSegment
}

// ctlFile is an open, mapped control segment.
type ctlFile struct {
	fd      int
	mem     []byte
	uid     uint32
	version uint32 // 1 or 2: written once, before the file got its name
	word    *[ctlWords]uint64
}

// openCtl opens path as a control segment: PROTOCOL.md's "Attach" checks
// (O_NOFOLLOW|O_NONBLOCK; a regular file of at least 4096 bytes, written by
// neither group nor others; magic, protocol version 1 or 2, size, the
// version's layout hash).
func openCtl(path string) (*ctlFile, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shmkv: control segment %s: %w", path, err)
	}
	c := &ctlFile{fd: fd}
	if err := c.check(path); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *ctlFile) check(path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(c.fd, &st); err != nil {
		return fmt.Errorf("shmkv: control segment %s: %w", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return errf(ErrProto, "%s is not a regular file", path)
	case st.Size < ctlSize:
		return errf(ErrProto, "%s: %d bytes, a control segment has 4096", path, st.Size)
	case st.Mode&0o022 != 0:
		return errf(ErrProto, "%s: mode %#o, writable by group or others", path, st.Mode&0o777)
	}
	c.uid = st.Uid
	mem, err := unix.Mmap(c.fd, 0, ctlSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("shmkv: mmap %s: %w", path, err)
	}
	c.mem = mem
	c.word = (*[ctlWords]uint64)(unsafe.Pointer(&mem[0]))
	c.version, err = checkCtlHeader(mem, path)
	return err
}

// ctlLayoutHashOf is the layout hash of a protocol version this reader
// speaks, else 0.
func ctlLayoutHashOf(version uint32) uint64 {
	switch version {
	case 1:
		return ctlLayoutHash
	case 2:
		return ctlLayoutHash2
	}
	return 0
}

// checkCtlHeader: magic, protocol version (1 or 2), size and the version's
// layout hash; the version. These words never change after the loader
// creates the file (a temporary file and a rename): plain reads.
func checkCtlHeader(mem []byte, path string) (uint32, error) {
	v := le.Uint32(mem[8:])
	switch {
	case !bytes.Equal(mem[:8], ctlMagic):
		return 0, errf(ErrProto, "%s: magic %q, not %q", path, mem[:8], ctlMagic)
	case ctlLayoutHashOf(v) == 0:
		return 0, errf(ErrProto, "%s: protocol version %d; this reader speaks versions 1 and 2", path, v)
	case le.Uint32(mem[12:]) != ctlSize:
		return 0, errf(ErrProto, "%s: ctl_size %d, not 4096", path, le.Uint32(mem[12:]))
	case le.Uint64(mem[16:]) != ctlLayoutHashOf(v):
		return 0, errf(ErrProto, "%s: layout hash %#016x; protocol %d has %#016x", path, le.Uint64(mem[16:]), v, ctlLayoutHashOf(v))
	}
	return v, nil
}

func (c *ctlFile) close() {
	if c.mem != nil {
		_ = unix.Munmap(c.mem)
		c.mem, c.word = nil, nil
	}
	_ = unix.Close(c.fd)
}

// stale: the file was removed, renamed over or truncated (PROTOCOL.md,
// "Stale handles"); checked before every read of the mapping.
func (c *ctlFile) stale() (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstat(c.fd, &st); err != nil {
		return false, fmt.Errorf("shmkv: fstat of the control segment: %w", err)
	}
	return st.Nlink == 0 || st.Size < ctlSize, nil
}

// seq and generation, as refresh's first loads.
func (c *ctlFile) seq() uint64 {
	return atomic.LoadUint64(&c.word[ctlOffSeq]) // pairs with shmkv_ctl_publish()'s final store_release(seq, s + 2) (lib/shmkv/ctl.h)
}

func (c *ctlFile) generation() uint64 {
	return atomic.LoadUint64(&c.word[ctlOffGen]) // pairs with shmkv_ctl_publish()'s store_release(generation, g) (lib/shmkv/ctl.h)
}

// snapshot is PROTOCOL.md's reader loop (the Linux vDSO seqcount): at most
// passes tries while seq is odd or moves; ErrAgain if it never settles.
func (c *ctlFile) snapshot(passes int) (ctlSnap, error) {
	var w [ctlWords]uint64
	for i := 0; i < passes; i++ {
		s1 := atomic.LoadUint64(&c.word[ctlOffSeq]) // pairs with shmkv_ctl_publish()'s final store_release(seq, s + 2) (lib/shmkv/ctl.h)
		if s1&1 != 0 {
			runtime.Gosched()
			continue
		}
		for j := range w {
			w[j] = atomic.LoadUint64(&c.word[j]) // pairs with shmkv_ctl_publish()'s store_release of word j: a word of a newer section brings its odd seq
		}
		if atomic.LoadUint64(&c.word[ctlOffSeq]) != s1 { // the protocol's load_relaxed(seq); seq-cst in Go
			continue
		}
		return decodeSnap(&w, s1)
	}
	return ctlSnap{}, errf(ErrAgain, "the control segment's seq stayed odd or kept moving for %d passes (a publish in progress, or a dead loader's)", passes)
}

// decodeSnap reads the private copy; every path is terminated here.
func decodeSnap(w *[ctlWords]uint64, seq uint64) (ctlSnap, error) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), ctlWords*8)
	s := ctlSnap{seq: seq, gen: le.Uint64(b[32:]), flags: le.Uint32(b[44:])}
	n := le.Uint32(b[40:])
	if n > ctlMaxSegments {
		return ctlSnap{}, errf(ErrProto, "segment_count %d is over 8", n)
	}
	for i := uint32(0); i < n; i++ {
		d := b[128+256*i : 128+256*(i+1)]
		p := d[32 : 32+ctlPathMax]
		if k := bytes.IndexByte(p, 0); k >= 0 {
			p = p[:k]
		} else {
			p = p[:ctlPathMax-1]
		}
		s.segs = append(s.segs, ctlSegment{
			node: int(int32(le.Uint32(d))), flags: le.Uint32(d[4:]),
			size: le.Uint64(d[8:]), mapSize: le.Uint64(d[16:]), pageSize: le.Uint64(d[24:]), path: string(p),
		})
	}
	return s, nil
}

// roles splits a snapshot of a control segment of protocol version into
// its base copies, its lower overlay's copies and its top overlay's, each
// in order (PROTOCOL.md, "Protocol 2"): a flag the version does not define
// (OVERLAY or TOP under protocol 1 included), TOP without OVERLAY, overlay
// copies without a base copy, or top copies without a lower copy, is
// ErrProto. Protocol 1 has base copies only.
func (s ctlSnap) roles(version uint32) (bases, lowers, tops []ctlSegment, err error) {
	known, names := uint32(ctlSegHugetlb), "1 (hugetlb)"
	if version == 2 {
		known, names = ctlSegHugetlb|ctlSegOverlay|ctlSegTop, "1 (hugetlb), 2 (overlay) and 4 (top, with overlay)"
	}
	for i, seg := range s.segs {
		switch {
		case seg.flags&^known != 0:
			return nil, nil, nil, errf(ErrProto, "control segment (protocol %d), generation %d: segment %d (%s) has flags %#x; protocol %d defines %s",
				version, s.gen, i, seg.path, seg.flags, version, names)
		case seg.flags&ctlSegTop != 0 && seg.flags&ctlSegOverlay == 0:
			return nil, nil, nil, errf(ErrProto, "control segment, generation %d: segment %d (%s) has the TOP flag without OVERLAY (flags %#x)",
				s.gen, i, seg.path, seg.flags)
		case seg.flags&ctlSegTop != 0:
			tops = append(tops, seg)
		case seg.flags&ctlSegOverlay != 0:
			lowers = append(lowers, seg)
		default:
			bases = append(bases, seg)
		}
	}
	switch {
	case len(lowers)+len(tops) > 0 && len(bases) == 0:
		return nil, nil, nil, errf(ErrProto, "control segment, generation %d: %d overlay copies and no base copy", s.gen, len(lowers)+len(tops))
	case len(tops) > 0 && len(lowers) == 0:
		return nil, nil, nil, errf(ErrProto, "control segment, generation %d: %d top overlay copies and no lower overlay copy (one overlay is published as the lower)", s.gen, len(tops))
	}
	return bases, lowers, tops, nil
}

// pickOverlay is the copy of an overlay (the lower's or the top's copies)
// read with a base copy of node: the one of that node, else the first;
// nil without copies.
func pickOverlay(overlays []ctlSegment, node int) *ctlSegment {
	for i := range overlays {
		if overlays[i].node == node {
			return &overlays[i]
		}
	}
	if len(overlays) == 0 {
		return nil
	}
	return &overlays[0]
}
