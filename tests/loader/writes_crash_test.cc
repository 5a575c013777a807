// writes_crash_test: kill -9 of the loader while it takes changes
// (loader/README.md, "Writes", "Streams", "Compaction", "What is kept"),
// then a new loader on the same root, which adopts what the dead one left.
//
//   MidStream: `shmctl cache apply w -` fed continuously (distinct keys, a
//     key set and removed again and again, removals of base keys), the
//     loader killed at a random moment, 10 rounds, the last the instant a
//     batch is published. After each restart: the served generation is
//     exactly the first P lines of the stream (last wins), P at least the
//     last line acknowledged before the kill and at most the last written;
//     control segment and segments pass attach with SHMKV_ATTACH_VERIFY |
//     SHMKV_OPEN_DEEP; the temporaries the kill left are removed at the
//     start (and logged), no segment file is left over; the next round
//     streams on the restarted loader.
//   MidApply: `apply` of a 200k-record delta killed at random moments and at
//     its publish: the served generation is the one before (the control
//     segment as it was) or the next, every key as one model says, never a
//     mixture; an apply whose reply came is the one after.
//   MidCompact: `compact` of a 500k-key base with 100k changes, the same:
//     before (base and overlay as they were) or after (a new base, no
//     overlay), the same answers either way.
//   MidStreamDurable: the same with a durable log (durable_dir), every
//     other restart after a reboot (ROOT and the segments removed): the
//     source loaded and the log replayed give a prefix with every
//     acknowledged line.
//   CompactionOriginSurvivesAKillAtItsPublish, DurableCompactionKilledAt-
//     ItsPublishThenAReboot, LoadAfterACompactionKilledAtItsPublish,
//     RollbackToACompactedBaseKilledAtItsPublish,
//     RollbackAfterAKillAtAChangesPublish,
//     RollbackAfterAKillAtARollbacksOrALoadsPublish: kills
//     the instant the control segment moves (a thread spinning on its
//     generation word), before the state file or the durable log catches
//     up: what a restart (and a reboot) must still know then.
//   FirstChangeKilledBetweenItsRetireAndItsRename: a cache's first change,
//     which replaces its protocol 1 control segment, killed between the
//     old file's retire and the new one's rename (held with the fault
//     shim): the restart serves the base, never the overlay as a base.
//   RetiredControlSegmentAtARestart: the control segment a drop (or a
//     replacement) retired before the loader died: the restart serves the
//     generation the state file names, its changes and rollback with it.
//   FoldKilledAtItsPublishOrInFlight: the top overlay's fold into the
//     lower killed at its publish or at a random moment: every change
//     acknowledged is served, no file left over, and the rollback is still
//     the generation before the last change.
//
// Kill delays are random (the seed is printed; SHMKV_TEST_SEED repeats
// them); every wait is for an event, with generous deadlines.
#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "fault_util.h"
#include "loader_util.h"
#include "stream_util.h"

using namespace loader_test;

namespace {

const std::string kCache = "w";

uint64_t test_seed()
{
	static uint64_t seed = [] {
		const char *e = getenv("SHMKV_TEST_SEED");
		return e && *e ? strtoull(e, nullptr, 10) : (uint64_t)time(nullptr) ^ (uint64_t)getpid();
	}();
	return seed;
}

// ---- what a reader must see ----------------------------------------------------

// The base image's keys key_<i> (i < n, tagged tag) changed by changes
// (key -> value; nullopt: removed).
struct Model {
	std::string tag;
	uint64_t n = 0;
	std::unordered_map<std::string, std::optional<std::string>> changes;

	std::optional<std::string> base(const std::string &k) const
	{
		if (k.compare(0, 4, "key_") != 0 || k.size() == 4)
			return std::nullopt;
		uint64_t i = 0;
		for (size_t p = 4; p < k.size(); p++) {
			if (k[p] < '0' || k[p] > '9')
				return std::nullopt;
			i = i * 10 + (uint64_t)(k[p] - '0');
		}
		if (i >= n || key_of(i) != k)
			return std::nullopt;
		return value_of(tag, i);
	}
	std::optional<std::string> get(const std::string &k) const
	{
		auto it = changes.find(k);
		return it != changes.end() ? it->second : base(k);
	}
	// Live keys (the image's __gen_tag and __n not counted).
	uint64_t live() const
	{
		uint64_t c = n;
		for (const auto &kv : changes) {
			bool in_base = base(kv.first).has_value();
			if (kv.second && !in_base)
				c++;
			else if (!kv.second && in_base)
				c--;
		}
		return c;
	}
};

// key's value through db, nullopt when absent; *bad gets any other error.
std::optional<std::string> read_key(const shmkv *db, const std::string &k, std::string *bad)
{
	const char *s = nullptr;
	size_t n = 0;
	int err = shmkv_get_str(db, k.data(), k.size(), &s, &n);
	if (err == SHMKV_ENOTFOUND)
		return std::nullopt;
	if (err) {
		*bad = k + ": " + shmkv_strerror(err);
		return std::nullopt;
	}
	return std::string(s, n);
}

std::string show(const std::optional<std::string> &v)
{
	return v ? "\"" + *v + "\"" : "absent";
}

// The first of keys whose value through db is not expect(key) ("" if none),
// with how many differ.
template <class Keys, class Expect>
std::string mismatch(const shmkv *db, const Keys &keys, const Expect &expect)
{
	std::string first, bad;
	uint64_t wrong = 0;
	for (const std::string &k : keys) {
		std::optional<std::string> got = read_key(db, k, &bad), want = expect(k);
		if (got != want || !bad.empty()) {
			if (first.empty())
				first = k + ": " + (bad.empty() ? show(got) : bad) + ", expected " +
					show(want);
			wrong++;
			bad.clear();
		}
	}
	return first.empty() ? "" : std::to_string(wrong) + " keys differ, first " + first;
}

// Every key a round must check: the base keys (step apart) and the changed ones.
std::vector<std::string> model_keys(const Model &m, uint64_t step = 1)
{
	std::vector<std::string> keys;
	for (uint64_t i = 0; i < m.n; i += step)
		keys.push_back(key_of(i));
	for (const auto &kv : m.changes)
		if (!m.base(kv.first))
			keys.push_back(kv.first);
	return keys;
}

// ---- the loader's files --------------------------------------------------------

// ROOT/NAME.ctl as a reader snapshots it: generation, base and overlay
// copies; raw_seq: its seq word as it lies (odd: a publish left open).
struct CtlSnap {
	uint64_t generation = 0, raw_seq = 0;
	std::vector<std::string> bases, overlays;
};

bool ctl_snap(const Env &env, CtlSnap *out)
{
	shmkv_ctl c;
	uint64_t raw = 0;
	if (!read_ctl_copy(env.root(), kCache, &c, &raw))
		return false;
	*out = CtlSnap();
	out->generation = c.generation;
	out->raw_seq = raw;
	for (uint32_t i = 0; i < c.segment_count && i < SHMKV_CTL_MAX_SEGMENTS; i++) {
		std::string path(c.segments[i].path, strnlen(c.segments[i].path, SHMKV_CTL_PATH_MAX));
		(c.segments[i].flags & SHMKV_SEG_OVERLAY ? out->overlays : out->bases).push_back(path);
	}
	return true;
}

std::string describe(const CtlSnap &s)
{
	std::string d = "generation " + std::to_string(s.generation) + ", base";
	for (const std::string &b : s.bases)
		d += " " + b;
	d += ", overlay";
	for (const std::string &o : s.overlays)
		d += " " + o;
	return d + (s.overlays.empty() ? " none" : "");
}

// The loader's temporaries of the cache, ROOT/.NAME.*.tmp (loader/README.md, "Files").
std::vector<std::string> temporaries(const Env &env)
{
	std::vector<std::string> out;
	std::string pfx = "." + kCache + ".";
	for (const std::string &n : list_dir(env.root()))
		if (n.compare(0, pfx.size(), pfx) == 0 && n.size() > 4 &&
		    n.compare(n.size() - 4, 4, ".tmp") == 0)
			out.push_back(n);
	return out;
}

// Segment files that neither the control segment nor the state file's
// rollback (ROOT/NAME.state: rb.path, rbov.path, rbtop.path) names: what a
// restart should have removed ("" when none).
std::string orphans(const Env &env)
{
	CtlSnap s;
	if (!ctl_snap(env, &s))
		return "no control segment";
	std::unordered_set<std::string> named(s.bases.begin(), s.bases.end());
	named.insert(s.overlays.begin(), s.overlays.end());
	std::string state = read_file(env.root() + "/" + kCache + ".state");
	for (const char *key : {"\nrb.path=", "\nrbov.path=", "\nrbtop.path="}) {
		size_t p = state.find(key);
		if (p != std::string::npos) {
			p += strlen(key);
			named.insert(state.substr(p, state.find('\n', p) - p));
		}
	}
	std::string out;
	for (const std::string &f : env.shm_files())
		if (!named.count(env.seg_dir() + "/" + f))
			out += " " + f;
	return out;
}

// Log text of the last loader started (after the last "==== start" banner).
std::string last_run_log(const Env &env)
{
	std::string log = env.log();
	size_t p = log.rfind("==== start");
	return p == std::string::npos ? log : log.substr(p);
}

std::string join(const std::vector<std::string> &v)
{
	std::string s;
	for (const std::string &x : v)
		s += (s.empty() ? "" : " ") + x;
	return s.empty() ? "none" : s;
}

// What every restart must show: the cache adopted with its control segment
// and segments passing every check (attach verifying every checksum and
// the structure of base and overlay), the temporaries the kill left (left)
// removed at the start and logged, no orphan segment. Returns the handle
// (null, a failure added, when attach fails).
shmkv *after_restart(const Env &env, const std::string &when,
		     const std::vector<std::string> &left = {})
{
	EXPECT_EQ(join(temporaries(env)), "none") << when << ": temporaries left in " << env.root();
	std::string log = last_run_log(env);
	for (const std::string &t : left)
		EXPECT_EQ(log_lines(log, {"removed leftover file=" + env.root() + "/" + t}).size(), 1u)
			<< when << ": " << t << " not removed at the start:\n" << log;
	EXPECT_EQ(orphans(env), "") << when << ": segment files neither published nor the rollback";
	EXPECT_TRUE(env.shm_files(".loading").empty()) << when;
	CtlSnap s;
	EXPECT_TRUE(ctl_snap(env, &s)) << when;
	EXPECT_EQ(s.raw_seq % 2, 0u) << when << ": control segment left mid-publish";
	int err;
	std::string why;
	shmkv *db = attach(env.root(), kCache, SHMKV_ATTACH_VERIFY | SHMKV_OPEN_DEEP, &err, &why);
	EXPECT_NE(db, nullptr) << when << ": attach with verification: " << why;
	if (db) {
		EXPECT_EQ(shmkv_generation(db), s.generation) << when;
	}
	return db;
}

std::string conf_file(const Env &env, const std::string &text)
{
	std::string path = env.base() + "/loader.conf";
	EXPECT_TRUE(shmkv_test::write_file(path, text));
	return path;
}

// Kills pid (SIGKILL) the instant ROOT/NAME.ctl's generation passes from: a
// thread spins on the mapped word, so the kill lands within microseconds
// of the publish, before what the loader does after it.
class KillAtPublish {
public:
	KillAtPublish(const Env &env, pid_t pid, uint64_t from, unsigned timeout_ms)
	{
		std::string p = env.root() + "/" + kCache + ".ctl";
		int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
		void *m = fd >= 0 ? mmap(nullptr, SHMKV_CTL_SIZE, PROT_READ, MAP_SHARED, fd, 0)
				  : MAP_FAILED;
		if (fd >= 0)
			close(fd);
		if (m == MAP_FAILED) {
			ADD_FAILURE() << p << ": " << strerror(errno);
			return;
		}
		map_ = m;
		uint64_t end = now_ms() + slow_ms(timeout_ms);
		t_ = std::thread([this, pid, from, end] {
			const shmkv_ctl *c = (const shmkv_ctl *)map_;
			for (uint64_t i = 0; !stop_.load(std::memory_order_relaxed); i++) {
				if (shmkv_ctl_generation(c) > from) {
					kill(pid, SIGKILL);
					fired_ = true;
					return;
				}
				if ((i & 0xfff) == 0 && now_ms() > end)
					return;
			}
		});
	}
	~KillAtPublish()
	{
		stop_ = true;
		if (t_.joinable())
			t_.join();
		if (map_)
			munmap(map_, SHMKV_CTL_SIZE);
	}
	// Waits for the thread to end (fired, timed out or stopped).
	bool wait()
	{
		if (t_.joinable())
			t_.join();
		return fired_.load();
	}

private:
	void *map_ = nullptr;
	std::thread t_;
	std::atomic<bool> stop_{false}, fired_{false};
};

// ---- streams (stream_util.h) ------------------------------------------------------

// One line of a stream: key set to value, or removed.
struct Line {
	std::string key;
	std::optional<std::string> value;
	bool distinct; // its key is set by this line alone, never removed
	std::string text() const
	{
		return value ? "{\"key\": \"" + key + "\", \"value\": \"" + *value + "\"}\n"
			     : "{\"key\": \"" + key + "\", \"remove\": true}\n";
	}
};

// The lines of round r: most set a key of their own (s<r>_<i>); every
// 7th sets "hot" and every 19th removes it (the last of a batch wins);
// every 13th removes a base key (from *next_removal on).
std::vector<Line> stream_lines(int r, size_t count, uint64_t nbase, uint64_t *next_removal)
{
	std::vector<Line> v;
	v.reserve(count);
	for (size_t i = 0; i < count; i++) {
		std::string id = std::to_string(r) + "_" + std::to_string(i);
		if (i % 19 == 5)
			v.push_back({"hot", std::nullopt, false});
		else if (i % 7 == 3)
			v.push_back({"hot", "h" + id, false});
		else if (i % 13 == 1)
			v.push_back({key_of((*next_removal)++ % nbase), std::nullopt, false});
		else
			v.push_back({"s" + id, "v" + id + std::string(i % 5 * 7, 'x'), true});
	}
	return v;
}

// Writes lines to a stream, a chunk at a time with a short pause, until
// stopped, out of lines or the stream is gone; from line pause_at on only
// once resumed. stop() returns how many lines it began to write (the loader
// may have part of the last chunk).
class Feeder {
public:
	Feeder(Stream &s, const std::vector<Line> &lines, size_t pause_at = SIZE_MAX)
		: s_(s), lines_(lines)
	{
		t_ = std::thread([this, pause_at] {
			const size_t chunk = 20;
			for (size_t at = 0; at < lines_.size() && !stop_.load(); at += chunk) {
				while (at >= pause_at && !resumed_.load() && !stop_.load())
					usleep(1000);
				std::string text;
				size_t end = std::min(at + chunk, lines_.size());
				for (size_t i = at; i < end; i++)
					text += lines_[i].text();
				tried_ = end;
				if (!s_.write(text))
					return;
				usleep(4000);
			}
		});
	}
	~Feeder() { stop(); }
	void resume() { resumed_ = true; }
	size_t stop()
	{
		stop_ = true;
		if (t_.joinable())
			t_.join();
		return tried_.load();
	}

private:
	Stream &s_;
	const std::vector<Line> &lines_;
	std::thread t_;
	std::atomic<bool> stop_{false}, resumed_{false};
	std::atomic<size_t> tried_{0};
};

std::unique_ptr<Loader> restart(const Env &env, const std::vector<std::string> &args)
{
	auto ld = std::make_unique<Loader>(env, args);
	EXPECT_TRUE(ld->start());
	return ld;
}

// Starts op (a request not awaited) and kills the loader under it: after a
// random delay under max_ms, or (at_publish) the instant the control
// segment passes generation gen. Returns when it was, for the log.
std::string kill_during(Loader &ld, const Env &env, const std::function<void()> &op,
			bool at_publish, uint64_t gen, uint64_t max_ms, std::mt19937_64 &rng)
{
	std::string when;
	if (at_publish) {
		KillAtPublish k(env, ld.pid(), gen, 120000);
		op();
		EXPECT_TRUE(k.wait()) << "no publish within the deadline";
		when = "at its publish";
	} else {
		op();
		unsigned d = (unsigned)(rng() % (max_ms + 1));
		sleep_ms(d);
		when = std::to_string(d) + " ms in";
	}
	ld.kill9();
	return when;
}

// Sends req (not awaited), kills ld the instant its publish moves the
// control segment past the generation served now, and starts a loader
// again with args: the one returned.
std::unique_ptr<Loader> killed_at_publish(Loader &ld, const Env &env,
					  const std::vector<std::string> &req,
					  const std::vector<std::string> &args, std::mt19937_64 &rng)
{
	uint64_t g0 = ld.status(kCache)["generation"].u64();
	int fd = -1;
	kill_during(ld, env, [&] { fd = request_async(env.root(), req); }, true, g0, 0, rng);
	if (fd >= 0)
		close(fd);
	return restart(env, args);
}

// Loads img, applies its delta d1 and compacts: a base whose deltas are
// img's (its origin) and whose chain is at d1.
::testing::AssertionResult compacted_of(Loader &ld, const std::string &img, const std::string &d1)
{
	if (!ld.load(kCache, img).ok())
		return ::testing::AssertionFailure() << "load " << img;
	Json j = ld.req({"apply", kCache, d1});
	if (j.ok())
		j = ld.req({"compact", kCache});
	if (!j.ok())
		return ::testing::AssertionFailure() << j["error"].s();
	return ::testing::AssertionSuccess();
}

} // namespace

// ---- kill -9 while a stream publishes ------------------------------------------------

namespace {

// Rounds of a stream killed at random moments (the last at a batch's
// publish), then a restart; durable: with a durable log (loader/README.md,
// "What is kept"), every other restart after a reboot (ROOT and the
// segments gone), so what is served comes from the configured source and
// the log replayed onto it.
void mid_stream(bool durable, int rounds)
{
	Env env;
	std::mt19937_64 rng(test_seed() + durable);
	printf("seed %llu (SHMKV_TEST_SEED repeats it)\n", (unsigned long long)test_seed());
	Model m;
	m.tag = "a";
	m.n = 20000;
	std::string base = env.img_path("a.shmkv");
	ASSERT_EQ(build_image(base, m.tag, m.n), "");
	std::string dir = env.base() + "/durable";
	const std::vector<std::string> args = {
		"--memory", "shm", "--config",
		conf_file(env, "[loader]\nstream_interval = 20ms\n" +
				       (durable ? "durable_dir = " + dir + "\n[cache w]\nsource = " +
							  base + "\n"
						: std::string()))};
	// a durable loader's start: the source loaded (after a reboot), then
	// the log replayed or found served, which it logs
	auto start = [&]() {
		auto said = [&] { return log_lines(env.log(), {"durable log of cache=w"}).size(); };
		bool logged = file_exists(dir + "/w.wal");
		size_t before = said();
		std::unique_ptr<Loader> ld = restart(env, args);
		EXPECT_TRUE(!durable || wait_until([&] {
			return ld->status(kCache)["generation"].u64() > 0 &&
			       (!logged || said() > before);
		}, 60000, 10)) << "the cache after a start:\n" << last_run_log(env);
		return ld;
	};
	std::unique_ptr<Loader> ld = start();
	if (!durable) {
		ASSERT_TRUE(ld->load(kCache, base).ok());
	}
	if (::testing::Test::HasFailure())
		return;
	uint64_t next_removal = 0;
	for (int r = 0; r < rounds; r++) {
		std::string when = "round " + std::to_string(r);
		std::vector<Line> lines = stream_lines(r, 6000, m.n, &next_removal);
		// the last round: 200 lines acknowledged, then killed as the next
		// batch is published, before its acknowledgement
		bool at_publish = r == rounds - 1;
		Stream s(env, kCache, false);
		Feeder f(s, lines, at_publish ? 200 : SIZE_MAX);
		ASSERT_TRUE(at_publish ? s.wait_acked(200)
				       : wait_until([&] { return !s.acks().empty(); }, 60000, 2))
			<< when << ": no acknowledgement: " << s.err();
		CtlSnap now;
		ASSERT_TRUE(ctl_snap(env, &now));
		std::string at = kill_during(*ld, env, [&] { f.resume(); }, at_publish, now.generation,
					     700, rng);
		size_t tried = f.stop();
		s.finish(); // shmctl ends with the connection: an error status
		std::vector<Ack> acks = s.acks();
		ASSERT_FALSE(acks.empty());
		uint64_t acked = acks.back().last, acked_gen = acks.back().generation;
		for (size_t i = 1; i < acks.size(); i++)
			EXPECT_EQ(acks[i].first, acks[i - 1].last + 1) << when << ": every line once";
		std::vector<std::string> left = temporaries(env);
		bool reboot = durable && r % 2 == 1;
		if (reboot) { // memory is lost: ROOT (a tmpfs, /run) and the segments
			std::error_code ec;
			for (const std::string &d : {env.root(), env.seg_dir()})
				for (const auto &e : std::filesystem::directory_iterator(d, ec))
					std::filesystem::remove_all(e.path(), ec);
			left.clear();
			when += " (a reboot)";
		}

		ld = start();
		if (::testing::Test::HasFailure())
			return;
		shmkv_test::Db db(after_restart(env, when, left));
		ASSERT_TRUE(db);
		if (!reboot) {
			EXPECT_GE(shmkv_generation(db), acked_gen) << when;
		}
		// P lines were published: every distinct key of a line before P is
		// there and none after; the last distinct line present bounds P
		std::string bad;
		long last = -1;
		for (size_t i = 0; i < lines.size(); i++)
			if (lines[i].distinct && read_key(db, lines[i].key, &bad))
				last = (long)i;
		EXPECT_EQ(bad, "") << when;
		size_t next = (size_t)last + 1;
		while (next < lines.size() && !lines[next].distinct)
			next++;
		std::unordered_set<std::string> touched;
		for (const Line &l : lines)
			touched.insert(l.key);
		std::vector<std::string> keys(touched.begin(), touched.end());
		for (uint64_t i = 0; i < m.n; i += 97)
			keys.push_back(key_of(i));
		// the prefixes P the distinct keys allow: the state must be one of them
		size_t served = SIZE_MAX;
		std::string why;
		std::unordered_map<std::string, std::optional<std::string>> prefix;
		for (size_t i = 0; i < (size_t)(last + 1); i++)
			prefix[lines[i].key] = lines[i].value;
		for (size_t p = (size_t)(last + 1); p <= next && p <= lines.size(); p++) {
			if (p > (size_t)(last + 1))
				prefix[lines[p - 1].key] = lines[p - 1].value;
			std::string w = mismatch(db.get(), keys, [&](const std::string &k) {
				auto it = prefix.find(k);
				return it != prefix.end() ? it->second : m.get(k);
			});
			if (w.empty()) {
				served = p;
				break;
			}
			if (why.empty())
				why = "as the first " + std::to_string(p) + " lines: " + w;
		}
		ASSERT_NE(served, SIZE_MAX) << when << ": the served generation is no prefix of the "
					    << "stream: " << why;
		printf("%s: killed %s (after the first acknowledgement): %zu lines written, "
		       "%llu acknowledged (%zu batches), %zu served; temporaries then: %s\n",
		       when.c_str(), at.c_str(), tried, (unsigned long long)acked, acks.size(), served,
		       join(left).c_str());
		EXPECT_GE(served, acked) << when << ": an acknowledged line was lost";
		EXPECT_LE(served, tried) << when;
		for (size_t i = 0; i < served; i++)
			m.changes[lines[i].key] = lines[i].value;
		if (::testing::Test::HasFailure())
			return;
	}
	// streaming goes on on the last loader: every line acknowledged and served
	std::vector<Line> lines = stream_lines(rounds, 400, m.n, &next_removal);
	Stream s(env, kCache, false);
	std::string text;
	for (const Line &l : lines)
		text += l.text();
	ASSERT_TRUE(s.write(text));
	ASSERT_TRUE(s.wait_acked(lines.size())) << s.err();
	EXPECT_EQ(s.finish(), 0) << s.err();
	for (const Line &l : lines)
		m.changes[l.key] = l.value;
	int err;
	std::string why;
	shmkv_test::Db db(attach(env.root(), kCache, SHMKV_ATTACH_VERIFY, &err, &why));
	ASSERT_TRUE(db) << why;
	EXPECT_EQ(mismatch(db.get(), model_keys(m, 7), [&](const std::string &k) { return m.get(k); }),
		  "");
	EXPECT_EQ(ld->stop(), 0);
}

} // namespace

TEST(WritesCrash, MidStream)
{
	mid_stream(false, 10);
}

TEST(WritesCrash, MidStreamDurable)
{
	mid_stream(true, 6);
}

// ---- kill -9 while a large delta is applied ---------------------------------------

namespace {

// Round r's delta of the 200k-key base: key_0..key_139999 set to "d<r>:i",
// 10000 new keys n_<j>, and the 50000 keys from key_150000 alternately
// removed and set by round parity: 200000 records, every one a change
// from round r - 1.
std::string apply_delta(const std::string &path, const std::string &base, int r,
			std::vector<std::pair<std::string, std::optional<std::string>>> *recs)
{
	std::vector<std::pair<std::string, std::string>> set;
	std::vector<std::string> removes;
	std::string tag = "d" + std::to_string(r) + ":";
	for (uint64_t i = 0; i < 140000; i++)
		set.push_back({key_of(i), tag + std::to_string(i)});
	for (uint64_t j = 0; j < 10000; j++)
		set.push_back({"n_" + std::to_string(j), tag + "n" + std::to_string(j)});
	for (uint64_t i = 150000; i < 200000; i++)
		if ((i % 2 == 0) == (r % 2 == 0))
			removes.push_back(key_of(i));
		else
			set.push_back({key_of(i), tag + std::to_string(i)});
	recs->clear();
	for (const auto &kv : set)
		recs->push_back({kv.first, kv.second});
	for (const std::string &k : removes)
		recs->push_back({k, std::nullopt});
	return build_delta(path, base, set, removes);
}

} // namespace

// Waits until a fold the loader queued by itself (loader/README.md,
// "Writes": once its top holds max(fold_entries, fold_ratio x the lower's
// records)) has published: a round then sees only its own request publish.
void wait_fold_settled(Loader &ld)
{
	EXPECT_TRUE(wait_until([&] {
		Json s = ld.status(kCache);
		const Json &top = s["overlay"]["top"], &f = s["fold"];
		if (top.kind == Json::NUL)
			return true;
		double bound = std::max((double)f["entries_bound"].u64(),
					f["ratio_bound"].num * (double)s["overlay"]["lower"]["records"].u64());
		return (double)top["records"].u64() < bound;
	}, 120000, 10)) << "a fold due did not publish";
}

TEST(WritesCrash, MidApply)
{
	Env env;
	std::mt19937_64 rng(test_seed() + 1);
	printf("seed %llu (SHMKV_TEST_SEED repeats it)\n", (unsigned long long)test_seed());
	// no compaction by itself: the generation after an apply is the apply's
	const std::vector<std::string> args = {
		"--memory", "shm", "--config",
		conf_file(env, "[cache w]\ncompact_entries = 0\ncompact_ratio = 0\n")};
	Model m;
	m.tag = "a";
	m.n = 200000;
	std::string base = env.img_path("a.shmkv");
	ASSERT_EQ(build_image(base, m.tag, m.n), "");
	std::unique_ptr<Loader> ld = restart(env, args);
	ASSERT_TRUE(ld->load(kCache, base).ok());
	std::vector<std::pair<std::string, std::optional<std::string>>> recs;
	// round 0 is not killed: it times an apply, for the kill moments
	std::string d0 = env.img_path("d0.delta");
	ASSERT_EQ(apply_delta(d0, base, 0, &recs), "");
	uint64_t t0 = now_ms();
	Json j = ld->req({"apply", kCache, d0});
	uint64_t apply_ms = now_ms() - t0;
	ASSERT_TRUE(j.ok()) << j["error"].s();
	ASSERT_EQ(j["records"].u64(), 200000u);
	for (const auto &kv : recs)
		m.changes[kv.first] = kv.second;
	printf("an apply of 200000 records: %llu ms\n", (unsigned long long)apply_ms);
	int outcomes[2] = {0, 0};
	const int rounds = 7; // the last one killed at its publish
	for (int r = 1; r <= rounds; r++) {
		std::string when = "round " + std::to_string(r);
		std::string d = env.img_path("d" + std::to_string(r) + ".delta");
		ASSERT_EQ(apply_delta(d, base, r, &recs), "");
		wait_fold_settled(*ld); // of the last round's change: not this round's publish
		CtlSnap before;
		ASSERT_TRUE(ctl_snap(env, &before));
		int fd = -1;
		std::string at = kill_during(*ld, env, [&] {
			fd = request_async(env.root(), {"apply", kCache, d});
		}, r == rounds, before.generation, apply_ms * 2, rng);
		ASSERT_GE(fd, 0);
		std::string line;
		Json reply;
		bool replied = read_line(fd, &line, 5000) && parse_json(line, &reply) && reply.ok();
		close(fd);
		std::vector<std::string> left = temporaries(env);

		ld = restart(env, args);
		if (::testing::Test::HasFatalFailure())
			return;
		shmkv_test::Db db(after_restart(env, when, left));
		ASSERT_TRUE(db);
		CtlSnap now;
		ASSERT_TRUE(ctl_snap(env, &now));
		Model after = m;
		for (const auto &kv : recs)
			after.changes[kv.first] = kv.second;
		// the next generation (or the one after it, where the kill left the
		// publish open and the restart republished it: adopt.c's repair)
		bool applied = now.generation != before.generation;
		if (!applied) {
			ASSERT_EQ(describe(now), describe(before))
				<< when << ": neither the generation before nor the one after";
			EXPECT_FALSE(replied) << when << ": the apply was acknowledged, then lost";
		} else {
			EXPECT_EQ(now.bases, before.bases) << when << ": an apply keeps the base";
			// a lower and the top it went into, or the two folded into one
			EXPECT_GE(now.overlays.size(), 1u) << when;
			EXPECT_LE(now.overlays.size(), 2u) << when;
		}
		const Model &want = applied ? after : m;
		std::string w = mismatch(db.get(), model_keys(want),
					 [&](const std::string &k) { return want.get(k); });
		EXPECT_EQ(w, "") << when << ": generation " << now.generation << " is the one "
				 << (applied ? "after" : "before") << " the apply, yet";
		if (r == rounds) {
			EXPECT_TRUE(applied) << when << ": killed after its publish";
		}
		outcomes[applied]++;
		printf("%s: killed %s: %s%s; temporaries then: %s\n", when.c_str(), at.c_str(),
		       applied ? "applied" : "not applied",
		       replied ? " (replied)" : "", join(left).c_str());
		if (applied)
			m = after;
		if (::testing::Test::HasFailure())
			return;
		// the restarted loader takes changes
		Json c = ld->req({"change", kCache, "{\"key\": \"after" + std::to_string(r) +
						   "\", \"value\": \"x\"}"});
		ASSERT_TRUE(c.ok()) << when << ": " << c["error"].s();
		m.changes["after" + std::to_string(r)] = "x";
	}
	printf("outcomes: %d before, %d after\n", outcomes[0], outcomes[1]);
	// and a large delta again, to the end
	std::string d = env.img_path("last.delta");
	ASSERT_EQ(apply_delta(d, base, rounds + 1, &recs), "");
	j = ld->req({"apply", kCache, d});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	for (const auto &kv : recs)
		m.changes[kv.first] = kv.second;
	int err;
	std::string why;
	shmkv_test::Db db(attach(env.root(), kCache, SHMKV_ATTACH_VERIFY, &err, &why));
	ASSERT_TRUE(db) << why;
	EXPECT_EQ(mismatch(db.get(), model_keys(m, 3), [&](const std::string &k) { return m.get(k); }),
		  "");
	EXPECT_EQ(ld->stop(), 0);
}

// ---- kill -9 while a compaction runs ------------------------------------------------

TEST(WritesCrash, MidCompact)
{
	Env env;
	std::mt19937_64 rng(test_seed() + 2);
	printf("seed %llu (SHMKV_TEST_SEED repeats it)\n", (unsigned long long)test_seed());
	// compactions only when asked
	const std::vector<std::string> args = {
		"--memory", "shm", "--config",
		conf_file(env, "[cache w]\ncompact_entries = 0\ncompact_ratio = 0\n")};
	Model m;
	m.tag = "a";
	m.n = 500000;
	std::string base = env.img_path("a.shmkv");
	ASSERT_EQ(build_image(base, m.tag, m.n), "");
	std::unique_ptr<Loader> ld = restart(env, args);
	ASSERT_TRUE(ld->load(kCache, base).ok());
	// 100k changes, as a delta of the base served now (a compacted base
	// too): 80k keys set, 10k removed, 10k new
	int batch = 0;
	auto add_changes = [&]() {
		int r = batch++;
		std::vector<std::pair<std::string, std::string>> set;
		std::vector<std::string> removes;
		std::string tag = "c" + std::to_string(r) + ":";
		for (uint64_t j = 0; j < 80000; j++)
			set.push_back({key_of(j * 5 + (uint64_t)r % 5), tag + std::to_string(j)});
		for (uint64_t j = 0; j < 10000; j++) {
			removes.push_back(key_of(400000 + ((uint64_t)r * 10000 + j) % 100000));
			set.push_back({"n" + std::to_string(r) + "_" + std::to_string(j), tag});
		}
		std::string d = env.img_path("c" + std::to_string(r) + ".delta");
		std::string err = build_delta(d, ld->status(kCache)["segment"].s(), set, removes);
		if (!err.empty())
			return err;
		Json j = ld->req({"apply", kCache, d});
		if (!j.ok())
			return "apply: " + j["error"].s();
		for (const auto &kv : set)
			m.changes[kv.first] = kv.second;
		for (const std::string &k : removes)
			m.changes[k] = std::nullopt;
		unlink(d.c_str());
		return std::string();
	};
	ASSERT_EQ(add_changes(), "");
	// the first compaction is not killed: it times one, for the kill moments
	uint64_t t0 = now_ms();
	Json j = ld->req({"compact", kCache});
	uint64_t compact_ms = now_ms() - t0;
	ASSERT_TRUE(j.ok()) << j["error"].s();
	ASSERT_TRUE(j["compacted"].b);
	EXPECT_EQ(j["entries"].u64(), m.live() + 2);
	printf("a compaction of %llu keys and 100000 changes: %llu ms\n", (unsigned long long)m.n,
	       (unsigned long long)compact_ms);
	ASSERT_EQ(add_changes(), "");
	int outcomes[2] = {0, 0};
	const int rounds = 6; // the last one killed at its publish
	for (int r = 1; r <= rounds; r++) {
		std::string when = "round " + std::to_string(r);
		CtlSnap before;
		ASSERT_TRUE(ctl_snap(env, &before));
		ASSERT_GE(before.overlays.size(), 1u) << when; // a lower, and a top after a change
		int fd = -1;
		std::string at = kill_during(*ld, env, [&] {
			fd = request_async(env.root(), {"compact", kCache});
		}, r == rounds, before.generation, compact_ms * 5 / 4, rng);
		ASSERT_GE(fd, 0);
		std::string line;
		Json reply;
		bool replied = read_line(fd, &line, 5000) && parse_json(line, &reply) && reply.ok();
		close(fd);
		std::vector<std::string> left = temporaries(env);

		ld = restart(env, args);
		if (::testing::Test::HasFatalFailure())
			return;
		shmkv_test::Db db(after_restart(env, when, left));
		ASSERT_TRUE(db);
		CtlSnap now;
		ASSERT_TRUE(ctl_snap(env, &now));
		bool compacted = now.generation != before.generation;
		Json st = ld->status(kCache);
		if (!compacted) {
			ASSERT_EQ(describe(now), describe(before))
				<< when << ": neither the generation before nor the one after";
			EXPECT_FALSE(replied) << when << ": the compaction was acknowledged, then lost";
		} else {
			EXPECT_TRUE(now.overlays.empty()) << when << ": a compacted base has no overlay";
			EXPECT_NE(now.bases, before.bases) << when;
			EXPECT_EQ(st["entries"].u64(), m.live() + 2) << when << ": the new base";
			EXPECT_EQ(st["overlay"].kind, Json::NUL) << when;
		}
		// the same answers either way
		std::string w = mismatch(db.get(), model_keys(m),
					 [&](const std::string &k) { return m.get(k); });
		EXPECT_EQ(w, "") << when << " (" << describe(now) << ")";
		if (r == rounds) {
			EXPECT_TRUE(compacted) << when << ": killed after its publish";
		}
		outcomes[compacted]++;
		printf("%s: killed %s: %s%s; temporaries then: %s\n", when.c_str(), at.c_str(),
		       compacted ? "compacted" : "not compacted",
		       replied ? " (replied)" : "", join(left).c_str());
		if (::testing::Test::HasFailure())
			return;
		// the restarted loader takes changes: a compacted base gets new ones
		if (compacted) {
			ASSERT_EQ(add_changes(), "") << when;
		}
		Json c = ld->req({"change", kCache, "{\"key\": \"after" + std::to_string(r) +
						   "\", \"value\": \"x\"}"});
		ASSERT_TRUE(c.ok()) << when << ": " << c["error"].s();
		m.changes["after" + std::to_string(r)] = "x";
	}
	printf("outcomes: %d before, %d after\n", outcomes[0], outcomes[1]);
	j = ld->req({"compact", kCache});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["entries"].u64(), m.live() + 2);
	int err;
	std::string why;
	shmkv_test::Db db(attach(env.root(), kCache, SHMKV_ATTACH_VERIFY, &err, &why));
	ASSERT_TRUE(db) << why;
	EXPECT_EQ(mismatch(db.get(), model_keys(m, 3), [&](const std::string &k) { return m.get(k); }),
		  "");
	EXPECT_EQ(ld->stop(), 0);
}

// ---- kills at the instant of a publish: what the state file must keep -----------------

// A compaction keeps what deltas apply to: the image loaded (the origin) and
// the next delta of its chain (loader/README.md, "Compaction"), across a
// restart too. Killed the instant the compacted base is published, the
// restarted loader must still apply the chain's next delta. Five tries
// (the kill lands a little after the publish, at a moment that varies).
TEST(WritesCrash, CompactionOriginSurvivesAKillAtItsPublish)
{
	Env env;
	const std::vector<std::string> args = {"--memory", "shm"};
	std::string base = env.img_path("a.shmkv"), d1 = env.img_path("d1.delta"),
		    d2 = env.img_path("d2.delta");
	const uint64_t n = 20000;
	ASSERT_EQ(build_image(base, "a", n), "");
	ASSERT_EQ(build_delta(d1, base, {{"x", "1"}}, {key_of(3)}), "");
	ASSERT_EQ(build_delta(d2, base, {{"y", "2"}}, {key_of(4)}, d1), "");
	std::unique_ptr<Loader> ld = restart(env, args);
	Model m;
	m.tag = "a";
	m.n = n;
	std::mt19937_64 rng(test_seed());
	for (int attempt = 0; attempt < 5; attempt++) {
		std::string when = "try " + std::to_string(attempt);
		ASSERT_TRUE(ld->load(kCache, base).ok()) << when; // the origin, anew
		ASSERT_TRUE(ld->req({"apply", kCache, d1}).ok()) << when;
		uint64_t g0 = ld->status(kCache)["generation"].u64();
		int fd = -1;
		kill_during(*ld, env, [&] { fd = request_async(env.root(), {"compact", kCache}); },
			    true, g0, 0, rng);
		if (fd >= 0)
			close(fd);
		ld = restart(env, args);
		Json st = ld->status(kCache);
		ASSERT_GT(st["generation"].u64(), g0) << when << ": the compacted base";
		ASSERT_EQ(st["overlay"].kind, Json::NUL) << when << ": the compacted base";
		Json j = ld->req({"apply", kCache, d2});
		EXPECT_TRUE(j.ok()) << when << ": the chain's next delta after a restart: "
				    << j["error"].s();
		int err;
		std::string why;
		shmkv_test::Db db(attach(env.root(), kCache, SHMKV_ATTACH_VERIFY, &err, &why));
		ASSERT_TRUE(db) << why;
		m.changes = {{"x", "1"}, {key_of(3), std::nullopt}};
		if (j.ok())
			m.changes.insert({{"y", "2"}, {key_of(4), std::nullopt}});
		EXPECT_EQ(mismatch(db.get(), model_keys(m),
				   [&](const std::string &k) { return m.get(k); }), "") << when;
		if (::testing::Test::HasFailure())
			return;
	}
}

// A load after a compaction starts over: deltas of the image the
// compacted base was made from no longer apply, the loaded image's do
// (loader/README.md, "Compaction"). Killed the instant the load is
// published, before the state file says so, the restarted loader must
// refuse the old chain's next delta, which the file's origin and chain
// would let through onto the new image, and take the new image's. Five
// tries; the log says which kills came before the file was saved.
TEST(WritesCrash, LoadAfterACompactionKilledAtItsPublish)
{
	Env env;
	const std::vector<std::string> args = {"--memory", "shm"};
	std::string pa = env.img_path("a.shmkv"), pb = env.img_path("b.shmkv"),
		    d1 = env.img_path("d1.delta"), d2 = env.img_path("d2.delta"),
		    e1 = env.img_path("e1.delta");
	const uint64_t n = 2000;
	ASSERT_EQ(build_image(pa, "a", n), "");
	ASSERT_EQ(build_image(pb, "b", n), "");
	ASSERT_EQ(build_delta(d1, pa, {{"x", "1"}}, {key_of(3)}), "");
	ASSERT_EQ(build_delta(d2, pa, {{"y", "2"}}, {key_of(4)}, d1), "");
	ASSERT_EQ(build_delta(e1, pb, {{"z", "3"}}, {key_of(5)}), "");
	std::unique_ptr<Loader> ld = restart(env, args);
	std::mt19937_64 rng(test_seed());
	unsigned before_save = 0;
	for (int attempt = 0; attempt < 5; attempt++) {
		std::string when = "try " + std::to_string(attempt);
		ASSERT_TRUE(compacted_of(*ld, pa, d1)) << when;
		ld = killed_at_publish(*ld, env, {"load", kCache, pb}, args, rng);
		before_save += (unsigned)log_lines(last_run_log(env),
						   {"a loaded base, was published after"}).size();
		shmkv_test::Db db(after_restart(env, when));
		ASSERT_TRUE(db) << when;
		Model m;
		m.tag = "b";
		m.n = n;
		EXPECT_EQ(mismatch(db.get(), model_keys(m), [&](const std::string &k) { return m.get(k); }),
			  "") << when << ": the image loaded before the kill";
		Json j = ld->req({"apply", kCache, d2});
		EXPECT_FALSE(j.ok()) << when << ": the chain of the image before the load went on "
				     << "over the loaded one";
		j = ld->req({"apply", kCache, e1});
		EXPECT_TRUE(j.ok()) << when << ": a delta of the loaded image: " << j["error"].s();
		EXPECT_EQ(shmkv_refresh(db.get()), 1) << when;
		m.changes = {{"z", "3"}, {key_of(5), std::nullopt}};
		EXPECT_EQ(mismatch(db.get(), model_keys(m), [&](const std::string &k) { return m.get(k); }),
			  "") << when << ": the loaded image and its delta";
		if (::testing::Test::HasFailure())
			return;
	}
	printf("%u of 5 kills came before the state file was saved\n", before_save);
}

// The other way: a load after a compaction, then a rollback to the
// compacted base killed at its publish. The restart must give the
// compacted base back its origin and chain (the state file's rollback
// figures), so that the old chain's next delta applies again. Five tries.
TEST(WritesCrash, RollbackToACompactedBaseKilledAtItsPublish)
{
	Env env;
	const std::vector<std::string> args = {"--memory", "shm"};
	std::string pa = env.img_path("a.shmkv"), pb = env.img_path("b.shmkv"),
		    d1 = env.img_path("d1.delta"), d2 = env.img_path("d2.delta");
	const uint64_t n = 2000;
	ASSERT_EQ(build_image(pa, "a", n), "");
	ASSERT_EQ(build_image(pb, "b", n), "");
	ASSERT_EQ(build_delta(d1, pa, {{"x", "1"}}, {key_of(3)}), "");
	ASSERT_EQ(build_delta(d2, pa, {{"y", "2"}}, {key_of(4)}, d1), "");
	std::unique_ptr<Loader> ld = restart(env, args);
	std::mt19937_64 rng(test_seed());
	for (int attempt = 0; attempt < 5; attempt++) {
		std::string when = "try " + std::to_string(attempt);
		ASSERT_TRUE(compacted_of(*ld, pa, d1)) << when;
		ASSERT_TRUE(ld->load(kCache, pb).ok()) << when;
		ld = killed_at_publish(*ld, env, {"rollback", kCache}, args, rng);
		shmkv_test::Db db(after_restart(env, when));
		ASSERT_TRUE(db) << when;
		Model m;
		m.tag = "a";
		m.n = n;
		m.changes = {{"x", "1"}, {key_of(3), std::nullopt}};
		EXPECT_EQ(mismatch(db.get(), model_keys(m), [&](const std::string &k) { return m.get(k); }),
			  "") << when << ": the compacted base, rolled back to before the kill";
		Json j = ld->req({"apply", kCache, d2});
		EXPECT_TRUE(j.ok()) << when << ": the chain's next delta on the compacted base: "
				    << j["error"].s();
		EXPECT_EQ(shmkv_refresh(db.get()), 1) << when;
		m.changes.insert({{"y", "2"}, {key_of(4), std::nullopt}});
		EXPECT_EQ(mismatch(db.get(), model_keys(m), [&](const std::string &k) { return m.get(k); }),
			  "") << when << ": and the delta";
		if (::testing::Test::HasFailure())
			return;
	}
}

// `rollback` steps back one publish (loader/README.md, "Writes"), and a
// restarted loader adopts the rollback with its overlay ("What is kept").
// Killed the instant a change is published, the restarted loader's
// rollback must give the generation before that change. Three tries.
TEST(WritesCrash, RollbackAfterAKillAtAChangesPublish)
{
	Env env;
	const std::vector<std::string> args = {"--memory", "shm"};
	std::string base = env.img_path("a.shmkv");
	const uint64_t n = 2000;
	ASSERT_EQ(build_image(base, "a", n), "");
	std::unique_ptr<Loader> ld = restart(env, args);
	Model m;
	m.tag = "a";
	m.n = n;
	std::mt19937_64 rng(test_seed());
	for (int attempt = 0; attempt < 3; attempt++) {
		std::string when = "try " + std::to_string(attempt);
		ASSERT_TRUE(ld->load(kCache, base).ok()) << when; // no changes, anew
		ASSERT_TRUE(ld->req({"change", kCache, R"({"key": "k1", "value": "1"})"}).ok());
		ASSERT_TRUE(ld->req({"change", kCache, R"({"key": "k2", "value": "2"})"}).ok());
		uint64_t g0 = ld->status(kCache)["generation"].u64();
		int fd = -1;
		kill_during(*ld, env, [&] {
			fd = request_async(env.root(), {"change", kCache, R"({"key": "k3", "value": "3"})"});
		}, true, g0, 0, rng);
		if (fd >= 0)
			close(fd);
		ld = restart(env, args);
		shmkv_test::Db db(after_restart(env, when));
		ASSERT_TRUE(db);
		m.changes = {{"k1", "1"}, {"k2", "2"}, {"k3", "3"}};
		auto same = [&]() {
			return mismatch(db.get(), model_keys(m),
					[&](const std::string &k) { return m.get(k); });
		};
		EXPECT_EQ(same(), "") << when << ": the change published before the kill";
		Json j = ld->req({"rollback", kCache});
		ASSERT_TRUE(j.ok()) << when << ": " << j["error"].s();
		EXPECT_EQ(shmkv_refresh(db.get()), 1) << when;
		m.changes.erase("k3");
		EXPECT_EQ(same(), "") << when << ": a rollback steps back one publish: k3 goes, "
				      << "k1 and k2 stay";
		if (::testing::Test::HasFailure())
			return;
	}
}

// The same for the other publishes: killed the instant a rollback (to the
// same base, then to another) or a load is published, the restarted
// loader serves it and its rollback steps back exactly one publish.
TEST(WritesCrash, RollbackAfterAKillAtARollbacksOrALoadsPublish)
{
	Env env;
	const std::vector<std::string> args = {"--memory", "shm"};
	std::string pa = env.img_path("a.shmkv"), pb = env.img_path("b.shmkv");
	const uint64_t n = 2000;
	ASSERT_EQ(build_image(pa, "a", n), "");
	ASSERT_EQ(build_image(pb, "b", n), "");
	std::unique_ptr<Loader> ld = restart(env, args);
	std::mt19937_64 rng(test_seed());
	Model a1, a2, b;
	a1.tag = a2.tag = "a";
	b.tag = "b";
	a1.n = a2.n = b.n = n;
	a1.changes = {{"k1", "1"}};
	a2.changes = {{"k1", "1"}, {"k2", "2"}};
	std::vector<shmkv_test::Db> dbs;
	// the request killed at its publish, then a restart: the handle
	auto killed = [&](const std::vector<std::string> &req, const std::string &when) {
		ld = killed_at_publish(*ld, env, req, args, rng);
		dbs.emplace_back(after_restart(env, when));
		return dbs.back().get();
	};
	auto serves = [&](shmkv *db, const Model &m) {
		return mismatch(db, model_keys(m), [&](const std::string &k) { return m.get(k); });
	};
	auto rollback = [&](shmkv *db, const std::string &when) {
		Json j = ld->req({"rollback", kCache});
		EXPECT_TRUE(j.ok()) << when << ": " << j["error"].s();
		EXPECT_EQ(shmkv_refresh(db), 1) << when;
	};
	ASSERT_TRUE(ld->load(kCache, pa).ok());
	ASSERT_TRUE(ld->req({"change", kCache, R"({"key": "k1", "value": "1"})"}).ok());
	ASSERT_TRUE(ld->req({"change", kCache, R"({"key": "k2", "value": "2"})"}).ok());

	std::string when = "a rollback's publish (the same base)";
	shmkv *db = killed({"rollback", kCache}, when);
	ASSERT_TRUE(db) << when;
	EXPECT_EQ(serves(db, a1), "") << when << ": the rollback published before the kill";
	rollback(db, when);
	EXPECT_EQ(serves(db, a2), "") << when << ": a rollback after it undoes it";

	when = "a load's publish";
	db = killed({"load", kCache, pb}, when);
	ASSERT_TRUE(db) << when;
	EXPECT_EQ(serves(db, b), "") << when << ": the image loaded before the kill";
	rollback(db, when);
	EXPECT_EQ(serves(db, a2), "") << when << ": a rollback steps back to the base and its "
				      << "changes";

	when = "a rollback's publish (another base)";
	db = killed({"rollback", kCache}, when);
	ASSERT_TRUE(db) << when;
	EXPECT_EQ(serves(db, b), "") << when << ": the rollback published before the kill";
	rollback(db, when);
	EXPECT_EQ(serves(db, a2), "") << when << ": a rollback after it undoes it";
}

// Durable mode (loader/README.md, "What is kept"): a compaction keeps its
// new base beside the log and rewrites the log's head. Killed the instant
// the compacted base is published, then restarted (the compacted base
// adopted), then a change acknowledged, then a reboot: every change
// acknowledged comes back. Three tries.
TEST(WritesCrash, DurableCompactionKilledAtItsPublishThenAReboot)
{
	Env env;
	std::string base = env.img_path("a.shmkv"), dir = env.base() + "/durable";
	const uint64_t n = 20000;
	ASSERT_EQ(build_image(base, "a", n), "");
	const std::vector<std::string> args = {
		"--memory", "shm", "--config",
		conf_file(env, "[loader]\ndurable_dir = " + dir + "\n[cache w]\nsource = " + base +
				       "\n")};
	auto start = [&]() {
		auto said = [&] { return log_lines(env.log(), {"durable log of cache=w"}).size(); };
		bool logged = file_exists(dir + "/w.wal");
		size_t before = said();
		std::unique_ptr<Loader> ld = restart(env, args);
		EXPECT_TRUE(wait_until([&] {
			return ld->status(kCache)["generation"].u64() > 0 &&
			       (!logged || said() > before);
		}, 60000, 10)) << last_run_log(env);
		return ld;
	};
	std::unique_ptr<Loader> ld = start();
	Model m;
	m.tag = "a";
	m.n = n;
	std::mt19937_64 rng(test_seed());
	auto change = [&](const std::string &k, const std::string &v) {
		Json j = ld->req({"change", kCache, "{\"key\": \"" + k + "\", \"value\": \"" + v + "\"}"});
		EXPECT_TRUE(j.ok()) << j["error"].s();
		m.changes[k] = v;
	};
	auto check = [&](const std::string &when) {
		int err;
		std::string why;
		shmkv_test::Db db(attach(env.root(), kCache, SHMKV_ATTACH_VERIFY, &err, &why));
		ASSERT_TRUE(db) << when << ": " << why;
		EXPECT_EQ(mismatch(db.get(), model_keys(m),
				   [&](const std::string &k) { return m.get(k); }), "")
			<< when << "\n" << last_run_log(env);
	};
	for (int attempt = 0; attempt < 3; attempt++) {
		std::string when = "try " + std::to_string(attempt);
		change("x" + std::to_string(attempt), "1");
		uint64_t g0 = ld->status(kCache)["generation"].u64();
		int fd = -1;
		kill_during(*ld, env, [&] { fd = request_async(env.root(), {"compact", kCache}); },
			    true, g0, 0, rng);
		if (fd >= 0)
			close(fd);
		ld = start();
		check(when + ", restarted");
		change("y" + std::to_string(attempt), "2");
		ld->kill9(); // a reboot: ROOT (a tmpfs, /run) and the segments are gone
		std::error_code ec;
		for (const std::string &d : {env.root(), env.seg_dir()})
			for (const auto &e : std::filesystem::directory_iterator(d, ec))
				std::filesystem::remove_all(e.path(), ec);
		ld = start();
		check(when + ", after a reboot");
		printf("%s: durable dir: %s\n", when.c_str(), join(list_dir(dir)).c_str());
		if (::testing::Test::HasFailure())
			return;
	}
}

// The first change of a cache replaces its protocol 1 control segment by
// a protocol 2 one (lib/PROTOCOL.md, "From version 1 to 2"): the new file
// is written aside with the change published, the old one retired (it
// names no segment then) and the new one renamed over it. Killed between
// the retire and the rename (the rename held with the fault shim), the
// restart finds the retired file: it must serve a whole generation, the
// one before the change (the change was never acknowledged), never a
// segment file it picks up (the change's overlay, a delta image, is no
// base: no reader could attach), and take changes again.
TEST(WritesCrash, FirstChangeKilledBetweenItsRetireAndItsRename)
{
	Env env;
	Fault fault(env);
	const std::vector<std::string> args = {"--memory", "shm"};
	std::string base = env.img_path("a.shmkv");
	const uint64_t n = 2000;
	ASSERT_EQ(build_image(base, "a", n), "");
	Loader ld(env, args);
	std::string skip;
	if (!start_with_shim(ld, fault, &skip)) {
		if (!skip.empty())
			GTEST_SKIP() << skip;
		FAIL() << env.log();
	}
	ASSERT_TRUE(ld.load(kCache, base).ok()); // protocol 1
	fault.hold(env.root() + "/" + kCache + ".ctl");
	int fd = request_async(env.root(), {"change", kCache, R"({"key": "x", "value": "1"})"});
	ASSERT_GE(fd, 0);
	ASSERT_TRUE(fault.held()) << env.log();
	ld.kill9();
	close(fd);
	fault.clear();
	std::vector<std::string> left = temporaries(env);
	std::unique_ptr<Loader> again = restart(env, args);
	shmkv_test::Db db(after_restart(env, "restarted", left));
	ASSERT_TRUE(db) << last_run_log(env);
	Model m;
	m.tag = "a";
	m.n = n;
	m.changes = {{"x", std::nullopt}};
	auto serves = [&](shmkv *h) {
		return mismatch(h, model_keys(m), [&](const std::string &k) { return m.get(k); });
	};
	EXPECT_EQ(serves(db.get()), "") << "the base, as before the change";
	Json j = again->req({"change", kCache, R"({"key": "y", "value": "2"})"});
	EXPECT_TRUE(j.ok()) << j["error"].s();
	int err;
	std::string why;
	shmkv_test::Db db2(attach(env.root(), kCache, SHMKV_ATTACH_VERIFY, &err, &why));
	ASSERT_TRUE(db2) << why;
	m.changes["y"] = "2";
	EXPECT_EQ(serves(db2.get()), "") << "a change after the restart";
}

// A drop retires the control segment (readers learn it at their next
// refresh: no segment, SHMKV_CTL_RETIRED), then unlinks it and the
// segments; so does the replacement of a control segment (the first
// change's, above) before its rename. A loader killed between the two
// leaves the retired file (here retired by hand once the loader is killed:
// the moment is too short to hit with a kill). The restart must serve the
// generation the state file names, every change with it (the drop or the
// change was not acknowledged), never one it makes up from the segment
// files it finds (the base without its changes), and its rollback must
// step back one publish.
TEST(WritesCrash, RetiredControlSegmentAtARestart)
{
	Env env;
	const std::vector<std::string> args = {"--memory", "shm"};
	std::string base = env.img_path("a.shmkv");
	const uint64_t n = 2000;
	ASSERT_EQ(build_image(base, "a", n), "");
	std::unique_ptr<Loader> ld = restart(env, args);
	ASSERT_TRUE(ld->load(kCache, base).ok());
	ASSERT_TRUE(ld->req({"change", kCache, R"({"key": "x", "value": "1"})"}).ok());
	ASSERT_TRUE(ld->req({"change", kCache, R"({"key": "y", "value": "2"})"}).ok());
	ld->kill9();
	std::string p = env.root() + "/" + kCache + ".ctl";
	int fd = open(p.c_str(), O_RDWR | O_CLOEXEC);
	ASSERT_GE(fd, 0) << p;
	void *map = mmap(nullptr, SHMKV_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	ASSERT_NE(map, MAP_FAILED);
	shmkv_ctl *ctl = (shmkv_ctl *)map;
	ASSERT_EQ(shmkv_ctl_retire(ctl, shmkv_ctl_generation(ctl) + 1, 1, 1), 0);
	munmap(map, SHMKV_CTL_SIZE);
	ld = restart(env, args);
	shmkv_test::Db db(after_restart(env, "restarted"));
	ASSERT_TRUE(db) << last_run_log(env);
	Model m;
	m.tag = "a";
	m.n = n;
	m.changes = {{"x", "1"}, {"y", "2"}};
	auto serves = [&]() {
		return mismatch(db.get(), model_keys(m), [&](const std::string &k) { return m.get(k); });
	};
	EXPECT_EQ(serves(), "") << "the generation before, its changes with it\n"
				<< last_run_log(env);
	Json j = ld->req({"rollback", kCache});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(shmkv_refresh(db.get()), 1);
	m.changes.erase("y");
	EXPECT_EQ(serves(), "") << "a rollback steps back one publish: y goes, x stays";
}

// A fold (loader/README.md, "Writes": the top overlay merged into the
// lower one by itself, after the reply to the change that passed the
// bound) killed the instant it is published, before the state file says
// so, or at a random moment while it runs: the restarted loader serves
// every change acknowledged, no file is left over, and its rollback is
// still the generation before the last change (a fold is no step back).
TEST(WritesCrash, FoldKilledAtItsPublishOrInFlight)
{
	Env env;
	std::string base = env.img_path("a.shmkv");
	const uint64_t n = 2000, big = 20000;
	ASSERT_EQ(build_image(base, "a", n), "");
	const std::vector<std::string> args = {
		"--memory", "shm", "--config",
		conf_file(env, "[cache w]\nfold_entries = " + std::to_string(big) +
				       "\nfold_ratio = 0\n")};
	std::unique_ptr<Loader> ld = restart(env, args);
	std::mt19937_64 rng(test_seed());
	printf("seed %llu (SHMKV_TEST_SEED repeats it)\n", (unsigned long long)test_seed());
	// d0: the lower overlay; d1: the top, past the bound at once
	std::string d0 = env.img_path("d0.delta"), d1 = env.img_path("d1.delta");
	ASSERT_EQ(build_delta(d0, base, {{"first", "1"}}, {}), "");
	std::vector<std::pair<std::string, std::string>> set;
	for (uint64_t i = 0; i < big; i++)
		set.push_back({"f" + std::to_string(i), std::to_string(i)});
	ASSERT_EQ(build_delta(d1, base, set, {key_of(5)}), "");
	Model before, after;
	before.tag = after.tag = "a";
	before.n = after.n = n;
	before.changes = {{"first", "1"}};
	after.changes = before.changes;
	for (const auto &kv : set)
		after.changes[kv.first] = kv.second;
	after.changes[key_of(5)] = std::nullopt;
	auto serves = [&](shmkv *db, const Model &m) {
		return mismatch(db, model_keys(m, 7), [&](const std::string &k) { return m.get(k); });
	};
	for (int attempt = 0; attempt < 6; attempt++) {
		bool at_publish = attempt % 2 == 0;
		std::string when = "try " + std::to_string(attempt);
		ASSERT_TRUE(ld->load(kCache, base).ok()) << when; // no changes, anew
		ASSERT_TRUE(ld->req({"apply", kCache, d0}).ok()) << when;
		uint64_t g0 = ld->status(kCache)["generation"].u64();
		if (at_publish) {
			// the apply publishes g0 + 1, its fold g0 + 2
			int fd = -1;
			when += " " + kill_during(*ld, env, [&] {
				fd = request_async(env.root(), {"apply", kCache, d1});
			}, true, g0 + 1, 0, rng);
			if (fd >= 0)
				close(fd);
		} else {
			Json j = ld->req({"apply", kCache, d1});
			ASSERT_TRUE(j.ok()) << when << ": " << j["error"].s();
			unsigned d = (unsigned)(rng() % 400);
			sleep_ms(d);
			ld->kill9();
			when += ", " + std::to_string(d) + " ms after the reply";
		}
		ld = restart(env, args);
		shmkv_test::Db db(after_restart(env, when));
		ASSERT_TRUE(db) << when;
		EXPECT_EQ(serves(db.get(), after), "") << when << ": the apply acknowledged";
		Json s = ld->status(kCache);
		EXPECT_EQ(s["overlay"]["records"].u64(), big + 2) << when;
		bool folded = s["overlay"]["top"].kind == Json::NUL;
		EXPECT_TRUE(folded || s["overlay"]["top"]["records"].u64() == big + 1) << when;
		if (at_publish) {
			EXPECT_TRUE(folded) << when << ": killed at the fold's publish";
		}
		printf("%s: %s\n", when.c_str(), folded ? "folded" : "not folded");
		Json j = ld->req({"rollback", kCache});
		ASSERT_TRUE(j.ok()) << when << ": " << j["error"].s();
		EXPECT_EQ(shmkv_refresh(db.get()), 1) << when;
		EXPECT_EQ(serves(db.get(), before), "") << when << ": a rollback steps back the apply";
		ASSERT_TRUE(ld->req({"rollback", kCache}).ok()) << when;
		EXPECT_EQ(shmkv_refresh(db.get()), 1) << when;
		EXPECT_EQ(serves(db.get(), after), "") << when << ": and forth";
		EXPECT_EQ(orphans(env), "") << when;
		if (::testing::Test::HasFailure())
			return;
	}
}
