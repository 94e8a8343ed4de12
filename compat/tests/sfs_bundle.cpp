/* SPDX-License-Identifier: MIT */
/*
 * sfs_bundle.cpp: sfs_bundle.h's sfs::bundle_t with two, three and four
 * values, read and written through obj1()..obj4().
 */
#include "async.h"
#include "sfs_bundle.h"

#include "ctest.h"

struct box {
    int v;
    explicit box(int x) : v(x) {}
};

int main()
{
    ct_watchdog(60);
    sfs::bundle_t<int, str> two(1, "a");
    CHECK(two.obj1() == 1 && two.obj2() == "a");
    two.obj1() = 5;
    two.obj2() = "b";
    const sfs::bundle_t<int, str> &c = two;
    CHECK(c.obj1() == 5 && c.obj2() == "b");

    sfs::bundle_t<int, str, double> three(2, "x", 0.5);
    CHECK(three.obj3() == 0.5);
    ptr<box> p = New refcounted<box>(7);
    sfs::bundle_t<char, int, str, ptr<box>> four('q', 3, "y", p);
    CHECK(four.obj1() == 'q' && four.obj4() == p && four.obj4()->v == 7);
    sfs::nil_t n = two.obj3();
    (void)n;
    (void)sfs::g_nil;

    /* A bundle copies: the original's values stay as they were. */
    sfs::bundle_t<int, str> copy = two;
    copy.obj1() = 9;
    CHECK(two.obj1() == 5 && copy.obj1() == 9);

    printf("compat sfs_bundle: ok\n");
    return 0;
}
