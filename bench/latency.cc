// latency.cc - the latency phase: the distribution of single shmkv gets, not
// only their mean. Every get of a uniform stream of hits is timed on its own
// (rdtsc between lfences on x86-64, CLOCK_MONOTONIC elsewhere) and filed by
// where its key lives: in its home bucket, or displaced to a later one (FORMAT.md
// §6). p50, p99 and p99.9 per class, and p99/p50: a lookup should cost the
// same for every key. Gets read length + first byte, or every value byte
// (--read), and in the same passes a pointer chase over a buffer of the
// image's size times one dependent memory access: the floor a lone get is
// measured against (goal: a lone get ≤ 1.2× one access).
#include "bench.h"
#include "key_class.h"

#include <algorithm>
#include <cinttypes>
#include <ctime>

#include <sys/mman.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace bench {

namespace {

#if defined(__x86_64__)
inline uint64_t ticks()
{
	_mm_lfence(); // the get before has retired; the one after has not started
	uint64_t t = __rdtsc();
	_mm_lfence();
	return t;
}
const char *const kTimer = "rdtsc between lfences";
#else
inline uint64_t ticks()
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
const char *const kTimer = "clock_gettime(CLOCK_MONOTONIC)";
#endif

// Is key in its home bucket? (key_class.h)
bool at_home(const shmkv *db, std::string_view key)
{
	int home = bench_key_at_home(db, key.data(), key.size());
	if (home < 0)
		fail("latency: key %.*s not found", (int)key.size(), key.data());
	return home == 1;
}

// The baseline of a lone get: one dependent random memory access. The
// buffer (the image's size, rounded up to 2 MiB) holds one random cycle over
// its 64-byte lines (Sattolo's algorithm), each line the index of the next,
// so every access depends on the one before and no prefetcher can guess it.
// Pages: 4 KiB (MADV_NOHUGEPAGE, whatever THP's setting) as the image on a
// plain tmpfs, or with --hugepages huge pages (MAP_HUGETLB when the pool has
// them, else MADV_HUGEPAGE), as the image opened SHMKV_OPEN_HUGEPAGES.
class Chase {
public:
	Chase(uint64_t image_bytes, bool huge, uint64_t seed)
	{
		const size_t align = 2u << 20;
		bytes_ = (size_t)((image_bytes + align - 1) / align * align);
		void *p = MAP_FAILED;
		if (huge) {
			p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
			how_ = "MAP_HUGETLB, 2 MiB pages";
		}
		if (p == MAP_FAILED) {
			// over-allocate by 2 MiB so that THP can back aligned 2 MiB extents
			map_bytes_ = bytes_ + align;
			void *raw = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (raw == MAP_FAILED)
				fail("latency: mmap of %zu bytes for the pointer chase failed", map_bytes_);
			raw_ = raw;
			p = (void *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
			if (madvise(p, bytes_, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) != 0)
				fail("latency: madvise on the pointer chase buffer failed");
			how_ = huge ? "MAP_HUGETLB failed (no pool): MADV_HUGEPAGE"
				    : "4 KiB pages (MADV_NOHUGEPAGE)";
		} else {
			raw_ = p;
			map_bytes_ = bytes_;
		}
		base_ = (uint64_t *)p;
		size_t lines = bytes_ / 64;
		uint64_t st = seed ^ 0xC4A5E;
		for (size_t i = 0; i < lines; i++)
			base_[i * 8] = i;
		for (size_t i = lines - 1; i > 0; i--) { // Sattolo: one cycle through all lines
			size_t j = (size_t)uniform(st, i);
			std::swap(base_[i * 8], base_[j * 8]);
		}
		if (huge && raw_ != p)
			how_ += fmt(", AnonHugePages of the process %.0f MiB",
				    smaps_sum("", "AnonHugePages") / 1048576.0);
		pages_ = huge ? "huge pages" : "4 KiB pages";
	}
	~Chase() { munmap(raw_, map_bytes_); }
	Chase(const Chase &) = delete;
	Chase &operator=(const Chase &) = delete;

	size_t bytes() const { return bytes_; }
	const std::string &pages() const { return pages_; }
	const std::string &how() const { return how_; }

	// count accesses, each timed alone as a get is (lfence, rdtsc, lfence)
	std::vector<uint64_t> lone(size_t count)
	{
		std::vector<uint64_t> t;
		t.reserve(count);
		for (size_t i = 0; i < count; i++) {
			uint64_t a = ticks();
			pos_ = *(volatile uint64_t *)(base_ + pos_ * 8);
			uint64_t b = ticks();
			t.push_back(b - a);
		}
		return t;
	}

	// ns per access of count accesses in one dependent chain, no fences, by
	// the thread's CPU time (the wall clock of a whole chain on a loaded
	// machine counts the time slices other processes ran)
	double chain(size_t count)
	{
		double c0 = thread_cpu_seconds();
		uint64_t p = pos_;
		for (size_t i = 0; i < count; i++)
			p = *(volatile uint64_t *)(base_ + p * 8);
		pos_ = p;
		return (thread_cpu_seconds() - c0) * 1e9 / (double)count;
	}

private:
	size_t bytes_ = 0, map_bytes_ = 0;
	void *raw_ = nullptr;
	uint64_t *base_ = nullptr;
	uint64_t pos_ = 0;
	std::string how_, pages_;
};

double pct_of(std::vector<uint64_t> &v, double p)
{
	if (v.empty())
		return 0;
	size_t i = (size_t)(p / 100.0 * (double)(v.size() - 1) + 0.5);
	std::nth_element(v.begin(), v.begin() + (long)i, v.end());
	return (double)v[i];
}

} // namespace

// One table size and the shmkv system.
static void latency_one(const Options &o, Report &r, uint64_t n, const std::string &name)
{
	{
		note("[latency %" PRIu64 " keys] building %s\n", n, name.c_str());
		Dataset d = make_dataset(n, Kind::Str);
		std::unique_ptr<System> sys;
		shmkv *db = nullptr;
		if (o.attach.empty()) {
			sys = make_system(name, o, Kind::Str, nullptr);
			sys->build(d, o.dir);
			unsigned flags = SHMKV_OPEN_POPULATE | (o.hugepages ? SHMKV_OPEN_HUGEPAGES : 0);
			int err = shmkv_open_file(sys->path.c_str(), flags, &db);
			if (err)
				fail("latency: shmkv_open_file %s: %s", sys->path.c_str(),
				     shmkv_strerror(err));
		} else { // the loader's cache kv_N (--attach), on its huge pages
			char why[256];
			std::string cache = fmt("kv_%" PRIu64, n);
			if (shmkv_attach_diag(o.attach.c_str(), cache.c_str(), 0, &db, why, sizeof why))
				fail("latency: shmkv_attach %s %s: %s", o.attach.c_str(), cache.c_str(),
				     why);
		}
		// the baseline: one dependent access over a buffer of the image's size
		// (on huge pages when the image is)
		Chase chase(shmkv_header(db)->file_size, o.hugepages || !o.attach.empty(), o.seed);
		note("[latency %" PRIu64 " keys] pointer chase over %.0f MiB (%s)\n", n,
		     (double)chase.bytes() / 1048576.0, chase.pages().c_str());
		Stream s = make_stream(d, Pattern::Uniform, o.lat_lookups, o.seed, o.zipf_theta);
		std::vector<char> home(s.keys.size());
		uint64_t displaced = 0;
		for (size_t i = 0; i < s.keys.size(); i++) {
			home[i] = at_home(db, s.keys[i]);
			displaced += !home[i];
		}
		uint64_t expect_full = 0;
		for (const std::string &k : s.keys) {
			const char *v;
			size_t len;
			if (shmkv_get_str(db, k.data(), k.size(), &v, &len) == 0)
				expect_full += digest_full(v, len);
		}
		// the timer's own cost: the median of empty timed regions
		std::vector<uint64_t> empty(100000);
		for (uint64_t &e : empty) {
			uint64_t t0 = ticks();
			e = ticks() - t0;
		}
		double overhead = pct_of(empty, 50);
		// classes: 0 home, 1 displaced, 2 home-full, 3 displaced-full, 4 chase;
		// per pass, in turn (so that load on the machine hits them alike):
		// the chase, the gets reading length + first byte, the gets reading all
		std::vector<double> pcts[5][3];
		std::vector<double> chain_ns;
		double ticks_per_ns = 1;
		const bool modes[2] = {o.read_first, o.read_full};
		for (unsigned rep = 0; rep < o.reps; rep++) {
			std::vector<uint64_t> t[5];
			auto c0 = Clock::now();
			uint64_t k0 = ticks();
			t[4] = chase.lone(s.keys.size());
			for (int full = 0; full < 2; full++) {
				if (!modes[full])
					continue;
				std::vector<uint64_t> &th = t[2 * full], &td = t[2 * full + 1];
				th.reserve(s.keys.size());
				td.reserve(displaced);
				uint64_t found = 0, sum = 0;
				for (size_t i = 0; i < s.keys.size(); i++) {
					const char *v;
					size_t len;
					uint64_t a = ticks();
					int e = shmkv_get_str(db, s.keys[i].data(), s.keys[i].size(), &v, &len);
					if (e == 0) // inside the timed region: the read is part of the get
						sum += full ? digest_full(v, len) : digest_str(v, len);
					uint64_t b = ticks();
					found += e == 0;
					(home[i] ? th : td).push_back(b - a);
				}
				if (found != s.hits || sum != (full ? expect_full : s.expect))
					fail("latency: %s found %" PRIu64 " of %" PRIu64 " keys (%s read)",
					     name.c_str(), found, s.hits, full ? "full" : "first-byte");
			}
			ticks_per_ns = (double)(ticks() - k0) /
				       (double)std::chrono::duration_cast<std::chrono::nanoseconds>(
					       Clock::now() - c0)
					       .count();
			chain_ns.push_back(chase.chain(s.keys.size()));
			for (int c = 0; c < 5; c++) {
				if (t[c].empty())
					continue;
				pcts[c][0].push_back(pct_of(t[c], 50));
				pcts[c][1].push_back(pct_of(t[c], 99));
				pcts[c][2].push_back(pct_of(t[c], 99.9));
			}
		}
		static const char *const cls[5] = {"home", "displaced", "home-full", "displaced-full",
						   nullptr};
		for (int c = 0; c < 5; c++) {
			if (pcts[c][0].empty())
				continue;
			LatencyRecord l;
			l.keys = n;
			l.system = c < 4 ? name : "chase:" + name; // sized to name's image
			l.cls = c < 4 ? cls[c] : chase.pages();
			l.gets = c == 4 ? s.keys.size() : c & 1 ? displaced : s.keys.size() - displaced;
			double ns[3];
			for (int p = 0; p < 3; p++) {
				std::vector<double> &v = pcts[c][p];
				std::sort(v.begin(), v.end());
				double med = v.empty() ? 0 : v[v.size() / 2];
				ns[p] = std::max(0.0, med - overhead) / ticks_per_ns;
			}
			l.p50 = ns[0], l.p99 = ns[1], l.p999 = ns[2];
			l.timer = fmt("%s, %.1f ns of timer overhead subtracted", kTimer,
				      overhead / ticks_per_ns);
			if (c == 4)
				l.notes = fmt("%.0f MiB buffer (the image's size rounded up to 2 MiB), "
					      "%s; the same accesses unfenced in one dependent chain: %.1f "
					      "ns each by the thread's CPU time (median pass)",
					      (double)chase.bytes() / 1048576.0, chase.how().c_str(),
					      median(chain_ns));
			r.latency.push_back(l);
		}
		shmkv_close(db);
		if (sys) {
			sys->release();
			sys->remove();
		}
	}
}

void run_latency(const Options &o, Report &r)
{
	for (uint64_t n : o.lat_keys)
		latency_one(o, r, n, "shmkv");
}

} // namespace bench
