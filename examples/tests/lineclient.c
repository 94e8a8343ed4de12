/* SPDX-License-Identifier: MIT */
/*
 * lineclient.c: blocking loopback clients for the example servers' tests
 * (lineclient.h).
 */
#include "examples/tests/lineclient.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static atomic_uint failures;

void lc_fail(const char *fmt, ...)
{
    va_list ap;
    char msg[512];
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAIL: %s\n", msg);
    failures++;
}

unsigned lc_failures(void)
{
    return failures;
}

bool lc_connect(struct lc *c, unsigned port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {.tv_sec = LC_TIMEOUT_MS / 1000, .tv_usec = LC_TIMEOUT_MS % 1000 * 1000};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->len = 0;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
        setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int)) != 0) {
        lc_fail("connect to 127.0.0.1:%u: %s", port, strerror(errno));
        if (c->fd >= 0)
            close(c->fd);
        c->fd = -1;
        return false;
    }
    return true;
}

void lc_close(struct lc *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

bool lc_send(struct lc *c, const void *p, size_t n)
{
    const char *b = p;
    while (n > 0) { /* bounded: each pass sends bytes, or fails within SO_SNDTIMEO */
        ssize_t k = send(c->fd, b, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        b += k;
        n -= (size_t)k;
    }
    return true;
}

bool lc_sendstr(struct lc *c, const char *s)
{
    return lc_send(c, s, strlen(s));
}

unsigned lc_timeout_ms(void)
{
    const char *s = getenv("MELY_TEST_SCALE");
    double scale = s && *s ? strtod(s, NULL) : 1.0;
    if (!(scale > 0.01) || scale > 1.0)
        scale = 1.0; /* only ever longer than 10 s, at most 100 times */
    return (unsigned)(10000 / scale);
}

/* Reads more into buf; false on EOF, an error or a timeout. */
static bool fill(struct lc *c)
{
    ssize_t k;
    do
        k = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
    while (k < 0 && errno == EINTR);
    if (k <= 0)
        return false;
    c->len += (size_t)k;
    return true;
}

static void consume(struct lc *c, size_t n)
{
    memmove(c->buf, c->buf + n, c->len - n);
    c->len -= n;
}

bool lc_recv(struct lc *c, void *p, size_t n)
{
    char *out = p;
    while (n > 0) {
        if (c->len == 0 && !fill(c))
            return false;
        size_t k = c->len < n ? c->len : n;
        memcpy(out, c->buf, k);
        consume(c, k);
        out += k;
        n -= k;
    }
    return true;
}

bool lc_line(struct lc *c, char *line, size_t size)
{
    char *nl;
    while (!(nl = memchr(c->buf, '\n', c->len)))
        if (c->len == sizeof(c->buf) || !fill(c))
            return false;
    size_t n = (size_t)(nl - c->buf);
    if (n >= size)
        return false;
    memcpy(line, c->buf, n);
    line[n] = '\0';
    consume(c, n + 1);
    return true;
}

bool lc_eof(struct lc *c)
{
    char b;
    ssize_t k;
    if (c->len > 0)
        return false;
    do
        k = recv(c->fd, &b, 1, 0);
    while (k < 0 && errno == EINTR);
    return k == 0 || (k < 0 && errno == ECONNRESET);
}

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

unsigned lc_all_closed(struct lc *c, unsigned n)
{
    unsigned closed = 0, waiting = 0;
    long long limit = now_ms() + LC_TIMEOUT_MS;
    for (unsigned i = 0; i < n; i++)
        waiting += c[i].fd >= 0;
    while (waiting > 0 && now_ms() < limit) { /* bounded by limit */
        struct pollfd p[n];
        for (unsigned i = 0; i < n; i++)
            p[i] = (struct pollfd){.fd = c[i].fd, .events = POLLIN};
        if (poll(p, n, (int)(limit - now_ms())) < 0 && errno != EINTR)
            break;
        for (unsigned i = 0; i < n; i++)
            if (p[i].fd >= 0 && p[i].revents) {
                closed += lc_eof(&c[i]);
                lc_close(&c[i]);
                waiting--;
            }
    }
    for (unsigned i = 0; i < n; i++)
        lc_close(&c[i]);
    return closed;
}

bool lc_args(int argc, char **argv, unsigned *port, int *pid)
{
    char *e1 = NULL, *e2 = NULL;
    unsigned long p = argc == 3 ? strtoul(argv[1], &e1, 10) : 0;
    long d = argc == 3 ? strtol(argv[2], &e2, 10) : 0;
    if (argc != 3 || *e1 || *e2 || p == 0 || p > 65535 || d <= 0) {
        fprintf(stderr, "usage: %s PORT PID (the server's port and process)\n", argv[0]);
        return false;
    }
    *port = (unsigned)p;
    *pid = (int)d;
    return true;
}
