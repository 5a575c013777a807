/* trace.h - the reader's USDT probes (provider shmkv): opt-in, semaphore-gated.
 *
 * shmkv's own code: a thin layer over <sys/sdt.h>, which is not copied here
 * but comes from Debian's systemtap-sdt-dev (in ./run's PKGS), and is
 * included only when the program opts in.
 *
 * Off unless the including program asks: nothing here is compiled, and the
 * reader needs no <sys/sdt.h>, unless SHMKV_USDT is 1. To opt in:
 *
 *   - define SHMKV_USDT to 1 for every translation unit that includes
 *     <shmkv.h> (-DSHMKV_USDT=1), with <sys/sdt.h> installed (Debian:
 *     systemtap-sdt-dev; a header only, no library);
 *   - in exactly one of them, also define SHMKV_USDT_SEMAPHORES to 1 before
 *     the include: that one defines the semaphores (one unsigned short per
 *     probe, in the .probes section, hidden). Forgetting it fails the link
 *     with "undefined reference to `shmkv_get_hit_semaphore'"; defining it
 *     twice fails with "multiple definition".
 *
 *     #define SHMKV_USDT_SEMAPHORES 1   // one .c/.cc file only
 *     #include <shmkv.h>
 *
 * Probes (names and arguments are an interface: perf/README.md):
 *   shmkv:attach   (db, name, generation, err)      end of shmkv_attach_diag
 *   shmkv:refresh  (db, name, old_gen, new_gen, result)  a refresh that moved
 *                  (result 1) or failed (< 0); not one that found nothing new
 *   shmkv:close    (db, generation)
 *   shmkv:get_hit  (db, key, key_len, ns)           shmkv_get and the typed getters
 *   shmkv:get_miss (db, key, key_len, err, ns, expired)  err: SHMKV_ENOTFOUND,
 *                  ...; expired 1 when the key is in the image but expired
 *                  (format v2, FORMAT.md §17.6; err is SHMKV_ENOTFOUND)
 * ns is the lookup's own time (CLOCK_MONOTONIC around it, taken only while a
 * get probe is traced), so a histogram of it is not inflated by the probe's
 * trap. shmkv_get_batch fires no get probes.
 *
 * Cost when no tracer is attached: attach, refresh and close test their
 * semaphore (a load and a branch). A get tests nothing: shmkv__usdt_gate()
 * reads the get semaphores when a handle is opened and at every
 * shmkv_refresh() (file handles too), and while one is set it sends that
 * handle's gets down the cold path (slow_key_len 0), which times and fires
 * them. So a get costs the same instructions as in a build without probes
 * (bench/RESULTS.md measures it), and a tracer sees a handle's gets from its
 * next refresh on: a program that never calls shmkv_refresh() shows get
 * probes only on handles opened after the tracer attached.
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
