// stream_util.h - a stream of changes driven by a test (bodies in
// stream_util.cc, in the loader_util library):
// `shmctl -j cache apply NAME -` (loader/README.md, "Streams") whose
// standard input the test writes through a FIFO and whose acknowledgements
// it reads as they come (a file). Used by stream_test.cc and
// writes_crash_test.cc.
#ifndef SHMKV_STREAM_UTIL_H
#define SHMKV_STREAM_UTIL_H

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "loader_util.h"

namespace loader_test {

// One acknowledgement line: the generation that published lines
// first..last (lines of them).
struct Ack {
	uint64_t generation, first, last, lines;
};

// The acknowledgements in text (shmctl -j: one JSON object a line; an
// error is {"error": ...}, skipped). strict: a line that is not JSON is a
// test failure (not so when a killed loader may have cut the output).
std::vector<Ack> acks_of(const std::string &text, bool strict);

class Stream {
public:
	Stream(const Env &env, const std::string &cache, bool strict = true);
	~Stream();
	Stream(const Stream &) = delete;
	Stream &operator=(const Stream &) = delete;
	bool write(const std::string &text);
	// Waits (generously) for an acknowledgement through line n.
	bool wait_acked(uint64_t n);
	// Closes the input and waits for shmctl's exit status.
	int finish();
	std::vector<Ack> acks() const;
	// What shmctl said: stderr, and stdout (-j writes errors there as JSON).
	std::string err() const;

private:
	bool strict_;
	std::string fifo_, out_, err_;
	pid_t pid_ = -1;
	int fd_ = -1;
};

} // namespace loader_test

#endif /* SHMKV_STREAM_UTIL_H */
