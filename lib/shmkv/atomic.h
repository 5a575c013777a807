/* shmkv/atomic.h - the atomics shim: <stdatomic.h> in C, std::atomic in C++
 * (C++ programs include this C header). Only what the control segment and
 * the reference counts of a shared range (range.h) need.
 * Part of the header-only reader; include <shmkv.h>, not this file. */
#ifndef SHMKV_ATOMIC_H
#define SHMKV_ATOMIC_H

#include <stdint.h>

#ifdef __cplusplus
#include <atomic>
#define SHMKV__ATOMIC(p) reinterpret_cast<std::atomic<uint64_t> *>(const_cast<uint64_t *>(p))
static inline uint64_t shmkv__load_acquire(const uint64_t *p)
{
	return std::atomic_load_explicit(SHMKV__ATOMIC(p), std::memory_order_acquire);
}
static inline uint64_t shmkv__load_relaxed(const uint64_t *p)
{
	return std::atomic_load_explicit(SHMKV__ATOMIC(p), std::memory_order_relaxed);
}
static inline void shmkv__store_release(uint64_t *p, uint64_t v)
{
	std::atomic_store_explicit(SHMKV__ATOMIC(p), v, std::memory_order_release);
}
static inline void shmkv__store_relaxed(uint64_t *p, uint64_t v)
{
	std::atomic_store_explicit(SHMKV__ATOMIC(p), v, std::memory_order_relaxed);
}
static inline void shmkv__fetch_add_relaxed(uint64_t *p, uint64_t v)
{
	std::atomic_fetch_add_explicit(SHMKV__ATOMIC(p), v, std::memory_order_relaxed);
}
static inline uint64_t shmkv__fetch_sub_acq_rel(uint64_t *p, uint64_t v)
{
	return std::atomic_fetch_sub_explicit(SHMKV__ATOMIC(p), v, std::memory_order_acq_rel);
}
static inline void shmkv__fence_acquire(void)
{
	std::atomic_thread_fence(std::memory_order_acquire);
}
static inline void shmkv__fence_release(void)
{
	std::atomic_thread_fence(std::memory_order_release);
}
#else
#include <stdatomic.h>
#define SHMKV__ATOMIC(p) ((_Atomic uint64_t *)(uintptr_t)(p))
static inline uint64_t shmkv__load_acquire(const uint64_t *p)
{
	return atomic_load_explicit(SHMKV__ATOMIC(p), memory_order_acquire);
}
static inline uint64_t shmkv__load_relaxed(const uint64_t *p)
{
	return atomic_load_explicit(SHMKV__ATOMIC(p), memory_order_relaxed);
}
static inline void shmkv__store_release(uint64_t *p, uint64_t v)
{
	atomic_store_explicit(SHMKV__ATOMIC(p), v, memory_order_release);
}
static inline void shmkv__store_relaxed(uint64_t *p, uint64_t v)
{
	atomic_store_explicit(SHMKV__ATOMIC(p), v, memory_order_relaxed);
}
static inline void shmkv__fetch_add_relaxed(uint64_t *p, uint64_t v)
{
	atomic_fetch_add_explicit(SHMKV__ATOMIC(p), v, memory_order_relaxed);
}
static inline uint64_t shmkv__fetch_sub_acq_rel(uint64_t *p, uint64_t v)
{
	return atomic_fetch_sub_explicit(SHMKV__ATOMIC(p), v, memory_order_acq_rel);
}
static inline void shmkv__fence_acquire(void)
{
	atomic_thread_fence(memory_order_acquire);
}
static inline void shmkv__fence_release(void)
{
	atomic_thread_fence(memory_order_release);
}
#endif

static inline void shmkv__cpu_relax(void)
{
#if defined(__x86_64__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

#endif /* SHMKV_ATOMIC_H */
