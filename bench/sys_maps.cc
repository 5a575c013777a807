// sys_maps.cc - absl::flat_hash_map and std::unordered_map, keyed by
// std::string, holding std::string values or std::vector<float> (typed set).
// Memory is what the maps ask their allocator for (slots or nodes, bucket
// arrays, the float vectors), and the mallinfo2() growth as a cross-check.

#include "bench.h"

#include <absl/container/flat_hash_map.h>

#include <malloc.h>

#include <atomic>
#include <cinttypes>
#include <unordered_map>

namespace bench {

namespace {

std::atomic<uint64_t> g_alloc_live{0}; // bytes the maps ask for, live

template <class T> struct CountingAllocator {
	using value_type = T;
	CountingAllocator() = default;
	template <class U> CountingAllocator(const CountingAllocator<U> &) {}
	T *allocate(size_t n)
	{
		g_alloc_live += n * sizeof(T);
		return std::allocator<T>().allocate(n);
	}
	void deallocate(T *p, size_t n)
	{
		g_alloc_live -= n * sizeof(T);
		std::allocator<T>().deallocate(p, n);
	}
	template <class U> bool operator==(const CountingAllocator<U> &) const { return true; }
	template <class U> bool operator!=(const CountingAllocator<U> &) const { return false; }
};

using FloatVec = std::vector<float, CountingAllocator<float>>;

// Heap bytes in use per glibc (all arenas, mmapped chunks included).
uint64_t malloc_in_use()
{
	struct mallinfo2 mi = mallinfo2();
	return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

// The maps' default hash and equality (for absl, its string hash); only the
// allocator differs.
template <class V>
using AbslMap = absl::flat_hash_map<std::string, V,
				    absl::container_internal::hash_default_hash<std::string>,
				    absl::container_internal::hash_default_eq<std::string>,
				    CountingAllocator<std::pair<const std::string, V>>>;
template <class V>
using StdMap = std::unordered_map<std::string, V, std::hash<std::string>, std::equal_to<std::string>,
				  CountingAllocator<std::pair<const std::string, V>>>;

inline uint64_t digest_of(const std::string &v, bool full = false)
{
	return digest_str_mode(full, v.data(), v.size());
}

inline uint64_t digest_of(const FloatVec &v, bool = false)
{
	return digest_f32(v.data(), v.size());
}

// The timed loop, one instantiation per map type (perf and callgrind see
// pass_map<...> by name).
template <class Map>
__attribute__((noinline)) PassResult pass_map(const Map &m, const Stream &s, size_t b, size_t e)
{
	PassResult r;
	for (size_t i = b; i < e; i++) {
		auto it = m.find(s.keys[i]);
		if (it != m.end()) {
			r.found++;
			r.sum += digest_of(it->second, s.full);
		}
	}
	return r;
}

template <class Map> class MapSystem final : public System {
public:
	explicit MapSystem(const char *n) { name = n; }

	void build(const Dataset &d, const std::string &) override
	{
		uint64_t alloc0 = g_alloc_live, heap0 = malloc_in_use();
		auto t0 = Clock::now();
		m_.reserve(d.n);
		for (uint64_t i = 0; i < d.n; i++) {
			std::string_view k = d.key(i);
			if constexpr (std::is_same_v<typename Map::mapped_type, std::string>) {
				std::string_view v = d.str(i);
				m_.emplace(std::piecewise_construct, std::forward_as_tuple(k.data(), k.size()),
					   std::forward_as_tuple(v.data(), v.size()));
			} else {
				const float *f = d.floats(i);
				m_.emplace(std::piecewise_construct, std::forward_as_tuple(k.data(), k.size()),
					   std::forward_as_tuple(f, f + d.float_count(i)));
			}
		}
		build_s = seconds_since(t0);
		bytes = g_alloc_live - alloc0;
		uint64_t heap1 = malloc_in_use();
		malloc_bytes = heap1 > heap0 ? heap1 - heap0 : 0;
		notes = fmt("%zu buckets, load %.3f", (size_t)m_.bucket_count(),
			    (double)m_.size() / (double)m_.bucket_count());
	}

	void check(const Dataset &d) override
	{
		if (m_.size() != d.n)
			fail("%s: size %zu, expected %" PRIu64, name.c_str(), (size_t)m_.size(), d.n);
		System::check(d);
	}

	bool get_digest(std::string_view key, uint64_t &digest) const override
	{
		auto it = m_.find(std::string(key));
		if (it == m_.end())
			return false;
		digest = digest_of(it->second);
		return true;
	}

	PassResult pass(const Stream &s, size_t b, size_t e) const override
	{
		return pass_map(m_, s, b, e);
	}

	void release() override { Map().swap(m_); }

private:
	Map m_;
};

} // namespace

std::unique_ptr<System> make_map(const std::string &name, Kind kind)
{
	if (name == "absl")
		return kind == Kind::Str ? std::unique_ptr<System>(new MapSystem<AbslMap<std::string>>("absl"))
					 : std::unique_ptr<System>(new MapSystem<AbslMap<FloatVec>>("absl"));
	return kind == Kind::Str ? std::unique_ptr<System>(new MapSystem<StdMap<std::string>>("std"))
				 : std::unique_ptr<System>(new MapSystem<StdMap<FloatVec>>("std"));
}

// For the reader processes: a process of its own that builds its own map.
class MapReader final : public Reader {
public:
	MapReader(const std::string &name, const Dataset &d) : sys_(make_map(name, d.kind))
	{
		sys_->build(d, "");
	}
	PassResult pass(const Stream &s, size_t b, size_t e) const override
	{
		return sys_->pass(s, b, e);
	}

private:
	std::unique_ptr<System> sys_;
};

std::unique_ptr<Reader> make_map_reader(const std::string &name, const Dataset &d)
{
	return std::make_unique<MapReader>(name, d);
}

} // namespace bench
