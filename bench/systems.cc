// systems.cc - the list of systems, the factory and the shared check.

#include "bench.h"

#include <unistd.h>

#include <cinttypes>

#ifndef SHMKV_BENCH_HAVE_LMDB
#error "meson.build defines SHMKV_BENCH_HAVE_LMDB to 0 or 1"
#endif
#ifndef SHMKV_BENCH_HAVE_CDB
#error "meson.build defines SHMKV_BENCH_HAVE_CDB to 0 or 1"
#endif
#ifndef SHMKV_BENCH_HAVE_AXON
#error "meson.build defines SHMKV_BENCH_HAVE_AXON to 0 or 1"
#endif

namespace bench {

std::unique_ptr<System> make_shmkv(const Options &o, Kind kind);
std::unique_ptr<System> make_shmkv_batch(const Options &o, Kind kind,
					 const System *img);
std::unique_ptr<System> make_map(const std::string &name, Kind kind);
std::unique_ptr<Reader> open_shmkv_reader(const std::string &path, Kind kind, uint64_t n);
#if SHMKV_BENCH_HAVE_LMDB
std::unique_ptr<System> make_lmdb(Kind kind);
std::unique_ptr<Reader> open_lmdb_reader(const std::string &path, Kind kind);
const char *lmdb_version();
#endif
#if SHMKV_BENCH_HAVE_CDB
std::unique_ptr<System> make_cdb(Kind kind);
std::unique_ptr<Reader> open_cdb_reader(const std::string &path, Kind kind);
#endif
#if SHMKV_BENCH_HAVE_AXON
std::unique_ptr<System> make_axon(Kind kind); // sys_axon.cc, -Daxoncache=DIR
#endif

std::vector<std::string> all_systems()
{
	return {"shmkv", "shmkv-batch", "absl", "std", "lmdb", "cdb", "axoncache"};
}

bool is_shmkv(const std::string &name)
{
	return name == "shmkv";
}

bool is_shmkv_batch(const std::string &name)
{
	return name == "shmkv-batch";
}

std::string shmkv_image_system(const std::string &)
{
	return "shmkv";
}

bool system_available(const std::string &name)
{
	if (name == "lmdb")
		return SHMKV_BENCH_HAVE_LMDB;
	if (name == "cdb")
		return SHMKV_BENCH_HAVE_CDB;
	if (name == "axoncache")
		return SHMKV_BENCH_HAVE_AXON;
	return true;
}

const char *system_version(const std::string &name)
{
#if SHMKV_BENCH_HAVE_LMDB
	if (name == "lmdb")
		return lmdb_version();
#endif
	(void)name;
	return "";
}

std::unique_ptr<System> make_system(const std::string &name, const Options &o, Kind kind,
				    const System *shmkv_image)
{
	if (is_shmkv(name))
		return make_shmkv(o, kind);
	if (is_shmkv_batch(name))
		return make_shmkv_batch(o, kind, shmkv_image);
	if (name == "absl" || name == "std")
		return make_map(name, kind);
#if SHMKV_BENCH_HAVE_LMDB
	if (name == "lmdb")
		return make_lmdb(kind);
#endif
#if SHMKV_BENCH_HAVE_CDB
	if (name == "cdb")
		return make_cdb(kind);
#endif
#if SHMKV_BENCH_HAVE_AXON
	if (name == "axoncache")
		return make_axon(kind);
#endif
	return nullptr;
}

std::unique_ptr<Reader> open_reader(const std::string &system, const std::string &path, Kind kind,
				    uint64_t n)
{
	if (is_shmkv(system))
		return open_shmkv_reader(path, kind, n);
#if SHMKV_BENCH_HAVE_LMDB
	if (system == "lmdb")
		return open_lmdb_reader(path, kind);
#endif
#if SHMKV_BENCH_HAVE_CDB
	if (system == "cdb")
		return open_cdb_reader(path, kind);
#endif
	fail("no file reader for %s", system.c_str());
}

// Every key found with its value's digest; keys never added not found.
void System::check(const Dataset &d)
{
	for (uint64_t i = 0; i < d.n; i++) {
		uint64_t dg = 0;
		std::string_view k = d.key(i);
		if (!get_digest(k, dg))
			fail("%s: key '%.*s' not found", name.c_str(), (int)k.size(), k.data());
		if (dg != d.digest(i))
			fail("%s: key '%.*s' has a wrong value", name.c_str(), (int)k.size(), k.data());
	}
	for (const std::string &k : absent_keys(d.n)) {
		uint64_t dg;
		if (get_digest(k, dg))
			fail("%s: absent key '%s' found", name.c_str(), k.c_str());
	}
}

void System::remove()
{
	if (!path.empty()) {
		unlink(path.c_str());
		untrack_file(path);
	}
	path.clear();
}

} // namespace bench
