// refresh_test: shmkv_refresh stays bounded whatever state the control
// segment is left in (lib/PROTOCOL.md). A hand-made control segment plays the
// loader; the reader's slow-path work is counted through the SHMKV_TRACE
// hook (passes of the seqcount loop, opens of segment files), never timed.

// Count the reader's work: must come before <shmkv.h> (via test_util.h).
#include <cstdint>
static uint64_t g_ctl_retry, g_segment_open;
#define SHMKV_TRACE(event) ((void)(g_##event++))

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "test_util.h"

using shmkv_test::Builder;
using shmkv_test::TempDir;

namespace {

// Cache "c" under a temporary root whose control segment the test writes
// itself (test_util.h's HandCtl), with images built into the same directory.
class Cache : public shmkv_test::HandCtl {
public:
	// Builds an image whose key "gen" holds g; returns its path.
	std::string image(uint64_t g)
	{
		Builder b;
		EXPECT_EQ(b.i64("gen", (int64_t)g), 0) << b.error();
		std::string path = file("img-" + std::to_string(g) + ".shmkv");
		EXPECT_EQ(b.finish(path), 0) << b.error();
		return path;
	}
	// Publishes generation g with the segment at path (which may not exist).
	void publish(uint64_t g, const std::string &path) { HandCtl::publish(g, {segment(path)}); }
	// What a loader that died between its store of generation and the even
	// store of seq leaves: the new generation visible, seq odd.
	void die_mid_publish(uint64_t g)
	{
		ctl()->seq += 1;
		ctl()->generation = g;
	}
};

int64_t gen_of(shmkv *db)
{
	int64_t v = -1;
	EXPECT_EQ(shmkv_get_i64(db, "gen", 3, &v), 0);
	return v;
}

} // namespace

TEST(Refresh, TheTraceHookCounts)
{
	// the counters below mean something only if the reader reports to them
	Cache c;
	c.publish(1, c.image(1));
	uint64_t opens = g_segment_open;
	shmkv *db = nullptr;
	char why[512] = "";
	ASSERT_EQ(shmkv_attach_diag(c.root(), "c", 0, &db, why, sizeof why), 0) << why;
	EXPECT_EQ(g_segment_open - opens, 1u) << "attach opens one segment";
	shmkv_close(db);
}

TEST(Refresh, ALoaderDeadMidPublishCostsNoSpinning)
{
	Cache c;
	c.publish(1, c.image(1));
	shmkv *db = nullptr;
	char why[512] = "";
	ASSERT_EQ(shmkv_attach_diag(c.root(), "c", 0, &db, why, sizeof why), 0) << why;
	ASSERT_EQ(shmkv_generation(db), 1u);

	c.image(2);
	c.die_mid_publish(2);
	ASSERT_EQ(shmkv_ctl_mid_update(c.ctl()), 1);
	uint64_t retries = g_ctl_retry, opens = g_segment_open;
	for (int i = 0; i < 1000; i++) {
		ASSERT_EQ(shmkv_refresh(db), -EAGAIN) << "call " << i;
		ASSERT_EQ(shmkv_generation(db), 1u);
	}
	// on the old code each call spun 2^24 passes (0.26 s) before -EAGAIN
	EXPECT_EQ(g_ctl_retry - retries, 0u) << "refresh waited on an odd seq";
	EXPECT_EQ(g_segment_open - opens, 0u);
	EXPECT_EQ(gen_of(db), 1) << "the handle still serves generation 1";

	// the restarted loader's next publish closes the section: refresh moves
	c.publish(3, c.image(3));
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_EQ(shmkv_generation(db), 3u);
	EXPECT_EQ(gen_of(db), 3);
	shmkv_close(db);
}

TEST(Refresh, AGenerationThatWillNotMapIsTriedOncePerPublish)
{
	Cache c;
	c.publish(1, c.image(1));
	shmkv *db = nullptr;
	char why[512] = "";
	ASSERT_EQ(shmkv_attach_diag(c.root(), "c", 0, &db, why, sizeof why), 0) << why;

	std::string missing = std::string(c.root()) + "/no-such-segment";
	c.publish(2, missing);
	uint64_t opens = g_segment_open, retries = g_ctl_retry;
	for (int i = 0; i < 1000; i++) {
		ASSERT_EQ(shmkv_refresh(db), -ENOENT) << "call " << i;
		ASSERT_EQ(shmkv_generation(db), 1u);
	}
	// the old code paid open (+fstat) on every call: 1000 opens
	EXPECT_EQ(g_segment_open - opens, 1u) << "the failed generation was retried";
	EXPECT_EQ(g_ctl_retry - retries, 0u);
	EXPECT_EQ(gen_of(db), 1);

	// a segment that maps but is not an image: remembered just the same
	std::string junk = std::string(c.root()) + "/junk";
	ASSERT_TRUE(shmkv_test::write_file(junk, std::string(8192, 'j')));
	c.publish(3, junk);
	opens = g_segment_open;
	for (int i = 0; i < 100; i++)
		ASSERT_EQ(shmkv_refresh(db), SHMKV_EMAGIC) << "call " << i;
	EXPECT_EQ(g_segment_open - opens, 1u);

	// a publish moves seq: the next refresh tries again, and succeeds
	c.publish(4, c.image(4));
	opens = g_segment_open;
	EXPECT_EQ(shmkv_refresh(db), 1);
	EXPECT_EQ(g_segment_open - opens, 1u);
	EXPECT_EQ(gen_of(db), 4);
	EXPECT_EQ(shmkv_refresh(db), 0);
	EXPECT_EQ(g_segment_open - opens, 1u) << "unchanged: no system call";

	// and a failure after a success is remembered afresh
	c.publish(5, missing);
	opens = g_segment_open;
	EXPECT_EQ(shmkv_refresh(db), -ENOENT);
	EXPECT_EQ(shmkv_refresh(db), -ENOENT);
	EXPECT_EQ(g_segment_open - opens, 1u);
	EXPECT_EQ(gen_of(db), 4);
	shmkv_close(db);
}

TEST(Refresh, NothingPublishedIsRememberedToo)
{
	Cache c;
	c.publish(1, c.image(1));
	shmkv *db = nullptr;
	char why[512] = "";
	ASSERT_EQ(shmkv_attach_diag(c.root(), "c", 0, &db, why, sizeof why), 0) << why;
	// a restarted loader that found its images gone publishes "nothing"
	ASSERT_EQ(shmkv_ctl_publish(c.ctl(), 2, nullptr, 0, 1, 0), 0);
	uint64_t retries = g_ctl_retry, opens = g_segment_open;
	for (int i = 0; i < 100; i++)
		ASSERT_EQ(shmkv_refresh(db), -EAGAIN);
	EXPECT_EQ(g_ctl_retry - retries, 0u);
	EXPECT_EQ(g_segment_open - opens, 0u);
	EXPECT_EQ(gen_of(db), 1);
	shmkv_close(db);
}

TEST(Refresh, AttachGivesUpOnAStuckSegmentWithinItsBound)
{
	Cache c;
	c.publish(1, c.image(1));
	c.die_mid_publish(2);
	uint64_t retries = g_ctl_retry;
	shmkv *db = nullptr;
	char why[512] = "";
	EXPECT_EQ(shmkv_attach_diag(c.root(), "c", 0, &db, why, sizeof why), -EAGAIN);
	EXPECT_EQ(db, nullptr);
	EXPECT_NE(strstr(why, "mid-update"), nullptr) << why;
	// bounded: the seqcount loop gives up after its fixed limit of passes, far below the old 2^24
	EXPECT_LE(g_ctl_retry - retries, uint64_t(1) << 16);
	EXPECT_GT(g_ctl_retry - retries, 0u);
}
