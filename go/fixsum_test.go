package shmkv

import "github.com/zeebo/xxh3"

// fixSums forges b as anyone who can write an image can: bytes outside the
// sections zeroed, every section checksum and then the header checksum
// recomputed, where the header's numbers allow (else b is left as is).
// The sections are the three of an image, or four where section_count
// says 4 (a delta's, FORMAT.md §19).
func fixSums(b []byte) {
	if len(b) < headerBlock {
		return
	}
	n := sectionCount
	if le.Uint32(b[hdrSectionCount:]) == deltaSectionCount {
		n = deltaSectionCount
	}
	prev := uint64(headerStruct)
	for i := 0; i < n; i++ {
		d := b[192+32*i:]
		off, size := le.Uint64(d[8:]), le.Uint64(d[16:])
		if off < prev || off > uint64(len(b)) || size > uint64(len(b))-off {
			return
		}
		clear(b[prev:off])
		le.PutUint64(d[24:], xxh3.Hash(b[off:off+size]))
		prev = off + size
	}
	clear(b[prev:])
	le.PutUint64(b[hdrChecksum:], xxh3.Hash(b[:hdrChecksum]))
}
