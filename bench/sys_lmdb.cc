// sys_lmdb.cc - LMDB: a B+tree in one file, read through mdb_get in a
// read-only transaction (one per pass and thread).
//
// Build: the keys are sorted (timed: a bulk load needs sorted input) and put
// with MDB_APPEND, which fills pages completely, in write transactions of 1M
// records, MDB_NOSYNC (the file is on tmpfs). Read: the file is opened with
// MDB_RDONLY | MDB_NOLOCK (no writer exists) and MDB_NORDAHEAD; open_s is
// mdb_env_create + mdb_env_open + the read transaction that opens the DBI.

#include "bench.h"

#include <lmdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <numeric>

namespace bench {

namespace {

void check_rc(int rc, const char *what)
{
	if (rc)
		fail("lmdb: %s: %s", what, mdb_strerror(rc));
}

struct LmdbEnv {
	MDB_env *env = nullptr;
	MDB_dbi dbi = 0;

	void open(const std::string &path)
	{
		check_rc(mdb_env_create(&env), "mdb_env_create");
		check_rc(mdb_env_open(env, path.c_str(),
				      MDB_RDONLY | MDB_NOSUBDIR | MDB_NOLOCK | MDB_NORDAHEAD, 0444),
			 "mdb_env_open");
		MDB_txn *txn;
		check_rc(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn), "mdb_txn_begin");
		check_rc(mdb_dbi_open(txn, nullptr, 0, &dbi), "mdb_dbi_open");
		mdb_txn_abort(txn);
	}
	void close()
	{
		if (env)
			mdb_env_close(env);
		env = nullptr;
	}
};

__attribute__((noinline)) PassResult pass_lmdb(MDB_env *env, MDB_dbi dbi, Kind kind,
					       const Stream &s, size_t b, size_t e)
{
	MDB_txn *txn;
	check_rc(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn), "mdb_txn_begin");
	PassResult r;
	for (size_t i = b; i < e; i++) {
		const std::string &k = s.keys[i];
		MDB_val key{k.size(), (void *)k.data()}, val;
		if (mdb_get(txn, dbi, &key, &val) == 0) {
			r.found++;
			r.sum += kind == Kind::Str ? digest_str_mode(s.full, val.mv_data, val.mv_size)
						   : digest_f32(val.mv_data, val.mv_size / 4);
		}
	}
	mdb_txn_abort(txn);
	return r;
}

class LmdbSystem final : public System {
public:
	explicit LmdbSystem(Kind k) : kind_(k) { name = "lmdb"; }
	~LmdbSystem() override { release(); }

	void build(const Dataset &d, const std::string &dir) override
	{
		path = fmt("%s/lookup_bench-%d-%" PRIu64 "%s.lmdb", dir.c_str(), (int)getpid(), d.n,
			   d.kind == Kind::Str ? "" : "-f32");
		track_file(path);
		unlink(path.c_str());
		uint64_t payload = 0;
		for (uint64_t i = 0; i < d.n; i++)
			payload += d.key(i).size() + d.value_bytes(i) + 16;
		auto t0 = Clock::now();
		std::vector<uint32_t> order(d.n);
		std::iota(order.begin(), order.end(), 0u);
		std::sort(order.begin(), order.end(),
			  [&d](uint32_t a, uint32_t b) { return d.key(a) < d.key(b); });
		double sort_s = seconds_since(t0);
		MDB_env *env;
		check_rc(mdb_env_create(&env), "mdb_env_create");
		check_rc(mdb_env_set_mapsize(env, (size_t)(payload * 3 + (64u << 20))), "set_mapsize");
		check_rc(mdb_env_open(env, path.c_str(), MDB_NOSUBDIR | MDB_NOSYNC | MDB_NOLOCK, 0644),
			 "mdb_env_open");
		MDB_dbi dbi = 0;
		const uint64_t per_txn = 1000000;
		for (uint64_t base = 0; base < d.n; base += per_txn) {
			MDB_txn *txn;
			check_rc(mdb_txn_begin(env, nullptr, 0, &txn), "mdb_txn_begin");
			if (base == 0)
				check_rc(mdb_dbi_open(txn, nullptr, 0, &dbi), "mdb_dbi_open");
			for (uint64_t j = base; j < std::min(d.n, base + per_txn); j++) {
				uint32_t i = order[j];
				std::string_view k = d.key(i);
				MDB_val key{k.size(), (void *)k.data()}, val;
				if (d.kind == Kind::Str) {
					std::string_view v = d.str(i);
					val = {v.size(), (void *)v.data()};
				} else {
					val = {4 * d.float_count(i), (void *)d.floats(i)};
				}
				check_rc(mdb_put(txn, dbi, &key, &val, MDB_APPEND), "mdb_put");
			}
			check_rc(mdb_txn_commit(txn), "mdb_txn_commit");
		}
		MDB_stat st;
		MDB_envinfo info;
		mdb_env_stat(env, &st);
		mdb_env_info(env, &info);
		mdb_env_close(env);
		build_s = seconds_since(t0);
		struct stat sb;
		if (stat(path.c_str(), &sb))
			fail("stat %s failed", path.c_str());
		bytes = malloc_bytes = (uint64_t)sb.st_size;
		notes = fmt("sort %.2f s + MDB_APPEND puts; depth %u, %zu leaf + %zu branch + %zu "
			    "overflow pages of %u B",
			    sort_s, st.ms_depth, st.ms_leaf_pages, st.ms_branch_pages,
			    st.ms_overflow_pages, st.ms_psize);

		t0 = Clock::now();
		env_.open(path);
		open_s = seconds_since(t0);
	}

	bool get_digest(std::string_view key, uint64_t &digest) const override
	{
		MDB_txn *txn;
		check_rc(mdb_txn_begin(env_.env, nullptr, MDB_RDONLY, &txn), "mdb_txn_begin");
		MDB_val k{key.size(), (void *)key.data()}, v;
		int rc = key.empty() ? MDB_NOTFOUND : mdb_get(txn, env_.dbi, &k, &v);
		if (rc == 0)
			digest = kind_ == Kind::Str ? digest_str(v.mv_data, v.mv_size)
						    : digest_f32(v.mv_data, v.mv_size / 4);
		mdb_txn_abort(txn);
		if (rc && rc != MDB_NOTFOUND)
			check_rc(rc, "mdb_get");
		return rc == 0;
	}

	PassResult pass(const Stream &s, size_t b, size_t e) const override
	{
		return pass_lmdb(env_.env, env_.dbi, kind_, s, b, e);
	}

	void release() override { env_.close(); }

private:
	Kind kind_;
	LmdbEnv env_;
};

class LmdbReader final : public Reader {
public:
	LmdbReader(const std::string &path, Kind kind) : kind_(kind) { env_.open(path); }
	~LmdbReader() override { env_.close(); }
	PassResult pass(const Stream &s, size_t b, size_t e) const override
	{
		return pass_lmdb(env_.env, env_.dbi, kind_, s, b, e);
	}

private:
	Kind kind_;
	LmdbEnv env_;
};

} // namespace

std::unique_ptr<System> make_lmdb(Kind kind)
{
	return std::make_unique<LmdbSystem>(kind);
}

std::unique_ptr<Reader> open_lmdb_reader(const std::string &path, Kind kind)
{
	return std::make_unique<LmdbReader>(path, kind);
}

const char *lmdb_version()
{
	return MDB_VERSION_STRING;
}

} // namespace bench
