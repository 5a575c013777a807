// util.cc - clocks, random numbers, messages, files to clean up on failure.

#include "bench.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <mutex>
#include <sstream>

namespace bench {

double seconds_since(Clock::time_point t0)
{
	return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU time of this thread: unlike the wall clock it leaves out the time the
// thread waited for a core, which on a busy 2-core VM is most of the noise.
double thread_cpu_seconds()
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t splitmix64(uint64_t &state)
{
	uint64_t z = (state += UINT64_C(0x9E3779B97F4A7C15));
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

// multiply-shift range reduction: uniform enough for n << 2^64
uint64_t uniform(uint64_t &state, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)splitmix64(state) * n) >> 64);
}

std::string fmt(const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	char buf[1024];
	std::vsnprintf(buf, sizeof buf, f, ap);
	va_end(ap);
	return buf;
}

// Files to remove if the run dies: a fixed table, so that the signal handler
// can walk it (unlink is async-signal-safe).
namespace {
constexpr int kMaxFiles = 32;
char g_files[kMaxFiles][512];
std::mutex g_files_mu;

void unlink_tracked()
{
	for (auto &f : g_files)
		if (f[0])
			unlink(f);
}

extern "C" void on_signal(int sig)
{
	unlink_tracked();
	signal(sig, SIG_DFL);
	raise(sig);
}
} // namespace

void track_file(const std::string &path)
{
	std::lock_guard<std::mutex> l(g_files_mu);
	static bool handlers = false;
	if (!handlers) {
		signal(SIGINT, on_signal);
		signal(SIGTERM, on_signal);
		signal(SIGHUP, on_signal);
		handlers = true;
	}
	for (auto &f : g_files)
		if (!f[0] && path.size() < sizeof f) {
			std::memcpy(f, path.c_str(), path.size() + 1);
			return;
		}
}

void untrack_file(const std::string &path)
{
	std::lock_guard<std::mutex> l(g_files_mu);
	for (auto &f : g_files)
		if (path == f)
			f[0] = 0;
}

void fail(const char *f, ...)
{
	unlink_tracked();
	va_list ap;
	va_start(ap, f);
	std::fprintf(stderr, "\nlookup_bench: FAILED: ");
	std::vfprintf(stderr, f, ap);
	std::fprintf(stderr, "\n");
	va_end(ap);
	std::exit(1);
}

void note(const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	std::vfprintf(stderr, f, ap);
	va_end(ap);
	std::fflush(stderr);
}

// The 1-, 5- and 15-minute load averages: other work on the machine skews numbers.
std::string loadavg()
{
	std::ifstream f("/proc/loadavg");
	std::string a, b, c;
	f >> a >> b >> c;
	return a + " " + b + " " + c;
}

uint64_t mem_available()
{
	std::ifstream f("/proc/meminfo");
	std::string k;
	uint64_t v;
	std::string unit;
	while (f >> k >> v >> unit)
		if (k == "MemAvailable:")
			return v * 1024;
	return 0;
}

std::string self_exe()
{
	char buf[4096];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
	if (n <= 0)
		fail("readlink /proc/self/exe failed");
	buf[n] = 0;
	return buf;
}

uint64_t smaps_sum(const std::string &path, const char *field)
{
	std::ifstream f(path.empty() ? "/proc/self/smaps_rollup" : "/proc/self/smaps");
	std::string line, want = std::string(field) + ":";
	bool in = path.empty();
	uint64_t sum = 0;
	while (std::getline(f, line)) {
		std::istringstream ls(line);
		std::string k;
		ls >> k;
		if (k.empty())
			continue;
		if (k.back() != ':' || k.find('-') != std::string::npos) { // a mapping's header
			if (path.empty())
				continue;
			std::string perms, off, dev, inode, name;
			ls >> perms >> off >> dev >> inode;
			std::getline(ls, name);
			size_t b = name.find_first_not_of(' ');
			in = b != std::string::npos && name.substr(b) == path;
			continue;
		}
		uint64_t v;
		if (in && k == want && ls >> v)
			sum += v * 1024;
	}
	return sum;
}

double median(std::vector<double> v)
{
	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	size_t n = v.size();
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double best(const std::vector<double> &v)
{
	return v.empty() ? 0 : *std::min_element(v.begin(), v.end());
}

} // namespace bench
