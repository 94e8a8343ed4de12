/*
 * deliver.c: how a remote post reaches its owner without touching the owner's
 * queues, and how a color changes owner while posts to it are in flight.
 *
 * The path (Mely engine). A worker's posts to colors of other workers are
 * staged in its outbox (outbox.h) and published once per handler (or per
 * MELY__OUTBOX_MAX events): each run of consecutive events for one owner is
 * pushed into that owner's inbox (inbox.h) with one compare-and-swap. The
 * owner, under its own lock (which only thieves contend), drains its inbox
 * into its color-queues at batch boundaries, before a local post, before it
 * parks, and a thief drains a victim's before it looks for a color. Threads
 * that are not workers push single events into the same inbox. So the
 * owner's color-queues and core-queue are touched only by the owner and,
 * under its lock, by a thief: no poster writes them, and a poster never
 * waits for the owner.
 *
 * Why one inbox per owner and not one SPSC ring per (poster, owner) pair:
 * rings were built first, and the stress test caught what they lose. A
 * generator color posts event #1 to color c from worker X, is stolen by
 * worker Y, and posts #2 to c from Y; the owner drains Y's ring before X's
 * and runs #2 first. Any post that causes another on a different worker
 * (a steal, a handler posting to a color whose handler posts on) can be
 * overtaken that way, since drains read the rings one after the other. One
 * inbox per owner gives every push one place in one total order, which
 * respects causality, for the price of a contended line when many workers
 * post to one owner at the same time. The inbox is unbounded (its memory is
 * the events, which posts allocate anyway), so a post never waits for room
 * and two workers flooding each other cannot deadlock.
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
 *      (seq_cst), push runs of events        is odd, wait until it changes;
 *      into their owner's inbox              then take and drop from's
 *   4. seq[P]++ (even; release)              foreign_lock
 *                                         c. drain from's inbox
 *                                         d. move c's color-queue, with what
 *                                            step c added, to `to`
 *
 * 1-2 and a-b are a store-buffering pair, all sequentially consistent: either
 * P's read in step 2 sees `to` (the event goes to `to`'s inbox, which `to`
 * drains only after step d, behind the queue it receives), or M's read in
 * step b sees P's odd count and waits for step 4, after which step c finds
 * P's event in from's inbox. A flush that starts after M's read sees `to`:
 * its step 1 follows the even value M read, which follows M's store. Threads
 * that are not workers read the owner under the owner's foreign_lock and
 * re-check it, so step b's lock orders them the same way. The wait in step
 * b is short (a flush pushes at most the staged events, without locks or
 * system calls): M spins a little, then yields. No flush takes a worker
 * lock, so M never waits for a flush that waits for M.
 *
 * Self-owned colors. A staged event whose color has moved to the poster
 * itself goes through the poster's own inbox, not straight into its queue:
 * a flush cannot take its own worker's lock (a mover holding it may be
 * waiting at step b for that very flush). A local post drains the inbox
 * first, so it never overtakes a post published before it (post.c).
 */
#include <sched.h>

#include "mely/colormap.h"
#include "mely/cycles.h"
#include "mely/deliver.h"
#include "mely/enqueue.h"

unsigned mely__deliver(struct mely__worker *w, struct mely__worker *self)
{
    struct mely__rt *rt = w->rt;
    struct mely__inbox *q = &w->inbox;
    uint32_t h = atomic_load_explicit(&q->head, memory_order_relaxed), start = h;
    unsigned wake = 0;
    struct mely__event *ev;

    while (h - start < MELY__INBOX_CAP && (ev = mely__inbox_peek(q, h)) != NULL) { /* bounded */
        wake |= mely__enqueue(w, self, mely__cq_of(rt, ev->color), ev);
        h++;
    }
    if (h != start)
        atomic_store_explicit(&q->head, h, memory_order_release);
    return wake;
}

bool mely__deliver_foreign(struct mely__rt *rt, struct mely__event *ev)
{
    struct mely__worker *w;

    for (;;) { /* again only if the color moved between the read and the lock */
        unsigned o = mely__owner(rt, ev->color);
        w = &rt->workers[o];
        mely__spin_lock(&w->foreign_lock, NULL);
        if (__builtin_expect(mely__owner(rt, ev->color) == o, 1))
            break;
        mely__spin_unlock(&w->foreign_lock);
    }
    uint32_t pos, head_seen = atomic_load_explicit(&w->inbox.head, memory_order_acquire);
    bool room = mely__inbox_reserve(&w->inbox, 1, &pos, &head_seen) == 1;
    if (room) {
        mely__inbox_put(&w->inbox, pos, ev);
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
        for (unsigned spins = 0;
             (s & 1) && atomic_load_explicit(&w->post_seq, memory_order_acquire) == s;
             spins++) { /* bounded by the flush: short unless its thread is preempted */
            if (spins < 64)
                mely__cpu_relax();
            else
                sched_yield();
        }
    }
    mely__spin_lock(&from->foreign_lock, self ? (struct mely__counters *)&self->ctr : NULL);
    mely__spin_unlock(&from->foreign_lock);
}

uint32_t mely__color_handoff(struct mely__worker *from, struct mely__worker *to,
                             mely_color_t color, struct mely__worker *self, unsigned *wake)
{
    struct mely__rt *rt = from->rt;

    atomic_store_explicit(&rt->owner[color], (uint8_t)to->index, memory_order_seq_cst);
    wait_posters(from, self);
    *wake |= mely__deliver(from, self);

    struct mely__colorq *cq = mely__cq_of(rt, color);
    if (!cq || cq->count == 0)
        return 0;
    uint32_t n = cq->count;
    if (cq->queued)
        mely__coreq_remove(&from->coreq, cq);
    mely__stealq_remove(&from->stealq, cq);
    mely__add_pending(from, -(int)n);
    mely__coreq_insert(&to->coreq, cq);
    mely__stealq_refile(to, cq);
    mely__add_pending(to, (int)n);
    return n;
}

size_t mely__deliver_pending(const struct mely__rt *rt)
{
    size_t n = 0;

    for (unsigned o = 0; o < rt->nworkers; o++) {
        struct mely__worker *w = &rt->workers[o];
        n += atomic_load(&w->inbox.tail) - atomic_load(&w->inbox.head);
        n += w->outbox.n;
    }
    return n;
}
