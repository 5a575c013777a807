// stream_test: `shmctl cache apply NAME -` (loader/README.md, "Streams"):
// JSONL changes from standard input published in batches, at most one per
// stream_interval; one acknowledgement per batch, in order, covering every
// line once; what is acknowledged is published (a reader attached
// throughout sees it); a bad line ends the stream with an error naming it,
// its batch unpublished and the cache serving.
#include <fcntl.h>
#include <sys/stat.h>

#include <map>

#include "loader_util.h"

using namespace loader_test;

namespace {

struct Ack {
	uint64_t generation, first, last, lines;
};

// The acknowledgements (shmctl -j: one JSON object a line; an error is
// {"error": ...}) in text.
std::vector<Ack> acks_of(const std::string &text)
{
	std::vector<Ack> v;
	size_t at = 0;
	for (size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
		Json j;
		if (!parse_json(text.substr(at, nl - at), &j))
			ADD_FAILURE() << "not JSON: " << text.substr(at, nl - at);
		if (!j["ok"].b)
			continue;
		v.push_back({j["generation"].u64(), j["first_line"].u64(), j["last_line"].u64(),
			     j["lines"].u64()});
	}
	return v;
}

// A stream whose standard input the test writes (a FIFO) and whose
// acknowledgements it reads as they come (a file).
class Stream {
public:
	Stream(const Env &env, const std::string &cache) : env_(env)
	{
		static int n; // each stream its own files: no stale acknowledgement
		std::string tag = "/stream" + std::to_string(++n);
		fifo_ = env.base() + tag + ".in";
		out_ = env.base() + tag + ".out";
		err_ = env.base() + tag + ".err";
		signal(SIGPIPE, SIG_IGN); // a stream that ended reads no more
		if (mkfifo(fifo_.c_str(), 0600) != 0)
			ADD_FAILURE() << "mkfifo: " << strerror(errno);
		shmkv_test::RunIo io;
		io.in = fifo_;
		io.env = {"SHMKV_ROOT"};
		pid_ = shmkv_test::spawn({shmkv_test::shmctl_path(), "-j", "-r", env.root(), "cache",
					  "apply", cache, "-"},
					 io, out_, err_);
		fd_ = open(fifo_.c_str(), O_WRONLY); // once the child opened its end
	}
	~Stream()
	{
		if (fd_ >= 0)
			close(fd_);
		if (pid_ > 0)
			shmkv_test::wait_exit(pid_, 60000, "the stream");
	}
	bool write(const std::string &text)
	{
		for (size_t at = 0; fd_ >= 0 && at < text.size();) {
			ssize_t w = ::write(fd_, text.data() + at, text.size() - at);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return false;
			at += (size_t)w;
		}
		return fd_ >= 0;
	}
	// Waits (generously) for an acknowledgement through line n.
	bool wait_acked(uint64_t n)
	{
		for (uint64_t t0 = now_ms(); now_ms() - t0 < shmkv_test::slow_ms(60000);) {
			std::vector<Ack> a = acks_of(shmkv_test::read_file(out_));
			if (!a.empty() && a.back().last >= n)
				return true;
			usleep(5000);
		}
		return false;
	}
	// Closes the input and waits for shmctl's exit status.
	int finish()
	{
		close(fd_);
		fd_ = -1;
		int rc = shmkv_test::wait_exit(pid_, 60000, "the stream");
		pid_ = -1;
		return rc;
	}
	std::vector<Ack> acks() const { return acks_of(shmkv_test::read_file(out_)); }
	// What shmctl said: stderr, and stdout (-j writes errors there as JSON).
	std::string err() const
	{
		return shmkv_test::read_file(err_) + shmkv_test::read_file(out_);
	}

private:
	const Env &env_;
	std::string fifo_, out_, err_;
	pid_t pid_ = -1;
	int fd_ = -1;
};

std::string upsert(const std::string &k, const std::string &v)
{
	return "{\"key\": \"" + k + "\", \"value\": \"" + v + "\"}\n";
}

std::string removal(const std::string &k)
{
	return "{\"key\": \"" + k + "\", \"remove\": true}\n";
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

TEST_F(Streams, NoCacheNoStream)
{
	start();
	Stream s(env, "nosuch");
	ASSERT_TRUE(s.write(upsert("a", "1")));
	EXPECT_EQ(s.finish(), 1) << s.err();
	EXPECT_NE(s.err().find("nosuch"), std::string::npos) << s.err();
}
