/*
 * vec.cpp: vec<T> (vec.h), reached through async.h as in libasync. Elements
 * that count their constructions and destructions check that every element
 * is destroyed exactly once, whatever moves the storage.
 */
#include "async.h"

#include <memory>

#include "ctest.h"

static long g_live; /* tracked objects alive */

struct tracked {
    int v;
    tracked() : v(-1) { g_live++; }
    explicit tracked(int x) : v(x) { g_live++; }
    tracked(const tracked &o) : v(o.v) { g_live++; }
    tracked(tracked &&o) noexcept : v(o.v)
    {
        o.v = -2;
        g_live++;
    }
    tracked &operator=(const tracked &o)
    {
        v = o.v;
        return *this;
    }
    ~tracked() { g_live--; }
};

static void test_basics()
{
    vec<int> v;
    CHECK(v.empty() && v.size() == 0 && v.base() == v.lim());
    for (int i = 0; i < 10; i++)
        v.push_back(i);
    CHECK(v.size() == 10 && !v.empty());
    CHECK(v[0] == 0 && v[9] == 9 && v.front() == 0 && v.back() == 9);
    int sum = 0;
    for (const int *p = v.base(); p < v.lim(); p++)
        sum += *p;
    CHECK(sum == 45);
    sum = 0;
    for (int x : v)
        sum += x;
    CHECK(sum == 45);
    CHECK(v.pop_back() == 9 && v.pop_front() == 0 && v.size() == 8);
    CHECK(v.front() == 1 && v.back() == 8 && v[0] == 1);
    v.push_back() = 77; /* push_back() returns the new element */
    CHECK(v.back() == 77 && v.size() == 9);
    int &r = v.push_back(5);
    CHECK(&r == &v.back());
    v.popn_front(2);
    v.popn_back(2);
    CHECK(v.size() == 6 && v.front() == 3 && v.back() == 8);
    v.clear();
    CHECK(v.empty() && v.base() == v.lim());
    v.push_back(1);
    CHECK(v.size() == 1 && v[0] == 1);

    const vec<int> &cv = v;
    CHECK(cv[0] == 1 && cv.front() == 1 && cv.back() == 1 && cv.base() + 1 == cv.lim());
}

static void test_growth_and_queue()
{
    vec<int> v;
    for (int i = 0; i < 100000; i++)
        v.push_back(i);
    CHECK(v.size() == 100000);
    for (int i = 0; i < 100000; i++)
        CHECK(v[i] == i);
    /* pop_front on many elements, interleaved with pushes: FIFO order. */
    for (int i = 0; i < 50000; i++)
        CHECK(v.pop_front() == i);
    for (int i = 100000; i < 200000; i++)
        v.push_back(i);
    int expect = 50000, next = 200000;
    while (!v.empty()) {
        CHECK(v.pop_front() == expect++);
        if (expect % 3 == 0 && next < 1000000)
            v.push_back(next++);
    }
    CHECK(expect == next);

    /* A steady queue: a million rounds through a window of 100. */
    vec<int> q;
    int head = 0, tail = 0;
    for (int i = 0; i < 100; i++)
        q.push_back(tail++);
    for (int i = 0; i < 1000000; i++) {
        CHECK(q.pop_front() == head++);
        q.push_back(tail++);
        CHECK(q.size() == 100 && q.front() == head && q.back() == tail - 1);
    }
}

static void test_object_lifetimes()
{
    g_live = 0;
    {
        vec<tracked> v;
        for (int i = 0; i < 1000; i++)
            v.push_back(tracked(i));
        CHECK(g_live == 1000);
        tracked t = v.pop_front();
        CHECK(t.v == 0 && g_live == 1000); /* 999 in v, t */
        tracked b = v.pop_back();
        CHECK(b.v == 999 && g_live == 1000);
        for (int i = 0; i < 500; i++)
            v.pop_front();
        CHECK(g_live == 498 + 2);
        for (int i = 0; i < 2000; i++) /* slides or grows with 498 inside */
            v.emplace_back(i);
        CHECK(v.size() == 2498 && v[0].v == 501 && v[497].v == 998 && v[498].v == 0);
        CHECK(g_live == 2498 + 2);
        v.setsize(10);
        CHECK(v.size() == 10 && g_live == 12);
        v.setsize(20);
        CHECK(v.size() == 20 && v[19].v == -1 && g_live == 22);
        v.popn_front(5);
        v.popn_back(5);
        CHECK(v.size() == 10 && g_live == 12);
        vec<tracked> w(v);
        CHECK(w.size() == 10 && g_live == 22 && w[0].v == v[0].v);
        w = v;
        CHECK(g_live == 22);
        w += v;
        CHECK(w.size() == 20 && g_live == 32);
        w += w; /* appending to itself */
        CHECK(w.size() == 40 && g_live == 52 && w[39].v == v[9].v);
        w.clear();
        CHECK(g_live == 12);
    }
    CHECK(g_live == 0);

    /* push_back of one of its own elements while the storage moves. */
    vec<tracked> a;
    a.push_back(tracked(42));
    for (int i = 0; i < 200; i++)
        a.push_back(a[0]);
    CHECK(a.size() == 201);
    for (size_t i = 0; i < a.size(); i++)
        CHECK(a[i].v == 42);
    a.clear();
    CHECK(g_live == 0);
}

static void test_strings_and_moves()
{
    vec<str> v;
    str s("refcounted");
    for (int i = 0; i < 1000; i++)
        v.push_back(s);
    for (int i = 0; i < 1000; i++)
        CHECK(v[i].cstr() == s.cstr()); /* copies share the bytes */
    vec<str> w = v;
    v.clear();
    CHECK(w.size() == 1000 && w.back() == "refcounted");
    str last = w.pop_back();
    CHECK(last.cstr() == s.cstr());

    vec<std::unique_ptr<int>> u; /* move-only elements */
    for (int i = 0; i < 100; i++)
        u.push_back(std::unique_ptr<int>(new int(i)));
    std::unique_ptr<int> first = u.pop_front();
    CHECK(*first == 0 && *u.front() == 1 && u.size() == 99);
    vec<std::unique_ptr<int>> moved(std::move(u));
    CHECK(u.empty() && moved.size() == 99);
    u = std::move(moved);
    CHECK(moved.empty() && u.size() == 99 && *u.back() == 99);
}

static void test_misc()
{
    vec<int> v{1, 2, 3, 4, 5};
    v.reverse();
    CHECK(v[0] == 5 && v[4] == 1 && v[2] == 3);
    vec<int> even{1, 2};
    even.reverse();
    CHECK(even[0] == 2 && even[1] == 1);
    vec<int> none;
    none.reverse();
    CHECK(none.empty());

    vec<int> a{1}, b{2, 3};
    a.swap(b);
    CHECK(a.size() == 2 && b.size() == 1 && a[1] == 3 && b[0] == 1);
    swap(a, b);
    CHECK(a.size() == 1 && b.size() == 2);

    vec<int> r;
    r.reserve(100);
    int *base = r.base();
    for (int i = 0; i < 100; i++)
        r.push_back(i);
    CHECK(r.base() == base); /* reserve(n): n more without moving */

    /* libasync's vec<T, N>: N is accepted; converts to and from vec<T>. */
    vec<int, 4> small;
    for (int i = 0; i < 10; i++)
        small.push_back(i);
    vec<int> big(small);
    CHECK(big.size() == 10 && big[9] == 9);
    vec<int, 4> back;
    back = big;
    CHECK(back.size() == 10 && back[5] == 5);
    big += small;
    CHECK(big.size() == 20 && big[19] == 9);

    vec<int>::iterator it = big.begin();
    CHECK(*it == 0 && big.end() - big.begin() == 20);
}

int main()
{
    ct_watchdog(60);
    test_basics();
    test_growth_and_queue();
    test_object_lifetimes();
    test_strings_and_moves();
    test_misc();
    printf("compat vec: ok\n");
    return 0;
}
