// builder/output.cc - what the builder may write: an output path is new or a
// regular file that is none of the inputs; never a device, FIFO, socket,
// symbolic link or directory (lstat: nothing is followed, opened or replaced).
// Also the registry of temporary names that shmkv_build_cleanup() removes.
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <unistd.h>

#include "internal.h"

namespace shmkv_build {

namespace {

const FileId *find(const std::vector<FileId> &ids, const struct stat &st)
{
	for (const FileId &f : ids)
		if (f.dev == st.st_dev && f.ino == st.st_ino)
			return &f;
	return nullptr;
}

} // namespace

int check_output(shmkv_builder *b, const char *path)
{
	struct stat st;
	if (strcmp(path, "-") == 0) {
		if (isatty(STDOUT_FILENO))
			return b->fail(-EINVAL, "standard output is a terminal: refusing to write a "
						"binary image there (redirect it to a file or a pipe)");
		if (fstat(STDOUT_FILENO, &st) != 0)
			return b->fail(-errno, "standard output: %s", strerror(errno));
		const FileId *in = S_ISREG(st.st_mode) ? find(b->inputs, st) : nullptr;
		if (in)
			return b->fail(-EEXIST, "standard output is the input %s: refusing to "
						"overwrite it", in->name.c_str());
		return 0;
	}
	if (lstat(path, &st) != 0) {
		if (errno == ENOENT)
			return 0;
		return b->fail(-errno, "%s: %s", path, strerror(errno));
	}
	if (!S_ISREG(st.st_mode))
		return b->fail(S_ISDIR(st.st_mode) ? -EISDIR : -EEXIST,
			       "%s is %s: refusing to replace it (an output must be a new or a "
			       "regular file)", path, shmkv_file_kind(st.st_mode));
	if (const FileId *in = find(b->inputs, st)) {
		if (in->name == path)
			return b->fail(-EEXIST, "%s is also an input: refusing to overwrite it", path);
		return b->fail(-EEXIST, "%s is the input %s (the same file): refusing to overwrite it",
			       path, in->name.c_str());
	}
	return 0;
}

int note_input(shmkv_builder *b, const char *path, const struct stat &st)
{
	if (!S_ISREG(st.st_mode))
		return 0;
	if (const FileId *out = find(b->outputs, st)) {
		if (out->name == path)
			return b->fail(-EEXIST, "%s is also the output: refusing to read it and then "
						"overwrite it", path);
		return b->fail(-EEXIST, "%s is the output %s (the same file): refusing to read it "
					"and then overwrite it", path, out->name.c_str());
	}
	b->inputs.push_back({st.st_dev, st.st_ino, path});
	return 0;
}

// A few slots: one per build writing at the same time in this process. A
// name is written before its slot is marked used (release), and read by the
// signal handler only after it saw the mark (acquire).
namespace {
constexpr int kSlots = 8;
struct Slot {
	std::atomic<int> used{0}; // 0 free, 1 being filled, 2 holds a name
	char path[PATH_MAX];
};
Slot slots[kSlots];
} // namespace

int cleanup_register(const std::string &path)
{
	if (path.size() >= PATH_MAX)
		return -1;
	for (int i = 0; i < kSlots; i++) {
		int expect = 0;
		if (slots[i].used.compare_exchange_strong(expect, 1, std::memory_order_acquire)) {
			memcpy(slots[i].path, path.c_str(), path.size() + 1);
			slots[i].used.store(2, std::memory_order_release); // pairs with shmkv_build_cleanup
			return i;
		}
	}
	return -1; // more builds than slots: this one's temporary is not removed on a signal
}

void cleanup_unregister(int slot)
{
	if (slot >= 0)
		slots[slot].used.store(0, std::memory_order_release);
}

} // namespace shmkv_build

using namespace shmkv_build;

extern "C" int shmkv_builder_check_output(shmkv_builder *b, const char *path)
{
	int err = check_output(b, path);
	if (err || strcmp(path, "-") == 0)
		return err;
	struct stat st;
	if (lstat(path, &st) == 0)
		b->outputs.push_back({st.st_dev, st.st_ino, path});
	const char *slash = strrchr(path, '/');
	b->out_dir = !slash ? "." : slash == path ? "/" : std::string(path, (size_t)(slash - path));
	return 0;
}

extern "C" void shmkv_build_cleanup(void)
{
	for (Slot &s : slots)
		if (s.used.load(std::memory_order_acquire) == 2) // pairs with cleanup_register
			unlink(s.path);
}
