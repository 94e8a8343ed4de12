/* SPDX-License-Identifier: MIT */
/*
 * bitvec.cpp: libasync's bitvec (bitvec.h): sizes and what new bits hold,
 * single bits through every accessor, ranges within a word, across words
 * and on word boundaries against a std::vector<bool>, first_unset_bit,
 * copies and swap, and the '0'/'1' rendering into strbufs and warn.
 */
#include "async.h"
#include "bitvec.h"

#include <random>
#include <string>
#include <vector>

#include "ctest.h"

static bool same(const bitvec &b, const std::vector<bool> &v)
{
    if (b.size() != v.size())
        return false;
    for (size_t i = 0; i < v.size(); i++)
        if (b[(ptrdiff_t)i] != v[i] || b.at((ptrdiff_t)i) != v[i])
            return false;
    return true;
}

static void test_sizes()
{
    bitvec e;
    CHECK(e.size() == 0 && e.first_unset_bit() == -1);
    bitvec z(130);
    CHECK(z.size() == 130 && z.first_unset_bit() == 0);
    for (size_t i = 0; i < 130; i++)
        CHECK(!z[(ptrdiff_t)i]);
    z.osetsize(200); /* new bits 1, old ones kept */
    for (size_t i = 0; i < 200; i++)
        CHECK(z[(ptrdiff_t)i] == (i >= 130));
    z.setsize(70); /* shrinking, then growing: the dropped bits come back 0 */
    z.zsetsize(200);
    for (size_t i = 0; i < 200; i++)
        CHECK(!z[(ptrdiff_t)i]);
    z.osetsize(64);
    z.osetsize(128);
    for (size_t i = 0; i < 128; i++)
        CHECK(z[(ptrdiff_t)i] == (i >= 64));
    z.setsize(0);
    CHECK(z.size() == 0);
    z.setsize(10);
    CHECK(z.first_unset_bit() == 0);
}

static void test_bits()
{
    bitvec b(100);
    b[3] = true;
    b[64] = 1;
    (b.setbit)(99, true); /* <sys/param.h> has a setbit macro */
    CHECK(b[3] && b[64] && b[99] && !b[4] && !b[63]);
    b[64] ^= true;
    b[65] ^= true;
    b[3] ^= false;
    CHECK(!b[64] && b[65] && b[3]);
    b[3] = false;
    CHECK(!b.at(3));
    b[10] = b[65]; /* one bit to another */
    CHECK(b[10]);
    b[65] = false;
    CHECK(b[10]); /* a copy of the value, not an alias */
    bool v = b[99];
    CHECK(v);
    const bitvec &cb = b;
    CHECK(cb[99] && !cb[98]);
}

static void test_ranges_random()
{
    std::mt19937 rng(11);
    bitvec b;
    std::vector<bool> ref;
    for (int round = 0; round < 20000; round++) {
        unsigned op = rng() % 10;
        size_t n = ref.size();
        if (op == 0) {
            size_t ns = rng() % 300;
            bool one = rng() % 2;
            if (one)
                b.osetsize(ns);
            else
                b.zsetsize(ns);
            ref.resize(ns, one);
        } else if (op < 6 && n) {
            size_t e = rng() % (n + 1), s = rng() % (e + 1);
            if (rng() % 3 == 0) { /* word edges */
                s = s / 64 * 64;
                e = e / 64 * 64;
            }
            bool val = rng() % 2;
            b.setrange(s, e, val);
            for (size_t i = s; i < e; i++)
                ref[i] = val;
        } else if (op < 9 && n) {
            size_t i = rng() % n;
            bool val = rng() % 2;
            b[(ptrdiff_t)i] = val;
            ref[i] = val;
        } else {
            int f = b.first_unset_bit();
            int want = -1;
            for (size_t i = 0; i < n; i++)
                if (!ref[i]) {
                    want = (int)i;
                    break;
                }
            CHECK(f == want);
        }
        if (round % 500 == 0)
            CHECK(same(b, ref));
    }
    CHECK(same(b, ref));
    /* all set: no unset bit, also when the size ends mid-word */
    b.osetsize(0);
    b.osetsize(100);
    CHECK(b.first_unset_bit() == -1);
    b[77] = false;
    CHECK(b.first_unset_bit() == 77);
}

static void test_copies_and_output()
{
    bitvec a(5);
    a[1] = true;
    a[4] = true;
    bitvec b(a);
    CHECK(b.size() == 5 && b[1] && b[4] && !b[0]);
    b[0] = true;
    CHECK(!a[0]); /* a copy */
    str s = strbuf() << a << "|" << b;
    CHECK(s == "01001|11001");
    swap(a, b);
    CHECK(a[0] && !b[0]);
    bitvec c;
    c = a;
    c.osetsize(8);
    str t = strbuf() << c;
    CHECK(t == "11001111");
    bitvec d(std::move(c));
    CHECK(d.size() == 8 && c.size() == 0);

    /* warn << a bitvec, as sfslite's test_bitvec prints with panic */
    std::string err;
    int st = ct_fork(
        [] {
            bitvec x(4);
            x[2] = true;
            warnx << "bits " << x << "\n";
        },
        &err);
    CHECK(ct_exited(st, 0) && err == "bits 0010\n");
}

int main()
{
    ct_watchdog(60);
    test_sizes();
    test_bits();
    test_ranges_random();
    test_copies_and_output();
    printf("compat bitvec: ok\n");
    return 0;
}
