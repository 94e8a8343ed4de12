/*
 * kv.c: a key-value server on streams, a color per key (doc/colors.md).
 * `kv [PORT]` (default 7008; 0: a free port). A command per line (LF or CRLF),
 * a reply line each, in order: GET key -> VALUE value | NOT_FOUND; SET key
 * value (the rest of the line) -> OK; DEL key -> OK | NOT_FOUND; anything else
 * -> ERROR why. Keys: 1 to 250 bytes without a space. A line over 8 KB: ERROR
 * line too long, and the connection closes. SIGINT, SIGTERM: a graceful stop.
 * Each connection has a color of one range, each key one of another: a line
 * goes from its connection's color to its key's, whose events alone touch
 * that key's part of the table (no lock), replies from there and hands the
 * connection back: one command per connection at a time keeps replies in order.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mely/stream.h"

enum { KEY_COLORS = 256, BUCKETS = 256, MAX_KEY = 250 };

struct entry {
    struct entry *next;
    size_t klen, rlen;
    char *reply; /* "VALUE value\n", after the key */
    char key[];
};

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
static struct entry *table[KEY_COLORS * BUCKETS]; /* color c's keys from (c - base) * BUCKETS */

static void serve(mely_stream_t *s, void *arg);

/* On the key's color: where the key's entry is, or would be. */
static struct entry **find(const char *key, size_t klen)
{
    size_t h = 5381;
    for (size_t i = 0; i < klen; i++)
        h = h * 33 + (unsigned char)key[i];
    mely_color_t color = (mely_color_t)mely_current_color() - key_colors.base;
    struct entry **e = &table[color * BUCKETS + h % BUCKETS];
    while (*e && ((*e)->klen != klen || memcmp((*e)->key, key, klen) != 0))
        e = &(*e)->next;
    return e;
}

static struct entry *entry_new(const char *key, size_t klen, const char *val, size_t vlen)
{
    struct entry *e = malloc(sizeof(*e) + klen + vlen + 7);
    if (!e)
        return NULL;
    e->klen = klen;
    e->rlen = vlen + 7;
    e->reply = e->key + klen;
    memcpy(e->key, key, klen);
    memcpy(e->reply, "VALUE ", 6);
    memcpy(e->reply + 6, val, vlen);
    e->reply[vlen + 6] = '\n';
    return e;
}

/* "GET", "SET", "DEL" as 'G', 'S', 'D' (followed by a space or the end); 0. */
static char op_of(const char *line, size_t len)
{
    if (len < 3 || (len > 3 && line[3] != ' '))
        return 0;
    return !memcmp(line, "GET", 3) ? 'G' : !memcmp(line, "SET", 3) ? 'S'
           : !memcmp(line, "DEL", 3) ? 'D' : 0;
}

/* The key of "OP KEY[ VALUE]", *klen bytes; *sp: the space after it, or NULL. */
static const char *key_of(const char *line, size_t len, size_t *klen, const char **sp)
{
    const char *key = memchr(line, ' ', len), *end = line + len;
    key = key ? key + 1 : end;
    *sp = memchr(key, ' ', (size_t)(end - key));
    *klen = (size_t)((*sp ? *sp : end) - key);
    return key;
}

/* On the key's color: runs one command line and replies. */
static void command(mely_stream_t *s, const char *line, size_t len)
{
    char op = op_of(line, len);
    size_t klen;
    const char *sp, *key = key_of(line, len, &klen, &sp);
    size_t vlen = sp ? (size_t)(line + len - sp - 1) : 0;
    const char *why = !op ? "unknown command (GET, SET or DEL)" : klen == 0 ? "missing key"
                      : klen > MAX_KEY ? "key too long" : op == 'S' && !sp ? "missing value"
                      : op != 'S' && sp ? "too many arguments" : NULL;
    if (why) {
        mely_stream_printf(s, "ERROR %s\n", why);
        return;
    }
    struct entry **e = find(key, klen), *old = *e, *new;
    if (op == 'G' && old)
        mely_stream_write(s, old->reply, old->rlen);
    else if (op == 'S' && (new = entry_new(key, klen, sp + 1, vlen))) {
        new->next = old ? old->next : NULL;
        *e = new;
        free(old);
        mely_stream_write(s, "OK\n", 3);
    } else if (op == 'S') {
        mely_stream_write(s, "ERROR out of memory\n", 20);
    } else if (op == 'D' && old) {
        *e = old->next;
        free(old);
        mely_stream_write(s, "OK\n", 3);
    } else {
        mely_stream_write(s, "NOT_FOUND\n", 10);
    }
}

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

/* On the key's color (the line's, for a line without a key). */
static void execute(void *arg)
{
    struct req *r = arg;
    command(r->s, r->line, r->len);
    if (mely_post(&rt, mely_stream_color(r->s), resume, r) != 0) {
        mely_stream_unref(r->s); /* only when shutting down: the connection ends too */
        free(r);
    }
}

/* On the connection's color: sends the line to its key's color. */
static bool dispatch(mely_stream_t *s, struct conn *c, const char *line, size_t len)
{
    size_t klen;
    const char *sp, *key = key_of(line, len, &klen, &sp);
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
    mely_shutdown(&rt);
    for (size_t i = 0; i < KEY_COLORS * BUCKETS; i++)
        for (struct entry *e = table[i], *next; e; e = next) {
            next = e->next;
            free(e);
        }
    return err ? 1 : 0;
}
