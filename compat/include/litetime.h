/* SPDX-License-Identifier: MIT */
/*
 * litetime.h (mely-compat): libasync's clock interface and TIMESPEC_* macros.
 *   TIMESPEC_INC(&ts)        one nanosecond later
 *   TIMESPEC_LT(a, b), TIMESPEC_EQ(a, b)
 *   sfs_get_tsnow(force), sfs_get_tsnow(&ts, force), sfs_get_timenow(force):
 *       the wall clock (CLOCK_REALTIME), read now; this thread's tsnow (see
 *       melycompat_loop.h) is brought up to date too. libasync could return a
 *       cached estimate unless force was true; here every call reads the clock
 *       (a vDSO call, some 20 ns), so force changes nothing.
 *   sfs_set_clock(type, arg, lazy): libasync's choice of clock source
 *       (clock_gettime, an mmapped clock file, a timer-driven estimate). mely
 *       keeps its own clock: every type reads clock_gettime, arg and lazy are
 *       ignored.
 *   sfs_set_global_timestamp(), sfs_leave_sel_loop(): hints to libasync's
 *       estimated clocks; they do nothing here, where the clock is exact.
 * async.h includes it, as libasync's did.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_LITETIME_H
#define MELY_COMPAT_LITETIME_H

#include <time.h>

#include "amisc.h"
#include "init.h"
#include "melycompat_loop.h"
#include "str.h"

/* One nanosecond later. */
#define TIMESPEC_INC(ts)                                                                      \
    do {                                                                                      \
        if (++(ts)->tv_nsec == 1000000000L) {                                                 \
            (ts)->tv_sec++;                                                                   \
            (ts)->tv_nsec = 0L;                                                               \
        }                                                                                     \
    } while (0)
#define TIMESPEC_LT(a, b)                                                                     \
    ((a).tv_sec < (b).tv_sec || ((a).tv_sec == (b).tv_sec && (a).tv_nsec < (b).tv_nsec))
#define TIMESPEC_EQ(a, b) ((a).tv_sec == (b).tv_sec && (a).tv_nsec == (b).tv_nsec)

#define HAVE_SFS_CLOCK_T 1
#define HAVE_MY_CLOCK_GETTIME 1
typedef enum { SFS_CLOCK_GETTIME = 0, SFS_CLOCK_MMAP = 1, SFS_CLOCK_TIMER = 2 } sfs_clock_t;

inline void sfs_set_clock(sfs_clock_t, const str & = str(), bool = false) {}
inline void sfs_get_tsnow(struct timespec *ts, bool = false)
{
    mely_compat_refresh_now();
    *ts = tsnow;
}
inline struct timespec sfs_get_tsnow(bool force = false)
{
    struct timespec ts;
    sfs_get_tsnow(&ts, force);
    return ts;
}
inline time_t sfs_get_timenow(bool force = false)
{
    return sfs_get_tsnow(force).tv_sec;
}
inline void sfs_set_global_timestamp() {}
inline void sfs_leave_sel_loop() {}

#endif /* MELY_COMPAT_LITETIME_H */
