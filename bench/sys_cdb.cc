// sys_cdb.cc - tinycdb: a constant database file (256 hash tables, 2 slots
// per record), read through cdb_find and the mmap'd cdb_getdata() pointer.
//
// Build: cdb_make_start, cdb_make_add per record, cdb_make_finish. Read: one
// cdb_init() (it mmaps the file; open_s is open + cdb_init); each pass and
// thread uses its own copy of the struct cdb, since cdb_find stores the
// position of what it found there. Files are limited to 4 GiB.

#include "bench.h"

#include <cdb.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>

namespace bench {

namespace {

__attribute__((noinline)) PassResult pass_cdb(const struct cdb *shared, Kind kind, const Stream &s,
					      size_t b, size_t e)
{
	struct cdb c = *shared;
	PassResult r;
	for (size_t i = b; i < e; i++) {
		const std::string &k = s.keys[i];
		if (cdb_find(&c, k.data(), (unsigned)k.size()) > 0) {
			const void *v = cdb_getdata(&c);
			r.found++;
			r.sum += kind == Kind::Str ? digest_str_mode(s.full, v, cdb_datalen(&c))
						   : digest_f32(v, cdb_datalen(&c) / 4);
		}
	}
	return r;
}

struct CdbFile {
	int fd = -1;
	struct cdb c {};
	void open(const std::string &path)
	{
		fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
		if (fd < 0 || cdb_init(&c, fd) != 0)
			fail("cdb: open %s: %s", path.c_str(), std::strerror(errno));
	}
	void close()
	{
		if (fd >= 0) {
			cdb_free(&c);
			::close(fd);
		}
		fd = -1;
	}
};

class CdbSystem final : public System {
public:
	explicit CdbSystem(Kind k) : kind_(k) { name = "cdb"; }
	~CdbSystem() override { release(); }

	void build(const Dataset &d, const std::string &dir) override
	{
		path = fmt("%s/lookup_bench-%d-%" PRIu64 "%s.cdb", dir.c_str(), (int)getpid(), d.n,
			   d.kind == Kind::Str ? "" : "-f32");
		track_file(path);
		uint64_t need = 2048;
		for (uint64_t i = 0; i < d.n; i++)
			need += 8 + d.key(i).size() + d.value_bytes(i) + 16;
		if (need >= (UINT64_C(1) << 32))
			fail("cdb: %" PRIu64 " records need %" PRIu64 " bytes, over tinycdb's 4 GiB "
			     "(leave cdb out with --systems)", d.n, need);
		auto t0 = Clock::now();
		int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			fail("cdb: create %s: %s", path.c_str(), std::strerror(errno));
		struct cdb_make cm;
		if (cdb_make_start(&cm, fd) < 0)
			fail("cdb_make_start: %s", std::strerror(errno));
		for (uint64_t i = 0; i < d.n; i++) {
			std::string_view k = d.key(i);
			int rc;
			if (d.kind == Kind::Str) {
				std::string_view v = d.str(i);
				rc = cdb_make_add(&cm, k.data(), (unsigned)k.size(), v.data(),
						  (unsigned)v.size());
			} else {
				rc = cdb_make_add(&cm, k.data(), (unsigned)k.size(), d.floats(i),
						  (unsigned)(4 * d.float_count(i)));
			}
			if (rc < 0)
				fail("cdb_make_add: %s", std::strerror(errno));
		}
		if (cdb_make_finish(&cm) < 0)
			fail("cdb_make_finish: %s", std::strerror(errno));
		::close(fd);
		build_s = seconds_since(t0);
		struct stat sb;
		if (stat(path.c_str(), &sb))
			fail("stat %s failed", path.c_str());
		bytes = malloc_bytes = (uint64_t)sb.st_size;
		notes = "cdb_make_add x N + cdb_make_finish; reads cdb_find + cdb_getdata (mmap)";

		t0 = Clock::now();
		file_.open(path);
		open_s = seconds_since(t0);
	}

	bool get_digest(std::string_view key, uint64_t &digest) const override
	{
		struct cdb c = file_.c;
		if (cdb_find(&c, key.data(), (unsigned)key.size()) <= 0)
			return false;
		const void *v = cdb_getdata(&c);
		digest = kind_ == Kind::Str ? digest_str(v, cdb_datalen(&c))
					    : digest_f32(v, cdb_datalen(&c) / 4);
		return true;
	}

	PassResult pass(const Stream &s, size_t b, size_t e) const override
	{
		return pass_cdb(&file_.c, kind_, s, b, e);
	}

	void release() override { file_.close(); }

private:
	Kind kind_;
	CdbFile file_;
};

class CdbReader final : public Reader {
public:
	CdbReader(const std::string &path, Kind kind) : kind_(kind) { file_.open(path); }
	~CdbReader() override { file_.close(); }
	PassResult pass(const Stream &s, size_t b, size_t e) const override
	{
		return pass_cdb(&file_.c, kind_, s, b, e);
	}

private:
	Kind kind_;
	CdbFile file_;
};

} // namespace

std::unique_ptr<System> make_cdb(Kind kind)
{
	return std::make_unique<CdbSystem>(kind);
}

std::unique_ptr<Reader> open_cdb_reader(const std::string &path, Kind kind)
{
	return std::make_unique<CdbReader>(path, kind);
}

} // namespace bench
