// build_parallel_test: the image does not depend on the thread count, nor on
// the input order (lib/FORMAT.md §14, "Entry order"); a file parsed in
// parallel chunks gives the records, line numbers and errors of one thread;
// part builds keep their keys and refuse or skip the others.
//
//   BuildParallel.ThreadCountsGiveOneImage  API records (collisions, displaced
//                                           keys, shared values, duplicates): threads 1, 2, 3, 8
//   BuildParallel.InputOrderDoesNotMatter   shuffled records, same bytes; ENTRIES in (hash, key) order
//   BuildParallel.FileChunksLikeOneThread   2 MiB JSONL and TSV: same bytes; a bad line deep
//                                           in the file gives the same message for 1 and 4 threads
//   BuildParallel.MetaLineWithThreads       a shmkv_meta first line still applies when parsed in chunks
//   BuildParallel.LinesWithoutRecordsInEveryChunk  blank lines in every chunk, a meta line and
//                                           a part's filtered records leave gaps in the chunks'
//                                           windows of the one record array: closed up, same bytes
//   BuildParallel.DirectAndBufferedWritesAgree  the image written with O_DIRECT (ext4 here), with
//                                           it turned off and on tmpfs: the same bytes, entries
//                                           past a block's end and a one-entry image included
//   BuildParallel.FullFileSystemFailsCleanly  an image larger than its file system (a small tmpfs,
//                                           and a loop-mounted ext4 written with O_DIRECT; root):
//                                           -ENOSPC "writing ...: No space left on device", the
//                                           existing output untouched, nothing else left
//   BuildParallel.MemoryLimitSameBytes      API records under a 1 MiB limit (spilled, split,
//                                           one-hash partitions streamed): the same bytes,
//                                           the same duplicate error ("record #N"), no file left
//   BuildParallel.PartsHoldTheirKeys        part K/N: an outside record is an error naming
//                                           its part (when added, or at finish if added
//                                           before), or skipped with filter; parts partition the keys
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <dirent.h>
#include <map>
#include <sys/mount.h>
#include <unistd.h>
#include <random>
#include <string>
#include <vector>

#include <shmkv.h>
#include <shmkv/tools.h>
#include <shmkv_build.h>

#include "../test_util.h"

using namespace shmkv_test;

namespace {

struct Rec {
	std::string key;
	unsigned type;
	std::string val; // encoded
};

// Random records: binary and UTF-8 keys, every scalar and list type, values
// repeated often enough to be shared, and (with dups) repeated keys.
std::vector<Rec> random_records(size_t n, bool dups, uint64_t seed)
{
	std::mt19937_64 rng(seed);
	std::vector<Rec> r;
	std::vector<std::string> pool;
	for (int i = 0; i < 40; i++)
		pool.push_back("a shared value long enough to be worth sharing #" + std::to_string(i));
	for (size_t i = 0; i < n; i++) {
		Rec x;
		if (dups && i > 0 && rng() % 10 == 0) {
			x.key = r[rng() % r.size()].key;
		} else {
			x.key = "k" + std::to_string(rng() % 4 == 0 ? i : rng());
			if (rng() % 16 == 0)
				x.key.push_back((char)(rng() & 0xff)); // binary
		}
		switch (rng() % 5) {
		case 0: {
			int64_t v = (int64_t)rng();
			x.type = SHMKV_TYPE_I64;
			x.val.assign((const char *)&v, 8);
			break;
		}
		case 1:
		case 2:
			x.type = SHMKV_TYPE_STRING;
			x.val = pool[rng() % pool.size()];
			break;
		case 3: {
			x.type = SHMKV_TYPE_F64LIST;
			size_t m = 1 + rng() % 6;
			for (size_t j = 0; j < m; j++) {
				double d = (double)(rng() % 1000) / 8;
				x.val.append((const char *)&d, 8);
			}
			break;
		}
		default:
			x.type = SHMKV_TYPE_BYTES;
			x.val = std::string(rng() % 90, (char)('a' + rng() % 3));
		}
		r.push_back(std::move(x));
	}
	return r;
}

// Builds recs with the options and thread count (and a memory limit, its
// spill files in dir); returns the image bytes.
std::string build(const TempDir &dir, const std::vector<Rec> &recs, shmkv_build_options o,
		  unsigned threads, const char *name = "img", uint64_t mem_limit = 0)
{
	Builder b(o);
	EXPECT_TRUE(b.ok());
	EXPECT_EQ(shmkv_builder_set_threads(b, threads), 0);
	EXPECT_EQ(shmkv_builder_set_memory_limit(b, mem_limit, dir.path().c_str()), 0);
	for (const Rec &x : recs) {
		int err = shmkv_builder_add(b, x.key.data(), x.key.size(), x.type, x.val.data(),
					    x.val.size());
		EXPECT_EQ(err, 0) << b.error();
	}
	std::string path = dir.file(name);
	int err = b.finish(path);
	EXPECT_EQ(err, 0) << b.error();
	Db db = open_db(path);
	if (db) {
		EXPECT_EQ(verify_msg(db), "");
	}
	return read_file(path);
}

shmkv_build_options collide_options()
{
	shmkv_build_options o = test_options();
	o.hash_bits = 12; // 4096 hashes for 20k keys: equal hashes, full buckets, displacement
	o.fixed |= SHMKV_OPT_HASH_BITS;
	o.on_duplicate = SHMKV_DUP_LAST;
	return o;
}

TEST(BuildParallel, ThreadCountsGiveOneImage)
{
	TempDir dir;
	auto recs = random_records(20000, true, 1);
	for (shmkv_build_options o : {collide_options(), test_options()}) {
		o.on_duplicate = SHMKV_DUP_LAST;
		std::string one = build(dir, recs, o, 1);
		ASSERT_GT(one.size(), 4096u);
		const shmkv_image_header *h = (const shmkv_image_header *)one.data();
		EXPECT_GT(h->dedup_values, 0u) << "the records should share values";
		if (o.hash_bits == 12) {
			EXPECT_GT(h->max_probe, 0u) << "the records should displace keys";
		}
		for (unsigned t : {2u, 3u, 8u})
			EXPECT_TRUE(build(dir, recs, o, t) == one) << t << " threads, hash_bits " << o.hash_bits;
	}
}

// Hash order (lib/FORMAT.md §14): the OUT records' entries lie in ENTRIES
// each above the last one in (hash, key length, key bytes) order.
void expect_hash_order(const std::string &path)
{
	Db db = open_db(path);
	ASSERT_TRUE(db);
	const shmkv_image_header *h = db.hdr();
	const uint8_t *index = (const uint8_t *)h + h->sections[0].offset;
	std::map<uint64_t, std::string> keys; // by entry offset
	for (uint64_t b = 0; b < h->bucket_count; b++) {
		const uint8_t *bk = index + b * SHMKV_BUCKET_BYTES;
		for (unsigned i = 0; i < bk[0]; i++) {
			shmkv_record r{}; // GCC 12 cannot see shmkv_record_at fill it
			ASSERT_EQ(shmkv_record_at(bk, i, &r), 0) << "bucket " << b << " record " << i;
			if (!(r.kind & SHMKV_REC_OUT))
				continue;
			shmkv_entry e{};
			char why[256];
			ASSERT_EQ(shmkv_entry_at(db, r.unit << 3, &e, why, sizeof why), 0) << why;
			keys[r.unit << 3] = std::string((const char *)e.key, e.key_len);
		}
	}
	ASSERT_GT(keys.size(), 1000u) << "the records should have entries in ENTRIES";
	uint64_t last_h = 0, n = 0;
	std::string last_k;
	for (const auto &ok : keys) {
		const std::string &key = ok.second;
		uint64_t hv = shmkv_key_hash(h->hash_seed, h->hash_bits, key.data(), key.size());
		if (n++) {
			bool after = hv != last_h ? hv > last_h
						  : key.size() != last_k.size() ? key.size() > last_k.size()
										: key > last_k;
			ASSERT_TRUE(after) << "entry at " << ok.first << " is out of (hash, key) order";
		}
		last_h = hv;
		last_k = key;
	}
}

TEST(BuildParallel, InputOrderDoesNotMatter)
{
	TempDir dir;
	auto recs = random_records(20000, false, 2);
	// random keys can repeat: keep the first of each so that order cannot pick
	std::map<std::string, bool> seen;
	std::vector<Rec> uniq;
	for (auto &r : recs)
		if (seen.emplace(r.key, true).second)
			uniq.push_back(r);
	shmkv_build_options o = collide_options();
	o.on_duplicate = SHMKV_DUP_ERROR;
	std::string a = build(dir, uniq, o, 1, "a");
	std::shuffle(uniq.begin(), uniq.end(), std::mt19937_64(3));
	std::string b = build(dir, uniq, o, 2, "b");
	EXPECT_TRUE(a == b);
	expect_hash_order(dir.file("a"));
}

std::string jsonl_lines(size_t n)
{
	std::string s;
	for (size_t i = 0; i < n; i++)
		s += "{\"key\": \"key_" + std::to_string(i) + "\", \"value\": \"" +
		     std::string(60 + i % 30, (char)('a' + i % 7)) + "\"}\n";
	return s;
}

// Builds the files with the thread count: 0 and the bytes, or the error and message.
std::pair<int, std::string> build_file(const TempDir &dir, const std::string &in, int format,
				       unsigned threads, const char *out = "out")
{
	Builder b;
	EXPECT_EQ(shmkv_builder_set_threads(b, threads), 0);
	int err = shmkv_builder_add_file(b, in.c_str(), format, SHMKV_TYPE_STRING);
	if (!err)
		err = b.finish(dir.file(out));
	if (err)
		return {err, b.error()};
	return {0, read_file(dir.file(out))};
}

TEST(BuildParallel, FileChunksLikeOneThread)
{
	TempDir dir;
	std::string good = jsonl_lines(25000); // over 2 MiB: parsed in chunks
	ASSERT_GT(good.size(), size_t(2) << 20);
	ASSERT_TRUE(write_file(dir.file("in.jsonl"), good));
	auto one = build_file(dir, dir.file("in.jsonl"), SHMKV_INPUT_JSONL, 1);
	ASSERT_EQ(one.first, 0) << one.second;
	for (unsigned t : {2u, 4u}) {
		auto many = build_file(dir, dir.file("in.jsonl"), SHMKV_INPUT_JSONL, t);
		ASSERT_EQ(many.first, 0) << many.second;
		EXPECT_TRUE(many.second == one.second) << t << " threads";
	}
	// a bad line far into the file, and a duplicate whose first copy is in
	// another chunk: the messages of one thread, with the right line numbers
	std::string bad = good;
	size_t at = 0;
	for (int l = 1; l < 21000; l++)
		at = bad.find('\n', at) + 1;
	bad.insert(at, "{\"key\": \"x\", \"value\": }\n");
	ASSERT_TRUE(write_file(dir.file("bad.jsonl"), bad));
	auto e1 = build_file(dir, dir.file("bad.jsonl"), SHMKV_INPUT_JSONL, 1);
	auto e4 = build_file(dir, dir.file("bad.jsonl"), SHMKV_INPUT_JSONL, 4);
	EXPECT_EQ(e1.first, SHMKV_EINPUT);
	EXPECT_EQ(e4.first, e1.first);
	EXPECT_EQ(e4.second, e1.second);
	EXPECT_NE(e1.second.find("bad.jsonl:21000:"), std::string::npos) << e1.second;
	ASSERT_TRUE(write_file(dir.file("dup.jsonl"), good + "{\"key\": \"key_7\", \"value\": 1}\n"));
	e1 = build_file(dir, dir.file("dup.jsonl"), SHMKV_INPUT_JSONL, 1);
	e4 = build_file(dir, dir.file("dup.jsonl"), SHMKV_INPUT_JSONL, 4);
	EXPECT_EQ(e1.first, SHMKV_EDUPKEY);
	EXPECT_EQ(e4.second, e1.second);
	EXPECT_NE(e1.second.find("dup.jsonl:25001: duplicate key \"key_7\" (first at "),
		  std::string::npos) << e1.second;
	EXPECT_NE(e1.second.find("dup.jsonl:8)"), std::string::npos) << e1.second;
	// TSV the same way
	std::string tsv;
	for (int i = 0; i < 40000; i++)
		tsv += "t" + std::to_string(i) + "\t" + std::string(50 + i % 20, 'v') + "\n";
	ASSERT_TRUE(write_file(dir.file("in.tsv"), tsv));
	auto t1 = build_file(dir, dir.file("in.tsv"), SHMKV_INPUT_TSV, 1);
	auto t3 = build_file(dir, dir.file("in.tsv"), SHMKV_INPUT_TSV, 3);
	ASSERT_EQ(t1.first, 0) << t1.second;
	EXPECT_TRUE(t3.second == t1.second);
	ASSERT_TRUE(write_file(dir.file("bad.tsv"), tsv + "no tab here\n" + tsv));
	t1 = build_file(dir, dir.file("bad.tsv"), SHMKV_INPUT_TSV, 1);
	t3 = build_file(dir, dir.file("bad.tsv"), SHMKV_INPUT_TSV, 3);
	EXPECT_EQ(t1.first, SHMKV_EINPUT);
	EXPECT_EQ(t3.second, t1.second);
	EXPECT_NE(t1.second.find("bad.tsv:40001:"), std::string::npos) << t1.second;
}

TEST(BuildParallel, MetaLineWithThreads)
{
	TempDir dir;
	std::string meta = "{\"shmkv_meta\": {\"name\": \"chunked\", \"buckets\": 5000}}\n";
	ASSERT_TRUE(write_file(dir.file("m.jsonl"), meta + jsonl_lines(25000)));
	auto one = build_file(dir, dir.file("m.jsonl"), SHMKV_INPUT_JSONL, 1, "one");
	auto four = build_file(dir, dir.file("m.jsonl"), SHMKV_INPUT_JSONL, 4, "four");
	ASSERT_EQ(one.first, 0) << one.second;
	ASSERT_EQ(four.first, 0) << four.second;
	EXPECT_TRUE(four.second == one.second);
	const shmkv_image_header *h = (const shmkv_image_header *)four.second.data();
	EXPECT_STREQ(h->name, "chunked");
	EXPECT_EQ(h->bucket_count, 5000u);
	// a meta line anywhere else is refused, whichever chunk it falls in
	std::string late = jsonl_lines(25000) + meta;
	ASSERT_TRUE(write_file(dir.file("late.jsonl"), late));
	auto e = build_file(dir, dir.file("late.jsonl"), SHMKV_INPUT_JSONL, 4);
	EXPECT_EQ(e.first, SHMKV_EINPUT);
	EXPECT_NE(e.second.find("late.jsonl:25001: shmkv_meta must be the first line"),
		  std::string::npos) << e.second;
}

TEST(BuildParallel, PartsHoldTheirKeys)
{
	TempDir dir;
	auto recs = random_records(5000, false, 4);
	std::map<std::string, Rec> uniq;
	for (auto &r : recs)
		uniq.emplace(r.key, r);
	const uint64_t B = 700, N = 3;
	shmkv_build_options o = test_options();
	o.buckets = B;
	o.fixed |= SHMKV_OPT_BUCKETS;
	uint64_t total = 0;
	for (uint64_t k = 1; k <= N; k++) {
		uint64_t lo, hi;
		shmkv_build_part_range(k, N, B, &lo, &hi);
		EXPECT_EQ(lo, B * (k - 1) / N);
		EXPECT_EQ(hi, B * k / N);
		EXPECT_EQ(shmkv_build_part_of(lo, N, B), k);
		EXPECT_EQ(shmkv_build_part_of(hi - 1, N, B), k);
		// with filter: only this part's keys
		Builder b(o);
		ASSERT_EQ(shmkv_builder_set_part(b, k, N, 1), 0);
		for (auto &[key, x] : uniq)
			ASSERT_EQ(shmkv_builder_add(b, key.data(), key.size(), x.type, x.val.data(),
						    x.val.size()), 0);
		shmkv_build_stats st;
		std::string path = dir.file("part" + std::to_string(k));
		ASSERT_EQ(b.finish(path, &st), 0) << b.error();
		total += st.entries;
		Db db = open_db(path);
		ASSERT_TRUE(db);
		EXPECT_EQ(verify_msg(db), "");
		shmkv_iter it;
		const void *kp;
		size_t kl;
		shmkv_value v;
		shmkv_iter_init(db, &it);
		while (shmkv_iter_next(&it, &kp, &kl, &v) == 0) {
			uint64_t bk = shmkv_home_bucket(shmkv_key_hash(o.seed, 64, kp, kl), B);
			EXPECT_TRUE(bk >= lo && bk < hi);
		}
		// without: the first outside record is refused when added, named with its part
		Builder strict(o);
		ASSERT_EQ(shmkv_builder_set_part(strict, k, N, 0), 0);
		int err = 0;
		for (auto &[key, x] : uniq)
			if ((err = shmkv_builder_add(strict, key.data(), key.size(), x.type, x.val.data(),
						     x.val.size())) != 0)
				break;
		EXPECT_EQ(err, SHMKV_EINPUT);
		EXPECT_NE(strict.error().find("which belongs to part"), std::string::npos) << strict.error();
		EXPECT_NE(strict.error().find("--filter-part"), std::string::npos) << strict.error();
		// records added before the part was set are checked by finish()
		Builder late(o);
		for (auto &[key, x] : uniq)
			ASSERT_EQ(shmkv_builder_add(late, key.data(), key.size(), x.type, x.val.data(),
						    x.val.size()), 0);
		ASSERT_EQ(shmkv_builder_set_part(late, k, N, 0), 0);
		EXPECT_EQ(late.finish(dir.file("late")), SHMKV_EINPUT);
		EXPECT_NE(late.error().find("which belongs to part"), std::string::npos) << late.error();
		EXPECT_FALSE(file_exists(dir.file("late")));
	}
	EXPECT_EQ(total, uniq.size());
	// a part build needs a fixed bucket count; K/N must make sense
	Builder nob;
	EXPECT_EQ(shmkv_builder_set_part(nob, 1, 2, 0), -EINVAL);
	EXPECT_NE(nob.error().find("--buckets"), std::string::npos) << nob.error();
	Builder bad;
	EXPECT_EQ(shmkv_builder_set_part(bad, 3, 2, 0), -EINVAL);
	EXPECT_EQ(shmkv_builder_set_part(bad, 0, 2, 0), -EINVAL);
}

} // namespace

TEST(BuildParallel, MemoryLimitSameBytes)
{
	TempDir dir;
	auto recs = random_records(30000, true, 7);
	// hash_bits 12: 4096 hashes, so partitions split to the last bits and
	// hold several keys of one hash; 64: the ordinary case
	for (shmkv_build_options o : {collide_options(), test_options()}) {
		for (int dup : {SHMKV_DUP_LAST, SHMKV_DUP_FIRST}) {
			o.on_duplicate = dup;
			std::string mem = build(dir, recs, o, 2, "mem");
			const shmkv_image_header *h = (const shmkv_image_header *)mem.data();
			EXPECT_GT(h->dedup_values, 0u);
			EXPECT_TRUE(build(dir, recs, o, 2, "spill", 1 << 20) == mem)
				<< "hash_bits " << o.hash_bits << ", on_duplicate " << dup;
		}
		// the same duplicate error, naming API records by number
		o.on_duplicate = SHMKV_DUP_ERROR;
		std::string msg[2];
		for (int k = 0; k < 2; k++) {
			Builder b(o);
			ASSERT_EQ(shmkv_builder_set_memory_limit(b, k ? 1 << 20 : 0, dir.path().c_str()), 0);
			for (const Rec &x : recs)
				ASSERT_EQ(shmkv_builder_add(b, x.key.data(), x.key.size(), x.type, x.val.data(),
							    x.val.size()), 0);
			EXPECT_EQ(b.finish(dir.file("err")), SHMKV_EDUPKEY);
			msg[k] = b.error();
		}
		EXPECT_NE(msg[0].find("record #"), std::string::npos) << msg[0];
		EXPECT_EQ(msg[1], msg[0]);
	}
	std::vector<std::string> left;
	for (const std::string &f : list_dir(dir.path()))
		if (f != "mem" && f != "spill")
			left.push_back(f);
	EXPECT_TRUE(left.empty()) << left.size() << " files left, e.g. " << left[0];
	Builder b;
	EXPECT_EQ(shmkv_builder_set_memory_limit(b, 1000, nullptr), -EINVAL) << "under 1 MiB";
}

TEST(BuildParallel, LinesWithoutRecordsInEveryChunk)
{
	TempDir dir;
	std::string meta = "{\"shmkv_meta\": {\"name\": \"gaps\"}}\n";
	std::string body;
	std::mt19937_64 rng(9);
	for (size_t i = 0; i < 30000; i++) {
		if (rng() % 5 == 0)
			body += rng() % 2 ? "\n" : "  \t\n"; // blank: no record
		body += "{\"key\": \"key_" + std::to_string(i) + "\", \"value\": \"" +
			std::string(60 + i % 30, (char)('a' + i % 7)) + "\"}\n";
	}
	ASSERT_GT(body.size(), size_t(2) << 20); // parsed in chunks
	ASSERT_TRUE(write_file(dir.file("in.jsonl"), meta + body));
	auto one = build_file(dir, dir.file("in.jsonl"), SHMKV_INPUT_JSONL, 1, "one");
	ASSERT_EQ(one.first, 0) << one.second;
	EXPECT_EQ(((const shmkv_image_header *)one.second.data())->entry_count, 30000u);
	for (unsigned t : {2u, 3u, 7u}) {
		auto many = build_file(dir, dir.file("in.jsonl"), SHMKV_INPUT_JSONL, t, "many");
		ASSERT_EQ(many.first, 0) << many.second;
		EXPECT_TRUE(many.second == one.second) << t << " threads";
	}
	// a part build skips most records: each chunk's window is mostly gaps
	auto part = [&](unsigned threads, const char *out) {
		shmkv_build_options o = test_options();
		o.buckets = 4000;
		o.fixed |= SHMKV_OPT_BUCKETS;
		Builder b(o);
		EXPECT_EQ(shmkv_builder_set_threads(b, threads), 0);
		EXPECT_EQ(shmkv_builder_set_part(b, 2, 3, 1), 0) << b.error();
		int err = shmkv_builder_add_file(b, dir.file("in.jsonl").c_str(), SHMKV_INPUT_JSONL, 0);
		EXPECT_EQ(err, 0) << b.error();
		err = b.finish(dir.file(out));
		EXPECT_EQ(err, 0) << b.error();
		return read_file(dir.file(out));
	};
	std::string p1 = part(1, "p1");
	ASSERT_FALSE(p1.empty());
	uint64_t kept = ((const shmkv_image_header *)p1.data())->entry_count;
	EXPECT_GT(kept, 5000u);
	EXPECT_LT(kept, 15000u);
	EXPECT_TRUE(part(3, "p3") == p1);
	EXPECT_TRUE(part(5, "p5") == p1);
}

namespace {

// Sets an environment variable for a scope.
struct ScopedEnv {
	std::string name;
	ScopedEnv(const char *n, const char *v) : name(n) { setenv(n, v, 1); }
	~ScopedEnv() { unsetenv(name.c_str()); }
};

} // namespace

TEST(BuildParallel, DirectAndBufferedWritesAgree)
{
	TempDir dir;
	auto recs = random_records(30000, false, 11);
	// entries larger than a 4 MiB block, between others
	recs.push_back({"big-1", SHMKV_TYPE_BYTES, std::string((size_t(9) << 20) + 13, 'x')});
	recs.push_back({"big-2", SHMKV_TYPE_STRING, std::string((size_t(4) << 20) + 1, 'y')});
	std::vector<Rec> tiny = {{"only", SHMKV_TYPE_STRING, "one entry"}};
	shmkv_build_options o = test_options();
	for (const auto *set : {&recs, &tiny}) {
		std::string direct = build(dir, *set, o, 3, "direct");
		ASSERT_FALSE(direct.empty());
		{
			ScopedEnv off("SHMKV_BUILD_NO_DIRECT", "1");
			EXPECT_TRUE(build(dir, *set, o, 3, "buffered") == direct) << set->size();
		}
		EXPECT_TRUE(build(dir, *set, o, 1, "one") == direct) << set->size();
		if (access("/dev/shm", W_OK) == 0) { // tmpfs: no O_DIRECT alignment from statx
			TempDir shm_dir("/dev/shm");
			EXPECT_TRUE(build(shm_dir, *set, o, 2, "shm") == direct) << set->size();
		}
	}
}

namespace {

// The names in a directory, but lost+found.
std::vector<std::string> names_in(const std::string &dir)
{
	std::vector<std::string> v;
	if (DIR *d = opendir(dir.c_str())) {
		while (dirent *e = readdir(d))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
			    strcmp(e->d_name, "lost+found"))
				v.push_back(e->d_name);
		closedir(d);
	}
	std::sort(v.begin(), v.end());
	return v;
}

} // namespace

TEST(BuildParallel, FullFileSystemFailsCleanly)
{
	if (geteuid() != 0)
		GTEST_SKIP() << "mounting a small file system needs root";
	TempDir dir;
	std::string img = dir.file("ext4.img"), ext4 = dir.file("ext4"), tmpfs = dir.file("tmpfs");
	ASSERT_EQ(mkdir(ext4.c_str(), 0755), 0);
	ASSERT_EQ(mkdir(tmpfs.c_str(), 0755), 0);
	ASSERT_EQ(mount("tmpfs", tmpfs.c_str(), "tmpfs", 0, "size=6m"), 0) << strerror(errno);
	struct Unmount {
		std::vector<std::string> at;
		~Unmount()
		{
			for (auto &a : at)
				umount2(a.c_str(), MNT_DETACH);
		}
	} unmount{{tmpfs}};
	std::vector<std::string> fss{tmpfs};
	bool loop = system(("truncate -s 24M " + img + " && mkfs.ext4 -q -F " + img +
			    " && mount -o loop " + img + " " + ext4).c_str()) == 0;
	if (loop) {
		unmount.at.push_back(ext4);
		fss.push_back(ext4);
	}
	std::vector<Rec> recs;
	for (int i = 0; i < 40000; i++) // about 42 MB of image
		recs.push_back({"k" + std::to_string(i), SHMKV_TYPE_BYTES,
				std::to_string(i) + std::string(1000, (char)('a' + i % 26))}); // distinct: not shared
	for (const std::string &fs : fss) {
		std::string out = fs + "/img";
		ASSERT_TRUE(write_file(out, "the old image"));
		Builder b(test_options());
		ASSERT_EQ(shmkv_builder_set_threads(b, 2), 0);
		for (const Rec &x : recs)
			ASSERT_EQ(shmkv_builder_add(b, x.key.data(), x.key.size(), x.type, x.val.data(),
						    x.val.size()), 0);
		EXPECT_EQ(b.finish(out), -ENOSPC) << fs;
		EXPECT_NE(b.error().find("writing "), std::string::npos) << b.error();
		EXPECT_NE(b.error().find("No space left on device"), std::string::npos) << b.error();
		EXPECT_EQ(read_file(out), "the old image") << fs;
		EXPECT_EQ(names_in(fs), std::vector<std::string>{"img"}) << fs;
	}
	if (!loop)
		GTEST_SKIP() << "no loop-mounted ext4 (mkfs.ext4 from e2fsprogs, loop devices): only "
			     << "tmpfs (buffered writes) was filled";
}
