/* fuzz_tsv: the builder's TSV reader (shmkv_builder_add_file, TSV) on
 * arbitrary text. The first byte picks the value type (--type), the rest is
 * the file; accepted input is built and read back (fuzz_build_input.h). */
#include "fuzz_build_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	unsigned type = 1u + data[0] % SHMKV_TYPE_MAX;
	fuzz_build_one(data + 1, size - 1, SHMKV_INPUT_TSV, type);
	return 0;
}
