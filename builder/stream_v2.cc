// builder/stream_v2.cc - the index of a spilling build (stream_v2.h).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <unistd.h>

#include "stream_v2.h"
#include "writer.h"

namespace shmkv_build {

namespace {
constexpr uint64_t kBatch = 4096; // buckets written at a time
} // namespace

V2Item StreamIndexV2::PRec::item() const
{
	return V2Item{kv, kv + key_len, val_len, expires, key_len, tag, type, s, entry_off};
}

void StreamIndexV2::extend(uint64_t c)
{
	if (c >= hi())
		win_.resize(c - lo_ + 1);
}

// The end of bk's layout with r appended, or 0 when it has no room (as
// layout_v2.cc's end_with: recomputed whole where padding may change).
inline unsigned StreamIndexV2::end_with(const Bucket &bk, const PRec &r)
{
	unsigned n = (unsigned)bk.recs.size();
	if (n >= kV2MaxRecords)
		return 0;
	unsigned end;
	if (!bk.aligned && r.s.align == 1) // nothing moves: r goes after the last, 2 bytes on
		end = r.s.end(bk.end + kV2DirBytes);
	else
		end = v2_bucket_end(n + 1, [&](unsigned i) -> const V2Shape & {
			return i < n ? bk.recs[i].s : r.s;
		});
	return end <= kV2BucketBytes ? end : 0;
}

void StreamIndexV2::push(Bucket &bk, const PRec &r, unsigned end)
{
	bk.recs.push_back(r);
	bk.end = (uint8_t)end;
	bk.aligned |= r.s.align != 1;
}

void StreamIndexV2::note(const PRec &r, uint64_t d)
{
	v2_home_mark(at(r.home).head, r.tag, d);
	if (d > max_probe)
		max_probe = (uint32_t)d;
}

int StreamIndexV2::add(uint64_t h, const V2Item &it)
{
	uint64_t home = shmkv_home_bucket(h, B_);
	if (grp_.empty() || home != grp_home_) {
		if (!grp_.empty())
			close_group();
		advance(home);
		// buckets before the oldest carried key's home are final; written in
		// batches (a gap of more than a batch is never held: zero on file)
		uint64_t keep = carry_.empty() ? home : carry_.front().home;
		if (keep > lo_ && keep - lo_ >= kBatch)
			if (int err = write_front(keep))
				return err;
		grp_home_ = home;
	}
	PRec r;
	memset(&r, 0, sizeof r);
	r.home = home;
	r.entry_off = it.entry_off;
	r.val_len = it.val_len;
	r.expires = it.expires;
	r.key_len = it.key_len;
	r.tag = it.tag;
	r.type = it.type;
	r.s = it.s;
	if (!it.s.out) { // fits: an inline record is at most kV2InlineMax bytes
		if (it.key_len)
			memcpy(r.kv, it.key, it.key_len);
		if (it.val_len)
			memcpy(r.kv + it.key_len, it.val, it.val_len);
	}
	grp_.push_back(r);
	return 0;
}

// Visits bucket bk, number c (c >= B_: bucket c - B_, wrapped): the carry
// first, in order, then the current group (sorted by the caller, or
// empty); each key that fits goes in, the others are carried to c + 1.
void StreamIndexV2::visit(Bucket &bk, uint64_t c)
{
	next_.clear();
	for (const PRec &r : carry_)
		if (unsigned end = end_with(bk, r)) {
			push(bk, r, end);
			note(r, c - r.home);
		} else {
			next_.push_back(r);
		}
	for (const PRec &r : grp_)
		if (unsigned end = end_with(bk, r))
			push(bk, r, end);
		else
			next_.push_back(r);
	grp_.clear();
	carry_.swap(next_);
}

// Visits the buckets from c_ to upto - 1 (no home keys there) with the
// carry alone, until it is empty.
void StreamIndexV2::advance(uint64_t upto)
{
	for (; c_ < upto && !carry_.empty(); c_++) {
		extend(c_);
		visit(at(c_), c_);
	}
	if (c_ < upto)
		c_ = upto;
}

// Visits the current group's home (c_): the carry, then the group
// smallest record first (ties in entry order).
void StreamIndexV2::close_group()
{
	extend(grp_home_);
	std::stable_sort(grp_.begin(), grp_.end(),
			 [](const PRec &x, const PRec &y) { return x.s.worst < y.s.worst; });
	visit(at(grp_home_), grp_home_);
	c_ = grp_home_ + 1;
}

// The keys carried past the last bucket visit bucket 0, 1, ... (buckets
// before the window are read back from the file, once, and written again)
// until none is left, or one would go round every bucket.
int StreamIndexV2::place_wrapped()
{
	std::map<uint64_t, Bucket> file; // buckets read back, by number
	std::map<uint64_t, unsigned> was;  // their bytes used before
	std::vector<uint8_t> raw(kV2BucketBytes);
	for (uint64_t c = B_; !carry_.empty(); c++) {
		if (c - carry_.front().home >= B_)
			return kV2NoRoom;
		uint64_t w = c - B_;
		Bucket *bk;
		if (w >= lo_) {
			extend(w);
			bk = &at(w);
		} else {
			auto f = file.find(w);
			if (f == file.end()) {
				f = file.emplace(w, Bucket()).first;
				int err = pio(raw.data(), w, false);
				if (!err)
					err = decode(raw.data(), w, f->second);
				if (err)
					return err;
				was[w] = f->second.end;
			}
			bk = &f->second;
		}
		visit(*bk, c);
	}
	for (auto &f : file) {
		render(f.second, raw.data());
		record_bytes -= was[f.first] - kV2Head;
		if (int err = pio(raw.data(), f.first, true))
			return err;
	}
	return 0;
}

int StreamIndexV2::finish()
{
	if (!grp_.empty())
		close_group();
	advance(B_);
	int err = 0;
	if (!carry_.empty()) {
		extend(B_ - 1);
		err = place_wrapped();
	}
	return err ? err : write_front(hi());
}

void StreamIndexV2::render(const Bucket &bk, uint8_t *out)
{
	memset(out, 0, kV2BucketBytes);
	memcpy(out, bk.head, kV2Head);
	unsigned n = (unsigned)bk.recs.size();
	V2Item it[kV2MaxRecords];
	for (unsigned i = 0; i < n; i++)
		it[i] = bk.recs[i].item();
	record_bytes += v2_render_bucket(out, n, [&](unsigned i) -> const V2Item & { return it[i]; }) -
			kV2Head;
}

// Renders and writes buckets [lo_, upto) (those past the window are zero
// on file already).
int StreamIndexV2::write_front(uint64_t upto)
{
	uint64_t k = upto > lo_ ? std::min(upto, hi()) - lo_ : 0;
	if (k) {
		out_.resize(k * kV2BucketBytes);
		for (uint64_t i = 0; i < k; i++)
			render(win_[i], out_.data() + i * kV2BucketBytes);
		int err = write_all(fd_, out_.data(), out_.size(), (off_t)(off_ + lo_ * kV2BucketBytes));
		if (err)
			return b_->fail(err, "writing the index: %s", strerror(-err));
		win_.erase(win_.begin(), win_.begin() + (ptrdiff_t)k);
	}
	if (upto > lo_)
		lo_ = upto;
	return 0;
}

int StreamIndexV2::pio(uint8_t *p, uint64_t c, bool write)
{
	off_t off = (off_t)(off_ + c * kV2BucketBytes);
	ssize_t n = write ? pwrite(fd_, p, kV2BucketBytes, off) : pread(fd_, p, kV2BucketBytes, off);
	if (n != (ssize_t)kV2BucketBytes)
		return b_->fail(n < 0 ? -errno : -EIO, "%s the index: %s", write ? "writing" : "reading",
				n < 0 ? strerror(errno) : "short transfer");
	return 0;
}

// A bucket this index wrote, read back: its head and records (as written,
// so no check beyond what decoding needs). A record's tag comes back as the
// 9 bits its directory entry keeps: enough to render it again, and a record
// read back is never placed again (its home's filter is already set).
int StreamIndexV2::decode(const uint8_t *p, uint64_t c, Bucket &bk)
{
	memcpy(bk.head, p, kV2Head);
	bk.head[0] = 0;
	unsigned n = p[0];
	if (n > kV2MaxRecords)
		return b_->fail(-EIO, "index bucket %llu read back: count %u (internal error)",
				(unsigned long long)c, n);
	for (unsigned i = 0; i < n; i++) {
		PRec r;
		memset(&r, 0, sizeof r);
		uint16_t dir;
		memcpy(&dir, p + shmkv_dir_end(i), 2);
		const unsigned pos = dir & 0x7f, kind = p[pos];
		if (kind & SHMKV_REC_TOMB) { // a delta's tombstone (lib/FORMAT.md §19.2)
			r.tag = (uint16_t)(dir >> 7);
			r.type = kTombType;
			if (kind & SHMKV_REC_OUT) {
				uint64_t u = 0;
				memcpy(&u, p + pos + 1, 5);
				r.entry_off = u << 3;
				r.s = v2_shape_tomb(SHMKV_MAX_KEY_LEN); // its key is in its entry
			} else {
				r.key_len = p[pos + 1];
				r.s = v2_shape_tomb(r.key_len);
				memcpy(r.kv, p + pos + SHMKV_REC_INLINE_HEAD, r.key_len);
			}
			push(bk, r, 0);
			continue;
		}
		shmkv_record rec;
		if (shmkv_record_at(p, i, &rec) != 0)
			return b_->fail(-EIO, "index bucket %llu read back: record %u is malformed "
					"(internal error)", (unsigned long long)c, i);
		r.tag = (uint16_t)shmkv_record_tag_bits(p, i);
		r.expires = rec.expires;
		if (rec.kind & SHMKV_REC_OUT) {
			r.entry_off = rec.unit << 3;
			r.s = v2_shape_out(rec.expires != 0);
		} else {
			r.type = (uint8_t)(rec.kind & SHMKV_REC_TYPE_MASK);
			r.key_len = (uint16_t)rec.key_len;
			r.val_len = rec.value_len;
			r.s = v2_shape(r.key_len, r.type, r.val_len, r.expires);
			memcpy(r.kv, p + rec.key_pos, r.key_len);
			memcpy(r.kv + r.key_len, p + rec.val_pos, r.val_len);
		}
		push(bk, r, 0);
	}
	bk.end = (uint8_t)v2_bucket_end(n, [&](unsigned i) -> const V2Shape & { return bk.recs[i].s; });
	return 0;
}

} // namespace shmkv_build
