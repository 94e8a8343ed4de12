/* SPDX-License-Identifier: MIT */
/*
 * park.h: the park/wake protocol, the one way every waker wakes a worker
 * (the protocol is described in park.c; what an idle worker does before it
 * parks is idle.c's).
 */
#ifndef MELY_PARK_H
#define MELY_PARK_H

#include <stdatomic.h>
#include <stdbool.h>

#include "mely/runtime.h"

/* If w is parked, marks it woken and returns true; the caller must then call
 * mely__wake() (after unlocking whatever it holds). One exchange decides who
 * wakes: a worker is woken at most once per park. Any thread, no lock needed;
 * sequentially consistent, against the parking worker's store of `parked`
 * and its last look at its inbox and its timers (park.c). */
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

/* The system call half of a wake-up, for a worker that mely__mark_woken()
 * marked: writes its wake-up eventfd, which ends its blocking poll. `self`
 * (may be NULL) is charged for it. Any thread, no lock held. */
void mely__wake(struct mely__worker *w, struct mely__worker *self);

/* Wakes w if it is parked: both halves. Any thread, no lock held. */
static inline void mely__wake_if_parked(struct mely__worker *w, struct mely__worker *self)
{
    if (mely__mark_woken(w))
        mely__wake(w, self);
}

/* After a post made victim's work stealable (enqueue.h): wakes one parked
 * worker other than victim, if any, so that it comes to steal. A check of
 * rt->nparked when nobody sleeps. Any thread, no lock held. */
void mely__wake_thief(struct mely__rt *rt, struct mely__worker *victim, struct mely__worker *self);

/* Wakes every parked worker (mely_stop). Any thread. */
void mely__wake_all(struct mely__rt *rt);

/* What mely_stop() does, for the runtime's own stops (a drain's end):
 * workers finish their handler and mely_run() returns. Any thread. */
static inline void mely__request_stop(struct mely__rt *rt)
{
    atomic_store(&rt->stopping, true);
    mely__wake_all(rt);
}

/* Step 2 of the protocol, under w->lock, its inbox drained and nothing
 * pending: sets `parked` and takes a last look. True if w must sleep. Own
 * thread only. */
bool mely__park_set(struct mely__worker *w);

/* Step 4's end, once the blocking poll returned: clears `parked` if no waker
 * did (a return for readiness or a timer). Own thread only. */
void mely__park_clear(struct mely__worker *w);

/* Creates (closes) every worker's wake-up eventfd: 0 or a negative errno. */
int mely__park_init(struct mely__rt *rt);
void mely__park_free(struct mely__rt *rt);

#endif
