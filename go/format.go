package shmkv

// Every constant of image format 2 (lib/FORMAT.md) that this reader uses,
// in one place. lib/format.json describes the same constants for every
// reader; TestFormatJSON holds this file to it, field by field.

// The header block (FORMAT.md §3).
const (
	formatVersion = 2
	layoutHash    = 0x5a240d8d9e73bf24 // XXH3-64 of layoutDesc, seed 0
	headerBlock   = 4096               // header_size; file_size is a multiple of it
	headerStruct  = 512                // the bytes of the header structure; the rest is zero
	nameMax       = 63                 // the name field's bytes before its NUL
	maxSections   = 8                  // section descriptors in the header
	sectionCount  = 3                  // the ones in use
	maxFileSize   = uint64(1) << 43
)

var magic = []byte("SHMKVIMG")

// The header's field offsets (FORMAT.md §3).
const (
	hdrMagic          = 0
	hdrFormatVersion  = 8
	hdrHeaderSize     = 12
	hdrLayoutHash     = 16
	hdrFlags          = 24
	hdrFileSize       = 32
	hdrEntryCount     = 40
	hdrBucketCount    = 48
	hdrBucketSlots    = 56
	hdrHashBits       = 60
	hdrHashSeed       = 64
	hdrMaxProbe       = 72
	hdrSectionCount   = 76
	hdrBuilderVersion = 80
	hdrReserved0      = 84
	hdrCreatedUnix    = 88
	hdrValueBytes     = 96
	hdrDedupValues    = 104
	hdrDedupRefs      = 112
	hdrDedupSaved     = 120
	hdrName           = 128
	hdrSections       = 192
	hdrReserved       = 448
	hdrChecksum       = 504
)

// A section descriptor (FORMAT.md §4): its size, its fields' offsets, and
// the section kinds, which are also their order.
const (
	secSize     = 32
	secKind     = 0
	secFlags    = 4
	secOffset   = 8
	secSizeOff  = 16
	secChecksum = 24

	kindIndex   = 1
	kindEntries = 2
	kindValues  = 3
)

// An entry's header (FORMAT.md §7) and its flags.
const (
	entrySize     = 8
	entType       = 0
	entFlags      = 1
	entKeyLen     = 2
	entValueLen   = 4
	entryShared   = 1
	hdrFlagDedup  = 1 // header flags (§3)
	hdrFlagExpiry = 2 // some record carries an expiry (§17)
	hdrFlagsKnown = hdrFlagDedup | hdrFlagExpiry
)

// A bucket of the index (FORMAT.md §6.1): 128 bytes whose head is
// count, D, a 48-bit filter and a directory of one u16 per record, dir =
// (tag << 7 | off) & 0xffff.
const (
	bucketBytes   = 128 // the header's bucket_slots says 128 too
	bucketHead    = 8   // count, D, filter; the directory starts here
	filterBits    = 48
	maxRecords    = 16 // a bucket's count is at most 16
	dirBytes      = 2
	dirOffMask    = 0x7f   // dir's offset bits: the record's offset in its bucket
	dirTagMask    = 0xff80 // dir's tag bits: the tag's low 9 bits
	dirTagShift   = 7
	maxDispByte   = 255 // D = 255: displaced up to max_probe buckets
	hashMul       = 0x9E3779B97F4A7C15
	maxKeyLen     = 65535
	maxValueLen   = 1<<32 - 1
	maxExpires    = 1<<32 - 1
	recTypeMask   = 0x0f // kind bits 0..3: the type of an inline record
	recExpires    = 0x40 // kind bit 6: a u32 expiry follows the record's head
	recOut        = 0x80 // kind bit 7: the entry lives in ENTRIES
	recKnown      = recTypeMask | recExpires | recOut
	recInlineHead = 3 // kind, key_len, value_len
	recOutHead    = 6 // kind, the entry's 40-bit offset / 8
	recExpirySize = 4
	maxInlineLen  = 255 // an inline record's key_len and value_len are one byte
)

// Delta images (FORMAT.md §19): a format 2 image under its own layout
// hash, holding upserts and tombstones for one base, and a key filter.
const (
	deltaLayoutHash   = 0x011183097a055ca3 // XXH3-64 of deltaLayoutDesc, seed 0
	hdrFlagDelta      = 4                  // header flag DELTA: set iff the delta layout hash (§19.1)
	deltaSectionCount = 4                  // INDEX, ENTRIES, VALUES, FILTER
	maxUsedSections   = deltaSectionCount
	kindFilter        = 4 // section kind of the filter (§19.3)

	// reserved[] words of a delta's header (§19.1); reserved[4..6] are 0
	resBaseChecksum = 0 // the base's header_checksum
	resBaseSize     = 1 // the base's file_size
	resPrev         = 2 // the header_checksum of the delta this one follows; 0: none
	resSeq          = 3 // its place in its chain, >= 1
	deltaWords      = 4 // the reserved words a delta gives a meaning

	recTomb        = 0x10             // kind bit 4, deltas only: a tombstone (§19.2)
	inlineTombKind = recTomb          // an inline tombstone's kind, exactly
	outTombKind    = recOut | recTomb // an OUT tombstone's kind, exactly
	tombEntryType  = 0                // an OUT tombstone's entry type (type 0 is damage elsewhere)
)

// The three bits of a key in its filter word are bits (h >> s) & 63 for
// each of these shifts s (§19.3).
const (
	filterShift0 = 16
	filterShift1 = 22
	filterShift2 = 28
)

// The retired format 1 (FORMAT.md §15): recognised only to be refused with
// the command that converts it.
const (
	retiredVersion    = 1
	retiredLayoutHash = 0x52171befdcf1d7ee
	upgradeCommand    = "shmctl image upgrade OLD -o NEW"
	msgRetired        = "image format version 1 is retired: convert it with '" + upgradeCommand + "'"
)

// layoutDesc is the layout description whose XXH3-64 is layoutHash
// (FORMAT.md §15): a reader that hashes it to its own layoutHash reads
// the layout it describes.
const layoutDesc = "shmkv-image-v2;header=512:magic@0,format_version@8,header_size@12,layout_hash@16,flags@24,file_size@32,entry_count@40,bucket_count@48,bucket_slots@56,hash_bits@60,hash_seed@64,max_probe@72,section_count@76,builder_version@80,reserved0@84,created_unix@88,value_bytes_logical@96,dedup_values@104,dedup_refs@112,dedup_saved_bytes@120,name@128,sections@192,reserved@448,header_checksum@504;section=32:kind@0,flags@4,offset@8,size@16,checksum@24;entry=8:type@0,flags@1,key_len@2,value_len@4;bucket=128:count@0[0..16],disp@1,filter48@2[(tag*48)>>16],dir16@8[count]=(tag<<7|off)&0xffff,records@8+2*count..128,ascending,zero-gaps;record=kind8@0;inline=key_len8@1,value_len8@2,expires32@3?,key,pad0-to-align(type)-in-bucket,value,nul(type);out=entry_off40>>3@1,expires32@6?;expired=now>=expires;hash=xxh3_64(seed);home=mulhi(h,buckets);tag=h&0xffff|1if0;types=1:bytes/a1/nul/text,2:string/a1/nul/text/utf8,3:i64/a8/fixed8,4:bool/a1/fixed1max1,5:f64/a8/fixed8,6:f32list/a8/array4,7:f64list/a8/array8,8:i64list/a8/array8,9:strlist/a8/strlist/utf8;eflags=0x1;hflags=0x3;rkind=type0xf,expires0x40,out0x80;sections=1:index,2:entries,3:values"

// deltaLayoutDesc is the delta layout description (FORMAT.md §19.1) whose
// XXH3-64 is deltaLayoutHash.
const deltaLayoutDesc = "shmkv-delta-v2;header=512:magic@0,format_version@8,header_size@12,layout_hash@16,flags@24,file_size@32,entry_count@40,bucket_count@48,bucket_slots@56,hash_bits@60,hash_seed@64,max_probe@72,section_count@76,builder_version@80,reserved0@84,created_unix@88,value_bytes_logical@96,dedup_values@104,dedup_refs@112,dedup_saved_bytes@120,name@128,sections@192,reserved@448,header_checksum@504;section=32:kind@0,flags@4,offset@8,size@16,checksum@24;entry=8:type@0,flags@1,key_len@2,value_len@4;bucket=128:count@0[0..16],disp@1,filter48@2[(tag*48)>>16],dir16@8[count]=(tag<<7|off)&0xffff,records@8+2*count..128,ascending,zero-gaps;record=kind8@0;inline=key_len8@1,value_len8@2,expires32@3?,key,pad0-to-align(type)-in-bucket,value,nul(type);out=entry_off40>>3@1,expires32@6?;expired=now>=expires;hash=xxh3_64(seed);home=mulhi(h,buckets);tag=h&0xffff|1if0;types=1:bytes/a1/nul/text,2:string/a1/nul/text/utf8,3:i64/a8/fixed8,4:bool/a1/fixed1max1,5:f64/a8/fixed8,6:f32list/a8/array4,7:f64list/a8/array8,8:i64list/a8/array8,9:strlist/a8/strlist/utf8;eflags=0x1;hflags=0x7;rkind=type0xf,tomb0x10,expires0x40,out0x80;sections=1:index,2:entries,3:values,4:filter;delta=base_checksum@448,base_size@456,prev@464,seq@472;tomb=inline:kind0x10/key_len8@1/value_len8@2=0/key,out:kind0x90/etype0/value_len0/key_len>0;filter=u64[words],word=mulhi(h,words),bits=h>>16&63|h>>22&63|h>>28&63"

// The nine value types (FORMAT.md §8), and the type a tombstone of a
// delta is given where iteration yields it (§19.2; the C reader's
// SHMKV_TYPE_TOMBSTONE, an OUT tombstone's entry type).
const (
	TypeTombstone Type = tombEntryType

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

// How a type's stored bytes are checked (§8).
type shapeKind uint8

const (
	shapeText    shapeKind = iota + 1 // any bytes, a NUL after them
	shapeFixed                        // exactly elemSize bytes, the first at most maxByte
	shapeArray                        // a multiple of elemSize bytes
	shapeStrList                      // count, count+1 ends, the strings
)

// typeInfo is one row of FORMAT.md §8's type table.
type typeInfo struct {
	name     string
	align    uint64 // an inline value starts at a multiple of it (§7)
	nul      uint64 // a NUL byte follows the value (not counted in value_len)
	shape    shapeKind
	elemSize uint64
	maxByte  byte // shapeFixed of one byte: its largest value
	utf8     bool // its text is strict UTF-8
}

var types = [...]typeInfo{
	TypeBytes:   {"bytes", 1, 1, shapeText, 1, 0, false},
	TypeString:  {"string", 1, 1, shapeText, 1, 0, true},
	TypeInt64:   {"i64", 8, 0, shapeFixed, 8, 255, false},
	TypeBool:    {"bool", 1, 0, shapeFixed, 1, 1, false},
	TypeFloat64: {"f64", 8, 0, shapeFixed, 8, 255, false},
	TypeF32List: {"f32list", 8, 0, shapeArray, 4, 0, false},
	TypeF64List: {"f64list", 8, 0, shapeArray, 8, 0, false},
	TypeI64List: {"i64list", 8, 0, shapeArray, 8, 0, false},
	TypeStrList: {"strlist", 8, 0, shapeStrList, 4, 0, true},
}

// The type table's align, nul and utf8 columns as bit sets (by type code), for
// the hot path: a bit test, no branch, no load. TestFormatJSON holds them
// equal to the table.
const (
	aligned8Types = 1<<TypeInt64 | 1<<TypeFloat64 | 1<<TypeF32List | 1<<TypeF64List | 1<<TypeI64List | 1<<TypeStrList
	nulTypes      = 1<<TypeBytes | 1<<TypeString
	utf8Types     = 1<<TypeString | 1<<TypeStrList
)

// The error classes of lib/format.json that this package never returns:
// the end of an iteration (a range loop ends instead) and the builder's.
var notReaderClasses = []string{"EEND", "EDUPKEY", "EINPUT", "ELIMIT"}
