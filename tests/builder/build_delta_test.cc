// build_delta_test: the builder's delta images (lib/FORMAT.md §19), read
// back by decoder.h (the format text, not lib's reader), and their input.
//
//   BuildDelta.DeltaFollowsTheFormat   random upserts (every type, expiry, long keys and
//                                      values, shared values) and tombstones (present and
//                                      absent keys, the empty key, keys up to 300 bytes):
//                                      the header names the base (checksum, size, prev 0,
//                                      seq 1) with its seed and bits and name; every record
//                                      found by the format's lookup as added, tombstones
//                                      inline up to 45 key bytes and OUT past, the filter
//                                      (words, every key's bits), value counters of upserts
//   BuildDelta.SameBytesEveryWay       threads 1, 2, 5, shuffled input, a 1 MiB memory limit
//                                      (the spilling build, with keys wrapped past the last
//                                      bucket at a load factor of 0.97): one delta, byte for
//                                      byte
//   BuildDelta.ChainAfter              --after: prev is the followed delta's checksum, seq
//                                      its seq + 1; a third after the second
//   BuildDelta.IdentityErrors          a delta as base, a plain image as the delta to follow,
//                                      one of another base, a seed or hash_bits fixed to
//                                      another value, a damaged base (checksum), records
//                                      before set_delta, a part build: each refused, saying
//                                      what and why, no output
//   BuildDelta.RecordErrors            a removal in a plain build, a key both upserted and
//                                      removed (EDUPKEY naming both), a key too long
//   BuildDelta.JsonlAndTsvInput        {"key": K, "remove": true} and TSV key lines with
//                                      tsv_removes: the same delta as the API; bad forms
//                                      ("remove" with a value, type or expires, not a bool;
//                                      a key line without tsv_removes) name file:line
//   BuildDelta.HeldBaseAndText         shmkv_builder_set_delta_of (a base held open) and
//                                      add_text (records from memory, lines from first_line)
//                                      with the last of a key winning: the API's delta; its
//                                      errors name the line; a delta as base refused
//   BuildDelta.MetaLineDelta           a dump's meta line naming the delta: rebuilt the same;
//                                      naming another base, or without a delta build: refused
//   BuildDelta.ImagesMergedAsAdded     shmkv_builder_add_images (two deltas over one base,
//                                      keys of both, tombstones, expiries, shared values;
//                                      inputs and output with keys wrapped past the last
//                                      bucket): the bytes of adding the newer's records, then
//                                      the older's, under DUP_FIRST; one image alone the
//                                      same; records before or after, another seed, a
//                                      tombstone into a plain build: refused
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <shmkv.h>
#include <shmkv/tools.h>
#include <shmkv_build.h>
#include <xxhash.h>

#include "../test_util.h"
#include "decoder.h"

using namespace shmkv_test;

namespace {

struct Rec {
	std::string key;
	unsigned type; // 0: a tombstone
	std::string val;
	uint32_t expires;
};

std::string enc_i64(int64_t v)
{
	return std::string((const char *)&v, 8);
}

std::string random_key(std::mt19937_64 &g, const std::string &prefix)
{
	unsigned kl = g() % 8 == 0 ? (unsigned)(g() % 300) : (unsigned)(g() % 60);
	std::string k = prefix;
	while (k.size() < kl)
		k += (char)('a' + g() % 26);
	return k;
}

// A random upsert of key (every kind of value the builder places differently).
Rec random_upsert(std::mt19937_64 &g, const std::string &key)
{
	static const std::string shared[] = {std::string(100, 'S'), std::string(300, 'T')};
	Rec r{key, SHMKV_TYPE_STRING, "", 0};
	switch (g() % 6) {
	case 0: r.type = SHMKV_TYPE_I64; r.val = enc_i64((int64_t)g()); break;
	case 1: r.type = SHMKV_TYPE_BOOL; r.val = std::string(1, (char)(g() & 1)); break;
	case 2: r.type = SHMKV_TYPE_F64LIST; r.val = std::string(8 * (g() % 40), '\x02'); break;
	case 3: r.type = SHMKV_TYPE_BYTES; r.val = shared[g() % 2]; break;
	default: r.val.assign(g() % 4 == 0 ? g() % 400 : g() % 20, (char)('a' + g() % 3));
	}
	r.expires = g() % 4 == 0 ? (uint32_t)(1 + g() % 0xFFFFFFFEu) : 0;
	return r;
}

void add(shmkv_builder *b, const Rec &r)
{
	if (r.type == 0) {
		ASSERT_EQ(shmkv_builder_remove(b, r.key.data(), r.key.size()), 0) << shmkv_builder_error(b);
		return;
	}
	ASSERT_EQ(shmkv_builder_set_expires(b, r.expires), 0) << shmkv_builder_error(b);
	ASSERT_EQ(shmkv_builder_add(b, r.key.data(), r.key.size(), r.type, r.val.data(),
				    r.val.size()), 0) << shmkv_builder_error(b);
}

shmkv_build_options named(const char *name)
{
	shmkv_build_options o = test_options();
	snprintf(o.name, sizeof o.name, "%s", name);
	o.fixed |= SHMKV_OPT_NAME;
	return o;
}

// A plain image of recs at path.
void build_plain(const std::vector<Rec> &recs, const std::string &path,
		 shmkv_build_options o = named("base"))
{
	Builder b(o);
	ASSERT_TRUE(b.ok());
	for (const Rec &r : recs)
		add(b, r);
	ASSERT_EQ(b.finish(path), 0) << b.error();
}

struct DeltaRun {
	unsigned threads = 0;
	uint64_t memory = 0;
	double load_factor = 0;
	const char *after = nullptr;
};

// A delta of base with recs at path: 0 or the error (msg set).
int build_delta(const std::string &base, const std::vector<Rec> &recs, const std::string &path,
		const DeltaRun &run = DeltaRun(), std::string *msg = nullptr,
		shmkv_build_options o = test_options())
{
	o.load_factor = run.load_factor;
	Builder b(o);
	EXPECT_TRUE(b.ok());
	EXPECT_EQ(shmkv_builder_set_threads(b, run.threads), 0);
	if (run.memory) {
		EXPECT_EQ(shmkv_builder_set_memory_limit(b, run.memory, nullptr), 0);
	}
	int rc = shmkv_builder_set_delta(b, base.c_str(), run.after);
	for (size_t i = 0; !rc && i < recs.size(); i++) {
		const Rec &r = recs[i];
		if (r.type == 0) {
			rc = shmkv_builder_remove(b, r.key.data(), r.key.size());
		} else if (!(rc = shmkv_builder_set_expires(b, r.expires))) {
			rc = shmkv_builder_add(b, r.key.data(), r.key.size(), r.type, r.val.data(),
					       r.val.size());
		}
	}
	if (!rc)
		rc = b.finish(path);
	if (msg)
		*msg = b.error();
	return rc;
}

uint64_t header_checksum(const std::string &path)
{
	std::string img = read_file(path);
	EXPECT_GE(img.size(), 512u);
	return img.size() >= 512 ? ((const shmkv_image_header *)img.data())->header_checksum : 0;
}

// A base of n records and a delta over it: upserts of new keys, of present
// keys with another value, type or expiry; tombstones of present keys, of
// absent ones and of the empty key.
void random_case(uint64_t seed, size_t n, std::vector<Rec> &base, std::vector<Rec> &delta)
{
	std::mt19937_64 g(seed);
	for (size_t i = 0; i < n; i++)
		base.push_back(random_upsert(g, random_key(g, "b" + std::to_string(i) + "_")));
	std::map<std::string, bool> in_delta; // a key once per delta
	delta.push_back({"", 0, "", 0});     // the empty key's tombstone is inline (§19.2)
	in_delta[""] = true;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned what = (unsigned)(g() % 8);
		std::string k = what == 0 ? random_key(g, "n" + std::to_string(i) + "_")
			      : what == 1 ? random_key(g, "gone" + std::to_string(i) + "_")
					  : base[g() % base.size()].key;
		if (in_delta.count(k))
			continue;
		in_delta[k] = true;
		delta.push_back(what == 1 || g() % 2 ? Rec{k, 0, "", 0} : random_upsert(g, k));
	}
}

TEST(BuildDelta, DeltaFollowsTheFormat)
{
	TempDir d;
	std::vector<Rec> base, delta;
	random_case(7, 3000, base, delta);
	build_plain(base, d.file("base.shmkv"));
	std::string msg;
	ASSERT_EQ(build_delta(d.file("base.shmkv"), delta, d.file("d.shmkv"), DeltaRun(), &msg), 0) << msg;
	std::string bimg = read_file(d.file("base.shmkv")), img = read_file(d.file("d.shmkv"));
	const auto *bh = (const shmkv_image_header *)bimg.data();
	Decoder dec(img);
	dec.check();
	const shmkv_image_header *h = dec.h();
	EXPECT_TRUE(dec.delta());
	EXPECT_EQ(h->reserved[0], bh->header_checksum);
	EXPECT_EQ(h->reserved[1], bh->file_size);
	EXPECT_EQ(h->reserved[2], 0u);
	EXPECT_EQ(h->reserved[3], 1u);
	EXPECT_EQ(h->hash_seed, bh->hash_seed);
	EXPECT_EQ(h->hash_bits, bh->hash_bits);
	EXPECT_STREQ(h->name, "base") << "a delta takes its base's name unless given one";
	EXPECT_EQ(h->created_unix, 1700000000);
	EXPECT_EQ(h->entry_count, delta.size());
	uint64_t logical = 0, tombs = 0, inline_tombs = 0, out_tombs = 0;
	bool expiring = false;
	for (const Rec &r : delta) {
		Found f;
		ASSERT_TRUE(dec.lookup(r.key, &f)) << "key " << r.key;
		EXPECT_EQ(f.tomb, r.type == 0) << r.key;
		if (r.type == 0) {
			tombs++;
			EXPECT_EQ(f.out, r.key.size() > 45) << "a tombstone of " << r.key.size()
							    << " key bytes: inline iff 3 + key_len <= 48";
			(f.out ? out_tombs : inline_tombs)++;
			continue;
		}
		EXPECT_EQ(f.type, r.type) << r.key;
		EXPECT_EQ(f.val, r.val) << r.key;
		EXPECT_EQ(f.expires, r.expires) << r.key;
		logical += r.val.size();
		expiring |= r.expires != 0;
	}
	EXPECT_EQ(dec.tombs, tombs);
	EXPECT_GT(inline_tombs, 10u);
	EXPECT_GT(out_tombs, 10u);
	EXPECT_EQ(h->value_bytes_logical, logical) << "upserts only";
	EXPECT_EQ((h->flags & SHMKV_HFLAG_EXPIRY) != 0, expiring);
	EXPECT_NE(h->dedup_refs, 0u) << "upserts share values as in any image";
	// the filter lets no key of the delta through unmarked, and rules out most others
	uint64_t maybe = 0;
	for (const Rec &r : base)
		maybe += dec.maybe(shmkv_key_hash(h->hash_seed, h->hash_bits, r.key.data(), r.key.size()));
	EXPECT_LT(maybe, base.size() / 2) << "16 bits a key: a small share of other keys pass";
}

TEST(BuildDelta, SameBytesEveryWay)
{
	TempDir d;
	std::vector<Rec> base, delta;
	random_case(11, 40000, base, delta);
	for (int i = 0; i < 30000; i++) // many small inline tombstones: buckets wrap at 0.97
		delta.push_back({"t" + std::to_string(i), 0, "", 0});
	build_plain(base, d.file("base.shmkv"));
	std::string msg, ref;
	for (double lf : {0.0, 0.97}) {
		ASSERT_EQ(build_delta(d.file("base.shmkv"), delta, d.file("ref.shmkv"), {1, 0, lf},
				      &msg), 0) << msg;
		ref = read_file(d.file("ref.shmkv"));
		Decoder dec(ref);
		dec.check();
		EXPECT_EQ(dec.all.size(), delta.size());
		std::vector<Rec> shuffled = delta;
		std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(3));
		struct Way {
			const char *what;
			const std::vector<Rec> *recs;
			DeltaRun run;
		} ways[] = {
			{"2 threads", &delta, {2, 0, lf}},
			{"5 threads, shuffled", &shuffled, {5, 0, lf}},
			{"a 1 MiB memory limit (spilling)", &shuffled, {2, 1 << 20, lf}},
		};
		for (const Way &w : ways) {
			ASSERT_EQ(build_delta(d.file("base.shmkv"), *w.recs, d.file("x.shmkv"), w.run,
					      &msg), 0) << w.what << ": " << msg;
			EXPECT_TRUE(read_file(d.file("x.shmkv")) == ref)
				<< w.what << " at load factor " << lf << ": other bytes";
		}
		if (lf > 0) {
			uint64_t wrapped = dec.wrapped;
			EXPECT_GT(wrapped, 0u) << "no key was displaced past the last bucket";
		}
	}
}

TEST(BuildDelta, ChainAfter)
{
	TempDir d;
	build_plain({{"a", SHMKV_TYPE_I64, enc_i64(1), 0}, {"b", SHMKV_TYPE_I64, enc_i64(2), 0}},
		    d.file("base.shmkv"));
	std::string msg;
	ASSERT_EQ(build_delta(d.file("base.shmkv"), {{"a", 0, "", 0}}, d.file("d1.shmkv"), {}, &msg), 0)
		<< msg;
	DeltaRun run;
	run.after = nullptr;
	std::string d1 = d.file("d1.shmkv"), d2 = d.file("d2.shmkv");
	run.after = d1.c_str();
	ASSERT_EQ(build_delta(d.file("base.shmkv"), {{"a", SHMKV_TYPE_STRING, "again", 0}}, d2, run,
			      &msg), 0) << msg;
	run.after = d2.c_str();
	ASSERT_EQ(build_delta(d.file("base.shmkv"), {{"b", 0, "", 0}}, d.file("d3.shmkv"), run, &msg), 0)
		<< msg;
	std::string i2 = read_file(d2), i3 = read_file(d.file("d3.shmkv"));
	const auto *h2 = (const shmkv_image_header *)i2.data(), *h3 = (const shmkv_image_header *)i3.data();
	EXPECT_EQ(h2->reserved[0], header_checksum(d.file("base.shmkv")));
	EXPECT_EQ(h2->reserved[2], header_checksum(d1));
	EXPECT_EQ(h2->reserved[3], 2u);
	EXPECT_EQ(h3->reserved[2], h2->header_checksum);
	EXPECT_EQ(h3->reserved[3], 3u);
	Decoder dec(i3);
	dec.check();
}

// An error of build_delta: its code, and msg holding each of words; no output.
void expect_refused(TempDir &d, int rc, const std::string &msg, int code,
		    std::initializer_list<const char *> words)
{
	EXPECT_EQ(rc, code) << shmkv_strerror(rc) << ": " << msg;
	for (const char *w : words)
		EXPECT_NE(msg.find(w), std::string::npos) << "'" << w << "' not in: " << msg;
	EXPECT_FALSE(file_exists(d.file("out.shmkv"))) << "a refused build wrote its output";
}

TEST(BuildDelta, IdentityErrors)
{
	TempDir d;
	std::string base = d.file("base.shmkv"), other = d.file("other.shmkv"), d1 = d.file("d1.shmkv");
	std::string out = d.file("out.shmkv"), msg;
	build_plain({{"a", SHMKV_TYPE_I64, enc_i64(1), 0}}, base);
	build_plain({{"a", SHMKV_TYPE_I64, enc_i64(2), 0}}, other);
	ASSERT_EQ(build_delta(base, {{"a", 0, "", 0}}, d1, {}, &msg), 0) << msg;
	std::string od = d.file("od.shmkv");
	ASSERT_EQ(build_delta(other, {{"a", 0, "", 0}}, od, {}, &msg), 0) << msg;

	int rc = build_delta(d1, {{"x", 0, "", 0}}, out, {}, &msg);
	expect_refused(d, rc, msg, SHMKV_EBASE, {"d1.shmkv is a delta image", "seq 1", "plain image"});
	DeltaRun run;
	run.after = base.c_str();
	rc = build_delta(base, {{"x", 0, "", 0}}, out, run, &msg);
	expect_refused(d, rc, msg, SHMKV_EBASE, {"base.shmkv is a plain image, not a delta"});
	run.after = od.c_str();
	rc = build_delta(base, {{"x", 0, "", 0}}, out, run, &msg);
	expect_refused(d, rc, msg, SHMKV_EBASE, {"od.shmkv (seq 1) is a delta of base 0x",
						  "not of", "base.shmkv (0x", "same base"});
	shmkv_build_options o = test_options();
	o.seed = 77;
	o.fixed |= SHMKV_OPT_SEED;
	rc = build_delta(base, {{"x", 0, "", 0}}, out, {}, &msg, o);
	expect_refused(d, rc, msg, SHMKV_EINPUT, {"seed 0x000000000000004d differs from the base",
						   "leave the seed unset"});
	o = test_options();
	o.hash_bits = 12;
	o.fixed |= SHMKV_OPT_HASH_BITS;
	rc = build_delta(base, {{"x", 0, "", 0}}, out, {}, &msg, o);
	expect_refused(d, rc, msg, SHMKV_EINPUT, {"hash_bits 12 differs from the base"});

	// a damaged base: a byte of its index changed (its checksum no longer holds)
	std::string img = read_file(base);
	img[4096 + 9] ^= 1;
	ASSERT_TRUE(write_file(d.file("damaged.shmkv"), img));
	rc = build_delta(d.file("damaged.shmkv"), {{"x", 0, "", 0}}, out, {}, &msg);
	expect_refused(d, rc, msg, SHMKV_ECHECKSUM, {"damaged.shmkv", "checksum"});

	Builder b;
	ASSERT_EQ(b.str("k", "v"), 0);
	EXPECT_EQ(shmkv_builder_set_delta(b, base.c_str(), nullptr), -EINVAL);
	EXPECT_NE(b.error().find("before adding records"), std::string::npos) << b.error();
	shmkv_build_options po = test_options();
	po.buckets = 4;
	po.fixed |= SHMKV_OPT_BUCKETS;
	Builder p(po);
	ASSERT_EQ(shmkv_builder_set_part(p, 1, 2, 1), 0);
	EXPECT_EQ(shmkv_builder_set_delta(p, base.c_str(), nullptr), -EINVAL);
	EXPECT_NE(p.error().find("built whole"), std::string::npos) << p.error();
	Builder q(po);
	ASSERT_EQ(shmkv_builder_set_delta(q, base.c_str(), nullptr), 0) << q.error();
	EXPECT_EQ(shmkv_builder_set_part(q, 1, 2, 1), -EINVAL);
	EXPECT_NE(q.error().find("built whole"), std::string::npos) << q.error();
	// the base is an input: never the output
	Builder r;
	ASSERT_EQ(shmkv_builder_set_delta(r, base.c_str(), nullptr), 0) << r.error();
	ASSERT_EQ(shmkv_builder_remove(r, "a", 1), 0);
	EXPECT_EQ(r.finish(base), -EEXIST);
	EXPECT_NE(r.error().find("also an input"), std::string::npos) << r.error();
}

TEST(BuildDelta, RecordErrors)
{
	TempDir d;
	std::string base = d.file("base.shmkv"), out = d.file("out.shmkv"), msg;
	build_plain({{"a", SHMKV_TYPE_I64, enc_i64(1), 0}}, base);
	Builder plain;
	EXPECT_EQ(shmkv_builder_remove(plain, "a", 1), SHMKV_EINPUT);
	EXPECT_NE(plain.error().find("only a delta image holds removals"), std::string::npos)
		<< plain.error();
	int rc = build_delta(base, {{"k", SHMKV_TYPE_STRING, "v", 0}, {"z", 0, "", 0}, {"k", 0, "", 0}},
			     out, {}, &msg);
	expect_refused(d, rc, msg, SHMKV_EDUPKEY, {"record #3: duplicate key \"k\" (first at record #1)"});
	rc = build_delta(base, {{std::string(70000, 'k'), 0, "", 0}}, out, {}, &msg);
	expect_refused(d, rc, msg, SHMKV_ELIMIT, {"key of 70000 bytes"});
}

// The delta that path (JSONL or TSV) gives as a delta of base.
std::string delta_from_file(const std::string &base, const std::string &path, int fmt,
			    int tsv_removes, int *rc, std::string *msg)
{
	shmkv_build_options o = test_options();
	o.tsv_removes = tsv_removes;
	Builder b(o);
	std::string out = path + ".shmkv";
	*rc = shmkv_builder_set_delta(b, base.c_str(), nullptr);
	if (!*rc)
		*rc = shmkv_builder_add_file(b, path.c_str(), fmt, SHMKV_TYPE_STRING);
	if (!*rc)
		*rc = b.finish(out);
	*msg = b.error();
	return *rc ? "" : read_file(out);
}

TEST(BuildDelta, JsonlAndTsvInput)
{
	TempDir d;
	std::string base = d.file("base.shmkv"), msg;
	build_plain({{"a", SHMKV_TYPE_STRING, "1", 0}, {"b", SHMKV_TYPE_STRING, "2", 0}}, base);
	ASSERT_EQ(build_delta(base, {{"a", 0, "", 0}, {"c", SHMKV_TYPE_STRING, "3", 0},
				     {"tab\there", 0, "", 0}}, d.file("api.shmkv"), {}, &msg), 0) << msg;
	std::string want = read_file(d.file("api.shmkv"));
	ASSERT_TRUE(write_file(d.file("in.jsonl"), "{\"key\": \"a\", \"remove\": true}\n"
						    "{\"key\": \"c\", \"value\": \"3\", \"remove\": false}\n"
						    "{\"remove\": true, \"key_base64\": \"dGFiCWhlcmU=\"}\n"));
	int rc;
	EXPECT_TRUE(delta_from_file(base, d.file("in.jsonl"), SHMKV_INPUT_JSONL, 0, &rc, &msg) == want)
		<< rc << " " << msg;
	ASSERT_TRUE(write_file(d.file("in.tsv"), "a\nc\t3\ntab\\there\n"));
	EXPECT_TRUE(delta_from_file(base, d.file("in.tsv"), SHMKV_INPUT_TSV, 1, &rc, &msg) == want)
		<< rc << " " << msg;

	struct Bad {
		const char *text, *ext;
		int fmt, tsv_removes;
		const char *want;
	} bad[] = {
		{"{\"key\": \"a\", \"value\": \"x\"}\n{\"key\": \"b\", \"remove\": true, \"value\": \"x\"}\n",
		 "jsonl", SHMKV_INPUT_JSONL, 0,
		 "bad.jsonl:2: key \"b\": a removal (\"remove\": true) has no \"value\""},
		{"{\"key\": \"b\", \"type\": \"i64\", \"remove\": true}\n", "jsonl", SHMKV_INPUT_JSONL, 0,
		 "bad.jsonl:1: key \"b\": a removal (\"remove\": true) has no \"type\""},
		{"{\"key\": \"b\", \"remove\": true, \"expires\": 5}\n", "jsonl", SHMKV_INPUT_JSONL, 0,
		 "has no \"expires\""},
		{"{\"key\": \"b\", \"remove\": 1}\n", "jsonl", SHMKV_INPUT_JSONL, 0,
		 "bad.jsonl:1: \"remove\" must be true or false"},
		{"{\"key\": \"b\", \"remove\": false}\n", "jsonl", SHMKV_INPUT_JSONL, 0,
		 "bad.jsonl:1: missing \"value\""},
		{"{\"key\": \"b\", \"remove\": true, \"remove\": true}\n", "jsonl", SHMKV_INPUT_JSONL, 0,
		 "field \"remove\" appears twice"},
		{"a\t1\nb\n", "tsv", SHMKV_INPUT_TSV, 0,
		 "bad.tsv:2: no TAB between key and value (a line of a key alone removes it with "
		 "--tsv-removes)"},
		{"b\\q\n", "tsv", SHMKV_INPUT_TSV, 1, "bad.tsv:1: key: unknown escape \\q"},
		{"a\nb\t1\na\n", "tsv", SHMKV_INPUT_TSV, 1,
		 "bad.tsv:3: duplicate key \"a\" (first at "},
	};
	for (const Bad &x : bad) {
		std::string path = d.file(std::string("bad.") + x.ext);
		ASSERT_TRUE(write_file(path, x.text));
		std::string img = delta_from_file(base, path, x.fmt, x.tsv_removes, &rc, &msg);
		EXPECT_NE(rc, 0) << x.text;
		EXPECT_NE(msg.find(x.want), std::string::npos) << "want '" << x.want << "' in: " << msg;
		EXPECT_FALSE(file_exists(path + ".shmkv"));
	}
	// a removal in a plain build names the line and what to do
	ASSERT_TRUE(write_file(d.file("plain.jsonl"), "{\"key\": \"a\", \"remove\": true}\n"));
	Builder b;
	EXPECT_EQ(shmkv_builder_add_file(b, d.file("plain.jsonl").c_str(), SHMKV_INPUT_JSONL, 0),
		  SHMKV_EINPUT);
	EXPECT_NE(b.error().find("plain.jsonl:1: removal of key \"a\": only a delta image holds "
				 "removals"), std::string::npos) << b.error();
	EXPECT_NE(b.error().find("--delta-of BASE"), std::string::npos) << b.error();
}

// The loader's way: the base held open (shmkv_builder_set_delta_of) and
// records from memory (shmkv_builder_add_text), the last of a key winning.
TEST(BuildDelta, HeldBaseAndText)
{
	TempDir d;
	std::string base = d.file("base.shmkv"), msg;
	build_plain({{"a", SHMKV_TYPE_STRING, "1", 0}, {"b", SHMKV_TYPE_STRING, "2", 0}}, base);
	ASSERT_EQ(build_delta(base, {{"a", 0, "", 0}, {"c", SHMKV_TYPE_STRING, "3", 0}},
			      d.file("api.shmkv"), {}, &msg), 0) << msg;
	std::string want = read_file(d.file("api.shmkv"));
	shmkv *db = nullptr;
	ASSERT_EQ(shmkv_open_file(base.c_str(), SHMKV_OPEN_NOVERIFY, &db), 0);
	// a text with one line to skip (blank), a key twice and a removal replaced
	const std::string text = "{\"key\": \"c\", \"value\": \"old\"}\n\n"
				 "{\"key\": \"a\", \"value\": \"x\"}\n"
				 "{\"key\": \"c\", \"remove\": true}\n"
				 "{\"key\": \"a\", \"remove\": true}\n"
				 "{\"key\": \"c\", \"value\": \"3\"}";
	auto from_text = [&](int dup, const std::string &t, uint64_t first, int *rc, std::string *m) {
		shmkv_build_options o = test_options();
		o.on_duplicate = dup;
		shmkv_builder *b = nullptr;
		EXPECT_EQ(shmkv_builder_new(&o, &b), 0);
		*rc = shmkv_builder_set_delta_of(b, db, "held");
		if (!*rc)
			*rc = shmkv_builder_add_text(b, t.data(), t.size(), SHMKV_INPUT_JSONL, 0, "batch",
						     first);
		shmkv_build_stats st;
		if (!*rc)
			*rc = shmkv_builder_finish(b, d.file("t.shmkv").c_str(), &st);
		*m = shmkv_builder_error(b);
		shmkv_builder_free(b);
		return *rc ? std::string() : read_file(d.file("t.shmkv"));
	};
	int rc;
	EXPECT_TRUE(from_text(SHMKV_DUP_LAST, text, 1, &rc, &msg) == want) << rc << " " << msg;
	// without DUP_LAST a key twice is the duplicate-key error, naming lines
	// counted from first_line
	from_text(SHMKV_DUP_ERROR, text, 41, &rc, &msg);
	EXPECT_EQ(rc, SHMKV_EDUPKEY) << msg;
	EXPECT_NE(msg.find("batch:44: duplicate key \"c\" (first at batch:41)"), std::string::npos)
		<< msg;
	from_text(SHMKV_DUP_LAST, "{\"key\": \"a\", \"value\": 1}\nnot json\n", 7, &rc, &msg);
	EXPECT_EQ(rc, SHMKV_EINPUT) << msg;
	EXPECT_NE(msg.find("batch:8:"), std::string::npos) << msg;
	from_text(SHMKV_DUP_LAST, "{}", 0, &rc, &msg);
	EXPECT_EQ(rc, -EINVAL) << msg;
	shmkv_close(db);
	// a delta is no base
	ASSERT_EQ(shmkv_open_file(d.file("api.shmkv").c_str(), 0, &db), 0);
	from_text(SHMKV_DUP_LAST, "", 1, &rc, &msg);
	EXPECT_EQ(rc, SHMKV_EBASE) << msg;
	EXPECT_NE(msg.find("held is a delta image"), std::string::npos) << msg;
	shmkv_close(db);
}

TEST(BuildDelta, MetaLineDelta)
{
	TempDir d;
	std::string base = d.file("base.shmkv"), other = d.file("other.shmkv"), msg;
	build_plain({{"a", SHMKV_TYPE_STRING, "1", 0}}, base);
	build_plain({{"a", SHMKV_TYPE_STRING, "2", 0}}, other);
	char meta[512];
	auto write_meta = [&](uint64_t sum, uint64_t size, uint64_t prev, uint64_t seq) {
		snprintf(meta, sizeof meta,
			 "{\"shmkv_meta\": {\"format\": 2, \"name\": \"m\", \"created\": 5, \"delta\": "
			 "{\"base_checksum\": \"0x%016llx\", \"base_size\": %llu, \"prev\": "
			 "\"0x%016llx\", \"seq\": %llu}}}\n{\"key\": \"a\", \"remove\": true}\n",
			 (unsigned long long)sum, (unsigned long long)size, (unsigned long long)prev,
			 (unsigned long long)seq);
		return write_file(d.file("m.jsonl"), meta);
	};
	uint64_t sum = header_checksum(base), size = read_file(base).size();
	ASSERT_TRUE(write_meta(sum, size, 0, 4));
	int rc;
	std::string img = delta_from_file(base, d.file("m.jsonl"), SHMKV_INPUT_JSONL, 0, &rc, &msg);
	ASSERT_EQ(rc, 0) << msg;
	const auto *h = (const shmkv_image_header *)img.data();
	EXPECT_EQ(h->reserved[3], 4u) << "a merged delta's seq, from its dump";
	EXPECT_STREQ(h->name, "m");
	EXPECT_EQ(h->created_unix, 1700000000) << "a fixed option wins over the meta line";
	img = delta_from_file(other, d.file("m.jsonl"), SHMKV_INPUT_JSONL, 0, &rc, &msg);
	EXPECT_EQ(rc, SHMKV_EBASE);
	EXPECT_NE(msg.find("m.jsonl:1: the input is the dump of a delta (seq 4) of base 0x"),
		  std::string::npos) << msg;
	EXPECT_NE(msg.find("not of " + other), std::string::npos) << msg;
	ASSERT_TRUE(write_meta(sum, size, 0x1234, 2));
	img = delta_from_file(base, d.file("m.jsonl"), SHMKV_INPUT_JSONL, 0, &rc, &msg);
	EXPECT_EQ(rc, SHMKV_EBASE);
	EXPECT_NE(msg.find("follows delta 0x0000000000001234, but no delta to follow (--after) is "
			   "given"), std::string::npos) << msg;
	Builder b;
	EXPECT_EQ(shmkv_builder_add_file(b, d.file("m.jsonl").c_str(), SHMKV_INPUT_JSONL, 0),
		  SHMKV_EBASE);
	EXPECT_NE(b.error().find("build it as a delta of that base (--delta-of BASE, --after the "
				 "delta it follows, 0x0000000000001234)"), std::string::npos) << b.error();
	ASSERT_TRUE(write_file(d.file("m.jsonl"), "{\"shmkv_meta\": {\"delta\": {\"seq\": 1}}}\n"));
	img = delta_from_file(base, d.file("m.jsonl"), SHMKV_INPUT_JSONL, 0, &rc, &msg);
	EXPECT_EQ(rc, SHMKV_EINPUT);
	EXPECT_NE(msg.find("needs base_checksum, base_size, prev and seq"), std::string::npos) << msg;
}

} // namespace

namespace {

// Opens path with the reader's checks (the images add_images is given).
shmkv *opened(const std::string &path)
{
	shmkv *db = nullptr;
	int err = shmkv_open_file(path.c_str(), 0, &db);
	EXPECT_EQ(err, 0) << path << ": " << shmkv_strerror(err);
	return db;
}

// A delta of base merged from dbs by add_images at out: 0 or the error.
int merged_delta(const std::string &base, const std::vector<shmkv *> &dbs, const std::string &out,
		 double load_factor, std::string *msg)
{
	shmkv_build_options o = test_options();
	o.on_duplicate = SHMKV_DUP_FIRST;
	o.load_factor = load_factor;
	Builder b(o);
	int rc = shmkv_builder_set_delta(b, base.c_str(), nullptr);
	if (!rc)
		rc = shmkv_builder_add_images(b, dbs.data(), dbs.size());
	if (!rc)
		rc = b.finish(out);
	*msg = b.error();
	return rc;
}

} // namespace

TEST(BuildDelta, ImagesMergedAsAdded)
{
	TempDir d;
	std::vector<Rec> base, older, newer;
	random_case(21, 30000, base, older);
	std::mt19937_64 g(5);
	std::map<std::string, bool> in_newer;
	for (size_t i = 0; i < older.size() / 2; i++) { // keys of older, of the base, new ones
		unsigned what = (unsigned)(g() % 3);
		std::string k = what == 0 ? older[g() % older.size()].key
			      : what == 1 ? base[g() % base.size()].key
					  : random_key(g, "m" + std::to_string(i) + "_");
		if (in_newer.count(k))
			continue;
		in_newer[k] = true;
		newer.push_back(g() % 4 == 0 ? Rec{k, 0, "", 0} : random_upsert(g, k));
	}
	for (int i = 0; i < 20000; i++) // small inline tombstones: buckets wrap at 0.97
		older.push_back({"t" + std::to_string(i), 0, "", 0});
	build_plain(base, d.file("base.shmkv"));
	std::string msg;
	shmkv_build_options dup_first = test_options();
	dup_first.on_duplicate = SHMKV_DUP_FIRST;
	std::vector<Rec> both = newer; // newer's records first: they win
	both.insert(both.end(), older.begin(), older.end());
	for (double lf : {0.0, 0.97}) {
		ASSERT_EQ(build_delta(d.file("base.shmkv"), older, d.file("older.shmkv"), {1, 0, lf},
				      &msg), 0) << msg;
		ASSERT_EQ(build_delta(d.file("base.shmkv"), newer, d.file("newer.shmkv"), {1, 0, lf},
				      &msg), 0) << msg;
		ASSERT_EQ(build_delta(d.file("base.shmkv"), both, d.file("ref.shmkv"), {1, 0, lf},
				      &msg, dup_first), 0) << msg;
		std::string ref = read_file(d.file("ref.shmkv"));
		Decoder dec(ref);
		dec.check();
		if (lf > 0) {
			uint64_t wrapped = dec.wrapped;
			EXPECT_GT(wrapped, 0u) << "no key was displaced past the last bucket";
		}
		shmkv *o = opened(d.file("older.shmkv")), *n = opened(d.file("newer.shmkv"));
		ASSERT_TRUE(o && n);
		ASSERT_EQ(merged_delta(d.file("base.shmkv"), {n, o}, d.file("x.shmkv"), lf, &msg), 0)
			<< msg;
		EXPECT_TRUE(read_file(d.file("x.shmkv")) == ref) << "load factor " << lf
								 << ": other bytes";
		// one image alone: its records as added
		ASSERT_EQ(merged_delta(d.file("base.shmkv"), {o}, d.file("x.shmkv"), lf, &msg), 0)
			<< msg;
		EXPECT_TRUE(read_file(d.file("x.shmkv")) == read_file(d.file("older.shmkv")))
			<< "load factor " << lf << ": other bytes";
		shmkv_close(o);
		shmkv_close(n);
	}

	// refused: records before or after the images, an image of another
	// seed, a tombstone into a plain build
	shmkv *n = opened(d.file("newer.shmkv"));
	ASSERT_NE(n, nullptr);
	{
		Builder b(dup_first);
		ASSERT_EQ(shmkv_builder_set_delta(b, d.file("base.shmkv").c_str(), nullptr), 0);
		ASSERT_EQ(b.str("k", "v"), 0);
		EXPECT_EQ(shmkv_builder_add_images(b, &n, 1), -EINVAL);
		EXPECT_NE(b.error().find("no records yet"), std::string::npos) << b.error();
	}
	{
		Builder b(dup_first);
		ASSERT_EQ(shmkv_builder_set_delta(b, d.file("base.shmkv").c_str(), nullptr), 0);
		ASSERT_EQ(shmkv_builder_add_images(b, &n, 1), 0) << b.error();
		EXPECT_EQ(b.str("k", "v"), -EINVAL);
		EXPECT_NE(b.error().find("after images merged"), std::string::npos) << b.error();
		EXPECT_EQ(shmkv_builder_add_images(b, &n, 1), -EINVAL);
	}
	{
		shmkv_build_options o = test_options();
		o.seed = 77;
		o.fixed |= SHMKV_OPT_SEED;
		Builder b(o);
		EXPECT_EQ(shmkv_builder_add_images(b, &n, 1), -EINVAL);
		EXPECT_NE(b.error().find("image 1 of 1 has the seed"), std::string::npos) << b.error();
	}
	{
		Builder b; // a plain build (the base's seed) of a delta's records: its tombstones
		int rc = shmkv_builder_add_images(b, &n, 1);
		EXPECT_EQ(rc, SHMKV_EINPUT) << b.error();
		EXPECT_NE(b.error().find("a tombstone"), std::string::npos) << b.error();
	}
	shmkv_close(n);
}

