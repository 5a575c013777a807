// writes_test: changes to a loaded cache (loader/README.md, "Writes";
// lib/PROTOCOL.md, "Protocol 2"): set, remove and apply publish base +
// overlay generations that a C reader attached throughout sees after each
// refresh, never mixed; rollback steps back one publish; the first change
// retires the protocol 1 control segment (ESTALE, then a reader of
// protocol 1 only is refused); bad deltas are refused while the cache
// serves; only the loader's users may write; compaction (by request and
// past the bound) keeps the answers and the deltas that apply; its merge
// runs off the worker: changes (to that cache too) go on meanwhile and are
// caught up at its publish; a rollback, load, drop or stop cancels it.
#include <sys/mman.h>

#include <atomic>
#include <map>
#include <thread>

#include "fault_util.h"
#include "loader_util.h"
#include "uid_util.h"

using namespace loader_test;

namespace {

std::string get_str(const shmkv *db, const std::string &k, int *err)
{
	const char *s = nullptr;
	size_t n = 0;
	*err = shmkv_get_str(db, k.data(), k.size(), &s, &n);
	return *err ? std::string() : std::string(s, n);
}

// The protocol version and layout hash of ROOT/NAME.ctl (written once,
// before the file gets its name).
bool ctl_version(const std::string &root, const std::string &name, uint32_t *ver,
		 uint64_t *hash)
{
	std::string p = root + "/" + name + ".ctl";
	std::string d = read_file(p);
	if (d.size() < SHMKV_CTL_SIZE)
		return false;
	const shmkv_ctl *c = (const shmkv_ctl *)(const void *)d.data();
	*ver = c->protocol_version;
	*hash = c->layout_hash;
	return true;
}

// What a reader that speaks protocol 1 only checks at attach (the header of
// lib/shmkv/ctl.h before protocol 2): refused unless version 1, its hash.
bool old_reader_accepts(const std::string &root, const std::string &name)
{
	uint32_t v = 0;
	uint64_t h = 0;
	return ctl_version(root, name, &v, &h) && v == 1 && h == UINT64_C(0x4b43ad88b167e31c);
}

Json change(Loader &ld, const std::string &cache, const std::string &jsonl)
{
	return ld.req({"change", cache, jsonl});
}

// The flags of ROOT/NAME.ctl's entries as a reader snapshots them.
std::vector<uint32_t> ctl_flags(const std::string &root, const std::string &name)
{
	std::vector<uint32_t> out;
	std::string p = root + "/" + name + ".ctl";
	int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return out;
	void *m = mmap(nullptr, SHMKV_CTL_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return out;
	shmkv_ctl c;
	if (shmkv_ctl_read((const shmkv_ctl *)m, &c) == 0)
		for (uint32_t i = 0; i < c.segment_count && i < SHMKV_CTL_MAX_SEGMENTS; i++)
			out.push_back(c.segments[i].flags);
	munmap(m, SHMKV_CTL_SIZE);
	return out;
}

// How many entries of ROOT/NAME.ctl are base copies, lower and top copies.
std::string ctl_roles(const std::string &root, const std::string &name)
{
	unsigned n[3] = {0, 0, 0};
	for (uint32_t f : ctl_flags(root, name))
		n[f & SHMKV_SEG_TOP ? 2 : f & SHMKV_SEG_OVERLAY ? 1 : 0]++;
	return "base " + std::to_string(n[0]) + ", lower " + std::to_string(n[1]) + ", top " +
	       std::to_string(n[2]);
}

// Waits (generously) until the cache's fold count reaches want; its status.
Json wait_folds(Loader &ld, const std::string &cache, uint64_t want)
{
	Json s;
	for (uint64_t t0 = now_ms(); now_ms() - t0 < slow_ms(60000); usleep(10000)) {
		s = ld.status(cache);
		if (s["fold"]["count"].u64() >= want)
			break;
	}
	return s;
}

class Writes : public ::testing::Test {
protected:
	Env env;
	Loader ld{env};
	std::string base = env.img_path("a.shmkv");
	const uint64_t n = 200;
	void SetUp() override
	{
		ASSERT_EQ(build_image(base, "a", n), "");
		ASSERT_TRUE(ld.start());
		Json j = ld.load("w", base);
		ASSERT_TRUE(j.ok()) << j["error"].s();
	}
};

TEST_F(Writes, SetRemoveApplySeenAfterRefreshNeverMixed)
{
	int err;
	std::string why;
	// a reader attached before the first change: its control segment is
	// retired by it (protocol 1 -> 2)
	shmkv *early = attach(env.root(), "w", 0, &err, &why);
	ASSERT_NE(early, nullptr) << why;
	ASSERT_TRUE(old_reader_accepts(env.root(), "w"));

	Json j = change(ld, "w", R"({"key": "new", "value": "one"})");
	ASSERT_TRUE(j.ok()) << j["error"].s();
	uint64_t g1 = j["generation"].u64();
	EXPECT_EQ(j["changes"].u64(), 1u);
	EXPECT_EQ(shmkv_refresh(early), SHMKV_ESTALE);
	EXPECT_EQ(get_str(early, key_of(3), &err), value_of("a", 3)); // still serves its own
	shmkv_close(early);
	EXPECT_FALSE(old_reader_accepts(env.root(), "w")); // SHMKV_EPROTO for it
	uint32_t v = 0;
	uint64_t h = 0;
	ASSERT_TRUE(ctl_version(env.root(), "w", &v, &h));
	EXPECT_EQ(v, 2u);
	EXPECT_EQ(h, SHMKV_CTL_LAYOUT_HASH_V2);

	shmkv *db = attach(env.root(), "w", SHMKV_ATTACH_VERIFY, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	EXPECT_EQ(shmkv_generation(db), g1);
	EXPECT_EQ(get_str(db, "new", &err), "one");
	EXPECT_EQ(check_handle(db, "a", n), 0u);

	// remove a base key, then a typed upsert of another
	j = change(ld, "w", "{\"key\": \"" + key_of(5) + "\", \"remove\": true}");
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(get_str(db, key_of(5), &err), value_of("a", 5)); // until refresh
	EXPECT_EQ(shmkv_refresh(db), 1);
	get_str(db, key_of(5), &err);
	EXPECT_EQ(err, SHMKV_ENOTFOUND);
	EXPECT_EQ(get_str(db, "new", &err), "one");
	j = change(ld, "w", R"({"key": "count", "value": 42, "type": "i64"})");
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(shmkv_refresh(db), 1);
	int64_t iv = 0;
	EXPECT_EQ(shmkv_get_i64(db, "count", 5, &iv), 0);
	EXPECT_EQ(iv, 42);

	// a delta of 50 keys, applied while a second reader checks that every
	// generation it maps shows all of them old or all new
	std::vector<std::pair<std::string, std::string>> set;
	for (uint64_t i = 100; i < 150; i++)
		set.push_back({key_of(i), "v2-" + std::to_string(i)});
	std::string d1 = env.img_path("d1.delta");
	ASSERT_EQ(build_delta(d1, base, set, {key_of(7)}), "");
	std::atomic<bool> stop{false};
	std::atomic<uint64_t> mixed{0}, seen_new{0};
	shmkv *r2 = attach(env.root(), "w", 0, &err, &why);
	ASSERT_NE(r2, nullptr) << why;
	std::thread t([&] {
		while (!stop.load()) {
			shmkv_refresh(r2);
			int e;
			unsigned news = 0;
			for (uint64_t i = 100; i < 150; i++)
				news += get_str(r2, key_of(i), &e) == "v2-" + std::to_string(i);
			if (news != 0 && news != 50)
				mixed++;
			if (news == 50)
				seen_new++;
		}
	});
	j = ld.req({"apply", "w", d1});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["records"].u64(), 51u);
	EXPECT_TRUE(wait_until([&] { return seen_new.load() > 0; }, 60000, 5));
	stop = true;
	t.join();
	EXPECT_EQ(mixed.load(), 0u);
	shmkv_close(r2);
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_EQ(get_str(db, key_of(120), &err), "v2-120");
	get_str(db, key_of(7), &err);
	EXPECT_EQ(err, SHMKV_ENOTFOUND);
	get_str(db, key_of(5), &err); // the earlier removal is merged in
	EXPECT_EQ(err, SHMKV_ENOTFOUND);
	EXPECT_EQ(get_str(db, "new", &err), "one");
	EXPECT_EQ(get_str(db, key_of(99), &err), value_of("a", 99));

	// status: the change count and overlay size
	Json s = ld.status("w");
	EXPECT_EQ(s["overlay"]["records"].u64(), 54u);
	EXPECT_GT(s["overlay"]["bytes"].u64(), 0u);
	CmdRun r = shmctl(env, {"cache", "status", "w"});
	EXPECT_NE(r.out.find("54 records in the overlay"), std::string::npos) << r.out;
	r = shmctl(env, {"cache", "set", "w", "cli", "x y"});
	EXPECT_EQ(r.rc, 0) << r.err;
	EXPECT_NE(r.out.find("generation"), std::string::npos) << r.out;
	r = shmctl(env, {"-j", "cache", "remove", "w", "cli"});
	EXPECT_EQ(r.rc, 0) << r.err;
	EXPECT_NE(r.out.find("\"generation\""), std::string::npos) << r.out;
	EXPECT_EQ(shmkv_refresh(db), 1);
	get_str(db, "cli", &err);
	EXPECT_EQ(err, SHMKV_ENOTFOUND);
	shmkv_close(db);

	// a full load keeps protocol 2 (no overlay); drop + load gives 1 again
	j = ld.load("w", base);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	ASSERT_TRUE(ctl_version(env.root(), "w", &v, &h));
	EXPECT_EQ(v, 2u);
	db = attach(env.root(), "w", SHMKV_ATTACH_VERIFY, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	get_str(db, "new", &err);
	EXPECT_EQ(err, SHMKV_ENOTFOUND);
	shmkv_close(db);
	ASSERT_TRUE(ld.req({"drop", "w"}).ok());
	ASSERT_TRUE(ld.load("w", base).ok());
	EXPECT_TRUE(old_reader_accepts(env.root(), "w"));
}

TEST_F(Writes, RollbackStepsBackOnePublish)
{
	ASSERT_TRUE(change(ld, "w", R"({"key": "k", "value": "1"})").ok());
	ASSERT_TRUE(change(ld, "w", R"({"key": "k", "value": "2"})").ok());
	int err;
	std::string why;
	shmkv *db = attach(env.root(), "w", 0, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	EXPECT_EQ(get_str(db, "k", &err), "2");
	Json j = ld.req({"rollback", "w"});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_EQ(get_str(db, "k", &err), "1");
	EXPECT_EQ(check_handle(db, "a", n), 0u);
	j = ld.req({"rollback", "w"}); // undo: 2 again
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_EQ(get_str(db, "k", &err), "2");
	// a change after a rollback builds on what is served
	ASSERT_TRUE(change(ld, "w", R"({"key": "m", "value": "3"})").ok());
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_EQ(get_str(db, "k", &err), "2");
	EXPECT_EQ(get_str(db, "m", &err), "3");
	j = ld.req({"rollback", "w"});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(shmkv_refresh(db), 1);
	get_str(db, "m", &err);
	EXPECT_EQ(err, SHMKV_ENOTFOUND);
	EXPECT_EQ(get_str(db, "k", &err), "2");
	// the base segment was never unlinked
	EXPECT_EQ(check_handle(db, "a", n), 0u);
	shmkv_close(db);
	db = attach(env.root(), "w", SHMKV_ATTACH_VERIFY, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	shmkv_close(db);
}

TEST_F(Writes, BadDeltasRefusedWhileServing)
{
	ASSERT_TRUE(change(ld, "w", R"({"key": "k", "value": "1"})").ok());
	uint64_t gen = ld.status("w")["generation"].u64();
	std::string other = env.img_path("b.shmkv");
	ASSERT_EQ(build_image(other, "b", 10), "");
	auto refused = [&](const std::string &path, const std::string &what) {
		Json j = ld.req({"apply", "w", path});
		EXPECT_FALSE(j.ok()) << what;
		EXPECT_NE(j["error"].s().find(what), std::string::npos) << j["error"].s();
		EXPECT_EQ(ld.status("w")["generation"].u64(), gen) << what;
	};
	// a delta of another image
	std::string wrong = env.img_path("wrong.delta");
	ASSERT_EQ(build_delta(wrong, other, {{"x", "y"}}, {}), "");
	refused(wrong, "not the cache's base");
	// an image, not a delta
	refused(other, "not a delta");
	// damaged: a flipped byte in its values
	std::string good = env.img_path("good.delta");
	ASSERT_EQ(build_delta(good, base, {{"x", std::string(100, 'y')}}, {}), "");
	std::string bytes = read_file(good);
	std::string dam = env.img_path("damaged.delta");
	const shmkv_image_header *hd = (const shmkv_image_header *)(const void *)bytes.data();
	std::string b2 = bytes;
	b2[hd->sections[1].offset + 20] ^= 0x01; // in the OUT entry's value
	ASSERT_TRUE(shmkv_test::write_file(dam, b2));
	refused(dam, "checksum");
	// forged: its key filter cleared and every checksum made to match again;
	// only the structural check (FORMAT.md §19.4) catches it
	std::string f = bytes;
	memset(&f[hd->sections[3].offset], 0, hd->sections[3].size);
	reseal(f);
	std::string forged = env.img_path("forged.delta");
	ASSERT_TRUE(shmkv_test::write_file(forged, f));
	refused(forged, "filter");
	// a chain delta that does not follow what was applied
	std::string chained = env.img_path("chained.delta");
	ASSERT_EQ(build_delta(chained, base, {{"z", "1"}}, {}, good), "");
	refused(chained, "apply the chain in order");
	// a delta given to `load`
	Json j = ld.load("w", good);
	EXPECT_FALSE(j.ok());
	EXPECT_NE(j["error"].s().find("cache apply"), std::string::npos) << j["error"].s();
	// and then in order: the first, then its successor
	ASSERT_TRUE(ld.req({"apply", "w", good}).ok());
	j = ld.req({"apply", "w", chained});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	int err;
	std::string why;
	shmkv *db = attach(env.root(), "w", SHMKV_ATTACH_VERIFY, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	EXPECT_EQ(get_str(db, "z", &err), "1");
	EXPECT_EQ(get_str(db, "x", &err), std::string(100, 'y'));
	EXPECT_EQ(get_str(db, "k", &err), "1");
	shmkv_close(db);
	// bad changes: a clear error, nothing published
	gen = ld.status("w")["generation"].u64();
	j = change(ld, "w", R"({"key": "t", "value": "x", "type": "nosuch"})");
	EXPECT_FALSE(j.ok());
	EXPECT_NE(j["error"].s().find("nosuch"), std::string::npos) << j["error"].s();
	CmdRun r = shmctl(env, {"cache", "set", "w", "big", std::string(9000, 'v')});
	EXPECT_EQ(r.rc, 2);
	EXPECT_NE(r.err.find("too long"), std::string::npos) << r.err;
	EXPECT_EQ(ld.status("w")["generation"].u64(), gen);
}

TEST_F(Writes, OnlyTheLoadersUsersWrite)
{
	NEED_ROOT_FOR("a second uid");
	ld.kill9();
	Loader gl(env, {"--memory", "shm", "--config", group_conf(env)});
	ASSERT_TRUE(gl.start());
	ASSERT_TRUE(gl.load("w", base).ok());
	uint64_t gen = gl.status("w")["generation"].u64();
	std::string root = env.root();
	std::string broken = as_other({kGroup}, [&](int fd) {
		for (const std::vector<std::string> &w :
		     {std::vector<std::string>{"change", "w", R"({"key": "k", "value": "1"})"},
		      std::vector<std::string>{"apply", "w", "/nonexistent.delta"},
		      std::vector<std::string>{"stream", "w"}}) {
			std::string why;
			Json r = request(root, w, 30000, &why);
			if (r["reason"].s() != "not_permitted")
				say(fd, w[0] + ": " + r["reason"].s() + " " + why);
		}
	});
	EXPECT_EQ(broken, "");
	EXPECT_EQ(gl.status("w")["generation"].u64(), gen);
}

TEST_F(Writes, AdoptAfterKill9KeepsBaseAndOverlays)
{
	// the first change is the lower overlay, the second the top one
	ASSERT_TRUE(change(ld, "w", R"({"key": "k", "value": "1"})").ok());
	EXPECT_EQ(ctl_roles(env.root(), "w"), "base 1, lower 1, top 0");
	ASSERT_TRUE(change(ld, "w", "{\"key\": \"" + key_of(9) + "\", \"remove\": true}").ok());
	EXPECT_EQ(ctl_roles(env.root(), "w"), "base 1, lower 1, top 1");
	uint64_t gen = ld.status("w")["generation"].u64();
	ld.kill9();
	Loader again(env);
	ASSERT_TRUE(again.start());
	Json s = again.status("w");
	EXPECT_EQ(s["generation"].u64(), gen);
	EXPECT_EQ(s["overlay"]["records"].u64(), 2u);
	EXPECT_EQ(s["overlay"]["lower"]["records"].u64(), 1u);
	EXPECT_EQ(s["overlay"]["top"]["records"].u64(), 1u);
	EXPECT_EQ(s["protocol"].u64(), 2u);
	EXPECT_EQ(ctl_roles(env.root(), "w"), "base 1, lower 1, top 1");
	int err;
	std::string why;
	shmkv *db = attach(env.root(), "w", SHMKV_ATTACH_VERIFY, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	EXPECT_EQ(get_str(db, "k", &err), "1");
	get_str(db, key_of(9), &err);
	EXPECT_EQ(err, SHMKV_ENOTFOUND);
	// the segments it adopted were kept (no orphan sweep took them)
	EXPECT_EQ(check_handle(db, "a", 9), 0u);
	// changes go on from the adopted top (a key it holds changed again
	// counts once); the rollback survived too
	Json j = change(again, "w", R"({"key": "m", "value": "2"})");
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["changes"].u64(), 3u);
	EXPECT_EQ(j["top_records"].u64(), 2u);
	j = change(again, "w", "{\"key\": \"" + key_of(9) + "\", \"value\": \"back\"}");
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["changes"].u64(), 3u);
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_EQ(get_str(db, "k", &err), "1");
	EXPECT_EQ(get_str(db, "m", &err), "2");
	EXPECT_EQ(get_str(db, key_of(9), &err), "back");
	ASSERT_TRUE(again.req({"rollback", "w"}).ok());
	EXPECT_EQ(shmkv_refresh(db), 1);
	get_str(db, key_of(9), &err);
	EXPECT_EQ(err, SHMKV_ENOTFOUND);
	EXPECT_EQ(get_str(db, "m", &err), "2");
	EXPECT_EQ(get_str(db, "k", &err), "1");
	shmkv_close(db);
}

// A restart whose rollback generation lost an overlay file (removed by
// hand, or a kill between its unlink and the state file's update) keeps no
// rollback rather than one that would serve its base without those changes:
// its top, and its lower (after a fold, the current generation's is
// another file).
TEST_F(Writes, AdoptedRollbackWithoutItsOverlayIsNone)
{
	ld.kill9();
	std::string conf = env.base() + "/loader.conf";
	ASSERT_TRUE(shmkv_test::write_file(conf, "[cache w]\nfold_entries = 3\nfold_ratio = 0\n"));
	const std::vector<std::string> args = {"--memory", "shm", "--config", conf};
	for (const char *lost : {"rbtop", "rbov"}) {
		std::string what = std::string("without its ") + lost;
		std::unique_ptr<Loader> fl(new Loader(env, args));
		ASSERT_TRUE(fl->start()) << what;
		ASSERT_TRUE(fl->load("w", base).ok()) << what;
		// k1 the lower, k2 and k3 the top; with k4 the top folds (rbov
		// then names the lower before the fold: not the current one)
		int keys = strcmp(lost, "rbov") ? 3 : 4;
		for (int i = 1; i <= keys; i++)
			ASSERT_TRUE(change(*fl, "w", "{\"key\": \"k" + std::to_string(i) +
						   "\", \"value\": \"" + std::to_string(i) + "\"}").ok());
		if (keys == 4) {
			ASSERT_EQ(wait_folds(*fl, "w", 1)["fold"]["count"].u64(), 1u) << env.log();
		}
		fl->kill9();
		std::string state = read_file(env.root() + "/w.state"), key = "\n" + std::string(lost) + ".path=";
		size_t p = state.find(key);
		ASSERT_NE(p, std::string::npos) << what << "\n" << state;
		p += key.size();
		std::string file = state.substr(p, state.find('\n', p) - p);
		ASSERT_EQ(unlink(file.c_str()), 0) << what << ": " << file;
		fl.reset(new Loader(env, args));
		ASSERT_TRUE(fl->start()) << what;
		EXPECT_EQ(fl->status("w")["rollback"].kind, Json::NUL) << what << env.log();
		EXPECT_FALSE(fl->req({"rollback", "w"}).ok()) << what << ": a rollback losing changes";
		int err;
		std::string why;
		shmkv *db = attach(env.root(), "w", SHMKV_ATTACH_VERIFY, &err, &why);
		ASSERT_NE(db, nullptr) << what << ": " << why;
		for (int i = 1; i <= keys; i++)
			EXPECT_EQ(get_str(db, "k" + std::to_string(i), &err), std::to_string(i)) << what;
		EXPECT_EQ(check_handle(db, "a", n), 0u) << what;
		shmkv_close(db);
		EXPECT_NE(env.log().find(std::string("the rollback's ") +
					 (keys == 4 ? "lower" : "top") + " overlay"),
			  std::string::npos) << what << env.log();
		fl->kill9();
	}
}

// Two levels (loader/README.md, "Writes"): each change goes into the top
// overlay alone; once the top holds fold_entries records the loader folds
// it into the lower by itself, after the reply. A reader attached
// throughout sees every acknowledged change at its next refresh and never
// a half state (a delta's keys all old or all new), across the folds.
TEST_F(Writes, FoldsPastTheBoundReadersSeeEveryChange)
{
	ld.kill9();
	std::string conf = env.base() + "/loader.conf";
	ASSERT_TRUE(shmkv_test::write_file(conf, "[cache w]\nfold_entries = 8\nfold_ratio = 0\n"));
	Loader fl(env, {"--memory", "shm", "--config", conf});
	ASSERT_TRUE(fl.start());
	ASSERT_TRUE(fl.load("w", base).ok());
	// round i: p = q = i, c<i> = v<i>, and key_<i> of the base removed
	const uint64_t rounds = 60;
	auto apply = [&](uint64_t i) {
		std::string d = env.img_path("r" + std::to_string(i) + ".delta");
		std::string v = std::to_string(i);
		EXPECT_EQ(build_delta(d, base, {{"p", v}, {"q", v}, {"c" + v, "v" + v}}, {key_of(i)}),
			  "");
		return fl.req({"apply", "w", d});
	};
	Json j = apply(0);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(ctl_roles(env.root(), "w"), "base 1, lower 1, top 0");
	// what a generation serves, as far as round p of the changes
	auto consistent = [&](const shmkv *db, int64_t *p) -> std::string {
		int err, e2;
		std::string ps = get_str(db, "p", &err), qs = get_str(db, "q", &e2);
		if (err || e2 || ps != qs)
			return "p \"" + ps + "\" and q \"" + qs + "\"";
		*p = std::stoll(ps);
		for (int64_t k = 0; k < (int64_t)rounds; k++) {
			std::string c = get_str(db, "c" + std::to_string(k), &err);
			if (k <= *p ? c != "v" + std::to_string(k) : err != SHMKV_ENOTFOUND)
				return "round " + ps + ": c" + std::to_string(k) + " is \"" + c + "\"";
			get_str(db, key_of((uint64_t)k), &err);
			if ((err == SHMKV_ENOTFOUND) != (k <= *p))
				return "round " + ps + ": " + key_of((uint64_t)k) + " error " +
				       std::to_string(err);
		}
		return "";
	};
	int err;
	std::string why;
	shmkv *db = attach(env.root(), "w", 0, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	std::atomic<bool> stop{false};
	std::atomic<uint64_t> checks{0};
	std::string bad;
	std::thread reader([&] {
		shmkv *r = attach(env.root(), "w", 0, &err, &why);
		if (!r) {
			bad = "attach: " + why;
			return;
		}
		int64_t last = -1;
		while (!stop.load() && bad.empty()) {
			shmkv_refresh(r);
			int64_t p = -1;
			std::string b = consistent(r, &p);
			if (b.empty() && p < last)
				b = "round " + std::to_string(p) + " after round " + std::to_string(last);
			if (!b.empty())
				bad = "generation " + std::to_string(shmkv_generation(r)) + ": " + b;
			last = p;
			checks++;
		}
		shmkv_close(r);
	});
	for (uint64_t i = 1; i < rounds && bad.empty(); i++) {
		j = apply(i);
		ASSERT_TRUE(j.ok()) << j["error"].s();
		// p and q, the c keys and the removals: every key once
		EXPECT_EQ(j["changes"].u64(), 2 + 2 * (i + 1)) << "round " << i;
		EXPECT_LT(j["top_records"].u64(), 8u + 4u) << "round " << i;
		// acknowledged: the next refresh serves it (or a fold of it)
		shmkv_refresh(db);
		EXPECT_GE(shmkv_generation(db), j["generation"].u64());
		int64_t p = -1;
		EXPECT_EQ(consistent(db, &p), "") << "round " << i;
		EXPECT_EQ(p, (int64_t)i);
	}
	uint64_t seen = checks.load();
	EXPECT_TRUE(wait_until([&] { return checks.load() > seen + 2 || !bad.empty(); }, 60000, 5));
	stop = true;
	reader.join();
	EXPECT_EQ(bad, "");
	Json s = fl.status("w");
	// a fold every 2 or 3 rounds, each of the top alone into the lower
	EXPECT_GE(s["fold"]["count"].u64(), 15u) << env.log();
	EXPECT_EQ(s["fold"]["entries_bound"].u64(), 8u);
	EXPECT_EQ(s["overlay"]["records"].u64(), 2 + 2 * rounds);
	EXPECT_EQ(s["overlay"]["lower"]["records"].u64() +
			  (s["overlay"]["top"].kind == Json::NUL ? 0 : s["overlay"]["top"]["records"].u64()),
		  s["overlay"]["records"].u64() + (s["overlay"]["top"].kind == Json::NUL ? 0 : 2))
		<< "p and q in both levels";
	std::string m = fl.req({"metrics"})["text"].s();
	EXPECT_NE(m.find("shmkv_cache_folds_total{cache=\"w\"} " +
			 std::to_string(s["fold"]["count"].u64())), std::string::npos) << m;
	EXPECT_NE(m.find("shmkv_cache_overlay_records{cache=\"w\"} " +
			 std::to_string(2 + 2 * rounds)), std::string::npos) << m;
	CmdRun r = shmctl(env, {"cache", "status", "w"});
	EXPECT_NE(r.out.find("folds since start"), std::string::npos) << r.out;
	// only the files the current and the rollback generation name are kept
	EXPECT_LE(env.shm_files().size(), 5u);
	shmkv_close(db);
}

// A fold changes no content, so it is no step for rollback: across a fold
// the rollback stays the generation before the last change (loader/README.md,
// "Writes"), also after a restart.
TEST_F(Writes, RollbackAcrossAFoldStepsBackTheLastChange)
{
	ld.kill9();
	std::string conf = env.base() + "/loader.conf";
	ASSERT_TRUE(shmkv_test::write_file(conf, "[cache w]\nfold_entries = 3\nfold_ratio = 0\n"));
	std::unique_ptr<Loader> fl(new Loader(env, {"--memory", "shm", "--config", conf}));
	ASSERT_TRUE(fl->start());
	ASSERT_TRUE(fl->load("w", base).ok());
	auto set = [&](const std::string &k) {
		Json j = change(*fl, "w", "{\"key\": \"" + k + "\", \"value\": \"" + k + "\"}");
		EXPECT_TRUE(j.ok()) << j["error"].s();
		return j["generation"].u64();
	};
	set("k1"); // the lower
	set("k2"); // the top from here on
	set("k3");
	uint64_t g4 = set("k4"); // the top's third record: folded after the reply
	Json s = wait_folds(*fl, "w", 1);
	ASSERT_EQ(s["fold"]["count"].u64(), 1u) << env.log();
	EXPECT_EQ(s["generation"].u64(), g4 + 1);
	EXPECT_EQ(s["overlay"]["lower"]["records"].u64(), 4u);
	EXPECT_EQ(s["overlay"]["top"].kind, Json::NUL);
	EXPECT_EQ(ctl_roles(env.root(), "w"), "base 1, lower 1, top 0");
	EXPECT_EQ(s["rollback"]["generation"].u64(), g4 - 1) << "the generation before k4";
	int err;
	std::string why;
	shmkv *db = attach(env.root(), "w", SHMKV_ATTACH_VERIFY, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	auto has = [&](const std::string &k) { return get_str(db, k, &err) == k; };
	EXPECT_TRUE(has("k1") && has("k2") && has("k3") && has("k4"));
	// back: k4 goes, not the fold
	Json j = fl->req({"rollback", "w"});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["rollback_generation"].u64(), g4 + 1);
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_TRUE(has("k1") && has("k2") && has("k3"));
	EXPECT_FALSE(has("k4"));
	EXPECT_EQ(ctl_roles(env.root(), "w"), "base 1, lower 1, top 1");
	EXPECT_EQ(check_handle(db, "a", n), 0u);
	// and forth: the folded generation again
	ASSERT_TRUE(fl->req({"rollback", "w"}).ok());
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_TRUE(has("k4"));
	// a restart keeps that rollback: k4 goes again
	fl->kill9();
	fl.reset(new Loader(env, {"--memory", "shm", "--config", conf}));
	ASSERT_TRUE(fl->start());
	ASSERT_TRUE(fl->req({"rollback", "w"}).ok());
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_TRUE(has("k3"));
	EXPECT_FALSE(has("k4"));
	// a change there goes into its top; its rollback is the generation
	// before it, and the fold of that top keeps it so
	uint64_t g5 = set("k5");
	EXPECT_EQ(wait_folds(*fl, "w", 1)["fold"]["count"].u64(), 1u);
	ASSERT_TRUE(fl->req({"rollback", "w"}).ok());
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_FALSE(has("k5"));
	EXPECT_TRUE(has("k3"));
	EXPECT_EQ(check_handle(db, "a", n), 0u);
	EXPECT_GT(shmkv_generation(db), g5);
	shmkv_close(db);
	db = attach(env.root(), "w", SHMKV_ATTACH_VERIFY | SHMKV_OPEN_DEEP, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	shmkv_close(db);
}

// Compaction (loader/README.md, "Compaction"): base and overlay merged into
// a new base with the same answers; deltas of the image loaded (and its
// chain) still apply after it, after a rollback and after a restart.
TEST_F(Writes, CompactKeepsAnswersAndTheDeltaPipeline)
{
	std::string d1 = env.img_path("d1.delta"), d2 = env.img_path("d2.delta");
	ASSERT_EQ(build_delta(d1, base, {{"x", "1"}}, {key_of(3)}), "");
	ASSERT_EQ(build_delta(d2, base, {{"y", "2"}}, {key_of(4)}, d1), "");
	ASSERT_TRUE(ld.req({"apply", "w", d1}).ok());
	ASSERT_TRUE(change(ld, "w", R"({"key": "k", "value": "1"})").ok());
	ASSERT_TRUE(change(ld, "w", "{\"key\": \"" + key_of(9) + "\", \"remove\": true}").ok());
	int err;
	std::string why;
	shmkv *db = attach(env.root(), "w", SHMKV_ATTACH_VERIFY, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	uint64_t removed = 2; // key 3 and key 9 of the keys check_handle reads
	auto same = [&](const char *when) {
		EXPECT_EQ(get_str(db, "x", &err), "1") << when;
		EXPECT_EQ(get_str(db, "k", &err), "1") << when;
		for (uint64_t i : {3, 9}) {
			get_str(db, key_of(i), &err);
			EXPECT_EQ(err, SHMKV_ENOTFOUND) << when << " " << key_of(i);
		}
		EXPECT_EQ(check_handle(db, "a", n), removed) << when;
	};
	same("before");
	uint64_t gen = ld.status("w")["generation"].u64();
	uint64_t entries = ld.status("w")["entries"].u64(); // the base's
	Json j = ld.req({"compact", "w"});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_TRUE(j["compacted"].b);
	EXPECT_EQ(j["records"].u64(), 4u);
	EXPECT_EQ(j["generation"].u64(), gen + 1);
	EXPECT_EQ(shmkv_refresh(db), 1);
	same("compacted");
	Json s = ld.status("w");
	EXPECT_EQ(s["overlay"].kind, Json::NUL) << "no overlay after a compaction";
	EXPECT_EQ(s["compaction"]["count"].u64(), 1u);
	EXPECT_EQ(s["entries"].u64(), entries - 2 + 2); // two removed, two added
	// nothing to compact now
	j = ld.req({"compact", "w"});
	ASSERT_TRUE(j.ok());
	EXPECT_FALSE(j["compacted"].b);
	// the chain of the image loaded goes on: d2 follows d1
	j = ld.req({"apply", "w", d2});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_EQ(get_str(db, "y", &err), "2");
	get_str(db, key_of(4), &err);
	EXPECT_EQ(err, SHMKV_ENOTFOUND);
	EXPECT_EQ(check_handle(db, "a", n), removed + 1);
	// a delta of another image is still refused, naming both
	std::string other = env.img_path("b.shmkv"), od = env.img_path("od.delta");
	ASSERT_EQ(build_image(other, "b", 10), "");
	ASSERT_EQ(build_delta(od, other, {{"z", "1"}}, {}), "");
	j = ld.req({"apply", "w", od});
	EXPECT_FALSE(j.ok());
	EXPECT_NE(j["error"].s().find("compacted from"), std::string::npos) << j["error"].s();
	// rollback (d2's publish), again (the compaction: base plus overlay)
	ASSERT_TRUE(ld.req({"rollback", "w"}).ok());
	EXPECT_EQ(shmkv_refresh(db), 1);
	same("rolled back to the compacted base");
	// a restart adopts the compacted base and its origin: d2 applies again
	ld.kill9();
	Loader again(env);
	ASSERT_TRUE(again.start());
	j = again.req({"apply", "w", d2});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_EQ(get_str(db, "y", &err), "2");
	removed++; // key 4, by d2
	same("after a restart");
	shmkv_close(db);
}

TEST_F(Writes, CompactsByItselfPastTheBound)
{
	ld.kill9();
	std::string conf = env.base() + "/loader.conf";
	ASSERT_TRUE(shmkv_test::write_file(conf, "[cache w]\ncompact_entries = 20\n"));
	Loader bl(env, {"--memory", "shm", "--config", conf});
	ASSERT_TRUE(bl.start());
	ASSERT_TRUE(bl.load("w", base).ok());
	for (int i = 0; i < 25; i++)
		ASSERT_TRUE(change(bl, "w", "{\"key\": \"c" + std::to_string(i) + "\", \"value\": \"" +
					       std::to_string(i) + "\"}").ok());
	// queued after the 20th change's reply: wait for it, generously
	Json s;
	for (uint64_t t0 = now_ms(); now_ms() - t0 < slow_ms(60000); usleep(10000)) {
		s = bl.status("w");
		if (s["compaction"]["count"].u64() >= 1)
			break;
	}
	ASSERT_GE(s["compaction"]["count"].u64(), 1u) << "no compaction past 20 changes";
	EXPECT_LT(s["changes"].u64(), 20u);
	int err;
	std::string why;
	shmkv *db = attach(env.root(), "w", SHMKV_ATTACH_VERIFY, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	for (int i = 0; i < 25; i++)
		EXPECT_EQ(get_str(db, "c" + std::to_string(i), &err), std::to_string(i));
	EXPECT_EQ(check_handle(db, "a", n), 0u);
	shmkv_close(db);
	std::string m = bl.req({"metrics"})["text"].s();
	EXPECT_NE(m.find("shmkv_cache_compactions_total{cache=\"w\"} 1"), std::string::npos) << m;
}

// ---- a compaction's merge off the worker (loader/README.md, "Compaction") ----

// The loader with the fault shim, so that a test holds a compaction's merge
// in the builder's rename of its output (fault_conf.h: holdrename) for as
// long as it likes; caches w and v loaded; a model of the keys changed.
class CompactOff : public ::testing::Test {
protected:
	struct Rec {
		std::string v; // "" removed
		uint32_t exp;
	};
	Env env;
	Fault fault{env};
	Loader ld{env};
	std::string base = env.img_path("a.shmkv");
	const uint64_t n = 200;
	std::map<std::string, Rec> model;

	void SetUp() override
	{
		ASSERT_EQ(build_image(base, "a", n), "");
		std::string skip;
		if (!start_with_shim(ld, fault, &skip)) {
			if (!skip.empty())
				GTEST_SKIP() << skip;
			FAIL() << env.log();
		}
		for (const char *c : {"w", "v"}) {
			Json j = ld.load(c, base);
			ASSERT_TRUE(j.ok()) << j["error"].s();
		}
	}
	void TearDown() override { fault.clear(); }
	// The next rename onto ROOT/FILE (the merge's output: .w.compact.tmp)
	// waits until release(); held() once it does.
	void hold(const std::string &file) { fault.hold(env.root() + "/" + file); }
	bool held() { return fault.held(); }
	void release() { fault.clear(); }
	void set(const std::string &k, const std::string &v, uint32_t exp = 0,
		 const std::string &cache = "w")
	{
		std::string r = "{\"key\": \"" + k + "\", \"value\": \"" + v + "\"" +
				(exp ? ", \"expires\": " + std::to_string(exp) : "") + "}";
		Json j = change(ld, cache, r);
		ASSERT_TRUE(j.ok()) << j["error"].s();
		if (cache == "w")
			model[k] = {v, exp};
	}
	void remove(const std::string &k)
	{
		Json j = change(ld, "w", "{\"key\": \"" + k + "\", \"remove\": true}");
		ASSERT_TRUE(j.ok()) << j["error"].s();
		model[k] = {"", 0};
	}
	// What db answers differs from the model (and the base's other keys): "" if not.
	std::string check(shmkv *db)
	{
		std::string bad;
		int err;
		uint64_t removed = 0;
		for (const auto &kv : model) {
			std::string got = get_str(db, kv.first, &err);
			uint32_t x = 0;
			if (!err)
				shmkv_get_expires(db, kv.first.data(), kv.first.size(), &x);
			if (got != kv.second.v || (!err && x != kv.second.exp))
				bad += kv.first + "=\"" + got + "\"@" + std::to_string(x) + " (want \"" +
				       kv.second.v + "\"@" + std::to_string(kv.second.exp) + ") ";
			for (uint64_t i = 0; i < n; i++)
				removed += kv.first == key_of(i) && kv.second.v.empty();
		}
		uint64_t wrong = check_handle(db, "a", n);
		if (wrong != removed)
			bad += std::to_string(wrong) + " base keys wrong, " + std::to_string(removed) +
			       " removed";
		return bad;
	}
	std::string check_now()
	{
		int err;
		std::string why;
		shmkv *db = attach(env.root(), "w", SHMKV_ATTACH_VERIFY, &err, &why);
		if (!db)
			return "attach: " + why;
		std::string bad = check(db);
		shmkv_close(db);
		return bad;
	}
	Json reply(int fd)
	{
		std::string line;
		Json j;
		EXPECT_TRUE(read_line(fd, &line, 120000) && parse_json(line, &j)) << line;
		close(fd);
		return j;
	}
	size_t logged(const std::string &what) const
	{
		size_t k = 0;
		std::string log = env.log();
		for (size_t at = 0; (at = log.find(what, at)) != std::string::npos; at++)
			k++;
		return k;
	}
};

// While the merge of w is held, changes to w and to v are answered (the
// compaction still runs after them: they did not wait for it) and seen by
// readers; at the publish every key answers as the model says: the changes
// made meanwhile caught up (sets, removes, a value set back to what the
// merge holds, an expiry), and a rollback steps back to the generation
// before the compaction, with the same answers.
TEST_F(CompactOff, ChangesGoOnWhileItMergesAndCatchUp)
{
	const uint32_t e1 = 4000000000u, e2 = 4000000100u;
	set("k0", "a");
	set("k1", "a");
	set("same", "1");
	set("e", "x", e1);
	remove(key_of(3));
	hold(".w.compact.tmp");
	uint64_t t0 = now_ms();
	int fd = request_async(env.root(), {"compact", "w"});
	ASSERT_GE(fd, 0);
	ASSERT_TRUE(held()) << env.log();
	Json s = ld.status("w");
	EXPECT_TRUE(s["compaction"]["running"].b);
	EXPECT_GE(s["compaction"]["running_since_unix"].u64(), (uint64_t)time(nullptr) - 3600);
	std::string m = ld.req({"metrics"})["text"].s();
	EXPECT_NE(m.find("shmkv_cache_compacting{cache=\"w\"} 1"), std::string::npos) << m;
	EXPECT_NE(m.find("shmkv_cache_compacting{cache=\"v\"} 0"), std::string::npos) << m;
	EXPECT_NE(m.find("shmkv_cache_compaction_start_timestamp_seconds{cache=\"w\"}"),
		  std::string::npos) << m;
	uint64_t gen = s["generation"].u64();

	set("k0", "b");
	remove("k1");
	set("same", "2");
	set("same", "1"); // back to the value the merge holds
	set("e", "x", e2);
	remove(key_of(5));
	set("n1", "1");
	set("vk", "1", 0, "v");
	EXPECT_TRUE(ld.status("w")["compaction"]["running"].b) << "the changes waited for it";
	EXPECT_EQ(ld.status("w")["generation"].u64(), gen + 7);
	EXPECT_EQ(check_now(), "") << "before the publish";
	{
		int err;
		std::string why;
		shmkv *v = attach(env.root(), "v", 0, &err, &why);
		ASSERT_NE(v, nullptr) << why;
		EXPECT_EQ(get_str(v, "vk", &err), "1");
		shmkv_close(v);
	}
	release();
	Json j = reply(fd);
	ASSERT_TRUE(j.ok()) << j["error"].s() << env.log();
	EXPECT_TRUE(j["compacted"].b);
	EXPECT_EQ(j["records"].u64(), 5u); // the snapshot's keys
	// k0, k1, e, key 5, n1 differ from the snapshot; "same" does not
	EXPECT_EQ(j["catch_up"].u64(), 5u);
	EXPECT_EQ(j["generation"].u64(), gen + 8);
	printf("compaction held %llu ms, published\n", (unsigned long long)(now_ms() - t0));
	EXPECT_EQ(check_now(), "") << "after the publish";
	s = ld.status("w");
	EXPECT_FALSE(s["compaction"]["running"].b);
	EXPECT_EQ(s["compaction"]["count"].u64(), 1u);
	EXPECT_EQ(s["overlay"]["records"].u64(), 5u) << "the catch-up is the lower overlay";
	EXPECT_EQ(s["overlay"]["top"].kind, Json::NUL);
	// rollback steps back one publish: to the generation before the
	// compaction (its base and both overlays), the same answers; again:
	// the compacted one (a rollback undoes a rollback)
	Json r = ld.req({"rollback", "w"});
	ASSERT_TRUE(r.ok()) << r["error"].s();
	EXPECT_EQ(ld.status("w")["rollback"]["generation"].u64(), gen + 8);
	EXPECT_NE(ld.status("w")["overlay"]["top"].kind, Json::NUL) << "base and both overlays";
	EXPECT_EQ(check_now(), "") << "rolled back the compaction";
	ASSERT_TRUE(ld.req({"rollback", "w"}).ok());
	EXPECT_EQ(ld.status("w")["overlay"]["records"].u64(), 5u) << "the compacted one again";
	EXPECT_EQ(check_now(), "") << "the compacted one again";
	// a change after it goes over the catch-up
	set("k0", "c");
	EXPECT_EQ(check_now(), "");
	// nothing left behind
	EXPECT_FALSE(file_exists(env.root() + "/.w.compact.tmp"));
	EXPECT_FALSE(file_exists(env.root() + "/.w.catchup.tmp"));
}

// A second request for the same cache is answered with the running one; a
// request for another cache waits for it, then runs.
TEST_F(CompactOff, OneAtATime)
{
	set("k0", "a");
	set("vk", "1", 0, "v");
	hold(".w.compact.tmp");
	int a = request_async(env.root(), {"compact", "w"});
	ASSERT_TRUE(held()) << env.log();
	int b = request_async(env.root(), {"compact", "w"});
	int c = request_async(env.root(), {"compact", "v"});
	ASSERT_TRUE(a >= 0 && b >= 0 && c >= 0);
	set("k1", "b"); // the worker still serves
	release();
	Json ja = reply(a), jb = reply(b), jc = reply(c);
	ASSERT_TRUE(ja.ok()) << ja["error"].s();
	ASSERT_TRUE(jb.ok()) << jb["error"].s();
	ASSERT_TRUE(jc.ok()) << jc["error"].s();
	EXPECT_EQ(ja["generation"].u64(), jb["generation"].u64()) << "one compaction";
	EXPECT_EQ(ja["catch_up"].u64(), 1u);
	EXPECT_TRUE(jc["compacted"].b);
	EXPECT_EQ(ld.status("w")["compaction"]["count"].u64(), 1u);
	EXPECT_EQ(ld.status("v")["compaction"]["count"].u64(), 1u);
	EXPECT_EQ(check_now(), "");
}

// A compaction is seen before it starts, while it runs and after (status,
// metrics, `shmctl cache status`): w's requested while the worker is held in
// the state save of a change to v (queued behind the worker's jobs), then
// running (its merge held); v's, queued by its bound meanwhile, behind w's;
// then the last of each, w's figures those of its reply.
TEST_F(CompactOff, QueuedThenRunningThenLastAreSeen)
{
	std::string conf = env.base() + "/loader.conf";
	ASSERT_TRUE(shmkv_test::write_file(conf, "[cache v]\ncompact_entries = 2\n"));
	ASSERT_EQ(ld.stop(), 0) << env.log();
	ld.extra().insert(ld.extra().end(), {"--config", conf});
	std::string skip;
	ASSERT_TRUE(start_with_shim(ld, fault, &skip)) << skip << env.log();
	set("k0", "a");
	auto metrics = [&] { return ld.req({"metrics"})["text"].s(); };
	auto has = [](const std::string &text, const std::string &what) {
		return text.find(what) != std::string::npos;
	};

	// queued: behind the worker, busy with v's change
	hold("v.state");
	int cv = request_async(env.root(), {"change", "v", "{\"key\": \"v1\", \"value\": \"1\"}"});
	ASSERT_GE(cv, 0);
	ASSERT_TRUE(held()) << env.log();
	uint64_t t0 = (uint64_t)time(nullptr);
	int cw = request_async(env.root(), {"compact", "w"});
	ASSERT_GE(cw, 0);
	Json s;
	ASSERT_TRUE(wait_until([&] {
		s = ld.status("w");
		return s["compaction"]["queued"].b;
	}, 60000, 5)) << env.log();
	const Json *k = s.get("compaction");
	ASSERT_NE(k, nullptr);
	EXPECT_GE((*k)["queued_since_unix"].u64(), t0);
	EXPECT_LE((*k)["queued_since_unix"].u64(), (uint64_t)time(nullptr));
	EXPECT_EQ((*k)["queued_by"].s(), "request");
	EXPECT_EQ((*k)["queued_behind"].s(), "jobs");
	EXPECT_TRUE((*k)["queued_behind_cache"].is_null());
	EXPECT_EQ((*k)["queued_requests"].u64(), 1u);
	EXPECT_FALSE((*k)["running"].b);
	EXPECT_TRUE((*k)["running_since_unix"].is_null());
	EXPECT_TRUE((*k)["last_unix"].is_null());
	std::string m = metrics();
	EXPECT_TRUE(has(m, "shmkv_cache_compaction_queued{cache=\"w\",by=\"request\"} 1")) << m;
	EXPECT_TRUE(has(m, "shmkv_cache_compaction_queued{cache=\"w\",by=\"bound\"} 0")) << m;
	EXPECT_TRUE(has(m, "shmkv_cache_compaction_queued{cache=\"v\",by=\"request\"} 0")) << m;
	EXPECT_TRUE(has(m, "shmkv_cache_compaction_queued_timestamp_seconds{cache=\"w\"} ")) << m;
	EXPECT_FALSE(has(m, "shmkv_cache_compaction_queued_timestamp_seconds{cache=\"v\"}")) << m;
	EXPECT_TRUE(has(m, "shmkv_cache_compacting{cache=\"w\"} 0")) << m;
	CmdRun r = shmctl(env, {"cache", "status", "w"});
	EXPECT_TRUE(has(r.out, "(requested, behind the loader's jobs)")) << r.out;

	// running: the worker let go, w's merge held
	hold(".w.compact.tmp");
	Json j = reply(cv);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	ASSERT_TRUE(held()) << env.log();
	s = ld.status("w");
	k = s.get("compaction");
	ASSERT_NE(k, nullptr);
	EXPECT_TRUE((*k)["running"].b);
	EXPECT_GE((*k)["running_since_unix"].u64(), t0);
	EXPECT_EQ((*k)["running_by"].s(), "request");
	EXPECT_FALSE((*k)["queued"].b);
	EXPECT_TRUE((*k)["queued_since_unix"].is_null());
	EXPECT_EQ((*k)["queued_requests"].u64(), 0u);
	EXPECT_TRUE((*k)["last_unix"].is_null());
	// v past its bound: its compaction waits for w's
	uint64_t t1 = (uint64_t)time(nullptr);
	set("v2", "2", 0, "v");
	Json sv;
	ASSERT_TRUE(wait_until([&] {
		sv = ld.status("v");
		return sv["compaction"]["queued_behind"].s() == "compaction";
	}, 60000, 5)) << env.log();
	k = sv.get("compaction");
	ASSERT_NE(k, nullptr);
	EXPECT_TRUE((*k)["queued"].b);
	EXPECT_GE((*k)["queued_since_unix"].u64(), t1);
	EXPECT_EQ((*k)["queued_by"].s(), "bound");
	EXPECT_EQ((*k)["queued_behind_cache"].s(), "w");
	EXPECT_EQ((*k)["queued_requests"].u64(), 0u);
	EXPECT_FALSE((*k)["running"].b);
	m = metrics();
	EXPECT_TRUE(has(m, "shmkv_cache_compaction_queued{cache=\"v\",by=\"bound\"} 1")) << m;
	EXPECT_TRUE(has(m, "shmkv_cache_compaction_queued{cache=\"w\",by=\"request\"} 0")) << m;
	EXPECT_TRUE(has(m, "shmkv_cache_compacting{cache=\"w\"} 1")) << m;
	EXPECT_FALSE(has(m, "shmkv_cache_compaction_duration_seconds{cache=\"w\"}")) << m;
	r = shmctl(env, {"cache", "status", "v"});
	EXPECT_TRUE(has(r.out, "(the bound, behind the compaction of w)")) << r.out;
	r = shmctl(env, {"cache", "status", "w"});
	EXPECT_TRUE(has(r.out, "running for")) << r.out;

	// last: w published (then v runs and publishes)
	release();
	j = reply(cw);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	s = ld.status("w");
	k = s.get("compaction");
	ASSERT_NE(k, nullptr);
	EXPECT_FALSE((*k)["running"].b);
	EXPECT_FALSE((*k)["queued"].b);
	EXPECT_EQ((*k)["count"].u64(), 1u);
	EXPECT_GE((*k)["last_unix"].u64(), t0);
	EXPECT_EQ((*k)["last_ms"].u64(), j["ms"].u64());
	EXPECT_EQ((*k)["last_records"].u64(), j["records"].u64());
	EXPECT_EQ((*k)["last_records"].u64(), 1u); // k0
	EXPECT_EQ((*k)["last_catch_up"].u64(), j["catch_up"].u64());
	ASSERT_TRUE(wait_until([&] {
		sv = ld.status("v");
		return sv["compaction"]["count"].u64() == 1;
	}, 60000, 5)) << env.log();
	EXPECT_FALSE(sv["compaction"]["queued"].b);
	EXPECT_FALSE(sv["compaction"]["running"].b);
	EXPECT_EQ(sv["compaction"]["last_records"].u64(), 2u); // v1, v2
	m = metrics();
	EXPECT_TRUE(has(m, "shmkv_cache_compaction_duration_seconds{cache=\"w\"} ")) << m;
	EXPECT_TRUE(has(m, "shmkv_cache_compaction_queued{cache=\"v\",by=\"bound\"} 0")) << m;
	r = shmctl(env, {"cache", "status", "w"});
	EXPECT_TRUE(has(r.out, "1 since start, the last")) << r.out;
	EXPECT_TRUE(has(r.out, "(1 keys merged")) << r.out;
	EXPECT_EQ(check_now(), "");
}

// A rollback, a load or a drop of the cache while it merges cancels it: the
// request gets an error naming why, nothing of it is published (the merge
// ending later is discarded, its files removed), and the next one runs.
TEST_F(CompactOff, CancelledByRollbackLoadDrop)
{
	for (const char *what : {"rollback", "load", "drop"}) {
		SCOPED_TRACE(what);
		set("k0", what);
		set("k1", what);
		hold(".w.compact.tmp");
		int fd = request_async(env.root(), {"compact", "w"});
		ASSERT_TRUE(held()) << env.log();
		size_t discarded = logged("compaction of cache=w discarded");
		Json j = std::string(what) == "load" ? ld.load("w", base) : ld.req({what, "w"});
		ASSERT_TRUE(j.ok()) << j["error"].s();
		Json r = reply(fd);
		EXPECT_FALSE(r.ok());
		EXPECT_EQ(r["code"].s(), "ECANCELED");
		EXPECT_NE(r["error"].s().find(std::string("a ") + what), std::string::npos)
			<< r["error"].s();
		if (std::string(what) != "drop") {
			EXPECT_FALSE(ld.status("w")["compaction"]["running"].b);
		}
		uint64_t gen = std::string(what) == "drop" ? 0 : ld.status("w")["generation"].u64();
		release();
		ASSERT_TRUE(wait_until([&] { return logged("compaction of cache=w discarded") >
						    discarded; }, 60000, 10)) << env.log();
		EXPECT_FALSE(file_exists(env.root() + "/.w.compact.tmp"));
		if (std::string(what) == "drop") {
			ASSERT_TRUE(ld.load("w", base).ok());
			model.clear();
			continue;
		}
		EXPECT_EQ(ld.status("w")["generation"].u64(), gen) << "nothing of it published";
		if (std::string(what) == "load")
			model.clear();
		if (std::string(what) == "rollback")
			model["k1"] = {"", 0};
		EXPECT_EQ(check_now(), "");
	}
	// the next one runs
	set("k2", "x");
	Json j = ld.req({"compact", "w"});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_TRUE(j["compacted"].b);
	EXPECT_EQ(check_now(), "");
}

// A stop while it merges does not wait for the merge: the request is
// answered "stopping", and the next loader starts with no temporary left.
TEST_F(CompactOff, StopDoesNotWaitForTheMerge)
{
	set("k0", "a");
	hold(".w.compact.tmp");
	int fd = request_async(env.root(), {"compact", "w"});
	ASSERT_TRUE(held()) << env.log();
	uint64_t t0 = now_ms();
	EXPECT_EQ(ld.stop(), 0) << env.log();
	EXPECT_LT(now_ms() - t0, slow_ms(30000)) << "the stop waited for the merge";
	Json r = reply(fd);
	EXPECT_FALSE(r.ok());
	EXPECT_EQ(r["reason"].s(), "stopping") << r["error"].s();
	release();
	Loader again(env);
	ASSERT_TRUE(again.start());
	EXPECT_FALSE(file_exists(env.root() + "/.w.compact.tmp"));
	EXPECT_EQ(check_now(), "");
	Json j = again.req({"compact", "w"});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(check_now(), "");
}

// kill -9 during the merge, and during the catch-up (held in the state
// file's rename before the publish): the restarted loader answers every
// acknowledged change (the generation it adopts), and compacts again.
TEST_F(CompactOff, Kill9DuringMergeOrCatchUpKeepsEveryChange)
{
	for (int phase = 0; phase < 2; phase++) {
		SCOPED_TRACE(phase ? "catch-up" : "merge");
		std::string p = std::to_string(phase);
		set("k0", "a" + p);
		set("k1", "a" + p);
		hold(".w.compact.tmp");
		int fd = request_async(env.root(), {"compact", "w"});
		ASSERT_TRUE(held()) << env.log();
		set("k0", "b" + p);
		remove("k1");
		set("n" + p, "1");
		if (phase) { // the merge goes on, the catch-up waits in the publish's state save
			hold("w.state");
			ASSERT_TRUE(held()) << env.log();
		}
		ld.kill9();
		close(fd);
		release();
		std::string skip;
		ASSERT_TRUE(start_with_shim(ld, fault, &skip)) << skip << env.log();
		EXPECT_EQ(check_now(), "") << "after the restart";
		EXPECT_FALSE(file_exists(env.root() + "/.w.compact.tmp"));
		EXPECT_FALSE(file_exists(env.root() + "/.w.catchup.tmp"));
	}
	Json j = ld.req({"compact", "w"});
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(check_now(), "");
}

TEST_F(Writes, SpoolAppliesNameDotDelta)
{
	std::string d = env.img_path("s.delta");
	ASSERT_EQ(build_delta(d, base, {{"spooled", "yes"}}, {}), "");
	ASSERT_EQ(rename(d.c_str(), (env.spool() + "/w.delta").c_str()), 0);
	ASSERT_TRUE(wait_until([&] {
		return ld.status("w")["overlay"]["records"].u64() == 1;
	}, 60000, 20)) << env.log();
	int err;
	std::string why;
	shmkv *db = attach(env.root(), "w", 0, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	EXPECT_EQ(get_str(db, "spooled", &err), "yes");
	shmkv_close(db);
	EXPECT_TRUE(wait_until([&] { return access((env.spool() + "/w.delta").c_str(), F_OK) != 0; },
			       60000, 20));
	// one of another base: refused, kept as .rejected
	std::string other = env.img_path("o.shmkv"), bad = env.img_path("bad.delta");
	ASSERT_EQ(build_image(other, "o", 5), "");
	ASSERT_EQ(build_delta(bad, other, {{"x", "y"}}, {}), "");
	ASSERT_EQ(rename(bad.c_str(), (env.spool() + "/w.delta").c_str()), 0);
	EXPECT_TRUE(wait_until([&] {
		return access((env.spool() + "/w.delta.rejected").c_str(), F_OK) == 0;
	}, 60000, 20)) << env.log();
	EXPECT_EQ(ld.status("w")["overlay"]["records"].u64(), 1u);
}

// Protocol 2 read by hand-made control segments (no loader): base and
// overlay entries, the overlay's checks, and refresh keeping the old
// generation when a new one is refused.
struct Ctl2 {
	shmkv_ctl c;
	explicit Ctl2(uint32_t version = SHMKV_PROTOCOL_VERSION_2)
	{
		shmkv_ctl_init(&c);
		c.protocol_version = version;
		c.layout_hash = version == SHMKV_PROTOCOL_VERSION_2 ? SHMKV_CTL_LAYOUT_HASH_V2
								     : SHMKV_CTL_LAYOUT_HASH;
	}
	void add(const std::string &path, uint32_t flags, int node = -1)
	{
		shmkv_ctl_segment &s = c.segments[c.segment_count++];
		struct stat st;
		memset(&s, 0, sizeof s);
		if (stat(path.c_str(), &st) == 0)
			s.size = s.map_size = (uint64_t)st.st_size;
		s.node = node;
		s.flags = flags;
		s.page_size = 4096;
		snprintf(s.path, sizeof s.path, "%s", path.c_str());
	}
	// Publishes generation gen into the file (created on first use).
	bool publish(const std::string &file, uint64_t gen)
	{
		std::string data = read_file(file);
		if (data.size() != SHMKV_CTL_SIZE) {
			data.assign(SHMKV_CTL_SIZE, '\0');
			memcpy(&data[0], &c, sizeof c);
			if (!shmkv_test::write_file(file, data))
				return false;
		}
		int fd = open(file.c_str(), O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return false;
		void *m = mmap(nullptr, SHMKV_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		if (m == MAP_FAILED)
			return false;
		int err = shmkv_ctl_publish((shmkv_ctl *)m, gen, c.segments, c.segment_count, 1, 1);
		munmap(m, SHMKV_CTL_SIZE);
		return err == 0;
	}
};

TEST(Protocol2, ByHand)
{
	Env env;
	std::string a = env.img_path("a.shmkv"), b = env.img_path("b.shmkv");
	ASSERT_EQ(build_image(a, "a", 50), "");
	ASSERT_EQ(build_image(b, "b", 50), "");
	std::string da = env.img_path("a.delta"), db_ = env.img_path("b.delta");
	ASSERT_EQ(build_delta(da, a, {{"k", "over"}}, {key_of(1)}), "");
	ASSERT_EQ(build_delta(db_, b, {{"k", "other"}}, {}), "");
	std::string root = env.root();
	auto try_one = [&](const std::string &name, Ctl2 &c, unsigned flags, std::string *why) {
		EXPECT_TRUE(c.publish(root + "/" + name + ".ctl", 1));
		int err;
		shmkv *h = attach(root, name, flags, &err, why);
		shmkv_close(h);
		return err;
	};
	std::string why;
	{ // base + overlay: read through it, the overlay copy listed first
		Ctl2 c;
		c.add(da, SHMKV_SEG_OVERLAY);
		c.add(a, 0);
		ASSERT_TRUE(c.publish(root + "/ok.ctl", 1));
		for (unsigned flags : {0u, (unsigned)SHMKV_ATTACH_VERIFY, (unsigned)SHMKV_OPEN_DEEP}) {
			int err;
			shmkv *h = attach(root, "ok", flags, &err, &why);
			ASSERT_NE(h, nullptr) << why;
			EXPECT_EQ(get_str(h, "k", &err), "over");
			get_str(h, key_of(1), &err);
			EXPECT_EQ(err, SHMKV_ENOTFOUND);
			EXPECT_EQ(check_handle(h, "a", 50, 2), 0u); // the even keys
			// values survive shmkv_detach with their overlay
			shmkv *g = nullptr;
			ASSERT_EQ(shmkv_detach(h, &g), 0);
			EXPECT_EQ(get_str(g, "k", &err), "over");
			shmkv_close(g);
			shmkv_close(h);
		}
	}
	{ // an overlay of another image: the generation is refused
		Ctl2 c;
		c.add(a, 0);
		c.add(db_, SHMKV_SEG_OVERLAY);
		EXPECT_EQ(try_one("mismatch", c, 0, &why), SHMKV_EBASE) << why;
	}
	{ // a plain image as the overlay, a delta as the base
		Ctl2 c;
		c.add(a, 0);
		c.add(b, SHMKV_SEG_OVERLAY);
		EXPECT_EQ(try_one("plainov", c, 0, &why), SHMKV_EPROTO) << why;
		Ctl2 d;
		d.add(da, 0);
		EXPECT_EQ(try_one("deltabase", d, 0, &why), SHMKV_EPROTO) << why;
	}
	{ // an overlay without a base; an unknown flag; OVERLAY in protocol 1
		Ctl2 c;
		c.add(da, SHMKV_SEG_OVERLAY);
		EXPECT_EQ(try_one("nobase", c, 0, &why), SHMKV_EPROTO) << why;
		Ctl2 d;
		d.add(a, 4);
		EXPECT_EQ(try_one("flag", d, 0, &why), SHMKV_EPROTO) << why;
		Ctl2 e(SHMKV_PROTOCOL_VERSION);
		e.add(a, 0);
		e.add(da, SHMKV_SEG_OVERLAY);
		EXPECT_EQ(try_one("v1ov", e, 0, &why), SHMKV_EPROTO) << why;
	}
	{ // refresh: a refused generation keeps the old one; the next good one maps
		Ctl2 c;
		c.add(a, 0);
		std::string f = root + "/r.ctl";
		ASSERT_TRUE(c.publish(f, 1));
		int err;
		shmkv *h = attach(root, "r", 0, &err, &why);
		ASSERT_NE(h, nullptr) << why;
		c.add(db_, SHMKV_SEG_OVERLAY);
		ASSERT_TRUE(c.publish(f, 2));
		EXPECT_EQ(shmkv_refresh(h), SHMKV_EBASE);
		EXPECT_EQ(shmkv_generation(h), 1u);
		EXPECT_EQ(check_handle(h, "a", 50), 0u);
		c.c.segment_count = 1;
		c.add(da, SHMKV_SEG_OVERLAY);
		ASSERT_TRUE(c.publish(f, 3));
		EXPECT_EQ(shmkv_refresh(h), 1);
		EXPECT_EQ(get_str(h, "k", &err), "over");
		c.c.segment_count = 1; // the base alone again
		ASSERT_TRUE(c.publish(f, 4));
		EXPECT_EQ(shmkv_refresh(h), 1);
		get_str(h, "k", &err);
		EXPECT_EQ(err, SHMKV_ENOTFOUND);
		EXPECT_EQ(check_handle(h, "a", 50), 0u);
		shmkv_close(h);
	}
}

} // namespace
