// builder/writer.h - a buffered sequential writer that checksums the current
// section as it goes (the in-memory write and the spilling build's). With a
// DirectOut its writes are positional, so a caller may have other threads
// write pieces themselves and only account for them here (put_written).
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <unistd.h>

#include "direct.h"
#include "internal.h"

namespace shmkv_build {

// Writes all of [p, p + n) to fd: at off, or at the file position where off
// is negative. Returns 0 or -errno.
inline int write_all(int fd, const void *p, size_t n, off_t off = -1)
{
	const char *c = (const char *)p;
	while (n) {
		ssize_t w = off < 0 ? write(fd, c, n) : pwrite(fd, c, n, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		c += w;
		n -= (size_t)w;
		off += off < 0 ? 0 : w;
	}
	return 0;
}

// Buffered sequential writer that checksums the current section as it goes.
class Writer {
public:
	Writer(shmkv_builder *b, int fd, const char *path, DirectOut *d = nullptr)
		: b_(b), fd_(fd), path_(path), d_(d)
	{
		buf_.reserve(kBuf);
	}
	int put(const void *p, size_t n)
	{
		if (in_section_)
			XXH3_64bits_update(&st_, p, n);
		const char *c = (const char *)p;
		while (n) {
			size_t k = std::min(n, kBuf - buf_.size());
			buf_.append(c, k);
			c += k;
			n -= k;
			pos_ += k;
			if (buf_.size() == kBuf) {
				int err = flush();
				if (err)
					return err;
			}
		}
		return 0;
	}
	// A large piece: written from where it is, not copied into the buffer.
	int put_big(const void *p, size_t n)
	{
		if (n < kBuf)
			return put(p, n);
		int err = put_written(p, n);
		if (err || fd_ < 0)
			return err;
		if (d_)
			return failed(d_->write(pos_ - n, (const uint8_t *)p, n));
		return failed(write_all(fd_, p, n));
	}
	// n bytes at pos() written by someone else (another thread, through the
	// DirectOut, or put_big): checksummed and counted, not written.
	int put_written(const void *p, size_t n)
	{
		int err = flush();
		if (err)
			return err;
		if (in_section_)
			XXH3_64bits_update(&st_, p, n);
		pos_ += n;
		return 0;
	}
	// A DirectOut's error (0 or -errno) as this writer reports it.
	int failed(int err)
	{
		if (err)
			return b_->fail(err, "writing %s: %s", path_, strerror(-err));
		return 0;
	}
	DirectOut *direct_out() const { return d_; }
	int zeros(uint64_t n)
	{
		static const char z[4096] = {0};
		while (n) {
			size_t k = n < sizeof z ? (size_t)n : sizeof z;
			int err = put(z, k);
			if (err)
				return err;
			n -= k;
		}
		return 0;
	}
	int pad_to(uint64_t off) { return zeros(off - pos_); }
	void begin_section()
	{
		XXH3_64bits_reset(&st_);
		in_section_ = true;
	}
	uint64_t end_section()
	{
		in_section_ = false;
		return XXH3_64bits_digest(&st_);
	}
	int flush()
	{
		if (fd_ < 0) { // checksum pass: nothing is written
			buf_.clear();
			return 0;
		}
		const char *p = buf_.data();
		size_t n = buf_.size();
		int err = failed(d_ && n ? d_->write(pos_ - n, (const uint8_t *)p, n)
					 : write_all(fd_, p, n));
		buf_.clear();
		return err;
	}
	uint64_t pos() const { return pos_; }

private:
	static constexpr size_t kBuf = size_t(4) << 20;
	shmkv_builder *b_;
	int fd_;
	const char *path_;
	DirectOut *d_;
	std::string buf_;
	uint64_t pos_ = 0;
	XXH3_state_t st_;
	bool in_section_ = false;
};

} // namespace shmkv_build
