/* fuzz_delta: arbitrary bytes as a delta image (FORMAT.md §19) of a fixed
 * base, read through by the C reader and merged by the builder
 * (fuzz_delta_body.c). The section checksums as they come: opened with
 * SHMKV_OPEN_NOVERIFY (the header checksum still guards the header; the
 * target recomputes it after patching the identity), so a mutated section
 * reaches the lookups; the builder, which checks every checksum, must
 * refuse it. The checksum-fixing twin, fuzz_delta_fixsum, reaches the
 * merge with mutated sections. */
#include <shmkv.h>

#include "fuzz_delta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_delta_one(data, size, SHMKV_OPEN_NOVERIFY, 0);
	return 0;
}
