// http_server.h - shmkv-http for the tests: started on an ephemeral loopback
// port with a root of a test's loader (tests/loader/loader_util.h), stopped
// (SIGTERM, a clean exit checked) with its test; and the checks of an
// error answer's JSON body.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <jansson.h>

#include "http_client.h"
#include "loader_util.h"

namespace http_test {

using namespace loader_test;

// The server, on an ephemeral loopback port; killed with its test.
class Server {
public:
	Server(const Env &env, std::vector<std::string> extra = {}) : env_(env)
	{
		std::string exe = env_or_empty("SHMKV_HTTP");
		std::string pf = env.base() + "/http.port";
		unlink(pf.c_str());
		std::vector<std::string> args = {exe, "--root", env.root(), "--listen", "127.0.0.1:0",
						 "--port-file", pf};
		args.insert(args.end(), extra.begin(), extra.end());
		pid_ = fork();
		if (pid_ == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			int fd = open((env.base() + "/http.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
			dup2(fd, 2);
			std::vector<char *> argv;
			for (std::string &a : args)
				argv.push_back(&a[0]);
			argv.push_back(nullptr);
			execv(argv[0], argv.data());
			_exit(127);
		}
		EXPECT_TRUE(wait_until([&] { return !read_file(pf).empty(); }, 30000))
			<< read_file(env.base() + "/http.log");
		port_ = (unsigned)atoi(read_file(pf).c_str());
	}
	~Server()
	{
		if (pid_ > 0) {
			kill(pid_, SIGTERM);
			int st = 0;
			waitpid(pid_, &st, 0);
			EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
				<< "shmkv-http did not stop cleanly: " << read_file(env_.base() + "/http.log");
		}
	}
	unsigned port() const { return port_; }
	pid_t pid() const { return pid_; }
	bool alive() { return waitpid(pid_, nullptr, WNOHANG) == 0; }

private:
	const Env &env_;
	pid_t pid_ = -1;
	unsigned port_ = 0;
};

inline json_t *parse(const Resp &r)
{
	json_error_t e;
	json_t *j = json_loadb(r.body.data(), r.body.size(), 0, &e);
	EXPECT_NE(j, nullptr) << "not JSON: " << r.body;
	return j;
}

// An error answer: the status and a JSON body {"error", "code", "status"}.
inline void expect_error(const Resp &r, int status, const std::string &code)
{
	EXPECT_EQ(r.status, status) << r.body;
	EXPECT_EQ(r.header("content-type"), "application/json");
	json_t *j = parse(r);
	if (!j)
		return;
	EXPECT_TRUE(json_is_string(json_object_get(j, "error"))) << r.body;
	EXPECT_STREQ(json_string_value(json_object_get(j, "code")), code.c_str()) << r.body;
	EXPECT_EQ(json_integer_value(json_object_get(j, "status")), status);
	json_decref(j);
}

} // namespace http_test
