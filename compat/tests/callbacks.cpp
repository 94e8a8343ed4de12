/* SPDX-License-Identifier: MIT */
/*
 * callbacks.cpp: callbacks, wrap() in every shape, ref/ptr/refcounted/mkref,
 * the annotation forms, auto-free, null callbacks, atomic counts, err.h and
 * amisc.h. No event loop: the callbacks are called directly.
 */
#include "async.h"

#include <atomic>
#include <thread>

#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "ctest.h"

static int g_sum;
static void f0() { g_sum += 1; }
static void f1(int a) { g_sum += a; }
static int f2(int a, int b) { return a * 10 + b; }
static int f5(int a, int b, int c, int d, int e) { return a + b + c + d + e; }
static int f8(int a, int b, int c, int d, int e, int x, int y, int z)
{
    return a + b + c + d + e + 100 * x + 1000 * y + 10000 * z;
}
static std::string cat(std::string a, const std::string &b, const char *c) { return a + b + c; }
static void incr(int &counter) { counter++; }

static std::atomic<int> g_finalized;
struct plain_t {
    int x;
};

struct thing : public virtual refcount {
    int base;
    explicit thing(int b) : base(b) {}
    int add(int x, int y) { return base + x + y; }
    int get() const { return base; }
    void finalize() override
    {
        g_finalized++;
        delete this;
    }
};

struct plain {
    int v;
    explicit plain(int x) : v(x) {}
    virtual ~plain() { g_finalized += 100; }
    int times(int k) { return v * k; }
    int value() const { return v; }
};

struct derived : public plain {
    explicit derived(int x) : plain(x) {}
};

static plain *g_registered;
struct self_registering : public plain {
    explicit self_registering(int x) : plain(x) { g_registered = this; }
};

/* ref<T> can never be NULL: neither NULL nor nullptr converts or assigns to it */
static_assert(!std::is_constructible<ref<thing>, std::nullptr_t>::value, "ref from nullptr");
template <class T, class = void> struct can_assign_null : std::false_type {};
template <class T>
struct can_assign_null<T, std::void_t<decltype(std::declval<T &>() = NULL)>> : std::true_type {};
static_assert(!can_assign_null<ref<thing>>::value, "ref = NULL");
static_assert(!std::is_assignable<ref<thing> &, std::nullptr_t>::value, "ref = nullptr");
static_assert(can_assign_null<ptr<thing>>::value, "ptr = NULL");
/* a plain (uncounted) object has no ref */
static_assert(!std::is_constructible<ref<plain_t>, plain_t *>::value, "ref to uncounted");
/* conversions: ref<A> -> ref<B>, ref<A> -> B * */
static_assert(std::is_convertible<ref<refcounted<thing>>, ref<thing>>::value, "ref up");
static_assert(std::is_convertible<ref<thing>, refcount *>::value, "ref to base pointer");
static_assert(std::is_convertible<callback<void>::ref, callback<void>::ptr>::value, "ref->ptr");

static void test_functions()
{
    /* 0 bound, 0 call-time */
    cbv a = wrap(f0);
    g_sum = 0;
    (*a)();
    (*a)(); /* more than once */
    CHECK(g_sum == 2);
    /* 1 bound */
    cbv b = wrap(f1, 5);
    (*b)();
    CHECK(g_sum == 7);
    /* 0 bound, 1 call-time */
    cbi c = wrap(f1);
    (*c)(3);
    CHECK(g_sum == 10);
    /* return values, bound + call-time */
    callback<int, int>::ref d = wrap(f2, 4);
    CHECK((*d)(2) == 42);
    callback<int, int, int>::ref d2 = wrap(f2);
    CHECK((*d2)(1, 2) == 12);
    callback<int>::ref e = wrap(f5, 1, 2, 3, 4, 5); /* 5 bound */
    CHECK((*e)() == 15);
    callback<int, int, int, int>::ref g = wrap(f8, 1, 1, 1, 1, 1); /* 5 bound, 3 call-time */
    CHECK((*g)(1, 2, 3) == 5 + 100 + 2000 + 30000);
    /* bound arguments are copied at wrap() time */
    std::string s = "x";
    callback<std::string, const char *>::ref h = wrap(cat, s, std::string("y"));
    s = "changed";
    CHECK((*h)("z") == "xyz");
    /* a reference parameter binds the callback's own copy */
    int counter = 0;
    cbv k = wrap(incr, counter);
    (*k)();
    CHECK(counter == 0);
    /* ::ptr may be null and converts back */
    cbv::ptr p;
    CHECK(!p);
    p = a;
    CHECK(p);
    p = NULL;
    CHECK(p == NULL);
}

static void test_members()
{
    g_finalized = 0;
    {
        /* C * : not kept alive */
        plain pl(6);
        callback<int, int>::ref m = wrap(&pl, &plain::times);
        CHECK((*m)(7) == 42);
        callback<int>::ref mc = wrap(&pl, &plain::value); /* const method */
        CHECK((*mc)() == 6);
        /* derived object, base class method */
        derived dv(3);
        callback<int>::ref md = wrap(&dv, &plain::times, 5);
        CHECK((*md)() == 15);
    }
    g_finalized = 0;
    {
        /* refcounted<C> * : kept alive while the callback exists */
        cbv::ptr keep;
        callback<int, int>::ptr m;
        {
            refcounted<plain> *obj = New refcounted<plain>(2);
            m = wrap(obj, &plain::times);
        }
        CHECK((*m)(21) == 42);
        CHECK(g_finalized == 0);
        m = NULL;
        CHECK(g_finalized == 100);
    }
    g_finalized = 0;
    {
        /* ref<C> and ptr<C>, mkref on a class with a virtual refcount base */
        ref<thing> t = mkref(new thing(1));
        callback<int, int>::ref m1 = wrap(t, &thing::add, 10);
        ptr<thing> pt = t;
        callback<int>::ref m2 = wrap(pt, &thing::get); /* const method via ptr */
        thing *raw = t;                                  /* ref<A> -> A * */
        callback<int>::ref m3 = wrap(raw, &thing::add, 1, 2);
        t = mkref(new thing(100));
        pt = NULL;
        CHECK(g_finalized == 0); /* the callbacks hold the first thing */
        CHECK((*m1)(5) == 16);
        CHECK((*m2)() == 1);
        CHECK((*m3)() == 4);
        m1 = wrap(f2, 0); /* drop one holder ... */
        CHECK(g_finalized == 0);
        {
            callback<int>::ref tmp = m3;
            m2 = tmp; /* ... the other one */
        }
        CHECK(g_finalized == 1); /* finalize ran */
    }
    CHECK(g_finalized == 2);
    /* ref<A> -> ref<B> for a base class, ref -> base pointer */
    ref<refcounted<derived>> rd = New refcounted<derived>(9);
    ref<plain> rp = rd;
    plain *bp = rd;
    CHECK(rp->value() == 9 && bp == rp.get());
    vNew refcounted<self_registering>(1); /* an object that files itself somewhere */
    CHECK(g_registered && g_registered->value() == 1);
}

static void test_bind_callback()
{
    cbi c = wrap(f1);
    cbv v = wrap(c, 4); /* binds a callback's argument */
    g_sum = 0;
    (*v)();
    CHECK(g_sum == 4);
    callback<int, int, int>::ref two = wrap(f2);
    callback<int, int>::ref one = wrap(two, 9);
    CHECK((*one)(1) == 91);
    cbv vc = cwrap(c, 5, 12);
    CHECK(vc->getcolor() == 12);
}

static void test_annotations()
{
    cbv a = wrap(f0);
    CHECK(a->getcolor() == 0 && a->getprio() == 0 && a->get_timeleft() == 0);
    cbv b = cwrap(f1, 1, 7);
    CHECK(b->getcolor() == 7 && b->getprio() == 0);
    cbv c = cpwrap(f1, 1, 8, 3);
    CHECK(c->getcolor() == 8 && c->getprio() == 3);
    cbv d = wrap_timeleft(f1, 1, 5000);
    CHECK(d->getcolor() == 0 && d->get_timeleft() == 5000);
    cbv e = cwrap_timeleft(f1, 1, 9, 6000);
    CHECK(e->getcolor() == 9 && e->get_timeleft() == 6000);
    cbv f = cpwrap_timeleft(f1, 1, 10, 2, 7000);
    CHECK(f->getcolor() == 10 && f->getprio() == 2 && f->get_timeleft() == 7000);
    cbv g = wrap_penalty(f1, 1, 8000, 4);
    CHECK(g->get_timeleft() == 8000 && g->get_penalty() == 4);
    cbv h = cwrap_penalty(f1, 1, 11, 9000, 2);
    CHECK(h->getcolor() == 11 && h->get_timeleft() == 9000 && h->get_penalty() == 2);
    cbv i = cpwrap_penalty(f1, 1, 12, 1, 100, 3);
    CHECK(i->getcolor() == 12 && i->getprio() == 1 && i->get_timeleft() == 100 &&
          i->get_penalty() == 3);
    /* equal annotations share one handler descriptor */
    cbv d2 = wrap_timeleft(f0, 5000);
    CHECK(d->handler_ != nullptr && d->handler_ == d2->handler_);
    CHECK(g->handler_ != d->handler_);
    /* member forms */
    plain pl(2);
    callback<int, int>::ref m = cpwrap(&pl, &plain::times, 5, 1);
    CHECK(m->getcolor() == 5 && m->getprio() == 1 && (*m)(4) == 8);
    callback<int>::ref mc = cwrap_timeleft(&pl, &plain::value, -1, 300);
    CHECK(mc->getcolor() == -1 && mc->get_timeleft() == 300 && (*mc)() == 2);
    /* a negative color is stored as given (pinned colors are checked when posted) */
    cbv neg = cwrap(f0, -2);
    CHECK(neg->getcolor() == -2);
}

static void test_autofree()
{
    callback<void> *cb = wrap(f0); /* Mely style: a raw pointer */
    CHECK(cb->getFlagAutoFree());
    cb->setFlagAutoFree(false);
    CHECK(!cb->getFlagAutoFree() && cb->refcount_getcnt() == 1);
    cb->setFlagAutoFree(false); /* idempotent */
    CHECK(cb->refcount_getcnt() == 1);
    {
        cbv r = cb;
        CHECK(cb->refcount_getcnt() == 2);
    }
    CHECK(cb->refcount_getcnt() == 1); /* still alive: the flag holds it */
    g_sum = 0;
    (*cb)();
    CHECK(g_sum == 1);
    cb->setFlagAutoFree(true); /* count 0: freed (ASan would see a leak otherwise) */
}

static void test_nulls()
{
    (*cbv_null)();
    (*cbi_null)(3);
    (*cbb_null)(true);
    cbv v = cbv_null;
    CHECK(v.get() == cbv_null.get());
}

static void test_atomic_counts()
{
    /* A callback's count is shared by threads copying and dropping handles. */
    cbv shared = wrap(f0);
    std::thread ts[2];
    for (auto &t : ts)
        t = std::thread([&shared] {
            for (int i = 0; i < 200000; i++) {
                cbv c = shared;
                cbv::ptr p = c;
            }
        });
    for (auto &t : ts)
        t.join();
    CHECK(shared->refcount_getcnt() == 1);
}

static void test_ref_null_and_err()
{
    std::string err;
    int st = ct_fork(
        [] {
            ptr<thing> p;
            ref<thing> r = p; /* fatal: a ref cannot be NULL */
            (void)r;
        },
        &err);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && ct_contains(err, "NULL"));

    st = ct_fork(
        [] {
            setprogname("/some/dir/progx");
            warn << "x = " << 42 << "\n";
            warn("y = %d\n", 7);
            warnx << "plain\n";
            warnx("plain %s\n", "two");
        },
        &err);
    CHECK(ct_exited(st, 0));
    CHECK(err == "progx: x = 42\nprogx: y = 7\nplain\nplain two\n");

    st = ct_fork(
        [] {
            setprogname("p");
            fatal << "bad " << 1 << "\n";
            _exit(0);
        },
        &err);
    if (!(ct_exited(st, 1) && err == "p: fatal: bad 1\n"))
        fprintf(stderr, "status %d, stderr [%s]\n", st, err.c_str());
    CHECK(ct_exited(st, 1) && err == "p: fatal: bad 1\n");
    st = ct_fork(
        [] {
            setprogname("p");
            fatal("bad %d", 2);
        },
        &err);
    /* as libasync: "fatal: " after the name, and no newline added */
    CHECK(ct_exited(st, 1) && err == "p: fatal: bad 2");
    st = ct_fork([] { panic << "boom\n"; }, &err);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && ct_contains(err, "boom"));
    st = ct_fork([] { panic("boom %d\n", 3); }, &err);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && ct_contains(err, "boom 3"));
    /* colors at or above MAX_COLORS: a message and a non-zero exit */
    st = ct_fork([] { cbv c = cwrap(f0, MAX_COLORS); }, &err);
    CHECK(ct_exited(st, EXIT_FAILURE) && ct_contains(err, "incorrect color"));
}

static void test_amisc()
{
    int fd = inetsocket(SOCK_STREAM, 0, INADDR_LOOPBACK);
    CHECK(fd >= 0);
    sockaddr_in sin;
    socklen_t len = sizeof sin;
    CHECK(getsockname(fd, (sockaddr *)&sin, &len) == 0);
    CHECK(sin.sin_addr.s_addr == htonl(INADDR_LOOPBACK) && ntohs(sin.sin_port) != 0);
    unsigned short port = ntohs(sin.sin_port);
    /* a second socket on the same port fails with errno set */
    int fd2 = inetsocket(SOCK_STREAM, port, INADDR_LOOPBACK);
    CHECK(fd2 < 0 && errno == EADDRINUSE);
    make_async(fd);
    CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
    make_sync(fd);
    CHECK(!(fcntl(fd, F_GETFL) & O_NONBLOCK));
    close_on_exec(fd);
    CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close_on_exec(fd, false);
    CHECK(!(fcntl(fd, F_GETFD) & FD_CLOEXEC));
    tcp_nodelay(fd);
    int on = 0;
    len = sizeof on;
    CHECK(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &len) == 0 && on);
    close(fd);
    int ufd = inetsocket(SOCK_DGRAM);
    CHECK(ufd >= 0);
    close(ufd);

    char path[64];
    snprintf(path, sizeof path, "/tmp/mely-compat-test-%d.sock", (int)getpid());
    unlink(path);
    int ls = unixsocket(path);
    CHECK(ls >= 0 && listen(ls, 4) == 0);
    int cs = unixsocket_connect(path);
    CHECK(cs >= 0);
    int as = accept(ls, NULL, NULL);
    CHECK(as >= 0 && write(cs, "hi", 2) == 2);
    char buf[2];
    CHECK(read(as, buf, 2) == 2 && buf[0] == 'h');
    close(as);
    close(cs);
    close(ls);
    unlink(path);
    CHECK(unixsocket_connect(path) < 0);
}

int main()
{
    ct_watchdog(30);
    test_functions();
    test_members();
    test_bind_callback();
    test_annotations();
    test_autofree();
    test_nulls();
    test_atomic_counts();
    test_ref_null_and_err();
    test_amisc();
    printf("compat callbacks: ok\n");
    return 0;
}
