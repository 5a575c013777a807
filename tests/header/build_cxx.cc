// Compiles <shmkv_build.h> alone as C++17 (-pedantic).
#include <shmkv_build.h>

#include <cstddef>

size_t header_test_build_cxx();

size_t header_test_build_cxx()
{
	shmkv_build_options o{};
	o.on_duplicate = SHMKV_DUP_FIRST;
	auto add = &shmkv_builder_add_strlist;
	(void)add;
	return sizeof o + sizeof(shmkv_build_stats) + (SHMKV_INPUT_TSV - SHMKV_INPUT_JSONL);
}
