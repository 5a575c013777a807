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
//   EntryFields     every OUT entry's type, flags, key_len and value_len damaged
//   RecordFields    every inline record's kind, key_len and value_len damaged
//   DeepChecks      damage only the structural walk sees
//   HeaderFields    each header check, one field at a time, with its message
//   Open*           missing file, directory, empty file, unknown flags, errno
//
// The loops run in-process. A crash kills the binary (a failed test); a
// SIGSEGV/SIGBUS handler first prints which case was running and then
// hands the signal on to the previous handler (the sanitizer's, if any).
// Images in memory lie between guard regions (image_util.h's Guarded).
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
#include "image_util.h"
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

struct Fixture {
	TempDir dir;
	std::string path = dir.file("good.shmkv");
	std::string bytes;
	std::vector<std::string> keys;

	// every type inline, OUT records (long keys, long and shared values),
	// 300 records
	Fixture()
	{
		Builder b;
		EXPECT_TRUE(b.ok());
		const float f[3] = {1, 2, 3};
		const double d[2] = {4, 5};
		const int64_t l[2] = {6, 7};
		const char *strs[3] = {"x", "", "yz"};
		const size_t lens[3] = {1, 0, 2};
		const std::string shared(300, 'S'); // dedup: VALUES is not empty
		for (int i = 0; i < 300; i++) {
			std::string k = i % 37 == 5 ? std::string(260 + i, 'K') + std::to_string(i)
						    : "k" + std::to_string(i);
			keys.push_back(k);
			const char *kp = k.data();
			size_t kl = k.size();
			switch (i % 10) {
			case 0: EXPECT_EQ(b.i64(k, i), 0); break;
			case 1:
				EXPECT_EQ(b.str(k, (i % 3 ? "v" : std::string(200, 'w')) + std::to_string(i)), 0);
				break;
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
	const void *k = nullptr;
	size_t kl = 0;
	shmkv_value v;
	for (bool all : {false, true}) {
		if (all)
			shmkv_iter_init_all(db, &it);
		else
			shmkv_iter_init(db, &it);
		uint64_t n = 0;
		while (shmkv_iter_next(&it, &k, &kl, &v) == 0 && n <= db->entry_count)
			n++;
	}
	char why[256];
	(void)shmkv_verify(db, why, sizeof why);
}

// The suite: one fixture, built once.
class Corruption : public ::testing::Test {
protected:
	static Fixture *fx;
	static void SetUpTestSuite() { fx = new Fixture; }
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
Fixture *Corruption::fx = nullptr;

void good_image_is_good(const Fixture *fx)
{
	shmkv_image_header h = fx->hdr();
	EXPECT_EQ(h.format_version, SHMKV_FORMAT_VERSION);
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

using testimg::Guarded;

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
	shmkv_iter_init_all(&db, &it);
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
		testimg::reseal(img);
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

TEST_F(Corruption, GoodImageIsGood) { good_image_is_good(fx); }
TEST_F(Corruption, Truncation) { truncation(fx); }
TEST_F(Corruption, BitFlips) { bit_flips(fx); }
TEST_F(Corruption, StructuralFuzz) { structural_fuzz(fx); }

// Every entry in turn with a damaged header field (checksums recomputed):
// key_len and value_len up to their maxima reach far past the section and
// the image, type and flags out of range.
TEST_F(Corruption, EntryFields)
{
	// the OUT records' entries, found by iterating the good image: a key in
	// ENTRIES follows its entry's 8-byte header
	std::vector<uint64_t> offs;
	{
		Guarded g(fx->bytes);
		shmkv db;
		char why[256];
		ASSERT_EQ(g.open(0, &db, why, sizeof why), 0) << why;
		shmkv_iter it;
		shmkv_iter_init_all(&db, &it);
		const void *k = nullptr;
		size_t kl = 0;
		shmkv_value v;
		size_t n = 0;
		while (shmkv_iter_next(&it, &k, &kl, &v) == 0) {
			const uint64_t at = (uint64_t)((const uint8_t *)k - db.base);
			n++;
			if (at >= db.entries_off && at < db.entries_end)
				offs.push_back(at - sizeof(shmkv_entry_header));
		}
		ASSERT_EQ(n, fx->keys.size());
	}
	ASSERT_GT(offs.size(), 20u) << "the fixture has OUT records";
	ASSERT_LT(offs.size(), fx->keys.size()) << "and inline ones";
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
			testimg::reseal(img);
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

// Every inline record in turn with a damaged head (FORMAT.md §6; checksums
// recomputed): its kind, key_len and value_len out of range or changed.
TEST_F(Corruption, RecordFields)
{
	std::vector<uint64_t> recs; // image offsets of the inline records
	{
		Guarded g(fx->bytes);
		shmkv db;
		char why[256];
		ASSERT_EQ(g.open(0, &db, why, sizeof why), 0) << why;
		const shmkv_image_header *h = shmkv_header(&db);
		for (uint64_t b = 0; b < h->bucket_count; b++) {
			const uint64_t at = h->sections[0].offset + b * SHMKV_BUCKET_BYTES;
			const uint8_t *bk = db.base + at;
			for (unsigned i = 0; i < bk[0]; i++) {
				shmkv_record r{};
				ASSERT_EQ(shmkv_record_at(bk, i, &r), 0);
				if (!(r.kind & SHMKV_REC_OUT))
					recs.push_back(at + r.pos);
			}
		}
	}
	ASSERT_GT(recs.size(), 100u);
	struct Edit {
		const char *name;
		unsigned at; // byte of the record
		int value;   // < 0: xor with -value
		bool must_refuse;
	};
	const Edit edits[] = {
		{"kind bit 4", 0, -0x10, true},
		{"kind bit 5", 0, -0x20, true},
		{"type 0", 0, 0, true},
		{"type 10", 0, 10, true},
		{"kind EXPIRES", 0, -0x40, true},
		{"kind OUT", 0, -0x80, true},
		{"key_len 255", 1, 255, true},
		{"key_len +1", 1, -1, false},
		{"value_len 255", 2, 255, true},
		{"value_len bit 0", 2, -1, false},
	};
	int refused = 0, total = 0;
	for (const Edit &ed : edits) {
		for (uint64_t off : recs) {
			std::string img = fx->bytes;
			char &c = img[off + ed.at];
			const char was = c;
			c = (char)(ed.value < 0 ? (unsigned char)c ^ (unsigned)-ed.value : (unsigned)ed.value);
			if (c == was)
				continue;
			testimg::reseal(img);
			CASE("record at %" PRIu64 " (kind %u): %s", off, (unsigned)(unsigned char)img[off],
			     ed.name);
			SCOPED_TRACE(crash_case::g_case);
			int r = check_guarded(img, fx->keys);
			if (ed.must_refuse) {
				EXPECT_NE(r, 0) << "a damaged record passed verify";
				refused += r != 0;
				total++;
			}
		}
	}
	CASE("(none)");
	printf("record fields: %d of %d damaged images refused\n", refused, total);
	EXPECT_GT(total, 0);
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
		 "version 3, this reader reads version 2"},
		// format 1 is retired: the version is checked before the layout hash
		{"format_version 1", [](shmkv_image_header &h) { h.format_version = 1; },
		 SHMKV_EVERSION, "image format version 1 is retired: convert it with "
				 "'shmctl image upgrade OLD -o NEW'"},
		{"layout_hash", [](shmkv_image_header &h) { h.layout_hash ^= 1; }, SHMKV_ELAYOUT,
		 "layout hash"},
		{"file_size larger", [](shmkv_image_header &h) { h.file_size += 4096; },
		 SHMKV_ETRUNCATED, "header says"},
		{"file_size smaller", [](shmkv_image_header &h) { h.file_size -= 4096; }, SHMKV_ECORRUPT,
		 "after the image end"},
		{"header_size", [](shmkv_image_header &h) { h.header_size = 8192; }, SHMKV_ECORRUPT,
		 "header_size"},
		{"flags", [](shmkv_image_header &h) { h.flags |= 1u << 7; }, SHMKV_ECORRUPT, "flags"},
		{"bucket_slots", [](shmkv_image_header &h) { h.bucket_slots = 64; }, SHMKV_ECORRUPT,
		 "bucket_slots 64, expected 128"},
		{"index at 64, not 128", [](shmkv_image_header &h) {
			 for (unsigned i = 0; i < 3; i++)
				 h.sections[i].offset += 64;
			 h.sections[2].size = std::min(h.sections[2].size, h.file_size - h.sections[2].offset);
		 }, SHMKV_ECORRUPT, "not a multiple of 128"},
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
		{"entry_count",
		 [](shmkv_image_header &h) { h.entry_count = h.bucket_count * SHMKV_MAX_RECORDS + 1; },
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
	};
	for (const Edit &e : edits) {
		CASE("header field %s", e.name);
		SCOPED_TRACE(e.name);
		std::string img = fx->bytes;
		shmkv_image_header h = header_of(img);
		e.apply(h);
		put_header(img, h);
		testimg::reseal(img);
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

// Damage only the structural walk sees (checksums recomputed): padding,
// the bucket directory and records (FORMAT.md §6), an OUT entry's header.
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
	// the first bucket with two records or more, its first record's offset,
	// and the end of its last record
	uint64_t bk = idx;
	while (bk < idx + h.sections[0].size && (unsigned char)fx->bytes[bk] < 2)
		bk += SHMKV_BUCKET_BYTES;
	ASSERT_LT(bk, idx + h.sections[0].size);
	const unsigned n = (unsigned char)fx->bytes[bk];
	const unsigned r0 = (unsigned char)fx->bytes[bk + 8] & SHMKV_DIR_OFF_MASK;
	shmkv_record last{};
	ASSERT_EQ(shmkv_record_at((const uint8_t *)fx->bytes.data() + bk, n - 1, &last), 0);
	// a home bucket without displaced keys
	uint64_t nod = idx;
	while (nod < idx + h.sections[0].size && fx->bytes[nod + 1])
		nod += SHMKV_BUCKET_BYTES;
	const Edit edits[] = {
		{"header padding", SHMKV_HEADER_USED + 100, 1, "non-zero byte"},
		{"trailing padding", last_end < h.file_size ? h.file_size - 1 : 0, 0x80, "non-zero byte"},
		{"directory tag bit", bk + 9, 0x01, "directory tag bits"},
		{"directory offset +1", bk + 8, 0x01, ""},
		{"record kind bit 5", bk + r0, 0x20, "malformed"},
		{"bucket tail after the records", last.end < 128 ? bk + 127 : 0, 0x01, "after bucket"},
		{"filter bit without displaced keys", nod < idx + h.sections[0].size ? nod + 2 : 0, 0x01,
		 "filter bits without displaced keys"},
		{"count + 1", bk, (uint8_t)(n ^ (n + 1)), ""},
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
		testimg::reseal(img);
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
