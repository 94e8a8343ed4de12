/* SPDX-License-Identifier: MIT */
/*
 * check_stream_conn.c: streams (include/mely/stream.h) as connections, through the
 * public API over loopback TCP (tests/api/streamtest.h: the server, conns and
 * clients):
 *  - half-close from the stream's color (mely_stream_shutdown): the peer
 *    reads the reply, then EOF, and can still send;
 *  - the lingering close: a close with flush while the peer's bytes wait
 *    unread ends with EOF after every byte, not a reset, and promptly once
 *    the peer closes;
 *  - the connect timeout (a listener whose backlog is full drops the SYN),
 *    and one that must not fire after the connection is up; a refused
 *    connect left open by its event callback leaves the runtime quiet;
 *  - the idle timeout: nothing read and nothing sent; output alone, or
 *    input alone, keeps a stream from being idle;
 *  - mely_stream_relay: a proxy inside the test between a client and an
 *    upstream echo thread (1 MiB each way, half-close end to end),
 *    backpressure both ways, and a side closed by the program.
 *
 * Handlers and helper threads never call ck_assert; every wait is bounded.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
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
#include <sys/time.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "tests/api/streamtest.h"

/* ---- half-close from the stream's color ---------------------------------------------------- */

/* Replies; "BYE" is answered, then the stream half-closes; what comes after
 * is read (and cannot be answered). */
static void half_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    if (c->done) {
        if (strcmp(line, "after") != 0)
            note("stream %u: \"%s\" after the half-close, expected \"after\"", c->id, line);
        CHECK_RC(mely_stream_write(s, "x", 1), -EPIPE);
        atomic_fetch_add(&srv.n, 1);
    } else if (strcmp(line, "BYE") == 0) {
        c->done = true;
        CHECK_RC(mely_stream_printf(s, "bye\n"), 0);
        CHECK_RC(mely_stream_shutdown(s), 0);
        CHECK_RC(mely_stream_shutdown(s), 0); /* "A second call does nothing." */
        CHECK_RC(mely_stream_write(s, "late\n", 5), -EPIPE);
        CHECK_RC(mely_stream_printf(s, "late\n"), -EPIPE);
    } else {
        reply_line(s, c, line, len);
    }
    leave(c);
}

static void *half_close_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, 0);
    bool ok = fd >= 0 && send_str(fd, "a\n") && expect(fd, "1:a\n") && send_str(fd, "BYE\n") &&
              expect(fd, "bye\n") && expect_eof(fd);
    /* Our side is still open: the stream reads it. */
    if (ok && !(send_str(fd, "after\n") && wait_count(&srv.n, 1, WAIT_MS))) {
        note("the stream did not read what came after its half-close");
        ok = false;
    }
    if (ok && atomic_load(&srv.closed) != 0) {
        note("the half-closed stream closed before the peer's EOF");
        ok = false;
    }
    ok = ok && shutdown(fd, SHUT_WR) == 0;
    return client_done(fd, ok);
}

/*
 * mely_stream_shutdown from the stream's line callback, right after its
 * reply: the client reads the reply, then EOF; a second call does nothing,
 * writes after it are -EPIPE; the client can still send, the stream reads
 * it, and closes at the client's EOF.
 */
START_TEST(half_close_from_the_stream)
{
    mely_stream_ops_t ops = {.line = half_line_cb, .closed = on_closed};
    serve(1 + (unsigned)_i, &ops, NULL, false, half_close_client, NULL, "half-close");
    assert_closed_once(1);
    stop_server();
}
END_TEST

/* ---- the lingering close ------------------------------------------------------------------ */

enum {
    LINGER_BYTES = 4 << 20,
    LINGER_JUNK = 8192,
    LINGER_SLEEP_MS = 200,
    LINGER_PROMPT_MS = 500, /* the closed callback after the peer's close: well under 1 s */
    LINGER_MS = 1000,       /* the longest linger (stream.h) */
    LINGER_EARLY_MS = 700,  /* how much of it may have passed when the client saw EOF */
    LINGER_LATE_MS = 2000,  /* how late the linger's end may come */
};

/* "GO": 4 MiB and a close with flush. Nothing after it may be delivered. */
static void linger_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    (void)len;
    if (strcmp(line, "GO") != 0 || c->done) {
        note("stream %u: line \"%.20s\" delivered after the close", c->id, line);
    } else if (write_pat(s, 0, LINGER_BYTES)) {
        c->done = true;
        CHECK_RC(mely_stream_close(s, MELY_STREAM_FLUSH), 0);
        atomic_fetch_add(&srv.n, 1);
    }
    leave(c);
}

static void *linger_client(void *arg)
{
    bool stay = arg != NULL; /* the client never closes: the linger's limit ends it */
    char junk[LINGER_JUNK];
    memset(junk, 'j', sizeof(junk));
    junk[sizeof(junk) - 1] = '\n';
    int fd = client_ready(1, SMALL_BUF);
    bool ok = fd >= 0 && send_str(fd, "GO\n");
    /* Bytes the server never reads: it stopped reading at the close. */
    if (ok && !wait_count(&srv.n, 1, WAIT_MS)) {
        note("the stream did not take \"GO\"");
        ok = false;
    }
    ok = ok && send_all(fd, junk, sizeof(junk));
    sleep_us(LINGER_SLEEP_MS * 1000);
    ok = ok && expect_pat(fd, 0, LINGER_BYTES) && expect_eof(fd);
    if (!ok)
        return client_done(fd, false);
    /* The stream waits for our EOF (at most 1 s): once we close, it closes. */
    uint64_t t = now_ns();
    if (stay) {
        wait_closed(1);
        uint64_t closed = atomic_load(&srv.t_closed);
        if (closed < t + (LINGER_MS - LINGER_EARLY_MS) * 1000000ull ||
            closed > t + (LINGER_MS + LINGER_LATE_MS) * 1000000ull)
            note("a peer that never closes: the linger ended %.0f ms after its EOF (at most %d "
                 "ms)",
                 ((double)closed - (double)t) / 1e6, LINGER_MS);
        return client_done(fd, false);
    }
    close(fd);
    wait_closed(1);
    uint64_t closed = atomic_load(&srv.t_closed);
    if (closed > t + LINGER_PROMPT_MS * 1000000ull)
        note("the closed callback ran %.0f ms after the peer closed (the linger lasts at most "
             "1 s)",
             ((double)closed - (double)t) / 1e6);
    return client_done(-1, false); /* waited above */
}

/*
 * The client sends "GO" and then 8 KB that the server never reads; on "GO"
 * the server writes 4 MiB and closes with MELY_STREAM_FLUSH. The client
 * sleeps 200 ms, then reads: exactly 4 MiB, then EOF, not a reset (the
 * stream shut its write side down and read the unread bytes away instead of
 * closing on them). When the client closes, the closed callback runs at
 * once, well within the linger's 1 s. A client that never closes is cut
 * when the linger's 1 s is over.
 */
START_TEST(lingering_close_delivers_everything)
{
    mely_stream_ops_t ops = {.line = linger_line_cb, .closed = on_closed};
    serve(1 + (unsigned)(_i % 2), &ops, setup_small_sndbuf, false, linger_client,
          _i == 2 ? &srv : NULL, _i == 2 ? "linger, the peer stays" : "linger");
    assert_closed_once(1);
    stop_server();
}
END_TEST

/* ---- the connect timeout ------------------------------------------------------------------ */

enum {
    CONNECT_TIMEOUT_MS = 200,
    CONNECT_LATE_MS = 3000, /* the kernel's SYN retries come at 1 and 3 s: none answers */
    FILLERS = 3,
};

/* The connecting stream's events: recorded; an error closes it. */
static void connect_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    record_event(c, what, err);
    if (what != MELY_STREAM_CONNECTED)
        mely_stream_close(s, 0);
    leave(c);
}

static const struct {
    unsigned workers;
    bool event;   /* the stream has an event callback */
    bool reached; /* it connects to the runtime's listener (else to a full backlog) */
} connect_modes[] = {{1, true, false}, {2, true, false}, {2, false, false}, {2, true, true}};

static mely_stream_ops_t connect_ops;
static _Atomic uint64_t connect_t0;

/* A listener whose backlog is full: listen(fd, 0), never accepted, and a
 * connection that fills its accept queue. Later SYNs are dropped. */
static int full_listener(unsigned *port, int fillers[FILLERS])
{
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 0) != 0 ||
        getsockname(l, (struct sockaddr *)&a, &len) != 0) {
        note("the full listener: %s", strerror(errno));
        return l;
    }
    *port = ntohs(a.sin_port);
    for (int i = 0; i < FILLERS; i++) {
        fillers[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fillers[i] >= 0 && connect(fillers[i], (struct sockaddr *)&a, sizeof(a)) != 0 &&
            errno != EINPROGRESS)
            note("a filler's connect: %s", strerror(errno));
    }
    sleep_us(50000); /* the first is in the accept queue, the others' SYNs dropped */
    return l;
}

static void *connect_timeout_client(void *arg)
{
    unsigned mode = (unsigned)(uintptr_t)arg;
    int fillers[FILLERS] = {-1, -1, -1}, l = -1;
    unsigned port = srv.port;
    if (!connect_modes[mode].reached)
        l = full_listener(&port, fillers);
    mely_color_t color = mely_color_pick(&srv.colors, 999);
    atomic_store(&connect_t0, now_ns());
    int err = mely_stream_connect(&rt, "127.0.0.1", port, MELY_TO(color), &connect_ops,
                                  new_conn(ID_EXTRA), NULL);
    if (err) {
        note("mely_stream_connect: %s", mely_strerror(err));
    } else if (connect_modes[mode].reached) {
        /* Up at once; the timeout must not fire later on. */
        if (!wait_count(&srv.events, 1, WAIT_MS))
            note("no MELY_STREAM_CONNECTED");
        sleep_us(3 * CONNECT_TIMEOUT_MS * 1000);
        if (atomic_load(&srv.events) != 1)
            note("event 0x%x (err %d) after the connection was up",
                 atomic_load(&srv.ev_what[ID_EXTRA]), atomic_load(&srv.ev_err[ID_EXTRA]));
        if (atomic_load(&srv.closed_runs[ID_EXTRA]))
            note("the connected stream closed");
        /* Its peer, our listener's stream, sees nothing; stop here. */
    } else if (!wait_count(&srv.closed, 1, CONNECT_LATE_MS + 1000)) {
        note("the connect to a full backlog did not end within %d ms (timeout %d ms)",
             CONNECT_LATE_MS + 1000, CONNECT_TIMEOUT_MS);
    }
    for (int i = 0; i < FILLERS; i++)
        if (fillers[i] >= 0)
            close(fillers[i]);
    if (l >= 0)
        close(l);
    mely_stop(&rt);
    return NULL;
}

/*
 * mely_stream_connect with connect_timeout_ns = 200 ms to a listener whose
 * backlog is full (listen(fd, 0), never accepted, one connection in its
 * queue: Linux drops the SYNs that follow, so the connect hangs): the event
 * callback gets MELY_STREAM_ERROR with -ETIMEDOUT after at least 200 ms and
 * well before the kernel would give up; without an event callback the
 * stream closes. A connect that succeeds (to the runtime's own listener)
 * is not timed out later.
 */
START_TEST(connect_timeout_fires)
{
    mely_stream_ops_t ops = {.line = line_cb, .closed = on_closed};
    connect_ops = (mely_stream_ops_t){.closed = on_closed};
    if (connect_modes[_i].event)
        connect_ops.event = connect_event_cb;
    connect_ops.connect_timeout_ns = CONNECT_TIMEOUT_MS * 1000000ull;
    serve(connect_modes[_i].workers, &ops, NULL, false, connect_timeout_client,
          (void *)(uintptr_t)_i, connect_modes[_i].reached ? "connect in time" : "connect timeout");
    if (connect_modes[_i].reached) {
        ck_assert_uint_eq(atomic_load(&srv.events), 1);
        ck_assert_uint_eq(atomic_load(&srv.ev_what[ID_EXTRA]), MELY_STREAM_CONNECTED);
    } else {
        ck_assert_uint_eq(atomic_load(&srv.closed_runs[ID_EXTRA]), 1);
        uint64_t t0 = atomic_load(&connect_t0);
        uint64_t t = connect_modes[_i].event ? atomic_load(&srv.t_event[0])
                                             : atomic_load(&srv.t_closed);
        ck_assert_msg(t >= t0 + (CONNECT_TIMEOUT_MS - EARLY_MS) * 1000000ull,
                      "the connect timed out %.1f ms after it began (timeout %d ms)",
                      ((double)t - (double)t0) / 1e6, CONNECT_TIMEOUT_MS);
        ck_assert_msg(t < t0 + CONNECT_LATE_MS * 1000000ull,
                      "the connect ended %.1f ms after it began (timeout %d ms)",
                      ((double)t - (double)t0) / 1e6, CONNECT_TIMEOUT_MS);
        if (connect_modes[_i].event) {
            ck_assert_uint_eq(atomic_load(&srv.events), 1);
            ck_assert_uint_eq(atomic_load(&srv.ev_what[ID_EXTRA]), MELY_STREAM_ERROR);
            ck_assert_int_eq(atomic_load(&srv.ev_err[ID_EXTRA]), -ETIMEDOUT);
        }
    }
    stop_server();
}
END_TEST

enum { SPIN_WATCH_MS = 300, SPIN_EVENTS = 100 };

/* Records, and leaves the stream open: the program's choice. */
static void keep_open_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    record_event(c, what, err);
    leave(c);
}

/* Events run by every worker so far. */
static uint64_t events_run(void)
{
    uint64_t n = 0;
    for (unsigned w = 0; w < mely_workers(&rt); w++)
        n += stats_of(&rt, w).events_run;
    return n;
}

static void *refused_open_client(void *arg)
{
    unsigned port = (unsigned)(uintptr_t)arg;
    static const mely_stream_ops_t ops = {.event = keep_open_event_cb, .closed = on_closed};
    mely_stream_t *s = NULL;
    mely_color_t color = mely_color_pick(&srv.colors, 999);
    int err = mely_stream_connect(&rt, "127.0.0.1", port, MELY_TO(color), &ops, new_conn(ID_EXTRA),
                                  &s);
    if (err == -ECONNREFUSED) { /* at once: nothing is left open */
        printf("connect refused at once\n");
    } else if (err) {
        note("mely_stream_connect: %s", mely_strerror(err));
    } else {
        mely_stream_ref(s); /* its event callback never closes it */
        if (!wait_count(&srv.events, 1, WAIT_MS))
            note("no event for a refused connect");
        sleep_us(QUIET_MS * 1000);
        uint64_t before = events_run();
        sleep_us(SPIN_WATCH_MS * 1000);
        uint64_t ran = events_run() - before;
        if (ran > SPIN_EVENTS)
            note("%llu events ran in %d ms after a refused connect, with nothing to do: the "
                 "failed socket's watch keeps firing",
                 (unsigned long long)ran, SPIN_WATCH_MS);
        CHECK_RC(mely_stream_close(s, 0), 0);
        wait_closed(1);
        mely_stream_unref(s);
    }
    mely_stop(&rt);
    return NULL;
}

/*
 * A refused connect whose event callback leaves the stream open (as it
 * may): MELY_STREAM_ERROR with -ECONNREFUSED, and then the runtime is
 * quiet (at most 100 events in 300 ms, none of them due) until the program
 * closes the stream.
 */
START_TEST(failed_connect_left_open_is_quiet)
{
    mely_stream_ops_t ops = {.line = line_cb, .closed = on_closed};
    serve(1 + (unsigned)_i, &ops, NULL, false, refused_open_client,
          (void *)(uintptr_t)free_port(), "a refused connect left open");
    if (atomic_load(&srv.events)) {
        ck_assert_uint_eq(atomic_load(&srv.ev_what[ID_EXTRA]), MELY_STREAM_ERROR);
        ck_assert_int_eq(atomic_load(&srv.ev_err[ID_EXTRA]), -ECONNREFUSED);
        ck_assert_uint_eq(atomic_load(&srv.closed_runs[ID_EXTRA]), 1);
    }
    stop_server();
}
END_TEST

/* ---- the idle timeout --------------------------------------------------------------------- */

enum { IDLE_MS = 600, IDLE_TICKS = 9 };

enum idle_how { IDLE_NOTHING, IDLE_OUTPUT, IDLE_INPUT };

static const struct {
    unsigned workers;
    enum idle_how how;
    bool event;
} idle_modes[] = {
    {1, IDLE_NOTHING, true}, {2, IDLE_NOTHING, true}, {2, IDLE_OUTPUT, true},
    {1, IDLE_OUTPUT, true},  {2, IDLE_INPUT, true},   {2, IDLE_NOTHING, false},
};

/* Takes the input, answers nothing. */
static void swallow_read_cb(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "read");
    struct evbuffer *in = mely_stream_input(s);
    evbuffer_drain(in, evbuffer_get_length(in));
    leave(c);
}

/* Says what came, then closes after flushing. */
static void idle_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    record_event(c, what, err);
    mely_stream_printf(s, "event 0x%x\n", what);
    mely_stream_close(s, MELY_STREAM_FLUSH);
    leave(c);
}

static void tick_event(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    int err = mely_stream_printf(srv.stream[0], "tick %u\n", i);
    if (err)
        note("tick %u: %s", i, mely_strerror(err));
}

static _Atomic uint64_t idle_from; /* a time before the stream's last activity */

static void *idle_client(void *arg)
{
    unsigned mode = (unsigned)(uintptr_t)arg;
    char want[64];
    atomic_store(&idle_from, now_ns());
    int fd = client_ready(1, 0);
    bool ok = fd >= 0;
    for (unsigned i = 0; ok && idle_modes[mode].how != IDLE_NOTHING && i < IDLE_TICKS; i++) {
        sleep_us(IDLE_MS / 3 * 1000);
        atomic_store(&idle_from, now_ns()); /* before the byte moves */
        if (idle_modes[mode].how == IDLE_OUTPUT) { /* from another color */
            int err = mely_post(&rt, OTHER_COLOR(0), tick_event, (void *)(uintptr_t)i);
            if (err)
                note("mely_post: %s", mely_strerror(err));
            snprintf(want, sizeof(want), "tick %u\n", i);
            ok = expect(fd, want);
        } else {
            ok = send_str(fd, "?");
        }
        if (atomic_load(&srv.events) != 0) {
            note("an idle timeout (0x%x) while the stream %s every %d ms",
                 atomic_load(&srv.ev_what[0]),
                 idle_modes[mode].how == IDLE_OUTPUT ? "sent" : "read", IDLE_MS / 3);
            ok = false;
        }
    }
    if (!ok)
        return client_done(fd, false);
    if (idle_modes[mode].event) {
        snprintf(want, sizeof(want), "event 0x%x\n",
                 MELY_STREAM_TIMEOUT | MELY_READ | MELY_WRITE);
        ok = expect(fd, want) && expect_eof(fd);
    } else {
        ok = expect_eof(fd); /* no event callback: a close */
    }
    wait_closed(1);
    uint64_t t = idle_modes[mode].event ? atomic_load(&srv.t_event[0])
                                        : atomic_load(&srv.t_closed);
    uint64_t from = atomic_load(&idle_from);
    if (ok && t < from + (IDLE_MS - EARLY_MS) * 1000000ull)
        note("the idle timeout came %.1f ms after the last activity (timeout %d ms)",
             ((double)t - (double)from) / 1e6, IDLE_MS);
    return client_done(fd, false); /* waited above */
}

/*
 * idle_timeout_ns 600 ms: a stream that reads nothing and sends nothing
 * gets MELY_STREAM_TIMEOUT | MELY_READ | MELY_WRITE, no sooner than 600 ms
 * after it began (without an event callback, it closes then). One whose
 * only activity is output from another color every 200 ms (for 1.8 s), or
 * input every 200 ms, is not idle; its timeout comes 600 ms after that stops.
 */
START_TEST(idle_timeout_fires_when_idle)
{
    mely_stream_ops_t ops = {.read = swallow_read_cb, .closed = on_closed};
    if (idle_modes[_i].event)
        ops.event = idle_event_cb;
    ops.idle_timeout_ns = IDLE_MS * 1000000ull;
    serve(idle_modes[_i].workers, &ops, NULL, true, idle_client, (void *)(uintptr_t)_i,
          "idle timeout");
    assert_closed_once(1);
    if (idle_modes[_i].event) {
        ck_assert_uint_eq(atomic_load(&srv.events), 1);
        ck_assert_uint_eq(atomic_load(&srv.ev_what[0]),
                          MELY_STREAM_TIMEOUT | MELY_READ | MELY_WRITE);
    }
    stop_server();
}
END_TEST

/* ---- relay ------------------------------------------------------------------------------- */

enum {
    RELAY_BYTES = 1 << 20,
    RELAY_ROUND = 65536,
    RELAY_HIGH = 65536,
    RELAY_LOW = 16384,
    RELAY_READ = 65536, /* what one read may add over the high mark (generous: reads take 16 KiB) */
    RELAY_MAX = 64 << 20,
};

enum relay_how { RELAY_ECHO, RELAY_BACKPRESSURE, RELAY_CANCEL, RELAY_DRAIN, RELAY_REFUSED };

static const struct {
    unsigned workers;
    enum relay_how how;
} relay_modes[] = {
    {1, RELAY_ECHO},   {2, RELAY_ECHO},   {1, RELAY_BACKPRESSURE}, {2, RELAY_BACKPRESSURE},
    {1, RELAY_CANCEL}, {2, RELAY_CANCEL},     {1, RELAY_DRAIN},        {2, RELAY_DRAIN},
    {2, RELAY_REFUSED},
};

static enum relay_how relay_how;   /* the test's, set before the runtime starts */
static unsigned refused_port;      /* RELAY_REFUSED: a port nobody listens on */
static atomic_bool refused_at_once; /* mely_stream_connect said so itself */

/* The upstream: a plain thread that echoes one connection until its EOF,
 * then closes. The relay's client starts and joins it. */
static struct {
    int lfd;
    atomic_int fd;          /* the connection, -1 before */
    atomic_uint port;       /* read by the relay's setup, on a worker */
    atomic_bool small;      /* idem: small socket buffers */
    pthread_t t;
    atomic_bool ended, saw_eof;
    _Atomic uint64_t echoed;
} up;

static void *upstream_main(void *arg)
{
    (void)arg;
    char buf[CHUNK];
    int fd = -1;
    struct pollfd p = {.fd = up.lfd, .events = POLLIN};
    if (poll(&p, 1, WAIT_MS) != 1 || (fd = accept(up.lfd, NULL, NULL)) < 0) {
        note("the upstream got no connection");
        goto out;
    }
    atomic_store(&up.fd, fd);
    struct timeval tv = {.tv_sec = WAIT_MS / 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    for (;;) {
        int end = 0;
        size_t n = recv_some(fd, buf, sizeof(buf), 2 * WAIT_MS, &end);
        if (end == 1) {
            atomic_store(&up.saw_eof, true);
            break;
        }
        if (n == 0)
            break; /* a reset (a relay cut short), or nothing for 20 s */
        for (size_t off = 0; off < n;) {
            ssize_t k = send(fd, buf + off, n - off, MSG_NOSIGNAL);
            if (k <= 0 && errno != EINTR)
                goto out;
            off += k > 0 ? (size_t)k : 0;
        }
        atomic_fetch_add(&up.echoed, n);
    }
out:
    if (fd >= 0)
        close(fd);
    atomic_store(&up.ended, true);
    return NULL;
}

/* Listens on 127.0.0.1 and starts the upstream's thread (noted if not). */
static bool upstream_start(bool small)
{
    int v = SMALL_BUF;
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    atomic_store(&up.fd, -1);
    atomic_store(&up.small, small);
    atomic_store(&up.ended, false);
    atomic_store(&up.saw_eof, false);
    atomic_store(&up.echoed, 0);
    up.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (up.lfd < 0 ||
        (small && /* inherited by the accepted socket */
         (setsockopt(up.lfd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) != 0 ||
          setsockopt(up.lfd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) != 0)) ||
        bind(up.lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(up.lfd, 4) != 0 ||
        getsockname(up.lfd, (struct sockaddr *)&a, &len) != 0) {
        note("the upstream's listener: %s", strerror(errno));
        if (up.lfd >= 0)
            close(up.lfd);
        return false;
    }
    atomic_store(&up.port, ntohs(a.sin_port));
    if (pthread_create(&up.t, NULL, upstream_main, NULL) != 0) {
        note("pthread_create failed");
        close(up.lfd);
        return false;
    }
    return true;
}

/* Joins the upstream's thread: its connection ends by itself when the
 * relay ends; if it does not, it is cut (noted). */
static void upstream_stop(void)
{
    if (!wait_flag(&up.ended, WAIT_MS)) {
        note("the upstream's connection did not end");
        int fd = atomic_load(&up.fd);
        if (fd >= 0)
            shutdown(fd, SHUT_RDWR);
    }
    pthread_join(up.t, NULL);
    close(up.lfd);
}

static mely_stream_t *relay_a, *relay_b; /* A's color (B holds a reference) */
static mely_stream_ops_t relay_b_ops;
static atomic_uint done_runs, b_connected;
static atomic_int done_err;
static int relay_arg;

static void relay_done(mely_stream_t *a, mely_stream_t *b, int err, void *arg)
{
    if (arg != &relay_arg)
        note("done's argument is %p, not the relay's", arg);
    if (mely_current_color() != (int)mely_stream_color(relay_a))
        note("done ran as color %d, not the streams'", mely_current_color());
    if (a != relay_a || b != relay_b)
        note("done(%s, %s): not the streams in the order given to mely_stream_relay",
             a == relay_a ? "a" : a == relay_b ? "b" : "?",
             b == relay_b ? "b" : b == relay_a ? "a" : "?");
    atomic_store(&done_err, err);
    atomic_fetch_add(&done_runs, 1);
}

/* The relay has A's event reports: none reaches the program's callback. */
static void a_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    note("the relayed stream's own event callback got 0x%x (err %d)", what, err);
    leave(c);
}

/* B's: MELY_STREAM_CONNECTED, and nothing else. */
static void b_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    if (what == MELY_STREAM_CONNECTED && err == 0)
        atomic_fetch_add(&b_connected, 1);
    else
        note("the connected side's event callback got 0x%x (err %d)", what, err);
    leave(c);
}

/* On A's color, as it is set up: B connects to the upstream, on the same
 * color, and the relay starts at once. */
static void relay_setup(mely_stream_t *a, struct conn *c)
{
    (void)c;
    struct conn *bc = new_conn(ID_EXTRA);
    mely_stream_t *b = NULL;
    unsigned port = relay_how == RELAY_REFUSED ? refused_port : atomic_load(&up.port);
    int err = bc ? mely_stream_connect(&rt, "127.0.0.1", port, MELY_TO(mely_stream_color(a)),
                                       &relay_b_ops, bc, &b)
                 : MELY_ENOMEM;
    if (err == -ECONNREFUSED && relay_how == RELAY_REFUSED) {
        atomic_store(&refused_at_once, true); /* nothing to relay */
        free(bc);
        mely_stream_close(a, 0);
        return;
    }
    if (err) {
        note("mely_stream_connect: %s", mely_strerror(err));
        free(bc);
        return;
    }
    if (atomic_load(&up.small))
        small_sndbuf(b);
    mely_stream_ref(b);
    relay_a = a;
    relay_b = b;
    CHECK_RC(mely_stream_relay(a, a, relay_done, &relay_arg), MELY_EINVAL);
    CHECK_RC(mely_stream_relay(NULL, b, relay_done, &relay_arg), MELY_EINVAL);
    CHECK_RC(mely_stream_relay(a, b, relay_done, &relay_arg), 0);
    CHECK_RC(mely_stream_relay(a, b, relay_done, &relay_arg), MELY_EINVAL); /* relayed */
}

/* Both outputs within the high mark and one read. */
static void check_relay_outputs(const char *when)
{
    size_t qa = mely_stream_queued(relay_a), qb = mely_stream_queued(relay_b);
    if (qa > RELAY_HIGH + RELAY_READ || qb > RELAY_HIGH + RELAY_READ)
        note("%s: the outputs hold %zu (client side) and %zu (upstream side) bytes; write_high "
             "is %d",
             when, qa, qb, RELAY_HIGH);
}

static void *relay_client(void *arg)
{
    enum relay_how how = relay_modes[(uintptr_t)arg].how;
    if (how != RELAY_REFUSED && !upstream_start(how == RELAY_BACKPRESSURE)) {
        mely_stop(&rt);
        return NULL;
    }
    int fd = client_ready(1, how == RELAY_BACKPRESSURE ? SMALL_BUF : 0);
    bool ok = fd >= 0;
    if (ok && (how == RELAY_ECHO || how == RELAY_DRAIN)) {
        for (uint64_t off = 0; ok && off < RELAY_BYTES; off += RELAY_ROUND) {
            send_pat(fd, off, RELAY_ROUND);
            ok = expect_pat(fd, off, RELAY_ROUND);
            if (ok && how == RELAY_DRAIN && off == 0) {
                /* The relay carries on through the drain: long after the
                 * runtime was quiet, the rounds go on. */
                CHECK_RC(mely_drain(&rt, 0), 0);
                sleep_us(QUIET_MS * 1000);
            }
        }
    } else if (ok && how == RELAY_REFUSED) {
        ok = expect_end(fd, NULL); /* the upstream side failed: both close */
    } else if (ok && how == RELAY_BACKPRESSURE) {
        uint64_t sent = send_until_stalled(fd, RELAY_MAX, pat, NULL, NULL, "the relay");
        check_relay_outputs("stalled");
        sleep_us(QUIET_MS * 1000);
        check_relay_outputs("stalled, 100 ms later");
        printf("relay backpressure: %llu bytes sent before the stall\n", (unsigned long long)sent);
        ok = expect_pat(fd, 0, sent);
    } else if (ok) {
        send_pat(fd, 0, RELAY_ROUND);
        ok = expect_pat(fd, 0, RELAY_ROUND);
        /* The program closes the upstream side: both close. */
        CHECK_RC(mely_stream_close(relay_b, 0), 0);
        ok = ok && expect_end(fd, NULL);
    }
    /* Half-close end to end: the upstream sees EOF and closes, we see EOF. */
    bool cut = how == RELAY_CANCEL || how == RELAY_REFUSED;
    ok = ok && (cut || (shutdown(fd, SHUT_WR) == 0 && expect_eof(fd)));
    if (ok)
        wait_closed(atomic_load(&refused_at_once) ? 1 : 2);
    if (how != RELAY_REFUSED)
        upstream_stop();
    if (ok && !cut && !atomic_load(&up.saw_eof))
        note("the upstream did not see EOF");
    if (how != RELAY_DRAIN)
        return client_done(fd, false); /* waited above */
    /* Our references are the last: once they go, the drain ends and
     * mely_run returns by itself. */
    close(fd);
    mely_stream_unref(relay_b);
    relay_b = NULL;
    mely_stream_unref(srv.stream[0]);
    srv.stream[0] = NULL;
    return NULL;
}

/*
 * A proxy inside the test: each accepted stream A connects B (same color)
 * to an upstream echo thread as it is set up, and relays A and B into each
 * other (mely_stream_relay; a relay of a stream with itself, of NULL, or of
 * a relayed pair is MELY_EINVAL).
 *  - Echo: the client sends 1 MiB of the pattern in 64 KiB rounds and
 *    reads it back exactly; then it half-closes: the upstream sees EOF and
 *    closes, the client sees EOF, done runs once with 0 (and the streams in
 *    the order given), both closed callbacks run; B's event callback got
 *    MELY_STREAM_CONNECTED, A's nothing.
 *  - Backpressure (write_high 64 KiB, small socket buffers): a client that
 *    sends without reading stalls while both outputs hold at most the high
 *    mark and one read; then it reads everything back.
 *  - The program closes B: done gets -ECANCELED, both close.
 *  - mely_drain after the first round: the relay carries on ("a relay needs
 *    no drain callback") until the client's half-close ends it; then the
 *    drain ends and mely_run returns by itself.
 *  - B's connect is refused: done gets -ECONNREFUSED, both close (or, had
 *    mely_stream_connect failed at once, A is closed by the setup).
 */
START_TEST(relay_proxies_both_ways)
{
    enum relay_how how = relay_modes[_i].how;
    mely_stream_ops_t ops = {.event = a_event_cb, .closed = on_closed};
    relay_b_ops = (mely_stream_ops_t){.event = b_event_cb, .closed = on_closed};
    if (how == RELAY_BACKPRESSURE) {
        ops.write_high = relay_b_ops.write_high = RELAY_HIGH;
        ops.write_low = relay_b_ops.write_low = RELAY_LOW;
    }
    atomic_store(&done_runs, 0);
    atomic_store(&b_connected, 0);
    atomic_store(&refused_at_once, false);
    relay_a = relay_b = NULL;
    relay_how = how;
    if (how == RELAY_REFUSED)
        refused_port = free_port();
    static const char *const names[] = {
        [RELAY_ECHO] = "relay",
        [RELAY_BACKPRESSURE] = "relay, backpressure",
        [RELAY_CANCEL] = "relay, cancel",
        [RELAY_DRAIN] = "relay, drain",
        [RELAY_REFUSED] = "relay, refused",
    };
    const char *what = names[how];
    serve(relay_modes[_i].workers, &ops, relay_setup, true, relay_client, (void *)(uintptr_t)_i,
          what);
    if (relay_b)
        mely_stream_unref(relay_b);
    assert_closed_once(1);
    if (atomic_load(&refused_at_once)) {
        printf("relay, refused: mely_stream_connect failed at once\n");
        ck_assert_uint_eq(atomic_load(&done_runs), 0);
        stop_server();
        return;
    }
    ck_assert_uint_eq(atomic_load(&done_runs), 1);
    ck_assert_int_eq(atomic_load(&done_err), how == RELAY_CANCEL    ? -ECANCELED
                                             : how == RELAY_REFUSED ? -ECONNREFUSED
                                                                    : 0);
    ck_assert_uint_eq(atomic_load(&b_connected), how == RELAY_REFUSED ? 0 : 1);
    ck_assert_uint_eq(atomic_load(&srv.closed_runs[ID_EXTRA]), 1);
    if (how == RELAY_ECHO || how == RELAY_DRAIN)
        ck_assert_uint_eq(atomic_load(&up.echoed), RELAY_BYTES);
    stop_server();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stream_conn");

    TCase *tc = new_tcase(s, "ends", 60);
    tcase_add_loop_test(tc, half_close_from_the_stream, 0, 2);
    tcase_add_loop_test(tc, lingering_close_delivers_everything, 0, 3);

    tc = new_tcase(s, "timeouts", 60);
    tcase_add_loop_test(tc, connect_timeout_fires, 0, NELEM(connect_modes));
    tcase_add_loop_test(tc, failed_connect_left_open_is_quiet, 0, 2);
    tcase_add_loop_test(tc, idle_timeout_fires_when_idle, 0, NELEM(idle_modes));

    tc = new_tcase(s, "relay", 60);
    tcase_add_loop_test(tc, relay_proxies_both_ways, 0, NELEM(relay_modes));
    return mely_test_main(s);
}
