// header_test: the public headers compile alone as strict C11 (-std=c11
// -pedantic, without _GNU_SOURCE) and as C++17; see tests/header/. This file
// links the four translation units and checks they agree.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

extern "C" int header_test_shmkv_c(char *why, size_t why_len);
extern "C" size_t header_test_build_c(void);
int header_test_shmkv_cxx(char *why, size_t why_len);
size_t header_test_build_cxx();

TEST(Header, ReaderAsC11)
{
	char why[256] = "";
	EXPECT_EQ(header_test_shmkv_c(why, sizeof why), -ENOENT);
	EXPECT_NE(strstr(why, "/nonexistent/shmkv-header-test"), nullptr) << why;
}

TEST(Header, ReaderAsCxx17)
{
	char why[256] = "";
	EXPECT_EQ(header_test_shmkv_cxx(why, sizeof why), -ENOENT);
	EXPECT_NE(strstr(why, "/nonexistent/shmkv-header-test"), nullptr) << why;
}

TEST(Header, BuilderStructsAgreeBetweenCAndCxx)
{
	EXPECT_GT(header_test_build_c(), 0u);
	EXPECT_EQ(header_test_build_c(), header_test_build_cxx());
}
