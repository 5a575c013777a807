// reject_test: damaged images dropped into the spool (or loaded over the
// socket) are refused and the current generation keeps serving.
//
// Each damaged image is renamed into the spool; the test waits for
// NAME.shmkv.rejected, then checks the `rejected` log line with its reason,
// `status`'s last_error, that the generation and segment did not move, that
// an attached reader neither moves nor reads anything different, and that no
// .loading segment is left. Cases: a byte flipped inside the ENTRIES section
// (section checksum), a byte flipped in the header (header checksum), an
// image cut in the middle of a section (file_size), an image shorter than
// its header, and a file that is not an image. Over the socket the reply is
// {"ok": false} with the shmkv code and says the current generation keeps
// serving. A good image afterwards loads and clears last_error.
//
// A format 1 image (retired: lib/FORMAT.md §15) is refused with the command
// that converts it.
//
// Forged images (damage, then every checksum recomputed, as anyone who can
// write the spool can do) get the full structural check of `shmctl image
// verify`: a non-zero byte in padding, an OUT record pointing outside the
// entries, an entry whose value runs past its section, a directory entry
// pointing into the directory are refused; and over many random forgeries
// the loader publishes exactly what shmkv_verify accepts.
//
// The read paths: a file out of the page cache is read with O_DIRECT
// (direct_io: true, `direct=yes`), one the page cache holds is read buffered
// (direct_io: false, `direct=cached`); both publish, and a flipped byte is
// caught by the hasher thread on the direct path too.
#include <random>

#include "loader_util.h"

using namespace loader_test;

namespace {

constexpr uint64_t kKeys = 20000;

std::string damage_copy(const std::string &src, const std::string &dst,
			const std::function<void(std::string &)> &fn)
{
	std::string data = read_file(src);
	fn(data);
	if (!shmkv_test::write_file(dst, data))
		return "write " + dst + ": " + strerror(errno);
	return "";
}

// Drops path from the page cache (written back first); false when the
// filesystem takes no O_DIRECT (then the loader reads buffered anyway).
bool uncache(const std::string &path)
{
	int fd = open(path.c_str(), O_RDONLY | O_DIRECT);
	if (fd < 0)
		return false;
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	return true;
}

const shmkv_image_header *hdr_of(const std::string &data)
{
	return reinterpret_cast<const shmkv_image_header *>(data.data());
}

// Offset of the last byte of the image's last non-empty section: a flip
// there is caught only once nearly the whole image is read.
uint64_t last_section_byte(const std::string &data)
{
	const shmkv_image_header *h = hdr_of(data);
	uint64_t off = 0;
	for (uint32_t i = 0; i < h->section_count; i++)
		if (h->sections[i].size)
			off = h->sections[i].offset + h->sections[i].size - 1;
	return off;
}

// `shmctl image verify`'s verdict on a file: "" accepted, else the reason.
std::string verify_file(const std::string &path)
{
	shmkv *db = nullptr;
	char why[512] = "";
	int err = shmkv_open_file_diag(path.c_str(), 0, &db, why, sizeof why);
	if (!err) {
		err = shmkv_verify(db, why, sizeof why);
		shmkv_close(db);
	}
	return err ? std::string(shmkv_strerror(err)) + ": " + why : "";
}

// The first bucket of the index holding a record of the kind wanted (OUT or
// inline): its image offset, and the record's (FORMAT.md §6). 0, 0: none.
std::pair<uint64_t, uint64_t> first_record(const std::string &img, bool out)
{
	const shmkv_image_header *h = hdr_of(img);
	const shmkv_section_desc &ix = h->sections[0];
	for (uint64_t b = ix.offset; b + SHMKV_BUCKET_BYTES <= ix.offset + ix.size;
	     b += SHMKV_BUCKET_BYTES) {
		const uint8_t *bk = reinterpret_cast<const uint8_t *>(img.data()) + b;
		for (unsigned i = 0; i < bk[0]; i++) {
			shmkv_record r{};
			if (shmkv_record_at(bk, i, &r) == 0 && !(r.kind & SHMKV_REC_OUT) == !out)
				return {b, b + r.pos};
		}
	}
	return {0, 0};
}

class Reject : public ::testing::Test {
protected:
	Env env;
	Loader ld{env};
	std::string good; // tag "good", generation 1
	shmkv *db = nullptr;
	CtlView before;

	void SetUp() override
	{
		ASSERT_TRUE(ld.start());
		good = env.img_path("good.shmkv");
		// inline records, and OUT ones whose entries fill ENTRIES
		ASSERT_EQ(build_image(good, "good", kKeys, 0, 50), "");
		// the first generation comes through the spool too
		ASSERT_EQ(spool_drop(env, good, "rej", true), "");
		ASSERT_TRUE(wait_until([&] { return read_ctl(env.root(), "rej", &before) &&
						    before.generation == 1; },
				       20000));
		int err;
		std::string why;
		db = attach(env.root(), "rej", 0, &err, &why);
		ASSERT_NE(db, nullptr) << why;
		ASSERT_EQ(check_handle(db, "good", kKeys), 0u);
	}
	void TearDown() override { shmkv_close(db); }

	// Drops file into the spool as rej.shmkv, waits for its rejection and
	// checks everything stayed; returns the rejection's log line.
	std::string expect_spool_reject(const std::string &file, const std::string &reason)
	{
		std::string rejected = env.spool_path("rej") + ".rejected";
		unlink(rejected.c_str());
		size_t lines0 = log_lines(env.log(), {"rejected cache=rej"}).size();
		EXPECT_EQ(spool_drop(env, file, "rej"), "");
		bool seen = wait_until([&] { return file_exists(rejected); }, 20000);
		EXPECT_TRUE(seen) << file << ": no " << rejected;
		EXPECT_FALSE(file_exists(env.spool_path("rej")));
		// the log line is written before the rename
		std::vector<std::string> lines = log_lines(env.log(), {"rejected cache=rej"});
		EXPECT_EQ(lines.size(), lines0 + 1);
		std::string line = lines.empty() ? "" : lines.back();
		EXPECT_TRUE(contains_ci(line, reason)) << line;
		EXPECT_NE(line.find("file=" + env.spool_path("rej")), std::string::npos) << line;
		Json j = ld.status("rej");
		EXPECT_TRUE(j.ok());
		EXPECT_TRUE(contains_ci(j["last_error"].s(), reason)) << j["last_error"].s();
		EXPECT_EQ(j["generation"].u64(), 1u);
		EXPECT_EQ(j["segment"].s(), before.path());
		EXPECT_FALSE(j["loading"].truthy());
		expect_unchanged();
		return line;
	}

	void expect_unchanged()
	{
		CtlView now;
		ASSERT_TRUE(read_ctl(env.root(), "rej", &now));
		EXPECT_EQ(now.generation, 1u);
		EXPECT_EQ(now.path(), before.path());
		EXPECT_EQ(now.published_ns, before.published_ns);
		EXPECT_EQ(shmkv_refresh(db), 0);
		EXPECT_EQ(shmkv_generation(db), 1u);
		EXPECT_EQ(tag_of(db), "good");
		EXPECT_EQ(check_handle(db, "good", kKeys, 7), 0u);
		EXPECT_TRUE(env.shm_files(".loading").empty()) << "a rejected load left a segment";
		EXPECT_EQ(env.shm_files().size(), 1u) << "only the current segment";
	}
};

TEST_F(Reject, FlippedByteInsideSection)
{
	std::string bad = env.img_path("bad.shmkv");
	std::string data = read_file(good);
	ASSERT_GT(data.size(), 8192u);
	const shmkv_section_desc &e = hdr_of(data)->sections[1]; // ENTRIES
	ASSERT_EQ(e.kind, (uint32_t)SHMKV_SECTION_ENTRIES);
	ASSERT_GT(e.size, 8192u) << "the image has OUT records";
	uint64_t off = e.offset + e.size / 2;
	ASSERT_EQ(damage_copy(good, bad, [&](std::string &d) { d[off] ^= 0x20; }), "");
	std::string line = expect_spool_reject(bad, "checksum");
	EXPECT_TRUE(contains_ci(line, "entries")) << "the section is named: " << line;
	std::string rej = read_file(env.spool_path("rej") + ".rejected");
	EXPECT_EQ(rej.size(), data.size()) << "the rejected file is kept as it was";
}

TEST_F(Reject, FlippedByteInHeader)
{
	std::string bad = env.img_path("bad.shmkv");
	// entry_count (offset 40): covered by the header checksum only
	ASSERT_EQ(damage_copy(good, bad, [&](std::string &d) { d[40] ^= 1; }), "");
	expect_spool_reject(bad, "checksum");
}

TEST_F(Reject, TruncatedInsideSection)
{
	std::string bad = env.img_path("bad.shmkv");
	std::string data = read_file(good);
	const shmkv_section_desc &e = hdr_of(data)->sections[1];
	uint64_t cut = (e.offset + e.size / 2) / 4096 * 4096; // O_DIRECT-friendly, still short
	ASSERT_GT(cut, 4096u);
	ASSERT_EQ(damage_copy(good, bad, [&](std::string &d) { d.resize(cut); }), "");
	expect_spool_reject(bad, "bytes");
	Json j = ld.status("rej");
	EXPECT_TRUE(contains_ci(j["last_error"].s(), std::to_string(cut))) << j["last_error"].s();
}

TEST_F(Reject, ShorterThanHeader)
{
	std::string bad = env.img_path("bad.shmkv");
	ASSERT_EQ(damage_copy(good, bad, [&](std::string &d) { d.resize(100); }), "");
	expect_spool_reject(bad, "header");
}

// A producer's hidden files in the spool (its temporaries) are neither
// loaded, logged nor touched, while loads and disposals go on beside them;
// the loader's own hidden names (dispose) never replace them.
TEST_F(Reject, HiddenSpoolFilesAreLeftAlone)
{
	const std::string &spool = env.spool();
	std::vector<std::string> hidden = {spool + "/.rej.shmkv.tmp", spool + "/.rej.shmkv.disposing"};
	for (const std::string &h : hidden)
		ASSERT_TRUE(shmkv_test::write_file(h, "a producer's bytes"));
	std::string bad = env.img_path("bad.shmkv");
	ASSERT_TRUE(shmkv_test::write_file(bad, std::string(8192, 'x')));
	expect_spool_reject(bad, "magic");
	for (const std::string &h : hidden) {
		EXPECT_EQ(read_file(h), "a producer's bytes") << h;
		std::string name = h.substr(h.rfind('/') + 1);
		EXPECT_TRUE(log_lines(env.log(), {name}).empty()) << name << " was logged";
	}
	std::vector<std::string> left;
	for (const auto &e : std::filesystem::directory_iterator(spool))
		left.push_back(e.path().filename().string());
	std::sort(left.begin(), left.end());
	EXPECT_EQ(left, (std::vector<std::string>{".rej.shmkv.disposing", ".rej.shmkv.tmp",
						   "rej.shmkv.rejected"}));
}

// A spool file name is untrusted: one holding a newline and the text of a
// loader event must not put that event in the log; the name is logged
// escaped, on its own line.
TEST_F(Reject, FileNameCannotForgeALogLine)
{
	const std::string forged = "x\nloaded cache=evil generation=9 \x1b[2J.shmkv";
	const std::string path = env.spool() + "/" + forged, tmp = env.img_path("forged.tmp");
	ASSERT_TRUE(shmkv_test::write_file(tmp, "a forger's bytes"));
	ASSERT_EQ(rename(tmp.c_str(), path.c_str()), 0) << strerror(errno); /* what the spool watches */
	EXPECT_TRUE(wait_until([&] { return !log_lines(env.log(), {"ignoring file="}).empty(); },
			       20000))
		<< env.log();
	const std::string log = env.log();
	for (const std::string &line : log_lines(log, {"cache=evil"})) {
		EXPECT_EQ(line.rfind("loaded", 0), std::string::npos) << "forged line: " << line;
		EXPECT_NE(line.find("x\\nloaded cache=evil"), std::string::npos) << line;
		EXPECT_NE(line.find("\\x1b[2J"), std::string::npos) << "escape sent raw: " << line;
	}
	EXPECT_EQ(log.find('\x1b'), std::string::npos) << "a raw escape byte reached the log";
	EXPECT_EQ(log_lines(log, {"cache=evil"}).size(), 1u) << log;
	unlink(path.c_str());
}

// A format 1 image: refused before its layout is looked at, the reason
// naming the command that converts it.
TEST_F(Reject, FormatOneRefusedWithTheUpgradeCommand)
{
	auto format_1 = [](std::string &d) {
		reinterpret_cast<shmkv_image_header *>(&d[0])->format_version = 1;
		reseal(d);
	};
	std::string bad = env.img_path("old.shmkv");
	ASSERT_EQ(damage_copy(good, bad, format_1), "");
	std::string line = expect_spool_reject(bad, "image format version 1 is retired");
	EXPECT_TRUE(contains_ci(line, "shmctl image upgrade OLD -o NEW")) << line;
	// over the socket (the spool took the first copy)
	ASSERT_EQ(damage_copy(good, bad, format_1), "");
	Json j = ld.load("rej", bad);
	EXPECT_FALSE(j.ok());
	EXPECT_EQ(j["code"].s(), "SHMKV_EVERSION") << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), "shmctl image upgrade OLD -o NEW")) << j["error"].s();
	expect_unchanged();
}

TEST_F(Reject, NotAnImage)
{
	std::string bad = env.img_path("bad.shmkv");
	ASSERT_TRUE(shmkv_test::write_file(bad, std::string(8192, 'x')));
	expect_spool_reject(bad, "magic");
}

// A non-zero byte outside every section is covered by no checksum: verify
// refuses it, and so must the loader (it published it before).
TEST_F(Reject, ForgedPadding)
{
	std::string data = read_file(good);
	const shmkv_image_header *h = hdr_of(data);
	uint64_t end = h->sections[2].offset + h->sections[2].size;
	std::vector<std::pair<uint64_t, std::string>> at = {{3000, "header padding"}};
	if (end < data.size())
		at.push_back({data.size() - 1, "trailing padding"});
	for (const auto &[off, what] : at) {
		SCOPED_TRACE(what);
		std::string bad = env.img_path("bad.shmkv");
		ASSERT_EQ(damage_copy(good, bad, [&](std::string &d) {
				  d[off] = 0x5a;
				  reseal(d);
			  }),
			  "");
		ASSERT_NE(verify_file(bad), "") << "verify refuses it";
		std::string line = expect_spool_reject(bad, "padding");
		EXPECT_TRUE(contains_ci(line, std::to_string(off))) << "names the offset: " << line;
	}
}

// Checksum-valid images with forged offsets and lengths: refused with the
// reason, never published, the serving generation untouched.
TEST_F(Reject, ForgedOffsetsWithChecksums)
{
	std::string data = read_file(good);
	const shmkv_image_header *h = hdr_of(data);
	const auto out = first_record(data, true), in = first_record(data, false);
	ASSERT_NE(out.second, 0u) << "an OUT record";
	ASSERT_NE(in.second, 0u) << "an inline record";
	uint64_t entry = h->sections[1].offset; // the first entry (the builder packs them)
	struct Forgery {
		std::string what, reason;
		std::function<void(std::string &)> fn;
	};
	auto set_unit = [&](std::string &d, uint64_t unit) { memcpy(&d[out.second + 1], &unit, 5); };
	std::vector<Forgery> cases = {
		{"OUT record points into the index", "outside the entries section",
		 [&](std::string &d) { set_unit(d, h->sections[0].offset >> 3); }},
		{"OUT record points past the image", "outside the entries section",
		 [&](std::string &d) { set_unit(d, (uint64_t)1 << 36); }},
		{"value runs past the section", "past the section",
		 [&](std::string &d) {
			 uint32_t vl = 0x7fffffff;
			 memcpy(&d[entry + offsetof(shmkv_entry_header, value_len)], &vl, 4);
		 }},
		{"an inline record's value past its bucket", "malformed",
		 [&](std::string &d) { d[in.second + 2] = (char)250; }},
		{"a directory entry pointing into the directory", "inside the directory",
		 [&](std::string &d) { d[in.first + SHMKV_BUCKET_HEAD] &= (char)0x80; }},
	};
	for (const Forgery &f : cases) {
		SCOPED_TRACE(f.what);
		std::string bad = env.img_path("bad.shmkv");
		ASSERT_EQ(damage_copy(good, bad, [&](std::string &d) {
				  f.fn(d);
				  reseal(d);
			  }),
			  "");
		shmkv *db2 = nullptr;
		ASSERT_EQ(shmkv_open_file_diag(bad.c_str(), 0, &db2, nullptr, 0), 0)
			<< "checksums and header pass: only the structural check sees it";
		shmkv_close(db2);
		ASSERT_NE(verify_file(bad), "");
		expect_spool_reject(bad, f.reason);
	}
}

// Random forgeries (1-3 flipped bytes anywhere but the header struct, or a
// directory entry's record offset moved, checksums recomputed), loaded over
// the socket: the
// loader publishes exactly the images shmkv_verify accepts, and refuses the
// others with generation and segment unchanged.
TEST_F(Reject, AgreesWithVerify)
{
	std::string data = read_file(good);
	const shmkv_image_header *h = hdr_of(data);
	const uint64_t ix = h->sections[0].offset, ix_end = ix + h->sections[0].size;
	std::mt19937_64 rng(20261123);
	std::string bad = env.img_path("forged.shmkv");
	int accepted = 0, refused = 0;
	uint64_t gen = 0;
	for (int n = 0; n < 150; n++) {
		std::string img = data;
		std::string what;
		if (n % 5 == 4) { // move a directory entry's record offset by a few bytes
			uint64_t b = ix + rng() % ((ix_end - ix) / SHMKV_BUCKET_BYTES) * SHMKV_BUCKET_BYTES;
			const unsigned count = (unsigned char)img[b];
			uint64_t off = b + SHMKV_BUCKET_HEAD + 2 * (count ? rng() % count : 0);
			const unsigned d = (unsigned char)img[off];
			img[off] = (char)((d & 0x80u) | ((d + rng() % 16 - 8) & SHMKV_DIR_OFF_MASK));
			what = "directory entry at " + std::to_string(off);
		} else {
			for (int k = 0, flips = 1 + (int)(rng() % 3); k < flips; k++) {
				uint64_t off = SHMKV_HEADER_USED + rng() % (img.size() - SHMKV_HEADER_USED);
				if (n % 3 == 0) // the index, where every byte matters
					off = ix + rng() % (ix_end - ix);
				img[off] = (char)(img[off] ^ (1 << (rng() % 8)));
				what += " " + std::to_string(off);
			}
		}
		reseal(img);
		ASSERT_TRUE(shmkv_test::write_file(bad, img));
		std::string v = verify_file(bad);
		SCOPED_TRACE("forgery " + std::to_string(n) + " (" + what + "): verify says " +
			     (v.empty() ? "ok" : v));
		Json j = ld.load("agree", bad);
		ASSERT_EQ(j.kind, Json::OBJ);
		EXPECT_EQ(j.ok(), v.empty()) << j["error"].s();
		if (j.ok()) {
			accepted++;
			EXPECT_GT(j["generation"].u64(), gen);
			gen = j["generation"].u64();
		} else {
			refused++;
			Json st = ld.status("agree");
			EXPECT_EQ(st["generation"].u64(), gen) << "a refused image is never published";
			EXPECT_FALSE(st["last_error"].is_null());
		}
	}
	printf("forgeries: %d published (verify accepts them), %d refused\n", accepted, refused);
	EXPECT_GT(accepted, 0);
	EXPECT_GT(refused, 0);
	EXPECT_TRUE(env.shm_files(".loading").empty()) << "a rejected load left a segment";
	CtlView now; // and cache rej did not move
	ASSERT_TRUE(read_ctl(env.root(), "rej", &now));
	EXPECT_EQ(now.generation, 1u);
	EXPECT_EQ(shmkv_refresh(db), 0);
	EXPECT_EQ(check_handle(db, "good", kKeys, 7), 0u);
}

// A FIFO (no writer) given to `load` used to block the worker in open()
// forever, and every later load of every cache with it. Now: refused at
// once, by its type, and the next loads go through. The same for a
// directory and a character device, and for a FIFO or a symbolic link
// renamed into the spool.
TEST_F(Reject, NonRegularFilesNeverBlock)
{
	std::string fifo = env.img_path("fifo.shmkv");
	ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0) << strerror(errno);
	std::string why;
	uint64_t t0 = now_ms();
	Json j = request(env.root(), {"load", "other", fifo}, 5000, &why);
	ASSERT_EQ(j.kind, Json::OBJ) << "no reply within 5 s: the worker blocks on the FIFO (" << why
				     << ")";
	EXPECT_LT(now_ms() - t0, 5000u);
	EXPECT_FALSE(j.ok());
	EXPECT_EQ(j["code"].s(), "EINVAL");
	EXPECT_TRUE(contains_ci(j["error"].s(), "FIFO")) << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), fifo)) << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), "not a regular file")) << j["error"].s();

	std::string dir = env.img_path("dir.shmkv");
	ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
	for (const auto &[path, kind] : std::vector<std::pair<std::string, std::string>>{
		     {dir, "directory"}, {"/dev/null", "character device"}}) {
		j = request(env.root(), {"load", "other", path}, 5000, &why);
		ASSERT_EQ(j.kind, Json::OBJ) << path << ": " << why;
		EXPECT_FALSE(j.ok());
		EXPECT_TRUE(contains_ci(j["error"].s(), kind)) << j["error"].s();
	}

	// in the spool (the worker picks the names): a FIFO, a symbolic link
	std::string line = expect_spool_reject(fifo, "FIFO");
	EXPECT_TRUE(contains_ci(line, "not a regular file")) << line;
	std::string lnk = env.img_path("link.shmkv");
	ASSERT_EQ(symlink(good.c_str(), lnk.c_str()), 0);
	expect_spool_reject(lnk, "symbolic link");

	// later loads, of this cache and of another, still work (bounded wait)
	std::string next = env.img_path("next.shmkv");
	ASSERT_EQ(build_image(next, "next", 100), "");
	j = request(env.root(), {"load", "other", next}, 10000, &why);
	ASSERT_EQ(j.kind, Json::OBJ) << why;
	EXPECT_TRUE(j.ok()) << j["error"].s();
	j = request(env.root(), {"load", "third", next}, 10000, &why);
	ASSERT_EQ(j.kind, Json::OBJ) << why;
	EXPECT_TRUE(j.ok()) << j["error"].s();
}

TEST_F(Reject, OverTheSocketThenAGoodLoad)
{
	std::string bad = env.img_path("bad.shmkv");
	std::string data = read_file(good);
	const shmkv_section_desc &idx = hdr_of(data)->sections[0]; // INDEX
	uint64_t off = idx.offset + idx.size - 1;
	ASSERT_EQ(damage_copy(good, bad, [&](std::string &d) { d[off] ^= 0x80; }), "");
	Json j = ld.load("rej", bad);
	EXPECT_FALSE(j.ok());
	EXPECT_EQ(j["code"].s(), "SHMKV_ECHECKSUM") << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), "index")) << j["error"].s();
	EXPECT_TRUE(contains_ci(j["error"].s(), "current generation keeps serving")) << j["error"].s();
	EXPECT_TRUE(file_exists(bad)) << "a file loaded over the socket is not renamed";
	EXPECT_FALSE(file_exists(bad + ".rejected"));
	j = ld.status("rej");
	EXPECT_TRUE(contains_ci(j["last_error"].s(), "checksum")) << j["last_error"].s();
	expect_unchanged();

	j = ld.load("rej", env.img_path("missing.shmkv"));
	EXPECT_FALSE(j.ok());
	EXPECT_EQ(j["code"].s(), "ENOENT") << j["error"].s();
	j = ld.load("rej", "relative.shmkv");
	EXPECT_FALSE(j.ok());
	EXPECT_EQ(j["code"].s(), "EINVAL") << j["error"].s();
	expect_unchanged();

	// a good image clears last_error; the reader moves to it
	std::string next = env.img_path("next.shmkv");
	ASSERT_EQ(build_image(next, "next", kKeys / 2), "");
	j = ld.load("rej", next);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["generation"].u64(), 2u);
	j = ld.status("rej");
	EXPECT_TRUE(j["last_error"].is_null()) << j["last_error"].s();
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_EQ(tag_of(db), "next");
	EXPECT_EQ(check_handle(db, "next", kKeys / 2, 3), 0u);
}

TEST_F(Reject, DirectAndPageCacheReads)
{
	// several 4 MiB read blocks, so reads and hashing overlap
	std::string big = env.img_path("big.shmkv");
	ASSERT_EQ(build_image(big, "big", 60000, 200), "");
	std::string data = read_file(big);
	ASSERT_GT(data.size(), 12u << 20);
	if (!uncache(big))
		GTEST_SKIP() << env.img() << " takes no O_DIRECT: only buffered reads to test";
	size_t direct0 = log_lines(env.log(), {"loaded cache=rej", "direct=yes"}).size();
	size_t cached0 = log_lines(env.log(), {"loaded cache=rej", "direct=cached"}).size();
	Json j = ld.load("rej", big);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_TRUE(j["direct_io"].truthy()) << "a file out of the page cache is read O_DIRECT";
	EXPECT_EQ(log_lines(env.log(), {"loaded cache=rej", "direct=yes"}).size(), direct0 + 1)
		<< env.log();
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_EQ(check_handle(db, "big", 60000, 11), 0u);

	read_file(big); // now the page cache holds it
	j = ld.load("rej", big);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_FALSE(j["direct_io"].truthy()) << "a file in the page cache is read buffered";
	EXPECT_EQ(log_lines(env.log(), {"loaded cache=rej", "direct=cached"}).size(), cached0 + 1)
		<< env.log();
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_EQ(check_handle(db, "big", 60000, 11), 0u);

	// a flipped byte near the end, read O_DIRECT: the hasher stops the load
	std::string bad = env.img_path("bad.shmkv");
	uint64_t off = last_section_byte(data);
	ASSERT_GT(off, 8u << 20);
	ASSERT_EQ(damage_copy(big, bad, [&](std::string &d) { d[off] ^= 0x01; }), "");
	ASSERT_TRUE(uncache(bad));
	uint64_t gen = shmkv_generation(db);
	j = ld.load("rej", bad);
	EXPECT_FALSE(j.ok());
	EXPECT_EQ(j["code"].s(), "SHMKV_ECHECKSUM") << j["error"].s();
	EXPECT_EQ(shmkv_refresh(db), 0);
	EXPECT_EQ(shmkv_generation(db), gen);
	EXPECT_TRUE(env.shm_files(".loading").empty()) << "a rejected load left a segment";
}

// io = pread (the engine where the kernel refuses io_uring): the same
// reads, hashing and rejection, without a ring; a bad --io or io= stops the
// start.
TEST(RejectPread, LoadsVerifiesAndRejects)
{
	Env env;
	Loader bad_io(env, {"--memory", "shm", "--io", "aio"});
	EXPECT_EQ(bad_io.start_expect_exit(), 1);
	EXPECT_EQ(log_lines(env.log(), {"--io aio: expected auto, io_uring or pread"}).size(), 1u)
		<< env.log();

	// the config file's io= too: a bad value names the file and line
	std::string conf = env.base() + "/loader.conf";
	ASSERT_TRUE(shmkv_test::write_file(conf, "[loader]\nqueue_depth = 8\nio = aio\n"));
	Loader bad_conf(env, {"--memory", "shm", "--config", conf});
	EXPECT_EQ(bad_conf.start_expect_exit(), 1);
	EXPECT_EQ(log_lines(env.log(), {conf + ":3:", "io \"aio\": expected auto, io_uring or pread"})
			  .size(),
		  1u)
		<< env.log();

	ASSERT_TRUE(shmkv_test::write_file(conf, "[loader]\nio = pread\n"));
	Loader ld(env, {"--memory", "shm", "--config", conf});
	ASSERT_TRUE(ld.start());
	EXPECT_EQ(log_lines(env.log(), {"starting", "io=pread"}).size(), 1u) << env.log();
	std::string big = env.img_path("big.shmkv");
	ASSERT_EQ(build_image(big, "big", 60000, 200), "");
	std::string data = read_file(big);
	ASSERT_GT(data.size(), 12u << 20); // several 4 MiB blocks
	bool direct = uncache(big);
	Json j = ld.load("pr", big);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["direct_io"].truthy(), direct);
	int err;
	std::string why;
	shmkv *db = attach(env.root(), "pr", 0, &err, &why);
	ASSERT_NE(db, nullptr) << why;
	EXPECT_EQ(check_handle(db, "big", 60000, 11), 0u);

	std::string bad = env.img_path("bad.shmkv");
	uint64_t off = last_section_byte(data);
	ASSERT_EQ(damage_copy(big, bad, [&](std::string &d) { d[off] ^= 0x01; }), "");
	uncache(bad);
	uint64_t gen = shmkv_generation(db);
	j = ld.load("pr", bad);
	EXPECT_FALSE(j.ok());
	EXPECT_EQ(j["code"].s(), "SHMKV_ECHECKSUM") << j["error"].s();
	EXPECT_EQ(shmkv_refresh(db), 0);
	EXPECT_EQ(shmkv_generation(db), gen);
	EXPECT_EQ(check_handle(db, "big", 60000, 11), 0u);
	EXPECT_TRUE(env.shm_files(".loading").empty()) << "a rejected load left a segment";
	EXPECT_TRUE(log_lines(env.log(), {"io_uring unavailable"}).empty()) << env.log();
	shmkv_close(db);
}

TEST_F(Reject, NewCacheWhoseFirstLoadFails)
{
	std::string bad = env.img_path("bad.shmkv");
	ASSERT_EQ(damage_copy(good, bad, [&](std::string &d) { d.resize(100); }), "");
	ASSERT_EQ(spool_drop(env, bad, "fresh"), "");
	ASSERT_TRUE(wait_until([&] { return file_exists(env.spool_path("fresh") + ".rejected"); },
			       20000));
	Json j = ld.status("fresh");
	ASSERT_TRUE(j.ok()) << "a new cache whose first load fails stays listed";
	EXPECT_FALSE(j["published"].truthy());
	EXPECT_EQ(j["generation"].u64(), 0u);
	EXPECT_FALSE(j["last_error"].is_null());
	EXPECT_FALSE(file_exists(env.root() + "/fresh.ctl")) << "nothing to publish, no ctl";
	int err;
	std::string why;
	EXPECT_EQ(attach(env.root(), "fresh", 0, &err, &why), nullptr);
	EXPECT_EQ(err, -ENOENT) << why;
	j = ld.req({"drop", "fresh"});
	EXPECT_TRUE(j.ok()) << j["error"].s();
	j = request(env.root(), {"status", "fresh"});
	EXPECT_FALSE(j.ok());
	EXPECT_EQ(j["code"].s(), "ENOENT");
	expect_unchanged();
}

} // namespace

namespace {

// Whether `list` names cache.
bool listed(Loader &ld, const std::string &cache)
{
	Json j = ld.req({"list"});
	for (const Json &c : j["caches"].arr)
		if (c["name"].s() == cache)
			return true;
	return false;
}

// The spool directory deleted, then created again: the loss is logged and
// shown (list's spool.error, ping's and status's spool_error), and once a
// directory is back at the path, files renamed into it load.
TEST(SpoolDir, DeletedThenRecreated)
{
	Env env;
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	Json j = ld.req({"list"});
	EXPECT_TRUE(j["spool.watching"].truthy());
	EXPECT_TRUE(j["spool.error"].is_null());
	ASSERT_EQ(rmdir(env.spool().c_str()), 0) << strerror(errno);
	ASSERT_TRUE(wait_until([&] { return !ld.req({"list"})["spool.error"].is_null(); }, 60000))
		<< "the lost spool is not shown\n" << env.log();
	j = ld.req({"list"});
	EXPECT_FALSE(j["spool.watching"].truthy());
	EXPECT_TRUE(contains_ci(j["spool.error"].s(), "deleted")) << j["spool.error"].s();
	EXPECT_TRUE(contains_ci(j["spool.error"].s(), env.spool())) << j["spool.error"].s();
	EXPECT_TRUE(contains_ci(ld.req({"ping"})["spool_error"].s(), "deleted"));
	EXPECT_EQ(log_lines(env.log(), {"spool: directory " + env.spool(), "was deleted"}).size(),
		  1u)
		<< env.log();

	ASSERT_EQ(mkdir(env.spool().c_str(), 0755), 0);
	ASSERT_TRUE(wait_until([&] { return ld.req({"list"})["spool.watching"].truthy(); }, 60000))
		<< env.log();
	EXPECT_TRUE(ld.req({"list"})["spool.error"].is_null());
	EXPECT_EQ(log_lines(env.log(), {"spool: directory " + env.spool(), "is back: watching"}).size(), 1u)
		<< env.log();
	std::string img = env.img_path("a.shmkv");
	ASSERT_EQ(build_image(img, "a", 100), "");
	ASSERT_EQ(spool_drop(env, img, "again"), "");
	CtlView v;
	EXPECT_TRUE(wait_until([&] { return read_ctl(env.root(), "again", &v) &&
					    v.generation == 1; },
			       20000))
		<< "a file renamed into the recreated spool is not loaded\n" << env.log();
	EXPECT_TRUE(ld.status("again")["spool_error"].is_null());
}

// The spool renamed away, then a directory holding an image renamed into
// its place: the moved directory is no longer watched (a file renamed into
// it is not loaded), the new one is scanned and its image loads.
TEST(SpoolDir, RenamedAwayThenReplaced)
{
	Env env;
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	std::string moved = env.base() + "/spool.old";
	ASSERT_EQ(rename(env.spool().c_str(), moved.c_str()), 0) << strerror(errno);
	ASSERT_TRUE(wait_until([&] { return !ld.req({"list"})["spool.error"].is_null(); }, 60000))
		<< env.log();
	EXPECT_TRUE(contains_ci(ld.req({"list"})["spool.error"].s(), "moved")) << env.log();
	std::string img = env.img_path("a.shmkv");
	ASSERT_EQ(build_image(img, "a", 100), "");
	std::string stray = env.img_path("b.shmkv");
	ASSERT_EQ(build_image(stray, "b", 100), "");
	ASSERT_EQ(rename(stray.c_str(), (moved + "/stray.shmkv").c_str()), 0);

	std::string fresh = env.base() + "/spool.new";
	ASSERT_EQ(mkdir(fresh.c_str(), 0755), 0);
	ASSERT_EQ(rename(img.c_str(), (fresh + "/back.shmkv").c_str()), 0);
	ASSERT_EQ(rename(fresh.c_str(), env.spool().c_str()), 0);
	CtlView v;
	EXPECT_TRUE(wait_until([&] { return read_ctl(env.root(), "back", &v) && v.generation == 1; },
			       20000))
		<< "the image in the directory renamed into place is not loaded\n" << env.log();
	EXPECT_TRUE(ld.req({"list"})["spool.watching"].truthy());
	EXPECT_FALSE(listed(ld, "stray")) << "a file in the moved-away directory was loaded";
	EXPECT_TRUE(file_exists(moved + "/stray.shmkv"));
}

// "Ghost caches": a new cache whose loads all failed is listed as failed with
// its error and an expiry, and forgotten after failed_expire without a drop;
// a configured cache whose load fails stays.
TEST(GhostCache, FailedNewCacheExpires)
{
	Env env;
	std::string conf = env.base() + "/loader.conf";
	ASSERT_TRUE(shmkv_test::write_file(conf, "[loader]\nfailed_expire = 2s\n[cache kept]\n"
						 "source = " + env.img() + "/missing.shmkv\n"));
	Loader ld(env, {"--memory", "shm", "--config", conf});
	ASSERT_TRUE(ld.start());
	Json j = ld.load("ghost", env.img_path("missing.shmkv"));
	EXPECT_FALSE(j.ok());
	j = ld.status("ghost");
	ASSERT_TRUE(j.ok());
	EXPECT_TRUE(j["failed"].truthy());
	EXPECT_FALSE(j["published"].truthy());
	EXPECT_TRUE(contains_ci(j["last_error"].s(), "missing.shmkv")) << j["last_error"].s();
	EXPECT_LE(j["expires_in"].u64(), 2u);
	ASSERT_TRUE(wait_until([&] { return listed(ld, "kept") && !ld.status("kept")["last_error"]
								    .is_null(); },
			       10000))
		<< env.log();
	EXPECT_TRUE(ld.status("kept")["expires_in"].is_null()) << "configured: never expires";

	ASSERT_TRUE(wait_until([&] { return !listed(ld, "ghost"); }, 60000))
		<< "the failed cache is still listed\n" << env.log();
	EXPECT_EQ(log_lines(env.log(), {"forgot cache=ghost", "missing.shmkv"}).size(), 1u)
		<< env.log();
	Json st = request(env.root(), {"status", "ghost"});
	EXPECT_EQ(st["code"].s(), "ENOENT");
	EXPECT_TRUE(listed(ld, "kept")) << "a configured cache stays";
	EXPECT_TRUE(ld.status("kept")["failed"].truthy());

	// a cache that served once is never a ghost: a failed reload leaves it
	ASSERT_TRUE(build_and_load(ld, env, "served", "a", 100).ok());
	EXPECT_FALSE(ld.load("served", env.img_path("missing.shmkv")).ok());
	j = ld.status("served");
	EXPECT_FALSE(j["failed"].truthy()) << "it still serves";
	EXPECT_TRUE(j["expires_in"].is_null());

	// failed_expire = 0 keeps them; a bad value stops the start with file:line
	ASSERT_TRUE(shmkv_test::write_file(conf, "[loader]\nfailed_expire = soon\n"));
	Loader bad(env, {"--memory", "shm", "--config", conf, "--root", env.base() + "/root2"});
	EXPECT_EQ(bad.start_expect_exit(), 1);
	EXPECT_EQ(log_lines(env.log(), {conf + ":2:", "failed_expire \"soon\""}).size(), 1u)
		<< env.log();
}

} // namespace
