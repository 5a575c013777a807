// sys_axon.cc - AxonCache (github.com/AppLovin/AxonCache), built apart from
// this tree (bench/README.md, "AxonCache"): compiled only with
// -Daxoncache=DIR, as C++20 (its headers need it). The image is written by its
// C writer API (CacheWriter_*, cache type 5: linear probe with deduplicated
// values, typed; 2 key slots per key, as its Python benchmark does) and read
// through the C++ cache class itself, LinearProbeDedupCache::getString, which
// returns a view into the mapped file: the C reader API copies every value
// into malloc'd memory and would time malloc, not the lookup.

#include "bench.h"

#include <axoncache/capi/CacheWriterCApi.h>
#include <axoncache/common/SharedSettingsProvider.h>
#include <axoncache/cache/LinearProbeDedupCache.h>
#include <axoncache/loader/CacheOneTimeLoader.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <stdexcept>

namespace bench {

namespace {

using AxonCache = axoncache::LinearProbeDedupCache;

__attribute__((noinline)) PassResult pass_axon(const AxonCache &c, const Stream &s, size_t b,
					       size_t e)
{
	PassResult r;
	for (size_t i = b; i < e; i++) {
		auto [v, ok] = c.getString(s.keys[i]);
		if (ok) {
			r.found++;
			r.sum += digest_str_mode(s.full, v.data(), v.size());
		}
	}
	return r;
}

class AxonSystem final : public System {
public:
	AxonSystem() { name = "axoncache"; }
	~AxonSystem() override { release(); }

	void build(const Dataset &d, const std::string &dir) override
	{
		if (d.kind != Kind::Str)
			fail("axoncache: only the string workloads (its f32 lists are another API)");
		std::string task = fmt("lookup_bench_axon_%d_%" PRIu64, (int)getpid(), d.n);
		props_ = fmt("%s/%s.properties", dir.c_str(), task.c_str());
		path = fmt("%s/%s.cache", dir.c_str(), task.c_str());
		track_file(props_);
		track_file(path);
		FILE *f = std::fopen(props_.c_str(), "w");
		if (!f || std::fprintf(f, "ccache.destination_folder=%s\n", dir.c_str()) < 0 ||
		    std::fclose(f) != 0)
			fail("axoncache: cannot write %s", props_.c_str());
		auto t0 = Clock::now();
		CacheWriterHandle *w = NewCacheWriterHandle();
		if (!w || CacheWriter_Initialize(w, task.c_str(), props_.c_str(), 2 * d.n) != 0)
			fail("axoncache: CacheWriter_Initialize failed (%s)", props_.c_str());
		for (uint64_t i = 0; i < d.n; i++) {
			std::string_view k = d.key(i), v = d.str(i);
			if (CacheWriter_InsertKey(w, const_cast<char *>(k.data()), k.size(),
						  const_cast<char *>(v.data()), v.size(), 0) != 0)
				fail("axoncache: CacheWriter_InsertKey key %" PRIu64 ": %s", i,
				     CacheWriter_GetLastError(w));
		}
		if (CacheWriter_FinishCacheCreation(w) != 0)
			fail("axoncache: CacheWriter_FinishCacheCreation: %s", CacheWriter_GetLastError(w));
		CacheWriter_DeleteCppObject(w);
		build_s = seconds_since(t0);

		t0 = Clock::now();
		try {
			axoncache::SharedSettingsProvider settings("");
			axoncache::CacheOneTimeLoader loader(&settings);
			cache_ = loader.loadAbsolutePath<AxonCache>(task, path, true); // preload, as POPULATE
		} catch (const std::exception &ex) {
			fail("axoncache: loading %s: %s", path.c_str(), ex.what());
		}
		open_s = seconds_since(t0);
		struct stat st;
		if (stat(path.c_str(), &st) != 0)
			fail("axoncache: stat %s failed", path.c_str());
		bytes = malloc_bytes = (uint64_t)st.st_size;
		notes = fmt("LinearProbeDedupCache (type 5), %" PRIu64 " key slots, preloaded; "
			    "getString (a view into the file)", 2 * d.n);
	}

	bool get_digest(std::string_view key, uint64_t &digest) const override
	{
		auto [v, ok] = cache_->getString(key);
		if (ok)
			digest = digest_str(v.data(), v.size());
		return ok;
	}

	PassResult pass(const Stream &s, size_t b, size_t e) const override
	{
		return pass_axon(*cache_, s, b, e);
	}

	void release() override { cache_.reset(); }

	void remove() override
	{
		System::remove();
		if (!props_.empty()) {
			unlink(props_.c_str());
			untrack_file(props_);
			props_.clear();
		}
	}

private:
	std::string props_;
	std::shared_ptr<AxonCache> cache_;
};

} // namespace

std::unique_ptr<System> make_axon(Kind)
{
	return std::make_unique<AxonSystem>();
}

} // namespace bench
