// builder/direct.cc - positional writes of the image, O_DIRECT where taken.
#include "direct.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <sys/stat.h>
#include <utility>
#include <unistd.h>

#include "internal.h"

namespace shmkv_build {

namespace {

bool no_direct()
{
	const char *e = getenv("SHMKV_BUILD_NO_DIRECT"); // tests, and a way out
	return e && *e && strcmp(e, "0") != 0;
}

} // namespace

void DirectOut::Free::operator()(uint8_t *p) const
{
	free(p);
}

DirectOut::DirectOut(int fd) : fd_(fd), flags_(fcntl(fd, F_GETFL))
{
#ifdef STATX_DIOALIGN // Linux 6.1 headers; older: buffered
	struct statx sx;
	if (flags_ < 0 || no_direct() || statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) != 0 ||
	    !(sx.stx_mask & STATX_DIOALIGN) || !sx.stx_dio_offset_align || !sx.stx_dio_mem_align ||
	    kAlign % sx.stx_dio_offset_align || kAlign % sx.stx_dio_mem_align)
		return;
	if (fcntl(fd, F_SETFL, flags_ | O_DIRECT) == 0)
		direct_.store(true, std::memory_order_relaxed);
#endif
}

DirectOut::~DirectOut()
{
	if (direct_.load(std::memory_order_relaxed))
		fcntl(fd_, F_SETFL, flags_);
}

int DirectOut::pwrite_all(uint64_t off, const uint8_t *p, size_t n)
{
	bool retried = false;
	while (n) {
		ssize_t w = pwrite(fd_, p, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EINVAL && !retried) {
			// the file system took O_DIRECT but not this I/O: buffered from
			// now on. Once per call, whoever turned it off: another thread's
			// write may have failed and switched while this one was direct.
			std::lock_guard<std::mutex> g(off_mu_);
			if (direct()) {
				fcntl(fd_, F_SETFL, flags_);
				direct_.store(false, std::memory_order_relaxed);
			}
			retried = true;
			continue;
		}
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO;
		p += w;
		off += (uint64_t)w;
		n -= (size_t)w;
	}
	return 0;
}

int DirectOut::interior(uint64_t off, const uint8_t *p, size_t n)
{
	uint64_t b = align_up(off, kAlign), e = (off + n) & ~(uint64_t)(kAlign - 1);
	if (e <= b)
		return 0;
	return pwrite_all(b, p + (b - off), (size_t)(e - b));
}

int DirectOut::keep(uint64_t off, const uint8_t *p, size_t n)
{
	uint64_t page = off & ~(uint64_t)(kAlign - 1);
	auto it = pages_.find(page);
	if (it == pages_.end()) {
		void *m = nullptr;
		if (posix_memalign(&m, kAlign, kAlign) != 0)
			return -ENOMEM;
		memset(m, 0, kAlign); // bytes no piece covers are zero, as in the image
		Page pg((uint8_t *)m);
		try {
			it = pages_.emplace(page, Kept{std::move(pg), 0}).first;
		} catch (const std::bad_alloc &) { // the page is freed with the Kept
			return -ENOMEM;
		}
	}
	memcpy(it->second.mem.get() + (off - page), p, n);
	it->second.covered += n;
	if (it->second.covered < kAlign)
		return 0;
	int err = pwrite_all(page, it->second.mem.get(), kAlign); // whole: written now
	pages_.erase(it);
	return err;
}

int DirectOut::edges(uint64_t off, const uint8_t *p, size_t n)
{
	if (!n)
		return 0;
	uint64_t end = off + n, b = std::min(align_up(off, kAlign), end);
	int err = b > off ? keep(off, p, (size_t)(b - off)) : 0;
	uint64_t e = std::max(end & ~(uint64_t)(kAlign - 1), b);
	if (!err && end > e)
		err = keep(e, p + (e - off), (size_t)(end - e));
	return err;
}

int DirectOut::write(uint64_t off, const uint8_t *p, size_t n)
{
	int err = edges(off, p, n);
	if (err || congruent(off, p))
		return err ? err : interior(off, p, n);
	constexpr size_t kBounce = size_t(1) << 20;
	if (!bounce_) {
		void *m = nullptr;
		if (posix_memalign(&m, kAlign, kBounce) != 0)
			return -ENOMEM;
		bounce_.reset((uint8_t *)m);
	}
	uint64_t b = align_up(off, kAlign), e = (off + n) & ~(uint64_t)(kAlign - 1);
	for (uint64_t x = b; x < e; x += kBounce) {
		size_t k = (size_t)std::min<uint64_t>(kBounce, e - x);
		memcpy(bounce_.get(), p + (x - off), k);
		if ((err = pwrite_all(x, bounce_.get(), k)))
			return err;
	}
	return 0;
}

int DirectOut::finish(uint64_t size)
{
	for (auto &pg : pages_) { // pages no piece finished: the file's last, or gaps (zeros)
		int err = pwrite_all(pg.first, pg.second.mem.get(), kAlign);
		if (err)
			return err;
	}
	pages_.clear();
	if (direct()) {
		fcntl(fd_, F_SETFL, flags_);
		direct_.store(false, std::memory_order_relaxed);
	}
	if (ftruncate(fd_, (off_t)size) != 0)
		return -errno;
	return 0;
}

} // namespace shmkv_build
