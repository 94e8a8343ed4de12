/* SPDX-License-Identifier: MIT */
/*
 * pubsub_load.c: pubsub_client's load (bench/e2e/pubsub_client.h): the
 * subscribers and publishers, the window, the checks of every delivery, the
 * threads; and the client's side of the drain check. pubsub_client.c takes
 * the figures around it and reports.
 *
 * The load. Rooms are named r0..r<R-1>. Subscriber i subscribes to rooms
 * (i*K + k) mod R, k < K: consecutive numbers, so every room gets
 * floor or ceil(N*K/R) subscribers. Every OK SUB is awaited before the first
 * PUB. Publisher p (a connection of its own, subscribed to nothing) sends its
 * message j (j < X) to room (p + j) mod R, so that message's sequence number
 * in (p, room) is j / R, and its payload is "<p>:<j/R>:" padded with '.'
 * to B bytes. Flow control, the same for every broker: message j of p takes
 * slot j mod W of p's window, holding the number of its room's subscribers
 * that have not received it yet; p publishes only while fewer than W of its
 * messages have a nonzero slot. The broker's queues stay bounded (at most
 * M*W messages anywhere) and the load is closed-loop.
 *
 * The checks of every line a subscriber reads: "MSG r<n> <payload>" for a
 * room it subscribed to, a payload of the right shape and length, from a
 * publisher that exists, with the sequence number that (publisher, room)
 * expects next on this subscriber (else: a gap, a duplicate or a reorder);
 * and at the end, every subscriber received every message of its rooms, so
 * the total is the sum over the messages of their rooms' subscribers. The
 * first errors are printed as they happen, all are counted.
 *
 * Efficiency: the client shares the 2 CPUs with the broker, so it is cheap:
 * non-blocking sockets, one level-triggered epoll set per thread, one read of
 * up to 256 KB per readiness into the thread's buffer (a partial line is
 * carried over: at most 4 KB copied per read), lines parsed in place with no
 * allocation, a publisher's lines written with one write() per turn. With
 * --threads 2, subscriber i and publisher p go to thread i mod 2 and p mod 2;
 * a window slot is an atomic, and a subscriber's thread that frees the slot of
 * a blocked publisher of the other thread wakes it through an eventfd, at most
 * once per epoll turn (Dekker pair: the publisher stores `blocked` then
 * reloads the slot; the subscriber decrements the slot then loads `blocked`;
 * all seq_cst, so one of them sees the other).
 *
 * The drain (--check-drain): the same load; once half the deliveries
 * arrived, the client stops reading for DRAIN_PAUSE_MS, so that what is in
 * flight piles up in the broker, then sends SIGTERM to --server-pid. To leave
 * the broker output of its own to send then (a broker that drops it must
 * fail), the load must have more in flight per subscriber than the kernel
 * holds for one connection: the subscribers' receive buffers are set to
 * DRAIN_RCVBUF (autotuned, they would grow to tcp_rmem's maximum, 32 MB on
 * the guests), and the broker's send buffer grows to tcp_wmem's (4 MB), so
 * examples/tests/pubsub-self-test.sh puts ~5 MB in flight per subscriber. Every
 * subscriber then reads to its end of stream (a reset is an error: the
 * broker must send everything), and a publisher's end is no error any more.
 * pc_drain_counts() then compares, per (publisher, room), the counts of the
 * room's subscribers: a PUB the broker read is delivered to all of them or,
 * never handled, to none.
 *
 * Bounds: --seconds-limit over the whole run; no delivery for STALL_MS (or
 * ERROR_STALL_MS once an error was seen) ends the run as an error (a lost
 * message blocks its publisher's window); after the drain's signal, the ends
 * of stream get PC_DRAIN_LIMIT_MS.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/e2e/pubsub.h"
#include "bench/e2e/pubsub_client.h"
#include "common/measure.h"

enum {
    RBUF = 256 * 1024,       /* a thread's read buffer */
    PART = PUBSUB_MAX_LINE + 2, /* a partial line carried over: a line and its CRLF */
    PUB_OUT = 64 * 1024,     /* a publisher's output buffer (one line at least) */
    MAX_EVENTS = 256,
    STALL_MS = 10000,
    ERROR_STALL_MS = 2000,
    DRAIN_PAUSE_MS = 300, /* --check-drain: no reading before the signal */
    DRAIN_RCVBUF = 64 * 1024, /* --check-drain: a subscriber's receive buffer */
    SHOW_ERRORS = 10, /* errors printed; the rest are counted */
    TICK_MS = 100,    /* epoll_wait's timeout: the bounds are checked that often */
};

/* epoll tags: the kind in the high half, the index in the low one */
enum { TAG_SUB = 1, TAG_PUB = 2, TAG_KICK = 3 };

struct sub {
    int fd;
    unsigned id, nrooms;
    unsigned room[PC_MAX_RPS];
    uint32_t *next; /* [nrooms * pubs]: the next sequence number of (room slot, publisher) */
    uint64_t got, expect;
    unsigned oks;   /* OK SUB lines seen while subscribing */
    bool ended;     /* end of stream (or closed after an error) */
    size_t plen;    /* the partial line carried over, in part */
    char part[PART];
};

struct pub {
    int fd;
    unsigned id, thread;
    uint32_t sent, acked; /* messages published; the oldest not yet received by all */
    _Atomic uint32_t *left; /* [window]: subscribers yet to receive message j (slot j % W) */
    atomic_bool blocked;    /* no credit, waits for a wake-up (threads > 1) */
    bool closed, want_out;  /* want_out: EPOLLOUT asked for */
    size_t off, len;        /* pending output: out[off..len) */
    char *out;
};

struct worker {
    unsigned id;
    int ep, kickfd;
    unsigned *subs, nsubs, *pubs, npubs; /* indexes into g.subs, g.pubs */
    char *rbuf;
    uint64_t got; /* deliveries since the last flush to g.got */
    bool kick[PC_MAX_THREADS];
    pthread_t th;
};

static struct pc_opts o; /* pc_load_setup()'s copy */
static struct {
    struct sub *subs;
    struct pub *pubs;
    unsigned *room_subs; /* subscribers of each room */
    uint64_t expect;     /* deliveries expected in all */
    _Atomic uint64_t got;
    atomic_bool done, timed_out;
    atomic_bool pausing;   /* --check-drain: half-way, subscribers read nothing */
    atomic_bool signalled; /* --check-drain: SIGTERM sent (after the pause) */
    atomic_uint ended;     /* subscribers at their end of stream */
    _Atomic uint64_t progress_ns, t_last;
    uint64_t t0, deadline;
    struct worker w[PC_MAX_THREADS];
    char filler[PUBSUB_MAX_LINE];
} g;

static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint nerrors;

void pc_fail(const char *fmt, ...)
{
    unsigned n = atomic_fetch_add(&nerrors, 1);
    if (n >= SHOW_ERRORS)
        return;
    va_list ap;
    pthread_mutex_lock(&err_lock);
    fprintf(stderr, "pubsub_client: error: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (n + 1 == SHOW_ERRORS)
        fprintf(stderr, "pubsub_client: (further errors are only counted)\n");
    pthread_mutex_unlock(&err_lock);
}

unsigned pc_failures(void)
{
    return atomic_load(&nerrors);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p) {
        fprintf(stderr, "pubsub_client: out of memory\n");
        exit(1);
    }
    return p;
}

/* ---- Numbers in lines, without stdio ----------------------------------------------------- */

/* Writes v in decimal at p; returns the end. */
static char *put_uint(char *p, uint32_t v)
{
    char tmp[10];
    unsigned n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    while (n > 0)
        *p++ = tmp[--n];
    return p;
}

/* Reads a decimal number of 1..9 digits at *p (< end); false if none. */
static bool get_uint(const char **p, const char *end, uint32_t *v)
{
    const char *s = *p;
    uint32_t x = 0;
    while (s < end && s - *p < 9 && *s >= '0' && *s <= '9')
        x = x * 10 + (uint32_t)(*s++ - '0');
    if (s == *p)
        return false;
    *p = s;
    *v = x;
    return true;
}

static unsigned uint_len(uint32_t v)
{
    unsigned n = 1;
    while ((v /= 10) > 0)
        n++;
    return n;
}

/* The payload's length for message seq of publisher p: "<p>:<seq>:" padded. */
static unsigned payload_len(unsigned p, uint32_t seq)
{
    unsigned head = uint_len(p) + uint_len(seq) + 2;
    return head > o.payload ? head : o.payload;
}

/* ---- Sockets ----------------------------------------------------------------------------- */

/* A connection to the broker; rcvbuf > 0: that receive buffer, set before
 * connect (no autotuning then). */
static int connect_loopback(int rcvbuf)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && rcvbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        fprintf(stderr, "pubsub_client: connect to 127.0.0.1:%u: %s\n", o.port, strerror(errno));
        exit(1);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
    if (set_nonblocking(fd) != 0) {
        fprintf(stderr, "pubsub_client: O_NONBLOCK: %s\n", strerror(errno));
        exit(1);
    }
    return fd;
}

static void ep_add(int ep, int fd, uint32_t events, unsigned tag, unsigned idx)
{
    struct epoll_event ev = {.events = events, .data.u64 = (uint64_t)tag << 32 | idx};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        fprintf(stderr, "pubsub_client: epoll_ctl: %s\n", strerror(errno));
        exit(1);
    }
}

static void ep_mod(int ep, int fd, uint32_t events, unsigned tag, unsigned idx)
{
    struct epoll_event ev = {.events = events, .data.u64 = (uint64_t)tag << 32 | idx};
    epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
}

/* Writes all of buf (a small setup write on a fresh socket). */
static void write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) { /* bounded: a fresh socket takes kilobytes at once */
        ssize_t k = write(fd, buf, n);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0) {
            fprintf(stderr, "pubsub_client: write: %s\n", strerror(errno));
            exit(1);
        }
        buf += k;
        n -= (size_t)k;
    }
}

/* ---- Subscribers ------------------------------------------------------------------------- */

/* A line a subscriber read while subscribing: "OK SUB r<k>" for its rooms in
 * order. */
static void sub_setup_line(struct sub *s, const char *p, size_t len)
{
    char want[32];
    int n = snprintf(want, sizeof(want), "OK SUB r%u", s->room[s->oks]);
    if ((size_t)n != len || memcmp(p, want, len) != 0)
        pc_fail("subscriber %u: got \"%.*s\", want \"%s\"", s->id, (int)(len < 80 ? len : 80), p,
                want);
    s->oks++;
}

/* One delivery read by subscriber s (line p[0..len), LF excluded). */
static void sub_msg_line(struct worker *w, struct sub *s, const char *p, size_t len)
{
    const char *q, *payload = NULL, *end = p + len;
    uint32_t room, pub, seq;
    unsigned slot = 0;

    if (len < 7 || memcmp(p, "MSG r", 5) != 0) {
        pc_fail("subscriber %u: not a MSG line: \"%.*s\"", s->id, (int)(len < 80 ? len : 80), p);
        return;
    }
    q = p + 5;
    bool ok = get_uint(&q, end, &room) && q < end && *q++ == ' ' && room < o.rooms;
    payload = q;
    if (!ok || !get_uint(&q, end, &pub) || q == end || *q++ != ':' || pub >= o.pubs ||
        !get_uint(&q, end, &seq) || q == end || *q++ != ':') {
        pc_fail("subscriber %u: malformed MSG line \"%.*s\"", s->id, (int)(len < 80 ? len : 80), p);
        return;
    }
    size_t pad = (size_t)(end - q);
    if ((size_t)(end - payload) != payload_len(pub, seq) || memcmp(q, g.filler, pad) != 0) {
        pc_fail("subscriber %u: MSG payload of the wrong length or content: \"%.*s\"", s->id,
                (int)(len < 80 ? len : 80), p);
        return;
    }
    while (slot < s->nrooms && s->room[slot] != room)
        slot++;
    if (slot == s->nrooms) {
        pc_fail("subscriber %u: MSG for room r%u, which it did not subscribe to", s->id, room);
        return;
    }
    uint32_t *next = &s->next[slot * o.pubs + pub];
    if (seq != *next) {
        pc_fail("subscriber %u: publisher %u room r%u: got message %u, expected %u (%s)", s->id,
                pub, room, seq, *next,
                seq > *next ? "a gap: lost or reordered" : "a duplicate or reorder");
        if (seq > *next)
            *next = seq + 1; /* report the next gap, not this one again */
        return;
    }
    uint32_t j = seq * o.rooms + (room + o.rooms - pub % o.rooms) % o.rooms;
    if (j >= o.msgs) {
        pc_fail("subscriber %u: publisher %u room r%u: message %u was never published", s->id, pub,
                room, seq);
        return;
    }
    (*next)++;
    s->got++;
    w->got++;
    struct pub *pb = &g.pubs[pub];
    if (atomic_fetch_sub(&pb->left[j % o.window], 1) == 1 && pb->thread != w->id &&
        atomic_load(&pb->blocked))
        w->kick[pb->thread] = true;
}

/* The end of subscriber s's stream: expected only in the drain, after the
 * signal. */
static void sub_end(struct worker *w, struct sub *s, bool reset)
{
    epoll_ctl(w->ep, EPOLL_CTL_DEL, s->fd, NULL);
    s->ended = true;
    atomic_fetch_add(&g.ended, 1);
    if (!o.check_drain || !atomic_load(&g.signalled)) {
        pc_fail("subscriber %u: %s by the broker after %" PRIu64 " of %" PRIu64 " deliveries",
                s->id, reset ? "reset" : "closed", s->got, s->expect);
        atomic_store(&g.done, true); /* the run cannot complete */
    } else if (reset) {
        pc_fail("subscriber %u: reset by the broker in its graceful stop (must send everything"
                " and close)", s->id);
    }
}

/* One readiness of subscriber s: one read, its complete lines, the rest kept. */
static void sub_read(struct worker *w, struct sub *s)
{
    char *buf = w->rbuf;
    memcpy(buf, s->part, s->plen);
    ssize_t n = read(s->fd, buf + s->plen, RBUF - s->plen);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        sub_end(w, s, n < 0);
        return;
    }
    const char *p = buf, *end = buf + s->plen + n, *nl;
    while ((nl = memchr(p, '\n', (size_t)(end - p)))) { /* bounded by the bytes read */
        if (s->oks < s->nrooms)
            sub_setup_line(s, p, (size_t)(nl - p));
        else
            sub_msg_line(w, s, p, (size_t)(nl - p));
        p = nl + 1;
    }
    s->plen = (size_t)(end - p);
    if (s->plen > PART) {
        pc_fail("subscriber %u: a line of more than %u bytes", s->id, PART);
        s->plen = 0;
    }
    memcpy(s->part, p, s->plen);
}

/* ---- Publishers -------------------------------------------------------------------------- */

/* Writes p's pending output; false if its connection failed. */
static bool pub_flush(struct worker *w, struct pub *p)
{
    while (p->off < p->len) { /* bounded: each pass writes bytes or returns */
        ssize_t n = write(p->fd, p->out + p->off, p->len - p->off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            if (!p->want_out)
                ep_mod(w->ep, p->fd, EPOLLIN | EPOLLOUT, TAG_PUB, p->id);
            p->want_out = true;
            return true;
        }
        if (n <= 0) {
            if (!o.check_drain || !atomic_load(&g.signalled))
                pc_fail("publisher %u: write: %s", p->id, n < 0 ? strerror(errno) : "closed");
            return false;
        }
        p->off += (size_t)n;
    }
    p->off = p->len = 0;
    if (p->want_out)
        ep_mod(w->ep, p->fd, EPOLLIN, TAG_PUB, p->id);
    p->want_out = false;
    return true;
}

static void pub_close(struct worker *w, struct pub *p)
{
    epoll_ctl(w->ep, EPOLL_CTL_DEL, p->fd, NULL);
    p->closed = true;
}

/* The oldest message of p not yet received by every subscriber of its room. */
static void pub_advance(struct pub *p)
{
    while (p->acked < p->sent && atomic_load(&p->left[p->acked % o.window]) == 0)
        p->acked++; /* bounded: at most W slots */
}

/* Publishes what p's window allows, one write(). */
static void pub_publish(struct worker *w, struct pub *p)
{
    if (p->closed || p->sent == o.msgs || p->off < p->len)
        return;
    pub_advance(p);
    if (o.threads > 1) {
        if (p->sent - p->acked == o.window) {
            atomic_store(&p->blocked, true); /* Dekker: then reload the slot (top of the file) */
            pub_advance(p);
            if (p->sent - p->acked == o.window)
                return; /* a subscriber's thread will wake us */
        }
        if (atomic_load_explicit(&p->blocked, memory_order_relaxed))
            atomic_store(&p->blocked, false); /* no wake-ups wanted */
    }
    char *b = p->out, *lim = p->out + PUB_OUT - (32 + PUBSUB_MAX_LINE);
    while (p->sent - p->acked < o.window && p->sent < o.msgs && b < lim) {
        uint32_t j = p->sent, room = (p->id + j) % o.rooms, seq = j / o.rooms;
        char *head;
        atomic_store(&p->left[j % o.window], g.room_subs[room]);
        memcpy(b, "PUB r", 5);
        b = put_uint(b + 5, room);
        *b++ = ' ';
        head = b;
        b = put_uint(b, p->id);
        *b++ = ':';
        b = put_uint(b, seq);
        *b++ = ':';
        size_t pad = payload_len(p->id, seq) - (size_t)(b - head);
        memcpy(b, g.filler, pad);
        b += pad;
        *b++ = '\n';
        p->sent++;
    }
    p->len = (size_t)(b - p->out);
    if (!pub_flush(w, p))
        pub_close(w, p);
}

/* Input on a publisher: the broker sends publishers nothing, so any line is an
 * error; the end of stream is one before the drain's signal. */
static void pub_read(struct worker *w, struct pub *p)
{
    ssize_t n = read(p->fd, w->rbuf, RBUF);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n > 0) {
        const char *nl = memchr(w->rbuf, '\n', (size_t)n);
        pc_fail("publisher %u: the broker sent \"%.*s\"", p->id,
                (int)(nl ? nl - w->rbuf : n < 80 ? n : 80), w->rbuf);
        return;
    }
    if (!o.check_drain || !atomic_load(&g.signalled)) {
        pc_fail("publisher %u: %s by the broker", p->id, n < 0 ? "reset" : "closed");
        atomic_store(&g.done, true);
    }
    pub_close(w, p);
}

/* ---- The run's threads ------------------------------------------------------------------- */

/* After a turn: the deliveries counted, the other threads woken, the end and
 * the bounds checked. */
static void worker_turn_end(struct worker *w)
{
    uint64_t now = now_ns();
    if (w->got > 0) {
        uint64_t total = atomic_fetch_add(&g.got, w->got) + w->got;
        w->got = 0;
        atomic_store(&g.progress_ns, now);
        if (!o.check_drain && total == g.expect) {
            atomic_store(&g.t_last, now);
            atomic_store(&g.done, true);
        }
        if (o.check_drain && total >= g.expect / 2 && !atomic_exchange(&g.pausing, true)) {
            /* What is in flight piles up in the broker's outputs meanwhile: the
             * graceful stop then has something to send. */
            sleep_us(DRAIN_PAUSE_MS * 1000u);
            if (kill(o.server_pid, SIGTERM) != 0) {
                pc_fail("kill(%d, SIGTERM): %s", o.server_pid, strerror(errno));
                atomic_store(&g.done, true);
            }
            atomic_store(&g.signalled, true);
            now = now_ns();
            atomic_store(&g.progress_ns, now);
        }
    }
    if (o.check_drain && atomic_load(&g.ended) == o.subs) {
        atomic_store(&g.t_last, now);
        atomic_store(&g.done, true);
    }
    uint64_t progress = atomic_load(&g.progress_ns), stall_ms = STALL_MS;
    uint64_t quiet = now > progress ? now - progress : 0; /* another thread's may be later */
    if (atomic_load(&nerrors) > 0)
        stall_ms = ERROR_STALL_MS;
    else if (o.check_drain && atomic_load(&g.signalled))
        stall_ms = PC_DRAIN_LIMIT_MS;
    if (now > g.deadline) {
        atomic_store(&g.timed_out, true);
        atomic_store(&g.done, true);
    } else if (quiet > stall_ms * 1000000u) {
        pc_fail("no delivery for %.1f s: %" PRIu64 " of %" PRIu64 " deliveries received%s",
                (double)quiet / 1e9, atomic_load(&g.got), g.expect,
                o.check_drain && atomic_load(&g.signalled) ? " (after SIGTERM: no end of stream)"
                : " (a message lost?)");
        atomic_store(&g.done, true);
    }
    bool done = atomic_load(&g.done);
    for (unsigned t = 0; t < o.threads; t++)
        if (t != w->id && (w->kick[t] || done)) {
            w->kick[t] = false;
            ssize_t k = write(g.w[t].kickfd, &(uint64_t){1}, sizeof(uint64_t));
            (void)k; /* an eventfd write fails only when its counter is full: awake anyway */
        }
}

static void *worker_run(void *arg)
{
    struct worker *w = arg;
    struct epoll_event ev[MAX_EVENTS];
    while (!atomic_load(&g.done)) { /* bounded: g.deadline ends it */
        if (atomic_load(&g.pausing) && !atomic_load(&g.signalled)) {
            sleep_us(1000); /* the drain's pause, taken by another thread */
            continue;
        }
        for (unsigned i = 0; i < w->npubs; i++)
            pub_publish(w, &g.pubs[w->pubs[i]]);
        int n = epoll_wait(w->ep, ev, MAX_EVENTS, TICK_MS);
        for (int i = 0; i < n; i++) {
            unsigned tag = (unsigned)(ev[i].data.u64 >> 32), idx = (unsigned)ev[i].data.u64;
            if (tag == TAG_SUB) {
                sub_read(w, &g.subs[idx]);
            } else if (tag == TAG_PUB) {
                struct pub *p = &g.pubs[idx];
                if (ev[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                    pub_read(w, p);
                if (!p->closed && (ev[i].events & EPOLLOUT) && !pub_flush(w, p))
                    pub_close(w, p);
            } else {
                uint64_t v;
                ssize_t k = read(w->kickfd, &v, sizeof(v));
                (void)k; /* only to clear it */
            }
        }
        worker_turn_end(w);
    }
    return NULL;
}

/* ---- Set-up: connections, subscriptions -------------------------------------------------- */

void pc_load_setup(const struct pc_opts *opts)
{
    o = *opts;
    unsigned nt = o.threads;
    uint64_t limit = now_ns() + (uint64_t)(o.seconds_limit * 1e9);

    raise_fd_limit(o.subs + o.pubs + 64);
    memset(g.filler, '.', sizeof(g.filler));
    g.subs = xcalloc(o.subs, sizeof(*g.subs));
    g.pubs = xcalloc(o.pubs, sizeof(*g.pubs));
    g.room_subs = xcalloc(o.rooms, sizeof(*g.room_subs));
    for (unsigned t = 0; t < nt; t++) {
        struct worker *w = &g.w[t];
        w->id = t;
        w->rbuf = xcalloc(1, RBUF);
        w->subs = xcalloc(o.subs / nt + 1, sizeof(unsigned));
        w->pubs = xcalloc(o.pubs / nt + 1, sizeof(unsigned));
        w->ep = epoll_create1(EPOLL_CLOEXEC);
        w->kickfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (w->ep < 0 || w->kickfd < 0) {
            fprintf(stderr, "pubsub_client: epoll or eventfd: %s\n", strerror(errno));
            exit(1);
        }
        ep_add(w->ep, w->kickfd, EPOLLIN, TAG_KICK, 0);
    }
    /* Subscribers: connect, SUB to every room, all at once. */
    for (unsigned i = 0; i < o.subs; i++) {
        struct sub *s = &g.subs[i];
        char buf[PC_MAX_RPS * 24], *b = buf;
        s->id = i;
        s->nrooms = o.rps;
        s->next = xcalloc((size_t)o.rps * o.pubs, sizeof(uint32_t));
        s->fd = connect_loopback(o.check_drain ? DRAIN_RCVBUF : 0);
        for (unsigned k = 0; k < o.rps; k++) {
            s->room[k] = (i * o.rps + k) % o.rooms;
            g.room_subs[s->room[k]]++;
            b += sprintf(b, "SUB r%u\n", s->room[k]);
        }
        write_all(s->fd, buf, (size_t)(b - buf));
        struct worker *w = &g.w[i % nt];
        w->subs[w->nsubs++] = i;
        ep_add(w->ep, s->fd, EPOLLIN, TAG_SUB, i);
    }
    for (unsigned p = 0; p < o.pubs; p++) {
        struct pub *pb = &g.pubs[p];
        pb->id = p;
        pb->thread = p % nt;
        pb->fd = connect_loopback(0);
        pb->left = xcalloc(o.window, sizeof(*pb->left));
        pb->out = xcalloc(1, PUB_OUT);
        struct worker *w = &g.w[p % nt];
        w->pubs[w->npubs++] = p;
        ep_add(w->ep, pb->fd, EPOLLIN, TAG_PUB, p);
    }
    /* What each room receives: publisher p sends to room r its messages
     * j = (r - p) mod R + R*n < X. O(M*R + N*K). */
    uint64_t *room_msgs = xcalloc(o.rooms, sizeof(uint64_t));
    for (unsigned r = 0; r < o.rooms; r++) {
        for (unsigned p = 0; p < o.pubs; p++) {
            unsigned j0 = (r + o.rooms - p % o.rooms) % o.rooms;
            room_msgs[r] += j0 < o.msgs ? (o.msgs - j0 + o.rooms - 1) / o.rooms : 0;
        }
        g.expect += room_msgs[r] * g.room_subs[r];
    }
    for (unsigned i = 0; i < o.subs; i++)
        for (unsigned k = 0; k < o.rps; k++)
            g.subs[i].expect += room_msgs[g.subs[i].room[k]];
    free(room_msgs);
    /* Every OK SUB before the first PUB: the threads' sets, one after the other. */
    unsigned waiting = o.subs;
    struct epoll_event ev[MAX_EVENTS];
    while (waiting > 0 && nerrors == 0) { /* bounded by limit */
        if (now_ns() > limit) {
            fprintf(stderr, "pubsub_client: %u subscribers still without their OK SUB after"
                    " --seconds-limit\n", waiting);
            exit(3);
        }
        for (unsigned t = 0; t < nt; t++) {
            int n = epoll_wait(g.w[t].ep, ev, MAX_EVENTS, nt > 1 ? 1 : TICK_MS);
            for (int i = 0; i < n; i++) {
                if ((unsigned)(ev[i].data.u64 >> 32) != TAG_SUB)
                    continue; /* a publisher's input: read (and failed) by the run */
                struct sub *s = &g.subs[(unsigned)ev[i].data.u64];
                bool before = s->oks == s->nrooms;
                sub_read(&g.w[t], s);
                if (s->ended)
                    exit(1);
                waiting -= !before && s->oks == s->nrooms;
            }
        }
    }
    if (nerrors > 0)
        exit(1);
}

void pc_load_run(struct pc_load *r)
{
    g.t0 = now_ns();
    g.deadline = g.t0 + (uint64_t)(o.seconds_limit * 1e9);
    atomic_store(&g.progress_ns, g.t0);
    for (unsigned t = 1; t < o.threads; t++)
        if (pthread_create(&g.w[t].th, NULL, worker_run, &g.w[t]) != 0) {
            fprintf(stderr, "pubsub_client: pthread_create failed\n");
            exit(1);
        }
    worker_run(&g.w[0]);
    for (unsigned t = 1; t < o.threads; t++)
        pthread_join(g.w[t].th, NULL);
    *r = (struct pc_load){.expect = g.expect, .got = atomic_load(&g.got), .t0 = g.t0,
                          .t1 = atomic_load(&g.t_last) ? atomic_load(&g.t_last) : now_ns(),
                          .timed_out = atomic_load(&g.timed_out)};
    if (o.check_drain || r->timed_out)
        return;
    for (unsigned i = 0; i < o.subs && r->got == g.expect; i++)
        if (g.subs[i].got != g.subs[i].expect)
            pc_fail("subscriber %u: %" PRIu64 " deliveries, expected %" PRIu64, i, g.subs[i].got,
                    g.subs[i].expect);
    if (r->got != g.expect)
        pc_fail("%" PRIu64 " deliveries, expected %" PRIu64, r->got, g.expect);
}

uint64_t pc_drain_counts(bool *all_rooms)
{
    uint64_t handled = 0;
    *all_rooms = true;
    for (unsigned r = 0; r < o.rooms; r++) { /* O(R * N * (K + M)): fine for a check */
        const struct sub *first = NULL;
        unsigned k0 = 0;
        *all_rooms &= g.room_subs[r] > 0;
        for (unsigned i = 0; i < o.subs; i++) {
            const struct sub *s = &g.subs[i];
            unsigned k = 0;
            while (k < s->nrooms && s->room[k] != r)
                k++;
            if (k == s->nrooms)
                continue;
            if (!first) {
                first = s, k0 = k;
                for (unsigned p = 0; p < o.pubs; p++)
                    handled += s->next[k * o.pubs + p];
                continue;
            }
            for (unsigned p = 0; p < o.pubs; p++)
                if (s->next[k * o.pubs + p] != first->next[k0 * o.pubs + p])
                    pc_fail("drain: publisher %u room r%u: subscriber %u received %u messages,"
                            " subscriber %u %u", p, r, first->id, first->next[k0 * o.pubs + p],
                            s->id, s->next[k * o.pubs + p]);
        }
    }
    return handled;
}
