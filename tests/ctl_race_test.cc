// ctl_race_test: one thread publishes thousands of generations into a control
// segment while others copy it out with shmkv_ctl_read(); every copy must be
// one whole publish, and generations never go backwards. Run under
// ThreadSanitizer in CI (meson setup -Db_sanitize=thread): both sides move
// words with atomics (lib/shmkv/ctl.h), so TSan must find no race.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <shmkv.h>

namespace {

// Everything a publish of generation g writes, derived from g, so a reader
// can tell a torn copy from a whole one.
uint32_t count_of(uint64_t g)
{
	return (uint32_t)(g % SHMKV_CTL_MAX_SEGMENTS) + 1;
}

shmkv_ctl_segment segment_of(uint64_t g, uint32_t i)
{
	shmkv_ctl_segment s;
	memset(&s, 0, sizeof s);
	s.node = (int32_t)i - 1;
	s.flags = (uint32_t)(g & 1);
	s.size = g * 4096 + i;
	s.map_size = g * 8192 + i;
	s.page_size = g ^ i;
	// a path of varying length, so that stale tail bytes would show
	snprintf(s.path, sizeof s.path, "/dev/shm/gen-%" PRIu64 "-seg-%u-%.*s", g, i,
		 (int)(g % 150), std::string(150, 'p').c_str());
	return s;
}

// "" when copy is generation g's publish, whole; else what differs.
std::string check_copy(const shmkv_ctl &c)
{
	uint64_t g = c.generation;
	if (g == 0)
		return c.segment_count == 0 ? "" : "generation 0 with segments";
	char buf[256];
	if (c.segment_count != count_of(g) || c.loader_pid != g || c.published_ns != -(int64_t)g) {
		snprintf(buf, sizeof buf, "generation %" PRIu64 ": count %u pid %" PRIu64 " ns %" PRId64,
			 g, c.segment_count, c.loader_pid, c.published_ns);
		return buf;
	}
	for (uint32_t i = 0; i < SHMKV_CTL_MAX_SEGMENTS; i++) {
		shmkv_ctl_segment want;
		if (i < count_of(g))
			want = segment_of(g, i);
		else
			memset(&want, 0, sizeof want);
		if (memcmp(&want, &c.segments[i], sizeof want) != 0) {
			snprintf(buf, sizeof buf, "generation %" PRIu64 ": segment %u is torn (%s)", g, i,
				 c.segments[i].path);
			return buf;
		}
	}
	for (uint64_t r : c.reserved)
		if (r)
			return "reserved word not zero";
	return "";
}

} // namespace

TEST(CtlRace, EveryCopyIsOneWholePublish)
{
	// a shared mapping, as the real control segment is
	void *m = mmap(nullptr, SHMKV_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);
	ASSERT_NE(m, MAP_FAILED);
	auto *ctl = static_cast<shmkv_ctl *>(m);
	shmkv_ctl_init(ctl);

#if defined(__SANITIZE_THREAD__)
	// ThreadSanitizer checks every access itself, at 20x the cost
	const uint64_t min_gens = 5000, min_reads = 15000;
#else
	const uint64_t min_gens = 20000, min_reads = 100000;
#endif
	const int readers = 2;
	std::atomic<bool> go{false};
	std::atomic<uint64_t> done{0}; // the last generation, once published
	std::atomic<uint64_t> reads[readers] = {};
	std::vector<uint64_t> copies(readers), again(readers), torn(readers);
	std::vector<std::string> first_bad(readers);

	std::thread writer([&] {
		while (!go.load(std::memory_order_acquire))
			;
		shmkv_ctl_segment segs[SHMKV_CTL_MAX_SEGMENTS];
		// at least min_gens publishes, and on until every reader has made
		// min_reads copies: on a busy host the threads overlap only now and
		// then, and a torn copy needs them to
		for (uint64_t g = 1;; g++) {
			for (uint32_t i = 0; i < count_of(g); i++)
				segs[i] = segment_of(g, i);
			ASSERT_EQ(shmkv_ctl_publish(ctl, g, segs, count_of(g), g, -(int64_t)g), 0);
			bool more = g < min_gens;
			for (int r = 0; r < readers && !more; r++)
				more = reads[r].load(std::memory_order_relaxed) < min_reads;
			if (!more) {
				done.store(g, std::memory_order_release);
				return;
			}
		}
	});
	std::vector<std::thread> rs;
	for (int r = 0; r < readers; r++)
		rs.emplace_back([&, r] {
			while (!go.load(std::memory_order_acquire))
				;
			uint64_t prev = 0;
			shmkv_ctl c;
			for (;;) {
				reads[r].fetch_add(1, std::memory_order_relaxed);
				int err = shmkv_ctl_read(ctl, &c);
				if (err == -EAGAIN) { // the writer was descheduled mid-section
					again[r]++;
					continue;
				}
				if (err) {
					first_bad[r] = std::string("shmkv_ctl_read: ") + shmkv_errname(err);
					reads[r].store(min_reads, std::memory_order_relaxed); // don't wait for me
					return;
				}
				copies[r]++;
				std::string bad = check_copy(c);
				if (bad.empty() && c.generation < prev)
					bad = "generation went back from " + std::to_string(prev) + " to " +
					      std::to_string(c.generation);
				if (!bad.empty() && torn[r]++ == 0)
					first_bad[r] = bad;
				prev = c.generation;
				// the cheap check agrees: never behind a copy already seen
				if (shmkv_ctl_generation(ctl) < prev && torn[r]++ == 0)
					first_bad[r] = "shmkv_ctl_generation behind a copy";
				uint64_t last = done.load(std::memory_order_acquire);
				if (last && c.generation == last)
					return;
			}
		});
	go.store(true, std::memory_order_release);
	writer.join();
	for (auto &t : rs)
		t.join();

	for (int r = 0; r < readers; r++) {
		EXPECT_EQ(torn[r], 0u) << "reader " << r << ": " << first_bad[r];
		EXPECT_TRUE(first_bad[r].empty()) << first_bad[r];
		EXPECT_GT(copies[r], 0u);
		printf("reader %d: %" PRIu64 " consistent copies, %" PRIu64 " gave up (-EAGAIN)\n", r,
		       copies[r], again[r]);
	}
	EXPECT_EQ(ctl->seq, 2 * done.load());
	munmap(m, SHMKV_CTL_SIZE);
}
