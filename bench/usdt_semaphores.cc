// usdt_semaphores.cc - lookup_bench_usdt only: the one translation unit that
// defines the reader's USDT semaphores (lib/shmkv/trace.h). Every other file
// of that build includes <shmkv.h> with SHMKV_USDT=1 from meson.
#define SHMKV_USDT_SEMAPHORES 1
#include <shmkv.h>
