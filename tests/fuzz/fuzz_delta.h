/* fuzz_delta.h - what fuzz_delta.c and fuzz_delta_fixsum.c call: the body
 * both share, fuzz_delta_body.c (compiled once into a library for both,
 * meson.build here), which says what it reads and checks. */
#ifndef SHMKV_FUZZ_DELTA_H
#define SHMKV_FUZZ_DELTA_H

#include <stddef.h>
#include <stdint.h>

/* The bytes data[0, size) as a delta of the fixed base, as they are and
 * with their identity patched. flags: the open's (SHMKV_OPEN_NOVERIFY: the
 * section checksums as they come); fixsum: cut to a multiple of 4096 and
 * made checksum-valid first. A broken invariant aborts (FUZZ_CHECK). */
void fuzz_delta_one(const uint8_t *data, size_t size, unsigned flags, int fixsum);

#endif /* SHMKV_FUZZ_DELTA_H */
