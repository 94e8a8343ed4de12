/* SPDX-License-Identifier: MIT */
/*
 * spinlock.h: the per-core lock guarding a worker's color-queues and core-queue.
 *
 * Test-and-test-and-set on a C11 atomic (ThreadSanitizer understands it; inline
 * assembly it would not). The fast path is one exchange. A waiter backs off
 * (backoff.h): it pauses, yielding the CPU every 64th wait, since with more
 * workers than cores the holder may be descheduled, and spinning on would burn
 * the time slice it needs. Only contended acquisitions read the cycle counter, so the
 * uncontended path costs nothing extra; the waiting cycles are charged to the
 * caller's counters (NULL for threads that are not workers).
 * Any thread. Lock order: see runtime.h.
 */
#ifndef MELY_SPINLOCK_H
#define MELY_SPINLOCK_H

#include <stdatomic.h>
#include <stdbool.h>

#include "mely/queue/counters.h"

typedef struct {
    atomic_bool held;
} mely__spinlock_t;

void mely__spin_lock_slow(mely__spinlock_t *l, struct mely__counters *c);

static inline void mely__spin_init(mely__spinlock_t *l)
{
    atomic_init(&l->held, false);
}

static inline bool mely__spin_trylock(mely__spinlock_t *l)
{
    return !atomic_exchange_explicit(&l->held, true, memory_order_acquire);
}

static inline void mely__spin_lock(mely__spinlock_t *l, struct mely__counters *c)
{
    if (__builtin_expect(mely__spin_trylock(l), 1))
        return;
    mely__spin_lock_slow(l, c);
}

static inline void mely__spin_unlock(mely__spinlock_t *l)
{
    atomic_store_explicit(&l->held, false, memory_order_release);
}

#endif
