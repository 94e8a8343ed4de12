/* SPDX-License-Identifier: MIT */
/*
 * qtailq.cpp: qtailq.h's queue of values: FIFO and LIFO order, pop_front on
 * an empty queue, rmslot, and the values a destroyed queue still held freed.
 */
#include "async.h"
#include "qtailq.h"

#include "ctest.h"

static int g_live;
struct counted {
    int v;
    counted(int x = 0) : v(x) { g_live++; }
    counted(const counted &o) : v(o.v) { g_live++; }
    counted &operator=(const counted &o) = default;
    ~counted() { g_live--; }
};

int main()
{
    ct_watchdog(60);
    {
        qtailq_t<int> q;
        int x = -1;
        CHECK(!q.pop_front(&x) && x == -1);
        q.push_back(1);
        q.push_back(2);
        q.push_front(0);
        q.push_back(3);
        for (int want = 0; want < 4; want++)
            CHECK(q.pop_front(&x) && x == want);
        CHECK(!q.pop_front(&x));
    }
    {
        qtailq_t<str> q;
        q.push_back("b");
        q.push_front("a");
        str s;
        CHECK(q.pop_front(&s) && s == "a");
        CHECK(q.pop_front(&s) && s == "b");
    }
    {
        qtailq_t<counted> q;
        for (int i = 0; i < 100; i++)
            q.push_back(counted(i));
        CHECK(g_live == 100);
        counted c;
        CHECK(q.pop_front(&c) && c.v == 0 && g_live == 100);
    }
    CHECK(g_live == 0); /* the queue freed the 99 it held */

    printf("compat qtailq: ok\n");
    return 0;
}
