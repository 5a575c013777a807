// report.cc - the environment line, the goals, the markdown tables, the JSON
// and the call of plot.py.

#include "bench.h"

#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <fstream>

namespace bench {

Env environment(const Options &o)
{
	Env e;
	std::ifstream f("/proc/cpuinfo");
	std::string line;
	while (std::getline(f, line))
		if (line.rfind("model name", 0) == 0) {
			e.cpu = line.substr(line.find(':') + 2);
			break;
		}
	e.nproc = sysconf(_SC_NPROCESSORS_ONLN);
	char buf[64];
	std::time_t t = std::time(nullptr);
	std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
	e.date = buf;
#if defined(__clang__)
	e.compiler = __VERSION__;
#else
	e.compiler = std::string("gcc ") + __VERSION__;
#endif
	e.load_start = loadavg();
	struct utsname u;
	if (uname(&u) == 0)
		e.kernel = std::string(u.sysname) + " " + u.release + " " + u.machine;
#ifdef NDEBUG
	e.ndebug = true;
#endif
	e.probe = shmkv_vector_name();
	for (size_t i = 0; i < o.argv.size(); i++)
		if (o.argv[i] != "--perf-child")
			e.command += (i ? " " : "") + o.argv[i];
	if (o.perf)
		e.perf_note = perf_counting_note();
	return e;
}

namespace {

const TimingRecord *find_t(const Report &r, uint64_t n, const std::string &w, const std::string &s)
{
	for (const TimingRecord &t : r.timings)
		if (t.keys == n && t.workload == w && t.system == s)
			return &t;
	return nullptr;
}

const CgRecord *find_cg(const Report &r, uint64_t n, const std::string &s, const char *kind)
{
	for (const CgRecord &c : r.cg)
		if (c.keys == n && c.system == s && c.kind == kind)
			return &c;
	return nullptr;
}

double round_ratio(const TimingRecord &t, const TimingRecord &base, bool cpu = false);
std::vector<std::string> systems_of(const Report &r);
const LatencyRecord *find_lat(const Report &r, uint64_t n, const std::string &sys,
			      const std::string &cls);

struct Goal {
	std::string what, measured, verdict;
};

std::string verdict(double got, double target)
{
	if (got <= target)
		return "met";
	return fmt("missed by %.3g (%.0f%% over)", got - target, (got / target - 1) * 100);
}

std::vector<Goal> goals(const Report &r)
{
	std::vector<Goal> g;
	auto ratio_goal = [&](const char *sys, uint64_t n, double target) {
		const TimingRecord *s = find_t(r, n, "uniform", sys), *a = find_t(r, n, "uniform", "absl");
		if (!s || !a)
			return;
		double w = median(s->ns) / median(a->ns), c = median(s->cpu_ns) / median(a->cpu_ns);
		g.push_back({fmt("%s ≤ %.2f× absl, %" PRIu64 " keys, uniform hits",
				 std::string(sys) == "shmkv" ? "single get" : "batched get", target, n),
			     fmt("%.2f× (CPU time %.2f×)", w, c), verdict(w, target)});
	};
	ratio_goal("shmkv", 1000000, 0.7);
	ratio_goal("shmkv", 10000000, 0.7);
	ratio_goal("shmkv-batch", 10000000, 0.35);
	for (const CgRecord &c : r.cg)
		if (c.system == "shmkv" && c.kind == "miss")
			g.push_back({fmt("last-level misses per absent key ≤ 1.1 (cachegrind, %" PRIu64
					 " keys)", c.keys),
				     fmt("%.3f", c.ll_miss), verdict(c.ll_miss, 1.1)});
	for (const CgRecord &c : r.cg)
		if (c.system == "shmkv" && c.kind == "hit")
			if (const CgRecord *a = find_cg(r, c.keys, "absl", "hit"))
				g.push_back({fmt("instructions per hit ≤ absl's (cachegrind, %" PRIu64
						 " keys)", c.keys),
					     fmt("%.1f vs absl %.1f", c.ir, a->ir), verdict(c.ir, a->ir)});
	// The later goals, per read mode: in-run ratios (median of per-round ratios)
	auto round_goal = [&](const char *sys, const char *base, uint64_t n, const char *w,
			      double target) {
		const TimingRecord *s = find_t(r, n, w, sys), *a = find_t(r, n, w, base);
		if (!s || !a)
			return;
		double x = round_ratio(*s, *a), c = round_ratio(*s, *a, true);
		g.push_back({fmt("%s (%s) ≤ %.2f× %s, %" PRIu64 " keys, uniform hits, %s",
				 is_shmkv(sys) ? "single get" : "batched get", sys, target, base,
				 n, std::string(w) == "uniform" ? "length + first byte" : "every value byte"),
			     fmt("%.2f× (CPU time %.2f×)", x, c), verdict(x, target)});
	};
	for (uint64_t n : {1000000ull, 10000000ull})
		for (const char *w : {"uniform", "uniform-full"})
			for (const std::string &s : systems_of(r)) {
				if (is_shmkv(s)) {
					round_goal(s.c_str(), "absl", n, w, 0.6);
					round_goal(s.c_str(), "axoncache", n, w, 0.7);
				} else if (is_shmkv_batch(s)) {
					round_goal(s.c_str(), "absl", n, w, 0.3);
				}
			}
	for (const CgRecord &c : r.cg)
		if (is_shmkv(c.system) && (c.kind == "hit" || c.kind == "hit-full"))
			g.push_back({fmt("last-level misses per hit ≤ 1.1 (cachegrind, %s, %" PRIu64
					 " keys, %s)", c.system.c_str(), c.keys, c.kind.c_str()),
				     fmt("%.3f", c.ll_miss), verdict(c.ll_miss, 1.1)});
	for (const LatencyRecord &l : r.latency)
		if (is_shmkv(l.system) && (l.cls == "home" || l.cls == "home-full"))
			if (const LatencyRecord *c = find_lat(r, l.keys, "chase:" + l.system, ""))
				if (c->p50 > 0)
					g.push_back({fmt("lone get (%s, %s keys, p50) ≤ 1.2× one "
							 "random memory access (%s), %" PRIu64 " keys",
							 l.system.c_str(), l.cls.c_str(), c->cls.c_str(), l.keys),
						     fmt("%.1f / %.1f ns = %.2f×", l.p50, c->p50,
							 l.p50 / c->p50),
						     verdict(l.p50 / c->p50, 1.2)});
	if (const TimingRecord *s = find_t(r, 1000000, "uniform", "shmkv")) {
		double b = (double)s->bytes / 1e6;
		g.push_back({"image ≤ 42 bytes per key, 1M keys", fmt("%.2f", b), verdict(b, 42)});
	}
	return g;
}

std::string ratio(double v, double base)
{
	return base > 0 ? fmt("%.2f", v / base) : "-";
}

std::string mem_cell(const TimingRecord &t)
{
	double n = (double)t.keys;
	if (t.bytes == t.malloc_bytes)
		return fmt("%.1f", (double)t.bytes / n);
	return fmt("%.1f (%.1f)", (double)t.bytes / n, (double)t.malloc_bytes / n);
}

std::vector<uint64_t> sizes_of(const Report &r, bool typed)
{
	std::vector<uint64_t> v;
	for (const TimingRecord &t : r.timings)
		if ((t.workload == "typed") == typed && std::find(v.begin(), v.end(), t.keys) == v.end())
			v.push_back(t.keys);
	return v;
}

std::vector<std::string> systems_of(const Report &r)
{
	std::vector<std::string> v;
	for (const TimingRecord &t : r.timings)
		if (std::find(v.begin(), v.end(), t.system) == v.end())
			v.push_back(t.system);
	return v;
}

std::string mib(uint64_t b)
{
	return fmt("%.1f", (double)b / 1048576.0);
}


// Median over the rounds of the per-round ratio t/base: pass i of every
// system ran in the same round of the round-robin (phases.cc), so a round's
// ratio sees one load; robust where the machine's load swings between rounds.
double round_ratio(const TimingRecord &t, const TimingRecord &base, bool cpu)
{
	const std::vector<double> &x = cpu ? t.cpu_ns : t.ns, &y = cpu ? base.cpu_ns : base.ns;
	std::vector<double> v;
	for (size_t i = 0; i < x.size() && i < y.size(); i++)
		if (y[i] > 0)
			v.push_back(x[i] / y[i]);
	return v.empty() ? 0 : median(v);
}

// Every shmkv system against absl and AxonCache, per table size and read
// mode, as the median of per-round ratios (and the ratio of medians).
void write_ratios(const Report &r, FILE *f)
{
	std::vector<std::string> shm;
	for (const std::string &s : systems_of(r))
		if (s.rfind("shmkv", 0) == 0)
			shm.push_back(s);
	const char *bases[] = {"absl", "axoncache"};
	bool any = false;
	for (const TimingRecord &t : r.timings)
		any |= (t.workload == "uniform" || t.workload == "uniform-full") &&
		       (t.system == "absl" || t.system == "axoncache");
	if (shm.empty() || !any)
		return;
	std::fprintf(f, "## Ratios: shmkv against absl and AxonCache\n\n"
			"Uniform hits; first: length + first byte read, full: every value byte. "
			"Each cell: the median over the rounds of the ratio of that round's passes "
			"(all systems timed in the same round, interleaved), then in parentheses "
			"the ratio of the median passes; cpu: the same by the thread's CPU time "
			"(on a loaded machine the wall clock counts time other processes ran). "
			"Lower is faster for shmkv.\n\n");
	std::fprintf(f, "| keys | read | system | ns/get | x absl | x axoncache | x absl (cpu) | "
			"x axoncache (cpu) |\n|---:|---|---|---:|---:|---:|---:|---:|\n");
	for (uint64_t n : sizes_of(r, false))
		for (const char *w : {"uniform", "uniform-full"})
			for (const std::string &s : shm) {
				const TimingRecord *t = find_t(r, n, w, s);
				if (!t)
					continue;
				std::fprintf(f, "| %" PRIu64 " | %s | %s | %.1f", n,
					     std::string(w) == "uniform" ? "first" : "full", s.c_str(),
					     median(t->ns));
				for (const char *b : bases) {
					const TimingRecord *a = find_t(r, n, w, b);
					if (!a)
						std::fprintf(f, " | -");
					else
						std::fprintf(f, " | **%.2f** (%.2f)", round_ratio(*t, *a),
							     median(t->ns) / median(a->ns));
				}
				for (const char *b : bases) {
					const TimingRecord *a = find_t(r, n, w, b);
					if (!a)
						std::fprintf(f, " | -");
					else
						std::fprintf(f, " | %.2f (%.2f)", round_ratio(*t, *a, true),
							     median(t->cpu_ns) / median(a->cpu_ns));
				}
				std::fprintf(f, " |\n");
			}
	std::fprintf(f, "\n");
}

const LatencyRecord *find_lat(const Report &r, uint64_t n, const std::string &sys,
			      const std::string &cls)
{
	for (const LatencyRecord &l : r.latency)
		if (l.keys == n && l.system == sys && (cls.empty() || l.cls == cls))
			return &l;
	return nullptr;
}

} // namespace

void write_markdown(const Options &o, const Report &r, FILE *f)
{
	const Env &e = r.env;
	std::fprintf(f, "# shmkv lookup_bench\n\n");
	std::fprintf(f, "%s, %ld CPUs; %s; %s; %s; NDEBUG %s; probe **%s**; load average %s at "
			"start, %s at end.\n\n",
		     e.cpu.c_str(), e.nproc, e.kernel.c_str(), e.date.c_str(), e.compiler.c_str(),
		     e.ndebug ? "on" : "off", e.probe.c_str(), e.load_start.c_str(),
		     e.load_end.c_str());
	std::fprintf(f, "Command: `%s`\n\n", e.command.c_str());
	if (!e.perf_note.empty())
		std::fprintf(f, "perf: %s.\n\n", e.perf_note.c_str());

	auto gl = goals(r);
	if (!gl.empty()) {
		std::fprintf(f, "## Goals\n\n| goal | measured | verdict |\n|---|---|---|\n");
		for (const Goal &g : gl)
			std::fprintf(f, "| %s | %s | %s |\n", g.what.c_str(), g.measured.c_str(),
				     g.verdict.c_str());
		std::fprintf(f, "\n");
	}

	std::vector<std::string> systems = systems_of(r);
	std::vector<uint64_t> sizes = sizes_of(r, false);
	const char *wls[] = {"uniform", "uniform-full", "zipf", "miss50"};
	if (!sizes.empty() && find_t(r, sizes[0], "build", systems[0]) == nullptr) {
		std::fprintf(f, "## String workloads: ns per get\n\n");
		std::fprintf(f, "`key_N` → `val_N`; %" PRIu64 " lookups per pass, %u passes, seed %" PRIu64
				"; median pass by the wall clock, and in parentheses the ratio of "
				"medians against absl. uniform: every key equally likely, a hit reads "
				"the value's length and first byte; uniform-full: the same keys, a "
				"hit reads every value byte; zipf: "
				"Zipf(%.2f) popularity; miss50: half the keys absent (`key_N` with N "
				"past the table).\n\n",
			     o.lookups, o.reps, o.seed, o.zipf_theta);
		std::fprintf(f, "| keys | system | uniform | uniform-full | zipf | miss50 |\n"
				"|---:|---|---:|---:|---:|---:|\n");
		for (uint64_t n : sizes)
			for (const std::string &s : systems) {
				if (!find_t(r, n, "uniform", s) && !find_t(r, n, "uniform-full", s))
					continue;
				std::fprintf(f, "| %" PRIu64 " | %s", n, s.c_str());
				for (const char *w : wls) {
					const TimingRecord *t = find_t(r, n, w, s), *a = find_t(r, n, w, "absl");
					if (!t)
						std::fprintf(f, " | -");
					else
						std::fprintf(f, " | %.1f (%s)", median(t->ns),
							     a ? ratio(median(t->ns), median(a->ns)).c_str() : "-");
				}
				std::fprintf(f, " |\n");
			}
		std::fprintf(f, "\n");
	}

	write_ratios(r, f);

	if (!sizes.empty()) {
		std::fprintf(f, "## Build, open and size\n\n");
		std::fprintf(f, "build: shmkv builder new/add/finish into the file; maps reserve + emplace; "
				"LMDB sort + MDB_APPEND puts; CDB cdb_make. open: shmkv_open_file with "
				"POPULATE and checksums; LMDB env open + DBI; CDB open + cdb_init (both "
				"lazy mmaps). bytes/key: file size / N, or for the maps the bytes "
				"requested from the allocator (mallinfo2 growth in parentheses).\n\n");
		std::fprintf(f, "| keys | system | build s | open ms | bytes/key | notes |\n"
				"|---:|---|---:|---:|---:|---|\n");
		for (uint64_t n : sizes)
			for (const std::string &s : systems) {
				const TimingRecord *t = find_t(r, n, "uniform", s);
				if (!t)
					t = find_t(r, n, "build", s);
				if (!t)
					continue;
				bool file = t->bytes == t->malloc_bytes;
				std::fprintf(f, "| %" PRIu64 " | %s | %.2f | %s | %s | %s |\n", n, s.c_str(),
					     t->build_s, file ? fmt("%.2f", t->open_s * 1e3).c_str() : "-",
					     mem_cell(*t).c_str(), t->notes.c_str());
			}
		std::fprintf(f, "\n");
	}

	auto detail = [&](const char *w, uint64_t n) {
		const TimingRecord *a = find_t(r, n, w, "absl");
		for (const std::string &s : systems) {
			const TimingRecord *t = find_t(r, n, w, s);
			if (!t)
				continue;
			std::string x = a ? fmt("%s (%s)", ratio(median(t->ns), median(a->ns)).c_str(),
						ratio(median(t->cpu_ns), median(a->cpu_ns)).c_str())
					  : "-";
			std::fprintf(f, "| %" PRIu64 " | %s | %s | %.1f (%.1f) | %.1f | %s |", n, w,
				     s.c_str(), median(t->ns), best(t->ns), median(t->cpu_ns), x.c_str());
			if (t->cycles >= 0)
				std::fprintf(f, " %.0f | %.0f | %.2f | %.3f |", t->cycles, t->instructions,
					     t->llc_misses, t->branch_misses);
			std::fprintf(f, "\n");
		}
	};
	bool counted = false;
	for (const TimingRecord &t : r.timings)
		counted |= t.cycles >= 0;
	const char *hdr = counted ? "| keys | workload | system | ns/get median (best) | cpu ns/get | "
				    "x absl wall (cpu) | cycles | instructions | LLC misses | "
				    "branch misses |\n|---:|---|---|---:|---:|---:|---:|---:|---:|---:|\n"
				  : "| keys | workload | system | ns/get median (best) | cpu ns/get | "
				    "x absl wall (cpu) |\n|---:|---|---|---:|---:|---:|\n";
	if (!sizes.empty() && find_t(r, sizes[0], "build", systems[0]) == nullptr) {
		std::fprintf(f, "## Details\n\nMedian pass (best pass) by the wall clock; cpu ns/get: "
				"the thread's CPU time, median pass (well below the wall figure: the "
				"run was disturbed)%s.\n\n%s",
			     counted ? "; counters: per get, median pass (perf_event_open)" : "", hdr);
		for (uint64_t n : sizes)
			for (const char *w : wls)
				detail(w, n);
		std::fprintf(f, "\n");
	}

	std::vector<uint64_t> tsizes = sizes_of(r, true);
	if (!tsizes.empty()) {
		std::fprintf(f, "## Typed workload: f32 lists of 16–128 floats\n\n"
				"Uniform hits; each hit sums the floats it gets back (shmkv_get_f32list "
				"and the batch API's f32list values; the maps hold std::vector<float>; "
				"LMDB and CDB hold the raw floats).\n\n");
		std::fprintf(f, "| keys | system | build s | open ms | bytes/key | ns/get median (best) | "
				"cpu ns/get | x absl |\n|---:|---|---:|---:|---:|---:|---:|---:|\n");
		for (uint64_t n : tsizes) {
			const TimingRecord *a = find_t(r, n, "typed", "absl");
			for (const std::string &s : systems) {
				const TimingRecord *t = find_t(r, n, "typed", s);
				if (!t)
					continue;
				bool file = t->bytes == t->malloc_bytes;
				std::fprintf(f, "| %" PRIu64 " | %s | %.2f | %s | %s | %.1f (%.1f) | %.1f | %s |\n",
					     n, s.c_str(), t->build_s,
					     file ? fmt("%.2f", t->open_s * 1e3).c_str() : "-",
					     mem_cell(*t).c_str(), median(t->ns), best(t->ns),
					     median(t->cpu_ns),
					     a ? ratio(median(t->ns), median(a->ns)).c_str() : "-");
			}
		}
		std::fprintf(f, "\n");
	}

	if (!r.threads.empty()) {
		unsigned tmax = 0;
		for (const ThreadRecord &t : r.threads)
			tmax = std::max(tmax, t.threads);
		std::fprintf(f, "## Thread scaling: million lookups per second\n\n"
				"%" PRIu64 " keys, uniform hits, one stream of %" PRIu64 " lookups split "
				"over T threads; median of 3; %ld CPUs.\n\n| system |",
			     r.threads[0].keys, o.lookups, e.nproc);
		for (unsigned t = 1; t <= tmax; t++)
			std::fprintf(f, " %u |", t);
		std::fprintf(f, " %u vs 1 | x absl at %u |\n|---|", tmax, tmax);
		for (unsigned t = 0; t <= tmax + 1; t++)
			std::fprintf(f, "---:|");
		std::fprintf(f, "\n");
		auto q = [&](const std::string &s, unsigned t) {
			for (const ThreadRecord &x : r.threads)
				if (x.system == s && x.threads == t)
					return median(x.mops);
			return 0.0;
		};
		for (const std::string &s : systems) {
			if (q(s, 1) == 0)
				continue;
			std::fprintf(f, "| %s |", s.c_str());
			for (unsigned t = 1; t <= tmax; t++)
				std::fprintf(f, " %.2f |", q(s, t));
			double a = q("absl", tmax);
			std::fprintf(f, " %.2f | %s |\n", q(s, tmax) / q(s, 1),
				     a > 0 ? fmt("%.2f", q(s, tmax) / a).c_str() : "-");
		}
		std::fprintf(f, "\n");
	}

	if (!r.procs.empty()) {
		std::fprintf(f, "## Reader processes sharing one file\n\n"
				"%" PRIu64 " keys. Each process opens the file (shmkv: shmkv_open_file with "
				"POPULATE; LMDB, CDB: lazy mmap), makes %" PRIu64 " uniform lookups, waits "
				"for the others, then reads /proc/self/smaps_rollup (MiB). absl: one "
				"process building its own map (nothing to share). ns/get: processes "
				"run at once on %ld CPUs.\n\n",
			     r.procs[0].keys, o.proc_lookups, e.nproc);
		std::fprintf(f, "| system | process | open ms | ns/get | Rss | Pss | data file Rss | "
				"data file Pss | Pss anon |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
		for (const ProcRecord &p : r.procs)
			std::fprintf(f, "| %s | %u of %u | %.2f | %.1f | %s | %s | %s | %s | %s |\n",
				     p.system.c_str(), p.index + 1, p.procs, p.open_s * 1e3, p.ns_per_get,
				     mib(p.rss).c_str(), mib(p.pss).c_str(), mib(p.map_rss).c_str(),
				     mib(p.map_pss).c_str(), mib(p.pss_anon).c_str());
		std::fprintf(f, "\nData file Rss and Pss: the mappings of the file in /proc/self/smaps; "
				"their Pss summed over the processes is what the data costs the "
				"machine (once, when it equals the resident part of the file).\n\n"
				"| system | processes | file MiB | sum of data file Pss MiB | sum / file | "
				"sum of Rss MiB | sum of Pss MiB |\n|---|---:|---:|---:|---:|---:|---:|\n");
		for (size_t i = 0; i < r.procs.size();) {
			const ProcRecord &p0 = r.procs[i];
			uint64_t fpss = 0, rss = 0, pss = 0;
			size_t j = i;
			for (; j < r.procs.size() && r.procs[j].system == p0.system; j++)
				fpss += r.procs[j].map_pss, rss += r.procs[j].rss, pss += r.procs[j].pss;
			std::fprintf(f, "| %s | %u | %s | %s | %s | %s | %s |\n", p0.system.c_str(),
				     p0.procs, p0.file_bytes ? mib(p0.file_bytes).c_str() : "-",
				     p0.file_bytes ? mib(fpss).c_str() : "-",
				     p0.file_bytes ? fmt("%.2f", (double)fpss / (double)p0.file_bytes).c_str()
						   : "-",
				     mib(rss).c_str(), mib(pss).c_str());
			i = j;
		}
		std::fprintf(f, "\n");
	}

	if (!r.cg.empty()) {
		std::fprintf(f, "## Cachegrind: per get, inside the timed loop\n\n"
				"callgrind --cache-sim=yes --branch-sim=yes, D1 32 KiB 8-way, LL 32 MiB "
				"16-way with %u-byte lines (this CPU's L1d and L3; no L2, no "
				"prefetcher%s); %" PRIu64 " hits "
				"(uniform) and %" PRIu64 " misses (absent `key_N`, N past the table), "
				"each counted after one warm-up pass of both. Stable on a noisy "
				"machine. LL misses are data plus instruction last-level misses.\n\n",
			     o.cg_ll_line,
			     o.cg_ll_line == 64 ? ""
						: ": an LL miss fills the whole aligned line, a model of "
						  "an adjacent-line prefetcher that brings a line's pair "
						  "with it at no extra delay",
			     o.cg_lookups, o.cg_lookups);
		std::fprintf(f, "| keys | system | kind | instructions | D1 misses | LL misses | branches "
				"| mispredicts | instr x absl |\n|---:|---|---|---:|---:|---:|---:|---:|---:|\n");
		for (const CgRecord &c : r.cg) {
			const CgRecord *a = find_cg(r, c.keys, "absl", c.kind.c_str());
			std::fprintf(f, "| %" PRIu64 " | %s | %s | %.1f | %.3f | %.3f | %.1f | %.3f | %s |\n",
				     c.keys, c.system.c_str(), c.kind.c_str(), c.ir, c.d1_miss, c.ll_miss,
				     c.branches, c.mispredicts, a ? ratio(c.ir, a->ir).c_str() : "-");
		}
		std::fprintf(f, "\n");
		if (!r.cg_reports.empty()) {
			std::fprintf(f, "Per source line (callgrind_annotate --auto=yes --inclusive=no "
					"of the counted gets, per system and kind):\n\n");
			for (const std::string &s : r.cg_reports)
				std::fprintf(f, "- `%s`\n", s.c_str());
			std::fprintf(f, "\n");
		}
	}

	if (!r.latency.empty()) {
		std::fprintf(f, "## Latency of single gets: home bucket and displaced keys\n\n"
				"Each get of %" PRIu64 " uniform hits timed on its own (%s); keys "
				"filed by where they live: their home bucket or a later one "
				"(displaced). ns per get; each percentile the median of %u passes. "
				"A lookup should cost the same for every key: p99/p50, and "
				"displaced against home.\n\n",
			     o.lat_lookups, r.latency[0].timer.c_str(), o.reps);
		std::fprintf(f, "Gets of class home/displaced read the value's length and first "
				"byte, *-full every value byte, inside the timed region. chase: in "
				"the same passes, one dependent random access over a buffer of the "
				"image's size, timed the same way (latency.cc, class Chase); p50 x "
				"chase is the lone get against one memory access of this machine.\n\n");
		std::fprintf(f, "| keys | system | keys in | gets | p50 | p99 | p99.9 | p99/p50 | "
				"p50 x home | p50 x chase |\n|---:|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
		for (const LatencyRecord &l : r.latency) {
			const LatencyRecord *h = nullptr;
			for (const LatencyRecord &x : r.latency)
				if (x.keys == l.keys && x.system == l.system &&
				    x.cls == (l.cls.find("-full") != std::string::npos ? "home-full" : "home"))
					h = &x;
			const LatencyRecord *c = find_lat(r, l.keys, "chase:" + l.system, "");
			std::fprintf(f, "| %" PRIu64 " | %s | %s | %" PRIu64 " | %.1f | %.1f | %.1f | "
					"%s | %s | %s |\n",
				     l.keys, l.system.c_str(), l.cls.c_str(), l.gets, l.p50, l.p99, l.p999,
				     l.p50 > 0 ? fmt("%.2f", l.p99 / l.p50).c_str() : "-",
				     h && h->p50 > 0 ? fmt("%.2f", l.p50 / h->p50).c_str() : "-",
				     c && c->p50 > 0 ? fmt("%.2f", l.p50 / c->p50).c_str() : "-");
		}
		std::fprintf(f, "\n");
		for (const LatencyRecord &l : r.latency)
			if (!l.notes.empty())
				std::fprintf(f, "- %" PRIu64 " keys, %s (%s): %s.\n", l.keys, l.system.c_str(),
					     l.cls.c_str(), l.notes.c_str());
		std::fprintf(f, "\n");
	}

	for (const std::string &s : r.notes)
		std::fprintf(f, "- %s\n", s.c_str());
	if (!r.notes.empty())
		std::fprintf(f, "\n");
	for (const std::string &s : r.files)
		std::fprintf(f, "- wrote %s\n", s.c_str());
}

namespace {

std::string js(const std::string &s)
{
	std::string o = "\"";
	for (char c : s) {
		if (c == '"' || c == '\\')
			o += '\\', o += c;
		else if ((unsigned char)c < 0x20)
			o += ' ';
		else
			o += c;
	}
	return o + "\"";
}

std::string jarr(const std::vector<double> &v)
{
	std::string s = "[";
	for (size_t i = 0; i < v.size(); i++)
		s += fmt("%s%.3f", i ? ", " : "", v[i]);
	return s + "]";
}

} // namespace

void write_json(const Options &o, const Report &r, const std::string &path)
{
	FILE *f = std::fopen(path.c_str(), "w");
	if (!f)
		fail("cannot write %s: %s", path.c_str(), std::strerror(errno));
	const Env &e = r.env;
	std::fprintf(f, "{\n  \"bench\": \"lookup_bench\",\n  \"cpu\": %s,\n  \"nproc\": %ld,\n",
		     js(e.cpu).c_str(), e.nproc);
	std::fprintf(f, "  \"date\": %s,\n  \"compiler\": %s,\n  \"kernel\": %s,\n",
		     js(e.date).c_str(), js(e.compiler).c_str(), js(e.kernel).c_str());
	std::fprintf(f, "  \"ndebug\": %s,\n  \"probe\": %s,\n  \"command\": %s,\n",
		     e.ndebug ? "true" : "false", js(e.probe).c_str(), js(e.command).c_str());
	std::fprintf(f, "  \"loadavg_start\": %s,\n  \"loadavg_end\": %s,\n",
		     js(e.load_start).c_str(), js(e.load_end).c_str());
	std::fprintf(f, "  \"lookups\": %" PRIu64 ",\n  \"reps\": %u,\n  \"seed\": %" PRIu64
			",\n  \"zipf_theta\": %.3f,\n",
		     o.lookups, o.reps, o.seed, o.zipf_theta);
	std::fprintf(f, "  \"goals\": [");
	auto gl = goals(r);
	for (size_t i = 0; i < gl.size(); i++)
		std::fprintf(f, "%s\n    {\"goal\": %s, \"measured\": %s, \"verdict\": %s}",
			     i ? "," : "", js(gl[i].what).c_str(), js(gl[i].measured).c_str(),
			     js(gl[i].verdict).c_str());
	std::fprintf(f, "\n  ],\n  \"timings\": [");
	for (size_t i = 0; i < r.timings.size(); i++) {
		const TimingRecord &t = r.timings[i];
		const TimingRecord *a = find_t(r, t.keys, t.workload, "absl");
		std::fprintf(f, "%s\n    {\"keys\": %" PRIu64 ", \"workload\": %s, \"system\": %s, ",
			     i ? "," : "", t.keys, js(t.workload).c_str(), js(t.system).c_str());
		std::fprintf(f, "\"build_s\": %.4f, \"open_s\": %.6f, \"bytes\": %" PRIu64
				", \"malloc_bytes\": %" PRIu64 ", \"bytes_per_key\": %.3f, ",
			     t.build_s, t.open_s, t.bytes, t.malloc_bytes,
			     (double)t.bytes / (double)t.keys);
		std::fprintf(f, "\"lookups\": %" PRIu64 ", \"hits\": %" PRIu64 ", ", t.lookups, t.hits);
		if (!t.ns.empty()) {
			std::fprintf(f, "\"ns_per_get_median\": %.3f, \"ns_per_get_best\": %.3f, "
					"\"cpu_ns_per_get_median\": %.3f, ",
				     median(t.ns), best(t.ns), median(t.cpu_ns));
			// per pass, in round order: pass i of every system ran in round i
			for (int cpu = 0; cpu < 2; cpu++) {
				const std::vector<double> &v = cpu ? t.cpu_ns : t.ns;
				std::fprintf(f, "\"%s\": [", cpu ? "cpu_ns_per_pass" : "ns_per_pass");
				for (size_t k = 0; k < v.size(); k++)
					std::fprintf(f, "%s%.3f", k ? ", " : "", v[k]);
				std::fprintf(f, "], ");
			}
			if (a && !a->ns.empty())
				std::fprintf(f, "\"ratio_vs_absl\": %.4f, \"cpu_ratio_vs_absl\": %.4f, ",
					     median(t.ns) / median(a->ns), median(t.cpu_ns) / median(a->cpu_ns));
		}
		if (t.cycles >= 0)
			std::fprintf(f, "\"cycles\": %.2f, \"instructions\": %.2f, \"llc_misses\": %.4f, "
					"\"branch_misses\": %.4f, ",
				     t.cycles, t.instructions, t.llc_misses, t.branch_misses);
		std::fprintf(f, "\"ns_passes\": %s, \"cpu_ns_passes\": %s, \"notes\": %s}",
			     jarr(t.ns).c_str(), jarr(t.cpu_ns).c_str(), js(t.notes).c_str());
	}
	std::fprintf(f, "\n  ],\n  \"threads\": [");
	for (size_t i = 0; i < r.threads.size(); i++) {
		const ThreadRecord &t = r.threads[i];
		std::fprintf(f, "%s\n    {\"keys\": %" PRIu64 ", \"system\": %s, \"threads\": %u, "
				"\"mops_median\": %.3f, \"mops\": %s}",
			     i ? "," : "", t.keys, js(t.system).c_str(), t.threads, median(t.mops),
			     jarr(t.mops).c_str());
	}
	std::fprintf(f, "\n  ],\n  \"procs\": [");
	for (size_t i = 0; i < r.procs.size(); i++) {
		const ProcRecord &p = r.procs[i];
		std::fprintf(f, "%s\n    {\"keys\": %" PRIu64 ", \"system\": %s, \"procs\": %u, "
				"\"index\": %u, \"open_s\": %.6f, \"ns_per_get\": %.2f, \"file_bytes\": %" PRIu64
				", \"rss\": %" PRIu64 ", \"pss\": %" PRIu64 ", \"pss_anon\": %" PRIu64
				", \"pss_file\": %" PRIu64 ", \"pss_shmem\": %" PRIu64
				", \"file_rss\": %" PRIu64 ", \"file_pss\": %" PRIu64 "}",
			     i ? "," : "", p.keys, js(p.system).c_str(), p.procs, p.index, p.open_s,
			     p.ns_per_get, p.file_bytes, p.rss, p.pss, p.pss_anon, p.pss_file, p.pss_shmem,
			     p.map_rss, p.map_pss);
	}
	std::fprintf(f, "\n  ],\n  \"cachegrind\": [");
	for (size_t i = 0; i < r.cg.size(); i++) {
		const CgRecord &c = r.cg[i];
		std::fprintf(f, "%s\n    {\"keys\": %" PRIu64 ", \"system\": %s, \"kind\": %s, "
				"\"lookups\": %" PRIu64 ", \"instructions\": %.3f, \"d1_misses\": %.4f, "
				"\"ll_misses\": %.4f, \"branches\": %.3f, \"mispredicts\": %.4f}",
			     i ? "," : "", c.keys, js(c.system).c_str(), js(c.kind).c_str(), c.lookups,
			     c.ir, c.d1_miss, c.ll_miss, c.branches, c.mispredicts);
	}
	std::fprintf(f, "\n  ],\n  \"latency\": [");
	for (size_t i = 0; i < r.latency.size(); i++) {
		const LatencyRecord &l = r.latency[i];
		std::fprintf(f, "%s\n    {\"keys\": %" PRIu64 ", \"system\": %s, \"class\": %s, "
				"\"gets\": %" PRIu64 ", \"p50_ns\": %.2f, \"p99_ns\": %.2f, "
				"\"p999_ns\": %.2f, \"timer\": %s, \"notes\": %s}",
			     i ? "," : "", l.keys, js(l.system).c_str(), js(l.cls).c_str(), l.gets, l.p50,
			     l.p99, l.p999, js(l.timer).c_str(), js(l.notes).c_str());
	}
	std::fprintf(f, "\n  ],\n  \"notes\": [");
	for (size_t i = 0; i < r.notes.size(); i++)
		std::fprintf(f, "%s\n    %s", i ? "," : "", js(r.notes[i]).c_str());
	std::fprintf(f, "\n  ]\n}\n");
	if (std::fclose(f) != 0)
		fail("writing %s failed", path.c_str());
}

void run_plot(const Options &o, Report &r, const std::string &json, const std::string &png)
{
	if (r.timings.empty() && r.threads.empty())
		return; // nothing to draw
	if (o.plot_script.empty() || access(o.plot_script.c_str(), R_OK) != 0) {
		r.notes.push_back("No plot: plot script not found (--plot-script).");
		return;
	}
	if (access(o.python.c_str(), X_OK) != 0) {
		r.notes.push_back("No plot: " + o.python + " not found (Debian: apt-get install "
			    "python3-matplotlib).");
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		execl(o.python.c_str(), o.python.c_str(), o.plot_script.c_str(), json.c_str(),
		      png.c_str(), (char *)nullptr);
		_exit(127);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		r.files.push_back(png);
	else
		r.notes.push_back("No plot: " + o.plot_script + " failed (is python3-matplotlib "
			    "installed? apt-get install python3-matplotlib).");
}

} // namespace bench
