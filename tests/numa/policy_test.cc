// policy_test: numa/'s topology reader and policy plans against fake sysfs
// trees (2, 4 and 8 nodes), and real binding on node 0 of this machine.
#include <gtest/gtest.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

extern "C" {
#include "bind.h"
#include "policy.h"
#include "topo.h"
}

#include "../test_util.h"

namespace {

struct NodeSpec {
	std::string cpus;
	uint64_t mem_free_kb;
	long long hp2m_free; // -1: no 2M pool directory
	long long hp1g_free;
};

void put(const std::string &path, const std::string &text)
{
	std::string dir = path.substr(0, path.rfind('/'));
	std::string cmd = "mkdir -p '" + dir + "'";
	ASSERT_EQ(system(cmd.c_str()), 0);
	std::ofstream(path) << text << "\n";
}

// A fake SYSROOT/devices/system/node tree: nodes 0..n-1, distance 10 to
// itself, 20 + 10 * |i - j| to the others (a ring-less line, like a
// multi-socket machine whose far sockets are farther).
struct FakeSys {
	std::string root;
	explicit FakeSys(const std::vector<NodeSpec> &nodes)
	{
		char tmpl[] = "/tmp/numa_fake_XXXXXX";
		root = mkdtemp(tmpl);
		std::string base = root + "/devices/system/node";
		size_t n = nodes.size();
		put(base + "/online", n == 1 ? "0" : "0-" + std::to_string(n - 1));
		for (size_t i = 0; i < n; i++) {
			std::string d = base + "/node" + std::to_string(i);
			put(d + "/cpulist", nodes[i].cpus);
			std::string dist;
			for (size_t j = 0; j < n; j++)
				dist += (j ? " " : "") +
					std::to_string(i == j ? 10 : 20 + 10 * (int)(i > j ? i - j : j - i));
			put(d + "/distance", dist);
			put(d + "/meminfo", "Node " + std::to_string(i) + " MemTotal:  " +
						    std::to_string(nodes[i].mem_free_kb * 2) +
						    " kB\nNode " + std::to_string(i) +
						    " MemFree:   " + std::to_string(nodes[i].mem_free_kb) + " kB");
			if (nodes[i].hp2m_free >= 0) {
				put(d + "/hugepages/hugepages-2048kB/nr_hugepages",
				    std::to_string(nodes[i].hp2m_free + 1));
				put(d + "/hugepages/hugepages-2048kB/free_hugepages",
				    std::to_string(nodes[i].hp2m_free));
			}
			if (nodes[i].hp1g_free >= 0) {
				put(d + "/hugepages/hugepages-1048576kB/nr_hugepages",
				    std::to_string(nodes[i].hp1g_free));
				put(d + "/hugepages/hugepages-1048576kB/free_hugepages",
				    std::to_string(nodes[i].hp1g_free));
			}
		}
	}
	~FakeSys()
	{
		std::string cmd = "rm -rf '" + root + "'";
		if (system(cmd.c_str()) != 0)
			ADD_FAILURE() << cmd;
	}
};

std::vector<NodeSpec> uniform(int n, long long hp2m)
{
	std::vector<NodeSpec> v;
	for (int i = 0; i < n; i++)
		v.push_back({std::to_string(2 * i) + "-" + std::to_string(2 * i + 1), 4u << 20, hp2m, 0});
	return v;
}

std::string name(const npolicy &p)
{
	char b[NPOLICY_NAME_MAX];
	return npolicy_name(&p, b, sizeof b);
}

npolicy parse(const char *s)
{
	npolicy p;
	char why[256] = "";
	EXPECT_EQ(npolicy_parse(s, &p, why, sizeof why), 0) << s << ": " << why;
	return p;
}

const uint64_t MiB = 1u << 20;

} // namespace

TEST(NumaTopo, ReadsTwoFourAndEightNodes)
{
	for (int n : {2, 4, 8}) {
		FakeSys fs(uniform(n, 100));
		ntopo t;
		char why[256] = "";
		ASSERT_EQ(ntopo_read(fs.root.c_str(), &t, why, sizeof why), 0) << why;
		ASSERT_EQ(t.n, (unsigned)n);
		EXPECT_EQ(t.online, (UINT64_C(1) << n) - 1);
		for (int i = 0; i < n; i++) {
			const struct ntopo_node *nd = ntopo_node(&t, i);
			ASSERT_NE(nd, nullptr);
			EXPECT_EQ(nd->mem_free, (uint64_t)4 << 30);
			EXPECT_EQ(ntopo_hp_free(nd, 2 * MiB), 100);
			EXPECT_EQ(ntopo_hp_free(nd, 1024 * MiB), 0);
			EXPECT_EQ(ntopo_hp_free(nd, 16 * 1024 * MiB), -1);
			EXPECT_EQ(ntopo_cpu_node(&t, 2 * i + 1), i);
			for (int j = 0; j < n; j++)
				EXPECT_EQ(nd->dist[j], i == j ? 10 : 20 + 10 * abs(i - j));
		}
		EXPECT_EQ(ntopo_cpu_node(&t, 2 * n), -1);
	}
}

TEST(NumaTopo, BrokenTreesAreErrorsNamingTheFile)
{
	FakeSys fs(uniform(2, 0));
	put(fs.root + "/devices/system/node/node1/distance", "10 20 30");
	ntopo t;
	char why[256] = "";
	EXPECT_EQ(ntopo_read(fs.root.c_str(), &t, why, sizeof why), -EINVAL);
	EXPECT_NE(std::string(why).find("node1/distance"), std::string::npos) << why;
	put(fs.root + "/devices/system/node/online", "0-70");
	EXPECT_EQ(ntopo_read(fs.root.c_str(), &t, why, sizeof why), -ERANGE);
	EXPECT_NE(std::string(why).find("over 63"), std::string::npos) << why;
	put(fs.root + "/devices/system/node/online", "zero");
	EXPECT_EQ(ntopo_read(fs.root.c_str(), &t, why, sizeof why), -EINVAL);
}

TEST(NumaTopo, NoNumaKernelIsOneNode)
{
	char tmpl[] = "/tmp/numa_fake_XXXXXX";
	std::string root = mkdtemp(tmpl);
	put(root + "/devices/system/cpu/online", "0-3");
	ntopo t;
	char why[256] = "";
	ASSERT_EQ(ntopo_read(root.c_str(), &t, why, sizeof why), 0) << why;
	EXPECT_EQ(t.n, 1u);
	EXPECT_EQ(ntopo_cpu_node(&t, 3), 0);
	std::string cmd = "rm -rf '" + root + "'";
	ASSERT_EQ(system(cmd.c_str()), 0);
}

TEST(NumaPolicy, ParseAndNameRoundTrip)
{
	for (const char *s : {"none", "local", "local=0-3,8", "node=0", "node=7", "interleave",
			      "interleave=0,2-3", "replicate", "replicate=0-1"}) {
		npolicy p = parse(s);
		EXPECT_EQ(name(p), s);
	}
	EXPECT_EQ(parse("replicate=1,0").nodes, 3u);
	for (const char *bad : {"", "nodes=1", "node=", "node=-1", "node=64", "node=x", "none=1",
				"interleave=", "interleave=a", "replicate=0-64", "local=9999",
				"Replicate", "local=3-1"}) {
		npolicy p;
		char why[256] = "";
		EXPECT_EQ(npolicy_parse(bad, &p, why, sizeof why), -EINVAL) << bad;
		EXPECT_NE(std::string(why).find("numa \""), std::string::npos) << why;
	}
}

TEST(NumaPlan, EachPolicyOnTwoFourAndEightNodes)
{
	for (int n : {2, 4, 8}) {
		FakeSys fs(uniform(n, 1000));
		ntopo t;
		char why[256] = "";
		ASSERT_EQ(ntopo_read(fs.root.c_str(), &t, why, sizeof why), 0) << why;
		nplan_req r = {100 * MiB, 2 * MiB, 1, 1};
		nplan pl;
		npolicy p = parse("none");
		ASSERT_EQ(nplan_make(&p, &t, &r, &pl, why, sizeof why), 0) << why;
		EXPECT_EQ(pl.n, 1u);
		EXPECT_EQ(pl.seg[0].mode, NBIND_NONE);
		EXPECT_EQ(pl.seg[0].node, -1);

		p = parse("local");
		ASSERT_EQ(nplan_make(&p, &t, &r, &pl, why, sizeof why), 0) << why;
		EXPECT_EQ(pl.seg[0].mode, NBIND_BIND);
		EXPECT_EQ(pl.seg[0].node, 1);
		// CPUs 1 and 2 are on nodes 0 and 1: bound to both, pinned to neither
		p = parse("local=1-2");
		ASSERT_EQ(nplan_make(&p, &t, &r, &pl, why, sizeof why), 0) << why;
		EXPECT_EQ(pl.seg[0].nodes, 3u);
		EXPECT_EQ(pl.seg[0].node, -1);
		p = parse("local=999");
		EXPECT_EQ(nplan_make(&p, &t, &r, &pl, why, sizeof why), -ENODEV);
		EXPECT_NE(std::string(why).find("CPU 999"), std::string::npos) << why;

		std::string last = "node=" + std::to_string(n - 1);
		p = parse(last.c_str());
		ASSERT_EQ(nplan_make(&p, &t, &r, &pl, why, sizeof why), 0) << why;
		EXPECT_EQ(pl.seg[0].node, n - 1);
		EXPECT_EQ(pl.seg[0].nodes, UINT64_C(1) << (n - 1));
		std::string past = "node=" + std::to_string(n);
		p = parse(past.c_str());
		EXPECT_EQ(nplan_make(&p, &t, &r, &pl, why, sizeof why), -ENODEV);
		EXPECT_NE(std::string(why).find("not online"), std::string::npos) << why;

		p = parse("interleave");
		ASSERT_EQ(nplan_make(&p, &t, &r, &pl, why, sizeof why), 0) << why;
		EXPECT_EQ(pl.n, 1u);
		EXPECT_EQ(pl.seg[0].mode, NBIND_INTERLEAVE);
		EXPECT_EQ(pl.seg[0].nodes, (UINT64_C(1) << n) - 1);
		EXPECT_EQ(pl.seg[0].node, -1);

		p = parse("replicate");
		ASSERT_EQ(nplan_make(&p, &t, &r, &pl, why, sizeof why), 0) << why;
		EXPECT_EQ(pl.n, (unsigned)n);
		EXPECT_FALSE(pl.degraded);
		for (int i = 0; i < n; i++) {
			EXPECT_EQ(pl.seg[i].node, i);
			EXPECT_EQ(pl.seg[i].mode, NBIND_BIND);
			EXPECT_EQ(pl.seg[i].nodes, UINT64_C(1) << i);
		}
		p = parse("replicate=0-1");
		ASSERT_EQ(nplan_make(&p, &t, &r, &pl, why, sizeof why), 0) << why;
		EXPECT_EQ(pl.n, 2u);
		p = parse("replicate=9");
		EXPECT_EQ(nplan_make(&p, &t, &r, &pl, why, sizeof why), -ENODEV);
	}
}

TEST(NumaPlan, ReplicateDegradesToInterleaveWhenANodeRunsShort)
{
	for (int n : {2, 4, 8}) {
		auto spec = uniform(n, 60);
		spec[n - 1].hp2m_free = 10; // the last node's pool is short
		spec[n - 1].mem_free_kb = 16 * 1024;
		FakeSys fs(spec);
		ntopo t;
		char why[256] = "";
		ASSERT_EQ(ntopo_read(fs.root.c_str(), &t, why, sizeof why), 0) << why;
		npolicy p = parse("replicate");
		nplan pl;
		nplan_req r = {100 * MiB, 2 * MiB, 1, 0}; // 50 huge pages a copy
		ASSERT_EQ(nplan_make(&p, &t, &r, &pl, why, sizeof why), 0) << why;
		EXPECT_TRUE(pl.degraded);
		ASSERT_EQ(pl.n, 1u);
		EXPECT_EQ(pl.seg[0].mode, NBIND_INTERLEAVE);
		EXPECT_EQ(pl.seg[0].nodes, (UINT64_C(1) << n) - 1);
		std::string note = pl.note, lack = "node " + std::to_string(n - 1) +
							  " has 10 free 2048kB huge pages, a copy needs 50";
		EXPECT_NE(note.find("replicate degraded to interleave"), std::string::npos) << note;
		EXPECT_NE(note.find(lack), std::string::npos) << note;
		// the same nodes without huge pages: tmpfs memory decides (16 MiB free)
		r = {100 * MiB, 4096, 0, 0};
		ASSERT_EQ(nplan_make(&p, &t, &r, &pl, why, sizeof why), 0) << why;
		EXPECT_TRUE(pl.degraded);
		EXPECT_NE(std::string(pl.note).find("16 MiB free, a copy needs 100 MiB"),
			  std::string::npos) << pl.note;
		// an image that fits everywhere is replicated
		r = {10 * MiB, 2 * MiB, 1, 0};
		ASSERT_EQ(nplan_make(&p, &t, &r, &pl, why, sizeof why), 0) << why;
		EXPECT_FALSE(pl.degraded);
		EXPECT_EQ(pl.n, (unsigned)n);
	}
}

TEST(NumaPlan, NoPoolOfThatPageSizeIsShort)
{
	auto spec = uniform(2, -1);
	FakeSys fs(spec);
	ntopo t;
	char why[256] = "";
	ASSERT_EQ(ntopo_read(fs.root.c_str(), &t, why, sizeof why), 0) << why;
	npolicy p = parse("replicate");
	nplan pl;
	nplan_req r = {4 * MiB, 2 * MiB, 1, 0};
	ASSERT_EQ(nplan_make(&p, &t, &r, &pl, why, sizeof why), 0) << why;
	EXPECT_TRUE(pl.degraded) << pl.note;
}

TEST(NumaPlan, MoreNodesThanACtlListsDegrades)
{
	std::vector<NodeSpec> spec;
	for (int i = 0; i < 12; i++)
		spec.push_back({std::to_string(i), 4u << 20, 100, 0});
	FakeSys fs(spec);
	ntopo t;
	char why[256] = "";
	ASSERT_EQ(ntopo_read(fs.root.c_str(), &t, why, sizeof why), 0) << why;
	npolicy p = parse("replicate");
	nplan pl;
	nplan_req r = {MiB, 2 * MiB, 1, 0};
	ASSERT_EQ(nplan_make(&p, &t, &r, &pl, why, sizeof why), 0) << why;
	EXPECT_TRUE(pl.degraded);
	EXPECT_EQ(pl.seg[0].nodes, 0xfffu);
	EXPECT_NE(std::string(pl.note).find("12 nodes"), std::string::npos) << pl.note;
}

TEST(NumaCheck, PlacementVerdicts)
{
	uint64_t per[NTOPO_MAX_NODES] = {};
	char why[256] = "";
	nplan_seg bind1 = {1, NBIND_BIND, 2};
	per[1] = 100;
	EXPECT_EQ(nplace_check(&bind1, per, 0, why, sizeof why), 0);
	per[0] = 3;
	EXPECT_EQ(nplace_check(&bind1, per, 0, why, sizeof why), -EXDEV);
	EXPECT_NE(std::string(why).find("3 of 103 pages are not on node 1"), std::string::npos)
		<< why;
	EXPECT_NE(std::string(why).find("0:3,1:100"), std::string::npos) << why;
	per[0] = 0;
	EXPECT_EQ(nplace_check(&bind1, per, 1, why, sizeof why), -EXDEV); // one not resident
	nplan_seg inter = {-1, NBIND_INTERLEAVE, 3};
	EXPECT_EQ(nplace_check(&inter, per, 0, why, sizeof why), -EXDEV); // node 0 holds none
	per[0] = 100;
	EXPECT_EQ(nplace_check(&inter, per, 0, why, sizeof why), 0);
	nplan_seg none = {-1, NBIND_NONE, 0};
	per[5] = 7;
	EXPECT_EQ(nplace_check(&none, per, 9, why, sizeof why), 0);
}

// Real memory on this machine's node 0 (every Linux host has one): bound
// before the first touch, found there by move_pages.
TEST(NumaBind, Node0OfThisMachine)
{
	std::string emu = shmkv_test::emulator();
	if (!emu.empty()) // qemu-user has no mbind, set_mempolicy or move_pages
		GTEST_SKIP() << emu << " does not emulate mbind/move_pages";
	ntopo t;
	char why[256] = "";
	ASSERT_EQ(ntopo_read(NULL, &t, why, sizeof why), 0) << why;
	ASSERT_NE(ntopo_node(&t, 0), nullptr);
	size_t len = 8 * MiB;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(m, MAP_FAILED);
	ASSERT_EQ(nbind_range(m, len, NBIND_BIND, 1), 0);
	ASSERT_EQ(nbind_populate(m, len), 0);
	memset(m, 0x5a, len);
	uint64_t per[NTOPO_MAX_NODES], absent = 0;
	ASSERT_EQ(nplace_query(m, len, 4096, per, &absent), 0);
	EXPECT_EQ(per[0], len / 4096);
	EXPECT_EQ(absent, 0u);
	nplan_seg s = {0, NBIND_BIND, 1};
	EXPECT_EQ(nplace_check(&s, per, absent, why, sizeof why), 0) << why;
	// the same pages claimed for another node are wrong, and said so
	nplan_seg other = {1, NBIND_BIND, 2};
	EXPECT_EQ(nplace_check(&other, per, absent, why, sizeof why), -EXDEV);
	munmap(m, len);
	// a mapping never touched is not resident anywhere
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(m, MAP_FAILED);
	ASSERT_EQ(nplace_query(m, len, 4096, per, &absent), 0);
	EXPECT_EQ(absent, len / 4096);
	munmap(m, len);
	// binding to a node this machine lacks is refused
	if (!ntopo_node(&t, 63)) {
		m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		ASSERT_NE(m, MAP_FAILED);
		EXPECT_EQ(nbind_range(m, len, NBIND_BIND, UINT64_C(1) << 63), -EINVAL);
		munmap(m, len);
	}
	EXPECT_EQ(nbind_thread(NBIND_BIND, 1), 0);
	EXPECT_EQ(nbind_thread(NBIND_NONE, 0), 0);
	EXPECT_GE(nbind_my_node(), 0);
}
