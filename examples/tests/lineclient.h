/* SPDX-License-Identifier: MIT */
/*
 * lineclient.h: what the example servers' clients share (examples/tests/echoclient.c,
 * examples/tests/kvclient.c): blocking loopback connections whose reads time out, so
 * that a server that stops answering fails a test instead of hanging it, and
 * a failure count.
 */
#ifndef MELY_TESTS_LINECLIENT_H
#define MELY_TESTS_LINECLIENT_H

#include <stdbool.h>
#include <stddef.h>

/* How long a read waits for the server: 10 s, divided by MELY_TEST_SCALE
 * when it is set (as for the tests' bounds: a server under valgrind on a
 * loaded machine is many times slower). */
unsigned lc_timeout_ms(void);
#define LC_TIMEOUT_MS (lc_timeout_ms())

struct lc {
    int fd;
    size_t len;       /* bytes received and not consumed yet, in buf */
    char buf[16384];
};

/* Connects to 127.0.0.1:port; false (and a failure noted) if it cannot. */
bool lc_connect(struct lc *c, unsigned port);
void lc_close(struct lc *c);

/* Sends all n bytes (a send blocks at most LC_TIMEOUT_MS). */
bool lc_send(struct lc *c, const void *p, size_t n);
bool lc_sendstr(struct lc *c, const char *s);

/* Receives exactly n bytes; false on EOF, an error or a timeout. */
bool lc_recv(struct lc *c, void *p, size_t n);

/* Receives one line: its bytes up to the LF (excluded) into line, NUL-ended;
 * false on EOF, an error, a timeout or a line of size bytes or more. */
bool lc_line(struct lc *c, char *line, size_t size);

/* Whether the server closes the connection (EOF, or a reset) within
 * LC_TIMEOUT_MS with nothing more to read first. */
bool lc_eof(struct lc *c);

/* Waits until the server has closed each of the n connections (EOF, or a
 * reset, with nothing more to read first), for LC_TIMEOUT_MS in all, then
 * closes them; returns how many the server closed. Connections not open
 * (fd -1) are skipped. */
unsigned lc_all_closed(struct lc *c, unsigned n);

/* Notes a failure: prints "FAIL: ..." on stderr and counts it. Any thread. */
void lc_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Failures noted so far. */
unsigned lc_failures(void);

/* argv's PORT and PID (`client PORT PID`); false, with a usage line on
 * stderr, if they are not numbers. */
bool lc_args(int argc, char **argv, unsigned *port, int *pid);

#endif /* MELY_TESTS_LINECLIENT_H */
