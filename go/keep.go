package shmkv

import (
	"bytes"

	"golang.org/x/sys/unix"
)

// What a refresh keeps (lib/PROTOCOL.md, "Protocol 2": "A refresh keeps
// what the new generation shares"): when the new generation's chosen base
// copy is the same image as the current generation's base, the base's
// mapping stays, and so does each overlay's that is the same image at the
// same level; only the others are mapped and checked as at attach. A
// Cache's generation is a mapping of no memory that holds one reference to
// each of its levels (through), so a kept level is one reference more, and
// a level is unmapped when no generation holds it: neither the current one
// nor one a View pins.

// segID is what a level of a cache's generation was mapped from: its
// control segment entry and its file's device and inode.
type segID struct {
	seg      ctlSegment
	dev, ino uint64
}

// level is level i of generation g (0 its base, 1 its lower overlay, 2
// its top overlay: through's order); nil where g has none, or g is nil.
func level(g *mapping, i int) *mapping {
	if g == nil || i >= len(g.held) {
		return nil
	}
	return g.held[i]
}

// sameImage: level m is the image entry seg names, whose file is open as
// fd (st its fstat): the same entry (path, sizes, page size, node), the
// same file (m's mapping keeps its inode alive, so no other file has its
// number meanwhile) and the same 4096-byte header, which holds every
// section's checksum.
func sameImage(m *mapping, seg ctlSegment, fd int, st *unix.Stat_t) bool {
	id := m.id
	if id == nil || id.seg.path != seg.path || id.seg.size != seg.size || id.seg.mapSize != seg.mapSize ||
		id.seg.pageSize != seg.pageSize || id.seg.node != seg.node ||
		id.dev != uint64(st.Dev) || id.ino != uint64(st.Ino) {
		return false
	}
	var h [headerBlock]byte
	n, err := unix.Pread(fd, h[:], 0)
	return err == nil && n == len(h) && bytes.Equal(h[:], m.mem[:headerBlock])
}
