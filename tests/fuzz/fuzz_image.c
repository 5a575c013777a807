/* fuzz_image: arbitrary bytes as an image, checksums as they come. Opened
 * with the section checksums checked and without (SHMKV_OPEN_NOVERIFY: the
 * header checksum still guards the header); whatever opens is read every way
 * (fuzz_util.h: fuzz_read_all). Mostly reaches the header checks: the
 * checksum-fixing twin, fuzz_image_fixsum, reaches past them. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *b = fuzz_copy(data, size);
	static const unsigned flags[] = {0, SHMKV_OPEN_NOVERIFY};
	for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
		shmkv db;
		if (fuzz_open(b, size, flags[i], &db) == 0)
			fuzz_read_all(&db, b, size);
	}
	free(b);
	return 0;
}
