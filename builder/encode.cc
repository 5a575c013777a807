// builder/encode.cc - small encoders and decoders shared by the input readers.
#include <cmath>
#include <cstring>
#include <strings.h>

#include "internal.h"

namespace shmkv_build {

std::string show_key(const uint8_t *key, size_t len)
{
	std::string s = "\"";
	size_t shown = len < 64 ? len : 64;
	for (size_t i = 0; i < shown; i++) {
		uint8_t c = key[i];
		if (c == '"' || c == '\\') {
			s += '\\';
			s += (char)c;
		} else if (c >= 0x20 && c < 0x7f) {
			s += (char)c;
		} else {
			char hex[8];
			snprintf(hex, sizeof hex, "\\x%02x", c);
			s += hex;
		}
	}
	s += '"';
	if (shown < len)
		s += "... (" + std::to_string(len) + " bytes)";
	return s;
}

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

bool base64_decode(std::string_view in, std::string &out, size_t *bad_pos)
{
	out.clear();
	out.reserve(in.size() / 4 * 3 + 3);
	size_t n = in.size();
	size_t pad = 0;
	while (pad < 2 && n > 0 && in[n - 1] == '=') {
		n--;
		pad++;
	}
	if (pad && (n + pad) % 4) {
		*bad_pos = n;
		return false;
	}
	if (n % 4 == 1) { // one leftover character cannot encode a byte
		*bad_pos = n - 1;
		return false;
	}
	uint32_t acc = 0;
	int bits = 0;
	for (size_t i = 0; i < n; i++) {
		int v = b64_value((unsigned char)in[i]);
		if (v < 0) {
			*bad_pos = i;
			return false;
		}
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out += (char)((acc >> bits) & 0xff);
		}
	}
	if (bits && (acc & ((1u << bits) - 1))) { // non-canonical trailing bits
		*bad_pos = n - 1;
		return false;
	}
	return true;
}

std::string encode_strlist(const std::vector<std::string> &items)
{
	uint32_t n = (uint32_t)items.size();
	std::string out(4 * ((size_t)n + 2), '\0');
	memcpy(&out[0], &n, 4);
	uint32_t end = 0;
	memcpy(&out[4], &end, 4);
	for (uint32_t i = 0; i < n; i++) {
		out.append(items[i]);
		out += '\0';
		end += (uint32_t)items[i].size() + 1;
		memcpy(&out[8 + 4 * (size_t)i], &end, 4);
	}
	return out;
}

// "nan:0x<hex>" with exactly digits hex digits.
static bool parse_nan_bits(std::string_view s, unsigned digits, uint64_t *bits)
{
	if (s.size() != 6 + digits || s.substr(0, 6) != "nan:0x")
		return false;
	uint64_t v = 0;
	for (char c : s.substr(6)) {
		int d = (c >= '0' && c <= '9') ? c - '0'
			: (c >= 'a' && c <= 'f') ? c - 'a' + 10
			: (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
		if (d < 0)
			return false;
		v = v << 4 | (uint64_t)d;
	}
	*bits = v;
	return true;
}

static int special_kind(std::string_view s)
{
	auto eq = [&](const char *w) {
		return s.size() == strlen(w) && strncasecmp(s.data(), w, s.size()) == 0;
	};
	if (eq("inf") || eq("+inf") || eq("infinity") || eq("+infinity"))
		return 1;
	if (eq("-inf") || eq("-infinity"))
		return -1;
	if (eq("nan"))
		return 2;
	return 0;
}

bool parse_special_f64(std::string_view s, double *out)
{
	uint64_t bits;
	if (parse_nan_bits(s, 16, &bits)) {
		memcpy(out, &bits, 8);
		return std::isnan(*out);
	}
	switch (special_kind(s)) {
	case 1: *out = HUGE_VAL; return true;
	case -1: *out = -HUGE_VAL; return true;
	case 2: *out = std::nan(""); return true;
	default: return false;
	}
}

bool parse_special_f32(std::string_view s, float *out)
{
	uint64_t bits;
	if (parse_nan_bits(s, 8, &bits)) {
		uint32_t b32 = (uint32_t)bits;
		memcpy(out, &b32, 4);
		return std::isnan(*out);
	}
	switch (special_kind(s)) {
	case 1: *out = HUGE_VALF; return true;
	case -1: *out = -HUGE_VALF; return true;
	case 2: *out = std::nanf(""); return true;
	default: return false;
	}
}

} // namespace shmkv_build
