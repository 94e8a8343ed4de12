/* SPDX-License-Identifier: MIT */
/*
 * io/listen.c: listening sockets and their accept loops, on fd watches.
 *
 * One socket watched on the listener's color, or (MELY_LISTEN_REUSEPORT) one
 * SO_REUSEPORT socket per worker, each watched on that worker's pinned color,
 * so that every worker accepts its share without a shared queue.
 *
 * The accept loop takes at most ACCEPT_MAX connections per readiness (the
 * level-triggered watch brings it back for the rest, after the worker's other
 * work). When the process or the system runs out of descriptors or memory,
 * accept() fails at once with the connection still pending, so a watch left
 * armed would make the loop spin: the socket's watch is removed and a timer
 * re-creates it PAUSE_NS later (the counter `pauses` says how often).
 *
 * The user can also hold accepting (mely_listener_pause, e.g. at a client
 * cap) and release it (mely_listener_resume): the watches leave epoll, and
 * new connections wait in the kernel's backlog, as with any server that
 * stops accepting. `held` is also checked by the accept loop, so a readiness
 * event queued before the pause accepts nothing more. A held listener whose
 * descriptor pause ends stays unwatched until it is resumed.
 *
 * Lifetime: the listener counts references: the user's (dropped by
 * mely_listener_close), one per live watch (dropped by the watch's
 * destruction, which happens only once no accept handler runs or will), one
 * per pending pause timer. The last one closes the sockets and frees it:
 * close never waits for a handler running on another worker, and a handler
 * never sees freed memory. `mu` orders pausing, resuming and closing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mely/remote/colormap.h"
#include "mely/core/handle.h"
#include "mely/io/iostate.h"
#include "mely/io/listen.h"
#include "mely/io/watch.h"
#include "mely/observe/runname.h"
#include "mely/runtime.h"

enum { ACCEPT_MAX = 64 };
#define PAUSE_NS 100000000u /* 100 ms */

struct lsock {
    struct mely_listener *l;
    int fd;
    mely_to_t to;
    mely_watch_t *watch;  /* NULL while paused or closed; under l->mu */
    mely_timer_t resume;  /* the pause timer, or 0; under l->mu */
};

struct mely_listener {
    struct mely__rt *rt;
    mely_accept_fn_t fn;
    void *arg;
    unsigned port;
    _Atomic uint64_t pauses;
    _Atomic uint32_t refs;
    atomic_bool closing;
    atomic_bool held;  /* mely_listener_pause; written under mu */
    pthread_mutex_t mu;
    struct mely_listener *prev, *next; /* rt->io->listeners, under rt->io->listen_mu */
    unsigned nsock;
    struct lsock socks[];
};

static void unref(void *arg)
{
    struct mely_listener *l = arg;
    if (atomic_fetch_sub(&l->refs, 1) != 1)
        return;
    for (unsigned i = 0; i < l->nsock; i++)
        if (l->socks[i].fd >= 0)
            close(l->socks[i].fd);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

static mely_t handle(struct mely_listener *l)
{
    return mely__handle_of(l->rt);
}

/* ---- accepting (on the socket's color) ------------------------------------------ */

static void on_acceptable(int fd, unsigned ready, void *arg);

/* Watches the socket; the watch holds a reference to the listener until it
 * is destroyed. Returns 0 or mely_watch()'s error. */
static int watch_socket(struct lsock *s)
{
    mely_t m = handle(s->l);
    int err = mely_watch(&m, s->fd, MELY_READ, s->to, on_acceptable, s, &s->watch);
    if (err) {
        s->watch = NULL;
        return err;
    }
    atomic_fetch_add(&s->l->refs, 1);
    mely__watch_set_fin(s->watch, unref, s->l);
    return 0;
}

/* Under l->mu: watches the socket again; on failure, retries later. */
static void resume_watch(struct lsock *s);

static void on_resume(void *arg)
{
    struct lsock *s = arg;
    struct mely_listener *l = s->l;

    pthread_mutex_lock(&l->mu);
    s->resume = 0;
    if (!atomic_load(&l->closing) && !atomic_load(&l->held))
        resume_watch(s);
    pthread_mutex_unlock(&l->mu);
    unref(l);
}

/* Under l->mu. */
static void pause_for(struct lsock *s)
{
    struct mely_listener *l = s->l;
    mely_t m = handle(l);

    atomic_fetch_add(&l->refs, 1);
    if (mely_timer_after(&m, PAUSE_NS, s->to, on_resume, s, &s->resume) != 0) {
        s->resume = 0;
        atomic_fetch_sub(&l->refs, 1); /* the user's reference is still held */
    }
}

static void resume_watch(struct lsock *s)
{
    if (watch_socket(s) != 0)
        pause_for(s);
}

/* Out of descriptors or memory: stop watching for PAUSE_NS. */
static void pause_accepting(struct lsock *s)
{
    struct mely_listener *l = s->l;

    pthread_mutex_lock(&l->mu);
    if (!atomic_load(&l->closing) && s->watch) {
        mely_watch_remove(s->watch); /* from its own handler: synchronous */
        s->watch = NULL;
        atomic_fetch_add(&l->pauses, 1);
        pause_for(s);
    }
    pthread_mutex_unlock(&l->mu);
}

/* Errors after which the next connection may well succeed (accept(2): a
 * connection that died in the queue, and network errors passed on). */
static bool transient(int err)
{
    switch (err) {
    case ECONNABORTED: case EPROTO: case EPERM: case ENETDOWN: case ENOPROTOOPT:
    case EHOSTDOWN: case ENONET: case EHOSTUNREACH: case EOPNOTSUPP: case ENETUNREACH:
    case ETIMEDOUT:
        return true;
    default:
        return false;
    }
}

static void on_acceptable(int fd, unsigned ready, void *arg)
{
    (void)ready;
    struct lsock *s = arg;
    struct mely_listener *l = s->l;

    /* The whole accept loop is the program's accept function's run (or its
     * descriptor's), to stall warnings and traces (runname.h), not the
     * runtime's. */
    mely__name_run(s->to.handler, (const void *)l->fn);
    for (int n = 0; n < ACCEPT_MAX && !atomic_load(&l->closing) && !atomic_load(&l->held);
         n++) {
        struct sockaddr_storage peer;
        socklen_t len = sizeof(peer);
        int c = accept4(fd, (struct sockaddr *)&peer, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c >= 0) {
            l->fn(c, (struct sockaddr *)&peer, (unsigned)len, l->arg);
        } else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            pause_accepting(s);
            return;
        } else if (errno != EINTR && !transient(errno)) {
            return; /* EAGAIN: drained; anything else: try at the next readiness */
        }
    }
}

/* ---- creating ------------------------------------------------------------------------ */

int mely__parse_addr(const char *host, unsigned port, struct sockaddr_storage *ss, socklen_t *len)
{
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

    memset(ss, 0, sizeof(*ss));
    if (!host)
        host = "127.0.0.1";
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        *len = sizeof(*in4);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        *len = sizeof(*in6);
        return 0;
    }
    return MELY_EINVAL;
}

/* A bound, listening, non-blocking socket, or a negative errno. */
static int open_socket(const struct sockaddr_storage *ss, socklen_t len, int backlog, bool reuseport)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) ||
        bind(fd, (const struct sockaddr *)ss, len) != 0 || listen(fd, backlog) != 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

static unsigned bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                          : ((struct sockaddr_in *)&ss)->sin_port);
}

/* Opens every socket (the first one picks the port for the others). */
static int open_all(struct mely_listener *l, struct sockaddr_storage *ss, socklen_t len,
                    int backlog, bool reuseport)
{
    for (unsigned i = 0; i < l->nsock; i++) {
        int fd = open_socket(ss, len, backlog, reuseport);
        if (fd < 0)
            return fd;
        l->socks[i].fd = fd;
        if (i == 0) {
            l->port = bound_port(fd);
            if (ss->ss_family == AF_INET6)
                ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)l->port);
            else
                ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)l->port);
        }
    }
    return 0;
}

static void list_link(struct mely_listener *l)
{
    struct mely__rt *rt = l->rt;
    pthread_mutex_lock(&rt->io->listen_mu);
    l->prev = NULL;
    l->next = rt->io->listeners;
    if (rt->io->listeners)
        rt->io->listeners->prev = l;
    rt->io->listeners = l;
    pthread_mutex_unlock(&rt->io->listen_mu);
}

static void list_unlink(struct mely_listener *l)
{
    struct mely__rt *rt = l->rt;
    pthread_mutex_lock(&rt->io->listen_mu);
    if (l->prev)
        l->prev->next = l->next;
    else
        rt->io->listeners = l->next;
    if (l->next)
        l->next->prev = l->prev;
    pthread_mutex_unlock(&rt->io->listen_mu);
}

static int listen_in(struct mely__rt *rt, const char *host, unsigned port, int backlog,
                     unsigned flags, mely_to_t to, mely_accept_fn_t fn, void *arg,
                     mely_listener_t **out)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (!fn || !out || (flags & ~MELY_LISTEN_REUSEPORT) || port > 65535 || backlog < 0 ||
        mely__parse_addr(host, port, &ss, &len) != 0)
        return MELY_EINVAL;
    int err = mely__to_check(rt, &to);
    if (err)
        return err;

    bool reuseport = flags & MELY_LISTEN_REUSEPORT;
    unsigned n = reuseport ? rt->nworkers : 1;
    struct mely_listener *l = calloc(1, sizeof(*l) + n * sizeof(struct lsock));
    if (!l)
        return MELY_ENOMEM;
    l->rt = rt;
    l->fn = fn;
    l->arg = arg;
    l->nsock = n;
    atomic_init(&l->refs, 1);
    pthread_mutex_init(&l->mu, NULL);
    for (unsigned i = 0; i < n; i++) {
        l->socks[i] = (struct lsock){ .l = l, .fd = -1, .to = to };
        if (reuseport)
            l->socks[i].to.color = MELY_COLOR_PINNED(i);
    }

    err = open_all(l, &ss, len, backlog ? backlog : SOMAXCONN, reuseport);
    for (unsigned i = 0; !err && i < n; i++)
        err = watch_socket(&l->socks[i]);
    if (err) {
        for (unsigned i = 0; i < n; i++)
            if (l->socks[i].watch)
                mely_watch_remove(l->socks[i].watch);
        unref(l);
        return err;
    }
    list_link(l);
    *out = l;
    return 0;
}

int mely_listen(mely_t *m, const char *host, unsigned port, int backlog, unsigned flags,
                mely_to_t to, mely_accept_fn_t fn, void *arg, mely_listener_t **out)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, listen_in(rt, host, port, backlog, flags, to, fn, arg, out))
              : MELY_ESHUTDOWN;
}

unsigned mely_listener_port(const mely_listener_t *l)
{
    return l ? l->port : 0;
}

uint64_t mely_listener_pauses(const mely_listener_t *l)
{
    return l ? atomic_load(&((mely_listener_t *)l)->pauses) : 0;
}

int mely_listener_pause(mely_listener_t *l)
{
    if (!l)
        return MELY_EINVAL;
    pthread_mutex_lock(&l->mu);
    if (!atomic_load(&l->closing) && !atomic_exchange(&l->held, true))
        for (unsigned i = 0; i < l->nsock; i++)
            if (l->socks[i].watch)
                mely_watch_pause(l->socks[i].watch);
    pthread_mutex_unlock(&l->mu);
    return 0;
}

int mely_listener_resume(mely_listener_t *l)
{
    if (!l)
        return MELY_EINVAL;
    int err = 0;
    pthread_mutex_lock(&l->mu);
    if (!atomic_load(&l->closing) && atomic_exchange(&l->held, false)) {
        for (unsigned i = 0; i < l->nsock; i++) {
            struct lsock *s = &l->socks[i];
            if (s->watch) {
                int e = mely_watch_resume(s->watch);
                if (e && !err)
                    err = e;
            } else if (!s->resume) { /* a descriptor pause ended while held */
                resume_watch(s);
            }
        }
    }
    pthread_mutex_unlock(&l->mu);
    return err;
}

int mely_listener_paused(const mely_listener_t *l)
{
    return l && atomic_load(&((mely_listener_t *)l)->held);
}

int mely_listener_close(mely_listener_t *l)
{
    if (!l)
        return MELY_EINVAL;
    list_unlink(l);
    pthread_mutex_lock(&l->mu);
    atomic_store(&l->closing, true);
    for (unsigned i = 0; i < l->nsock; i++) {
        struct lsock *s = &l->socks[i];
        if (s->watch)
            mely_watch_remove(s->watch); /* its destruction drops its reference */
        s->watch = NULL;
        mely_t m = handle(l);
        if (s->resume && mely_timer_cancel(&m, s->resume) == 0)
            atomic_fetch_sub(&l->refs, 1); /* the user's reference is still held */
        s->resume = 0;
        shutdown(s->fd, SHUT_RD); /* refuse new connections now, even if a
                                     handler still runs: close comes with the
                                     last reference */
    }
    pthread_mutex_unlock(&l->mu);
    unref(l);
    return 0;
}

void mely__listeners_free(struct mely__rt *rt)
{
    while (rt->io->listeners) /* bounded: each pass unlinks one */
        mely_listener_close(rt->io->listeners);
}

void mely__listeners_pause(struct mely__rt *rt)
{
    pthread_mutex_lock(&rt->io->listen_mu); /* then each l->mu: the only nesting */
    for (struct mely_listener *l = rt->io->listeners; l; l = l->next) /* bounded: the list */
        mely_listener_pause(l);
    pthread_mutex_unlock(&rt->io->listen_mu);
}
