/* SPDX-License-Identifier: MIT */
/*
 * rctree.cpp: the tree of counted objects of rctree.h: the tree keeps each
 * object alive while it holds it and lets it go on remove, clear and
 * destruction; lookups, the tree's shape, postorder, search; misuse panics.
 */
#include "async.h"
#include "rctree.h"

#include <map>
#include <random>
#include <vector>

#include "ctest.h"

static int g_alive;

struct dat {
    int d;
    rctree_entry_t<dat> lnk;
    explicit dat(int v) : d(v) { g_alive++; }
    ~dat() { g_alive--; }
    static ptr<dat> alloc(int v) { return New refcounted<dat>(v); }
};

typedef rctree_t<int, dat, &dat::lnk> tree_t;

/* sfslite's test_rctree, checked. */
static void test_lookup()
{
    {
        tree_t tree;
        int vals[] = {1, 1, 2, 3, 4, 5, 10, 12, 20, 120, 200, 300, 12, 12, 12};
        for (int v : vals)
            tree.insert(v, dat::alloc(v)); /* the tree holds the only reference */
        CHECK(g_alive == 15);
        for (int v : vals)
            CHECK(tree[v] && tree[v]->d == v);
        CHECK(!tree[0] && !tree[11] && !tree[301]);
        const tree_t &ct = tree;
        ptr<const dat> c = ct[120];
        CHECK(c && c->d == 120);
        int n = 0, last = -1;
        for (ptr<dat> p = tree.first(); p; p = tree_t::next(p)) {
            CHECK(p->d >= last);
            last = p->d;
            n++;
        }
        CHECK(n == 15);
    }
    CHECK(g_alive == 0); /* the destructor let every object go */
}

static void test_remove_and_clear()
{
    tree_t tree;
    ptr<dat> a = dat::alloc(1), b = dat::alloc(2), c = dat::alloc(2);
    tree.insert(1, a);
    tree.insert(2, b);
    tree.insert(2, c);
    CHECK(tree[2] == b); /* the first of equal keys */
    tree.remove(b);
    CHECK(tree[2] == c && g_alive == 3);
    b = nullptr;
    CHECK(g_alive == 2); /* the tree no longer held it */
    tree.insert(5, b = dat::alloc(5)); /* the key is the tree's, not d */
    tree.insert(7, dat::alloc(70));
    CHECK(tree[7]->d == 70 && tree[5] == b);

    /* root, up, left, right mirror the tree's shape */
    ptr<dat> r = tree.root();
    CHECK(r && !tree_t::up(r));
    int n = 0;
    for (ptr<dat> p = tree.first(); p; p = tree_t::next(p)) {
        if (ptr<dat> l = tree_t::left(p))
            CHECK(tree_t::up(l) == p);
        if (ptr<dat> rr = tree_t::right(p))
            CHECK(tree_t::up(rr) == p);
        ptr<const dat> cp = p;
        CHECK(tree_t::up(cp) == tree_t::up(p));
        n++;
    }
    CHECK(n == 4);
    /* postorder visits each object once, children first */
    n = 0;
    std::vector<dat *> seen;
    for (ptr<dat> p = tree_t::min_postorder(tree.root()); p; p = tree_t::next_postorder(p)) {
        for (dat *s : seen)
            CHECK(s != p.operator->());
        if (ptr<dat> l = tree_t::left(p))
            CHECK(std::find(seen.begin(), seen.end(), l.operator->()) != seen.end());
        seen.push_back(p);
        n++;
    }
    CHECK(n == 4 && seen.back() == r.operator->());

    tree.clear();
    CHECK(!tree.root() && !tree[1] && g_alive == 3); /* a, c, b still held here */
    /* an object can be inserted again once out */
    tree.insert(9, a);
    CHECK(tree[9] == a);
    tree.remove(a);
    a = c = b = r = nullptr;
    CHECK(g_alive == 0);
}

static int seek(int want, ptr<dat> p)
{
    return want < p->d ? -1 : want > p->d;
}

static void test_search_random()
{
    std::mt19937 rng(5);
    tree_t tree;
    std::multimap<int, ptr<dat>> ref;
    for (int i = 0; i < 20000; i++) {
        if (rng() % 3 || ref.empty()) {
            int k = (int)(rng() % 1000);
            ptr<dat> p = dat::alloc(k);
            tree.insert(k, p);
            ref.insert({k, p});
        } else {
            auto it = ref.lower_bound((int)(rng() % 1000));
            if (it == ref.end())
                it = ref.begin();
            tree.remove(it->second);
            ref.erase(it);
        }
    }
    CHECK((size_t)g_alive == ref.size());
    for (int k = 0; k < 1000; k++) {
        auto it = ref.find(k);
        ptr<dat> f = tree.search(wrap(seek, k));
        CHECK(it == ref.end() ? !f : (f && f->d == k));
        CHECK(tree[k] == f);
    }
    auto it = ref.begin();
    for (ptr<dat> p = tree.first(); p; p = tree_t::next(p), ++it)
        CHECK(it != ref.end() && p->d == it->first);
    CHECK(it == ref.end());
    ref.clear();
    tree.clear();
    CHECK(g_alive == 0);
}

static void test_misuse()
{
    std::string err;
    int st = ct_fork(
        [] {
            tree_t t1, t2;
            ptr<dat> p = dat::alloc(1);
            t1.insert(1, p);
            t2.insert(1, p); /* in a tree already */
        },
        &err);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    CHECK(ct_contains(err, "rctree: an object inserted twice"));
    st = ct_fork(
        [] {
            tree_t t;
            t.remove(dat::alloc(3)); /* in no tree */
        },
        &err);
    CHECK(WIFSIGNALED(st) && ct_contains(err, "rctree: an object removed that is in no tree"));
}

int main()
{
    ct_watchdog(60);
    test_lookup();
    test_remove_and_clear();
    test_search_random();
    test_misuse();
    printf("compat rctree: ok\n");
    return 0;
}
