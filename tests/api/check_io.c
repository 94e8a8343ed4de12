/* SPDX-License-Identifier: MIT */
/*
 * check_io.c: fd watches under load, through the public API (include/mely/mely.h),
 * on an echo server written the way SWS writes one: mely_listen() accepts,
 * every connection gets a read watch colored with its fd (MELY_TO(fd)), the
 * handler echoes with non-blocking writes, keeps what the socket does not take
 * in a per-connection buffer and watches for MELY_WRITE until it is drained.
 *  - 1,000 concurrent connections x 100 messages, every byte checked (the
 *    clients are a plain thread with its own epoll loop), with stealing off,
 *    "base" and "all" on 2 pinned workers, and fewer on 8 unpinned workers;
 *  - a reader that does not read: the write watch carries megabytes, and an
 *    EOF that arrives while output waits closes only once it is drained;
 *  - 1,000 idle watched connections cost (almost) no CPU;
 *  - out of descriptors (EMFILE): the listener pauses instead of spinning,
 *    and serves again once descriptors are free.
 * The semantics of single watches (queued once, removal, moves, one-shot,
 * mely_close, errors) are in check_watch.c.
 *
 * Handlers and helper threads never call ck_assert; every wait is bounded;
 * MELY_TEST_SCALE scales the counts (see tests/testutil.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mely/mely.h>
#include "tests/testutil.h"

/* ---- the shapes ---------------------------------------------------------------------- */

/* The echo server's shapes: the brief's 2 pinned workers with stealing off,
 * "base" and "all", the legacy engine once, and 8 unpinned workers (4x
 * oversubscribed) with fewer connections. */
static const struct shape io_shapes[] = {
    {.workers = 2, .pin = 1},
    {.workers = 2, .pin = 1, .steal = "base"},
    {.workers = 2, .pin = 1, .steal = "all"},
    {.workers = 2, .pin = 1, .steal = "base", .engine = "legacy"},
    {.workers = 8, .pin = 0},
    {.workers = 8, .pin = 0, .steal = "all"},
};

/* ---- the echo server ------------------------------------------------------------------- */

/* The listener's color: above every descriptor number the tests open. */
#define LISTEN_COLOR ((mely_color_t)(MELY_COLORS - 1))

/* Worthy under the time-left policies ("all"), so that connections get stolen
 * there too: with no annotation they would never move. */
static const mely_handler_t d_echo = {.name = "echo", .timeleft = 10000000};

struct conn {
    int fd;
    atomic_int inside;   /* this connection's handlers running now: at most 1 */
    mely_watch_t *rw;    /* the read watch; NULL once EOF came with output waiting */
    mely_watch_t *ww;    /* the write watch while output waits */
    char *out;           /* output the socket did not take: out[ooff..olen) */
    size_t olen, ooff, ocap;
    bool eof;
};

static struct {
    mely_t m;
    mely_listener_t *l;
    atomic_uint accepted, closed, write_watches;
    atomic_uint_fast64_t echoed; /* bytes read (and so echoed) */
    int sockbuf;                 /* > 0: accepted sockets' buffer sizes */
} srv;

static mely_to_t conn_to(int fd)
{
    return (mely_to_t){(mely_color_t)fd, MELY_PRIO_DEFAULT, &d_echo};
}

/* Every handler of a connection runs as its color, one at a time. */
static void conn_enter(struct conn *c, const char *who)
{
    if (atomic_fetch_add(&c->inside, 1) != 0)
        note("%s of fd %d: another handler of the connection is running", who, c->fd);
    if (mely_current_color() != c->fd)
        note("%s of fd %d ran as color %d", who, c->fd, mely_current_color());
}

static void conn_leave(struct conn *c)
{
    atomic_fetch_sub(&c->inside, 1);
}

/* Removes the connection's watches, closes it and frees it (from its own
 * color: the removal is synchronous, nothing of it runs any more). */
static void conn_close(struct conn *c)
{
    int err = mely_close(&srv.m, c->fd);
    if (err)
        note("mely_close(%d): %s", c->fd, mely_strerror(err));
    conn_leave(c);
    free(c->out);
    free(c);
    atomic_fetch_add(&srv.closed, 1);
}

static void on_write(int fd, unsigned ready, void *arg);

/* Keeps out[0..n) for the write watch. */
static void conn_keep(struct conn *c, const char *data, size_t n)
{
    if (c->olen + n > c->ocap) {
        size_t cap = c->ocap ? c->ocap : 4096;
        while (cap < c->olen + n)
            cap *= 2;
        char *p = realloc(c->out, cap);
        if (!p) {
            note("fd %d: out of memory for %zu bytes of output", c->fd, cap);
            return;
        }
        c->out = p;
        c->ocap = cap;
    }
    memcpy(c->out + c->olen, data, n);
    c->olen += n;
    if (!c->ww) {
        int err = mely_watch(&srv.m, c->fd, MELY_WRITE, conn_to(c->fd), on_write, c, &c->ww);
        if (err)
            note("write watch on fd %d: %s", c->fd, mely_strerror(err));
        atomic_fetch_add(&srv.write_watches, 1);
    }
}

/* Echoes data: straight to the socket when nothing waits, else behind what does. */
static void conn_send(struct conn *c, const char *data, size_t n)
{
    if (c->olen == c->ooff) {
        c->olen = c->ooff = 0;
        while (n > 0) {
            ssize_t w = write(c->fd, data, n);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0 && errno != EAGAIN) {
                note("write to fd %d: %s", c->fd, strerror(errno));
                return;
            }
            if (w < 0)
                break;
            data += w;
            n -= (size_t)w;
        }
    }
    if (n > 0)
        conn_keep(c, data, n);
}

static void on_write(int fd, unsigned ready, void *arg)
{
    struct conn *c = arg;
    (void)fd;
    conn_enter(c, "write handler");
    if (!(ready & MELY_WRITE))
        note("write handler of fd %d: ready 0x%x", c->fd, ready);
    while (c->ooff < c->olen) {
        ssize_t w = write(c->fd, c->out + c->ooff, c->olen - c->ooff);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            if (errno != EAGAIN)
                note("write to fd %d: %s", c->fd, strerror(errno));
            conn_leave(c);
            return;
        }
        c->ooff += (size_t)w;
    }
    /* Drained: from the watch's own color the removal is synchronous. */
    int err = mely_watch_remove(c->ww);
    if (err)
        note("removing the write watch of fd %d: %s", c->fd, mely_strerror(err));
    c->ww = NULL;
    c->olen = c->ooff = 0;
    if (c->eof)
        conn_close(c);
    else
        conn_leave(c);
}

/* Reads what is there (a few chunks per run: the watch is level-triggered and
 * comes back) and echoes it; at EOF closes, or once the output is drained. */
static void on_read(int fd, unsigned ready, void *arg)
{
    struct conn *c = arg;
    char buf[16384];
    (void)fd;
    conn_enter(c, "read handler");
    if (!(ready & MELY_READ))
        note("read handler of fd %d: ready 0x%x", c->fd, ready);
    for (int chunk = 0; chunk < 4; chunk++) {
        ssize_t n = read(c->fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0) {
            if (n < 0 && errno != ECONNRESET)
                note("read from fd %d: %s", c->fd, strerror(errno));
            c->eof = true;
            break;
        }
        atomic_fetch_add(&srv.echoed, (uint64_t)n);
        conn_send(c, buf, (size_t)n);
    }
    if (c->eof && c->olen == c->ooff) {
        conn_close(c);
        return;
    }
    if (c->eof && c->rw) {
        /* Readable for ever at EOF: stop reading while the output drains. */
        int err = mely_watch_remove(c->rw);
        if (err)
            note("removing the read watch of fd %d: %s", c->fd, mely_strerror(err));
        c->rw = NULL;
    }
    conn_leave(c);
}

/* The connection's first event, in its own color: every access to c->rw and
 * c->ww happens in that color. */
static void conn_start(void *arg)
{
    struct conn *c = arg;
    conn_enter(c, "start");
    int err = mely_watch(&srv.m, c->fd, MELY_READ, conn_to(c->fd), on_read, c, &c->rw);
    if (err) {
        note("read watch on fd %d: %s", c->fd, mely_strerror(err));
        conn_close(c);
        return;
    }
    conn_leave(c);
}

static void on_accept(int fd, const struct sockaddr *peer, unsigned peerlen, void *arg)
{
    (void)arg;
    if (mely_current_color() != (int)LISTEN_COLOR)
        note("accept handler ran as color %d", mely_current_color());
    if (!peer || peerlen != sizeof(struct sockaddr_in) || peer->sa_family != AF_INET)
        note("accept: peer %p of length %u", (const void *)peer, peerlen);
    struct conn *c = calloc(1, sizeof(*c));
    if (!c) {
        note("accept: out of memory");
        close(fd);
        return;
    }
    c->fd = fd;
    if (srv.sockbuf > 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &srv.sockbuf, sizeof(srv.sockbuf));
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &srv.sockbuf, sizeof(srv.sockbuf));
    }
    atomic_fetch_add(&srv.accepted, 1);
    int err = mely_post_ex(&srv.m, (mely_color_t)fd, MELY_PRIO_DEFAULT, &d_echo, conn_start, c, 0);
    if (err) {
        note("post to color %d: %s", fd, mely_strerror(err));
        free(c);
        close(fd);
    }
}

/* A runtime in shape sh with the echo server listening on a free port of
 * 127.0.0.1; returns the port. */
static unsigned start_server(const struct shape *sh)
{
    memset(&srv, 0, sizeof(srv));
    init_runtime_shape(&srv.m, sh, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    int err = mely_listen(&srv.m, NULL, 0, 0, 0, MELY_TO(LISTEN_COLOR), on_accept, NULL, &srv.l);
    ck_assert_msg(err == 0, "mely_listen: %s", mely_strerror(err));
    unsigned port = mely_listener_port(srv.l);
    ck_assert_msg(port > 0 && port < 65536, "mely_listener_port: %u", port);
    return port;
}

static void stop_server(void)
{
    ck_assert_int_eq(mely_listener_close(srv.l), 0);
    ck_assert_int_eq(mely_shutdown(&srv.m), 0);
}

/* ---- what the clients send ------------------------------------------------------------------ */

/* The byte at position p of connection i's stream: distinct content per
 * connection and per message (each message is a stretch of the stream). */
static inline uint8_t stream_byte(unsigned i, uint64_t p)
{
    uint64_t x = ((uint64_t)i << 40) ^ p;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    return (uint8_t)x;
}

enum { MSG_MAX = 300 };

/* Message k of connection i: 1 .. MSG_MAX bytes. */
static unsigned msg_len(unsigned i, unsigned k)
{
    return 1 + (stream_byte(i, k) * 7u + k) % MSG_MAX;
}

/* A non-blocking connection to the server; buf > 0 caps its send and receive
 * buffers (before connecting, so that the window follows). */
static int connect_nb_buf(unsigned port, int buf)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (buf > 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

static int connect_nb(unsigned port)
{
    return connect_nb_buf(port, 0);
}

/* ---- 1,000 clients on one epoll loop ---------------------------------------------------------- */

/* Each connection keeps up to WINDOW messages in flight: enough for echoes to
 * arrive split and merged, bounded so that the server's buffers stay small. */
enum { WINDOW = 4, CONNECTING_MAX = 64, ECHO_LIMIT_S = 60 };

enum cstate { C_IDLE, C_CONNECTING, C_ACTIVE, C_DONE };

struct client {
    int fd;
    enum cstate state;
    unsigned sent_msgs, rcvd_msgs;   /* messages queued for sending, fully echoed */
    uint64_t sent, send_end;         /* bytes written, bytes allowed so far */
    uint64_t rcvd, rcvd_end;         /* bytes echoed, end of message rcvd_msgs */
};

static struct {
    struct client *c;
    unsigned n, msgs, port;
    unsigned done, connecting, next;
    uint64_t bytes;
} cl;

static void client_fail(unsigned i, const char *fmt, const char *detail)
{
    note(fmt, i, detail);
    close(cl.c[i].fd);
    cl.c[i].state = C_DONE;
    cl.done++;
}

/* Opens connections while fewer than CONNECTING_MAX handshakes are under way. */
static void client_open_more(int ep)
{
    while (cl.next < cl.n && cl.connecting < CONNECTING_MAX) {
        unsigned i = cl.next++;
        int fd = connect_nb(cl.port);
        if (fd < 0) {
            note("client %u: connect: %s", i, strerror(-fd));
            cl.c[i].state = C_DONE;
            cl.done++;
            continue;
        }
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.u32 = i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
            note("client %u: epoll_ctl: %s", i, strerror(errno));
        cl.c[i] = (struct client){.fd = fd, .state = C_CONNECTING, .rcvd_end = msg_len(i, 0)};
        cl.connecting++;
    }
}

/* Reads and checks every echoed byte; false after a failure. */
static bool client_read(unsigned i)
{
    struct client *c = &cl.c[i];
    uint8_t buf[16384];
    for (;;) {
        ssize_t n = read(c->fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return true;
        if (n <= 0) {
            client_fail(i, "client %u: %s before the last echo", n == 0 ? "EOF" : strerror(errno));
            return false;
        }
        if (c->rcvd + (uint64_t)n > c->sent) {
            client_fail(i, "client %u: %s", "more bytes echoed than sent");
            return false;
        }
        for (ssize_t j = 0; j < n; j++) {
            if (buf[j] != stream_byte(i, c->rcvd + (uint64_t)j)) {
                char what[96];
                snprintf(what, sizeof(what), "byte %" PRIu64 " (message %u) is %u, expected %u",
                         c->rcvd + (uint64_t)j, c->rcvd_msgs, buf[j],
                         stream_byte(i, c->rcvd + (uint64_t)j));
                client_fail(i, "client %u: %s", what);
                return false;
            }
        }
        c->rcvd += (uint64_t)n;
        cl.bytes += (uint64_t)n;
        while (c->rcvd_msgs < cl.msgs && c->rcvd >= c->rcvd_end) {
            c->rcvd_msgs++;
            if (c->rcvd_msgs < cl.msgs)
                c->rcvd_end += msg_len(i, c->rcvd_msgs);
        }
    }
}

/* Writes what the window allows, until EAGAIN (the edge-triggered EPOLLOUT
 * brings us back). */
static bool client_write(unsigned i)
{
    struct client *c = &cl.c[i];
    uint8_t buf[4096];
    while (c->sent_msgs < cl.msgs && c->sent_msgs < c->rcvd_msgs + WINDOW)
        c->send_end += msg_len(i, c->sent_msgs++);
    while (c->sent < c->send_end) {
        size_t n = c->send_end - c->sent < sizeof(buf) ? c->send_end - c->sent : sizeof(buf);
        for (size_t j = 0; j < n; j++)
            buf[j] = stream_byte(i, c->sent + j);
        ssize_t w = write(c->fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return true;
        if (w < 0) {
            client_fail(i, "client %u: write: %s", strerror(errno));
            return false;
        }
        c->sent += (uint64_t)w;
    }
    return true;
}

static void client_event(unsigned i, uint32_t events)
{
    struct client *c = &cl.c[i];
    if (c->state == C_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err || (events & (EPOLLERR | EPOLLHUP))) {
            cl.connecting--;
            client_fail(i, "client %u: connect: %s", strerror(err ? err : ECONNRESET));
            return;
        }
        if (!(events & EPOLLOUT))
            return;
        c->state = C_ACTIVE;
        cl.connecting--;
    }
    if (c->state != C_ACTIVE)
        return;
    /* Read first: echoes open the window for more messages. */
    if (!client_read(i) || !client_write(i))
        return;
    if (c->rcvd_msgs == cl.msgs) {
        close(c->fd);
        c->state = C_DONE;
        cl.done++;
    }
}

/* The clients' thread: n connections x msgs messages, then waits for the
 * server to close them all, and stops the runtime. */
static void *echo_clients(void *arg)
{
    (void)arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) {
        note("epoll_create1: %s", strerror(errno));
        mely_stop(&srv.m);
        return NULL;
    }
    uint64_t deadline = now_ns() + ECHO_LIMIT_S * 1000000000ull;
    struct epoll_event evs[256];
    client_open_more(ep);
    while (cl.done < cl.n && now_ns() < deadline) {
        int k = epoll_wait(ep, evs, NELEM(evs), 100);
        for (int e = 0; e < k; e++)
            client_event(evs[e].data.u32, evs[e].events);
        client_open_more(ep);
    }
    if (cl.done < cl.n) {
        unsigned worst = 0;
        for (unsigned i = 0; i < cl.n; i++)
            if (cl.c[i].state != C_DONE && cl.c[i].rcvd_msgs <= cl.c[worst].rcvd_msgs)
                worst = i;
        note("%u of %u connections done after %d s; connection %u (state %d): %u of %u echoes, "
             "%" PRIu64 " of %" PRIu64 " bytes back",
             cl.done, cl.n, ECHO_LIMIT_S, worst, cl.c[worst].state, cl.c[worst].rcvd_msgs, cl.msgs,
             cl.c[worst].rcvd, cl.c[worst].sent);
        for (unsigned i = 0; i < cl.n; i++)
            if (cl.c[i].state == C_ACTIVE || cl.c[i].state == C_CONNECTING)
                close(cl.c[i].fd);
    } else if (!wait_count(&srv.closed, cl.n, 10000)) {
        note("the server closed %u of %u connections within 10 s of the clients' close",
             atomic_load(&srv.closed), cl.n);
    }
    close(ep);
    mely_stop(&srv.m);
    return NULL;
}

/* Descriptors for n connections (both ends in this process) and the runtime;
 * fewer connections (but at least 100) where the hard limit is lower. */
static unsigned connections_for_fd_limit(unsigned n)
{
    unsigned limit = raise_fd_limit(2 * n + 200);
    if (limit < 2 * n + 200) {
        unsigned fit = limit > 400 ? (limit - 200) / 2 : 100;
        printf("RLIMIT_NOFILE is %u: %u connections instead of %u\n", limit, fit, n);
        n = fit;
    }
    ck_assert_msg(n >= 100, "RLIMIT_NOFILE %u leaves room for %u connections", limit, n);
    return n;
}

/*
 * 1,000 concurrent connections (fewer on 8 workers, at least 100 under the
 * sanitizers) x 100 messages of 1 to 300 bytes, up to 4 in flight per
 * connection: every byte comes back, in order, on the connection it was sent
 * on; every handler of a connection runs in its fd's color, one at a time;
 * the server closes every connection at EOF.
 */
START_TEST(echo_server_many_connections)
{
    const struct shape *sh = &io_shapes[_i];
    unsigned full = sh->workers > 2 ? 400 : 1000;

    memset(&cl, 0, sizeof(cl));
    cl.n = connections_for_fd_limit(scaled(full, 100, 100000));
    cl.msgs = scaled(100, 20, 10000);
    cl.c = calloc(cl.n, sizeof(*cl.c));
    ck_assert_ptr_nonnull(cl.c);
    cl.port = start_server(sh);

    uint64_t t0 = now_ns();
    run_with_helper(&srv.m, echo_clients, NULL, ECHO_LIMIT_S + 30, shape_name(sh));
    double secs = (now_ns() - t0) / 1e9;

    ck_assert_uint_eq(cl.done, cl.n);
    ck_assert_uint_eq(atomic_load(&srv.accepted), cl.n);
    ck_assert_uint_eq(atomic_load(&srv.closed), cl.n);
    ck_assert_uint_eq(atomic_load(&srv.echoed), cl.bytes);
    mely_stats_t sum = {0};
    for (unsigned w = 0; w < sh->workers; w++) {
        mely_stats_t st;
        ck_assert_int_eq(mely_worker_stats(&srv.m, w, &st), 0);
        sum.io_ready += st.io_ready;
        sum.steals += st.steals;
        sum.watch_moves += st.watch_moves;
        sum.polls += st.polls;
    }
    ck_assert_msg(sum.io_ready >= cl.n, "%s: io_ready %" PRIu64 " for %u connections",
                  shape_name(sh), sum.io_ready, cl.n);
    printf("echo (%s): %u connections x %u messages, %" PRIu64 " bytes in %.2f s; io_ready %" PRIu64
           ", polls %" PRIu64 ", steals %" PRIu64 ", watch_moves %" PRIu64
           ", write watches %u\n",
           shape_name(sh), cl.n, cl.msgs, cl.bytes, secs, sum.io_ready, sum.polls, sum.steals,
           sum.watch_moves, atomic_load(&srv.write_watches));
    free(cl.c);
    stop_server();
}
END_TEST

/* ---- a reader that does not read ---------------------------------------------------------------- */

enum { SLOW_CONNS = 4 };

static struct {
    unsigned port;
    uint64_t bytes; /* per connection */
    bool shut_first;
} slow;

/* Waits for fd to be ready for `events`, at most `ms`; false on timeout. */
static bool wait_fd(int fd, short events, int ms)
{
    struct pollfd p = {.fd = fd, .events = events};
    int k;
    while ((k = poll(&p, 1, ms)) < 0 && errno == EINTR) {
    }
    return k > 0;
}

/* Sends all of `slow.bytes` on each connection before reading any echo, then
 * (with shut_first) shuts the sending side, then reads and checks. */
static bool slow_client(unsigned i, int fd)
{
    uint8_t buf[65536];
    uint64_t sent = 0, rcvd = 0;
    while (sent < slow.bytes) {
        size_t n = slow.bytes - sent < sizeof(buf) ? slow.bytes - sent : sizeof(buf);
        for (size_t j = 0; j < n; j++)
            buf[j] = stream_byte(i, sent + j);
        ssize_t w = write(fd, buf, n);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (!wait_fd(fd, POLLOUT, 10000)) {
                note("slow client %u: the server stopped reading after %" PRIu64 " bytes", i, sent);
                return false;
            }
            continue;
        }
        if (w < 0) {
            note("slow client %u: write: %s", i, strerror(errno));
            return false;
        }
        sent += (uint64_t)w;
    }
    if (slow.shut_first)
        shutdown(fd, SHUT_WR);
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (!wait_fd(fd, POLLIN, 10000)) {
                note("slow client %u: no echo for 10 s after %" PRIu64 " bytes", i, rcvd);
                return false;
            }
            continue;
        }
        if (n < 0) {
            note("slow client %u: read: %s", i, strerror(errno));
            return false;
        }
        if (n == 0)
            break;
        for (ssize_t j = 0; j < n; j++)
            if (buf[j] != stream_byte(i, rcvd + (uint64_t)j)) {
                note("slow client %u: byte %" PRIu64 " differs", i, rcvd + (uint64_t)j);
                return false;
            }
        rcvd += (uint64_t)n;
        if (!slow.shut_first && rcvd == slow.bytes)
            break;
    }
    if (rcvd != slow.bytes)
        note("slow client %u: %" PRIu64 " of %" PRIu64 " bytes echoed before EOF", i, rcvd,
             slow.bytes);
    return rcvd == slow.bytes;
}

static void *slow_clients(void *arg)
{
    (void)arg;
    int fds[SLOW_CONNS];
    for (unsigned i = 0; i < SLOW_CONNS; i++) {
        /* Small buffers on the client: it cannot finish writing before
         * the server has read nearly all of it, and until then it reads
         * nothing, so the server's echo (megabytes more than its send
         * buffer and this receive buffer hold) must hit EAGAIN. Loopback
         * buffers otherwise grow to megabytes and could absorb it all. */
        fds[i] = connect_nb_buf(slow.port, 65536);
        if (fds[i] < 0 || !wait_fd(fds[i], POLLOUT, 5000))
            note("slow client %u: no connection", i);
    }
    for (unsigned i = 0; i < SLOW_CONNS; i++)
        if (fds[i] >= 0 && !slow_client(i, fds[i]))
            break;
    for (unsigned i = 0; i < SLOW_CONNS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (!wait_count(&srv.closed, SLOW_CONNS, 10000))
        note("the server closed %u of %u connections", atomic_load(&srv.closed), SLOW_CONNS);
    mely_stop(&srv.m);
    return NULL;
}

/*
 * Each client writes 16 MB (at least 8 under the sanitizers) before it reads:
 * the server's writes hit EAGAIN, its write watch carries the rest. With
 * shut_first the client's EOF reaches the server while output waits: the
 * server stops reading, drains, then closes (the client reads all, then EOF).
 */
START_TEST(write_watch_carries_a_slow_reader)
{
    memset(&slow, 0, sizeof(slow));
    slow.shut_first = _i % 2;
    slow.bytes = (uint64_t)scaled(16u << 20, 8u << 20, 1u << 30);
    slow.port = start_server(&io_shapes[_i / 2 ? 2 : 0]);
    srv.sockbuf = 65536; /* the server's side too (see slow_clients) */
    run_with_helper(&srv.m, slow_clients, NULL, 120, "slow reader");
    ck_assert_uint_eq(atomic_load(&srv.closed), SLOW_CONNS);
    ck_assert_uint_eq(atomic_load(&srv.echoed), SLOW_CONNS * slow.bytes);
    printf("slow reader (%s): %u x %" PRIu64 " bytes echoed through %u write watches\n",
           slow.shut_first ? "EOF first" : "reads after writing", SLOW_CONNS, slow.bytes,
           atomic_load(&srv.write_watches));
    ck_assert_msg(atomic_load(&srv.write_watches) >= SLOW_CONNS,
                  "%u write watches for %u connections that did not read %" PRIu64 " bytes",
                  atomic_load(&srv.write_watches), SLOW_CONNS, slow.bytes);
    stop_server();
}
END_TEST

/* ---- idle connections cost nothing -------------------------------------------------------------- */

enum { IDLE_PAIRS = 1000, IDLE_WINDOW_MS = 1000, IDLE_PROBES = 10 };

static struct {
    int (*sv)[2];
    unsigned n;
    mely_watch_t **w;
    atomic_uint runs;
    struct idle_check cpu;
} idl;

static void idle_read(int fd, unsigned ready, void *arg)
{
    char b[16];
    (void)ready;
    (void)arg;
    if (mely_current_color() != fd)
        note("idle watch of fd %d ran as color %d", fd, mely_current_color());
    while (read(fd, b, sizeof(b)) > 0) {
    }
    atomic_fetch_add(&idl.runs, 1);
}

static void *idle_meter(void *arg)
{
    (void)arg;
    /* The workers start, run nothing and park. */
    idl.cpu = idle_against_spinner(200000, IDLE_WINDOW_MS * 1000);
    /* The watches are alive: a few pokes are handled. */
    for (unsigned k = 0; k < IDLE_PROBES; k++)
        if (write(idl.sv[k * (idl.n / IDLE_PROBES)][1], "x", 1) != 1)
            note("poke %u: %s", k, strerror(errno));
    uint64_t deadline = now_ns() + 5000000000ull;
    while (atomic_load(&idl.runs) < IDLE_PROBES && now_ns() < deadline)
        sleep_us(200);
    if (atomic_load(&idl.runs) != IDLE_PROBES)
        note("%u of %u poked idle connections handled within 5 s", atomic_load(&idl.runs),
             IDLE_PROBES);
    mely_stop(&rt);
    return NULL;
}

static const struct shape idle_shapes[] = {
    {.workers = 2, .pin = 1},
    {.workers = 2, .pin = 1, .steal = "all"},
    {.workers = 8, .pin = 0, .steal = "base"},
};

/*
 * 1,000 watched socketpairs (the read ends, colored with their fds), and for
 * a second nothing happens: no thread of the process uses a quarter of what
 * a thread spinning beside them gets (on a quiet machine: well under 1% of
 * a core per worker). Then ten of them are poked and handled.
 */
START_TEST(idle_watches_cost_no_cpu)
{
    const struct shape *sh = &idle_shapes[_i];

    memset(&idl, 0, sizeof(idl));
    idl.n = connections_for_fd_limit(IDLE_PAIRS);
    idl.sv = calloc(idl.n, sizeof(*idl.sv));
    idl.w = calloc(idl.n, sizeof(*idl.w));
    ck_assert(idl.sv && idl.w);
    init_runtime_shape(&rt, sh, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    for (unsigned i = 0; i < idl.n; i++) {
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, idl.sv[i]), 0);
        int fd = idl.sv[i][0];
        int err = mely_watch(&rt, fd, MELY_READ, MELY_TO(fd), idle_read, NULL, &idl.w[i]);
        ck_assert_msg(err == 0, "watch %u: %s", i, mely_strerror(err));
    }
    run_with_helper(&rt, idle_meter, NULL, 60, "idle connections");

    const struct idle_check *c = &idl.cpu;
    double per_worker = c->others_s / c->wall_s / sh->workers * 100;
    printf("idle CPU (%s, %u watched connections): %.1f ms in %.3f s, %.3f%% of a core per "
           "worker; the busiest thread %.2f ms, a spinning thread %.1f ms\n",
           shape_name(sh), idl.n, c->others_s * 1e3, c->wall_s, per_worker, c->busiest_s * 1e3,
           c->spinner_s * 1e3);
    /* Against the machine's figure in the same run (common/measure.h): a
     * worker that polled its watches would get as much CPU as the spinner. */
    ck_assert_msg(c->busiest_s < c->spinner_s / 4,
                  "%s: %u idle watches: a thread used %.1f ms of CPU in %.3f s, a spinning one "
                  "%.1f ms (bound: a quarter of it)",
                  shape_name(sh), idl.n, c->busiest_s * 1e3, c->wall_s, c->spinner_s * 1e3);
    for (unsigned i = 0; i < idl.n; i++) {
        ck_assert_int_eq(mely_watch_remove(idl.w[i]), 0);
        close(idl.sv[i][0]);
        close(idl.sv[i][1]);
    }
    ck_assert_int_eq(mely_shutdown(&rt), 0);
    free(idl.sv);
    free(idl.w);
}
END_TEST

/* ---- out of descriptors ------------------------------------------------------------------------- */

enum { EMFILE_CLIENTS = 40, EMFILE_SPARE = 10, EMFILE_WINDOW_MS = 500 };

static struct {
    unsigned port;
    struct rlimit saved;
    unsigned accepted_at_limit;
    uint64_t pauses0, pauses1;
    struct idle_check cpu;
} ex;

/* One connection sends "ping" and gets it back within 5 s. */
static bool ping(void)
{
    int fd = connect_nb(ex.port);
    if (fd < 0) {
        note("ping: connect: %s", strerror(-fd));
        return false;
    }
    char buf[8];
    bool ok = wait_fd(fd, POLLOUT, 5000) && write(fd, "ping", 4) == 4 && wait_fd(fd, POLLIN, 5000) &&
              read(fd, buf, sizeof(buf)) == 4 && memcmp(buf, "ping", 4) == 0;
    if (!ok)
        note("ping: no echo within 5 s");
    close(fd);
    return ok;
}

static void *emfile_driver(void *arg)
{
    (void)arg;
    int fds[EMFILE_CLIENTS];
    unsigned n = 0;
    if (!ping()) /* the server runs, and this thread's descriptors are counted */
        goto out;
    if (!wait_count(&srv.closed, 1, 5000))
        note("the server did not close the first ping's connection");
    for (; n < EMFILE_CLIENTS; n++) {
        fds[n] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[n] < 0) {
            note("socket: %s", strerror(errno));
            goto out;
        }
    }
    /* Room for EMFILE_SPARE accepted connections, not for all of them. */
    struct rlimit low = ex.saved;
    low.rlim_cur = open_fds() + EMFILE_SPARE;
    if (setrlimit(RLIMIT_NOFILE, &low) != 0) {
        note("setrlimit(%u): %s", (unsigned)low.rlim_cur, strerror(errno));
        goto out;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)ex.port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (unsigned i = 0; i < n; i++)
        if (connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)) != 0)
            note("client %u: connect: %s", i, strerror(errno));
    uint64_t deadline = now_ns() + 5000000000ull;
    while (mely_listener_pauses(srv.l) == 0 && now_ns() < deadline)
        sleep_us(1000);
    ex.pauses0 = mely_listener_pauses(srv.l);
    ex.accepted_at_limit = atomic_load(&srv.accepted);
    if (ex.pauses0 == 0) {
        note("accept never paused: %u of %u connections accepted with %u spare descriptors",
             ex.accepted_at_limit, n, EMFILE_SPARE);
        goto out;
    }
    /* Paused: accepting retries every 100 ms, and nothing spins meanwhile. */
    ex.cpu = idle_against_spinner(0, EMFILE_WINDOW_MS * 1000);
    ex.pauses1 = mely_listener_pauses(srv.l);
    /* The clients close: the server closes their connections, accepts the
     * rest (which close at once), and serves a new one. */
    for (unsigned i = 0; i < n; i++)
        close(fds[i]);
    n = 0;
    if (!wait_count(&srv.closed, 1 + EMFILE_CLIENTS, 10000))
        note("%u of %u connections accepted, %u closed 10 s after the clients closed",
             atomic_load(&srv.accepted), 1 + EMFILE_CLIENTS, atomic_load(&srv.closed));
    ping();
    wait_count(&srv.closed, 2 + EMFILE_CLIENTS, 5000);
out:
    for (unsigned i = 0; i < n; i++)
        close(fds[i]);
    mely_stop(&srv.m);
    return NULL;
}

/*
 * RLIMIT_NOFILE lowered to what is open plus 10, then 40 clients connect:
 * accept hits EMFILE; the listener pauses (mely_listener_pauses() > 0) and
 * retries every 100 ms instead of spinning (bounded pauses and CPU over half a
 * second); once the clients close, the server accepts the rest and serves a
 * new connection, under the same low limit.
 */
START_TEST(accept_pauses_when_out_of_descriptors)
{
    memset(&ex, 0, sizeof(ex));
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &ex.saved), 0);
    ex.port = start_server(&io_shapes[_i]);
    ck_assert_uint_eq(mely_listener_pauses(srv.l), 0);
    run_with_helper(&srv.m, emfile_driver, NULL, 60, "out of descriptors");
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &ex.saved), 0);

    uint64_t pauses = ex.pauses1 - ex.pauses0;
    const struct idle_check *c = &ex.cpu;
    printf("EMFILE (%s): %u accepted at the limit; %" PRIu64 " pauses in %.3f s, %.1f ms CPU "
           "(the busiest thread %.1f ms, a spinning one %.1f ms)\n",
           shape_name(&io_shapes[_i]), ex.accepted_at_limit, pauses, c->wall_s,
           c->others_s * 1e3, c->busiest_s * 1e3, c->spinner_s * 1e3);
    /* Retries every 100 ms of the window as it lasted (a loaded machine
     * stretches the sleep), and no thread spins: under a quarter of what a
     * thread spinning beside them got (common/measure.h). */
    ck_assert_msg(pauses <= (uint64_t)(c->wall_s * 10) + 2,
                  "%" PRIu64 " pauses in %.3f s: accepting should retry every 100 ms", pauses,
                  c->wall_s);
    ck_assert_msg(c->busiest_s < c->spinner_s / 4,
                  "paused accept: a thread used %.1f ms of CPU in %.3f s, a spinning one %.1f ms "
                  "(bound: a quarter of it)",
                  c->busiest_s * 1e3, c->wall_s, c->spinner_s * 1e3);
    ck_assert_uint_eq(atomic_load(&srv.accepted), 2 + EMFILE_CLIENTS);
    ck_assert_uint_eq(atomic_load(&srv.closed), 2 + EMFILE_CLIENTS);
    stop_server();
}
END_TEST

/* ---- the suite ---------------------------------------------------------------------------------- */

int main(void)
{
    Suite *s = suite_create("io");

    TCase *tc = new_tcase(s, "echo", 120);
    tcase_add_loop_test(tc, echo_server_many_connections, 0, NELEM(io_shapes));
    tcase_add_loop_test(tc, write_watch_carries_a_slow_reader, 0, 4);

    tc = new_tcase(s, "idle", 60);
    tcase_add_loop_test(tc, idle_watches_cost_no_cpu, 0, NELEM(idle_shapes));

    tc = new_tcase(s, "emfile", 60);
    tcase_add_loop_test(tc, accept_pauses_when_out_of_descriptors, 0, 3);
    return mely_test_main(s);
}
