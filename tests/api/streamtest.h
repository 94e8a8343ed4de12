/* SPDX-License-Identifier: MIT */
/*
 * streamtest.h: what the stream tests (check_stream.c, check_stream_close.c,
 * check_stream_write.c, check_stream_conn.c) share: a server whose accepted
 * connections become streams of one set of ops, a `struct conn` per stream
 * with the checks every callback makes,
 * blocking loopback clients with bounded reads, and a byte pattern for bulk
 * data that tells every offset apart.
 *
 * The server. start_server() makes the runtime `rt` (testutil.h), reserves a
 * color range and listens on 127.0.0.1; each accepted fd becomes a stream
 * of srv.ops on the color its fd picks in the range, with a new conn as its
 * argument (ids in accept order). The stream's first event of the test is a
 * setup event on its color: it runs srv.setup (settings are the stream's
 * color's calls), records the fd, keeps a reference in srv.stream[] if
 * srv.keep, and then counts the stream in srv.ready. Clients send nothing
 * before that (client_ready waits for it).
 *
 * Conns. A callback calls enter() first and leave() last: it must run on
 * the stream's color, alone, and never after the closed callback. on_closed
 * (the ops' closed callback of every test) checks the same, that it runs
 * once with mely_stream_fd -1 and writes refused, counts in srv, and puts
 * the conn in a graveyard freed after the runtime's shutdown: a callback
 * that arrives after the closed one is seen and noted in every build, not
 * only under ASan.
 *
 * Threads: callbacks and helper threads never call ck_assert (they note());
 * start_server, stop_server, assert_closed_once and serve are for the test
 * thread only; the client functions for the helper thread. Every wait is
 * bounded (WAIT_MS).
 */
#ifndef MELY_TESTS_STREAMTEST_H
#define MELY_TESTS_STREAMTEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mely/mely.h>
#include <mely/stream.h>
#include "tests/testutil.h"

#define ACCEPT_COLOR ((mely_color_t)1)
/* Colors of events that are not the streams' (below the ranges' floor). */
#define OTHER_COLOR(i) ((mely_color_t)(100 + (i)))

enum {
    WAIT_MS = 10000, /* the bound on anything that must happen */
    QUIET_MS = 100,  /* how long something that must not happen is given */
    EARLY_MS = 2,    /* what a timer may seem early by (clock reads on two threads) */
    MAXCONN = 16,
    ID_EXTRA = MAXCONN - 1, /* the conn of a stream not accepted (connect, socketpair) */
    SMALL_BUF = 65536,      /* SO_RCVBUF/SO_SNDBUF where a peer must stall: no autotuning */
    CHUNK = 16384,
};

/* Notes unless expr is want. */
#define CHECK_RC(expr, want)                                                                       \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ != (want))                                                                         \
            note("%s: %d, expected %d", #expr, rc_, (want));                                       \
    } while (0)

/* ---- connections ----------------------------------------------------------------------------- */

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

struct srv {
    mely_listener_t *l;
    unsigned port;
    mely_color_range_t colors; /* the streams' colors */
    mely_stream_ops_t ops;
    void (*setup)(mely_stream_t *s, struct conn *c); /* on the stream's color */
    bool keep;                                       /* setup keeps a reference in stream[] */
    atomic_uint accepted, ready, closed;
    atomic_uint closed_runs[MAXCONN];
    mely_stream_t *stream[MAXCONN]; /* written before `ready` counts the stream */
    int fd[MAXCONN];                /* idem */
    atomic_uint events, ev_what[MAXCONN];
    atomic_int ev_err[MAXCONN];
    _Atomic uint64_t t_event[4], t_closed; /* when (now_ns) */
    atomic_uint n;                         /* what a test counts */
    _Atomic uint64_t maxlen;               /* what a test measures */
};
extern struct srv srv;

/* A conn of id (noted and NULL when out of memory). */
struct conn *new_conn(unsigned id);

/* Frees the conns of closed streams (after the shutdown). */
void free_graveyard(void);

/* *v = max(*v, x). */
void max_store(_Atomic uint64_t *v, uint64_t x);

/* The first and last thing every callback but closed does (`cb` names it). */
void enter(mely_stream_t *s, struct conn *c, const char *cb);
void leave(struct conn *c);

/* An event callback's what and err into srv (ev_what, ev_err, t_event). */
void record_event(struct conn *c, unsigned what, int err);

/* The closed callback of every test (see the top). */
void on_closed(mely_stream_t *s, void *arg);

/* An event callback that records and closes at once, without flushing. */
void close_event_cb(mely_stream_t *s, unsigned what, int err, void *arg);

/* A line callback that replies "len:line\n" (checking line[len] == 0). */
void line_cb(mely_stream_t *s, char *line, size_t len, void *arg);
void reply_line(mely_stream_t *s, struct conn *c, char *line, size_t len);

/* On the stream's color: a small SO_SNDBUF, so that what the peer does not
 * read stays in the output (setup_small_sndbuf: as srv.setup). */
void small_sndbuf(mely_stream_t *s);
void setup_small_sndbuf(mely_stream_t *s, struct conn *c);

/* ---- the server ------------------------------------------------------------------------------ */

/* The engine of start_server's runtime (NULL: mely's); a test may set it
 * before start_server (each test runs in a process of its own). */
extern const char *server_engine;

/* A runtime of `workers` pinned workers listening for streams of ops. */
void start_server(unsigned workers, const mely_stream_ops_t *ops,
                  void (*setup)(mely_stream_t *, struct conn *), bool keep);

/* start_server in one of the stress tests' runtime shapes (testutil.h). */
void start_server_shape(const struct shape *sh, const mely_stream_ops_t *ops,
                        void (*setup)(mely_stream_t *, struct conn *), bool keep);

/* Drops the references srv.stream[] holds. */
void release_kept(void);

/* Closes the listener, drops the references, shuts the runtime down. */
void stop_server(void);

/* start_server, then a run bounded to 60 s with client(arg) as its helper. */
void serve(unsigned workers, const mely_stream_ops_t *ops,
           void (*setup)(mely_stream_t *, struct conn *), bool keep, void *(*client)(void *),
           void *arg, const char *what);

/* Each of the first n streams' closed callback ran exactly once. */
void assert_closed_once(unsigned n);

/* ---- the clients ----------------------------------------------------------------------------- */

/* A blocking TCP client of 127.0.0.1:port (TCP_NODELAY; sends give up after
 * WAIT_MS; both socket buffers of bufsize bytes unless 0); -1 (noted) if it
 * fails. */
int client_connect(unsigned port, int bufsize);

/* client_connect to the server, then waits until the n-th stream is set up. */
int client_ready(unsigned n, int bufsize);

/* Waits until n streams closed (noted if not). */
void wait_closed(unsigned n);

/* The helper's end: when all went well (ok), waits until the stream closed;
 * closes fd (if >= 0); stops the runtime. Returns NULL, the helper's result. */
void *client_done(int fd, bool ok);

bool send_all(int fd, const void *data, size_t n);
bool send_str(int fd, const char *s);

/* One recv() of at most n bytes, waiting at most ms: the bytes received;
 * *end becomes 1 at EOF, -errno on an error (a reset), else 0. */
size_t recv_some(int fd, void *buf, size_t n, unsigned ms, int *end);

/* n bytes (fewer at EOF, an error, or after ms). */
size_t recv_upto(int fd, void *buf, size_t n, unsigned ms, int *end);

/* The next bytes on fd are exactly `want` (noted if not). */
bool expect(int fd, const char *want);

/* Nothing arrives on fd for QUIET_MS (noted, saying why, if something does). */
void expect_quiet(int fd, const char *why);

/* The connection ends (EOF, or a reset when the server closed with input
 * unread) within WAIT_MS; bytes before it are counted in *extra (NULL: none
 * may come). */
bool expect_end(int fd, uint64_t *extra);

/* The connection ends with EOF, not a reset, within WAIT_MS, and nothing
 * arrives before it (noted, saying which, if not). */
bool expect_eof(int fd);

/* Whether fd is closed (EBADF). */
bool fd_closed(int fd);

/* Lines (without their "\n") read through a small buffer. */
struct lr {
    int fd;
    size_t len;
    char buf[8192];
};
bool next_line(struct lr *lr, char *out, size_t cap, unsigned ms);

/* ---- bulk data ------------------------------------------------------------------------------- */

/* The pattern's byte at offset off. */
uint8_t pat(uint64_t off);
void fill_pat(uint8_t *b, uint64_t off, size_t n);

/* The index of the first byte of b[0..n) that is not the pattern at off (n: none). */
size_t bad_pat(const uint8_t *b, uint64_t off, size_t n);

/* Appends n bytes of the pattern from off to s's output (any thread). */
bool write_pat(mely_stream_t *s, uint64_t off, uint64_t n);

/* Sends n bytes of the pattern from off (a client). */
void send_pat(int fd, uint64_t off, size_t n);

/* Sends byte(0), byte(1)... on fd without reading, until the socket took
 * nothing for 300 ms and stalled(arg) agrees (NULL: no more to ask), or max
 * bytes went (noted: "<what>: no backpressure"). Returns the bytes sent. */
uint64_t send_until_stalled(int fd, uint64_t max, uint8_t (*byte)(uint64_t),
                            bool (*stalled)(void *), void *arg, const char *what);

/* On the stream's color: takes the whole input, checking that it continues
 * the pattern at c->got. */
void take_pat(mely_stream_t *s, struct conn *c);

/* The next n bytes on fd are byte(off), byte(off + 1)... (noted if not). */
bool expect_bytes(int fd, uint64_t off, uint64_t n, uint8_t (*byte)(uint64_t));

/* expect_bytes of the pattern. */
bool expect_pat(int fd, uint64_t off, uint64_t n);

/* Reads the pattern from off until the connection ends; returns the bytes. */
uint64_t pat_to_end(int fd, uint64_t off);

#endif /* MELY_TESTS_STREAMTEST_H */
