/*
 * park.h: idle workers and wake-ups (the protocol is described in park.c).
 */
#ifndef MELY_PARK_H
#define MELY_PARK_H

#include <stdatomic.h>
#include <stdbool.h>

#include "mely/poller.h"
#include "mely/runtime.h"
#include "mely/timer.h"

/* The worker has nothing to run: spin a little, then sleep until a post or a
 * stop. Called by the worker's own thread, without its lock. */
void mely__idle(struct mely__worker *w);

/* If w is parked, marks it woken and returns true; the caller must then call
 * mely__wake() (after unlocking whatever it holds). One exchange decides who
 * wakes: a worker is woken at most once per park. Any thread, no lock needed;
 * sequentially consistent, against the parking worker's store of `parked`
 * and its last look at its inbox (park.c). */
static inline bool mely__mark_woken(struct mely__worker *w)
{
    if (!atomic_load_explicit(&w->parked, memory_order_seq_cst))
        return false;
    if (!atomic_exchange_explicit(&w->parked, false, memory_order_seq_cst))
        return false;
    atomic_fetch_sub_explicit(&w->rt->nparked, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&w->wake_seq, 1, memory_order_release);
    return true;
}

/* The system call half of a wake-up; `self` (may be NULL) is charged for it. */
void mely__wake(struct mely__worker *w, struct mely__worker *self);

/* The one wake-up: wakes w if it is parked. Every waker comes here (posts,
 * flushes, thieves' wake-ups, timers, stop). Any thread, no lock held. */
static inline void mely__wake_if_parked(struct mely__worker *w, struct mely__worker *self)
{
    if (mely__mark_woken(w))
        mely__wake(w, self);
}

/* Between two batches: I/O and timers (poller.c has the rule). Costs two
 * loads when the worker has no watch and no timer. Own thread only. */
static inline void mely__poller_tick(struct mely__worker *w)
{
    if (atomic_load_explicit(&w->io.nwatches, memory_order_relaxed) != 0 ||
        mely__timers_next(&w->timers) != MELY__NEVER)
        mely__poller_tick_slow(w);
}

/* Wakes every parked worker (mely_stop). Any thread. */
void mely__wake_all(struct mely__rt *rt);

#endif
