// builder/input_jsonl.cc - JSONL records: {"key": K, "value": V[, "type": T]}.
// Parsed with simdjson On Demand, one line at a time; f32 numbers are parsed
// from their text with fast_float so they round once, not twice. Types
// inferred and numbers checked for loss as builder/README.md "Types" says.
#include <charconv>
#include <cmath>
#include <cstring>
#include <deque>
#include <fast_float/fast_float.h>
#include <simdjson.h>

#include "delta.h"
#include "internal.h"

using namespace simdjson;

namespace shmkv_build {

namespace {

const char *json_type_name(ondemand::json_type t)
{
	switch (t) {
	case ondemand::json_type::array: return "an array";
	case ondemand::json_type::object: return "an object";
	case ondemand::json_type::number: return "a number";
	case ondemand::json_type::string: return "a string";
	case ondemand::json_type::boolean: return "a bool";
	case ondemand::json_type::null: return "null";
	}
	return "unknown";
}

unsigned type_from_name(std::string_view s)
{
	for (unsigned t = 1; t <= SHMKV_TYPE_MAX; t++)
		if (s == shmkv_type_name(t))
			return t;
	return 0;
}

int hex4(std::string_view t, size_t i)
{
	if (i + 4 > t.size())
		return -1;
	int x = 0;
	for (size_t k = i; k < i + 4; k++) {
		char c = t[k];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return -1;
		x = x * 16 + d;
	}
	return x;
}

// What is wrong with a JSON string simdjson would not decode (e, other than
// INCORRECT_TYPE): it says only "problem while parsing a string". An escaped
// UTF-16 surrogate must come in a pair: a lone half stands for no character,
// and has no UTF-8 form.
std::string string_problem(ondemand::value v, error_code e)
{
	std::string_view t = v.raw_json_token();
	for (size_t i = 0; i + 1 < t.size(); i++) {
		if (t[i] != '\\')
			continue;
		if (t[i + 1] != 'u') {
			i++;
			continue;
		}
		int cp = hex4(t, i + 2);
		if (cp >= 0xD800 && cp <= 0xDBFF && t.substr(i + 6, 2) == "\\u") {
			int lo = hex4(t, i + 8);
			if (lo >= 0xDC00 && lo <= 0xDFFF) {
				i += 11;
				continue;
			}
		}
		if (cp >= 0xD800 && cp <= 0xDFFF) {
			char buf[200];
			snprintf(buf, sizeof buf, "lone surrogate \\u%.4s in a string: not a character, "
				 "so not valid UTF-8 (a character above U+FFFF is escaped as a pair, "
				 "\\uD83D\\uDE00)", t.data() + i + 2);
			return buf;
		}
		i += 5;
	}
	return std::string("invalid string: ") + error_message(e);
}

// Parses one JSON value into the encoded bytes of a type; *why on failure.
// Numbers never lose precision silently (builder/README.md, "Types").
class ValueParser {
public:
	ValueParser(std::string &why, bool lossy_f32) : why_(why), lossy_f32_(lossy_f32) {}

	bool parse(ondemand::value v, unsigned type, std::string &enc, unsigned *out_type)
	{
		if (!jsonish(v, type, 0))
			return false;
		ondemand::json_type jt{};
		if (!ok(v.type().get(jt)))
			return false;
		if (type == 0 && !infer(v, jt, &type))
			return false;
		enc.clear();
		if (type == 0)
			return untyped_list(v, enc, out_type);
		*out_type = type;
		switch (type) {
		case SHMKV_TYPE_STRING: {
			std::string_view s;
			if (!want(jt, ondemand::json_type::string, type) || !str(v, &s))
				return false;
			enc.assign(s);
			return true;
		}
		case SHMKV_TYPE_BYTES: {
			std::string_view s;
			size_t bad;
			if (!want(jt, ondemand::json_type::string, type) || !str(v, &s))
				return false;
			if (!base64_decode(s, enc, &bad))
				return fail("bytes value is not valid base64 (at character %zu)", bad + 1);
			return true;
		}
		case SHMKV_TYPE_BOOL: {
			bool x = false;
			if (!want(jt, ondemand::json_type::boolean, type) || !ok(v.get_bool().get(x)))
				return false;
			enc.assign(1, (char)x);
			return true;
		}
		case SHMKV_TYPE_I64: {
			int64_t x = 0;
			return int64(v, jt, &x) && bytes_of(x, enc);
		}
		case SHMKV_TYPE_F64: {
			double x = 0;
			return f64(v, jt, &x) && bytes_of(x, enc);
		}
		default: return typed_list(v, jt, type, enc, out_type);
		}
	}

private:
	std::string &why_;
	bool lossy_f32_;

	template <typename T>
	static bool bytes_of(const T &x, std::string &enc)
	{
		enc.assign((const char *)&x, sizeof x);
		return true;
	}
	bool fail(const char *fmt, ...) __attribute__((format(printf, 2, 3)))
	{
		va_list ap;
		va_start(ap, fmt);
		why_ = vformat(fmt, ap);
		va_end(ap);
		return false;
	}
	bool ok(error_code e)
	{
		if (e == SUCCESS)
			return true;
		return fail("invalid JSON: %s", error_message(e));
	}
	bool str(ondemand::value v, std::string_view *s)
	{
		error_code e = v.get_string().get(*s);
		if (e == SUCCESS || e == INCORRECT_TYPE)
			return ok(e);
		return fail("%s", string_problem(v, e).c_str());
	}
	bool want(ondemand::json_type got, ondemand::json_type need, unsigned type)
	{
		if (got == need)
			return true;
		return fail("type %s needs %s, got %s", shmkv_type_name(type), json_type_name(need),
			    json_type_name(got));
	}
	// NaN, Infinity, -inf... are not JSON: say how to write them. elem: the
	// list element's number, 0 for the value itself.
	bool jsonish(ondemand::value v, unsigned type, size_t elem)
	{
		std::string_view raw = trim(v.raw_json_token());
		const char *instead = nonjson_float(raw);
		if (!instead)
			return true;
		if (elem)
			return fail("%.*s is not JSON: in a list with \"type\": \"f64list\" (or "
				    "\"f32list\") write it as the string %s",
				    (int)raw.size(), raw.data(), instead);
		(void)type;
		return fail("%.*s is not JSON: write it as a string with a float type, "
			    "{\"key\": ..., \"type\": \"f64\", \"value\": %s} (strings for floats: "
			    "\"inf\", \"-inf\", \"nan\", \"nan:0x<hex bits>\")",
			    (int)raw.size(), raw.data(), instead);
	}
	bool infer(ondemand::value v, ondemand::json_type jt, unsigned *type)
	{
		switch (jt) {
		case ondemand::json_type::string: *type = SHMKV_TYPE_STRING; return true;
		case ondemand::json_type::boolean: *type = SHMKV_TYPE_BOOL; return true;
		case ondemand::json_type::number: {
			double d;
			if (!ok(v.get_double().get(d)))
				return false;
			*type = is_integer_text(trim(v.raw_json_token())) ? SHMKV_TYPE_I64 : SHMKV_TYPE_F64;
			return true;
		}
		case ondemand::json_type::array:
			*type = 0; // untyped_list() decides from the elements
			return true;
		case ondemand::json_type::null:
			return fail("null is not a valid value");
		case ondemand::json_type::object:
			return fail("an object is not a valid value");
		}
		return fail("unsupported value");
	}
	// The number's text, validated as JSON, and its nearest f64.
	bool number(ondemand::value v, ondemand::json_type jt, const char *need,
		    std::string_view *raw, double *d)
	{
		if (jt != ondemand::json_type::number)
			return fail("%s needs a number, got %s", need, json_type_name(jt));
		*raw = trim(v.raw_json_token());
		return ok(v.get_double().get(*d));
	}
	bool parse_i64(std::string_view raw, int64_t *x)
	{
		if (!is_integer_text(raw))
			return fail("i64 value must be an integer, got %.*s", (int)raw.size(), raw.data());
		auto r = std::from_chars(raw.data(), raw.data() + raw.size(), *x);
		if (r.ec != std::errc() || r.ptr != raw.data() + raw.size())
			return fail("integer %.*s is out of the i64 range", (int)raw.size(), raw.data());
		return true;
	}
	bool int64(ondemand::value v, ondemand::json_type jt, int64_t *x)
	{
		std::string_view raw;
		double d;
		if (jt != ondemand::json_type::number)
			return fail("type i64 needs an integer, got %s", json_type_name(jt));
		return number(v, jt, "an i64", &raw, &d) && parse_i64(raw, x);
	}
	// A float written as a string: "inf", "-inf", "nan", "nan:0x<bits>".
	template <typename F>
	bool special(ondemand::value v, F *x)
	{
		std::string_view s;
		if (!str(v, &s))
			return false;
		if (parse_special(s, x))
			return true;
		return fail("\"%.*s\" is not a number (strings allowed for floats: \"inf\", "
			    "\"-inf\", \"nan\", \"nan:0x<%zu hex digits>\")", (int)s.size(), s.data(),
			    2 * sizeof(F));
	}
	bool f64(ondemand::value v, ondemand::json_type jt, double *x)
	{
		if (jt == ondemand::json_type::string)
			return special(v, x);
		std::string_view raw;
		if (!number(v, jt, "a float", &raw, x))
			return false;
		std::string why;
		return number_to_f64(raw, *x, why) || fail("%s", why.c_str());
	}
	bool f32(ondemand::value v, ondemand::json_type jt, float *x)
	{
		if (jt == ondemand::json_type::string)
			return special(v, x);
		std::string_view raw;
		double d;
		if (!number(v, jt, "a float", &raw, &d))
			return false;
		std::string why;
		return number_to_f32(raw, d, lossy_f32_, x, why) || fail("%s", why.c_str());
	}
	static std::string_view trim(std::string_view s)
	{
		while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' ||
				      s.back() == '\n'))
			s.remove_suffix(1);
		return s;
	}
	bool element_failed(size_t i)
	{
		std::string inner = why_;
		return fail("element %zu: %s", i, inner.c_str());
	}
	// A list element parsed by parse, appended (0 if it failed: the list fails).
	template <typename T>
	bool element(bool (ValueParser::*parse)(ondemand::value, ondemand::json_type, T *),
		     ondemand::value ev, ondemand::json_type et, std::string &enc)
	{
		T x = 0;
		bool good = (this->*parse)(ev, et, &x);
		enc.append((const char *)&x, sizeof x);
		return good;
	}
	// A list with a "type".
	bool typed_list(ondemand::value v, ondemand::json_type jt, unsigned type, std::string &enc,
			unsigned *out_type)
	{
		if (jt != ondemand::json_type::array)
			return fail("type %s needs an array, got %s", shmkv_type_name(type),
				    json_type_name(jt));
		ondemand::array a;
		if (!ok(v.get_array().get(a)))
			return false;
		std::vector<std::string> strs;
		size_t i = 0;
		for (auto el : a) {
			i++;
			ondemand::value ev;
			ondemand::json_type et{};
			if (!ok(el.get(ev)) || !jsonish(ev, type, i) || !ok(ev.type().get(et)))
				return element_failed(i);
			bool good = true;
			switch (type) {
			case SHMKV_TYPE_F32LIST: good = element<float>(&ValueParser::f32, ev, et, enc); break;
			case SHMKV_TYPE_F64LIST: good = element<double>(&ValueParser::f64, ev, et, enc); break;
			case SHMKV_TYPE_I64LIST: good = element<int64_t>(&ValueParser::int64, ev, et, enc); break;
			case SHMKV_TYPE_STRLIST: {
				std::string_view s;
				if (et != ondemand::json_type::string)
					return fail("element %zu: a strlist holds strings, got %s", i,
						    json_type_name(et));
				good = str(ev, &s);
				strs.emplace_back(s);
				break;
			}
			default: return fail("unknown type %u", type);
			}
			if (!good)
				return element_failed(i);
			if (enc.size() > SHMKV_MAX_VALUE_LEN)
				return fail("list exceeds the %u-byte value limit", SHMKV_MAX_VALUE_LEN);
		}
		if (type == SHMKV_TYPE_STRLIST)
			enc = encode_strlist(strs);
		*out_type = type;
		return true;
	}
	// A list without a "type": strings make a strlist; numbers an i64list
	// when all are integers, else an f64list (every integer exact in f64).
	bool untyped_list(ondemand::value v, std::string &enc, unsigned *out_type)
	{
		ondemand::array a;
		if (!ok(v.get_array().get(a)))
			return false;
		std::vector<std::string> strs;
		// a deque: no copy at twice the size as it grows (a line of "1," is
		// 12 bytes of it per 2 bytes of input: kLineCost)
		std::deque<std::pair<std::string_view, double>> nums;
		size_t first_float = 0, i = 0;
		ondemand::json_type first{};
		for (auto el : a) {
			i++;
			ondemand::value ev;
			ondemand::json_type et{};
			if (!ok(el.get(ev)) || !jsonish(ev, 0, i) || !ok(ev.type().get(et)))
				return element_failed(i);
			if (i == 1) {
				first = et;
				if (et != ondemand::json_type::number && et != ondemand::json_type::string)
					return fail("array elements must be numbers or strings, element 1 "
						    "is %s", json_type_name(et));
			} else if (et != first) {
				std::string_view s;
				double special;
				bool word = et == ondemand::json_type::string && !ev.get_string().get(s) &&
					    parse_special_f64(s, &special);
				return fail("mixed array: element %zu is %s, element 1 was %s%s", i,
					    json_type_name(et), json_type_name(first),
					    word ? " (a list of floats with \"inf\" or \"nan\" needs "
						   "\"type\": \"f64list\" or \"f32list\")" : "");
			}
			if (et == ondemand::json_type::string) {
				std::string_view s;
				if (!str(ev, &s))
					return element_failed(i);
				strs.emplace_back(s);
				if (4 * (strs.size() + 2) > SHMKV_MAX_VALUE_LEN)
					return fail("list exceeds the %u-byte value limit", SHMKV_MAX_VALUE_LEN);
				continue;
			}
			std::string_view raw;
			double d;
			if (!number(ev, et, "a list element", &raw, &d))
				return element_failed(i);
			if (!first_float && !is_integer_text(raw))
				first_float = i;
			nums.emplace_back(raw, d);
			if (nums.size() * 8 > SHMKV_MAX_VALUE_LEN)
				return fail("list exceeds the %u-byte value limit", SHMKV_MAX_VALUE_LEN);
		}
		if (i == 0)
			return fail("an empty array needs a \"type\" (f32list, f64list, i64list or "
				    "strlist)");
		if (first == ondemand::json_type::string) {
			enc = encode_strlist(strs);
			*out_type = SHMKV_TYPE_STRLIST;
			return true;
		}
		enc.reserve(nums.size() * 8);
		for (size_t k = 0; k < nums.size(); k++) {
			auto [raw, d] = nums[k];
			if (!first_float) {
				int64_t x;
				if (!parse_i64(raw, &x))
					return fail("element %zu: %s (an array of integers is an i64list; "
						    "give \"type\": \"f64list\" for floats)", k + 1, why_.c_str());
				enc.append((const char *)&x, 8);
				continue;
			}
			std::string why;
			if (!number_to_f64(raw, d, why))
				return fail("element %zu: %s (element %zu is not an integer, so the array "
					    "is an f64list)", k + 1, why.c_str(), first_float);
			enc.append((const char *)&d, 8);
		}
		*out_type = first_float ? SHMKV_TYPE_F64LIST : SHMKV_TYPE_I64LIST;
		return true;
	}
};

error_code number_of(ondemand::value v, uint64_t *x)
{
	return v.get_uint64().get(*x);
}

error_code number_of(ondemand::value v, int64_t *x)
{
	return v.get_int64().get(*x);
}

// A numeric meta field, stored in *field if set (the caller did not fix it).
template <typename T>
error_code meta_number(ondemand::value v, bool set, T *field)
{
	T x = 0;
	error_code e = number_of(v, &x);
	if (!e && set)
		*field = x;
	return e;
}

// A checksum as dump writes it: "0x" and 16 hex digits (a JSON number
// would not keep 64 bits in most readers).
bool hex_u64(std::string_view s, uint64_t *out)
{
	if (s.size() != 18 || s[0] != '0' || s[1] != 'x')
		return false;
	auto r = std::from_chars(s.data() + 2, s.data() + s.size(), *out, 16);
	return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// The "delta" of a delta's dump (shmctl image dump): {"base_checksum":
// "0x...", "base_size": N, "prev": "0x...", "seq": N}. It must name the
// base (and the delta followed) of this build, whose seq it then gives.
bool apply_meta_delta(shmkv_builder *b, ondemand::value dv, std::string &why, int *code)
{
	ondemand::object m;
	DeltaId d;
	unsigned seen = 0;
	if (dv.get_object().get(m) != SUCCESS) {
		why = "shmkv_meta delta must be an object";
		return false;
	}
	for (auto f : m) {
		std::string_view k, sv;
		ondemand::value v;
		if (f.unescaped_key().get(k) || f.value().get(v)) {
			why = "invalid JSON in shmkv_meta delta";
			return false;
		}
		bool good;
		if (k == "base_checksum" || k == "prev") {
			good = !v.get_string().get(sv) && hex_u64(sv, k == "prev" ? &d.prev : &d.base_checksum);
			seen |= k == "prev" ? 2 : 1;
		} else if (k == "base_size" || k == "seq") {
			good = !v.get_uint64().get(k == "seq" ? d.seq : d.base_size);
			seen |= k == "seq" ? 8 : 4;
		} else {
			why = "unknown shmkv_meta delta field \"" + std::string(k) +
			      "\" (base_checksum, base_size, prev, seq)";
			return false;
		}
		if (!good) {
			why = "shmkv_meta delta " + std::string(k) + (k == "base_checksum" || k == "prev"
				? ": expected \"0x\" and 16 hex digits" : ": expected an unsigned integer");
			return false;
		}
	}
	if (seen != 15 || d.seq < 1) {
		why = "shmkv_meta delta needs base_checksum, base_size, prev and seq (>= 1)";
		return false;
	}
	std::string seq = " (seq " + std::to_string(d.seq) + ")";
	*code = SHMKV_EBASE;
	if (!b->delta) {
		why = "the input is the dump of a delta" + seq + " of base " + hex64(d.base_checksum) +
		      ": build it as a delta of that base (--delta-of BASE" +
		      (d.prev ? ", --after the delta it follows, " + hex64(d.prev) : std::string()) + ")";
		return false;
	}
	if (d.base_checksum != b->did.base_checksum || d.base_size != b->did.base_size) {
		why = "the input is the dump of a delta" + seq + " of base " + hex64(d.base_checksum) +
		      " (" + std::to_string(d.base_size) + " bytes), not of " + b->delta_base + " (" +
		      hex64(b->did.base_checksum) + ", " + std::to_string(b->did.base_size) + " bytes)";
		return false;
	}
	if (d.prev != b->did.prev) {
		why = "the input is the dump of a delta" + seq + (d.prev ? " that follows delta " +
		      hex64(d.prev) : std::string(" that applies to its base directly (prev 0)")) +
		      (b->did.prev ? ", not " + b->delta_after + " (" + hex64(b->did.prev) + ")"
				   : ", but no delta to follow (--after) is given");
		return false;
	}
	*code = SHMKV_EINPUT;
	b->did.seq = d.seq;
	return true;
}

// Applies {"shmkv_meta": {...}} to options the caller did not fix.
bool apply_meta(shmkv_builder *b, ondemand::value mv, std::string &why, int *code)
{
	ondemand::object m;
	if (mv.get_object().get(m) != SUCCESS) {
		why = "shmkv_meta must be an object";
		return false;
	}
	auto &o = b->opt;
	unsigned seen_name = 0;
	for (auto f : m) {
		std::string_view k;
		ondemand::value v;
		if (f.unescaped_key().get(k) || f.value().get(v)) {
			why = "invalid JSON in shmkv_meta";
			return false;
		}
		error_code e = SUCCESS;
		if (k == "name" || k == "name_base64") { // base64: a name not UTF-8 (shmctl image dump)
			std::string_view s;
			std::string bytes;
			size_t bad;
			if ((seen_name++)) {
				why = "shmkv_meta: give name or name_base64, once";
				return false;
			}
			e = v.get_string().get(s);
			if (!e && k == "name_base64") {
				if (!base64_decode(s, bytes, &bad)) {
					why = "shmkv_meta name_base64 is not valid base64 (at character " +
					      std::to_string(bad + 1) + ")";
					return false;
				}
				s = bytes;
			}
			if (!e && memchr(s.data(), 0, s.size())) {
				why = "shmkv_meta " + std::string(k) + ": a name holds no NUL byte";
				return false;
			}
			if (!e && s.size() > SHMKV_NAME_MAX) {
				why = "shmkv_meta name is longer than 63 bytes";
				return false;
			}
			if (!e && !(o.fixed & SHMKV_OPT_NAME)) {
				memset(o.name, 0, sizeof o.name);
				memcpy(o.name, s.data(), s.size());
			}
		} else if (k == "seed") {
			e = meta_number(v, !(o.fixed & SHMKV_OPT_SEED), &o.seed);
		} else if (k == "created") {
			e = meta_number(v, !(o.fixed & SHMKV_OPT_CREATED), &o.created);
		} else if (k == "buckets") {
			e = meta_number(v, !(o.fixed & SHMKV_OPT_BUCKETS), &o.buckets);
		} else if (k == "hash_bits") {
			uint64_t x;
			e = v.get_uint64().get(x);
			if (!e && (x < 1 || x > 64)) {
				why = "shmkv_meta hash_bits must be 1..64";
				return false;
			}
			if (!e && !(o.fixed & SHMKV_OPT_HASH_BITS))
				o.hash_bits = (unsigned)x;
		} else if (k == "format") { // the image's format version (shmctl image dump writes it)
			uint64_t x;
			e = v.get_uint64().get(x);
			if (!e && x == 1) {
				why = "shmkv_meta format 1: format 1 is retired (lib/FORMAT.md §15); this "
				      "builder writes format 2. Convert a format 1 image with 'shmctl "
				      "image upgrade OLD -o NEW', or drop the \"format\" field";
				return false;
			}
			if (!e && x != 2) {
				why = "shmkv_meta format " + std::to_string(x) + ": this builder writes "
				      "format 2";
				return false;
			}
		} else if (k == "delta") { // a delta's dump
			if (!apply_meta_delta(b, v, why, code))
				return false;
		} else if (k == "dedup") {
			bool x = false;
			e = v.get_bool().get(x);
			if (!e && !(o.fixed & SHMKV_OPT_DEDUP))
				o.dedup = x;
		} else {
			why = "unknown shmkv_meta field \"" + std::string(k) + "\"";
			return false;
		}
		if (e) {
			why = "shmkv_meta field \"" + std::string(k) + "\": " + error_message(e);
			return false;
		}
	}
	return true;
}

// simdjson 3.0 has no document::at_end(): past the last token there is no location.
bool at_end(ondemand::document &doc)
{
	const char *loc;
	return doc.current_location().get(loc) != SUCCESS;
}

// One JSONL line at a time into records: the parser and buffers are kept
// from line to line.
class JsonlReader {
public:
	JsonlReader(shmkv_builder *b) : b_(b), vp_(why_, b->opt.lossy_f32 != 0) {}
	// A line that is not blank; first_line: the first of the file (the meta line's place).
	int line(const char *line, size_t len, bool first_input, bool first_line)
	{
		line_buf_.assign(line, len);
		line_buf_.append(SIMDJSON_PADDING, '\0');
		ondemand::document doc;
		ondemand::object obj;
		error_code e = parser_.iterate(line_buf_.data(), len, line_buf_.size()).get(doc);
		if (!e)
			e = doc.get_object().get(obj);
		if (e)
			return bad(e == INCORRECT_TYPE ? "a line must be one JSON object"
						       : std::string("invalid JSON: ") + error_message(e));
		Fields f;
		int err = fields(obj, first_input, first_line, f);
		if (err)
			return err;
		if (b_->meta_seen && !f.has_key && !f.has_value && !f.has_type && !f.has_remove &&
		    first_line)
			return at_end(doc) ? 0 : bad("trailing characters after the JSON object");
		if (!f.has_key)
			return bad("missing \"key\"");
		if (f.remove) { // nothing but the key: a tombstone has no value, type or expiry
			const char *extra = f.has_value ? "value" : f.has_type ? "type"
					  : f.has_expires ? "expires" : nullptr;
			if (extra)
				return bad("key " + show_key((const uint8_t *)key_.data(), key_.size()) +
					   ": a removal (\"remove\": true) has no \"" + extra +
					   "\": give the key alone, or drop \"remove\" to set a value");
			if (!at_end(doc))
				return bad("trailing characters after the JSON object");
			return shmkv_builder_remove(b_, key_.data(), key_.size());
		}
		if (!f.has_value)
			return bad("missing \"value\"");
		// Pass 2: the value, now that its type is known.
		if ((e = obj.reset().error()))
			return bad(std::string("invalid JSON: ") + error_message(e));
		unsigned vtype = 0;
		for (auto field : obj) {
			std::string_view name;
			ondemand::value v;
			if ((e = field.unescaped_key().get(name)) || (e = field.value().get(v)))
				return bad(std::string("invalid JSON: ") + error_message(e));
			if (name == "value" && !vp_.parse(v, f.type, enc_, &vtype))
				return bad("key " + show_key((const uint8_t *)key_.data(), key_.size()) + ": " +
					   why_);
		}
		if (!at_end(doc))
			return bad("trailing characters after the JSON object");
		if (!f.has_expires)
			return shmkv_builder_add(b_, key_.data(), key_.size(), vtype, enc_.data(),
						 enc_.size());
		uint32_t keep = b_->expires; // the record's own, else the builder's
		b_->expires = f.expires;
		err = shmkv_builder_add(b_, key_.data(), key_.size(), vtype, enc_.data(), enc_.size());
		b_->expires = keep;
		return err;
	}

private:
	struct Fields {
		bool has_key = false, has_value = false, has_type = false, has_expires = false;
		bool has_remove = false, remove = false;
		std::string_view key_field;
		unsigned type = 0;
		uint32_t expires = 0; // 0: none (null)
	};
	shmkv_builder *b_;
	ondemand::parser parser_;
	std::string line_buf_, key_, enc_, why_;
	ValueParser vp_;

	int bad(const std::string &msg, int code = SHMKV_EINPUT)
	{
		return b_->fail(code, "%s: %s", b_->here().c_str(), msg.c_str());
	}
	// Pass 1: which fields are there (a value's meaning depends on "type"),
	// the key into key_, the type; a meta line is applied.
	int fields(ondemand::object &obj, bool first_input, bool first_line, Fields &f)
	{
		error_code e;
		for (auto field : obj) {
			std::string_view name;
			ondemand::value v;
			if ((e = field.unescaped_key().get(name)) || (e = field.value().get(v)))
				return bad(std::string("invalid JSON: ") + error_message(e));
			bool dup = false;
			int err = 0;
			if (name == "key" || name == "key_base64") {
				if (f.has_key && !f.key_field.empty() && f.key_field != name)
					return bad("give either \"key\" or \"key_base64\", not both");
				f.key_field = name;
				dup = f.has_key;
				f.has_key = true;
				err = key(name, v);
			} else if (name == "value") {
				dup = f.has_value;
				f.has_value = true;
			} else if (name == "type") {
				dup = f.has_type;
				f.has_type = true;
				err = type(v, &f.type);
			} else if (name == "expires") {
				dup = f.has_expires;
				f.has_expires = true;
				err = expires(v, &f.expires);
			} else if (name == "remove") { // a delta's tombstone (lib/FORMAT.md §19.2)
				dup = f.has_remove;
				f.has_remove = true;
				if ((e = v.get_bool().get(f.remove)))
					return bad(e == INCORRECT_TYPE ? "\"remove\" must be true or false"
								       : std::string("invalid JSON: ") +
									 error_message(e));
			} else if (name == "shmkv_meta") {
				if (!first_input || !first_line || b_->nrecs() || b_->meta_seen)
					return bad("shmkv_meta must be the first line of the first input");
				int code = SHMKV_EINPUT;
				if (!apply_meta(b_, v, why_, &code))
					return bad(why_, code);
				b_->meta_seen = true;
			} else {
				return bad("unknown field \"" + std::string(name) +
					   "\" (expected key or key_base64, value, type, expires, remove)");
			}
			if (err)
				return err;
			if (dup)
				return bad("field \"" + std::string(name) + "\" appears twice");
		}
		return 0;
	}
	int key(std::string_view name, ondemand::value v)
	{
		std::string_view s;
		error_code e = v.get_string().get(s);
		if (e)
			return bad("\"" + std::string(name) + "\"" +
				   (e == INCORRECT_TYPE ? " must be a string" : ": " + string_problem(v, e)));
		if (name == "key") {
			key_.assign(s);
			return 0;
		}
		size_t pos;
		if (!base64_decode(s, key_, &pos))
			return bad("key_base64 is not valid base64 (at character " + std::to_string(pos + 1) +
				   ")");
		return 0;
	}
	// "expires": Unix seconds (an integer), an RFC 3339 time, or null (none).
	int expires(ondemand::value v, uint32_t *out)
	{
		ondemand::json_type jt;
		error_code e = v.type().get(jt);
		if (e)
			return bad(std::string("invalid JSON: ") + error_message(e));
		std::string text;
		int64_t t = 0;
		if (jt == ondemand::json_type::null) {
			*out = 0;
			return 0;
		} else if (jt == ondemand::json_type::number) {
			std::string_view raw = trim_raw(v);
			text.assign(raw);
			if (!is_integer_text(raw))
				return expiry_error(b_, text, "Unix seconds must be an integer");
			auto r = std::from_chars(raw.data() + (raw[0] == '+'), raw.data() + raw.size(), t);
			if (r.ec != std::errc())
				return expiry_error(b_, text, "after 2106-02-07T06:28:15Z, the latest an "
						    "image holds (32-bit Unix seconds)");
		} else if (jt == ondemand::json_type::string) {
			std::string_view s;
			if ((e = v.get_string().get(s)))
				return bad("\"expires\": " + string_problem(v, e));
			text = "\"" + std::string(s) + "\"";
			std::string why;
			if (!parse_rfc3339(s, &t, why))
				return expiry_error(b_, text, why);
		} else {
			return expiry_error(b_, std::string(trim_raw(v)), "expected an RFC 3339 time (a string), Unix seconds "
					    "(an integer) or null");
		}
		if (int err = check_expiry(b_, text, t))
			return err;
		*out = (uint32_t)t;
		return 0;
	}
	static std::string_view trim_raw(ondemand::value &v)
	{
		std::string_view raw = v.raw_json_token();
		while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\t' || raw.back() == '\r' ||
					raw.back() == '\n'))
			raw.remove_suffix(1);
		return raw;
	}
	int type(ondemand::value v, unsigned *out)
	{
		std::string_view s;
		error_code e = v.get_string().get(s);
		if (e)
			return bad(e == INCORRECT_TYPE ? "\"type\" must be a string"
						       : "\"type\": " + string_problem(v, e));
		*out = type_from_name(s);
		if (!*out)
			return bad("unknown type \"" + std::string(s) +
				   "\" (bytes, string, i64, bool, f64, f32list, f64list, i64list, strlist)");
		return 0;
	}
};

} // namespace

int add_jsonl(shmkv_builder *b, const char *data, size_t size, bool first_input, uint64_t line0)
{
	JsonlReader reader(b);
	bool saw_line = false;
	return each_line(b, data, size, line0, [&](const char *line, size_t len) {
		size_t k = 0;
		while (k < len && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r'))
			k++;
		if (len - k >= 3 && memcmp(line + k, "\xEF\xBB\xBF", 3) == 0)
			return b->fail(SHMKV_EINPUT,
				       "%s: UTF-8 byte-order mark inside the file (only its first line may "
				       "start with one; were files concatenated?): remove it, e.g. "
				       "sed -i 's/^\\xEF\\xBB\\xBF//' FILE", b->here().c_str());
		if (k == len)
			return 0; // blank line
		int err = reader.line(line, len, first_input, !saw_line);
		saw_line = true;
		return err;
	});
}

} // namespace shmkv_build
