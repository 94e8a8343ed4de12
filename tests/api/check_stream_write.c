/* SPDX-License-Identifier: MIT */
/*
 * check_stream_write.c: what streams (include/mely/stream.h) promise about their
 * output, through the public API over loopback TCP (tests/api/streamtest.h: the
 * server, conns and clients):
 *  - coalescing: the events of one batch that write to a stream cost one
 *    send (mely_stats_t.stream_sends) at the end of the worker's turn; a
 *    write, or an append to mely_stream_output, from an event of the
 *    stream's color outside its callbacks is sent by the end of its turn;
 *  - the event bits apart from MELY_READ and MELY_WRITE (checked when
 *    compiling), and a read timeout that an event callback testing EOF
 *    first does not take for EOF;
 *  - writes from other colors and threads in each writer's order, with a
 *    close with flush or a half-close behind one writer's lines; writes
 *    racing with a half-close; a write from a color of the other worker,
 *    then a post to the stream's color whose handler writes: in that order;
 *  - blocks (mely_block_*) written to several streams from another color,
 *    from the streams' own colors and from a foreign thread, dropped by the
 *    writer at once; their argument errors;
 *  - the output cap (ops.output_max, MELY_STREAM_CAP_CLOSE, the 16 MiB
 *    default) against a peer that never reads, from another color and from
 *    the stream's own, and mely_stream_queued read from elsewhere;
 *  - the settings that mean "no limit": timeouts of UINT64_MAX, max_line
 *    SIZE_MAX;
 *  - writers of every kind to several streams in every runtime shape of the
 *    stress tests, stealing included: each writer's lines whole and in
 *    order (a held color is never run elsewhere).
 *
 * Handlers and helper threads never call ck_assert; every wait is bounded.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "tests/api/streamtest.h"

/* What the workers' streams sent so far: stream_sends and stream_bytes of
 * mely_stats_t, summed over the workers. */
struct sent {
    uint64_t sends, bytes;
};

static struct sent sent_now(void)
{
    struct sent t = {0, 0};
    for (unsigned w = 0; w < mely_workers(&rt); w++) {
        mely_stats_t st = stats_of(&rt, w);
        t.sends += st.stream_sends;
        t.bytes += st.stream_bytes;
    }
    return t;
}

/* Posts fn(arg) to s's color (noted if it cannot be). */
static void post_to(mely_stream_t *s, mely_fn_t fn, void *arg)
{
    int err = mely_post(&rt, mely_stream_color(s), fn, arg);
    if (err)
        note("mely_post: %s", mely_strerror(err));
}

/* ---- coalescing: one send per stream per turn --------------------------------------------- */

/*
 * A probe: probe_begin() in the first event that writes (on the stream's
 * color) takes the send counts; probe_end(), posted after the last writer,
 * says they all ran and what they wrote. The client, once it has received
 * every byte (they left at the end of the worker's turn, with nothing else
 * to send meanwhile), reads the counts again: one send carried them (under
 * the legacy engine, whose batch is one event, one per writing event).
 */
static _Atomic uint64_t probe_sends0, probe_bytes0; /* at probe_begin */
static _Atomic uint64_t probe_wrote, probe_expected;
static atomic_bool probe_done;

static void probe_begin(void)
{
    struct sent now = sent_now();
    atomic_store(&probe_sends0, now.sends);
    atomic_store(&probe_bytes0, now.bytes);
    atomic_store(&probe_wrote, 0);
}

static void probe_end(void *arg)
{
    (void)arg;
    atomic_store(&probe_expected, atomic_load(&probe_wrote));
    atomic_store(&probe_done, true);
}

/* The stream's queued bytes once its turn's end published them (the client
 * may read the bytes before the worker publishes the count). */
static size_t queued_settled(mely_stream_t *s)
{
    size_t q = mely_stream_queued(s);
    for (int i = 0; q != 0 && i < WAIT_MS; i++) { /* bounded: WAIT_MS looks, 1 ms apart */
        sleep_us(1000);
        q = mely_stream_queued(s);
    }
    return q;
}

/* The client's side of a probe, after it received every byte written: `want`
 * sends carried exactly what was written, and nothing is left queued. */
static bool probe_check(mely_stream_t *s, const char *what, uint64_t want)
{
    if (!wait_flag(&probe_done, WAIT_MS)) {
        note("%s: the probe did not run", what);
        return false;
    }
    atomic_store(&probe_done, false);
    /* The worker counts a send once its writev returned: the client may
     * have the bytes before the count is there. */
    uint64_t wrote = atomic_load(&probe_expected), sends = 0, bytes = 0;
    for (int i = 0; i < WAIT_MS && bytes < wrote; i++) { /* bounded: WAIT_MS looks */
        if (i)
            sleep_us(1000);
        struct sent now = sent_now();
        sends = now.sends - atomic_load(&probe_sends0);
        bytes = now.bytes - atomic_load(&probe_bytes0);
    }
    uint64_t queued = queued_settled(s);
    if (sends != want)
        note("%s: %llu sends (stream_sends), expected exactly %llu", what,
             (unsigned long long)sends, (unsigned long long)want);
    else if (bytes != wrote)
        note("%s: the send carried %llu bytes (stream_bytes), %llu were written", what,
             (unsigned long long)bytes, (unsigned long long)wrote);
    else if (queued != 0)
        note("%s: %llu bytes still queued after the turn's end", what,
             (unsigned long long)queued);
    else
        return true;
    return false;
}

enum { BATCH = MELY_BATCH_DEFAULT };

static struct batch_write {
    mely_stream_t *s;
    unsigned i;
} batch_writes[BATCH];

static int batch_msg(char *buf, size_t cap, unsigned i)
{
    return snprintf(buf, cap, "message %u of one batch\n", i);
}

/* One of the BATCH events of the stream's color that run as one batch. */
static void batch_write_event(void *arg)
{
    struct batch_write *e = arg;
    if (mely_current_color() != (int)mely_stream_color(e->s))
        note("a batch writer ran as color %d", mely_current_color());
    if (e->i == 0)
        probe_begin();
    char msg[64];
    int n = batch_msg(msg, sizeof(msg), e->i);
    int err = mely_stream_write(e->s, msg, (size_t)n);
    if (err)
        note("batch writer %u: mely_stream_write: %s", e->i, mely_strerror(err));
    atomic_fetch_add(&probe_wrote, (uint64_t)n);
}

/* A write, then an append to the output, from events of the stream's
 * color outside its callbacks (posted by the client thread). */
static void write_outside(void *arg)
{
    mely_stream_t *s = arg;
    probe_begin();
    static const char msg[] = "written outside the callbacks\n";
    int err = mely_stream_write(s, msg, sizeof(msg) - 1);
    if (err)
        note("mely_stream_write outside the callbacks: %s", mely_strerror(err));
    atomic_store(&probe_wrote, sizeof(msg) - 1);
    post_to(s, probe_end, s);
}

static void append_outside(void *arg)
{
    mely_stream_t *s = arg;
    probe_begin();
    struct evbuffer *out = mely_stream_output(s);
    int n = out ? evbuffer_add_printf(out, "appended outside the callbacks %d\n", 2) : -1;
    if (n < 0)
        note("mely_stream_output, or the append to it, failed");
    atomic_store(&probe_wrote, n < 0 ? 0 : (uint64_t)n);
    post_to(s, probe_end, s);
}

/* "GO": BATCH events to the stream's color, then the probe's end;
 * "APPEND": an append to mely_stream_output from the callback; else a reply. */
static void batch_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    if (strcmp(line, "GO") == 0) {
        for (unsigned i = 0; i < BATCH; i++) {
            batch_writes[i] = (struct batch_write){.s = s, .i = i};
            post_to(s, batch_write_event, &batch_writes[i]);
        }
        post_to(s, probe_end, s);
    } else if (strcmp(line, "APPEND") == 0) {
        if (evbuffer_add_printf(mely_stream_output(s), "appended in a callback %d\n", 1) < 0)
            note("an append to mely_stream_output failed");
    } else {
        reply_line(s, c, line, len);
    }
    leave(c);
}

static void *batch_client(void *arg)
{
    bool legacy = arg != NULL; /* a batch is one event: one send per event */
    char exp[BATCH * 64];
    size_t n = 0;
    for (unsigned i = 0; i < BATCH; i++)
        n += (size_t)batch_msg(exp + n, sizeof(exp) - n, i);
    int fd = client_ready(1, 0);
    mely_stream_t *s = srv.stream[0];
    bool ok = fd >= 0 && send_str(fd, "GO\n") && expect(fd, exp) &&
              probe_check(s, "10 events of one batch, each writing a message", legacy ? BATCH : 1);
    /* From an event of the stream's color that is none of its callbacks:
     * sent by the end of its batch, with nothing else happening. */
    if (ok) {
        post_to(s, write_outside, s);
        ok = expect(fd, "written outside the callbacks\n") &&
             probe_check(s, "a write outside the callbacks", 1);
    }
    ok = ok && send_str(fd, "x\n") && expect(fd, "1:x\n") && shutdown(fd, SHUT_WR) == 0 &&
         expect_end(fd, NULL);
    return client_done(fd, ok);
}

/*
 * With MELY_BATCH_DEFAULT (10): a line callback posts 10 events to its
 * stream's color, which run as one batch, each writing a message with
 * mely_stream_write; the client receives the 10 in order, and stream_sends
 * grew by exactly 1, carrying all their bytes, by the end of the worker's
 * turn. Then an event of the stream's color that is none of its callbacks
 * writes: the client gets it (nothing else happens meanwhile), in one send.
 * Under the legacy engine, whose batch is one event, each event's writes
 * are sent at its end: 10 sends.
 */
START_TEST(writes_of_one_batch_make_one_send)
{
    mely_stream_ops_t ops = {.line = batch_line_cb, .closed = on_closed};
    atomic_store(&probe_done, false);
    server_engine = _i == 2 ? "legacy" : NULL;
    serve(1 + (unsigned)(_i % 2), &ops, NULL, true, batch_client, server_engine ? &srv : NULL,
          server_engine ? "one send per event, legacy" : "one send per batch");
    assert_closed_once(1);
    stop_server();
}
END_TEST

static void *append_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, 0);
    mely_stream_t *s = srv.stream[0];
    bool ok = fd >= 0 && send_str(fd, "APPEND\n") && expect(fd, "appended in a callback 1\n");
    if (ok) {
        post_to(s, append_outside, s);
        ok = expect(fd, "appended outside the callbacks 2\n") &&
             probe_check(s, "an append to mely_stream_output outside the callbacks", 1);
    }
    ok = ok && shutdown(fd, SHUT_WR) == 0 && expect_end(fd, NULL);
    return client_done(fd, ok);
}

/* Appends to mely_stream_output are sent: from the line callback, and from
 * an event of the stream's color outside its callbacks (where they once
 * stayed in the output for good), by the end of that event's turn. */
START_TEST(output_appends_are_sent)
{
    mely_stream_ops_t ops = {.line = batch_line_cb, .closed = on_closed};
    atomic_store(&probe_done, false);
    serve(1 + (unsigned)_i, &ops, NULL, true, append_client, NULL, "output appends");
    assert_closed_once(1);
    stop_server();
}
END_TEST

/* ---- the event bits --------------------------------------------------------------------- */

#define STREAM_BITS                                                                                \
    (MELY_STREAM_EOF | MELY_STREAM_ERROR | MELY_STREAM_TIMEOUT | MELY_STREAM_CONNECTED)
#define IO_BITS (MELY_READ | MELY_WRITE | MELY_ONESHOT | MELY_SIGNAL)
#define ONE_BIT(x) ((x) != 0 && ((x) & ((x)-1)) == 0)

_Static_assert((STREAM_BITS & IO_BITS) == 0,
               "a MELY_STREAM_* event bit overlaps MELY_READ, MELY_WRITE, MELY_ONESHOT or "
               "MELY_SIGNAL");
_Static_assert(ONE_BIT(MELY_STREAM_EOF) && ONE_BIT(MELY_STREAM_ERROR) &&
                   ONE_BIT(MELY_STREAM_TIMEOUT) && ONE_BIT(MELY_STREAM_CONNECTED),
               "a MELY_STREAM_* event bit is not one bit");
_Static_assert(MELY_STREAM_EOF + MELY_STREAM_ERROR + MELY_STREAM_TIMEOUT + MELY_STREAM_CONNECTED ==
                   STREAM_BITS,
               "two MELY_STREAM_* event bits are the same");

enum { BITS_TIMEOUT_MS = 150 };

/* As examples/kv.c's: EOF first (answer, close after flushing), else close. */
static void eof_first_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    record_event(c, what, err);
    if (what & MELY_STREAM_EOF) {
        mely_stream_printf(s, "taken for EOF (what 0x%x)\n", what);
        mely_stream_close(s, MELY_STREAM_FLUSH);
    } else if (what & MELY_STREAM_TIMEOUT) {
        mely_stream_printf(s, "timeout%s%s\n", what & MELY_READ ? " read" : "",
                           what & MELY_WRITE ? " write" : "");
        mely_stream_close(s, MELY_STREAM_FLUSH);
    } else {
        mely_stream_close(s, 0);
    }
    leave(c);
}

static void *bits_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, 0);
    uint64_t last = now_ns(); /* before the stream's last read */
    bool ok = fd >= 0 && send_str(fd, "a\n") && expect(fd, "1:a\n");
    ok = ok && expect(fd, "timeout read\n") && expect_eof(fd);
    uint64_t t = atomic_load(&srv.t_event[0]);
    if (ok && t < last + (BITS_TIMEOUT_MS - EARLY_MS) * 1000000ull)
        note("the read timeout came %.1f ms after the last byte (timeout %d ms)",
             ((double)t - (double)last) / 1e6, BITS_TIMEOUT_MS);
    return client_done(fd, ok);
}

/*
 * The event bits never overlap MELY_READ, MELY_WRITE, MELY_ONESHOT or
 * MELY_SIGNAL (checked when compiling), and a read timeout arrives as
 * MELY_STREAM_TIMEOUT | MELY_READ, without MELY_STREAM_EOF: an event
 * callback that tests EOF first (examples/kv.c's) answers it as a timeout.
 */
START_TEST(timeout_is_not_eof)
{
    mely_stream_ops_t ops = {.line = line_cb, .event = eof_first_event_cb, .closed = on_closed};
    ops.read_timeout_ns = BITS_TIMEOUT_MS * 1000000ull;
    serve(1 + (unsigned)_i, &ops, NULL, false, bits_client, NULL, "timeout bits");
    assert_closed_once(1);
    ck_assert_uint_eq(atomic_load(&srv.events), 1);
    unsigned what = atomic_load(&srv.ev_what[0]);
    ck_assert_msg(what == (MELY_STREAM_TIMEOUT | MELY_READ),
                  "a read timeout reported as 0x%x, not MELY_STREAM_TIMEOUT | MELY_READ", what);
    ck_assert_msg(!(what & MELY_STREAM_EOF), "a read timeout has MELY_STREAM_EOF (0x%x)", what);
    stop_server();
}
END_TEST

/* ---- writers on other colors and threads, then a close or a half-close --------------------- */

enum {
    BG_COLORS = 2,               /* writers on colors of their own, besides the closer */
    BG_THREADS = 1,              /* foreign threads, idem */
    NWRITERS = BG_COLORS + BG_THREADS + 1,
    CLOSER = NWRITERS - 1,       /* the writer that closes (its index) */
    CHAIN = 25,                  /* lines a color's writer writes per event */
};

static const struct {
    unsigned workers;
    bool thread;   /* the closer is a foreign thread (else events of a color) */
    bool shut;     /* it half-closes (mely_stream_shutdown), else closes with flush */
} closer_modes[] = {
    {1, false, false}, {2, false, false}, {2, true, false},
    {1, true, true},   {2, false, true},  {2, true, true},
};

static struct writer {
    unsigned k, seq, n;
    bool shut, is_closer;
    mely_stream_t *s;
    atomic_bool done;
} cw[NWRITERS];

/* The closer's end: close with flush or half-close, then a write (refused)
 * and the same call again (nothing). */
static void closer_finish(struct writer *w)
{
    int err = w->shut ? mely_stream_shutdown(w->s) : mely_stream_close(w->s, MELY_STREAM_FLUSH);
    if (err)
        note("the closer: %s: %s", w->shut ? "mely_stream_shutdown" : "mely_stream_close",
             mely_strerror(err));
    if ((err = mely_stream_write(w->s, "late\n", 5)) != -EPIPE)
        note("a write after the closer's %s returned %d, not -EPIPE",
             w->shut ? "half-close" : "close", err);
    err = w->shut ? mely_stream_shutdown(w->s) : mely_stream_close(w->s, MELY_STREAM_FLUSH);
    if (err)
        note("a second %s returned %d", w->shut ? "half-close" : "close", err);
}

/* Writes up to `max` lines; false once the writer stops. Writers other
 * than the closer may meet the close (-EPIPE): they stop there. */
static bool write_lines(struct writer *w, unsigned max)
{
    for (unsigned i = 0; i < max && w->seq < w->n; i++) {
        int err = mely_stream_printf(w->s, "w%u %u\n", w->k, w->seq);
        if (err) {
            if (w->is_closer || err != -EPIPE)
                note("writer %u, line %u: %s", w->k, w->seq, mely_strerror(err));
            return false;
        }
        w->seq++;
    }
    if (w->seq < w->n)
        return true;
    if (w->is_closer)
        closer_finish(w);
    return false;
}

static void writer_event(void *arg)
{
    struct writer *w = arg;
    if (write_lines(w, CHAIN)) {
        int err = mely_post(&rt, (mely_color_t)mely_current_color(), writer_event, w);
        if (!err)
            return;
        note("mely_post: %s", mely_strerror(err));
    }
    atomic_store(&w->done, true);
}

static void *writer_thread(void *arg)
{
    struct writer *w = arg;
    while (write_lines(w, UINT32_MAX)) {
    }
    atomic_store(&w->done, true);
    return NULL;
}

/* The stream reads after its half-close: counts, and cannot write. */
static void after_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    (void)len;
    if (strcmp(line, "after") != 0)
        note("stream %u: line \"%s\", expected \"after\"", c->id, line);
    int err = mely_stream_write(s, "x", 1);
    if (err != -EPIPE)
        note("stream %u: a write after the half-close returned %d, not -EPIPE", c->id, err);
    atomic_fetch_add(&srv.n, 1);
    leave(c);
}

/* Only the client's EOF may come (closes after flushing, as by default). */
static void after_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    record_event(c, what, err);
    if (what != MELY_STREAM_EOF)
        note("stream %u: event 0x%x (err %d %s)", c->id, what, err, mely_strerror(err));
    mely_stream_close(s, what == MELY_STREAM_EOF ? MELY_STREAM_FLUSH : 0);
    leave(c);
}

/* Reads "w<k> <seq>" lines until EOF: each writer's in its order. */
static bool read_writers(int fd, unsigned next[NWRITERS])
{
    struct lr *lr = calloc(1, sizeof(*lr));
    bool ok = lr != NULL;
    if (lr)
        lr->fd = fd;
    char line[64];
    while (ok && next_line(lr, line, sizeof(line), WAIT_MS)) {
        unsigned k, seq;
        if (sscanf(line, "w%u %u", &k, &seq) != 2 || k >= NWRITERS) {
            note("a stray line: \"%s\"", line);
            ok = false;
        } else if (seq != next[k]) {
            note("writer %u: line %u arrived where %u was due", k, seq, next[k]);
            ok = false;
        } else {
            next[k]++;
        }
    }
    if (ok && lr->len) {
        note("%zu bytes without an end of line", lr->len);
        ok = false;
    }
    free(lr);
    return ok && expect_eof(fd);
}

static void *closer_client(void *arg)
{
    unsigned mode = (unsigned)(uintptr_t)arg;
    bool shut = closer_modes[mode].shut;
    pthread_t threads[NWRITERS];
    bool started[NWRITERS] = {false};
    unsigned next[NWRITERS] = {0};
    unsigned n = scaled(2000, 300, 100000);
    int fd = client_ready(1, 0);
    bool ok = fd >= 0;
    for (unsigned k = 0; ok && k < NWRITERS; k++) {
        bool thread = k == CLOSER ? closer_modes[mode].thread : k >= BG_COLORS;
        cw[k].k = k;
        cw[k].n = n;
        cw[k].seq = 0;
        cw[k].shut = shut;
        cw[k].is_closer = k == CLOSER;
        cw[k].s = srv.stream[0];
        atomic_store(&cw[k].done, false);
        if (thread) {
            started[k] = pthread_create(&threads[k], NULL, writer_thread, &cw[k]) == 0;
            if (!started[k])
                note("pthread_create failed");
        } else {
            int err = mely_post(&rt, OTHER_COLOR(k), writer_event, &cw[k]);
            if (err)
                note("mely_post: %s", mely_strerror(err));
        }
    }
    ok = ok && read_writers(fd, next);
    if (ok && next[CLOSER] != n)
        note("%u of the closer's %u lines arrived before EOF", next[CLOSER], n);
    for (unsigned k = 0; k < NWRITERS; k++) {
        if (started[k])
            pthread_join(threads[k], NULL);
        else if (!wait_flag(&cw[k].done, WAIT_MS))
            note("writer %u did not finish", k);
        if (next[k] > cw[k].seq)
            note("writer %u: %u lines arrived, %u were accepted", k, next[k], cw[k].seq);
    }
    /* Half-closed, the stream still reads. */
    if (ok && shut) {
        ok = send_str(fd, "after\n") && wait_count(&srv.n, 1, WAIT_MS);
        if (!ok)
            note("the stream did not read what the client sent after its half-close");
        ok = ok && shutdown(fd, SHUT_WR) == 0;
    }
    return client_done(fd, ok);
}

/*
 * Two colors and a foreign thread write numbered lines to one stream while
 * a fourth writer (events of a color, or a foreign thread) writes its own
 * and then, from the same color or thread, closes the stream with
 * MELY_STREAM_FLUSH or half-closes it (mely_stream_shutdown). Every writer's
 * lines arrive in its order (the others' are cut at the close: what
 * arrives of them is a prefix of what they wrote); all of the closer's
 * arrive, then EOF; a write after the call is -EPIPE and a second call does
 * nothing. After the half-close the stream still reads what the client
 * sends.
 */
START_TEST(close_behind_writes_from_elsewhere)
{
    mely_stream_ops_t ops = {.line = after_line_cb, .event = after_event_cb, .closed = on_closed};
    char what[64];
    snprintf(what, sizeof(what), "%s from a %s", closer_modes[_i].shut ? "half-close" : "close",
             closer_modes[_i].thread ? "thread" : "color");
    serve(closer_modes[_i].workers, &ops, NULL, true, closer_client, (void *)(uintptr_t)_i, what);
    assert_closed_once(1);
    stop_server();
}
END_TEST

enum {
    RACE_ROUNDS = 12,    /* streams, one after the other */
    RACERS = 2,          /* foreign threads writing to each */
    RACE_LINES = 20000,  /* each writes at most this many lines */
};

static struct racer {
    mely_stream_t *s;
    unsigned k, seq;
} racers[RACERS];

/* Writes numbered lines until the half-close refuses them. */
static void *racer_main(void *arg)
{
    struct racer *r = arg;
    char line[32];
    for (r->seq = 0; r->seq < RACE_LINES; r->seq++) {
        int n = snprintf(line, sizeof(line), "w%u %u\n", r->k, r->seq);
        int err = mely_stream_write(r->s, line, (size_t)n);
        if (err == -EPIPE)
            break;
        if (err) {
            note("racer %u: mely_stream_write: %s", r->k, mely_strerror(err));
            break;
        }
    }
    return NULL;
}

static void setup_not_reading(mely_stream_t *s, struct conn *c)
{
    int err = mely_stream_reading(s, 0);
    if (err)
        note("stream %u: mely_stream_reading: %s", c->id, mely_strerror(err));
}

/* One stream: racers write, this thread half-closes (or closes with
 * flush) in the middle. */
static bool race_round(unsigned round, bool flush)
{
    pthread_t t[RACERS];
    unsigned started = 0, next[NWRITERS] = {0};
    int fd = client_ready(round + 1, 0);
    /* Closing, the stream finds these unread: it lingers. */
    bool ok = fd >= 0 && (!flush || send_str(fd, "unread\n"));
    for (; ok && started < RACERS; started++) {
        racers[started] = (struct racer){.s = srv.stream[round], .k = started};
        if (pthread_create(&t[started], NULL, racer_main, &racers[started]) != 0) {
            note("pthread_create failed");
            break;
        }
    }
    sleep_us(2000 + 500 * round);
    if (ok)
        CHECK_RC(flush ? mely_stream_close(srv.stream[round], MELY_STREAM_FLUSH)
                       : mely_stream_shutdown(srv.stream[round]),
                 0);
    for (unsigned i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    ok = ok && started == RACERS && read_writers(fd, next);
    for (unsigned k = 0; ok && k < RACERS; k++)
        if (next[k] > racers[k].seq)
            note("racer %u: %u lines arrived, %u were accepted", k, next[k], racers[k].seq);
    if (flush) { /* our close ends the linger */
        if (fd >= 0)
            close(fd);
        return ok && wait_count(&srv.closed, round + 1, WAIT_MS);
    }
    /* Half-closed, the stream still reads; then our EOF closes it. */
    ok = ok && send_str(fd, "after\n") && wait_count(&srv.n, round + 1, WAIT_MS) &&
         shutdown(fd, SHUT_WR) == 0 && wait_count(&srv.closed, round + 1, WAIT_MS);
    if (fd >= 0)
        close(fd);
    if (!ok)
        note("round %u: the half-closed stream did not read on until the client's EOF", round);
    return ok;
}

static void *race_client(void *arg)
{
    bool flush = arg != NULL;
    for (unsigned round = 0; round < RACE_ROUNDS && race_round(round, flush); round++) {
    }
    mely_stop(&rt);
    return NULL;
}

/*
 * Writes from two foreign threads racing with a half-close from a third
 * (12 streams in turn, the half-close 2 to 8 ms into the writes): each
 * write is accepted or refused (-EPIPE); what arrives is in each writer's
 * order and was accepted; and the stream stays well: no error, it reads
 * what the client sends after the half-close, and closes at the client's
 * EOF. The same with a close with flush from the third thread while the
 * client's bytes wait unread (the stream reads nothing): no error either,
 * and EOF (the lingering close) after what arrives. (A write accepted just
 * before the half-close or the close must not be appended once the
 * socket's write side is shut down: that fails with EPIPE.)
 */
START_TEST(writes_racing_a_half_close)
{
    mely_stream_ops_t ops = {.line = after_line_cb, .event = after_event_cb, .closed = on_closed};
    bool flush = _i >= 2;
    serve(1 + (unsigned)(_i % 2), &ops, flush ? setup_not_reading : NULL, true, race_client,
          flush ? &srv : NULL, flush ? "writes racing a close" : "writes racing a half-close");
    assert_closed_once(RACE_ROUNDS);
    stop_server();
}
END_TEST

/* ---- a write, then a post that writes ------------------------------------------------------ */

/*
 * A color on the other worker writes "a<i>" to a stream, then posts to the
 * stream's color an event that writes "b<i>": the second write happens
 * after the first (through the post), so "a<i>" must arrive first, every
 * round. (Writes to a stream of another worker are buffered on the writer's
 * worker: the buffer must reach the stream before the post does.)
 */
enum { HB_ROUNDS = 3000 };

/* A color that another worker than s's owns (2 workers): its writes to s
 * are staged (stream.c, "Staging"). */
static mely_color_t color_elsewhere(mely_stream_t *s)
{
    int home = mely_color_owner(&rt, mely_stream_color(s));
    mely_color_t c = OTHER_COLOR(0);
    for (unsigned k = 0; k < 8 && mely_color_owner(&rt, c) == home; k++)
        c = OTHER_COLOR(k);
    if (mely_color_owner(&rt, c) == home)
        note("no color of the other worker among OTHER_COLOR(0..7)");
    return c;
}

static struct {
    mely_stream_t *s;
    mely_color_t color; /* the writer's: owned by the other worker */
    unsigned round;
} hb;

static void hb_second(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    char line[32];
    int n = snprintf(line, sizeof(line), "b%u\n", i);
    CHECK_RC(mely_stream_write(hb.s, line, (size_t)n), 0);
}

static void hb_first(void *arg)
{
    (void)arg;
    /* A moment for the previous round's post to reach the stream's worker
     * and run there while this batch (and any buffer of it) goes on. */
    for (uint64_t t0 = now_ns(); now_ns() - t0 < 30000;) /* bounded: 30 us */
        ;
    unsigned i = hb.round++;
    char line[32];
    int n = snprintf(line, sizeof(line), "a%u\n", i);
    CHECK_RC(mely_stream_write(hb.s, line, (size_t)n), 0);
    CHECK_RC(mely_post(&rt, mely_stream_color(hb.s), hb_second, (void *)(uintptr_t)i), 0);
    if (hb.round < HB_ROUNDS)
        CHECK_RC(mely_post(&rt, hb.color, hb_first, NULL), 0);
}

static void *hb_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, 0);
    bool ok = fd >= 0;
    if (ok) {
        hb.s = srv.stream[0];
        hb.color = color_elsewhere(hb.s);
        ok = mely_post(&rt, hb.color, hb_first, NULL) == 0;
    }
    static bool seen_a[HB_ROUNDS];
    memset(seen_a, 0, sizeof(seen_a));
    struct lr lr = {.fd = fd};
    char line[64];
    for (unsigned k = 0; ok && k < 2 * HB_ROUNDS; k++) { /* bounded: the rounds' lines */
        char c;
        unsigned i;
        if (!next_line(&lr, line, sizeof(line), WAIT_MS)) {
            note("%u lines of %u, then none", k, 2 * HB_ROUNDS);
            ok = false;
        } else if (sscanf(line, "%c%u", &c, &i) != 2 || i >= HB_ROUNDS || (c != 'a' && c != 'b')) {
            note("\"%s\"", line);
            ok = false;
        } else if (c == 'a') {
            seen_a[i] = true;
        } else if (!seen_a[i]) {
            note("\"b%u\" before \"a%u\", which was written before the post that wrote it",
                 i, i);
            ok = false;
        }
    }
    return client_done(fd, ok && shutdown(fd, SHUT_WR) == 0);
}

START_TEST(a_write_then_a_post_keep_their_order)
{
    mely_stream_ops_t ops = {.closed = on_closed};
    memset(&hb, 0, sizeof(hb));
    serve(2, &ops, NULL, true, hb_client, NULL, "a write then a post");
    assert_closed_once(1);
    stop_server();
}
END_TEST

/*
 * A color on the other worker writes lines to an idle stream (staged on its
 * worker), then, in the same event, asks for something that sends the
 * staged buffer first: a close with flush, a half-close, or a block too
 * large to stage. The buffer's send rings the stream's bell, a post, and a
 * post first sends what the batch staged: the buffer must leave once, not
 * twice (it did: the stream then read freed memory, and lost its reference
 * count).
 */
enum { SR_LINES = 5, SR_BLOCK = 1000 };
static const char *const sr_modes[] = {"a close", "a half-close", "a large block"};
static struct {
    mely_stream_t *s;
    unsigned mode;
} sr;

static void sr_event(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < SR_LINES; i++)
        CHECK_RC(mely_stream_printf(sr.s, "s%u\n", i), 0);
    if (sr.mode == 1) {
        CHECK_RC(mely_stream_shutdown(sr.s), 0);
        return;
    }
    if (sr.mode == 2) {
        mely_block_t *b = mely_block_alloc(SR_BLOCK);
        ck_assert_ptr_nonnull(b);
        memset(mely_block_data(b), 'x', SR_BLOCK - 1);
        ((char *)mely_block_data(b))[SR_BLOCK - 1] = '\n';
        CHECK_RC(mely_stream_write_block(sr.s, b), 0);
        mely_block_unref(b);
    }
    CHECK_RC(mely_stream_close(sr.s, MELY_STREAM_FLUSH), 0);
}

static void *sr_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, 0);
    bool ok = fd >= 0;
    if (ok) {
        sr.s = srv.stream[0];
        ok = mely_post(&rt, color_elsewhere(sr.s), sr_event, NULL) == 0;
    }
    for (unsigned i = 0; ok && i < SR_LINES; i++) {
        char want[16];
        snprintf(want, sizeof(want), "s%u\n", i);
        ok = expect(fd, want);
    }
    if (ok && sr.mode == 2) {
        static char block[SR_BLOCK + 1];
        memset(block, 'x', SR_BLOCK - 1);
        block[SR_BLOCK - 1] = '\n';
        ok = expect(fd, block);
    }
    ok = ok && expect_eof(fd);
    if (ok && sr.mode == 1) /* half-closed: the stream closes at the client's EOF */
        ok = shutdown(fd, SHUT_WR) == 0;
    return client_done(fd, ok);
}

START_TEST(staged_writes_then_a_request_from_the_same_event)
{
    mely_stream_ops_t ops = {.event = after_event_cb, .closed = on_closed};
    sr.mode = (unsigned)_i;
    serve(2, &ops, NULL, true, sr_client, NULL, sr_modes[_i]);
    assert_closed_once(1);
    stop_server();
}
END_TEST

/* A write from the idle hook (mely_on_idle, outside any handler) to a
 * stream of the same worker: it claims the stream for the worker's turn,
 * which must end before the worker sleeps, or the bytes wait for whatever
 * wakes it next. The client sends nothing more: only the write can answer. */
static struct {
    mely_stream_t *s;
    atomic_bool armed;
} ih;

static void ih_hook(void *arg)
{
    (void)arg;
    if (atomic_exchange(&ih.armed, false))
        CHECK_RC(mely_stream_write(ih.s, "idle\n", 5), 0);
}

static void ih_nothing(void *arg)
{
    (void)arg;
}

static void *ih_client(void *arg)
{
    (void)arg;
    int fd = client_ready(1, 0);
    bool ok = fd >= 0;
    if (ok) {
        ih.s = srv.stream[0];
        atomic_store(&ih.armed, true);
        /* Wakes the worker, which goes idle again after it. */
        ok = mely_post(&rt, OTHER_COLOR(0), ih_nothing, NULL) == 0 && expect(fd, "idle\n");
    }
    return client_done(fd, ok && shutdown(fd, SHUT_WR) == 0);
}

START_TEST(an_idle_hook_write_leaves_before_the_worker_sleeps)
{
    mely_stream_ops_t ops = {.closed = on_closed};
    memset(&ih, 0, sizeof(ih));
    start_server(1, &ops, NULL, true);
    CHECK_RC(mely_on_idle(&rt, ih_hook, NULL), 0);
    run_with_helper(&rt, ih_client, NULL, 60, "an idle hook's write");
    assert_closed_once(1);
    stop_server();
}
END_TEST

/* ---- blocks ---------------------------------------------------------------------------- */

enum {
    BLOCK_STREAMS = 4,
    BIG_BLOCK = 4096,  /* referenced by every output (more than 512 bytes) */
    SMALL_BLOCK = 100, /* copied into each */
    SCRIBBLES = 16,
};

/* After a writer dropped its references: blocks of the same sizes, filled
 * with something else, so that bytes read from a freed block show (ASan
 * says so at once). Freed after the shutdown. */
static void *scribbles[SCRIBBLES];
static atomic_uint nscribbles;

static void scribble(void)
{
    for (int i = 0; i < 2; i++) {
        unsigned k = atomic_fetch_add(&nscribbles, 1);
        void *p = malloc(i ? BIG_BLOCK + 64 : SMALL_BLOCK + 64);
        if (p)
            memset(p, 0xA5, i ? BIG_BLOCK + 64 : SMALL_BLOCK + 64);
        if (k < SCRIBBLES)
            scribbles[k] = p;
        else
            free(p);
    }
}

static void free_scribbles(void)
{
    for (int i = 0; i < SCRIBBLES; i++) {
        free(scribbles[i]);
        scribbles[i] = NULL;
    }
    atomic_store(&nscribbles, 0);
}

/* A block of n bytes of the pattern from off. */
static mely_block_t *pat_block(uint64_t off, size_t n)
{
    mely_block_t *b = mely_block_alloc(n);
    if (!b)
        note("mely_block_alloc(%zu) failed", n);
    else
        fill_pat(mely_block_data(b), off, n);
    return b;
}

static void write_block_to(mely_stream_t *s, mely_block_t *b, const char *from)
{
    int err = mely_stream_write_block(s, b);
    if (err)
        note("mely_stream_write_block (%zu bytes) from %s: %s", mely_block_len(b), from,
             mely_strerror(err));
}

static atomic_bool round_written;

/* Round 1, on another color: both blocks to every stream, then dropped. */
static void blocks_from_a_color(void *arg)
{
    (void)arg;
    mely_block_t *big = pat_block(0, BIG_BLOCK), *small = pat_block(BIG_BLOCK, SMALL_BLOCK);
    for (unsigned i = 0; big && small && i < BLOCK_STREAMS; i++) {
        write_block_to(srv.stream[i], big, "another color");
        write_block_to(srv.stream[i], small, "another color");
    }
    mely_block_unref(big);
    mely_block_unref(small);
    scribble();
    atomic_store(&round_written, true);
}

/* Round 2, on each stream's color: the blocks it was given, then dropped. */
struct own_blocks {
    mely_stream_t *s;
    mely_block_t *big, *small;
};
static struct own_blocks own_blocks[BLOCK_STREAMS];
static atomic_uint own_written;

static void blocks_from_own_color(void *arg)
{
    struct own_blocks *o = arg;
    if (mely_current_color() != (int)mely_stream_color(o->s))
        note("a block writer ran as color %d", mely_current_color());
    write_block_to(o->s, o->big, "the stream's color");
    write_block_to(o->s, o->small, "the stream's color");
    mely_block_unref(o->big);
    mely_block_unref(o->small);
    scribble();
    atomic_fetch_add(&own_written, 1);
}

#define PRINTF_BLOCK "a block of %s, number %d\n"

static void *blocks_client(void *arg)
{
    (void)arg;
    int fds[BLOCK_STREAMS];
    unsigned n = 0;
    bool ok = true;
    char text[64];
    snprintf(text, sizeof(text), PRINTF_BLOCK, "mely_block_printf", 3);
    for (; n < BLOCK_STREAMS; n++)
        if ((fds[n] = client_ready(n + 1, 0)) < 0)
            goto out;
    int err = mely_post(&rt, OTHER_COLOR(0), blocks_from_a_color, NULL);
    if (err)
        note("mely_post: %s", mely_strerror(err));
    for (unsigned i = 0; i < n; i++)
        ok = ok && expect_pat(fds[i], 0, BIG_BLOCK + SMALL_BLOCK);
    if (ok && !wait_flag(&round_written, WAIT_MS))
        note("the other color's writer did not finish");

    /* The same two blocks to every stream, each written on the stream's
     * color; this thread drops its references as soon as they are posted. */
    mely_block_t *big = pat_block(BIG_BLOCK + SMALL_BLOCK, BIG_BLOCK);
    mely_block_t *small = pat_block(2 * BIG_BLOCK + SMALL_BLOCK, SMALL_BLOCK);
    ok = ok && big && small;
    for (unsigned i = 0; ok && i < n; i++) {
        own_blocks[i] = (struct own_blocks){
            .s = srv.stream[i], .big = mely_block_ref(big), .small = mely_block_ref(small)};
        post_to(srv.stream[i], blocks_from_own_color, &own_blocks[i]);
    }
    mely_block_unref(big);
    mely_block_unref(small);
    for (unsigned i = 0; i < n; i++)
        ok = ok && expect_pat(fds[i], BIG_BLOCK + SMALL_BLOCK, BIG_BLOCK + SMALL_BLOCK);
    if (ok && !wait_count(&own_written, n, WAIT_MS))
        note("the streams' own writers did not finish");

    /* From this thread: mely_block_printf. */
    mely_block_t *p = mely_block_printf(PRINTF_BLOCK, "mely_block_printf", 3);
    if (!p || mely_block_len(p) != strlen(text) ||
        memcmp(mely_block_data(p), text, strlen(text)) != 0) {
        note("mely_block_printf made the wrong block");
        ok = false;
    }
    for (unsigned i = 0; ok && i < n; i++)
        write_block_to(srv.stream[i], p, "a foreign thread");
    mely_block_unref(p);
    scribble();
    for (unsigned i = 0; i < n; i++)
        ok = ok && expect(fds[i], text);
    for (unsigned i = 0; ok && i < n; i++)
        ok = shutdown(fds[i], SHUT_WR) == 0 && expect_end(fds[i], NULL);
    if (ok)
        wait_closed(BLOCK_STREAMS);
out:
    for (unsigned i = 0; i < n; i++)
        close(fds[i]);
    mely_stop(&rt);
    return NULL;
}

/*
 * A block of 4 KB (referenced by each output) and one of 100 bytes (copied
 * into each) written to 4 streams: from another color, then from each
 * stream's own color, then (mely_block_printf) from a foreign thread. The
 * writer drops its reference right after writing, and memory of the same
 * sizes is filled with something else at once: every client receives the
 * exact bytes. LeakSanitizer checks that the last references go.
 */
START_TEST(blocks_to_several_streams)
{
    mely_stream_ops_t ops = {.closed = on_closed};
    atomic_store(&round_written, false);
    atomic_store(&own_written, 0);
    serve(1 + (unsigned)_i, &ops, NULL, true, blocks_client, NULL, "blocks");
    assert_closed_once(BLOCK_STREAMS);
    stop_server();
    free_scribbles();
}
END_TEST

#define ERR_COLOR ((mely_color_t)1234)

static mely_stream_t *edge_stream;
static mely_block_t *edge_block, *edge_empty;

/* On the stream's color: the edges of mely_stream_write_block there. */
static void block_edges_own(void *arg)
{
    (void)arg;
    mely_stream_t *s = edge_stream;
    CHECK_RC(mely_stream_write_block(s, NULL), MELY_EINVAL);
    CHECK_RC(mely_stream_write_block(NULL, edge_block), MELY_EINVAL);
    CHECK_RC(mely_stream_write_block(s, edge_empty), 0);
    CHECK_RC(mely_stream_write_block(s, edge_block), 0);
    CHECK_RC(mely_stream_close(s, MELY_STREAM_FLUSH), 0);
    CHECK_RC(mely_stream_write_block(s, edge_block), -EPIPE);
}

static void *block_edges_helper(void *arg)
{
    (void)arg;
    post_to(edge_stream, block_edges_own, NULL);
    wait_closed(1);
    CHECK_RC(mely_stream_write_block(edge_stream, edge_block), -EPIPE);
    mely_stop(&rt);
    return NULL;
}

/*
 * The edges: NULL blocks and streams (MELY_EINVAL), a block too large to
 * allocate (NULL), an empty block (written: nothing sent), NULL data,
 * mely_block_ref returning its block; writes to a closed stream (-EPIPE)
 * from its color and from a foreign thread; the bytes written before the
 * close with flush arrive.
 */
START_TEST(block_edges)
{
    ck_assert_ptr_null(mely_block_data(NULL));
    ck_assert_uint_eq(mely_block_len(NULL), 0);
    ck_assert_ptr_null(mely_block_ref(NULL));
    mely_block_unref(NULL);
    ck_assert_ptr_null(mely_block_new(NULL, 1));
    ck_assert_ptr_null(mely_block_printf(NULL));
    ck_assert_ptr_null(mely_block_alloc(SIZE_MAX));
    ck_assert_ptr_null(mely_block_alloc(SIZE_MAX - 8));
    edge_empty = mely_block_new(NULL, 0);
    ck_assert_ptr_nonnull(edge_empty);
    ck_assert_uint_eq(mely_block_len(edge_empty), 0);
    edge_block = mely_block_printf("%s-%d", "edge", 7);
    ck_assert_ptr_nonnull(edge_block);
    ck_assert_uint_eq(mely_block_len(edge_block), 6);
    ck_assert_int_eq(memcmp(mely_block_data(edge_block), "edge-7", 6), 0);
    ck_assert_ptr_eq(mely_block_ref(edge_block), edge_block);
    mely_block_unref(edge_block); /* one reference left */

    memset(&srv, 0, sizeof(srv));
    init_runtime(&rt, 1, 1, MELY_BATCH_DEFAULT, MELY_SPIN_US_DEFAULT);
    int sp[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    mely_stream_ops_t ops = {.closed = on_closed};
    struct conn *c = new_conn(0);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(mely_stream_open(&rt, sp[0], MELY_TO(ERR_COLOR), &ops, c, &edge_stream), 0);
    mely_stream_ref(edge_stream); /* the runtime is not running: it cannot close yet */
    ck_assert_int_eq(mely_stream_write_block(NULL, edge_block), MELY_EINVAL);
    ck_assert_int_eq(mely_stream_write_block(edge_stream, NULL), MELY_EINVAL);
    run_with_helper(&rt, block_edges_helper, NULL, 30, "block edges");
    mely_stream_unref(edge_stream);
    ck_assert_int_ge(mely_shutdown(&rt), 0);
    mely_block_unref(edge_block);
    mely_block_unref(edge_empty);
    char buf[16];
    int end = 0;
    size_t n = recv_upto(sp[1], buf, sizeof(buf), WAIT_MS, &end);
    ck_assert_msg(n == 6 && memcmp(buf, "edge-7", 6) == 0 && end == 1,
                  "the peer got %zu bytes (end %d), expected \"edge-7\" then EOF", n, end);
    close(sp[1]);
    assert_no_notes();
    assert_closed_once(1);
    free_graveyard();
}
END_TEST

/* ---- the output cap ----------------------------------------------------------------------- */

enum {
    CAP = 1 << 20,
    CAP_CHUNK = 65536,
    CAP_APPEND = 65536,      /* appended through mely_stream_output beyond the cap */
    CAP_PER_EVENT = 4,       /* chunks a writer of another color writes per event */
};
#define DEFAULT_CAP ((uint64_t)16 << 20)

static const struct cap_mode {
    unsigned workers;
    bool own;       /* the writer is an event of the stream's color (else another color) */
    bool set;       /* ops.output_max = CAP (else the default) */
    unsigned flags; /* ops.flags */
} cap_modes[] = {
    {1, false, true, 0}, {2, false, true, 0}, {2, false, true, MELY_STREAM_CAP_CLOSE},
    {1, true, true, 0},  {2, true, true, MELY_STREAM_CAP_CLOSE}, {2, false, false, 0},
};

/* The writer's state: one writer at a time, its events ordered. */
static struct {
    mely_stream_t *s;
    uint64_t cap, accepted;
    bool own, cap_close;
} cw1;
static uint8_t cap_buf[CAP_CHUNK];
static _Atomic uint64_t cap_accepted, cap_chunks, cap_maxq, cap_qref, cap_qend, cap_q0;
static atomic_int cap_rc, cap_append_rc;
static atomic_bool cap_done;

/* One chunk: 0, or why not. Samples mely_stream_queued before (*q) and after. */
static int cap_write(uint64_t *q)
{
    *q = mely_stream_queued(cw1.s);
    fill_pat(cap_buf, cw1.accepted, CAP_CHUNK);
    int err = mely_stream_write(cw1.s, cap_buf, CAP_CHUNK);
    if (err)
        return err;
    cw1.accepted += CAP_CHUNK;
    max_store(&cap_maxq, mely_stream_queued(cw1.s));
    return 0;
}

static void cap_finish(int err, uint64_t q)
{
    atomic_store(&cap_rc, err);
    atomic_store(&cap_qref, q);
    atomic_store(&cap_accepted, cw1.accepted);
    atomic_store(&cap_done, true);
}

/* Records; closes at EOF (the cap closes the stream by itself). */
static void cap_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    record_event(c, what, err);
    if (what & MELY_STREAM_EOF)
        mely_stream_close(s, MELY_STREAM_FLUSH);
    leave(c);
}

/* A limit no capped writer reaches: the cap, twice over, and 8 MiB. */
static uint64_t cap_limit(void)
{
    return 2 * cw1.cap + (8 << 20);
}

/* Another color's writer: CAP_PER_EVENT chunks per event until refused. */
static void cap_writer_event(void *arg)
{
    (void)arg;
    uint64_t q = 0;
    for (int i = 0; i < CAP_PER_EVENT; i++) {
        int err = cap_write(&q);
        if (err || cw1.accepted >= cap_limit()) {
            cap_finish(err, q);
            return;
        }
    }
    int err = mely_post(&rt, (mely_color_t)mely_current_color(), cap_writer_event, NULL);
    if (err) {
        note("mely_post: %s", mely_strerror(err));
        cap_finish(0, q);
    }
}

/* The stream's own color: chunks until refused, in one event (no byte is
 * sent meanwhile: the count is exact), then an append beyond the cap. */
static void cap_own_event(void *arg)
{
    (void)arg;
    uint64_t q = 0;
    int err = 0;
    atomic_store(&cap_q0, mely_stream_queued(cw1.s));
    while (!err && cw1.accepted < cap_limit())
        err = cap_write(&q);
    atomic_store(&cap_qend, mely_stream_queued(cw1.s));
    atomic_store(&cap_chunks, cw1.accepted);
    if (err == -ENOBUFS && !cw1.cap_close) {
        /* "they are not checked against output_max; the next write is" */
        uint8_t buf[CAP_APPEND];
        fill_pat(buf, cw1.accepted, sizeof(buf));
        if (evbuffer_add(mely_stream_output(cw1.s), buf, sizeof(buf)) != 0)
            note("an append to mely_stream_output beyond the cap failed");
        else
            cw1.accepted += sizeof(buf);
        atomic_store(&cap_append_rc, mely_stream_write(cw1.s, "x", 1));
    }
    cap_finish(err, q);
}

/* What the stream sent, once it is stable (the peer reads nothing), and
 * what it holds queued then. */
static void cap_stable(uint64_t *sent, uint64_t *queued)
{
    for (int i = 0; i < 50; i++) { /* bounded: 50 looks, 20 ms apart */
        sleep_us(20000);
        uint64_t a = sent_now().bytes;
        *queued = mely_stream_queued(cw1.s);
        *sent = sent_now().bytes;
        if (a == *sent)
            return;
    }
    note("the stream kept sending to a peer that reads nothing");
}

static void *cap_client(void *arg)
{
    const struct cap_mode *m = &cap_modes[(uintptr_t)arg];
    int fd = client_ready(1, SMALL_BUF);
    bool ok = fd >= 0;
    if (!ok)
        return client_done(fd, false);
    cw1.s = srv.stream[0];
    if (m->own)
        post_to(cw1.s, cap_own_event, NULL);
    else if (mely_post(&rt, OTHER_COLOR(0), cap_writer_event, NULL) != 0)
        note("mely_post failed");
    if (!wait_flag(&cap_done, 2 * WAIT_MS)) {
        note("the writer did not finish");
        return client_done(fd, false);
    }
    uint64_t a = atomic_load(&cap_accepted), cap = cw1.cap;
    int rc = atomic_load(&cap_rc);
    if (rc != -ENOBUFS) {
        note("the writer stopped after %llu bytes with %d, not -ENOBUFS (output_max %llu)",
             (unsigned long long)a, rc, (unsigned long long)cap);
        return client_done(fd, false);
    }
    uint64_t q0 = atomic_load(&cap_q0), qend = atomic_load(&cap_qend);
    uint64_t qref = atomic_load(&cap_qref), maxq = atomic_load(&cap_maxq);
    if (m->own) {
        /* Exact on the stream's color: every chunk that fit, none more. */
        uint64_t k = atomic_load(&cap_chunks);
        if (q0 + k > cap || q0 + k + CAP_CHUNK <= cap || qend != q0 + k)
            note("own color: %llu bytes accepted on %llu queued, then %llu queued (cap %llu, "
                 "chunks of %d)",
                 (unsigned long long)k, (unsigned long long)q0, (unsigned long long)qend,
                 (unsigned long long)cap, CAP_CHUNK);
        if (!cw1.cap_close && atomic_load(&cap_append_rc) != -ENOBUFS)
            note("a write after an append beyond the cap returned %d, not -ENOBUFS",
                 atomic_load(&cap_append_rc));
    } else if (m->workers == 1) {
        /* One worker: the stream's color did not run while the writer's
         * event did, so what it read just before the refused write is what
         * the write was measured against. */
        if (qref > cap || qref + CAP_CHUNK <= cap)
            note("refused with %llu bytes queued (cap %llu, a chunk of %d)",
                 (unsigned long long)qref, (unsigned long long)cap, CAP_CHUNK);
    }
    /* From another thread, mely_stream_queued is off by at most what one
     * batch appends meanwhile (here, at most a cap's worth). */
    if (maxq > 2 * cap + CAP_CHUNK)
        note("mely_stream_queued read %llu bytes from another color (cap %llu)",
             (unsigned long long)maxq, (unsigned long long)cap);
    if (m->flags & MELY_STREAM_CAP_CLOSE) {
        wait_closed(1);
        uint64_t got = pat_to_end(fd, 0);
        if (got > a)
            note("%llu bytes arrived, %llu were accepted", (unsigned long long)got,
                 (unsigned long long)a);
        if (mely_stream_queued(cw1.s) != 0)
            note("mely_stream_queued is %zu once the stream is closed",
                 mely_stream_queued(cw1.s));
        return client_done(fd, false); /* waited above */
    }
    uint64_t sent = 0, queued = 0;
    cap_stable(&sent, &queued);
    printf("output cap %llu (%s, %u worker%s): %llu bytes accepted, %llu sent, %llu queued\n",
           (unsigned long long)cap, m->own ? "own color" : "another color", m->workers,
           m->workers > 1 ? "s" : "", (unsigned long long)a, (unsigned long long)sent,
           (unsigned long long)queued);
    if (queued != a - sent)
        note("mely_stream_queued is %llu with %llu bytes accepted and %llu sent",
             (unsigned long long)queued, (unsigned long long)a, (unsigned long long)sent);
    uint64_t beyond = m->own ? CAP_APPEND : 0; /* appends are not checked */
    if (queued > cap + beyond)
        note("%llu bytes queued, over the cap of %llu", (unsigned long long)queued,
             (unsigned long long)cap);
    if (a > cap + beyond + CAP_CHUNK + sent)
        note("%llu bytes accepted: more than the cap (%llu), a chunk and the %llu the kernel took",
             (unsigned long long)a, (unsigned long long)cap, (unsigned long long)sent);
    /* The peer reads: everything accepted arrives. */
    ok = expect_pat(fd, 0, a) && shutdown(fd, SHUT_WR) == 0 && expect_end(fd, NULL);
    return client_done(fd, ok);
}

/*
 * A peer that never reads (small socket buffers) and a writer of 64 KiB
 * chunks until -ENOBUFS, with output_max 1 MiB: on another color, the
 * bytes accepted are at most the cap, a chunk and what the kernel took
 * (stream_bytes), mely_stream_queued read there stays within the cap and a
 * batch's worth, and once all is still it equals accepted - sent. On the
 * stream's own color the count is exact (every chunk that fits, no more),
 * and an append through mely_stream_output is not checked but the next
 * write is. With MELY_STREAM_CAP_CLOSE the stream closes, its event
 * callback having got MELY_STREAM_ERROR with -ENOBUFS; without, the peer
 * then reads all that was accepted. And the default cap, 16 MiB, bounds a
 * writer whose stream sets nothing.
 */
START_TEST(output_cap_bounds_a_writer)
{
    const struct cap_mode *m = &cap_modes[_i];
    mely_stream_ops_t ops = {.event = cap_event_cb, .closed = on_closed};
    ops.output_max = m->set ? CAP : 0;
    ops.flags = m->flags;
    memset(&cw1, 0, sizeof(cw1));
    cw1.cap = m->set ? CAP : DEFAULT_CAP;
    cw1.own = m->own;
    cw1.cap_close = m->flags & MELY_STREAM_CAP_CLOSE;
    atomic_store(&cap_done, false);
    atomic_store(&cap_maxq, 0);
    char what[64];
    snprintf(what, sizeof(what), "output cap, %s%s%s", m->own ? "own color" : "another color",
             m->set ? "" : ", default", m->flags ? ", CAP_CLOSE" : "");
    serve(m->workers, &ops, setup_small_sndbuf, true, cap_client, (void *)(uintptr_t)_i, what);
    assert_closed_once(1);
    /* The first event: the cap's error, or the client's EOF at the end. */
    ck_assert_uint_eq(atomic_load(&srv.events), 1);
    if (m->flags & MELY_STREAM_CAP_CLOSE) {
        ck_assert_uint_eq(atomic_load(&srv.ev_what[0]), MELY_STREAM_ERROR);
        ck_assert_int_eq(atomic_load(&srv.ev_err[0]), -ENOBUFS);
    } else {
        ck_assert_uint_eq(atomic_load(&srv.ev_what[0]), MELY_STREAM_EOF);
    }
    stop_server();
}
END_TEST

/* ---- "no limit" values -------------------------------------------------------------------- */

enum { NO_LIMIT_LINE = 100000 };

static void len_line_cb(mely_stream_t *s, char *line, size_t len, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "line");
    if (strlen(line) != len)
        note("stream %u: a line of %zu bytes has a 0 at %zu", c->id, len, strlen(line));
    mely_stream_printf(s, "%zu\n", len);
    leave(c);
}

/* Only EOF may come: answered, then a close after flushing. */
static void only_eof_event_cb(mely_stream_t *s, unsigned what, int err, void *arg)
{
    struct conn *c = arg;
    enter(s, c, "event");
    record_event(c, what, err);
    if (what != MELY_STREAM_EOF)
        note("stream %u: event 0x%x (err %d) with no limit set", c->id, what, err);
    mely_stream_close(s, what == MELY_STREAM_EOF ? MELY_STREAM_FLUSH : 0);
    leave(c);
}

static void setup_no_limits(mely_stream_t *s, struct conn *c)
{
    int err = mely_stream_timeouts(s, UINT64_MAX, UINT64_MAX);
    if (!err)
        err = mely_stream_max_line(s, SIZE_MAX);
    if (err)
        note("stream %u: mely_stream_timeouts or max_line: %s", c->id, mely_strerror(err));
}

static void *no_limit_client(void *arg)
{
    (void)arg;
    char *part = malloc(NO_LIMIT_LINE);
    int fd = client_ready(1, 0);
    bool ok = fd >= 0 && part && send_str(fd, "a\n") && expect(fd, "1\n");
    if (ok) {
        memset(part, 'p', NO_LIMIT_LINE);
        ok = send_all(fd, part, NO_LIMIT_LINE);
        sleep_us(300 * 1000); /* a timeout of UINT64_MAX that overflowed fires now */
        expect_quiet(fd, "a partial line, no limits");
        if (atomic_load(&srv.events))
            note("event 0x%x (err %d) with no limit set", atomic_load(&srv.ev_what[0]),
                 atomic_load(&srv.ev_err[0]));
    }
    char want[32];
    snprintf(want, sizeof(want), "%d\n", NO_LIMIT_LINE);
    ok = ok && send_str(fd, "\n") && expect(fd, want) && shutdown(fd, SHUT_WR) == 0 &&
         expect_eof(fd);
    free(part);
    return client_done(fd, ok);
}

/*
 * Read, write and idle timeouts of UINT64_MAX ("like 0, is none") never
 * fire: none in 300 ms of silence (one that overflowed would be due at
 * once); max_line SIZE_MAX takes a partial line of 100 KB without an error,
 * and the line once it ends. In the ops (one worker), or set on the
 * stream's color (two).
 */
START_TEST(no_limit_values)
{
    mely_stream_ops_t ops = {.line = len_line_cb, .event = only_eof_event_cb, .closed = on_closed};
    ops.idle_timeout_ns = UINT64_MAX;
    if (_i == 0) {
        ops.read_timeout_ns = ops.write_timeout_ns = UINT64_MAX;
        ops.max_line = SIZE_MAX;
    }
    serve(1 + (unsigned)_i, &ops, _i == 0 ? NULL : setup_no_limits, false, no_limit_client, NULL,
          "no limits");
    assert_closed_once(1);
    ck_assert_uint_eq(atomic_load(&srv.events), 1);
    stop_server();
}
END_TEST

/* ---- writers under stealing --------------------------------------------------------------- */

/*
 * Every runtime shape of the stress tests (testutil.h: 2 pinned and 8
 * unpinned workers, stealing off and with every policy, both engines):
 * STEAL_CONNS streams, each written to by STEAL_WRITERS colors (events that
 * post themselves again, so that their queues are there to steal), by an
 * event of the stream's own color, and by a thread that is no worker, each
 * a numbered line per round. A writer's line to a stream takes whichever
 * path the place of the two colors gives at that moment: the stream's own,
 * a claim of the stream's color on the writer's worker, the writer's
 * worker's buffer, the stack; the steals move the colors between them.
 * Each client checks that every writer's lines arrive whole, all of them,
 * each once and in order. A held color run elsewhere would break a line or
 * the order (and ThreadSanitizer would say so).
 */
enum { STEAL_CONNS = 4, STEAL_WRITERS = 12, STEAL_ROUNDS = 1500 };
enum { W_OWN = STEAL_WRITERS, W_THREAD = STEAL_WRITERS + 1, STEAL_NW = STEAL_WRITERS + 2 };

static struct {
    unsigned round[STEAL_NW];      /* a writer color's own (W_OWN: per stream, below) */
    unsigned own_round[STEAL_CONNS];
    atomic_uint done;              /* writers that wrote their last round */
} sw;

static void steal_line(mely_stream_t *s, unsigned writer, unsigned round)
{
    char line[32];
    int n = snprintf(line, sizeof(line), "w%u %u\n", writer, round);
    int err = mely_stream_write(s, line, (size_t)n);
    if (err)
        note("writer %u, round %u: mely_stream_write: %s", writer, round, mely_strerror(err));
}

/* A writer color: a round to every stream, then again, as a new event. */
static void steal_writer(void *arg)
{
    unsigned w = (unsigned)(uintptr_t)arg;
    for (unsigned c = 0; c < STEAL_CONNS; c++)
        steal_line(srv.stream[c], w, sw.round[w]);
    if (++sw.round[w] == STEAL_ROUNDS)
        atomic_fetch_add(&sw.done, 1);
    else if (mely_post(&rt, OTHER_COLOR(w), steal_writer, arg) != 0)
        note("writer %u: mely_post failed", w);
}

/* On a stream's own color: its own writer's rounds. */
static void steal_own_writer(void *arg)
{
    unsigned c = (unsigned)(uintptr_t)arg;
    steal_line(srv.stream[c], W_OWN, sw.own_round[c]);
    if (++sw.own_round[c] == STEAL_ROUNDS)
        atomic_fetch_add(&sw.done, 1);
    else if (mely_post(&rt, mely_stream_color(srv.stream[c]), steal_own_writer, arg) != 0)
        note("own writer %u: mely_post failed", c);
}

static void *steal_thread(void *arg)
{
    (void)arg;
    for (unsigned r = 0; r < STEAL_ROUNDS; r++)
        for (unsigned c = 0; c < STEAL_CONNS; c++)
            steal_line(srv.stream[c], W_THREAD, r);
    atomic_fetch_add(&sw.done, 1);
    return NULL;
}

/* Reads one connection's lines to the end: each writer's rounds whole, in
 * order, all of them. */
static bool steal_read(int fd, unsigned conn)
{
    struct lr lr = {.fd = fd};
    unsigned next[STEAL_NW] = {0};
    char line[64];
    for (unsigned total = 0; total < STEAL_NW * STEAL_ROUNDS; total++) {
        unsigned w, r;
        if (!next_line(&lr, line, sizeof(line), WAIT_MS)) {
            note("stream %u: %u lines of %u, then none", conn, total, STEAL_NW * STEAL_ROUNDS);
            return false;
        }
        if (sscanf(line, "w%u %u", &w, &r) != 2 || w >= STEAL_NW || r != next[w]) {
            note("stream %u: \"%s\" after %u lines (writer's next round: %u)", conn, line, total,
                 w < STEAL_NW ? next[w] : 0);
            return false;
        }
        next[w]++;
    }
    return true;
}

static void *steal_client(void *arg)
{
    (void)arg;
    int fd[STEAL_CONNS];
    bool ok = true;
    for (unsigned c = 0; c < STEAL_CONNS; c++)
        ok = (fd[c] = client_ready(c + 1, 0)) >= 0 && ok;
    pthread_t t;
    bool thread = ok && pthread_create(&t, NULL, steal_thread, NULL) == 0;
    for (unsigned w = 0; ok && w < STEAL_WRITERS; w++)
        ok = mely_post(&rt, OTHER_COLOR(w), steal_writer, (void *)(uintptr_t)w) == 0;
    for (unsigned c = 0; ok && c < STEAL_CONNS; c++)
        ok = mely_post(&rt, mely_stream_color(srv.stream[c]), steal_own_writer,
                       (void *)(uintptr_t)c) == 0;
    if (!ok)
        note("the writers could not start");
    for (unsigned c = 0; ok && c < STEAL_CONNS; c++)
        ok = steal_read(fd[c], c);
    if (thread)
        pthread_join(t, NULL);
    ok = ok && wait_count(&sw.done, STEAL_NW - 2 + STEAL_CONNS, WAIT_MS);
    for (unsigned c = 1; c < STEAL_CONNS; c++)
        if (fd[c] >= 0)
            close(fd[c]);
    return client_done(fd[0], ok);
}

START_TEST(writers_under_stealing)
{
    const struct shape *sh = &shapes[_i];
    mely_stream_ops_t ops = {.closed = on_closed};
    memset(&sw, 0, sizeof(sw));
    start_server_shape(sh, &ops, NULL, true);
    run_with_helper(&rt, steal_client, NULL, 120, shape_name(sh));
    mely_stats_t st;
    uint64_t steals = 0;
    for (unsigned w = 0; mely_worker_stats(&rt, w, &st) == 0; w++)
        steals += st.steals;
    printf("writers under stealing (%s): %u lines to each of %d streams, %llu steals\n",
           shape_name(sh), STEAL_NW * STEAL_ROUNDS, STEAL_CONNS, (unsigned long long)steals);
    stop_server();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("stream_write");

    TCase *tc = new_tcase(s, "coalescing", 60);
    tcase_add_loop_test(tc, writes_of_one_batch_make_one_send, 0, 3);
    tcase_add_loop_test(tc, output_appends_are_sent, 0, 2);
    tcase_add_loop_test(tc, timeout_is_not_eof, 0, 2);

    tc = new_tcase(s, "writers", 60);
    tcase_add_loop_test(tc, close_behind_writes_from_elsewhere, 0, NELEM(closer_modes));
    tcase_add_loop_test(tc, writes_racing_a_half_close, 0, 4);
    tcase_add_loop_test(tc, blocks_to_several_streams, 0, 2);
    tcase_add_test(tc, a_write_then_a_post_keep_their_order);
    tcase_add_loop_test(tc, staged_writes_then_a_request_from_the_same_event, 0, NELEM(sr_modes));
    tcase_add_test(tc, an_idle_hook_write_leaves_before_the_worker_sleeps);
    tcase_add_test(tc, block_edges);

    tc = new_tcase(s, "limits", 60);
    tcase_add_loop_test(tc, output_cap_bounds_a_writer, 0, NELEM(cap_modes));
    tcase_add_loop_test(tc, no_limit_values, 0, 2);

    tc = new_tcase(s, "stealing", 120);
    tcase_add_loop_test(tc, writers_under_stealing, 0, NSHAPES);
    return mely_test_main(s);
}
