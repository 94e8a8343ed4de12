/* SPDX-License-Identifier: MIT */
/*
 * sfsclient.h: what the SFS tests share: apps/sfs/sfsd run as a child process,
 * and a small client of its protocol (apps/sfs/proto.h) on blocking sockets
 * with send and receive timeouts, so that no call can hang a test.
 *
 * Nothing here calls ck_assert: every function returns whether it worked, and
 * a client keeps the reason of its last failure in `why` for the test's
 * message. Threads: one thread per client; the server functions are for the
 * test thread.
 */
#ifndef MELY_TESTS_SFSCLIENT_H
#define MELY_TESTS_SFSCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "apps/sfs/proto.h"

/* ---- the server: apps/sfs/sfsd as a child ------------------------------------------- */

struct sfsd_proc {
    pid_t pid;
    unsigned port;
    int out; /* its stdout (the banner, then the statistics line) */
};

/* The statistics line sfsd prints at SIGTERM (main.C, server.C). */
struct sfsd_report {
    unsigned long conns, closed, refused, requests, paused; /* paused: a connection stopped reading */
    /* the limits: connections evicted in their handshake, closed by a timeout */
    unsigned long evicted, handshake_timeouts, idle_timeouts;
    unsigned long hello, frame, request, oversize, io; /* errors by kind */
    char line[512];
};

/* Starts `apps/sfs/sfsd --root root --port 0` plus `extra` (NULL-ended, may
 * be NULL) from the build directory, and reads the port from its banner
 * (within 30 s). Its stderr is ours; it is killed if the test process dies
 * first. @return false (*why says why: not
 * built, no banner, exited). */
bool sfsd_start(struct sfsd_proc *p, const char *root, const char *const *extra, char *why,
                size_t whylen);

/* SIGTERM, then waits at most `ms` for it to exit (SIGKILL after) and parses
 * its statistics line. @return false if it did not exit 0 in time or printed
 * no statistics (r->line holds what it printed). */
bool sfsd_stop(struct sfsd_proc *p, unsigned ms, struct sfsd_report *r);

/* A /proc/PID/status field in kB ("VmRSS", "VmHWM"); -1 if unreadable. */
long proc_status_kb(pid_t pid, const char *field);

/* Descriptors the process holds now (from /proc/PID/fd); -1 if unreadable. */
int proc_fds(pid_t pid);

/* ---- raw sockets ---------------------------------------------------------------------- */

/* A blocking TCP connection to 127.0.0.1:port with send and receive timeouts
 * of `timeout_ms`. @return the socket, or -1. */
int sfs_dial(unsigned port, unsigned timeout_ms);

/* sfs_dial from the local address `from` (another loopback address, such as
 * "127.0.0.2": a second client host for sfsd's per-address limit); NULL: the
 * system's choice. */
int sfs_dial_from(unsigned port, const char *from, unsigned timeout_ms);

/* Writes all n bytes. @return false on error or timeout. */
bool send_all(int fd, const void *p, size_t n);

/* Reads exactly n bytes. @return n; fewer if EOF, an error or the timeout
 * came first (errno then says which: 0 for EOF). */
size_t recv_all(int fd, void *p, size_t n);

/* Whether the peer closes within `ms` (EOF or a reset), discarding what
 * arrives; *extra (may be NULL) gets the bytes read meanwhile. */
bool closed_within(int fd, unsigned ms, size_t *extra);

/* ---- the client -------------------------------------------------------------------------- */

struct sfsc {
    int fd;
    struct sfs_session s;
    uint32_t next_id; /* the id sfsc_send() gives the next request */
    uint8_t *buf;     /* the last reply frame: a decoded reply points into it */
    uint8_t server_hello[SFS_HELLO];
    char why[160];    /* the last failure */
};

/* Dials and runs the key exchange with a fresh key pair. @return false
 * (c->why says why; c is then closed). */
bool sfsc_connect(struct sfsc *c, unsigned port);

/* sfsc_connect from the local address `from` (sfs_dial_from). */
bool sfsc_connect_from(struct sfsc *c, unsigned port, const char *from);

/* The key exchange on a dialed socket, sending `hello` (kx's own hello, or
 * one a test altered) and keying the session with kx. */
bool sfsc_handshake(struct sfsc *c, int fd, struct sfs_kx *kx, const uint8_t hello[SFS_HELLO]);

void sfsc_close(struct sfsc *c);

/* Seals n bytes of plaintext into frame (room for SFS_LENGTH + n + SFS_TAG)
 * with the next counter. @return the frame's size (0: libcrypto failed). */
size_t sfsc_seal(struct sfsc *c, const void *plain, size_t n, uint8_t *frame);

/* Encodes r (its id set to the next one), seals and sends it. @return false
 * if it cannot be encoded or sent. */
bool sfsc_send(struct sfsc *c, struct sfs_request *r);

/* Reads, opens and decodes one reply; its data points into c->buf until the
 * next call. @return false: EOF, timeout, an oversized frame, or one that
 * does not authenticate or decode (c->why says which). */
bool sfsc_recv(struct sfsc *c, struct sfs_reply *rep);

/* sfsc_send, then sfsc_recv, checking that the reply answers it (id, op). */
bool sfsc_call(struct sfsc *c, struct sfs_request *r, struct sfs_reply *rep);

/* LOOKUP of a path (n bytes, NULs allowed). @return the status (0 or an
 * errno value, *h and *a set on 0; either may be NULL), or -1 if the call failed. */
int sfsc_lookup(struct sfsc *c, const char *path, size_t n, uint64_t *h, struct sfs_attr *a);

/* READ of count bytes at offset; on 0 the data is rep->data (rep->count bytes).
 * @return the status, or -1 if the call failed. */
int sfsc_read(struct sfsc *c, uint64_t h, uint64_t offset, uint32_t count, struct sfs_reply *rep);

/* A request of op (GETATTR, RELEASE, READDIR with its cookie) on a handle.
 * @return the status, or -1 if the call failed. */
int sfsc_simple(struct sfsc *c, uint8_t op, uint64_t h, uint32_t cookie, struct sfs_reply *rep);

#endif /* MELY_TESTS_SFSCLIENT_H */
