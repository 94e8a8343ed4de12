/* SPDX-License-Identifier: MIT */
/*
 * mely_names.cpp: the original Mely's mely.h gave programs none of libasync's
 * strings and containers, so a Mely program may use their names for its own
 * types and functions. That this file compiles is the check; running it
 * checks the program's own definitions are the ones used. compat's crypt.h
 * (libasync's `rnd`) adds nothing after mely.h: the name is the C library's
 * header there, and `rnd`, `prng` stay the program's.
 */
#include "mely.h"

#include <crypt.h>

#include "ctest.h"

struct str {
    const char *p;
};
template <class T> struct vec {
    T first;
};
struct strbuf {
    int n;
};
static int min(int a, int b, int c)
{
    return a < b ? (a < c ? a : c) : (b < c ? b : c);
}
struct list {
    int items;
};
typedef int hash_t;
/* names that came with libasync's vec.h (array.h, msb.h) */
struct array {
    int n;
};
static int fls(int x)
{
    return x + 1;
}
static int rnd = 4;
struct prng {
    int seed;
};

int main()
{
    str s{"mine"};
    vec<int> v{7};
    strbuf sb{3};
    list l{2};
    hash_t h = 5;
    array a{4};
    CHECK(!strcmp(s.p, "mine") && v.first == 7 && sb.n == 3 && l.items == 2 && h == 5);
    CHECK(a.n == 4 && fls(1) == 2);
    CHECK(min(3, 1, 2) == 1);
    prng g{rnd};
    CHECK(g.seed == 4);
    printf("compat mely_names: ok\n");
    return 0;
}
