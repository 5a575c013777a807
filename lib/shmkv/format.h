/* shmkv/format.h - the on-disk (and in-memory) image layout, format 2.
 *
 * Part of the header-only reader; include <shmkv.h>, not this file.
 * lib/FORMAT.md is the prose specification; this file is its C mirror.
 * Every struct here is an ABI: change one and SHMKV_LAYOUT_HASH must change
 * (tests/layout_test recomputes it from offsetof/sizeof and fails otherwise).
 */
#ifndef SHMKV_FORMAT_H
#define SHMKV_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "shmkv images are little-endian and read in place: big-endian hosts are not supported"
#endif
#if UINTPTR_MAX != UINT64_MAX
#error "shmkv needs a 64-bit address space (images use 64-bit offsets)"
#endif

#define SHMKV_MAGIC "SHMKVIMG"   /* 8 bytes, no NUL */
#define SHMKV_FORMAT_VERSION 2u  /* the one format this reader reads (FORMAT.md §15) */
#define SHMKV_HEADER_SIZE 4096u  /* header block; sections start page-aligned */
#define SHMKV_HEADER_USED 512u   /* bytes of the block the header struct uses */
#define SHMKV_MAX_SECTIONS 8u
#define SHMKV_NAME_MAX 63u       /* name bytes, NUL-padded to 64 */
#define SHMKV_FILE_ALIGN 4096u   /* image size is a multiple of this */

/* Documented limits (FORMAT.md §10), enforced by the builder, checked by readers. */
#define SHMKV_MAX_KEY_LEN 65535u        /* bytes; an entry's key_len is a u16 */
#define SHMKV_MAX_VALUE_LEN 0xFFFFFFFFu /* bytes of one value; value_len is a u32 */
#define SHMKV_MAX_IMAGE_SIZE (UINT64_C(1) << 43) /* 8 TiB: OUT records hold 40-bit entry units */

/* The index (FORMAT.md §6): bucket_count buckets of 128 bytes (128-aligned):
 * count u8 @0 (0..16), displacement byte D @1, a 48-bit displaced-key filter
 * @2, the directory u16 dir[count] @8, dir[i] = (tag << 7 | off) & 0xffff
 * (record i at bucket + (dir[i] & 0x7f), its key tag's low 9 bits in
 * dir[i] >> 7), then the record area @8+2*count to @128. A record is u8
 * kind; inline (kind & OUT clear): u8 key_len, u8 value_len, [u32 expires],
 * key, zero padding to the value's alignment within the bucket, value (+
 * NUL for text); OUT: 40-bit LE entry offset >> 3, [u32 expires]. */
#define SHMKV_BUCKET_BYTES 128u     /* header bucket_slots holds this */
#define SHMKV_BUCKET_HEAD 8u        /* count, D, filter; the directory starts here */
#define SHMKV_FILTER_BITS 48u
#define SHMKV_MAX_RECORDS 16u       /* two 16-byte vectors of u16 dir at +8 and +24 */
#define SHMKV_DIR_BYTES 2u          /* per record: dir = (tag << 7 | off) & 0xffff */
#define SHMKV_DIR_OFF_MASK 0x7fu    /* dir bits 0..6: the record's offset (< 128) */
#define SHMKV_DIR_TAG_MASK 0xff80u  /* dir bits 7..15: the tag's low 9 bits */
#define SHMKV_DIR_TAG_SHIFT 7u
#define SHMKV_DISPLACEMENT_MAX 255u /* D 255: "255 or more: up to max_probe" */
#define SHMKV_REC_TYPE_MASK 0x0fu   /* kind bits 0..3: value type (0 for OUT) */
#define SHMKV_REC_EXPIRES 0x40u     /* kind bit 6: a u32 expiry follows the head */
#define SHMKV_REC_OUT 0x80u         /* kind bit 7: the entry lives in ENTRIES */
#define SHMKV_REC_TOMB 0x10u       /* kind bit 4, deltas only: a tombstone (FORMAT.md §19.2) */
#define SHMKV_REC_KNOWN (SHMKV_REC_TYPE_MASK | SHMKV_REC_EXPIRES | SHMKV_REC_OUT)
#define SHMKV_REC_INLINE_HEAD 3u    /* kind, key_len, value_len */
#define SHMKV_REC_OUT_HEAD 6u       /* kind, 40-bit offset >> 3 */
#define SHMKV_REC_EXPIRES_SIZE 4u
#define SHMKV_REC_MAX_LEN 255u      /* inline key_len and value_len are u8 */
#define SHMKV_UNIT_MASK ((UINT64_C(1) << 40) - 1) /* an OUT record's entry offset / 8 */

/* Value types. Numbers are stable: they are stored in images. */
enum shmkv_type {
	SHMKV_TYPE_BYTES = 1,   /* raw bytes, NUL-terminated in the image for convenience */
	SHMKV_TYPE_STRING = 2,  /* UTF-8 text, NUL-terminated in the image */
	SHMKV_TYPE_I64 = 3,     /* int64_t, 8-aligned */
	SHMKV_TYPE_BOOL = 4,    /* one byte, 0 or 1 */
	SHMKV_TYPE_F64 = 5,     /* double, 8-aligned */
	SHMKV_TYPE_F32LIST = 6, /* float[], 8-aligned */
	SHMKV_TYPE_F64LIST = 7, /* double[], 8-aligned */
	SHMKV_TYPE_I64LIST = 8, /* int64_t[], 8-aligned */
	SHMKV_TYPE_STRLIST = 9  /* u32 count, u32 ends[count+1], NUL-terminated strings; 8-aligned */
};
#define SHMKV_TYPE_MAX 9
/* What iteration over every record of a delta reports for a tombstone (no
 * value): a type code no value has (FORMAT.md §19.2). */
#define SHMKV_TYPE_TOMBSTONE 0

/* Section kinds. */
enum shmkv_section_kind {
	SHMKV_SECTION_INDEX = 1,   /* bucket_count buckets of 128 bytes */
	SHMKV_SECTION_ENTRIES = 2, /* entries of OUT records: header, key, value or shared reference */
	SHMKV_SECTION_VALUES = 3,  /* deduplicated values shared by several entries */
	SHMKV_SECTION_FILTER = 4   /* deltas only: u64 words of the key filter (FORMAT.md §19.3) */
};

/* Header flags. */
#define SHMKV_HFLAG_DEDUP UINT64_C(1)  /* builder deduplicated shared values */
#define SHMKV_HFLAG_EXPIRY UINT64_C(2) /* some record carries an expiry */
#define SHMKV_HFLAG_DELTA UINT64_C(4)  /* a delta image (FORMAT.md §19): with its layout hash */
#define SHMKV_HFLAG_KNOWN (SHMKV_HFLAG_DEDUP | SHMKV_HFLAG_EXPIRY)

/* A delta's header (FORMAT.md §19.1): reserved[] words naming its base and chain. */
#define SHMKV_DELTA_BASE_CHECKSUM 0 /* the base's header_checksum */
#define SHMKV_DELTA_BASE_SIZE 1     /* the base's file_size */
#define SHMKV_DELTA_PREV 2          /* header_checksum of the delta it follows; 0: the first */
#define SHMKV_DELTA_SEQ 3           /* its place in its chain, >= 1 */
#define SHMKV_DELTA_WORDS 4         /* reserved words with a meaning in a delta */
#define SHMKV_DELTA_SECTIONS 4u     /* a delta's section_count (a plain image's: 3) */

/* Entry flags. */
#define SHMKV_EFLAG_SHARED 1u /* value lives in VALUES; entry holds its u64 image offset */
#define SHMKV_EFLAG_KNOWN (SHMKV_EFLAG_SHARED)

typedef struct shmkv_section_desc {
	uint32_t kind;     /* enum shmkv_section_kind */
	uint32_t flags;    /* 0 */
	uint64_t offset;   /* from image start; 64-byte aligned */
	uint64_t size;     /* bytes */
	uint64_t checksum; /* XXH3-64, seed 0, over [offset, offset+size) */
} shmkv_section_desc;

typedef struct shmkv_image_header {
	char magic[8];                /*   0 SHMKV_MAGIC */
	uint32_t format_version;      /*   8 SHMKV_FORMAT_VERSION */
	uint32_t header_size;         /*  12 SHMKV_HEADER_SIZE */
	uint64_t layout_hash;         /*  16 SHMKV_LAYOUT_HASH */
	uint64_t flags;               /*  24 SHMKV_HFLAG_* */
	uint64_t file_size;           /*  32 whole image, multiple of SHMKV_FILE_ALIGN */
	uint64_t entry_count;         /*  40 */
	uint64_t bucket_count;        /*  48 >= 1 */
	uint32_t bucket_slots;        /*  56 SHMKV_BUCKET_BYTES (the name is history) */
	uint32_t hash_bits;           /*  60 64 in production; fewer only in test images */
	uint64_t hash_seed;           /*  64 XXH3 seed */
	uint32_t max_probe;           /*  72 longest distance (buckets) from a key's home bucket */
	uint32_t section_count;       /*  76 */
	uint32_t builder_version;     /*  80 major << 16 | minor << 8 | patch */
	uint32_t reserved0;           /*  84 zero */
	int64_t created_unix;         /*  88 seconds since the epoch */
	uint64_t value_bytes_logical; /*  96 value bytes had nothing been shared */
	uint64_t dedup_values;        /* 104 distinct shared values in VALUES */
	uint64_t dedup_refs;          /* 112 entries pointing at shared values */
	uint64_t dedup_saved_bytes;   /* 120 entry bytes saved less the shared copies (cache-line padding aside) */
	char name[64];                /* 128 NUL-padded */
	shmkv_section_desc sections[SHMKV_MAX_SECTIONS]; /* 192 unused ones zero */
	uint64_t reserved[7];         /* 448 zero */
	uint64_t header_checksum;     /* 504 XXH3-64, seed 0, over bytes [0, 504) */
} shmkv_image_header;

typedef struct shmkv_entry_header {
	uint8_t type;       /* enum shmkv_type */
	uint8_t flags;      /* SHMKV_EFLAG_* */
	uint16_t key_len;   /* key bytes follow at +8 */
	uint32_t value_len; /* bytes of the value (strings: without the NUL) */
} shmkv_entry_header;

/* The layout description the layout hash is taken of (XXH3-64, seed 0;
 * FORMAT.md §15). It ends with the vocabulary (types, flags, record kind
 * bits, sections), so that the hash covers everything a reader must refuse.
 * tests/layout_test rebuilds it from offsetof/sizeof, the type table and the
 * masks; lib/format.json holds it for the other languages' readers. */
#define SHMKV__LAYOUT_BODY                                                                       \
	"header=512:magic@0,format_version@8,header_size@12,layout_hash@16,"                         \
	"flags@24,file_size@32,entry_count@40,bucket_count@48,bucket_slots@56,hash_bits@60,"         \
	"hash_seed@64,max_probe@72,section_count@76,builder_version@80,reserved0@84,"               \
	"created_unix@88,value_bytes_logical@96,dedup_values@104,dedup_refs@112,"                   \
	"dedup_saved_bytes@120,name@128,sections@192,reserved@448,header_checksum@504;"             \
	"section=32:kind@0,flags@4,offset@8,size@16,checksum@24;"                                   \
	"entry=8:type@0,flags@1,key_len@2,value_len@4;"                                             \
	"bucket=128:count@0[0..16],disp@1,filter48@2[(tag*48)>>16],"                                \
	"dir16@8[count]=(tag<<7|off)&0xffff,records@8+2*count..128,ascending,zero-gaps;"           \
	"record=kind8@0;"                                                                            \
	"inline=key_len8@1,value_len8@2,expires32@3?,key,pad0-to-align(type)-in-bucket,value,"      \
	"nul(type);out=entry_off40>>3@1,expires32@6?;"                                              \
	"expired=now>=expires;hash=xxh3_64(seed);home=mulhi(h,buckets);tag=h&0xffff|1if0;"          \
	"types=1:bytes/a1/nul/text,2:string/a1/nul/text/utf8,3:i64/a8/fixed8,"                      \
	"4:bool/a1/fixed1max1,5:f64/a8/fixed8,6:f32list/a8/array4,7:f64list/a8/array8,"             \
	"8:i64list/a8/array8,9:strlist/a8/strlist/utf8;eflags=0x1;"
#define SHMKV_LAYOUT_DESC                                                                        \
	"shmkv-image-v2;" SHMKV__LAYOUT_BODY                                                         \
	"hflags=0x3;rkind=type0xf,expires0x40,out0x80;sections=1:index,2:entries,3:values"
/* A delta image's (FORMAT.md §19): the same body, its vocabulary, its fields. */
#define SHMKV_DELTA_LAYOUT_DESC                                                                  \
	"shmkv-delta-v2;" SHMKV__LAYOUT_BODY                                                         \
	"hflags=0x7;rkind=type0xf,tomb0x10,expires0x40,out0x80;"                                     \
	"sections=1:index,2:entries,3:values,4:filter;"                                              \
	"delta=base_checksum@448,base_size@456,prev@464,seq@472;"                                    \
	"tomb=inline:kind0x10/key_len8@1/value_len8@2=0/key,out:kind0x90/etype0/value_len0/key_len>0;" \
	"filter=u64[words],word=mulhi(h,words),bits=h>>16&63|h>>22&63|h>>28&63"
#define SHMKV_LAYOUT_HASH UINT64_C(0x5a240d8d9e73bf24)
#define SHMKV_DELTA_LAYOUT_HASH UINT64_C(0x011183097a055ca3)
#if SHMKV_TYPE_MAX != 9
#error "format 2 holds types 1..9: a new value type is a new format version (FORMAT.md §15)"
#endif

/* Format 1 (FORMAT.md §15, history) is retired: its images are refused
 * with SHMKV_EVERSION and this advice; `shmctl image upgrade` converts them. */
#define SHMKV_RETIRED_V1_UPGRADE "shmctl image upgrade OLD -o NEW"

#ifdef __cplusplus
static_assert(sizeof(shmkv_image_header) == SHMKV_HEADER_USED, "header layout");
static_assert(sizeof(shmkv_section_desc) == 32, "section layout");
static_assert(sizeof(shmkv_entry_header) == 8, "entry layout");
#else
_Static_assert(sizeof(shmkv_image_header) == SHMKV_HEADER_USED, "header layout");
_Static_assert(sizeof(shmkv_section_desc) == 32, "section layout");
_Static_assert(sizeof(shmkv_entry_header) == 8, "entry layout");
#endif

#endif /* SHMKV_FORMAT_H */
