// batch_clock_test: a batch reads the clock at most once (FORMAT.md §17;
// §19.6: once per call, whichever level decides), through a lower and a top
// delta too, across its groups of keys and for the keys it leaves to the
// checked path (keys past the fast path's length). This executable defines
// timespec_get, which the header-only reader then calls instead of libc's:
// while a batch runs it counts the reads and moves the clock one second on
// at each, so that a batch that read it twice would see its keys expire
// halfway.
//
//   BatchClock.OnceWithoutDeltas   a plain image of expiring keys, batches of 1..300
//   BatchClock.OnceThroughDeltas   the same keys through a lower and a top delta, each
//                                  level deciding some keys (upserts, tombstones)
#include <gtest/gtest.h>

#include <time.h>

#include <string>
#include <vector>

#include <shmkv.h>
#include <shmkv_build.h>

#include "test_util.h"

using namespace shmkv_test;

namespace {
const uint32_t kExpires = 2000000000u; // every expiring record's expiry
bool counting = false;
int reads = 0;
int64_t fake_now = 0;
} // namespace

// The reader's clock (FORMAT.md §17, read through libc). Outside a counted batch: the
// real time, from clock_gettime.
extern "C" int timespec_get(struct timespec *ts, int base)
{
	if (base != TIME_UTC)
		return 0;
	if (!counting)
		return clock_gettime(CLOCK_REALTIME, ts) == 0 ? base : 0;
	reads++;
	ts->tv_sec = (time_t)fake_now++;
	ts->tv_nsec = 0;
	return base;
}

namespace {

std::string key_of(int i)
{
	// every 7th key past the fast path's length: the checked path
	return "k" + std::to_string(i) + (i % 7 == 3 ? std::string(300, 'L') : "");
}

// Adds key i expiring at kExpires (every 5th without expiry).
void add(shmkv_builder *b, int i, const std::string &v)
{
	const std::string k = key_of(i);
	ASSERT_EQ(shmkv_builder_set_expires(b, i % 5 == 0 ? 0 : kExpires), 0);
	ASSERT_EQ(shmkv_builder_add_str(b, k.data(), k.size(), v.data(), v.size()), 0)
		<< shmkv_builder_error(b);
}

const int kKeys = 300;

// Batches of every size from 1 to kKeys over db (keys in order, from key
// 0), with the clock one second before every expiry: each must read the
// clock once and find every key but the removed ones, with want's value.
void check_batches(const shmkv *db, const std::vector<std::string> &want)
{
	std::vector<std::string> keys;
	for (int i = 0; i < kKeys; i++)
		keys.push_back(key_of(i));
	std::vector<shmkv_key> kv(kKeys);
	for (int i = 0; i < kKeys; i++)
		kv[i] = {keys[i].data(), keys[i].size()};
	std::vector<shmkv_value> vals(kKeys);
	std::vector<int> errs(kKeys);
	for (int n = 1; n <= kKeys; n += n < 40 ? 1 : 37) {
		reads = 0;
		fake_now = kExpires - 1;
		counting = true;
		size_t found = shmkv_get_batch(db, kv.data(), (size_t)n, vals.data(), errs.data());
		counting = false;
		// key 0 never expires; key 1 does: the clock is read when first needed
		EXPECT_EQ(reads, n > 1 ? 1 : 0) << "a batch of " << n << " read the clock " << reads << " times";
		size_t expect = 0;
		for (int i = 0; i < n; i++) {
			if (want[i].empty()) {
				EXPECT_EQ(errs[i], SHMKV_ENOTFOUND) << keys[i].substr(0, 8) << " in a batch of " << n;
				continue;
			}
			expect++;
			ASSERT_EQ(errs[i], 0) << keys[i].substr(0, 8) << " in a batch of " << n
					      << ": expired by a second clock reading?";
			EXPECT_EQ(std::string((const char *)vals[i].data, vals[i].size), want[i]);
		}
		EXPECT_EQ(found, expect);
	}
}

TEST(BatchClock, OnceWithoutDeltas)
{
	TempDir d;
	Builder b;
	ASSERT_TRUE(b.ok());
	std::vector<std::string> want;
	for (int i = 0; i < kKeys; i++) {
		add(b, i, "base" + std::to_string(i));
		want.push_back("base" + std::to_string(i));
	}
	ASSERT_EQ(b.finish(d.file("base.shmkv")), 0) << b.error();
	Db db = open_db(d.file("base.shmkv"));
	ASSERT_TRUE(db);
	check_batches(db, want);
}

TEST(BatchClock, OnceThroughDeltas)
{
	TempDir d;
	std::vector<std::string> want;
	{
		Builder b;
		ASSERT_TRUE(b.ok());
		for (int i = 0; i < kKeys; i++) {
			add(b, i, "base" + std::to_string(i));
			want.push_back("base" + std::to_string(i));
		}
		ASSERT_EQ(b.finish(d.file("base.shmkv")), 0) << b.error();
	}
	// the lower: every 3rd key upserted, every 11th removed; the top: every
	// 4th key upserted, every 13th removed (the top's record wins)
	for (const char *level : {"lower", "top"}) {
		const bool top = level[0] == 't';
		const int up = top ? 4 : 3, rm = top ? 13 : 11;
		Builder b;
		ASSERT_TRUE(b.ok());
		ASSERT_EQ(shmkv_builder_set_delta(b, d.file("base.shmkv").c_str(), nullptr), 0)
			<< b.error();
		for (int i = 0; i < kKeys; i++) {
			const std::string k = key_of(i);
			if (i % rm == 0) {
				ASSERT_EQ(shmkv_builder_remove(b, k.data(), k.size()), 0) << b.error();
				want[i].clear();
			} else if (i % up == 0) {
				add(b, i, std::string(level) + std::to_string(i));
				want[i] = std::string(level) + std::to_string(i);
			}
		}
		ASSERT_EQ(b.finish(d.file(std::string(level) + ".shmkv")), 0) << b.error();
	}
	Db db = open_db(d.file("base.shmkv")), lower = open_db(d.file("lower.shmkv")),
	   top = open_db(d.file("top.shmkv"));
	ASSERT_TRUE(db && lower && top);
	char why[256] = "";
	ASSERT_EQ(shmkv_delta_set2(db, lower, top, why, sizeof why), 0) << why;
	check_batches(db, want);
	ASSERT_EQ(shmkv_delta_set2(db, nullptr, nullptr, why, sizeof why), 0) << why;
}

} // namespace
