/* SPDX-License-Identifier: MIT */
/*
 * check_stream.c: streams (include/mely/stream.h) through the public API: their data
 * path, over loopback TCP, against clients on plain blocking sockets in
 * helper threads (tests/api/streamtest.h: the server, conns and clients):
 *  - lines split across reads (byte by byte, CRLF split between reads, many
 *    lines in one write), from the line callback and from mely_stream_readln;
 *    lines of exactly the maximum length, and longer ones: -EMSGSIZE to the
 *    event callback, a close without one, readln taking nothing;
 *  - backpressure: the read low and high watermarks; a slow reader under the
 *    write high watermark (the output stays bounded, every byte arrives, the
 *    drained callback runs);
 *  - read and write timeouts (reset by activity; the event, or a close);
 *  - writes from other colors and from a foreign thread (ordered per writer,
 *    all delivered; -EPIPE after a close);
 *  - mely_stream_reading off and on (lines read wait, then come); the
 *    one-line echo with mely_stream_write_buffer;
 *  - a timer of the stream's color fires on time while the idle worker's
 *    yields are slow, as on a loaded CPU (sched_yield is the test's own).
 * Settings are given in the ops (one-worker runs) or set on the stream's
 * color (two workers). Closing, shutdown, drain, connect and argument errors
 * are in check_stream_close.c.
 *
 * Handlers and helper threads never call ck_assert; every wait is bounded.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "tests/api/streamtest.h"

/* ---- lines ------------------------------------------------------------------------------- */

enum { MAX_LINE = 100, MANY_LINES = 2000 };

/* readln: discards the rest of a line too long, through its "\n"; says how
 * many bytes were skipped once it ends. Returns whether it ended. */
static bool skip_line(mely_stream_t *s, struct conn *c)
{
    struct evbuffer *in = mely_stream_input(s);
    struct evbuffer_ptr eol = evbuffer_search(in, "\n", 1, NULL);
    size_t n = eol.pos >= 0 ? (size_t)eol.pos + 1 : evbuffer_get_length(in);
    evbuffer_drain(in, n);
    c->skipped += n;
    if (eol.pos < 0)
        return false;
    c->discarding = false;
    mely_stream_printf(s, "skipped %zu\n", c->skipped);
    return true;
}

/* The read callback of the readln tests: lines as line_cb replies them;
 * -EMSGSIZE must leave the input as it was, and more than max_line in it. */
static void readln_cb(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "read");
    struct evbuffer *in = mely_stream_input(s);
    for (;;) {
        if (c->discarding && !skip_line(s, c))
            break;
        char *line = (char *)c; /* readln must set it */
        size_t len = 0, before = evbuffer_get_length(in);
        int r = mely_stream_readln(s, &line, &len);
        if (r == 1) {
            reply_line(s, c, line, len);
        } else if (r == 0) {
            if (line != NULL)
                note("stream %u: readln returned 0 and left *line set", c->id);
            break;
        } else if (r == -EMSGSIZE) {
            if (evbuffer_get_length(in) != before)
                note("stream %u: readln's -EMSGSIZE took %zu bytes", c->id,
                     before - evbuffer_get_length(in));
            if (before <= MAX_LINE)
                note("stream %u: -EMSGSIZE with %zu bytes in the input", c->id, before);
            c->discarding = true;
            c->skipped = 0;
        } else {
            note("stream %u: readln: %d (%s)", c->id, r, mely_strerror(r));
            break;
        }
    }
    leave(c);
}

static const struct {
    unsigned workers;
    bool readln;
} line_modes[] = {{1, false}, {2, false}, {1, true}, {2, true}};

static void *lines_client(void *arg)
{
    (void)arg;
    char *exp = NULL, *many = NULL, *got = NULL;
    size_t explen = 0, manylen = 0;
    bool ok = false;
    int fd = client_ready(1, 0);
    if (fd < 0)
        goto out;
    FILE *e = open_memstream(&exp, &explen), *m = open_memstream(&many, &manylen);
    if (!e || !m) {
        note("open_memstream: %s", strerror(errno));
        goto out;
    }
    for (const char *p = "byte by byte\r\n"; *p; p++) { /* one segment each (TCP_NODELAY) */
        send_all(fd, p, 1);
        sleep_us(2000);
    }
    fprintf(e, "12:byte by byte\n");
    send_str(fd, "split crlf\r");
    sleep_us(20000);
    send_str(fd, "\n");
    fprintf(e, "10:split crlf\n");
    send_str(fd, "\n\r\na\rb\n"); /* two empty lines; a CR inside a line stays */
    fprintf(e, "0:\n0:\n3:a\rb\n");
    for (unsigned i = 0; i < MANY_LINES; i++) {
        int n = fprintf(m, "line %u of many%s", i, i % 2 ? "\r\n" : "\n");
        fprintf(e, "%d:line %u of many\n", n - (i % 2 ? 2 : 1), i);
    }
    fclose(m);
    fclose(e);
    send_all(fd, many, manylen);
    shutdown(fd, SHUT_WR);
    got = malloc(explen + 64);
    int end = 0;
    size_t n = got ? recv_upto(fd, got, explen + 64, WAIT_MS, &end) : 0;
    size_t same = 0;
    while (same < n && same < explen && got[same] == exp[same])
        same++;
    if (n != explen || same != explen)
        note("%zu bytes of replies, %zu expected; the first %zu match (then \"%.30s\")", n, explen,
             same, same < n ? got + same : "");
    if (end != 1)
        note("no EOF after the replies: the stream should close after flushing on EOF");
    ok = n == explen && same == explen && end == 1;
out:
    free(exp);
    free(many);
    free(got);
    return client_done(fd, ok);
}

/*
 * A line sent byte by byte (2 ms apart), a CRLF split between two reads, empty
 * lines and a CR inside a line, 2,000 lines (LF and CRLF) in one write; then
 * EOF. Each line is replied as "len:line" (checking line[len] == 0): from the
 * line callback, and from mely_stream_readln in a read callback. Without an
 * event callback, EOF closes the stream after the replies are sent.
 */
START_TEST(lines_split_across_reads)
{
    mely_stream_ops_t ops = {.closed = on_closed};
    if (line_modes[_i].readln)
        ops.read = readln_cb;
    else
        ops.line = line_cb;
    serve(line_modes[_i].workers, &ops, NULL, false, lines_client, NULL,
          line_modes[_i].readln ? "readln" : "line");
    assert_closed_once(1);
    stop_server();
}
END_TEST

/* ---- lines too long ---------------------------------------------------------------------- */

enum huge_how { BY_EVENT, BY_DEFAULT, BY_READLN };

static const struct {
    unsigned workers;
    enum huge_how how;
    bool eol; /* the line too long has its end of line (else it never ends) */
} huge_modes[] = {
    {2, BY_EVENT, true},    {1, BY_EVENT, false}, {2, BY_EVENT, false},
    {2, BY_DEFAULT, false}, {2, BY_READLN, true}, {1, BY_READLN, true},
};

static void setup_max_line(mely_stream_t *s, struct conn *c)
{
    int err = mely_stream_max_line(s, MAX_LINE);
    if (err)
        note("stream %u: mely_stream_max_line: %s", c->id, mely_strerror(err));
}

/* Says what it got, then closes after flushing that. */
static void error_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    record_event(c, what, err);
    mely_stream_printf(s, "E%u %d\n", what, err);
    int rc = mely_stream_close(s, MELY_STREAM_FLUSH);
    if (rc)
        note("stream %u: mely_stream_close: %s", c->id, mely_strerror(rc));
    leave(c);
}

static char *repeat(char ch, size_t n, const char *tail)
{
    char *b = malloc(n + strlen(tail) + 1);
    if (!b) {
        note("out of memory");
        return NULL;
    }
    memset(b, ch, n);
    strcpy(b + n, tail);
    return b;
}

/* Sends n times ch then tail (in one write), and expects the reply. */
static bool send_run(int fd, char ch, size_t n, const char *tail, const char *reply)
{
    char *b = repeat(ch, n, tail);
    bool ok = b && send_str(fd, b) && (!reply || expect(fd, reply));
    free(b);
    return ok;
}

static void *huge_client(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    char *max_a = repeat('a', MAX_LINE, ""), *max_c = repeat('c', MAX_LINE, "");
    char reply[MAX_LINE + 16];
    int fd = client_ready(1, 0);
    bool ok = fd >= 0 && max_a && max_c && send_str(fd, "ok\n") && expect(fd, "2:ok\n");
    /* Exactly the maximum: with LF, CRLF, and a CRLF split between reads. */
    snprintf(reply, sizeof(reply), "%d:%s\n", MAX_LINE, max_a ? max_a : "");
    ok = ok && send_run(fd, 'a', MAX_LINE, "\n", reply) &&
         send_run(fd, 'a', MAX_LINE, "\r\n", reply) && send_run(fd, 'c', MAX_LINE, "\r", NULL);
    sleep_us(20000);
    snprintf(reply, sizeof(reply), "%d:%s\n", MAX_LINE, max_c ? max_c : "");
    ok = ok && send_run(fd, '\n', 1, "", reply);
    free(max_a);
    free(max_c);

    /* One byte more, with its end of line, or 5000 without one. */
    size_t over = huge_modes[i].eol ? MAX_LINE + 1 : 5000;
    const char *tail = huge_modes[i].eol ? "\n" : "";
    if (!ok)
        return client_done(fd, false);
    switch (huge_modes[i].how) {
    case BY_EVENT:
        snprintf(reply, sizeof(reply), "E%u %d\n", MELY_STREAM_ERROR, -EMSGSIZE);
        ok = send_run(fd, 'e', over, tail, reply) && expect_end(fd, NULL);
        break;
    case BY_DEFAULT:
        ok = send_run(fd, 'e', over, tail, NULL) && expect_end(fd, NULL);
        break;
    case BY_READLN:
        snprintf(reply, sizeof(reply), "skipped %zu\n5:after\n", over + 1);
        ok = send_run(fd, 'e', over, "\nafter\n", reply) && send_run(fd, 'x', 5000, "", NULL);
        sleep_us(20000);
        ok = ok && send_str(fd, "\nlast\n") && expect(fd, "skipped 5001\n4:last\n") &&
             shutdown(fd, SHUT_WR) == 0 && expect_end(fd, NULL);
        break;
    }
    return client_done(fd, ok);
}

/*
 * mely_stream_max_line(100): lines of exactly 100 bytes are accepted (LF,
 * CRLF, CRLF split between reads); one of 101 bytes with its LF, or 5000
 * without an end of line, is MELY_STREAM_ERROR with -EMSGSIZE to the event
 * callback; without one, the stream closes. From a read callback, readln
 * returns -EMSGSIZE and leaves the input as it was (the test discards the
 * line itself and reads on).
 */
START_TEST(lines_longer_than_the_maximum)
{
    mely_stream_ops_t ops = {.closed = on_closed};
    const char *name = "line, event callback";
    switch (huge_modes[_i].how) {
    case BY_EVENT:
        ops.line = line_cb;
        ops.event = error_event_cb;
        break;
    case BY_DEFAULT:
        ops.line = line_cb;
        name = "line, no event callback";
        break;
    case BY_READLN:
        ops.read = readln_cb;
        name = "readln";
        break;
    }
    /* One worker: the maximum given in the ops; two: set on the stream's color. */
    ops.max_line = huge_modes[_i].workers == 1 ? MAX_LINE : 0;
    serve(huge_modes[_i].workers, &ops, ops.max_line ? NULL : setup_max_line, false, huge_client,
          (void *)(uintptr_t)_i, name);
    assert_closed_once(1);
    if (huge_modes[_i].how == BY_EVENT) {
        ck_assert_uint_eq(atomic_load(&srv.events), 1);
        ck_assert_uint_eq(atomic_load(&srv.ev_what[0]), MELY_STREAM_ERROR);
        ck_assert_int_eq(atomic_load(&srv.ev_err[0]), -EMSGSIZE);
    }
    stop_server();
}
END_TEST

/* ---- read watermarks --------------------------------------------------------------------- */

enum { READ_LOW = 100 };

static void setup_read_low(mely_stream_t *s, struct conn *c)
{
    int err = mely_stream_watermark(s, MELY_READ, READ_LOW, 0);
    if (err)
        note("stream %u: mely_stream_watermark: %s", c->id, mely_strerror(err));
}

static void low_read_cb(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "read");
    size_t n = evbuffer_get_length(mely_stream_input(s));
    if (n < READ_LOW)
        note("stream %u: read callback with %zu bytes, under the low watermark", c->id, n);
    take_pat(s, c);
    mely_stream_printf(s, "got %zu\n", n);
    leave(c);
}

static void *read_low_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, 0);
    bool ok = fd >= 0;
    if (ok) {
        send_pat(fd, 0, 60);
        expect_quiet(fd, "60 bytes, low watermark 100");
        send_pat(fd, 60, 50);
        ok = expect(fd, "got 110\n");
    }
    if (ok) {
        send_pat(fd, 110, 99);
        expect_quiet(fd, "99 bytes, low watermark 100");
        send_pat(fd, 209, 1);
        ok = expect(fd, "got 100\n") && shutdown(fd, SHUT_WR) == 0 && expect_end(fd, NULL);
    }
    return client_done(fd, ok);
}

/* Read low watermark 100: 60 bytes wake nothing, 50 more make one call that
 * sees 110; 99 wake nothing, one more makes a call that sees 100. */
START_TEST(read_low_watermark_waits)
{
    mely_stream_ops_t ops = {.read = low_read_cb, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    ops.read_low = workers == 1 ? READ_LOW : 0; /* in the ops, or set on the color */
    serve(workers, &ops, ops.read_low ? NULL : setup_read_low, false, read_low_client, NULL,
          "read low watermark");
    assert_closed_once(1);
    stop_server();
}
END_TEST

enum {
    READ_HIGH = 16384,
    READ_SLACK = 131072, /* one read (libevent 2.1 reads 4 KiB at a time; generous) */
    READ_TOTAL = 1 << 20,
    HOLD_MS = 5, /* how long a full input is left alone */
};

static void setup_read_high(mely_stream_t *s, struct conn *c)
{
    int err = mely_stream_watermark(s, MELY_READ, 0, READ_HIGH);
    if (err)
        note("stream %u: mely_stream_watermark: %s", c->id, mely_strerror(err));
}

static void say_done(mely_stream_t *s, struct conn *c)
{
    if (c->got >= READ_TOTAL && !c->done) {
        c->done = true;
        mely_stream_printf(s, "done %llu\n", (unsigned long long)c->got);
    }
}

/* HOLD_MS after the input filled up: an event of the stream's color (not a
 * callback) takes it all. Reading must have paused meanwhile, and resumes. */
static void high_drain(void *arg)
{
    struct conn *c = arg;
    mely_stream_t *s = c->s;
    if (!atomic_load(&c->closed)) {
        size_t n = evbuffer_get_length(mely_stream_input(s));
        max_store(&srv.maxlen, n);
        atomic_fetch_add(&srv.n, 1);
        take_pat(s, c);
        c->timer_pending = false;
        say_done(s, c);
    }
    mely_stream_unref(s);
}

/* Leaves the input alone until it reaches the high watermark. */
static void high_read_cb(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "read");
    size_t n = evbuffer_get_length(mely_stream_input(s));
    max_store(&srv.maxlen, n);
    if (c->got + n >= READ_TOTAL) {
        take_pat(s, c);
        say_done(s, c);
    } else if (n >= READ_HIGH && !c->timer_pending) {
        c->timer_pending = true;
        mely_stream_ref(s);
        int err = mely_timer_after(&rt, HOLD_MS * 1000000ull, MELY_TO(mely_stream_color(s)),
                                   high_drain, c, NULL);
        if (err) {
            note("mely_timer_after: %s", mely_strerror(err));
            mely_stream_unref(s);
        }
    }
    leave(c);
}

static void *read_high_client(void *arg)
{
    (void)arg;
    char done[64];
    snprintf(done, sizeof(done), "done %d\n", READ_TOTAL);
    int fd = client_ready(1, 0);
    if (fd >= 0)
        send_pat(fd, 0, READ_TOTAL);
    bool ok = fd >= 0 && expect(fd, done) && shutdown(fd, SHUT_WR) == 0 && expect_end(fd, NULL);
    return client_done(fd, ok);
}

/*
 * Read high watermark 16 KiB: the read callback leaves the input alone once
 * it is full, and an event 5 ms later takes it all. Meanwhile reading pauses
 * (the input never holds more than the mark and one read), and it resumes
 * once the input is drained: 1 MiB arrives, byte-exact.
 */
START_TEST(read_high_watermark_pauses)
{
    mely_stream_ops_t ops = {.read = high_read_cb, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    serve(workers, &ops, setup_read_high, false, read_high_client, NULL, "read high watermark");
    assert_closed_once(1);
    uint64_t max = atomic_load(&srv.maxlen);
    printf("read high watermark (%u workers): %u drains, the input held at most %llu bytes\n",
           workers, atomic_load(&srv.n), (unsigned long long)max);
    ck_assert_msg(atomic_load(&srv.n) >= 1, "the input never filled up");
    ck_assert_msg(max <= READ_HIGH + READ_SLACK,
                  "the input held %llu bytes: reading did not pause at the high watermark (%d)",
                  (unsigned long long)max, READ_HIGH);
    stop_server();
}
END_TEST

/* ---- a slow reader: the write high watermark ----------------------------------------------- */

enum {
    WRITE_LOW = 16384,
    WRITE_HIGH = 65536,
    WRITE_SLACK = 262144, /* the replies to one read's lines (generous) */
    SLOW_LINE = 1000,
    SLOW_MAX = 64 << 20, /* a client that sent this much saw no backpressure */
};

static void setup_slow(mely_stream_t *s, struct conn *c)
{
    int err = mely_stream_watermark(s, MELY_WRITE, WRITE_LOW, WRITE_HIGH);
    if (err)
        note("stream %u: mely_stream_watermark: %s", c->id, mely_strerror(err));
    small_sndbuf(s);
}

/* Echoes the line (it may be modified: its 0 becomes the "\n" again). */
static void echo_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    line[len] = '\n';
    int err = mely_stream_write(s, line, len + 1);
    if (err)
        note("stream %u: mely_stream_write: %s", c->id, mely_strerror(err));
    leave(c);
}

static void count_drained(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "drained");
    size_t n = evbuffer_get_length(mely_stream_output(s));
    if (n > WRITE_LOW)
        note("stream %u: drained callback with %zu bytes in the output (low watermark %d)", c->id,
             n, WRITE_LOW);
    atomic_fetch_add(&srv.n, 1);
    leave(c);
}

/* The byte at offset o of the slow client's lines. */
static uint8_t slow_byte(uint64_t o)
{
    uint64_t i = o % SLOW_LINE;
    return i == SLOW_LINE - 1 ? '\n' : (uint8_t)('a' + (o / SLOW_LINE + i) % 26);
}

static _Atomic uint64_t sampled; /* the output's length, +1 (0: not yet) */

/* mely_stream_queued, exact on the stream's color; mely_stream_output
 * would have the batch's end send what the socket takes meanwhile. */
static void sample_output(void *arg)
{
    mely_stream_t *s = arg;
    atomic_store(&sampled, mely_stream_queued(s) + 1);
}

/* The length of s's output, read on its color (s is referenced). */
static uint64_t output_length(mely_stream_t *s)
{
    atomic_store(&sampled, 0);
    int err = mely_post(&rt, mely_stream_color(s), sample_output, s);
    if (err) {
        note("mely_post: %s", mely_strerror(err));
        return 0;
    }
    uint64_t deadline = now_ns() + (uint64_t)WAIT_MS * 1000000u;
    while (atomic_load(&sampled) == 0 && now_ns() < deadline)
        sleep_us(100);
    uint64_t v = atomic_load(&sampled);
    if (v == 0)
        note("the output was not sampled within %u ms", WAIT_MS);
    return v ? v - 1 : 0;
}

/* The stall send_until_stalled waits for: the server's output is over the
 * high watermark too (its length in *out_len). */
struct slow_stall {
    mely_stream_t *s;
    uint64_t out_len;
};

static bool output_over_high(void *arg)
{
    struct slow_stall *st = arg;
    return (st->out_len = output_length(st->s)) > WRITE_HIGH;
}

static void *slow_client(void *arg)
{
    (void)arg;
    bool ok = false;
    int fd = client_ready(1, SMALL_BUF);
    if (fd < 0)
        goto out;
    mely_stream_t *s = srv.stream[0];
    struct slow_stall st = {.s = s};
    uint64_t sent = send_until_stalled(fd, SLOW_MAX, slow_byte, output_over_high, &st,
                                       "lines to a server that never stopped reading");
    uint64_t out1 = st.out_len;
    sleep_us(QUIET_MS * 1000); /* stalled: nothing moves */
    uint64_t out2 = output_length(s);
    max_store(&srv.maxlen, out1 > out2 ? out1 : out2);
    if (out2 != out1)
        note("the output went from %llu to %llu bytes while the peer read nothing",
             (unsigned long long)out1, (unsigned long long)out2);
    printf("slow reader: %llu bytes sent before the stall, %llu in the server's output\n",
           (unsigned long long)sent, (unsigned long long)out1);
    /* Every complete line comes back; then the last one is completed. */
    uint64_t whole = sent - sent % SLOW_LINE;
    char rest[SLOW_LINE];
    for (uint64_t o = sent; o < whole + SLOW_LINE; o++)
        rest[o - sent] = (char)slow_byte(o);
    ok = expect_bytes(fd, 0, whole, slow_byte) &&
         (sent == whole || (send_all(fd, rest, (size_t)(whole + SLOW_LINE - sent)) &&
                            expect_bytes(fd, whole, SLOW_LINE, slow_byte))) &&
         shutdown(fd, SHUT_WR) == 0 && expect_end(fd, NULL);
out:
    return client_done(fd, ok);
}

/*
 * An echo of 1000-byte lines to a client that sends without reading: once
 * the output passes the write high watermark (64 KiB), the stream stops
 * reading, so the output stays under the mark plus the replies to one read,
 * and stays put. Then the client reads: everything comes back byte-exact,
 * and the drained callback ran (with the output at the low watermark).
 */
START_TEST(slow_reader_bounds_the_output)
{
    mely_stream_ops_t ops = {.line = echo_line_cb, .drained = count_drained, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    serve(workers, &ops, setup_slow, true, slow_client, NULL, "slow reader");
    assert_closed_once(1);
    uint64_t max = atomic_load(&srv.maxlen);
    ck_assert_msg(max <= WRITE_HIGH + WRITE_SLACK,
                  "the output held %llu bytes (write high watermark %d)", (unsigned long long)max,
                  WRITE_HIGH);
    ck_assert_msg(atomic_load(&srv.n) >= 1, "the drained callback never ran");
    stop_server();
}
END_TEST

/* ---- a timer beside a loaded CPU ---------------------------------------------------------- */

/*
 * sched_yield as a loaded CPU answers it. While yield_us is set, every call
 * gives the CPU away for that long, as a yield does for the rest of a time
 * slice when other threads want the CPU (milliseconds beside two CPU hogs);
 * otherwise it is the system call. This definition interposes on libc's, for
 * the runtime's calls too (an idle worker with watches spins with
 * sched_yield: idle.c): deterministic where the hogs are not.
 */
static atomic_uint yield_us;

int sched_yield(void)
{
    unsigned us = atomic_load_explicit(&yield_us, memory_order_relaxed);
    if (us) {
        sleep_us(us);
        return 0;
    }
    return (int)syscall(SYS_sched_yield);
}

enum {
    LATE_TIMER_MS = 5, /* the timer a line sets, as read_high_watermark_pauses's HOLD_MS */
    LATE_LINES = 5,    /* lines, one at a time */
    SLOW_YIELD_US = 4000,
    LATE_MAX_MS = 40,  /* the least lateness must stay below it: ten slow yields */
};

static uint64_t late_due;                      /* the stream's color only */
static _Atomic uint64_t late_min = UINT64_MAX; /* ns */

/* LATE_TIMER_MS after a line: how late it came, then the reply. */
static void late_reply(void *arg)
{
    struct conn *c = arg;
    mely_stream_t *s = c->s;
    if (!atomic_load(&c->closed)) {
        uint64_t now = mely_now_ns(), late = now > late_due ? now - late_due : 0;
        max_store(&srv.maxlen, late);
        uint64_t min = atomic_load(&late_min);
        while (late < min && !atomic_compare_exchange_weak(&late_min, &min, late))
            ;
        mely_stream_printf(s, "tick\n");
    }
    mely_stream_unref(s);
}

/* Each line sets a timer of the stream's color LATE_TIMER_MS from now. */
static void late_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    (void)line;
    (void)len;
    enter(s, c, "line");
    late_due = mely_now_ns() + LATE_TIMER_MS * 1000000ull;
    mely_stream_ref(s);
    int err = mely_timer_at(&rt, late_due, MELY_TO(mely_stream_color(s)), late_reply, c, NULL);
    if (err) {
        note("mely_timer_at: %s", mely_strerror(err));
        mely_stream_unref(s);
    }
    leave(c);
}

static void *late_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, 0);
    bool ok = fd >= 0;
    for (int i = 0; ok && i < LATE_LINES; i++)
        ok = send_all(fd, "t\n", 2) && expect(fd, "tick\n");
    ok = ok && shutdown(fd, SHUT_WR) == 0 && expect_end(fd, NULL);
    return client_done(fd, ok);
}

/*
 * A line sets a timer 5 ms out, whose event replies; meanwhile the worker
 * is idle, and it spins (it has watches: with sched_yield) before it parks
 * until the deadline. With every yield taking SLOW_YIELD_US, the spin must
 * still end after one yield, not after the 32 that passed between two reads
 * of the clock: those made a 50 us spin last 0.3 s beside two CPU hogs, and
 * every 5 ms timer of read_high_watermark_pauses fired that late (its 64
 * drains outlasted the client's 10 s). The timer's heap is on the worker
 * that runs the line (no stealing: a color's home is its owner), which goes
 * idle right after it, so with 32 yields per clock read every timer came
 * 32 * 4 - 5 = 123 ms late at least. Lateness is noise only upwards: the
 * least of the LATE_LINES is compared.
 */
START_TEST(timer_on_time_while_yields_are_slow)
{
    mely_stream_ops_t ops = {.line = late_line_cb, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    start_server(workers, &ops, NULL, false);
    atomic_store(&late_min, UINT64_MAX);
    atomic_store(&yield_us, SLOW_YIELD_US);
    run_with_helper(&rt, late_client, NULL, 60, "a timer beside slow yields");
    atomic_store(&yield_us, 0);
    assert_closed_once(1);
    uint64_t min = atomic_load(&late_min), max = atomic_load(&srv.maxlen);
    printf("slow yields (%u workers): a %d ms timer came %.1f to %.1f ms late\n", workers,
           LATE_TIMER_MS, min / 1e6, max / 1e6);
    ck_assert_msg(min < LATE_MAX_MS * 1000000ull,
                  "a %d ms timer came at least %.1f ms late while the idle worker's yields "
                  "took %d us each: the spin did not end after one",
                  LATE_TIMER_MS, min / 1e6, SLOW_YIELD_US);
    stop_server();
}
END_TEST

/* ---- timeouts ---------------------------------------------------------------------------- */

/* TIMEOUT_MS: longer than any pause a loaded machine gives the client
 * between two of its steps (at 150 ms, a reader reading every 5 ms was
 * held long enough for the write timeout to fire, in CI with two hogs). */
enum { TIMEOUT_MS = 1000, TICK_MS = 15, TICKS = 15 };

static void setup_read_timeout(mely_stream_t *s, struct conn *c)
{
    int err = mely_stream_timeouts(s, TIMEOUT_MS * 1000000ull, 0);
    if (err)
        note("stream %u: mely_stream_timeouts: %s", c->id, mely_strerror(err));
}

/* A dot for every read. */
static void tick_read_cb(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "read");
    struct evbuffer *in = mely_stream_input(s);
    evbuffer_drain(in, evbuffer_get_length(in));
    mely_stream_write(s, ".", 1);
    leave(c);
}

/* Says "T<n> <what>" for each timeout and stays open; closes at the second. */
static void timeout_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    record_event(c, what, err);
    if (what & MELY_STREAM_TIMEOUT) {
        c->timeouts++;
        mely_stream_printf(s, "T%u %u\n", c->timeouts, what);
        if (c->timeouts == 2)
            mely_stream_close(s, MELY_STREAM_FLUSH);
    } else {
        note("stream %u: event %u (err %d), expected a timeout", c->id, what, err);
        mely_stream_close(s, 0);
    }
    leave(c);
}

/* Sends a byte every TICK_MS, TICKS times; returns when it sent the last. */
static uint64_t tick(int fd)
{
    uint64_t last = 0;
    for (int i = 0; i < TICKS; i++) {
        send_str(fd, "x");
        last = now_ns();
        if (i + 1 < TICKS)
            sleep_us(TICK_MS * 1000);
    }
    return last;
}

/* Dots (one per read, so between 1 and TICKS) and then `line`. */
static void expect_dots_then(struct lr *lr, const char *line)
{
    char buf[128];
    if (!next_line(lr, buf, sizeof(buf), WAIT_MS)) {
        note("no line after the ticks (expected dots and \"%s\")", line);
        return;
    }
    size_t dots = strspn(buf, ".");
    if (dots < 1 || dots > TICKS || strcmp(buf + dots, line) != 0)
        note("got \"%s\", expected 1 to %d dots then \"%s\"", buf, TICKS, line);
}

static void *read_timeout_client(void *arg)
{
    bool with_event = arg != NULL;
    char line[64];
    int fd = client_ready(1, 0);
    if (fd < 0)
        goto out;
    uint64_t last = tick(fd);
    struct lr lr = {.fd = fd};
    if (with_event) {
        snprintf(line, sizeof(line), "T1 %u", MELY_STREAM_TIMEOUT | MELY_READ);
        expect_dots_then(&lr, line);
        snprintf(line, sizeof(line), "T2 %u", MELY_STREAM_TIMEOUT | MELY_READ);
        char got[64];
        if (!next_line(&lr, got, sizeof(got), WAIT_MS) || strcmp(got, line) != 0)
            note("expected \"%s\" after the first timeout", line);
        if (lr.len)
            note("%zu bytes after the second timeout's line", lr.len);
        expect_end(fd, NULL);
        uint64_t t1 = atomic_load(&srv.t_event[0]), t2 = atomic_load(&srv.t_event[1]);
        if (t1 < last + (TIMEOUT_MS - EARLY_MS) * 1000000ull)
            note("the read timeout fired %.1f ms after the last byte (timeout %d ms)",
                 ((double)t1 - (double)last) / 1e6, TIMEOUT_MS);
        if (t2 < t1 + (TIMEOUT_MS - EARLY_MS) * 1000000ull)
            note("the second timeout came %.1f ms after the first", (t2 - t1) / 1e6);
    } else {
        uint64_t n = 0;
        expect_end(fd, &n);
        if (n < 1 || n > TICKS)
            note("%llu bytes before EOF, expected 1 to %d dots", (unsigned long long)n, TICKS);
    }
    wait_closed(1);
    uint64_t closed = atomic_load(&srv.t_closed);
    if (closed < last + (TIMEOUT_MS - EARLY_MS) * 1000000ull)
        note("closed %.1f ms after the last byte (read timeout %d ms)",
             ((double)closed - (double)last) / 1e6, TIMEOUT_MS);
out:
    return client_done(fd, false); /* waited above */
}

static const struct {
    unsigned workers;
    bool event;
} timeout_modes[] = {{2, true}, {1, true}, {2, false}};

/*
 * Read timeout TIMEOUT_MS: a byte every 15 ms for 225 ms keeps it from firing
 * (activity resets it); then it fires TIMEOUT_MS after the last byte, as
 * MELY_STREAM_TIMEOUT | MELY_READ, and again TIMEOUT_MS later on the stream left
 * open (the event callback closes it then). Without an event callback the
 * stream closes at the first timeout.
 */
START_TEST(read_timeout_fires_when_idle)
{
    mely_stream_ops_t ops = {.read = tick_read_cb, .closed = on_closed};
    if (timeout_modes[_i].event)
        ops.event = timeout_event_cb;
    /* One worker: the timeout given in the ops; two: set on the stream's color. */
    ops.read_timeout_ns = timeout_modes[_i].workers == 1 ? TIMEOUT_MS * 1000000ull : 0;
    serve(timeout_modes[_i].workers, &ops, ops.read_timeout_ns ? NULL : setup_read_timeout, false,
          read_timeout_client, timeout_modes[_i].event ? &srv : NULL,
          timeout_modes[_i].event ? "read timeout" : "read timeout, no event");
    assert_closed_once(1);
    if (timeout_modes[_i].event) {
        ck_assert_uint_eq(atomic_load(&srv.events), 2);
        ck_assert_uint_eq(atomic_load(&srv.ev_what[0]), MELY_STREAM_TIMEOUT | MELY_READ);
    }
    stop_server();
}
END_TEST

enum { PRODUCE_AHEAD = 512 << 10, PRODUCE_MAX = 256 << 20 };

static void setup_write_timeout(mely_stream_t *s, struct conn *c)
{
    int err = mely_stream_timeouts(s, 0, TIMEOUT_MS * 1000000ull);
    if (!err) /* drained below 256 KiB; reading never pauses (high 0) */
        err = mely_stream_watermark(s, MELY_WRITE, PRODUCE_AHEAD / 2, 0);
    if (err)
        note("stream %u: timeouts or watermark: %s", c->id, mely_strerror(err));
    small_sndbuf(s);
}

/* Keeps PRODUCE_AHEAD of the pattern in the output. */
static void produce(mely_stream_t *s, struct conn *c)
{
    while (c->produced < PRODUCE_MAX &&
           evbuffer_get_length(mely_stream_output(s)) < PRODUCE_AHEAD) {
        if (!write_pat(s, c->produced, CHUNK))
            return;
        c->produced += CHUNK;
    }
}

static void produce_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    (void)len;
    if (strcmp(line, "GO") == 0)
        produce(s, c);
    leave(c);
}

static void produce_drained_cb(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "drained");
    produce(s, c);
    leave(c);
}

static void *write_timeout_client(void *arg)
{
    bool with_event = arg != NULL;
    uint8_t buf[CHUNK];
    int fd = client_ready(1, SMALL_BUF);
    if (fd < 0)
        goto out;
    send_str(fd, "GO\n");
    /* 300 ms of a steady reader: the output moves, no timeout. */
    uint64_t got = 0, t = now_ns() + 300 * 1000000ull;
    while (now_ns() < t) {
        int end;
        size_t k = recv_some(fd, buf, sizeof(buf), 100, &end);
        if (bad_pat(buf, got, k) < k) {
            note("byte %llu differs", (unsigned long long)got);
            goto out;
        }
        got += k;
        sleep_us(5000);
    }
    if (atomic_load(&srv.closed) || atomic_load(&srv.events))
        note("the write timeout fired while the peer was reading");
    /* The peer stops reading. (When the output last moved, the client cannot
     * tell: its socket buffer held what it read last.) */
    if (!wait_count(&srv.closed, 1, WAIT_MS))
        note("the write timeout did not close the stream");
    else if (with_event != (atomic_load(&srv.events) == 1))
        note("%u events for a write timeout", atomic_load(&srv.events));
    pat_to_end(fd, got);
out:
    return client_done(fd, false); /* waited above */
}

/*
 * Write timeout TIMEOUT_MS, on a stream that writes without end: while the
 * peer reads (a little every 5 ms) it does not fire; once the peer stops
 * reading, it fires TIMEOUT_MS after the output stopped moving: MELY_STREAM_TIMEOUT |
 * MELY_WRITE to the event callback (which closes), or without one a close.
 */
START_TEST(write_timeout_fires_when_the_peer_never_reads)
{
    mely_stream_ops_t ops = {
        .line = produce_line_cb, .drained = produce_drained_cb, .closed = on_closed};
    if (timeout_modes[_i].event)
        ops.event = close_event_cb;
    if (timeout_modes[_i].workers == 1) { /* in the ops, or set on the color */
        ops.write_timeout_ns = TIMEOUT_MS * 1000000ull;
        ops.write_low = PRODUCE_AHEAD / 2;
    }
    serve(timeout_modes[_i].workers, &ops,
          ops.write_timeout_ns ? setup_small_sndbuf : setup_write_timeout, false,
          write_timeout_client, timeout_modes[_i].event ? &srv : NULL,
          timeout_modes[_i].event ? "write timeout" : "write timeout, no event");
    assert_closed_once(1);
    if (timeout_modes[_i].event) {
        ck_assert_uint_eq(atomic_load(&srv.events), 1);
        ck_assert_uint_eq(atomic_load(&srv.ev_what[0]), MELY_STREAM_TIMEOUT | MELY_WRITE);
    }
    stop_server();
}
END_TEST

/* ---- writes from other colors and threads ------------------------------------------------ */

enum { WRITERS = 4, WRITE_BATCH = 50 };

static struct writer {
    unsigned k, seq, n;
} writers[WRITERS];

static atomic_int late_rc; /* a write from another color after the close */

/* Writes WRITE_BATCH records, then posts itself for the next ones: one
 * writer's events follow each other on its color. */
static void writer_event(void *arg)
{
    struct writer *w = arg;
    mely_stream_t *s = srv.stream[0];
    for (unsigned i = 0; i < WRITE_BATCH && w->seq < w->n; i++, w->seq++) {
        int err = mely_stream_printf(s, "w%u %u\n", w->k, w->seq);
        if (err) {
            note("writer %u: mely_stream_printf: %s", w->k, mely_strerror(err));
            return;
        }
    }
    if (w->seq < w->n) {
        int err = mely_post(&rt, OTHER_COLOR(w->k), writer_event, w);
        if (err)
            note("mely_post: %s", mely_strerror(err));
    }
}

static void late_write_event(void *arg)
{
    atomic_store(&late_rc, mely_stream_write(arg, "late\n", 5));
}

/* Reads records "w<k> <seq>" until every writer's n arrived, each writer's in order. */
static bool expect_records(int fd, unsigned nwriters, unsigned n)
{
    unsigned next[WRITERS + 1] = {0}, total = 0;
    struct lr *lr = calloc(1, sizeof(*lr));
    if (!lr)
        return false;
    lr->fd = fd;
    char line[64];
    while (total < nwriters * n) {
        unsigned k, seq;
        if (!next_line(lr, line, sizeof(line), WAIT_MS)) {
            note("%u of %u records arrived", total, nwriters * n);
            break;
        }
        if (sscanf(line, "w%u %u", &k, &seq) != 2 || k >= nwriters) {
            note("a stray line: \"%s\"", line);
            break;
        }
        if (seq != next[k]) {
            note("writer %u: record %u arrived where %u was due", k, seq, next[k]);
            break;
        }
        next[k]++;
        total++;
    }
    free(lr);
    return total == nwriters * n;
}

static void *writes_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, 0);
    if (fd < 0)
        goto out;
    mely_stream_t *s = srv.stream[0];
    unsigned n = scaled(2000, 200, 100000);
    for (unsigned k = 0; k < WRITERS; k++) {
        writers[k] = (struct writer){.k = k, .n = n};
        int err = mely_post(&rt, OTHER_COLOR(k), writer_event, &writers[k]);
        if (err)
            note("mely_post: %s", mely_strerror(err));
    }
    for (unsigned seq = 0; seq < n; seq++) { /* this thread is writer WRITERS */
        int err = mely_stream_printf(s, "w%u %u\n", WRITERS, seq);
        if (err) {
            note("foreign writer: mely_stream_printf: %s", mely_strerror(err));
            break;
        }
    }
    if (!expect_records(fd, WRITERS + 1, n))
        goto out;

    /* Closed from this thread: writes fail at once, from here and from a color. */
    int err = mely_stream_close(s, 0);
    if (err)
        note("mely_stream_close: %s", mely_strerror(err));
    if ((err = mely_stream_write(s, "x", 1)) != -EPIPE)
        note("a write after mely_stream_close returned %d, not -EPIPE", err);
    wait_closed(1);
    if ((err = mely_stream_printf(s, "%s", "late")) != -EPIPE)
        note("a printf after the closed callback returned %d, not -EPIPE", err);
    atomic_store(&late_rc, 1);
    mely_post(&rt, OTHER_COLOR(0), late_write_event, s);
    uint64_t deadline = now_ns() + (uint64_t)WAIT_MS * 1000000u;
    while (atomic_load(&late_rc) == 1 && now_ns() < deadline)
        sleep_us(100);
    if (atomic_load(&late_rc) != -EPIPE)
        note("a write from another color after the close returned %d, not -EPIPE",
             atomic_load(&late_rc));
    expect_end(fd, NULL);
out:
    return client_done(fd, false); /* waited above */
}

/*
 * Four colors (chains of events on each) and a foreign thread each write
 * 2,000 numbered records to one stream: all arrive, each writer's in order.
 * Closed from the foreign thread, the stream takes no more writes (-EPIPE,
 * from that thread and from another color), and the client sees EOF.
 */
START_TEST(writes_from_other_colors_and_threads)
{
    mely_stream_ops_t ops = {.closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    serve(workers, &ops, NULL, true, writes_client, NULL, "writers");
    assert_closed_once(1);
    stop_server();
}
END_TEST

/* ---- reading off and on; the one-line echo ---------------------------------------------- */

enum { HOLD_OFF_MS = 50 };

/* HOLD_OFF_MS after "hold": reading on again, from an event of the color. */
static void resume_reading(void *arg)
{
    struct conn *c = arg;
    mely_stream_t *s = c->s;
    if (!atomic_load(&c->closed)) {
        c->timer_pending = false;
        int err = mely_stream_reading(s, 1);
        if (err)
            note("stream %u: mely_stream_reading(1): %s", c->id, mely_strerror(err));
    }
    mely_stream_unref(s);
}

/* Replies; "hold" turns reading off, and no line may come until it is on. */
static void hold_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    if (c->timer_pending)
        note("stream %u: line \"%s\" delivered while reading was off", c->id, line);
    reply_line(s, c, line, len);
    if (strcmp(line, "hold") == 0) {
        int err = mely_stream_reading(s, 0);
        if (err)
            note("stream %u: mely_stream_reading(0): %s", c->id, mely_strerror(err));
        c->timer_pending = true;
        mely_stream_ref(s);
        err = mely_timer_after(&rt, HOLD_OFF_MS * 1000000ull, MELY_TO(mely_stream_color(s)),
                               resume_reading, c, NULL);
        if (err) {
            note("mely_timer_after: %s", mely_strerror(err));
            mely_stream_unref(s);
        }
    }
    leave(c);
}

static void *hold_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, 0);
    bool ok = fd >= 0 && send_str(fd, "a\nhold\nb\nc\n") &&
              expect(fd, "1:a\n4:hold\n1:b\n1:c\n") && send_str(fd, "d\n") &&
              expect(fd, "1:d\n") && shutdown(fd, SHUT_WR) == 0 && expect_end(fd, NULL);
    return client_done(fd, ok);
}

/*
 * mely_stream_reading(s, 0) from the line callback of "hold" (sent with
 * three lines behind it in one write): no line comes while reading is off;
 * turned on again 50 ms later (from an event of the stream's color), the
 * lines already read come without anything more arriving, and reading goes
 * on.
 */
START_TEST(reading_off_holds_lines)
{
    mely_stream_ops_t ops = {.line = hold_line_cb, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    serve(workers, &ops, NULL, false, hold_client, NULL, "reading off and on");
    assert_closed_once(1);
    stop_server();
}
END_TEST

enum { ECHO_BYTES = 1 << 20, ECHO_ROUND = 65536 };

/* The header's one-line echo. */
static void echo_buffer_cb(mely_stream_t *s, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "read");
    int err = mely_stream_write_buffer(s, mely_stream_input(s));
    if (err)
        note("stream %u: mely_stream_write_buffer: %s", c->id, mely_strerror(err));
    leave(c);
}

static void *echo_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, 0);
    bool ok = fd >= 0;
    for (uint64_t off = 0; ok && off < ECHO_BYTES; off += ECHO_ROUND) {
        send_pat(fd, off, ECHO_ROUND);
        ok = expect_pat(fd, off, ECHO_ROUND);
    }
    ok = ok && shutdown(fd, SHUT_WR) == 0 && expect_end(fd, NULL);
    return client_done(fd, ok);
}

/* mely_stream_write_buffer(s, mely_stream_input(s)) echoes 1 MiB byte-exact,
 * in rounds of 64 KiB; EOF then closes the stream after flushing. */
START_TEST(write_buffer_echoes)
{
    mely_stream_ops_t ops = {.read = echo_buffer_cb, .closed = on_closed};
    unsigned workers = 1 + (unsigned)_i;
    serve(workers, &ops, NULL, false, echo_client, NULL, "echo");
    assert_closed_once(1);
    stop_server();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stream");

    TCase *tc = new_tcase(s, "lines", 60);
    tcase_add_loop_test(tc, lines_split_across_reads, 0, NELEM(line_modes));
    tcase_add_loop_test(tc, lines_longer_than_the_maximum, 0, NELEM(huge_modes));

    tc = new_tcase(s, "backpressure", 60);
    tcase_add_loop_test(tc, read_low_watermark_waits, 0, 2);
    tcase_add_loop_test(tc, read_high_watermark_pauses, 0, 2);
    tcase_add_loop_test(tc, slow_reader_bounds_the_output, 0, 2);

    tc = new_tcase(s, "idle", 60);
    tcase_add_loop_test(tc, timer_on_time_while_yields_are_slow, 0, 2);

    tc = new_tcase(s, "timeouts", 60);
    tcase_add_loop_test(tc, read_timeout_fires_when_idle, 0, NELEM(timeout_modes));
    tcase_add_loop_test(tc, write_timeout_fires_when_the_peer_never_reads, 0, NELEM(timeout_modes));

    tc = new_tcase(s, "writers", 60);
    tcase_add_loop_test(tc, writes_from_other_colors_and_threads, 0, 2);
    tcase_add_loop_test(tc, reading_off_holds_lines, 0, 2);
    tcase_add_loop_test(tc, write_buffer_echoes, 0, 2);
    return mely_test_main(s);
}
