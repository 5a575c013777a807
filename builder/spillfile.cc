// builder/spillfile.cc - partitioned spill files (spillfile.h).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <cstdlib>
#include <unistd.h>

#include "spillfile.h"

namespace shmkv_build {

int open_unnamed(shmkv_builder *b, const std::string &dir)
{
	const char *e = getenv("SHMKV_BUILD_NO_TMPFILE"); // tests: filesystems without O_TMPFILE
	bool named = e && *e && strcmp(e, "0") != 0;
	int fd = named ? -1 : ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		return fd;
	if (!named && errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
		return b->fail(-errno, "cannot create a spill file in %s: %s (--tmpdir)", dir.c_str(),
			       strerror(errno));
	// no O_TMPFILE: a named file, removed at once; registered for a signal
	// in the instant between
	std::string name = dir + "/.shmkv-spill." + std::to_string(getpid()) + ".XXXXXX";
	std::vector<char> tmpl(name.begin(), name.end());
	tmpl.push_back(0);
	fd = mkostemp(tmpl.data(), O_CLOEXEC);
	if (fd < 0)
		return b->fail(-errno, "cannot create a spill file in %s: %s (--tmpdir)", dir.c_str(),
			       strerror(errno));
	int slot = cleanup_register(tmpl.data());
	unlink(tmpl.data());
	cleanup_unregister(slot);
	return fd;
}

int SpillFile::open(shmkv_builder *b, const std::string &dir, size_t parts, size_t cap)
{
	b_ = b;
	cap_ = cap;
	dir_ = dir;
	parts_.resize(parts);
	fd_ = open_unnamed(b, dir);
	return fd_ < 0 ? fd_ : 0;
}

SpillFile::~SpillFile()
{
	if (fd_ >= 0)
		close(fd_);
}

int SpillFile::write_block(Part &pt)
{
	const uint8_t *p = pt.buf.data();
	size_t n = pt.buf.size(), left = n;
	uint64_t off = end_;
	while (left) {
		ssize_t w = pwrite(fd_, p, left, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return b_->fail(-errno, "writing a spill file in %s: %s (--tmpdir)", dir_.c_str(),
					strerror(errno));
		p += w;
		off += (uint64_t)w;
		left -= (size_t)w;
	}
	pt.blocks.push_back({end_, n});
	end_ += n;
	buffered_ -= n;
	std::vector<uint8_t>().swap(pt.buf); // its memory back, not just its size
	return 0;
}

int SpillFile::put(size_t p, const void *a, size_t n)
{
	Part &pt = parts_[p];
	if (pt.buf.empty())
		pt.buf.reserve(std::min(kBlock, std::max(n, size_t(4096))));
	pt.buf.insert(pt.buf.end(), (const uint8_t *)a, (const uint8_t *)a + n);
	pt.bytes += n;
	total_ += n;
	buffered_ += n;
	return 0;
}

int SpillFile::append(size_t p, const SRec &hdr, const void *a, size_t al, const void *c, size_t cl,
		      const void *e, size_t el)
{
	static const uint8_t zero[8] = {0};
	SRec h = hdr;
	h.body = (uint32_t)(al + cl + el);
	put(p, &h, sizeof h);
	if (al)
		put(p, a, al);
	if (cl)
		put(p, c, cl);
	if (el)
		put(p, e, el);
	size_t pad = align_up(al + cl + el, 8) - (al + cl + el);
	if (pad)
		put(p, zero, pad);
	Part &pt = parts_[p];
	pt.count++;
	pt.hmin = std::min(pt.hmin, hdr.h);
	pt.hmax = std::max(pt.hmax, hdr.h);
	return after_put(p);
}

int SpillFile::append_raw(size_t p, const void *a, size_t al)
{
	put(p, a, al);
	return after_put(p);
}

int SpillFile::after_put(size_t p)
{
	if (parts_[p].buf.size() >= kBlock)
		return write_block(parts_[p]);
	if (buffered_ > cap_)
		return flush();
	return 0;
}

int SpillFile::flush()
{
	for (Part &pt : parts_)
		if (!pt.buf.empty()) {
			int err = write_block(pt);
			if (err)
				return err;
		}
	return 0;
}

int SpillFile::pread_all(void *dst, uint64_t len, uint64_t off)
{
	uint8_t *d = (uint8_t *)dst;
	while (len) {
		ssize_t n = pread(fd_, d, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return b_->fail(n < 0 ? -errno : -EIO, "reading a spill file in %s: %s",
					dir_.c_str(), n < 0 ? strerror(errno) : "short read");
		d += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

int SpillFile::load(size_t p, std::vector<uint8_t> &out)
{
	Part &pt = parts_[p];
	if (!pt.buf.empty()) {
		int err = write_block(pt);
		if (err)
			return err;
	}
	out.resize(pt.bytes);
	uint64_t at = 0;
	for (const Block &bl : pt.blocks) {
		int err = pread_all(out.data() + at, bl.len, bl.off);
		if (err)
			return err;
		at += bl.len;
	}
	return 0;
}

void SpillFile::release(size_t p)
{
	Part &pt = parts_[p];
	for (const Block &bl : pt.blocks) // disk space back; an error only costs space
		(void)fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)bl.off,
				(off_t)bl.len);
	buffered_ -= pt.buf.size();
	std::vector<Block>().swap(pt.blocks);
	std::vector<uint8_t>().swap(pt.buf);
}

void SpillFile::records(const std::vector<uint8_t> &buf, std::vector<const SRec *> &out)
{
	out.clear();
	for (size_t at = 0; at < buf.size();) {
		const SRec *r = (const SRec *)(buf.data() + at);
		out.push_back(r);
		at += r->size();
	}
}

} // namespace shmkv_build
