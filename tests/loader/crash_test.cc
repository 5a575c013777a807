// crash_test: the loader dies in the middle of a large load.
//
//   KillMidLoad: kill -9 while a load over the socket is reading a large
//     image (a .loading segment exists and `status` shows progress when the
//     kill lands). Readers attached to the previous generation keep serving
//     correct values throughout, and no snapshot of the control segment ever
//     names the partial load. A restarted loader adopts the live generation
//     (same generation, same publishing pid and time: no reload), removes
//     the partial segment, and then loads normally, the large image included.
//   KillMidSpoolLoad: the same through the spool: the spool file stays and
//     the restarted loader loads it after adopting.
//   SigtermMidLoad: SIGTERM abandons the load (ECANCELED to the client),
//     removes the partial segment and exits 0; the generation stays.
//   SpoolLeftovers.MidDispose: what a loader stopped while it disposed of
//     a spool file leaves (.NAME.shmkv.HEX.disposing) goes back under its
//     name and is loaded, or is removed where a newer file has the name.
//
// The large image has 1.5M keys of ~200-byte values (about 330 MB; the
// environment variable SHMKV_TEST_CRASH_KEYS changes the count), built once.
#include <atomic>
#include <random>
#include <tuple>

#include "loader_util.h"

using namespace loader_test;

namespace {

constexpr size_t kBigPad = 180;

uint64_t big_keys()
{
	const char *e = getenv("SHMKV_TEST_CRASH_KEYS");
	return e && *e ? strtoull(e, nullptr, 10) : 1500000;
}

// The large image, built once for the suite in its own temp dir.
class Crash : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		big_dir_ = new std::string(make_temp_dir(
			getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
			"shmkv-lcrash"));
		big_path_ = new std::string(*big_dir_ + "/big.shmkv");
		uint64_t t0 = now_ms();
		*big_err_ = build_image(*big_path_, "big", big_keys(), kBigPad);
		struct stat st;
		if (big_err_->empty() && stat(big_path_->c_str(), &st) == 0)
			printf("large image: %llu keys, %llu MB, built in %llu ms\n",
			       (unsigned long long)big_keys(),
			       (unsigned long long)(st.st_size >> 20),
			       (unsigned long long)(now_ms() - t0));
	}
	static void TearDownTestSuite()
	{
		std::error_code ec;
		std::filesystem::remove_all(*big_dir_, ec);
		delete big_dir_;
		delete big_path_;
	}
	void SetUp() override { ASSERT_EQ(*big_err_, "") << "building the large image"; }

	// A copy of the large image in env's img dir (same filesystem as the
	// spool, for the spool test): a hard link when possible.
	std::string big_in(const Env &env)
	{
		std::string p = env.img_path("big.shmkv");
		if (link(big_path_->c_str(), p.c_str()) != 0) {
			std::error_code ec;
			std::filesystem::copy_file(*big_path_, p, ec);
			EXPECT_FALSE(ec) << "copy " << *big_path_ << ": " << ec.message();
		}
		return p;
	}

	static std::string *big_dir_, *big_path_, *big_err_;
};
std::string *Crash::big_dir_, *Crash::big_path_, *Crash::big_err_ = new std::string;

struct Control {
	std::atomic<uint64_t> final_gen{0};
	std::atomic<uint64_t> deadline_ms{0};
	std::atomic<int> attached{0};
	std::atomic<uint64_t> passes{0};
};

struct Report {
	uint64_t gets = 0, wrong = 0, failed = 0, passes = 0, final_gen = 0;
	uint64_t saw_loading = 0, saw_big = 0, bad_gen = 0, refresh_errors = 0;
	int attach_err = 0;
	char first[200] = "";
};

// A reader: serves from its handle; every pass it also snapshots the control
// segment and checks it names neither a .loading file nor an unexpected
// generation. allowed: generation -> tag it must serve.
int reader_main(const std::string &root, const std::string &cache,
		const std::map<uint64_t, std::pair<std::string, uint64_t>> &allowed, Control *ctl,
		int fd)
{
	Report r;
	int err;
	std::string why;
	shmkv *db = attach(root, cache, 0, &err, &why);
	ctl->attached.fetch_add(1);
	if (!db) {
		r.attach_err = err;
		snprintf(r.first, sizeof r.first, "attach: %s", why.c_str());
		write_all_fd(fd, &r, sizeof r);
		return 1;
	}
	auto first = [&](const std::string &m) {
		if (!r.first[0])
			snprintf(r.first, sizeof r.first, "%s", m.c_str());
	};
	std::mt19937_64 rng((uint64_t)getpid());
	for (;;) {
		int rr = shmkv_refresh(db);
		/* -EAGAIN: a publish was under way; refresh never waits for it (attach.h),
		 * the handle keeps its generation and a later call moves: not an error */
		if (rr < 0 && rr != -EAGAIN) {
			r.refresh_errors++;
			first(std::string("refresh: ") + shmkv_strerror(rr));
		}
		shmkv_ctl copy;
		if (shmkv_ctl_read(db->ctl, &copy) == 0) {
			uint64_t g = copy.generation;
			const shmkv_ctl_segment &seg = copy.segments[0];
			std::string p = seg.path;
			if (p.find(".loading") != std::string::npos) {
				r.saw_loading++;
				first("control segment names " + p);
			}
			if (!allowed.count(g)) {
				r.bad_gen++;
				first("control segment at generation " + std::to_string(g));
			}
		}
		uint64_t gen = shmkv_generation(db);
		std::string tag = tag_of(db);
		auto it = allowed.find(gen);
		if (tag == "big") {
			r.saw_big++;
			first("served the large image at generation " + std::to_string(gen));
		}
		if (it == allowed.end() || it->second.first != tag) {
			r.wrong++;
			first("generation " + std::to_string(gen) + " serves tag " + tag);
		} else {
			uint64_t n = it->second.second;
			for (int q = 0; q < 64; q++) {
				uint64_t i = rng() % n;
				std::string k = key_of(i);
				const char *s;
				size_t len;
				int e = shmkv_get_str(db, k.data(), k.size(), &s, &len);
				r.gets++;
				if (e) {
					r.failed++;
					first("get " + k + ": " + shmkv_strerror(e));
				} else if (!check_value(s, len, tag.data(), tag.size(), i)) {
					r.wrong++;
					first(k + " = " + std::string(s, len));
				}
			}
		}
		r.passes++;
		ctl->passes.fetch_add(1);
		uint64_t fin = ctl->final_gen.load();
		if ((fin && gen >= fin) || now_ms() > ctl->deadline_ms.load())
			break;
		usleep(200); // two cores: the loader must run too
	}
	r.final_gen = shmkv_generation(db);
	shmkv_close(db);
	return write_all_fd(fd, &r, sizeof r) ? 0 : 2;
}

void check_reports(std::vector<std::unique_ptr<Child>> &readers, uint64_t final_gen)
{
	for (size_t i = 0; i < readers.size(); i++) {
		std::string out = readers[i]->read_all(30000);
		int code = readers[i]->wait_exit(60000);
		ASSERT_EQ(out.size(), sizeof(Report)) << "reader " << i << " exit " << code;
		Report r;
		memcpy(&r, out.data(), sizeof r);
		EXPECT_EQ(code, 0) << r.first;
		EXPECT_EQ(r.wrong, 0u) << "reader " << i << ": " << r.first;
		EXPECT_EQ(r.failed, 0u) << "reader " << i << ": " << r.first;
		EXPECT_EQ(r.refresh_errors, 0u) << "reader " << i << ": " << r.first;
		EXPECT_EQ(r.saw_loading, 0u) << "reader " << i << ": " << r.first;
		EXPECT_EQ(r.saw_big, 0u) << "reader " << i << ": " << r.first;
		EXPECT_EQ(r.bad_gen, 0u) << "reader " << i << ": " << r.first;
		EXPECT_EQ(r.final_gen, final_gen) << "reader " << i;
		EXPECT_GT(r.gets, 0u);
		printf("reader %zu: %llu gets in %llu passes\n", i, (unsigned long long)r.gets,
		       (unsigned long long)r.passes);
	}
}

// Waits until `status` shows the load of cache reading (bytes_done > 0);
// returns the status then (null Json on timeout or if the load ended).
Json wait_mid_load(const Env &env, const std::string &cache, unsigned timeout_ms)
{
	Json hit;
	wait_until(
		[&] {
			Json j = request(env.root(), {"status", cache}, 30000);
			if (j.ok() && j["loading"].truthy() && j["progress.bytes_done"].u64() > 0 &&
			    j["progress.bytes_done"].u64() < j["progress.bytes_total"].u64()) {
				hit = j;
				return true;
			}
			return false;
		},
		timeout_ms, 1);
	return hit;
}

// Log text written after the last "==== start" banner (the current loader's).
std::string last_run_log(const Env &env)
{
	std::string log = env.log();
	size_t p = log.rfind("==== start");
	return p == std::string::npos ? log : log.substr(p);
}

TEST_F(Crash, KillMidLoad)
{
	Env env;
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	std::string a = env.img_path("a.shmkv"), b = env.img_path("b.shmkv"),
		    c = env.img_path("c.shmkv"), big = big_in(env);
	ASSERT_EQ(build_image(a, "a", 2000), "");
	ASSERT_EQ(build_image(b, "b", 3000), "");
	ASSERT_EQ(build_image(c, "c", 4000), "");
	ASSERT_TRUE(ld.load("crash", a).ok());
	Json j = ld.load("crash", b);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	ASSERT_EQ(j["generation"].u64(), 2u);
	CtlView before;
	ASSERT_TRUE(read_ctl(env.root(), "crash", &before));
	ASSERT_EQ(before.generation, 2u);
	ASSERT_EQ((pid_t)before.loader_pid, ld.pid());

	Shared<Control> ctl;
	ctl->deadline_ms = now_ms() + 200000;
	std::map<uint64_t, std::pair<std::string, uint64_t>> allowed = {{2, {"b", 3000}},
									 {3, {"c", 4000}}};
	std::vector<std::unique_ptr<Child>> readers;
	for (int i = 0; i < 2; i++) {
		std::string root = env.root();
		Control *cp = &*ctl;
		readers.push_back(std::make_unique<Child>([root, allowed, cp](int fd) {
			return reader_main(root, "crash", allowed, cp, fd);
		}));
	}
	ASSERT_TRUE(wait_until([&] { return ctl->attached.load() == 2; }, 20000));

	// the large load, killed while it reads
	int fd = request_async(env.root(), {"load", "crash", big});
	ASSERT_GE(fd, 0);
	Json mid = wait_mid_load(env, "crash", 60000);
	std::vector<std::string> loading = env.shm_files(".loading");
	pid_t old_pid = ld.pid();
	ld.kill9();
	ASSERT_TRUE(mid.ok()) << "the load never showed progress: make the image bigger";
	uint64_t done = mid["progress.bytes_done"].u64(), total = mid["progress.bytes_total"].u64();
	printf("killed at %llu of %llu bytes\n", (unsigned long long)done,
	       (unsigned long long)total);
	EXPECT_EQ(loading.size(), 1u) << "a .loading segment while the load ran";
	EXPECT_EQ(env.shm_files(".loading"), loading) << "the partial segment stays until restart";
	std::string line;
	EXPECT_FALSE(read_line(fd, &line, 2000)) << "a reply from a killed loader: " << line;
	close(fd);

	// nothing was published: the control segment is exactly as before
	CtlView after;
	ASSERT_TRUE(read_ctl(env.root(), "crash", &after));
	EXPECT_EQ(after.generation, 2u);
	EXPECT_EQ(after.path(), before.path());
	EXPECT_EQ(after.published_ns, before.published_ns);
	EXPECT_EQ(after.seq, before.seq);

	// readers serve on without a loader
	uint64_t p0 = ctl->passes.load();
	EXPECT_TRUE(wait_until([&] { return ctl->passes.load() > p0 + 20; }, 60000))
		<< "readers stalled after the kill";

	ASSERT_TRUE(ld.start());
	std::string log = last_run_log(env);
	EXPECT_EQ(log_lines(log, {"adopted cache=crash gen=2 ", before.path()}).size(), 1u) << log;
	EXPECT_EQ(log_lines(log, {"removed orphan cache=crash", loading.empty() ? "?" : loading[0],
				  "load interrupted"}).size(), 1u)
		<< log;
	EXPECT_TRUE(log_lines(log, {"repaired"}).empty()) << log;
	EXPECT_TRUE(log_lines(log, {"loaded cache=crash"}).empty()) << log;
	EXPECT_TRUE(env.shm_files(".loading").empty());
	j = ld.status("crash");
	ASSERT_TRUE(j.ok());
	EXPECT_EQ(j["generation"].u64(), 2u);
	EXPECT_EQ(j["segment"].s(), before.path());
	EXPECT_EQ(j["rollback.generation"].u64(), 1u);
	EXPECT_FALSE(j["loading"].truthy());
	EXPECT_EQ(j["readers"].u64(), 2u);
	ASSERT_TRUE(read_ctl(env.root(), "crash", &after));
	EXPECT_EQ(after.generation, 2u);
	EXPECT_EQ(after.loader_pid, (uint64_t)old_pid) << "adoption must not republish";
	EXPECT_EQ(after.published_ns, before.published_ns) << "adoption must not republish";

	// the restarted loader works: readers move to c; then the large image loads
	j = ld.load("crash", c);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["generation"].u64(), 3u);
	ctl->final_gen = 3;
	ctl->deadline_ms = now_ms() + 20000;
	check_reports(readers, 3);

	j = ld.load("crash", big);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["generation"].u64(), 4u);
	printf("the large image loads in %llu ms (%s GB/s)\n", (unsigned long long)j["ms"].u64(),
	       j["gbps"].str.c_str());
	int err;
	std::string why;
	shmkv_test::Db db(attach(env.root(), "crash", 0, &err, &why));
	ASSERT_TRUE(db) << why;
	EXPECT_EQ(tag_of(db), "big");
	EXPECT_EQ(check_handle(db, "big", big_keys(), 997), 0u);
	EXPECT_EQ(ld.stop(), 0);
}

TEST_F(Crash, KillMidSpoolLoad)
{
	Env env;
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	std::string a = env.img_path("a.shmkv"), big = big_in(env);
	ASSERT_EQ(build_image(a, "a", 2000), "");
	ASSERT_TRUE(ld.load("crashs", a).ok());
	CtlView before;
	ASSERT_TRUE(read_ctl(env.root(), "crashs", &before));

	ASSERT_EQ(spool_drop(env, big, "crashs"), "");
	Json mid = wait_mid_load(env, "crashs", 60000);
	ld.kill9();
	ASSERT_TRUE(mid.ok()) << "the load never showed progress: make the image bigger";
	EXPECT_EQ(env.shm_files(".loading").size(), 1u);
	EXPECT_TRUE(file_exists(env.spool_path("crashs"))) << "the spool file must stay";
	CtlView after;
	ASSERT_TRUE(read_ctl(env.root(), "crashs", &after));
	EXPECT_EQ(after.generation, 1u);
	EXPECT_EQ(after.published_ns, before.published_ns);

	ASSERT_TRUE(ld.start());
	// adopted first, then the spool file is loaded again, from the start
	ASSERT_TRUE(wait_until(
		[&] {
			CtlView v;
			return read_ctl(env.root(), "crashs", &v) && v.generation == 2;
		},
		60000, 10))
		<< "the spool file was not loaded after the restart";
	std::string log = last_run_log(env);
	EXPECT_EQ(log_lines(log, {"adopted cache=crashs gen=1 "}).size(), 1u) << log;
	EXPECT_EQ(log_lines(log, {"removed orphan cache=crashs", "load interrupted"}).size(), 1u)
		<< log;
	EXPECT_LT(log.find("adopted cache=crashs"), log.find("loaded cache=crashs")) << log;
	EXPECT_TRUE(wait_until([&] { return !file_exists(env.spool_path("crashs")); }, 60000));
	Json j = ld.status("crashs");
	EXPECT_EQ(j["generation"].u64(), 2u);
	EXPECT_TRUE(j["last_error"].is_null()) << j["last_error"].s();
	EXPECT_EQ(j["entries"].u64(), big_keys() + 2);
	EXPECT_TRUE(env.shm_files(".loading").empty());
	EXPECT_EQ(env.shm_files().size(), 2u); // current and rollback
	EXPECT_EQ(ld.stop(), 0);
}

TEST_F(Crash, SigtermMidLoad)
{
	Env env;
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	std::string a = env.img_path("a.shmkv"), big = big_in(env);
	ASSERT_EQ(build_image(a, "a", 2000), "");
	ASSERT_TRUE(ld.load("term", a).ok());
	CtlView before;
	ASSERT_TRUE(read_ctl(env.root(), "term", &before));
	int fd = request_async(env.root(), {"load", "term", big});
	ASSERT_GE(fd, 0);
	Json mid = wait_mid_load(env, "term", 60000);
	ASSERT_TRUE(mid.ok()) << "the load never showed progress: make the image bigger";
	EXPECT_EQ(ld.stop(), 0);
	std::string line;
	Json j;
	EXPECT_TRUE(read_line(fd, &line, 60000)) << "no reply to the abandoned load";
	close(fd);
	EXPECT_TRUE(parse_json(line, &j)) << line;
	EXPECT_FALSE(j.ok()) << line;
	EXPECT_EQ(j["code"].s(), "ECANCELED") << line;
	EXPECT_TRUE(env.shm_files(".loading").empty()) << "an abandoned load leaves no segment";
	EXPECT_EQ(log_lines(env.log(), {"aborted cache=term"}).size(), 1u);
	CtlView after;
	ASSERT_TRUE(read_ctl(env.root(), "term", &after));
	EXPECT_EQ(after.generation, 1u);
	EXPECT_EQ(after.published_ns, before.published_ns);

	ASSERT_TRUE(ld.start());
	j = ld.status("term");
	EXPECT_EQ(j["generation"].u64(), 1u);
	EXPECT_TRUE(log_lines(last_run_log(env), {"removed orphan"}).empty());
	EXPECT_EQ(ld.stop(), 0);
}

// A loader stopped between the rename that takes a spool file out of its
// name (loader/spool.c:take_ours()) and the unlink or rename after it leaves
// the file as .NAME.shmkv.HEX.disposing. The next loader puts it back under
// its name, where it is loaded, or removes it where a newer file has that
// name; other hidden files (a producer's temporaries) stay as they are.
TEST(SpoolLeftovers, MidDispose)
{
	Env env;
	std::string a = env.img_path("a.shmkv"), b = env.img_path("b.shmkv"), c = env.img_path("c.shmkv");
	ASSERT_EQ(build_image(a, "a", 300), "");
	ASSERT_EQ(build_image(b, "b", 400), "");
	ASSERT_EQ(build_image(c, "c", 500), "");
	std::string back = env.spool() + "/.back.shmkv.1f2e3d4c.disposing";
	std::string older = env.spool() + "/.newer.shmkv.a0.disposing";
	std::string tmp = env.spool() + "/.back.shmkv.tmp"; // a producer's temporary
	std::string odd = env.spool() + "/.back.shmkv.xyz.disposing"; // not HEX: not ours
	ASSERT_EQ(rename(a.c_str(), back.c_str()), 0) << strerror(errno);
	ASSERT_EQ(rename(b.c_str(), older.c_str()), 0) << strerror(errno);
	ASSERT_EQ(spool_drop(env, c, "newer"), "");
	ASSERT_TRUE(shmkv_test::write_file(tmp, "partial"));
	ASSERT_TRUE(shmkv_test::write_file(odd, "x"));

	Loader ld(env);
	ASSERT_TRUE(ld.start());
	EXPECT_TRUE(wait_until([&] {
		return ld.status("back")["generation"].u64() == 1 && ld.status("newer")["generation"].u64() == 1 &&
		       !file_exists(env.spool_path("back")) && !file_exists(env.spool_path("newer"));
	}, 60000, 20)) << env.log();
	EXPECT_EQ(list_dir(env.spool()), (std::vector<std::string>{".back.shmkv.tmp", ".back.shmkv.xyz.disposing"}))
		<< env.log();
	for (const auto &[cache, tag, n] : {std::tuple<const char *, const char *, uint64_t>{"back", "a", 300},
					    {"newer", "c", 500}}) {
		int err;
		std::string why;
		shmkv_test::Db db(attach(env.root(), cache, 0, &err, &why));
		ASSERT_TRUE(db) << why;
		EXPECT_EQ(tag_of(db), tag) << cache;
		EXPECT_EQ(check_handle(db, tag, n), 0u) << cache;
	}
	std::string log = env.log();
	EXPECT_EQ(log_lines(log, {"/.back.shmkv.1f2e3d4c.disposing", "is back as back.shmkv"}).size(), 1u) << log;
	EXPECT_EQ(log_lines(log, {"removed file=", "/.newer.shmkv.a0.disposing", "newer.shmkv is newer"}).size(), 1u)
		<< log;
	EXPECT_EQ(ld.stop(), 0);
}

} // namespace
