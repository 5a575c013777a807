// fault_util.cc - the bodies of fault_util.h's helpers (what each does is
// said there), compiled once into the loader_util library.
#include "fault_util.h"

namespace loader_test {

void Fault::set(const std::string &mode, long long arg, const std::string &path)
{
	std::string tmp = conf_ + ".tmp";
	ASSERT_TRUE(shmkv_test::write_file(tmp, mode + " " + std::to_string(arg) + " " + path +
							"\n"));
	ASSERT_EQ(rename(tmp.c_str(), conf_.c_str()), 0);
}

void Fault::hold(const std::string &path)
{
	unlink((conf_ + ".held").c_str());
	set("holdrename", epoch_, path);
}

bool Fault::held() const
{
	return wait_until([&] { return shmkv_test::file_exists(conf_ + ".held"); }, 60000, 5);
}

void Fault::hold_next(const std::string &path)
{
	set("holdrename", ++epoch_, path);
}

bool Fault::held_next() const
{
	std::string want = std::to_string(epoch_) + "\n";
	return wait_until([&] { return shmkv_test::read_file(conf_ + ".held") == want; }, 60000, 5);
}

bool start_with_shim(Loader &ld, const Fault &f, std::string *skip)
{
	std::string shim = env_or_empty("SHMKV_FAULT_SHIM");
	if (shim.empty()) {
		*skip = "SHMKV_FAULT_SHIM is not set (meson sets it)";
		return false;
	}
	if (!shmkv_test::emulator().empty()) {
		*skip = "under " + shmkv_test::emulator() + " a native LD_PRELOAD does not apply";
		return false;
	}
	std::string asan = env_or_empty("ASAN_OPTIONS");
	setenv("LD_PRELOAD", shim.c_str(), 1);
	setenv("SHMKV_FAULT_CONF", f.conf().c_str(), 1);
	// a sanitizer build: the shim comes before the ASan runtime, which is fine here
	setenv("ASAN_OPTIONS", (asan + (asan.empty() ? "" : ":") + "verify_asan_link_order=0").c_str(),
	       1);
	bool ok = ld.start();
	unsetenv("LD_PRELOAD");
	unsetenv("SHMKV_FAULT_CONF");
	if (asan.empty())
		unsetenv("ASAN_OPTIONS");
	else
		setenv("ASAN_OPTIONS", asan.c_str(), 1);
	return ok;
}

} // namespace loader_test
