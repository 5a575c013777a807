// data.cc - the data sets ("key_%d" -> "val_%d", or -> f32 lists) and the
// lookup streams (uniform, zipf, 50% and 100% absent keys).

#include "bench.h"

#include <cmath>

namespace bench {

size_t format_key(char *buf, const char *prefix, uint64_t i)
{
	size_t n = std::strlen(prefix);
	std::memcpy(buf, prefix, n);
	char digits[24];
	size_t d = 0;
	do {
		digits[d++] = (char)('0' + i % 10);
		i /= 10;
	} while (i);
	while (d)
		buf[n++] = digits[--d];
	return n;
}

static uint64_t mix(uint64_t x)
{
	return splitmix64(x);
}

// Value i of the typed set: 16..128 floats in [-0.5, 0.5).
static size_t typed_count(uint64_t i)
{
	return 16 + (size_t)(mix(i) % 113);
}

Dataset make_dataset(uint64_t n, Kind kind)
{
	Dataset d;
	d.n = n;
	d.kind = kind;
	d.keybuf.assign(n * Dataset::kStride, 0);
	for (uint64_t i = 0; i < n; i++) {
		char *p = &d.keybuf[i * Dataset::kStride];
		p[Dataset::kStride - 1] = (char)format_key(p, "key_", i);
	}
	if (kind == Kind::Str) {
		d.strbuf.assign(n * Dataset::kStride, 0);
		for (uint64_t i = 0; i < n; i++) {
			char *p = &d.strbuf[i * Dataset::kStride];
			p[Dataset::kStride - 1] = (char)format_key(p, "val_", i);
		}
	} else {
		d.f32_off.resize(n + 1);
		uint64_t total = 0;
		for (uint64_t i = 0; i < n; i++) {
			d.f32_off[i] = total;
			total += typed_count(i);
		}
		d.f32_off[n] = total;
		d.f32.resize(total);
		for (uint64_t i = 0; i < n; i++) {
			uint64_t s = i * 0x2545F4914F6CDD1DULL;
			for (uint64_t j = d.f32_off[i]; j < d.f32_off[i + 1]; j++)
				d.f32[j] = (float)(splitmix64(s) >> 40) * (1.0f / 16777216.0f) - 0.5f;
		}
	}
	return d;
}

uint64_t Dataset::digest(uint64_t i, bool full) const
{
	if (kind == Kind::Str) {
		std::string_view v = str(i);
		return digest_str_mode(full, v.data(), v.size());
	}
	return digest_f32(floats(i), float_count(i));
}

const char *pattern_name(Pattern p)
{
	switch (p) {
	case Pattern::Uniform: return "uniform";
	case Pattern::Zipf: return "zipf";
	case Pattern::Miss50: return "miss50";
	case Pattern::Miss100: return "miss100";
	case Pattern::UniformFull: return "uniform-full";
	}
	return "?";
}

// YCSB's zipfian generator (Gray et al., "Quickly generating billion-record
// synthetic databases"): rank 0 is the most popular. Ranks are then spread over
// the key space by a bijection, so the hot keys are not neighbours.
struct Zipf {
	uint64_t n;
	double theta, alpha, zetan, eta, half_pow_theta;
	Zipf(uint64_t n_, double t) : n(n_), theta(t)
	{
		zetan = 0;
		for (uint64_t i = 1; i <= n; i++)
			zetan += 1.0 / std::pow((double)i, theta);
		double zeta2 = 1.0 + 1.0 / std::pow(2.0, theta);
		alpha = 1.0 / (1.0 - theta);
		eta = (1.0 - std::pow(2.0 / (double)n, 1.0 - theta)) / (1.0 - zeta2 / zetan);
		half_pow_theta = 1.0 + std::pow(0.5, theta);
	}
	uint64_t next(uint64_t &state) const
	{
		double u = (double)(splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
		double uz = u * zetan;
		if (uz < 1.0)
			return 0;
		if (uz < half_pow_theta)
			return 1;
		uint64_t r = (uint64_t)((double)n * std::pow(eta * u - eta + 1.0, alpha));
		return r < n ? r : n - 1;
	}
};

Stream make_stream(const Dataset &d, Pattern p, uint64_t count, uint64_t seed, double theta)
{
	Stream s;
	s.name = pattern_name(p);
	s.full = p == Pattern::UniformFull;
	if (s.full) // the same keys as "uniform": only the read differs
		p = Pattern::Uniform;
	s.keys.reserve(count);
	uint64_t state = seed * 0x9E3779B97F4A7C15ULL + (uint64_t)p;
	std::unique_ptr<Zipf> z;
	if (p == Pattern::Zipf)
		z = std::make_unique<Zipf>(d.n, theta);
	char buf[32];
	for (uint64_t j = 0; j < count; j++) {
		uint64_t i;
		bool present = true;
		switch (p) {
		case Pattern::Uniform: i = uniform(state, d.n); break;
		case Pattern::Zipf:
			// 2654435761 is prime and above any n here: a bijection of [0, n)
			i = (uint64_t)(((unsigned __int128)z->next(state) * 2654435761u) % d.n);
			break;
		case Pattern::Miss50:
			present = splitmix64(state) & 1;
			i = uniform(state, d.n);
			break;
		case Pattern::Miss100:
		default:
			present = false;
			i = uniform(state, d.n);
			break;
		}
		if (present) {
			std::string_view k = d.key(i);
			s.keys.emplace_back(k.data(), k.size());
			s.hits++;
			s.expect += d.digest(i, s.full);
		} else { // key_n .. key_2n-1: same shape, never added
			size_t len = format_key(buf, "key_", d.n + i);
			s.keys.emplace_back(buf, len);
		}
	}
	s.views.reserve(count);
	for (const std::string &k : s.keys)
		s.views.push_back({k.data(), k.size()});
	return s;
}

std::vector<std::string> absent_keys(uint64_t n)
{
	std::vector<std::string> a;
	char buf[32];
	uint64_t count = std::min<uint64_t>(n, 100000);
	for (uint64_t i = 0; i < count; i++)
		a.emplace_back(buf, format_key(buf, "key_", n + i));
	for (uint64_t i = 0; i < 1000; i++) {
		a.emplace_back(buf, format_key(buf, "val_", i));
		a.emplace_back(std::string(buf, format_key(buf, "key_", i)) + "x");
	}
	a.emplace_back("");
	return a;
}

} // namespace bench
