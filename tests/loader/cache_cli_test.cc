// cache_cli_test: `shmctl -r ROOT cache ...` ($SHMCTL) against a running
// loader: load, list, status, get, readers, rollback (twice: undo), drop,
// and without a loader; output (plain and -j) and exit codes (0 ok, 1 no
// such cache or key, 2 other failures such as no loader or a failed load).
#include "loader_util.h"

using namespace loader_test;

namespace {

Json as_json(const CmdRun &r)
{
	Json j;
	EXPECT_TRUE(parse_json(r.out, &j)) << "not JSON: " << r.out << r.err;
	return j;
}

// A reader process that attaches, says so, then waits for a byte from the
// test and checks its values once more (also after drop) before exiting.
struct HeldReader {
	int go[2] = {-1, -1};
	std::unique_ptr<Child> child;
	HeldReader(const std::string &root, const std::string &cache, const std::string &tag,
		   uint64_t n)
	{
		if (pipe2(go, O_CLOEXEC) != 0)
			ADD_FAILURE() << "pipe";
		int in = go[0];
		child = std::make_unique<Child>([=](int fd) -> int {
			int err;
			std::string why;
			shmkv *db = attach(root, cache, 0, &err, &why);
			char c = db ? 'y' : 'n';
			write_all_fd(fd, &c, 1);
			if (!db)
				return 1;
			if (read(in, &c, 1) != 1)
				return 2;
			int bad = check_handle(db, tag, n) != 0;
			shmkv_close(db);
			return bad ? 3 : 0;
		});
		close(go[0]);
		char c = 0;
		struct pollfd p = {child->fd(), POLLIN, 0};
		EXPECT_EQ(poll(&p, 1, 20000), 1);
		EXPECT_EQ(read(child->fd(), &c, 1), 1);
		EXPECT_EQ(c, 'y') << "reader could not attach";
	}
	int finish()
	{
		char c = 'g';
		EXPECT_EQ(write(go[1], &c, 1), 1);
		close(go[1]);
		go[1] = -1;
		return child->wait_exit(20000);
	}
	~HeldReader()
	{
		if (go[1] >= 0)
			close(go[1]);
	}
};

TEST(CacheCli, AgainstARunningLoader)
{
	Env env;
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	std::string a = env.img_path("a.shmkv"), b = env.img_path("b.shmkv");
	ASSERT_EQ(build_image(a, "a", 300), "");
	ASSERT_EQ(build_image(b, "b", 400), "");

	CmdRun r = shmctl(env, {"cache", "load", "cli", a});
	EXPECT_EQ(r.rc, 0) << r.err;
	EXPECT_NE(r.out.find("generation  1"), std::string::npos) << r.out;
	r = shmctl(env, {"-j", "cache", "load", "cli", b});
	EXPECT_EQ(r.rc, 0) << r.err;
	Json j = as_json(r);
	EXPECT_TRUE(j.ok());
	EXPECT_EQ(j["generation"].u64(), 2u);
	EXPECT_EQ(j["entries"].u64(), 402u);

	r = shmctl(env, {"cache", "list"});
	EXPECT_EQ(r.rc, 0) << r.err;
	EXPECT_NE(r.out.find("cli"), std::string::npos) << r.out;
	r = shmctl(env, {"-j", "cache", "list"});
	EXPECT_EQ(r.rc, 0) << r.err;
	j = as_json(r);
	ASSERT_EQ(j["caches"].arr.size(), 1u) << r.out;
	EXPECT_EQ(j["caches"].arr[0]["name"].s(), "cli");
	EXPECT_EQ(j["caches"].arr[0]["generation"].u64(), 2u);
	EXPECT_EQ(j["caches"].arr[0]["memory"].s(), "shm");

	r = shmctl(env, {"-j", "cache", "status", "cli"});
	EXPECT_EQ(r.rc, 0) << r.err;
	j = as_json(r);
	EXPECT_EQ(j["generation"].u64(), 2u);
	EXPECT_EQ(j["rollback.generation"].u64(), 1u);
	EXPECT_EQ(j["source"].s(), b);
	r = shmctl(env, {"cache", "status", "nope"});
	EXPECT_EQ(r.rc, 1) << "no such cache: " << r.err;
	EXPECT_TRUE(contains_ci(r.err, "nope")) << r.err;

	r = shmctl(env, {"cache", "get", "cli", "key_5"});
	EXPECT_EQ(r.rc, 0) << r.err;
	EXPECT_EQ(r.out, value_of("b", 5) + "\n");
	r = shmctl(env, {"-j", "cache", "get", "cli", "__n"});
	EXPECT_EQ(r.rc, 0) << r.err;
	j = as_json(r);
	EXPECT_EQ(j["type"].s(), "i64");
	EXPECT_EQ(j["value"].u64(), 400u);
	r = shmctl(env, {"cache", "get", "cli", "key_400"});
	EXPECT_EQ(r.rc, 1) << "missing key: " << r.out << r.err;
	r = shmctl(env, {"cache", "get", "nope", "key_1"});
	EXPECT_EQ(r.rc, 1) << "no such cache: " << r.err;

	// readers: one on the current generation
	HeldReader on_b(env.root(), "cli", "b", 400);
	r = shmctl(env, {"-j", "cache", "readers", "cli"});
	EXPECT_EQ(r.rc, 0) << r.err;
	j = as_json(r);
	bool found = false;
	for (const Json &rd : j["readers"].arr) {
		if ((pid_t)rd["pid"].u64() != on_b.child->pid())
			continue;
		found = true;
		ASSERT_EQ(rd["segments"].arr.size(), 1u) << r.out;
		EXPECT_EQ(rd["segments"].arr[0]["state"].s(), "current") << r.out;
		EXPECT_EQ(rd["segments"].arr[0]["generation"].u64(), 2u) << r.out;
	}
	EXPECT_TRUE(found) << "reader pid " << on_b.child->pid() << " not listed: " << r.out;

	// rollback to a, and back (a second rollback undoes the first)
	r = shmctl(env, {"-j", "cache", "rollback", "cli"});
	EXPECT_EQ(r.rc, 0) << r.err;
	j = as_json(r);
	EXPECT_EQ(j["generation"].u64(), 3u);
	EXPECT_EQ(j["rollback_generation"].u64(), 2u) << "the replaced generation is the rollback now";
	r = shmctl(env, {"cache", "get", "cli", "key_5"});
	EXPECT_EQ(r.out, value_of("a", 5) + "\n");
	r = shmctl(env, {"-j", "cache", "readers", "cli"});
	j = as_json(r);
	for (const Json &rd : j["readers"].arr) {
		if ((pid_t)rd["pid"].u64() == on_b.child->pid()) {
			EXPECT_EQ(rd["segments"].arr[0]["state"].s(), "rollback") << r.out;
		}
	}
	r = shmctl(env, {"cache", "rollback", "cli"});
	EXPECT_EQ(r.rc, 0) << r.err;
	r = shmctl(env, {"cache", "get", "cli", "key_5"});
	EXPECT_EQ(r.out, value_of("b", 5) + "\n");
	j = ld.status("cli");
	EXPECT_EQ(j["generation"].u64(), 4u);
	EXPECT_EQ(j["readers"].u64(), 1u) << "the held reader maps b again";
	r = shmctl(env, {"cache", "rollback", "nope"});
	EXPECT_EQ(r.rc, 1) << r.err;

	// a failed load: exit 2, the loader's reason
	std::string junk = env.img_path("junk.shmkv");
	ASSERT_TRUE(shmkv_test::write_file(junk, std::string(8192, 'j')));
	r = shmctl(env, {"cache", "load", "cli", junk});
	EXPECT_EQ(r.rc, 2);
	EXPECT_TRUE(contains_ci(r.err, "magic")) << r.err;

	// drop: the control segment goes, attached readers keep their values
	r = shmctl(env, {"-j", "cache", "drop", "cli"});
	EXPECT_EQ(r.rc, 0) << r.err;
	j = as_json(r);
	EXPECT_EQ(j["dropped_generation"].u64(), 4u);
	EXPECT_FALSE(file_exists(env.root() + "/cli.ctl"));
	r = shmctl(env, {"cache", "get", "cli", "key_5"});
	EXPECT_EQ(r.rc, 1) << r.out << r.err;
	EXPECT_EQ(on_b.finish(), 0) << "a reader keeps serving after drop";
	EXPECT_TRUE(env.shm_files().empty()) << "drop unlinks the segments";
	r = shmctl(env, {"cache", "drop", "cli"});
	EXPECT_EQ(r.rc, 1) << r.err;

	// without a loader
	ASSERT_TRUE(ld.load("off", a).ok());
	EXPECT_EQ(ld.stop(), 0);
	r = shmctl(env, {"cache", "list"});
	EXPECT_EQ(r.rc, 0) << r.err;
	EXPECT_TRUE(contains_ci(r.err, "not running")) << r.err;
	EXPECT_NE(r.out.find("off"), std::string::npos) << r.out;
	r = shmctl(env, {"-j", "cache", "list"});
	j = as_json(r);
	EXPECT_EQ(j["loader_running"].kind, Json::BOOL);
	EXPECT_FALSE(j["loader_running"].b);
	ASSERT_EQ(j["caches"].arr.size(), 1u) << r.out;
	EXPECT_EQ(j["caches"].arr[0]["generation"].u64(), 1u);
	r = shmctl(env, {"cache", "status", "off"});
	EXPECT_EQ(r.rc, 2);
	EXPECT_TRUE(contains_ci(r.err, "is shmkv-loader running")) << r.err;
	r = shmctl(env, {"cache", "get", "off", "key_7"});
	EXPECT_EQ(r.rc, 0) << "get needs no loader: " << r.err;
	EXPECT_EQ(r.out, value_of("a", 7) + "\n");
}

// Plain `cache list` shows what -j shows about trouble: a failed new cache
// (failed, expires_in, its error) and a spool that is not watched.
TEST(CacheCli, ListPlainShowsFailedAndSpool)
{
	Env env;
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	std::string a = env.img_path("a.shmkv");
	ASSERT_EQ(build_image(a, "a", 100), "");
	ASSERT_TRUE(ld.load("good", a).ok());
	EXPECT_FALSE(ld.load("ghost", env.img_path("missing.shmkv")).ok());
	ASSERT_EQ(rmdir(env.spool().c_str()), 0) << strerror(errno);
	ASSERT_TRUE(wait_until([&] { return !ld.req({"list"})["spool.error"].is_null(); }, 60000));

	CmdRun r = shmctl(env, {"cache", "list"});
	EXPECT_EQ(r.rc, 0) << r.err;
	std::vector<std::string> lines;
	for (size_t p = 0, q; p < r.out.size(); p = q + 1) {
		q = r.out.find('\n', p);
		if (q == std::string::npos)
			q = r.out.size();
		lines.push_back(r.out.substr(p, q - p));
	}
	ASSERT_GE(lines.size(), 4u) << r.out;
	EXPECT_NE(lines[0].find("FAILED"), std::string::npos) << r.out;
	EXPECT_NE(lines[0].find("EXPIRES_IN"), std::string::npos) << r.out;
	bool ghost = false;
	for (const std::string &l : lines)
		if (l.rfind("ghost", 0) == 0) {
			ghost = true;
			EXPECT_NE(l.find("true"), std::string::npos) << l;
			EXPECT_NE(l.find("missing.shmkv"), std::string::npos) << l;
		}
	EXPECT_TRUE(ghost) << r.out;
	EXPECT_NE(r.out.find("spool " + env.spool() + ": not watched: "), std::string::npos)
		<< r.out;
	EXPECT_NE(r.out.find("deleted"), std::string::npos) << r.out;
}

} // namespace

// cache status NAME: the summary of one screen (state, generation, size,
// memory, readers, last load and error, rollback), nothing that does not
// apply (BPF of a cache not exported); --all and -j: every field.
TEST(CacheCli, StatusSummaryAndAll)
{
	Env env;
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	std::string a = env.img_path("a.shmkv"), b = env.img_path("b.shmkv");
	std::string bad = env.img_path("bad.shmkv");
	ASSERT_EQ(build_image(a, "a", 300), "");
	ASSERT_EQ(build_image(b, "b", 400), "");
	FILE *f = fopen(bad.c_str(), "w");
	ASSERT_NE(f, nullptr);
	fputs("not an image\n", f);
	fclose(f);
	ASSERT_EQ(shmctl(env, {"cache", "load", "sum", a}).rc, 0);
	ASSERT_EQ(shmctl(env, {"cache", "load", "sum", b}).rc, 0);
	EXPECT_NE(shmctl(env, {"cache", "load", "sum", bad}).rc, 0);

	CmdRun r = shmctl(env, {"cache", "status", "sum"});
	ASSERT_EQ(r.rc, 0) << r.err;
	size_t lines = (size_t)std::count(r.out.begin(), r.out.end(), '\n');
	EXPECT_LE(lines, 16u) << "one screen:\n" << r.out;
	for (const char *want : {"cache       sum\n", "state       serving generation 2\n",
				 "402 entries\n", "memory      shm", "readers     0\n",
				 "loads       2 ok, 1 failed (invalid_image 1)\n",
				 "rollback    generation 1 ("})
		EXPECT_NE(r.out.find(want), std::string::npos) << want << " in:\n" << r.out;
	EXPECT_NE(r.out.find("last load   " + b + " in "), std::string::npos) << r.out;
	EXPECT_NE(r.out.find("last error  load " + bad), std::string::npos) << r.out;
	EXPECT_EQ(r.out.find("bpf"), std::string::npos) << "not exported: no BPF lines\n" << r.out;
	EXPECT_EQ(r.out.find("map_size"), std::string::npos) << r.out;

	// --all (before or after NAME): every field, flattened
	for (auto args : {std::vector<std::string>{"cache", "status", "--all", "sum"},
			  std::vector<std::string>{"cache", "status", "sum", "--all"}}) {
		r = shmctl(env, args);
		ASSERT_EQ(r.rc, 0) << r.err;
		for (const char *want : {"map_size", "load_id", "bpf.exported", "failures.invalid_image",
					 "rollback.generation", "configured_source"})
			EXPECT_NE(r.out.find(want), std::string::npos) << want << " in:\n" << r.out;
		EXPECT_GT((size_t)std::count(r.out.begin(), r.out.end(), '\n'), 30u);
	}
	// -j stays complete
	r = shmctl(env, {"-j", "cache", "status", "sum"});
	Json j = as_json(r);
	EXPECT_TRUE(j.has("bpf.exported")) << r.out;
	EXPECT_TRUE(j.has("map_size")) << r.out;
	EXPECT_EQ(j["failures.invalid_image"].u64(), 1u) << r.out;
	EXPECT_EQ(shmctl(env, {"cache", "status", "--all"}).rc, 2) << "NAME is required";
	EXPECT_EQ(shmctl(env, {"cache", "status", "--all", "nope"}).rc, 1);
}
