// ctl_vectors_test: the C reader's attach over every control-segment vector
// of ctl/manifest.json (tests/vectors/README.md, "Control-segment vectors"):
// each case's files copied into a private directory (mode 0700, the modes
// the manifest names), the control segment's @DIR@ paths substituted, then
// shmkv_attach_diag() with and without SHMKV_ATTACH_VERIFY: the verdict,
// and for an accepted case its generation and the listed lookups.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <jansson.h>

#include <shmkv.h>

#include "vec_util.h"

namespace {

using vec::read_whole;
using vec::unhex;
const auto vdir = vec::dir;

const char *s_of(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

// Writes bytes to path with mode (whatever the umask).
::testing::AssertionResult put_file(const std::string &path, const std::string &bytes,
				    const char *mode)
{
	int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return ::testing::AssertionFailure() << path << ": " << strerror(errno);
	bool ok = write(fd, bytes.data(), bytes.size()) == (ssize_t)bytes.size() &&
		  fchmod(fd, (mode_t)strtoul(mode, nullptr, 8)) == 0;
	close(fd);
	if (!ok)
		return ::testing::AssertionFailure() << path << ": write or chmod failed";
	return ::testing::AssertionSuccess();
}

// The substitution rule (README.md): a path field that starts with the
// token takes dir in its place, NUL-padded; nothing else changes.
::testing::AssertionResult substitute(std::string &ctl, const std::string &token,
				      const std::string &dir)
{
	for (size_t i = 0; i < 8 && ctl.size() >= 128 + 256 * (i + 1); i++) {
		char *p = &ctl[128 + 256 * i + 32];
		if (memcmp(p, token.data(), token.size()) != 0)
			continue;
		std::string rest(p + token.size(), strnlen(p + token.size(), 224 - token.size()));
		std::string path = dir + rest;
		if (path.size() >= 224)
			return ::testing::AssertionFailure()
			       << "the path " << path << " does not fit 224 bytes with its NUL";
		memset(p, 0, 224);
		memcpy(p, path.data(), path.size());
	}
	return ::testing::AssertionSuccess();
}

class CtlVectors : public ::testing::Test {
protected:
	void SetUp() override
	{
		json_error_t e;
		m_ = json_load_file((vdir() + "/ctl/manifest.json").c_str(), 0, &e);
		ASSERT_NE(m_, nullptr) << vdir() << "/ctl/manifest.json: " << e.text << " at line "
				       << e.line;
		ASSERT_STREQ(s_of(m_, "format"), "shmkv-ctl-vectors");
		ASSERT_EQ(json_integer_value(json_object_get(m_, "manifest_version")), 1);
		cs_ = json_object_get(m_, "cases");
		ASSERT_TRUE(json_is_array(cs_));
		ASSERT_GT(json_array_size(cs_), 0u);
	}
	void TearDown() override { json_decref(m_); }
	json_t *m_ = nullptr, *cs_ = nullptr;
};

void check_gets(shmkv *db, json_t *gets, const std::string &where)
{
	size_t j;
	json_t *g;
	json_array_foreach(gets, j, g) {
		const std::string key = unhex(s_of(g, "key_hex"));
		SCOPED_TRACE(where + " get " + s_of(g, "key_hex"));
		shmkv_value v;
		int err = shmkv_get(db, key.data(), key.size(), &v);
		ASSERT_STREQ(shmkv_errname(err), s_of(g, "result"));
		if (err)
			continue;
		const std::string type = s_of(g, "type"), want = s_of(g, "value");
		if (type == "string") {
			ASSERT_EQ(v.type, (uint32_t)SHMKV_TYPE_STRING);
			EXPECT_EQ(std::string((const char *)v.data, v.size), want);
		} else {
			ASSERT_EQ(type, "i64");
			ASSERT_EQ(v.type, (uint32_t)SHMKV_TYPE_I64);
			int64_t x;
			memcpy(&x, v.data, 8);
			EXPECT_EQ(x, strtoll(want.c_str(), nullptr, 10));
		}
	}
}

TEST_F(CtlVectors, EveryCaseAttachesAsTheManifestSays)
{
	const std::string token = s_of(m_, "dir_token");
	ASSERT_FALSE(token.empty());
	size_t i;
	json_t *c;
	json_array_foreach(cs_, i, c) {
		const std::string name = s_of(c, "name");
		SCOPED_TRACE(name);
		char tmpl[] = "/tmp/shmkv-ctlvec.XXXXXX";
		ASSERT_NE(mkdtemp(tmpl), nullptr) << strerror(errno);
		const std::string dir = tmpl;
		std::vector<std::string> made;
		size_t k;
		json_t *f;
		json_array_foreach(json_object_get(c, "files"), k, f) {
			std::string bytes;
			ASSERT_TRUE(read_whole(vdir() + "/" + s_of(f, "from"), bytes)) << s_of(f, "from");
			made.push_back(dir + "/" + s_of(f, "name"));
			ASSERT_TRUE(put_file(made.back(), bytes, s_of(f, "mode")));
		}
		std::string ctl;
		ASSERT_TRUE(read_whole(vdir() + "/ctl/" + s_of(c, "ctl"), ctl));
		ASSERT_TRUE(substitute(ctl, token, dir));
		made.push_back(dir + "/" + name + ".ctl");
		ASSERT_TRUE(put_file(made.back(), ctl, s_of(c, "ctl_mode")));

		for (unsigned flags : {0u, (unsigned)SHMKV_ATTACH_VERIFY}) {
			const std::string where = name + (flags ? " (verify)" : "");
			shmkv *db = nullptr;
			char why[512] = "";
			int err = shmkv_attach_diag(dir.c_str(), name.c_str(), flags, &db, why,
						    sizeof why);
			EXPECT_STREQ(shmkv_errname(err), s_of(c, "attach")) << where << ": " << why;
			if (err == 0) {
				EXPECT_EQ(shmkv_generation(db),
					  (uint64_t)json_integer_value(json_object_get(c, "generation")));
				check_gets(db, json_object_get(c, "gets"), where);
				shmkv_close(db);
			} else {
				EXPECT_NE(why[0], 0) << where << ": a refusal says why";
			}
		}
		for (const std::string &p : made)
			unlink(p.c_str());
		rmdir(dir.c_str());
	}
}

} // namespace
