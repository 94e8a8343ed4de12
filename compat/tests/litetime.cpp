/* SPDX-License-Identifier: MIT */
/*
 * litetime.cpp: litetime.h on its own: the clock functions read the wall
 * clock (and refresh tsnow), the clock-source calls are accepted, and the
 * TIMESPEC_* macros.
 */
#include "litetime.h"

#include "ctest.h"

static long long ns(const timespec &t)
{
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main()
{
    ct_watchdog(60);

    sfs_set_clock(SFS_CLOCK_GETTIME);
    sfs_set_clock(SFS_CLOCK_TIMER, str(), true); /* mely keeps its clock */
    sfs_set_global_timestamp();
    sfs_leave_sel_loop();

    timespec before, after;
    clock_gettime(CLOCK_REALTIME, &before);
    timespec a = sfs_get_tsnow();
    timespec b;
    sfs_get_tsnow(&b, true);
    time_t secs = sfs_get_timenow();
    clock_gettime(CLOCK_REALTIME, &after);
    CHECK(ns(before) <= ns(a) && ns(a) <= ns(b) && ns(b) <= ns(after));
    CHECK(secs >= before.tv_sec && secs <= after.tv_sec);
    CHECK(ns(tsnow) >= ns(b) && ns(tsnow) <= ns(after)); /* refreshed */
    CHECK(timenow == tsnow.tv_sec);
    /* Not a cached value: a later call sees a later time. */
    usleep(2000);
    CHECK(ns(sfs_get_tsnow()) - ns(a) >= 2000000);

    timespec t = {5, 999999999};
    TIMESPEC_INC(&t);
    CHECK(t.tv_sec == 6 && t.tv_nsec == 0);
    TIMESPEC_INC(&t);
    CHECK(t.tv_sec == 6 && t.tv_nsec == 1);
    timespec u = {6, 2}, v = {7, 0};
    CHECK(TIMESPEC_LT(t, u) && !TIMESPEC_LT(u, t) && TIMESPEC_LT(u, v) && !TIMESPEC_LT(t, t));
    CHECK(TIMESPEC_EQ(t, t) && !TIMESPEC_EQ(t, u));
#if !defined(HAVE_SFS_CLOCK_T) || !defined(HAVE_MY_CLOCK_GETTIME)
    CHECK(!"litetime.h's feature macros");
#endif

    printf("compat litetime: ok\n");
    return 0;
}
