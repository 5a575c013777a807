// builder/encode.cc - small encoders and decoders shared by the input readers.
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <fast_float/fast_float.h>
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

// F from a word or nan:0x<bits> (2 * sizeof(F) hex digits); U: F's bits.
template <typename F, typename U>
static bool special_value(std::string_view s, F *out)
{
	uint64_t bits;
	if (parse_nan_bits(s, 2 * sizeof(F), &bits)) {
		U u = (U)bits;
		memcpy(out, &u, sizeof u);
		return std::isnan(*out);
	}
	switch (special_kind(s)) {
	case 1: *out = std::numeric_limits<F>::infinity(); return true;
	case -1: *out = -std::numeric_limits<F>::infinity(); return true;
	case 2: *out = std::numeric_limits<F>::quiet_NaN(); return true;
	default: return false;
	}
}

bool parse_special_f64(std::string_view s, double *out)
{
	return special_value<double, uint64_t>(s, out);
}

bool parse_special_f32(std::string_view s, float *out)
{
	return special_value<float, uint32_t>(s, out);
}

} // namespace shmkv_build

namespace shmkv_build {

bool is_integer_text(std::string_view t)
{
	size_t i = (!t.empty() && (t[0] == '-' || t[0] == '+')) ? 1 : 0;
	if (i == t.size())
		return false;
	for (; i < t.size(); i++)
		if (t[i] < '0' || t[i] > '9')
			return false;
	return true;
}

// An integer written in decimal equals the double d exactly: glibc prints an
// integral double exactly with %.0f, so compare digit strings.
bool integer_exact(std::string_view t, double d)
{
	if (!std::isfinite(d) || d != std::floor(d))
		return false;
	bool neg = !t.empty() && t[0] == '-';
	if (!t.empty() && (t[0] == '-' || t[0] == '+'))
		t.remove_prefix(1);
	while (t.size() > 1 && t[0] == '0')
		t.remove_prefix(1);
	char buf[400];
	snprintf(buf, sizeof buf, "%.0f", std::fabs(d));
	if (t != buf)
		return false;
	return neg == std::signbit(d) || t == "0";
}

std::string shortest(float f)
{
	char buf[64];
	auto r = std::to_chars(buf, buf + sizeof buf, f);
	return std::string(buf, r.ptr);
}

std::string shortest(double d)
{
	char buf[64];
	auto r = std::to_chars(buf, buf + sizeof buf, d);
	return std::string(buf, r.ptr);
}

bool number_to_f64(std::string_view t, double d, std::string &why)
{
	if (!is_integer_text(t) || integer_exact(t, d))
		return true;
	why = "integer " + std::string(t) + " cannot be held exactly by an f64 (it would be " +
	      shortest(d) + "); store it as i64, or write it with a fraction (" + std::string(t) +
	      ".0) to accept the nearest f64";
	return false;
}

// Significant digits of a decimal number's mantissa, 1..17.
static int significant_digits(std::string_view t)
{
	int n = 0;
	bool leading = true;
	for (char c : t) {
		if (c == 'e' || c == 'E')
			break;
		if (c < '0' || c > '9')
			continue;
		if (c == '0' && leading)
			continue;
		leading = false;
		n++;
	}
	return n < 1 ? 1 : n > 17 ? 17 : n;
}

bool number_to_f32(std::string_view t, double d, bool lossy, float *out, std::string &why)
{
	auto r = fast_float::from_chars(t.data(), t.data() + t.size(), *out);
	if (r.ec != std::errc() || r.ptr != t.data() + t.size()) {
		why = "cannot parse " + std::string(t) + " as f32";
		return false;
	}
	if (std::isinf(*out)) {
		why = std::string(t) + " is out of the f32 range";
		return false;
	}
	if (lossy)
		return true;
	bool exact;
	if (is_integer_text(t)) {
		exact = integer_exact(t, (double)*out);
	} else {
		// a decimal fraction: exact if it is the f32 to f64 precision, or the
		// f32 rounded to the significant digits written (0.1 and 0.100000001,
		// as shmctl dump prints, are both 0.1f; 3.14159265358979 is not)
		char buf[64];
		snprintf(buf, sizeof buf, "%.*g", significant_digits(t), (double)*out);
		double back = 0;
		fast_float::from_chars(buf, buf + strlen(buf), back);
		exact = (double)*out == d || back == d;
	}
	if (exact)
		return true;
	why = std::string(t) + " cannot be held exactly by an f32 (it would be " + shortest(*out) +
	      "); use f64list, or --lossy-f32 (C API: lossy_f32) to round to the nearest f32";
	return false;
}

const char *nonjson_float(std::string_view t)
{
	std::string_view u = t;
	if (!u.empty() && (u[0] == '-' || u[0] == '+'))
		u.remove_prefix(1);
	auto eq = [&](const char *w) {
		return u.size() == strlen(w) && strncasecmp(u.data(), w, u.size()) == 0;
	};
	if (eq("nan"))
		return "\"nan\"";
	if (eq("inf") || eq("infinity"))
		return t[0] == '-' ? "\"-inf\"" : "\"inf\"";
	return nullptr;
}

} // namespace shmkv_build

namespace shmkv_build {

namespace {
// Days from 1970-01-01 to y-m-d (proleptic Gregorian; H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

bool digits(std::string_view s, size_t at, size_t n, unsigned *out)
{
	if (at + n > s.size())
		return false;
	unsigned v = 0;
	for (size_t i = at; i < at + n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	*out = v;
	return true;
}
} // namespace

bool parse_rfc3339(std::string_view s, int64_t *out, std::string &why)
{
	unsigned y, mo, d, h, mi, sec;
	why = "expected an RFC 3339 time such as 2030-01-31T12:00:00Z or "
	      "2030-01-31T13:00:00+01:00, or Unix seconds";
	if (!digits(s, 0, 4, &y) || s.size() < 19 || s[4] != '-' || !digits(s, 5, 2, &mo) ||
	    s[7] != '-' || !digits(s, 8, 2, &d) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
	    !digits(s, 11, 2, &h) || s[13] != ':' || !digits(s, 14, 2, &mi) || s[16] != ':' ||
	    !digits(s, 17, 2, &sec))
		return false;
	static const unsigned mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
	if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || (mo == 2 && d == 29 && !leap) ||
	    h > 23 || mi > 59 || sec > 60) {
		why = "no such date or time of day";
		return false;
	}
	size_t i = 19;
	bool frac = false;
	if (i < s.size() && s[i] == '.') { // fraction: rounded up (never absent before its time)
		size_t j = ++i;
		while (i < s.size() && s[i] >= '0' && s[i] <= '9')
			frac |= s[i++] != '0';
		if (i == j)
			return false;
	}
	int64_t off = 0;
	if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
		i++;
	} else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
		unsigned oh, om;
		if (!digits(s, i + 1, 2, &oh) || i + 3 >= s.size() || s[i + 3] != ':' ||
		    !digits(s, i + 4, 2, &om))
			return false;
		if (oh > 23 || om > 59) {
			why = "no such UTC offset";
			return false;
		}
		off = (s[i] == '+' ? 1 : -1) * (int64_t)(oh * 3600 + om * 60);
		i += 6;
	} else {
		why = "an RFC 3339 time needs its UTC offset (Z or +HH:MM)";
		return false;
	}
	if (i != s.size())
		return false;
	*out = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off + frac;
	return true;
}

int expiry_error(shmkv_builder *b, const std::string &text, const std::string &why)
{
	return b->fail(SHMKV_EINPUT, "%s: expires %s: %s", b->here().c_str(), text.c_str(),
		       why.c_str());
}

int check_expiry(shmkv_builder *b, const std::string &text, int64_t t)
{
	if (t < 1)
		return expiry_error(b, text, "before 1970-01-01T00:00:01Z: an image holds Unix seconds "
				    "from 1 on");
	if (t > SHMKV_BUILD_EXPIRES_MAX)
		return expiry_error(b, text, "after 2106-02-07T06:28:15Z, the latest an image holds "
				    "(32-bit Unix seconds)");
	return 0;
}

} // namespace shmkv_build
