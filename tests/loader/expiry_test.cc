// expiry_test: the loader says when the entries of an image expire
// (loader/README.md, "Expiry"; lib/FORMAT.md §17). Readers never report their gets,
// so the loader counts what it can know: the entries that carry an expiry,
// how many of them have expired as of now (a reader treats those as absent),
// and when the next one does — in `status` (`expiry`), the metrics and the
// one-screen `shmctl cache status`. Checked here: the counts move across an
// expiry instant (waited for, never slept through), agree with what a reader
// gets, follow a rollback and a restart; an image without expiry shows none.
//
// Images are built with the builder's API (shmkv_builder_set_expires), never
// composed by hand, so the test holds whatever the bucket layout becomes.
#include <ctime>

#include <shmkv_build.h>

#include "loader_util.h"

using namespace loader_test;

namespace {

int64_t unix_now()
{
	return (int64_t)time(nullptr);
}

// The expiry times of one image: soon (twice), far, past; 0 = leave out.
struct Times {
	int64_t soon = 0, far = 0, past = 0;
};

// Builds path: keys plain_0..plain_{n-1} without expiry, and, when t says
// so, soon_a and soon_b (at t.soon), far (t.far), past (t.past). Returns ""
// or the error.
std::string build(const std::string &path, uint64_t n, const Times &t)
{
	shmkv_build_options o;
	int err = shmkv_build_options_init(&o);
	if (err)
		return "shmkv_build_options_init: " + std::string(shmkv_strerror(err));
	shmkv_builder *b = nullptr;
	if ((err = shmkv_builder_new(&o, &b)))
		return "shmkv_builder_new: " + std::string(shmkv_strerror(err));
	for (uint64_t i = 0; i < n && !err; i++) {
		std::string k = "plain_" + std::to_string(i), v = "v" + std::to_string(i);
		err = shmkv_builder_add_str(b, k.data(), k.size(), v.data(), v.size());
	}
	auto add = [&](const char *k, int64_t when) {
		if (err || !when)
			return;
		err = shmkv_builder_set_expires(b, when);
		if (!err)
			err = shmkv_builder_add_str(b, k, strlen(k), "x", 1);
	};
	add("soon_a", t.soon);
	add("soon_b", t.soon);
	add("far", t.far);
	add("past", t.past);
	if (!err)
		err = shmkv_builder_set_expires(b, 0);
	return builder_done(b, path, err);
}

// The sample of metric name for cache in the metrics text; "" if none.
std::string sample(const std::string &text, const std::string &name, const std::string &cache)
{
	std::string head = name + "{cache=\"" + cache + "\"} ";
	size_t p = text.find("\n" + head);
	if (p == std::string::npos)
		return "";
	p += 1 + head.size();
	return text.substr(p, text.find('\n', p) - p);
}

// The "expiry" line of `shmctl cache status NAME` (plain), "" if none.
std::string expiry_line(const std::string &out)
{
	size_t p = out.find("\nexpiry ");
	if (p == std::string::npos)
		return "";
	p++;
	return out.substr(p, out.find('\n', p) - p);
}

class Expiry : public ::testing::Test {
protected:
	Env env;
	Loader ld{env};

	void SetUp() override
	{
		configure();
		ASSERT_TRUE(ld.start());
	}
	virtual void configure() {}

	std::string metrics()
	{
		Json j = ld.req({"metrics"});
		EXPECT_TRUE(j.ok()) << j["error"].s();
		return j["text"].s();
	}

	// Loads an image with times t into cache; the reply.
	Json load(const std::string &cache, const std::string &tag, const Times &t)
	{
		std::string img = env.img_path(tag + ".shmkv");
		std::string err = build(img, 20, t);
		if (!err.empty()) {
			ADD_FAILURE() << err;
			return Json();
		}
		Json j = ld.load(cache, img);
		EXPECT_TRUE(j.ok()) << j["error"].s();
		return j;
	}

	// status, metrics and shmctl say cache has no expiring entry
	void expect_none(const std::string &cache)
	{
		Json e = ld.status(cache)["expiry"];
		EXPECT_EQ(e["state"].s(), "none");
		EXPECT_EQ(e["entries"].u64(), 0u);
		EXPECT_EQ(e["expired"].kind, Json::NUM);
		EXPECT_EQ(e["expired"].u64(), 0u);
		EXPECT_TRUE(e["next"].is_null());
		EXPECT_EQ(e["memory_bytes"].u64(), 0u);
		std::string m = metrics();
		EXPECT_EQ(sample(m, "shmkv_cache_entries_expiring", cache), "0") << m;
		EXPECT_EQ(sample(m, "shmkv_cache_entries_expired", cache), "0") << m;
		EXPECT_EQ(sample(m, "shmkv_cache_next_expiry_timestamp_seconds", cache), "") << m;
		CmdRun r = shmctl(env, {"cache", "status", cache});
		EXPECT_EQ(r.rc, 0) << r.err;
		EXPECT_EQ(expiry_line(r.out), "") << r.out;
	}
};

// The counts before and after an expiry instant: two entries expire at
// now+S, one far ahead, one passed already. S starts at 2 s and doubles
// when the machine was too slow to look before the instant.
TEST_F(Expiry, CountsMoveAcrossTheExpiryInstant)
{
	Times t;
	bool seen_before = false;
	for (int64_t margin = 2; margin <= 32 && !seen_before; margin *= 2) {
		int64_t now = unix_now();
		t = {now + margin, now + 400 * 86400, now - 3600};
		Json j = load("exp", "exp" + std::to_string(margin), t);
		ASSERT_TRUE(j.ok());
		EXPECT_EQ(j["format"].u64(), 2u);
		EXPECT_EQ(j["expiring"].u64(), 4u);
		Json st = ld.status("exp");
		std::string m = metrics();
		CmdRun r = shmctl(env, {"cache", "status", "exp"});
		if (unix_now() >= t.soon) {
			std::cerr << "the load and the queries took over " << margin
				  << " s: again with a later expiry\n";
			continue;
		}
		seen_before = true;
		Json e = st["expiry"];
		EXPECT_EQ(e["state"].s(), "tracked");
		EXPECT_EQ(e["entries"].u64(), 4u);
		EXPECT_EQ(e["expired"].u64(), 1u) << "the one that had passed at the build";
		EXPECT_EQ(e["next"].u64(), (uint64_t)t.soon);
		EXPECT_EQ(e["next_in"].u64(), (uint64_t)(t.soon - (int64_t)e["now"].u64()));
		EXPECT_EQ(e["last"].u64(), (uint64_t)t.far);
		EXPECT_EQ(e["memory_bytes"].u64(), 16u) << "4 bytes per expiring entry";
		EXPECT_TRUE(e["note"].is_null());
		EXPECT_EQ(sample(m, "shmkv_cache_entries_expiring", "exp"), "4") << m;
		EXPECT_EQ(sample(m, "shmkv_cache_entries_expired", "exp"), "1") << m;
		EXPECT_EQ(sample(m, "shmkv_cache_next_expiry_timestamp_seconds", "exp"),
			  std::to_string(t.soon))
			<< m;
		EXPECT_EQ(sample(m, "shmkv_cache_expiry_memory_bytes", "exp"), "16") << m;
		EXPECT_EQ(r.rc, 0) << r.err;
		std::string line = expiry_line(r.out);
		EXPECT_TRUE(contains_ci(line, "4 entries with a time, 1 expired")) << r.out;
		EXPECT_TRUE(contains_ci(line, "next ")) << r.out;
	}
	ASSERT_TRUE(seen_before) << "never looked before the expiry instant";

	// a reader sees soon_a until then (its clock: the same wall clock)
	int aerr;
	std::string why;
	shmkv *db = attach(env.root(), "exp", 0, &aerr, &why);
	ASSERT_NE(db, nullptr) << why;

	// across the instant: waited for, up to 60 s past it
	Json e;
	ASSERT_TRUE(wait_until([&] {
		e = ld.status("exp")["expiry"];
		return e["expired"].u64() == 3;
	}, (unsigned)(t.soon - unix_now() + 60) * 1000u, 50))
		<< "expired stays " << e["expired"].u64();
	EXPECT_GE((int64_t)e["now"].u64(), t.soon);
	EXPECT_EQ(e["entries"].u64(), 4u);
	EXPECT_EQ(e["next"].u64(), (uint64_t)t.far);
	EXPECT_EQ(e["next_in"].u64(), (uint64_t)(t.far - (int64_t)e["now"].u64()));

	// the reader agrees: the expired ones are absent, "expired" says why
	shmkv_value v;
	char w[200] = "";
	for (const char *k : {"soon_a", "soon_b", "past"}) {
		EXPECT_EQ(shmkv_get_diag(db, k, strlen(k), &v, w, sizeof w), SHMKV_ENOTFOUND) << k;
		EXPECT_TRUE(contains_ci(w, "expired")) << k << ": " << w;
	}
	EXPECT_EQ(shmkv_get(db, "far", 3, &v), 0);
	EXPECT_EQ(shmkv_get(db, "plain_7", 7, &v), 0);
	shmkv_close(db);

	std::string m = metrics();
	EXPECT_EQ(sample(m, "shmkv_cache_entries_expired", "exp"), "3") << m;
	EXPECT_EQ(sample(m, "shmkv_cache_next_expiry_timestamp_seconds", "exp"),
		  std::to_string(t.far))
		<< m;
	CmdRun r = shmctl(env, {"cache", "status", "exp"});
	EXPECT_TRUE(contains_ci(expiry_line(r.out), "4 entries with a time, 3 expired")) << r.out;
}

// An image built without expiry carries none.
TEST_F(Expiry, NoneWithoutExpiry)
{
	Json j = load("two", "two", Times{});
	ASSERT_TRUE(j.ok());
	EXPECT_EQ(j["format"].u64(), 2u);
	EXPECT_EQ(j["expiring"].u64(), 0u);
	expect_none("two");
}

// The figures follow the generation served: a load without expiry replaces
// them, a rollback reads the expiring image again, and a restarted loader
// reads the generation it adopts.
TEST_F(Expiry, RollbackAndRestart)
{
	int64_t now = unix_now();
	Times t{now + 300 * 86400, now + 400 * 86400, now - 60};
	ASSERT_TRUE(load("rr", "timed", t).ok());
	EXPECT_EQ(ld.status("rr")["expiry"]["entries"].u64(), 4u);
	ASSERT_TRUE(load("rr", "plain", Times{}).ok());
	expect_none("rr");

	Json j = ld.req({"rollback", "rr"});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	Json e = ld.status("rr")["expiry"];
	EXPECT_EQ(e["state"].s(), "tracked");
	EXPECT_EQ(e["entries"].u64(), 4u);
	EXPECT_EQ(e["expired"].u64(), 1u);
	EXPECT_EQ(e["next"].u64(), (uint64_t)t.soon);

	ASSERT_EQ(ld.stop(), 0);
	ASSERT_TRUE(ld.start());
	// adopted at startup; the worker reads it right after: pending until then
	ASSERT_TRUE(wait_until([&] {
		e = ld.status("rr")["expiry"];
		return e["state"].s() != "pending";
	}, 30000, 20));
	EXPECT_EQ(e["state"].s(), "tracked");
	EXPECT_EQ(e["entries"].u64(), 4u);
	EXPECT_EQ(e["expired"].u64(), 1u);
	EXPECT_EQ(e["next"].u64(), (uint64_t)t.soon);
	EXPECT_EQ(e["last"].u64(), (uint64_t)t.far);
}

// [loader] expiry_times bounds the times kept: with 2, an image of 4
// expiring entries keeps their count, first and last only ("counted"):
// expired and next are known before the first and after the last, null in
// between, and no memory is held.
class ExpiryBound : public Expiry {
protected:
	void configure() override
	{
		std::string conf = env.base() + "/loader.conf";
		ASSERT_TRUE(shmkv_test::write_file(conf, "[loader]\nexpiry_times = 2\n"));
		ld.extra().insert(ld.extra().end(), {"--config", conf});
	}
};

TEST_F(ExpiryBound, CountedOverTheBound)
{
	int64_t now = unix_now();
	Times t{now + 300 * 86400, now + 400 * 86400, now - 60};
	ASSERT_TRUE(load("b", "between", t).ok());
	Json e = ld.status("b")["expiry"];
	EXPECT_EQ(e["state"].s(), "counted");
	EXPECT_EQ(e["entries"].u64(), 4u);
	EXPECT_TRUE(e["expired"].is_null()) << "now lies between the first and the last";
	EXPECT_TRUE(e["next"].is_null());
	EXPECT_EQ(e["last"].u64(), (uint64_t)t.far);
	EXPECT_EQ(e["memory_bytes"].u64(), 0u);
	EXPECT_TRUE(contains_ci(e["note"].s(), "expiry_times")) << e["note"].s();
	std::string m = metrics();
	EXPECT_EQ(sample(m, "shmkv_cache_entries_expiring", "b"), "4") << m;
	EXPECT_EQ(sample(m, "shmkv_cache_entries_expired", "b"), "") << m;
	EXPECT_EQ(sample(m, "shmkv_cache_next_expiry_timestamp_seconds", "b"), "") << m;
	CmdRun r = shmctl(env, {"cache", "status", "b"});
	EXPECT_TRUE(contains_ci(expiry_line(r.out), "4 entries with a time, expired: unknown, "
							"next: unknown"))
		<< r.out;

	// all ahead (3 over the bound of 2): before the first, so known
	t.past = 0;
	ASSERT_TRUE(load("b", "ahead", t).ok());
	e = ld.status("b")["expiry"];
	EXPECT_EQ(e["state"].s(), "counted");
	EXPECT_EQ(e["entries"].u64(), 3u);
	EXPECT_EQ(e["expired"].kind, Json::NUM);
	EXPECT_EQ(e["expired"].u64(), 0u);
	EXPECT_EQ(e["next"].u64(), (uint64_t)t.soon);
}

// A bound out of range stops the start with the reason.
TEST(ExpiryConf, BadBoundRefused)
{
	Env env;
	std::string conf = env.base() + "/loader.conf";
	ASSERT_TRUE(shmkv_test::write_file(conf, "[loader]\nexpiry_times = -1\n"));
	Loader ld(env, {"--memory", "shm", "--config", conf});
	EXPECT_NE(ld.start_expect_exit(), 0);
	EXPECT_TRUE(contains_ci(env.log(), "expiry_times \"-1\" is not a number")) << env.log();
}

} // namespace
