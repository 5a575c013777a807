// probes.cc - the semaphores of the builder library's USDT probes (probes.h).
#include "probes.h"

#if SHMKV_HAVE_SDT
// A tracer increments one when it attaches to its probe, decrements it when
// it detaches; the builder only reads them.
#define BUILDER__SEM_DEF(n)                                                                        \
	extern "C" {                                                                               \
	volatile unsigned short shmkv_build_##n##_semaphore                                        \
		__attribute__((section(".probes"), visibility("hidden"))) = 0;                      \
	}
BUILDER_PROBES(BUILDER__SEM_DEF)
#endif
