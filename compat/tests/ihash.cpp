/* SPDX-License-Identifier: MIT */
/*
 * ihash.cpp: the intrusive tables of ihash.h (ihash, ihash2, shash,
 * ihash_iterator_t), as a libasync program uses them: objects that carry
 * their own link and key.
 */
#include "async.h"
#include "ihash.h"

#include <map>
#include <set>
#include <vector>

#include "ctest.h"

static int g_deleted;

struct user {
    str name;
    int id;
    ihash_entry<user> hlink;
    ihash_entry<user> idlink; /* in a second table at the same time */
    user(const char *n, int i) : name(n), id(i) {}
    ~user() { g_deleted++; }
};

typedef ihash<str, user, &user::name, &user::hlink> by_name_t;
typedef ihash<int, user, &user::id, &user::idlink> by_id_t;

static void test_basics()
{
    by_name_t names;
    by_id_t ids;
    CHECK(names.size() == 0 && !names["x"] && !names.first());
    user a("alice", 1), b("bob", 2), c("carol", 3);
    CHECK(names.insert(&a) && names.insert(&b) && names.insert(&c));
    ids.insert(&a);
    ids.insert(&b);
    ids.insert(&c);
    CHECK(names.size() == 3 && ids.size() == 3);
    CHECK(names["bob"] == &b && names[str("alice")] == &a && !names["dave"]);
    CHECK(ids[3] == &c && !ids[4]);

    names.remove(&b);
    CHECK(names.size() == 2 && !names["bob"] && names["carol"] == &c);
    CHECK(ids[2] == &b); /* still in the other table */
    names.insert(&b);
    CHECK(names["bob"] == &b);

    /* Equal keys: insert keeps both, nextkeq walks them. */
    user a2("alice", 4), a3("alice", 5);
    names.insert(&a2);
    names.insert(&a3);
    std::set<user *> alices;
    for (user *u = names["alice"]; u; u = names.nextkeq(u))
        CHECK(alices.insert(u).second);
    CHECK(alices == (std::set<user *>{&a, &a2, &a3}));
    names.remove(&a);
    alices.clear();
    for (user *u = names["alice"]; u; u = names.nextkeq(u))
        alices.insert(u);
    CHECK(alices == (std::set<user *>{&a2, &a3}));

    names.clear(); /* forgets, deletes nothing */
    CHECK(names.size() == 0 && !names["bob"] && !names.first());
    ids.clear();
    CHECK(g_deleted == 0);
}

static void test_many()
{
    by_id_t ids;
    std::vector<user *> all;
    for (int i = 0; i < 50000; i++) {
        all.push_back(new user("u", i * 13));
        ids.insert(all.back());
    }
    CHECK(ids.size() == 50000 && ids.buckets() >= 50000);
    for (int i = 0; i < 50000; i += 2)
        ids.remove(all[i]);
    CHECK(ids.size() == 25000);
    for (int i = 0; i < 50000; i++) {
        user *u = ids[i * 13];
        CHECK(i % 2 ? u == all[i] : u == NULL);
        CHECK(!ids[i * 13 + 1]);
    }

    /* first()/next() and the iterator give each object once. */
    std::set<user *> seen;
    for (user *u = ids.first(); u; u = ids.next(u))
        CHECK(seen.insert(u).second && u->id % 26 == 13);
    CHECK(seen.size() == 25000);
    seen.clear();
    ihash_iterator_t<user, by_id_t> it(ids);
    while (user *u = it.next()) {
        CHECK(seen.insert(u).second);
        ids.remove(u); /* removing the object just returned is allowed */
    }
    CHECK(seen.size() == 25000 && ids.size() == 0 && !ids.first());
    for (int i = 0; i < 50000; i++)
        CHECK(!ids[i * 13]);

    /* Removal in an order of its own (a stride through the objects), with
     * lookups after each batch: chains stay linked whatever goes first. */
    for (int i = 0; i < 50000; i++)
        ids.insert(all[i]);
    size_t left = 50000;
    for (int round = 0; round < 5; round++) {
        for (int i = round; i < 50000; i += 5) {
            int j = (int)(((long)i * 7919) % 50000);
            ids.remove(all[j]);
            left--;
        }
        CHECK(ids.size() == left);
        size_t walked = 0;
        for (user *u = ids.first(); u; u = ids.next(u))
            walked++;
        CHECK(walked == left);
        for (int i = 0; i <= round; i++)
            for (int k = i; k < 50000; k += 5)
                CHECK(!ids[all[(int)(((long)k * 7919) % 50000)]->id]);
    }
    CHECK(!ids.first());

    for (int i = 0; i < 50000; i++)
        ids.insert(all[i]);
    g_deleted = 0;
    ids.deleteall();
    CHECK(g_deleted == 50000 && ids.size() == 0);
}

/* A poor hash (8 values): long chains, so removal and lookup run through
 * the middle of chains, not only single-object buckets. */
struct poor_hash {
    hash_t operator()(int k) const { return (u_int)(k % 8); }
};

static void test_collisions()
{
    ihash<int, user, &user::id, &user::idlink, poor_hash> t;
    std::vector<user *> all;
    for (int i = 0; i < 2000; i++) {
        all.push_back(new user("c", i));
        t.insert(all.back());
    }
    for (int i = 0; i < 2000; i++)
        CHECK(t[i] == all[i]);
    std::set<int> present;
    for (int i = 0; i < 2000; i++)
        present.insert(i);
    for (int n = 0; n < 2000; n++) {
        int j = (int)(((long)n * 1237) % 2000); /* a permutation */
        t.remove(all[j]);
        present.erase(j);
        if (n % 97 == 0 || n > 1990) {
            size_t walked = 0;
            for (user *u = t.first(); u; u = t.next(u)) {
                CHECK(present.count(u->id));
                walked++;
            }
            CHECK(walked == present.size() && t.size() == present.size());
            for (int k = 0; k < 2000; k++)
                CHECK((t[k] != NULL) == (present.count(k) == 1));
        }
    }
    CHECK(!t.first());
    for (user *u : all)
        delete u;
}

static int g_visits;
static void count_visit(user *u)
{
    (void)u;
    g_visits++;
}
static void remove_visit(by_name_t *t, user *u)
{
    t->remove(u);
    g_visits++;
}
static int g_const_sum;
static void const_visit(const user &u)
{
    g_const_sum += u.id;
}

struct pinged {
    int key;
    int pings = 0;
    ihash_entry<pinged> link;
    explicit pinged(int k) : key(k) {}
    void ping() { pings++; }
};

static void test_traverse()
{
    by_name_t t;
    std::vector<user *> us;
    for (int i = 0; i < 100; i++) {
        us.push_back(new user(str(strbuf() << "n" << i).cstr(), i));
        t.insert(us.back());
    }
    g_visits = 0;
    t.traverse(wrap(count_visit));
    CHECK(g_visits == 100);
    g_const_sum = 0;
    const by_name_t &ct = t;
    ct.traverse(wrap(const_visit));
    CHECK(g_const_sum == 99 * 100 / 2);
    g_visits = 0;
    t.traverse(wrap(remove_visit, &t));
    CHECK(g_visits == 100 && t.size() == 0);
    for (user *u : us)
        delete u;

    ihash<int, pinged, &pinged::key, &pinged::link> p;
    pinged x(1), y(2);
    p.insert(&x);
    p.insert(&y);
    p.traverse(&pinged::ping);
    CHECK(x.pings == 1 && y.pings == 1);
}

/* Two-key and whole-object tables. */
struct route {
    str host;
    int port;
    ihash_entry<route> link;
    route(const char *h, int p) : host(h), port(p) {}
};

struct word {
    str w;
    ihash_entry<word> link;
    explicit word(const char *s) : w(s) {}
    operator hash_t() const { return w; }
    bool operator==(const word &o) const { return w == o.w; }
};

static void test_ihash2_shash()
{
    ihash2<str, int, route, &route::host, &route::port, &route::link> r;
    route a("h", 80), b("h", 443), c("g", 80), a2("h", 80);
    r.insert(&a);
    r.insert(&b);
    r.insert(&c);
    CHECK(r("h", 80) == &a && r("h", 443) == &b && r("g", 80) == &c && !r("g", 443));
    r.insert(&a2);
    CHECK(r.nextkeq(r("h", 80)) != NULL);
    r.remove(&b);
    CHECK(!r("h", 443) && r.size() == 3);

    shash<word, &word::link> s;
    word w1("apple"), w2("pear");
    s.insert(&w1);
    s.insert(&w2);
    CHECK(s[word("apple")] == &w1 && s[word("pear")] == &w2 && !s[word("plum")]);
}

/* ---- libasync's bucket counts and order ------------------------------------------- */
/* The constants are what sfslite's libasync prints for the same code. */

struct item {
    u_int k;
    int a, b;
    str name;
    ihash_entry<item> link, link2;
    item(u_int kk, int aa, int bb, str n) : k(kk), a(aa), b(bb), name(n) {}
};
typedef ihash<u_int, item, &item::k, &item::link> items_t;
static std::string IS(const strbuf &b) { str s = b; return std::string(s.cstr(), s.len()); }
static std::string names_of(const items_t &t)
{
    strbuf b;
    for (item *i = t.first(); i; i = t.next(i))
        b << i->name << " ";
    b << "| " << (u_int)t.buckets();
    return IS(b);
}
/* orders after inserts, reserve(100), reserve(10), reserve(buckets), grow,
 * removals (by buckets), and an ihash2 over the same objects */
static void scen_ihash(std::string out[7])
{
    std::vector<item *> v;
    items_t t;
    for (u_int i = 0; i < 30; i++) {
        v.push_back(new item(i * 37 % 23, (int)i, (int)(i % 5), str(strbuf("o%u", i))));
        t.insert(v.back());
    }
    out[0] = names_of(t);
    t.reserve(100);
    out[1] = names_of(t);
    t.reserve(10);
    out[2] = names_of(t);
    t.reserve(t.buckets());
    out[3] = names_of(t);
    t.grow();
    out[4] = names_of(t);
    for (size_t i = 0; i < v.size(); i += 4)
        t.remove(v[i]);
    strbuf b;
    for (size_t n = 0; n < t.buckets(); n++)
        for (item *i = t.first_in_bucket(n); i; i = t.next_in_bucket(i))
            b << i->name << " ";
    out[5] = IS(b);
    ihash2<int, int, item, &item::a, &item::b, &item::link2> t2;
    for (item *i : v)
        t2.insert(i);
    strbuf b2;
    for (item *i = t2.first(); i; i = t2.next(i))
        b2 << i->name << " ";
    out[6] = IS(b2);
    t.clear();
    for (item *i : v)
        delete i;
}

static void test_libasync_order()
{
    std::string o[7];
    scen_ihash(o);
    CHECK(o[0] == "o23 o0 o28 o5 o10 o15 o20 o25 o2 o7 o12 o17 o22 o27 o4 o9 o14 o19 o24 o1 o29 o6 o11 o16 o21 o26 o3 o8 o13 o18 | 31");
    CHECK(o[1] == "o0 o23 o5 o28 o10 o15 o20 o2 o25 o7 o12 o17 o22 o4 o27 o9 o14 o19 o1 o24 o6 o29 o11 o16 o21 o3 o26 o8 o13 o18 | 100");
    CHECK(o[2] == "o23 o0 o28 o5 o10 o15 o20 o25 o2 o7 o12 o17 o22 o27 o4 o9 o14 o19 o24 o1 o29 o6 o11 o16 o21 o26 o3 o8 o13 o18 | 251");
    CHECK(o[3] == "o0 o23 o5 o28 o10 o15 o20 o2 o25 o7 o12 o17 o22 o4 o27 o9 o14 o19 o1 o24 o6 o29 o11 o16 o21 o3 o26 o8 o13 o18 | 251");
    CHECK(o[4] == "o23 o0 o28 o5 o10 o15 o20 o25 o2 o7 o12 o17 o22 o27 o4 o9 o14 o19 o24 o1 o29 o6 o11 o16 o21 o26 o3 o8 o13 o18 | 509");
    CHECK(o[5] == "o23 o5 o10 o15 o25 o2 o7 o17 o22 o27 o9 o14 o19 o1 o29 o6 o11 o21 o26 o3 o13 o18 ");
    CHECK(o[6] == "o28 o4 o3 o2 o0 o1 o5 o7 o6 o14 o10 o11 o8 o9 o13 o12 o15 o18 o16 o17 o23 o22 o21 o20 o19 o29 o27 o25 o26 o24 ");
}

int main()
{
    ct_watchdog(60);
    test_basics();
    test_many();
    test_collisions();
    test_traverse();
    test_ihash2_shash();
    test_libasync_order();
    printf("compat ihash: ok\n");
    return 0;
}
