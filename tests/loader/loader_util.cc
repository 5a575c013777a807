// loader_util.cc - the bodies of loader_util.h's helpers (what each does is
// said there), compiled once into the loader_util library.
#include "loader_util.h"

namespace loader_test {

uint64_t now_ms()
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void sleep_ms(unsigned ms)
{
	std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

bool wait_until(const std::function<bool()> &pred, unsigned timeout_ms, unsigned poll_ms)
{
	uint64_t end = now_ms() + slow_ms(timeout_ms);
	for (;;) {
		if (pred())
			return true;
		if (now_ms() >= end)
			return false;
		sleep_ms(poll_ms);
	}
}

std::string env_or_empty(const char *name)
{
	const char *v = getenv(name);
	return v ? v : "";
}

bool is_tmpfs(const char *dir)
{
	struct statfs sf;
	return statfs(dir, &sf) == 0 && (unsigned long)sf.f_type == 0x01021994UL;
}

std::string make_temp_dir(const std::string &parent, const std::string &stem)
{
	std::string tmpl = parent + "/" + stem + "-XXXXXX";
	std::vector<char> buf(tmpl.begin(), tmpl.end());
	buf.push_back(0);
	if (!mkdtemp(buf.data())) {
		ADD_FAILURE() << "mkdtemp " << tmpl << ": " << strerror(errno);
		return "";
	}
	return buf.data();
}

Env::Env()
{
	const char *t = getenv("TMPDIR");
	base_ = make_temp_dir(t && *t ? t : "/tmp", "shmkv-ltest");
	chmod(base_.c_str(), 0755); // readable by the unprivileged children
	root_ = base_ + "/root";
	spool_ = base_ + "/spool";
	img_ = base_ + "/img";
	for (const std::string &d : {root_, spool_, img_})
		EXPECT_EQ(mkdir(d.c_str(), 0755), 0) << d << ": " << strerror(errno);
	if (is_tmpfs("/dev/shm")) {
		shm_ = make_temp_dir("/dev/shm", "shmkv-ltest");
		chmod(shm_.c_str(), 0755);
	} else {
		shm_ = base_ + "/shm";
		EXPECT_EQ(mkdir(shm_.c_str(), 0755), 0) << shm_ << ": " << strerror(errno);
	}
}

Env::~Env()
{
	std::error_code ec;
	if (!shm_.empty())
		std::filesystem::remove_all(shm_, ec);
	if (!base_.empty())
		std::filesystem::remove_all(base_, ec);
}

std::vector<std::string> Env::shm_files(const std::string &sub) const
{
	std::vector<std::string> out;
	for (const std::string &n : list_dir(seg_dir()))
		if (sub.empty() || n.find(sub) != std::string::npos)
			out.push_back(n);
	return out;
}

int sock_connect(const std::string &root)
{
	struct sockaddr_un a;
	memset(&a, 0, sizeof a);
	a.sun_family = AF_UNIX;
	std::string p = root + "/control.sock";
	int dirfd = -1;
	if (p.size() >= sizeof a.sun_path) {
		if ((dirfd = open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
			return -1;
		p = "/proc/self/fd/" + std::to_string(dirfd) + "/control.sock";
	}
	memcpy(a.sun_path, p.c_str(), p.size() + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		int e = errno;
		close(fd);
		errno = e;
		fd = -1;
	}
	if (dirfd >= 0) {
		int e = errno;
		close(dirfd);
		errno = e;
	}
	return fd;
}

bool send_all(int fd, const std::string &s)
{
	size_t done = 0;
	while (done < s.size()) {
		ssize_t n = send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		done += (size_t)n;
	}
	return true;
}

bool read_line(int fd, std::string *line, unsigned timeout_ms)
{
	line->clear();
	uint64_t end = now_ms() + slow_ms(timeout_ms);
	for (;;) {
		uint64_t t = now_ms();
		if (t >= end)
			return false;
		struct pollfd p = {fd, POLLIN, 0};
		int r = poll(&p, 1, (int)(end - t));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		char c;
		for (;;) {
			ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				break;
			if (n <= 0)
				return false;
			if (c == '\n')
				return true;
			*line += c;
		}
	}
}

std::string join_tab(const std::vector<std::string> &words)
{
	std::string s;
	for (size_t i = 0; i < words.size(); i++)
		s += (i ? "\t" : "") + words[i];
	return s + "\n";
}

Json request(const std::string &root, const std::vector<std::string> &words,
	     unsigned timeout_ms, std::string *why)
{
	Json j;
	std::string line, w;
	int fd = sock_connect(root);
	if (fd < 0)
		w = std::string("connect: ") + strerror(errno);
	else if (!send_all(fd, join_tab(words)))
		w = std::string("send: ") + strerror(errno);
	else if (!read_line(fd, &line, timeout_ms))
		w = "no reply within " + std::to_string(timeout_ms) + " ms";
	else if (!parse_json(line, &j))
		w = "reply is not JSON: " + line;
	if (fd >= 0)
		close(fd);
	if (why)
		*why = w;
	return j;
}

int request_async(const std::string &root, const std::vector<std::string> &words)
{
	int fd = sock_connect(root);
	if (fd >= 0 && !send_all(fd, join_tab(words))) {
		close(fd);
		return -1;
	}
	return fd;
}

Loader::~Loader()
{
	if (pid_ > 0)
		kill9();
	if (::testing::Test::HasFailure() && !dumped_) {
		dumped_ = true;
		std::string log = env_.log();
		if (log.size() > 6000)
			log = "...\n" + log.substr(log.size() - 6000);
		std::cerr << "---- loader log (" << env_.log_path() << ") ----\n"
			  << log << "---- end of loader log ----\n";
	}
}

bool Loader::start(std::string *why, unsigned timeout_ms)
{
	std::string w;
	bool ok = start_(&w, timeout_ms);
	if (why)
		*why = w;
	if (!ok)
		ADD_FAILURE() << "shmkv-loader did not start: " << w << "\nlog:\n"
			      << env_.log();
	return ok;
}

int Loader::start_expect_exit(unsigned timeout_ms)
{
	std::string w;
	if (!spawn(&w))
		return -1;
	int st = 0;
	if (!reaped(timeout_ms, &st))
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

bool Loader::reaped(unsigned timeout_ms, int *st)
{
	bool exited = wait_until([&] { return waitpid(pid_, st, WNOHANG) == pid_; },
				 timeout_ms, 5);
	if (!exited) {
		kill9();
		return false;
	}
	pid_ = -1;
	return true;
}

bool Loader::alive()
{
	if (pid_ <= 0)
		return false;
	int st;
	if (waitpid(pid_, &st, WNOHANG) == pid_) {
		pid_ = -1;
		return false;
	}
	return true;
}

void Loader::kill9()
{
	if (pid_ <= 0)
		return;
	kill(pid_, SIGKILL);
	int st;
	while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
	}
	pid_ = -1;
}

int Loader::stop(unsigned timeout_ms)
{
	if (pid_ <= 0)
		return -1;
	kill(pid_, SIGTERM);
	int st = 0;
	if (!reaped(timeout_ms, &st))
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Json Loader::req(const std::vector<std::string> &words, unsigned timeout_ms)
{
	std::string why;
	Json j = request(env_.root(), words, timeout_ms, &why);
	if (j.kind != Json::OBJ)
		ADD_FAILURE() << "request " << words[0] << ": " << why;
	return j;
}

bool Loader::spawn(std::string *why)
{
	std::string exe = env_or_empty("SHMKV_LOADER");
	if (exe.empty()) {
		*why = "SHMKV_LOADER is not set (meson sets it)";
		return false;
	}
	std::vector<std::string> args = {exe,        "--foreground", "--root", env_.root(),
					 "--spool",  env_.spool(),   "--shm-dir", env_.shm()};
	args.insert(args.end(), extra_.begin(), extra_.end());
	std::vector<char *> argv;
	for (std::string &a : args)
		argv.push_back(&a[0]);
	argv.push_back(nullptr);
	int logfd = open(env_.log_path().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
			 0644);
	if (logfd < 0) {
		*why = env_.log_path() + ": " + strerror(errno);
		return false;
	}
	std::string banner = "==== start: " + exe + "\n";
	ssize_t wr = write(logfd, banner.data(), banner.size());
	(void)wr;
	pid_t pid = fork();
	if (pid < 0) {
		*why = std::string("fork: ") + strerror(errno);
		close(logfd);
		return false;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); // a test killed on timeout takes it along
		dup2(logfd, STDERR_FILENO);
		dup2(logfd, STDOUT_FILENO);
		int nul = open("/dev/null", O_RDONLY);
		if (nul >= 0)
			dup2(nul, STDIN_FILENO);
		unsetenv("NOTIFY_SOCKET");
		unsetenv("JOURNAL_STREAM");
		execv(argv[0], argv.data());
		_exit(127);
	}
	close(logfd);
	pid_ = pid;
	return true;
}

bool Loader::start_(std::string *why, unsigned timeout_ms)
{
	if (!spawn(why))
		return false;
	uint64_t end = now_ms() + slow_ms(timeout_ms);
	std::string w;
	for (;;) {
		if (!alive()) {
			*why = "the loader exited during startup";
			return false;
		}
		Json j = request(env_.root(), {"ping"}, 2000, &w);
		if (j.ok() && (pid_t)j["pid"].u64() == pid_)
			return true;
		if (now_ms() >= end) {
			*why = "no answer to ping within " + std::to_string(slow_ms(timeout_ms)) +
			       " ms (" + w + ")";
			kill9();
			return false;
		}
		sleep_ms(10);
	}
}

std::string key_of(uint64_t i)
{
	return "key_" + std::to_string(i);
}

std::string value_of(const std::string &tag, uint64_t i, size_t pad)
{
	std::string v = tag + ":val_" + std::to_string(i);
	if (pad) {
		v += '|';
		static const char fill[] = "abcdefghijklmnopqrstuvwxyz0123456789";
		for (size_t k = 0; k < pad; k++)
			v += fill[(i + k) % (sizeof fill - 1)];
	}
	return v;
}

bool check_value(const char *v, size_t len, const char *tag, size_t tag_len, uint64_t i)
{
	char head[96];
	int n = snprintf(head, sizeof head, ":val_%llu", (unsigned long long)i);
	if (len < tag_len + (size_t)n || memcmp(v, tag, tag_len) ||
	    memcmp(v + tag_len, head, (size_t)n))
		return false;
	return len == tag_len + (size_t)n || v[tag_len + (size_t)n] == '|';
}

std::string builder_done(shmkv_builder *b, const std::string &path, int err)
{
	if (!err)
		err = shmkv_builder_finish(b, path.c_str(), nullptr);
	std::string out;
	if (err)
		out = path + ": " + shmkv_strerror(err) + ": " + shmkv_builder_error(b);
	shmkv_builder_free(b);
	return out;
}

std::string build_delta(const std::string &path, const std::string &base,
			const std::vector<std::pair<std::string, std::string>> &set,
			const std::vector<std::string> &removes, const std::string &after)
{
	shmkv_build_options o = shmkv_test::test_options();
	shmkv_builder *b = nullptr;
	int err = shmkv_builder_new(&o, &b);
	if (err)
		return std::string("shmkv_builder_new: ") + shmkv_strerror(err);
	err = shmkv_builder_set_delta(b, base.c_str(), after.empty() ? nullptr : after.c_str());
	for (const auto &kv : set)
		if (!err)
			err = shmkv_builder_add_str(b, kv.first.data(), kv.first.size(),
						    kv.second.data(), kv.second.size());
	for (const std::string &k : removes)
		if (!err)
			err = shmkv_builder_remove(b, k.data(), k.size());
	return builder_done(b, path, err);
}

std::string build_image(const std::string &path, const std::string &tag, uint64_t n,
			size_t pad, uint64_t out_every)
{
	shmkv_build_options o = shmkv_test::test_options();
	o.dedup = 0; // every value differs anyway; skip the hashing
	o.fixed |= SHMKV_OPT_DEDUP;
	snprintf(o.name, sizeof o.name, "%s", tag.c_str());
	o.fixed |= SHMKV_OPT_NAME;
	shmkv_builder *b = nullptr;
	int err = shmkv_builder_new(&o, &b);
	if (err)
		return std::string("shmkv_builder_new: ") + shmkv_strerror(err);
	std::string v;
	for (uint64_t i = 0; i < n && !err; i++) {
		std::string k = key_of(i);
		v = value_of(tag, i, out_every && i % out_every == 0 ? std::max<size_t>(pad, 300) : pad);
		err = shmkv_builder_add_str(b, k.data(), k.size(), v.data(), v.size());
	}
	if (!err)
		err = shmkv_builder_add_str(b, "__gen_tag", 9, tag.data(), tag.size());
	if (!err)
		err = shmkv_builder_add_i64(b, "__n", 3, (int64_t)n);
	return builder_done(b, path, err);
}

CmdRun run_capture(const std::string &dir, std::vector<std::string> args, long as,
		   unsigned timeout_ms)
{
	shmkv_test::RunIo io;
	io.env = {"SHMKV_ROOT"};
	io.uid = as;
	return shmkv_test::run(args, io, timeout_ms, dir);
}

CmdRun shmctl(const Env &env, std::vector<std::string> args, unsigned timeout_ms, long as)
{
	if (shmkv_test::shmctl_path().empty()) {
		ADD_FAILURE() << "SHMCTL is not set (meson sets it)";
		return CmdRun();
	}
	args.insert(args.begin(), {shmkv_test::shmctl_path(), "-r", env.root()});
	return run_capture(env.base(), args, as, timeout_ms);
}

std::string spool_drop(const Env &env, const std::string &src, const std::string &cache,
		       bool keep_src)
{
	std::string from = src;
	if (keep_src) {
		from = env.img() + "/.link-" + cache + "-" + std::to_string(now_ms());
		unlink(from.c_str());
		if (link(src.c_str(), from.c_str()) != 0)
			return "link " + src + ": " + strerror(errno);
	}
	std::string to = env.spool_path(cache);
	if (rename(from.c_str(), to.c_str()) != 0)
		return "rename " + from + " -> " + to + ": " + strerror(errno);
	return "";
}

Json build_and_load(Loader &ld, const Env &env, const std::string &cache,
		    const std::string &tag, uint64_t n)
{
	std::string img = env.img_path(tag + ".shmkv");
	std::string err = build_image(img, tag, n);
	if (!err.empty()) {
		ADD_FAILURE() << err;
		return Json();
	}
	return ld.load(cache, img);
}

shmkv *attach(const std::string &root, const std::string &name, unsigned flags,
	      int *err, std::string *why)
{
	shmkv *db = nullptr;
	char w[768] = "";
	*err = shmkv_attach_diag(root.c_str(), name.c_str(), flags, &db, w, sizeof w);
	*why = w;
	return *err ? nullptr : db;
}

std::string tag_of(const shmkv *db)
{
	const char *s;
	size_t n;
	if (shmkv_get_str(db, "__gen_tag", 9, &s, &n))
		return "";
	return std::string(s, n);
}

uint64_t check_handle(const shmkv *db, const std::string &tag, uint64_t n, uint64_t step)
{
	uint64_t bad = 0;
	for (uint64_t i = 0; i < n; i += step) {
		std::string k = key_of(i);
		const char *s;
		size_t len;
		if (shmkv_get_str(db, k.data(), k.size(), &s, &len) ||
		    !check_value(s, len, tag.data(), tag.size(), i))
			bad++;
	}
	return bad;
}

bool read_ctl_copy(const std::string &root, const std::string &name, shmkv_ctl *copy,
		   uint64_t *raw_seq)
{
	std::string p = root + "/" + name + ".ctl";
	int fd = open(p.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	void *m = mmap(nullptr, SHMKV_CTL_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return false;
	const shmkv_ctl *c = (const shmkv_ctl *)m;
	if (raw_seq)
		*raw_seq = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
	bool ok = shmkv_ctl_read(c, copy) == 0;
	munmap(m, SHMKV_CTL_SIZE);
	return ok;
}

bool read_ctl(const std::string &root, const std::string &name, CtlView *out)
{
	shmkv_ctl copy;
	bool ok = read_ctl_copy(root, name, &copy, nullptr);
	if (ok) {
		out->generation = copy.generation;
		out->segment_count = copy.segment_count;
		out->loader_pid = copy.loader_pid;
		out->published_ns = copy.published_ns;
		memcpy(&out->seg, (const void *)&copy.segments[0], sizeof out->seg);
		out->seq = copy.seq;
	}
	out->seg.path[SHMKV_CTL_PATH_MAX - 1] = 0;
	return ok;
}

Child::Child(const std::function<int(int)> &fn)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0) {
		ADD_FAILURE() << "pipe: " << strerror(errno);
		return;
	}
	fflush(stdout);
	fflush(stderr);
	pid_ = fork();
	if (pid_ < 0) {
		ADD_FAILURE() << "fork: " << strerror(errno);
		close(p[0]);
		close(p[1]);
		return;
	}
	if (pid_ == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		int rc = fn(p[1]);
		close(p[1]);
		_exit(rc);
	}
	close(p[1]);
	rfd_ = p[0];
}

Child::~Child()
{
	if (pid_ > 0) {
		kill(pid_, SIGKILL);
		wait_exit(5000);
	}
	if (rfd_ >= 0)
		close(rfd_);
}

std::string Child::read_all(unsigned timeout_ms)
{
	std::string out;
	uint64_t end = now_ms() + slow_ms(timeout_ms);
	while (rfd_ >= 0) {
		uint64_t t = now_ms();
		if (t >= end)
			break;
		struct pollfd p = {rfd_, POLLIN, 0};
		int r = poll(&p, 1, (int)(end - t));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		char buf[65536];
		ssize_t n = read(rfd_, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		out.append(buf, (size_t)n);
	}
	return out;
}

int Child::wait_exit(unsigned timeout_ms)
{
	if (pid_ <= 0)
		return code_;
	int st = 0;
	bool done = wait_until([&] { return waitpid(pid_, &st, WNOHANG) == pid_; },
			       timeout_ms, 2);
	if (!done) {
		kill(pid_, SIGKILL);
		waitpid(pid_, &st, 0);
		pid_ = -1;
		return code_ = -1;
	}
	pid_ = -1;
	return code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

bool write_all_fd(int fd, const void *p, size_t n)
{
	const char *c = static_cast<const char *>(p);
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		c += w;
		n -= (size_t)w;
	}
	return true;
}

uint64_t cpu_ms(pid_t pid)
{
	std::string st = read_file("/proc/" + std::to_string(pid) + "/stat");
	size_t p = st.rfind(')');
	if (p == std::string::npos)
		return 0;
	unsigned long long ut = 0, stime = 0;
	// ") S ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime"
	sscanf(st.c_str() + p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
	       &stime);
	return (ut + stime) * 1000u / (uint64_t)sysconf(_SC_CLK_TCK);
}

void expect_no_spin(pid_t pid, const std::string &what)
{
	uint64_t c0 = cpu_ms(pid), t0 = now_ms();
	sleep_ms(3000);
	uint64_t used = cpu_ms(pid) - c0, wall = now_ms() - t0;
	std::cout << "[          ] loader CPU " << what << ": " << used << " ms in " << wall
		  << " ms\n";
	EXPECT_LT(used * 5, wall) << "the loader used " << used << " ms of CPU in " << wall
				  << " ms " << what;
}

std::vector<std::string> log_lines(const std::string &log, const std::vector<std::string> &words)
{
	std::vector<std::string> out;
	size_t i = 0;
	while (i < log.size()) {
		size_t e = log.find('\n', i);
		if (e == std::string::npos)
			e = log.size();
		std::string line = log.substr(i, e - i);
		bool all = true;
		for (const std::string &w : words)
			all = all && line.find(w) != std::string::npos;
		if (all)
			out.push_back(line);
		i = e + 1;
	}
	return out;
}

} // namespace loader_test
