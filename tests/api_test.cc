// api_test: the public contracts lib/ exports for the loader, shmctl and
// builders: error names and ranges (errors.h), the cache-name rule, the
// control-segment opener, reader and publisher (ctl.h), and the format
// functions (tools.h), each through its public name only.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "test_util.h"

using shmkv_test::Builder;
using shmkv_test::TempDir;

// ---------------------------------------------------------------- errors

TEST(Errors, EveryCodeHasANameAndAMessage)
{
	std::set<std::string> names, messages;
	for (int e = SHMKV_EFIRST_; e <= SHMKV_ELAST_; e++) {
		std::string name = shmkv_errname(e), msg = shmkv_strerror(e);
		EXPECT_EQ(name.rfind("SHMKV_E", 0), 0u) << e << " is named " << name;
		EXPECT_NE(msg, "unknown shmkv error") << name;
		EXPECT_TRUE(names.insert(name).second) << "two codes named " << name;
		EXPECT_TRUE(messages.insert(msg).second) << "two codes say " << msg;
	}
	EXPECT_STREQ(shmkv_errname(SHMKV_ENOTFOUND), "SHMKV_ENOTFOUND");
	EXPECT_STREQ(shmkv_errname(SHMKV_EPROTO), "SHMKV_EPROTO");
	EXPECT_STREQ(shmkv_errname(SHMKV_ECORRUPT), "SHMKV_ECORRUPT");
	EXPECT_STREQ(shmkv_errname(0), "OK");
	EXPECT_STREQ(shmkv_strerror(0), "success");
	// just outside the assigned codes: unknown, never a neighbour's name
	EXPECT_STREQ(shmkv_errname(SHMKV_EFIRST_ - 1), "UNKNOWN");
	EXPECT_STREQ(shmkv_errname(SHMKV_ELAST_ + 1), "UNKNOWN");
	EXPECT_STREQ(shmkv_strerror(SHMKV_EFIRST_ - 1), "unknown shmkv error");
	EXPECT_STREQ(shmkv_errname(1), "UNKNOWN");
	EXPECT_STREQ(shmkv_errname(-4096), "UNKNOWN");
}

TEST(Errors, CodesCollideWithNoErrnoNorLmdbNorBerkeleyDb)
{
	struct Range {
		const char *who;
		int lo, hi;
	};
	const Range taken[] = {{"errno (-MAX_ERRNO..-1)", -4095, -1},
			       {"LMDB", -30799, -30600},
			       {"Berkeley DB", -30999, -30800}};
	EXPECT_LE(SHMKV_ERR_MIN, SHMKV_EFIRST_);
	EXPECT_LE(SHMKV_EFIRST_, SHMKV_ELAST_);
	EXPECT_LE(SHMKV_ELAST_, SHMKV_ERR_MAX);
	for (const Range &r : taken)
		EXPECT_TRUE(SHMKV_ERR_MAX < r.lo || SHMKV_ERR_MIN > r.hi)
			<< "[" << SHMKV_ERR_MIN << ", " << SHMKV_ERR_MAX << "] overlaps " << r.who;
	// and no code is an errno value a libc knows
	for (int e = SHMKV_EFIRST_; e <= SHMKV_ELAST_; e++)
		EXPECT_EQ(strerrorname_np(-e), nullptr) << e;
}

TEST(Errors, EveryErrnoValueHasItsSymbolicName)
{
	int named = 0;
	for (int e = 1; e < 4096; e++) {
		const char *want = strerrorname_np(e); // glibc 2.32+
		if (!want) {
			EXPECT_STREQ(shmkv_errname(-e), "UNKNOWN") << e;
			continue;
		}
		named++;
		// Linux aliases share a number: glibc names the one shmkv names
		EXPECT_STREQ(shmkv_errname(-e), want) << e;
		EXPECT_STREQ(shmkv_strerror(-e), strerror(e)) << e;
	}
	EXPECT_GE(named, 130);
	EXPECT_STREQ(shmkv_errname(-ENOENT), "ENOENT");
	EXPECT_STREQ(shmkv_errname(-EAGAIN), "EAGAIN");
	EXPECT_STREQ(shmkv_errname(-EOPNOTSUPP), "EOPNOTSUPP");
}

TEST(Errors, NamingNeverTouchesErrno)
{
	errno = 1234;
	(void)shmkv_errname(-ENOENT);
	(void)shmkv_strerror(-ENOENT);
	(void)shmkv_strerror(-9999);
	EXPECT_EQ(errno, 1234);
}

// ---------------------------------------------------------------- names

TEST(CacheName, TheOneRule)
{
	for (const char *ok : {"a", "users", "Feature_Store-2.v1", "A.", "0"})
		EXPECT_EQ(shmkv_name_check(ok), 0) << ok;
	std::string max(SHMKV_CACHE_NAME_MAX, 'x'), over(SHMKV_CACHE_NAME_MAX + 1, 'x');
	EXPECT_EQ(shmkv_name_check(max.c_str()), 0);
	EXPECT_EQ(shmkv_name_check(over.c_str()), -EINVAL);
	for (const char *bad : {"", ".hidden", "a/b", "..", "a b", "tab\t", "ü", "x\n", "a:b"})
		EXPECT_EQ(shmkv_name_check(bad), -EINVAL) << bad;
	EXPECT_EQ(shmkv_name_check(nullptr), -EINVAL);
}

TEST(CacheName, ControlSegmentPath)
{
	char buf[64];
	ASSERT_EQ(shmkv_ctl_path("/run/x", "users", buf, sizeof buf), 0);
	EXPECT_STREQ(buf, "/run/x/users.ctl");
	EXPECT_EQ(shmkv_ctl_path("/run/x", "../etc", buf, sizeof buf), -EINVAL);
	EXPECT_EQ(shmkv_ctl_path("/run/x", "users", buf, 16), -ENAMETOOLONG);
	ASSERT_EQ(shmkv_ctl_path("/run/x", "users", buf, 17), 0); // exactly fits
	setenv("SHMKV_ROOT", "/from/env", 1);
	EXPECT_STREQ(shmkv_ctl_root(nullptr), "/from/env");
	EXPECT_STREQ(shmkv_ctl_root(""), "/from/env");
	EXPECT_STREQ(shmkv_ctl_root("/given"), "/given");
	unsetenv("SHMKV_ROOT");
	EXPECT_STREQ(shmkv_ctl_root(nullptr), SHMKV_DEFAULT_ROOT);
}

// ---------------------------------------------------------------- control segment

namespace {

// Writes ROOT/NAME.ctl as a loader would (shmkv_ctl_init), then lets the
// test damage it.
void write_ctl(const TempDir &d, const std::string &name, void (*damage)(shmkv_ctl *) = nullptr,
	       mode_t mode = 0644, size_t size = SHMKV_CTL_SIZE)
{
	shmkv_ctl c;
	shmkv_ctl_init(&c);
	if (damage)
		damage(&c);
	std::string bytes(size, '\0');
	memcpy(&bytes[0], &c, std::min(sizeof c, size));
	std::string path = d.file(name + ".ctl");
	ASSERT_TRUE(shmkv_test::write_file(path, bytes));
	ASSERT_EQ(chmod(path.c_str(), mode), 0);
}

shmkv_ctl_segment segment(const char *path, uint64_t size)
{
	shmkv_ctl_segment s;
	memset(&s, 0, sizeof s);
	s.node = -1;
	s.size = size;
	s.map_size = size;
	s.page_size = 4096;
	snprintf(s.path, sizeof s.path, "%s", path);
	return s;
}

} // namespace

TEST(CtlOpen, AcceptsWhatTheLoaderWritesReadOnly)
{
	TempDir d;
	write_ctl(d, "c");
	shmkv_ctl *ctl = nullptr;
	char why[512] = "";
	ASSERT_EQ(shmkv_ctl_open(d.path().c_str(), "c", 0, &ctl, why, sizeof why), 0) << why;
	ASSERT_NE(ctl, nullptr);
	EXPECT_EQ(shmkv_ctl_generation(ctl), 0u);
	EXPECT_EQ(shmkv_ctl_mid_update(ctl), 0);
	shmkv_ctl copy;
	EXPECT_EQ(shmkv_ctl_read(ctl, &copy), 0);
	EXPECT_EQ(copy.generation, 0u);
	EXPECT_EQ(memcmp(copy.magic, SHMKV_CTL_MAGIC, 8), 0);
	// a read-only mapping: writing would fault, and mprotect cannot lift it
	EXPECT_NE(mprotect(ctl, SHMKV_CTL_SIZE, PROT_READ | PROT_WRITE), 0);
	shmkv_ctl_close(ctl);
	shmkv_ctl_close(nullptr);
}

TEST(CtlOpen, RefusesWhatIsNotAControlSegment)
{
	TempDir d;
	char why[512];
	shmkv_ctl *ctl = nullptr;
	auto open_err = [&](const char *name, unsigned flags = 0) {
		why[0] = 0;
		int err = shmkv_ctl_open(d.path().c_str(), name, flags, &ctl, why, sizeof why);
		EXPECT_EQ(ctl, nullptr) << name;
		return err;
	};
	EXPECT_EQ(open_err("missing"), -ENOENT);
	EXPECT_NE(strstr(why, "no cache \"missing\""), nullptr) << why;
	EXPECT_EQ(open_err(".hidden"), -EINVAL);
	EXPECT_NE(strstr(why, "invalid cache name"), nullptr) << why;
	EXPECT_EQ(open_err("c", 0x80), -EINVAL);

	write_ctl(d, "short", nullptr, 0644, 100);
	EXPECT_EQ(open_err("short"), SHMKV_EPROTO);
	EXPECT_NE(strstr(why, "short.ctl"), nullptr) << why;
	write_ctl(d, "magic", [](shmkv_ctl *c) { c->magic[0] = 'X'; });
	EXPECT_EQ(open_err("magic"), SHMKV_EPROTO);
	EXPECT_NE(strstr(why, "magic"), nullptr) << why;
	write_ctl(d, "version", [](shmkv_ctl *c) { c->protocol_version = 2; });
	EXPECT_EQ(open_err("version"), SHMKV_EPROTO);
	EXPECT_NE(strstr(why, "protocol version 2"), nullptr) << why;
	write_ctl(d, "layout", [](shmkv_ctl *c) { c->layout_hash ^= 1; });
	EXPECT_EQ(open_err("layout"), SHMKV_EPROTO);
	write_ctl(d, "size", [](shmkv_ctl *c) { c->ctl_size = 8192; });
	EXPECT_EQ(open_err("size"), SHMKV_EPROTO);

	// a FIFO is refused at once, without blocking the opener
	ASSERT_EQ(mkfifo(d.file("fifo.ctl").c_str(), 0644), 0);
	EXPECT_EQ(open_err("fifo"), SHMKV_EPROTO);
	EXPECT_NE(strstr(why, "not a regular file"), nullptr) << why;
	// a directory too
	ASSERT_EQ(mkdir(d.file("dir.ctl").c_str(), 0755), 0);
	EXPECT_NE(open_err("dir"), 0);
	// a symlink to a good segment is not followed
	write_ctl(d, "good");
	ASSERT_EQ(symlink(d.file("good.ctl").c_str(), d.file("link.ctl").c_str()), 0);
	EXPECT_EQ(open_err("link"), -ELOOP);
	EXPECT_NE(strstr(why, "symbolic link"), nullptr) << why;
}

TEST(CtlOpen, ReadWriteAdoptsOnlyAFileOnlyWeCanWrite)
{
	TempDir d;
	char why[512] = "";
	shmkv_ctl *ctl = nullptr;
	write_ctl(d, "open", nullptr, 0666);
	EXPECT_EQ(shmkv_ctl_open(d.path().c_str(), "open", SHMKV_CTL_RDWR, &ctl, why, sizeof why),
		  SHMKV_EPROTO);
	EXPECT_NE(strstr(why, "writable by group or others"), nullptr) << why;
	EXPECT_EQ(ctl, nullptr);
	// nor do readers map one that others may write (PROTOCOL.md)
	EXPECT_EQ(shmkv_ctl_open(d.path().c_str(), "open", 0, &ctl, why, sizeof why), SHMKV_EPROTO);
	EXPECT_NE(strstr(why, "writable by group or others"), nullptr) << why;
	EXPECT_EQ(ctl, nullptr);
	// the file's uid is the owner (no field names one): another uid's 0644
	// file is read, but not adopted read-write
	if (geteuid() == 0) {
		write_ctl(d, "theirs", nullptr, 0644);
		ASSERT_EQ(chown(d.file("theirs.ctl").c_str(), 4242, 4242), 0);
		ASSERT_EQ(shmkv_ctl_open(d.path().c_str(), "theirs", 0, &ctl, why, sizeof why), 0)
			<< why;
		shmkv_ctl_close(ctl);
		ctl = nullptr;
		EXPECT_EQ(shmkv_ctl_open(d.path().c_str(), "theirs", SHMKV_CTL_RDWR, &ctl, why,
					 sizeof why),
			  SHMKV_EPROTO);
		EXPECT_NE(strstr(why, "not ours alone"), nullptr) << why;
		EXPECT_EQ(ctl, nullptr);
	}

	write_ctl(d, "mine", nullptr, 0640);
	ASSERT_EQ(shmkv_ctl_open(d.path().c_str(), "mine", SHMKV_CTL_RDWR, &ctl, why, sizeof why), 0)
		<< why;
	shmkv_ctl_segment s = segment("/dev/shm/x", 4096);
	EXPECT_EQ(shmkv_ctl_publish(ctl, 7, &s, 1, 42, 1234), 0);
	shmkv_ctl_close(ctl);

	// another mapping (another process, in real life) sees the publish
	ASSERT_EQ(shmkv_ctl_open(d.path().c_str(), "mine", 0, &ctl, why, sizeof why), 0) << why;
	shmkv_ctl copy;
	ASSERT_EQ(shmkv_ctl_read(ctl, &copy), 0);
	EXPECT_EQ(copy.generation, 7u);
	EXPECT_EQ(copy.segment_count, 1u);
	EXPECT_EQ(copy.loader_pid, 42u);
	EXPECT_EQ(copy.published_ns, 1234);
	EXPECT_STREQ(copy.segments[0].path, "/dev/shm/x");
	EXPECT_EQ(copy.segments[0].node, -1);
	EXPECT_EQ(shmkv_ctl_generation(ctl), 7u);
	shmkv_ctl_close(ctl);
}

TEST(CtlPublish, ReplacesEveryFieldAndClosesAStuckSection)
{
	shmkv_ctl c;
	shmkv_ctl_init(&c);
	shmkv_ctl_segment s[3] = {segment("/a", 4096), segment("/b", 8192), segment("/c", 4096)};
	ASSERT_EQ(shmkv_ctl_publish(&c, 1, s, 3, 1, 1), 0);
	ASSERT_EQ(shmkv_ctl_publish(&c, 2, s + 1, 1, 2, 2), 0);
	shmkv_ctl copy;
	ASSERT_EQ(shmkv_ctl_read(&c, &copy), 0);
	EXPECT_EQ(copy.generation, 2u);
	EXPECT_EQ(copy.segment_count, 1u);
	EXPECT_STREQ(copy.segments[0].path, "/b");
	EXPECT_EQ(copy.segments[1].path[0], 0) << "older segments are cleared";
	EXPECT_EQ(copy.segments[2].size, 0u);
	EXPECT_EQ(c.seq, 4u);
	EXPECT_EQ(memcmp(c.magic, SHMKV_CTL_MAGIC, 8), 0) << "the header is never touched";

	// refused arguments leave it alone
	EXPECT_EQ(shmkv_ctl_publish(&c, 3, s, SHMKV_CTL_MAX_SEGMENTS + 1, 3, 3), -EINVAL);
	EXPECT_EQ(shmkv_ctl_publish(&c, 0, s, 1, 3, 3), -EINVAL);
	EXPECT_EQ(c.seq, 4u);
	EXPECT_EQ(c.generation, 2u);

	// a loader that died mid-publish leaves seq odd: readers give up with
	// -EAGAIN, the next publish closes the section
	c.seq = 5;
	EXPECT_EQ(shmkv_ctl_mid_update(&c), 1);
	EXPECT_EQ(shmkv_ctl_read(&c, &copy), -EAGAIN);
	ASSERT_EQ(shmkv_ctl_publish(&c, 3, s + 2, 1, 3, 3), 0);
	EXPECT_EQ(c.seq, 6u);
	EXPECT_EQ(shmkv_ctl_mid_update(&c), 0);
	ASSERT_EQ(shmkv_ctl_read(&c, &copy), 0);
	EXPECT_EQ(copy.generation, 3u);
}

TEST(CtlRead, RefusesASegmentCountNoLoaderWrites)
{
	shmkv_ctl c;
	shmkv_ctl_init(&c);
	c.segment_count = SHMKV_CTL_MAX_SEGMENTS + 1;
	memset(c.segments[0].path, 'x', sizeof c.segments[0].path); // no NUL
	shmkv_ctl copy;
	EXPECT_EQ(shmkv_ctl_read(&c, &copy), SHMKV_EPROTO);
	c.segment_count = 1;
	ASSERT_EQ(shmkv_ctl_read(&c, &copy), 0);
	EXPECT_EQ(strlen(copy.segments[0].path), SHMKV_CTL_PATH_MAX - 1u) << "always terminated";
}

// ---------------------------------------------------------------- format functions

// A second lookup written only with the public format functions (tools.h:
// hash, home bucket, tag, the home bucket's displacement, each record's
// directory tag bits, the record, its entry; FORMAT.md §5-6) finds every key
// where shmkv_get and shmkv_find_record find it.
TEST(Tools, FindEveryKeyTheWayTheReaderDoes)
{
	TempDir d;
	Builder b;
	ASSERT_TRUE(b.ok());
	const int n = 500;
	for (int i = 0; i < n; i++) {
		std::string k = "key:" + std::to_string(i);
		if (i % 7 == 0) // OUT records: a value no bucket holds
			ASSERT_EQ(b.str(k, std::string(200 + i % 50, 'x')), 0) << b.error();
		else if (i % 3)
			ASSERT_EQ(b.str(k, "value " + std::to_string(i)), 0) << b.error();
		else
			ASSERT_EQ(b.i64(k, i), 0) << b.error();
	}
	std::string path = d.file("t.shmkv");
	ASSERT_EQ(b.finish(path), 0) << b.error();
	shmkv_test::Db db = shmkv_test::open_db(path, 0);
	ASSERT_TRUE(db);
	const shmkv_image_header *h = db.hdr();
	EXPECT_STREQ(shmkv_section_name(SHMKV_SECTION_INDEX), "index");
	EXPECT_STREQ(shmkv_section_name(SHMKV_SECTION_ENTRIES), "entries");
	EXPECT_STREQ(shmkv_section_name(SHMKV_SECTION_VALUES), "values");
	EXPECT_STREQ(shmkv_section_name(99), "unknown");
	const shmkv_section_desc *index = nullptr;
	for (uint32_t i = 0; i < h->section_count; i++)
		if (h->sections[i].kind == SHMKV_SECTION_INDEX)
			index = &h->sections[i];
	ASSERT_NE(index, nullptr);
	const uint8_t *buckets = reinterpret_cast<const uint8_t *>(h) + index->offset;

	int outs = 0, displaced = 0;
	for (int i = 0; i < n; i++) {
		std::string k = "key:" + std::to_string(i);
		SCOPED_TRACE(k);
		uint64_t hv = shmkv_key_hash(h->hash_seed, h->hash_bits, k.data(), k.size());
		uint64_t tag = shmkv_key_tag(hv), home = shmkv_home_bucket(hv, h->bucket_count);
		const uint64_t later = shmkv_bucket_displacement(buckets + home * SHMKV_BUCKET_BYTES,
								 tag, h->max_probe);
		EXPECT_LE(later, h->max_probe);
		bool found = false;
		for (uint64_t dd = 0; dd <= later && !found; dd++) {
			const uint64_t bn = (home + dd) % h->bucket_count;
			const uint8_t *bk = buckets + bn * SHMKV_BUCKET_BYTES;
			ASSERT_LE(bk[0], SHMKV_MAX_RECORDS);
			for (unsigned j = 0; j < bk[0] && !found; j++) {
				if (shmkv_record_tag_bits(bk, j) != (tag & 0x1ff))
					continue;
				shmkv_record r{};
				ASSERT_EQ(shmkv_record_at(bk, j, &r), 0);
				shmkv_value v;
				ASSERT_EQ(shmkv_get(db, k.data(), k.size(), &v), 0);
				char why[256];
				if (r.kind & SHMKV_REC_OUT) {
					shmkv_entry e{};
					ASSERT_EQ(shmkv_entry_at(db, r.unit << 3, &e, why, sizeof why), 0) << why;
					if (e.key_len != k.size() || memcmp(e.key, k.data(), k.size()))
						continue;
					outs++;
					EXPECT_EQ(v.data, e.value.data);
					EXPECT_EQ(v.type, e.value.type);
					const shmkv_entry_header *eh = reinterpret_cast<const shmkv_entry_header *>(
						e.key - sizeof(shmkv_entry_header));
					uint64_t pos = shmkv_entry_value_pos(eh);
					EXPECT_EQ(pos % 8 == 0 || !shmkv_type_align8(eh->type), true);
					EXPECT_EQ(shmkv_value_check(eh->type, e.value.data, e.value.size, why,
								    sizeof why), 0) << why;
				} else {
					if (r.key_len != k.size() || memcmp(bk + r.key_pos, k.data(), k.size()))
						continue;
					const unsigned type = r.kind & SHMKV_REC_TYPE_MASK;
					unsigned kp = 0, vp = 0;
					EXPECT_EQ(shmkv_record_span(r.pos, r.kind, r.key_len, r.value_len, &kp, &vp),
						  r.end);
					EXPECT_EQ(kp, r.key_pos);
					EXPECT_EQ(vp, r.val_pos);
					EXPECT_LE(r.end, SHMKV_BUCKET_BYTES);
					EXPECT_EQ(v.data, (const void *)(bk + r.val_pos));
					EXPECT_EQ(v.type, type);
					EXPECT_EQ(v.size, r.value_len);
					EXPECT_EQ(vp % 8 == 0 || !shmkv_type_align8(type), true);
					EXPECT_EQ(shmkv_value_check(type, bk + r.val_pos, r.value_len, why,
								    sizeof why), 0) << why;
				}
				found = true;
				displaced += dd > 0;
				EXPECT_EQ(shmkv_dir_entry(tag, r.pos) & 0xff80u,
					  (unsigned)(bk[SHMKV_BUCKET_HEAD + 2 * j] |
						     bk[SHMKV_BUCKET_HEAD + 2 * j + 1] << 8) & 0xff80u);
				// the reader's own lookup, by offset
				uint64_t off = 0;
				uint32_t exp = 7;
				ASSERT_EQ(shmkv_find_record(db, k.data(), k.size(), &off, &exp), 0);
				EXPECT_EQ(off, index->offset + bn * SHMKV_BUCKET_BYTES + r.pos);
				EXPECT_EQ(exp, 0u);
			}
		}
		EXPECT_TRUE(found);
	}
	EXPECT_GT(outs, 0) << "the test wants OUT records";
	printf("%d keys: %d OUT, %d displaced\n", n, outs, displaced);
	uint64_t off = 0;
	uint32_t exp = 0;
	EXPECT_EQ(shmkv_find_record(db, "absent", 6, &off, &exp), SHMKV_ENOTFOUND);
	std::string huge(SHMKV_MAX_KEY_LEN + 1, 'k');
	EXPECT_EQ(shmkv_find_record(db, huge.data(), huge.size(), &off, &exp), SHMKV_EKEYLEN);
	EXPECT_EQ(shmkv_find_record(db, "key:1", 5, &off, nullptr), 0) << "expires may be NULL";
	EXPECT_EQ(shmkv_filter_index(1), 0u);
	EXPECT_EQ(shmkv_filter_index(0xffff), SHMKV_FILTER_BITS - 1);
	EXPECT_EQ(shmkv_dir_end(3), SHMKV_BUCKET_HEAD + 6);
	EXPECT_EQ(shmkv_key_tag(0), 1u);
	EXPECT_EQ(shmkv_type_align8(SHMKV_TYPE_STRING), 0);
	EXPECT_EQ(shmkv_type_align8(SHMKV_TYPE_F32LIST), 1);
}

TEST(Tools, EntryAtRefusesEveryOffsetOutsideItsSection)
{
	TempDir d;
	Builder b;
	ASSERT_EQ(b.str("k", "v"), 0) << b.error();
	std::string path = d.file("t.shmkv");
	ASSERT_EQ(b.finish(path), 0) << b.error();
	shmkv_test::Db db = shmkv_test::open_db(path, 0);
	ASSERT_TRUE(db);
	shmkv_entry e{};
	char why[256];
	uint64_t index_off = 0, entries_off = 0;
	for (uint32_t i = 0; i < db.hdr()->section_count; i++) {
		if (db.hdr()->sections[i].kind == SHMKV_SECTION_INDEX)
			index_off = db.hdr()->sections[i].offset;
		if (db.hdr()->sections[i].kind == SHMKV_SECTION_ENTRIES)
			entries_off = db.hdr()->sections[i].offset;
	}
	ASSERT_NE(index_off, 0u);
	ASSERT_NE(entries_off, 0u);
	for (uint64_t off : {UINT64_C(0), entries_off + 1, index_off, UINT64_C(7) << 40,
			     UINT64_MAX - 7, db.hdr()->file_size}) {
		why[0] = 0;
		EXPECT_EQ(shmkv_entry_at(db, off, &e, why, sizeof why), SHMKV_ECORRUPT) << off;
		EXPECT_NE(why[0], 0) << off;
	}
	EXPECT_EQ(shmkv_value_check(SHMKV_TYPE_BOOL, "\2", 1, why, sizeof why), SHMKV_ECORRUPT);
	EXPECT_EQ(shmkv_value_check(77, "x", 1, why, sizeof why), SHMKV_ECORRUPT);
	EXPECT_NE(strstr(why, "unknown value type 77"), nullptr) << why;
}

TEST(Tools, BindMemZeroCheckAndUtf8)
{
	TempDir d;
	Builder b;
	ASSERT_EQ(b.str("k", "v\xc3\xa9"), 0) << b.error();
	std::string path = d.file("t.shmkv");
	ASSERT_EQ(b.finish(path), 0) << b.error();
	std::string bytes = shmkv_test::read_file(path);
	ASSERT_FALSE(bytes.empty());
	// 8-aligned private copy, as a segment would be
	std::vector<uint64_t> mem((bytes.size() + 7) / 8);
	memcpy(mem.data(), bytes.data(), bytes.size());

	shmkv db;
	char why[256] = "";
	ASSERT_EQ(shmkv_bind_mem(&db, mem.data(), bytes.size(), 0, why, sizeof why), 0) << why;
	const char *s = nullptr;
	size_t len = 0;
	ASSERT_EQ(shmkv_get_str(&db, "k", 1, &s, &len), 0);
	EXPECT_EQ(std::string(s, len), "v\xc3\xa9");
	EXPECT_EQ(shmkv_verify(&db, why, sizeof why), 0) << why;
	shmkv_value v;
	ASSERT_EQ(shmkv_get(&db, "k", 1, &v), 0);
	EXPECT_EQ(shmkv_utf8_valid(v.data, v.size), 1);
	// header block padding is zero; out-of-image ranges are refused, not read
	EXPECT_EQ(shmkv_zero_check(&db, SHMKV_HEADER_USED, SHMKV_HEADER_SIZE, "header", why,
				   sizeof why), 0) << why;
	EXPECT_EQ(shmkv_zero_check(&db, 0, 8, "magic", why, sizeof why), SHMKV_ECORRUPT);
	EXPECT_NE(strstr(why, "offset 0"), nullptr) << why;
	EXPECT_EQ(shmkv_zero_check(&db, 0, bytes.size() + 1, "x", why, sizeof why), SHMKV_ECORRUPT);

	// a damaged copy is refused and db left alone
	shmkv before = db;
	reinterpret_cast<char *>(mem.data())[0] ^= 1;
	EXPECT_EQ(shmkv_bind_mem(&db, mem.data(), bytes.size(), 0, why, sizeof why), SHMKV_EMAGIC);
	EXPECT_EQ(memcmp(&before, &db, sizeof db), 0);

	// text that is not UTF-8: the string shape check refuses it
	static const char latin1[] = "v\xe9";
	EXPECT_EQ(shmkv_utf8_valid(latin1, 2), 0);
	EXPECT_EQ(shmkv_value_check(SHMKV_TYPE_STRING, latin1, 2, why, sizeof why), SHMKV_ECORRUPT);
	EXPECT_NE(strstr(why, "not valid UTF-8"), nullptr) << why;
	EXPECT_EQ(shmkv_value_check(SHMKV_TYPE_BYTES, latin1, 2, why, sizeof why), 0) << why;
}

// shmkv_utf8_valid / shmkv_utf8_seq_len (shmkv/utf8.h): the one strict
// UTF-8 check, shared by shmkv_verify, shmctl and common/json.c.
TEST(Utf8, StrictChecksAndSequenceLengths)
{
	struct Case {
		const char *bytes;
		size_t n;
		int valid;
		size_t first; // shmkv_utf8_seq_len at 0
	};
	const Case cases[] = {
		{"", 0, 1, 0},
		{"a", 1, 1, 1},
		{"\xc3\xa9", 2, 1, 2},             // é
		{"\xe2\x82\xac", 3, 1, 3},         // €
		{"\xf0\x9f\x98\x80", 4, 1, 4},     // U+1F600
		{"\xf4\x8f\xbf\xbf", 4, 1, 4},     // U+10FFFF, the last
		{"\xc0\xaf", 2, 0, 0},             // overlong '/'
		{"\xe0\x80\xaf", 3, 0, 0},         // overlong, 3 bytes
		{"\xf0\x80\x80\xaf", 4, 0, 0},     // overlong, 4 bytes
		{"\xed\xa0\x80", 3, 0, 0},         // U+D800, a surrogate
		{"\xf4\x90\x80\x80", 4, 0, 0},     // past U+10FFFF
		{"\x80", 1, 0, 0},                 // a lone continuation byte
		{"\xe2\x82", 2, 0, 0},             // truncated
		{"\xff", 1, 0, 0},
		{"ok\xc3", 3, 0, 1},               // valid start, truncated end
	};
	for (const Case &c : cases) {
		EXPECT_EQ(shmkv_utf8_valid(c.bytes, c.n), c.valid) << testing::PrintToString(c.bytes);
		if (c.n) {
			EXPECT_EQ(shmkv_utf8_seq_len(c.bytes, c.n), c.first)
				<< testing::PrintToString(c.bytes);
		}
	}
	EXPECT_EQ(shmkv_utf8_valid(nullptr, 0), 1);
}

// The context a caller puts before a callee's message (lib's errors.h: the
// file's path before the image check's reason) is cut to fit why and always
// terminated, at every size from 1 to the whole message.
TEST(Diag, PrefixedMessageCutToFit)
{
	TempDir d;
	std::string path = d.file("junk.shmkv");
	std::string junk(4096, 'x');
	FILE *f = fopen(path.c_str(), "wb");
	ASSERT_NE(f, nullptr);
	ASSERT_EQ(fwrite(junk.data(), 1, junk.size(), f), junk.size());
	fclose(f);
	shmkv *db = nullptr;
	char full[512];
	ASSERT_LT(shmkv_open_file_diag(path.c_str(), 0, &db, full, sizeof full), 0);
	std::string whole = full;
	ASSERT_EQ(whole.compare(0, path.size() + 2, path + ": "), 0) << whole;
	ASSERT_GT(whole.size(), path.size() + 2) << whole;
	for (size_t len = 1; len <= whole.size() + 1; len++) {
		std::vector<char> why(len + 8, '#');
		ASSERT_LT(shmkv_open_file_diag(path.c_str(), 0, &db, why.data(), len), 0);
		ASSERT_NE(memchr(why.data(), 0, len), nullptr) << "not terminated within why_len " << len;
		std::string got = why.data();
		EXPECT_EQ(got, whole.substr(0, len - 1)) << "why_len " << len;
		EXPECT_EQ(why[len], '#') << "written past why_len " << len;
	}
}
