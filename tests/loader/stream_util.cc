// stream_util.cc - the bodies of stream_util.h's Stream (what each does is
// said there), compiled once into the loader_util library.
#include "stream_util.h"

namespace loader_test {

std::vector<Ack> acks_of(const std::string &text, bool strict)
{
	std::vector<Ack> v;
	size_t at = 0;
	for (size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
		Json j;
		if (!parse_json(text.substr(at, nl - at), &j)) {
			if (strict)
				ADD_FAILURE() << "not JSON: " << text.substr(at, nl - at);
			continue;
		}
		if (j["ok"].b)
			v.push_back({j["generation"].u64(), j["first_line"].u64(),
				     j["last_line"].u64(), j["lines"].u64()});
	}
	return v;
}

Stream::Stream(const Env &env, const std::string &cache, bool strict) : strict_(strict)
{
	static int n; // each stream its own files: no stale acknowledgement
	std::string tag = "/stream" + std::to_string(++n);
	fifo_ = env.base() + tag + ".in";
	out_ = env.base() + tag + ".out";
	err_ = env.base() + tag + ".err";
	signal(SIGPIPE, SIG_IGN); // a stream that ended reads no more
	if (mkfifo(fifo_.c_str(), 0600) != 0)
		ADD_FAILURE() << "mkfifo: " << strerror(errno);
	shmkv_test::RunIo io;
	io.in = fifo_;
	io.env = {"SHMKV_ROOT"};
	pid_ = shmkv_test::spawn({shmkv_test::shmctl_path(), "-j", "-r", env.root(), "cache",
				  "apply", cache, "-"},
				 io, out_, err_);
	fd_ = open(fifo_.c_str(), O_WRONLY | O_CLOEXEC); // once the child opened its end
}

Stream::~Stream()
{
	if (fd_ >= 0)
		close(fd_);
	if (pid_ > 0)
		shmkv_test::wait_exit(pid_, 60000, "the stream");
}

bool Stream::write(const std::string &text)
{
	for (size_t at = 0; fd_ >= 0 && at < text.size();) {
		ssize_t w = ::write(fd_, text.data() + at, text.size() - at);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		at += (size_t)w;
	}
	return fd_ >= 0;
}

bool Stream::wait_acked(uint64_t n)
{
	return wait_until([&] {
		std::vector<Ack> a = acks();
		return !a.empty() && a.back().last >= n;
	}, 60000, 2);
}

int Stream::finish()
{
	if (fd_ >= 0)
		close(fd_);
	fd_ = -1;
	int rc = shmkv_test::wait_exit(pid_, 60000, "the stream");
	pid_ = -1;
	return rc;
}

std::vector<Ack> Stream::acks() const
{
	return acks_of(shmkv_test::read_file(out_), strict_);
}

std::string Stream::err() const
{
	return shmkv_test::read_file(err_) + shmkv_test::read_file(out_);
}

} // namespace loader_test
