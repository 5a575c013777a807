// build_output_test: what `shmctl image build` (the binary named by $SHMCTL)
// may write, and what a killed build leaves.
//
//   Output.Refuses*          an existing output that is a device node (our own
//                            null/full made with mknod), FIFO, symlink, socket
//                            or directory, or that is one of the inputs (same
//                            path, another path, a hard link, stdin): exit 2,
//                            a clear message, the thing left as it was, no
//                            temporary left; a FIFO never blocks the build
//   Output.Stdout*           -o - writes the image to stdout (a pipe, a file),
//                            byte-identical to -o FILE, summary on stderr;
//                            refused when stdout is a terminal (a pty)
//   Output.LossyF32Flag      an f32list value f32 cannot hold: exit 2 naming
//                            file:line, key, element, value; --lossy-f32 rounds
//   Kill.*                   SIGINT/SIGTERM while writing: nothing under the
//                            output name, an existing output untouched, no
//                            temporary left (O_TMPFILE, and the named-temporary
//                            path removed by the signal handler); SIGKILL: at
//                            most a temporary named .OUT.<16 hex>.tmp
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace shmkv_test;

namespace {

using Io = RunIo;

class Build : public ::testing::Test {
protected:
	TempDir dir;
	std::string in = dir.file("in.jsonl");

	void SetUp() override
	{
		ASSERT_FALSE(shmctl_path().empty()) << "SHMCTL is not set (meson sets it)";
		ASSERT_TRUE(write_file(in, "{\"key\": \"a\", \"value\": 1}\n{\"key\": \"b\", \"value\": \"x\"}\n"));
	}

	// shmctl with args started (test_util.h's spawn), not waited for
	static pid_t spawn(const std::vector<std::string> &args, const Io &io, const std::string &out,
			   const std::string &err)
	{
		std::vector<std::string> a = args;
		a.insert(a.begin(), shmctl_path());
		return shmkv_test::spawn(a, io, out, err);
	}

	static int wait_rc(pid_t pid) { return wait_exit(pid, 0); }

	// Runs shmctl; std streams go to files outside dir (dir's listing is checked).
	Proc shmctl(const std::vector<std::string> &args, const Io &io = Io())
	{
		return run_shmctl(args, io, 120000, io_dir.path());
	}

	// The build is refused with exit 2 and a message containing why; nothing
	// new appears in dir.
	void expect_refused(const std::vector<std::string> &args, const std::string &why,
			    const Io &io = Io())
	{
		std::vector<std::string> before = list_dir(dir.path());
		Proc r = shmctl(args, io);
		EXPECT_EQ(r.rc, 2) << show(r);
		EXPECT_TRUE(contains_ci(r.err, why)) << "no \"" << why << "\" in: " << show(r);
		EXPECT_EQ(r.err.find("wrote"), std::string::npos) << show(r);
		EXPECT_EQ(list_dir(dir.path()), before) << "a file appeared or vanished";
	}

	TempDir io_dir;
};

using Output = Build;

TEST_F(Output, RefusesDeviceNodes)
{
	// our own null and full devices: the real ones are never touched
	std::string null_dev = dir.file("null"), full_dev = dir.file("full");
	if (mknod(null_dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0)
		GTEST_SKIP() << "mknod needs CAP_MKNOD: " << strerror(errno);
	ASSERT_EQ(mknod(full_dev.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0) << strerror(errno);
	for (const std::string &dev : {null_dev, full_dev}) {
		SCOPED_TRACE(dev);
		expect_refused({"image", "build", "-o", dev, in}, "character device");
		struct stat st;
		ASSERT_EQ(lstat(dev.c_str(), &st), 0);
		EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device node was replaced";
		EXPECT_EQ(st.st_rdev, dev == null_dev ? makedev(1, 3) : makedev(1, 7));
	}
}

TEST_F(Output, RefusesFifoWithoutBlocking)
{
	std::string fifo = dir.file("fifo");
	ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0) << strerror(errno);
	// no reader on the FIFO: a build that opened it for writing would hang
	// (the test's timeout); one that renamed over it would replace it
	expect_refused({"image", "build", "-o", fifo, in}, "FIFO");
	struct stat st;
	ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
	EXPECT_TRUE(S_ISFIFO(st.st_mode));
	// nothing was written into it either
	int fd = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
	ASSERT_GE(fd, 0);
	char c;
	EXPECT_LE(read(fd, &c, 1), 0);
	close(fd);
}

TEST_F(Output, RefusesSymlinks)
{
	std::string target = dir.file("target.img"), link = dir.file("link.img");
	ASSERT_TRUE(write_file(target, "precious"));
	ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
	expect_refused({"image", "build", "-o", link, in}, "symbolic link");
	EXPECT_EQ(read_file(target), "precious");
	struct stat st;
	ASSERT_EQ(lstat(link.c_str(), &st), 0);
	EXPECT_TRUE(S_ISLNK(st.st_mode));
	// dangling: nothing is created where it points
	std::string dangling = dir.file("dangling.img");
	ASSERT_EQ(symlink(dir.file("nowhere.img").c_str(), dangling.c_str()), 0);
	expect_refused({"image", "build", "-o", dangling, in}, "symbolic link");
	EXPECT_FALSE(file_exists(dir.file("nowhere.img")));
}

TEST_F(Output, RefusesSocketAndDirectory)
{
	std::string sock = dir.file("sock");
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	ASSERT_GE(s, 0);
	sockaddr_un sa{};
	sa.sun_family = AF_UNIX;
	ASSERT_LT(sock.size(), sizeof sa.sun_path);
	memcpy(sa.sun_path, sock.c_str(), sock.size() + 1);
	ASSERT_EQ(bind(s, (sockaddr *)&sa, sizeof sa), 0) << strerror(errno);
	expect_refused({"image", "build", "-o", sock, in}, "socket");
	struct stat st;
	ASSERT_EQ(lstat(sock.c_str(), &st), 0);
	EXPECT_TRUE(S_ISSOCK(st.st_mode));
	close(s);

	std::string sub = dir.file("sub");
	ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
	expect_refused({"image", "build", "-o", sub, in}, "directory");
	EXPECT_EQ(list_dir(sub), std::vector<std::string>{});
}

TEST_F(Output, RefusesItsOwnInput)
{
	const std::string content = read_file(in);
	std::string hard = dir.file("hard.jsonl");
	ASSERT_EQ(link(in.c_str(), hard.c_str()), 0) << strerror(errno);
	std::string other = dir.file("other.jsonl");
	ASSERT_TRUE(write_file(other, "{\"key\": \"c\", \"value\": 3}\n"));
	std::string dotted = dir.path() + "/./in.jsonl";
	std::vector<std::vector<std::string>> cases = {
		{"image", "build", "-o", in, in},
		{"image", "build", "-o", in, other, in},       // not the first input
		{"image", "build", "-o", dotted, in},          // another path
		{"image", "build", "-o", hard, in},            // a hard link
		{"image", "build", in, "-o", in},              // options after the inputs
	};
	for (const auto &args : cases) {
		SCOPED_TRACE(args[3] + " " + args.back());
		expect_refused(args, "refusing");
		EXPECT_EQ(read_file(in), content) << "the input was overwritten";
	}
	// stdin redirected from the output
	Io io;
	io.in = in;
	expect_refused({"image", "build", "-o", in, "-"}, "refusing", io);
	EXPECT_EQ(read_file(in), content);
	// -o - with stdout appended to an input
	io = Io();
	io.out_append = in;
	expect_refused({"image", "build", "-o", "-", in}, "refusing", io);
	EXPECT_EQ(read_file(in), content);
}

// The C API refuses the same, for every caller (not only shmctl).
TEST_F(Output, CApiRefuses)
{
	std::string fifo = dir.file("fifo"), link = dir.file("link");
	ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
	ASSERT_EQ(symlink(in.c_str(), link.c_str()), 0);
	for (const std::string &out : {fifo, link, in}) {
		SCOPED_TRACE(out);
		Builder b;
		ASSERT_EQ(shmkv_builder_add_file(b, in.c_str(), SHMKV_INPUT_JSONL, 0), 0) << b.error();
		EXPECT_EQ(b.finish(out), -EEXIST) << b.error();
		EXPECT_NE(b.error().find(out), std::string::npos) << b.error();
	}
	// declared first, the output is refused as an input
	Builder b;
	ASSERT_EQ(shmkv_builder_check_output(b, in.c_str()), 0) << b.error();
	EXPECT_EQ(shmkv_builder_add_file(b, in.c_str(), SHMKV_INPUT_JSONL, 0), -EEXIST);
	EXPECT_TRUE(contains_ci(b.error(), "output")) << b.error();
	EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"fifo", "in.jsonl", "link"}));
	struct stat st;
	ASSERT_EQ(lstat(link.c_str(), &st), 0);
	EXPECT_TRUE(S_ISLNK(st.st_mode));
}

TEST_F(Output, StdoutPipeAndFile)
{
	std::string img = dir.file("img.shmkv");
	Io io;
	io.env = {"SOURCE_DATE_EPOCH=1700000000"};
	Proc r = shmctl({"image", "build", "-o", img, in}, io);
	ASSERT_EQ(r.rc, 0) << show(r);
	const std::string want = read_file(img);
	ASSERT_GT(want.size(), 4096u);

	// stdout a regular file
	r = shmctl({"image", "build", "-o", "-", in}, io);
	ASSERT_EQ(r.rc, 0) << show(r);
	EXPECT_TRUE(r.out == want) << "-o - differs from -o FILE (" << r.out.size() << " bytes)";
	EXPECT_NE(r.err.find("wrote standard output"), std::string::npos) << show(r);
	EXPECT_FALSE(file_exists(dir.file("-"))) << "a file named - was made";

	// stdout a pipe: the header cannot be written last, it must come first
	int p[2];
	ASSERT_EQ(pipe(p), 0);
	io.out_fd = p[1];
	std::string err = io_dir.file("stderr");
	pid_t pid = spawn({"image", "build", "-o", "-", in}, io, "", err);
	close(p[1]);
	std::string got;
	char buf[65536];
	ssize_t n;
	while ((n = read(p[0], buf, sizeof buf)) > 0)
		got.append(buf, (size_t)n);
	close(p[0]);
	EXPECT_EQ(wait_rc(pid), 0) << read_file(err);
	EXPECT_TRUE(got == want) << "piped image differs (" << got.size() << " bytes)";
	EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"img.shmkv", "in.jsonl"}));

	io.out_fd = -1;
	r = shmctl({"-j", "image", "build", "-o", "-", in}, io);
	EXPECT_EQ(r.rc, 2) << show(r);
}

TEST_F(Output, StdoutTerminalRefused)
{
	int master = -1, slave = -1;
	if (openpty(&master, &slave, nullptr, nullptr, nullptr) != 0)
		GTEST_SKIP() << "no pty: " << strerror(errno);
	Io io;
	io.out_fd = slave;
	std::string err = io_dir.file("stderr");
	pid_t pid = spawn({"image", "build", "-o", "-", in}, io, "", err);
	close(slave);
	int rc = wait_rc(pid);
	std::string tty;
	char buf[4096];
	pollfd pf = {master, POLLIN, 0};
	while (poll(&pf, 1, 0) > 0 && (pf.revents & POLLIN)) {
		ssize_t n = read(master, buf, sizeof buf);
		if (n <= 0)
			break;
		tty.append(buf, (size_t)n);
	}
	close(master);
	EXPECT_EQ(rc, 2) << read_file(err);
	EXPECT_TRUE(contains_ci(read_file(err), "terminal")) << read_file(err);
	EXPECT_EQ(tty.find("SHMKVIMG"), std::string::npos) << "image bytes reached the terminal";
	EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"in.jsonl"});
}

// --lossy-f32 is the only way to store a value an f32 cannot hold.
TEST_F(Output, LossyF32Flag)
{
	std::string f = dir.file("f.jsonl"), img = dir.file("img.shmkv");
	ASSERT_TRUE(write_file(f, "{\"key\": \"emb\", \"type\": \"f32list\", \"value\": [0.5, 16777217]}\n"));
	Proc r = shmctl({"image", "build", "-o", img, f});
	EXPECT_EQ(r.rc, 2) << show(r);
	EXPECT_NE(r.err.find(f + ":1: key \"emb\": element 2: 16777217"), std::string::npos) << show(r);
	EXPECT_NE(r.err.find("--lossy-f32"), std::string::npos) << show(r);
	EXPECT_FALSE(file_exists(img));
	r = shmctl({"image", "build", "--lossy-f32", "-o", img, f});
	EXPECT_EQ(r.rc, 0) << show(r);
	r = shmctl({"image", "get", img, "emb"});
	EXPECT_EQ(r.rc, 0) << show(r);
	EXPECT_NE(r.out.find("16777216"), std::string::npos) << show(r);
}

// ---- a build killed while it writes ----------------------------------------

class Kill : public Build {
protected:
	std::string big = dir.file("big.jsonl");
	std::string out = dir.file("out.shmkv");

	void SetUp() override
	{
		Build::SetUp();
		// ~45 MB of unique values: writing (and fsync) takes long enough to be caught
		std::string s;
		s.reserve(48 << 20);
		char line[512];
		std::string pad(120, 'v');
		for (int i = 0; i < 150000; i++) {
			snprintf(line, sizeof line, "{\"key\": \"k%d\", \"value\": \"%d%s%s\"}\n", i, i,
				 pad.c_str(), pad.c_str());
			s += line;
		}
		ASSERT_TRUE(write_file(big, s));
		ASSERT_TRUE(write_file(out, "precious, not an image"));
	}

	// True once pid has the image's temporary open: an O_TMPFILE shows in
	// /proc/PID/fd as "DIR/#INODE (deleted)", a named one as DIR/.out.shmkv.*.tmp.
	bool writing(pid_t pid)
	{
		std::string fds = "/proc/" + std::to_string(pid) + "/fd";
		for (const std::string &n : list_dir(fds)) {
			char target[4096];
			ssize_t k = readlink((fds + "/" + n).c_str(), target, sizeof target - 1);
			if (k <= 0)
				continue;
			std::string t(target, (size_t)k);
			auto starts = [&](const std::string &p) { return t.compare(0, p.size(), p) == 0; };
			if (starts(dir.path() + "/#") || starts(dir.path() + "/.out.shmkv."))
				return true;
		}
		return false;
	}

	// Starts a build of big into out, sends sig once it writes. Returns the
	// exit code, or -1 if the build ended before it could be caught.
	int kill_while_writing(int sig, bool named_temp)
	{
		Io io;
		if (named_temp)
			io.env = {"SHMKV_BUILD_NO_TMPFILE=1"};
		pid_t pid = spawn({"image", "build", "-o", out, big}, io, io_dir.file("stdout"),
				  io_dir.file("stderr"));
		EXPECT_GT(pid, 0);
		auto t0 = std::chrono::steady_clock::now();
		bool caught = false;
		while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
			int status;
			if (waitpid(pid, &status, WNOHANG) == pid)
				return -1; // finished first
			if (writing(pid)) {
				caught = kill(pid, sig) == 0;
				break;
			}
			std::this_thread::sleep_for(std::chrono::microseconds(200));
		}
		int rc = wait_rc(pid);
		if (caught && read_file(out) != "precious, not an image") {
			// The signal landed after the final rename (on a loaded machine
			// the fd check can see the temporary just before it): the build
			// had finished, so the output must be the whole, valid image;
			// then try again to catch it mid-write.
			shmkv *db = nullptr;
			EXPECT_EQ(shmkv_open_file(out.c_str(), SHMKV_OPEN_DEEP, &db), 0)
				<< "a partial image under the final name";
			if (db)
				shmkv_close(db);
			EXPECT_TRUE(write_file(out, "precious, not an image"));
			return -1;
		}
		return caught ? rc : -1;
	}

	// the builder's named temporary: ".out.shmkv.<16 hex digits>.tmp"
	// (no std::regex: GCC 12 warns maybe-uninitialized inside <regex>
	// under -fsanitize at -O2, and warnings are errors here)
	static bool is_our_temp(const std::string &n)
	{
		static const std::string pre = ".out.shmkv.", suf = ".tmp";
		if (n.size() != pre.size() + 16 + suf.size() || n.compare(0, pre.size(), pre) != 0 ||
		    n.compare(n.size() - suf.size(), suf.size(), suf) != 0)
			return false;
		for (size_t i = pre.size(); i < pre.size() + 16; i++)
			if (!isxdigit((unsigned char)n[i]) || isupper((unsigned char)n[i]))
				return false;
		return true;
	}

	void check_after(int rc, int sig, bool allow_temp)
	{
		EXPECT_EQ(rc, 128 + sig) << read_file(io_dir.file("stderr"));
		EXPECT_EQ(read_file(out), "precious, not an image") << "the output was replaced";
		for (const std::string &n : list_dir(dir.path())) {
			if (n == "big.jsonl" || n == "in.jsonl" || n == "out.shmkv")
				continue;
			if (allow_temp)
				EXPECT_TRUE(is_our_temp(n)) << "left behind: " << n;
			else
				ADD_FAILURE() << "left behind: " << n;
		}
	}
};

TEST_F(Kill, SigintSigtermLeaveNothing)
{
	for (bool named : {false, true}) {
		for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
			SCOPED_TRACE(std::string(named ? "named temporary, " : "O_TMPFILE, ") +
				     strsignal(sig));
			int rc = -1;
			for (int tries = 0; tries < 5 && rc < 0; tries++)
				rc = kill_while_writing(sig, named);
			ASSERT_GE(rc, 0) << "the build always finished before it could be signalled";
			check_after(rc, sig, false);
		}
	}
}

TEST_F(Kill, SigkillLeavesOnlyOurTemporary)
{
	for (bool named : {false, true}) {
		SCOPED_TRACE(named ? "named temporary" : "O_TMPFILE");
		int rc = -1;
		for (int tries = 0; tries < 5 && rc < 0; tries++)
			rc = kill_while_writing(SIGKILL, named);
		ASSERT_GE(rc, 0) << "the build always finished before it could be killed";
		check_after(rc, SIGKILL, named);
		if (!named) {
			EXPECT_EQ(list_dir(dir.path()),
				  (std::vector<std::string>{"big.jsonl", "in.jsonl", "out.shmkv"}))
				<< "an unnamed temporary needs no cleanup";
		}
		for (const std::string &n : list_dir(dir.path()))
			if (n[0] == '.')
				unlink(dir.file(n).c_str());
	}
}

} // namespace
