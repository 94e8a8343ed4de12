/* SPDX-License-Identifier: MIT */
/*
 * list.cpp: the intrusive list and tailq of list.h, with their entry fields,
 * walked as libasync programs walk them.
 */
#include "async.h"
#include "list.h"

#include <vector>

#include "ctest.h"

struct item {
    int v;
    list_entry<item> llink;
    tailq_entry<item> qlink;
    explicit item(int x) : v(x) {}
};

typedef list<item, &item::llink> ilist;
typedef tailq<item, &item::qlink> iqueue;

template <class L> static std::vector<int> contents(const L &l)
{
    std::vector<int> out;
    for (item *p = l.first; p; p = L::next(p))
        out.push_back(p->v);
    return out;
}

/* The tail pointer agrees with the last element. */
static bool tail_ok(const iqueue &q)
{
    item *last = nullptr;
    for (item *p = q.first; p; p = iqueue::next(p))
        last = p;
    return last ? q.plast == &last->qlink.next : q.plast == &q.first;
}

static void test_list()
{
    ilist l;
    CHECK(!l.first);
    item a(1), b(2), c(3), d(4);
    l.insert_head(&a);
    l.insert_head(&b);
    l.insert_head(&c);
    CHECK(contents(l) == (std::vector<int>{3, 2, 1}));
    CHECK(ilist::remove(&b) == &b); /* middle */
    CHECK(contents(l) == (std::vector<int>{3, 1}));
    ilist::remove(&c); /* head */
    CHECK(contents(l) == (std::vector<int>{1}) && l.first == &a);
    l.insert_head(&d);
    ilist::remove(&a); /* tail */
    CHECK(contents(l) == (std::vector<int>{4}));
    ilist::remove(&d);
    CHECK(!l.first);

    ilist other;
    l.insert_head(&a);
    l.insert_head(&b);
    other.insert_head(&c);
    l.swap(other);
    CHECK(contents(l) == (std::vector<int>{3}) && contents(other) == (std::vector<int>{2, 1}));
    ilist::remove(&b); /* links point at the swapped heads */
    CHECK(other.first == &a);
    ilist::remove(&c);
    CHECK(!l.first);
}

static int g_sum;
static void add_item(item *p)
{
    g_sum += p->v;
}
static void remove_from_queue(iqueue *q, item *p)
{
    q->remove(p);
}
static void remove_from_list(item *p)
{
    ilist::remove(p);
}

static void test_tailq()
{
    iqueue q;
    CHECK(!q.first && tail_ok(q));
    item a(1), b(2), c(3), d(4), e(5);
    q.insert_tail(&a);
    q.insert_tail(&b);
    q.insert_head(&c);
    q.insert_tail(&d);
    CHECK(contents(q) == (std::vector<int>{3, 1, 2, 4}) && tail_ok(q));
    CHECK(q.remove(&d) == &d); /* the last: the tail moves back */
    CHECK(tail_ok(q));
    q.insert_tail(&e);
    CHECK(contents(q) == (std::vector<int>{3, 1, 2, 5}) && tail_ok(q));
    q.remove(&c); /* the first */
    q.remove(&b); /* a middle one */
    CHECK(contents(q) == (std::vector<int>{1, 5}) && tail_ok(q));
    q.remove(&a);
    q.remove(&e);
    CHECK(!q.first && tail_ok(q));
    q.insert_head(&b); /* insert_head into an empty queue sets the tail */
    q.insert_tail(&c);
    CHECK(contents(q) == (std::vector<int>{2, 3}) && tail_ok(q));
    q.remove(&b);
    q.remove(&c);

    /* Many elements: a FIFO through insert_tail and removing the first. */
    std::vector<item> pool;
    for (int i = 0; i < 10000; i++)
        pool.emplace_back(i);
    for (item &it : pool)
        q.insert_tail(&it);
    for (int i = 0; i < 10000; i++) {
        item *f = q.first;
        CHECK(f && f->v == i);
        q.remove(f);
        if (i < 5000)
            q.insert_tail(f); /* back of the line once */
        else
            CHECK(i % 1000 || tail_ok(q));
    }
    std::vector<int> left = contents(q);
    CHECK(left.size() == 5000 && left[0] == 0 && left[4999] == 4999 && tail_ok(q));

    g_sum = 0;
    q.traverse(wrap(add_item));
    CHECK(g_sum == 4999 * 5000 / 2);
    q.traverse(wrap(remove_from_queue, &q)); /* each may remove itself */
    CHECK(!q.first && tail_ok(q));

    ilist l;
    for (item &it : pool)
        l.insert_head(&it);
    g_sum = 0;
    l.traverse(wrap(add_item));
    CHECK(g_sum == 9999 * 10000 / 2);
    l.traverse(wrap(remove_from_list));
    CHECK(!l.first);
}

int main()
{
    ct_watchdog(60);
    test_list();
    test_tailq();
    printf("compat list: ok\n");
    return 0;
}
