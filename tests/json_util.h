// json_util.h - a small JSON reader for the tests: enough for shmctl's -j
// output and the loader's control-socket replies (tests/cli_test.cc,
// tests/loader/). Not a validator: it accepts what those print.
#ifndef SHMKV_TEST_JSON_UTIL_H
#define SHMKV_TEST_JSON_UTIL_H

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace shmkv_test {

struct Json {
	enum Kind { NUL, BOOL, NUM, STR, ARR, OBJ } kind = NUL;
	bool b = false;
	double num = 0;  // NUM
	std::string str; // STR; NUM keeps its text
	std::vector<Json> arr;
	std::map<std::string, Json> obj;

	// Member k of an object (a path "a.b" descends); a null Json if absent.
	const Json &operator[](const std::string &path) const
	{
		static const Json none;
		const Json *j = this;
		size_t i = 0;
		while (j && i <= path.size()) {
			size_t dot = path.find('.', i);
			std::string k = path.substr(i, dot == std::string::npos ? std::string::npos
										: dot - i);
			auto it = j->obj.find(k);
			if (j->kind != OBJ || it == j->obj.end())
				return none;
			j = &it->second;
			if (dot == std::string::npos)
				return *j;
			i = dot + 1;
		}
		return none;
	}
	bool has(const std::string &path) const
	{
		size_t dot = path.rfind('.');
		const Json &parent = dot == std::string::npos ? *this : (*this)[path.substr(0, dot)];
		return parent.kind == OBJ &&
		       parent.obj.count(dot == std::string::npos ? path : path.substr(dot + 1));
	}
	// Member k of an object, or NULL (no path: k may contain dots).
	const Json *get(const std::string &k) const
	{
		auto it = obj.find(k);
		return kind == OBJ && it != obj.end() ? &it->second : nullptr;
	}
	bool is_null() const { return kind == NUL; }
	bool ok() const { return (*this)["ok"].kind == BOOL && (*this)["ok"].b; }
	uint64_t u64() const { return kind == NUM ? strtoull(str.c_str(), nullptr, 10) : 0; }
	bool truthy() const { return kind == BOOL && b; }
	std::string s() const { return kind == STR ? str : ""; }
};

class JsonParser {
public:
	explicit JsonParser(const std::string &s) : s_(s) {}
	bool parse(Json *out)
	{
		if (!value(out, 0))
			return false;
		ws();
		return i_ == s_.size();
	}

private:
	const std::string &s_;
	size_t i_ = 0;
	void ws()
	{
		while (i_ < s_.size() && strchr(" \t\r\n", s_[i_]))
			i_++;
	}
	bool lit(const char *w)
	{
		size_t n = strlen(w);
		if (s_.compare(i_, n, w) != 0)
			return false;
		i_ += n;
		return true;
	}
	bool string(std::string *o)
	{
		if (i_ >= s_.size() || s_[i_] != '"')
			return false;
		i_++;
		while (i_ < s_.size() && s_[i_] != '"') {
			char c = s_[i_++];
			if (c != '\\') {
				*o += c;
				continue;
			}
			if (i_ >= s_.size())
				return false;
			char e = s_[i_++];
			switch (e) {
			case 'n': *o += '\n'; break;
			case 't': *o += '\t'; break;
			case 'r': *o += '\r'; break;
			case 'b': *o += '\b'; break;
			case 'f': *o += '\f'; break;
			case 'u': {
				if (i_ + 4 > s_.size())
					return false;
				unsigned cp = (unsigned)strtoul(s_.substr(i_, 4).c_str(), nullptr, 16);
				i_ += 4;
				if (cp < 0x80) {
					*o += (char)cp;
				} else if (cp < 0x800) {
					*o += (char)(0xc0 | cp >> 6);
					*o += (char)(0x80 | (cp & 0x3f));
				} else {
					*o += (char)(0xe0 | cp >> 12);
					*o += (char)(0x80 | (cp >> 6 & 0x3f));
					*o += (char)(0x80 | (cp & 0x3f));
				}
				break;
			}
			default: *o += e; break;
			}
		}
		if (i_ >= s_.size())
			return false;
		i_++;
		return true;
	}
	bool value(Json *o, int depth)
	{
		if (depth > 32)
			return false;
		ws();
		if (i_ >= s_.size())
			return false;
		char c = s_[i_];
		if (c == '{') {
			o->kind = Json::OBJ;
			i_++;
			ws();
			if (i_ < s_.size() && s_[i_] == '}') {
				i_++;
				return true;
			}
			for (;;) {
				ws();
				std::string k;
				if (!string(&k))
					return false;
				ws();
				if (i_ >= s_.size() || s_[i_++] != ':')
					return false;
				if (!value(&o->obj[k], depth + 1))
					return false;
				ws();
				if (i_ < s_.size() && s_[i_] == ',') {
					i_++;
					continue;
				}
				if (i_ < s_.size() && s_[i_] == '}') {
					i_++;
					return true;
				}
				return false;
			}
		}
		if (c == '[') {
			o->kind = Json::ARR;
			i_++;
			ws();
			if (i_ < s_.size() && s_[i_] == ']') {
				i_++;
				return true;
			}
			for (;;) {
				o->arr.emplace_back();
				if (!value(&o->arr.back(), depth + 1))
					return false;
				ws();
				if (i_ < s_.size() && s_[i_] == ',') {
					i_++;
					continue;
				}
				if (i_ < s_.size() && s_[i_] == ']') {
					i_++;
					return true;
				}
				return false;
			}
		}
		if (c == '"') {
			o->kind = Json::STR;
			return string(&o->str);
		}
		if (lit("true")) {
			o->kind = Json::BOOL;
			o->b = true;
			return true;
		}
		if (lit("false")) {
			o->kind = Json::BOOL;
			return true;
		}
		if (lit("null"))
			return true;
		size_t st = i_;
		while (i_ < s_.size() && strchr("+-0123456789.eE", s_[i_]))
			i_++;
		if (i_ == st)
			return false;
		o->kind = Json::NUM;
		o->str = s_.substr(st, i_ - st);
		o->num = strtod(o->str.c_str(), nullptr);
		return true;
	}
};

inline bool parse_json(const std::string &text, Json *out)
{
	*out = Json();
	return JsonParser(text).parse(out);
}

} // namespace shmkv_test

#endif // SHMKV_TEST_JSON_UTIL_H
