// tls_test: shmkv-http with tls_cert and tls_key (http/README.md "TLS"):
// answers over TLS with a certificate a client verifies, HTTP/2 by ALPN,
// nothing in plain HTTP on that port; a key that does not match its
// certificate, or one of the two alone, stops the start. The client is the
// curl command (skipped without it), the certificate made by openssl's.
#include "http_server.h"

using namespace http_test;

namespace {

bool have(const char *cmd)
{
	return system((std::string("command -v ") + cmd + " >/dev/null 2>&1").c_str()) == 0;
}

struct TlsTest : ::testing::Test {
	Env env;
	Loader ld{env};
	std::string cert, key;
	void SetUp() override
	{
		if (!have("curl") || !have("openssl"))
			GTEST_SKIP() << "needs the curl and openssl commands";
		ASSERT_TRUE(ld.start());
		ASSERT_TRUE(build_and_load(ld, env, "c", "one", 100).ok());
		cert = env.base() + "/cert.pem";
		key = env.base() + "/key.pem";
		ASSERT_EQ(make_cert(cert, key), 0);
	}
	int make_cert(const std::string &c, const std::string &k)
	{
		std::string cmd = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + k +
				  " -out " + c + " -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>" +
				  env.base() + "/openssl.err";
		return system(cmd.c_str());
	}
	// curl's output (the body, then "|" and the HTTP version) and status
	std::string curl(unsigned port, const std::string &path, const std::string &extra = "")
	{
		std::string out = env.base() + "/curl.out";
		std::string cmd = "curl -sS --max-time 30 --cacert " + cert + " " + extra + " -w '|%{http_code}|%{http_version}' https://127.0.0.1:" +
				  std::to_string(port) + path + " >" + out + " 2>&1";
		(void)system(cmd.c_str());
		return read_file(out);
	}
};

TEST_F(TlsTest, ServesOverTls)
{
	Server s(env, {"--tls-cert", cert, "--tls-key", key});
	unsigned p = s.port();
	std::string k = "/v1/caches/c/keys/" + key_of(3);
	EXPECT_EQ(curl(p, k, "--http1.1"), value_of("one", 3) + "|200|1.1");
	EXPECT_EQ(curl(p, k, "--http2"), value_of("one", 3) + "|200|2");
	std::string missing = curl(p, "/v1/caches/c/keys/nope", "--http2");
	EXPECT_NE(missing.find("\"code\": \"SHMKV_ENOTFOUND\""), std::string::npos) << missing;
	EXPECT_NE(missing.find("|404|2"), std::string::npos) << missing;
	// plain HTTP on the TLS port: no HTTP answer
	Resp plain = get(p, k, "", 10000);
	EXPECT_EQ(plain.status, 0) << plain.body;
	// a client that does not trust the certificate is refused by its own check
	std::string other = env.base() + "/other.pem", okey = env.base() + "/other.key";
	ASSERT_EQ(make_cert(other, okey), 0);
	std::string out = env.base() + "/bad.out";
	std::string cmd = "curl -sS --max-time 30 --cacert " + other + " https://127.0.0.1:" + std::to_string(p) + k + " >" + out + " 2>&1";
	EXPECT_NE(system(cmd.c_str()), 0) << read_file(out);
	EXPECT_EQ(curl(p, "/healthz"), "{\"status\": \"ok\"}\n|200|2");
	EXPECT_TRUE(s.alive());
}

TEST_F(TlsTest, BadCertificatesStopTheStart)
{
	std::string other = env.base() + "/other.pem", okey = env.base() + "/other.key";
	ASSERT_EQ(make_cert(other, okey), 0);
	struct Case {
		std::string args, says;
	} cases[] = {
		{"--tls-cert " + cert + " --tls-key " + okey, "tls_key " + okey + ": "},
		{"--tls-cert " + cert, "tls_cert and tls_key go together"},
		{"--tls-cert " + env.base() + "/none.pem --tls-key " + key, "tls_cert " + env.base() + "/none.pem"},
		{"--tls-cert " + key + " --tls-key " + key, "tls_cert " + key},
	};
	for (const Case &c : cases) {
		std::string out = env.base() + "/start.out";
		int st = system((env_or_empty("SHMKV_HTTP") + " --listen 127.0.0.1:0 --root " + env.root() + " " + c.args +
				 " 2>" + out)
					.c_str());
		EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1) << c.args;
		EXPECT_NE(read_file(out).find(c.says), std::string::npos) << c.args << " -> " << read_file(out);
	}
}

} // namespace
