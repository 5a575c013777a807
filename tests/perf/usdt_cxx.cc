// usdt_cxx.cc - <shmkv.h> with the reader's probes (SHMKV_USDT=1) compiles as
// C++17 with -pedantic too (usdt_reader.c covers C11); compiled, not run.
#include <shmkv.h>

int usdt_cxx_get(const shmkv *db, const char *key, size_t len);
int usdt_cxx_get(const shmkv *db, const char *key, size_t len)
{
	shmkv_value v;
	return shmkv_get(db, key, len, &v);
}
