// stream_test: `shmctl cache apply NAME -` (loader/README.md, "Streams"):
// JSONL changes from standard input published in batches, at most one per
// stream_interval; one acknowledgement per batch, in order, covering every
// line once; what is acknowledged is published (a reader attached
// throughout sees it); a bad line ends the stream with an error naming it,
// its batch unpublished and the cache serving; the line limit, checked on
// what came since the last read, keeps line numbers across batches.
#include <fcntl.h>
#include <sys/stat.h>

#include <map>
#include <set>

#include "loader_util.h"
#include "stream_util.h"

using namespace loader_test;

namespace {

std::string upsert(const std::string &k, const std::string &v)
{
	return "{\"key\": \"" + k + "\", \"value\": \"" + v + "\"}\n";
}

std::string removal(const std::string &k)
{
	return "{\"key\": \"" + k + "\", \"remove\": true}\n";
}

// The lines of /proc/PID/maps that map a file under dir.
std::vector<std::string> maps_under(pid_t pid, const std::string &dir)
{
	std::vector<std::string> v;
	std::string text = shmkv_test::read_file("/proc/" + std::to_string(pid) + "/maps");
	size_t at = 0;
	for (size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
		std::string l = text.substr(at, nl - at);
		if (l.find(" " + dir + "/") != std::string::npos)
			v.push_back(l);
	}
	return v;
}

// Every key of model read through db: the value, or absent ("").
std::string mismatch(const shmkv *db, const std::map<std::string, std::string> &model)
{
	for (const auto &kv : model) {
		const char *s = nullptr;
		size_t n = 0;
		int err = shmkv_get_str(db, kv.first.data(), kv.first.size(), &s, &n);
		std::string got = err ? "" : std::string(s, n);
		if (got != kv.second)
			return kv.first + ": \"" + got + "\", expected \"" + kv.second + "\"";
	}
	return "";
}

class Streams : public ::testing::Test {
protected:
	Env env;
	std::unique_ptr<Loader> ld;
	std::string base = env.img_path("a.shmkv");
	std::map<std::string, std::string> model; // key -> value, "" absent
	void start(const std::string &conf = "")
	{
		std::vector<std::string> args = {"--memory", "shm"};
		if (!conf.empty()) {
			std::string path = env.base() + "/loader.conf";
			ASSERT_TRUE(shmkv_test::write_file(path, conf));
			args.insert(args.end(), {"--config", path});
		}
		ld.reset(new Loader(env, args));
		ASSERT_EQ(build_image(base, "a", 100), "");
		ASSERT_TRUE(ld->start());
		Json j = ld->load("w", base);
		ASSERT_TRUE(j.ok()) << j["error"].s();
	}
};

} // namespace

TEST_F(Streams, EveryLineAcknowledgedOnceAndPublishedWhenAcknowledged)
{
	start();
	// the first change makes the control segment protocol 2 (lib/PROTOCOL.md):
	// the reader attaches after it
	ASSERT_TRUE(ld->req({"change", "w", R"({"key": "first", "value": "1"})"}).ok());
	model["first"] = "1";
	int err;
	std::string why;
	shmkv *db = attach(env.root(), "w", 0, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	Stream s(env, "w");
	uint64_t line = 0;
	for (int round = 0; round < 30; round++) {
		std::string text;
		for (int i = 0; i < 40; i++, line++) {
			std::string k = "k" + std::to_string((round * 7 + i) % 90);
			if (i % 9 == 8) {
				text += removal(k);
				model[k] = "";
			} else {
				std::string v = "r" + std::to_string(round) + "i" + std::to_string(i);
				text += upsert(k, v);
				model[k] = v;
			}
		}
		text += "\n"; // a blank line is a line: counted, changes nothing
		line++;
		ASSERT_TRUE(s.write(text));
		ASSERT_TRUE(s.wait_acked(line)) << "no acknowledgement through line " << line
						<< ": " << s.err();
		// acknowledged: published, so a refresh sees every line so far
		ASSERT_GE(shmkv_refresh(db), 0);
		ASSERT_EQ(mismatch(db, model), "") << "after line " << line;
	}
	ASSERT_EQ(s.finish(), 0) << s.err();
	std::vector<Ack> a = s.acks();
	ASSERT_FALSE(a.empty());
	uint64_t next = 1, gen = 0;
	for (const Ack &k : a) {
		EXPECT_EQ(k.first, next) << "every line once, in order";
		EXPECT_EQ(k.lines, k.last - k.first + 1);
		EXPECT_GE(k.generation, gen) << "generations only grow";
		next = k.last + 1;
		gen = k.generation;
	}
	EXPECT_EQ(next, line + 1);
	EXPECT_EQ(ld->status("w")["generation"].u64(), gen);
	shmkv_close(db);
}

// A publish into the top counts the keys the lower does not hold in the
// lower, which the loader keeps mapped across publishes (overlay.c): through
// folds (a new lower each time) the counts stay exact, and a lower gone (a
// fold, a drop) is not kept mapped: the loader maps no file of it.
TEST_F(Streams, KeptLowerFollowsFoldsAndGoesWithItsFile)
{
	start("[cache w]\nfold_entries = 16\nfold_ratio = 0\n");
	Stream s(env, "w");
	std::set<std::string> keys;
	uint64_t line = 0;
	for (int round = 0; round < 25; round++) {
		std::string text;
		for (int i = 0; i < 12; i++, line++) {
			std::string k = "s" + std::to_string((round * 5 + i * 3) % 140);
			keys.insert(k);
			text += upsert(k, "r" + std::to_string(round));
		}
		ASSERT_TRUE(s.write(text));
		ASSERT_TRUE(s.wait_acked(line)) << s.err();
		// nothing else is sent meanwhile: the generation served holds
		// every line so far (a fold after it keeps the count)
		Json st = ld->status("w");
		ASSERT_EQ(st["changes"].u64(), keys.size()) << "round " << round;
		ASSERT_EQ(st["overlay.records"].u64(), keys.size()) << "round " << round;
	}
	ASSERT_EQ(s.finish(), 0) << s.err();
	ASSERT_GE(ld->status("w")["fold.count"].u64(), 2u) << "the lower was rebuilt";
	// the fold queued after the last publish done, nothing gone stays mapped
	auto gone = [&] {
		std::vector<std::string> v;
		for (const std::string &l : maps_under(ld->pid(), env.shm()))
			if (l.find("(deleted)") != std::string::npos)
				v.push_back(l);
		return v;
	};
	EXPECT_TRUE(wait_until([&] { return gone().empty(); }, 60000, 10))
		<< gone().front();
	// one more publish maps the lower again; a drop unmaps it
	ASSERT_TRUE(ld->req({"change", "w", R"({"key": "s0", "value": "again"})"}).ok());
	std::string lower = ld->status("w")["overlay.segment"].s();
	std::vector<std::string> m = maps_under(ld->pid(), env.shm());
	ASSERT_EQ(m.size(), 1u) << "the lower alone: " << (m.empty() ? "" : m.back());
	EXPECT_NE(m[0].find(" " + lower), std::string::npos) << m[0] << " is not " << lower;
	ASSERT_TRUE(ld->req({"drop", "w"}).ok());
	EXPECT_TRUE(wait_until([&] { return maps_under(ld->pid(), env.shm()).empty(); }, 60000,
			       10))
		<< maps_under(ld->pid(), env.shm()).front();
}

TEST_F(Streams, AtMostOnePublishPerInterval)
{
	start("[loader]\nstream_interval = 400ms\n");
	Stream s(env, "w");
	uint64_t t0 = now_ms();
	const int n = 120;
	for (int i = 0; i < n; i++) {
		ASSERT_TRUE(s.write(upsert("t" + std::to_string(i), "v")));
		usleep(15000);
	}
	ASSERT_TRUE(s.wait_acked(n)) << s.err();
	uint64_t ms = now_ms() - t0;
	ASSERT_EQ(s.finish(), 0) << s.err();
	// a busy machine makes batches larger, never more frequent
	size_t most = (size_t)(ms / 400) + 2;
	EXPECT_LE(s.acks().size(), most) << ms << " ms";
	EXPECT_GE(s.acks().size(), 2u) << "lines over " << ms << " ms come in batches";
}

TEST_F(Streams, BadLineEndsTheStreamItsBatchUnpublished)
{
	start();
	// whole: the bad line comes with a good one in one write, which one
	// read takes, so both are in one batch (lines 2-4)
	struct Case {
		std::string line, what;
		bool whole;
	} cases[] = {
		{"not json\n", "JSON", true},
		{"{\"key\": \"x\", \"value\": \"1\", \"type\": \"nosuch\"}\n", "nosuch", true},
		{"{\"key\": \"x\", \"remove\": \"yes\"}\n", "remove", true},
		{"{\"key\": \"" + std::string(70000, 'k') + "\", \"value\": \"v\"}\n", "key", false},
		{"{\"key\": \"x\", \"value\": \"" + std::string(2 << 20, 'v') + "\"}\n", "longer than",
		 false},
	};
	for (const Case &c : cases) {
		Stream s(env, "w");
		ASSERT_TRUE(s.write(upsert("before", c.what)));
		ASSERT_TRUE(s.wait_acked(1)) << s.err();
		s.write(upsert("same-batch", "x") + c.line + upsert("after", "x")); // may end early
		int rc = s.finish();
		EXPECT_NE(rc, 0) << c.what;
		EXPECT_NE(s.err().find(c.what), std::string::npos) << s.err().substr(0, 500);
		EXPECT_TRUE(s.err().find("stream:3:") != std::string::npos ||
			    s.err().find("stream line 3 ") != std::string::npos)
			<< s.err().substr(0, 500);
		std::vector<Ack> a = s.acks();
		ASSERT_FALSE(a.empty()) << s.err();
		EXPECT_LE(a.back().last, 2u) << c.what << ": nothing from the bad line on";
		// the cache serves the generation of the last acknowledged line
		EXPECT_EQ(ld->status("w")["generation"].u64(), a.back().generation) << c.what;
		CmdRun g = shmctl(env, {"cache", "get", "w", "before"});
		EXPECT_EQ(g.rc, 0) << g.err;
		EXPECT_EQ(g.out, c.what + "\n");
		EXPECT_EQ(shmctl(env, {"cache", "get", "w", "after"}).rc, 1) << c.what;
		if (c.whole) {
			EXPECT_EQ(a.size(), 1u) << c.what;
			EXPECT_EQ(shmctl(env, {"cache", "get", "w", "same-batch"}).rc, 1) << c.what;
		}
	}
}

// The line limit is checked on what came since the last read (the lines
// before are whole and checked once): a line cut over reads and batches,
// and an over-long line after batches taken, keep their line numbers.
TEST_F(Streams, LineLimitCountsLinesAcrossReadsAndBatches)
{
	start("[loader]\nstream_interval = 200ms\n");
	Stream s(env, "w");
	ASSERT_TRUE(s.write(upsert("a1", "v1")));
	ASSERT_TRUE(s.wait_acked(1)) << s.err();
	std::string a3 = upsert("a3", "v3");
	// line 2 whole, line 3 cut: a batch takes line 2 alone
	ASSERT_TRUE(s.write(upsert("a2", "v2") + a3.substr(0, 10)));
	ASSERT_TRUE(s.wait_acked(2)) << s.err();
	ASSERT_TRUE(s.write(a3.substr(10) + upsert("a4", "v4")));
	ASSERT_TRUE(s.wait_acked(4)) << s.err();
	// line 5 over the limit, in pieces (many reads), after a whole line 6
	// was not sent: the error names line 5
	std::string big = "{\"key\": \"x\", \"value\": \"" + std::string(2 << 20, 'v') + "\"}\n";
	for (size_t at = 0; at < big.size() && s.write(big.substr(at, 65536)); at += 65536) {
	}
	EXPECT_NE(s.finish(), 0);
	EXPECT_NE(s.err().find("stream line 5 is longer than"), std::string::npos)
		<< s.err().substr(0, 500);
	std::vector<Ack> a = s.acks();
	ASSERT_FALSE(a.empty());
	EXPECT_EQ(a.back().last, 4u);
	for (int i = 1; i <= 4; i++) {
		std::string k = "a" + std::to_string(i);
		CmdRun g = shmctl(env, {"cache", "get", "w", k});
		EXPECT_EQ(g.rc, 0) << k << ": " << g.err;
		EXPECT_EQ(g.out, "v" + std::to_string(i) + "\n") << k;
	}
}

TEST_F(Streams, NoCacheNoStream)
{
	start();
	Stream s(env, "nosuch");
	ASSERT_TRUE(s.write(upsert("a", "1")));
	EXPECT_EQ(s.finish(), 1) << s.err();
	EXPECT_NE(s.err().find("nosuch"), std::string::npos) << s.err();
}
