package shmkv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

// TestFormatJSON holds format.go to lib/format.json, the one
// machine-readable description of format 2 that every reader is checked
// against: any difference fails, a key this test does not know included
// (a constant added there must be added here, and checked).

type formatJSON struct {
	About           string                 `json:"about"`
	Magic           string                 `json:"magic"`
	FormatVersion   uint64                 `json:"format_version"`
	LayoutHash      string                 `json:"layout_hash"`
	LayoutDesc      string                 `json:"layout_desc"`
	DeltaLayoutHash string                 `json:"delta_layout_hash"`
	DeltaLayoutDesc string                 `json:"delta_layout_desc"`
	Delta           deltaJSON              `json:"delta"`
	RetiredVersions map[string]retiredJSON `json:"retired_versions"`
	Header          headerJSON             `json:"header"`
	Section         structJSON             `json:"section"`
	SectionKinds    map[string]uint64      `json:"section_kinds"`
	Entry           structJSON             `json:"entry"`
	HeaderFlags     map[string]uint64      `json:"header_flags"`
	EntryFlags      map[string]uint64      `json:"entry_flags"`
	Bucket          map[string]uint64      `json:"bucket"`
	Record          map[string]uint64      `json:"record"`
	Limits          map[string]uint64      `json:"limits"`
	Types           []typeJSON             `json:"types"`
	Errors          map[string]int         `json:"errors"`
	Messages        map[string]string      `json:"messages"`
}

// deltaJSON: the delta constants (FORMAT.md §19), a key it lacks a
// difference too (the decoder disallows unknown fields at every level).
type deltaJSON struct {
	HeaderFlag     uint64            `json:"header_flag"`
	SectionCount   uint64            `json:"section_count"`
	Reserved       map[string]uint64 `json:"reserved"`
	RecordTomb     uint64            `json:"record_tomb"`
	InlineTombKind uint64            `json:"inline_tomb_kind"`
	OutTombKind    uint64            `json:"out_tomb_kind"`
	TombEntryType  uint64            `json:"tomb_entry_type"`
	FilterSection  uint64            `json:"filter_section"`
	FilterShifts   []uint64          `json:"filter_shifts"`
}

type retiredJSON struct {
	LayoutHash string `json:"layout_hash"`
	Upgrade    string `json:"upgrade"`
}

type headerJSON struct {
	Size           uint64            `json:"size"`
	Used           uint64            `json:"used"`
	ChecksumOffset uint64            `json:"checksum_offset"`
	FileAlign      uint64            `json:"file_align"`
	NameMax        uint64            `json:"name_max"`
	MaxSections    uint64            `json:"max_sections"`
	SectionCount   uint64            `json:"section_count"`
	Fields         map[string]uint64 `json:"fields"`
}

type structJSON struct {
	Size   uint64            `json:"size"`
	Fields map[string]uint64 `json:"fields"`
}

type typeJSON struct {
	Code     uint64 `json:"code"`
	Name     string `json:"name"`
	Align    uint64 `json:"align"`
	Nul      uint64 `json:"nul"`
	Shape    string `json:"shape"`
	ElemSize uint64 `json:"elem_size"`
	MaxByte  uint64 `json:"max_byte"`
	UTF8     bool   `json:"utf8"`
}

func loadFormatJSON(t *testing.T) formatJSON {
	raw, err := os.ReadFile("../lib/format.json")
	if err != nil {
		t.Fatalf("the format's description: %v", err)
	}
	var f formatJSON
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		t.Fatalf("lib/format.json: %v (a key this reader does not check is a difference)", err)
	}
	return f
}

func hexJSON(t *testing.T, what, s string) uint64 {
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	if err != nil || !strings.HasPrefix(s, "0x") {
		t.Fatalf("%s: %q is not a 0x hex number", what, s)
	}
	return n
}

func TestFormatJSON(t *testing.T) {
	f := loadFormatJSON(t)
	same := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: format.go has %v, lib/format.json %v", what, got, want)
		}
	}
	same("magic", string(magic), f.Magic)
	same("format_version", uint64(formatVersion), f.FormatVersion)
	same("layout_hash", uint64(layoutHash), hexJSON(t, "layout_hash", f.LayoutHash))
	same("layout_desc", layoutDesc, f.LayoutDesc)
	same("XXH3-64 of layout_desc", xxh3.HashString(f.LayoutDesc), hexJSON(t, "layout_hash", f.LayoutHash))
	same("delta_layout_hash", uint64(deltaLayoutHash), hexJSON(t, "delta_layout_hash", f.DeltaLayoutHash))
	same("delta_layout_desc", deltaLayoutDesc, f.DeltaLayoutDesc)
	same("XXH3-64 of delta_layout_desc", xxh3.HashString(f.DeltaLayoutDesc), hexJSON(t, "delta_layout_hash", f.DeltaLayoutHash))
	same("delta", deltaJSON{
		HeaderFlag: hdrFlagDelta, SectionCount: deltaSectionCount,
		Reserved:   map[string]uint64{"base_checksum": resBaseChecksum, "base_size": resBaseSize, "prev": resPrev, "seq": resSeq},
		RecordTomb: recTomb, InlineTombKind: inlineTombKind, OutTombKind: outTombKind,
		TombEntryType: tombEntryType, FilterSection: kindFilter, FilterShifts: []uint64{filterShift0, filterShift1, filterShift2},
	}, f.Delta)
	same("the delta's reserved words", uint64(deltaWords), uint64(len(f.Delta.Reserved)))
	same("TypeTombstone", uint64(TypeTombstone), f.Delta.TombEntryType)
	same("TypeTombstone's name", TypeTombstone.String(), "tombstone")
	same("kind bit 4: outside record.known", uint64(recKnown&recTomb), uint64(0))
	same("an OUT tombstone's kind", uint64(outTombKind), f.Record["out"]|f.Delta.RecordTomb)
	same("the delta flag: not one of a plain image's", uint64(hdrFlagsKnown&hdrFlagDelta), uint64(0))
	same("FILTER after the three sections", uint64(kindFilter), f.Delta.SectionCount)

	same("header", map[string]uint64{
		"size": headerBlock, "used": headerStruct, "checksum_offset": hdrChecksum, "file_align": headerBlock,
		"name_max": nameMax, "max_sections": maxSections, "section_count": sectionCount,
	}, map[string]uint64{
		"size": f.Header.Size, "used": f.Header.Used, "checksum_offset": f.Header.ChecksumOffset, "file_align": f.Header.FileAlign,
		"name_max": f.Header.NameMax, "max_sections": f.Header.MaxSections, "section_count": f.Header.SectionCount,
	})
	same("header fields", map[string]uint64{
		"magic": hdrMagic, "format_version": hdrFormatVersion, "header_size": hdrHeaderSize,
		"layout_hash": hdrLayoutHash, "flags": hdrFlags, "file_size": hdrFileSize,
		"entry_count": hdrEntryCount, "bucket_count": hdrBucketCount, "bucket_slots": hdrBucketSlots,
		"hash_bits": hdrHashBits, "hash_seed": hdrHashSeed, "max_probe": hdrMaxProbe,
		"section_count": hdrSectionCount, "builder_version": hdrBuilderVersion, "reserved0": hdrReserved0,
		"created_unix": hdrCreatedUnix, "value_bytes_logical": hdrValueBytes, "dedup_values": hdrDedupValues,
		"dedup_refs": hdrDedupRefs, "dedup_saved_bytes": hdrDedupSaved, "name": hdrName,
		"sections": hdrSections, "reserved": hdrReserved, "header_checksum": hdrChecksum,
	}, f.Header.Fields)
	same("section", structJSON{secSize, map[string]uint64{
		"kind": secKind, "flags": secFlags, "offset": secOffset, "size": secSizeOff, "checksum": secChecksum,
	}}, f.Section)
	same("section_kinds", map[string]uint64{"index": kindIndex, "entries": kindEntries, "values": kindValues}, f.SectionKinds)
	same("entry", structJSON{entrySize, map[string]uint64{
		"type": entType, "flags": entFlags, "key_len": entKeyLen, "value_len": entValueLen,
	}}, f.Entry)
	same("header_flags", map[string]uint64{"dedup": hdrFlagDedup, "expiry": hdrFlagExpiry}, f.HeaderFlags)
	same("known header flags", uint64(hdrFlagsKnown), f.HeaderFlags["dedup"]|f.HeaderFlags["expiry"])
	same("entry_flags", map[string]uint64{"shared": entryShared}, f.EntryFlags)
	same("bucket", map[string]uint64{
		"bytes": bucketBytes, "head": bucketHead, "filter_bits": filterBits, "max_records": maxRecords,
		"dir_bytes": dirBytes, "dir_off_mask": dirOffMask, "dir_tag_mask": dirTagMask,
		"dir_tag_shift": dirTagShift, "max_displacement_byte": maxDispByte,
	}, f.Bucket)
	same("record", map[string]uint64{
		"type_mask": recTypeMask, "expires": recExpires, "out": recOut, "known": recKnown,
		"inline_head": recInlineHead, "out_head": recOutHead, "expires_size": recExpirySize,
		"max_inline_len": maxInlineLen,
	}, f.Record)
	same("expirySize of an expiring kind", expirySize(recExpires), uint64(recExpirySize))
	same("limits", map[string]uint64{
		"max_key_len": maxKeyLen, "max_value_len": maxValueLen, "max_image_size": maxFileSize,
		"max_expires": maxExpires,
	}, f.Limits)

	shapes := map[shapeKind]string{shapeText: "text", shapeFixed: "fixed", shapeArray: "array", shapeStrList: "strlist"}
	var goTypes []typeJSON
	for code, ti := range types {
		if code == 0 {
			continue
		}
		tc := Type(code)
		goTypes = append(goTypes, typeJSON{uint64(code), ti.name, ti.align, ti.nul, shapes[ti.shape], ti.elemSize, uint64(ti.maxByte), ti.utf8})
		// the bit sets the hot path tests are the table's columns
		same(ti.name+" aligned8", tc.aligned8(), ti.align == 8)
		same(ti.name+" nul", tc.nul(), ti.nul)
		same(ti.name+" isUTF8", tc.isUTF8(), ti.utf8)
		same(ti.name+" String", tc.String(), ti.name)
		same(ti.name+" known", tc.known(), true)
	}
	same("types", goTypes, f.Types)
	same("type 0 and 10 unknown", Type(0).known() || Type(len(types)).known(), false)

	// Every error class this package returns is one of the format's (C's
	// names with SHMKV_), and every one of the format's is returned here
	// or declared as one a reader never returns.
	fmtClasses := map[string]bool{}
	for name := range f.Errors {
		fmtClasses[name] = true
	}
	goClasses := map[string]bool{}
	for _, c := range classes {
		if name, ok := strings.CutPrefix(c.name, "SHMKV_"); ok {
			goClasses[name] = true
			if !fmtClasses[name] {
				t.Errorf("class %s is not in lib/format.json's errors", c.name)
			}
		}
	}
	for _, name := range notReaderClasses {
		goClasses[name] = true
	}
	same("error classes", goClasses, fmtClasses)

	same("messages", map[string]string{"retired_version": msgRetired}, f.Messages)
	// Each retired version: an image of it (its own layout hash) is refused
	// with ErrVersion and the message naming its converter.
	for v, r := range f.RetiredVersions {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			t.Fatalf("retired version %q", v)
		}
		if !strings.Contains(msgRetired, r.Upgrade) {
			t.Errorf("the retired-version message %q does not name %q", msgRetired, r.Upgrade)
		}
		b := headerOnly(uint32(n), hexJSON(t, "retired layout_hash", r.LayoutHash))
		_, err = OpenBytes(b, 0)
		if !errors.Is(err, ErrVersion) || !strings.HasSuffix(err.Error(), f.Messages["retired_version"]) {
			t.Errorf("format %s: %v; want ErrVersion ending %q", v, err, f.Messages["retired_version"])
		}
	}
	if _, ok := f.RetiredVersions[fmt.Sprint(retiredVersion)]; !ok || len(f.RetiredVersions) != 1 {
		t.Errorf("retired versions: format.go knows %d, lib/format.json lists %v", retiredVersion, f.RetiredVersions)
	}
}

// headerOnly is a 4096-byte header block of format version v and layout
// hash lh, its header checksum right (and nothing else checked yet).
func headerOnly(v uint32, lh uint64) []byte {
	b := make([]byte, headerBlock)
	copy(b, magic)
	le.PutUint32(b[hdrFormatVersion:], v)
	le.PutUint32(b[hdrHeaderSize:], headerBlock)
	le.PutUint64(b[hdrLayoutHash:], lh)
	le.PutUint64(b[hdrChecksum:], xxh3.Hash(b[:hdrChecksum]))
	return b
}
