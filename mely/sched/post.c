/* SPDX-License-Identifier: MIT */
/*
 * post.c: queueing an event for the worker that owns its color.
 *
 * The path: validate; take a free event (the poster's own cache if it is a
 * worker, else the depot); then one of three ways:
 *  - a worker posting to another worker's color stages the event in its
 *    outbox (outbox.h), whose flush, at the end of the handler, takes it to
 *    the owner the engine's way (engine.h: `flush`; the Mely engine
 *    publishes it into the owner's inbox, deliver.c);
 *  - a thread that is not a worker hands a copy of it to the engine
 *    (`post_foreign`: the Mely engine puts it in the owner's inbox, under
 *    the owner's foreign_lock, and wakes the owner if it is parked);
 *  - otherwise (a worker's post to its own color; a color the engine will
 *    not stage or take from a foreign thread, such as a color's very first
 *    event with the Mely engine, whose color-queue must be created) it locks
 *    the owner (colormap.h's protocol), has the engine queue it (`queue`,
 *    behind whatever is in flight to the owner) and, after unlocking, wakes
 *    the owner if it was parked.
 * The engine takes the first two ways only where queueing an event that left
 * its poster can never fail for memory. The third way is the engine's
 * `post_now`: the locked part of the path (postpath.h), which each engine
 * compiles with its own queueing inlined.
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
#include "mely/core/handle.h"
#include "mely/sched/post.h"
#include "mely/sched/turnend.h"

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

/* Whether a worker's post to a color another worker owns may wait in its
 * outbox (engine.h: `stages_all`). */
static inline bool may_stage(const struct mely__rt *rt, mely_color_t color)
{
    return rt->engine->stages_all || mely__cq_of(rt, color) != NULL;
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
    if (mely__owner(rt, ev->color) != self->index && may_stage(rt, ev->color)) {
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
    return rt->engine->post_now(rt, self, ev);
}

/* A post from a thread that is not a worker: the engine takes the copy, or
 * it is queued now in an event of the depot's. */
static int post_foreign(struct mely__rt *rt, const struct mely__event *rec)
{
    if (rt->engine->post_foreign(rt, rec))
        return 0;
    struct mely__event *ev = event_alloc(rt, NULL);
    if (!ev)
        return alloc_error();
    *ev = *rec;
    return rt->engine->post_now(rt, NULL, ev);
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

    /* A thread that is not a worker fills a record of its own: the engine
     * may copy it where it goes without taking an event. */
    struct mely__event rec, *ev = &rec;
    if (!self && __builtin_expect(budget_hit(rt), 0))
        return MELY_EAGAIN;
    if (self && !(ev = event_alloc(rt, self)))
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
    return post_foreign(rt, &rec);
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
