// builder_input_test: JSONL and TSV input (shmkv_builder_add_file), its error
// messages, duplicate keys, and the atomic write of shmkv_builder_finish.
//
//   Jsonl.Valid*, Tsv.Valid*    every type, inferred and explicit, float keywords
//                               with NaN payloads, key_base64, escapes
//   Jsonl.Malformed, Tsv.Malformed   one case per class of bad input: the
//                               error names file:line and the reason
//   Duplicates.*                error naming both places (within a file,
//                               across files, through the API), FIRST, LAST
//   Atomic.*                    a failed build leaves an existing output
//                               untouched and no temporary files; a missing
//                               output directory is a clear error
#include <sys/stat.h>

#include <cinttypes>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "test_util.h"

using namespace shmkv_test;

namespace {

uint64_t f64_bits(double d)
{
	uint64_t u = 0;
	memcpy(&u, &d, 8);
	return u;
}

uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

class Input : public ::testing::Test {
protected:
	TempDir dir;
	std::string out = dir.file("out.shmkv");
	std::string msg;

	// Builds content (one file) into out. Returns the first error (add_file's,
	// else finish's) and leaves the builder's message in msg.
	int build(const std::string &name, const std::string &content, int format,
		  unsigned tsv_type = SHMKV_TYPE_STRING, shmkv_build_options o = test_options())
	{
		std::string in = dir.file(name);
		EXPECT_TRUE(write_file(in, content));
		Builder b(o);
		if (!b.ok())
			return -1;
		int err = shmkv_builder_add_file(b, in.c_str(), format, tsv_type);
		if (!err)
			err = b.finish(out);
		msg = b.error();
		return err;
	}
	int jsonl(const std::string &content, shmkv_build_options o = test_options())
	{
		return build("in.jsonl", content, SHMKV_INPUT_JSONL, 0, o);
	}
	int tsv(const std::string &content, unsigned type, shmkv_build_options o = test_options())
	{
		return build("in.tsv", content, SHMKV_INPUT_TSV, type, o);
	}
	std::string where(const std::string &name, int line)
	{
		return dir.file(name) + ":" + std::to_string(line) + ":";
	}
};

// ---- JSONL ---------------------------------------------------------------

using Jsonl = Input;

TEST_F(Jsonl, ValidInferredTypes)
{
	ASSERT_EQ(jsonl("{\"key\": \"s\", \"value\": \"text\"}\n"
			"{\"key\": \"i\", \"value\": -42}\n"
			"{\"key\": \"imax\", \"value\": 9223372036854775807}\n"
			"{\"key\": \"imin\", \"value\": -9223372036854775808}\n"
			"{\"key\": \"f\", \"value\": 1.5}\n"
			"{\"key\": \"f1\", \"value\": 1.0}\n"
			"{\"key\": \"fe\", \"value\": 2e3}\n"
			"{\"key\": \"t\", \"value\": true}\n"
			"{\"key\": \"n\", \"value\": false}\n"
			"{\"key\": \"fl\", \"value\": [1, 2.5, -3]}\n"
			"{\"key\": \"sl\", \"value\": [\"a\", \"\", \"b\"]}\n"
			"{\"key\": \"inf\", \"value\": \"inf\"}\n"
			"{\"value\": \"order does not matter\", \"key\": \"rev\"}\n"
			"  {  \"key\" : \"ws\" ,\t\"value\" : 1 }  \n"
			"{\"key\": \"esc\\u00e9\\n\", \"value\": \"\\\"q\\\" \\\\ \\ud83d\\ude00 \\u0000\"}"),
		  0)
		<< msg;
	Db db = open_db(out, SHMKV_OPEN_DEEP);
	ASSERT_TRUE(db);
	EXPECT_EQ(db.hdr()->entry_count, 15u);
	shmkv_value v;
	auto type_of = [&](const std::string &k) {
		int err = shmkv_get(db, k.data(), k.size(), &v);
		EXPECT_EQ(err, 0) << k;
		return err ? 0u : v.type;
	};
	EXPECT_EQ(type_of("s"), (unsigned)SHMKV_TYPE_STRING);
	EXPECT_EQ(sv(v.data, v.size), "text");
	EXPECT_EQ(type_of("i"), (unsigned)SHMKV_TYPE_I64);
	int64_t i = 0;
	ASSERT_EQ(shmkv_get_i64(db, "i", 1, &i), 0);
	EXPECT_EQ(i, -42);
	ASSERT_EQ(shmkv_get_i64(db, "imax", 4, &i), 0);
	EXPECT_EQ(i, INT64_MAX);
	ASSERT_EQ(shmkv_get_i64(db, "imin", 4, &i), 0);
	EXPECT_EQ(i, INT64_MIN);
	double d = 0;
	ASSERT_EQ(shmkv_get_f64(db, "f", 1, &d), 0);
	EXPECT_EQ(d, 1.5);
	ASSERT_EQ(shmkv_get_f64(db, "f1", 2, &d), 0) << "1.0 is a float, not an integer";
	EXPECT_EQ(d, 1.0);
	ASSERT_EQ(shmkv_get_f64(db, "fe", 2, &d), 0);
	EXPECT_EQ(d, 2000.0);
	bool b = false;
	ASSERT_EQ(shmkv_get_bool(db, "t", 1, &b), 0);
	EXPECT_TRUE(b);
	ASSERT_EQ(shmkv_get_bool(db, "n", 1, &b), 0);
	EXPECT_FALSE(b);
	const double *dp = nullptr;
	size_t n = 0;
	ASSERT_EQ(shmkv_get_f64list(db, "fl", 2, &dp, &n), 0) << "numbers with a float -> f64list";
	ASSERT_EQ(n, 3u);
	EXPECT_EQ(dp[0], 1.0);
	EXPECT_EQ(dp[1], 2.5);
	EXPECT_EQ(dp[2], -3.0);
	shmkv_strlist sl{};
	ASSERT_EQ(shmkv_get_strlist(db, "sl", 2, &sl), 0);
	ASSERT_EQ(shmkv_strlist_count(&sl), 3u);
	size_t len = 0;
	EXPECT_STREQ(shmkv_strlist_at(&sl, 0, &len), "a");
	EXPECT_STREQ(shmkv_strlist_at(&sl, 1, &len), "");
	EXPECT_STREQ(shmkv_strlist_at(&sl, 2, &len), "b");
	EXPECT_EQ(type_of("inf"), (unsigned)SHMKV_TYPE_STRING) << "\"inf\" without a type is text";
	EXPECT_EQ(type_of("rev"), (unsigned)SHMKV_TYPE_STRING);
	EXPECT_EQ(type_of("ws"), (unsigned)SHMKV_TYPE_I64);
	std::string k = "esc\xc3\xa9\n";
	ASSERT_EQ(type_of(k), (unsigned)SHMKV_TYPE_STRING);
	EXPECT_EQ(sv(v.data, v.size), std::string("\"q\" \\ \xf0\x9f\x98\x80 \0", 12));
}

TEST_F(Jsonl, ValidExplicitTypes)
{
	ASSERT_EQ(jsonl("{\"key\": \"by\", \"type\": \"bytes\", \"value\": \"AAEC/w==\"}\n"
			"{\"key\": \"by0\", \"type\": \"bytes\", \"value\": \"\"}\n"
			"{\"key\": \"st\", \"type\": \"string\", \"value\": \"\"}\n"
			"{\"key\": \"i\", \"type\": \"i64\", \"value\": 7}\n"
			"{\"key\": \"b\", \"type\": \"bool\", \"value\": true}\n"
			"{\"key\": \"f\", \"type\": \"f64\", \"value\": 3}\n"
			"{\"key\": \"finf\", \"type\": \"f64\", \"value\": \"inf\"}\n"
			"{\"key\": \"fninf\", \"type\": \"f64\", \"value\": \"-inf\"}\n"
			"{\"key\": \"fnan\", \"type\": \"f64\", \"value\": \"nan\"}\n"
			"{\"key\": \"fpay\", \"type\": \"f64\", \"value\": \"nan:0x7ff8000000000123\"}\n"
			"{\"key\": \"fsig\", \"type\": \"f64\", \"value\": \"nan:0xfff0000000000001\"}\n"
			"{\"key\": \"l32\", \"type\": \"f32list\", \"value\": [1, \"inf\", \"nan:0x7fc00001\", "
			"\"nan:0x7fa00001\", \"-inf\"]}\n"
			"{\"key\": \"l32e\", \"type\": \"f32list\", \"value\": []}\n"
			"{\"key\": \"l64\", \"type\": \"f64list\", \"value\": [\"-inf\", 2, 0.1]}\n"
			"{\"key\": \"li\", \"type\": \"i64list\", \"value\": [1, -2, 9223372036854775807, "
			"-9223372036854775808]}\n"
			"{\"key\": \"lie\", \"type\": \"i64list\", \"value\": []}\n"
			"{\"key\": \"ls\", \"type\": \"strlist\", \"value\": [\"x\", \"\"]}\n"
			"{\"key\": \"lse\", \"type\": \"strlist\", \"value\": []}\n"
			"{\"key_base64\": \"AGI=\", \"value\": \"binary key\"}\n"
			"{\"key_base64\": \"\", \"value\": \"empty key\"}\n"),
		  0)
		<< msg;
	Db db = open_db(out, SHMKV_OPEN_DEEP);
	ASSERT_TRUE(db);
	EXPECT_EQ(db.hdr()->entry_count, 20u);
	const void *p = nullptr;
	size_t n = 0;
	ASSERT_EQ(shmkv_get_bytes(db, "by", 2, &p, &n), 0);
	EXPECT_EQ(sv(p, n), std::string("\0\1\2\xff", 4));
	ASSERT_EQ(shmkv_get_bytes(db, "by0", 3, &p, &n), 0);
	EXPECT_EQ(n, 0u);
	const char *s = nullptr;
	ASSERT_EQ(shmkv_get_str(db, "st", 2, &s, &n), 0);
	EXPECT_EQ(n, 0u);
	int64_t i = 0;
	ASSERT_EQ(shmkv_get_i64(db, "i", 1, &i), 0);
	EXPECT_EQ(i, 7);
	bool b = false;
	ASSERT_EQ(shmkv_get_bool(db, "b", 1, &b), 0);
	EXPECT_TRUE(b);
	double d = 0;
	ASSERT_EQ(shmkv_get_f64(db, "f", 1, &d), 0) << "an integer with type f64 is a float";
	EXPECT_EQ(d, 3.0);
	ASSERT_EQ(shmkv_get_f64(db, "finf", 4, &d), 0);
	EXPECT_EQ(d, INFINITY);
	ASSERT_EQ(shmkv_get_f64(db, "fninf", 5, &d), 0);
	EXPECT_EQ(d, -INFINITY);
	ASSERT_EQ(shmkv_get_f64(db, "fnan", 4, &d), 0);
	EXPECT_TRUE(std::isnan(d));
	ASSERT_EQ(shmkv_get_f64(db, "fpay", 4, &d), 0);
	EXPECT_EQ(f64_bits(d), UINT64_C(0x7ff8000000000123));
	ASSERT_EQ(shmkv_get_f64(db, "fsig", 4, &d), 0);
	EXPECT_EQ(f64_bits(d), UINT64_C(0xfff0000000000001)) << "signalling NaN kept bit-exact";
	const float *fp = nullptr;
	ASSERT_EQ(shmkv_get_f32list(db, "l32", 3, &fp, &n), 0);
	ASSERT_EQ(n, 5u);
	EXPECT_EQ(fp[0], 1.0f);
	EXPECT_EQ(fp[1], INFINITY);
	EXPECT_EQ(f32_bits(fp[2]), 0x7fc00001u);
	EXPECT_EQ(f32_bits(fp[3]), 0x7fa00001u) << "signalling f32 NaN kept bit-exact";
	EXPECT_EQ(fp[4], -INFINITY);
	ASSERT_EQ(shmkv_get_f32list(db, "l32e", 4, &fp, &n), 0);
	EXPECT_EQ(n, 0u);
	const double *dp = nullptr;
	ASSERT_EQ(shmkv_get_f64list(db, "l64", 3, &dp, &n), 0);
	ASSERT_EQ(n, 3u);
	EXPECT_EQ(dp[0], -INFINITY);
	EXPECT_EQ(dp[1], 2.0);
	EXPECT_EQ(dp[2], 0.1);
	const int64_t *ip = nullptr;
	ASSERT_EQ(shmkv_get_i64list(db, "li", 2, &ip, &n), 0);
	ASSERT_EQ(n, 4u);
	EXPECT_EQ(ip[0], 1);
	EXPECT_EQ(ip[1], -2);
	EXPECT_EQ(ip[2], INT64_MAX);
	EXPECT_EQ(ip[3], INT64_MIN);
	ASSERT_EQ(shmkv_get_i64list(db, "lie", 3, &ip, &n), 0);
	EXPECT_EQ(n, 0u);
	shmkv_strlist sl{};
	ASSERT_EQ(shmkv_get_strlist(db, "ls", 2, &sl), 0);
	EXPECT_EQ(shmkv_strlist_count(&sl), 2u);
	ASSERT_EQ(shmkv_get_strlist(db, "lse", 3, &sl), 0);
	EXPECT_EQ(shmkv_strlist_count(&sl), 0u);
	ASSERT_EQ(shmkv_get_str(db, "\0b", 2, &s, &n), 0);
	EXPECT_EQ(std::string(s, n), "binary key");
	ASSERT_EQ(shmkv_get_str(db, "", 0, &s, &n), 0);
	EXPECT_EQ(std::string(s, n), "empty key");
}

TEST_F(Jsonl, LongLineAndNoFinalNewline)
{
	std::string big(5 << 20, 'x');
	ASSERT_EQ(jsonl("{\"key\": \"big\", \"value\": \"" + big + "\"}\n{\"key\": \"last\", \"value\": 1}"),
		  0)
		<< msg;
	Db db = open_db(out);
	ASSERT_TRUE(db);
	const char *s = nullptr;
	size_t n = 0;
	ASSERT_EQ(shmkv_get_str(db, "big", 3, &s, &n), 0);
	EXPECT_EQ(n, big.size());
	int64_t i = 0;
	EXPECT_EQ(shmkv_get_i64(db, "last", 4, &i), 0);
}

// Numbers are never stored with silent loss (builder/README.md, "Types").
TEST_F(Jsonl, LosslessNumberInference)
{
	ASSERT_EQ(jsonl("{\"key\": \"ints\", \"value\": [16777217, -1, 9223372036854775807]}\n"
			"{\"key\": \"mixed\", \"value\": [16777217, 0.1, 9007199254740992]}\n"
			"{\"key\": \"big\", \"value\": [1.5, 18446744073709551616]}\n"
			"{\"key\": \"f32\", \"type\": \"f32list\", \"value\": [0.1, 0.25, 16777216, -3, "
			"1e-3, 3.4028234663852886e38, 0.10000000149011612, 0.100000001]}\n"
			"{\"key\": \"f64i\", \"type\": \"f64\", \"value\": 9007199254740992}\n"
			"{\"key\": \"f64r\", \"type\": \"f64\", \"value\": 9007199254740993.0}\n"),
		  0)
		<< msg;
	Db db = open_db(out, SHMKV_OPEN_DEEP);
	ASSERT_TRUE(db);
	const int64_t *ip = nullptr;
	size_t n = 0;
	ASSERT_EQ(shmkv_get_i64list(db, "ints", 4, &ip, &n), 0) << "integers -> i64list";
	ASSERT_EQ(n, 3u);
	EXPECT_EQ(ip[0], 16777217) << "16777217 kept (f32 would make it 16777216)";
	EXPECT_EQ(ip[2], INT64_MAX);
	const double *dp = nullptr;
	ASSERT_EQ(shmkv_get_f64list(db, "mixed", 5, &dp, &n), 0);
	ASSERT_EQ(n, 3u);
	EXPECT_EQ(dp[0], 16777217.0);
	EXPECT_EQ(dp[1], 0.1);
	EXPECT_EQ(dp[2], 9007199254740992.0);
	ASSERT_EQ(shmkv_get_f64list(db, "big", 3, &dp, &n), 0) << "2^64 is exact in f64";
	EXPECT_EQ(dp[1], 18446744073709551616.0);
	const float *fp = nullptr;
	ASSERT_EQ(shmkv_get_f32list(db, "f32", 3, &fp, &n), 0);
	ASSERT_EQ(n, 8u);
	EXPECT_EQ(fp[0], 0.1f) << "0.1 is its f32 rounded to one digit";
	EXPECT_EQ(fp[2], 16777216.0f);
	EXPECT_EQ(fp[4], 1e-3f);
	EXPECT_EQ(fp[5], 3.4028234663852886e38f);
	EXPECT_EQ(fp[6], 0.1f) << "the f32's exact value to f64 precision";
	EXPECT_EQ(fp[7], 0.1f) << "as shmctl dump writes it (%.9g)";
	double d = 0;
	ASSERT_EQ(shmkv_get_f64(db, "f64i", 4, &d), 0);
	EXPECT_EQ(d, 9007199254740992.0);
	ASSERT_EQ(shmkv_get_f64(db, "f64r", 4, &d), 0) << "a fraction accepts the nearest f64";
	EXPECT_EQ(d, 9007199254740992.0);

	// what would lose precision is an error naming line, key, element and value
	struct Lossy {
		const char *line, *why;
	};
	const Lossy cases[] = {
		{"{\"key\": \"k\", \"type\": \"f32list\", \"value\": [1, 16777217]}", "16777217"},
		{"{\"key\": \"k\", \"type\": \"f32list\", \"value\": [3.14159265358979]}", "3.14159265358979"},
		{"{\"key\": \"k\", \"type\": \"f32list\", \"value\": [1e-50]}", "1e-50"},
		{"{\"key\": \"k\", \"type\": \"f32list\", \"value\": [1e39]}", "range"},
		{"{\"key\": \"k\", \"value\": [0.5, 9007199254740993]}", "9007199254740993"},
		{"{\"key\": \"k\", \"type\": \"f64\", \"value\": 9007199254740993}", "9007199254740993"},
		{"{\"key\": \"k\", \"type\": \"f64list\", \"value\": [18446744073709551615]}",
		 "18446744073709551615"},
		{"{\"key\": \"k\", \"value\": [1, 9223372036854775808]}", "i64 range"},
	};
	unlink(out.c_str());
	for (const Lossy &c : cases) {
		SCOPED_TRACE(c.line);
		EXPECT_EQ(jsonl(std::string("{\"key\": \"g\", \"value\": 1}\n") + c.line + "\n"),
			  SHMKV_EINPUT)
			<< msg;
		EXPECT_NE(msg.find(where("in.jsonl", 2)), std::string::npos) << msg;
		EXPECT_NE(msg.find("key \"k\""), std::string::npos) << msg;
		EXPECT_TRUE(contains_ci(msg, c.why)) << msg;
		EXPECT_FALSE(file_exists(out));
	}
	EXPECT_NE(msg.find("element 2"), std::string::npos) << msg;

	// lossy_f32 rounds, when asked
	shmkv_build_options o = test_options();
	o.lossy_f32 = 1;
	ASSERT_EQ(jsonl("{\"key\": \"k\", \"type\": \"f32list\", \"value\": [16777217, 3.14159265358979, "
			"1e-50]}\n", o),
		  0)
		<< msg;
	Db db2 = open_db(out);
	ASSERT_TRUE(db2);
	ASSERT_EQ(shmkv_get_f32list(db2, "k", 1, &fp, &n), 0);
	ASSERT_EQ(n, 3u);
	EXPECT_EQ(fp[0], 16777216.0f);
	EXPECT_EQ(fp[1], 3.14159265358979f);
	EXPECT_EQ(fp[2], 0.0f);
}

TEST_F(Input, TsvLosslessFloats)
{
	EXPECT_EQ(tsv("a\t1.5,16777217\n", SHMKV_TYPE_F32LIST), SHMKV_EINPUT) << msg;
	EXPECT_NE(msg.find(where("in.tsv", 1)), std::string::npos) << msg;
	EXPECT_NE(msg.find("key \"a\""), std::string::npos) << msg;
	EXPECT_NE(msg.find("16777217"), std::string::npos) << msg;
	EXPECT_EQ(tsv("a\t9007199254740993\n", SHMKV_TYPE_F64), SHMKV_EINPUT) << msg;
	EXPECT_NE(msg.find("9007199254740993"), std::string::npos) << msg;
	ASSERT_EQ(tsv("a\t0.1,0.25,-inf,16777216\n", SHMKV_TYPE_F32LIST), 0) << msg;
	shmkv_build_options o = test_options();
	o.lossy_f32 = 1;
	ASSERT_EQ(tsv("a\t16777217\n", SHMKV_TYPE_F32LIST, o), 0) << msg;
	Db db = open_db(out);
	ASSERT_TRUE(db);
	const float *fp = nullptr;
	size_t n = 0;
	ASSERT_EQ(shmkv_get_f32list(db, "a", 1, &fp, &n), 0);
	ASSERT_EQ(n, 1u);
	EXPECT_EQ(fp[0], 16777216.0f);
}

// A UTF-8 BOM is skipped; NaN and Infinity say how to write them
// (builder/README.md, "Types").
TEST_F(Input, ByteOrderMarkAndNonJsonFloats)
{
	const std::string bom = "\xEF\xBB\xBF";
	ASSERT_EQ(jsonl(bom + "{\"key\": \"a\", \"value\": 1}\n"), 0) << msg;
	{
		Db db = open_db(out);
		ASSERT_TRUE(db);
		int64_t i = 0;
		EXPECT_EQ(shmkv_get_i64(db, "a", 1, &i), 0) << "the key is \"a\", not BOM + \"a\"";
	}
	ASSERT_EQ(tsv(bom + "k\tv\n", SHMKV_TYPE_STRING), 0) << msg;
	{
		Db db = open_db(out);
		ASSERT_TRUE(db);
		const char *s = nullptr;
		size_t n = 0;
		EXPECT_EQ(shmkv_get_str(db, "k", 1, &s, &n), 0);
	}
	EXPECT_EQ(jsonl("{\"key\": \"a\", \"value\": 1}\n" + bom + "{\"key\": \"b\", \"value\": 2}\n"),
		  SHMKV_EINPUT);
	EXPECT_NE(msg.find(where("in.jsonl", 2)), std::string::npos) << msg;
	EXPECT_TRUE(contains_ci(msg, "byte-order mark")) << msg;
	EXPECT_EQ(jsonl("\xFF\xFE{\0\"\0"), SHMKV_EINPUT);
	EXPECT_NE(msg.find(where("in.jsonl", 1)), std::string::npos) << msg;
	EXPECT_TRUE(contains_ci(msg, "UTF-16")) << msg;

	for (const char *v : {"NaN", "nan", "Infinity", "-Infinity", "inf", "-inf"}) {
		SCOPED_TRACE(v);
		EXPECT_EQ(jsonl(std::string("{\"key\": \"a\", \"value\": ") + v + "}\n"), SHMKV_EINPUT);
		EXPECT_NE(msg.find(where("in.jsonl", 1)), std::string::npos) << msg;
		EXPECT_NE(msg.find(std::string(v) + " is not JSON"), std::string::npos) << msg;
		EXPECT_NE(msg.find("\"type\": \"f64\""), std::string::npos) << msg;
		EXPECT_EQ(jsonl(std::string("{\"key\": \"a\", \"type\": \"f64list\", \"value\": [1, ") + v +
				"]}\n"),
			  SHMKV_EINPUT);
		EXPECT_NE(msg.find("element 2"), std::string::npos) << msg;
		EXPECT_NE(msg.find("is not JSON"), std::string::npos) << msg;
	}
	// the spelling the messages suggest works
	ASSERT_EQ(jsonl("{\"key\": \"a\", \"type\": \"f64\", \"value\": \"nan\"}\n"
			"{\"key\": \"b\", \"type\": \"f64list\", \"value\": [1.5, \"-inf\"]}\n"),
		  0)
		<< msg;
}

struct BadCase {
	const char *name;
	std::string line; // put on line 3, after two good lines
	const char *reason; // substring of the message (case-insensitive); "" = line only
	int err;            // expected return code
};

TEST_F(Jsonl, Malformed)
{
	const std::string big_key(SHMKV_MAX_KEY_LEN + 1, 'k');
	const std::vector<BadCase> cases = {
		{"syntax", "{\"key\": \"a\", \"value\": }", "", SHMKV_EINPUT},
		{"unterminated object", "{\"key\": \"a\", \"value\": 1", "", SHMKV_EINPUT},
		{"unterminated string", "{\"key\": \"a, \"value\": 1}", "", SHMKV_EINPUT},
		{"trailing garbage", "{\"key\": \"a\", \"value\": 1} x", "", SHMKV_EINPUT},
		{"not an object (array)", "[1, 2]", "object", SHMKV_EINPUT},
		{"not an object (number)", "42", "object", SHMKV_EINPUT},
		{"missing key", "{\"value\": 1}", "key", SHMKV_EINPUT},
		{"missing value", "{\"key\": \"a\"}", "value", SHMKV_EINPUT},
		{"key not a string", "{\"key\": 5, \"value\": 1}", "key", SHMKV_EINPUT},
		{"key and key_base64", "{\"key\": \"a\", \"key_base64\": \"YQ==\", \"value\": 1}", "key",
		 SHMKV_EINPUT},
		{"null value", "{\"key\": \"a\", \"value\": null}", "null", SHMKV_EINPUT},
		{"object value", "{\"key\": \"a\", \"value\": {\"x\": 1}}", "object", SHMKV_EINPUT},
		{"mixed array", "{\"key\": \"a\", \"value\": [1, \"x\"]}", "mix", SHMKV_EINPUT},
		{"array of bools", "{\"key\": \"a\", \"value\": [true]}", "", SHMKV_EINPUT},
		{"nested array", "{\"key\": \"a\", \"value\": [[1]]}", "", SHMKV_EINPUT},
		{"empty array without type", "{\"key\": \"a\", \"value\": []}", "empty", SHMKV_EINPUT},
		{"integer above i64", "{\"key\": \"a\", \"value\": 9223372036854775808}", "range",
		 SHMKV_EINPUT},
		{"integer below i64", "{\"key\": \"a\", \"value\": -9223372036854775809}", "range",
		 SHMKV_EINPUT},
		{"i64list element out of range",
		 "{\"key\": \"a\", \"type\": \"i64list\", \"value\": [1, 18446744073709551615]}", "range",
		 SHMKV_EINPUT},
		{"unknown field", "{\"key\": \"a\", \"value\": 1, \"colour\": 2}", "colour", SHMKV_EINPUT},
		{"unknown type", "{\"key\": \"a\", \"value\": 1, \"type\": \"int32\"}", "int32",
		 SHMKV_EINPUT},
		{"type not a string", "{\"key\": \"a\", \"value\": 1, \"type\": 3}", "type", SHMKV_EINPUT},
		{"i64 given a string", "{\"key\": \"a\", \"type\": \"i64\", \"value\": \"x\"}", "",
		 SHMKV_EINPUT},
		{"i64 given a float", "{\"key\": \"a\", \"type\": \"i64\", \"value\": 1.5}", "",
		 SHMKV_EINPUT},
		{"bool given a number", "{\"key\": \"a\", \"type\": \"bool\", \"value\": 1}", "",
		 SHMKV_EINPUT},
		{"string given a number", "{\"key\": \"a\", \"type\": \"string\", \"value\": 1}", "",
		 SHMKV_EINPUT},
		{"bad float keyword", "{\"key\": \"a\", \"type\": \"f64\", \"value\": \"nan:0xzz\"}", "",
		 SHMKV_EINPUT},
		{"float word", "{\"key\": \"a\", \"type\": \"f64\", \"value\": \"infinity and beyond\"}",
		 "", SHMKV_EINPUT},
		{"f32list with text", "{\"key\": \"a\", \"type\": \"f32list\", \"value\": [\"x\"]}", "",
		 SHMKV_EINPUT},
		{"i64list with floats", "{\"key\": \"a\", \"type\": \"i64list\", \"value\": [1.5]}", "",
		 SHMKV_EINPUT},
		{"strlist with numbers", "{\"key\": \"a\", \"type\": \"strlist\", \"value\": [1]}", "",
		 SHMKV_EINPUT},
		{"list type given a scalar", "{\"key\": \"a\", \"type\": \"f64list\", \"value\": 1}", "",
		 SHMKV_EINPUT},
		{"bad base64 value", "{\"key\": \"a\", \"type\": \"bytes\", \"value\": \"!!!!\"}",
		 "base64", SHMKV_EINPUT},
		{"bad base64 length", "{\"key\": \"a\", \"type\": \"bytes\", \"value\": \"QUJ\"}",
		 "base64", SHMKV_EINPUT},
		{"bad key_base64", "{\"key_base64\": \"@@@@\", \"value\": 1}", "base64", SHMKV_EINPUT},
		{"invalid UTF-8", "{\"key\": \"a\", \"value\": \"\xff\xfe\"}", "", SHMKV_EINPUT},
		{"key over the limit", "{\"key\": \"" + big_key + "\", \"value\": 1}", "",
		 SHMKV_ELIMIT},
	};
	for (const BadCase &c : cases) {
		SCOPED_TRACE(c.name);
		std::string content = "{\"key\": \"g1\", \"value\": 1}\n{\"key\": \"g2\", \"value\": 2}\n" +
				      c.line + "\n{\"key\": \"g4\", \"value\": 4}\n";
		EXPECT_EQ(jsonl(content), c.err) << msg;
		EXPECT_NE(msg.find(where("in.jsonl", 3)), std::string::npos)
			<< "message does not name in.jsonl:3: " << msg;
		EXPECT_TRUE(contains_ci(msg, c.reason)) << "no \"" << c.reason << "\" in: " << msg;
		EXPECT_FALSE(file_exists(out)) << "an image was written";
	}
}

// ---- TSV -----------------------------------------------------------------

using Tsv = Input;

TEST_F(Tsv, ValidStringsAndEscapes)
{
	ASSERT_EQ(tsv("plain\tvalue\n"
		      "a\\tb\tval\\nue\\\\ \\r\\0end\n"
		      "\\0\t\n"
		      "uni\xc3\xa9\t\xe4\xb8\x96\xe7\x95\x8c\n"
		      "comma\ta,b\n"
		      "last\tno newline",
		      SHMKV_TYPE_STRING),
		  0)
		<< msg;
	Db db = open_db(out, SHMKV_OPEN_DEEP);
	ASSERT_TRUE(db);
	EXPECT_EQ(db.hdr()->entry_count, 6u);
	auto get = [&](const std::string &k) {
		const char *s = nullptr;
		size_t n = 0;
		int err = shmkv_get_str(db, k.data(), k.size(), &s, &n);
		EXPECT_EQ(err, 0) << k;
		return err ? std::string("<error>") : std::string(s, n);
	};
	EXPECT_EQ(get("plain"), "value");
	EXPECT_EQ(get("a\tb"), std::string("val\nue\\ \r\0end", 13));
	EXPECT_EQ(get(std::string("\0", 1)), "") << "empty field = empty string";
	EXPECT_EQ(get("uni\xc3\xa9"), "\xe4\xb8\x96\xe7\x95\x8c");
	EXPECT_EQ(get("comma"), "a,b") << "commas are plain text in strings";
	EXPECT_EQ(get("last"), "no newline");
}

TEST_F(Tsv, ValidTypes)
{
	{
		ASSERT_EQ(tsv("a\t-42\nb\t9223372036854775807\nc\t-9223372036854775808\n", SHMKV_TYPE_I64), 0)
			<< msg;
		Db db = open_db(out);
		ASSERT_TRUE(db);
		int64_t i = 0;
		ASSERT_EQ(shmkv_get_i64(db, "a", 1, &i), 0);
		EXPECT_EQ(i, -42);
		ASSERT_EQ(shmkv_get_i64(db, "b", 1, &i), 0);
		EXPECT_EQ(i, INT64_MAX);
		ASSERT_EQ(shmkv_get_i64(db, "c", 1, &i), 0);
		EXPECT_EQ(i, INT64_MIN);
	}
	{
		ASSERT_EQ(tsv("a\t1.5\nb\t-2e10\nc\t-inf\nd\tnan:0x7ff8000000000abc\n", SHMKV_TYPE_F64), 0)
			<< msg;
		Db db = open_db(out);
		ASSERT_TRUE(db);
		double d = 0;
		ASSERT_EQ(shmkv_get_f64(db, "a", 1, &d), 0);
		EXPECT_EQ(d, 1.5);
		ASSERT_EQ(shmkv_get_f64(db, "b", 1, &d), 0);
		EXPECT_EQ(d, -2e10);
		ASSERT_EQ(shmkv_get_f64(db, "c", 1, &d), 0);
		EXPECT_EQ(d, -INFINITY);
		ASSERT_EQ(shmkv_get_f64(db, "d", 1, &d), 0);
		EXPECT_EQ(f64_bits(d), UINT64_C(0x7ff8000000000abc));
	}
	{
		ASSERT_EQ(tsv("t\ttrue\nf\tfalse\n", SHMKV_TYPE_BOOL), 0) << msg;
		Db db = open_db(out);
		ASSERT_TRUE(db);
		bool b = false;
		ASSERT_EQ(shmkv_get_bool(db, "t", 1, &b), 0);
		EXPECT_TRUE(b);
		ASSERT_EQ(shmkv_get_bool(db, "f", 1, &b), 0);
		EXPECT_FALSE(b);
	}
	{
		ASSERT_EQ(tsv("a\t1,-2,3\ne\t\none\t9223372036854775807\n", SHMKV_TYPE_I64LIST), 0) << msg;
		Db db = open_db(out);
		ASSERT_TRUE(db);
		const int64_t *p = nullptr;
		size_t n = 0;
		ASSERT_EQ(shmkv_get_i64list(db, "a", 1, &p, &n), 0);
		ASSERT_EQ(n, 3u);
		EXPECT_EQ(p[0], 1);
		EXPECT_EQ(p[1], -2);
		EXPECT_EQ(p[2], 3);
		ASSERT_EQ(shmkv_get_i64list(db, "e", 1, &p, &n), 0);
		EXPECT_EQ(n, 0u) << "empty field = empty list";
		ASSERT_EQ(shmkv_get_i64list(db, "one", 3, &p, &n), 0);
		ASSERT_EQ(n, 1u);
		EXPECT_EQ(p[0], INT64_MAX);
	}
	{
		ASSERT_EQ(tsv("a\t1.5,2,inf,nan:0x7fc00001\ne\t\n", SHMKV_TYPE_F32LIST), 0) << msg;
		Db db = open_db(out);
		ASSERT_TRUE(db);
		const float *p = nullptr;
		size_t n = 0;
		ASSERT_EQ(shmkv_get_f32list(db, "a", 1, &p, &n), 0);
		ASSERT_EQ(n, 4u);
		EXPECT_EQ(p[0], 1.5f);
		EXPECT_EQ(p[1], 2.0f);
		EXPECT_EQ(p[2], INFINITY);
		EXPECT_EQ(f32_bits(p[3]), 0x7fc00001u);
		ASSERT_EQ(shmkv_get_f32list(db, "e", 1, &p, &n), 0);
		EXPECT_EQ(n, 0u);
	}
	{
		ASSERT_EQ(tsv("a\t0.1,-1e300\n", SHMKV_TYPE_F64LIST), 0) << msg;
		Db db = open_db(out);
		ASSERT_TRUE(db);
		const double *p = nullptr;
		size_t n = 0;
		ASSERT_EQ(shmkv_get_f64list(db, "a", 1, &p, &n), 0);
		ASSERT_EQ(n, 2u);
		EXPECT_EQ(p[0], 0.1);
		EXPECT_EQ(p[1], -1e300);
	}
	{
		ASSERT_EQ(tsv("a\tx\\,y,z\ne\t\nt\tp\\tq,\\\\,\\n\nholes\ta,,b\n", SHMKV_TYPE_STRLIST), 0)
			<< msg;
		Db db = open_db(out);
		ASSERT_TRUE(db);
		auto list = [&](const char *k) {
			std::vector<std::string> out;
			shmkv_strlist sl{};
			EXPECT_EQ(shmkv_get_strlist(db, k, strlen(k), &sl), 0) << k;
			for (size_t i = 0; i < sl.count; i++) {
				size_t len = 0;
				const char *s = shmkv_strlist_at(&sl, i, &len);
				out.emplace_back(s, len);
			}
			return out;
		};
		EXPECT_EQ(list("a"), (std::vector<std::string>{"x,y", "z"}));
		EXPECT_EQ(list("e"), std::vector<std::string>{});
		EXPECT_EQ(list("t"), (std::vector<std::string>{"p\tq", "\\", "\n"}));
		EXPECT_EQ(list("holes"), (std::vector<std::string>{"a", "", "b"}));
	}
}

TEST_F(Tsv, Malformed)
{
	const std::string big_key(SHMKV_MAX_KEY_LEN + 1, 'k');
	struct TsvBad {
		BadCase c;
		unsigned type;
	};
	const std::vector<TsvBad> cases = {
		{{"no tab", "justakey", "tab", SHMKV_EINPUT}, SHMKV_TYPE_STRING},
		{{"two tabs", "k\tv\tw", "", SHMKV_EINPUT}, SHMKV_TYPE_STRING},
		{{"unknown escape", "k\tv\\x", "escape", SHMKV_EINPUT}, SHMKV_TYPE_STRING},
		{{"unknown escape in key", "k\\q\tv", "escape", SHMKV_EINPUT}, SHMKV_TYPE_STRING},
		{{"backslash at the end", "k\tv\\", "", SHMKV_EINPUT}, SHMKV_TYPE_STRING},
		{{"i64 not a number", "k\t12a", "", SHMKV_EINPUT}, SHMKV_TYPE_I64},
		{{"i64 empty", "k\t", "", SHMKV_EINPUT}, SHMKV_TYPE_I64},
		{{"i64 above range", "k\t9223372036854775808", "range", SHMKV_EINPUT}, SHMKV_TYPE_I64},
		{{"i64 float", "k\t1.5", "", SHMKV_EINPUT}, SHMKV_TYPE_I64},
		{{"f64 not a number", "k\tabc", "", SHMKV_EINPUT}, SHMKV_TYPE_F64},
		{{"bool not a bool", "k\tmaybe", "", SHMKV_EINPUT}, SHMKV_TYPE_BOOL},
		{{"i64list bad element", "k\t1,x,3", "", SHMKV_EINPUT}, SHMKV_TYPE_I64LIST},
		{{"i64list empty element", "k\t1,,3", "", SHMKV_EINPUT}, SHMKV_TYPE_I64LIST},
		{{"f32list bad element", "k\t1.5,zz", "", SHMKV_EINPUT}, SHMKV_TYPE_F32LIST},
		{{"key over the limit", big_key + "\tv", "", SHMKV_ELIMIT}, SHMKV_TYPE_STRING},
	};
	for (const TsvBad &t : cases) {
		SCOPED_TRACE(t.c.name);
		std::string good = t.type == SHMKV_TYPE_STRING || t.type == SHMKV_TYPE_STRLIST ? "x" : "1";
		if (t.type == SHMKV_TYPE_BOOL)
			good = "true";
		std::string content = "g1\t" + good + "\ng2\t" + good + "\n" + t.c.line + "\ng4\t" + good + "\n";
		EXPECT_EQ(tsv(content, t.type), t.c.err) << msg;
		EXPECT_NE(msg.find(where("in.tsv", 3)), std::string::npos)
			<< "message does not name in.tsv:3: " << msg;
		EXPECT_TRUE(contains_ci(msg, t.c.reason)) << "no \"" << t.c.reason << "\" in: " << msg;
		EXPECT_FALSE(file_exists(out)) << "an image was written";
	}
}

TEST_F(Input, BadTsvTypeAndFormat)
{
	EXPECT_LT(build("in.tsv", "k\tv\n", SHMKV_INPUT_TSV, 0), 0) << "tsv_type 0";
	EXPECT_LT(build("in.tsv", "k\tv\n", SHMKV_INPUT_TSV, SHMKV_TYPE_MAX + 1), 0);
	EXPECT_LT(build("in.tsv", "k\tv\n", 99, SHMKV_TYPE_STRING), 0) << "format 99";
	EXPECT_FALSE(file_exists(out));
}

TEST_F(Input, MissingInputFile)
{
	Builder b;
	ASSERT_TRUE(b.ok());
	std::string missing = dir.file("no-such-input.jsonl");
	EXPECT_EQ(shmkv_builder_add_file(b, missing.c_str(), SHMKV_INPUT_JSONL, 0), -ENOENT);
	EXPECT_NE(b.error().find(missing), std::string::npos) << b.error();
	EXPECT_LT(shmkv_builder_add_file(b, dir.path().c_str(), SHMKV_INPUT_JSONL, 0), 0)
		<< "a directory as input";
}

TEST_F(Input, StandardInput)
{
	std::string in = dir.file("stdin.jsonl");
	ASSERT_TRUE(write_file(in, "{\"key\": \"from\", \"value\": \"stdin\"}\n"));
	int saved = dup(0);
	ASSERT_GE(saved, 0);
	int fd = open(in.c_str(), O_RDONLY);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(dup2(fd, 0), 0);
	close(fd);
	Builder b;
	int err = shmkv_builder_add_file(b, "-", SHMKV_INPUT_JSONL, 0);
	dup2(saved, 0);
	close(saved);
	ASSERT_EQ(err, 0) << b.error();
	ASSERT_EQ(b.finish(out), 0) << b.error();
	Db db = open_db(out);
	ASSERT_TRUE(db);
	const char *s = nullptr;
	size_t n = 0;
	ASSERT_EQ(shmkv_get_str(db, "from", 4, &s, &n), 0);
	EXPECT_EQ(std::string(s, n), "stdin");
}

// ---- duplicates ----------------------------------------------------------

using Duplicates = Input;

TEST_F(Duplicates, ErrorNamesBothLines)
{
	int err = jsonl("{\"key\": \"a\", \"value\": 1}\n{\"key\": \"dup\", \"value\": 2}\n"
			"{\"key\": \"b\", \"value\": 3}\n{\"key\": \"c\", \"value\": 4}\n"
			"{\"key\": \"dup\", \"value\": 5}\n");
	EXPECT_EQ(err, SHMKV_EDUPKEY) << msg;
	EXPECT_NE(msg.find(dir.file("in.jsonl") + ":5"), std::string::npos) << msg;
	EXPECT_NE(msg.find(dir.file("in.jsonl") + ":2"), std::string::npos) << msg;
	EXPECT_TRUE(contains_ci(msg, "duplicate")) << msg;
	EXPECT_TRUE(contains_ci(msg, "dup")) << msg;
	EXPECT_FALSE(file_exists(out));

	// the same key through key_base64 is the same key
	err = jsonl("{\"key\": \"ab\", \"value\": 1}\n{\"key_base64\": \"YWI=\", \"value\": 2}\n");
	EXPECT_EQ(err, SHMKV_EDUPKEY) << msg;
	EXPECT_NE(msg.find(dir.file("in.jsonl") + ":1"), std::string::npos) << msg;
	EXPECT_NE(msg.find(dir.file("in.jsonl") + ":2"), std::string::npos) << msg;

	err = tsv("x\t1\ny\t2\nx\t3\n", SHMKV_TYPE_I64);
	EXPECT_EQ(err, SHMKV_EDUPKEY) << msg;
	EXPECT_NE(msg.find(dir.file("in.tsv") + ":3"), std::string::npos) << msg;
	EXPECT_NE(msg.find(dir.file("in.tsv") + ":1"), std::string::npos) << msg;
}

TEST_F(Duplicates, AcrossFilesAndApi)
{
	std::string a = dir.file("a.jsonl"), t = dir.file("b.tsv");
	ASSERT_TRUE(write_file(a, "{\"key\": \"shared\", \"value\": \"from a\"}\n"));
	ASSERT_TRUE(write_file(t, "one\tx\ntwo\ty\nshared\tfrom b\n"));
	{
		Builder b;
		ASSERT_EQ(shmkv_builder_add_file(b, a.c_str(), SHMKV_INPUT_JSONL, 0), 0) << b.error();
		int err = shmkv_builder_add_file(b, t.c_str(), SHMKV_INPUT_TSV, SHMKV_TYPE_STRING);
		if (!err)
			err = b.finish(out);
		EXPECT_EQ(err, SHMKV_EDUPKEY);
		EXPECT_NE(b.error().find(a + ":1"), std::string::npos) << b.error();
		EXPECT_NE(b.error().find(t + ":3"), std::string::npos) << b.error();
	}
	{
		Builder b;
		shmkv_builder_set_source(b, "api-src", 10);
		ASSERT_EQ(b.i64("k", 1), 0);
		shmkv_builder_set_source(b, "api-src", 20);
		ASSERT_EQ(b.i64("k", 2), 0);
		EXPECT_EQ(b.finish(out), SHMKV_EDUPKEY);
		EXPECT_NE(b.error().find("api-src:10"), std::string::npos) << b.error();
		EXPECT_NE(b.error().find("api-src:20"), std::string::npos) << b.error();
	}
	EXPECT_FALSE(file_exists(out));
}

TEST_F(Duplicates, FirstAndLast)
{
	const std::string content = "{\"key\": \"k\", \"value\": \"one\"}\n"
				    "{\"key\": \"other\", \"value\": 0}\n"
				    "{\"key\": \"k\", \"value\": \"two\"}\n"
				    "{\"key\": \"k\", \"type\": \"i64\", \"value\": 3}\n";
	for (int mode : {SHMKV_DUP_FIRST, SHMKV_DUP_LAST}) {
		SCOPED_TRACE(mode == SHMKV_DUP_FIRST ? "first" : "last");
		shmkv_build_options o = test_options();
		o.on_duplicate = mode;
		std::string in = dir.file("in.jsonl");
		ASSERT_TRUE(write_file(in, content));
		Builder b(o);
		ASSERT_EQ(shmkv_builder_add_file(b, in.c_str(), SHMKV_INPUT_JSONL, 0), 0) << b.error();
		shmkv_build_stats st;
		ASSERT_EQ(b.finish(out, &st), 0) << b.error();
		EXPECT_EQ(st.records, 4u);
		EXPECT_EQ(st.entries, 2u);
		EXPECT_EQ(st.duplicates, 2u);
		Db db = open_db(out, SHMKV_OPEN_DEEP);
		ASSERT_TRUE(db);
		EXPECT_EQ(db.hdr()->entry_count, 2u);
		shmkv_value v;
		ASSERT_EQ(shmkv_get(db, "k", 1, &v), 0);
		if (mode == SHMKV_DUP_FIRST) {
			EXPECT_EQ(v.type, (unsigned)SHMKV_TYPE_STRING);
			EXPECT_EQ(sv(v.data, v.size), "one");
		} else {
			int64_t i = 0;
			EXPECT_EQ(v.type, (unsigned)SHMKV_TYPE_I64);
			EXPECT_EQ(shmkv_get_i64(db, "k", 1, &i), 0);
			EXPECT_EQ(i, 3);
		}
	}
}

// ---- atomic write --------------------------------------------------------

using Atomic = Input;

TEST_F(Atomic, FailedBuildLeavesExistingOutput)
{
	ASSERT_TRUE(write_file(out, "precious, not an image"));
	// fails at finish (duplicate)
	EXPECT_EQ(jsonl("{\"key\": \"a\", \"value\": 1}\n{\"key\": \"a\", \"value\": 2}\n"),
		  SHMKV_EDUPKEY);
	EXPECT_EQ(read_file(out), "precious, not an image");
	EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"in.jsonl", "out.shmkv"}));
	// fails while reading input: nothing finished, nothing written
	EXPECT_EQ(jsonl("{\"key\": \"a\", \"value\": null}\n"), SHMKV_EINPUT);
	EXPECT_EQ(read_file(out), "precious, not an image");
	EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"in.jsonl", "out.shmkv"}));
	// a good build replaces it, through a rename: a reader's mapping of the
	// old file stays valid and unchanged
	ASSERT_EQ(jsonl("{\"key\": \"a\", \"value\": 1}\n"), 0) << msg;
	Db old = open_db(out);
	ASSERT_TRUE(old);
	struct stat st1, st2;
	ASSERT_EQ(stat(out.c_str(), &st1), 0);
	ASSERT_EQ(jsonl("{\"key\": \"b\", \"value\": 2}\n"), 0) << msg;
	ASSERT_EQ(stat(out.c_str(), &st2), 0);
	EXPECT_NE(st1.st_ino, st2.st_ino) << "output rewritten in place instead of renamed";
	int64_t i = 0;
	EXPECT_EQ(shmkv_get_i64(old, "a", 1, &i), 0);
	EXPECT_EQ(i, 1);
	Db now = open_db(out);
	ASSERT_TRUE(now);
	EXPECT_EQ(shmkv_get_i64(now, "b", 1, &i), 0);
	EXPECT_EQ(list_dir(dir.path()), (std::vector<std::string>{"in.jsonl", "out.shmkv"}));
	printf("image mode %o\n", (unsigned)(st2.st_mode & 0777));
}

TEST_F(Atomic, MissingOutputDirectory)
{
	std::string bad = dir.file("no-such-dir") + "/out.shmkv";
	Builder b;
	ASSERT_EQ(b.str("a", "b"), 0);
	EXPECT_EQ(b.finish(bad), -ENOENT) << b.error();
	EXPECT_TRUE(b.error().find("no-such-dir") != std::string::npos) << b.error();
	EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{});
}

TEST_F(Atomic, OutputIsADirectory)
{
	std::string sub = dir.file("sub");
	ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
	ASSERT_TRUE(write_file(sub + "/keep", "x"));
	Builder b;
	ASSERT_EQ(b.str("a", "b"), 0);
	EXPECT_LT(b.finish(sub), 0);
	EXPECT_NE(b.error(), "");
	EXPECT_EQ(list_dir(dir.path()), std::vector<std::string>{"sub"});
	EXPECT_EQ(list_dir(sub), std::vector<std::string>{"keep"});
}

} // namespace
