/* SPDX-License-Identifier: MIT */
/*
 * mely.h (mely-compat): the header of the original Mely runtime, for programs
 * that `#include "mely.h"`. Not to be confused with the native C API, which is
 * <mely/mely.h> (this header does not include it).
 *
 * In the original Mely, callbacks are plain pointers (cbv is callback<void> *)
 * that the runtime frees after they ran, unless setFlagAutoFree(false) was
 * called on them. Here a callback is reference-counted underneath: a post
 * holds a count until the run ends, and setFlagAutoFree(false) holds one more,
 * so a raw pointer stays valid for re-posting.
 * Written for mely; no line comes from the original Mely.
 */
#ifndef MELY_COMPAT_LEGACY_MELY_H
#define MELY_COMPAT_LEGACY_MELY_H

#ifdef MELY_COMPAT_ASYNC_FLAVOR
#error "mely-compat: the original Mely's mely.h and async.h give cbv different types; include one of them"
#endif

/* What the original mely.h included, so that its programs find strerror,
 * memcpy, assert, pthread_*, htons... where they always did. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <errno.h>
#include <pthread.h>
#include <netinet/in.h>
#include <assert.h>
#include <stdint.h>

#include "refcnt.h"
#include "callback.h"
#include "err.h"
#include "amisc.h"
#include "melycompat_loop.h"

typedef callback<void> *cbv;
typedef callback<void, int> *cbi;
typedef callback<void, bool> *cbb;
/* The callback pointer type, as the original's callback header named it. */
#define CBV_PTR_TYPE cbv

/* Diagnostics: stderr, with the function name and line, in the original's
 * format and shape: PRINT_ALERT ends with its own semicolon and PANIC is a
 * block, so that programs that wrote them without a semicolon compile. */
#define DEBUG_TMP(fmt, ...) fprintf(stderr, "(%s,%d) " fmt, __func__, __LINE__, ##__VA_ARGS__)
#define PRINT_ALERT(fmt, ...)                                                                \
    fprintf(stderr, "-------\t(%s,%d) " fmt, __func__, __LINE__, ##__VA_ARGS__);
#define PANIC(fmt, ...)                                                                      \
    {                                                                                        \
        fprintf(stderr, "*******\t(%s,%d) " fmt, __func__, __LINE__, ##__VA_ARGS__);         \
        exit(EXIT_FAILURE);                                                                  \
    }
/* DEBUG expands to nothing: its arguments are not even compiled (programs
 * name debug-only variables in it). */
#define DEBUG(...)
/* The original's stub for an operation it never had. */
#define reset_threads_queue() PANIC("Not implemented in MELY\n")

/* The time-stamp counter. */
#if defined(__x86_64__) || defined(__i386__)
#define rdtscll(val)                                                                         \
    do {                                                                                     \
        unsigned int mely_compat_lo_, mely_compat_hi_;                                       \
        __asm__ __volatile__("rdtsc" : "=a"(mely_compat_lo_), "=d"(mely_compat_hi_));        \
        (val) = ((unsigned long long)mely_compat_hi_ << 32) | mely_compat_lo_;              \
    } while (0)
#else
#define rdtscll(val) ((val) = mely_compat_cycles())
#endif
unsigned long long mely_compat_cycles();

/* The original's benchmark hooks (doc/porting.md):
 *   save_bench_time(t)            prints "bench time: t" to stderr when
 *                                 MELY_COMPAT_BENCH=1, else nothing;
 *   reset_runtime_stats()         remembers the runtime's counters;
 *   dump_current_state(all)       prints every worker's counters since then;
 *   register_task_avg_duration(c) gives callbacks without a time-left
 *                                 annotation the time-left c (cycles);
 *   stop_hw_counters(), register_EH_name(fn, name)   do nothing (no hardware
 *                                 counters, no per-handler names here). */
void save_bench_time(unsigned long t);
void stop_hw_counters();
void reset_runtime_stats();
void dump_current_state(bool all);
void register_EH_name(void *fn, char *name);
void register_task_avg_duration(int cycles);

#endif /* MELY_COMPAT_LEGACY_MELY_H */
