/* SPDX-License-Identifier: MIT */
/*
 * union.cpp: union.h, as rpcc's symbol table and its generated unions use
 * it: members of a C++ union sharing their tag; select, destroy, copy by
 * init/assign, type(), void members, Xstompcast; every object constructed
 * is destroyed once; with TUNION_DEBUG, reaching a member that is not the
 * selected one aborts. Also builds against sfslite's own union.h.
 */
#define TUNION_DEBUG 1
#include "async.h"
#include "union.h"

#include "check.h"

static int g_live, g_made;

struct counted {
    int v;
    counted() : v(7)
    {
        g_live++;
        g_made++;
    }
    counted(const counted &o) : v(o.v)
    {
        g_live++;
        g_made++;
    }
    counted &operator=(const counted &o)
    {
        v = o.v;
        return *this;
    }
    ~counted() { g_live--; }
};

struct tagged {
    union {
        union_entry_base _base;
        union_entry<counted> c;
        union_entry<str> s;
        union_entry<int> i;
        union_entry<u_int32_t> u;
        union_entry<vec<int>> v;
        union_entry<void> none;
    };
    tagged() { _base.init(); }
    tagged(const tagged &t) { _base.init(t._base); }
    ~tagged() { _base.destroy(); }
    tagged &operator=(const tagged &t)
    {
        _base.assign(t._base);
        return *this;
    }
};

static void misuse()
{
    /* a child: str selected, counted reached */
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 2);
        tagged t;
        t.s.select();
        counted *p = t.c;
        _exit(p ? 0 : 3);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
}

int main()
{
    {
        tagged t;
        CHECK(t._base.type() == NULL);
        CHECK((void *)&t._base == (void *)&t.c && (void *)&t.c == (void *)&t.v);

        t.c.select();
        CHECK(g_live == 1 && t.c->v == 7 && *t._base.type() == typeid(counted));
        t.c->v = 9;
        t.c.select(); /* selected already: kept */
        CHECK(g_live == 1 && (*t.c).v == 9);
        counted *p = t.c;
        const tagged &ct = t;
        const counted *cp = ct.c;
        CHECK(p == cp && p == t.c.addr() && p->v == 9);

        tagged t2(t);
        CHECK(g_live == 2 && t2.c->v == 9 && *t2._base.type() == typeid(counted));

        t.s.select(); /* the counted goes */
        CHECK(g_live == 1 && !*t.s && *t._base.type() == typeid(str));
        *t.s = "hello";

        t2 = t; /* t2's counted goes, the str is copied */
        CHECK(g_live == 0 && *t2.s == "hello" && *t2._base.type() == typeid(str));
        t2 = t2;
        CHECK(*t2.s == "hello");

        tagged empty;
        t2 = empty;
        CHECK(t2._base.type() == NULL);
        tagged t3(empty);
        CHECK(t3._base.type() == NULL);

        t3.v.select();
        for (int k = 0; k < 1000; k++)
            t3.v->push_back(k);
        tagged t4(t3);
        CHECK(t4.v->size() == 1000 && (*t4.v)[999] == 999);
        t4.v->push_back(5);
        CHECK(t3.v->size() == 1000);

        t4.none.select();
        CHECK(*t4._base.type() == typeid(void));
        tagged t5;
        t5.c.select();
        CHECK(g_live == 1);
        t5 = t4; /* void is copied as void */
        CHECK(g_live == 0 && *t5._base.type() == typeid(void));

        t5.i.select();
        *t5.i = 0x41424344;
        t5.u.Xstompcast(); /* the same bytes, taken as u_int32_t */
        CHECK(*t5._base.type() == typeid(u_int32_t) && *t5.u == 0x41424344u);
        t5.none.Xstompcast();
        CHECK(*t5._base.type() == typeid(void));

        t.c.select();
        t.c->v = 1;
        t5.c.select();
        t5 = t; /* same type: assigned, not rebuilt */
        CHECK(g_live == 2 && t5.c->v == 1);
        int made = g_made;
        t5 = t;
        CHECK(g_made == made);
    }
    CHECK(g_live == 0);
    misuse();
    return 0;
}
