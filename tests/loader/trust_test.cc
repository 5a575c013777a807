// trust_test: segments belong to the loader alone (loader/README.md, "Trust"). Another
// local user (uid 4242, a numeric uid: no account needed; in the loader's
// group 4343 or not) tries what an attacker would; everything runs as root
// (CI does), else every test skips and says why.
//
//   SegmentDirectory: segments live in SHM/shmkv, a real directory of the
//     loader's uid, mode 0750, the [loader] group; files are regular, ours,
//     writable by nobody else.
//   SquattedDirectory: a SHM/shmkv made by another user (or writable by
//     others) is refused and logged; loads go to a private SHM/shmkv.XXXXXX,
//     which a restarted loader adopts and keeps using.
//   CannotBlockLoads: the other user pre-creates the next 40 segment names
//     (final and .loading) where segments used to live (SHM) and cannot
//     create any in SHM/shmkv; our own leftovers there (a lost state file)
//     are skipped: every load succeeds, the load id moves past them (logged).
//   CannotReadWithoutGroupNorWrite: outside the group it cannot open,
//     attach, rename or unlink a segment, nor write the control segment or
//     ROOT; in the group it attaches and reads every value, and still
//     cannot write, rename or unlink anything.
//   RepairRefusesForeignSegment: a crash left the control segment mid-publish
//     and its segment gone; the other user planted a valid image under the
//     next segment name: restart repair refuses it (logged, left alone),
//     publishes none, and what readers see cannot be rewritten by that user.
//   PeerCannotMutate: through a group-accessible control socket the other
//     user may ping, list and status; load, reload, rollback and drop are
//     refused (EPERM) and change nothing; outside the group it cannot connect.
//   UntrustedRootAndControlFiles: a root writable by others, or a spool
//     every user can write (anyone could publish), stops startup with a
//     clear error; a NAME.ctl owned by another user is not adopted (status
//     says why) and a load into that cache is refused.
//   UntrustedStateFile: ROOT/NAME.state replaced by a FIFO (the old loader's
//     fopen blocked its restart forever), a symlink, or a file of another
//     uid: ignored with a warning, the cache is adopted and loads on.
#include <grp.h>
#include <sys/stat.h>

#include "uid_util.h"

using namespace loader_test;

namespace {

#define NEED_ROOT() NEED_ROOT_FOR("to act as a second uid (setresuid)")

// "SHM/shmkv/shmkv-RRRRRRRR-" -> prefix "shmkv-RRRRRRRR-", cache, load id
struct SegName {
	std::string dir, prefix, cache;
	uint64_t load_id = 0;
};

SegName parse_seg(const std::string &path)
{
	SegName n;
	size_t slash = path.rfind('/');
	n.dir = path.substr(0, slash);
	std::string base = path.substr(slash + 1);
	n.prefix = base.substr(0, 15); // "shmkv-" + 8 hex + "-"
	size_t dash = base.rfind('-');
	n.cache = base.substr(15, dash - 15);
	n.load_id = strtoull(base.c_str() + dash + 1, nullptr, 10);
	return n;
}

std::string dir_of(const std::string &p)
{
	return p.substr(0, p.rfind('/'));
}

// Copies src to dst as the caller (O_EXCL), mode 0666.
bool copy_file(const std::string &src, const std::string &dst)
{
	std::string data = read_file(src);
	int fd = open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (fd < 0)
		return false;
	bool ok = write_all_fd(fd, data.data(), data.size()) && fchmod(fd, 0666) == 0;
	close(fd);
	return ok && !data.empty();
}

TEST(Trust, SegmentDirectory)
{
	NEED_ROOT();
	Env env;
	Loader ld(env, {"--memory", "shm", "--config", group_conf(env)});
	ASSERT_TRUE(ld.start());
	Json j = build_and_load(ld, env, "c", "a", 200);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	std::string seg = j["segment"].s();
	EXPECT_EQ(dir_of(seg), env.seg_dir()) << "segments live in SHM/shmkv";
	struct stat st;
	ASSERT_EQ(lstat(env.seg_dir().c_str(), &st), 0) << env.seg_dir();
	EXPECT_TRUE(S_ISDIR(st.st_mode));
	EXPECT_EQ(st.st_uid, geteuid());
	EXPECT_EQ(st.st_gid, kGroup) << "the [loader] group";
	EXPECT_EQ(st.st_mode & 07777, 0750u);
	ASSERT_EQ(lstat(seg.c_str(), &st), 0);
	EXPECT_TRUE(S_ISREG(st.st_mode));
	EXPECT_EQ(st.st_uid, geteuid());
	EXPECT_EQ(st.st_mode & 022, 0u) << "no group or other write";
	for (const std::string &n : list_dir(env.shm()))
		EXPECT_EQ(n, "shmkv") << "nothing but the segment directory in SHM";
}

TEST(Trust, SquattedDirectory)
{
	NEED_ROOT();
	Env env;
	std::string conf = group_conf(env);
	std::string squat = env.shm() + "/shmkv";
	as_other({}, [&](int fd) {
		if (mkdir(squat.c_str(), 0777) != 0 || chmod(squat.c_str(), 0777) != 0)
			say(fd, "mkdir " + squat + ": " + strerror(errno));
	});
	Loader ld(env, {"--memory", "shm", "--config", conf});
	ASSERT_TRUE(ld.start());
	std::string img = env.img_path("a.shmkv");
	ASSERT_EQ(build_image(img, "a", 200), "");
	Json j = ld.load("c", img);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	std::string seg = j["segment"].s();
	std::string dir = dir_of(seg);
	EXPECT_EQ(dir.rfind(env.shm() + "/shmkv.", 0), 0u) << seg;
	EXPECT_EQ(dir.size(), env.shm().size() + 13) << seg;
	struct stat st;
	ASSERT_EQ(lstat(dir.c_str(), &st), 0);
	EXPECT_EQ(st.st_uid, geteuid());
	EXPECT_EQ(st.st_mode & 07777, 0750u);
	EXPECT_TRUE(list_dir(squat).empty()) << "nothing written into the squatted directory";
	EXPECT_GE(log_lines(env.log(), {"segment directory refused", "owned by uid 4242"}).size(),
		  1u) << env.log();

	// a restart adopts it and the next load goes there too
	ld.kill9();
	ASSERT_TRUE(ld.start());
	j = ld.status("c");
	EXPECT_EQ(j["generation"].u64(), 1u);
	EXPECT_EQ(j["segment"].s(), seg);
	j = ld.load("c", img);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(dir_of(j["segment"].s()), dir);

	// a SHM/shmkv of ours but writable by others is refused as well
	ld.kill9();
	ASSERT_EQ(rmdir(squat.c_str()), 0);
	ASSERT_EQ(mkdir(squat.c_str(), 0700), 0);
	ASSERT_EQ(chmod(squat.c_str(), 0770), 0);
	ASSERT_TRUE(ld.start());
	j = ld.load("c", img);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(dir_of(j["segment"].s()), dir);
	EXPECT_GE(log_lines(env.log(), {"segment directory refused", "writable by group or others"})
			  .size(),
		  1u);
}

TEST(Trust, CannotBlockLoads)
{
	NEED_ROOT();
	Env env;
	Loader ld(env, {"--memory", "shm", "--config", group_conf(env)});
	ASSERT_TRUE(ld.start());
	std::string img = env.img_path("a.shmkv");
	ASSERT_EQ(build_image(img, "a", 200), "");
	Json j = ld.load("c", img);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	SegName s = parse_seg(j["segment"].s());

	// the other user takes the next 40 names where segments used to live,
	// and tries the segment directory
	std::string shm = env.shm(), segdir = env.seg_dir();
	std::string out = as_other({kGroup}, [&](int fd) {
		for (uint64_t id = s.load_id + 1; id <= s.load_id + 40; id++) {
			std::string base = s.prefix + s.cache + "-" + std::to_string(id);
			for (const std::string &n : {base, base + ".loading"}) {
				int f = open((shm + "/" + n).c_str(), O_RDWR | O_CREAT | O_EXCL, 0666);
				if (f < 0)
					say(fd, "could not pre-create " + shm + "/" + n + ": " +
							strerror(errno));
				else
					close(f);
				f = open((segdir + "/" + n).c_str(), O_RDWR | O_CREAT | O_EXCL, 0666);
				if (f >= 0 || errno != EACCES)
					say(fd, "created " + segdir + "/" + n);
				if (f >= 0)
					close(f);
			}
		}
	});
	EXPECT_EQ(out, "");

	// our own leftovers in the segment directory (as after a lost state file)
	for (uint64_t id = s.load_id + 1; id <= s.load_id + 3; id++) {
		std::string n = segdir + "/" + s.prefix + s.cache + "-" + std::to_string(id);
		int f = open((n + (id % 2 ? ".loading" : "")).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
		ASSERT_GE(f, 0) << n << ": " << strerror(errno);
		close(f);
	}
	for (uint64_t g = 2; g <= 6; g++) {
		j = ld.load("c", img);
		ASSERT_TRUE(j.ok()) << "load " << g << " blocked: " << j["error"].s();
		EXPECT_EQ(j["generation"].u64(), g);
		SegName n = parse_seg(j["segment"].s());
		EXPECT_EQ(n.dir, segdir);
		EXPECT_GT(n.load_id, s.load_id + 3) << "the load id moves past the names taken";
	}
	EXPECT_GE(log_lines(env.log(), {"segment name taken"}).size(), 1u);
	int fd;
	shmkv_test::Db db([&] {
		std::string why;
		shmkv *d = attach(env.root(), "c", 0, &fd, &why);
		EXPECT_NE(d, nullptr) << why;
		return d;
	}());
	ASSERT_TRUE(db);
	EXPECT_EQ(check_handle(db, "a", 200), 0u);
}

TEST(Trust, CannotReadWithoutGroupNorWrite)
{
	NEED_ROOT();
	Env env;
	Loader ld(env, {"--memory", "shm", "--config", group_conf(env)});
	ASSERT_TRUE(ld.start());
	std::string img = env.img_path("a.shmkv");
	ASSERT_EQ(build_image(img, "a", 3000), "");
	Json j = ld.load("c", img);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	j = ld.load("c", img); // a rollback segment too
	ASSERT_TRUE(j.ok()) << j["error"].s();
	std::string seg = j["segment"].s(), root = env.root(), segdir = env.seg_dir();
	std::string ctl = root + "/c.ctl";

	auto no_write = [&](int fd) {
		int f = open(seg.c_str(), O_RDWR);
		if (f >= 0 || errno != EACCES)
			say(fd, "opened the segment O_RDWR");
		f = open(ctl.c_str(), O_RDWR);
		if (f >= 0 || errno != EACCES)
			say(fd, "opened the control segment O_RDWR");
		if (rename(seg.c_str(), (segdir + "/x").c_str()) == 0)
			say(fd, "renamed the segment");
		if (unlink(seg.c_str()) == 0)
			say(fd, "unlinked the segment");
		if (unlink(ctl.c_str()) == 0)
			say(fd, "unlinked the control segment");
		f = open((segdir + "/new").c_str(), O_RDWR | O_CREAT | O_EXCL, 0666);
		if (f >= 0 || (errno != EACCES && errno != ENOENT))
			say(fd, "created a file in the segment directory");
		f = open((root + "/new.ctl").c_str(), O_RDWR | O_CREAT | O_EXCL, 0666);
		if (f >= 0 || errno != EACCES)
			say(fd, "created a file in ROOT");
	};
	std::string out = as_other({}, [&](int fd) {
		no_write(fd);
		int f = open(seg.c_str(), O_RDONLY);
		if (f >= 0 || errno != EACCES)
			say(fd, "opened the segment outside the group");
		int err;
		std::string why;
		shmkv *d = attach(root, "c", 0, &err, &why);
		if (d || err != -EACCES)
			say(fd, "attached outside the group: " + std::to_string(err) + " " + why);
		// the error names what to do: the directory's group
		else if (why.find("readers need the group of " + segdir + " (gid " +
				  std::to_string(kGroup) + ", mode 0750)") == std::string::npos)
			say(fd, "no group hint: " + why);
		shmkv_close(d);
	});
	EXPECT_EQ(out, "");
	out = as_other({kGroup}, [&](int fd) {
		no_write(fd);
		int err;
		std::string why;
		shmkv *d = attach(root, "c", 0, &err, &why);
		if (!d) {
			say(fd, "cannot attach in the group: " + why);
			return;
		}
		if (check_handle(d, "a", 3000) != 0)
			say(fd, "wrong values");
		if (mprotect(d->map, d->map_len, PROT_READ | PROT_WRITE) == 0)
			say(fd, "mprotect(PROT_WRITE) on the segment worked");
		shmkv_close(d);
	});
	EXPECT_EQ(out, "");
	EXPECT_TRUE(file_exists(seg));
	j = ld.status("c");
	EXPECT_EQ(j["generation"].u64(), 2u);
}

TEST(Trust, RepairRefusesForeignSegment)
{
	NEED_ROOT();
	Env env;
	Loader ld(env, {"--memory", "shm", "--config", group_conf(env)});
	ASSERT_TRUE(ld.start());
	std::string good = env.img_path("good.shmkv"), evil = env.img_path("evil.shmkv");
	ASSERT_EQ(build_image(good, "good", 300), "");
	ASSERT_EQ(build_image(evil, "evil", 300), "");
	ASSERT_EQ(chmod(evil.c_str(), 0644), 0);
	Json j = ld.load("c", good);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	std::string seg = j["segment"].s();
	SegName s = parse_seg(seg);
	ld.kill9();

	// the crash left the publish open, and the published segment is gone
	std::string ctl = env.root() + "/c.ctl";
	int cfd = open(ctl.c_str(), O_RDWR);
	ASSERT_GE(cfd, 0);
	void *m = mmap(nullptr, SHMKV_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, cfd, 0);
	close(cfd);
	ASSERT_NE(m, MAP_FAILED);
	shmkv_ctl *c = (shmkv_ctl *)m;
	__atomic_store_n(&c->seq, c->seq | 1, __ATOMIC_SEQ_CST);
	munmap(m, SHMKV_CTL_SIZE);
	ASSERT_EQ(unlink(seg.c_str()), 0);

	// the other user plants a valid image under the next names, old and new place
	std::vector<std::string> planted;
	for (const std::string &d : {env.shm(), env.seg_dir()})
		planted.push_back(d + "/" + s.prefix + "c-" + std::to_string(s.load_id + 5));
	std::string out = as_other({kGroup}, [&](int fd) {
		if (!copy_file(evil, planted[0]))
			say(fd, "could not plant " + planted[0] + ": " + strerror(errno));
		if (copy_file(evil, planted[1]) || errno != EACCES)
			say(fd, "planted " + planted[1]);
	});
	EXPECT_EQ(out, "");

	ASSERT_TRUE(ld.start());
	CtlView v;
	ASSERT_TRUE(read_ctl(env.root(), "c", &v));
	EXPECT_EQ(v.seq % 2, 0u);
	EXPECT_EQ(v.generation, 2u);
	EXPECT_NE(v.path(), planted[0]) << "repair published another user's file";
	EXPECT_EQ(v.segment_count, 0u) << v.path();
	std::string log = env.log();
	EXPECT_EQ(log_lines(log, {"ignored file=" + planted[0], "owned by uid 4242"}).size(), 1u)
		<< log;
	EXPECT_EQ(log_lines(log, {"repaired cache=c gen=2", "published none"}).size(), 1u) << log;
	EXPECT_TRUE(file_exists(planted[0])) << "another user's file is not ours to remove";

	// whatever that user now writes, readers do not see it
	as_other({kGroup}, [&](int fd) {
		int f = open(planted[0].c_str(), O_RDWR);
		if (f < 0 || pwrite(f, "XXXX", 4, 8192) != 4)
			say(fd, "rewrite of its own file failed");
		if (f >= 0)
			close(f);
	});
	int err;
	std::string why;
	shmkv *d = attach(env.root(), "c", 0, &err, &why);
	EXPECT_EQ(d, nullptr) << "nothing is published; got tag " << (d ? tag_of(d) : "");
	shmkv_close(d);
	j = ld.load("c", good);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	d = attach(env.root(), "c", 0, &err, &why);
	ASSERT_NE(d, nullptr) << why;
	EXPECT_EQ(tag_of(d), "good");
	EXPECT_EQ(check_handle(d, "good", 300), 0u);
	shmkv_close(d);
}

TEST(Trust, PeerCannotMutate)
{
	NEED_ROOT();
	Env env;
	Loader ld(env, {"--memory", "shm", "--config", group_conf(env)});
	ASSERT_TRUE(ld.start());
	std::string img = env.img_path("a.shmkv");
	ASSERT_EQ(build_image(img, "a", 100), "");
	ASSERT_EQ(chmod(img.c_str(), 0644), 0);
	ASSERT_TRUE(ld.load("c", img).ok());
	ASSERT_TRUE(ld.load("c", img).ok());
	std::string root = env.root();
	std::string out = as_other({kGroup}, [&](int fd) {
		for (const std::vector<std::string> &w : std::vector<std::vector<std::string>>{
			     {"ping"}, {"list"}, {"status", "c"}}) {
			std::string why;
			Json r = request(root, w, 10000, &why);
			if (!r.ok())
				say(fd, w[0] + " refused to a group member: " + why + r["error"].s());
		}
		for (const std::vector<std::string> &w : std::vector<std::vector<std::string>>{
			     {"load", "c", img},
			     {"load", "new", img},
			     {"reload", "c"},
			     {"rollback", "c"},
			     {"drop", "c"}}) {
			std::string why;
			Json r = request(root, w, 10000, &why);
			if (r.ok() || r["code"].s() != "EPERM" ||
			    !contains_ci(r["error"].s(), "loader's user"))
				say(fd, w[0] + " not refused: " + why + r["error"].s() + " " +
						r["code"].s());
		}
	});
	EXPECT_EQ(out, "");
	out = as_other({}, [&](int fd) {
		int s = sock_connect(root);
		if (s >= 0 || errno != EACCES)
			say(fd, "connected outside the group");
		if (s >= 0)
			close(s);
	});
	EXPECT_EQ(out, "");
	Json j = ld.status("c");
	EXPECT_EQ(j["generation"].u64(), 2u) << "nothing changed";
	EXPECT_EQ(j["rollback.generation"].u64(), 1u);
	j = ld.req({"list"});
	EXPECT_EQ(j["caches"].arr.size(), 1u) << "no cache \"new\"";
	EXPECT_TRUE(ld.req({"rollback", "c"}).ok()) << "root still may";
}

TEST(Trust, UntrustedRootAndControlFiles)
{
	NEED_ROOT();
	Env env;
	std::string conf = group_conf(env);
	ASSERT_EQ(chmod(env.root().c_str(), 0777), 0);
	{
		Loader ld(env, {"--memory", "shm", "--config", conf});
		EXPECT_EQ(ld.start_expect_exit(), 1);
		EXPECT_EQ(log_lines(env.log(), {"root", "writable by group or others"}).size(), 1u)
			<< env.log();
	}
	ASSERT_EQ(chmod(env.root().c_str(), 0755), 0);
	// a spool every user can write: anyone could publish
	ASSERT_EQ(chmod(env.spool().c_str(), 01777), 0);
	{
		Loader ld(env, {"--memory", "shm", "--config", conf});
		EXPECT_EQ(ld.start_expect_exit(), 1);
		EXPECT_EQ(log_lines(env.log(), {"spool", "lets every local user publish"}).size(), 1u)
			<< env.log();
	}
	ASSERT_EQ(chmod(env.spool().c_str(), 0775), 0); // a producers' group may
	Loader ld(env, {"--memory", "shm", "--config", conf});
	ASSERT_TRUE(ld.start());
	std::string img = env.img_path("a.shmkv");
	ASSERT_EQ(build_image(img, "a", 100), "");
	ASSERT_TRUE(ld.load("c", img).ok());
	ld.kill9();
	// another user's control segment (as if ROOT had once been open to it)
	std::string ctl = env.root() + "/c.ctl";
	ASSERT_EQ(chown(ctl.c_str(), kOther, kOther), 0);
	ASSERT_TRUE(ld.start());
	Json j = ld.status("c");
	EXPECT_TRUE(contains_ci(j["last_error"].s(), "owned by uid 4242")) << j["last_error"].s();
	EXPECT_EQ(j["generation"].u64(), 0u) << "not adopted";
	j = ld.load("c", img);
	EXPECT_FALSE(j.ok());
	EXPECT_TRUE(contains_ci(j["error"].s(), "cannot adopt")) << j["error"].s();
}

TEST(Trust, UntrustedStateFile)
{
	NEED_ROOT();
	Env env;
	std::string img = env.img_path("a.shmkv"), state = env.root() + "/c.state";
	ASSERT_EQ(build_image(img, "a", 100), "");
	uint64_t gen = 0;
	size_t warned = 0;
	for (const char *kind : {"fifo", "symlink", "foreign"}) {
		SCOPED_TRACE(kind);
		Loader ld(env);
		ASSERT_TRUE(ld.start());
		Json j = ld.load("c", img);
		ASSERT_TRUE(j.ok()) << j["error"].s();
		gen = j["generation"].u64();
		ld.kill9();
		ASSERT_EQ(unlink(state.c_str()), 0);
		if (!strcmp(kind, "fifo"))
			ASSERT_EQ(mkfifo(state.c_str(), 0600), 0);
		else if (!strcmp(kind, "symlink"))
			ASSERT_EQ(symlink(img.c_str(), state.c_str()), 0);
		else {
			ASSERT_TRUE(shmkv_test::write_file(state, "next_load=1\n"));
			ASSERT_EQ(chown(state.c_str(), kOther, kOther), 0);
		}
		ASSERT_TRUE(ld.start()) << "the restart did not come up";
		EXPECT_EQ(log_lines(env.log(), {"state ignored", "cache=c"}).size(), ++warned)
			<< env.log();
		j = ld.status("c");
		EXPECT_EQ(j["generation"].u64(), gen) << "adopted";
		j = ld.load("c", img);
		EXPECT_TRUE(j.ok()) << j["error"].s();
		EXPECT_EQ(j["generation"].u64(), gen + 1);
		EXPECT_EQ(ld.stop(), 0);
		struct stat st;
		ASSERT_EQ(lstat(state.c_str(), &st), 0);
		EXPECT_TRUE(S_ISREG(st.st_mode) && st.st_uid == 0) << "rewritten as the loader's own";
	}
}

} // namespace
