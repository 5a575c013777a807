// attach_test: shmkv_attach_diag() against missing, foreign and damaged
// control segments, and the read-only guarantees of an attached reader.
//
//   Errors: no such cache (-ENOENT naming the root), invalid names
//     (-EINVAL), hand-written NAME.ctl files: wrong magic, another protocol
//     version, another layout hash, too short (SHMKV_EPROTO, the message says
//     which), generation 0 (-EAGAIN, nothing published), seq stuck odd
//     (-EAGAIN, mid-update), a segment path that is gone (-ENOENT naming it),
//     a segment that is not an image (SHMKV_EMAGIC). A hand-written control
//     segment naming a real image attaches: the protocol alone suffices.
//   NothingPublished: a loader restarted after every segment of a cache
//     vanished publishes "nothing"; attach then fails cleanly.
//   ReadOnly: mprotect(PROT_WRITE) on the image and the control mappings
//     fails with EACCES; a store through the mapping faults; files are 0644
//     and, as uid 65534 (in the loader's group, nogroup here, which readers
//     need to enter the segment directory), O_RDWR opens fail with EACCES
//     while attaching works; a cache configured mode=0640 cannot be
//     attached by that user.
//   ControlLayoutDescribesStructs: SHMKV_CTL_LAYOUT_DESC rebuilt from
//     offsetof/sizeof, SHMKV_CTL_LAYOUT_HASH its XXH3-64 and still the hash
//     of the first released layout (0x4b43ad88b167e31c: old and new readers
//     and loaders share control segments); shmkv_ctl_init leaves flags and
//     reserved zero.
//   DetachKeepsGenerations: shmkv_detach hands the mapped generation to a
//     plain handle that keeps reading it across the attached handle's next
//     refresh and its close; the attached handle maps nothing until a
//     refresh that moves (a second detach: -EINVAL), refresh on the plain
//     handle is 0, a file handle cannot be detached.
//   OldLoaderControlSegment: a control segment as a loader before the flags
//     wrote it, byte by byte at the documented offsets (flags 0, reserved
//     zero), attaches and refreshes with this reader.
//   SegmentOwnerIsTheControlSegmentFiles: the uid segments must have is the
//     control segment file's st_uid: the same control segment chown'ed to
//     another uid gets -EPERM for our segment (as root; else skipped), and
//     one chmod'ed 0666 is refused (SHMKV_EPROTO).
#include <grp.h>

#include "loader_util.h"

using namespace loader_test;

namespace {

struct FakeCtl {
	shmkv_ctl c;
	FakeCtl()
	{
		memset(&c, 0, sizeof c);
		memcpy(c.magic, SHMKV_CTL_MAGIC, 8);
		c.protocol_version = SHMKV_PROTOCOL_VERSION;
		c.ctl_size = SHMKV_CTL_SIZE;
		c.layout_hash = SHMKV_CTL_LAYOUT_HASH;
	}
	void segment(const std::string &path, uint64_t size, uint64_t map_size, uint64_t gen)
	{
		c.generation = gen;
		c.segment_count = 1;
		c.segments[0].node = -1;
		c.segments[0].size = size;
		c.segments[0].map_size = map_size;
		c.segments[0].page_size = 4096;
		snprintf(c.segments[0].path, sizeof c.segments[0].path, "%s", path.c_str());
	}
	bool write(const std::string &file, size_t len = SHMKV_CTL_SIZE) const
	{
		std::string data(SHMKV_CTL_SIZE, '\0');
		memcpy(&data[0], &c, sizeof c);
		data.resize(len);
		return shmkv_test::write_file(file, data);
	}
};

struct Attempt {
	int err = 0;
	std::string why;
	shmkv *db = nullptr;
	~Attempt() { shmkv_close(db); }
};

void try_attach(const std::string &root, const std::string &name, Attempt *a, unsigned flags = 0)
{
	a->db = attach(root, name, flags, &a->err, &a->why);
}

TEST(Attach, NoSuchCache)
{
	Env env;
	Attempt a;
	try_attach(env.root(), "nope", &a);
	EXPECT_EQ(a.err, -ENOENT);
	EXPECT_EQ(a.db, nullptr);
	EXPECT_NE(a.why.find("\"nope\""), std::string::npos) << a.why;
	EXPECT_NE(a.why.find(env.root()), std::string::npos) << "names the root: " << a.why;

	Attempt b;
	std::string gone = env.base() + "/no-such-root";
	try_attach(gone, "nope", &b);
	EXPECT_EQ(b.err, -ENOENT);
	EXPECT_NE(b.why.find(gone), std::string::npos) << b.why;

	for (const char *bad : {"", ".hidden", "a/b", "sp ace", "x\n"}) {
		Attempt c;
		try_attach(env.root(), bad, &c);
		EXPECT_EQ(c.err, -EINVAL) << "name \"" << bad << "\": " << c.why;
		EXPECT_TRUE(contains_ci(c.why, "invalid cache name")) << c.why;
	}
	std::string long_name(64, 'n');
	Attempt d;
	try_attach(env.root(), long_name, &d);
	EXPECT_EQ(d.err, -EINVAL) << d.why;
}

TEST(Attach, ForeignControlSegments)
{
	Env env;
	auto ctl_path = [&](const char *n) { return env.root() + "/" + n + ".ctl"; };

	FakeCtl magic;
	memcpy(magic.c.magic, "NOTACTL!", 8);
	ASSERT_TRUE(magic.write(ctl_path("magic")));
	Attempt a;
	try_attach(env.root(), "magic", &a);
	EXPECT_EQ(a.err, SHMKV_EPROTO) << a.why;
	EXPECT_TRUE(contains_ci(a.why, "magic")) << a.why;
	EXPECT_NE(a.why.find(ctl_path("magic")), std::string::npos) << a.why;

	FakeCtl ver;
	ver.c.protocol_version = SHMKV_PROTOCOL_MAX + 1;
	ASSERT_TRUE(ver.write(ctl_path("ver")));
	Attempt b;
	try_attach(env.root(), "ver", &b);
	EXPECT_EQ(b.err, SHMKV_EPROTO) << b.why;
	EXPECT_NE(b.why.find("protocol version " + std::to_string(SHMKV_PROTOCOL_MAX + 1)),
		  std::string::npos) << b.why;
	EXPECT_NE(b.why.find("speaks versions 1 "), std::string::npos) << b.why;
	EXPECT_NE(b.why.find(" and 2 "), std::string::npos) << b.why;

	FakeCtl lay;
	lay.c.layout_hash ^= 1;
	ASSERT_TRUE(lay.write(ctl_path("lay")));
	Attempt c;
	try_attach(env.root(), "lay", &c);
	EXPECT_EQ(c.err, SHMKV_EPROTO) << c.why;
	EXPECT_TRUE(contains_ci(c.why, "layout")) << c.why;

	FakeCtl shortc;
	ASSERT_TRUE(shortc.write(ctl_path("short"), 100));
	Attempt d;
	try_attach(env.root(), "short", &d);
	EXPECT_EQ(d.err, SHMKV_EPROTO) << d.why;
	EXPECT_TRUE(contains_ci(d.why, "size")) << d.why;
	EXPECT_STREQ(shmkv_strerror(SHMKV_EPROTO), "control segment protocol mismatch");
}

TEST(Attach, HandWrittenControlSegments)
{
	Env env;
	auto ctl_path = [&](const char *n) { return env.root() + "/" + n + ".ctl"; };

	// nothing published yet
	FakeCtl empty;
	ASSERT_TRUE(empty.write(ctl_path("empty")));
	Attempt a;
	try_attach(env.root(), "empty", &a);
	EXPECT_EQ(a.err, -EAGAIN) << a.why;
	EXPECT_TRUE(contains_ci(a.why, "no generation published yet")) << a.why;

	// a loader that died mid-publish: seq stays odd
	FakeCtl odd;
	odd.segment(env.img_path("x"), 8192, 8192, 4);
	odd.c.seq = 7;
	ASSERT_TRUE(odd.write(ctl_path("odd")));
	Attempt b;
	uint64_t t0 = now_ms();
	try_attach(env.root(), "odd", &b);
	EXPECT_EQ(b.err, -EAGAIN) << b.why;
	EXPECT_TRUE(contains_ci(b.why, "mid-update")) << b.why;
	printf("odd seq: gave up after %llu ms\n", (unsigned long long)(now_ms() - t0));

	// the published segment is gone
	FakeCtl gone;
	std::string missing = env.shm() + "/shmkv-00000000-gone-1";
	gone.segment(missing, 8192, 8192, 3);
	ASSERT_TRUE(gone.write(ctl_path("gone")));
	Attempt c;
	try_attach(env.root(), "gone", &c);
	EXPECT_EQ(c.err, -ENOENT) << c.why;
	EXPECT_NE(c.why.find(missing), std::string::npos) << c.why;

	// a segment that is not an image
	std::string junk = env.img_path("junk");
	ASSERT_TRUE(shmkv_test::write_file(junk, std::string(8192, 'j')));
	FakeCtl notimg;
	notimg.segment(junk, 8192, 8192, 1);
	ASSERT_TRUE(notimg.write(ctl_path("notimg")));
	Attempt d;
	try_attach(env.root(), "notimg", &d);
	EXPECT_EQ(d.err, SHMKV_EMAGIC) << d.why;

	// a control segment claiming more bytes than the file holds
	std::string img = env.img_path("real.shmkv");
	ASSERT_EQ(build_image(img, "real", 500), "");
	struct stat st;
	ASSERT_EQ(stat(img.c_str(), &st), 0);
	FakeCtl big;
	big.segment(img, (uint64_t)st.st_size * 2, (uint64_t)st.st_size * 2, 1);
	ASSERT_TRUE(big.write(ctl_path("toobig")));
	Attempt e;
	try_attach(env.root(), "toobig", &e);
	EXPECT_EQ(e.err, SHMKV_ETRUNCATED) << e.why;

	// a hand-written control segment naming a real image: attach works
	FakeCtl real;
	real.segment(img, (uint64_t)st.st_size, (uint64_t)st.st_size, 9);
	ASSERT_TRUE(real.write(ctl_path("real")));
	Attempt f;
	try_attach(env.root(), "real", &f, SHMKV_ATTACH_VERIFY | SHMKV_OPEN_DEEP);
	ASSERT_EQ(f.err, 0) << f.why;
	EXPECT_EQ(shmkv_generation(f.db), 9u);
	EXPECT_EQ(tag_of(f.db), "real");
	EXPECT_EQ(check_handle(f.db, "real", 500), 0u);
	EXPECT_EQ(shmkv_refresh(f.db), 0);

	Attempt g;
	try_attach(env.root(), "real", &g, 0x1000);
	EXPECT_EQ(g.err, -EINVAL) << g.why;
}

TEST(Attach, DetachKeepsGenerations)
{
	Env env;
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	std::string a = env.img_path("a.shmkv"), b = env.img_path("b.shmkv");
	ASSERT_EQ(build_image(a, "a", 200), "");
	ASSERT_EQ(build_image(b, "b", 300), "");
	ASSERT_TRUE(ld.load("d", a).ok());
	Attempt at;
	try_attach(env.root(), "d", &at);
	ASSERT_EQ(at.err, 0) << at.why;
	uint64_t g = shmkv_generation(at.db);
	shmkv *g1 = nullptr, *g2 = nullptr, *x = nullptr;
	ASSERT_EQ(shmkv_detach(at.db, &g1), 0);
	ASSERT_NE(g1, nullptr);
	EXPECT_EQ(shmkv_generation(g1), g);
	EXPECT_EQ(tag_of(g1), "a");
	EXPECT_EQ(shmkv_detach(at.db, &x), -EINVAL) << "nothing mapped until it moves";
	EXPECT_EQ(x, nullptr);
	EXPECT_EQ(shmkv_refresh(at.db), 0);
	EXPECT_EQ(shmkv_refresh(g1), 0) << "a plain handle never moves";

	ASSERT_TRUE(ld.load("d", b).ok());
	ASSERT_EQ(shmkv_refresh(at.db), 1);
	ASSERT_EQ(shmkv_detach(at.db, &g2), 0);
	EXPECT_GT(shmkv_generation(g2), g);
	EXPECT_EQ(shmkv_generation(g1), g);
	shmkv_close(at.db);
	at.db = nullptr;
	// both generations still read, the first one's segment long replaced
	EXPECT_EQ(check_handle(g1, "a", 200), 0u);
	EXPECT_EQ(check_handle(g2, "b", 300), 0u);
	shmkv_close(g1);
	shmkv_close(g2);

	shmkv *f = nullptr;
	ASSERT_EQ(shmkv_open_file(b.c_str(), 0, &f), 0);
	EXPECT_EQ(shmkv_detach(f, &x), -EINVAL) << "a file handle is not attached";
	shmkv_close(f);
}

// A loader restarted after every segment of a cache was removed publishes
// "nothing" (a new generation with no segment): attach must fail cleanly
// and say so, and a new load must work again.
TEST(Attach, NothingPublished)
{
	Env env;
	Loader ld(env);
	ASSERT_TRUE(ld.start());
	std::string a = env.img_path("a.shmkv");
	ASSERT_EQ(build_image(a, "a", 100), "");
	ASSERT_TRUE(ld.load("vanish", a).ok());
	ASSERT_TRUE(ld.load("vanish", a).ok());
	EXPECT_EQ(ld.stop(), 0);
	for (const std::string &f : env.shm_files())
		ASSERT_EQ(unlink((env.seg_dir() + "/" + f).c_str()), 0);

	ASSERT_TRUE(ld.start());
	std::string log = env.log();
	EXPECT_EQ(log_lines(log, {"repaired cache=vanish gen=3", "published none"}).size(), 1u)
		<< log;
	// the adoption line that follows names the generation now in the control segment
	EXPECT_EQ(log_lines(log, {"adopted cache=vanish gen=3: nothing published"}).size(), 1u)
		<< log;
	CtlView v;
	ASSERT_TRUE(read_ctl(env.root(), "vanish", &v));
	EXPECT_EQ(v.generation, 3u) << "the repair takes the next generation";
	EXPECT_EQ(v.segment_count, 0u);
	Json j = ld.status("vanish");
	EXPECT_FALSE(j["published"].truthy());

	Attempt at;
	try_attach(env.root(), "vanish", &at);
	EXPECT_NE(at.err, 0);
	EXPECT_EQ(at.db, nullptr);
	// "nothing published" is the state: the reader should say so (EAGAIN, as
	// for generation 0), not report a missing file with an empty name
	EXPECT_EQ(at.err, -EAGAIN) << shmkv_strerror(at.err) << ": " << at.why;
	EXPECT_TRUE(contains_ci(at.why, "no generation published") ||
		    contains_ci(at.why, "nothing published"))
		<< at.why;

	j = ld.load("vanish", a);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	EXPECT_EQ(j["generation"].u64(), 4u);
	Attempt ok;
	try_attach(env.root(), "vanish", &ok);
	EXPECT_EQ(ok.err, 0) << ok.why;
}

// The result of the unprivileged child, bit per check that failed.
enum {
	F_SETUID = 1,
	F_RDWR_SEG = 2,
	F_RDWR_CTL = 4,
	F_ATTACH = 8,
	F_VALUES = 16,
	F_MPROTECT = 32,
	F_PRIVATE = 64,
};

TEST(Attach, ReadOnly)
{
	Env env;
	std::string conf = env.base() + "/loader.conf";
	ASSERT_TRUE(shmkv_test::write_file(conf, "[loader]\ngroup = nogroup\n"
						 "[cache private]\nmode = 0640\n"));
	Loader ld(env, {"--memory", "shm", "--config", conf});
	ASSERT_TRUE(ld.start());
	std::string img = env.img_path("ro.shmkv");
	ASSERT_EQ(build_image(img, "ro", 5000), "");
	Json j = ld.load("ro", img);
	ASSERT_TRUE(j.ok()) << j["error"].s();
	std::string seg = j["segment"].s();
	ASSERT_TRUE(ld.load("private", img).ok());
	std::string ctl = env.root() + "/ro.ctl";

	struct stat st;
	ASSERT_EQ(stat(seg.c_str(), &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0644u) << "segment mode";
	ASSERT_EQ(stat(ctl.c_str(), &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0644u) << "control segment mode";
	ASSERT_EQ(stat((env.root() + "/private.ctl").c_str(), &st), 0);
	EXPECT_EQ(st.st_mode & 07777, 0640u) << "mode = 0640 from the config";

	Attempt a;
	try_attach(env.root(), "ro", &a);
	ASSERT_EQ(a.err, 0) << a.why;
	shmkv *db = a.db;
	EXPECT_EQ(mprotect(db->map, db->map_len, PROT_READ | PROT_WRITE), -1);
	EXPECT_EQ(errno, EACCES) << strerror(errno);
	EXPECT_EQ(mprotect((void *)db->ctl, SHMKV_CTL_SIZE, PROT_READ | PROT_WRITE), -1);
	EXPECT_EQ(errno, EACCES) << strerror(errno);
	EXPECT_EQ(mprotect(db->map, db->map_len, PROT_READ | PROT_EXEC), 0)
		<< "mprotect itself works on the mapping";
	EXPECT_EQ(mprotect(db->map, db->map_len, PROT_READ), 0);

	// a store through either mapping faults
	for (volatile uint8_t *p : {(volatile uint8_t *)db->map + 4096,
				    (volatile uint8_t *)(uintptr_t)db->ctl + 32}) {
		Child w([p](int) {
			// our own handler: sanitizer runtimes turn a plain SIGSEGV into exit 1
			struct sigaction sa;
			memset(&sa, 0, sizeof sa);
			sa.sa_handler = [](int) { _exit(42); };
			sigaction(SIGSEGV, &sa, nullptr);
			*p = 1;
			return 0;
		});
		int code = w.wait_exit(60000);
		EXPECT_TRUE(code == 42 || code == 128 + SIGSEGV)
			<< "a write through a reader's mapping must fault; exit " << code;
	}
	EXPECT_EQ(check_handle(db, "ro", 5000, 11), 0u);

	if (geteuid() != 0) {
		printf("not root: the unprivileged-user checks are left out\n");
		return;
	}
	std::string root = env.root();
	Child nobody([root, seg, ctl](int) -> int {
		int bad = 0;
		if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
			return F_SETUID;
		int fd = open(seg.c_str(), O_RDWR);
		if (fd >= 0 || errno != EACCES)
			bad |= F_RDWR_SEG;
		fd = open(ctl.c_str(), O_RDWR);
		if (fd >= 0 || errno != EACCES)
			bad |= F_RDWR_CTL;
		int err;
		std::string why;
		shmkv *d = attach(root, "ro", 0, &err, &why);
		if (!d)
			return bad | F_ATTACH;
		if (check_handle(d, "ro", 5000, 7) != 0)
			bad |= F_VALUES;
		if (mprotect(d->map, d->map_len, PROT_READ | PROT_WRITE) == 0 || errno != EACCES)
			bad |= F_MPROTECT;
		shmkv_close(d);
		d = attach(root, "private", 0, &err, &why);
		if (d || err != -EACCES || why.find("private.ctl") == std::string::npos)
			bad |= F_PRIVATE;
		shmkv_close(d);
		return bad;
	});
	int code = nobody.wait_exit(20000);
	EXPECT_EQ(code & F_SETUID, 0) << "could not become uid 65534";
	EXPECT_EQ(code & F_RDWR_SEG, 0) << "uid 65534 opened the segment O_RDWR";
	EXPECT_EQ(code & F_RDWR_CTL, 0) << "uid 65534 opened the control segment O_RDWR";
	EXPECT_EQ(code & F_ATTACH, 0) << "uid 65534 cannot attach to a 0644 cache";
	EXPECT_EQ(code & F_VALUES, 0);
	EXPECT_EQ(code & F_MPROTECT, 0);
	EXPECT_EQ(code & F_PRIVATE, 0) << "uid 65534 and a 0640 cache: -EACCES naming the file";
	EXPECT_EQ(code, 0);

	// the loader counts the unprivileged reader too while it runs; here: us
	j = ld.status("ro");
	EXPECT_EQ(j["readers"].u64(), 1u);
}

#define CTL_FIELD(s, f) (std::string(#f) + "@" + std::to_string(offsetof(s, f)))

// SHMKV_CTL_LAYOUT_DESC is what the structs are, and its hash is XXH3-64
// (seed 0) of it (lib/PROTOCOL.md, "Versioning"), and it is the layout
// every loader and reader since protocol 1 shares: a changed hash would make
// every deployed client refuse a new loader's caches (the reader is
// header-only: each program carries its copy).
TEST(Attach, ControlLayoutDescribesStructs)
{
	using C = shmkv_ctl;
	using S = shmkv_ctl_segment;
	std::string d = "shmkv-ctl-v1;ctl=" + std::to_string(sizeof(C)) + ":";
	d += CTL_FIELD(C, magic) + "," + CTL_FIELD(C, protocol_version) + "," +
	     CTL_FIELD(C, ctl_size) + "," + CTL_FIELD(C, layout_hash) + "," + CTL_FIELD(C, seq) +
	     "," + CTL_FIELD(C, generation) + "," + CTL_FIELD(C, segment_count) + "," +
	     CTL_FIELD(C, flags) + "," + CTL_FIELD(C, loader_pid) + "," +
	     CTL_FIELD(C, published_ns) + "," + CTL_FIELD(C, reserved) + "," +
	     CTL_FIELD(C, segments) + ";";
	d += "segment=" + std::to_string(sizeof(S)) + ":" + CTL_FIELD(S, node) + "," +
	     CTL_FIELD(S, flags) + "," + CTL_FIELD(S, size) + "," + CTL_FIELD(S, map_size) + "," +
	     CTL_FIELD(S, page_size) + "," + CTL_FIELD(S, path);
	EXPECT_EQ(d, std::string(SHMKV_CTL_LAYOUT_DESC));
	EXPECT_EQ(XXH3_64bits(d.data(), d.size()), SHMKV_CTL_LAYOUT_HASH)
		<< std::hex << "computed 0x" << XXH3_64bits(d.data(), d.size());
	EXPECT_EQ(SHMKV_CTL_LAYOUT_HASH, UINT64_C(0x4b43ad88b167e31c))
		<< "the layout every released reader and loader speaks";
	EXPECT_EQ(sizeof(C::reserved), 64u);
	shmkv_ctl c;
	memset(&c, 0xee, sizeof c);
	shmkv_ctl_init(&c);
	EXPECT_EQ(c.flags, 0u);
	for (uint64_t r : c.reserved)
		EXPECT_EQ(r, 0u) << "reserved stays zero: old readers see what they always saw";
}

// Bytes at the offsets lib/PROTOCOL.md gives, as a loader before the flags
// wrote them: nothing taken from the structs, so a moved field fails here.
std::string old_ctl_bytes(const std::string &seg, uint64_t size, uint64_t gen)
{
	std::string b(SHMKV_CTL_SIZE, '\0');
	auto put = [&](size_t off, const void *v, size_t n) { memcpy(&b[off], v, n); };
	uint32_t version = 1, ctl_size = 4096, count = 1, seg_flags = 0;
	uint64_t hash = UINT64_C(0x4b43ad88b167e31c), seq = 2, pid = 1, page = 4096;
	int32_t node = -1;
	int64_t ns = 1;
	put(0, "SHMKVCTL", 8);
	put(8, &version, 4);
	put(12, &ctl_size, 4);
	put(16, &hash, 8);
	put(24, &seq, 8);
	put(32, &gen, 8);
	put(40, &count, 4); // flags@44 and reserved@64..127 stay zero
	put(48, &pid, 8);
	put(56, &ns, 8);
	put(128, &node, 4);
	put(132, &seg_flags, 4);
	put(136, &size, 8);
	put(144, &size, 8);
	put(152, &page, 8);
	put(160, seg.c_str(), seg.size() + 1);
	return b;
}

TEST(Attach, OldLoaderControlSegment)
{
	Env env;
	std::string img = env.img_path("old.shmkv");
	ASSERT_EQ(build_image(img, "old", 300), "");
	struct stat st;
	ASSERT_EQ(stat(img.c_str(), &st), 0);
	ASSERT_EQ(memcmp(SHMKV_CTL_MAGIC, "SHMKVCTL", 8), 0);
	std::string ctl = env.root() + "/old.ctl";
	ASSERT_TRUE(shmkv_test::write_file(ctl, old_ctl_bytes(img, (uint64_t)st.st_size, 5)));
	ASSERT_EQ(chmod(ctl.c_str(), 0644), 0);
	Attempt a;
	try_attach(env.root(), "old", &a, SHMKV_ATTACH_VERIFY);
	ASSERT_EQ(a.err, 0) << a.why;
	EXPECT_EQ(shmkv_generation(a.db), 5u);
	EXPECT_EQ(tag_of(a.db), "old");
	EXPECT_EQ(check_handle(a.db, "old", 300), 0u);
	EXPECT_EQ(shmkv_refresh(a.db), 0) << "flags 0: not retired";
}

TEST(Attach, SegmentOwnerIsTheControlSegmentFiles)
{
	Env env;
	std::string img = env.img_path("own.shmkv");
	ASSERT_EQ(build_image(img, "own", 300), "");
	ASSERT_EQ(chmod(img.c_str(), 0644), 0);
	struct stat st;
	ASSERT_EQ(stat(img.c_str(), &st), 0);
	std::string ctl = env.root() + "/own.ctl";
	FakeCtl c;
	c.segment(img, (uint64_t)st.st_size, (uint64_t)st.st_size, 3);
	ASSERT_TRUE(c.write(ctl));
	ASSERT_EQ(chmod(ctl.c_str(), 0644), 0);
	{
		Attempt a;
		try_attach(env.root(), "own", &a);
		ASSERT_EQ(a.err, 0) << a.why;
		// a chmod after attach: refresh refuses to go on (before reading it)
		ASSERT_EQ(chmod(ctl.c_str(), 0666), 0);
		EXPECT_EQ(shmkv_refresh(a.db), SHMKV_EPROTO);
		ASSERT_EQ(chmod(ctl.c_str(), 0644), 0);
		EXPECT_EQ(shmkv_refresh(a.db), 0);
	}
	ASSERT_EQ(chmod(ctl.c_str(), 0666), 0);
	{
		Attempt a;
		try_attach(env.root(), "own", &a);
		EXPECT_EQ(a.err, SHMKV_EPROTO) << a.why;
		EXPECT_TRUE(contains_ci(a.why, "writable by group or others")) << a.why;
	}
	ASSERT_EQ(chmod(ctl.c_str(), 0644), 0);
	if (geteuid() != 0)
		GTEST_SKIP() << "chown to another uid needs root";
	ASSERT_EQ(chown(ctl.c_str(), 4242, 4242), 0);
	Attempt b;
	try_attach(env.root(), "own", &b);
	EXPECT_EQ(b.err, -EPERM) << b.why;
	EXPECT_TRUE(contains_ci(b.why, "control segment's owner (uid 4242)")) << b.why;
}

#undef CTL_FIELD

} // namespace
