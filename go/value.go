package shmkv

import (
	"math"
	"unicode/utf8"
	"unsafe"
)

// Type is a value's type (lib/FORMAT.md §8).
type Type uint8

// The nine value types of format v1.
const (
	TypeBytes   Type = 1
	TypeString  Type = 2
	TypeInt64   Type = 3
	TypeBool    Type = 4
	TypeFloat64 Type = 5
	TypeF32List Type = 6
	TypeF64List Type = 7
	TypeI64List Type = 8
	TypeStrList Type = 9
)

var typeNames = [...]string{"", "bytes", "string", "i64", "bool", "f64", "f32list", "f64list", "i64list", "strlist"}

// String is the type's name as FORMAT.md §8 and shmctl spell it.
func (t Type) String() string {
	if t >= 1 && int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "unknown"
}

const entryShared = 1 // entry flag bit 0

// The types whose value starts 8-aligned (§7: i64, f64 and the lists) and
// those stored with a NUL after the value (bytes, string), as bit sets: the
// hot path tests a bit, without a branch. Defined for the nine types only.
const (
	aligned8Types = 1<<TypeInt64 | 1<<TypeFloat64 | 1<<TypeF32List | 1<<TypeF64List | 1<<TypeI64List | 1<<TypeStrList
	nulTypes      = 1<<TypeBytes | 1<<TypeString
)

// aligned8: an inline value of this type starts 8-aligned (§7).
func (t Type) aligned8() bool { return aligned8Types>>t&1 != 0 }

// nul: a NUL byte is stored after the value (not counted in value_len).
func (t Type) nul() uint64 { return nulTypes >> t & 1 }

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
func (v Value) Float32s() ([]float32, error) {
	if err := v.want(TypeF32List); err != nil {
		return nil, err
	}
	if len(v.data) == 0 {
		return []float32{}, nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&v.data[0])), len(v.data)/4), nil
}

// Float64s is an f64list, zero-copy.
func (v Value) Float64s() ([]float64, error) {
	if err := v.want(TypeF64List); err != nil {
		return nil, err
	}
	if len(v.data) == 0 {
		return []float64{}, nil
	}
	return unsafe.Slice((*float64)(unsafe.Pointer(&v.data[0])), len(v.data)/8), nil
}

// Int64s is an i64list, zero-copy.
func (v Value) Int64s() ([]int64, error) {
	if err := v.want(TypeI64List); err != nil {
		return nil, err
	}
	if len(v.data) == 0 {
		return []int64{}, nil
	}
	return unsafe.Slice((*int64)(unsafe.Pointer(&v.data[0])), len(v.data)/8), nil
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
// ErrCorrupt if any string is damaged.
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
// out of order, past the data, or it lacks its NUL.
func (l StrList) At(i int) ([]byte, error) {
	n := l.Len()
	if i < 0 || i >= n {
		return nil, errf(ErrNotFound, "string %d of a list of %d", i, n)
	}
	data := l.b[4*(n+2):]
	lo, hi := uint64(le.Uint32(l.b[4+4*i:])), uint64(le.Uint32(l.b[8+4*i:]))
	if lo >= hi || hi > uint64(len(data)) || data[hi-1] != 0 {
		return nil, errf(ErrCorrupt, "strlist string %d: ends %d..%d of %d data bytes, or no NUL", i, lo, hi, len(data))
	}
	return data[lo : hi-1], nil
}

// entry is one decoded entry: its offset, key and value.
type entry struct {
	off uint64
	key []byte
	val Value
	end uint64 // the entry's 8-aligned end
}

func align8(x uint64) uint64 { return (x + 7) &^ 7 }

// decodeValue reads the value of the entry at off, whose header and key
// already lie inside ENTRIES, with the rules of FORMAT.md §12.1 (type,
// flags, where the value lies, its shape; strlists by their count only).
// It returns the value and the entry's end.
func (im *image) decodeValue(off uint64) (Value, uint64, error) {
	b := im.b
	typ, flags := Type(b[off]), b[off+1]
	klen, vlen := uint64(le.Uint16(b[off+2:])), uint64(le.Uint32(b[off+4:]))
	if typ < TypeBytes || typ > TypeStrList {
		return Value{}, 0, errf(ErrCorrupt, "entry at offset %d: unknown type %d", off, typ)
	}
	if flags&^entryShared != 0 {
		return Value{}, 0, errf(ErrCorrupt, "entry at offset %d: unknown flags %#x", off, flags)
	}
	shared := flags&entryShared != 0
	stored := vlen + typ.nul()
	vpos := off + 8 + klen
	if shared || typ.aligned8() {
		vpos = align8(vpos)
	}
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

// shape: the value is valid for its type (§8), strlist by its count.
func (v Value) shape(stored []byte, off uint64) error {
	n := uint64(len(v.data))
	bad := ""
	switch v.typ {
	case TypeBytes, TypeString:
		if stored[n] != 0 {
			bad = "no NUL after the value"
		}
	case TypeInt64, TypeFloat64:
		if n != 8 {
			bad = "length is not 8"
		}
	case TypeBool:
		if n != 1 || v.data[0] > 1 {
			bad = "not one byte 0 or 1"
		}
	case TypeF32List:
		if n%4 != 0 {
			bad = "length is not a multiple of 4"
		}
	case TypeF64List, TypeI64List:
		if n%8 != 0 {
			bad = "length is not a multiple of 8"
		}
	case TypeStrList:
		if n < 8 || uint64(le.Uint32(v.data)) > (n-8)/4 {
			bad = "shorter than 8 bytes, or its count does not fit"
		}
	}
	if bad != "" {
		return errf(ErrCorrupt, "entry at offset %d: %s value of %d bytes: %s", off, v.typ, n, bad)
	}
	return nil
}

// checkStrList: every rule of §8 for a strlist, strings and UTF-8 included
// (iteration and verify).
func checkStrList(b []byte, utf bool) string {
	n := uint64(le.Uint32(b))
	data := uint64(len(b)) - 4*(n+2)
	if le.Uint32(b[4:]) != 0 {
		return "ends[0] is not 0"
	}
	if uint64(le.Uint32(b[4+4*n:])) != data {
		return "ends[count] is not the data's length"
	}
	d := b[4*(n+2):]
	for i := uint64(0); i < n; i++ {
		lo, hi := uint64(le.Uint32(b[4+4*i:])), uint64(le.Uint32(b[8+4*i:]))
		if lo >= hi || hi > data || d[hi-1] != 0 {
			return "ends out of order or a string without its NUL"
		}
		if utf && !utf8.Valid(d[lo:hi-1]) {
			return "a string is not valid UTF-8"
		}
	}
	return ""
}
