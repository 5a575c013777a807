// tests/builder/decoder.h - an image decoded as lib/FORMAT.md says, from
// the format text alone (not lib's reader): plain images (§3-§14) and
// deltas (§19: tombstones, the filter, the header's identity). Fails the
// test on any deviation.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <shmkv.h>
#include <shmkv/tools.h>
#include <xxhash.h>

namespace {

struct Found {
	unsigned type = 0;
	std::string val;
	uint32_t expires = 0;
	bool out = false, shared = false;
	bool tomb = false; // a delta's tombstone (type 0, no value)
	uint64_t bucket = 0;
};

uint64_t rd(const std::string &img, uint64_t off, unsigned n)
{
	uint64_t v = 0;
	memcpy(&v, img.data() + off, n);
	return v;
}

// The image as the format text says: fails the test on any deviation and
// returns every record (by key), each checked against the lookup.
class Decoder {
public:
	explicit Decoder(const std::string &img) : img_(img)
	{
		h_ = (const shmkv_image_header *)img.data();
	}
	const shmkv_image_header *h() const { return h_; }
	std::map<std::string, Found> all;
	std::vector<uint64_t> by_disp; // keys by displacement (check())
	uint64_t wrapped = 0;          // keys in a bucket before their home (check())

	void check()
	{
		ASSERT_GE(img_.size(), SHMKV_HEADER_SIZE);
		EXPECT_EQ(memcmp(h_->magic, SHMKV_MAGIC, 8), 0);
		EXPECT_EQ(h_->format_version, 2u);
		delta_ = (h_->flags & 4) != 0;
		EXPECT_EQ(h_->layout_hash, delta_ ? SHMKV_DELTA_LAYOUT_HASH : SHMKV_LAYOUT_HASH);
		EXPECT_EQ(h_->flags & ~uint64_t(7), 0u);
		EXPECT_EQ(h_->bucket_slots, 128u);
		EXPECT_EQ(h_->file_size, img_.size());
		EXPECT_EQ(h_->file_size % 4096, 0u);
		EXPECT_EQ(h_->header_checksum, XXH3_64bits(h_, offsetof(shmkv_image_header, header_checksum)));
		const unsigned nsec = delta_ ? 4 : 3;
		ASSERT_EQ(h_->section_count, nsec);
		for (unsigned r = 0; r < 7; r++) // §19.1: a delta's base, size, prev and seq
			if (!delta_ || r >= 4) {
				EXPECT_EQ(h_->reserved[r], 0u) << "reserved " << r;
			}
		if (delta_) {
			EXPECT_NE(h_->reserved[0], 0u);
			EXPECT_EQ(h_->reserved[1] % 4096, 0u);
			EXPECT_GE(h_->reserved[1], 4096u);
			EXPECT_GE(h_->reserved[3], 1u);
		}
		uint64_t prev_end = 4096;
		for (unsigned s = 0; s < 8; s++) {
			const auto &d = h_->sections[s];
			if (s >= nsec) {
				EXPECT_EQ(d.kind | d.flags | d.offset | d.size | d.checksum, 0u) << s;
				continue;
			}
			EXPECT_EQ(d.kind, s + 1);
			EXPECT_EQ(d.offset % 64, 0u);
			EXPECT_GE(d.offset, prev_end);
			ASSERT_LE(d.offset + d.size, img_.size());
			EXPECT_EQ(d.checksum, XXH3_64bits(img_.data() + d.offset, d.size)) << "section " << s;
			for (uint64_t p = prev_end; p < d.offset; p++) // gaps are zero
				ASSERT_EQ(img_[p], 0) << "gap byte " << p;
			prev_end = d.offset + d.size;
		}
		for (uint64_t p = prev_end; p < img_.size(); p++)
			ASSERT_EQ(img_[p], 0) << "tail byte " << p;
		if (delta_) { // §19.3 and the builder's convention
			const auto &fd = h_->sections[3];
			words_ = fd.size / 8;
			EXPECT_EQ(fd.size % 8, 0u);
			EXPECT_EQ(words_, std::max<uint64_t>(1, (h_->entry_count + 3) / 4));
			EXPECT_EQ(fd.offset, (h_->sections[2].offset + h_->sections[2].size + 63) / 64 * 64);
			fil_ = fd.offset;
		}
		B_ = h_->bucket_count;
		ix_ = h_->sections[0].offset;
		EXPECT_EQ(ix_ % 128, 0u);
		EXPECT_EQ(h_->sections[0].size, B_ * 128);
		uint32_t maxd = 0;
		uint64_t expiring = 0;
		for (uint64_t b = 0; b < B_; b++) {
			uint64_t base = ix_ + b * 128;
			unsigned count = (uint8_t)img_[base];
			ASSERT_LE(count, 16u) << "bucket " << b;
			std::vector<bool> covered(128, false);
			for (unsigned p = 0; p < 8 + 2 * count; p++)
				covered[p] = true;
			unsigned pos = 8 + 2 * count; // the builder packs records from here
			for (unsigned i = 0; i < count; i++) {
				std::string key;
				Found f;
				// dir = (tag << 7 | off) & 0xffff
				const unsigned dir = (unsigned)rd(img_, base + 8 + 2 * i, 2);
				unsigned off = dir & 0x7f;
				EXPECT_EQ(off, pos) << "bucket " << b << " record " << i << ": not packed";
				ASSERT_GE(off, pos) << "bucket " << b << " record " << i << ": overlaps";
				unsigned end = record(base, off, &key, &f);
				ASSERT_NE(end, 0u) << "bucket " << b << " record " << i;
				for (unsigned p = off; p < end; p++)
					covered[p] = true;
				pos = end;
				f.bucket = b;
				expiring += f.expires != 0;
				uint64_t hv = shmkv_key_hash(h_->hash_seed, h_->hash_bits, key.data(), key.size());
				const unsigned tag = (unsigned)shmkv_key_tag(hv);
				EXPECT_EQ(dir >> 7, tag & 0x1ff) << "bucket " << b << " record " << i;
				uint64_t home = shmkv_home_bucket(hv, B_);
				uint64_t d = (b + B_ - home) % B_;
				maxd = std::max<uint32_t>(maxd, (uint32_t)d);
				if (by_disp.size() <= d)
					by_disp.resize(d + 1);
				by_disp[d]++;
				wrapped += b < home;
				if (d) { // marked at home
					uint64_t hb = ix_ + home * 128;
					unsigned D = (uint8_t)img_[hb + 1], fi = (unsigned)((tag * 48u) >> 16);
					EXPECT_NE(D, 0u);
					EXPECT_TRUE((uint8_t)img_[hb + 2 + fi / 8] >> (fi % 8) & 1);
					EXPECT_TRUE(d <= D || D == 255);
				}
				if (delta_) {
					EXPECT_TRUE(maybe(hv)) << "filter bits of key " << key;
				}
				tombs += f.tomb;
				EXPECT_TRUE(all.emplace(key, f).second) << "key twice";
			}
			for (unsigned p = 8; p < 128; p++) { // the record area's other bytes, padding too
				if (!covered[p]) {
					ASSERT_EQ(img_[base + p], 0) << "bucket " << b << " byte " << p;
				}
			}
			if (img_[base + 1] == 0) {
				for (unsigned p = 2; p < 8; p++)
					EXPECT_EQ(img_[base + p], 0);
			}
		}
		EXPECT_EQ(h_->max_probe, maxd);
		EXPECT_EQ(all.size(), h_->entry_count);
		EXPECT_EQ((h_->flags & 2) != 0, expiring != 0);
	}

	bool delta() const { return delta_; }
	uint64_t tombs = 0; // tombstones (check())
	// §19.3: the filter says "maybe" for a key of hash hv.
	bool maybe(uint64_t hv) const
	{
		uint64_t w = (uint64_t)(((unsigned __int128)hv * words_) >> 64);
		uint64_t m = uint64_t(1) << ((hv >> 16) & 63) | uint64_t(1) << ((hv >> 22) & 63) |
			     uint64_t(1) << ((hv >> 28) & 63);
		return (rd(img_, fil_ + 8 * w, 8) & m) == m;
	}

	// The format's lookup of key: the record found, or none.
	bool lookup(const std::string &key, Found *out)
	{
		uint64_t hv = shmkv_key_hash(h_->hash_seed, h_->hash_bits, key.data(), key.size());
		uint16_t tag = (uint16_t)shmkv_key_tag(hv);
		uint64_t home = shmkv_home_bucket(hv, B_);
		if (scan(home, key, tag, out))
			return true;
		unsigned D = (uint8_t)img_[ix_ + home * 128 + 1], fi = (unsigned)((tag * 48u) >> 16);
		if (!D || !((uint8_t)img_[ix_ + home * 128 + 2 + fi / 8] >> (fi % 8) & 1))
			return false;
		uint64_t n = D < 255 ? D : h_->max_probe;
		for (uint64_t k = 1; k <= n; k++)
			if (scan((home + k) % B_, key, tag, out))
				return true;
		return false;
	}

private:
	const std::string &img_;
	const shmkv_image_header *h_;
	uint64_t B_ = 0, ix_ = 0;
	bool delta_ = false;
	uint64_t words_ = 0, fil_ = 0;

	bool scan(uint64_t b, const std::string &key, uint16_t tag, Found *out)
	{
		uint64_t base = ix_ + b * 128;
		unsigned count = (uint8_t)img_[base];
		for (unsigned i = 0; i < count && i < 16; i++) {
			const unsigned dir = (unsigned)rd(img_, base + 8 + 2 * i, 2);
			if ((dir & 0xff80) != ((tag << 7) & 0xff80u)) // the tag's low 9 bits
				continue;
			std::string k;
			Found f;
			unsigned off = dir & 0x7f;
			if (off < 8 + 2 * count || !record(base, off, &k, &f))
				return false;
			if (k == key) {
				*out = f;
				return true;
			}
		}
		return false;
	}
	// Decodes the record at bucket byte pos; returns its end, 0 if bad.
	// Padding is checked zero by check().
	unsigned record(uint64_t base, unsigned pos, std::string *key, Found *f)
	{
		if (pos + 3 > 128)
			return 0;
		uint8_t kind = (uint8_t)img_[base + pos];
		EXPECT_EQ(kind & 0x20, 0);
		if (kind & 0x10) { // §19.2: kind 0x10 or 0x90 exactly, in a delta only
			EXPECT_TRUE(delta_) << "a tombstone in a plain image";
			EXPECT_TRUE(kind == 0x10 || kind == 0x90) << "kind " << (unsigned)kind;
			f->tomb = true;
			if (kind == 0x10) {
				unsigned kl = (uint8_t)img_[base + pos + 1];
				EXPECT_EQ((uint8_t)img_[base + pos + 2], 0u) << "a tombstone's value_len";
				if (pos + 3 + kl > 128)
					return 0;
				*key = img_.substr(base + pos + 3, kl);
				return pos + 3 + kl;
			}
			if (pos + 6 > 128)
				return 0;
			uint64_t off = rd(img_, base + pos + 1, 5) << 3;
			f->out = true;
			if (off < h_->sections[1].offset ||
			    off + 8 > h_->sections[1].offset + h_->sections[1].size)
				return 0;
			shmkv_entry_header eh;
			memcpy(&eh, img_.data() + off, 8);
			EXPECT_EQ(eh.type, 0u);
			EXPECT_EQ(eh.flags, 0u);
			EXPECT_GE(eh.key_len, 1u);
			EXPECT_EQ(eh.value_len, 0u);
			*key = img_.substr(off + 8, eh.key_len);
			for (uint64_t p = off + 8 + eh.key_len; p < (off + 8 + eh.key_len + 7) / 8 * 8; p++)
				EXPECT_EQ(img_[p], 0) << "an OUT tombstone's padding";
			return pos + 6;
		}
		bool exp = kind & 0x40;
		if (kind & 0x80) {
			EXPECT_EQ(kind & 0x0f, 0);
			unsigned end = pos + 6 + (exp ? 4 : 0);
			if (end > 128)
				return 0;
			uint64_t off = rd(img_, base + pos + 1, 5) << 3;
			f->out = true;
			if (exp)
				f->expires = (uint32_t)rd(img_, base + pos + 6, 4);
			if (off < h_->sections[1].offset ||
			    off + 8 > h_->sections[1].offset + h_->sections[1].size)
				return 0;
			shmkv_entry_header eh;
			memcpy(&eh, img_.data() + off, 8);
			f->type = eh.type;
			*key = img_.substr(off + 8, eh.key_len);
			uint64_t vp = shmkv_entry_value_pos(&eh);
			if (eh.flags & SHMKV_EFLAG_SHARED) {
				f->shared = true;
				uint64_t ref = rd(img_, off + vp, 8);
				EXPECT_GE(ref, h_->sections[2].offset);
				f->val = img_.substr(ref, eh.value_len);
			} else {
				f->val = img_.substr(off + vp, eh.value_len);
			}
			return end;
		}
		f->type = kind & 0x0f;
		unsigned kl = (uint8_t)img_[base + pos + 1], vl = (uint8_t)img_[base + pos + 2];
		unsigned p = pos + 3;
		if (exp) {
			if (p + 4 > 128)
				return 0;
			f->expires = (uint32_t)rd(img_, base + p, 4);
			p += 4;
		}
		if (p + kl > 128)
			return 0;
		*key = img_.substr(base + p, kl);
		p += kl;
		unsigned a = shmkv_type_align8(f->type) ? 8 : 1;
		for (; p % a; p++)
			EXPECT_EQ(img_[base + p], 0) << "padding";
		unsigned stored = (unsigned)shmkv_value_stored_len(f->type, vl);
		if (p + stored > 128)
			return 0;
		f->val = img_.substr(base + p, vl);
		if (stored > vl) {
			EXPECT_EQ(img_[base + p + vl], 0) << "NUL";
		}
		return p + stored;
	}
};

} // namespace
