// replica_test: the reader's replica choice (lib/shmkv/attach.h) against a
// hand-made control segment listing one copy per node; each copy's key
// "node" says which copy a handle mapped.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "../test_util.h"

using shmkv_test::Builder;
using shmkv_test::TempDir;

namespace {

// Cache "c" whose control segment the test writes (test_util.h's HandCtl),
// with one copy of each generation per node.
class Cache : public shmkv_test::HandCtl {
public:
	// An image whose key "node" holds node and "gen" holds g.
	std::string image(uint64_t g, int node)
	{
		Builder b;
		EXPECT_EQ(b.i64("node", node), 0) << b.error();
		EXPECT_EQ(b.i64("gen", (int64_t)g), 0) << b.error();
		std::string path = file("img-" + std::to_string(g) + "-" + std::to_string(node) + ".shmkv");
		EXPECT_EQ(b.finish(path), 0) << b.error();
		return path;
	}
	// Publishes generation g with one copy per node in nodes (-1: unpinned),
	// the copy of node `missing` removed.
	void publish(uint64_t g, const std::vector<int> &nodes, int missing = -2)
	{
		std::vector<shmkv_ctl_segment> segs;
		for (int node : nodes) {
			std::string path = image(g, node);
			if (node == missing)
				unlink(path.c_str());
			segs.push_back(segment(path, node));
		}
		HandCtl::publish(g, segs);
	}
};

int64_t key(shmkv *db, const char *k)
{
	int64_t v = -99;
	EXPECT_EQ(shmkv_get_i64(db, k, strlen(k), &v), 0) << k;
	return v;
}

// The node this thread runs on (this machine may have one node or more).
int my_node()
{
	unsigned cpu = 0, node = 0;
	return getcpu(&cpu, &node) == 0 ? (int)node : -1;
}

} // namespace

TEST(Replica, AttachMapsTheCopyOfThisThreadsNode)
{
	int me = my_node();
	if (me < 0 && !shmkv_test::emulator().empty()) // natively getcpu always answers
		GTEST_SKIP() << shmkv_test::emulator() << ": no getcpu";
	ASSERT_GE(me, 0);
	Cache c;
	c.publish(1, {me + 1, me, me + 2});
	shmkv *db = nullptr;
	char why[512] = "";
	ASSERT_EQ(shmkv_attach_diag(c.root(), "c", 0, &db, why, sizeof why), 0) << why;
	EXPECT_EQ(key(db, "node"), me);
	EXPECT_EQ(shmkv_node(db), me);
	shmkv_close(db);
}

TEST(Replica, AttachNodeChoosesAndRefreshFollows)
{
	Cache c;
	c.publish(1, {3, 0, 5});
	shmkv *db = nullptr;
	char why[512] = "";
	for (int n : {0, 3, 5}) {
		ASSERT_EQ(shmkv_attach_node(c.root(), "c", n, 0, &db, why, sizeof why), 0) << why;
		EXPECT_EQ(key(db, "node"), n);
		EXPECT_EQ(shmkv_node(db), n);
		shmkv_close(db);
	}
	// a new generation: refresh maps the same node's copy of it
	ASSERT_EQ(shmkv_attach_node(c.root(), "c", 5, 0, &db, why, sizeof why), 0) << why;
	c.publish(2, {5, 3, 0});
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_EQ(key(db, "gen"), 2);
	EXPECT_EQ(key(db, "node"), 5);
	// now without a copy for node 5: the nearest, else the first
	c.publish(3, {3, 0});
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_EQ(key(db, "gen"), 3);
	EXPECT_TRUE(shmkv_node(db) == 3 || shmkv_node(db) == 0) << shmkv_node(db);
	shmkv_close(db);
	EXPECT_EQ(shmkv_attach_node(c.root(), "c", 64, 0, &db, why, sizeof why), -EINVAL);
	EXPECT_NE(std::string(why).find("node 64"), std::string::npos) << why;
	EXPECT_EQ(shmkv_attach_node(c.root(), "c", -2, 0, &db, why, sizeof why), -EINVAL);
}

TEST(Replica, ACopyThatWillNotMapFallsBackToTheFirst)
{
	Cache c;
	c.publish(1, {3, 7}, 7); // node 7's file is gone
	shmkv *db = nullptr;
	char why[512] = "";
	ASSERT_EQ(shmkv_attach_node(c.root(), "c", 7, 0, &db, why, sizeof why), 0) << why;
	EXPECT_EQ(key(db, "node"), 3);
	EXPECT_EQ(shmkv_node(db), 3);
	shmkv_close(db);
}

TEST(Replica, OneUnpinnedCopyIsNodeMinusOne)
{
	Cache c;
	c.publish(1, {-1});
	shmkv *db = nullptr;
	char why[512] = "";
	ASSERT_EQ(shmkv_attach_node(c.root(), "c", 2, 0, &db, why, sizeof why), 0) << why;
	EXPECT_EQ(key(db, "node"), -1);
	EXPECT_EQ(shmkv_node(db), -1);
	shmkv_close(db);
	// a file handle is never pinned
	Builder b;
	ASSERT_EQ(b.i64("x", 1), 0);
	TempDir d;
	ASSERT_EQ(b.finish(d.file("f.shmkv")), 0);
	ASSERT_EQ(shmkv_open_file(d.file("f.shmkv").c_str(), 0, &db), 0);
	EXPECT_EQ(shmkv_node(db), -1);
	shmkv_close(db);
}
