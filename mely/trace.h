/*
 * trace.h: per-worker event traces (MELY_TRACE, mely_trace_start; trace.c).
 *
 * Each worker owns a ring of fixed-size records, allocated when tracing
 * starts: only that worker writes it, without a lock or an allocation, and
 * a full ring overwrites its oldest records (the count of records written
 * minus the ring's size is what was dropped). The rings are read only while
 * no worker runs (mely_trace_stop, mely_shutdown), so a record needs no
 * atomics: mely_run()'s end orders the workers' writes before the reader.
 *
 * When tracing is off, w->trace is NULL: a worker pays one load and one
 * well-predicted branch per batch, steal, park or poll.
 *
 * Who may call: mely__trace_* on the ring's own worker thread.
 */
#ifndef MELY_TRACE_H
#define MELY_TRACE_H

#include <stdint.h>

#include "mely/cycles.h"
#include "mely/event.h"

enum mely__trace_kind {
    MELY__TR_RUN,    /* a handler ran: who = fn or descriptor, val = cycles */
    MELY__TR_STEAL,  /* this worker took a color: arg = victim, val = events */
    MELY__TR_PARK,   /* it slept: val = cycles asleep, arg = 1 if woken by another */
    MELY__TR_POLL,   /* it polled: val = cycles, arg = watch events queued */
    MELY__TR_TIMERS, /* timers expired: arg = how many */
};

struct mely__trec {
    uint64_t tsc;    /* start (mely__cycles) */
    uint64_t val;    /* per kind (above) */
    const void *who; /* RUN: the descriptor if desc, else the function */
    uint32_t color;  /* RUN, STEAL */
    uint8_t kind;    /* enum mely__trace_kind */
    uint8_t desc;    /* RUN: `who` is a mely_handler_t */
    uint16_t arg;    /* per kind (above) */
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

/* Runs ev's handler and records it; returns the cycles it took. */
static inline uint64_t mely__trace_run(struct mely__trace *t, const struct mely__event *ev,
                                       uint32_t color)
{
    uint64_t start = mely__cycles();
    ev->fn(ev->arg);
    uint64_t took = mely__cycles() - start;
    struct mely__trec *r = mely__trace_next(t);
    *r = (struct mely__trec){.tsc = start,
                             .val = took,
                             .who = ev->desc ? (const void *)ev->desc : (const void *)ev->fn,
                             .color = color,
                             .kind = MELY__TR_RUN,
                             .desc = ev->desc != NULL};
    return took;
}

/* Records an event of `kind` that started at `start` (see the kinds). */
static inline void mely__trace_note(struct mely__trace *t, enum mely__trace_kind kind,
                                    uint64_t start, uint64_t val, uint32_t color, unsigned arg)
{
    struct mely__trec *r = mely__trace_next(t);
    *r = (struct mely__trec){.tsc = start,
                             .val = val,
                             .color = color,
                             .kind = (uint8_t)kind,
                             .arg = arg > UINT16_MAX ? UINT16_MAX : (uint16_t)arg};
}

struct mely__rt;

/* Starts tracing every worker of rt into a file at path (opened now):
 * 0, MELY_EBUSY (already tracing), MELY_ENOMEM, or -errno of fopen. */
int mely__trace_start(struct mely__rt *rt, const char *path);

/* Writes the trace and frees the rings: the records dropped (>= 0), a
 * negative errno if the file could not be written, MELY_EINVAL if rt was
 * not tracing. No worker may run. */
int64_t mely__trace_stop(struct mely__rt *rt);

#endif /* MELY_TRACE_H */
