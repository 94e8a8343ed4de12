/*
 * stall.h: stall warnings. A handler that runs longer than MELY_STALL_MS
 * holds up every other color of its worker; a monitor thread (stall.c), one
 * per mely_run(), notices it while it still runs and says so through the log
 * hook (log.h), once per run, at most a few lines a second.
 *
 * The worker's whole share is mely__stall_begin() and mely__stall_end()
 * around each handler: plain stores (a sequence number and the handler) to a
 * cache line only it writes, which the monitor reads every MELY_STALL_MS/4
 * (bounded). No clock is read on the worker: the monitor times a handler
 * from the first tick that sees its sequence number, so a warning comes
 * between MELY_STALL_MS and 1.5 x MELY_STALL_MS into the run (two periods
 * late at most), and never early. (A TSC read around each handler cost local post+run 45%: 14.5 to
 * 21.1 ns an event.) Nothing else changes when no handler is slow.
 */
#ifndef MELY_STALL_H
#define MELY_STALL_H

#include <stdatomic.h>
#include <stdint.h>

#include "mely/event.h"

#define MELY__STALL_MS_DEFAULT 100
#define MELY__STALL_MS_MAX 3600000 /* an hour */

struct mely__stall_word {
    _Atomic uint64_t seq;      /* twice the handlers begun, + 1 while one runs */
    _Atomic uintptr_t handler; /* the running one: its descriptor | 1, or its
                                  function (stall.c names it) */
    _Atomic int color;         /* the color being run (set per batch) */
};

struct mely__rt;
struct mely__stall_monitor;

/* The worker's thread, before a batch (or a handler) of `color`. */
static inline void mely__stall_color(struct mely__stall_word *s, int color)
{
    atomic_store_explicit(&s->color, color, memory_order_relaxed);
}

/* The worker's thread: the seq of its last mely__stall_end(), to pass to
 * the begin and end of its next handlers (the worker keeps it in a register). */
static inline uint64_t mely__stall_seq(struct mely__stall_word *s)
{
    return atomic_load_explicit(&s->seq, memory_order_relaxed);
}

/* The worker's thread, before ev's handler: *seq becomes odd. */
static inline void mely__stall_begin(struct mely__stall_word *s, const struct mely__event *ev,
                                     uint64_t *seq)
{
    /* A descriptor is at least pointer-aligned: bit 0 tells it from a function. */
    uintptr_t h = ev->desc ? (uintptr_t)ev->desc | 1 : (uintptr_t)ev->fn;
    /* Release (plain stores on x86): a monitor that sees this handler also
     * sees the end of the run before it (stall.c rereads `seq`). */
    atomic_store_explicit(&s->handler, h, memory_order_release);
    atomic_store_explicit(&s->seq, ++*seq, memory_order_release);
}

/* The worker's thread, after the handler: *seq becomes even. */
static inline void mely__stall_end(struct mely__stall_word *s, uint64_t *seq)
{
    atomic_store_explicit(&s->seq, ++*seq, memory_order_release);
}

/* Starts rt's monitor if rt->stall_ms is not 0 (mely_run(), before the
 * workers). A monitor that cannot start is reported and skipped: stall
 * warnings are never worth refusing to run. */
void mely__stall_start(struct mely__rt *rt);

/* Stops and joins rt's monitor, if any (mely_run(), after the workers). */
void mely__stall_stop(struct mely__rt *rt);

#endif /* MELY_STALL_H */
