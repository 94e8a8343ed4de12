/* SPDX-License-Identifier: MIT */
/*
 * check_listen.c: listening sockets through the public API (include/mely/mely.h):
 *  - port 0 and mely_listener_port(), an explicit port; accepted fds are
 *    non-blocking and close-on-exec, the peer is the client; 200 connections
 *    at once (over the 64 per readiness) are all accepted; connections made
 *    before mely_run() are accepted once it runs;
 *  - MELY_LISTEN_REUSEPORT spreads accepts over the workers, each on its
 *    pinned color;
 *  - mely_listener_close() stops accepting (connect is refused; from the
 *    accept handler, no other accept runs and the queued clients are
 *    dropped); -EADDRINUSE; argument errors; IPv6 "::1" where the host has it;
 *  - mely_listener_pause() holds accepting (clients wait in the backlog) and
 *    mely_listener_resume() accepts them all, from a foreign thread and from
 *    the accept handler, with one socket and with one per worker.
 *
 * Handlers and helper threads never call ck_assert; every wait is bounded.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mely/mely.h>
#include "tests/testutil.h"

#define L_COLOR ((mely_color_t)12345)

enum { MAXW = 8, MANY = 200 };

static struct {
    mely_listener_t *l;
    unsigned port;
    int family;
    bool reuseport, close_in_handler, pause_in_handler;
    atomic_uint accepted, per_worker[MAXW];
    atomic_uint closed_after; /* accepts that started after mely_listener_close() returned */
    atomic_bool listener_closed;
    unsigned expect;          /* the helper stops the runtime at this many accepts */
} ls;

/* Checks what mely.h promises about an accepted connection, then closes it. */
static void on_accept(int fd, const struct sockaddr *peer, unsigned peerlen, void *arg)
{
    (void)arg;
    int w = mely_current_worker();
    if (atomic_load(&ls.listener_closed))
        atomic_fetch_add(&ls.closed_after, 1);
    if (w < 0 || w >= MAXW)
        note("accept handler on worker %d", w);
    else
        atomic_fetch_add(&ls.per_worker[w], 1);
    int want = ls.reuseport && w >= 0 ? (int)MELY_COLOR_PINNED(w) : (int)L_COLOR;
    if (mely_current_color() != want)
        note("accept handler ran as color %d, expected %d", mely_current_color(), want);
    unsigned len = ls.family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (!peer || peer->sa_family != ls.family || peerlen != len)
        note("peer: family %d, length %u (expected %d, %u)", peer ? peer->sa_family : -1, peerlen,
             ls.family, len);
    else if (ls.family == AF_INET &&
             ((const struct sockaddr_in *)peer)->sin_addr.s_addr != htonl(INADDR_LOOPBACK))
        note("peer is not 127.0.0.1");
    int fl = fcntl(fd, F_GETFL), fdf = fcntl(fd, F_GETFD);
    if (fl < 0 || !(fl & O_NONBLOCK) || fdf < 0 || !(fdf & FD_CLOEXEC))
        note("accepted fd %d: flags 0x%x, fd flags 0x%x", fd, fl, fdf);
    close(fd);
    if (ls.pause_in_handler && atomic_load(&ls.accepted) == 0) {
        int err = mely_listener_pause(ls.l);
        if (err)
            note("mely_listener_pause from the handler: %s", mely_strerror(err));
    }
    if (ls.close_in_handler && atomic_load(&ls.accepted) == 0) {
        int err = mely_listener_close(ls.l);
        if (err)
            note("mely_listener_close from the handler: %s", mely_strerror(err));
        atomic_store(&ls.listener_closed, true);
    }
    atomic_fetch_add(&ls.accepted, 1);
}

static int client(unsigned port, int family)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_storage ss;
    socklen_t len;
    memset(&ss, 0, sizeof(ss));
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        a->sin6_addr = in6addr_loopback;
        len = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof(*a);
    }
    if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

static void start(unsigned workers, int pin, const char *host, unsigned port, unsigned flags)
{
    memset(&ls, 0, sizeof(ls));
    ls.family = host && strchr(host, ':') ? AF_INET6 : AF_INET;
    ls.reuseport = flags & MELY_LISTEN_REUSEPORT;
    init_runtime(&rt, workers, pin, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    int err = mely_listen(&rt, host, port, 0, flags, MELY_TO(L_COLOR), on_accept, NULL, &ls.l);
    ck_assert_msg(err == 0, "mely_listen(%s, %u, flags %u): %s", host ? host : "NULL", port, flags,
                  mely_strerror(err));
    ls.port = mely_listener_port(ls.l);
    ck_assert_msg(ls.port > 0 && ls.port < 65536, "mely_listener_port: %u", ls.port);
    if (port)
        ck_assert_uint_eq(ls.port, port);
    ck_assert_uint_eq(mely_listener_pauses(ls.l), 0);
}

/* Connects n clients (kept open until all were accepted), then stops. */
static void *connect_many(void *arg)
{
    unsigned n = (unsigned)(uintptr_t)arg;
    int *fds = calloc(n, sizeof(*fds));
    unsigned k = 0;
    for (; fds && k < n; k++)
        if ((fds[k] = client(ls.port, ls.family)) < 0) {
            note("client %u: connect: %s", k, strerror(-fds[k]));
            break;
        }
    if (!wait_count(&ls.accepted, k, 10000))
        note("%u of %u connections accepted within 10 s", atomic_load(&ls.accepted), k);
    for (unsigned i = 0; i < k; i++)
        close(fds[i]);
    free(fds);
    mely_stop(&rt);
    return NULL;
}

/* ---- accepting ------------------------------------------------------------------------------- */

/*
 * Port 0 (host NULL: 127.0.0.1), then an explicit port on "127.0.0.1": 200
 * clients connecting at once are all accepted, on the listener's color, with
 * non-blocking, close-on-exec fds and the client as the peer.
 */
START_TEST(accepts_every_connection)
{
    unsigned n = MANY;
    if (_i == 0)
        start(2, 1, NULL, 0, 0);
    else
        start(2, 1, "127.0.0.1", free_port(), 0);
    run_with_helper(&rt, connect_many, (void *)(uintptr_t)n, 60, "200 connections");
    ck_assert_uint_eq(atomic_load(&ls.accepted), n);
    ck_assert_int_eq(mely_listener_close(ls.l), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

static void *stop_when_accepted(void *arg)
{
    unsigned n = (unsigned)(uintptr_t)arg;
    if (!wait_count(&ls.accepted, n, 10000))
        note("%u of %u connections made before mely_run() accepted", atomic_load(&ls.accepted), n);
    mely_stop(&rt);
    return NULL;
}

/* Clients that connected before mely_run() (the kernel completed their
 * handshakes) are accepted once it runs. */
START_TEST(connections_before_run_are_accepted)
{
    int fds[10];
    start(2, 1, NULL, 0, 0);
    for (int i = 0; i < NELEM(fds); i++) {
        fds[i] = client(ls.port, AF_INET);
        ck_assert_msg(fds[i] >= 0, "connect: %s", strerror(-fds[i]));
    }
    run_with_helper(&rt, stop_when_accepted, (void *)(uintptr_t)NELEM(fds), 30, "before run");
    ck_assert_uint_eq(atomic_load(&ls.accepted), NELEM(fds));
    for (int i = 0; i < NELEM(fds); i++)
        close(fds[i]);
    ck_assert_int_eq(mely_listener_close(ls.l), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

static const struct {
    unsigned workers;
    int pin;
} rp_shapes[] = {{2, 1}, {8, 0}};

/*
 * MELY_LISTEN_REUSEPORT: a socket per worker, accepting on the worker's
 * pinned color; 200 connections reach every worker (the kernel hashes each
 * connection to one socket: with 8 workers, one left out has a probability
 * under 1e-11).
 */
START_TEST(reuseport_spreads_accepts_over_workers)
{
    unsigned w = rp_shapes[_i].workers, n = MANY;
    start(w, rp_shapes[_i].pin, NULL, 0, MELY_LISTEN_REUSEPORT);
    run_with_helper(&rt, connect_many, (void *)(uintptr_t)n, 60, "reuseport");
    ck_assert_uint_eq(atomic_load(&ls.accepted), n);
    printf("reuseport, %u workers:", w);
    for (unsigned i = 0; i < w; i++)
        printf(" %u", atomic_load(&ls.per_worker[i]));
    printf(" accepts\n");
    for (unsigned i = 0; i < w; i++)
        ck_assert_msg(atomic_load(&ls.per_worker[i]) > 0, "worker %u accepted none of %u", i, n);
    ck_assert_int_eq(mely_listener_close(ls.l), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- closing ------------------------------------------------------------------------------------ */

static void *close_driver(void *arg)
{
    (void)arg;
    int fd = client(ls.port, ls.family);
    if (fd < 0 || !wait_count(&ls.accepted, 1, 5000)) {
        note("the first connection was not accepted");
        goto out;
    }
    close(fd);
    int err = mely_listener_close(ls.l);
    if (err)
        note("mely_listener_close: %s", mely_strerror(err));
    atomic_store(&ls.listener_closed, true);
    fd = client(ls.port, ls.family);
    if (fd >= 0) {
        note("connect after mely_listener_close() succeeded");
        close(fd);
    } else if (fd != -ECONNREFUSED) {
        note("connect after mely_listener_close(): %s (expected ECONNREFUSED)", strerror(-fd));
    }
    sleep_us(50000);
out:
    mely_stop(&rt);
    return NULL;
}

/*
 * mely_listener_close() from a foreign thread (one socket, and one per worker
 * with REUSEPORT): a new connect is refused, and no accept handler starts
 * afterwards.
 */
START_TEST(close_stops_accepting)
{
    start(2, 1, NULL, 0, _i ? MELY_LISTEN_REUSEPORT : 0);
    run_with_helper(&rt, close_driver, NULL, 30, "listener close");
    ck_assert_uint_eq(atomic_load(&ls.accepted), 1);
    ck_assert_uint_eq(atomic_load(&ls.closed_after), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- pausing ---------------------------------------------------------------------------------- */

enum { HELD = 10 };

static struct {
    unsigned held_accepted; /* accepts seen while paused (the first, and what
                               a running accept loop may still take) */
    int paused, resumed;    /* mely_listener_paused() after each */
    int err;
} pz;

/* One client is accepted; with the listener paused (by us, or by the handler
 * at that first accept), HELD more connect (the kernel's backlog completes
 * them) but are not accepted for 200 ms; after resume all are. */
static void *pause_driver(void *arg)
{
    (void)arg;
    int fds[HELD + 1], n = 0;
    fds[n] = client(ls.port, ls.family);
    if (fds[n] < 0 || !wait_count(&ls.accepted, 1, 5000)) {
        note("the first connection was not accepted");
        goto out;
    }
    n++;
    if (!ls.pause_in_handler) {
        pz.err = mely_listener_pause(ls.l);
        if (!pz.err)
            pz.err = mely_listener_pause(ls.l); /* a second pause does nothing */
    }
    pz.paused = mely_listener_paused(ls.l);
    for (; n <= HELD; n++)
        if ((fds[n] = client(ls.port, ls.family)) < 0) {
            note("client %d: connect while paused: %s", n, strerror(-fds[n]));
            goto out;
        }
    sleep_us(200000);
    pz.held_accepted = atomic_load(&ls.accepted);
    if (!pz.err)
        pz.err = mely_listener_resume(ls.l);
    pz.resumed = mely_listener_paused(ls.l);
    if (!wait_count(&ls.accepted, HELD + 1, 10000))
        note("%u of %d held connections accepted 10 s after resume", atomic_load(&ls.accepted),
             HELD + 1);
out:
    for (int i = 0; i < n; i++)
        close(fds[i]);
    mely_stop(&rt);
    return NULL;
}

/* _i: 0 paused from a foreign thread, 1 from the accept handler; 2, 3: the
 * same with one socket per worker. */
START_TEST(pause_holds_connections_until_resume)
{
    start(2, 1, NULL, 0, _i >= 2 ? MELY_LISTEN_REUSEPORT : 0);
    ls.pause_in_handler = _i & 1;
    memset(&pz, 0, sizeof(pz));
    ck_assert_int_eq(mely_listener_paused(ls.l), 0);
    run_with_helper(&rt, pause_driver, NULL, 30, "listener pause");
    ck_assert_msg(pz.err == 0, "pause/resume: %s", mely_strerror(pz.err));
    ck_assert_int_eq(pz.paused, 1);
    ck_assert_int_eq(pz.resumed, 0);
    /* Paused from another thread, an accept loop already running may still
     * take one connection per socket (mely.h): under TSan's slowness it does. */
    unsigned slack = ls.pause_in_handler ? 0 : (_i >= 2 ? 2 : 1);
    ck_assert_msg(pz.held_accepted >= 1 && pz.held_accepted <= 1 + slack,
                  "%u accepts while paused (expected the first, and at most %u more)",
                  pz.held_accepted, slack);
    ck_assert_uint_eq(atomic_load(&ls.accepted), HELD + 1);
    ck_assert_int_eq(mely_listener_pause(NULL), MELY_EINVAL);
    ck_assert_int_eq(mely_listener_resume(NULL), MELY_EINVAL);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

enum { QUEUED_CLIENTS = 20 };

static struct {
    int fds[QUEUED_CLIENTS];
    unsigned dropped; /* clients that saw EOF or a reset */
} qc;

static void *drop_driver(void *arg)
{
    (void)arg;
    if (!wait_count(&ls.accepted, 1, 5000))
        note("nothing accepted");
    sleep_us(50000); /* more accept handlers would run now */
    /* Every client was either accepted (and closed) or dropped: each sees
     * EOF or a reset. */
    for (int i = 0; i < QUEUED_CLIENTS; i++) {
        struct pollfd p = {.fd = qc.fds[i], .events = POLLIN};
        char b;
        if (poll(&p, 1, 2000) == 1 && read(qc.fds[i], &b, 1) <= 0)
            qc.dropped++;
    }
    mely_stop(&rt);
    return NULL;
}

/*
 * Twenty clients queued before mely_run(); the first accept handler closes
 * the listener: no other accept handler runs, and every other client's
 * connection is closed (EOF or reset), not left hanging.
 */
START_TEST(close_from_the_accept_handler)
{
    start(2, 1, NULL, 0, 0);
    ls.close_in_handler = true;
    for (int i = 0; i < QUEUED_CLIENTS; i++) {
        qc.fds[i] = client(ls.port, AF_INET);
        ck_assert_msg(qc.fds[i] >= 0, "connect: %s", strerror(-qc.fds[i]));
    }
    run_with_helper(&rt, drop_driver, NULL, 30, "close from the accept handler");
    ck_assert_uint_eq(atomic_load(&ls.accepted), 1);
    ck_assert_uint_eq(atomic_load(&ls.closed_after), 0);
    ck_assert_uint_eq(qc.dropped, QUEUED_CLIENTS);
    for (int i = 0; i < QUEUED_CLIENTS; i++)
        close(qc.fds[i]);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- errors ----------------------------------------------------------------------------------- */

static void nop_accept(int fd, const struct sockaddr *peer, unsigned peerlen, void *arg)
{
    (void)peer;
    (void)peerlen;
    (void)arg;
    close(fd);
}

/*
 * A port in use: by another listener (-EADDRINUSE without REUSEPORT), by a
 * plain listening socket (also with REUSEPORT: it did not opt in). Bad hosts
 * (names, malformed, empty), flags, NULL fn or out: MELY_EINVAL; an address
 * that is not local: -EADDRNOTAVAIL; bad color or priority; an
 * uninitialized runtime; a NULL listener.
 */
START_TEST(listen_errors)
{
    mely_t none = {0};
    mely_listener_t *l = NULL, *l2 = NULL;
    ck_assert_int_eq(mely_listen(&none, NULL, 0, 0, 0, MELY_TO(1), nop_accept, NULL, &l),
                     MELY_ESHUTDOWN);
    ck_assert_int_eq(mely_listener_close(NULL), MELY_EINVAL);
    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);

    ck_assert_int_eq(mely_listen(&rt, NULL, 0, 0, 0, MELY_TO(1), nop_accept, NULL, &l), 0);
    unsigned port = mely_listener_port(l);
    ck_assert_int_eq(mely_listen(&rt, NULL, port, 0, 0, MELY_TO(1), nop_accept, NULL, &l2),
                     -EADDRINUSE);
    ck_assert_int_eq(mely_listen(&rt, "127.0.0.1", port, 0, 0, MELY_TO(1), nop_accept, NULL, &l2),
                     -EADDRINUSE);
    ck_assert_int_eq(mely_listener_close(l), 0);

    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(fd, 8), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    port = ntohs(a.sin_port);
    for (unsigned flags = 0; flags <= MELY_LISTEN_REUSEPORT; flags++)
        ck_assert_int_eq(
            mely_listen(&rt, NULL, port, 0, flags, MELY_TO(1), nop_accept, NULL, &l2), -EADDRINUSE);
    close(fd);

    static const char *const bad_hosts[] = {"localhost", "300.1.1.1", "", "127.0.0.1:80", "::1::2",
                                            "1.2.3"};
    for (int i = 0; i < NELEM(bad_hosts); i++)
        ck_assert_msg(mely_listen(&rt, bad_hosts[i], 0, 0, 0, MELY_TO(1), nop_accept, NULL, &l2) ==
                          MELY_EINVAL,
                      "host \"%s\" accepted", bad_hosts[i]);
    ck_assert_int_eq(mely_listen(&rt, "192.0.2.1", 0, 0, 0, MELY_TO(1), nop_accept, NULL, &l2),
                     -EADDRNOTAVAIL);
    ck_assert_int_eq(mely_listen(&rt, NULL, 0, 0, 0x2, MELY_TO(1), nop_accept, NULL, &l2),
                     MELY_EINVAL);
    ck_assert_int_eq(mely_listen(&rt, NULL, 0, 0, 0, MELY_TO(1), NULL, NULL, &l2), MELY_EINVAL);
    ck_assert_int_eq(mely_listen(&rt, NULL, 0, 0, 0, MELY_TO(1), nop_accept, NULL, NULL),
                     MELY_EINVAL);
    ck_assert_int_eq(
        mely_listen(&rt, NULL, 0, 0, 0, MELY_TO(MELY_COLOR_PINNED(2)), nop_accept, NULL, &l2),
        MELY_ECOLOR);
    mely_to_t bad_prio = {1, MELY_PRIO_MAX + 1, NULL};
    ck_assert_int_eq(mely_listen(&rt, NULL, 0, 0, 0, bad_prio, nop_accept, NULL, &l2), MELY_EPRIO);
    ck_assert_ptr_eq(l2, NULL);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

/* ---- IPv6 ----------------------------------------------------------------------------------- */

/* Whether this host can listen on ::1. */
static bool have_ipv6_loopback(void)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    bool ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return ok;
}

/*
 * "::1" where the host can bind it (asserted then; said so on stdout
 * otherwise): connections over IPv6 are accepted, the peer an AF_INET6
 * address of sizeof(struct sockaddr_in6).
 */
START_TEST(ipv6_loopback)
{
    if (!have_ipv6_loopback()) {
        printf("ipv6_loopback: this host cannot bind ::1 (no IPv6 on loopback): not tested\n");
        return;
    }
    start(2, 1, "::1", 0, 0);
    run_with_helper(&rt, connect_many, (void *)(uintptr_t)20, 30, "IPv6");
    ck_assert_uint_eq(atomic_load(&ls.accepted), 20);
    ck_assert_int_eq(mely_listener_close(ls.l), 0);
    ck_assert_int_eq(mely_shutdown(&rt), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("listen");

    TCase *tc = new_tcase(s, "accept", 60);
    tcase_add_loop_test(tc, accepts_every_connection, 0, 2);
    tcase_add_test(tc, connections_before_run_are_accepted);
    tcase_add_loop_test(tc, reuseport_spreads_accepts_over_workers, 0, NELEM(rp_shapes));
    tcase_add_test(tc, ipv6_loopback);

    tc = new_tcase(s, "close", 60);
    tcase_add_loop_test(tc, close_stops_accepting, 0, 2);
    tcase_add_test(tc, close_from_the_accept_handler);
    tcase_add_test(tc, listen_errors);

    tc = new_tcase(s, "pause", 60);
    tcase_add_loop_test(tc, pause_holds_connections_until_resume, 0, 4);
    return mely_test_main(s);
}
