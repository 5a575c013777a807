// common_test: the internal library shared by the loader and shmctl
// (common/): the one JSON writer's escaping in both its modes, segment
// names, /proc/PID/maps lines, memory-kind names, diag_fail, and the host
// facts (host.h) read from a fake /proc and /sys tree.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/stat.h>

#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <unistd.h>

extern "C" {
#include "diag.h"
#include "host.h"
#include "json.h"
#include "memkind.h"
#include "procmaps.h"
#include "segname.h"
}

#include <shmkv.h>

namespace {

// One string member, written by the buffer writer (the loader's) and by the
// stream writer (shmctl's): both must give the same bytes.
std::string via_buffer(const std::string &s)
{
	struct json j;
	json_init(&j);
	json_str_n(&j, "s", s.data(), s.size());
	char *line = json_finish(&j);
	EXPECT_NE(line, nullptr);
	std::string out = line ? line : "";
	free(line);
	return out;
}

std::string via_file(const std::string &s)
{
	char *text = nullptr;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	EXPECT_NE(f, nullptr);
	struct json j;
	json_init_file(&j, f, false);
	json_obj_begin(&j, nullptr);
	json_str_n(&j, "s", s.data(), s.size());
	json_obj_end(&j);
	fclose(f);
	std::string out(text, len);
	free(text);
	return out;
}

std::string escaped(const std::string &s)
{
	std::string a = via_buffer(s), b = via_file(s);
	EXPECT_EQ(a, b) << "the buffer and stream writers differ";
	return a;
}

TEST(JsonWriter, LineSeparatorsEscaped)
{
	// U+2028 and U+2029 end a line in JavaScript: always \u-escaped.
	EXPECT_EQ(escaped("a\xe2\x80\xa8" "b\xe2\x80\xa9" "c"), "{\"s\": \"a\\u2028b\\u2029c\"}\n");
	// their neighbours U+2027 and U+202A pass as UTF-8
	EXPECT_EQ(escaped("\xe2\x80\xa7\xe2\x80\xaa"), "{\"s\": \"\xe2\x80\xa7\xe2\x80\xaa\"}\n");
}

TEST(JsonWriter, InvalidUtf8BecomesReplacement)
{
	// a lone continuation byte, a truncated sequence, an overlong '/',
	// a surrogate, a code point over U+10FFFF, 0xFF
	EXPECT_EQ(escaped("a\x80z"), "{\"s\": \"a\\ufffdz\"}\n");
	EXPECT_EQ(escaped("\xe2\x82"), "{\"s\": \"\\ufffd\\ufffd\"}\n");
	EXPECT_EQ(escaped("\xc0\xaf"), "{\"s\": \"\\ufffd\\ufffd\"}\n");
	EXPECT_EQ(escaped("\xed\xa0\x80"), "{\"s\": \"\\ufffd\\ufffd\\ufffd\"}\n");
	EXPECT_EQ(escaped("\xf4\x90\x80\x80"), "{\"s\": \"\\ufffd\\ufffd\\ufffd\\ufffd\"}\n");
	EXPECT_EQ(escaped("\xff"), "{\"s\": \"\\ufffd\"}\n");
	// valid multibyte text passes unchanged
	EXPECT_EQ(escaped("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"),
		  "{\"s\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}\n");
}

TEST(JsonWriter, ControlCharactersEscaped)
{
	EXPECT_EQ(escaped(std::string("\"\\\n\t\r\b\f", 7)), "{\"s\": \"\\\"\\\\\\n\\t\\r\\b\\f\"}\n");
	EXPECT_EQ(escaped(std::string("\x00\x01\x1f\x7f", 4)), "{\"s\": \"\\u0000\\u0001\\u001f\\u007f\"}\n");
}

TEST(JsonWriter, MemberNamesEscapedToo)
{
	struct json j;
	json_init(&j);
	json_u64(&j, "a\"\n\xe2\x80\xa8\xff", 1);
	char *line = json_finish(&j);
	ASSERT_NE(line, nullptr);
	EXPECT_STREQ(line, "{\"a\\\"\\n\\u2028\\ufffd\": 1}\n");
	free(line);
}

TEST(JsonWriter, NestingAndValues)
{
	struct json j;
	json_init(&j);
	json_bool(&j, "ok", true);
	json_str(&j, "none", nullptr);
	json_arr_begin(&j, "list");
	json_i64(&j, nullptr, -5);
	json_u64(&j, nullptr, UINT64_MAX);
	json_f64(&j, nullptr, 1.5, 2);
	json_f64(&j, nullptr, 1.0 / 0.0, 2);
	json_obj_begin(&j, nullptr);
	json_obj_end(&j);
	json_arr_end(&j);
	json_base64(&j, "b", "\x00\xff\x10", 3);
	char *line = json_finish(&j);
	ASSERT_NE(line, nullptr);
	EXPECT_STREQ(line, "{\"ok\": true, \"none\": null, \"list\": [-5, 18446744073709551615, "
			   "1.50, null, {}], \"b\": \"AP8Q\"}\n");
	free(line);
}

TEST(JsonWriter, ErrorReplyNamesTheCode)
{
	char *line = json_error_code("no such cache", -ENOENT);
	ASSERT_NE(line, nullptr);
	EXPECT_STREQ(line, "{\"ok\": false, \"error\": \"no such cache\", \"code\": \"ENOENT\", "
			   "\"reason\": \"failed\"}\n");
	free(line);
	line = json_error_code("bad", SHMKV_ECHECKSUM);
	ASSERT_NE(line, nullptr);
	EXPECT_STREQ(line, "{\"ok\": false, \"error\": \"bad\", \"code\": \"SHMKV_ECHECKSUM\", "
			   "\"reason\": \"failed\"}\n");
	free(line);
	line = json_error("x");
	ASSERT_NE(line, nullptr);
	EXPECT_STREQ(line, "{\"ok\": false, \"error\": \"x\", \"reason\": \"failed\"}\n");
	free(line);
	// a missing cache says so by its reason, which clients test
	line = json_no_cache("users");
	ASSERT_NE(line, nullptr);
	EXPECT_STREQ(line, "{\"ok\": false, \"error\": \"no cache \\\"users\\\"\", \"code\": "
			   "\"ENOENT\", \"reason\": \"no_cache\"}\n");
	free(line);
	for (int r = 0; r < JSON_R_N_; r++)
		EXPECT_EQ(json_reason_parse(json_reason_name((enum json_reason)r)), r);
	EXPECT_EQ(json_reason_parse("no_such_thing"), JSON_R_FAILED);
	EXPECT_EQ(json_reason_parse(nullptr), JSON_R_FAILED);
}

TEST(ProcMaps, LineIdentity)
{
	uint64_t dev = 0, ino = 0;
	char line[] = "7f0000000000-7f0000001000 r--s 00000000 00:1a 123456   "
		      "/dev/shm/shmkv/shmkv-1a2b3c4d-users-7 (deleted)";
	ASSERT_TRUE(procmaps_line_id(line, &dev, &ino));
	EXPECT_EQ(dev, (uint64_t)makedev(0, 0x1a));
	EXPECT_EQ(ino, 123456u);
	char big[] = "55d0c0000000-55d0c0021000 rw-p 00000000 103:02 98765 /usr/bin/x";
	ASSERT_TRUE(procmaps_line_id(big, &dev, &ino));
	EXPECT_EQ(dev, (uint64_t)makedev(0x103, 0x2));
	EXPECT_EQ(ino, 98765u);
	char anon[] = "7ffd0000-7ffd1000 rw-p 00000000 00:00 0 ";
	ASSERT_TRUE(procmaps_line_id(anon, &dev, &ino));
	EXPECT_EQ(ino, 0u);
	char field[] = "Rss:                 4 kB";
	EXPECT_FALSE(procmaps_line_id(field, &dev, &ino));
}

TEST(JsonWriter, Base64RoundTrip)
{
	unsigned char out[16];
	EXPECT_EQ(base64_decode("AP8Q", out), 3);
	EXPECT_EQ(std::string((char *)out, 3), std::string("\x00\xff\x10", 3));
	EXPECT_EQ(base64_decode("AP8", out), 2); // padding optional
	EXPECT_EQ(base64_decode("A", out), -1);
	EXPECT_EQ(base64_decode("AP9=", out), -1); // non-canonical trailing bits
	EXPECT_EQ(base64_decode("A*8Q", out), -1);
}

TEST(SegName, PrefixAndMatch)
{
	char root[32], cache[64];
	segname_root_prefix("/run/shmkv", root, sizeof root);
	ASSERT_EQ(strlen(root), (size_t)SEGNAME_ROOT_PREFIX_LEN);
	EXPECT_EQ(std::string(root, 6), "shmkv-");
	EXPECT_EQ(root[14], '-');
	// the top 32 bits of XXH3-64 of the root
	char want[32];
	snprintf(want, sizeof want, "shmkv-%08x-",
		 (unsigned)(XXH3_64bits("/run/shmkv", strlen("/run/shmkv")) >> 32));
	EXPECT_STREQ(root, want);
	ASSERT_TRUE(segname_cache_prefix("/run/shmkv", "users", cache, sizeof cache));
	EXPECT_EQ(std::string(cache), std::string(root) + "users-");
	EXPECT_FALSE(segname_cache_prefix("/run/shmkv", "users", cache, 10));

	bool loading;
	std::string p = cache;
	EXPECT_TRUE(segname_match((p + "12").c_str(), cache, &loading));
	EXPECT_FALSE(loading);
	EXPECT_TRUE(segname_match((p + "7.loading").c_str(), cache, &loading));
	EXPECT_TRUE(loading);
	EXPECT_FALSE(segname_match((p + "7.old").c_str(), cache, &loading));
	EXPECT_FALSE(segname_match(p.c_str(), cache, &loading));
	EXPECT_FALSE(segname_match((p + "x1").c_str(), cache, &loading));
	EXPECT_FALSE(segname_match((p + "12345678901234567890").c_str(), cache, &loading));
	// another cache whose name extends this one's is not this one
	EXPECT_FALSE(segname_match((std::string(root) + "users-2-1").c_str(), cache, &loading));
}

TEST(ProcMaps, ParseLine)
{
	char l1[] = "7f0000000000-7f0000200000 r--s 00000000 00:1a 1234       "
		    "/dev/shm/shmkv-01234567-c-3 (deleted)\n";
	uint64_t start;
	char *path;
	bool deleted;
	ASSERT_TRUE(procmaps_parse_line(l1, &start, &path, &deleted));
	EXPECT_EQ(start, 0x7f0000000000u);
	EXPECT_STREQ(path, "/dev/shm/shmkv-01234567-c-3");
	EXPECT_TRUE(deleted);
	char l2[] = "00400000-00401000 r-xp 00000000 00:00 0 \n";
	ASSERT_TRUE(procmaps_parse_line(l2, &start, &path, &deleted));
	EXPECT_STREQ(path, "");
	EXPECT_FALSE(deleted);
	char l3[] = "Rss:                 4 kB\n";
	EXPECT_FALSE(procmaps_parse_line(l3, &start, &path, &deleted));
}

TEST(ProcMaps, FindsOwnMapping)
{
	// A file named like a segment, mapped by this process, is found in our
	// own maps; an unrelated cache's prefix finds nothing.
	char dir[] = "/tmp/common-test-XXXXXX";
	ASSERT_NE(mkdtemp(dir), nullptr);
	char prefix[64];
	ASSERT_TRUE(segname_cache_prefix(dir, "c", prefix, sizeof prefix));
	std::string path = std::string(dir) + "/" + prefix + "42";
	FILE *f = fopen(path.c_str(), "w+");
	ASSERT_NE(f, nullptr);
	ASSERT_EQ(fputs("x", f), 1);
	fflush(f);
	void *m = mmap(nullptr, 1, PROT_READ, MAP_SHARED, fileno(f), 0);
	ASSERT_NE(m, MAP_FAILED);
	struct seen { std::string path; bool loading = true, deleted = true; int n = 0; } s;
	auto fn = [](const struct procmaps_seg *seg, void *arg) {
		seen *s = static_cast<seen *>(arg);
		s->path = seg->path;
		s->loading = seg->loading;
		s->deleted = seg->deleted;
		s->n++;
		return 0;
	};
	EXPECT_EQ(procmaps_scan_pid(getpid(), prefix, fn, &s), 0);
	EXPECT_EQ(s.n, 1);
	EXPECT_EQ(s.path, path);
	EXPECT_FALSE(s.loading);
	EXPECT_FALSE(s.deleted);
	seen none;
	EXPECT_EQ(procmaps_scan_pid(getpid(), "shmkv-00000000-nothing-", fn, &none), 0);
	EXPECT_EQ(none.n, 0);
	unlink(path.c_str());
	seen del;
	EXPECT_EQ(procmaps_scan_pid(getpid(), prefix, fn, &del), 0);
	EXPECT_EQ(del.n, 1);
	EXPECT_TRUE(del.deleted);
	EXPECT_EQ(procmaps_scan_pid(0x7ffffffe, prefix, fn, &del), -ENOENT);
	munmap(m, 1);
	fclose(f);
	rmdir(dir);
}

TEST(MemKind, Names)
{
	char b[32];
	EXPECT_STREQ(memkind_name(0, 4096, b, sizeof b), "shm");
	EXPECT_STREQ(memkind_name(SHMKV_SEG_HUGETLB, 2u << 20, b, sizeof b), "hugetlb-2M");
	EXPECT_STREQ(memkind_name(SHMKV_SEG_HUGETLB, 1u << 30, b, sizeof b), "hugetlb-1G");
	EXPECT_STREQ(memkind_name(SHMKV_SEG_HUGETLB, 64u << 10, b, sizeof b), "hugetlb-64K");
	EXPECT_STREQ(memkind_page_size(3u << 20, b, sizeof b), "3M");
}

TEST(Diag, FailFormatsAndReturns)
{
	char why[8];
	EXPECT_EQ(diag_fail(-EINVAL, why, sizeof why, "%s %d", "abcdef", 42), -EINVAL);
	EXPECT_STREQ(why, "abcdef "); // truncated, terminated
	EXPECT_EQ(diag_fail(SHMKV_ECORRUPT, nullptr, 0, "x"), SHMKV_ECORRUPT);
}

// A fake host root: files written under a temporary directory.
class FakeHost {
public:
	FakeHost()
	{
		char tmpl[] = "/tmp/common_host.XXXXXX";
		root_ = mkdtemp(tmpl) ? tmpl : "";
	}
	~FakeHost() { std::system(("rm -rf '" + root_ + "'").c_str()); }
	const std::string &root() const { return root_; }
	void write(const std::string &rel, const std::string &text)
	{
		std::string p = root_ + "/" + rel;
		std::system(("mkdir -p \"$(dirname '" + p + "')\"").c_str());
		FILE *f = fopen(p.c_str(), "w");
		ASSERT_NE(f, nullptr) << p;
		fputs(text.c_str(), f);
		fclose(f);
	}
	void pool(const std::string &dir, unsigned kb, unsigned nr, unsigned fr, int resv = -1)
	{
		std::string d = dir + "/hugepages-" + std::to_string(kb) + "kB/";
		write(d + "nr_hugepages", std::to_string(nr) + "\n");
		write(d + "free_hugepages", std::to_string(fr) + "\n");
		if (resv >= 0)
			write(d + "resv_hugepages", std::to_string(resv) + "\n");
	}

private:
	std::string root_;
};

TEST(Host, ParseSizeAndName)
{
	uint64_t v = 0;
	EXPECT_EQ(host_parse_size("2M", &v), 0);
	EXPECT_EQ(v, 2u << 20);
	EXPECT_EQ(host_parse_size("1G", &v), 0);
	EXPECT_EQ(v, 1u << 30);
	EXPECT_EQ(host_parse_size("2048kB", &v), 0);
	EXPECT_EQ(v, 2u << 20);
	EXPECT_EQ(host_parse_size("65536", &v), 0);
	EXPECT_EQ(v, 65536u);
	EXPECT_EQ(host_parse_size("4MiB", &v), 0);
	EXPECT_EQ(v, 4u << 20);
	EXPECT_EQ(host_parse_size("1T", &v), 0);
	EXPECT_EQ(v, UINT64_C(1) << 40);
	EXPECT_EQ(host_parse_size("0", &v), 0) << "0 parses; page-size callers refuse it";
	EXPECT_EQ(v, 0u);
	for (const char *bad : {"", "M", "2P", "2M,", "-1", "2 M", "2iB"})
		EXPECT_EQ(host_parse_size(bad, &v), -EINVAL) << bad;
	for (const char *big : {"99999999999999999999", "17179869184G"})
		EXPECT_EQ(host_parse_size(big, &v), -ERANGE) << big;
	char b[16];
	EXPECT_STREQ(host_size_name(2u << 20, b, sizeof b), "2M");
	EXPECT_STREQ(host_size_name(1u << 30, b, sizeof b), "1G");
	EXPECT_STREQ(host_size_name(64u << 10, b, sizeof b), "64K");
	char o[64];
	EXPECT_EQ(host_mount_opt("rw,relatime,pagesize=1024M", "pagesize", o, sizeof o), 0);
	EXPECT_STREQ(o, "1024M");
	EXPECT_EQ(host_mount_opt("rw,xpagesize=2M", "pagesize", o, sizeof o), -ENOENT);
}

TEST(Host, MountsDecodedWithPageSizes)
{
	FakeHost h;
	h.write("proc/meminfo", "MemTotal: 1000 kB\nHugepagesize:       2048 kB\n");
	h.write("proc/mounts",
		"proc /proc proc rw 0 0\n"
		"none /mnt/huge\\040pages hugetlbfs rw,relatime,pagesize=1024M 0 0\n"
		"none /dev/hugepages hugetlbfs rw,relatime 0 0\n"
		"none /dev/hugepages hugetlbfs rw,pagesize=1G 0 0\n" // listed again: the first
		"none /mnt/tab\\011and\\134slash hugetlbfs rw,pagesize=64K 0 0\n"
		"tmpfs /dev/shm tmpfs rw 0 0\n");
	struct host_mount m[8];
	size_t n = 0;
	ASSERT_EQ(host_mounts(h.root().c_str(), "hugetlbfs", m, 8, &n), 0);
	ASSERT_EQ(n, 3u);
	EXPECT_STREQ(m[0].dir, "/mnt/huge pages");
	EXPECT_EQ(m[0].page_size, 1u << 30);
	EXPECT_STREQ(m[1].dir, "/dev/hugepages");
	EXPECT_EQ(m[1].page_size, 2u << 20) << "no pagesize=: the default Hugepagesize";
	EXPECT_STREQ(m[2].dir, "/mnt/tab\tand\\slash");
	EXPECT_EQ(m[2].page_size, 64u << 10);
	ASSERT_EQ(host_mounts(h.root().c_str(), NULL, m, 8, &n), 0);
	EXPECT_EQ(n, 5u);
	EXPECT_EQ(m[4].page_size, 0u) << "not hugetlbfs";
	ASSERT_EQ(host_mounts(h.root().c_str(), "hugetlbfs", m, 1, &n), 0);
	EXPECT_EQ(n, 1u) << "at most max";
	EXPECT_EQ(host_default_hugepage_size(h.root().c_str()), 2u << 20);
	EXPECT_EQ(host_mounts((h.root() + "/nothing").c_str(), "hugetlbfs", m, 8, &n), -ENOENT);
}

TEST(Host, PoolsPerSizeAndNode)
{
	FakeHost h;
	std::string hp = "sys/kernel/mm/hugepages";
	h.pool(hp, 1048576, 2, 1, 0);
	h.pool(hp, 2048, 100, 40, 15);
	h.write(hp + "/hugepages-2048kB/surplus_hugepages", "3\n");
	std::string node1 = "sys/devices/system/node/node1/hugepages";
	h.pool(node1, 2048, 12, 5); // per node: no resv_hugepages
	struct host_pool p[HOST_MAX_POOLS];
	size_t n = 0;
	char why[256] = "";
	ASSERT_EQ(host_pools((h.root() + "/" + hp).c_str(), p, HOST_MAX_POOLS, &n, why, sizeof why),
		  0) << why;
	ASSERT_EQ(n, 2u);
	EXPECT_EQ(p[0].page_size, 2u << 20) << "smallest first";
	EXPECT_EQ(p[0].nr, 100u);
	EXPECT_EQ(p[0].free, 40u);
	EXPECT_EQ(p[0].resv, 15u);
	EXPECT_EQ(p[0].surplus, 3u);
	EXPECT_EQ(p[1].page_size, 1u << 30);
	EXPECT_EQ(host_pool_available(h.root().c_str(), 2u << 20), 25);
	EXPECT_EQ(host_pool_available(h.root().c_str(), 1u << 30), 1);
	EXPECT_EQ(host_pool_available(h.root().c_str(), 64u << 10), -1) << "no such pool";
	ASSERT_EQ(host_pools((h.root() + "/" + node1).c_str(), p, HOST_MAX_POOLS, &n, why,
			     sizeof why), 0) << why;
	ASSERT_EQ(n, 1u);
	EXPECT_EQ(p[0].nr, 12u);
	EXPECT_EQ(p[0].free, 5u);
	EXPECT_EQ(p[0].resv, 0u);
	// a pool whose free_hugepages is not a number: an error naming the file
	h.write(node1 + "/hugepages-2048kB/free_hugepages", "lots\n");
	EXPECT_EQ(host_pools((h.root() + "/" + node1).c_str(), p, HOST_MAX_POOLS, &n, why,
			     sizeof why), -EINVAL);
	EXPECT_NE(strstr(why, "free_hugepages: not a number"), nullptr) << why;
	EXPECT_EQ(host_pools((h.root() + "/none").c_str(), p, HOST_MAX_POOLS, &n, why, sizeof why),
		  -ENOENT);
}

TEST(Host, Paths)
{
	char b[16];
	EXPECT_EQ(host_path(b, sizeof b, "/host", "/proc/mounts"), -ENAMETOOLONG);
	EXPECT_EQ(host_path(b, sizeof b, "", "/proc/mounts"), 0);
	EXPECT_STREQ(b, "/proc/mounts");
	setenv("SHMKV_HOST_ROOT", "/x", 1);
	EXPECT_STREQ(host_root_env(), "/x");
	setenv("SHMKV_HOST_ROOT", "", 1);
	EXPECT_STREQ(host_root_env(), "");
	unsetenv("SHMKV_HOST_ROOT");
}

} // namespace
