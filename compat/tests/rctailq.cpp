/* SPDX-License-Identifier: MIT */
/*
 * rctailq.cpp: rctailq.h's tailq of counted objects: both ends, last()
 * through removals at either end, next, traverse, delete_all, destructor.
 */
#include "async.h"
#include "rctailq.h"

#include <vector>

#include "ctest.h"

static int g_live;
struct dat {
    int d;
    rctailq_entry_t<dat> lnk;
    rclist_entry_t<dat> lnk2; /* in an rclist too, independently */
    explicit dat(int x) : d(x) { g_live++; }
    ~dat() { g_live--; }
};
typedef rctailq_t<dat, &dat::lnk> dq;

static std::vector<int> contents(dq &q)
{
    std::vector<int> out;
    for (ptr<dat> p = q.first(); p; p = dq::next(p))
        out.push_back(p->d);
    return out;
}

static int g_seen;
static void count(ptr<dat>)
{
    g_seen++;
}
static void remove_each(dq *q, ptr<dat> p)
{
    q->remove(p);
}

int main()
{
    ct_watchdog(60);
    {
        dq q;
        CHECK(!q.first() && !q.last());
        q.insert_tail(New refcounted<dat>(1));
        CHECK(q.first() == q.last() && q.last()->d == 1);
        q.insert_tail(New refcounted<dat>(2));
        q.insert_head(New refcounted<dat>(0));
        q.insert_tail(New refcounted<dat>(3));
        CHECK(contents(q) == (std::vector<int>{0, 1, 2, 3}) && g_live == 4);
        CHECK(q.first()->d == 0 && q.last()->d == 3);

        q.remove(q.last());
        CHECK(q.last()->d == 2 && contents(q) == (std::vector<int>{0, 1, 2}) && g_live == 3);
        q.remove(q.first());
        CHECK(q.first()->d == 1 && q.last()->d == 2 && g_live == 2);
        q.insert_tail(New refcounted<dat>(7));
        CHECK(contents(q) == (std::vector<int>{1, 2, 7}) && q.last()->d == 7);

        /* The same object in an rclist through its other link. */
        rclist_t<dat, &dat::lnk2> l;
        l.insert_head(q.first());
        q.remove(q.first());
        CHECK(g_live == 3 && l.first()->d == 1 && contents(q) == (std::vector<int>{2, 7}));

        g_seen = 0;
        q.traverse(wrap(count));
        CHECK(g_seen == 2);
        q.traverse(wrap(remove_each, &q));
        CHECK(!q.first() && !q.last() && g_live == 1);

        for (int i = 0; i < 1000; i++)
            q.insert_tail(New refcounted<dat>(i));
        CHECK(q.last()->d == 999 && g_live == 1001);
        q.delete_all();
        CHECK(!q.first() && !q.last() && g_live == 1);
        q.insert_head(New refcounted<dat>(5));
    }
    CHECK(g_live == 0);

    printf("compat rctailq: ok\n");
    return 0;
}
