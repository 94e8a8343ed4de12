/* SPDX-License-Identifier: MIT */
/*
 * injector.c: a closed-loop HTTP load injector on mely's native API (the
 * injector of the Mely paper's section 5.3.1, used against apps/sws).
 *
 * N virtual clients. Each one connects to HOST:PORT (a non-blocking connect;
 * a write watch learns its result), sends K requests on the connection one
 * after the other (the next leaves when the previous response is complete),
 * then closes and connects again. Every client's events (its watches and its
 * timers) have a color of their own, 1 + client index, so the clients run in
 * parallel over the workers and one client's handlers never run at once: no
 * lock on a client. The control (progress line, end of the run) runs on
 * color 0.
 *
 * Every response is parsed (status line, Content-Length, Connection) and
 * checked: status 200 or 304, and a 200's body length equal to
 * --expect-bytes, or else to the first body received for that URL. Latency
 * runs from the request's first byte sent to the response's last byte read,
 * and goes to a log-linear histogram per worker (a worker's handlers never
 * run at once, so its histogram and counters have one writer).
 *
 * bench/README.md describes the options and the report.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/harness.h"
#include <mely/mely.h>

#define MAX_URLS 64
#define MAX_CLIENTS 60000u /* colors 1..MAX_CLIENTS, below MELY_COLORS */
#define HEAD_MAX 16384     /* response head limit; also the read buffer */
#define RETRY_NS 100000000ull /* a failed connect retries after 100 ms */
#define CONTROL_COLOR 0

/* ---- Errors ---------------------------------------------------------------------- */

enum err_kind { E_CONNECT, E_RESET, E_TIMEOUT, E_STATUS, E_SHORT, E_PROTO, E_KINDS };
static const char *const err_name[E_KINDS] = { "connect", "reset", "timeout", "bad status",
                                               "short body", "bad response" };

/* ---- Histogram: log-linear, 32 sub-buckets per power of two (~3%) ------------------ */

#define H_SUB_BITS 5
#define H_SUB (1u << H_SUB_BITS)
#define H_BUCKETS (64u * H_SUB)

static unsigned h_index(uint64_t v)
{
    if (v < H_SUB)
        return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= H_SUB_BITS */
    unsigned sub = (unsigned)(v >> (e - H_SUB_BITS)) & (H_SUB - 1);
    return (e - H_SUB_BITS + 1) * H_SUB + sub;
}

/* The middle of bucket i's range of values. */
static double h_value(unsigned i)
{
    if (i < H_SUB)
        return i;
    unsigned e = i / H_SUB + H_SUB_BITS - 1, sub = i % H_SUB;
    double width = ldexp(1.0, (int)(e - H_SUB_BITS));
    return (H_SUB + sub) * width + width / 2;
}

/* ---- Per-worker figures (one writer: the worker; readers: the control) ------------- */

struct wstats {
    _Atomic uint64_t requests; /* good responses completed inside the run */
    _Atomic uint64_t errors[E_KINDS];
    _Atomic uint64_t bytes;    /* bytes received (heads and bodies) */
    _Atomic uint64_t checked;  /* body bytes whose length was checked */
    _Atomic uint64_t connects; /* connections established */
    uint64_t lat_max;
    uint64_t hist[H_BUCKETS]; /* read only after mely_run() returned */
} __attribute__((aligned(64)));

/* ---- Options and global state ------------------------------------------------------ */

static struct {
    const char *host;
    unsigned port;
    unsigned clients;
    unsigned per_conn;
    double duration;
    const char *urls[MAX_URLS];
    unsigned nurls;
    int workers; /* -1: every usable CPU */
    bool keepalive_mode;
    bool close_mode;
    bool reset_mode; /* one request per connection, ended by the client's RST */
    bool quiet;
    bool pin;
    const char *csv;
    double expect_bytes; /* -1: compare with the first body of the URL */
    double timeout_s;
    uint64_t timeout_ns;
} opt;

static bool add_url(const char *url, void *var)
{
    (void)var;
    if (url[0] != '/' || strpbrk(url, " \t\r\n") || opt.nurls == MAX_URLS)
        return false;
    opt.urls[opt.nurls++] = url;
    return true;
}

static const struct bench_opt options[] = {
    {.name = "host", .kind = OPT_STR, .var = &opt.host, .sdflt = "127.0.0.1",
     .help = "server address, 127.x.x.x"},
    {.name = "port", .kind = OPT_UINT, .var = &opt.port, .lo = 1, .hi = 65535, .dflt = 8080,
     .help = "server port"},
    {.name = "clients", .kind = OPT_UINT, .var = &opt.clients, .lo = 1, .hi = MAX_CLIENTS,
     .dflt = 50, .help = "virtual clients"},
    {.name = "requests-per-conn", .kind = OPT_UINT, .var = &opt.per_conn, .lo = 1, .hi = 1e9,
     .dflt = 150, .help = "requests per connection"},
    {.name = "duration", .kind = OPT_DOUBLE, .var = &opt.duration, .lo = 0.1, .hi = 600,
     .dflt = 5, .help = "seconds to run"},
    {.name = "url", .kind = OPT_CALL, .var = &opt, .call = add_url, .sdflt = "/",
     .help = "a path to request, without spaces (repeatable, up to 64: round robin)"},
    {.name = "expect-bytes", .kind = OPT_DOUBLE, .var = &opt.expect_bytes, .lo = 0, .hi = 1e15,
     .dflt = -1, .none = "the first body of its URL", .help = "every 200 body must be N bytes"},
    {.name = "timeout", .kind = OPT_DOUBLE, .var = &opt.timeout_s, .lo = 0.01, .hi = 3600,
     .dflt = 10, .help = "per-request timeout in seconds"},
    {.name = "workers", .kind = OPT_INT, .var = &opt.workers, .lo = 1, .hi = MELY_MAX_WORKERS,
     .dflt = -1, .none = "every usable CPU", .help = "worker threads"},
    {.name = "pin", .kind = OPT_FLAG, .var = &opt.pin, .help = "pin the workers to CPUs"},
    {.name = "keepalive", .kind = OPT_FLAG, .var = &opt.keepalive_mode,
     .help = "keep connections open for K requests (the default)"},
    {.name = "close", .kind = OPT_FLAG, .var = &opt.close_mode,
     .help = "send Connection: close, one request per connection (the server closes first)"},
    {.name = "reset", .kind = OPT_FLAG, .var = &opt.reset_mode,
     .help = "one request per connection, ended by the client's reset"},
    {.name = "quiet", .kind = OPT_FLAG, .var = &opt.quiet, .help = "no progress line per second"},
    {.name = "csv", .kind = OPT_STR, .var = &opt.csv,
     .help = "write the per-second figures and the totals to this file"},
    {.name = NULL},
};

static mely_t rt;
static struct sockaddr_in addr;
static char *req_text[MAX_URLS]; /* the request of each URL */
static size_t req_len[MAX_URLS];
static _Atomic long long url_ref[MAX_URLS]; /* first body length seen, -1 */
static struct wstats *ws;
static unsigned nworkers;
static uint64_t start_ns;
static _Atomic uint64_t end_ns; /* the run's end; SIGINT moves it (color 0) */
static _Atomic bool stopping;
static uint64_t tick_ns; /* how often a client checks its own timeout */

/* Per-second samples of the control. */
struct sample {
    uint64_t requests, errors, bytes;
    double secs; /* the interval's length (the last one may be shorter) */
};
static struct sample *samples;
static unsigned nsamples, max_samples;
static struct sample last;
static uint64_t last_ns; /* when `last` was taken */

/* ---- A virtual client ------------------------------------------------------------- */

enum cstate { C_IDLE, C_CONNECTING, C_HEAD, C_BODY, C_EOF };

struct client {
    unsigned id;
    mely_color_t color;
    int fd;
    enum cstate state;
    mely_watch_t *rw, *ww; /* the read watch while connected; the write watch
                              while connecting or while a request waits */
    unsigned url;          /* next URL (round robin, from id) */
    unsigned on_conn;      /* requests sent on this connection */
    unsigned cur_url;
    size_t sent;           /* bytes of the current request sent */
    uint64_t sent_ns;      /* first byte of the current request */
    uint64_t busy_since;   /* 0: nothing outstanding (no timeout runs) */
    size_t have;           /* head bytes in buf */
    int status;
    bool server_close;     /* the response said the connection ends */
    bool until_eof;        /* no Content-Length: the body ends at EOF */
    long long body_left, body_len;
    char buf[HEAD_MAX];
};

static struct client *clients;

static struct wstats *me(void)
{
    int w = mely_current_worker();
    return &ws[w < 0 ? 0 : (unsigned)w % nworkers];
}

static void add(_Atomic uint64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

static uint64_t get(_Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

static bool is_stopping(void)
{
    return atomic_load_explicit(&stopping, memory_order_relaxed);
}

static void client_connect(void *arg);
static void on_read(int fd, unsigned ready, void *arg);
static void on_write(int fd, unsigned ready, void *arg);

static void must(int rc, const char *what)
{
    if (rc < 0) {
        fprintf(stderr, "injector: %s: %s\n", what, mely_strerror(rc));
        exit(1);
    }
}

/* Closes the connection (removing its watches) and, unless the run ends,
 * connects again: at once, or after RETRY_NS when `retry_later`. */
static void client_reset(struct client *c, bool retry_later)
{
    if (c->fd >= 0)
        mely_close(&rt, c->fd);
    c->fd = -1;
    c->rw = c->ww = NULL;
    c->state = C_IDLE;
    c->busy_since = 0;
    if (is_stopping())
        return;
    if (retry_later)
        must(mely_timer_after(&rt, RETRY_NS, MELY_TO(c->color), client_connect, c, NULL),
             "timer");
    else
        client_connect(c);
}

static void client_error(struct client *c, enum err_kind k)
{
    if (!is_stopping() && mely_now_ns() <= atomic_load_explicit(&end_ns, memory_order_relaxed))
        add(&me()->errors[k], 1);
    client_reset(c, k == E_CONNECT);
}

/* Sends what is left of the current request; arms the write watch if the
 * socket does not take it all. */
static void client_flush(struct client *c)
{
    const char *r = req_text[c->cur_url];
    size_t len = req_len[c->cur_url];
    while (c->sent < len) {
        ssize_t n = send(c->fd, r + c->sent, len - c->sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!c->ww)
                must(mely_watch(&rt, c->fd, MELY_WRITE, MELY_TO(c->color), on_write, c, &c->ww),
                     "watch");
            return;
        }
        if (n <= 0) {
            client_error(c, E_RESET);
            return;
        }
        c->sent += (size_t)n;
    }
    if (c->ww) {
        mely_watch_remove(c->ww);
        c->ww = NULL;
    }
}

static void client_send(struct client *c)
{
    c->cur_url = c->url;
    c->url = (c->url + 1) % opt.nurls;
    c->on_conn++;
    c->sent = 0;
    c->have = 0;
    c->state = C_HEAD;
    c->sent_ns = c->busy_since = mely_now_ns();
    client_flush(c);
}

/* Socket connected (or failed): watch for reading and send the first request. */
static void on_connected(struct client *c)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        client_error(c, E_CONNECT);
        return;
    }
    if (c->ww) {
        mely_watch_remove(c->ww);
        c->ww = NULL;
    }
    must(mely_watch(&rt, c->fd, MELY_READ, MELY_TO(c->color), on_read, c, &c->rw), "watch");
    add(&me()->connects, 1);
    c->on_conn = 0;
    client_send(c);
}

static void client_connect(void *arg)
{
    struct client *c = arg;
    if (is_stopping())
        return;
    int one = 1;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        client_error(c, E_CONNECT);
        return;
    }
    (void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->state = C_CONNECTING;
    c->busy_since = mely_now_ns();
    if (connect(c->fd, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
        on_connected(c);
        return;
    }
    if (errno != EINPROGRESS) {
        client_error(c, E_CONNECT);
        return;
    }
    must(mely_watch(&rt, c->fd, MELY_WRITE, MELY_TO(c->color), on_write, c, &c->ww), "watch");
}

static void on_write(int fd, unsigned ready, void *arg)
{
    (void)fd;
    (void)ready;
    struct client *c = arg;
    if (c->state == C_CONNECTING)
        on_connected(c);
    else
        client_flush(c);
}

/* A response is complete: count it, check it, and go on. */
static void response_done(struct client *c)
{
    uint64_t now = mely_now_ns();
    struct wstats *w = me();
    bool inside = !is_stopping() && now <= atomic_load_explicit(&end_ns, memory_order_relaxed);
    enum err_kind bad = E_KINDS;
    if (c->status != 200 && c->status != 304) {
        bad = E_STATUS;
    } else if (c->status == 200) {
        long long want = (long long)opt.expect_bytes;
        if (want < 0) {
            long long ref = -1;
            if (!atomic_compare_exchange_strong(&url_ref[c->cur_url], &ref, c->body_len))
                want = ref;
            else
                want = c->body_len;
        }
        if (c->body_len != want)
            bad = E_SHORT;
        else if (inside)
            add(&w->checked, (uint64_t)c->body_len);
    }
    c->busy_since = 0;
    if (bad != E_KINDS) {
        client_error(c, bad);
        return;
    }
    if (inside) {
        uint64_t lat = now - c->sent_ns;
        add(&w->requests, 1);
        w->hist[h_index(lat)]++;
        if (lat > w->lat_max)
            w->lat_max = lat;
    }
    if (c->until_eof) {
        client_reset(c, false);
    } else if (opt.reset_mode) {
        /* Closing with a reset leaves no TIME_WAIT on either side, so the
         * client's port search does not become the bottleneck. */
        struct linger lg = { .l_onoff = 1, .l_linger = 0 };
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        client_reset(c, false);
    } else if (c->server_close || opt.close_mode) {
        c->state = C_EOF; /* let the server close first: TIME_WAIT stays there */
        c->busy_since = now;
    } else if (c->on_conn >= opt.per_conn) {
        client_reset(c, false);
    } else if (!is_stopping()) {
        client_send(c);
    }
}

/* Case-insensitive "name:" at the start of line p; returns the value. */
static const char *header(const char *p, const char *name)
{
    size_t n = strlen(name);
    if (strncasecmp(p, name, n) != 0 || p[n] != ':')
        return NULL;
    p += n + 1;
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* Parses the head in buf[0..end) (NUL-terminated at end). Returns false if
 * it is not a response this injector understands. */
static bool parse_head(struct client *c, char *head)
{
    int minor;
    if (sscanf(head, "HTTP/1.%d %3d", &minor, &c->status) != 2)
        return false;
    c->server_close = minor == 0; /* HTTP/1.0: close unless keep-alive */
    c->body_left = -1;
    for (char *line = strstr(head, "\r\n"); line; line = strstr(line, "\r\n")) {
        line += 2;
        const char *v;
        if ((v = header(line, "Content-Length"))) {
            char *e;
            long long n = strtoll(v, &e, 10);
            if (e == v || n < 0)
                return false;
            c->body_left = n;
        } else if ((v = header(line, "Connection"))) {
            const char *eol = strstr(v, "\r\n");
            size_t vl = eol ? (size_t)(eol - v) : strlen(v);
            if (memmem(v, vl, "close", 5))
                c->server_close = true;
            else if (memmem(v, vl, "keep-alive", 10))
                c->server_close = false;
        } else if ((v = header(line, "Transfer-Encoding"))) {
            if (strncasecmp(v, "identity", 8) != 0)
                return false; /* chunked bodies are not supported */
        }
    }
    if (c->status == 304 || c->status == 204 || (c->status >= 100 && c->status < 200))
        c->body_left = 0;
    c->until_eof = c->body_left < 0;
    if (c->until_eof)
        c->server_close = true;
    c->body_len = 0;
    return true;
}

/* Consumes n body bytes; false if they exceed the announced length. */
static bool body_bytes(struct client *c, size_t n)
{
    c->body_len += (long long)n;
    if (c->until_eof)
        return true;
    c->body_left -= (long long)n;
    return c->body_left >= 0;
}

/* After a response: go on reading only on the same connection (a reset may
 * have opened another one, maybe under the same fd number) and while a next
 * response or the server's EOF is awaited. */
static bool still_reading(const struct client *c, int fd)
{
    return c->fd == fd && (c->state == C_HEAD || c->state == C_EOF);
}

/* read() that retries on EINTR; -2 when there is nothing to read yet. */
static ssize_t read_some(int fd, void *buf, size_t n)
{
    ssize_t r;
    while ((r = read(fd, buf, n)) < 0 && errno == EINTR)
        ;
    return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? -2 : r;
}

/* Head bytes: false when on_read must return (nothing more, or an error). */
static bool read_head(struct client *c, int fd, struct wstats *w)
{
    ssize_t n = read_some(fd, c->buf + c->have, sizeof(c->buf) - 1 - c->have);
    if (n == -2)
        return false;
    if (n <= 0) {
        client_error(c, E_RESET);
        return false;
    }
    add(&w->bytes, (uint64_t)n);
    size_t from = c->have > 3 ? c->have - 3 : 0;
    c->have += (size_t)n;
    c->buf[c->have] = '\0';
    char *end = memmem(c->buf + from, c->have - from, "\r\n\r\n", 4);
    if (!end) {
        if (c->have < sizeof(c->buf) - 1)
            return true;
        client_error(c, E_PROTO);
        return false;
    }
    end[2] = '\0';
    size_t rest = c->have - (size_t)(end + 4 - c->buf);
    if (!parse_head(c, c->buf) || !body_bytes(c, rest)) {
        client_error(c, E_PROTO);
        return false;
    }
    c->state = C_BODY;
    return true;
}

/* Body bytes, as read_head(). */
static bool read_body(struct client *c, int fd, struct wstats *w)
{
    size_t room = sizeof(c->buf);
    if (!c->until_eof && (unsigned long long)c->body_left < room)
        room = (size_t)c->body_left + 1; /* one byte more than expected: extra bytes are an error */
    ssize_t n = read_some(fd, c->buf, room);
    if (n == -2)
        return false;
    if (n > 0)
        add(&w->bytes, (uint64_t)n);
    if (n < 0)
        client_error(c, E_RESET);
    else if (n == 0 && c->until_eof)
        response_done(c);
    else if (n == 0)
        client_error(c, E_SHORT);
    else if (!body_bytes(c, (size_t)n))
        client_error(c, E_PROTO);
    return n > 0 && c->state == C_BODY;
}

static void on_read(int fd, unsigned ready, void *arg)
{
    struct client *c = arg;
    struct wstats *w = me();
    (void)ready;

    for (;;) {
        if (c->state == C_HEAD && !read_head(c, fd, w))
            return;
        if (c->state == C_BODY && c->body_left != 0 && !read_body(c, fd, w))
            return;
        if (c->state == C_BODY && !c->until_eof && c->body_left == 0) {
            response_done(c);
            if (!still_reading(c, fd))
                return;
        } else if (c->state == C_EOF) {
            char b[512];
            ssize_t n = read_some(fd, b, sizeof(b));
            if (n == -2)
                return;
            if (n > 0)
                client_error(c, E_PROTO); /* bytes after a final response */
            else
                client_reset(c, false); /* EOF or reset after the last response: done */
            return;
        } else if (c->state != C_HEAD && c->state != C_BODY) {
            return;
        }
    }
}

/* Every tick_ns on the client's color: a request (or connect) outstanding for
 * longer than the timeout is abandoned. */
static void client_tick(void *arg)
{
    struct client *c = arg;
    if (is_stopping())
        return;
    uint64_t now = mely_now_ns();
    if (c->busy_since && now - c->busy_since > opt.timeout_ns)
        client_error(c, E_TIMEOUT);
    must(mely_timer_after(&rt, tick_ns, MELY_TO(c->color), client_tick, c, NULL), "timer");
}

/* ---- The control (color 0) -------------------------------------------------------- */

static struct sample totals(void)
{
    struct sample s = { 0, 0, 0, 0 };
    for (unsigned i = 0; i < nworkers; i++) {
        s.requests += get(&ws[i].requests);
        s.bytes += get(&ws[i].bytes);
        for (unsigned k = 0; k < E_KINDS; k++)
            s.errors += get(&ws[i].errors[k]);
    }
    return s;
}

static void finish(void)
{
    atomic_store(&stopping, true);
    mely_stop(&rt);
}

static void on_second(void *arg)
{
    (void)arg;
    if (is_stopping())
        return;
    struct sample s = totals();
    uint64_t now = mely_now_ns();
    double dt = (double)(now - last_ns) / 1e9;
    if (dt <= 0)
        dt = 1e-9;
    if (nsamples < max_samples)
        samples[nsamples] = (struct sample){ s.requests - last.requests, s.errors - last.errors,
                                             s.bytes - last.bytes, dt };
    nsamples++;
    if (!opt.quiet)
        printf("%6u s %10.0f req/s %8llu errors\n", nsamples,
               (double)(s.requests - last.requests) / dt,
               (unsigned long long)(s.errors - last.errors));
    fflush(stdout);
    last = s;
    last_ns = now;
    if (mely_now_ns() >= end_ns) {
        finish();
        return;
    }
    uint64_t next = start_ns + (uint64_t)(nsamples + 1) * 1000000000ull;
    if (next > end_ns)
        next = end_ns;
    must(mely_timer_at(&rt, next, MELY_TO(CONTROL_COLOR), on_second, NULL, NULL), "timer");
}

static void on_sigint(int signo, unsigned ready, void *arg)
{
    (void)signo;
    (void)ready;
    (void)arg;
    atomic_store(&end_ns, mely_now_ns());
    fprintf(stderr, "injector: interrupted, reporting\n");
    finish();
}

/* ---- Report -------------------------------------------------------------------- */

static double pct(const uint64_t *h, uint64_t n, double p)
{
    if (n == 0)
        return 0;
    uint64_t rank = (uint64_t)ceil(p * (double)n), seen = 0;
    if (rank == 0)
        rank = 1;
    for (unsigned i = 0; i < H_BUCKETS; i++) {
        seen += h[i];
        if (seen >= rank)
            return h_value(i);
    }
    return h_value(H_BUCKETS - 1);
}

static int report(double secs)
{
    static uint64_t h[H_BUCKETS];
    uint64_t req = 0, bytes = 0, checked = 0, conns = 0, errs[E_KINDS] = { 0 }, err = 0, max = 0;
    for (unsigned i = 0; i < nworkers; i++) {
        req += get(&ws[i].requests);
        bytes += get(&ws[i].bytes);
        checked += get(&ws[i].checked);
        conns += get(&ws[i].connects);
        for (unsigned k = 0; k < E_KINDS; k++)
            errs[k] += get(&ws[i].errors[k]);
        for (unsigned b = 0; b < H_BUCKETS; b++)
            h[b] += ws[i].hist[b];
        if (ws[i].lat_max > max)
            max = ws[i].lat_max;
    }
    for (unsigned k = 0; k < E_KINDS; k++)
        err += errs[k];
    double rate = secs > 0 ? (double)req / secs : 0;
    double p50 = pct(h, req, 0.50), p99 = pct(h, req, 0.99), p999 = pct(h, req, 0.999);
    printf("requests         %llu\n", (unsigned long long)req);
    printf("duration         %.2f s\n", secs);
    printf("req/s            %.0f\n", rate);
    printf("latency p50      %.3f ms\n", p50 / 1e6);
    printf("latency p99      %.3f ms\n", p99 / 1e6);
    printf("latency p99.9    %.3f ms\n", p999 / 1e6);
    printf("latency max      %.3f ms\n", (double)max / 1e6);
    printf("connections      %llu\n", (unsigned long long)conns);
    printf("bytes received   %llu\n", (unsigned long long)bytes);
    printf("bytes checked    %llu\n", (unsigned long long)checked);
    printf("errors           %llu", (unsigned long long)err);
    for (unsigned k = 0; k < E_KINDS; k++)
        printf("%s%s %llu", k ? ", " : " (", err_name[k], (unsigned long long)errs[k]);
    printf(")\n");
    for (unsigned u = 0; u < opt.nurls; u++) {
        long long ref = atomic_load(&url_ref[u]);
        if (opt.expect_bytes >= 0)
            printf("body length      %s: %.0f (--expect-bytes)\n", opt.urls[u], opt.expect_bytes);
        else if (ref >= 0)
            printf("body length      %s: %lld\n", opt.urls[u], ref);
        else
            printf("body length      %s: no 200 response\n", opt.urls[u]);
    }
    if (opt.csv) {
        FILE *f = fopen(opt.csv, "w");
        if (!f) {
            fprintf(stderr, "injector: %s: %s\n", opt.csv, strerror(errno));
            return 1;
        }
        fprintf(f, "row,second,requests,req_per_s,errors,bytes,p50_ms,p99_ms,p999_ms,max_ms\n");
        unsigned n = nsamples < max_samples ? nsamples : max_samples;
        for (unsigned i = 0; i < n; i++)
            fprintf(f, "second,%u,%llu,%.0f,%llu,%llu,,,,\n", i + 1,
                    (unsigned long long)samples[i].requests,
                    (double)samples[i].requests / samples[i].secs,
                    (unsigned long long)samples[i].errors, (unsigned long long)samples[i].bytes);
        fprintf(f, "total,%.2f,%llu,%.0f,%llu,%llu,%.3f,%.3f,%.3f,%.3f\n", secs,
                (unsigned long long)req, rate, (unsigned long long)err, (unsigned long long)bytes,
                p50 / 1e6, p99 / 1e6, p999 / 1e6, (double)max / 1e6);
        if (fclose(f) != 0) {
            fprintf(stderr, "injector: %s: %s\n", opt.csv, strerror(errno));
            return 1;
        }
    }
    if (req == 0)
        fprintf(stderr, "injector: no request completed\n");
    return err == 0 && req > 0 ? 0 : 1;
}

/* ---- Main ------------------------------------------------------------------------ */

/* The options' checks beyond their ranges; false (reported) if they fail. */
static bool check_options(void)
{
    if (opt.keepalive_mode + opt.close_mode + opt.reset_mode > 1) {
        fprintf(stderr, "injector: at most one of --keepalive, --close and --reset\n");
        return false;
    }
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)opt.port);
    if (inet_pton(AF_INET, opt.host, &addr.sin_addr) != 1 ||
        (ntohl(addr.sin_addr.s_addr) >> 24) != 127) {
        fprintf(stderr, "injector: --host: a numeric loopback address (127.x.x.x), not \"%s\"\n",
                opt.host);
        return false;
    }
    if (opt.nurls == 0)
        opt.urls[opt.nurls++] = "/";
    opt.timeout_ns = (uint64_t)(opt.timeout_s * 1e9);
    tick_ns = opt.timeout_ns / 4; /* how often a client checks its timeout: 1 ms..1 s */
    tick_ns = tick_ns > 1000000000ull ? 1000000000ull : tick_ns < 1000000ull ? 1000000ull : tick_ns;
    return true;
}

/* The request text of each URL. */
static bool make_requests(void)
{
    for (unsigned u = 0; u < opt.nurls; u++) {
        size_t cap = strlen(opt.urls[u]) + strlen(opt.host) + 128;
        if (!(req_text[u] = malloc(cap)))
            return false;
        req_len[u] = (size_t)snprintf(
            req_text[u], cap, "GET %s HTTP/1.1\r\nHost: %s:%u\r\nUser-Agent: mely-injector\r\n%s\r\n",
            opt.urls[u], opt.host, opt.port, opt.close_mode ? "Connection: close\r\n" : "");
        atomic_init(&url_ref[u], -1);
    }
    return true;
}

/* The runtime, the per-worker figures, the clients and the samples. */
static bool setup(void)
{
    mely_config_t cfg;

    mely_config_init(&cfg);
    cfg.workers = opt.workers < 0 ? 0 : (unsigned)opt.workers;
    cfg.pin = opt.pin;
    int rc = mely_init(&rt, &cfg);
    if (rc != 0) {
        fprintf(stderr, "injector: mely_init: %s\n", mely_strerror(rc));
        exit(1);
    }
    nworkers = mely_workers(&rt);
    ws = aligned_alloc(64, sizeof(*ws) * nworkers);
    clients = calloc(opt.clients, sizeof(*clients));
    max_samples = (unsigned)ceil(opt.duration) + 1;
    samples = calloc(max_samples, sizeof(*samples));
    if (ws)
        memset(ws, 0, sizeof(*ws) * nworkers);
    return ws && clients && samples && make_requests();
}

/* Every client's first connect and timeout tick, the control's first second
 * and SIGINT; the run starts now. */
static void start(mely_watch_t **sig)
{
    start_ns = mely_now_ns();
    last_ns = start_ns;
    end_ns = start_ns + (uint64_t)(opt.duration * 1e9);
    for (unsigned i = 0; i < opt.clients; i++) {
        struct client *c = &clients[i];
        c->id = i;
        c->color = 1 + i;
        c->fd = -1;
        c->url = i % opt.nurls;
        must(mely_post(&rt, c->color, client_connect, c), "post");
        must(mely_timer_after(&rt, tick_ns, MELY_TO(c->color), client_tick, c, NULL), "timer");
    }
    uint64_t first = start_ns + 1000000000ull;
    must(mely_timer_at(&rt, first < end_ns ? first : end_ns, MELY_TO(CONTROL_COLOR), on_second,
                       NULL, NULL),
         "timer");
    must(mely_signal(&rt, SIGINT, MELY_TO(CONTROL_COLOR), on_sigint, NULL, sig), "signal");
}

int main(int argc, char **argv)
{
    static const char usage[] =
        "injector [options]: a closed-loop HTTP load injector (the Mely paper's, section 5.3.1)\n"
        "on the mely runtime: N virtual clients each send K requests on a connection, one after\n"
        "the other, then reconnect. Loopback only. Exit status 0 if no request failed.";
    mely_watch_t *sig;

    int rc = bench_options(usage, options, 0, 0, argc, argv);
    if (rc <= 0 || !check_options())
        return rc == 0 ? 0 : 2;
    raise_fd_limit(~0u); /* one descriptor per client, and room for the rest */
    if (!setup()) {
        fprintf(stderr, "injector: out of memory\n");
        return 1;
    }
    if (!opt.quiet)
        printf("injector: http://%s:%u, %u clients, %u requests per connection%s, %g s, "
               "%u workers, %u URL%s\n",
               opt.host, opt.port, opt.clients, opt.per_conn,
               opt.close_mode   ? " (Connection: close: 1)"
               : opt.reset_mode ? " (closed by a client reset: 1)"
                                : "",
               opt.duration, nworkers, opt.nurls, opt.nurls > 1 ? "s" : "");
    fflush(stdout);
    start(&sig);
    rc = mely_run(&rt);
    if (rc != 0) {
        fprintf(stderr, "injector: mely_run: %s\n", mely_strerror(rc));
        return 1;
    }
    mely_watch_remove(sig);
    for (unsigned i = 0; i < opt.clients; i++)
        if (clients[i].fd >= 0)
            mely_close(&rt, clients[i].fd);
    mely_shutdown(&rt);
    return report((double)(end_ns - start_ns) / 1e9);
}
