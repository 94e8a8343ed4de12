/* SPDX-License-Identifier: MIT */
/*
 * vatmpl.cpp: vatmpl.h's VA_TEMPLATE, as libasync used it (a forwarding
 * constructor, COMMA in a body) with 0 to 15 arguments, and LPAREN/RPAREN.
 */
#include "vatmpl.h"

#include "ctest.h"

#include <string>

static std::string g_out;

static void put_all() {}
template <class A, class... R> static void put_all(const A &a, const R &...r)
{
    g_out += std::to_string(a);
    g_out += ",";
    put_all(r...);
}

/* A function family: log(), log(a1), log(a1, a2)... */
VA_TEMPLATE(static void log, { g_out += "["; put_all, ; g_out += "]"; })

struct base {
    int n;
    base() : n(0) {}
    base(int a) : n(a) {}
    base(int a, int b) : n(a * 10 + b) {}
    base(int a, int b, int c) : n(a * 100 + b * 10 + c) {}
};

/* A forwarding constructor, as libasync's refcounted<T> had. */
struct wrapper : base {
    VA_TEMPLATE(explicit wrapper, : base, {})
};

template <class A, class B> struct pair_of {
    A a;
    B b;
};
struct holder {
    int sum = 0;
    VA_TEMPLATE(void add, { pair_of<int COMMA int> p = {0 COMMA 0}; (void)p; put_all, ; sum++; })
};

int main()
{
    ct_watchdog(60);
    log();
    log(1);
    log(1, 2);
    log(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    CHECK(g_out == "[][1,][1,2,][1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,]");

    CHECK(wrapper().n == 0 && wrapper(4).n == 4 && wrapper(4, 2).n == 42 &&
          wrapper(1, 2, 3).n == 123);

    g_out.clear();
    holder h;
    h.add();
    h.add(7, 8);
    CHECK(h.sum == 2 && g_out == "7,8,");
    int y = LPAREN 1 + 2 RPAREN * 2;
    CHECK(y == 6);
    printf("compat vatmpl: ok\n");
    return 0;
}
