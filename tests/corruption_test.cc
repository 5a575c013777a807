// corruption_test: damaged images are refused with a reason, never crash.
//
//   Truncation      cut at every section boundary and inside sections:
//                   SHMKV_ETRUNCATED (or ECORRUPT) and a message; extra bytes too
//   BitFlips        1,000 single-bit flips (fixed seed). Every byte is covered
//                   by a checksum (header, sections) or is must-be-zero padding:
//                   every flip fails shmkv_open_file (ECHECKSUM in checksummed
//                   bytes, ECORRUPT in padding) and SHMKV_OPEN_DEEP; opened
//                   with SHMKV_OPEN_NOVERIFY, shmkv_verify fails
//   StructuralFuzz  5,000 images with 1-3 flips and the checksums recomputed,
//                   so that the structural checks of open and verify see
//                   damaged data, in memory with guard regions around it:
//                   anything may be refused, nothing may read out of bounds,
//                   and an image verify accepts must serve lookups and iteration
//   EntryFields     every entry's type, flags, key_len and value_len damaged
//   DeepChecks      damage only the structural walk sees
//   HeaderFields    each header check, one field at a time, with its message
//   Open*           missing file, directory, empty file, unknown flags, errno
//
// The loops run in-process. A crash kills the binary (a failed test); a
// SIGSEGV/SIGBUS handler first prints which case was running and then
// hands the signal on to the previous handler (the sanitizer's, if any).
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "crash_case.h"
#include "test_util.h"

using namespace shmkv_test;

namespace {

// ---- the image under test ------------------------------------------------

shmkv_image_header header_of(const std::string &img)
{
	shmkv_image_header h;
	memset(&h, 0, sizeof h);
	memcpy(&h, img.data(), std::min(img.size(), sizeof h));
	return h;
}

void put_header(std::string &img, const shmkv_image_header &h)
{
	memcpy(&img[0], &h, sizeof h);
}

// Recomputes every section checksum that fits the image, then the header's.
void fix_checksums(std::string &img)
{
	shmkv_image_header h = header_of(img);
	for (unsigned i = 0; i < SHMKV_MAX_SECTIONS && i < h.section_count; i++) {
		shmkv_section_desc &s = h.sections[i];
		if (s.offset <= img.size() && s.size <= img.size() - s.offset)
			s.checksum = XXH3_64bits(img.data() + s.offset, (size_t)s.size);
	}
	put_header(img, h);
	h.header_checksum = XXH3_64bits(img.data(), offsetof(shmkv_image_header, header_checksum));
	put_header(img, h);
}

struct Fixture {
	TempDir dir;
	std::string path = dir.file("good.shmkv");
	std::string bytes;
	std::vector<std::string> keys;

	// format 1 for the forgeries of format 1's slots and entries (EntryFields,
	// DeepChecks, ...); the sweeps (Truncation, BitFlips, StructuralFuzz) run
	// on both formats
	explicit Fixture(unsigned format)
	{
		shmkv_build_options o = test_options();
		o.format = format;
		Builder b(o);
		EXPECT_TRUE(b.ok());
		const float f[3] = {1, 2, 3};
		const double d[2] = {4, 5};
		const int64_t l[2] = {6, 7};
		const char *strs[3] = {"x", "", "yz"};
		const size_t lens[3] = {1, 0, 2};
		const std::string shared(300, 'S'); // dedup: VALUES is not empty
		for (int i = 0; i < 300; i++) {
			std::string k = "k" + std::to_string(i);
			keys.push_back(k);
			const char *kp = k.data();
			size_t kl = k.size();
			switch (i % 10) {
			case 0: EXPECT_EQ(b.i64(k, i), 0); break;
			case 1: EXPECT_EQ(b.str(k, "v" + std::to_string(i)), 0); break;
			case 2: EXPECT_EQ(b.str(k, shared), 0); break;
			case 3: EXPECT_EQ(shmkv_builder_add_bool(b, kp, kl, i & 1), 0); break;
			case 4: EXPECT_EQ(shmkv_builder_add_f64(b, kp, kl, i / 3.0), 0); break;
			case 5: EXPECT_EQ(shmkv_builder_add_f32list(b, kp, kl, f, 3), 0); break;
			case 6: EXPECT_EQ(shmkv_builder_add_f64list(b, kp, kl, d, 2), 0); break;
			case 7: EXPECT_EQ(shmkv_builder_add_i64list(b, kp, kl, l, 2), 0); break;
			case 8: EXPECT_EQ(shmkv_builder_add_strlist(b, kp, kl, strs, lens, 3), 0); break;
			default: EXPECT_EQ(shmkv_builder_add_bytes(b, kp, kl, "\0\1\2", 3), 0); break;
			}
		}
		EXPECT_EQ(b.finish(path), 0) << b.error();
		bytes = read_file(path);
	}
	shmkv_image_header hdr() const { return header_of(bytes); }
	// Writes img to a scratch file and returns its path.
	std::string put(const std::string &img, const char *name = "bad.shmkv") const
	{
		std::string p = dir.file(name);
		EXPECT_TRUE(write_file(p, img));
		return p;
	}
};

struct OpenResult {
	int err;
	std::string why;
	shmkv *db;
};

OpenResult try_open(const std::string &path, unsigned flags)
{
	OpenResult r;
	char why[512];
	memset(why, 'X', sizeof why);
	why[sizeof why - 1] = 0;
	r.db = nullptr;
	r.err = shmkv_open_file_diag(path.c_str(), flags, &r.db, why, sizeof why);
	r.why = why;
	if (r.err) {
		EXPECT_EQ(r.db, nullptr);
	}
	return r;
}

// Walks an opened image without trusting it (the checked paths only).
void walk_checked(const shmkv *db)
{
	shmkv_iter it;
	shmkv_iter_init(db, &it);
	const void *k = nullptr;
	size_t kl = 0;
	shmkv_value v;
	uint64_t n = 0;
	while (shmkv_iter_next(&it, &k, &kl, &v) == 0 && n <= db->entry_count)
		n++;
	char why[256];
	(void)shmkv_verify(db, why, sizeof why);
}

// The suites on one fixture per format: Corruption (format 1: every test
// below) and CorruptionV2 (format 2: the sweeps).
template <unsigned Format> class CorruptionOf : public ::testing::Test {
protected:
	static Fixture *fx;
	static void SetUpTestSuite() { fx = new Fixture(Format); }
	static void TearDownTestSuite()
	{
		delete fx;
		fx = nullptr;
	}
	void SetUp() override
	{
		ASSERT_FALSE(fx->bytes.empty());
		ASSERT_EQ(fx->bytes.size() % SHMKV_FILE_ALIGN, 0u);
	}
};
template <unsigned Format> Fixture *CorruptionOf<Format>::fx = nullptr;
using Corruption = CorruptionOf<1>;
using CorruptionV2 = CorruptionOf<2>;

void good_image_is_good(const Fixture *fx, unsigned format)
{
	shmkv_image_header h = fx->hdr();
	EXPECT_EQ(h.format_version, format);
	ASSERT_EQ(h.section_count, 3u);
	for (unsigned i = 0; i < 3; i++) {
		EXPECT_GT(h.sections[i].size, 0u) << "section " << i << " is empty";
	}
	OpenResult r = try_open(fx->path, SHMKV_OPEN_DEEP);
	ASSERT_EQ(r.err, 0) << r.why;
	Db db(r.db);
	EXPECT_EQ(verify_msg(db), "");
	EXPECT_GT(db.hdr()->dedup_refs, 0u);
	printf("image %zu bytes: index [%" PRIu64 ", +%" PRIu64 "), entries [%" PRIu64 ", +%" PRIu64
	       "), values [%" PRIu64 ", +%" PRIu64 ")\n",
	       fx->bytes.size(), h.sections[0].offset, h.sections[0].size, h.sections[1].offset,
	       h.sections[1].size, h.sections[2].offset, h.sections[2].size);
}

void truncation(const Fixture *fx)
{
	shmkv_image_header h = fx->hdr();
	const uint64_t size = fx->bytes.size();
	std::set<uint64_t> cuts = {0, 1, 8, 511, 512, 4095, 4096, size - 4096, size - 64, size - 1};
	for (unsigned i = 0; i < h.section_count; i++) {
		uint64_t off = h.sections[i].offset, sz = h.sections[i].size;
		for (uint64_t c : {off - 1, off, off + 1, off + 8, off + sz / 3, off + sz / 2,
				   off + sz - 1, off + sz, off + sz + 1})
			cuts.insert(c);
	}
	for (uint64_t cut : cuts) {
		if (cut >= size)
			continue;
		CASE("truncated to %" PRIu64 " of %" PRIu64 " bytes", cut, size);
		SCOPED_TRACE(crash_case::g_case);
		std::string p = fx->put(fx->bytes.substr(0, cut));
		for (unsigned flags : {0u, SHMKV_OPEN_NOVERIFY, SHMKV_OPEN_DEEP}) {
			OpenResult r = try_open(p, flags);
			EXPECT_TRUE(r.err == SHMKV_ETRUNCATED || r.err == SHMKV_ECORRUPT)
				<< "flags " << flags << ": " << shmkv_strerror(r.err) << ": " << r.why;
			EXPECT_FALSE(r.why.empty() || r.why[0] == 'X') << "no reason given";
			shmkv_close(r.db);
		}
		char why[256] = "";
		int err = shmkv_image_check(fx->bytes.data(), cut, 0, why, sizeof why);
		EXPECT_TRUE(err == SHMKV_ETRUNCATED || err == SHMKV_ECORRUPT) << shmkv_strerror(err);
		EXPECT_NE(why[0], 0);
	}
	// bytes after the end are refused too
	for (uint64_t extra : {UINT64_C(1), UINT64_C(4096)}) {
		CASE("%" PRIu64 " bytes appended", extra);
		std::string p = fx->put(fx->bytes + std::string(extra, '\0'));
		OpenResult r = try_open(p, 0);
		EXPECT_EQ(r.err, SHMKV_ECORRUPT) << r.why;
		EXPECT_TRUE(contains_ci(r.why, "after the image end")) << r.why;
	}
	CASE("(none)");
}

// Bytes of the image a checksum covers: the header struct and the sections.
bool checksummed(const shmkv_image_header &h, uint64_t pos)
{
	if (pos < SHMKV_HEADER_USED)
		return true;
	for (unsigned i = 0; i < h.section_count; i++)
		if (pos >= h.sections[i].offset && pos < h.sections[i].offset + h.sections[i].size)
			return true;
	return false;
}

void bit_flips(const Fixture *fx)
{
	const shmkv_image_header h = fx->hdr();
	const uint64_t size = fx->bytes.size();
	std::mt19937_64 rng(20240601);
	int in_header = 0, in_sections = 0, in_padding = 0;
	for (int n = 0; n < 1000; n++) {
		uint64_t pos = rng() % size;
		unsigned bit = (unsigned)(rng() % 8);
		CASE("bit flip %d: byte %" PRIu64 " bit %u", n, pos, bit);
		SCOPED_TRACE(crash_case::g_case);
		std::string img = fx->bytes;
		img[pos] = (char)(img[pos] ^ (1 << bit));
		std::string p = fx->put(img);
		bool covered = checksummed(h, pos);
		(pos < SHMKV_HEADER_USED ? in_header : covered ? in_sections : in_padding)++;

		// every byte is checksummed or must-be-zero padding: open refuses them all
		OpenResult r = try_open(p, 0);
		shmkv_close(r.db);
		EXPECT_NE(r.err, 0) << "shmkv_open_file accepted a flipped image";
		EXPECT_FALSE(r.why.empty() || r.why[0] == 'X') << "no reason given";
		if (pos < SHMKV_HEADER_USED) {
			EXPECT_TRUE(r.err == SHMKV_ECHECKSUM || r.err == SHMKV_EMAGIC ||
				    r.err == SHMKV_EVERSION || r.err == SHMKV_ELAYOUT)
				<< shmkv_strerror(r.err) << ": " << r.why;
		} else if (covered) {
			EXPECT_EQ(r.err, SHMKV_ECHECKSUM) << r.why;
		} else {
			EXPECT_EQ(r.err, SHMKV_ECORRUPT) << r.why;
			EXPECT_TRUE(contains_ci(r.why, "non-zero byte")) << r.why;
		}
		r = try_open(p, SHMKV_OPEN_DEEP);
		shmkv_close(r.db);
		EXPECT_NE(r.err, 0) << "SHMKV_OPEN_DEEP accepted a flipped image";
		EXPECT_FALSE(r.why.empty() || r.why[0] == 'X') << "no reason given";

		r = try_open(p, SHMKV_OPEN_NOVERIFY);
		if (r.err) {
			EXPECT_LT(pos, SHMKV_HEADER_USED) << "NOVERIFY refused a flip outside the header: "
							  << r.why;
			continue;
		}
		Db db(r.db);
		std::string v = verify_msg(db);
		EXPECT_NE(v, "") << "shmkv_verify accepted a flipped image";
		walk_checked(db);
	}
	CASE("(none)");
	printf("flips: %d in the header, %d in sections, %d in padding\n", in_header, in_sections,
	       in_padding);
	EXPECT_GT(in_sections, 0);
}

// An image copied into memory between inaccessible regions, so that any read
// past its ends faults (a file mapping may have readable neighbours). The
// region after it spans 8 GiB of address space (no memory): further than any
// u16 key length plus u32 value length can reach.
//
// One reservation serves every image (one Guarded at a time), made once and
// reused: a guard page, room for the largest image, then the 8 GiB. Only the
// image's own pages are made readable, and emptied again afterwards. (Under
// qemu-user each mapping costs the emulator bookkeeping for its whole length:
// an 8 GiB mmap per image ran the 5,000-image StructuralFuzz out of memory.)
class Guarded {
public:
	explicit Guarded(const std::string &img)
	{
		uint8_t *arena = arena_();
		size_ = img.size();
		body_ = (size_ + kPage - 1) / kPage * kPage;
		if (!arena || body_ > kRoom) {
			ADD_FAILURE() << (arena ? "image larger than the guarded arena"
						: "mmap of the guarded arena failed");
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

	// What shmkv_open_file does, on this memory: check, then bind a handle.
	int open(unsigned flags, shmkv *db, char *why, size_t why_len) const
	{
		memset(db, 0, sizeof *db);
		int err = shmkv_image_check(base_, size_, flags, why, why_len);
		if (!err)
			shmkv__bind(db, base_, size_);
		return err;
	}

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

// Checks an image (in guarded memory) the way a reader would: open, verify,
// and when verify accepts it, lookups and iteration. Returns 0 (accepted),
// 1 (refused at open) or 2 (refused by verify).
int check_guarded(const std::string &img, const std::vector<std::string> &keys)
{
	Guarded g(img);
	shmkv db;
	char why[512] = "";
	if (g.open(0, &db, why, sizeof why)) {
		EXPECT_NE(why[0], 0) << "no reason given";
		return 1;
	}
	int err = shmkv_verify(&db, why, sizeof why);
	if (err) {
		EXPECT_TRUE(err == SHMKV_ECORRUPT || err == SHMKV_ECHECKSUM)
			<< shmkv_strerror(err) << ": " << why;
		EXPECT_NE(why[0], 0);
		walk_checked(&db);
		return 2;
	}
	// verify accepted it: lookups and iteration must be safe
	for (const std::string &k : keys) {
		shmkv_value v;
		int e = shmkv_get(&db, k.data(), k.size(), &v);
		EXPECT_TRUE(e == 0 || e == SHMKV_ENOTFOUND);
		std::string miss = k + "-absent";
		e = shmkv_get(&db, miss.data(), miss.size(), &v);
		EXPECT_TRUE(e == 0 || e == SHMKV_ENOTFOUND);
	}
	shmkv_iter it;
	shmkv_iter_init(&db, &it);
	const void *k = nullptr;
	size_t kl = 0;
	shmkv_value v;
	uint64_t count = 0;
	while ((err = shmkv_iter_next(&it, &k, &kl, &v)) == 0) {
		count++;
		shmkv_value got;
		EXPECT_EQ(shmkv_get(&db, k, kl, &got), 0) << "an iterated key is not found";
	}
	EXPECT_EQ(err, SHMKV_EEND);
	EXPECT_EQ(count, db.entry_count);
	return 0;
}

void structural_fuzz(const Fixture *fx)
{
	const uint64_t size = fx->bytes.size();
	const shmkv_image_header h0 = fx->hdr();
	std::mt19937_64 rng(77);
	int outcome[3] = {0, 0, 0};
	for (int n = 0; n < 5000; n++) {
		std::string img = fx->bytes;
		std::string what;
		int flips = 1 + (int)(rng() % 3);
		for (int f = 0; f < flips; f++) {
			uint64_t pos = 0;
			switch (rng() % 4) {
			case 0: pos = rng() % SHMKV_HEADER_USED; break; // header fields
			case 1: // index
				pos = h0.sections[0].offset + rng() % h0.sections[0].size;
				break;
			case 2: // entries
				pos = h0.sections[1].offset + rng() % h0.sections[1].size;
				break;
			default: pos = rng() % size; break;
			}
			unsigned bit = (unsigned)(rng() % 8);
			img[pos] = (char)(img[pos] ^ (1 << bit));
			what += " " + std::to_string(pos) + "." + std::to_string(bit);
		}
		fix_checksums(img);
		CASE("structural fuzz %d: flips (byte.bit)%s", n, what.c_str());
		SCOPED_TRACE(crash_case::g_case);
		outcome[check_guarded(img, fx->keys)]++;
	}
	CASE("(none)");
	printf("structural fuzz: %d accepted (value-only flips), %d refused at open, %d by verify\n",
	       outcome[0], outcome[1], outcome[2]);
	EXPECT_GT(outcome[1], 0);
	EXPECT_GT(outcome[2], 0);
}

TEST_F(Corruption, GoodImageIsGood) { good_image_is_good(fx, 1); }
TEST_F(Corruption, Truncation) { truncation(fx); }
TEST_F(Corruption, BitFlips) { bit_flips(fx); }
TEST_F(Corruption, StructuralFuzz) { structural_fuzz(fx); }

// The sweeps on the same records built in format 2 (the builder's default,
// named so that the test keeps its meaning): 128-byte buckets with inline
// records, ENTRIES only for the OUT ones (the 300-byte shared value).
TEST_F(CorruptionV2, GoodImageIsGood) { good_image_is_good(fx, 2); }
TEST_F(CorruptionV2, Truncation) { truncation(fx); }
TEST_F(CorruptionV2, BitFlips) { bit_flips(fx); }
TEST_F(CorruptionV2, StructuralFuzz) { structural_fuzz(fx); }

// Every entry in turn with a damaged header field (checksums recomputed):
// key_len and value_len up to their maxima reach far past the section and
// the image, type and flags out of range.
TEST_F(Corruption, EntryFields)
{
	// the entries, found by iterating the good image
	std::vector<uint64_t> offs;
	{
		Guarded g(fx->bytes);
		shmkv db;
		char why[256];
		ASSERT_EQ(g.open(0, &db, why, sizeof why), 0) << why;
		shmkv_iter it;
		shmkv_iter_init(&db, &it);
		const void *k = nullptr;
		size_t kl = 0;
		shmkv_value v;
		while (shmkv_iter_next(&it, &k, &kl, &v) == 0)
			offs.push_back((uint64_t)((const uint8_t *)k - db.base) - sizeof(shmkv_entry_header));
	}
	ASSERT_EQ(offs.size(), fx->keys.size());
	struct Edit {
		const char *name;
		void (*apply)(shmkv_entry_header &e);
		bool must_refuse; // false: the result may be another valid entry
	};
	const Edit edits[] = {
		{"key_len 65535", [](shmkv_entry_header &e) { e.key_len = 0xffff; }, true},
		{"key_len +16384", [](shmkv_entry_header &e) { e.key_len = (uint16_t)(e.key_len + 16384); },
		 true},
		{"key_len +64", [](shmkv_entry_header &e) { e.key_len = (uint16_t)(e.key_len + 64); }, true},
		{"value_len max", [](shmkv_entry_header &e) { e.value_len = 0xffffffffu; }, true},
		{"value_len 2^31", [](shmkv_entry_header &e) { e.value_len = 0x80000000u; }, true},
		{"value_len +4096", [](shmkv_entry_header &e) { e.value_len += 4096; }, true},
		{"value_len -1", [](shmkv_entry_header &e) { e.value_len -= 1; }, false},
		{"type 0", [](shmkv_entry_header &e) { e.type = 0; }, true},
		{"type 10", [](shmkv_entry_header &e) { e.type = 10; }, true},
		{"type string", [](shmkv_entry_header &e) { e.type = SHMKV_TYPE_STRING; }, false},
		{"type strlist", [](shmkv_entry_header &e) { e.type = SHMKV_TYPE_STRLIST; }, false},
		{"flags shared", [](shmkv_entry_header &e) { e.flags ^= SHMKV_EFLAG_SHARED; }, false},
		{"flags unknown", [](shmkv_entry_header &e) { e.flags |= 0x80; }, true},
	};
	int refused = 0, total = 0;
	for (const Edit &ed : edits) {
		for (uint64_t off : offs) {
			std::string img = fx->bytes;
			shmkv_entry_header eh;
			memcpy(&eh, &img[off], sizeof eh);
			shmkv_entry_header was = eh;
			ed.apply(eh);
			if (memcmp(&eh, &was, sizeof eh) == 0)
				continue;
			memcpy(&img[off], &eh, sizeof eh);
			fix_checksums(img);
			CASE("entry at %" PRIu64 " (type %u, key_len %u, value_len %u): %s", off,
			     was.type, was.key_len, was.value_len, ed.name);
			SCOPED_TRACE(crash_case::g_case);
			int r = check_guarded(img, fx->keys);
			if (ed.must_refuse) {
				EXPECT_NE(r, 0) << "a damaged entry header passed verify";
				refused += r != 0;
				total++;
			}
		}
	}
	CASE("(none)");
	printf("entry fields: %d of %d damaged images refused\n", refused, total);
}

// One header field at a time (checksum recomputed): the check that refuses
// it and its message.
TEST_F(Corruption, HeaderFields)
{
	struct Edit {
		const char *name;
		void (*apply)(shmkv_image_header &h);
		int err;
		const char *why;
	};
	const Edit edits[] = {
		{"magic", [](shmkv_image_header &h) { h.magic[0] = 'X'; }, SHMKV_EMAGIC, "magic"},
		{"format_version", [](shmkv_image_header &h) { h.format_version = 3; }, SHMKV_EVERSION,
		 "version 3"},
		// a v1 image claiming v2: v2's layout hash is checked, not v1's
		{"format_version 2 with the v1 layout",
		 [](shmkv_image_header &h) { h.format_version = 2; }, SHMKV_ELAYOUT, "for version 2"},
		{"layout_hash", [](shmkv_image_header &h) { h.layout_hash ^= 1; }, SHMKV_ELAYOUT,
		 "layout hash"},
		{"file_size larger", [](shmkv_image_header &h) { h.file_size += 4096; },
		 SHMKV_ETRUNCATED, "header says"},
		{"file_size smaller", [](shmkv_image_header &h) { h.file_size -= 4096; }, SHMKV_ECORRUPT,
		 "after the image end"},
		{"header_size", [](shmkv_image_header &h) { h.header_size = 8192; }, SHMKV_ECORRUPT,
		 "header_size"},
		{"flags", [](shmkv_image_header &h) { h.flags |= 1u << 7; }, SHMKV_ECORRUPT, "flags"},
		{"bucket_slots", [](shmkv_image_header &h) { h.bucket_slots = 16; }, SHMKV_ECORRUPT,
		 "bucket_slots"},
		{"hash_bits 0", [](shmkv_image_header &h) { h.hash_bits = 0; }, SHMKV_ECORRUPT,
		 "hash_bits"},
		{"hash_bits 65", [](shmkv_image_header &h) { h.hash_bits = 65; }, SHMKV_ECORRUPT,
		 "hash_bits"},
		{"bucket_count 0", [](shmkv_image_header &h) { h.bucket_count = 0; }, SHMKV_ECORRUPT,
		 "bucket_count"},
		{"bucket_count huge", [](shmkv_image_header &h) { h.bucket_count = UINT64_MAX / 2; },
		 SHMKV_ECORRUPT, "bucket_count"},
		{"bucket_count+1", [](shmkv_image_header &h) { h.bucket_count += 1; }, SHMKV_ECORRUPT,
		 "index section"},
		{"entry_count", [](shmkv_image_header &h) { h.entry_count = h.bucket_count * 8 + 1; },
		 SHMKV_ECORRUPT, "entry_count"},
		{"max_probe", [](shmkv_image_header &h) { h.max_probe = (uint32_t)h.bucket_count; },
		 SHMKV_ECORRUPT, "max_probe"},
		{"name", [](shmkv_image_header &h) { memset(h.name, 'n', sizeof h.name); },
		 SHMKV_ECORRUPT, "name"},
		{"reserved0", [](shmkv_image_header &h) { h.reserved0 = 1; }, SHMKV_ECORRUPT, "reserved"},
		{"reserved[6]", [](shmkv_image_header &h) { h.reserved[6] = 1; }, SHMKV_ECORRUPT,
		 "reserved"},
		{"section_count", [](shmkv_image_header &h) { h.section_count = 2; }, SHMKV_ECORRUPT,
		 "section_count"},
		{"unused section", [](shmkv_image_header &h) { h.sections[5].size = 1; }, SHMKV_ECORRUPT,
		 "slot 5"},
		{"section kind", [](shmkv_image_header &h) { h.sections[1].kind = 3; }, SHMKV_ECORRUPT,
		 "kind"},
		{"section flags", [](shmkv_image_header &h) { h.sections[2].flags = 1; }, SHMKV_ECORRUPT,
		 "flags"},
		{"section misaligned", [](shmkv_image_header &h) { h.sections[1].offset += 8; },
		 SHMKV_ECORRUPT, "misaligned"},
		{"sections overlap",
		 [](shmkv_image_header &h) { h.sections[1].offset = h.sections[0].offset; },
		 SHMKV_ECORRUPT, "overlaps"},
		{"section past the end", [](shmkv_image_header &h) { h.sections[2].size = h.file_size; },
		 SHMKV_ECORRUPT, "past the image end"},
		{"section offset wraps",
		 [](shmkv_image_header &h) { h.sections[2].offset = UINT64_MAX - 63; }, SHMKV_ECORRUPT,
		 "past the image end"},
		{"entries too small", [](shmkv_image_header &h) { h.sections[1].size = 8; },
		 SHMKV_ECORRUPT, "too small"},
	};
	for (const Edit &e : edits) {
		CASE("header field %s", e.name);
		SCOPED_TRACE(e.name);
		std::string img = fx->bytes;
		shmkv_image_header h = header_of(img);
		e.apply(h);
		put_header(img, h);
		fix_checksums(img);
		std::string p = fx->put(img);
		OpenResult r = try_open(p, SHMKV_OPEN_NOVERIFY);
		shmkv_close(r.db);
		EXPECT_EQ(r.err, e.err) << shmkv_strerror(r.err) << ": " << r.why;
		EXPECT_TRUE(contains_ci(r.why, e.why)) << "no \"" << e.why << "\" in: " << r.why;
	}
	// a stale header checksum, and a stale section checksum named by section
	std::string img = fx->bytes;
	shmkv_image_header h = header_of(img);
	h.created_unix++;
	put_header(img, h);
	OpenResult r = try_open(fx->put(img), 0);
	EXPECT_EQ(r.err, SHMKV_ECHECKSUM);
	EXPECT_TRUE(contains_ci(r.why, "header checksum")) << r.why;
	img = fx->bytes;
	img[h.sections[1].offset + 3] ^= 0x10;
	r = try_open(fx->put(img), 0);
	EXPECT_EQ(r.err, SHMKV_ECHECKSUM);
	EXPECT_TRUE(contains_ci(r.why, "entries")) << r.why;
	r = try_open(fx->put(img), SHMKV_OPEN_NOVERIFY);
	ASSERT_EQ(r.err, 0) << r.why;
	Db db(r.db);
	EXPECT_TRUE(contains_ci(verify_msg(db), "checksum")) << verify_msg(db);
	CASE("(none)");
}

// Damage only the structural walk sees (checksums recomputed).
TEST_F(Corruption, DeepChecks)
{
	const shmkv_image_header h = fx->hdr();
	struct Edit {
		const char *name;
		uint64_t pos;
		uint8_t x;
		const char *why;
	};
	const uint64_t idx = h.sections[0].offset, ent = h.sections[1].offset;
	const uint64_t last_end = h.sections[2].offset + h.sections[2].size;
	uint64_t first_full = idx;
	while (first_full < idx + h.sections[0].size && !fx->bytes[first_full + 7] &&
	       !fx->bytes[first_full + 6])
		first_full += 8;
	const Edit edits[] = {
		{"header padding", SHMKV_HEADER_USED + 100, 1, "non-zero byte"},
		{"trailing padding", last_end < h.file_size ? h.file_size - 1 : 0, 0x80, "non-zero byte"},
		{"slot tag", first_full + 6, 0x01, "tag"},
		{"slot offset", first_full + 0, 0x08, ""},
		{"slot offset high", first_full + 4, 0x40, "outside"},
		{"slot meta byte", first_full + 5, 0x01, ""},
		{"entry type", ent + 0, 0x40, "type"},
		{"entry flags", ent + 1, 0x80, "flags"},
		{"entry key_len", ent + 3, 0x40, ""},
	};
	for (const Edit &e : edits) {
		CASE("deep check %s at %" PRIu64, e.name, e.pos);
		SCOPED_TRACE(crash_case::g_case);
		if (e.pos == 0)
			continue; // no such byte in this image
		std::string img = fx->bytes;
		img[e.pos] ^= (char)e.x;
		fix_checksums(img);
		std::string p = fx->put(img);
		OpenResult r = try_open(p, SHMKV_OPEN_DEEP);
		shmkv_close(r.db);
		EXPECT_EQ(r.err, SHMKV_ECORRUPT) << shmkv_strerror(r.err) << ": " << r.why;
		EXPECT_TRUE(contains_ci(r.why, e.why)) << "no \"" << e.why << "\" in: " << r.why;
		r = try_open(p, 0);
		if (r.err == 0) {
			Db db(r.db);
			walk_checked(db);
		}
	}
	CASE("(none)");
}

TEST(Open, Errors)
{
	TempDir dir;
	errno = 12345;
	OpenResult r = try_open(dir.file("missing.shmkv"), 0);
	EXPECT_EQ(r.err, -ENOENT);
	EXPECT_NE(r.why.find("missing.shmkv"), std::string::npos) << r.why;
	EXPECT_EQ(errno, 12345) << "the reader does not report through errno";
	r = try_open(dir.path(), 0);
	EXPECT_EQ(r.err, -EINVAL);
	EXPECT_TRUE(contains_ci(r.why, "not a regular file")) << r.why;
	std::string empty = dir.file("empty.shmkv");
	ASSERT_TRUE(write_file(empty, ""));
	r = try_open(empty, 0);
	EXPECT_EQ(r.err, SHMKV_ETRUNCATED);
	std::string junk = dir.file("junk");
	ASSERT_TRUE(write_file(junk, std::string(8192, 'j')));
	r = try_open(junk, 0);
	EXPECT_EQ(r.err, SHMKV_EMAGIC);
	EXPECT_TRUE(contains_ci(r.why, "magic")) << r.why;
	r = try_open(junk, 1u << 20);
	EXPECT_EQ(r.err, -EINVAL);
	EXPECT_TRUE(contains_ci(r.why, "flags")) << r.why;
	EXPECT_EQ(errno, 12345);
	shmkv *db = reinterpret_cast<shmkv *>(&dir);
	EXPECT_EQ(shmkv_open_file(junk.c_str(), 0, &db), SHMKV_EMAGIC);
	EXPECT_EQ(db, nullptr) << "*out is NULL on failure";
	shmkv_close(nullptr);
}

} // namespace
