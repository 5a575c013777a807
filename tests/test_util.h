// test_util.h - small helpers shared by the shmkv tests (header-only).
//
//   TempDir                  a fresh directory under $TMPDIR (or /tmp, or a base given), removed at exit
//   read_file / write_file   whole files as std::string
//   list_dir                 names in a directory (sorted, no . or ..)
//   test_options()           builder defaults with a fixed creation time
//   Builder / Db             RAII owners of a shmkv_builder / shmkv handle
//   open_db(path, flags)     open or record a failure (with the reader's reason)
//   contains_ci(hay, needle) case-insensitive substring
//   emulator()               "qemu-user (...)" under a user-mode emulator, else ""
#ifndef SHMKV_TEST_UTIL_H
#define SHMKV_TEST_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <shmkv.h>
#include <shmkv_build.h>

namespace shmkv_test {

class TempDir {
public:
	TempDir() : TempDir(getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp") {}
	// Under base, e.g. /dev/shm for a tmpfs.
	explicit TempDir(const std::string &base)
	{
		std::string tmpl = base + "/shmkv-test-XXXXXX";
		std::vector<char> buf(tmpl.begin(), tmpl.end());
		buf.push_back(0);
		if (!mkdtemp(buf.data())) {
			ADD_FAILURE() << "mkdtemp " << tmpl << ": " << strerror(errno);
			return;
		}
		path_ = buf.data();
	}
	~TempDir()
	{
		if (!path_.empty()) {
			std::error_code ec;
			std::filesystem::remove_all(path_, ec);
		}
	}
	TempDir(const TempDir &) = delete;
	TempDir &operator=(const TempDir &) = delete;
	const std::string &path() const { return path_; }
	std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
	std::string path_;
};

inline std::string read_file(const std::string &path)
{
	std::string out;
	int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return out;
	char buf[1 << 16];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		out.append(buf, (size_t)n);
	}
	close(fd);
	return out;
}

inline bool write_file(const std::string &path, const std::string &data)
{
	int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return false;
	size_t done = 0;
	while (done < data.size()) {
		ssize_t n = write(fd, data.data() + done, data.size() - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(fd);
			return false;
		}
		done += (size_t)n;
	}
	return close(fd) == 0;
}

inline bool file_exists(const std::string &path)
{
	struct stat st;
	return stat(path.c_str(), &st) == 0;
}

inline std::vector<std::string> list_dir(const std::string &path)
{
	std::vector<std::string> names;
	DIR *d = opendir(path.c_str());
	if (!d)
		return names;
	while (struct dirent *e = readdir(d)) {
		std::string n = e->d_name;
		if (n != "." && n != "..")
			names.push_back(n);
	}
	closedir(d);
	std::sort(names.begin(), names.end());
	return names;
}

inline bool contains_ci(const std::string &hay, const std::string &needle)
{
	auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
			      [](char a, char b) { return std::tolower((unsigned char)a) ==
							  std::tolower((unsigned char)b); });
	return it != hay.end();
}

// Builder defaults with a fixed creation time, so images are reproducible.
inline shmkv_build_options test_options()
{
	shmkv_build_options o;
	int err = shmkv_build_options_init(&o);
	EXPECT_EQ(err, 0) << shmkv_strerror(err);
	o.created = 1700000000;
	o.fixed |= SHMKV_OPT_CREATED;
	return o;
}

// Owns a builder. Check ok() after construction.
class Builder {
public:
	explicit Builder(const shmkv_build_options &o)
	{
		err_ = shmkv_builder_new(&o, &b_);
		EXPECT_EQ(err_, 0) << "shmkv_builder_new: " << shmkv_strerror(err_);
	}
	Builder() : Builder(test_options()) {}
	~Builder() { shmkv_builder_free(b_); }
	Builder(const Builder &) = delete;
	Builder &operator=(const Builder &) = delete;
	bool ok() const { return b_ != nullptr && err_ == 0; }
	shmkv_builder *get() const { return b_; }
	operator shmkv_builder *() const { return b_; }
	std::string error() const { return b_ ? shmkv_builder_error(b_) : "(no builder)"; }

	int str(const std::string &k, const std::string &v)
	{
		return shmkv_builder_add_str(b_, k.data(), k.size(), v.data(), v.size());
	}
	int i64(const std::string &k, int64_t v)
	{
		return shmkv_builder_add_i64(b_, k.data(), k.size(), v);
	}
	int finish(const std::string &path, shmkv_build_stats *stats = nullptr)
	{
		return shmkv_builder_finish(b_, path.c_str(), stats);
	}

private:
	shmkv_builder *b_ = nullptr;
	int err_ = 0;
};

// Owns a reader handle.
class Db {
public:
	Db() = default;
	explicit Db(shmkv *db) : db_(db) {}
	~Db() { shmkv_close(db_); }
	Db(Db &&o) noexcept : db_(o.db_) { o.db_ = nullptr; }
	Db &operator=(Db &&o) noexcept
	{
		std::swap(db_, o.db_);
		return *this;
	}
	shmkv *get() const { return db_; }
	operator shmkv *() const { return db_; }
	explicit operator bool() const { return db_ != nullptr; }
	const shmkv_image_header *hdr() const { return shmkv_header(db_); }

private:
	shmkv *db_ = nullptr;
};

// Opens path; on failure records a test failure with the reader's reason
// and returns an empty Db.
inline Db open_db(const std::string &path, unsigned flags = 0)
{
	shmkv *db = nullptr;
	char why[512] = "";
	int err = shmkv_open_file_diag(path.c_str(), flags, &db, why, sizeof why);
	EXPECT_EQ(err, 0) << path << ": " << shmkv_strerror(err) << ": " << why;
	return Db(err ? nullptr : db);
}

// Runs shmkv_verify and returns "" when it passes, else the code and reason.
inline std::string verify_msg(const shmkv *db)
{
	char why[512] = "";
	int err = shmkv_verify(db, why, sizeof why);
	if (!err)
		return "";
	return std::string(shmkv_strerror(err)) + ": " + why;
}

inline std::string sv(const void *p, size_t n)
{
	return std::string(static_cast<const char *>(p), n);
}

// The user-mode emulator this process runs under, e.g. "qemu-user
// (qemu-aarch64-st)", or "" when it runs natively. qemu-user fakes
// /proc/self/exe, maps and cmdline for the guest, but not status, whose Name
// is the emulator's own (15 characters at most).
inline std::string emulator()
{
	std::string status = read_file("/proc/self/status");
	if (status.compare(0, 5, "Name:") != 0)
		return "";
	size_t b = status.find_first_not_of(" \t", 5), e = status.find('\n', 5);
	std::string name = b < e ? status.substr(b, e - b) : "";
	return name.compare(0, 5, "qemu-") == 0 ? "qemu-user (" + name + ")" : "";
}

} // namespace shmkv_test

#endif // SHMKV_TEST_UTIL_H
