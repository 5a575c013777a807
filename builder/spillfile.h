// builder/spillfile.h - partitioned spill files of a build bounded in memory.
// A SpillFile is one unnamed temporary file (O_TMPFILE: nothing to remove on
// any exit) holding the records of many partitions, each a list of blocks;
// records are framed by SRec and read back whole or as a stream.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "internal.h"

namespace shmkv_build {

constexpr uint8_t kSRecExpires = 1;

// A spilled record: this header, then `body` bytes, padded to 8. The fields
// mean what the spill that holds it says (spill.cc); `h` routes it.
struct SRec {
	uint64_t h;
	uint64_t seq;
	uint64_t line;
	uint32_t src;
	uint32_t val_len;
	uint32_t body;
	uint16_t key_len;
	uint8_t type;
	uint8_t flags; // kSRecExpires: the body ends with the u32 expiry
	const uint8_t *data() const { return (const uint8_t *)(this + 1); }
	// A key record's expiry (its body: key, value, then the expiry if any).
	uint32_t expires() const
	{
		uint32_t e = 0;
		if (flags & kSRecExpires)
			memcpy(&e, data() + key_len + val_len, 4);
		return e;
	}
	size_t size() const { return sizeof(SRec) + align_up(body, 8); }
};
static_assert(sizeof(SRec) == 40, "SRec is 40 bytes");

// An unnamed temporary file in dir, read-write (O_TMPFILE; where the
// filesystem has none, a named one removed at once). Returns it or an error
// set on b.
int open_unnamed(shmkv_builder *b, const std::string &dir);

class SpillFile {
public:
	// Opens an unnamed temporary in dir with parts partitions, buffering at
	// most about cap bytes in memory. Returns 0 or an error set on b.
	int open(shmkv_builder *b, const std::string &dir, size_t parts, size_t cap);
	~SpillFile();
	SpillFile() = default;
	SpillFile(const SpillFile &) = delete;
	SpillFile &operator=(const SpillFile &) = delete;

	size_t parts() const { return parts_.size(); }
	void add_parts(size_t n) { parts_.resize(parts_.size() + n); }
	uint64_t bytes(size_t p) const { return parts_[p].bytes; }
	uint64_t count(size_t p) const { return parts_[p].count; }
	// Every record of partition p has the same h: no split can divide it.
	bool one_hash(size_t p) const { return parts_[p].hmin == parts_[p].hmax; }
	uint64_t total_bytes() const { return total_; }
	// Appends a record: hdr (its body field set) then the body's pieces.
	int append(size_t p, const SRec &hdr, const void *a, size_t al, const void *c = nullptr,
		   size_t cl = 0, const void *e = nullptr, size_t el = 0);
	// Appends raw bytes (an unframed stream, as VALUES).
	int append_raw(size_t p, const void *a, size_t al);
	// Writes every buffered block.
	int flush();
	// Reads a whole partition into out (flushes first).
	int load(size_t p, std::vector<uint8_t> &out);
	// Frees a partition's disk blocks (hole punched) and bookkeeping.
	void release(size_t p);

	// Reads a partition's bytes in pieces of at most about `piece` bytes.
	template <typename F>
	int stream(size_t p, size_t piece, F fn);

	// Record pointers of a loaded buffer.
	static void records(const std::vector<uint8_t> &buf, std::vector<const SRec *> &out);

private:
	struct Block {
		uint64_t off;
		uint64_t len;
	};
	struct Part {
		std::vector<Block> blocks;
		std::vector<uint8_t> buf;
		uint64_t bytes = 0, count = 0;
		uint64_t hmin = UINT64_MAX, hmax = 0; // of its records' h
	};
	int write_block(Part &pt);
	int put(size_t p, const void *a, size_t n);
	int after_put(size_t p);
	int pread_all(void *dst, uint64_t len, uint64_t off);

	static constexpr size_t kBlock = size_t(256) << 10;    // a partition's block
	size_t cap_ = 0; // all buffers together
	shmkv_builder *b_ = nullptr;
	int fd_ = -1;
	std::string dir_;
	uint64_t end_ = 0, total_ = 0;
	size_t buffered_ = 0;
	std::vector<Part> parts_;
};

template <typename F>
int SpillFile::stream(size_t p, size_t piece, F fn)
{
	int err = flush();
	if (err)
		return err;
	std::vector<uint8_t> buf;
	for (const Block &bl : parts_[p].blocks) {
		for (uint64_t o = 0; o < bl.len;) {
			size_t n = (size_t)std::min<uint64_t>(bl.len - o, piece);
			buf.resize(n);
			if ((err = pread_all(buf.data(), n, bl.off + o)))
				return err;
			if ((err = fn(buf.data(), n)))
				return err;
			o += n;
		}
	}
	return 0;
}

// Yields the records of a partition one by one, from pieces of the stream
// (a record split between pieces is put together).
class SpillReader {
public:
	SpillReader(SpillFile &f, size_t p) : f_(f), p_(p) {}
	// Calls fn(const SRec &) for every record in order.
	template <typename F>
	int each(F fn)
	{
		std::vector<uint8_t> carry;
		return f_.stream(p_, size_t(1) << 20, [&](const uint8_t *d, size_t n) {
			size_t at = 0;
			if (!carry.empty()) {
				// finish the record begun in the last piece
				size_t need = carry.size() < sizeof(SRec) ? sizeof(SRec) : ((const SRec *)carry.data())->size();
				while (at < n) {
					size_t k = std::min(need - carry.size(), n - at);
					carry.insert(carry.end(), d + at, d + at + k);
					at += k;
					if (carry.size() == sizeof(SRec) && need == sizeof(SRec))
						need = ((const SRec *)carry.data())->size();
					if (carry.size() == need)
						break;
				}
				if (carry.size() < need)
					return 0;
				int err = fn(*(const SRec *)carry.data());
				carry.clear();
				if (err)
					return err;
			}
			while (at < n) {
				if (n - at < sizeof(SRec) || n - at < ((const SRec *)(d + at))->size()) {
					carry.assign(d + at, d + n);
					return 0;
				}
				const SRec *r = (const SRec *)(d + at);
				int err = fn(*r);
				if (err)
					return err;
				at += r->size();
			}
			return 0;
		});
	}

private:
	SpillFile &f_;
	size_t p_;
};

} // namespace shmkv_build
