// The AVX2 variant of the directory compare, compiled with -mavx2 in a
// translation unit of its own: probe_variants_test calls it only when the
// CPU has AVX2.
#include <shmkv.h>

unsigned probe_test_match_avx2(const uint8_t *bk, unsigned n, uint64_t tag);

unsigned probe_test_match_avx2(const uint8_t *bk, unsigned n, uint64_t tag)
{
	return shmkv__match_avx2(bk, n, tag);
}
