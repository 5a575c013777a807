// vec_util.h - what the vector generators and the readers' C++ harnesses
// share: where the vectors are, hex both ways, a JSON string, a whole file.
#ifndef SHMKV_TESTS_VEC_UTIL_H
#define SHMKV_TESTS_VEC_UTIL_H

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include <dirent.h>

namespace vec {

// The vectors' directory: SHMKV_VECTORS_DIR (meson sets it), else the
// source tree's, from its root.
inline std::string dir()
{
	const char *d = getenv("SHMKV_VECTORS_DIR");
	return d ? d : "tests/vectors";
}

inline std::string hex(const std::string &s)
{
	static const char d[] = "0123456789abcdef";
	std::string out;
	for (unsigned char c : s) {
		out += d[c >> 4];
		out += d[c & 15];
	}
	return out;
}

inline std::string unhex(const char *h)
{
	std::string out;
	for (size_t i = 0; h[i] && h[i + 1]; i += 2)
		out += (char)std::stoi(std::string(h + i, 2), nullptr, 16);
	return out;
}

// s as a JSON string: quotes, backslashes and control bytes escaped.
inline std::string jstr(const std::string &s)
{
	std::string out = "\"";
	for (unsigned char c : s) {
		if (c == '"' || c == '\\') {
			out += '\\';
			out += (char)c;
		} else if (c < 0x20) {
			char buf[8];
			snprintf(buf, sizeof buf, "\\u%04x", c);
			out += buf;
		} else {
			out += (char)c;
		}
	}
	return out + "\"";
}

inline bool read_whole(const std::string &path, std::string &out)
{
	FILE *f = fopen(path.c_str(), "rb");
	if (!f)
		return false;
	out.clear();
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		out.append(buf, n);
	fclose(f);
	return true;
}

// A generator's files (name -> bytes) written into dir: "" or the path
// that could not be written.
inline std::string write_files(const std::map<std::string, std::string> &files,
			       const std::string &dir)
{
	for (const auto &f : files) {
		const std::string path = dir + "/" + f.first;
		FILE *o = fopen(path.c_str(), "wb");
		bool ok = o && fwrite(f.second.data(), 1, f.second.size(), o) == f.second.size();
		if ((o && fclose(o) != 0) || !ok)
			return path;
	}
	return "";
}

// A generator's --check: each of files missing from dir or different
// there, and each file of dir that ours(name) claims but files lacks, said
// on stderr as "prog: dir/name ..."; 1 if any, else 0.
template <class Ours>
int check_files(const std::map<std::string, std::string> &files, const std::string &dir,
		const char *prog, Ours ours)
{
	int bad = 0;
	for (const auto &f : files) {
		std::string have;
		if (!read_whole(dir + "/" + f.first, have)) {
			fprintf(stderr, "%s: %s/%s is missing\n", prog, dir.c_str(), f.first.c_str());
			bad = 1;
		} else if (have != f.second) {
			fprintf(stderr, "%s: %s/%s differs from what this build generates\n", prog,
				dir.c_str(), f.first.c_str());
			bad = 1;
		}
	}
	if (DIR *d = opendir(dir.c_str())) {
		while (struct dirent *e = readdir(d)) {
			const std::string n = e->d_name;
			if (n != "." && n != ".." && ours(n) && !files.count(n)) {
				fprintf(stderr, "%s: %s/%s is not generated any more\n", prog,
					dir.c_str(), n.c_str());
				bad = 1;
			}
		}
		closedir(d);
	}
	return bad;
}

} // namespace vec

#endif
