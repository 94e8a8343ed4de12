/* SPDX-License-Identifier: MIT */
/*
 * postpath.h: the parts of the post path that queue under the owner's lock,
 * which each engine instantiates (engine.h: `post_now`, and its `flush` or
 * the end of it) with its own queueing function inlined: a post made now
 * pays one call, as it did when the path knew one engine, and not a second
 * one inside the locked section (calling the queueing through a pointer
 * there cost a local post about 26 more instructions under callgrind).
 * post.c describes the whole path and holds the entry points.
 */
#ifndef MELY_POSTPATH_H
#define MELY_POSTPATH_H

#include "mely/remote/colormap.h"
#include "mely/remote/enqueue.h"

/* An engine's queueing, under w->lock: queues ev (its fields set; posted by
 * `self`, a worker or NULL) behind every post already in flight to w, since
 * whoever queues directly must not overtake those: a local post, a color's
 * first event, what a flush could not publish, a foreign post's fallback.
 * 0, or MELY_ENOMEM with nothing done (no memory for the color's queue:
 * never for a color whose post was staged). ORs MELY__WAKE_* flags
 * (enqueue.h) for after unlocking into *wake. */
typedef int mely__queue_fn(struct mely__worker *w, struct mely__worker *self,
                           struct mely__event *ev, unsigned *wake);

static inline void mely__count_post(struct mely__worker *self, struct mely__worker *w)
{
    if (!self) /* several threads may post here at once */
        atomic_fetch_add_explicit(&w->ctr.posts_foreign, 1, memory_order_relaxed);
    else if (self == w)
        mely__count(&self->ctr.posts_local, 1);
    else
        mely__count(&self->ctr.posts_remote, 1);
}

/* Queues ev (its poster's: self's cache, or the depot's if self is NULL)
 * under its owner's lock with `queue`, behind every post in flight to the
 * owner (engine.h): also when the owner is another worker than the poster,
 * which read "mine" and then lost the color to a move before its lock. Its
 * outbox flush, between the two, may have put an earlier post to the color
 * in flight to the new owner, and a direct queueing passed it (the rare
 * reorder of check_deliver's moves_race_flushes; tests/model/move.pml's
 * OWN_NODRAIN variant). On failure (no memory for the color's queue) ev is
 * freed. */
static inline __attribute__((always_inline)) int
mely__post_now_with(struct mely__rt *rt, struct mely__worker *self, struct mely__event *ev,
                    mely__queue_fn *queue)
{
    struct mely__worker *w = mely__lock_owner(rt, ev->color, self ? &self->ctr : NULL);
    unsigned wake = 0;
    int err = queue(w, self, ev, &wake);

    if (__builtin_expect(err != 0, 0)) {
        mely__spin_unlock(&w->lock);
        if (self)
            mely__evcache_free(rt, &self->evcache, ev);
        else
            mely__depot_free_one(rt, ev);
        return err;
    }
    mely__count_post(self, w);
    mely__spin_unlock(&w->lock);
    mely__enqueue_wake(w, self, wake);
    return 0;
}

/* Queues the chain of staged events ev (post order) each under its color's
 * owner's lock (one lock hold per run of events for one worker) with
 * `queue`, which puts it behind what is in flight to that owner (it may hold
 * earlier posts of the same colors). Never fails: the engine staged only
 * colors whose queueing cannot (engine.h: `stages_all`). The owner's thread. */
static inline __attribute__((always_inline)) void
mely__flush_locked_with(struct mely__worker *self, struct mely__event *ev, mely__queue_fn *queue)
{
    struct mely__rt *rt = self->rt;
    struct mely__worker *w = NULL;
    unsigned wake = 0;

    while (ev) { /* bounded: the staged events */
        struct mely__event *next = ev->next;
        if (!w || mely__owner(rt, ev->color) != w->index) {
            if (w) {
                mely__spin_unlock(&w->lock);
                mely__enqueue_wake(w, self, wake);
                wake = 0;
            }
            w = mely__lock_owner(rt, ev->color, &self->ctr);
        }
        (void)queue(w, self, ev, &wake);
        ev = next;
    }
    if (w) {
        mely__spin_unlock(&w->lock);
        mely__enqueue_wake(w, self, wake);
    }
}

#endif
