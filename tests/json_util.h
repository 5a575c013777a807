// json_util.h - shmctl's -j output and the loader's control-socket replies
// as a Json tree for the tests (tests/cli_test.cc, tests/loader/): jansson
// parses (strict RFC 8259), Json gives the tests paths and typed getters.
#ifndef SHMKV_TEST_JSON_UTIL_H
#define SHMKV_TEST_JSON_UTIL_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <jansson.h>

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

// Converts jansson's tree into Json (numbers keep their text: integers
// exactly, reals in the shortest form that reads back the same).
inline void from_jansson(const json_t *v, Json *o)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		o->kind = Json::OBJ;
		const char *k;
		json_t *x;
		json_object_foreach(const_cast<json_t *>(v), k, x) from_jansson(x, &o->obj[k]);
		break;
	}
	case JSON_ARRAY: {
		o->kind = Json::ARR;
		size_t i;
		json_t *x;
		json_array_foreach(v, i, x) {
			o->arr.emplace_back();
			from_jansson(x, &o->arr.back());
		}
		break;
	}
	case JSON_STRING:
		o->kind = Json::STR;
		o->str.assign(json_string_value(v), json_string_length(v));
		break;
	case JSON_INTEGER:
		o->kind = Json::NUM;
		o->str = std::to_string((long long)json_integer_value(v));
		o->num = (double)json_integer_value(v);
		break;
	case JSON_REAL: {
		o->kind = Json::NUM;
		o->num = json_real_value(v);
		char b[40];
		for (int prec = 1; prec <= 17; prec++) {
			snprintf(b, sizeof b, "%.*g", prec, o->num);
			if (strtod(b, nullptr) == o->num)
				break;
		}
		o->str = b;
		break;
	}
	case JSON_TRUE:
	case JSON_FALSE:
		o->kind = Json::BOOL;
		o->b = json_is_true(v);
		break;
	case JSON_NULL: break;
	}
}

// Parses one JSON value (jansson, strict: nothing but whitespace after it).
inline bool parse_json(const std::string &text, Json *out)
{
	*out = Json();
	json_error_t e;
	json_t *v = json_loadb(text.data(), text.size(), JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
	if (!v)
		return false;
	from_jansson(v, out);
	json_decref(v);
	return true;
}

} // namespace shmkv_test

#endif // SHMKV_TEST_JSON_UTIL_H
