// layout_test: the image layout description in lib/shmkv/format.h is what the
// structs really are. SHMKV_LAYOUT_DESC is rebuilt from offsetof/sizeof and
// compared, and SHMKV_LAYOUT_HASH must be XXH3-64 (seed 0) of it; the hash,
// home and tag rules the description names are checked against probe.h.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include <shmkv.h>

namespace {

#define FIELD(s, f) (std::string(#f) + "@" + std::to_string(offsetof(s, f)))

std::string rebuilt_desc()
{
	using H = shmkv_image_header;
	using S = shmkv_section_desc;
	using E = shmkv_entry_header;
	std::string d = "shmkv-image-v1;";
	d += "header=" + std::to_string(sizeof(H)) + ":";
	d += FIELD(H, magic) + "," + FIELD(H, format_version) + "," + FIELD(H, header_size) + "," +
	     FIELD(H, layout_hash) + "," + FIELD(H, flags) + "," + FIELD(H, file_size) + "," +
	     FIELD(H, entry_count) + "," + FIELD(H, bucket_count) + "," + FIELD(H, bucket_slots) +
	     "," + FIELD(H, hash_bits) + "," + FIELD(H, hash_seed) + "," + FIELD(H, max_probe) +
	     "," + FIELD(H, section_count) + "," + FIELD(H, builder_version) + "," +
	     FIELD(H, reserved0) + "," + FIELD(H, created_unix) + "," +
	     FIELD(H, value_bytes_logical) + "," + FIELD(H, dedup_values) + "," +
	     FIELD(H, dedup_refs) + "," + FIELD(H, dedup_saved_bytes) + "," + FIELD(H, name) +
	     "," + FIELD(H, sections) + "," + FIELD(H, reserved) + "," +
	     FIELD(H, header_checksum) + ";";
	d += "section=" + std::to_string(sizeof(S)) + ":";
	d += FIELD(S, kind) + "," + FIELD(S, flags) + "," + FIELD(S, offset) + "," + FIELD(S, size) +
	     "," + FIELD(S, checksum) + ";";
	d += "entry=" + std::to_string(sizeof(E)) + ":";
	d += FIELD(E, type) + "," + FIELD(E, flags) + "," + FIELD(E, key_len) + "," +
	     FIELD(E, value_len) + ";";
	d += "bucket=" + std::to_string(SHMKV_BUCKET_BYTES) + ":" +
	     std::to_string(SHMKV_BUCKET_SLOTS) + "xu64(tag16<<" +
	     std::to_string(SHMKV_SLOT_TAG_SHIFT) + "|meta8<<" + std::to_string(SHMKV_SLOT_META_SHIFT) +
	     "|off>>3);";
	d += "meta0.." + std::to_string(SHMKV_BUCKET_SLOTS - 2) + "=filter" +
	     std::to_string(SHMKV_FILTER_BITS) + "[(tag*" + std::to_string(SHMKV_FILTER_BITS) +
	     ")>>16];meta" + std::to_string(SHMKV_BUCKET_SLOTS - 1) + "=maxdisp;";
	d += "hash=xxh3_64(seed);home=mulhi(h,buckets);tag=h&0xffff|1if0";
	return d;
}

#undef FIELD

TEST(Layout, DescriptionMatchesStructs)
{
	EXPECT_EQ(rebuilt_desc(), std::string(SHMKV_LAYOUT_DESC));
}

TEST(Layout, HashIsXxh3OfDescription)
{
	const char *d = SHMKV_LAYOUT_DESC;
	EXPECT_EQ(XXH3_64bits(d, strlen(d)), SHMKV_LAYOUT_HASH)
		<< std::hex << "computed 0x" << XXH3_64bits(d, strlen(d));
	std::string r = rebuilt_desc();
	EXPECT_EQ(XXH3_64bits(r.data(), r.size()), SHMKV_LAYOUT_HASH);
}

// The vocabulary a v1 reader refuses to guess at, rebuilt from the type table
// and the flag masks: a changed row, a new type or flag fails here, and
// format.h says why that is a new format version (FORMAT.md §15).
std::string rebuilt_vocab(uint64_t hflags = SHMKV_HFLAG_KNOWN, const std::string &extra = "")
{
	std::string d = "types=";
	for (unsigned t = 1; t <= SHMKV_TYPE_MAX; t++) {
		const shmkv_type_desc *r = shmkv_type_desc_of(t);
		d += (t > 1 ? "," : "") + std::to_string(t) + ":" + r->name + "/a" +
		     std::to_string(r->align);
		unsigned size = 1u << r->elem_shift;
		switch (r->shape) {
		case SHMKV_SHAPE_TEXT: d += r->nul ? "/nul/text" : "/text"; break;
		case SHMKV_SHAPE_FIXED:
			d += "/fixed" + std::to_string(size);
			if (r->max_byte != 255)
				d += "max" + std::to_string(r->max_byte);
			break;
		case SHMKV_SHAPE_ARRAY: d += "/array" + std::to_string(size); break;
		case SHMKV_SHAPE_STRLIST: d += "/strlist"; break;
		default: d += "/?";
		}
		if (r->utf8)
			d += "/utf8";
	}
	char hex[64];
	snprintf(hex, sizeof hex, ";eflags=%#x;hflags=%#llx;", (unsigned)SHMKV_EFLAG_KNOWN,
		 (unsigned long long)hflags);
	d += hex + extra;
	d += "sections=";
	for (uint32_t k = SHMKV_SECTION_INDEX; k <= SHMKV_SECTION_VALUES; k++)
		d += (k > 1 ? "," : "") + std::to_string(k) + ":" + shmkv_section_name(k);
	return d;
}

TEST(Layout, VocabularyIsFrozenForV1)
{
	ASSERT_EQ(SHMKV_FORMAT_VERSION, 1u);
	EXPECT_EQ(rebuilt_vocab(), std::string(SHMKV_VOCAB_DESC))
		<< "format v1's types, flags and sections are frozen: a change is a new format "
		   "version (lib/FORMAT.md §15)";
	EXPECT_EQ(shmkv_type_desc_of(0), nullptr);
	EXPECT_EQ(shmkv_type_desc_of(SHMKV_TYPE_MAX + 1), nullptr);
	EXPECT_STREQ(shmkv_section_name(SHMKV_SECTION_VALUES + 1), "unknown");
}

// v2's description: the structs as v1, the 128-byte bucket and record
// layout from format.h's constants, then the vocabulary, so that the v2
// hash covers the types and flags (FORMAT.md §17.8).
std::string rebuilt_desc_v2()
{
	std::string v1 = rebuilt_desc();
	std::string structs = v1.substr(strlen("shmkv-image-v1;"));
	structs = structs.substr(0, structs.find("bucket="));
	char rk[96];
	snprintf(rk, sizeof rk, "rkind=type%#x,expires%#x,out%#x;", SHMKV_REC_TYPE_MASK,
		 SHMKV_REC_EXPIRES, SHMKV_REC_OUT);
	std::string d = "shmkv-image-v2;" + structs;
	const std::string head = std::to_string(SHMKV_V2_BUCKET_HEAD);
	d += "bucket=" + std::to_string(SHMKV_V2_BUCKET_BYTES) + ":count@0[0.." +
	     std::to_string(SHMKV_V2_MAX_RECORDS) + "],disp@1,filter" +
	     std::to_string(SHMKV_V2_FILTER_BITS) + "@2[(tag*" + std::to_string(SHMKV_V2_FILTER_BITS) +
	     ")>>16],dir16@" + head + "[count]=(tag<<" + std::to_string(SHMKV_V2_DIR_TAG_SHIFT) +
	     "|off)&0xffff,records@" + head + "+" + std::to_string(SHMKV_V2_DIR_BYTES) + "*count.." +
	     std::to_string(SHMKV_V2_BUCKET_BYTES) + ",ascending,zero-gaps;";
	d += "record=kind8@0;inline=key_len8@1,value_len8@2,expires32@" +
	     std::to_string(SHMKV_REC_INLINE_HEAD) +
	     "?,key,pad0-to-align(type)-in-bucket,value,nul(type);out=entry_off40>>3@1,expires32@" +
	     std::to_string(SHMKV_REC_OUT_HEAD) + "?;expired=now>=expires;";
	d += "hash=xxh3_64(seed);home=mulhi(h,buckets);tag=h&0xffff|1if0;";
	d += rebuilt_vocab(SHMKV_HFLAG_KNOWN_V2, rk);
	return d;
}

TEST(Layout, V2DescriptionMatchesConstantsAndVocabulary)
{
	EXPECT_EQ(rebuilt_desc_v2(), std::string(SHMKV_LAYOUT_DESC_V2));
	EXPECT_EQ(std::string(SHMKV_VOCAB_DESC_V2),
		  rebuilt_vocab(SHMKV_HFLAG_KNOWN_V2,
				"rkind=type0xf,expires0x40,out0x80;"));
	// the description ends with the vocabulary: the hash covers the types
	std::string d = SHMKV_LAYOUT_DESC_V2, v = SHMKV_VOCAB_DESC_V2;
	ASSERT_GT(d.size(), v.size());
	EXPECT_EQ(d.substr(d.size() - v.size()), v);
	EXPECT_EQ(SHMKV_LAYOUT_HASH_V2, UINT64_C(0x5a240d8d9e73bf24)); // /work V2B.md, FORMAT.md §17.8
	EXPECT_EQ(XXH3_64bits(d.data(), d.size()), SHMKV_LAYOUT_HASH_V2)
		<< std::hex << "computed 0x" << XXH3_64bits(d.data(), d.size());
	EXPECT_NE(SHMKV_LAYOUT_HASH_V2, SHMKV_LAYOUT_HASH);
	EXPECT_EQ(d.size(), 1127u); // FORMAT.md §17.8 states it
}

TEST(Layout, V2Geometry)
{
	EXPECT_EQ(SHMKV_V2_BUCKET_BYTES, 2 * 64u); // an aligned pair of cache lines
	EXPECT_EQ(SHMKV_V2_BUCKET_HEAD, 2 + SHMKV_V2_FILTER_BITS / 8);
	// the directory: 16 u16 entries are two 16-byte vectors at +8 and +24
	EXPECT_EQ(SHMKV_V2_MAX_RECORDS * SHMKV_V2_DIR_BYTES, 32u);
	EXPECT_EQ(SHMKV_V2_DIR_BYTES, 2u); // dir = (tag << 7 | off) & 0xffff per record
	// the offset bits reach every byte of the bucket, the tag bits are the rest
	EXPECT_EQ(SHMKV_V2_DIR_OFF_MASK + 1, SHMKV_V2_BUCKET_BYTES);
	EXPECT_EQ(SHMKV_V2_DIR_OFF_MASK + 1, 1u << SHMKV_V2_DIR_TAG_SHIFT);
	EXPECT_EQ(SHMKV_V2_DIR_TAG_MASK, 0xffffu & ~SHMKV_V2_DIR_OFF_MASK);
	// 16 of the smallest records (an inline bool or empty bytes, empty key)
	// fit after a full directory, so count, not space, is the limit there
	EXPECT_LE(SHMKV_V2_BUCKET_HEAD + SHMKV_V2_MAX_RECORDS * (SHMKV_V2_DIR_BYTES +
								 SHMKV_REC_INLINE_HEAD + 1),
		  SHMKV_V2_BUCKET_BYTES);
	EXPECT_EQ(SHMKV_REC_KNOWN & 0x30u, 0u); // kind bits 4 and 5 are reserved
	EXPECT_EQ(SHMKV_HFLAG_KNOWN_V2 & SHMKV_HFLAG_KNOWN, SHMKV_HFLAG_KNOWN);
	EXPECT_GE(SHMKV_TYPE_MAX, 1);
	EXPECT_LE(SHMKV_TYPE_MAX, (int)SHMKV_REC_TYPE_MASK);
}

// Every row agrees with the getters' and the entry layout's use of it.
TEST(Layout, TypeRowsRoundTrip)
{
	for (unsigned t = 1; t <= SHMKV_TYPE_MAX; t++) {
		const shmkv_type_desc *r = shmkv_type_desc_of(t);
		ASSERT_NE(r, nullptr) << t;
		EXPECT_EQ(shmkv_type_by_name(r->name), t) << r->name;
		EXPECT_STREQ(shmkv_type_name(t), r->name);
		EXPECT_EQ(shmkv_type_align8(t), r->align == 8) << r->name;
		EXPECT_EQ(shmkv_value_stored_len(t, 5), 5u + r->nul) << r->name;
		// an inline value of 3 bytes after a 1-byte key, and the shared form
		EXPECT_EQ(shmkv_entry_size(t, 0, 1, 3), (r->align == 8 ? 16u + 3 + r->nul + 7 : 9u + 3 + r->nul + 7) / 8 * 8) << r->name;
		EXPECT_EQ(shmkv_entry_size(t, 1, 1, 3), 24u) << r->name;
	}
	EXPECT_EQ(shmkv_type_by_name("int32"), 0u);
	EXPECT_EQ(shmkv_type_by_name(""), 0u);
	EXPECT_STREQ(shmkv_type_name(0), "invalid");
	EXPECT_STREQ(shmkv_type_name(200), "invalid");
}

TEST(Layout, FieldSizes)
{
	shmkv_image_header h;
	EXPECT_EQ(sizeof h, SHMKV_HEADER_USED);
	EXPECT_EQ(sizeof h.magic, 8u);
	EXPECT_EQ(strlen(SHMKV_MAGIC), 8u);
	EXPECT_EQ(sizeof h.name, SHMKV_NAME_MAX + 1);
	EXPECT_EQ(sizeof h.sections / sizeof h.sections[0], SHMKV_MAX_SECTIONS);
	EXPECT_EQ(offsetof(shmkv_image_header, reserved) + sizeof h.reserved,
		  offsetof(shmkv_image_header, header_checksum));
	EXPECT_EQ(offsetof(shmkv_image_header, header_checksum) + 8, sizeof h);
	EXPECT_EQ(offsetof(shmkv_image_header, sections) + sizeof h.sections,
		  offsetof(shmkv_image_header, reserved));
	EXPECT_EQ(sizeof(shmkv_section_desc), 32u);
	EXPECT_EQ(sizeof(shmkv_entry_header), 8u);
	EXPECT_EQ(SHMKV_BUCKET_SLOTS * sizeof(uint64_t), SHMKV_BUCKET_BYTES);
	EXPECT_EQ(SHMKV_HEADER_SIZE % SHMKV_FILE_ALIGN, 0u);
	EXPECT_EQ(SHMKV_MAX_KEY_LEN, (unsigned)UINT16_MAX); // key_len is a u16
	EXPECT_EQ(SHMKV_MAX_VALUE_LEN, (unsigned)UINT32_MAX); // value_len is a u32
	// slot offsets in 8-byte units cover the whole image size limit, and the
	// offset, meta byte and tag fields tile the 64-bit slot
	EXPECT_EQ(SHMKV_SLOT_OFF_MASK + 1, SHMKV_MAX_IMAGE_SIZE >> 3);
	EXPECT_EQ(SHMKV_SLOT_OFF_MASK + 1, UINT64_C(1) << SHMKV_SLOT_META_SHIFT);
	EXPECT_EQ(SHMKV_SLOT_META_SHIFT + 8, SHMKV_SLOT_TAG_SHIFT);
	EXPECT_EQ(SHMKV_SLOT_TAG_SHIFT + 16, 64u);
	// the displaced-key filter is the meta bytes of all slots but the last
	EXPECT_EQ(SHMKV_FILTER_BITS, 8 * (SHMKV_BUCKET_SLOTS - 1));
	EXPECT_EQ(SHMKV_DISPLACEMENT_MAX, 255u);
}

// The rules behind "hash=xxh3_64(seed);home=mulhi(h,buckets);tag=h&0xffff|1if0".
TEST(Layout, HashHomeTagRules)
{
	const char key[] = "user:42";
	for (uint64_t seed : {UINT64_C(0), UINT64_C(1), UINT64_C(0x53484d4b56763121)})
		EXPECT_EQ(shmkv_key_hash(seed, 64, key, 7), XXH3_64bits_withSeed(key, 7, seed));
	// every length through each of XXH3's input classes (0-16 is reader's own
	// short path, probe.h), unaligned starts included
	unsigned char buf[304];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (unsigned char)(i * 131 + 7);
	for (size_t len = 0; len <= 300; len++)
		for (size_t at : {0, 1, 3})
			for (uint64_t seed : {UINT64_C(0), UINT64_C(0x53484d4b56763121)})
				ASSERT_EQ(shmkv_key_hash(seed, 64, buf + at, len),
					  XXH3_64bits_withSeed(buf + at, len, seed))
					<< "len " << len << " at " << at;
	EXPECT_EQ(shmkv_home_bucket(0, 1000), 0u);
	EXPECT_EQ(shmkv_home_bucket(UINT64_MAX, 1000), 999u);
	EXPECT_EQ(shmkv_home_bucket(UINT64_C(1) << 63, 1000), 500u);
	EXPECT_EQ(shmkv_home_bucket(UINT64_C(1) << 63, 1), 0u);
	EXPECT_EQ(shmkv_key_tag(0), 1u);
	EXPECT_EQ(shmkv_key_tag(0x10000), 1u);
	EXPECT_EQ(shmkv_key_tag(0xabcd0000ffffu), 0xffffu);
	EXPECT_EQ(shmkv_key_tag(0x1234), 0x1234u);
	// filter index: (tag * 56) >> 16, within the 56 filter bits for every tag
	EXPECT_EQ(shmkv_filter_index(1), 0u);
	EXPECT_EQ(shmkv_filter_index(0xffff), SHMKV_FILTER_BITS - 1);
	EXPECT_EQ(shmkv_filter_index(0x8000), SHMKV_FILTER_BITS / 2);
	for (uint64_t t = 1; t <= 0xffff; t++)
		ASSERT_LT(shmkv_filter_index(t), SHMKV_FILTER_BITS) << t;
	// reduced hashes (test images): 2^bits distinct values, spread by a multiply
	for (unsigned bits = 1; bits <= 8; bits++) {
		uint64_t h = shmkv_key_hash(7, bits, key, 7);
		uint64_t x = XXH3_64bits_withSeed(key, 7, 7) & ((UINT64_C(1) << bits) - 1);
		EXPECT_EQ(h, x * UINT64_C(0x9E3779B97F4A7C15));
	}
}

TEST(Layout, ErrorCodesAreDistinctAndNamed)
{
	for (int e = SHMKV_EFIRST_; e <= SHMKV_ELAST_; e++) {
		EXPECT_STRNE(shmkv_strerror(e), "unknown shmkv error") << e;
		for (int f = e + 1; f <= SHMKV_ELAST_; f++)
			EXPECT_STRNE(shmkv_strerror(e), shmkv_strerror(f));
	}
	EXPECT_LT(SHMKV_ELAST_, -4095); // clear of every -errno
	EXPECT_STREQ(shmkv_strerror(0), "success");
	EXPECT_STREQ(shmkv_strerror(-ENOENT), strerror(ENOENT));
	EXPECT_STREQ(shmkv_strerror(1), "unknown shmkv error");
	EXPECT_STREQ(shmkv_type_name(0), "invalid");
	EXPECT_STREQ(shmkv_type_name(SHMKV_TYPE_MAX + 1), "invalid");
	EXPECT_STREQ(shmkv_type_name(SHMKV_TYPE_F32LIST), "f32list");
}

} // namespace
