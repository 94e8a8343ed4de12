/*
 * kv.c: a key-value server on streams, a color per key (doc/colors.md).
 * `kv [PORT]` (default 7008; 0: a free port). A command per line (LF or CRLF),
 * a reply line each, in order (the commands: kvstore.h). A line over 8 KB
 * gets "ERROR line too long" and the connection closes. SIGINT, SIGTERM: a
 * graceful stop. Each connection has a color of one range, each key one of
 * another: a line goes from its connection's color to its key's, whose
 * events alone touch that key's part of the table (no lock), replies from
 * there and hands the connection back: one command per connection at a time
 * keeps replies in order. At exit, stderr says "kv: N commands executed"
 * (tests/kv-drain.sh compares N with the replies its clients got).
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/kvstore.h"
#include "mely/stream.h"

enum { KEY_COLORS = 256, BUCKETS = 256 };

struct conn { /* on the connection's color */
    bool busy; /* a command is out on its key's color */
    bool eof;  /* the client sent all it will: close once answered */
};

struct req {
    mely_stream_t *s; /* a reference */
    struct conn *c;   /* valid while the stream is open */
    size_t len;
    char line[];
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

static void serve(mely_stream_t *s, void *arg);

/* Back on the connection's color: the next command, unless it closed. */
static void resume(void *arg)
{
    struct req *r = arg;
    if (mely_stream_fd(r->s) >= 0) {
        r->c->busy = false;
        mely_stream_reading(r->s, 1);
        serve(r->s, r->c);
    }
    mely_stream_unref(r->s);
    free(r);
}

/* On the key's color (the line's, for a line without a key): the command. */
static void execute(void *arg)
{
    struct req *r = arg;
    mely_color_t part = (mely_color_t)mely_current_color() - key_colors.base;
    const char *reply;
    size_t rlen;
    kv_command(&table[part * BUCKETS], BUCKETS, r->line, r->len, &reply, &rlen);
    executed[part].n++;
    int err = mely_stream_write(r->s, reply, rlen);
    if (err && err != -EPIPE)
        mely_stream_close(r->s, 0); /* a reply lost: the client would be out of step */
    if (err || mely_post(&rt, mely_stream_color(r->s), resume, r) != 0) {
        mely_stream_unref(r->s); /* closed, or shutting down: nothing more to serve */
        free(r);
    }
}

/* On the connection's color: sends the line to its key's color. */
static bool dispatch(mely_stream_t *s, struct conn *c, const char *line, size_t len)
{
    size_t klen;
    const char *key = kv_key(line, len, &klen);
    struct req *r = malloc(sizeof(*r) + len);
    if (!r)
        return false;
    *r = (struct req){.s = s, .c = c, .len = len};
    memcpy(r->line, line, len);
    mely_stream_ref(s); /* s goes to another color */
    if (mely_post(&rt, mely_color_hash(&key_colors, key, klen), execute, r) != 0) {
        mely_stream_unref(s);
        free(r);
        return false;
    }
    c->busy = true;
    mely_stream_reading(s, 0);
    return true;
}

/* On the connection's color (its read callback): takes lines until one is out. */
static void serve(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    char *line;
    size_t len;
    int got = 1;
    while (!c->busy && (got = mely_stream_readln(s, &line, &len)) > 0)
        if (!dispatch(s, c, line, len))
            mely_stream_printf(s, "ERROR out of memory\n");
    if (got < 0) {
        mely_stream_printf(s, "ERROR line too long\n");
        mely_stream_close(s, MELY_STREAM_FLUSH);
    } else if (c->eof && !c->busy) {
        mely_stream_close(s, MELY_STREAM_FLUSH);
    }
}

static void on_event(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    (void)err;
    if (what & MELY_STREAM_EOF) {
        c->eof = true; /* answer what came first */
        serve(s, c);
    } else {
        mely_stream_close(s, 0);
    }
}

static void on_closed(mely_stream_t *s, void *arg)
{
    (void)s;
    free(arg);
}

static const mely_stream_ops_t kv_ops = {.read = serve, .event = on_event, .closed = on_closed};

static void on_accept(int fd, const struct sockaddr *peer, unsigned peerlen, void *arg)
{
    (void)peer, (void)peerlen, (void)arg;
    struct conn *c = calloc(1, sizeof(*c));
    mely_to_t to = MELY_TO(mely_color_pick(&conn_colors, (uint64_t)fd));
    int err = c ? mely_stream_open(&rt, fd, to, &kv_ops, c, NULL)
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
