// overlay_test: an image read through two deltas of it, a lower and a top
// (lib/FORMAT.md §19.6; lib/PROTOCOL.md, "Protocol 2"): keys in every
// combination of the three levels (only the base; a lower upsert; a lower
// tombstone; a top upsert over a lower tombstone; a top tombstone over a
// lower upsert over the base; only the top; expiring records deciding at
// each level) checked against a model on every path a reader has: get,
// typed get, the diagnosing get, batch, shmkv_get_expires, both iterations
// (their order too), shmkv_count. First offline (shmkv_delta_set2, images
// composed by image_util.h), then attached to hand-made protocol 2 control
// segments: every rule of the protocol broken once, the replica pick of
// each overlay, and refresh from no overlay to a lower one, a lower and a
// top, the lower alone and none, the values held staying valid until a
// refresh returns 1; refresh keeping the base's mapping (and the lower's)
// across generations that change only overlays, and mapping anew for a new
// base or overlays past the room behind it; generations handed to
// shmkv_detach sharing that mapping (the base kept across refreshes while
// they live, each overlay given back with its last reader, from any
// thread), and the room or the parts they hold exhausted.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "image_util.h"
#include "test_util.h"

using testimg::Answer;
using testimg::Rec;

namespace {

const uint32_t kNow = 1'800'000'000;

Rec str(const std::string &key, const std::string &v, uint32_t expires = 0, bool out = false)
{
	Rec r;
	r.key = key;
	r.value = v;
	r.expires = expires;
	r.out = out;
	return r;
}

Rec i64(const std::string &key, int64_t x)
{
	Rec r;
	r.key = key;
	r.type = SHMKV_TYPE_I64;
	r.value = testimg::i64(x);
	return r;
}

Rec tomb(const std::string &key, bool out = false)
{
	Rec r;
	r.key = key;
	r.tomb = true;
	r.out = out;
	return r;
}

std::string long_key(const std::string &k)
{
	return std::string(200, 'L') + k; // too long for a bucket: OUT
}

// The three levels: keys named for the case they are.
struct Levels {
	std::vector<Rec> base, lower, top;
};

Levels levels()
{
	Levels l;
	const uint32_t past = kNow - 10, later = kNow + 1000;
	// filler, so that each image has many buckets and displaced keys
	for (int i = 0; i < 60; i++)
		l.base.push_back(str("fill" + std::to_string(i), "base-fill" + std::to_string(i), 0,
				     i % 9 == 0));
	for (int i = 0; i < 12; i++)
		l.lower.push_back(str("lfill" + std::to_string(i), "lower-fill" + std::to_string(i)));
	for (int i = 0; i < 5; i++)
		l.top.push_back(str("tfill" + std::to_string(i), "top-fill" + std::to_string(i)));

	l.base.push_back(str("base-only", "b"));
	l.base.push_back(str("lower-up", "b"));
	l.lower.push_back(str("lower-up", "l"));
	l.base.push_back(str("lower-tomb", "b"));
	l.lower.push_back(tomb("lower-tomb"));
	l.base.push_back(str("top-up-over-lower-tomb", "b"));
	l.lower.push_back(tomb("top-up-over-lower-tomb"));
	l.top.push_back(str("top-up-over-lower-tomb", "t"));
	l.base.push_back(str("top-tomb-over-lower-up", "b"));
	l.lower.push_back(str("top-tomb-over-lower-up", "l"));
	l.top.push_back(tomb("top-tomb-over-lower-up"));
	l.base.push_back(str("top-up-over-both", "b"));
	l.lower.push_back(str("top-up-over-both", "l"));
	l.top.push_back(str("top-up-over-both", "t", 0, true));
	l.top.push_back(str("top-only", "t"));
	l.lower.push_back(str("lower-only", "l"));
	l.base.push_back(str("top-tomb-over-base", "b"));
	l.top.push_back(tomb("top-tomb-over-base"));
	l.top.push_back(tomb("top-tomb-of-nothing"));
	l.lower.push_back(tomb("lower-tomb-of-nothing"));
	// OUT records and OUT tombstones at each level
	l.base.push_back(str(long_key("a"), "b", 0, true));
	l.lower.push_back(tomb(long_key("a"), true));
	l.top.push_back(str(long_key("a"), "t", 0, true));
	l.base.push_back(str(long_key("b"), "b", 0, true));
	l.lower.push_back(str(long_key("b"), "l", 0, true));
	l.top.push_back(tomb(long_key("b"), true));
	// a type change per level: typed gets see the deciding record's type
	l.base.push_back(str("typed", "b"));
	l.lower.push_back(i64("typed", -2));
	l.top.push_back(str("typed", "t"));
	l.base.push_back(i64("typed2", 1));
	l.top.push_back(i64("typed2", 3));
	// expiry, deciding at each level
	l.base.push_back(str("exp-base-past", "b", past));
	l.base.push_back(str("exp-base-later", "b", later));
	l.base.push_back(str("exp-lower-past", "b"));
	l.lower.push_back(str("exp-lower-past", "l", past)); // hides the base's live record
	l.base.push_back(str("exp-lower-later", "b"));
	l.lower.push_back(str("exp-lower-later", "l", later, true));
	l.base.push_back(str("lower-revives-base", "b", past));
	l.lower.push_back(str("lower-revives-base", "l"));
	l.lower.push_back(str("exp-top-past", "l"));
	l.top.push_back(str("exp-top-past", "t", past)); // hides the lower's live upsert
	l.lower.push_back(str("top-revives-lower", "l", past));
	l.top.push_back(str("top-revives-lower", "t", later));
	l.base.push_back(str("top-later-over-base", "b", past));
	l.top.push_back(str("top-later-over-base", "t", later, true));
	return l;
}

Answer answer(int err, const shmkv_value &v)
{
	Answer a;
	a.err = err;
	if (!err) {
		a.type = v.type;
		a.bytes.assign((const char *)v.data, v.size);
	}
	return a;
}

// The model: the base's records, then the lower's changes, then the top's
// (FORMAT.md §19.5's merge, which §19.6 reads).
struct Model : testimg::RecModel {
	explicit Model(const Levels &l, bool lower = true, bool top = true) : RecModel(l.base)
	{
		if (lower)
			apply(l.lower);
		if (top)
			apply(l.top);
	}
};

// Every record an iteration yields: (key, type, bytes, expires).
using Entry = std::tuple<std::string, unsigned, std::string, uint32_t>;

std::vector<Entry> iterate(const shmkv *db, bool all, int *end_err)
{
	shmkv_iter it;
	if (all)
		shmkv_iter_init_all(db, &it);
	else
		shmkv_iter_init(db, &it);
	std::vector<Entry> out;
	const void *k;
	size_t kl;
	shmkv_value v;
	int e;
	while ((e = shmkv_iter_next(&it, &k, &kl, &v)) == 0)
		out.emplace_back(std::string((const char *)k, kl), v.type,
				 std::string((const char *)v.data, v.size), shmkv_iter_expires(&it));
	*end_err = e;
	return out;
}

// The order FORMAT.md §19.6 states, from each image read alone: the top's
// upserts, the lower's whose key the top does not hold, the base's whose
// key neither holds; live: expired ones left out.
std::vector<Entry> want_order(const shmkv *base, const shmkv *lower, const shmkv *top, bool all,
			      uint32_t now)
{
	std::vector<Entry> out;
	std::map<std::string, bool> held;
	for (const shmkv *img : {top, lower, base}) {
		if (!img)
			continue;
		int e;
		std::vector<Entry> recs = iterate(img, true, &e);
		EXPECT_EQ(e, SHMKV_EEND);
		for (const Entry &r : recs) {
			const std::string &k = std::get<0>(r);
			if (held.count(k))
				continue;
			held[k] = true;
			if (std::get<1>(r) == SHMKV_TYPE_TOMBSTONE)
				continue;
			uint32_t x = std::get<3>(r);
			if (!all && x && now >= x)
				continue;
			out.push_back(r);
		}
	}
	return out;
}

// Every key of the model (and a few absent ones) through db at now on
// every path, against model; the iterations against the images alone.
void expect_view(shmkv *db, const Model &model, const shmkv *base, const shmkv *lower,
		 const shmkv *top, uint32_t now, const Levels &l)
{
	shmkv_set_clock(db, now);
	std::vector<std::string> keys;
	for (const auto *v : {&l.base, &l.lower, &l.top})
		for (const Rec &r : *v)
			keys.push_back(r.key);
	for (const char *absent : {"absent", "", "fill", "top-onl"})
		keys.push_back(absent);
	std::vector<shmkv_key> bk;
	for (const std::string &k : keys)
		bk.push_back({k.data(), k.size()});
	std::vector<shmkv_value> bv(keys.size());
	std::vector<int> be(keys.size());
	size_t found = shmkv_get_batch(db, bk.data(), bk.size(), bv.data(), be.data());
	size_t want_found = 0;
	for (size_t i = 0; i < keys.size(); i++) {
		const std::string &k = keys[i];
		SCOPED_TRACE("key " + k.substr(k.size() > 20 ? k.size() - 20 : 0));
		const Answer w = model.want(k, now);
		want_found += w.err == 0;
		shmkv_value v;
		EXPECT_EQ(answer(shmkv_get(db, k.data(), k.size(), &v), v), w);
		char why[300] = "";
		EXPECT_EQ(answer(shmkv_get_diag(db, k.data(), k.size(), &v, why, sizeof why), v), w)
			<< why;
		EXPECT_EQ(answer(be[i], bv[i]), w) << "batch";
		const char *s = nullptr;
		size_t len = 0;
		int te = shmkv_get_str(db, k.data(), k.size(), &s, &len);
		int64_t x64 = 0;
		int ie = shmkv_get_i64(db, k.data(), k.size(), &x64);
		if (w.err) {
			EXPECT_EQ(te, w.err);
			EXPECT_EQ(ie, w.err);
		} else if (w.type == SHMKV_TYPE_STRING) {
			EXPECT_EQ(te, 0);
			EXPECT_EQ(std::string(s, len), w.bytes);
			EXPECT_EQ(ie, SHMKV_ETYPE);
		} else {
			EXPECT_EQ(te, SHMKV_ETYPE);
			EXPECT_EQ(ie, 0);
			EXPECT_EQ(testimg::i64(x64), w.bytes);
		}
		uint32_t x = 0;
		auto it = model.m.find(k);
		int xe = shmkv_get_expires(db, k.data(), k.size(), &x);
		if (it == model.m.end()) {
			EXPECT_EQ(xe, SHMKV_ENOTFOUND);
		} else {
			EXPECT_EQ(xe, 0);
			EXPECT_EQ(x, it->second.expires);
		}
	}
	EXPECT_EQ(found, want_found);
	for (int all = 0; all < 2; all++) {
		int e;
		std::vector<Entry> got = iterate(db, all, &e);
		EXPECT_EQ(e, SHMKV_EEND);
		EXPECT_EQ(got, want_order(base, lower, top, all, now))
			<< (all ? "every record" : "live") << ": the order of §19.6";
		std::map<std::string, std::pair<std::string, uint32_t>> g, w;
		for (const Entry &t : got)
			EXPECT_TRUE(g.emplace(std::get<0>(t), std::make_pair(std::get<2>(t), std::get<3>(t)))
					    .second)
				<< "twice: " << std::get<0>(t);
		for (auto &[k, r] : model.m)
			if (all || !r.expires || now < r.expires)
				w.emplace(k, std::make_pair(r.value, r.expires));
		EXPECT_EQ(g, w) << (all ? "every record" : "live");
		if (!all) {
			uint64_t n = 0;
			EXPECT_EQ(shmkv_count(db, &n), 0);
			EXPECT_EQ(n, got.size()) << "shmkv_count";
		}
	}
}

// A handle bound to an image in memory (128-aligned, as a mapping is).
struct Mem {
	std::string img;
	void *mem = nullptr;
	shmkv db{};
	int err = 0;
	char why[512] = "";
	explicit Mem(std::string bytes) : img(std::move(bytes))
	{
		mem = aligned_alloc(4096, img.size());
		memcpy(mem, img.data(), img.size());
		err = shmkv_bind_mem(&db, mem, img.size(), 0, why, sizeof why);
	}
	~Mem() { free(mem); }
	Mem(const Mem &) = delete;
	Mem &operator=(const Mem &) = delete;
};

testimg::Options delta_of(const shmkv &base, uint64_t buckets)
{
	testimg::Options o;
	o.bucket_count = buckets;
	o.delta = true;
	o.base_checksum = shmkv_checksum(&base);
	o.base_size = base.size;
	o.seed = base.seed;
	o.hash_bits = base.hash_bits;
	return o;
}

testimg::Options base_options(uint32_t bits = 64)
{
	testimg::Options o;
	o.bucket_count = 64;
	o.hash_bits = bits;
	return o;
}

// The three images of levels() as bytes.
struct Images {
	std::string base, lower, top;
};

Images images(const Levels &l, uint32_t bits = 64)
{
	Images im;
	im.base = testimg::compose(l.base, base_options(bits)).bytes;
	Mem b(im.base);
	EXPECT_EQ(b.err, 0) << b.why;
	im.lower = testimg::compose(l.lower, delta_of(b.db, 16)).bytes;
	im.top = testimg::compose(l.top, delta_of(b.db, 8)).bytes;
	return im;
}

} // namespace

TEST(Overlay, ReadThroughTwoDeltas)
{
	const Levels l = levels();
	for (uint32_t bits : {64u, 6u}) { // 6: the checked path (a test hash)
		SCOPED_TRACE("hash_bits " + std::to_string(bits));
		Images im = images(l, bits);
		Mem base(im.base), lower(im.lower), top(im.top), alone(im.base);
		ASSERT_EQ(base.err, 0) << base.why;
		ASSERT_EQ(lower.err, 0) << lower.why;
		ASSERT_EQ(top.err, 0) << top.why;
		char why[512] = "";
		ASSERT_EQ(shmkv_delta_set2(&base.db, &lower.db, &top.db, why, sizeof why), 0) << why;
		for (uint32_t now : {kNow, kNow - 100, kNow + 2000}) {
			SCOPED_TRACE("now " + std::to_string(now));
			expect_view(&base.db, Model(l), &alone.db, &lower.db, &top.db, now, l);
		}
		// the reasons name the level that decided
		shmkv_value v;
		shmkv_set_clock(&base.db, kNow);
		EXPECT_EQ(shmkv_get_diag(&base.db, "top-tomb-over-lower-up", 22, &v, why, sizeof why),
			  SHMKV_ENOTFOUND);
		EXPECT_NE(std::string(why).find("top delta"), std::string::npos) << why;
		EXPECT_EQ(shmkv_get_diag(&base.db, "lower-tomb", 10, &v, why, sizeof why),
			  SHMKV_ENOTFOUND);
		EXPECT_EQ(std::string(why).find("top"), std::string::npos) << why;
		EXPECT_NE(std::string(why).find("delta"), std::string::npos) << why;
		EXPECT_EQ(shmkv_get_diag(&base.db, "exp-top-past", 12, &v, why, sizeof why),
			  SHMKV_ENOTFOUND);
		EXPECT_NE(std::string(why).find("top delta's upsert"), std::string::npos) << why;

		// the lower alone (top NULL), then the image alone
		ASSERT_EQ(shmkv_delta_set2(&base.db, &lower.db, nullptr, why, sizeof why), 0) << why;
		EXPECT_EQ(base.db.top, nullptr);
		expect_view(&base.db, Model(l, true, false), &alone.db, &lower.db, nullptr, kNow, l);
		ASSERT_EQ(shmkv_delta_set2(&base.db, &lower.db, &top.db, why, sizeof why), 0) << why;
		ASSERT_EQ(shmkv_delta_set(&base.db, nullptr, why, sizeof why), 0);
		EXPECT_EQ(base.db.over, nullptr);
		EXPECT_EQ(base.db.top, nullptr) << "shmkv_delta_set(NULL) reads the image alone";
		expect_view(&base.db, Model(l, false, false), &alone.db, nullptr, nullptr, kNow, l);
	}
}

// shmkv_delta_set2's refusals, each leaving the handle as it was.
TEST(Overlay, SetTwoRefuses)
{
	const Levels l = levels();
	Images im = images(l);
	Mem base(im.base), lower(im.lower), top(im.top);
	Levels o = l;
	o.base.push_back(str("other", "o"));
	Images other = images(o);
	Mem obase(other.base), otop(other.top);
	ASSERT_EQ(base.err | lower.err | top.err | obase.err | otop.err, 0);
	char why[512] = "";
	ASSERT_EQ(shmkv_delta_set(&base.db, &lower.db, why, sizeof why), 0) << why;
	auto refused = [&](const shmkv *lo, const shmkv *tp, int want, const char *says) {
		EXPECT_EQ(shmkv_delta_set2(&base.db, lo, tp, why, sizeof why), want) << says;
		EXPECT_NE(std::string(why).find(says), std::string::npos) << why;
		EXPECT_EQ(base.db.over, &lower.db) << "unchanged on error: " << says;
		EXPECT_EQ(base.db.top, nullptr) << "unchanged on error: " << says;
	};
	refused(nullptr, &top.db, -EINVAL, "without a lower");
	refused(&lower.db, &otop.db, SHMKV_EBASE, "top delta: delta applies to the image with");
	refused(&otop.db, &top.db, SHMKV_EBASE, "lower delta: delta applies to the image with");
	refused(&lower.db, &obase.db, SHMKV_EBASE, "top delta: an image (not a delta)");
	// a delta as the image read through them
	EXPECT_EQ(shmkv_delta_set2(&top.db, &lower.db, &top.db, why, sizeof why), SHMKV_EBASE);
	EXPECT_EQ(top.db.over, nullptr);
	// a top naming another chain position (prev != 0)
	testimg::Options c = delta_of(base.db, 8);
	c.prev = 0x1234;
	c.seq = 2;
	Mem chained(testimg::compose(l.top, c).bytes);
	ASSERT_EQ(chained.err, 0) << chained.why;
	refused(&lower.db, &chained.db, SHMKV_EBASE, "top delta: delta 2 of its chain");
}

namespace {

// A protocol 2 cache "c" whose control segment the test writes, with its
// images as files in the same directory.
class Cache : public shmkv_test::HandCtl {
public:
	explicit Cache(uint32_t version = SHMKV_PROTOCOL_VERSION_2) : HandCtl("c", version) {}
	std::string put(const std::string &name, const std::string &bytes)
	{
		std::string p = file(name);
		EXPECT_TRUE(shmkv_test::write_file(p, bytes));
		return p;
	}
	static shmkv_ctl_segment seg(const std::string &path, uint32_t flags, int node = -1)
	{
		shmkv_ctl_segment s = segment(path, node);
		s.flags = flags;
		return s;
	}
	shmkv *attach(unsigned flags, int *err, std::string *why, int node = -2)
	{
		shmkv *db = nullptr;
		char w[512] = "";
		*err = node == -2 ? shmkv_attach_diag(root(), "c", flags, &db, w, sizeof w)
				  : shmkv_attach_node(root(), "c", node, flags, &db, w, sizeof w);
		*why = w;
		return db;
	}
	int attach_err(unsigned flags, std::string *why)
	{
		int err;
		shmkv_close(attach(flags, &err, why));
		return err;
	}
};

const unsigned kLower = SHMKV_SEG_OVERLAY, kTop = SHMKV_SEG_OVERLAY | SHMKV_SEG_TOP;

// The images a test reads the attached handle's view against.
struct Alone {
	Mem base, lower, top;
	explicit Alone(const Images &im) : base(im.base), lower(im.lower), top(im.top) {}
};

} // namespace

TEST(Overlay, AttachedBaseLowerTop)
{
	const Levels l = levels();
	Images im = images(l);
	Alone a(im);
	Cache c;
	std::string b = c.put("base.shmkv", im.base), lo = c.put("lower.delta", im.lower),
		    tp = c.put("top.delta", im.top);
	// any order of the entries: the flags say the roles
	c.publish(1, {Cache::seg(tp, kTop), Cache::seg(b, 0), Cache::seg(lo, kLower)});
	for (unsigned flags : {0u, (unsigned)SHMKV_ATTACH_VERIFY, (unsigned)SHMKV_OPEN_DEEP}) {
		SCOPED_TRACE("flags " + std::to_string(flags));
		int err;
		std::string why;
		shmkv *db = c.attach(flags, &err, &why);
		ASSERT_NE(db, nullptr) << why;
		expect_view(db, Model(l), &a.base.db, &a.lower.db, &a.top.db, kNow, l);
		// the generation handed to a plain handle keeps both overlays
		shmkv *g = nullptr;
		ASSERT_EQ(shmkv_detach(db, &g), 0);
		expect_view(g, Model(l), &a.base.db, &a.lower.db, &a.top.db, kNow, l);
		shmkv_close(g);
		shmkv_close(db);
	}
}

// Each rule of "Protocol 2" broken once: the generation is refused with
// its error.
TEST(Overlay, AttachRefuses)
{
	const Levels l = levels();
	Images im = images(l);
	Levels o = l;
	o.base.push_back(str("other", "o"));
	Images other = images(o);
	struct Case {
		const char *what;
		uint32_t version;
		int want;
		const char *says;
		std::vector<std::pair<std::string, unsigned>> segs; // file name, flags
		unsigned flags = 0;
	};
	std::string damaged = im.top;
	{ // a byte of the top's INDEX flipped: only its checksum sees it
		shmkv_image_header h;
		memcpy(&h, damaged.data(), sizeof h);
		damaged[h.sections[0].offset + 200] ^= 0x40;
	}
	const std::vector<Case> cases = {
		{"TOP without OVERLAY", 2, SHMKV_EPROTO, "TOP flag without OVERLAY",
		 {{"base", 0}, {"lower", kLower}, {"top", SHMKV_SEG_TOP}}},
		{"TOP alone as the base", 2, SHMKV_EPROTO, "TOP flag without OVERLAY",
		 {{"base", SHMKV_SEG_TOP}}},
		{"TOP under protocol 1", 1, SHMKV_EPROTO, "unknown flags",
		 {{"base", 0}, {"top", SHMKV_SEG_TOP}}},
		{"an overlay under protocol 1", 1, SHMKV_EPROTO, "unknown flags",
		 {{"base", 0}, {"lower", kLower}, {"top", kTop}}},
		{"a top without a lower", 2, SHMKV_EPROTO, "top overlay but no lower",
		 {{"base", 0}, {"top", kTop}}},
		{"overlays without a base", 2, SHMKV_EPROTO, "overlay but no base",
		 {{"lower", kLower}, {"top", kTop}}},
		{"a top of another base", 2, SHMKV_EBASE, "top overlay",
		 {{"base", 0}, {"lower", kLower}, {"otop", kTop}}},
		{"a lower of another base", 2, SHMKV_EBASE, "overlay",
		 {{"base", 0}, {"olower", kLower}, {"top", kTop}}},
		{"a top that is no delta", 2, SHMKV_EPROTO, "a plain image where",
		 {{"base", 0}, {"lower", kLower}, {"obase", kTop}}},
		{"a damaged top, verified", 2, SHMKV_ECHECKSUM, "checksum",
		 {{"base", 0}, {"lower", kLower}, {"damaged", kTop}}, SHMKV_ATTACH_VERIFY},
		{"a missing top", 2, -ENOENT, "top.gone",
		 {{"base", 0}, {"lower", kLower}, {"top.gone", kTop}}},
		{"an unknown flag", 2, SHMKV_EPROTO, "unknown flags",
		 {{"base", 0}, {"lower", kLower | 8}}},
	};
	for (const Case &k : cases) {
		SCOPED_TRACE(k.what);
		Cache c(k.version);
		std::map<std::string, std::string> files = {
			{"base", c.put("base", im.base)},	  {"lower", c.put("lower", im.lower)},
			{"top", c.put("top", im.top)},		  {"otop", c.put("otop", other.top)},
			{"olower", c.put("olower", other.lower)}, {"obase", c.put("obase", other.base)},
			{"damaged", c.put("damaged", damaged)},	  {"top.gone", c.file("top.gone")}};
		std::vector<shmkv_ctl_segment> segs;
		for (auto &[name, flags] : k.segs)
			segs.push_back(Cache::seg(files[name], flags));
		c.publish(1, segs);
		std::string why;
		EXPECT_EQ(c.attach_err(k.flags, &why), k.want) << why;
		EXPECT_NE(why.find(k.says), std::string::npos) << why;
	}
	{ // the damaged top attaches unverified: its checksums are what VERIFY adds
		Cache c;
		c.publish(1, {Cache::seg(c.put("base", im.base), 0),
			      Cache::seg(c.put("lower", im.lower), kLower),
			      Cache::seg(c.put("damaged", damaged), kTop)});
		std::string why;
		EXPECT_EQ(c.attach_err(0, &why), 0) << why;
	}
}

// Each overlay's copy is the one on the base copy's node, else its first.
TEST(Overlay, PickPerNode)
{
	Levels l = levels();
	Images im = images(l);
	Levels l1 = l;
	l1.top.push_back(str("copy", "node1"));
	Levels l0 = l;
	l0.top.push_back(str("copy", "node0"));
	Mem b(im.base);
	// two top copies told apart by one key (real copies are equal)
	std::string top0 = testimg::compose(l0.top, delta_of(b.db, 8)).bytes;
	std::string top1 = testimg::compose(l1.top, delta_of(b.db, 8)).bytes;
	Cache c;
	std::string b0 = c.put("b0", im.base), b1 = c.put("b1", im.base),
		    lo = c.put("lower", im.lower), t0 = c.put("t0", top0), t1 = c.put("t1", top1);
	auto copy_read = [&](int node) {
		int err;
		std::string why;
		shmkv *db = c.attach(0, &err, &why, node);
		EXPECT_NE(db, nullptr) << why;
		if (!db)
			return std::string("no handle");
		shmkv_value v;
		std::string got = shmkv_get(db, "copy", 4, &v) ? "absent"
							       : std::string((const char *)v.data, v.size);
		EXPECT_EQ(answer(shmkv_get(db, "top-only", 8, &v), v),
			  (Answer{0, SHMKV_TYPE_STRING, "t"}));
		EXPECT_EQ(answer(shmkv_get(db, "lower-only", 10, &v), v),
			  (Answer{0, SHMKV_TYPE_STRING, "l"}));
		shmkv_close(db);
		return got;
	};
	c.publish(1, {Cache::seg(t1, kTop, 1), Cache::seg(b0, 0, 0), Cache::seg(lo, kLower, 0),
		      Cache::seg(b1, 0, 1), Cache::seg(t0, kTop, 0)});
	EXPECT_EQ(copy_read(0), "node0");
	EXPECT_EQ(copy_read(1), "node1");
	// no top copy on the base copy's node: the first top copy
	c.publish(2, {Cache::seg(b0, 0, 0), Cache::seg(lo, kLower, 0), Cache::seg(t1, kTop, 1)});
	EXPECT_EQ(copy_read(0), "node1");
}

// Refresh across none -> lower -> lower+top -> lower -> none: each move
// returns 1 and reads the new view; a refused generation keeps the old
// one; values taken from any level stay valid (and unchanged) until the
// refresh that returns 1, the files gone or not.
TEST(Overlay, RefreshAcrossLevels)
{
	const Levels l = levels();
	Images im = images(l);
	Alone a(im);
	Levels o = l;
	o.base.push_back(str("other", "o"));
	Images other = images(o);
	Cache c;
	std::string b = c.put("base", im.base);
	auto lower = [&](uint64_t g) { return c.put("lower." + std::to_string(g), im.lower); };
	auto top = [&](uint64_t g) { return c.put("top." + std::to_string(g), im.top); };
	c.publish(1, {Cache::seg(b, 0)});
	int err;
	std::string why;
	shmkv *db = c.attach(0, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	shmkv_set_clock(db, kNow);
	expect_view(db, Model(l, false, false), &a.base.db, nullptr, nullptr, kNow, l);

	// values held, by key: pointer and the bytes they showed
	std::vector<std::tuple<std::string, const char *, std::string>> held;
	auto hold = [&](const std::string &k) {
		shmkv_value v;
		ASSERT_EQ(shmkv_get(db, k.data(), k.size(), &v), 0) << k;
		held.emplace_back(k, (const char *)v.data, std::string((const char *)v.data, v.size));
	};
	auto still = [&](const char *when) {
		for (auto &[k, p, bytes] : held)
			EXPECT_EQ(std::string(p, bytes.size()), bytes) << k << " " << when;
	};
	auto moved = [&]() {
		still("before the refresh that returns 1");
		EXPECT_EQ(shmkv_refresh(db), 1);
		held.clear();
	};
	hold("base-only");
	hold("lower-up");

	std::string lo2 = lower(2);
	c.publish(2, {Cache::seg(b, 0), Cache::seg(lo2, kLower)});
	moved();
	EXPECT_EQ(shmkv_generation(db), 2u);
	expect_view(db, Model(l, true, false), &a.base.db, &a.lower.db, nullptr, kNow, l);
	hold("base-only");
	hold("lower-up");
	hold("top-up-over-both");

	// a generation whose top is another base's: refused, the old one kept
	std::string bad = c.put("top.bad", other.top);
	c.publish(3, {Cache::seg(b, 0), Cache::seg(lo2, kLower), Cache::seg(bad, kTop)});
	EXPECT_EQ(shmkv_refresh(db), SHMKV_EBASE);
	EXPECT_EQ(shmkv_refresh(db), SHMKV_EBASE) << "remembered until the next publish";
	EXPECT_EQ(shmkv_generation(db), 2u);
	still("after a refused refresh");
	expect_view(db, Model(l, true, false), &a.base.db, &a.lower.db, nullptr, kNow, l);

	std::string lo4 = lower(4), tp4 = top(4);
	c.publish(4, {Cache::seg(b, 0), Cache::seg(lo4, kLower), Cache::seg(tp4, kTop)});
	unlink(lo2.c_str()); // what the loader does after publishing: the mapping lives on
	still("with the lower file unlinked");
	moved();
	EXPECT_EQ(shmkv_generation(db), 4u);
	expect_view(db, Model(l), &a.base.db, &a.lower.db, &a.top.db, kNow, l);
	hold("base-only");
	hold("lower-up");
	hold("top-up-over-both");
	hold("top-only");

	std::string lo5 = lower(5);
	c.publish(5, {Cache::seg(lo5, kLower), Cache::seg(b, 0)});
	unlink(lo4.c_str());
	unlink(tp4.c_str());
	still("with the lower and top files unlinked");
	EXPECT_EQ(shmkv_refresh(db), 1);
	held.clear();
	expect_view(db, Model(l, true, false), &a.base.db, &a.lower.db, nullptr, kNow, l);
	hold("lower-up");

	c.publish(6, {Cache::seg(b, 0)});
	moved();
	EXPECT_EQ(shmkv_generation(db), 6u);
	expect_view(db, Model(l, false, false), &a.base.db, nullptr, nullptr, kNow, l);
	EXPECT_EQ(shmkv_refresh(db), 0);
	shmkv_close(db);
}

namespace {

// How many lines of /proc/self/maps name path (a file unlinked since
// shows it with " (deleted)").
int maps_of(const std::string &path)
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	char line[4096];
	int n = 0;
	while (fgets(line, sizeof line, f)) {
		std::string s(line);
		size_t at = s.find('/');
		if (at == std::string::npos)
			continue;
		std::string name = s.substr(at);
		while (!name.empty() && name.back() == '\n')
			name.pop_back();
		n += name == path || name == path + " (deleted)";
	}
	fclose(f);
	return n;
}

} // namespace

// A refresh to a generation with the same base image keeps the base's
// mapping (the same address, one mapping of its file) and the lower's when
// it is the same file, and maps only the new overlays; a new base, or
// overlays too big for the room behind the base, map the generation anew.
// Every generation reads as the model says, the old files unlinked as the
// loader does, and no old overlay stays mapped.
TEST(Overlay, RefreshKeepsBase)
{
	std::mt19937_64 rng(0x6b5e);
	const Levels l = levels();
	Images im = images(l);
	Mem base(im.base);
	ASSERT_EQ(base.err, 0) << base.why;
	Levels o = l;
	o.base.push_back(str("other", "o"));
	Images other = images(o);
	Cache c;
	std::string b = c.put("base", im.base);
	c.publish(1, {Cache::seg(b, 0)});
	int err;
	std::string why;
	shmkv *db = c.attach(SHMKV_ATTACH_VERIFY, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	const void *at = shmkv_header(db);
	EXPECT_EQ(maps_of(b), 1);

	Levels x = l; // the view published now
	std::string lower_path, top_path, lower_bytes, top_bytes;
	bool with_lower = false, with_top = false;
	auto check = [&](const char *what, uint64_t gen) {
		SCOPED_TRACE(std::string(what) + " at generation " + std::to_string(gen));
		EXPECT_EQ(shmkv_generation(db), gen);
		EXPECT_EQ(maps_of(b), 1);
		if (with_lower) {
			EXPECT_EQ(maps_of(lower_path), 1);
		}
		if (with_top) {
			EXPECT_EQ(maps_of(top_path), 1);
		}
		Mem lo(with_lower ? lower_bytes : im.lower), tp(with_top ? top_bytes : im.top);
		expect_view(db, Model(x, with_lower, with_top), &base.db,
			    with_lower ? &lo.db : nullptr, with_top ? &tp.db : nullptr, kNow, x);
	};
	// random upserts and tombstones of the base's keys and new ones
	auto changes = [&](const std::string &tag, size_t n) {
		std::vector<Rec> d;
		std::map<std::string, bool> seen;
		for (size_t i = 0; i < n; i++) {
			std::string k = rng() % 2 ? l.base[rng() % l.base.size()].key
						  : "new" + std::to_string(rng() % 500);
			if (seen[k])
				continue;
			seen[k] = true;
			const bool out = k.size() > 100 || rng() % 5 == 0; // long keys: OUT
			d.push_back(rng() % 4 ? str(k, tag + std::to_string(i), 0, out) : tomb(k, out));
		}
		return d;
	};
	std::vector<std::string> gone; // files the generation before named
	auto publish = [&](uint64_t g) {
		std::vector<shmkv_ctl_segment> segs = {Cache::seg(b, 0)};
		if (with_lower)
			segs.push_back(Cache::seg(lower_path, kLower));
		if (with_top)
			segs.push_back(Cache::seg(top_path, kTop));
		c.publish(g, segs);
		for (const std::string &f : gone)
			unlink(f.c_str());
		gone.clear();
	};
	for (uint64_t g = 2; g < 40; g++) {
		SCOPED_TRACE("generation " + std::to_string(g));
		const void *lower_at = with_lower ? (const void *)db->over->base : nullptr;
		const bool lower_kept = with_lower && g % 7 != 0 && g % 13 != 0;
		if (!lower_kept && with_top)
			gone.push_back(top_path);
		if (!lower_kept) { // a fold: a new lower, no top (or none at all)
			if (with_lower)
				gone.push_back(lower_path);
			with_top = false;
			with_lower = g % 13 != 0;
			x.lower = with_lower ? changes("l" + std::to_string(g), 1 + rng() % 80)
					     : std::vector<Rec>();
			x.top.clear();
			if (with_lower) {
				lower_bytes = testimg::compose(x.lower, delta_of(base.db, x.lower.size() / 2 + 8)).bytes;
				lower_path = c.put("lower." + std::to_string(g), lower_bytes);
			}
		} else { // a change: a new top over the same lower
			if (with_top)
				gone.push_back(top_path);
			with_top = true;
			x.top = changes("t" + std::to_string(g), 1 + rng() % 200);
			top_bytes = testimg::compose(x.top, delta_of(base.db, x.top.size() / 2 + 8 + rng() % 32)).bytes;
			top_path = c.put("top." + std::to_string(g), top_bytes);
		}
		publish(g);
		ASSERT_EQ(shmkv_refresh(db), 1);
		EXPECT_EQ(shmkv_header(db), at) << "the base stays mapped where it was";
		if (lower_kept) {
			EXPECT_EQ((const void *)db->over->base, lower_at)
				<< "the same lower stays mapped where it was";
		}
		check("kept base", g);
		for (const std::string &f : gone)
			EXPECT_EQ(maps_of(f), 0) << f << " stays mapped";
		if (::testing::Test::HasFailure())
			break;
	}
	// a top that does not apply to the base: refused, the view kept whole
	// and the refused file not left mapped
	std::string bad = c.put("top.bad", other.top);
	{
		std::vector<shmkv_ctl_segment> segs = {Cache::seg(b, 0)};
		if (with_lower)
			segs.push_back(Cache::seg(lower_path, kLower));
		segs.push_back(Cache::seg(bad, with_lower ? kTop : kLower));
		c.publish(40, segs);
	}
	EXPECT_EQ(shmkv_refresh(db), SHMKV_EBASE);
	EXPECT_EQ(maps_of(bad), 0);
	EXPECT_EQ(shmkv_header(db), at);
	check("after a refused generation", 39);

	// overlays bigger than the room behind the base: mapped anew, all of it
	with_lower = true;
	with_top = true;
	x.lower = changes("big", 40);
	x.lower.push_back(str("big", std::string(3u << 20, 'b'), 0, true));
	x.top = changes("t41", 30);
	x.top.push_back(str("big2", std::string(2u << 20, 'c'), 0, true));
	lower_bytes = testimg::compose(x.lower, delta_of(base.db, x.lower.size() / 2 + 8)).bytes;
	top_bytes = testimg::compose(x.top, delta_of(base.db, x.top.size() / 2 + 8)).bytes;
	lower_path = c.put("lower.41", lower_bytes);
	top_path = c.put("top.41", top_bytes);
	publish(41);
	ASSERT_EQ(shmkv_refresh(db), 1);
	EXPECT_NE(shmkv_header(db), at) << "no room: mapped anew (both at once, then the old "
					    "unmapped)";
	check("overlays past the room", 41);
	at = shmkv_header(db);
	// the next top fits the room the new mapping made
	x.top = changes("t42", 50);
	top_bytes = testimg::compose(x.top, delta_of(base.db, x.top.size() / 2 + 8)).bytes;
	gone.push_back(top_path);
	top_path = c.put("top.42", top_bytes);
	publish(42);
	ASSERT_EQ(shmkv_refresh(db), 1);
	EXPECT_EQ(shmkv_header(db), at);
	check("kept base after growing", 42);

	// another base file (the same bytes): mapped anew, the old base unmapped
	std::string b2 = c.put("base.2", im.base);
	gone = {b};
	b = b2;
	publish(43);
	ASSERT_EQ(shmkv_refresh(db), 1);
	EXPECT_NE(shmkv_header(db), at) << "a new base file maps anew";
	EXPECT_EQ(maps_of(c.file("base")), 0);
	check("new base", 43);
	// a detached generation shares the range: the handle keeps the base
	shmkv *held = nullptr;
	ASSERT_EQ(shmkv_detach(db, &held), 0);
	at = shmkv_header(held);
	x.top = changes("t44", 20);
	top_bytes = testimg::compose(x.top, delta_of(base.db, x.top.size() / 2 + 8)).bytes;
	top_path = c.put("top.44", top_bytes);
	publish(44);
	ASSERT_EQ(shmkv_refresh(db), 1);
	EXPECT_EQ(shmkv_header(db), at) << "the base stays mapped where it was";
	EXPECT_EQ(maps_of(b), 1) << "one mapping: the detached generation's and the handle's";
	shmkv_close(held);
	check("after a detach", 44);
	shmkv_close(db);
	EXPECT_EQ(maps_of(b), 0);
}

namespace {

// A protocol 2 cache of one base and one lower, each generation publishing
// a new top over them (as a loader's stream of changes does), followed by
// an attached handle whose generations are handed out by shmkv_detach (as
// the Python binding does), each kept with what it must read.
struct Stream {
	struct Held {
		shmkv *db = nullptr;
		Levels x;              // what it reads
		std::string top_bytes; // its top's image ("": none)
		std::string top_path;
	};
	const Levels l = levels();
	Images im = images(l);
	Mem base{im.base}, lower{im.lower};
	Cache c;
	std::string b, lower_path;
	shmkv *db = nullptr;
	uint64_t gen = 1;
	Held now; // the generation published last
	std::vector<Held> held;
	std::mt19937_64 rng{0xde7a};

	Stream()
	{
		EXPECT_EQ(base.err, 0) << base.why;
		b = c.put("base", im.base);
		lower_path = c.put("lower", im.lower);
		now.x = l;
		now.x.top.clear();
		c.publish(gen, {Cache::seg(b, 0), Cache::seg(lower_path, kLower)});
		int err;
		std::string why;
		db = c.attach(0, &err, &why);
		EXPECT_NE(db, nullptr) << why;
	}
	~Stream()
	{
		for (Held &h : held)
			shmkv_close(h.db);
		shmkv_close(db);
	}
	Stream(const Stream &) = delete;
	Stream &operator=(const Stream &) = delete;

	// Publishes the next generation: a new top of about n random upserts
	// and tombstones, a record "gen" naming it and, pad > 0, one value of
	// pad bytes; the top before unlinked, as the loader does. Returns the
	// refresh's result.
	int next(size_t n, size_t pad = 0)
	{
		gen++;
		Held h;
		h.x = l;
		h.x.top.clear();
		const std::string tag = "g" + std::to_string(gen);
		std::map<std::string, bool> seen{{"gen", true}};
		h.x.top.push_back(str("gen", tag));
		for (size_t i = 0; i < n; i++) {
			std::string k = rng() % 2 ? l.base[rng() % l.base.size()].key
						  : "new" + std::to_string(rng() % 300);
			if (seen[k])
				continue;
			seen[k] = true;
			const bool out = k.size() > 100; // long keys: OUT
			h.x.top.push_back(rng() % 4 ? str(k, tag + "." + std::to_string(i), 0, out)
						    : tomb(k, out));
		}
		if (pad)
			h.x.top.push_back(str("pad", std::string(pad, 'p'), 0, true));
		h.top_bytes = testimg::compose(h.x.top, delta_of(base.db, h.x.top.size() / 2 + 8)).bytes;
		h.top_path = c.put("top." + std::to_string(gen), h.top_bytes);
		c.publish(gen, {Cache::seg(b, 0), Cache::seg(lower_path, kLower),
				Cache::seg(h.top_path, kTop)});
		if (!now.top_path.empty())
			unlink(now.top_path.c_str());
		now = h;
		return shmkv_refresh(db);
	}
	// Hands the generation db serves to a new handle, kept in held.
	void detach()
	{
		Held h = now;
		ASSERT_EQ(shmkv_detach(db, &h.db), 0);
		held.push_back(h);
	}
	// Every path of a held generation against the model of what it read.
	void expect(const Held &h)
	{
		SCOPED_TRACE("held generation " + std::to_string(shmkv_generation(h.db)));
		const bool top = !h.top_bytes.empty();
		Mem tp(top ? h.top_bytes : im.top);
		expect_view(h.db, Model(h.x, true, top), &base.db, &lower.db, top ? &tp.db : nullptr,
			    kNow, h.x);
	}
	// Whether a held generation's top is mapped by no one (its file is
	// unlinked unless it is the one published last).
	bool top_mapped(const Held &h) { return h.top_path.empty() || maps_of(h.top_path) > 0; }
	void close(size_t i)
	{
		shmkv_close(held[i].db);
		held.erase(held.begin() + (long)i);
	}
};

} // namespace

// Generations handed to shmkv_detach share the handle's range: across
// refreshes that publish only a new top, several detached generations
// alive at once each read what they read, the base stays mapped once where
// it was; a top's room is given back when the last handle reading it
// closes, in any order of closes, and the range goes with its last holder.
TEST(Overlay, DetachedGenerationsShareBase)
{
	Stream s;
	ASSERT_NE(s.db, nullptr);
	const void *at = shmkv_header(s.db);
	s.detach(); // no top yet
	for (int i = 0; i < 12; i++) {
		ASSERT_EQ(s.next(1 + s.rng() % 60), 1);
		EXPECT_EQ(shmkv_header(s.db), at) << "the base stays mapped where it was";
		s.detach();
		EXPECT_EQ(maps_of(s.b), 1) << "one mapping of the base for all";
		EXPECT_EQ(maps_of(s.lower_path), 1);
	}
	for (const Stream::Held &h : s.held) {
		s.expect(h);
		EXPECT_TRUE(s.top_mapped(h));
		EXPECT_EQ(shmkv_header(h.db), at);
	}
	// closes in random order, refreshes between them: a closed generation's
	// top is unmapped unless another handle reads it
	std::vector<std::string> closed_tops;
	for (int round = 0; !s.held.empty(); round++) {
		SCOPED_TRACE("round " + std::to_string(round));
		const size_t i = s.rng() % s.held.size();
		const std::string top = s.held[i].top_path;
		s.close(i);
		if (!top.empty())
			closed_tops.push_back(top);
		if (round % 3 == 0) {
			ASSERT_EQ(s.next(1 + s.rng() % 40), 1);
			EXPECT_EQ(shmkv_header(s.db), at);
			if (round % 2 == 0)
				s.detach();
		}
		for (const std::string &t : closed_tops)
			if (t != s.now.top_path) {
				EXPECT_EQ(maps_of(t), 0) << t << " stays mapped";
			}
		for (const Stream::Held &h : s.held)
			EXPECT_TRUE(s.top_mapped(h)) << h.top_path;
		if (round % 4 == 0)
			for (const Stream::Held &h : s.held)
				s.expect(h);
		EXPECT_EQ(maps_of(s.b), 1);
		if (::testing::Test::HasFailure())
			break;
	}
	// the handle and one detached generation hold the range: it stays
	// until both close
	ASSERT_EQ(s.next(5), 1);
	EXPECT_EQ(shmkv_header(s.db), at);
	s.detach();
	shmkv_close(s.db);
	s.db = nullptr;
	EXPECT_EQ(maps_of(s.b), 1) << "the detached generation holds the range";
	s.expect(s.held[0]);
	s.close(0);
	EXPECT_EQ(maps_of(s.b), 0);
	EXPECT_EQ(maps_of(s.lower_path), 0);
	EXPECT_EQ(maps_of(s.now.top_path), 0);
}

// Detached generations that hold the room behind the base, or every part
// of the range, make the next refresh map its generation anew (a new
// range, room after the overlays now): the held ones read as before, the
// old range goes when the last of them closes.
TEST(Overlay, DetachedGenerationsExhaustRoom)
{
	for (bool parts : {false, true}) {
		SCOPED_TRACE(parts ? "every part held" : "the room held");
		Stream s;
		ASSERT_NE(s.db, nullptr);
		const void *at = shmkv_header(s.db);
		// room: 4 MiB behind this small base; 1.5 MiB tops fill it at the
		// third; tiny tops take a part each, past the 64 parts a range has
		const size_t pad = parts ? 0 : (3u << 19);
		size_t moved_at = 0;
		s.detach(); // no top
		for (size_t i = 1; i <= 80 && !moved_at; i++) {
			ASSERT_EQ(s.next(parts ? 3 : 10, pad), 1);
			if (shmkv_header(s.db) != at)
				moved_at = i;
			s.detach();
		}
		ASSERT_NE(moved_at, 0u) << "never mapped anew";
		if (parts)
			EXPECT_GE(moved_at, 60u) << "room was left";
		else
			EXPECT_LE(moved_at, 4u);
		EXPECT_EQ(maps_of(s.b), 2) << "the held generations' range and the new one";
		// the new range has room for the next tops
		const void *at2 = shmkv_header(s.db);
		for (int i = 0; i < 2; i++) {
			ASSERT_EQ(s.next(10, pad), 1);
			EXPECT_EQ(shmkv_header(s.db), at2);
			s.detach();
		}
		for (size_t i = 0; i < s.held.size(); i++)
			if (i % 7 == 0 || i + 4 > s.held.size())
				s.expect(s.held[i]);
		// the old range's generations close, from both ends
		size_t old = 0;
		while (old < s.held.size() && shmkv_header(s.held[old].db) == at)
			old++;
		ASSERT_EQ(old, moved_at) << "the generations before the move read the old range";
		for (size_t left = old; left > 0; left--) {
			s.close(left % 2 ? 0 : left - 1); // the first, the last, ...
			EXPECT_EQ(maps_of(s.b), left > 1 ? 2 : 1)
				<< "the old range unmapped with its last holder";
		}
		for (const Stream::Held &h : s.held)
			s.expect(h);
	}
}

// A detached generation closed by another thread while the handle
// refreshes and detaches the next ones (the Python binding: a value's last
// reference dropped under the GIL while a refresh runs without it): each
// reads its own generation to the end, the base stays where it was.
TEST(Overlay, DetachedClosedByAnotherThread)
{
	Stream s;
	ASSERT_NE(s.db, nullptr);
	const void *at = shmkv_header(s.db);
	std::mutex mu;
	std::condition_variable cv;
	struct Job {
		shmkv *db;
		std::vector<std::pair<std::string, Answer>> want; // key, answer
	};
	std::vector<Job> q;
	bool done = false;
	std::atomic<int> bad{0};
	std::thread closer([&] {
		for (;;) {
			Job h;
			{
				std::unique_lock<std::mutex> lk(mu);
				cv.wait(lk, [&] { return done || !q.empty(); });
				if (q.empty())
					return;
				h = std::move(q.front());
				q.erase(q.begin());
			}
			cv.notify_all(); // room in the queue
			for (const auto &[k, w] : h.want) {
				shmkv_value v;
				if (!(answer(shmkv_get(h.db, k.data(), k.size(), &v), v) == w))
					bad++;
			}
			shmkv_close(h.db);
		}
	});
	// the closer at most 8 generations behind, so that they never hold
	// every part of the range (a move would be right, but not this test's)
	for (int i = 0; i < 200; i++) {
		if (i && s.next(1 + s.rng() % 20) != 1) {
			ADD_FAILURE() << "refresh to generation " << s.gen;
			break;
		}
		Job j;
		if (shmkv_detach(s.db, &j.db) != 0) {
			ADD_FAILURE() << "detach";
			break;
		}
		EXPECT_EQ((const void *)shmkv_header(j.db), at);
		shmkv_set_clock(j.db, kNow);
		const Model m(s.now.x, true, i > 0);
		for (const std::vector<Rec> *v : {&s.l.base, (const std::vector<Rec> *)&s.now.x.top})
			for (const Rec &r : *v)
				j.want.emplace_back(r.key, m.want(r.key, kNow));
		{
			std::unique_lock<std::mutex> lk(mu);
			cv.wait(lk, [&] { return q.size() < 8; });
			q.push_back(std::move(j));
		}
		cv.notify_all();
	}
	{
		std::lock_guard<std::mutex> lk(mu);
		done = true;
	}
	cv.notify_all();
	closer.join();
	EXPECT_EQ(bad.load(), 0);
	EXPECT_EQ(maps_of(s.b), 1);
	ASSERT_EQ(s.next(3), 1);
	EXPECT_EQ(shmkv_header(s.db), at) << "the base stayed mapped where it was";
}

// Random levels over a shared key space (each key in any subset of the
// three, any record kind, expiring or not), every path against the model.
// Random levels over keys k0..k(keys-1): each key in any of the three
// levels, a delta's record a tombstone one time in four, records expiring
// (past or later than kNow) or not, strings (some OUT) or i64s.
Levels random_levels(std::mt19937_64 &rng, int keys)
{
	Levels l;
	auto rec = [&](const std::string &k, const char *tag, bool delta) {
		if (delta && rng() % 4 == 0)
			return tomb(k, rng() % 3 == 0);
		uint32_t x = 0;
		switch (rng() % 6) {
		case 0: x = kNow - 1 - (uint32_t)(rng() % 100); break;
		case 1: x = kNow + 1 + (uint32_t)(rng() % 100); break;
		default: break;
		}
		if (rng() % 5 == 0) {
			Rec r = i64(k, (int64_t)rng());
			r.expires = x;
			return r;
		}
		return str(k, tag + std::string(rng() % 40, 'x'), x, rng() % 4 == 0);
	};
	for (int i = 0; i < keys; i++) {
		const std::string k = "k" + std::to_string(i);
		const unsigned in = (unsigned)(rng() % 8); // bit 0 base, 1 lower, 2 top
		if (in & 1)
			l.base.push_back(rec(k, "b", false));
		if (in & 2)
			l.lower.push_back(rec(k, "l", true));
		if (in & 4)
			l.top.push_back(rec(k, "t", true));
	}
	return l;
}

TEST(Overlay, RandomizedModel)
{
	std::mt19937_64 rng(0x70b);
	for (int round = 0; round < 40; round++) {
		SCOPED_TRACE("round " + std::to_string(round));
		const Levels l = random_levels(rng, 20 + (int)(rng() % 200));
		testimg::Options bo;
		bo.bucket_count = l.base.size() / 2 + 8;
		bo.seed = rng();
		const std::string bytes = testimg::compose(l.base, bo).bytes;
		Mem base(bytes), alone(bytes);
		ASSERT_EQ(base.err, 0) << base.why;
		Mem lower(testimg::compose(l.lower, delta_of(base.db, l.lower.size() / 2 + 4)).bytes);
		Mem top(testimg::compose(l.top, delta_of(base.db, l.top.size() / 2 + 4)).bytes);
		ASSERT_EQ(lower.err | top.err, 0) << lower.why << top.why;
		char why[512] = "";
		ASSERT_EQ(shmkv_delta_set2(&base.db, &lower.db, &top.db, why, sizeof why), 0) << why;
		expect_view(&base.db, Model(l), &alone.db, &lower.db, &top.db, kNow, l);
		if (::testing::Test::HasFailure())
			break;
	}
}

// Batches through deltas (FORMAT.md §19.6, §18): keys decided by the top,
// the lower and the base (upserts, tombstones, expired records at each
// level), keys no level holds (some let through by a delta's filter, then
// the base's), repeated keys and a key over the length limit, in random
// order and batch sizes (groups cut anywhere); each answer the model's,
// and the single get's. Through both deltas and through the lower alone.
TEST(Overlay, BatchMixedLevels)
{
	std::mt19937_64 rng(0xba7c);
	const std::string too_long(SHMKV_MAX_KEY_LEN + 1, 'x');
	for (int round = 0; round < 12; round++) {
		SCOPED_TRACE("round " + std::to_string(round));
		const int nkeys = 100 + (int)(rng() % 500);
		const Levels l = random_levels(rng, nkeys);
		testimg::Options bo;
		bo.bucket_count = l.base.size() / 4 + 8; // full buckets: displaced keys
		bo.seed = rng();
		const std::string bytes = testimg::compose(l.base, bo).bytes;
		Mem base(bytes);
		ASSERT_EQ(base.err, 0) << base.why;
		// small filters: many keys a delta does not hold get through them
		Mem lower(testimg::compose(l.lower, delta_of(base.db, l.lower.size() / 4 + 2)).bytes);
		Mem top(testimg::compose(l.top, delta_of(base.db, l.top.size() / 4 + 2)).bytes);
		ASSERT_EQ(lower.err | top.err, 0) << lower.why << top.why;
		for (bool with_top : {true, false}) {
			SCOPED_TRACE(with_top ? "lower and top" : "lower alone");
			char why[512] = "";
			ASSERT_EQ(shmkv_delta_set2(&base.db, &lower.db, with_top ? &top.db : nullptr, why,
						   sizeof why),
				  0)
				<< why;
			const Model model(l, true, with_top);
			for (uint32_t now : {kNow, kNow + 50, kNow + 200}) {
				shmkv_set_clock(&base.db, now);
				for (int b = 0; b < 8; b++) {
					std::vector<std::string> keys;
					const size_t n = 1 + rng() % 100;
					for (size_t i = 0; i < n; i++) {
						const unsigned r = (unsigned)(rng() % 100);
						if (r < 80)
							keys.push_back("k" + std::to_string(rng() % nkeys));
						else if (r < 98)
							keys.push_back("absent" + std::to_string(rng()));
						else if (r < 99 || keys.empty())
							keys.push_back(too_long);
						else
							keys.push_back(keys[rng() % keys.size()]);
					}
					std::vector<shmkv_key> bk;
					for (const std::string &k : keys)
						bk.push_back({k.data(), k.size()});
					std::vector<shmkv_value> bv(n);
					std::vector<int> be(n, 12345);
					const size_t found =
						shmkv_get_batch(&base.db, bk.data(), n, bv.data(), be.data());
					size_t want_found = 0;
					for (size_t i = 0; i < n; i++) {
						const std::string &k = keys[i];
						SCOPED_TRACE("batch of " + std::to_string(n) + ", key " +
							     std::to_string(i) + " " + k.substr(0, 24));
						Answer w = model.want(k, now);
						if (k.size() > SHMKV_MAX_KEY_LEN)
							w = Answer{SHMKV_EKEYLEN, 0, ""};
						want_found += w.err == 0;
						EXPECT_EQ(answer(be[i], bv[i]), w);
						shmkv_value v;
						EXPECT_EQ(answer(shmkv_get(&base.db, k.data(), k.size(), &v), v), w)
							<< "single get";
					}
					EXPECT_EQ(found, want_found);
				}
			}
			if (::testing::Test::HasFailure())
				return;
		}
	}
}
