// upgrade_test: shmkv_build_upgrade() (builder/upgrade_v1.cc), the C API of
// `shmctl image upgrade` and Python's shmkv.upgrade: a format 1 image
// becomes the format 2 image a fresh build of its records gives.
//
//   Upgrade.VectorsBecomeFreshBuilds  every format 1 file of tests/vectors/v1/: the bytes
//                                     of a build of its manifest records with its header's
//                                     options (seed, hash bits, name, created, dedup), also
//                                     under a memory limit on 2 threads; stats; verify
//   Upgrade.DamagedImagesRefused      format 1 images damaged (magic, truncation, version,
//                                     layout hash, header and section checksums, an entry or
//                                     value past its section, a shared value outside VALUES,
//                                     entry_count and dedup_refs wrong, type, flags, UTF-8,
//                                     bytes outside the sections, the section table, a key
//                                     twice), checksums made right where the damage is
//                                     structural: the error code, a message naming the file,
//                                     the offset and the rule, nothing left in the directory
//   Upgrade.OtherFormatsRefused       a format 2 image ("already format 2") and format 3:
//                                     SHMKV_EVERSION, nothing written
//   Upgrade.OutputChecks              the input as the output, a directory, no input: refused,
//                                     the input untouched; join of a format 1 fragment: the
//                                     reader's EVERSION naming the upgrade
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <shmkv.h>
#include <shmkv_build.h>
#include <xxhash.h>

#include "../json_util.h"
#include "../test_util.h"

using namespace shmkv_test;

namespace {

const std::string kRoot = SHMKV_SOURCE_ROOT;
const std::string kVectors = kRoot + "/tests/vectors";

std::string unhex(const std::string &h)
{
	std::string out;
	for (size_t i = 0; i + 1 < h.size(); i += 2)
		out.push_back((char)std::stoi(h.substr(i, 2), nullptr, 16));
	return out;
}

// A format 1 image in memory: its header, its entries (found by the walk of
// lib/FORMAT.md §7), and the checksums made right again after a change.
struct V1 {
	std::string img;
	explicit V1(const std::string &path) : img(read_file(path)) {}
	shmkv_image_header &h() { return *(shmkv_image_header *)(void *)&img[0]; }
	template <typename T>
	T get(uint64_t off) const
	{
		T v;
		memcpy(&v, img.data() + off, sizeof v);
		return v;
	}
	template <typename T>
	void put(uint64_t off, T v)
	{
		memcpy(&img[off], &v, sizeof v);
	}
	std::vector<uint64_t> entries()
	{
		std::vector<uint64_t> out;
		uint64_t pos = h().sections[1].offset, end = pos + h().sections[1].size;
		while (pos < end) {
			if (get<uint64_t>(pos) == 0) {
				pos += 8;
				continue;
			}
			shmkv_entry_header eh = get<shmkv_entry_header>(pos);
			out.push_back(pos);
			pos += shmkv_entry_size(eh.type, eh.flags & SHMKV_EFLAG_SHARED, eh.key_len,
						eh.value_len);
		}
		return out;
	}
	shmkv_entry_header eh(uint64_t off) const { return get<shmkv_entry_header>(off); }
	void reseal()
	{
		for (int i = 0; i < 3; i++) {
			shmkv_section_desc &s = h().sections[i];
			s.checksum = XXH3_64bits(img.data() + s.offset, (size_t)s.size);
		}
		h().header_checksum =
			XXH3_64bits(img.data(), offsetof(shmkv_image_header, header_checksum));
	}
};

struct Upgraded {
	int err;
	std::string why;
	shmkv_build_stats st;
};

Upgraded upgrade(const std::string &out, const std::string &in,
		 const shmkv_join_options *jo = nullptr)
{
	Upgraded u;
	char why[1024] = "x";
	memset(&u.st, 0, sizeof u.st);
	u.err = shmkv_build_upgrade(out.c_str(), in.c_str(), jo, &u.st, why, sizeof why);
	u.why = why;
	return u;
}

TEST(Upgrade, VectorsBecomeFreshBuilds)
{
	Json m;
	ASSERT_TRUE(parse_json(read_file(kVectors + "/manifest.json"), &m));
	TempDir dir;
	int n = 0;
	for (const Json &v : m["vectors"].arr) {
		if (v["format"].num != 1)
			continue;
		n++;
		const std::string name = v["name"].str, in = kVectors + "/" + v["file"].str;
		SCOPED_TRACE(name);
		V1 old(in);
		ASSERT_GE(old.img.size(), 4096u);
		ASSERT_EQ(old.h().format_version, 1u);
		// a fresh build of its records with its header's options
		shmkv_build_options o = test_options();
		o.seed = old.h().hash_seed;
		o.hash_bits = old.h().hash_bits;
		o.created = old.h().created_unix;
		memcpy(o.name, old.h().name, sizeof o.name);
		o.dedup = (old.h().flags & SHMKV_HFLAG_DEDUP) != 0;
		Builder b(o);
		ASSERT_TRUE(b.ok());
		for (const Json &r : v["records"].arr) {
			std::string key = unhex(r["key_hex"].str), val = unhex(r["raw_hex"].str);
			unsigned type = shmkv_type_by_name(r["type"].str.c_str());
			ASSERT_NE(type, 0u) << r["type"].str;
			ASSERT_EQ(shmkv_builder_add(b, key.data(), key.size(), type, val.data(), val.size()),
				  0) << b.error();
		}
		std::string fresh = dir.file(name + ".fresh"), up = dir.file(name + ".up");
		ASSERT_EQ(b.finish(fresh), 0) << b.error();
		Upgraded u = upgrade(up, in);
		ASSERT_EQ(u.err, 0) << u.why;
		EXPECT_EQ(u.why, "");
		EXPECT_TRUE(read_file(up) == read_file(fresh)) << "not the fresh build's bytes";
		EXPECT_EQ(u.st.entries, v["records"].arr.size());
		EXPECT_EQ(u.st.records, v["records"].arr.size());
		Db db = open_db(up);
		ASSERT_TRUE(db);
		EXPECT_EQ(verify_msg(db), "");
		EXPECT_EQ(db.hdr()->format_version, 2u);
		EXPECT_EQ(db.hdr()->hash_seed, old.h().hash_seed);
		EXPECT_STREQ(db.hdr()->name, old.h().name);

		// a memory limit (16 MiB: a record of long_keys takes 64 KiB), 2
		// threads, no stats: the same bytes
		shmkv_join_options jo;
		shmkv_join_options_init(&jo);
		jo.memory_limit = 16 << 20;
		jo.threads = 2;
		jo.tmpdir = dir.path().c_str();
		std::string up2 = dir.file(name + ".up2");
		char why[512];
		ASSERT_EQ(shmkv_build_upgrade(up2.c_str(), in.c_str(), &jo, nullptr, why, sizeof why), 0)
			<< why;
		EXPECT_TRUE(read_file(up2) == read_file(fresh));
	}
	EXPECT_EQ(n, 7) << "format 1 vectors in the manifest";
}

// Upgrades the damaged image (written to dir as name) expecting code and a
// message holding the file's path and each needle; nothing may be left.
void refused(const TempDir &dir, const std::string &name, const std::string &img, int code,
	     const std::vector<std::string> &needles)
{
	SCOPED_TRACE(name);
	std::string in = dir.file(name);
	ASSERT_TRUE(write_file(in, img));
	std::vector<std::string> before = list_dir(dir.path());
	std::string out = dir.file("out.shmkv");
	Upgraded u = upgrade(out, in);
	EXPECT_EQ(u.err, code) << shmkv_strerror(u.err) << ": " << u.why;
	EXPECT_EQ(u.why.rfind(in + ": ", 0), 0u) << u.why << " does not start with the file";
	for (const auto &n : needles)
		EXPECT_NE(u.why.find(n), std::string::npos) << u.why << " lacks " << n;
	EXPECT_FALSE(file_exists(out));
	EXPECT_EQ(list_dir(dir.path()), before) << "a refused upgrade left a file";
	unlink(in.c_str());
}

TEST(Upgrade, DamagedImagesRefused)
{
	TempDir dir;
	const std::string base = kVectors + "/v1/base.img", keys = kVectors + "/v1/displaced.img";
	auto damaged = [&](const std::string &from, const std::function<void(V1 &)> &f,
			   bool reseal) {
		V1 v(from);
		f(v);
		if (reseal)
			v.reseal();
		return v.img;
	};
	V1 ref(base);
	const std::vector<uint64_t> ents = ref.entries();
	ASSERT_EQ(ents.size(), 10u);
	const uint64_t last = ents.back(), lo = ref.h().sections[1].offset,
		       hi = lo + ref.h().sections[1].size, vhi = ref.h().sections[2].offset +
								  ref.h().sections[2].size;
	const std::string at_last = "entry at " + std::to_string(last) + ": ";

	refused(dir, "magic", damaged(base, [](V1 &v) { v.img[0] = 'X'; }, false), SHMKV_EMAGIC,
		{"bad magic at offset 0"});
	refused(dir, "short", ref.img.substr(0, 100), SHMKV_ETRUNCATED,
		{"100 bytes, shorter than the 4096-byte header"});
	refused(dir, "truncated", ref.img.substr(0, ref.img.size() - 4096), SHMKV_ETRUNCATED,
		{"file_size at offset 32", "truncated"});
	refused(dir, "version3", damaged(base, [](V1 &v) { v.h().format_version = 3; }, true),
		SHMKV_EVERSION, {"image format version 3 at offset 8"});
	refused(dir, "layout", damaged(base, [](V1 &v) { v.h().layout_hash ^= 1; }, true),
		SHMKV_ELAYOUT, {"at offset 16", "format 1's is 52171befdcf1d7ee"});
	refused(dir, "header_sum", damaged(base, [](V1 &v) { v.h().name[0] ^= 1; }, false),
		SHMKV_ECHECKSUM, {"header checksum at offset 504"});
	refused(dir, "entries_sum", damaged(base, [&](V1 &v) { v.img[last + 8] ^= 1; }, false),
		SHMKV_ECHECKSUM, {"section entries [" + std::to_string(lo), "checksum mismatch",
				  "(offset 248)"});
	refused(dir, "outside", damaged(base, [](V1 &v) { v.img[600] = 1; }, false), SHMKV_ECORRUPT,
		{"non-zero byte at offset 600 outside every section"});
	refused(dir, "slots", damaged(base, [](V1 &v) { v.h().bucket_slots = 128; }, true),
		SHMKV_ECORRUPT, {"bucket_slots 128 at offset 56, format 1's is 8"});
	refused(dir, "table", damaged(base, [](V1 &v) { v.h().sections[1].offset += 8; }, true),
		SHMKV_ECORRUPT, {"section entries at offset 224", "misaligned"});
	// structural damage, every checksum right: the walk of ENTRIES finds it
	refused(dir, "key_past",
		damaged(base, [&](V1 &v) { v.put<uint16_t>(last + 2, 60000); }, true), SHMKV_ECORRUPT,
		{at_last + "key of 60000 bytes runs past the entries section [" +
		 std::to_string(lo) + ", " + std::to_string(hi) + ")"});
	refused(dir, "type", damaged(base, [&](V1 &v) { v.img[last] = 10; }, true), SHMKV_ECORRUPT,
		{at_last + "type 10"});
	refused(dir, "flags", damaged(base, [&](V1 &v) { v.img[last + 1] = 2; }, true),
		SHMKV_ECORRUPT, {at_last + "flags 2"});
	uint64_t shared = 0, text = 0;
	for (uint64_t e : ents) {
		shmkv_entry_header eh = ref.eh(e);
		if (eh.flags & SHMKV_EFLAG_SHARED)
			shared = e;
		else if (eh.type == SHMKV_TYPE_STRING && eh.value_len > 0 && !text)
			text = e;
	}
	ASSERT_NE(shared, 0u);
	ASSERT_NE(text, 0u);
	refused(dir, "shared_outside",
		damaged(base, [&](V1 &v) {
			shmkv_entry_header eh = v.eh(shared);
			v.put<uint64_t>(shared + shmkv_entry_value_pos(&eh), vhi + 8);
		}, true),
		SHMKV_ECORRUPT, {"entry at " + std::to_string(shared) + ": shared", "values section"});
	refused(dir, "value_past",
		damaged(base, [&](V1 &v) { v.put<uint32_t>(text + 4, 1u << 20); }, true),
		SHMKV_ECORRUPT, {"entry at " + std::to_string(text) + ": string value of 1048576 "
				 "bytes runs past the entries section"});
	refused(dir, "utf8",
		damaged(base, [&](V1 &v) {
			shmkv_entry_header eh = v.eh(text);
			v.img[text + shmkv_entry_value_pos(&eh)] = (char)0xff;
		}, true),
		SHMKV_ECORRUPT, {"entry at " + std::to_string(text) + ": value at", "UTF-8"});
	refused(dir, "count_high", damaged(base, [](V1 &v) { v.h().entry_count++; }, true),
		SHMKV_ECORRUPT, {"holds 10 entries, entry_count (offset 40) says 11"});
	refused(dir, "count_low", damaged(base, [](V1 &v) { v.h().entry_count--; }, true),
		SHMKV_ECORRUPT, {at_last + "the entries section holds more than the 9 entries"});
	refused(dir, "refs", damaged(base, [](V1 &v) { v.h().dedup_refs++; }, true),
		SHMKV_ECORRUPT, {"2 entries use shared values, dedup_refs (offset 112) says 3"});
	// a key twice: key_1's bytes made key_2's
	V1 k(keys);
	std::vector<uint64_t> kents = k.entries();
	uint64_t first = 0, second = 0;
	for (uint64_t e : kents) {
		std::string key = k.img.substr(e + 8, k.eh(e).key_len);
		if (key == "key_1")
			first = e;
		if (key == "key_2")
			second = e;
	}
	ASSERT_TRUE(first && second);
	refused(dir, "dupkey", damaged(keys, [&](V1 &v) { v.img[second + 8 + 4] = '1'; }, true),
		SHMKV_EDUPKEY,
		{"duplicate key \"key_1\"", "entry at " + std::to_string(std::max(first, second)),
		 "first at " + dir.file("dupkey") + ": entry at " + std::to_string(std::min(first, second))});
	refused(dir, "empty", "", SHMKV_ETRUNCATED, {"0 bytes, shorter than the 4096-byte header"});
}

TEST(Upgrade, OtherFormatsRefused)
{
	TempDir dir;
	std::string out = dir.file("out.shmkv");
	Upgraded u = upgrade(out, kVectors + "/base.img");
	EXPECT_EQ(u.err, SHMKV_EVERSION) << u.why;
	EXPECT_NE(u.why.find("base.img: already format 2"), std::string::npos) << u.why;
	u = upgrade(out, kVectors + "/version_3.img");
	EXPECT_EQ(u.err, SHMKV_EVERSION) << u.why;
	EXPECT_NE(u.why.find("image format version 3 at offset 8: upgrade reads format 1"),
		  std::string::npos) << u.why;
	EXPECT_TRUE(list_dir(dir.path()).empty());
}

TEST(Upgrade, OutputChecks)
{
	TempDir dir;
	std::string in = dir.file("old.shmkv");
	const std::string bytes = read_file(kVectors + "/v1/types.img");
	ASSERT_TRUE(write_file(in, bytes));
	Upgraded u = upgrade(in, in);
	EXPECT_EQ(u.err, -EEXIST) << u.why;
	EXPECT_NE(u.why.find("is also the output"), std::string::npos) << u.why;
	EXPECT_TRUE(read_file(in) == bytes) << "the input was changed";
	u = upgrade(dir.path(), in);
	EXPECT_EQ(u.err, -EISDIR) << u.why;
	u = upgrade(dir.file("x.shmkv"), dir.file("none.shmkv"));
	EXPECT_EQ(u.err, -ENOENT) << u.why;
	EXPECT_NE(u.why.find("none.shmkv"), std::string::npos) << u.why;
	char why[256];
	EXPECT_EQ(shmkv_build_upgrade(dir.file("x.shmkv").c_str(), "", nullptr, nullptr, why,
				      sizeof why), -EINVAL);
	EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"old.shmkv"});

	// join reads format 2 only: a format 1 fragment gets the reader's advice
	const char *frags[] = {in.c_str()};
	int err = shmkv_build_join(dir.file("j.shmkv").c_str(), frags, 1, nullptr, nullptr, why,
				   sizeof why);
	EXPECT_EQ(err, SHMKV_EVERSION) << why;
	EXPECT_NE(std::string(why).find(SHMKV_RETIRED_V1_UPGRADE), std::string::npos) << why;
}

} // namespace
