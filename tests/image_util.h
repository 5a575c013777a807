// image_util.h: images in memory for the reader tests (header-only, lib/
// only: no builder).
//
//   compose(recs, options)  an image composed from lib/FORMAT.md alone, so
//                           that the reader's tests do not depend on the
//                           builder and the text is checked to be precise
//                           enough to write a builder from (placement: the
//                           builder convention of FORMAT.md in its simplest
//                           form: the home bucket if the record fits there,
//                           count < 16 and the bucket laid out again with it
//                           inside 128 bytes, else the next bucket with room)
//   reseal(img)             every section checksum and the header's
//                           recomputed: the forgery anyone who can write the
//                           file can make, so that only the structural
//                           checks stand between it and readers
//   Guarded                 an image copied into memory between PROT_NONE
//                           guards, so that any read past its ends faults
//   i64 / f64 / strlist     little-endian value encodings
//   RecModel                records merged as FORMAT.md §19.5 says (a base,
//                           then deltas' upserts and tombstones) and what a
//                           get of them answers at a time
//   Answer                  what a get answers (the value's type and bytes, or
//                           the error), printable in a test's failure
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <shmkv.h>

namespace testimg {

struct Rec {
	std::string key;
	unsigned type = SHMKV_TYPE_STRING;
	std::string value;    // value bytes, without the NUL of bytes/string
	uint32_t expires = 0; // 0: none
	bool out = false;     // OUT record, the entry in ENTRIES
	bool tomb = false;    // a delta's tombstone (FORMAT.md §19.2): type and value unused
};

struct Options {
	uint64_t bucket_count = 8;
	uint64_t seed = 0x5eed;
	uint32_t hash_bits = 64;
	bool expiry_flag_auto = true; // set EXPIRY iff a record expires
	uint64_t flags = 0;           // used when !expiry_flag_auto
	// a delta (FORMAT.md §19): its layout hash and DELTA flag, reserved[0..3],
	// the FILTER section (kf_words words; 0: max(1, ceil(records / 4)))
	bool delta = false;
	uint64_t base_checksum = 0, base_size = 4096, prev = 0, seq = 1, kf_words = 0;
};

inline uint64_t align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

// Where rec's inline record starting at bucket offset pos ends (may be
// past 128: it does not fit there).
inline unsigned inline_end(const Rec &r, unsigned pos)
{
	const shmkv_type_desc *t = shmkv_type_desc_of(r.type);
	unsigned q = pos + SHMKV_REC_INLINE_HEAD + (r.expires ? 4 : 0) + (unsigned)r.key.size();
	q = (unsigned)align_up(q, t->align);
	unsigned end = q + (unsigned)r.value.size() + t->nul;
	return end;
}

inline unsigned rec_end(const Rec &r, unsigned pos)
{
	if (r.tomb)
		return r.out ? pos + SHMKV_REC_OUT_HEAD
			     : pos + SHMKV_REC_INLINE_HEAD + (unsigned)r.key.size();
	return r.out ? pos + SHMKV_REC_OUT_HEAD + (r.expires ? SHMKV_REC_EXPIRES_SIZE : 0)
		     : inline_end(r, pos);
}

// The image; rec_off[i] is record i's image offset (what shmkv_find_record
// returns), dir_off[i] its u16 directory entry's (dir = (tag << 7 | off) &
// 0xffff: the byte at dir_off + 1 holds tag bits 1..8), slot[i] its index in its
// bucket's directory, home[i] and bucket[i] its buckets.
struct Image {
	std::string bytes;
	std::vector<uint64_t> rec_off, dir_off, home, bucket;
	std::vector<unsigned> slot;
	uint64_t index_off = SHMKV_HEADER_SIZE, entries_off = 0, entries_size = 0;
};

// Recomputes every section checksum the table describes (sections that do
// not fit the bytes are left as they are), then the header's.
inline void reseal(std::string &img)
{
	if (img.size() < sizeof(shmkv_image_header))
		return;
	shmkv_image_header h;
	memcpy(&h, img.data(), sizeof h);
	for (unsigned i = 0; i < SHMKV_MAX_SECTIONS && i < h.section_count; i++) {
		shmkv_section_desc &s = h.sections[i];
		if (s.offset <= img.size() && s.size <= img.size() - s.offset)
			s.checksum = XXH3_64bits(img.data() + s.offset, (size_t)s.size);
	}
	h.header_checksum = XXH3_64bits(&h, offsetof(shmkv_image_header, header_checksum));
	memcpy(&img[0], &h, sizeof h);
}

inline Image compose(const std::vector<Rec> &recs, const Options &o = Options())
{
	Image im;
	const uint64_t bc = o.bucket_count;
	im.entries_off = im.index_off + bc * SHMKV_BUCKET_BYTES;
	// ENTRIES: the OUT records' entries (FORMAT.md §7), in input order
	std::string ent;
	std::vector<uint64_t> unit(recs.size(), 0);
	for (size_t i = 0; i < recs.size(); i++) {
		const Rec &r = recs[i];
		if (!r.out)
			continue;
		unit[i] = (im.entries_off + ent.size()) >> 3;
		shmkv_entry_header eh{};
		eh.type = (uint8_t)(r.tomb ? SHMKV_TYPE_TOMBSTONE : r.type);
		eh.key_len = (uint16_t)r.key.size();
		eh.value_len = r.tomb ? 0 : (uint32_t)r.value.size();
		std::string e(sizeof eh, '\0');
		memcpy(&e[0], &eh, sizeof eh);
		e += r.key;
		if (!r.tomb) {
			e.resize(shmkv_entry_value_pos(&eh), '\0');
			e += r.value;
			e.resize(e.size() + shmkv_value_stored_len(r.type, 0), '\0');
		}
		e.resize(align_up(e.size(), 8), '\0');
		ent += e;
	}
	im.entries_size = ent.size();
	// placement
	std::vector<uint64_t> hash(recs.size());
	im.home.assign(recs.size(), 0);
	im.bucket.assign(recs.size(), UINT64_MAX);
	for (size_t i = 0; i < recs.size(); i++) {
		hash[i] = shmkv_key_hash(o.seed, o.hash_bits, recs[i].key.data(), recs[i].key.size());
		im.home[i] = shmkv_home_bucket(hash[i], bc);
	}
	// records per bucket, in placement order; a bucket is laid out once
	// its set is final (padding depends on where a record starts)
	std::vector<std::vector<size_t>> in(bc);
	auto layout = [&](const std::vector<size_t> &list, std::vector<unsigned> *pos) {
		unsigned at = SHMKV_BUCKET_HEAD + SHMKV_DIR_BYTES * (unsigned)list.size();
		for (size_t j = 0; j < list.size(); j++) {
			if (pos)
				pos->push_back(at);
			at = rec_end(recs[list[j]], at);
		}
		return at;
	};
	std::vector<uint32_t> disp(bc, 0);
	auto place = [&](size_t i, uint64_t b) {
		if (in[b].size() >= SHMKV_MAX_RECORDS)
			return false;
		in[b].push_back(i);
		if (layout(in[b], nullptr) > SHMKV_BUCKET_BYTES) {
			in[b].pop_back();
			return false;
		}
		im.bucket[i] = b;
		return true;
	};
	for (size_t i = 0; i < recs.size(); i++)
		place(i, im.home[i]);
	uint32_t max_probe = 0;
	std::vector<std::string> bk(bc, std::string(SHMKV_BUCKET_BYTES, '\0'));
	for (size_t i = 0; i < recs.size(); i++) {
		if (im.bucket[i] != UINT64_MAX)
			continue;
		uint64_t d = 1;
		for (; d < bc; d++)
			if (place(i, (im.home[i] + d) % bc))
				break;
		if (d >= bc)
			abort(); // the test asked for more than fits
		std::string &h = bk[im.home[i]];
		unsigned fi = (unsigned)((shmkv_key_tag(hash[i]) * SHMKV_FILTER_BITS) >> 16);
		h[2 + fi / 8] = (char)(h[2 + fi / 8] | (1 << (fi % 8)));
		disp[im.home[i]] = std::max(disp[im.home[i]], (uint32_t)d);
		max_probe = std::max(max_probe, (uint32_t)d);
	}
	im.rec_off.assign(recs.size(), 0);
	im.dir_off.assign(recs.size(), 0);
	im.slot.assign(recs.size(), 0);
	for (uint64_t b = 0; b < bc; b++) {
		std::string &s = bk[b];
		const unsigned n = (unsigned)in[b].size();
		std::vector<unsigned> pos;
		layout(in[b], &pos);
		s[0] = (char)n;
		s[1] = (char)std::min<uint32_t>(disp[b], 255);
		for (unsigned j = 0; j < n; j++) {
			const size_t i = in[b][j];
			const Rec &r = recs[i];
			const unsigned p = pos[j];
			uint16_t dir = (uint16_t)((shmkv_key_tag(hash[i]) << 7 | p) & 0xffff);
			memcpy(&s[SHMKV_BUCKET_HEAD + 2 * j], &dir, 2);
			unsigned kind = (r.out ? SHMKV_REC_OUT : r.type) | (r.expires ? SHMKV_REC_EXPIRES : 0);
			if (r.tomb)
				kind = (r.out ? SHMKV_REC_OUT : 0) | SHMKV_REC_TOMB;
			s[p] = (char)kind;
			if (r.tomb && !r.out) {
				s[p + 1] = (char)r.key.size();
				memcpy(&s[p + SHMKV_REC_INLINE_HEAD], r.key.data(), r.key.size());
			} else if (r.out) {
				memcpy(&s[p + 1], &unit[i], 5);
				if (r.expires)
					memcpy(&s[p + SHMKV_REC_OUT_HEAD], &r.expires, 4);
			} else {
				s[p + 1] = (char)r.key.size();
				s[p + 2] = (char)r.value.size();
				unsigned k = p + SHMKV_REC_INLINE_HEAD;
				if (r.expires) {
					memcpy(&s[k], &r.expires, 4);
					k += 4;
				}
				memcpy(&s[k], r.key.data(), r.key.size());
				unsigned vpos = inline_end(r, p) - (unsigned)r.value.size() -
						shmkv_type_desc_of(r.type)->nul;
				memcpy(&s[vpos], r.value.data(), r.value.size());
			}
			im.slot[i] = j;
			im.rec_off[i] = im.index_off + b * SHMKV_BUCKET_BYTES + p;
			im.dir_off[i] = im.index_off + b * SHMKV_BUCKET_BYTES + SHMKV_BUCKET_HEAD + 2 * j;
		}
	}
	// the file
	uint64_t values_off = align_up(im.entries_off + ent.size(), 64);
	const uint64_t words = o.kf_words ? o.kf_words : std::max<uint64_t>(1, (recs.size() + 3) / 4);
	const uint64_t end = o.delta ? values_off + 8 * words : values_off;
	uint64_t file_size = align_up(std::max<uint64_t>(end, SHMKV_HEADER_SIZE + 1), 4096);
	std::string img(file_size, '\0');
	if (o.delta) // the filter (FORMAT.md §19.3): every key's three bits
		for (size_t i = 0; i < recs.size(); i++) {
			const uint64_t w = shmkv_home_bucket(hash[i], words), h = hash[i];
			uint64_t x;
			memcpy(&x, &img[values_off + 8 * w], 8);
			x |= UINT64_C(1) << ((h >> 16) & 63) | UINT64_C(1) << ((h >> 22) & 63) |
			     UINT64_C(1) << ((h >> 28) & 63);
			memcpy(&img[values_off + 8 * w], &x, 8);
		}
	for (uint64_t b = 0; b < bc; b++)
		memcpy(&img[im.index_off + b * SHMKV_BUCKET_BYTES], bk[b].data(),
		       SHMKV_BUCKET_BYTES);
	if (!ent.empty())
		memcpy(&img[im.entries_off], ent.data(), ent.size());
	shmkv_image_header h{};
	memcpy(h.magic, SHMKV_MAGIC, 8);
	h.format_version = SHMKV_FORMAT_VERSION;
	h.header_size = SHMKV_HEADER_SIZE;
	h.layout_hash = o.delta ? SHMKV_DELTA_LAYOUT_HASH : SHMKV_LAYOUT_HASH;
	bool any_exp = false;
	for (const Rec &r : recs)
		any_exp |= r.expires != 0;
	h.flags = o.expiry_flag_auto ? (any_exp ? SHMKV_HFLAG_EXPIRY : 0) : o.flags;
	if (o.delta && o.expiry_flag_auto)
		h.flags |= SHMKV_HFLAG_DELTA;
	h.file_size = file_size;
	h.entry_count = recs.size();
	h.bucket_count = bc;
	h.bucket_slots = SHMKV_BUCKET_BYTES;
	h.hash_bits = o.hash_bits;
	h.hash_seed = o.seed;
	h.max_probe = max_probe;
	h.section_count = o.delta ? SHMKV_DELTA_SECTIONS : 3;
	strcpy(h.name, "composed");
	h.sections[0] = {SHMKV_SECTION_INDEX, 0, im.index_off, bc * SHMKV_BUCKET_BYTES, 0};
	h.sections[1] = {SHMKV_SECTION_ENTRIES, 0, im.entries_off, ent.size(), 0};
	h.sections[2] = {SHMKV_SECTION_VALUES, 0, values_off, 0, 0};
	if (o.delta) {
		h.sections[3] = {SHMKV_SECTION_FILTER, 0, values_off, 8 * words, 0};
		h.reserved[SHMKV_DELTA_BASE_CHECKSUM] = o.base_checksum;
		h.reserved[SHMKV_DELTA_BASE_SIZE] = o.base_size;
		h.reserved[SHMKV_DELTA_PREV] = o.prev;
		h.reserved[SHMKV_DELTA_SEQ] = o.seq;
	}
	memcpy(&img[0], &h, sizeof h);
	reseal(img);
	im.bytes = img;
	return im;
}

// Little-endian encodings of values.
inline std::string i64(int64_t x)
{
	return std::string(reinterpret_cast<const char *>(&x), 8);
}
inline std::string f64(double x)
{
	return std::string(reinterpret_cast<const char *>(&x), 8);
}
inline std::string strlist(const std::vector<std::string> &v)
{
	std::string s(4 * (v.size() + 2), '\0'), data;
	uint32_t n = (uint32_t)v.size(), e = 0;
	memcpy(&s[0], &n, 4);
	memcpy(&s[4], &e, 4);
	for (size_t i = 0; i < v.size(); i++) {
		data += v[i];
		data += '\0';
		e = (uint32_t)data.size();
		memcpy(&s[8 + 4 * i], &e, 4);
	}
	return s + data;
}

// An image in memory between PROT_NONE guards, so that any read past its
// ends faults (a file mapping may have readable neighbours). The region
// after it spans 8 GiB of address space (no memory): further than any u16
// key length plus u32 value length can reach.
//
// One reservation serves every image (one Guarded at a time), made once and
// reused: a guard page, room for the largest image (16 MiB), then the 8 GiB.
// The image ends where the 8 GiB begin; only its own pages are made
// readable, and emptied again afterwards. (Under qemu-user each mapping
// costs the emulator bookkeeping for its whole length: an 8 GiB mmap per
// image ran a 5,000-image sweep out of memory.)
class Guarded {
public:
	explicit Guarded(const std::string &img)
	{
		uint8_t *arena = arena_();
		size_ = img.size();
		body_ = (size_ + kPage - 1) / kPage * kPage;
		if (!arena || body_ > kRoom) {
			ADD_FAILURE() << (arena ? "image of " + std::to_string(size_) +
							  " bytes larger than the guarded arena"
						: std::string("mmap of the guarded arena failed"));
			size_ = body_ = 0;
			return;
		}
		b_ = arena + kPage + (kRoom - body_); // the last byte touches the 8 GiB
		mprotect(b_, body_, PROT_READ | PROT_WRITE);
		base_ = b_ + (body_ - size_);
		memcpy(base_, img.data(), size_);
		mprotect(b_, body_, PROT_READ);
	}
	~Guarded()
	{
		if (b_) {
			madvise(b_, body_, MADV_DONTNEED); // zero pages for the next image
			mprotect(b_, body_, PROT_NONE);
		}
	}
	Guarded(const Guarded &) = delete;
	Guarded &operator=(const Guarded &) = delete;

	// What shmkv_open_file does, on this memory: the open checks, then bind.
	int open(unsigned flags, shmkv *db, char *why, size_t why_len) const
	{
		memset(db, 0, sizeof *db);
		return shmkv_bind_mem(db, base_, size_, flags, why, why_len);
	}
	const uint8_t *base() const { return base_; }
	size_t size() const { return size_; }

private:
	static constexpr size_t kPage = 4096, kRoom = (size_t)16 << 20, kAfter = (size_t)1 << 33;

	static uint8_t *arena_()
	{
		static uint8_t *arena = [] {
			void *m = mmap(nullptr, kPage + kRoom + kAfter, PROT_NONE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
			return m == MAP_FAILED ? nullptr : static_cast<uint8_t *>(m);
		}();
		return arena;
	}

	uint8_t *b_ = nullptr, *base_ = nullptr;
	size_t size_ = 0, body_ = 0;
};

// What a get answers: the value's bytes, or the error.
struct Answer {
	int err = 0;
	unsigned type = 0;
	std::string bytes;
	bool operator==(const Answer &o) const
	{
		return err == o.err && type == o.type && bytes == o.bytes;
	}
};

inline std::ostream &operator<<(std::ostream &os, const Answer &a)
{
	return os << (a.err ? shmkv_errname(a.err) : "OK") << " type " << a.type << " '"
		  << a.bytes << "'";
}

// Records merged as FORMAT.md §19.5 says: a base's, then each delta's
// upserts and tombstones in turn; want() is what a get answers at now.
struct RecModel {
	std::map<std::string, Rec> m;
	explicit RecModel(const std::vector<Rec> &base)
	{
		for (const Rec &r : base)
			m[r.key] = r;
	}
	void apply(const std::vector<Rec> &delta)
	{
		for (const Rec &r : delta)
			if (r.tomb)
				m.erase(r.key);
			else
				m[r.key] = r;
	}
	Answer want(const std::string &k, uint32_t now) const
	{
		auto it = m.find(k);
		if (it == m.end() || (it->second.expires && now >= it->second.expires))
			return Answer{SHMKV_ENOTFOUND, 0, ""};
		return Answer{0, it->second.type, it->second.value};
	}
};

} // namespace testimg
