/* SPDX-License-Identifier: MIT */
/*
 * rclist.cpp: rclist.h's list of counted objects: the list keeps each
 * object alive until removed, next/first walk it, traverse may remove, and
 * delete_all and the destructor drop every reference.
 */
#include "async.h"
#include "rclist.h"

#include <vector>

#include "ctest.h"

static int g_live;
struct dat {
    int d;
    rclist_entry_t<dat> lnk;
    explicit dat(int x) : d(x) { g_live++; }
    ~dat() { g_live--; }
};
typedef rclist_t<dat, &dat::lnk> dlist;

static std::vector<int> contents(dlist &l)
{
    std::vector<int> out;
    for (ptr<dat> p = l.first(); p; p = dlist::next(p))
        out.push_back(p->d);
    return out;
}

static int g_sum;
static void add(ptr<dat> p)
{
    g_sum += p->d;
}
static void remove_odd(dlist *l, ptr<dat> p)
{
    if (p->d & 1)
        l->remove(p);
}

int main()
{
    ct_watchdog(60);
    {
        dlist l;
        CHECK(!l.first());
        for (int i = 0; i < 5; i++)
            l.insert_head(New refcounted<dat>(i)); /* only the list holds them */
        CHECK(g_live == 5);
        CHECK(contents(l) == (std::vector<int>{4, 3, 2, 1, 0}));

        ptr<dat> two = dlist::next(dlist::next(l.first()));
        CHECK(two->d == 2);
        l.remove(two); /* middle */
        CHECK(contents(l) == (std::vector<int>{4, 3, 1, 0}) && g_live == 5);
        CHECK(!dlist::next(two)); /* out of the list */
        two = nullptr;
        CHECK(g_live == 4);
        l.remove(l.first()); /* head, by the list's own reference */
        CHECK(contents(l) == (std::vector<int>{3, 1, 0}) && g_live == 3);

        g_sum = 0;
        l.traverse(wrap(add));
        CHECK(g_sum == 4);
        l.traverse(wrap(remove_odd, &l));
        CHECK(contents(l) == (std::vector<int>{0}) && g_live == 1);

        /* Out of one list, into another (or the same one again). */
        ptr<dat> z = l.first();
        l.remove(z);
        dlist other;
        other.insert_head(z);
        l.insert_head(New refcounted<dat>(9));
        CHECK(contents(other) == (std::vector<int>{0}) && contents(l) == (std::vector<int>{9}));
        z = nullptr;
        other.delete_all();
        CHECK(!other.first() && g_live == 1);
        l.insert_head(New refcounted<dat>(8));
    }
    CHECK(g_live == 0); /* the destroyed list dropped its references */

    printf("compat rclist: ok\n");
    return 0;
}
