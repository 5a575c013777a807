// delta_random_test: delta images against a model (lib/FORMAT.md §19.5).
// Random bases and random chains of deltas (upserts of new and present
// keys, tombstones of present and absent keys, every value type, expiries
// past and future, dedup on and off, empty deltas, a delta removing
// everything) are applied with the C API (shmkv_build_apply) and with
// `shmctl image apply`, and compared byte for byte with a full build of a
// dictionary model's merged records.
//
//   DeltaRandom.FixedSeeds    the cases of a fixed seed list
//   DeltaRandom.TimeSeed      one case of a seed from the clock (printed; set
//                             SHMKV_DELTA_SEED=N to run that seed again)
//
// Each case checks: apply(base, chain) == build(model), by the API and by
// shmctl; the loader's compaction (shmkv_build_compact: its merge in key
// order, and under a memory limit too small for it apply's build) ==
// build(model), its every record (key, type, value, expiry) the model's;
// apply --as-delta (both ways, the same bytes), and that one delta
// applied gives build(model) again; the base read through it
// (shmkv_delta_set) answers every key as the model (get, get_expires at a
// pinned clock, both iterations); diff(base, build(model)) (both ways), and
// apply(base, that diff) == build(model); diff(build(model), base) applied
// back gives the base; each delta dumped (shmctl image dump) and built again
// from the dump (shmctl image build --delta-of --after) gives its bytes.
//
//   Compact.Refusals          shmkv_build_compact of a damaged base or delta,
//                             a broken chain, a delta as base: the error
//                             names the file and the reason, no output
//
//   DeltaCli.InspectAndRefusals   inspect (text and -j) of a delta; TSV
//                             removals (--tsv-removes) as JSONL ones; a broken
//                             chain, a delta of another base, a damaged delta,
//                             diff of a delta, bad options: a message naming
//                             the file and the reason, exit 2, no output
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <shmkv.h>
#include <shmkv_build.h>

#include "../test_util.h"

using namespace shmkv_test;

namespace {

struct Val {
	unsigned type;
	std::string val;
	uint32_t expires;
	bool operator==(const Val &o) const
	{
		return type == o.type && val == o.val && expires == o.expires;
	}
};
using Model = std::map<std::string, Val>;

// "now" for reads: expiries below it are past (lib/FORMAT.md §17).
constexpr int64_t kNow = 2000000000;

struct Rng {
	std::mt19937_64 g;
	explicit Rng(uint64_t seed) : g(seed) {}
	uint64_t operator()() { return g(); }
	uint64_t below(uint64_t n) { return n ? g() % n : 0; }
	bool chance(unsigned pct) { return below(100) < pct; }
};

template <class T> std::string raw(T v)
{
	return std::string((const char *)&v, sizeof v);
}

// A value of a random type; from a small pool now and then (dedup shares it).
Val random_val(Rng &r)
{
	Val v{(unsigned)(1 + r.below(SHMKV_TYPE_MAX)), "", 0};
	if (r.chance(20)) { // a shared value
		static const char *const pool[] = {"shared-one", "shared-two, a longer value",
						   "shared-three"};
		v.type = SHMKV_TYPE_STRING;
		v.val = pool[r.below(3)];
	} else {
		size_t n = r.chance(10) ? r.below(300) : r.below(12);
		switch (v.type) {
		case SHMKV_TYPE_BYTES:
			for (size_t i = 0; i < n; i++)
				v.val += (char)r();
			break;
		case SHMKV_TYPE_STRING:
			for (size_t i = 0; i < n; i++)
				v.val += (char)('a' + r.below(26));
			break;
		case SHMKV_TYPE_I64: v.val = raw((int64_t)r()); break;
		case SHMKV_TYPE_BOOL: v.val = std::string(1, (char)r.below(2)); break;
		case SHMKV_TYPE_F64: v.val = raw((double)(int64_t)r.below(1000000) / 7); break;
		case SHMKV_TYPE_F32LIST:
			for (size_t i = 0; i < n; i++)
				v.val += raw((float)r.below(100000) / 4);
			break;
		case SHMKV_TYPE_F64LIST:
			for (size_t i = 0; i < n; i++)
				v.val += raw((double)r.below(100000) / 3);
			break;
		case SHMKV_TYPE_I64LIST:
			for (size_t i = 0; i < n; i++)
				v.val += raw((int64_t)r() >> r.below(64));
			break;
		default: { // strlist: u32 count, u32 ends[count + 1], the strings with NULs
			std::vector<std::string> s(r.below(5));
			std::string data;
			v.val = raw((uint32_t)s.size()) + raw((uint32_t)0);
			for (auto &x : s) {
				x.assign(r.below(6), (char)('a' + r.below(26)));
				data += x + '\0';
				v.val += raw((uint32_t)data.size());
			}
			v.val += data;
		}
		}
	}
	if (r.chance(25)) // past or future: expired records are records too
		v.expires = (uint32_t)(1 + r.below(2 * (uint64_t)kNow));
	return v;
}

// A new key: ASCII mostly, now and then binary, long (an OUT tombstone past
// 45 bytes, §19.2) or empty.
std::string random_key(Rng &r, uint64_t serial)
{
	if (r.chance(1))
		return "";
	std::string k = "k" + std::to_string(serial);
	if (r.chance(10))
		k += std::string(40 + r.below(80), 'L');
	if (r.chance(10))
		k += std::string(1, '\0') + (char)r() + (char)0xff;
	return k;
}

struct Op {
	std::string key;
	bool remove;
	Val v;
};

std::string show_key(const std::string &k)
{
	std::string s;
	for (unsigned char c : k)
		s += c >= 0x20 && c < 0x7f ? std::string(1, (char)c) : "\\x" + std::to_string(c);
	return "\"" + s + "\"";
}

class Case {
public:
	// modes: the first deltas' kinds (0 empty, 1 removing everything, 2 a
	// mix), so that the fixed seeds hold each; the others are drawn.
	Case(uint64_t seed, const std::string &dir, std::vector<unsigned> modes = {})
		: seed_(seed), r_(seed), dir_(dir), modes_(std::move(modes))
	{
	}

	void run()
	{
		make_base();
		if (::testing::Test::HasFatalFailure())
			return;
		size_t n = std::max<size_t>(1 + r_.below(4), modes_.size());
		for (size_t k = 0; k < n && !::testing::Test::HasFatalFailure(); k++)
			make_delta(k);
		if (::testing::Test::HasFatalFailure())
			return;
		std::string full = file("full.shmkv");
		build_model(full);
		check_apply(full);
		check_compact(full);
		check_merged_delta(full);
		check_diff(full);
		check_dumps();
	}

private:
	uint64_t seed_;
	Rng r_;
	std::string dir_;
	std::vector<unsigned> modes_;
	uint64_t serial_ = 0;
	Model model_;
	std::set<std::string> seen_; // every key ever added (removed ones too)
	std::vector<std::string> deltas_;
	shmkv_build_options base_opt_;

	std::string file(const std::string &name) const { return dir_ + "/" + name; }

	// The options of a build with the image options of the base.
	void make_base()
	{
		shmkv_build_options &o = base_opt_;
		o = test_options();
		o.seed = r_();
		snprintf(o.name, sizeof o.name, "base-%llu", (unsigned long long)seed_);
		o.fixed |= SHMKV_OPT_SEED | SHMKV_OPT_NAME;
		if (r_.chance(40)) {
			o.dedup = 0;
			o.fixed |= SHMKV_OPT_DEDUP;
		}
		if (r_.chance(20)) { // few bits: keys of equal hashes (order by key bytes)
			o.hash_bits = (unsigned)(r_.chance(30) ? 2 + r_.below(6) : 24 + r_.below(40));
			o.fixed |= SHMKV_OPT_HASH_BITS;
		}
		size_t n = r_.chance(10) ? 0 : r_.below(400);
		std::vector<Op> ops;
		for (size_t i = 0; i < n; i++) {
			std::string k = random_key(r_, serial_++);
			if (model_.count(k))
				continue;
			Val v = random_val(r_);
			model_[k] = v;
			seen_.insert(k);
			ops.push_back({k, false, v});
		}
		write(ops, file("base.shmkv"), o, nullptr, nullptr);
	}

	// Builds ops (upserts, removals) as an image, or as a delta of base after after.
	void write(const std::vector<Op> &ops, const std::string &path, const shmkv_build_options &o,
		   const char *base, const char *after)
	{
		Builder b(o);
		ASSERT_TRUE(b.ok());
		if (base) {
			ASSERT_EQ(shmkv_builder_set_delta(b, base, after), 0) << b.error();
		}
		for (const Op &op : ops) {
			if (op.remove) {
				ASSERT_EQ(shmkv_builder_remove(b, op.key.data(), op.key.size()), 0)
					<< b.error();
				continue;
			}
			ASSERT_EQ(shmkv_builder_set_expires(b, op.v.expires), 0) << b.error();
			ASSERT_EQ(shmkv_builder_add(b, op.key.data(), op.key.size(), op.v.type,
						    op.v.val.data(), op.v.val.size()), 0)
				<< b.error() << " key " << show_key(op.key) << " type " << op.v.type;
		}
		ASSERT_EQ(b.finish(path), 0) << b.error();
	}

	// Delta k of the chain: empty, removing everything, or a random mix.
	void make_delta(size_t k)
	{
		std::vector<Op> ops;
		std::set<std::string> in_delta; // a key once per delta (§19.2)
		std::vector<std::string> present;
		for (const auto &kv : model_)
			present.push_back(kv.first);
		unsigned mode = k < modes_.size() ? modes_[k] : (unsigned)r_.below(10);
		if (mode == 0) {
			// empty
		} else if (mode == 1) { // everything removed, and one absent key
			for (const std::string &key : present)
				ops.push_back({key, true, {}});
			ops.push_back({"never-" + std::to_string(serial_++), true, {}});
		} else {
			size_t m = r_.below(present.size() / 2 + 40);
			for (size_t i = 0; i < m; i++) {
				unsigned what = (unsigned)r_.below(100);
				std::string key;
				bool remove = false;
				if (what < 30 || present.empty()) {
					key = random_key(r_, serial_++);
					remove = what >= 90; // a tombstone of an absent key
				} else if (what < 60) {
					key = present[r_.below(present.size())];
				} else if (what < 85) {
					key = present[r_.below(present.size())];
					remove = true;
				} else { // an absent key: one removed before, or never seen
					auto it = seen_.lower_bound(random_key(r_, serial_++));
					key = it != seen_.end() ? *it : "absent";
					remove = true;
				}
				if (!in_delta.insert(key).second)
					continue;
				ops.push_back({key, remove, remove ? Val{} : random_val(r_)});
			}
		}
		std::shuffle(ops.begin(), ops.end(), r_.g);
		for (const Op &op : ops) {
			seen_.insert(op.key);
			if (op.remove)
				model_.erase(op.key);
			else
				model_[op.key] = op.v;
		}
		shmkv_build_options o = test_options();
		o.created += (int64_t)k + 1;
		if (r_.chance(30)) {
			o.dedup = 0;
			o.fixed |= SHMKV_OPT_DEDUP;
		}
		if (r_.chance(50)) {
			snprintf(o.name, sizeof o.name, "delta-%zu", k + 1);
			o.fixed |= SHMKV_OPT_NAME;
		}
		std::string path = file("d" + std::to_string(k + 1) + ".shmkv");
		write(ops, path, o, file("base.shmkv").c_str(),
		      deltas_.empty() ? nullptr : deltas_.back().c_str());
		deltas_.push_back(path);
	}

	// The model's records, in an order of their own: a fresh build with the
	// base's image options (lib/FORMAT.md §19.5).
	void build_model(const std::string &path)
	{
		std::vector<Op> ops;
		for (const auto &kv : model_)
			ops.push_back({kv.first, false, kv.second});
		std::shuffle(ops.begin(), ops.end(), r_.g);
		write(ops, path, base_opt_, nullptr, nullptr);
	}

	std::vector<const char *> delta_ptrs() const
	{
		std::vector<const char *> p;
		for (const std::string &d : deltas_)
			p.push_back(d.c_str());
		return p;
	}

	void api_apply(const std::string &out, bool as_delta)
	{
		char why[1024] = "";
		std::vector<const char *> p = delta_ptrs();
		ASSERT_EQ(shmkv_build_apply(out.c_str(), file("base.shmkv").c_str(), p.data(), p.size(),
					    as_delta, nullptr, nullptr, why, sizeof why), 0) << why;
	}

	void cli(std::vector<std::string> args)
	{
		Proc p = run_shmctl(args);
		ASSERT_EQ(p.rc, 0) << show(p);
	}

	std::vector<std::string> apply_args(const std::string &out, bool as_delta)
	{
		std::vector<std::string> a = {"image", "apply", "-o", out};
		if (as_delta)
			a.push_back("--as-delta");
		a.push_back(file("base.shmkv"));
		a.insert(a.end(), deltas_.begin(), deltas_.end());
		return a;
	}

	void same_bytes(const std::string &got, const std::string &want, const char *what)
	{
		std::string g = read_file(got), w = read_file(want);
		ASSERT_FALSE(w.empty()) << want;
		EXPECT_TRUE(g == w) << what << ": " << got << " (" << g.size() << " bytes) differs from "
				    << want << " (" << w.size() << " bytes)";
	}

	void check_apply(const std::string &full)
	{
		ASSERT_NO_FATAL_FAILURE(api_apply(file("api.shmkv"), false));
		same_bytes(file("api.shmkv"), full, "shmkv_build_apply vs the model's build");
		ASSERT_NO_FATAL_FAILURE(cli(apply_args(file("cli.shmkv"), false)));
		same_bytes(file("cli.shmkv"), full, "shmctl image apply vs the model's build");
	}

	// The loader's compaction: apply's bytes, in memory (its merge in key
	// order) and under a memory limit too small for it (apply's build, the
	// spilling one); the image's every record is the model's.
	void check_compact(const std::string &full)
	{
		std::vector<const char *> p = delta_ptrs();
		for (uint64_t limit : {uint64_t(0), uint64_t(1) << 20}) {
			SCOPED_TRACE("memory limit " + std::to_string(limit));
			shmkv_join_options jo;
			shmkv_join_options_init(&jo);
			jo.memory_limit = limit;
			char why[1024] = "";
			std::string out = file("compact.shmkv");
			shmkv_build_stats st, ast;
			ASSERT_EQ(shmkv_build_compact(out.c_str(), file("base.shmkv").c_str(), p.data(),
						      p.size(), limit ? 0 : SHMKV_COMPACT_NOSYNC, &jo,
						      &st, why, sizeof why), 0) << why;
			same_bytes(out, full, "shmkv_build_compact vs the model's build");
			ASSERT_EQ(shmkv_build_apply(file("api.shmkv").c_str(), file("base.shmkv").c_str(),
						    p.data(), p.size(), 0, &jo, &ast, why, sizeof why), 0)
				<< why;
			EXPECT_EQ(st.records, ast.records);
			EXPECT_EQ(st.entries, ast.entries);
			EXPECT_EQ(st.duplicates, ast.duplicates);
			Db db = open_db(out);
			ASSERT_TRUE(db);
			EXPECT_EQ(shmkv_verify(db, why, sizeof why), 0) << why;
			Model got;
			shmkv_iter it;
			const void *key;
			size_t len;
			shmkv_value v;
			int rc;
			shmkv_iter_init_all(db, &it);
			while ((rc = shmkv_iter_next(&it, &key, &len, &v)) == 0)
				EXPECT_TRUE(got.emplace(sv(key, len), Val{v.type, sv(v.data, v.size),
									 shmkv_iter_expires(&it)})
						    .second) << "a key twice: " << show_key(sv(key, len));
			EXPECT_EQ(rc, SHMKV_EEND);
			EXPECT_TRUE(got == model_) << "compacted: " << got.size() << " records, the model "
						   << model_.size();
		}
	}

	void check_merged_delta(const std::string &full)
	{
		std::string m = file("merged.shmkv");
		ASSERT_NO_FATAL_FAILURE(api_apply(m, true));
		ASSERT_NO_FATAL_FAILURE(cli(apply_args(file("merged-cli.shmkv"), true)));
		same_bytes(file("merged-cli.shmkv"), m, "shmctl image apply --as-delta vs the API");
		// the one delta applied is the chain applied
		char why[1024] = "";
		const char *one[] = {m.c_str()};
		ASSERT_EQ(shmkv_build_apply(file("again.shmkv").c_str(), file("base.shmkv").c_str(), one,
					    1, 0, nullptr, nullptr, why, sizeof why), 0) << why;
		same_bytes(file("again.shmkv"), full, "apply(base, merged delta) vs the model's build");
		check_reads(m);
		if (deltas_.size() == 1)
			check_reads(deltas_[0]);
		else
			expect_no_stack(deltas_.back());
	}

	// The base read through delta answers every key as the model.
	void check_reads(const std::string &delta)
	{
		SCOPED_TRACE("base read through " + delta);
		Db base = open_db(file("base.shmkv")), d = open_db(delta);
		ASSERT_TRUE(base && d);
		char why[512] = "";
		ASSERT_EQ(shmkv_delta_set(base, d, why, sizeof why), 0) << why;
		shmkv_set_clock(base, kNow);
		std::set<std::string> keys = seen_;
		keys.insert("never-added");
		for (const std::string &k : keys) {
			auto it = model_.find(k);
			shmkv_value v;
			uint32_t exp = 0;
			int g = shmkv_get(base, k.data(), k.size(), &v);
			int e = shmkv_get_expires(base, k.data(), k.size(), &exp);
			if (it == model_.end()) {
				EXPECT_EQ(g, SHMKV_ENOTFOUND) << "removed key " << show_key(k);
				EXPECT_EQ(e, SHMKV_ENOTFOUND) << "removed key " << show_key(k);
				continue;
			}
			const Val &want = it->second;
			EXPECT_EQ(e, 0) << show_key(k);
			EXPECT_EQ(exp, want.expires) << show_key(k);
			if (want.expires && kNow >= want.expires) {
				EXPECT_EQ(g, SHMKV_ENOTFOUND) << "expired " << show_key(k);
				continue;
			}
			ASSERT_EQ(g, 0) << show_key(k);
			EXPECT_EQ(v.type, want.type) << show_key(k);
			EXPECT_EQ(sv(v.data, v.size), want.val) << show_key(k);
		}
		for (int all = 0; all < 2; all++) {
			Model got, want;
			for (const auto &kv : model_)
				if (all || !kv.second.expires || kNow < kv.second.expires)
					want.insert(kv);
			shmkv_iter it;
			const void *key;
			size_t len;
			shmkv_value v;
			int rc;
			if (all)
				shmkv_iter_init_all(base, &it);
			else
				shmkv_iter_init(base, &it);
			while ((rc = shmkv_iter_next(&it, &key, &len, &v)) == 0)
				EXPECT_TRUE(got.emplace(sv(key, len), Val{v.type, sv(v.data, v.size),
									 shmkv_iter_expires(&it)})
						    .second) << "a key twice: " << show_key(sv(key, len));
			EXPECT_EQ(rc, SHMKV_EEND);
			EXPECT_TRUE(got == want) << (all ? "all-records" : "live") << " iteration: "
						 << got.size() << " records, the model " << want.size();
		}
	}

	// A later delta of a chain is not read alone through the base (§19.4).
	void expect_no_stack(const std::string &delta)
	{
		Db base = open_db(file("base.shmkv")), d = open_db(delta);
		ASSERT_TRUE(base && d);
		char why[512] = "";
		EXPECT_EQ(shmkv_delta_set(base, d, why, sizeof why), SHMKV_EBASE) << why;
	}

	void check_diff(const std::string &full)
	{
		char why[1024] = "";
		std::string base = file("base.shmkv"), df = file("diff.shmkv");
		ASSERT_EQ(shmkv_build_diff(df.c_str(), base.c_str(), full.c_str(), nullptr, nullptr, why,
					   sizeof why), 0) << why;
		ASSERT_NO_FATAL_FAILURE(cli({"image", "diff", "-o", file("diff-cli.shmkv"), base, full}));
		same_bytes(file("diff-cli.shmkv"), df, "shmctl image diff vs the API");
		const char *one[] = {df.c_str()};
		ASSERT_EQ(shmkv_build_apply(file("diffed.shmkv").c_str(), base.c_str(), one, 1, 0,
					    nullptr, nullptr, why, sizeof why), 0) << why;
		same_bytes(file("diffed.shmkv"), full, "apply(OLD, diff(OLD, NEW)) vs NEW");
		// and back: the base is a fresh build of its records too
		std::string back = file("back.shmkv");
		ASSERT_EQ(shmkv_build_diff(back.c_str(), full.c_str(), base.c_str(), nullptr, nullptr,
					   why, sizeof why), 0) << why;
		const char *b1[] = {back.c_str()};
		ASSERT_EQ(shmkv_build_apply(file("back-applied.shmkv").c_str(), full.c_str(), b1, 1, 0,
					    nullptr, nullptr, why, sizeof why), 0) << why;
		same_bytes(file("back-applied.shmkv"), base, "apply(NEW, diff(NEW, OLD)) vs OLD");
	}

	// Each delta dumped, and built again from its dump by shmctl.
	void check_dumps()
	{
		for (size_t k = 0; k < deltas_.size(); k++) {
			Proc p = run_shmctl({"image", "dump", deltas_[k]});
			ASSERT_EQ(p.rc, 0) << show(p);
			std::string jl = file("d" + std::to_string(k + 1) + ".jsonl");
			ASSERT_TRUE(write_file(jl, p.out));
			std::string again = file("rebuilt.shmkv");
			std::vector<std::string> a = {"image", "build", "-o", again, "--delta-of",
						      file("base.shmkv")};
			if (k) {
				a.push_back("--after");
				a.push_back(deltas_[k - 1]);
			}
			a.push_back(jl);
			ASSERT_NO_FATAL_FAILURE(cli(a));
			same_bytes(again, deltas_[k], "image build of a delta's dump vs the delta");
		}
	}
};

void run_case(uint64_t seed, std::vector<unsigned> modes = {})
{
	TempDir d;
	ASSERT_FALSE(d.path().empty());
	Case c(seed, d.path(), std::move(modes));
	c.run();
}

TEST(DeltaRandom, FixedSeeds)
{
	for (uint64_t seed : {1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233}) {
		SCOPED_TRACE("seed " + std::to_string(seed));
		// seed 1: a mix, an empty delta, one removing everything, a mix after it
		run_case(seed, seed == 1 ? std::vector<unsigned>{2, 0, 1, 2} : std::vector<unsigned>{});
		if (HasFailure())
			break; // one seed's failures are enough to read
	}
}

TEST(DeltaRandom, TimeSeed)
{
	const char *env = getenv("SHMKV_DELTA_SEED");
	uint64_t seed = env && *env ? strtoull(env, nullptr, 0)
				    : (uint64_t)std::chrono::system_clock::now().time_since_epoch().count();
	SCOPED_TRACE("seed " + std::to_string(seed) + " (SHMKV_DELTA_SEED=" + std::to_string(seed) +
		     " runs it again)");
	run_case(seed);
	if (HasFailure())
		fprintf(stderr, "DeltaRandom.TimeSeed failed with seed %llu\n", (unsigned long long)seed);
}

// ---- shmkv_build_compact: refusals -------------------------------------------

// Builds keys k0..k(n-1) (a delta of base when given) into path.
void build_keys(const std::string &path, int n, const char *base, const std::string &val)
{
	Builder b;
	ASSERT_TRUE(b.ok());
	if (base) {
		ASSERT_EQ(shmkv_builder_set_delta(b, base, nullptr), 0) << b.error();
	}
	for (int i = 0; i < n; i++)
		ASSERT_EQ(b.str("k" + std::to_string(i), val), 0) << b.error();
	ASSERT_EQ(b.finish(path), 0) << b.error();
}

// A copy of from with the byte at off changed.
void damaged_copy(const std::string &from, const std::string &to, size_t off)
{
	std::string s = read_file(from);
	ASSERT_LT(off, s.size());
	s[off] = (char)(s[off] ^ 0x5a);
	ASSERT_TRUE(write_file(to, s));
}

TEST(Compact, Refusals)
{
	TempDir d;
	std::string base = d.file("base.shmkv"), other = d.file("other.shmkv"),
		    delta = d.file("delta.shmkv"), od = d.file("other-delta.shmkv"),
		    out = d.file("out.shmkv");
	ASSERT_NO_FATAL_FAILURE(build_keys(base, 3000, nullptr, "base value"));
	ASSERT_NO_FATAL_FAILURE(build_keys(other, 10, nullptr, "another image"));
	ASSERT_NO_FATAL_FAILURE(build_keys(delta, 50, base.c_str(), "changed"));
	ASSERT_NO_FATAL_FAILURE(build_keys(od, 5, other.c_str(), "changed"));
	// a byte of the index (a bucket), of the header, past each one's header
	ASSERT_NO_FATAL_FAILURE(damaged_copy(base, d.file("bad-base.shmkv"), 4096 + 300));
	ASSERT_NO_FATAL_FAILURE(damaged_copy(base, d.file("bad-head.shmkv"), 40));
	ASSERT_NO_FATAL_FAILURE(damaged_copy(delta, d.file("bad-delta.shmkv"), 4096 + 8));
	struct Bad {
		std::string base, delta;
		int code;
		std::vector<std::string> says;
	} cases[] = {
		{d.file("bad-base.shmkv"), delta, SHMKV_ECHECKSUM, {"bad-base.shmkv"}},
		{d.file("bad-head.shmkv"), delta, 0, {"bad-head.shmkv"}},
		{base, d.file("bad-delta.shmkv"), SHMKV_ECHECKSUM, {"bad-delta.shmkv"}},
		{base, od, SHMKV_EBASE, {"other-delta.shmkv", "is a delta of base"}},
		{delta, delta, SHMKV_EBASE, {"is a delta image"}},
		{base, base, SHMKV_EBASE, {"is a plain image, not a delta"}},
		{d.file("absent.shmkv"), delta, -ENOENT, {"absent.shmkv"}},
	};
	for (const Bad &c : cases) {
		SCOPED_TRACE(c.base + " + " + c.delta);
		char why[1024] = "";
		const char *dp[] = {c.delta.c_str()};
		int rc = shmkv_build_compact(out.c_str(), c.base.c_str(), dp, 1, 0, nullptr, nullptr, why,
					     sizeof why);
		if (c.code)
			EXPECT_EQ(rc, c.code) << why;
		else
			EXPECT_NE(rc, 0) << why;
		for (const std::string &w : c.says)
			EXPECT_NE(std::string(why).find(w), std::string::npos) << "wanted \"" << w
									   << "\" in: " << why;
		EXPECT_FALSE(file_exists(out)) << "an output was left";
	}
	char why[1024] = "";
	const char *dp[] = {delta.c_str()};
	EXPECT_EQ(shmkv_build_compact(out.c_str(), base.c_str(), dp, 0, 0, nullptr, nullptr, why,
				      sizeof why), -EINVAL);
	EXPECT_NE(shmkv_build_compact(base.c_str(), base.c_str(), dp, 1, 0, nullptr, nullptr, why,
				      sizeof why), 0) << why; // the base is no output
	EXPECT_NE(std::string(why).find("base.shmkv"), std::string::npos) << why;
	EXPECT_EQ(shmkv_build_compact(out.c_str(), base.c_str(), dp, 1, 2, nullptr, nullptr, why,
				      sizeof why), -EINVAL); // an unknown flag
	ASSERT_EQ(shmkv_build_compact(out.c_str(), base.c_str(), dp, 1, 0, nullptr, nullptr, why,
				      sizeof why), 0) << why;
}

// ---- shmctl: inspect, TSV removals, refusals --------------------------------

struct Cli {
	TempDir d;
	std::string f(const std::string &n) const { return d.file(n); }
	Proc sh(const std::vector<std::string> &a) { return run_shmctl(a); }
	void ok(const std::vector<std::string> &a)
	{
		Proc p = sh(a);
		ASSERT_EQ(p.rc, 0) << show(p);
	}
	// a refusal: exit 2, the message's parts on stderr, out not written
	void refused(const std::vector<std::string> &a, const std::vector<std::string> &want,
		     const std::string &out)
	{
		std::string args;
		for (const std::string &x : a)
			args += " " + x;
		Proc p = sh(a);
		EXPECT_EQ(p.rc, 2) << args << "\n" << show(p);
		for (const std::string &w : want)
			EXPECT_NE(p.err.find(w), std::string::npos) << args << ": wanted \"" << w
								     << "\" in\n" << p.err;
		EXPECT_FALSE(file_exists(out)) << args << ": an output was left";
	}
};

std::string hex16(uint64_t v)
{
	char b[24];
	snprintf(b, sizeof b, "0x%016llx", (unsigned long long)v);
	return b;
}

uint64_t checksum_of(const std::string &path)
{
	Db db = open_db(path);
	return db ? shmkv_checksum(db) : 0;
}

TEST(DeltaCli, InspectAndRefusals)
{
	Cli c;
	ASSERT_TRUE(write_file(c.f("base.jsonl"), "{\"key\": \"a\", \"value\": \"1\"}\n"
						  "{\"key\": \"b\", \"value\": \"2\"}\n"
						  "{\"key\": \"c\", \"value\": \"3\"}\n"));
	ASSERT_TRUE(write_file(c.f("d1.jsonl"), "{\"key\": \"a\", \"value\": \"one\"}\n"
						"{\"key\": \"b\", \"remove\": true}\n"
						"{\"key\": \"zz\", \"remove\": true}\n"));
	ASSERT_TRUE(write_file(c.f("d1.tsv"), "a\tone\nb\nzz\n"));
	ASSERT_TRUE(write_file(c.f("d2.jsonl"), "{\"key\": \"d\", \"value\": \"4\"}\n"));
	ASSERT_NO_FATAL_FAILURE(c.ok({"image", "build", "-o", c.f("base.shmkv"), "--created",
				      "1700000000", c.f("base.jsonl")}));
	ASSERT_NO_FATAL_FAILURE(c.ok({"image", "build", "-o", c.f("other.shmkv"), "--created",
				      "1700000001", c.f("base.jsonl")}));
	Proc p = c.sh({"-j", "image", "build", "-o", c.f("d1.shmkv"), "--created", "1700000000",
		       "--delta-of", c.f("base.shmkv"), c.f("d1.jsonl")});
	ASSERT_EQ(p.rc, 0) << show(p);
	EXPECT_NE(p.out.find("\"tombstones\": 2"), std::string::npos) << p.out;
	// TSV removals: a key alone on its line, with --tsv-removes
	ASSERT_NO_FATAL_FAILURE(c.ok({"image", "build", "-o", c.f("d1t.shmkv"), "--created",
				      "1700000000", "--delta-of", c.f("base.shmkv"), "--tsv-removes",
				      c.f("d1.tsv")}));
	EXPECT_EQ(read_file(c.f("d1t.shmkv")), read_file(c.f("d1.shmkv")))
		<< "TSV removals give the JSONL delta";
	ASSERT_NO_FATAL_FAILURE(c.ok({"image", "build", "-o", c.f("d2.shmkv"), "--delta-of",
				      c.f("base.shmkv"), "--after", c.f("d1.shmkv"), c.f("d2.jsonl")}));

	// inspect: a delta, its base, its place, its tombstones
	std::string base_sum = hex16(checksum_of(c.f("base.shmkv")));
	std::string d1_sum = hex16(checksum_of(c.f("d1.shmkv")));
	p = c.sh({"image", "inspect", c.f("d2.shmkv")});
	ASSERT_EQ(p.rc, 0) << show(p);
	for (const std::string &w : {"of base " + base_sum, "seq 2, after delta " + d1_sum,
				     std::string("1 upserts, 0 tombstones"), std::string("delta\n"),
				     std::string("filter")})
		EXPECT_NE(p.out.find(w), std::string::npos) << w << " in\n" << p.out;
	p = c.sh({"-j", "image", "inspect", c.f("d1.shmkv")});
	ASSERT_EQ(p.rc, 0) << show(p);
	for (const std::string &w : {"\"delta\": {\"base_checksum\": \"" + base_sum + "\"",
				     std::string("\"prev\": null, \"seq\": 1, \"upserts\": 1, "
						 "\"tombstones\": 2}"),
				     "\"checksum\": \"" + d1_sum + "\"", std::string("\"delta\"]")})
		EXPECT_NE(p.out.find(w), std::string::npos) << w << " in\n" << p.out;
	p = c.sh({"-j", "image", "inspect", c.f("base.shmkv")});
	EXPECT_NE(p.out.find("\"delta\": null"), std::string::npos) << p.out;

	// a good apply, then refusals that leave no output
	p = c.sh({"-j", "image", "apply", "-o", c.f("new.shmkv"), c.f("base.shmkv"), c.f("d1.shmkv"),
		  c.f("d2.shmkv")});
	ASSERT_EQ(p.rc, 0) << show(p);
	EXPECT_NE(p.out.find("\"entries\": 3"), std::string::npos) << p.out; // a, c, d
	std::string out = c.f("out.shmkv");
	c.refused({"image", "apply", "-o", out, c.f("base.shmkv"), c.f("d2.shmkv"), c.f("d1.shmkv")},
		  {c.f("d2.shmkv"), "(seq 2) follows delta " + d1_sum, "give the chain"}, out);
	c.refused({"image", "apply", "-o", out, c.f("base.shmkv"), c.f("d1.shmkv"), c.f("d1.shmkv")},
		  {"given before it"}, out);
	c.refused({"image", "apply", "-o", out, c.f("other.shmkv"), c.f("d1.shmkv")},
		  {c.f("d1.shmkv"), "is a delta of base " + base_sum, c.f("other.shmkv")}, out);
	c.refused({"image", "apply", "-o", out, c.f("d1.shmkv"), c.f("d2.shmkv")},
		  {c.f("d1.shmkv") + " is a delta image"}, out);
	c.refused({"image", "apply", "-o", out, c.f("base.shmkv"), c.f("other.shmkv")},
		  {c.f("other.shmkv") + " is a plain image, not a delta"}, out);
	c.refused({"image", "apply", "-o", out, c.f("base.shmkv")},
		  {"apply: expected BASE and at least one DELTA, got 1"}, out);
	c.refused({"image", "apply", c.f("base.shmkv"), c.f("d1.shmkv")}, {"-o OUT is required"},
		  out);
	std::string bad = read_file(c.f("d1.shmkv"));
	bad[bad.size() / 2] ^= 0x40;
	ASSERT_TRUE(write_file(c.f("bad.shmkv"), bad));
	c.refused({"image", "apply", "-o", out, c.f("base.shmkv"), c.f("bad.shmkv")},
		  {c.f("bad.shmkv") + ":", "checksum"}, out);
	c.refused({"image", "diff", "-o", out, c.f("d1.shmkv"), c.f("base.shmkv")},
		  {c.f("d1.shmkv") + " is a delta image", "diff compares two plain images"}, out);
	c.refused({"image", "diff", "-o", out, c.f("base.shmkv")},
		  {"diff: expected two images, OLD and NEW, got 1"}, out);
	c.refused({"image", "diff", "--as-delta", "-o", out, c.f("base.shmkv"), c.f("new.shmkv")},
		  {"--as-delta"}, out);
	c.refused({"image", "build", "-o", out, "--after", c.f("d1.shmkv"), c.f("d2.jsonl")},
		  {"--after", "--delta-of BASE"}, out);
	c.refused({"image", "build", "-o", out, "--tsv-removes", c.f("d1.tsv")},
		  {"--tsv-removes is for delta builds"}, out);
	c.refused({"image", "build", "-o", out, "--delta-of", c.f("base.shmkv"), c.f("d1.tsv")},
		  {c.f("d1.tsv") + ":2:"}, out);
	c.refused({"image", "build", "-o", out, "--delta-of", c.f("d1.shmkv"), c.f("d2.jsonl")},
		  {c.f("d1.shmkv") + " is a delta image"}, out);
	c.refused({"image", "build", "-o", out, c.f("d1.jsonl")}, {c.f("d1.jsonl") + ":2:"}, out);
	// an output that exists is left as it was when the apply fails
	ASSERT_TRUE(write_file(out, "keep"));
	Proc q = c.sh({"image", "apply", "-o", out, c.f("base.shmkv"), c.f("d2.shmkv")});
	EXPECT_EQ(q.rc, 2) << show(q);
	EXPECT_EQ(read_file(out), "keep");
	// the base cannot be the output
	q = c.sh({"image", "apply", "-o", c.f("base.shmkv"), c.f("base.shmkv"), c.f("d1.shmkv")});
	EXPECT_EQ(q.rc, 2) << show(q);
	q = c.sh({"image", "build", "-o", c.f("base.shmkv"), "--delta-of", c.f("base.shmkv"),
		  c.f("d2.jsonl")});
	EXPECT_EQ(q.rc, 2) << show(q);
	EXPECT_EQ(hex16(checksum_of(c.f("base.shmkv"))), base_sum) << "the base was replaced";
}

} // namespace
