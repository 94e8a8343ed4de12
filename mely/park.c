/*
 * park.c: what an idle worker does, and how a post wakes it.
 *
 * The wake protocol, in steps:
 *  1. An idle worker first spins for spin_us, watching its pending-event count
 *     and its inbox (no lock, no system call) and, every SPIN_POLL_NS, its
 *     poller: a post or readiness that arrives soon is picked up at the cost
 *     of a cache miss or a non-blocking poll instead of a 15-30 us wake-up.
 *  2. Then, under its lock, it drains its inbox, checks once more that it
 *     has no pending event and no stop is pending, counts itself in
 *     rt->nparked (for thieves' wake-ups: steal.c), sets `parked`, looks at
 *     its inbox one last time, and unlocks.
 *  3. A waker (a flush that published to this worker's inbox, a foreign or
 *     local post, a thief's wake-up, a timer, a stop) reads `parked` after
 *     making its work visible; if it is set, one exchange clears it, and the
 *     waker that cleared it writes the worker's eventfd (park.h's
 *     mely__wake_if_parked, the one wake-up path). Only a parked worker
 *     costs a waker a system call.
 *  4. The worker sleeps in its poller (poller.c): a blocking poll of its
 *     event base, until readiness of one of its watches, its next timer, or
 *     the eventfd. A write between steps 2 and 4 leaves the eventfd readable,
 *     so the poll returns at once and no wake-up is lost.
 * Steps 2 and 3 are a store-buffering pair: the worker stores `parked`, then
 * reads its inbox's tail; a flush reserves in the inbox, then reads `parked`; all
 * sequentially consistent, so at least one of them sees the other. Wakers
 * that queue under the worker's lock (local posts, and the lock-then-check of
 * timer.c) are ordered by the lock itself.
 */
#include <sched.h>

#include "mely/cycles.h"
#include "mely/enqueue.h"
#include "mely/deliver.h"
#include "mely/outbox.h"
#include "mely/park.h"
#include "mely/poller.h"
#include "mely/steal.h"

/* Pauses between two reads of the clock while spinning. */
enum { SPIN_CLOCK_EVERY = 32 };

/* A spinning worker with watches polls them this often (a non-blocking
 * epoll_wait costs well under a microsecond): readiness that arrives while
 * it spins waits at most this long, not the whole spin. */
#define SPIN_POLL_NS 10000u

static bool has_work(struct mely__worker *w)
{
    return atomic_load_explicit(&w->nevents, memory_order_relaxed) != 0 ||
           mely__deliver_ready(w) || mely__stopping(w->rt);
}

/* Step 1. Returns true if work arrived. With more workers than CPUs the spinner
 * yields at every turn, so that a worker with work gets the CPU; so does a
 * worker with watches: a server shares its cores with other processes (its
 * clients, on a small machine), and a spin that keeps the CPU from them
 * costs more than it saves (bench/echo, 10 and 100 connections: 0.74x and
 * 0.87x libevent spinning with pause, 1.05x and 1.01x with sched_yield). */
static bool spin(struct mely__worker *w)
{
    struct mely__rt *rt = w->rt;
    uint64_t deadline = mely__now_ns() + (uint64_t)rt->spin_us * 1000u;

    if (rt->spin_us == 0)
        return has_work(w);
    bool yield = rt->oversubscribed || atomic_load_explicit(&w->io.nwatches, memory_order_relaxed);
    for (;;) {
        for (int i = 0; i < SPIN_CLOCK_EVERY; i++) {
            if (has_work(w))
                return true;
            if (yield)
                sched_yield();
            else
                mely__cpu_relax();
        }
        uint64_t now = mely__now_ns();
        if (now >= deadline)
            return has_work(w);
        if (now - w->io.last_poll_ns >= SPIN_POLL_NS &&
            atomic_load_explicit(&w->io.nwatches, memory_order_relaxed) != 0) {
            mely__poller_poll(w);
            if (has_work(w))
                return true;
        }
    }
}

/* Under w->lock: step 2's last look. True if w parked (it must sleep). */
static bool set_parked(struct mely__worker *w)
{
    atomic_fetch_add_explicit(&w->rt->nparked, 1, memory_order_relaxed);
    atomic_store_explicit(&w->parked, true, memory_order_seq_cst);
    /* mely_stop() stores `stopping`, then wakes: the same pair as a flush. */
    if (!mely__inbox_reserved(w->inbox) &&
        !atomic_load_explicit(&w->rt->stopping, memory_order_seq_cst))
        return true;
    /* A flush published meanwhile. If a waker already cleared the flag, its
     * eventfd write will end the coming poll at once: sleep anyway. */
    if (!atomic_exchange_explicit(&w->parked, false, memory_order_seq_cst))
        return true;
    atomic_fetch_sub_explicit(&w->rt->nparked, 1, memory_order_relaxed);
    return false;
}

/* Steps 2 and 4. */
static void park(struct mely__worker *w)
{
    mely__spin_lock(&w->lock, &w->ctr);
    unsigned wake = mely__deliver(w, w);
    if (atomic_load_explicit(&w->nevents, memory_order_relaxed) != 0 || mely__stopping(w->rt)) {
        mely__spin_unlock(&w->lock);
        mely__enqueue_wake(w, w, wake);
        return;
    }
    uint32_t seen = atomic_load_explicit(&w->wake_seq, memory_order_relaxed);
    bool sleep = set_parked(w);
    mely__spin_unlock(&w->lock);
    mely__enqueue_wake(w, w, wake);
    if (!sleep)
        return;

    mely__count(&w->ctr.parks, 1);
    mely__poller_block(w);

    /* A return without a waker (readiness, a timer): no waker will clear it. */
    if (atomic_exchange_explicit(&w->parked, false, memory_order_seq_cst))
        atomic_fetch_sub_explicit(&w->rt->nparked, 1, memory_order_relaxed);
    if (atomic_load_explicit(&w->wake_seq, memory_order_relaxed) != seen)
        mely__count(&w->ctr.wakeups, 1);
}

static bool poll_now(struct mely__worker *w)
{
    mely__poller_poll(w);
    return has_work(w);
}

/* The idle hook (mely_on_idle); returns true if it posted work here. Its
 * posts to other workers leave before this one sleeps. */
static bool idle_hook(struct mely__worker *w)
{
    struct mely__rt *rt = w->rt;
    if (!rt->idle_fn)
        return false;
    rt->idle_fn(rt->idle_arg);
    if (mely__outbox_pending(&w->outbox))
        mely__outbox_flush(w);
    return has_work(w);
}

/* The poller is read when the worker becomes idle and after it spun; the
 * steal driver runs when the worker becomes idle and again just before it
 * parks (work may have piled up elsewhere while it spun); the idle hook runs
 * last. */
void mely__idle(struct mely__worker *w)
{
    if (poll_now(w) || mely__steal(w) || spin(w) || poll_now(w) || mely__steal(w) ||
        idle_hook(w))
        return;
    park(w);
}

void mely__wake(struct mely__worker *w, struct mely__worker *self)
{
    if (w == self) /* its own poller posted: it is awake */
        return;
    mely__poller_wake(w);
    if (self)
        mely__count(&self->ctr.wakes_sent, 1);
}

void mely__wake_all(struct mely__rt *rt)
{
    struct mely__worker *self = mely__self_in(rt);

    for (unsigned i = 0; i < rt->nworkers; i++)
        mely__wake_if_parked(&rt->workers[i], self);
}
