/* memkind.c - see memkind.h. */
#include "memkind.h"

#include <stdio.h>

#include <shmkv.h>

const char *memkind_page_size(uint64_t b, char *buf, size_t len)
{
	if (b >= (UINT64_C(1) << 30) && !(b & ((UINT64_C(1) << 30) - 1)))
		snprintf(buf, len, "%lluG", (unsigned long long)(b >> 30));
	else if (b >= (UINT64_C(1) << 20) && !(b & ((UINT64_C(1) << 20) - 1)))
		snprintf(buf, len, "%lluM", (unsigned long long)(b >> 20));
	else
		snprintf(buf, len, "%lluK", (unsigned long long)(b >> 10));
	return buf;
}

const char *memkind_name(uint32_t flags, uint64_t page_size, char *buf, size_t len)
{
	char ps[24];
	if (flags & SHMKV_SEG_HUGETLB)
		snprintf(buf, len, "hugetlb-%s", memkind_page_size(page_size, ps, sizeof ps));
	else
		snprintf(buf, len, "shm");
	return buf;
}
