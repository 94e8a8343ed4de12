/* SPDX-License-Identifier: MIT */
/*
 * sws.h: SWS, the static web server of the Mely paper (section 5.3.1), on the
 * native mely API. main.c is the command line; the tests drive the same
 * server in-process through this header.
 *
 * Files (one concept each):
 *   server.c  the server object: start-up, Accept and DecClientAccepted (the
 *             client cap), graceful shutdown (drain), clean-up
 *   conn.c    a connection's state machine: ReadRequest, ParseRequest,
 *             CheckInCache, ReadFile, WriteResponse, Close, BadRequest,
 *             NotFound, the idle timer
 *   http.c    the request parser        cache.c   the file cache's table
 *   files.c   the file cache's entries: opening beneath the root, heads
 *   status.c  /server-status            main.c    the command line
 *
 * Every handler of one connection runs as an event of the connection's color,
 * so one client's handlers never run at once and distinct clients run in
 * parallel; Accept and DecClientAccepted share the accept color (1, or each
 * worker's pinned color with --reuseport). A connection's color comes from
 * a color pool, placed on the less loaded worker (mely_color_place), and
 * goes back to it at Close; with --placement fd it is the descriptor's
 * number, as in the paper, and the worker follows its parity.
 */
#ifndef SWS_SWS_H
#define SWS_SWS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "apps/sws/cache.h"
#include <mely/mely.h>

struct sws_config {
    const char *root;      /* document root; NULL: the built-in sample site */
    const char *host;      /* listening address (default 127.0.0.1) */
    unsigned port;         /* 0: any free port (sws_port) */
    unsigned workers;      /* 0: every usable CPU */
    int pin;               /* pin workers to CPUs (mely_config_t.pin) */
    unsigned max_clients;  /* connections served at once (default 10,000) */
    unsigned max_waiting;  /* connections accepted at the cap anyway (a race of
                              --reuseport sockets) parked until a slot frees
                              (default max_clients); beyond them: 503, close */
    const char *steal;     /* work-stealing policy (NULL/"off": none) */
    const char *engine;    /* "mely" or "legacy" */
    unsigned timeout_ms;   /* idle / request timeout (default 30,000) */
    unsigned drain_ms;     /* graceful shutdown limit (default 5,000) */
    bool reuseport;        /* one SO_REUSEPORT listener per worker */
    bool measured_costs;   /* descriptors without timeleft + "measured" policy */
    bool signals;          /* SIGINT/SIGTERM drain and exit (main sets it) */
    bool epoll_handler;    /* the paper's arrangement: one Epoll handler of
                              color 0 polls every connection (its own epoll
                              set) and posts ReadRequest events */
    const char *status_path; /* the status page's path (NULL: "/server-status";
                                "off": none) */
    bool status_public;    /* the status page for every peer (default: only
                              loopback peers, 127.0.0.0/8 and ::1) */
    struct sws_cache_config cache; /* the file cache's limits (cache.h) */
    const char *trace;     /* trace every worker into this file (mely_trace_start;
                              written when SWS exits); NULL: no trace */
    bool place_by_fd;      /* color a connection by its descriptor (the paper's
                              way; its worker is then fd % workers) instead of
                              placing it by load from a color pool */
};

/* Default values (port 8080, the sample site, ...). */
void sws_config_init(struct sws_config *cfg);

/* The handlers' descriptors (annotated, or bare for measured costs). */
enum sws_handler {
    H_ACCEPT, H_READ, H_PARSE, H_CACHE, H_WRITE, H_CLOSE, H_DEC, H_BAD, H_NOTFOUND,
    H_START, H_TIMER, H_DRAIN, H_EPOLL, H_FILE, H_COUNT
};

struct sws_wstat { /* per worker, written by that worker only */
    atomic_uint_fast64_t requests, errors, bytes;
    char pad[64 - 3 * sizeof(atomic_uint_fast64_t)];
};

struct conn;

struct sws {
    mely_t rt;
    struct sws_config cfg;
    struct sws_cache cache;
    const mely_handler_t *h; /* [H_COUNT] */
    mely_listener_t *listener;
    bool tracing;            /* mely_trace_start(cfg.trace) succeeded */
    mely_watch_t *sigint, *sigterm;
    int epfd;                /* --epoll-handler's epoll set, else -1 */
    mely_watch_t *epoll_watch;
    uint64_t timeout_ns;
    uint64_t started_ns;

    _Atomic(struct conn *) *conns; /* by fd: every accepted, unparked connection */
    _Atomic uint64_t *keys;  /* by fd: that connection's key (conn_key), set
                                after conns[fd] and cleared before it; 0: none */
    unsigned nconns;
    mely_color_pool_t *pool; /* the connections' colors (NULL: --placement fd) */

    atomic_uint clients;     /* connections counted against the cap */
    pthread_mutex_t wait_mu; /* the parked connections, the listener, held */
    struct conn *wait_head, *wait_tail;
    unsigned waiting;
    bool held;               /* accepting paused at the cap */
    atomic_uint_fast64_t cap_pauses;
    uint64_t listener_pauses; /* the listener's exhaustion pauses, kept when
                                 the drain closes it (under wait_mu) */

    const char *status_path; /* NULL: no status page */
    size_t status_len;

    atomic_bool draining, stopped;
    atomic_uint_fast64_t accepted, refused, timeouts, closed;
    struct sws_wstat *ws; /* [workers] */
    unsigned workers;
};

/* Builds the site and the runtime, listens. Returns 0, or -1 with a message
 * in err. s is the caller's (zero it first). */
int sws_start(struct sws *s, const struct sws_config *cfg, char *err, size_t errlen);

/* The port listened on. */
unsigned sws_port(const struct sws *s);

/* The URL of a server on host (a numeric address) and port, as a client
 * writes it: "http://127.0.0.1:8080/", an IPv6 address in brackets
 * ("http://[::1]:8080/", RFC 3986: its colons would read as a port's).
 * Into out, NUL-ended, cut to n bytes; returns the length it needs (as
 * snprintf). Any thread. */
int sws_url(char *out, size_t n, const char *host, unsigned port);

/* Runs until a drain ends (or sws_halt). Returns mely_run()'s result. */
int sws_run(struct sws *s);

/* Graceful shutdown (as SIGTERM): stop accepting, finish the responses in
 * flight, close idle connections, then make sws_run() return (at the latest
 * after drain_ms). Any thread. */
void sws_drain(struct sws *s);

/* Frees everything (after sws_run returned, or instead of it). */
void sws_free(struct sws *s);

/* The measured cost of each handler (mely_handler_measured) to stdout. */
void sws_print_costs(const struct sws *s, FILE *out);

/* ---- internal, shared by the .c files ---------------------------------- */

struct http_req;

/* The server of this process (one per process: the drain and the handlers find it here). */
extern struct sws *sws_current;

/* conn.c */
struct conn *conn_new(struct sws *s, int fd, mely_color_t accept_color, bool status_ok);
void conn_start(void *c);       /* H_START: on the connection's color */
void conn_drain(void *key);     /* H_DRAIN: on the color of the key (conn_key) */
void conn_free_at_exit(struct conn *c); /* after mely_shutdown */
int conn_fd(const struct conn *c);
struct conn **conn_wait_next(struct conn *c);
/* Gives c its color (from the pool, or its descriptor's), and returns it. */
mely_color_t conn_place(struct conn *c);
/* Gives c's color back to the pool (a connection that never started). */
void conn_unplace(struct conn *c);
/* c's key: its descriptor, color and generation in one word, never 0. A
 * handler running on the key's color may use the connection that
 * s->conns[fd] names if s->keys[fd] still holds the key: only handlers of
 * that color free it. */
uint64_t conn_key(const struct conn *c);
mely_color_t conn_key_color(uint64_t key);

void sws_epoll(int epfd, unsigned ready, void *arg); /* H_EPOLL: the Epoll handler */

/* server.c */
void sws_dec_client(void *s);   /* H_DEC: DecClientAccepted */
void sws_count(struct sws *s, int status, uint64_t bytes);

/* status.c: the /server-status response, its head, a NUL, then its body;
 * malloc'ed, *len the length of all three; NULL if out of memory. */
char *sws_status(struct sws *s, bool json, size_t *len);

/* Sets s->status_path from the configuration; warns on stderr if the document
 * root has a file at that path (loopback peers get the status page instead).
 * Returns 0, or -1 with a message in err (a path that no request can have). */
int sws_status_setup(struct sws *s, char *err, size_t errlen);

/* Whether a connection from peer may see the status page: the page is on,
 * and public or the peer is a loopback address. Any thread. */
bool sws_status_allowed(const struct sws *s, const struct sockaddr *peer, unsigned peerlen);

/* Whether peer is a loopback address: 127.0.0.0/8, ::1, or ::ffff:127.0.0.0/104. */
bool sws_peer_loopback(const struct sockaddr *peer, unsigned peerlen);

#endif /* SWS_SWS_H */
