/*
 * mely/stream.h: buffered, colored connections (streams) on libevent's evbuffers.
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
 *    color) every function may be called; what is written is sent when the
 *    callback returns (at once when called outside a callback of the stream).
 *  - From any other color or thread, only mely_stream_write,
 *    mely_stream_printf, mely_stream_close, mely_stream_ref and
 *    mely_stream_unref: writes are copied and queued to the stream's color,
 *    which appends them to the output in the order each thread made them.
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
 *  - mely_drain() stops a runtime's listeners and closes every open stream
 *    (after flushing); mely_shutdown() closes the streams left and runs
 *    their closed callbacks, so no descriptor or argument leaks. Shutdown
 *    frees every stream of the runtime, whatever references remain (the
 *    events that held them are discarded): a reference does not outlive
 *    the runtime.
 *
 * Threads: the callbacks run on whatever worker owns the stream's color (a
 * steal moves a stream with its color).
 */
#ifndef MELY_STREAM_H
#define MELY_STREAM_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "mely/mely.h"

struct evbuffer; /* libevent's buffer: <event2/buffer.h> */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mely_stream mely_stream_t;

/* What an event callback reports (the `what` of mely_stream_ops_t.event). */
#define MELY_STREAM_EOF 0x01u       /* the peer closed its side: no more input */
#define MELY_STREAM_ERROR 0x02u     /* reading or writing failed: `err` says why
                                       (a negative errno), or a line exceeded
                                       the maximum (-EMSGSIZE) */
#define MELY_STREAM_TIMEOUT 0x04u   /* with MELY_READ or MELY_WRITE: no progress
                                       for the timeout set by mely_stream_timeouts */
#define MELY_STREAM_CONNECTED 0x08u /* mely_stream_connect's connection is up */

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
 *           EOF, errors and timeouts (after flushing its output on EOF and
 *           read timeouts).
 *  closed   the last callback: the stream's socket is closed. Free arg here.
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
 * Timeouts restart on every byte moved, at the cost of a clock read (no
 * timer operation per read or write); the event callback gets
 * MELY_STREAM_TIMEOUT | MELY_READ or MELY_WRITE, and a stream left open
 * keeps its timeout running from then on.
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
 * freed, as soon as it starts).
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
 * are copied into the output at once; elsewhere they are copied and queued
 * to the stream's color (one allocation per call), which appends them in
 * the order this thread wrote them. The output is sent as the socket takes
 * it; while it holds more than the write high watermark, the stream stops
 * reading (backpressure), until it falls to the low watermark.
 * @return 0; -EPIPE (the stream is closed or closing, or its socket failed:
 *         nothing was queued); MELY_EINVAL (s NULL, or data NULL with len
 *         > 0); MELY_ENOMEM.
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
 * (<event2/buffer.h>): read and drain the input, append to the output
 * (appends are sent when the callback returns). Never free them.
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
 * Drains the runtime: stops accepting on every listener (as
 * mely_listener_pause: close them or let mely_shutdown free them), closes
 * every open stream after flushing its output (MELY_STREAM_FLUSH), and
 * stops the runtime (mely_stop) once every closed callback has run and
 * every reference is dropped (the events that carry streams to other
 * colors have run: a shutdown that follows discards none of them). After
 * timeout_ns (0: no limit) the streams left are closed without flushing,
 * and the runtime stops once their closed callbacks have run.
 * Streams opened during the drain are closed the same way. A graceful
 * shutdown: mely_drain from a signal's handler, then mely_shutdown after
 * mely_run returns.
 * @return 0; MELY_ESHUTDOWN; MELY_EBUSY (a drain is in progress);
 *         MELY_ENOMEM.
 * Threads: any thread.
 */
int mely_drain(mely_t *m, uint64_t timeout_ns);

#ifdef __cplusplus
}
#endif

#endif /* MELY_STREAM_H */
