/* fuzz_image_fixsum: arbitrary bytes as an image, made checksum-valid first
 * (what anyone who can write the spool can do): the input is cut
 * to a multiple of SHMKV_FILE_ALIGN, file_size set, uncovered bytes zeroed,
 * every section checksum and the header checksum recomputed
 * (fuzz_util.h: fuzz_fix_checksums). The fix-up is in the target rather than
 * in a custom mutator so that a saved crash input replays as is. Then opened
 * with checksums checked (the default open) and read every way. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size -= size % SHMKV_FILE_ALIGN;
	if (!size)
		return 0;
	uint8_t *b = fuzz_copy(data, size);
	fuzz_fix_checksums(b, size);
	shmkv db;
	if (fuzz_open(b, size, 0, &db) == 0)
		fuzz_read_all(&db, b, size);
	free(b);
	return 0;
}
