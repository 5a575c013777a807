// hugepage_test: segments on hugetlbfs, and what happens when huge pages
// are short.
//
// The suite reserves 16 more 2 MiB pages itself (root: nr_hugepages of the
// 2048kB pool), and mounts its own hugetlbfs (pagesize=2M, size=32M, so 16
// pages at most whatever else the host reserved) in a private mount
// namespace when it can (else in a temp dir); the loader, started from here,
// sees that mount and is pointed at it with [loader] hugetlb_dir. Pages and
// mount are given back at the end, also when a test fails or the binary is
// killed by a signal. Skips only without hugetlbfs or the 2 MiB pool in the
// kernel, or when not root.
//
//   Auto: memory=auto puts an image that fits on huge pages (status
//     hugepages: true, memory hugetlb-2M, readers' mapping has 2 MiB kernel
//     pages); one that does not fit falls back to shm (logged as fallback,
//     `note` in the reply, memory_note in status); the next small one goes
//     back to huge pages.
//   StrictRefuses: memory=hugetlb refuses the image that does not fit
//     (ENOMEM, "not enough huge pages", last_error) and the current
//     generation keeps serving, untouched.
//   StrictDropsRollback: when dropping the rollback segment makes room, it
//     is dropped (logged) and the load succeeds.
//   BoundToNodeZero: numa=node=0 on huge pages, which the load's own read
//     faults in (loader/place.c): every page on node 0, none absent,
//     published pinned, every value right; with the pread engine and the
//     fault shim (fault_util.h) making the source's read fail with EFAULT
//     halfway, the error is the source's (EFAULT, "Bad address", the
//     offset), not "huge pages on node 0", and the first generation keeps
//     serving; nothing is left on the hugetlbfs.
#include <sched.h>
#include <sys/mount.h>

#include <fstream>

#include "fault_util.h"

using namespace loader_test;

namespace {

constexpr uint64_t kPage = 2u << 20;
constexpr int kPages = 16;
constexpr size_t kPad = 200;

const char kPool[] = "/sys/kernel/mm/hugepages/hugepages-2048kB";

// Restored by the suite's teardown, atexit, or a fatal signal.
char g_nr_path[128];
char g_nr_old[32];
bool g_reserved;

void restore_pool_raw()
{
	if (!g_reserved)
		return;
	int fd = open(g_nr_path, O_WRONLY);
	if (fd >= 0) {
		ssize_t w = write(fd, g_nr_old, strlen(g_nr_old));
		(void)w;
		close(fd);
	}
	g_reserved = false;
}

void on_fatal(int sig)
{
	restore_pool_raw(); // open/write/close: async-signal-safe
	signal(sig, SIG_DFL);
	raise(sig);
}

long read_long(const std::string &path)
{
	std::string s = read_file(path);
	return s.empty() ? -1 : strtol(s.c_str(), nullptr, 10);
}

bool write_str(const std::string &path, const std::string &v)
{
	int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool ok = write(fd, v.data(), v.size()) == (ssize_t)v.size();
	return close(fd) == 0 && ok;
}

// Kernel page size of the mapping of path in this process (/proc/self/smaps), 0 if none.
uint64_t kernel_page_size_of(const std::string &path)
{
	std::ifstream f("/proc/self/smaps");
	std::string line;
	bool in = false;
	while (std::getline(f, line)) {
		if (!line.empty() && isxdigit((unsigned char)line[0]) && line.find('-') < 16) {
			in = line.size() >= path.size() &&
			     line.compare(line.size() - path.size(), path.size(), path) == 0;
			continue;
		}
		if (in && line.rfind("KernelPageSize:", 0) == 0)
			return strtoull(line.c_str() + 15, nullptr, 10) * 1024;
	}
	return 0;
}

class Hugepage : public ::testing::Test {
protected:
	static std::string *dir_, *mnt_, *skip_, *setup_err_;
	static bool mounted_, own_ns_;
	static std::string *small_, *medium_, *big_;

	static void SetUpTestSuite()
	{
		dir_ = new std::string;
		mnt_ = new std::string;
		skip_ = new std::string;
		setup_err_ = new std::string;
		small_ = new std::string;
		medium_ = new std::string;
		big_ = new std::string;
		if (read_file("/proc/filesystems").find("hugetlbfs") == std::string::npos) {
			*skip_ = "the kernel has no hugetlbfs";
			return;
		}
		snprintf(g_nr_path, sizeof g_nr_path, "%s/nr_hugepages", kPool);
		if (!file_exists(g_nr_path)) {
			*skip_ = std::string("the kernel has no 2 MiB huge page pool (") + kPool + ")";
			return;
		}
		if (geteuid() != 0) {
			*skip_ = "reserving huge pages and mounting hugetlbfs needs root";
			return;
		}
		const char *t = getenv("TMPDIR");
		*dir_ = make_temp_dir(t && *t ? t : "/tmp", "shmkv-lhuge");
		chmod(dir_->c_str(), 0755);
		*mnt_ = *dir_ + "/mnt";
		mkdir(mnt_->c_str(), 0755);

		// a private mount namespace: the mount vanishes with this process
		own_ns_ = unshare(CLONE_NEWNS) == 0 &&
			  mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0;
		if (!own_ns_)
			printf("no private mount namespace (%s): mounting in %s\n", strerror(errno),
			       mnt_->c_str());

		long old = read_long(g_nr_path);
		if (old < 0) {
			*setup_err_ = std::string("cannot read ") + g_nr_path;
			return;
		}
		snprintf(g_nr_old, sizeof g_nr_old, "%ld", old);
		g_reserved = true;
		atexit(restore_pool_raw);
		for (int s : {SIGSEGV, SIGABRT, SIGBUS, SIGTERM, SIGINT, SIGFPE})
			signal(s, on_fatal);
		std::string want = std::to_string(old + kPages);
		long got = -1;
		for (int tries = 0; tries < 3; tries++) {
			write_str(g_nr_path, want);
			got = read_long(g_nr_path);
			if (got >= old + kPages)
				break;
			// fragmented memory: free what can be freed and compact, then retry
			write_str("/proc/sys/vm/drop_caches", "3");
			write_str("/proc/sys/vm/compact_memory", "1");
		}
		if (got < old + kPages) {
			*setup_err_ = "could not reserve " + std::to_string(kPages) +
				      " huge pages: nr_hugepages is " + std::to_string(got) +
				      " after asking for " + want;
			return;
		}
		if (mount("shmkv-test", mnt_->c_str(), "hugetlbfs", 0, "pagesize=2M,size=32M,mode=0755")) {
			*setup_err_ = "mount hugetlbfs on " + *mnt_ + ": " + strerror(errno);
			return;
		}
		mounted_ = true;
		// qemu-user maps guest memory with its own 4 KiB rules and cannot map
		// a hugetlbfs file: the loader would fall back to shm every time
		if (!shmkv_test::emulator().empty()) {
			std::string probe = *mnt_ + "/probe";
			int fd = open(probe.c_str(), O_RDWR | O_CREAT, 0600);
			void *m = MAP_FAILED;
			if (fd >= 0 && ftruncate(fd, (off_t)kPage) == 0)
				m = mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			int e = errno;
			if (fd >= 0)
				close(fd);
			unlink(probe.c_str());
			if (m == MAP_FAILED) {
				*skip_ = shmkv_test::emulator() + " cannot map a hugetlbfs file (mmap: " +
					 strerror(e) + ")";
				return;
			}
			munmap(m, kPage);
		}

		// images: small 2 pages, medium 6-7 pages (3 do not fit, 2 do), big 20 pages
		struct Img {
			std::string *path;
			const char *tag;
			uint64_t keys;
		} imgs[] = {{small_, "small", 12000}, {medium_, "medium", 48000}, {big_, "big", 160000}};
		for (Img &im : imgs) {
			*im.path = *dir_ + "/" + im.tag + ".shmkv";
			std::string e = build_image(*im.path, im.tag, im.keys, kPad);
			if (!e.empty()) {
				*setup_err_ = e;
				return;
			}
		}
	}

	static void TearDownTestSuite()
	{
		if (mounted_) {
			std::error_code ec;
			for (const std::string &n : list_dir(*mnt_))
				std::filesystem::remove_all(*mnt_ + "/" + n, ec);
			if (umount2(mnt_->c_str(), 0) != 0)
				umount2(mnt_->c_str(), MNT_DETACH);
			mounted_ = false;
		}
		restore_pool_raw();
		if (!dir_->empty()) {
			std::error_code ec;
			std::filesystem::remove_all(*dir_, ec);
		}
	}

	void SetUp() override
	{
		if (!skip_->empty())
			GTEST_SKIP() << *skip_;
		ASSERT_EQ(*setup_err_, "");
		pages_of(*small_, 1, 4);
		pages_of(*medium_, 6, 8);
		pages_of(*big_, kPages + 1, 64);
		env_ = std::make_unique<Env>();
		std::string conf = env_->base() + "/loader.conf";
		ASSERT_TRUE(shmkv_test::write_file(conf, "[loader]\n"
							 "hugetlb_dir = " + *mnt_ + "\n"
							 "memory = shm\n"
							 "[cache hauto]\n"
							 "memory = auto\n"
							 "[cache hstrict]\n"
							 "memory = hugetlb\n"));
		ld_ = std::make_unique<Loader>(*env_, std::vector<std::string>{"--config", conf});
		ASSERT_TRUE(ld_->start());
	}

	void TearDown() override
	{
		if (ld_) {
			EXPECT_EQ(ld_->stop(), 0);
		}
		ld_.reset();
		env_.reset();
		if (mounted_) {
			std::error_code ec;
			for (const std::string &n : list_dir(*mnt_))
				std::filesystem::remove_all(*mnt_ + "/" + n, ec);
		}
	}

	static void pages_of(const std::string &path, uint64_t lo, uint64_t hi)
	{
		struct stat st;
		ASSERT_EQ(stat(path.c_str(), &st), 0) << path;
		uint64_t p = ((uint64_t)st.st_size + kPage - 1) / kPage;
		ASSERT_GE(p, lo) << path << ": " << st.st_size << " bytes";
		ASSERT_LE(p, hi) << path << ": " << st.st_size << " bytes";
	}

	std::vector<std::string> mount_files() const { return list_dir(*mnt_ + "/shmkv"); }

	shmkv *attach_ok(const std::string &cache)
	{
		int err;
		std::string why;
		shmkv *db = attach(env_->root(), cache, 0, &err, &why);
		EXPECT_NE(db, nullptr) << why;
		return db;
	}

	std::unique_ptr<Env> env_;
	std::unique_ptr<Loader> ld_;
};
std::string *Hugepage::dir_, *Hugepage::mnt_, *Hugepage::skip_, *Hugepage::setup_err_;
std::string *Hugepage::small_, *Hugepage::medium_, *Hugepage::big_;
bool Hugepage::mounted_, Hugepage::own_ns_;

TEST_F(Hugepage, Auto)
{
	Json j = ld_->load("hauto", *small_);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["memory"].s(), "hugetlb-2M");
	EXPECT_FALSE(j.has("note"));
	j = ld_->status("hauto");
	EXPECT_EQ(j["policy"].s(), "auto");
	EXPECT_TRUE(j["hugepages"].truthy());
	EXPECT_EQ(j["memory"].s(), "hugetlb-2M");
	EXPECT_EQ(j["page_size"].u64(), kPage);
	EXPECT_EQ(j["map_size"].u64() % kPage, 0u);
	EXPECT_TRUE(j["memory_note"].is_null());
	std::string seg = j["segment"].s();
	EXPECT_EQ(seg.rfind(*mnt_ + "/", 0), 0u) << seg;
	EXPECT_EQ(mount_files().size(), 1u);

	shmkv_test::Db db(attach_ok("hauto"));
	ASSERT_TRUE(db);
	EXPECT_EQ(tag_of(db), "small");
	EXPECT_EQ(check_handle(db, "small", 12000, 3), 0u);
	EXPECT_EQ(kernel_page_size_of(seg), kPage) << "the reader's mapping is on 2 MiB pages";

	// does not fit: shm, with the reason logged and shown
	j = ld_->load("hauto", *big_);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["memory"].s(), "shm");
	EXPECT_TRUE(contains_ci(j["note"].s(), "not enough huge pages")) << j["note"].s();
	j = ld_->status("hauto");
	EXPECT_FALSE(j["hugepages"].truthy());
	EXPECT_EQ(j["memory"].s(), "shm");
	EXPECT_TRUE(contains_ci(j["memory_note"].s(), "fell back to shm")) << j["memory_note"].s();
	EXPECT_TRUE(contains_ci(j["memory_note"].s(), *mnt_)) << j["memory_note"].s();
	EXPECT_EQ(j["rollback.generation"].u64(), 1u) << "the hugetlb rollback is kept";
	std::vector<std::string> fb = log_lines(env_->log(), {"fallback cache=hauto memory=shm"});
	ASSERT_EQ(fb.size(), 1u) << env_->log();
	EXPECT_TRUE(contains_ci(fb[0], "not enough huge pages")) << fb[0];
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_EQ(tag_of(db), "big");
	EXPECT_EQ(check_handle(db, "big", 160000, 101), 0u);
	EXPECT_EQ(kernel_page_size_of(j["segment"].s()), (uint64_t)sysconf(_SC_PAGESIZE));

	// the next image that fits goes back to huge pages
	j = ld_->load("hauto", *small_);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["memory"].s(), "hugetlb-2M");
	j = ld_->status("hauto");
	EXPECT_TRUE(j["hugepages"].truthy());
	EXPECT_TRUE(j["memory_note"].is_null()) << j["memory_note"].s();
	EXPECT_TRUE(j["last_error"].is_null());
}

TEST_F(Hugepage, StrictRefuses)
{
	Json j = ld_->load("hstrict", *small_);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["memory"].s(), "hugetlb-2M");
	shmkv_test::Db db(attach_ok("hstrict"));
	ASSERT_TRUE(db);
	CtlView before;
	ASSERT_TRUE(read_ctl(env_->root(), "hstrict", &before));

	j = ld_->load("hstrict", *big_);
	EXPECT_FALSE(j.ok());
	EXPECT_EQ(j["code"].s(), "ENOMEM") << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), "not enough huge pages")) << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), "current generation keeps serving")) << j["error"].s();
	j = ld_->status("hstrict");
	EXPECT_EQ(j["policy"].s(), "hugetlb");
	EXPECT_TRUE(contains_ci(j["last_error"].s(), "not enough huge pages")) << j["last_error"].s();
	EXPECT_EQ(j["generation"].u64(), 1u);
	EXPECT_TRUE(j["hugepages"].truthy());
	EXPECT_EQ(log_lines(env_->log(), {"rejected cache=hstrict", "huge pages"}).size(), 1u)
		<< env_->log();
	EXPECT_TRUE(log_lines(env_->log(), {"fallback"}).empty()) << "hugetlb never falls back";
	CtlView now;
	ASSERT_TRUE(read_ctl(env_->root(), "hstrict", &now));
	EXPECT_EQ(now.generation, 1u);
	EXPECT_EQ(now.path(), before.path());
	EXPECT_EQ(now.published_ns, before.published_ns);
	EXPECT_EQ(shmkv_refresh(db), 0);
	EXPECT_EQ(check_handle(db, "small", 12000, 1), 0u);
	EXPECT_EQ(mount_files().size(), 1u) << "no partial segment left on the mount";
	EXPECT_TRUE(env_->shm_files().empty()) << "hugetlb never falls back to shm";

	// the same through the spool
	ASSERT_EQ(spool_drop(*env_, *big_, "hstrict", true), "");
	EXPECT_TRUE(wait_until([&] { return file_exists(env_->spool_path("hstrict") + ".rejected"); },
			       20000));
	EXPECT_EQ(shmkv_refresh(db), 0);
	EXPECT_EQ(shmkv_generation(db), 1u);
}

TEST_F(Hugepage, StrictDropsRollback)
{
	// 2 x medium fit in 16 pages, 3 do not: the third load drops the rollback
	Json j = ld_->load("hstrict", *medium_);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	std::string seg1 = j["segment"].s();
	j = ld_->load("hstrict", *medium_);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["generation"].u64(), 2u);
	j = ld_->load("hstrict", *medium_);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["generation"].u64(), 3u);
	EXPECT_EQ(j["memory"].s(), "hugetlb-2M");
	std::vector<std::string> dl = log_lines(env_->log(), {"dropped rollback cache=hstrict gen=1"});
	EXPECT_EQ(dl.size(), 1u) << env_->log();
	EXPECT_FALSE(file_exists(seg1));
	j = ld_->status("hstrict");
	EXPECT_EQ(j["rollback.generation"].u64(), 2u);
	EXPECT_TRUE(j["last_error"].is_null()) << j["last_error"].s();
	EXPECT_EQ(mount_files().size(), 2u);
	shmkv_test::Db db(attach_ok("hstrict"));
	ASSERT_TRUE(db);
	EXPECT_EQ(check_handle(db, "medium", 48000, 7), 0u);
}

} // namespace

TEST_F(Hugepage, BoundToNodeZero)
{
	ld_->stop();
	ld_.reset();
	std::string conf = env_->base() + "/numa.conf";
	ASSERT_TRUE(shmkv_test::write_file(conf, "[loader]\n"
						 "hugetlb_dir = " + *mnt_ + "\n"
						 "[cache hnuma]\n"
						 "memory = hugetlb\n"
						 "numa = node=0\n"));
	Fault fault(*env_);
	ld_ = std::make_unique<Loader>(*env_, std::vector<std::string>{"--config", conf, "--io",
									"pread"});
	std::string skip;
	if (!start_with_shim(*ld_, fault, &skip)) {
		ld_.reset();
		if (!skip.empty())
			GTEST_SKIP() << skip;
		FAIL() << "loader did not start";
	}
	Json j = ld_->load("hnuma", *small_);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["memory"].s(), "hugetlb-2M");
	Json st = ld_->status("hnuma");
	EXPECT_EQ(st["numa.policy"].s(), "node=0");
	const Json &copies = st["numa.copies"];
	ASSERT_EQ(copies.arr.size(), 1u);
	EXPECT_TRUE(copies.arr[0]["placement_ok"].truthy()) << st["numa.note"].s();
	uint64_t pages = st["map_size"].u64() / kPage;
	EXPECT_GE(pages, 1u);
	EXPECT_EQ(copies.arr[0]["pages_per_node.0"].u64(), pages);
	EXPECT_EQ(copies.arr[0]["pages_absent"].u64(), 0u);
	{
		shmkv_test::Db db(attach_ok("hnuma"));
		ASSERT_TRUE(db);
		EXPECT_EQ(shmkv_node(db), 0);
		EXPECT_EQ(check_handle(db, "small", 12000, 3), 0u);
	}

	// the source fails with EFAULT halfway: its error, not a short node
	struct stat ms;
	ASSERT_EQ(stat(medium_->c_str(), &ms), 0);
	fault.set("efault", (long long)ms.st_size / 2, *medium_);
	j = ld_->load("hnuma", *medium_);
	fault.clear();
	EXPECT_FALSE(j.ok());
	EXPECT_EQ(j["code"].s(), "EFAULT") << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), "Bad address")) << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), "offset")) << j["error"].s();
	EXPECT_FALSE(contains_ci(j["error"].s(), "huge pages on node")) << j["error"].s();
	EXPECT_EQ(mount_files().size(), 1u) << "only the serving generation's segment";
	{
		shmkv_test::Db db(attach_ok("hnuma"));
		ASSERT_TRUE(db);
		EXPECT_EQ(tag_of(db), "small");
		EXPECT_EQ(check_handle(db, "small", 12000, 3), 0u);
	}

	// and the next good load is bound and verified again
	j = ld_->load("hnuma", *medium_);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	st = ld_->status("hnuma");
	EXPECT_TRUE(st["numa.copies"].arr.size() == 1 &&
		    st["numa.copies"].arr[0]["placement_ok"].truthy())
		<< st["numa.note"].s();
	EXPECT_EQ(st["numa.copies"].arr[0]["pages_per_node.0"].u64(), st["map_size"].u64() / kPage);
}
