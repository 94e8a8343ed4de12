/* SPDX-License-Identifier: MIT */
/*
 * io/poller.h: every worker's poller, a libevent event_base (internal; the
 * design is in io/poller.c). The scheduler reaches the I/O layer only
 * through the calls below (tick, poll, end a turn, block, and three reads:
 * whether there are watches, when the last poll was, whether a timer is
 * due), each given the worker: it never touches the worker's I/O state
 * (io/iostate.h) itself. The I/O layer reaches the scheduler through posts
 * (post.h), the outbox flush (outbox.h) and the wake-up (park.h).
 */
#ifndef MELY_IO_POLLER_H
#define MELY_IO_POLLER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "mely/io/iostate.h"
#include "mely/io/timer.h"
#include "mely/runtime.h"

/* Creates (frees) every worker's poller and timers in rt->io (io/iostate.c
 * calls them); each base watches its worker's wake-up eventfd
 * (mely__park_init() made it). mely__pollers_init returns 0, MELY_ENOMEM or
 * a negative errno; it also makes libevent thread-aware, once per process. */
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

/* Whether w's base has armed watches: a busy worker polls only then, an
 * idle one yields while spinning. Any thread (a hint). */
static inline bool mely__poller_watched(const struct mely__worker *w)
{
    return atomic_load_explicit(&w->io->poller.nwatches, memory_order_relaxed) != 0;
}

/* When w last polled its base (monotonic ns). Own thread only. */
static inline uint64_t mely__poller_last_ns(const struct mely__worker *w)
{
    return w->io->poller.last_poll_ns;
}

/* Whether one of w's timers is due at `now`: the poll that follows posts
 * it. Own thread only. */
static inline bool mely__poller_timer_due(const struct mely__worker *w, uint64_t now)
{
    return mely__timers_next(&w->io->timers) <= now;
}

/* Between two batches, for worker w: mely__poller_tick_slow() if it has
 * work for its turn's end (turnend.h), watches or timers; four loads when
 * it has none (the turn's end, its I/O state, the watch count, the next
 * deadline: nine instructions, as many as when the poller and timers sat in
 * the worker itself and it took three loads). Own thread only. */
static inline void mely__poller_tick(struct mely__worker *w)
{
    struct mely__io_worker *io = w->io;
    /* The hint keeps the nothing-to-do path straight: without it, GCC laid
     * it out with a jump more (ten instructions). */
    if (__builtin_expect(w->turn_end ||
                             atomic_load_explicit(&io->poller.nwatches, memory_order_relaxed) ||
                             mely__timers_next(&io->timers) != MELY__NEVER,
                         0))
        mely__poller_tick_slow(w);
}

#endif
