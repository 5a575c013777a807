// noalloc_test: lookups make no allocation and no system call (lib/shmkv.h
// promises both).
//
//   NoAlloc.MillionGets      malloc, calloc, realloc, free, aligned_alloc,
//                            posix_memalign, memalign, valloc are interposed
//                            here (forwarding to glibc's __libc_*) and counted
//                            around 1M gets of hits, misses and typed getters
//                            (plus 1M more through shmkv_get_batch), and
//                            around a full iteration
//   NoAlloc.MillionGetsWithExpiry  the same on an image whose records
//                            expire (in 2100: found; the expiry's clock read
//                            is a vDSO call, not counted here)
//   NoSyscall.MillionGets    a forked child enters seccomp strict mode, where
//                            any system call but read, write, exit and
//                            sigreturn kills it with SIGKILL, runs the same
//                            1M gets and reports through a pipe
//
// Not built in sanitizer builds: their runtimes own malloc and make calls of
// their own.

#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "test_util.h"

using namespace shmkv_test;

// ---- allocation counting -------------------------------------------------

extern "C" {
void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void __libc_free(void *);
void *__libc_memalign(size_t, size_t);
void *__libc_valloc(size_t);
}

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_calls{0};
inline void count()
{
	if (g_counting.load(std::memory_order_relaxed))
		g_calls.fetch_add(1, std::memory_order_relaxed);
}
} // namespace

extern "C" {
void *malloc(size_t n) noexcept
{
	count();
	return __libc_malloc(n);
}
void *calloc(size_t n, size_t m) noexcept
{
	count();
	return __libc_calloc(n, m);
}
void *realloc(void *p, size_t n) noexcept
{
	count();
	return __libc_realloc(p, n);
}
void free(void *p) noexcept
{
	count();
	__libc_free(p);
}
void *aligned_alloc(size_t a, size_t n) noexcept
{
	count();
	return __libc_memalign(a, n);
}
void *memalign(size_t a, size_t n) noexcept
{
	count();
	return __libc_memalign(a, n);
}
void *valloc(size_t n) noexcept
{
	count();
	return __libc_valloc(n);
}
int posix_memalign(void **out, size_t a, size_t n) noexcept
{
	count();
	if (a < sizeof(void *) || (a & (a - 1)))
		return EINVAL;
	void *p = __libc_memalign(a, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}
} // extern "C"

namespace {

// A mixed image and the keys to look up, all prepared before measuring:
// inline records, OUT ones (long keys) and, with expiring, records that
// expire (in 2100: found, the clock read once per get; FORMAT.md §17).
struct Workload {
	TempDir dir;
	Db db;
	std::string keys;               // all keys back to back
	std::vector<uint32_t> off, len; // key i is keys[off[i], +len[i])
	std::vector<uint8_t> hit;       // key i is in the image

	explicit Workload(bool expiring = false)
	{
		std::string img = dir.file("w.shmkv");
		Builder b;
		EXPECT_TRUE(b.ok());
		const float f[4] = {1, 2, 3, 4};
		const char *strs[2] = {"a", "bc"};
		const size_t lens[2] = {1, 2};
		for (int i = 0; i < 50000; i++) {
			std::string k = "key:" + std::to_string(i);
			if (i % 50 == 0) // OUT: a key over 255 bytes
				k += std::string(300, 'L');
			if (expiring) {
				EXPECT_EQ(shmkv_builder_set_expires(b, i % 3 ? 0 : INT64_C(4102444800)), 0);
			}
			switch (i % 4) {
			case 0: EXPECT_EQ(b.i64(k, i), 0); break;
			case 1: EXPECT_EQ(b.str(k, "value " + std::to_string(i % 100)), 0); break;
			case 2:
				EXPECT_EQ(shmkv_builder_add_f32list(b, k.data(), k.size(), f, 4), 0);
				break;
			default:
				EXPECT_EQ(shmkv_builder_add_strlist(b, k.data(), k.size(), strs, lens, 2), 0);
				break;
			}
			add_key(k, true);
			add_key("miss:" + std::to_string(i), false);
		}
		add_key(std::string(SHMKV_MAX_KEY_LEN + 1, 'x'), false); // SHMKV_EKEYLEN
		EXPECT_EQ(b.finish(img), 0) << b.error();
		db = open_db(img, SHMKV_OPEN_POPULATE);
	}
	void add_key(const std::string &k, bool in)
	{
		off.push_back((uint32_t)keys.size());
		len.push_back((uint32_t)k.size());
		hit.push_back(in);
		keys += k;
	}
};

struct Result {
	uint64_t hits, misses, sum;
};

// 1M lookups through every getter; no allocation, no system call.
Result run_gets(const Workload &w, long n)
{
	Result r = {0, 0, 0};
	const size_t nk = w.off.size();
	const char *keys = w.keys.data();
	const shmkv *db = w.db.get();
	for (long i = 0; i < n; i++) {
		size_t j = (size_t)i % nk;
		const char *k = keys + w.off[j];
		size_t kl = w.len[j];
		shmkv_value v;
		int err = shmkv_get(db, k, kl, &v);
		if (err) {
			r.misses++;
			continue;
		}
		r.hits++;
		int64_t iv = 0;
		const char *s = nullptr;
		size_t sl = 0;
		const float *fp = nullptr;
		shmkv_strlist l{};
		if (shmkv_get_i64(db, k, kl, &iv) == 0) {
			r.sum += (uint64_t)iv;
		} else if (shmkv_get_str(db, k, kl, &s, &sl) == 0) {
			r.sum += sl + (unsigned char)s[0];
		} else if (shmkv_get_f32list(db, k, kl, &fp, &sl) == 0) {
			r.sum += sl + (uint64_t)fp[3];
		} else if (shmkv_get_strlist(db, k, kl, &l) == 0) {
			size_t len = 0;
			r.sum += shmkv_strlist_count(&l) + (unsigned char)*shmkv_strlist_at(&l, 1, &len) + len;
		}
		double d = 0;
		r.sum += shmkv_get_f64(db, k, kl, &d) == SHMKV_ETYPE;
	}
	// and batched: n more lookups in groups of 64
	shmkv_key batch[64];
	shmkv_value vals[64];
	int errs[64];
	for (long i = 0; i < n; i += 64) {
		size_t m = n - i < 64 ? (size_t)(n - i) : 64;
		for (size_t j = 0; j < m; j++) {
			size_t x = (size_t)(i + (long)j) * 7 % nk;
			batch[j].data = keys + w.off[x];
			batch[j].len = w.len[x];
		}
		size_t found = shmkv_get_batch(db, batch, m, vals, errs);
		r.hits += found;
		r.misses += m - found;
		for (size_t j = 0; j < m; j++)
			if (errs[j] == 0)
				r.sum += vals[j].size;
	}
	return r;
}

const long kGets = 1000000;

TEST(NoAlloc, InterpositionWorks)
{
	g_calls = 0;
	g_counting = true;
	void *p = malloc(16);
	p = realloc(p, 32);
	free(p);
	std::string *s = new std::string(100, 'x');
	delete s;
	g_counting = false;
	EXPECT_GE(g_calls.load(), 5) << "malloc interposition is not in effect";
}

void million_gets(const Workload &w);

TEST(NoAlloc, MillionGets)
{
	Workload w;
	million_gets(w);
}

TEST(NoAlloc, MillionGetsWithExpiry)
{
	Workload w(true);
	ASSERT_TRUE(w.db.hdr()->flags & SHMKV_HFLAG_EXPIRY);
	million_gets(w);
}

void million_gets(const Workload &w)
{
	ASSERT_TRUE(w.db);
	run_gets(w, 1000); // warm up
	g_calls = 0;
	g_counting = true;
	Result r = run_gets(w, kGets);
	g_counting = false;
	EXPECT_EQ(g_calls.load(), 0) << "lookups allocated or freed memory";
	EXPECT_GT(r.hits, 0u);
	EXPECT_GT(r.misses, 0u);
	EXPECT_EQ(r.hits + r.misses, 2 * (uint64_t)kGets);
	// iteration allocates nothing either: the live entries, every record
	for (bool all : {false, true}) {
		g_calls = 0;
		g_counting = true;
		shmkv_iter it;
		if (all)
			shmkv_iter_init_all(w.db, &it);
		else
			shmkv_iter_init(w.db, &it);
		const void *k = nullptr;
		size_t kl = 0;
		shmkv_value v;
		uint64_t n = 0;
		while (shmkv_iter_next(&it, &k, &kl, &v) == 0)
			n++;
		g_counting = false;
		EXPECT_EQ(g_calls.load(), 0) << "iteration allocated or freed memory";
		EXPECT_EQ(n, w.db.hdr()->entry_count);
	}
}

// Runs fn in a child under seccomp strict mode; returns its wait status, or
// -1 with *skip set when the kernel has no strict mode. fn writes to fd.
template <typename Fn>
int in_strict_child(Fn fn, std::string *out, bool *skip)
{
	int p[2];
	if (pipe(p) != 0)
		return -2;
	fflush(nullptr);
	pid_t pid = fork();
	if (pid < 0)
		return -2;
	if (pid == 0) {
		close(p[0]);
		if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0) != 0) {
			char c = 'S';
			(void)!write(p[1], &c, 1);
			_exit(3);
		}
		fn(p[1]);
		syscall(SYS_exit, 0); // exit_group is not allowed in strict mode
		__builtin_unreachable();
	}
	close(p[1]);
	char buf[256];
	ssize_t n;
	while ((n = read(p[0], buf, sizeof buf)) > 0)
		out->append(buf, (size_t)n);
	close(p[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
	}
	*skip = out->size() == 1 && (*out)[0] == 'S';
	return status;
}

// The reason for a skip when in_strict_child() found no strict mode. qemu-user
// refuses it (EINVAL) on any kernel: its own system calls would be killed.
std::string no_strict_mode()
{
	std::string emu = emulator();
	if (!emu.empty())
		return emu + " refuses seccomp strict mode (prctl(PR_SET_SECCOMP) failed)";
	return "kernel without seccomp strict mode (prctl(PR_SET_SECCOMP) failed)";
}

TEST(NoSyscall, StrictModeKillsOnSyscall)
{
	std::string out;
	bool skip = false;
	int status = in_strict_child(
		[](int fd) {
			(void)!write(fd, "ok", 2);
			syscall(SYS_getpid); // not allowed: SIGKILL
			(void)!write(fd, "survived", 8);
		},
		&out, &skip);
	if (skip)
		GTEST_SKIP() << no_strict_mode();
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
	EXPECT_EQ(out, "ok");
}

TEST(NoSyscall, MillionGets)
{
	Workload w;
	ASSERT_TRUE(w.db);
	Result want = run_gets(w, kGets); // in the parent, for comparison
	std::string out;
	bool skip = false;
	int status = in_strict_child(
		[&w](int fd) {
			Result r = run_gets(w, kGets);
			(void)!write(fd, &r, sizeof r);
		},
		&out, &skip);
	if (skip)
		GTEST_SKIP() << no_strict_mode();
	ASSERT_FALSE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		<< "a lookup made a system call (killed by seccomp strict mode)";
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
	ASSERT_EQ(out.size(), sizeof(Result));
	Result got;
	memcpy(&got, out.data(), sizeof got);
	EXPECT_EQ(got.hits, want.hits);
	EXPECT_EQ(got.misses, want.misses);
	EXPECT_EQ(got.sum, want.sum);
	EXPECT_EQ(got.hits + got.misses, 2 * (uint64_t)kGets);
}

} // namespace
