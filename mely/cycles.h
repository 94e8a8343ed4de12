/*
 * cycles.h: the time-stamp counter, for cycle counts in statistics and benchmarks.
 * The TSC is constant and invariant on the machines we target (KVM guests on
 * recent x86), so cycles measured on different cores can be compared.
 * Any thread.
 */
#ifndef MELY_CYCLES_H
#define MELY_CYCLES_H

#include <stdint.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t mely__cycles(void) { return __rdtsc(); }
static inline void mely__cpu_relax(void) { _mm_pause(); }
#else
/* Without a TSC, nanoseconds stand in for cycles: the figures stay monotonic. */
static inline uint64_t mely__cycles(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
static inline void mely__cpu_relax(void) { __asm__ __volatile__("" ::: "memory"); }
#endif

/* Monotonic nanoseconds (vDSO: no system call). */
static inline uint64_t mely__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
