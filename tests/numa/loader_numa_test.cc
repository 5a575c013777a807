// loader_numa_test: shmkv-loader's NUMA placement on this machine (whatever
// its nodes): each copy bound before first touch and found on its node by
// move_pages after the load, shown in status, published with its node in
// the control segment; policies this host cannot serve refused, and the
// cache's numa= from the config; a state file naming files that are not the
// rollback's replicas adopts none of them. The multi-node proof is numa_guest.
#include <sys/wait.h>

#include <set>

#include "../loader/loader_util.h"

using namespace loader_test;

namespace {

std::set<int> online_nodes()
{
	std::set<int> s;
	std::string t = read_file("/sys/devices/system/node/online");
	uint64_t mask = 0;
	for (size_t i = 0; i < t.size();) {
		char *end;
		long a = strtol(t.c_str() + i, &end, 10), b = a;
		if (end == t.c_str() + i)
			break;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		for (long n = a; n <= b && n < 64; n++)
			mask |= 1ull << n;
		i = (size_t)(end - t.c_str()) + (*end == ',' ? 1 : t.size());
	}
	for (int n = 0; n < 64; n++)
		if (mask >> n & 1)
			s.insert(n);
	return s;
}

std::vector<shmkv_ctl_segment> ctl_segments(const std::string &root, const std::string &name)
{
	std::vector<shmkv_ctl_segment> v;
	std::string p = root + "/" + name + ".ctl";
	int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return v;
	void *m = mmap(nullptr, SHMKV_CTL_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return v;
	shmkv_ctl copy;
	if (shmkv_ctl_read((const shmkv_ctl *)m, &copy) == 0)
		for (uint32_t i = 0; i < copy.segment_count; i++)
			v.push_back(copy.segments[i]);
	munmap(m, SHMKV_CTL_SIZE);
	return v;
}

// qemu-user (the AArch64 tiers) does not emulate set_mempolicy, mbind or
// move_pages: a policy that binds fails there, by design with ENOSYS.
#define SKIP_UNDER_EMULATOR()                                                                      \
	do {                                                                                       \
		std::string emu_ = shmkv_test::emulator();                                         \
		if (!emu_.empty())                                                                 \
			GTEST_SKIP() << emu_ << " does not emulate set_mempolicy/mbind/move_pages"; \
	} while (0)

} // namespace

TEST(LoaderNuma, NodeZeroIsBoundVerifiedAndPublishedPinned)
{
	SKIP_UNDER_EMULATOR();
	Env env;
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	std::string img = env.img_path("n.shmkv");
	ASSERT_EQ(build_image(img, "n", 20000, 16), "");
	Json j = ld.req({"load", "n", img, "node=0"});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	Json st = ld.status("n");
	EXPECT_EQ(st["numa.policy"].s(), "node=0");
	EXPECT_TRUE(st["numa.note"].is_null());
	const Json &copies = st["numa.copies"];
	ASSERT_EQ(copies.arr.size(), 1u);
	EXPECT_EQ(copies.arr[0]["node"].u64(), 0u);
	EXPECT_TRUE(copies.arr[0]["placement_ok"].truthy());
	uint64_t pages = st["map_size"].u64() / st["page_size"].u64();
	EXPECT_GT(pages, 10u);
	EXPECT_EQ(copies.arr[0]["pages_per_node.0"].u64(), pages);
	EXPECT_EQ(copies.arr[0]["pages_absent"].u64(), 0u);
	auto segs = ctl_segments(env.root(), "n");
	ASSERT_EQ(segs.size(), 1u);
	EXPECT_EQ(segs[0].node, 0);
	// a reader gets the pinned copy
	shmkv *db = nullptr;
	char why[512] = "";
	ASSERT_EQ(shmkv_attach_diag(env.root().c_str(), "n", 0, &db, why, sizeof why), 0) << why;
	EXPECT_EQ(shmkv_node(db), 0);
	shmkv_close(db);

	// none: published unpinned
	j = ld.req({"load", "n", img, "none"});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	segs = ctl_segments(env.root(), "n");
	ASSERT_EQ(segs.size(), 1u);
	EXPECT_EQ(segs[0].node, -1);
	EXPECT_EQ(ld.status("n")["numa.policy"].s(), "none");
}

TEST(LoaderNuma, ReplicateMakesOneCopyPerNodeOfThisHost)
{
	SKIP_UNDER_EMULATOR();
	std::set<int> nodes = online_nodes();
	ASSERT_FALSE(nodes.empty());
	Env env;
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	std::string img = env.img_path("r.shmkv");
	ASSERT_EQ(build_image(img, "r", 5000), "");
	Json j = ld.req({"load", "r", img, "replicate"});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	auto segs = ctl_segments(env.root(), "r");
	ASSERT_EQ(segs.size(), std::min<size_t>(nodes.size(), 8));
	std::set<int> seen;
	for (auto &s : segs)
		seen.insert(s.node);
	EXPECT_EQ(seen.size(), segs.size());
	Json st = ld.status("r");
	ASSERT_EQ(st["numa.copies"].arr.size(), segs.size());
	for (auto &cp : st["numa.copies"].arr)
		EXPECT_TRUE(cp["placement_ok"].truthy());
	// a second load frees the first generation's copies with it
	std::vector<std::string> first;
	for (auto &s : segs)
		first.push_back(s.path);
	ASSERT_TRUE(ld.req({"load", "r", img, "replicate"}).ok());
	ASSERT_TRUE(ld.req({"load", "r", img, "replicate"}).ok());
	for (auto &p : first)
		EXPECT_FALSE(file_exists(p)) << p << " outlived its generation and the rollback";
	EXPECT_EQ(env.shm_files("shmkv").size(), 2 * segs.size()) << "current and rollback copies";
	// rollback republishes every copy of the previous generation
	ASSERT_TRUE(ld.req({"rollback", "r"}).ok());
	EXPECT_EQ(ctl_segments(env.root(), "r").size(), segs.size());
	ASSERT_TRUE(ld.req({"drop", "r"}).ok());
	EXPECT_EQ(env.shm_files("shmkv").size(), 0u);
}

TEST(LoaderNuma, PoliciesThisHostCannotServeAreRefused)
{
	SKIP_UNDER_EMULATOR();
	Env env;
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	std::string img = env.img_path("x.shmkv");
	ASSERT_EQ(build_image(img, "x", 1000), "");
	ASSERT_TRUE(ld.load("x", img).ok());
	uint64_t gen = ld.status("x")["generation"].u64();
	Json j = ld.req({"load", "x", img, "node=63"});
	EXPECT_FALSE(j.ok());
	EXPECT_EQ(j["code"].s(), "ENODEV");
	EXPECT_NE(j["error"].s().find("node 63 not online"), std::string::npos) << j["error"].s();
	j = ld.req({"load", "x", img, "replicate=0,63"});
	EXPECT_EQ(j["code"].s(), "ENODEV");
	j = ld.req({"load", "x", img, "nodes=1"});
	EXPECT_EQ(j["code"].s(), "EINVAL");
	EXPECT_NE(j["error"].s().find("expected none, local"), std::string::npos) << j["error"].s();
	EXPECT_EQ(ld.status("x")["generation"].u64(), gen) << "the current generation keeps serving";
}

TEST(LoaderNuma, ConfigNumaKey)
{
	SKIP_UNDER_EMULATOR();
	Env env;
	std::string conf = env.base() + "/loader.conf";
	ASSERT_TRUE(shmkv_test::write_file(conf, "[cache pinned]\nnuma = local\n"));
	{
		Loader ld(env, {"--memory", "shm", "--config", conf});
		ASSERT_TRUE(ld.start());
		std::string img = env.img_path("p.shmkv");
		ASSERT_EQ(build_image(img, "p", 1000), "");
		ASSERT_TRUE(ld.load("pinned", img).ok());
		Json st = ld.status("pinned");
		EXPECT_EQ(st["numa.policy"].s(), "local");
		EXPECT_TRUE(st["numa.copies"].arr.at(0)["placement_ok"].truthy());
		EXPECT_FALSE(st["numa.copies"].arr.at(0)["node"].is_null());
	}
	// a bad policy stops the start with file, line and the grammar
	ASSERT_TRUE(shmkv_test::write_file(conf, "[cache pinned]\n\nnuma = node=one\n"));
	std::string cmd = env_or_empty("SHMKV_LOADER") + " --foreground --root " + env.root() +
			  " --spool " + env.spool() + " --config " + conf + " 2>&1";
	FILE *p = popen(cmd.c_str(), "r");
	ASSERT_NE(p, nullptr);
	std::string out;
	char buf[512];
	while (fgets(buf, sizeof buf, p))
		out += buf;
	int rc = pclose(p);
	EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) != 0) << out;
	EXPECT_NE(out.find(conf + ":3: numa \"node=one\": node must be a number"), std::string::npos)
		<< out;
}

// The state file names the rollback's replicas (loader/state.c) and a restart
// adopts them (adopt.c): a forged list — a trusted copy of the rollback
// outside the segment directories, the rollback itself, the current segment,
// a path that does not exist — adopts none, logs each, removes none of those
// files, and the rollback still publishes its one copy.
TEST(LoaderNuma, ForgedRollbackReplicasAreNotAdopted)
{
	Env env;
	std::string a = env.img_path("a.shmkv"), b = env.img_path("b.shmkv");
	ASSERT_EQ(build_image(a, "a", 2000), "");
	ASSERT_EQ(build_image(b, "b", 2000), "");
	std::string cur, rb, outside = env.base() + "/outside.seg";
	{
		Loader ld(env);
		ASSERT_TRUE(ld.start());
		ASSERT_TRUE(ld.load("f", a).ok());
		ASSERT_TRUE(ld.load("f", b).ok());
		Json st = ld.status("f");
		cur = st["segment"].s();
		rb = st["rollback.segment"].s();
		ASSERT_FALSE(rb.empty()) << "no rollback";
		EXPECT_EQ(ld.stop(), 0);
	}
	std::string bytes = read_file(rb);
	ASSERT_FALSE(bytes.empty());
	ASSERT_TRUE(shmkv_test::write_file(outside, bytes));
	chmod(outside.c_str(), 0600);
	std::string state = env.root() + "/f.state";
	std::string s = read_file(state);
	ASSERT_NE(s.find("rb.path=" + rb + "\n"), std::string::npos) << s;
	s += "rb.more.0.path=" + outside + "\nrb.more.0.node=0\nrb.more.1.path=" + rb +
	     "\nrb.more.2.path=" + cur + "\nrb.more.3.path=" + env.base() + "/none.seg\n";
	ASSERT_TRUE(shmkv_test::write_file(state, s));

	Loader ld(env);
	ASSERT_TRUE(ld.start());
	std::string log = env.log();
	for (const char *k : {"1", "2", "3", "4"})
		EXPECT_NE(log.find(std::string("rollback replica ") + k + " not adopted"),
			  std::string::npos)
			<< k << "\n" << log;
	Json j = ld.req({"rollback", "f"});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	auto segs = ctl_segments(env.root(), "f");
	ASSERT_EQ(segs.size(), 1u);
	EXPECT_EQ(std::string(segs[0].path), rb);
	// a load frees the rollback (now b's segment): nothing it named goes with it
	ASSERT_TRUE(ld.load("f", a).ok());
	EXPECT_EQ(read_file(outside), bytes) << "a forged replica was removed";
	EXPECT_TRUE(file_exists(rb)) << "the serving segment was removed";
	EXPECT_EQ(read_file(state).find("rb.more."), std::string::npos) << read_file(state);
	EXPECT_EQ(ld.stop(), 0);
}
