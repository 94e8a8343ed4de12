/* SPDX-License-Identifier: MIT */
/*
 * io.cpp: fdcb (read and write, level-triggered, persistent, colors, before
 * amain, removal with NULL, fdcb_finished), sigcb (color, previous callback,
 * removal), chldcb, tcpconnect (success, refused, cancel).
 */
#include "async.h"

#include <arpa/inet.h>
#include <fcntl.h>

#include "ctest.h"

static int g_pipe_a[2], g_pipe_b[2], g_pipe_c[2];
static std::atomic<int> g_a_calls, g_b_calls;

/* pipe a: 2 bytes, one read per call: level-triggered -> 2 calls; the second
 * removes the watch; a later byte is not seen. */
static void a_readable()
{
    CHECK(get_current_color() == 9);
    char c;
    CHECK(read(g_pipe_a[0], &c, 1) == 1);
    if (++g_a_calls == 2) {
        fdcb(g_pipe_a[0], selread, NULL);
        CHECK(write(g_pipe_a[1], "z", 1) == 1);
        delaycb(0, 50000000, cwrap(+[] {
            CHECK(g_a_calls.load() == 2);
            ct_done();
        }, 9));
    }
}

/* pipe b: fdcb_finished(true) ends the watch after this call. */
static void b_readable()
{
    char c;
    CHECK(read(g_pipe_b[0], &c, 1) == 1);
    g_b_calls++;
    fdcb_finished(true);
    CHECK(write(g_pipe_b[1], "y", 1) == 1);
    delaycb(0, 50000000, wrap(+[] {
        CHECK(g_b_calls.load() == 1);
        /* a new registration on the same fd works again */
        fdcb(g_pipe_b[0], selread, wrap(+[] {
            char c2;
            CHECK(read(g_pipe_b[0], &c2, 1) == 1 && c2 == 'y');
            fdcb(g_pipe_b[0], selread, NULL);
            ct_done();
        }));
    }));
}

/* pipe c: the write end is writable at once. */
static void c_writable()
{
    CHECK(get_current_color() == 11);
    fdcb(g_pipe_c[1], selwrite, NULL);
    ct_done();
}

static std::atomic<int> g_sig1, g_sig2;
static void sig1() { g_sig1++; }
static void sig2()
{
    CHECK(get_current_color() == 4);
    g_sig2++;
    CHECK(g_sig1.load() == 0);
    cbv::ptr prev = sigcb(SIGUSR1, NULL);
    CHECK(prev && prev->getcolor() == 4);
    /* once this run is over, SIGUSR1 has its default disposition again */
    delaycb(0, 20000000, cwrap(+[] {
        struct sigaction sa;
        CHECK(sigaction(SIGUSR1, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL);
        ct_done();
    }, 4));
}

static void child_exited(pid_t, int status)
{
    CHECK(get_current_color() == 6);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 7);
    ct_done();
}

static void start_child()
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        _exit(7);
    chldcb(pid, cwrap(child_exited, pid, 6));
}

static int g_listener;
static void connected(int fd)
{
    CHECK(get_current_color() == 12);
    CHECK(fd >= 0);
    int s = accept(g_listener, NULL, NULL);
    CHECK(s >= 0);
    CHECK(write(fd, "ok", 2) == 2);
    char buf[2];
    CHECK(read(s, buf, 2) == 2 && buf[0] == 'o');
    close(s);
    close(fd);
    ct_done();
}

static void refused(int fd)
{
    CHECK(fd < 0);
    ct_done();
}

static void cancelled_cb(int) { CHECK(!"a cancelled tcpconnect called back"); }

static void start_connects()
{
    g_listener = inetsocket(SOCK_STREAM, 0, INADDR_LOOPBACK);
    CHECK(g_listener >= 0 && listen(g_listener, 8) == 0);
    sockaddr_in sin;
    socklen_t len = sizeof sin;
    CHECK(getsockname(g_listener, (sockaddr *)&sin, &len) == 0);
    in_addr lo;
    lo.s_addr = htonl(INADDR_LOOPBACK);
    tcpconnect(lo, ntohs(sin.sin_port), cwrap(connected, 12));
    /* a port nobody listens on: bind one, close it */
    int tmp = inetsocket(SOCK_STREAM, 0, INADDR_LOOPBACK);
    CHECK(tmp >= 0 && getsockname(tmp, (sockaddr *)&sin, &len) == 0);
    close(tmp);
    tcpconnect(lo, ntohs(sin.sin_port), wrap(refused));
    /* cancelled from its own color: never calls back */
    cpucb_tail(cwrap(+[] {
        sockaddr_in s2;
        socklen_t l2 = sizeof s2;
        CHECK(getsockname(g_listener, (sockaddr *)&s2, &l2) == 0);
        in_addr lo2;
        lo2.s_addr = htonl(INADDR_LOOPBACK);
        tcpconnect_t *tc = tcpconnect(lo2, ntohs(s2.sin_port), cwrap(cancelled_cb, 13));
        tcpconnect_cancel(tc);
        delaycb(0, 50000000, wrap(+[] { ct_done(); }));
    }, 13));
}

int main()
{
    ct_watchdog(30);
    CHECK(pipe(g_pipe_a) == 0 && pipe(g_pipe_b) == 0 && pipe(g_pipe_c) == 0);
    for (int *p : {g_pipe_a, g_pipe_b, g_pipe_c}) {
        make_async(p[0]);
        make_async(p[1]);
    }
    /* registered before amain(), as libasync programs do */
    ct_expect(3);
    fdcb(g_pipe_a[0], selread, cwrap(a_readable, 9));
    CHECK(write(g_pipe_a[1], "ab", 2) == 2);
    fdcb(g_pipe_b[0], selread, wrap(b_readable));
    CHECK(write(g_pipe_b[1], "x", 1) == 1);
    fdcb(g_pipe_c[1], selwrite, cwrap(c_writable, 11));

    /* sigcb: the second registration replaces the first and returns it */
    ct_expect(1);
    cbv::ptr none = sigcb(SIGUSR1, wrap(sig1));
    CHECK(!none);
    cbv::ptr prev = sigcb(SIGUSR1, cwrap(sig2, 4));
    CHECK(prev && prev->getcolor() == 0);
    cpucb_tail(wrap(+[] { CHECK(kill(getpid(), SIGUSR1) == 0); }));

    ct_expect(1);
    cpucb_tail(wrap(start_child));
    ct_expect(3);
    start_connects();
    amain();
}
