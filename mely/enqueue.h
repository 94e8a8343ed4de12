/*
 * enqueue.h: the step every post ends with, under the owner's lock: the event
 * joins its color-queue, and the color-queue its place in the core-queue.
 * Shared by post.c (immediate posts) and outbox.c (flushed batches); inline
 * because it is on every post's path.
 */
#ifndef MELY_ENQUEUE_H
#define MELY_ENQUEUE_H

#include "mely/park.h"
#include "mely/runtime.h"

/* Under w->lock: adjusts the pending-event count that idle and (later)
 * stealing workers read without the lock. */
static inline void mely__add_pending(struct mely__worker *w, int delta)
{
    atomic_store_explicit(&w->nevents,
                          atomic_load_explicit(&w->nevents, memory_order_relaxed) + delta,
                          memory_order_relaxed);
}

static inline void mely__count_post(struct mely__worker *self, struct mely__worker *w)
{
    if (!self)
        mely__count(&w->ctr.posts_foreign, 1); /* under w->lock */
    else if (self == w)
        mely__count(&self->ctr.posts_local, 1);
    else
        mely__count(&self->ctr.posts_remote, 1);
}

/* Called with w->lock held: queues ev (its fields set) on its color's queue cq,
 * keeping the core-queue in order; returns whether the caller must wake w
 * after unlocking. A head post by a handler of cq's running batch goes to the
 * front of that batch (the batch was detached from cq's head; see worker.c). */
static inline bool mely__enqueue(struct mely__worker *w, struct mely__worker *self,
                                 struct mely__colorq *cq, struct mely__event *ev)
{
    mely__count_post(self, w);
    if (ev->head && self == w && w->run_cq == cq) {
        mely__colorq_push(&w->run, ev, true);
        return false;
    }

    unsigned old_prio = cq->prio;
    mely__colorq_push(cq, ev, ev->head);
    if (!cq->queued)
        mely__coreq_insert(&w->coreq, cq);
    else if (cq->prio != old_prio)
        mely__coreq_reprioritize(&w->coreq, cq, old_prio);
    mely__add_pending(w, 1);
    return mely__mark_woken(w);
}

#endif
