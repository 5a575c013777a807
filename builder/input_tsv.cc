// builder/input_tsv.cc - TSV records: key<TAB>value, one per line; with
// tsv_removes a line of a key alone (no TAB) is a delta's removal.
// Escapes in keys and values: \\ \t \n \r \0, and \, inside list elements.
// Lists are comma-separated; an empty field is an empty list. Numbers are
// parsed with fast_float (floats) and std::from_chars (integers).
#include <charconv>
#include <cmath>
#include <cstring>
#include <fast_float/fast_float.h>

#include "internal.h"

namespace shmkv_build {

namespace {

// Unescapes s; with split_commas, also splits on unescaped commas.
bool unescape(std::string_view s, bool split_commas, std::vector<std::string> &out,
	      std::string &why)
{
	out.assign(1, std::string());
	for (size_t i = 0; i < s.size(); i++) {
		char c = s[i];
		if (c == ',' && split_commas) {
			out.emplace_back();
			continue;
		}
		if (c != '\\') {
			out.back() += c;
			continue;
		}
		if (++i == s.size()) {
			why = "a lone backslash ends the field (write \\\\ for a backslash)";
			return false;
		}
		switch (s[i]) {
		case '\\': out.back() += '\\'; break;
		case 't': out.back() += '\t'; break;
		case 'n': out.back() += '\n'; break;
		case 'r': out.back() += '\r'; break;
		case '0': out.back() += '\0'; break;
		case ',': out.back() += ','; break;
		default:
			why = std::string("unknown escape \\") + s[i] + " (known: \\\\ \\t \\n \\r \\0 \\,)";
			return false;
		}
	}
	return true;
}

std::string_view trim_spaces(std::string_view s)
{
	while (!s.empty() && s.front() == ' ')
		s.remove_prefix(1);
	while (!s.empty() && s.back() == ' ')
		s.remove_suffix(1);
	return s;
}

bool parse_i64(std::string_view s, int64_t *x, std::string &why)
{
	std::string_view t = trim_spaces(s);
	const char *b = t.data(), *e = t.data() + t.size();
	if (b != e && *b == '+')
		b++;
	auto r = std::from_chars(b, e, *x);
	if (r.ec == std::errc::result_out_of_range) {
		why = "integer " + std::string(t) + " is out of the i64 range";
		return false;
	}
	if (r.ec != std::errc() || r.ptr != e || t.empty()) {
		why = "\"" + std::string(s) + "\" is not an integer";
		return false;
	}
	return true;
}

// A float field: "inf", "nan"... or a number, checked for loss like JSON
// numbers (builder/README.md, "Types").
bool parse_f64(std::string_view s, double *x, std::string &why)
{
	std::string_view t = trim_spaces(s);
	if (parse_special_f64(t, x))
		return true;
	auto r = fast_float::from_chars(t.data(), t.data() + t.size(), *x);
	if (r.ec != std::errc() || r.ptr != t.data() + t.size() || t.empty() || !std::isfinite(*x)) {
		if (r.ec == std::errc() && r.ptr == t.data() + t.size() && !t.empty())
			why = std::string(t) + " is out of the f64 range";
		else
			why = "\"" + std::string(s) + "\" is not a number";
		return false;
	}
	return number_to_f64(t, *x, why);
}

bool parse_f32(std::string_view s, bool lossy, float *x, std::string &why)
{
	std::string_view t = trim_spaces(s);
	if (parse_special_f32(t, x))
		return true;
	double d;
	auto r = fast_float::from_chars(t.data(), t.data() + t.size(), d);
	if (r.ec != std::errc() || r.ptr != t.data() + t.size() || t.empty()) {
		why = "\"" + std::string(s) + "\" is not a number";
		return false;
	}
	return number_to_f32(t, d, lossy, x, why);
}

// A field parsed by parse into its 8 bytes.
template <typename T, typename P>
bool scalar(std::string_view field, P parse, std::string &enc, std::string &why)
{
	T x;
	if (!parse(field, &x, why))
		return false;
	enc.assign((const char *)&x, sizeof x);
	return true;
}

// Encodes one TSV value field as type.
bool encode_field(std::string_view field, unsigned type, bool lossy_f32, std::string &enc,
		  std::string &why)
{
	std::vector<std::string> parts;
	enc.clear();
	switch (type) {
	case SHMKV_TYPE_STRING:
		if (!unescape(field, false, parts, why))
			return false;
		enc = parts[0];
		return true;
	case SHMKV_TYPE_BYTES: {
		size_t bad;
		if (!base64_decode(field, enc, &bad)) {
			why = "bytes value is not valid base64 (at character " + std::to_string(bad + 1) + ")";
			return false;
		}
		return true;
	}
	case SHMKV_TYPE_BOOL:
		if (field == "true" || field == "1")
			enc.assign(1, '\1');
		else if (field == "false" || field == "0")
			enc.assign(1, '\0');
		else {
			why = "\"" + std::string(field) + "\" is not a bool (true, false, 1, 0)";
			return false;
		}
		return true;
	case SHMKV_TYPE_I64: return scalar<int64_t>(field, parse_i64, enc, why);
	case SHMKV_TYPE_F64: return scalar<double>(field, parse_f64, enc, why);
	default: break;
	}
	// lists
	if (!field.empty() && !unescape(field, true, parts, why))
		return false;
	if (type == SHMKV_TYPE_STRLIST) {
		enc = encode_strlist(parts);
		return true;
	}
	for (size_t i = 0; i < parts.size(); i++) {
		bool good;
		if (type == SHMKV_TYPE_F32LIST) {
			float f;
			good = parse_f32(parts[i], lossy_f32, &f, why);
			enc.append((const char *)&f, 4);
		} else if (type == SHMKV_TYPE_F64LIST) {
			double d;
			good = parse_f64(parts[i], &d, why);
			enc.append((const char *)&d, 8);
		} else {
			int64_t x;
			good = parse_i64(parts[i], &x, why);
			enc.append((const char *)&x, 8);
		}
		if (!good) {
			why = "element " + std::to_string(i + 1) + ": " + why;
			return false;
		}
	}
	return true;
}

} // namespace

int add_tsv(shmkv_builder *b, const char *data, size_t size, unsigned type, uint64_t line0)
{
	std::string enc, why;
	std::vector<std::string> key;
	auto bad = [&](const std::string &msg) {
		return b->fail(SHMKV_EINPUT, "%s: %s", b->here().c_str(), msg.c_str());
	};
	return each_line(b, data, size, line0, [&](const char *text, size_t len) {
		std::string_view line(text, len);
		if (!line.empty() && line.back() == '\r')
			line.remove_suffix(1);
		if (line.empty())
			return 0;
		size_t tab = line.find('\t');
		if (tab == std::string_view::npos && b->opt.tsv_removes) { // a removal: the key alone
			if (!unescape(line, false, key, why))
				return bad("key: " + why);
			return shmkv_builder_remove(b, key[0].data(), key[0].size());
		}
		if (tab == std::string_view::npos)
			return bad(b->removes ? "no TAB between key and value (a line of a key alone "
						"removes it with --tsv-removes)"
					      : "no TAB between key and value");
		size_t fields = 1;
		for (char c : line)
			fields += c == '\t';
		bool exp_col = b->opt.tsv_expires != 0;
		if (fields != (exp_col ? 3u : 2u))
			return bad("found " + std::to_string(fields) +
				   (exp_col ? " fields, expected 3 (key<TAB>value<TAB>expires; "
					    : " fields, expected 2 (key<TAB>value; ") +
				   "write a TAB inside a field as \\t)");
		uint32_t expires = b->expires; // the builder's, unless the column gives one
		if (exp_col) {
			size_t tab2 = line.rfind('\t');
			std::string_view ef = trim_spaces(line.substr(tab2 + 1));
			line = line.substr(0, tab2);
			if (!ef.empty()) {
				int64_t t = 0;
				std::string text(ef);
				if (ef.find_first_not_of("0123456789") == std::string_view::npos) {
					auto r = std::from_chars(ef.data(), ef.data() + ef.size(), t);
					if (r.ec != std::errc())
						t = INT64_MAX; // past 2106: check_expiry says so
				} else if (!parse_rfc3339(ef, &t, why)) {
					return expiry_error(b, text, why);
				}
				if (int err = check_expiry(b, text, t))
					return err;
				expires = (uint32_t)t;
			}
		}
		if (!unescape(line.substr(0, tab), false, key, why))
			return bad("key: " + why);
		if (!encode_field(line.substr(tab + 1), type, b->opt.lossy_f32 != 0, enc, why))
			return bad("key " + show_key((const uint8_t *)key[0].data(), key[0].size()) + ": " +
				   why);
		uint32_t keep = b->expires;
		b->expires = expires;
		int err = shmkv_builder_add(b, key[0].data(), key[0].size(), type, enc.data(), enc.size());
		b->expires = keep;
		return err;
	});
}

} // namespace shmkv_build
