// swap_test: readers never see a wrong or torn value while the loader swaps
// generations under them.
//
// Three forked reader processes attach once, then loop: shmkv_refresh, read
// the image's __gen_tag and __n, and get random keys key_<i> of the same
// handle snapshot. A present key must hold "<tag>:val_<i>" of that very tag
// (keys past __n must be absent), so a get that mixed two generations, or
// read a half-loaded image, is counted as wrong. Meanwhile the test drives
// 210 swaps through six images of different tags and key counts (most with
// `load` over the socket, every tenth by renaming into the spool) and
// records which tag each generation got; every seventh swap is a `rollback`
// (the previous image republished as a new generation). Readers report over
// a pipe: counts, and every (generation, tag) they observed, which must
// match the record.
// At the end every reader must reach the last generation.
#include <atomic>
#include <random>

#include "loader_util.h"

using namespace loader_test;

namespace {

constexpr int kReaders = 3;
constexpr int kImages = 6;
constexpr int kSwaps = 210;
constexpr uint64_t kMaxKeys = 1600; // readers query key_0 .. key_1599

uint64_t keys_of_image(int k)
{
	return 800 + 150 * (uint64_t)k; // 800 .. 1550: keys past __n must be absent
}

struct Control {
	std::atomic<uint64_t> final_gen{0};   // 0 while swapping
	std::atomic<uint64_t> deadline_ms{0}; // readers give up after this (now_ms clock)
	std::atomic<int> attached{0};
};

struct Report {
	uint64_t gets = 0, wrong = 0, failed = 0, absent_ok = 0, moves = 0, refresh_errors = 0;
	uint64_t final_gen = 0, passes = 0;
	int attach_err = 0, first_refresh_err = 0;
	uint32_t nobs = 0;
	char first_wrong[160] = "";
};

struct Obs {
	uint64_t gen;
	char tag[16];
};

// The reader process: returns 0; everything it found goes through fd.
int reader_main(const std::string &root, Control *ctl, unsigned flags, int fd)
{
	Report r;
	std::vector<Obs> obs;
	std::mt19937_64 rng((uint64_t)getpid() * 0x9e3779b97f4a7c15ull);
	int err;
	std::string why;
	shmkv *db = attach(root, "swap", flags, &err, &why);
	ctl->attached.fetch_add(1);
	if (!db) {
		r.attach_err = err;
		snprintf(r.first_wrong, sizeof r.first_wrong, "attach: %s", why.c_str());
		write_all_fd(fd, &r, sizeof r);
		return 1;
	}
	auto note_wrong = [&](const char *fmt, ...) {
		r.wrong++;
		if (r.first_wrong[0])
			return;
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(r.first_wrong, sizeof r.first_wrong, fmt, ap);
		va_end(ap);
	};
	for (;;) {
		int rr = shmkv_refresh(db);
		if (rr == 1) {
			r.moves++;
		} else if (rr < 0 && rr != -EAGAIN) {
			/* -EAGAIN: a publish was under way; refresh never waits for it (attach.h),
			 * the handle keeps its generation and a later call moves: not an error */
			if (!r.refresh_errors)
				r.first_refresh_err = rr;
			r.refresh_errors++;
		}
		uint64_t gen = shmkv_generation(db);
		const char *tag;
		size_t tag_len;
		int64_t n = -1;
		if (shmkv_get_str(db, "__gen_tag", 9, &tag, &tag_len) ||
		    shmkv_get_i64(db, "__n", 3, &n) || tag_len == 0 || tag_len >= 16 || n < 0) {
			note_wrong("gen %llu: no __gen_tag/__n", (unsigned long long)gen);
			tag = "";
			tag_len = 0;
		}
		if (obs.empty() || obs.back().gen != gen) {
			Obs o{};
			o.gen = gen;
			memcpy(o.tag, tag, tag_len);
			obs.push_back(o);
		} else if (strncmp(obs.back().tag, tag, 16) != 0) {
			note_wrong("gen %llu: tag changed from %s to %.*s without a refresh",
				   (unsigned long long)gen, obs.back().tag, (int)tag_len, tag);
		}
		for (int q = 0; q < 64; q++) {
			uint64_t i = rng() % kMaxKeys;
			char key[32];
			snprintf(key, sizeof key, "key_%llu", (unsigned long long)i);
			/* strlen: GCC -O3 then knows kl < 32 (else it warns XXH3 reads past key) */
			size_t kl = strlen(key);
			const char *s;
			size_t len;
			int e = shmkv_get_str(db, key, kl, &s, &len);
			r.gets++;
			if ((int64_t)i >= n) {
				if (e == SHMKV_ENOTFOUND)
					r.absent_ok++;
				else
					note_wrong("gen %llu tag %.*s: %s (past __n=%lld) gave %s",
						   (unsigned long long)gen, (int)tag_len, tag, key,
						   (long long)n, e ? shmkv_strerror(e) : "a value");
				continue;
			}
			if (e) {
				r.failed++;
				if (!r.first_wrong[0])
					snprintf(r.first_wrong, sizeof r.first_wrong,
						 "gen %llu: get %s: %s", (unsigned long long)gen, key,
						 shmkv_strerror(e));
			} else if (!check_value(s, len, tag, tag_len, i)) {
				note_wrong("gen %llu tag %.*s: %s = \"%.*s\"", (unsigned long long)gen,
					   (int)tag_len, tag, key, (int)(len > 60 ? 60 : len), s);
			}
		}
		r.passes++;
		uint64_t fin = ctl->final_gen.load();
		if (fin && gen >= fin)
			break;
		if (now_ms() > ctl->deadline_ms.load())
			break;
		if (r.passes % 8 == 0)
			sched_yield(); // two cores: leave the loader some room
	}
	r.final_gen = shmkv_generation(db);
	r.nobs = (uint32_t)obs.size();
	shmkv_close(db);
	bool ok = write_all_fd(fd, &r, sizeof r) &&
		  (obs.empty() || write_all_fd(fd, obs.data(), obs.size() * sizeof(Obs)));
	return ok ? 0 : 2;
}

TEST(Swap, ReadersNeverSeeWrongValuesAcross200Swaps)
{
	Env env;
	Loader ld(env);
	ASSERT_TRUE(ld.start());

	std::vector<std::string> tags, paths;
	for (int k = 0; k < kImages; k++) {
		tags.push_back("t" + std::to_string(k));
		paths.push_back(env.img_path("swap-" + tags[k] + ".shmkv"));
		ASSERT_EQ(build_image(paths[k], tags[k], keys_of_image(k)), "");
	}

	std::map<uint64_t, std::string> expected; // generation -> tag
	Json j = ld.load("swap", paths[0]);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	ASSERT_EQ(j["generation"].u64(), 1u);
	expected[1] = tags[0];

	Shared<Control> ctl;
	ctl->deadline_ms = now_ms() + 150000;
	std::vector<std::unique_ptr<Child>> readers;
	for (int i = 0; i < kReaders; i++) {
		// reader 0 verifies every checksum at each attach and refresh
		unsigned flags = i == 0 ? SHMKV_ATTACH_VERIFY : 0;
		std::string root = env.root();
		Control *c = &*ctl;
		readers.push_back(std::make_unique<Child>(
			[root, c, flags](int fd) { return reader_main(root, c, flags, fd); }));
	}
	ASSERT_TRUE(wait_until([&] { return ctl->attached.load() == kReaders; }, 20000));

	uint64_t gen = 1, t0 = now_ms(), spooled = 0, rollbacks = 0;
	std::string cur_tag = tags[0], rb_tag;
	for (int s = 1; s <= kSwaps; s++) {
		int k = s % kImages;
		if (s % 7 == 0 && s % 10 != 0 && !rb_tag.empty()) {
			// republishes the previous image as a new generation
			j = ld.req({"rollback", "swap"});
			ASSERT_TRUE(j.ok()) << "rollback at swap " << s << ": " << j["error"].s();
			ASSERT_EQ(j["generation"].u64(), gen + 1);
			gen++;
			std::swap(cur_tag, rb_tag);
			expected[gen] = cur_tag;
			rollbacks++;
			continue;
		}
		if (s % 10 == 0) {
			ASSERT_EQ(spool_drop(env, paths[k], "swap", true), "");
			CtlView v;
			bool moved = wait_until(
				[&] { return read_ctl(env.root(), "swap", &v) && v.generation == gen + 1; },
				30000, 1);
			ASSERT_TRUE(moved) << "spooled swap " << s << " not published (generation "
					   << v.generation << ")";
			ASSERT_TRUE(wait_until([&] { return !file_exists(env.spool_path("swap")); },
					       10000, 1))
				<< "the loaded spool file was not removed";
			spooled++;
		} else {
			j = ld.load("swap", paths[k]);
			ASSERT_TRUE(j.ok()) << "swap " << s << ": " << j["error"].s();
			ASSERT_EQ(j["generation"].u64(), gen + 1) << "swap " << s;
			ASSERT_EQ(j["entries"].u64(), keys_of_image(k) + 2);
		}
		gen++;
		expected[gen] = tags[k];
		rb_tag = cur_tag;
		cur_tag = tags[k];
	}
	uint64_t swap_ms = now_ms() - t0;
	ctl->deadline_ms = now_ms() + 20000; // to reach the last generation
	ctl->final_gen = gen;

	uint64_t total_gets = 0;
	for (int i = 0; i < kReaders; i++) {
		std::string out = readers[i]->read_all(30000);
		int code = readers[i]->wait_exit(60000);
		ASSERT_GE(out.size(), sizeof(Report)) << "reader " << i << " exit " << code;
		Report r;
		memcpy(&r, out.data(), sizeof r);
		EXPECT_EQ(code, 0) << "reader " << i << ": " << r.first_wrong;
		EXPECT_EQ(r.attach_err, 0) << r.first_wrong;
		EXPECT_EQ(r.wrong, 0u) << "reader " << i << ": first: " << r.first_wrong;
		EXPECT_EQ(r.failed, 0u) << "reader " << i << ": first: " << r.first_wrong;
		EXPECT_EQ(r.refresh_errors, 0u)
			<< "reader " << i << ": first: " << shmkv_strerror(r.first_refresh_err);
		EXPECT_EQ(r.final_gen, gen) << "reader " << i << " did not reach the last generation";
		EXPECT_GT(r.absent_ok, 0u);
		ASSERT_EQ(out.size(), sizeof(Report) + r.nobs * sizeof(Obs)) << "reader " << i;
		uint64_t prev = 0;
		for (uint32_t o = 0; o < r.nobs; o++) {
			Obs ob;
			memcpy(&ob, out.data() + sizeof(Report) + o * sizeof(Obs), sizeof ob);
			EXPECT_GT(ob.gen, prev) << "reader " << i << ": generations went backwards";
			prev = ob.gen;
			auto it = expected.find(ob.gen);
			ASSERT_NE(it, expected.end()) << "reader " << i << " saw unknown generation "
						      << ob.gen;
			EXPECT_EQ(std::string(ob.tag, strnlen(ob.tag, 16)), it->second)
				<< "reader " << i << ": generation " << ob.gen << " served another image";
		}
		// with 210 swaps each reader must have moved many times
		EXPECT_GE(r.moves, 10u) << "reader " << i << " hardly ever refreshed";
		total_gets += r.gets;
		printf("reader %d: %llu gets (%llu absent as expected), %llu moves, %u generations "
		       "seen, %llu passes\n", i, (unsigned long long)r.gets,
		       (unsigned long long)r.absent_ok, (unsigned long long)r.moves, r.nobs,
		       (unsigned long long)r.passes);
	}
	printf("%d swaps (%llu through the spool, %llu rollbacks) in %llu ms; %llu gets\n",
	       kSwaps, (unsigned long long)spooled, (unsigned long long)rollbacks,
	       (unsigned long long)swap_ms,
	       (unsigned long long)total_gets);

	// the loader's view agrees; nothing leaked: current + rollback segments only
	j = ld.status("swap");
	ASSERT_TRUE(j.ok());
	EXPECT_EQ(j["generation"].u64(), gen);
	EXPECT_TRUE(j["last_error"].is_null()) << j["last_error"].s();
	EXPECT_EQ(j["rollback.generation"].u64(), gen - 1);
	EXPECT_EQ(j["memory"].s(), "shm");
	EXPECT_EQ(env.shm_files().size(), 2u) << "segments left: " << env.shm_files().size();
	EXPECT_TRUE(env.shm_files(".loading").empty());
	EXPECT_TRUE(list_dir(env.spool()).empty());
	EXPECT_EQ(ld.stop(), 0);
}

} // namespace
