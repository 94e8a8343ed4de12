/* SPDX-License-Identifier: MIT */
/*
 * include/mely/stream.h: buffered, colored connections (streams) on libevent's evbuffers.
 *
 * A stream owns a connected, non-blocking socket (or any pollable fd) and two
 * libevent evbuffers: the input, filled from the socket, and the output,
 * flushed to it. Every callback of a stream runs as an event of the stream's
 * color (the `to` it was opened with), so one stream's callbacks never run at
 * the same time, and a program that gives each connection a color of its own
 * (mely_color_pick, mely.h) serves connections in parallel without locks.
 *
 *   static void on_line(mely_stream_t *s, char *line, size_t len, void *arg)
 *   {
 *       mely_stream_printf(s, "%zu %s\n", len, line);
 *   }
 *   static const mely_stream_ops_t ops = { .line = on_line };
 *   ... in the accept handler:
 *   mely_stream_open(&rt, fd, MELY_TO(mely_color_pick(&conns, fd)), &ops, NULL, NULL);
 *
 * The rules, in short (each function below says its own):
 *  - From the stream's color (its callbacks, and any other event of that
 *    color) every function may be called. What is written goes into the
 *    output at once and is sent at the end of the turn of the worker that
 *    owns the color (the batches between two polls of its poller: 50 us to
 *    1 ms of them when it is busy, or until it goes idle): one writev per
 *    stream per turn, however many events wrote to it, as a libevent loop
 *    turn sends (doc/io.md, "When bytes leave").
 *  - From any other color or thread: mely_stream_write, mely_stream_printf,
 *    mely_stream_write_block, mely_stream_queued, mely_stream_shutdown,
 *    mely_stream_close, mely_stream_ref and mely_stream_unref. Writes keep
 *    the order each color and each thread made them in (a color's also when
 *    it moves between workers, and before the posts it makes after them:
 *    the handler of a post that follows a write writes after it), without
 *    a lock: another color of the same
 *    worker appends at once (it holds the stream's color for the turn); a
 *    color of another worker appends to a buffer of its worker's, handed to
 *    the stream at the end of the writer's batch; a thread that is no
 *    worker hands each write over (an allocation and a compare-and-swap).
 *  - Output is bounded: writes beyond ops.output_max bytes queued (16 MiB
 *    by default) fail with -ENOBUFS, or close the stream
 *    (MELY_STREAM_CAP_CLOSE), from wherever they come.
 *  - Lifetime: a stream is freed when it is closed and its last reference
 *    is gone. Opening gives one reference to the runtime, dropped after the
 *    closed callback ran. Code that keeps the pointer beyond the stream's
 *    own color (an event posted to another color carrying `s`) takes a
 *    reference first (mely_stream_ref) and drops it when done
 *    (mely_stream_unref): then it may call the functions above at any time,
 *    even after the stream closed (writes then return -EPIPE and do
 *    nothing). Without a reference, the pointer is valid only on the
 *    stream's color, until the closed callback returns.
 *  - Closing: mely_stream_close() from any thread; the closed callback runs
 *    exactly once, as a later event of the stream's color (never inside the
 *    call), after which no other callback of the stream runs. Free the
 *    callbacks' argument there.
 *  - mely_drain() is the graceful stop (its comment below says exactly what
 *    it does); mely_shutdown() closes the streams left and runs their
 *    closed callbacks, so no descriptor or argument leaks. Shutdown frees
 *    every stream of the runtime, whatever references remain (the events
 *    that held them are discarded): a reference does not outlive the
 *    runtime.
 *
 * Threads: the callbacks run on whatever worker owns the stream's color (a
 * steal moves a stream with its color).
 */
#ifndef MELY_STREAM_H
#define MELY_STREAM_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <mely/mely.h>

struct evbuffer; /* libevent's buffer: <event2/buffer.h> */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mely_stream mely_stream_t;

/*
 * What an event callback reports (the `what` of mely_stream_ops_t.event).
 * The bits never overlap MELY_READ, MELY_WRITE, MELY_ONESHOT or MELY_SIGNAL
 * (mely.h), so `what & MELY_STREAM_EOF` is never true for a timeout. They
 * come one at a time, except MELY_STREAM_TIMEOUT, which always comes with
 * MELY_READ (the read timeout), MELY_WRITE (the write timeout) or both (the
 * idle timeout): the sides that made no progress.
 */
#define MELY_STREAM_EOF 0x10u       /* the peer closed its side: no more input */
#define MELY_STREAM_ERROR 0x20u     /* reading or writing failed: `err` says why
                                       (a negative errno); or a line exceeded
                                       the maximum (-EMSGSIZE); or the output
                                       cap closed the stream (-ENOBUFS); or the
                                       connect timed out (-ETIMEDOUT) */
#define MELY_STREAM_TIMEOUT 0x40u   /* with MELY_READ or MELY_WRITE: no progress
                                       for the timeout set by mely_stream_timeouts */
#define MELY_STREAM_CONNECTED 0x80u /* mely_stream_connect's connection is up */

/* mely_stream_ops_t.flags */
#define MELY_STREAM_CAP_CLOSE 0x1u  /* a write beyond output_max closes the
                                       stream (after it fails with -ENOBUFS) */

/*
 * A stream's callbacks and settings (zero-initialize; any callback may be
 * NULL). Each callback runs as an event of the stream's color, with the
 * `arg` given to mely_stream_open.
 *  read     the input holds at least read_low bytes. Consume what you can
 *           (mely_stream_readln, mely_stream_input and libevent's evbuffer
 *           functions); what you leave stays for the next call, which comes
 *           when more arrives.
 *  line     instead of read: once per complete line (LF or CRLF, not
 *           included; line[len] is 0, and the line may be modified), valid
 *           until the callback returns. A line longer than max_line is an
 *           error (-EMSGSIZE). Lines already read keep coming after
 *           mely_stream_reading(s, 1) even if nothing more arrives.
 *  drained  the output fell to write_low (empty, by default) after bytes
 *           were sent: the place to produce more.
 *  event    end of input, an error, a timeout, or a connection made (the
 *           MELY_STREAM_* bits, err for errors). NULL: the stream closes on
 *           EOF, errors and timeouts (after flushing its output on EOF, read
 *           and idle timeouts).
 *  closed   the last callback: the stream's socket is closed. Free arg here.
 *  drain    mely_drain() began: finish the exchanges under way and close the
 *           stream (MELY_STREAM_FLUSH) before the drain's deadline. The
 *           stream keeps reading and writing meanwhile. NULL: the stream
 *           stops reading from its socket, and closes after flushing once
 *           every queued event of the runtime has run (mely_drain).
 * Settings (0: the default):
 *  read_low, read_high    the read callback waits for read_low bytes (default:
 *                         any); reading pauses while the input holds read_high
 *                         or more (default: no limit; in line mode max_line
 *                         bounds the input anyway)
 *  write_low, write_high  drained runs when the output falls to write_low
 *                         (default 0); reading pauses while the output holds
 *                         more than write_high (default 1 MiB; SIZE_MAX: no
 *                         limit) and resumes once it falls to write_low
 *  max_line               the longest line accepted, end of line excluded
 *                         (default 8192)
 *  read_timeout_ns        nothing arrived for this long while reading
 *                         (default: none)
 *  write_timeout_ns       output waits and nothing could be sent for this long
 *                         (default: none)
 *  connect_timeout_ns     mely_stream_connect's connection is not up after this
 *                         long: MELY_STREAM_ERROR with -ETIMEDOUT (default: none)
 *  idle_timeout_ns        nothing was read and nothing sent for this long
 *                         (default: none): MELY_STREAM_TIMEOUT | MELY_READ |
 *                         MELY_WRITE (a subscriber that only receives is not
 *                         idle; a connection that does nothing is)
 *  output_max             the most bytes the stream holds queued for sending
 *                         (its output, and writes from other colors on their
 *                         way; mely_stream_queued): a write beyond it appends
 *                         nothing and returns -ENOBUFS (default 16 MiB;
 *                         SIZE_MAX: no limit)
 *  flags                  MELY_STREAM_CAP_CLOSE: a write beyond output_max
 *                         also closes the stream, at the end of the turn, as
 *                         a close without flush; the event callback gets
 *                         MELY_STREAM_ERROR with -ENOBUFS first
 * Timeouts restart on every byte moved, at the cost of a clock read (no
 * timer operation per read or write); the event callback gets
 * MELY_STREAM_TIMEOUT | MELY_READ or MELY_WRITE, and a stream left open
 * keeps its timeout running from then on. A timeout of UINT64_MAX, like 0,
 * is none.
 */
typedef struct mely_stream_ops {
    void (*read)(mely_stream_t *s, void *arg);
    void (*line)(mely_stream_t *s, char *line, size_t len, void *arg);
    void (*drained)(mely_stream_t *s, void *arg);
    void (*event)(mely_stream_t *s, unsigned what, int err, void *arg);
    void (*closed)(mely_stream_t *s, void *arg);
    size_t read_low, read_high;
    size_t write_low, write_high;
    size_t max_line;
    uint64_t read_timeout_ns, write_timeout_ns;
    void (*drain)(mely_stream_t *s, void *arg);
    uint64_t connect_timeout_ns;
    size_t output_max;
    unsigned flags;
    uint64_t idle_timeout_ns;
} mely_stream_ops_t;

/*
 * Makes fd (a connected socket; made non-blocking here) a stream whose
 * callbacks run as events of `to`. Reading starts with the stream's first
 * event, on its color. The stream owns fd from now on, also on failure (fd
 * is then closed): close the stream, never fd. ops is copied. out may be
 * NULL (the callbacks receive the stream). *out is the stream without a
 * reference: the caller may use it on the stream's color, or elsewhere
 * while it knows the stream is open; to keep it on another thread, take a
 * reference in one of the stream's callbacks (the stream may close, and be
 * freed, as soon as it starts). *out is written before the stream's first
 * event is posted, so callbacks that read it where it was stored (a
 * connection's `conn->s`, passed as &conn->s with conn as the argument)
 * find it, also on another worker before this call returned; on failure
 * it is NULL.
 * @return 0 and *out; MELY_ESHUTDOWN (fd closed); MELY_EINVAL (ops NULL, with
 *         both read and line, read_low > read_high or write_low >
 *         write_high with the high mark set; fd < 0); MELY_ECOLOR;
 *         MELY_EPRIO; MELY_ENOMEM; -EBADF; -EPERM (fd cannot be polled: a
 *         regular file, a directory). A watch that cannot be set later on
 *         (MELY_ENOMEM, -ENOSPC) is an error for the event callback.
 * Threads: any thread.
 */
int mely_stream_open(mely_t *m, int fd, mely_to_t to, const mely_stream_ops_t *ops, void *arg,
                     mely_stream_t **out);

/*
 * Connects to host:port (numeric IPv4 or IPv6; names are not resolved) and
 * opens a stream on the socket at once: writes are queued until the
 * connection is up, then the event callback gets MELY_STREAM_CONNECTED (or
 * MELY_STREAM_ERROR with the connect's error, e.g. -ECONNREFUSED).
 * @return as mely_stream_open, and MELY_EINVAL for a host that is not a
 *         numeric address; a negative errno from socket() or connect().
 * Threads: any thread.
 */
int mely_stream_connect(mely_t *m, const char *host, unsigned port, mely_to_t to,
                        const mely_stream_ops_t *ops, void *arg, mely_stream_t **out);

/*
 * Appends len bytes of data to the output. On the stream's color the bytes
 * are copied into the output at once, and sent at the end of the turn
 * (above). Elsewhere they are copied and handed to the stream's color as
 * the rules above say (no lock), which appends them in the order this
 * thread wrote them, also with respect to this thread's later
 * mely_stream_shutdown or mely_stream_close. A write from another thread
 * that races with a close (neither ordered before the other) may be
 * accepted and then dropped by the close, as if it came after it.
 * The output is sent as the socket takes it; while it holds more than the
 * write high watermark, the stream stops reading (backpressure), until it
 * falls to the low watermark.
 * @return 0; -EPIPE (the stream is closed or closing, its write side shut
 *         down, or its socket failed: nothing was queued); -ENOBUFS (the
 *         output cap, ops.output_max: nothing was queued); MELY_EINVAL (s
 *         NULL, or data NULL with len > 0); MELY_ENOMEM.
 * Threads: any thread (see the lifetime rule above).
 */
int mely_stream_write(mely_stream_t *s, const void *data, size_t len);

/* mely_stream_write of a printf-formatted string. Same returns, and
 * MELY_EINVAL for a bad format. Threads: any thread. */
int mely_stream_printf(mely_stream_t *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
int mely_stream_vprintf(mely_stream_t *s, const char *fmt, va_list ap);

/*
 * Blocks: one message for many streams, without a copy per stream. A block
 * holds len bytes and a reference count (1 when made). Write it to any
 * number of streams from any thread (mely_stream_write_block), then drop
 * your reference: each stream keeps its own until the bytes are sent. A
 * block larger than 512 bytes is referenced by every output it goes to
 * (libevent's evbuffer_add_reference) and never copied; a smaller one is
 * copied into each output, because a copy of a few hundred bytes costs
 * less than a reference and a writev iovec of its own.
 *
 * mely_block_new copies len bytes of data; mely_block_alloc leaves them for
 * the caller to fill (mely_block_data) before the block's first write;
 * mely_block_printf formats them. They return NULL when out of memory (or,
 * printf, for a bad format). The contents must not change once written.
 * Threads: any thread; ref and unref are atomic.
 */
typedef struct mely_block mely_block_t;

mely_block_t *mely_block_new(const void *data, size_t len);
mely_block_t *mely_block_alloc(size_t len);
mely_block_t *mely_block_printf(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
void *mely_block_data(mely_block_t *b);
size_t mely_block_len(const mely_block_t *b);
mely_block_t *mely_block_ref(mely_block_t *b); /* returns b */
void mely_block_unref(mely_block_t *b);        /* frees the block with its last reference */

/*
 * Appends block b to the output, as mely_stream_write does with bytes (the
 * same order, cap and returns), taking a reference to b for as long as the
 * stream needs its bytes: the caller keeps its own reference.
 * Threads: any thread (see the lifetime rule above).
 */
int mely_stream_write_block(mely_stream_t *s, mely_block_t *b);

/*
 * Bytes written to s and not yet handed to its socket: the output as it
 * stood at the end of the stream color's last turn (exact on the stream's
 * color), plus the writes from other colors still on their way. From
 * another thread it is approximate by the writes the stream's color is
 * appending and sending meanwhile, by the writes still in other workers'
 * buffers (at most a batch of each), and by
 * writes racing with the call. 0 once the stream is closed.
 * Threads: any thread (see the lifetime rule above).
 */
size_t mely_stream_queued(const mely_stream_t *s);

/*
 * Half-close: once the output written before this call is sent, shuts
 * down the socket's write side (shutdown(SHUT_WR): the peer reads EOF).
 * Reading goes on; the stream stays open until it is closed (by default,
 * the peer's EOF closes it). Later writes return -EPIPE. A second call does
 * nothing. Use this, never shutdown() on mely_stream_fd().
 * @return 0; -EPIPE (closed or closing); MELY_EINVAL; MELY_ENOMEM (from
 *         another color: it could not be queued; retry).
 * Threads: any thread (see the lifetime rule above).
 */
int mely_stream_shutdown(mely_stream_t *s);

/*
 * Relays a and b into each other, as a TCP proxy does: what a reads goes to
 * b's output and what b reads to a's, moved without a copy. Both streams
 * must have the same color (open the second one with
 * MELY_TO(mely_stream_color(a))), and neither may be in line mode.
 * From now on the relay takes their input and their event reports; the
 * program's closed callbacks still run, and its event callbacks still get
 * MELY_STREAM_CONNECTED. Backpressure each way: a side stops being read
 * while the other's output holds more than the other's write_high, until it
 * falls to its write_low. Half-close: when a side reaches EOF, the other is
 * half-closed (mely_stream_shutdown) once what came before is sent. When
 * both sides reached EOF, both close after flushing and done(a, b, 0, arg)
 * runs; on an error or a timeout of either side (or when the program
 * closes one), both close at once and done gets the negative errno
 * (-ETIMEDOUT for a timeout, -ECANCELED for a close). done runs once, on
 * the streams' color; it may be NULL. A relay needs no drain callback: it
 * carries on through a drain until both sides are done.
 * @return 0; MELY_EINVAL (NULL, a == b, different colors or runtimes, line
 *         mode, already relayed, or not called on the streams' color);
 *         -EPIPE (a side is closed or closing); MELY_ENOMEM.
 * Threads: the streams' color only.
 */
typedef void (*mely_relay_fn)(mely_stream_t *a, mely_stream_t *b, int err, void *arg);
int mely_stream_relay(mely_stream_t *a, mely_stream_t *b, mely_relay_fn done, void *arg);

/*
 * Moves every byte of buf (any evbuffer, such as the stream's own input)
 * to the end of the output without copying them. Echo in one line:
 * mely_stream_write_buffer(s, mely_stream_input(s)).
 * @return 0; -EPIPE; MELY_EINVAL; MELY_ENOMEM.
 * Threads: the stream's color only.
 */
int mely_stream_write_buffer(mely_stream_t *s, struct evbuffer *buf);

/*
 * Takes the next complete line from the input: *line points to it (LF or
 * CRLF removed, line[*len] is 0), valid until the next call on the stream
 * or until the callback returns.
 * @return 1 (a line); 0 (no complete line yet; *line NULL); -EMSGSIZE (the
 *         input holds more than the maximum line length without an end of
 *         line; nothing was taken); MELY_EINVAL.
 * Threads: the stream's color only.
 */
int mely_stream_readln(mely_stream_t *s, char **line, size_t *len);

/* The input and output evbuffers, for libevent's evbuffer functions
 * (<event2/buffer.h>): read and drain the input, append to the output.
 * Appends are sent at the end of the turn, as writes are (they are not
 * checked against output_max; the next write is). Never free them.
 * Threads: the stream's color only. */
struct evbuffer *mely_stream_input(mely_stream_t *s);
struct evbuffer *mely_stream_output(mely_stream_t *s);

/*
 * Changes settings of mely_stream_ops_t later on (0: the default, as there).
 * mely_stream_watermark: what is MELY_READ (read_low, read_high) or
 * MELY_WRITE (write_low, write_high). mely_stream_timeouts: both timeouts.
 * @return 0; MELY_EINVAL (s NULL, what, or low > high with high set).
 * Threads: the stream's color only (to set them from the start, use the ops
 * given to mely_stream_open: its first callback may run on another worker
 * before mely_stream_open returns).
 */
int mely_stream_watermark(mely_stream_t *s, unsigned what, size_t low, size_t high);
int mely_stream_max_line(mely_stream_t *s, size_t max);
int mely_stream_timeouts(mely_stream_t *s, uint64_t read_ns, uint64_t write_ns);

/*
 * Stops (0) or resumes (1) reading: for backpressure decided by the
 * program (a request out on another color). The watermarks' pauses come
 * on top. @return 0; MELY_EINVAL.
 * Threads: the stream's color only.
 */
int mely_stream_reading(mely_stream_t *s, int on);

#define MELY_STREAM_FLUSH 0x1u /* mely_stream_close: send the output first */

/*
 * Closes the stream: with MELY_STREAM_FLUSH, reading stops at once and the
 * socket closes once the output is sent (or it fails, or the write timeout
 * fires); without, at once, dropping the output. Then the closed callback
 * runs, as a later event of the stream's color. A second close does
 * nothing (a close without FLUSH still cuts a flushing one short).
 * Closing a socket whose peer sent bytes that were never read makes the
 * kernel reset the connection, which can destroy the last replies on their
 * way: so when the output is sent and unread bytes wait, the stream shuts
 * down its write side and reads and discards until the peer's EOF, for at
 * most 1 s, before it closes (the "lingering close" of web servers).
 * @return 0; MELY_EINVAL (s NULL); MELY_ENOMEM (from another color: the
 *         close could not be queued; retry).
 * Threads: any thread (see the lifetime rule above).
 */
int mely_stream_close(mely_stream_t *s, unsigned flags);

/* Takes (ref) and drops (unref) a reference to s: see the lifetime rule
 * above. unref frees a closed stream whose last reference it was.
 * Threads: any thread. */
void mely_stream_ref(mely_stream_t *s);
void mely_stream_unref(mely_stream_t *s);

/* The stream's fd (-1 once closed), and its color. Any thread (the fd may
 * be closed, and its number reused, as soon as the stream closes). */
int mely_stream_fd(const mely_stream_t *s);
mely_color_t mely_stream_color(const mely_stream_t *s);

/*
 * Drains the runtime, gracefully: what was asked of it is answered, nothing
 * new is taken, and then it stops. In order:
 *  1. Every listener stops accepting (as mely_listener_pause: close them or
 *     let mely_shutdown free them).
 *  2. Every open stream hears of it, as an event of its color: a stream
 *     with a drain callback runs it and carries on (reading, writing) until
 *     the program closes it; a stream without one stops reading from its
 *     socket (input already read is still handed to its callbacks).
 *  3. The events queued anywhere in the runtime run, with those they post
 *     in turn (a request out on another color, its reply, the message on
 *     its way to subscribers), and what they write is queued as usual.
 *  4. Once no event is queued or running on any worker (I/O readiness and
 *     timers still bring new events meanwhile; a runtime kept busy past the
 *     deadline is cut, step 6), every stream without a drain callback is
 *     closed after flushing (MELY_STREAM_FLUSH, with the lingering close
 *     described there).
 *  5. The runtime stops (mely_stop) once every closed callback has run and
 *     every reference is dropped (the events that carry streams to other
 *     colors have run: a shutdown that follows discards none of them).
 *  6. After timeout_ns (0: no limit) the streams left are closed without
 *     flushing, and the runtime stops once their closed callbacks have run.
 * Streams opened during the drain (mely_stream_connect by work in flight)
 * go through the same steps from their start: the drain callback, or no
 * reading and a close at step 4 (at once if step 4 is past).
 * A graceful shutdown: mely_drain from a signal's handler, then
 * mely_shutdown after mely_run returns.
 * @return 0; MELY_ESHUTDOWN; MELY_EBUSY (a drain is in progress);
 *         MELY_ENOMEM.
 * Threads: any thread.
 */
int mely_drain(mely_t *m, uint64_t timeout_ns);

#ifdef __cplusplus
}
#endif

#endif /* MELY_STREAM_H */
