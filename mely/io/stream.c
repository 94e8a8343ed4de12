/*
 * io/stream.c: streams, buffered colored connections on libevent's evbuffers
 * (the API and its rules: mely/stream.h).
 *
 * A stream is a read watch and, while output waits, a write watch on its fd,
 * both of the stream's color, plus two evbuffers. Everything that touches
 * the buffers, the watches and the state runs on the stream's color, so it
 * needs no lock: the watches' handlers, a timer, and a "bell" event.
 *
 *   on_readable   reads once (at most READ_CHUNK, one read() into space
 *                 reserved in the input: no copy, no FIONREAD), hands the
 *                 input to the read or line callback, then settles;
 *   on_writable   a connect that completed, or room for waiting output;
 *   on_bell       what other colors asked for: their writes (kept in
 *                 `pending`, under `mu`, appended to the output in order),
 *                 a close, a redelivery of buffered input;
 *   on_timer      one lazy timer for both timeouts: reads and writes only
 *                 note the time, and the timer, when it fires, re-arms
 *                 itself at the latest deadline or reports the timeout;
 *   on_closed     the closed callback, posted by the close.
 *
 * settle() ends every one of them: it sends the output (one writev through
 * evbuffer_write), arms or pauses the write watch, runs the drained
 * callback, finishes a close-after-flush, pauses or resumes reading for the
 * watermarks, and sets the timer. Calls made from the stream's color outside
 * its callbacks settle at once.
 *
 * Lifetime: `refs` counts the runtime's reference (from open to the end of
 * on_closed), one per bell in flight, and the user's. The last one frees the
 * stream. A timer needs none: only the stream's color sets and cancels it,
 * so a cancel from there either wins or finds it run already. At shutdown,
 * queued events are discarded uncalled, so mely__streams_free() closes what
 * is open, runs the closed callbacks not yet run, and frees every stream of
 * the runtime, referenced or not (references end with the runtime).
 *
 * Draining (mely_drain, at the end of the file):
 * a drain pauses every listener, asks every stream to close after flushing
 * (io/stream.c rings each one's bell), and counts down: rt->streams_open
 * (raised by every stream's registration, lowered when its closed callback
 * has run) and rt->streams_alive (lowered when it is freed, that is when
 * the events that carried it to other colors have run and dropped their
 * references). When both reach zero the runtime stops, so a shutdown that
 * follows discards no event of a stream, and no memory such an event
 * carried. A timeout is a timer on worker 0's pinned color that asks the
 * streams left to close at once, after which closed is enough (a
 * reference the program keeps would hold the drain forever). Streams
 * opened while the drain is on are asked to close as they start.
 *
 * Who may call: the functions marked "own" only on the stream's color
 * (checked: MELY_EINVAL elsewhere); the others from any thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "mely/colormap.h"
#include "mely/handle.h"
#include "mely/io/listen.h"
#include "mely/io/streams.h"
#include "mely/park.h"
#include "mely/io/watch.h"
#include "mely/runtime.h"
#include "mely/stream.h"

enum {
    READ_CHUNK = 16384,           /* the most one read takes */
    MAX_LINE_DEFAULT = 8192,
    WRITE_HIGH_DEFAULT = 1 << 20, /* 1 MiB */
};

enum state { S_OPEN, S_FLUSHING, S_CLOSED };

/* What other colors ask of the stream's color (`requests`). */
enum {
    REQ_CLOSE = 0x1,   /* close at once */
    REQ_FLUSH = 0x2,   /* close after flushing */
    REQ_DELIVER = 0x4, /* hand buffered input to the callbacks again */
    REQ_DRAINED = 0x8, /* run the drained callback again */
    REQ_START = 0x10,  /* arm the first watch (see stream_start) */
};

struct mely_stream {
    struct mely__rt *rt;
    mely_to_t to;
    mely_stream_ops_t ops; /* settings resolved: no zero means "default" here */
    void *arg;

    /* The stream's color only. */
    int fd;
    _Atomic int fd_seen; /* fd, for mely_stream_fd from any thread */
    enum state state;
    bool reading;      /* the program's wish (mely_stream_reading) */
    bool rd_armed;     /* the read watch is in epoll */
    bool wr_armed;     /* the write watch is in epoll */
    bool eof;          /* no more input: the peer closed, or input failed */
    bool failed;       /* a write failed: output is dropped */
    bool connecting;   /* mely_stream_connect's connect is in progress */
    bool write_paused; /* reading paused by write_high, until write_low */
    bool closed_run;   /* the closed callback ran */
    unsigned depth;    /* the stream's callbacks on the stack */
    mely_watch_t *rd, *wr;
    struct evbuffer *in, *out;
    size_t taken;      /* the line readln handed out, drained at the next call */
    mely_timer_t timer;
    uint64_t timer_at;             /* its deadline, when timer != 0 */
    uint64_t last_read, last_write; /* progress, for the timeouts */

    /* Any thread. */
    _Atomic uint32_t refs;
    atomic_bool bell;            /* an on_bell is queued */
    _Atomic unsigned requests;   /* REQ_* */
    pthread_mutex_t mu;          /* guards pending, and writes to shut */
    atomic_bool shut;            /* closing or closed, or a close was asked
                                    for: writes are refused */
    struct evbuffer *pending;    /* other colors' writes, in order */
    struct mely_stream *prev, *next; /* rt->streams, under rt->stream_mu */
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

static uint64_t timeouts_on(const struct mely_stream *s)
{
    return s->ops.read_timeout_ns | s->ops.write_timeout_ns;
}

/* ---- the registry ------------------------------------------------------------ */

static void registry_add(struct mely_stream *s)
{
    struct mely__rt *rt = s->rt;
    pthread_mutex_lock(&rt->stream_mu);
    s->next = rt->streams;
    if (s->next)
        s->next->prev = s;
    rt->streams = s;
    atomic_fetch_add(&rt->streams_open, 1);
    atomic_fetch_add(&rt->streams_alive, 1);
    pthread_mutex_unlock(&rt->stream_mu);
}

static void registry_del(struct mely_stream *s)
{
    struct mely__rt *rt = s->rt;
    if (s->prev)
        s->prev->next = s->next;
    else if (rt->streams == s)
        rt->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    s->prev = s->next = NULL;
}

static void stream_free(struct mely_stream *s)
{
    if (s->in)
        evbuffer_free(s->in);
    if (s->out)
        evbuffer_free(s->out);
    if (s->pending)
        evbuffer_free(s->pending);
    pthread_mutex_destroy(&s->mu);
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
    pthread_mutex_lock(&rt->stream_mu);
    bool dying = rt->streams_dead; /* mely__streams_free owns it now */
    if (!dying)
        registry_del(s);
    pthread_mutex_unlock(&rt->stream_mu);
    if (dying)
        return;
    stream_free(s);
    mely__drain_stream_gone(rt);
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

/* ---- the input ------------------------------------------------------------- */

/* Drains the line readln handed out last. */
static void drop_taken(struct mely_stream *s)
{
    if (s->taken) {
        evbuffer_drain(s->in, s->taken);
        s->taken = 0;
    }
}

/* One read into reserved input space: bytes read, 0 at end of input, or a
 * negative errno (-EAGAIN: nothing now). */
static ssize_t fill(struct mely_stream *s)
{
    size_t want = READ_CHUNK;
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
    return n;
}

static int readln(struct mely_stream *s, char **line, size_t *len)
{
    drop_taken(s);
    *line = NULL;
    *len = 0;
    size_t eol = 0;
    struct evbuffer_ptr p = evbuffer_search_eol(s->in, NULL, &eol, EVBUFFER_EOL_CRLF);
    if (p.pos < 0) /* a CR may still wait for its LF: max + 1 bytes are fine */
        return evbuffer_get_length(s->in) > s->ops.max_line + 1 ? -EMSGSIZE : 0;
    if ((size_t)p.pos > s->ops.max_line)
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

static void set_shut(struct mely_stream *s)
{
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->shut, true);
    evbuffer_add_buffer(s->out, s->pending); /* writes made before the close */
    pthread_mutex_unlock(&s->mu);
}

static void close_now(struct mely_stream *s)
{
    if (s->state == S_CLOSED)
        return;
    s->state = S_CLOSED;
    set_shut(s);
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
    /* The runtime's reference goes with on_closed; it runs after the
     * callback that closed, never inside it. */
    if (mely_post_ex(&m, s->to.color, s->to.prio, NULL, on_closed, s, 0) != 0)
        on_closed(s); /* out of memory: run it now rather than never */
}

static void close_flush(struct mely_stream *s)
{
    if (s->state != S_OPEN)
        return;
    s->state = S_FLUSHING;
    set_shut(s);
}

/* The event callback, or its default: close (after flushing when nothing
 * failed on the way out). */
static void report(struct mely_stream *s, unsigned what, int err)
{
    if (s->ops.event) {
        s->depth++;
        s->ops.event(s, what, err, s->arg);
        s->depth--;
        return;
    }
    if (what & MELY_STREAM_CONNECTED)
        return;
    if (what & MELY_STREAM_EOF || what == (MELY_STREAM_TIMEOUT | MELY_READ))
        close_flush(s);
    else
        close_now(s);
}

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
    if (s->fd < 0 || s->failed || s->connecting)
        return false;
    size_t len = evbuffer_get_length(s->out);
    if (len == 0) {
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
    if (n > 0 && s->ops.write_timeout_ns)
        s->last_write = mely_now_ns();
    write_watch(s, evbuffer_get_length(s->out) > 0);
    return n > 0;
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
    return s->state == S_OPEN && s->reading && !output_full(s);
}

static void read_watch(struct mely_stream *s)
{
    bool want = may_deliver(s) && !s->eof && !s->connecting && s->rd &&
                (!s->ops.read_high || evbuffer_get_length(s->in) < s->ops.read_high);
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
    /* Input left over from before the pause is handed out again. */
    if (want && evbuffer_get_length(s->in) > 0)
        ring(s, REQ_DELIVER);
}

static void on_timer(void *arg);

/* The earliest deadline a timeout can fire at now (0: none). */
static uint64_t next_deadline(const struct mely_stream *s)
{
    uint64_t r = s->rd_armed && s->ops.read_timeout_ns ? s->last_read + s->ops.read_timeout_ns : 0;
    uint64_t w = s->wr_armed && s->ops.write_timeout_ns ? s->last_write + s->ops.write_timeout_ns : 0;
    return !r ? w : !w ? r : r < w ? r : w;
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
    if (s->state == S_CLOSED || !s->ops.drained || evbuffer_get_length(s->out) > s->ops.write_low)
        return false;
    s->depth++;
    s->ops.drained(s, s->arg);
    s->depth--;
    return true;
}

/* The end of every callback of the stream (see the top of the file). */
static void settle(struct mely_stream *s)
{
    if (s->state == S_CLOSED)
        return;
    bool sent = flush(s);
    if (s->state == S_FLUSHING && (s->failed || evbuffer_get_length(s->out) == 0))
        close_now(s);
    if (s->state == S_CLOSED)
        return;
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
    if (timeouts_on(s) && s->state != S_CLOSED)
        set_timer(s);
}

static void enter(struct mely_stream *s)
{
    s->depth++;
}

static void leave(struct mely_stream *s)
{
    if (--s->depth == 0)
        settle(s);
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
            s->depth++;
            s->ops.line(s, line, len, s->arg);
            s->depth--;
        }
    } else if (s->ops.read && may_deliver(s) && evbuffer_get_length(s->in) > 0 &&
               evbuffer_get_length(s->in) >= s->ops.read_low) {
        s->depth++;
        s->ops.read(s, s->arg);
        s->depth--;
    }
    drop_taken(s);
}

static void on_readable(int fd, unsigned ready, void *arg)
{
    struct mely_stream *s = arg;
    (void)fd;
    (void)ready;
    if (s->state != S_OPEN || !s->rd_armed)
        return; /* queued before a pause */
    enter(s);
    ssize_t n = fill(s);
    if (n > 0) {
        if (s->ops.read_timeout_ns)
            s->last_read = mely_now_ns();
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
    leave(s);
}

static int connect_error(int fd)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    return -err;
}

static void connected(struct mely_stream *s)
{
    int err = connect_error(s->fd);
    s->connecting = false;
    mely_t m = handle(s);
    if (!err)
        err = mely_watch(&m, s->fd, MELY_READ, s->to, on_readable, s, &s->rd);
    if (err) {
        s->eof = s->failed = true;
        report(s, MELY_STREAM_ERROR, err);
        return;
    }
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
    enter(s);
    if (s->connecting)
        connected(s);
    leave(s); /* sends */
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
    s->last_read = s->last_write = now;
}

static void on_bell(void *arg)
{
    struct mely_stream *s = arg;
    atomic_store(&s->bell, false); /* before reading the requests: see ring() */
    unsigned req = atomic_exchange(&s->requests, 0);
    if (s->state != S_CLOSED) {
        enter(s);
        pthread_mutex_lock(&s->mu);
        evbuffer_add_buffer(s->out, s->pending);
        pthread_mutex_unlock(&s->mu);
        if (req & REQ_START)
            start(s);
        if (req & REQ_CLOSE)
            close_now(s);
        else if (req & REQ_FLUSH)
            close_flush(s);
        if (req & REQ_DELIVER)
            deliver(s);
        if (req & REQ_DRAINED)
            run_drained(s);
        leave(s);
    }
    mely_stream_unref(s);
}

static void on_timer(void *arg)
{
    struct mely_stream *s = arg;
    s->timer = 0;
    if (s->state == S_CLOSED)
        return;
    enter(s);
    uint64_t now = mely_now_ns();
    if (s->rd_armed && s->ops.read_timeout_ns && now >= s->last_read + s->ops.read_timeout_ns) {
        s->last_read = now;
        report(s, MELY_STREAM_TIMEOUT | MELY_READ, 0);
    }
    if (s->state != S_CLOSED && s->wr_armed && s->ops.write_timeout_ns &&
        now >= s->last_write + s->ops.write_timeout_ns) {
        s->last_write = now;
        if (s->state == S_FLUSHING) /* the close's own limit */
            close_now(s);
        else
            report(s, MELY_STREAM_TIMEOUT | MELY_WRITE, 0);
    }
    leave(s);
}

static void on_closed(void *arg)
{
    struct mely_stream *s = arg;
    struct mely__rt *rt = s->rt;
    if (!s->closed_run) {
        s->closed_run = true;
        if (s->ops.closed)
            s->ops.closed(s, s->arg);
        mely__drain_stream_closed(rt);
    }
    mely_stream_unref(s);
}

/* ---- opening ---------------------------------------------------------------- */

static int resolve_ops(mely_stream_ops_t *o, const mely_stream_ops_t *in)
{
    if (!in || (in->read && in->line))
        return MELY_EINVAL;
    *o = *in;
    if (!o->max_line)
        o->max_line = MAX_LINE_DEFAULT;
    if (!o->write_high)
        o->write_high = WRITE_HIGH_DEFAULT;
    if ((o->read_high && o->read_low > o->read_high) || o->write_low > o->write_high)
        return MELY_EINVAL;
    return 0;
}

static struct mely_stream *stream_new(struct mely__rt *rt, int fd, mely_to_t to,
                                      const mely_stream_ops_t *ops, void *arg)
{
    struct mely_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->rt = rt;
    s->to = to;
    s->ops = *ops;
    s->arg = arg;
    s->fd = fd;
    atomic_init(&s->fd_seen, fd);
    s->reading = true;
    pthread_mutex_init(&s->mu, NULL);
    atomic_init(&s->refs, 1);
    s->in = evbuffer_new();
    s->out = evbuffer_new();
    s->pending = evbuffer_new();
    if (!s->in || !s->out || !s->pending) {
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
    /* A drain in progress closes newcomers too. */
    int err = ring(s, REQ_START | (mely__drain_active(s->rt) ? REQ_FLUSH : 0));
    if (err) {
        pthread_mutex_lock(&s->rt->stream_mu);
        registry_del(s);
        pthread_mutex_unlock(&s->rt->stream_mu);
        struct mely__rt *rt = s->rt;
        close(s->fd);
        stream_free(s);
        mely__drain_stream_closed(rt);
        mely__drain_stream_gone(rt);
        return err;
    }
    if (out)
        *out = s;
    return 0;
}

/* What mely_watch would refuse, said at once (the watch itself is set
 * later, on the stream's color); and non-blocking. */
static int pollable(int fd)
{
    struct stat st;
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fstat(fd, &st) != 0)
        return -errno;
    if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
        return -EPERM;
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

/* Runs a change made from the stream's color outside its callbacks. */
static void settle_if_idle(struct mely_stream *s)
{
    if (s->depth == 0)
        settle(s);
}

/* Appends to the output (own color) or to `pending` (elsewhere); add()
 * does the appending: 0 or -1 as libevent's. */
static int write_with(struct mely_stream *s, int (*add)(struct evbuffer *, const void *),
                      const void *ctx)
{
    if (own(s)) {
        if (s->state != S_OPEN || s->failed || atomic_load_explicit(&s->shut, memory_order_relaxed))
            return -EPIPE;
        if (add(s->out, ctx) != 0)
            return MELY_ENOMEM;
        settle_if_idle(s);
        return 0;
    }
    struct mely__worker *self;
    mely_t m = handle(s);
    struct mely__rt *rt = mely__handle_enter(&m, &self);
    if (!rt || rt->streams_dead)
        return rt ? mely__handle_done(self, -EPIPE) : -EPIPE;
    pthread_mutex_lock(&s->mu);
    int err = atomic_load(&s->shut) ? -EPIPE : add(s->pending, ctx) != 0 ? MELY_ENOMEM : 0;
    pthread_mutex_unlock(&s->mu);
    if (!err)
        err = ring(s, 0);
    return mely__handle_done(self, err);
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

int mely_stream_write(mely_stream_t *s, const void *data, size_t len)
{
    if (!s || (!data && len))
        return MELY_EINVAL;
    struct bytes x = { data, len };
    return write_with(s, add_bytes, &x);
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

int mely_stream_vprintf(mely_stream_t *s, const char *fmt, va_list ap)
{
    if (!s || !fmt)
        return MELY_EINVAL;
    va_list copy;
    va_copy(copy, ap);
    struct format f = { fmt, &copy };
    int err = write_with(s, add_format, &f);
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

int mely_stream_write_buffer(mely_stream_t *s, struct evbuffer *buf)
{
    if (!s || !buf || !own(s))
        return MELY_EINVAL;
    if (s->state != S_OPEN || s->failed)
        return -EPIPE;
    if (buf == s->in)
        drop_taken(s);
    if (evbuffer_add_buffer(s->out, buf) != 0)
        return MELY_ENOMEM;
    settle_if_idle(s);
    return 0;
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
    /* Outside the stream's callbacks, what the caller drains is seen by a
     * settle after its event (reading may resume). */
    if (s->depth == 0)
        ring(s, 0);
    return s->in;
}

struct evbuffer *mely_stream_output(mely_stream_t *s)
{
    return s && own(s) ? s->out : NULL;
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
    settle_if_idle(s);
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
    s->last_read = s->last_write = now; /* periods start now */
    settle_if_idle(s);
    return 0;
}

int mely_stream_reading(mely_stream_t *s, int on)
{
    if (!s || !own(s))
        return MELY_EINVAL;
    s->reading = on != 0;
    settle_if_idle(s);
    return 0;
}

int mely_stream_close(mely_stream_t *s, unsigned flags)
{
    if (!s || (flags & ~MELY_STREAM_FLUSH))
        return MELY_EINVAL;
    if (own(s)) {
        enter(s);
        if (flags & MELY_STREAM_FLUSH)
            close_flush(s);
        else
            close_now(s);
        leave(s);
        return 0;
    }
    struct mely__worker *self;
    mely_t m = handle(s);
    struct mely__rt *rt = mely__handle_enter(&m, &self);
    if (!rt)
        return 0;
    if (rt->streams_dead)
        return mely__handle_done(self, 0);
    pthread_mutex_lock(&s->mu); /* writes made before this call still go */
    atomic_store(&s->shut, true);
    pthread_mutex_unlock(&s->mu);
    return mely__handle_done(self, ring(s, flags & MELY_STREAM_FLUSH ? REQ_FLUSH : REQ_CLOSE));
}

int mely_stream_fd(const mely_stream_t *s)
{
    return s ? atomic_load(&((mely_stream_t *)s)->fd_seen) : -1;
}

mely_color_t mely_stream_color(const mely_stream_t *s)
{
    return s ? s->to.color : 0;
}

/* ---- the runtime's side ---------------------------------------------------------- */

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

int mely__streams_ask_all(struct mely__rt *rt, bool flush)
{
    /* Referenced under the lock, rung outside it: a bell that cannot be
     * posted drops its reference, which may free the stream (stream_mu). */
    pthread_mutex_lock(&rt->stream_mu);
    size_t n = 0;
    for (struct mely_stream *s = rt->streams; s; s = s->next) /* bounded: the list */
        n++;
    struct mely_stream **all = malloc((n ? n : 1) * sizeof(*all));
    size_t k = 0;
    for (struct mely_stream *s = rt->streams; all && s; s = s->next)
        if (ref_live(s))
            all[k++] = s;
    pthread_mutex_unlock(&rt->stream_mu);
    if (!all)
        return MELY_ENOMEM;
    for (size_t i = 0; i < k; i++) {
        ring(all[i], flush ? REQ_FLUSH : REQ_CLOSE);
        mely_stream_unref(all[i]);
    }
    free(all);
    return 0;
}

void mely__streams_free(struct mely__rt *rt)
{
    pthread_mutex_lock(&rt->stream_mu);
    rt->streams_dead = true;
    pthread_mutex_unlock(&rt->stream_mu);
    for (;;) { /* bounded: each pass frees one */
        pthread_mutex_lock(&rt->stream_mu);
        struct mely_stream *s = rt->streams;
        if (s)
            registry_del(s);
        pthread_mutex_unlock(&rt->stream_mu);
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

/* ---- draining ----------------------------------------------------------------- */

bool mely__drain_active(struct mely__rt *rt)
{
    return atomic_load(&rt->draining);
}

/* Ends the drain: its timer goes, and the runtime stops. */
static void finish(struct mely__rt *rt)
{
    pthread_mutex_lock(&rt->stream_mu);
    bool was = atomic_exchange(&rt->draining, false);
    mely_timer_t t = atomic_exchange(&rt->drain_timer, 0);
    pthread_mutex_unlock(&rt->stream_mu);
    if (!was)
        return; /* another thread finished it */
    mely_t m = mely__handle_of(rt);
    if (t)
        mely_timer_cancel(&m, t);
    mely__request_stop(rt);
}

/* Done when every stream is closed and no event holds one any more (the
 * events that carry a stream to other colors run, instead of being
 * discarded with their memory by the shutdown that follows); after the
 * timeout, when every stream is closed. */
static void check(struct mely__rt *rt)
{
    if (mely__drain_active(rt) && atomic_load(&rt->streams_open) == 0 &&
        (atomic_load(&rt->streams_alive) == 0 || atomic_load(&rt->drain_cut)))
        finish(rt);
}

void mely__drain_stream_closed(struct mely__rt *rt)
{
    atomic_fetch_sub(&rt->streams_open, 1);
    check(rt);
}

void mely__drain_stream_gone(struct mely__rt *rt)
{
    atomic_fetch_sub(&rt->streams_alive, 1);
    check(rt);
}

/* The drain's timeout: what is left closes without flushing. */
static void cut(void *arg)
{
    struct mely__rt *rt = arg;
    pthread_mutex_lock(&rt->stream_mu);
    bool on = atomic_exchange(&rt->drain_timer, 0) != 0;
    if (on)
        atomic_store(&rt->drain_cut, true);
    pthread_mutex_unlock(&rt->stream_mu);
    if (on) {
        mely__streams_ask_all(rt, false);
        check(rt);
    }
}

/* Marks the drain begun and sets its timer, both under stream_mu so that a
 * drain finishing at once (finish) finds the timer to cancel. */
static int begin(struct mely__rt *rt, uint64_t timeout_ns)
{
    int err = 0;
    mely_t m = mely__handle_of(rt);
    mely_timer_t t = 0;
    pthread_mutex_lock(&rt->stream_mu);
    if (atomic_load(&rt->draining))
        err = MELY_EBUSY;
    else if (timeout_ns)
        err = mely_timer_after(&m, timeout_ns, MELY_TO(MELY_COLOR_PINNED(0)), cut, rt, &t);
    if (!err) {
        atomic_store(&rt->drain_timer, t);
        atomic_store(&rt->drain_cut, false);
        atomic_store(&rt->draining, true);
    }
    pthread_mutex_unlock(&rt->stream_mu);
    return err;
}

static int drain_in(struct mely__rt *rt, uint64_t timeout_ns)
{
    int err = begin(rt, timeout_ns);
    if (err)
        return err;
    mely__listeners_pause(rt);
    if (mely__streams_ask_all(rt, true) != 0) /* out of memory: cut short */
        mely__streams_ask_all(rt, false);
    check(rt); /* nothing to wait for? */
    return 0;
}

int mely_drain(mely_t *m, uint64_t timeout_ns)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, drain_in(rt, timeout_ns)) : MELY_ESHUTDOWN;
}
