// lookup_bench.cc - single-thread get latency of shmkv against absl::flat_hash_map
// and std::unordered_map, all holding the same string keys and string values.
//
// For each key count N (--keys, repeatable; default 1M and 10M):
//   1. keys "key_%d" -> values "val_%d" for d in [0, N), and --lookups uniformly
//      random keys (a std::vector<std::string> built before any timing; splitmix64
//      from --seed, so every system sees the same keys in the same order);
//   2. each system is built from the same vectors and timed (wall clock):
//        shmkv   builder C API (new, add_str x N, finish) into an image file,
//                then shmkv_open_file (timed apart: "open");
//        absl    absl::flat_hash_map<std::string, std::string>, reserve(N) + emplace;
//        std     std::unordered_map<std::string, std::string>, reserve(N) + emplace;
//        shmkv-batch  shmkv_get_batch() on shmkv's image, 64 keys a call (not a
//                single get: shown for contrast);
//   3. a check before timing: every key is found with its value, and keys that
//      were never added are not found; any failure exits 1 with no numbers;
//   4. --reps timed passes over the lookups, round-robin over the systems so VM
//      noise spreads evenly; each lookup adds the value's length and first byte
//      to a sum that must match the expected sum. ns/get is reported as the
//      median of the passes (and the best pass), by the wall clock and by the
//      thread's CPU time (which leaves out time spent waiting for a core).
// Memory: shmkv is image file size / N. The maps use a counting allocator
// (bytes requested by the map itself: slots or nodes and bucket arrays; the
// strings here all fit std::string's inline buffer, so they make no separate
// allocation) and, as a cross-check that includes malloc's own overhead, the
// mallinfo2() growth across the build.
//
// Output: a markdown table on stdout, progress on stderr, --json FILE for a
// machine-readable copy. Exit status: 0, 1 on a failed check or error, 2 on
// bad usage.

#include <shmkv.h>
#include <shmkv_build.h>

#include <absl/container/flat_hash_map.h>

#include <malloc.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

// ---------------------------------------------------------------- options

struct Options {
	std::vector<uint64_t> keys;
	uint64_t lookups = 10000000;
	uint64_t seed = 42;
	unsigned reps = 5;
	double load_factor = 0; // 0: the builder's default
	std::string json;
	std::string dir;
	bool run_shmkv = true, run_batch = true, run_absl = true, run_std = true;
};

[[noreturn]] void usage(int status)
{
	std::fprintf(status ? stderr : stdout,
		     "usage: lookup_bench [--keys N]... [--lookups M] [--seed S] [--reps R]\n"
		     "                    [--systems LIST] [--dir DIR] [--json FILE]\n"
		     "  --keys N       key count, repeatable (default: 1M and 10M); k/M suffixes ok\n"
		     "  --lookups M    timed lookups per pass (default 10M)\n"
		     "  --seed S       seed of the random lookup order (default 42)\n"
		     "  --reps R       timed passes per system; the median is reported (default 5)\n"
		     "  --systems L    comma list of shmkv,shmkv-batch,absl,std (default: all)\n"
		     "  --load-factor F  shmkv index fill target, (0, 1] (default: the builder's)\n"
		     "  --dir DIR      where the shmkv image is written (default /dev/shm, else $TMPDIR, /tmp)\n"
		     "  --json FILE    also write the results as JSON\n");
	std::exit(status);
}

// Parses "1000000", "1M", "500k". Exits 2 on anything else.
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

Options parse_args(int argc, char **argv)
{
	Options o;
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		if (a == "-h" || a == "--help")
			usage(0);
		if (i + 1 >= argc) {
			std::fprintf(stderr, "lookup_bench: unknown option or missing value: %s\n", a.c_str());
			usage(2);
		}
		const char *v = argv[++i];
		if (a == "--keys") {
			o.keys.push_back(parse_count("--keys", v));
		} else if (a == "--lookups") {
			o.lookups = parse_count("--lookups", v);
		} else if (a == "--seed") {
			o.seed = parse_count("--seed", v);
		} else if (a == "--reps") {
			o.reps = (unsigned)parse_count("--reps", v);
		} else if (a == "--load-factor") {
			char *end;
			o.load_factor = std::strtod(v, &end);
			if (*end || !(o.load_factor > 0 && o.load_factor <= 1)) {
				std::fprintf(stderr, "lookup_bench: --load-factor must be in (0, 1]\n");
				usage(2);
			}
		} else if (a == "--json") {
			o.json = v;
		} else if (a == "--dir") {
			o.dir = v;
		} else if (a == "--systems") {
			o.run_shmkv = o.run_batch = o.run_absl = o.run_std = false;
			std::string list = v;
			size_t p = 0;
			while (p <= list.size()) {
				size_t c = list.find(',', p);
				std::string s = list.substr(p, c == std::string::npos ? std::string::npos : c - p);
				if (s == "shmkv")
					o.run_shmkv = true;
				else if (s == "shmkv-batch")
					o.run_batch = true;
				else if (s == "absl")
					o.run_absl = true;
				else if (s == "std")
					o.run_std = true;
				else {
					std::fprintf(stderr, "lookup_bench: --systems: unknown system '%s'\n",
						     s.c_str());
					usage(2);
				}
				if (c == std::string::npos)
					break;
				p = c + 1;
			}
		} else {
			std::fprintf(stderr, "lookup_bench: unknown option %s\n", a.c_str());
			usage(2);
		}
	}
	if (o.keys.empty())
		o.keys = {1000000, 10000000};
	for (uint64_t n : o.keys)
		if (n == 0 || n > 1000000000) {
			std::fprintf(stderr, "lookup_bench: --keys must be in 1..1e9\n");
			usage(2);
		}
	if (o.lookups == 0 || o.reps == 0) {
		std::fprintf(stderr, "lookup_bench: --lookups and --reps must be positive\n");
		usage(2);
	}
	if (o.dir.empty()) {
		const char *t = std::getenv("TMPDIR");
		o.dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : t && *t ? t : "/tmp";
	}
	return o;
}

// ---------------------------------------------------------------- helpers

using Clock = std::chrono::steady_clock;

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

// The image file being measured, removed by fail() too.
std::string g_image_path;

[[noreturn]] __attribute__((format(printf, 1, 2))) void fail(const char *fmt, ...)
{
	if (!g_image_path.empty())
		unlink(g_image_path.c_str());
	va_list ap;
	va_start(ap, fmt);
	std::fprintf(stderr, "\nlookup_bench: FAILED: ");
	std::vfprintf(stderr, fmt, ap);
	std::fprintf(stderr, "\n");
	va_end(ap);
	std::exit(1);
}

uint64_t splitmix64(uint64_t &state)
{
	uint64_t z = (state += UINT64_C(0x9E3779B97F4A7C15));
	z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

std::string key_of(uint64_t i)
{
	return "key_" + std::to_string(i);
}

std::string value_of(uint64_t i)
{
	return "val_" + std::to_string(i);
}

// Bytes the maps ask their allocator for, live.
uint64_t g_alloc_live;

template <class T> struct CountingAllocator {
	using value_type = T;
	CountingAllocator() = default;
	template <class U> CountingAllocator(const CountingAllocator<U> &) {}
	T *allocate(size_t n)
	{
		g_alloc_live += n * sizeof(T);
		return std::allocator<T>().allocate(n);
	}
	void deallocate(T *p, size_t n)
	{
		g_alloc_live -= n * sizeof(T);
		std::allocator<T>().deallocate(p, n);
	}
	template <class U> bool operator==(const CountingAllocator<U> &) const { return true; }
	template <class U> bool operator!=(const CountingAllocator<U> &) const { return false; }
};

// The maps' default hash and equality (for absl, its transparent string hash),
// only the allocator differs.
using Pair = std::pair<const std::string, std::string>;
using AbslMap = absl::flat_hash_map<std::string, std::string,
				    absl::container_internal::hash_default_hash<std::string>,
				    absl::container_internal::hash_default_eq<std::string>,
				    CountingAllocator<Pair>>;
using StdMap = std::unordered_map<std::string, std::string, std::hash<std::string>,
				  std::equal_to<std::string>, CountingAllocator<Pair>>;

// Heap bytes in use per glibc (all arenas, mmapped chunks included).
uint64_t malloc_in_use()
{
	struct mallinfo2 mi = mallinfo2();
	return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

// ---------------------------------------------------------------- data

struct Data {
	uint64_t n = 0;
	std::vector<std::string> keys, values; // [i] = key_i, val_i
	std::vector<std::string> lookups;      // the timed key order
	uint64_t expect_sum = 0;               // sum over lookups of len(value) + value[0]
};

Data make_data(uint64_t n, uint64_t lookups, uint64_t seed)
{
	Data d;
	d.n = n;
	d.keys.reserve(n);
	d.values.reserve(n);
	for (uint64_t i = 0; i < n; i++) {
		d.keys.push_back(key_of(i));
		d.values.push_back(value_of(i));
	}
	uint64_t state = seed;
	d.lookups.reserve(lookups);
	for (uint64_t j = 0; j < lookups; j++) {
		// multiply-shift range reduction: uniform enough for n << 2^64
		uint64_t i = (uint64_t)(((unsigned __int128)splitmix64(state) * n) >> 64);
		d.lookups.push_back(d.keys[i]);
		d.expect_sum += d.values[i].size() + (unsigned char)d.values[i][0];
	}
	return d;
}

// ---------------------------------------------------------------- systems

// One system under test. build() fills build_s and bytes; check() exits on a
// wrong answer; pass() is one timed sweep over the lookups returning the sum.
struct System {
	const char *name = "";
	bool built = false;
	double build_s = 0, open_s = 0;
	uint64_t bytes = 0;        // image size, or bytes the map requested
	uint64_t malloc_bytes = 0; // mallinfo2 growth (maps), image size (shmkv)
	std::string notes;
	std::vector<double> ns_per_get;     // wall clock, one per pass
	std::vector<double> cpu_ns_per_get; // thread CPU time, one per pass
	virtual ~System() = default;
	virtual void build(const Data &d) = 0;
	virtual void check(const Data &d) = 0;
	virtual uint64_t pass(const std::vector<std::string> &lookups) = 0;
	virtual void release() = 0; // frees the structure, keeps the numbers
};

// Keys that were never added: the next N.. and some of another shape.
std::vector<std::string> absent_keys(uint64_t n)
{
	std::vector<std::string> a;
	uint64_t count = std::min<uint64_t>(n, 100000);
	for (uint64_t i = 0; i < count; i++)
		a.push_back(key_of(n + i));
	for (uint64_t i = 0; i < 1000; i++) {
		a.push_back("val_" + std::to_string(i));
		a.push_back("key_" + std::to_string(i) + "x");
	}
	a.push_back("");
	return a;
}

struct ShmkvSystem final : System {
	std::string dir, path;
	double load_factor;
	shmkv *db = nullptr;
	ShmkvSystem(std::string d, double lf) : dir(std::move(d)), load_factor(lf) { name = "shmkv"; }
	~ShmkvSystem() override { release(); }

	void release() override
	{
		shmkv_close(db);
		db = nullptr;
		if (!path.empty())
			unlink(path.c_str());
		path.clear();
		g_image_path.clear();
	}

	void build(const Data &d) override
	{
		path = dir + "/lookup_bench-" + std::to_string(getpid()) + "-" + std::to_string(d.n) +
		       ".shmkv";
		g_image_path = path;
		auto t0 = Clock::now();
		shmkv_build_options o;
		int err = shmkv_build_options_init(&o);
		if (err)
			fail("shmkv_build_options_init: %s", shmkv_strerror(err));
		if (load_factor > 0)
			o.load_factor = load_factor;
		shmkv_builder *b = nullptr;
		err = shmkv_builder_new(&o, &b);
		if (err)
			fail("shmkv_builder_new: %s", shmkv_strerror(err));
		for (uint64_t i = 0; i < d.n && !err; i++)
			err = shmkv_builder_add_str(b, d.keys[i].data(), d.keys[i].size(),
						    d.values[i].data(), d.values[i].size());
		shmkv_build_stats st{};
		if (!err)
			err = shmkv_builder_finish(b, path.c_str(), &st);
		if (err) {
			std::string why = shmkv_builder_error(b);
			shmkv_builder_free(b);
			fail("shmkv builder: %s: %s", shmkv_strerror(err), why.c_str());
		}
		shmkv_builder_free(b);
		build_s = seconds_since(t0);

		t0 = Clock::now();
		char why[256];
		err = shmkv_open_file_diag(path.c_str(), SHMKV_OPEN_POPULATE, &db, why, sizeof why);
		if (err)
			fail("shmkv_open_file %s", why);
		open_s = seconds_since(t0);
		bytes = malloc_bytes = shmkv_header(db)->file_size;
		char buf[256];
		std::snprintf(buf, sizeof buf,
			      "finish %.2f s, open+verify %.3f s, %" PRIu64 " buckets, load %.3f, "
			      "max_probe %u, probe %s",
			      st.seconds, open_s, st.bucket_count, st.load_factor, st.max_probe,
			      shmkv_vector_name());
		notes = buf;
	}

	void check(const Data &d) override
	{
		if (shmkv_header(db)->entry_count != d.n)
			fail("shmkv: image has %" PRIu64 " entries, expected %" PRIu64,
			     shmkv_header(db)->entry_count, d.n);
		for (uint64_t i = 0; i < d.n; i++) {
			const char *s;
			size_t len;
			int err = shmkv_get_str(db, d.keys[i].data(), d.keys[i].size(), &s, &len);
			if (err)
				fail("shmkv: %s: %s", d.keys[i].c_str(), shmkv_strerror(err));
			if (std::string(s, len) != d.values[i] || s[len] != 0)
				fail("shmkv: %s has a wrong value '%s'", d.keys[i].c_str(),
				     std::string(s, len).c_str());
		}
		for (const std::string &k : absent_keys(d.n)) {
			const char *s;
			size_t len;
			int err = shmkv_get_str(db, k.data(), k.size(), &s, &len);
			if (err != SHMKV_ENOTFOUND)
				fail("shmkv: absent key '%s' gave %s", k.c_str(), shmkv_strerror(err));
		}
	}

	uint64_t pass(const std::vector<std::string> &lookups) override { return pass_shmkv(db, lookups); }

	__attribute__((noinline)) static uint64_t pass_shmkv(const shmkv *db,
							     const std::vector<std::string> &lookups)
	{
		uint64_t sum = 0;
		for (const std::string &k : lookups) {
			const char *s;
			size_t len;
			if (shmkv_get_str(db, k.data(), k.size(), &s, &len) == 0)
				sum += len + (unsigned char)s[0];
		}
		return sum;
	}
};

// shmkv_get_batch() over the same image, 64 keys a call (the keys as
// shmkv_key views, made before timing). Not a single get: shown for contrast.
struct ShmkvBatchSystem final : System {
	static constexpr size_t kChunk = 64;
	const ShmkvSystem *img;
	std::vector<shmkv_key> views;
	explicit ShmkvBatchSystem(const ShmkvSystem *s) : img(s) { name = "shmkv-batch"; }

	void build(const Data &d) override
	{
		build_s = img->build_s;
		bytes = img->bytes;
		malloc_bytes = img->malloc_bytes;
		notes = "shmkv_get_batch, 64 keys a call, same image";
		views.reserve(d.lookups.size());
		for (const std::string &k : d.lookups)
			views.push_back({k.data(), k.size()});
	}

	void check(const Data &d) override
	{
		std::vector<shmkv_key> all;
		for (const std::string &k : d.keys)
			all.push_back({k.data(), k.size()});
		std::vector<std::string> absent = absent_keys(d.n);
		for (const std::string &k : absent)
			all.push_back({k.data(), k.size()});
		std::vector<shmkv_value> v(all.size());
		std::vector<int> err(all.size());
		size_t found = shmkv_get_batch(img->db, all.data(), all.size(), v.data(), err.data());
		if (found != d.n)
			fail("shmkv-batch: found %zu of %" PRIu64 " keys", found, d.n);
		for (uint64_t i = 0; i < d.n; i++)
			if (err[i] || v[i].type != SHMKV_TYPE_STRING ||
			    std::string((const char *)v[i].data, v[i].size) != d.values[i])
				fail("shmkv-batch: %s missing or wrong", d.keys[i].c_str());
		for (size_t i = d.n; i < all.size(); i++)
			if (err[i] != SHMKV_ENOTFOUND)
				fail("shmkv-batch: absent key '%s' gave %s", absent[i - d.n].c_str(),
				     shmkv_strerror(err[i]));
	}

	uint64_t pass(const std::vector<std::string> &) override { return pass_batch(img->db, views); }

	__attribute__((noinline)) static uint64_t pass_batch(const shmkv *db,
							     const std::vector<shmkv_key> &views)
	{
		shmkv_value v[kChunk];
		int err[kChunk];
		uint64_t sum = 0;
		for (size_t base = 0; base < views.size(); base += kChunk) {
			size_t n = std::min(kChunk, views.size() - base);
			shmkv_get_batch(db, views.data() + base, n, v, err);
			for (size_t i = 0; i < n; i++)
				if (err[i] == 0 && v[i].type == SHMKV_TYPE_STRING)
					sum += v[i].size + *(const unsigned char *)v[i].data;
		}
		return sum;
	}

	void release() override { std::vector<shmkv_key>().swap(views); }
};

template <class Map> struct MapSystem final : System {
	Map m;
	explicit MapSystem(const char *n) { name = n; }

	void release() override { Map().swap(m); }

	void build(const Data &d) override
	{
		uint64_t alloc0 = g_alloc_live, heap0 = malloc_in_use();
		auto t0 = Clock::now();
		m.reserve(d.n);
		for (uint64_t i = 0; i < d.n; i++)
			m.emplace(d.keys[i], d.values[i]);
		build_s = seconds_since(t0);
		bytes = g_alloc_live - alloc0;
		uint64_t heap1 = malloc_in_use();
		malloc_bytes = heap1 > heap0 ? heap1 - heap0 : 0;
		char buf[128];
		std::snprintf(buf, sizeof buf, "%zu buckets, load %.3f", (size_t)m.bucket_count(),
			      (double)m.size() / (double)m.bucket_count());
		notes = buf;
	}

	void check(const Data &d) override
	{
		if (m.size() != d.n)
			fail("%s: size %zu, expected %" PRIu64, name, (size_t)m.size(), d.n);
		for (uint64_t i = 0; i < d.n; i++) {
			auto it = m.find(d.keys[i]);
			if (it == m.end() || it->second != d.values[i])
				fail("%s: %s missing or wrong", name, d.keys[i].c_str());
		}
		for (const std::string &k : absent_keys(d.n))
			if (m.find(k) != m.end())
				fail("%s: absent key '%s' found", name, k.c_str());
	}

	uint64_t pass(const std::vector<std::string> &lookups) override { return pass_map(m, lookups); }

	__attribute__((noinline)) static uint64_t pass_map(const Map &m,
							   const std::vector<std::string> &lookups)
	{
		uint64_t sum = 0;
		for (const std::string &k : lookups) {
			auto it = m.find(k);
			if (it != m.end())
				sum += it->second.size() + (unsigned char)it->second[0];
		}
		return sum;
	}
};

double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	size_t n = v.size();
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double best(const std::vector<double> &v)
{
	return *std::min_element(v.begin(), v.end());
}

// ---------------------------------------------------------------- environment

struct Env {
	std::string cpu, date, compiler, kernel, load_start, load_end;
	long nproc = 0;
	bool ndebug = false;
};

// The 1-, 5- and 15-minute load averages: other work on the machine skews numbers.
std::string loadavg()
{
	std::ifstream f("/proc/loadavg");
	std::string a, b, c;
	f >> a >> b >> c;
	return a + " " + b + " " + c;
}

Env environment()
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
	return e;
}

std::string json_str(const std::string &s)
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

struct Result {
	uint64_t n;
	std::vector<std::unique_ptr<System>> systems;
	std::unique_ptr<System> hidden; // the image behind shmkv-batch when shmkv itself is not shown
};

const System *find(const Result &r, const char *name)
{
	for (const auto &s : r.systems)
		if (!std::strcmp(s->name, name))
			return s.get();
	return nullptr;
}

void print_table(const Options &o, const Env &e, const std::vector<Result> &results)
{
	std::printf("# shmkv lookup_bench\n\n");
	std::printf("%s, %ld CPUs; %s; %s; NDEBUG %s; probe %s; load average %s at start, %s "
		    "at end\n\n",
		    e.cpu.c_str(), e.nproc, e.date.c_str(), e.compiler.c_str(), e.ndebug ? "on" : "off",
		    shmkv_vector_name(), e.load_start.c_str(), e.load_end.c_str());
	std::printf("%" PRIu64 " uniform random hits per pass (seed %" PRIu64 "), %u passes; "
		    "ns/get = wall clock, median pass (best pass); cpu ns/get = thread CPU time, median "
		    "pass (well below the wall figure: the run was disturbed);\n"
		    "x absl = wall median / absl wall median (cpu median / absl cpu median).\n"
		    "bytes/key: shmkv image file size / N; maps: bytes requested from the allocator "
		    "(mallinfo2 growth in parentheses).\n\n",
		    o.lookups, o.seed, o.reps);
	std::printf("| keys | system | build s | bytes/key | ns/get median (best) | cpu ns/get | "
		    "x absl |\n");
	std::printf("|---:|---|---:|---:|---:|---:|---:|\n");
	for (const Result &r : results) {
		const System *absl = find(r, "absl");
		double absl_med = absl ? median(absl->ns_per_get) : 0;
		double absl_cpu = absl ? median(absl->cpu_ns_per_get) : 0;
		for (const auto &s : r.systems) {
			double med = median(s->ns_per_get), cpu = median(s->cpu_ns_per_get);
			char ratio[32] = "-";
			if (absl_med > 0)
				std::snprintf(ratio, sizeof ratio, "%.2f (%.2f)", med / absl_med, cpu / absl_cpu);
			char mem[64];
			if (s->bytes == s->malloc_bytes)
				std::snprintf(mem, sizeof mem, "%.1f", (double)s->bytes / (double)r.n);
			else
				std::snprintf(mem, sizeof mem, "%.1f (%.1f)", (double)s->bytes / (double)r.n,
					      (double)s->malloc_bytes / (double)r.n);
			std::printf("| %" PRIu64 " | %s | %.2f | %s | %.1f (%.1f) | %.1f | %s |\n", r.n,
				    s->name, s->build_s, mem, med, best(s->ns_per_get), cpu, ratio);
		}
	}
	std::printf("\n");
	for (const Result &r : results)
		for (const auto &s : r.systems)
			std::printf("- %" PRIu64 " %s: %s\n", r.n, s->name, s->notes.c_str());
}

void write_json(const Options &o, const Env &e, const std::vector<Result> &results)
{
	FILE *f = std::fopen(o.json.c_str(), "w");
	if (!f) {
		std::perror(o.json.c_str());
		std::exit(1);
	}
	std::fprintf(f, "{\n  \"bench\": \"lookup_bench\",\n");
	std::fprintf(f, "  \"cpu\": %s,\n  \"nproc\": %ld,\n  \"date\": %s,\n  \"compiler\": %s,\n",
		     json_str(e.cpu).c_str(), e.nproc, json_str(e.date).c_str(),
		     json_str(e.compiler).c_str());
	std::fprintf(f, "  \"loadavg_start\": %s,\n  \"loadavg_end\": %s,\n",
		     json_str(e.load_start).c_str(), json_str(e.load_end).c_str());
	std::fprintf(f, "  \"kernel\": %s,\n  \"ndebug\": %s,\n  \"probe\": %s,\n",
		     json_str(e.kernel).c_str(), e.ndebug ? "true" : "false",
		     json_str(shmkv_vector_name()).c_str());
	std::fprintf(f, "  \"lookups\": %" PRIu64 ",\n  \"seed\": %" PRIu64 ",\n  \"reps\": %u,\n",
		     o.lookups, o.seed, o.reps);
	std::fprintf(f, "  \"statistic\": \"median\",\n  \"results\": [\n");
	bool first = true;
	for (const Result &r : results) {
		const System *absl = find(r, "absl");
		double absl_med = absl ? median(absl->ns_per_get) : 0;
		double absl_cpu = absl ? median(absl->cpu_ns_per_get) : 0;
		for (const auto &s : r.systems) {
			double med = median(s->ns_per_get), cpu = median(s->cpu_ns_per_get);
			std::fprintf(f, "%s    {\"keys\": %" PRIu64 ", \"system\": %s, ", first ? "" : ",\n",
				     r.n, json_str(s->name).c_str());
			first = false;
			std::fprintf(f, "\"build_s\": %.4f, \"open_s\": %.4f, ", s->build_s, s->open_s);
			std::fprintf(f, "\"bytes\": %" PRIu64 ", \"malloc_bytes\": %" PRIu64 ", ", s->bytes,
				     s->malloc_bytes);
			std::fprintf(f, "\"bytes_per_key\": %.2f, ", (double)s->bytes / (double)r.n);
			std::fprintf(f, "\"ns_per_get_median\": %.2f, \"ns_per_get_best\": %.2f, ", med,
				     best(s->ns_per_get));
			std::fprintf(f, "\"cpu_ns_per_get_median\": %.2f, \"cpu_ns_per_get_best\": %.2f, ", cpu,
				     best(s->cpu_ns_per_get));
			if (absl_med > 0)
				std::fprintf(f, "\"ratio_vs_absl\": %.3f, \"cpu_ratio_vs_absl\": %.3f, ",
					     med / absl_med, cpu / absl_cpu);
			std::fprintf(f, "\"ns_per_get_passes\": [");
			for (size_t i = 0; i < s->ns_per_get.size(); i++)
				std::fprintf(f, "%s%.2f", i ? ", " : "", s->ns_per_get[i]);
			std::fprintf(f, "], \"cpu_ns_per_get_passes\": [");
			for (size_t i = 0; i < s->cpu_ns_per_get.size(); i++)
				std::fprintf(f, "%s%.2f", i ? ", " : "", s->cpu_ns_per_get[i]);
			std::fprintf(f, "], \"notes\": %s}", json_str(s->notes).c_str());
		}
	}
	std::fprintf(f, "\n  ]\n}\n");
	if (std::fclose(f) != 0) {
		std::perror(o.json.c_str());
		std::exit(1);
	}
}

} // namespace

int main(int argc, char **argv)
{
	Options o = parse_args(argc, argv);
	Env env = environment();
	std::vector<Result> results;
	for (uint64_t n : o.keys) {
		std::fprintf(stderr, "[%" PRIu64 " keys] preparing keys and %" PRIu64 " lookups\n", n,
			     o.lookups);
		Data d = make_data(n, o.lookups, o.seed);
		Result r;
		r.n = n;
		if (o.run_shmkv || o.run_batch) {
			auto shm = std::make_unique<ShmkvSystem>(o.dir, o.load_factor);
			shm->build(d); // the batch system reads the same image
			shm->built = true;
			const ShmkvSystem *img = shm.get();
			if (o.run_shmkv)
				r.systems.push_back(std::move(shm));
			else
				r.hidden = std::move(shm);
			if (o.run_batch)
				r.systems.push_back(std::make_unique<ShmkvBatchSystem>(img));
		}
		if (o.run_absl)
			r.systems.push_back(std::make_unique<MapSystem<AbslMap>>("absl"));
		if (o.run_std)
			r.systems.push_back(std::make_unique<MapSystem<StdMap>>("std"));
		for (auto &s : r.systems) {
			std::fprintf(stderr, "[%" PRIu64 " keys] %s: build", n, s->name);
			if (!s->built)
				s->build(d);
			s->built = true;
			std::fprintf(stderr, " %.2f s, check", s->build_s);
			s->check(d);
			std::fprintf(stderr, " ok\n");
		}
		for (unsigned rep = 0; rep < o.reps; rep++) {
			for (auto &s : r.systems) {
				double c0 = thread_cpu_seconds();
				auto t0 = Clock::now();
				uint64_t sum = s->pass(d.lookups);
				double secs = seconds_since(t0);
				double cpu = thread_cpu_seconds() - c0;
				if (sum != d.expect_sum)
					fail("%s: lookup sum %" PRIu64 ", expected %" PRIu64, s->name, sum,
					     d.expect_sum);
				s->ns_per_get.push_back(secs * 1e9 / (double)o.lookups);
				s->cpu_ns_per_get.push_back(cpu * 1e9 / (double)o.lookups);
				std::fprintf(stderr, "[%" PRIu64 " keys] pass %u %s %.1f ns/get (cpu %.1f)\n", n,
					     rep + 1, s->name, s->ns_per_get.back(), s->cpu_ns_per_get.back());
			}
		}
		for (auto &s : r.systems) // free them before the next N; keep the numbers
			s->release();
		if (r.hidden)
			r.hidden->release();
		results.push_back(std::move(r));
	}
	env.load_end = loadavg();
	print_table(o, env, results);
	if (!o.json.empty())
		write_json(o, env, results);
	return 0;
}
