// soak_test: the loader swaps a cache every second while four reader
// processes read it at full speed and verify every value.
//
// A benchmark, not a test: `SHMKV_SOAK_SECONDS=600` runs the ten-minute
// soak recorded in bench/RESULTS.md (bench/soak/README.md has the command);
// CI runs the same program for 10 s (tests/loader/meson.build, loader_soak).
//
// Images: three of kKeys keys, each tagged (key_<i> -> "<tag>:val_<i>|pad",
// __gen_tag, __n). Every second the driver loads the next one over the
// socket (every seventh swap is a `rollback` instead): each swap must
// succeed and take generation + 1. Readers: attach once, then loop
// shmkv_refresh + a random get, checking that the value belongs to the
// handle's own tag (a torn, stale-mixed or missing value is counted as
// wrong). Memory: as root the shm dir is a private tmpfs mounted for the
// run (own mount namespace), so its usage is exact: measured before the
// first load, at its peak, and after the cache is dropped and the readers
// closed — it must be back to the baseline. Without root the Env's shm dir
// is used and only the segment files are counted.
#include <sched.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include <atomic>
#include <random>

#include "../../tests/loader/loader_util.h"

using namespace loader_test;

namespace {

constexpr int kReaders = 4;
constexpr int kImages = 3;
constexpr uint64_t kKeys = 200000;
constexpr size_t kPad = 24;

struct Control {
	std::atomic<int> stop{0};
	std::atomic<int> attached{0};
};

struct Report {
	uint64_t gets = 0, wrong = 0, missing = 0, refreshes = 0, moves = 0, refresh_errors = 0;
	uint64_t last_gen = 0, backwards = 0;
	int attach_err = 0;
	char first_wrong[600] = "";
};

int reader_main(const std::string &root, Control *ctl, int fd)
{
	Report r;
	std::mt19937_64 rng((uint64_t)getpid() * 0x9e3779b97f4a7c15ull);
	int err;
	std::string why;
	shmkv *db = attach(root, "soak", 0, &err, &why);
	ctl->attached.fetch_add(1);
	if (!db) {
		r.attach_err = err;
		snprintf(r.first_wrong, sizeof r.first_wrong, "attach: %s", why.c_str());
		write_all_fd(fd, &r, sizeof r);
		return 1;
	}
	std::string tag = tag_of(db);
	r.last_gen = shmkv_generation(db);
	char key[256]; // roomy: GCC's -Warray-bounds follows XXH3's wide paths
	while (!ctl->stop.load(std::memory_order_relaxed)) {
		for (int k = 0; k < 256; k++) {
			int rr = shmkv_refresh(db);
			r.refreshes++;
			/* -EAGAIN: a publish was under way (refresh never waits): not an error */
			if (rr < 0 && rr != -EAGAIN) {
				r.refresh_errors++;
			} else if (rr == 1) {
				r.moves++;
				tag = tag_of(db);
				uint64_t g = shmkv_generation(db);
				r.backwards += g <= r.last_gen;
				r.last_gen = g;
			}
			uint64_t i = rng() % kKeys;
			int n = snprintf(key, sizeof key, "key_%llu", (unsigned long long)i);
			const char *v;
			size_t len;
			r.gets++;
			if (shmkv_get_str(db, key, (size_t)n, &v, &len)) {
				r.missing++;
				if (!r.first_wrong[0])
					snprintf(r.first_wrong, sizeof r.first_wrong,
						 "gen %llu: %s missing", (unsigned long long)r.last_gen, key);
			} else if (!check_value(v, len, tag.data(), tag.size(), i)) {
				r.wrong++;
				if (!r.first_wrong[0])
					snprintf(r.first_wrong, sizeof r.first_wrong,
						 "gen %llu tag %s: %s = %.*s", (unsigned long long)r.last_gen,
						 tag.c_str(), key, (int)(len < 60 ? len : 60), v);
			}
		}
	}
	shmkv_close(db);
	write_all_fd(fd, &r, sizeof r);
	return 0;
}

uint64_t used_bytes(const std::string &dir)
{
	struct statvfs sv;
	if (statvfs(dir.c_str(), &sv) != 0)
		return 0;
	return (uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
}

uint64_t seg_bytes(const Env &env)
{
	uint64_t n = 0;
	for (const std::string &f : env.shm_files()) {
		struct stat st;
		if (stat((env.seg_dir() + "/" + f).c_str(), &st) == 0)
			n += (uint64_t)st.st_blocks * 512;
	}
	return n;
}

TEST(Soak, SwapEverySecondUnderFourReaders)
{
	std::string secs_s = env_or_empty("SHMKV_SOAK_SECONDS");
	unsigned secs = secs_s.empty() ? 10 : (unsigned)strtoul(secs_s.c_str(), nullptr, 10);
	ASSERT_GT(secs, 0u);
	// as root: a private tmpfs for the shm dir, so that its usage is ours alone
	bool own_tmpfs = false;
	if (geteuid() == 0 && unshare(CLONE_NEWNS) == 0 &&
	    mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0)
		own_tmpfs = true;
	Env env;
	if (own_tmpfs) {
		own_tmpfs = mount("shmkv-soak", env.shm().c_str(), "tmpfs", 0, "size=1G,mode=0755") == 0;
		if (!own_tmpfs)
			printf("mount tmpfs: %s: using %s as it is\n", strerror(errno), env.shm().c_str());
	}
	auto used = [&] { return own_tmpfs ? used_bytes(env.shm()) : seg_bytes(env); };
	std::vector<std::string> imgs, tags;
	for (int k = 0; k < kImages; k++) {
		tags.push_back("s" + std::to_string(k));
		imgs.push_back(env.img_path(tags.back() + ".shmkv"));
		ASSERT_EQ(build_image(imgs.back(), tags.back(), kKeys, kPad), "");
	}
	struct stat ist;
	ASSERT_EQ(stat(imgs[0].c_str(), &ist), 0);
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	uint64_t base_used = used();
	Json j = ld.load("soak", imgs[0]);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	uint64_t gen = j["generation"].u64();

	Shared<Control> ctl;
	std::vector<std::unique_ptr<Child>> readers;
	std::string root = env.root();
	for (int r = 0; r < kReaders; r++)
		readers.push_back(std::make_unique<Child>(
			[&](int fd) { return reader_main(root, &*ctl, fd); }));
	ASSERT_TRUE(wait_until([&] { return ctl->attached.load() == kReaders; }, 20000));

	uint64_t t0 = now_ms(), swaps = 0, rollbacks = 0, failed = 0, peak = used();
	uint64_t worst_ms = 0;
	std::string first_fail;
	for (uint64_t s = 1; now_ms() - t0 < (uint64_t)secs * 1000; s++) {
		uint64_t due = t0 + s * 1000;
		while (now_ms() < due)
			sleep_ms((unsigned)std::min<uint64_t>(due - now_ms(), 50));
		uint64_t a = now_ms();
		j = s % 7 == 0 ? ld.req({"rollback", "soak"}) : ld.load("soak", imgs[s % kImages]);
		uint64_t took = now_ms() - a;
		worst_ms = std::max(worst_ms, took);
		if (!j.ok() || j["generation"].u64() != gen + 1) {
			failed++;
			if (first_fail.empty())
				first_fail = "swap " + std::to_string(s) + ": " + j["error"].s() +
					     " generation " + std::to_string(j["generation"].u64());
		} else {
			gen++;
		}
		swaps++;
		rollbacks += s % 7 == 0;
		peak = std::max(peak, used());
	}
	uint64_t elapsed = now_ms() - t0;
	ctl->stop.store(1);
	Report total;
	int bad_readers = 0;
	for (int r = 0; r < kReaders; r++) {
		std::string out = readers[r]->read_all(30000);
		EXPECT_EQ(readers[r]->wait_exit(30000), 0);
		if (out.size() != sizeof(Report)) {
			bad_readers++;
			continue;
		}
		Report rep;
		memcpy(&rep, out.data(), sizeof rep);
		EXPECT_EQ(rep.attach_err, 0) << rep.first_wrong;
		EXPECT_EQ(rep.wrong + rep.missing, 0u) << "reader " << r << ": " << rep.first_wrong;
		EXPECT_EQ(rep.refresh_errors, 0u) << "reader " << r;
		EXPECT_EQ(rep.backwards, 0u) << "reader " << r << ": a generation went backwards";
		EXPECT_EQ(rep.last_gen, gen) << "reader " << r << " did not reach the last generation";
		printf("reader %d: %llu gets, %llu wrong, %llu missing, %llu refreshes (%llu errors), "
		       "%llu generations moved\n", r, (unsigned long long)rep.gets,
		       (unsigned long long)rep.wrong, (unsigned long long)rep.missing,
		       (unsigned long long)rep.refreshes, (unsigned long long)rep.refresh_errors,
		       (unsigned long long)rep.moves);
		total.gets += rep.gets;
		total.wrong += rep.wrong;
		total.missing += rep.missing;
		total.moves += rep.moves;
	}
	EXPECT_EQ(bad_readers, 0);
	readers.clear();
	EXPECT_EQ(failed, 0u) << first_fail;
	uint64_t end_used = used();
	EXPECT_EQ(env.shm_files().size(), 2u) << "current and rollback only";
	j = ld.req({"drop", "soak"});
	EXPECT_TRUE(j.ok()) << j["error"].s();
	uint64_t after = 0;
	// the kernel frees an unlinked segment when its last mapping goes: at once here
	EXPECT_TRUE(wait_until([&] { return (after = used()) <= base_used; }, 10000))
		<< "shm usage " << after << " bytes after drop, " << base_used << " before";
	EXPECT_EQ(ld.stop(), 0);
	printf("soak: %.1f s, %llu swaps (%llu rollbacks, %llu failed, slowest %llu ms), image "
	       "%llu bytes, %d readers: %llu gets, %llu wrong, %llu missing, %llu generation moves "
	       "seen; shm used (%s): baseline %llu, peak %llu, end of run %llu, after drop %llu "
	       "bytes\n",
	       elapsed / 1000.0, (unsigned long long)swaps, (unsigned long long)rollbacks,
	       (unsigned long long)failed, (unsigned long long)worst_ms,
	       (unsigned long long)ist.st_size, kReaders, (unsigned long long)total.gets,
	       (unsigned long long)total.wrong, (unsigned long long)total.missing,
	       (unsigned long long)total.moves, own_tmpfs ? "private tmpfs" : "segment files",
	       (unsigned long long)base_used, (unsigned long long)peak,
	       (unsigned long long)end_used, (unsigned long long)after);
	if (own_tmpfs)
		umount2(env.shm().c_str(), MNT_DETACH);
}

} // namespace
