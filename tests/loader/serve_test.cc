// serve_test: the loader serves the images the builder writes (lib/FORMAT.md):
// built with a fixed small bucket count so that some keys are displaced,
// loaded through the spool and over the socket, read by a client (attach +
// get), `format` 2 in status and the load reply, adopted across a restart, an
// expiring record served and read as expired from its expiry on; an image
// damaged with every checksum recomputed (a record's key, a displaced key its
// home bucket does not announce) is refused with a reason naming the bucket,
// and nothing is published: the current generation keeps serving, a new
// cache gets no ctl; over random forgeries the loader publishes exactly what
// shmkv_verify accepts.
//
// The images come from the builder and every place damaged is found through
// lib's public API (shmkv_find_record, shmkv_key_hash, shmkv_home_bucket,
// shmkv_filter_index), so the test relies only on what FORMAT.md §6 states:
// 128-byte buckets in INDEX, the 48-bit filter at +2, inline keys stored
// whole in their bucket.
#include <random>

#include <shmkv_build.h>

#include "loader_util.h"

using namespace loader_test;

namespace {

const uint32_t kExpires = 1900000000; // 2030-03-17; the test pins the clock

struct Rec {
	std::string key;
	unsigned type;
	std::string value; // encoded (lib/FORMAT.md §8), without the NUL of text
	uint32_t expires;  // 0: none
};

std::string i64(int64_t x)
{
	return std::string(reinterpret_cast<const char *>(&x), 8);
}

// Values of 300 bytes (OUT records: over an inline record's 255), short
// ones (inline), several types, an expiring one of each kind, a key to damage.
std::vector<Rec> records()
{
	std::vector<Rec> r;
	for (int i = 0; i < 56; i++) {
		std::string k = "k" + std::to_string(i);
		if (i % 7 == 3)
			r.push_back({k, SHMKV_TYPE_STRING, std::string(300, (char)('a' + i % 26)), 0});
		else if (i % 5 == 1)
			r.push_back({k, SHMKV_TYPE_I64, i64(i * 1000), 0});
		else
			r.push_back({k, SHMKV_TYPE_STRING, "v" + std::to_string(i), 0});
	}
	r.push_back({"exp_in", SHMKV_TYPE_STRING, "soon", kExpires});
	r.push_back({"exp_out", SHMKV_TYPE_STRING, std::string(300, 'x'), kExpires});
	r.push_back({"gen", SHMKV_TYPE_STRING, "one", 0});
	r.push_back({"last", SHMKV_TYPE_BYTES, std::string("\0\1\2", 3), 0});
	r.push_back({"damage_me", SHMKV_TYPE_STRING, "dm", 0});
	return r;
}

// An image of recs in `buckets` buckets, built by the builder at path; its
// bytes, "" on failure (added unless quiet).
std::string build(const std::vector<Rec> &recs, const std::string &path, uint64_t buckets,
		     bool quiet = false)
{
	shmkv_build_options o;
	EXPECT_EQ(shmkv_build_options_init(&o), 0);
	o.buckets = buckets;
	o.fixed |= SHMKV_OPT_BUCKETS;
	shmkv_builder *b = nullptr;
	int err = shmkv_builder_new(&o, &b);
	for (const Rec &r : recs) {
		if (!err)
			err = shmkv_builder_set_expires(b, r.expires);
		if (!err)
			err = shmkv_builder_add(b, r.key.data(), r.key.size(), r.type, r.value.data(),
						r.value.size());
	}
	std::string bytes;
	if (!err)
		err = shmkv_builder_finish(b, path.c_str(), nullptr);
	if (err && !quiet)
		ADD_FAILURE() << "build: " << shmkv_strerror(err) << ": "
			      << (b ? shmkv_builder_error(b) : "");
	else
		bytes = read_file(path);
	shmkv_builder_free(b);
	return bytes;
}

// Where a key lives in an image, found through lib's public API.
struct Place {
	uint64_t rec_off = 0; // its record's image offset (in INDEX)
	uint64_t bucket = 0;  // the bucket holding it
	uint64_t home = 0;    // its home bucket
	unsigned tag = 0;
};

// The image's INDEX section: its offset and size.
std::pair<uint64_t, uint64_t> index_section(const std::string &img)
{
	const auto *h = reinterpret_cast<const shmkv_image_header *>(img.data());
	for (uint32_t i = 0; i < h->section_count && i < SHMKV_MAX_SECTIONS; i++)
		if (h->sections[i].kind == SHMKV_SECTION_INDEX)
			return {h->sections[i].offset, h->sections[i].size};
	ADD_FAILURE() << "no index section";
	return {0, 0};
}

Place place_of(const std::string &img, const std::string &key)
{
	Place p;
	shmkv db{};
	char why[512] = "";
	EXPECT_EQ(shmkv_bind_mem(&db, img.data(), img.size(), 0, why, sizeof why), 0) << why;
	shmkv_set_clock(&db, (int64_t)kExpires - 1); /* the expiring keys are found too */
	EXPECT_EQ(shmkv_find_record(&db, key.data(), key.size(), &p.rec_off, nullptr), 0) << key;
	const shmkv_image_header *h = shmkv_header(&db);
	uint64_t hv = shmkv_key_hash(h->hash_seed, h->hash_bits, key.data(), key.size());
	p.home = shmkv_home_bucket(hv, h->bucket_count);
	p.tag = (unsigned)shmkv_key_tag(hv);
	auto ix = index_section(img);
	EXPECT_GE(p.rec_off, ix.first) << key << ": its record is not in INDEX";
	p.bucket = (p.rec_off - ix.first) / SHMKV_BUCKET_BYTES;
	return p;
}

// Every record read through db as built; the number of wrong ones.
unsigned check_served(shmkv *db, const std::vector<Rec> &recs)
{
	unsigned bad = 0;
	for (const Rec &r : recs) {
		shmkv_value v;
		if (shmkv_get(db, r.key.data(), r.key.size(), &v) != 0 || v.type != r.type ||
		    std::string((const char *)v.data, v.size) != r.value) {
			ADD_FAILURE() << "key " << r.key << " not served as built";
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

class Served : public ::testing::Test {
protected:
	Env env;
	Loader ld{env};
	std::vector<Rec> recs = records();
	uint64_t buckets = 0;
	std::string img;
	shmkv *db = nullptr;
	CtlView before;

	void SetUp() override
	{
		ASSERT_TRUE(ld.start());
		// the most buckets (of 8 down to 3) whose image holds displaced keys:
		// how many records a bucket takes is the layout's business
		bool displaced = false;
		for (buckets = 8; buckets >= 3 && !displaced; buckets--) {
			img = build(recs, env.img_path("built.shmkv"), buckets, true);
			for (size_t i = 0; i < recs.size() && !img.empty() && !displaced; i++) {
				Place p = place_of(img, recs[i].key);
				displaced = p.home != p.bucket;
			}
		}
		buckets++;
		ASSERT_TRUE(displaced) << "no image of 8 to 3 buckets holds displaced keys";
		// lib's own verdict on the built image: good
		shmkv mem{};
		char why[512] = "";
		ASSERT_EQ(shmkv_bind_mem(&mem, img.data(), img.size(), 0, why, sizeof why), 0) << why;
		ASSERT_EQ(shmkv_verify(&mem, why, sizeof why), 0) << why;
		ASSERT_EQ(shmkv_header(&mem)->format_version, (uint32_t)SHMKV_FORMAT_VERSION);

		std::string good = write_img(env, "served.shmkv", img);
		ASSERT_EQ(spool_drop(env, good, "served"), "");
		ASSERT_TRUE(wait_until([&] { return read_ctl(env.root(), "served", &before) &&
						    before.generation == 1; },
				       20000))
			<< env.log();
		int err;
		std::string w;
		db = attach(env.root(), "served", 0, &err, &w);
		ASSERT_NE(db, nullptr) << w;
	}
	void TearDown() override { shmkv_close(db); }

	// The damaged image dropped into the spool is refused for reason, which
	// names the bucket; nothing moved.
	void expect_refused(const std::string &bytes, const std::vector<std::string> &reason)
	{
		std::string rejected = env.spool_path("served") + ".rejected";
		std::string bad = write_img(env, "bad.shmkv", bytes);
		ASSERT_EQ(spool_drop(env, bad, "served"), "");
		ASSERT_TRUE(wait_until([&] { return file_exists(rejected); }, 20000)) << env.log();
		std::vector<std::string> lines = log_lines(env.log(), {"rejected cache=served"});
		ASSERT_EQ(lines.size(), 1u);
		Json j = ld.status("served");
		for (const std::string &r : reason) {
			EXPECT_TRUE(contains_ci(lines[0], r)) << r << " in " << lines[0];
			EXPECT_TRUE(contains_ci(j["last_error"].s(), r)) << j["last_error"].s();
		}
		EXPECT_EQ(j["generation"].u64(), 1u);
		expect_unchanged();

		// the same over the socket (`shmctl cache load`'s request)
		bad = write_img(env, "bad2.shmkv", bytes);
		j = ld.load("served", bad);
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
		ASSERT_TRUE(read_ctl(env.root(), "served", &now));
		EXPECT_EQ(now.generation, 1u);
		EXPECT_EQ(now.path(), before.path());
		EXPECT_EQ(shmkv_refresh(db), 0);
		EXPECT_EQ(shmkv_generation(db), 1u);
		shmkv_set_clock(db, (int64_t)kExpires - 1);
		EXPECT_EQ(check_served(db, recs), 0u);
		EXPECT_TRUE(env.shm_files(".loading").empty()) << "a refused load left a segment";
		EXPECT_EQ(env.shm_files().size(), 1u) << "only the current segment";
	}
};

TEST_F(Served, ServedThroughSpoolAndSocket)
{
	EXPECT_EQ(shmkv_header(db)->format_version, (uint32_t)SHMKV_FORMAT_VERSION);
	shmkv_set_clock(db, (int64_t)kExpires - 1);
	EXPECT_EQ(check_served(db, recs), 0u);
	shmkv_value v;
	EXPECT_EQ(shmkv_get(db, "absent", 6, &v), SHMKV_ENOTFOUND);
	Json j = ld.status("served");
	EXPECT_TRUE(j["last_error"].is_null()) << j["last_error"].s();
	EXPECT_EQ(j["format"].u64(), 2u) << "status says which format the cache serves";

	// generation 2 over the socket: another image, the reader moves
	std::vector<Rec> r2 = recs;
	for (Rec &r : r2)
		if (r.key == "gen")
			r.value = "two";
	std::string p = write_img(env, "served2.shmkv", build(r2, env.img_path("built2.shmkv"), buckets));
	j = ld.load("served", p);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["format"].u64(), 2u);
	ASSERT_TRUE(wait_until([&] { return shmkv_refresh(db) >= 0 && shmkv_generation(db) == 2; },
			       20000));
	shmkv_set_clock(db, (int64_t)kExpires - 1);
	EXPECT_EQ(check_served(db, r2), 0u);

	// a restart adopts the segment (its header checked again), the
	// reader keeps serving, status still says format 2
	ASSERT_EQ(ld.stop(), 0);
	ASSERT_TRUE(ld.start());
	j = ld.status("served");
	EXPECT_EQ(j["generation"].u64(), 2u) << env.log();
	EXPECT_EQ(j["format"].u64(), 2u);
	EXPECT_TRUE(contains_ci(env.log(), "adopted cache=served")) << env.log();
	EXPECT_EQ(shmkv_refresh(db), 0);
	EXPECT_EQ(check_served(db, r2), 0u);
}

// An expiring record is served, and reads as expired from its expiry on
// (inline and OUT), through the segment the loader published.
TEST_F(Served, ExpiringRecordsExpire)
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

// An inline record's key changed ("damage_me" -> "?amage_me", a key the
// image lacks), every checksum recomputed: its tag no longer matches its
// key; refused, the bucket named.
TEST_F(Served, BrokenRecordRefused)
{
	std::string bytes = img;
	Place p = place_of(img, "damage_me");
	uint64_t b0 = index_section(img).first + p.bucket * SHMKV_BUCKET_BYTES;
	size_t at = bytes.find("damage_me", b0);
	ASSERT_LT(at, b0 + SHMKV_BUCKET_BYTES) << "the key is stored in its bucket";
	// a first letter whose key's tag differs from the stored one in both its
	// bytes, whichever of the tag's bits a layout keeps
	const auto *h = reinterpret_cast<const shmkv_image_header *>(img.data());
	std::string k = "damage_me";
	for (k[0] = 'A'; k[0] <= 'Z'; k[0]++) {
		unsigned t = (unsigned)shmkv_key_tag(shmkv_key_hash(h->hash_seed, h->hash_bits,
								    k.data(), k.size()));
		if (((t ^ p.tag) & 0xff) && ((t ^ p.tag) & 0xff00))
			break;
	}
	ASSERT_LE(k[0], 'Z');
	bytes[at] = k[0];
	reseal(bytes);
	expect_refused(bytes, {"index bucket " + std::to_string(p.bucket) + " record", "tag"});
}

// A displaced key whose home bucket's filter no longer announces it (the
// displacement invariant, FORMAT.md §6), checksums recomputed: refused.
TEST_F(Served, UnannouncedDisplacementRefused)
{
	Place p;
	for (const Rec &r : recs)
		if ((p = place_of(img, r.key)).home != p.bucket)
			break;
	ASSERT_NE(p.home, p.bucket) << "no displaced key";
	std::string bytes = img;
	unsigned fi = shmkv_filter_index(p.tag);
	uint64_t home = index_section(img).first + p.home * SHMKV_BUCKET_BYTES;
	bytes[home + 2 + fi / 8] = (char)(bytes[home + 2 + fi / 8] & ~(1 << (fi % 8)));
	reseal(bytes);
	expect_refused(bytes, {"index bucket ", "home bucket " + std::to_string(p.home),
			       "does not announce"});
}

// Random forgeries of the image (a byte of the index or the entries
// changed, every checksum recomputed), each loaded over the socket: the
// loader publishes exactly those lib's shmkv_verify accepts, and a refusal
// names what and where.
TEST_F(Served, AgreesWithVerify)
{
	std::mt19937_64 rng(22);
	// the index and the entries section after it
	const auto *h = reinterpret_cast<const shmkv_image_header *>(img.data());
	uint64_t from = index_section(img).first, to = from + index_section(img).second;
	for (uint32_t i = 0; i < h->section_count && i < SHMKV_MAX_SECTIONS; i++)
		if (h->sections[i].kind == SHMKV_SECTION_ENTRIES && h->sections[i].size)
			to = h->sections[i].offset + h->sections[i].size;
	uint64_t gen = 1;
	unsigned refused = 0, accepted = 0;
	for (int n = 0; n < 60; n++) {
		std::string bytes = img;
		uint64_t off = from + rng() % (to - from);
		bytes[off] = (char)(bytes[off] ^ (uint8_t)(1u << (rng() % 8)));
		reseal(bytes);
		shmkv mem{};
		char why[512] = "";
		int want = shmkv_bind_mem(&mem, bytes.data(), bytes.size(), 0, why, sizeof why);
		if (!want)
			want = shmkv_verify(&mem, why, sizeof why);
		std::string p = write_img(env, "forged.shmkv", bytes);
		Json j = ld.load("served", p);
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
		ASSERT_TRUE(read_ctl(env.root(), "served", &now));
		EXPECT_EQ(now.generation, gen);
		EXPECT_TRUE(env.shm_files(".loading").empty()) << "a refused load left a segment";
	}
	// a changed value byte is a valid image; heads, tags, lengths, units are not
	EXPECT_GT(refused, 10u);
	EXPECT_GT(accepted, 10u);
	std::cout << "forgeries: " << refused << " refused, " << accepted << " accepted\n";
}

} // namespace
