/* SPDX-License-Identifier: MIT */
/*
 * idle_conns.c: holds N idle keep-alive HTTP connections open, for measuring
 * what an idle connection costs a server (bench/e2e/sws-memory.sh reads the
 * server's RSS before and after).
 *
 *   idle_conns PORT N [PATH]
 *
 * Opens N connections to 127.0.0.1:PORT, one at a time; on each sends one
 * "GET PATH HTTP/1.1" (default /) and reads the response head and its
 * Content-Length bytes of body, so that the server has served one request
 * and holds the connection idle. Then prints "ready N" and waits until its
 * standard input closes (or 600 s), and closes them all. Exit status 0, or 1
 * with a message if a connection or a response fails (within 10 s each).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

enum { TIMEOUT_MS = 10000, MAX_CONNS = 100000 };

static int fail(const char *what, unsigned i)
{
    fprintf(stderr, "idle_conns: connection %u: %s: %s\n", i, what,
            errno ? strerror(errno) : "unexpected response");
    return 1;
}

/* Reads until the head and Content-Length bytes of body are in; 0 or -1. */
static int read_response(int fd)
{
    char buf[65536];
    size_t len = 0;
    long body = -1;
    char *end = NULL;
    for (;;) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, TIMEOUT_MS) != 1)
            return -1;
        ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (n <= 0)
            return -1;
        len += (size_t)n;
        buf[len] = '\0';
        if (!end && (end = strstr(buf, "\r\n\r\n")) != NULL) {
            const char *cl = strcasestr(buf, "\r\nContent-Length:");
            if (!cl || cl > end || strncmp(buf, "HTTP/1.1 200", 12) != 0)
                return -1;
            body = strtol(cl + 17, NULL, 10);
        }
        if (end && (long)(len - (size_t)(end + 4 - buf)) >= body)
            return 0;
        if (len == sizeof(buf) - 1)
            return -1; /* bodies this big are not what this measures */
    }
}

/* Opens n connections, one request served on each, into fds; 0, or 1 with a
 * message. */
static int open_all(int *fds, unsigned n, unsigned port, const char *req, size_t len)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (unsigned i = 0; i < n; i++) {
        errno = 0;
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] < 0)
            return fail("socket", i);
        if (connect(fds[i], (struct sockaddr *)&a, sizeof(a)) != 0)
            return fail("connect", i);
        if (write(fds[i], req, len) != (ssize_t)len)
            return fail("write", i);
        if (read_response(fds[i]) != 0)
            return fail("response", i);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: idle_conns PORT N [PATH]\n");
        return 2;
    }
    unsigned port = (unsigned)strtoul(argv[1], NULL, 10);
    unsigned n = (unsigned)strtoul(argv[2], NULL, 10);
    char req[512];
    int rlen = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                        argc == 4 ? argv[3] : "/");
    if (port == 0 || port > 65535 || n == 0 || n > MAX_CONNS || rlen <= 0 ||
        (size_t)rlen >= sizeof(req)) {
        fprintf(stderr, "idle_conns: PORT 1..65535, N 1..%d, a PATH of < 480 bytes\n", MAX_CONNS);
        return 2;
    }
    struct rlimit rl = { n + 64, n + 64 };
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        fprintf(stderr, "idle_conns: cannot allow %u descriptors: %s\n", n + 64, strerror(errno));
        return 1;
    }
    int *fds = calloc(n, sizeof(*fds));
    if (!fds || open_all(fds, n, port, req, (size_t)rlen) != 0)
        return 1;
    printf("ready %u\n", n);
    fflush(stdout);
    struct pollfd p = { .fd = 0, .events = POLLIN };
    char c;
    while (poll(&p, 1, 600000) == 1 && read(0, &c, 1) > 0)
        ;
    for (unsigned i = 0; i < n; i++)
        close(fds[i]);
    free(fds);
    return 0;
}
