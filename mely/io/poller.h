/* SPDX-License-Identifier: MIT */
/*
 * io/poller.h: every worker's poller, a libevent event_base (internal; the
 * design is in io/poller.c). The scheduler reaches the I/O layer through
 * the calls below (init, poll, tick, block); the I/O layer reaches the
 * scheduler through posts (post.h), the outbox flush (outbox.h) and the
 * wake-up (park.h).
 */
#ifndef MELY_IO_POLLER_H
#define MELY_IO_POLLER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "mely/io/timer.h"

struct event;
struct event_base;
struct mely__rt;
struct mely__worker;

struct mely__poller {
    struct event_base *base;
    struct event *wake_ev;     /* persistent read event on the worker's
                                  wake-up eventfd (park.c writes it) */
    int timer_fd;              /* timerfd at the next timer deadline: ends a
                                  blocking poll (timer_ev reads it) */
    struct event *timer_ev;
    uint64_t timer_armed;      /* own thread: the deadline timer_fd is set to */
    uint64_t last_poll_ns;     /* own thread: when the base was last polled */
    uint64_t poll_target;      /* own thread: events_run once the events queued
                                  at the last poll have run (io/poller.c) */
    _Atomic uint32_t nwatches; /* armed watches on the base (io/watch.c): a busy
                                  worker polls only if there are some */
};

/* Creates (frees) every worker's poller and timers; each base watches its
 * worker's wake-up eventfd (mely__park_init() made it). mely__pollers_init
 * returns 0, MELY_ENOMEM or a negative errno; it also makes libevent
 * thread-aware, once per process. */
int mely__pollers_init(struct mely__rt *rt);
void mely__pollers_free(struct mely__rt *rt);

/* Between two batches: ends the worker's turn (turnend.h) and polls the
 * base without blocking if MELY_POLL_US passed since the last poll (and the
 * events queued at that poll ran) or 1 ms, and there are watches or work for
 * the turn's end; posts due timers. Own thread only. */
void mely__poller_tick_slow(struct mely__worker *w);

/* Polls the base now without blocking (if it has watches) and posts due
 * timers: an idle worker's poll, which does not end its turn (idle.c ends
 * it before it parks). Own thread only. */
void mely__poller_poll(struct mely__worker *w);

/* Ends the worker's turn (turnend.h): an idle worker's, before it parks.
 * Own thread only. */
void mely__poller_end_turn(struct mely__worker *w);

/* Sleeps in the base until readiness, a wake-up, the next timer or
 * wake_by (monotonic ns; UINT64_MAX: none), then posts due timers. Called
 * by idle.c with `parked` set, its turn ended. Own thread only. */
void mely__poller_block(struct mely__worker *w, uint64_t wake_by);

/* Whether p has armed watches: a busy worker polls only then, an idle one
 * yields while spinning. Any thread (a hint). */
static inline bool mely__poller_watched(const struct mely__poller *p)
{
    return atomic_load_explicit((_Atomic uint32_t *)&p->nwatches, memory_order_relaxed) != 0;
}

/* Between two batches, for worker w whose poller is p, timers t and list of
 * work for its turn's end turn_end (turnend.h): mely__poller_tick_slow() if
 * it has watches, timers or such work; three loads when it has none. Own
 * thread only. */
static inline void mely__poller_tick(struct mely__worker *w, struct mely__poller *p,
                                     struct mely__timers *t, const void *turn_end)
{
    if (mely__poller_watched(p) || mely__timers_next(t) != MELY__NEVER || turn_end)
        mely__poller_tick_slow(w);
}

#endif
