/* SPDX-License-Identifier: MIT */
/*
 * pubsub.c: a publish/subscribe broker on streams, a color per room and a
 * color per connection (the protocol: bench/e2e/pubsub.h).
 *
 *   pubsub [--port P] [--max-output BYTES] [--idle-ms MS]
 *
 * Lines: SUB <room>, UNSUB <room> (each answered "OK SUB <room>", "OK UNSUB
 * <room>"), PUB <room> <payload> (every subscriber of the room gets "MSG
 * <room> <payload>"), QUIT ("BYE", then the broker closes).
 *
 * The design. A connection's line callback runs on the connection's color;
 * it parses, and sends what concerns a room to the room's color (hashed
 * from its name, in a range of colors), whose events alone touch that room's
 * subscribers: no lock anywhere. A PUB travels as the MSG line already
 * formatted, in a block (mely_block_t): the room's color writes that one
 * block to each subscriber's stream (mely_stream_write_block, from another
 * color: no copy per subscriber of a large message, no lock, and the stream
 * sends each subscriber's messages once per batch of its color). One
 * publisher's messages to one room keep their order: they go from its
 * connection's color to the room's color in post order, and from there to
 * each subscriber in write order.
 *
 * With --deliver events the room posts the block to each subscriber's color
 * instead, which writes it as its own (the design most programs start
 * with: the runtime makes both cheap; bench/e2e/run-pubsub.sh compares).
 *
 * Limits: a subscriber whose output passes --max-output (1 MiB) is cut
 * (the stream's output cap with MELY_STREAM_CAP_CLOSE); a connection that
 * reads and receives nothing for --idle-ms (60 s) gets "ERR idle" and is
 * closed (the stream's idle timeout); a line over 4096 bytes gets "ERR line
 * too long" and a close. SIGTERM and SIGINT: mely_drain, which stops
 * accepting and reading, lets every PUB already read reach its subscribers,
 * sends it, and closes; then the counts go to stderr.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mely/stream.h>

enum {
    ROOM_COLORS = 256,
    BUCKETS = 64,      /* rooms of one color */
    ROOM_MAX = 64,     /* a room's name, at most */
    MAX_LINE = 4096,
    CONN_COLORS = 4096,
};

#define DRAIN_NS 10000000000ull /* the graceful stop's limit */

struct room { /* on its room's color */
    struct room *next;
    mely_stream_t **subs; /* each a reference */
    size_t nsubs, cap;
    size_t len;
    char name[ROOM_MAX + 1];
};

/* What one room color owns: its rooms and its counts. A line each, so that
 * colors on different workers never write the same one. */
struct part {
    _Alignas(64) struct room *bucket[BUCKETS];
    uint64_t published, delivered;
};

struct joined { /* a room a connection is in, on the connection's color */
    struct joined *next;
    size_t len;
    char name[ROOM_MAX + 1];
};

struct conn { /* on the connection's color */
    mely_stream_t *s;
    struct joined *rooms;
};

enum op { OP_SUB, OP_UNSUB, OP_LEAVE };

struct req { /* a SUB, UNSUB or LEAVE on its way to the room's color */
    enum op op;
    mely_stream_t *s; /* a reference (LEAVE: the room's own, dropped there) */
    size_t len;
    char name[ROOM_MAX + 1];
};

static mely_t rt;
static mely_color_range_t conn_colors, room_colors;
static struct part parts[ROOM_COLORS];
static struct { /* --deliver events: deliveries, a slot per connection color */
    _Alignas(64) uint64_t n;
} conn_delivered[CONN_COLORS];
static atomic_ullong cut_count;
static struct {
    unsigned port;
    size_t max_output;
    uint64_t idle_ms;
    bool deliver_events; /* --deliver events */
} opt = {.port = 0, .max_output = 1u << 20, .idle_ms = 60000};

/* ---- rooms, on their colors ---------------------------------------------------- */

static struct part *my_part(void)
{
    return &parts[(mely_color_t)mely_current_color() - room_colors.base];
}

static struct room **find(struct part *p, const char *name, size_t len)
{
    struct room **r = &p->bucket[mely_color_hash(&room_colors, name, len) % BUCKETS];
    while (*r && ((*r)->len != len || memcmp((*r)->name, name, len) != 0))
        r = &(*r)->next; /* bounded: the bucket */
    return r;
}

static bool subscribe(struct room **at, const char *name, size_t len, mely_stream_t *s)
{
    struct room *r = *at;
    if (!r) {
        r = calloc(1, sizeof(*r));
        if (!r)
            return false;
        memcpy(r->name, name, len);
        r->len = len;
        *at = r;
    }
    for (size_t i = 0; i < r->nsubs; i++)
        if (r->subs[i] == s)
            return true; /* already */
    if (r->nsubs == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 8;
        mely_stream_t **subs = realloc(r->subs, cap * sizeof(*subs));
        if (!subs)
            return false;
        r->subs = subs;
        r->cap = cap;
    }
    mely_stream_ref(s);
    r->subs[r->nsubs++] = s;
    return true;
}

/* Drops subscriber i (its reference), keeping the others' order. */
static void drop_sub(struct room *r, size_t i)
{
    mely_stream_unref(r->subs[i]);
    memmove(&r->subs[i], &r->subs[i + 1], (r->nsubs - i - 1) * sizeof(*r->subs));
    r->nsubs--;
}

static void unsubscribe(struct room **at, mely_stream_t *s)
{
    struct room *r = *at;
    for (size_t i = 0; r && i < r->nsubs; i++)
        if (r->subs[i] == s) {
            drop_sub(r, i);
            break;
        }
    if (r && r->nsubs == 0) { /* an empty room goes */
        *at = r->next;
        free(r->subs);
        free(r);
    }
}

static void on_req(void *arg)
{
    struct req *q = arg;
    struct room **at = find(my_part(), q->name, q->len);
    if (q->op != OP_SUB)
        unsubscribe(at, q->s);
    else if (!subscribe(at, q->name, q->len, q->s))
        mely_stream_printf(q->s, "ERR out of memory\n");
    if (q->op != OP_LEAVE)
        mely_stream_unref(q->s);
    free(q);
}

/* The room's name in a MSG line: after "MSG ", up to the next space. */
static const char *msg_room(mely_block_t *b, size_t *len)
{
    const char *room = (const char *)mely_block_data(b) + 4;
    *len = (size_t)((const char *)memchr(room, ' ', mely_block_len(b) - 4) - room);
    return room;
}

/* --deliver events: a message on its way to one subscriber's color. */
struct delivery {
    mely_stream_t *s; /* a reference */
    mely_block_t *b;  /* a reference */
};

/* On the subscriber's color: the write is the stream's own. */
static void on_delivery(void *arg)
{
    struct delivery *d = arg;
    if (mely_stream_write_block(d->s, d->b) == 0)
        conn_delivered[(mely_color_t)mely_current_color() - conn_colors.base].n++;
    mely_stream_unref(d->s);
    mely_block_unref(d->b);
    free(d);
}

static void post_delivery(mely_stream_t *s, mely_block_t *b)
{
    struct delivery *d = malloc(sizeof(*d));
    if (!d)
        return; /* out of memory: this subscriber misses the message */
    *d = (struct delivery){.s = s, .b = mely_block_ref(b)};
    mely_stream_ref(s);
    if (mely_post(&rt, mely_stream_color(s), on_delivery, d) != 0) {
        mely_stream_unref(s);
        mely_block_unref(b);
        free(d);
    }
}

static void on_pub(void *arg)
{
    mely_block_t *b = arg;
    struct part *p = my_part();
    size_t len;
    const char *name = msg_room(b, &len);
    struct room *r = *find(p, name, len);
    p->published++;
    /* A subscriber that closed (-EPIPE) or was cut (-ENOBUFS) stays until
     * its LEAVE: the room's reference keeps its address from being reused
     * by a newer stream that the LEAVE would then remove. */
    for (size_t i = 0; r && i < r->nsubs; i++) { /* bounded: the subscribers */
        if (opt.deliver_events)
            post_delivery(r->subs[i], b);
        else if (mely_stream_write_block(r->subs[i], b) == 0)
            p->delivered++;
    }
    mely_block_unref(b);
}

/* ---- connections, on their colors ----------------------------------------------- */

static bool room_ok(const char *name, size_t len)
{
    if (len == 0 || len > ROOM_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

static int to_room(enum op op, mely_stream_t *s, const char *name, size_t len)
{
    struct req *q = malloc(sizeof(*q));
    if (!q)
        return MELY_ENOMEM;
    *q = (struct req){.op = op, .s = s, .len = len};
    memcpy(q->name, name, len);
    q->name[len] = 0;
    if (op != OP_LEAVE)
        mely_stream_ref(s);
    int err = mely_post(&rt, mely_color_hash(&room_colors, name, len), on_req, q);
    if (err) {
        if (op != OP_LEAVE)
            mely_stream_unref(s);
        free(q);
    }
    return err;
}

/* "OK SUB <room>" from the connection's color, right after the request is
 * posted: replies keep the order of the commands, and the subscription
 * holds for any PUB that follows the reply (it is posted to the room's color
 * after the SUB, in happens-before order: mely.h's ordering rule). */
static void reply(struct conn *c, enum op op, int err, const char *name, size_t len)
{
    if (err)
        mely_stream_printf(c->s, "ERR out of memory\n");
    else
        mely_stream_printf(c->s, "OK %s %.*s\n", op == OP_SUB ? "SUB" : "UNSUB", (int)len, name);
}

static struct joined **joined_at(struct conn *c, const char *name, size_t len)
{
    struct joined **j = &c->rooms;
    while (*j && ((*j)->len != len || memcmp((*j)->name, name, len) != 0))
        j = &(*j)->next; /* bounded: the connection's rooms */
    return j;
}

static void sub(struct conn *c, const char *name, size_t len)
{
    struct joined **at = joined_at(c, name, len);
    if (!*at) {
        struct joined *j = calloc(1, sizeof(*j));
        if (!j) {
            mely_stream_printf(c->s, "ERR out of memory\n");
            return;
        }
        memcpy(j->name, name, len);
        j->len = len;
        *at = j;
    }
    reply(c, OP_SUB, to_room(OP_SUB, c->s, name, len), name, len);
}

static void unsub(struct conn *c, const char *name, size_t len)
{
    struct joined **at = joined_at(c, name, len);
    if (*at) {
        struct joined *j = *at;
        *at = j->next;
        free(j);
    }
    reply(c, OP_UNSUB, to_room(OP_UNSUB, c->s, name, len), name, len);
}

/* PUB: the MSG line, formatted once, goes to the room's color. */
static void pub(struct conn *c, const char *name, size_t len, const char *payload, size_t plen)
{
    mely_block_t *b = mely_block_alloc(4 + len + 1 + plen + 1);
    if (!b) {
        mely_stream_printf(c->s, "ERR out of memory\n");
        return;
    }
    char *d = mely_block_data(b);
    memcpy(d, "MSG ", 4);
    memcpy(d + 4, name, len);
    d[4 + len] = ' ';
    memcpy(d + 5 + len, payload, plen);
    d[5 + len + plen] = '\n';
    if (mely_post(&rt, mely_color_hash(&room_colors, name, len), on_pub, b) != 0) {
        mely_block_unref(b);
        mely_stream_printf(c->s, "ERR out of memory\n");
    }
}

/* The word at *line (up to a space or the end), and what follows it. */
static size_t word(char **line, size_t *len, char **rest)
{
    char *sp = memchr(*line, ' ', *len);
    size_t n = sp ? (size_t)(sp - *line) : *len;
    *rest = sp ? sp + 1 : *line + *len;
    return n;
}

static void on_line(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    char *rest;
    size_t n = word(&line, &len, &rest);
    size_t rlen = len - (size_t)(rest - line);
    if (n == 4 && memcmp(line, "QUIT", 4) == 0 && rlen == 0) {
        mely_stream_printf(s, "BYE\n");
        mely_stream_close(s, MELY_STREAM_FLUSH);
        return;
    }
    bool is_pub = n == 3 && memcmp(line, "PUB", 3) == 0;
    bool is_sub = n == 3 && memcmp(line, "SUB", 3) == 0;
    bool is_unsub = n == 5 && memcmp(line, "UNSUB", 5) == 0;
    if (!is_pub && !is_sub && !is_unsub) {
        mely_stream_printf(s, "ERR unknown command\n");
        return;
    }
    char *room = rest, *payload;
    size_t roomlen = word(&room, &rlen, &payload);
    if (!room_ok(room, roomlen) || (!is_pub && roomlen != rlen)) {
        mely_stream_printf(s, "ERR bad room\n");
        return;
    }
    if (is_pub)
        pub(c, room, roomlen, payload, rlen - (size_t)(payload - room));
    else if (is_sub)
        sub(c, room, roomlen);
    else
        unsub(c, room, roomlen);
}

static void on_event(mely_stream_t *s, unsigned what, int err, void *arg)
{
    (void)arg;
    if (what & MELY_STREAM_TIMEOUT) {
        mely_stream_printf(s, "ERR idle\n");
        mely_stream_close(s, MELY_STREAM_FLUSH);
    } else if (what & MELY_STREAM_ERROR && err == -EMSGSIZE) {
        mely_stream_printf(s, "ERR line too long\n");
        mely_stream_close(s, MELY_STREAM_FLUSH);
    } else if (what & MELY_STREAM_ERROR && err == -ENOBUFS) {
        atomic_fetch_add(&cut_count, 1); /* the cap closes it */
    } else if (what & MELY_STREAM_EOF) {
        mely_stream_close(s, MELY_STREAM_FLUSH);
    } else {
        mely_stream_close(s, 0);
    }
}

/* The last callback: the connection leaves its rooms (each room drops its
 * reference there). */
static void on_closed(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    for (struct joined *j = c->rooms, *next; j; j = next) { /* bounded: its rooms */
        next = j->next;
        (void)to_room(OP_LEAVE, s, j->name, j->len); /* fails only at shutdown */
        free(j);
    }
    free(c);
}

static mely_stream_ops_t conn_ops = {
    .line = on_line,
    .event = on_event,
    .closed = on_closed,
    .max_line = MAX_LINE,
    .flags = MELY_STREAM_CAP_CLOSE,
};

static void on_accept(int fd, const struct sockaddr *peer, unsigned peerlen, void *arg)
{
    (void)peer, (void)peerlen, (void)arg;
    struct conn *c = calloc(1, sizeof(*c));
    mely_to_t to = MELY_TO(mely_color_pick(&conn_colors, (uint64_t)fd));
    int err = c ? mely_stream_open(&rt, fd, to, &conn_ops, c, &c->s)
                : (mely_close(&rt, fd), MELY_ENOMEM);
    if (err) {
        fprintf(stderr, "pubsub: %s\n", mely_strerror(err));
        free(c); /* the stream closed fd */
    }
}

static void on_signal(int signo, unsigned ready, void *arg)
{
    (void)signo, (void)ready, (void)arg;
    mely_drain(&rt, DRAIN_NS);
}

/* ---- main -------------------------------------------------------------------------- */

static int usage(FILE *f, int status)
{
    fprintf(f, "usage: pubsub [--port P] [--max-output BYTES] [--idle-ms MS] [--deliver blocks|events]\n"
               "  --port P            listen on 127.0.0.1:P (default 0: a free port)\n"
               "  --max-output BYTES  cut a subscriber whose output passes BYTES (default 1048576)\n"
               "  --idle-ms MS        close a connection idle for MS ms (default 60000; 0: never)\n"
               "  --deliver blocks    a room writes each message to its subscribers (default)\n"
               "  --deliver events    a room posts each message to each subscriber's color,\n"
               "                      which writes it (the design most programs start with)\n");
    return status;
}

static bool number(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = s && *s >= '0' && *s <= '9' ? strtoull(s, &end, 10) : 0;
    if (!s || *s < '0' || *s > '9' || errno || *end || v > max)
        return false;
    *out = v;
    return true;
}

static int parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        unsigned long long v;
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0)
            return usage(stdout, 0) - 1; /* -1: stop, status 0 */
        if (strcmp(a, "--port") == 0 && number(val, 65535, &v))
            opt.port = (unsigned)v;
        else if (strcmp(a, "--max-output") == 0 && number(val, SIZE_MAX, &v) && v > 0)
            opt.max_output = (size_t)v;
        else if (strcmp(a, "--idle-ms") == 0 && number(val, UINT64_MAX / 1000000u, &v))
            opt.idle_ms = v;
        else if (strcmp(a, "--deliver") == 0 && val &&
                 (strcmp(val, "blocks") == 0 || strcmp(val, "events") == 0))
            opt.deliver_events = strcmp(val, "events") == 0;
        else {
            fprintf(stderr, "pubsub: bad option or value: %s%s%s\n", a, val ? " " : "",
                    val ? val : "");
            return usage(stderr, 2);
        }
        i++;
    }
    return 0;
}

static void free_rooms(void)
{
    for (unsigned p = 0; p < ROOM_COLORS; p++)
        for (unsigned b = 0; b < BUCKETS; b++)
            for (struct room *r = parts[p].bucket[b], *next; r; r = next) {
                next = r->next;
                free(r->subs); /* the streams went with the runtime */
                free(r);
            }
}

int main(int argc, char **argv)
{
    int st = parse(argc, argv);
    if (st)
        return st < 0 ? 0 : st;
    conn_ops.output_max = opt.max_output;
    conn_ops.idle_timeout_ns = opt.idle_ms * 1000000u;
    mely_listener_t *l;
    mely_watch_t *w;
    int err = mely_init(&rt, NULL);
    if (err || (err = mely_color_range(&rt, CONN_COLORS, &conn_colors)) ||
        (err = mely_color_range(&rt, ROOM_COLORS, &room_colors)) ||
        (err = mely_signal(&rt, SIGINT, MELY_TO(0), on_signal, NULL, &w)) ||
        (err = mely_signal(&rt, SIGTERM, MELY_TO(0), on_signal, NULL, &w)) ||
        (err = mely_listen(&rt, "127.0.0.1", opt.port, 0, 0, MELY_TO(1), on_accept, NULL, &l))) {
        fprintf(stderr, "pubsub: %s\n", mely_strerror(err));
        return 1;
    }
    printf("pubsub: serving 127.0.0.1:%u\n", mely_listener_port(l));
    fflush(stdout);
    err = mely_run(&rt);
    mely_shutdown(&rt); /* closes the streams left, runs their closed callbacks */
    uint64_t published = 0, delivered = 0;
    for (unsigned p = 0; p < ROOM_COLORS; p++) {
        published += parts[p].published;
        delivered += parts[p].delivered;
    }
    for (unsigned c = 0; c < CONN_COLORS; c++)
        delivered += conn_delivered[c].n;
    free_rooms();
    fprintf(stderr, "pubsub: %llu published, %llu delivered, %llu cut\n",
            (unsigned long long)published, (unsigned long long)delivered,
            (unsigned long long)atomic_load(&cut_count));
    return err ? 1 : 0;
}
