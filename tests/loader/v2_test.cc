// v2_test: the loader serves format v2 images (lib/FORMAT.md §17) as it
// serves v1 (issue 22 §4): composed from the spec (../v2_image.h), loaded
// through the spool and over the socket, read by a client (attach + get),
// `format` 2 in status and the load reply, adopted across a restart,
// an expiring record served and read as expired from its expiry on; a v2
// image damaged with every checksum recomputed (a record's tag, a displaced
// key its home bucket does not announce) is refused with a reason naming the
// bucket, and nothing is published: the current generation keeps serving, a
// new cache gets no ctl; over random forgeries the loader publishes exactly
// what shmkv_verify accepts.
#include <random>

#include "loader_util.h"

#include "../v2_image.h"

using namespace loader_test;
using v2img::Rec;

namespace {

const uint32_t kExpires = 1900000000; // 2030-03-17; the test pins the clock

// Inline and OUT records of several types, an expiring one of each kind;
// 8 buckets for 60 records: some keys are displaced.
std::vector<Rec> records()
{
	std::vector<Rec> r;
	for (int i = 0; i < 56; i++) {
		std::string k = "k" + std::to_string(i);
		if (i % 7 == 3)
			r.push_back({k, SHMKV_TYPE_STRING, std::string(300, (char)('a' + i % 26)), 0,
				     true});
		else if (i % 5 == 1)
			r.push_back({k, SHMKV_TYPE_I64, v2img::i64(i * 1000), 0, false});
		else
			r.push_back({k, SHMKV_TYPE_STRING, "v" + std::to_string(i), 0, false});
	}
	r.push_back({"exp_in", SHMKV_TYPE_STRING, "soon", kExpires, false});
	r.push_back({"exp_out", SHMKV_TYPE_STRING, std::string(200, 'x'), kExpires, true});
	r.push_back({"gen", SHMKV_TYPE_STRING, "one", 0, false});
	r.push_back({"last", SHMKV_TYPE_BYTES, std::string("\0\1\2", 3), 0, false});
	return r;
}

v2img::Image compose_v2()
{
	v2img::Options o;
	o.bucket_count = 8;
	return v2img::compose(records(), o);
}

// Every record read through db as composed; the number of wrong ones.
unsigned check_v2(shmkv *db, const std::vector<Rec> &recs)
{
	unsigned bad = 0;
	for (const Rec &r : recs) {
		shmkv_value v;
		if (shmkv_get(db, r.key.data(), r.key.size(), &v) != 0 || v.type != r.type ||
		    std::string((const char *)v.data, v.size) != r.value) {
			ADD_FAILURE() << "key " << r.key << " not served as composed";
			bad++;
		}
	}
	return bad;
}

std::string write_img(const Env &env, const std::string &name, const std::string &bytes)
{
	std::string p = env.img_path(name);
	EXPECT_TRUE(shmkv_test::write_file(p, bytes)) << p;
	return p;
}

class V2 : public ::testing::Test {
protected:
	Env env;
	Loader ld{env};
	v2img::Image im = compose_v2();
	std::vector<Rec> recs = records();
	shmkv *db = nullptr;
	CtlView before;

	void SetUp() override
	{
		ASSERT_TRUE(ld.start());
		// lib's own verdict on the composed image: good
		shmkv mem{};
		char why[512] = "";
		ASSERT_EQ(shmkv_bind_mem(&mem, im.bytes.data(), im.bytes.size(), 0, why, sizeof why),
			  0) << why;
		ASSERT_EQ(shmkv_verify(&mem, why, sizeof why), 0) << why;
		bool displaced = false;
		for (size_t i = 0; i < im.home.size(); i++)
			displaced |= im.home[i] != im.bucket[i];
		ASSERT_TRUE(displaced) << "the image should hold displaced keys";

		std::string good = write_img(env, "v2.shmkv", im.bytes);
		ASSERT_EQ(spool_drop(env, good, "v2"), "");
		ASSERT_TRUE(wait_until([&] { return read_ctl(env.root(), "v2", &before) &&
						    before.generation == 1; },
				       20000))
			<< env.log();
		int err;
		std::string w;
		db = attach(env.root(), "v2", 0, &err, &w);
		ASSERT_NE(db, nullptr) << w;
	}
	void TearDown() override { shmkv_close(db); }

	// The damaged image dropped into the spool is refused for reason, which
	// names the bucket; nothing moved.
	void expect_refused(const std::string &bytes, const std::vector<std::string> &reason)
	{
		std::string rejected = env.spool_path("v2") + ".rejected";
		std::string bad = write_img(env, "bad.shmkv", bytes);
		ASSERT_EQ(spool_drop(env, bad, "v2"), "");
		ASSERT_TRUE(wait_until([&] { return file_exists(rejected); }, 20000)) << env.log();
		std::vector<std::string> lines = log_lines(env.log(), {"rejected cache=v2"});
		ASSERT_EQ(lines.size(), 1u);
		Json j = ld.status("v2");
		for (const std::string &r : reason) {
			EXPECT_TRUE(contains_ci(lines[0], r)) << r << " in " << lines[0];
			EXPECT_TRUE(contains_ci(j["last_error"].s(), r)) << j["last_error"].s();
		}
		EXPECT_EQ(j["generation"].u64(), 1u);
		expect_unchanged();

		// the same over the socket (`shmctl cache load`'s request)
		bad = write_img(env, "bad2.shmkv", bytes);
		j = ld.load("v2", bad);
		EXPECT_FALSE(j.ok());
		EXPECT_EQ(j["code"].s(), "SHMKV_ECORRUPT") << j["error"].s();
		for (const std::string &r : reason)
			EXPECT_TRUE(contains_ci(j["error"].s(), r)) << j["error"].s();
		expect_unchanged();

		// a new cache whose first image is this one: nothing published
		bad = write_img(env, "bad3.shmkv", bytes);
		ASSERT_EQ(spool_drop(env, bad, "fresh"), "");
		ASSERT_TRUE(wait_until([&] { return file_exists(env.spool_path("fresh") + ".rejected"); },
				       20000));
		j = ld.status("fresh");
		EXPECT_EQ(j["generation"].u64(), 0u);
		EXPECT_FALSE(j["published"].truthy());
		EXPECT_FALSE(file_exists(env.root() + "/fresh.ctl"));
		int err;
		std::string w;
		EXPECT_EQ(attach(env.root(), "fresh", 0, &err, &w), nullptr);
	}

	void expect_unchanged()
	{
		CtlView now;
		ASSERT_TRUE(read_ctl(env.root(), "v2", &now));
		EXPECT_EQ(now.generation, 1u);
		EXPECT_EQ(now.path(), before.path());
		EXPECT_EQ(shmkv_refresh(db), 0);
		EXPECT_EQ(shmkv_generation(db), 1u);
		shmkv_set_clock(db, (int64_t)kExpires - 1);
		EXPECT_EQ(check_v2(db, recs), 0u);
		EXPECT_TRUE(env.shm_files(".loading").empty()) << "a refused load left a segment";
		EXPECT_EQ(env.shm_files().size(), 1u) << "only the current segment";
	}
};

TEST_F(V2, ServedThroughSpoolAndSocket)
{
	EXPECT_EQ(shmkv_header(db)->format_version, (uint32_t)SHMKV_FORMAT_V2);
	shmkv_set_clock(db, (int64_t)kExpires - 1);
	EXPECT_EQ(check_v2(db, recs), 0u);
	shmkv_value v;
	EXPECT_EQ(shmkv_get(db, "absent", 6, &v), SHMKV_ENOTFOUND);
	Json j = ld.status("v2");
	EXPECT_TRUE(j["last_error"].is_null()) << j["last_error"].s();
	EXPECT_EQ(j["format"].u64(), 2u) << "status says which format the cache serves";

	// generation 2 over the socket: another v2 image, the reader moves
	std::vector<Rec> r2 = recs;
	for (Rec &r : r2)
		if (r.key == "gen")
			r.value = "two";
	v2img::Options o;
	o.bucket_count = 8;
	std::string p = write_img(env, "v2b.shmkv", v2img::compose(r2, o).bytes);
	j = ld.load("v2", p);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["format"].u64(), 2u);
	ASSERT_TRUE(wait_until([&] { return shmkv_refresh(db) >= 0 && shmkv_generation(db) == 2; },
			       20000));
	shmkv_set_clock(db, (int64_t)kExpires - 1);
	EXPECT_EQ(check_v2(db, r2), 0u);

	// a restart adopts the v2 segment (its header checked again), the
	// reader keeps serving, status still says format 2
	ASSERT_EQ(ld.stop(), 0);
	ASSERT_TRUE(ld.start());
	j = ld.status("v2");
	EXPECT_EQ(j["generation"].u64(), 2u) << env.log();
	EXPECT_EQ(j["format"].u64(), 2u);
	EXPECT_TRUE(contains_ci(env.log(), "adopted cache=v2")) << env.log();
	EXPECT_EQ(shmkv_refresh(db), 0);
	EXPECT_EQ(check_v2(db, r2), 0u);
}

// An expiring record is served, and reads as expired from its expiry on
// (inline and OUT), through the segment the loader published.
TEST_F(V2, ExpiringRecordsExpire)
{
	EXPECT_TRUE(shmkv_header(db)->flags & SHMKV_HFLAG_EXPIRY);
	for (int64_t now : {(int64_t)kExpires - 1, (int64_t)kExpires, (int64_t)kExpires + 1}) {
		shmkv_set_clock(db, now);
		int want = now < kExpires ? 0 : SHMKV_ENOTFOUND;
		for (const char *k : {"exp_in", "exp_out"}) {
			shmkv_value v;
			EXPECT_EQ(shmkv_get(db, k, strlen(k), &v), want) << k << " at " << now;
			uint32_t e = 0;
			EXPECT_EQ(shmkv_get_expires(db, k, strlen(k), &e), 0);
			EXPECT_EQ(e, kExpires);
		}
		const char *s;
		size_t n;
		EXPECT_EQ(shmkv_get_str(db, "gen", 3, &s, &n), 0) << "no expiry: served at " << now;
	}
}

// A record's tag changed, every checksum recomputed: refused, the bucket named.
TEST_F(V2, BrokenRecordRefused)
{
	std::string bytes = im.bytes;
	size_t i = 0;
	while (recs[i].key != "k10")
		i++;
	bytes[im.dir_off[i] + 1] ^= 0x01; // tag bit 1 in its directory entry (dir bit 8)
	v2img::fix_checksums(bytes);
	expect_refused(bytes, {"index bucket " + std::to_string(im.bucket[i]) + " record", "tag"});
}

// A displaced key whose home bucket's filter no longer announces it (the
// displacement invariant, FORMAT.md §17), checksums recomputed: refused.
TEST_F(V2, UnannouncedDisplacementRefused)
{
	size_t i = 0;
	while (i < recs.size() && im.home[i] == im.bucket[i])
		i++;
	ASSERT_LT(i, recs.size());
	std::string bytes = im.bytes;
	uint64_t hv = shmkv_key_hash(0x5eed, 64, recs[i].key.data(), recs[i].key.size());
	unsigned fi = (unsigned)((shmkv_key_tag(hv) * SHMKV_V2_FILTER_BITS) >> 16);
	uint64_t home = im.index_off + im.home[i] * SHMKV_V2_BUCKET_BYTES;
	bytes[home + 2 + fi / 8] = (char)(bytes[home + 2 + fi / 8] & ~(1 << (fi % 8)));
	v2img::fix_checksums(bytes);
	expect_refused(bytes, {"index bucket ", "home bucket " + std::to_string(im.home[i]),
			       "does not announce"});
}

// Random forgeries of the v2 image (a byte of the index or the entries
// changed, every checksum recomputed), each loaded over the socket: the
// loader publishes exactly those lib's shmkv_verify accepts, and a refusal
// names what and where.
TEST_F(V2, AgreesWithVerify)
{
	std::mt19937_64 rng(22);
	uint64_t from = im.index_off, to = im.entries_off + im.entries_size;
	uint64_t gen = 1;
	unsigned refused = 0, accepted = 0;
	for (int n = 0; n < 60; n++) {
		std::string bytes = im.bytes;
		uint64_t off = from + rng() % (to - from);
		bytes[off] = (char)(bytes[off] ^ (uint8_t)(1u << (rng() % 8)));
		v2img::fix_checksums(bytes);
		shmkv mem{};
		char why[512] = "";
		int want = shmkv_bind_mem(&mem, bytes.data(), bytes.size(), 0, why, sizeof why);
		if (!want)
			want = shmkv_verify(&mem, why, sizeof why);
		std::string p = write_img(env, "forged.shmkv", bytes);
		Json j = ld.load("v2", p);
		EXPECT_EQ(j.ok(), want == 0) << "byte " << off << ": verify says " << why
					     << ", the loader " << j["error"].s();
		if (j.ok()) {
			gen++;
			accepted++;
		} else {
			refused++;
			EXPECT_FALSE(j["error"].s().empty());
		}
		CtlView now;
		ASSERT_TRUE(read_ctl(env.root(), "v2", &now));
		EXPECT_EQ(now.generation, gen);
		EXPECT_TRUE(env.shm_files(".loading").empty()) << "a refused load left a segment";
	}
	// a changed value byte is a valid image; heads, tags, lengths, units are not
	EXPECT_GT(refused, 10u);
	EXPECT_GT(accepted, 10u);
	std::cout << "forgeries: " << refused << " refused, " << accepted << " accepted\n";
}

} // namespace
