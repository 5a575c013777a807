// builder/direct.h - the image's bytes written in place, by several threads,
// with O_DIRECT where the file system takes it.
//
// Why: a buffered write() copies every byte into the page cache on the
// calling thread, under the file's lock, so a build wrote its image on one
// core however many rendered it (builder/README.md "Threads").
// With O_DIRECT the threads that render a block write it from their own
// buffer at its offset: no copy, and the fsync that follows has nothing left
// to write back. Where the file system refuses O_DIRECT (tmpfs before 6.6,
// some FUSE) or an I/O it does not like, writes are buffered pwrite()s.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace shmkv_build {

class DirectOut {
public:
	// The unit of alignment: file offsets, lengths and memory addresses of
	// direct writes are multiples of it (statx's DIO alignment, at most this).
	static constexpr size_t kAlign = 4096;

	// Turns O_DIRECT on for fd where the file system supports it at kAlign;
	// otherwise writes stay buffered. Never fails.
	explicit DirectOut(int fd);
	~DirectOut();
	DirectOut(const DirectOut &) = delete;
	DirectOut &operator=(const DirectOut &) = delete;

	bool direct() const { return direct_.load(std::memory_order_relaxed); }

	// Bytes [off, off + n) of the file from p, where p's address is off
	// modulo kAlign (congruent()). Writes the whole pages inside; the partial
	// pages at either end are left to edges(). Safe from several threads at
	// once; allocates nothing. 0 or -errno.
	int interior(uint64_t off, const uint8_t *p, size_t n);
	// Keeps the partial pages at the ends of [off, off + n); a kept page is
	// written as soon as pieces cover it whole (so a few are kept at a time,
	// whatever the image's size), the rest by finish(). One thread at a
	// time. 0 or -errno.
	int edges(uint64_t off, const uint8_t *p, size_t n);
	// Partial pages kept now (tests).
	size_t kept() const { return pages_.size(); }
	// Any bytes from anywhere: interior (through a bounce buffer when p is not
	// congruent) and edges. One thread at a time. 0 or -errno.
	int write(uint64_t off, const uint8_t *p, size_t n);
	// Writes the kept pages, turns O_DIRECT off again and cuts the file to
	// size (the last page written whole may pass it). 0 or -errno.
	int finish(uint64_t size);

	static bool congruent(uint64_t off, const void *p)
	{
		return ((uintptr_t)p - off) % kAlign == 0;
	}

private:
	struct Free {
		void operator()(uint8_t *p) const;
	};
	using Page = std::unique_ptr<uint8_t[], Free>;
	struct Kept {
		Page mem;
		size_t covered = 0; // bytes of it pieces gave (each byte once)
	};
	int pwrite_all(uint64_t off, const uint8_t *p, size_t n);
	int keep(uint64_t off, const uint8_t *p, size_t n); // within one page

	int fd_;
	int flags_; // the descriptor's flags before (restored by finish)
	// relaxed: only chooses how the next write goes; a buffered write after
	// a direct one is still correct, the writes are positional
	std::atomic<bool> direct_{false};
	std::mutex off_mu_; // one thread turns O_DIRECT off
	std::map<uint64_t, Kept> pages_; // partial pages, by file offset
	Page bounce_;
};

} // namespace shmkv_build
