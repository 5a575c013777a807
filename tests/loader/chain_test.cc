// chain_test: directories the loader does not own, and readers that never go
// stale (the shm, root and spool directories, segment ownership, a
// truncated control segment, and the spool's directory entries).
// Another local user (uid 4242, setresuid in a forked child: no account
// needed) plays the attacker; everything runs as root (CI does), else the
// tests that need a second uid skip and say why.
//
//   AttackerOwnedShmDir: a --shm-dir the other user owns stops startup
//     ("owned by uid 4242"); nothing is created in it.
//   SwappedSegmentDirectory: the shm dir changes hands after startup and its
//     owner swaps the loader's shmkv/ for one of its own, holding a forged
//     image under the published segment name: a reader (root) refuses to map
//     it (owner is not the control segment file's uid) and never serves
//     the forged values; the next load is refused with the chain's reason.
//   RootThroughSymlink: --root through a symlink in a directory the other
//     user owns is refused before anything is touched in the target (a
//     root-owned .x.tmp there stays, no lock, no socket); a symlink in a
//     directory of root's is followed.
//   FreshRootIsNotWorldReadable: a root the loader makes itself (a loader
//     started by hand as root) is 0750, like systemd's RuntimeDirectoryMode:
//     another user cannot open ROOT/NAME.ctl.
//   SpoolOwnedByOther: an attacker-owned 0755 spool stops startup.
//   SpoolRecreated: the spool (in a sticky, world-writable parent, like /tmp)
//     is removed; the other user makes a directory at its path and renames an
//     image into it: refused ("is back but refused"), nothing loads; a 1777
//     one is refused too; a root 0755 one is watched and loads.
//   DirectoryRenamedIntoSpool: a directory renamed in as NAME.shmkv is
//     rejected (renamed .rejected, logged), as loader/README.md says.
//   TruncatedCtl: `truncate -s 0 ROOT/NAME.ctl`: a reader's refresh returns
//     SHMKV_ESTALE (no SIGBUS), the loader's next load makes a new control
//     segment (logged) and survives; a new attach reads the new generation.
//   DropAndReload: a reader across `drop` and a new load gets SHMKV_ESTALE
//     at its next refresh, never the dropped generation unaware; attaching
//     again reads the new one.
//   RemovedCtl: ROOT/NAME.ctl removed by hand: refresh says SHMKV_ESTALE;
//     the next load makes a new one and readers attach to it.
#include <sys/stat.h>

#include <filesystem>

#include "uid_util.h"

using namespace loader_test;

namespace {

#define NEED_ROOT() NEED_ROOT_FOR("to act as a second uid (setresuid)")

// A directory of the other user's, mode 0755.
void other_dir(const std::string &d)
{
	ASSERT_EQ(mkdir(d.c_str(), 0755), 0) << d << ": " << strerror(errno);
	ASSERT_EQ(chown(d.c_str(), kOther, kOther), 0) << d;
}

bool wait_log(const Env &env, const std::vector<std::string> &words, unsigned ms = 30000)
{
	return wait_until([&] { return !log_lines(env.log(), words).empty(); }, ms, 20);
}

TEST(Chain, AttackerOwnedShmDir)
{
	NEED_ROOT();
	Env env;
	std::string att = env.base() + "/att";
	other_dir(att);
	Loader ld(env, {"--memory", "shm", "--shm-dir", att});
	EXPECT_EQ(ld.start_expect_exit(), 1) << env.log();
	EXPECT_EQ(log_lines(env.log(), {"shm_dir", "owned by uid 4242", "not trusted"}).size(), 1u)
		<< env.log();
	EXPECT_TRUE(list_dir(att).empty()) << "nothing made in the other user's directory";
}

TEST(Chain, SwappedSegmentDirectory)
{
	NEED_ROOT();
	Env env;
	std::string shm = env.base() + "/shm";
	ASSERT_EQ(mkdir(shm.c_str(), 0755), 0);
	Loader ld(env, {"--memory", "shm", "--shm-dir", shm});
	ASSERT_TRUE(ld.start());
	std::string img = env.img_path("a.shmkv"), forged = env.img_path("forged.shmkv");
	ASSERT_EQ(build_image(img, "good", 300), "");
	ASSERT_EQ(build_image(forged, "evil", 300), "");
	ASSERT_EQ(chmod(forged.c_str(), 0644), 0);
	Json j = ld.load("c", img);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	std::string seg = j["segment"].s();
	ASSERT_EQ(seg.rfind(shm + "/shmkv/", 0), 0u) << seg;

	// the parent changes hands (a misconfiguration); its owner swaps shmkv/
	ASSERT_EQ(chown(shm.c_str(), kOther, kOther), 0);
	std::string out = as_other({}, [&](int fd) {
		std::string d = shm + "/shmkv";
		if (rename(d.c_str(), (shm + "/old").c_str()) != 0)
			return say(fd, "rename shmkv: " + std::string(strerror(errno)));
		if (mkdir(d.c_str(), 0755) != 0)
			return say(fd, "mkdir: " + std::string(strerror(errno)));
		std::string data = read_file(forged);
		int f = open(seg.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (f < 0 || data.empty() || !write_all_fd(f, data.data(), data.size()))
			say(fd, "forge " + seg + ": " + strerror(errno));
		if (f >= 0)
			close(f);
	});
	ASSERT_EQ(out, "");

	// a reader (root) is offered the forged file under the published name
	int err = 0;
	std::string why;
	shmkv *db = attach(env.root(), "c", 0, &err, &why);
	if (db)
		ADD_FAILURE() << "attached to a segment of uid 4242, serving tag " << tag_of(db);
	shmkv_close(db);
	EXPECT_EQ(err, -EPERM) << why;
	EXPECT_TRUE(contains_ci(why, "owned by uid 4242")) << why;

	// the loader checks the chain again at the next load
	j = ld.load("c", img);
	EXPECT_FALSE(j.ok());
	EXPECT_TRUE(contains_ci(j["error"].s(), "owned by uid 4242")) << j["error"].s();
	EXPECT_TRUE(ld.alive());
}

TEST(Chain, RootThroughSymlink)
{
	NEED_ROOT();
	Env env;
	std::string att = env.base() + "/att", victim = env.root() + "/.victim.tmp";
	other_dir(att);
	ASSERT_TRUE(shmkv_test::write_file(victim, "root's file\n"));
	std::string out = as_other({}, [&](int fd) {
		if (symlink(env.root().c_str(), (att + "/r").c_str()) != 0)
			say(fd, std::string("symlink: ") + strerror(errno));
	});
	ASSERT_EQ(out, "");
	{
		Loader ld(env, {"--memory", "shm", "--root", att + "/r"});
		EXPECT_EQ(ld.start_expect_exit(), 1) << env.log();
	}
	EXPECT_EQ(log_lines(env.log(), {"root", "owned by uid 4242", "not trusted"}).size(), 1u)
		<< env.log();
	EXPECT_TRUE(file_exists(victim)) << "a file in the target was removed";
	EXPECT_FALSE(file_exists(env.root() + "/loader.lock"));
	EXPECT_FALSE(file_exists(env.root() + "/control.sock"));

	// a link in a directory only root can write is followed
	std::string lnk = env.base() + "/lnk";
	ASSERT_EQ(symlink(env.root().c_str(), lnk.c_str()), 0);
	Loader ok(env, {"--memory", "shm", "--root", lnk});
	ASSERT_TRUE(ok.start());
	EXPECT_FALSE(file_exists(victim)) << "its own leftover in its own root is removed";
}

TEST(Chain, FreshRootIsNotWorldReadable)
{
	NEED_ROOT();
	Env env;
	ASSERT_EQ(rmdir(env.root().c_str()), 0); // the loader makes it, as by hand
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	ASSERT_TRUE(build_and_load(ld, env, "c", "a", 50).ok());
	struct stat st;
	ASSERT_EQ(stat(env.root().c_str(), &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0750u) << "as systemd's RuntimeDirectoryMode=0750";
	EXPECT_EQ(st.st_uid, geteuid());
	std::string ctl = env.root() + "/c.ctl";
	std::string out = as_other({}, [&](int fd) {
		int f = open(ctl.c_str(), O_RDONLY);
		if (f >= 0 || errno != EACCES)
			say(fd, "uid 4242 opened " + ctl + " (or not EACCES: " + strerror(errno) + ")");
		if (f >= 0)
			close(f);
	});
	EXPECT_EQ(out, "");
}

TEST(Chain, SpoolOwnedByOther)
{
	NEED_ROOT();
	Env env;
	std::string sp = env.base() + "/ospool";
	other_dir(sp);
	Loader ld(env, {"--memory", "shm", "--spool", sp});
	EXPECT_EQ(ld.start_expect_exit(), 1) << env.log();
	EXPECT_EQ(log_lines(env.log(), {"spool", "owned by uid 4242"}).size(), 1u) << env.log();
}

TEST(Chain, SpoolRecreated)
{
	NEED_ROOT();
	Env env;
	// like /tmp: anyone may make a name in the spool's parent
	ASSERT_EQ(chmod(env.base().c_str(), 01777), 0);
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	std::string img = env.img_path("a.shmkv");
	ASSERT_EQ(build_image(img, "evil", 100), "");
	ASSERT_EQ(chmod(img.c_str(), 0644), 0);

	ASSERT_EQ(rmdir(env.spool().c_str()), 0);
	ASSERT_TRUE(wait_log(env, {"spool", "was deleted"}));
	std::string out = as_other({}, [&](int fd) {
		std::string tmp = env.spool() + "/.c.tmp";
		if (mkdir(env.spool().c_str(), 0755) != 0)
			return say(fd, std::string("mkdir spool: ") + strerror(errno));
		std::string data = read_file(img);
		int f = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (f < 0 || !write_all_fd(f, data.data(), data.size()))
			say(fd, std::string("write: ") + strerror(errno));
		if (f >= 0)
			close(f);
		if (rename(tmp.c_str(), env.spool_path("c").c_str()) != 0)
			say(fd, std::string("rename: ") + strerror(errno));
	});
	ASSERT_EQ(out, "");
	EXPECT_TRUE(wait_log(env, {"spool", "is back but refused", "owned by uid 4242",
				   "not trusted"}))
		<< env.log();
	sleep_ms(1500); // a retry (every second) must not accept it either
	Json j = ld.req({"list"});
	EXPECT_TRUE(log_lines(env.log(), {"is back: watching it again"}).empty()) << env.log();
	EXPECT_TRUE(log_lines(env.log(), {"spooled cache=c"}).empty()) << env.log();
	EXPECT_TRUE(file_exists(env.spool_path("c"))) << "left alone";
	EXPECT_FALSE(j["spool.watching"].b);
	EXPECT_TRUE(contains_ci(j["spool.error"].str, "not trusted")) << j["spool.error"].str;

	// a 1777 one of root's (made elsewhere, renamed in whole): refused as well
	std::filesystem::remove_all(env.spool());
	std::string wide = env.img() + "/wide";
	ASSERT_EQ(mkdir(wide.c_str(), 0700), 0);
	ASSERT_EQ(chmod(wide.c_str(), 01777), 0);
	ASSERT_EQ(rename(wide.c_str(), env.spool().c_str()), 0);
	EXPECT_TRUE(wait_log(env, {"spool", "is back but refused", "writable by group or others"}))
		<< env.log();

	sleep_ms(1500); // nor by a retry
	EXPECT_TRUE(log_lines(env.log(), {"is back: watching it again"}).empty()) << env.log();

	// a trusted one: watched, and it loads
	ASSERT_EQ(rmdir(env.spool().c_str()), 0);
	ASSERT_EQ(mkdir(env.spool().c_str(), 0755), 0);
	ASSERT_TRUE(wait_log(env, {"is back: watching it again"})) << env.log();
	std::string good = env.img_path("g.shmkv");
	ASSERT_EQ(build_image(good, "good", 100), "");
	ASSERT_EQ(spool_drop(env, good, "g"), "");
	ASSERT_TRUE(wait_until([&] { return ld.status("g")["generation"].u64() == 1; }, 60000, 20))
		<< env.log();
}

TEST(Chain, DirectoryRenamedIntoSpool)
{
	Env env;
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	std::string d = env.img_path("d.shmkv");
	ASSERT_EQ(mkdir(d.c_str(), 0755), 0);
	ASSERT_EQ(rename(d.c_str(), env.spool_path("d").c_str()), 0);
	EXPECT_TRUE(wait_until([&] { return file_exists(env.spool_path("d") + ".rejected"); }, 30000,
			       20))
		<< env.log();
	EXPECT_GE(log_lines(env.log(), {"rejected cache=d", "not a regular file"}).size(), 1u)
		<< env.log();
}

// Refresh in a child: a SIGBUS there is an exit code, not the test's death.
// Returns "rc=<refresh's return>" or what killed it.
std::string refresh_in_child(shmkv *db)
{
	Child c([&](int fd) -> int {
		int r = shmkv_refresh(db);
		say(fd, "rc=" + std::to_string(r));
		return 0;
	});
	std::string out = c.read_all(30000);
	int code = c.wait_exit(30000);
	if (code != 0)
		return "child exit " + std::to_string(code) + (code == 128 + SIGBUS ? " (SIGBUS)" : "");
	return out.substr(0, out.find('\n'));
}

// A loader serving cache c from image a (tag A, 200 keys), image b (tag B)
// built for the next load, and db, a reader attached to A (closed at the end).
class Stale : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_TRUE(ld.start());
		ASSERT_EQ(build_image(a, "A", 200), "");
		ASSERT_EQ(build_image(b, "B", 200), "");
		ASSERT_TRUE(ld.load("c", a).ok());
		db = attach(env.root(), "c", 0, &err, &why);
		ASSERT_NE(db, nullptr) << why;
	}
	void TearDown() override { shmkv_close(db); }

	Env env;
	Loader ld{env};
	std::string a = env.img_path("a.shmkv"), b = env.img_path("b.shmkv");
	int err = 0;
	std::string why;
	shmkv *db = nullptr;
};

TEST_F(Stale, TruncatedCtl)
{
	std::string ctl = env.root() + "/c.ctl";
	ASSERT_EQ(truncate(ctl.c_str(), 0), 0);

	EXPECT_EQ(refresh_in_child(db), "rc=" + std::to_string(SHMKV_ESTALE));
	EXPECT_EQ(tag_of(db), "A") << "the old generation keeps serving";

	Json j = ld.load("c", b);
	EXPECT_TRUE(j.ok()) << j["error"].s();
	EXPECT_TRUE(ld.alive()) << "the loader died at the publish";
	EXPECT_EQ(log_lines(env.log(), {"cache=c", "control segment", "truncated", "new one"}).size(),
		  1u) << env.log();
	struct stat st;
	ASSERT_EQ(stat(ctl.c_str(), &st), 0);
	EXPECT_EQ((uint64_t)st.st_size, SHMKV_CTL_SIZE);
	EXPECT_EQ(refresh_in_child(db), "rc=" + std::to_string(SHMKV_ESTALE));
	shmkv_close(db);
	db = attach(env.root(), "c", 0, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	EXPECT_EQ(tag_of(db), "B");
	EXPECT_EQ(check_handle(db, "B", 200), 0u);
	shmkv_close(db);

	// a reader attaching to a truncated file is refused, never faults
	ASSERT_EQ(truncate(ctl.c_str(), 100), 0);
	db = attach(env.root(), "c", 0, &err, &why);
	EXPECT_EQ(db, nullptr);
	EXPECT_EQ(err, SHMKV_EPROTO) << why;
}

TEST_F(Stale, DropAndReload)
{
	EXPECT_EQ(shmkv_refresh(db), 0);
	ASSERT_TRUE(ld.req({"drop", "c"}).ok());
	EXPECT_EQ(shmkv_refresh(db), SHMKV_ESTALE) << "learns of the drop";
	ASSERT_TRUE(ld.load("c", b).ok());
	EXPECT_EQ(shmkv_refresh(db), SHMKV_ESTALE) << "never the dropped generation unaware";
	EXPECT_EQ(tag_of(db), "A");
	EXPECT_STRNE(shmkv_strerror(SHMKV_ESTALE), "unknown shmkv error");
	shmkv_close(db);
	db = attach(env.root(), "c", 0, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	EXPECT_EQ(tag_of(db), "B");
}

TEST_F(Stale, RemovedCtl)
{
	ASSERT_EQ(unlink((env.root() + "/c.ctl").c_str()), 0);
	EXPECT_EQ(shmkv_refresh(db), SHMKV_ESTALE);
	Json j = ld.load("c", b);
	EXPECT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(log_lines(env.log(), {"cache=c", "control segment", "removed", "new one"}).size(),
		  1u) << env.log();
	EXPECT_EQ(shmkv_refresh(db), SHMKV_ESTALE);
	shmkv_close(db);
	db = attach(env.root(), "c", 0, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	EXPECT_EQ(tag_of(db), "B");
}

} // namespace
