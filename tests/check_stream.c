/*
 * check_stream.c: streams (mely/stream.h) through the public API, over
 * loopback TCP, against clients on plain blocking sockets in helper threads:
 *  - lines split across reads (byte by byte, CRLF split between reads, many
 *    lines in one write), from the line callback and from mely_stream_readln;
 *    lines of exactly the maximum length, and longer ones: -EMSGSIZE to the
 *    event callback, a close without one, readln taking nothing;
 *  - backpressure: the read low and high watermarks; a slow reader under the
 *    write high watermark (the output stays bounded, every byte arrives, the
 *    drained callback runs);
 *  - read and write timeouts (reset by activity; the event, or a close);
 *  - writes from other colors and from a foreign thread (ordered per writer,
 *    all delivered; -EPIPE after a close);
 *  - closing: from the stream's color while events holding references are out
 *    on other colors, from another color and a foreign thread, with
 *    MELY_STREAM_FLUSH; EOF with and without an event callback;
 *  - mely_shutdown with open streams, mely_drain (flushing, and cut short by
 *    its timeout), mely_stream_connect, argument errors.
 *
 * Every connection has a `struct conn` as its streams' argument. Its closed
 * callback does not free it: it goes to a graveyard freed after the runtime's
 * shutdown, so that a callback arriving after the closed one is seen (and
 * noted) in every build, not only under ASan.
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
#include <netinet/tcp.h>
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

#include "mely/mely.h"
#include "mely/stream.h"
#include "tests/testutil.h"

#define ACCEPT_COLOR ((mely_color_t)1)
/* Colors of events that are not the streams' (below the ranges' floor). */
#define OTHER_COLOR(i) ((mely_color_t)(100 + (i)))

enum {
    WAIT_MS = 10000, /* the bound on anything that must happen */
    QUIET_MS = 100,  /* how long something that must not happen is given */
    MAXCONN = 16,
    ID_EXTRA = MAXCONN - 1, /* the conn of a stream not accepted (connect, socketpair) */
    SMALL_BUF = 65536,      /* SO_RCVBUF/SO_SNDBUF where a peer must stall: no autotuning */
    CHUNK = 16384,
};

/* ---- connections, and the checks every callback makes ------------------------------------ */

struct conn {
    unsigned id;
    mely_stream_t *s;   /* set before the setup event is posted */
    atomic_int inside;  /* callbacks of the stream running now */
    atomic_bool closed; /* its closed callback ran */
    /* the stream's color only: */
    uint64_t got;       /* bytes taken from the input (and checked) */
    size_t skipped;     /* readln: bytes of a line too long, discarded so far */
    bool discarding;    /* readln: inside a line too long */
    bool timer_pending; /* read high watermark: a drain is due */
    bool done;
    unsigned lines, events, timeouts;
    uint64_t produced;
};

static struct {
    mely_listener_t *l;
    unsigned port;
    mely_color_range_t colors; /* the streams' colors */
    mely_stream_ops_t ops;
    void (*setup)(mely_stream_t *s, struct conn *c); /* on the stream's color */
    bool keep;                       /* the setup keeps a reference in stream[] */
    atomic_uint accepted, ready, closed;
    atomic_uint closed_runs[MAXCONN];
    mely_stream_t *stream[MAXCONN]; /* written before `ready` counts the stream */
    int fd[MAXCONN];                /* idem */
    atomic_uint events, ev_what[MAXCONN];
    atomic_int ev_err[MAXCONN];
    _Atomic uint64_t t_event[4], t_closed; /* when (now_ns) */
    atomic_uint n;                         /* what a test counts */
    _Atomic uint64_t maxlen;               /* what a test measures */
} srv;

static struct conn *graveyard[2 * MAXCONN];
static atomic_uint buried;

static struct conn *new_conn(unsigned id)
{
    struct conn *c = calloc(1, sizeof(*c));
    if (!c)
        note("out of memory");
    else
        c->id = id;
    return c;
}

static void bury(struct conn *c)
{
    unsigned i = atomic_fetch_add(&buried, 1);
    if (i < (unsigned)NELEM(graveyard))
        graveyard[i] = c;
    else
        note("more streams closed than the test opened");
}

static void free_graveyard(void)
{
    unsigned n = atomic_load(&buried);
    for (unsigned i = 0; i < n && i < (unsigned)NELEM(graveyard); i++)
        free(graveyard[i]);
    atomic_store(&buried, 0);
}

static void max_store(_Atomic uint64_t *v, uint64_t x)
{
    uint64_t old = atomic_load(v);
    while (old < x && !atomic_compare_exchange_weak(v, &old, x)) {
    }
}

/* At the start of every callback but closed: on the stream's color, alone,
 * and never after the closed callback. */
static void enter(mely_stream_t *s, struct conn *c, const char *cb)
{
    int color = mely_current_color();
    if (color != (int)mely_stream_color(s))
        note("stream %u: %s callback ran as color %d, not the stream's %u", c->id, cb, color,
             (unsigned)mely_stream_color(s));
    if (atomic_fetch_add(&c->inside, 1) != 0)
        note("stream %u: %s callback ran beside another of its callbacks", c->id, cb);
    if (atomic_load(&c->closed))
        note("stream %u: %s callback ran after the closed callback", c->id, cb);
}

static void leave(struct conn *c)
{
    atomic_fetch_sub(&c->inside, 1);
}

static void record_event(struct conn *c, unsigned what, int err)
{
    atomic_store(&srv.ev_what[c->id], what);
    atomic_store(&srv.ev_err[c->id], err);
    unsigned k = atomic_fetch_add(&srv.events, 1);
    if (k < 4)
        atomic_store(&srv.t_event[k], now_ns());
    c->events++;
}

/* Runs once per stream, last: on its color, or on mely_shutdown's thread. */
static void on_closed(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    int color = mely_current_color();
    if (color >= 0 && color != (int)mely_stream_color(s))
        note("stream %u: closed callback ran as color %d, not the stream's %u", c->id, color,
             (unsigned)mely_stream_color(s));
    if (atomic_fetch_add(&c->inside, 1) != 0)
        note("stream %u: closed callback ran beside another of its callbacks", c->id);
    if (atomic_exchange(&c->closed, true))
        note("stream %u: closed callback ran twice", c->id);
    if (mely_stream_fd(s) != -1)
        note("stream %u: mely_stream_fd() is %d in the closed callback", c->id, mely_stream_fd(s));
    int err = mely_stream_write(s, "x", 1);
    if (err != -EPIPE)
        note("stream %u: a write from the closed callback returned %d, not -EPIPE", c->id, err);
    atomic_fetch_sub(&c->inside, 1);
    atomic_fetch_add(&srv.closed_runs[c->id], 1);
    max_store(&srv.t_closed, now_ns());
    bury(c);
    atomic_fetch_add(&srv.closed, 1);
}

/* ---- the server: a listener whose connections become streams of srv.ops ------------------ */

/* The first event of every stream's color: srv.setup (watermarks, timeouts:
 * "the stream's color only"), then the stream counts as ready. Clients send
 * nothing before that. */
static void setup_event(void *arg)
{
    struct conn *c = arg;
    mely_stream_t *s = c->s;
    if (mely_current_color() != (int)mely_stream_color(s))
        note("stream %u: setup ran as color %d", c->id, mely_current_color());
    if (!atomic_load(&c->closed)) {
        if (srv.setup)
            srv.setup(s, c);
        srv.fd[c->id] = mely_stream_fd(s);
        if (srv.keep) {
            mely_stream_ref(s);
            srv.stream[c->id] = s;
        }
    }
    atomic_fetch_add(&srv.ready, 1);
    mely_stream_unref(s);
}

/* Makes fd a stream of srv.ops on a color of the range, with a conn of id. */
static void open_conn(int fd, unsigned id, mely_color_t color)
{
    struct conn *c = new_conn(id);
    if (!c) {
        close(fd);
        return;
    }
    mely_stream_t *s = NULL;
    int err = mely_stream_open(&rt, fd, MELY_TO(color), &srv.ops, c, &s);
    if (err) {
        note("mely_stream_open: %s", mely_strerror(err));
        free(c);
        return;
    }
    c->s = s; /* no callback reads it: they come after data the client sends after setup */
    mely_stream_ref(s); /* the setup event's */
    err = mely_post(&rt, color, setup_event, c);
    if (err) {
        note("posting the setup: %s", mely_strerror(err));
        mely_stream_unref(s);
    }
}

static void on_accept(int fd, const struct sockaddr *peer, unsigned peerlen, void *arg)
{
    (void)peer;
    (void)peerlen;
    (void)arg;
    unsigned id = atomic_fetch_add(&srv.accepted, 1);
    if (id >= ID_EXTRA) {
        note("more connections accepted than the test made");
        close(fd);
        return;
    }
    open_conn(fd, id, mely_color_pick(&srv.colors, (uint64_t)fd));
}

static void start_server(unsigned workers, const mely_stream_ops_t *ops,
                         void (*setup)(mely_stream_t *, struct conn *), bool keep)
{
    memset(&srv, 0, sizeof(srv));
    srv.ops = *ops;
    srv.setup = setup;
    srv.keep = keep;
    init_runtime(&rt, workers, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    int err = mely_color_range(&rt, 64, &srv.colors);
    ck_assert_msg(err == 0, "mely_color_range: %s", mely_strerror(err));
    err = mely_listen(&rt, NULL, 0, 0, 0, MELY_TO(ACCEPT_COLOR), on_accept, NULL, &srv.l);
    ck_assert_msg(err == 0, "mely_listen: %s", mely_strerror(err));
    srv.port = mely_listener_port(srv.l);
}

/* Drops the references the setup kept (after the shutdown: closed streams). */
static void release_kept(void)
{
    for (int i = 0; i < MAXCONN; i++)
        if (srv.stream[i]) {
            mely_stream_unref(srv.stream[i]);
            srv.stream[i] = NULL;
        }
}

static void stop_server(void)
{
    if (srv.l)
        ck_assert_int_eq(mely_listener_close(srv.l), 0);
    srv.l = NULL;
    int rc = mely_shutdown(&rt);
    ck_assert_msg(rc >= 0, "mely_shutdown: %s", mely_strerror(rc));
    release_kept();
    free_graveyard();
}

/* Each of the first n streams' closed callback ran exactly once. */
static void assert_closed_once(unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        ck_assert_msg(atomic_load(&srv.closed_runs[i]) == 1,
                      "stream %u: closed callback ran %u times", i,
                      atomic_load(&srv.closed_runs[i]));
}

static const char *shape_of(unsigned workers, const char *what)
{
    static char buf[128];
    snprintf(buf, sizeof(buf), "%s, %u worker%s", what, workers, workers > 1 ? "s" : "");
    return buf;
}

/* ---- the clients ------------------------------------------------------------------------- */

static int client_connect(unsigned port, int bufsize)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        note("socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (bufsize && (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof(bufsize)) != 0 ||
                    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof(bufsize)) != 0))
        note("setsockopt: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        note("connect: %s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Connects a client and waits until the n-th stream is set up. */
static int client_ready(unsigned n, int bufsize)
{
    int fd = client_connect(srv.port, bufsize);
    if (fd >= 0 && !wait_count(&srv.ready, n, WAIT_MS)) {
        note("stream %u not set up within %u ms", n, WAIT_MS);
        close(fd);
        return -1;
    }
    return fd;
}

static bool send_all(int fd, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            note("send: %s", strerror(errno));
            return false;
        }
        p += k;
        n -= (size_t)k;
    }
    return true;
}

static bool send_str(int fd, const char *s)
{
    return send_all(fd, s, strlen(s));
}

/* One recv() of at most n bytes, waiting at most ms. Returns the bytes
 * received; *end becomes 1 at EOF, -errno on an error (a reset), else 0. */
static size_t recv_some(int fd, void *buf, size_t n, unsigned ms, int *end)
{
    uint64_t deadline = now_ns() + (uint64_t)ms * 1000000u;
    *end = 0;
    for (;;) {
        uint64_t now = now_ns();
        if (now >= deadline)
            return 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)((deadline - now) / 1000000u) + 1);
        if (r < 0 && errno != EINTR) {
            *end = -errno;
            return 0;
        }
        if (r <= 0)
            continue;
        ssize_t k = recv(fd, buf, n, 0);
        if (k > 0)
            return (size_t)k;
        if (k == 0) {
            *end = 1;
            return 0;
        }
        if (errno != EINTR && errno != EAGAIN) {
            *end = -errno;
            return 0;
        }
    }
}

/* Receives n bytes (fewer at EOF, an error, or after ms). */
static size_t recv_upto(int fd, void *buf, size_t n, unsigned ms, int *end)
{
    uint64_t deadline = now_ns() + (uint64_t)ms * 1000000u;
    size_t got = 0;
    *end = 0;
    while (got < n && !*end) {
        uint64_t now = now_ns();
        if (now >= deadline)
            break;
        got += recv_some(fd, (char *)buf + got, n - got,
                         (unsigned)((deadline - now) / 1000000u) + 1, end);
    }
    return got;
}

/* The next bytes on fd are exactly `want`. */
static bool expect(int fd, const char *want)
{
    size_t n = strlen(want);
    char *buf = malloc(n + 1);
    int end = 0;
    size_t got = buf ? recv_upto(fd, buf, n, WAIT_MS, &end) : 0;
    bool ok = buf && got == n && memcmp(buf, want, n) == 0;
    if (!ok && buf) {
        buf[got] = '\0';
        note("expected \"%.80s\" (%zu bytes), got \"%.80s\" (%zu bytes%s)", want, n, buf, got,
             end == 1 ? ", then EOF" : end < 0 ? ", then an error" : "");
    }
    free(buf);
    return ok;
}

/* Nothing arrives on fd for QUIET_MS. */
static void expect_quiet(int fd, const char *why)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, QUIET_MS) != 0)
        note("%s: the server replied (poll revents 0x%x)", why, p.revents);
}

/* The connection ends (EOF, or a reset when the server closed with input
 * unread) within WAIT_MS; bytes before it are counted in *extra (NULL: none
 * may come). */
static bool expect_end(int fd, uint64_t *extra)
{
    char buf[CHUNK];
    uint64_t deadline = now_ns() + (uint64_t)WAIT_MS * 1000000u, n = 0;
    for (;;) {
        uint64_t now = now_ns();
        if (now >= deadline) {
            note("the connection did not end within %u ms", WAIT_MS);
            return false;
        }
        int end;
        n += recv_some(fd, buf, sizeof(buf), (unsigned)((deadline - now) / 1000000u) + 1, &end);
        if (end == 1 || end == -ECONNRESET)
            break;
        if (end < 0) {
            note("recv: %s", strerror(-end));
            return false;
        }
    }
    if (extra)
        *extra = n;
    else if (n)
        note("%llu bytes arrived where the connection should have ended", (unsigned long long)n);
    return true;
}

/* A line (without its "\n") read through a small buffer. */
struct lr {
    int fd;
    size_t len;
    char buf[8192];
};

static bool next_line(struct lr *lr, char *out, size_t cap, unsigned ms)
{
    uint64_t deadline = now_ns() + (uint64_t)ms * 1000000u;
    for (;;) {
        char *nl = memchr(lr->buf, '\n', lr->len);
        if (nl) {
            size_t n = (size_t)(nl - lr->buf), k = n < cap - 1 ? n : cap - 1;
            memcpy(out, lr->buf, k);
            out[k] = '\0';
            lr->len -= n + 1;
            memmove(lr->buf, nl + 1, lr->len);
            return true;
        }
        uint64_t now = now_ns();
        if (lr->len == sizeof(lr->buf) || now >= deadline)
            return false;
        int end;
        lr->len += recv_some(lr->fd, lr->buf + lr->len, sizeof(lr->buf) - lr->len,
                             (unsigned)((deadline - now) / 1000000u) + 1, &end);
        if (end)
            return false;
    }
}

/* ---- bulk data: a pattern that tells every offset apart ----------------------------------- */

static uint8_t pat(uint64_t off)
{
    return (uint8_t)((off * 0x9E3779B97F4A7C15ull) >> 56);
}

static void fill_pat(uint8_t *b, uint64_t off, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b[i] = pat(off + i);
}

/* The index of the first byte of b[0..n) that is not the pattern at off (n: none). */
static size_t bad_pat(const uint8_t *b, uint64_t off, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != pat(off + i))
            return i;
    return n;
}

/* Appends n bytes of the pattern from off to s's output (any thread). */
static bool write_pat(mely_stream_t *s, uint64_t off, uint64_t n)
{
    uint8_t buf[CHUNK];
    while (n > 0) {
        size_t k = n < sizeof(buf) ? (size_t)n : sizeof(buf);
        fill_pat(buf, off, k);
        int err = mely_stream_write(s, buf, k);
        if (err) {
            note("mely_stream_write: %s", mely_strerror(err));
            return false;
        }
        off += k;
        n -= k;
    }
    return true;
}

/* Takes the whole input, checking that it continues the pattern at c->got. */
static void take_pat(mely_stream_t *s, struct conn *c)
{
    struct evbuffer *in = mely_stream_input(s);
    uint8_t buf[CHUNK];
    int k;
    while ((k = evbuffer_remove(in, buf, sizeof(buf))) > 0) {
        size_t bad = bad_pat(buf, c->got, (size_t)k);
        if (bad < (size_t)k)
            note("stream %u: input byte %llu is not what the client sent", c->id,
                 (unsigned long long)(c->got + bad));
        c->got += (uint64_t)k;
    }
}

/* The next n bytes on fd are the pattern from off. */
static bool expect_pat(int fd, uint64_t off, uint64_t n)
{
    uint8_t buf[CHUNK];
    uint64_t deadline = now_ns() + (uint64_t)WAIT_MS * 1000000u, got = 0;
    while (got < n) {
        uint64_t now = now_ns();
        int end = 0;
        size_t want = n - got < sizeof(buf) ? (size_t)(n - got) : sizeof(buf), k = 0;
        if (now < deadline)
            k = recv_some(fd, buf, want, (unsigned)((deadline - now) / 1000000u) + 1, &end);
        if (k == 0) {
            note("%llu of %llu bytes arrived (%s)", (unsigned long long)got,
                 (unsigned long long)n,
                 end == 1 ? "EOF" : end < 0 ? strerror(-end) : "timed out");
            return false;
        }
        size_t bad = bad_pat(buf, off + got, k);
        if (bad < k) {
            note("byte %llu differs from what the server wrote", (unsigned long long)(got + bad));
            return false;
        }
        got += k;
    }
    return true;
}

/* Reads the pattern from off until the connection ends; returns the bytes. */
static uint64_t pat_to_end(int fd, uint64_t off)
{
    uint8_t buf[CHUNK];
    uint64_t deadline = now_ns() + (uint64_t)WAIT_MS * 1000000u, got = 0;
    for (;;) {
        uint64_t now = now_ns();
        if (now >= deadline) {
            note("the connection did not end within %u ms", WAIT_MS);
            return got;
        }
        int end;
        size_t k = recv_some(fd, buf, sizeof(buf), (unsigned)((deadline - now) / 1000000u) + 1, &end);
        if (bad_pat(buf, off + got, k) < k) {
            note("byte %llu differs from what the server wrote", (unsigned long long)(off + got));
            return got;
        }
        got += k;
        if (end == 1 || end == -ECONNRESET)
            return got;
        if (end < 0) {
            note("recv: %s", strerror(-end));
            return got;
        }
    }
}

/* Makes the server's socket buffer small (on the stream's color): what the
 * peer does not read stays in the stream's output. */
static void small_sndbuf(mely_stream_t *s)
{
    int v = SMALL_BUF;
    if (setsockopt(mely_stream_fd(s), SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) != 0)
        note("SO_SNDBUF: %s", strerror(errno));
}

/* ---- lines ------------------------------------------------------------------------------- */

enum { MAX_LINE = 100, MANY_LINES = 2000 };

static void reply_line(mely_stream_t *s, struct conn *c, char *line, size_t len)
{
    if (line[len] != '\0')
        note("stream %u: line[len] is not 0 (a line of %zu bytes)", c->id, len);
    else if (strlen(line) != len)
        note("stream %u: a line of %zu bytes has a 0 at %zu", c->id, len, strlen(line));
    int err = mely_stream_printf(s, "%zu:%s\n", len, line);
    if (err)
        note("stream %u: mely_stream_printf: %s", c->id, mely_strerror(err));
    c->lines++;
}

static void line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    reply_line(s, c, line, len);
    leave(c);
}

/* readln: discards the rest of a line too long, through its "\n"; says how
 * many bytes were skipped once it ends. Returns whether it ended. */
static bool skip_line(mely_stream_t *s, struct conn *c)
{
    struct evbuffer *in = mely_stream_input(s);
    struct evbuffer_ptr eol = evbuffer_search(in, "\n", 1, NULL);
    size_t n = eol.pos >= 0 ? (size_t)eol.pos + 1 : evbuffer_get_length(in);
    evbuffer_drain(in, n);
    c->skipped += n;
    if (eol.pos < 0)
        return false;
    c->discarding = false;
    mely_stream_printf(s, "skipped %zu\n", c->skipped);
    return true;
}

/* The read callback of the readln tests: lines as line_cb replies them;
 * -EMSGSIZE must leave the input as it was, and more than max_line in it. */
static void readln_cb(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "read");
    struct evbuffer *in = mely_stream_input(s);
    for (;;) {
        if (c->discarding && !skip_line(s, c))
            break;
        char *line = (char *)c; /* readln must set it */
        size_t len = 0, before = evbuffer_get_length(in);
        int r = mely_stream_readln(s, &line, &len);
        if (r == 1) {
            reply_line(s, c, line, len);
        } else if (r == 0) {
            if (line != NULL)
                note("stream %u: readln returned 0 and left *line set", c->id);
            break;
        } else if (r == -EMSGSIZE) {
            if (evbuffer_get_length(in) != before)
                note("stream %u: readln's -EMSGSIZE took %zu bytes", c->id,
                     before - evbuffer_get_length(in));
            if (before <= MAX_LINE)
                note("stream %u: -EMSGSIZE with %zu bytes in the input", c->id, before);
            c->discarding = true;
            c->skipped = 0;
        } else {
            note("stream %u: readln: %d (%s)", c->id, r, mely_strerror(r));
            break;
        }
    }
    leave(c);
}

static const struct {
    unsigned workers;
    bool readln;
} line_modes[] = {{1, false}, {2, false}, {1, true}, {2, true}};

static void *lines_client(void *arg)
{
    (void)arg;
    char *exp = NULL, *many = NULL, *got = NULL;
    size_t explen = 0, manylen = 0;
    int fd = client_ready(1, 0);
    if (fd < 0)
        goto out;
    FILE *e = open_memstream(&exp, &explen), *m = open_memstream(&many, &manylen);
    if (!e || !m) {
        note("open_memstream: %s", strerror(errno));
        goto out;
    }
    for (const char *p = "byte by byte\r\n"; *p; p++) { /* one segment each (TCP_NODELAY) */
        send_all(fd, p, 1);
        sleep_us(2000);
    }
    fprintf(e, "12:byte by byte\n");
    send_str(fd, "split crlf\r");
    sleep_us(20000);
    send_str(fd, "\n");
    fprintf(e, "10:split crlf\n");
    send_str(fd, "\n\r\na\rb\n"); /* two empty lines; a CR inside a line stays */
    fprintf(e, "0:\n0:\n3:a\rb\n");
    for (unsigned i = 0; i < MANY_LINES; i++) {
        int n = fprintf(m, "line %u of many%s", i, i % 2 ? "\r\n" : "\n");
        fprintf(e, "%d:line %u of many\n", n - (i % 2 ? 2 : 1), i);
    }
    fclose(m);
    fclose(e);
    send_all(fd, many, manylen);
    shutdown(fd, SHUT_WR);
    got = malloc(explen + 64);
    int end = 0;
    size_t n = got ? recv_upto(fd, got, explen + 64, WAIT_MS, &end) : 0;
    size_t same = 0;
    while (same < n && same < explen && got[same] == exp[same])
        same++;
    if (n != explen || same != explen)
        note("%zu bytes of replies, %zu expected; the first %zu match (then \"%.30s\")", n, explen,
             same, same < n ? got + same : "");
    if (end != 1)
        note("no EOF after the replies: the stream should close after flushing on EOF");
    if (!wait_count(&srv.closed, 1, WAIT_MS))
        note("closed callback did not run");
out:
    if (fd >= 0)
        close(fd);
    free(exp);
    free(many);
    free(got);
    mely_stop(&rt);
    return NULL;
}

/*
 * A line sent byte by byte (2 ms apart), a CRLF split between two reads, empty
 * lines and a CR inside a line, 2,000 lines (LF and CRLF) in one write; then
 * EOF. Each line is replied as "len:line" (checking line[len] == 0): from the
 * line callback, and from mely_stream_readln in a read callback. Without an
 * event callback, EOF closes the stream after the replies are sent.
 */
START_TEST(lines_split_across_reads)
{
    mely_stream_ops_t ops = {.closed = on_closed};
    if (line_modes[_i].readln)
        ops.read = readln_cb;
    else
        ops.line = line_cb;
    start_server(line_modes[_i].workers, &ops, NULL, false);
    run_with_helper(&rt, lines_client, NULL, 30,
                    shape_of(line_modes[_i].workers, line_modes[_i].readln ? "readln" : "line"));
    assert_closed_once(1);
    stop_server();
}
END_TEST

/* ---- lines too long ---------------------------------------------------------------------- */

enum huge_how { BY_EVENT, BY_DEFAULT, BY_READLN };

static const struct {
    unsigned workers;
    enum huge_how how;
    bool eol; /* the line too long has its end of line (else it never ends) */
} huge_modes[] = {
    {2, BY_EVENT, true}, {1, BY_EVENT, false}, {2, BY_EVENT, false},
    {2, BY_DEFAULT, false}, {2, BY_READLN, true}, {1, BY_READLN, true},
};

static void setup_max_line(mely_stream_t *s, struct conn *c)
{
    int err = mely_stream_max_line(s, MAX_LINE);
    if (err)
        note("stream %u: mely_stream_max_line: %s", c->id, mely_strerror(err));
}

/* Says what it got, then closes after flushing that. */
static void error_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    record_event(c, what, err);
    mely_stream_printf(s, "E%u %d\n", what, err);
    int rc = mely_stream_close(s, MELY_STREAM_FLUSH);
    if (rc)
        note("stream %u: mely_stream_close: %s", c->id, mely_strerror(rc));
    leave(c);
}

static char *repeat(char ch, size_t n, const char *tail)
{
    char *b = malloc(n + strlen(tail) + 1);
    if (!b) {
        note("out of memory");
        return NULL;
    }
    memset(b, ch, n);
    strcpy(b + n, tail);
    return b;
}

/* Sends n times ch then tail (in one write), and expects the reply. */
static void send_run(int fd, char ch, size_t n, const char *tail, const char *reply)
{
    char *b = repeat(ch, n, tail);
    if (!b)
        return;
    send_str(fd, b);
    if (reply)
        expect(fd, reply);
    free(b);
}

static void *huge_client(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    int fd = client_ready(1, 0);
    if (fd < 0)
        goto out;
    char *max_a = repeat('a', MAX_LINE, ""), *max_c = repeat('c', MAX_LINE, "");
    char reply[MAX_LINE + 16];
    send_str(fd, "ok\n");
    expect(fd, "2:ok\n");
    /* Exactly the maximum: with LF, CRLF, and a CRLF split between reads. */
    snprintf(reply, sizeof(reply), "%d:%s\n", MAX_LINE, max_a ? max_a : "");
    send_run(fd, 'a', MAX_LINE, "\n", reply);
    snprintf(reply, sizeof(reply), "%d:%s\n", MAX_LINE, max_a ? max_a : "");
    send_run(fd, 'a', MAX_LINE, "\r\n", reply);
    send_run(fd, 'c', MAX_LINE, "\r", NULL);
    sleep_us(20000);
    snprintf(reply, sizeof(reply), "%d:%s\n", MAX_LINE, max_c ? max_c : "");
    send_run(fd, '\n', 1, "", reply);
    free(max_a);
    free(max_c);

    /* One byte more, with its end of line, or 5000 without one. */
    size_t over = huge_modes[i].eol ? MAX_LINE + 1 : 5000;
    const char *tail = huge_modes[i].eol ? "\n" : "";
    switch (huge_modes[i].how) {
    case BY_EVENT:
        snprintf(reply, sizeof(reply), "E%u %d\n", MELY_STREAM_ERROR, -EMSGSIZE);
        send_run(fd, 'e', over, tail, reply);
        expect_end(fd, NULL);
        break;
    case BY_DEFAULT: {
        send_run(fd, 'e', over, tail, NULL);
        expect_end(fd, NULL);
        break;
    }
    case BY_READLN:
        snprintf(reply, sizeof(reply), "skipped %zu\n5:after\n", over + 1);
        send_run(fd, 'e', over, "\nafter\n", reply);
        send_run(fd, 'x', 5000, "", NULL);
        sleep_us(20000);
        send_str(fd, "\nlast\n");
        expect(fd, "skipped 5001\n4:last\n");
        shutdown(fd, SHUT_WR);
        expect_end(fd, NULL);
        break;
    }
    if (!wait_count(&srv.closed, 1, WAIT_MS))
        note("closed callback did not run");
out:
    if (fd >= 0)
        close(fd);
    mely_stop(&rt);
    return NULL;
}

/*
 * mely_stream_max_line(100): lines of exactly 100 bytes are accepted (LF,
 * CRLF, CRLF split between reads); one of 101 bytes with its LF, or 5000
 * without an end of line, is MELY_STREAM_ERROR with -EMSGSIZE to the event
 * callback; without one, the stream closes. From a read callback, readln
 * returns -EMSGSIZE and leaves the input as it was (the test discards the
 * line itself and reads on).
 */
START_TEST(lines_longer_than_the_maximum)
{
    mely_stream_ops_t ops = {.closed = on_closed};
    const char *name = "line, event callback";
    switch (huge_modes[_i].how) {
    case BY_EVENT:
        ops.line = line_cb;
        ops.event = error_event_cb;
        break;
    case BY_DEFAULT:
        ops.line = line_cb;
        name = "line, no event callback";
        break;
    case BY_READLN:
        ops.read = readln_cb;
        name = "readln";
        break;
    }
    start_server(huge_modes[_i].workers, &ops, setup_max_line, false);
    run_with_helper(&rt, huge_client, (void *)(uintptr_t)_i, 30,
                    shape_of(huge_modes[_i].workers, name));
    assert_closed_once(1);
    if (huge_modes[_i].how == BY_EVENT) {
        ck_assert_uint_eq(atomic_load(&srv.events), 1);
        ck_assert_uint_eq(atomic_load(&srv.ev_what[0]), MELY_STREAM_ERROR);
        ck_assert_int_eq(atomic_load(&srv.ev_err[0]), -EMSGSIZE);
    }
    stop_server();
}
END_TEST

/* ---- read watermarks --------------------------------------------------------------------- */

enum { READ_LOW = 100 };

static void setup_read_low(mely_stream_t *s, struct conn *c)
{
    int err = mely_stream_watermark(s, MELY_READ, READ_LOW, 0);
    if (err)
        note("stream %u: mely_stream_watermark: %s", c->id, mely_strerror(err));
}

static void low_read_cb(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "read");
    size_t n = evbuffer_get_length(mely_stream_input(s));
    if (n < READ_LOW)
        note("stream %u: read callback with %zu bytes, under the low watermark", c->id, n);
    take_pat(s, c);
    mely_stream_printf(s, "got %zu\n", n);
    leave(c);
}

static void send_pat(int fd, uint64_t off, size_t n)
{
    uint8_t buf[CHUNK];
    while (n > 0) {
        size_t k = n < sizeof(buf) ? n : sizeof(buf);
        fill_pat(buf, off, k);
        if (!send_all(fd, buf, k))
            return;
        off += k;
        n -= k;
    }
}

static void *read_low_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, 0);
    if (fd < 0)
        goto out;
    send_pat(fd, 0, 60);
    expect_quiet(fd, "60 bytes, low watermark 100");
    send_pat(fd, 60, 50);
    expect(fd, "got 110\n");
    send_pat(fd, 110, 99);
    expect_quiet(fd, "99 bytes, low watermark 100");
    send_pat(fd, 209, 1);
    expect(fd, "got 100\n");
    shutdown(fd, SHUT_WR);
    expect_end(fd, NULL);
    if (!wait_count(&srv.closed, 1, WAIT_MS))
        note("closed callback did not run");
out:
    if (fd >= 0)
        close(fd);
    mely_stop(&rt);
    return NULL;
}

/* Read low watermark 100: 60 bytes wake nothing, 50 more make one call that
 * sees 110; 99 wake nothing, one more makes a call that sees 100. */
START_TEST(read_low_watermark_waits)
{
    mely_stream_ops_t ops = {.read = low_read_cb, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    start_server(workers, &ops, setup_read_low, false);
    run_with_helper(&rt, read_low_client, NULL, 30, shape_of(workers, "read low watermark"));
    assert_closed_once(1);
    stop_server();
}
END_TEST

enum {
    READ_HIGH = 16384,
    READ_SLACK = 131072, /* one read (libevent 2.1 reads 4 KiB at a time; generous) */
    READ_TOTAL = 1 << 20,
    HOLD_MS = 5, /* how long a full input is left alone */
};

static void setup_read_high(mely_stream_t *s, struct conn *c)
{
    int err = mely_stream_watermark(s, MELY_READ, 0, READ_HIGH);
    if (err)
        note("stream %u: mely_stream_watermark: %s", c->id, mely_strerror(err));
}

static void say_done(mely_stream_t *s, struct conn *c)
{
    if (c->got >= READ_TOTAL && !c->done) {
        c->done = true;
        mely_stream_printf(s, "done %llu\n", (unsigned long long)c->got);
    }
}

/* HOLD_MS after the input filled up: an event of the stream's color (not a
 * callback) takes it all. Reading must have paused meanwhile, and resumes. */
static void high_drain(void *arg)
{
    struct conn *c = arg;
    mely_stream_t *s = c->s;
    if (!atomic_load(&c->closed)) {
        size_t n = evbuffer_get_length(mely_stream_input(s));
        max_store(&srv.maxlen, n);
        atomic_fetch_add(&srv.n, 1);
        take_pat(s, c);
        c->timer_pending = false;
        say_done(s, c);
    }
    mely_stream_unref(s);
}

/* Leaves the input alone until it reaches the high watermark. */
static void high_read_cb(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "read");
    size_t n = evbuffer_get_length(mely_stream_input(s));
    max_store(&srv.maxlen, n);
    if (c->got + n >= READ_TOTAL) {
        take_pat(s, c);
        say_done(s, c);
    } else if (n >= READ_HIGH && !c->timer_pending) {
        c->timer_pending = true;
        mely_stream_ref(s);
        int err = mely_timer_after(&rt, HOLD_MS * 1000000ull, MELY_TO(mely_stream_color(s)),
                                   high_drain, c, NULL);
        if (err) {
            note("mely_timer_after: %s", mely_strerror(err));
            mely_stream_unref(s);
        }
    }
    leave(c);
}

static void *read_high_client(void *arg)
{
    (void)arg;
    char done[64];
    int fd = client_ready(1, 0);
    if (fd < 0)
        goto out;
    send_pat(fd, 0, READ_TOTAL);
    snprintf(done, sizeof(done), "done %d\n", READ_TOTAL);
    expect(fd, done);
    shutdown(fd, SHUT_WR);
    expect_end(fd, NULL);
    if (!wait_count(&srv.closed, 1, WAIT_MS))
        note("closed callback did not run");
out:
    if (fd >= 0)
        close(fd);
    mely_stop(&rt);
    return NULL;
}

/*
 * Read high watermark 16 KiB: the read callback leaves the input alone once
 * it is full, and an event 5 ms later takes it all. Meanwhile reading pauses
 * (the input never holds more than the mark and one read), and it resumes
 * once the input is drained: 1 MiB arrives, byte-exact.
 */
START_TEST(read_high_watermark_pauses)
{
    mely_stream_ops_t ops = {.read = high_read_cb, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    start_server(workers, &ops, setup_read_high, false);
    run_with_helper(&rt, read_high_client, NULL, 60, shape_of(workers, "read high watermark"));
    assert_closed_once(1);
    uint64_t max = atomic_load(&srv.maxlen);
    printf("read high watermark (%u workers): %u drains, the input held at most %llu bytes\n",
           workers, atomic_load(&srv.n), (unsigned long long)max);
    ck_assert_msg(atomic_load(&srv.n) >= 1, "the input never filled up");
    ck_assert_msg(max <= READ_HIGH + READ_SLACK,
                  "the input held %llu bytes: reading did not pause at the high watermark (%d)",
                  (unsigned long long)max, READ_HIGH);
    stop_server();
}
END_TEST

/* ---- a slow reader: the write high watermark ----------------------------------------------- */

enum {
    WRITE_LOW = 16384,
    WRITE_HIGH = 65536,
    WRITE_SLACK = 262144, /* the replies to one read's lines (generous) */
    SLOW_LINE = 1000,
    SLOW_MAX = 64 << 20, /* a client that sent this much saw no backpressure */
};

static void setup_slow(mely_stream_t *s, struct conn *c)
{
    int err = mely_stream_watermark(s, MELY_WRITE, WRITE_LOW, WRITE_HIGH);
    if (err)
        note("stream %u: mely_stream_watermark: %s", c->id, mely_strerror(err));
    small_sndbuf(s);
}

/* Echoes the line (it may be modified: its 0 becomes the "\n" again). */
static void echo_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    line[len] = '\n';
    int err = mely_stream_write(s, line, len + 1);
    if (err)
        note("stream %u: mely_stream_write: %s", c->id, mely_strerror(err));
    leave(c);
}

static void count_drained(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "drained");
    size_t n = evbuffer_get_length(mely_stream_output(s));
    if (n > WRITE_LOW)
        note("stream %u: drained callback with %zu bytes in the output (low watermark %d)", c->id,
             n, WRITE_LOW);
    atomic_fetch_add(&srv.n, 1);
    leave(c);
}

/* The byte at offset o of the slow client's lines. */
static char slow_byte(uint64_t o)
{
    uint64_t i = o % SLOW_LINE;
    return i == SLOW_LINE - 1 ? '\n' : (char)('a' + (o / SLOW_LINE + i) % 26);
}

static _Atomic uint64_t sampled; /* the output's length, +1 (0: not yet) */

static void sample_output(void *arg)
{
    mely_stream_t *s = arg;
    atomic_store(&sampled, evbuffer_get_length(mely_stream_output(s)) + 1);
}

/* The length of s's output, read on its color (s is referenced). */
static uint64_t output_length(mely_stream_t *s)
{
    atomic_store(&sampled, 0);
    int err = mely_post(&rt, mely_stream_color(s), sample_output, s);
    if (err) {
        note("mely_post: %s", mely_strerror(err));
        return 0;
    }
    uint64_t deadline = now_ns() + (uint64_t)WAIT_MS * 1000000u;
    while (atomic_load(&sampled) == 0 && now_ns() < deadline)
        sleep_us(100);
    uint64_t v = atomic_load(&sampled);
    if (v == 0)
        note("the output was not sampled within %u ms", WAIT_MS);
    return v ? v - 1 : 0;
}

/* Sends lines without reading until the server's output is over the high
 * watermark and the socket took nothing for 300 ms. Returns the bytes sent. */
static uint64_t send_until_stalled(int fd, mely_stream_t *s, uint64_t *out_len)
{
    char buf[CHUNK];
    uint64_t sent = 0;
    while (sent < SLOW_MAX) {
        for (size_t i = 0; i < sizeof(buf); i++)
            buf[i] = slow_byte(sent + i);
        ssize_t k = send(fd, buf, sizeof(buf), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k > 0) {
            sent += (uint64_t)k;
            continue;
        }
        if (k < 0 && errno != EAGAIN && errno != EINTR) {
            note("send: %s", strerror(errno));
            return sent;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (poll(&p, 1, 300) == 0 && (*out_len = output_length(s)) > WRITE_HIGH)
            return sent;
    }
    note("the client sent %d MiB that were not read back: the server never stopped reading",
         SLOW_MAX >> 20);
    return sent;
}

/* Receives n bytes of the lines sent. */
static void expect_lines_back(int fd, uint64_t n)
{
    char buf[CHUNK];
    uint64_t got = 0;
    uint64_t deadline = now_ns() + (uint64_t)WAIT_MS * 1000000u;
    while (got < n) {
        uint64_t now = now_ns();
        int end = 0;
        size_t want = n - got < sizeof(buf) ? (size_t)(n - got) : sizeof(buf), k = 0;
        if (now < deadline)
            k = recv_some(fd, buf, want, (unsigned)((deadline - now) / 1000000u) + 1, &end);
        if (k == 0) {
            note("%llu of %llu bytes came back", (unsigned long long)got, (unsigned long long)n);
            return;
        }
        for (size_t i = 0; i < k; i++)
            if (buf[i] != slow_byte(got + i)) {
                note("byte %llu came back wrong", (unsigned long long)(got + i));
                return;
            }
        got += k;
    }
}

static void *slow_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, SMALL_BUF);
    if (fd < 0)
        goto out;
    mely_stream_t *s = srv.stream[0];
    uint64_t out1 = 0, sent = send_until_stalled(fd, s, &out1);
    sleep_us(QUIET_MS * 1000); /* stalled: nothing moves */
    uint64_t out2 = output_length(s);
    max_store(&srv.maxlen, out1 > out2 ? out1 : out2);
    if (out2 != out1)
        note("the output went from %llu to %llu bytes while the peer read nothing",
             (unsigned long long)out1, (unsigned long long)out2);
    printf("slow reader: %llu bytes sent before the stall, %llu in the server's output\n",
           (unsigned long long)sent, (unsigned long long)out1);
    expect_lines_back(fd, sent);
    shutdown(fd, SHUT_WR);
    expect_end(fd, NULL);
    if (!wait_count(&srv.closed, 1, WAIT_MS))
        note("closed callback did not run");
out:
    if (fd >= 0)
        close(fd);
    mely_stop(&rt);
    return NULL;
}

/*
 * An echo of 1000-byte lines to a client that sends without reading: once
 * the output passes the write high watermark (64 KiB), the stream stops
 * reading, so the output stays under the mark plus the replies to one read,
 * and stays put. Then the client reads: everything comes back byte-exact,
 * and the drained callback ran (with the output at the low watermark).
 */
START_TEST(slow_reader_bounds_the_output)
{
    mely_stream_ops_t ops = {.line = echo_line_cb, .drained = count_drained, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    start_server(workers, &ops, setup_slow, true);
    run_with_helper(&rt, slow_client, NULL, 60, shape_of(workers, "slow reader"));
    assert_closed_once(1);
    uint64_t max = atomic_load(&srv.maxlen);
    ck_assert_msg(max <= WRITE_HIGH + WRITE_SLACK,
                  "the output held %llu bytes (write high watermark %d)", (unsigned long long)max,
                  WRITE_HIGH);
    ck_assert_msg(atomic_load(&srv.n) >= 1, "the drained callback never ran");
    stop_server();
}
END_TEST

/* ---- timeouts ---------------------------------------------------------------------------- */

enum { TIMEOUT_MS = 150, TICK_MS = 15, TICKS = 15, EARLY_MS = 2 };

static void setup_read_timeout(mely_stream_t *s, struct conn *c)
{
    int err = mely_stream_timeouts(s, TIMEOUT_MS * 1000000ull, 0);
    if (err)
        note("stream %u: mely_stream_timeouts: %s", c->id, mely_strerror(err));
}

/* A dot for every read. */
static void tick_read_cb(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "read");
    struct evbuffer *in = mely_stream_input(s);
    evbuffer_drain(in, evbuffer_get_length(in));
    mely_stream_write(s, ".", 1);
    leave(c);
}

/* Says "T<n> <what>" for each timeout and stays open; closes at the second. */
static void timeout_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    record_event(c, what, err);
    if (what & MELY_STREAM_TIMEOUT) {
        c->timeouts++;
        mely_stream_printf(s, "T%u %u\n", c->timeouts, what);
        if (c->timeouts == 2)
            mely_stream_close(s, MELY_STREAM_FLUSH);
    } else {
        note("stream %u: event %u (err %d), expected a timeout", c->id, what, err);
        mely_stream_close(s, 0);
    }
    leave(c);
}

/* Sends a byte every TICK_MS, TICKS times; returns when it sent the last. */
static uint64_t tick(int fd)
{
    uint64_t last = 0;
    for (int i = 0; i < TICKS; i++) {
        send_str(fd, "x");
        last = now_ns();
        if (i + 1 < TICKS)
            sleep_us(TICK_MS * 1000);
    }
    return last;
}

/* Dots (one per read, so between 1 and TICKS) and then `line`. */
static void expect_dots_then(struct lr *lr, const char *line)
{
    char buf[128];
    if (!next_line(lr, buf, sizeof(buf), WAIT_MS)) {
        note("no line after the ticks (expected dots and \"%s\")", line);
        return;
    }
    size_t dots = strspn(buf, ".");
    if (dots < 1 || dots > TICKS || strcmp(buf + dots, line) != 0)
        note("got \"%s\", expected 1 to %d dots then \"%s\"", buf, TICKS, line);
}

static void *read_timeout_client(void *arg)
{
    bool with_event = arg != NULL;
    char line[64];
    int fd = client_ready(1, 0);
    if (fd < 0)
        goto out;
    uint64_t last = tick(fd);
    struct lr lr = {.fd = fd};
    if (with_event) {
        snprintf(line, sizeof(line), "T1 %u", MELY_STREAM_TIMEOUT | MELY_READ);
        expect_dots_then(&lr, line);
        snprintf(line, sizeof(line), "T2 %u", MELY_STREAM_TIMEOUT | MELY_READ);
        char got[64];
        if (!next_line(&lr, got, sizeof(got), WAIT_MS) || strcmp(got, line) != 0)
            note("expected \"%s\" after the first timeout", line);
        if (lr.len)
            note("%zu bytes after the second timeout's line", lr.len);
        expect_end(fd, NULL);
        uint64_t t1 = atomic_load(&srv.t_event[0]), t2 = atomic_load(&srv.t_event[1]);
        if (t1 < last + (TIMEOUT_MS - EARLY_MS) * 1000000ull)
            note("the read timeout fired %.1f ms after the last byte (timeout %d ms)",
                 ((double)t1 - (double)last) / 1e6, TIMEOUT_MS);
        if (t2 < t1 + (TIMEOUT_MS - EARLY_MS) * 1000000ull)
            note("the second timeout came %.1f ms after the first", (t2 - t1) / 1e6);
    } else {
        uint64_t n = 0;
        expect_end(fd, &n);
        if (n < 1 || n > TICKS)
            note("%llu bytes before EOF, expected 1 to %d dots", (unsigned long long)n, TICKS);
    }
    if (!wait_count(&srv.closed, 1, WAIT_MS))
        note("closed callback did not run");
    uint64_t closed = atomic_load(&srv.t_closed);
    if (closed < last + (TIMEOUT_MS - EARLY_MS) * 1000000ull)
        note("closed %.1f ms after the last byte (read timeout %d ms)",
             ((double)closed - (double)last) / 1e6, TIMEOUT_MS);
out:
    if (fd >= 0)
        close(fd);
    mely_stop(&rt);
    return NULL;
}

static const struct {
    unsigned workers;
    bool event;
} timeout_modes[] = {{2, true}, {1, true}, {2, false}};

/*
 * Read timeout 150 ms: a byte every 15 ms for 225 ms keeps it from firing
 * (activity resets it); then it fires 150 ms after the last byte, as
 * MELY_STREAM_TIMEOUT | MELY_READ, and again 150 ms later on the stream left
 * open (the event callback closes it then). Without an event callback the
 * stream closes at the first timeout.
 */
START_TEST(read_timeout_fires_when_idle)
{
    mely_stream_ops_t ops = {.read = tick_read_cb, .closed = on_closed};
    if (timeout_modes[_i].event)
        ops.event = timeout_event_cb;
    start_server(timeout_modes[_i].workers, &ops, setup_read_timeout, false);
    run_with_helper(&rt, read_timeout_client, timeout_modes[_i].event ? &srv : NULL, 30,
                    shape_of(timeout_modes[_i].workers,
                             timeout_modes[_i].event ? "read timeout" : "read timeout, no event"));
    assert_closed_once(1);
    if (timeout_modes[_i].event) {
        ck_assert_uint_eq(atomic_load(&srv.events), 2);
        ck_assert_uint_eq(atomic_load(&srv.ev_what[0]), MELY_STREAM_TIMEOUT | MELY_READ);
    }
    stop_server();
}
END_TEST

enum { PRODUCE_AHEAD = 512 << 10, PRODUCE_MAX = 256 << 20 };

static void setup_write_timeout(mely_stream_t *s, struct conn *c)
{
    int err = mely_stream_timeouts(s, 0, TIMEOUT_MS * 1000000ull);
    if (!err) /* drained below 256 KiB; reading never pauses (high 0) */
        err = mely_stream_watermark(s, MELY_WRITE, PRODUCE_AHEAD / 2, 0);
    if (err)
        note("stream %u: timeouts or watermark: %s", c->id, mely_strerror(err));
    small_sndbuf(s);
}

/* Keeps PRODUCE_AHEAD of the pattern in the output. */
static void produce(mely_stream_t *s, struct conn *c)
{
    while (c->produced < PRODUCE_MAX &&
           evbuffer_get_length(mely_stream_output(s)) < PRODUCE_AHEAD) {
        if (!write_pat(s, c->produced, CHUNK))
            return;
        c->produced += CHUNK;
    }
}

static void produce_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    (void)len;
    if (strcmp(line, "GO") == 0)
        produce(s, c);
    leave(c);
}

static void produce_drained_cb(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "drained");
    produce(s, c);
    leave(c);
}

/* Closes at once (without flushing) on the first event. */
static void close_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    record_event(c, what, err);
    mely_stream_close(s, 0);
    leave(c);
}

static void *write_timeout_client(void *arg)
{
    bool with_event = arg != NULL;
    uint8_t buf[CHUNK];
    int fd = client_ready(1, SMALL_BUF);
    if (fd < 0)
        goto out;
    send_str(fd, "GO\n");
    /* 300 ms of a steady reader: the output moves, no timeout. */
    uint64_t got = 0, t = now_ns() + 300 * 1000000ull;
    while (now_ns() < t) {
        int end;
        size_t k = recv_some(fd, buf, sizeof(buf), 100, &end);
        if (bad_pat(buf, got, k) < k) {
            note("byte %llu differs", (unsigned long long)got);
            goto out;
        }
        got += k;
        sleep_us(5000);
    }
    if (atomic_load(&srv.closed) || atomic_load(&srv.events))
        note("the write timeout fired while the peer was reading");
    uint64_t stop = now_ns();
    if (!wait_count(&srv.closed, 1, WAIT_MS))
        note("the write timeout did not close the stream");
    if (with_event && atomic_load(&srv.t_event[0]) < stop + (TIMEOUT_MS - EARLY_MS) * 1000000ull)
        note("the write timeout fired %.1f ms after the peer stopped reading",
             ((double)atomic_load(&srv.t_event[0]) - (double)stop) / 1e6);
    if (!with_event && atomic_load(&srv.t_closed) < stop + (TIMEOUT_MS - EARLY_MS) * 1000000ull)
        note("the stream closed %.1f ms after the peer stopped reading",
             ((double)atomic_load(&srv.t_closed) - (double)stop) / 1e6);
    pat_to_end(fd, got);
out:
    if (fd >= 0)
        close(fd);
    mely_stop(&rt);
    return NULL;
}

/*
 * Write timeout 150 ms, on a stream that writes without end: while the peer
 * reads (a little every 5 ms) it does not fire; once the peer stops reading,
 * it fires 150 ms after the output stopped moving: MELY_STREAM_TIMEOUT |
 * MELY_WRITE to the event callback (which closes), or without one a close.
 */
START_TEST(write_timeout_fires_when_the_peer_never_reads)
{
    mely_stream_ops_t ops = {
        .line = produce_line_cb, .drained = produce_drained_cb, .closed = on_closed};
    if (timeout_modes[_i].event)
        ops.event = close_event_cb;
    start_server(timeout_modes[_i].workers, &ops, setup_write_timeout, false);
    run_with_helper(&rt, write_timeout_client, timeout_modes[_i].event ? &srv : NULL, 30,
                    shape_of(timeout_modes[_i].workers, timeout_modes[_i].event
                                                            ? "write timeout"
                                                            : "write timeout, no event"));
    assert_closed_once(1);
    if (timeout_modes[_i].event) {
        ck_assert_uint_eq(atomic_load(&srv.events), 1);
        ck_assert_uint_eq(atomic_load(&srv.ev_what[0]), MELY_STREAM_TIMEOUT | MELY_WRITE);
    }
    stop_server();
}
END_TEST

/* ---- writes from other colors and threads ------------------------------------------------ */

enum { WRITERS = 4, WRITE_BATCH = 50 };

static struct writer {
    unsigned k, seq, n;
} writers[WRITERS];

static atomic_int late_rc; /* a write from another color after the close */

/* Writes WRITE_BATCH records, then posts itself for the next ones: one
 * writer's events follow each other on its color. */
static void writer_event(void *arg)
{
    struct writer *w = arg;
    mely_stream_t *s = srv.stream[0];
    for (unsigned i = 0; i < WRITE_BATCH && w->seq < w->n; i++, w->seq++) {
        int err = mely_stream_printf(s, "w%u %u\n", w->k, w->seq);
        if (err) {
            note("writer %u: mely_stream_printf: %s", w->k, mely_strerror(err));
            return;
        }
    }
    if (w->seq < w->n) {
        int err = mely_post(&rt, OTHER_COLOR(w->k), writer_event, w);
        if (err)
            note("mely_post: %s", mely_strerror(err));
    }
}

static void late_write_event(void *arg)
{
    atomic_store(&late_rc, mely_stream_write(arg, "late\n", 5));
}

/* Reads records "w<k> <seq>" until every writer's n arrived, each writer's in order. */
static void expect_records(int fd, unsigned nwriters, unsigned n)
{
    unsigned next[WRITERS + 1] = {0}, total = 0;
    struct lr *lr = calloc(1, sizeof(*lr));
    if (!lr)
        return;
    lr->fd = fd;
    char line[64];
    while (total < nwriters * n) {
        unsigned k, seq;
        if (!next_line(lr, line, sizeof(line), WAIT_MS)) {
            note("%u of %u records arrived", total, nwriters * n);
            break;
        }
        if (sscanf(line, "w%u %u", &k, &seq) != 2 || k >= nwriters) {
            note("a stray line: \"%s\"", line);
            break;
        }
        if (seq != next[k]) {
            note("writer %u: record %u arrived where %u was due", k, seq, next[k]);
            break;
        }
        next[k]++;
        total++;
    }
    free(lr);
}

static void *writes_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, 0);
    if (fd < 0)
        goto out;
    mely_stream_t *s = srv.stream[0];
    unsigned n = scaled(2000, 200, 100000);
    for (unsigned k = 0; k < WRITERS; k++) {
        writers[k] = (struct writer){.k = k, .n = n};
        int err = mely_post(&rt, OTHER_COLOR(k), writer_event, &writers[k]);
        if (err)
            note("mely_post: %s", mely_strerror(err));
    }
    for (unsigned seq = 0; seq < n; seq++) { /* this thread is writer WRITERS */
        int err = mely_stream_printf(s, "w%u %u\n", WRITERS, seq);
        if (err) {
            note("foreign writer: mely_stream_printf: %s", mely_strerror(err));
            break;
        }
    }
    expect_records(fd, WRITERS + 1, n);

    /* Closed from this thread: writes fail at once, from here and from a color. */
    int err = mely_stream_close(s, 0);
    if (err)
        note("mely_stream_close: %s", mely_strerror(err));
    if ((err = mely_stream_write(s, "x", 1)) != -EPIPE)
        note("a write after mely_stream_close returned %d, not -EPIPE", err);
    if (!wait_count(&srv.closed, 1, WAIT_MS))
        note("closed callback did not run");
    if ((err = mely_stream_printf(s, "%s", "late")) != -EPIPE)
        note("a printf after the closed callback returned %d, not -EPIPE", err);
    atomic_store(&late_rc, 1);
    mely_post(&rt, OTHER_COLOR(0), late_write_event, s);
    uint64_t deadline = now_ns() + (uint64_t)WAIT_MS * 1000000u;
    while (atomic_load(&late_rc) == 1 && now_ns() < deadline)
        sleep_us(100);
    if (atomic_load(&late_rc) != -EPIPE)
        note("a write from another color after the close returned %d, not -EPIPE",
             atomic_load(&late_rc));
    expect_end(fd, NULL);
out:
    if (fd >= 0)
        close(fd);
    mely_stop(&rt);
    return NULL;
}

/*
 * Four colors (chains of events on each) and a foreign thread each write
 * 2,000 numbered records to one stream: all arrive, each writer's in order.
 * Closed from the foreign thread, the stream takes no more writes (-EPIPE,
 * from that thread and from another color), and the client sees EOF.
 */
START_TEST(writes_from_other_colors_and_threads)
{
    mely_stream_ops_t ops = {.closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    start_server(workers, &ops, NULL, true);
    run_with_helper(&rt, writes_client, NULL, 60, shape_of(workers, "writers"));
    assert_closed_once(1);
    stop_server();
}
END_TEST

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
    start_server(workers, &ops, NULL, false);
    run_with_helper(&rt, inflight_client, NULL, 60, shape_of(workers, "close in flight"));
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
    if (fd < 0)
        goto out;
    send_str(fd, "hello\n");
    expect(fd, "5:hello\n");
    if (foreign) {
        mely_stream_t *s = srv.stream[0];
        int err = mely_stream_close(s, 0);
        if (err)
            note("mely_stream_close from a foreign thread: %s", mely_strerror(err));
        if ((err = mely_stream_write(s, "x", 1)) != -EPIPE)
            note("a write after a close from a foreign thread returned %d, not -EPIPE", err);
    } else {
        send_str(fd, "CLOSE\n");
    }
    expect_end(fd, NULL);
    if (!wait_count(&srv.closed, 1, WAIT_MS))
        note("closed callback did not run");
    sleep_us(QUIET_MS * 1000); /* a second closed callback would run now */
out:
    if (fd >= 0)
        close(fd);
    mely_stop(&rt);
    return NULL;
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
    start_server(workers, &ops, NULL, elsewhere_modes[_i].foreign);
    run_with_helper(&rt, close_elsewhere_client, elsewhere_modes[_i].foreign ? &srv : NULL, 30,
                    shape_of(workers, elsewhere_modes[_i].foreign ? "foreign close" : "color close"));
    assert_closed_once(1);
    if (!elsewhere_modes[_i].foreign)
        ck_assert_uint_eq(atomic_load(&srv.n), 1);
    stop_server();
}
END_TEST

/* ---- close after flush, EOF -------------------------------------------------------------- */

enum { FLUSH_BYTES = 4 << 20 };

static void setup_small_sndbuf(mely_stream_t *s, struct conn *c)
{
    (void)c;
    small_sndbuf(s);
}

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
    if (fd < 0)
        goto out;
    if (foreign) {
        mely_stream_t *s = srv.stream[0];
        if (write_pat(s, 0, FLUSH_BYTES)) {
            int err = mely_stream_close(s, MELY_STREAM_FLUSH);
            if (err)
                note("mely_stream_close: %s", mely_strerror(err));
        }
    } else {
        send_str(fd, "GO\nMORE\n");
    }
    if (expect_pat(fd, 0, FLUSH_BYTES))
        expect_end(fd, NULL);
    if (!wait_count(&srv.closed, 1, WAIT_MS))
        note("closed callback did not run");
out:
    if (fd >= 0)
        close(fd);
    mely_stop(&rt);
    return NULL;
}

/*
 * Close with MELY_STREAM_FLUSH right after writing 4 MiB to a client that
 * reads slowly (small socket buffers): from the stream's own color (a line
 * callback; the line behind it in the same read is not delivered), and from
 * a foreign thread whose writes were queued before its close. Every byte
 * arrives, then EOF.
 */
START_TEST(close_with_flush_sends_everything)
{
    mely_stream_ops_t ops = {.line = flush_line_cb, .closed = on_closed};
    unsigned workers = elsewhere_modes[_i].workers;
    bool foreign = elsewhere_modes[_i].foreign;
    start_server(workers, &ops, setup_small_sndbuf, foreign);
    run_with_helper(&rt, flush_client, foreign ? &srv : NULL, 60,
                    shape_of(workers, foreign ? "flush from a foreign thread" : "flush"));
    assert_closed_once(1);
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
    if (fd < 0)
        goto out;
    send_str(fd, "a\nbc\n");
    shutdown(fd, SHUT_WR);
    expect(fd, "1:a\n2:bc\nbye 2\n");
    expect_end(fd, NULL);
    if (!wait_count(&srv.closed, 1, WAIT_MS))
        note("closed callback did not run");
out:
    if (fd >= 0)
        close(fd);
    mely_stop(&rt);
    return NULL;
}

/* The peer's EOF reaches the event callback as MELY_STREAM_EOF, after the
 * lines sent before it; the stream stays writable until it closes. */
START_TEST(eof_reaches_the_event_callback)
{
    mely_stream_ops_t ops = {.line = line_cb, .event = eof_event_cb, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    start_server(workers, &ops, NULL, false);
    run_with_helper(&rt, eof_client, NULL, 30, shape_of(workers, "EOF"));
    assert_closed_once(1);
    ck_assert_uint_eq(atomic_load(&srv.events), 1);
    stop_server();
}
END_TEST

enum { EOF_BYTES = 2 << 20 };

static void big_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    (void)len;
    if (strcmp(line, "BIG") == 0 && write_pat(s, 0, EOF_BYTES))
        atomic_fetch_add(&srv.n, 1);
    leave(c);
}

static void *eof_flush_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, SMALL_BUF);
    if (fd < 0)
        goto out;
    send_str(fd, "BIG\n");
    shutdown(fd, SHUT_WR);
    if (expect_pat(fd, 0, EOF_BYTES))
        expect_end(fd, NULL);
    if (!wait_count(&srv.closed, 1, WAIT_MS))
        note("closed callback did not run");
out:
    if (fd >= 0)
        close(fd);
    mely_stop(&rt);
    return NULL;
}

/* Without an event callback, EOF closes the stream after flushing: a
 * request and EOF at once get the whole 2 MiB reply, then EOF. */
START_TEST(eof_without_event_callback_flushes_then_closes)
{
    mely_stream_ops_t ops = {.line = big_line_cb, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    start_server(workers, &ops, setup_small_sndbuf, false);
    run_with_helper(&rt, eof_flush_client, NULL, 30, shape_of(workers, "EOF, no event callback"));
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

static void *shutdown_client(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < SHUT_STREAMS; i++)
        clients[i] = client_ready(i + 1, SMALL_BUF);
    mely_stop(&rt);
    return NULL;
}

/*
 * Eight open streams, each with 1 MiB of output its client does not read,
 * the listener left open: mely_shutdown runs every closed callback exactly
 * once and closes every stream's fd (EBADF afterwards); each client sees its
 * connection end. References kept past the shutdown still work: writes
 * return -EPIPE, and the last unref frees the stream.
 */
START_TEST(shutdown_closes_open_streams)
{
    mely_stream_ops_t ops = {.line = line_cb, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    start_server(workers, &ops, setup_pending_output, true);
    run_with_helper(&rt, shutdown_client, NULL, 30, shape_of(workers, "shutdown"));
    for (unsigned i = 0; i < SHUT_STREAMS; i++)
        ck_assert_msg(clients[i] >= 0, "client %u did not connect", i);
    ck_assert_uint_eq(atomic_load(&srv.ready), SHUT_STREAMS);
    ck_assert_uint_eq(atomic_load(&srv.closed), 0);
    int rc = mely_shutdown(&rt);
    ck_assert_msg(rc >= 0, "mely_shutdown: %s", mely_strerror(rc));
    srv.l = NULL; /* freed by the shutdown */
    assert_no_notes();
    ck_assert_uint_eq(atomic_load(&srv.closed), SHUT_STREAMS);
    assert_closed_once(SHUT_STREAMS);
    for (unsigned i = 0; i < SHUT_STREAMS; i++) {
        errno = 0;
        ck_assert_msg(fcntl(srv.fd[i], F_GETFD) == -1 && errno == EBADF,
                      "stream %u's fd %d is still open after mely_shutdown", i, srv.fd[i]);
        ck_assert_int_eq(mely_stream_write(srv.stream[i], "x", 1), -EPIPE);
        ck_assert_int_eq(mely_stream_fd(srv.stream[i]), -1);
    }
    for (unsigned i = 0; i < SHUT_STREAMS; i++) {
        uint64_t n;
        ck_assert_msg(expect_end(clients[i], &n), "client %u: the connection did not end", i);
        close(clients[i]);
    }
    assert_no_notes();
    release_kept();
    free_graveyard();
}
END_TEST

enum { DRAIN_STREAMS = 3, DRAIN_BYTES = 1 << 20, DRAIN_TIMEOUT_MS = 200 };

static _Atomic uint64_t drain_at;

static void big_reply_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    (void)len;
    if (strcmp(line, "BIG") == 0 && write_pat(s, 0, DRAIN_BYTES))
        atomic_fetch_add(&srv.n, 1);
    leave(c);
}

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

/* The clients asked for DRAIN_BYTES each and read nothing yet. */
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
        note("%u connections accepted during the drain", atomic_load(&srv.accepted) -
                                                               DRAIN_STREAMS);
    if (sp[1] >= 0 && expect(sp[1], "hello during the drain\n"))
        expect_end(sp[1], NULL);
    for (unsigned i = 0; i < DRAIN_STREAMS; i++)
        if (expect_pat(fds[i], 0, DRAIN_BYTES))
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
    mely_stream_ops_t ops = {.line = big_reply_line_cb, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    start_server(workers, &ops, setup_small_sndbuf, false);
    run_with_helper(&rt, drain_client, NULL, 60, shape_of(workers, "drain"));
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
        if (n >= DRAIN_BYTES)
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
    mely_stream_ops_t ops = {.line = big_reply_line_cb, .closed = on_closed};
    start_server(2, &ops, setup_small_sndbuf, false);
    run_with_helper(&rt, drain_timeout_client, NULL, 30, "drain with a timeout");
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

/* Connects to our own listener and writes at once (queued until connected). */
static void connect_and_ping(void *arg)
{
    (void)arg;
    mely_stream_t *s;
    mely_color_t color = mely_color_pick(&srv.colors, CONNECT_KEY);
    int err = mely_stream_connect(&rt, "127.0.0.1", srv.port, MELY_TO(color), &connecting_ops,
                                  connecting, &s);
    if (err) {
        note("mely_stream_connect: %s", mely_strerror(err));
        return;
    }
    if ((err = mely_stream_write(s, "ping\n", 5)))
        note("a write before the connection is up: %s", mely_strerror(err));
}

static void *connect_client(void *arg)
{
    bool foreign = arg != NULL;
    if (foreign)
        connect_and_ping(NULL);
    else if (mely_post(&rt, mely_color_pick(&srv.colors, CONNECT_KEY), connect_and_ping, NULL))
        note("mely_post failed");
    if (!wait_count(&srv.closed, 2, WAIT_MS))
        note("%u of 2 streams closed", atomic_load(&srv.closed));
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
    start_server(workers, &ops, NULL, false);
    connecting = new_conn(ID_EXTRA);
    ck_assert_ptr_nonnull(connecting);
    run_with_helper(&rt, connect_client, foreign ? &srv : NULL, 30,
                    shape_of(workers, foreign ? "connect from a foreign thread" : "connect"));
    ck_assert_uint_eq(atomic_load(&srv.closed_runs[ID_EXTRA]), 1);
    assert_closed_once(1);
    ck_assert_uint_eq(connecting->events, 1);
    ck_assert_uint_eq(connecting->lines, 1);
    ck_assert_uint_eq(atomic_load(&srv.ev_what[ID_EXTRA]), MELY_STREAM_CONNECTED);
    stop_server();
}
END_TEST

/* A port nothing listens on right now: bound by a plain socket, then released. */
static unsigned free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static atomic_int connect_rc;

static void *refused_client(void *arg)
{
    unsigned port = (unsigned)(uintptr_t)arg;
    mely_color_t color = mely_color_pick(&srv.colors, CONNECT_KEY);
    int err = mely_stream_connect(&rt, "127.0.0.1", port, MELY_TO(color), &srv.ops, connecting,
                                  NULL);
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
    start_server(2, &ops, NULL, false);
    connecting = new_conn(ID_EXTRA);
    ck_assert_ptr_nonnull(connecting);
    run_with_helper(&rt, refused_client, (void *)(uintptr_t)free_port(), 30, "refused");
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

static bool fd_closed(int fd)
{
    errno = 0;
    return fcntl(fd, F_GETFD) == -1 && errno == EBADF;
}

/* mely_stream_open(fd) with these arguments fails with `want`, and fd is closed. */
#define ASSERT_OPEN_FAILS(want, fd, to, ops)                                                    \
    do {                                                                                        \
        mely_stream_t *s_ = NULL;                                                               \
        int fd_ = (fd);                                                                         \
        ck_assert_int_eq(mely_stream_open(&rt, fd_, (to), (ops), NULL, &s_), (want));           \
        ck_assert_msg(fd_ < 0 || fd_closed(fd_), "fd %d left open by a failed open", fd_);      \
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
 * it), the setters' (what, low > high, max_line 0, NULL streams), writes and
 * readln with bad pointers, connect to names, drain and open on a runtime
 * that is not initialized; the getters of a stream; writes after a close.
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

    /* A stream whose peer sends nothing: no callback yet, so the setters may
     * be called from here. */
    struct conn *c = new_conn(0);
    ck_assert_ptr_nonnull(c);
    fd = sock();
    ck_assert_int_eq(mely_stream_open(&rt, fd, MELY_TO(1234), &ops, c, &s), 0);
    ck_assert_int_eq(mely_stream_fd(s), fd);
    ck_assert_uint_eq(mely_stream_color(s), 1234);
    ck_assert_ptr_nonnull(mely_stream_input(s));
    ck_assert_ptr_nonnull(mely_stream_output(s));
    ck_assert_ptr_ne(mely_stream_input(s), mely_stream_output(s));
    ck_assert_int_eq(mely_stream_watermark(s, 0, 0, 0), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_watermark(s, 0x4, 0, 0), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_watermark(s, MELY_READ, 10, 5), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_watermark(s, MELY_WRITE, 10, 5), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_watermark(s, MELY_READ, 10, 0), 0);
    ck_assert_int_eq(mely_stream_watermark(s, MELY_WRITE, 10, 0), 0);
    ck_assert_int_eq(mely_stream_watermark(s, MELY_READ, 5, 10), 0);
    ck_assert_int_eq(mely_stream_watermark(NULL, MELY_READ, 0, 0), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_max_line(s, 0), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_max_line(s, 1), 0);
    ck_assert_int_eq(mely_stream_max_line(NULL, 10), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_timeouts(s, 0, 0), 0);
    ck_assert_int_eq(mely_stream_timeouts(NULL, 1, 1), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_reading(NULL, 1), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_write(NULL, "x", 1), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_write(s, NULL, 1), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_write(s, NULL, 0), 0);
    ck_assert_int_eq(mely_stream_printf(NULL, "x"), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_write_buffer(NULL, mely_stream_output(s)), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_write_buffer(s, NULL), MELY_EINVAL);
    char *line;
    size_t len;
    ck_assert_int_eq(mely_stream_readln(NULL, &line, &len), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_close(NULL, 0), MELY_EINVAL);

    ck_assert_int_eq(mely_stream_close(s, 0), 0);
    ck_assert_int_eq(mely_stream_close(s, MELY_STREAM_FLUSH), 0);
    ck_assert_int_eq(mely_stream_write(s, "x", 1), -EPIPE);
    ck_assert_int_eq(mely_stream_printf(s, "%d", 1), -EPIPE);
    ck_assert_int_ge(mely_shutdown(&rt), 0);
    assert_no_notes();
    ck_assert_uint_eq(atomic_load(&srv.closed_runs[0]), 1);
    ck_assert(fd_closed(fd));
    free_graveyard();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stream");

    TCase *tc = new_tcase(s, "lines", 60);
    tcase_add_loop_test(tc, lines_split_across_reads, 0, NELEM(line_modes));
    tcase_add_loop_test(tc, lines_longer_than_the_maximum, 0, NELEM(huge_modes));

    tc = new_tcase(s, "backpressure", 60);
    tcase_add_loop_test(tc, read_low_watermark_waits, 0, 2);
    tcase_add_loop_test(tc, read_high_watermark_pauses, 0, 2);
    tcase_add_loop_test(tc, slow_reader_bounds_the_output, 0, 2);

    tc = new_tcase(s, "timeouts", 60);
    tcase_add_loop_test(tc, read_timeout_fires_when_idle, 0, NELEM(timeout_modes));
    tcase_add_loop_test(tc, write_timeout_fires_when_the_peer_never_reads, 0,
                        NELEM(timeout_modes));

    tc = new_tcase(s, "writers", 60);
    tcase_add_loop_test(tc, writes_from_other_colors_and_threads, 0, 2);

    tc = new_tcase(s, "close", 60);
    tcase_add_loop_test(tc, close_while_events_hold_the_stream, 0, 2);
    tcase_add_loop_test(tc, close_from_another_color_or_thread, 0, NELEM(elsewhere_modes));
    tcase_add_loop_test(tc, close_with_flush_sends_everything, 0, NELEM(elsewhere_modes));
    tcase_add_loop_test(tc, eof_reaches_the_event_callback, 0, 2);
    tcase_add_loop_test(tc, eof_without_event_callback_flushes_then_closes, 0, 2);

    tc = new_tcase(s, "shutdown", 60);
    tcase_add_loop_test(tc, shutdown_closes_open_streams, 0, 2);
    tcase_add_loop_test(tc, drain_flushes_closes_and_stops, 0, 2);
    tcase_add_test(tc, drain_ends_at_its_timeout);

    tc = new_tcase(s, "connect", 60);
    tcase_add_loop_test(tc, connect_to_own_listener, 0, NELEM(elsewhere_modes));
    tcase_add_loop_test(tc, connect_refused, 0, 2);
    tcase_add_test(tc, stream_errors);
    return mely_test_main(s);
}
