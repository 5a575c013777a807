// uid_util.h - a second local user in the loader tests (trust_test,
// chain_test, ctlplane_test, tests/bpf): uid 4242 (numeric, no account
// needed), the loader's [loader] group 4343, acting through setresuid in a
// forked child; the caller is root, else the test skips and says why.
// Bodies in uid_util.cc, in the loader_util library.
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

void say(int fd, const std::string &s);

// Runs fn as uid kOther (gid kOther, supplementary groups) in a child;
// returns what it wrote (one line per broken expectation) and its exit
// code, which must be 0.
std::string as_other(const std::vector<gid_t> &groups, const std::function<void(int)> &fn,
		     int *code = nullptr);

// The loader's config with [loader] group = kGroup (plus extra lines), and
// the Env's shm dir made like /dev/shm: world-writable and sticky.
std::string group_conf(const Env &env, const std::string &extra = "");

} // namespace loader_test

#endif // SHMKV_LOADER_UID_UTIL_H
