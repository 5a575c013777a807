/* Compiles <shmkv_build.h> alone as strict C11 (-std=c11 -pedantic, no _GNU_SOURCE). */
#include <shmkv_build.h>

size_t header_test_build_c(void);

size_t header_test_build_c(void)
{
	shmkv_build_options o;
	shmkv_build_stats s;
	int (*init)(shmkv_build_options *) = shmkv_build_options_init;
	int (*add)(shmkv_builder *, const void *, size_t, unsigned, const void *, size_t) =
		shmkv_builder_add;
	int (*finish)(shmkv_builder *, const char *, shmkv_build_stats *) = shmkv_builder_finish;
	(void)init;
	(void)add;
	(void)finish;
	o.on_duplicate = SHMKV_DUP_LAST;
	o.fixed = SHMKV_OPT_SEED | SHMKV_OPT_HASH_BITS;
	(void)o;
	return sizeof(shmkv_build_options) + sizeof s + (SHMKV_INPUT_TSV - SHMKV_INPUT_JSONL);
}
