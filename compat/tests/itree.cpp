/* SPDX-License-Identifier: MIT */
/*
 * itree.cpp: the intrusive red-black tree of itree.h, as libasync programs use
 * it (a timer queue keyed on time, equal keys, search callbacks), and 200,000
 * random insertions and removals checked against std::multimap, with the
 * red-black invariants verified along the way.
 */
#include "async.h"
#include "itree.h"

#include <map>
#include <random>
#include <vector>

#include "ctest.h"

static int g_deleted;

struct item {
    int key;
    int id;
    itree_entry<item> link;
    item(int k, int i) : key(k), id(i) {}
    ~item() { g_deleted++; }
    void bump() { id += 1000; }
};

typedef itree<int, item, &item::key, &item::link> tree_t;

/* Keys in order, and the ids of equal keys in insertion order. */
static std::vector<std::pair<int, int>> contents(const tree_t &t)
{
    std::vector<std::pair<int, int>> v;
    for (item *p = t.first(); p; p = t.next(p))
        v.push_back({p->key, p->id});
    return v;
}

static void test_basics()
{
    tree_t t;
    CHECK(!t.root() && !t.first() && !t.last() && !t[1] && t._check());
    item a(5, 1), b(3, 2), c(8, 3), d(5, 4), e(1, 5);
    for (item *p : {&a, &b, &c, &d, &e})
        t.insert(p);
    CHECK(t._check());
    std::vector<std::pair<int, int>> want = {{1, 5}, {3, 2}, {5, 1}, {5, 4}, {8, 3}};
    CHECK(contents(t) == want);
    CHECK(t.first() == &e && t.last() == &c && t.prev(&e) == nullptr && t.next(&c) == nullptr);
    CHECK(t.prev(&d) == &a && t.next(&a) == &d);
    CHECK(t[5] == &a && t[3] == &b && !t[4] && !t[9]); /* the first of equal keys */
    const tree_t &ct = t;
    CHECK(ct[8] == &c);

    /* lower_bound: the first key >= k; upper_bound: the last key <= k. */
    CHECK(t.lower_bound(4) == &a && t.lower_bound(5) == &a && t.lower_bound(9) == nullptr);
    CHECK(t.lower_bound(-7) == &e);
    CHECK(t.upper_bound(5) == &d && t.upper_bound(7) == &d && t.upper_bound(0) == nullptr);
    CHECK(t.upper_bound(100) == &c);

    /* The links, through the tree and through the entry. */
    item *r = t.root();
    CHECK(r && !t.up(r) && r->link.up() == nullptr);
    for (item *p = t.first(); p; p = t.next(p)) {
        if (item *l = t.left(p))
            CHECK(t.up(l) == p && p->link.left() == l);
        if (item *rr = t.right(p))
            CHECK(t.up(rr) == p && p->link.right() == rr);
    }

    t.remove(&a);
    CHECK(t._check() && t[5] == &d && contents(t).size() == 4);
    t.remove(&e);
    t.remove(&c);
    CHECK(t._check() && t.first() == &b && t.last() == &d);
    t.remove(&b);
    t.remove(&d);
    CHECK(!t.root() && !t.first() && t._check());
    /* removed objects can go back in */
    t.insert(&a);
    CHECK(t.root() == &a && t[5] == &a);
    t.clear();
    CHECK(!t.root() && !t[5]);
}

/* sfslite's test_itree: 9999 inserted 25 times, all found from t[9999] on. */
static void test_equal_keys()
{
    tree_t t;
    std::vector<item *> v;
    for (int i = 0; i < 25; i++) {
        v.push_back(new item(9999, i));
        t.insert(v.back());
    }
    int n = 0;
    for (item *p = t[9999]; p; p = t.next(p))
        CHECK(p->id == n++);
    CHECK(n == 25 && t._check());
    /* removing the first of the equal keys makes the next one first */
    t.remove(v[0]);
    CHECK(t[9999] == v[1] && t._check());
    delete v[0];
    g_deleted = 0;
    t.deleteall();
    CHECK(g_deleted == 24 && !t.root());
}

static int by_key(const int *k, const char *, const item *p)
{
    return *k < p->key ? -1 : *k > p->key;
}
static int cb_key(int k, const item *p)
{
    return k < p->key ? -1 : k > p->key;
}
static void collect(std::vector<int> *out, tree_t *t, item *p)
{
    out->push_back(p->key);
    if (p->key % 2)
        t->remove(p); /* traverse allows removing the object it gives */
}

static void test_search_and_traverse()
{
    tree_t t;
    std::vector<item> items;
    items.reserve(100);
    for (int i = 0; i < 100; i++)
        items.emplace_back(i / 2, i); /* each key twice */
    for (item &it : items)
        t.insert(&it);
    int k = 17;
    CHECK(t.search(by_key, &k, (const char *)nullptr) == &items[34]);
    CHECK(t.search(wrap(cb_key, 17)) == &items[34]);
    CHECK(t.search(wrap(cb_key, 50)) == nullptr);
    k = 0;
    CHECK(t.lower_bound_impl(by_key, &k, (const char *)nullptr) == &items[0]);
    CHECK(t.upper_bound_impl(by_key, &k, (const char *)nullptr) == &items[1]);

    std::vector<int> seen;
    t.traverse(wrap(collect, &seen, &t));
    CHECK(seen.size() == 100 && t._check());
    for (int i = 0; i < 100; i++)
        CHECK(seen[i] == i / 2);
    int left = 0;
    for (item *p = t.first(); p; p = t.next(p)) {
        CHECK(p->key % 2 == 0);
        left++;
    }
    CHECK(left == 50);
    t.traverse(&item::bump);
    CHECK(items[0].id == 1000 && items[1].id == 1001 && items[2].id == 2); /* key 1: removed */

    /* postorder: children before their parent, each object once */
    int n = 0;
    for (item *p = t.min_postorder(t.root()); p; p = t.next_postorder(p)) {
        n++;
        p->id = -p->id - 1; /* mark as visited */
        if (t.left(p))
            CHECK(t.left(p)->id < 0);
        if (t.right(p))
            CHECK(t.right(p)->id < 0);
    }
    CHECK(n == 50);
    t.clear();
}

/* A comparator of one's own: descending order. */
struct desc {
    int operator()(int a, int b) const { return a > b ? -1 : a < b; }
};

static void test_own_order()
{
    itree<int, item, &item::key, &item::link, desc> t;
    item a(1, 0), b(2, 0), c(3, 0);
    t.insert(&a);
    t.insert(&c);
    t.insert(&b);
    CHECK(t.first() == &c && t.next(&c) == &b && t.next(&b) == &a);
    CHECK(t[2] == &b && t._check());

    /* itree_core: a comparator of whole objects, here (key, id). */
    struct by_pair {
        int operator()(const item &x, const item &y) const
        {
            if (x.key != y.key)
                return x.key < y.key ? -1 : 1;
            return x.id < y.id ? -1 : x.id > y.id;
        }
    };
    itree_core<item, &item::link, by_pair> core;
    item p(1, 9), q(1, 2), r(0, 5);
    core.insert(&p);
    core.insert(&q);
    core.insert(&r);
    CHECK(core.first() == &r && core.next(&r) == &q && core.next(&q) == &p && core._check());
}

static void test_random()
{
    std::mt19937 rng(27);
    tree_t t;
    std::multimap<int, int> ref; /* key -> id, equal keys in insertion order */
    std::vector<item *> live;
    int next_id = 0;
    for (int round = 0; round < 200000; round++) {
        unsigned op = rng() % 8;
        if (op < 4 || live.empty()) {
            item *p = new item((int)(rng() % 5000), next_id++);
            t.insert(p);
            ref.insert({p->key, p->id});
            live.push_back(p);
        } else if (op < 7) {
            size_t i = rng() % live.size();
            item *p = live[i];
            t.remove(p);
            auto range = ref.equal_range(p->key);
            bool found = false;
            for (auto it = range.first; it != range.second; ++it) {
                if (it->second == p->id) {
                    ref.erase(it);
                    found = true;
                    break;
                }
            }
            CHECK(found);
            delete p;
            live[i] = live.back();
            live.pop_back();
        } else {
            int k = (int)(rng() % 5100) - 50;
            item *f = t[k];
            auto lb = ref.lower_bound(k);
            if (lb != ref.end() && lb->first == k)
                CHECK(f && f->key == k && f->id == lb->second);
            else
                CHECK(!f);
            item *l = t.lower_bound(k);
            CHECK(lb == ref.end() ? !l : (l && l->id == lb->second));
            item *u = t.upper_bound(k);
            auto ub = ref.upper_bound(k);
            if (ub == ref.begin())
                CHECK(!u);
            else
                CHECK(u && u->id == std::prev(ub)->second);
        }
        if (round % 20000 == 0) {
            CHECK(t._check());
            auto it = ref.begin();
            for (item *p = t.first(); p; p = t.next(p), ++it)
                CHECK(it != ref.end() && p->key == it->first && p->id == it->second);
            CHECK(it == ref.end());
            /* and backwards */
            auto rit = ref.rbegin();
            for (item *p = t.last(); p; p = t.prev(p), ++rit)
                CHECK(rit != ref.rend() && p->id == rit->second);
        }
    }
    CHECK(t._check());
    /* depth stays logarithmic: at most 2 log2(n + 1) */
    int depth = 0;
    for (item *p : live) {
        int d = 0;
        for (item *q = p; q; q = t.up(q))
            d++;
        if (d > depth)
            depth = d;
    }
    int lg = 0;
    while ((1u << lg) < live.size() + 1)
        lg++;
    CHECK(depth <= 2 * lg);
    g_deleted = 0;
    size_t n = live.size();
    t.deleteall();
    CHECK((size_t)g_deleted == n && !t.root());
}

int main()
{
    ct_watchdog(60);
    test_basics();
    test_equal_keys();
    test_search_and_traverse();
    test_own_order();
    test_random();
    printf("compat itree: ok\n");
    return 0;
}
