/* spinlock.c: the contended path of the per-core lock (see spinlock.h). */
#include <sched.h>

#include "mely/queue/cycles.h"
#include "mely/queue/spinlock.h"

/* Pauses before yielding: about a microsecond of spinning on current x86. */
enum { SPINS_BEFORE_YIELD = 64 };

void mely__spin_lock_slow(mely__spinlock_t *l, struct mely__counters *c)
{
    uint64_t start = mely__cycles();
    unsigned spins = 0;

    do {
        while (atomic_load_explicit(&l->held, memory_order_relaxed)) {
            if (++spins < SPINS_BEFORE_YIELD) {
                mely__cpu_relax();
            } else {
                spins = 0;
                sched_yield();
            }
        }
    } while (!mely__spin_trylock(l));

    if (c) {
        mely__count(&c->lock_contended, 1);
        mely__count(&c->lock_cycles, mely__cycles() - start);
    }
}
