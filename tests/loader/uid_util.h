// uid_util.h - a second local user in the loader tests (trust_test,
// chain_test, ctlplane_test, tests/bpf): uid 4242 (numeric, no account
// needed), the loader's [loader] group 4343, acting through setresuid in a
// forked child; the caller is root, else the test skips and says why.
//
//   kOther, kGroup       the second uid and the loader's group
//   NEED_ROOT_FOR(why)   skips a test (with why) unless running as root
//   say(fd, s)           a line to a child's result pipe
//   as_other(groups, fn) fn run as kOther (supplementary groups given) in a
//                        child; what it said, one line per broken expectation
//   group_conf(env)      a loader config with group = kGroup, the shm dir
//                        made like /dev/shm (1777)
#ifndef SHMKV_LOADER_UID_UTIL_H
#define SHMKV_LOADER_UID_UTIL_H

#include "loader_util.h"

namespace loader_test {

constexpr uid_t kOther = 4242;
constexpr gid_t kGroup = 4343;

#define NEED_ROOT_FOR(why)                                                                  \
	do {                                                                                 \
		if (geteuid() != 0)                                                          \
			GTEST_SKIP() << "needs root " why;                                   \
	} while (0)

inline void say(int fd, const std::string &s)
{
	std::string l = s + "\n";
	write_all_fd(fd, l.data(), l.size());
}

// Runs fn as uid kOther (gid kOther, supplementary groups) in a child;
// returns what it wrote (one line per broken expectation) and its exit
// code, which must be 0.
inline std::string as_other(const std::vector<gid_t> &groups, const std::function<void(int)> &fn,
			    int *code = nullptr)
{
	Child c([&](int fd) -> int {
		if (setgroups(groups.size(), groups.data()) != 0 ||
		    setresgid(kOther, kOther, kOther) != 0 || setresuid(kOther, kOther, kOther) != 0) {
			say(fd, std::string("could not become uid 4242: ") + strerror(errno));
			return 3;
		}
		fn(fd);
		return 0;
	});
	std::string out = c.read_all(30000);
	int rc = c.wait_exit(30000);
	if (code)
		*code = rc;
	EXPECT_EQ(rc, 0) << out;
	return out;
}

// The loader's config with [loader] group = kGroup (plus extra lines), and
// the Env's shm dir made like /dev/shm: world-writable and sticky.
inline std::string group_conf(const Env &env, const std::string &extra = "")
{
	std::string conf = env.base() + "/loader.conf";
	EXPECT_TRUE(shmkv_test::write_file(conf, "[loader]\ngroup = " + std::to_string(kGroup) +
							 "\n" + extra));
	EXPECT_EQ(chmod(env.shm().c_str(), 01777), 0);
	return conf;
}

} // namespace loader_test

#endif // SHMKV_LOADER_UID_UTIL_H
