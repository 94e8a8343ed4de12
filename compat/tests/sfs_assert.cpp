/* SPDX-License-Identifier: MIT */
/*
 * sfs_assert.cpp: sfs_assert.h's DASSERT is compiled out, as in libasync's
 * releases: its condition is not evaluated.
 */
#include "sfs_assert.h"

#include "ctest.h"

static int g_calls;

int main()
{
    ct_watchdog(60);
    DASSERT(++g_calls == 100);
    DASSERT(no_such_name); /* not compiled either, as in libasync */
    DASSERT(1 == 2);
    CHECK(g_calls == 0);
    printf("compat sfs_assert: ok\n");
    return 0;
}
