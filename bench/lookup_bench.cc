// lookup_bench.cc - the bench harness: shmkv against absl::flat_hash_map,
// std::unordered_map, LMDB and tinycdb on the same data and the same key
// streams. README.md describes the phases and what every column means.
//
// Phases (--phases; default strings,typed,threads,procs; --cachegrind adds one):
//   strings     per --keys N (1M, 10M): "key_%d" -> "val_%d"; uniform hits,
//               Zipf(0.99) hits, 50% absent keys; ns per get, build, open, size
//   typed       --typed-keys records of 16..128 floats, read and summed
//   threads     QPS of 1..--threads-max threads on one table (--scale-keys)
//   procs       --procs processes opening the same file: Rss and Pss each
//   cachegrind  instructions, cache misses, mispredicts per hit and per miss
//   latency     p50/p99/p99.9 of single gets, keys in their home bucket and displaced
// --perf wraps the whole run in perf stat and perf record.
//
// Output: markdown on stdout (and results.md), results.json and results.png
// in --out; progress on stderr. Exit status: 0; 1 when a check or a child
// fails (no numbers are printed for a broken build); 2 on bad usage.

#include "bench.h"

#include <sys/stat.h>

#include <cstdio>

using namespace bench;

int main(int argc, char **argv)
{
	if (argc > 1 && !std::strcmp(argv[1], "--proc-child"))
		return proc_child_main(argc, argv);
	if (argc > 2 && !std::strcmp(argv[1], "--cg-child")) {
		std::vector<char *> rest = {argv[0]};
		for (int i = 3; i < argc; i++)
			rest.push_back(argv[i]);
		Options o = parse_args((int)rest.size(), rest.data());
		return cg_child_main(o, argv[2], o.keys[0]);
	}
	Options o = parse_args(argc, argv);
	if (o.perf && !o.perf_child)
		return run_under_perf(o);

	Report r;
	r.env = environment(o);
	note("lookup_bench: systems %s; results in %s\n", [&] {
		std::string s;
		for (const std::string &x : o.systems)
			s += (s.empty() ? "" : ",") + x;
		return s;
	}().c_str(), o.out.c_str());
	run_timing_phases(o, r);
	if (has_phase(o, "cachegrind"))
		run_cachegrind(o, r);
	if (has_phase(o, "latency"))
		run_latency(o, r);
	r.env.load_end = loadavg();

	for (size_t i = 1; i <= o.out.size(); i++)
		if (i == o.out.size() || o.out[i] == '/')
			mkdir(o.out.substr(0, i).c_str(), 0755);
	std::string json = o.out + "/results.json", md = o.out + "/results.md",
		    png = o.out + "/results.png";
	write_json(o, r, json);
	if (!o.json.empty() && o.json != json)
		write_json(o, r, o.json);
	run_plot(o, r, json, png);
	r.files.insert(r.files.begin(), {md, json});
	if (!o.json.empty() && o.json != json)
		r.files.push_back(o.json);
	FILE *f = std::fopen(md.c_str(), "w");
	if (!f)
		fail("cannot write %s", md.c_str());
	write_markdown(o, r, f);
	std::fclose(f);
	write_markdown(o, r, stdout);
	return 0;
}
