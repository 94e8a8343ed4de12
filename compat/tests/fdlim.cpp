/* SPDX-License-Identifier: MIT */
/*
 * fdlim.cpp: fdlim.h on its own: fdlim_get reports RLIMIT_NOFILE, fdlim_set
 * changes the soft limit (capped at the hard one) and lowers the hard one.
 */
#include "fdlim.h"

#include "ctest.h"

#include <sys/resource.h>

int main()
{
    ct_watchdog(60);
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    int soft = fdlim_get(0), hard = fdlim_get(1);
    CHECK(soft > 0 && hard >= soft);
    if (rl.rlim_max == RLIM_INFINITY)
        CHECK(hard == FDLIM_MAX);
    else
        CHECK((rlim_t)hard == rl.rlim_max);
    CHECK((rlim_t)soft == rl.rlim_cur || (rl.rlim_cur == RLIM_INFINITY && soft == FDLIM_MAX));

    /* Soft limit: set, and capped at the hard limit. */
    CHECK(fdlim_set(64, 0) == 0);
    CHECK(fdlim_get(0) == 64 && fdlim_get(1) == hard);
    CHECK(fdlim_set((rlim_t)hard + 1000, 0) == 0);
    CHECK(fdlim_get(0) == hard);

    /* Hard limit lowered (allowed unprivileged): the soft one follows. */
    CHECK(fdlim_set(128, -1) == 0);
    CHECK(fdlim_get(1) == 128 && fdlim_get(0) == 128);
    /* hard 1 within the hard limit: the soft limit only. */
    CHECK(fdlim_set(100, 1) == 0);
    CHECK(fdlim_get(0) == 100 && fdlim_get(1) == 128);
    /* Raising the hard limit needs privilege; without it, -1. */
    if (geteuid() != 0)
        CHECK(fdlim_set(4096, 1) == -1 && fdlim_get(1) == 128);

    CHECK(fdlim_set(0, 0) == -1); /* libasync refused 0 */
    CHECK(fdlim_set(10, 7) == -1);

    printf("compat fdlim: ok\n");
    return 0;
}
