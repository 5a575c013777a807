// hostile_test: shmkv-http against hostile clients on loopback: slow heads
// (slowloris), oversized and malformed requests, invalid encodings, 1,000
// connections at once. Throughout, other clients are answered, the server
// never dies, and its memory stays within its bound (http/README.md
// "Limits and hostile clients"): max_connections x (head + body limits).
#include <sys/resource.h>

#include <chrono>
#include <vector>

#include "http_server.h"

using namespace http_test;

namespace {

struct HostileTest : ::testing::Test {
	Env env;
	Loader ld{env};
	void SetUp() override
	{
		ASSERT_TRUE(ld.start());
		ASSERT_TRUE(build_and_load(ld, env, "c", "one", 1000).ok());
	}
};

// VmRSS of pid, in KiB (0: unknown).
long rss_kib(pid_t pid)
{
	std::string st = read_file("/proc/" + std::to_string(pid) + "/status");
	size_t p = st.find("VmRSS:");
	return p == std::string::npos ? 0 : atol(st.c_str() + p + 6);
}

// A connection that has sent text and waits.
int open_with(unsigned port, const std::string &text)
{
	int fd = connect_to(port);
	if (fd >= 0 && !text.empty() && send(fd, text.data(), text.size(), MSG_NOSIGNAL) != (ssize_t)text.size()) {
		close(fd);
		return -1;
	}
	return fd;
}

// Waits for the server to close fd (EOF or reset) within ms; what it sent.
bool closed_within(int fd, unsigned ms, std::string *got = nullptr)
{
	auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
	char buf[4096];
	while (std::chrono::steady_clock::now() < end) {
		pollfd p{fd, POLLIN, 0};
		if (poll(&p, 1, 200) <= 0)
			continue;
		ssize_t n = read(fd, buf, sizeof buf);
		if (n <= 0)
			return true;
		if (got)
			got->append(buf, (size_t)n);
	}
	return false;
}

std::string post_req(const std::string &body)
{
	return "POST /v1/caches/c/get HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: " +
	       std::to_string(body.size()) + "\r\n\r\n" + body;
}

void expect_served(unsigned p)
{
	Resp r = get(p, "/v1/caches/c/keys/" + key_of(7), "", 20000);
	EXPECT_EQ(r.status, 200) << r.body;
	EXPECT_EQ(r.body, value_of("one", 7));
}

TEST_F(HostileTest, Slowloris)
{
	Server s(env, {"--request-timeout", "1s"});
	unsigned p = s.port();
	std::vector<int> slow;
	for (int i = 0; i < 100; i++) {
		int fd = open_with(p, "GET /v1/caches/c/keys/" + key_of(1) + " HTTP/1.1\r\nHost: t\r\nX-a: ");
		ASSERT_GE(fd, 0);
		slow.push_back(fd);
	}
	// a byte now and then never completes the head: the server answers
	// others meanwhile, and closes the slow ones past request_timeout
	for (int round = 0; round < 3; round++) {
		for (int fd : slow)
			send(fd, "a", 1, MSG_NOSIGNAL);
		expect_served(p);
	}
	int closed = 0;
	for (int fd : slow) {
		closed += closed_within(fd, 30000);
		close(fd);
	}
	EXPECT_EQ(closed, 100) << "slow heads were kept open past request_timeout";
	// a slow body too
	int fd = open_with(p, "POST /v1/caches/c/get HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{\"keys\"");
	ASSERT_GE(fd, 0);
	expect_served(p);
	EXPECT_TRUE(closed_within(fd, 30000));
	close(fd);
	EXPECT_TRUE(s.alive());
}

TEST_F(HostileTest, OversizedAndMalformed)
{
	Server s(env, {"--max-body", "4K"});
	unsigned p = s.port();
	const std::string key = "/v1/caches/c/keys/" + key_of(1);
	struct Case {
		std::string what, req;
		int status; // 0: any 4xx or a closed connection without an answer
	} cases[] = {
		{"head over 8 KiB", "GET " + key + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\nX-big: " + std::string(20000, 'x') + "\r\n\r\n", 431},
		{"10,000 headers", "GET " + key + " HTTP/1.1\r\n" + [] {
			 std::string h;
			 for (int i = 0; i < 10000; i++)
				 h += "X-" + std::to_string(i) + ": v\r\n";
			 return h;
		 }() + "\r\n", 0},
		{"body over max_body", "POST /v1/caches/c/get HTTP/1.1\r\nHost: t\r\nContent-Length: 2147483648\r\n\r\n{", 413},
		{"negative length", "POST /v1/caches/c/get HTTP/1.1\r\nHost: t\r\nContent-Length: -5\r\n\r\n", 0},
		{"bad chunk size", "POST /v1/caches/c/get HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0},
		{"huge chunk", "POST /v1/caches/c/get HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n", 0},
		{"garbage line", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 0},
		{"no version", "GET " + key + "\r\n\r\n", 0},
		{"bad version", "GET " + key + " HTTP/9.9\r\nHost: t\r\n\r\n", 0},
		{"header without colon", "GET " + key + " HTTP/1.1\r\nHost t\r\n\r\n", 0},
		{"NUL in target", std::string("GET /v1/caches/c/keys/a\0b HTTP/1.1\r\nHost: t\r\n\r\n", 46), 0},
		{"bad percent", "GET /v1/caches/c/keys/%G1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 400},
		{"truncated percent", "GET /v1/caches/c/keys/ab% HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 400},
		{"raw high byte", "GET /v1/caches/c/keys/\xc3\xa9 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 400},
		{"cache name encoded", "GET /v1/caches/%2e%2e/keys/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 0},
		{"batch not UTF-8", post_req("{\"keys\": [\"\xff\"]}"), 400},
		{"batch nested deep", post_req(std::string(4000, '[')), 400},
		{"batch bad base64", post_req("{\"keys\": [{\"base64\": \"!!\"}]}"), 400},
		{"batch over-long UTF-8", post_req("{\"keys\": [\"\xc0\xaf\"]}"), 400},
		{"batch surrogate escape", post_req("{\"keys\": [\"\\ud800\"]}"), 400},
	};
	for (const Case &c : cases) {
		Resp r = raw(p, c.req, 30000);
		if (c.status)
			EXPECT_EQ(r.status, c.status) << c.what << ": " << r.body;
		else
			EXPECT_TRUE(r.status == 0 || (r.status >= 400 && r.status < 500)) << c.what << ": " << r.status << " " << r.body;
		ASSERT_TRUE(s.alive()) << "died on: " << c.what;
		expect_served(p);
	}
}

TEST_F(HostileTest, ThousandConnections)
{
	rlimit rl{};
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_max < 2200)
		GTEST_SKIP() << "RLIMIT_NOFILE hard limit " << rl.rlim_max << " < 2200: cannot hold 1,000 connections";
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl); // the server inherits it
	Server s(env, {"--max-connections", "1024", "--request-timeout", "60s"});
	unsigned p = s.port();
	long rss0 = rss_kib(s.pid());
	// 1,000 connections, each with half a head of 4 KiB: all held open at once
	std::vector<int> fds;
	std::string half = "GET /v1/caches/c/keys/" + key_of(1) + " HTTP/1.1\r\nHost: t\r\nX-pad: " + std::string(4000, 'p');
	for (int i = 0; i < 1000; i++) {
		int fd = open_with(p, half);
		ASSERT_GE(fd, 0) << "connection " << i;
		fds.push_back(fd);
	}
	expect_served(p); // the 1,001st is answered
	long rss1 = rss_kib(s.pid());
	// the bound: per connection its head (8 KiB) and buffers, far below 64 KiB
	EXPECT_LT(rss1 - rss0, 1000L * 64) << "RSS " << rss0 << " KiB -> " << rss1 << " KiB";
	// each completes its request and is answered
	int answered = 0;
	for (int fd : fds) {
		send(fd, "\r\nConnection: close\r\n\r\n", 23, MSG_NOSIGNAL);
	}
	for (int fd : fds) {
		std::string got;
		closed_within(fd, 30000, &got);
		answered += got.compare(0, 12, "HTTP/1.1 200") == 0;
		close(fd);
	}
	EXPECT_EQ(answered, 1000);
	EXPECT_TRUE(s.alive());
}

TEST_F(HostileTest, OverMaxConnections)
{
	Server s(env, {"--max-connections", "50", "--request-timeout", "60s"});
	unsigned p = s.port();
	std::vector<int> fds;
	for (int i = 0; i < 50; i++) {
		int fd = open_with(p, "GET / HTTP/1.1\r\n");
		ASSERT_GE(fd, 0);
		fds.push_back(fd);
	}
	// the server has taken all 50 (accepted in order): the next is refused
	ASSERT_TRUE(wait_until([&] { return get(p, "/healthz", "", 20000).status == 503; }, 30000));
	Resp r = get(p, "/healthz");
	expect_error(r, 503, "busy");
	for (int fd : fds)
		close(fd);
	EXPECT_TRUE(wait_until([&] { return get(p, "/healthz").status == 200; }, 30000));
	Resp m = get(p, "/metrics");
	EXPECT_NE(m.body.find("shmkv_http_connections_refused_total "), std::string::npos);
	EXPECT_TRUE(s.alive());
}

} // namespace
