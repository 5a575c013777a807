// loader_util.h - helpers of the shmkv-loader integration tests; their bodies
// are in loader_util.cc, compiled once into a library every test that
// includes this header links (tests/loader/meson.build): inline, every test
// file compiled and optimized them again.
//
//   Env                  a fresh mkdtemp directory with root/, spool/, img/ and a
//                        private shm dir (a mkdtemp dir in /dev/shm when that is
//                        a tmpfs, else base/shm); everything removed at the end
//   Loader               starts $SHMKV_LOADER --foreground on an Env (memory=shm
//                        unless told otherwise), waits for its socket, stops it
//                        (SIGTERM) or kills it (SIGKILL); its stderr goes to
//                        Env::log_path() and is printed when a test failed
//   request(root, ...)   one request over ROOT/control.sock, the reply parsed
//   Json / parse_json    from ../json_util.h (the loader's replies)
//   build_image(...)     keys key_<i> -> "<tag>:val_<i>[|pad]", plus __gen_tag
//                        (the tag) and __n (i64 key count), with the builder
//   build_delta(...)     a delta of an image: upserts, removals, its chain
//   check_value(...)     what a reader expects for key_<i> under a tag
//   build_and_load(...)  build_image, then the loader's load of it
//   expect_no_spin(...)  a process's CPU over 3 s under a fifth of the time
//   spool_drop(...)      rename (or hard link, then rename) an image into the spool
//   read_ctl(...)        a seqcount copy of ROOT/NAME.ctl (generation, segment)
//   read_ctl_copy(...)   the same, whole, with the raw seq word
//   Child                a forked process running a function, with a result pipe
//   wait_until(...)      bounded polling
//   cpu_ms(pid)          a process's CPU time (utime + stime), in ms
//
// Every wait is bounded; nothing here calls exit() in a child (children _exit).
#ifndef SHMKV_LOADER_UTIL_H
#define SHMKV_LOADER_UTIL_H

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "../image_util.h"
#include "../json_util.h"
#include "../test_util.h"

namespace loader_test {

using shmkv_test::contains_ci;
using shmkv_test::file_exists;
using shmkv_test::list_dir;
using shmkv_test::read_file;

uint64_t now_ms();

void sleep_ms(unsigned ms);

// A deadline scaled for a slow machine (test_util.h): every wait below
// goes through it.
using shmkv_test::slow_ms;

// Polls pred every poll_ms until it holds (true) or timeout_ms (scaled by
// slow_ms) passed (false).
bool wait_until(const std::function<bool()> &pred, unsigned timeout_ms, unsigned poll_ms = 5);

std::string env_or_empty(const char *name);

// ---- JSON: ../json_util.h ---------------------------------------------------

using shmkv_test::Json;
using shmkv_test::parse_json;


// ---- the test environment ---------------------------------------------------

bool is_tmpfs(const char *dir);

std::string make_temp_dir(const std::string &parent, const std::string &stem);

// Directories of one test: base/{root,spool,img}; img is on the spool's
// filesystem (rename into the spool), shm a private tmpfs directory.
class Env {
public:
	Env();
	~Env();
	Env(const Env &) = delete;
	Env &operator=(const Env &) = delete;

	const std::string &base() const { return base_; }
	const std::string &root() const { return root_; }
	const std::string &spool() const { return spool_; }
	const std::string &img() const { return img_; }
	const std::string &shm() const { return shm_; }
	std::string log_path() const { return base_ + "/loader.log"; }
	std::string img_path(const std::string &n) const { return img_ + "/" + n; }
	std::string spool_path(const std::string &cache) const
	{
		return spool_ + "/" + cache + ".shmkv";
	}
	std::string log() const { return read_file(log_path()); }

	// The loader's segment directory in the shm dir (loader/segment.h).
	std::string seg_dir() const { return shm_ + "/shmkv"; }
	// Names in the segment directory, optionally only those containing sub.
	std::vector<std::string> shm_files(const std::string &sub = "") const;

private:
	std::string base_, root_, spool_, img_, shm_;
};

// ---- the control socket -----------------------------------------------------

// Connects to ROOT/control.sock (a root too long for sun_path through
// /proc/self/fd of its directory, as the loader listens); -1 on failure
// (errno set).
int sock_connect(const std::string &root);

bool send_all(int fd, const std::string &s);

// Reads one line (without '\n') within timeout_ms; false on EOF or timeout.
bool read_line(int fd, std::string *line, unsigned timeout_ms);

std::string join_tab(const std::vector<std::string> &words);

// One request; returns the parsed reply. On a connection, timeout or parse
// problem the Json is null and *why (if given) says what happened.
Json request(const std::string &root, const std::vector<std::string> &words,
	     unsigned timeout_ms = 60000, std::string *why = nullptr);

// A request whose reply is not awaited (the crash test kills the loader under it).
int request_async(const std::string &root, const std::vector<std::string> &words);

// ---- the loader -------------------------------------------------------------

class Loader {
public:
	// extra: options after --root/--spool/--shm-dir/--foreground; the default
	// makes every cache shm-only, so that no test but hugepage_test touches
	// huge pages whatever the host mounts.
	explicit Loader(const Env &env, std::vector<std::string> extra = {"--memory", "shm"})
		: env_(env), extra_(std::move(extra))
	{
	}
	~Loader();
	Loader(const Loader &) = delete;
	Loader &operator=(const Loader &) = delete;

	std::vector<std::string> &extra() { return extra_; }

	// Starts the loader and waits (up to timeout_ms) until `ping` answers.
	bool start(std::string *why = nullptr, unsigned timeout_ms = 60000);

	// Starts it and waits for it to exit (startup refused); returns the exit
	// status (-1 when it kept running, then it is killed).
	int start_expect_exit(unsigned timeout_ms = 60000);

	pid_t pid() const { return pid_; }

	bool alive();

	// SIGKILL and reap.
	void kill9();

	// SIGTERM, up to timeout_ms for a clean exit (then SIGKILL). Returns the
	// exit code, or -1 if it had to be killed.
	int stop(unsigned timeout_ms = 60000);

	Json req(const std::vector<std::string> &words, unsigned timeout_ms = 120000);
	Json status(const std::string &cache) { return req({"status", cache}); }
	// load NAME PATH over the socket; the reply comes after publish or failure.
	Json load(const std::string &cache, const std::string &path)
	{
		return req({"load", cache, path});
	}

private:
	const Env &env_;
	std::vector<std::string> extra_;
	pid_t pid_ = -1;
	bool dumped_ = false;

	bool spawn(std::string *why);
	bool start_(std::string *why, unsigned timeout_ms);
	// its exit within timeout_ms: true with *st (pid_ reaped), else
	// kill -9 and false
	bool reaped(unsigned timeout_ms, int *st);
};

// ---- images -------------------------------------------------------------------

std::string key_of(uint64_t i);

// The value of key_<i> in an image tagged tag: "<tag>:val_<i>", followed by
// "|" and pad filler bytes when pad > 0.
std::string value_of(const std::string &tag, uint64_t i, size_t pad = 0);

// Does value v (len bytes) belong to key_<i> in an image tagged tag? Checks
// the "<tag>:val_<i>" head and that the rest is empty or starts with '|'.
bool check_value(const char *v, size_t len, const char *tag, size_t tag_len, uint64_t i);

// Finishes b into path unless err is set already, frees b: "" or the error
// (what, the builder's detail).
std::string builder_done(shmkv_builder *b, const std::string &path, int err);

// A delta of the image at base (a loaded image, or a segment file: its
// header names it): upserts, then removals; after: the delta it follows
// in its chain ("" none).
std::string build_delta(const std::string &path, const std::string &base,
			const std::vector<std::pair<std::string, std::string>> &set,
			const std::vector<std::string> &removes, const std::string &after = "");

// Builds an image of n keys tagged tag at path (written atomically by the
// builder); with out_every, every out_every-th value is padded past what a
// bucket holds (an OUT record, its entry in ENTRIES: FORMAT.md §6). Returns
// "" or the error.
std::string build_image(const std::string &path, const std::string &tag, uint64_t n,
			size_t pad = 0, uint64_t out_every = 0);

// What run_capture() saw: the exit status (128 + signal; -1: it did not
// exit in time and was killed, a failure is added), stdout and stderr.
using CmdRun = shmkv_test::Proc;

// Runs args[0] with args (stdout and stderr to files under dir, SHMKV_ROOT
// unset), bounded by timeout_ms; as uid and gid `as` without supplementary
// groups when as >= 0 (the caller is root). test_util.h's run().
CmdRun run_capture(const std::string &dir, std::vector<std::string> args, long as = -1,
		   unsigned timeout_ms = 60000);

// Runs `shmctl -r ROOT args` ($SHMCTL) on env's root, as run_capture does.
CmdRun shmctl(const Env &env, std::vector<std::string> args, unsigned timeout_ms = 60000,
	      long as = -1);

// Renames src into the spool as CACHE.shmkv (keep_src: through a hard link,
// so src stays for later use). Returns "" or the error.
std::string spool_drop(const Env &env, const std::string &src, const std::string &cache,
		       bool keep_src = false);

// Builds ENV/img/TAG.shmkv (n keys tagged tag) and loads it into cache; the
// loader's reply (a null Json, the failure added, when the build fails).
Json build_and_load(Loader &ld, const Env &env, const std::string &cache, const std::string &tag,
		    uint64_t n);

// Recomputes every section checksum of an image, then the header's: a
// forgery anyone who can write the file could make, so that only the
// structural checks stand between it and readers (image_util.h).
using testimg::reseal;

// ---- readers --------------------------------------------------------------------

// Attaches; returns the handle or nullptr with *err and *why set.
shmkv *attach(const std::string &root, const std::string &name, unsigned flags, int *err,
	      std::string *why);

// The tag of the image a handle serves ("" if it has none).
std::string tag_of(const shmkv *db);

// Checks keys key_0..key_<n-1> (step) of a handle against tag; returns the
// number of wrong or missing values.
uint64_t check_handle(const shmkv *db, const std::string &tag, uint64_t n, uint64_t step = 1);

struct CtlView {
	uint64_t generation = 0;
	uint32_t segment_count = 0;
	uint64_t loader_pid = 0;
	int64_t published_ns = 0;
	uint64_t seq = 0;
	shmkv_ctl_segment seg{};
	std::string path() const { return seg.path; }
};

// A consistent copy of ROOT/NAME.ctl (read-only mapping, seqcount loop).
bool read_ctl(const std::string &root, const std::string &name, CtlView *out);
// The same, whole, into *copy; *raw_seq (when not null): its seq word as it
// lay before the copy (odd: a publish left open).
bool read_ctl_copy(const std::string &root, const std::string &name, shmkv_ctl *copy,
		   uint64_t *raw_seq);

// ---- child processes ----------------------------------------------------------

// A forked child running fn(write_fd); its return value is the exit code.
// The parent reads what the child wrote with read_all(). The destructor
// kills a child still running.
class Child {
public:
	explicit Child(const std::function<int(int)> &fn);
	~Child();
	Child(const Child &) = delete;
	Child &operator=(const Child &) = delete;

	pid_t pid() const { return pid_; }
	int fd() const { return rfd_; }

	// Everything the child writes until it closes its end (bounded).
	std::string read_all(unsigned timeout_ms);

	// Exit code, or -1 on timeout (the child is then killed), 128+sig if killed.
	int wait_exit(unsigned timeout_ms);

private:
	pid_t pid_ = -1;
	int rfd_ = -1;
	int code_ = -1;
};

bool write_all_fd(int fd, const void *p, size_t n);

// A page shared between the test and its forked children (MAP_SHARED|MAP_ANONYMOUS).
template <class T> class Shared {
public:
	Shared()
	{
		void *m = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			       -1, 0);
		if (m == MAP_FAILED) {
			ADD_FAILURE() << "mmap: " << strerror(errno);
			return;
		}
		p_ = new (m) T();
	}
	~Shared()
	{
		if (p_) {
			p_->~T();
			munmap(p_, sizeof(T));
		}
	}
	Shared(const Shared &) = delete;
	Shared &operator=(const Shared &) = delete;
	T *operator->() const { return p_; }
	T &operator*() const { return *p_; }

private:
	T *p_ = nullptr;
};

// utime + stime of a process, in ms.
uint64_t cpu_ms(pid_t pid);

// Over 3 s, a process (the loader) uses under a fifth of the wall time in
// CPU: it does not spin while `what` goes on (a failure says so).
void expect_no_spin(pid_t pid, const std::string &what);

// Lines of the log containing all of the given words.
std::vector<std::string> log_lines(const std::string &log, const std::vector<std::string> &words);

} // namespace loader_test

#endif // SHMKV_LOADER_UTIL_H
