/* SPDX-License-Identifier: MIT */
/*
 * swsclient.h: what the SWS tests share: an in-process server on a thread,
 * and a raw-socket HTTP client (blocking sockets with receive timeouts, so
 * that no read can hang a test).
 */
#ifndef MELY_TESTS_SWSCLIENT_H
#define MELY_TESTS_SWSCLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include "apps/sws/sws.h"

/* ---- the server -------------------------------------------------------------------- */

/* A configuration for tests: port 0, 2 unpinned workers, the sample site
 * (SWS_TEST_EPOLL_HANDLER=1 in the environment: with --epoll-handler), and
 * --cache-settle-ms 0. */
void srv_config(struct sws_config *cfg);

/* Waits until the files written before the call have settled for a server
 * configured by srv_config (--cache-settle-ms 0): one tick of the coarse
 * clock and 5 ms. Until then SWS serves them without ETag and caches
 * nothing of them (apps/sws/files.c, "Snapshots of small files"). */
void files_settle(void);

/* Starts the server on a thread; returns its port (fails the test otherwise). */
unsigned srv_start(const struct sws_config *cfg);

/* The running server. */
struct sws *srv(void);

/* Drains (sws_drain) and waits at most `ms` for sws_run to return (then
 * stops it hard); frees. Returns whether the drain ended in time. */
bool srv_stop(unsigned ms);

/* ---- the client ------------------------------------------------------------------------- */

struct cl {
    int fd;
    char *buf; /* bytes received and not consumed yet */
    size_t len, cap;
};

struct resp {
    int status;
    char *head; /* the head, NUL-ended (status line and headers) */
    size_t head_len;
    char *body;
    size_t body_len;
};

/* Connects to 127.0.0.1:port with a receive timeout of `timeout_ms`. */
bool cl_connect(struct cl *c, unsigned port, unsigned timeout_ms);
/* The same with a small receive buffer (set before connecting, so that the
 * window is small from the start). */
bool cl_connect_rcvbuf(struct cl *c, unsigned port, unsigned timeout_ms, int rcvbuf);
void cl_close(struct cl *c);
bool cl_send(struct cl *c, const void *p, size_t n);
bool cl_sendstr(struct cl *c, const char *s);

/* Reads one response (head_only: a response to HEAD, or a 304: no body
 * whatever Content-Length says). Returns false on EOF, timeout or a
 * malformed response. Free with resp_free. */
bool cl_read(struct cl *c, struct resp *r, bool head_only);
void resp_free(struct resp *r);

/* A header's value (NUL-ended copy in a per-thread static buffer), or NULL. */
const char *resp_header(const struct resp *r, const char *name);

/* Whether the server closes the connection within `ms` (EOF or reset),
 * discarding what arrives; *extra gets the byte count read meanwhile. */
bool cl_closed_within(struct cl *c, unsigned ms, size_t *extra);

/* Whether nothing arrives for `ms` (the connection stays open and silent). */
bool cl_silent_for(struct cl *c, unsigned ms);

/* Whether the response has begun to arrive within `ms` (nothing consumed):
 * the server has its file by then, open or read. A test that changes the
 * file under a response waits for this, not for a fixed time that a loaded
 * machine may exceed. */
bool cl_response_began(struct cl *c, unsigned ms);

/* One request on a new connection; returns the status (-1 on failure). */
int get_status(unsigned port, const char *request);

/* ---- the binary (apps/sws/sws, run from the build directory) ------------------------ */

#define SWS_BIN "apps/sws/sws"

struct bin {
    int pid;        /* the process (pid_t) */
    int out;        /* its standard output, kept open while it runs */
    unsigned port;  /* from its start-up line; 0 if none came within 20 s */
    char line[512]; /* that line (what came of it) */
};

/* Starts argv (argv[0]: SWS_BIN) with its standard output on a pipe and
 * waits at most 20 s for the line with its port ("... on http://HOST:PORT/",
 * or http://[HOST]:PORT/ for IPv6). Fails the test if the binary is
 * missing, cannot be spawned or prints no port. */
void bin_start(struct bin *b, char *const argv[]);

/* SIGTERM, then at most 10 s for it to exit (then SIGKILL). Returns its exit
 * code, or -1 if it had to be killed or died of a signal. */
int bin_stop(struct bin *b);

/* Runs argv to its end (at most 20 s, then SIGKILL), its standard output and
 * error into out and err (NUL-ended). Returns its exit code (-1: a signal).
 * Fails the test if the binary is missing. */
int run_bin(char *const argv[], char *out, size_t outlen, char *err, size_t errlen);
/* ---- document roots ---------------------------------------------------------------------- */

/* Removes dir and everything under it (symbolic links, not what they name);
 * nothing for "". */
void rm_tree(const char *dir);

#endif /* MELY_TESTS_SWSCLIENT_H */
