// gen_vectors: writes the shared conformance vectors (tests/vectors/README.md):
// images made by the C builder, damaged and forged copies of them, and
// manifest.json with the verdict and the contents every reader must find.
//
//   gen_vectors --out DIR     write the vectors into DIR
//   gen_vectors --check DIR   exit 1 naming every file of DIR that differs
//                             from what this build generates (or is missing,
//                             or is extra): builds are deterministic
//
// The verdicts are written here by hand from FORMAT.md §11–13 and §19 (delta
// images), never taken from a reader: the reader's test (vectors_test)
// checks the reader against them.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <shmkv.h>

#include "vec_util.h"
#include <shmkv_build.h>
#include <xxhash.h>

namespace {

using vec::hex;
using vec::jstr;
using vec::read_whole;

[[noreturn]] void die(const std::string &what)
{
	fprintf(stderr, "gen_vectors: %s\n", what.c_str());
	exit(2);
}

// ---- records ---------------------------------------------------------------

struct Rec {
	std::string key;
	unsigned type;
	std::string raw;      // the value's bytes as the builder API takes them
	uint32_t expires = 0; // format 2: Unix seconds, 0 none
	bool tomb = false;    // a delta's tombstone (FORMAT.md §19.2): key alone
};

Rec tombstone(std::string k)
{
	Rec r{std::move(k), 0, ""};
	r.tomb = true;
	return r;
}

Rec expiring(Rec r, uint32_t t)
{
	r.expires = t;
	return r;
}

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

void write_file(const std::string &path, const std::string &bytes)
{
	FILE *f = fopen(path.c_str(), "wb");
	if (!f || fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || fclose(f) != 0)
		die("write " + path);
}

// Builds recs with fixed options (seed, creation time, one thread), returns
// the image's bytes. With base, a delta of that image (FORMAT.md §19; after:
// the delta it follows in its chain, if any), whose tombstones are the recs
// marked tomb.
std::string build(const std::vector<Rec> &recs, const Opts &o, const std::string &tmpdir,
		  const std::string *base = nullptr, const std::string *after = nullptr)
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
	if (base) {
		const std::string bp = tmpdir + "/base.img", ap = tmpdir + "/after.img";
		write_file(bp, *base);
		if (after)
			write_file(ap, *after);
		if (shmkv_builder_set_delta(b, bp.c_str(), after ? ap.c_str() : nullptr) != 0)
			die(std::string("set_delta: ") + shmkv_builder_error(b));
		unlink(bp.c_str());
		unlink(ap.c_str());
	}
	for (const Rec &r : recs)
		if (r.tomb ? shmkv_builder_remove(b, r.key.data(), r.key.size()) != 0
			   : shmkv_builder_set_expires(b, r.expires) != 0 ||
				     shmkv_builder_add(b, r.key.data(), r.key.size(), r.type,
						       r.raw.data(), r.raw.size()) != 0)
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

// ---- the manifest ----------------------------------------------------------

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

// The vectors use expiry times long past (1, 2001) and far ahead (2096,
// 2106): expired for any clock of this century, or not.
bool expired(const Rec &r)
{
	return r.expires && r.expires < 1700000000;
}

struct Vector {
	unsigned format = 2; // of the image: 1 only for the refused format 1 files
	std::string name, about;
	std::string img;
	const char *open = "OK", *verify = "OK";
	bool contents = false;       // entries: the image's complete contents
	std::vector<Rec> entries;    // in image order
	std::vector<bool> shared;
	std::vector<Rec> records;    // format 1: what the image holds (the upgrade test's input)
	std::vector<Get> gets;       // lookups and their results
	std::vector<std::vector<Get>> batches; // one batch call each, a result per key
	std::map<std::string, Rec> recs;       // key -> record, for the values of OK gets
	// a delta's base read through it (manifest "delta"): the base's file,
	// the verdict of reading it so, and (through) what it then holds
	std::string delta_base;
	const char *stack = nullptr;
	std::shared_ptr<Vector> through;
};

// The records of recs, by key (the values an OK get returns).
std::map<std::string, Rec> by_key(const std::vector<Rec> &recs)
{
	std::map<std::string, Rec> m;
	for (const Rec &r : recs)
		m[r.key] = r;
	return m;
}

// v's entries: the records of keyed in db's all-records iteration order,
// with each one's shared bit, read through the public format functions.
void fill_order(Vector &v, const shmkv *db, const std::map<std::string, const Rec *> &keyed,
		size_t want)
{
	shmkv_iter it;
	shmkv_iter_init_all(db, &it);
	const void *k;
	size_t kl;
	shmkv_value val;
	int err;
	while ((err = shmkv_iter_next(&it, &k, &kl, &val)) == 0) {
		auto f = keyed.find(std::string((const char *)k, kl));
		if (f == keyed.end())
			die(v.name + ": the image holds a key that was not added");
		if (f->second->tomb != (val.type == SHMKV_TYPE_TOMBSTONE))
			die(v.name + ": a tombstone where an upsert was added, or the reverse");
		v.entries.push_back(*f->second);
		v.shared.push_back(val.shared != 0);
	}
	if (err != SHMKV_EEND || v.entries.size() != want)
		die(v.name + ": the image lost keys");
	v.contents = true;
}

// The contents of an accepted image in image order (iteration), with each
// entry's shared bit, read through the public format functions.
void fill_contents(Vector &v, const std::vector<Rec> &recs)
{
	std::map<std::string, const Rec *> keyed;
	for (const Rec &r : recs)
		keyed[r.key] = &r;
	shmkv db;
	char why[256];
	if (shmkv_bind_mem(&db, v.img.data(), v.img.size(), 0, why, sizeof why) != 0)
		die(v.name + ": " + why);
	fill_order(v, &db, keyed, recs.size());
	v.recs = by_key(recs);
}

// The base of the delta v (base_img) read through it: every record in the
// all-records iteration's order, which must be the merged records of
// FORMAT.md §19 (the delta's upserts, expired ones too, and the base's
// records whose key the delta does not hold), written here from the records
// each was built from.
void fill_through(Vector &v, const std::string &base_img, const std::vector<Rec> &base_recs,
		  const std::vector<Rec> &delta_recs)
{
	std::map<std::string, Rec> merged = by_key(base_recs);
	for (const Rec &r : delta_recs)
		if (r.tomb)
			merged.erase(r.key);
		else
			merged[r.key] = r;
	std::map<std::string, const Rec *> keyed;
	for (const auto &m : merged)
		keyed[m.first] = &m.second;
	shmkv base, delta;
	char why[256];
	if (shmkv_bind_mem(&base, base_img.data(), base_img.size(), 0, why, sizeof why) != 0 ||
	    shmkv_bind_mem(&delta, v.img.data(), v.img.size(), 0, why, sizeof why) != 0)
		die(v.name + ": " + why);
	if (shmkv_delta_set(&base, &delta, why, sizeof why) != 0)
		die(v.name + ": " + why);
	v.through = std::make_shared<Vector>();
	fill_order(*v.through, &base, keyed, merged.size());
	v.through->recs = merged;
}

// One record as the manifest spells it (README.md, "entries").
std::string rec_json(const Rec &r, const bool *shared)
{
	if (r.tomb) // a delta's tombstone: its key alone (README.md)
		return "{\"key_hex\": " + jstr(hex(r.key)) + ", \"type\": \"tombstone\"}";
	std::string m = "{\"key_hex\": " + jstr(hex(r.key)) + ", \"type\": " +
			jstr(shmkv_type_name(r.type));
	if (shared)
		m += std::string(", \"shared\": ") + (*shared ? "true" : "false");
	m += ", \"count\": " + std::to_string(count_of(r)) + ", \"raw_hex\": " + jstr(hex(r.raw)) +
	     ", \"value\": " + typed(r);
	if (r.expires)
		m += ", \"expires\": " + std::to_string(r.expires) +
		     ", \"expired\": " + (expired(r) ? "true" : "false");
	return m + "}";
}

// A lookup and its result, with the value an OK get returns when the
// vector knows its record.
std::string get_json(const Vector &v, const Get &g)
{
	std::string m = "{\"key_hex\": " + jstr(hex(g.key)) + ", \"result\": " + jstr(g.result);
	auto r = v.recs.find(g.key);
	if (!strcmp(g.result, "OK") && r != v.recs.end() && !r->second.tomb)
		m += ", \"value\": " + typed(r->second);
	return m + "}";
}

// A vector's entries, gets and batches, each on lines indented by ind.
std::string body_json(const Vector &v, const std::string &ind)
{
	std::string m;
	if (v.contents) {
		m += ",\n" + ind + "\"entries\": [";
		for (size_t j = 0; j < v.entries.size(); j++) {
			bool sh = v.shared[j];
			m += std::string(j ? "," : "") + "\n" + ind + "  " + rec_json(v.entries[j], &sh);
		}
		m += "\n" + ind + "]";
	}
	if (!v.gets.empty()) {
		m += ",\n" + ind + "\"gets\": [";
		for (size_t j = 0; j < v.gets.size(); j++)
			m += std::string(j ? "," : "") + "\n" + ind + "  " + get_json(v, v.gets[j]);
		m += "\n" + ind + "]";
	}
	if (!v.batches.empty()) {
		m += ",\n" + ind + "\"batches\": [";
		for (size_t j = 0; j < v.batches.size(); j++) {
			std::string keys, results;
			for (size_t k = 0; k < v.batches[j].size(); k++) {
				keys += std::string(k ? ", " : "") + jstr(hex(v.batches[j][k].key));
				results += std::string(k ? ", " : "") + jstr(v.batches[j][k].result);
			}
			m += std::string(j ? "," : "") + "\n" + ind + "  {\"keys_hex\": [" + keys +
			     "], \"results\": [" + results + "]}";
		}
		m += "\n" + ind + "]";
	}
	return m;
}

std::string vector_json(const Vector &v)
{
	std::string m = "    {\n      \"name\": " + jstr(v.name) + ",\n      \"format\": " +
			std::to_string(v.format) + ",\n      \"file\": " +
			jstr((v.format == 1 ? "v1/" : "") + v.name + ".img") + ",\n      \"about\": " +
			jstr(v.about) + ",\n      \"open\": " + jstr(v.open) + ",\n      \"verify\": " +
			jstr(v.verify);
	if (!v.records.empty()) {
		m += ",\n      \"records\": [";
		for (size_t j = 0; j < v.records.size(); j++)
			m += std::string(j ? "," : "") + "\n        " + rec_json(v.records[j], nullptr);
		m += "\n      ]";
	}
	m += body_json(v, "      ");
	if (v.stack) {
		m += ",\n      \"delta\": {\n        \"base\": " + jstr(v.delta_base) +
		     ",\n        \"stack\": " + jstr(v.stack);
		if (v.through)
			m += body_json(*v.through, "        ");
		m += "\n      }";
	}
	return m + "\n    }";
}

std::string manifest(const std::vector<Vector> &vs)
{
	std::string m = "{\n  \"format\": \"shmkv-conformance-vectors\",\n  \"manifest_version\": 3,\n"
			"  \"image_format_version\": 2,\n  \"vectors\": [\n";
	for (size_t i = 0; i < vs.size(); i++)
		m += vector_json(vs[i]) + (i + 1 < vs.size() ? ",\n" : "\n");
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

// A record of an intact image, found by decoding every bucket.
struct Loc {
	uint64_t bucket = 0, base = 0; // its bucket, and that bucket's image offset
	unsigned n = 0, i = 0, off = 0; // the bucket's count, its index, its offset in the bucket
	uint16_t dir = 0; // its directory entry: (tag << 7 | off) & 0xffff
	uint16_t tag = 0; // its key's tag (§5), all 16 bits
	uint64_t home = 0;
	uint8_t kind = 0;
	uint64_t rec() const { return base + off; }
};

std::string rec_key(const std::string &img, uint64_t rec)
{
	uint8_t kind = (uint8_t)img[rec];
	if (kind & SHMKV_REC_OUT) {
		uint64_t u = 0;
		memcpy(&u, img.data() + rec + 1, 5);
		uint16_t kl;
		memcpy(&kl, img.data() + (u << 3) + 2, 2);
		return img.substr((u << 3) + 8, kl);
	}
	unsigned at = 3 + (kind & SHMKV_REC_EXPIRES ? 4 : 0);
	return img.substr(rec + at, (uint8_t)img[rec + 1]);
}

std::vector<Loc> records_of(const std::string &img)
{
	shmkv_image_header h = header_of(img);
	std::vector<Loc> out;
	for (uint64_t b = 0; b < h.bucket_count; b++) {
		Loc l;
		l.bucket = b;
		l.base = h.sections[0].offset + 128 * b;
		l.n = (uint8_t)img[l.base];
		for (l.i = 0; l.i < l.n; l.i++) {
			memcpy(&l.dir, img.data() + l.base + 8 + 2 * l.i, 2);
			l.off = l.dir & 0x7f;
			l.kind = (uint8_t)img[l.rec()];
			std::string k = rec_key(img, l.rec());
			uint64_t hv = shmkv_key_hash(h.hash_seed, h.hash_bits, k.data(), k.size());
			l.tag = (uint16_t)shmkv_key_tag(hv);
			l.home = shmkv_home_bucket(hv, h.bucket_count);
			out.push_back(l);
		}
	}
	return out;
}

Loc loc(const std::string &img, const std::string &key)
{
	for (const Loc &l : records_of(img))
		if (rec_key(img, l.rec()) == key)
			return l;
	die("no record of " + key);
}

// Keys of recs whose lookup reads only its home bucket, and that is not
// bucket c (D = 0 at home, not homed at c, found at home).
std::vector<std::string> keys_elsewhere(const std::string &img, uint64_t c)
{
	std::vector<std::string> out;
	for (const Loc &l : records_of(img))
		if (l.home != c && l.bucket == l.home &&
		    img[header_of(img).sections[0].offset + 128 * l.home + 1] == 0)
			out.push_back(rec_key(img, l.rec()));
	if (out.empty())
		die("no key away from bucket " + std::to_string(c));
	return out;
}

// The format 1 images kept as refusal cases (v1/, README.md), with the
// records each was built from, before format 1 was retired (options: the
// defaults of build() but for those given).
struct V1Fixture {
	const char *name, *about;
	std::vector<Rec> recs;
};

std::vector<V1Fixture> v1_fixtures()
{
	std::vector<V1Fixture> f;
	f.push_back({"empty", "no entries", {}});
	f.push_back({"types", "every value type, empty values, edge numbers, the empty key",
		     every_type()});
	std::vector<Rec> lk;
	for (size_t len : {1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 255, 256, 4096, 65535}) {
		std::string k(len, 'k');
		for (size_t i = 0; i < len; i++)
			k[i] = (char)('a' + (i * 7 + len) % 26);
		lk.push_back(str(k, "key of " + std::to_string(len) + " bytes"));
	}
	f.push_back({"long_keys", "keys of 1 to 65535 bytes", lk});
	std::vector<Rec> d;
	for (int i = 0; i < 300; i++)
		d.push_back(str("key_" + std::to_string(i), "val_" + std::to_string(i)));
	f.push_back({"displaced", "300 keys in 40 buckets (buckets 40)", d});
	f.push_back({"hash_bits_6", "100 keys with hash_bits 6 (test images)",
		     std::vector<Rec>(d.begin(), d.begin() + 100)});
	std::vector<Rec> sh;
	std::string long_s(200, 's');
	for (int i = 0; i < 6; i++) {
		sh.push_back(str("str_" + std::to_string(i), long_s));
		sh.push_back(list<double>("f64l_" + std::to_string(i), SHMKV_TYPE_F64LIST, {1, 2, 3, 4, 5}));
		sh.push_back(bytes("bytes_" + std::to_string(i), long_s));
	}
	sh.push_back(str("unshared", "short"));
	f.push_back({"shared", "deduplicated values", sh});
	f.push_back({"base", "the small image of every type", base_recs()});
	return f;
}

// The format 1 images of dir/v1/ as refusal vectors: every reader refuses
// them with SHMKV_EVERSION (FORMAT.md §15: format 1 is retired; shmctl
// image upgrade converts them). They are not generated (no builder writes
// format 1 any more): each must be there, intact, and of format 1.
void add_v1(const std::string &dir, std::vector<Vector> &out)
{
	for (const V1Fixture &f : v1_fixtures()) {
		Vector v;
		v.format = 1;
		v.name = f.name;
		v.about = std::string("format 1 (retired): ") + f.about;
		v.open = "SHMKV_EVERSION";
		v.verify = "-";
		v.records = f.recs;
		std::string path = dir + "/v1/" + f.name + ".img";
		FILE *in = fopen(path.c_str(), "rb");
		if (!in)
			die(path + ": " + strerror(errno));
		char buf[65536];
		size_t n;
		while ((n = fread(buf, 1, sizeof buf, in)) > 0)
			v.img.append(buf, n);
		fclose(in);
		shmkv_image_header h;
		if (v.img.size() < sizeof h || (memcpy(&h, v.img.data(), sizeof h), h.format_version != 1) ||
		    XXH3_64bits(v.img.data(), offsetof(shmkv_image_header, header_checksum)) !=
			    h.header_checksum)
			die(path + ": not an intact format 1 image");
		out.push_back(v);
	}
}

// ---- delta images (FORMAT.md §19) ------------------------------------------

// The key filter of §19.3, written from its formula: whether a key of hash
// h may be in a delta of filter words f.
uint64_t filter_word(uint64_t h, uint64_t words)
{
	return (uint64_t)(((unsigned __int128)h * words) >> 64);
}
uint64_t filter_mask(uint64_t h)
{
	return UINT64_C(1) << ((h >> 16) & 63) | UINT64_C(1) << ((h >> 22) & 63) |
	       UINT64_C(1) << ((h >> 28) & 63);
}
uint64_t key_hash(const std::string &k)
{
	return shmkv_key_hash(0x5eed, 64, k.data(), k.size()); // build()'s seed, 64 bits
}

// The filter a delta of these records has (the builder's words, §19.3).
std::vector<uint64_t> filter_of(const std::vector<Rec> &recs)
{
	std::vector<uint64_t> f(std::max<size_t>(1, (recs.size() + 3) / 4), 0);
	for (const Rec &r : recs) {
		uint64_t h = key_hash(r.key);
		f[filter_word(h, f.size())] |= filter_mask(h);
	}
	return f;
}

bool filter_maybe(const std::vector<uint64_t> &f, const std::string &k)
{
	uint64_t h = key_hash(k), m = filter_mask(h);
	return (f[filter_word(h, f.size())] & m) == m;
}

// The image's filter words, as its FILTER section holds them.
std::vector<uint64_t> filter_in(const std::string &img)
{
	const shmkv_section_desc &s = header_of(img).sections[3];
	std::vector<uint64_t> f(s.size / 8);
	memcpy(f.data(), img.data() + s.offset, s.size);
	return f;
}

std::string key_of_len(size_t len, char first)
{
	std::string k(len, first);
	for (size_t i = 1; i < len; i++)
		k[i] = (char)('a' + (i * 5 + len) % 26);
	return k;
}

void add_deltas(std::vector<Vector> &out, const std::string &tmp, const std::string &plain)
{
	Opts o;
	const std::string long_present = key_of_len(300, 'K'), long_absent = key_of_len(280, 'Z');
	std::vector<Rec> base = {
		str("a", "base a"),
		i64("b", 7),
		boolean("c", true),
		bytes("d", std::string(200, '\xd0')),
		str("gone", "removed by the delta"),
		str("", "the empty key"),
		str(long_present, "a key of 300 bytes"),
		expiring(str("expired", "long past"), 1000000000),
		expiring(str("live/exp", "live in the base"), 4000000000u),
		list<double>("kept", SHMKV_TYPE_F64LIST, {1.5, -2.0}),
		str("kept/out", std::string(150, 'k')),
	};
	const std::vector<Rec> delta = {
		i64("a", 1),                                        // another type
		str("b", "was an i64"),
		boolean("c", false),                                // another value
		bytes("d", std::string(300, '\xd1')),               // OUT over OUT
		str("new", "added"),
		str("new/out", std::string(180, 'n')),              // OUT, a new key
		strlist("new/list", {"x", "yz"}),
		expiring(str("new/expired", "never seen"), 1),      // expired upsert
		expiring(i64("new/live", 9), 0xFFFFFFFFu),          // live expiring upsert
		expiring(str("expired", "renewed"), 4000000000u),   // over an expired base key
		expiring(str("live/exp", "expired upsert"), 1000000000), // over a live one: absent
		tombstone("gone"),                                  // inline, of a present key
		tombstone(""),                                      // the empty key
		tombstone(long_present),                            // OUT, of a present key
		tombstone("never there"),                           // inline, of an absent key
		tombstone(long_absent),                             // OUT, of an absent key
	};
	// base keys the delta's filter rules out, and one it lets through
	// (a false "maybe": the delta is looked up, misses, the base answers)
	const std::vector<uint64_t> f = filter_of(delta);
	std::string ruled_out, maybe;
	for (int i = 0; i < 100000 && (ruled_out.empty() || maybe.empty()); i++) {
		std::string k = "probe/" + std::to_string(i);
		std::string &slot = filter_maybe(f, k) ? maybe : ruled_out;
		if (slot.empty())
			slot = k;
	}
	if (ruled_out.empty() || maybe.empty())
		die("delta: no base key its filter rules out, or none it lets through");
	base.push_back(str(ruled_out, "the delta's filter rules this key out"));
	base.push_back(str(maybe, "the delta's filter lets this key through"));

	const std::string base_img = build(base, o, tmp);
	const std::string delta_img = build(delta, o, tmp, &base_img);
	if (filter_in(delta_img) != f)
		die("delta: its filter is not §19.3's");
	for (const std::string &k : {long_present, long_absent})
		if (loc(delta_img, k).kind != (SHMKV_REC_OUT | SHMKV_REC_TOMB))
			die("delta: the tombstone of a long key is not OUT");
	if (loc(delta_img, "gone").kind != SHMKV_REC_TOMB || loc(delta_img, "").kind != SHMKV_REC_TOMB ||
	    !(loc(delta_img, "d").kind & SHMKV_REC_OUT))
		die("delta: inline tombstones, or an OUT upsert, are not where they should be");

	const std::string miss("no such key\x01", 12);
	auto add = [&](const std::string &name, const std::string &about, const std::string &img,
		       const std::vector<Rec> &recs, std::vector<Get> gets = {}) -> Vector & {
		Vector v;
		v.name = name;
		v.about = about;
		v.img = img;
		fill_contents(v, recs);
		v.gets = std::move(gets);
		v.gets.push_back({miss, "SHMKV_ENOTFOUND"});
		out.push_back(v);
		return out.back();
	};
	auto refused = [&](Vector &v, const std::string &base_file, const char *stack) {
		v.delta_base = base_file;
		v.stack = stack;
	};
	auto through = [&](Vector &v, const std::vector<Rec> &delta_recs, std::vector<Get> gets,
			   std::vector<std::vector<Get>> batches) {
		refused(v, "delta_base.img", "OK");
		fill_through(v, base_img, base, delta_recs);
		gets.push_back({miss, "SHMKV_ENOTFOUND"});
		v.through->gets = std::move(gets);
		v.through->batches = std::move(batches);
	};

	refused(add("delta_base", "the plain image the delta vectors change: strings, an OUT "
		    "value, the empty key, a key of 300 bytes (OUT), an expired and a live "
		    "expiring key, and two keys for the filter (probe/N); its delta field: "
		    "this plain image given as the delta of base.img is refused",
		    base_img, base, {{"a", "OK"}, {"expired", "SHMKV_ENOTFOUND"}, {long_present, "OK"}}),
		"base.img", "SHMKV_EBASE");

	const std::vector<Get> delta_gets = {
		{"a", "OK"}, {"new/out", "OK"}, {"gone", "SHMKV_ENOTFOUND"}, {"", "SHMKV_ENOTFOUND"},
		{long_present, "SHMKV_ENOTFOUND"}, {"new/expired", "SHMKV_ENOTFOUND"},
		{"live/exp", "SHMKV_ENOTFOUND"}, {"kept", "SHMKV_ENOTFOUND"}, {"new/live", "OK"}};
	Vector &dv = add("delta", "a delta of delta_base read alone (its upserts; a tombstone is "
			 "absent, and listed in entries as \"tombstone\") and delta_base read "
			 "through it: upserts of new keys and of base keys with another type or "
			 "value, inline and OUT; expiring upserts (one expired, one live, one "
			 "expired over a live base key: absent, one live over an expired one: "
			 "present); tombstones inline and OUT of present and absent keys and of the "
			 "empty key; " + ruled_out + " ruled out by its filter, " + maybe +
			 " let through and missed",
			 delta_img, delta, delta_gets);
	dv.batches = {{{"gone", "SHMKV_ENOTFOUND"}, {"a", "OK"}, {"kept", "SHMKV_ENOTFOUND"},
		       {"d", "OK"}}};
	through(dv, delta,
		{{"a", "OK"}, {"b", "OK"}, {"c", "OK"}, {"d", "OK"}, {"new/list", "OK"},
		 {"gone", "SHMKV_ENOTFOUND"}, {"", "SHMKV_ENOTFOUND"}, {long_present, "SHMKV_ENOTFOUND"},
		 {"never there", "SHMKV_ENOTFOUND"}, {long_absent, "SHMKV_ENOTFOUND"},
		 {"new/expired", "SHMKV_ENOTFOUND"}, {"live/exp", "SHMKV_ENOTFOUND"},
		 {"expired", "OK"}, {"new/live", "OK"}, {"kept", "OK"}, {"kept/out", "OK"},
		 {ruled_out, "OK"}, {maybe, "OK"}},
		{{{"a", "OK"}, {"gone", "SHMKV_ENOTFOUND"}, {"kept", "OK"}, {"live/exp", "SHMKV_ENOTFOUND"},
		  {"expired", "OK"}, {maybe, "OK"}, {long_present, "SHMKV_ENOTFOUND"}, {"new/out", "OK"}}});
	const Vector main = dv; // (dv is a reference into out, which grows)

	const std::string empty_img = build({}, o, tmp, &base_img);
	Vector &ev = add("delta_empty", "a delta of delta_base with no records: delta_base "
			 "reads through it unchanged", empty_img, {});
	through(ev, {}, {{"a", "OK"}, {"expired", "SHMKV_ENOTFOUND"}, {"gone", "OK"}}, {});

	const std::vector<Rec> second = {str("a", "second"), tombstone("c")};
	refused(add("delta_chain_2", "the delta after delta in its chain (prev: delta's "
		    "header_checksum, seq 2): a chain is merged before it is read, so reading "
		    "delta_base through it is refused",
		    build(second, o, tmp, &base_img, &delta_img), second,
		    {{"a", "OK"}, {"c", "SHMKV_ENOTFOUND"}}),
		"delta_base.img", "SHMKV_EBASE");
	const std::vector<Rec> one = {str("z", "z")};
	refused(add("delta_as_base", "a delta of delta_base, given the delta vector (a delta, "
		    "not an image) as its base: refused",
		    build(one, o, tmp, &base_img), one, {{"z", "OK"}}),
		"delta.img", "SHMKV_EBASE");

	// forged deltas: one field of delta (or of delta_empty) changed, every
	// checksum recomputed unless about says otherwise
	const shmkv_image_header dh = header_of(delta_img);
	auto with = [&](const std::string &from, auto fn, bool seal = true) {
		std::string img = from;
		fn(img);
		if (seal)
			reseal(img);
		return img;
	};
	auto forged = [&](const std::string &name, const std::string &about, const char *open,
			  const char *verify, std::string img, std::vector<Get> gets = {}) -> Vector & {
		Vector v;
		v.name = name;
		v.about = about;
		v.open = open;
		v.verify = verify;
		v.recs = main.recs;
		v.img = std::move(img);
		v.gets = std::move(gets);
		out.push_back(v);
		return out.back();
	};
	auto intact_forgery = [&](Vector &v) { // its records are delta's
		v.contents = true;
		v.entries = main.entries;
		v.shared = main.shared;
	};
	const uint64_t r0 = 448; // reserved[0]: base_checksum, then base_size, prev, seq
	Vector *fv = &forged("delta_base_checksum", "base_checksum one more than delta_base's "
			     "header checksum: a delta of another image, refused when delta_base "
			     "is read through it", "OK", "OK",
			     with(delta_img, [&](std::string &i) {
				     put_at<uint64_t>(i, r0, dh.reserved[0] + 1);
			     }), {{"a", "OK"}});
	intact_forgery(*fv);
	refused(*fv, "delta_base.img", "SHMKV_EBASE");
	fv = &forged("delta_base_size", "base_size one page more than delta_base's size: "
		     "refused when delta_base is read through it", "OK", "OK",
		     with(delta_img, [&](std::string &i) {
			     put_at<uint64_t>(i, r0 + 8, dh.reserved[1] + 4096);
		     }), {{"a", "OK"}});
	intact_forgery(*fv);
	refused(*fv, "delta_base.img", "SHMKV_EBASE");
	fv = &forged("delta_other_seed", "delta_empty with hash_seed changed (no record to "
		     "misplace): it hashes keys otherwise than delta_base, refused", "OK", "OK",
		     with(empty_img, [&](std::string &i) {
			     put_at<uint64_t>(i, 64, header_of(empty_img).hash_seed ^ 1);
		     }));
	fv->contents = true;
	refused(*fv, "delta_base.img", "SHMKV_EBASE");

	forged("delta_flag_clear", "the DELTA header flag clear under the delta layout hash",
	       "SHMKV_ECORRUPT", "-",
	       with(delta_img, [&](std::string &i) { put_at<uint64_t>(i, 24, dh.flags & ~UINT64_C(4)); }));
	forged("delta_section_count_3", "section_count 3 (a delta has 4: FILTER)", "SHMKV_ECORRUPT",
	       "-", with(delta_img, [&](std::string &i) { put_at<uint32_t>(i, 76, 3); }));
	forged("delta_reserved_4", "header reserved[4] 1 (reserved[4..6] are zero)",
	       "SHMKV_ECORRUPT", "-",
	       with(delta_img, [&](std::string &i) { put_at<uint64_t>(i, r0 + 32, 1); }));
	forged("delta_base_size_unaligned", "base_size one byte more than delta_base's (a "
	       "base's size is a multiple of 4096)", "SHMKV_ECORRUPT", "-",
	       with(delta_img, [&](std::string &i) { put_at<uint64_t>(i, r0 + 8, dh.reserved[1] + 1); }));
	forged("delta_seq_0", "seq 0 (a delta's place in its chain is at least 1)",
	       "SHMKV_ECORRUPT", "-",
	       with(delta_img, [&](std::string &i) { put_at<uint64_t>(i, r0 + 24, 0); }));
	forged("delta_filter_checksum", "a bit of the FILTER section flipped, checksums not "
	       "recomputed", "SHMKV_ECHECKSUM", "-",
	       with(delta_img, [&](std::string &i) { i[dh.sections[3].offset] ^= 1; }, false));
	{
		// an upsert of a base key with a filter bit no other key of delta sets
		std::string fk;
		uint64_t fw = 0, fbit = 0;
		for (const Rec &r : delta) {
			if (r.tomb || !fk.empty() || !std::count_if(base.begin(), base.end(),
								  [&](const Rec &b) { return b.key == r.key; }))
				continue;
			uint64_t h = key_hash(r.key), w = filter_word(h, f.size()), m = filter_mask(h);
			for (const Rec &q : delta) {
				uint64_t hq = key_hash(q.key);
				if (q.key != r.key && filter_word(hq, f.size()) == w)
					m &= ~filter_mask(hq);
			}
			if (m) {
				fk = r.key;
				fw = w;
				fbit = m & -m;
			}
		}
		if (fk.empty())
			die("delta: no upsert of a base key with a filter bit of its own");
		Vector &v = forged("delta_filter_bit_clear", "the filter bit only upsert " + fk +
				   " sets cleared: verify refuses it; read through, the filter rules " +
				   fk + " out and delta_base answers it", "OK", "SHMKV_ECORRUPT",
				   with(delta_img, [&](std::string &i) {
					   uint64_t off = dh.sections[3].offset + 8 * fw, x;
					   memcpy(&x, i.data() + off, 8);
					   put_at<uint64_t>(i, off, x & ~fbit);
				   }));
		v.delta_base = "delta_base.img";
		v.stack = "OK";
		v.through = std::make_shared<Vector>();
		v.through->recs = by_key(base);
		v.through->gets = {{fk, "OK"}, {"gone", "SHMKV_ENOTFOUND"}, {"new", "OK"}};
		v.through->recs["new"] = main.recs.at("new");
	}
	const Loc gone = loc(delta_img, "gone"), lp = loc(delta_img, long_present);
	uint64_t lpe = 0;
	memcpy(&lpe, delta_img.data() + lp.rec() + 1, 5);
	lpe <<= 3;
	// damaged tombstones: their lookup through the delta is refused (§19.4),
	// the base's record never answers for them
	auto damaged_through = [&](Vector &v, const std::string &key) {
		v.delta_base = "delta_base.img";
		v.stack = "OK";
		v.through = std::make_shared<Vector>();
		v.through->recs = by_key(base);
		v.through->recs["a"] = main.recs.at("a");
		v.through->gets = {{key, "SHMKV_ECORRUPT"}, {"a", "OK"}, {"kept", "OK"}};
		v.through->batches = {{{"a", "OK"}, {key, "SHMKV_ECORRUPT"}, {"kept", "OK"}}};
	};
	damaged_through(forged("delta_tomb_value_len", "the inline tombstone of gone with "
			       "value_len 1 (a tombstone has no value)", "OK", "SHMKV_ECORRUPT",
			       with(delta_img, [&](std::string &i) { i[gone.rec() + 2] = 1; }),
			       {{"gone", "SHMKV_ECORRUPT"}, {"a", "OK"}}),
			"gone");
	damaged_through(forged("delta_tomb_out_value_len", "the entry of the OUT tombstone of "
			       "the 300-byte key with value_len 8", "OK", "SHMKV_ECORRUPT",
			       with(delta_img, [&](std::string &i) { put_at<uint32_t>(i, lpe + 4, 8); }),
			       {{long_present, "SHMKV_ECORRUPT"}, {"a", "OK"}}),
			long_present);
	damaged_through(forged("delta_tomb_kind", "the tombstone of gone with kind 0x12 (TOMB "
			       "with type bits: a tombstone's kind is 0x10 or 0x90)", "OK",
			       "SHMKV_ECORRUPT",
			       with(delta_img, [&](std::string &i) { i[gone.rec()] = 0x12; }),
			       {{"gone", "SHMKV_ECORRUPT"}, {"a", "OK"}}),
			"gone");

	// plain images: TOMB and the delta's header words are a delta's alone
	const Loc s = loc(plain, "s"); // an inline string "hello" of key "s"
	forged("tomb_in_plain", "base's inline record of s made a well-formed tombstone "
	       "(kind 0x10, value_len 0, the value's bytes zeroed): a plain image holds no "
	       "tombstone", "OK", "SHMKV_ECORRUPT",
	       with(plain, [&](std::string &i) {
		       i[s.rec()] = 0x10;
		       i[s.rec() + 2] = 0;
		       memset(&i[s.rec() + 4], 0, 6);
	       }),
	       {{"s", "SHMKV_ECORRUPT"}}).recs.clear();
	forged("plain_reserved_0", "base with header reserved[0] 1 (a plain image's "
	       "reserved words are zero)", "SHMKV_ECORRUPT", "-",
	       with(plain, [&](std::string &i) { put_at<uint64_t>(i, r0, 1); }));
}

std::vector<Vector> make_all(const std::string &tmp, const std::string &dir)
{
	std::vector<Vector> out;
	Opts o2;
	auto accepted = [&](const std::string &name, const std::string &about,
			    const std::vector<Rec> &recs, const Opts &o, std::vector<Get> gets = {}) {
		Vector v;
		v.name = name;
		v.about = about;
		v.img = build(recs, o, tmp);
		fill_contents(v, recs);
		v.gets = std::move(gets);
		v.gets.push_back({std::string("no such key\x01", 12), "SHMKV_ENOTFOUND"});
		out.push_back(v);
		return v.img;
	};
	accepted("empty", "no entries: every lookup misses", {}, o2);
	{
		std::vector<Rec> r = every_type();
		for (unsigned k = 0; k < 8; k++) // values 8-aligned after keys of every length mod 8
			r.push_back(list<double>(std::string(k + 1, 'a'), SHMKV_TYPE_F64LIST, {1.0 * k}));
		r.push_back(str("string/long", std::string(300, 'x')));
		r.push_back(list<int64_t>("i64list/long", SHMKV_TYPE_I64LIST, {1, 2, 3, 4, 5, 6}));
		r.push_back(strlist("strlist/long", {"one", "two", "three", "four", "five", "six"}));
		std::string img = accepted("types", "every value type inline (empty values, edge "
			       "numbers, 8-aligned values after keys of every length mod 8, the empty "
			       "key) and OUT (values too long to inline)", r, o2);
		size_t inl = 0, outs = 0;
		for (const Loc &l : records_of(img))
			(l.kind & SHMKV_REC_OUT ? outs : inl)++;
		if (inl < 20 || outs < 3)
			die("types: " + std::to_string(inl) + " inline, " + std::to_string(outs) + " OUT");
	}
	{
		std::vector<Rec> r;
		for (size_t len : {1, 2, 7, 8, 9, 15, 16, 17, 40, 63, 64, 254, 255, 256, 4096, 65535}) {
			std::string k(len, 'k');
			for (size_t i = 0; i < len; i++)
				k[i] = (char)('a' + (i * 7 + len) % 26);
			r.push_back(str(k, std::to_string(len)));
		}
		accepted("long_keys", "keys of 1 to 65535 bytes; those past the inline "
			 "bound (and all over 255 bytes) are OUT records", r, o2);
	}
	std::string disp;
	{
		std::vector<Rec> r;
		for (int i = 0; i < 300; i++)
			r.push_back(str("key_" + std::to_string(i), "val_" + std::to_string(i)));
		Opts o = o2;
		o.load_factor = 0.97;
		disp = accepted("displaced", "300 keys at a fill of 0.97: many displaced "
				"from their home bucket (D and filter set there)", r, o);
		if (header_of(disp).max_probe < 2)
			die("displaced: max_probe " + std::to_string(header_of(disp).max_probe));
	}
	{
		std::vector<Rec> r;
		std::string long_s(200, 's');
		for (int i = 0; i < 6; i++) {
			r.push_back(str("str_" + std::to_string(i), long_s));
			r.push_back(list<double>("f64l_" + std::to_string(i), SHMKV_TYPE_F64LIST,
						 {1, 2, 3, 4, 5, 6, 7}));
			r.push_back(bytes("bytes_" + std::to_string(i), long_s)); // same bytes, other type
		}
		r.push_back(str("unshared", "short"));
		r.push_back(str("inline twin 1", "inline values are never shared"));
		r.push_back(str("inline twin 2", "inline values are never shared"));
		accepted("shared", "values shared by OUT records (three groups of six keys); "
			 "equal inline values are not shared", r, o2);
	}
	std::string expimg;
	{
		std::vector<Rec> r = {
			expiring(str("expired", "past"), 1000000000),          // 2001-09-09
			expiring(str("future", "far off"), 4000000000u),       // 2096-10-02
			expiring(str("expired/out", std::string(100, 'o')), 1),
			expiring(str("future/out", std::string(100, 'p')), 0xFFFFFFFFu),
			expiring(list<double>("future/aligned", SHMKV_TYPE_F64LIST, {2.5}), 4000000000u),
			str("never", "no expiry"),
		};
		expimg = accepted("expiry", "records that expire, inline and OUT: two in "
				  "the past (absent to a lookup, listed by iteration), three far in the "
				  "future, one without",
				  r, o2, {{"expired", "SHMKV_ENOTFOUND"}, {"expired/out", "SHMKV_ENOTFOUND"},
					  {"future", "OK"}, {"future/out", "OK"}, {"never", "OK"}});
		out.back().batches = {{{"expired", "SHMKV_ENOTFOUND"}, {"future", "OK"},
				       {"expired/out", "SHMKV_ENOTFOUND"}, {"never", "OK"},
				       {"future/out", "OK"}}};
	}
	const std::map<std::string, Rec> disp_map = out[3].recs, exp_map = out.back().recs;

	// ---- damaged and forged: each one field of base ----
	std::vector<Rec> base = base_recs();
	base.push_back(str("long", std::string(100, 'L')));
	const std::string shared_v(120, 'S'); // OUT, and shared: the shared-reference rules
	base.push_back(str("shl1", shared_v));
	base.push_back(str("shl2", shared_v));
	const std::map<std::string, Rec> base_map = by_key(base);
	const std::string intact = build(base, o2, tmp);
	const shmkv_image_header h = header_of(intact);
	auto forged = [&](const std::string &name, const std::string &about, const char *open,
			  const char *verify, std::string img, std::vector<Get> gets = {}) {
		Vector v;
		v.name = name;
		v.about = about;
		v.open = open;
		v.recs = base_map;
		v.verify = verify;
		v.img = std::move(img);
		v.gets = std::move(gets);
		out.push_back(v);
	};
	auto with = [&](const std::string &from, auto fn, bool seal = true) {
		std::string img = from;
		fn(img);
		if (seal)
			reseal(img);
		return img;
	};
	forged("base", "the intact image the forged vectors below change", "OK", "OK",
	       intact, {{"s", "OK"}, {"sh2", "OK"}, {"long", "OK"}, {"shl2", "OK"},
			{"missing", "SHMKV_ENOTFOUND"}});
	fill_contents(out.back(), base);
	out.back().batches = {{{"s", "OK"}, {"missing", "SHMKV_ENOTFOUND"}, {"long", "OK"},
			       {"l", "OK"}, {"shl1", "OK"}}};

	// the header and the sections (FORMAT.md §3, §4, §12)
	forged("bad_magic", "magic SHMKVIMX", "SHMKV_EMAGIC", "-",
	       with(intact, [](std::string &i) { i[7] = 'X'; }, false));
	forged("version_3", "format_version 3, checksums recomputed: a format this reader does not "
	       "read", "SHMKV_EVERSION", "-",
	       with(intact, [](std::string &i) { put_at<uint32_t>(i, 8, 3); }));
	forged("layout_hash", "another layout hash, checksums recomputed", "SHMKV_ELAYOUT", "-",
	       with(intact, [](std::string &i) { put_at<uint64_t>(i, 16, 0x0123456789abcdefULL); }));
	forged("header_checksum", "one byte of the name changed, checksums not recomputed",
	       "SHMKV_ECHECKSUM", "-", with(intact, [](std::string &i) { i[130] ^= 1; }, false));
	forged("max_probe_past_buckets", "max_probe equal to bucket_count", "SHMKV_ECORRUPT", "-",
	       with(intact, [&](std::string &i) { put_at<uint32_t>(i, 72, (uint32_t)h.bucket_count); }));
	forged("section_past_end", "the values section's size runs past the file", "SHMKV_ECORRUPT",
	       "-", with(intact, [&](std::string &i) { put_at<uint64_t>(i, 192 + 2 * 32 + 16, h.file_size); }));
	forged("trailing_padding", "a non-zero byte in the padding after the last section "
	       "(FORMAT.md §12 check 11)", "SHMKV_ECORRUPT", "-",
	       with(intact, [](std::string &i) { i[i.size() - 1] = 1; }));

	forged("preview_layout", "the layout hash of format 2's first preview (tags inside "
	       "records, 0xfba82e8976eb9578): refused, never misread", "SHMKV_ELAYOUT", "-",
	       with(intact, [](std::string &i) { put_at<uint64_t>(i, 16, 0xfba82e8976eb9578ULL); }));
	forged("unknown_header_flag", "header flag 0x4 (the format knows 0x1, 0x2)",
	       "SHMKV_ECORRUPT", "-",
	       with(intact, [&](std::string &i) { put_at<uint64_t>(i, 24, h.flags | 4); }));
	forged("bucket_slots_64", "bucket_slots 64 (it holds the bucket bytes, 128)",
	       "SHMKV_ECORRUPT", "-", with(intact, [](std::string &i) { put_at<uint32_t>(i, 56, 64); }));
	forged("entries_checksum", "one byte of an OUT entry changed, checksums not "
	       "recomputed", "SHMKV_ECHECKSUM", "-", with(intact, [&](std::string &i) {
		       i[h.sections[1].offset + 9] ^= 1;
	       }, false));
	forged("truncated", "the file cut to one page less than file_size",
	       "SHMKV_ETRUNCATED", "-", intact.substr(0, intact.size() - 4096));

	// the bucket rules (FORMAT.md §6)
	const Loc s = loc(intact, "s");
	const std::vector<std::string> away = keys_elsewhere(intact, s.bucket);
	const std::string far = away[0];
	// a key of s's bucket after it, whose tag differs in the 9 bits a
	// directory entry keeps
	std::string next;
	Loc nl;
	for (const Loc &l : records_of(intact))
		if (l.bucket == s.bucket && l.i == s.i + 1 && ((l.tag ^ s.tag) & 0x1ff)) {
			next = rec_key(intact, l.rec());
			nl = l;
		}
	if (next.empty() || s.kind != SHMKV_TYPE_STRING)
		die("base: s is not an inline string followed by a record of another tag");
	// record j of s's bucket given offset v (the low 7 bits of its directory
	// entry; its tag bits kept)
	auto set_off = [&](std::string &i, unsigned j, unsigned v) {
		char &c = i[s.base + 8 + 2 * j];
		c = (char)(((unsigned char)c & 0x80u) | (v & 0x7fu));
	};
	forged("count_17", "bucket of s with count 17 (at most 16)", "OK", "SHMKV_ECORRUPT",
	       with(intact, [&](std::string &i) { i[s.base] = 17; }),
	       {{"s", "SHMKV_ECORRUPT"}, {far, "OK"}});
	out.back().batches = {{{far, "OK"}, {"s", "SHMKV_ECORRUPT"}, {"missing", "SHMKV_ENOTFOUND"},
			       {"long", "OK"}}};
	forged("off_in_directory", "s's record offset inside its bucket's directory "
	       "(8 + 2*count - 1)", "OK", "SHMKV_ECORRUPT",
	       with(intact, [&](std::string &i) { set_off(i, s.i, 8 + 2 * s.n - 1); }),
	       {{"s", "SHMKV_ECORRUPT"}, {next, "OK"}, {far, "OK"}});
	forged("overlapping_records", "the record after s starts one byte early, on the NUL "
	       "ending s's string: the records overlap, and a lookup decodes kind 0 (an inline "
	       "record of type 0)", "OK", "SHMKV_ECORRUPT",
	       with(intact, [&](std::string &i) { set_off(i, nl.i, nl.off - 1); }),
	       {{"s", "OK"}, {next, "SHMKV_ECORRUPT"}, {far, "OK"}});
	forged("same_offset", "the record after s given s's offset (offsets must ascend "
	       "strictly): its lookup finds s's key there, not its own", "OK", "SHMKV_ECORRUPT",
	       with(intact, [&](std::string &i) { set_off(i, nl.i, s.off); }),
	       {{"s", "OK"}, {next, "SHMKV_ENOTFOUND"}, {far, "OK"}});
	{
		// the last record of a bucket with room after it
		Loc last;
		unsigned end = 0;
		bool got = false;
		for (const Loc &l : records_of(intact))
			if (l.i + 1 == l.n && (l.kind == SHMKV_TYPE_STRING || l.kind == SHMKV_TYPE_BYTES)) {
				last = l;
				got = true;
			}
		if (!got)
			die("base: no bucket ending with an inline string or bytes");
		std::string lk = rec_key(intact, last.rec());
		end = last.off + 3 + (unsigned)lk.size() + (uint8_t)intact[last.rec() + 2] + 1;
		if (end >= 128)
			die("base: no room after the last record");
		forged("record_past_end", "the last record of a bucket (inline bytes) with value_len "
		       "255: it runs past +128", "OK", "SHMKV_ECORRUPT",
		       with(intact, [&](std::string &i) { i[last.rec() + 2] = (char)255; }),
		       {{lk, "SHMKV_ECORRUPT"}});
		forged("nonzero_gap", "a byte after the last record of a bucket is 1 (the record "
		       "area no record covers is zero); no lookup reads it", "OK", "SHMKV_ECORRUPT",
		       with(intact, [&](std::string &i) { i[last.base + 127] = 1; }), {{lk, "OK"}});
	}
	{
		// dir bit 15 is tag bit 8
		const uint16_t other = (uint16_t)(s.dir ^ 0x8000);
		if (!(s.tag & 0x1ff))
			die("base: s's tag has its low 9 bits 0");
		forged("tag_mismatch", "s's directory entry with tag bit 8 flipped (dir bit 15): the "
		       "9 tag bits differ from its key's, its lookup misses", "OK", "SHMKV_ECORRUPT",
		       with(intact, [&](std::string &i) { put_at<uint16_t>(i, s.base + 8 + 2 * s.i, other); }),
		       {{"s", "SHMKV_ENOTFOUND"}, {next, "OK"}});
		forged("tag_zero", "s's directory entry with its 9 tag bits 0 (its key's are not), "
		       "its offset kept: its lookup misses", "OK", "SHMKV_ECORRUPT",
		       with(intact, [&](std::string &i) {
			       put_at<uint16_t>(i, s.base + 8 + 2 * s.i, (uint16_t)(s.dir & 0x7f));
		       }),
		       {{"s", "SHMKV_ENOTFOUND"}, {next, "OK"}});
	}
	forged("kind_bit_4", "s's record kind with bit 4 set (bits 4, 5 are zero)", "OK",
	       "SHMKV_ECORRUPT", with(intact, [&](std::string &i) { i[s.rec()] |= 0x10; }),
	       {{"s", "SHMKV_ECORRUPT"}, {next, "OK"}});
	forged("unknown_type", "s's inline record of type 10 (the format knows 1..9)", "OK",
	       "SHMKV_ECORRUPT", with(intact, [&](std::string &i) { i[s.rec()] = 10; }),
	       {{"s", "SHMKV_ECORRUPT"}, {next, "OK"}});
	forged("string_without_nul", "the NUL after s's inline string is 'x'", "OK",
	       "SHMKV_ECORRUPT", with(intact, [&](std::string &i) { i[s.rec() + 3 + 1 + 5] = 'x'; }),
	       {{"s", "SHMKV_ECORRUPT"}, {next, "OK"}});
	{
		Loc b = loc(intact, "b"), in = loc(intact, "i");
		forged("bool_byte_2", "inline bool b stored as byte 2", "OK", "SHMKV_ECORRUPT",
		       with(intact, [&](std::string &i) { i[b.rec() + 3 + 1] = 2; }),
		       {{"b", "SHMKV_ECORRUPT"}});
		forged("i64_length_4", "inline i64 i with value_len 4", "OK", "SHMKV_ECORRUPT",
		       with(intact, [&](std::string &i) { i[in.rec() + 2] = 4; }),
		       {{"i", "SHMKV_ECORRUPT"}});
	}
	{
		Loc lo = loc(intact, "long");
		if (!(lo.kind & SHMKV_REC_OUT))
			die("base: long is not OUT");
		auto unit = [&](uint64_t off) {
			return [&, off](std::string &i) {
				uint64_t u = off >> 3;
				memcpy(&i[lo.rec() + 1], &u, 5);
			};
		};
		forged("out_unit_past_entries", "the OUT record of long names an entry past ENTRIES "
		       "(in VALUES)", "OK", "SHMKV_ECORRUPT",
		       with(intact, unit(h.sections[2].offset)), {{"long", "SHMKV_ECORRUPT"}});
		forged("out_unit_in_index", "the OUT record of long names an entry inside the index",
		       "OK", "SHMKV_ECORRUPT", with(intact, unit(h.sections[0].offset)),
		       {{"long", "SHMKV_ECORRUPT"}});
		forged("out_with_type", "the OUT record of long with type bits 1 (OUT: 0)", "OK",
		       "SHMKV_ECORRUPT", with(intact, [&](std::string &i) { i[lo.rec()] |= 1; }),
		       {{"long", "SHMKV_ECORRUPT"}});
	}
	forged("entry_count_mismatch", "entry_count one more than the records", "OK",
	       "SHMKV_ECORRUPT",
	       with(intact, [&](std::string &i) { put_at<uint64_t>(i, 40, h.entry_count + 1); }),
	       {{"s", "OK"}});
	{
		Loc fl = loc(intact, far); // its home, where it is, has D 0
		forged("filter_without_d", "a bucket with D 0 and a filter bit set", "OK",
		       "SHMKV_ECORRUPT", with(intact, [&](std::string &i) { i[fl.base + 2] |= 1; }),
		       {{far, "OK"}});
	}

	// the rules of an OUT record's entry in ENTRIES (FORMAT.md §7, §9)
	{
		Loc lo = loc(intact, "long"), sl = loc(intact, "shl1");
		uint64_t e = 0, se = 0;
		memcpy(&e, intact.data() + lo.rec() + 1, 5);
		memcpy(&se, intact.data() + sl.rec() + 1, 5);
		e <<= 3;
		se <<= 3;
		if (!(lo.kind & SHMKV_REC_OUT) || !(sl.kind & SHMKV_REC_OUT) ||
		    !(intact[se + 1] & SHMKV_EFLAG_SHARED))
			die("base: long and shl1 are not OUT, or shl1 is not shared");
		forged("unknown_entry_flag", "the OUT entry of long has entry flag 0x2", "OK",
		       "SHMKV_ECORRUPT", with(intact, [&](std::string &i) { i[e + 1] = 2; }),
		       {{"long", "SHMKV_ECORRUPT"}, {"s", "OK"}});
		forged("key_len_past_section", "the OUT entry of long with key_len 65535: its key would "
		       "run past ENTRIES (a lookup compares key_len first: long is not found)", "OK",
		       "SHMKV_ECORRUPT", with(intact, [&](std::string &i) { put_at<uint16_t>(i, e + 2, 65535); }),
		       {{"long", "SHMKV_ENOTFOUND"}, {"s", "OK"}});
		forged("value_past_section", "the OUT entry of long with a value_len past ENTRIES", "OK",
		       "SHMKV_ECORRUPT",
		       with(intact, [&](std::string &i) { put_at<uint32_t>(i, e + 4, 0x7fffffff); }),
		       {{"long", "SHMKV_ECORRUPT"}, {"s", "OK"}});
		const uint64_t ref = se + 8 + 8; // header, key "shl1", 8-aligned
		forged("shared_ref_misaligned", "shl1's shared-value reference off by 4", "OK",
		       "SHMKV_ECORRUPT", with(intact, [&](std::string &i) {
			       uint64_t r;
			       memcpy(&r, i.data() + ref, 8);
			       put_at<uint64_t>(i, ref, r + 4);
		       }),
		       {{"shl1", "SHMKV_ECORRUPT"}, {"shl2", "OK"}});
		forged("shared_ref_outside", "shl1's shared-value reference into the entries section",
		       "OK", "SHMKV_ECORRUPT",
		       with(intact, [&](std::string &i) { put_at<uint64_t>(i, ref, h.sections[1].offset); }),
		       {{"shl1", "SHMKV_ECORRUPT"}, {"shl2", "OK"}});
		forged("invalid_utf8_out", "the OUT string long holds byte 0xff: not UTF-8, so a get "
		       "of it is refused as a damaged value (FORMAT.md §8)", "OK", "SHMKV_ECORRUPT",
		       with(intact, [&](std::string &i) { i[e + 8 + 4 + 50] = (char)0xff; }),
		       {{"long", "SHMKV_ECORRUPT"}, {"s", "OK"}});
	}
	// value shapes of inline records (FORMAT.md §8)
	{
		Loc fl = loc(intact, "fl"), l = loc(intact, "l");
		forged("f32list_length_6", "inline f32list fl with value_len 6", "OK", "SHMKV_ECORRUPT",
		       with(intact, [&](std::string &i) { i[fl.rec() + 2] = 6; }),
		       {{"fl", "SHMKV_ECORRUPT"}, {"s", "OK"}});
		// the value of an inline record: after its 3-byte head and key, aligned
		// for its type within the bucket (§6)
		const uint64_t lv = l.base + ((l.off + 3 + 1 + 7) & ~7u);
		forged("strlist_count_too_big", "inline strlist l claims 1000 strings", "OK",
		       "SHMKV_ECORRUPT", with(intact, [&](std::string &i) { put_at<uint32_t>(i, lv, 1000); }),
		       {{"l", "SHMKV_ECORRUPT"}, {"s", "OK"}});
		forged("strlist_bad_end", "strlist l's second end before its first (a lookup checks "
		       "the count only: the get succeeds, the string is refused when read)", "OK",
		       "SHMKV_ECORRUPT", with(intact, [&](std::string &i) { put_at<uint32_t>(i, lv + 8, 0); }),
		       {{"l", "OK"}});
		out.back().recs.erase("l"); // its value is damaged: no value to compare
		forged("invalid_utf8_string", "inline string s holds byte 0xff: not UTF-8, so a get "
		       "of it is refused as a damaged value (FORMAT.md §8)", "OK", "SHMKV_ECORRUPT",
		       with(intact, [&](std::string &i) { i[s.rec() + 3 + 1] = (char)0xff; }),
		       {{"s", "SHMKV_ECORRUPT"}, {"i", "OK"}});
		out.back().batches = {{{"i", "OK"}, {"s", "SHMKV_ECORRUPT"}, {"missing", "SHMKV_ENOTFOUND"},
				       {"long", "OK"}}};
	}

	// displacement (on displaced)
	{
		const shmkv_image_header dh = header_of(disp);
		Loc d;
		bool got = false;
		for (const Loc &l : records_of(disp))
			if (!got && l.bucket != l.home && (l.bucket + dh.bucket_count - l.home) % dh.bucket_count >= 2) {
				d = l;
				got = true;
			}
		if (!got || dh.max_probe >= 250)
			die("displaced: no key displaced by 2 or more, or max_probe 250 or more");
		std::string dk = rec_key(disp, d.rec());
		uint64_t hb = dh.sections[0].offset + 128 * d.home;
		unsigned fi = (unsigned)(((uint64_t)d.tag * 48) >> 16);
		uint64_t dist = (d.bucket + dh.bucket_count - d.home) % dh.bucket_count;
		// keys homed elsewhere than d's home, found at home
		std::string ok;
		for (const Loc &l : records_of(disp))
			if (l.home != d.home && l.bucket == l.home)
				ok = rec_key(disp, l.rec());
		forged("filter_bit_clear", "a displaced key's filter bit cleared at its home: its "
		       "lookup stops at home", "OK", "SHMKV_ECORRUPT",
		       with(disp, [&](std::string &i) { i[hb + 2 + fi / 8] &= (char)~(1 << (fi % 8)); }),
		       {{dk, "SHMKV_ENOTFOUND"}, {ok, "OK"}});
		forged("d_too_small", "D at a displaced key's home one less than its displacement: "
		       "its lookup stops short", "OK", "SHMKV_ECORRUPT",
		       with(disp, [&](std::string &i) { i[hb + 1] = (char)(dist - 1); }),
		       {{dk, "SHMKV_ENOTFOUND"}, {ok, "OK"}});
		forged("d_past_max_probe", "D at a home bucket greater than max_probe (a lookup "
		       "scans at most max_probe buckets)", "OK", "SHMKV_ECORRUPT",
		       with(disp, [&](std::string &i) { i[hb + 1] = (char)(dh.max_probe + 1); }),
		       {{dk, "OK"}, {ok, "OK"}});
		forged("max_probe_not_exact", "max_probe one more than the largest "
		       "displacement", "OK", "SHMKV_ECORRUPT",
		       with(disp, [&](std::string &i) { put_at<uint32_t>(i, 72, dh.max_probe + 1); }),
		       {{dk, "OK"}, {ok, "OK"}});
		for (size_t k = out.size() - 4; k < out.size(); k++)
			out[k].recs = disp_map;
	}

	// expiry (on expiry)
	{
		const shmkv_image_header eh = header_of(expimg);
		forged("expiry_flag_clear", "EXPIRY clear while records expire: a lookup reads no "
		       "clock, so the expired keys are found", "OK", "SHMKV_ECORRUPT",
		       with(expimg, [&](std::string &i) { put_at<uint64_t>(i, 24, eh.flags & ~UINT64_C(2)); }),
		       {{"expired", "OK"}, {"expired/out", "OK"}, {"future", "OK"}});
		out.back().recs = exp_map;
		forged("expiry_flag_unused", "EXPIRY set while no record expires", "OK",
		       "SHMKV_ECORRUPT",
		       with(intact, [&](std::string &i) { put_at<uint64_t>(i, 24, h.flags | 2); }),
		       {{"s", "OK"}, {"long", "OK"}});
		Loc f = loc(expimg, "future");
		forged("expires_zero", "an inline record's expiry 0 (an expiry is at least 1)", "OK",
		       "SHMKV_ECORRUPT",
		       with(expimg, [&](std::string &i) { put_at<uint32_t>(i, f.rec() + 3, 0); }),
		       {{"never", "OK"}});
		out.back().recs = exp_map;
	}

	// ---- delta images (FORMAT.md §19) ----
	add_deltas(out, tmp, intact);
	add_v1(dir, out);
	return out;
}

// ---- files -----------------------------------------------------------------

// The files --out writes and --check compares: the generated images and
// the manifest (the format 1 files of v1/ are read, not written).
std::map<std::string, std::string> files_of(const std::vector<Vector> &vs)
{
	std::map<std::string, std::string> f;
	for (const Vector &v : vs)
		if (v.format != 1)
			f[v.name + ".img"] = v.img;
	f["manifest.json"] = manifest(vs);
	return f;
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
	std::map<std::string, std::string> files = files_of(make_all(tmpl, dir));
	rmdir(tmpl);
	if (!strcmp(argv[1], "--out")) {
		const std::string failed = vec::write_files(files, dir);
		if (!failed.empty())
			die("write " + failed);
		printf("gen_vectors: %zu files in %s\n", files.size(), dir.c_str());
		return 0;
	}
	int bad = vec::check_files(files, dir, "gen_vectors", [](const std::string &n) {
		return n == "manifest.json" || (n.size() > 4 && !n.compare(n.size() - 4, 4, ".img"));
	});
	if (bad)
		fprintf(stderr, "gen_vectors: regenerate with `gen_vectors --out %s` if the change is "
				"meant (tests/vectors/README.md)\n", dir.c_str());
	else
		printf("gen_vectors: %zu files in %s match\n", files.size(), dir.c_str());
	return bad;
}
