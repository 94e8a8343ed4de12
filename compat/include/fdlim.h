/* SPDX-License-Identifier: MIT */
/*
 * fdlim.h (mely-compat): libasync's file-descriptor limit (RLIMIT_NOFILE).
 *   fdlim_get(hard)      the hard (hard != 0) or soft limit; FDLIM_MAX when
 *                        unlimited; -1 on error
 *   fdlim_set(n, hard)   hard 0: soft limit n, capped at the hard limit;
 *                        hard 1: soft limit n, the hard limit raised to n if
 *                        below; hard -1: hard limit n, the soft limit lowered
 *                        to n if above. 0 on success, -1 on error (n <= 0, or
 *                        setrlimit refused: raising the hard limit needs
 *                        privilege)
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_FDLIM_H
#define MELY_COMPAT_FDLIM_H

#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

#define FDLIM_MAX 0x18000

inline int fdlim_get(int hard)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -1;
    rlim_t v = hard ? rl.rlim_max : rl.rlim_cur;
    if (v == RLIM_INFINITY || v > (rlim_t)0x7fffffff)
        return v == RLIM_INFINITY ? FDLIM_MAX : 0x7fffffff;
    return (int)v;
}

inline int fdlim_set(rlim_t lim, int hard)
{
    struct rlimit rl;
    if (lim <= 0 || getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -1;
    if (hard == 0) {
        rl.rlim_cur = lim < rl.rlim_max ? lim : rl.rlim_max;
    } else if (hard == 1) {
        rl.rlim_cur = lim;
        if (lim > rl.rlim_max)
            rl.rlim_max = lim;
    } else if (hard == -1) {
        rl.rlim_max = lim;
        if (rl.rlim_cur > lim)
            rl.rlim_cur = lim;
    } else {
        return -1;
    }
    return setrlimit(RLIMIT_NOFILE, &rl) < 0 ? -1 : 0;
}

#endif /* MELY_COMPAT_FDLIM_H */
