// procs.cc - several reader processes sharing one file. K fresh processes
// (this executable again, --proc-child) each open the same file in /dev/shm
// (shmkv with POPULATE; LMDB and CDB map lazily), make --proc-lookups uniform
// lookups, then wait until all K are ready, so that every page any of them
// touched is mapped in all of them while each reads its
// /proc/self/smaps_rollup: Rss, Pss and its anon/file/shmem parts. For a
// shared file the data counts once: the K Pss values add up to about the file.
// absl runs as one process that builds its own map, for the per-process cost
// a private copy has (Pss = Rss: nothing to share).

#include "bench.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

extern char **environ;

namespace bench {

std::unique_ptr<Reader> make_map_reader(const std::string &name, const Dataset &d);

namespace {

struct Child {
	pid_t pid = -1;
	FILE *out = nullptr; // the child's stdout
	int in = -1;         // the child's stdin
};

Child spawn(const std::vector<std::string> &args)
{
	int to[2], from[2];
	if (pipe2(to, O_CLOEXEC) || pipe2(from, O_CLOEXEC))
		fail("pipe: %s", std::strerror(errno));
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, to[0], 0);
	posix_spawn_file_actions_adddup2(&fa, from[1], 1);
	std::vector<char *> argv;
	for (const std::string &a : args)
		argv.push_back(const_cast<char *>(a.c_str()));
	argv.push_back(nullptr);
	Child c;
	int err = posix_spawn(&c.pid, argv[0], &fa, nullptr, argv.data(), environ);
	posix_spawn_file_actions_destroy(&fa);
	if (err)
		fail("posix_spawn %s: %s", argv[0], std::strerror(err));
	close(to[0]);
	close(from[1]);
	c.in = to[1];
	c.out = fdopen(from[0], "r");
	return c;
}

// Bytes of the smaps_rollup fields we report (kB in the file).
std::map<std::string, uint64_t> smaps_rollup()
{
	std::map<std::string, uint64_t> m;
	std::ifstream f("/proc/self/smaps_rollup");
	std::string line;
	while (std::getline(f, line)) {
		std::istringstream ls(line);
		std::string k;
		uint64_t v;
		if (ls >> k >> v && !k.empty() && k.back() == ':')
			m[k.substr(0, k.size() - 1)] = v * 1024;
	}
	return m;
}

} // namespace

// --proc-child SYSTEM PATH N SEED LOOKUPS (PATH attach:ROOT: shmkv attaches to
// cache kv_N of the loader at ROOT; -: a map, built here)
int proc_child_main(int argc, char **argv)
{
	if (argc != 7)
		fail("--proc-child: expected SYSTEM PATH N SEED LOOKUPS");
	std::string system = argv[2], path = argv[3];
	uint64_t n = parse_count("n", argv[4]), seed = parse_count("seed", argv[5]),
		 lookups = parse_count("lookups", argv[6]);
	auto t0 = Clock::now();
	std::unique_ptr<Reader> reader;
	if (system == "absl" || system == "std") {
		Dataset d = make_dataset(n, Kind::Str); // freed before measuring
		reader = make_map_reader(system, d);
	} else {
		reader = open_reader(system, path, Kind::Str, n);
	}
	double open_s = seconds_since(t0);
	Stream s;
	s.keys.reserve(lookups);
	uint64_t state = seed;
	char buf[32];
	for (uint64_t j = 0; j < lookups; j++) {
		uint64_t i = uniform(state, n);
		s.keys.emplace_back(buf, format_key(buf, "key_", i));
		size_t vl = format_key(buf, "val_", i);
		s.expect += digest_str(buf, vl);
	}
	s.hits = lookups;
	t0 = Clock::now();
	double c0 = thread_cpu_seconds();
	PassResult res = reader->pass(s, 0, lookups);
	double ns = seconds_since(t0) * 1e9 / (double)lookups;
	double cpu_ns = (thread_cpu_seconds() - c0) * 1e9 / (double)lookups;
	if (res.found != s.hits || res.sum != s.expect)
		fail("%s reader process: found %" PRIu64 " of %" PRIu64, system.c_str(), res.found,
		     s.hits);
	std::printf("ready\n");
	std::fflush(stdout);
	char go;
	if (read(0, &go, 1) != 1)
		return 1;
	auto m = smaps_rollup();
	uint64_t frss = 0, fpss = 0;
	if (path != "-" && path.rfind("attach:", 0) != 0) {
		frss = smaps_sum(path, "Rss");
		fpss = smaps_sum(path, "Pss");
	}
	// two more fields: hugetlb pages mapped (smaps counts them in none of Rss
	// and Pss), e.g. a loader's segment read through attach:ROOT, and the
	// pass's ns a get in thread CPU time (the wall clock counts the other
	// processes' turns when they outnumber the cores)
	std::printf("result %.6f %.3f %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
		    " %" PRIu64 " %" PRIu64 " %" PRIu64 " %.3f\n",
		    open_s, ns, m["Rss"], m["Pss"], m["Pss_Anon"], m["Pss_File"], m["Pss_Shmem"], frss,
		    fpss, m["Shared_Hugetlb"] + m["Private_Hugetlb"], cpu_ns);
	std::fflush(stdout);
	while (read(0, &go, 1) > 0) // stay mapped until every process has measured
		;
	return 0;
}

void run_procs(const Options &o, const Dataset &d, const std::vector<System *> &systems,
	       Report &r)
{
	std::string self = self_exe();
	for (System *sys : systems) {
		unsigned k;
		if (sys->name == "absl")
			k = 1;
		else if ((is_shmkv(sys->name) || sys->name == "lmdb" || sys->name == "cdb") &&
			 !sys->path.empty())
			k = o.procs;
		else
			continue;
		note("[%" PRIu64 " keys] %u reader process%s: %s\n", d.n, k, k > 1 ? "es" : "",
		     sys->name.c_str());
		std::vector<Child> kids;
		for (unsigned i = 0; i < k; i++)
			kids.push_back(spawn({self, "--proc-child", sys->name,
					      sys->path.empty() ? "-" : sys->path, std::to_string(d.n),
					      std::to_string(o.seed + 1000 + i),
					      std::to_string(o.proc_lookups)}));
		char line[256];
		for (Child &c : kids)
			if (!std::fgets(line, sizeof line, c.out) || std::strcmp(line, "ready\n"))
				fail("%s reader process %d did not get ready", sys->name.c_str(),
				     (int)c.pid);
		for (Child &c : kids)
			if (write(c.in, "g", 1) != 1)
				fail("write to reader process: %s", std::strerror(errno));
		for (unsigned i = 0; i < k; i++) {
			Child &c = kids[i];
			ProcRecord p;
			p.keys = d.n;
			p.system = sys->name;
			p.procs = k;
			p.index = i;
			p.file_bytes = sys->path.empty() ? 0 : sys->bytes;
			if (!std::fgets(line, sizeof line, c.out) ||
			    std::sscanf(line, "result %lf %lf %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
					      " %" SCNu64 " %" SCNu64 " %" SCNu64,
					&p.open_s, &p.ns_per_get, &p.rss, &p.pss, &p.pss_anon, &p.pss_file,
					&p.pss_shmem, &p.map_rss, &p.map_pss) != 9)
				fail("%s reader process %d sent no result", sys->name.c_str(), (int)c.pid);
			r.procs.push_back(p);
		}
		for (Child &c : kids) { // now they may unmap and exit
			std::fclose(c.out);
			close(c.in);
			int st;
			waitpid(c.pid, &st, 0);
			if (!WIFEXITED(st) || WEXITSTATUS(st))
				fail("%s reader process %d failed", sys->name.c_str(), (int)c.pid);
		}
	}
}

} // namespace bench
