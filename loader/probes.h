/* probes.h - the loader's USDT probes (provider shmkv_loader), listed with
 * their arguments in perf/README.md, which is the interface; tests/perf
 * checks that list against the binary's notes.
 *
 * Each probe is gated by its semaphore (the kernel counts the tracers
 * attached to it, in .probes): untraced, a probe site costs one load and a
 * branch, and its arguments are not computed. Built without <sys/sdt.h>
 * (SHMKV_HAVE_SDT 0, meson -Dusdt=disabled or the header missing), a probe
 * is nothing at all. The semaphores are defined in probes.c. */
#ifndef LOADER_PROBES_H
#define LOADER_PROBES_H

#ifndef SHMKV_HAVE_SDT
#error "SHMKV_HAVE_SDT is not defined: loader/meson.build defines it to 0 or 1"
#endif

#if SHMKV_HAVE_SDT
#define _SDT_HAS_SEMAPHORES 1
#define SDT_USE_VARIADIC 1
#include <sys/sdt.h>

#define LOADER_PROBES(X)                                                                           \
	X(load_start) X(read_progress) X(verify_done) X(place) X(publish) X(unlink) X(reject)      \
	X(adopt) X(rollback)

#define LOADER__SEM_DECL(n)                                                                        \
	extern volatile unsigned short shmkv_loader_##n##_semaphore                                \
		__attribute__((section(".probes")));
LOADER_PROBES(LOADER__SEM_DECL)
#undef LOADER__SEM_DECL

/* PROBE(name, args...): fires shmkv_loader:name when a tracer is attached. */
#define PROBE(name, ...)                                                                           \
	do {                                                                                       \
		if (__builtin_expect(shmkv_loader_##name##_semaphore != 0, 0))                     \
			STAP_PROBEV(shmkv_loader, name, __VA_ARGS__);                              \
	} while (0)
#else
#define PROBE(name, ...) ((void)0)
#endif

#endif /* LOADER_PROBES_H */
