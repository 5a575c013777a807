/* fuzz_delta_fixsum: fuzz_delta (fuzz_delta_body.c) on the input made
 * checksum-valid first, as fuzz_image_fixsum does (fuzz_util.h:
 * fuzz_fix_checksums; in the target, so a crash input replays as is), then
 * opened with every checksum checked: what anyone who can write the spool
 * can hand the loader, `shmctl cache apply` or `shmctl image apply`. */
#include <shmkv.h>

#include "fuzz_delta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_delta_one(data, size, 0, 1);
	return 0;
}
