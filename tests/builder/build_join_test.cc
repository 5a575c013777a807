// build_join_test: shmkv_build_join() (builder/join.cc), the C API that
// `shmctl image join` and Python's shmkv.join call.
//
//   BuildJoin.SameBytesAsOneBuild   3 part builds joined (with and without a memory
//                                   limit, stats given or not): one build's bytes, and its stats
//   BuildJoin.RefusedLeavesNothing  a damaged fragment, a missing file, fragments out of
//                                   order, the last part left out, another bucket count, no
//                                   fragment: an error naming the file and why, and nothing
//                                   left in the output's directory
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <shmkv.h>
#include <shmkv_build.h>

#include "../test_util.h"

using namespace shmkv_test;

namespace {

constexpr uint64_t kBuckets = 811; // the records fill about 0.7 of their record bytes
constexpr int kParts = 3;
constexpr int kRecords = 3000;

// The records, each a (key, value) with shared values (dedup across parts).
void add_all(Builder &b)
{
	for (int i = 0; i < kRecords; i++) {
		std::string k = "key_" + std::to_string(i);
		int err = i % 3 ? b.str(k, "val_" + std::to_string(i % 50)) : b.i64(k, i);
		ASSERT_EQ(err, 0) << b.error();
	}
}

shmkv_build_options part_options()
{
	shmkv_build_options o = test_options();
	o.buckets = kBuckets;
	o.fixed |= SHMKV_OPT_BUCKETS;
	snprintf(o.name, sizeof o.name, "joined");
	o.fixed |= SHMKV_OPT_NAME;
	return o;
}

// Builds fragment k of n (filtering the records of other parts) at path.
void build_part(const std::string &path, int k, int n, uint64_t buckets = kBuckets)
{
	shmkv_build_options o = part_options();
	o.buckets = buckets;
	Builder b(o);
	ASSERT_TRUE(b.ok());
	ASSERT_EQ(shmkv_builder_set_part(b, (uint64_t)k, (uint64_t)n, 1), 0);
	add_all(b);
	ASSERT_EQ(b.finish(path), 0) << b.error();
}

struct Fixture {
	TempDir dir;
	std::string whole;
	std::vector<std::string> frags;
	Fixture()
	{
		whole = dir.path() + "/whole.shmkv";
		Builder b(part_options());
		EXPECT_TRUE(b.ok());
		add_all(b);
		EXPECT_EQ(b.finish(whole), 0) << b.error();
		for (int k = 1; k <= kParts; k++) {
			frags.push_back(dir.path() + "/frag" + std::to_string(k) + ".shmkv");
			build_part(frags.back(), k, kParts);
		}
	}
	std::vector<const char *> ptrs(const std::vector<std::string> &v) const
	{
		std::vector<const char *> p;
		for (const auto &s : v)
			p.push_back(s.c_str());
		return p;
	}
};

TEST(BuildJoin, SameBytesAsOneBuild)
{
	Fixture f;
	ASSERT_FALSE(HasFailure());
	auto p = f.ptrs(f.frags);
	std::string out = f.dir.path() + "/all.shmkv";
	char why[1024] = "x";
	shmkv_build_stats st;
	ASSERT_EQ(shmkv_build_join(out.c_str(), p.data(), p.size(), nullptr, &st, why, sizeof why), 0)
		<< why;
	EXPECT_STREQ(why, "");
	EXPECT_EQ(read_file(out), read_file(f.whole));
	EXPECT_EQ(st.entries, (uint64_t)kRecords);
	EXPECT_EQ(st.bucket_count, kBuckets);

	// under a memory limit (1 MiB), threads 2, without stats: the same bytes
	shmkv_join_options jo;
	shmkv_join_options_init(&jo);
	EXPECT_GT(jo.memory_limit, 0u); // the default limit, as shmctl's
	jo.memory_limit = 1 << 20;
	jo.threads = 2;
	jo.tmpdir = f.dir.path().c_str();
	std::string out2 = f.dir.path() + "/all2.shmkv";
	ASSERT_EQ(shmkv_build_join(out2.c_str(), p.data(), p.size(), &jo, nullptr, why, sizeof why), 0)
		<< why;
	EXPECT_EQ(read_file(out2), read_file(f.whole));
}

// Runs a join expected to fail with code, its message holding each of needles;
// nothing but the inputs stays in the directory.
void refused(const Fixture &f, const std::vector<std::string> &frags, int code,
	     const std::vector<std::string> &needles)
{
	std::vector<std::string> before = list_dir(f.dir.path());
	std::string out = f.dir.path() + "/bad.shmkv";
	auto p = f.ptrs(frags);
	char why[1024] = "";
	shmkv_build_stats st;
	int err = shmkv_build_join(out.c_str(), p.data(), p.size(), nullptr, &st, why, sizeof why);
	EXPECT_EQ(err, code) << shmkv_strerror(err) << ": " << why;
	for (const auto &n : needles)
		EXPECT_NE(std::string(why).find(n), std::string::npos) << why << " lacks " << n;
	EXPECT_FALSE(file_exists(out));
	EXPECT_EQ(list_dir(f.dir.path()), before) << "a refused join left a file";
}

TEST(BuildJoin, RefusedLeavesNothing)
{
	Fixture f;
	ASSERT_FALSE(HasFailure());
	// damaged: one byte flipped near the end (values): the verify names the file
	std::string img = read_file(f.frags[1]);
	img[img.size() - 100] ^= 0x40;
	std::string damaged = f.dir.path() + "/damaged.shmkv";
	ASSERT_TRUE(write_file(damaged, img));
	refused(f, {f.frags[0], damaged, f.frags[2]}, SHMKV_ECORRUPT, {damaged + ": "});
	// a file that is not there
	std::string gone = f.dir.path() + "/gone.shmkv";
	refused(f, {f.frags[0], gone, f.frags[2]}, -ENOENT, {gone});
	// out of order
	refused(f, {f.frags[1], f.frags[0], f.frags[2]}, SHMKV_EINPUT,
		{f.frags[1] + ": entry 1", "part order"});
	// the last part left out: the others are then parts of a 2-way split
	refused(f, {f.frags[0], f.frags[1]}, SHMKV_EINPUT, {f.frags[1] + ": entry", "part order"});
	// another bucket count
	std::string other = f.dir.path() + "/other.shmkv";
	build_part(other, 3, 3, kBuckets + 1);
	refused(f, {f.frags[0], f.frags[1], other}, SHMKV_EINPUT,
		{other + ": its bucket count differs from " + f.frags[0]});
	// nothing to join
	refused(f, {}, -EINVAL, {"no fragment"});
}

} // namespace
