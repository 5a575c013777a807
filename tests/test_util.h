// test_util.h - small helpers shared by the shmkv tests (header-only).
//
//   TempDir                  a fresh directory under $TMPDIR (or /tmp, or a base given), removed at exit
//   read_file / write_file   whole files as std::string
//   list_dir                 names in a directory (sorted, no . or ..)
//   test_options()           builder defaults with a fixed creation time
//   Builder / Db             RAII owners of a shmkv_builder / shmkv handle
//   open_db(path, flags)     open or record a failure (with the reader's reason)
//   contains_ci(hay, needle) case-insensitive substring
//   emulator()               "qemu-user (...)" under a user-mode emulator, else ""
//   slow_ms(ms)              a deadline times $SHMKV_TEST_SLOW
//   spawn / wait_exit / run  a program run with its streams captured, bounded
//   shmctl_path / run_shmctl $SHMCTL (set by meson) run the same way
//   HandCtl                  a cache's control segment the test writes itself
#ifndef SHMKV_TEST_UTIL_H
#define SHMKV_TEST_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

extern char **environ;

#include <shmkv.h>
#include <shmkv_build.h>

namespace shmkv_test {

class TempDir {
public:
	TempDir() : TempDir(getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") {}
	// Under base, e.g. /dev/shm for a tmpfs.
	explicit TempDir(const std::string &base)
	{
		std::string tmpl = base + "/shmkv-test-XXXXXX";
		std::vector<char> buf(tmpl.begin(), tmpl.end());
		buf.push_back(0);
		if (!mkdtemp(buf.data())) {
			ADD_FAILURE() << "mkdtemp " << tmpl << ": " << strerror(errno);
			return;
		}
		path_ = buf.data();
	}
	~TempDir()
	{
		if (!path_.empty()) {
			std::error_code ec;
			std::filesystem::remove_all(path_, ec);
		}
	}
	TempDir(const TempDir &) = delete;
	TempDir &operator=(const TempDir &) = delete;
	const std::string &path() const { return path_; }
	std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
	std::string path_;
};

inline std::string read_file(const std::string &path)
{
	std::string out;
	int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return out;
	char buf[1 << 16];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		out.append(buf, (size_t)n);
	}
	close(fd);
	return out;
}

inline bool write_file(const std::string &path, const std::string &data)
{
	int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return false;
	size_t done = 0;
	while (done < data.size()) {
		ssize_t n = write(fd, data.data() + done, data.size() - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(fd);
			return false;
		}
		done += (size_t)n;
	}
	return close(fd) == 0;
}

inline bool file_exists(const std::string &path)
{
	struct stat st;
	return stat(path.c_str(), &st) == 0;
}

inline std::vector<std::string> list_dir(const std::string &path)
{
	std::vector<std::string> names;
	DIR *d = opendir(path.c_str());
	if (!d)
		return names;
	while (struct dirent *e = readdir(d)) {
		std::string n = e->d_name;
		if (n != "." && n != "..")
			names.push_back(n);
	}
	closedir(d);
	std::sort(names.begin(), names.end());
	return names;
}

inline bool contains_ci(const std::string &hay, const std::string &needle)
{
	auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
			      [](char a, char b) { return std::tolower((unsigned char)a) ==
							  std::tolower((unsigned char)b); });
	return it != hay.end();
}

// Builder defaults with a fixed creation time, so images are reproducible.
inline shmkv_build_options test_options()
{
	shmkv_build_options o;
	int err = shmkv_build_options_init(&o);
	EXPECT_EQ(err, 0) << shmkv_strerror(err);
	o.created = 1700000000;
	o.fixed |= SHMKV_OPT_CREATED;
	return o;
}

// Owns a builder. Check ok() after construction.
class Builder {
public:
	explicit Builder(const shmkv_build_options &o)
	{
		err_ = shmkv_builder_new(&o, &b_);
		EXPECT_EQ(err_, 0) << "shmkv_builder_new: " << shmkv_strerror(err_);
	}
	Builder() : Builder(test_options()) {}
	~Builder() { shmkv_builder_free(b_); }
	Builder(const Builder &) = delete;
	Builder &operator=(const Builder &) = delete;
	bool ok() const { return b_ != nullptr && err_ == 0; }
	shmkv_builder *get() const { return b_; }
	operator shmkv_builder *() const { return b_; }
	std::string error() const { return b_ ? shmkv_builder_error(b_) : "(no builder)"; }

	int str(const std::string &k, const std::string &v)
	{
		return shmkv_builder_add_str(b_, k.data(), k.size(), v.data(), v.size());
	}
	int i64(const std::string &k, int64_t v)
	{
		return shmkv_builder_add_i64(b_, k.data(), k.size(), v);
	}
	int finish(const std::string &path, shmkv_build_stats *stats = nullptr)
	{
		return shmkv_builder_finish(b_, path.c_str(), stats);
	}

private:
	shmkv_builder *b_ = nullptr;
	int err_ = 0;
};

// Owns a reader handle.
class Db {
public:
	Db() = default;
	explicit Db(shmkv *db) : db_(db) {}
	~Db() { shmkv_close(db_); }
	Db(Db &&o) noexcept : db_(o.db_) { o.db_ = nullptr; }
	Db &operator=(Db &&o) noexcept
	{
		std::swap(db_, o.db_);
		return *this;
	}
	shmkv *get() const { return db_; }
	operator shmkv *() const { return db_; }
	explicit operator bool() const { return db_ != nullptr; }
	const shmkv_image_header *hdr() const { return shmkv_header(db_); }

private:
	shmkv *db_ = nullptr;
};

// Opens path; on failure records a test failure with the reader's reason
// and returns an empty Db.
inline Db open_db(const std::string &path, unsigned flags = 0)
{
	shmkv *db = nullptr;
	char why[512] = "";
	int err = shmkv_open_file_diag(path.c_str(), flags, &db, why, sizeof why);
	EXPECT_EQ(err, 0) << path << ": " << shmkv_strerror(err) << ": " << why;
	return Db(err ? nullptr : db);
}

// Runs shmkv_verify and returns "" when it passes, else the code and reason.
inline std::string verify_msg(const shmkv *db)
{
	char why[512] = "";
	int err = shmkv_verify(db, why, sizeof why);
	if (!err)
		return "";
	return std::string(shmkv_strerror(err)) + ": " + why;
}

inline std::string sv(const void *p, size_t n)
{
	return std::string(static_cast<const char *>(p), n);
}

// The user-mode emulator this process runs under, e.g. "qemu-user
// (qemu-aarch64-st)", or "" when it runs natively. qemu-user fakes
// /proc/self/exe, maps and cmdline for the guest, but not status, whose Name
// is the emulator's own (15 characters at most).
inline std::string emulator()
{
	std::string status = read_file("/proc/self/status");
	if (status.compare(0, 5, "Name:") != 0)
		return "";
	size_t b = status.find_first_not_of(" \t", 5), e = status.find('\n', 5);
	std::string name = b < e ? status.substr(b, e - b) : "";
	return name.compare(0, 5, "qemu-") == 0 ? "qemu-user (" + name + ")" : "";
}


// A deadline scaled for a slow machine: ms times $SHMKV_TEST_SLOW (a factor,
// default 1; ./run test-loaded sets it). The deadlines the tests give are
// already generous for a loaded 2-core box; a wait for an event returns as
// soon as it happens.
inline uint64_t slow_ms(uint64_t ms)
{
	const char *s = getenv("SHMKV_TEST_SLOW");
	double f = s && *s ? atof(s) : 1.0;
	return f > 1.0 ? (uint64_t)((double)ms * f) : ms;
}

// ---- running programs ----------------------------------------------------------

// What a program left: its exit status (128 + signal; -1: it did not run, or
// ran past its deadline), stdout and stderr.
struct Proc {
	int rc = -1;
	std::string out, err;
};

// How spawn() sets up the child.
struct RunIo {
	std::string in = "/dev/null"; // stdin: this file
	int out_fd = -1;              // stdout: this descriptor, else out_path
	std::string out_append;       // stdout appended to this file (before out_fd)
	std::vector<std::string> env; // "NAME=value" set, "NAME" unset
	long uid = -1;                // >= 0: run as this uid and gid, no other groups (root)
};

// Starts argv[0] with argv, its stdout to out_path (unless io says
// otherwise) and stderr to err_path; SIGINT, SIGTERM and SIGHUP at their
// defaults (a test run under nohup would hand it an ignored SIGHUP), killed
// with the test process. Returns the pid, or -1 with a failure recorded.
inline pid_t spawn(const std::vector<std::string> &argv, const RunIo &io,
		   const std::string &out_path, const std::string &err_path)
{
	if (argv.empty() || argv[0].empty()) {
		ADD_FAILURE() << "spawn: no program";
		return -1;
	}
	// everything the child needs, made before fork: it only opens and execs
	std::vector<std::string> a = argv, env;
	for (char **e = environ; *e; e++) {
		std::string kv = *e;
		bool drop = false;
		for (const std::string &set : io.env) {
			const std::string name = set.substr(0, set.find('=')) + "=";
			drop |= kv.compare(0, name.size(), name) == 0;
		}
		if (!drop)
			env.push_back(kv);
	}
	for (const std::string &set : io.env)
		if (set.find('=') != std::string::npos)
			env.push_back(set);
	std::vector<char *> av, ev;
	for (std::string &x : a)
		av.push_back(&x[0]);
	av.push_back(nullptr);
	for (std::string &x : env)
		ev.push_back(&x[0]);
	ev.push_back(nullptr);
	pid_t pid = fork();
	if (pid < 0) {
		ADD_FAILURE() << "fork: " << strerror(errno);
		return -1;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int i = open(io.in.c_str(), O_RDONLY);
		int o = !io.out_append.empty() ? open(io.out_append.c_str(), O_WRONLY | O_APPEND)
			: io.out_fd >= 0      ? dup(io.out_fd)
					      : open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (i < 0 || o < 0 || e < 0)
			_exit(126);
		dup2(i, 0);
		dup2(o, 1);
		dup2(e, 2);
		for (int sig : {SIGINT, SIGTERM, SIGHUP})
			signal(sig, SIG_DFL);
		if (io.uid >= 0 && (setgroups(0, nullptr) != 0 ||
				    setresgid((gid_t)io.uid, (gid_t)io.uid, (gid_t)io.uid) != 0 ||
				    setresuid((uid_t)io.uid, (uid_t)io.uid, (uid_t)io.uid) != 0))
			_exit(125);
		execve(av[0], av.data(), ev.data());
		_exit(127);
	}
	return pid;
}

// Waits for pid up to timeout_ms (scaled by slow_ms; 0: no limit). Returns
// its exit status (128 + signal), or -1 after killing it (SIGKILL) at the
// deadline, with a failure naming what.
inline int wait_exit(pid_t pid, unsigned timeout_ms, const std::string &what = "a child")
{
	int status = 0;
	if (timeout_ms) {
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		const uint64_t limit = slow_ms(timeout_ms);
		for (;;) {
			pid_t got = waitpid(pid, &status, WNOHANG);
			if (got == pid)
				break;
			if (got < 0 && errno != EINTR)
				return -1;
			clock_gettime(CLOCK_MONOTONIC, &t);
			uint64_t ms = (uint64_t)(t.tv_sec - t0.tv_sec) * 1000u +
				      (uint64_t)((t.tv_nsec - t0.tv_nsec) / 1000000);
			if (ms >= limit) {
				ADD_FAILURE() << what << ": no exit within " << limit << " ms: killed";
				kill(pid, SIGKILL);
				while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
				}
				return -1;
			}
			usleep(2000);
		}
	} else {
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
		}
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs argv to its end (bounded by timeout_ms), its stdout (unless io says
// otherwise) and stderr captured through files in dir (a temporary
// directory when "").
inline Proc run(const std::vector<std::string> &argv, const RunIo &io = RunIo(),
		unsigned timeout_ms = 60000, const std::string &dir = "")
{
	Proc r;
	std::unique_ptr<TempDir> tmp;
	if (dir.empty())
		tmp.reset(new TempDir);
	const std::string d = dir.empty() ? tmp->path() : dir;
	const std::string out = d + "/.run.out", err = d + "/.run.err";
	pid_t pid = spawn(argv, io, out, err);
	if (pid < 0)
		return r;
	std::string what;
	for (size_t i = 0; i < argv.size() && i < 6; i++)
		what += (i ? " " : "") + argv[i];
	r.rc = wait_exit(pid, timeout_ms, what);
	r.out = read_file(out);
	r.err = read_file(err);
	unlink(out.c_str());
	unlink(err.c_str());
	return r;
}

// $SHMCTL: the shmctl binary meson's tests run (a wrapper in cross builds).
inline std::string shmctl_path()
{
	const char *p = getenv("SHMCTL");
	return p && *p ? p : "";
}

// Runs shmctl with args, as run() does; a failure when $SHMCTL is not set.
inline Proc run_shmctl(const std::vector<std::string> &args, const RunIo &io = RunIo(),
		       unsigned timeout_ms = 60000, const std::string &dir = "")
{
	if (shmctl_path().empty()) {
		ADD_FAILURE() << "SHMCTL is not set (meson sets it)";
		return Proc();
	}
	std::vector<std::string> argv = args;
	argv.insert(argv.begin(), shmctl_path());
	return run(argv, io, timeout_ms, dir);
}

// A Proc for a failure message: exit status and the streams' heads, control
// bytes (an image on stdout) shown as '.'.
inline std::string show(const Proc &r)
{
	std::string out = r.out.substr(0, 2000);
	for (char &c : out)
		if ((unsigned char)c < 0x20 && c != '\n' && c != '\t')
			c = '.';
	return "exit " + std::to_string(r.rc) + "\nstdout: " + out + "\nstderr: " + r.err.substr(0, 2000);
}

// ---- a control segment written by the test ---------------------------------

// Cache `name` under a temporary root whose control segment (lib/PROTOCOL.md)
// the test writes itself, playing the loader: made 0644 and opened
// read-write, published with segments the test names.
class HandCtl {
public:
	// version: the protocol the file speaks (2: base and overlays).
	explicit HandCtl(const std::string &name = "c", uint32_t version = SHMKV_PROTOCOL_VERSION)
		: name_(name)
	{
		shmkv_ctl init;
		shmkv_ctl_init(&init);
		if (version == SHMKV_PROTOCOL_VERSION_2) {
			init.protocol_version = version;
			init.layout_hash = SHMKV_CTL_LAYOUT_HASH_V2;
		}
		std::string bytes(SHMKV_CTL_SIZE, '\0');
		memcpy(&bytes[0], &init, sizeof init);
		EXPECT_TRUE(write_file(dir_.file(name + ".ctl"), bytes));
		EXPECT_EQ(chmod(dir_.file(name + ".ctl").c_str(), 0644), 0);
		char why[512] = "";
		EXPECT_EQ(shmkv_ctl_open(root(), name.c_str(), SHMKV_CTL_RDWR, &ctl_, why, sizeof why), 0)
			<< why;
	}
	~HandCtl() { shmkv_ctl_close(ctl_); }
	HandCtl(const HandCtl &) = delete;
	HandCtl &operator=(const HandCtl &) = delete;
	const char *root() const { return dir_.path().c_str(); }
	shmkv_ctl *ctl() const { return ctl_; }
	// A file in the root, for the images.
	std::string file(const std::string &name) const { return dir_.file(name); }

	// A segment naming path (which may not exist: then 4096 bytes) for node.
	static shmkv_ctl_segment segment(const std::string &path, int node = -1)
	{
		shmkv_ctl_segment s;
		memset(&s, 0, sizeof s);
		s.node = node;
		struct stat st;
		uint64_t size = stat(path.c_str(), &st) == 0 ? (uint64_t)st.st_size : 4096;
		s.size = s.map_size = size;
		s.page_size = 4096;
		snprintf(s.path, sizeof s.path, "%s", path.c_str());
		return s;
	}
	// Publishes generation g with segs, as the loader does.
	void publish(uint64_t g, const std::vector<shmkv_ctl_segment> &segs)
	{
		ASSERT_EQ(shmkv_ctl_publish(ctl_, g, segs.data(), (uint32_t)segs.size(),
					    (uint64_t)getpid(), 0), 0);
	}

private:
	std::string name_;
	TempDir dir_;
	shmkv_ctl *ctl_ = nullptr;
};

} // namespace shmkv_test

#endif // SHMKV_TEST_UTIL_H
