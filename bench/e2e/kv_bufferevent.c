/* SPDX-License-Identifier: MIT */
/*
 * kv_bufferevent.c: examples/kv.c's server on plain libevent bufferevents,
 * one thread, so that the two can be compared (issue 16: lines of code).
 * `kv_bufferevent [PORT]` (default 7008; 0: a free port). The same table and
 * commands (examples/kvstore.[ch]), the same 8 KB line limit, the same
 * backpressure (reading stops while more than 1 MiB of replies wait), and
 * the same graceful stop: SIGINT or SIGTERM stop accepting, flush and close
 * every connection (at most 5 s), free all, and say on stderr "kv: N
 * commands executed" (examples/tests/kv-drain.sh counts replies against it).
 * examples/tests/kv-self-test.sh runs examples/tests/kvclient against both.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "examples/kvstore.h"

enum { BUCKETS = 65536, MAX_LINE = 8192, OUT_HIGH = 1 << 20 };

struct conn {
    struct bufferevent *bev;
    struct conn *prev, *next; /* every open connection, for the graceful stop */
    bool closing;             /* flushing, then freed */
};

static struct event_base *base;
static struct evconnlistener *listener;
static struct event *sigint, *sigterm;
static struct conn conns = {.prev = &conns, .next = &conns};
static bool stopping;
static struct kv_entry *table[BUCKETS];
static unsigned long long executed; /* commands run by kv_command */

static void conn_free(struct conn *c)
{
    c->prev->next = c->next;
    c->next->prev = c->prev;
    bufferevent_free(c->bev); /* closes the socket */
    free(c);
    if (stopping && conns.next == &conns)
        event_base_loopbreak(base);
}

/* Stops reading; frees c once its replies are out (on_write). */
static void close_after_flush(struct conn *c)
{
    c->closing = true;
    bufferevent_disable(c->bev, EV_READ);
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
        conn_free(c);
}

static void on_read(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev), *out = bufferevent_get_output(bev);
    size_t len;
    char *line;
    while ((line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF)) && len <= MAX_LINE) {
        const char *reply;
        size_t rlen;
        kv_command(table, BUCKETS, line, len, &reply, &rlen);
        executed++;
        evbuffer_add(out, reply, rlen);
        free(line);
    }
    if (line || evbuffer_get_length(in) > MAX_LINE + 1) { /* + 1: a CR may wait for its LF */
        free(line);
        evbuffer_add_printf(out, "ERROR line too long\n");
        close_after_flush(c);
    } else if (evbuffer_get_length(out) > OUT_HIGH) {
        bufferevent_disable(bev, EV_READ); /* until on_write: the client reads too slowly */
    }
}

/* The output is empty. */
static void on_write(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    if (c->closing)
        conn_free(c);
    else
        bufferevent_enable(bev, EV_READ);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    if (what & BEV_EVENT_EOF)
        close_after_flush(arg); /* every complete line was answered in on_read */
    else if (what & BEV_EVENT_ERROR)
        conn_free(arg);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *peer,
                      int peerlen, void *arg)
{
    (void)l, (void)peer, (void)peerlen, (void)arg;
    struct conn *c = calloc(1, sizeof(*c));
    struct bufferevent *bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!c || !bev) {
        fprintf(stderr, "kv_bufferevent: out of memory\n");
        if (bev)
            bufferevent_free(bev);
        else
            close(fd);
        free(c);
        return;
    }
    c->bev = bev;
    c->next = &conns;
    c->prev = conns.prev;
    conns.prev->next = c;
    conns.prev = c;
    bufferevent_setcb(bev, on_read, on_write, on_event, c);
    bufferevent_enable(bev, EV_READ);
}

/* The graceful stop: the loop ends once no connection is left, or in 5 s. */
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
        event_base_loopexit(base, &(struct timeval){.tv_sec = 5});
}

static int serve(unsigned port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    socklen_t alen = sizeof(a);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    listener = evconnlistener_new_bind(base, on_accept, NULL, LEV_OPT_CLOSE_ON_FREE |
                                       LEV_OPT_REUSEABLE, -1, (struct sockaddr *)&a, sizeof(a));
    sigint = evsignal_new(base, SIGINT, on_signal, NULL);
    sigterm = evsignal_new(base, SIGTERM, on_signal, NULL);
    if (!listener || !sigint || !sigterm || event_add(sigint, NULL) || event_add(sigterm, NULL) ||
        getsockname(evconnlistener_get_fd(listener), (struct sockaddr *)&a, &alen) != 0) {
        fprintf(stderr, "kv_bufferevent: cannot listen on 127.0.0.1:%u\n", port);
        return 1;
    }
    printf("kv: serving 127.0.0.1:%u\n", ntohs(a.sin_port));
    fflush(stdout);
    return event_base_dispatch(base) < 0;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    base = event_base_new();
    int rc = base ? serve(argc > 1 ? (unsigned)atoi(argv[1]) : 7008) : 1;
    if (listener)
        evconnlistener_free(listener);
    while (conns.next != &conns)
        conn_free(conns.next); /* those the 5 s did not flush */
    if (sigint)
        event_free(sigint);
    if (sigterm)
        event_free(sigterm);
    kv_free(table, BUCKETS);
    if (base)
        event_base_free(base);
    fprintf(stderr, "kv: %llu commands executed\n", executed);
    return rc;
}
