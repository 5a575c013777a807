// latency.cc - the latency phase: the distribution of single shmkv gets, not
// only their mean. Every get of a uniform stream of hits is timed on its own
// (rdtsc between lfences on x86-64, CLOCK_MONOTONIC elsewhere) and filed by
// where its key lives: in its home bucket, or displaced to a later one (FORMAT.md
// §6). p50, p99 and p99.9 per class, and p99/p50: a lookup should cost the
// same for every key.
#include "bench.h"

#include <algorithm>
#include <cinttypes>
#include <ctime>
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

// Is key i in its home bucket? Its entry's offset in one of the home
// bucket's 8 slots, found through lib's public format functions.
bool at_home(const shmkv *db, std::string_view key)
{
	const shmkv_image_header *h = shmkv_header(db);
	const uint64_t *buckets =
		(const uint64_t *)(const void *)((const char *)h + h->sections[0].offset);
	uint64_t off = 0;
	if (shmkv_find_entry(db, key.data(), key.size(), &off) != 0)
		fail("latency: key %.*s not found", (int)key.size(), key.data());
	uint64_t b = shmkv_home_bucket(shmkv_key_hash(h->hash_seed, h->hash_bits, key.data(),
						      key.size()),
				       h->bucket_count);
	for (unsigned j = 0; j < SHMKV_BUCKET_SLOTS; j++)
		if (shmkv_slot_entry_offset(buckets[b * SHMKV_BUCKET_SLOTS + j]) == off)
			return true;
	return false;
}

double pct_of(std::vector<uint64_t> &v, double p)
{
	if (v.empty())
		return 0;
	size_t i = (size_t)(p / 100.0 * (double)(v.size() - 1) + 0.5);
	std::nth_element(v.begin(), v.begin() + (long)i, v.end());
	return (double)v[i];
}

} // namespace

void run_latency(const Options &o, Report &r)
{
	for (uint64_t n : o.lat_keys) {
		note("[latency %" PRIu64 " keys] building shmkv\n", n);
		Dataset d = make_dataset(n, Kind::Str);
		std::unique_ptr<System> sys = make_system("shmkv", o, Kind::Str, nullptr);
		sys->build(d, o.dir);
		shmkv *db = nullptr;
		int err = shmkv_open_file(sys->path.c_str(), SHMKV_OPEN_POPULATE, &db);
		if (err)
			fail("latency: shmkv_open_file %s: %s", sys->path.c_str(), shmkv_strerror(err));
		Stream s = make_stream(d, Pattern::Uniform, o.lat_lookups, o.seed, o.zipf_theta);
		std::vector<char> home(s.keys.size());
		uint64_t displaced = 0;
		for (size_t i = 0; i < s.keys.size(); i++) {
			home[i] = at_home(db, s.keys[i]);
			displaced += !home[i];
		}
		// the timer's own cost: the median of empty timed regions
		std::vector<uint64_t> empty(100000);
		for (uint64_t &e : empty) {
			uint64_t t0 = ticks();
			e = ticks() - t0;
		}
		double overhead = pct_of(empty, 50);
		// passes: each get timed; percentiles per pass, the median pass reported
		std::vector<double> pcts[2][3];
		double ticks_per_ns = 1;
		for (unsigned rep = 0; rep < o.reps; rep++) {
			std::vector<uint64_t> t[2];
			t[0].reserve(s.keys.size());
			t[1].reserve(displaced);
			uint64_t found = 0, sum = 0;
			auto c0 = Clock::now();
			uint64_t k0 = ticks();
			for (size_t i = 0; i < s.keys.size(); i++) {
				const char *v;
				size_t len;
				uint64_t a = ticks();
				int e = shmkv_get_str(db, s.keys[i].data(), s.keys[i].size(), &v, &len);
				uint64_t b = ticks();
				if (e == 0) {
					found++;
					sum += digest_str(v, len);
				}
				t[home[i] ? 0 : 1].push_back(b - a);
			}
			ticks_per_ns = (double)(ticks() - k0) /
				       (double)std::chrono::duration_cast<std::chrono::nanoseconds>(
					       Clock::now() - c0)
					       .count();
			if (found != s.hits || sum != s.expect)
				fail("latency: shmkv found %" PRIu64 " of %" PRIu64 " keys", found, s.hits);
			for (int c = 0; c < 2; c++) {
				pcts[c][0].push_back(pct_of(t[c], 50));
				pcts[c][1].push_back(pct_of(t[c], 99));
				pcts[c][2].push_back(pct_of(t[c], 99.9));
			}
		}
		for (int c = 0; c < 2; c++) {
			LatencyRecord l;
			l.keys = n;
			l.system = "shmkv";
			l.cls = c ? "displaced" : "home";
			l.gets = c ? displaced : s.keys.size() - displaced;
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
			r.latency.push_back(l);
		}
		shmkv_close(db);
		sys->release();
		sys->remove();
	}
}

} // namespace bench
