/* SPDX-License-Identifier: MIT */
/*
 * io/stream.c: streams, buffered colored connections on libevent's evbuffers
 * (the API and its rules: include/mely/stream.h; draining: io/drain.c).
 *
 * A stream is a read watch and, while output waits, a write watch on its fd,
 * both of the stream's color, plus two evbuffers. Everything that touches
 * the buffers, the watches and the state runs on the stream's color, so it
 * needs no lock: the watches' handlers, a timer, a "bell" event, and the end
 * of the worker's turn.
 *
 *   on_readable   reads once (one read() into space reserved in the input:
 *                 no copy, no FIONREAD; see fill() for how much), hands
 *                 the input to the read or line callback;
 *   on_writable   a connect that completed, or room for waiting output;
 *   on_bell       what other colors asked for: their writes (a lock-free
 *                 stack, below), a close, a half-close, a drain;
 *   on_timer      one lazy timer for every deadline: reads and writes only
 *                 note the time, and the timer, when it fires, re-arms
 *                 itself at the latest deadline or reports the timeout;
 *   on_closed     the closed callback, posted by the close.
 *
 * When bytes leave. None of these sends anything itself, and neither does a
 * write made from the stream's color: they mark the stream (touch) for the
 * end of the worker's turn (mely/sched/turnend.h: the batches between two polls,
 * 50 µs to 1 ms of them when busy, or until the worker goes idle), run on
 * the stream's color, where settle() runs once per stream: it sends the
 * output (one writev through evbuffer_write), arms or pauses the write
 * watch, runs the drained callback, finishes a close-after-flush, pauses or
 * resumes reading for the watermarks, and sets the timer. So a hundred
 * events of a turn that each write one message to a stream cost a hundred
 * appends and one writev, as in a libevent loop turn, and no byte waits
 * past the worker's next poll.
 *
 * Writes from other colors. A writer pushes a `struct send` (the bytes, or
 * a block reference) on the stream's stack (`sends`, one compare-and-swap)
 * and rings the bell only when the stack was empty: the bell is an ordinary
 * post to the stream's color, which takes the whole stack at once, reverses
 * it into push order and appends it. Each writer's writes keep their order,
 * and a close or half-close a writer asks for after its writes comes after
 * them, because on_bell takes the stack before it reads the requests. No
 * mutex is on the path, and under load one post carries many writes.
 *
 * Output bound. `inflight` counts the bytes of sends not yet appended (the
 * writer adds before pushing; the turn's end subtracts what arrived) and
 * `out_seen` the output's length at the last turn's end: together, what
 * mely_stream_queued() reports and every write checks against
 * ops.output_max, from any thread.
 *
 * Lifetime: `refs` counts the runtime's reference (from open to the end of
 * on_closed), one per bell in flight, and the user's. The last one frees the
 * stream, with any sends still stacked. A stream marked for the turn's end
 * may be closed, and its closed callback run, before the turn ends: then
 * on_closed leaves the runtime's reference for the turn's end to drop. A
 * timer needs no reference: only the
 * stream's color sets and cancels it, so a cancel from there either wins or
 * finds it run already. At shutdown, queued events are discarded uncalled,
 * so mely__streams_free() closes what is open, runs the closed callbacks not
 * yet run, and frees every stream of the runtime, referenced or not
 * (references end with the runtime).
 *
 * Who may call: the functions marked "own" only on the stream's color
 * (checked: MELY_EINVAL elsewhere); the others from any thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "mely/remote/colormap.h"
#include "mely/core/handle.h"
#include "mely/io/iostate.h"
#include "mely/io/listen.h"
#include "mely/io/streams.h"
#include "mely/io/watch.h"
#include "mely/core/park.h"
#include "mely/observe/runname.h"
#include "mely/runtime.h"
#include <mely/stream.h>

enum {
    READ_CHUNK = 16384,           /* the most one read takes */
    READ_FIRST = 2048,            /* what the first read reserves */
    MAX_LINE_DEFAULT = 8192,
    WRITE_HIGH_DEFAULT = 1 << 20, /* 1 MiB */
    OUTPUT_MAX_DEFAULT = 16 << 20, /* 16 MiB */
    COPY_MAX = 512,               /* sends and blocks up to this size are
                                     copied into the output, larger ones
                                     referenced (stream.h, "Blocks") */
    LINGER_READS = 16,            /* reads per readiness while lingering */
};

#define LINGER_NS 1000000000ull /* the longest lingering close */

enum state { S_OPEN, S_FLUSHING, S_CLOSED };

/* What other colors ask of the stream's color (`requests`). */
enum {
    REQ_CLOSE = 0x1,    /* close at once */
    REQ_FLUSH = 0x2,    /* close after flushing */
    REQ_DELIVER = 0x4,  /* hand buffered input to the callbacks again */
    REQ_DRAINED = 0x8,  /* run the drained callback again */
    REQ_START = 0x10,   /* arm the first watch (see start) */
    REQ_SHUTWR = 0x20,  /* half-close once the output is sent */
    REQ_CAP = 0x40,     /* a write from elsewhere hit the cap (CAP_CLOSE) */
    REQ_DRAIN = 0x80,   /* mely_drain began (drain.c) */
    REQ_QUIET = 0x100,  /* the drain saw the runtime quiet: close after flushing
                           unless the program handles the drain */
};

/* `shut`: why writes are refused, from any thread. */
enum { REFUSE_CLOSE = 0x1, REFUSE_WR = 0x2 };

/* A write from another color, on its way (the stack `sends`). */
struct send {
    struct send *next;
    size_t len;
    mely_block_t *block; /* the bytes are the block's, or follow */
    char data[];
};

struct mely_block {
    _Atomic uint32_t refs;
    size_t len;
    char data[];
};

/* mely_stream_relay's state, one per side (the relay section below). */
struct relay_pair {
    _Atomic unsigned refs; /* the sides not yet freed (a side may be freed
                              on any thread: its last unref) */
    bool finished;         /* done ran */
    mely_relay_fn done;
    void *arg;
};

struct relay {
    struct mely_stream *peer;
    struct relay_pair *pair;
    void (*event)(mely_stream_t *, unsigned, int, void *); /* the program's */
    bool eof;   /* this side's input ended */
    bool first; /* this side is mely_stream_relay's a */
};


struct mely_stream {
    struct mely__rt *rt;
    mely_to_t to;
    mely_stream_ops_t ops; /* settings resolved: no zero means "default" here */
    void *arg;

    /* The stream's color only. */
    int fd;
    enum state state;
    bool reading;      /* the program's wish (mely_stream_reading) */
    bool rd_armed;     /* the read watch is in epoll */
    bool wr_armed;     /* the write watch is in epoll */
    bool eof;          /* no more input: the peer closed, or input failed */
    bool failed;       /* a write failed: output is dropped */
    bool connecting;   /* mely_stream_connect's connect is in progress */
    bool write_paused; /* reading paused by write_high, until write_low */
    bool held;         /* input was held back from the callbacks (may_deliver) */
    bool closed_run;   /* the closed callback ran */
    bool marked;       /* on the worker's list for the turn's end */
    bool unref_at_end; /* on_closed ran while marked: the turn's end drops
                          the runtime's reference */
    bool draining;     /* the drain reached the stream (drain.c) */
    bool cap_hit;      /* a write hit the cap: close (MELY_STREAM_CAP_CLOSE) */
    bool shut_asked;   /* mely_stream_shutdown: SHUT_WR once the output is sent */
    bool shut_done;    /* the write side is shut down */
    bool lingering;    /* closing: reading and discarding until the peer's EOF */
    mely_watch_t *rd, *wr;
    struct evbuffer *in, *out;
    size_t taken;      /* the line readln handed out, drained at the next call */
    size_t read_want;  /* what the next read reserves (fill) */
    size_t arrived;    /* bytes of sends appended since the turn began */
    mely_timer_t timer;
    uint64_t timer_at;             /* its deadline, when timer != 0 */
    uint64_t last_read, last_write; /* progress, for the timeouts */
    uint64_t connect_by, linger_by; /* deadlines, when connecting or lingering */
    uint64_t last_moved;           /* a byte read or sent, for the idle timeout */
    struct mely__turnend node;     /* settle at the turn's end (touch) */
    struct relay *relay;           /* mely_stream_relay's, or NULL */

    /* Any thread, on a line of their own: writers of other colors touch them. */
    alignas(64) _Atomic uint32_t refs;
    atomic_bool bell;              /* an on_bell is queued */
    _Atomic unsigned requests;     /* REQ_* */
    _Atomic unsigned shut;         /* SHUT_*: writes are refused */
    _Atomic(struct send *) sends;  /* other colors' writes, newest first */
    _Atomic size_t inflight;       /* their bytes, until appended */
    _Atomic size_t out_seen;       /* the output's length at the last turn's end */
    _Atomic int fd_seen;           /* fd, for mely_stream_fd from any thread */
    _Atomic uint64_t held_tag;     /* the worker and turn holding the color
                                      for a claim (mely/sched/turnend.h) */
    struct mely_stream *prev, *next; /* rt->io->streams, under rt->io->stream_mu */
};

static mely_t handle(const struct mely_stream *s)
{
    return mely__handle_of(s->rt);
}

/* Whether the caller runs on the stream's color (of its runtime). */
static bool own(const struct mely_stream *s)
{
    const struct mely__worker *w = mely__self;
    return w && w->rt == s->rt && mely__current_color == (int)s->to.color;
}

/* A timeout of 0 or UINT64_MAX is none: the deadline of one that is set. */
static uint64_t deadline(uint64_t since, uint64_t timeout)
{
    if (!timeout || timeout == UINT64_MAX)
        return 0;
    return since > UINT64_MAX - timeout ? UINT64_MAX : since + timeout;
}

/* Stall warnings and traces name the run by the program's callback about to
 * run, not by this file's dispatchers (mely/observe/runname.h). Every call site runs
 * in one of the stream's own handlers, or at the turn's end (where no run is
 * named: it does nothing). */
static void name_run(const struct mely_stream *s, const void *fn)
{
    mely__name_run(s->to.handler, fn);
}

static bool timeouts_on(const struct mely_stream *s)
{
    return s->ops.read_timeout_ns || s->ops.write_timeout_ns || s->ops.idle_timeout_ns ||
           s->connecting || s->lingering;
}

/* ---- blocks ---------------------------------------------------------------- */

mely_block_t *mely_block_alloc(size_t len)
{
    if (len > SIZE_MAX - sizeof(struct mely_block) - 1)
        return NULL;
    struct mely_block *b = malloc(sizeof(*b) + len + 1); /* + 1: printf's 0 */
    if (!b)
        return NULL;
    atomic_init(&b->refs, 1);
    b->len = len;
    b->data[len] = 0;
    return b;
}

mely_block_t *mely_block_new(const void *data, size_t len)
{
    if (!data && len)
        return NULL;
    mely_block_t *b = mely_block_alloc(len);
    if (b && len)
        memcpy(b->data, data, len);
    return b;
}

mely_block_t *mely_block_printf(const char *fmt, ...)
{
    if (!fmt)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    mely_block_t *b = n < 0 ? NULL : mely_block_alloc((size_t)n);
    if (b) {
        va_start(ap, fmt);
        vsnprintf(b->data, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    return b;
}

void *mely_block_data(mely_block_t *b)
{
    return b ? b->data : NULL;
}

size_t mely_block_len(const mely_block_t *b)
{
    return b ? b->len : 0;
}

mely_block_t *mely_block_ref(mely_block_t *b)
{
    if (b)
        atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

void mely_block_unref(mely_block_t *b)
{
    if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        free(b);
}

static void block_cleanup(const void *data, size_t len, void *b)
{
    (void)data, (void)len;
    mely_block_unref(b);
}

/* Appends b's bytes to out: copied when small, else referenced. 0 or -1. */
static int add_block(struct evbuffer *out, mely_block_t *b)
{
    if (b->len <= COPY_MAX)
        return evbuffer_add(out, b->data, b->len);
    mely_block_ref(b);
    if (evbuffer_add_reference(out, b->data, b->len, block_cleanup, b) == 0)
        return 0;
    mely_block_unref(b);
    return -1;
}

static void send_free(struct send *x)
{
    if (x->block)
        mely_block_unref(x->block);
    free(x);
}

static void send_cleanup(const void *data, size_t len, void *x)
{
    (void)data, (void)len;
    free(x);
}

/* Appends a send to out and frees it (or hands it to out): 0 or -1. */
static int add_send(struct evbuffer *out, struct send *x)
{
    int r;
    if (x->block) {
        r = add_block(out, x->block);
        send_free(x);
    } else if (x->len <= COPY_MAX) {
        r = evbuffer_add(out, x->data, x->len);
        free(x);
    } else {
        r = evbuffer_add_reference(out, x->data, x->len, send_cleanup, x);
        if (r != 0)
            free(x);
    }
    return r;
}

/* ---- the registry, lifetime ---------------------------------------------------- */

static void registry_add(struct mely_stream *s)
{
    struct mely__rt *rt = s->rt;
    pthread_mutex_lock(&rt->io->stream_mu);
    s->next = rt->io->streams;
    if (s->next)
        s->next->prev = s;
    rt->io->streams = s;
    atomic_fetch_add(&rt->io->streams_open, 1);
    atomic_fetch_add(&rt->io->streams_alive, 1);
    pthread_mutex_unlock(&rt->io->stream_mu);
}

static void registry_del(struct mely_stream *s)
{
    struct mely__rt *rt = s->rt;
    if (s->prev)
        s->prev->next = s->next;
    else if (rt->io->streams == s)
        rt->io->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
}

static void relay_free(struct mely_stream *s);

static void stream_free(struct mely_stream *s)
{
    if (s->in)
        evbuffer_free(s->in);
    if (s->out)
        evbuffer_free(s->out);
    struct send *x = atomic_load(&s->sends);
    while (x) { /* bounded: the stack */
        struct send *next = x->next;
        send_free(x);
        x = next;
    }
    relay_free(s);
    free(s);
}

void mely_stream_ref(mely_stream_t *s)
{
    if (s)
        atomic_fetch_add(&s->refs, 1);
}

void mely_stream_unref(mely_stream_t *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    struct mely__rt *rt = s->rt;
    pthread_mutex_lock(&rt->io->stream_mu);
    bool dying = rt->io->streams_dead; /* mely__streams_free owns it now */
    if (!dying)
        registry_del(s);
    pthread_mutex_unlock(&rt->io->stream_mu);
    if (dying)
        return;
    stream_free(s);
    mely__stream_gone(rt);
}

/* ---- requests from other colors ---------------------------------------------- */

static void on_bell(void *arg);

/* Queues an on_bell unless one is queued; it holds a reference. The caller
 * holds one too (or runs on the stream's color, which the runtime's
 * reference covers). */
static int ring(struct mely_stream *s, unsigned req)
{
    if (req)
        atomic_fetch_or(&s->requests, req);
    if (atomic_exchange(&s->bell, true))
        return 0;
    mely_stream_ref(s);
    mely_t m = handle(s);
    int err = mely_post_ex(&m, s->to.color, s->to.prio, NULL, on_bell, s, 0);
    if (err) {
        atomic_store(&s->bell, false);
        mely_stream_unref(s);
    }
    return err;
}

/* ---- the turn's end ------------------------------------------------------------- */

static void settle(struct mely_stream *s);

/* What other threads read: the output's length, and the sends that arrived
 * taken off `inflight` (after: a reader may count them twice, never not at
 * all). */
static void publish(struct mely_stream *s)
{
    size_t out = s->state == S_CLOSED ? 0 : evbuffer_get_length(s->out);
    atomic_store_explicit(&s->out_seen, out, memory_order_relaxed);
    if (s->arrived) {
        atomic_fetch_sub_explicit(&s->inflight, s->arrived, memory_order_relaxed);
        s->arrived = 0;
    }
}

static void at_turn_end(struct mely__turnend *node)
{
    struct mely_stream *s = (struct mely_stream *)((char *)node - offsetof(struct mely_stream, node));
    /* Marked while it settles: what the callbacks settle runs (drained, the
     * cap's error) do to s is settled here, not queued again; an on_closed
     * run inside (out of memory) leaves the last reference to us. */
    settle(s);
    publish(s);
    s->marked = false;
    if (s->unref_at_end) {
        s->unref_at_end = false;
        mely_stream_unref(s); /* may free s: last */
    }
}

/* Own: has the turn's end settle s (once, however often it is touched). */
static void touch(struct mely_stream *s)
{
    if (s->marked || s->state == S_CLOSED)
        return;
    s->marked = true;
    mely__turnend_add(mely__self, &s->node);
}

/* Runs one of the program's callbacks, named after it for stall warnings
 * and traces. What it does to the stream is settled at the turn's end, as
 * every handler of the stream has its stream touched. */
#define CALLBACK(s, cb, ...)                                                                       \
    do {                                                                                           \
        name_run((s), (const void *)(s)->ops.cb);                                                  \
        (s)->ops.cb((s), __VA_ARGS__);                                                             \
    } while (0)

/* ---- the input ------------------------------------------------------------- */

/* Drains the line readln handed out last. */
static void drop_taken(struct mely_stream *s)
{
    if (s->taken) {
        evbuffer_drain(s->in, s->taken);
        s->taken = 0;
    }
}

/* The next read's size follows what the reads bring: it doubles when a read
 * fills it (up to READ_CHUNK), halves when one brings less than a quarter
 * (down to READ_FIRST / 2). A reservation is an evbuffer chain of that size,
 * which a write_buffer moves to the output and the send frees: a fixed 16
 * KiB for every 64-byte message made glibc trim its heap after the frees,
 * a TLB shootdown each (madvise, brk: 20% of the stream echo's time). */
static void adapt_read(struct mely_stream *s, size_t got)
{
    if (got >= s->read_want && s->read_want < READ_CHUNK)
        s->read_want *= 2;
    else if (got < s->read_want / 4 && s->read_want > READ_FIRST / 2)
        s->read_want /= 2;
}

/* One read into reserved input space: bytes read, 0 at end of input, or a
 * negative errno (-EAGAIN: nothing now). */
static ssize_t fill(struct mely_stream *s)
{
    size_t want = s->read_want;
    if (s->ops.read_high) {
        size_t have = evbuffer_get_length(s->in);
        if (have >= s->ops.read_high)
            return -EAGAIN;
        if (s->ops.read_high - have < want)
            want = s->ops.read_high - have;
    }
    struct evbuffer_iovec v[2];
    int nv = evbuffer_reserve_space(s->in, (ev_ssize_t)want, v, 2);
    if (nv <= 0)
        return -ENOMEM;
    struct iovec iov[2]; /* the reservation may be larger than asked */
    size_t room = want;
    for (int i = 0; i < nv; i++) {
        size_t n = v[i].iov_len < room ? v[i].iov_len : room;
        iov[i] = (struct iovec){ v[i].iov_base, n };
        room -= n;
    }
    ssize_t n;
    do
        n = nv == 1 ? read(s->fd, iov[0].iov_base, iov[0].iov_len) : readv(s->fd, iov, nv);
    while (n < 0 && errno == EINTR); /* bounded: a signal per pass */
    if (n <= 0) {
        int err = n < 0 ? -errno : 0;
        evbuffer_commit_space(s->in, v, 0);
        return err;
    }
    size_t left = (size_t)n;
    int used = 0;
    for (; used < nv && left > 0; used++) {
        if (v[used].iov_len > left)
            v[used].iov_len = left;
        left -= v[used].iov_len;
    }
    evbuffer_commit_space(s->in, v, used);
    adapt_read(s, (size_t)n);
    return n;
}

static int readln(struct mely_stream *s, char **line, size_t *len)
{
    drop_taken(s);
    *line = NULL;
    *len = 0;
    size_t eol = 0;
    struct evbuffer_ptr p = evbuffer_search_eol(s->in, NULL, &eol, EVBUFFER_EOL_CRLF);
    size_t max = s->ops.max_line;
    if (p.pos < 0) /* a CR may still wait for its LF: max + 1 bytes are fine */
        return max < SIZE_MAX && evbuffer_get_length(s->in) > max + 1 ? -EMSGSIZE : 0;
    if ((size_t)p.pos > max)
        return -EMSGSIZE;
    unsigned char *b = evbuffer_pullup(s->in, p.pos + (ev_ssize_t)eol);
    if (!b)
        return MELY_ENOMEM;
    b[p.pos] = 0; /* the CR or LF: drained with the line */
    *line = (char *)b;
    *len = (size_t)p.pos;
    s->taken = (size_t)p.pos + eol;
    return 1;
}

/* ---- closing --------------------------------------------------------------- */

static void on_closed(void *arg);
static void relay_finish(struct mely_stream *s, int err);

static void close_now(struct mely_stream *s)
{
    if (s->state == S_CLOSED)
        return;
    s->state = S_CLOSED;
    if (s->relay) /* one side gone: the relay is over (closes the other) */
        relay_finish(s, -ECANCELED);
    atomic_fetch_or(&s->shut, REFUSE_CLOSE);
    drop_taken(s);
    mely_t m = handle(s);
    if (s->fd >= 0)
        mely_close(&m, s->fd); /* removes both watches first: from the
                                  watches' color, none runs again */
    s->fd = -1;
    atomic_store(&s->fd_seen, -1);
    s->rd = s->wr = NULL;
    if (s->timer)
        mely_timer_cancel(&m, s->timer);
    s->timer = 0;
    publish(s); /* nothing queued any more */
    /* The runtime's reference goes with on_closed; it runs after the
     * callback that closed, never inside it. */
    if (mely_post_ex(&m, s->to.color, s->to.prio, NULL, on_closed, s, 0) != 0)
        on_closed(s); /* out of memory: run it now rather than never */
}

static void take_sends(struct mely_stream *s);

static void close_flush(struct mely_stream *s)
{
    if (s->state != S_OPEN)
        return;
    take_sends(s); /* writes made before the close go first */
    s->state = S_FLUSHING;
    atomic_fetch_or(&s->shut, REFUSE_CLOSE);
}

/* The output is sent: closes, or first lingers when the peer sent bytes
 * that were never read (stream.h, mely_stream_close). */
static void finish_close(struct mely_stream *s)
{
    int unread = 0;
    if (s->failed || s->eof || s->fd < 0 || ioctl(s->fd, FIONREAD, &unread) != 0 || unread <= 0 ||
        shutdown(s->fd, SHUT_WR) != 0) {
        close_now(s);
        return;
    }
    s->lingering = s->shut_done = true;
    s->linger_by = mely_now_ns() + LINGER_NS;
}

static void report(struct mely_stream *s, unsigned what, int err);

/* ---- the output ------------------------------------------------------------ */

static void on_writable(int fd, unsigned ready, void *arg);

static void write_watch(struct mely_stream *s, bool on)
{
    if (on == s->wr_armed || s->fd < 0)
        return;
    int err = 0;
    mely_t m = handle(s);
    if (on && !s->wr)
        err = mely_watch(&m, s->fd, MELY_WRITE, s->to, on_writable, s, &s->wr);
    else
        err = on ? mely_watch_resume(s->wr) : mely_watch_pause(s->wr);
    if (err) {
        s->failed = true;
        report(s, MELY_STREAM_ERROR, err);
        return;
    }
    s->wr_armed = on;
    if (on && s->ops.write_timeout_ns)
        s->last_write = mely_now_ns(); /* waiting starts now */
}

/* Sends what the socket takes: whether bytes moved. */
static bool flush(struct mely_stream *s)
{
    if (s->fd < 0 || s->connecting)
        return false;
    /* Nothing to send, or nothing will be: the write watch goes (a failed
     * socket stays "writable", and would call again and again). */
    if (s->failed || evbuffer_get_length(s->out) == 0) {
        write_watch(s, false);
        return false;
    }
    int n = evbuffer_write(s->out, s->fd);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
        s->failed = true;
        evbuffer_drain(s->out, evbuffer_get_length(s->out));
        report(s, MELY_STREAM_ERROR, -errno);
        return false;
    }
    struct mely__counters *ctr = &mely__self->ctr;
    mely__count(&ctr->stream_sends, 1);
    if (n > 0) {
        mely__count(&ctr->stream_bytes, (uint64_t)n);
        if (s->ops.write_timeout_ns || s->ops.idle_timeout_ns)
            s->last_write = s->last_moved = mely_now_ns();
    }
    write_watch(s, evbuffer_get_length(s->out) > 0);
    return n > 0;
}

/* The half-close asked for, once the output is out. */
static void shut_write(struct mely_stream *s)
{
    if (!s->shut_asked || s->shut_done || s->fd < 0 || s->connecting ||
        evbuffer_get_length(s->out) > 0)
        return;
    s->shut_done = true;
    if (shutdown(s->fd, SHUT_WR) != 0 && errno != ENOTCONN) {
        s->failed = true;
        report(s, MELY_STREAM_ERROR, -errno);
    }
}

/* ---- reading, timers, settling ----------------------------------------------- */

static bool output_full(struct mely_stream *s)
{
    size_t out = evbuffer_get_length(s->out);
    if (out > s->ops.write_high)
        s->write_paused = true;
    else if (out <= s->ops.write_low)
        s->write_paused = false;
    return s->write_paused;
}

/* Whether the callbacks may be handed input now. */
static bool may_deliver(struct mely_stream *s)
{
    /* A relay's sides hold back each other's reading instead (relay below). */
    return s->state == S_OPEN && s->reading && (s->relay || !output_full(s));
}

/* Whether the drain stopped reading from the socket: the program does not
 * handle it itself. */
static bool drain_stops(const struct mely_stream *s)
{
    return s->draining && !s->ops.drain && !s->relay;
}

static void read_watch(struct mely_stream *s)
{
    bool deliver = may_deliver(s);
    bool want = s->rd && !s->eof && !s->connecting &&
                (s->lingering ||
                 (deliver && !drain_stops(s) &&
                  (!s->ops.read_high || evbuffer_get_length(s->in) < s->ops.read_high)));
    /* Input held back before is handed out again once it may be, whether
     * or not the socket is read (a drain reads no more). */
    if (!deliver)
        s->held = true;
    else if (s->held && evbuffer_get_length(s->in) > 0) {
        s->held = false;
        ring(s, REQ_DELIVER);
    }
    if (want == s->rd_armed)
        return;
    int err = want ? mely_watch_resume(s->rd) : mely_watch_pause(s->rd);
    if (err) {
        s->eof = true;
        report(s, MELY_STREAM_ERROR, err);
        return;
    }
    s->rd_armed = want;
    if (want && s->ops.read_timeout_ns)
        s->last_read = mely_now_ns();
}

static void on_timer(void *arg);

static uint64_t earliest(uint64_t a, uint64_t b)
{
    return !a ? b : !b ? a : a < b ? a : b;
}

/* The earliest deadline that can fire now (0: none). */
static uint64_t next_deadline(const struct mely_stream *s)
{
    uint64_t at = s->connecting ? s->connect_by : 0;
    if (s->lingering)
        at = earliest(at, s->linger_by);
    if (s->rd_armed && !s->lingering)
        at = earliest(at, deadline(s->last_read, s->ops.read_timeout_ns));
    if (s->wr_armed)
        at = earliest(at, deadline(s->last_write, s->ops.write_timeout_ns));
    if (s->state == S_OPEN)
        at = earliest(at, deadline(s->last_moved, s->ops.idle_timeout_ns));
    return at;
}

/* Lazy: a timer armed for a later deadline stays (on_timer re-arms), one
 * for an earlier deadline is moved. */
static void set_timer(struct mely_stream *s)
{
    uint64_t at = next_deadline(s);
    if (!at || (s->timer && s->timer_at <= at))
        return;
    mely_t m = handle(s);
    if (s->timer)
        mely_timer_cancel(&m, s->timer);
    s->timer = 0;
    if (mely_timer_at(&m, at, s->to, on_timer, s, &s->timer) == 0)
        s->timer_at = at;
}

/* The drained callback, if the output is down to its low mark: whether it
 * ran. */
static bool run_drained(struct mely_stream *s)
{
    if (s->state == S_CLOSED || evbuffer_get_length(s->out) > s->ops.write_low)
        return false;
    if (!s->ops.drained)
        return false;
    CALLBACK(s, drained, s->arg);
    return true;
}

/* The output cap was hit with MELY_STREAM_CAP_CLOSE: tell, and close. */
static void cap_close(struct mely_stream *s)
{
    s->cap_hit = false;
    report(s, MELY_STREAM_ERROR, -ENOBUFS);
    close_now(s);
}

/* At the end of the turn: see the top of the file. */
static void settle(struct mely_stream *s)
{
    if (s->state != S_CLOSED && s->cap_hit)
        cap_close(s);
    if (s->state == S_CLOSED)
        return;
    bool sent = flush(s);
    if (s->state == S_FLUSHING && !s->lingering &&
        (s->failed || evbuffer_get_length(s->out) == 0))
        finish_close(s);
    if (s->state == S_CLOSED)
        return;
    shut_write(s);
    if (sent && run_drained(s)) {
        /* More written and sent at once: drained is due again, as a later
         * event, so that a producer cannot hold the color. */
        if (s->state != S_CLOSED && evbuffer_get_length(s->out) > 0 && flush(s) &&
            evbuffer_get_length(s->out) <= s->ops.write_low)
            ring(s, REQ_DRAINED);
    }
    if (s->state == S_CLOSED)
        return;
    read_watch(s);
    if (s->state != S_CLOSED && timeouts_on(s))
        set_timer(s);
}

/* ---- the callbacks' events ------------------------------------------------------ */

/* The event callback, or its default: close (after flushing when nothing
 * failed on the way out). */
static void report(struct mely_stream *s, unsigned what, int err)
{
    if (s->ops.event) {
        CALLBACK(s, event, what, err, s->arg);
        return;
    }
    if (what & MELY_STREAM_CONNECTED)
        return;
    if (what & MELY_STREAM_EOF || (what & MELY_STREAM_TIMEOUT && what & MELY_READ))
        close_flush(s);
    else
        close_now(s);
}

/* Hands the input to the line or read callback, while it may. */
static void deliver(struct mely_stream *s)
{
    if (s->ops.line) {
        char *line;
        size_t len;
        while (may_deliver(s)) { /* bounded: each pass takes a line */
            int r = readln(s, &line, &len);
            if (r == 0)
                break;
            if (r < 0) {
                s->eof = true; /* nothing more is read */
                report(s, MELY_STREAM_ERROR, r);
                break;
            }
            CALLBACK(s, line, line, len, s->arg);
        }
    } else if (s->ops.read && may_deliver(s) && evbuffer_get_length(s->in) > 0 &&
               evbuffer_get_length(s->in) >= s->ops.read_low) {
        CALLBACK(s, read, s->arg);
    }
    drop_taken(s);
    if (!may_deliver(s) && evbuffer_get_length(s->in) > 0)
        s->held = true; /* handed out again once it may be (read_watch) */
}

/* Lingering: reads and drops what the peer still sends, until its EOF. */
static void linger_read(struct mely_stream *s)
{
    char buf[4096];
    for (int i = 0; i < LINGER_READS; i++) { /* bounded; the watch brings the rest */
        ssize_t n = read(s->fd, buf, sizeof(buf));
        if (n > 0)
            continue;
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            close_now(s);
        return;
    }
}

static void on_readable(int fd, unsigned ready, void *arg)
{
    struct mely_stream *s = arg;
    (void)fd;
    (void)ready;
    if (s->state == S_CLOSED || !s->rd_armed)
        return; /* queued before a pause */
    touch(s);
    if (s->lingering) {
        linger_read(s);
        return;
    }
    if (s->state != S_OPEN)
        return;
    ssize_t n = fill(s);
    if (n > 0) {
        if (s->ops.read_timeout_ns || s->ops.idle_timeout_ns)
            s->last_read = s->last_moved = mely_now_ns();
        deliver(s);
    } else if (n == 0) {
        s->eof = true;
        deliver(s); /* a last line without its end stays in the input */
        if (s->state == S_OPEN)
            report(s, MELY_STREAM_EOF, 0);
    } else if (n != -EAGAIN) {
        s->eof = true;
        report(s, MELY_STREAM_ERROR, (int)n);
    }
}

static int connect_error(int fd)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    return -err;
}

static void connect_failed(struct mely_stream *s, int err)
{
    s->connecting = false;
    s->eof = s->failed = true; /* the turn's end pauses the connect's write watch */
    report(s, MELY_STREAM_ERROR, err);
}

static void connected(struct mely_stream *s)
{
    int err = connect_error(s->fd);
    mely_t m = handle(s);
    if (!err)
        err = mely_watch(&m, s->fd, MELY_READ, s->to, on_readable, s, &s->rd);
    if (err) {
        connect_failed(s, err);
        return;
    }
    s->connecting = false;
    s->rd_armed = true;
    if (s->ops.read_timeout_ns)
        s->last_read = mely_now_ns();
    report(s, MELY_STREAM_CONNECTED, 0);
}

static void on_writable(int fd, unsigned ready, void *arg)
{
    struct mely_stream *s = arg;
    (void)fd;
    (void)ready;
    if (s->state == S_CLOSED)
        return;
    touch(s); /* sends, at the turn's end */
    if (s->connecting)
        connected(s);
}

/* Arms the stream's first watch: reading, or (connecting) the write watch
 * that tells when the connection is up. Done on the stream's color so that
 * no handler of the watch can run before its handle is stored. */
static void start(struct mely_stream *s)
{
    mely_t m = handle(s);
    int err = s->connecting
                  ? mely_watch(&m, s->fd, MELY_WRITE, s->to, on_writable, s, &s->wr)
                  : mely_watch(&m, s->fd, MELY_READ, s->to, on_readable, s, &s->rd);
    if (err) {
        s->eof = s->failed = true;
        report(s, MELY_STREAM_ERROR, err);
        return;
    }
    s->rd_armed = !s->connecting;
    s->wr_armed = s->connecting;
    uint64_t now = timeouts_on(s) ? mely_now_ns() : 0;
    s->last_read = s->last_write = s->last_moved = now;
    if (s->connecting)
        s->connect_by = deadline(now, s->ops.connect_timeout_ns);
}

static void unstage(struct mely_stream *s);

/* Appends the writes other colors stacked, in the order they were made
 * (this worker's staged ones for s first joining them). */
static void take_sends(struct mely_stream *s)
{
    unstage(s);
    /* A load first: most of the time nothing is stacked, and an exchange
     * would take the line from the writers for nothing. */
    if (!atomic_load_explicit(&s->sends, memory_order_relaxed))
        return;
    struct send *x = atomic_exchange_explicit(&s->sends, NULL, memory_order_acquire);
    if (!x)
        return;
    struct send *list = NULL;
    while (x) { /* bounded: the stack; newest first, so reversed */
        struct send *next = x->next;
        x->next = list;
        list = x;
        x = next;
    }
    /* Writes that raced a close or a half-close already done are dropped, as
     * if made after it (stream.h). */
    bool take = s->state != S_CLOSED && !s->failed && !s->shut_done, oom = false;
    size_t bytes = 0;
    for (x = list; x;) { /* bounded: the list */
        struct send *next = x->next;
        bytes += x->len;
        if (!take || oom)
            send_free(x);
        else if (add_send(s->out, x) != 0)
            oom = true; /* out of memory: what follows would leave a gap */
        x = next;
    }
    if (s->state == S_CLOSED) {
        atomic_fetch_sub_explicit(&s->inflight, bytes, memory_order_relaxed);
        return;
    }
    s->arrived += bytes;
    if (oom) {
        s->failed = true;
        evbuffer_drain(s->out, evbuffer_get_length(s->out));
        report(s, MELY_STREAM_ERROR, MELY_ENOMEM);
    }
}

static void start_drain(struct mely_stream *s)
{
    if (s->draining)
        return;
    s->draining = true;
    if (s->ops.drain && s->state == S_OPEN)
        CALLBACK(s, drain, s->arg);
}

static void on_bell(void *arg)
{
    struct mely_stream *s = arg;
    atomic_store(&s->bell, false); /* before reading the requests: see ring() */
    unsigned req = atomic_exchange(&s->requests, 0);
    if (s->state == S_CLOSED) {
        take_sends(s); /* dropped, and their bytes uncounted */
    } else {
        touch(s);
        take_sends(s);
        if (req & REQ_START)
            start(s);
        if (req & REQ_CAP)
            s->cap_hit = true;
        if (req & REQ_SHUTWR)
            s->shut_asked = true;
        if (req & REQ_DRAIN)
            start_drain(s);
        if (req & REQ_CLOSE)
            close_now(s);
        else if (req & REQ_FLUSH || (req & REQ_QUIET && drain_stops(s)))
            close_flush(s);
        if (req & REQ_DELIVER)
            deliver(s);
        if (req & REQ_DRAINED)
            run_drained(s);
    }
    mely_stream_unref(s);
}

static void on_timer(void *arg)
{
    struct mely_stream *s = arg;
    s->timer = 0;
    if (s->state == S_CLOSED)
        return;
    touch(s);
    uint64_t now = mely_now_ns();
    if (s->lingering && now >= s->linger_by)
        close_now(s);
    if (s->state != S_CLOSED && s->connecting && s->connect_by && now >= s->connect_by)
        connect_failed(s, -ETIMEDOUT);
    uint64_t rd = deadline(s->last_read, s->ops.read_timeout_ns);
    if (s->state != S_CLOSED && s->rd_armed && !s->lingering && rd && now >= rd) {
        s->last_read = now;
        report(s, MELY_STREAM_TIMEOUT | MELY_READ, 0);
    }
    uint64_t wr = deadline(s->last_write, s->ops.write_timeout_ns);
    if (s->state != S_CLOSED && s->wr_armed && wr && now >= wr) {
        s->last_write = now;
        if (s->state == S_FLUSHING) /* the close's own limit */
            close_now(s);
        else
            report(s, MELY_STREAM_TIMEOUT | MELY_WRITE, 0);
    }
    uint64_t idle = deadline(s->last_moved, s->ops.idle_timeout_ns);
    if (s->state == S_OPEN && idle && now >= idle) {
        s->last_moved = now;
        report(s, MELY_STREAM_TIMEOUT | MELY_READ | MELY_WRITE, 0);
    }
}

static void on_closed(void *arg)
{
    struct mely_stream *s = arg;
    struct mely__rt *rt = s->rt;
    if (!s->closed_run) {
        s->closed_run = true;
        if (s->ops.closed)
            CALLBACK(s, closed, s->arg);
        mely__stream_closed(rt);
    }
    if (s->relay && s->relay->peer) { /* the reference mely_stream_relay took */
        mely_stream_unref(s->relay->peer);
        s->relay->peer = NULL;
    }
    if (s->marked)
        s->unref_at_end = true; /* the turn's end still runs s */
    else
        mely_stream_unref(s);
}

/* ---- opening ---------------------------------------------------------------- */

static int resolve_ops(mely_stream_ops_t *o, const mely_stream_ops_t *in)
{
    if (!in || (in->read && in->line) || (in->flags & ~MELY_STREAM_CAP_CLOSE))
        return MELY_EINVAL;
    *o = *in;
    if (!o->max_line)
        o->max_line = MAX_LINE_DEFAULT;
    if (!o->write_high)
        o->write_high = WRITE_HIGH_DEFAULT;
    if (!o->output_max)
        o->output_max = OUTPUT_MAX_DEFAULT;
    if ((o->read_high && o->read_low > o->read_high) || o->write_low > o->write_high)
        return MELY_EINVAL;
    return 0;
}

static struct mely_stream *stream_new(struct mely__rt *rt, int fd, mely_to_t to,
                                      const mely_stream_ops_t *ops, void *arg)
{
    size_t size = (sizeof(struct mely_stream) + 63) / 64 * 64; /* aligned_alloc's rule */
    struct mely_stream *s = aligned_alloc(64, size);
    if (!s)
        return NULL;
    memset(s, 0, size);
    s->rt = rt;
    s->to = to;
    s->ops = *ops;
    s->arg = arg;
    s->fd = fd;
    atomic_init(&s->fd_seen, fd);
    s->reading = true;
    s->read_want = READ_FIRST;
    atomic_init(&s->refs, 1);
    s->node.run = at_turn_end;
    s->in = evbuffer_new();
    s->out = evbuffer_new();
    if (!s->in || !s->out) {
        stream_free(s);
        return NULL;
    }
    return s;
}

/* Registers s and has its color start it. On failure s is freed and its fd
 * closed. */
static int stream_start(struct mely_stream *s, mely_stream_t **out)
{
    registry_add(s);
    /* A drain in progress takes newcomers through its steps from the start
     * (mely_drain in stream.h). */
    unsigned req = REQ_START;
    if (mely__drain_active(s->rt))
        req |= REQ_DRAIN | (mely__drain_quiet(s->rt) ? REQ_QUIET : 0);
    /* *out before the first event is posted: a program that keeps it where
     * its callbacks look (&conn->s) finds it there from the first one,
     * which may run on another worker before this call returns. */
    if (out)
        *out = s;
    int err = ring(s, req);
    if (err) {
        if (out)
            *out = NULL;
        pthread_mutex_lock(&s->rt->io->stream_mu);
        registry_del(s);
        pthread_mutex_unlock(&s->rt->io->stream_mu);
        struct mely__rt *rt = s->rt;
        close(s->fd);
        stream_free(s);
        mely__stream_closed(rt);
        mely__stream_gone(rt);
        return err;
    }
    return 0;
}

/* What mely_watch would refuse, said at once (the watch itself is set
 * later, on the stream's color); and non-blocking. A TCP socket gets
 * TCP_NODELAY: the stream sends once per turn already, and Nagle's
 * algorithm would hold each of those sends until the previous one is
 * acknowledged (a delayed ACK: up to 40 ms; a broker under load parked
 * 64% of the time waiting so). Not a socket, or not TCP: left alone. */
static int pollable(int fd)
{
    struct stat st;
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fstat(fd, &st) != 0)
        return -errno;
    if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
        return -EPERM;
    if (S_ISSOCK(st.st_mode)) {
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    if (flags & O_NONBLOCK) /* accept4(SOCK_NONBLOCK)'s: a system call saved */
        return 0;
    return fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 ? 0 : -errno;
}

static int open_in(struct mely__rt *rt, int fd, bool connecting, mely_to_t to,
                   const mely_stream_ops_t *ops, void *arg, mely_stream_t **out)
{
    mely_stream_ops_t o;
    int err = resolve_ops(&o, ops);
    if (!err)
        err = mely__to_check(rt, &to);
    if (!err)
        err = pollable(fd);
    struct mely_stream *s = err ? NULL : stream_new(rt, fd, to, &o, arg);
    if (!s) {
        close(fd);
        return err ? err : MELY_ENOMEM;
    }
    s->connecting = connecting;
    return stream_start(s, out);
}

int mely_stream_open(mely_t *m, int fd, mely_to_t to, const mely_stream_ops_t *ops, void *arg,
                     mely_stream_t **out)
{
    if (fd < 0)
        return MELY_EINVAL;
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    if (!rt) {
        close(fd);
        return MELY_ESHUTDOWN;
    }
    return mely__handle_done(self, open_in(rt, fd, false, to, ops, arg, out));
}

static int connect_in(struct mely__rt *rt, const char *host, unsigned port, mely_to_t to,
                      const mely_stream_ops_t *ops, void *arg, mely_stream_t **out)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (!host || port > 65535 || mely__parse_addr(host, port, &ss, &len) != 0)
        return MELY_EINVAL;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&ss, len) != 0 && errno != EINPROGRESS) {
        int err = -errno;
        close(fd);
        return err;
    }
    return open_in(rt, fd, true, to, ops, arg, out);
}

int mely_stream_connect(mely_t *m, const char *host, unsigned port, mely_to_t to,
                        const mely_stream_ops_t *ops, void *arg, mely_stream_t **out)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, connect_in(rt, host, port, to, ops, arg, out))
              : MELY_ESHUTDOWN;
}

/* ---- writing ---------------------------------------------------------------- */

/* Whether writes are refused (own color: the state says more). */
static bool refused(const struct mely_stream *s)
{
    return atomic_load_explicit(&((struct mely_stream *)s)->shut, memory_order_acquire) != 0;
}

static bool own_refused(const struct mely_stream *s)
{
    return s->state != S_OPEN || s->failed || s->shut_asked || refused(s);
}

/* Bytes queued, as the cap counts them: exact on the stream's color (the
 * sends that arrived this turn are in the output, and still in inflight
 * until its end). */
static size_t queued_own(const struct mely_stream *s)
{
    return evbuffer_get_length(s->out) +
           (atomic_load_explicit(&((struct mely_stream *)s)->inflight, memory_order_relaxed) -
            s->arrived);
}

/* A write of len bytes on top of q queued: over the cap? */
static bool over_cap(const struct mely_stream *s, size_t q, size_t len)
{
    return len > s->ops.output_max || q > s->ops.output_max - len;
}

/* The cap refused a write: -ENOBUFS, and the stream closes at the turn's
 * end with MELY_STREAM_CAP_CLOSE. `here`: the caller acts on the stream's
 * color (its own, or held: claim_here), where the flag is set directly. */
static int cap_refuse(struct mely_stream *s, bool here)
{
    if (s->ops.flags & MELY_STREAM_CAP_CLOSE) {
        if (here) {
            s->cap_hit = true;
            touch(s);
        } else {
            ring(s, REQ_CAP);
        }
    }
    return -ENOBUFS;
}

/* Whether the calling worker owns the stream's color: then it holds the
 * color to the end of its turn (mely/sched/turnend.h) and writes without a hop,
 * as if it ran on it. */
static bool claim_here(struct mely_stream *s)
{
    struct mely__worker *w = mely__self;
    if (!w || w->rt != s->rt)
        return false;
    if (mely__turnend_held(&s->held_tag, w->index, w->turn_seq))
        return true; /* claimed earlier in this turn: still held */
    return mely__turnend_claim(w, s->to.color, &s->marked, &s->node, &s->shut, &s->held_tag);
}

/* On the stream's color, or holding it: appends with add() (0 or -1, as
 * libevent's) len bytes. */
static int write_here(struct mely_stream *s, size_t len, int (*add)(struct evbuffer *, const void *),
                      const void *ctx)
{
    if (own_refused(s))
        return -EPIPE;
    if (over_cap(s, queued_own(s), len))
        return cap_refuse(s, true);
    if (add(s->out, ctx) != 0)
        return MELY_ENOMEM;
    touch(s); /* held for a claim: queued already, touch does nothing */
    return 0;
}

/* Pushes x (its bytes counted in inflight) on the stream's stack, and rings
 * the bell if the stack was empty. A failed ring (out of memory) leaves the
 * write stacked for the next bell, which any later write or request rings. */
static void push_send(struct mely_stream *s, struct send *x)
{
    struct send *head = atomic_load_explicit(&s->sends, memory_order_relaxed);
    do /* bounded: retried only when another writer pushed in between */
        x->next = head;
    while (!atomic_compare_exchange_weak_explicit(&s->sends, &head, x, memory_order_release,
                                                  memory_order_relaxed));
    if (!head)
        (void)ring(s, 0);
}

/* Another worker owns the color: stacks x for the stream's color (x is the
 * stream's, or freed, from here on). */
static int write_other(struct mely_stream *s, struct send *x)
{
    struct mely__worker *self;
    mely_t m = handle(s);
    struct mely__rt *rt = mely__handle_enter(&m, &self);
    int err = 0;
    if (!rt || rt->io->streams_dead || refused(s)) {
        err = -EPIPE;
    } else {
        size_t q = atomic_fetch_add_explicit(&s->inflight, x->len, memory_order_relaxed);
        if (over_cap(s, q + atomic_load_explicit(&s->out_seen, memory_order_relaxed), x->len)) {
            atomic_fetch_sub_explicit(&s->inflight, x->len, memory_order_relaxed);
            err = cap_refuse(s, false);
        }
    }
    if (err) {
        send_free(x);
        return rt ? mely__handle_done(self, err) : err;
    }
    push_send(s, x);
    return mely__handle_done(self, 0);
}

static void stage_send(struct mely__worker *w, struct mely_stream *s);
static int stage_write(struct mely__worker *w, struct mely_stream *s, size_t len,
                       void (*copy)(char *dst, size_t len, const void *ctx), const void *ctx);

/* What this worker staged for s goes first (see "Staging" below). */
static void unstage(struct mely_stream *s)
{
    struct mely__worker *w = mely__self;
    if (w && w->io->stage && w->rt == s->rt)
        stage_send(w, s);
}

/* A write, from wherever it comes: appended at once on the stream's color
 * or a color held here (earlier writes of this thread first); staged on a
 * worker (copy() puts the len bytes in place; NULL: not stageable); else
 * made into a send by make() and stacked. */
static int write_any(struct mely_stream *s, size_t len, int (*add)(struct evbuffer *, const void *),
                     const void *ctx, struct send *(*make)(const void *ctx, int *err),
                     void (*copy)(char *dst, size_t len, const void *ctx))
{
    if (own(s)) {
        take_sends(s); /* this thread's staged writes, if the color came here */
        return write_here(s, len, add, ctx);
    }
    if (refused(s))
        return -EPIPE;
    if (claim_here(s)) {
        take_sends(s); /* this thread's earlier writes may be there: they go first */
        return write_here(s, len, add, ctx);
    }
    struct mely__worker *w = mely__self_in(s->rt);
    if (w && copy)
        return stage_write(w, s, len, copy, ctx);
    if (w)
        unstage(s);
    int err = MELY_ENOMEM;
    struct send *x = make(ctx, &err);
    return x ? write_other(s, x) : err;
}

static struct send *send_bytes(const void *data, size_t len)
{
    if (len > SIZE_MAX - sizeof(struct send))
        return NULL;
    struct send *x = malloc(sizeof(*x) + len);
    if (x) {
        *x = (struct send){ .len = len };
        if (len)
            memcpy(x->data, data, len);
    }
    return x;
}

struct bytes {
    const void *data;
    size_t len;
};

static int add_bytes(struct evbuffer *b, const void *ctx)
{
    const struct bytes *x = ctx;
    return evbuffer_add(b, x->data, x->len);
}

static struct send *make_bytes(const void *ctx, int *err)
{
    const struct bytes *x = ctx;
    (void)err;
    return send_bytes(x->data, x->len);
}

static void copy_bytes(char *dst, size_t len, const void *ctx)
{
    const struct bytes *x = ctx;
    if (len)
        memcpy(dst, x->data, len);
}

int mely_stream_write(mely_stream_t *s, const void *data, size_t len)
{
    if (!s || (!data && len))
        return MELY_EINVAL;
    struct bytes x = { data, len };
    return write_any(s, len, add_bytes, &x, make_bytes, copy_bytes);
}

static int add_block_ctx(struct evbuffer *b, const void *ctx)
{
    return add_block(b, (mely_block_t *)ctx);
}

/* A small block travels as a copy: the stream copies it into the output
 * anyway, and the block's count is a line every subscriber's worker would
 * write. */
static struct send *make_block(const void *ctx, int *err)
{
    mely_block_t *b = (mely_block_t *)ctx;
    (void)err;
    if (b->len <= COPY_MAX)
        return send_bytes(b->data, b->len);
    struct send *x = malloc(sizeof(*x));
    if (x)
        *x = (struct send){ .len = b->len, .block = mely_block_ref(b) };
    return x;
}

static void copy_block(char *dst, size_t len, const void *ctx)
{
    if (len)
        memcpy(dst, ((const mely_block_t *)ctx)->data, len);
}

int mely_stream_write_block(mely_stream_t *s, mely_block_t *b)
{
    if (!s || !b)
        return MELY_EINVAL;
    /* A large block is referenced, never copied: not staged. */
    return write_any(s, b->len, add_block_ctx, b, make_block, b->len <= COPY_MAX ? copy_block : NULL);
}

struct format {
    const char *fmt;
    va_list *ap;
};

static int add_format(struct evbuffer *b, const void *ctx)
{
    const struct format *f = ctx;
    va_list ap;
    va_copy(ap, *f->ap);
    int n = evbuffer_add_vprintf(b, f->fmt, ap);
    va_end(ap);
    return n < 0 ? -1 : 0;
}

/* The formatted string as a send, or NULL (*err says why). */
static struct send *make_format(const void *ctx, int *err)
{
    const struct format *f = ctx;
    va_list copy;
    va_copy(copy, *f->ap);
    int n = vsnprintf(NULL, 0, f->fmt, copy);
    va_end(copy);
    *err = n < 0 ? MELY_EINVAL : MELY_ENOMEM;
    struct send *x = n < 0 ? NULL : malloc(sizeof(*x) + (size_t)n + 1);
    if (x) {
        *x = (struct send){ .len = (size_t)n };
        va_copy(copy, *f->ap);
        vsnprintf(x->data, (size_t)n + 1, f->fmt, copy);
        va_end(copy);
    }
    return x;
}

static void copy_format(char *dst, size_t len, const void *ctx)
{
    const struct format *f = ctx;
    va_list copy;
    va_copy(copy, *f->ap);
    vsnprintf(dst, len + 1, f->fmt, copy); /* staging leaves room for the 0 */
    va_end(copy);
}

/* On the stream's color the string is formatted into the output at once,
 * and the cap checked before: it may overshoot by the string's length.
 * Elsewhere it is measured first. */
int mely_stream_vprintf(mely_stream_t *s, const char *fmt, va_list ap)
{
    if (!s || !fmt)
        return MELY_EINVAL;
    va_list copy;
    va_copy(copy, ap);
    struct format f = { fmt, &copy };
    size_t len = 0;
    if (!own(s)) {
        va_list measure;
        va_copy(measure, ap);
        int n = vsnprintf(NULL, 0, fmt, measure);
        va_end(measure);
        if (n < 0) {
            va_end(copy);
            return MELY_EINVAL;
        }
        len = (size_t)n;
    }
    int err = write_any(s, len, add_format, &f, make_format, copy_format);
    va_end(copy);
    return err;
}

int mely_stream_printf(mely_stream_t *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int err = mely_stream_vprintf(s, fmt, ap);
    va_end(ap);
    return err;
}

static int add_buffer(struct evbuffer *out, const void *buf)
{
    return evbuffer_add_buffer(out, (struct evbuffer *)buf);
}

int mely_stream_write_buffer(mely_stream_t *s, struct evbuffer *buf)
{
    if (!s || !buf || !own(s))
        return MELY_EINVAL;
    if (buf == s->in)
        drop_taken(s);
    return write_here(s, evbuffer_get_length(buf), add_buffer, buf);
}

/* ---- the stream's color's own calls -------------------------------------------- */

int mely_stream_readln(mely_stream_t *s, char **line, size_t *len)
{
    if (!s || !line || !len || !own(s))
        return MELY_EINVAL;
    return readln(s, line, len);
}

struct evbuffer *mely_stream_input(mely_stream_t *s)
{
    if (!s || !own(s))
        return NULL;
    drop_taken(s);
    touch(s); /* what the caller drains is seen at the turn's end (reading may resume) */
    return s->in;
}

struct evbuffer *mely_stream_output(mely_stream_t *s)
{
    if (!s || !own(s))
        return NULL;
    touch(s); /* what the caller appends is sent at the turn's end */
    return s->out;
}

int mely_stream_watermark(mely_stream_t *s, unsigned what, size_t low, size_t high)
{
    if (!s || !own(s) || (what != MELY_READ && what != MELY_WRITE))
        return MELY_EINVAL;
    mely_stream_ops_t o = s->ops;
    if (what == MELY_READ) {
        o.read_low = low;
        o.read_high = high;
    } else {
        o.write_low = low;
        o.write_high = high;
    }
    int err = resolve_ops(&o, &o);
    if (err)
        return err;
    s->ops = o;
    touch(s);
    return 0;
}

int mely_stream_max_line(mely_stream_t *s, size_t max)
{
    if (!s || !own(s))
        return MELY_EINVAL;
    s->ops.max_line = max ? max : MAX_LINE_DEFAULT;
    return 0;
}

int mely_stream_timeouts(mely_stream_t *s, uint64_t read_ns, uint64_t write_ns)
{
    if (!s || !own(s))
        return MELY_EINVAL;
    uint64_t now = mely_now_ns();
    s->ops.read_timeout_ns = read_ns;
    s->ops.write_timeout_ns = write_ns;
    s->last_read = s->last_write = s->last_moved = now; /* periods start now */
    touch(s);
    return 0;
}

int mely_stream_reading(mely_stream_t *s, int on)
{
    if (!s || !own(s))
        return MELY_EINVAL;
    s->reading = on != 0;
    touch(s);
    return 0;
}

/* ---- closing and half-closing, from anywhere -------------------------------------- */

/* From another color: marks writes refused (`bit`) and queues req behind
 * this thread's writes. */
static int ask(struct mely_stream *s, unsigned bit, unsigned req)
{
    struct mely__worker *self;
    mely_t m = handle(s);
    struct mely__rt *rt = mely__handle_enter(&m, &self);
    if (!rt)
        return 0;
    if (rt->io->streams_dead)
        return mely__handle_done(self, 0);
    unstage(s); /* this thread's writes before the request */
    atomic_fetch_or(&s->shut, bit);
    return mely__handle_done(self, ring(s, req));
}

int mely_stream_close(mely_stream_t *s, unsigned flags)
{
    if (!s || (flags & ~MELY_STREAM_FLUSH))
        return MELY_EINVAL;
    if (!own(s))
        return ask(s, REFUSE_CLOSE, flags & MELY_STREAM_FLUSH ? REQ_FLUSH : REQ_CLOSE);
    if (flags & MELY_STREAM_FLUSH)
        close_flush(s);
    else
        close_now(s);
    touch(s);
    return 0;
}

int mely_stream_shutdown(mely_stream_t *s)
{
    if (!s)
        return MELY_EINVAL;
    if (!own(s))
        return refused(s) ? (atomic_load(&s->shut) & REFUSE_CLOSE ? -EPIPE : 0)
                          : ask(s, REFUSE_WR, REQ_SHUTWR);
    if (s->state != S_OPEN)
        return -EPIPE;
    take_sends(s); /* writes made before the half-close go first */
    s->shut_asked = true;
    atomic_fetch_or(&s->shut, REFUSE_WR);
    touch(s);
    return 0;
}

int mely_stream_fd(const mely_stream_t *s)
{
    return s ? atomic_load(&((mely_stream_t *)s)->fd_seen) : -1;
}

mely_color_t mely_stream_color(const mely_stream_t *s)
{
    return s ? s->to.color : 0;
}

size_t mely_stream_queued(const mely_stream_t *s)
{
    if (!s)
        return 0;
    struct mely__worker *w = mely__self;
    if (own(s) || (w && w->rt == s->rt &&
                   mely__turnend_held(&s->held_tag, w->index, w->turn_seq)))
        return s->state == S_CLOSED ? 0 : queued_own(s); /* on the color, or holding it */
    if (atomic_load(&((mely_stream_t *)s)->fd_seen) < 0)
        return 0;
    struct mely_stream *m = (struct mely_stream *)s;
    return atomic_load_explicit(&m->out_seen, memory_order_relaxed) +
           atomic_load_explicit(&m->inflight, memory_order_relaxed);
}

/* ---- staging: a worker's writes to streams of other workers ---------------------------- */

/*
 * A worker that writes to a stream whose color another worker owns (a room
 * writing to its subscribers) appends to a buffer of its own for that
 * stream, found in a small table of the worker's: a copy, no allocation and
 * no atomic per write. At the end of the writer's batch (mely/sched/turnend.h:
 * before its color may be stolen) each buffer goes to its stream as one send
 * on the stack: one compare-and-swap and at most one bell per stream per
 * batch, however many messages the batch's events wrote to it (a room's ten
 * messages to each subscriber). Order: a color's writes to a stream stay in
 * order because the batch's buffers leave before the color may run on
 * another worker (at the turn's end, when the batch was no batch, at the end
 * of the node that wrote), and anything else the worker does to the stream
 * (a write on its color or under a claim, a close, a half-close, a large
 * block) sends the stream's buffer first (unstage). A staged buffer holds a
 * reference to its stream until it is sent. The cap counts this worker's
 * staged bytes for the stream too (another worker's are unseen until its
 * batch ends).
 */
enum { STAGE_FIRST = 256, STAGE_SLOTS = 64 };

struct staged {
    struct mely_stream *s; /* a reference; NULL: a free slot */
    struct send *x;        /* x->len bytes so far */
    size_t cap;            /* bytes at x->data */
};

struct mely__stage {
    struct mely__turnend node; /* sends everything at the turn's end */
    bool queued;
    unsigned n, nslots;        /* used slots; a power of two */
    struct staged *slot;
};

static unsigned stage_hash(const struct mely_stream *s, unsigned nslots)
{
    return (unsigned)(((uintptr_t)s >> 6) * 0x9e3779b97f4a7c15ull >> 40) & (nslots - 1);
}

static struct staged *stage_find(struct mely__stage *st, const struct mely_stream *s)
{
    unsigned i = stage_hash(s, st->nslots);
    while (st->slot[i].s && st->slot[i].s != s) /* bounded: the table is at most half full */
        i = (i + 1) & (st->nslots - 1);
    return &st->slot[i];
}

/* Sends one staged buffer, taken out of the table first: the send may ring
 * the stream's bell, a post, and a post sends what the batch staged
 * (post.c), which must not find this buffer still there. */
static void send_staged(struct staged one)
{
    struct mely_stream *s = one.s;
    struct send *x = one.x;
    if (refused(s)) {
        free(x); /* closed meanwhile: as a write that raced the close */
    } else {
        atomic_fetch_add_explicit(&s->inflight, x->len, memory_order_relaxed);
        push_send(s, x);
    }
    mely_stream_unref(s);
}

/* Empties slot `i`, moving back the entries of its probe chain that would
 * no longer be found (linear probing's deletion: no tombstones). */
static void stage_remove(struct mely__stage *st, unsigned i)
{
    unsigned mask = st->nslots - 1;
    for (unsigned j = (i + 1) & mask; st->slot[j].s; j = (j + 1) & mask) { /* bounded: the chain */
        unsigned home = stage_hash(st->slot[j].s, st->nslots);
        /* Entry j stays if its home lies cyclically in (i, j]. */
        bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            st->slot[i] = st->slot[j];
            i = j;
        }
    }
    st->slot[i].s = NULL;
    st->n--;
}

/* Takes the buffer of slot i out of the table, then sends it. */
static void stage_take(struct mely__stage *st, unsigned i)
{
    struct staged one = st->slot[i];
    stage_remove(st, i);
    send_staged(one);
}

static void stage_send(struct mely__worker *w, struct mely_stream *s)
{
    struct mely__stage *st = w->io->stage;
    if (!st->n)
        return;
    struct staged *sl = stage_find(st, s);
    if (sl->s)
        stage_take(st, (unsigned)(sl - st->slot));
}

static void stage_run(struct mely__turnend *node)
{
    struct mely__stage *st = (struct mely__stage *)((char *)node - offsetof(struct mely__stage, node));
    st->queued = false;
    for (unsigned i = 0; st->n && i < st->nslots; i++) /* bounded: the table */
        while (st->slot[i].s) /* bounded: a removal may move one of the chain here */
            stage_take(st, i);
}

static struct mely__stage *stage_of(struct mely__worker *w)
{
    if (w->io->stage)
        return w->io->stage;
    struct mely__stage *st = calloc(1, sizeof(*st));
    struct staged *slot = calloc(STAGE_SLOTS, sizeof(*slot));
    if (!st || !slot) {
        free(st);
        free(slot);
        return NULL;
    }
    st->slot = slot;
    st->nslots = STAGE_SLOTS;
    st->node.run = stage_run;
    return w->io->stage = st;
}

/* Room for one more stream in the table: doubled when half full. */
static bool stage_grow(struct mely__stage *st)
{
    if (2 * (st->n + 1) <= st->nslots)
        return true;
    struct staged *old = st->slot;
    unsigned nold = st->nslots;
    struct staged *slot = calloc(2 * (size_t)nold, sizeof(*slot));
    if (!slot)
        return false;
    st->slot = slot;
    st->nslots = 2 * nold;
    for (unsigned i = 0; i < nold; i++) /* bounded: the old table */
        if (old[i].s)
            *stage_find(st, old[i].s) = old[i];
    free(old);
    return true;
}

static int stage_write(struct mely__worker *w, struct mely_stream *s, size_t len,
                       void (*copy)(char *dst, size_t len, const void *ctx), const void *ctx)
{
    struct mely__stage *st = stage_of(w);
    if (!st || !stage_grow(st))
        return MELY_ENOMEM;
    struct staged *sl = stage_find(st, s);
    size_t have = sl->s ? sl->x->len : 0;
    size_t q = atomic_load_explicit(&s->out_seen, memory_order_relaxed) +
               atomic_load_explicit(&s->inflight, memory_order_relaxed) + have;
    if (over_cap(s, q, len))
        return cap_refuse(s, false);
    if (!sl->s || have + len + 1 > sl->cap) { /* + 1: printf's 0 */
        size_t cap = sl->s ? 2 * sl->cap : STAGE_FIRST;
        while (cap < have + len + 1) /* bounded: doubling */
            cap *= 2;
        struct send *x = realloc(sl->s ? sl->x : NULL, sizeof(*x) + cap);
        if (!x)
            return MELY_ENOMEM;
        if (!sl->s) {
            *x = (struct send){ .len = 0 };
            mely_stream_ref(s);
            sl->s = s;
            st->n++;
        }
        sl->x = x;
        sl->cap = cap;
    }
    copy(sl->x->data + sl->x->len, len, ctx);
    sl->x->len += len;
    if (!st->queued) {
        st->queued = true;
        mely__turnend_at_batch_end(w, &st->node);
    }
    return 0;
}

/* At shutdown: the tables (empty: every worker's loop ended its turn). */
static void stages_free(struct mely__rt *rt)
{
    for (unsigned i = 0; i < rt->nworkers; i++) {
        struct mely__stage *st = mely__io_of(rt, i)->stage;
        if (!st)
            continue;
        for (unsigned k = 0; k < st->nslots; k++)
            if (st->slot[k].s) { /* a turn that never ended: the streams go too */
                free(st->slot[k].x);
                st->slot[k].s = NULL;
            }
        free(st->slot);
        free(st);
        mely__io_of(rt, i)->stage = NULL;
    }
}

/* ---- relaying two streams into each other ---------------------------------------- */

/*
 * mely_stream_relay: both streams on one color, so each one's input moves
 * into the other's output without a copy (evbuffer_add_buffer). The relay
 * is the streams' callbacks (read, drained, event: relay_ops), which take
 * the program's place; it keeps only the program's event callback, for
 * MELY_STREAM_CONNECTED. Backpressure: a side stops being read while the other's output
 * holds more than its write_high (the other's drained resumes it). When a
 * side reaches EOF, the other is half-closed once what came before is sent;
 * when both sides are done, or on an error or timeout of either, both close
 * (after flushing, unless a write failed) and `done` runs once.
 */
static void relay_free(struct mely_stream *s)
{
    struct relay *r = s->relay;
    if (!r)
        return;
    if (atomic_fetch_sub(&r->pair->refs, 1) == 1)
        free(r->pair);
    free(r);
    s->relay = NULL;
}

/* The read callback: moves s's input to its peer's output, while the peer
 * can take it. */
static void relay_read(mely_stream_t *s, void *arg)
{
    (void)arg;
    struct mely_stream *p = s->relay->peer;
    if (!p || p->state != S_OPEN || p->failed || p->shut_asked) {
        evbuffer_drain(s->in, evbuffer_get_length(s->in)); /* nowhere to go */
        return;
    }
    if (evbuffer_get_length(s->in) == 0)
        return;
    if (evbuffer_add_buffer(p->out, s->in) != 0) {
        report(s, MELY_STREAM_ERROR, MELY_ENOMEM);
        return;
    }
    touch(p);
    if (evbuffer_get_length(p->out) > p->ops.write_high)
        mely_stream_reading(s, 0); /* resumed by p's drained */
}

static void relay_finish(struct mely_stream *s, int err)
{
    struct relay *r = s->relay;
    if (r->pair->finished)
        return;
    r->pair->finished = true;
    struct mely_stream *p = r->peer;
    if (!p)
        return;
    if (r->pair->done) {
        name_run(s, (const void *)r->pair->done);
        r->pair->done(r->first ? s : p, r->first ? p : s, err, r->pair->arg);
    }
    mely_stream_close(s, err ? 0 : MELY_STREAM_FLUSH);
    mely_stream_close(p, err ? 0 : MELY_STREAM_FLUSH);
}

/* The drained callback: p's output fell to its low mark, its peer is read
 * again. */
static void relay_drained(mely_stream_t *p, void *arg)
{
    (void)arg;
    struct mely_stream *s = p->relay->peer;
    if (s && !s->reading && s->state == S_OPEN) {
        s->reading = true;
        touch(s);
    }
}

/* The event callback: an EOF half-closes the peer, the second one ends the
 * relay, as does anything else but a connect (the program's). */
static void relay_event(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct relay *r = s->relay;
    if (what & MELY_STREAM_CONNECTED) {
        if (r->event)
            r->event(s, what, err, arg);
        return;
    }
    if (what & MELY_STREAM_EOF && r->peer) {
        r->eof = true;
        mely_stream_shutdown(r->peer); /* after what came before */
        if (r->peer->relay->eof)
            relay_finish(s, 0);
        return;
    }
    relay_finish(s, err ? err : -ETIMEDOUT);
}

/* The relay takes s's callbacks (but closed) for peer. */
static void relay_start(struct mely_stream *s, struct relay *r)
{
    r->event = s->ops.event;
    s->relay = r;
    s->ops.read = relay_read;
    s->ops.drained = relay_drained;
    s->ops.event = relay_event;
    s->ops.read_low = 0;
}

int mely_stream_relay(mely_stream_t *a, mely_stream_t *b, mely_relay_fn done, void *arg)
{
    if (!a || !b || a == b || !own(a) || a->rt != b->rt || a->to.color != b->to.color ||
        a->relay || b->relay || a->ops.line || b->ops.line)
        return MELY_EINVAL;
    if (a->state != S_OPEN || b->state != S_OPEN)
        return -EPIPE;
    struct relay *ra = malloc(sizeof(*ra)), *rb = malloc(sizeof(*rb));
    struct relay_pair *pair = malloc(sizeof(*pair));
    if (!ra || !rb || !pair) {
        free(ra);
        free(rb);
        free(pair);
        return MELY_ENOMEM;
    }
    *pair = (struct relay_pair){ .done = done, .arg = arg };
    atomic_init(&pair->refs, 2);
    *ra = (struct relay){ .peer = b, .pair = pair, .first = true };
    *rb = (struct relay){ .peer = a, .pair = pair };
    relay_start(a, ra);
    relay_start(b, rb);
    /* Each side holds its peer until its own closed callback: a side may
     * close first (a close of the program's), and the other still reads
     * its relay. */
    mely_stream_ref(a);
    mely_stream_ref(b);
    /* What is in either input already goes at once. */
    relay_read(a, NULL);
    relay_read(b, NULL);
    touch(a);
    touch(b);
    return 0;
}

/* ---- the runtime's side ---------------------------------------------------------- */

static void tell_drain(struct mely__rt *rt)
{
    void (*watch)(struct mely__rt *) = atomic_load(&rt->io->drain_watch);
    if (watch)
        watch(rt);
}

void mely__stream_closed(struct mely__rt *rt)
{
    atomic_fetch_sub(&rt->io->streams_open, 1);
    tell_drain(rt);
}

void mely__stream_gone(struct mely__rt *rt)
{
    atomic_fetch_sub(&rt->io->streams_alive, 1);
    tell_drain(rt);
}

/* Takes a reference unless the last one is gone (the stream is being
 * freed). */
static bool ref_live(struct mely_stream *s)
{
    uint32_t n = atomic_load(&s->refs);
    while (n > 0) /* bounded: retried only when another thread moved refs */
        if (atomic_compare_exchange_weak(&s->refs, &n, n + 1))
            return true;
    return false;
}

static const unsigned ask_req[] = {
    [MELY__ASK_DRAIN] = REQ_DRAIN,
    [MELY__ASK_QUIET] = REQ_QUIET,
    [MELY__ASK_CUT] = REQ_CLOSE,
};

int mely__streams_ask_all(struct mely__rt *rt, enum mely__stream_ask what)
{
    /* Referenced under the lock, rung outside it: a bell that cannot be
     * posted drops its reference, which may free the stream (stream_mu). */
    pthread_mutex_lock(&rt->io->stream_mu);
    size_t n = 0;
    for (struct mely_stream *s = rt->io->streams; s; s = s->next) /* bounded: the list */
        n++;
    struct mely_stream **all = malloc((n ? n : 1) * sizeof(*all));
    size_t k = 0;
    for (struct mely_stream *s = rt->io->streams; all && s; s = s->next)
        if (ref_live(s))
            all[k++] = s;
    pthread_mutex_unlock(&rt->io->stream_mu);
    if (!all)
        return MELY_ENOMEM;
    for (size_t i = 0; i < k; i++) {
        ring(all[i], ask_req[what]);
        mely_stream_unref(all[i]);
    }
    free(all);
    return 0;
}

void mely__streams_free(struct mely__rt *rt)
{
    stages_free(rt);
    pthread_mutex_lock(&rt->io->stream_mu);
    rt->io->streams_dead = true;
    pthread_mutex_unlock(&rt->io->stream_mu);
    for (;;) { /* bounded: each pass frees one */
        pthread_mutex_lock(&rt->io->stream_mu);
        struct mely_stream *s = rt->io->streams;
        if (s)
            registry_del(s);
        pthread_mutex_unlock(&rt->io->stream_mu);
        if (!s)
            break;
        if (s->fd >= 0)
            mely__close_fd(rt, s->fd);
        s->fd = -1;
        atomic_store(&s->fd_seen, -1);
        s->state = S_CLOSED;
        if (!s->closed_run && s->ops.closed) {
            s->closed_run = true;
            s->ops.closed(s, s->arg);
        }
        stream_free(s);
    }
}
