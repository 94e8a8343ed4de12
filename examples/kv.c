/* SPDX-License-Identifier: MIT */
/*
 * kv.c: a key-value server on streams, a color per key (doc/colors.md).
 * `kv [PORT]` (default 7008; 0: a free port). A command per line (LF or CRLF),
 * a reply line each, in order (the commands: kvstore.h). A line over 8 KB
 * gets "ERROR line too long" and the connection closes. SIGINT, SIGTERM: a
 * graceful stop (mely_drain: every command read is answered). At exit,
 * stderr says "kv: N commands executed" (examples/tests/kv-drain.sh compares N with
 * the replies its clients got).
 *
 * Each connection has a color of one range, each key one of another: a
 * command goes from its connection's color to its key's, whose events alone
 * touch that key's part of the table (no lock), and comes back with its
 * reply. A connection keeps up to WINDOW commands out at once (pipelined
 * clients get their commands run in parallel on different keys); replies
 * come back in any order and are written in the order of the commands, a
 * ring of WINDOW slots indexed by sequence number. A full window pauses
 * reading until a reply frees a slot.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/kvstore.h"
#include <mely/stream.h>

enum { KEY_COLORS = 256, BUCKETS = 256, WINDOW = 64 };

struct req;

struct conn { /* on the connection's color */
    mely_stream_t *s;
    uint64_t issued, written;  /* commands sent out, replies written */
    struct req *ring[WINDOW];  /* replies back, not yet written: seq % WINDOW */
    bool eof;                  /* the client sent all it will: close once answered */
    bool closing;              /* a reply ends the connection (line too long) */
};

struct req {
    mely_stream_t *s; /* a reference, while out on the key's color */
    struct conn *c;   /* valid while the stream is open */
    uint64_t seq;
    size_t len;       /* the line's, then the reply's */
    size_t cap;       /* bytes at data */
    char *reply;      /* data, or a buffer of its own for a long reply */
    char data[];      /* the line, then the reply */
};

static mely_t rt;
static mely_color_range_t conn_colors, key_colors;
static struct kv_entry *table[KEY_COLORS * BUCKETS]; /* color c's from (c - base) * BUCKETS */
/* Commands executed, a slot per key color written by its events alone (no
 * atomic on the hot path), a cache line each (key colors run on different
 * workers); summed once the workers are gone. */
static struct {
    _Alignas(64) unsigned long long n;
} executed[KEY_COLORS];

static void req_free(struct req *r)
{
    if (r->reply != r->data)
        free(r->reply);
    free(r);
}

/* Keeps the reply in r (kv_command's is valid until the key color's next
 * command); false when out of memory. */
static bool keep_reply(struct req *r, const char *reply, size_t rlen)
{
    r->reply = rlen <= r->cap ? r->data : malloc(rlen);
    if (!r->reply) {
        r->reply = r->data;
        return false;
    }
    memcpy(r->reply, reply, rlen);
    r->len = rlen;
    return true;
}

/* ---- the connection's color -------------------------------------------------- */

/* Writes the replies that are next in order. */
static void write_ready(struct conn *c)
{
    struct req *r;
    while (c->written < c->issued && (r = c->ring[c->written % WINDOW])) { /* bounded: WINDOW */
        c->ring[c->written % WINDOW] = NULL;
        c->written++;
        int err = mely_stream_write(c->s, r->reply, r->len);
        req_free(r);
        if (err) { /* a reply lost: the client would be out of step */
            mely_stream_close(c->s, 0);
            return;
        }
    }
    if (c->written == c->issued && (c->eof || c->closing))
        mely_stream_close(c->s, MELY_STREAM_FLUSH);
}

/* A reply is back (or made here): into its slot, and out if it is next. */
static void complete(struct conn *c, struct req *r)
{
    c->ring[r->seq % WINDOW] = r;
    write_ready(c);
    if (c->issued - c->written < WINDOW && !c->closing)
        mely_stream_reading(c->s, 1); /* a slot is free: lines held back come again */
}

/* Back on the connection's color. */
static void on_reply(void *arg)
{
    struct req *r = arg;
    mely_stream_t *s = r->s;
    if (mely_stream_fd(s) >= 0)
        complete(r->c, r);
    else
        req_free(r); /* closed meanwhile: the conn is gone */
    mely_stream_unref(s);
}

/* ---- the key's color --------------------------------------------------------- */

static void execute(void *arg)
{
    struct req *r = arg;
    mely_color_t part = (mely_color_t)mely_current_color() - key_colors.base;
    const char *reply;
    size_t rlen;
    kv_command(&table[part * BUCKETS], BUCKETS, r->data, r->len, &reply, &rlen);
    executed[part].n++;
    if (!keep_reply(r, reply, rlen))
        keep_reply(r, "ERROR out of memory\n", 20);
    if (mely_post(&rt, mely_stream_color(r->s), on_reply, r) != 0) {
        mely_stream_unref(r->s); /* shutting down: nothing more to serve */
        req_free(r);
    }
}

/* ---- reading commands -------------------------------------------------------- */

static struct req *req_new(struct conn *c, const char *line, size_t len)
{
    size_t cap = len < 64 ? 64 : len; /* room for the usual replies */
    struct req *r = malloc(sizeof(*r) + cap);
    if (!r)
        return NULL;
    *r = (struct req){.s = c->s, .c = c, .seq = c->issued++, .len = len, .cap = cap};
    r->reply = r->data;
    memcpy(r->data, line, len);
    return r;
}

/* A reply made on the connection's color, in its turn. */
static void answer_here(struct conn *c, const char *text)
{
    struct req *r = req_new(c, text, strlen(text));
    if (!r) {
        mely_stream_close(c->s, 0);
        return;
    }
    complete(c, r);
}

/* Sends the line to its key's color. */
static void dispatch(struct conn *c, const char *line, size_t len)
{
    size_t klen;
    const char *key = kv_key(line, len, &klen);
    struct req *r = req_new(c, line, len);
    if (!r) {
        c->issued--; /* nothing was issued */
        answer_here(c, "ERROR out of memory\n");
        return;
    }
    mely_stream_ref(c->s); /* s goes to another color */
    if (mely_post(&rt, mely_color_hash(&key_colors, key, klen), execute, r) != 0) {
        mely_stream_unref(c->s);
        r->len = 0;
        keep_reply(r, "ERROR out of memory\n", 20);
        complete(c, r);
    }
}

static void on_line(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    if (c->closing)
        return;
    dispatch(c, line, len);
    if (c->issued - c->written >= WINDOW)
        mely_stream_reading(s, 0); /* the rest waits in the input */
}

static void on_event(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    if (what & MELY_STREAM_ERROR && err == -EMSGSIZE) {
        answer_here(c, "ERROR line too long\n"); /* after the replies before it */
        c->closing = true;
        mely_stream_reading(s, 0);
        write_ready(c);
    } else if (what & MELY_STREAM_EOF) {
        c->eof = true; /* answer what came first */
        write_ready(c);
    } else {
        mely_stream_close(s, 0);
    }
}

static void on_closed(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    (void)s;
    for (unsigned i = 0; i < WINDOW; i++)
        if (c->ring[i])
            req_free(c->ring[i]);
    free(c);
}

static const mely_stream_ops_t kv_ops = {.line = on_line, .event = on_event, .closed = on_closed};

static void on_accept(int fd, const struct sockaddr *peer, unsigned peerlen, void *arg)
{
    (void)peer, (void)peerlen, (void)arg;
    struct conn *c = calloc(1, sizeof(*c));
    mely_to_t to = MELY_TO(mely_color_pick(&conn_colors, (uint64_t)fd));
    int err = c ? mely_stream_open(&rt, fd, to, &kv_ops, c, &c->s)
                : (mely_close(&rt, fd), MELY_ENOMEM);
    if (err) {
        fprintf(stderr, "kv: %s\n", mely_strerror(err));
        free(c); /* the stream closed fd */
    }
}

static void on_signal(int signo, unsigned ready, void *arg)
{
    (void)signo, (void)ready, (void)arg;
    mely_drain(&rt, 5000000000u);
}

int main(int argc, char **argv)
{
    mely_listener_t *l;
    mely_watch_t *w;
    int err = mely_init(&rt, NULL);
    if (err || (err = mely_color_range(&rt, 1024, &conn_colors)) ||
        (err = mely_color_range(&rt, KEY_COLORS, &key_colors)) ||
        (err = mely_signal(&rt, SIGINT, MELY_TO(0), on_signal, NULL, &w)) ||
        (err = mely_signal(&rt, SIGTERM, MELY_TO(0), on_signal, NULL, &w)) ||
        (err = mely_listen(&rt, "127.0.0.1", argc > 1 ? (unsigned)atoi(argv[1]) : 7008, 0, 0,
                           MELY_TO(1), on_accept, NULL, &l))) {
        fprintf(stderr, "kv: %s\n", mely_strerror(err));
        return 1;
    }
    printf("kv: serving 127.0.0.1:%u\n", mely_listener_port(l));
    fflush(stdout);
    err = mely_run(&rt);
    mely_shutdown(&rt); /* closes the streams left, runs their closed callbacks */
    kv_free(table, KEY_COLORS * BUCKETS);
    unsigned long long total = 0;
    for (unsigned i = 0; i < KEY_COLORS; i++)
        total += executed[i].n;
    fprintf(stderr, "kv: %llu commands executed\n", total);
    return err ? 1 : 0;
}
