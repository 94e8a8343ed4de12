/* SPDX-License-Identifier: MIT */
/*
 * deliver.c: how a remote post reaches its owner without touching the owner's
 * queues, and how a color changes owner while posts to it are in flight.
 *
 * The path (Mely engine). A worker's posts to colors of other workers are
 * staged in its outbox (outbox.h) and published once per handler (or per
 * MELY__OUTBOX_MAX events): each run of consecutive events for one owner is
 * copied into that owner's inbox (inbox.h: a bounded ring of one-line slots)
 * after one compare-and-swap that reserves the slots. The owner, under its
 * own lock (which only thieves contend), drains its inbox into events of its
 * own and its color-queues at batch boundaries, before a local post, before
 * it parks, and a thief drains a victim's before it looks for a color.
 * Threads that are not workers put single posts into the same inbox. So the
 * owner's color-queues and core-queue are touched only by the owner and,
 * under its lock, by a thief or by the overflow path below: a post crosses
 * cores as one cache line, and a poster never waits for the owner.
 *
 * Why one inbox per owner and not one SPSC ring per (poster, owner) pair:
 * rings were built first, and the stress test caught what they lose. A
 * generator color posts event #1 to color c from worker X, is stolen by
 * worker Y, and posts #2 to c from Y; the owner drains Y's ring before X's
 * and runs #2 first. Any post that causes another on a different worker
 * (a steal, a handler posting to a color whose handler posts on) can be
 * overtaken that way, since drains read the rings one after the other. One
 * inbox per owner gives every post one place in one total order (the order
 * of reservations), which respects causality, for the price of a contended
 * line when many workers post to one owner at the same time.
 *
 * A full inbox. The flush waits a little (about 10-50 us, outside the
 * protocol's window) for the owner to drain, retrying; what still does not
 * fit is then queued by the poster itself, as the legacy engine queues:
 * under the owner's lock, after draining the owner's inbox (whoever holds
 * the owner's lock may drain it), so it still comes after every post that
 * reserved a slot before it. The wait lets a producer run at its consumer's
 * pace without taking the consumer's lock and queues (queueing at once
 * made a fast producer do its consumer's work under its lock: contended,
 * and bench/dispatch's cross-core rate halved); the bound keeps a stopped
 * or long-busy owner from holding the poster, and two workers flooding each
 * other from deadlocking (each takes one lock at a time). Nothing stays
 * behind in an outbox: a staged event left there while its poster's color
 * was stolen would be overtaken by that color's next posts from its new
 * worker (check_deliver's flood caught exactly that under stealing). A
 * thread that is not a worker takes the locked way at once. Memory:
 * MELY__INBOX_CAP slots of 64 bytes per worker, whatever the load.
 *
 * Order across moves. A flush resolves each staged event's owner when it
 * publishes, in post order. What must not happen is a color moving (a steal,
 * mely_color_move) while an event to it is between "the poster read the
 * owner" and "the event is in the owner's inbox": it would land on the old
 * owner after later ones on the new. That is the race of the first outbox
 * bug (doc/runtime.md). The move protocol closes it:
 *
 *   poster P (a flush)                    mover M, holding from's and to's locks
 *   1. seq[P]++ (odd; seq_cst RMW)        a. owner[c] = to (seq_cst store)
 *   2. for each event: read owner[c]      b. for every worker P != M: if seq[P]
 *      (seq_cst); reserve slots in that      is odd, wait until it changes;
 *      owner's inbox, copy the run in        then take and drop from's
 *   3. seq[P]++ (even; release)              foreign_lock
 *                                         c. drain from's inbox
 *                                         d. move c's color-queue, with what
 *                                            step c added, to `to`
 *
 * 1-2 and a-b are a store-buffering pair, all sequentially consistent: either
 * P's read in step 2 sees `to` (the event goes to `to`'s inbox, which `to`
 * drains only after step d, behind the queue it receives), or M's read in
 * step b sees P's odd count and waits for step 3, after which step c finds
 * P's event in from's inbox. A flush that starts after M's read sees `to`:
 * its step 1 follows the even value M read, which follows M's store. What a
 * full inbox left is queued after step 3 under the owner's lock, which M
 * holds from step a to d: before the move (and moved with the queue) or
 * after it, on `to`. Threads
 * that are not workers read the owner under the owner's foreign_lock and
 * re-check it, so step b's lock orders them the same way. The wait in step
 * b is short (a flush puts at most the staged events, without locks or
 * system calls): M spins a little, then yields. No flush takes a worker
 * lock, so M never waits for a flush that waits for M. Step c reads every
 * position reserved before it starts, waiting for any still being written:
 * a later flush (to another color) may have reserved a slot before one of
 * the flushes step b waited for, and the drain must not stop short of the
 * latter.
 *
 * Memory. A drained post needs an event of the drainer's. The post was
 * accepted when it was published (its poster's event went back to the
 * poster's cache), so the drain takes its events "owed" (freelist.h): past
 * the event budget, which the posters checked instead (rt->budget_hit), so
 * that a drain, and the direct post that may follow it, never stop short
 * for the budget. If there is no memory at all (no slab can be mapped), an
 * ordinary drain stops and leaves the rest in the inbox for the next one,
 * but step c must finish. So each worker keeps a reserve
 * of MELY__INBOX_CAP events, topped up by its own drains, that only step c
 * uses, and a move starts only with a full reserve: step c never takes more
 * than the inbox holds. A steal then simply fails; mely_color_move() says
 * MELY_ENOMEM.
 *
 * Self-owned colors. A staged event whose color has moved to the poster
 * itself goes through the poster's own inbox, not straight into its queue:
 * a flush cannot take its own worker's lock (a mover holding it may be
 * waiting at step b for that very flush). A local post drains the inbox
 * first, so it never overtakes a post published before it (post.c).
 *
 * Both sides of the protocol are here: the poster's steps 1-3 (publish), the
 * mover's a-d (mely__color_handoff), the foreign poster's lock
 * (mely__deliver_foreign); the parking owner's last look is park.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "mely/queue/backoff.h"
#include "mely/remote/colormap.h"
#include "mely/queue/cycles.h"
#include "mely/remote/deliver.h"
#include "mely/remote/enqueue.h"
#include "mely/core/park.h"
#include "mely/remote/postpath.h"

/* An event for a drained post: the drainer's own, or, for step c only, one
 * of w's reserve. Under w->lock. */
static struct mely__event *event_for(struct mely__worker *w, struct mely__worker *self,
                                     bool reserve)
{
    struct mely__rt *rt = w->rt;
    struct mely__event *ev = self ? mely__evcache_alloc_owed(rt, &self->evcache)
                                  : mely__depot_alloc_one(rt, true);
    if (!ev && reserve && w->nreserve) {
        ev = w->reserve;
        w->reserve = ev->next;
        w->nreserve--;
    }
    return ev;
}

/* Under w->lock, on w's thread: refills the reserve after a move used it.
 * Owed (past the budget): the reserve is a fixed part of each worker's
 * memory, used only when no memory could be mapped. */
static void top_up(struct mely__worker *w)
{
    while (w->nreserve < MELY__INBOX_CAP) { /* bounded: the reserve's size */
        struct mely__event *ev = mely__evcache_alloc_owed(w->rt, &w->evcache);
        if (!ev)
            return;
        ev->next = w->reserve;
        w->reserve = ev;
        w->nreserve++;
    }
}

/* Under w->lock: queues the ready posts from head on, each in an event of the
 * drainer's; with `whole`, every post reserved before `until`, waiting for
 * any still being written (step c may also use the reserve). */
static unsigned drain(struct mely__worker *w, struct mely__worker *self, bool whole,
                      bool step_c, uint32_t until)
{
    struct mely__rt *rt = w->rt;
    struct mely__inbox *q = w->inbox;
    uint32_t h = atomic_load_explicit(&q->head, memory_order_relaxed), start = h;
    unsigned wake = 0;
    struct mely__backoff b = mely__backoff_start(MELY__BACKOFF_SPINS);

    while (h - start < MELY__INBOX_CAP) { /* bounded: one lap of the ring */
        const struct mely__event *post = mely__inbox_peek(q, h);
        if (!post) {
            if (!whole || (int32_t)(until - h) <= 0)
                break;
            /* Bounded: the poster that reserved it writes it without locks
             * or waits (the backoff yields in case it was preempted). */
            mely__backoff_wait(&b);
            continue;
        }
        struct mely__event *ev = event_for(w, self, step_c);
        if (!ev)
            break; /* out of memory: the rest waits in the inbox */
        *ev = *post;
        h++;
        /* As another poster's (NULL): a head post drained while a batch of
         * its color runs goes to the color-queue's head, behind the batch,
         * as it would have with no inbox. */
        wake |= mely__enqueue(w, NULL, mely__cq_of(rt, ev->color), ev);
    }
    if (h != start)
        atomic_store_explicit(&q->head, h, memory_order_release);
    return wake;
}

unsigned mely__deliver_slow(struct mely__worker *w, struct mely__worker *self, bool whole)
{
    if (self == w && __builtin_expect(w->nreserve < MELY__INBOX_CAP, 0))
        top_up(w);
    return drain(w, self, whole, false,
                 whole ? atomic_load_explicit(&w->inbox->tail, memory_order_acquire) : 0);
}

/* Under w->lock: the color's first event, its queue created (NULL: no memory). */
static __attribute__((noinline)) struct mely__colorq *colorq_new(struct mely__rt *rt,
                                                                struct mely__worker *w,
                                                                mely_color_t color)
{
    struct mely__colorq *cq = mely__cq_alloc(rt, &w->cqslab);

    if (!cq)
        return NULL;
    mely__colorq_init(cq, color);
    atomic_store_explicit(&rt->cq_of[color], cq, memory_order_release);
    return cq;
}

/* The engine's queueing (postpath.h): behind the posts in w's inbox, all of
 * them, waiting for any still being written (mely__deliver_all), on the
 * color's queue, created on its first event. */
static inline __attribute__((always_inline)) int
queue(struct mely__worker *w, struct mely__worker *self, struct mely__event *ev, unsigned *wake)
{
    struct mely__colorq *cq = mely__cq_of(w->rt, ev->color);

    if (__builtin_expect(cq == NULL, 0) && !(cq = colorq_new(w->rt, w, ev->color)))
        return MELY_ENOMEM;
    *wake |= mely__deliver_all(w, self);
    *wake |= mely__enqueue(w, self, cq, ev);
    return 0;
}

int mely__deliver_post_now(struct mely__rt *rt, struct mely__worker *self, struct mely__event *ev)
{
    return mely__post_now_with(rt, self, ev, queue);
}

/* Copies the run of k events from *ev into o's inbox, as many as fit, and
 * frees them; advances *ev past those. Returns false if some did not fit. */
static bool put_run(struct mely__worker *self, unsigned o, struct mely__event **ev, uint32_t k)
{
    struct mely__inbox *q = self->rt->workers[o].inbox;
    uint32_t pos, n = mely__inbox_reserve(q, k, &pos, &self->head_seen[o]);

    for (uint32_t i = 0; i < n; i++) { /* bounded: the run */
        struct mely__event *next = (*ev)->next;
        mely__inbox_put(q, pos + i, *ev);
        mely__evcache_free(self->rt, &self->evcache, *ev);
        *ev = next;
    }
    return n == k;
}

/* Steps 1-3 of the move protocol. Puts each run of consecutive events for
 * one owner in that owner's inbox, the owner read once per event, in post
 * order, up to the first event that finds its inbox full; wakes the owners
 * after step 3, so that a mover never waits for a system call. Returns the
 * first event left (NULL: all went). */
static struct mely__event *publish(struct mely__worker *self, struct mely__event *ev)
{
    struct mely__rt *rt = self->rt;
    uint64_t touched[MELY_MAX_WORKERS / 64] = {0};

    atomic_fetch_add_explicit(&self->post_seq, 1, memory_order_seq_cst);
    unsigned o = ev ? mely__owner_sc(rt, ev->color) : 0;
    while (ev) { /* bounded: the staged events */
        struct mely__event *last = ev;
        unsigned next_o = o;
        uint32_t k = 1;
        while (last->next) { /* bounded: the staged events */
            next_o = mely__owner_sc(rt, last->next->color);
            if (next_o != o)
                break;
            last = last->next;
            k++;
        }
        touched[o / 64] |= 1ull << (o % 64);
        if (!put_run(self, o, &ev, k))
            break;
        o = next_o;
    }
    atomic_fetch_add_explicit(&self->post_seq, 1, memory_order_release);
    touched[self->index / 64] &= ~(1ull << (self->index % 64));
    for (unsigned i = 0; i < MELY_MAX_WORKERS / 64; i++)
        for (uint64_t b = touched[i]; b; b &= b - 1) /* bounded: 64 bits */
            mely__wake_if_parked(&rt->workers[i * 64 + (unsigned)__builtin_ctzll(b)], self);
    return ev;
}

/* A full inbox: how long a flush waits for its owner to drain, in tries
 * TRY_WAITS backoff waits apart (a yield every 8th try, for workers sharing
 * a CPU), before it queues the rest itself (about 10-50 us). */
enum { FULL_TRIES = 128, TRY_WAITS = 32 };

void mely__deliver_flush(struct mely__worker *self, struct mely__event *chain)
{
    /* What a full inbox does not take waits a little for its owner to drain
     * it (the producer then runs at the consumer's pace, and the consumer's
     * lock and queues stay its own), then goes under the owners' locks: a
     * staged event must never stay behind after the flush, or its poster's
     * color, stolen, could post later events from another worker ahead of
     * it; and a stopped or busy owner must not hold the poster up for long. */
    struct mely__backoff b = mely__backoff_start(8 * TRY_WAITS);

    chain = publish(self, chain);
    for (unsigned tries = 0; chain && tries < FULL_TRIES && !mely__stopping(self->rt); tries++) {
        for (unsigned i = 0; i < TRY_WAITS; i++)
            mely__backoff_wait(&b);
        chain = publish(self, chain);
    }
    mely__flush_locked_with(self, chain, queue);
}

bool mely__deliver_foreign(struct mely__rt *rt, const struct mely__event *ev)
{
    struct mely__worker *w;

    /* Only into a color-queue that exists: the drain cannot fail for it. */
    if (!mely__cq_of(rt, ev->color))
        return false;

    for (;;) { /* again only if the color moved between the read and the lock */
        unsigned o = mely__owner(rt, ev->color);
        w = &rt->workers[o];
        mely__spin_lock(&w->foreign_lock, NULL);
        if (__builtin_expect(mely__owner(rt, ev->color) == o, 1))
            break;
        mely__spin_unlock(&w->foreign_lock);
    }
    uint32_t pos, head_seen = atomic_load_explicit(&w->inbox->head, memory_order_acquire);
    bool room = mely__inbox_reserve(w->inbox, 1, &pos, &head_seen) == 1;
    if (room) {
        mely__inbox_put(w->inbox, pos, ev);
        atomic_fetch_add_explicit(&w->ctr.posts_foreign, 1, memory_order_relaxed);
    }
    mely__spin_unlock(&w->foreign_lock);
    if (room)
        mely__wake_if_parked(w, NULL);
    return room;
}

/* Step b: waits until no worker but `self` is inside a flush that began
 * before the owner changed, nor any other thread inside a post to `from`. */
static void wait_posters(struct mely__worker *from, const struct mely__worker *self)
{
    struct mely__rt *rt = from->rt;

    for (unsigned p = 0; p < rt->nworkers; p++) { /* bounded: the workers */
        struct mely__worker *w = &rt->workers[p];
        if (w == self)
            continue;
        uint32_t s = atomic_load_explicit(&w->post_seq, memory_order_seq_cst);
        struct mely__backoff b = mely__backoff_start(MELY__BACKOFF_SPINS);
        /* bounded by the flush: short unless its thread is preempted */
        while ((s & 1) && atomic_load_explicit(&w->post_seq, memory_order_acquire) == s)
            mely__backoff_wait(&b);
    }
    mely__spin_lock(&from->foreign_lock, self ? (struct mely__counters *)&self->ctr : NULL);
    mely__spin_unlock(&from->foreign_lock);
}

int mely__color_handoff(struct mely__worker *from, struct mely__worker *to, mely_color_t color,
                        struct mely__worker *self, unsigned *wake)
{
    struct mely__rt *rt = from->rt;

    if (from->nreserve < MELY__INBOX_CAP)
        return -1;
    atomic_store_explicit(&rt->owner[color], (uint8_t)to->index, memory_order_seq_cst);
    wait_posters(from, self);
    uint32_t until = atomic_load_explicit(&from->inbox->tail, memory_order_acquire);
    *wake |= drain(from, self, true, true, until);

    struct mely__colorq *cq = mely__cq_of(rt, color);
    if (!cq || cq->count == 0)
        return 0;
    int n = (int)cq->count;
    if (cq->queued)
        mely__coreq_remove(&from->coreq, cq);
    mely__stealq_remove(&from->stealq, cq);
    mely__add_pending(from, -n);
    mely__coreq_insert(&to->coreq, cq);
    mely__stealq_refile(to, cq);
    mely__add_pending(to, n);
    return n;
}

/* Under the owner's lock: whether the color has pending events or is running
 * (a running color-queue stays linked in its core-queue, see worker.c). */
static bool colorq_busy(const struct mely__worker *owner, mely_color_t color)
{
    const struct mely__colorq *cq = mely__cq_of(owner->rt, color);
    return cq && (cq->queued || cq->count != 0 || cq->held != 0);
}

int mely__deliver_move(struct mely__worker *from, struct mely__worker *to, mely_color_t color,
                       struct mely__worker *self, unsigned *wake)
{
    /* Events already published to `from`'s inbox count as pending. */
    *wake |= mely__deliver_all(from, self);
    if (colorq_busy(from, color))
        return MELY_EBUSY;
    int moved = mely__color_handoff(from, to, color, self, wake);
    return moved < 0 ? MELY_ENOMEM : moved;
}

int mely__deliver_init(struct mely__rt *rt)
{
    struct mely__inbox *inboxes =
        aligned_alloc(MELY__CACHELINE, rt->nworkers * sizeof(struct mely__inbox));

    rt->engine_data = inboxes;
    if (!inboxes)
        return MELY_ENOMEM;
    memset(inboxes, 0, rt->nworkers * sizeof(struct mely__inbox));
    for (unsigned i = 0; i < rt->nworkers; i++) {
        struct mely__worker *w = &rt->workers[i];
        w->inbox = &inboxes[i];
        w->head_seen = calloc(rt->nworkers, sizeof(uint32_t));
        if (!w->head_seen)
            return MELY_ENOMEM;
        while (w->nreserve < MELY__INBOX_CAP) { /* bounded: the reserve's size */
            struct mely__event *ev = mely__depot_alloc_one(rt, false);
            if (!ev)
                return MELY_ENOMEM;
            ev->next = w->reserve;
            w->reserve = ev;
            w->nreserve++;
        }
    }
    return 0;
}

void mely__deliver_fini(struct mely__rt *rt)
{
    /* The reserves' events go with the depot's slabs. */
    for (unsigned i = 0; rt->workers && i < rt->nworkers; i++)
        free(rt->workers[i].head_seen);
    free(rt->engine_data);
}

size_t mely__deliver_pending(const struct mely__rt *rt)
{
    size_t n = 0;

    for (size_t c = 0; c < MELY_COLORS + rt->nworkers; c++)
        if (mely__cq_of(rt, (mely_color_t)c))
            n += mely__cq_of(rt, (mely_color_t)c)->count;
    for (unsigned o = 0; o < rt->nworkers; o++) {
        struct mely__worker *w = &rt->workers[o];
        n += atomic_load(&w->inbox->tail) - atomic_load(&w->inbox->head);
    }
    return n;
}
