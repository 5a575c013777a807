// bpf_test: a cache exported to BPF (loader/bpf.c, lib/shmkv_bpf.h) read by
// the example XDP program (examples/bpf/xdp_get.bpf.c) through
// BPF_PROG_TEST_RUN, every answer checked against the user-space reader on
// the same generation: hits of every value type, misses, keys over 60 bytes,
// values over max_value, keys outside a prefix, an image whose expiring
// entries are not exported; a generation with changes (base through its
// overlay), its compaction and rollback; then new generations swapped
// in under the same loaded program, a failed export that leaves the previous
// table serving, unexport, and what another uid gets (clear errors).
// Needs root (BPF); CI runs it as root. Each test pins under its own
// bpf_dir, /sys/fs/bpf/shmkv-test-PID-N, removed at the end.
#include "../loader/uid_util.h"

#include <grp.h>
#include <set>
#include <sys/mount.h>
#include <sys/statfs.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <shmkv_bpf.h>

#include "xdp_packet.h"
#include "../image_util.h"

using namespace loader_test;

namespace {

#define NEED_ROOT() NEED_ROOT_FOR("(BPF maps and programs)")

// Runs argv (output to files under dir) as root, or as uid kOther.
CmdRun run(const std::string &dir, std::vector<std::string> args, bool other = false)
{
	return run_capture(dir, std::move(args), other ? (long)kOther : -1);
}

// A bpf_dir of this test under /sys/fs/bpf (mounted if missing); the dirs of
// earlier runs that died before their TearDown (their pid is gone) go first.
std::string bpffs_dir()
{
	static int n;
	struct statfs fs;
	if (statfs("/sys/fs/bpf", &fs) != 0 || (uint32_t)fs.f_type != 0xcafe4a11u) {
		EXPECT_EQ(mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700"), 0) << strerror(errno);
	}
	for (const std::string &d : list_dir("/sys/fs/bpf")) {
		long pid = 0;
		if (sscanf(d.c_str(), "shmkv-test-%ld-", &pid) != 1 || pid <= 0 ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		std::string p = "/sys/fs/bpf/" + d;
		for (const std::string &f : list_dir(p))
			unlink((p + "/" + f).c_str());
		rmdir(p.c_str());
	}
	return "/sys/fs/bpf/shmkv-test-" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

// The keys of image "tag": generation g's set (see build()).
struct Image {
	std::string path;
	std::vector<std::string> keys;
};

std::string str_of(size_t n, char c)
{
	return std::string(n, c);
}

// Keys of every kind the export sorts: strings, every scalar and list type,
// a 60-byte key (fits) and a 61-byte one (too long), values of 256 bytes
// (fits) and 257 and 300 (too big), keys under "pfx:" and not. lo..hi picks
// the key_N range, so two generations differ in keys as well as values.
Image build(const Env &env, const std::string &tag, int lo, int hi)
{
	Image im;
	im.path = env.img_path(tag + ".shmkv");
	shmkv_test::Builder b;
	auto add = [&](const std::string &k, int err) {
		EXPECT_EQ(err, 0) << k << ": " << b.error();
		im.keys.push_back(k);
	};
	for (int i = lo; i < hi; i++)
		add("key_" + std::to_string(i), b.str("key_" + std::to_string(i),
						      tag + ":val_" + std::to_string(i) +
							      str_of((size_t)i % 7, '+')));
	for (int i = 0; i < 40; i++)
		add("pfx:" + std::to_string(i), b.str("pfx:" + std::to_string(i),
						      tag + ":p" + std::to_string(i)));
	add("num", b.i64("num", tag.size() * 1000 + 7));
	add("flt", shmkv_builder_add_f64(b, "flt", 3, 2.5 + (double)tag.size()));
	add("flag", shmkv_builder_add_bool(b, "flag", 4, 1));
	const double vec[3] = {1.5, -2.0, (double)tag.size()};
	add("vec", shmkv_builder_add_f64list(b, "vec", 3, vec, 3));
	const unsigned char raw[5] = {0, 1, 2, '\n', 255};
	add("raw", shmkv_builder_add_bytes(b, "raw", 3, raw, sizeof raw));
	add(str_of(60, 'M'), b.str(str_of(60, 'M'), tag + ":sixty"));
	add(str_of(61, 'L'), b.str(str_of(61, 'L'), tag + ":too long"));
	add("pfx:" + str_of(60, 'L'), b.str("pfx:" + str_of(60, 'L'), tag + ":too long"));
	add("edge256", b.str("edge256", tag + str_of(256 - tag.size(), 'e')));
	add("edge257", b.str("edge257", tag + str_of(257 - tag.size(), 'e')));
	add("big", b.str("big", tag + str_of(300, 'b')));
	add("pfx:big", b.str("pfx:big", tag + str_of(300, 'b')));
	add("empty", b.str("empty", ""));
	EXPECT_EQ(b.finish(im.path), 0) << b.error();
	return im;
}

// The example program, loaded against a pinned table (the table it holds
// stays its table: new generations must reach it through the slot).
class Prog {
public:
	explicit Prog(const std::string &pin)
	{
		const char *obj = getenv("SHMKV_XDP_OBJ");
		if (!obj || !*obj) {
			ADD_FAILURE() << "SHMKV_XDP_OBJ is not set (meson sets it)";
			return;
		}
		int outer = bpf_obj_get(pin.c_str());
		if (outer < 0) {
			ADD_FAILURE() << pin << ": " << strerror(errno);
			return;
		}
		o_ = bpf_object__open_file(obj, nullptr);
		if (!o_) {
			ADD_FAILURE() << obj << ": " << strerror(errno);
			close(outer);
			return;
		}
		bpf_map *m = bpf_object__find_map_by_name(o_, "table");
		EXPECT_TRUE(m && bpf_map__reuse_fd(m, outer) == 0);
		close(outer); // reuse_fd took its own copy
		bpf_program *p = bpf_object__find_program_by_name(o_, "shmkv_xdp_get");
		static char log[1 << 16];
		if (p)
			bpf_program__set_log_buf(p, log, sizeof log);
		if (!p || bpf_object__load(o_) != 0) {
			ADD_FAILURE() << "loading " << obj << ": " << strerror(errno) << "\n" << log;
			return;
		}
		fd_ = bpf_program__fd(p);
	}
	~Prog() { bpf_object__close(o_); }
	Prog(const Prog &) = delete;
	Prog &operator=(const Prog &) = delete;
	bool ok() const { return fd_ >= 0; }

	// "HIT <bytes>", "MISS", or "BAD ..." for a malformed reply.
	std::string ask(const std::string &key)
	{
		unsigned char pkt[XDP_PACKET_MAX], out[XDP_PACKET_MAX];
		size_t n = xdp_packet_get(pkt, sizeof pkt, key.data(), key.size());
		EXPECT_GT(n, 0u);
		LIBBPF_OPTS(bpf_test_run_opts, t, .data_in = pkt, .data_out = out,
			    .data_size_in = (uint32_t)n, .data_size_out = sizeof out, .repeat = 1);
		int err = bpf_prog_test_run_opts(fd_, &t);
		if (err)
			return std::string("BAD test_run: ") + strerror(-err);
		const unsigned char *v = nullptr;
		size_t vl = 0;
		int r = xdp_packet_reply(out, t.data_size_out, t.retval, &v, &vl);
		if (r < 0)
			return "BAD reply, action " + std::to_string(t.retval);
		return r ? "HIT " + std::string((const char *)v, vl) : "MISS";
	}

private:
	bpf_object *o_ = nullptr;
	int fd_ = -1;
};

// A reader attached to cache, as any client attaches.
shmkv *reader(const std::string &root, const std::string &cache)
{
	int err = 0;
	std::string why;
	shmkv *db = attach(root, cache, 0, &err, &why);
	EXPECT_NE(db, nullptr) << cache << ": " << why;
	return db;
}

// What the program must answer for key, from the user-space reader: the
// value's bytes when the key is there and fits the export, else MISS.
std::string expected(shmkv *db, const std::string &key, const std::string &prefix,
		     size_t max_value)
{
	shmkv_value v;
	if (shmkv_get(db, key.data(), key.size(), &v) != 0)
		return "MISS";
	if (key.compare(0, prefix.size(), prefix) != 0 || key.size() > SHMKV_BPF_KEY_MAX ||
	    v.size > max_value)
		return "MISS";
	return "HIT " + std::string((const char *)v.data, v.size);
}

class Bpf : public ::testing::Test {
protected:
	void SetUp() override
	{
		if (geteuid() != 0)
			return;
		dir_ = bpffs_dir();
		conf_ = env_.base() + "/loader.conf";
		std::string text = "[loader]\nbpf_dir = " + dir_ +
				   "\n[cache cfg]\nbpf = yes\nbpf_prefix = pfx:\n"
				   "bpf_max_value = 256\n";
		ASSERT_TRUE(shmkv_test::write_file(conf_, text));
		loader_ = std::make_unique<Loader>(
			env_, std::vector<std::string>{"--memory", "shm", "--config", conf_});
		ASSERT_TRUE(loader_->start());
	}
	void TearDown() override
	{
		loader_.reset();
		if (!dir_.empty()) {
			for (const std::string &n : list_dir(dir_))
				unlink((dir_ + "/" + n).c_str());
			rmdir(dir_.c_str());
		}
	}

	CmdRun shmctl(std::vector<std::string> args, bool other = false)
	{
		return loader_test::shmctl(env_, std::move(args), 60000, other ? (long)kOther : -1);
	}
	Json bpf_status(const std::string &cache)
	{
		CmdRun r = shmctl({"-j", "bpf", "status", cache});
		Json j;
		EXPECT_EQ(r.rc, 0) << r.out << r.err;
		EXPECT_TRUE(parse_json(r.out, &j)) << r.out;
		return j["caches"].arr.size() == 1 ? j["caches"].arr[0] : Json();
	}
	// Waits until cache's export holds generation gen (BPF follows the
	// user-space publish, right after it).
	Json wait_exported(const std::string &cache, uint64_t gen)
	{
		Json s;
		bool ok = wait_until(
			[&] {
				s = bpf_status(cache);
				return s["generation"].u64() == gen || !s["error"].is_null();
			},
			30000, 20);
		EXPECT_TRUE(ok && s["generation"].u64() == gen)
			<< "export of " << cache << " gen " << gen << ": " << s["error"].s();
		return s;
	}
	// Every key of every image, and some that are in none, asked of prog and
	// checked against the reader on the same generation.
	void check_all(Prog &prog, const std::string &cache, const std::string &prefix,
		       const std::vector<const Image *> &images, uint64_t gen, size_t *hits)
	{
		shmkv *db = reader(env_.root(), cache);
		ASSERT_NE(db, nullptr);
		ASSERT_EQ(shmkv_generation(db), gen) << "the reader serves another generation";
		std::set<std::string> keys = {"absent", "key_", "pfx:", "", "pfx", "key_99999"};
		for (const Image *im : images)
			keys.insert(im->keys.begin(), im->keys.end());
		*hits = 0;
		for (const std::string &k : keys) {
			std::string want = expected(db, k, prefix, SHMKV_BPF_DEFAULT_VALUE_MAX);
			std::string got = prog.ask(k);
			EXPECT_EQ(got, want) << "cache " << cache << " key \"" << k << "\" gen " << gen;
			*hits += want != "MISS";
		}
		shmkv_close(db);
	}

	Env env_;
	std::string dir_, conf_;
	std::unique_ptr<Loader> loader_;
};

TEST_F(Bpf, ExportAnswersLikeTheReaderAndSwapsGenerations)
{
	NEED_ROOT();
	Image g1 = build(env_, "one", 0, 300), g2 = build(env_, "second", 150, 420);
	ASSERT_TRUE(loader_->load("sc", g1.path).ok());
	CmdRun r = shmctl({"-j", "bpf", "export", "sc"});
	ASSERT_EQ(r.rc, 0) << r.out << r.err;
	Json j;
	ASSERT_TRUE(parse_json(r.out, &j)) << r.out;
	EXPECT_EQ(j["generation"].u64(), 1u);
	EXPECT_EQ(j["pin"].s(), dir_ + "/sc");
	// 61-byte key and "pfx:" + 60: too long; edge257, big, pfx:big: too big
	EXPECT_EQ(j["skipped.key_too_long"].u64(), 2u);
	EXPECT_EQ(j["skipped.value_too_big"].u64(), 3u);
	EXPECT_EQ(j["skipped.not_under_prefix"].u64(), 0u);
	EXPECT_EQ(j["entries"].u64(), g1.keys.size() - 5);
	EXPECT_EQ(j["value_size"].u64(), SHMKV_BPF_VALUE_SIZE(256));

	Prog prog(dir_ + "/sc");
	ASSERT_TRUE(prog.ok());
	size_t hits = 0;
	check_all(prog, "sc", "", {&g1, &g2}, 1, &hits);
	EXPECT_EQ(hits, g1.keys.size() - 5);
	EXPECT_EQ(prog.ask("num").substr(0, 4), "HIT ");

	// a new generation: readers first, then the same loaded program sees it
	ASSERT_TRUE(loader_->load("sc", g2.path).ok());
	Json s = wait_exported("sc", 2);
	EXPECT_TRUE(s["current"].truthy());
	check_all(prog, "sc", "", {&g1, &g2}, 2, &hits);
	EXPECT_EQ(hits, g2.keys.size() - 5);
	EXPECT_EQ(prog.ask("key_0"), "MISS");                  // gone in g2
	EXPECT_EQ(prog.ask("key_400").substr(0, 10), "HIT second"); // new in g2

	// rollback is a publish too
	ASSERT_TRUE(loader_->req({"rollback", "sc"}).ok());
	wait_exported("sc", 3);
	check_all(prog, "sc", "", {&g1, &g2}, 3, &hits);
	EXPECT_EQ(prog.ask("key_0").substr(0, 7), "HIT one");

	// cache status shows the export too
	Json st = loader_->status("sc");
	EXPECT_EQ(st["bpf.generation"].u64(), 3u) << st["bpf"].kind;
	EXPECT_TRUE(st["bpf.error"].is_null());

	// a restarted loader goes on exporting what shmctl asked (ROOT/sc.bpf)
	EXPECT_EQ(loader_->stop(), 0);
	ASSERT_TRUE(loader_->start());
	s = wait_exported("sc", 3);
	EXPECT_EQ(s["requested_by"].s(), "shmctl");
	ASSERT_TRUE(loader_->load("sc", g2.path).ok());
	wait_exported("sc", 4);
	check_all(prog, "sc", "", {&g1, &g2}, 4, &hits);
	EXPECT_EQ(hits, g2.keys.size() - 5);

	// drop unpins, and forgets the request
	ASSERT_TRUE(loader_->req({"drop", "sc"}).ok());
	struct stat sb;
	EXPECT_NE(lstat((dir_ + "/sc").c_str(), &sb), 0);
	EXPECT_NE(lstat((env_.root() + "/sc.bpf").c_str(), &sb), 0);
	EXPECT_EQ(prog.ask("key_400").substr(0, 10), "HIT second"); // it holds the table
}

// A generation with changes is exported as readers see it: the base read
// through its overlay (loader/README.md, "Writes").
TEST_F(Bpf, ChangesAreExportedToo)
{
	NEED_ROOT();
	Image g1 = build(env_, "one", 0, 300);
	ASSERT_TRUE(loader_->load("sc", g1.path).ok());
	CmdRun r = shmctl({"-j", "bpf", "export", "sc"});
	ASSERT_EQ(r.rc, 0) << r.out << r.err;
	Prog prog(dir_ + "/sc");
	ASSERT_TRUE(prog.ok());
	ASSERT_EQ(shmctl({"cache", "set", "sc", "key_5", "changed"}).rc, 0);
	ASSERT_EQ(shmctl({"cache", "remove", "sc", "key_7"}).rc, 0);
	CmdRun last = shmctl({"-j", "cache", "set", "sc", "newkey", "fresh"});
	ASSERT_EQ(last.rc, 0) << last.err;
	Json j;
	ASSERT_TRUE(parse_json(last.out, &j)) << last.out;
	uint64_t gen = j["generation"].u64();
	wait_exported("sc", gen);
	size_t hits = 0;
	check_all(prog, "sc", "", {&g1}, gen, &hits);
	EXPECT_EQ(prog.ask("key_5").substr(0, 11), "HIT changed");
	EXPECT_EQ(prog.ask("key_7"), "MISS");
	EXPECT_EQ(prog.ask("newkey").substr(0, 9), "HIT fresh");
	// a compaction and a rollback are publishes too
	ASSERT_TRUE(loader_->req({"compact", "sc"}).ok());
	wait_exported("sc", gen + 1);
	check_all(prog, "sc", "", {&g1}, gen + 1, &hits);
	EXPECT_EQ(prog.ask("newkey").substr(0, 9), "HIT fresh");
	ASSERT_TRUE(loader_->req({"rollback", "sc"}).ok());
	wait_exported("sc", gen + 2);
	check_all(prog, "sc", "", {&g1}, gen + 2, &hits);
	EXPECT_EQ(prog.ask("key_7"), "MISS");
}

TEST_F(Bpf, ConfigExportsUnderAPrefix)
{
	NEED_ROOT();
	Image g1 = build(env_, "one", 0, 100), g2 = build(env_, "second", 50, 120);
	ASSERT_TRUE(loader_->load("cfg", g1.path).ok());
	Json s = wait_exported("cfg", 1);
	EXPECT_EQ(s["requested_by"].s(), "config");
	EXPECT_EQ(s["prefix"].s(), "pfx:");
	EXPECT_EQ(s["entries"].u64(), 40u); // pfx:0..39
	EXPECT_EQ(s["skipped.key_too_long"].u64(), 1u);
	EXPECT_EQ(s["skipped.value_too_big"].u64(), 1u);
	EXPECT_EQ(s["skipped.not_under_prefix"].u64(), g1.keys.size() - 42);
	Prog prog(dir_ + "/cfg");
	ASSERT_TRUE(prog.ok());
	size_t hits = 0;
	check_all(prog, "cfg", "pfx:", {&g1}, 1, &hits);
	EXPECT_EQ(hits, 40u);
	EXPECT_EQ(prog.ask("key_1"), "MISS"); // in the cache, outside the prefix
	ASSERT_TRUE(loader_->load("cfg", g2.path).ok());
	wait_exported("cfg", 2);
	check_all(prog, "cfg", "pfx:", {&g1, &g2}, 2, &hits);
	EXPECT_EQ(prog.ask("pfx:3"), "HIT second:p3");
}

TEST_F(Bpf, FailedExportKeepsThePreviousTable)
{
	NEED_ROOT();
	Image g1 = build(env_, "one", 0, 50), g2 = build(env_, "second", 0, 50);
	ASSERT_TRUE(loader_->load("sc", g1.path).ok());
	ASSERT_EQ(shmctl({"bpf", "export", "sc"}).rc, 0);
	Prog prog(dir_ + "/sc");
	ASSERT_TRUE(prog.ok());
	ASSERT_EQ(prog.ask("key_1"), "HIT one:val_1+");
	// a pin directory others can write is refused: the next export fails
	ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);
	ASSERT_TRUE(loader_->load("sc", g2.path).ok()); // readers get it regardless
	Json s;
	ASSERT_TRUE(wait_until(
		[&] {
			s = bpf_status("sc");
			return !s["error"].is_null();
		},
		30000, 20));
	EXPECT_NE(s["error"].s().find("refused"), std::string::npos) << s["error"].s();
	EXPECT_EQ(s["generation"].u64(), 1u);
	EXPECT_FALSE(s["current"].truthy());
	EXPECT_TRUE(contains_ci(loader_->status("sc")["bpf.error"].s(), "writable by no one"));
	EXPECT_EQ(log_lines(env_.log(), {"bpf export failed cache=sc gen=2"}).size(), 1u);
	EXPECT_EQ(prog.ask("key_1"), "HIT one:val_1+"); // still the previous generation
	// fixed: export again by hand
	ASSERT_EQ(chmod(dir_.c_str(), 0700), 0);
	CmdRun r = shmctl({"bpf", "export", "sc"});
	ASSERT_EQ(r.rc, 0) << r.err;
	s = bpf_status("sc");
	EXPECT_TRUE(s["current"].truthy());
	EXPECT_TRUE(s["error"].is_null());
	EXPECT_EQ(prog.ask("key_1"), "HIT second:val_1+");
}

TEST_F(Bpf, MaxValueUnexportAndErrors)
{
	NEED_ROOT();
	Image g1 = build(env_, "one", 0, 50);
	ASSERT_TRUE(loader_->load("sc", g1.path).ok());
	CmdRun r = shmctl({"-j", "bpf", "export", "--max-value", "16", "sc"});
	ASSERT_EQ(r.rc, 0) << r.err;
	Json j;
	ASSERT_TRUE(parse_json(r.out, &j));
	EXPECT_EQ(j["value_size"].u64(), SHMKV_BPF_VALUE_SIZE(16));
	// values of more than 16 bytes: "one:val_N+++" of 9..17 bytes, and the rest
	shmkv *db = reader(env_.root(), "sc");
	ASSERT_NE(db, nullptr);
	uint64_t big = 0, tl = 0;
	for (const std::string &k : g1.keys) {
		shmkv_value v;
		ASSERT_EQ(shmkv_get(db, k.data(), k.size(), &v), 0);
		if (k.size() > SHMKV_BPF_KEY_MAX)
			tl++;
		else if (v.size > 16)
			big++;
	}
	shmkv_close(db);
	EXPECT_EQ(j["skipped.value_too_big"].u64(), big);
	EXPECT_EQ(j["skipped.key_too_long"].u64(), tl);
	// the example is built for 256-byte values: its loader says so
	const char *tool = getenv("SHMKV_XDP_GET");
	ASSERT_TRUE(tool && *tool);
	r = run(env_.base(), {tool, "--pin", dir_ + "/sc", "query", "sc", "key_1"});
	EXPECT_EQ(r.rc, 2);
	EXPECT_NE(r.err.find("at most 16 bytes"), std::string::npos) << r.err;
	EXPECT_NE(r.err.find("--max-value 256"), std::string::npos) << r.err;
	// back to the default: the tool answers like the reader
	ASSERT_EQ(shmctl({"bpf", "export", "sc"}).rc, 0);
	r = run(env_.base(), {tool, "--pin", dir_ + "/sc", "query", "sc", "key_1"});
	EXPECT_EQ(r.rc, 0) << r.err;
	EXPECT_EQ(r.out, "HIT one:val_1+\n");
	r = run(env_.base(), {tool, "--pin", dir_ + "/sc", "query", "sc", "nope"});
	EXPECT_EQ(r.rc, 1);
	EXPECT_EQ(r.out, "MISS\n");

	// another uid: the loader refuses export (the socket opened to it here),
	// and BPF itself refuses the tool, each with a reason
	ASSERT_EQ(chmod((env_.root() + "/control.sock").c_str(), 0666), 0);
	r = shmctl({"bpf", "export", "sc"}, true);
	EXPECT_EQ(r.rc, 2);
	EXPECT_NE(r.err.find("bpf_export is for root and the loader's user"), std::string::npos)
		<< r.err;
	r = shmctl({"bpf", "unexport", "sc"}, true);
	EXPECT_EQ(r.rc, 2);
	r = shmctl({"-j", "bpf", "status", "sc"}, true); // status is for anyone
	EXPECT_EQ(r.rc, 0) << r.err;
	r = run(env_.base(), {tool, "--pin", dir_ + "/sc", "query", "sc", "key_1"}, true);
	EXPECT_EQ(r.rc, 2);
	EXPECT_NE(r.err.find("needs root"), std::string::npos) << r.err;

	// bad requests
	r = shmctl({"bpf", "export", "--max-value", "5000", "sc"});
	EXPECT_EQ(r.rc, 2);
	EXPECT_NE(r.err.find("0..4096"), std::string::npos) << r.err;
	r = shmctl({"bpf", "export", "nosuch"});
	EXPECT_EQ(r.rc, 1) << r.err;
	ASSERT_TRUE(loader_->load("a.b", g1.path).ok());
	r = shmctl({"bpf", "export", "a.b"});
	EXPECT_EQ(r.rc, 2);
	EXPECT_NE(r.err.find("'.'"), std::string::npos) << r.err;

	// unexport: the pin goes; a program that holds the table keeps it
	Prog prog(dir_ + "/sc");
	ASSERT_TRUE(prog.ok());
	r = shmctl({"-j", "bpf", "unexport", "sc"});
	ASSERT_EQ(r.rc, 0) << r.err;
	struct stat st;
	EXPECT_NE(lstat((dir_ + "/sc").c_str(), &st), 0);
	EXPECT_FALSE(bpf_status("sc")["exported"].truthy());
	EXPECT_EQ(prog.ask("key_1"), "HIT one:val_1+");
	// and a new generation is not exported any more
	Image g2 = build(env_, "second", 0, 10);
	ASSERT_TRUE(loader_->load("sc", g2.path).ok());
	// a grace period for a wrong export to show (nothing to wait for: a load
	// of a not-exported cache has no BPF event); on a slow machine it can
	// only let a bug through, never fail a good run
	sleep_ms(200);
	EXPECT_NE(lstat((dir_ + "/sc").c_str(), &st), 0);
}

} // namespace

namespace {

// An image with expiring entries (composed by image_util.h: inline and OUT
// records) exports every other entry: a BPF map cannot drop an entry at its
// expiry, so those are skipped (`skipped.expiring`) and the program misses
// them; every other key answers like the reader.
TEST_F(Bpf, ExportsAllButExpiringEntries)
{
	NEED_ROOT();
	std::vector<testimg::Rec> recs;
	for (int i = 0; i < 20; i++)
		recs.push_back({"k" + std::to_string(i), SHMKV_TYPE_STRING, "val" + std::to_string(i),
				0, i % 4 == 1});
	recs.push_back({"exp_in", SHMKV_TYPE_STRING, "soon", 1900000000, false});
	recs.push_back({"exp_out", SHMKV_TYPE_STRING, std::string(100, 'x'), 1900000000, true});
	std::string path = env_.img_path("timed.shmkv");
	ASSERT_TRUE(shmkv_test::write_file(path, testimg::compose(recs).bytes));
	Json l = loader_->load("timed", path);
	ASSERT_TRUE(l.ok()) << l["error"].s();
	CmdRun r = shmctl({"-j", "bpf", "export", "timed"});
	ASSERT_EQ(r.rc, 0) << r.out << r.err;
	Json j;
	ASSERT_TRUE(parse_json(r.out, &j)) << r.out;
	EXPECT_EQ(j["skipped.expiring"].u64(), 2u);
	EXPECT_EQ(j["entries"].u64(), recs.size() - 2);
	Prog prog(dir_ + "/timed");
	ASSERT_TRUE(prog.ok());
	shmkv *db = reader(env_.root(), "timed");
	ASSERT_NE(db, nullptr);
	for (const testimg::Rec &rec : recs) {
		std::string got = prog.ask(rec.key);
		if (rec.expires)
			EXPECT_EQ(got, "MISS") << rec.key;
		else
			EXPECT_EQ(got, expected(db, rec.key, "", SHMKV_BPF_DEFAULT_VALUE_MAX)) << rec.key;
	}
	shmkv_close(db);
}

} // namespace
