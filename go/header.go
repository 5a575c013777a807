package shmkv

import (
	"bytes"
	"encoding/binary"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// The header block and the section table (lib/FORMAT.md §3, §4, §12); the
// constants are format.go's.

var le = binary.LittleEndian

type section struct{ off, size uint64 }

func (s section) end() uint64 { return s.off + s.size }

// image is a checked image: b is exactly the image's bytes (file_size long),
// and every number below has passed the checks of FORMAT.md §12.
type image struct {
	b           []byte
	entryCount  uint64
	bucketCount uint64
	hashBits    uint32
	seed        uint64
	maxProbe    uint64
	flags       uint64
	dedupRefs   uint64
	name        string
	nsec        int // sections in use: 3, 4 in a delta
	sec         [maxUsedSections]section
	entOff      uint64 // ENTRIES [entOff, entEnd)
	entEnd      uint64
	valOff      uint64 // VALUES [valOff, valEnd)
	valEnd      uint64
	index       []byte // the INDEX section
	expiry      bool   // header flag EXPIRY (the clock is read only if set)
	checksum    uint64 // header_checksum: the image's identity as a base (§19.4)
	fileSize    uint64

	// A delta (FORMAT.md §19): its header's words naming its base and
	// chain, and its key filter (FILTER's words).
	delta       bool
	dl          DeltaID
	filter      []byte
	filterAt    unsafe.Pointer // &filter[0]: mayHold's load, no bounds check
	filterWords uint64
}

// checkImage applies FORMAT.md §12's checks, in its order, to b (the image's
// bytes as the reader knows them: the file, or a segment's recorded size).
// sums adds checks 11 and 12 (zero padding outside sections, section
// checksums); the header checksum is always checked.
func checkImage(b []byte, sums bool) (*image, error) {
	size := uint64(len(b))
	n := min(len(b), len(magic))
	if !bytes.Equal(b[:n], magic[:n]) { // 1
		return nil, errf(ErrMagic, "the first %d bytes are %q, not %q", n, b[:n], magic[:n])
	}
	if size < headerBlock { // 2
		return nil, errf(ErrTruncated, "%d bytes, shorter than the 4096-byte header block", size)
	}
	if err := checkVersion(le.Uint32(b[hdrFormatVersion:])); err != nil { // 3
		return nil, err
	}
	lh := le.Uint64(b[hdrLayoutHash:])
	if lh != layoutHash && lh != deltaLayoutHash { // 4 (§19.4: either of the two)
		return nil, errf(ErrLayout, "layout_hash %#016x; format version 2 has %#016x (an image) or %#016x (a delta)",
			lh, uint64(layoutHash), uint64(deltaLayoutHash))
	}
	if got, want := le.Uint64(b[hdrChecksum:]), xxh3.Hash(b[:hdrChecksum]); got != want { // 5
		return nil, errf(ErrChecksum, "header checksum %#016x, the header's bytes [0, 504) hash to %#016x", got, want)
	}
	fileSize := le.Uint64(b[hdrFileSize:])
	if fileSize > size { // 6
		return nil, errf(ErrTruncated, "file_size %d, but the image has %d bytes", fileSize, size)
	}
	if fileSize < size { // 7
		return nil, errf(ErrCorrupt, "%d bytes after file_size %d", size-fileSize, fileSize)
	}
	im := &image{b: b, delta: lh == deltaLayoutHash, checksum: le.Uint64(b[hdrChecksum:]), fileSize: fileSize}
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

// checkVersion: this reader reads format 2; format 1 is retired, and its
// refusal names the command that converts it (FORMAT.md §15). Before the
// layout hash: a format 1 image is ErrVersion, never ErrLayout.
func checkVersion(v uint32) error {
	switch v {
	case formatVersion:
		return nil
	case retiredVersion:
		return errf(ErrVersion, msgRetired)
	}
	return errf(ErrVersion, "image format version %d, this reader reads version %d", v, formatVersion)
}

func (im *image) checkFields(fileSize uint64) error {
	b := im.b
	im.flags = le.Uint64(b[hdrFlags:])
	im.entryCount = le.Uint64(b[hdrEntryCount:])
	im.bucketCount = le.Uint64(b[hdrBucketCount:])
	im.hashBits = le.Uint32(b[hdrHashBits:])
	im.seed = le.Uint64(b[hdrHashSeed:])
	im.maxProbe = uint64(le.Uint32(b[hdrMaxProbe:]))
	im.dedupRefs = le.Uint64(b[hdrDedupRefs:])
	im.expiry = im.flags&hdrFlagExpiry != 0
	bad := func(format string, args ...any) error {
		return errf(ErrCorrupt, "header: "+format, args...)
	}
	known, nsec := uint64(hdrFlagsKnown), uint32(sectionCount)
	if im.delta {
		known, nsec = known|hdrFlagDelta, deltaSectionCount
	}
	im.nsec = int(nsec)
	switch {
	case le.Uint32(b[hdrHeaderSize:]) != headerBlock:
		return bad("header_size %d, not 4096", le.Uint32(b[hdrHeaderSize:]))
	case fileSize%headerBlock != 0:
		return bad("file_size %d is not a multiple of 4096", fileSize)
	case fileSize > maxFileSize:
		return bad("file_size %d is over 2^43", fileSize)
	case !im.delta && im.flags&hdrFlagDelta != 0:
		return bad("flag DELTA (%#x) set, but the layout hash is an image's, not a delta's", hdrFlagDelta)
	case im.flags&^known != 0:
		return bad("unknown flags %#x", im.flags&^known)
	case im.delta && im.flags&hdrFlagDelta == 0:
		return bad("flag DELTA (%#x) clear, but the layout hash is a delta's", hdrFlagDelta)
	case le.Uint32(b[hdrBucketSlots:]) != bucketBytes:
		return bad("bucket_slots %d, not %d", le.Uint32(b[hdrBucketSlots:]), bucketBytes)
	case im.hashBits < 1 || im.hashBits > 64:
		return bad("hash_bits %d, not in 1..64", im.hashBits)
	case im.bucketCount < 1 || im.bucketCount > fileSize/bucketBytes:
		return bad("bucket_count %d, not in 1..file_size/%d (%d)", im.bucketCount, bucketBytes, fileSize/bucketBytes)
	case im.entryCount > maxRecords*im.bucketCount:
		return bad("entry_count %d is over %d * bucket_count (%d)", im.entryCount, maxRecords, maxRecords*im.bucketCount)
	case im.maxProbe >= im.bucketCount:
		return bad("max_probe %d is not below bucket_count %d", im.maxProbe, im.bucketCount)
	case b[hdrName+nameMax] != 0:
		return bad("name (bytes 128..191) is not NUL-terminated")
	case le.Uint32(b[hdrReserved0:]) != 0:
		return bad("reserved0 is %#x, not 0", le.Uint32(b[hdrReserved0:]))
	case !allZero(b[hdrReserved+8*deltaWords : hdrChecksum]):
		return bad("reserved[4..6] (bytes 480..503) is not zero")
	case !im.delta && !allZero(b[hdrReserved:hdrReserved+8*deltaWords]):
		return bad("reserved[0..3] (bytes 448..479) is not zero, and the image is not a delta")
	case le.Uint32(b[hdrSectionCount:]) != nsec:
		return bad("section_count %d, not %d", le.Uint32(b[hdrSectionCount:]), nsec)
	}
	if im.delta {
		w := func(i int) uint64 { return le.Uint64(b[hdrReserved+8*i:]) }
		im.dl = DeltaID{BaseChecksum: w(resBaseChecksum), BaseSize: w(resBaseSize), Prev: w(resPrev), Seq: w(resSeq)}
		switch {
		case im.dl.BaseSize == 0 || im.dl.BaseSize%headerBlock != 0:
			return bad("delta base_size %d is not a non-zero multiple of 4096", im.dl.BaseSize)
		case im.dl.Seq == 0:
			return bad("delta seq 0; a delta's place in its chain is 1 or more")
		}
	}
	name := b[hdrName : hdrName+nameMax+1]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	im.name = string(name)
	return nil
}

// descriptor is section descriptor i's bytes (FORMAT.md §4).
func descriptor(b []byte, i int) []byte {
	return b[hdrSections+secSize*i : hdrSections+secSize*(i+1)]
}

func (im *image) checkSections(fileSize uint64) error {
	prev := uint64(headerBlock)
	for i := 0; i < maxSections; i++ {
		d := descriptor(im.b, i)
		if i >= im.nsec {
			if !allZero(d) {
				return errf(ErrCorrupt, "section descriptor %d is unused but not zero", i)
			}
			continue
		}
		kind, flags := le.Uint32(d[secKind:]), le.Uint32(d[secFlags:])
		s := section{le.Uint64(d[secOffset:]), le.Uint64(d[secSizeOff:])}
		switch {
		case kind != uint32(i+kindIndex):
			return errf(ErrCorrupt, "section %d: kind %d, not %d", i, kind, i+kindIndex)
		case flags != 0:
			return errf(ErrCorrupt, "section %d: flags %#x, not 0", i, flags)
		case s.off%64 != 0:
			return errf(ErrCorrupt, "section %d: offset %d is not a multiple of 64", i, s.off)
		case s.off < prev:
			return errf(ErrCorrupt, "section %d: offset %d is before %d (the header block or the previous section)", i, s.off, prev)
		case s.size > fileSize || s.off > fileSize-s.size:
			return errf(ErrCorrupt, "section %d: [%d, +%d) ends past file_size %d", i, s.off, s.size, fileSize)
		case i == kindFilter-1 && (s.size == 0 || s.size%8 != 0):
			return errf(ErrCorrupt, "section %d (FILTER): size %d is not a non-zero multiple of 8", i, s.size)
		}
		im.sec[i] = s
		prev = s.end()
	}
	idx := im.sec[kindIndex-1]
	if idx.size != im.bucketCount*bucketBytes {
		return errf(ErrCorrupt, "INDEX: size %d, not bucket_count * %d = %d", idx.size, bucketBytes, im.bucketCount*bucketBytes)
	}
	if idx.off%bucketBytes != 0 {
		return errf(ErrCorrupt, "INDEX: offset %d is not a multiple of %d", idx.off, bucketBytes)
	}
	im.index = im.b[idx.off:idx.end():idx.end()] // capped: nothing reads past INDEX through it
	ent, val := im.sec[kindEntries-1], im.sec[kindValues-1]
	im.entOff, im.entEnd = ent.off, ent.end()
	im.valOff, im.valEnd = val.off, val.end()
	if im.delta {
		f := im.sec[kindFilter-1]
		im.setFilter(im.b[f.off:f.end():f.end()])
	}
	return nil
}

// checkPadding: every byte outside the header structure and the sections is
// zero (check 11).
func (im *image) checkPadding() error {
	from := uint64(headerStruct)
	for i := 0; i <= im.nsec; i++ {
		to := uint64(len(im.b))
		if i < im.nsec {
			to = im.sec[i].off
		}
		if j := firstNonZero(im.b[from:to]); j >= 0 {
			return errf(ErrCorrupt, "byte %d, outside every section, is not zero", from+uint64(j))
		}
		if i < im.nsec {
			from = im.sec[i].end()
		}
	}
	return nil
}

var sectionNames = [maxUsedSections]string{"INDEX", "ENTRIES", "VALUES", "FILTER"}

func (im *image) checkSums() error {
	for i, s := range im.sec[:im.nsec] {
		d := descriptor(im.b, i)
		got, want := le.Uint64(d[secChecksum:]), xxh3.Hash(im.b[s.off:s.end()])
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
