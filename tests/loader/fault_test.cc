// fault_test: faults during a load, in the memory, in the builder and on the
// control socket (loader/README.md, "Loads"). Each case ends with a clear
// error, the serving generation untouched (readers still get every value of it) and
// nothing lost (a spool file is kept as NAME.shmkv.rejected), in bounded time.
//
//   Read faults, for each engine: `--io pread` through
//   tests/loader/fault_shim.c preloaded into the loader, and `--io io_uring`
//   reading a FUSE file of tests/loader/faultfs.c, whose reads fail in the
//   kernel (io_uring bypasses libc): EIO halfway (EIO, "Input/output error" and the offset),
//   the file ending early (SHMKV_ETRUNCATED, "shrank"), short reads of 1000
//   bytes, header included (the load succeeds, every value right).
//   ModifiedWhileLoading: a byte the loader has already read is rewritten
//   while the load runs (slowed by the shim): the checksums cannot see it,
//   the size/mtime check does (ESTALE, "changed while it was read"); a byte
//   not yet read: refused as well.
//   TmpfsFull: the shm dir is a 8 MiB tmpfs of our own (root; private mount
//   namespace): a 12 MiB image is refused with ENOSPC naming the need and
//   the room, the rollback segment is kept (dropping it would not help).
//   TmpfsMemcgEnomem: tmpfs with room, the loader in a memory cgroup of its
//   own limited to 24 MiB: a 32 MiB image fails with ENOMEM said as memory
//   (not "no room"), the OOM killer kept off, the cache keeps serving.
//   HugetlbShort: a hugetlbfs of our own limited to 2 pages: a cache moved
//   to memory=hugetlb (SIGHUP) refuses a 12 MiB image with ENOMEM.
//   BuilderKilled: `shmctl image build` SIGKILLed while it writes its
//   temporary file: the output name still holds the previous image, intact.
//   SocketGarbage: binary junk, an endless line, a half line that never
//   ends, a client that sends a load and vanishes, one that pipelines
//   thousands of requests and never reads: the loader stays up and keeps
//   answering other clients at once.
//   ControlSocketOutOfFds: accept out of descriptors (loader/server.c): a
//   real EMFILE (RLIMIT_NOFILE lowered by prlimit) is refused through the
//   reserve descriptor ("busy"); accept failing even so (the shim) pauses
//   accept instead of spinning; after it, requests and spool loads go on.
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

#include <random>

#include "fault_util.h"

using namespace loader_test;

namespace {

shmkv *attach_or_fail(const Env &env, const std::string &cache)
{
	int err;
	std::string why;
	shmkv *db = attach(env.root(), cache, 0, &err, &why);
	EXPECT_NE(db, nullptr) << why;
	return db;
}

// The cache still serves generation gen with image tag (n keys), and no
// partial segment is left.
void still_serving(Loader &ld, const Env &env, const std::string &cache, uint64_t gen,
		   const std::string &tag, uint64_t n)
{
	Json j = ld.status(cache);
	EXPECT_EQ(j["generation"].u64(), gen);
	EXPECT_FALSE(j["last_error"].is_null());
	shmkv_test::Db db(attach_or_fail(env, cache));
	if (db) {
		EXPECT_EQ(shmkv_generation(db), gen);
		EXPECT_EQ(tag_of(db), tag);
		EXPECT_EQ(check_handle(db, tag, n), 0u);
	}
	EXPECT_TRUE(env.shm_files(".loading").empty()) << "a partial segment was left";
}

// faultfs.c mounted on a directory of env: FILE (file()) reads BACKING, with
// the faults fault_conf.h names, in the kernel's read path (io_uring's too).
class FuseFile {
public:
	FuseFile(const Env &env, const Fault &f, const std::string &backing)
	{
		std::string exe = env_or_empty("SHMKV_FAULTFS");
		if (exe.empty()) {
			skip_ = "built without libfuse3 (faultfs); ./run installs libfuse3-dev";
			return;
		}
		if (!shmkv_test::emulator().empty()) {
			skip_ = "under " + shmkv_test::emulator() + " there is no io_uring to fault";
			return;
		}
		if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) != 0) {
			skip_ = geteuid() != 0 ? "needs root to mount a FUSE filesystem"
					       : std::string("/dev/fuse: ") + strerror(errno);
			return;
		}
		dir_ = env.base() + "/fuse";
		mkdir(dir_.c_str(), 0755);
		pid_ = fork();
		if (pid_ == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			execl(exe.c_str(), exe.c_str(), f.conf().c_str(), backing.c_str(), dir_.c_str(),
			      (char *)nullptr);
			_exit(127);
		}
		struct stat b, m;
		bool up = stat(backing.c_str(), &b) == 0 &&
			  wait_until([&] { return stat(file().c_str(), &m) == 0 && m.st_size == b.st_size; },
				     60000);
		if (!up)
			error_ = "faultfs did not come up on " + dir_;
	}
	~FuseFile()
	{
		if (pid_ <= 0)
			return;
		umount2(dir_.c_str(), MNT_DETACH); // faultfs returns when unmounted
		if (!wait_until([&] { return waitpid(pid_, nullptr, WNOHANG) == pid_; }, 30000)) {
			kill(pid_, SIGKILL);
			waitpid(pid_, nullptr, 0);
		}
	}
	std::string file() const { return dir_ + "/image"; }
	const std::string &skip() const { return skip_; }
	const std::string &error() const { return error_; }

private:
	std::string dir_, skip_, error_;
	pid_t pid_ = -1;
};

// Read faults of a load, by engine: "pread" (the shim preloaded into the
// loader, faults on b_ itself) or "io_uring" (the loader reads b_ through a
// FuseFile, so the faults come from the kernel). ShimFaults: pread only.
class ReadFaults : public ::testing::TestWithParam<std::string> {
protected:
	virtual std::string engine() const { return GetParam(); }
	void SetUp() override
	{
		env_ = std::make_unique<Env>();
		fault_ = std::make_unique<Fault>(*env_);
		ld_ = std::make_unique<Loader>(*env_, std::vector<std::string>{
							      "--memory", "shm", "--io", engine(),
							      "--block-size", "64K"});
		a_ = env_->img_path("a.shmkv");
		b_ = env_->img_path("b.shmkv");
		ASSERT_EQ(build_image(a_, "a", 3000), "");
		ASSERT_EQ(build_image(b_, "b", 20000, 60), "");
		struct stat st;
		ASSERT_EQ(stat(b_.c_str(), &st), 0);
		bsize_ = (uint64_t)st.st_size;
		ASSERT_GT(bsize_, 1u << 20);
		if (engine() == "pread") {
			std::string skip;
			if (!start_with_shim(*ld_, *fault_, &skip)) {
				if (!skip.empty())
					GTEST_SKIP() << skip;
				FAIL() << "loader did not start";
			}
		} else {
			fuse_ = std::make_unique<FuseFile>(*env_, *fault_, b_);
			if (!fuse_->skip().empty())
				GTEST_SKIP() << fuse_->skip();
			ASSERT_EQ(fuse_->error(), "");
			b_ = fuse_->file();
			ASSERT_TRUE(ld_->start()) << "loader did not start";
		}
		Json j = ld_->load("c", a_);
		ASSERT_TRUE(j.ok()) << j["error"].s();
	}
	void TearDown() override
	{
		if (fault_)
			fault_->clear();
		if (ld_ && ld_->pid() > 0) {
			EXPECT_TRUE(ld_->alive()) << "the loader died";
			EXPECT_EQ(ld_->stop(), 0);
		}
		fuse_.reset(); // unmounted before env_ removes its directory
	}
	// the loader read with the engine asked for (not a fallback)
	void expect_engine()
	{
		EXPECT_EQ(read_file(env_->log_path()).find("io_uring unavailable"), std::string::npos)
			<< "the io_uring case ran on pread";
	}
	std::unique_ptr<Env> env_;
	std::unique_ptr<Fault> fault_;
	std::unique_ptr<Loader> ld_;
	std::unique_ptr<FuseFile> fuse_;
	std::string a_, b_;
	uint64_t bsize_ = 0;
};

class ShimFaults : public ReadFaults {
protected:
	std::string engine() const override { return "pread"; }
};

INSTANTIATE_TEST_SUITE_P(Engine, ReadFaults, ::testing::Values("pread", "io_uring"),
			 [](const ::testing::TestParamInfo<std::string> &i) { return i.param; });

TEST_P(ReadFaults, EioHalfway)
{
	fault_->set("eio", (long long)bsize_ / 2, b_);
	uint64_t t0 = now_ms();
	Json j = ld_->load("c", b_);
	EXPECT_FALSE(j.ok());
	EXPECT_EQ(j["code"].s(), "EIO") << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), "Input/output error")) << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), "offset")) << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), "keeps serving")) << j["error"].s();
	EXPECT_LT(now_ms() - t0, 20000u);
	still_serving(*ld_, *env_, "c", 1, "a", 3000);
	expect_engine();

	// through the spool: the file is kept, renamed .rejected (the spool is
	// not on the FUSE file system: pread only)
	if (engine() == "pread") {
		ASSERT_EQ(spool_drop(*env_, b_, "c", true), "");
		EXPECT_TRUE(wait_until([&] { return file_exists(env_->spool_path("c") + ".rejected"); },
				       20000));
		EXPECT_EQ(read_file(env_->spool_path("c") + ".rejected"), read_file(b_));
		still_serving(*ld_, *env_, "c", 1, "a", 3000);
	}

	// the fault gone, the same file loads
	fault_->clear();
	j = ld_->load("c", b_);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["generation"].u64(), 2u);
}

// A new image renamed into the spool right after the previous one was
// published, while the loader still finishes that load (here: held in the
// state file's rename), must not be removed as if it were the loaded file:
// it loads as the next generation. The old loader unlinked it unseen.
TEST_F(ShimFaults, DropRightAfterPublishIsNotLost)
{
	std::string first = env_->img_path("first.shmkv");
	ASSERT_EQ(build_image(first, "a", 3000), "");
	fault_->set("slowrename", 1500000, env_->root() + "/d.state");
	ASSERT_EQ(spool_drop(*env_, first, "d"), "");
	CtlView v;
	ASSERT_TRUE(wait_until([&] { return read_ctl(env_->root(), "d", &v) && v.generation == 1; },
			       20000));
	// published; the loader now sleeps in rename(.d.state.tmp, d.state)
	ASSERT_EQ(spool_drop(*env_, b_, "d", true), "");
	EXPECT_TRUE(wait_until([&] { return read_ctl(env_->root(), "d", &v) && v.generation == 2; },
			       20000))
		<< "the image dropped after the publish was never loaded";
	fault_->clear();
	shmkv_test::Db db(attach_or_fail(*env_, "d"));
	if (db) {
		EXPECT_EQ(tag_of(db), "b");
	}
	EXPECT_TRUE(wait_until([&] { return !file_exists(env_->spool_path("d")); }, 60000))
		<< "the loaded spool file was not removed";
}

TEST_P(ReadFaults, HeaderEio)
{
	fault_->set("eio", 0, b_);
	Json j = ld_->load("c", b_);
	EXPECT_FALSE(j.ok());
	EXPECT_EQ(j["code"].s(), "EIO") << j["error"].s();
	still_serving(*ld_, *env_, "c", 1, "a", 3000);
	expect_engine();
}

TEST_P(ReadFaults, FileEndsEarly)
{
	fault_->set("eof", (long long)bsize_ * 3 / 4, b_);
	Json j = ld_->load("c", b_);
	EXPECT_FALSE(j.ok());
	EXPECT_EQ(j["code"].s(), "SHMKV_ETRUNCATED") << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), "shrank")) << j["error"].s();
	still_serving(*ld_, *env_, "c", 1, "a", 3000);
	expect_engine();
}

TEST_P(ReadFaults, ShortReads)
{
	fault_->set("short", 1000, b_); // also the 4096-byte header read
	Json j = ld_->load("c", b_);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["generation"].u64(), 2u);
	shmkv_test::Db db(attach_or_fail(*env_, "c"));
	ASSERT_TRUE(db);
	EXPECT_EQ(tag_of(db), "b");
	EXPECT_EQ(check_handle(db, "b", 20000), 0u);
	expect_engine();
}

TEST_F(ShimFaults, ModifiedWhileLoading)
{
	// 64 KiB per read, 40 ms each: the load takes about a second
	fault_->set("slow", 40000, b_);
	for (int already_read = 1; already_read >= 0; already_read--) {
		std::string copy = env_->img_path("b-" + std::to_string(already_read) + ".shmkv");
		ASSERT_TRUE(shmkv_test::write_file(copy, read_file(b_)));
		fault_->set("slow", 40000, copy);
		int fd = request_async(env_->root(), {"load", "c", copy});
		ASSERT_GE(fd, 0);
		uint64_t off = already_read ? 8192 : bsize_ - 100;
		// wait until the loader has read past 512 KiB
		EXPECT_TRUE(wait_until(
			[&] {
				Json s = request(env_->root(), {"status", "c"}, 30000);
				return s["progress.bytes_done"].u64() >= (512u << 10);
			},
			20000));
		int w = open(copy.c_str(), O_WRONLY);
		ASSERT_GE(w, 0);
		std::string data = read_file(copy);
		char byte = (char)(data[off] ^ 0x5a);
		ASSERT_EQ(pwrite(w, &byte, 1, (off_t)off), 1);
		close(w);
		std::string line;
		ASSERT_TRUE(read_line(fd, &line, 30000));
		close(fd);
		Json j;
		ASSERT_TRUE(parse_json(line, &j)) << line;
		EXPECT_FALSE(j.ok()) << "a file changed while it was read was published";
		if (already_read) {
			EXPECT_EQ(j["code"].s(), "ESTALE") << j["error"].s();
			EXPECT_TRUE(contains_ci(j["error"].s(), "changed while it was read"))
				<< j["error"].s();
		} else {
			EXPECT_FALSE(j["error"].s().empty());
		}
		still_serving(*ld_, *env_, "c", 1, "a", 3000);
	}
}

// A tmpfs or hugetlbfs mounted for this test only: the test process moves to
// a private mount namespace first (the loader it starts inherits it).
class PrivateMount {
public:
	PrivateMount(const std::string &dir, const char *type, const std::string &opts)
	{
		if (geteuid() != 0) {
			skip_ = "needs root to mount a " + std::string(type);
			return;
		}
		if (unshare(CLONE_NEWNS) != 0 ||
		    mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
			skip_ = std::string("private mount namespace: ") + strerror(errno);
			return;
		}
		if (mount("shmkv-fault", dir.c_str(), type, 0, opts.c_str()) != 0) {
			skip_ = std::string("mount ") + type + " " + opts + ": " + strerror(errno);
			return;
		}
		dir_ = dir;
	}
	~PrivateMount()
	{
		if (!dir_.empty())
			umount2(dir_.c_str(), MNT_DETACH);
	}
	const std::string &skip() const { return skip_; }

private:
	std::string dir_, skip_;
};

TEST(Fault, TmpfsFull)
{
	Env env;
	PrivateMount pm(env.shm(), "tmpfs", "size=8M,mode=0755");
	if (!pm.skip().empty())
		GTEST_SKIP() << pm.skip();
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	std::string a = env.img_path("a.shmkv"), big = env.img_path("big.shmkv");
	ASSERT_EQ(build_image(a, "a", 3000), "");
	ASSERT_EQ(build_image(big, "big", 60000, 150), "");
	struct stat st;
	ASSERT_EQ(stat(big.c_str(), &st), 0);
	ASSERT_GT(st.st_size, 9 << 20) << "must not fit in 8 MiB";
	ASSERT_TRUE(ld.load("c", a).ok());
	ASSERT_TRUE(ld.load("c", a).ok()); // generation 2, rollback 1
	Json j = ld.load("c", big);
	EXPECT_FALSE(j.ok());
	EXPECT_EQ(j["code"].s(), "ENOSPC") << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), "no room in " + env.shm())) << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), "free")) << j["error"].s();
	still_serving(ld, env, "c", 2, "a", 3000);
	j = ld.status("c");
	EXPECT_EQ(j["rollback.generation"].u64(), 1u) << "dropping it would not have helped";
	EXPECT_EQ(env.shm_files().size(), 2u);
	j = ld.load("c", a);
	EXPECT_TRUE(j.ok()) << "a load that fits still works: " << j["error"].s();
	EXPECT_EQ(ld.stop(), 0);
}

// A memory cgroup of this test's own, limited to limit bytes, for the loader
// (add()): tmpfs pages it takes beyond the limit fail with ENOMEM, not with
// ENOSPC as a full tmpfs does. The OOM killer is kept off (v1:
// memory.oom_control; v2: the loader's oom_score_adj -1000), so the charge
// fails instead of killing. The cgroup v1 memory controller or v2's.
class MemCgroup {
public:
	explicit MemCgroup(uint64_t limit)
	{
		if (geteuid() != 0) {
			skip_ = "needs root to make a memory cgroup";
			return;
		}
		std::string name = "shmkv-fault-" + std::to_string(getpid());
		if (read_file("/sys/fs/cgroup/cgroup.controllers").find("memory") !=
		    std::string::npos) {
			dir_ = "/sys/fs/cgroup/" + name; // v2
			v2_ = true;
		} else if (file_exists("/sys/fs/cgroup/memory/cgroup.procs")) {
			dir_ = "/sys/fs/cgroup/memory/" + name; // v1
		} else {
			skip_ = "no cgroup memory controller (v1 or v2) in /sys/fs/cgroup";
			return;
		}
		if (mkdir(dir_.c_str(), 0755) != 0 && errno != EEXIST) {
			skip_ = "mkdir " + dir_ + ": " + strerror(errno);
			dir_.clear();
			return;
		}
		std::string l = std::to_string(limit);
		bool ok = v2_ ? put("memory.max", l) && put("memory.swap.max", "0")
			      : put("memory.limit_in_bytes", l) && put("memory.oom_control", "1");
		if (!ok)
			error_ = "cannot limit " + dir_ + ": " + strerror(errno);
	}
	~MemCgroup()
	{
		if (!dir_.empty())
			rmdir(dir_.c_str()); // empty by then: the loader has stopped
	}
	bool add(pid_t pid)
	{
		return (!v2_ || shmkv_test::write_file("/proc/" + std::to_string(pid) +
							       "/oom_score_adj",
						       "-1000")) &&
		       put("cgroup.procs", std::to_string(pid));
	}
	const std::string &skip() const { return skip_; }
	const std::string &error() const { return error_; }

private:
	bool put(const std::string &f, const std::string &v)
	{
		int fd = open((dir_ + "/" + f).c_str(), O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return false;
		bool ok = write(fd, v.data(), v.size()) == (ssize_t)v.size();
		close(fd);
		return ok;
	}
	std::string dir_, skip_, error_;
	bool v2_ = false;
};

// tmpfs with room, but the loader's memory cgroup is short: ENOMEM, said as
// memory (not "no room in" a tmpfs that has room), and the cache keeps
// serving. The old loader called every short tmpfs ENOSPC "no room".
TEST(Fault, TmpfsMemcgEnomem)
{
	Env env;
	MemCgroup cg(24u << 20);
	if (!cg.skip().empty())
		GTEST_SKIP() << cg.skip();
	ASSERT_EQ(cg.error(), "");
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	ASSERT_TRUE(cg.add(ld.pid())) << strerror(errno);
	std::string a = env.img_path("a.shmkv"), big = env.img_path("big.shmkv");
	ASSERT_EQ(build_image(a, "a", 3000), "");
	ASSERT_EQ(build_image(big, "big", 200000, 150), "");
	struct stat st;
	ASSERT_EQ(stat(big.c_str(), &st), 0);
	ASSERT_GT(st.st_size, 32 << 20) << "must not fit in 24 MiB";
	struct statvfs sv;
	ASSERT_EQ(statvfs(env.shm().c_str(), &sv), 0);
	ASSERT_GT((uint64_t)sv.f_bavail * sv.f_frsize, 2 * (uint64_t)st.st_size)
		<< "the tmpfs itself must have room";
	ASSERT_TRUE(ld.load("c", a).ok());
	Json j = ld.load("c", big);
	EXPECT_FALSE(j.ok());
	EXPECT_EQ(j["code"].s(), "ENOMEM") << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), "memory")) << j["error"].s();
	EXPECT_FALSE(contains_ci(j["error"].s(), "no room")) << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), "keeps serving")) << j["error"].s();
	still_serving(ld, env, "c", 1, "a", 3000);
	EXPECT_TRUE(ld.alive()) << "killed by the OOM killer";
	j = ld.load("c", a);
	EXPECT_TRUE(j.ok()) << "a load that fits still works: " << j["error"].s();
	EXPECT_EQ(ld.stop(), 0);
}

TEST(Fault, HugetlbShort)
{
	if (!shmkv_test::emulator().empty())
		GTEST_SKIP() << "under " << shmkv_test::emulator()
			     << " hugetlbfs files cannot be mapped (as hugepage_test)";
	Env env;
	std::string mnt = env.base() + "/huge";
	ASSERT_EQ(mkdir(mnt.c_str(), 0755), 0);
	PrivateMount pm(mnt, "hugetlbfs", "pagesize=2M,size=4M,mode=0755");
	if (!pm.skip().empty())
		GTEST_SKIP() << pm.skip();
	std::string conf = env.base() + "/loader.conf";
	auto write_conf = [&](const char *memory) {
		ASSERT_TRUE(shmkv_test::write_file(conf, "[loader]\nhugetlb_dir = " + mnt +
								 "\n[cache c]\nmemory = " + memory +
								 "\n"));
	};
	write_conf("shm");
	Loader ld(env, {"--config", conf});
	ASSERT_TRUE(ld.start());
	std::string a = env.img_path("a.shmkv"), big = env.img_path("big.shmkv");
	ASSERT_EQ(build_image(a, "a", 3000), "");
	ASSERT_EQ(build_image(big, "big", 60000, 150), "");
	ASSERT_TRUE(ld.load("c", a).ok());
	write_conf("hugetlb");
	kill(ld.pid(), SIGHUP);
	ASSERT_TRUE(wait_until([&] { return ld.status("c")["policy"].s() == "hugetlb"; }, 60000))
		<< ld.status("c")["policy"].s();
	Json j = ld.load("c", big);
	EXPECT_FALSE(j.ok());
	EXPECT_EQ(j["code"].s(), "ENOMEM") << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), "not enough huge pages")) << j["error"].s();
	still_serving(ld, env, "c", 1, "a", 3000);
	EXPECT_TRUE(list_dir(mnt + "/shmkv").empty()) << "nothing left on the hugetlbfs";
	EXPECT_EQ(ld.stop(), 0);
}

TEST(Fault, BuilderKilled)
{
	Env env;
	std::string shmctl = env_or_empty("SHMCTL");
	ASSERT_FALSE(shmctl.empty());
	std::string out = env.img_path("out.shmkv"), in = env.img_path("in.jsonl");
	ASSERT_EQ(build_image(out, "old", 500), "");
	std::string old = read_file(out);
	bool killed_mid_write = false;
	for (int attempt = 0; attempt < 3 && !killed_mid_write; attempt++) {
		{
			std::string s;
			uint64_t n = 300000u << attempt;
			s.reserve(n * 64);
			for (uint64_t i = 0; i < n; i++)
				s += "{\"key\": \"k" + std::to_string(i) + "\", \"value\": \"" +
				     value_of("new", i, 16) + "\"}\n";
			ASSERT_TRUE(shmkv_test::write_file(in, s));
		}
		pid_t pid = fork();
		ASSERT_GE(pid, 0);
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			int nul = open("/dev/null", O_WRONLY);
			dup2(nul, 1);
			dup2(nul, 2);
			execl(shmctl.c_str(), shmctl.c_str(), "image", "build", "-o", out.c_str(),
			      in.c_str(), (char *)nullptr);
			_exit(127);
		}
		// kill it as soon as its temporary file has bytes: an unnamed O_TMPFILE
		// (in /proc/PID/fd as "IMG/#INODE (deleted)"), or .out.shmkv.*.tmp
		int st = 0;
		bool exited = false;
		uint64_t end = now_ms() + 60000;
		std::string fds = "/proc/" + std::to_string(pid) + "/fd";
		while (!killed_mid_write && !exited && now_ms() < end) {
			for (const std::string &n : list_dir(fds)) {
				char t[4096];
				ssize_t k = readlink((fds + "/" + n).c_str(), t, sizeof t - 1);
				struct stat s;
				if (k > 0 && std::string(t, (size_t)k).rfind(env.img() + "/#", 0) == 0 &&
				    stat((fds + "/" + n).c_str(), &s) == 0 && s.st_size > 0) {
					kill(pid, SIGKILL);
					killed_mid_write = true;
					break;
				}
			}
			for (const std::string &n : list_dir(env.img())) {
				struct stat s;
				if (n.rfind(".out.shmkv.", 0) == 0 &&
				    stat((env.img() + "/" + n).c_str(), &s) == 0 && s.st_size > 0) {
					kill(pid, SIGKILL);
					killed_mid_write = true;
					break;
				}
			}
			exited = waitpid(pid, &st, WNOHANG) == pid;
			if (!exited && !killed_mid_write)
				usleep(200);
		}
		if (!exited) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
		}
		if (!killed_mid_write) {
			// finished before it was caught: put the old image back, try a bigger input
			printf("attempt %d: the build finished first\n", attempt);
			ASSERT_TRUE(shmkv_test::write_file(out, old));
			continue;
		}
		EXPECT_EQ(read_file(out), old) << "the output name changed";
	}
	EXPECT_TRUE(killed_mid_write) << "the builder never was caught writing";
	EXPECT_EQ(read_file(out), old);
	shmkv_test::Db db = shmkv_test::open_db(out, 0);
	ASSERT_TRUE(db);
	EXPECT_EQ(tag_of(db), "old");
}

TEST(Fault, SocketGarbage)
{
	Env env;
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	std::string a = env.img_path("a.shmkv"), b = env.img_path("b.shmkv");
	ASSERT_EQ(build_image(a, "a", 3000), "");
	ASSERT_EQ(build_image(b, "b", 30000, 40), "");
	ASSERT_TRUE(ld.load("c", a).ok());
	auto quick_ping = [&] {
		std::string why;
		uint64_t t0 = now_ms();
		Json j = request(env.root(), {"ping"}, 3000, &why);
		EXPECT_TRUE(j.ok()) << why;
		EXPECT_LT(now_ms() - t0, 3000u);
	};

	// binary junk, NULs, lone \r, tabs galore: an error per line, never a crash
	int g = sock_connect(env.root());
	ASSERT_GE(g, 0);
	std::mt19937_64 rng(42);
	std::string junk;
	for (int i = 0; i < 4000; i++) {
		char c = (char)(rng() & 0xff);
		junk += c == '\n' ? '\t' : c;
		if (i % 97 == 0)
			junk += '\n';
	}
	junk += std::string("load\t\t\t\t\t\n") + std::string(1, '\0') + "ping\n\r\n\t\n";
	ASSERT_TRUE(send_all(g, junk));
	std::string line;
	int replies = 0;
	while (read_line(g, &line, 2000)) {
		Json j;
		EXPECT_TRUE(parse_json(line, &j)) << line;
		replies++;
	}
	EXPECT_GT(replies, 30);
	close(g);
	quick_ping();

	// an endless line: E2BIG, then the connection is closed
	g = sock_connect(env.root());
	ASSERT_GE(g, 0);
	send_all(g, std::string(100000, 'x'));
	ASSERT_TRUE(read_line(g, &line, 5000));
	EXPECT_TRUE(contains_ci(line, "too long")) << line;
	EXPECT_FALSE(read_line(g, &line, 2000)) << "closed after that";
	close(g);

	// a half line that never ends, and a client pipelining and never reading
	int half = sock_connect(env.root());
	ASSERT_GE(half, 0);
	ASSERT_TRUE(send_all(half, "stat"));
	int flood = sock_connect(env.root());
	ASSERT_GE(flood, 0);
	int fl = fcntl(flood, F_GETFL);
	fcntl(flood, F_SETFL, fl | O_NONBLOCK);
	std::string pings;
	for (int i = 0; i < 1000; i++)
		pings += "ping\n";
	// send while the loader takes it (up to 8 MiB, 5 s); stop once it has
	// not taken anything for 600 ms
	uint64_t sent = 0, flood_end = now_ms() + 5000;
	for (int stalls = 0; stalls < 3 && sent < (8u << 20) && now_ms() < flood_end;) {
		struct pollfd p = {flood, POLLOUT, 0};
		if (poll(&p, 1, 200) <= 0) {
			stalls++;
			continue;
		}
		ssize_t n = send(flood, pings.data(), pings.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			sent += (uint64_t)n;
			stalls = 0;
		}
	}
	EXPECT_GT(sent, 0u);
	quick_ping();
	// replies to a peer that does not read are held back, not piled up: the
	// loader stops reading that peer (at most about 1 MiB of replies kept)
	EXPECT_LT(sent, 8u << 20) << "the loader kept reading a peer that never reads";
	uint64_t rss_kb = 0;
	{
		std::string status = read_file("/proc/" + std::to_string(ld.pid()) + "/status");
		size_t p = status.find("VmRSS:");
		if (p != std::string::npos)
			rss_kb = strtoull(status.c_str() + p + 6, nullptr, 10);
	}
	EXPECT_LT(rss_kb, 64u << 10) << "loader RSS " << rss_kb << " KiB after the flood";
	Json j = ld.status("c");
	EXPECT_EQ(j["generation"].u64(), 1u);

	// a client that asks for a load and vanishes before the reply
	int gone = request_async(env.root(), {"load", "c", b});
	ASSERT_GE(gone, 0);
	close(gone);
	quick_ping();
	EXPECT_TRUE(wait_until([&] { return ld.status("c")["generation"].u64() == 2u; }, 30000))
		<< "the load goes on without its client";
	close(half);
	close(flood);
	quick_ping();
	EXPECT_TRUE(ld.alive());
	j = ld.load("c", a);
	EXPECT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["generation"].u64(), 3u);
	EXPECT_EQ(ld.stop(), 0);
}

// Connects and sends a ping; returns the fd (the reply is read later) or -1.
// The send may fail: a refused connection may be closed before it.
int ping_async(const std::string &root)
{
	int fd = sock_connect(root);
	if (fd >= 0)
		(void)send_all(fd, join_tab({"ping"}));
	return fd;
}

// The loader's highest open descriptor (its /proc/PID/fd), or -1.
int highest_fd(pid_t pid)
{
	int hi = -1;
	for (const std::string &f : list_dir("/proc/" + std::to_string(pid) + "/fd"))
		hi = std::max(hi, atoi(f.c_str()));
	return hi;
}

// Lowers the loader's RLIMIT_NOFILE to the descriptors it holds, then
// connects pings (idle connections fill any hole below the limit) until one
// is refused through the reserve descriptor, or one is not answered within
// wait_ms (accept paused: no reserve); then restores the limit and closes
// them. Returns the refusal, or "".
std::string refusal_at_limit(pid_t pid, const std::string &root, int wait_ms = 30000)
{
	struct rlimit old, low;
	if (prlimit(pid, RLIMIT_NOFILE, nullptr, &old) != 0) {
		ADD_FAILURE() << "prlimit: " << strerror(errno);
		return "";
	}
	int hi = highest_fd(pid);
	EXPECT_GE(hi, 3);
	low = old;
	low.rlim_cur = (rlim_t)hi + 1;
	EXPECT_EQ(prlimit(pid, RLIMIT_NOFILE, &low, nullptr), 0) << strerror(errno);
	std::vector<int> idle;
	std::string refusal, line;
	for (int i = 0; i < 32 && refusal.empty(); i++) {
		int fd = ping_async(root);
		if (fd < 0) {
			ADD_FAILURE() << "connect: " << strerror(errno);
			break;
		}
		idle.push_back(fd);
		if (!read_line(fd, &line, wait_ms))
			break;
		if (line.find("out of file descriptors") != std::string::npos)
			refusal = line;
	}
	EXPECT_EQ(prlimit(pid, RLIMIT_NOFILE, &old, nullptr), 0) << strerror(errno);
	for (int fd : idle)
		close(fd);
	return refusal;
}

// accept() out of descriptors (loader/server.c): with a
// real EMFILE (the loader's RLIMIT_NOFILE lowered to what it holds, by
// prlimit) the reserve descriptor takes one connection and refuses it
// ("out of file descriptors", reason busy); with accept failing whatever is
// given up (the shim: EMFILE from every accept, as when the whole system is
// out) accept pauses instead of spinning. When the fault ends, root's
// `shmctl cache list` and the waiting pings are answered and a spool load
// publishes. When descriptors are freed between the failed accept and the
// reserve's (the shim's acceptflap), connections are served, not refused.
TEST(Fault, ControlSocketOutOfFds)
{
	Env env;
	Fault fault(env);
	Loader ld(env);
	std::string skip;
	if (!start_with_shim(ld, fault, &skip)) {
		if (!skip.empty())
			GTEST_SKIP() << skip;
		FAIL() << env.log();
	}
	std::string root = env.root();
	ASSERT_TRUE(request(root, {"ping"}, 30000).ok());

	// 1. a real EMFILE: no descriptor free below the limit; idle connections
	// fill any hole below it until one is refused through the reserve
	std::string refusal = refusal_at_limit(ld.pid(), root);
	EXPECT_FALSE(refusal.empty()) << "no connection was refused through the reserve descriptor\n"
				      << env.log();
	Json r;
	EXPECT_TRUE(parse_json(refusal, &r) && !r.ok() && r["reason"].s() == "busy") << refusal;
	EXPECT_TRUE(ld.alive());
	EXPECT_FALSE(log_lines(env.log(), {"control socket: accept", "Too many open files"}).empty())
		<< env.log();

	// 2. every accept fails (the shim) while pings wait in the backlog: the
	// loader pauses accept, it does not spin
	fault.set("accepterr", EMFILE, "-");
	std::vector<int> waiting;
	for (int i = 0; i < 8; i++) {
		int fd = ping_async(root);
		ASSERT_GE(fd, 0) << strerror(errno);
		waiting.push_back(fd);
	}
	ASSERT_TRUE(wait_until([&] {
		return log_lines(env.log(), {"control socket: accept", "Too many open files"}).size() >= 3;
	}, 30000, 20)) << env.log();
	expect_no_spin(ld.pid(), "while every accept fails");
	EXPECT_TRUE(ld.alive());

	// 3. the fault ends: the waiting pings, root's list and a spool load go through
	fault.clear();
	for (int fd : waiting) {
		std::string line;
		Json j;
		EXPECT_TRUE(read_line(fd, &line, 30000) && parse_json(line, &j) && j.ok()) << line;
		close(fd);
	}
	CmdRun list = shmctl(env, {"cache", "list"}, 30000);
	EXPECT_EQ(list.rc, 0) << list.out << list.err;
	std::string img = env.img_path("s.shmkv");
	ASSERT_EQ(build_image(img, "s", 500), "");
	ASSERT_EQ(spool_drop(env, img, "s"), "");
	EXPECT_TRUE(wait_until([&] { return request(root, {"status", "s"}, 10000)["generation"].u64() == 1; },
			       60000, 50)) << env.log();
	EXPECT_TRUE(ld.alive());

	// 4. descriptors freed between the failed accept and the reserve's (every
	// other accept fails): the reserve comes back, so each connection is
	// served, not refused as out of descriptors
	size_t warned = log_lines(env.log(), {"control socket: accept", "Too many open files"}).size();
	fault.set("acceptflap", EMFILE, "-");
	for (int i = 0; i < 8; i++) {
		int fd = ping_async(root);
		ASSERT_GE(fd, 0) << strerror(errno);
		std::string line;
		Json j;
		EXPECT_TRUE(read_line(fd, &line, 30000) && parse_json(line, &j) && j.ok()) << line;
		close(fd);
	}
	fault.clear();
	EXPECT_GT(log_lines(env.log(), {"control socket: accept", "Too many open files"}).size(), warned)
		<< "the flapping accept never failed\n" << env.log();
	EXPECT_TRUE(ld.alive());
}

// How many of the loader's descriptors are /dev/null (the reserve
// descriptor is one; its standard streams may be others).
int devnull_fds(pid_t pid)
{
	std::string dir = "/proc/" + std::to_string(pid) + "/fd/";
	int n = 0;
	char to[64];
	for (const std::string &f : list_dir(dir)) {
		ssize_t len = readlink((dir + f).c_str(), to, sizeof to - 1);
		if (len > 0 && std::string(to, (size_t)len) == "/dev/null")
			n++;
	}
	return n;
}

// The reserve descriptor lost: given up for a connection at the limit, then
// not opened again (the shim's nullerr, as when another thread of the loader
// takes the slot it gave up). Once descriptors are free the loader takes it
// back before its next accept (seen in /proc/PID/fd), so a later shortage
// is answered again ("out of file descriptors"), not left in the backlog.
TEST(Fault, ReserveDescriptorComesBack)
{
	Env env;
	Fault fault(env);
	Loader ld(env);
	std::string skip;
	if (!start_with_shim(ld, fault, &skip)) {
		if (!skip.empty())
			GTEST_SKIP() << skip;
		FAIL() << env.log();
	}
	std::string root = env.root();
	ASSERT_TRUE(request(root, {"ping"}, 30000).ok());
	const int held = devnull_fds(ld.pid());
	ASSERT_GE(held, 1) << "no reserve descriptor in /proc/PID/fd";

	// 1. at the limit with the reserve's re-open failing: the first shortage
	// loses it, whether it met a waiting ping (refused) or an empty backlog
	// (the next ping then waits: nothing to refuse it with)
	fault.set("nullerr", EMFILE, "-");
	(void)refusal_at_limit(ld.pid(), root, 2000);
	EXPECT_TRUE(wait_until([&] { return devnull_fds(ld.pid()) == held - 1; }, 30000, 20))
		<< "the reserve was not given up: " << devnull_fds(ld.pid()) << " of " << held
		<< " /dev/null descriptors\n" << env.log();

	// 2. the fault over, descriptors free: served as usual, and the reserve
	// is taken back
	fault.clear();
	for (int i = 0; i < 3; i++)
		ASSERT_TRUE(request(root, {"ping"}, 30000).ok());
	EXPECT_TRUE(wait_until([&] { return devnull_fds(ld.pid()) == held; }, 30000, 20))
		<< "the reserve descriptor was not taken back\n" << env.log();

	// 3. the next shortage is refused through it
	EXPECT_FALSE(refusal_at_limit(ld.pid(), root).empty())
		<< "no refusal through the reserve after it came back\n" << env.log();
	EXPECT_TRUE(ld.alive());
	EXPECT_EQ(ld.stop(), 0);
}

} // namespace
