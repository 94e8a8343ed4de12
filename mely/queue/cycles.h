/* SPDX-License-Identifier: MIT */
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
/* A span measured with mely__cycles() alone can come out short: RDTSC is not
 * ordered with the instructions around it, so the first read may execute
 * late and the last one early. The fenced pair keeps the span's work between
 * the reads (LFENCE waits for earlier instructions; RDTSCP for earlier loads
 * and stores too); use them to time steals and handlers. */
static inline uint64_t mely__cycles_begin(void)
{
    _mm_lfence();
    uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
}
static inline uint64_t mely__cycles_end(void)
{
    unsigned aux;
    uint64_t t = __rdtscp(&aux);
    _mm_lfence();
    return t;
}
#else
/* Without a TSC, nanoseconds stand in for cycles: the figures stay monotonic. */
static inline uint64_t mely__cycles(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
static inline void mely__cpu_relax(void) { __asm__ __volatile__("" ::: "memory"); }
static inline uint64_t mely__cycles_begin(void) { return mely__cycles(); }
static inline uint64_t mely__cycles_end(void) { return mely__cycles(); }
#endif

/* Monotonic nanoseconds (vDSO: no system call). */
static inline uint64_t mely__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
