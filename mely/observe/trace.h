/* SPDX-License-Identifier: MIT */
/*
 * trace.h: per-worker event traces (MELY_TRACE, mely_trace_start; trace.c).
 *
 * Each worker owns a ring of fixed-size records, allocated when tracing
 * starts: only that worker writes it, without a lock or an allocation, and
 * a full ring overwrites its oldest records (the count of records written
 * minus the ring's size is what was dropped).
 *
 * Handing a ring over, while workers run. A worker writes only the ring in
 * w->trace, a field only it writes, and changes it only at the top of its
 * loop, between batches (mely__trace_follow), to what w->trace_want says:
 * tracing starts and stops by storing trace_want and lets each worker follow
 * at its next turn. A stop must know when a worker has let go of its ring
 * before it reads it, so the worker acknowledges each change in trace_ack:
 *
 *   worker (a change seen)               stopper
 *   1. w->trace = want                   a. trace_want = NULL (seq_cst)
 *   2. trace_ack = want (seq_cst)        b. read trace_ack (seq_cst): while it
 *   3. reread trace_want (seq_cst);         is the ring and mely_run() runs,
 *      if it changed, back to 1             wake the worker if parked, wait
 *
 * A store-buffering pair: either b sees the ack of step 2 (and waits for the
 * next one), or step 3 sees a's NULL and the worker never writes the ring
 * after all. An acknowledged NULL (a release) orders the worker's last
 * records before the stopper's reading. Once mely_run() has returned
 * (rt->running read after trace_ack), no worker writes. A worker in a long
 * handler lets go after it: a stop waits for it (at exit, for a bounded
 * time, then leaves that ring out of the file).
 *
 * When tracing is off, w->trace is NULL: a worker pays one load and one
 * well-predicted branch per batch, steal, park or poll, and one load of
 * trace_want per loop turn.
 *
 * Who may call: mely__trace_follow and the record functions on the ring's
 * own worker thread; mely__trace_start/stop/at_exit from any thread, one at
 * a time (rt->trace_mu).
 */
#ifndef MELY_TRACE_H
#define MELY_TRACE_H

#include <stdint.h>

#include "mely/queue/cycles.h"
#include "mely/queue/event.h"
#include "mely/runtime.h"
#include "mely/observe/stall.h"

/* `val` is the cycles the record's span took, for every kind but TIMERS. */
enum mely__trace_kind {
    MELY__TR_RUN,    /* a handler ran: u.who = its descriptor or function
                        (the program's callback a dispatcher ran: runname.h) */
    MELY__TR_STEAL,  /* this worker took a color: arg = victim, u.steal */
    MELY__TR_PARK,   /* it slept: arg = 1 if woken by another thread */
    MELY__TR_POLL,   /* it polled: arg = watch events queued */
    MELY__TR_TIMERS, /* timers expired: arg = how many */
    MELY__TR_MOVE,   /* a watch moved here: arg = its old worker, u.fd */
    MELY__TR_SPIN,   /* it spun idle before parking: arg = 1 if work came */
};

struct mely__trec {
    uint64_t tsc;   /* start (mely__cycles) */
    uint64_t val;   /* cycles (above) */
    union {
        const void *who; /* RUN: the descriptor if desc, else the function */
        struct {
            uint32_t events; /* events moved */
            uint32_t work;   /* their cycles, as annotated or measured */
        } steal;
        int64_t fd;      /* MOVE */
    } u;
    uint32_t color; /* RUN, STEAL, MOVE */
    uint8_t kind;   /* enum mely__trace_kind */
    uint8_t desc;   /* RUN: `u.who` is a mely_handler_t */
    uint16_t arg;   /* per kind (above) */
};
_Static_assert(sizeof(struct mely__trec) == 32, "two records per cache line");

struct mely__trace {
    struct mely__trec *rec; /* `mask + 1` records */
    uint64_t mask;
    uint64_t head;          /* records ever written: the next goes at head & mask */
};

/* The next record of t, to fill in; overwrites the oldest when t is full. */
static inline struct mely__trec *mely__trace_next(struct mely__trace *t)
{
    return &t->rec[t->head++ & t->mask];
}

/* Runs ev's handler and records it; returns the cycles it took. The run is
 * named as the worker's stall word s names it when the handler returns:
 * ev's descriptor or function, or the program's callback a dispatcher ran
 * (mely__name_run, runname.h; stall.h has the renaming). One load of a line
 * the worker writes anyway. */
static inline uint64_t mely__trace_run(struct mely__trace *t, const struct mely__stall_word *s,
                                       const struct mely__event *ev, uint32_t color)
{
    uint64_t start = mely__cycles();
    ev->fn(ev->arg);
    uint64_t took = mely__cycles() - start;
    bool desc;
    const void *who = mely__stall_named(s, &desc);
    if (!who) { /* the word could not hold it: the event's own */
        desc = ev->desc != NULL;
        who = desc ? (const void *)ev->desc : (const void *)ev->fn;
    }
    struct mely__trec *r = mely__trace_next(t);
    *r = (struct mely__trec){.tsc = start,
                             .val = took,
                             .u.who = who,
                             .color = color,
                             .kind = MELY__TR_RUN,
                             .desc = desc};
    return took;
}

/* Records an event of `kind` that started at `start` (see the kinds); returns
 * the record, for the kind's fields in `u`. */
static inline struct mely__trec *mely__trace_note(struct mely__trace *t, enum mely__trace_kind kind,
                                    uint64_t start, uint64_t val, uint32_t color, unsigned arg)
{
    struct mely__trec *r = mely__trace_next(t);
    *r = (struct mely__trec){.tsc = start,
                             .val = val,
                             .color = color,
                             .kind = (uint8_t)kind,
                             .arg = arg > UINT16_MAX ? UINT16_MAX : (uint16_t)arg};
    return r;
}

void mely__trace_follow_slow(struct mely__worker *w);

/* The top of a worker's loop: takes up the ring trace_want names, or lets go
 * of its own (the hand-over above). A relaxed load: the slow path rereads. */
static inline void mely__trace_follow(struct mely__worker *w)
{
    if (__builtin_expect(atomic_load_explicit(&w->trace_want, memory_order_relaxed) != w->trace, 0))
        mely__trace_follow_slow(w);
}

/* Starts tracing every worker of rt into a file at path (opened now):
 * 0, MELY_EBUSY (already tracing), MELY_ENOMEM, or -errno of fopen. Running
 * workers begin at their next loop turn. */
int mely__trace_start(struct mely__rt *rt, const char *path);

/* Stops tracing, waits for every worker to let go of its ring, writes the
 * trace and frees the rings: the records dropped (>= 0), a negative errno if
 * the file could not be written, MELY_EINVAL if rt was not tracing. Not from
 * a handler of rt (its own ring would never be let go). */
int64_t mely__trace_stop(struct mely__rt *rt);

/* The exit handler's: writes a trace still on, as mely__trace_stop() but
 * waiting a bounded time for workers in long handlers (their rings are left
 * out, and named in the file) and freeing nothing (workers may still run).
 * The calling thread may be a worker of rt, inside a handler that called
 * exit(): its own ring is safe to read, since it will never write again. */
void mely__trace_at_exit(struct mely__rt *rt);

#endif /* MELY_TRACE_H */
