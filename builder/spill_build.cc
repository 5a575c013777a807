// builder/spill_build.cc - the spilling build after the input (builder/README.md,
// "Memory", steps 2 to 5): the partitions in hash order are the entries in
// order, each sorted and resolved alone; value sharing groups values across
// all partitions by their own hash, the groups are ordered by their first
// entry, and the image is written in one pass over the entries with the index
// built alongside (StreamIndexV2). The bytes are those of the in-memory build
// (lib/FORMAT.md §14), whatever the limit.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <unistd.h>

#include "delta.h"
#include "layout.h"
#include "spill.h"
#include "stream_v2.h"
#include "writer.h"

namespace shmkv_build {

namespace {

// A partition's records, sorted.
template <typename Less>
void sorted_records(const std::vector<uint8_t> &buf, std::vector<const SRec *> &v, Less less)
{
	SpillFile::records(buf, v);
	std::sort(v.begin(), v.end(), less);
}

std::string where_of(const shmkv_builder *b, const SRec &r)
{
	Record x;
	memset(&x, 0, sizeof x);
	x.src = r.src;
	x.line = r.line;
	return b->where(x, r.seq);
}

int read_back_checksum(shmkv_builder *b, int fd, uint64_t off, uint64_t len, uint64_t *sum)
{
	XXH3_state_t st;
	XXH3_64bits_reset(&st);
	std::vector<uint8_t> buf(size_t(1) << 20);
	while (len) {
		size_t k = (size_t)std::min<uint64_t>(len, buf.size());
		ssize_t n = pread(fd, buf.data(), k, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return b->fail(n < 0 ? -errno : -EIO, "reading the index back: %s",
				       n < 0 ? strerror(errno) : "short read");
		XXH3_64bits_update(&st, buf.data(), (size_t)n);
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	*sum = XXH3_64bits_digest(&st);
	return 0;
}

int copy_to_stdout(shmkv_builder *b, int fd, uint64_t size)
{
	std::vector<uint8_t> buf(size_t(1) << 20);
	for (uint64_t off = 0; off < size;) {
		ssize_t n = pread(fd, buf.data(), (size_t)std::min<uint64_t>(size - off, buf.size()), (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return b->fail(n < 0 ? -errno : -EIO, "reading the image back: %s",
				       n < 0 ? strerror(errno) : "short read");
		int err = write_all(STDOUT_FILENO, buf.data(), (size_t)n);
		if (err)
			return b->fail(err, "writing standard output: %s", strerror(-err));
		off += (uint64_t)n;
	}
	return 0;
}

// Which leaf holds entry ordinal o (first[q] is leaf q's first ordinal).
size_t leaf_of(const std::vector<uint64_t> &first, uint64_t o)
{
	return (size_t)(std::upper_bound(first.begin(), first.end(), o) - first.begin()) - 1;
}

// The phases of a spilling build after the input (builder/README.md,
// "Memory", steps 2 to 5), each a method, with what they hand on to the next
// as members: the kept entries by leaf, the values that may be shared, the
// groups and their members' marks, the members' references, VALUES.
class SpillBuild {
public:
	SpillBuild(shmkv_builder *b, Layout &L)
		: b_(b), S_(*b->spill), o_(b->opt), L_(L)
	{
	}
	int run(const char *path)
	{
		int err = sort_keys();
		if (!err)
			err = share_values();
		if (!err)
			err = place();
		return err ? err : write(path);
	}

private:
	shmkv_builder *b_;
	Spill &S_;
	const shmkv_build_options &o_;
	Layout &L_;
	uint64_t v2_bytes_ = 0; // the records' room (V2Shape::room())
	SpillFile kept_, vals_;                    // sort_keys: entries by leaf; values by hash
	SpillFile groups_, marks_, refs_, values_; // share_values, place
	SpillFile filter_;                         // place: a delta's filter words
	std::vector<uint64_t> first_;              // per leaf: its first entry's ordinal
	uint64_t n_ = 0, done_ = 0, total_ = 0;    // entries so far; progress
	int e_ = 0;                                // keep()'s error, for the leaf's caller
	DupScan dup_;
	std::string dup_first_, dup_second_, dup_key_;
	std::vector<const SRec *> v_; // a loaded leaf's records, sorted
	std::vector<uint8_t> buf_;

	size_t leaves() const { return first_.size(); }
	size_t new_leaf()
	{
		kept_.add_parts(1);
		first_.push_back(n_);
		return kept_.parts() - 1;
	}
	int leaf_done(const char *phase, uint64_t bytes)
	{
		done_ += bytes;
		b_->progress(phase, done_, total_);
		int err = e_;
		e_ = 0;
		return err;
	}

	// Step 2: each key partition in hash order sorted, duplicates resolved;
	// the kept records (entries, in order) to kept_, one part per leaf, and
	// the values that might be shared to vals_ by their hash.
	int sort_keys()
	{
		int err = flush_run(b_);
		if (!err)
			err = S_.keys.flush();
		if (err)
			return err;
		if (b_->seq0 > UINT32_MAX - 1)
			return b_->fail(SHMKV_ELIMIT, "%llu records exceed the builder's limit of %u",
					(unsigned long long)b_->seq0, UINT32_MAX - 1);
		if ((err = kept_.open(b_, S_.dir, 0, S_.cap)) ||
		    (err = vals_.open(b_, S_.dir, size_t(1) << kTopBits, S_.cap)))
			return err;
		total_ = S_.keys.total_bytes();
		auto leaf = [this](std::vector<uint8_t> &buf) { return sort_leaf(buf); };
		auto one = [this](SpillFile &f, size_t p) { return stream_one_key(f, p); };
		for (size_t p = 0; !err && p < S_.keys.parts(); p++)
			err = S_.leaves(S_.keys, p, kTopBits, leaf, one);
		if (err)
			return err;
		if (dup_.keys && o_.on_duplicate == SHMKV_DUP_ERROR)
			return dup_error(b_, dup_second_, dup_key_, dup_first_, dup_.keys);
		L_.duplicates = dup_.recs;
		L_.entries = n_;
		L_.filter_words = b_->delta ? filter_words(n_) : 0;
		std::vector<uint64_t>().swap(S_.once);
		std::vector<uint64_t>().swap(S_.twice);
		if ((err = kept_.flush()) || (err = vals_.flush()))
			return err;
		if ((err = choose_buckets_v2(b_, v2_bytes_, &L_.bucket_count)))
			return err;
		L_.entries_off = SHMKV_HEADER_SIZE + L_.bucket_count * kV2BucketBytes;
		return 0;
	}
	static V2Shape shape(const SRec &r)
	{
		return v2_shape(r.key_len, r.type, r.val_len, r.expires());
	}
	// The next entry (of leaf q), and its value to the value partitions.
	void keep(size_t q, const SRec &r)
	{
		if (!b_->kept(r.type, r.data(), r.key_len))
			return; // a merge's tombstone: its key leaves (lib/FORMAT.md §19.5)
		L_.tombstones += r.type == kTombType;
		uint64_t ord = n_++;
		L_.value_bytes_logical += r.val_len;
		if (e_ || (dup_.keys && o_.on_duplicate == SHMKV_DUP_ERROR))
			return; // failing: only the count of duplicates matters
		e_ = kept_.append(q, r, r.data(), r.body);
		V2Shape sh = shape(r); // only OUT records have entries, and only they share values
		v2_bytes_ += sh.room();
		L_.expiry |= r.expires() != 0;
		if (!sh.out)
			return;
		if (e_ || !o_.dedup || never_shared(r.type, r.val_len))
			return;
		SRec x;
		memset(&x, 0, sizeof x);
		x.h = Spill::value_hash(r.data() + r.key_len, r.val_len, r.type);
		if (S_.vbits && !S_.maybe_repeated(x.h))
			return; // seen once in all the input: never shared
		x.seq = ord;
		x.val_len = r.val_len;
		x.key_len = r.key_len;
		x.type = r.type;
		e_ = vals_.append(top(x.h), x, r.data() + r.key_len, r.val_len);
	}
	int sort_leaf(std::vector<uint8_t> &buf)
	{
		sorted_records(buf, v_, [](const SRec *x, const SRec *y) {
			if (x->h != y->h)
				return x->h < y->h;
			int d = cmp_bytes(x->data(), x->key_len, y->data(), y->key_len);
			return d != 0 ? d < 0 : x->seq < y->seq;
		});
		size_t q = new_leaf();
		auto &v = v_;
		scan_duplicates(
			v.size(), o_.on_duplicate, dup_,
			[&](size_t x, size_t y) {
				return v[x]->h == v[y]->h &&
				       cmp_bytes(v[x]->data(), v[x]->key_len, v[y]->data(), v[y]->key_len) == 0;
			},
			[&](size_t x) { return v[x]->seq; }, [&](size_t k) { keep(q, *v[k]); },
			[&](size_t f, size_t s) {
				dup_first_ = where_of(b_, *v[f]);
				dup_second_ = where_of(b_, *v[s]);
				dup_key_ = show_key(v[s]->data(), v[s]->key_len);
			});
		return leaf_done("sorting", buf.size());
	}
	// One hash over the leaf budget: the same key (or keys of one hash)
	// many times. Streamed in input order (a partition holds its records in
	// input order): per distinct key its count, the first two records'
	// places and the record kept; then the keys in entry order.
	int stream_one_key(SpillFile &f, size_t p)
	{
		struct K {
			uint64_t count = 0, s1 = 0, s2 = 0;
			std::string w1, w2;
			std::vector<uint8_t> rec; // the kept record, header and body
		};
		auto less = [](const std::string &a, const std::string &c) {
			return cmp_bytes((const uint8_t *)a.data(), a.size(), (const uint8_t *)c.data(),
					 c.size()) < 0;
		};
		std::map<std::string, K, decltype(less)> keys(less);
		int err = SpillReader(f, p).each([&](const SRec &r) {
			K &k = keys[std::string((const char *)r.data(), r.key_len)];
			if (++k.count == 1) {
				k.s1 = r.seq;
				k.w1 = where_of(b_, r);
			} else if (k.count == 2) {
				k.s2 = r.seq;
				k.w2 = where_of(b_, r);
			}
			if (k.count == 1 || o_.on_duplicate == SHMKV_DUP_LAST)
				k.rec.assign((const uint8_t *)&r, (const uint8_t *)&r + r.size());
			return 0;
		});
		if (err)
			return err;
		size_t q = new_leaf();
		for (auto &kv : keys) {
			K &k = kv.second;
			if (dup_.group(k.count, k.s1, k.s2)) {
				dup_first_ = k.w1;
				dup_second_ = k.w2;
				dup_key_ = show_key((const uint8_t *)kv.first.data(), kv.first.size());
			}
			keep(q, *(const SRec *)k.rec.data());
		}
		return leaf_done("sorting", f.bytes(p));
	}

	// Step 3: values grouped exactly (type, length, bytes) across all
	// entries; a shared group to groups_ and its members to marks_, both in
	// the leaf of the group's first entry.
	int share_values()
	{
		int err;
		if ((err = groups_.open(b_, S_.dir, leaves(), S_.cap)) ||
		    (err = marks_.open(b_, S_.dir, leaves(), S_.cap)) ||
		    (err = refs_.open(b_, S_.dir, leaves(), S_.cap)) ||
		    (err = values_.open(b_, S_.dir, 1, S_.cap)))
			return err;
		done_ = 0;
		total_ = vals_.total_bytes();
		auto leaf = [this](std::vector<uint8_t> &buf) { return share_leaf(buf); };
		auto one = [this](SpillFile &f, size_t p) { return stream_one_value(f, p); };
		for (size_t p = 0; !err && p < vals_.parts(); p++)
			err = S_.leaves(vals_, p, kTopBits, leaf, one);
		if (!err)
			err = groups_.flush();
		return err ? err : marks_.flush();
	}
	// A group of refs entries whose first is rs: shared if worth it, then
	// to the leaf of its first entry.
	int group(uint64_t refs, int64_t gain, const SRec &rs, bool *shared)
	{
		*shared = worth_sharing(refs, gain, rs.type, rs.val_len);
		if (!*shared)
			return 0;
		L_.dedup_values++;
		L_.dedup_refs += refs;
		L_.dedup_saved += (uint64_t)gain - align_up(stored_len(rs.type, rs.val_len), 8);
		SRec g;
		memset(&g, 0, sizeof g);
		g.h = rs.seq;
		g.val_len = rs.val_len;
		g.type = rs.type;
		return groups_.append(leaf_of(first_, rs.seq), g, rs.data(), rs.val_len);
	}
	// A member of the shared group whose first entry is group_first.
	int mark(uint64_t group_first, uint64_t member)
	{
		SRec m;
		memset(&m, 0, sizeof m);
		m.h = group_first;
		m.seq = member;
		return marks_.append(leaf_of(first_, group_first), m, nullptr, 0);
	}
	int share_leaf(std::vector<uint8_t> &buf)
	{
		auto &v = v_;
		sorted_records(buf, v, [](const SRec *x, const SRec *y) {
			if (x->h != y->h)
				return x->h < y->h;
			if (x->type != y->type)
				return x->type < y->type;
			int d = cmp_bytes(x->data(), x->val_len, y->data(), y->val_len);
			return d != 0 ? d < 0 : x->seq < y->seq;
		});
		for (size_t s = 0, e; s < v.size(); s = e) {
			const SRec &rs = *v[s];
			for (e = s + 1; e < v.size() && v[e]->h == rs.h && v[e]->type == rs.type &&
					cmp_bytes(v[e]->data(), v[e]->val_len, rs.data(), rs.val_len) == 0;
			     e++)
				;
			if (e - s < 2)
				continue;
			int64_t gain = 0;
			for (size_t k = s; k < e; k++)
				gain += share_gain(v[k]->key_len, v[k]->type, v[k]->val_len);
			bool shared = false;
			int err = group(e - s, gain, rs, &shared);
			for (size_t k = s; shared && !err && k < e; k++)
				err = mark(rs.seq, v[k]->seq);
			if (err)
				return err;
		}
		return leaf_done("sharing", buf.size());
	}
	// One value hash over the leaf budget: a value shared by millions of
	// entries. Streamed twice in entry order (the first of a value is its
	// first entry): count and gain per distinct value, then the marks.
	int stream_one_value(SpillFile &f, size_t p)
	{
		struct V {
			uint64_t count = 0, first = 0;
			int64_t gain = 0;
			std::vector<uint8_t> rec; // the first record
			bool shared = false;
		};
		std::map<std::pair<uint8_t, std::string>, V> vs;
		auto key = [](const SRec &r) {
			return std::make_pair(r.type, std::string((const char *)r.data(), r.val_len));
		};
		int err = SpillReader(f, p).each([&](const SRec &r) {
			V &x = vs[key(r)];
			if (x.count++ == 0) {
				x.first = r.seq;
				x.rec.assign((const uint8_t *)&r, (const uint8_t *)&r + r.size());
			}
			x.gain += share_gain(r.key_len, r.type, r.val_len);
			return 0;
		});
		for (auto it = vs.begin(); !err && it != vs.end(); ++it)
			if (it->second.count >= 2)
				err = group(it->second.count, it->second.gain,
					    *(const SRec *)it->second.rec.data(), &it->second.shared);
		if (!err)
			err = SpillReader(f, p).each([&](const SRec &r) {
				const V &x = vs[key(r)];
				return x.shared ? mark(x.first, r.seq) : 0;
			});
		done_ += f.bytes(p);
		b_->progress("sharing", done_, total_);
		return err;
	}

	// Step 4, per leaf in order: its groups get their VALUES offsets (in
	// order of first entry), their members' references go to the members'
	// leaves (never an earlier one), and with its references complete the
	// leaf's entries are placed (sizes only) to find where ENTRIES ends.
	int place()
	{
		uint64_t vpos = 0, pos = L_.entries_off;
		std::vector<std::pair<uint64_t, uint64_t>> table; // group's first entry -> offset in VALUES
		int err = L_.filter_words ? filter_.open(b_, S_.dir, 1, S_.cap) : 0;
		FilterStream fs(L_.filter_words); // a delta's: the keys pass in key order
		auto put = [&](uint64_t w) { return filter_.append_raw(0, &w, 8); };
		for (size_t q = 0; !err && q < leaves(); q++) {
			if ((err = place_groups(q, vpos, table)) || (err = route_refs(q, table)))
				return err;
			err = each_entry(q, [&](const SRec &r, bool shared, uint64_t) {
				if (shape(r).out)
					place_entry(pos, entry_size(r.key_len, r.type, r.val_len, shared));
				return L_.filter_words ? fs.add(r.h, put) : 0;
			});
			b_->progress("placing", q + 1, leaves());
		}
		if (!err && L_.filter_words && !(err = fs.finish(put)))
			err = filter_.flush();
		if (err || (err = values_.flush()) || (err = refs_.flush()))
			return err;
		L_.entries_end = pos;
		L_.values_off = align_up(L_.entries_end, 64);
		L_.values_end = L_.values_off + vpos;
		return set_file_size(b_, L_);
	}
	// Leaf q's groups to VALUES, in order of first entry, from vpos on.
	int place_groups(size_t q, uint64_t &vpos, std::vector<std::pair<uint64_t, uint64_t>> &table)
	{
		static const uint8_t zero[8] = {0};
		int err = groups_.load(q, buf_);
		groups_.release(q);
		if (err)
			return err;
		sorted_records(buf_, v_, [](const SRec *x, const SRec *y) { return x->h < y->h; });
		table.clear();
		for (const SRec *g : v_) {
			uint64_t at = align_up(vpos, 8);
			if (at > vpos && (err = values_.append_raw(0, zero, at - vpos)))
				return err;
			if ((err = values_.append_raw(0, g->data(), g->val_len)))
				return err;
			uint64_t sl = stored_len(g->type, g->val_len);
			if (sl > g->val_len && (err = values_.append_raw(0, zero, 1)))
				return err;
			table.push_back({g->h, at});
			vpos = at + sl;
		}
		return 0;
	}
	// The members of leaf q's groups: a reference (the group's offset in
	// VALUES) each, to the member's leaf. Streamed: a group's members may be
	// millions.
	int route_refs(size_t q, const std::vector<std::pair<uint64_t, uint64_t>> &table)
	{
		int err = SpillReader(marks_, q).each([&](const SRec &m) {
			auto it = std::lower_bound(table.begin(), table.end(), std::make_pair(m.h, uint64_t(0)));
			SRec r;
			memset(&r, 0, sizeof r);
			r.h = it->second;
			r.seq = m.seq;
			return refs_.append(leaf_of(first_, m.seq), r, nullptr, 0);
		});
		marks_.release(q);
		return err;
	}
	// Calls fn(record, shared, its group's offset in VALUES) for each entry
	// of leaf q in order; leaf q's references are complete.
	template <typename F>
	int each_entry(size_t q, F fn)
	{
		int err = refs_.load(q, buf_);
		if (err)
			return err;
		sorted_records(buf_, v_, [](const SRec *x, const SRec *y) { return x->seq < y->seq; });
		size_t si = 0;
		uint64_t ord = first_[q];
		return SpillReader(kept_, q).each([&](const SRec &r) {
			bool shared = si < v_.size() && v_[si]->seq == ord;
			uint64_t ref = shared ? v_[si]->h : 0;
			si += shared;
			ord++;
			return fn(r, shared, ref);
		});
	}

	// Step 5: the image (write_sections(), write.cc) to the output's
	// temporary, or to one in the spill directory for standard output:
	// entries rendered in order with the index built alongside
	// (StreamIndexV2), VALUES copied, the index read back for its checksum,
	// the header last. When some record finds no room, the image is written
	// again with more buckets (as the in-memory build places again), so the
	// spill files are kept until the image is complete.
	int write(const char *path)
	{
		bool to_stdout = strcmp(path, "-") == 0;
		Target t;
		if (to_stdout)
			t.fd = open_unnamed(b_, S_.dir);
		else if (int err = open_target(b_, path, t))
			return err;
		if (t.fd < 0)
			return t.fd;
		const char *shown = to_stdout ? "the temporary image" : t.shown.c_str();
		shmkv_image_header h;
		int err;
		while ((err = write_body(t.fd, shown, h)) == kV2NoRoom) {
			if ((err = more_buckets()))
				return err;
			if (lseek(t.fd, 0, SEEK_SET) < 0 || ftruncate(t.fd, 0) < 0)
				return b_->fail(-errno, "writing %s: %s", shown, strerror(errno));
		}
		uint64_t isum = 0;
		uint64_t isize = L_.bucket_count * kV2BucketBytes;
		if (!err)
			err = read_back_checksum(b_, t.fd, SHMKV_HEADER_SIZE, isize, &isum);
		h.sections[0] = {SHMKV_SECTION_INDEX, 0, SHMKV_HEADER_SIZE, isize, isum};
		if (!err)
			err = write_header(b_, L_, t.fd, shown, h);
		if (err)
			return err;
		b_->spill.reset(); // the spill files are gone before the image is published
		if (to_stdout)
			return copy_to_stdout(b_, t.fd, L_.file_size);
		return commit_target(b_, t);
	}
	// The image but its header and the index's checksum: 0, kV2NoRoom or an error.
	int write_body(int fd, const char *shown, shmkv_image_header &h)
	{
		memset(&h, 0, sizeof h);
		Writer w(b_, fd, shown);
		int err = w.pad_to(L_.entries_off);
		if (!err)
			err = w.flush();
		auto values = [&] {
			return values_.stream(0, size_t(1) << 20,
					      [&](const uint8_t *d, size_t k) { return w.put_big(d, k); });
		};
		StreamIndexV2 ix(b_, fd, L_.bucket_count, SHMKV_HEADER_SIZE);
		auto filter = [&] {
			return filter_.stream(0, size_t(1) << 20,
					      [&](const uint8_t *d, size_t k) { return w.put_big(d, k); });
		};
		if (!err)
			err = write_sections(w, L_, h, [&] { return write_entries_v2(w, ix); }, values,
					     filter);
		if (!err)
			err = ix.finish();
		L_.max_probe = ix.max_probe;
		L_.record_bytes = ix.record_bytes;
		return err;
	}
	// No room for some record: the layout again with 1/8 more buckets,
	// everything after the index moved by as many bytes.
	int more_buckets()
	{
		uint64_t was = L_.bucket_count;
		if (int err = v2_more_buckets(b_, L_, v2_bytes_))
			return err;
		uint64_t delta = (L_.bucket_count - was) * kV2BucketBytes; // keeps every 64-byte phase
		L_.entries_off += delta;
		L_.entries_end += delta;
		L_.values_off += delta;
		L_.values_end += delta;
		return set_file_size(b_, L_);
	}
	// Every record to the index in order, the OUT records' entries to
	// ENTRIES (the leaves are kept for a retry).
	int write_entries_v2(Writer &w, StreamIndexV2 &ix)
	{
		uint64_t pos = L_.entries_off;
		std::vector<uint8_t> ent;
		for (size_t q = 0; q < leaves(); q++) {
			int err = each_entry(q, [&](const SRec &r, bool shared, uint64_t ref) {
				V2Item it{r.data(), r.data() + r.key_len, r.val_len, r.expires(), r.key_len,
					  (uint16_t)shmkv_key_tag(r.h), r.type, shape(r), 0};
				if (it.s.out) {
					uint64_t sz = entry_size(r.key_len, r.type, r.val_len, shared);
					it.entry_off = place_entry(pos, sz);
					ent.assign(sz, 0);
					render_entry(ent.data(), r.type, r.data(), r.key_len,
						     r.data() + r.key_len, r.val_len, shared,
						     shared ? L_.values_off + ref : 0);
					int e = w.pad_to(it.entry_off);
					if (!e)
						e = w.put(ent.data(), sz);
					if (e)
						return e;
				}
				return ix.add(r.h, it);
			});
			if (err)
				return err;
			b_->progress("writing", q + 1, leaves());
		}
		return 0;
	}
};

} // namespace

int spill_finish(shmkv_builder *b, const char *path, shmkv_build_stats *st)
{
	auto t0 = std::chrono::steady_clock::now();
	int err = check_output(b, path);
	Layout L;
	uint64_t records = b->seq0 + b->recs.size();
	try {
		if (!err)
			err = SpillBuild(b, L).run(path);
	} catch (const std::bad_alloc &) {
		err = b->fail(-ENOMEM, "%s: out of memory while spilling", path);
	}
	b->spill.reset();
	if (err)
		return err;
	b->progress("done", 1, 1);
	fill_stats(L, records, t0, st);
	return 0;
}

} // namespace shmkv_build
