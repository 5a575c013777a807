// phases.cc - the timed phases: per table size, build every system, check it,
// then time passes over each lookup stream round-robin across systems (so
// that noise on a shared machine hits all of them alike); the thread scaling
// and reader process phases run on the same built systems.

#include "bench.h"

#include <algorithm>
#include <cinttypes>

namespace bench {

namespace {

// Rough peak bytes per key of a system, to decide whether all fit at once.
double guess_bytes_per_key(const std::string &sys, uint64_t n, double value_bytes)
{
	if (is_shmkv(sys))
		return 42 + value_bytes;
	if (is_shmkv_batch(sys))
		return 0; // shares shmkv's image
	if (sys == "absl") {
		double cap = 1;
		while (cap * 7 / 8 < (double)n)
			cap *= 2;
		return cap * 65 / (double)n + (value_bytes > 16 ? value_bytes + 16 : 0);
	}
	if (sys == "std")
		return 112 + (value_bytes > 16 ? value_bytes + 16 : 0);
	if (sys == "lmdb")
		return 64 + value_bytes;
	return 56 + value_bytes; // cdb
}

std::vector<std::vector<std::string>> plan_groups(const Options &o, uint64_t n, Kind kind,
						  size_t streams, std::string &why)
{
	double vb = kind == Kind::Str ? 12 : 72 * 4;
	double total = (double)n * (32 + vb) + (double)streams * (double)o.lookups * 48;
	for (const std::string &s : o.systems)
		total += (double)n * guess_bytes_per_key(s, n, vb);
	double avail = (double)mem_available();
	bool serial = o.serial == "yes" || (o.serial == "auto" && total > 0.6 * avail);
	why = fmt("estimated peak %.1f GB, MemAvailable %.1f GB: %s", total / 1e9, avail / 1e9,
		  serial ? "one system at a time (no round-robin)" : "all systems at once, round-robin");
	std::vector<std::vector<std::string>> groups;
	if (!serial) {
		groups.push_back(o.systems);
		return groups;
	}
	for (const std::string &s : o.systems) {
		if (is_shmkv_batch(s) && has_system(o, shmkv_image_system(s).c_str()))
			continue; // goes with its shmkv system: it reads the same image
		groups.push_back({s});
		for (const std::string &b : o.systems)
			if (is_shmkv_batch(b) && shmkv_image_system(b) == s)
				groups.back().push_back(b);
	}
	return groups;
}

TimingRecord &record_for(Report &r, uint64_t n, const std::string &workload, const System &s)
{
	for (TimingRecord &t : r.timings)
		if (t.keys == n && t.workload == workload && t.system == s.name)
			return t;
	TimingRecord t;
	t.keys = n;
	t.workload = workload;
	t.system = s.name;
	t.build_s = s.build_s;
	t.open_s = s.open_s;
	t.bytes = s.bytes;
	t.malloc_bytes = s.malloc_bytes;
	t.notes = s.notes;
	r.timings.push_back(t);
	return r.timings.back();
}

void time_streams(const Options &o, uint64_t n, Kind kind, const std::vector<const Stream *> &streams,
		  const std::vector<System *> &group, Report &r)
{
	Counters counters;
	if (o.perf)
		counters.open();
	for (const Stream *s : streams) {
		std::string workload = kind == Kind::Str ? s->name : "typed";
		std::vector<std::vector<double>> per(group.size()); // counter samples
		for (unsigned rep = 0; rep < o.reps; rep++) {
			// round-robin, starting one system later each pass, so that no
			// system always follows the same one (whose data fills the caches)
			for (size_t i = 0; i < group.size(); i++) {
				size_t g = (i + rep) % group.size();
				System *sys = group[g];
				counters.start();
				double c0 = thread_cpu_seconds();
				auto t0 = Clock::now();
				PassResult res = sys->pass(*s, 0, s->keys.size());
				double secs = seconds_since(t0);
				double cpu = thread_cpu_seconds() - c0;
				double cnt[4];
				bool counted = counters.stop(cnt);
				if (res.found != s->hits || res.sum != s->expect)
					fail("%s, %s: found %" PRIu64 " (sum %" PRIu64 "), expected %" PRIu64
					     " (sum %" PRIu64 ")", sys->name.c_str(), workload.c_str(),
					     res.found, res.sum, s->hits, s->expect);
				double m = (double)s->keys.size();
				TimingRecord &t = record_for(r, n, workload, *sys);
				t.lookups = s->keys.size();
				t.hits = s->hits;
				t.ns.push_back(secs * 1e9 / m);
				t.cpu_ns.push_back(cpu * 1e9 / m);
				if (counted)
					for (int k = 0; k < 4; k++)
						per[g].push_back(cnt[k] / m);
				note("[%" PRIu64 " keys] %s pass %u %s %.1f ns/get (cpu %.1f)\n", n,
				     workload.c_str(), rep + 1, sys->name.c_str(), t.ns.back(),
				     t.cpu_ns.back());
			}
		}
		for (size_t g = 0; g < group.size(); g++) {
			if (per[g].empty())
				continue;
			TimingRecord &t = record_for(r, n, workload, *group[g]);
			double *dst[4] = {&t.cycles, &t.instructions, &t.llc_misses, &t.branch_misses};
			for (int k = 0; k < 4; k++) {
				std::vector<double> v;
				for (size_t i = k; i < per[g].size(); i += 4)
					v.push_back(per[g][i]);
				*dst[k] = median(v);
			}
		}
	}
}

// One table size: data, streams, then each group of systems in turn.
void run_table(const Options &o, Report &r, uint64_t n, Kind kind, const std::vector<Pattern> &pats,
	       bool threads, bool procs)
{
	note("[%" PRIu64 " keys%s] preparing the data set\n", n, kind == Kind::Str ? "" : ", typed");
	Dataset d = make_dataset(n, kind);
	std::vector<Stream> streams;
	for (Pattern p : pats) {
		note("[%" PRIu64 " keys] %s stream of %" PRIu64 " lookups\n", n, pattern_name(p),
		     o.lookups);
		streams.push_back(make_stream(d, p, o.lookups, o.seed, o.zipf_theta));
	}
	const Stream *uni = nullptr;
	Stream own_uniform;
	for (const Stream &s : streams)
		if (s.name == "uniform")
			uni = &s;
	if (threads && !uni) {
		own_uniform = make_stream(d, Pattern::Uniform, o.lookups, o.seed, o.zipf_theta);
		uni = &own_uniform;
	}
	std::vector<const Stream *> timed;
	for (const Stream &s : streams)
		timed.push_back(&s);

	std::string why;
	auto groups = plan_groups(o, n, kind, streams.size(), why);
	note("[%" PRIu64 " keys] %s\n", n, why.c_str());
	r.notes.push_back(fmt("%" PRIu64 " keys%s: %s.", n, kind == Kind::Str ? "" : " (typed)",
			      why.c_str()));
	for (const auto &names : groups) {
		std::vector<std::unique_ptr<System>> owned;
		for (const std::string &name : names) {
			if (name == "axoncache" && kind != Kind::Str)
				continue; // its adapter reads strings only (sys_axon.cc)
			const System *img = nullptr; // a batch system reads its shmkv system's image
			for (auto &s : owned)
				if (is_shmkv_batch(name) && s->name == shmkv_image_system(name))
					img = s.get();
			owned.push_back(make_system(name, o, kind, img));
		}
		std::vector<System *> group;
		for (auto &s : owned) {
			note("[%" PRIu64 " keys] %s: build", n, s->name.c_str());
			s->build(d, o.dir);
			note(" %.2f s, open %.1f ms, %.1f B/key, check", s->build_s, s->open_s * 1e3,
			     (double)s->bytes / (double)n);
			s->check(d);
			note(" ok\n");
			group.push_back(s.get());
		}
		// Whether huge pages back the data (--dir on a huge=always tmpfs,
		// GLIBC_TUNABLES=glibc.malloc.hugetlb=1 for the maps).
		for (System *s : group) {
			if (!s->path.empty() && !is_shmkv_batch(s->name)) {
				uint64_t huge = smaps_sum(s->path, "ShmemPmdMapped") +
						smaps_sum(s->path, "FilePmdMapped");
				s->notes += fmt("; huge pages map %.0f of its %.0f MiB resident", huge / 1048576.0,
						smaps_sum(s->path, "Rss") / 1048576.0);
			}
		}
		if (has_system(o, "absl") || has_system(o, "std"))
			r.notes.push_back(fmt("%" PRIu64 " keys%s: AnonHugePages of the process after the "
					      "builds: %.0f MiB.", n, kind == Kind::Str ? "" : " (typed)",
					      smaps_sum("", "AnonHugePages") / 1048576.0));
		time_streams(o, n, kind, timed, group, r);
		for (System *s : group) // systems with no stream still get a row (build, size)
			if (timed.empty())
				record_for(r, n, "build", *s);
		if (threads)
			run_threads(o, d, *uni, group, r);
		for (auto it = owned.rbegin(); it != owned.rend(); ++it) // batch before its image
			(*it)->release();
		if (procs)
			run_procs(o, d, group, r);
		for (auto it = owned.rbegin(); it != owned.rend(); ++it)
			(*it)->remove();
	}
}

} // namespace

void run_timing_phases(const Options &o, Report &r)
{
	bool strings = has_phase(o, "strings");
	bool threads = has_phase(o, "threads");
	bool procs = has_phase(o, "procs") && o.procs > 0;
	std::vector<uint64_t> sizes;
	if (strings)
		sizes = o.keys;
	if ((threads || procs) &&
	    std::find(sizes.begin(), sizes.end(), o.scale_keys) == sizes.end())
		sizes.push_back(o.scale_keys);
	for (uint64_t n : sizes) {
		std::vector<Pattern> pats;
		if (strings && std::find(o.keys.begin(), o.keys.end(), n) != o.keys.end()) {
			if (o.read_first)
				pats.push_back(Pattern::Uniform);
			if (o.read_full)
				pats.push_back(Pattern::UniformFull);
			if (o.misses_only) // --misses all: every key absent, no zipf
				pats.push_back(Pattern::Miss100);
			else
				pats.insert(pats.end(), {Pattern::Zipf, Pattern::Miss50});
		}
		run_table(o, r, n, Kind::Str, pats, threads && n == o.scale_keys,
			  procs && n == o.scale_keys);
	}
	if (has_phase(o, "typed"))
		run_table(o, r, o.typed_keys, Kind::F32, {Pattern::Uniform}, false, false);
}

} // namespace bench
