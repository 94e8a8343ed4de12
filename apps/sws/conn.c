/* SPDX-License-Identifier: MIT */
/*
 * conn.c: one connection's state machine (the paper's per-connection
 * handlers). Every function here runs as an event of the connection's color,
 * so a connection is never touched by two workers at once and needs no lock.
 *
 *   ReadRequest (read watch) --> ParseRequest --> CheckInCache ------------> WriteResponse
 *                                     |               |  miss, or            ^ |   ^
 *                                     |               |  check due           | |   | write watch
 *                                     |               v                      | |   | on EAGAIN
 *                                     |            ReadFile -----------------+ |
 *                                     v               v                        |
 *                                 BadRequest       NotFound -------------------+
 *                                     |                                        v
 *                                     +---> WriteResponse ---> ParseRequest (pipelined),
 *                                                             idle, or Close
 *
 * CheckInCache answers from the file cache (cache.h) without a system call;
 * ReadFile (the paper's disk path) opens the file when it is not cached, or
 * checks it when its validity period is over. A response holds a reference
 * to its cache entry until it is written, so the entry (its body, its
 * descriptor) outlives an eviction or a replacement meanwhile. A small file's
 * body goes out with the head in one writev from memory; a large one's with
 * sendfile after the head (sent with MSG_MORE, so head and body share
 * segments), at most SEND_RUN bytes per WriteResponse event so that one
 * big download does not keep the worker from the other connections.
 *
 * While a request is being answered (`busy`), ReadRequest only buffers what
 * arrives (pipelined requests); WriteResponse goes back to ParseRequest when
 * bytes remain, so pipelined requests are answered in order, one at a time.
 * A full input buffer removes the read watch (a level-triggered watch that is
 * not read would spin) until a response completes.
 *
 * Closing after an error (or a drain, or a timeout) is a lingering close:
 * the response is written, the write side shut down, and whatever the client
 * still sends is read and discarded until it closes (at most the linger
 * time and LINGER_READS reads, 1 MB: a client that keeps sending after its
 * answer would otherwise keep a worker reading at the speed of the network),
 * so that unread input does not turn the close into a reset that could
 * destroy the response before the client reads it. A client that asked
 * for the close ("Connection: close", HTTP/1.0) and whose request was read
 * whole, with nothing after it, sends nothing more (RFC 9112, 9.6): its
 * connection is closed at once, as nginx does, without the shutdown, the
 * wait and the read of its EOF.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "apps/sws/http.h"
#include "apps/sws/sws.h"

#define IN_CAP (HTTP_MAX_HEAD + HTTP_MAX_BODY)
#define LINGER_NS 2000000000ull /* 2 s */
#define LINGER_READS 256       /* reads of up to 4 KB: 1 MB at most */
#define SEND_RUN (4u << 20)      /* file bytes per WriteResponse event at most */

/* The input buffer, allocated while a request is being received or
 * answered, freed when the connection goes idle (an idle keep-alive
 * connection holds only struct conn). */
struct inbuf {
    struct http_req req; /* the request being answered */
    size_t len;          /* bytes in data */
    size_t scan;         /* http_head_end's resume point */
    bool line_checked;   /* the request line was checked (early refusal) */
    char data[IN_CAP];
};

struct conn {
    struct sws *s;
    int fd;
    mely_color_t color, accept_color;
    bool pooled;           /* color came from the pool: released at Close */
    mely_watch_t *rd, *wr; /* rd NULL while paused or after EOF */
    mely_timer_t timer;    /* 0: not armed */
    uint64_t deadline;     /* mely_now_ns() after which the timer acts */
    struct inbuf *ib;
    uint32_t gen;          /* tells this connection from earlier ones of its fd */
    bool in_epoll, reading, stop; /* --epoll-handler: registered, armed, stopped */
    bool started, busy, eof, linger, closing, served_one, close_after, head_only;
    bool continued;        /* this request's Expect: 100-continue is answered */
    bool status_ok;        /* the peer may see the status page (server.c) */
    unsigned char empty_lines; /* skipped before this request (at most 4) */
    unsigned short linger_reads; /* reads discarded while lingering */
    bool client_close; /* the client asked for the close (not an error's) */
    int status;
    /* The response being written: head, tail (Date, Connection, blank line), body. */
    struct iovec iov[3];
    int iov_i;
    char *dyn;  /* a generated response (server-status), freed after writing */
    struct sws_entry *ent; /* the cache entry being answered (a reference), or NULL */
    uint64_t file_off, file_left; /* the part of ent's file still to send */
    char tail[96];
    struct conn *wait_next; /* server.c's parked list */
};

/* ---- input buffers: a small per-thread cache ---------------------------------
 * A connection holds its input buffer only while a request is in flight, so
 * an idle keep-alive connection costs no buffer; but a malloc and free of
 * 14 KB per request made glibc trim and regrow the heap (brk and page faults
 * every ~17 requests, measured with strace -c). Each worker thread keeps up
 * to IB_CACHE freed buffers; a key destructor frees them when the thread
 * exits. */
#define IB_CACHE 16

struct ib_cache {
    unsigned n;
    bool registered; /* with ib_key, for the thread's exit */
    struct inbuf *b[IB_CACHE];
};

static _Thread_local struct ib_cache ib_cache;
static pthread_key_t ib_key;
static pthread_once_t ib_once = PTHREAD_ONCE_INIT;

static void ib_cache_free(void *p)
{
    struct ib_cache *k = p;
    while (k->n)
        free(k->b[--k->n]);
}

static void ib_key_init(void)
{
    pthread_key_create(&ib_key, ib_cache_free);
}

static struct inbuf *ib_get(void)
{
    struct inbuf *ib = ib_cache.n ? ib_cache.b[--ib_cache.n] : malloc(sizeof(*ib));
    if (ib) {
        ib->len = ib->scan = 0;
        ib->line_checked = false;
    }
    return ib;
}

static void ib_put(struct inbuf *ib)
{
    if (!ib)
        return;
    if (ib_cache.n == IB_CACHE) {
        free(ib);
        return;
    }
    if (!ib_cache.registered) { /* once per thread */
        pthread_once(&ib_once, ib_key_init);
        ib_cache.registered = pthread_setspecific(ib_key, &ib_cache) == 0;
    }
    ib_cache.b[ib_cache.n++] = ib;
}

static void on_read(int fd, unsigned ready, void *arg);
static void on_writable(int fd, unsigned ready, void *arg);
static void parse_request(void *arg);
static void check_in_cache(void *arg);
static void read_file(void *arg);
static void write_response(void *arg);
static void do_close(void *arg);
static void bad_request(void *arg);
static void not_found(void *arg);
static void on_timer(void *arg);
static void post_close(struct conn *c);

/* The paper's coloring: the descriptor's number. */
static mely_color_t fd_color(int fd)
{
    return (mely_color_t)((unsigned)fd % MELY_COLORS);
}

/* A key: fd (20 bits: the table has at most 2^20 slots), color (16), the
 * generation's low 27 bits, and bit 63 set so that no key is 0. A stale
 * key would have to meet a connection on the same descriptor and color
 * 2^27 connections later. */
#define KEY_FD_BITS 20
#define KEY_COLOR_SHIFT KEY_FD_BITS
#define KEY_GEN_SHIFT 36
#define KEY_GEN_MASK 0x7ffffffu
#define KEY_LIVE (1ull << 63)

uint64_t conn_key(const struct conn *c)
{
    return (uint64_t)(unsigned)c->fd | (uint64_t)(c->color & 0xffffu) << KEY_COLOR_SHIFT |
           (uint64_t)(c->gen & KEY_GEN_MASK) << KEY_GEN_SHIFT | KEY_LIVE;
}

mely_color_t conn_key_color(uint64_t key)
{
    return (mely_color_t)((key >> KEY_COLOR_SHIFT) & 0xffffu);
}

/* The live connection of key, or NULL. Only on the key's color: there no
 * other handler can free it between the check and the use. */
static struct conn *conn_of_key(struct sws *s, uint64_t key)
{
    unsigned fd = (unsigned)(key & ((1u << KEY_FD_BITS) - 1));
    if (fd >= s->nconns || atomic_load(&s->keys[fd]) != key)
        return NULL;
    return atomic_load(&s->conns[fd]);
}

mely_color_t conn_place(struct conn *c)
{
    struct sws *s = c->s;
    /* A full pool (more clients than colors) shares descriptor colors. */
    c->pooled = s->pool && mely_color_place(&s->rt, s->pool, &c->color) == 0;
    if (!c->pooled)
        c->color = fd_color(c->fd);
    return c->color;
}

void conn_unplace(struct conn *c)
{
    if (c->pooled)
        mely_color_release(&c->s->rt, c->s->pool, c->color);
    c->pooled = false;
}

int conn_fd(const struct conn *c)
{
    return c->fd;
}

struct conn **conn_wait_next(struct conn *c)
{
    return &c->wait_next;
}

struct conn *conn_new(struct sws *s, int fd, mely_color_t accept_color, bool status_ok)
{
    struct conn *c = calloc(1, sizeof(*c));
    if (c) {
        c->s = s;
        c->fd = fd;
        c->color = fd_color(fd); /* until conn_place */
        c->accept_color = accept_color;
        c->status_ok = status_ok;
        static atomic_uint gens;
        c->gen = atomic_fetch_add_explicit(&gens, 1, memory_order_relaxed);
    }
    return c;
}

static mely_to_t to(struct conn *c, enum sws_handler h)
{
    return (mely_to_t){ c->color, MELY_PRIO_DEFAULT, &c->s->h[h] };
}

/* Posts the connection's next handler; if the runtime cannot queue it (out
 * of memory), runs it now: we are on the connection's color anyway. */
static void next(struct conn *c, enum sws_handler h, mely_fn_t fn)
{
    if (mely_post_ex(&c->s->rt, c->color, MELY_PRIO_DEFAULT, &c->s->h[h], fn, c, 0) != 0)
        fn(c);
}

/* Posts Close as the connection's last event; nothing else acts meanwhile. */
static void post_close(struct conn *c)
{
    c->closing = true;
    next(c, H_CLOSE, do_close);
}

/* ---- reading: a read watch of the runtime, or (--epoll-handler) the
 * server's own epoll set, one-shot, whose Epoll handler posts ReadRequest */

static int watch_read(struct conn *c)
{
    if (c->s->epfd < 0)
        return mely_watch(&c->s->rt, c->fd, MELY_READ, to(c, H_READ), on_read, c, &c->rd);
    struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT, .data.u64 = conn_key(c) };
    if (epoll_ctl(c->s->epfd, c->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) != 0)
        return -errno;
    c->in_epoll = true;
    c->reading = true;
    return 0;
}

/* Whether reading is armed (or, with the Epoll handler, wanted). */
static bool reading(const struct conn *c)
{
    return c->rd != NULL || c->reading;
}

/* ReadRequest as posted by the Epoll handler (arg: the connection's key, on
 * its color): the connection is looked up, since it may have closed since
 * the readiness. */
static void epoll_read(void *arg)
{
    uint64_t key = (uint64_t)(uintptr_t)arg;
    struct sws *s = sws_current;
    struct conn *c = s ? conn_of_key(s, key) : NULL;
    if (!c || !c->started || !c->reading || c->closing)
        return;
    c->reading = false; /* one-shot: disarmed until armed again */
    on_read(c->fd, MELY_READ, c);
    /* on_read never frees c (it posts Close); arm again unless it stopped. */
    if (!c->closing && !c->stop && watch_read(c) != 0)
        post_close(c);
    c->stop = false;
}

/* The Epoll handler (color 0): takes what the server's epoll set reports and
 * posts a ReadRequest event on each connection's color. */
void sws_epoll(int epfd, unsigned ready, void *arg)
{
    (void)ready;
    struct sws *s = arg;
    struct epoll_event ev[256];
    int n = epoll_wait(epfd, ev, 256, 0);
    for (int i = 0; i < n; i++)
        mely_post_ex(&s->rt, conn_key_color(ev[i].data.u64), MELY_PRIO_DEFAULT, &s->h[H_READ],
                     epoll_read, (void *)(uintptr_t)ev[i].data.u64, 0);
}

/* ---- start ------------------------------------------------------------------ */

void conn_start(void *arg)
{
    struct conn *c = arg;
    struct sws *s = c->s;
    c->started = true;
    if (atomic_load(&s->draining)) {
        do_close(c);
        return;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->deadline = mely_now_ns() + s->timeout_ns;
    if (watch_read(c) != 0 ||
        mely_timer_after(&s->rt, s->timeout_ns, to(c, H_TIMER), on_timer, c, &c->timer) != 0) {
        c->timer = 0;
        do_close(c);
    }
}

/* ---- ReadRequest ---------------------------------------------------------- */

static void stop_reading(struct conn *c)
{
    if (c->rd) {
        mely_watch_remove(c->rd);
        c->rd = NULL;
    }
    if (c->s->epfd >= 0) {
        c->stop = true; /* epoll_read does not arm again */
        c->reading = false;
    }
}

static void on_read(int fd, unsigned ready, void *arg)
{
    (void)ready;
    struct conn *c = arg;
    if (c->closing)
        return;
    if (c->linger) { /* discard until the client closes */
        char junk[4096];
        for (int i = 0; i < 16; i++) { /* bounded; the watch brings us back */
            ssize_t n = read(fd, junk, sizeof(junk));
            if (n > 0 && ++c->linger_reads < LINGER_READS)
                continue;
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
            /* the client closed, failed, or sent more than a client that
             * reads its answers would (then the close may reset) */
            stop_reading(c);
            c->eof = true;
            post_close(c);
            return;
        }
        return;
    }
    if (!c->ib) {
        c->ib = ib_get();
        if (!c->ib) {
            if (!c->busy)
                post_close(c);
            return;
        }
    }
    struct inbuf *ib = c->ib;
    if (ib->len == IN_CAP) { /* busy with a response: resume when it is done */
        stop_reading(c);
        return;
    }
    ssize_t n = read(fd, ib->data + ib->len, IN_CAP - ib->len);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) { /* the client closed (or failed): answer what is complete */
        stop_reading(c);
        c->eof = true;
        if (n < 0)
            ib->len = 0; /* a reset: nobody will read answers */
        if (!c->busy) {
            c->busy = true;
            if (ib->len)
                next(c, H_PARSE, parse_request);
            else
                post_close(c);
        }
        return;
    }
    ib->len += (size_t)n;
    if (!c->busy) {
        c->busy = true;
        next(c, H_PARSE, parse_request);
    }
}

/* ---- ParseRequest -------------------------------------------------------- */

/* Nothing complete to answer: wait for bytes, or close at EOF. */
static void idle(struct conn *c)
{
    if (c->eof) {
        post_close(c);
        return;
    }
    c->busy = false;
    if (c->ib && c->ib->len == 0) {
        ib_put(c->ib);
        c->ib = NULL;
    }
    if (!reading(c) && watch_read(c) != 0)
        post_close(c);
}

/* Drops the empty lines before a request line (a few: http.h); false if
 * there were too many (a 400 is on its way). */
static bool skip_empty_lines(struct conn *c)
{
    struct inbuf *ib = c->ib;
    unsigned lines = c->empty_lines;
    long skip = http_skip_empty_lines(ib->data, ib->len, &lines);
    c->empty_lines = (unsigned char)lines; /* at most HTTP_MAX_EMPTY_LINES + 1 */
    if (skip < 0) {
        ib->req.minor = 1; /* read by respond(); nothing was parsed */
        c->status = 400;
        next(c, H_BAD, bad_request);
        return false;
    }
    if (skip) {
        memmove(ib->data, ib->data + skip, ib->len - (size_t)skip);
        ib->len -= (size_t)skip;
        ib->scan = 0;
        ib->line_checked = false;
    }
    return true;
}

/* The head is complete, the body is not, and the client expects 100-continue:
 * it waits for an answer (curl: 1 s) before it sends the body (RFC 9110
 * 10.1.1). SWS's answer never depends on the body, which it drops: a method
 * it does not serve gets its 405 at once, and the connection closes, since
 * the client may send the body or not (the lingering close drops it); GET
 * and HEAD get 100 Continue, then the body is read as usual. */
static void answer_expectation(struct conn *c)
{
    static const char k100[] = "HTTP/1.1 100 Continue\r\n\r\n";
    c->continued = true;
    if (c->ib->req.method == HTTP_OTHER) {
        c->status = 405;
        c->close_after = true;
        c->head_only = false;
        next(c, H_BAD, bad_request);
        return;
    }
    /* An interim response: WriteResponse sends it, then comes back here to
     * wait for the body; nothing is counted as a response. */
    c->iov[0] = (struct iovec){ (void *)k100, sizeof(k100) - 1 };
    c->iov[1] = c->iov[2] = (struct iovec){ NULL, 0 };
    c->iov_i = 0;
    next(c, H_WRITE, write_response);
}

static void parse_request(void *arg)
{
    struct conn *c = arg;
    struct inbuf *ib = c->ib;
    if (!skip_empty_lines(c))
        return;
    long r;
    if (http_head_end(ib->data, ib->len, &ib->scan) == 0) {
        if (ib->len < HTTP_MAX_HEAD) {
            /* A request line that can no longer be valid is refused at once:
             * checked while it is incomplete (at most ~2 KB, then 414) and once
             * complete, not at every byte of the headers (a client trickling
             * bytes would make that quadratic). */
            r = 0;
            if (!ib->line_checked && ib->len) {
                ib->line_checked = memchr(ib->data, '\n', ib->len) != NULL;
                r = http_parse(ib->data, ib->len, &ib->req);
            }
            if (r == 0) {
                idle(c);
                return;
            }
        } else {
            r = http_parse(ib->data, ib->len, &ib->req);
            if (r >= 0)
                r = -431;
        }
    } else {
        r = http_parse(ib->data, ib->len, &ib->req);
        if (r == 0) { /* the body is not all here */
            if (ib->req.expect_continue && !c->continued)
                answer_expectation(c);
            else
                idle(c);
            return;
        }
    }
    if (r < 0) {
        c->status = (int)-r;
        next(c, H_BAD, bad_request);
        return;
    }
    /* Consume the request now: the response does not need its bytes (the
     * parsed fields that CheckInCache reads are copies or point before). */
    c->head_only = ib->req.method == HTTP_HEAD;
    c->close_after = c->client_close = !ib->req.keep_alive;
    ib->req.head_len = (size_t)r; /* reused: bytes to drop once answered */
    if (ib->req.method == HTTP_OTHER) {
        c->status = 405;
        next(c, H_BAD, bad_request);
        return;
    }
    next(c, H_CACHE, check_in_cache);
}

/* Drops the answered request from the buffer (pipelined bytes move up). */
static void consume(struct conn *c)
{
    struct inbuf *ib = c->ib;
    size_t n = ib->req.head_len;
    if (n > ib->len)
        n = ib->len;
    memmove(ib->data, ib->data + n, ib->len - n);
    ib->len -= n;
    ib->scan = 0;
    ib->line_checked = false;
    c->continued = false;
    c->empty_lines = 0;
}

/* ---- responses --------------------------------------------------------------- */

/* The Date header of the second now: a per-thread copy, rebuilt when the
 * second changes (a coarse clock read per response). */
static size_t date_line(char *out)
{
    static _Thread_local time_t last = -1;
    static _Thread_local char line[48];
    static _Thread_local size_t len;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    if (ts.tv_sec != last) {
        struct tm tm;
        last = ts.tv_sec;
        gmtime_r(&last, &tm);
        len = strftime(line, sizeof(line), "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
    }
    memcpy(out, line, len);
    return len;
}

/* Sets the response: head (status line and fixed headers), the tail built
 * here, and body (skipped for HEAD). Decides keep-alive. */
static void respond(struct conn *c, const char *head, size_t head_len, const char *body,
                    size_t body_len, bool must_close)
{
    struct sws *s = c->s;
    bool http10 = c->ib && c->ib->req.minor == 0;
    if (must_close || atomic_load(&s->draining))
        c->close_after = true;
    if (must_close)
        c->client_close = false; /* an error's close: linger */
    size_t t = date_line(c->tail);
    static const char kclose[] = "Connection: close\r\n\r\n", kkeep[] = "Connection: keep-alive\r\n\r\n";
    const char *conn = c->close_after ? kclose : http10 ? kkeep : "\r\n";
    size_t cl = strlen(conn);
    memcpy(c->tail + t, conn, cl);
    c->iov[0] = (struct iovec){ (void *)head, head_len };
    c->iov[1] = (struct iovec){ c->tail, t + cl };
    c->iov[2] = (struct iovec){ (void *)body, c->head_only ? 0 : body_len };
    c->iov_i = 0;
    sws_count(s, c->status, head_len + t + cl + (c->head_only ? 0 : body_len) + c->file_left);
    next(c, H_WRITE, write_response);
}

static void respond_file(struct conn *c, const struct sws_file *f, bool must_close)
{
    respond(c, f->head, f->head_len, f->body, f->body_len, must_close);
}

/* Answers with a cache entry (a reference the connection keeps until the
 * response is out): 304 if If-None-Match matches, else 200 with the body
 * from memory or, for a streamed file, from its descriptor. A fresh entry
 * (an unsettled file's read, files.c) has no ETag and never answers 304, not
 * even to "*": the client's copy may be of a version that never was. */
static void respond_entry(struct conn *c, struct sws_entry *e)
{
    const struct http_req *q = &c->ib->req;
    /* before consume(): inm points into the request's bytes */
    bool match = q->inm && e->f.etag && http_etag_match(q->inm, q->inm_len, e->f.etag, e->f.etag_len);
    c->ent = e;
    consume(c);
    if (match) {
        c->status = 304;
        respond(c, e->f.head304, e->f.head304_len, NULL, 0, false);
        return;
    }
    c->status = 200;
    if (e->fd >= 0) {
        c->file_off = 0;
        c->file_left = c->head_only ? 0 : e->f.body_len;
        respond(c, e->f.head, e->f.head_len, NULL, 0, false);
        return;
    }
    respond_file(c, &e->f, false);
}

/* Drops the response's cache entry (its file part too). */
static void release_entry(struct conn *c)
{
    cache_put(c->ent);
    c->ent = NULL;
    c->file_left = 0;
}

/* ---- CheckInCache, NotFound, BadRequest ------------------------------------ */

static void check_in_cache(void *arg)
{
    struct conn *c = arg;
    struct http_req *q = &c->ib->req;
    const struct sws *s = c->s;
    if (c->status_ok && q->path_len == s->status_len &&
        memcmp(q->path, s->status_path, q->path_len) == 0) {
        bool json = q->query && q->query_len == 11 && memcmp(q->query, "format=json", 11) == 0;
        size_t len = 0;
        c->dyn = sws_status(c->s, json, &len);
        if (!c->dyn) {
            c->status = 500;
            next(c, H_BAD, bad_request);
            return;
        }
        c->status = 200;
        size_t head = strlen(c->dyn); /* the head ends at the first NUL */
        consume(c);
        respond(c, c->dyn, head, c->dyn + head + 1, len - head - 1, false);
        return;
    }
    bool check;
    struct sws_entry *e = cache_get(&c->s->cache, q->path, q->path_len, &check);
    if (!e || check) { /* a miss, or its check is due: the disk path */
        c->ent = e;
        next(c, H_FILE, read_file);
        return;
    }
    respond_entry(c, e);
}

/* ReadFile: opens the file of a miss, or checks the entry in c->ent. */
static void read_file(void *arg)
{
    struct conn *c = arg;
    const struct http_req *q = &c->ib->req;
    struct sws_entry *e;
    int st = cache_open(&c->s->cache, q->path, q->path_len, c->ent, &e);
    c->ent = NULL; /* cache_open took the reference over */
    if (st == 200) {
        respond_entry(c, e);
        return;
    }
    if (st == 404) {
        next(c, H_NOTFOUND, not_found);
        return;
    }
    size_t hl;
    if (st == 301 && (c->dyn = cache_redirect(q->path, q->path_len, &hl)) != NULL) {
        c->status = 301;
        consume(c);
        respond(c, c->dyn, hl, NULL, 0, false);
        return;
    }
    c->status = st == 301 ? 500 : st; /* 503: out of descriptors; 500 */
    next(c, H_BAD, bad_request);
}

static void not_found(void *arg)
{
    struct conn *c = arg;
    c->status = 404;
    consume(c);
    respond_file(c, cache_error(404), false);
}

/* Every refused request: 400, 405, 408, 413, 414, 417, 431, 500, 501, 505.
 * Only 405 (a complete, well-formed request) keeps the connection, unless
 * it was answered before its body (answer_expectation). */
static void bad_request(void *arg)
{
    struct conn *c = arg;
    bool keep = c->status == 405;
    if (keep)
        consume(c);
    else
        c->head_only = false;
    respond_file(c, cache_error(c->status), !keep);
}

/* ---- WriteResponse ----------------------------------------------------------------- */

/* Brings the deadline forward to d, and the timer with it: the timer was set
 * for the old deadline and only then looks at c->deadline. */
static void shorten_deadline(struct conn *c, uint64_t d)
{
    struct sws *s = c->s;
    c->deadline = d;
    /* Same color: on_timer is not running, and c->timer is 0 once it has
     * started, so the cancel succeeds (also when the timer expired and its
     * event is queued). Were it to fail, that on_timer would still read the
     * new deadline. */
    if (!c->timer || mely_timer_cancel(&s->rt, c->timer) != 0)
        return;
    if (mely_timer_at(&s->rt, d, to(c, H_TIMER), on_timer, c, &c->timer) != 0) {
        c->timer = 0;
        post_close(c);
    }
}

static void start_linger(struct conn *c)
{
    c->linger = true;
    shutdown(c->fd, SHUT_WR);
    ib_put(c->ib);
    c->ib = NULL;
    if (c->eof) {
        post_close(c);
        return;
    }
    uint64_t d = mely_now_ns() + (c->s->timeout_ns < LINGER_NS ? c->s->timeout_ns : LINGER_NS);
    if (d < c->deadline)
        shorten_deadline(c, d);
    if (!reading(c) && watch_read(c) != 0)
        post_close(c);
}

/* Writes what remains of the head, tail and in-memory body. Returns the
 * bytes written (> 0), or 0 (EAGAIN) or -1 (the client went away). A
 * streamed body follows: MSG_MORE lets the kernel put the head in one
 * segment with the first body bytes. */
static ssize_t write_iov(struct conn *c)
{
    for (;;) {
        ssize_t n;
        if (c->file_left) {
            struct msghdr mh = { .msg_iov = c->iov + c->iov_i, .msg_iovlen = (size_t)(3 - c->iov_i) };
            n = sendmsg(c->fd, &mh, MSG_MORE | MSG_NOSIGNAL);
        } else {
            n = writev(c->fd, c->iov + c->iov_i, 3 - c->iov_i);
        }
        if (n < 0 && errno == EINTR)
            continue;
        return n >= 0 ? (n ? n : -1) : errno == EAGAIN ? 0 : -1;
    }
}

/* Sends up to SEND_RUN bytes of the streamed body. Returns 1 when it is all
 * out, 0 to wait for the socket (EAGAIN), 2 to yield to other events, -1 if
 * the client went away or the file shrank below the Content-Length sent (the
 * connection must close: it cannot be honoured). */
static int send_file(struct conn *c)
{
    size_t run = 0;
    while (c->file_left) {
        if (run >= SEND_RUN)
            return 2;
        size_t want = c->file_left < SEND_RUN - run ? (size_t)c->file_left : SEND_RUN - run;
        off_t off = (off_t)c->file_off;
        ssize_t n = sendfile(c->fd, c->ent->fd, &off, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n <= 0)
            return -1;
        c->file_off += (uint64_t)n;
        c->file_left -= (uint64_t)n;
        run += (size_t)n;
    }
    return 1;
}

/* The response stopped on EAGAIN: wait for the socket. */
static void wait_writable(struct conn *c)
{
    struct sws *s = c->s;
    c->deadline = mely_now_ns() + s->timeout_ns; /* progress or not, per wait */
    if (!c->wr && mely_watch(&s->rt, c->fd, MELY_WRITE, to(c, H_WRITE), on_writable, c, &c->wr) != 0)
        post_close(c);
}

static void write_failed(struct conn *c)
{
    if (c->wr) {
        mely_watch_remove(c->wr);
        c->wr = NULL;
    }
    post_close(c);
}

static void write_response(void *arg)
{
    struct conn *c = arg;
    struct sws *s = c->s;
    for (;;) { /* bounded: every turn writes bytes or returns */
        while (c->iov_i < 3 && c->iov[c->iov_i].iov_len == 0)
            c->iov_i++;
        if (c->iov_i == 3)
            break;
        ssize_t n = write_iov(c);
        if (n == 0) {
            wait_writable(c);
            return;
        }
        if (n < 0) { /* the client went away */
            write_failed(c);
            return;
        }
        size_t left = (size_t)n;
        while (left > 0 && c->iov_i < 3) {
            struct iovec *v = &c->iov[c->iov_i];
            size_t k = left < v->iov_len ? left : v->iov_len;
            v->iov_base = (char *)v->iov_base + k;
            v->iov_len -= k;
            left -= k;
            if (v->iov_len == 0)
                c->iov_i++;
        }
    }
    switch (c->file_left ? send_file(c) : 1) {
    case 0:
        wait_writable(c);
        return;
    case 2: /* more to send: after the events queued meanwhile */
        if (c->wr) {
            mely_watch_remove(c->wr);
            c->wr = NULL;
        }
        next(c, H_WRITE, write_response);
        return;
    case -1:
        write_failed(c);
        return;
    }
    /* The response is out. */
    if (c->wr) {
        mely_watch_remove(c->wr);
        c->wr = NULL;
    }
    release_entry(c);
    free(c->dyn);
    c->dyn = NULL;
    c->served_one = true;
    if (c->close_after || atomic_load(&s->draining)) {
        if (c->client_close && (!c->ib || c->ib->len == 0))
            post_close(c); /* asked for, nothing unread: no lingering */
        else
            start_linger(c);
        return;
    }
    c->deadline = mely_now_ns() + s->timeout_ns;
    if (c->ib && c->ib->len > 0) {
        next(c, H_PARSE, parse_request); /* a pipelined request */
        return;
    }
    idle(c);
}

static void on_writable(int fd, unsigned ready, void *arg)
{
    (void)fd;
    (void)ready;
    write_response(arg);
}

/* ---- Close ------------------------------------------------------------------------ */

static void do_close(void *arg)
{
    struct conn *c = arg;
    struct sws *s = c->s;
    if (c->timer) {
        mely_timer_cancel(&s->rt, c->timer); /* same color: it is not running */
        c->timer = 0;
    }
    /* Forget the fd before closing it: the number may come back at once. */
    if ((unsigned)c->fd < s->nconns) {
        atomic_store(&s->keys[c->fd], 0);
        atomic_store(&s->conns[c->fd], NULL);
    }
    if (c->in_epoll)
        epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    mely_close(&s->rt, c->fd);
    ib_put(c->ib);
    free(c->dyn);
    cache_put(c->ent);
    atomic_fetch_add_explicit(&s->closed, 1, memory_order_relaxed);
    mely_color_t ac = c->accept_color;
    /* Last: the color may be placed for a new connection at once, whose
     * events then run after this one. */
    conn_unplace(c);
    free(c);
    if (mely_post_ex(&s->rt, ac, MELY_PRIO_DEFAULT, &s->h[H_DEC], sws_dec_client, s, 0) != 0)
        sws_dec_client(s); /* out of memory: count here (racy only then) */
}

/* ---- the timer: request and idle timeout, linger end ------------------------------ */

static void on_timer(void *arg)
{
    struct conn *c = arg;
    struct sws *s = c->s;
    c->timer = 0;
    if (c->closing)
        return; /* Close is queued */
    uint64_t now = mely_now_ns();
    bool chain = c->busy && !c->wr && !c->linger; /* an event of ours is queued */
    if (now < c->deadline || chain) {
        if (chain)
            c->deadline = now + s->timeout_ns;
        if (mely_timer_at(&s->rt, c->deadline, to(c, H_TIMER), on_timer, c, &c->timer) != 0) {
            c->timer = 0;
            if (!chain)
                do_close(c);
        }
        return;
    }
    if (c->linger || c->busy) { /* the linger ended, or the client stopped reading */
        if (c->busy && !c->linger)
            atomic_fetch_add_explicit(&s->timeouts, 1, memory_order_relaxed);
        do_close(c);
        return;
    }
    atomic_fetch_add_explicit(&s->timeouts, 1, memory_order_relaxed);
    if (c->served_one && (!c->ib || c->ib->len == 0)) {
        do_close(c); /* an idle keep-alive connection: closed quietly */
        return;
    }
    /* Nothing or part of a request within the timeout: 408. */
    c->busy = true;
    c->status = 408;
    c->head_only = false;
    c->eof = false;
    if (c->ib)
        c->ib->len = 0;
    respond_file(c, cache_error(408), true);
}

/* ---- drain (graceful shutdown) -------------------------------------------------- */

void conn_drain(void *key)
{
    struct sws *srv = sws_current;
    struct conn *c = srv ? conn_of_key(srv, (uint64_t)(uintptr_t)key) : NULL;
    if (!c || !c->started || c->busy || c->linger || c->closing || (c->ib && c->ib->len > 0))
        return; /* busy ones close after their response; partial ones time out */
    c->busy = true;
    do_close(c);
}

void conn_free_at_exit(struct conn *c)
{
    close(c->fd);
    cache_put(c->ent);
    free(c->ib);
    free(c->dyn);
    free(c);
}
