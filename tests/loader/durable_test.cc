// durable_test: the durable log of changes (loader/README.md, "What is
// kept"; durable_dir): what was acknowledged comes back after a reboot (the
// loader killed, its root and segments gone: tmpfs is memory), onto the
// configured source or the compacted base kept beside the log, in the
// first generation published (never the base without them); a torn tail
// is discarded with a log line; a log whose base is nowhere is kept aside;
// a rollback and a compaction are what comes back, also one killed while
// it merged off the worker or while it published; a load, a rollback, a
// change and a replay killed before the log or the state file follows
// them, a cache served without a log, an overlay gone (the lower or the
// top), a drop, a refused change (or a failed append) whose record could
// not be cut out of the log: a restart serves what was published and a
// reboot after it every change acknowledged, no more; a log set aside
// keeps the older ones.
#include <filesystem>
#include <map>

#include <xxhash.h>

#include "fault_util.h"
#include "loader_util.h"

using namespace loader_test;

namespace {

std::string get_str(const shmkv *db, const std::string &k, int *err)
{
	const char *s = nullptr;
	size_t n = 0;
	*err = shmkv_get_str(db, k.data(), k.size(), &s, &n);
	return *err ? std::string() : std::string(s, n);
}

class Durable : public ::testing::Test {
protected:
	Env env;
	std::string base = env.img_path("a.shmkv");
	std::string dir = env.base() + "/durable";
	std::string conf = env.base() + "/loader.conf";
	std::unique_ptr<Loader> ld;
	Fault *shim = nullptr; // start the loader with the fault shim (fault_util.h)
	const uint64_t n = 200;
	std::map<std::string, std::string> model; // "" absent
	std::string tag = "a"; // of the base image served (build_image)

	void SetUp() override
	{
		ASSERT_EQ(build_image(base, "a", n), "");
		write_conf(true);
		start();
	}
	void write_conf(bool source, const std::string &more = "")
	{
		ASSERT_TRUE(shmkv_test::write_file(
			conf, "[loader]\ndurable_dir = " + dir + "\n" +
				      (source ? "[cache w]\nsource = " + base + "\n" + more : "")));
	}
	// Compacted bases kept beside the log (DIR/w.SUM.base.shmkv).
	size_t kept_bases() const
	{
		size_t k = 0;
		for (const std::string &f : list_dir(dir))
			k += f.rfind("w.", 0) == 0 && f.size() > 11 &&
			     f.compare(f.size() - 11, 11, ".base.shmkv") == 0;
		return k;
	}
	// How often the loader said what it did with w's log at a start.
	size_t recoveries() const
	{
		size_t k = 0;
		std::string log = env.log();
		for (size_t at = 0; (at = log.find("durable log of cache=w", at)) != std::string::npos;
		     at++)
			k++;
		return k;
	}
	void start()
	{
		bool logged = shmkv_test::file_exists(dir + "/w.wal");
		size_t before = recoveries();
		ld.reset(new Loader(env, {"--memory", "shm", "--config", conf}));
		std::string skip;
		bool ok = shim ? start_with_shim(*ld, *shim, &skip) : ld->start();
		if (!ok && !skip.empty()) // no shim here (qemu-user): the test cannot fault
			GTEST_SKIP() << skip;
		ASSERT_TRUE(ok) << env.log();
		// the log's base and its changes are published (or found served),
		// which the loader logs, or the configured source loads
		bool up = wait_until([&] { return ld->status("w")["generation"].u64() > 0 &&
						  (!logged || recoveries() > before); },
				     60000, 20);
		ASSERT_TRUE(up) << ld->status("w")["last_error"].s() << env.log();
	}
	// The loader killed and started again under fault's shim: false when
	// the shim cannot run here (the test skipped, start() says why).
	bool restart_under(Fault &fault)
	{
		ld->kill9();
		shim = &fault;
		start();
		return !IsSkipped();
	}
	// As after a reboot: the loader killed, ROOT and the segments gone.
	void reboot()
	{
		ld->kill9();
		std::error_code ec;
		for (const std::string &d : {env.root(), env.seg_dir()})
			for (const auto &e : std::filesystem::directory_iterator(d, ec))
				std::filesystem::remove_all(e.path(), ec);
		start();
	}
	void set(const std::string &k, const std::string &v)
	{
		Json j = ld->req({"change", "w", "{\"key\": \"" + k + "\", \"value\": \"" + v + "\"}"});
		ASSERT_TRUE(j.ok()) << j["error"].s();
		model[k] = v;
	}
	void remove(const std::string &k)
	{
		Json j = ld->req({"change", "w", "{\"key\": \"" + k + "\", \"remove\": true}"});
		ASSERT_TRUE(j.ok()) << j["error"].s();
		model[k] = "";
	}
	// Delta number i of a producer's chain of the base (after prev, the
	// one before it; "" for the first): key -> value. Its path, "" (a
	// failure reported) when shmctl refused it.
	std::string chain_delta(int i, const std::string &prev, const std::string &key,
				const std::string &value)
	{
		std::string d = env.img_path("c" + std::to_string(i) + ".delta");
		std::string in = env.img_path("c" + std::to_string(i) + ".jsonl");
		EXPECT_TRUE(shmkv_test::write_file(in, "{\"key\": \"" + key + "\", \"value\": \"" +
							       value + "\"}\n"));
		std::vector<std::string> a = {"image", "build", "--delta-of", base, "-o", d};
		if (!prev.empty()) {
			a.push_back("--after");
			a.push_back(prev);
		}
		a.push_back(in);
		CmdRun b = shmctl(env, a);
		EXPECT_EQ(b.rc, 0) << b.err;
		return b.rc == 0 ? d : "";
	}
	// Every key of the model, and the base's other keys, as served now.
	std::string check()
	{
		int err;
		std::string why;
		shmkv *db = attach(env.root(), "w", SHMKV_ATTACH_VERIFY, &err, &why);
		if (!db)
			return "attach: " + why;
		std::string bad;
		for (const auto &kv : model)
			if (get_str(db, kv.first, &err) != kv.second)
				bad += kv.first + "=\"" + get_str(db, kv.first, &err) + "\" (want \"" +
				       kv.second + "\") ";
		uint64_t removed = 0;
		for (uint64_t i = 0; i < n; i++)
			removed += model.count(key_of(i)) != 0;
		uint64_t wrong = check_handle(db, tag, n);
		if (wrong != removed)
			bad += std::to_string(wrong) + " base keys wrong, " + std::to_string(removed) +
			       " changed ";
		shmkv_close(db);
		return bad;
	}
};

} // namespace

TEST_F(Durable, AcknowledgedChangesComeBackAfterAReboot)
{
	set("x", "1");
	remove(key_of(3));
	set(key_of(4), "four");
	// a delta file too
	std::string d = env.img_path("d.delta");
	ASSERT_TRUE(shmkv_test::write_file(env.img_path("d.jsonl"),
					   "{\"key\": \"y\", \"value\": \"2\"}\n"
					   "{\"key\": \"" + key_of(5) + "\", \"remove\": true}\n"));
	CmdRun b = shmctl(env, {"image", "build", "--delta-of", base, "-o", d,
				env.img_path("d.jsonl")});
	ASSERT_EQ(b.rc, 0) << b.err;
	ASSERT_TRUE(ld->req({"apply", "w", d}).ok());
	model["y"] = "2";
	model[key_of(5)] = "";
	ASSERT_EQ(check(), "");
	reboot();
	EXPECT_EQ(check(), "") << env.log();
	EXPECT_NE(env.log().find("replayed records"), std::string::npos) << env.log();
	// one publish: the source and the log's changes at once, never the
	// source alone
	EXPECT_EQ(ld->status("w")["generation"].u64(), 1u) << env.log();
	// changes go on, and a second reboot brings back both
	set("z", "3");
	reboot();
	EXPECT_EQ(check(), "");
	// a plain restart (segments adopted) replays nothing twice
	ld->kill9();
	start();
	EXPECT_EQ(check(), "");
	set("after-restart", "4");
	reboot();
	EXPECT_EQ(check(), "");
}

TEST_F(Durable, ATornTailIsDiscardedWithALogLine)
{
	set("x", "1");
	set("y", "2");
	ld->kill9();
	// a record the loader did not finish: its head, part of its bytes
	std::string wal = dir + "/w.wal", bytes = shmkv_test::read_file(wal);
	ASSERT_GT(bytes.size(), 64u);
	std::string torn("WREC\0\0\0\0\x09\0\0\0\0\0\0\0\x00\x10\0\0\0\0\0\0partial", 31);
	ASSERT_TRUE(shmkv_test::write_file(wal, bytes + torn));
	std::error_code ec;
	for (const std::string &dd : {env.root(), env.seg_dir()})
		for (const auto &e : std::filesystem::directory_iterator(dd, ec))
			std::filesystem::remove_all(e.path(), ec);
	start();
	EXPECT_EQ(check(), "");
	EXPECT_NE(env.log().find("discarded"), std::string::npos) << env.log();
	// a damaged record (a flipped byte) ends the log there too: what
	// follows it is not replayed, never a half-checked change
	set("z", "3");
	ld->kill9();
	bytes = shmkv_test::read_file(wal);
	bytes[bytes.size() - 12] ^= 1; // in the last record's bytes
	ASSERT_TRUE(shmkv_test::write_file(wal, bytes));
	reboot();
	EXPECT_NE(env.log().find("checksum does not match"), std::string::npos) << env.log();
}

TEST_F(Durable, CompactionAndRollbackComeBackAsServed)
{
	set("x", "1");
	remove(key_of(3));
	ASSERT_TRUE(ld->req({"compact", "w"}).ok());
	EXPECT_EQ(kept_bases(), 1u);
	set("y", "2");
	reboot(); // the compacted base kept by the log, not the source
	EXPECT_EQ(check(), "") << env.log();
	// one publish: neither the source nor the compacted base alone served
	EXPECT_EQ(ld->status("w")["generation"].u64(), 1u) << env.log();
	// rollback steps back the last publish (y); that is what comes back
	ASSERT_TRUE(ld->req({"rollback", "w"}).ok());
	model["y"] = "";
	EXPECT_EQ(check(), "");
	reboot();
	EXPECT_EQ(check(), "") << env.log();
	// a full load replaces it all: the kept base goes, nothing is replayed
	ASSERT_TRUE(ld->load("w", base).ok());
	model.clear();
	reboot();
	EXPECT_EQ(check(), "");
	EXPECT_EQ(kept_bases(), 0u);
}

// A compaction killed (kill -9) while it merges off the worker, and while
// it publishes (the new base kept and the log naming it with the catch-up
// written, the state file's rename held): the restart answers every
// acknowledged change, those sent during the merge too, in one publish
// (never the new base without its catch-up), and so does a reboot after it.
TEST_F(Durable, CompactionKilledWhileItMergesOrPublishes)
{
	Fault fault(env);
	if (!restart_under(fault))
		return;
	for (int phase = 0; phase < 2; phase++) {
		SCOPED_TRACE(phase ? "publish" : "merge");
		std::string p = std::to_string(phase);
		set("k0", "a" + p);
		set("k1", "a" + p);
		remove(key_of(3 + phase));
		fault.hold(dir + "/.w.base.tmp"); // the merge's output, kept (durable)
		int fd = request_async(env.root(), {"compact", "w"});
		ASSERT_GE(fd, 0);
		ASSERT_TRUE(fault.held()) << env.log();
		set("k0", "b" + p);
		remove("k1");
		set("n" + p, "1");
		if (phase) { // the merge goes on; the publish waits in its state save
			fault.hold(env.root() + "/w.state");
			ASSERT_TRUE(fault.held()) << env.log();
			EXPECT_EQ(kept_bases(), 1u) << "the new base is kept before the publish";
		}
		uint64_t gen = ld->status("w")["generation"].u64();
		ld->kill9();
		close(fd);
		fault.clear();
		start();
		EXPECT_EQ(check(), "") << "restarted: " << env.log();
		EXPECT_EQ(ld->status("w")["generation"].u64(), gen + phase)
			<< "one publish: the new base with its catch-up";
		for (const std::string &f : list_dir(dir))
			EXPECT_NE(f[0], '.') << f << " left in the durable dir";
		reboot();
		EXPECT_EQ(check(), "") << "rebooted: " << env.log();
	}
	ASSERT_TRUE(ld->req({"compact", "w"}).ok());
	reboot();
	EXPECT_EQ(check(), "");
}

// A producer's delta chain goes on after a reboot: the log knows the last
// delta applied (its records say which were applied as they came, its
// head where the chain stood when it was written anew), through a
// replay, a compaction and a change that is not a delta.
TEST_F(Durable, ADeltaChainGoesOnAfterAReboot)
{
	int i = 0;
	std::string prev;
	auto next = [&](const std::string &key) {
		++i;
		std::string d = chain_delta(i, prev, key, std::to_string(i));
		Json j = ld->req({"apply", "w", d});
		EXPECT_TRUE(j.ok()) << "delta " << i << ": " << j["error"].s() << env.log();
		model[key] = std::to_string(i);
		prev = d;
	};
	next("c1");
	set("x", "1"); // not a delta: the chain stays at c1
	reboot();
	next("c2"); // follows c1: the replayed log's records
	reboot();
	next("c3"); // the log written anew after the replay: its head
	ASSERT_TRUE(ld->req({"compact", "w"}).ok());
	reboot();
	next("c4"); // a compaction keeps the chain, and so does its log
	ld->kill9(); // a plain restart: the state file's
	start();
	next("c5");
	EXPECT_EQ(check(), "") << env.log();
}

// A log being rewritten and a compacted base being written when the
// loader died: removed at the next start, logged; the log itself replayed.
TEST_F(Durable, LeftoverTemporariesAreRemovedAtStart)
{
	set("x", "1");
	ld->kill9();
	const std::vector<std::string> tmps = {".w.wal.tmp", ".w.base.tmp"};
	for (const std::string &t : tmps)
		ASSERT_TRUE(shmkv_test::write_file(dir + "/" + t, std::string(4096, 'x')));
	ASSERT_TRUE(shmkv_test::write_file(dir + "/keep.tmp", "not a temporary of ours"));
	reboot();
	EXPECT_EQ(check(), "") << env.log();
	for (const std::string &t : tmps) {
		EXPECT_FALSE(shmkv_test::file_exists(dir + "/" + t)) << t;
		EXPECT_NE(env.log().find("removed leftover file=" + dir + "/" + t), std::string::npos)
			<< env.log();
	}
	EXPECT_TRUE(shmkv_test::file_exists(dir + "/keep.tmp"));
}

TEST_F(Durable, ALogWithoutItsBaseIsKeptAside)
{
	// loaded by hand (no source): after a reboot its base is nowhere
	std::string other = env.img_path("b.shmkv");
	ASSERT_EQ(build_image(other, "b", 10), "");
	ASSERT_TRUE(ld->load("v", other).ok());
	ASSERT_TRUE(ld->req({"change", "v", R"({"key": "k", "value": "1"})"}).ok());
	unlink(other.c_str());
	reboot();
	EXPECT_NE(env.log().find("is neither served nor kept"), std::string::npos) << env.log();
	EXPECT_TRUE(shmkv_test::file_exists(dir + "/v.wal.stale"));
	EXPECT_EQ(ld->status("v")["reason"].s(), "no_cache");
	EXPECT_EQ(check(), ""); // w is served as loaded
}

// Two levels (loader/README.md, "Writes"): changes in the top overlay come
// back after a reboot, so do they after a fold (which leaves the log as it
// is), and a rollback to a generation with a top is what comes back (its
// log written anew: the lower, then the top).
TEST_F(Durable, ATopAFoldAndARollbackToATopComeBack)
{
	ld->kill9();
	write_conf(true, "fold_entries = 3\nfold_ratio = 0\n");
	start();
	set("a", "1"); // the lower
	set("b", "2"); // the top
	remove(key_of(3));
	Json s = ld->status("w");
	EXPECT_EQ(s["overlay"]["top"]["records"].u64(), 2u);
	reboot();
	EXPECT_EQ(check(), "") << env.log();
	// replayed as one publish: the lower alone
	s = ld->status("w");
	EXPECT_EQ(s["generation"].u64(), 1u);
	EXPECT_EQ(s["overlay"]["records"].u64(), 3u);
	EXPECT_EQ(s["overlay"]["top"].kind, Json::NUL);
	// past the bound: folded by itself; the log keeps its records
	set("c", "3");
	set("a", "4");
	set("d", "5");
	for (uint64_t t0 = now_ms(); now_ms() - t0 < slow_ms(60000); usleep(10000))
		if (ld->status("w")["fold"]["count"].u64() >= 1)
			break;
	ASSERT_EQ(ld->status("w")["fold"]["count"].u64(), 1u) << env.log();
	set("e", "6"); // a top again
	reboot();
	EXPECT_EQ(check(), "") << env.log();
	// a rollback to a generation with a top: its log holds both levels
	set("f", "7");
	set("g", "8");
	ASSERT_TRUE(ld->req({"rollback", "w"}).ok());
	model["g"] = "";
	EXPECT_EQ(check(), "");
	EXPECT_EQ(ld->status("w")["overlay"]["top"]["records"].u64(), 1u);
	reboot();
	EXPECT_EQ(check(), "") << env.log();
	// a plain restart (adopted, lower and top) replays nothing twice
	set("h", "9");
	set("h", "10");
	ld->kill9();
	start();
	EXPECT_EQ(check(), "") << env.log();
	set("i", "11");
	reboot();
	EXPECT_EQ(check(), "") << env.log();
}

// A log whose records are out of order (put together by hand: the loader
// numbers them in order) ends at the first one whose seq is not above the
// one before, as a damaged record does: found by fuzz_wal
// (tests/fuzz/regress/wal). Replayed as they lay, the older change of x
// was the last word.
TEST_F(Durable, ARecordOutOfOrderEndsTheLog)
{
	set("x", "1");
	set("x", "2");
	ld->kill9();
	std::string wal = dir + "/w.wal", bytes = shmkv_test::read_file(wal);
	// the head (80 bytes), then each record: 24 bytes, its data, padding
	// to 8, its checksum (loader/walfmt.c)
	std::vector<std::string> recs;
	for (size_t at = 80; at + 24 <= bytes.size();) {
		uint64_t len;
		memcpy(&len, bytes.data() + at + 16, 8);
		size_t total = 24 + (size_t)(len + 7) / 8 * 8 + 8;
		ASSERT_LE(at + total, bytes.size());
		recs.push_back(bytes.substr(at, total));
		at += total;
	}
	ASSERT_EQ(recs.size(), 2u);
	ASSERT_TRUE(shmkv_test::write_file(wal, bytes.substr(0, 80) + recs[1] + recs[0]));
	reboot();
	model["x"] = "2";
	EXPECT_EQ(check(), "") << env.log();
	EXPECT_NE(env.log().find("out of order"), std::string::npos) << env.log();
}

// A log set aside never replaces one set aside before (an operator's
// evidence): the next is NAME.wal.stale.1, then .2, each logged by name.
TEST_F(Durable, ALogSetAsideKeepsTheOlderOnes)
{
	std::string other = env.img_path("b.shmkv");
	std::vector<std::string> logs;
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(build_image(other, "b", 10), "");
		ASSERT_TRUE(ld->load("v", other).ok());
		Json j = ld->req({"change", "v",
				  "{\"key\": \"k\", \"value\": \"" + std::to_string(i) + "\"}"});
		ASSERT_TRUE(j.ok()) << j["error"].s();
		logs.push_back(shmkv_test::read_file(dir + "/v.wal"));
		ASSERT_FALSE(logs.back().empty());
		unlink(other.c_str());
		reboot();
	}
	const std::vector<std::string> names = {"v.wal.stale", "v.wal.stale.1", "v.wal.stale.2"};
	for (size_t i = 0; i < names.size(); i++) {
		EXPECT_EQ(shmkv_test::read_file(dir + "/" + names[i]), logs[i]) << names[i];
		EXPECT_NE(env.log().find("durable log of cache=v: not replayed, kept as " + names[i]),
			  std::string::npos) << env.log();
	}
	EXPECT_NE(logs[0], logs[1]);
	EXPECT_EQ(check(), ""); // w is served as loaded
}

// A head whose reserved word is not zero, its checksum recomputed (another
// writer's, or a future version's): not this loader's log. Kept aside as
// NAME.wal.bad with a log line, never replayed; the source is served as
// configured.
TEST_F(Durable, AHeadWithItsReservedWordSetIsKeptAsBad)
{
	set("x", "1");
	ld->kill9();
	std::string wal = dir + "/w.wal", bytes = shmkv_test::read_file(wal);
	ASSERT_GE(bytes.size(), 80u);
	bytes[64] = 1; // the u64 at 64: reserved, 0 (loader/walfmt.c)
	uint64_t sum = XXH3_64bits(bytes.data(), 72);
	memcpy(&bytes[72], &sum, 8);
	ASSERT_TRUE(shmkv_test::write_file(wal, bytes));
	reboot();
	EXPECT_NE(env.log().find("durable log of cache=w unreadable, kept as w.wal.bad"),
		  std::string::npos) << env.log();
	EXPECT_TRUE(shmkv_test::file_exists(dir + "/w.wal.bad"));
	model.clear(); // the change was in that log alone
	EXPECT_EQ(check(), "") << env.log();
}

// A record whose padding to 8 bytes (outside its checksum) is not zero ends
// the log as a damaged record does: the records before it are replayed, it
// and what follows are cut off with a log line. (The loader's own records
// hold delta images, whole 8-byte units: this one is appended by hand, its
// checksum right.)
TEST_F(Durable, ARecordWhosePaddingIsNotZeroEndsTheLog)
{
	set("x", "1");
	ld->kill9();
	std::string wal = dir + "/w.wal", bytes = shmkv_test::read_file(wal);
	uint64_t last = 0; // the last record's seq (loader/walfmt.c's layout)
	for (size_t at = 80; at + 24 <= bytes.size();) {
		uint64_t len;
		memcpy(&last, bytes.data() + at + 8, 8);
		memcpy(&len, bytes.data() + at + 16, 8);
		at += 24 + (size_t)(len + 7) / 8 * 8 + 8;
	}
	ASSERT_GT(last, 0u);
	const uint64_t seq = last + 1, len = 5;
	const uint32_t magic = 0x43455257u, flags = 0; // "WREC"
	std::string rec(24, '\0');
	memcpy(&rec[0], &magic, 4);
	memcpy(&rec[4], &flags, 4);
	memcpy(&rec[8], &seq, 8);
	memcpy(&rec[16], &len, 8);
	rec += "abcde";
	rec += std::string("\0\1\0", 3); // padding: one byte not zero
	uint64_t sum = XXH3_64bits_withSeed("abcde", 5, seq ^ len);
	rec.append((const char *)&sum, 8);
	ASSERT_TRUE(shmkv_test::write_file(wal, bytes + rec));
	reboot();
	EXPECT_NE(env.log().find("a record whose padding is not zero"), std::string::npos)
		<< env.log();
	EXPECT_EQ(check(), "") << env.log(); // x=1, from the record before it
	EXPECT_EQ(shmkv_test::read_file(wal).size(), bytes.size()) << "the record is cut off";
}

// A load, a reload and a rollback rewrite the log after their publish
// (loader/README.md, "What is kept"). Killed there (the log's rename held:
// the publish and the state file are through), the log still names the
// generation before: the restart must serve the generation published, as
// the kill found it, never that log replayed over it (nor its base loaded
// again), and must keep the log of what it serves, so that a reboot after
// it gives back every change acknowledged and none stepped back. Each
// part sets its generations up with acknowledged requests first.
TEST_F(Durable, ALoadOrRollbackKilledBeforeTheLogFollowsIt)
{
	Fault fault(env);
	if (!restart_under(fault))
		return;
	std::string other = env.img_path("b.shmkv");
	ASSERT_EQ(build_image(other, "b", n), "");
	// req held at the log's rename, after its publish; killed, restarted
	auto killed = [&](const std::vector<std::string> &req) {
		fault.hold(dir + "/w.wal");
		int fd = request_async(env.root(), req);
		ASSERT_GE(fd, 0);
		ASSERT_TRUE(fault.held()) << env.log();
		ld->kill9();
		close(fd);
		fault.clear();
		start();
	};

	// a load of another image over the source and its change (the log's
	// base is the configured source, found at the restart)
	ASSERT_TRUE(ld->load("w", base).ok());
	set("x", "1");
	killed({"load", "w", other});
	model = {{"x", ""}};
	tag = "b";
	EXPECT_EQ(check(), "") << "a load: " << env.log();

	// a rollback from another base to the source and its change (the log
	// names that other base, found nowhere at the restart)
	ASSERT_TRUE(ld->load("w", base).ok());
	tag = "a";
	set("x", "1");
	ASSERT_TRUE(ld->load("w", other).ok());
	killed({"rollback", "w"});
	EXPECT_EQ(check(), "") << "a rollback to another base: " << env.log();
	reboot();
	EXPECT_EQ(check(), "") << "a rollback to another base, then a reboot: " << env.log();

	// a reload of the source (the log's base) over its change
	ASSERT_TRUE(ld->load("w", base).ok());
	set("x", "1");
	killed({"reload", "w"});
	model = {{"x", ""}};
	EXPECT_EQ(check(), "") << "a reload: " << env.log();
	reboot();
	EXPECT_EQ(check(), "") << "a reload, then a reboot: " << env.log();

	// a rollback to the source alone, from its first change
	set("x", "1");
	killed({"rollback", "w"});
	model = {{"x", ""}};
	EXPECT_EQ(check(), "") << "a rollback to the base alone: " << env.log();
	reboot();
	EXPECT_EQ(check(), "") << "a rollback to the base alone, then a reboot: " << env.log();
}

// The configured source loaded at the start (and at a config change) is
// followed by its log, as a load request is: the state file keeps no mark
// of a log behind (wal.behind), which would make the next restart write
// the log anew from what it adopts instead of replaying it.
TEST_F(Durable, AConfiguredLoadLeavesNoMarkOfALogBehind)
{
	// a worker job queued behind the start's (which loads the source):
	// answered once that one is over (a compaction of nothing changed)
	ASSERT_TRUE(ld->req({"compact", "w"}).ok());
	EXPECT_EQ(shmkv_test::read_file(env.root() + "/w.state").find("wal.behind"),
		  std::string::npos);
	// a cache the config gains, loaded at its SIGHUP
	ASSERT_TRUE(shmkv_test::write_file(
		conf, shmkv_test::read_file(conf) + "[cache v]\nsource = " + base + "\n"));
	kill(ld->pid(), SIGHUP);
	ASSERT_TRUE(wait_until([&] { return ld->status("v")["generation"].u64() > 0; }, 60000, 10))
		<< env.log();
	ASSERT_TRUE(ld->req({"compact", "v"}).ok());
	EXPECT_EQ(shmkv_test::read_file(env.root() + "/v.state").find("wal.behind"),
		  std::string::npos);
	EXPECT_TRUE(shmkv_test::file_exists(dir + "/v.wal"));
}

// A publish that a restart must know of before it happens (a load's or a
// rollback's mark that the log is behind, a compaction's base) while the
// state file cannot be written (its rename fails: ROOT full): refused,
// saying why, the generation before still served. Published unrecorded, a
// kill before the log's rewrite would have brought the generation before
// back at the restart over it. A restart and a reboot after the refusals
// give back what was served, every change acknowledged in it.
TEST_F(Durable, APublishTheStateFileCannotRecordIsRefused)
{
	Fault fault(env);
	if (!restart_under(fault))
		return;
	std::string other = env.img_path("b.shmkv");
	ASSERT_EQ(build_image(other, "b", n), "");
	set("x", "1");
	auto refused = [&](const std::vector<std::string> &req) {
		uint64_t gen = ld->status("w")["generation"].u64();
		ASSERT_TRUE(shmkv_test::write_file(fault.conf(),
						   "renameerr 28 " + env.root() + "/w.state\n"));
		Json j = ld->req(req);
		fault.clear();
		EXPECT_FALSE(j.ok()) << req[0] << " published: " << env.log();
		EXPECT_NE(j["error"].s().find("the state file cannot record"), std::string::npos)
			<< req[0] << ": " << j["error"].s();
		EXPECT_EQ(ld->status("w")["generation"].u64(), gen) << req[0];
	};
	refused({"load", "w", other});
	EXPECT_EQ(check(), "") << "a load refused: " << env.log();
	refused({"compact", "w"});
	EXPECT_EQ(check(), "") << "a compaction refused: " << env.log();
	ld->kill9();
	start();
	EXPECT_EQ(check(), "") << "a restart after them: " << env.log();

	// a rollback (of a change: the log is written anew after it too)
	set("y", "2");
	refused({"rollback", "w"});
	EXPECT_EQ(check(), "") << "a rollback refused: " << env.log();
	reboot();
	EXPECT_EQ(check(), "") << "a reboot after them: " << env.log();
}

// A change killed between its publish and the state file's save (its
// rename held): the restart serves it (adopted), and replays no record of
// the log the generation served holds already, so that `rollback` still
// steps back exactly that change (as without a log: writes_crash_test's
// RollbackAfterAKillAtAChangesPublish), and a reboot after it gives back
// the changes before it.
TEST_F(Durable, RollbackAfterAChangeKilledBeforeTheStateFollowsIt)
{
	Fault fault(env);
	if (!restart_under(fault))
		return;
	set("k1", "1");
	set("k2", "2");
	fault.hold(env.root() + "/w.state");
	int fd = request_async(env.root(), {"change", "w", R"({"key": "k3", "value": "3"})"});
	ASSERT_GE(fd, 0);
	ASSERT_TRUE(fault.held()) << env.log();
	ld->kill9();
	close(fd);
	fault.clear();
	start();
	model["k3"] = "3";
	EXPECT_EQ(check(), "") << "the change published before the kill: " << env.log();
	Json j = ld->req({"rollback", "w"});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	model["k3"] = "";
	EXPECT_EQ(check(), "") << "a rollback steps back one publish: k3 goes, k1 and k2 stay\n"
			       << env.log();
	reboot();
	EXPECT_EQ(check(), "") << "and a reboot after it: " << env.log();
}

// A cache served with changes that no log holds (adopted by a loader
// started durable for the first time; so is one whose log was set aside as
// `.wal.stale` or `.wal.bad` at the start): the start writes its log from
// the generation served, so that a reboot gives back that generation with
// the changes made after it, never the base with only the later ones (a
// content never served).
TEST_F(Durable, AGenerationServedWithoutALogGetsOneAtTheStart)
{
	ld->kill9();
	unlink((dir + "/w.wal").c_str());
	ASSERT_TRUE(shmkv_test::write_file(conf, "[cache w]\nsource = " + base + "\n"));
	start(); // not durable: the source, changed without a log
	set("x", "1");
	remove(key_of(3));
	EXPECT_FALSE(shmkv_test::file_exists(dir + "/w.wal"));
	ld->kill9();
	write_conf(true); // durable from now on: the generation adopted
	start();
	EXPECT_EQ(check(), "");
	set("y", "2");
	reboot();
	EXPECT_EQ(check(), "") << "x and the removal before the log, y after it: " << env.log();
}

// A restart that finds an overlay segment gone (removed by hand: the
// loader serves the base without it, logged as changes lost): the durable
// log still holds those changes, and the start gives them back.
TEST_F(Durable, AnOverlayGoneAtARestartComesBackFromTheLog)
{
	set("x", "1");
	set("y", "2"); // into the top
	std::string lower = ld->status("w")["overlay"]["lower"]["segment"].s();
	ASSERT_FALSE(lower.empty());
	ld->kill9();
	ASSERT_EQ(unlink(lower.c_str()), 0) << lower;
	start();
	EXPECT_EQ(check(), "") << env.log();
}

// A restart that finds the top overlay gone, its lower still there: the
// lower serves, and the log gives back what the top held. The lower holds
// the records up to a fold's, which no file names (a fold leaves the log
// as it is): the whole log is replayed over the base (a key the lower
// holds and the top removed stays removed, one it set again keeps the
// top's value).
TEST_F(Durable, ATopGoneAtARestartComesBackFromTheLog)
{
	ld->kill9();
	write_conf(true, "fold_entries = 3\nfold_ratio = 0\n");
	start();
	set("a", "1"); // the lower
	set("k", "1"); // the top
	set("b", "2");
	remove(key_of(3)); // 3 in the top: folded into the lower
	for (uint64_t t0 = now_ms(); now_ms() - t0 < slow_ms(60000); usleep(10000))
		if (ld->status("w")["fold"]["count"].u64() >= 1)
			break;
	ASSERT_EQ(ld->status("w")["fold"]["count"].u64(), 1u) << env.log();
	set("a", "4"); // a top again (two records: under the bound), over keys
	remove("k");   // the lower holds
	std::string top = ld->status("w")["overlay"]["top"]["segment"].s();
	ASSERT_FALSE(top.empty());
	ld->kill9();
	ASSERT_EQ(unlink(top.c_str()), 0) << top;
	start();
	EXPECT_EQ(check(), "") << env.log();
	// the log written anew from what the replay published
	reboot();
	EXPECT_EQ(check(), "") << env.log();
	ld->kill9();
	start();
	EXPECT_EQ(check(), "") << env.log();
}

// A change refused after its record is in the log (its publish failed:
// the control segment's rename, as the cache's first change makes it
// protocol 2), the record then not cut back out (an I/O error): the log is
// written anew from what is served, so a reboot neither gives back the
// refused change nor loses the one acknowledged after it (numbered as the
// record left there, it would have ended the log at the replay).
TEST_F(Durable, ARefusedChangeWhoseRecordIsNotCutIsNeverReplayed)
{
	Fault fault(env);
	if (!restart_under(fault))
		return;
	ASSERT_EQ(ld->status("w")["protocol"].u64(), 1u);
	ASSERT_TRUE(shmkv_test::write_file(fault.conf(), "renameerr 5 " + env.root() +
								 "/w.ctl\ntruncerr 5 " + dir + "/w.wal\n"));
	Json j = ld->req({"change", "w", R"({"key": "x", "value": "1"})"});
	ASSERT_FALSE(j.ok()) << env.log();
	fault.clear();
	model["x"] = "";
	set("y", "2");
	reboot();
	EXPECT_EQ(check(), "") << env.log();
	set("z", "3");
	ld->kill9();
	start();
	EXPECT_EQ(check(), "") << env.log();
	reboot();
	EXPECT_EQ(check(), "") << env.log();
}

// The same where the append itself fails (its fdatasync: an I/O error, the
// record written whole) and cutting it off again fails too.
TEST_F(Durable, AChangeWhoseRecordFailedAndIsNotCutIsNeverReplayed)
{
	Fault fault(env);
	if (!restart_under(fault))
		return;
	ASSERT_TRUE(shmkv_test::write_file(fault.conf(), "syncerr 5 " + dir + "/w.wal\ntruncerr 5 " +
								 dir + "/w.wal\n"));
	Json j = ld->req({"change", "w", R"({"key": "x", "value": "1"})"});
	ASSERT_FALSE(j.ok()) << env.log();
	fault.clear();
	model["x"] = "";
	set("y", "2");
	reboot();
	EXPECT_EQ(check(), "") << env.log();
	set("z", "3");
	reboot();
	EXPECT_EQ(check(), "") << env.log();
}

// A reboot onto a compacted base: its replay publishes the log's records,
// then writes the log anew. Killed in between (that rename held), a
// second reboot must still know what deltas apply to (the image the base
// was compacted from, and the chain where the log left it): the log the
// replay appended to keeps its head.
TEST_F(Durable, AReplayKilledBeforeItsLogIsWrittenKeepsWhatDeltasApplyTo)
{
	Fault fault(env);
	if (!restart_under(fault))
		return;
	const std::string c1 = chain_delta(1, "", "c1", "1");
	ASSERT_FALSE(c1.empty());
	ASSERT_FALSE(chain_delta(2, c1, "c2", "1").empty());
	ASSERT_TRUE(ld->req({"apply", "w", env.img_path("c1.delta")}).ok());
	model["c1"] = "1";
	ASSERT_TRUE(ld->req({"compact", "w"}).ok());
	set("x", "1"); // a record over the compacted base
	// a reboot, killed as its replay writes the log anew
	ld->kill9();
	std::error_code ec;
	for (const std::string &d : {env.root(), env.seg_dir()})
		for (const auto &e : std::filesystem::directory_iterator(d, ec))
			std::filesystem::remove_all(e.path(), ec);
	fault.hold(dir + "/w.wal");
	ld.reset(new Loader(env, {"--memory", "shm", "--config", conf}));
	std::string skip;
	ASSERT_TRUE(start_with_shim(*ld, fault, &skip)) << skip << env.log();
	ASSERT_TRUE(fault.held()) << env.log();
	fault.clear();
	reboot();
	EXPECT_EQ(check(), "") << env.log();
	Json j = ld->req({"apply", "w", env.img_path("c2.delta")});
	EXPECT_TRUE(j.ok()) << "the chain's next delta: " << j["error"].s() << "\n" << env.log();
	model["c2"] = "1";
	EXPECT_EQ(check(), "");
}

// `drop` removes the log (loader/README.md, "What is kept") and the bases
// kept beside it, also of a cache loaded by hand (no [cache] section, so
// the drop forgets the cache): a restart and a reboot after the drop find
// nothing to bring back.
TEST_F(Durable, ADropRemovesTheLogOfACacheLoadedByHand)
{
	std::string other = env.img_path("b.shmkv");
	ASSERT_EQ(build_image(other, "b", 10), "");
	ASSERT_TRUE(ld->load("v", other).ok());
	ASSERT_TRUE(ld->req({"change", "v", R"({"key": "k", "value": "1"})"}).ok());
	ASSERT_TRUE(ld->req({"compact", "v"}).ok()); // a base kept beside the log
	ASSERT_TRUE(ld->req({"change", "v", R"({"key": "k", "value": "2"})"}).ok());
	Json j = ld->req({"drop", "v"});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	for (const std::string &f : list_dir(dir))
		EXPECT_NE(f.rfind("v.", 0), 0u) << f << " left in " << dir;
	ld->kill9();
	start();
	EXPECT_EQ(ld->status("v")["reason"].s(), "no_cache") << "a restart\n" << env.log();
	reboot();
	EXPECT_EQ(ld->status("v")["reason"].s(), "no_cache") << "a reboot\n" << env.log();
	EXPECT_EQ(check(), ""); // w as loaded
}

// A compaction killed before its publish (its log and kept base written)
// is finished by the next start: the kept base loaded with the log's
// records over it, one publish. That start killed in turn the moment that
// publish is through (the state file's next save held), the one after it
// must still know what deltas apply to: the chain's next delta of the
// image the base was compacted from applies.
TEST_F(Durable, ACompactionFinishedAtAStartKilledAtItsPublish)
{
	Fault fault(env);
	if (!restart_under(fault))
		return;
	const std::string c1 = chain_delta(1, "", "c1", "1");
	ASSERT_FALSE(c1.empty());
	ASSERT_FALSE(chain_delta(2, c1, "c2", "1").empty());
	ASSERT_TRUE(ld->req({"apply", "w", env.img_path("c1.delta")}).ok());
	model["c1"] = "1";
	set("x", "1");
	// the compaction's publish waits in its state save (log and base kept)
	std::string state = env.root() + "/w.state";
	fault.hold(state);
	int fd = request_async(env.root(), {"compact", "w"});
	ASSERT_GE(fd, 0);
	ASSERT_TRUE(fault.held()) << env.log();
	ld->kill9();
	close(fd);
	CtlView before;
	ASSERT_TRUE(read_ctl(env.root(), "w", &before));
	// the next start: its state saves held one by one until the control
	// segment moved (the compaction published), then killed (from a thread
	// of the test: the loader dies with the thread that started it)
	ld.reset(new Loader(env, {"--memory", "shm", "--config", conf}));
	fault.hold_next(state);
	bool published = false;
	std::thread holds([&] {
		for (int saves = 0; saves < 50 && fault.held_next(); saves++) {
			CtlView now;
			if ((published = read_ctl(env.root(), "w", &now) &&
					 now.generation > before.generation))
				break;
			fault.hold_next(state);
		}
		std::string pid = shmkv_test::read_file(env.root() + "/loader.lock");
		if (published && atoi(pid.c_str()) > 0)
			kill(atoi(pid.c_str()), SIGKILL);
	});
	std::string skip;
	start_with_shim(*ld, fault, &skip); // ready before the publish, or killed
	holds.join();
	fault.clear();
	ASSERT_TRUE(published) << env.log();
	ld->kill9(); // reaped
	shim = nullptr;
	start();
	EXPECT_EQ(check(), "") << env.log();
	Json j = ld->req({"apply", "w", env.img_path("c2.delta")});
	EXPECT_TRUE(j.ok()) << "the chain's next delta: " << j["error"].s() << "\n" << env.log();
	model["c2"] = "1";
	EXPECT_EQ(check(), "");
}
