package shmkv

import (
	"fmt"
	"math"
	"unicode/utf8"
	"unsafe"
)

// Type is a value's type (lib/FORMAT.md §8; the codes are format.go's).
type Type uint8

// String is the type's name as FORMAT.md §8 and shmctl spell it
// ("tombstone" for TypeTombstone).
func (t Type) String() string {
	if t.known() {
		return types[t].name
	}
	if t == TypeTombstone {
		return "tombstone"
	}
	return "unknown"
}

// known: t is one of the nine types (1..9). Over a whole record kind byte,
// known also says that no flag bit is set (an inline record without expiry).
func (t Type) known() bool { return uint8(t)-1 < uint8(TypeStrList) }

// aligned8: an inline value of this type starts 8-aligned (§7). Defined for
// the nine types only, as nul and isUTF8 are (bit sets: no branch, no load).
func (t Type) aligned8() bool { return aligned8Types>>t&1 != 0 }

// nul: a NUL byte is stored after the value (not counted in value_len).
func (t Type) nul() uint64 { return nulTypes >> t & 1 }

// isUTF8: the type's text is strict UTF-8 (string; a strlist's strings).
func (t Type) isUTF8() bool { return utf8Types>>t&1 != 0 }

// Value is one value of an image: a typed view of its stored bytes. A Value
// obtained from a View points into that View's mapping and is valid until
// the View is released; the copying getters of Image and Cache never hand
// one out.
type Value struct {
	data   []byte
	typ    Type
	shared bool
}

// Type is the value's type.
func (v Value) Type() Type { return v.typ }

// Shared says whether the value is stored once for several entries (§9).
func (v Value) Shared() bool { return v.shared }

// Raw is the value's stored bytes (value_len of them, without the NUL of a
// bytes or string value), zero-copy.
func (v Value) Raw() []byte { return v.data }

func (v Value) want(t Type) error {
	if v.typ != t {
		return errf(ErrType, "the value is a %s, not a %s", v.typ, t)
	}
	return nil
}

// Bytes is a bytes value, zero-copy.
func (v Value) Bytes() ([]byte, error) {
	if err := v.want(TypeBytes); err != nil {
		return nil, err
	}
	return v.data, nil
}

// Text is a string value, copied into a Go string.
func (v Value) Text() (string, error) {
	if err := v.want(TypeString); err != nil {
		return "", err
	}
	return string(v.data), nil
}

// TextBytes is a string value's bytes, zero-copy.
func (v Value) TextBytes() ([]byte, error) {
	if err := v.want(TypeString); err != nil {
		return nil, err
	}
	return v.data, nil
}

// Int64 is an i64 value.
func (v Value) Int64() (int64, error) {
	if err := v.want(TypeInt64); err != nil {
		return 0, err
	}
	return int64(le.Uint64(v.data)), nil
}

// Float64 is an f64 value.
func (v Value) Float64() (float64, error) {
	if err := v.want(TypeFloat64); err != nil {
		return 0, err
	}
	return math.Float64frombits(le.Uint64(v.data)), nil
}

// Bool is a bool value.
func (v Value) Bool() (bool, error) {
	if err := v.want(TypeBool); err != nil {
		return false, err
	}
	return v.data[0] == 1, nil
}

// Float32s is an f32list, zero-copy: the slice is the stored floats
// (8-aligned in the image, so aligned in memory; little-endian hosts only).
func (v Value) Float32s() ([]float32, error) { return listOf[float32](v, TypeF32List) }

// Float64s is an f64list, zero-copy.
func (v Value) Float64s() ([]float64, error) { return listOf[float64](v, TypeF64List) }

// Int64s is an i64list, zero-copy.
func (v Value) Int64s() ([]int64, error) { return listOf[int64](v, TypeI64List) }

// listOf is a list value of type t in place, as a slice of its elements.
func listOf[E float32 | float64 | int64](v Value, t Type) ([]E, error) {
	if err := v.want(t); err != nil {
		return nil, err
	}
	if len(v.data) == 0 {
		return []E{}, nil
	}
	return unsafe.Slice((*E)(unsafe.Pointer(&v.data[0])), len(v.data)/int(unsafe.Sizeof(E(0)))), nil
}

// StrList is a strlist value, zero-copy; At checks each string as it is
// read (§12.1: a lookup checks the count, not the strings).
func (v Value) StrList() (StrList, error) {
	if err := v.want(TypeStrList); err != nil {
		return StrList{}, err
	}
	return StrList{v.data}, nil
}

// Strings is a strlist value copied into Go strings; it fails with
// ErrCorrupt if any string is damaged or not strict UTF-8 (At).
func (v Value) Strings() ([]string, error) {
	l, err := v.StrList()
	if err != nil {
		return nil, err
	}
	out := make([]string, l.Len())
	for i := range out {
		s, err := l.At(i)
		if err != nil {
			return nil, err
		}
		out[i] = string(s)
	}
	return out, nil
}

// Count is the number of elements: the length of bytes and strings, 1 for
// i64, bool and f64, the length of a list, the strings of a strlist.
func (v Value) Count() int {
	switch v.typ {
	case TypeInt64, TypeBool, TypeFloat64:
		return 1
	case TypeF32List:
		return len(v.data) / 4
	case TypeF64List, TypeI64List:
		return len(v.data) / 8
	case TypeStrList:
		return StrList{v.data}.Len()
	}
	return len(v.data)
}

// StrList is a string list (§8) in place.
type StrList struct{ b []byte }

// Len is the number of strings.
func (l StrList) Len() int { return int(le.Uint32(l.b)) }

// At is string i without its NUL, zero-copy. ErrCorrupt if its ends are
// out of order, past the data, it lacks its NUL, or it is not strict UTF-8
// (FORMAT.md §8).
func (l StrList) At(i int) ([]byte, error) {
	n := l.Len()
	if i < 0 || i >= n {
		return nil, errf(ErrNotFound, "string %d of a list of %d", i, n)
	}
	s, why := strlistString(l.b, uint64(n), uint64(i))
	if why != "" {
		return nil, errf(ErrCorrupt, "strlist %s", why)
	}
	return s, nil
}

func align8(x uint64) uint64 { return (x + 7) &^ 7 }

// entryValPos is where the value of the entry at off with a klen-byte key
// starts, or its shared-value reference (§7, §9): right after the key,
// 8-aligned for a reference and for the 8-aligned types.
func entryValPos(off, klen uint64, t Type, shared bool) uint64 {
	vpos := off + entrySize + klen
	if shared || t.aligned8() {
		vpos = align8(vpos)
	}
	return vpos
}

// decodeValue reads the value of the entry at off, whose header and key
// already lie inside ENTRIES, with the rules of FORMAT.md §12.1 (type,
// flags, where the value lies, its shape; strlists by their count only).
// It returns the value and the entry's end.
func (im *image) decodeValue(off uint64) (Value, uint64, error) {
	b := im.b
	typ, flags := Type(b[off+entType]), b[off+entFlags]
	klen, vlen := uint64(le.Uint16(b[off+entKeyLen:])), uint64(le.Uint32(b[off+entValueLen:]))
	if !typ.known() {
		return Value{}, 0, errf(ErrCorrupt, "entry at offset %d: unknown type %d", off, typ)
	}
	if flags&^entryShared != 0 {
		return Value{}, 0, errf(ErrCorrupt, "entry at offset %d: unknown flags %#x", off, flags)
	}
	shared := flags&entryShared != 0
	stored := vlen + typ.nul()
	vpos := entryValPos(off, klen, typ, shared)
	var at, end uint64
	if shared {
		if vpos+8 > im.entEnd {
			return Value{}, 0, errf(ErrCorrupt, "entry at offset %d: its shared-value reference at %d is past ENTRIES' end %d", off, vpos, im.entEnd)
		}
		at, end = le.Uint64(b[vpos:]), vpos+8
		if at%8 != 0 || at < im.valOff || at > im.valEnd || stored > im.valEnd-at {
			return Value{}, 0, errf(ErrCorrupt, "entry at offset %d: shared value at %d (%d bytes) is not an 8-aligned place inside VALUES [%d, %d)", off, at, stored, im.valOff, im.valEnd)
		}
	} else {
		if vpos > im.entEnd || stored > im.entEnd-vpos {
			return Value{}, 0, errf(ErrCorrupt, "entry at offset %d: its %d-byte value at %d runs past ENTRIES' end %d", off, stored, vpos, im.entEnd)
		}
		at, end = vpos, align8(vpos+stored)
	}
	v := Value{data: b[at : at+vlen : at+vlen], typ: typ, shared: shared}
	if err := v.shape(b[at:at+stored], off); err != nil {
		return Value{}, 0, err
	}
	return v, end, nil
}

// shape: the value is valid for its type (§8: the type table's shape),
// a strlist by its count (its strings are checked as they are read: At).
// stored is the value's bytes and its NUL, if its type has one.
func (v Value) shape(stored []byte, off uint64) error {
	n := uint64(len(v.data))
	ti := &types[v.typ]
	bad := ""
	switch ti.shape {
	case shapeText:
		if !textOK(v.typ, v.data, stored[n], false) {
			bad = "no NUL after the value, or a string that is not strict UTF-8"
		}
	case shapeFixed:
		if n != ti.elemSize {
			bad = fmt.Sprintf("length is not %d", ti.elemSize)
		} else if v.data[0] > ti.maxByte {
			bad = fmt.Sprintf("byte %d is over %d", v.data[0], ti.maxByte)
		}
	case shapeArray:
		if n%ti.elemSize != 0 {
			bad = fmt.Sprintf("length is not a multiple of %d", ti.elemSize)
		}
	case shapeStrList:
		if n < 8 || uint64(le.Uint32(v.data)) > (n-8)/4 {
			bad = "shorter than 8 bytes, or its count does not fit"
		}
	}
	if bad != "" {
		return errf(ErrCorrupt, "entry at offset %d: %s value of %d bytes: %s", off, v.typ, n, bad)
	}
	return nil
}

// textOK: a bytes or string value is followed by its NUL (nul, the byte
// after it, is 0), and a string's bytes are strict UTF-8 (§8: no overlong
// forms, no surrogates, nothing past U+10FFFF; U+0000 allowed), which Go's
// utf8.Valid checks unless the caller knows them ASCII (getFast's word
// test, bucketASCII). The one owner of the text rule: shape, and getFast.
func textOK(t Type, data []byte, nul byte, ascii bool) bool {
	return nul == 0 && (!t.isUTF8() || ascii || utf8.Valid(data))
}

// checkStrList: every rule of §8 for a strlist, its strings included
// (iteration and verify; a get checks the count only, At each string).
func checkStrList(b []byte) string {
	n := uint64(le.Uint32(b))
	if le.Uint32(b[4:]) != 0 {
		return "ends[0] is not 0"
	}
	if uint64(le.Uint32(b[4+4*n:])) != uint64(len(b))-4*(n+2) {
		return "ends[count] is not the data's length"
	}
	for i := uint64(0); i < n; i++ {
		if _, why := strlistString(b, n, i); why != "" {
			return why
		}
	}
	return ""
}

// strlistString is string i of a strlist of n strings (b: the value's
// bytes, its count checked by shape) without its NUL, or why it is
// malformed (§8): its ends out of order or past the data, no NUL at its
// end, not strict UTF-8. The one owner of the rule: At and checkStrList.
func strlistString(b []byte, n, i uint64) ([]byte, string) {
	data := b[4*(n+2):]
	lo, hi := uint64(le.Uint32(b[4+4*i:])), uint64(le.Uint32(b[8+4*i:]))
	if lo >= hi || hi > uint64(len(data)) || data[hi-1] != 0 {
		return nil, fmt.Sprintf("string %d: ends %d..%d of %d data bytes, or no NUL", i, lo, hi, len(data))
	}
	if !utf8.Valid(data[lo : hi-1]) {
		return nil, fmt.Sprintf("string %d is not strict UTF-8", i)
	}
	return data[lo : hi-1], ""
}
