// bench.h - the lookup_bench harness: data sets, lookup streams, the System
// interface every store under test implements, and the records the phases
// produce for the report. See README.md for what is measured and how.
#ifndef SHMKV_BENCH_H
#define SHMKV_BENCH_H

#include <shmkv.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace bench {

// ---------------------------------------------------------------- options

struct Options {
	std::vector<uint64_t> keys;        // string workloads, one table size each (1M, 10M)
	uint64_t lookups = 3000000;        // timed lookups per pass
	uint64_t seed = 42;
	unsigned reps = 5;                 // timed passes per system and workload
	double load_factor = 0;            // shmkv builder's index fill; 0: its default
	bool hugepages = false;            // shmkv opens with SHMKV_OPEN_HUGEPAGES
	std::string attach;                // shmkv attaches to cache kv_N of the loader at this root
	bool read_first = true;            // --read: length + first byte of each hit ("uniform")
	bool read_full = true;             // --read: every value byte ("uniform-full")
	bool misses_only = false;          // --misses all: miss100 in place of zipf and miss50
	double zipf_theta = 0.99;
	std::vector<std::string> systems;  // in report order
	std::vector<std::string> phases;   // strings, typed, threads, procs, cachegrind
	uint64_t typed_keys = 1000000;
	uint64_t scale_keys = 0;           // threads and procs run here; 0: see resolve_scale_keys
	unsigned threads_max = 0;          // 0: nproc
	unsigned procs = 4;                // reader processes sharing one file
	uint64_t proc_lookups = 1000000;   // lookups each reader process makes
	std::vector<uint64_t> cg_keys;     // cachegrind table sizes (1M)
	uint64_t cg_lookups = 200000;      // cachegrind lookups per hit or miss pass
	unsigned cg_ll_line = 64;          // the simulated LL's line size (bytes)
	std::vector<uint64_t> lat_keys;    // latency phase table sizes (1M)
	uint64_t lat_lookups = 1000000;    // latency phase: gets timed one by one per pass
	bool perf = false;                 // wrap in perf stat/record, count per pass
	bool perf_child = false;           // internal: already running under perf
	std::string serial = "auto";       // auto, yes, no: one system at a time
	std::string dir;                   // where files (images, LMDB, CDB) go
	std::string out;                   // results directory (md, json, png)
	std::string json;                  // extra copy of the JSON
	std::string plot_script;           // bench/plot.py
	std::string python = "/usr/bin/python3";
	std::vector<std::string> argv;     // as given, for re-exec and the report
};

Options parse_args(int argc, char **argv);
[[noreturn]] void usage(int status);
uint64_t parse_count(const char *opt, const char *s);
bool has_phase(const Options &o, const char *phase);
bool has_system(const Options &o, const char *name);

// ---------------------------------------------------------------- helpers

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0);
double thread_cpu_seconds();
uint64_t splitmix64(uint64_t &state);
uint64_t uniform(uint64_t &state, uint64_t n); // in [0, n)
std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] void fail(const char *f, ...) __attribute__((format(printf, 1, 2)));
void note(const char *f, ...) __attribute__((format(printf, 1, 2))); // progress on stderr
std::string loadavg();
uint64_t mem_available();
std::string self_exe();
// Sum of one /proc/self/smaps field (e.g. "Rss", "Pss", "ShmemPmdMapped") over
// the mappings of path, in bytes; path "": the whole process (smaps_rollup).
uint64_t smaps_sum(const std::string &path, const char *field);

// Files to unlink if the run fails.
void track_file(const std::string &path);
void untrack_file(const std::string &path);

// ---------------------------------------------------------------- data

enum class Kind { Str, F32 }; // "key_%d" -> "val_%d", or "key_%d" -> 16..128 floats

// Writes "key_<i>" (prefix "key_") into buf, returns its length (at most 24).
size_t format_key(char *buf, const char *prefix, uint64_t i);

// A data set of n records, keys and values laid out flat (built before timing).
struct Dataset {
	uint64_t n = 0;
	Kind kind = Kind::Str;
	static constexpr size_t kStride = 16; // keys and string values: 15 bytes + length
	std::vector<char> keybuf, strbuf;
	std::vector<float> f32;
	std::vector<uint64_t> f32_off; // value i is f32[f32_off[i], f32_off[i + 1])

	std::string_view key(uint64_t i) const
	{
		const char *p = &keybuf[i * kStride];
		return {p, (size_t)(unsigned char)p[kStride - 1]};
	}
	std::string_view str(uint64_t i) const
	{
		const char *p = &strbuf[i * kStride];
		return {p, (size_t)(unsigned char)p[kStride - 1]};
	}
	const float *floats(uint64_t i) const { return f32.data() + f32_off[i]; }
	size_t float_count(uint64_t i) const { return (size_t)(f32_off[i + 1] - f32_off[i]); }
	uint64_t value_bytes(uint64_t i) const
	{
		return kind == Kind::Str ? str(i).size() : 4 * float_count(i);
	}
	uint64_t digest(uint64_t i, bool full = false) const; // what a pass adds for a hit on key i
};

Dataset make_dataset(uint64_t n, Kind kind);

// What a pass adds to its sum for each hit. Strings: length + first byte;
// f32 lists: count + the bits of the float sum, summed in order, so every
// system must hand back the exact floats (loads by memcpy: LMDB and CDB
// values are not 4-aligned).
inline uint64_t digest_str(const void *p, size_t len)
{
	return len + (len ? *(const unsigned char *)p : 0);
}

// The "full" read mode: length + every byte, so that a value on a line of
// its own costs what it costs (the first byte alone can hide a dependent
// miss on the line after).
inline uint64_t digest_full(const void *p, size_t len)
{
	const unsigned char *b = (const unsigned char *)p;
	uint64_t s = len;
	for (size_t i = 0; i < len; i++)
		s += b[i];
	return s;
}

// A string hit's digest in the stream's read mode.
inline uint64_t digest_str_mode(bool full, const void *p, size_t len)
{
	return full ? digest_full(p, len) : digest_str(p, len);
}

inline uint64_t digest_f32(const void *p, size_t count)
{
	float s = 0;
	for (size_t i = 0; i < count; i++) {
		float f;
		std::memcpy(&f, (const char *)p + 4 * i, 4);
		s += f;
	}
	uint32_t bits;
	std::memcpy(&bits, &s, 4);
	return count + bits;
}

// A timed lookup sequence: the keys as std::string (short keys live inline,
// as they would in a caller), views of the same bytes for the batch API, and
// what a correct pass returns.
struct Stream {
	std::string name; // uniform, uniform-full, zipf, miss50, miss100
	bool full = false; // string hits read every value byte (digest_full)
	std::vector<std::string> keys;
	std::vector<shmkv_key> views;
	uint64_t hits = 0;   // keys present
	uint64_t expect = 0; // sum of digests over the hits
};

struct PassResult {
	uint64_t found = 0, sum = 0;
};

// UniformFull last: each pattern's value seeds its stream (keeps the others' keys)
enum class Pattern { Uniform, Zipf, Miss50, Miss100, UniformFull };
const char *pattern_name(Pattern p);
Stream make_stream(const Dataset &d, Pattern p, uint64_t count, uint64_t seed, double theta);

// Keys never added: the next ones and some of other shapes (for checks).
std::vector<std::string> absent_keys(uint64_t n);

// ---------------------------------------------------------------- systems

// One store under test. build() makes it from a data set (and for file-backed
// stores writes the file and opens it, timed apart as open_s); check() exits
// on any wrong answer; pass() looks up keys [begin, end) of a stream and must
// be callable from several threads at once; release() frees memory and closes
// handles but keeps the file; remove() deletes the file.
struct System {
	std::string name;
	std::string path;           // file-backed stores: the file, else ""
	double build_s = 0, open_s = 0;
	uint64_t bytes = 0;         // file size, or bytes requested from the allocator
	uint64_t malloc_bytes = 0;  // mallinfo2() growth (maps); = bytes for files
	std::string notes;
	virtual ~System() = default;
	virtual void build(const Dataset &d, const std::string &dir) = 0;
	virtual void check(const Dataset &d);
	virtual PassResult pass(const Stream &s, size_t begin, size_t end) const = 0;
	virtual void release() = 0;
	virtual void remove();
	// Lookup of one key for check(): found, and the digest of its value.
	virtual bool get_digest(std::string_view key, uint64_t &digest) const = 0;
};

// "shmkv", "shmkv-batch", "absl", "std", "lmdb", "cdb"; nullptr if not built in.
// shmkv-batch reads the image of the shmkv system given (building its own when
// none is).
std::unique_ptr<System> make_system(const std::string &name, const Options &o, Kind kind,
				    const System *shmkv_image);
std::vector<std::string> all_systems();
// whether a system is shmkv's single get or its batch, and the name of the
// image system a batch system reads
bool is_shmkv(const std::string &name);
bool is_shmkv_batch(const std::string &name);
std::string shmkv_image_system(const std::string &batch_name);
bool system_available(const std::string &name);
const char *system_version(const std::string &name);

// For the reader processes: open a built file in a fresh process.
struct Reader {
	virtual ~Reader() = default;
	virtual PassResult pass(const Stream &s, size_t begin, size_t end) const = 0;
};
std::unique_ptr<Reader> open_reader(const std::string &system, const std::string &path, Kind kind,
				    uint64_t n);

// ---------------------------------------------------------------- records

struct TimingRecord {
	uint64_t keys = 0;
	std::string workload; // uniform, zipf, miss50, typed
	std::string system;
	double build_s = 0, open_s = 0;
	uint64_t bytes = 0, malloc_bytes = 0;
	std::string notes;
	uint64_t lookups = 0, hits = 0;
	std::vector<double> ns, cpu_ns; // per pass
	// --perf: per-get counter values, median pass; negative: not counted
	double cycles = -1, instructions = -1, llc_misses = -1, branch_misses = -1;
};

struct ThreadRecord {
	uint64_t keys = 0;
	std::string system;
	unsigned threads = 0;
	std::vector<double> mops; // million lookups per second, per repetition
};

struct ProcRecord {
	uint64_t keys = 0;
	std::string system;
	unsigned procs = 0, index = 0;
	double open_s = 0, ns_per_get = 0;
	uint64_t file_bytes = 0;
	uint64_t rss = 0, pss = 0, pss_anon = 0, pss_file = 0, pss_shmem = 0; // bytes, whole process
	uint64_t map_rss = 0, map_pss = 0; // bytes, the mappings of the data file
};

struct CgRecord {
	uint64_t keys = 0;
	std::string system, kind; // kind: hit, miss
	uint64_t lookups = 0;
	double ir = 0, d1_miss = 0, ll_miss = 0, branches = 0, mispredicts = 0; // per get
};

// One class of keys of the latency phase (latency.cc): ns per get, each
// percentile the median over the passes.
struct LatencyRecord {
	uint64_t keys = 0;
	std::string system, cls; // cls: "home" or "displaced"
	uint64_t gets = 0;       // per pass
	double p50 = 0, p99 = 0, p999 = 0;
	std::string timer;
	std::string notes; // the pointer chase: buffer, pages, the unfenced chain
};

struct Env {
	std::string cpu, date, compiler, kernel, load_start, load_end, probe, command;
	long nproc = 0;
	bool ndebug = false;
	std::string perf_note;
};

struct Report {
	Env env;
	std::vector<TimingRecord> timings;
	std::vector<ThreadRecord> threads;
	std::vector<ProcRecord> procs;
	std::vector<CgRecord> cg;
	std::vector<std::string> cg_reports; // callgrind_annotate per system and kind (profile.cc)
	std::vector<LatencyRecord> latency;
	std::vector<std::string> notes; // free text under the tables
	std::vector<std::string> files; // output files written
};

Env environment(const Options &o);
double median(std::vector<double> v);
double best(const std::vector<double> &v);
void write_markdown(const Options &o, const Report &r, FILE *f);
void write_json(const Options &o, const Report &r, const std::string &path);
void run_plot(const Options &o, Report &r, const std::string &json, const std::string &png);

// ---------------------------------------------------------------- phases

// strings and typed: build, check, time passes round-robin.
void run_timing_phases(const Options &o, Report &r);
// threads: QPS of 1..threads_max threads on one table; called per system group.
void run_threads(const Options &o, const Dataset &d, const Stream &s,
		 const std::vector<System *> &systems, Report &r);
// procs: K processes opening one file; called after the group's handles closed.
void run_procs(const Options &o, const Dataset &d, const std::vector<System *> &systems,
	       Report &r);
int proc_child_main(int argc, char **argv); // --proc-child
// cachegrind: one valgrind child per system and table size.
void run_cachegrind(const Options &o, Report &r);
void run_latency(const Options &o, Report &r); // latency.cc
int cg_child_main(const Options &o, const std::string &system, uint64_t keys);
// --perf: re-exec under perf stat and perf record; returns the exit status.
int run_under_perf(const Options &o);
std::string perf_counting_note();

// Per-pass hardware counters (perf_event_open), when --perf and the machine has them.
struct Counters {
	int fd[4] = {-1, -1, -1, -1};
	bool ok = false;
	std::string why; // why not, when !ok
	void open();
	void start();
	bool stop(double per[4]); // cycles, instructions, LLC misses, branch misses
	~Counters();
};

} // namespace bench

#endif // SHMKV_BENCH_H
