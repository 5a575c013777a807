/* memkind.h - the name of the memory a segment lives in, as the loader's
 * `list`/`status` and shmctl's `cache list` show it: "shm" (tmpfs) or
 * "hugetlb-2M" (hugetlbfs, with its page size). */
#ifndef SHMKV_COMMON_MEMKIND_H
#define SHMKV_COMMON_MEMKIND_H

#include <stddef.h>
#include <stdint.h>

/* flags: the segment's SHMKV_SEG_* flags (lib/shmkv/protocol.h); page_size
 * in bytes. Writes into buf[len] (16 bytes do) and returns buf. */
const char *memkind_name(uint32_t flags, uint64_t page_size, char *buf, size_t len);
/* A page size as hugetlbfs names it: "2M", "1G", "64K". Returns buf. */
const char *memkind_page_size(uint64_t bytes, char *buf, size_t len);

#endif /* SHMKV_COMMON_MEMKIND_H */
