// gen_vectors: writes the shared conformance vectors (tests/vectors/README.md):
// images made by the C builder, damaged and forged copies of them, and
// manifest.json with the verdict and the contents every reader must find.
//
//   gen_vectors --out DIR     write the vectors into DIR
//   gen_vectors --check DIR   exit 1 naming every file of DIR that differs
//                             from what this build generates (or is missing,
//                             or is extra): builds are deterministic
//
// The verdicts are written here by hand from FORMAT.md §11–13, never taken
// from a reader: the reader's test (vectors_test) checks the reader against
// them.
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <dirent.h>
#include <unistd.h>

#include <shmkv.h>
#include <shmkv_build.h>
#include <xxhash.h>

namespace {

[[noreturn]] void die(const std::string &what)
{
	fprintf(stderr, "gen_vectors: %s\n", what.c_str());
	exit(2);
}

// ---- records ---------------------------------------------------------------

struct Rec {
	std::string key;
	unsigned type;
	std::string raw; // the value's bytes as the builder API takes them
};

std::string le64(uint64_t x)
{
	return std::string((const char *)&x, 8);
}

Rec str(std::string k, std::string v) { return {std::move(k), SHMKV_TYPE_STRING, std::move(v)}; }
Rec bytes(std::string k, std::string v) { return {std::move(k), SHMKV_TYPE_BYTES, std::move(v)}; }
Rec i64(std::string k, int64_t v) { return {std::move(k), SHMKV_TYPE_I64, le64((uint64_t)v)}; }
Rec boolean(std::string k, bool v) { return {std::move(k), SHMKV_TYPE_BOOL, std::string(1, v ? 1 : 0)}; }
Rec f64(std::string k, double v)
{
	uint64_t u;
	memcpy(&u, &v, 8);
	return {std::move(k), SHMKV_TYPE_F64, le64(u)};
}
template <class T> Rec list(std::string k, unsigned type, const std::vector<T> &v)
{
	return {std::move(k), type, std::string((const char *)v.data(), v.size() * sizeof(T))};
}
Rec strlist(std::string k, const std::vector<std::string> &items)
{
	std::string out;
	uint32_t n = (uint32_t)items.size(), end = 0;
	out.append((const char *)&n, 4);
	out.append((const char *)&end, 4);
	std::string data;
	for (const std::string &s : items) {
		data += s;
		data += '\0';
		end = (uint32_t)data.size();
		out.append((const char *)&end, 4);
	}
	return {std::move(k), SHMKV_TYPE_STRLIST, out + data};
}

struct Opts {
	uint64_t buckets = 0;
	double load_factor = 0;
	unsigned hash_bits = 64;
	bool dedup = true;
	const char *name = "vectors";
};

// Builds recs with fixed options (seed, creation time, one thread), returns
// the image's bytes.
std::string build(const std::vector<Rec> &recs, const Opts &o, const std::string &tmpdir)
{
	shmkv_build_options bo;
	if (shmkv_build_options_init(&bo) != 0)
		die("build options");
	bo.created = 1700000000;
	bo.seed = 0x5eed;
	bo.fixed |= SHMKV_OPT_CREATED | SHMKV_OPT_SEED;
	bo.dedup = o.dedup;
	bo.hash_bits = o.hash_bits;
	snprintf(bo.name, sizeof bo.name, "%s", o.name);
	if (o.buckets) {
		bo.buckets = o.buckets;
		bo.fixed |= SHMKV_OPT_BUCKETS;
	}
	if (o.load_factor > 0)
		bo.load_factor = o.load_factor;
	shmkv_builder *b;
	int err = shmkv_builder_new(&bo, &b);
	if (err)
		die(std::string("builder: ") + shmkv_strerror(err));
	shmkv_builder_set_threads(b, 1);
	for (const Rec &r : recs)
		if (shmkv_builder_add(b, r.key.data(), r.key.size(), r.type, r.raw.data(),
				      r.raw.size()) != 0)
			die(std::string("add: ") + shmkv_builder_error(b));
	std::string path = tmpdir + "/build.img";
	if (shmkv_builder_finish(b, path.c_str(), nullptr) != 0)
		die(std::string("finish: ") + shmkv_builder_error(b));
	shmkv_builder_free(b);
	FILE *f = fopen(path.c_str(), "rb");
	if (!f)
		die("read back " + path);
	std::string img;
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		img.append(buf, n);
	fclose(f);
	unlink(path.c_str());
	return img;
}

// ---- forging ---------------------------------------------------------------

shmkv_image_header header_of(const std::string &img)
{
	shmkv_image_header h;
	memcpy(&h, img.data(), sizeof h);
	return h;
}

// Every section checksum, then the header's, recomputed: what a forger does,
// so that the structural checks, not the checksums, must catch the damage.
void reseal(std::string &img)
{
	shmkv_image_header h = header_of(img);
	for (unsigned i = 0; i < h.section_count && i < SHMKV_MAX_SECTIONS; i++) {
		shmkv_section_desc &s = h.sections[i];
		if (s.offset <= img.size() && s.size <= img.size() - s.offset)
			s.checksum = XXH3_64bits(img.data() + s.offset, (size_t)s.size);
	}
	h.header_checksum = XXH3_64bits(&h, offsetof(shmkv_image_header, header_checksum));
	memcpy(&img[0], &h, sizeof h);
}

template <class T> void put_at(std::string &img, uint64_t off, T x)
{
	if (off + sizeof x > img.size())
		die("forge outside the image");
	memcpy(&img[off], &x, sizeof x);
}

// Where key lives in an intact image: its entry's offset and its slot's.
struct Where {
	uint64_t entry, slot, home_bucket;
};

Where where(const std::string &img, const std::string &key)
{
	shmkv db;
	char why[256];
	if (shmkv_bind_mem(&db, img.data(), img.size(), 0, why, sizeof why) != 0)
		die(std::string("bind: ") + why);
	Where w{};
	if (shmkv_find_entry(&db, key.data(), key.size(), &w.entry) != 0)
		die("no key " + key);
	shmkv_image_header h = header_of(img);
	uint64_t hash = shmkv_key_hash(h.hash_seed, h.hash_bits, key.data(), key.size());
	w.home_bucket = shmkv_home_bucket(hash, h.bucket_count);
	for (uint64_t b = 0; b < h.bucket_count; b++)
		for (unsigned j = 0; j < SHMKV_BUCKET_SLOTS; j++) {
			uint64_t off = h.sections[0].offset + b * SHMKV_BUCKET_BYTES + 8 * j, s;
			memcpy(&s, img.data() + off, 8);
			if (s && shmkv_slot_entry_offset(s) == w.entry)
				w.slot = off;
		}
	if (!w.slot)
		die("no slot for " + key);
	return w;
}

// ---- the manifest ----------------------------------------------------------

std::string hex(const std::string &s)
{
	static const char d[] = "0123456789abcdef";
	std::string out;
	for (unsigned char c : s) {
		out += d[c >> 4];
		out += d[c & 15];
	}
	return out;
}

std::string jstr(const std::string &s)
{
	std::string out = "\"";
	for (unsigned char c : s) {
		if (c == '"' || c == '\\') {
			out += '\\';
			out += (char)c;
		} else if (c < 0x20) {
			char buf[8];
			snprintf(buf, sizeof buf, "\\u%04x", c);
			out += buf;
		} else {
			out += (char)c;
		}
	}
	return out + "\"";
}

// A number with a '.' or an exponent, so that every JSON parser reads a float
// (and -0.0 keeps its sign).
std::string num(double d, int digits)
{
	char buf[64];
	snprintf(buf, sizeof buf, "%.*g", digits, d);
	std::string s = buf;
	if (s.find_first_of(".e") == std::string::npos)
		s += ".0";
	return s;
}

// The typed value of a record, as the manifest spells it (README.md).
std::string typed(const Rec &r)
{
	const std::string &v = r.raw;
	switch (r.type) {
	case SHMKV_TYPE_BYTES: return jstr(hex(v));
	case SHMKV_TYPE_STRING: return jstr(v);
	case SHMKV_TYPE_BOOL: return v[0] ? "true" : "false";
	case SHMKV_TYPE_I64: {
		int64_t x;
		memcpy(&x, v.data(), 8);
		return jstr(std::to_string(x));
	}
	case SHMKV_TYPE_F64: {
		double x;
		memcpy(&x, v.data(), 8);
		return num(x, 17);
	}
	case SHMKV_TYPE_F32LIST:
	case SHMKV_TYPE_F64LIST:
	case SHMKV_TYPE_I64LIST: {
		size_t es = r.type == SHMKV_TYPE_F32LIST ? 4 : 8;
		std::string out = "[";
		for (size_t i = 0; i < v.size() / es; i++) {
			if (i)
				out += ", ";
			if (r.type == SHMKV_TYPE_F32LIST) {
				float x;
				memcpy(&x, v.data() + 4 * i, 4);
				out += num(x, 9);
			} else if (r.type == SHMKV_TYPE_F64LIST) {
				double x;
				memcpy(&x, v.data() + 8 * i, 8);
				out += num(x, 17);
			} else {
				int64_t x;
				memcpy(&x, v.data() + 8 * i, 8);
				out += jstr(std::to_string(x));
			}
		}
		return out + "]";
	}
	default: { // strlist
		uint32_t n;
		memcpy(&n, v.data(), 4);
		const char *data = v.data() + 4 * ((size_t)n + 2);
		std::string out = "[";
		for (uint32_t i = 0; i < n; i++) {
			uint32_t s, e;
			memcpy(&s, v.data() + 4 + 4 * (size_t)i, 4);
			memcpy(&e, v.data() + 8 + 4 * (size_t)i, 4);
			out += (i ? ", " : "") + jstr(std::string(data + s, e - s - 1));
		}
		return out + "]";
	}
	}
}

size_t count_of(const Rec &r)
{
	const shmkv_type_desc *t = shmkv_type_desc_of(r.type);
	switch (t->shape) {
	case SHMKV_SHAPE_TEXT: return r.raw.size();
	case SHMKV_SHAPE_FIXED: return 1;
	case SHMKV_SHAPE_ARRAY: return r.raw.size() >> t->elem_shift;
	default: {
		uint32_t n;
		memcpy(&n, r.raw.data(), 4);
		return n;
	}
	}
}

struct Get {
	std::string key;
	const char *result; // "OK" or an error name
};

struct Vector {
	std::string name, about;
	std::string img;
	const char *open = "OK", *verify = "OK";
	bool contents = false;       // entries: the image's complete contents
	std::vector<Rec> entries;    // in image order
	std::vector<bool> shared;
	std::vector<Get> gets;       // lookups and their results
};

// The contents of an accepted image in image order (iteration), with each
// entry's shared bit, read through the public format functions.
void fill_contents(Vector &v, const std::vector<Rec> &recs)
{
	std::map<std::string, const Rec *> by_key;
	for (const Rec &r : recs)
		by_key[r.key] = &r;
	shmkv db;
	char why[256];
	if (shmkv_bind_mem(&db, v.img.data(), v.img.size(), 0, why, sizeof why) != 0)
		die(v.name + ": " + why);
	shmkv_iter it;
	shmkv_iter_init(&db, &it);
	const void *k;
	size_t kl;
	shmkv_value val;
	while (shmkv_iter_next(&it, &k, &kl, &val) == 0) {
		auto f = by_key.find(std::string((const char *)k, kl));
		if (f == by_key.end())
			die(v.name + ": the image holds a key that was not added");
		v.entries.push_back(*f->second);
		v.shared.push_back(val.shared != 0);
	}
	if (v.entries.size() != recs.size())
		die(v.name + ": the image lost keys");
	v.contents = true;
}

std::string manifest(const std::vector<Vector> &vs)
{
	std::string m = "{\n  \"format\": \"shmkv-conformance-vectors\",\n  \"manifest_version\": 1,\n"
			"  \"image_format_version\": 1,\n  \"vectors\": [\n";
	for (size_t i = 0; i < vs.size(); i++) {
		const Vector &v = vs[i];
		m += "    {\n      \"name\": " + jstr(v.name) + ",\n      \"file\": " +
		     jstr(v.name + ".img") + ",\n      \"about\": " + jstr(v.about) +
		     ",\n      \"open\": " + jstr(v.open) + ",\n      \"verify\": " + jstr(v.verify);
		if (v.contents) {
			m += ",\n      \"entries\": [";
			for (size_t j = 0; j < v.entries.size(); j++) {
				const Rec &r = v.entries[j];
				m += std::string(j ? "," : "") + "\n        {\"key_hex\": " + jstr(hex(r.key)) +
				     ", \"type\": " + jstr(shmkv_type_name(r.type)) +
				     ", \"shared\": " + (v.shared[j] ? "true" : "false") +
				     ", \"count\": " + std::to_string(count_of(r)) +
				     ", \"raw_hex\": " + jstr(hex(r.raw)) + ", \"value\": " + typed(r) + "}";
			}
			m += "\n      ]";
		}
		if (!v.gets.empty()) {
			m += ",\n      \"gets\": [";
			for (size_t j = 0; j < v.gets.size(); j++)
				m += std::string(j ? "," : "") + "\n        {\"key_hex\": " +
				     jstr(hex(v.gets[j].key)) + ", \"result\": " + jstr(v.gets[j].result) + "}";
			m += "\n      ]";
		}
		m += "\n    }" + std::string(i + 1 < vs.size() ? "," : "") + "\n";
	}
	return m + "  ]\n}\n";
}

// ---- the vectors -----------------------------------------------------------

std::vector<Rec> every_type()
{
	return {
		str("string", "hello, world"),
		str("string/empty", ""),
		str("string/utf8", "gr\xc3\xbc\xc3\x9f dich \xe2\x82\xac \xf0\x9f\x98\x80"),
		str("string/nul inside", std::string("a\0b", 3)),
		bytes("bytes", std::string("\x00\x01\x02\xfe\xff", 5)),
		bytes("bytes/empty", ""),
		i64("i64", 42),
		i64("i64/min", INT64_MIN),
		i64("i64/max", INT64_MAX),
		boolean("bool/true", true),
		boolean("bool/false", false),
		f64("f64", 3.25),
		f64("f64/negative zero", -0.0),
		f64("f64/tiny", 4.9406564584124654e-324),
		f64("f64/max", 1.7976931348623157e308),
		list<float>("f32list", SHMKV_TYPE_F32LIST, {1.5f, -2.0f, 0.1f}),
		list<float>("f32list/empty", SHMKV_TYPE_F32LIST, {}),
		list<double>("f64list", SHMKV_TYPE_F64LIST, {1e-300, 0.1, -7.0}),
		list<double>("f64list/empty", SHMKV_TYPE_F64LIST, {}),
		list<int64_t>("i64list", SHMKV_TYPE_I64LIST, {INT64_MIN, -1, 0, 1, INT64_MAX}),
		list<int64_t>("i64list/empty", SHMKV_TYPE_I64LIST, {}),
		strlist("strlist", {"a", "bc", "d\xc3\xa9" "f"}),
		strlist("strlist/empty", {}),
		strlist("strlist/empty strings", {"", "", "x", ""}),
		str("", "the empty key"),
	};
}

// A small image that the forged vectors damage, one field each.
std::vector<Rec> base_recs()
{
	return {
		str("s", "hello"),
		bytes("v", "raw"),
		i64("i", -5),
		boolean("b", true),
		f64("f", 0.5),
		list<float>("fl", SHMKV_TYPE_F32LIST, {1, 2, 3}),
		list<int64_t>("il", SHMKV_TYPE_I64LIST, {7, 8}),
		strlist("l", {"a", "bc"}),
		str("sh1", "a value long enough to be shared by two keys"),
		str("sh2", "a value long enough to be shared by two keys"),
	};
}

std::vector<Vector> make_all(const std::string &tmp)
{
	std::vector<Vector> out;
	auto accepted = [&](const std::string &name, const std::string &about,
			    const std::vector<Rec> &recs, const Opts &o) {
		Vector v;
		v.name = name;
		v.about = about;
		v.img = build(recs, o, tmp);
		fill_contents(v, recs);
		v.gets.push_back({std::string("no such key\x01", 12), "SHMKV_ENOTFOUND"});
		out.push_back(v);
	};
	accepted("empty", "no entries: every lookup misses", {}, Opts());
	accepted("types", "every value type, empty values, edge numbers, the empty key", every_type(),
		 Opts());
	{
		std::vector<Rec> r;
		for (size_t len : {1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 255, 256, 4096, 65535}) {
			std::string k(len, 'k');
			for (size_t i = 0; i < len; i++)
				k[i] = (char)('a' + (i * 7 + len) % 26);
			r.push_back(str(k, "key of " + std::to_string(len) + " bytes"));
		}
		accepted("long_keys", "keys of 1 to 65535 bytes (the limit)", r, Opts());
	}
	{
		std::vector<Rec> r;
		for (int i = 0; i < 300; i++)
			r.push_back(str("key_" + std::to_string(i), "val_" + std::to_string(i)));
		Opts o;
		o.buckets = 40; // 320 slots for 300 keys: many buckets overflow
		accepted("displaced", "300 keys in 40 buckets: many displaced from their home bucket",
			 r, o);
		Opts c;
		c.hash_bits = 6;
		std::vector<Rec> few(r.begin(), r.begin() + 100);
		accepted("hash_bits_6", "hash_bits 6 (test images): 100 keys on 64 hashes, so tags "
			 "collide and keys share a hash", few, c);
	}
	{
		std::vector<Rec> r;
		std::string long_s(200, 's');
		for (int i = 0; i < 6; i++) {
			r.push_back(str("str_" + std::to_string(i), long_s));
			r.push_back(list<double>("f64l_" + std::to_string(i), SHMKV_TYPE_F64LIST,
						 {1, 2, 3, 4, 5}));
			r.push_back(bytes("bytes_" + std::to_string(i), long_s)); // same bytes, other type
		}
		r.push_back(str("unshared", "short"));
		accepted("shared", "deduplicated values: three groups of six keys share one copy each "
			 "(equal bytes of two types stay apart)", r, Opts());
	}

	// ---- damaged and forged: each one field of the base image ----
	const std::vector<Rec> base = base_recs();
	const std::string intact = build(base, Opts(), tmp);
	const shmkv_image_header h = header_of(intact);
	auto forged = [&](const std::string &name, const std::string &about, const char *open,
			  const char *verify, std::string img, std::vector<Get> gets = {}) {
		Vector v;
		v.name = name;
		v.about = about;
		v.open = open;
		v.verify = verify;
		v.img = std::move(img);
		v.gets = std::move(gets);
		out.push_back(v);
	};
	auto with = [&](auto fn, bool seal = true) {
		std::string img = intact;
		fn(img);
		if (seal)
			reseal(img);
		return img;
	};
	forged("base", "the intact image the forged vectors below change", "OK", "OK", intact,
	       {{"s", "OK"}, {"sh2", "OK"}, {"missing", "SHMKV_ENOTFOUND"}});
	out.back().contents = false;
	fill_contents(out.back(), base);

	forged("bad_magic", "magic SHMKVIMX", "SHMKV_EMAGIC", "-",
	       with([](std::string &i) { i[7] = 'X'; }, false));
	forged("version_3", "format_version 3, checksums recomputed: a reader of v1 (and v2) refuses it",
	       "SHMKV_EVERSION", "-", with([](std::string &i) { put_at<uint32_t>(i, 8, 3); }));
	forged("layout_hash", "another layout hash, checksums recomputed", "SHMKV_ELAYOUT", "-",
	       with([](std::string &i) { put_at<uint64_t>(i, 16, 0x0123456789abcdefULL); }));
	forged("truncated", "the file cut to one page less than file_size", "SHMKV_ETRUNCATED", "-",
	       intact.substr(0, intact.size() - 4096));
	forged("header_checksum", "one byte of the name changed, checksums not recomputed",
	       "SHMKV_ECHECKSUM", "-", with([](std::string &i) { i[130] ^= 1; }, false));
	{
		Where w = where(intact, "s");
		forged("entries_checksum", "one value byte changed, checksums not recomputed",
		       "SHMKV_ECHECKSUM", "-",
		       with([&](std::string &i) { i[w.entry + 10] ^= 1; }, false));
		forged("unknown_header_flag", "header flag 0x2 (v1 knows 0x1)", "SHMKV_ECORRUPT", "-",
		       with([&](std::string &i) { put_at<uint64_t>(i, 24, h.flags | 2); }));
		forged("max_probe_past_buckets", "max_probe equal to bucket_count", "SHMKV_ECORRUPT",
		       "-", with([&](std::string &i) { put_at<uint32_t>(i, 72, (uint32_t)h.bucket_count); }));
		forged("section_past_end", "the values section's size runs past the file",
		       "SHMKV_ECORRUPT", "-", with([&](std::string &i) {
			       put_at<uint64_t>(i, 192 + 2 * 32 + 16, h.file_size);
		       }));
		forged("unknown_type", "entry of key s has type 10 (v1 knows 1..9)", "OK",
		       "SHMKV_ECORRUPT", with([&](std::string &i) { i[w.entry] = 10; }),
		       {{"s", "SHMKV_ECORRUPT"}, {"i", "OK"}});
		forged("unknown_entry_flag", "entry of key s has flag 0x2", "OK", "SHMKV_ECORRUPT",
		       with([&](std::string &i) { i[w.entry + 1] = 2; }),
		       {{"s", "SHMKV_ECORRUPT"}, {"i", "OK"}});
		forged("string_without_nul", "the NUL after string s is 'x'", "OK", "SHMKV_ECORRUPT",
		       with([&](std::string &i) { i[w.entry + 8 + 1 + 5] = 'x'; }),
		       {{"s", "SHMKV_ECORRUPT"}, {"i", "OK"}});
		forged("value_past_section", "value_len of s runs past the entries section", "OK",
		       "SHMKV_ECORRUPT", with([&](std::string &i) {
			       put_at<uint32_t>(i, w.entry + 4, 0x7fffffff);
		       }),
		       {{"s", "SHMKV_ECORRUPT"}});
		forged("slot_past_entries", "the slot of s points past the entries section", "OK",
		       "SHMKV_ECORRUPT", with([&](std::string &i) {
			       uint64_t s;
			       memcpy(&s, i.data() + w.slot, 8);
			       s = (s & ~SHMKV_SLOT_OFF_MASK) | ((h.file_size >> 3) & SHMKV_SLOT_OFF_MASK);
			       put_at<uint64_t>(i, w.slot, s);
		       }),
		       {{"s", "SHMKV_ECORRUPT"}});
		forged("slot_into_index", "the slot of s points into the index section", "OK",
		       "SHMKV_ECORRUPT", with([&](std::string &i) {
			       uint64_t s;
			       memcpy(&s, i.data() + w.slot, 8);
			       s = (s & ~SHMKV_SLOT_OFF_MASK) | (h.sections[0].offset >> 3);
			       put_at<uint64_t>(i, w.slot, s);
		       }),
		       {{"s", "SHMKV_ECORRUPT"}});
		forged("key_len_past_section", "key_len of s 65535: its key runs past the section",
		       "OK", "SHMKV_ECORRUPT",
		       with([&](std::string &i) { put_at<uint16_t>(i, w.entry + 2, 65535); }),
		       {{"s", "SHMKV_ENOTFOUND"}, {"i", "OK"}});
		forged("entry_count_mismatch", "entry_count one more than the index holds", "OK",
		       "SHMKV_ECORRUPT",
		       with([&](std::string &i) { put_at<uint64_t>(i, 40, h.entry_count + 1); }),
		       {{"s", "OK"}});
		forged("trailing_padding", "a non-zero byte in the padding after the last section "
		       "(FORMAT.md §12 check 11)", "SHMKV_ECORRUPT", "-",
		       with([&](std::string &i) { i[i.size() - 1] = 1; }));
	}
	{
		Where w = where(intact, "b");
		forged("bool_byte_2", "bool b stored as byte 2", "OK", "SHMKV_ECORRUPT",
		       with([&](std::string &i) { i[w.entry + 8 + 1] = 2; }), {{"b", "SHMKV_ECORRUPT"}});
	}
	{
		Where w = where(intact, "i");
		forged("i64_length_4", "i64 i with value_len 4", "OK", "SHMKV_ECORRUPT",
		       with([&](std::string &i) { put_at<uint32_t>(i, w.entry + 4, 4); }),
		       {{"i", "SHMKV_ECORRUPT"}});
	}
	{
		Where w = where(intact, "fl");
		forged("f32list_length_6", "f32list fl with value_len 6", "OK", "SHMKV_ECORRUPT",
		       with([&](std::string &i) { put_at<uint32_t>(i, w.entry + 4, 6); }),
		       {{"fl", "SHMKV_ECORRUPT"}});
	}
	{
		Where w = where(intact, "l");
		uint64_t vpos = w.entry + 16; // header, key "l", 8-aligned
		forged("strlist_count_too_big", "strlist l claims 1000 strings", "OK", "SHMKV_ECORRUPT",
		       with([&](std::string &i) { put_at<uint32_t>(i, vpos, 1000); }),
		       {{"l", "SHMKV_ECORRUPT"}});
		forged("strlist_bad_end", "strlist l's second end before its first (a lookup checks "
		       "the count only: the get succeeds, the string is refused when read)", "OK",
		       "SHMKV_ECORRUPT", with([&](std::string &i) { put_at<uint32_t>(i, vpos + 8, 0); }),
		       {{"l", "OK"}});
	}
	{
		Where w = where(intact, "sh1");
		uint64_t ref = w.entry + 16; // header, key "sh1", 8-aligned
		forged("shared_ref_misaligned", "sh1's shared-value reference off by 4", "OK",
		       "SHMKV_ECORRUPT", with([&](std::string &i) {
			       uint64_t r;
			       memcpy(&r, i.data() + ref, 8);
			       put_at<uint64_t>(i, ref, r + 4);
		       }),
		       {{"sh1", "SHMKV_ECORRUPT"}, {"sh2", "OK"}});
		forged("shared_ref_outside", "sh1's shared-value reference into the entries section",
		       "OK", "SHMKV_ECORRUPT",
		       with([&](std::string &i) { put_at<uint64_t>(i, ref, h.sections[1].offset); }),
		       {{"sh1", "SHMKV_ECORRUPT"}, {"sh2", "OK"}});
	}
	{
		Where w = where(intact, "s");
		forged("invalid_utf8_string", "string s holds byte 0xff (verify refuses it; a lookup "
		       "returns the bytes)", "OK", "SHMKV_ECORRUPT",
		       with([&](std::string &i) { i[w.entry + 8 + 1] = (char)0xff; }), {{"s", "OK"}});
	}
	return out;
}

// ---- files -----------------------------------------------------------------

std::map<std::string, std::string> files_of(const std::vector<Vector> &vs)
{
	std::map<std::string, std::string> f;
	for (const Vector &v : vs)
		f[v.name + ".img"] = v.img;
	f["manifest.json"] = manifest(vs);
	return f;
}

bool read_whole(const std::string &path, std::string &out)
{
	FILE *f = fopen(path.c_str(), "rb");
	if (!f)
		return false;
	out.clear();
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		out.append(buf, n);
	fclose(f);
	return true;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "--out") && strcmp(argv[1], "--check"))) {
		fprintf(stderr, "usage: gen_vectors { --out | --check } DIR\n");
		return 2;
	}
	const std::string dir = argv[2];
	char tmpl[] = "/tmp/gen_vectors.XXXXXX";
	if (!mkdtemp(tmpl))
		die(std::string("mkdtemp: ") + strerror(errno));
	std::map<std::string, std::string> files = files_of(make_all(tmpl));
	rmdir(tmpl);
	if (!strcmp(argv[1], "--out")) {
		for (const auto &f : files) {
			std::string path = dir + "/" + f.first;
			FILE *o = fopen(path.c_str(), "wb");
			if (!o || fwrite(f.second.data(), 1, f.second.size(), o) != f.second.size() ||
			    fclose(o) != 0)
				die("write " + path);
		}
		printf("gen_vectors: %zu files in %s\n", files.size(), dir.c_str());
		return 0;
	}
	int bad = 0;
	for (const auto &f : files) {
		std::string have;
		if (!read_whole(dir + "/" + f.first, have)) {
			fprintf(stderr, "gen_vectors: %s/%s is missing\n", dir.c_str(), f.first.c_str());
			bad = 1;
		} else if (have != f.second) {
			fprintf(stderr, "gen_vectors: %s/%s differs from what this build generates\n",
				dir.c_str(), f.first.c_str());
			bad = 1;
		}
	}
	if (DIR *d = opendir(dir.c_str())) {
		while (struct dirent *e = readdir(d)) {
			std::string n = e->d_name;
			bool ours = n.size() > 4 && (n.compare(n.size() - 4, 4, ".img") == 0);
			if ((ours || n == "manifest.json") && !files.count(n)) {
				fprintf(stderr, "gen_vectors: %s/%s is not generated any more\n",
					dir.c_str(), n.c_str());
				bad = 1;
			}
		}
		closedir(d);
	}
	if (bad)
		fprintf(stderr, "gen_vectors: regenerate with `gen_vectors --out %s` if the change is "
				"meant (tests/vectors/README.md)\n", dir.c_str());
	else
		printf("gen_vectors: %zu files in %s match\n", files.size(), dir.c_str());
	return bad;
}
