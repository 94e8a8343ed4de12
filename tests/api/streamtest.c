/* SPDX-License-Identifier: MIT */
/*
 * streamtest.c: the stream tests' server, connections, clients and bulk
 * data (see streamtest.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tests/api/streamtest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <event2/buffer.h>

/* ---- connections, and the checks every callback makes ------------------------------------ */

struct srv srv;

static struct conn *graveyard[2 * MAXCONN];
static atomic_uint buried;

struct conn *new_conn(unsigned id)
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

void free_graveyard(void)
{
    unsigned n = atomic_load(&buried);
    for (unsigned i = 0; i < n && i < (unsigned)NELEM(graveyard); i++)
        free(graveyard[i]);
    atomic_store(&buried, 0);
}

void max_store(_Atomic uint64_t *v, uint64_t x)
{
    uint64_t old = atomic_load(v);
    while (old < x && !atomic_compare_exchange_weak(v, &old, x)) {
    }
}

/* At the start of every callback but closed: on the stream's color, alone,
 * and never after the closed callback. */
void enter(mely_stream_t *s, struct conn *c, const char *cb)
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

void leave(struct conn *c)
{
    atomic_fetch_sub(&c->inside, 1);
}

void record_event(struct conn *c, unsigned what, int err)
{
    atomic_store(&srv.ev_what[c->id], what);
    atomic_store(&srv.ev_err[c->id], err);
    unsigned k = atomic_fetch_add(&srv.events, 1);
    if (k < 4)
        atomic_store(&srv.t_event[k], now_ns());
    c->events++;
}

/* Runs once per stream, last: on its color, or on mely_shutdown's thread. */
void on_closed(mely_stream_t *s, void *arg)
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

void reply_line(mely_stream_t *s, struct conn *c, char *line, size_t len)
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

void line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    reply_line(s, c, line, len);
    leave(c);
}

/* Closes at once (without flushing) on the first event. */
void close_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    record_event(c, what, err);
    mely_stream_close(s, 0);
    leave(c);
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

const char *server_engine;

static void srv_reset(const mely_stream_ops_t *ops,
                      void (*setup)(mely_stream_t *, struct conn *), bool keep)
{
    memset(&srv, 0, sizeof(srv));
    srv.ops = *ops;
    srv.setup = setup;
    srv.keep = keep;
}

/* Once the runtime `rt` is made: the color range and the listener. */
static void listen_for_streams(void)
{
    int err = mely_color_range(&rt, 64, &srv.colors);
    ck_assert_msg(err == 0, "mely_color_range: %s", mely_strerror(err));
    err = mely_listen(&rt, NULL, 0, 0, 0, MELY_TO(ACCEPT_COLOR), on_accept, NULL, &srv.l);
    ck_assert_msg(err == 0, "mely_listen: %s", mely_strerror(err));
    srv.port = mely_listener_port(srv.l);
}

void start_server(unsigned workers, const mely_stream_ops_t *ops,
                  void (*setup)(mely_stream_t *, struct conn *), bool keep)
{
    srv_reset(ops, setup, keep);
    init_runtime_engine(&rt, workers, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT, NULL,
                        server_engine);
    listen_for_streams();
}

void start_server_shape(const struct shape *sh, const mely_stream_ops_t *ops,
                        void (*setup)(mely_stream_t *, struct conn *), bool keep)
{
    srv_reset(ops, setup, keep);
    init_runtime_shape(&rt, sh, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    listen_for_streams();
}

/* Drops the references the setup kept. */
void release_kept(void)
{
    for (int i = 0; i < MAXCONN; i++)
        if (srv.stream[i]) {
            mely_stream_unref(srv.stream[i]);
            srv.stream[i] = NULL;
        }
}

void stop_server(void)
{
    if (srv.l)
        ck_assert_int_eq(mely_listener_close(srv.l), 0);
    srv.l = NULL;
    release_kept(); /* before: references_outlive_shutdown tests after */
    int rc = mely_shutdown(&rt);
    ck_assert_msg(rc >= 0, "mely_shutdown: %s", mely_strerror(rc));
    free_graveyard();
}

/* Each of the first n streams' closed callback ran exactly once. */
void assert_closed_once(unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        ck_assert_msg(atomic_load(&srv.closed_runs[i]) == 1,
                      "stream %u: closed callback ran %u times", i,
                      atomic_load(&srv.closed_runs[i]));
}

/* "what, 2 workers": for failure messages (the test thread's buffer). */
static const char *shape_of(unsigned workers, const char *what)
{
    static char buf[128];
    snprintf(buf, sizeof(buf), "%s, %u worker%s", what, workers, workers > 1 ? "s" : "");
    return buf;
}

void serve(unsigned workers, const mely_stream_ops_t *ops,
           void (*setup)(mely_stream_t *, struct conn *), bool keep, void *(*client)(void *),
           void *arg, const char *what)
{
    start_server(workers, ops, setup, keep);
    run_with_helper(&rt, client, arg, 60, shape_of(workers, what));
}

/* ---- the clients ------------------------------------------------------------------------- */

bool fd_closed(int fd)
{
    errno = 0;
    return fcntl(fd, F_GETFD) == -1 && errno == EBADF;
}

int client_connect(unsigned port, int bufsize)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        note("socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* A send blocked by a stalled server fails instead of holding the
     * helper (and the test's join) for ever. */
    struct timeval tv = {.tv_sec = WAIT_MS / 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
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
int client_ready(unsigned n, int bufsize)
{
    int fd = client_connect(srv.port, bufsize);
    if (fd >= 0 && !wait_count(&srv.ready, n, WAIT_MS)) {
        note("stream %u not set up within %u ms", n, WAIT_MS);
        close(fd);
        return -1;
    }
    return fd;
}

void wait_closed(unsigned n)
{
    if (!wait_count(&srv.closed, n, WAIT_MS))
        note("%u of %u streams closed within %u ms", atomic_load(&srv.closed), n, WAIT_MS);
}

void *client_done(int fd, bool ok)
{
    if (ok)
        wait_closed(1);
    if (fd >= 0)
        close(fd);
    mely_stop(&rt);
    return NULL;
}

bool send_all(int fd, const void *data, size_t n)
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

bool send_str(int fd, const char *s)
{
    return send_all(fd, s, strlen(s));
}

/* One recv() of at most n bytes, waiting at most ms. Returns the bytes
 * received; *end becomes 1 at EOF, -errno on an error (a reset), else 0. */
size_t recv_some(int fd, void *buf, size_t n, unsigned ms, int *end)
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
size_t recv_upto(int fd, void *buf, size_t n, unsigned ms, int *end)
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
bool expect(int fd, const char *want)
{
    size_t n = strlen(want);
    char *buf = malloc(n + 1);
    int end = 0;
    size_t got = buf ? recv_upto(fd, buf, n, WAIT_MS, &end) : 0;
    bool ok = buf && got == n && memcmp(buf, want, n) == 0;
    if (!ok && buf) {
        buf[got] = '\0';
        note("expected \"%.80s\" (%zu bytes), got \"%.80s\" (%zu bytes%s)", want, n, buf, got,
             end == 1  ? ", then EOF"
             : end < 0 ? ", then an error"
                       : "");
    }
    free(buf);
    return ok;
}

/* Nothing arrives on fd for QUIET_MS. */
void expect_quiet(int fd, const char *why)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, QUIET_MS) != 0)
        note("%s: the server replied (poll revents 0x%x)", why, p.revents);
}

/* The connection ends (EOF, or a reset when the server closed with input
 * unread) within WAIT_MS; bytes before it are counted in *extra (NULL: none
 * may come). */
bool expect_end(int fd, uint64_t *extra)
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

bool expect_eof(int fd)
{
    char buf[256];
    int end = 0;
    size_t k = recv_some(fd, buf, sizeof(buf), WAIT_MS, &end);
    if (k > 0)
        note("%zu bytes arrived where the connection should have ended", k);
    else if (end == 0)
        note("the connection did not end within %u ms", WAIT_MS);
    else if (end < 0)
        note("the connection ended with %s, not EOF", strerror(-end));
    return k == 0 && end == 1;
}

bool next_line(struct lr *lr, char *out, size_t cap, unsigned ms)
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

uint8_t pat(uint64_t off)
{
    return (uint8_t)((off * 0x9E3779B97F4A7C15ull) >> 56);
}

void fill_pat(uint8_t *b, uint64_t off, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b[i] = pat(off + i);
}

/* The index of the first byte of b[0..n) that is not the pattern at off (n: none). */
size_t bad_pat(const uint8_t *b, uint64_t off, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != pat(off + i))
            return i;
    return n;
}

/* Appends n bytes of the pattern from off to s's output (any thread). */
bool write_pat(mely_stream_t *s, uint64_t off, uint64_t n)
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

void send_pat(int fd, uint64_t off, size_t n)
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

uint64_t send_until_stalled(int fd, uint64_t max, uint8_t (*byte)(uint64_t),
                            bool (*stalled)(void *), void *arg, const char *what)
{
    uint8_t buf[CHUNK];
    uint64_t sent = 0;
    while (sent < max) { /* bounded: max bytes */
        for (size_t i = 0; i < sizeof(buf); i++)
            buf[i] = byte(sent + i);
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
        if (poll(&p, 1, 300) == 0 && (!stalled || stalled(arg)))
            return sent;
    }
    note("%s: %llu MiB went out, nothing was read, and the server still took more: no "
         "backpressure",
         what, (unsigned long long)(max >> 20));
    return sent;
}

/* Takes the whole input, checking that it continues the pattern at c->got. */
void take_pat(mely_stream_t *s, struct conn *c)
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

bool expect_bytes(int fd, uint64_t off, uint64_t n, uint8_t (*byte)(uint64_t))
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
            note("%llu of %llu bytes arrived (%s)", (unsigned long long)(off + got),
                 (unsigned long long)(off + n),
                 end == 1  ? "EOF"
                 : end < 0 ? strerror(-end)
                           : "timed out");
            return false;
        }
        for (size_t i = 0; i < k; i++)
            if (buf[i] != byte(off + got + i)) {
                note("byte %llu differs from what was sent", (unsigned long long)(off + got + i));
                return false;
            }
        got += k;
    }
    return true;
}

bool expect_pat(int fd, uint64_t off, uint64_t n)
{
    return expect_bytes(fd, off, n, pat);
}

/* Reads the pattern from off until the connection ends; returns the bytes. */
uint64_t pat_to_end(int fd, uint64_t off)
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
        size_t k =
            recv_some(fd, buf, sizeof(buf), (unsigned)((deadline - now) / 1000000u) + 1, &end);
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
void small_sndbuf(mely_stream_t *s)
{
    int v = SMALL_BUF;
    if (setsockopt(mely_stream_fd(s), SOL_SOCKET, SO_SNDBUF, &v, sizeof(v)) != 0)
        note("SO_SNDBUF: %s", strerror(errno));
}

void setup_small_sndbuf(mely_stream_t *s, struct conn *c)
{
    (void)c;
    small_sndbuf(s);
}
