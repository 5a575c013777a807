// layout_test: the image layout in lib/shmkv/format.h is what the structs
// really are, and lib/format.json (the constants the Go, Java and Python
// readers check themselves against) says the same as the C reader.
// SHMKV_LAYOUT_DESC is rebuilt from offsetof/sizeof, the bucket and record
// constants, the type table and the masks, and SHMKV_LAYOUT_HASH must be
// XXH3-64 (seed 0) of it (lib/FORMAT.md §15); the hash, home, tag and
// directory rules the description names are checked against the format
// functions of lib/shmkv/tools.h.
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include <shmkv.h>

#include "json_util.h"

#ifndef SHMKV_FORMAT_JSON
#error "meson passes -DSHMKV_FORMAT_JSON=\"<source root>/lib/format.json\""
#endif

namespace {

#define FIELD(s, f) (std::string(#f) + "@" + std::to_string(offsetof(s, f)))

std::string hex(uint64_t x)
{
	char b[24];
	snprintf(b, sizeof b, "%#llx", (unsigned long long)x);
	return b;
}

// The header, section and entry structs, from offsetof/sizeof.
std::string rebuilt_structs()
{
	using H = shmkv_image_header;
	using S = shmkv_section_desc;
	using E = shmkv_entry_header;
	std::string d = "header=" + std::to_string(sizeof(H)) + ":";
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
	return d;
}

#undef FIELD

// The vocabulary a reader refuses to guess at (types with their shapes,
// flags, record kind bits, sections), rebuilt from the type table and the
// masks: a changed row, a new type or flag fails here, and format.h says
// why that is a new format version (FORMAT.md §15).
std::string rebuilt_vocab(bool delta = false)
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
	d += ";eflags=" + hex(SHMKV_EFLAG_KNOWN) + ";hflags=" +
	     hex(SHMKV_HFLAG_KNOWN | (delta ? SHMKV_HFLAG_DELTA : 0)) + ";";
	d += "rkind=type" + hex(SHMKV_REC_TYPE_MASK) + (delta ? ",tomb" + hex(SHMKV_REC_TOMB) : "") +
	     ",expires" + hex(SHMKV_REC_EXPIRES) + ",out" + hex(SHMKV_REC_OUT) + ";";
	d += "sections=";
	const uint32_t last = delta ? SHMKV_SECTION_FILTER : SHMKV_SECTION_VALUES;
	for (uint32_t k = SHMKV_SECTION_INDEX; k <= last; k++)
		d += (k > 1 ? "," : "") + std::to_string(k) + ":" + shmkv_section_name(k);
	if (!delta)
		return d;
	// a delta's own part (FORMAT.md §19): its reserved words, its tombstones, its filter
	const size_t r = offsetof(shmkv_image_header, reserved);
	d += ";delta=base_checksum@" + std::to_string(r + 8 * SHMKV_DELTA_BASE_CHECKSUM) +
	     ",base_size@" + std::to_string(r + 8 * SHMKV_DELTA_BASE_SIZE) + ",prev@" +
	     std::to_string(r + 8 * SHMKV_DELTA_PREV) + ",seq@" + std::to_string(r + 8 * SHMKV_DELTA_SEQ);
	d += ";tomb=inline:kind" + hex(SHMKV_REC_TOMB) + "/key_len8@1/value_len8@2=0/key,out:kind" +
	     hex(SHMKV_REC_OUT | SHMKV_REC_TOMB) + "/etype" + std::to_string(SHMKV_TYPE_TOMBSTONE) +
	     "/value_len0/key_len>0";
	d += ";filter=u64[words],word=mulhi(h,words),bits=h>>16&63|h>>22&63|h>>28&63";
	return d;
}

// The whole description: the structs, the 128-byte bucket and its records
// from format.h's constants, the hash rules, then the vocabulary, so that
// the hash covers the types and flags.
std::string rebuilt_desc(bool delta = false)
{
	const std::string head = std::to_string(SHMKV_BUCKET_HEAD);
	std::string d = std::string(delta ? "shmkv-delta-v" : "shmkv-image-v") +
			std::to_string(SHMKV_FORMAT_VERSION) + ";" + rebuilt_structs();
	d += "bucket=" + std::to_string(SHMKV_BUCKET_BYTES) + ":count@0[0.." +
	     std::to_string(SHMKV_MAX_RECORDS) + "],disp@1,filter" +
	     std::to_string(SHMKV_FILTER_BITS) + "@2[(tag*" + std::to_string(SHMKV_FILTER_BITS) +
	     ")>>16],dir16@" + head + "[count]=(tag<<" + std::to_string(SHMKV_DIR_TAG_SHIFT) +
	     "|off)&0xffff,records@" + head + "+" + std::to_string(SHMKV_DIR_BYTES) + "*count.." +
	     std::to_string(SHMKV_BUCKET_BYTES) + ",ascending,zero-gaps;";
	d += "record=kind8@0;inline=key_len8@1,value_len8@2,expires32@" +
	     std::to_string(SHMKV_REC_INLINE_HEAD) +
	     "?,key,pad0-to-align(type)-in-bucket,value,nul(type);out=entry_off40>>3@1,expires32@" +
	     std::to_string(SHMKV_REC_OUT_HEAD) + "?;expired=now>=expires;";
	d += "hash=xxh3_64(seed);home=mulhi(h,buckets);tag=h&0xffff|1if0;";
	d += rebuilt_vocab(delta);
	return d;
}

TEST(Layout, DescriptionMatchesStructsConstantsAndVocabulary)
{
	EXPECT_EQ(rebuilt_desc(), std::string(SHMKV_LAYOUT_DESC));
	// the description ends with the vocabulary: the hash covers the types
	const std::string d = SHMKV_LAYOUT_DESC, v = rebuilt_vocab();
	ASSERT_GT(d.size(), v.size());
	EXPECT_EQ(d.substr(d.size() - v.size()), v);
	EXPECT_EQ(d.compare(0, 15, "shmkv-image-v2;"), 0) << d;
	EXPECT_EQ(shmkv_type_desc_of(0), nullptr);
	EXPECT_EQ(shmkv_type_desc_of(SHMKV_TYPE_MAX + 1), nullptr);
	EXPECT_STREQ(shmkv_section_name(SHMKV_SECTION_FILTER + 1), "unknown");
	// a delta's (FORMAT.md §19): the same structs and records, its own vocabulary
	EXPECT_EQ(rebuilt_desc(true), std::string(SHMKV_DELTA_LAYOUT_DESC));
	EXPECT_EQ(std::string(SHMKV_DELTA_LAYOUT_DESC).compare(0, 15, "shmkv-delta-v2;"), 0);
}

TEST(Layout, HashIsXxh3OfDescription)
{
	const std::string d = SHMKV_LAYOUT_DESC, r = rebuilt_desc();
	EXPECT_EQ(XXH3_64bits(d.data(), d.size()), SHMKV_LAYOUT_HASH)
		<< std::hex << "computed 0x" << XXH3_64bits(d.data(), d.size());
	EXPECT_EQ(XXH3_64bits(r.data(), r.size()), SHMKV_LAYOUT_HASH);
	const std::string dd = SHMKV_DELTA_LAYOUT_DESC;
	EXPECT_EQ(XXH3_64bits(dd.data(), dd.size()), SHMKV_DELTA_LAYOUT_HASH)
		<< std::hex << "computed 0x" << XXH3_64bits(dd.data(), dd.size());
	EXPECT_NE(SHMKV_DELTA_LAYOUT_HASH, SHMKV_LAYOUT_HASH);
}

TEST(Layout, Geometry)
{
	EXPECT_EQ(SHMKV_BUCKET_BYTES, 2 * 64u); // an aligned pair of cache lines
	EXPECT_EQ(SHMKV_BUCKET_HEAD, 2 + SHMKV_FILTER_BITS / 8);
	// the directory: 16 u16 entries are two 16-byte vectors at +8 and +24
	EXPECT_EQ(SHMKV_MAX_RECORDS * SHMKV_DIR_BYTES, 32u);
	EXPECT_EQ(SHMKV_DIR_BYTES, 2u); // dir = (tag << 7 | off) & 0xffff per record
	EXPECT_EQ(shmkv_dir_end(0), SHMKV_BUCKET_HEAD);
	EXPECT_EQ(shmkv_dir_end(SHMKV_MAX_RECORDS), SHMKV_BUCKET_HEAD + 32u);
	// the offset bits reach every byte of the bucket, the tag bits are the rest
	EXPECT_EQ(SHMKV_DIR_OFF_MASK + 1, SHMKV_BUCKET_BYTES);
	EXPECT_EQ(SHMKV_DIR_OFF_MASK + 1, 1u << SHMKV_DIR_TAG_SHIFT);
	EXPECT_EQ(SHMKV_DIR_TAG_MASK, 0xffffu & ~SHMKV_DIR_OFF_MASK);
	EXPECT_EQ(shmkv_dir_entry(0x1234, 0x55), ((0x1234u << 7) | 0x55u) & 0xffffu);
	EXPECT_EQ(shmkv_dir_entry(0xffff, 127), 0xffffu);
	// 16 of the smallest records (an inline bool or empty bytes, empty key)
	// fit after a full directory, so count, not space, is the limit there
	EXPECT_LE(SHMKV_BUCKET_HEAD +
			  SHMKV_MAX_RECORDS * (SHMKV_DIR_BYTES + SHMKV_REC_INLINE_HEAD + 1),
		  SHMKV_BUCKET_BYTES);
	EXPECT_EQ(SHMKV_REC_KNOWN & 0x30u, 0u); // kind bits 4 and 5 are reserved
	EXPECT_EQ(SHMKV_REC_KNOWN, SHMKV_REC_TYPE_MASK | SHMKV_REC_EXPIRES | SHMKV_REC_OUT);
	EXPECT_GE(SHMKV_TYPE_MAX, 1);
	EXPECT_LE(SHMKV_TYPE_MAX, (int)SHMKV_REC_TYPE_MASK);
	EXPECT_EQ(SHMKV_REC_MAX_LEN, 255u); // inline key_len and value_len are u8
	// OUT records hold 40-bit entry units of 8 bytes: the image size limit
	EXPECT_EQ(SHMKV_UNIT_MASK + 1, SHMKV_MAX_IMAGE_SIZE >> 3);
	EXPECT_EQ(SHMKV_REC_OUT_HEAD, 1u + 5u);
	// a record's span: inline head, expiry, key, the value aligned in the
	// bucket for its type, the NUL of text; an OUT record's head and expiry
	unsigned kp = 9, vp = 9;
	EXPECT_EQ(shmkv_record_span(16, SHMKV_TYPE_I64, 1, 8, &kp, &vp), 32u);
	EXPECT_EQ(kp, 19u);
	EXPECT_EQ(vp, 24u);
	EXPECT_EQ(shmkv_record_span(16, SHMKV_TYPE_STRING | SHMKV_REC_EXPIRES, 2, 3, &kp, &vp),
		  16u + 3 + 4 + 2 + 3 + 1);
	EXPECT_EQ(kp, 23u);
	EXPECT_EQ(vp, 25u);
	EXPECT_EQ(shmkv_record_span(16, SHMKV_REC_OUT, 0, 0, &kp, &vp), 22u);
	EXPECT_EQ(shmkv_record_span(16, SHMKV_REC_OUT | SHMKV_REC_EXPIRES, 0, 0, &kp, &vp), 26u);
	EXPECT_EQ(kp, 0u);
	EXPECT_EQ(vp, 0u);
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
		EXPECT_EQ(shmkv_entry_size(t, 0, 1, 3),
			  (r->align == 8 ? 16u + 3 + r->nul + 7 : 9u + 3 + r->nul + 7) / 8 * 8)
			<< r->name;
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
	EXPECT_EQ(SHMKV_HEADER_SIZE % SHMKV_FILE_ALIGN, 0u);
	EXPECT_EQ(SHMKV_MAX_KEY_LEN, (unsigned)UINT16_MAX);   // key_len is a u16
	EXPECT_EQ(SHMKV_MAX_VALUE_LEN, (unsigned)UINT32_MAX); // value_len is a u32
	EXPECT_EQ(SHMKV_DISPLACEMENT_MAX, 255u);              // D is a byte
}

// The rules behind "hash=xxh3_64(seed);home=mulhi(h,buckets);tag=h&0xffff|1if0"
// and the filter's "(tag*48)>>16".
TEST(Layout, HashHomeTagRules)
{
	const char key[] = "user:42";
	for (uint64_t seed : {UINT64_C(0), UINT64_C(1), UINT64_C(0x53484d4b56763121)})
		EXPECT_EQ(shmkv_key_hash(seed, 64, key, 7), XXH3_64bits_withSeed(key, 7, seed));
	// every length through each of XXH3's input classes (0-16 is the
	// reader's own short path, probe.h), unaligned starts included
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
	// filter index: (tag * 48) >> 16, within the 48 filter bits for every tag
	EXPECT_EQ(shmkv_filter_index(1), 0u);
	EXPECT_EQ(shmkv_filter_index(0xffff), SHMKV_FILTER_BITS - 1);
	EXPECT_EQ(shmkv_filter_index(0x8000), SHMKV_FILTER_BITS / 2);
	for (uint64_t t = 1; t <= 0xffff; t++)
		ASSERT_EQ(shmkv_filter_index(t), (t * SHMKV_FILTER_BITS) >> 16) << t;
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

// ---- lib/format.json against the C reader ----

using shmkv_test::Json;

// The JSON file, parsed (a failure names the path).
const Json &format_json()
{
	static Json j;
	static bool done = false;
	if (!done) {
		done = true;
		std::ifstream f(SHMKV_FORMAT_JSON);
		std::stringstream text;
		text << f.rdbuf();
		EXPECT_TRUE(f.good() || f.eof()) << SHMKV_FORMAT_JSON << ": " << strerror(errno);
		EXPECT_TRUE(shmkv_test::parse_json(text.str(), &j))
			<< SHMKV_FORMAT_JSON << " is not JSON";
	}
	return j;
}

// A number member (integers only: every constant of the format is one).
long long num(const Json &parent, const std::string &k)
{
	const Json *v = parent.get(k);
	EXPECT_TRUE(v && v->kind == Json::NUM) << k << " is missing or not a number";
	return v && v->kind == Json::NUM ? strtoll(v->str.c_str(), nullptr, 10) : -1;
}

std::string str(const Json &parent, const std::string &k)
{
	const Json *v = parent.get(k);
	EXPECT_TRUE(v && v->kind == Json::STR) << k << " is missing or not a string";
	return v ? v->s() : "";
}

std::set<std::string> keys(const Json &o)
{
	std::set<std::string> s;
	for (const auto &kv : o.obj)
		s.insert(kv.first);
	return s;
}

// Every member of obj, each compared with the C value of the same name.
void expect_members(const Json &obj, const std::string &what,
		    const std::map<std::string, long long> &c)
{
	ASSERT_EQ(obj.kind, Json::OBJ) << what;
	std::set<std::string> want;
	for (const auto &kv : c) {
		want.insert(kv.first);
		EXPECT_EQ(num(obj, kv.first), kv.second) << what << "." << kv.first;
	}
	EXPECT_EQ(keys(obj), want) << what << ": a member the C reader does not have, or one "
				      "missing from format.json";
}

#define OFF(s, f) {#f, (long long)offsetof(s, f)}

TEST(FormatJson, TopLevelMembersAreKnown)
{
	const Json &j = format_json();
	ASSERT_EQ(j.kind, Json::OBJ);
	// a member added to format.json must be checked here too
	const std::set<std::string> known = {
		"about",  "magic",   "format_version", "layout_hash", "layout_desc",
		"retired_versions", "header", "section", "section_kinds", "entry",
		"header_flags", "entry_flags", "bucket", "record", "limits",
		"types",  "errors",  "messages", "delta_layout_hash", "delta_layout_desc", "delta"};
	EXPECT_EQ(keys(j), known);
}

// A delta's constants (FORMAT.md §19).
TEST(FormatJson, Delta)
{
	const Json &j = format_json();
	// format.json writes all 16 digits (0x0111...): compare the number.
	EXPECT_EQ(strtoull(str(j, "delta_layout_hash").c_str(), nullptr, 16),
		  (unsigned long long)SHMKV_DELTA_LAYOUT_HASH);
	EXPECT_EQ(str(j, "delta_layout_desc"), SHMKV_DELTA_LAYOUT_DESC);
	const Json &d = j["delta"];
	ASSERT_EQ(d.kind, Json::OBJ);
	EXPECT_EQ(keys(d), (std::set<std::string>{"header_flag", "section_count", "reserved",
						 "record_tomb", "inline_tomb_kind", "out_tomb_kind",
						 "tomb_entry_type", "filter_section",
						 "filter_shifts"}));
	EXPECT_EQ(num(d, "header_flag"), (long long)SHMKV_HFLAG_DELTA);
	EXPECT_EQ(num(d, "section_count"), (long long)SHMKV_DELTA_SECTIONS);
	expect_members(d["reserved"], "delta.reserved",
		       {{"base_checksum", SHMKV_DELTA_BASE_CHECKSUM},
			{"base_size", SHMKV_DELTA_BASE_SIZE},
			{"prev", SHMKV_DELTA_PREV},
			{"seq", SHMKV_DELTA_SEQ}});
	EXPECT_EQ(num(d, "record_tomb"), (long long)SHMKV_REC_TOMB);
	EXPECT_EQ(num(d, "inline_tomb_kind"), (long long)SHMKV_REC_TOMB);
	EXPECT_EQ(num(d, "out_tomb_kind"), (long long)(SHMKV_REC_OUT | SHMKV_REC_TOMB));
	EXPECT_EQ(num(d, "tomb_entry_type"), (long long)SHMKV_TYPE_TOMBSTONE);
	EXPECT_EQ(num(d, "filter_section"), (long long)SHMKV_SECTION_FILTER);
	// the shifts: those of the rule, checked on a hash with one bit per field
	const Json &sh = d["filter_shifts"];
	ASSERT_EQ(sh.kind, Json::ARR);
	ASSERT_EQ(sh.arr.size(), 3u);
	uint64_t h = 0;
	for (const Json &x : sh.arr)
		h |= UINT64_C(5) << (int)x.num;
	EXPECT_EQ(shmkv_delta_filter_mask(h), UINT64_C(1) << 5);
	EXPECT_EQ(shmkv_delta_filter_mask(UINT64_C(1) << 16 | UINT64_C(2) << 22 | UINT64_C(3) << 28),
		  UINT64_C(0xe));
}

TEST(FormatJson, IdentityLayoutHashAndDescription)
{
	const Json &j = format_json();
	EXPECT_EQ(str(j, "magic"), SHMKV_MAGIC);
	EXPECT_EQ(num(j, "format_version"), (long long)SHMKV_FORMAT_VERSION);
	EXPECT_EQ(strtoull(str(j, "layout_hash").c_str(), nullptr, 16), SHMKV_LAYOUT_HASH)
		<< str(j, "layout_hash");
	EXPECT_EQ(str(j, "layout_hash"), hex(SHMKV_LAYOUT_HASH));
	EXPECT_EQ(str(j, "layout_desc"), SHMKV_LAYOUT_DESC);
	const std::string d = str(j, "layout_desc");
	EXPECT_EQ(XXH3_64bits(d.data(), d.size()), SHMKV_LAYOUT_HASH);
}

TEST(FormatJson, HeaderSectionAndEntryFields)
{
	const Json &j = format_json();
	const Json &h = j["header"];
	ASSERT_EQ(h.kind, Json::OBJ);
	using H = shmkv_image_header;
	EXPECT_EQ(num(h, "size"), (long long)SHMKV_HEADER_SIZE);
	EXPECT_EQ(num(h, "used"), (long long)sizeof(H));
	EXPECT_EQ(num(h, "used"), (long long)SHMKV_HEADER_USED);
	EXPECT_EQ(num(h, "checksum_offset"), (long long)offsetof(H, header_checksum));
	EXPECT_EQ(num(h, "file_align"), (long long)SHMKV_FILE_ALIGN);
	EXPECT_EQ(num(h, "name_max"), (long long)SHMKV_NAME_MAX);
	EXPECT_EQ(num(h, "max_sections"), (long long)SHMKV_MAX_SECTIONS);
	// the format has one section of each kind, in kind order
	EXPECT_EQ(num(h, "section_count"), (long long)SHMKV_SECTION_VALUES);
	EXPECT_EQ(keys(h), (std::set<std::string>{"size", "used", "checksum_offset", "file_align",
						 "name_max", "max_sections", "section_count",
						 "fields"}));
	expect_members(h["fields"], "header.fields",
		       {OFF(H, magic), OFF(H, format_version), OFF(H, header_size),
			OFF(H, layout_hash), OFF(H, flags), OFF(H, file_size), OFF(H, entry_count),
			OFF(H, bucket_count), OFF(H, bucket_slots), OFF(H, hash_bits),
			OFF(H, hash_seed), OFF(H, max_probe), OFF(H, section_count),
			OFF(H, builder_version), OFF(H, reserved0), OFF(H, created_unix),
			OFF(H, value_bytes_logical), OFF(H, dedup_values), OFF(H, dedup_refs),
			OFF(H, dedup_saved_bytes), OFF(H, name), OFF(H, sections), OFF(H, reserved),
			OFF(H, header_checksum)});
	using S = shmkv_section_desc;
	const Json &s = j["section"];
	EXPECT_EQ(num(s, "size"), (long long)sizeof(S));
	EXPECT_EQ(keys(s), (std::set<std::string>{"size", "fields"}));
	expect_members(s["fields"], "section.fields",
		       {OFF(S, kind), OFF(S, flags), OFF(S, offset), OFF(S, size), OFF(S, checksum)});
	using E = shmkv_entry_header;
	const Json &e = j["entry"];
	EXPECT_EQ(num(e, "size"), (long long)sizeof(E));
	EXPECT_EQ(keys(e), (std::set<std::string>{"size", "fields"}));
	expect_members(e["fields"], "entry.fields",
		       {OFF(E, type), OFF(E, flags), OFF(E, key_len), OFF(E, value_len)});
}

#undef OFF

TEST(FormatJson, SectionKindsAndFlags)
{
	const Json &j = format_json();
	expect_members(j["section_kinds"], "section_kinds",
		       {{"index", SHMKV_SECTION_INDEX},
			{"entries", SHMKV_SECTION_ENTRIES},
			{"values", SHMKV_SECTION_VALUES}});
	for (const auto &kv : j["section_kinds"].obj)
		EXPECT_EQ(kv.first, shmkv_section_name((uint32_t)strtoul(kv.second.str.c_str(), nullptr, 10)));
	expect_members(j["header_flags"], "header_flags",
		       {{"dedup", (long long)SHMKV_HFLAG_DEDUP}, {"expiry", (long long)SHMKV_HFLAG_EXPIRY}});
	EXPECT_EQ(SHMKV_HFLAG_KNOWN, SHMKV_HFLAG_DEDUP | SHMKV_HFLAG_EXPIRY);
	expect_members(j["entry_flags"], "entry_flags", {{"shared", SHMKV_EFLAG_SHARED}});
	EXPECT_EQ(SHMKV_EFLAG_KNOWN, SHMKV_EFLAG_SHARED);
}

TEST(FormatJson, BucketRecordAndLimits)
{
	const Json &j = format_json();
	expect_members(j["bucket"], "bucket",
		       {{"bytes", SHMKV_BUCKET_BYTES},
			{"head", SHMKV_BUCKET_HEAD},
			{"filter_bits", SHMKV_FILTER_BITS},
			{"max_records", SHMKV_MAX_RECORDS},
			{"dir_bytes", SHMKV_DIR_BYTES},
			{"dir_off_mask", SHMKV_DIR_OFF_MASK},
			{"dir_tag_mask", SHMKV_DIR_TAG_MASK},
			{"dir_tag_shift", SHMKV_DIR_TAG_SHIFT},
			{"max_displacement_byte", SHMKV_DISPLACEMENT_MAX}});
	expect_members(j["record"], "record",
		       {{"type_mask", SHMKV_REC_TYPE_MASK},
			{"expires", SHMKV_REC_EXPIRES},
			{"out", SHMKV_REC_OUT},
			{"known", SHMKV_REC_KNOWN},
			{"inline_head", SHMKV_REC_INLINE_HEAD},
			{"out_head", SHMKV_REC_OUT_HEAD},
			{"expires_size", SHMKV_REC_EXPIRES_SIZE},
			{"max_inline_len", SHMKV_REC_MAX_LEN}});
	// an expiry is a u32 of unix seconds in the record
	expect_members(j["limits"], "limits",
		       {{"max_key_len", SHMKV_MAX_KEY_LEN},
			{"max_value_len", (long long)SHMKV_MAX_VALUE_LEN},
			{"max_image_size", (long long)SHMKV_MAX_IMAGE_SIZE},
			{"max_expires", (long long)UINT32_MAX}});
	EXPECT_EQ(SHMKV_REC_EXPIRES_SIZE, sizeof(uint32_t));
}

TEST(FormatJson, TypeTable)
{
	const Json &t = format_json()["types"];
	ASSERT_EQ(t.kind, Json::ARR);
	ASSERT_EQ(t.arr.size(), (size_t)SHMKV_TYPE_MAX);
	const char *shapes[] = {"", "text", "fixed", "array", "strlist"};
	for (size_t i = 0; i < t.arr.size(); i++) {
		const Json &row = t.arr[i];
		const long long code = num(row, "code");
		SCOPED_TRACE("types[" + std::to_string(i) + "] code " + std::to_string(code));
		EXPECT_EQ(code, (long long)i + 1) << "rows in code order";
		const shmkv_type_desc *r = shmkv_type_desc_of((unsigned)code);
		ASSERT_NE(r, nullptr);
		EXPECT_EQ(str(row, "name"), r->name);
		EXPECT_EQ(num(row, "align"), r->align);
		EXPECT_EQ(num(row, "nul"), r->nul);
		ASSERT_GE(r->shape, 1);
		ASSERT_LE(r->shape, 4);
		EXPECT_EQ(str(row, "shape"), shapes[r->shape]);
		EXPECT_EQ(num(row, "elem_size"), 1LL << r->elem_shift);
		EXPECT_EQ(num(row, "max_byte"), r->max_byte);
		const Json *u = row.get("utf8");
		ASSERT_TRUE(u && u->kind == Json::BOOL) << "utf8 missing or not a bool";
		EXPECT_EQ(u->b, r->utf8 != 0);
		EXPECT_EQ(keys(row), (std::set<std::string>{"code", "name", "align", "nul", "shape",
							    "elem_size", "max_byte", "utf8"}));
	}
}

TEST(FormatJson, ErrorCodes)
{
	const Json &e = format_json()["errors"];
	ASSERT_EQ(e.kind, Json::OBJ);
	std::map<std::string, long long> c;
	for (int code = SHMKV_EFIRST_; code <= SHMKV_ELAST_; code++) {
		const std::string name = shmkv_errname(code);
		ASSERT_EQ(name.compare(0, 6, "SHMKV_"), 0) << code << ": " << name;
		c[name.substr(6)] = code;
	}
	expect_members(e, "errors", c);
	EXPECT_EQ(num(e, "ENOTFOUND"), SHMKV_ENOTFOUND);
	EXPECT_EQ(num(e, "ECORRUPT"), SHMKV_ECORRUPT);
	EXPECT_EQ(num(e, "EVERSION"), SHMKV_EVERSION);
}

// A format 1 header (its own layout hash, checksummed): the C reader's
// message for it is format.json's retired-version message, and every
// reader's upgrade advice names the same command.
TEST(FormatJson, RetiredVersionMessage)
{
	const Json &j = format_json();
	const Json &r = j["retired_versions"];
	ASSERT_EQ(r.kind, Json::OBJ);
	EXPECT_EQ(keys(r), (std::set<std::string>{"1"})) << "format 1 is the one retired version";
	const Json &v1 = r["1"];
	EXPECT_EQ(str(v1, "upgrade"), SHMKV_RETIRED_V1_UPGRADE);
	const uint64_t v1_hash = strtoull(str(v1, "layout_hash").c_str(), nullptr, 16);
	EXPECT_NE(v1_hash, SHMKV_LAYOUT_HASH);
	EXPECT_EQ(keys(j["messages"]), (std::set<std::string>{"retired_version"}));
	const std::string msg = str(j["messages"], "retired_version");

	std::string img(SHMKV_HEADER_SIZE * 2, '\0');
	auto *h = reinterpret_cast<shmkv_image_header *>(&img[0]);
	memcpy(h->magic, SHMKV_MAGIC, 8);
	h->format_version = 1;
	h->header_size = SHMKV_HEADER_SIZE;
	h->layout_hash = v1_hash;
	h->file_size = img.size();
	h->header_checksum = XXH3_64bits(img.data(), offsetof(shmkv_image_header, header_checksum));
	char why[512] = "";
	EXPECT_EQ(shmkv_image_check(img.data(), img.size(), 0, why, sizeof why), SHMKV_EVERSION);
	EXPECT_EQ(std::string(why), msg) << "the C reader's message and format.json's differ";
	EXPECT_NE(msg.find(SHMKV_RETIRED_V1_UPGRADE), std::string::npos) << msg;
	// the version check comes before the layout hash's: version 1 with
	// format 2's hash, or with any other, is still the retired version
	for (uint64_t lh : {(uint64_t)SHMKV_LAYOUT_HASH, UINT64_C(0)}) {
		h->layout_hash = lh;
		h->header_checksum = XXH3_64bits(img.data(), offsetof(shmkv_image_header, header_checksum));
		why[0] = 0;
		EXPECT_EQ(shmkv_image_check(img.data(), img.size(), 0, why, sizeof why), SHMKV_EVERSION);
		EXPECT_EQ(std::string(why), msg);
	}
	// format 2 with format 1's layout hash: a layout error
	h->format_version = SHMKV_FORMAT_VERSION;
	h->layout_hash = v1_hash;
	h->header_checksum = XXH3_64bits(img.data(), offsetof(shmkv_image_header, header_checksum));
	EXPECT_EQ(shmkv_image_check(img.data(), img.size(), 0, why, sizeof why), SHMKV_ELAYOUT) << why;
}

} // namespace
