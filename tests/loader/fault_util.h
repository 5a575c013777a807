// fault_util.h - read faults asked of a loader: the control file of
// fault_conf.h and a loader started with fault_shim.c preloaded (pread
// engine). For fault_test, hugepage_test, writes_test and durable_test;
// meson sets SHMKV_FAULT_SHIM.
// Bodies in fault_util.cc, in the loader_util library.
#pragma once

#include "loader_util.h"

namespace loader_test {

// The shim's control file: "MODE ARG PATH", or nothing.
class Fault {
public:
	explicit Fault(const Env &env) : conf_(env.base() + "/fault.conf") { clear(); }
	void set(const std::string &mode, long long arg, const std::string &path);
	void clear() { unlink(conf_.c_str()); }
	// The next rename onto path (or, by descriptor, onto its last
	// component: a builder's output, the state file) waits until clear()
	// or another fault; held() once one does (fault_conf.h: holdrename).
	void hold(const std::string &path);
	bool held() const;
	// Lets the rename held now go on and holds the next one onto path;
	// held_next() once that one waits.
	void hold_next(const std::string &path);
	bool held_next() const;
	const std::string &conf() const { return conf_; }

private:
	std::string conf_;
	long long epoch_ = 300000000LL; // holdrename's N: at most 300 s, one more per hold_next
};

// Starts ld with the shim preloaded (and told where its control file is).
bool start_with_shim(Loader &ld, const Fault &f, std::string *skip);

} // namespace loader_test
