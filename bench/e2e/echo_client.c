/* SPDX-License-Identifier: MIT */
/*
 * echo_client.c: the closed-loop client of bench/echo (see echo.h), and the
 * helpers the servers share (sockets, pinning, stat lines).
 *
 * One thread, one epoll set, N connections; each connection has one message
 * of S bytes in flight: it is sent, the whole echo is read back and compared
 * with what was sent, the round trip is timed (CLOCK_MONOTONIC, one read per
 * completed message, which also stamps the next send), and the next message
 * leaves at once. Round trips completed inside the measured window count.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench/e2e/echo.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/measure.h"

/* ---- Helpers the servers share ------------------------------------------------------ */

void echo_stat(const char *key, uint64_t value)
{
    printf("stat %s %llu\n", key, (unsigned long long)value);
}

bool echo_send_pending(int fd, const char *buf, size_t *off, size_t len, bool *dead)
{
    while (*off < len) { /* bounded: every pass sends bytes or returns */
        ssize_t n = send(fd, buf + *off, len - *off, MSG_NOSIGNAL);
        if (n > 0) {
            *off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return false;
        } else {
            *dead = true;
            return false;
        }
    }
    return true;
}

enum echo_step echo_once(int fd, char *buf, size_t *off, size_t *len)
{
    bool dead = false;
    ssize_t n = read(fd, buf, ECHO_BUF);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return ECHO_NOTHING;
    if (n <= 0)
        return ECHO_CLOSE;
    *off = 0;
    *len = (size_t)n;
    if (echo_send_pending(fd, buf, off, *len, &dead))
        return ECHO_SENT;
    return dead ? ECHO_CLOSE : ECHO_FULL;
}

int echo_listen_socket(unsigned port, bool reuseport, unsigned *bound)
{
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) ||
        bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, SOMAXCONN) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    *bound = ntohs(a.sin_port);
    return fd;
}

/* ---- The client -------------------------------------------------------------------------- */

#define CONNECT_LIMIT_NS 5000000000ull
#define STALL_LIMIT_NS 2000000000ull
#define RAMP_LIMIT_NS 10000000000ull
#define MAX_SAMPLES (16u * 1024u * 1024u) /* round trips kept for the percentiles */

struct conn {
    int fd;
    unsigned got;      /* bytes of the echo read so far */
    unsigned out;      /* bytes of the message written so far */
    uint64_t sent_ns;  /* when the message left (its first byte) */
    uint64_t seq;
    uint64_t done; /* round trips completed in the measured window */
    unsigned char *tx, *rx;
};

struct client {
    const struct echo_client_cfg *cfg;
    struct echo_client_res *res;
    struct conn *c;
    int ep;
    uint32_t *rtt_ns;
    size_t nrtt, cap;
    unsigned first_done; /* connections whose first echo came back */
};

static void fail(struct client *cl, const char *fmt, const char *detail)
{
    if (cl->res->ok) {
        cl->res->ok = false;
        snprintf(cl->res->why, sizeof(cl->res->why), fmt, detail);
    }
}

/* The message of sequence number seq on connection i: seq, then a pattern. */
static void fill(unsigned char *m, unsigned len, unsigned i, uint64_t seq)
{
    for (unsigned k = 0; k < len; k++)
        m[k] = (unsigned char)(i * 31u + seq * 7u + k);
    if (len >= sizeof(seq))
        memcpy(m, &seq, sizeof(seq));
}

/* Sends (the rest of) connection i's message; arms EPOLLOUT on a short write.
 * False on an error (reported). */
static bool send_rest(struct client *cl, unsigned i)
{
    struct conn *c = &cl->c[i];
    unsigned len = cl->cfg->msg_bytes;

    while (c->out < len) {
        ssize_t n = send(c->fd, c->tx + c->out, len - c->out, MSG_NOSIGNAL);
        if (n > 0) {
            c->out += (unsigned)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.u32 = i};
            if (epoll_ctl(cl->ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) {
                fail(cl, "epoll_ctl: %s", strerror(errno));
                return false;
            }
            return true;
        }
        fail(cl, "send: %s", n < 0 ? strerror(errno) : "wrote nothing");
        return false;
    }
    return true;
}

static bool start_message(struct client *cl, unsigned i, uint64_t now)
{
    struct conn *c = &cl->c[i];
    c->seq++;
    fill(c->tx, cl->cfg->msg_bytes, i, c->seq);
    c->got = c->out = 0;
    c->sent_ns = now;
    return send_rest(cl, i);
}

static bool connect_all(struct client *cl)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cl->cfg->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    uint64_t limit = now_ns() + CONNECT_LIMIT_NS;
    struct timeval tv = {.tv_sec = 2};
    int one = 1;

    for (unsigned i = 0; i < cl->cfg->conns; i++) {
        /* Blocking connect (a loopback handshake completes at once while the
         * backlog has room), bounded by SO_SNDTIMEO; then non-blocking. */
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            fail(cl, "socket: %s (raise ulimit -n?)", strerror(errno));
            return false;
        }
        cl->c[i].fd = fd;
        if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
            fail(cl, "setsockopt: %s", strerror(errno));
            return false;
        }
        int r;
        while ((r = connect(fd, (struct sockaddr *)&a, sizeof(a))) != 0 && errno == EINTR &&
               now_ns() < limit)
            ;
        if (r != 0) {
            fail(cl, "connect: %s", strerror(errno));
            return false;
        }
        struct timeval zero = {0};
        if (set_nonblocking(fd) != 0 ||
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &zero, sizeof(zero)) != 0) {
            fail(cl, "fcntl: %s", strerror(errno));
            return false;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
        if (epoll_ctl(cl->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
            fail(cl, "epoll_ctl: %s", strerror(errno));
            return false;
        }
        if (now_ns() > limit) {
            fail(cl, "connecting took over 5 s%s", "");
            return false;
        }
    }
    return true;
}

/* Reads what connection i has; on a whole echo, checks it, counts it if
 * `measuring`, and sends the next message. False on an error (reported). */
static bool on_readable(struct client *cl, unsigned i, bool measuring, uint64_t *completed)
{
    struct conn *c = &cl->c[i];
    unsigned len = cl->cfg->msg_bytes;

    for (;;) {
        ssize_t n = read(c->fd, c->rx + c->got, len - c->got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return true;
        if (n == 0) {
            fail(cl, "the server closed a connection%s", "");
            return false;
        }
        if (n < 0) {
            fail(cl, "read: %s", strerror(errno));
            return false;
        }
        if (c->out < len) {
            fail(cl, "an echo came back before the message was sent%s", "");
            return false;
        }
        c->got += (unsigned)n;
        if (c->got < len)
            continue; /* one more read: the rest may be there (or EAGAIN) */
        if (memcmp(c->rx, c->tx, len) != 0) {
            fail(cl, "an echo differs from its message%s", "");
            return false;
        }
        uint64_t now = now_ns();
        (*completed)++;
        if (c->seq == 1)
            cl->first_done++;
        if (measuring) {
            cl->res->msgs++;
            c->done++;
            uint64_t rtt = now - c->sent_ns;
            if (cl->nrtt == cl->cap && cl->cap < MAX_SAMPLES) {
                size_t cap = cl->cap ? cl->cap * 2 : 65536;
                uint32_t *p = realloc(cl->rtt_ns, cap * sizeof(uint32_t));
                if (p) {
                    cl->rtt_ns = p;
                    cl->cap = cap;
                }
            }
            if (cl->nrtt < cl->cap)
                cl->rtt_ns[cl->nrtt++] = rtt > UINT32_MAX ? UINT32_MAX : (uint32_t)rtt;
            else
                cl->res->samples_dropped++;
        }
        return start_message(cl, i, now);
    }
}

static double quantile_us(const uint32_t *v, size_t n, double q)
{
    if (n == 0)
        return 0;
    size_t i = (size_t)(q * (double)n);
    if (i >= n)
        i = n - 1;
    return (double)v[i] / 1000.0;
}

void echo_client_run(const struct echo_client_cfg *cfg, struct echo_client_res *res)
{
    struct client cl = {.cfg = cfg, .res = res, .ep = -1};
    enum { MAXEV = 512 };
    struct epoll_event ev[MAXEV];

    memset(res, 0, sizeof(*res));
    res->ok = true;
    cl.c = calloc(cfg->conns, sizeof(struct conn));
    unsigned char *bufs = calloc(cfg->conns, 2 * (size_t)cfg->msg_bytes);
    if (!cl.c || !bufs) {
        fail(&cl, "out of memory%s", "");
        goto out;
    }
    for (unsigned i = 0; i < cfg->conns; i++) {
        cl.c[i].fd = -1;
        cl.c[i].tx = bufs + 2 * (size_t)cfg->msg_bytes * i;
        cl.c[i].rx = cl.c[i].tx + cfg->msg_bytes;
    }
    cl.ep = epoll_create1(EPOLL_CLOEXEC);
    if (cl.ep < 0) {
        fail(&cl, "epoll_create1: %s", strerror(errno));
        goto out;
    }
    if (!connect_all(&cl))
        goto out;

    uint64_t t0 = now_ns();
    uint64_t win_start = 0; /* set when the ramp ends */
    uint64_t win_len = (uint64_t)(cfg->seconds * 1e9);
    uint64_t t_start = 0, t_end = 0, completed = 0, last_progress = t0;
    double srv0 = 0, cli0 = 0;
    int phase = -1; /* -1 ramp (until every connection had an echo), 0 warm-up, 1 measuring,
                       2 done */

    for (unsigned i = 0; i < cfg->conns; i++)
        if (!start_message(&cl, i, t0))
            goto out;
    while (phase < 2) {
        int n = epoll_wait(cl.ep, ev, MAXEV, 50);
        if (n < 0 && errno != EINTR) {
            fail(&cl, "epoll_wait: %s", strerror(errno));
            goto out;
        }
        uint64_t before = completed;
        for (int k = 0; k < n; k++) {
            unsigned i = ev[k].data.u32;
            if (ev[k].events & EPOLLOUT) {
                if (!send_rest(&cl, i))
                    goto out;
                if (cl.c[i].out == cfg->msg_bytes) {
                    struct epoll_event e = {.events = EPOLLIN, .data.u32 = i};
                    if (epoll_ctl(cl.ep, EPOLL_CTL_MOD, cl.c[i].fd, &e) != 0) {
                        fail(&cl, "epoll_ctl: %s", strerror(errno));
                        goto out;
                    }
                }
            }
            if ((ev[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) &&
                !on_readable(&cl, i, phase == 1, &completed))
                goto out;
        }
        uint64_t now = now_ns();
        if (completed != before)
            last_progress = now;
        else if (now - last_progress > STALL_LIMIT_NS) {
            fail(&cl, "no echo for 2 s%s", "");
            goto out;
        }
        if (phase == -1 && cl.first_done == cfg->conns) {
            phase = 0;
            res->ramp_ms = (double)(now - t0) / 1e6;
            win_start = now + (uint64_t)(cfg->warmup_s * 1e9);
        } else if (phase == -1 && now - t0 > RAMP_LIMIT_NS) {
            char msg[96];
            snprintf(msg, sizeof(msg), "after 10 s, %u of %u connections had no echo yet",
                     cfg->conns - cl.first_done, cfg->conns);
            fail(&cl, "%s", msg);
            goto out;
        }
        if (phase == 0 && now >= win_start) {
            phase = 1;
            t_start = now;
            srv0 = proc_cpu_s(cfg->server);
            cli0 = cpu_s(RUSAGE_THREAD);
        } else if (phase == 1 && now - t_start >= win_len) {
            phase = 2;
            t_end = now;
            double srv1 = proc_cpu_s(cfg->server);
            res->client_cpu_s = cpu_s(RUSAGE_THREAD) - cli0;
            res->server_cpu_s = srv0 >= 0 && srv1 >= 0 ? srv1 - srv0 : -1;
        }
    }
    res->elapsed_s = (double)(t_end - t_start) / 1e9;
    qsort(cl.rtt_ns, cl.nrtt, sizeof(uint32_t), cmp_u32);
    res->p50_us = quantile_us(cl.rtt_ns, cl.nrtt, 0.50);
    res->p99_us = quantile_us(cl.rtt_ns, cl.nrtt, 0.99);
    if (res->msgs == 0)
        fail(&cl, "no round trip in the window%s", "");
    for (unsigned i = 0; i < cfg->conns; i++)
        if (cl.c[i].done == 0)
            res->starved++;

out:
    if (cl.c)
        for (unsigned i = 0; i < cfg->conns; i++)
            if (cl.c[i].fd >= 0)
                close(cl.c[i].fd);
    if (cl.ep >= 0)
        close(cl.ep);
    free(cl.rtt_ns);
    free(bufs);
    free(cl.c);
}
