/* probes.c - the semaphores of the loader's USDT probes (probes.h). */
#include "probes.h"

#if SHMKV_HAVE_SDT
/* A tracer (bpftrace, perf, systemtap) increments one when it attaches to
 * its probe and decrements it when it detaches; the loader only reads them. */
#define LOADER__SEM_DEF(n)                                                                         \
	volatile unsigned short shmkv_loader_##n##_semaphore __attribute__((section(".probes")));
LOADER_PROBES(LOADER__SEM_DEF)
#else
/* ISO C wants a translation unit to declare something */
typedef int loader_probes_none;
#endif
