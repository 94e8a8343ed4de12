/* SPDX-License-Identifier: MIT */
/*
 * trace.c: starting, stopping and writing traces (trace.h has the rings).
 *
 * The file is the Chrome/Perfetto Trace Event JSON format: one object
 * {"traceEvents": [...], "otherData": {...}}. Each worker is a thread (tid =
 * its index, named "worker N"); a handler run is a complete event ("X")
 * named by the handler (its descriptor's name, else its symbol from dladdr
 * or its object's .symtab, else its address: mely__handler_name) with args {color, cycles}; a park and a poll are
 * complete events too; a steal and expired timers are instant events ("i").
 * Timestamps are microseconds since tracing started, converted from the TSC
 * with a rate measured against CLOCK_MONOTONIC between start and stop.
 * otherData.dropped_records counts the records the full rings overwrote;
 * otherData.unwritten_workers, if any, the workers whose rings an exit left
 * out (they were still inside a handler: trace.h).
 *
 * Starting and stopping work whether or not mely_run() is running: the
 * rings change hands at the workers' loop turns (trace.h has the protocol).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mely/core/handle.h"
#include "mely/core/log.h"
#include "mely/core/park.h"
#include "mely/runtime.h"
#include "mely/observe/stall.h"
#include "mely/observe/trace.h"

/* Records per worker unless MELY_TRACE_RECORDS says otherwise: 2 MB each. */
#define TRACE_RECORDS_DEFAULT (1u << 16)
#define TRACE_RECORDS_MAX (1u << 26)

/* The TSC rate needs this much monotonic time between its two readings to be
 * good to about 0.01%: a shorter trace waits out the rest at stop. */
#define CALIBRATE_NS 20000000ull

/* How long an exit waits for workers inside handlers to let go of their
 * rings, and how often a stop looks again (waking parked workers). */
#define EXIT_WAIT_NS 200000000ull
#define LET_GO_POLL_NS 100000

struct mely__tracer {
    FILE *f;
    uint64_t tsc0, ns0;       /* when tracing started */
    struct mely__trace *ring; /* one per worker */
};

/* MELY_TRACE_RECORDS, rounded up to a power of two (the ring's index is a mask). */
static uint64_t ring_records(void)
{
    const char *s = getenv("MELY_TRACE_RECORDS");
    char *end;
    unsigned long v = s ? strtoul(s, &end, 10) : 0;
    if (!s || *end || v < 2 || v > TRACE_RECORDS_MAX)
        v = TRACE_RECORDS_DEFAULT;
    uint64_t n = 1;
    while (n < v)
        n <<= 1;
    return n;
}

static void tracer_free(struct mely__tracer *tr, unsigned nworkers)
{
    for (unsigned i = 0; tr->ring && i < nworkers; i++)
        free(tr->ring[i].rec);
    free(tr->ring);
    if (tr->f)
        fclose(tr->f);
    free(tr);
}

int mely__trace_start(struct mely__rt *rt, const char *path)
{
    if (rt->tracer)
        return MELY_EBUSY;
    struct mely__tracer *tr = calloc(1, sizeof(*tr));
    if (!tr)
        return MELY_ENOMEM;
    tr->ring = calloc(rt->nworkers, sizeof(*tr->ring));
    uint64_t n = ring_records();
    for (unsigned i = 0; tr->ring && i < rt->nworkers; i++) {
        tr->ring[i].rec = malloc(n * sizeof(struct mely__trec));
        if (!tr->ring[i].rec)
            break;
        tr->ring[i].mask = n - 1;
    }
    if (!tr->ring || !tr->ring[rt->nworkers - 1].rec) {
        tracer_free(tr, rt->nworkers);
        return MELY_ENOMEM;
    }
    tr->f = fopen(path, "w");
    if (!tr->f) {
        int err = -errno;
        tracer_free(tr, rt->nworkers);
        return err;
    }
    tr->ns0 = mely__now_ns();
    tr->tsc0 = mely__cycles();
    rt->tracer = tr;
    /* Seq_cst stores, so also releases: a worker that reads the ring's
     * address sees the ring as written here. */
    for (unsigned i = 0; i < rt->nworkers; i++)
        atomic_store(&rt->workers[i].trace_want, &tr->ring[i]);
    return 0;
}

void mely__trace_follow_slow(struct mely__worker *w)
{
    struct mely__trace *want = atomic_load(&w->trace_want);

    for (;;) { /* again only if a start or stop came meanwhile */
        w->trace = want;
        w->observed = want || w->rt->cost.measure;
        atomic_store(&w->trace_ack, want);
        struct mely__trace *now = atomic_load(&w->trace_want);
        if (now == want)
            return;
        want = now;
    }
}

static void nap(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) /* bounded: the rest of ns */
        ;
}

/* Whether worker i still holds its ring of tr: it acknowledged it last, and
 * mely_run() runs (read after the ack, trace.h). `self` never does: it is
 * the caller. */
static bool holds_ring(const struct mely__rt *rt, const struct mely__tracer *tr, unsigned i,
                       const struct mely__worker *self)
{
    const struct mely__worker *w = &rt->workers[i];
    return w != self && atomic_load((_Atomic(struct mely__trace *) *)&w->trace_ack) == &tr->ring[i] &&
           atomic_load((atomic_bool *)&rt->running);
}

/* Asks every worker to let go of its ring and waits until all have (the
 * stopper's side of trace.h's protocol), waking parked ones, for at most
 * limit_ns (0: as long as it takes, as mely_stop() waits for handlers).
 * held[i] (if not NULL) says which still hold theirs at the end; returns
 * how many do. */
static unsigned let_go(struct mely__rt *rt, const struct mely__tracer *tr,
                       const struct mely__worker *self, uint64_t limit_ns, bool *held)
{
    for (unsigned i = 0; i < rt->nworkers; i++)
        atomic_store(&rt->workers[i].trace_want, NULL);
    uint64_t start = mely__now_ns();
    for (;;) { /* bounded by limit_ns, or by the longest handler running */
        unsigned holding = 0;
        for (unsigned i = 0; i < rt->nworkers; i++) {
            bool h = holds_ring(rt, tr, i, self);
            holding += h;
            if (held)
                held[i] = h;
            if (h) /* a parked worker turns its loop only when woken */
                mely__wake_if_parked(&rt->workers[i], mely__self_in(rt));
        }
        if (!holding || (limit_ns && mely__now_ns() - start >= limit_ns))
            return holding;
        nap(LET_GO_POLL_NS);
    }
}

/* ---- writing ---------------------------------------------------------------------- */

struct writer {
    FILE *f;
    uint64_t tsc0;
    double us_per_cycle;
    bool first; /* no event written yet: no comma before the next */
};

/* TSC cycles per microsecond's inverse, measured from the start of tracing. */
static double us_per_cycle(const struct mely__tracer *tr)
{
    uint64_t ns = mely__now_ns() - tr->ns0;
    if (ns < CALIBRATE_NS) {
        uint64_t left = CALIBRATE_NS - ns;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)left};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) /* bounded: the rest of 20 ms */
            ;
    }
    ns = mely__now_ns() - tr->ns0;
    uint64_t cycles = mely__cycles() - tr->tsc0;
    return cycles ? (double)ns / 1000.0 / (double)cycles : 0.001;
}

/* s as the body of a JSON string. */
static void put_string(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

/* The name of a run's handler (mely__handler_name). */
static void put_name(FILE *f, const struct mely__trec *r)
{
    char buf[256];
    put_string(f, r->desc ? mely__handler_name(r->u.who, NULL, buf, sizeof(buf))
                          : mely__handler_name(NULL, r->u.who, buf, sizeof(buf)));
}

static void begin_event(struct writer *wr, const char *ph, unsigned tid, uint64_t tsc)
{
    double ts = tsc > wr->tsc0 ? (double)(tsc - wr->tsc0) * wr->us_per_cycle : 0.0;
    fprintf(wr->f, "%s\n{\"ph\":\"%s\",\"pid\":1,\"tid\":%u,\"ts\":%.3f", wr->first ? "" : ",", ph,
            tid, ts);
    wr->first = false;
}

static void put_dur(struct writer *wr, uint64_t cycles)
{
    fprintf(wr->f, ",\"dur\":%.3f", (double)cycles * wr->us_per_cycle);
}

static void put_record(struct writer *wr, unsigned tid, const struct mely__trec *r)
{
    FILE *f = wr->f;
    switch ((enum mely__trace_kind)r->kind) {
    case MELY__TR_RUN:
        begin_event(wr, "X", tid, r->tsc);
        put_dur(wr, r->val);
        fputs(",\"cat\":\"run\",\"name\":\"", f);
        put_name(f, r);
        fprintf(f, "\",\"args\":{\"color\":%" PRIu32 ",\"cycles\":%" PRIu64 "}}", r->color, r->val);
        break;
    case MELY__TR_STEAL:
        begin_event(wr, "X", tid, r->tsc);
        put_dur(wr, r->val);
        fprintf(f,
                ",\"cat\":\"steal\",\"name\":\"steal\",\"args\":{\"victim\":%u,"
                "\"color\":%" PRIu32 ",\"events\":%" PRIu32 ",\"cycles\":%" PRIu64
                ",\"work\":%" PRIu32 "}}",
                r->arg, r->color, r->u.steal.events, r->val, r->u.steal.work);
        break;
    case MELY__TR_MOVE:
        begin_event(wr, "X", tid, r->tsc);
        put_dur(wr, r->val);
        fprintf(f,
                ",\"cat\":\"move\",\"name\":\"watch move\",\"args\":{\"fd\":%" PRId64
                ",\"color\":%" PRIu32 ",\"from\":%u,\"cycles\":%" PRIu64 "}}",
                r->u.fd, r->color, r->arg, r->val);
        break;
    case MELY__TR_PARK:
        begin_event(wr, "X", tid, r->tsc);
        put_dur(wr, r->val);
        fprintf(f, ",\"cat\":\"park\",\"name\":\"park\",\"args\":{\"woken\":%u}}", r->arg);
        break;
    case MELY__TR_POLL:
        begin_event(wr, "X", tid, r->tsc);
        put_dur(wr, r->val);
        fprintf(f, ",\"cat\":\"poll\",\"name\":\"poll\",\"args\":{\"ready\":%u}}", r->arg);
        break;
    case MELY__TR_SPIN:
        begin_event(wr, "X", tid, r->tsc);
        put_dur(wr, r->val);
        fprintf(f, ",\"cat\":\"spin\",\"name\":\"spin\",\"args\":{\"found\":%u}}", r->arg);
        break;
    case MELY__TR_TIMERS:
        begin_event(wr, "i", tid, r->tsc);
        fprintf(f, ",\"s\":\"t\",\"cat\":\"timer\",\"name\":\"timers\",\"args\":{\"fired\":%u}}",
                r->arg);
        break;
    }
}

/* Worker `tid`'s metadata and its ring's records, oldest first; returns the
 * number of records its ring dropped. */
static uint64_t put_worker(struct writer *wr, unsigned tid, const struct mely__trace *t)
{
    uint64_t size = t->mask + 1;
    uint64_t first = t->head > size ? t->head - size : 0;

    begin_event(wr, "M", tid, wr->tsc0);
    fprintf(wr->f, ",\"name\":\"thread_name\",\"args\":{\"name\":\"worker %u\"}}", tid);
    for (uint64_t i = first; i < t->head; i++)
        put_record(wr, tid, &t->rec[i & t->mask]);
    return first;
}

/* Writes the trace, leaving out the rings that held[] names (NULL: none). */
static int write_trace(const struct mely__rt *rt, const struct mely__tracer *tr, const bool *held,
                       uint64_t *dropped)
{
    struct writer wr = {.f = tr->f, .tsc0 = tr->tsc0, .us_per_cycle = us_per_cycle(tr), .first = true};

    *dropped = 0;
    fputs("{\"traceEvents\":[", tr->f);
    begin_event(&wr, "M", 0, tr->tsc0);
    fputs(",\"name\":\"process_name\",\"args\":{\"name\":\"mely\"}}", tr->f);
    for (unsigned i = 0; i < rt->nworkers; i++)
        if (!held || !held[i])
            *dropped += put_worker(&wr, i, &tr->ring[i]);
    fprintf(tr->f,
            "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"dropped_records\":%" PRIu64
            ",\"ring_records\":%" PRIu64 ",\"cycles_per_us\":%.3f",
            *dropped, tr->ring[0].mask + 1, 1.0 / wr.us_per_cycle);
    if (held) {
        const char *sep = "";
        fputs(",\"unwritten_workers\":[", tr->f);
        for (unsigned i = 0; i < rt->nworkers; i++)
            if (held[i]) {
                fprintf(tr->f, "%s%u", sep, i);
                sep = ",";
            }
        fputc(']', tr->f);
    }
    fputs("}}\n", tr->f);
    return ferror(tr->f) ? -EIO : 0;
}

/* Writes and closes tr's file: 0 or a negative errno. */
static int finish_file(const struct mely__rt *rt, struct mely__tracer *tr, const bool *held,
                       uint64_t *dropped)
{
    int err = write_trace(rt, tr, held, dropped);
    if (fclose(tr->f) != 0 && !err)
        err = -errno;
    tr->f = NULL;
    return err;
}

int64_t mely__trace_stop(struct mely__rt *rt)
{
    pthread_mutex_lock(&rt->trace_mu);
    struct mely__tracer *tr = rt->tracer;
    if (!tr) {
        pthread_mutex_unlock(&rt->trace_mu);
        return MELY_EINVAL;
    }
    (void)let_go(rt, tr, NULL, 0, NULL);
    rt->tracer = NULL;
    pthread_mutex_unlock(&rt->trace_mu);
    uint64_t dropped = 0;
    /* No file left: the exit handler wrote it (a shutdown from a later one). */
    int err = tr->f ? finish_file(rt, tr, NULL, &dropped) : 0;
    tracer_free(tr, rt->nworkers);
    return err ? err : (int64_t)dropped;
}

void mely__trace_at_exit(struct mely__rt *rt)
{
    /* A stop in progress on another thread writes the file itself. */
    if (pthread_mutex_trylock(&rt->trace_mu) != 0)
        return;
    struct mely__tracer *tr = rt->tracer;
    bool *held = tr && tr->f ? calloc(rt->nworkers, sizeof(bool)) : NULL;
    if (held) {
        unsigned left = let_go(rt, tr, mely__self_in(rt), EXIT_WAIT_NS, held);
        uint64_t dropped;
        int err = finish_file(rt, tr, left ? held : NULL, &dropped);
        if (err)
            mely__log(MELY_LOG_ERROR, "the trace could not be written: %s", mely_strerror(err));
        else if (left)
            mely__log(MELY_LOG_WARN, "trace: %u worker(s) still inside a handler at exit: "
                                     "their records are left out", left);
        free(held);
    }
    /* The rings stay allocated, and reachable from rt: workers may still run. */
    pthread_mutex_unlock(&rt->trace_mu);
}

/* ---- the API --------------------------------------------------------------------- */

int mely_trace_start(mely_t *m, const char *path)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);

    if (!rt)
        return MELY_ESHUTDOWN;
    int err = path ? 0 : MELY_EINVAL;
    if (!err) {
        pthread_mutex_lock(&rt->trace_mu);
        err = mely__trace_start(rt, path);
        pthread_mutex_unlock(&rt->trace_mu);
    }
    mely__handle_leave(self);
    return err;
}

int mely_trace_stop(mely_t *m)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);

    if (!rt)
        return MELY_ESHUTDOWN;
    /* From a handler of rt, the caller's own ring would never be let go. */
    int64_t ret = mely__self_in(rt) ? MELY_EBUSY : mely__trace_stop(rt);
    mely__handle_leave(self);
    return ret > INT32_MAX ? INT32_MAX : (int)ret;
}
