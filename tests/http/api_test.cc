// api_test: shmkv-http against a real shmkv-loader (http/README.md): every
// endpoint, every value type raw and as JSON, percent-encoded and binary
// keys, 404s with JSON bodies, ETag/304, limits and their status codes, a
// swap during a run of batches (each answer from one generation), a dropped
// cache, a restarted loader.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <atomic>
#include <set>
#include <thread>

#include <jansson.h>
#include <shmkv_build.h>

#include "http_server.h"

using namespace loader_test;
using namespace http_test;

namespace {

const std::string kBin("\xff\x00k/?%#", 7); // not UTF-8, a NUL, the URL's own characters

// A cache of every type, and keys that need encoding.
std::string build_typed(const std::string &path)
{
	shmkv_build_options o = shmkv_test::test_options();
	shmkv_builder *b = nullptr;
	int err = shmkv_builder_new(&o, &b);
	if (err)
		return shmkv_strerror(err);
	const float f32[] = {1.5f, -2.0f};
	const double f64[] = {0.25, 1e300};
	const int64_t i64[] = {-1, 7};
	const char *strs[] = {"a", "\xc3\xa9"};
	const size_t lens[] = {1, 2};
	if (!err)
		err = shmkv_builder_add_str(b, "s", 1, "hé", 3);
	if (!err)
		err = shmkv_builder_add_bytes(b, "b", 1, "\x00\x01\xff", 3);
	if (!err)
		err = shmkv_builder_add_i64(b, "i", 1, -42);
	if (!err)
		err = shmkv_builder_add_bool(b, "t", 1, 1);
	if (!err)
		err = shmkv_builder_add_f64(b, "f", 1, 2.5);
	if (!err)
		err = shmkv_builder_add_f32list(b, "fl", 2, f32, 2);
	if (!err)
		err = shmkv_builder_add_f64list(b, "dl", 2, f64, 2);
	if (!err)
		err = shmkv_builder_add_i64list(b, "il", 2, i64, 2);
	if (!err)
		err = shmkv_builder_add_strlist(b, "sl", 2, strs, lens, 2);
	if (!err)
		err = shmkv_builder_add_str(b, "a/b c", 5, "spaced", 6);
	if (!err)
		err = shmkv_builder_add_str(b, kBin.data(), kBin.size(), "binary", 6);
	return builder_done(b, path, err);
}

struct HttpTest : ::testing::Test {
	Env env;
	Loader ld{env};
	void SetUp() override
	{
		ASSERT_TRUE(ld.start());
		ASSERT_TRUE(build_and_load(ld, env, "c", "one", 1000).ok());
		std::string err = build_typed(env.img_path("typed.shmkv"));
		ASSERT_EQ(err, "");
		ASSERT_TRUE(ld.load("t", env.img_path("typed.shmkv")).ok());
	}
};

TEST_F(HttpTest, Endpoints)
{
	Server s(env, {"--caches", "c,t"});
	unsigned p = s.port();
	EXPECT_EQ(get(p, "/healthz").status, 200);
	EXPECT_EQ(get(p, "/readyz").status, 200);

	Resp l = get(p, "/v1/caches");
	ASSERT_EQ(l.status, 200) << l.body;
	json_t *j = parse(l);
	json_t *arr = json_object_get(j, "caches");
	std::set<std::string> names;
	for (size_t i = 0; i < json_array_size(arr); i++) {
		json_t *e = json_array_get(arr, i);
		names.insert(json_string_value(json_object_get(e, "name")));
		EXPECT_GE(json_integer_value(json_object_get(e, "generation")), 1);
		EXPECT_GT(json_integer_value(json_object_get(e, "size")), 0);
	}
	json_decref(j);
	EXPECT_EQ(names, (std::set<std::string>{"c", "t"}));

	Resp r = get(p, "/v1/caches/c/keys/" + key_of(5));
	EXPECT_EQ(r.status, 200);
	EXPECT_EQ(r.body, value_of("one", 5));
	EXPECT_EQ(r.header("content-type"), "text/plain; charset=utf-8");
	EXPECT_EQ(r.header("x-shmkv-type"), "string");
	EXPECT_EQ(r.header("content-length"), std::to_string(r.body.size()));
	EXPECT_EQ(r.header("server"), ""); // no library name and version to every client
	std::string gen = r.header("x-shmkv-generation"), tag = r.header("etag");
	EXPECT_FALSE(gen.empty());
	EXPECT_EQ(tag.rfind("\"" + gen + "-", 0), 0u) << tag;

	Resp nm = get(p, "/v1/caches/c/keys/" + key_of(5), "If-None-Match: " + tag + "\r\n");
	EXPECT_EQ(nm.status, 304);
	EXPECT_EQ(nm.body, "");
	Resp other = get(p, "/v1/caches/c/keys/" + key_of(5), "If-None-Match: \"0-0\"\r\n");
	EXPECT_EQ(other.status, 200);

	expect_error(get(p, "/v1/caches/c/keys/absent"), 404, "SHMKV_ENOTFOUND");
	expect_error(get(p, "/v1/caches/nosuch/keys/x"), 404, "no_cache");
	expect_error(get(p, "/v1/caches/bad%20name/keys/x"), 400, "bad_request");
	expect_error(get(p, "/nowhere"), 404, "no_route");
	expect_error(raw(p, "PATCH /v1/caches/c/keys/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"), 405,
		     "method_not_allowed");

	Resp b = post(p, "/v1/caches/c/get",
		      "{\"keys\": [\"" + key_of(1) + "\", \"absent\", {\"base64\": \"a2V5XzE=\"}]}");
	ASSERT_EQ(b.status, 200) << b.body;
	j = parse(b);
	json_t *res = json_object_get(j, "results");
	ASSERT_EQ(json_array_size(res), 3u) << b.body;
	EXPECT_EQ(json_string_value(json_object_get(json_array_get(res, 0), "value")), value_of("one", 1));
	EXPECT_STREQ(json_string_value(json_object_get(json_array_get(res, 1), "code")), "SHMKV_ENOTFOUND");
	EXPECT_EQ(std::to_string(json_integer_value(json_object_get(j, "generation"))), gen);
	json_decref(j);

	// hits: three gets of key 5 (the 304 too) and two keys of the batch
	Resp m = get(p, "/metrics");
	EXPECT_EQ(m.status, 200);
	EXPECT_NE(m.body.find("shmkv_http_cache_hits_total{cache=\"c\"} 5\n"), std::string::npos) << m.body;
	EXPECT_NE(m.body.find("shmkv_http_cache_misses_total{cache=\"c\"} 2\n"), std::string::npos) << m.body;
	EXPECT_NE(m.body.find("shmkv_http_cache_generation{cache=\"c\"} " + gen + "\n"), std::string::npos);
	EXPECT_NE(m.body.find("shmkv_http_request_duration_seconds_count "), std::string::npos);
	EXPECT_TRUE(s.alive());
}

TEST_F(HttpTest, TypesAndKeys)
{
	Server s(env);
	unsigned p = s.port();
	struct Case {
		std::string key, ctype, raw, json;
	} cases[] = {
		{"s", "text/plain; charset=utf-8", "h\xc3\xa9", "\"h\xc3\xa9\""},
		{"b", "application/octet-stream", std::string("\x00\x01\xff", 3), "\"AAH/\""},
		{"i", "application/x-shmkv-i64", std::string("\xd6\xff\xff\xff\xff\xff\xff\xff", 8), "-42"},
		{"t", "application/x-shmkv-bool", "\x01", "true"},
		{"fl", "application/x-shmkv-f32list", "", "[1.5, -2.0]"},
		{"dl", "application/x-shmkv-f64list", "", "[0.25, 1.0000000000000001e+300]"},
		{"il", "application/x-shmkv-i64list", "", "[-1, 7]"},
		{"sl", "application/x-shmkv-strlist", "", "[\"a\", \"\xc3\xa9\"]"},
		{"a/b c", "text/plain; charset=utf-8", "spaced", "\"spaced\""},
		{kBin, "text/plain; charset=utf-8", "binary", "\"binary\""},
	};
	for (const Case &c : cases) {
		std::string url = "/v1/caches/t/keys/" + pct(c.key);
		Resp r = get(p, url);
		EXPECT_EQ(r.status, 200) << url << " " << r.body;
		EXPECT_EQ(r.header("content-type"), c.ctype) << url;
		if (!c.raw.empty()) {
			EXPECT_EQ(r.body, c.raw) << url;
		}
		Resp jr = get(p, url, "Accept: application/json\r\n");
		EXPECT_EQ(jr.status, 200) << url;
		EXPECT_NE(jr.body.find("\"value\": " + c.json + "}"), std::string::npos) << url << " " << jr.body;
	}
	Resp jb = get(p, "/v1/caches/t/keys/" + pct(kBin), "Accept: application/json\r\n");
	EXPECT_NE(jb.body.find("\"key_base64\": "), std::string::npos) << jb.body;
	// a key with a raw space or a broken escape is refused, never guessed
	expect_error(get(p, "/v1/caches/t/keys/%zz"), 400, "bad_key");
	expect_error(get(p, "/v1/caches/t/keys/a%2"), 400, "bad_key");
	expect_error(get(p, "/v1/caches/t/keys/%C3"), 404, "SHMKV_ENOTFOUND"); // any bytes: a lookup
	// the f64 raw bytes: 2.5 little-endian
	double d = 2.5;
	EXPECT_EQ(get(p, "/v1/caches/t/keys/f").body, std::string((const char *)&d, 8));
}

TEST_F(HttpTest, Limits)
{
	Server s(env, {"--max-batch-keys", "3", "--max-url", "1K", "--max-body", "2K"});
	unsigned p = s.port();
	expect_error(post(p, "/v1/caches/c/get", "{\"keys\": [\"a\", \"b\", \"c\", \"d\"]}"), 413,
		     "too_many_keys");
	expect_error(get(p, "/v1/caches/c/keys/" + std::string(1500, 'k')), 414, "uri_too_long");
	Resp big = post(p, "/v1/caches/c/get", "{\"keys\": [\"" + std::string(4000, 'k') + "\"]}");
	EXPECT_EQ(big.status, 413) << big.body;
	expect_error(post(p, "/v1/caches/c/get", "{\"keys\": [1]}"), 400, "bad_request");
	expect_error(post(p, "/v1/caches/c/get", "not json"), 400, "bad_request");
	expect_error(post(p, "/v1/caches/c/get", "{\"keys\": [{\"base64\": \"@@\"}]}"), 400, "bad_request");
	// a key object holds base64 alone (a second member is a client's mistake)
	expect_error(post(p, "/v1/caches/c/get", "{\"keys\": [{\"base64\": \"a2V5XzE=\", \"x\": 1}]}"), 400,
		     "bad_request");
	EXPECT_EQ(get(p, "/healthz").status, 200);
	EXPECT_TRUE(s.alive());
}

// Batches while the loader swaps generations: every answer's values carry
// one tag, the one of the generation the answer names.
TEST_F(HttpTest, SwapDuringRequests)
{
	Server s(env);
	unsigned p = s.port();
	std::string body = "{\"keys\": [";
	for (int i = 0; i < 50; i++)
		body += (i ? ", \"" : "\"") + key_of((uint64_t)i * 19) + "\"";
	body += "]}";
	std::atomic<bool> done{false};
	std::thread loads([&] {
		for (int g = 0; g < 6; g++)
			EXPECT_TRUE(build_and_load(ld, env, "c", g % 2 ? "one" : "two", 1000).ok());
		done = true;
	});
	std::map<uint64_t, std::string> tag_of_gen;
	int answers = 0;
	while (!done || answers < 20) {
		Resp r = post(p, "/v1/caches/c/get", body);
		ASSERT_EQ(r.status, 200) << r.body;
		json_t *j = parse(r);
		uint64_t gen = (uint64_t)json_integer_value(json_object_get(j, "generation"));
		json_t *res = json_object_get(j, "results");
		std::set<std::string> tags;
		for (size_t i = 0; i < json_array_size(res); i++) {
			std::string v = json_string_value(json_object_get(json_array_get(res, i), "value"));
			tags.insert(v.substr(0, v.find(':')));
		}
		json_decref(j);
		ASSERT_EQ(tags.size(), 1u) << "one answer mixed generations: " << r.body.substr(0, 300);
		auto it = tag_of_gen.emplace(gen, *tags.begin()).first;
		EXPECT_EQ(it->second, *tags.begin()) << "generation " << gen << " answered with two tags";
		answers++;
	}
	loads.join();
	EXPECT_GE(tag_of_gen.size(), 2u) << "no swap was seen";
}

TEST_F(HttpTest, DroppedCacheAndRestartedLoader)
{
	Server s(env);
	unsigned p = s.port();
	Resp before = get(p, "/v1/caches/c/keys/" + key_of(1));
	EXPECT_EQ(before.status, 200);
	EXPECT_TRUE(ld.req({"drop", "c"}).ok());
	expect_error(get(p, "/v1/caches/c/keys/" + key_of(1)), 404, "no_cache");
	EXPECT_TRUE(build_and_load(ld, env, "c", "two", 1000).ok());
	Resp r = get(p, "/v1/caches/c/keys/" + key_of(1));
	EXPECT_EQ(r.status, 200);
	EXPECT_EQ(r.body, value_of("two", 1));
	// another image, whatever its generation: another tag, and the old one
	// is not answered 304
	EXPECT_NE(r.header("etag"), before.header("etag"));
	EXPECT_EQ(get(p, "/v1/caches/c/keys/" + key_of(1), "If-None-Match: " + before.header("etag") + "\r\n").status,
		  200);

	ld.kill9();
	ASSERT_TRUE(ld.start());
	EXPECT_EQ(get(p, "/v1/caches/c/keys/" + key_of(2)).body, value_of("two", 2));
	EXPECT_TRUE(build_and_load(ld, env, "c", "one", 1000).ok());
	EXPECT_EQ(get(p, "/v1/caches/c/keys/" + key_of(2)).body, value_of("one", 2));
	EXPECT_EQ(get(p, "/v1/caches/t/keys/s").body, "h\xc3\xa9");
}

} // namespace

namespace {

// Socket activation (systemd's LISTEN_FDS protocol, packaging's
// shmkv-http.socket): the server takes fd 3 instead of binding, and refuses
// a passed descriptor that is not a listening TCP socket.
pid_t start_activated(const Env &env, int fd)
{
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int log = open((env.base() + "/act.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(log, 2);
		if (fd == 3)
			fcntl(3, F_SETFD, 0); /* dup2 onto itself would keep close-on-exec */
		else
			dup2(fd, 3);
		setenv("LISTEN_PID", std::to_string(getpid()).c_str(), 1);
		setenv("LISTEN_FDS", "1", 1);
		std::string exe = env_or_empty("SHMKV_HTTP");
		execl(exe.c_str(), exe.c_str(), "--root", env.root().c_str(), (char *)nullptr);
		_exit(127);
	}
	return pid;
}

TEST_F(HttpTest, SocketActivation)
{
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sockaddr_in a{};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t al = sizeof a;
	ASSERT_EQ(bind(ls, (sockaddr *)&a, sizeof a), 0);
	ASSERT_EQ(listen(ls, 16), 0);
	ASSERT_EQ(getsockname(ls, (sockaddr *)&a, &al), 0);
	unsigned port = ntohs(a.sin_port);
	pid_t pid = start_activated(env, ls);
	close(ls);
	// the kernel queues connections before the server runs: no wait needed
	Resp r = get(port, "/v1/caches/c/keys/" + key_of(2));
	EXPECT_EQ(r.status, 200) << r.body << read_file(env.base() + "/act.log");
	EXPECT_EQ(r.body, value_of("one", 2));
	kill(pid, SIGTERM);
	int st = 0;
	waitpid(pid, &st, 0);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	// a descriptor that is not a listening socket: refused with the reason
	int notl = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	pid = start_activated(env, notl);
	close(notl);
	waitpid(pid, &st, 0);
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	EXPECT_NE(read_file(env.base() + "/act.log").find("expected one listening TCP socket"), std::string::npos)
		<< read_file(env.base() + "/act.log");
}

} // namespace
