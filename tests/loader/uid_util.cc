// uid_util.cc - the bodies of uid_util.h's helpers (what each does is said
// there), compiled once into the loader_util library.
#include "uid_util.h"

namespace loader_test {

void say(int fd, const std::string &s)
{
	std::string l = s + "\n";
	write_all_fd(fd, l.data(), l.size());
}

std::string as_other(const std::vector<gid_t> &groups, const std::function<void(int)> &fn,
		     int *code)
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

std::string group_conf(const Env &env, const std::string &extra)
{
	std::string conf = env.base() + "/loader.conf";
	EXPECT_TRUE(shmkv_test::write_file(conf, "[loader]\ngroup = " + std::to_string(kGroup) +
							 "\n" + extra));
	EXPECT_EQ(chmod(env.shm().c_str(), 01777), 0);
	return conf;
}

} // namespace loader_test
