/* trace.h - the reader's USDT probes (provider shmkv): opt-in, semaphore-gated,
 * a thin layer over <sys/sdt.h> (Debian's systemtap-sdt-dev, a header).
 *
 * Nothing is compiled unless SHMKV_USDT is 1 for every translation unit that
 * includes <shmkv.h>; exactly one of them also defines SHMKV_USDT_SEMAPHORES
 * to 1 before the include (the semaphores, one unsigned short a probe:
 * forgetting it fails the link, defining it twice too).
 *
 * Probes (an interface: perf/README.md):
 *   shmkv:attach   (db, name, generation, err)      end of shmkv_attach_diag
 *   shmkv:refresh  (db, name, old_gen, new_gen, result)  a refresh that moved
 *                  (result 1) or failed (< 0)
 *   shmkv:close    (db, generation)
 *   shmkv:get_hit  (db, key, key_len, ns)           shmkv_get and the typed getters
 *   shmkv:get_miss (db, key, key_len, err, ns, expired)  expired: 1 when the key
 *                  is in the image but has expired (FORMAT.md §17)
 * ns is the lookup's own time (CLOCK_MONOTONIC, taken only while a get probe
 * is traced). shmkv_get_batch fires no get probes.
 *
 * Untraced cost: attach, refresh and close test their semaphore. A get tests
 * nothing: shmkv__usdt_gate() reads the get semaphores when a handle is
 * opened and at every shmkv_refresh(), and while one is set sends that
 * handle's gets down the path that times and fires them (fast_key_len 0).
 * So a tracer sees a handle's gets from its next refresh on.
 *
 * <sys/sdt.h> is included with _SDT_HAS_SEMAPHORES: a translation unit that
 * includes it before <shmkv.h> without that macro gets an #error here. */
#ifndef SHMKV_TRACE_H
#define SHMKV_TRACE_H

#ifndef SHMKV_USDT
#define SHMKV_USDT 0
#endif
#ifndef SHMKV_USDT_SEMAPHORES
#define SHMKV_USDT_SEMAPHORES 0
#endif

#if SHMKV_USDT
#if defined(_SDT_H) && !defined(_SDT_HAS_SEMAPHORES)
#error "SHMKV_USDT: <sys/sdt.h> was included without _SDT_HAS_SEMAPHORES; include <shmkv.h> first"
#endif
#ifndef _SDT_HAS_SEMAPHORES
#define _SDT_HAS_SEMAPHORES 1
#endif
#include <sys/sdt.h>
#include <stdint.h>
#include <time.h>

#define SHMKV__USDT_PROBES(X) X(attach) X(refresh) X(close) X(get_hit) X(get_miss)

#ifdef __cplusplus
extern "C" {
#endif
#if SHMKV_USDT_SEMAPHORES
/* written by the kernel (uprobe reference counter) when a tracer attaches */
#define SHMKV__USDT_SEM(n)                                                                         \
	volatile unsigned short shmkv_##n##_semaphore                                              \
		__attribute__((section(".probes"), visibility("hidden"))) = 0;
#else
#define SHMKV__USDT_SEM(n)                                                                         \
	extern volatile unsigned short shmkv_##n##_semaphore                                       \
		__attribute__((section(".probes"), visibility("hidden")));
#endif
SHMKV__USDT_PROBES(SHMKV__USDT_SEM)
#undef SHMKV__USDT_SEM
#ifdef __cplusplus
}
#endif

/* 1 while a tracer is attached to probe n */
#define SHMKV__USDT_ON(n) __builtin_expect(shmkv_##n##_semaphore != 0, 0)
/* clang -pedantic warns about a GNU macro form inside <sys/sdt.h>'s own
 * macros: not ours to change, so silenced around each probe */
#if defined(__clang__)
#define SHMKV__USDT_QUIET_BEGIN                                                                    \
	_Pragma("clang diagnostic push")                                                           \
	_Pragma("clang diagnostic ignored \"-Wgnu-zero-variadic-macro-arguments\"")
#define SHMKV__USDT_QUIET_END _Pragma("clang diagnostic pop")
#else
#define SHMKV__USDT_QUIET_BEGIN
#define SHMKV__USDT_QUIET_END
#endif
/* fires probe n with its N arguments when a tracer is attached */
#define SHMKV__USDT(n, N, ...)                                                                     \
	do {                                                                                       \
		SHMKV__USDT_QUIET_BEGIN                                                            \
		if (SHMKV__USDT_ON(n))                                                             \
			STAP_PROBE##N(shmkv, n, __VA_ARGS__);                                      \
		SHMKV__USDT_QUIET_END                                                              \
	} while (0)

/* Monotonic nanoseconds for get_hit/get_miss's ns (only while traced). */
static inline uint64_t shmkv__usdt_ns(void)
{
	struct timespec t;
#ifdef CLOCK_MONOTONIC
	clock_gettime(CLOCK_MONOTONIC, &t);
#else /* strict ISO C: no POSIX clocks declared */
	timespec_get(&t, TIME_UTC);
#endif
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
#else
#define SHMKV__USDT(n, N, ...) ((void)0)
#endif /* SHMKV_USDT */

#endif /* SHMKV_TRACE_H */
