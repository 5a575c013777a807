/* fuzz_jsonl: the builder's JSONL reader (shmkv_builder_add_file, JSONL) on
 * arbitrary text; accepted input is built and read back (fuzz_build_input.h). */
#include "fuzz_build_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_build_one(data, size, SHMKV_INPUT_JSONL, 0);
	return 0;
}
