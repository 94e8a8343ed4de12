/* SPDX-License-Identifier: MIT */
/*
 * bbuddy.cpp: the buddy allocator of bbuddy.h. Every block handed out is
 * aligned on its size, inside the space and overlaps no other (a shadow map
 * of the space says so), space() counts what is free, freeing everything
 * merges the buddies back into whole blocks, the space grows, and misuse
 * panics. Random sizes come from arc4.h, as in sfslite's test_bbuddy.
 */
#include "async.h"
#include "arc4.h"
#include "bbuddy.h"

#include <vector>

#include "ctest.h"

static const off_t TOT = 0x100000, MIN = 0x800, MAX = 0x10000;

static size_t rounded(size_t n)
{
    size_t r = MIN;
    while (r < n)
        r *= 2;
    return r;
}

struct shadow {
    std::vector<int> owner; /* per MIN-sized piece: 0 free, else allocation id */
    explicit shadow(off_t size) : owner((size_t)(size / MIN), 0) {}
    void grow(off_t size) { owner.resize((size_t)(size / MIN), 0); }
    void take(off_t o, size_t len, int id)
    {
        for (size_t i = (size_t)(o / MIN); i < (size_t)((o + (off_t)len) / MIN); i++) {
            CHECK(i < owner.size() && owner[i] == 0);
            owner[i] = id;
        }
    }
    bool has_free(size_t len) const
    {
        size_t per = len / MIN;
        for (size_t b = 0; b + per <= owner.size(); b += per) {
            size_t i = b;
            while (i < b + per && owner[i] == 0)
                i++;
            if (i == b + per)
                return true;
        }
        return false;
    }
    void give(off_t o, size_t len, int id)
    {
        for (size_t i = (size_t)(o / MIN); i < (size_t)((o + (off_t)len) / MIN); i++) {
            CHECK(owner[i] == id);
            owner[i] = 0;
        }
    }
};

static void test_simple()
{
    bbuddy bb(TOT + 0x1234, MIN, MAX); /* rounded down to a multiple of MAX */
    CHECK(bb.gettotsize() == TOT && bb.space() == TOT && bb.maxalloc() == (size_t)MAX);
    bb._check();
    /* lowest offsets first, blocks of their rounded size */
    CHECK(bb.alloc(1) == 0 && bb.alloc(MIN) == MIN && bb.alloc(0) == 2 * MIN);
    CHECK(bb.space() == TOT - 3 * MIN);
    CHECK(bb.alloc(MIN + 1) == 4 * MIN); /* 2 * MIN, aligned on 2 * MIN */
    CHECK(bb.alloc(MAX + 1) == -1 && bb.space() == TOT - 5 * MIN);
    CHECK(bb.alloc(MAX) == MAX); /* the first whole MAX block is split */
    bb._check();
    bb.dealloc(MAX, MAX);
    bb.dealloc(4 * MIN, MIN + 1);
    bb.dealloc(0, 1);
    bb.dealloc(MIN, MIN);
    bb.dealloc(2 * MIN, 0);
    CHECK(bb.space() == TOT);
    bb._check();
    /* everything merged back: all the MAX blocks are there */
    for (off_t i = 0; i < TOT / MAX; i++)
        CHECK(bb.alloc(MAX) == i * MAX);
    CHECK(bb.alloc(1) == -1 && bb.space() == 0);
}

static void test_fill_and_merge()
{
    bbuddy bb(TOT, MIN, MAX);
    std::vector<off_t> got;
    off_t o;
    while ((o = bb.alloc(MIN)) >= 0)
        got.push_back(o);
    CHECK((off_t)got.size() == TOT / MIN && bb.space() == 0);
    bb._check();
    /* free every other block: no two free buddies, nothing larger than MIN */
    for (size_t i = 0; i < got.size(); i += 2)
        bb.dealloc(got[i], MIN);
    CHECK(bb.space() == TOT / 2 && bb.alloc(2 * MIN) == -1);
    bb._check();
    for (size_t i = 1; i < got.size(); i += 2)
        bb.dealloc(got[i], MIN);
    CHECK(bb.space() == TOT);
    bb._check();
    CHECK(bb.alloc(MAX) == 0);
}

static void test_random()
{
    bbuddy bb(TOT, MIN, MAX);
    shadow sh(TOT);
    arc4 as;
    char key[] = "will you be my binary buddy?";
    as.setkey(key, sizeof(key));
    struct a {
        off_t o;
        size_t len;
        int id;
    };
    std::vector<a> live;
    off_t used = 0, total = TOT;
    int ids = 0, failures = 0;
    for (int round = 0; round < 20000; round++) {
        unsigned op = as.getbyte() % 8;
        if (op < 4 || live.empty()) {
            size_t len = (size_t)((as.getbyte() << 8 | as.getbyte()) % (MAX + 1));
            off_t o = bb.alloc(len);
            if (o < 0) {
                /* only when no aligned block of that size is all free */
                CHECK(!sh.has_free(rounded(len)));
                failures++;
                continue;
            }
            size_t r = rounded(len);
            CHECK(o % (off_t)r == 0 && o + (off_t)r <= total);
            sh.take(o, r, ++ids);
            live.push_back({o, len, ids});
            used += (off_t)r;
        } else if (op < 7) {
            size_t i = as.getbyte() % live.size();
            bb.dealloc(live[i].o, live[i].len);
            sh.give(live[i].o, rounded(live[i].len), live[i].id);
            used -= (off_t)rounded(live[i].len);
            live[i] = live.back();
            live.pop_back();
        } else if (round % 64 == 0 && total < 4 * TOT) {
            bb.settotsize(total + MAX + MIN); /* grows by MAX */
            total += MAX;
            sh.grow(total);
            CHECK(bb.gettotsize() == total);
        }
        CHECK(bb.space() == total - used);
        if (round % 100 == 0)
            bb._check();
    }
    CHECK(failures > 0 && ids > 1000); /* the space did fill up at times */
    for (a &x : live)
        bb.dealloc(x.o, x.len);
    CHECK(bb.space() == total);
    bb._check();
    for (off_t i = 0; i < total / MAX; i++)
        CHECK(bb.alloc(MAX) == i * MAX);
}

static void expect_panic(void (*fn)(), const char *what)
{
    std::string err;
    int st = ct_fork(fn, &err);
    if (!WIFSIGNALED(st) || !ct_contains(err, what))
        fprintf(stderr, "expected a panic with \"%s\"; status %#x, stderr: %s\n", what, st,
                err.c_str());
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    CHECK(ct_contains(err, what));
}

static void test_misuse()
{
    expect_panic(
        [] {
            bbuddy bb(TOT, MIN, MAX);
            off_t o = bb.alloc(MIN);
            bb.dealloc(o, MIN);
            bb.dealloc(o, MIN);
        },
        "are free already");
    expect_panic(
        [] {
            bbuddy bb(TOT, MIN, MAX);
            bb.alloc(MAX);
            bb.dealloc(MAX + MIN, MIN); /* inside the free block after it */
        },
        "are free already");
    expect_panic(
        [] {
            bbuddy bb(TOT, MIN, MAX);
            bb.alloc(4 * MIN);
            bb.dealloc(MIN, 4 * MIN); /* misaligned */
        },
        "invalid offset");
    expect_panic(
        [] {
            bbuddy bb(TOT, MIN, MAX);
            bb.dealloc(0, MAX + 1);
        },
        "invalid len");
    expect_panic(
        [] {
            bbuddy bb(TOT, MIN, MAX);
            bb.settotsize(TOT - MAX);
        },
        "cannot shrink");
}

int main()
{
    ct_watchdog(60);
    test_simple();
    test_fill_and_merge();
    test_random();
    test_misuse();
    printf("compat bbuddy: ok\n");
    return 0;
}
