/* SPDX-License-Identifier: MIT */
/*
 * pubsub_bufferevent.c: the publish/subscribe broker of bench/e2e/pubsub.h on
 * plain libevent bufferevents, one thread: the baseline that examples/pubsub
 * (mely streams) is measured against (bench/e2e/run-pubsub.sh), written the
 * way a good libevent user would, so that the comparison is fair.
 *
 *   pubsub_bufferevent [--port P] [--max-output BYTES] [--idle-ms MS]
 *
 * Connections. An evconnlistener accepts; each connection is a bufferevent
 * (TCP_NODELAY, as every server of bench/ sets it; up to 1 MB written and
 * 64 KB read a loop turn, not libevent's 16 KB). Its read callback finds the
 * lines in the input evbuffer and reads them in place (one evbuffer_pullup()
 * of what arrived, memchr for the LFs, one evbuffer_drain() at the end),
 * where evbuffer_readln() would malloc a copy of every line.
 *
 * Rooms. A hash table of our own: chained, a power-of-two number of buckets,
 * FNV-1a, doubled when it holds more rooms than buckets. A room holds an
 * array of its subscribers, a connection an array of its rooms; each entry
 * keeps the index of its twin in the other array, so that UNSUB and a close
 * cost O(1) per subscription (swap-remove on both sides). A room is freed with
 * its last subscriber, so SUB/UNSUB of ever new names cannot grow the table.
 *
 * PUB. The MSG line is formatted once into a buffer and evbuffer_add()ed to
 * each subscriber's output (no allocation unless an output needs a new
 * chain); libevent writes an output when its socket is writable, so one
 * write() per connection and loop turn carries every line appended since.
 *
 * Limits. After every append, a connection whose output holds more than
 * --max-output bytes is cut: reset (SO_LINGER 0: a plain close would still
 * send what is queued, and a subscriber that does not read would hold it),
 * freed, counted. Idleness: a connection stamps its last input or output
 * (a store per delivery); one timer per connection (libevent's min-heap)
 * fires after --idle-ms, and then either closes it (`ERR idle`) or re-arms
 * for what is left, so activity never touches the timer. bufferevent
 * timeouts would not do: a read timeout ignores output, and a write timeout
 * only runs while output is pending.
 *
 * Freeing. A connection is freed at once, except inside its own read
 * callback (a PUB may cut its own publisher, subscribed to the room): there
 * it is marked dead and the callback frees it on its way out. Likewise a
 * room being delivered is not freed by a cut that empties it; the delivery
 * frees it when done.
 *
 * Stop. SIGTERM or SIGINT (evsignal): the listener is freed, every
 * connection stops reading and is closed once its output is sent. Every PUB
 * read so far has already been delivered (a read callback handles all the
 * complete lines it finds, and no callback is deferred), so nothing is left
 * to deliver. The loop ends when no connection is left, or after STOP_LIMIT_S
 * (a peer that does not read; then the rest is closed), and the counters go
 * to stderr in the one line pubsub.h fixes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "bench/e2e/pubsub.h"

enum {
    STOP_LIMIT_S = 10,     /* the graceful stop waits this long for slow peers */
    FIRST_BUCKETS = 64,    /* the room table's initial size (a power of two) */
    MSG_MAX = 4 + PUBSUB_MAX_LINE + 1, /* "MSG " is as long as "PUB ", plus LF */
    /* A bufferevent writes and reads at most 16 KB a loop turn unless told
     * otherwise: a subscriber's output of 1 KB messages then takes several
     * turns (server CPU per delivery 0.76-0.90 us against 0.56-0.70 with these,
     * --payload 1000, 4 interleaved runs; no change with 32-byte payloads). */
    MAX_WRITE = 1 << 20,
    MAX_READ = 1 << 16,
};

struct conn;

/* A room's subscriber: the connection, and this room's index in its subs. */
struct member {
    struct conn *c;
    unsigned at;
};

struct room {
    struct room *next; /* in its bucket */
    uint32_t hash;
    bool delivering;   /* a PUB is walking members: not freed meanwhile */
    unsigned n, cap;
    struct member *members;
    size_t len;
    char name[PUBSUB_MAX_ROOM];
};

/* A connection's subscription: the room, and this connection's index in its
 * members. */
struct sub {
    struct room *room;
    unsigned at;
};

struct conn {
    struct bufferevent *bev;
    struct evbuffer *out;  /* bufferevent_get_output(bev), kept for the fan-out */
    struct event *idle;    /* NULL without --idle-ms */
    uint64_t last_ms;      /* last input or output */
    struct sub *subs;
    unsigned nsubs, cap;
    struct conn *prev, *next; /* every open connection, for the graceful stop */
    bool closing; /* flushing its last output, reads no more */
    bool busy;    /* in its own read callback */
    bool dead;    /* to be freed when its read callback returns */
};

static struct pubsub_opts opt;
static struct event_base *base;
static struct evconnlistener *listener;
static struct event *sigint, *sigterm;
static struct conn conns = {.prev = &conns, .next = &conns};
static bool stopping;
static unsigned long long published, delivered, cut;
static struct {
    struct room **bucket;
    size_t mask, count;
} rooms;
static char msg[MSG_MAX]; /* the MSG line of the PUB being delivered */

static void conn_free(struct conn *c);

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) {
        fprintf(stderr, "pubsub_bufferevent: out of memory\n");
        exit(1);
    }
    return q;
}

/* ---- Rooms ------------------------------------------------------------------------------ */

static uint32_t fnv1a(const char *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h;
}

/* The room named name[0..len), NULL if none. O(1) expected. */
static struct room *room_find(const char *name, size_t len, uint32_t hash)
{
    for (struct room *r = rooms.bucket[hash & rooms.mask]; r; r = r->next)
        if (r->hash == hash && r->len == len && memcmp(r->name, name, len) == 0)
            return r;
    return NULL;
}

/* Doubles the buckets once the table holds more rooms than buckets. O(rooms). */
static void rooms_grow(void)
{
    size_t n = (rooms.mask + 1) * 2;
    struct room **b = xrealloc(NULL, n * sizeof(*b));
    memset(b, 0, n * sizeof(*b));
    for (size_t i = 0; i <= rooms.mask; i++)
        for (struct room *r = rooms.bucket[i], *next; r; r = next) {
            next = r->next;
            r->next = b[r->hash & (n - 1)];
            b[r->hash & (n - 1)] = r;
        }
    free(rooms.bucket);
    rooms.bucket = b;
    rooms.mask = n - 1;
}

static struct room *room_get(const char *name, size_t len)
{
    uint32_t hash = fnv1a(name, len);
    struct room *r = room_find(name, len, hash);
    if (r)
        return r;
    if (rooms.count >= rooms.mask + 1)
        rooms_grow();
    r = xrealloc(NULL, sizeof(*r));
    *r = (struct room){.hash = hash, .len = len, .next = rooms.bucket[hash & rooms.mask]};
    memcpy(r->name, name, len);
    rooms.bucket[hash & rooms.mask] = r;
    rooms.count++;
    return r;
}

/* Frees r if it has no subscriber left and no delivery walks it. */
static void room_release(struct room *r)
{
    if (r->n > 0 || r->delivering)
        return;
    struct room **p = &rooms.bucket[r->hash & rooms.mask];
    while (*p != r)
        p = &(*p)->next;
    *p = r->next;
    rooms.count--;
    free(r->members);
    free(r);
}

/* Subscribes c to r unless it is already. O(min(c's rooms, r's members)). */
static void subscribe(struct conn *c, struct room *r)
{
    if (c->nsubs <= r->n) {
        for (unsigned i = 0; i < c->nsubs; i++)
            if (c->subs[i].room == r)
                return;
    } else {
        for (unsigned i = 0; i < r->n; i++)
            if (r->members[i].c == c)
                return;
    }
    if (c->nsubs == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 4;
        c->subs = xrealloc(c->subs, c->cap * sizeof(*c->subs));
    }
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 8;
        r->members = xrealloc(r->members, r->cap * sizeof(*r->members));
    }
    c->subs[c->nsubs] = (struct sub){.room = r, .at = r->n};
    r->members[r->n] = (struct member){.c = c, .at = c->nsubs};
    c->nsubs++;
    r->n++;
}

/* Removes c's subscription number i, on both sides; frees the room if it was
 * its last subscriber. O(1). */
static void unsubscribe_at(struct conn *c, unsigned i)
{
    struct room *r = c->subs[i].room;
    unsigned at = c->subs[i].at;

    r->members[at] = r->members[--r->n]; /* the last member moves into the hole */
    r->members[at].c->subs[r->members[at].at].at = at;
    c->subs[i] = c->subs[--c->nsubs]; /* the last subscription too */
    c->subs[i].room->members[c->subs[i].at].at = i;
    room_release(r);
}

static void unsubscribe_all(struct conn *c)
{
    while (c->nsubs > 0)
        unsubscribe_at(c, c->nsubs - 1);
}

/* ---- Connections -------------------------------------------------------------------------- */

static void conn_free(struct conn *c)
{
    if (c->busy) { /* in its own read callback, which frees it on return */
        c->dead = true;
        bufferevent_disable(c->bev, EV_READ | EV_WRITE);
        unsubscribe_all(c);
        return;
    }
    unsubscribe_all(c);
    c->prev->next = c->next;
    c->next->prev = c->prev;
    if (c->idle)
        event_free(c->idle);
    bufferevent_free(c->bev); /* closes the socket */
    free(c->subs);
    free(c);
    if (stopping && conns.next == &conns)
        event_base_loopbreak(base);
}

/* The output cap: resets the connection, nothing more leaves. */
static void conn_cut(struct conn *c)
{
    struct linger lin = {.l_onoff = 1, .l_linger = 0};
    setsockopt(bufferevent_getfd(c->bev), SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
    cut++;
    conn_free(c);
}

/* Stops reading and taking messages; frees c once its output is out. */
static void close_after_flush(struct conn *c)
{
    c->closing = true;
    bufferevent_disable(c->bev, EV_READ);
    unsubscribe_all(c);
    if (evbuffer_get_length(c->out) == 0)
        conn_free(c);
}

/* Appends a line to c's output; false if that cut c. */
static bool append(struct conn *c, const char *p, size_t n, uint64_t now)
{
    evbuffer_add(c->out, p, n);
    c->last_ms = now;
    if (evbuffer_get_length(c->out) <= opt.max_output)
        return true;
    conn_cut(c);
    return false;
}

/* "OK SUB <room>\n" and the like: a reply made of a head and the room. */
static bool reply_room(struct conn *c, const char *head, size_t hlen, const struct pubsub_req *q,
                       uint64_t now)
{
    char line[16 + PUBSUB_MAX_ROOM];
    memcpy(line, head, hlen);
    memcpy(line + hlen, q->room, q->room_len);
    line[hlen + q->room_len] = '\n';
    return append(c, line, hlen + q->room_len + 1, now);
}

#define REPLY(c, lit, now) append(c, lit, sizeof(lit) - 1, now)

/* Delivers a PUB to the room's subscribers. O(subscribers). */
static void publish(const struct pubsub_req *q, uint64_t now)
{
    published++;
    struct room *r = room_find(q->room, q->room_len, fnv1a(q->room, q->room_len));
    if (!r)
        return;
    size_t n = 4 + q->room_len + 1 + q->payload_len + 1;
    memcpy(msg, "MSG ", 4);
    memcpy(msg + 4, q->room, q->room_len);
    msg[4 + q->room_len] = ' ';
    memcpy(msg + 5 + q->room_len, q->payload, q->payload_len);
    msg[n - 1] = '\n';
    r->delivering = true;
    for (unsigned i = 0; i < r->n;) { /* bounded: each pass advances i or removes a member */
        delivered++;
        if (append(r->members[i].c, msg, n, now))
            i++; /* else the cut moved the last member into slot i */
    }
    r->delivering = false;
    room_release(r);
}

/* Handles one line (its end removed). false: stop reading c. */
static bool handle(struct conn *c, const char *line, size_t len, uint64_t now)
{
    struct pubsub_req q;
    switch (pubsub_parse(line, len, &q)) {
    case PUBSUB_PUB:
        publish(&q, now);
        return !c->dead;
    case PUBSUB_SUB:
        subscribe(c, room_get(q.room, q.room_len));
        return reply_room(c, "OK SUB ", 7, &q, now);
    case PUBSUB_UNSUB: {
        struct room *r = room_find(q.room, q.room_len, fnv1a(q.room, q.room_len));
        for (unsigned i = 0; r && i < c->nsubs; i++)
            if (c->subs[i].room == r) {
                unsubscribe_at(c, i);
                break;
            }
        return reply_room(c, "OK UNSUB ", 9, &q, now);
    }
    case PUBSUB_QUIT:
        if (REPLY(c, "BYE\n", now))
            close_after_flush(c);
        return false;
    case PUBSUB_BAD_ROOM:
        return REPLY(c, "ERR bad room\n", now);
    case PUBSUB_UNKNOWN:
        return REPLY(c, "ERR unknown command\n", now);
    }
    return true;
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t avail = evbuffer_get_length(in), off = 0;
    const char *p = (const char *)evbuffer_pullup(in, -1);
    uint64_t now = now_ms();
    bool go = !c->closing;

    c->last_ms = now;
    c->busy = true;
    while (go && off < avail) { /* bounded: each pass consumes a line or ends */
        const char *nl = memchr(p + off, '\n', avail - off);
        if (!nl)
            break;
        size_t n = (size_t)(nl - (p + off));
        size_t len = pubsub_chomp(p + off, n);
        if (len > PUBSUB_MAX_LINE) {
            off = avail;
            if (REPLY(c, "ERR line too long\n", now))
                close_after_flush(c);
            go = false;
            break;
        }
        go = handle(c, p + off, len, now);
        off += n + 1;
    }
    if (go && avail - off > PUBSUB_MAX_LINE + 1) { /* + 1: a CR may wait for its LF */
        off = avail;
        if (REPLY(c, "ERR line too long\n", now))
            close_after_flush(c);
    }
    c->busy = false;
    if (c->dead)
        conn_free(c);
    else
        evbuffer_drain(in, c->closing ? avail : off);
}

/* The output is empty. */
static void on_write(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    (void)bev;
    if (c->closing)
        conn_free(c);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    if (what & BEV_EVENT_EOF)
        close_after_flush(arg); /* every complete line was handled in on_read */
    else if (what & BEV_EVENT_ERROR)
        conn_free(arg);
}

/* The idle timer: closes c, or re-arms for what is left of its idle time. */
static void on_idle(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    uint64_t now = now_ms(), quiet = now - c->last_ms;
    (void)fd, (void)what;
    if (c->closing) { /* its last output did not leave in a whole idle period */
        conn_free(c);
        return;
    }
    if (quiet < opt.idle_ms) {
        uint64_t left = opt.idle_ms - quiet;
        event_add(c->idle, &(struct timeval){.tv_sec = (time_t)(left / 1000),
                                             .tv_usec = (suseconds_t)(left % 1000 * 1000)});
        return;
    }
    if (!REPLY(c, "ERR idle\n", now))
        return; /* cut */
    close_after_flush(c); /* its output holds "ERR idle": not freed yet */
    event_add(c->idle, &(struct timeval){.tv_sec = opt.idle_ms / 1000,
                                         .tv_usec = (suseconds_t)(opt.idle_ms % 1000 * 1000)});
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *peer,
                      int peerlen, void *arg)
{
    (void)l, (void)peer, (void)peerlen, (void)arg;
    struct conn *c = calloc(1, sizeof(*c));
    struct bufferevent *bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    struct event *idle = c && opt.idle_ms ? evtimer_new(base, on_idle, c) : NULL;
    if (!c || !bev || (opt.idle_ms && !idle)) {
        fprintf(stderr, "pubsub_bufferevent: out of memory\n");
        if (bev)
            bufferevent_free(bev);
        else
            close(fd);
        if (idle)
            event_free(idle);
        free(c);
        return;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
    c->bev = bev;
    c->out = bufferevent_get_output(bev);
    c->idle = idle;
    c->last_ms = now_ms();
    c->next = &conns;
    c->prev = conns.prev;
    conns.prev->next = c;
    conns.prev = c;
    bufferevent_set_max_single_write(bev, MAX_WRITE);
    bufferevent_set_max_single_read(bev, MAX_READ);
    bufferevent_setcb(bev, on_read, on_write, on_event, c);
    bufferevent_enable(bev, EV_READ);
    if (idle)
        event_add(idle, &(struct timeval){.tv_sec = opt.idle_ms / 1000,
                                          .tv_usec = (suseconds_t)(opt.idle_ms % 1000 * 1000)});
}

/* The graceful stop (see the top of the file). */
static void on_signal(evutil_socket_t signo, short what, void *arg)
{
    (void)signo, (void)what, (void)arg;
    stopping = true;
    evconnlistener_free(listener);
    listener = NULL;
    event_del(sigint);
    event_del(sigterm);
    for (struct conn *c = conns.next, *next; c != &conns; c = next) {
        next = c->next;
        close_after_flush(c);
    }
    if (conns.next == &conns)
        event_base_loopbreak(base);
    else
        event_base_loopexit(base, &(struct timeval){.tv_sec = STOP_LIMIT_S});
}

static int serve(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port)};
    socklen_t alen = sizeof(a);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    listener = evconnlistener_new_bind(base, on_accept, NULL,
                                       LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, SOMAXCONN,
                                       (struct sockaddr *)&a, sizeof(a));
    sigint = evsignal_new(base, SIGINT, on_signal, NULL);
    sigterm = evsignal_new(base, SIGTERM, on_signal, NULL);
    if (!listener || !sigint || !sigterm || event_add(sigint, NULL) || event_add(sigterm, NULL) ||
        getsockname(evconnlistener_get_fd(listener), (struct sockaddr *)&a, &alen) != 0) {
        fprintf(stderr, "pubsub_bufferevent: cannot listen on 127.0.0.1:%u\n", opt.port);
        return 1;
    }
    printf(PUBSUB_SERVING_FMT, ntohs(a.sin_port));
    fflush(stdout);
    return event_base_dispatch(base) < 0;
}

int main(int argc, char **argv)
{
    int rc = pubsub_args(argc, argv, &opt);
    if (rc)
        return rc == 1 ? 0 : 2;
    signal(SIGPIPE, SIG_IGN);
    rooms.mask = FIRST_BUCKETS - 1;
    rooms.bucket = xrealloc(NULL, FIRST_BUCKETS * sizeof(*rooms.bucket));
    memset(rooms.bucket, 0, FIRST_BUCKETS * sizeof(*rooms.bucket));
    base = event_base_new();
    rc = base ? serve() : 1;
    if (listener)
        evconnlistener_free(listener);
    while (conns.next != &conns)
        conn_free(conns.next); /* those STOP_LIMIT_S did not flush */
    if (sigint)
        event_free(sigint);
    if (sigterm)
        event_free(sigterm);
    if (base)
        event_base_free(base);
    free(rooms.bucket); /* every room went with its last subscriber */
    if (rc == 0)
        fprintf(stderr, PUBSUB_STOPPED_FMT, published, delivered, cut);
    return rc;
}
