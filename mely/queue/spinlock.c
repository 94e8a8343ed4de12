/* SPDX-License-Identifier: MIT */
/* spinlock.c: the contended path of the per-core lock (see spinlock.h). */
#include "mely/queue/backoff.h"
#include "mely/queue/cycles.h"
#include "mely/queue/spinlock.h"

void mely__spin_lock_slow(mely__spinlock_t *l, struct mely__counters *c)
{
    uint64_t start = mely__cycles();
    struct mely__backoff b = mely__backoff_start(MELY__BACKOFF_SPINS);

    do {
        while (atomic_load_explicit(&l->held, memory_order_relaxed)) /* bounded: the holder's step */
            mely__backoff_wait(&b);
    } while (!mely__spin_trylock(l));

    if (c) {
        mely__count(&c->lock_contended, 1);
        mely__count(&c->lock_cycles, mely__cycles() - start);
    }
}
