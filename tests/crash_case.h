// crash_case.h - for tests that feed hostile bytes to the reader in-process
// (corruption_test, hostile_test): a crash kills the binary (a failed test),
// but first a SIGSEGV/SIGBUS/SIGFPE/SIGILL handler prints which case was
// running, then hands the signal on to the previous handler (a sanitizer's,
// if any). CASE(fmt, ...) names the case about to run. One test binary per
// includer: the state below is that binary's own.
#ifndef SHMKV_TEST_CRASH_CASE_H
#define SHMKV_TEST_CRASH_CASE_H

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include <gtest/gtest.h>

namespace shmkv_test {
namespace crash_case {

inline char g_case[512] = "(no case running)";
inline struct sigaction g_old[32];

inline void on_crash(int sig)
{
	static const char pre[] = "\n*** crashed in case: ";
	(void)!write(2, pre, sizeof pre - 1);
	(void)!write(2, g_case, strnlen(g_case, sizeof g_case));
	(void)!write(2, "\n", 1);
	sigaction(sig, &g_old[sig], nullptr); // the fault repeats into the old handler
	if (g_old[sig].sa_handler == SIG_DFL || g_old[sig].sa_handler == SIG_IGN) {
		signal(sig, SIG_DFL);
		raise(sig);
	}
}

class Report : public ::testing::Environment {
public:
	void SetUp() override
	{
		for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) {
			struct sigaction sa;
			memset(&sa, 0, sizeof sa);
			sa.sa_handler = on_crash;
			sigemptyset(&sa.sa_mask);
			sa.sa_flags = SA_NODEFER;
			sigaction(sig, &sa, &g_old[sig]);
		}
	}
};
[[maybe_unused]] inline const auto *g_env = ::testing::AddGlobalTestEnvironment(new Report);

} // namespace crash_case
} // namespace shmkv_test

#define CASE(...)                                                                                  \
	snprintf(shmkv_test::crash_case::g_case, sizeof shmkv_test::crash_case::g_case, __VA_ARGS__)

#endif // SHMKV_TEST_CRASH_CASE_H
