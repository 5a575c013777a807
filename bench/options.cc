// options.cc - command line of lookup_bench.

#include "bench.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace bench {

void usage(int status)
{
	std::fprintf(status ? stderr : stdout,
"usage: lookup_bench [options]\n"
"  --keys N          string table size, repeatable (default 1M and 10M; 50M by hand);\n"
"                    k/M suffixes ok\n"
"  --lookups M       timed lookups per pass (default 3M)\n"
"  --reps R          timed passes per system and workload; the median is reported (5)\n"
"  --seed S          seed of the key streams (42)\n"
"  --read first|full|both  what a string hit reads: length + first byte (\"uniform\"),\n"
"                    every value byte (\"uniform-full\", same keys), or both (default)\n"
"  --misses half|all  the absent-key workload: miss50 beside zipf (half, the default),\n"
"                    or miss100 alone (all: every key absent, no zipf)\n"
"  --systems LIST    comma list of shmkv,shmkv-batch,absl,std,lmdb,cdb,axoncache (default:\n"
"                    all built in)\n"
"  --phases LIST     strings,typed,threads,procs,cachegrind,latency (default: the first 4)\n"
"  --cachegrind      add the cachegrind phase (same as adding it to --phases)\n"
"  --cachegrind-keys N  table size of the cachegrind phase, repeatable (default 1M)\n"
"  --cachegrind-lookups M  lookups per hit and per miss pass under valgrind (200k)\n"
"  --cachegrind-ll-line B  line size of the simulated LL (64; 128: a miss fills the\n"
"                    aligned 128-byte pair, a model of the adjacent-line prefetcher)\n"
"  --latency-keys N  table size of the latency phase, repeatable (default 1M)\n"
"  --latency-lookups M  gets timed one by one per latency pass (1M)\n"
"  --perf            wrap the run in perf stat and perf record, count per pass where\n"
"                    the machine has hardware counters (says so when it has not)\n"
"  --typed-keys N    records of the typed workload, f32 lists of 16..128 floats (1M)\n"
"  --scale-keys N    table size of the threads and procs phases (default: the largest\n"
"                    --keys up to 10M)\n"
"  --threads-max T   thread scaling goes 1..T (default: nproc)\n"
"  --procs K         reader processes sharing one file (4; 0 skips the phase)\n"
"  --proc-lookups M  lookups each reader process makes (1M)\n"
"  --zipf-theta X    skew of the zipf workload (0.99)\n"
"  --load-factor F   shmkv builder's index fill target, (0, 1] (builder default 0.85)\n"
"  --hugepages       shmkv opens its image with SHMKV_OPEN_HUGEPAGES (huge pages for a\n"
"                    file on tmpfs, Linux 6.1+; the maps stay as malloc gives them)\n"
"  --attach ROOT     shmkv does not build an image: it attaches to cache kv_N (N the\n"
"                    table size) of the shmkv-loader serving root ROOT (bench/peers\n"
"                    publishes it there on hugetlb pages); string phases only\n"
"  --serial auto|yes|no  build and time one system at a time (auto: when all at once\n"
"                    would not fit in 60%% of MemAvailable)\n"
"  --dir DIR         where images and database files go (default /dev/shm)\n"
"  --out DIR         results: results.md, results.json, results.png (default: results/\n"
"                    beside the executable)\n"
"  --json FILE       also copy the JSON here\n"
"  --plot-script F   bench/plot.py (default: the source tree's)\n"
"  --python P        interpreter for the plot (/usr/bin/python3)\n");
	std::exit(status);
}

uint64_t parse_count(const char *opt, const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = std::strtoull(s, &end, 10);
	uint64_t mul = 1;
	if (*end == 'k' || *end == 'K')
		mul = 1000, end++;
	else if (*end == 'm' || *end == 'M')
		mul = 1000000, end++;
	if (errno || end == s || *end || s[0] == '-') {
		std::fprintf(stderr, "lookup_bench: %s: bad number '%s'\n", opt, s);
		usage(2);
	}
	return (uint64_t)v * mul;
}

static std::vector<std::string> split(const std::string &list)
{
	std::vector<std::string> v;
	size_t p = 0;
	while (p <= list.size()) {
		size_t c = list.find(',', p);
		std::string s = list.substr(p, c == std::string::npos ? std::string::npos : c - p);
		if (!s.empty())
			v.push_back(s);
		if (c == std::string::npos)
			break;
		p = c + 1;
	}
	return v;
}

bool has_phase(const Options &o, const char *phase)
{
	for (const std::string &p : o.phases)
		if (p == phase)
			return true;
	return false;
}

bool has_system(const Options &o, const char *name)
{
	for (const std::string &s : o.systems)
		if (s == name)
			return true;
	return false;
}

static double parse_double(const char *opt, const char *v, double lo, double hi)
{
	char *end;
	double d = std::strtod(v, &end);
	if (*end || end == v || !(d > lo && d <= hi)) {
		std::fprintf(stderr, "lookup_bench: %s must be in (%g, %g]\n", opt, lo, hi);
		usage(2);
	}
	return d;
}

Options parse_args(int argc, char **argv)
{
	Options o;
	for (int i = 0; i < argc; i++)
		o.argv.push_back(argv[i]);
	bool cachegrind = false;
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		if (a == "-h" || a == "--help")
			usage(0);
		if (a == "--cachegrind") {
			cachegrind = true;
			continue;
		}
		if (a == "--perf") {
			o.perf = true;
			continue;
		}
		if (a == "--hugepages") {
			o.hugepages = true;
			continue;
		}
		if (a == "--perf-child") { // internal: the run under perf
			o.perf = o.perf_child = true;
			continue;
		}
		if (i + 1 >= argc) {
			std::fprintf(stderr, "lookup_bench: unknown option or missing value: %s\n",
				     a.c_str());
			usage(2);
		}
		const char *v = argv[++i];
		if (a == "--keys")
			o.keys.push_back(parse_count("--keys", v));
		else if (a == "--lookups")
			o.lookups = parse_count("--lookups", v);
		else if (a == "--seed")
			o.seed = parse_count("--seed", v);
		else if (a == "--reps")
			o.reps = (unsigned)parse_count("--reps", v);
		else if (a == "--load-factor")
			o.load_factor = parse_double("--load-factor", v, 0, 1);
		else if (a == "--zipf-theta")
			o.zipf_theta = parse_double("--zipf-theta", v, 0, 0.9999);
		else if (a == "--systems")
			o.systems = split(v);
		else if (a == "--phases")
			o.phases = split(v);
		else if (a == "--cachegrind-keys")
			o.cg_keys.push_back(parse_count(a.c_str(), v));
		else if (a == "--cachegrind-lookups")
			o.cg_lookups = parse_count(a.c_str(), v);
		else if (a == "--cachegrind-ll-line")
			o.cg_ll_line = (unsigned)parse_count(a.c_str(), v);
		else if (a == "--latency-keys")
			o.lat_keys.push_back(parse_count(a.c_str(), v));
		else if (a == "--latency-lookups")
			o.lat_lookups = parse_count(a.c_str(), v);
		else if (a == "--typed-keys")
			o.typed_keys = parse_count(a.c_str(), v);
		else if (a == "--scale-keys")
			o.scale_keys = parse_count(a.c_str(), v);
		else if (a == "--threads-max")
			o.threads_max = (unsigned)parse_count(a.c_str(), v);
		else if (a == "--procs")
			o.procs = (unsigned)parse_count(a.c_str(), v);
		else if (a == "--proc-lookups")
			o.proc_lookups = parse_count(a.c_str(), v);
		else if (a == "--serial")
			o.serial = v;
		else if (a == "--read") {
			std::string m = v;
			if (m != "first" && m != "full" && m != "both") {
				std::fprintf(stderr, "lookup_bench: --read takes first, full or both\n");
				usage(2);
			}
			o.read_first = m != "full";
			o.read_full = m != "first";
		} else if (a == "--misses") {
			std::string m = v;
			if (m != "half" && m != "all") {
				std::fprintf(stderr, "lookup_bench: --misses takes half or all\n");
				usage(2);
			}
			o.misses_only = m == "all";
		}
		else if (a == "--attach")
			o.attach = v;
		else if (a == "--dir")
			o.dir = v;
		else if (a == "--out")
			o.out = v;
		else if (a == "--json")
			o.json = v;
		else if (a == "--plot-script")
			o.plot_script = v;
		else if (a == "--python")
			o.python = v;
		else {
			std::fprintf(stderr, "lookup_bench: unknown option %s\n", a.c_str());
			usage(2);
		}
	}
	if (o.keys.empty())
		o.keys = {1000000, 10000000};
	if (o.cg_keys.empty())
		o.cg_keys = {1000000};
	if (o.lat_keys.empty())
		o.lat_keys = {1000000};
	if (o.phases.empty())
		o.phases = {"strings", "typed", "threads", "procs"};
	if (cachegrind && !has_phase(o, "cachegrind"))
		o.phases.push_back("cachegrind");
	for (const std::string &p : o.phases)
		if (p != "strings" && p != "typed" && p != "threads" && p != "procs" &&
		    p != "cachegrind" && p != "latency") {
			std::fprintf(stderr, "lookup_bench: --phases: unknown phase '%s'\n", p.c_str());
			usage(2);
		}
	if (o.systems.empty()) {
		for (const std::string &s : all_systems())
			if (system_available(s))
				o.systems.push_back(s);
	} else {
		for (const std::string &s : o.systems) {
			bool known = false;
			for (const std::string &k : all_systems())
				known |= k == s;
			if (!known) {
				std::fprintf(stderr, "lookup_bench: --systems: unknown system '%s'\n",
					     s.c_str());
				usage(2);
			}
			if (!system_available(s)) {
				std::fprintf(stderr, "lookup_bench: %s was not built in (its library was "
						     "missing at meson setup)\n", s.c_str());
				std::exit(2);
			}
		}
	}
	for (uint64_t n : o.keys)
		if (n == 0 || n > 1000000000) {
			std::fprintf(stderr, "lookup_bench: --keys must be in 1..1e9\n");
			usage(2);
		}
	if (o.lookups == 0 || o.reps == 0 || o.typed_keys == 0 || o.cg_lookups == 0 ||
	    o.proc_lookups == 0) {
		std::fprintf(stderr, "lookup_bench: counts must be positive\n");
		usage(2);
	}
	if (o.cg_ll_line < 16 || o.cg_ll_line > 4096 || (o.cg_ll_line & (o.cg_ll_line - 1))) {
		std::fprintf(stderr, "lookup_bench: --cachegrind-ll-line is a power of 2 in 16..4096\n");
		usage(2);
	}
	if (o.serial != "auto" && o.serial != "yes" && o.serial != "no") {
		std::fprintf(stderr, "lookup_bench: --serial takes auto, yes or no\n");
		usage(2);
	}
	if (o.threads_max == 0)
		o.threads_max = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	if (o.scale_keys == 0) { // the largest table up to 10M, else the smallest
		for (uint64_t n : o.keys)
			if (n <= 10000000 && n > o.scale_keys)
				o.scale_keys = n;
		if (o.scale_keys == 0) {
			o.scale_keys = o.keys[0];
			for (uint64_t n : o.keys)
				o.scale_keys = std::min(o.scale_keys, n);
		}
	}
	if (o.dir.empty()) {
		const char *t = std::getenv("TMPDIR");
		o.dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : t && *t ? t : "/tmp";
	}
	if (o.out.empty()) {
		std::string exe = self_exe();
		o.out = exe.substr(0, exe.rfind('/') + 1) + "results";
	}
#ifdef SHMKV_BENCH_PLOT
	if (o.plot_script.empty())
		o.plot_script = SHMKV_BENCH_PLOT;
#endif
	return o;
}

} // namespace bench
