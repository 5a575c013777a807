package shmkv

import (
	"bytes"
	"encoding/binary"

	"github.com/zeebo/xxh3"
)

// The header block and the section table (lib/FORMAT.md §3, §4, §12). This
// file is shared by every format version: what a version changes is its
// index and lookup (index_v1.go, index_v2.go).

const (
	headerBlock  = 4096
	headerStruct = 512
	headerSumOff = 504
	maxFileSize  = uint64(1) << 43
	sectionCount = 3
	kindIndex    = 1
	kindEntries  = 2
	kindValues   = 3
	hdrFlagDedup = 1

	layoutHashV1 = 0x52171befdcf1d7ee
)

// What differs between the format versions in the header and the section
// table (FORMAT.md §17.2; V2's index is index_v2.go).
type versionRules struct {
	layoutHash  uint64
	knownFlags  uint64
	bucketBytes uint64 // bucket_slots must say 8 (v1) or 128 (v2)
	slots       uint32
	perBucket   uint64 // entry_count is at most bucket_count * perBucket
}

var versions = [3]versionRules{
	1: {layoutHashV1, hdrFlagDedup, 64, 8, 8},
	2: {layoutHashV2, hdrFlagDedup | hdrFlagExpiry, v2Bucket, v2Bucket, v2MaxRecords},
}

var magic = []byte("SHMKVIMG")

var le = binary.LittleEndian

type section struct{ off, size uint64 }

func (s section) end() uint64 { return s.off + s.size }

// image is a checked image: b is exactly the image's bytes (file_size long),
// and every number below has passed the checks of FORMAT.md §12.
type image struct {
	b           []byte
	version     uint32
	entryCount  uint64
	bucketCount uint64
	hashBits    uint32
	seed        uint64
	maxProbe    uint64
	flags       uint64
	dedupRefs   uint64
	name        string
	sec         [sectionCount]section
	entOff      uint64 // ENTRIES [entOff, entEnd)
	entEnd      uint64
	valOff      uint64 // VALUES [valOff, valEnd)
	valEnd      uint64
	index       []byte // the INDEX section
	rules       *versionRules
	expiry      bool // v2: header flag EXPIRY (the clock is read only if set)
}

// checkImage applies FORMAT.md §12's checks, in its order, to b (the image's
// bytes as the reader knows them: the file, or a segment's recorded size).
// sums adds checks 11 and 12 (zero padding outside sections, section
// checksums); the header checksum is always checked.
func checkImage(b []byte, sums bool) (*image, error) {
	size := uint64(len(b))
	n := min(len(b), 8)
	if !bytes.Equal(b[:n], magic[:n]) { // 1
		return nil, errf(ErrMagic, "the first %d bytes are %q, not %q", n, b[:n], magic[:n])
	}
	if size < headerBlock { // 2
		return nil, errf(ErrTruncated, "%d bytes, shorter than the 4096-byte header block", size)
	}
	im := &image{b: b}
	im.version = le.Uint32(b[8:])
	if im.version != 1 && im.version != 2 { // 3
		return nil, errf(ErrVersion, "format_version %d; this reader reads 1 and 2", im.version)
	}
	im.rules = &versions[im.version]
	if lh := le.Uint64(b[16:]); lh != im.rules.layoutHash { // 4
		return nil, errf(ErrLayout, "layout_hash %#016x; format version %d has %#016x", lh, im.version, im.rules.layoutHash)
	}
	if got, want := le.Uint64(b[headerSumOff:]), xxh3.Hash(b[:headerSumOff]); got != want { // 5
		return nil, errf(ErrChecksum, "header checksum %#016x, the header's bytes [0, 504) hash to %#016x", got, want)
	}
	fileSize := le.Uint64(b[32:])
	if fileSize > size { // 6
		return nil, errf(ErrTruncated, "file_size %d, but the image has %d bytes", fileSize, size)
	}
	if fileSize < size { // 7
		return nil, errf(ErrCorrupt, "%d bytes after file_size %d", size-fileSize, fileSize)
	}
	if err := im.checkFields(fileSize); err != nil { // 8
		return nil, err
	}
	if err := im.checkSections(fileSize); err != nil { // 9, 10
		return nil, err
	}
	if sums {
		if err := im.checkPadding(); err != nil { // 11
			return nil, err
		}
		if err := im.checkSums(); err != nil { // 12
			return nil, err
		}
	}
	return im, nil
}

func (im *image) checkFields(fileSize uint64) error {
	b := im.b
	im.flags = le.Uint64(b[24:])
	im.entryCount = le.Uint64(b[40:])
	im.bucketCount = le.Uint64(b[48:])
	im.hashBits = le.Uint32(b[60:])
	im.seed = le.Uint64(b[64:])
	im.maxProbe = uint64(le.Uint32(b[72:]))
	im.dedupRefs = le.Uint64(b[112:])
	im.expiry = im.flags&hdrFlagExpiry != 0
	r := im.rules
	bad := func(format string, args ...any) error {
		return errf(ErrCorrupt, "header: "+format, args...)
	}
	switch {
	case le.Uint32(b[12:]) != headerBlock:
		return bad("header_size %d, not 4096", le.Uint32(b[12:]))
	case fileSize%headerBlock != 0:
		return bad("file_size %d is not a multiple of 4096", fileSize)
	case fileSize > maxFileSize:
		return bad("file_size %d is over 2^43", fileSize)
	case im.flags&^r.knownFlags != 0:
		return bad("unknown flags %#x", im.flags&^r.knownFlags)
	case le.Uint32(b[56:]) != r.slots:
		return bad("bucket_slots %d, not %d", le.Uint32(b[56:]), r.slots)
	case im.hashBits < 1 || im.hashBits > 64:
		return bad("hash_bits %d, not in 1..64", im.hashBits)
	case im.bucketCount < 1 || im.bucketCount > fileSize/r.bucketBytes:
		return bad("bucket_count %d, not in 1..file_size/%d (%d)", im.bucketCount, r.bucketBytes, fileSize/r.bucketBytes)
	case im.entryCount > r.perBucket*im.bucketCount:
		return bad("entry_count %d is over %d * bucket_count (%d)", im.entryCount, r.perBucket, r.perBucket*im.bucketCount)
	case im.maxProbe >= im.bucketCount:
		return bad("max_probe %d is not below bucket_count %d", im.maxProbe, im.bucketCount)
	case b[191] != 0:
		return bad("name (bytes 128..191) is not NUL-terminated")
	case le.Uint32(b[84:]) != 0:
		return bad("reserved0 is %#x, not 0", le.Uint32(b[84:]))
	case !allZero(b[448:504]):
		return bad("reserved (bytes 448..503) is not zero")
	case le.Uint32(b[76:]) != sectionCount:
		return bad("section_count %d, not 3", le.Uint32(b[76:]))
	}
	name := b[128:192]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	im.name = string(name)
	return nil
}

func (im *image) checkSections(fileSize uint64) error {
	prev := uint64(headerBlock)
	for i := 0; i < 8; i++ {
		d := im.b[192+32*i : 192+32*(i+1)]
		if i >= sectionCount {
			if !allZero(d) {
				return errf(ErrCorrupt, "section descriptor %d is unused but not zero", i)
			}
			continue
		}
		kind, flags := le.Uint32(d), le.Uint32(d[4:])
		s := section{le.Uint64(d[8:]), le.Uint64(d[16:])}
		switch {
		case kind != uint32(i+1):
			return errf(ErrCorrupt, "section %d: kind %d, not %d", i, kind, i+1)
		case flags != 0:
			return errf(ErrCorrupt, "section %d: flags %#x, not 0", i, flags)
		case s.off%64 != 0:
			return errf(ErrCorrupt, "section %d: offset %d is not a multiple of 64", i, s.off)
		case s.off < prev:
			return errf(ErrCorrupt, "section %d: offset %d is before %d (the header block or the previous section)", i, s.off, prev)
		case s.size > fileSize || s.off > fileSize-s.size:
			return errf(ErrCorrupt, "section %d: [%d, +%d) ends past file_size %d", i, s.off, s.size, fileSize)
		}
		im.sec[i] = s
		prev = s.end()
	}
	if bb := im.rules.bucketBytes; im.sec[0].size != im.bucketCount*bb {
		return errf(ErrCorrupt, "INDEX: size %d, not bucket_count * %d = %d", im.sec[0].size, bb, im.bucketCount*bb)
	}
	if im.version == 2 && im.sec[0].off%v2Bucket != 0 {
		return errf(ErrCorrupt, "INDEX: offset %d is not a multiple of 128", im.sec[0].off)
	}
	// v2: inline records have no entry in ENTRIES
	if im.version == 1 && im.entryCount > 0 && im.sec[1].size < 8*im.entryCount {
		return errf(ErrCorrupt, "ENTRIES: size %d is below 8 * entry_count = %d", im.sec[1].size, 8*im.entryCount)
	}
	im.index = im.b[im.sec[0].off:im.sec[0].end():im.sec[0].end()] // capped: nothing reads past INDEX through it
	im.entOff, im.entEnd = im.sec[1].off, im.sec[1].end()
	im.valOff, im.valEnd = im.sec[2].off, im.sec[2].end()
	return nil
}

// checkPadding: every byte outside the header structure and the sections is
// zero (check 11).
func (im *image) checkPadding() error {
	from := uint64(headerStruct)
	for i := 0; i <= sectionCount; i++ {
		to := uint64(len(im.b))
		if i < sectionCount {
			to = im.sec[i].off
		}
		if j := firstNonZero(im.b[from:to]); j >= 0 {
			return errf(ErrCorrupt, "byte %d, outside every section, is not zero", from+uint64(j))
		}
		if i < sectionCount {
			from = im.sec[i].end()
		}
	}
	return nil
}

var sectionNames = [sectionCount]string{"INDEX", "ENTRIES", "VALUES"}

func (im *image) checkSums() error {
	for i, s := range im.sec {
		d := im.b[192+32*i:]
		got, want := le.Uint64(d[24:]), xxh3.Hash(im.b[s.off:s.end()])
		if got != want {
			return errf(ErrChecksum, "section %s at offset %d: checksum %#016x, its %d bytes hash to %#016x",
				sectionNames[i], s.off, got, s.size, want)
		}
	}
	return nil
}

func allZero(b []byte) bool { return firstNonZero(b) < 0 }

func firstNonZero(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 { // a word at a time, then find the byte
		if le.Uint64(b[i:]) != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i] != 0 {
			return i
		}
	}
	return -1
}
