/* SPDX-License-Identifier: MIT */
/*
 * backoff.h: how a thread waits for another that is inside a short step (a
 * lock's holder, a poster writing the slot it reserved, a flush a mover
 * waits out, a full inbox's owner, a call in progress when a runtime shuts
 * down): it pauses, and every `spins`-th wait yields the CPU instead, in
 * case the thread it waits for is preempted (more workers than CPUs, a
 * loaded machine), since spinning on would burn the time slice that thread
 * needs. One helper, so that the waits cannot drift apart (libuv's
 * uv__async_spin is its one such loop).
 *
 * Each call is one wait; the caller re-checks its condition between calls
 * and bounds its loop. The state is the caller's, on its stack. No
 * scheduler knowledge: the queue and memory layer may use it. Any thread.
 */
#ifndef MELY_BACKOFF_H
#define MELY_BACKOFF_H

#include <sched.h>

#include "mely/queue/cycles.h"

/* Waits per yield by default: 63 pauses, about a microsecond on current x86,
 * then a yield. */
#define MELY__BACKOFF_SPINS 64u

struct mely__backoff {
    unsigned n;     /* waits since the last yield */
    unsigned spins; /* waits per yield, the yield included; >= 1 */
};

static inline struct mely__backoff mely__backoff_start(unsigned spins)
{
    return (struct mely__backoff){.n = 0, .spins = spins};
}

/* One wait: a pause, or, every `spins`-th call, sched_yield(). */
static inline void mely__backoff_wait(struct mely__backoff *b)
{
    if (++b->n < b->spins) {
        mely__cpu_relax();
        return;
    }
    b->n = 0;
    sched_yield();
}

#endif
