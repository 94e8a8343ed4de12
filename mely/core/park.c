/* SPDX-License-Identifier: MIT */
/*
 * park.c: the park/wake protocol: how an idle worker sleeps and how every
 * waker wakes it. What the worker tries before it parks (polling, stealing,
 * spinning) is idle.c's; this file is the only one that writes a wake-up.
 *
 * The protocol, in steps:
 *  1. An idle worker polls, steals and spins first (idle.c).
 *  2. Then, under its lock, it drains its inbox, checks once more that it
 *     has no pending event and no stop is pending, counts itself in
 *     rt->nparked (for thieves' wake-ups), sets `parked`, looks at its inbox
 *     one last time, and unlocks (mely__park_set).
 *  3. A waker (a flush that published to this worker's inbox, a foreign or
 *     local post, a post that makes work stealable, a timer set earlier than
 *     the worker's next deadline, a stop) reads `parked` after making its
 *     work visible; if it is set, one exchange clears it (mely__mark_woken),
 *     and the waker that cleared it writes the worker's eventfd
 *     (mely__wake). Only a parked worker costs a waker a system call, and a
 *     worker is woken at most once per park.
 *  4. The worker sleeps in its poller (io/poller.c): a blocking poll of its
 *     event base, which also watches the eventfd, until readiness of one of
 *     its watches, its next timer deadline (read after step 2), or the
 *     eventfd. A write between steps 2 and 4 leaves the eventfd readable, so
 *     the poll returns at once and no wake-up is lost. If it returns with
 *     `parked` still set (readiness, a timer), the worker clears it itself
 *     (mely__park_clear).
 * Steps 2 and 3 are store-buffering pairs, all sequentially consistent, so
 * that at least one side sees the other:
 *  - the worker stores `parked`, then reads its inbox's tail; a flush
 *    reserves in the inbox, then reads `parked`;
 *  - the worker stores `parked`, then (step 4) reads its timers' `next`; a
 *    timer's setter stores `next`, then reads `parked` (io/timer.c);
 *  - mely_stop() stores `stopping`, then reads `parked`.
 * Wakers that queue under the worker's lock (local posts) are ordered by the
 * lock itself.
 */
#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "mely/core/park.h"

void mely__wake(struct mely__worker *w, struct mely__worker *self)
{
    if (w == self) /* it posted to itself from its poller: it is awake */
        return;
    uint64_t one = 1;
    /* EAGAIN means the counter is saturated: a wake-up is pending anyway. */
    while (write(w->wake_fd, &one, sizeof(one)) < 0 && errno == EINTR) /* bounded: EINTR */
        ;
    if (self)
        mely__count(&self->ctr.wakes_sent, 1);
}

void mely__wake_thief(struct mely__rt *rt, struct mely__worker *victim, struct mely__worker *self)
{
    if (atomic_load_explicit(&rt->nparked, memory_order_relaxed) == 0)
        return;
    for (unsigned i = 1; i < rt->nworkers; i++) { /* bounded: one pass over the workers */
        struct mely__worker *w = &rt->workers[(victim->index + i) % rt->nworkers];
        if (mely__mark_woken(w)) {
            mely__wake(w, self);
            return;
        }
    }
}

void mely__wake_all(struct mely__rt *rt)
{
    struct mely__worker *self = mely__self_in(rt);

    for (unsigned i = 0; i < rt->nworkers; i++)
        mely__wake_if_parked(&rt->workers[i], self);
}

bool mely__park_set(struct mely__worker *w)
{
    atomic_fetch_add_explicit(&w->rt->nparked, 1, memory_order_relaxed);
    atomic_store_explicit(&w->parked, true, memory_order_seq_cst);
    if (!w->rt->engine->in_flight(w) &&
        !atomic_load_explicit(&w->rt->stopping, memory_order_seq_cst))
        return true;
    /* A flush published meanwhile, or a stop. If a waker already cleared the
     * flag, its eventfd write will end the coming poll at once: sleep anyway. */
    if (!atomic_exchange_explicit(&w->parked, false, memory_order_seq_cst))
        return true;
    atomic_fetch_sub_explicit(&w->rt->nparked, 1, memory_order_relaxed);
    return false;
}

void mely__park_clear(struct mely__worker *w)
{
    if (atomic_exchange_explicit(&w->parked, false, memory_order_seq_cst))
        atomic_fetch_sub_explicit(&w->rt->nparked, 1, memory_order_relaxed);
}

int mely__park_init(struct mely__rt *rt)
{
    for (unsigned i = 0; i < rt->nworkers; i++) {
        rt->workers[i].wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (rt->workers[i].wake_fd < 0)
            return -errno;
    }
    return 0;
}

void mely__park_free(struct mely__rt *rt)
{
    for (unsigned i = 0; i < rt->nworkers; i++) {
        if (rt->workers[i].wake_fd >= 0)
            close(rt->workers[i].wake_fd);
        rt->workers[i].wake_fd = -1;
    }
}
