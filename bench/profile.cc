// profile.cc - --perf (perf stat and perf record around the run, hardware
// counters per timed pass where the machine has them) and --cachegrind (one
// callgrind child per system and table size: instructions, cache misses and
// branch mispredicts per get, for hits and for misses, counted only inside the
// timed loop by callgrind's client requests).

#include "bench.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define SHMKV_BENCH_HAVE_CALLGRIND 1
#else
#define SHMKV_BENCH_HAVE_CALLGRIND 0
#endif

extern char **environ;

namespace bench {

// ---------------------------------------------------------------- counters

namespace {

int perf_open(uint64_t config, int group)
{
	struct perf_event_attr a;
	std::memset(&a, 0, sizeof a);
	a.size = sizeof a;
	a.type = PERF_TYPE_HARDWARE;
	a.config = config;
	a.disabled = group < 0;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	a.read_format = PERF_FORMAT_GROUP;
	return (int)syscall(SYS_perf_event_open, &a, 0, -1, group, 0);
}

} // namespace

void Counters::open()
{
	static const uint64_t cfg[4] = {PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS,
					PERF_COUNT_HW_CACHE_MISSES, PERF_COUNT_HW_BRANCH_MISSES};
	static const char *names[4] = {"cycles", "instructions", "cache-misses", "branch-misses"};
	for (int i = 0; i < 4; i++) {
		fd[i] = perf_open(cfg[i], i ? fd[0] : -1);
		if (fd[i] < 0) {
			why = fmt("perf_event_open(%s): %s", names[i], std::strerror(errno));
			for (int j = 0; j < i; j++)
				close(fd[j]), fd[j] = -1;
			return;
		}
	}
	ok = true;
}

void Counters::start()
{
	if (!ok)
		return;
	ioctl(fd[0], PERF_EVENT_IOC_RESET, PERF_IOC_FLAG_GROUP);
	ioctl(fd[0], PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
}

bool Counters::stop(double per[4])
{
	if (!ok)
		return false;
	ioctl(fd[0], PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP);
	uint64_t buf[5];
	if (read(fd[0], buf, sizeof buf) != (ssize_t)sizeof buf || buf[0] != 4)
		return false;
	for (int i = 0; i < 4; i++)
		per[i] = (double)buf[1 + i];
	return true;
}

Counters::~Counters()
{
	for (int &f : fd)
		if (f >= 0)
			close(f), f = -1;
}

std::string perf_counting_note()
{
	Counters c;
	c.open();
	if (c.ok)
		return "hardware counters available (perf_event_open: cycles, instructions, "
		       "cache-misses, branch-misses)";
	return "no hardware counters here (" + c.why +
	       "): perf stat reports software events only and perf record samples cpu-clock "
	       "(a timer); use --cachegrind for instruction and cache-miss counts";
}

// ---------------------------------------------------------------- helpers

namespace {

std::string which(const char *prog)
{
	const char *path = std::getenv("PATH");
	std::string p = path ? path : "/usr/bin:/bin";
	size_t b = 0;
	while (b <= p.size()) {
		size_t e = p.find(':', b);
		std::string dir = p.substr(b, e == std::string::npos ? std::string::npos : e - b);
		std::string f = (dir.empty() ? "." : dir) + "/" + prog;
		if (access(f.c_str(), X_OK) == 0)
			return f;
		if (e == std::string::npos)
			break;
		b = e + 1;
	}
	return "";
}

int run_wait(const std::vector<std::string> &args, const char *stdout_file = nullptr)
{
	std::vector<char *> argv;
	for (const std::string &a : args)
		argv.push_back(const_cast<char *>(a.c_str()));
	argv.push_back(nullptr);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	if (stdout_file)
		posix_spawn_file_actions_addopen(&fa, 1, stdout_file, O_WRONLY | O_CREAT | O_TRUNC,
						 0644);
	pid_t pid;
	int err = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
	posix_spawn_file_actions_destroy(&fa);
	if (err) {
		note("lookup_bench: cannot run %s: %s\n", argv[0], std::strerror(err));
		return 127;
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void mkdir_p(const std::string &dir)
{
	for (size_t i = 1; i <= dir.size(); i++)
		if (i == dir.size() || dir[i] == '/')
			mkdir(dir.substr(0, i).c_str(), 0755);
}

std::string slurp(const std::string &path)
{
	std::ifstream f(path);
	std::stringstream ss;
	ss << f.rdbuf();
	return ss.str();
}

// The original arguments without --perf, for the run under perf.
std::vector<std::string> args_without(const Options &o, const char *drop)
{
	std::vector<std::string> a;
	for (size_t i = 1; i < o.argv.size(); i++)
		if (o.argv[i] != drop)
			a.push_back(o.argv[i]);
	return a;
}

} // namespace

// ---------------------------------------------------------------- --perf

namespace {

// The function each system's timed loop runs in (sys_*.cc, all noinline):
// its samples, and the lines of it perf annotates, are that system's gets.
const char *pass_function(const std::string &system)
{
	if (is_shmkv(system))
		return "pass_shmkv_str";
	if (is_shmkv_batch(system))
		return "pass_shmkv_batch";
	if (system == "axoncache")
		return "pass_axon";
	if (system == "absl")
		return "pass_map<absl::";
	if (system == "std")
		return "pass_map<std::";
	if (system == "lmdb")
		return "pass_lmdb";
	if (system == "cdb")
		return "pass_cdb";
	return nullptr;
}

// Per system, from perf.data: the symbols sampled under its pass function
// (perf report --parent: the samples whose call chain holds it, so its
// out-of-line helpers count too) and the pass function annotated per
// instruction (perf annotate), in OUT/perf-SYSTEM-report.txt and
// OUT/perf-SYSTEM-annotate.txt. Returns the markdown that lists them.
std::string perf_per_system(const Options &o, const std::string &perf, const std::string &data)
{
	std::string syms = o.out + "/perf-symbols.txt";
	if (run_wait({perf, "report", "--stdio", "-i", data, "--comm", "lookup_bench", "--no-children",
		      "-g", "none", "--sort", "symbol", "--percent-limit", "0"},
		     syms.c_str()) != 0)
		return "perf report of the symbols failed: no per-system reports.\n";
	std::string all = slurp(syms), md;
	for (const std::string &sys : o.systems) {
		const char *fn = pass_function(sys);
		if (!fn)
			continue;
		// the symbol as perf prints it: "... [.] NAME"
		std::string name;
		std::istringstream ls(all);
		std::string line;
		while (std::getline(ls, line)) {
			size_t at = line.find("[.] ");
			if (at != std::string::npos && line.find(fn, at) != std::string::npos) {
				name = line.substr(at + 4);
				size_t gap = name.find("  "); // then perf's IPC columns
				if (gap != std::string::npos)
					name.resize(gap);
				break;
			}
		}
		if (name.empty()) {
			md += "- " + sys + ": no sample in `" + fn + "` (too short a run?)\n";
			continue;
		}
		std::string rep = o.out + "/perf-" + sys + "-report.txt",
			    ann = o.out + "/perf-" + sys + "-annotate.txt";
		std::string parent = fn;
		for (size_t i = 0; i < parent.size(); i++)
			if (std::strchr("<>:*.()[]", parent[i]))
				parent[i] = '.';
		int a = run_wait({perf, "report", "--stdio", "-i", data, "--comm", "lookup_bench",
				  "--no-children", "-g", "none", "--sort", "symbol", "-p", parent, "-x",
				  "--percentage", "relative", "--percent-limit", "0.5"},
				 rep.c_str());
		int b = run_wait({perf, "annotate", "--stdio", "-i", data, name}, ann.c_str());
		md += "- " + sys + " (`" + fn + "`): " +
		      (a == 0 ? "`" + rep + "`" : "perf report failed") + ", " +
		      (b == 0 ? "`" + ann + "`" : "perf annotate failed") + "\n";
	}
	return md;
}

} // namespace

int run_under_perf(const Options &o)
{
	std::string perf = which("perf");
	std::string self = self_exe();
	std::vector<std::string> child = {self};
	for (const std::string &a : args_without(o, "--perf"))
		child.push_back(a);
	child.push_back("--perf-child");
	if (perf.empty()) {
		note("lookup_bench: --perf: perf is not installed (Debian: apt-get install "
		     "linux-perf); running without perf stat/record\n");
		return run_wait(child);
	}
	mkdir_p(o.out);
	Counters c;
	c.open();
	std::string stat_events = "task-clock,context-switches,cpu-migrations,page-faults";
	if (c.ok)
		stat_events += ",cycles,instructions,cache-misses,branch-misses";
	std::string stat_file = o.out + "/perf-stat.txt", data = o.out + "/perf.data",
		    report = o.out + "/perf-report.txt";
	std::vector<std::string> cmd = {perf, "stat", "-e", stat_events, "-o", stat_file, "--",
					perf, "record", "-q", "-e", c.ok ? "cycles" : "cpu-clock",
					"-F", "999", "-g", "-o", data, "--"};
	cmd.insert(cmd.end(), child.begin(), child.end());
	note("lookup_bench: --perf: %s\n", perf_counting_note().c_str());
	int st = run_wait(cmd);
	if (st)
		return st;
	int rst = run_wait({perf, "report", "--stdio", "-i", data, "--comm", "lookup_bench",
			    "--no-children", "-g", "none", "--percentage", "relative", "--sort", "symbol",
			    "--percent-limit", "0.5"},
			   report.c_str());
	std::string md = "\n## perf\n\n";
	md += "The run above ran under `perf stat -e " + stat_events + " -- perf record -e " +
	      (c.ok ? "cycles" : "cpu-clock") + " -F 999 -g` (" + perf_counting_note() + ").\n";
	md += "Whole-run counts (builds and checks included; the per-pass counters, where "
	      "available, are in the table above). From `" + stat_file + "`:\n\n```\n";
	std::istringstream ss(slurp(stat_file));
	std::string line;
	while (std::getline(ss, line))
		if (!line.empty() && line[0] != '#')
			md += line + "\n";
	md += "```\n\n";
	if (rst == 0) {
		md += "Top symbols of lookup_bench, all phases (`perf report --stdio --comm "
		      "lookup_bench --no-children -g none --percentage relative --sort symbol -i " + data + "`):\n\n```\n";
		std::istringstream rs(slurp(report));
		int shown = 0;
		while (std::getline(rs, line) && shown < 25) {
			if (line.empty() || line[0] == '#' || line.find('%') == std::string::npos)
				continue;
			while (!line.empty() && (line.back() == ' ' || line.back() == '-'))
				line.pop_back();
			if (line.size() > 140)
				line = line.substr(0, 137) + "...";
			md += line + "\n", shown++;
		}
		md += "```\n";
	} else {
		md += "perf report failed (status " + std::to_string(rst) + ").\n";
	}
	md += "\nPer system, the samples of its timed loop (its pass function and what that "
	      "calls: perf report -p FUNCTION -x) and the loop annotated per instruction "
	      "(perf annotate FUNCTION); builds and checks are not in them:\n\n";
	md += perf_per_system(o, perf, data);
	std::printf("%s", md.c_str());
	FILE *f = std::fopen((o.out + "/results.md").c_str(), "a");
	if (f) {
		std::fputs(md.c_str(), f);
		std::fclose(f);
	}
	return 0;
}

// ---------------------------------------------------------------- --cachegrind

namespace {

struct CgTotals {
	std::string desc;
	std::map<std::string, double> ev;
};

std::vector<CgTotals> parse_dumps(const std::string &base)
{
	std::vector<CgTotals> out;
	for (int i = 1; i < 10; i++) {
		std::ifstream f(base + "." + std::to_string(i));
		if (!f)
			break;
		CgTotals t;
		std::vector<std::string> names;
		std::string line;
		while (std::getline(f, line)) {
			std::istringstream ls(line);
			std::string k;
			ls >> k;
			if (k == "events:") {
				std::string e;
				while (ls >> e)
					names.push_back(e);
			} else if (k == "desc:" && line.find("Client Request:") != std::string::npos) {
				t.desc = line.substr(line.find("Client Request:") + 15);
				while (!t.desc.empty() && t.desc[0] == ' ')
					t.desc.erase(0, 1);
			} else if (k == "summary:" || k == "totals:") {
				double v;
				for (size_t j = 0; j < names.size() && ls >> v; j++)
					t.ev[names[j]] = v;
			}
		}
		out.push_back(t);
	}
	return out;
}

} // namespace

// The per-line report of one counted dump (callgrind_annotate, part of
// valgrind): the counted gets' instructions, misses and branches by source
// line, so that a regression in the table points at its lines.
static void annotate(const std::string &dump, const std::string &out, Report &r)
{
	std::string ca = which("callgrind_annotate");
	if (ca.empty()) {
		if (r.notes.empty() || r.notes.back().find("callgrind_annotate") == std::string::npos)
			r.notes.push_back("No per-line reports: callgrind_annotate (valgrind) not found.");
		return;
	}
	int st = run_wait({ca, "--auto=yes", "--inclusive=no", "--show-percs=yes", dump}, out.c_str());
	if (st)
		r.notes.push_back(fmt("callgrind_annotate %s exited with %d", dump.c_str(), st));
	else
		r.cg_reports.push_back(out);
}

void run_cachegrind(const Options &o, Report &r)
{
	std::string vg = which("valgrind");
	if (vg.empty() || !SHMKV_BENCH_HAVE_CALLGRIND) {
		std::string why = vg.empty() ? "valgrind is not installed (apt-get install valgrind)"
					     : "<valgrind/callgrind.h> was missing at build time";
		note("lookup_bench: cachegrind phase skipped: %s\n", why.c_str());
		r.notes.push_back("Cachegrind phase skipped: " + why + ".");
		return;
	}
	std::string dir = o.out + "/cachegrind";
	mkdir_p(dir);
	std::string self = self_exe();
	for (uint64_t n : o.cg_keys)
		for (const std::string &sys : o.systems) {
			std::string base = fmt("%s/callgrind-%s-%" PRIu64 ".out", dir.c_str(), sys.c_str(), n);
			for (int i = 1; i < 10; i++)
				unlink((base + "." + std::to_string(i)).c_str());
			std::vector<std::string> cmd = {
				vg, "--tool=callgrind", "--cache-sim=yes", "--branch-sim=yes",
				"--I1=32768,8,64", "--D1=32768,8,64",
				"--LL=33554432,16," + std::to_string(o.cg_ll_line),
				"--instr-atstart=no", "--collect-atstart=no", "--quiet",
				"--callgrind-out-file=" + base, self, "--cg-child", sys, "--keys",
				std::to_string(n), "--cachegrind-lookups", std::to_string(o.cg_lookups),
				"--seed", std::to_string(o.seed), "--dir", o.dir};
			if (o.load_factor > 0)
				cmd.insert(cmd.end(), {"--load-factor", fmt("%.6g", o.load_factor)});
			note("[cachegrind %" PRIu64 " keys] %s under valgrind\n", n, sys.c_str());
			auto t0 = Clock::now();
			int st = run_wait(cmd);
			if (st)
				fail("cachegrind child for %s exited with %d", sys.c_str(), st);
			unlink(base.c_str()); // the final dump (nothing collected after the last)
			std::vector<CgTotals> dumps = parse_dumps(base);
			for (size_t i = 0; i < dumps.size(); i++) {
				const CgTotals &t = dumps[i];
				if (t.desc != "hit" && t.desc != "hit-full" && t.desc != "miss")
					continue;
				annotate(base + "." + std::to_string(i + 1),
					 fmt("%s/annotate-%s-%" PRIu64 "-%s.txt", dir.c_str(), sys.c_str(),
					     n, t.desc.c_str()),
					 r);
				CgRecord c;
				c.keys = n;
				c.system = sys;
				c.kind = t.desc;
				c.lookups = o.cg_lookups;
				double m = (double)o.cg_lookups;
				auto ev = [&t](const char *k) {
					auto it = t.ev.find(k);
					return it == t.ev.end() ? 0.0 : it->second;
				};
				c.ir = ev("Ir") / m;
				c.d1_miss = (ev("D1mr") + ev("D1mw")) / m;
				c.ll_miss = (ev("DLmr") + ev("DLmw") + ev("ILmr")) / m;
				c.branches = (ev("Bc") + ev("Bi")) / m;
				c.mispredicts = (ev("Bcm") + ev("Bim")) / m;
				r.cg.push_back(c);
			}
			note("[cachegrind %" PRIu64 " keys] %s done in %.0f s\n", n, sys.c_str(),
			     seconds_since(t0));
		}
}

// Under valgrind: build one system, warm the simulated caches with one hit
// and one miss pass, then count one pass of each, dumped as "hit" and "miss",
// then the hits again reading every value byte ("hit-full").
// The stream is walked in chunks of 64 keys; before each chunk, outside the
// counted region, its keys are touched, so that the counts are the store's
// own: the simulator has no prefetcher, and the stream (32 bytes per key,
// read in order) would otherwise add up to 0.5 cache misses per get to every
// system alike. Counting is toggled per chunk (2 client requests per 64 gets).
int cg_child_main(const Options &o, const std::string &system, uint64_t n)
{
#if SHMKV_BENCH_HAVE_CALLGRIND
	Dataset d = make_dataset(n, Kind::Str);
	std::unique_ptr<System> sys = make_system(system, o, Kind::Str, nullptr);
	sys->build(d, o.dir);
	Stream hit = make_stream(d, Pattern::Uniform, o.cg_lookups, o.seed, o.zipf_theta);
	Stream hit_full = make_stream(d, Pattern::UniformFull, o.cg_lookups, o.seed, o.zipf_theta);
	Stream miss = make_stream(d, Pattern::Miss100, o.cg_lookups, o.seed, o.zipf_theta);
	const size_t chunk = 64;
	auto run = [&](const Stream &s, bool count) {
		PassResult total;
		volatile unsigned char sink = 0;
		for (size_t b = 0; b < s.keys.size(); b += chunk) {
			size_t e = std::min(s.keys.size(), b + chunk);
			for (size_t i = b; i < e; i++) {
				const unsigned char *k = (const unsigned char *)&s.keys[i];
				const unsigned char *v = (const unsigned char *)&s.views[i];
				sink = (unsigned char)(sink + k[0] + k[sizeof s.keys[i] - 1] + v[0] +
						       v[sizeof s.views[i] - 1]);
			}
			if (count)
				CALLGRIND_TOGGLE_COLLECT;
			PassResult r = sys->pass(s, b, e);
			if (count)
				CALLGRIND_TOGGLE_COLLECT;
			total.found += r.found;
			total.sum += r.sum;
		}
		if (total.found != s.hits || total.sum != s.expect)
			fail("%s under cachegrind: %s pass found %" PRIu64 " of %" PRIu64,
			     system.c_str(), s.name.c_str(), total.found, s.hits);
	};
	CALLGRIND_START_INSTRUMENTATION;
	run(hit, false);
	run(miss, false);
	CALLGRIND_ZERO_STATS;
	run(hit, true);
	CALLGRIND_DUMP_STATS_AT("hit");
	run(miss, true);
	CALLGRIND_DUMP_STATS_AT("miss");
	// the hit keys again, every value byte read, after the same passes as
	// the counted hits came after (the hit keys, then the misses): the same
	// simulated cache contents, so hit and hit-full differ only by the read
	run(hit_full, true);
	CALLGRIND_DUMP_STATS_AT("hit-full");
	CALLGRIND_STOP_INSTRUMENTATION;
	sys->release();
	sys->remove();
	return 0;
#else
	(void)o, (void)system, (void)n;
	fail("built without <valgrind/callgrind.h>");
#endif
}

} // namespace bench
