// cli_test: shmctl end to end (the binary named by $SHMCTL, set by meson).
//
//   build -> get (plain and -j) -> inspect -j -> verify (0; 1 on damaged
//   copies) -> dump -> build -> byte-identical image, for JSONL and TSV input;
//   exit codes: 1 for a missing key, 2 for usage and I/O errors; build errors
//   name file:line and leave no output; --on-duplicate; -j errors as JSON;
//   expiry: get/inspect/dump show it, dump -> build the same bytes; a format 1
//   image refused by every verb with the upgrade named, upgraded, rebuilt.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "json_util.h"
#include "test_util.h"

using namespace shmkv_test;

namespace {

// ---- running shmctl (test_util.h's runner) -------------------------------

class Cli : public ::testing::Test {
protected:
	// bounded: a shmctl that hangs (a FIFO opened without O_NONBLOCK) is
	// killed and reported
	static constexpr unsigned kDeadlineMs = 30000;
	TempDir dir;

	void SetUp() override { ASSERT_FALSE(shmctl_path().empty()) << "SHMCTL is not set (meson sets it)"; }

	// Runs shmctl with args; env_set entries are "NAME=value" (or "NAME" to unset).
	Proc shmctl(const std::vector<std::string> &args, const std::vector<std::string> &env_set = {})
	{
		RunIo io;
		io.env = env_set;
		return run_shmctl(args, io, kDeadlineMs, dir.path());
	}
};

const char *kEpoch = "SOURCE_DATE_EPOCH=1700000000";

const std::string kInput =
	"{\"key\": \"greeting\", \"value\": \"hello world\"}\n"
	"{\"key\": \"answer\", \"value\": 42}\n"
	"{\"key\": \"pi\", \"value\": 3.141592653589793}\n"
	"{\"key\": \"yes\", \"value\": true}\n"
	"{\"key\": \"empty\", \"value\": \"\"}\n"
	"{\"key\": \"unicode\", \"value\": \"Grüße 世界 🌍\"}\n"
	"{\"key\": \"vec\", \"value\": [0.5, -1, 3.25]}\n"
	"{\"key\": \"tags\", \"value\": [\"a\", \"\", \"b,c\"]}\n"
	"{\"key\": \"blob\", \"type\": \"bytes\", \"value\": \"AAECAwT/\"}\n"
	"{\"key\": \"ints\", \"type\": \"i64list\", \"value\": [1, -9223372036854775808]}\n"
	"{\"key\": \"dbl\", \"type\": \"f64list\", \"value\": [\"-inf\", \"nan:0x7ff8000000000123\", 1e-300]}\n"
	"{\"key\": \"f32nan\", \"type\": \"f32list\", \"value\": [\"nan:0x7fa00001\", \"inf\"]}\n"
	"{\"key\": \"nanval\", \"type\": \"f64\", \"value\": \"nan:0xfff8000000000042\"}\n"
	"{\"key\": \"nolist\", \"type\": \"strlist\", \"value\": []}\n"
	"{\"key_base64\": \"AP8B\", \"value\": \"binary key\"}\n"
	"{\"key\": \"shared1\", \"value\": \"a value long enough to be worth sharing, twice over\"}\n"
	"{\"key\": \"shared2\", \"value\": \"a value long enough to be worth sharing, twice over\"}\n"
	"{\"key\": \"quote\\\"\\n\\t\", \"value\": \"esc \\\\ \\\" \\u0001\"}\n";
const int kInputEntries = 18;

TEST_F(Cli, BuildGetInspectVerifyDumpRebuild)
{
	std::string in = dir.file("in.jsonl"), img = dir.file("img.shmkv");
	ASSERT_TRUE(write_file(in, kInput));
	Proc r = shmctl({"image", "build", "-o", img, in}, {kEpoch});
	ASSERT_EQ(r.rc, 0) << show(r);
	ASSERT_TRUE(file_exists(img));

	// the image is what the reader expects
	{
		Db db = open_db(img, SHMKV_OPEN_DEEP);
		ASSERT_TRUE(db);
		EXPECT_EQ(db.hdr()->entry_count, (uint64_t)kInputEntries);
		EXPECT_EQ(db.hdr()->created_unix, 1700000000);
		const char *s = nullptr;
		size_t n = 0;
		ASSERT_EQ(shmkv_get_str(db, "\0\xff\x01", 3, &s, &n), 0);
		EXPECT_EQ(std::string(s, n), "binary key");
	}

	// get, plain
	r = shmctl({"image", "get", img, "greeting"});
	EXPECT_EQ(r.rc, 0) << show(r);
	EXPECT_NE(r.out.find("hello world"), std::string::npos) << show(r);
	r = shmctl({"image", "get", img, "answer"});
	EXPECT_EQ(r.rc, 0) << show(r);
	EXPECT_NE(r.out.find("42"), std::string::npos) << show(r);

	// get, JSON
	r = shmctl({"-j", "image", "get", img, "greeting"});
	ASSERT_EQ(r.rc, 0) << show(r);
	Json j;
	ASSERT_TRUE(parse_json(r.out, &j)) << show(r);
	ASSERT_NE(j.get("value"), nullptr) << show(r);
	EXPECT_EQ(j.get("value")->str, "hello world");
	ASSERT_NE(j.get("type"), nullptr) << show(r);
	EXPECT_EQ(j.get("type")->str, "string");
	r = shmctl({"-j", "image", "get", img, "answer"});
	ASSERT_EQ(r.rc, 0) << show(r);
	j = Json();
	ASSERT_TRUE(parse_json(r.out, &j)) << show(r);
	ASSERT_NE(j.get("value"), nullptr) << show(r);
	EXPECT_EQ(j.get("value")->kind, Json::NUM);
	EXPECT_EQ(j.get("value")->num, 42);
	EXPECT_EQ(j.get("type")->str, "i64");
	r = shmctl({"-j", "image", "get", img, "tags"});
	ASSERT_EQ(r.rc, 0) << show(r);
	j = Json();
	ASSERT_TRUE(parse_json(r.out, &j)) << show(r);
	ASSERT_NE(j.get("value"), nullptr);
	ASSERT_EQ(j.get("value")->arr.size(), 3u) << show(r);
	EXPECT_EQ(j.get("value")->arr[2].str, "b,c");
	r = shmctl({"-j", "image", "get", img, "unicode"});
	ASSERT_EQ(r.rc, 0) << show(r);
	j = Json();
	ASSERT_TRUE(parse_json(r.out, &j)) << show(r);
	EXPECT_EQ(j.get("value")->str, "Grüße 世界 🌍");

	// inspect -j
	r = shmctl({"-j", "image", "inspect", img});
	ASSERT_EQ(r.rc, 0) << show(r);
	j = Json();
	ASSERT_TRUE(parse_json(r.out, &j)) << show(r);
	ASSERT_NE(j.get("entries"), nullptr) << show(r);
	EXPECT_EQ(j.get("entries")->num, kInputEntries);
	ASSERT_NE(j.get("file_size"), nullptr) << show(r);
	EXPECT_EQ(j.get("file_size")->num, (double)read_file(img).size());
	ASSERT_NE(j.get("created"), nullptr) << show(r);
	EXPECT_EQ(j.get("created")->num, 1700000000);
	r = shmctl({"image", "inspect", img});
	EXPECT_EQ(r.rc, 0) << show(r);
	EXPECT_NE(r.out.find(std::to_string(kInputEntries)), std::string::npos) << show(r);

	// verify
	r = shmctl({"image", "verify", img});
	EXPECT_EQ(r.rc, 0) << show(r);
	r = shmctl({"-j", "image", "verify", img});
	EXPECT_EQ(r.rc, 0) << show(r);
	j = Json();
	EXPECT_TRUE(parse_json(r.out, &j)) << show(r);

	// dump -> build -> the same bytes (the meta line carries seed, time, name...)
	r = shmctl({"image", "dump", img});
	ASSERT_EQ(r.rc, 0) << show(r);
	std::string dump = dir.file("dump.jsonl"), img2 = dir.file("img2.shmkv");
	ASSERT_TRUE(write_file(dump, r.out));
	size_t lines = 0;
	for (char c : r.out)
		lines += c == '\n';
	EXPECT_EQ(lines, (size_t)kInputEntries + 1) << "a meta line, then one line per entry";
	j = Json();
	EXPECT_TRUE(parse_json(r.out.substr(0, r.out.find('\n')), &j)) << "meta line is JSON";
	EXPECT_EQ(j.kind, Json::OBJ);
	r = shmctl({"image", "build", "-o", img2, dump}, {"SOURCE_DATE_EPOCH"});
	ASSERT_EQ(r.rc, 0) << show(r);
	EXPECT_TRUE(read_file(img) == read_file(img2)) << "dump -> build is not byte-identical";
	// and dumping that gives the same dump
	r = shmctl({"image", "dump", img2});
	ASSERT_EQ(r.rc, 0) << show(r);
	EXPECT_EQ(r.out, read_file(dump));
}

TEST_F(Cli, TsvDumpRebuild)
{
	std::string in = dir.file("in.tsv"), img = dir.file("t.shmkv"), img2 = dir.file("t2.shmkv");
	ASSERT_TRUE(write_file(in, "a\t1,2,3\nb\t\nc\\tkey\t-9223372036854775808\n"));
	Proc r = shmctl({"image", "build", "-o", img, "--format", "tsv", "--type", "i64list", in},
		       {kEpoch});
	ASSERT_EQ(r.rc, 0) << show(r);
	r = shmctl({"-j", "image", "get", img, "a"});
	ASSERT_EQ(r.rc, 0) << show(r);
	Json j;
	ASSERT_TRUE(parse_json(r.out, &j)) << show(r);
	ASSERT_NE(j.get("value"), nullptr);
	EXPECT_EQ(j.get("value")->arr.size(), 3u) << show(r);
	EXPECT_EQ(j.get("type")->str, "i64list");
	r = shmctl({"image", "get", img, "c\tkey"});
	EXPECT_EQ(r.rc, 0) << show(r);
	r = shmctl({"image", "dump", img});
	ASSERT_EQ(r.rc, 0) << show(r);
	std::string dump = dir.file("dump.jsonl");
	ASSERT_TRUE(write_file(dump, r.out));
	r = shmctl({"image", "build", "-o", img2, dump}, {"SOURCE_DATE_EPOCH"});
	ASSERT_EQ(r.rc, 0) << show(r);
	EXPECT_TRUE(read_file(img) == read_file(img2)) << "dump -> build is not byte-identical";
}

// Format 1 is retired (lib/FORMAT.md §15): every verb that reads an image
// refuses one with the reader's advice, build refuses --format 1 and a dump
// whose meta line says format 1, and image upgrade converts it into an image
// that dumps and builds again byte for byte.
TEST_F(Cli, FormatOneIsRetired)
{
	const std::string advice =
		"image format version 1 is retired: convert it with 'shmctl image upgrade OLD -o NEW'";
	std::string v1 = dir.file("v1.shmkv"), up = dir.file("up.shmkv"), again = dir.file("again.shmkv"),
		    dump = dir.file("dump.jsonl");
	ASSERT_TRUE(write_file(v1, read_file(std::string(SHMKV_SOURCE_ROOT) + "/tests/vectors/v1/base.img")));
	for (const std::vector<std::string> &args : std::vector<std::vector<std::string>>{
		     {"image", "inspect", v1}, {"image", "dump", v1}, {"image", "get", v1, "s"}}) {
		Proc r = shmctl(args);
		EXPECT_EQ(r.rc, 2) << show(r);
		EXPECT_NE(r.err.find(v1 + ": " + advice), std::string::npos) << show(r);
	}
	Proc r = shmctl({"image", "verify", v1});
	EXPECT_EQ(r.rc, 1) << show(r);
	EXPECT_NE(r.err.find(advice), std::string::npos) << show(r);
	r = shmctl({"image", "upgrade", "-o", up, v1});
	ASSERT_EQ(r.rc, 0) << show(r);
	r = shmctl({"image", "get", up, "s"});
	EXPECT_EQ(r.rc, 0) << show(r);
	EXPECT_EQ(r.out, "hello\n");
	r = shmctl({"image", "dump", up});
	ASSERT_EQ(r.rc, 0) << show(r);
	EXPECT_NE(r.out.find("\"format\": 2"), std::string::npos) << show(r);
	ASSERT_TRUE(write_file(dump, r.out));
	r = shmctl({"image", "build", "-o", again, dump}, {"SOURCE_DATE_EPOCH"});
	ASSERT_EQ(r.rc, 0) << show(r);
	EXPECT_TRUE(read_file(up) == read_file(again)) << "upgraded: dump -> build is not byte-identical";
	// build: no --format 1, no dump of format 1
	r = shmctl({"image", "build", "--format", "1", "-o", again, dump});
	EXPECT_EQ(r.rc, 2) << show(r);
	EXPECT_NE(r.err.find("format 1 is retired"), std::string::npos) << show(r);
	EXPECT_NE(r.err.find("'shmctl image upgrade OLD -o NEW'"), std::string::npos) << show(r);
	std::string text = read_file(dump);
	text.replace(text.find("\"format\": 2"), 11, "\"format\": 1");
	ASSERT_TRUE(write_file(dump, text));
	r = shmctl({"image", "build", "-o", dir.file("x.shmkv"), dump});
	EXPECT_EQ(r.rc, 2) << show(r);
	EXPECT_NE(r.err.find("dump.jsonl:1: shmkv_meta format 1: format 1 is retired"),
		  std::string::npos) << show(r);
	EXPECT_FALSE(file_exists(dir.file("x.shmkv")));
}

// Expiry: get shows it (-j member, stderr note), inspect the version and the
// expiring entries, dump carries format and "expires", and rebuilds the same
// bytes; --format takes the input's format only.
TEST_F(Cli, ExpiryDumpRebuild)
{
	std::string in = dir.file("in.tsv"), img = dir.file("t.shmkv"), img2 = dir.file("t2.shmkv");
	ASSERT_TRUE(write_file(in, "a\tx\t2030-01-31T12:00:00Z\nb\ty\t\nc\tz\t1\n"));
	Proc r = shmctl({"image", "build", "-o", img, "--format", "tsv", "--tsv-expires", in},
			{kEpoch});
	ASSERT_EQ(r.rc, 0) << show(r);
	r = shmctl({"-j", "image", "get", img, "a"});
	ASSERT_EQ(r.rc, 0) << show(r);
	Json j;
	ASSERT_TRUE(parse_json(r.out, &j)) << show(r);
	ASSERT_NE(j.get("expires"), nullptr) << show(r);
	EXPECT_EQ(j.get("expires")->num, 1896091200.0);
	r = shmctl({"image", "get", img, "a"});
	EXPECT_EQ(r.rc, 0) << show(r);
	EXPECT_EQ(r.out, "x\n");
	EXPECT_NE(r.err.find("expires 2030-01-31T12:00:00Z (1896091200)"), std::string::npos) << show(r);
	r = shmctl({"image", "get", img, "c"}); // expired in 1970
	EXPECT_EQ(r.rc, 1) << show(r);
	EXPECT_NE(r.err.find("expired"), std::string::npos) << show(r);
	r = shmctl({"image", "inspect", img});
	EXPECT_NE(r.out.find("format version    2"), std::string::npos) << show(r);
	EXPECT_NE(r.out.find("expiring          2 (1 expired now)"), std::string::npos) << show(r);
	r = shmctl({"image", "dump", img});
	ASSERT_EQ(r.rc, 0) << show(r);
	EXPECT_NE(r.out.find("\"format\": 2"), std::string::npos) << show(r);
	EXPECT_NE(r.out.find("\"expires\": 1896091200"), std::string::npos) << show(r);
	std::string dump = dir.file("dump.jsonl");
	ASSERT_TRUE(write_file(dump, r.out));
	r = shmctl({"image", "build", "-o", img2, dump}, {"SOURCE_DATE_EPOCH"});
	ASSERT_EQ(r.rc, 0) << show(r);
	EXPECT_TRUE(read_file(img) == read_file(img2)) << "dump -> build is not byte-identical";
	for (const char *f : {"2", "3"}) {
		r = shmctl({"image", "build", "-o", img2, "--format", f, dump});
		EXPECT_EQ(r.rc, 2) << show(r);
		EXPECT_NE(r.err.find("expected jsonl or tsv (the input's format; images are format 2)"),
			  std::string::npos) << show(r);
	}
}

TEST_F(Cli, VerifyFailsOnDamage)
{
	std::string in = dir.file("in.jsonl"), img = dir.file("img.shmkv");
	ASSERT_TRUE(write_file(in, kInput));
	Proc r = shmctl({"image", "build", "-o", img, in}, {kEpoch});
	ASSERT_EQ(r.rc, 0) << show(r);
	const std::string good = read_file(img);
	shmkv_image_header h;
	memcpy(&h, good.data(), sizeof h);
	struct Damage {
		const char *what;
		uint64_t pos;
	};
	const Damage damage[] = {
		{"header field", 40},
		{"index section", h.sections[0].offset + 7},
		{"entries section", h.sections[1].offset + 9},
		{"header padding", SHMKV_HEADER_USED + 1},
		{"trailing padding", good.size() - 1},
	};
	for (const Damage &d : damage) {
		SCOPED_TRACE(d.what);
		std::string bad = good, p = dir.file("bad.shmkv");
		bad[d.pos] ^= 0x04;
		ASSERT_TRUE(write_file(p, bad));
		r = shmctl({"image", "verify", p});
		EXPECT_EQ(r.rc, 1) << show(r);
		EXPECT_FALSE(r.err.empty() && r.out.empty()) << "no reason printed";
		r = shmctl({"-j", "image", "verify", p});
		EXPECT_EQ(r.rc, 1) << show(r);
	}
}

TEST_F(Cli, ExitCodes)
{
	std::string in = dir.file("in.jsonl"), img = dir.file("img.shmkv");
	ASSERT_TRUE(write_file(in, kInput));
	Proc r = shmctl({"image", "build", "-o", img, in});
	ASSERT_EQ(r.rc, 0) << show(r);
	// missing key: 1
	r = shmctl({"image", "get", img, "no such key"});
	EXPECT_EQ(r.rc, 1) << show(r);
	r = shmctl({"-j", "image", "get", img, "no such key"});
	EXPECT_EQ(r.rc, 1) << show(r);
	// usage: 2
	for (const std::vector<std::string> &args : std::vector<std::vector<std::string>>{
		     {"image", "frobnicate"},
		     {"nosuchobject", "get"},
		     {"image", "get", img},
		     {"image", "build", in},
		     {"image", "build", "-o", dir.file("x.shmkv"), "--format", "xml", in},
		     {"image", "build", "-o", dir.file("x.shmkv"), "--on-duplicate", "maybe", in},
		     {"image", "get", "--no-such-option", img, "k"},
	     }) {
		std::string cmd;
		for (const std::string &a : args)
			cmd += " " + a;
		SCOPED_TRACE(cmd);
		r = shmctl(args);
		EXPECT_EQ(r.rc, 2) << show(r);
		EXPECT_FALSE(r.err.empty()) << "usage errors explain themselves on stderr";
		r = shmctl([&] {
			std::vector<std::string> a = {"-j"};
			a.insert(a.end(), args.begin(), args.end());
			return a;
		}());
		EXPECT_EQ(r.rc, 2) << show(r);
		Json j;
		EXPECT_TRUE(parse_json(r.out, &j) && j.get("error")) << "JSON error expected: " << show(r);
	}
	EXPECT_FALSE(file_exists(dir.file("x.shmkv")));
	// I/O: 2
	r = shmctl({"image", "get", dir.file("missing.shmkv"), "k"});
	EXPECT_EQ(r.rc, 2) << show(r);
	EXPECT_NE(r.err.find("missing.shmkv"), std::string::npos) << show(r);
	r = shmctl({"image", "build", "-o", dir.file("out.shmkv"), dir.file("missing.jsonl")});
	EXPECT_EQ(r.rc, 2) << show(r);
	EXPECT_FALSE(file_exists(dir.file("out.shmkv")));
	// help is not an error
	r = shmctl({"image", "help"});
	EXPECT_EQ(r.rc, 0) << show(r);
}

TEST_F(Cli, BuildErrorsAndDuplicates)
{
	std::string in = dir.file("dup.jsonl"), img = dir.file("img.shmkv");
	ASSERT_TRUE(write_file(in, "{\"key\": \"a\", \"value\": 1}\n{\"key\": \"b\", \"value\": 2}\n"
				   "{\"key\": \"a\", \"value\": 3}\n"));
	Proc r = shmctl({"image", "build", "-o", img, in});
	EXPECT_NE(r.rc, 0) << show(r);
	EXPECT_NE(r.err.find(in + ":3"), std::string::npos) << show(r);
	EXPECT_NE(r.err.find(in + ":1"), std::string::npos) << show(r);
	EXPECT_FALSE(file_exists(img));
	r = shmctl({"-j", "image", "build", "-o", img, in});
	EXPECT_NE(r.rc, 0) << show(r);
	Json j;
	EXPECT_TRUE(parse_json(r.out, &j) && j.get("error")) << show(r);
	if (j.get("error")) {
		EXPECT_NE(j.get("error")->str.find(":3"), std::string::npos) << show(r);
	}

	for (const char *mode : {"first", "last"}) {
		SCOPED_TRACE(mode);
		r = shmctl({"image", "build", "-o", img, "--on-duplicate", mode, in});
		ASSERT_EQ(r.rc, 0) << show(r);
		r = shmctl({"-j", "image", "get", img, "a"});
		ASSERT_EQ(r.rc, 0) << show(r);
		j = Json();
		ASSERT_TRUE(parse_json(r.out, &j)) << show(r);
		ASSERT_NE(j.get("value"), nullptr);
		EXPECT_EQ(j.get("value")->num, strcmp(mode, "first") == 0 ? 1 : 3);
	}

	std::string bad = dir.file("bad.jsonl"), img2 = dir.file("img2.shmkv");
	ASSERT_TRUE(write_file(bad, "{\"key\": \"a\", \"value\": 1}\n{\"key\": \"b\", \"value\": null}\n"));
	r = shmctl({"image", "build", "-o", img2, bad});
	EXPECT_NE(r.rc, 0) << show(r);
	EXPECT_NE(r.err.find(bad + ":2"), std::string::npos) << show(r);
	EXPECT_FALSE(file_exists(img2));
	// an existing image survives a failed rebuild
	std::string before = read_file(img);
	r = shmctl({"image", "build", "-o", img, bad});
	EXPECT_NE(r.rc, 0) << show(r);
	EXPECT_TRUE(read_file(img) == before);
	EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"bad.jsonl", "dup.jsonl", "img.shmkv"}));
}

} // namespace

namespace {

// A prefix of two or more names is an error that lists them
// (it used to run the first: `cache re X` ran `readers`); a unique prefix
// and an exact name still work.
TEST_F(Cli, AmbiguousPrefixIsAnError)
{
	std::string root = dir.file("root");
	ASSERT_EQ(mkdir(root.c_str(), 0755), 0);
	for (const std::vector<std::string> &args : std::vector<std::vector<std::string>>{
		     {"cache", "re", "x"}, {"cache", "l"}, {"cache", "r", "x"}}) {
		SCOPED_TRACE(args[1]);
		std::vector<std::string> a = {"-r", root};
		a.insert(a.end(), args.begin(), args.end());
		Proc r = shmctl(a);
		EXPECT_EQ(r.rc, 2) << show(r);
		EXPECT_EQ(r.out, "") << "nothing ran";
		EXPECT_NE(r.err.find("ambiguous command '" + args[1] + "'"), std::string::npos) << show(r);
		a.insert(a.begin(), "-j");
		r = shmctl(a);
		EXPECT_EQ(r.rc, 2) << show(r);
		Json j;
		ASSERT_TRUE(parse_json(r.out, &j)) << show(r);
		EXPECT_NE(j["error"].s().find("ambiguous"), std::string::npos) << show(r);
	}
	Proc r = shmctl({"-r", root, "cache", "re", "x"});
	EXPECT_NE(r.err.find("could be readers, reload"), std::string::npos) << show(r);
	r = shmctl({"-r", root, "cache", "r", "x"});
	EXPECT_NE(r.err.find("could be readers, reload, rollback"), std::string::npos) << show(r);
	// objects too: "help" is the only object that starts with 'h'; none is
	// ambiguous today, so an unknown one is checked instead
	r = shmctl({"nosuch"});
	EXPECT_EQ(r.rc, 2) << show(r);
	EXPECT_NE(r.err.find("unknown object 'nosuch'"), std::string::npos) << show(r);

	// unique prefixes and exact names run their command
	std::string in = dir.file("in.jsonl"), img = dir.file("img.shmkv");
	ASSERT_TRUE(write_file(in, kInput));
	r = shmctl({"im", "b", "-o", img, in}, {kEpoch});
	ASSERT_EQ(r.rc, 0) << show(r);
	r = shmctl({"im", "g", img, "greeting"});
	EXPECT_EQ(r.rc, 0) << show(r);
	EXPECT_EQ(r.out, "hello world\n");
	r = shmctl({"-r", root, "cache", "rea", "x"});
	EXPECT_EQ(r.err.find("ambiguous"), std::string::npos) << show(r);
	EXPECT_NE(r.err.find("no cache"), std::string::npos) << show(r);
	r = shmctl({"-r", root, "cache", "readers", "x"});
	EXPECT_NE(r.err.find("no cache"), std::string::npos) << show(r);
}

// Image verbs on a FIFO, a directory, a device end at once with
// a clear error (they used to block forever in open() on a FIFO).
TEST_F(Cli, NonRegularFilesAreRefusedWithoutBlocking)
{
	std::string fifo = dir.file("fifo");
	ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << strerror(errno);
	struct { std::string path, kind; } files[] = {
		{fifo, "a FIFO"}, {dir.path(), "a directory"}, {"/dev/null", "a character device"}};
	for (const auto &f : files) {
		for (const std::vector<std::string> &verb : std::vector<std::vector<std::string>>{
			     {"inspect", f.path}, {"verify", f.path}, {"dump", f.path},
			     {"get", f.path, "k"}}) {
			SCOPED_TRACE(verb[0] + " " + f.path);
			std::vector<std::string> a = {"image"};
			a.insert(a.end(), verb.begin(), verb.end());
			Proc r = shmctl(a);
			EXPECT_EQ(r.rc, 2) << show(r); // not an image at all: an I/O error, not 1
			EXPECT_NE(r.err.find("not a regular file (" + f.kind + ")"), std::string::npos)
				<< show(r);
			a.insert(a.begin(), "-j");
			r = shmctl(a);
			EXPECT_EQ(r.rc, 2) << show(r);
			Json j;
			ASSERT_TRUE(parse_json(r.out, &j)) << show(r);
			EXPECT_NE(j["error"].s().find("not a regular file (" + f.kind + ")"),
				  std::string::npos) << show(r);
		}
	}
}

} // namespace
