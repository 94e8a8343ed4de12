/*
 * post.c: queueing an event for the worker that owns its color.
 *
 * The path: validate; take a free event (the poster's own cache if it is a
 * worker, else the depot); then one of three ways (Mely engine):
 *  - a worker posting to another worker's color stages the event in its
 *    outbox (outbox.h), which publishes it into the owner's inbox at the end
 *    of the handler (deliver.c), or, if the inbox is full, queues it under
 *    the owner's lock after draining the inbox;
 *  - a thread that is not a worker pushes it into the owner's inbox, under
 *    the owner's foreign_lock (deliver.c's move protocol), and wakes the
 *    owner if it is parked;
 *  - otherwise (a worker's post to its own color, or a color's very first
 *    event, whose color-queue must be created) it locks the owner
 *    (colormap.h's protocol), queues (enqueue.h) and, after unlocking, wakes
 *    the owner if it was parked.
 * Only colors whose color-queue exists take the first two ways, so that
 * queueing an event that left its poster can never fail for memory. The
 * legacy engine has no inboxes: a worker stages remote posts and the flush
 * queues them under each owner's lock, and other threads lock the owner.
 *
 * The event budget (freelist.h) refuses a post with MELY_EAGAIN where it
 * takes memory: a local post when its worker's cache must refill (once per
 * 64 events: nothing on the common path), and, since the first two ways
 * free the poster's event and leave the owner to take one later, a remote
 * or foreign post while rt->budget_hit is up (one load of a line the post
 * reads anyway).
 */
#include <errno.h>

#include "mely/remote/colormap.h"
#include "mely/steal/cost.h"
#include "mely/remote/deliver.h"
#include "mely/remote/enqueue.h"
#include "mely/core/handle.h"
#include "mely/core/park.h"
#include "mely/sched/post.h"

static struct mely__event *event_alloc(struct mely__rt *rt, struct mely__worker *self)
{
    return self ? mely__evcache_alloc(rt, &self->evcache) : mely__depot_alloc_one(rt, false);
}

/* Why event_alloc() returned NULL (freelist.h sets errno). */
static int alloc_error(void)
{
    return errno == EAGAIN ? MELY_EAGAIN : MELY_ENOMEM;
}

/* The budget is used up: posts whose events the owner takes later refuse. */
static inline bool budget_hit(const struct mely__rt *rt)
{
    return atomic_load_explicit(&rt->budget_hit, memory_order_relaxed);
}

static void event_unalloc(struct mely__rt *rt, struct mely__worker *self, struct mely__event *ev)
{
    if (self)
        mely__evcache_free(rt, &self->evcache, ev);
    else
        mely__depot_free_one(rt, ev);
}

/* Under w->lock: the color's queue, created on its first event (NULL: no memory). */
static struct mely__colorq *colorq_of(struct mely__rt *rt, struct mely__worker *w,
                                      mely_color_t color)
{
    struct mely__colorq *cq = mely__cq_of(rt, color);

    if (__builtin_expect(cq == NULL, 0)) {
        cq = mely__cq_alloc(rt, &w->cqslab);
        if (!cq)
            return NULL;
        mely__colorq_init(cq, color);
        atomic_store_explicit(&rt->cq_of[color], cq, memory_order_release);
    }
    return cq;
}

static void count_post(struct mely__worker *self, struct mely__worker *w)
{
    if (!self) /* several threads may post here at once */
        atomic_fetch_add_explicit(&w->ctr.posts_foreign, 1, memory_order_relaxed);
    else if (self == w)
        mely__count(&self->ctr.posts_local, 1);
    else
        mely__count(&self->ctr.posts_remote, 1);
}

/* Queues ev under its owner's lock; on failure (no memory for the color's
 * queue) ev is freed. It first drains the owner's inbox whole, so that the
 * post comes after every post published there before (deliver.c): also
 * when the owner is another worker than the poster, which read "mine" and
 * then lost the color to a move before its lock. Its outbox flush, between
 * the two, may have put an earlier post to the color in the new owner's
 * inbox, and a direct queueing without the drain passed it (the rare
 * reorder of check_deliver's moves_race_flushes; tests/model/move.pml's
 * OWN_NODRAIN variant). */
static int post_now(struct mely__rt *rt, struct mely__worker *self, struct mely__event *ev)
{
    struct mely__worker *w = mely__lock_owner(rt, ev->color, self ? &self->ctr : NULL);
    /* The legacy engine keeps no color-queues (legacy.c). */
    struct mely__colorq *cq = rt->engine->inboxes ? colorq_of(rt, w, ev->color) : NULL;
    unsigned wake = 0;

    if (!cq && rt->engine->inboxes) {
        mely__spin_unlock(&w->lock);
        event_unalloc(rt, self, ev);
        return MELY_ENOMEM;
    }
    count_post(self, w);
    if (rt->engine->inboxes)
        wake |= mely__deliver_all(w, self);
    wake |= mely__enqueue(w, self, cq, ev);
    mely__spin_unlock(&w->lock);
    mely__enqueue_wake(w, self, wake);
    return 0;
}

/* A worker's post: staged (see the top of this file), or queued now. What
 * the worker keeps for the end of the batch goes first (turnend.h): a write
 * it buffered for a stream of another worker must reach the stream before
 * a post that follows it, whose handler may write there too. */
static inline __attribute__((always_inline)) int
post_from_worker(struct mely__rt *rt, struct mely__worker *self, struct mely__event *ev)
{
    if (__builtin_expect(self->batch_done != NULL, 0))
        mely__turnend_batch_done(self);
    if (mely__owner(rt, ev->color) != self->index &&
        (!rt->engine->inboxes || mely__cq_of(rt, ev->color))) {
        if (__builtin_expect(budget_hit(rt), 0)) {
            mely__evcache_free(rt, &self->evcache, ev);
            return MELY_EAGAIN;
        }
        mely__count(&self->ctr.posts_remote, 1);
        mely__outbox_stage(self, ev);
        return 0;
    }
    if (mely__outbox_pending(&self->outbox))
        mely__outbox_flush(self); /* a color that moved here keeps its order */
    return post_now(rt, self, ev);
}

/* The three public entry points share this body, inlined into each. self:
 * the calling thread's worker if it belongs to rt, else NULL. */
static inline __attribute__((always_inline)) int post(struct mely__rt *rt,
                                                      struct mely__worker *self,
                                                      mely_color_t color, int prio,
                                                      const mely_handler_t *h, mely_fn_t fn,
                                                      void *arg, unsigned flags)
{
    if (!fn)
        return MELY_ENOFN;
    if (prio < 0 || prio > MELY_PRIO_MAX)
        return MELY_EPRIO;
    if (flags & ~MELY_POST_HEAD)
        return MELY_EINVAL;
    if (!mely__color_valid(rt, color))
        return MELY_ECOLOR;

    struct mely__event rec, *ev;
    if (!self && __builtin_expect(budget_hit(rt), 0))
        return MELY_EAGAIN;
    /* A thread that is not a worker copies the post into the owner's inbox,
     * with no event of its own (Mely engine, existing color-queue). */
    bool copy = !self && rt->engine->inboxes && mely__cq_of(rt, color);
    if (copy)
        ev = &rec;
    else if (!(ev = event_alloc(rt, self)))
        return alloc_error();
    ev->fn = fn;
    ev->arg = arg;
    ev->desc = h;
    ev->color = color;
    ev->prio = (uint8_t)prio;
    ev->head = (flags & MELY_POST_HEAD) != 0;
    ev->units = mely__cost_units(rt, h, fn);
    if (self)
        return post_from_worker(rt, self, ev);
    if (copy && mely__deliver_foreign(rt, &rec))
        return 0;
    if (copy) { /* the inbox was full */
        if (!(ev = event_alloc(rt, NULL)))
            return alloc_error();
        *ev = rec;
    }
    return post_now(rt, NULL, ev);
}

/* The public entry points: post() inside the handle's grace period (handle.h). */
static inline __attribute__((always_inline)) int post_entry(mely_t *m, mely_color_t color,
                                                            int prio, const mely_handler_t *h,
                                                            mely_fn_t fn, void *arg,
                                                            unsigned flags)
{
    struct mely__worker *self;
    struct mely__rt *rt = mely__handle_enter(m, &self);
    return rt ? mely__handle_done(self, post(rt, self, color, prio, h, fn, arg, flags))
              : MELY_ESHUTDOWN;
}

int mely_post_ex(mely_t *m, mely_color_t color, int prio, const mely_handler_t *h,
                 mely_fn_t fn, void *arg, unsigned flags)
{
    return post_entry(m, color, prio, h, fn, arg, flags);
}

int mely_post(mely_t *m, mely_color_t color, mely_fn_t fn, void *arg)
{
    return post_entry(m, color, MELY_PRIO_DEFAULT, NULL, fn, arg, 0);
}

int mely_post_head(mely_t *m, mely_color_t color, mely_fn_t fn, void *arg)
{
    return post_entry(m, color, MELY_PRIO_DEFAULT, NULL, fn, arg, MELY_POST_HEAD);
}

int mely__post_to(struct mely__rt *rt, const mely_to_t *to, mely_fn_t fn, void *arg)
{
    return post(rt, mely__self_in(rt), to->color, to->prio, to->handler, fn, arg, 0);
}
