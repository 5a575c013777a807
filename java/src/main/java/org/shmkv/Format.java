package org.shmkv;

/**
 * Every constant of image format 2 (lib/FORMAT.md) that this reader uses,
 * in one place: the header, section table, entry, bucket and record
 * layouts, flags, the type table, limits, error codes, the retired
 * version's message, and delta images' (§19). FormatTest compares each with lib/format.json, the
 * format's machine-readable description, and fails on any difference.
 */
final class Format {
	private Format() {}

	static final String MAGIC = "SHMKVIMG";
	static final int VERSION = 2;
	/** XXH3-64 (seed 0) of {@link #LAYOUT_DESC} (FORMAT.md §15). */
	static final long LAYOUT_HASH = 0x5a240d8d9e73bf24L;
	static final String LAYOUT_DESC = "shmkv-image-v2;header=512:magic@0,format_version@8,header_size@12,"
			+ "layout_hash@16,flags@24,file_size@32,entry_count@40,bucket_count@48,bucket_slots@56,hash_bits@60,"
			+ "hash_seed@64,max_probe@72,section_count@76,builder_version@80,reserved0@84,created_unix@88,"
			+ "value_bytes_logical@96,dedup_values@104,dedup_refs@112,dedup_saved_bytes@120,name@128,sections@192,"
			+ "reserved@448,header_checksum@504;section=32:kind@0,flags@4,offset@8,size@16,checksum@24;entry=8:"
			+ "type@0,flags@1,key_len@2,value_len@4;bucket=128:count@0[0..16],disp@1,filter48@2[(tag*48)>>16],"
			+ "dir16@8[count]=(tag<<7|off)&0xffff,records@8+2*count..128,ascending,zero-gaps;record=kind8@0;"
			+ "inline=key_len8@1,value_len8@2,expires32@3?,key,pad0-to-align(type)-in-bucket,value,nul(type);"
			+ "out=entry_off40>>3@1,expires32@6?;expired=now>=expires;hash=xxh3_64(seed);home=mulhi(h,buckets);"
			+ "tag=h&0xffff|1if0;types=1:bytes/a1/nul/text,2:string/a1/nul/text/utf8,3:i64/a8/fixed8,"
			+ "4:bool/a1/fixed1max1,5:f64/a8/fixed8,6:f32list/a8/array4,7:f64list/a8/array8,8:i64list/a8/array8,"
			+ "9:strlist/a8/strlist/utf8;eflags=0x1;hflags=0x3;rkind=type0xf,expires0x40,out0x80;"
			+ "sections=1:index,2:entries,3:values";

	/**
	 * A delta image's layout hash (FORMAT.md §19.1): the XXH3-64 of
	 * {@link #DELTA_LAYOUT_DESC}, the plain description with the delta's
	 * vocabulary (the DELTA flag, tombstones, the filter section) and fields.
	 */
	static final long DELTA_LAYOUT_HASH = 0x011183097a055ca3L;
	static final String DELTA_LAYOUT_DESC = "shmkv-delta-v2;header=512:magic@0,format_version@8,header_size@12,"
			+ "layout_hash@16,flags@24,file_size@32,entry_count@40,bucket_count@48,bucket_slots@56,hash_bits@60,"
			+ "hash_seed@64,max_probe@72,section_count@76,builder_version@80,reserved0@84,created_unix@88,"
			+ "value_bytes_logical@96,dedup_values@104,dedup_refs@112,dedup_saved_bytes@120,name@128,sections@192,"
			+ "reserved@448,header_checksum@504;section=32:kind@0,flags@4,offset@8,size@16,checksum@24;entry=8:"
			+ "type@0,flags@1,key_len@2,value_len@4;bucket=128:count@0[0..16],disp@1,filter48@2[(tag*48)>>16],"
			+ "dir16@8[count]=(tag<<7|off)&0xffff,records@8+2*count..128,ascending,zero-gaps;record=kind8@0;"
			+ "inline=key_len8@1,value_len8@2,expires32@3?,key,pad0-to-align(type)-in-bucket,value,nul(type);"
			+ "out=entry_off40>>3@1,expires32@6?;expired=now>=expires;hash=xxh3_64(seed);home=mulhi(h,buckets);"
			+ "tag=h&0xffff|1if0;types=1:bytes/a1/nul/text,2:string/a1/nul/text/utf8,3:i64/a8/fixed8,"
			+ "4:bool/a1/fixed1max1,5:f64/a8/fixed8,6:f32list/a8/array4,7:f64list/a8/array8,8:i64list/a8/array8,"
			+ "9:strlist/a8/strlist/utf8;eflags=0x1;hflags=0x7;rkind=type0xf,tomb0x10,expires0x40,out0x80;"
			+ "sections=1:index,2:entries,3:values,4:filter;delta=base_checksum@448,base_size@456,prev@464,seq@472;"
			+ "tomb=inline:kind0x10/key_len8@1/value_len8@2=0/key,out:kind0x90/etype0/value_len0/key_len>0;"
			+ "filter=u64[words],word=mulhi(h,words),bits=h>>16&63|h>>22&63|h>>28&63";

	/** The retired format 1 (FORMAT.md §15): refused, with the command that converts it. */
	static final int RETIRED_VERSION = 1;
	static final long RETIRED_LAYOUT_HASH = 0x52171befdcf1d7eeL;
	static final String UPGRADE = "shmctl image upgrade OLD -o NEW";
	static final String RETIRED_MESSAGE = "image format version 1 is retired: convert it with '" + UPGRADE + "'";

	/** The message for any other version this reader does not read. */
	static String unknownVersion(long version) {
		return "image format version " + version + ", this reader reads version " + VERSION;
	}

	// the header block (FORMAT.md §3)
	static final int HEADER_SIZE = 4096, HEADER_USED = 512, FILE_ALIGN = 4096, NAME_MAX = 63, MAX_SECTIONS = 8,
			SECTION_COUNT = 3;
	static final int H_MAGIC = 0, H_FORMAT_VERSION = 8, H_HEADER_SIZE = 12, H_LAYOUT_HASH = 16, H_FLAGS = 24,
			H_FILE_SIZE = 32, H_ENTRY_COUNT = 40, H_BUCKET_COUNT = 48, H_BUCKET_SLOTS = 56, H_HASH_BITS = 60,
			H_HASH_SEED = 64, H_MAX_PROBE = 72, H_SECTION_COUNT = 76, H_BUILDER_VERSION = 80, H_RESERVED0 = 84,
			H_CREATED_UNIX = 88, H_VALUE_BYTES_LOGICAL = 96, H_DEDUP_VALUES = 104, H_DEDUP_REFS = 112,
			H_DEDUP_SAVED_BYTES = 120, H_NAME = 128, H_SECTIONS = 192, H_RESERVED = 448, H_HEADER_CHECKSUM = 504;
	static final long FLAG_DEDUP = 1, FLAG_EXPIRY = 2, HEADER_FLAGS = FLAG_DEDUP | FLAG_EXPIRY;

	// a delta image (FORMAT.md §19): its flag, its section count (the fourth
	// section is FILTER), and the reserved[] words that name its base and chain
	static final long FLAG_DELTA = 4, DELTA_HEADER_FLAGS = HEADER_FLAGS | FLAG_DELTA;
	static final int DELTA_SECTION_COUNT = 4;
	/** Indexes into the header's reserved[] (u64 words from {@link #H_RESERVED}). */
	static final int D_BASE_CHECKSUM = 0, D_BASE_SIZE = 1, D_PREV = 2, D_SEQ = 3;
	/** reserved[] words with a meaning in a delta; the rest are zero. */
	static final int DELTA_WORDS = 4, RESERVED_WORDS = 7;

	// the section table (FORMAT.md §4)
	static final int SECTION_SIZE = 32, S_KIND = 0, S_FLAGS = 4, S_OFFSET = 8, S_SIZE = 16, S_CHECKSUM = 24;
	static final int KIND_INDEX = 1, KIND_ENTRIES = 2, KIND_VALUES = 3;
	/** A delta's fourth section: the key filter's u64 words (FORMAT.md §19.3). */
	static final int KIND_FILTER = 4;
	/** Section kind names by kind (0: none). */
	static final String[] KIND_NAMES = {"unknown", "index", "entries", "values", "filter"};
	/** Sections start at a multiple of this. */
	static final int SECTION_ALIGN = 64;

	// an entry of ENTRIES (FORMAT.md §7)
	static final int ENTRY_SIZE = 8, E_TYPE = 0, E_FLAGS = 1, E_KEY_LEN = 2, E_VALUE_LEN = 4;
	static final int ENTRY_SHARED = 1, ENTRY_FLAGS = ENTRY_SHARED;
	/** Entries, and shared values in VALUES, start at a multiple of this. */
	static final int ENTRY_ALIGN = 8;

	// a bucket of the index (FORMAT.md §6.1)
	static final int BUCKET = 128, HEAD = 8, FILTER_BITS = 48, MAX_RECORDS = 16, DIR_BYTES = 2, DIR_OFF = 0x7f,
			DIR_TAG = 0xff80, DIR_TAG_SHIFT = 7, MAX_DISPLACEMENT_BYTE = 255;

	// a record of a bucket (FORMAT.md §6.2)
	static final int K_TYPE = 0x0f, K_EXPIRES = 0x40, K_OUT = 0x80, K_KNOWN = K_OUT | K_EXPIRES | K_TYPE;
	static final int INLINE_HEAD = 3, OUT_HEAD = 6, EXPIRES_SIZE = 4, MAX_INLINE_LEN = 255;
	/** An OUT record's entry offset is stored in units of this (entry_off40 >> 3). */
	static final int OUT_UNIT_SHIFT = 3;

	// tombstones (FORMAT.md §19.2): kind bit 4 in a delta (an error in a plain
	// image); an inline one's kind exactly 0x10, an OUT one's 0x90 with an entry of type 0
	static final int K_TOMB = 0x10, INLINE_TOMB = K_TOMB, OUT_TOMB = K_OUT | K_TOMB, TOMB_ENTRY_TYPE = 0;

	// the delta's key filter (FORMAT.md §19.3): a key of hash h may be in the
	// delta iff the bits (h >> FILTER_SHIFT_i) & 63 of word mulhi(h, words) are all set
	static final int FILTER_SHIFT_0 = 16, FILTER_SHIFT_1 = 22, FILTER_SHIFT_2 = 28;

	// limits (FORMAT.md §10)
	static final int MAX_KEY_LEN = 65535;
	static final long MAX_VALUE_LEN = 0xFFFF_FFFFL, MAX_IMAGE_SIZE = 1L << 43, MAX_EXPIRES = 0xFFFF_FFFFL;

	// the value types (FORMAT.md §8): code 1..9
	static final int BYTES = 1, STRING = 2, I64 = 3, BOOL = 4, F64 = 5, F32LIST = 6, F64LIST = 7, I64LIST = 8,
			STRLIST = 9, MAX_TYPE = 9;
	/** A type's shape: how its value_len and bytes are checked. */
	static final int SHAPE_TEXT = 0, SHAPE_FIXED = 1, SHAPE_ARRAY = 2, SHAPE_STRLIST = 3;
	static final String[] SHAPE_NAMES = {"text", "fixed", "array", "strlist"};

	/**
	 * The type table, by code: alignment of the value, whether a NUL follows
	 * it, its shape, element size (fixed: the value's size), the largest value
	 * of its bytes (fixed shapes: 255 any, bool's 1; others 0, unused),
	 * whether its text is UTF-8.
	 */
	private static final long[] TYPES = {
		0,
		type(1, true, SHAPE_TEXT, 1, 0, false), // bytes
		type(1, true, SHAPE_TEXT, 1, 0, true), // string
		type(8, false, SHAPE_FIXED, 8, 255, false), // i64
		type(1, false, SHAPE_FIXED, 1, 1, false), // bool
		type(8, false, SHAPE_FIXED, 8, 255, false), // f64
		type(8, false, SHAPE_ARRAY, 4, 0, false), // f32list
		type(8, false, SHAPE_ARRAY, 8, 0, false), // f64list
		type(8, false, SHAPE_ARRAY, 8, 0, false), // i64list
		type(8, false, SHAPE_STRLIST, 4, 0, true), // strlist
	};

	private static long type(int align, boolean nul, int shape, int elemSize, int maxByte, boolean utf8) {
		return align | (nul ? 1L : 0) << 8 | (long) shape << 16 | (long) elemSize << 24 | (long) maxByte << 32
				| (utf8 ? 1L : 0) << 40;
	}

	/** Whether code is a type of the table. */
	static boolean known(int code) {
		return code >= 1 && code <= MAX_TYPE;
	}

	/** Type code's value alignment: 1 or 8. */
	static int align(int code) {
		return (int) TYPES[code] & 0xff;
	}

	/** 1 when a NUL byte follows type code's value, else 0. */
	static int nul(int code) {
		return (int) (TYPES[code] >>> 8) & 1;
	}

	static int shape(int code) {
		return (int) (TYPES[code] >>> 16) & 0xff;
	}

	static int elemSize(int code) {
		return (int) (TYPES[code] >>> 24) & 0xff;
	}

	/** The largest value a fixed value's bytes may hold (255: any). */
	static int maxByte(int code) {
		return (int) (TYPES[code] >>> 32) & 0xff;
	}

	static boolean utf8(int code) {
		return (TYPES[code] >>> 40 & 1) != 0;
	}

	// The table again as constants, bit t of each for type t: what the
	// lookups' hot path reads (a static final is a constant to the JIT; the
	// table's elements are loads).

	/** The types whose value is 8-aligned. */
	static final int ALIGNED = mask(0);
	/** The types whose value a NUL follows. */
	static final int NUL_FOLLOWS = mask(1);
	/** The types whose text is UTF-8. */
	static final int UTF8 = mask(2);
	/** The text types (shape text). */
	static final int TEXT = mask(3);

	private static int mask(int which) {
		int m = 0;
		for (int t = 1; t <= MAX_TYPE; t++)
			if (switch (which) {
				case 0 -> align(t) == 8;
				case 1 -> nul(t) == 1;
				case 2 -> utf8(t);
				default -> shape(t) == SHAPE_TEXT;
			})
				m |= 1 << t;
		return m;
	}

	// the C reader's error codes (lib/shmkv/errors.h)
	static final int ENOTFOUND = -31200, ETYPE = -31201, EMAGIC = -31202, EVERSION = -31203, ELAYOUT = -31204,
			ETRUNCATED = -31205, ECHECKSUM = -31206, ECORRUPT = -31207, EKEYLEN = -31208, EEND = -31209,
			EDUPKEY = -31210, EINPUT = -31211, ELIMIT = -31212, EPROTO = -31213, ESTALE = -31214, EBASE = -31215;
}
