/* probes.h - the builder library's USDT probes (provider
 * shmkv_build), listed with their arguments in perf/README.md, which is the interface; tests/perf
 * checks that list against the binary's notes.
 *
 * Each probe is gated by its semaphore (the kernel counts the tracers
 * attached to it, in .probes): untraced, a probe site costs one load and a
 * branch, and its arguments are not computed. Built without <sys/sdt.h>
 * (SHMKV_HAVE_SDT 0, meson -Dusdt=disabled or the header missing), a probe
 * runs nothing (its arguments only count as used). The semaphores are defined in probes.cc. */
#ifndef BUILDER_PROBES_H
#define BUILDER_PROBES_H

#ifndef SHMKV_HAVE_SDT
#error "SHMKV_HAVE_SDT is not defined: builder/meson.build defines it to 0 or 1"
#endif

#if SHMKV_HAVE_SDT
#define _SDT_HAS_SEMAPHORES 1
#define SDT_USE_VARIADIC 1
#include <sys/sdt.h>

#define BUILDER_PROBES(X) X(parse_start) X(parse_done) X(layout_done) X(write_done)

#define BUILDER__SEM_DECL(n)                                                                        \
	extern "C" volatile unsigned short shmkv_build_##n##_semaphore                                \
		__attribute__((section(".probes"), visibility("hidden")));
BUILDER_PROBES(BUILDER__SEM_DECL)
#undef BUILDER__SEM_DECL

/* PROBE(name, args...): fires shmkv_build:name when a tracer is attached. */
#define PROBE(name, ...)                                                                           \
	do {                                                                                       \
		if (__builtin_expect(shmkv_build_##name##_semaphore != 0, 0))                     \
			STAP_PROBEV(shmkv_build, name, __VA_ARGS__);                              \
	} while (0)
#else
/* nothing runs, but the arguments count as used: a value computed only for
 * a probe must not turn into an unused-variable error where SDT is off (the
 * AArch64 cross build) */
#define PROBE(name, ...) ((void)sizeof((__VA_ARGS__, 0)))
#endif

#endif /* BUILDER_PROBES_H */
