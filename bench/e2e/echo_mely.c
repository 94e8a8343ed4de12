/* SPDX-License-Identifier: MIT */
/*
 * echo_mely.c: the mely echo server of bench/echo, on the native API.
 *
 * A runtime of 2 pinned workers with the row's steal policy. mely_listen() on
 * 127.0.0.1, port 0, accepting on color 0. Each accepted connection gets a
 * read watch colored with its fd (MELY_TO(fd), the SWS habit: the color
 * hash spreads consecutive fds over the workers) whose handler reads once
 * (16 KB at most) and writes back at once; on a short write the read watch is
 * removed and a write watch sends the rest, then the read watch comes back.
 * End of stream or an error: mely_close() (from the connection's own color, so
 * the connection can be freed at once). SIGTERM (mely_signal, on worker 0's
 * pinned color) stops the runtime; the stat lines follow.
 *
 * The read handler's descriptor carries a timeleft annotation (--timeleft, in
 * TSC cycles): the "all" policy only steals colors whose expected work exceeds
 * a steal's cost, so without one it would never steal.
 *
 * With `stream`, the echo on streams instead (include/mely/stream.h): each accepted
 * connection a stream whose color is picked from a range of STREAM_COLORS
 * (mely_color_pick: fd % n, spread over the workers as the fds are), with the
 * same descriptor; its read callback moves the input to the output
 * (mely_stream_write_buffer), which the stream sends when the callback
 * returns; the stream's default write watermark (1 MiB) is the backpressure.
 * Streams still open at the end are closed by mely_shutdown().
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench/e2e/echo.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mely/mely.h>
#include <mely/stream.h>

/* The stream server's colors: a few hundred per worker, as doc/colors.md advises. */
#define STREAM_COLORS 1024u

struct counter {
    alignas(64) _Atomic uint64_t v; /* written by one worker only */
};

struct server {
    mely_t m;
    mely_handler_t read_desc, write_desc;
    mely_color_range_t colors; /* the stream server's */
    struct counter msgs[ECHO_MAX_THREADS];
    struct counter conns;
    _Atomic int err; /* the first failure inside a handler */
};

static struct server S;

struct conn {
    int fd;
    mely_watch_t *rw, *ww; /* the read watch, or the write watch while output waits */
    size_t off, len;
    char buf[ECHO_BUF];
};

static void note_err(int err)
{
    int none = 0;
    atomic_compare_exchange_strong(&S.err, &none, err);
}

static void bump(_Atomic uint64_t *v)
{
    atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* A message echoed, counted for the worker running this. */
static void count_msg(void)
{
    int w = mely_current_worker();
    if (w >= 0 && (unsigned)w < ECHO_MAX_THREADS)
        bump(&S.msgs[w].v);
}

static void on_read(int fd, unsigned ready, void *arg);
static void on_write(int fd, unsigned ready, void *arg);

static mely_to_t to_of(int fd, const mely_handler_t *h)
{
    return (mely_to_t){.color = (mely_color_t)fd, .prio = MELY_PRIO_DEFAULT, .handler = h};
}

/* From the connection's color: removes its watches, closes, frees. */
static void conn_close(struct conn *c)
{
    int err = mely_close(&S.m, c->fd);
    if (err)
        note_err(err);
    free(c);
}

static void on_write(int fd, unsigned ready, void *arg)
{
    struct conn *c = arg;
    bool dead = false;
    (void)ready;
    if (echo_send_pending(c->fd, c->buf, &c->off, c->len, &dead)) {
        mely_watch_remove(c->ww);
        c->ww = NULL;
        int err = mely_watch(&S.m, fd, MELY_READ, to_of(fd, &S.read_desc), on_read, c, &c->rw);
        if (err) {
            note_err(err);
            conn_close(c);
        }
    } else if (dead) {
        conn_close(c);
    }
}

static void on_read(int fd, unsigned ready, void *arg)
{
    struct conn *c = arg;
    enum echo_step step = echo_once(fd, c->buf, &c->off, &c->len);
    (void)ready;

    if (step == ECHO_SENT || step == ECHO_FULL)
        count_msg();
    if (step == ECHO_CLOSE) {
        conn_close(c);
    } else if (step == ECHO_FULL) {
        mely_watch_remove(c->rw);
        c->rw = NULL;
        int err = mely_watch(&S.m, fd, MELY_WRITE, to_of(fd, &S.write_desc), on_write, c, &c->ww);
        if (err) {
            note_err(err);
            conn_close(c);
        }
    }
}

static void on_accept(int fd, const struct sockaddr *peer, unsigned peerlen, void *arg)
{
    int one = 1;
    (void)peer;
    (void)peerlen;
    (void)arg;
    if (fd >= (int)MELY_COLORS) { /* a color is an fd below 65536 */
        close(fd);
        return;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct conn *c = malloc(sizeof(*c));
    if (!c) {
        close(fd);
        return;
    }
    c->fd = fd;
    c->rw = c->ww = NULL;
    c->off = c->len = 0;
    int err = mely_watch(&S.m, fd, MELY_READ, to_of(fd, &S.read_desc), on_read, c, &c->rw);
    if (err) {
        note_err(err);
        close(fd);
        free(c);
        return;
    }
    bump(&S.conns.v);
}

/* ---- The echo on streams ---- */

static void stream_read(mely_stream_t *s, void *arg)
{
    (void)arg;
    count_msg();
    int err = mely_stream_write_buffer(s, mely_stream_input(s));
    if (err) {
        note_err(err);
        mely_stream_close(s, 0);
    }
}

static void stream_accept(int fd, const struct sockaddr *peer, unsigned peerlen, void *arg)
{
    static const mely_stream_ops_t ops = {.read = stream_read}; /* EOF, errors: close */
    mely_to_t to = {mely_color_pick(&S.colors, (uint64_t)fd), MELY_PRIO_DEFAULT, &S.read_desc};
    int one = 1;
    (void)peer;
    (void)peerlen;
    (void)arg;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int err = mely_stream_open(&S.m, fd, to, &ops, NULL, NULL);
    if (err)
        note_err(err);
    else
        bump(&S.conns.v);
}

static void on_term(int signo, unsigned ready, void *arg)
{
    (void)signo;
    (void)ready;
    (void)arg;
    mely_stop(&S.m);
}

/* The runtime, its SIGTERM watch and its listener; false (said on stderr) if
 * they cannot be set up. */
static bool start(const char *steal, uint64_t timeleft, int spin_us, bool stream,
                  mely_listener_t **l, mely_watch_t **term)
{
    mely_config_t cfg;
    mely_config_init(&cfg);
    cfg.workers = ECHO_MAX_THREADS;
    cfg.pin = 1;
    cfg.steal = steal;
    if (spin_us >= 0)
        cfg.spin_us = (unsigned)spin_us;
    S.read_desc = (mely_handler_t){.name = "echo read", .timeleft = timeleft};
    S.write_desc = (mely_handler_t){.name = "echo write", .timeleft = timeleft};
    int err = mely_init(&S.m, &cfg);
    if (err) {
        fprintf(stderr, "echo server: mely_init: %s\n", mely_strerror(err));
        return false;
    }
    err = mely_signal(&S.m, SIGTERM, MELY_TO(MELY_COLOR_PINNED(0)), on_term, NULL, term);
    if (!err && stream)
        err = mely_color_range(&S.m, STREAM_COLORS, &S.colors);
    if (!err)
        err = mely_listen(&S.m, "127.0.0.1", 0, 0, 0, MELY_TO(0),
                          stream ? stream_accept : on_accept, NULL, l);
    if (err) {
        fprintf(stderr, "echo server: mely_signal/mely_color_range/mely_listen: %s\n",
                mely_strerror(err));
        mely_shutdown(&S.m);
        return false;
    }
    return true;
}

/* The stat lines: the workers' counters summed, the messages per worker. */
static void print_stats(void)
{
    static const char *const keys[] = {"events_run", "polls",         "io_ready",
                                       "parks",      "wakeups",       "wakes_sent",
                                       "steal_attempts", "steals",    "stolen_events",
                                       "watch_moves", "lock_contended"};
    uint64_t sum[sizeof(keys) / sizeof(keys[0])] = {0};
    for (unsigned w = 0; w < mely_workers(&S.m); w++) {
        mely_stats_t s;
        if (mely_worker_stats(&S.m, w, &s) != 0)
            continue;
        const uint64_t v[] = {s.events_run,     s.polls,  s.io_ready,      s.parks,
                              s.wakeups,        s.wakes_sent, s.steal_attempts, s.steals,
                              s.stolen_events,  s.watch_moves, s.lock_contended};
        for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
            sum[k] += v[k];
    }
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
        echo_stat(keys[k], sum[k]);
    for (unsigned w = 0; w < ECHO_MAX_THREADS; w++) {
        char key[32];
        snprintf(key, sizeof(key), "msgs_w%u", w);
        echo_stat(key, atomic_load(&S.msgs[w].v));
    }
    echo_stat("conns", atomic_load(&S.conns.v));
    uint64_t measured = mely_handler_measured(&S.m, &S.read_desc);
    if (measured)
        echo_stat("read_measured_cycles", measured);
    fflush(stdout);
}

int echo_server_mely(const char *steal, uint64_t timeleft, int spin_us, bool stream)
{
    mely_listener_t *l;
    mely_watch_t *term;

    if (!start(steal, timeleft, spin_us, stream, &l, &term))
        return 1;
    printf("port %u\n", mely_listener_port(l));
    fflush(stdout);
    int err = mely_run(&S.m);
    if (err)
        fprintf(stderr, "echo server: mely_run: %s\n", mely_strerror(err));
    mely_listener_close(l);
    mely_watch_remove(term);
    print_stats();
    int herr = atomic_load(&S.err);
    if (herr)
        fprintf(stderr, "echo server: in a handler: %s\n", mely_strerror(herr));
    /* Raw connections still open (the client closes them first) are not
     * freed: the process ends. Streams are closed here. */
    int left = mely_shutdown(&S.m);
    if (left < 0)
        fprintf(stderr, "echo server: mely_shutdown: %s\n", mely_strerror(left));
    return err || herr ? 1 : 0;
}
