/* SPDX-License-Identifier: MIT */
/*
 * aios.cpp: aios.h. Lines over a socketpair ("\r\n", libasync's "\r" line,
 * the bytes after the last newline dropped at the end), the aios's color and
 * a read callback of another color, readany and unread, << and write with a
 * write callback, 2 MiB to a slow reader after the last ref is gone, a read
 * timeout and one that must not fire, a hostile 1 MiB line (EFBIG, the
 * buffer stays bounded), abort, a connection held only by its read callback
 * dropped by readcancel and abort, four colors printing to one aios at once;
 * in child processes: setdebug's trace, ain, and aout's output flushed at
 * exit (a pipe that only drains after the program's end).
 */
#include "async.h"
#include "aios.h"

#include <fcntl.h>
#include <poll.h>

#include <string>
#include <thread>
#include <vector>

#include "ctest.h"

static void make_pair(int fds[2])
{
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
}

static void put(int fd, const char *s)
{
    size_t n = strlen(s);
    CHECK(write(fd, s, n) == (ssize_t)n);
}

/* ---- Lines, on the aios's color ---------------------------------------------------- */

static aios_t::ptr &g_lines = *new aios_t::ptr; /* never destroyed: see main() */
static int g_lines_peer;
static std::vector<std::string> &g_got = *new std::vector<std::string>;

static void line_cb(str s, int err)
{
    CHECK(get_current_color() == 9);
    if (s) {
        CHECK(err == 0);
        g_got.push_back(std::string(s.cstr(), s.len()));
        g_lines->readline(cwrap(line_cb, 9)); /* served from the same loop */
        return;
    }
    CHECK(err == 0);
    const std::vector<std::string> want = {"one", "two", "\r", "", "three", "four"};
    CHECK(g_got == want);
    /* "five" had no newline: dropped at the end, as in libasync */
    CHECK(g_lines->getrbufbytes() == 4);
    /* after the end, a read answers at once */
    static bool again;
    if (!again) {
        again = true;
        g_lines->readline(cwrap(line_cb, 9));
        return;
    }
    g_lines = nullptr;
    ct_done();
}

static void start_lines()
{
    int fds[2];
    make_pair(fds);
    g_lines = aios::alloc(fds[0]);
    CHECK(g_lines->getcolor() == 9);
    CHECK(g_lines->fdno() == fds[0]);
    CHECK(fcntl(fds[0], F_GETFL) & O_NONBLOCK);
    g_lines_peer = fds[1];
    put(fds[1], "one\ntwo\r\n\r\n\nthr");
    g_lines->readline(cwrap(line_cb, 9));
    /* the rest comes later: the reads wait for it */
    delaycb(0, 30000000, cwrap(+[] {
        CHECK(g_got.size() == 4);
        put(g_lines_peer, "ee\nfour\nfive");
        CHECK(shutdown(g_lines_peer, SHUT_WR) == 0);
    }, 9));
}

/* ---- A read callback of another color -------------------------------------------- */

static aios_t::ptr &g_other = *new aios_t::ptr; /* never destroyed: see main() */

static void other_cb(str s, int err)
{
    CHECK(get_current_color() == 3);
    CHECK(s && s == "x" && err == 0);
    g_other = nullptr;
    ct_done();
}

static void start_other()
{
    int fds[2];
    make_pair(fds);
    g_other = aios::alloc(fds[0]);
    CHECK(g_other->getcolor() == 7);
    g_other->readline(cwrap(other_cb, 3));
    put(fds[1], "x\n");
}

/* ---- readany, unread ---------------------------------------------------------------- */

static aios_t::ptr &g_any = *new aios_t::ptr; /* never destroyed: see main() */

static void any_cb2(str s, int err)
{
    CHECK(s && s == "ef" && err == 0);
    CHECK(g_any->getrbufbytes() == 0);
    g_any = nullptr;
    ct_done();
}

static void any_cb(str s, int err)
{
    CHECK(s && s == "abcdef" && err == 0);
    g_any->unread(2);
    CHECK(g_any->getrbufbytes() == 2);
    g_any->readany(wrap(any_cb2));
}

static void start_any()
{
    int fds[2];
    make_pair(fds);
    g_any = aios::alloc(fds[0]);
    put(fds[1], "abcdef");
    g_any->readany(wrap(any_cb));
}

/* ---- <<, write and the write callback -------------------------------------------- */

static aios_t::ptr &g_w = *new aios_t::ptr; /* never destroyed: see main() */
static int g_w_peer;

static void wdone(int err)
{
    CHECK(get_current_color() == 5);
    CHECK(err == 0);
    char buf[64];
    ssize_t n = read(g_w_peer, buf, sizeof buf);
    const char want[] = "x = 42 s -7\nraw";
    CHECK(n == (ssize_t)strlen(want) && memcmp(buf, want, (size_t)n) == 0);
    g_w = nullptr;
    /* the last ref closed the descriptor: the peer sees the end */
    CHECK(read(g_w_peer, buf, sizeof buf) == 0);
    ct_done();
}

static void start_write()
{
    int fds[2];
    make_pair(fds);
    g_w = aios::alloc(fds[0]);
    g_w_peer = fds[1];
    g_w << "x = " << 42 << " " << str("s") << " " << -7L << "\n";
    g_w->write("raw", 3);
    g_w->setwcb(cwrap(wdone, 5));
}

/* ---- 2 MiB to a slow reader, the aios dropped at once ------------------------------ */

static const size_t BIG = 2u << 20;

static char pattern(size_t i)
{
    return (char)('a' + (i * 7 + i / 4096) % 26);
}

static void slow_reader(int fd)
{
    size_t total = 0;
    char buf[65536];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        CHECK(n >= 0);
        if (n == 0)
            break;
        for (ssize_t i = 0; i < n; i++)
            CHECK(buf[i] == pattern(total + (size_t)i));
        total += (size_t)n;
        usleep(2000);
    }
    CHECK(total == BIG);
    close(fd);
    ct_done();
}

static void start_big()
{
    int p[2];
    CHECK(pipe(p) == 0);
    std::thread(slow_reader, p[0]).detach();
    aios_t a = aios::alloc(p[1]);
    std::string chunk(65536, ' ');
    for (size_t off = 0; off < BIG; off += chunk.size()) {
        for (size_t i = 0; i < chunk.size(); i++)
            chunk[i] = pattern(off + i);
        a << str(chunk.data(), chunk.size());
    }
    /* the last ref goes with pending output: it still all goes out, then
     * the descriptor is closed (the reader sees the end) */
}

/* ---- Timeouts ------------------------------------------------------------------------- */

static aios_t::ptr &g_to = *new aios_t::ptr; /* never destroyed: see main() */
static double g_to_start;

static void to_cb(str s, int err)
{
    double waited = ct_now_ms() - g_to_start;
    CHECK(!s && err == ETIMEDOUT);
    CHECK(waited >= 950 && waited < 10000);
    static bool again;
    if (!again) {
        again = true;
        g_to->readline(wrap(to_cb)); /* answers at once */
        return;
    }
    g_to = nullptr;
    ct_done();
}

static aios_t::ptr &g_nto = *new aios_t::ptr; /* never destroyed: see main() */
static int g_nto_peer;

static void nto_cb2(str s, int err)
{
    CHECK(s && s == "late" && err == 0);
    g_nto = nullptr;
    ct_done();
}

static void nto_cb(str s, int err)
{
    CHECK(s && s == "early" && err == 0);
    /* no read pending for 1.5 s: the timeout has nothing to end */
    delaycb(1, 500000000, wrap(+[] {
        put(g_nto_peer, "late\n");
        g_nto->readline(wrap(nto_cb2));
    }));
}

static void start_timeouts()
{
    int fds[2];
    make_pair(fds);
    g_to = aios::alloc(fds[0]);
    g_to->settimeout(1);
    CHECK(g_to->gettimeout() == 1);
    g_to_start = ct_now_ms();
    g_to->readline(wrap(to_cb));

    int f2[2];
    make_pair(f2);
    g_nto = aios::alloc(f2[0]);
    g_nto_peer = f2[1];
    g_nto->settimeout(1);
    g_nto->readline(wrap(nto_cb));
    delaycb(0, 300000000, wrap(+[] { put(g_nto_peer, "early\n"); }));
}

/* ---- A hostile long line ------------------------------------------------------------ */

static aios_t::ptr &g_long = *new aios_t::ptr; /* never destroyed: see main() */

static void hostile_writer(int fd)
{
    std::string junk(1u << 20, 'A');
    size_t off = 0;
    while (off < junk.size()) {
        ssize_t n = write(fd, junk.data() + off, junk.size() - off);
        if (n <= 0)
            break; /* the aios closed its end (EPIPE; SIGPIPE is ignored) */
        off += (size_t)n;
    }
    close(fd);
}

static void long_cb(str s, int err)
{
    CHECK(!s && err == EFBIG);
    /* the buffer stayed at its size */
    CHECK(g_long->getrbufbytes() == aios::defrbufsize);
    g_long = nullptr; /* closes: the writer ends */
    ct_done();
}

static void fits_cb(str s, int err)
{
    CHECK(err == 0 && s && s.len() == 8000);
    for (size_t i = 0; i < s.len(); i++)
        CHECK(s[(ptrdiff_t)i] == 'b');
    g_long->readline(wrap(long_cb));
}

static void start_long()
{
    int fds[2];
    make_pair(fds);
    g_long = aios::alloc(fds[0]);
    std::string fits(8000, 'b');
    fits += '\n';
    CHECK(write(fds[1], fits.data(), fits.size()) == (ssize_t)fits.size());
    std::thread(hostile_writer, fds[1]).detach();
    g_long->readline(wrap(fits_cb));
}

/* ---- abort ----------------------------------------------------------------------------- */

static aios_t::ptr &g_ab = *new aios_t::ptr; /* never destroyed: see main() */
static int g_ab_peer;

static void ab_never(str, int)
{
    CHECK(!"an aborted read called back");
}

static void ab_after(str s, int err)
{
    CHECK(!s && err == EBADF);
    char c;
    CHECK(read(g_ab_peer, &c, 1) == 0); /* closed */
    g_ab = nullptr;
    ct_done();
}

static void start_abort()
{
    int fds[2];
    make_pair(fds);
    g_ab = aios::alloc(fds[0]);
    g_ab_peer = fds[1];
    g_ab->readline(wrap(ab_never));
    delaycb(0, 20000000, wrap(+[] {
        g_ab->abort();
        CHECK(g_ab->fdno() == -1);
        delaycb(0, 50000000, wrap(+[] { g_ab->readline(wrap(ab_after)); }));
    }));
}

/* ---- An object held only by its read callback --------------------------------------- */

/* libasync's usual shape: a connection holds its aios, and only its pending
 * callback holds the connection. Dropping the callback (readcancel, abort)
 * drops the connection and its aios from inside the aios's own method. */
static std::atomic<int> g_conns;
struct conn : virtual public refcount {
    aios_t a;
    explicit conn(int fd) : a(aios::alloc(fd)) { g_conns++; }
    ~conn() { g_conns--; }
    void line(str, int) { CHECK(!"a dropped read called back"); }
};
static aios *g_held[2];
static int g_held_peer[2];

static void start_selfheld()
{
    for (int i = 0; i < 2; i++) {
        int fds[2];
        make_pair(fds);
        ref<conn> c = New refcounted<conn>(fds[0]);
        c->a->readline(wrap(c, &conn::line));
        g_held[i] = c->a; /* no count */
        g_held_peer[i] = fds[1];
    }
    CHECK(g_conns.load() == 2);
    g_held[0]->readcancel();
    CHECK(g_conns.load() == 1);
    g_held[1]->abort();
    CHECK(g_conns.load() == 0);
    char c;
    CHECK(read(g_held_peer[0], &c, 1) == 0 && read(g_held_peer[1], &c, 1) == 0);
    ct_done();
}

/* ---- Four colors print to one aios ------------------------------------------------- */

static const int PRINTERS = 4, LINES = 400;
static aios_t::ptr &g_shared = *new aios_t::ptr; /* never destroyed: see main() */
static std::atomic<int> g_printers_left{PRINTERS};

static void shared_reader(int fd)
{
    std::string all;
    char buf[8192];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        CHECK(n > 0);
        all.append(buf, (size_t)n);
    }
    int next[PRINTERS] = {0};
    size_t pos = 0;
    while (pos < all.size()) {
        size_t nl = all.find('\n', pos);
        CHECK(nl != std::string::npos);
        std::string line = all.substr(pos, nl - pos);
        int c, i;
        char tail[64];
        CHECK(sscanf(line.c_str(), "color %d line %d %63s", &c, &i, tail) == 3);
        CHECK(c >= 0 && c < PRINTERS && i == next[c]);
        CHECK(std::string(tail) == std::string(40, (char)('a' + c)));
        next[c]++;
        pos = nl + 1;
    }
    for (int c = 0; c < PRINTERS; c++)
        CHECK(next[c] == LINES);
    close(fd);
    ct_done();
}

static void printer(int c, int from)
{
    const std::string tail(40, (char)('a' + c));
    for (int i = from; i < from + 20 && i < LINES; i++)
        g_shared << "color " << c << " line " << i << " " << tail.c_str() << "\n";
    if (from + 20 < LINES)
        cpucb_tail(cwrap(printer, c, from + 20, 100 + c));
    else if (--g_printers_left == 0)
        g_shared = nullptr; /* drains, then closes */
}

static void start_shared()
{
    int p[2];
    CHECK(pipe(p) == 0);
    std::thread(shared_reader, p[0]).detach();
    g_shared = aios::alloc(p[1]);
    for (int c = 0; c < PRINTERS; c++)
        cpucb_tail(cwrap(printer, c, 0, 100 + c));
}

/* ---- In child processes ----------------------------------------------------------- */

/* Runs fn in a child whose stdout is a pipe read here (slowly, after a
 * pause: the child's output must wait in aout) and whose stderr is kept. */
template <class F> static int run_child(F fn, std::string *out, std::string *err)
{
    int po[2], pe[2];
    CHECK(pipe(po) == 0 && pipe(pe) == 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(po[0]);
        close(pe[0]);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[1]);
        close(pe[1]);
        setenv("MELY_STALL_MS", "0", 1);
        fn();
        exit(0); /* static destructors: aout is flushed */
    }
    close(po[1]);
    close(pe[1]);
    usleep(100000);
    out->clear();
    err->clear();
    struct pollfd pf[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    int open = 2;
    char buf[4096];
    while (open) {
        CHECK(poll(pf, 2, -1) > 0);
        for (int i = 0; i < 2; i++) {
            if (pf[i].fd < 0 || !pf[i].revents)
                continue;
            ssize_t n = read(pf[i].fd, buf, sizeof buf);
            if (n > 0) {
                (i ? err : out)->append(buf, (size_t)n);
            } else {
                close(pf[i].fd);
                pf[i].fd = -1;
                open--;
            }
        }
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        ;
    return st;
}

static void child_ain_aout()
{
    int p[2];
    CHECK(pipe(p) == 0);
    put(p[1], "hello\nworld\n");
    close(p[1]);
    dup2(p[0], 0);
    close(p[0]);
    make_async(0);
    make_async(1); /* as aout made the first stdout: the pipe fills, EAGAIN */
    /* no amain(): the line is there, the callback (color 0, as main) runs
     * from readline itself */
    static bool got;
    ain->readline(wrap(+[](str s, int err) {
        CHECK(s && s == "hello" && err == 0);
        aout << "got " << s << "\n";
        got = true;
    }));
    CHECK(got);
    /* 300,000 bytes: more than the pipe holds until the parent reads */
    for (int i = 0; i < 10000; i++)
        aout << "line " << i << " 0123456789abcdefghij\n";
}

static void child_debug()
{
    int fds[2];
    make_pair(fds);
    aios_t a = aios::alloc(fds[0]);
    a->setdebug("peer");
    put(fds[1], "ping\r\n");
    static bool got;
    a->readline(wrap(+[](str s, int) {
        CHECK(s == "ping");
        got = true;
    }));
    CHECK(got);
    a << "pong\r\nsecond\n" << "third";
    CHECK(a->flush() == 0);
    char buf[64];
    ssize_t n = read(fds[1], buf, sizeof buf);
    CHECK(n == 18 && memcmp(buf, "pong\r\nsecond\nthird", 18) == 0);
}

static void forked_tests()
{
    std::string out, err;
    int st = run_child(child_ain_aout, &out, &err);
    CHECK(ct_exited(st, 0));
    CHECK(err.empty());
    std::string want = "got hello\n";
    for (int i = 0; i < 10000; i++)
        want += "line " + std::to_string(i) + " 0123456789abcdefghij\n";
    CHECK(out == want);

    st = run_child(child_debug, &out, &err);
    CHECK(ct_exited(st, 0));
    CHECK(out.empty());
    CHECK(err == "peer ==> ping\npeer <== pong\npeer <== second\npeer <== third\n"
                 "peer === EOF\n");
}

/* The globals that callbacks use are never destroyed: exit() (ct_done) runs
 * static destructors while other workers may still run (doc/porting.md). */
int main()
{
    ct_watchdog(60);
    /* before the runtime exists (fork) */
    forked_tests();

    ct_expect(1);
    cpucb_tail(cwrap(start_lines, 9));
    ct_expect(1);
    cpucb_tail(cwrap(start_other, 7));
    ct_expect(1);
    cpucb_tail(wrap(start_any));
    ct_expect(1);
    cpucb_tail(cwrap(start_write, 5));
    ct_expect(1);
    cpucb_tail(cwrap(start_big, 8));
    ct_expect(2);
    cpucb_tail(wrap(start_timeouts));
    ct_expect(1);
    cpucb_tail(cwrap(start_long, 6));
    ct_expect(1);
    cpucb_tail(cwrap(start_abort, 4));
    ct_expect(1);
    cpucb_tail(cwrap(start_shared, 10));
    ct_expect(1);
    cpucb_tail(cwrap(start_selfheld, 11));
    amain();
}
