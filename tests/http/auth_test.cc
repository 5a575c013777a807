// auth_test: bearer tokens per cache (http/README.md "Access model"): 401
// with WWW-Authenticate for a protected cache without a token or with a
// wrong one, 403 for a token not allowed there, open caches stay open, the
// list shows a client only what it may read, and bad [token] sections stop
// the server at start with the file and line.
#include <set>

#include <sys/un.h>

#include "http_server.h"

using namespace http_test;

namespace {

const std::string kReader = "reader-secret-0123456789";
const std::string kWriter = "writer-secret-abcdefghij";
const std::string kOther = "other-secret-zyxwvutsrqp";

std::string bearer(const std::string &t) { return "Authorization: Bearer " + t + "\r\n"; }

struct AuthTest : ::testing::Test {
	Env env;
	Loader ld{env};
	std::string conf;
	void SetUp() override
	{
		ASSERT_TRUE(ld.start());
		ASSERT_TRUE(build_and_load(ld, env, "c", "one", 100).ok());
		ASSERT_TRUE(build_and_load(ld, env, "d", "two", 100).ok());
		std::string tf = env.base() + "/writer.token";
		write_text(tf, kWriter + "\n");
		conf = env.base() + "/http.conf";
		write_text(conf, "[http]\nmax_caches = 8\n"
				 "[token reader]\nsecret = " + kReader + "\nread = c\n"
				 "[token writer]\nsecret_file = " + tf + "\nwrite = c\n"
				 "[token other]\nsecret = " + kOther + "\nread = d\n");
	}
	static void write_text(const std::string &path, const std::string &text)
	{
		FILE *f = fopen(path.c_str(), "w");
		ASSERT_NE(f, nullptr);
		fputs(text.c_str(), f);
		fclose(f);
	}
	// shmkv-http with a config that must not start: its exit status and stderr
	std::pair<int, std::string> start_fails(const std::string &text)
	{
		std::string bad = env.base() + "/bad.conf", out = env.base() + "/bad.out";
		write_text(bad, text);
		std::string cmd = env_or_empty("SHMKV_HTTP") + " --config " + bad + " --listen 127.0.0.1:0 --root " +
				  env.root() + " 2>" + out;
		int st = system(cmd.c_str());
		return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, read_file(out)};
	}
};

TEST_F(AuthTest, TokensPerCache)
{
	Server s(env, {"--config", conf});
	unsigned p = s.port();
	std::string key = "/v1/caches/c/keys/" + key_of(3);

	Resp none = get(p, key);
	expect_error(none, 401, "unauthorized");
	EXPECT_EQ(none.header("www-authenticate"), "Bearer realm=\"shmkv\"");
	Resp wrong = get(p, key, bearer(kReader + "x"));
	expect_error(wrong, 401, "invalid_token");
	EXPECT_EQ(wrong.header("www-authenticate"), "Bearer realm=\"shmkv\", error=\"invalid_token\"");
	expect_error(get(p, key, "Authorization: Basic dXNlcjpwdw==\r\n"), 401, "invalid_token");
	expect_error(get(p, key, bearer(kReader.substr(0, 10))), 401, "invalid_token");

	Resp ok = get(p, key, bearer(kReader));
	EXPECT_EQ(ok.status, 200) << ok.body;
	EXPECT_EQ(ok.body, value_of("one", 3));
	EXPECT_EQ(get(p, key, "Authorization: bearer   " + kWriter + " \r\n").status, 200); // write implies read
	Resp forbidden = get(p, key, bearer(kOther));
	expect_error(forbidden, 403, "forbidden");
	EXPECT_NE(forbidden.header("www-authenticate").find("insufficient_scope"), std::string::npos);

	// a batch is a read: the same rules
	std::string body = "{\"keys\": [\"" + key_of(1) + "\"]}";
	expect_error(post(p, "/v1/caches/c/get", body), 401, "unauthorized");
	Resp b = raw(p, "POST /v1/caches/c/get HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + bearer(kReader) +
				"Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
	EXPECT_EQ(b.status, 200) << b.body;

	// d: read-listed by "other" only, so protected too; an unknown cache
	// name is protected by nothing and answers 404 as before
	expect_error(get(p, "/v1/caches/d/keys/" + key_of(1)), 401, "unauthorized");
	EXPECT_EQ(get(p, "/v1/caches/d/keys/" + key_of(1), bearer(kOther)).status, 200);
	expect_error(get(p, "/v1/caches/nosuch/keys/x"), 404, "no_cache");

	// the list: what the caller may read, and nothing protected without a token
	auto names = [&](const std::string &extra) {
		Resp l = get(p, "/v1/caches", extra);
		EXPECT_EQ(l.status, 200) << l.body;
		std::set<std::string> out;
		json_t *j = parse(l);
		json_t *arr = json_object_get(j, "caches");
		for (size_t i = 0; i < json_array_size(arr); i++)
			out.insert(json_string_value(json_object_get(json_array_get(arr, i), "name")));
		json_decref(j);
		return out;
	};
	EXPECT_EQ(names(""), (std::set<std::string>{}));
	EXPECT_EQ(names(bearer(kReader)), (std::set<std::string>{"c"}));
	EXPECT_EQ(names(bearer(kOther)), (std::set<std::string>{"d"}));
	expect_error(get(p, "/v1/caches", bearer("nope-nope-nope-nope")), 401, "invalid_token");
	EXPECT_TRUE(s.alive());
}

TEST_F(AuthTest, OpenCacheStaysOpen)
{
	// only c is named by a token: d answers without one
	write_text(conf, "[token reader]\nsecret = " + kReader + "\nread = c\n");
	Server s(env, {"--config", conf});
	EXPECT_EQ(get(s.port(), "/v1/caches/d/keys/" + key_of(1)).status, 200);
	expect_error(get(s.port(), "/v1/caches/c/keys/" + key_of(1)), 401, "unauthorized");
}

TEST_F(AuthTest, BadTokenSectionsStopTheStart)
{
	struct Case {
		std::string text, says;
	} cases[] = {
		{"[token a]\nsecret = short\nread = c\n", ":2: secret = \"short\": expected the token"},
		{"[token a]\nread = c\n", "[token a]: no secret or secret_file"},
		{"[token a]\nsecret = " + kReader + "\n", "[token a]: no read or write list"},
		{"[token a]\nsecret = " + kReader + "\nread = c\n[token b]\nsecret = " + kReader + "\nread = d\n",
		 "[token b]: the same secret as another token"},
		{"[token a]\nsecret_file = /nonexistent/t\nread = c\n", "secret_file = \"/nonexistent/t\": No such file"},
		{"[token a]\nsecret = " + kReader + "\nread = bad name!\n", "read = \"bad name!\""},
		{"[token a]\nsecret = " + kReader + "\nadmin = yes\n", "unknown key \"admin\""},
		{"[tokens]\nx = 1\n", "unknown section [tokens]"},
	};
	for (const Case &c : cases) {
		auto [rc, err] = start_fails(c.text);
		EXPECT_EQ(rc, 2) << c.text << err;
		EXPECT_NE(err.find(c.says), std::string::npos) << c.text << " -> " << err;
	}
}

} // namespace

namespace {

Resp send(unsigned p, const std::string &method, const std::string &target, const std::string &extra,
	  const std::string &body = "")
{
	return raw(p, method + " " + target + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + extra +
			      "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
}

// PUT and DELETE through the loader: seen by a reader as soon as the reply
// is out; refused without a token, with a read-only token (403), and for a
// cache no token may write (405).
TEST_F(AuthTest, PutAndDelete)
{
	Server s(env, {"--config", conf});
	unsigned p = s.port();
	std::string k = "/v1/caches/c/keys/";

	Resp put = send(p, "PUT", k + "new%20key", bearer(kWriter), "fresh value");
	ASSERT_EQ(put.status, 200) << put.body;
	json_t *j = parse(put);
	int64_t gen = json_integer_value(json_object_get(j, "generation"));
	json_decref(j);
	Resp r = get(p, k + "new%20key", bearer(kReader));
	EXPECT_EQ(r.status, 200) << r.body;
	EXPECT_EQ(r.body, "fresh value");
	EXPECT_EQ(r.header("x-shmkv-generation"), std::to_string(gen));

	// typed values, a binary key, an existing key replaced
	EXPECT_EQ(send(p, "PUT", k + "n", bearer(kWriter) + "x-shmkv-type: i64\r\n", "42").status, 200);
	EXPECT_EQ(get(p, k + "n", bearer(kReader) + "Accept: application/json\r\n").body.find("\"value\": 42}") !=
			  std::string::npos,
		  true);
	EXPECT_EQ(send(p, "PUT", k + "%FF%00b", bearer(kWriter) + "x-shmkv-type: bytes\r\n", std::string("\x00\xfe", 2))
			  .status,
		  200);
	EXPECT_EQ(get(p, k + "%FF%00b", bearer(kReader)).body, std::string("\x00\xfe", 2));
	EXPECT_EQ(send(p, "PUT", k + key_of(4), bearer(kWriter), "replaced").status, 200);
	EXPECT_EQ(get(p, k + key_of(4), bearer(kReader)).body, "replaced");

	Resp del = send(p, "DELETE", k + key_of(5), bearer(kWriter));
	EXPECT_EQ(del.status, 200) << del.body;
	expect_error(get(p, k + key_of(5), bearer(kReader)), 404, "SHMKV_ENOTFOUND");

	// refused: no token, a token that may only read, a cache no token writes
	Resp none = send(p, "PUT", k + "x", "", "v");
	expect_error(none, 401, "unauthorized");
	EXPECT_EQ(none.header("www-authenticate"), "Bearer realm=\"shmkv\"");
	expect_error(send(p, "DELETE", k + key_of(6), bearer(kReader)), 403, "forbidden");
	expect_error(send(p, "PUT", "/v1/caches/d/keys/x", bearer(kOther), "v"), 405, "writes_disabled");
	EXPECT_EQ(get(p, k + key_of(6), bearer(kReader)).status, 200);
	expect_error(get(p, "/v1/caches/d/keys/x", bearer(kOther)), 404, "SHMKV_ENOTFOUND");

	// bad values: the server's own checks and the loader's, nothing published
	expect_error(send(p, "PUT", k + "x", bearer(kWriter), std::string("\xff", 1)), 400, "bad_value");
	expect_error(send(p, "PUT", k + "x", bearer(kWriter) + "x-shmkv-type: i64\r\n", "1, \"remove\": true"), 400,
		     "bad_value");
	expect_error(send(p, "PUT", k + "x", bearer(kWriter) + "x-shmkv-type: i64\r\n", "\"text\""), 400,
		     "change_refused");
	// a type or an expiry of bytes no type name or time holds (not ASCII):
	// refused by the server, never passed on with U+FFFD in their place
	// (tests/fuzz: fuzz_http_req); they were the loader's change_refused
	expect_error(send(p, "PUT", k + "x", bearer(kWriter) + "x-shmkv-type: f32l\xeest\r\n", "[1]"), 400,
		     "bad_value");
	expect_error(send(p, "PUT", k + "x", bearer(kWriter) + "x-shmkv-expires: 2030-01-01T00:00:00Z\xff\r\n", "v"),
		     400, "bad_value");
	// a Unix time is digits alone (strtoll took "+4102444800" for one)
	expect_error(send(p, "PUT", k + "x", bearer(kWriter) + "x-shmkv-expires: +4102444800\r\n", "v"), 400,
		     "change_refused");
	expect_error(send(p, "PUT", k + "x", bearer(kWriter), std::string(9000, 'v')), 413, "change_too_large");
	expect_error(get(p, k + "x", bearer(kReader)), 404, "SHMKV_ENOTFOUND");
	expect_error(send(p, "PUT", "/v1/caches/c/keys/%zz", bearer(kWriter), "v"), 400, "bad_key");
	EXPECT_TRUE(s.alive());
}

// Writes with no loader listening: 503 naming the socket, reads go on.
TEST_F(AuthTest, PutWithoutLoader)
{
	Server s(env, {"--config", conf});
	unsigned p = s.port();
	EXPECT_EQ(get(p, "/v1/caches/c/keys/" + key_of(1), bearer(kReader)).status, 200);
	ld.kill9();
	Resp r = send(p, "PUT", "/v1/caches/c/keys/x", bearer(kWriter), "v");
	expect_error(r, 503, "no_loader");
	EXPECT_NE(r.body.find("control.sock"), std::string::npos) << r.body;
	EXPECT_EQ(get(p, "/v1/caches/c/keys/" + key_of(1), bearer(kReader)).status, 200);
}

// A root too long for a socket address (over 108 bytes): the loader listens
// through its directory's descriptor, and shmkv-http reaches it the same way
// (common/ctlconnect.c), as shmctl does.
TEST(LongRootTest, PutThroughALongRoot)
{
	const char *t = getenv("TMPDIR");
	std::string deep = make_temp_dir(t && *t ? t : "/tmp", "shmkv-longroot") + "/" + std::string(110, 'r');
	ASSERT_EQ(mkdir(deep.c_str(), 0755), 0) << deep << ": " << strerror(errno);
	std::string saved = t ? t : "";
	setenv("TMPDIR", deep.c_str(), 1);
	{
		Env env;
		ASSERT_GT(env.root().size() + sizeof "/control.sock", sizeof(sockaddr_un::sun_path)) << env.root();
		Loader ld{env};
		ASSERT_TRUE(ld.start());
		ASSERT_TRUE(build_and_load(ld, env, "c", "one", 10).ok());
		std::string conf = env.base() + "/http.conf";
		FILE *f = fopen(conf.c_str(), "w");
		ASSERT_NE(f, nullptr);
		fputs(("[token writer]\nsecret = " + kWriter + "\nwrite = c\n").c_str(), f);
		fclose(f);
		Server s(env, {"--config", conf});
		Resp put = send(s.port(), "PUT", "/v1/caches/c/keys/long", bearer(kWriter), "root");
		EXPECT_EQ(put.status, 200) << put.body;
		EXPECT_EQ(get(s.port(), "/v1/caches/c/keys/long", bearer(kWriter)).body, "root");
	}
	if (saved.empty())
		unsetenv("TMPDIR");
	else
		setenv("TMPDIR", saved.c_str(), 1);
	std::error_code ec;
	std::filesystem::remove_all(std::filesystem::path(deep).parent_path(), ec);
}

} // namespace
