/* SPDX-License-Identifier: MIT */
/*
 * enqueue.h: the step every post ends with, under the owner's lock, and what
 * it asks for after unlocking. The Mely engine's enqueue: the event joins
 * its color-queue, and the color-queue its place in the core-queue; used by
 * the engine's `queue` (worker.c: local posts, a color's first event, what a
 * flush could not publish) and by the owner draining its inbox (deliver.c);
 * inline because it is on every post's path. The stealing-queue bookkeeping
 * (time-left policies) stays off the common path: one test of the policy's
 * `stealq`. The wake-up flags and helpers serve both engines.
 */
#ifndef MELY_ENQUEUE_H
#define MELY_ENQUEUE_H

#include "mely/steal/cost.h"
#include "mely/queue/cycles.h"
#include "mely/core/park.h"
#include "mely/runtime.h"
#include "mely/steal/steal.h"

/* Under w->lock: adjusts the pending-event count that idle and stealing
 * workers read without the lock. */
static inline void mely__add_pending(struct mely__worker *w, int delta)
{
    atomic_store_explicit(&w->nevents,
                          atomic_load_explicit(&w->nevents, memory_order_relaxed) + delta,
                          memory_order_relaxed);
}

/* What mely__enqueue() asks its caller to do after unlocking. */
enum {
    MELY__WAKE_OWNER = 1, /* w was parked: mely__wake(w) */
    MELY__WAKE_THIEF = 2, /* w's work became stealable: mely__wake_thief() */
};

/* After unlocking w: the wake-ups mely__enqueue() asked for. */
static inline void mely__enqueue_wake(struct mely__worker *w, struct mely__worker *self,
                                      unsigned wake)
{
    if (wake & MELY__WAKE_OWNER)
        mely__wake(w, self);
    if (wake & MELY__WAKE_THIEF)
        mely__wake_thief(w->rt, w, self);
}

/* Under w->lock, after queueing: the event just queued is w's only pending
 * one and w queued it itself outside any handler (from its poller: a
 * readiness, a timer), so w runs it next. Waking a thief for it would only
 * cost a wake-up and a steal attempt per event (bench/e2e/echo, 1 connection). */
static inline bool mely__runs_next(const struct mely__worker *w, const struct mely__worker *self)
{
    return self == w && mely__current_color < 0 &&
           atomic_load_explicit(&w->nevents, memory_order_relaxed) == 1;
}

/* Under w->lock, stealing-queue policies: cq's wait begins (its first
 * pending event was just queued), not seen yet (stealq.h's `since`). Returns
 * true if a parked worker should come and steal a color of w that has
 * waited (stealq.h's waiting rule), looked for only if `look` (no wake-up
 * asked for yet) and someone sleeps: a color that waits longer than a steal
 * costs becomes worth taking without a post of its own, so the next color
 * that starts waiting on w looks at the head of w's core-queue. The TSC is
 * read only then: it costs ~35 cycles on the 2-core guests, and every post
 * of an unbalanced round (bench/steal) starts a color's wait: read at each,
 * about 0.65 ms of a round of ~8 ms. */
static inline bool mely__wait_began(struct mely__worker *w, struct mely__colorq *cq, bool look)
{
    const struct mely__rt *rt = w->rt;

    cq->since = 0;
    if (!look || atomic_load_explicit((_Atomic uint32_t *)&rt->nparked, memory_order_relaxed) == 0)
        return false;
    uint64_t now = mely__cycles();
    cq->since = now;
    return mely__wait_pick(&w->coreq, w->run_cq, now, mely__steal_cost_cycles(rt),
                           mely__steal_hold_units(rt)) != NULL;
}

/* The Mely engine's enqueue; `stealq` (a constant at each call site) says
 * whether the time-left stealing-queue is kept. */
static inline __attribute__((always_inline)) unsigned
mely__enqueue_colorq(struct mely__worker *w, struct mely__worker *self, struct mely__colorq *cq,
                     struct mely__event *ev, bool stealq)
{
    struct mely__rt *rt = w->rt;
    unsigned wake = 0;

    if (stealq && rt->cost.penalty)
        mely__colorq_note_pshift(cq, mely__cost_pshift(ev->desc));
    /* `self &&`: where self is NULL (a drain), the branch folds away, and
     * GCC's -Warray-bounds does not take w for NULL on it (an ASan build). */
    if (ev->head && self && self == w && w->run_cq == cq) {
        mely__colorq_push(&w->run, ev, true);
        return 0;
    }

    unsigned old_prio = cq->prio;
    bool was_empty = stealq && cq->count == 0;
    mely__colorq_push(cq, ev, ev->head);
    if (!cq->queued) {
        mely__coreq_insert(&w->coreq, cq);
        if (rt->steal && !stealq && w->coreq.ncolors >= 2)
            wake |= MELY__WAKE_THIEF;
    } else if (cq->prio != old_prio) {
        mely__coreq_reprioritize(&w->coreq, cq, old_prio);
    }
    if (stealq && mely__stealq_update(&w->stealq, cq, mely__steal_cost_units(rt)))
        wake |= MELY__WAKE_THIEF;
    if (was_empty && mely__wait_began(w, cq, !(wake & MELY__WAKE_THIEF)))
        wake |= MELY__WAKE_THIEF;
    mely__add_pending(w, 1);
    if ((wake & MELY__WAKE_THIEF) && mely__runs_next(w, self))
        wake &= ~MELY__WAKE_THIEF;
    if (mely__mark_woken(w))
        wake |= MELY__WAKE_OWNER;
    return wake;
}

/* Called with w->lock held: queues ev (its fields set) on its color's queue cq,
 * keeping the core-queue (and, for time-left policies, the stealing-queue) in
 * order; returns the MELY__WAKE_* flags for after unlocking. A head post by a
 * handler of cq's running batch goes to the front of that batch (the batch was
 * detached from cq's head; see worker.c). The Mely engine only (the legacy
 * engine queues its own way, legacy.c). */
static __attribute__((noinline, unused)) unsigned
mely__enqueue_stealq(struct mely__worker *w, struct mely__worker *self, struct mely__colorq *cq,
                     struct mely__event *ev)
{
    return mely__enqueue_colorq(w, self, cq, ev, true);
}

static inline __attribute__((always_inline)) unsigned
mely__enqueue(struct mely__worker *w, struct mely__worker *self, struct mely__colorq *cq,
              struct mely__event *ev)
{
    if (w->rt->steal_ops.stealq) /* out of line: the common path stays small */
        return mely__enqueue_stealq(w, self, cq, ev);
    return mely__enqueue_colorq(w, self, cq, ev, false);
}

#endif
