/* SPDX-License-Identifier: MIT */
/*
 * echo_libevent.c: the plain libevent echo servers of bench/echo.
 *
 *   threads = 1: one event_base run by one thread (the process may run on
 *                the first two allowed CPUs; the thread is not pinned);
 *   threads = 2: one event_base per thread, threads pinned to the first two
 *                allowed CPUs, each with its own SO_REUSEPORT listening
 *                socket on the same port (the kernel spreads connections).
 *
 * Per connection: an EV_READ|EV_PERSIST event that reads once (16 KB at most)
 * and writes back at once; on a short write the rest waits for an
 * EV_WRITE|EV_PERSIST event and reading stops until it is out. Accepting
 * takes up to 64 connections per readiness (accept4, non-blocking), like
 * mely_listen. No locking in libevent (no evthread_use_pthreads): a base is
 * only touched by its thread. SIGTERM is taken by sigwait() in the main
 * thread, which wakes each loop through an eventfd, joins them, prints the
 * stat lines and returns.
 *
 * With `bufferevents`, a bufferevent per connection instead (libevent's own
 * buffered connections, the peer of mely's streams): its read callback moves
 * the input to the output (bufferevent_write_buffer), which libevent sends
 * when the socket is writable; EOF or an error frees it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "bench/e2e/echo.h"
#include "common/measure.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

struct le_thread {
    unsigned idx;
    int cpu;   /* -1: not pinned */
    int lfd;   /* listening socket */
    int stopfd; /* eventfd: the main thread's stop request */
    struct event_base *base;
    struct event *accept_ev, *stop_ev;
    bool bufferevents; /* a bufferevent per connection */
    _Atomic uint64_t msgs; /* reads that echoed data (written by the thread only) */
    uint64_t conns;
    pthread_t th;
    bool failed;
};

struct le_conn {
    struct le_thread *t;
    int fd;
    struct event *rev, *wev;
    size_t off, len; /* pending output: buf[off..len) */
    char buf[ECHO_BUF];
};

static void conn_close(struct le_conn *c)
{
    event_free(c->rev);
    event_free(c->wev);
    close(c->fd);
    free(c);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
    struct le_conn *c = arg;
    bool dead = false;
    (void)fd;
    (void)what;
    if (echo_send_pending(c->fd, c->buf, &c->off, c->len, &dead)) {
        event_del(c->wev);
        event_add(c->rev, NULL);
    } else if (dead) {
        conn_close(c);
    }
}

static void count_msg(struct le_thread *t)
{
    atomic_store_explicit(&t->msgs, atomic_load_explicit(&t->msgs, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    struct le_conn *c = arg;
    enum echo_step step = echo_once((int)fd, c->buf, &c->off, &c->len);
    (void)what;

    if (step == ECHO_SENT || step == ECHO_FULL)
        count_msg(c->t);
    if (step == ECHO_CLOSE) {
        conn_close(c);
    } else if (step == ECHO_FULL) {
        event_del(c->rev);
        event_add(c->wev, NULL);
    }
}

static void bev_read(struct bufferevent *bev, void *arg)
{
    count_msg(arg);
    if (bufferevent_write_buffer(bev, bufferevent_get_input(bev)) != 0)
        bufferevent_free(bev);
}

static void bev_event(struct bufferevent *bev, short what, void *arg)
{
    (void)arg;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        bufferevent_free(bev); /* closes the socket */
}

/* A bufferevent for fd; false (fd closed) if it cannot be made. */
static bool bev_conn(struct le_thread *t, int fd)
{
    struct bufferevent *bev = bufferevent_socket_new(t->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!bev) {
        close(fd);
        return false;
    }
    bufferevent_setcb(bev, bev_read, NULL, bev_event, t);
    if (bufferevent_enable(bev, EV_READ) != 0) {
        bufferevent_free(bev);
        return false;
    }
    return true;
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
    struct le_thread *t = arg;
    int one = 1;
    (void)what;
    for (int k = 0; k < 64; k++) {
        int fd = accept4((int)lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
                continue;
            return; /* EAGAIN, or out of descriptors: the next readiness retries */
        }
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (t->bufferevents) {
            t->conns += bev_conn(t, fd);
            continue;
        }
        struct le_conn *c = malloc(sizeof(*c));
        if (!c) {
            close(fd);
            continue;
        }
        c->t = t;
        c->fd = fd;
        c->off = c->len = 0;
        c->rev = event_new(t->base, fd, EV_READ | EV_PERSIST, on_read, c);
        c->wev = event_new(t->base, fd, EV_WRITE | EV_PERSIST, on_write, c);
        if (!c->rev || !c->wev || event_add(c->rev, NULL) != 0) {
            if (c->rev)
                event_free(c->rev);
            if (c->wev)
                event_free(c->wev);
            close(fd);
            free(c);
            continue;
        }
        t->conns++;
    }
}

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    struct le_thread *t = arg;
    (void)fd;
    (void)what;
    event_base_loopbreak(t->base);
}

static void *thread_main(void *arg)
{
    struct le_thread *t = arg;
    pin_self(t->cpu);
    if (event_base_dispatch(t->base) < 0)
        t->failed = true;
    return NULL;
}

int echo_server_libevent(unsigned threads, bool bufferevents)
{
    struct le_thread t[ECHO_MAX_THREADS];
    int cpu[2];
    unsigned port = 0;
    sigset_t term;

    if (threads < 1 || threads > ECHO_MAX_THREADS)
        return 2;
    first_cpus(cpu, 2);
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, NULL); /* the threads inherit it */
    signal(SIGPIPE, SIG_IGN);

    memset(t, 0, sizeof(t));
    for (unsigned i = 0; i < threads; i++) {
        t[i].idx = i;
        t[i].bufferevents = bufferevents;
        t[i].cpu = threads > 1 ? cpu[i] : -1;
        t[i].lfd = echo_listen_socket(port, threads > 1, &port);
        if (t[i].lfd < 0) {
            fprintf(stderr, "echo server: listen: %s\n", strerror(-t[i].lfd));
            return 1;
        }
        t[i].stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        t[i].base = event_base_new();
        if (t[i].stopfd < 0 || !t[i].base) {
            fprintf(stderr, "echo server: eventfd or event_base_new failed\n");
            return 1;
        }
        t[i].accept_ev = event_new(t[i].base, t[i].lfd, EV_READ | EV_PERSIST, on_accept, &t[i]);
        t[i].stop_ev = event_new(t[i].base, t[i].stopfd, EV_READ, on_stop, &t[i]);
        if (!t[i].accept_ev || !t[i].stop_ev || event_add(t[i].accept_ev, NULL) != 0 ||
            event_add(t[i].stop_ev, NULL) != 0) {
            fprintf(stderr, "echo server: event_new/event_add failed\n");
            return 1;
        }
    }
    for (unsigned i = 0; i < threads; i++) {
        int err = pthread_create(&t[i].th, NULL, thread_main, &t[i]);
        if (err) {
            fprintf(stderr, "echo server: pthread_create: %s\n", strerror(err));
            return 1;
        }
    }
    printf("port %u\n", port);
    fflush(stdout);

    int sig;
    while (sigwait(&term, &sig) != 0)
        ;
    static const uint64_t one = 1;
    for (unsigned i = 0; i < threads; i++)
        if (write(t[i].stopfd, &one, sizeof(one)) != sizeof(one))
            fprintf(stderr, "echo server: cannot stop thread %u\n", i);
    bool failed = false;
    for (unsigned i = 0; i < threads; i++) {
        pthread_join(t[i].th, NULL);
        failed |= t[i].failed;
    }
    for (unsigned i = 0; i < threads; i++) {
        char key[32];
        snprintf(key, sizeof(key), "msgs_w%u", i);
        echo_stat(key, atomic_load(&t[i].msgs));
        snprintf(key, sizeof(key), "conns_w%u", i);
        echo_stat(key, t[i].conns);
    }
    fflush(stdout);
    /* Connections still open are the client's business: the process ends. */
    return failed ? 1 : 0;
}
