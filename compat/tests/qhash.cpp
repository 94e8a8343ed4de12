/* SPDX-License-Identifier: MIT */
/*
 * qhash.cpp: qhash<K, V> and bhash<K> (qhash.h), included as libasync
 * programs include them: async.h, then qhash.h.
 */
#include "async.h"
#include "qhash.h"

#include <cctype>
#include <map>
#include <set>
#include <string>

#include <strings.h>

#include "ctest.h"

static void test_str_keys()
{
    qhash<str, int> q;
    CHECK(q.size() == 0 && !q["absent"]);
    q.insert("one", 1);
    q.insert(str("two"), 2);
    q.insert(str("a\0b", 3), 3); /* embedded NUL: a key of its own */
    q.insert(str("a"), 4);
    CHECK(q.size() == 4);
    int *p = q["one"];
    CHECK(p && *p == 1);
    *p = 11; /* q[k] points at the stored value */
    CHECK(*q["one"] == 11);
    CHECK(*q[str("a\0b", 3)] == 3 && *q["a"] == 4);
    q.insert("one", 111); /* replaces */
    CHECK(q.size() == 4 && *q["one"] == 111);
    q.insert("zero");
    CHECK(*q["zero"] == 0 && q.size() == 5);

    int out = -1;
    CHECK(q.lookup("two", &out) && out == 2);
    CHECK(!q.lookup("nine", &out) && out == 2);
    CHECK(q.remove("two", &out) && out == 2 && !q["two"] && q.size() == 4);
    CHECK(!q.remove("two", &out));
    q.remove("nothing");
    q.remove("zero");
    CHECK(q.size() == 3);

    const qhash<str, int> &cq = q;
    const int *cp = cq["a"];
    CHECK(cp && *cp == 4);

    qhash<str, str> names;
    names.insert("k", "v");
    str *v = names["k"];
    CHECK(v && *v == "v");
    qhash<str, int> empty_key;
    empty_key.insert("", 7);
    CHECK(*empty_key[""] == 7 && !empty_key[str()]);
}

static void test_many_int_keys()
{
    qhash<int, int> q;
    std::map<int, int> model;
    for (int i = 0; i < 100000; i++) {
        q.insert(i * 7, i);
        model[i * 7] = i;
    }
    CHECK(q.size() == 100000);
    /* A value's address stays valid while the table grows. */
    int *stable = q[7 * 5];
    for (int i = 100000; i < 150000; i++) {
        q.insert(i * 7, i);
        model[i * 7] = i;
    }
    CHECK(q[7 * 5] == stable && *stable == 5);
    for (int i = 0; i < 150000; i += 2) {
        q.remove(i * 7);
        model.erase(i * 7);
    }
    CHECK(q.size() == model.size());
    for (int i = 0; i < 150000; i++) {
        int *p = q[i * 7];
        if (i % 2)
            CHECK(p && *p == i);
        else
            CHECK(!p);
        CHECK(!q[i * 7 + 1]);
    }
    /* Negative keys and re-insertion after removal. */
    q.insert(-5, 55);
    q.insert(0, 1);
    CHECK(*q[-5] == 55 && *q[0] == 1);

    /* Every pair once, by each way of iterating. */
    model[-5] = 55;
    model[0] = 1;
    std::map<int, int> seen;
    qhash_iterator_t<int, int> it(q);
    int val;
    while (const int *k = it.next(&val)) {
        CHECK(!seen.count(*k));
        seen[*k] = val;
    }
    CHECK(seen == model);
    it.reset();
    CHECK(it.next() != NULL);

    size_t n = 0;
    for (const int &k : q) {
        CHECK(model.count(k));
        n++;
    }
    CHECK(n == model.size());
    n = 0;
    for (qhash_slot<int, int> *s = q.first(); s; s = q.next(s)) {
        CHECK(model[s->key] == s->value);
        n++;
    }
    CHECK(n == model.size());

    const qhash<int, int> &cq = q;
    qhash_const_iterator_t<int, int> cit(cq);
    n = 0;
    while (cit.next())
        n++;
    CHECK(n == model.size());

    q.clear();
    CHECK(q.size() == 0 && !q[7] && !q.first());
    q.insert(1, 2);
    CHECK(*q[1] == 2);
}

static std::map<std::string, int> g_traversed;
static void visit(const str &k, int *v)
{
    g_traversed[k.cstr()] = *v;
}
static void visit_and_remove(qhash<str, int> *q, const str &k, int *v)
{
    (void)v;
    q->remove(k); /* the pair being visited may go */
}

static void test_traverse_and_copy()
{
    qhash<str, int> q;
    for (int i = 0; i < 100; i++)
        q.insert(strbuf() << "k" << i, i);
    q.traverse(wrap(visit));
    CHECK(g_traversed.size() == 100 && g_traversed["k42"] == 42);

    qhash<str, int> copy(q);
    q.insert("k1", 1000);
    CHECK(*copy["k1"] == 1 && copy.size() == 100);
    qhash<str, int> assigned;
    assigned.insert("old", 0);
    assigned = copy;
    CHECK(assigned.size() == 100 && !assigned["old"] && *assigned["k99"] == 99);
    assigned = assigned;
    CHECK(assigned.size() == 100);

    q.traverse(wrap(visit_and_remove, &q));
    CHECK(q.size() == 0);
}

/* Values that are refs: q[k] is a ptr, NULL when absent. */
static int g_finalized;
struct obj : public virtual refcount {
    int id;
    explicit obj(int i) : id(i) {}
    void finalize() override
    {
        g_finalized++;
        delete this;
    }
};

static void test_ref_values()
{
    g_finalized = 0;
    {
        qhash<int, ref<obj>> q;
        for (int i = 0; i < 10; i++)
            q.insert(i, New refcounted<obj>(i));
        ptr<obj> p = q[3];
        CHECK(p && p->id == 3);
        ptr<obj> none = q[30];
        CHECK(!none);
        q.remove(3);
        CHECK(g_finalized == 0 && p->id == 3); /* p still holds it */
        p = NULL;
        CHECK(g_finalized == 1);
        q.insert(4, New refcounted<obj>(44)); /* replaces: the old one goes */
        CHECK(g_finalized == 2 && q[4]->id == 44);
    }
    CHECK(g_finalized == 11);
}

/* A key class of its own: operator hash_t and ==. */
struct pairkey {
    int a, b;
    operator hash_t() const { return hash_rotate((u_int)a, 16) ^ (u_int)b; }
    bool operator==(const pairkey &o) const { return a == o.a && b == o.b; }
};
/* ...or hash and equality given as arguments. */
struct nocase_hash {
    hash_t operator()(const str &s) const
    {
        u_int h = HASHSEED;
        for (size_t i = 0; i < s.len(); i++)
            h = (h ^ (u_int)tolower((unsigned char)s[i])) * 16777619u;
        return h;
    }
};
struct nocase_eq {
    bool operator()(const str &a, const str &b) const
    {
        return a.len() == b.len() && !strncasecmp(a.cstr(), b.cstr(), a.len());
    }
};

static void test_key_kinds()
{
    qhash<pairkey, int> pk;
    for (int a = 0; a < 50; a++)
        for (int b = 0; b < 50; b++)
            pk.insert(pairkey{a, b}, a * 100 + b);
    CHECK(pk.size() == 2500 && *pk[(pairkey{12, 34})] == 1234 && !pk[(pairkey{50, 0})]);

    qhash<str, int, nocase_hash, nocase_eq> nc;
    nc.insert("Content-Length", 1);
    CHECK(nc["content-length"] && *nc["CONTENT-LENGTH"] == 1);
    nc.insert("CONTENT-length", 2);
    CHECK(nc.size() == 1 && *nc["Content-Length"] == 2);

    /* C string keys hash and compare by contents. */
    qhash<const char *, int> cs;
    char k1[] = "key";
    char k2[] = "key";
    cs.insert(k1, 5);
    CHECK(cs[k2] && *cs[k2] == 5);
}

static std::set<int> g_bseen;
static void bvisit(const int &k)
{
    g_bseen.insert(k);
}

static void test_bhash()
{
    bhash<str> b;
    CHECK(!b["x"] && b.size() == 0);
    CHECK(b.insert("x"));
    CHECK(!b.insert("x"));
    CHECK(b["x"] && b.size() == 1);
    b.remove("x");
    CHECK(!b["x"] && b.size() == 0);
    b.remove("x");
    CHECK(b.insert(str()));
    CHECK(b[str()] && !b[""]);

    bhash<int> many;
    std::set<int> model;
    for (int i = 0; i < 60000; i++) {
        CHECK(many.insert(i * 3));
        model.insert(i * 3);
    }
    for (int i = 0; i < 60000; i += 3) {
        many.remove(i * 3);
        model.erase(i * 3);
    }
    CHECK(many.size() == model.size());
    for (int i = 0; i < 180000; i++)
        CHECK(many[i] == (model.count(i) == 1));

    std::set<int> seen;
    bhash_const_iterator_t<int> it(many);
    while (const int *k = it.next())
        CHECK(seen.insert(*k).second);
    CHECK(seen == model);
    size_t n = 0;
    for (const int &k : many) {
        CHECK(model.count(k));
        n++;
    }
    CHECK(n == model.size());
    many.traverse(wrap(bvisit));
    CHECK(g_bseen == model);

    bhash<int> copy(many);
    many.clear();
    CHECK(many.size() == 0 && copy.size() == model.size() && copy[3]);
    bhash<int> assigned;
    assigned = copy;
    CHECK(assigned.size() == copy.size());
}

/* ---- libasync's hash values and iteration order ---------------------------------- */
/* The constants are what sfslite's libasync computes and prints for the same
 * code: a program's output that depends on hash values or on the order of a
 * traversal is the same. */

static void test_hash_values()
{
    CHECK(HASHSEED == 5381);
    CHECK(hash_string("") == 5381u && hash_bytes("", 0) == 5381u);
    CHECK(hash_string("a") == 177604u && hash_string("ab") == 5860902u);
    CHECK(hash_string("hello") == 178056679u && hash_string("hello world") == 4173747013u);
    CHECK(hash_string("washington") == 2828858557u);
    CHECK(hash_string("\xff\xfe") == 5857380u); /* bytes taken as unsigned */
    const char *fox = "The quick brown fox jumps over the lazy dog";
    CHECK(hash_string(fox) == 3061430282u && hash_bytes(fox, (int)strlen(fox)) == 3061430282u);
    CHECK((u_int)hash_t(str(fox)) == 3061430282u);
    CHECK(hash_string("hello", 7) == 165914789u && hash_bytes("hello", 5, 0) == 120084546u);
    CHECK(hash_rotate(hash_string("hello"), 7) == 1316418437u);
    CHECK((u_int)hashfn<str>()(str("a\0b", 3)) == 193410726u);
    CHECK((u_int)hashfn<const char *>()("xyz") == 193434110u);
    hash2fn<int, str> h2;
    CHECK((u_int)h2(5, str("q")) == 177617u);
}

static std::string S(const strbuf &b) { str s = b; return std::string(s.cstr(), s.len()); }
template <class Q> static std::string keys_of(const Q &q)
{
    strbuf b;
    for (auto *s = q.first(); s; s = q.next(s))
        b << s->key << " ";
    return S(b);
}
static std::string scen_str_keys(std::string *after_changes, std::string *copied, std::string *bucketcounts)
{
    qhash<str, int> q;
    strbuf counts;
    size_t last = 0;
    for (int i = 0; i < 20; i++) {
        q.insert(strbuf("k%d", i), i);
        if (q.buckets() != last)
            counts << (u_int)(last = q.buckets()) << " ";
    }
    std::string first = keys_of(q);
    for (int i = 0; i < 20; i += 3)
        q.remove(strbuf("k%d", i));
    for (int i = 100; i < 110; i++)
        q.insert(strbuf("k%d", i), i);
    *after_changes = keys_of(q);
    qhash<str, int> c(q);
    *copied = keys_of(c);
    *bucketcounts = S(counts);
    return first;
}
static std::string scen_int_keys()
{
    qhash<int, int> q;
    for (int i = 0; i < 40; i++)
        q.insert(i * 7919 % 1000, i);
    return keys_of(q);
}
static std::string scen_bhash()
{
    bhash<str> b;
    const char *words[] = {"fish", "likes to", "complain about", "sfs. alot", "a", "b", "c", "d", "e"};
    for (const char *w : words)
        b.insert(w);
    strbuf out;
    for (const str &k : b)
        out << k << ",";
    return S(out);
}
static std::string scen_growth()
{
    qhash<u_int, u_int> big;
    strbuf seq;
    size_t last = 0;
    for (u_int i = 0; i < 70000; i++) {
        big.insert(i * 2654435761u, i);
        if (big.buckets() != last)
            seq << (u_int)(last = big.buckets()) << " ";
    }
    return S(seq);
}

static void test_libasync_order()
{
    std::string after, copied, counts;
    CHECK(scen_str_keys(&after, &copied, &counts) == "k8 k9 k19 k6 k18 k7 k17 k4 k16 k5 k15 k2 k14 k3 k13 k0 k12 k1 k11 k10 ");
    CHECK(after == "k8 k19 k109 k7 k108 k17 k4 k107 k16 k5 k106 k2 k105 k14 k104 k13 k103 k1 k102 k11 k101 k10 k100 ");
    /* a copy is made by traversing and inserting, as libasync's: its own order */
    CHECK(copied == "k8 k19 k109 k7 k108 k4 k17 k107 k5 k16 k106 k2 k14 k105 k13 k104 k1 k103 k11 k102 k10 k101 k100 ");
    CHECK(counts == "3 7 13 31 ");
    CHECK(scen_int_keys() ==
          "732 0 489 246 3 919 676 433 922 190 866 623 380 137 813 570 327 84 757 514 271 28 947 704 461 218 894 651 408 165 838 595 352 841 109 785 542 299 56 975 ");
    CHECK(scen_bhash() == "c,b,likes to,e,d,fish,complain about,sfs. alot,a,");
    CHECK(scen_growth() == "3 7 13 31 61 127 251 509 1021 2039 4093 8191 16381 32749 65521 131071 ");
}

int main()
{
    ct_watchdog(60);
    test_str_keys();
    test_many_int_keys();
    test_traverse_and_copy();
    test_ref_values();
    test_key_kinds();
    test_bhash();
    test_hash_values();
    test_libasync_order();
    printf("compat qhash: ok\n");
    return 0;
}
