/* SPDX-License-Identifier: MIT */
/*
 * check_stream_close.c: the ends of streams (include/mely/stream.h), through the
 * public API over loopback TCP (tests/api/streamtest.h: the server, conns and
 * clients):
 *  - closing from the stream's color while events holding references are
 *    out on other colors; from another color and a foreign thread; with
 *    MELY_STREAM_FLUSH (all sent; or cut by the write timeout); EOF with and
 *    without an event callback; a reset by the peer;
 *  - mely_shutdown with open streams (closed callbacks, fds; referenced
 *    streams freed too); mely_drain (flushing, waiting for the events that
 *    hold references, cut short by its timeout; every request read
 *    answered while work is out on other colors; a drain callback that
 *    finishes the exchange, or is cut by the timeout; reading stopped
 *    without one);
 *  - mely_stream_connect (to a listener of the runtime, and refused);
 *  - argument errors.
 *
 * Handlers and helper threads never call ck_assert; every wait is bounded.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <errno.h>
#include <fcntl.h>
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

#include <event2/buffer.h>

#include "tests/api/streamtest.h"

/* ---- closing while events hold the stream -------------------------------------------------- */

enum { INFLIGHT_CLIENTS = 4, INFLIGHT_REQS = 8 };

struct inflight {
    mely_stream_t *s;
    struct conn *c;
    uint64_t deadline;
};

/* On another color, holding a reference: waits (posting itself again) until
 * the stream's closed callback ran, then uses the stream as a late reply
 * would, and drops its reference (the last one frees the stream). */
static void inflight_event(void *arg)
{
    struct inflight *f = arg;
    if (atomic_load(&srv.closed_runs[f->c->id]) == 0 && now_ns() < f->deadline) {
        int err = mely_post(&rt, (mely_color_t)mely_current_color(), inflight_event, f);
        if (!err)
            return;
        note("mely_post: %s", mely_strerror(err));
    }
    if (atomic_load(&srv.closed_runs[f->c->id]) == 0)
        note("stream %u: not closed within %u ms", f->c->id, WAIT_MS);
    int err = mely_stream_write(f->s, "late\n", 5);
    if (err != -EPIPE)
        note("stream %u: a late write returned %d, not -EPIPE", f->c->id, err);
    if ((err = mely_stream_printf(f->s, "late %u\n", f->c->id)) != -EPIPE)
        note("stream %u: a late printf returned %d, not -EPIPE", f->c->id, err);
    if ((err = mely_stream_close(f->s, MELY_STREAM_FLUSH)) != 0)
        note("stream %u: a second close returned %d", f->c->id, err);
    if (mely_stream_fd(f->s) != -1)
        note("stream %u: fd %d after the close", f->c->id, mely_stream_fd(f->s));
    mely_stream_unref(f->s);
    free(f);
    atomic_fetch_add(&srv.n, 1);
}

/* Each request goes out to a color of its own with a reference; the last
 * one closes the stream from its own color. */
static void inflight_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    (void)line;
    (void)len;
    struct inflight *f = malloc(sizeof(*f));
    if (f) {
        *f = (struct inflight){.s = s, .c = c, .deadline = now_ns() + WAIT_MS * 1000000ull};
        mely_stream_ref(s);
        int err = mely_post(&rt, OTHER_COLOR(c->id * INFLIGHT_REQS + c->lines), inflight_event, f);
        if (err) {
            note("mely_post: %s", mely_strerror(err));
            mely_stream_unref(s);
            free(f);
        }
    }
    if (++c->lines == INFLIGHT_REQS) {
        int err = mely_stream_close(s, 0);
        if (err)
            note("stream %u: mely_stream_close: %s", c->id, mely_strerror(err));
        if ((err = mely_stream_write(s, "x", 1)) != -EPIPE)
            note("stream %u: a write right after the close returned %d", c->id, err);
    }
    leave(c);
}

static void *inflight_client(void *arg)
{
    (void)arg;
    int fds[INFLIGHT_CLIENTS], n = 0;
    for (; n < INFLIGHT_CLIENTS; n++)
        if ((fds[n] = client_ready((unsigned)n + 1, 0)) < 0)
            goto out;
    for (int i = 0; i < n; i++)
        send_str(fds[i], "REQ\nREQ\nREQ\nREQ\nREQ\nREQ\nREQ\nREQ\n");
    for (int i = 0; i < n; i++)
        expect_end(fds[i], NULL);
    if (!wait_count(&srv.n, INFLIGHT_CLIENTS * INFLIGHT_REQS, WAIT_MS))
        note("%u of %d events out on other colors finished", atomic_load(&srv.n),
             INFLIGHT_CLIENTS * INFLIGHT_REQS);
    sleep_us(QUIET_MS * 1000); /* a callback after the closed one would run now */
out:
    for (int i = 0; i < n; i++)
        close(fds[i]);
    mely_stop(&rt);
    return NULL;
}

/*
 * Four streams each send 8 requests; each request goes out to another color
 * with a reference (mely_stream_ref), and the 8th closes the stream from its
 * own color. The closed callback runs once; the events out there then write
 * (-EPIPE), close again (nothing) and drop their references, the last of
 * which frees the stream (ASan checks the memory); no callback runs after
 * the closed one.
 */
START_TEST(close_while_events_hold_the_stream)
{
    mely_stream_ops_t ops = {.line = inflight_line_cb, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    serve(workers, &ops, NULL, false, inflight_client, NULL, "close in flight");
    assert_closed_once(INFLIGHT_CLIENTS);
    ck_assert_uint_eq(atomic_load(&srv.n), INFLIGHT_CLIENTS * INFLIGHT_REQS);
    stop_server();
}
END_TEST

static void closer_event(void *arg)
{
    mely_stream_t *s = arg;
    int err = mely_stream_close(s, 0);
    if (err)
        note("mely_stream_close from another color: %s", mely_strerror(err));
    if ((err = mely_stream_write(s, "x", 1)) != -EPIPE)
        note("a write after a close from another color returned %d, not -EPIPE", err);
    mely_stream_unref(s);
    atomic_fetch_add(&srv.n, 1);
}

/* Replies, and on "CLOSE" hands the stream to another color that closes it. */
static void close_elsewhere_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    if (strcmp(line, "CLOSE") == 0) {
        mely_stream_ref(s);
        int err = mely_post(&rt, OTHER_COLOR(0), closer_event, s);
        if (err) {
            note("mely_post: %s", mely_strerror(err));
            mely_stream_unref(s);
        }
    } else {
        reply_line(s, c, line, len);
    }
    leave(c);
}

static void *close_elsewhere_client(void *arg)
{
    bool foreign = arg != NULL;
    int fd = client_ready(1, 0);
    bool ok = fd >= 0 && send_str(fd, "hello\n") && expect(fd, "5:hello\n");
    if (ok && foreign) {
        mely_stream_t *s = srv.stream[0];
        int err = mely_stream_close(s, 0);
        if (err)
            note("mely_stream_close from a foreign thread: %s", mely_strerror(err));
        if ((err = mely_stream_write(s, "x", 1)) != -EPIPE)
            note("a write after a close from a foreign thread returned %d, not -EPIPE", err);
    }
    ok = ok && (foreign || send_str(fd, "CLOSE\n")) && expect_end(fd, NULL);
    if (ok) {
        wait_closed(1);
        sleep_us(QUIET_MS * 1000); /* a second closed callback would run now */
    }
    return client_done(fd, false);
}

static const struct {
    unsigned workers;
    bool foreign;
} elsewhere_modes[] = {{2, false}, {1, false}, {2, true}};

/* mely_stream_close (without flush) from another color's event, and from a
 * foreign thread: writes fail at once, the client sees EOF, the closed
 * callback runs once. */
START_TEST(close_from_another_color_or_thread)
{
    mely_stream_ops_t ops = {.line = close_elsewhere_line_cb, .closed = on_closed};
    unsigned workers = elsewhere_modes[_i].workers;
    serve(workers, &ops, NULL, elsewhere_modes[_i].foreign, close_elsewhere_client,
          elsewhere_modes[_i].foreign ? &srv : NULL,
          elsewhere_modes[_i].foreign ? "foreign close" : "color close");
    assert_closed_once(1);
    if (!elsewhere_modes[_i].foreign)
        ck_assert_uint_eq(atomic_load(&srv.n), 1);
    stop_server();
}
END_TEST

/* ---- close after flush, EOF -------------------------------------------------------------- */

enum { FLUSH_BYTES = 4 << 20 };

/* "GO": writes FLUSH_BYTES and closes after flushing; a line after it (in
 * the same read) must not be delivered: reading stopped. */
static void flush_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    (void)len;
    c->lines++;
    if (strcmp(line, "GO") != 0)
        note("stream %u: line \"%s\" delivered after mely_stream_close", c->id, line);
    else if (write_pat(s, 0, FLUSH_BYTES)) {
        int err = mely_stream_close(s, MELY_STREAM_FLUSH);
        if (err)
            note("mely_stream_close: %s", mely_strerror(err));
        if ((err = mely_stream_write(s, "x", 1)) != -EPIPE)
            note("a write after a close with flush returned %d, not -EPIPE", err);
    }
    leave(c);
}

static void *flush_client(void *arg)
{
    bool foreign = arg != NULL;
    int fd = client_ready(1, SMALL_BUF);
    if (fd >= 0 && foreign) {
        mely_stream_t *s = srv.stream[0];
        int err = write_pat(s, 0, FLUSH_BYTES) ? mely_stream_close(s, MELY_STREAM_FLUSH) : 0;
        if (err)
            note("mely_stream_close: %s", mely_strerror(err));
        /* Refused, and never sent (expect_end below takes no byte more). */
        if ((err = mely_stream_write(s, "after the close", 15)) != -EPIPE)
            note("a write after a close with flush returned %d, not -EPIPE", err);
    }
    bool ok = fd >= 0 && (foreign || send_str(fd, "GO\nMORE\n")) &&
              expect_pat(fd, 0, FLUSH_BYTES) && expect_end(fd, NULL);
    return client_done(fd, ok);
}

/*
 * Close with MELY_STREAM_FLUSH right after writing 4 MiB to a client that
 * reads slowly (small socket buffers): from the stream's own color (a line
 * callback; the line behind it in the same read is not delivered), and from
 * a foreign thread whose writes were queued before its close (a write after
 * the close is refused). Every byte arrives, nothing more, then EOF.
 */
START_TEST(close_with_flush_sends_everything)
{
    mely_stream_ops_t ops = {.line = flush_line_cb, .closed = on_closed};
    unsigned workers = elsewhere_modes[_i].workers;
    bool foreign = elsewhere_modes[_i].foreign;
    serve(workers, &ops, setup_small_sndbuf, foreign, flush_client, foreign ? &srv : NULL,
          foreign ? "flush from a foreign thread" : "flush");
    assert_closed_once(1);
    stop_server();
}
END_TEST

/* Write timeout 150 ms, and the small socket buffer. */
static void setup_flush_timeout(mely_stream_t *s, struct conn *c)
{
    int err = mely_stream_timeouts(s, 0, 150 * 1000000ull);
    if (err)
        note("stream %u: mely_stream_timeouts: %s", c->id, mely_strerror(err));
    small_sndbuf(s);
}

/* Only records: the flush must end by itself. */
static void record_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    record_event(c, what, err);
    leave(c);
}

static void *flush_timeout_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, SMALL_BUF);
    bool ok = fd >= 0 && send_str(fd, "GO\n");
    if (ok && !wait_count(&srv.closed, 1, WAIT_MS)) {
        note("a flushing close to a peer that reads nothing did not end at the write timeout "
             "(%u events)",
             atomic_load(&srv.events));
        ok = false;
    }
    if (ok && pat_to_end(fd, 0) >= FLUSH_BYTES)
        note("the whole output arrived: the flush was not cut short");
    return client_done(fd, false);
}

/*
 * Close with MELY_STREAM_FLUSH after writing 4 MiB to a peer that reads
 * nothing, write timeout 150 ms: "the socket closes once the output is sent
 * (or it fails, or the write timeout fires)", with an event callback (that
 * does nothing) and without one. The peer gets part of the output, then the
 * end.
 */
START_TEST(close_with_flush_ends_at_the_write_timeout)
{
    mely_stream_ops_t ops = {.line = flush_line_cb, .closed = on_closed};
    if (_i == 0)
        ops.event = record_event_cb;
    serve(2, &ops, setup_flush_timeout, false, flush_timeout_client, NULL,
          _i == 0 ? "flush timeout, event callback" : "flush timeout");
    assert_closed_once(1);
    stop_server();
}
END_TEST

static void *reset_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, 0);
    struct linger hard = {.l_onoff = 1, .l_linger = 0};
    bool ok = fd >= 0 && send_str(fd, "a\n") && expect(fd, "1:a\n") &&
              setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard)) == 0;
    if (ok) {
        close(fd); /* a reset */
        fd = -1;
    }
    return client_done(fd, ok);
}

/* A peer that resets the connection: MELY_STREAM_ERROR with -ECONNRESET
 * (or -EPIPE, had a write found it first) to the event callback, which
 * closes; without one, the stream closes. */
START_TEST(peer_reset_is_an_error)
{
    mely_stream_ops_t ops = {.line = line_cb, .closed = on_closed};
    if (_i == 0)
        ops.event = close_event_cb;
    serve(2, &ops, NULL, false, reset_client, NULL, _i == 0 ? "reset" : "reset, no event");
    assert_closed_once(1);
    if (_i == 0) {
        ck_assert_uint_eq(atomic_load(&srv.events), 1);
        ck_assert_uint_eq(atomic_load(&srv.ev_what[0]), MELY_STREAM_ERROR);
        int err = atomic_load(&srv.ev_err[0]);
        ck_assert_msg(err == -ECONNRESET || err == -EPIPE, "err %d (%s)", err, mely_strerror(err));
    }
    stop_server();
}
END_TEST

static void eof_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    record_event(c, what, err);
    if (!(what & MELY_STREAM_EOF) ||
        (what & (MELY_STREAM_ERROR | MELY_STREAM_TIMEOUT | MELY_STREAM_CONNECTED)) || err)
        note("stream %u: event %u (err %d), expected MELY_STREAM_EOF", c->id, what, err);
    mely_stream_printf(s, "bye %u\n", c->lines);
    mely_stream_close(s, MELY_STREAM_FLUSH);
    leave(c);
}

static void *eof_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, 0);
    bool ok = fd >= 0 && send_str(fd, "a\nbc\n") && shutdown(fd, SHUT_WR) == 0 &&
              expect(fd, "1:a\n2:bc\nbye 2\n") && expect_end(fd, NULL);
    return client_done(fd, ok);
}

/* The peer's EOF reaches the event callback as MELY_STREAM_EOF, after the
 * lines sent before it; the stream stays writable until it closes. */
START_TEST(eof_reaches_the_event_callback)
{
    mely_stream_ops_t ops = {.line = line_cb, .event = eof_event_cb, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    serve(workers, &ops, NULL, false, eof_client, NULL, "EOF");
    assert_closed_once(1);
    ck_assert_uint_eq(atomic_load(&srv.events), 1);
    stop_server();
}
END_TEST

enum { BIG_BYTES = 1 << 20 };

static void big_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    (void)len;
    if (strcmp(line, "BIG") == 0 && write_pat(s, 0, BIG_BYTES))
        atomic_fetch_add(&srv.n, 1);
    leave(c);
}

static void *eof_flush_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, SMALL_BUF);
    bool ok = fd >= 0 && send_str(fd, "BIG\n") && shutdown(fd, SHUT_WR) == 0 &&
              expect_pat(fd, 0, BIG_BYTES) && expect_end(fd, NULL);
    return client_done(fd, ok);
}

/* Without an event callback, EOF closes the stream after flushing: a
 * request and EOF at once get the whole 2 MiB reply, then EOF. */
START_TEST(eof_without_event_callback_flushes_then_closes)
{
    mely_stream_ops_t ops = {.line = big_line_cb, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    serve(workers, &ops, setup_small_sndbuf, false, eof_flush_client, NULL,
          "EOF, no event callback");
    assert_closed_once(1);
    stop_server();
}
END_TEST

/* ---- mely_shutdown and mely_drain with open streams ---------------------------------------- */

enum { SHUT_STREAMS = 8, SHUT_BYTES = 1 << 20 };

static int clients[SHUT_STREAMS + 1];

static void setup_pending_output(mely_stream_t *s, struct conn *c)
{
    (void)c;
    small_sndbuf(s);
    write_pat(s, 0, SHUT_BYTES);
}

/* Connects `arg` clients, waits until their streams are set up, stops. */
static void *connect_then_stop(void *arg)
{
    unsigned n = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < n; i++)
        clients[i] = client_ready(i + 1, SMALL_BUF);
    mely_stop(&rt);
    return NULL;
}

/*
 * Eight open streams, each with 1 MiB of output its client does not read,
 * the listener left open: mely_shutdown runs every closed callback exactly
 * once (mely_stream_fd is -1 there) and closes every stream's fd (EBADF
 * afterwards); each client sees its connection end.
 */
START_TEST(shutdown_closes_open_streams)
{
    mely_stream_ops_t ops = {.line = line_cb, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    serve(workers, &ops, setup_pending_output, false, connect_then_stop,
          (void *)(uintptr_t)SHUT_STREAMS, "shutdown");
    for (unsigned i = 0; i < SHUT_STREAMS; i++)
        ck_assert_msg(clients[i] >= 0, "client %u did not connect", i);
    ck_assert_uint_eq(atomic_load(&srv.ready), SHUT_STREAMS);
    ck_assert_uint_eq(atomic_load(&srv.closed), 0);
    int rc = mely_shutdown(&rt);
    ck_assert_msg(rc >= 0, "mely_shutdown: %s", mely_strerror(rc));
    ck_assert_uint_eq(atomic_load(&srv.closed), SHUT_STREAMS);
    assert_closed_once(SHUT_STREAMS);
    for (unsigned i = 0; i < SHUT_STREAMS; i++)
        ck_assert_msg(fd_closed(srv.fd[i]), "stream %u's fd %d is still open after mely_shutdown",
                      i, srv.fd[i]);
    for (unsigned i = 0; i < SHUT_STREAMS; i++) {
        uint64_t n;
        ck_assert_msg(expect_end(clients[i], &n), "client %u: the connection did not end", i);
        close(clients[i]);
    }
    assert_no_notes();
    free_graveyard();
}
END_TEST

/*
 * A stream referenced at mely_shutdown (the reference of an event that the
 * shutdown discards, say): the shutdown closes it, runs its closed callback
 * once and frees it anyway ("a reference does not outlive the runtime"; the
 * pointer is not used afterwards, and LeakSanitizer checks that nothing of
 * the stream is left).
 */
START_TEST(shutdown_frees_referenced_streams)
{
    mely_stream_ops_t ops = {.line = line_cb, .closed = on_closed};
    serve(2, &ops, NULL, true, connect_then_stop, (void *)(uintptr_t)1, "a reference kept");
    ck_assert_msg(clients[0] >= 0, "the client did not connect");
    int rc = mely_shutdown(&rt);
    ck_assert_msg(rc >= 0, "mely_shutdown: %s", mely_strerror(rc));
    srv.stream[0] = NULL; /* freed with the runtime: never unref'd */
    assert_closed_once(1);
    ck_assert(fd_closed(srv.fd[0]));
    ck_assert(expect_end(clients[0], NULL));
    close(clients[0]);
    assert_no_notes();
    free_graveyard();
}
END_TEST

enum { DRAIN_STREAMS = 3, DRAIN_TIMEOUT_MS = 200 };

static _Atomic uint64_t drain_at;

/* Opens a stream during the drain, from its own color, and writes to it. */
static void open_during_drain(void *arg)
{
    int fd = (int)(intptr_t)arg;
    struct conn *c = new_conn(ID_EXTRA);
    mely_stream_t *s;
    if (!c) {
        close(fd);
        return;
    }
    int err = mely_stream_open(&rt, fd, MELY_TO(mely_current_color()), &srv.ops, c, &s);
    if (err) {
        note("mely_stream_open during the drain: %s", mely_strerror(err));
        free(c);
        return;
    }
    if ((err = mely_stream_printf(s, "hello during the drain\n")))
        note("a write to a stream opened during the drain: %s", mely_strerror(err));
}

/* The clients asked for BIG_BYTES each and read nothing yet. */
static bool drain_clients_ready(int *fds)
{
    for (unsigned i = 0; i < DRAIN_STREAMS; i++)
        if ((fds[i] = client_ready(i + 1, SMALL_BUF)) < 0)
            return false;
    for (unsigned i = 0; i < DRAIN_STREAMS; i++)
        send_str(fds[i], "BIG\n");
    if (!wait_count(&srv.n, DRAIN_STREAMS, WAIT_MS)) {
        note("%u of %d streams wrote their reply", atomic_load(&srv.n), DRAIN_STREAMS);
        return false;
    }
    return true;
}

static void *drain_client(void *arg)
{
    (void)arg;
    int fds[DRAIN_STREAMS], late = -1, sp[2] = {-1, -1};
    for (unsigned i = 0; i < DRAIN_STREAMS; i++)
        fds[i] = -1;
    if (!drain_clients_ready(fds)) {
        mely_stop(&rt);
        goto out;
    }
    int err = mely_drain(&rt, 0);
    if (err) {
        note("mely_drain: %s", mely_strerror(err));
        mely_stop(&rt);
        goto out;
    }
    if ((err = mely_drain(&rt, 0)) != MELY_EBUSY)
        note("a second mely_drain returned %d, not MELY_EBUSY", err);
    /* No accept during the drain: a new client waits in the backlog. */
    late = client_connect(srv.port, 0);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0)
        note("socketpair: %s", strerror(errno));
    else if ((err = mely_post(&rt, mely_color_pick(&srv.colors, 999), open_during_drain,
                              (void *)(intptr_t)sp[0])) != 0)
        note("mely_post: %s", mely_strerror(err));
    sleep_us(QUIET_MS * 1000);
    if (atomic_load(&srv.accepted) != DRAIN_STREAMS)
        note("%u connections accepted during the drain",
             atomic_load(&srv.accepted) - DRAIN_STREAMS);
    if (sp[1] >= 0 && expect(sp[1], "hello during the drain\n"))
        expect_end(sp[1], NULL);
    for (unsigned i = 0; i < DRAIN_STREAMS; i++)
        if (expect_pat(fds[i], 0, BIG_BYTES))
            expect_end(fds[i], NULL);
out:
    for (unsigned i = 0; i < DRAIN_STREAMS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (late >= 0)
        close(late);
    if (sp[1] >= 0)
        close(sp[1]);
    return NULL;
}

/*
 * mely_drain with three streams whose clients have 1 MiB each to read: the
 * listener stops accepting (a new client waits in the backlog: no accept
 * handler runs), a second drain is MELY_EBUSY, a stream opened during the
 * drain is flushed and closed too, every client gets all its bytes and EOF,
 * every closed callback runs once, and mely_run returns by itself.
 */
START_TEST(drain_flushes_closes_and_stops)
{
    mely_stream_ops_t ops = {.line = big_line_cb, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    serve(workers, &ops, setup_small_sndbuf, false, drain_client, NULL, "drain");
    ck_assert_uint_eq(atomic_load(&srv.accepted), DRAIN_STREAMS);
    ck_assert_uint_eq(atomic_load(&srv.closed), DRAIN_STREAMS + 1);
    assert_closed_once(DRAIN_STREAMS);
    ck_assert_uint_eq(atomic_load(&srv.closed_runs[ID_EXTRA]), 1);
    stop_server();
}
END_TEST

static void *drain_timeout_client(void *arg)
{
    (void)arg;
    int fds[DRAIN_STREAMS];
    for (unsigned i = 0; i < DRAIN_STREAMS; i++)
        fds[i] = -1;
    if (!drain_clients_ready(fds)) {
        mely_stop(&rt);
        goto out;
    }
    atomic_store(&drain_at, now_ns());
    int err = mely_drain(&rt, DRAIN_TIMEOUT_MS * 1000000ull);
    if (err) {
        note("mely_drain: %s", mely_strerror(err));
        mely_stop(&rt);
        goto out;
    }
    if ((err = mely_drain(&rt, 0)) != MELY_EBUSY)
        note("a second mely_drain returned %d, not MELY_EBUSY", err);
    if (!wait_count(&srv.closed, DRAIN_STREAMS, WAIT_MS))
        note("%u of %d streams closed", atomic_load(&srv.closed), DRAIN_STREAMS);
    for (unsigned i = 0; i < DRAIN_STREAMS; i++) {
        uint64_t n = pat_to_end(fds[i], 0);
        if (n >= BIG_BYTES)
            note("client %u got all %llu bytes: the drain's timeout did not cut the flush", i,
                 (unsigned long long)n);
    }
out:
    for (unsigned i = 0; i < DRAIN_STREAMS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return NULL;
}

/* mely_drain with a 200 ms timeout, and clients that never read: the
 * streams that could not flush are closed when the timeout expires (the
 * clients get part of their bytes, then the end), and mely_run returns. */
START_TEST(drain_ends_at_its_timeout)
{
    mely_stream_ops_t ops = {.line = big_line_cb, .closed = on_closed};
    serve(2, &ops, setup_small_sndbuf, false, drain_timeout_client, NULL, "drain with a timeout");
    uint64_t took = now_ns() - atomic_load(&drain_at);
    ck_assert_msg(took >= (DRAIN_TIMEOUT_MS - EARLY_MS) * 1000000ull,
                  "mely_run returned %.1f ms after the drain (timeout %d ms)", took / 1e6,
                  DRAIN_TIMEOUT_MS);
    ck_assert_msg(atomic_load(&srv.t_closed) >=
                      atomic_load(&drain_at) + (DRAIN_TIMEOUT_MS - EARLY_MS) * 1000000ull,
                  "a stream closed before the drain's timeout");
    assert_closed_once(DRAIN_STREAMS);
    stop_server();
}
END_TEST

enum { HELD_MS = 100 };

static atomic_bool held_done;

/* HELD_MS after its request, on another color: the late reply of a stream
 * the drain has closed meanwhile; drops the reference the drain waits for. */
static void late_reply(void *arg)
{
    mely_stream_t *s = arg;
    int err = mely_stream_write(s, "late\n", 5);
    if (err != -EPIPE)
        note("the late reply's write returned %d, not -EPIPE (the drain closed the stream)", err);
    atomic_store(&held_done, true);
    mely_stream_unref(s);
}

/* A request goes out to another color with a reference, answered late. */
static void held_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    (void)line;
    (void)len;
    mely_stream_ref(s);
    int err = mely_timer_after(&rt, HELD_MS * 1000000ull, MELY_TO(OTHER_COLOR(0)), late_reply, s,
                               NULL);
    if (err) {
        note("mely_timer_after: %s", mely_strerror(err));
        mely_stream_unref(s);
    }
    atomic_fetch_add(&srv.n, 1);
    leave(c);
}

static void *held_drain_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, 0);
    bool ok = fd >= 0 && send_str(fd, "REQ\n") && wait_count(&srv.n, 1, WAIT_MS);
    int err = ok ? mely_drain(&rt, 0) : 0;
    if (err)
        note("mely_drain: %s", mely_strerror(err));
    if (!ok || err)
        mely_stop(&rt);
    if (fd >= 0) {
        expect_end(fd, NULL);
        close(fd);
    }
    return NULL;
}

/*
 * mely_drain while an event on another color holds a reference to a stream
 * (a reply due 100 ms later): the stream closes at once (nothing to flush),
 * but mely_run returns only after that event ran and dropped its reference
 * (its write then returns -EPIPE), so the shutdown discards nothing.
 */
START_TEST(drain_waits_for_references)
{
    mely_stream_ops_t ops = {.line = held_line_cb, .closed = on_closed};
    atomic_store(&held_done, false);
    serve(1 + (unsigned)_i, &ops, NULL, false, held_drain_client, NULL, "drain, held");
    ck_assert_msg(atomic_load(&held_done), "mely_run returned before the event holding a "
                                           "reference ran");
    assert_closed_once(1);
    stop_server();
}
END_TEST

static void *drain_only(void *arg)
{
    (void)arg;
    int err = mely_drain(&rt, 0);
    if (err) {
        note("mely_drain: %s", mely_strerror(err));
        mely_stop(&rt);
    }
    return NULL;
}

/* mely_drain with a listener and no stream: mely_run returns by itself. */
START_TEST(drain_with_nothing_open_stops)
{
    mely_stream_ops_t ops = {.line = line_cb, .closed = on_closed};
    serve(1 + (unsigned)_i, &ops, NULL, false, drain_only, NULL, "drain, no stream");
    ck_assert_uint_eq(atomic_load(&srv.closed), 0);
    stop_server();
}
END_TEST

/* ---- mely_drain with work in flight, and streams that drain themselves ---------------------- */

enum {
    WORK_STREAMS = 3,
    WORK_REQS = 40,     /* per stream: half before the drain, half after */
    WORK_COLORS = 4,    /* the colors the work goes out to */
    WORK_HOPS = 20,     /* events each request's work takes ... */
    WORK_HOP_US = 2000, /* ... each this long */
};

struct work {
    mely_stream_t *s;
    struct conn *c;
    unsigned id, hops, left;
};

static atomic_bool work_read[WORK_STREAMS][WORK_REQS]; /* the server read the request */
static atomic_uint work_replied;                       /* replies written */

/* The stream's color again, the reply written: drops the reference. */
static void work_back(void *arg)
{
    struct work *w = arg;
    if (mely_current_color() != (int)mely_stream_color(w->s))
        note("the work came back on color %d", mely_current_color());
    mely_stream_unref(w->s);
    free(w);
}

/* On another color: works (posting itself again, WORK_HOP_US each time),
 * then writes the reply from there and posts back to the stream's color. */
static void work_event(void *arg)
{
    struct work *w = arg;
    sleep_us(WORK_HOP_US);
    if (++w->hops < w->left) {
        int err = mely_post(&rt, (mely_color_t)mely_current_color(), work_event, w);
        if (!err)
            return;
        note("mely_post: %s", mely_strerror(err));
    }
    int err = mely_stream_printf(w->s, "RE %u\n", w->id);
    if (err)
        note("stream %u: the reply to request %u: %s (the drain closed the stream before "
             "the work in flight wrote its reply)",
             w->c->id, w->id, mely_strerror(err));
    else
        atomic_fetch_add(&work_replied, 1);
    err = mely_post(&rt, mely_stream_color(w->s), work_back, w);
    if (err) {
        note("mely_post: %s", mely_strerror(err));
        mely_stream_unref(w->s);
        free(w);
    }
}

/* Sends the request out to another color, with a reference. */
static void start_work(mely_stream_t *s, struct conn *c, unsigned id, unsigned hops)
{
    struct work *w = malloc(sizeof(*w));
    if (!w) {
        note("out of memory");
        return;
    }
    *w = (struct work){.s = s, .c = c, .id = id, .left = hops};
    mely_stream_ref(s);
    int err = mely_post(&rt, OTHER_COLOR(id % WORK_COLORS), work_event, w);
    if (err) {
        note("mely_post: %s", mely_strerror(err));
        mely_stream_unref(s);
        free(w);
    }
}

/* "REQ <id>": recorded as read, and sent out to be worked on. */
static void work_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    (void)len;
    unsigned id;
    if (sscanf(line, "REQ %u", &id) != 1 || id >= WORK_REQS || c->id >= WORK_STREAMS) {
        note("stream %u: a stray line \"%.20s\"", c->id, line);
    } else if (atomic_exchange(&work_read[c->id][id], true)) {
        note("stream %u: request %u read twice", c->id, id);
    } else {
        start_work(s, c, id, WORK_HOPS);
        atomic_fetch_add(&srv.n, 1);
    }
    leave(c);
}

static void send_reqs(int fd, unsigned from, unsigned to)
{
    char buf[32];
    for (unsigned i = from; i < to; i++) {
        snprintf(buf, sizeof(buf), "REQ %u\n", i);
        send_str(fd, buf);
    }
}

/* Every reply is to a request the server read, and every request it read
 * has its reply, before EOF. */
static void expect_replies(int fd, unsigned k)
{
    struct lr *lr = calloc(1, sizeof(*lr));
    bool got[WORK_REQS] = {false};
    char line[64];
    if (!lr) {
        note("out of memory");
        return;
    }
    lr->fd = fd;
    while (next_line(lr, line, sizeof(line), WAIT_MS)) {
        unsigned id;
        if (sscanf(line, "RE %u", &id) != 1 || id >= WORK_REQS)
            note("client %u: a stray line \"%.20s\"", k, line);
        else if (got[id])
            note("client %u: two replies to request %u", k, id);
        else if (!atomic_load(&work_read[k][id]))
            note("client %u: a reply to request %u, which the server did not read", k, id);
        else
            got[id] = true;
    }
    if (lr->len)
        note("client %u: %zu bytes after the last reply", k, lr->len);
    free(lr);
    expect_end(fd, NULL);
    for (unsigned id = 0; id < WORK_REQS; id++)
        if (atomic_load(&work_read[k][id]) && !got[id])
            note("client %u: request %u was read, and its reply never came", k, id);
}

static atomic_int drain_rc;
static atomic_bool drain_called;

/* mely_drain from an event, as from a signal's handler (mely_signal). */
static void drain_event(void *arg)
{
    (void)arg;
    atomic_store(&drain_rc, mely_drain(&rt, 0));
    atomic_store(&drain_called, true);
}

/* mely_drain from this thread, or from an event of a color of its own. */
static int drain_from(bool event)
{
    if (!event)
        return mely_drain(&rt, 0);
    atomic_store(&drain_called, false);
    int err = mely_post(&rt, OTHER_COLOR(WORK_COLORS), drain_event, NULL);
    if (!err && !wait_flag(&drain_called, WAIT_MS))
        note("the event that drains did not run");
    return err ? err : atomic_load(&drain_rc);
}

static void *work_drain_client(void *arg)
{
    bool from_event = arg != NULL;
    int fds[WORK_STREAMS];
    unsigned n = 0;
    for (; n < WORK_STREAMS; n++)
        if ((fds[n] = client_ready(n + 1, 0)) < 0)
            goto fail;
    for (unsigned i = 0; i < n; i++)
        send_reqs(fds[i], 0, WORK_REQS / 2);
    if (!wait_count(&srv.n, n * WORK_REQS / 2, WAIT_MS)) {
        note("%u of %u requests read", atomic_load(&srv.n), n * WORK_REQS / 2);
        goto fail;
    }
    unsigned replied = atomic_load(&work_replied);
    int err = drain_from(from_event);
    if (err) {
        note("mely_drain: %s", mely_strerror(err));
        goto fail;
    }
    printf("drain with work in flight: %u of %u requests answered when the drain began\n",
           replied, n * WORK_REQS / 2);
    for (unsigned i = 0; i < n; i++) /* read, or not: either way answered, or not */
        send_reqs(fds[i], WORK_REQS / 2, WORK_REQS);
    for (unsigned i = 0; i < n; i++) {
        expect_replies(fds[i], i);
        close(fds[i]);
    }
    return NULL; /* the drain stops the runtime */
fail:
    for (unsigned i = 0; i < n; i++)
        close(fds[i]);
    mely_stop(&rt);
    return NULL;
}

/*
 * mely_drain from a foreign thread while requests are out on other colors:
 * each request read goes out to a color that works on it (20 events of
 * 2 ms), writes the reply with mely_stream_write from there and posts back
 * to the stream's color. Half the requests are sent before the drain, half
 * after (those may or may not be read). Every request the server read gets
 * its reply before EOF, no other reply comes, and the runtime stops by
 * itself once the streams are closed. The drain is called from a foreign
 * thread, or from an event (as a signal's handler would).
 */
START_TEST(drain_answers_work_in_flight)
{
    mely_stream_ops_t ops = {.line = work_line_cb, .closed = on_closed};
    memset(work_read, 0, sizeof(work_read));
    atomic_store(&work_replied, 0);
    serve(1 + (unsigned)(_i % 2), &ops, NULL, false, work_drain_client, _i >= 2 ? &srv : NULL,
          _i >= 2 ? "drain from an event, work in flight" : "drain, work in flight");
    assert_closed_once(WORK_STREAMS);
    ck_assert_uint_eq(atomic_load(&work_replied), atomic_load(&srv.n));
    stop_server();
}
END_TEST

enum { SELF_DRAIN_TIMEOUT_MS = 200 };

static atomic_uint drain_runs;

/* The drain callback: says so; the stream carries on. */
static void self_drain_cb(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "drain");
    atomic_fetch_add(&drain_runs, 1);
    CHECK_RC(mely_stream_printf(s, "draining\n"), 0);
    leave(c);
}

/* "QUIT": a last word and a close with flush; else a reply. */
static void quit_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    if (strcmp(line, "QUIT") == 0) {
        CHECK_RC(mely_stream_printf(s, "bye\n"), 0);
        CHECK_RC(mely_stream_close(s, MELY_STREAM_FLUSH), 0);
    } else {
        reply_line(s, c, line, len);
    }
    leave(c);
}

static void *self_drain_client(void *arg)
{
    bool cut = arg != NULL; /* the stream never finishes: the drain's timeout cuts it */
    int fd = client_ready(1, 0);
    bool ok = fd >= 0 && send_str(fd, "a\n") && expect(fd, "1:a\n");
    if (!ok)
        goto fail;
    atomic_store(&drain_at, now_ns());
    int err = mely_drain(&rt, cut ? SELF_DRAIN_TIMEOUT_MS * 1000000ull : 0);
    if (err) {
        note("mely_drain: %s", mely_strerror(err));
        goto fail;
    }
    ok = expect(fd, "draining\n");
    /* Long after the runtime was quiet, the stream still reads and answers. */
    sleep_us(QUIET_MS * 1000);
    if (!cut) {
        ok = ok && send_str(fd, "b\n") && expect(fd, "1:b\n") && send_str(fd, "QUIT\n") &&
             expect(fd, "bye\n") && expect_eof(fd);
    } else {
        ok = ok && expect_end(fd, NULL);
    }
    close(fd);
    return NULL; /* the drain stops the runtime */
fail:
    if (fd >= 0)
        close(fd);
    mely_stop(&rt);
    return NULL;
}

/*
 * A stream with a drain callback: mely_drain runs it once, and the stream
 * carries on (well after the runtime was quiet it still reads and answers)
 * until the client says QUIT and the stream closes itself; then the drain
 * ends and mely_run returns. With a drain timeout of 200 ms and a stream
 * that never closes, the timeout cuts it: closed no sooner than 200 ms
 * after the drain, and mely_run returns.
 */
START_TEST(drain_callback_finishes_the_exchange)
{
    bool cut = _i == 2;
    mely_stream_ops_t ops = {.line = quit_line_cb, .drain = self_drain_cb, .closed = on_closed};
    atomic_store(&drain_runs, 0);
    serve(1 + (unsigned)(_i % 2), &ops, NULL, false, self_drain_client, cut ? &srv : NULL,
          cut ? "drain callback, cut" : "drain callback");
    assert_closed_once(1);
    ck_assert_uint_eq(atomic_load(&drain_runs), 1);
    if (cut) {
        uint64_t at = atomic_load(&drain_at), closed = atomic_load(&srv.t_closed);
        ck_assert_msg(closed >= at + (SELF_DRAIN_TIMEOUT_MS - EARLY_MS) * 1000000ull,
                      "the stream closed %.1f ms after the drain (timeout %d ms)",
                      ((double)closed - (double)at) / 1e6, SELF_DRAIN_TIMEOUT_MS);
    }
    stop_server();
}
END_TEST

enum {
    SLOW_HOPS = 200,       /* the slow request's work: 200 events of 5 ms */
    SLOW_HOP_US = 5000,
    HEARD_MS = 300,        /* time for the stream to hear of the drain */
};

/* "SLOW": a request out on another color for about a second; "b" must not
 * be read (it is sent after the drain); else a reply. */
static void slow_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    if (strcmp(line, "SLOW") == 0) {
        struct work *w = malloc(sizeof(*w));
        if (w) {
            *w = (struct work){.s = s, .c = c, .id = 7, .left = SLOW_HOPS};
            mely_stream_ref(s);
            if (mely_post(&rt, OTHER_COLOR(0), work_event, w) != 0) {
                note("mely_post failed");
                mely_stream_unref(s);
                free(w);
            }
        }
        atomic_fetch_add(&srv.n, 1);
    } else if (strcmp(line, "b") == 0) {
        note("stream %u: a line sent after the drain was read", c->id);
    } else {
        reply_line(s, c, line, len);
    }
    leave(c);
}

static void *stop_reading_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, 0);
    bool ok = fd >= 0 && send_str(fd, "a\n") && expect(fd, "1:a\n") && send_str(fd, "SLOW\n") &&
              wait_count(&srv.n, 1, WAIT_MS);
    int err = ok ? mely_drain(&rt, 0) : 0;
    if (!ok || err) {
        if (err)
            note("mely_drain: %s", mely_strerror(err));
        if (fd >= 0)
            close(fd);
        mely_stop(&rt);
        return NULL;
    }
    /* The stream heard of the drain long ago (its event was queued before
     * mely_drain returned), and the slow reply is still a while away. */
    sleep_us(HEARD_MS * 1000);
    if (atomic_load(&srv.closed) != 0)
        note("the stream closed while its request was out");
    send_str(fd, "b\n");
    if (expect(fd, "RE 7\n"))
        expect_end(fd, NULL); /* and no reply to "b" */
    close(fd);
    return NULL; /* the drain stops the runtime */
}

/*
 * A stream without a drain callback stops reading at the drain: a line
 * sent 300 ms after mely_drain is never read, while the reply to a request
 * still out on another color (about 1 s of work) arrives, then EOF; the
 * stream closes after sending it, and the runtime stops.
 */
START_TEST(drain_stops_reading)
{
    mely_stream_ops_t ops = {.line = slow_line_cb, .closed = on_closed};
    serve(1 + (unsigned)_i, &ops, NULL, false, stop_reading_client, NULL, "drain stops reading");
    assert_closed_once(1);
    stop_server();
}
END_TEST

/* ---- mely_stream_connect --------------------------------------------------------------------- */

#define CONNECT_KEY 999u /* the connecting stream's key in the range */

/* The connecting side: MELY_STREAM_CONNECTED first, then the reply. */
static void connected_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    record_event(c, what, err);
    if (c->events != 1 || what != MELY_STREAM_CONNECTED || err != 0)
        note("connecting stream: event %u (err %d) as event %u; expected MELY_STREAM_CONNECTED "
             "first",
             what, err, c->events);
    leave(c);
}

static void connected_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    (void)len;
    if (c->events == 0)
        note("connecting stream: a line before MELY_STREAM_CONNECTED");
    if (strcmp(line, "4:ping") != 0)
        note("connecting stream: got \"%s\", expected \"4:ping\"", line);
    c->lines++;
    mely_stream_printf(s, "bye\n");
    mely_stream_close(s, MELY_STREAM_FLUSH);
    leave(c);
}

static const mely_stream_ops_t connecting_ops = {
    .line = connected_line_cb, .event = connected_event_cb, .closed = on_closed};

static struct conn *connecting;

/* Connects to our own listener and writes at once (queued until connected).
 * On the stream's color the pointer is good as it is; elsewhere (`foreign`)
 * a reference is taken first: this stream cannot close before its ping is
 * answered, so it is still there to take one from. */
static mely_stream_t *connect_and_ping(bool foreign)
{
    mely_stream_t *s;
    mely_color_t color = mely_color_pick(&srv.colors, CONNECT_KEY);
    int err = mely_stream_connect(&rt, "127.0.0.1", srv.port, MELY_TO(color), &connecting_ops,
                                  connecting, &s);
    if (err) {
        note("mely_stream_connect: %s", mely_strerror(err));
        return NULL;
    }
    if (foreign)
        mely_stream_ref(s);
    if ((err = mely_stream_write(s, "ping\n", 5)))
        note("a write before the connection is up: %s", mely_strerror(err));
    return s;
}

static void connect_event(void *arg)
{
    (void)arg;
    connect_and_ping(false);
}

static void *connect_client(void *arg)
{
    bool foreign = arg != NULL;
    mely_stream_t *held = NULL;
    if (foreign)
        held = connect_and_ping(true);
    else if (mely_post(&rt, mely_color_pick(&srv.colors, CONNECT_KEY), connect_event, NULL))
        note("mely_post failed");
    if (!wait_count(&srv.closed, 2, WAIT_MS))
        note("%u of 2 streams closed", atomic_load(&srv.closed));
    if (held)
        mely_stream_unref(held);
    mely_stop(&rt);
    return NULL;
}

/*
 * mely_stream_connect to a listener of the same runtime (from a foreign
 * thread, and from the stream's own color): a write made at once waits for
 * the connection; MELY_STREAM_CONNECTED comes first, then the server's reply;
 * the connecting side says "bye" and closes after flushing, the server sees
 * EOF and closes too.
 */
START_TEST(connect_to_own_listener)
{
    mely_stream_ops_t ops = {.line = line_cb, .closed = on_closed};
    unsigned workers = elsewhere_modes[_i].workers;
    bool foreign = elsewhere_modes[_i].foreign;
    connecting = new_conn(ID_EXTRA);
    ck_assert_ptr_nonnull(connecting);
    serve(workers, &ops, NULL, false, connect_client, foreign ? &srv : NULL,
          foreign ? "connect from a foreign thread" : "connect");
    ck_assert_uint_eq(atomic_load(&srv.closed_runs[ID_EXTRA]), 1);
    assert_closed_once(1);
    ck_assert_uint_eq(connecting->events, 1);
    ck_assert_uint_eq(connecting->lines, 1);
    ck_assert_uint_eq(atomic_load(&srv.ev_what[ID_EXTRA]), MELY_STREAM_CONNECTED);
    stop_server();
}
END_TEST

static atomic_int connect_rc;

static void *refused_client(void *arg)
{
    unsigned port = (unsigned)(uintptr_t)arg;
    mely_color_t color = mely_color_pick(&srv.colors, CONNECT_KEY);
    int err =
        mely_stream_connect(&rt, "127.0.0.1", port, MELY_TO(color), &srv.ops, connecting, NULL);
    atomic_store(&connect_rc, err);
    if (err == 0 && !wait_count(&srv.closed, 1, WAIT_MS))
        note("the refused stream did not close");
    mely_stop(&rt);
    return NULL;
}

/*
 * mely_stream_connect to a port nobody listens on: MELY_STREAM_ERROR with
 * -ECONNREFUSED to the event callback (which closes), or without one a
 * close; the closed callback runs once. (A connect that fails at once returns
 * -ECONNREFUSED instead, without callbacks: also accepted.)
 */
START_TEST(connect_refused)
{
    mely_stream_ops_t ops = {.closed = on_closed};
    if (_i == 0)
        ops.event = close_event_cb;
    connecting = new_conn(ID_EXTRA);
    ck_assert_ptr_nonnull(connecting);
    serve(2, &ops, NULL, false, refused_client, (void *)(uintptr_t)free_port(), "refused");
    int rc = atomic_load(&connect_rc);
    if (rc == -ECONNREFUSED) {
        printf("connect_refused: mely_stream_connect failed at once\n");
        ck_assert_uint_eq(atomic_load(&srv.closed), 0);
        free(connecting);
    } else {
        ck_assert_msg(rc == 0, "mely_stream_connect: %s", mely_strerror(rc));
        ck_assert_uint_eq(atomic_load(&srv.closed_runs[ID_EXTRA]), 1);
        if (_i == 0) {
            ck_assert_uint_eq(atomic_load(&srv.events), 1);
            ck_assert_uint_eq(atomic_load(&srv.ev_what[ID_EXTRA]), MELY_STREAM_ERROR);
            ck_assert_int_eq(atomic_load(&srv.ev_err[ID_EXTRA]), -ECONNREFUSED);
        }
    }
    stop_server();
}
END_TEST

/* ---- errors ------------------------------------------------------------------------------- */

static void nop_read(mely_stream_t *s, void *arg)
{
    (void)s;
    (void)arg;
}

static void nop_line(mely_stream_t *s, char *line, size_t len, void *arg)
{
    (void)s;
    (void)line;
    (void)len;
    (void)arg;
}

#define ERR_COLOR ((mely_color_t)1234)

/* On the stream's color: the calls reserved to it, with bad arguments and
 * good ones; then the stream is closed and stays closed. */
static void own_color_errors(void *arg)
{
    mely_stream_t *s = arg;
    struct evbuffer *in = mely_stream_input(s), *out = mely_stream_output(s);
    if (!in || !out || in == out)
        note("mely_stream_input %p, mely_stream_output %p", (void *)in, (void *)out);
    CHECK_RC(mely_stream_watermark(s, 0, 0, 0), MELY_EINVAL);
    CHECK_RC(mely_stream_watermark(s, 0x4, 0, 0), MELY_EINVAL);
    CHECK_RC(mely_stream_watermark(s, MELY_READ, 10, 5), MELY_EINVAL);
    CHECK_RC(mely_stream_watermark(s, MELY_WRITE, 10, 5), MELY_EINVAL);
    CHECK_RC(mely_stream_watermark(s, MELY_READ, 10, 0), 0);
    CHECK_RC(mely_stream_watermark(s, MELY_WRITE, 10, 0), 0);
    CHECK_RC(mely_stream_watermark(s, MELY_READ, 5, 10), 0);
    CHECK_RC(mely_stream_max_line(s, 1), 0);
    CHECK_RC(mely_stream_max_line(s, 0), 0); /* "0: the default, as there" */
    CHECK_RC(mely_stream_timeouts(s, 0, 0), 0);
    CHECK_RC(mely_stream_reading(s, 0), 0);
    CHECK_RC(mely_stream_reading(s, 1), 0);
    CHECK_RC(mely_stream_write_buffer(s, NULL), MELY_EINVAL);
    char *line = (char *)s;
    size_t len = 1;
    CHECK_RC(mely_stream_readln(s, NULL, &len), MELY_EINVAL);
    CHECK_RC(mely_stream_readln(s, &line, NULL), MELY_EINVAL);
    CHECK_RC(mely_stream_readln(s, &line, &len), 0);
    if (line != NULL)
        note("readln returned 0 and left *line set");
    CHECK_RC(mely_stream_close(s, 0), 0);
    CHECK_RC(mely_stream_close(s, MELY_STREAM_FLUSH), 0);
    CHECK_RC(mely_stream_write(s, "x", 1), -EPIPE);
    CHECK_RC(mely_stream_printf(s, "%d", 1), -EPIPE);
    mely_stop(&rt);
}

/* mely_stream_open(fd) with these arguments fails with `want`, and fd is closed. */
#define ASSERT_OPEN_FAILS(want, fd, to, ops)                                                       \
    do {                                                                                           \
        mely_stream_t *s_ = NULL;                                                                  \
        int fd_ = (fd);                                                                            \
        ck_assert_int_eq(mely_stream_open(&rt, fd_, (to), (ops), NULL, &s_), (want));              \
        ck_assert_msg(fd_ < 0 || fd_closed(fd_), "fd %d left open by a failed open", fd_);         \
    } while (0)

static int sock(void)
{
    int sp[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    close(sp[1]);
    return sp[0];
}

/*
 * Argument errors: mely_stream_open's (each closes the fd: the stream owns
 * it; also inverted watermarks in the ops), connect to names, drain, open
 * and connect on a runtime that is not initialized, NULL streams and
 * pointers; on the stream's color the setters' (what, low > high; max_line 0
 * is the default) and readln's; writes after a close.
 */
START_TEST(stream_errors)
{
    mely_stream_ops_t ops = {.line = nop_line, .closed = on_closed};
    mely_stream_ops_t both = {.read = nop_read, .line = nop_line};
    mely_t none = {0};
    memset(&srv, 0, sizeof(srv));
    int fd = sock();
    mely_stream_t *s = NULL;
    ck_assert_int_eq(mely_stream_open(&none, fd, MELY_TO(1), &ops, NULL, &s), MELY_ESHUTDOWN);
    ck_assert(fd_closed(fd));
    ck_assert_int_eq(mely_drain(&none, 0), MELY_ESHUTDOWN);
    ck_assert_int_eq(mely_stream_connect(&none, "127.0.0.1", 9, MELY_TO(1), &ops, NULL, &s),
                     MELY_ESHUTDOWN);

    init_runtime(&rt, 2, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    ASSERT_OPEN_FAILS(MELY_EINVAL, sock(), MELY_TO(1), NULL);
    ASSERT_OPEN_FAILS(MELY_EINVAL, sock(), MELY_TO(1), &both);
    ASSERT_OPEN_FAILS(MELY_EINVAL, -1, MELY_TO(1), &ops);
    ASSERT_OPEN_FAILS(MELY_ECOLOR, sock(), MELY_TO(MELY_COLOR_PINNED(2)), &ops);
    mely_to_t bad_prio = {1, MELY_PRIO_MAX + 1, NULL};
    ASSERT_OPEN_FAILS(MELY_EPRIO, sock(), bad_prio, &ops);
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    ASSERT_OPEN_FAILS(-EPERM, dup(fileno(f)), MELY_TO(1), &ops);
    fclose(f);
    int gone = sock();
    close(gone);
    ASSERT_OPEN_FAILS(-EBADF, gone, MELY_TO(1), &ops);

    static const char *const names[] = {"localhost", "", "example.com", "1.2.3", "127.0.0.1:80"};
    for (int i = 0; i < NELEM(names); i++)
        ck_assert_msg(mely_stream_connect(&rt, names[i], 9, MELY_TO(1), &ops, NULL, &s) ==
                          MELY_EINVAL,
                      "mely_stream_connect(\"%s\") is not MELY_EINVAL", names[i]);
    ck_assert_int_eq(mely_stream_connect(&rt, "127.0.0.1", 9, MELY_TO(1), NULL, NULL, &s),
                     MELY_EINVAL);
    ck_assert_int_eq(mely_stream_connect(&rt, "127.0.0.1", 9, MELY_TO(1), &both, NULL, &s),
                     MELY_EINVAL);

    mely_stream_ops_t inverted = ops;
    inverted.read_low = 10;
    inverted.read_high = 5;
    ASSERT_OPEN_FAILS(MELY_EINVAL, sock(), MELY_TO(1), &inverted);
    inverted = ops;
    inverted.write_low = 10;
    inverted.write_high = 5;
    ASSERT_OPEN_FAILS(MELY_EINVAL, sock(), MELY_TO(1), &inverted);

    struct conn *c = new_conn(0);
    ck_assert_ptr_nonnull(c);
    fd = sock();
    ck_assert_int_eq(mely_stream_open(&rt, fd, MELY_TO(ERR_COLOR), &ops, c, &s), 0);
    ck_assert_int_eq(mely_stream_fd(s), fd);
    ck_assert_uint_eq(mely_stream_color(s), ERR_COLOR);
    ck_assert_int_eq(mely_stream_write(NULL, "x", 1), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_write(s, NULL, 1), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_write(s, NULL, 0), 0);
    ck_assert_int_eq(mely_stream_printf(NULL, "x"), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_close(NULL, 0), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_watermark(NULL, MELY_READ, 0, 0), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_max_line(NULL, 10), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_timeouts(NULL, 1, 1), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_reading(NULL, 1), MELY_EINVAL);
    char *line;
    size_t len;
    ck_assert_int_eq(mely_stream_readln(NULL, &line, &len), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_write_buffer(NULL, NULL), MELY_EINVAL);

    ck_assert_int_eq(mely_post(&rt, ERR_COLOR, own_color_errors, s), 0);
    run_bounded(&rt, 30, "the stream's color's calls");
    assert_no_notes();
    ck_assert_int_eq(mely_stream_write(s, "x", 1), -EPIPE);
    ck_assert_int_ge(mely_shutdown(&rt), 0);
    assert_no_notes();
    ck_assert_uint_eq(atomic_load(&srv.closed_runs[0]), 1);
    ck_assert(fd_closed(fd));
    free_graveyard();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stream_close");

    TCase *tc = new_tcase(s, "close", 60);
    tcase_add_loop_test(tc, close_while_events_hold_the_stream, 0, 2);
    tcase_add_loop_test(tc, close_from_another_color_or_thread, 0, NELEM(elsewhere_modes));
    tcase_add_loop_test(tc, close_with_flush_sends_everything, 0, NELEM(elsewhere_modes));
    tcase_add_loop_test(tc, close_with_flush_ends_at_the_write_timeout, 0, 2);
    tcase_add_loop_test(tc, peer_reset_is_an_error, 0, 2);
    tcase_add_loop_test(tc, eof_reaches_the_event_callback, 0, 2);
    tcase_add_loop_test(tc, eof_without_event_callback_flushes_then_closes, 0, 2);

    tc = new_tcase(s, "shutdown", 60);
    tcase_add_loop_test(tc, shutdown_closes_open_streams, 0, 2);
    tcase_add_test(tc, shutdown_frees_referenced_streams);
    tcase_add_loop_test(tc, drain_flushes_closes_and_stops, 0, 2);
    tcase_add_test(tc, drain_ends_at_its_timeout);
    tcase_add_loop_test(tc, drain_with_nothing_open_stops, 0, 2);
    tcase_add_loop_test(tc, drain_waits_for_references, 0, 2);

    tc = new_tcase(s, "drain", 60);
    tcase_add_loop_test(tc, drain_answers_work_in_flight, 0, 4);
    tcase_add_loop_test(tc, drain_callback_finishes_the_exchange, 0, 3);
    tcase_add_loop_test(tc, drain_stops_reading, 0, 2);

    tc = new_tcase(s, "connect", 60);
    tcase_add_loop_test(tc, connect_to_own_listener, 0, NELEM(elsewhere_modes));
    tcase_add_loop_test(tc, connect_refused, 0, 2);
    tcase_add_test(tc, stream_errors);
    return mely_test_main(s);
}
