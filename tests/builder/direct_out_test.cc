// direct_out_test: builder/direct.cc, the image's positional writes.
//
//   DirectOut.PiecesInAnyOrderMakeTheFile  random pieces of a file, in random order,
//                                          congruent ones by two threads at once (interior)
//                                          and the rest through a bounce buffer: the file
//                                          is the bytes, and only the last partial page is
//                                          still kept at the end; O_DIRECT where statx says the file
//                                          system takes it ($TMPDIR, ext4 in CI), buffered on
//                                          tmpfs and with SHMKV_BUILD_NO_DIRECT=1; off after
//                                          (skipped, after the buffered cases, where neither
//                                          $TMPDIR nor the working directory takes O_DIRECT)
//                                          a direct write refused with EINVAL goes buffered
//   DirectOut.ErrorsAreReturned            a descriptor not open for writing: -EBADF
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <random>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "../../builder/direct.h"
#include "../test_util.h"

using namespace shmkv_test;
using shmkv_build::DirectOut;

namespace {

// Does the file system of fd report O_DIRECT alignments DirectOut can meet?
bool dio_supported(int fd)
{
	struct statx sx;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) != 0 || !(sx.stx_mask & STATX_DIOALIGN))
		return false;
	return sx.stx_dio_offset_align && sx.stx_dio_mem_align &&
	       DirectOut::kAlign % sx.stx_dio_offset_align == 0 &&
	       DirectOut::kAlign % sx.stx_dio_mem_align == 0;
}

struct Piece {
	uint64_t off;
	size_t n;
	bool congruent;
	uint8_t *p = nullptr; // in mem, at off modulo kAlign (plus 1 if not congruent)
	std::vector<uint8_t> mem;
};

// Writes want through DirectOut in pieces; returns the file's bytes.
std::string write_pieces(const std::string &path, const std::string &want, uint64_t seed,
			 bool expect_direct)
{
	int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	EXPECT_GE(fd, 0) << path << ": " << strerror(errno);
	if (fd < 0)
		return {};
	EXPECT_EQ(ftruncate(fd, (off_t)want.size()), 0);
	std::mt19937_64 rng(seed);
	std::vector<Piece> pieces;
	const size_t A = DirectOut::kAlign;
	for (uint64_t off = 0; off < want.size();) {
		size_t n = std::min<size_t>(want.size() - off,
					    rng() % 4 == 0 ? 1 + rng() % 100 : 1 + rng() % (300 << 10));
		Piece x;
		x.off = off;
		x.n = n;
		x.congruent = rng() % 3 != 0;
		x.mem.resize(n + 2 * A);
		uint8_t *base = x.mem.data() + (A - (uintptr_t)x.mem.data() % A); // aligned
		x.p = base + off % A + (x.congruent ? 0 : 1);
		memcpy(x.p, want.data() + off, n);
		pieces.push_back(std::move(x));
		off += n;
	}
	std::shuffle(pieces.begin(), pieces.end(), rng);
	{
		DirectOut d(fd);
		EXPECT_EQ(d.direct(), expect_direct) << path;
		if (expect_direct) {
			EXPECT_TRUE(fcntl(fd, F_GETFL) & O_DIRECT);
		}
		// congruent pieces: two threads write their interiors at once
		std::vector<const Piece *> cong;
		for (const Piece &x : pieces) {
			if (x.congruent) {
				EXPECT_TRUE(DirectOut::congruent(x.off, x.p));
				cong.push_back(&x);
				EXPECT_EQ(d.edges(x.off, x.p, x.n), 0);
			}
		}
		int e0 = 0, e1 = 0;
		auto half = [&](size_t from, int *err) {
			for (size_t i = from; i < cong.size(); i += 2)
				if (int e = d.interior(cong[i]->off, cong[i]->p, cong[i]->n))
					*err = e;
		};
		std::thread other(half, 1, &e1);
		half(0, &e0);
		other.join();
		EXPECT_EQ(e0, 0);
		EXPECT_EQ(e1, 0);
		for (const Piece &x : pieces) {
			if (!x.congruent) {
				EXPECT_EQ(d.write(x.off, x.p, x.n), 0);
			}
		}
		// pages the pieces covered whole were written as they were: at most
		// the file's last, partial page is left for finish()
		EXPECT_LE(d.kept(), want.size() % DirectOut::kAlign ? 1u : 0u) << want.size();
		EXPECT_EQ(d.finish(want.size()), 0);
		EXPECT_FALSE(fcntl(fd, F_GETFL) & O_DIRECT); // the header goes through the page cache
	}
	close(fd);
	return read_file(path);
}

std::string random_bytes(size_t n, uint64_t seed)
{
	std::mt19937_64 rng(seed);
	std::string s(n, '\0');
	for (auto &c : s)
		c = (char)(rng() & 0xff);
	return s;
}

} // namespace

// Whether a regular file in dir reports O_DIRECT alignments DirectOut takes
// (statx says nothing of a directory).
bool dio_in(const std::string &dir)
{
	std::string f = dir + "/probe";
	int fd = open(f.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	EXPECT_GE(fd, 0) << f << ": " << strerror(errno);
	bool yes = fd >= 0 && dio_supported(fd);
	if (fd >= 0)
		close(fd);
	unlink(f.c_str());
	return yes;
}

TEST(DirectOut, PiecesInAnyOrderMakeTheFile)
{
	TempDir tmp, cwd(".");
	bool in_tmp = dio_in(tmp.path()), in_cwd = dio_in(cwd.path());
	const TempDir &dir = in_tmp || !in_cwd ? tmp : cwd; // one with O_DIRECT if any
	bool here = in_tmp || in_cwd;
	for (size_t size : {size_t(1), size_t(4095), size_t(4096), size_t(3 << 20) + 123}) {
		std::string want = random_bytes(size, size);
		EXPECT_TRUE(write_pieces(dir.file("f"), want, size, here) == want) << size;
	}
	// statx gives no alignment on tmpfs: buffered, the same bytes
	if (access("/dev/shm", W_OK) == 0) {
		TempDir shm("/dev/shm");
		std::string want = random_bytes((1 << 20) + 77, 5);
		EXPECT_TRUE(write_pieces(shm.file("f"), want, 5, false) == want);
	}
	// turned off
	setenv("SHMKV_BUILD_NO_DIRECT", "1", 1);
	std::string want = random_bytes((1 << 20) + 5, 6);
	EXPECT_TRUE(write_pieces(dir.file("g"), want, 6, false) == want);
	unsetenv("SHMKV_BUILD_NO_DIRECT");
	if (here) { // a direct write the file system refuses (memory not aligned): buffered after
		std::string want = random_bytes(3 * DirectOut::kAlign, 7);
		std::string path = dir.file("h");
		int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		ASSERT_GE(fd, 0);
		{
			DirectOut d(fd);
			EXPECT_TRUE(d.direct());
			std::vector<uint8_t> mem(5 * DirectOut::kAlign);
			uint8_t *p = mem.data() + (DirectOut::kAlign - (uintptr_t)mem.data() % DirectOut::kAlign) + 1;
			memcpy(p, want.data(), want.size());
			EXPECT_EQ(d.interior(0, p, want.size()), 0); // misaligned memory: EINVAL, then buffered
			EXPECT_FALSE(d.direct());
			EXPECT_FALSE(fcntl(fd, F_GETFL) & O_DIRECT);
			EXPECT_EQ(d.finish(want.size()), 0);
		}
		close(fd);
		EXPECT_TRUE(read_file(path) == want);
	}
	if (!here)
		GTEST_SKIP() << "neither " << tmp.path() << " nor the working directory takes O_DIRECT "
			     << "(statx STATX_DIOALIGN): only the buffered path was tested";
}

TEST(DirectOut, ErrorsAreReturned)
{
	TempDir dir;
	ASSERT_TRUE(write_file(dir.file("ro"), std::string(8192, 'a')));
	int fd = open(dir.file("ro").c_str(), O_RDONLY | O_CLOEXEC);
	ASSERT_GE(fd, 0);
	{
		DirectOut d(fd);
		std::vector<uint8_t> mem(3 * DirectOut::kAlign);
		uint8_t *p = mem.data() + (DirectOut::kAlign - (uintptr_t)mem.data() % DirectOut::kAlign);
		EXPECT_EQ(d.interior(0, p, DirectOut::kAlign), -EBADF);
		EXPECT_EQ(d.write(0, p + 1, 2 * DirectOut::kAlign - 2), -EBADF);
		EXPECT_EQ(d.finish(8192), -EBADF); // the kept partial pages
	}
	close(fd);
}
