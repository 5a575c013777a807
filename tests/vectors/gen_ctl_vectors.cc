// gen_ctl_vectors: the control-segment conformance vectors (tests/vectors/README.md,
// "Control-segment vectors"): control segments written byte by byte from
// lib/PROTOCOL.md's layout (offsets and layout hashes as that document gives
// them, not from lib/shmkv/protocol.h), the segment images they name (the
// image vectors beside ctl/, and ctl/top.img: a second delta of
// delta_base.img, built here), and ctl/manifest.json with the verdict every
// reader must give at attach, written by hand from PROTOCOL.md.
//
//   gen_ctl_vectors --out DIR     writes DIR/ctl/ (DIR: tests/vectors)
//   gen_ctl_vectors --check DIR   fails naming each file of DIR/ctl/ that differs
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <shmkv.h>

#include "vec_util.h"
#include <shmkv_build.h>

namespace {

using vec::hex;
using vec::jstr;
using vec::read_whole;

[[noreturn]] void die(const std::string &what)
{
	fprintf(stderr, "gen_ctl_vectors: %s\n", what.c_str());
	exit(2);
}

// ---- the top overlay: a delta of delta_base.img (FORMAT.md §19), as
// gen_vectors builds its deltas (fixed seed, creation time, name, one thread)

struct Rec {
	std::string key, val; // a string value
	bool tomb;
};

std::string build_top(const std::string &vdir)
{
	shmkv_build_options bo;
	if (shmkv_build_options_init(&bo) != 0)
		die("build options");
	bo.created = 1700000000;
	bo.seed = 0x5eed;
	bo.fixed |= SHMKV_OPT_CREATED | SHMKV_OPT_SEED;
	snprintf(bo.name, sizeof bo.name, "%s", "vectors");
	shmkv_builder *b;
	if (shmkv_builder_new(&bo, &b) != 0)
		die("builder");
	shmkv_builder_set_threads(b, 1);
	const std::string base = vdir + "/delta_base.img";
	if (shmkv_builder_set_delta(b, base.c_str(), nullptr) != 0)
		die("set_delta " + base + ": " + shmkv_builder_error(b));
	// the changes made after delta.img (the lower overlay): see kTopGets
	const std::vector<Rec> recs = {
		{"a", "top a", false},                // the base: "base a", the lower: i64 1
		{"gone", "back in the top", false},   // the lower removes it
		{"top/new", "added by the top", false},
		{"c", "", true},                      // the base: true, the lower: false
		{"new", "", true},                    // the lower adds it
	};
	for (const Rec &r : recs)
		if (r.tomb ? shmkv_builder_remove(b, r.key.data(), r.key.size()) != 0
			   : shmkv_builder_add(b, r.key.data(), r.key.size(), SHMKV_TYPE_STRING,
					       r.val.data(), r.val.size()) != 0)
			die(std::string("top: ") + shmkv_builder_error(b));
	char tmpl[] = "/tmp/gen_ctl_vectors.XXXXXX";
	if (!mkdtemp(tmpl))
		die(std::string("mkdtemp: ") + strerror(errno));
	const std::string path = std::string(tmpl) + "/top.img";
	if (shmkv_builder_finish(b, path.c_str(), nullptr) != 0)
		die(std::string("top: ") + shmkv_builder_error(b));
	shmkv_builder_free(b);
	std::string img;
	if (!read_whole(path, img))
		die("read back " + path);
	unlink(path.c_str());
	rmdir(tmpl);
	return img;
}

// ---- control segments (lib/PROTOCOL.md, "The control segment") -------------

const uint64_t kHashV1 = 0x4b43ad88b167e31cull; // PROTOCOL.md, "Versioning"
const uint64_t kHashV2 = 0x15a70b2227f150faull; // PROTOCOL.md, "Protocol 2"
const uint32_t kHugetlb = 1, kOverlay = 2, kTop = 4;

struct Seg {
	std::string file; // the name in the harness's directory ("" : path as given)
	uint32_t flags = 0;
	int32_t node = -1;
	uint64_t size = 8192, map_size = 8192, page_size = 4096;
	std::string raw_path; // with file "": the path field's bytes as they are
};

struct Ctl {
	std::string magic = "SHMKVCTL";
	uint32_t version = 2, ctl_size = 4096;
	uint64_t layout_hash = 0; // 0: the version's
	uint64_t seq = 0;         // 0: 2 * generation
	uint64_t generation = 7;
	int64_t count = -1;       // -1: segs.size()
	uint32_t flags = 0;
	uint64_t reserved = 0; // each of the 8 reserved words
	std::vector<Seg> segs;
	size_t file_size = 4096;
};

template <class T> void put(std::string &b, size_t off, T x)
{
	memcpy(&b[off], &x, sizeof x);
}

std::string ctl_bytes(const Ctl &c)
{
	std::string b(4096, '\0');
	memcpy(&b[0], c.magic.data(), 8);
	put<uint32_t>(b, 8, c.version);
	put<uint32_t>(b, 12, c.ctl_size);
	put<uint64_t>(b, 16, c.layout_hash ? c.layout_hash : c.version == 1 ? kHashV1 : kHashV2);
	put<uint64_t>(b, 24, c.seq ? c.seq : 2 * c.generation);
	put<uint64_t>(b, 32, c.generation);
	put<uint32_t>(b, 40, c.count >= 0 ? (uint32_t)c.count : (uint32_t)c.segs.size());
	put<uint32_t>(b, 44, c.flags);
	put<uint64_t>(b, 48, 4242);                       // loader_pid
	put<int64_t>(b, 56, 1700000000000000000ll);       // published_ns
	for (size_t i = 0; i < 8; i++)
		put<uint64_t>(b, 64 + 8 * i, c.reserved);
	for (size_t i = 0; i < c.segs.size() && i < 8; i++) {
		const Seg &s = c.segs[i];
		const size_t o = 128 + 256 * i;
		put<int32_t>(b, o, s.node);
		put<uint32_t>(b, o + 4, s.flags);
		put<uint64_t>(b, o + 8, s.size);
		put<uint64_t>(b, o + 16, s.map_size);
		put<uint64_t>(b, o + 24, s.page_size);
		const std::string p = s.file.empty() ? s.raw_path : "@DIR@/" + s.file;
		if (p.size() > 224)
			die("a path field over 224 bytes");
		memcpy(&b[o + 32], p.data(), p.size());
	}
	b.resize(c.file_size, '\0');
	return b;
}

// ---- the manifest -----------------------------------------------------------

// A lookup and its answer: absent (ENOTFOUND), a string, or an i64.
struct Get {
	std::string key;
	const char *result; // "OK" or "SHMKV_ENOTFOUND"
	const char *type;   // "string" or "i64" when OK
	std::string value;  // the string, or the i64 in decimal
};

Get found(std::string k, std::string v) { return {std::move(k), "OK", "string", std::move(v)}; }
Get found_i64(std::string k, long long v) { return {std::move(k), "OK", "i64", std::to_string(v)}; }
Get absent(std::string k) { return {std::move(k), "SHMKV_ENOTFOUND", "", ""}; }

const std::string kMiss("no such key\x01", 12);

// Written from the records of delta_base.img and delta.img (gen_vectors.cc,
// add_deltas) and of top.img (build_top above), and FORMAT.md §19.6's
// order: top, then lower, then base.
const std::vector<Get> kBaseGets = {
	found("a", "base a"), found_i64("b", 7), found("gone", "removed by the delta"),
	found("kept/out", std::string(150, 'k')), absent("new"), absent("top/new"), absent(kMiss)};
const std::vector<Get> kLowerGets = {
	found_i64("a", 1), found("b", "was an i64"), found("new", "added"), absent("gone"),
	absent(""), found("kept/out", std::string(150, 'k')), absent("top/new"), absent(kMiss)};
const std::vector<Get> kTopGets = {
	found("a", "top a"),                      // the top changes it
	found("b", "was an i64"),                 // the lower changes it, the top does not
	absent("new"),                            // the lower adds it, the top removes it
	absent("c"),                              // the top removes a base key
	found("gone", "back in the top"),         // the lower removes it, the top sets it
	absent(""),                               // the lower removes it
	found("kept/out", std::string(150, 'k')), // the base's
	found("top/new", "added by the top"),
	absent(kMiss)};

struct File {
	std::string name, from, mode;
};

struct Case {
	std::string name, about;
	Ctl ctl;
	std::string ctl_mode = "0644";
	std::map<std::string, std::string> modes; // a file's mode, else 0644
	std::string attach;                       // "OK" or an error class
	std::vector<Get> gets;
};

// Where each segment file the vectors name comes from (relative to tests/vectors/).
const std::map<std::string, std::string> kFrom = {
	{"base.img", "delta_base.img"},   {"base1.img", "delta_base.img"},
	{"lower.img", "delta.img"},       {"lower1.img", "delta.img"},
	{"top.img", "ctl/top.img"},       {"empty_top.img", "delta_empty.img"},
	{"other_base.img", "delta_base_checksum.img"},
	{"plain.img", "base.img"},        {"not_image.img", "bad_magic.img"},
	{"short.img", "truncated.img"},
};

std::string manifest(const std::vector<Case> &cs)
{
	std::string m = "{\n  \"format\": \"shmkv-ctl-vectors\",\n  \"manifest_version\": 1,\n"
			"  \"dir_token\": \"@DIR@\",\n  \"cases\": [\n";
	for (size_t i = 0; i < cs.size(); i++) {
		const Case &c = cs[i];
		m += "    {\n      \"name\": " + jstr(c.name) + ",\n      \"about\": " + jstr(c.about) +
		     ",\n      \"ctl\": " + jstr(c.name + ".ctl") + ",\n      \"ctl_mode\": " +
		     jstr(c.ctl_mode) + ",\n      \"files\": [";
		std::map<std::string, bool> seen;
		bool first = true;
		for (const Seg &s : c.ctl.segs) {
			if (s.file.empty() || seen[s.file] || !kFrom.count(s.file))
				continue;
			seen[s.file] = true;
			auto md = c.modes.find(s.file);
			m += std::string(first ? "" : ",") + "\n        {\"name\": " + jstr(s.file) +
			     ", \"from\": " + jstr(kFrom.at(s.file)) + ", \"mode\": " +
			     jstr(md == c.modes.end() ? "0644" : md->second) + "}";
			first = false;
		}
		m += std::string(first ? "" : "\n      ") + "],\n      \"attach\": " + jstr(c.attach);
		if (c.attach == "OK") {
			m += ",\n      \"generation\": " + std::to_string(c.ctl.generation) +
			     ",\n      \"gets\": [";
			for (size_t j = 0; j < c.gets.size(); j++) {
				const Get &g = c.gets[j];
				m += std::string(j ? "," : "") + "\n        {\"key_hex\": " + jstr(hex(g.key)) +
				     ", \"result\": " + jstr(g.result);
				if (!strcmp(g.result, "OK"))
					m += ", \"type\": " + jstr(g.type) + ", \"value\": " + jstr(g.value);
				m += "}";
			}
			m += "\n      ]";
		}
		m += std::string("\n    }") + (i + 1 < cs.size() ? "," : "") + "\n";
	}
	return m + "  ]\n}\n";
}

// ---- the cases --------------------------------------------------------------

Seg seg(std::string file, uint32_t flags = 0, int32_t node = -1)
{
	Seg s;
	s.file = std::move(file);
	s.flags = flags;
	s.node = node;
	return s;
}

std::vector<Case> cases(uint64_t top_size)
{
	std::vector<Case> out;
	auto add = [&](const std::string &name, const std::string &about, Ctl ctl,
		       const std::string &attach, std::vector<Get> gets = {}) -> Case & {
		Case c;
		c.name = name;
		c.about = about;
		c.ctl = std::move(ctl);
		c.attach = attach;
		c.gets = std::move(gets);
		out.push_back(c);
		return out.back();
	};
	auto v = [](uint32_t version, std::vector<Seg> segs) {
		Ctl c;
		c.version = version;
		c.segs = std::move(segs);
		return c;
	};
	Seg top = seg("top.img", kOverlay | kTop);
	top.size = top.map_size = top_size;
	const Seg base = seg("base.img"), lower = seg("lower.img", kOverlay);

	// accepted
	add("p1_base", "protocol 1: one base copy", v(1, {base}), "OK", kBaseGets);
	add("p2_base", "protocol 2, a generation with base copies only: the base alone",
	    v(2, {base}), "OK", kBaseGets);
	add("p2_lower", "protocol 2: the base through the lower overlay", v(2, {base, lower}), "OK",
	    kLowerGets);
	add("p2_lower_top", "protocol 2: the base through the lower overlay and the top one, "
	    "entries in the order top, base, lower (any order)", v(2, {top, base, lower}), "OK",
	    kTopGets);
	{
		Seg e = seg("empty_top.img", kOverlay | kTop);
		add("p2_empty_top", "protocol 2: a top overlay without records changes nothing",
		    v(2, {base, lower, e}), "OK", kLowerGets);
	}
	{
		Seg h = base;
		h.flags = kHugetlb;
		add("p1_hugetlb_flag", "protocol 1: the hugetlb flag on a base copy (a tmpfs file "
		    "here; the flag changes nothing a reader checks)", v(1, {h}), "OK", kBaseGets);
	}
	{
		Ctl c = v(2, {base, lower});
		c.flags = 2 | 4 | 0x80000000u;
		add("ctl_flags_unknown", "protocol 2: the control segment's flag bits 1, 2 and 31 "
		    "set (unknown: ignored; RETIRED, bit 0, is not set)", c, "OK", kLowerGets);
		c = v(1, {base});
		c.reserved = 0xa5a5a5a5a5a5a5a5ull;
		add("reserved_nonzero", "protocol 1: every reserved word 0xa5a5a5a5a5a5a5a5 "
		    "(ignored)", c, "OK", kBaseGets);
	}
	add("p1_replicas", "protocol 1, two base copies of nodes 0 and 1 (two files, the same "
	    "image): a reader may read either, the answers are the same",
	    v(1, {seg("base.img", 0, 0), seg("base1.img", 0, 1)}), "OK", kBaseGets);
	{
		Seg t1 = top;
		t1.node = 1;
		add("p2_replicas", "protocol 2: base and lower copies of nodes 0 and 1, one top "
		    "copy of node 1: a reader may read any base copy with the lower copy of its "
		    "node; the answers are the same",
		    v(2, {seg("base.img", 0, 0), seg("base1.img", 0, 1), seg("lower.img", kOverlay, 0),
			  seg("lower1.img", kOverlay, 1), t1}),
		    "OK", kTopGets);
	}

	// refused: the control segment's header (PROTOCOL.md, "Attach")
	{
		Ctl c = v(1, {base});
		c.magic = "SHMKVCTX";
		add("bad_magic", "magic SHMKVCTX", c, "SHMKV_EPROTO");
		c = v(1, {base});
		c.version = 0;
		c.layout_hash = kHashV1;
		add("version_0", "protocol_version 0 (protocol 1's layout hash)", c, "SHMKV_EPROTO");
		c = v(2, {base});
		c.version = 3;
		c.layout_hash = kHashV2;
		add("version_3", "protocol_version 3 (protocol 2's layout hash)", c, "SHMKV_EPROTO");
		c = v(1, {base});
		c.layout_hash = kHashV1 + 1;
		add("layout_hash", "protocol 1 with a layout hash one more than its own", c,
		    "SHMKV_EPROTO");
		c = v(2, {base});
		c.layout_hash = kHashV1;
		add("layout_hash_v1_in_v2", "protocol 2 with protocol 1's layout hash", c,
		    "SHMKV_EPROTO");
		c = v(1, {base});
		c.layout_hash = kHashV2;
		add("layout_hash_v2_in_v1", "protocol 1 with protocol 2's layout hash", c,
		    "SHMKV_EPROTO");
		c = v(2, {base});
		c.layout_hash = 0x3bf262da49ef7315ull;
		add("layout_hash_v2_draft", "protocol 2 with the hash of its first form, which "
		    "never left development (PROTOCOL.md, \"Versioning\")", c, "SHMKV_EPROTO");
		c = v(1, {base});
		c.ctl_size = 8192;
		add("ctl_size", "ctl_size 8192 (the file is 4096 bytes)", c, "SHMKV_EPROTO");
		c = v(1, {base});
		c.file_size = 2048;
		add("ctl_short", "a control segment file of 2048 bytes (its first half of an "
		    "intact one)", c, "SHMKV_EPROTO");
		Case &g = add("ctl_group_writable", "the control segment file has mode 0664 (Trust)",
			      v(1, {base}), "SHMKV_EPROTO");
		g.ctl_mode = "0664";
		Case &o = add("ctl_other_writable", "the control segment file has mode 0646 (Trust)",
			      v(2, {base, lower}), "SHMKV_EPROTO");
		o.ctl_mode = "0646";
	}

	// refused: the snapshot (PROTOCOL.md, "Reading")
	{
		Ctl c = v(1, {base});
		c.seq = 2 * c.generation + 1;
		add("seq_odd", "seq odd: a publish in progress, or a loader dead in one (attach "
		    "gives up after its bounded retries)", c, "EAGAIN");
		c = v(1, {});
		c.generation = 0;
		add("generation_0", "generation 0, seq 0, no segment: nothing published yet", c,
		    "EAGAIN");
		c = v(1, {base});
		c.generation = 0;
		c.seq = 2;
		add("generation_0_with_segment", "generation 0 with one segment entry: nothing "
		    "published", c, "EAGAIN");
		c = v(2, {});
		c.generation = 5;
		add("segment_count_0", "generation 5 without segments (a restarted loader found "
		    "its images gone): nothing published", c, "EAGAIN");
		c = v(1, {});
		c.generation = 8;
		c.flags = 1;
		add("retired", "flags RETIRED, no segment (a dropped cache)", c, "SHMKV_ESTALE");
		c = v(2, {base, lower});
		c.flags = 1;
		add("retired_with_segments", "flags RETIRED while segments are listed (a control "
		    "segment replaced by a new one)", c, "SHMKV_ESTALE");
		c = v(1, {base});
		c.count = 9;
		add("segment_count_9", "segment_count 9 (at most 8 entries)", c, "SHMKV_EPROTO");
		c = v(1, {base});
		c.count = 0xffffffffu;
		add("segment_count_max", "segment_count 2^32-1", c, "SHMKV_EPROTO");
	}

	// refused: the generation's roles (PROTOCOL.md, "Protocol 2")
	add("p2_top_without_lower", "protocol 2: base and top copies, no lower",
	    v(2, {base, top}), "SHMKV_EPROTO");
	add("p2_overlay_without_base", "protocol 2: a lower copy and no base copy", v(2, {lower}),
	    "SHMKV_EPROTO");
	add("p2_top_without_base", "protocol 2: lower and top copies, no base copy",
	    v(2, {lower, top}), "SHMKV_EPROTO");
	add("p2_top_flag_alone", "protocol 2: a copy with TOP and without OVERLAY",
	    v(2, {base, lower, seg("top.img", kTop)}), "SHMKV_EPROTO");
	add("p2_unknown_flag", "protocol 2: a base copy with flag bit 3 (8)",
	    v(2, {seg("base.img", 8)}), "SHMKV_EPROTO");
	add("p1_overlay_flag", "protocol 1: a copy with the OVERLAY flag (protocol 2's alone)",
	    v(1, {base, lower}), "SHMKV_EPROTO");
	add("p1_top_flag", "protocol 1: a copy with OVERLAY and TOP (protocol 2's alone)",
	    v(1, {base, seg("lower.img", kOverlay | kTop)}), "SHMKV_EPROTO");

	// refused: the images
	add("p2_base_is_delta", "protocol 2: the base copy names a delta image (delta.img)",
	    v(2, {seg("lower.img")}), "SHMKV_EPROTO");
	add("p1_base_is_delta", "protocol 1: the segment names a delta image (delta.img)",
	    v(1, {seg("lower.img")}), "SHMKV_EPROTO");
	add("p2_lower_is_plain", "protocol 2: the lower copy names a plain image (base.img)",
	    v(2, {base, seg("plain.img", kOverlay)}), "SHMKV_EPROTO");
	add("p2_top_is_plain", "protocol 2: the top copy names a plain image (base.img)",
	    v(2, {base, lower, seg("plain.img", kOverlay | kTop)}), "SHMKV_EPROTO");
	add("p2_lower_other_base", "protocol 2: the lower overlay is a delta of another image "
	    "(delta_base_checksum.img: base_checksum not the base's)",
	    v(2, {base, seg("other_base.img", kOverlay)}), "SHMKV_EBASE");
	add("p2_top_other_base", "protocol 2: the top overlay is a delta of another image "
	    "(delta_base_checksum.img)",
	    v(2, {base, lower, seg("other_base.img", kOverlay | kTop)}), "SHMKV_EBASE");
	add("segment_not_image", "the segment is not a shmkv image (bad_magic.img): the image "
	    "check's error", v(1, {seg("not_image.img")}), "SHMKV_EMAGIC");
	{
		Seg s = seg("base.img");
		s.size = s.map_size = 12288;
		add("size_past_file", "size and map_size 12288 for a file of 8192 bytes",
		    v(1, {s}), "SHMKV_ETRUNCATED");
		s = seg("base.img");
		s.map_size = 4096;
		add("map_size_below_size", "map_size 4096 below size 8192 (a mapping shorter than "
		    "the image)", v(1, {s}), "SHMKV_ETRUNCATED");
		s = seg("short.img");
		s.size = s.map_size = 4096;
		add("image_truncated", "size 4096, the file's, of an image whose header says more "
		    "(truncated.img): the image check's error", v(1, {s}), "SHMKV_ETRUNCATED");
	}
	// refused: a copy's page and mapping sizes (PROTOCOL.md, "Attach")
	{
		Seg s = seg("base.img");
		s.page_size = 3000;
		add("p1_page_size_3000", "protocol 1: page_size 3000 (not a power of two)",
		    v(1, {s}), "SHMKV_EPROTO");
		s = seg("lower.img", kOverlay);
		s.page_size = 0;
		add("p2_page_size_0", "protocol 2: the lower copy's page_size 0", v(2, {base, s}),
		    "SHMKV_EPROTO");
		s = seg("base.img");
		s.page_size = 2048;
		s.map_size = 8192;
		add("p2_page_size_2048", "protocol 2: page_size 2048 (below 4096; map_size a "
		    "multiple of it)", v(2, {s}), "SHMKV_EPROTO");
		s = seg("base.img");
		s.page_size = 1ull << 31;
		s.map_size = 1ull << 31;
		add("p1_page_size_2g", "protocol 1: page_size and map_size 2^31 (over 2^30) for an "
		    "8192-byte image", v(1, {s}), "SHMKV_EPROTO");
		s = seg("base.img");
		s.map_size = 10000;
		add("p1_map_size_unaligned", "protocol 1: map_size 10000, not a multiple of the "
		    "page size 4096", v(1, {s}), "SHMKV_EPROTO");
		s = seg("top.img", kOverlay | kTop);
		s.size = top_size;
		s.map_size = top_size + 1;
		add("p2_top_map_size_unaligned", "protocol 2: the top copy's map_size one byte "
		    "more than its size (a multiple of 4096)",
		    v(2, {base, lower, s}), "SHMKV_EPROTO");
	}
	{
		Seg d;
		d.raw_path = "@DIR@";
		add("segment_is_directory", "the segment's path names the harness's directory "
		    "(not a regular file)", v(1, {d}), "SHMKV_EPROTO");
	}
	{
		Seg s;
		s.raw_path = "/shmkv-vectors-no-such-directory/" + std::string(224 - 33, 'x');
		add("path_unterminated", "a path field of 224 bytes without a NUL (read as its "
		    "first 223 bytes, naming no file)", v(1, {s}), "ENOENT");
		add("segment_missing", "the segment names a file that does not exist",
		    v(1, {seg("missing.img")}), "ENOENT");
	}
	// Trust: segments of the control segment's owner, written by no one else
	{
		Case &c = add("segment_group_writable", "the base segment file has mode 0664 (Trust)",
			      v(1, {base}), "EPERM");
		c.modes["base.img"] = "0664";
		Case &d = add("overlay_group_writable", "protocol 2: the lower overlay's file has "
			      "mode 0664 (Trust)", v(2, {base, lower}), "EPERM");
		d.modes["lower.img"] = "0664";
		Case &e = add("top_other_writable", "protocol 2: the top overlay's file has mode "
			      "0646 (Trust)", v(2, {base, lower, top}), "EPERM");
		e.modes["top.img"] = "0646";
	}
	return out;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "--out") && strcmp(argv[1], "--check"))) {
		fprintf(stderr, "usage: gen_ctl_vectors { --out | --check } DIR (tests/vectors)\n");
		return 2;
	}
	const std::string vdir = argv[2], dir = vdir + "/ctl";
	std::map<std::string, std::string> files;
	const std::string top = build_top(vdir);
	files["top.img"] = top;
	const std::vector<Case> cs = cases(top.size());
	for (const Case &c : cs) {
		if (!files.emplace(c.name + ".ctl", ctl_bytes(c.ctl)).second)
			die("two cases named " + c.name);
		for (const Seg &s : c.ctl.segs)
			if (!s.file.empty() && s.file != "missing.img" && !kFrom.count(s.file))
				die(c.name + ": no source for " + s.file);
	}
	for (const auto &f : kFrom)
		if (f.second.compare(0, 4, "ctl/") && access((vdir + "/" + f.second).c_str(), R_OK))
			die(vdir + "/" + f.second + ": missing (the image vectors come first)");
	files["manifest.json"] = manifest(cs);
	if (!strcmp(argv[1], "--out")) {
		if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
			die("mkdir " + dir + ": " + strerror(errno));
		const std::string failed = vec::write_files(files, dir);
		if (!failed.empty())
			die("write " + failed);
		printf("gen_ctl_vectors: %zu files in %s\n", files.size(), dir.c_str());
		return 0;
	}
	int bad = vec::check_files(files, dir, "gen_ctl_vectors",
				  [](const std::string &n) { return n != "README.md"; });
	if (bad)
		fprintf(stderr, "gen_ctl_vectors: regenerate with `gen_ctl_vectors --out %s` if the "
				"change is meant (tests/vectors/README.md)\n", vdir.c_str());
	else
		printf("gen_ctl_vectors: %zu files in %s match\n", files.size(), dir.c_str());
	return bad;
}
