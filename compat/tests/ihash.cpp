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

int main()
{
    ct_watchdog(60);
    test_basics();
    test_many();
    test_collisions();
    test_traverse();
    test_ihash2_shash();
    printf("compat ihash: ok\n");
    return 0;
}
