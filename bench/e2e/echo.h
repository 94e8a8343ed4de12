/* SPDX-License-Identifier: MIT */
/*
 * echo.h: what the parts of bench/echo share.
 *
 * bench/echo is one program in two roles: the driver (echo.c: the rows, the
 * client, the table) and, started by the driver with `--server KIND`, one of
 * the echo servers (echo_mely.c, echo_libevent.c), each in a process of its
 * own so that the same client measures them all and their CPU time can be
 * read from /proc/<pid>/stat.
 *
 * The driver-server protocol, on the server's stdout (a pipe):
 *   "port <n>"           once the server listens on 127.0.0.1:<n>;
 *   "stat <key> <value>" any number, when the server ends (after SIGTERM),
 *                        e.g. "stat msgs_w0 123" (messages echoed by worker or
 *                        thread 0), "stat steals 4".
 * SIGTERM ends a server. The raw servers (mely's watches, libevent's events)
 * read once per readiness into a 16 KB buffer, write back at once, and only
 * on a short write wait for writability (write watch or event) and stop
 * reading meanwhile. The buffered ones (a mely stream, a libevent
 * bufferevent) move the input buffer to the output buffer, which their
 * library sends.
 */
#ifndef MELY_BENCH_E2E_ECHO_H
#define MELY_BENCH_E2E_ECHO_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Bytes a server reads at most per readiness. */
#define ECHO_BUF 16384u

/* Servers print their results with echo_stat(); the driver parses them. */
#define ECHO_MAX_THREADS 2u

/* "stat <key> <value>" on stdout. */
void echo_stat(const char *key, uint64_t value);

/* A listening TCP socket on 127.0.0.1:port (0: any), non-blocking, with
 * SO_REUSEADDR (and SO_REUSEPORT if reuseport), backlog SOMAXCONN.
 * @return the fd, or a negative errno. *bound: the port it got. */
int echo_listen_socket(unsigned port, bool reuseport, unsigned *bound);

/* Both servers' output: writes buf[*off..len) to fd, advancing *off; true
 * when all of it is out, false when the socket is full or (*dead set) on a
 * fatal error. */
bool echo_send_pending(int fd, const char *buf, size_t *off, size_t len, bool *dead);

/* One readiness of a connection: reads once (ECHO_BUF at most) into buf and
 * sends it back at once. ECHO_NOTHING: nothing to read yet; ECHO_SENT: echoed;
 * ECHO_FULL: echoed in part, buf[*off..*len) waits for writability;
 * ECHO_CLOSE: end of stream or an error. */
enum echo_step { ECHO_NOTHING, ECHO_SENT, ECHO_FULL, ECHO_CLOSE };
enum echo_step echo_once(int fd, char *buf, size_t *off, size_t *len);

/* Servers: run until SIGTERM; return the exit status. `steal` is mely's
 * policy ("off", "all", ...), `timeleft` the annotation of the echo handler in
 * TSC cycles (0: none), spin_us the workers' spin (-1: the default); stream:
 * the echo on streams (include/mely/stream.h, each connection a color of a range)
 * instead of watches colored with their fd. bufferevents: a bufferevent per
 * connection instead of a read and a write event. */
int echo_server_mely(const char *steal, uint64_t timeleft, int spin_us, bool stream);
int echo_server_libevent(unsigned threads, bool bufferevents);

/* ---- The client ------------------------------------------------------------------ */

struct echo_client_cfg {
    unsigned port;
    unsigned conns;     /* connections, each with one message in flight */
    unsigned msg_bytes; /* message size */
    double warmup_s;    /* before the measured window */
    double seconds;     /* the measured window */
    pid_t server;       /* its CPU time is read from /proc at both ends */
};

struct echo_client_res {
    bool ok;
    char why[160];      /* why not ok */
    uint64_t msgs;      /* round trips completed in the window */
    double elapsed_s;   /* the window's actual length */
    double p50_us, p99_us; /* round-trip times of those messages */
    double server_cpu_s;   /* the server's user + system time in the window */
    double client_cpu_s;   /* the client thread's, in the window */
    uint64_t samples_dropped; /* round trips not kept for the percentiles (cap) */
    unsigned starved;   /* connections without any round trip in the window */
    double ramp_ms;     /* from the first sends until every connection had an echo */
};

/* Connects cfg->conns connections to 127.0.0.1:cfg->port, then runs the
 * closed loop (one thread, epoll): first until every connection has had one
 * echo back (the ramp: the server has accepted and serves them all), then
 * warmup_s, then the measured window of `seconds`; then closes them.
 * Bounded: connecting gives up after 5 s, the ramp after 10 s, the loop after
 * 2 s without any completed round trip. Checks every echoed byte. */
void echo_client_run(const struct echo_client_cfg *cfg, struct echo_client_res *res);

#endif /* MELY_BENCH_E2E_ECHO_H */
