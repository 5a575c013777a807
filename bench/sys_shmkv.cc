// sys_shmkv.cc - shmkv (shmkv_get_str / shmkv_get_f32list) and shmkv-batch
// (shmkv_get_batch, 64 keys a call) on the same image file.

#include "bench.h"

#include <shmkv_build.h>

#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <utility>

#include <cinttypes>

namespace bench {

namespace {

__attribute__((noinline)) PassResult pass_shmkv_str(const shmkv *db, const Stream &s, size_t b,
						    size_t e)
{
	PassResult r;
	for (size_t i = b; i < e; i++) {
		const std::string &k = s.keys[i];
		const char *v;
		size_t len;
		if (shmkv_get_str(db, k.data(), k.size(), &v, &len) == 0) {
			r.found++;
			r.sum += digest_str_mode(s.full, v, len);
		}
	}
	return r;
}

__attribute__((noinline)) PassResult pass_shmkv_f32(const shmkv *db, const Stream &s, size_t b,
						    size_t e)
{
	PassResult r;
	for (size_t i = b; i < e; i++) {
		const std::string &k = s.keys[i];
		const float *v;
		size_t n;
		if (shmkv_get_f32list(db, k.data(), k.size(), &v, &n) == 0) {
			r.found++;
			r.sum += digest_f32(v, n);
		}
	}
	return r;
}

constexpr size_t kBatch = 64;

__attribute__((noinline)) PassResult pass_shmkv_batch(const shmkv *db, const Stream &s, size_t b,
						      size_t e)
{
	shmkv_value v[kBatch];
	int err[kBatch];
	PassResult r;
	for (size_t base = b; base < e; base += kBatch) {
		size_t n = std::min(kBatch, e - base);
		shmkv_get_batch(db, s.views.data() + base, n, v, err);
		for (size_t i = 0; i < n; i++) {
			if (err[i])
				continue;
			if (v[i].type == SHMKV_TYPE_STRING) {
				r.found++;
				r.sum += digest_str_mode(s.full, v[i].data, v[i].size);
			} else if (v[i].type == SHMKV_TYPE_F32LIST) {
				r.found++;
				r.sum += digest_f32(v[i].data, v[i].count);
			}
		}
	}
	return r;
}

PassResult shmkv_pass(const shmkv *db, Kind kind, const Stream &s, size_t b, size_t e)
{
	return kind == Kind::Str ? pass_shmkv_str(db, s, b, e) : pass_shmkv_f32(db, s, b, e);
}

class ShmkvSystem final : public System {
public:
	ShmkvSystem(double lf, bool huge, Kind k, std::string attach_root)
		: load_factor_(lf), open_flags_(SHMKV_OPEN_POPULATE | (huge ? SHMKV_OPEN_HUGEPAGES : 0)),
		  kind_(k), attach_root_(std::move(attach_root))
	{
		name = "shmkv";
	}
	~ShmkvSystem() override { release(); }

	const shmkv *db() const { return db_; }

	void build(const Dataset &d, const std::string &dir) override
	{
		if (!attach_root_.empty())
			return attach(d);
		path = fmt("%s/lookup_bench-%d-%" PRIu64 "%s.shmkv", dir.c_str(), (int)getpid(), d.n,
			   d.kind == Kind::Str ? "" : "-f32");
		track_file(path);
		auto t0 = Clock::now();
		shmkv_build_options o;
		int err = shmkv_build_options_init(&o);
		if (err)
			fail("shmkv_build_options_init: %s", shmkv_strerror(err));
		if (load_factor_ > 0)
			o.load_factor = load_factor_;
		shmkv_builder *b = nullptr;
		err = shmkv_builder_new(&o, &b);
		if (err)
			fail("shmkv_builder_new: %s", shmkv_strerror(err));
		for (uint64_t i = 0; i < d.n && !err; i++) {
			std::string_view k = d.key(i);
			if (d.kind == Kind::Str) {
				std::string_view v = d.str(i);
				err = shmkv_builder_add_str(b, k.data(), k.size(), v.data(), v.size());
			} else {
				err = shmkv_builder_add_f32list(b, k.data(), k.size(), d.floats(i),
								d.float_count(i));
			}
		}
		shmkv_build_stats st{};
		if (!err)
			err = shmkv_builder_finish(b, path.c_str(), &st);
		if (err) {
			std::string why = shmkv_builder_error(b);
			shmkv_builder_free(b);
			fail("shmkv builder: %s: %s", shmkv_strerror(err), why.c_str());
		}
		shmkv_builder_free(b);
		build_s = seconds_since(t0);

		// Lazy open, as a reader that trusts the loader's verification would.
		t0 = Clock::now();
		shmkv *lazy = nullptr;
		err = shmkv_open_file(path.c_str(), SHMKV_OPEN_NOVERIFY, &lazy);
		double lazy_s = seconds_since(t0);
		if (err)
			fail("shmkv_open_file %s: %s", path.c_str(), shmkv_strerror(err));
		shmkv_close(lazy);

		t0 = Clock::now();
		char why[256];
		err = shmkv_open_file_diag(path.c_str(), open_flags_, &db_, why, sizeof why);
		if (err)
			fail("shmkv_open_file %s", why);
		open_s = seconds_since(t0);
		bytes = malloc_bytes = shmkv_header(db_)->file_size;
		notes = fmt("format %u; open = POPULATE%s + section checksums; NOVERIFY lazy open %.3f "
			    "ms; finish %.2f s; %" PRIu64 " buckets, load %.3f, max_probe %u, probe %s",
			    (unsigned)shmkv_header(db_)->format_version,
			    open_flags_ & SHMKV_OPEN_HUGEPAGES ? " + HUGEPAGES" : "", lazy_s * 1e3,
			    st.seconds, st.bucket_count, st.load_factor, st.max_probe,
			    shmkv_vector_name());
	}

	void check(const Dataset &d) override
	{
		if (shmkv_header(db_)->entry_count != d.n)
			fail("shmkv: image has %" PRIu64 " entries, expected %" PRIu64,
			     shmkv_header(db_)->entry_count, d.n);
		System::check(d);
	}

	bool get_digest(std::string_view key, uint64_t &digest) const override
	{
		shmkv_value v;
		int err = shmkv_get(db_, key.data(), key.size(), &v);
		if (err == SHMKV_ENOTFOUND)
			return false;
		if (err)
			fail("shmkv: '%.*s': %s", (int)key.size(), key.data(), shmkv_strerror(err));
		if (kind_ == Kind::Str) {
			if (v.type != SHMKV_TYPE_STRING || ((const char *)v.data)[v.size] != 0)
				fail("shmkv: '%.*s' is not a NUL-terminated string", (int)key.size(),
				     key.data());
			digest = digest_str(v.data, v.size);
		} else {
			if (v.type != SHMKV_TYPE_F32LIST)
				fail("shmkv: '%.*s' is not an f32list", (int)key.size(), key.data());
			digest = digest_f32(v.data, v.count);
		}
		return true;
	}

	PassResult pass(const Stream &s, size_t b, size_t e) const override
	{
		return shmkv_pass(db_, kind_, s, b, e);
	}

	void release() override
	{
		shmkv_close(db_);
		db_ = nullptr;
	}

private:
	// --attach: the loader at attach_root_ serves cache kv_N (published by
	// the caller, bench/peers), read from the loader's memory (hugetlb pages)
	void attach(const Dataset &d)
	{
		if (d.kind != Kind::Str)
			fail("--attach: only the string workloads read a loader's cache");
		std::string cache = fmt("kv_%" PRIu64, d.n);
		auto t0 = Clock::now();
		char why[256];
		int err = shmkv_attach_diag(attach_root_.c_str(), cache.c_str(), 0, &db_, why,
					    sizeof why);
		if (err)
			fail("shmkv_attach %s %s: %s", attach_root_.c_str(), cache.c_str(), why);
		open_s = seconds_since(t0);
		bytes = malloc_bytes = shmkv_header(db_)->file_size;
		notes = fmt("format %u; shmkv_attach to the loader's cache %s (its memory: %s)",
			    (unsigned)shmkv_header(db_)->format_version, cache.c_str(),
			    attach_memory().c_str());
	}

	// where the attached image lives, from this process's mappings: a
	// hugetlbfs file shows as KernelPageSize 2048 kB in smaps
	static std::string attach_memory()
	{
		FILE *f = std::fopen("/proc/self/smaps", "r");
		std::string out = "unknown";
		char line[512], cur[512] = "";
		while (f && std::fgets(line, sizeof line, f)) {
			unsigned long kps;
			if (std::strchr(line, '-') && std::strstr(line, ".shmkv"))
				std::snprintf(cur, sizeof cur, "%s", line);
			else if (cur[0] && std::sscanf(line, "KernelPageSize: %lu kB", &kps) == 1) {
				out = fmt("%lu KiB pages", kps);
				cur[0] = 0;
			}
		}
		if (f)
			std::fclose(f);
		return out;
	}

	double load_factor_;
	unsigned open_flags_;
	Kind kind_;
	std::string attach_root_; // --attach
	shmkv *db_ = nullptr;
};

class ShmkvBatchSystem final : public System {
public:
	ShmkvBatchSystem(const ShmkvSystem *img, std::unique_ptr<ShmkvSystem> own)
		: img_(img), own_(std::move(own))
	{
		name = "shmkv-batch";
		if (own_)
			img_ = own_.get();
	}

	void build(const Dataset &d, const std::string &dir) override
	{
		if (own_) // no shmkv system in this run: build the image here
			own_->build(d, dir);
		path = own_ ? own_->path : "";
		build_s = img_->build_s;
		open_s = img_->open_s;
		bytes = img_->bytes;
		malloc_bytes = img_->malloc_bytes;
		notes = fmt("shmkv_get_batch, %zu keys a call, %s image", kBatch,
			    own_ ? "its own" : (img_->name + "'s").c_str());
	}

	// All keys through shmkv_get_batch in chunks of 1M, then the absent ones.
	void check(const Dataset &d) override
	{
		const uint64_t chunk = 1000000;
		std::vector<shmkv_key> keys;
		std::vector<shmkv_value> v;
		std::vector<int> err;
		for (uint64_t base = 0; base < d.n; base += chunk) {
			uint64_t m = std::min(chunk, d.n - base);
			keys.clear();
			for (uint64_t i = base; i < base + m; i++) {
				std::string_view k = d.key(i);
				keys.push_back({k.data(), k.size()});
			}
			v.resize(m);
			err.resize(m);
			size_t found = shmkv_get_batch(img_->db(), keys.data(), m, v.data(), err.data());
			if (found != m)
				fail("shmkv-batch: found %zu of keys %" PRIu64 "..%" PRIu64, found, base,
				     base + m - 1);
			for (uint64_t j = 0; j < m; j++) {
				if (err[j])
					fail("shmkv-batch: key %" PRIu64 ": %s", base + j,
					     shmkv_strerror(err[j]));
				uint64_t dg = d.kind == Kind::Str ? digest_str(v[j].data, v[j].size)
								  : digest_f32(v[j].data, v[j].count);
				if (dg != d.digest(base + j))
					fail("shmkv-batch: key %" PRIu64 " has a wrong value", base + j);
			}
		}
		std::vector<std::string> absent = absent_keys(d.n);
		keys.clear();
		for (const std::string &k : absent)
			keys.push_back({k.data(), k.size()});
		v.resize(keys.size());
		err.resize(keys.size());
		if (shmkv_get_batch(img_->db(), keys.data(), keys.size(), v.data(), err.data()) != 0)
			fail("shmkv-batch: found an absent key");
		for (size_t i = 0; i < keys.size(); i++)
			if (err[i] != SHMKV_ENOTFOUND)
				fail("shmkv-batch: absent key '%s' gave %s", absent[i].c_str(),
				     shmkv_strerror(err[i]));
	}

	bool get_digest(std::string_view, uint64_t &) const override { return false; }

	PassResult pass(const Stream &s, size_t b, size_t e) const override
	{
		return pass_shmkv_batch(img_->db(), s, b, e);
	}

	void release() override
	{
		if (own_)
			own_->release();
	}

	void remove() override
	{
		if (own_)
			own_->remove();
		path.clear();
	}

private:
	const ShmkvSystem *img_;
	std::unique_ptr<ShmkvSystem> own_;
};

class ShmkvReader final : public Reader {
public:
	// path: an image file, or attach:ROOT for cache kv_N of the loader at ROOT
	ShmkvReader(const std::string &path, Kind kind, uint64_t n) : kind_(kind)
	{
		if (path.rfind("attach:", 0) == 0) {
			std::string root = path.substr(7), cache = fmt("kv_%" PRIu64, n);
			char why[256];
			if (shmkv_attach_diag(root.c_str(), cache.c_str(), 0, &db_, why, sizeof why))
				fail("shmkv_attach %s %s: %s", root.c_str(), cache.c_str(), why);
			return;
		}
		int err = shmkv_open_file(path.c_str(), SHMKV_OPEN_POPULATE, &db_);
		if (err)
			fail("shmkv_open_file %s: %s", path.c_str(), shmkv_strerror(err));
	}
	~ShmkvReader() override { shmkv_close(db_); }
	PassResult pass(const Stream &s, size_t b, size_t e) const override
	{
		return shmkv_pass(db_, kind_, s, b, e);
	}

private:
	Kind kind_;
	shmkv *db_ = nullptr;
};

} // namespace

std::unique_ptr<System> make_shmkv(const Options &o, Kind kind)
{
	return std::make_unique<ShmkvSystem>(o.load_factor, o.hugepages, kind, o.attach);
}

// img: the shmkv system, when the run has it (phases.cc)
std::unique_ptr<System> make_shmkv_batch(const Options &o, Kind kind, const System *img)
{
	auto *s = dynamic_cast<const ShmkvSystem *>(img);
	if (s)
		return std::make_unique<ShmkvBatchSystem>(s, nullptr);
	return std::make_unique<ShmkvBatchSystem>(
		nullptr, std::make_unique<ShmkvSystem>(o.load_factor, o.hugepages, kind, o.attach));
}

std::unique_ptr<Reader> open_shmkv_reader(const std::string &path, Kind kind, uint64_t n)
{
	return std::make_unique<ShmkvReader>(path, kind, n);
}

} // namespace bench
